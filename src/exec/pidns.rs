//! Ending sandboxed commands through their PID namespaces.
//!
//! bubblewrap runs each command in a new PID namespace whose first process (bwrap's
//! own init) takes every other member with it when it exits: a kernel guarantee that
//! no `setsid`, double fork or scrubbed environment escapes. The marker still finds
//! a namespace (its init inherits the marker), and membership finds everything in
//! it. Stopping SIGTERMs every member except the init (an init ignores signals it
//! has no handler for, and its exit would SIGKILL the rest at once, skipping the
//! grace), waits the grace, then SIGKILLs what is left, init included.

use super::procs::{self, Found, Selector};
use nix::sys::signal::Signal;
use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

/// The PID namespace of `pid`: the inode of `/proc/<pid>/ns/pid`.
fn pid_namespace(pid: i32) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|m| m.ino())
}

/// Whether `pid` is process 1 of its innermost PID namespace (`NSpid` ends in 1).
fn is_namespace_init(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
            Some(line.split_whitespace().last()? == "1")
        })
        .unwrap_or(false)
}

/// State letter and parent of `pid`, from `/proc/<pid>/stat`.
fn state_and_parent(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself contain ") ".
    let mut fields = stat.get(stat.rfind(')')? + 2..)?.split(' ');
    let state = fields.next()?.chars().next()?;
    Some((state, fields.next()?.parse().ok()?))
}

/// What one stop deals with, read in one pass over `/proc`: the live members of
/// its namespaces (inits apart), and the selector's live processes outside them
/// other than the spared one and the namespaces' bwrap processes.
#[derive(Debug, Default)]
struct Snapshot {
    inits: Vec<Found>,
    workers: Vec<Found>,
    outside: Vec<Found>,
}

impl Snapshot {
    /// Everything, for the SIGKILL rounds (killing an init ends its namespace).
    fn all(self) -> Vec<Found> {
        let mut all = self.inits;
        all.extend(self.workers);
        all.extend(self.outside);
        all
    }
}

/// The fixed facts of one stop: which namespaces, which process is spared, and
/// which processes are the namespaces' bwrap wrappers.
#[derive(Debug, Clone)]
struct Scope {
    selector: Selector,
    spare: Option<i32>,
    namespaces: HashSet<u64>,
    wrappers: HashSet<i32>,
}

impl Scope {
    fn snapshot(&self) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for pid in procs::other_pids() {
            if !pid_namespace(pid).is_some_and(|ns| self.namespaces.contains(&ns)) {
                continue;
            }
            if state_and_parent(pid).is_none_or(|(state, _)| state == 'Z' || state == 'X') {
                continue;
            }
            let process = Found { pid, sid: 0 };
            if is_namespace_init(pid) {
                snapshot.inits.push(process);
            } else {
                snapshot.workers.push(process);
            }
        }
        snapshot.outside = procs::find(&self.selector)
            .into_iter()
            .filter(|p| {
                Some(p.pid) != self.spare
                    && !self.wrappers.contains(&p.pid)
                    && !pid_namespace(p.pid).is_some_and(|ns| self.namespaces.contains(&ns))
            })
            .collect();
        snapshot
    }

    /// `snapshot` off the async worker threads.
    async fn snapshot_async(&self) -> Snapshot {
        let scope = self.clone();
        tokio::task::spawn_blocking(move || scope.snapshot())
            .await
            .unwrap_or_default()
    }

    /// Works out the namespaces of the selector's processes. When bwrap has not built
    /// the sandbox yet (the stop came right after the start), bwrap itself is ended
    /// instead of spared: its death ends the sandbox before anything runs inside.
    fn survey(selector: Selector, spare: Option<i32>) -> Scope {
        let own = pid_namespace(std::process::id() as i32);
        let found = procs::find(&selector);
        let namespaces: HashSet<u64> = found
            .iter()
            .filter_map(|p| pid_namespace(p.pid))
            .filter(|ns| Some(*ns) != own)
            .collect();
        let spare = spare.filter(|_| !namespaces.is_empty());
        let mut scope = Scope {
            selector,
            spare,
            namespaces,
            wrappers: HashSet::new(),
        };
        // bwrap itself (the parent of an init) is spared the SIGTERM too: its death
        // would SIGKILL its namespace at once (`--die-with-parent`), skipping the grace.
        scope.wrappers = scope
            .snapshot()
            .inits
            .iter()
            .filter_map(|i| Some(state_and_parent(i.pid)?.1))
            .collect();
        scope
    }
}

/// Stops everything `selector` finds and everything sharing a PID namespace with
/// it, SIGTERM first and SIGKILL after `grace`; returns once none is left. `spare`
/// (the host `bwrap` process, the caller's child) is never signalled: it exits by
/// itself once its namespace is gone, and the caller reaps it.
pub async fn terminate(selector: Selector, spare: Option<i32>, grace: Duration) {
    let Ok(scope) = tokio::task::spawn_blocking(move || Scope::survey(selector, spare)).await
    else {
        return;
    };
    let mut signalled: HashSet<i32> = HashSet::new();
    let deadline = tokio::time::Instant::now() + grace;
    let mut pause = Duration::from_millis(2);
    loop {
        let now = scope.snapshot_async().await;
        // The namespaces count until their inits are gone: an init alone means the
        // command has not started yet (it gets its SIGTERM when it appears) or has
        // just ended (and the init follows it at once).
        let pending = now.inits.len() + now.workers.len() + now.outside.len();
        if pending == 0 && signalled.is_empty() {
            return;
        }
        let fresh: Vec<Found> = now
            .workers
            .into_iter()
            .chain(now.outside)
            .filter(|p| signalled.insert(p.pid))
            .collect();
        procs::signal_all(&fresh, Signal::SIGTERM);
        procs::signal_all(&fresh, Signal::SIGCONT);
        if pending == 0 || tokio::time::Instant::now() >= deadline {
            break;
        }
        // No event announces the end of a process we are not the parent of; poll
        // with a short backoff bounded by the deadline.
        tokio::time::sleep(pause.min(deadline - tokio::time::Instant::now())).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    // Whatever is left goes now: killing an init ends its whole namespace.
    for round in 0..200u32 {
        let left = scope.snapshot_async().await.all();
        if left.is_empty() {
            return;
        }
        procs::signal_all(&left, Signal::SIGKILL);
        if round > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    tracing::warn!(?scope.selector, "sandboxed processes survived SIGKILL");
}
