//! What a mount cannot hold, checked when a command's sandbox is gone (E9).
//!
//! A mount guards what exists when the sandbox starts. Three things a command can
//! still make in a writable root would run its code outside the sandbox later, and
//! each is found afterwards and renamed to `<name>.dsh-refused` (or, when taken,
//! `<name>.dsh-refused-<command>-<N>`, N without a bound; git and editors no longer
//! read it; a person can look and rename it back), logged, and told in the
//! command's output:
//!
//! - a git redirect in a guarded repository's writable `.git`: `commondir` (git then
//!   takes config and hooks from the directory it names) or `config.worktree`;
//! - a new `.git` or bare repository (whose `HEAD` is renamed) anywhere the walk
//!   reaches: git takes the nearest one, so a
//!   repository made inside a project runs its own hooks and config (a
//!   `core.fsmonitor` runs at the next `git status`, which editors run by
//!   themselves). `[exec.sandbox] allow_git_config` lifts this one, as it lifts the
//!   guard on config;
//! - a protected name that was a symlink (`.vscode -> settings`) and now is not,
//!   or leads elsewhere: the mount held the link's target, not the link. The link
//!   is put back.
//!
//! New repositories are searched for in the whole root, without depth cap or skip
//! list, reading only the directories that changed since a snapshot of the root's
//! directories and repositories taken when the command started ([`Watch::prepare`],
//! itself from the root's last snapshot; a full search when there is none). Found
//! there, a repository is the command's when the start's snapshot did not have it
//! (however old: one moved into place keeps its birth time) or when it was born
//! since; a repository the person had is never taken for the command's. Without a
//! start snapshot (its search ran past its budget), one moved in is known only
//! where the start's walk looked (`protect`: three levels, no dependency folders),
//! and the output says so. A directory the daemon cannot read, below which the
//! command could have made one, is said too.
//!
//! Every rename and every look at a name is made beneath a directory descriptor
//! opened when the command started (the root, the guarded git directory, the
//! protected link's directory), never by a path resolved again at the end: a
//! directory swapped for a symlink meanwhile leads the check nowhere else.
//!
//! The session's next command waits while a check of its last one runs
//! ([`Tripwires::waiter`]), or while one whose sandbox has exited has not begun
//! (the daemon has not seen the end yet): what the check refuses is gone before
//! anything of the session runs again.
//!
//! What is left: the window while the command runs (a background task can keep a
//! redirect in place for as long as it lives), and a `.git` a person made by hand
//! in a root while a command ran there, which is renamed like the command's.

mod changed;

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

pub use changed::open_beneath;

/// The files that would send git elsewhere for its config and hooks, which a
/// command can create in a repository's writable `.git` (a mount cannot hold a
/// file that does not exist, and git refuses an empty one).
const REDIRECTS: [&str; 2] = ["commondir", "config.worktree"];

/// How many directories the end-of-command search for new repositories reads at
/// most per root; past it the check says it could not finish.
pub const SEARCH_BUDGET_DIRS: usize = 1_000_000;

/// The most directories a kept snapshot may record (about 100 bytes each), and how
/// many roots keep one: a bigger root is searched in full each time.
const SNAPSHOT_MAX_DIRS: usize = 250_000;
const SNAPSHOT_MAX_ROOTS: usize = 32;

/// What one command's sandbox is checked for when it is gone, as it was when the
/// sandbox started.
#[derive(Debug, Default)]
pub struct Watch {
    /// Guarded git directories (a redirect in them is refused).
    pub gitdirs: Vec<PathBuf>,
    /// Protected names that were symlinks, with their targets.
    pub links: Vec<(PathBuf, PathBuf)>,
    /// Each root whose new repositories are refused, with the ones the start's walk
    /// saw.
    pub repositories: Vec<(PathBuf, Vec<PathBuf>)>,
    /// The roots whose start walk stopped at its bound (`protect::MAX_DIRS`): where
    /// it looked is not known there, so without a start snapshot only birth time
    /// tells a new repository.
    pub truncated: Vec<PathBuf>,
    /// Filled by [`Tripwires::set`]: what the check works from.
    opened: Opened,
    /// Held while the check of this watch runs ([`Tripwires::ending`]).
    in_flight: Option<CheckGuard>,
    /// The sandbox's host process (bwrap), as a pidfd ([`Tripwires::started`]):
    /// once it has exited, the session's next command waits for this check though
    /// the daemon has not seen the end yet.
    process: Option<OwnedFd>,
}

