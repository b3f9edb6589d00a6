//! The state directory stays bounded (`[state]`, issue 32): spill files removed by
//! age and total size, never one in use; `audit.jsonl` and `daemon.log` rotated by
//! size ([`rotate`]); what the directory holds per kind, for `dsh status`.
//!
//! - [`retention`]: which spill files go, a pure function.
//! - [`sweep`]: the spill directory on disk, the files in use, tombstones.
//! - [`rotate`]: size-rotated append-only files and reading them back in order.
//! - [`StateKeeper`]: the daemon's side: the limits in force, the sessions loaded
//!   recently, the executor to ask which files running tasks write, the periodic
//!   sweep (on a thread of its own, never on the async workers) and `dsh gc`.
//!
//! `dsh gc` without a daemon on the socket calls [`collect_alone`] on the directory:
//! the task records say which files running tasks write (a `serve --stdio` daemon has
//! no socket to ask), and only log mtimes and `session-loads.json` say which sessions
//! were used lately.

pub mod retention;
pub mod rotate;
pub mod sweep;

use crate::config::StateConfig;
use crate::exec::BashExecutor;
use retention::{Reason, SpillLimits};
use rotate::Rotation;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The live audit log's name in the state directory.
pub const AUDIT_LOG: &str = "audit.jsonl";
/// The daemon's log's name in the state directory.
pub const DAEMON_LOG: &str = "daemon.log";

/// The spill directory of a state directory.
pub fn spill_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("spill")
}

/// The spill limits of a `[state]` section.
pub fn spill_limits(config: &StateConfig) -> SpillLimits {
    SpillLimits {
        max_age_days: config.spill_max_age_days,
        max_bytes: config.spill_max_bytes,
    }
}

/// `audit.jsonl`'s rotation.
pub fn audit_rotation(config: &StateConfig) -> Rotation {
    Rotation {
        max_bytes: config.audit_max_bytes,
        keep: config.audit_keep,
    }
}

/// `daemon.log`'s rotation.
pub fn log_rotation(config: &StateConfig) -> Rotation {
    Rotation {
        max_bytes: config.log_max_bytes,
        keep: config.log_keep,
    }
}

/// Bytes and files of one kind of state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindUsage {
    pub files: u64,
    pub bytes: u64,
}

/// What the state directory holds, per kind (`dsh status`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// `spill/`: the full output of streams that outgrew memory.
    pub spill: KindUsage,
    /// `sessions/`: the session logs (removed only with their session).
    pub sessions: KindUsage,
    /// `daemon.log` and its rotated files.
    pub logs: KindUsage,
    /// `audit.jsonl` and its rotated files.
    pub audit: KindUsage,
    /// Everything else (the task counter, grants, tombstones, caches).
    pub other: KindUsage,
}

/// Walks `state_dir` (links not followed) and sums what it holds per kind; a
/// missing directory holds nothing. Reads metadata only: one `fstatat` per file.
pub fn usage(state_dir: &Path) -> Usage {
    let mut usage = Usage::default();
    let Ok(entries) = std::fs::read_dir(state_dir) else {
        return usage;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let kind = match name.as_ref() {
            "spill" => &mut usage.spill,
            "sessions" => &mut usage.sessions,
            n if n == DAEMON_LOG || n.starts_with("daemon.log.") => &mut usage.logs,
            n if n == AUDIT_LOG || n.starts_with("audit.jsonl.") => &mut usage.audit,
            _ => &mut usage.other,
        };
        add_tree(&entry.path(), kind);
    }
    usage
}

fn add_tree(path: &Path, to: &mut KindUsage) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            add_tree(&entry.path(), to);
        }
    } else {
        to.files += 1;
        to.bytes += meta.len();
    }
}

/// Why `dsh gc` (or a sweep) removed a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Why {
    /// A spill file, by [`retention::decide`].
    Spill {
        #[serde(flatten)]
        reason: Reason,
    },
    /// A rotated log file past the number kept (`audit_keep`, `log_keep`).
    #[serde(rename_all = "camelCase")]
    Rotated { keep: u32 },
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Spill { reason } => write!(f, "{reason}"),
            Why::Rotated { keep } => write!(f, "beyond the {keep} rotated file(s) kept"),
        }
    }
}

/// One file a collection removed (or would remove, in a dry run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Removed {
    pub path: PathBuf,
    pub bytes: u64,
    pub why: Why,
}

/// `dsh gc`'s answer (`_dsh/state/gc`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GcReport {
    pub dry_run: bool,
    /// Spill files found, their bytes, and (when the limits were reached) how many of
    /// them were kept because in use: every file not removed and not in use is one the
    /// limits did not reach.
    pub spill_files: usize,
    pub spill_bytes: u64,
    pub in_use: usize,
    pub removed: Vec<Removed>,
}

