//! The daemon as the subreaper of everything its commands start, and the book of
//! which of its children are waited for by someone.
//!
//! After every command exits, what it left in its session must die with it (E3).
//! Finding that out used to take a pass over all of `/proc` (a `getsid` per process
//! of every user), the largest single cost of a `bash` call after the spawn itself
//! (BENCHMARKS.md). As a child subreaper (`PR_SET_CHILD_SUBREAPER`), the daemon
//! becomes the parent of every process whose own parent dies below it: when a
//! command's leader has exited, anything of its session still alive is, or descends
//! from, a child of the daemon that nobody started on purpose. So when every child
//! the daemon has is one it started and waits for, nothing of any command is left,
//! and the pass over `/proc` is skipped. Reading the daemon's adopted children (one
//! small file) costs a few microseconds whatever else runs on the machine.
//!
//! The price: the daemon must reap those adopted orphans, or their zombies would
//! pile up under it. It may reap only children no one else waits for (reaping
//! someone's child makes their `wait` fail), so every child the daemon starts is
//! booked here from before it exists until its owner has reaped it:
//! * [`starting`] is held around each start (and around code that starts and waits
//!   in one call, such as `Command::output`, whose pid we never learn): no orphan is
//!   reaped while one is held;
//! * [`Starting::owned`] books the new child's pid until the owner reaped it;
//! * [`spawn`] does both for a `tokio::process` child.
//!
//! Where the shortcut is blind (both deliberate moves, and both still found by the
//! marker when the task or its scope is killed and at shutdown, like any process
//! that detached on purpose): a process the leader starts with `clone(CLONE_PARENT)`
//! becomes a sibling under the thread that started the leader, not an orphan; and a
//! process that enters another PID namespace (`setns`) leaves its orphans to that
//! namespace's init. The scan caught both after a normal exit; this does not.
//!
//! A side effect: what detaches on purpose (`setsid cmd &`) is now the daemon's child,
//! not init's (its `getppid()` is the daemon), and while one runs, every exit takes
//! the scan again.
//!
//! Every child a daemon process starts goes through this module (ARCHITECTURE.md's
//! invariants); one that did not could be reaped under its owner. Adopting is
//! opt-in ([`adopt_orphans`], called by `dsh serve` and `dsh exec-helper`): in any
//! other process (the test binaries, which start children of their own) nothing
//! here reaps, and every exit is followed by the full scan as before.

use super::procs::is_zombie;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// How long the reaper waits after a `SIGCHLD` before sweeping, so that one sweep
/// answers every child that ended meanwhile. An adopted orphan's zombie lasts about
/// this long (longer only while starts keep the reaper off, see [`Starting`]).
const SWEEP_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// Set once this process is a subreaper with the reaper running.
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// Exits after which the scan was skipped, and after which it ran, while adopting.
static SKIPPED: AtomicU64 = AtomicU64::new(0);
static SCANNED: AtomicU64 = AtomicU64::new(0);

/// How the check after each command's exit went, for `_dsh/status`: a daemon that
/// adopts but never skips has a child it does not account for, and pays the scan at
/// every exit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExitChecks {
    /// This process is a subreaper (else every exit is followed by the scan).
    pub adopting: bool,
    /// Exits after which nothing could be left, so the scan was skipped.
    pub skipped: u64,
    /// Exits after which the scan ran (an unbooked live child, such as a process
    /// that detached on purpose, was there).
    pub scanned: u64,
}

/// The counts so far.
pub fn exit_checks() -> ExitChecks {
    ExitChecks {
        adopting: ADOPTING.load(Ordering::SeqCst),
        skipped: SKIPPED.load(Ordering::Relaxed),
        scanned: SCANNED.load(Ordering::Relaxed),
    }
}

static BOOK: Mutex<Book> = Mutex::new(Book {
    starting: 0,
    owned: BTreeMap::new(),
});

/// Which children are someone's.
struct Book {
    /// Starts (or start-and-wait calls) in progress: while any is, an unbooked
    /// child may be one of them, so nothing is reaped.
    starting: usize,
    /// Children whose owner will reap them, each with how many bookings name it (a
    /// booking kept a moment past its child's reaping must not drop the booking of a
    /// new child that got the same pid).
    owned: BTreeMap<i32, u32>,
}

fn book() -> MutexGuard<'static, Book> {
    BOOK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Makes this process the subreaper of what it starts and keeps its adopted