/// What [`Tripwires::set`] takes at the start: descriptors, times, snapshots.
#[derive(Debug, Default)]
struct Opened {
    /// Which redirects each of `gitdirs` already had.
    redirects_before: Vec<[bool; 2]>,
    /// Each of `gitdirs`, opened.
    gitdir_fds: Vec<Option<OwnedFd>>,
    /// The directory of each of `links`, opened.
    link_dirs: Vec<Option<OwnedFd>>,
    /// Each of `repositories`' roots, opened, with its snapshot taken when the
    /// command started (`None` when that search could not finish).
    roots: Vec<(Option<OwnedFd>, Option<Arc<changed::Snapshot>>)>,
    /// The command's own part of the names refusals take (its sequence number in
    /// the executor, from its mark).
    label: String,
    /// When the sandbox started: a repository born since is one the command made.
    started: Option<std::time::SystemTime>,
    /// Where the check keeps each root's snapshot for the next command.
    snapshots: Snapshots,
}

/// The last snapshot of each root (a command's start or end), for the next search.
pub type Snapshots = Arc<Mutex<HashMap<PathBuf, Arc<changed::Snapshot>>>>;

/// The checks running, by the scope (session) of their commands.
#[derive(Debug, Default, Clone)]
struct Checks(Arc<(Mutex<HashMap<String, usize>>, Condvar)>);

/// One check running, counted under its scope until dropped.
#[derive(Debug)]
struct CheckGuard {
    checks: Checks,
    scope: String,
}

impl Drop for CheckGuard {
    fn drop(&mut self) {
        let (running, ended) = &*self.checks.0;
        let mut running = running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = running.get_mut(&self.scope) {
            *n -= 1;
            if *n == 0 {
                running.remove(&self.scope);
            }
        }
        ended.notify_all();
    }
}

/// Waits for the checks of one scope ([`Tripwires::waiter`]).
pub struct Waiter {
    checks: Checks,
    scope: String,
}

/// The longest a command waits for its session's checks before it is refused: a
/// check ends within its budget, so this bounds only one that can never end (its
/// task dropped between the command's end and the check).
const CHECK_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

impl Waiter {
    /// Returns once no check of the scope runs (on a thread that may block: the
    /// launcher's layout walk runs off the async workers), or why the command is
    /// refused when none ended within [`CHECK_WAIT`] (closed: it never starts
    /// beside what a check did not look at).
    pub fn wait(self) -> Result<(), String> {
        let (running, ended) = &*self.checks.0;
        let deadline = std::time::Instant::now() + CHECK_WAIT;
        let mut running = running.lock().unwrap_or_else(|p| p.into_inner());
        while running.contains_key(&self.scope) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "the sandbox's end-of-command check of this session's last command has not                      finished in {} s; nothing more runs in this session's sandbox until it has",
                    CHECK_WAIT.as_secs()
                ));
            }
            running = ended
                .wait_timeout(running, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Ok(())
    }
}

/// The scope part of a command's mark (`<prefix><scope>/<n>`).
fn scope_of(mark: &str) -> &str {
    mark.rsplit_once('/').map_or(mark, |(scope, _)| scope)
}

/// The watches of the running sandboxes, by their commands' marks.
#[derive(Debug, Default)]
pub struct Tripwires {
    by_mark: HashMap<String, Watch>,
    snapshots: Snapshots,
    checks: Checks,
}

fn open_dir(path: &Path) -> Option<OwnedFd> {
    use nix::fcntl::OFlag;
    nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()
}

