//! The background tasks of a helper connection as this side mirrors them: each
//! stream's output as the helper pushes it (`output`, then `done`), kept with the
//! engine's own collector and retention, and the service that takes the helper's
//! notifications.

use super::super::collector::{Collector, SpillTarget};
use super::super::helper::{
    self, DoneParams, OutputParams, WireCollected, WireError, WireRead, WireSpill,
};
use super::super::ids::TaskId;
use super::super::records::TaskRecords;
use super::super::retention::Retention;
use super::super::{CollectedOutput, ExecError, Spill, StreamRead, TaskInfo, TaskStatus};
use super::lock;
use crate::rpc::{Peer, Service};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// One output stream of a mirrored task: the engine's collector (bound, UTF-8,
/// incremental reads), plus what only the helper knows: drops on its side and the
/// remote spill file.
pub(super) struct Mirror {
    pub(super) collector: Collector,
    /// The helper's own read had lost bytes (they went past its bound before it
    /// sent them); reported by the next local read.
    pub(super) dropped: Mutex<bool>,
    pub(super) spill: Mutex<Spill>,
}

impl Mirror {
    /// A mirror whose bytes also go to `file` here as they arrive (the task's output
    /// on this machine, for a report after a crash; texts name the helper's file).
    pub(super) fn new(max: usize, file: Option<SpillTarget>) -> Self {
        Self {
            collector: Collector::new(max, file),
            dropped: Mutex::new(false),
            spill: Mutex::new(Spill::None),
        }
    }

    pub(super) fn push(&self, r: WireRead) {
        if let Some(spill) = r.spill {
            *lock(&self.spill) = remote_spill(spill);
        }
        if r.dropped {
            *lock(&self.dropped) = true;
        }
        self.collector.push(r.text.as_bytes());
    }

    pub(super) fn read(&self) -> StreamRead {
        let mut r = self.collector.read_new();
        let remote_dropped = std::mem::take(&mut *lock(&self.dropped));
        // The collector has no file of its own: when it (or the helper) dropped
        // bytes of a stream that spilled, the file is the helper's.
        if remote_dropped || (r.dropped && r.spill != Spill::None) {
            r.dropped = true;
            r.spill = match lock(&self.spill).clone() {
                Spill::None => Spill::Unavailable("the helper named no spill file".into()),
                s => s,
            };
        }
        r
    }
}

/// A remote path as an error names it: `host:/path` (a path to open is shown as the
/// host has it, see `remote_spill`).
pub(super) fn on_host(host: &str, path: &Path) -> PathBuf {
    PathBuf::from(format!("{host}:{}", path.display()))
}

pub(super) fn remote_spill(s: WireSpill) -> Spill {
    match s {
        WireSpill::None => Spill::None,
        // The path as the host has it: the model's next command runs there and can
        // open it as it is (a `host:` prefix made it a path no command can open).
        WireSpill::Written(p) => Spill::Written(p),
        WireSpill::Unavailable(r) => Spill::Unavailable(r),
    }
}

pub(super) fn collected(c: WireCollected) -> CollectedOutput {
    CollectedOutput {
        text: c.text,
        truncated: c.truncated,
        spill: remote_spill(c.spill),
        total_bytes: c.total_bytes,
    }
}

pub(super) fn exec_error(e: WireError, host: &str) -> ExecError {
    match e {
        WireError::WorkdirMissing(p) => ExecError::WorkdirMissing(on_host(host, &p)),
        WireError::WorkdirNotDirectory(p) => ExecError::WorkdirNotDirectory(on_host(host, &p)),
        WireError::WorkdirUnusable { path, reason } => ExecError::WorkdirUnusable {
            path: on_host(host, &path),
            reason,
        },
        WireError::Spawn(s) => ExecError::Spawn(s),
        WireError::ShuttingDown => ExecError::ShuttingDown,
        WireError::Other(s) => ExecError::Remote(s),
    }
}

/// A background task as the local side knows it.
pub(super) struct RTask {
    pub(super) key: u64,
    /// The connection it runs on; a later one never hears of it.
    pub(super) generation: u64,
    pub(super) command: String,
    pub(super) workdir: PathBuf,
    pub(super) scope: Option<String>,
    pub(super) started_at: SystemTime,
    pub(super) stdout: Mirror,
    pub(super) stderr: Mirror,
    pub(super) state: Mutex<RState>,
    /// Cancelled once the status is final.
    pub(super) finished: CancellationToken,
}

pub(super) struct RState {
    /// Set once the helper accepted the task (ids are given to started tasks only).
    pub(super) id: Option<TaskId>,
    pub(super) status: TaskStatus,
    /// The completion went out (exactly once, T14).
    pub(super) announced: bool,
}

impl RTask {
    pub(super) fn info(&self) -> Option<TaskInfo> {
        let s = lock(&self.state);
        let id = s.id?;
        Some(TaskInfo {
            id,
            command: self.command.clone(),
            workdir: self.workdir.clone(),
            scope: self.scope.clone(),
            status: s.status,
            started_at: self.started_at,
        })
    }
}

