//! Task records: what the daemon keeps on disk of each background task while it runs,
//! so that the next daemon on the state directory can answer for a task this one could
//! not finish (a crash, the OOM killer, SIGKILL).
//!
//! One JSON file per task, `state_dir/tasks/bash-N.json` (0600 in a 0700 directory),
//! written whole (a temporary file renamed over it). The engine writes it once the
//! task's process exists and removes it when the task's status becomes final, so
//! after a clean shutdown the directory holds no `running` record. At start,
//! [`ProcessExecutor::recover`](super::ProcessExecutor) takes the records no live
//! daemon answers for: a `running` one's processes are ended (by its mark, as the
//! stale sweep does) and it becomes `lost` with [`LOST_REASON`]; a `lost` one is
//! served again. A record of a newer [`RECORD_VERSION`] is left alone.
//!
//! The record is meant for anyone who must find a task from outside the process that
//! runs it (a hand-over to a new daemon, retention deciding which output files are
//! still written): everything needed to find its processes and its output is here.

use super::TaskId;
use crate::fsutil::{ensure_private_dir, private_file};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The format of [`TaskRecord`] this build writes and reads.
pub const RECORD_VERSION: u32 = 1;

/// Why a task is `lost`: the daemon that ran it ended without finishing it.
pub const LOST_REASON: &str = "the daemon stopped while it ran";

/// One background task as it is kept on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRecord {
    /// [`RECORD_VERSION`] when written.
    pub version: u32,
    pub id: TaskId,
    /// The scope it runs under (opaque to the executor; dsh's is the owning session).
    pub scope: Option<String>,
    pub command: String,
    pub workdir: PathBuf,
    /// Milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// The executor kind that ran it (`local`, `sandbox`, `ssh`).
    pub executor: String,
    /// The files its streams are written to from their first byte (`outfiles`).
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// The host process's pid: also its process group and session id, since every
    /// command leads a session of its own. 0 when no process of it runs on this
    /// machine (the ssh helper's tasks, whose helper ends them with its channel).
    pub pid: i32,
    /// Its processes' `DSH_TASK_MARK` (`procs`): what finds them however they
    /// detached. Empty with pid 0.
    pub mark: String,
    /// The daemon process that answers for it (`<pid>.<start time>`, as in marks).
    pub held_by: String,
    pub state: RecordState,
}

/// Whether a recorded task still runs, as far as the record knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RecordState {
    /// Running under `held_by`.
    Running,
    /// Its daemon ended while it ran; found by the next one, which ended what was
    /// left of it.
    Lost {
        reason: String,
        #[serde(rename = "lostAtMs")]
        lost_at_ms: u64,
    },
}

/// The records of one state directory.
#[derive(Debug, Clone)]
pub struct TaskRecords {
    dir: PathBuf,
}

impl TaskRecords {
    /// The records under `state_dir/tasks`.
    pub fn new(state_dir: &Path) -> Self {
        Self {
            dir: Self::dir(state_dir),
        }
    }

    /// Where the records of `state_dir` are.
    pub fn dir(state_dir: &Path) -> PathBuf {
        state_dir.join("tasks")
    }

    fn path(&self, id: TaskId) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Writes `record` whole: a reader sees the old record or the new one.
    pub fn save(&self, record: &TaskRecord) -> std::io::Result<()> {
        ensure_private_dir(&self.dir)?;
        let bytes = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        let path = self.path(record.id);
        let tmp = self
            .dir
            .join(format!(".{}.json.{}", record.id, std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let mut file = private_file().write(true).create_new(true).open(&tmp)?;
        file.write_all(&bytes)?;
        drop(file);
        std::fs::rename(&tmp, &path)
    }

    /// Forgets task `id` (it finished).
    pub fn remove(&self, id: TaskId) {
        if let Err(e) = std::fs::remove_file(self.path(id))
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(%id, "cannot remove the task's record: {e}");
        }
    }

    /// Every record this build can read, by id. Others are left where they are, with
    /// a log line.
    pub fn load_all(&self) -> Vec<TaskRecord> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut records = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if stem.parse::<TaskId>().is_err() {
                continue;
            }
            let read = crate::fsutil::open_regular(&path, false).and_then(|f| {
                serde_json::from_reader::<_, TaskRecord>(std::io::BufReader::new(f))
                    .map_err(std::io::Error::other)
            });
            match read {
                Ok(r) if r.version > RECORD_VERSION => tracing::warn!(
                    path = %path.display(),
                    version = r.version,
                    "a task record of a newer dsh; left alone"
                ),
                Ok(r) => records.push(r),
                Err(e) => tracing::warn!(path = %path.display(), "unreadable task record: {e}"),
            }
        }
        records.sort_by_key(|r| r.id);
        records
    }

    /// The output files of the tasks recorded as running: what no retention may
    /// remove (a foreground run's spill is written only while its call runs, and
    /// under a name no record holds: see `outfiles`).
    pub fn running_files(&self) -> Vec<PathBuf> {
        self.load_all()
            .into_iter()
            .filter(|r| r.state == RecordState::Running)
            .flat_map(|r| [r.stdout, r.stderr])
            .collect()
    }

    /// Holds the records for one recovery at a time (two executors of one daemon, or
    /// two daemons starting on one state directory).
    pub fn lock(&self) -> std::io::Result<Flock<std::fs::File>> {
        ensure_private_dir(&self.dir)?;
        let file = private_file()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.dir.join(".lock"))?;
        Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| std::io::Error::from(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: u64) -> TaskRecord {
        TaskRecord {
            version: RECORD_VERSION,
            id: TaskId::new(n),
            scope: Some("s1".into()),
            command: "sleep 1".into(),
            workdir: "/tmp".into(),
            started_at_ms: 1,
            executor: "local".into(),
            stdout: "/s/bash-1.stdout".into(),
            stderr: "/s/bash-1.stderr".into(),
            pid: 42,
            mark: "tag:1.2:abc:73/1".into(),
            held_by: "1.2".into(),
            state: RecordState::Running,
        }
    }

    #[test]
    fn records_are_saved_whole_read_back_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let records = TaskRecords::new(dir.path());
        assert!(records.load_all().is_empty());
        records.save(&record(2)).unwrap();
        let mut lost = record(10);
        lost.state = RecordState::Lost {
            reason: LOST_REASON.into(),
            lost_at_ms: 5,
        };
        records.save(&lost).unwrap();
        records.save(&lost).unwrap();
        assert_eq!(records.load_all(), vec![record(2), lost.clone()]);
        assert_eq!(
            records.running_files(),
            [record(2).stdout, record(2).stderr]
        );
        let text = std::fs::read_to_string(dir.path().join("tasks/bash-10.json")).unwrap();
        assert!(
            text.contains(r#""id":"bash-10""#) && text.contains(r#""kind":"lost""#),
            "{text}"
        );
        records.remove(TaskId::new(2));
        records.remove(TaskId::new(2));
        assert_eq!(records.load_all(), vec![lost]);
        // Nothing else in the directory is taken for a record.
        std::fs::write(dir.path().join("tasks/notes.json"), "{}").unwrap();
        std::fs::write(dir.path().join("tasks/bash-3.json"), "torn").unwrap();
        let mut newer = record(4);
        newer.version = RECORD_VERSION + 1;
        records.save(&newer).unwrap();
        assert_eq!(records.load_all().len(), 1);
        let _held = records.lock().unwrap();
    }
}