/// A pidfd of `pid`, or `None` (no such process, or a kernel without pidfds).
fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the descriptor was just made and is owned by nothing else.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether the process behind `pidfd` has exited (a pidfd polls readable from its
/// exit on, reaped or not).
fn has_exited(pidfd: &OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    let mut poll = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, which outlives the call; no wait.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & libc::POLLIN != 0
}

impl Tripwires {
    /// Where the roots' snapshots are kept, for [`Watch::prepare`] (which runs
    /// without the lock of the watches).
    pub fn snapshots(&self) -> Snapshots {
        self.snapshots.clone()
    }

    /// Starts watching for the command marked `mark`: [`Watch::prepare`] (unless
    /// it was) and [`Tripwires::insert`], under one lock (the tests' way; the
    /// launcher prepares off the lock).
    #[cfg(test)]
    pub fn set(&mut self, mark: &str, mut watch: Watch) {
        if watch.opened.started.is_none() {
            watch.prepare(&self.snapshots);
        }
        self.insert(mark, watch);
    }

    /// Watches `watch` (prepared) for the command marked `mark`.
    pub fn insert(&mut self, mark: &str, mut watch: Watch) {
        watch.opened.label = mark
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect();
        self.by_mark.insert(mark.to_string(), watch);
    }

    /// The sandbox of `mark` started as the process `pid` (bwrap on the host): it
    /// is held as a pidfd, which says when it has exited without the daemon's
    /// reaper (see [`Tripwires::waiter`]).
    pub fn started(&mut self, mark: &str, pid: i32) {
        if let Some(watch) = self.by_mark.get_mut(mark) {
            watch.process = pidfd_open(pid);
        }
    }

    /// What a command of `mark`'s scope waits on before it starts: the checks of
    /// that scope's ended commands still running, counting as ended every sandbox
    /// of the scope whose process has exited, though the daemon has not seen it
    /// yet (issue 40: its check runs once the daemon does, and the command waits for
    /// it). A sandbox whose process is not known yet (the instant between its
    /// spawn and [`Tripwires::started`]) counts as running.
    pub fn waiter(&mut self, mark: &str) -> Waiter {
        let scope = scope_of(mark);
        let exited: Vec<String> = self
            .by_mark
            .iter()
            .filter(|(m, w)| {
                scope_of(m) == scope
                    && w.in_flight.is_none()
                    && w.process.as_ref().is_some_and(has_exited)
            })
            .map(|(m, _)| m.clone())
            .collect();
        if !exited.is_empty() {
            self.ending(&|m: &str| exited.iter().any(|e| e == m));
        }
        Waiter {
            checks: self.checks.clone(),
            scope: scope_of(mark).to_string(),
        }
    }

    /// The sandboxes `ended` picks are ending: their checks count as running from
    /// now (before their processes are reaped) until each check is done.
    pub fn ending(&mut self, ended: &impl Fn(&str) -> bool) {
        for (mark, watch) in self.by_mark.iter_mut().filter(|(m, _)| ended(m)) {
            if watch.in_flight.is_none() {
                let scope = scope_of(mark).to_string();
                let (running, _) = &*self.checks.0;
                *running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(scope.clone())
                    .or_default() += 1;
                watch.in_flight = Some(CheckGuard {
                    checks: self.checks.clone(),
                    scope,
                });
            }
        }
    }

    /// The watches of the sandboxes `ended` picks, which stop being watched; each
    /// counts as a running check until it is checked or dropped.
    pub fn take(&mut self, ended: &impl Fn(&str) -> bool) -> Vec<Watch> {
        self.ending(ended);
        let marks: Vec<String> = self.by_mark.keys().filter(|m| ended(m)).cloned().collect();
        marks
            .iter()
            .filter_map(|m| self.by_mark.remove(m))
            .collect()
    }
}

impl Watch {
    /// Takes what the check works from, before the command starts: the descriptors
    /// it works beneath, the redirects the git directories had, and each root's
    /// snapshot now (from the root's last one, reading only what changed since; a
    /// full search without one). The snapshot says which repositories were there
    /// before the command: one that appears is the command's however old it is
    /// (moved into place), anywhere in the root. Searches the disk: run it off the
    /// lock of the watches.
    pub fn prepare(&mut self, snapshots: &Snapshots) {
        let opened = &mut self.opened;
        // The precise clock: a person's repository made before the start is never
        // taken for the command's. Where file times come from the coarse clock
        // (a tick behind), a repository made in the tick after the start could
        // look older; bwrap's own start takes longer than that tick.
        let started = std::time::SystemTime::now();
        opened.started = Some(started);
        opened.redirects_before = self
            .gitdirs
            .iter()
            .map(|g| REDIRECTS.map(|name| g.join(name).symlink_metadata().is_ok()))
            .collect();
        opened.gitdir_fds = self.gitdirs.iter().map(|g| open_dir(g)).collect();
        opened.link_dirs = self
            .links
            .iter()
            .map(|(link, _)| link.parent().and_then(open_dir))
            .collect();
        opened.roots = self
            .repositories
            .iter()
            .map(|(root, _)| {
                let fd = open_dir(root);
                let start = fd
                    .as_ref()
                    .and_then(|fd| snapshot_now(fd, root, snapshots, started));
                (fd, start)
            })
            .collect();
        opened.snapshots = snapshots.clone();
    }

    /// Checks what the sandbox left, refusing what it made. Returns one line per
    /// refusal (or per check that could not be made), for the command's output.
    pub fn check(self) -> Vec<String> {
        super::held::hold(self.repositories.iter().map(|(root, _)| root.as_path()));
        let mut notes = Vec::new();
        let opened = &self.opened;
        let label = &opened.label;
        for (i, gitdir) in self.gitdirs.iter().enumerate() {
            let Some(Some(fd)) = opened.gitdir_fds.get(i) else {
                notes.push(format!(
                    "the sandbox could not check {} for git redirects (it could not be opened \
                     when the command started); do not run git there before looking",
                    gitdir.display()
                ));
                continue;
            };
            let before = opened.redirects_before.get(i).copied().unwrap_or([true; 2]);
            for (name, existed) in REDIRECTS.iter().zip(before) {
                if !existed && exists_in(fd, Path::new(name)) {
                    notes.push(refuse(
                        fd,
                        Path::new(name),
                        &gitdir.join(name),
                        "a git redirect (git would read config and hooks elsewhere)",
                        label,
                    ));
                }
            }
        }
        for (i, (root, before)) in self.repositories.iter().enumerate() {
            notes.extend(self.check_root(i, root, before));
        }
        for (i, (link, target)) in self.links.iter().enumerate() {
            let (Some(Some(dir)), Some(name)) = (opened.link_dirs.get(i), link.file_name()) else {
                continue;
            };
            let name = Path::new(name);
            if nix::fcntl::readlinkat(dir, name).is_ok_and(|now| Path::new(&now) == target) {
                continue;
            }
            if exists_in(dir, name) {
                notes.push(refuse(
                    dir,
                    name,
                    link,
                    "a protected path that was a symlink and was replaced",
                    label,
                ));
            }
            if let Err(e) = nix::unistd::symlinkat(target.as_path(), dir, name) {
                tracing::error!(link = %link.display(), "cannot put back a protected symlink: {e}");
            }
        }
        notes
    }

    /// The new repositories under one root, refused beneath its descriptor.
    fn check_root(&self, i: usize, root: &Path, before: &[PathBuf]) -> Vec<String> {
        let opened = &self.opened;
        let (Some((Some(fd), previous)), Some(started)) = (opened.roots.get(i), opened.started)
        else {
            return vec![format!(
                "the sandbox could not search {} for repositories this command made (the root \
                 could not be opened when it started); do not run git there before looking",
                root.display()
            )];
        };
        let mut search = changed::search(fd, previous.as_deref(), started, SEARCH_BUDGET_DIRS);
        keep(
            &opened.snapshots,
            root,
            search.snapshot.take().map(Arc::new),
        );
        let mut notes: Vec<String> = search
            .unreadable
            .iter()
            .map(|(rel, e)| {
                tracing::error!(dir = %root.join(rel).display(), "the end-of-command check cannot read a directory: {e}");
                format!(
                    "the sandbox could not check {} for repositories this command made: the \
                     daemon cannot read it ({e}), and the command could have made one below it; \
                     do not run git there before looking",
                    root.join(rel).display()
                )
            })
            .collect();
        if previous.is_none() {
            notes.push(format!(
                "the sandbox could not tell which repositories under {} were there before \
                 this command (its search when the command started did not finish): one moved \
                 in from elsewhere is refused only where the start's walk looked; do not run \
                 git there before looking",
                root.display()
            ));
        }
        if search.unfinished {
            tracing::error!(root = %root.display(), "the search for new repositories did not finish");
            notes.push(format!(
                "the sandbox could not finish its search for repositories this command \
                 made under {} ({SEARCH_BUDGET_DIRS} directories read): what lies beyond \
                 was not checked; do not run git there before looking",
                root.display()
            ));
        }
        let walked_all = !self.truncated.iter().any(|t| t == root);
        // A repository the start's snapshot did not have is new however old its
        // birth time (moved into place). Without that snapshot, only where the
        // start's walk looked is that known.
        let moved_in = search.seen.iter().filter(|rel| match previous {
            Some(start) => !start.had(rel),
            None => walked_all && rel.parent().is_some_and(super::protect::walk_covers),
        });
        let mut new: Vec<&PathBuf> = Vec::new();
        for rel in search.made.iter().chain(moved_in) {
            if !new.contains(&rel) && !before.contains(&root.join(rel)) {
                new.push(rel);
            }
        }
        for rel in new {
            // A `.git` is renamed whole; a bare repository (whose directory may be
            // the root itself) loses its HEAD, without which git takes it for no
            // repository at all.
            let (target, what) = if rel.file_name().is_some_and(|n| n == ".git") {
                (rel.clone(), "a new repository")
            } else {
                (rel.join("HEAD"), "the HEAD of a new bare repository")
            };
            notes.push(refuse_beneath(
                fd,
                &target,
                &root.join(&target),
                &format!(
                    "{what} (its hooks and config would run outside the sandbox; \
                     [exec.sandbox] allow_git_config allows it)"
                ),
                &opened.label,
            ));
        }
        notes
    }
}

/// The snapshot of the root `root` (opened as `fd`) now, from its kept one, which
/// it replaces; `None` when the search could not finish.
fn snapshot_now(
    fd: &OwnedFd,
    root: &Path,
    snapshots: &Snapshots,
    now: std::time::SystemTime,
) -> Option<Arc<changed::Snapshot>> {
    let kept = snapshots
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(root)
        .cloned();
    let search = changed::search(fd, kept.as_deref(), now, SEARCH_BUDGET_DIRS);
    let snapshot = search.snapshot.map(Arc::new);
    keep(snapshots, root, snapshot.clone());
    snapshot
}

/// Keeps `snapshot` as the root's for the next search, within the bounds; a root
/// without one (its search did not finish, or the bounds are full) is searched in
/// full next time.
fn keep(snapshots: &Snapshots, root: &Path, snapshot: Option<Arc<changed::Snapshot>>) {
    let mut kept = snapshots.lock().unwrap_or_else(|p| p.into_inner());
    match snapshot {
        Some(snapshot)
            if snapshot.len() <= SNAPSHOT_MAX_DIRS
                && (kept.len() < SNAPSHOT_MAX_ROOTS || kept.contains_key(root)) =>
        {
            kept.insert(root.to_path_buf(), snapshot);
        }
        _ => {
            kept.remove(root);
        }
    }
}

/// Whether `name` exists in the directory `dir` (a symlink counts as itself).
fn exists_in(dir: &OwnedFd, name: &Path) -> bool {
    nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
}

/// [`refuse`] for `rel` below the root `root`: its directory opened beneath the
/// root with no symlink followed (one swapped in meanwhile fails the open: said,
/// never followed).
fn refuse_beneath(root: &OwnedFd, rel: &Path, shown: &Path, what: &str, label: &str) -> String {
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return format!("the sandbox could not refuse {} ({what})", shown.display());
    };
    use nix::fcntl::OFlag;
    match open_beneath(root, parent, OFlag::O_PATH | OFlag::O_DIRECTORY) {
        Ok(dir) => refuse(&dir, Path::new(name), shown, what, label),
        Err(e) => {
            tracing::error!(path = %shown.display(), "a sandboxed command made {what}, which cannot be reached to rename: {e}");
            format!(
                "the sandbox could not refuse {} ({what}): its directory cannot be opened \
                 beneath the root without following a link ({e}); do not run git there before \
                 looking",
                shown.display()
            )
        }
    }
}

