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

/// The parent of `pid`, from `/proc/<pid>/stat`.
fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].split(' ').nth(1)?.parse().ok()
}

/// The live processes of a set of namespaces, split into inits and the rest.
#[derive(Debug, Default)]
struct Members {
    inits: Vec<Found>,
    workers: Vec<Found>,
}

fn members(namespaces: &HashSet<u64>) -> Members {
    let mut found = Members::default();
    // Every process whose namespace is one of ours. `Session(-1)` would match
    // nothing, so list by scanning /proc directly.
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if !pid_namespace(pid).is_some_and(|ns| namespaces.contains(&ns)) {
            continue;
        }
        let Some(state) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s[s.rfind(')')? + 2..].chars().next())
        else {
            continue;
        };
        if state == 'Z' || state == 'X' {
            continue;
        }
        let process = Found { pid, sid: 0 };
        if is_namespace_init(pid) {
            found.inits.push(process);
        } else {
            found.workers.push(process);
        }
    }
    found
}

/// What one stop is about: the namespaces the selector's processes live in, and the
/// selector's processes outside any of them (except `spare`).
fn survey(selector: &Selector, spare: Option<i32>) -> (HashSet<u64>, Vec<Found>) {
    let own = pid_namespace(std::process::id() as i32);
    let mut namespaces = HashSet::new();
    let mut outside = Vec::new();
    for process in procs::find(selector) {
        match pid_namespace(process.pid) {
            Some(ns) if Some(ns) != own => {
                namespaces.insert(ns);
            }
            _ if Some(process.pid) == spare => {}
            _ => outside.push(process),
        }
    }
    (namespaces, outside)
}

/// Stops everything `selector` finds and everything sharing a PID namespace with
/// it, SIGTERM first and SIGKILL after `grace`; returns once none is left. `spare`
/// (the host `bwrap` process, the caller's child) is never signalled: it exits by
/// itself once its namespace is gone, and the caller reaps it.
pub async fn terminate(selector: Selector, spare: Option<i32>, grace: Duration) {
    let survey_now = {
        let selector = selector.clone();
        move || {
            let (namespaces, outside) = survey(&selector, spare);
            let inside = members(&namespaces);
            (namespaces, outside, inside)
        }
    };
    let Ok((namespaces, mut outside, inside)) = tokio::task::spawn_blocking(survey_now).await
    else {
        return;
    };
    // No namespace yet: bwrap has not built the sandbox (the stop came right after
    // the start). Ending bwrap itself then ends it before anything runs inside.
    let spare = match spare {
        Some(pid)
            if namespaces.is_empty() && procs::find(&selector).iter().any(|p| p.pid == pid) =>
        {
            outside.push(Found { pid, sid: pid });
            None
        }
        spare => spare,
    };
    // bwrap itself (the parent of an init) is spared the SIGTERM too: its death
    // would SIGKILL its namespace at once (`--die-with-parent`), skipping the grace.
    let wrappers: HashSet<i32> = inside.inits.iter().filter_map(|i| parent(i.pid)).collect();
    outside.retain(|p| !wrappers.contains(&p.pid));
    let targets: Vec<Found> = inside.workers.into_iter().chain(outside).collect();
    if targets.is_empty() && inside.inits.is_empty() {
        return;
    }
    procs::signal_all(&targets, Signal::SIGTERM);
    procs::signal_all(&targets, Signal::SIGCONT);
    let mut signalled: HashSet<i32> = targets.iter().map(|p| p.pid).collect();
    let deadline = tokio::time::Instant::now() + grace;
    let mut pause = Duration::from_millis(2);
    loop {
        // The namespaces count until their inits are gone: an init alone means the
        // command has not started yet (it gets its SIGTERM when it appears) or has
        // just ended (and the init follows it at once).
        let (pending, fresh) = {
            let (namespaces, selector) = (namespaces.clone(), selector.clone());
            let wrappers = wrappers.clone();
            tokio::task::spawn_blocking(move || {
                let inside = members(&namespaces);
                let (_, mut outside) = survey(&selector, spare);
                outside.retain(|p| !wrappers.contains(&p.pid));
                let pending = inside.inits.len() + inside.workers.len() + outside.len();
                let fresh: Vec<Found> = inside.workers.into_iter().chain(outside).collect();
                (pending, fresh)
            })
            .await
            .unwrap_or_default()
        };
        let fresh: Vec<Found> = fresh
            .into_iter()
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
        let (namespaces, selector) = (namespaces.clone(), selector.clone());
        let left = tokio::task::spawn_blocking(move || {
            let inside = members(&namespaces);
            let (_, outside) = survey(&selector, spare);
            let mut all = inside.inits;
            all.extend(inside.workers);
            all.extend(outside);
            all
        })
        .await
        .unwrap_or_default();
        if left.is_empty() {
            return;
        }
        procs::signal_all(&left, Signal::SIGKILL);
        if round > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    tracing::warn!(?selector, "sandboxed processes survived SIGKILL");
}
