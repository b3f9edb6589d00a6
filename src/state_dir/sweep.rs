//! The spill sweep on disk: lists the spill files, gathers which are in use, asks
//! [`retention::decide`](super::retention::decide), removes, and leaves a tombstone
//! for each removed file so a model that asks for it later is told why it is gone.
//!
//! Tombstones (`state_dir/spill-removed.jsonl`, one line per removed file) rather than
//! deciding from the name and the config: only the record knows whether the age or
//! the size limit took a file (and which limit was in force then), and that a path
//! was removed at all rather than never written. They are kept for as long as the age
//! limit (at least a day) after the removal, so the file itself stays bounded; a path
//! asked for past that gets the plainer "no longer in the state directory".

use super::retention::{self, Reason, SpillFile, SpillLimits};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The tombstone file's name in the state directory.
pub const TOMBSTONES: &str = "spill-removed.jsonl";

/// Tombstones kept at most (the newest), whatever their age: 100 bytes each.
const MAX_TOMBSTONES: usize = 200_000;

/// How long after its last load a session's spill files are kept whatever their age.
pub const RECENT_LOAD: Duration = Duration::from_secs(86_400);

/// The file (in the state directory) that remembers when each session was last
/// opened, so a restarted daemon and `dsh gc` without one keep what it names.
pub const LOADS: &str = "session-loads.json";

/// When each session was last opened, from [`LOADS`] (none if absent or unreadable).
pub fn read_loads(state_dir: &Path) -> HashMap<String, SystemTime> {
    let Ok(text) = std::fs::read_to_string(state_dir.join(LOADS)) else {
        return HashMap::new();
    };
    let Ok(ms) = serde_json::from_str::<HashMap<String, u64>>(&text) else {
        return HashMap::new();
    };
    ms.into_iter()
        .map(|(id, at)| (id, UNIX_EPOCH + Duration::from_millis(at)))
        .collect()
}

/// Writes [`LOADS`] whole (a fresh 0600 file renamed over).
pub fn write_loads(state_dir: &Path, loads: &HashMap<String, SystemTime>) -> io::Result<()> {
    let ms: HashMap<&str, u64> = loads
        .iter()
        .map(|(id, at)| (id.as_str(), self::ms(*at)))
        .collect();
    let text = serde_json::to_string(&ms).map_err(io::Error::other)?;
    replace_file(state_dir, LOADS, text.as_bytes())
}

/// Writes `name` in `dir` whole: a fresh 0600 file renamed over it.
fn replace_file(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut file = crate::fsutil::private_file()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    file.write_all(bytes)?;
    drop(file);
    std::fs::rename(&tmp, dir.join(name))
}

/// The notes for the spill files a command line names that are gone: each
/// `[PATH: removed by retention (...)]`. Words are split where the shell would end
/// a path (spaces, quotes, redirections, separators); only words naming a file in
/// a directory called `spill` are looked at, so most commands cost one scan.
pub fn removed_notes_in(command: &str) -> Vec<String> {
    if !command.contains("/spill/") {
        return Vec::new();
    }
    let mut notes: Vec<String> = command
        .split(|c: char| c.is_whitespace() || "'\"<>|;&()`=".contains(c))
        .filter(|word| word.contains("/spill/"))
        .filter_map(|word| removed_note(Path::new(word)).map(|note| format!("[{word}: {note}]")))
        .collect();
    notes.dedup();
    notes
}

/// Whether a name in the spill directory is a spill file the sweep may judge; defined
/// beside the names themselves (`exec::outfiles`), which the executor's file access
/// reads too.
pub use crate::exec::outfiles::is_spill_file;

/// One removed (or, in a dry run, removable) spill file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    pub path: PathBuf,
    pub bytes: u64,
    pub reason: Reason,
}

/// What one sweep saw and did.
#[derive(Debug, Default)]
pub struct SpillSweep {
    /// Spill files found, and their bytes (before any removal).
    pub files: usize,
    pub bytes: u64,
    /// When the limits were reached (something was due), the files kept because they
    /// are in use; 0 when nothing was due (nobody was asked).
    pub in_use: usize,
    pub removed: Vec<Removal>,
}

/// Every spill file in `dir` (regular files only, never following a link). A missing
/// directory has none.
pub fn list_spill_files(dir: &Path) -> io::Result<Vec<SpillFile>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !is_spill_file(&name) {
            continue;
        }
        // `DirEntry::metadata` is an fstatat without following links: one call per
        // file, the whole cost of the sweep's walk.
        let Ok(meta) = entry.metadata() else {
            continue; // removed meanwhile
        };
        if !meta.file_type().is_file() {
            continue;
        }
        files.push(SpillFile {
            name,
            bytes: meta.len(),
            modified: meta.modified().unwrap_or(UNIX_EPOCH),
        });
    }
    Ok(files)
}