/// Renames `name` in the directory `dir` to `<name>.dsh-refused`, or when that is
/// taken to the first free `<name>.dsh-refused-<label>-<N>` (`label` the command's,
/// `N` counting up without a bound: a command that took names ahead cannot run them
/// out), never replacing anything (`RENAME_NOREPLACE`), logs it and says it.
/// `shown` is the path the person is told.
fn refuse(dir: &OwnedFd, name: &Path, shown: &Path, what: &str, label: &str) -> String {
    let mut first = OsString::from(name.as_os_str());
    first.push(".dsh-refused");
    let candidates = std::iter::once(first.clone()).chain((1..=u64::MAX).map(|n| {
        let mut next = first.clone();
        next.push(format!("-{label}-{n}"));
        next
    }));
    let shown_as = |free: &OsString| shown.with_file_name(free);
    for free in candidates {
        let free_path = Path::new(&free);
        let renamed = match nix::fcntl::renameat2(
            dir,
            name,
            dir,
            free_path,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        ) {
            // A file system without RENAME_NOREPLACE: looked at first, then renamed.
            Err(nix::errno::Errno::EINVAL) if !exists_in(dir, free_path) => {
                nix::fcntl::renameat(dir, name, dir, free_path)
            }
            Err(nix::errno::Errno::EINVAL) => Err(nix::errno::Errno::EEXIST),
            other => other,
        };
        match renamed {
            Ok(()) => {
                let free = shown_as(&free);
                tracing::warn!(path = %shown.display(), "a sandboxed command made {what}; renamed to {}", free.display());
                return format!(
                    "the sandbox renamed {} to {}: {what}",
                    shown.display(),
                    free.display()
                );
            }
            Err(nix::errno::Errno::EEXIST | nix::errno::Errno::ENOTEMPTY) => continue,
            Err(e) => {
                tracing::error!(path = %shown.display(), "a sandboxed command made {what}, which cannot be renamed: {e}");
                return format!(
                    "the sandbox could not refuse {} ({what}): {e}",
                    shown.display()
                );
            }
        }
    }
    // 2^64 names taken: not on any file system there is.
    format!(
        "the sandbox could not refuse {} ({what}): every *.dsh-refused name is taken",
        shown.display()
    )
}