/// What the client and its connections' services share.
pub(super) struct Shared {
    pub(super) host: String,
    /// Task number -> task, for the seam's calls by id.
    pub(super) tasks: Mutex<BTreeMap<u64, Arc<RTask>>>,
    /// Key -> task, for the helper's notifications (a task has a key before it
    /// has an id).
    pub(super) by_key: Mutex<HashMap<u64, Arc<RTask>>>,
    pub(super) retention: Mutex<Retention>,
    pub(super) completions: Mutex<Option<mpsc::UnboundedSender<TaskInfo>>>,
    /// Where the mirrors' files go (`outfiles`), here.
    pub(super) spill_dir: PathBuf,
    /// Set once the daemon recovered (`SshExecutor::recover`): each task is recorded
    /// while it runs, so the next daemon reports it if this one dies.
    pub(super) records: std::sync::OnceLock<TaskRecords>,
    /// Run number -> who watches its output live.
    pub(super) watches: Mutex<HashMap<u64, super::super::OutputWatch>>,
}

impl Shared {
    /// Makes a task's status final, books its tails, and announces it when it has
    /// its id (else `started` does, once it has).
    pub(super) fn finish(&self, task: &Arc<RTask>, status: TaskStatus) {
        if task.finished.is_cancelled() {
            return;
        }
        task.stdout.collector.close();
        task.stderr.collector.close();
        let heap = task.stdout.collector.heap_bytes() + task.stderr.collector.heap_bytes();
        let release = {
            let mut book = lock(&self.retention);
            let mut s = lock(&task.state);
            s.status = status;
            match s.id {
                Some(id) => book.finished(id.number(), heap),
                None => Vec::new(),
            }
        };
        for number in release {
            let old = lock(&self.tasks).get(&number).cloned();
            if let Some(old) = old {
                old.stdout.collector.release();
                old.stderr.collector.release();
            }
        }
        task.finished.cancel();
        lock(&self.by_key).remove(&task.key);
        if let (Some(records), Some(id)) = (self.records.get(), lock(&task.state).id) {
            records.remove(id);
        }
        self.announce(task);
    }

    pub(super) fn announce(&self, task: &RTask) {
        let info = {
            let mut s = lock(&task.state);
            if s.announced || !s.status.is_finished() || s.id.is_none() {
                return;
            }
            s.announced = true;
            drop(s);
            task.info()
        };
        if let Some(info) = info
            && let Some(tx) = lock(&self.completions).as_ref()
        {
            let _ = tx.send(info);
        }
    }

    /// The connection `generation` is gone: its running tasks are lost.
    pub(super) fn lost(&self, generation: u64) {
        let lost: Vec<Arc<RTask>> = lock(&self.by_key)
            .values()
            .filter(|t| t.generation == generation)
            .cloned()
            .collect();
        for task in lost {
            task.stderr.collector.push(
                format!(
                    "dsh: lost the connection to ssh host {}; the command is counted as killed \
                     (the dsh helper there ends its processes)\n",
                    self.host
                )
                .as_bytes(),
            );
            self.finish(&task, TaskStatus::Killed { signal: None });
        }
    }
}

/// The service of one helper connection: takes the helper's notifications.
pub(super) struct ClientService {
    pub(super) shared: Arc<Shared>,
    pub(super) generation: u64,
    pub(super) peer: Mutex<Option<tokio::sync::oneshot::Sender<Peer>>>,
}

impl Service for ClientService {
    fn methods(&self) -> jsonrpsee::Methods {
        jsonrpsee::Methods::new()
    }

    fn opened(&self, peer: &Peer) {
        if let Some(tx) = lock(&self.peer).take() {
            let _ = tx.send(peer.clone());
        }
    }

    fn notification(&self, _peer: &Peer, method: &str, params: Option<Value>) {
        let Some(params) = params else { return };
        match method {
            "output" => {
                let Ok(p) = serde_json::from_value::<OutputParams>(params) else {
                    tracing::warn!("malformed output notification from the helper");
                    return;
                };
                let task = lock(&self.shared.by_key).get(&p.key).cloned();
                if let Some(task) = task {
                    task.stdout.push(p.stdout);
                    task.stderr.push(p.stderr);
                }
            }
            "run_output" => {
                let Ok(p) = serde_json::from_value::<helper::RunOutputParams>(params) else {
                    tracing::warn!("malformed run_output notification from the helper");
                    return;
                };
                let watch = lock(&self.shared.watches).get(&p.run).cloned();
                if let Some(watch) = watch {
                    watch(p.stream, p.data.as_bytes());
                }
            }
            "done" => {
                let Ok(p) = serde_json::from_value::<DoneParams>(params) else {
                    tracing::warn!("malformed done notification from the helper");
                    return;
                };
                let task = lock(&self.shared.by_key).get(&p.key).cloned();
                if let Some(task) = task {
                    self.shared.finish(&task, p.status.into());
                }
            }
            other => tracing::debug!(method = other, "ignored helper notification"),
        }
    }

    fn closed(&self, _peer: &Peer) {
        self.shared.lost(self.generation);
    }
}

/// Removes a run's watch when dropped.
pub(super) struct Unwatch<'a>(pub(super) &'a Shared, pub(super) u64);

impl Drop for Unwatch<'_> {
    fn drop(&mut self) {
        lock(&self.0.watches).remove(&self.1);
    }
}