/// The names of the files in `spill_dir` this process holds open: a stream's spill
/// file stays open while the stream runs (foreground or background), so what is open
/// is what is being written, whichever executor writes it.
pub fn open_by_this_process(spill_dir: &Path) -> HashSet<String> {
    let canonical = std::fs::canonicalize(spill_dir).unwrap_or_else(|_| spill_dir.to_path_buf());
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return HashSet::new();
    };
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| name_in(&target, &[spill_dir, &canonical]))
        .collect()
}

/// The file name of `path` when it lies directly in one of `dirs`.
pub fn name_in(path: &Path, dirs: &[&Path]) -> Option<String> {
    let parent = path.parent()?;
    if !dirs.contains(&parent) {
        return None;
    }
    path.file_name()?.to_str().map(str::to_string)
}

/// The names of the spill files that tasks recorded as running write
/// ([`TaskRecords::running_files`](crate::exec::records::TaskRecords::running_files)):
/// the records of every daemon on `state_dir`, whether it has a socket to ask or not.
/// A record in the running state whose daemon died keeps its files too, until the next
/// daemon's recovery marks it lost: better a file kept a while than output a task still
/// writes removed.
pub fn written_by_recorded_tasks(state_dir: &Path) -> HashSet<String> {
    let spill_dir = state_dir.join("spill");
    let canonical = std::fs::canonicalize(&spill_dir).unwrap_or_else(|_| spill_dir.clone());
    crate::exec::records::TaskRecords::new(state_dir)
        .running_files()
        .iter()
        .filter_map(|p| name_in(p, &[&spill_dir, &canonical]))
        .collect()
}

/// The spill files named (in a result's `spills`) by the sessions used in the last
/// day: a log written in that time (its mtime), or a session loaded then (`loads`,
/// by id). A model in such a session may still ask for any of them.
pub fn named_by_recent_sessions(
    state_dir: &Path,
    loads: &HashMap<String, SystemTime>,
    now: SystemTime,
) -> HashSet<String> {
    let spill_dir = state_dir.join("spill");
    let canonical = std::fs::canonicalize(&spill_dir).unwrap_or_else(|_| spill_dir.clone());
    let recent = |t: SystemTime| now.duration_since(t).unwrap_or_default() <= RECENT_LOAD;
    let mut names = HashSet::new();
    let Ok(logs) = std::fs::read_dir(crate::store::sessions_dir(state_dir)) else {
        return names;
    };
    for log in logs.flatten() {
        let path = log.path();
        let id = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        let written = log.metadata().and_then(|m| m.modified()).ok();
        let loaded = loads.get(&id).copied();
        if !written.into_iter().chain(loaded).any(recent) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        // Only a result line can name spill files; the rest is not parsed.
        for line in text.lines().filter(|l| l.contains("\"spills\"")) {
            let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let Some(spills) = event.get("spills").and_then(|s| s.as_array()) else {
                continue;
            };
            names.extend(
                spills
                    .iter()
                    .filter_map(|p| p.as_str())
                    .filter_map(|p| name_in(Path::new(p), &[&spill_dir, &canonical])),
            );
        }
    }
    names
}

/// Sweeps `spill_dir` under `limits`. `in_use` is asked after the listing, so a file
/// whose writer started meanwhile is either not listed or known to be in use, and
/// only when the limits would remove something: keeping files can only remove fewer,
/// so with nothing due the sweep is the walk and one pass (no session log is read).
/// With `dry_run`, nothing is removed and no tombstone written.
pub fn sweep_spill(
    spill_dir: &Path,
    limits: SpillLimits,
    in_use: impl FnOnce() -> HashSet<String>,
    now: SystemTime,
    dry_run: bool,
) -> io::Result<SpillSweep> {
    let files = list_spill_files(spill_dir)?;
    let due = retention::decide(&files, &HashSet::new(), limits, now);
    let (decided, kept) = if due.is_empty() {
        (due, 0)
    } else {
        let keep_names = in_use();
        let keep: HashSet<&str> = keep_names.iter().map(String::as_str).collect();
        // Every listed file kept, not only those the limits reached first: once a kept
        // file stands in the way, newer ones are judged in its place, and a kept one
        // among those is kept as much (else "N kept" and what was removed disagree).
        let kept = files
            .iter()
            .filter(|f| keep.contains(f.name.as_str()))
            .count();
        (retention::decide(&files, &keep, limits, now), kept)
    };
    let mut sweep = SpillSweep {
        files: files.len(),
        bytes: files.iter().map(|f| f.bytes).sum(),
        in_use: kept,
        removed: Vec::with_capacity(decided.len()),
    };
    for (i, reason) in decided {
        let file = &files[i];
        let path = spill_dir.join(&file.name);
        if !dry_run {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    tracing::warn!(path = %path.display(), "spill file not removed: {e}");
                    continue;
                }
            }
        }
        sweep.removed.push(Removal {
            path,
            bytes: file.bytes,
            reason,
        });
    }
    Ok(sweep)
}