/// The end-of-command search over one root on its own, for the bench (E12 in
/// BENCHMARKS.md): the full search every check made before snapshots (every
/// directory read) against the search from the last check's snapshot, in the same
/// run. Not used by the daemon.
#[doc(hidden)]
pub struct RootSearch {
    fd: OwnedFd,
    snapshot: Option<changed::Snapshot>,
}

#[doc(hidden)]
impl RootSearch {
    /// The root opened, with no snapshot yet; `None` when it cannot be opened.
    pub fn open(root: &Path) -> Option<Self> {
        Some(Self {
            fd: open_dir(root)?,
            snapshot: None,
        })
    }

    /// Every directory read, as before; keeps the snapshot it makes. Returns how
    /// many directories were read, or `None` past the budget.
    pub fn full(&mut self) -> Option<usize> {
        let search = changed::search(
            &self.fd,
            None,
            std::time::SystemTime::now(),
            SEARCH_BUDGET_DIRS,
        );
        self.snapshot = search.snapshot;
        (!search.unfinished).then_some(search.read.len())
    }

    /// From the kept snapshot (a full search without one), keeping the new one.
    pub fn changed(&mut self) -> Option<usize> {
        let search = changed::search(
            &self.fd,
            self.snapshot.as_ref(),
            std::time::SystemTime::now(),
            SEARCH_BUDGET_DIRS,
        );
        self.snapshot = search.snapshot;
        (!search.unfinished).then_some(search.read.len())
    }