impl GcReport {
    /// Bytes removed (or that would be).
    pub fn removed_bytes(&self) -> u64 {
        self.removed.iter().map(|r| r.bytes).sum()
    }
}

/// Applies `config`'s limits to `state_dir` now. `in_use` names the spill files to
/// keep whatever their age (asked after the listing); `logs_open` says the daemon
/// writes the logs itself, so their live files are left to rotate on their next write
/// (renaming a file its writer holds would only move the writer), and only rotated
/// files past the number kept go. Errors are per file and logged; the report says
/// what was done.
pub fn collect(
    state_dir: &Path,
    config: &StateConfig,
    in_use: impl FnOnce() -> HashSet<String>,
    logs_open: bool,
    dry_run: bool,
) -> GcReport {
    let now = SystemTime::now();
    let limits = spill_limits(config);
    let mut report = GcReport {
        dry_run,
        ..GcReport::default()
    };
    match sweep::sweep_spill(&spill_dir(state_dir), limits, in_use, now, dry_run) {
        Ok(swept) => {
            if !dry_run {
                let keep_for = Duration::from_secs(limits.max_age_days.saturating_mul(86_400));
                if let Err(e) = sweep::record_tombstones(state_dir, &swept.removed, keep_for, now) {
                    tracing::warn!("spill tombstones not written: {e}");
                }
            }
            report.spill_files = swept.files;
            report.spill_bytes = swept.bytes;
            report.in_use = swept.in_use;
            report.removed = swept
                .removed
                .into_iter()
                .map(|r| Removed {
                    path: r.path,
                    bytes: r.bytes,
                    why: Why::Spill { reason: r.reason },
                })
                .collect();
        }
        Err(e) => tracing::warn!(dir = %spill_dir(state_dir).display(), "spill sweep failed: {e}"),
    }
    for (name, rotation) in [
        (AUDIT_LOG, audit_rotation(config)),
        (DAEMON_LOG, log_rotation(config)),
    ] {
        let live = state_dir.join(name);
        let result = if logs_open {
            // Only what is past the number kept; the writer rotates the live file.
            rotate::enforce(
                &live,
                Rotation {
                    max_bytes: u64::MAX,
                    ..rotation
                },
                dry_run,
            )
        } else {
            rotate::enforce(&live, rotation, dry_run)
        };
        match result {
            Ok(removed) => report
                .removed
                .extend(removed.into_iter().map(|(path, bytes)| Removed {
                    path,
                    bytes,
                    why: Why::Rotated {
                        keep: rotation.keep,
                    },
                })),
            Err(e) => tracing::warn!(file = %live.display(), "log rotation failed: {e}"),
        }
    }
    report
}

/// `dsh gc` with no daemon answering on the socket: [`collect`] with what it can know
/// from disk alone. A daemon may still run on the directory without a socket (`serve
/// --stdio`), so the running tasks' records are read (their files are written now), and
/// the sessions used in the last day (log mtimes, `session-loads.json`) keep what they
/// name. Blocking.
pub fn collect_alone(state_dir: &Path, config: &StateConfig, dry_run: bool) -> GcReport {
    let in_use = || {
        let loads = sweep::read_loads(state_dir);
        let mut names = sweep::named_by_recent_sessions(state_dir, &loads, SystemTime::now());
        names.extend(sweep::written_by_recorded_tasks(state_dir));
        names
    };
    collect(state_dir, config, in_use, false, dry_run)
}

/// The daemon's keeper of its state directory: see the module docs.
pub struct StateKeeper {
    state_dir: PathBuf,
    /// The `[state]` section in force (a reload replaces it: the next sweep uses it).
    config: Mutex<StateConfig>,
    /// When each session was last opened (load, resume): its spill files are kept for
    /// a day after that, whatever their age. Kept in `session-loads.json` too, so a
    /// restarted daemon and `dsh gc` without one know it.
    loads: Arc<Mutex<HashMap<String, SystemTime>>>,
    executor: Option<Arc<dyn BashExecutor>>,
    /// One collection at a time (the periodic sweep and `dsh gc`).
    collecting: Mutex<()>,
}

impl StateKeeper {
    /// The keeper of `state_dir` under `config`; `executor` is asked which spill files
    /// its running tasks write. Reads back which sessions were loaded lately.
    pub fn new(
        state_dir: PathBuf,
        config: StateConfig,
        executor: Option<Arc<dyn BashExecutor>>,
    ) -> Self {
        let loads = sweep::read_loads(&state_dir);
        Self {
            state_dir,
            config: Mutex::new(config),
            loads: Arc::new(Mutex::new(loads)),
            executor,
            collecting: Mutex::new(()),
        }
    }