/// orphans reaped (on every `SIGCHLD`). Call once, inside the runtime, before the
/// first command. False (and nothing changes) if the kernel refuses.
pub fn adopt_orphans() -> bool {
    // Without the `children` files (a kernel built without CONFIG_PROC_CHILDREN)
    // adopted orphans could never be found, so never reaped: do not adopt.
    if adopted_children().is_none() {
        tracing::warn!(
            "no /proc/<pid>/task/<tid>/children on this kernel: every command's exit is followed by a scan of /proc"
        );
        return false;
    }
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        tracing::warn!(
            error = %std::io::Error::last_os_error(),
            "cannot become a child subreaper: every command's exit is followed by a scan of /proc"
        );
        return false;
    }
    use tokio::signal::unix::{SignalKind, signal};
    let mut exits = match signal(SignalKind::child()) {
        Ok(exits) => exits,
        Err(e) => {
            // Orphans would still be reaped after each command's exit, but one that
            // ends later would stay a zombie: better not to adopt at all.
            tracing::warn!(error = %e, "cannot watch SIGCHLD; not adopting orphans");
            // SAFETY: as above.
            unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) };
            return false;
        }
    };
    ADOPTING.store(true, Ordering::SeqCst);
    tokio::spawn(async move {
        while exits.recv().await.is_some() {
            // Each command's exit already sweeps (`leftovers_possible`); this is for
            // orphans that end on their own, and coalescing the signals of a busy
            // moment keeps it off the path of every call. A zombie left because a
            // start was in progress is tried again after another pause.
            loop {
                tokio::time::sleep(SWEEP_PAUSE).await;
                if !sweep().is_some_and(|s| s.zombies_left) {
                    break;
                }
            }
        }
    });
    true
}

/// Whether something a command started may still be alive after its leader exited:
/// always true unless this process adopts orphans; otherwise true only when the
/// process has a live child that is not booked. Reaps the zombies of adopted
/// orphans on the way.
pub fn leftovers_possible() -> bool {
    if !ADOPTING.load(Ordering::SeqCst) {
        return true;
    }
    let possible = sweep().is_none_or(|s| s.live_unbooked);
    if possible { &SCANNED } else { &SKIPPED }.fetch_add(1, Ordering::Relaxed);
    possible
}

/// What a sweep found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Swept {
    /// A live child nobody booked: an adopted orphan (or a start's child), which may
    /// be, or hide, a leftover of any command.
    live_unbooked: bool,
    /// Zombies of unbooked children that could not be reaped (a start was in
    /// progress).
    zombies_left: bool,
}

/// Reaps the zombies among the unbooked children (unless a start is in progress)
/// and says what is left. None if the children could not be listed.
///
/// An orphan's own children are handed to the daemon before it turns into a zombie,
/// so after a pass that saw a zombie the list is read again: its children, listed
/// only now, may be leftovers. A list is trusted only when two reads agree (the
/// kernel's listing can skip an entry when another child is reaped meanwhile).
fn sweep() -> Option<Swept> {
    const PASSES: usize = 8;
    for _ in 0..PASSES {
        let mut children = stable_children()?;
        // Only unbooked children matter: a booked one's state is not read at all.
        {
            let book = book();
            children.retain(|pid| !book.owned.contains_key(pid));
        }
        // Read outside the lock: a state may be stale by the time it is used, but only
        // toward "alive" (a live child may die; a zombie stays one until reaped, and
        // only the lock holder reaps an unbooked child). A child booked meanwhile is
        // skipped again below.
        let states: Vec<(i32, Option<bool>)> = children
            .into_iter()
            .map(|pid| (pid, is_zombie(pid)))
            .collect();
        // Taken after the reads, and held while judging and reaping: no start
        // begins meanwhile, so an unbooked child cannot be a start's.
        let book = book();
        let (swept, saw_zombie) = sweep_among(&book, states);
        if swept.live_unbooked || !saw_zombie || swept.zombies_left {
            return Some(swept);
        }
    }
    // Orphans kept turning into zombies: judge conservatively.
    Some(Swept {
        live_unbooked: true,
        zombies_left: false,
    })
}

/// `sweep`'s judgement of `children` (pid and whether it is a zombie, None: gone),
/// and whether any unbooked zombie was seen.
fn sweep_among(book: &Book, children: Vec<(i32, Option<bool>)>) -> (Swept, bool) {
    let mut swept = Swept::default();
    let mut saw_zombie = false;
    for (pid, zombie) in children {
        if book.owned.contains_key(&pid) {
            continue;
        }
        match zombie {
            Some(true) => {
                saw_zombie = true;
                if book.starting == 0 {
                    // SAFETY: waitpid on one child of ours that nobody else waits for.
                    unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
                } else {
                    swept.zombies_left = true;
                }
            }
            Some(false) => swept.live_unbooked = true,
            // Gone between the listing and now.
            None => {}
        }
    }
    (swept, saw_zombie)
}