    /// How many directories the kept snapshot records.
    pub fn recorded(&self) -> usize {
        self.snapshot.as_ref().map_or(0, changed::Snapshot::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(wires: &mut Tripwires, root: &Path, mark: &str) -> Watch {
        wires.set(
            mark,
            Watch {
                gitdirs: vec![root.join(".git")],
                links: vec![(root.join(".vscode"), PathBuf::from("settings"))],
                repositories: vec![(root.to_path_buf(), vec![root.join(".git")])],
                ..Default::default()
            },
        );
        wires.take(&|m: &str| m == mark).pop().unwrap()
    }

    #[test]
    fn what_a_sandbox_made_is_renamed_away_and_a_swapped_link_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config.worktree"), "").unwrap(); // the person's
        std::fs::create_dir(root.join("settings")).unwrap();
        std::os::unix::fs::symlink("settings", root.join(".vscode")).unwrap();
        let mut wires = Tripwires::default();
        wires.set(
            "tag:1.2:abc:/7",
            Watch {
                gitdirs: vec![root.join(".git")],
                links: vec![(root.join(".vscode"), PathBuf::from("settings"))],
                repositories: vec![(root.to_path_buf(), vec![root.join(".git")])],
                ..Default::default()
            },
        );
        // What a command does meanwhile.
        std::fs::write(root.join(".git/commondir"), "../evil\n").unwrap();
        std::fs::create_dir_all(root.join("sub/.git")).unwrap();
        std::fs::remove_file(root.join(".vscode")).unwrap();
        std::fs::create_dir(root.join(".vscode")).unwrap();
        std::fs::create_dir(root.join("sub/.git.dsh-refused")).unwrap(); // taken
        // Issue 40: the names a command could take ahead never run out.
        for n in 1..=150 {
            std::fs::create_dir(root.join(format!("sub/.git.dsh-refused-7-{n}"))).unwrap();
        }
        // A bare repository the command made in the root itself.
        std::fs::write(root.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::create_dir(root.join("objects")).unwrap();
        std::fs::create_dir(root.join("refs")).unwrap();
        let watch = wires.take(&|m: &str| m == "tag:1.2:abc:/7").pop().unwrap();
        let notes = watch.check();
        assert_eq!(notes.len(), 4, "{notes:?}");
        assert!(root.join(".git/commondir.dsh-refused").is_file());
        assert!(root.join(".git/config.worktree").is_file(), "kept");
        assert!(
            root.join("sub/.git.dsh-refused-7-151").is_dir(),
            "{notes:?}"
        );
        assert!(!root.join("HEAD").exists() && root.join("HEAD.dsh-refused").is_file());
        assert!(!root.join("sub/.git").exists());
        assert!(root.join(".vscode.dsh-refused").is_dir());
        assert_eq!(
            std::fs::read_link(root.join(".vscode")).unwrap(),
            PathBuf::from("settings")
        );
    }

    #[test]
    fn a_sandbox_that_changed_nothing_has_nothing_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir(root.join("settings")).unwrap();
        std::os::unix::fs::symlink("settings", root.join(".vscode")).unwrap();
        let mut wires = Tripwires::default();
        let watch = watched(&mut wires, root, "tag:1.2:abc:/7");
        assert!(watch.check().is_empty());
        assert!(root.join(".vscode").is_symlink());
        // The next command's check starts from the snapshot the first one left.
        let watch = watched(&mut wires, root, "tag:1.2:abc:/8");
        assert!(watch.opened.roots[0].1.is_some());
        assert!(watch.check().is_empty());
    }

    /// E12 (issue 40): a repository moved into place where the start's walk looked
    /// keeps its old birth time, and is refused all the same.
    #[test]
    fn e12_a_repository_moved_into_place_is_refused_though_it_is_old() {
        let dir = tempfile::tempdir().unwrap();
        let (root, elsewhere) = (dir.path().join("root"), dir.path().join("elsewhere"));
        std::fs::create_dir_all(elsewhere.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("a")).unwrap();
        let mut wires = Tripwires::default();
        wires.set(
            "s/1",
            Watch {
                repositories: vec![(root.clone(), Vec::new())],
                ..Default::default()
            },
        );
        std::fs::rename(elsewhere.join(".git"), root.join("a/.git")).unwrap();
        let notes = wires.take(&|m: &str| m == "s/1").pop().unwrap().check();
        assert!(root.join("a/.git.dsh-refused").is_dir(), "{notes:?}");
    }

    /// E12 (issue 40), the rename beneath a descriptor: a directory on the way to
    /// what is refused, swapped for a symlink to a place outside the root after the
    /// search found it, leads the rename nowhere. A rename by path (the attack, shown
    /// first) moves the outside repository's `.git` instead.
    #[test]
    fn e12_a_rename_is_made_beneath_the_root_and_a_swapped_symlink_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = (dir.path().join("root"), dir.path().join("outside"));
        let swap = |root: &Path| {
            std::fs::rename(root.join("sub"), root.join("moved")).unwrap();
            std::os::unix::fs::symlink(&outside, root.join("sub")).unwrap();
        };
        std::fs::create_dir_all(root.join("sub/.git")).unwrap();
        std::fs::create_dir_all(outside.join(".git")).unwrap();
        // The attack: found at root/sub/.git, renamed by its path after the swap.
        swap(&root);
        std::fs::rename(root.join("sub/.git"), root.join("sub/.git.dsh-refused")).unwrap();
        assert!(
            outside.join(".git.dsh-refused").is_dir(),
            "a path-based rename followed the swapped link"
        );
        std::fs::rename(outside.join(".git.dsh-refused"), outside.join(".git")).unwrap();
        std::fs::remove_file(root.join("sub")).unwrap();
        std::fs::remove_dir_all(root.join("moved")).unwrap();
        std::fs::create_dir_all(root.join("sub/.git")).unwrap();
        // Held: the root's descriptor was opened at the start.
        let fd = open_dir(&root).unwrap();
        swap(&root);
        let note = refuse_beneath(
            &fd,
            Path::new("sub/.git"),
            &root.join("sub/.git"),
            "a new repository",
            "1",
        );
        assert!(note.contains("could not refuse"), "{note}");
        assert!(
            outside.join(".git").is_dir(),
            "the outside repository stands"
        );
        assert!(!outside.join(".git.dsh-refused").exists());
    }