    /// The directory it keeps.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The `[state]` section in force.
    pub fn config(&self) -> StateConfig {
        self.config
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A reload's `[state]`: the spill limits and the sweep's interval apply from
    /// the next sweep (the logs' rotation was fixed when their files were opened).
    pub fn set_config(&self, config: StateConfig) {
        *self.config.lock().unwrap_or_else(|p| p.into_inner()) = config;
    }

    /// A session was opened now: what it names stays for a day. The record is written
    /// on a blocking thread (called from a request's task).
    pub fn session_opened(&self, id: &str) {
        let now = SystemTime::now();
        {
            let mut loads = self.loads.lock().unwrap_or_else(|p| p.into_inner());
            loads.retain(|_, at| now.duration_since(*at).unwrap_or_default() <= sweep::RECENT_LOAD);
            loads.insert(id.to_string(), now);
        }
        let (loads, dir) = (self.loads.clone(), self.state_dir.clone());
        let write = move || {
            // Under the lock, so two writes land in the order of their updates.
            let loads = loads.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = sweep::write_loads(&dir, &loads) {
                tracing::warn!("{} not written: {e}", sweep::LOADS);
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(write)),
            Err(_) => write(),
        }
    }

    /// The spill files to keep now: those running tasks write (the executor says, and
    /// the task records of every daemon on the directory), those this process holds
    /// open (a foreground stream's, an MCP result's being written), and those a session
    /// used in the last day names.
    fn in_use(&self) -> HashSet<String> {
        let spill = spill_dir(&self.state_dir);
        let canonical = std::fs::canonicalize(&spill).unwrap_or_else(|_| spill.clone());
        let mut names = sweep::open_by_this_process(&spill);
        if let Some(exec) = &self.executor {
            names.extend(
                exec.spill_files_in_use()
                    .iter()
                    .filter_map(|p| sweep::name_in(p, &[&spill, &canonical])),
            );
        }
        // Every daemon's running tasks on this directory, this one's included: another
        // daemon (a `serve --stdio` beside this one) writes its tasks' files too.
        names.extend(sweep::written_by_recorded_tasks(&self.state_dir));
        let loads = self.loads.lock().unwrap_or_else(|p| p.into_inner()).clone();
        names.extend(sweep::named_by_recent_sessions(
            &self.state_dir,
            &loads,
            SystemTime::now(),
        ));
        names
    }

    /// Applies the limits now (blocking: call it on a blocking thread).
    pub fn collect(&self, dry_run: bool) -> GcReport {
        let _one = self.collecting.lock().unwrap_or_else(|p| p.into_inner());
        let config = self.config();
        let report = collect(&self.state_dir, &config, || self.in_use(), true, dry_run);
        if !dry_run && !report.removed.is_empty() {
            tracing::info!(
                files = report.removed.len(),
                bytes = report.removed_bytes(),
                "state directory swept"
            );
        }
        report
    }

    /// Sweeps at once and then every `sweep_interval_secs`, each on tokio's blocking
    /// pool (never on an async worker), until `stop` is cancelled. A sweep still
    /// running when the next is due delays it rather than running two.
    pub fn run_periodically(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        tokio::spawn(async move {
            loop {
                let keeper = self.clone();
                let sweep = tokio::task::spawn_blocking(move || keeper.collect(false));
                tokio::select! {
                    _ = sweep => {}
                    () = stop.cancelled() => return,
                }
                let every = Duration::from_secs(self.config().sweep_interval_secs.max(1));
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = stop.cancelled() => return,
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_each_kind() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("spill")).unwrap();
        std::fs::create_dir_all(d.join("sessions")).unwrap();
        for (name, bytes) in [
            ("spill/a.stdout", 100),
            ("spill/b.stderr", 50),
            ("sessions/s.jsonl", 7),
            ("daemon.log", 3),
            ("daemon.log.1", 4),
            ("audit.jsonl", 5),
            ("audit.jsonl.2", 6),
            ("task-counter", 2),
        ] {
            std::fs::write(d.join(name), vec![b'x'; bytes]).unwrap();
        }
        let u = usage(d);
        let k = |files, bytes| KindUsage { files, bytes };
        assert_eq!(u.spill, k(2, 150));
        assert_eq!(u.sessions, k(1, 7));
        assert_eq!(u.logs, k(2, 7));
        assert_eq!(u.audit, k(2, 11));
        assert_eq!(u.other, k(1, 2));
        assert_eq!(usage(&d.join("missing")), Usage::default());
    }
}