/// The main thread's children, read until two reads agree (at most a few times;
/// None if they never do, or the file cannot be read).
fn stable_children() -> Option<Vec<i32>> {
    let mut last = adopted_children()?;
    for _ in 0..4 {
        let now = adopted_children()?;
        if now == last {
            return Some(now);
        }
        last = now;
    }
    None
}

/// The children of this process's main thread, where the kernel puts every orphan
/// it hands to a subreaper: the first live thread of the process, which is the main
/// thread while the process runs (`find_new_reaper` and `find_alive_thread` in
/// kernel/exit.c). The children other threads started are booked, so reading only
/// this one file (about 3 us) misses no orphan (but see the module docs for
/// `CLONE_PARENT`); `tests/it/orphans.rs` fails if an adopted orphan were missed.
fn adopted_children() -> Option<Vec<i32>> {
    use std::io::Read;
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let path = PATH.get_or_init(|| {
        let pid = std::process::id();
        format!("/proc/{pid}/task/{pid}/children")
    });
    // One read() of a buffer that holds the whole list (8000 children): the kernel
    // builds it in one go then, where reads of a few bytes each restart it by
    // position. The buffer is kept per thread, so it is not zeroed at every exit.
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; 64 * 1024]);
    }
    let mut file = std::fs::File::open(path).ok()?;
    BUF.with_borrow_mut(|buf| {
        let n = file.read(buf).ok()?;
        if n == buf.len() {
            // Perhaps more than fits: not known, so not trusted.
            return None;
        }
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        let mut pids: Vec<i32> = text
            .split_ascii_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        pids.sort_unstable();
        Some(pids)
    })
}

/// Held around starting a child until it is booked ([`Starting::owned`]), or
/// around a call that starts and reaps a child itself (`Command::output`): no
/// orphan is reaped meanwhile.
#[must_use = "a start must hold it until the child is booked"]
pub struct Starting(());

/// Begins a start; see [`Starting`].
pub fn starting() -> Starting {
    book().starting += 1;
    Starting(())
}

impl Starting {
    /// Books `pid` as a child its owner will reap, until the returned guard drops.
    pub fn owned(self, pid: i32) -> Owned {
        *book().owned.entry(pid).or_default() += 1;
        Owned(pid)
        // `self` drops here, after the booking: no gap in which the child is
        // neither starting nor owned.
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        book().starting -= 1;
    }
}

/// A booked child: the reaper leaves it to its owner while this lives. Drop it once
/// the child is reaped (or given up on: then an exit is reaped here).
#[derive(Debug)]
pub struct Owned(i32);

impl Drop for Owned {
    fn drop(&mut self) {
        let mut book = book();
        if let Some(count) = book.owned.get_mut(&self.0) {
            *count -= 1;
            if *count == 0 {
                book.owned.remove(&self.0);
            }
        }
    }
}

/// A `tokio::process` child, booked until its `wait` or `try_wait` returned its
/// status, or until it is dropped (then tokio's own `kill_on_drop` and late reaping
/// apply; the reaper may take its zombie first, which tokio tolerates). Killing it
/// on drop was tried: it ended ssh masters mid-command and left remote shells'
/// locks behind (pyenv's rehash lock on the test host).
#[derive(Debug)]
pub struct Child {
    inner: tokio::process::Child,
    /// Dropped after `inner` (field order), so the booking outlives tokio's drop.
    owned: Option<Owned>,
}

/// `cmd.spawn()`, booked (see the module docs).
pub fn spawn(cmd: &mut tokio::process::Command) -> std::io::Result<Child> {
    let start = starting();
    let inner = cmd.spawn()?;
    let owned = inner.id().map(|pid| start.owned(pid as i32));
    Ok(Child { inner, owned })
}

impl Child {
    /// tokio's `wait`, releasing the booking once the child is reaped.
    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let status = self.inner.wait().await;
        if status.is_ok() {
            self.owned = None;
        }
        status
    }

    /// tokio's `try_wait`, releasing the booking once the child is reaped.
    pub fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        let status = self.inner.try_wait();
        if matches!(status, Ok(Some(_))) {
            self.owned = None;
        }
        status
    }
}

impl std::ops::Deref for Child {
    type Target = tokio::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

impl std::ops::DerefMut for Child {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zombie child of this test, reaped by nobody yet.
    fn zombie() -> std::process::Child {
        let child = std::process::Command::new("true").spawn().unwrap();
        while is_zombie(child.id() as i32) != Some(true) {
            std::thread::yield_now();
        }
        child
    }

    /// `pids` with their states, as `sweep` reads them.
    fn states(pids: &[i32]) -> Vec<(i32, Option<bool>)> {
        pids.iter().map(|&pid| (pid, is_zombie(pid))).collect()
    }