    /// E12 (issue 40): a repository moved into a place the start's walk never looks
    /// (under `node_modules/`, three levels further down, in a root whose start walk
    /// was cut short) keeps its old birth time, so birth time alone misses it (the
    /// attack, shown first by the search with no start snapshot). The start's
    /// snapshot says it was not there: refused. The person's repository that was
    /// there already stays.
    #[test]
    fn e12_a_repository_moved_in_anywhere_is_refused_and_the_persons_stay() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let (kept, old, moved) = (
            root.join("node_modules/kept/.git"),
            root.join("old/a/b/c/d/.git"),
            root.join("node_modules/x/y/z/.git"),
        );
        std::fs::create_dir_all(&kept).unwrap();
        std::fs::create_dir_all(&old).unwrap();
        std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
        let before = std::time::SystemTime::now();
        let mut wires = Tripwires::default();
        wires.set(
            "s/1",
            Watch {
                repositories: vec![(root.clone(), Vec::new())],
                truncated: vec![root.clone()],
                ..Default::default()
            },
        );
        std::fs::rename(&old, &moved).unwrap();
        let fd = open_dir(&root).unwrap();
        let by_birth = changed::search(&fd, None, before, SEARCH_BUDGET_DIRS);
        assert!(
            by_birth.made.is_empty() && by_birth.seen.len() == 2,
            "birth time alone misses it: {by_birth:?}"
        );
        let notes = wires.take(&|m: &str| m == "s/1").pop().unwrap().check();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("node_modules/x/y/z/.git"), "{notes:?}");
        assert!(!moved.exists() && moved.with_file_name(".git.dsh-refused").is_dir());
        assert!(kept.is_dir(), "the person's repository stays");
    }

    /// Issue 40: a command started after its session's last sandbox ended, but
    /// before the daemon saw that end, waits for that sandbox's check all the same:
    /// its process, held as a pidfd, says it has exited. Shown first without the
    /// pidfd (the old path: the daemon had not counted the check, the command did
    /// not wait), and that a sandbox still running holds its session up not at all.
    /// By the order of events only.
    #[test]
    fn a_sessions_command_waits_for_a_check_the_daemon_has_not_begun() {
        use std::process::{Command, Stdio};
        let mut wires = Tripwires::default();
        for mark in ["p:aa/1", "p:bb/1", "p:cc/1"] {
            wires.set(mark, Watch::default());
        }
        let mut running = Command::new("cat").stdin(Stdio::piped()).spawn().unwrap();
        let mut exited = Command::new("true").spawn().unwrap();
        wires.started("p:aa/1", exited.id() as i32);
        wires.started("p:bb/1", running.id() as i32);
        exited.wait().unwrap();
        // The old path: no process known, nothing counted, nothing waited for.
        wires.waiter("p:cc/2").wait().unwrap();
        // Still running: its session's next command starts.
        wires.waiter("p:bb/2").wait().unwrap();
        let events = Arc::new(Mutex::new(Vec::<&str>::new()));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let waiter = wires.waiter("p:aa/2");
        let next = std::thread::spawn({
            let events = events.clone();
            move || {
                let _ = ready_tx.send(());
                waiter.wait().unwrap();
                events.lock().unwrap().push("next command started");
            }
        });
        ready_rx.recv().unwrap();
        events.lock().unwrap().push("check ended");
        // The daemon sees the end: the check runs and ends.
        drop(wires.take(&|m: &str| m == "p:aa/1").pop().unwrap().check());
        next.join().unwrap();
        assert_eq!(
            *events.lock().unwrap(),
            ["check ended", "next command started"]
        );
        drop(running.stdin.take());
        running.wait().unwrap();
    }

    /// The next command of a session waits while the check of its last one runs
    /// (issue 40), shown by the order of events: a check is running (its guard held),
    /// the next command's start waits, the check ends, then the command starts. With
    /// no waiting (another session's command), the start comes first.
    #[test]
    fn a_sessions_next_command_starts_only_after_its_last_ones_check() {
        let mut wires = Tripwires::default();
        wires.set("p:aa/1", Watch::default());
        let watch = wires.take(&|m: &str| m == "p:aa/1").pop().unwrap();
        let events = Arc::new(Mutex::new(Vec::<&str>::new()));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let mut start = |mark: &'static str, name: &'static str| {
            let waiter = wires.waiter(mark);
            let (events, ready) = (events.clone(), ready_tx.clone());
            std::thread::spawn(move || {
                let _ = ready.send(());
                waiter.wait().unwrap();
                events.lock().unwrap().push(name);
            })
        };
        let other = start("p:bb/1", "other session started");
        other.join().unwrap();
        let same = start("p:aa/2", "next command started");
        ready_rx.recv().unwrap();
        ready_rx.recv().unwrap();
        // The waiter of the same session is blocked until the check's end: it cannot
        // have pushed its event, whatever the scheduling.
        events.lock().unwrap().push("check ended");
        drop(watch.check());
        same.join().unwrap();
        assert_eq!(
            *events.lock().unwrap(),
            [
                "other session started",
                "check ended",
                "next command started"
            ]
        );
    }
}
