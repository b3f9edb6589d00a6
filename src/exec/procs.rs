//! Finding and stopping every process a command started, without privileges.
//!
//! Each command runs as the leader of a new session (`setsid`), so everything it
//! starts stays in that session unless it calls `setsid` itself. To also find
//! processes that escaped (`setsid`, double forks, `nohup`, `disown`), every command
//! gets a marker variable in its environment, which children inherit; on kill we
//! scan `/proc/*/environ` for it. cgroups would be stronger, but the machines dsh
//! runs on do not let an unprivileged user create them. A process that scrubs its
//! own environment AND leaves the session escapes this net; that is accepted and
//! documented in ARCHITECTURE.md.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::time::Duration;

/// The environment variable that marks a command's processes.
pub const MARK_VAR: &str = "DSH_TASK_MARK";

/// Which processes belong to a command.
#[derive(Debug, Clone)]
pub enum Selector {
    /// Marked with exactly this value, or in this session.
    Task { mark: String, sid: Option<i32> },
    /// Only the members of this session (what a normal exit cleans up).
    Session(i32),
    /// Marked with any value starting with this prefix (all of one executor).
    MarkPrefix(String),
    /// Marked as started for this state directory (`prefix`, the state tag and a
    /// colon) by a process that no longer exists: leftovers of a daemon that died
    /// without shutting down. A live daemon on the same state keeps its own.
    Stale { prefix: String },
}

/// A live (non-zombie) process of ours that a selector matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    pub pid: i32,
    pub sid: i32,
}

/// Lists the live processes matching `selector`. Zombies are skipped: they are
/// already dead and only wait for their parent.
pub fn find(selector: &Selector) -> Vec<Found> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Some((state, sid)) = read_stat(pid) else {
            continue;
        };
        if state == 'Z' || state == 'X' {
            continue;
        }
        let matched = match selector {
            Selector::Session(s) => sid == *s,
            Selector::Task {
                mark,
                sid: task_sid,
            } => task_sid.is_some_and(|s| s == sid) || read_mark(pid).is_some_and(|m| m == *mark),
            Selector::MarkPrefix(prefix) => read_mark(pid).is_some_and(|m| m.starts_with(prefix)),
            Selector::Stale { prefix } => read_mark(pid).is_some_and(|m| {
                m.strip_prefix(prefix.as_str())
                    .and_then(|rest| rest.split(':').next())
                    .is_some_and(|owner| !owner_alive(owner))
            }),
        };
        if matched {
            found.push(Found { pid, sid });
        }
    }
    found
}

/// This process as a marker owner: `<pid>.<start time>`, which no other process
/// will ever be, even after pid reuse.
pub fn own_identity() -> String {
    let pid = std::process::id() as i32;
    format!("{pid}.{}", start_time(pid).unwrap_or_default())
}

/// Whether the process named by an owner string (`<pid>.<start time>`) still runs.
fn owner_alive(owner: &str) -> bool {
    let Some((pid, start)) = owner.split_once('.') else {
        return false;
    };
    let Ok(pid) = pid.parse::<i32>() else {
        return false;
    };
    start_time(pid).is_some_and(|t| t.to_string() == start)
}

/// Start time (clock ticks since boot) from `/proc/<pid>/stat`, field 22.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    // `rest` starts at field 3 (state); field 22 is 19 further.
    rest.split(' ').nth(19)?.parse().ok()
}

/// State letter and session id from `/proc/<pid>/stat`.
fn read_stat(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself contain ") ".
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split(' ');
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let _pgrp = fields.next()?;
    let sid = fields.next()?.parse().ok()?;
    Some((state, sid))
}

/// The value of the marker variable in a process's initial environment.
fn read_mark(pid: i32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{MARK_VAR}=");
    environ
        .split(|b| *b == 0)
        .find_map(|var| var.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// A stable tag for a state directory (FNV-1a of its path), so that a daemon can
/// recognise processes a previous daemon on the same state started. Stable across
/// builds, unlike std's hasher.
pub fn state_tag(state_dir: &std::path::Path) -> String {
    let path = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in path.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Sends `signal` to every process in `procs`; vanished ones are ignored.
pub fn signal_all(procs: &[Found], signal: Signal) {
    for p in procs {
        let _ = kill(Pid::from_raw(p.pid), signal);
    }
}

/// Stops everything `selector` matches: SIGTERM, up to `grace` for it to exit, then
/// SIGKILL until nothing matches. Returns once the process table shows none left
/// (bounded: processes stuck in the kernel are given up on after a few seconds).
pub async fn terminate(selector: Selector, grace: Duration) {
    let procs = find_async(selector.clone()).await;
    if procs.is_empty() {
        return;
    }
    signal_all(&procs, Signal::SIGTERM);
    // Anything stopped (SIGSTOP/Ctrl-Z) cannot act on SIGTERM until continued.
    signal_all(&procs, Signal::SIGCONT);
    let deadline = tokio::time::Instant::now() + grace;
    let mut pause = Duration::from_millis(2);
    loop {
        let left = find_async(selector.clone()).await;
        if left.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            break;
        }
        // Waiting for processes we are not the parent of has no event to await
        // portably; poll the table with a short backoff bounded by the deadline.
        tokio::time::sleep(pause.min(deadline - tokio::time::Instant::now())).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    kill_all(selector).await;
}

/// SIGKILLs everything `selector` matches until nothing does. A fork racing the
/// kill is caught by the next round.
pub async fn kill_all(selector: Selector) {
    for round in 0..200u32 {
        let left = find_async(selector.clone()).await;
        if left.is_empty() {
            return;
        }
        signal_all(&left, Signal::SIGKILL);
        if round > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    tracing::warn!(
        ?selector,
        "processes survived SIGKILL (stuck in the kernel?)"
    );
}

/// `find` off the async worker threads: a scan reads every process's files.
pub async fn find_async(selector: Selector) -> Vec<Found> {
    tokio::task::spawn_blocking(move || find(&selector))
        .await
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_own_child_by_mark_and_session() {
        use std::os::unix::process::CommandExt;
        let mark = format!("unit-{}", uuid::Uuid::new_v4());
        let mut child = std::process::Command::new("sleep");
        child.arg("30").env(MARK_VAR, &mark);
        unsafe {
            child.pre_exec(|| {
                nix::unistd::setsid()
                    .map(|_| ())
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = child.spawn().unwrap();
        let pid = child.id() as i32;
        let by_mark = find(&Selector::Task {
            mark: mark.clone(),
            sid: None,
        });
        assert_eq!(by_mark, vec![Found { pid, sid: pid }]);
        assert_eq!(find(&Selector::Session(pid)).len(), 1);
        assert_eq!(
            find(&Selector::MarkPrefix("unit-".into()))
                .iter()
                .filter(|f| f.pid == pid)
                .count(),
            1
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            find(&Selector::Task {
                mark,
                sid: Some(pid)
            })
            .is_empty()
        );
    }
}
