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
///
/// This runs after every command, so it is kept cheap whatever else runs on the
/// machine (a scan visits every process of every user). Measured per process on the
/// benchmark machine: `getsid(2)` 0.2 us, reading `environ` 2 us (kernel threads) to
/// 8 us, reading `stat` 9 us (the kernel gathers every field of it). So:
/// * session membership is asked with `getsid`, and only members have their `stat`
///   read, for the zombie check;
/// * a marker is looked for in `environ` alone: a zombie's environment reads empty
///   (its memory is gone), so a carrier needs no `stat`, and its session comes from
///   `getsid`.
pub fn find(selector: &Selector) -> Vec<Found> {
    let mut files = ProcFiles::default();
    let mut found = Vec::new();
    for pid in other_pids() {
        let matched = match selector {
            Selector::Session(s) => files.live_member(pid, *s),
            Selector::Task {
                mark,
                sid: task_sid,
            } => {
                task_sid.is_some_and(|s| files.live_member(pid, s))
                    || files.mark(pid).is_some_and(|m| m == mark.as_bytes())
            }
            Selector::MarkPrefix(prefix) => files
                .mark(pid)
                .is_some_and(|m| m.starts_with(prefix.as_bytes())),
            Selector::Stale { prefix } => files.mark(pid).is_some_and(|m| {
                String::from_utf8_lossy(m)
                    .strip_prefix(prefix.as_str())
                    .and_then(|rest| rest.split(':').next())
                    .is_some_and(|owner| !owner_alive(owner))
            }),
        };
        if matched && let Some(sid) = files.session(pid) {
            found.push(Found { pid, sid });
        }
    }
    found
}

/// What `find` uses from `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    state: char,
    sid: i32,
    /// Clock ticks since boot (field 22).
    start: u64,
}

/// Parses the fields `find` uses out of the text of `/proc/<pid>/stat`.
fn parse_stat(text: &str) -> Option<Stat> {
    // The command name is in parentheses and may itself contain ") ".
    let rest = text.get(text.rfind(')')? + 2..)?;
    // `rest` starts at field 3 (state): ppid, pgrp, session follow; field 22 is the
    // 20th from here.
    let mut fields = rest.split(' ');
    let state = fields.next()?.chars().next()?;
    let sid = fields.nth(2)?.parse().ok()?;
    let start = fields.nth(15)?.parse().ok()?;
    Some(Stat { state, sid, start })
}

/// Reads `/proc` files into buffers reused across one scan (a scan reads hundreds).
#[derive(Default)]
struct ProcFiles {
    text: String,
    bytes: Vec<u8>,
}

impl ProcFiles {
    fn stat(&mut self, pid: i32) -> Option<Stat> {
        use std::io::Read;
        self.text.clear();
        std::fs::File::open(format!("/proc/{pid}/stat"))
            .ok()?
            .read_to_string(&mut self.text)
            .ok()?;
        parse_stat(&self.text)
    }

    /// The session of `pid`: one `getsid(2)`, or its `stat` if that is refused (a
    /// security module may; plain Linux never does). None if the process is gone.
    fn session(&mut self, pid: i32) -> Option<i32> {
        match nix::unistd::getsid(Some(Pid::from_raw(pid))) {
            Ok(sid) => Some(sid.as_raw()),
            Err(nix::errno::Errno::ESRCH) => None,
            Err(_) => self.stat(pid).map(|s| s.sid),
        }
    }

    /// Whether `pid` is a live (not zombie) member of session `sid`. The `stat` read
    /// for the zombie check happens only for members.
    fn live_member(&mut self, pid: i32, sid: i32) -> bool {
        self.session(pid) == Some(sid)
            && self
                .stat(pid)
                .is_some_and(|s| s.sid == sid && s.state != 'Z' && s.state != 'X')
    }

    /// The value of the marker variable in the process's initial environment. None
    /// for zombies and kernel threads, whose environment reads empty (no memory).
    fn mark(&mut self, pid: i32) -> Option<&[u8]> {
        use std::io::Read;
        self.bytes.clear();
        std::fs::File::open(format!("/proc/{pid}/environ"))
            .ok()?
            .read_to_end(&mut self.bytes)
            .ok()?;
        mark_in(&self.bytes)
    }
}

/// The value of the marker variable in an environment block (`NAME=value\0...`).
fn mark_in(environ: &[u8]) -> Option<&[u8]> {
    let name = MARK_VAR.as_bytes();
    environ.split(|b| *b == 0).find_map(|var| {
        var.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(b"="))
    })
}

/// This process as a marker owner: `<pid>.<start time>`, which no other process
/// will ever be, even after pid reuse.
pub fn own_identity() -> String {
    let pid = std::process::id() as i32;
    format!("{pid}.{}", start_time(pid).unwrap_or_default())
}

/// Whether the process named by an owner string (`<pid>.<start time>`) still runs.
pub fn owner_alive(owner: &str) -> bool {
    let Some((pid, start)) = owner.split_once('.') else {
        return false;
    };
    let Ok(pid) = pid.parse::<i32>() else {
        return false;
    };
    start_time(pid).is_some_and(|t| t.to_string() == start)
}