/// One tombstone line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Tombstone {
    name: String,
    removed_at_ms: u64,
    #[serde(flatten)]
    reason: Reason,
}

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Adds a tombstone per removal and drops those older than `keep_for` (at least a
/// day), the file written whole (a fresh 0600 file renamed over).
pub fn record_tombstones(
    state_dir: &Path,
    removed: &[Removal],
    keep_for: Duration,
    now: SystemTime,
) -> io::Result<()> {
    let path = state_dir.join(TOMBSTONES);
    let old = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    if removed.is_empty() && old.is_empty() {
        return Ok(());
    }
    let oldest = ms(now).saturating_sub(keep_for.max(RECENT_LOAD).as_millis() as u64);
    let mut lines: Vec<String> = old
        .lines()
        .filter(|l| serde_json::from_str::<Tombstone>(l).is_ok_and(|t| t.removed_at_ms >= oldest))
        .map(str::to_string)
        .collect();
    for r in removed {
        let Some(name) = r.path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let stone = Tombstone {
            name: name.to_string(),
            removed_at_ms: ms(now),
            reason: r.reason,
        };
        lines.push(serde_json::to_string(&stone).map_err(io::Error::other)?);
    }
    let skip = lines.len().saturating_sub(MAX_TOMBSTONES);
    let mut text = lines[skip..].join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    if text == old {
        return Ok(());
    }
    replace_file(state_dir, TOMBSTONES, text.as_bytes())
}

/// What to tell a model that asks for `path` when it is a spill file that is gone:
/// `removed by retention (older than 14 days)` from its tombstone, or, past the
/// tombstones' own life, that it is no longer in the state directory. `None` when the
/// path exists or is no spill file (the caller's own error stands).
pub fn removed_note(path: &Path) -> Option<String> {
    let spill_dir = path.parent()?;
    if spill_dir.file_name()? != "spill" {
        return None;
    }
    let name = path.file_name()?.to_str()?;
    if !is_spill_file(name) || std::fs::symlink_metadata(path).is_ok() {
        return None;
    }
    let state_dir = spill_dir.parent()?;
    let text = std::fs::read_to_string(state_dir.join(TOMBSTONES)).ok();
    let stone = text.as_deref().and_then(|text| {
        text.lines()
            .rev()
            .filter(|l| l.contains(name))
            .filter_map(|l| serde_json::from_str::<Tombstone>(l).ok())
            .find(|t| t.name == name)
    });
    Some(match stone {
        Some(t) => format!("removed by retention ({})", t.reason),
        // A spill directory with a tombstone file is dsh's: the file went with an
        // older sweep whose record has expired too.
        None if text.is_some() => {
            "removed by retention (no longer in the state directory)".to_string()
        }
        None => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> SpillLimits {
        SpillLimits {
            max_age_days: 14,
            max_bytes: 1 << 30,
        }
    }

    fn set_age(path: &Path, days: u64, now: SystemTime) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(now - Duration::from_secs(days * 86_400))
            .unwrap();
    }

    /// Issue 42 (part 3): four files past `max_bytes`, the three oldest in use and the
    /// newest not, then all four in use. The count is every kept file, so what a sweep
    /// says ("N kept in use") and what it removes agree: before, both sweeps said "3
    /// kept", the first removing one and the second none, though a fourth was kept.
    #[test]
    fn past_max_bytes_the_kept_count_matches_what_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path();
        let now = SystemTime::now();
        for (name, days) in [("a", 4), ("b", 3), ("c", 2), ("d", 1)] {
            std::fs::write(spill.join(name), [b'x'; 100]).unwrap();
            set_age(&spill.join(name), days, now);
        }
        let tight = SpillLimits {
            max_age_days: 10,
            max_bytes: 250,
        };
        let kept = |names: &[&str]| {
            let set: HashSet<String> = names.iter().map(|n| n.to_string()).collect();
            move || set
        };
        let some = sweep_spill(spill, tight, kept(&["a", "b", "c"]), now, true).unwrap();
        let removed: Vec<_> = some.removed.iter().map(|r| r.path.clone()).collect();
        assert_eq!((some.in_use, removed), (3, vec![spill.join("d")]));
        let all = sweep_spill(spill, tight, kept(&["a", "b", "c", "d"]), now, true).unwrap();
        assert_eq!((all.files, all.in_use, all.removed.len()), (4, 4, 0));
        // The real run does what the dry run said.
        let done = sweep_spill(spill, tight, kept(&["a", "b", "c"]), now, false).unwrap();
        assert_eq!((done.in_use, done.removed.len()), (3, 1));
        assert!(!spill.join("d").exists() && spill.join("a").exists());
    }

    #[test]
    fn a_swept_file_leaves_a_tombstone_that_names_the_reason() {
        let state = tempfile::tempdir().unwrap();
        let spill = state.path().join("spill");
        std::fs::create_dir(&spill).unwrap();
        let now = SystemTime::now();
        for (name, days) in [("old.stdout", 20), ("new.stdout", 1), ("busy.stdout", 30)] {
            std::fs::write(spill.join(name), "x").unwrap();
            set_age(&spill.join(name), days, now);
        }
        std::os::unix::fs::symlink("/etc/hostname", spill.join("link")).unwrap();
        let busy = || HashSet::from(["busy.stdout".to_string()]);
        let dry = sweep_spill(&spill, limits(), busy, now, true).unwrap();
        assert_eq!(dry.removed.len(), 1);
        assert!(spill.join("old.stdout").exists());
        let done = sweep_spill(&spill, limits(), busy, now, false).unwrap();
        assert_eq!((done.files, done.in_use), (3, 1));
        // Nothing due: the in-use set is not even asked for.
        let lenient = SpillLimits {
            max_age_days: 100,
            ..limits()
        };
        let idle = sweep_spill(&spill, lenient, || unreachable!(), now, false).unwrap();
        assert_eq!((idle.files, idle.in_use, idle.removed.len()), (2, 0, 0));
        assert_eq!(done.removed[0].path, spill.join("old.stdout"));
        assert!(!spill.join("old.stdout").exists());
        assert!(spill.join("busy.stdout").exists() && spill.join("link").exists());
        record_tombstones(
            state.path(),
            &done.removed,
            Duration::from_secs(14 * 86_400),
            now,
        )
        .unwrap();
        assert_eq!(
            removed_note(&spill.join("old.stdout")).unwrap(),
            "removed by retention (older than 14 days)"
        );
        assert_eq!(removed_note(&spill.join("new.stdout")), None);
        let old = spill.join("old.stdout");
        assert_eq!(
            removed_notes_in(&format!("tail -n 5 '{}' | grep x", old.display())),
            [format!(
                "[{}: removed by retention (older than 14 days)]",
                old.display()
            )]
        );
        assert!(removed_notes_in(&format!("cat {}/new.stdout", spill.display())).is_empty());
        assert!(
            removed_note(&spill.join("never.stdout"))
                .unwrap()
                .ends_with("(no longer in the state directory)")
        );
        assert_eq!(removed_note(&state.path().join("other/x")), None);
        // Past their own life, tombstones go.
        let later = now + Duration::from_secs(15 * 86_400);
        record_tombstones(state.path(), &[], Duration::from_secs(14 * 86_400), later).unwrap();
        assert_eq!(
            std::fs::read_to_string(state.path().join(TOMBSTONES)).unwrap(),
            ""
        );
    }

    #[test]
    fn recent_sessions_name_their_spill_files() {
        let state = tempfile::tempdir().unwrap();
        let sessions = crate::store::sessions_dir(state.path());
        std::fs::create_dir_all(&sessions).unwrap();
        let spill = state.path().join("spill");
        let line = |name: &str| {
            serde_json::json!({"type": "tool_result", "spills": [spill.join(name)]}).to_string()
        };
        let now = SystemTime::now();
        for (id, file) in [
            ("recent", "a.stdout"),
            ("stale", "b.stdout"),
            ("loaded", "c.stdout"),
        ] {
            let log = sessions.join(format!("{id}.jsonl"));
            std::fs::write(&log, format!("{{\"header\":1}}\n{}\n", line(file))).unwrap();
            if id != "recent" {
                set_age(&log, 3, now);
            }
        }
        let loads = HashMap::from([("loaded".to_string(), now - Duration::from_secs(3600))]);
        write_loads(state.path(), &loads).unwrap();
        let loads = read_loads(state.path());
        let names = named_by_recent_sessions(state.path(), &loads, now);
        let mut names: Vec<_> = names.into_iter().collect();
        names.sort();
        assert_eq!(names, ["a.stdout", "c.stdout"]);
    }

    #[test]
    fn files_this_process_holds_open_are_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let held = std::fs::File::create(dir.path().join("held")).unwrap();
        std::fs::write(dir.path().join("closed"), "x").unwrap();
        let open = open_by_this_process(dir.path());
        assert!(
            open.contains("held") && !open.contains("closed"),
            "{open:?}"
        );
        drop(held);
    }
}