    // `sweep_among` is given only this test's children: the other tests of this
    // binary have children of their own that a real sweep would take.
    #[test]
    fn only_unbooked_zombies_are_reaped_and_never_during_a_start() {
        let mut booked = zombie();
        let owned = starting().owned(booked.id() as i32);
        // A second booking of the same pid (a new child that got it before the old
        // booking was dropped) survives the first one's drop.
        let again = starting().owned(booked.id() as i32);
        drop(owned);
        let mut live = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let (swept, _) = sweep_among(&book(), states(&[booked.id() as i32, live.id() as i32]));
        assert!(swept.live_unbooked, "a live unbooked child is reported");
        assert!(
            booked.try_wait().unwrap().is_some(),
            "the owner still reaps it"
        );
        drop(again);
        live.kill().unwrap();
        live.wait().unwrap();

        let mut unbooked = zombie();
        let start = starting();
        let (swept, saw_zombie) = sweep_among(&book(), states(&[unbooked.id() as i32]));
        assert!(saw_zombie && swept.zombies_left && !swept.live_unbooked);
        drop(start);
        assert!(
            unbooked.try_wait().unwrap().is_some(),
            "not reaped during a start"
        );

        let orphan_like = zombie();
        let pid = orphan_like.id() as i32;
        // Other tests may be starting children right now; wait for a quiet moment.
        loop {
            let book = book();
            if book.starting == 0 {
                let (swept, saw_zombie) = sweep_among(&book, states(&[pid]));
                assert_eq!((swept, saw_zombie), (Swept::default(), true));
                break;
            }
            drop(book);
            std::thread::yield_now();
        }
        assert_ne!(is_zombie(pid), Some(true), "an unbooked zombie is reaped");
        // Not waited for again: the pid may already be another test's child.
        drop(orphan_like);
    }

    /// A tripwire for the invariant in the module docs: every file outside tests that
    /// can start a process is listed here, after its starts were checked to be booked.
    /// A new one fails this test until it is checked too (and added).
    #[test]
    fn every_file_that_starts_processes_was_checked_for_booking() {
        const CHECKED: &[&str] = &[
            "src/cli/reach.rs",     // the CLI's own start of the daemon, not a daemon process
            "src/cli/workdirs.rs", // `cp -a` and `git worktree` for a batch, in the CLI's own process
            "src/exec/children.rs", // children::spawn
            "src/exec/local.rs",   // a Command that spawn.rs starts
            "src/exec/process.rs", // Commands that spawn.rs starts
            "src/exec/remote/install.rs", // children::spawn, starting() around output/status/upload
            "src/exec/sandbox/mod.rs", // starting() around the probes; the rest through spawn.rs
            "src/exec/sandbox/netns.rs", // starting() + owned() around the fork that makes the listener
            "src/exec/spawn.rs",         // books every HostProcess
            "src/exec/ssh.rs",           // children::spawn, starting() around output
            "src/hooks/external/runner.rs", // children::spawn
            "src/upgrade.rs",            // children::spawn for the hand-over check
        ];
        fn starts_processes(code: &str) -> bool {
            let code = code.split("#[cfg(test)]").next().unwrap_or_default();
            let bare_command_new = code.match_indices("Command::new(").any(|(i, _)| {
                !code[..i]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            bare_command_new
                || [
                    "process::Command",
                    "libc::clone",
                    "libc::fork",
                    "posix_spawn",
                ]
                .iter()
                .any(|needle| code.contains(needle))
        }
        fn walk(dir: &std::path::Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, found);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && path.file_name().is_none_or(|n| n != "tests.rs")
                    && starts_processes(&std::fs::read_to_string(&path).unwrap())
                {
                    let root = env!("CARGO_MANIFEST_DIR");
                    found.push(path.strip_prefix(root).unwrap().display().to_string());
                }
            }
        }
        let mut found = Vec::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut found,
        );
        found.sort();
        assert_eq!(
            found, CHECKED,
            "a file that starts processes: book its children"
        );
    }

    #[test]
    fn the_main_threads_children_are_listed() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Started from this test's thread, it is listed under that thread; the
        // main thread's list is what `sweep` reads, and it must parse.
        assert!(adopted_children().is_some());
        let mine = std::fs::read_to_string(format!(
            "/proc/self/task/{}/children",
            nix::unistd::gettid()
        ))
        .unwrap();
        assert!(mine.split_ascii_whitespace().any(|p| p == pid.to_string()));
        assert_eq!(is_zombie(pid), Some(false));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(is_zombie(pid), None);
    }
}