/// Whether `pid` is a zombie (or being reaped); None if it is gone.
pub(super) fn is_zombie(pid: i32) -> Option<bool> {
    ProcFiles::default()
        .stat(pid)
        .map(|s| s.state == 'Z' || s.state == 'X')
}

/// Start time (clock ticks since boot) from `/proc/<pid>/stat`, field 22.
fn start_time(pid: i32) -> Option<u64> {
    ProcFiles::default().stat(pid).map(|s| s.start)
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

/// `find` off the async worker threads: a scan reads every process's files. Session
/// scans go to the shared scanner (`find_session`).
pub async fn find_async(selector: Selector) -> Vec<Found> {
    if let Selector::Session(sid) = selector {
        return find_session(sid).await;
    }
    tokio::task::spawn_blocking(move || find(&selector))
        .await
        .unwrap_or_default()
}

/// A session scan asked of the scanner thread.
struct SessionQuery {
    sid: i32,
    answer: tokio::sync::oneshot::Sender<Vec<Found>>,
}

/// The live members of session `sid`, as `find(&Selector::Session(sid))` gives them,
/// from a pass over `/proc` shared with every other session asked about meanwhile.
///
/// Every command that exits has its session scanned, and commands often end together
/// (32 connections at once in B2; 1000 tasks at shutdown, which made 1000 passes over
/// a table of 1100 processes). One thread serves the queries: it takes all that are
/// waiting, makes one pass, answers each, and repeats. A pass starts only after every
/// query it answers was sent, so each answer reflects the table after its command
/// exited, exactly as a scan of its own would. Should the thread be missing (it could
/// not start) or fail a pass, the query scans alone.
async fn find_session(sid: i32) -> Vec<Found> {
    static SCANNER: std::sync::OnceLock<Option<std::sync::mpsc::Sender<SessionQuery>>> =
        std::sync::OnceLock::new();
    let (answer, answered) = tokio::sync::oneshot::channel();
    if let Some(scanner) = SCANNER.get_or_init(start_session_scanner)
        && scanner.send(SessionQuery { sid, answer }).is_ok()
        && let Ok(found) = answered.await
    {
        return found;
    }
    tokio::task::spawn_blocking(move || find(&Selector::Session(sid)))
        .await
        .unwrap_or_default()
}

/// Starts the thread behind `find_session`; None if the system refuses a thread.
fn start_session_scanner() -> Option<std::sync::mpsc::Sender<SessionQuery>> {
    let (queries, incoming) = std::sync::mpsc::channel::<SessionQuery>();
    std::thread::Builder::new()
        .name("dsh-proc-scan".into())
        .spawn(move || {
            while let Ok(first) = incoming.recv() {
                let mut batch = vec![first];
                batch.extend(incoming.try_iter());
                let mut sids: Vec<i32> = batch.iter().map(|q| q.sid).collect();
                sids.sort_unstable();
                sids.dedup();
                // A panic drops the batch: each query then scans alone.
                let Ok(found) = std::panic::catch_unwind(|| find_sessions(&sids)).map_err(drop)
                else {
                    continue;
                };
                for query in batch {
                    let mine = found.iter().filter(|f| f.sid == query.sid).copied();
                    // The asker may have stopped waiting; nothing to do then.
                    let _ = query.answer.send(mine.collect());
                }
            }
        })
        .ok()
        .map(|_| queries)
}

/// The live members of any of `sids` (sorted), in one pass: `find` with
/// `Selector::Session` for several sessions at once.
fn find_sessions(sids: &[i32]) -> Vec<Found> {
    let mut files = ProcFiles::default();
    let mut found = Vec::new();
    for pid in other_pids() {
        if let Some(sid) = files.session(pid)
            && sids.binary_search(&sid).is_ok()
            && files.live_member(pid, sid)
        {
            found.push(Found { pid, sid });
        }
    }
    found
}

/// Every process in `/proc` but this one.
pub(super) fn other_pids() -> impl Iterator<Item = i32> {
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(move |pid| *pid != me)
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

    /// A member that leads a process group of its own is still found by session, and
    /// both processes by their marker.
    #[test]
    fn finds_a_child_in_its_own_group_by_session_and_by_mark() {
        use std::os::unix::process::CommandExt;
        let prefix = format!(
            "{}:{}:{}:",
            "0123456789abcdef",
            own_identity(),
            uuid::Uuid::new_v4().simple()
        );
        let mark = format!("{prefix}scope/1");
        // The leader starts a child in a process group of its own, still in the session.
        let mut child = std::process::Command::new("bash");
        child
            .args(["-c", "set -m; sleep 30 & wait"])
            .env(MARK_VAR, &mark)
            .stdout(std::process::Stdio::null());
        unsafe {
            child.pre_exec(|| {
                nix::unistd::setsid()
                    .map(|_| ())
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = child.spawn().unwrap();
        let sid = child.id() as i32;
        // Wait until the grandchild runs in its own group (`set -m` makes bash give each
        // job one); nothing here is timed.
        let pgid = |pid: i32| nix::unistd::getpgid(Some(Pid::from_raw(pid))).ok();
        // The grandchild's environment (its mark) reads as empty while it is inside
        // execve, so the marks are awaited too, not only the group.
        let by_mark = || {
            find(&Selector::Task {
                mark: mark.clone(),
                sid: None,
            })
        };
        // A mark read before the grandchild has become `sleep` may be the forked bash's,
        // which execve then empties for a moment; once its name is `sleep`, a mark read
        // afterwards is the new image's and stays (CI saw the prefix find one of two).
        let became_sleep = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
        };
        let members = loop {
            let members = find(&Selector::Session(sid));
            if members.len() == 2
                && members.iter().any(|f| {
                    f.pid != sid
                        && pgid(f.pid).is_some_and(|g| g.as_raw() != sid)
                        && became_sleep(f.pid)
                })
                && by_mark().len() == 2
            {
                break members;
            }
            std::thread::yield_now();
        };
        assert!(members.iter().all(|f| f.sid == sid));
        let by_prefix = find(&Selector::MarkPrefix(prefix));
        assert_eq!(by_prefix.len(), 2, "{by_prefix:?}");
        let by_mark = by_mark();
        assert_eq!(by_mark.len(), 2, "{by_mark:?}");
        signal_all(&members, Signal::SIGKILL);
        child.wait().unwrap();
        // The grandchild is reparented and reaped by init (or a subreaper): once it
        // is gone or a zombie, nothing matches.
        while !find(&Selector::Session(sid)).is_empty() {
            std::thread::yield_now();
        }
        assert!(find(&Selector::Task { mark, sid: None }).is_empty());
    }

    /// A zombie is skipped by every selector: by session through its `stat`, by marker
    /// because its environment reads empty.
    #[test]
    fn a_zombie_is_not_found() {
        let mark = format!("unit-{}", uuid::Uuid::new_v4());
        let mut child = std::process::Command::new("true")
            .env(MARK_VAR, &mark)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let sid = nix::unistd::getsid(None).unwrap().as_raw();
        // Not reaped yet: wait until it is a zombie (nothing timed).
        while ProcFiles::default().stat(pid).map(|s| s.state) != Some('Z') {
            std::thread::yield_now();
        }
        let selectors = [
            Selector::Task {
                mark: mark.clone(),
                sid: None,
            },
            Selector::MarkPrefix(mark.clone()),
            Selector::Session(sid),
        ];
        for selector in &selectors {
            assert!(
                !find(selector).iter().any(|f| f.pid == pid),
                "{selector:?} found a zombie"
            );
        }
        child.wait().unwrap();
    }

    /// Session queries made together, answered from shared passes, each get exactly what
    /// a scan of their own finds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn session_queries_made_together_each_get_their_own_members() {
        use std::os::unix::process::CommandExt;
        let mut children: Vec<std::process::Child> = (0..4)
            .map(|_| {
                let mut child = std::process::Command::new("sleep");
                child.arg("30");
                // SAFETY: setsid is async-signal-safe and touches no parent memory.
                unsafe {
                    child.pre_exec(|| {
                        nix::unistd::setsid()
                            .map(|_| ())
                            .map_err(std::io::Error::from)
                    });
                }
                child.spawn().unwrap()
            })
            .collect();
        let sids: Vec<i32> = children.iter().map(|c| c.id() as i32).collect();
        let mut queries = tokio::task::JoinSet::new();
        for round in 0..25 {
            for (i, sid) in sids.iter().copied().enumerate() {
                queries.spawn(async move { (i, find_async(Selector::Session(sid)).await) });
            }
            // A session nobody is in: its own pid is taken by no process of ours.
            queries.spawn(async move {
                (
                    usize::MAX - round,
                    find_async(Selector::Session(1 << 30)).await,
                )
            });
        }
        while let Some(answer) = queries.join_next().await {
            let (i, found) = answer.unwrap();
            match sids.get(i) {
                Some(sid) => assert_eq!(
                    found,
                    vec![Found {
                        pid: *sid,
                        sid: *sid
                    }]
                ),
                None => assert!(found.is_empty(), "{found:?}"),
            }
        }
        for child in &mut children {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        for sid in sids {
            assert!(find_async(Selector::Session(sid)).await.is_empty());
        }
    }

    #[test]
    fn stat_fields_even_with_odd_command_names() {
        let text = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10 \
                    18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        assert_eq!(
            parse_stat(text),
            Some(Stat {
                state: 'S',
                sid: 42,
                start: 98765
            })
        );
        assert_eq!(parse_stat("42 (trunc"), None);
        assert_eq!(parse_stat("42 (x) S 1 2"), None);
    }

    #[test]
    fn marker_value_only_from_the_exact_name() {
        let env = b"A=1\0DSH_TASK_MARKX=no\0DSH_TASK_MARK=yes:1\0B=2\0";
        assert_eq!(mark_in(env), Some(&b"yes:1"[..]));
        assert_eq!(mark_in(b"DSH_TASK_MARKX=no\0"), None);
        assert_eq!(mark_in(b""), None);
        assert_eq!(mark_in(b"DSH_TASK_MARK="), Some(&b""[..]));
    }
}
