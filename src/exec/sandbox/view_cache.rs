//! The file tools' view of the sandbox, kept per set of roots while nothing it was
//! built from changed (issue 39, bench X2).
//!
//! Building the layout a command would get walks the session's roots (`protect`),
//! and the view resolves every root, `deny_read` entry and dsh's own directories to
//! its real path: together they cost a `read_file` under the sandbox well over the
//! same call under the local executor (about 80 `readlink`s a call for the
//! resolving alone). The view depends on the disk only through the directories that
//! walk reads, the directories each of those paths is resolved through, the host's
//! sockets ([`super::HostView`], re-read every few seconds) and the mounts. So it is
//! kept with one inotify instance, set up *before* it is built:
//!
//! * every directory the walk can read (each root down to the walk's depth, `.git`
//!   directories included, what it skips excluded): any name created, removed or
//!   renamed there, any file written there (a `.git/config` naming a new hooks
//!   path), the root itself moved;
//! * every directory a path was resolved through, watched before the name was
//!   looked up in it: an event naming what was looked up there (made, removed,
//!   renamed, its mode changed; a link is only ever replaced, never changed) or the
//!   directory itself changing. Other names there (a busy `/tmp` or home) are read
//!   and let go: they cannot change where the paths are;
//! * a lost event (the queue overflowed, a watch dropped), and the mount table of
//!   the daemon's namespace (`/proc/self/mountinfo` polled: a mount changes what a
//!   path shows without an inotify event).
//!
//! Any of them and the next call builds the view afresh. Every check still ends in
//! an `openat2` beneath the allowed base with no symlink ([`super::files`]), so the
//! cache opens no window the walk did not already have: the walk's answer was
//! always as old as the walk.
//!
//! When a root holds more directories than the walk reads, or the kernel refuses a
//! watch (`max_user_watches`), nothing is kept: every call builds the view, as
//! before.

use super::files::{FileView, Missing, resolve_links};
use super::layout::Layout;
use super::{HostSnapshot, SandboxLauncher};
use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// How many sets of roots keep a view (each holds an inotify descriptor).
const MAX_VIEWS: usize = 8;

/// How many directories one set of roots may watch: the walk's own bound
/// ([`super::protect::MAX_DIRS`]); a bigger tree is not kept.
const MAX_WATCHED: usize = super::protect::MAX_DIRS;

/// The views kept, most recently used last.
#[derive(Default)]
pub(super) struct ViewCache {
    kept: Mutex<Vec<Kept>>,
}

/// One kept view and what says it still holds.
struct Kept {
    roots: Vec<PathBuf>,
    view: Arc<FileView>,
    /// The host as the layout saw it: a reading that differs builds it again.
    host: Arc<HostSnapshot>,
    watch: Watch,
}

impl ViewCache {
    /// The view the file tools judge by for `roots`: the kept one while it holds,
    /// else a new one (kept when it can be watched).
    pub(super) fn view(
        &self,
        launcher: &SandboxLauncher,
        roots: &[PathBuf],
    ) -> Result<Arc<FileView>, String> {
        let host = launcher.host.now();
        {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(at) = kept.iter().position(|k| k.roots == roots) {
                let entry = kept.remove(at);
                // A new reading of the host that found the same is the same host.
                if *entry.host == *host && entry.watch.unchanged() {
                    let view = entry.view.clone();
                    kept.push(entry);
                    return Ok(view);
                }
                // Stale: dropped (its watch closes with it).
            }
        }
        // Watched first, then built: whatever changes meanwhile is seen. The paths
        // are resolved first (each directory watched as it is read), then the real
        // roots watched, then walked.
        let layout = |view: &mut FileView| -> Result<(), String> {
            view.layout = launcher.layout_with(Path::new("/"), roots, super::Held::Shown)?;
            Ok(())
        };
        let Some(mut watch) = Watch::new() else {
            let mut view =
                launcher.view_over(Layout::default(), roots, &mut |p| p.canonicalize().ok());
            layout(&mut view)?;
            return Ok(Arc::new(view));
        };
        let mut view = launcher.view_over(Layout::default(), roots, &mut |p| watch.resolve(p));
        let watched = watch.trees(&view.writable) && !watch.broken;
        layout(&mut view)?;
        let view = Arc::new(view);
        if watched {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            kept.retain(|k| k.roots != roots);
            if kept.len() >= MAX_VIEWS {
                kept.remove(0);
            }
            kept.push(Kept {
                roots: roots.to_vec(),
                view: view.clone(),
                host,
                watch,
            });
        }
        Ok(view)
    }
}

/// What an event of one watch descriptor means.
enum Interest {
    /// Anything: a directory the walk reads.
    Any,
    /// Only these names, or the directory itself: a directory paths were resolved
    /// through.
    Names(HashSet<OsString>),
}

/// An inotify instance watching what a view was built from, and the mount table.
struct Watch {
    inotify: Inotify,
    interest: HashMap<WatchDescriptor, Interest>,
    /// `/proc/thread-self/mountinfo`, open since before the view was built: polled, it
    /// says whether a mount was made or removed since.
    mounts: Option<std::fs::File>,
    /// A watch the kernel refused (no more watches) while a path was resolved:
    /// nothing can be kept.
    broken: bool,
    /// Directories still allowed ([`MAX_WATCHED`]).
    budget: usize,
}

/// Every event that can change what the walk finds or where a path resolves: names
/// made, removed or renamed, files written or their modes changed, the directory
/// itself moved or removed.
const EVENTS: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_MODIFY)
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_ATTRIB)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_DONT_FOLLOW)
    .union(AddWatchFlags::IN_ONLYDIR);

/// Why a directory could not be watched.
enum AddError {
    /// It is not there, or not a directory: a path through it resolves to nothing.
    Gone,
    /// The daemon's user may not read it (it may still look a name up in it).
    Unreadable,
    /// The kernel refused (no more watches, the budget spent).
    Refused,
}

impl Watch {
    /// A new instance watching nothing yet, or `None` when the kernel gives none.
    fn new() -> Option<Watch> {
        // Non-blocking: `quiet` reads what is queued and stops at EAGAIN.
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
        Some(Watch {
            inotify,
            interest: HashMap::new(),
            // The thread's, which is the daemon's: nothing in it leaves the namespace
            // (and a test's thread that does sees its own).
            mounts: std::fs::File::open("/proc/thread-self/mountinfo").ok(),
            broken: false,
            budget: MAX_WATCHED,
        })
    }

    /// A watch on each root (real, a directory) and the directories below it the
    /// walk can read; `false` when that cannot be had (too many, or refused).
    fn trees(&mut self, roots: &[PathBuf]) -> bool {
        roots.iter().all(|root| self.tree(root, 0).is_some())
    }

    /// `dir` and the directories below it down to the walk's depth (symlinks not
    /// followed, the walk's skipped names left out; a `.git` directory is watched for
    /// its config and pointers but not entered).
    fn tree(&mut self, dir: &Path, depth: usize) -> Option<()> {
        self.add(dir, None).ok()?;
        if depth >= super::protect::MAX_DEPTH {
            return Some(());
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Some(());
        };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = entry.file_name();
            if super::protect::SKIPPED.iter().any(|s| name == *s) {
                continue;
            }
            if name == ".git" {
                // A directory gone since it was listed is fine (its parent saw it go).
                match self.add(&entry.path(), None) {
                    Ok(()) | Err(AddError::Gone) => continue,
                    Err(AddError::Refused | AddError::Unreadable) => return None,
                }
            }
            match self.tree(&entry.path(), depth + 1) {
                Some(()) => {}
                None if self.broken || self.budget == 0 => return None,
                None => {}
            }
        }
        Some(())
    }

    /// Watches `dir`: for anything (`name` none) or for `name` in it.
    /// Only a tree's directories count against [`MAX_WATCHED`]: a resolved path's
    /// are bounded by its components and links.
    fn add(&mut self, dir: &Path, name: Option<&std::ffi::OsStr>) -> Result<(), AddError> {
        if name.is_none() {
            if self.budget == 0 {
                return Err(AddError::Refused);
            }
            self.budget -= 1;
        }
        let wd = match self.inotify.add_watch(dir, EVENTS) {
            Ok(wd) => wd,
            // A path holding a NUL byte (which nix reports as EINVAL) is never
            // reached: that is ENOENT's case, as it was.
            Err(Errno::ENOENT | Errno::ENOTDIR) => return Err(AddError::Gone),
            Err(Errno::EINVAL) if dir.as_os_str().as_encoded_bytes().contains(&0) => {
                return Err(AddError::Gone);
            }
            Err(Errno::EACCES) if name.is_some() => return Err(AddError::Unreadable),
            Err(_) => {
                self.broken = true;
                return Err(AddError::Refused);
            }
        };
        // The same directory twice is the same descriptor: the wider interest wins.
        let interest = self
            .interest
            .entry(wd)
            .or_insert_with(|| Interest::Names(HashSet::new()));
        match (interest, name) {
            (Interest::Any, _) => {}
            (slot @ Interest::Names(_), None) => *slot = Interest::Any,
            (Interest::Names(names), Some(name)) => {
                names.insert(name.to_os_string());
            }
        }
        Ok(())
    }

    /// Where `path` (absolute) really is, every link followed, each directory
    /// watched for the name looked up in it before it is looked up; `None` when
    /// something on the way is missing or no directory (`canonicalize`'s failures),
    /// or the path cannot be watched (then the watch is broken and nothing is kept).
    fn resolve(&mut self, path: &Path) -> Option<PathBuf> {
        if !path.is_absolute() {
            return None;
        }
        // A directory the daemon's user cannot read: when it cannot look the name
        // up either, the path resolves to nothing, as `canonicalize` says, and a
        // change of its mode is an event of its parent's, which is watched for its
        // name. When it can, its names cannot be watched, and nothing is kept.
        let mut look = |dir: &Path, name: &std::ffi::OsStr| match self.add(dir, Some(name)) {
            Ok(()) => true,
            Err(AddError::Unreadable) => {
                self.broken |= std::fs::symlink_metadata(dir.join(name)).is_ok();
                true
            }
            Err(AddError::Gone | AddError::Refused) => false,
        };
        resolve_links(path, Missing::Nothing, &mut look)
            .ok()
            .flatten()
    }

    /// Whether nothing that matters happened since the watch began: no event of
    /// interest queued (an overflow or a watch the kernel dropped is one), the
    /// descriptor answers, and the mount table is as it was.
    fn unchanged(&self) -> bool {
        !self.mounts_changed() && self.quiet()
    }

    /// Whether no inotify event that matters is queued (read and let go). An empty
    /// read or an error other than "nothing queued" (EAGAIN) is not quiet.
    fn quiet(&self) -> bool {
        loop {
            match self.inotify.read_events() {
                Err(Errno::EAGAIN) => return true,
                Err(_) => return false,
                Ok(events) if events.is_empty() => return false,
                Ok(events) => {
                    if events.iter().any(|e| self.matters(e)) {
                        return false;
                    }
                }
            }
        }
    }

    /// Whether one event matters: an overflow (events were lost) or a watch the
    /// kernel dropped always does; else one of a directory watched for anything, or
    /// for the name it is about, or of the directory itself (no name).
    fn matters(&self, event: &nix::sys::inotify::InotifyEvent) -> bool {
        if event
            .mask
            .intersects(AddWatchFlags::IN_Q_OVERFLOW | AddWatchFlags::IN_IGNORED)
        {
            return true;
        }
        match self.interest.get(&event.wd) {
            None | Some(Interest::Any) => true,
            Some(Interest::Names(names)) => event
                .name
                .as_ref()
                .is_none_or(|name| name.is_empty() || names.contains(name)),
        }
    }

    /// Whether the daemon's mount table changed since the watch began (or cannot
    /// be told: no `/proc`, a failed poll).
    fn mounts_changed(&self) -> bool {
        let Some(mounts) = &self.mounts else {
            return true;
        };
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let mut fds = [PollFd::new(mounts.as_fd(), PollFlags::POLLPRI)];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(0) => false,
            Ok(_) => fds[0]
                .revents()
                .is_none_or(|r| r.intersects(PollFlags::POLLPRI | PollFlags::POLLERR)),
            Err(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{FileError, FileIntent};
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    fn watched(root: &Path) -> Watch {
        let mut w = Watch::new().unwrap();
        assert!(w.trees(&[root.to_path_buf()]));
        w
    }

    /// The watch sees what would change the walk's answer, and nothing else keeps
    /// it from holding: a name made at the walk's depth, a `.git/config` written, the
    /// root renamed.
    #[test]
    fn issue_39_an_overflowed_queue_drops_the_view() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("a")).unwrap();
        std::fs::write(root.join("a/wanted"), "").unwrap();
        let mut w = Watch::new().unwrap();
        assert_eq!(
            w.resolve(&root.join("a/wanted")),
            Some(root.join("a/wanted"))
        );
        assert!(w.unchanged());
        // `a` is watched for the name looked up in it: another name changes nothing.
        std::fs::write(root.join("a/other"), "").unwrap();
        assert!(w.unchanged());
        // More events than the queue holds, none of them of interest: the kernel drops
        // the rest and says so, and what was dropped could have been one.
        let limit: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(16384);
        for i in 0..limit / 3 + 100 {
            let name = root.join(format!("a/flood-{i}"));
            std::fs::write(&name, "").unwrap();
            std::fs::remove_file(&name).unwrap();
        }
        assert!(!w.unchanged(), "an overflow left the view kept");
    }

    #[test]
    fn issue_39_the_watch_sees_every_change_the_walk_could() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("r");
        std::fs::create_dir_all(root.join("a/b/c/d")).unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        let w = watched(&root);
        assert!(w.unchanged());
        // Reading changes nothing.
        let _ = std::fs::read_to_string(root.join(".git/config")).unwrap();
        assert!(w.unchanged());
        // What the walk skips or cannot reach changes nothing either.
        std::fs::create_dir(root.join("target/debug/x")).unwrap();
        std::fs::create_dir(root.join("a/b/c/d/deep")).unwrap();
        assert!(w.unchanged());
        for change in [
            &(|r: &Path| std::fs::create_dir(r.join("a/b/c/.git")).unwrap()) as &dyn Fn(&Path),
            &|r: &Path| std::fs::write(r.join(".git/config"), "[core]\nhooksPath=x\n").unwrap(),
            &|r: &Path| std::fs::create_dir(r.join(".vscode")).unwrap(),
            &|r: &Path| std::fs::rename(r.join("a"), r.join("a2")).unwrap(),
        ] {
            let w = watched(&root);
            change(&root);
            assert!(!w.unchanged());
        }
        let w = watched(&root);
        std::fs::rename(&root, dir.path().join("moved")).unwrap();
        assert!(!w.unchanged());
    }

    /// A tree bigger than the walk reads is not kept.
    #[test]
    fn issue_39_a_tree_past_the_walks_bound_is_not_watched() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for i in 0..MAX_WATCHED {
            std::fs::create_dir(root.join(format!("d{i}"))).unwrap();
        }
        assert!(!Watch::new().unwrap().trees(std::slice::from_ref(&root)));
        std::fs::remove_dir(root.join("d0")).unwrap();
        assert!(Watch::new().unwrap().trees(&[root]));
    }

    /// A path resolved through a directory is watched for the name looked up there
    /// (and links followed to their end), not for every name: a busy `/tmp` or home
    /// does not drop the view, a link put in its place does.
    #[test]
    fn issue_39_a_resolved_path_is_watched_for_its_own_names() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("home/.config/gh")).unwrap();
        std::fs::create_dir_all(base.join("elsewhere/gh")).unwrap();
        std::os::unix::fs::symlink(base.join("home/.config"), base.join("cfg")).unwrap();
        let mut w = Watch::new().unwrap();
        assert_eq!(
            w.resolve(&base.join("cfg/gh")),
            Some(base.join("home/.config/gh"))
        );
        assert_eq!(w.resolve(&base.join("home/.ssh")), None, "missing");
        assert!(w.unchanged());
        std::fs::write(base.join("home/.bash_history"), "ls\n").unwrap();
        std::fs::create_dir(base.join("home/.config/other")).unwrap();
        std::fs::write(base.join("unrelated"), "").unwrap();
        assert!(w.unchanged(), "names nothing was resolved through");
        for change in [
            &(|b: &Path| std::fs::create_dir(b.join("home/.ssh")).unwrap()) as &dyn Fn(&Path),
            &|b: &Path| {
                std::fs::remove_file(b.join("cfg")).unwrap();
                std::os::unix::fs::symlink(b.join("elsewhere"), b.join("cfg")).unwrap();
            },
            &|b: &Path| std::fs::rename(b.join("home"), b.join("home-old")).unwrap(),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let b = dir.path().canonicalize().unwrap();
            std::fs::create_dir_all(b.join("home/.config/gh")).unwrap();
            std::fs::create_dir_all(b.join("elsewhere/gh")).unwrap();
            std::os::unix::fs::symlink(b.join("home/.config"), b.join("cfg")).unwrap();
            let mut w = Watch::new().unwrap();
            w.resolve(&b.join("cfg/gh")).unwrap();
            w.resolve(&b.join("home/.ssh"));
            assert!(w.unchanged());
            change(&b);
            assert!(!w.unchanged());
        }
    }

    /// A mount changes what a path shows with no inotify event: the mount table is
    /// watched too. Shown in a mount namespace of the test's own thread (made
    /// private first, so nothing reaches the host's), as root: a plain user cannot
    /// make one in a threaded process.
    #[test]
    fn issue_39_a_mount_drops_the_view() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: a mount namespace of one thread needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().canonicalize().unwrap();
        std::thread::spawn(move || {
            let path = |p: &Path| CString::new(p.as_os_str().as_bytes()).unwrap();
            let (root, tmpfs) = (path(Path::new("/")), path(Path::new("tmpfs")));
            // SAFETY: flags only; then NUL-terminated strings that outlive the calls.
            unsafe {
                assert_eq!(libc::unshare(libc::CLONE_FS | libc::CLONE_NEWNS), 0);
                let flags = libc::MS_REC | libc::MS_PRIVATE;
                let none = std::ptr::null();
                assert_eq!(
                    libc::mount(none, root.as_ptr(), none, flags, none.cast()),
                    0
                );
            }
            let w = Watch::new().unwrap();
            let mut dirs = Watch::new().unwrap();
            assert!(dirs.trees(std::slice::from_ref(&at)));
            dirs.resolve(&at.join("x"));
            assert!(w.unchanged() && dirs.unchanged());
            let target = path(&at);
            // SAFETY: as above.
            let mounted = unsafe {
                libc::mount(
                    tmpfs.as_ptr(),
                    target.as_ptr(),
                    tmpfs.as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            assert_eq!(mounted, 0);
            // The defence off: the directories' watch alone sees nothing of it.
            assert!(dirs.quiet());
            assert!(!w.unchanged());
        })
        .join()
        .unwrap();
    }

    fn launcher(dir: &Path, deny_read: &[PathBuf]) -> SandboxLauncher {
        let mut config = crate::config::ExecConfig {
            state_dir: Some(dir.join("state")),
            ..crate::config::ExecConfig::default()
        };
        config.sandbox.deny_read = deny_read.to_vec();
        SandboxLauncher::new(&config, &[]).unwrap()
    }

    /// E11 attack first: a repository made inside the root after the file tools'
    /// view was kept. With the kept view used as it was (the defence off), its hooks
    /// are writable; through the cache, the watch saw the change and the view built
    /// afresh holds them read-only.
    #[test]
    fn e11_issue_39_a_kept_view_is_not_used_once_a_repository_appears() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir_all(root.join("app")).unwrap();
        let launcher = launcher(dir.path(), &[]);
        let roots = vec![root.clone()];
        let hook = root.join("app/.git/hooks/pre-commit");
        let kept = launcher.file_view(&roots).unwrap();
        assert!(kept.judge(&hook, FileIntent::Write).is_ok());
        let again = launcher.file_view(&roots).unwrap();
        assert!(Arc::ptr_eq(&kept, &again), "the view was not kept");

        std::fs::create_dir_all(root.join("app/.git/hooks")).unwrap();
        std::fs::write(root.join("app/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        // The defence off: the kept view still lets the hook be written.
        assert!(kept.judge(&hook, FileIntent::Write).is_ok());
        // On: the next call sees the change and refuses.
        let fresh = launcher.file_view(&roots).unwrap();
        assert!(!Arc::ptr_eq(&kept, &fresh));
        assert!(matches!(
            fresh.judge(&hook, FileIntent::Write),
            Err(FileError::Protected { .. })
        ));
        // And, nothing changing, it is kept again.
        let again = launcher.file_view(&roots).unwrap();
        assert!(Arc::ptr_eq(&again, &fresh));
    }

    /// E11 attack first: a `deny_read` directory that did not exist when the view was
    /// kept, and one whose parent became a link elsewhere. The kept view (the defence
    /// off) reads both; the cache saw each change and the fresh view masks them, as a
    /// command's layout would. A name made beside the state directory keeps the view.
    #[test]
    fn e11_issue_39_a_kept_view_is_not_used_once_a_masked_path_moves_or_appears() {
        let dir = tempfile::tempdir().unwrap();
        // Inside the root: the rest of /tmp is the sandbox's own, out of reach anyway.
        let root = dir.path().canonicalize().unwrap().join("ws");
        let base = root.clone();
        std::fs::create_dir_all(base.join("home/.aws")).unwrap();
        std::fs::create_dir_all(base.join("other/.aws")).unwrap();
        std::fs::write(base.join("other/.aws/credentials"), "key").unwrap();
        let deny = [base.join("home/.ssh"), base.join("home/.aws")];
        let launcher = launcher(dir.path(), &deny);
        let roots = vec![root];
        let kept = launcher.file_view(&roots).unwrap();
        std::fs::write(dir.path().join("unrelated"), "").unwrap();
        let again = launcher.file_view(&roots).unwrap();
        assert!(
            Arc::ptr_eq(&kept, &again),
            "an unrelated name dropped the view"
        );

        let (key, creds) = (
            base.join("home/.ssh/id_ed25519"),
            base.join("other/.aws/credentials"),
        );
        std::fs::create_dir(base.join("home/.ssh")).unwrap();
        std::fs::rename(base.join("home/.aws"), base.join("home/.aws-old")).unwrap();
        std::os::unix::fs::symlink(base.join("other/.aws"), base.join("home/.aws")).unwrap();
        for path in [&key, &creds] {
            let judged = kept.judge(path, FileIntent::Read);
            assert!(judged.is_ok(), "{path:?}: {judged:?}");
        }
        let fresh = launcher.file_view(&roots).unwrap();
        for path in [&key, &creds] {
            assert!(
                matches!(
                    fresh.judge(path, FileIntent::Read),
                    Err(FileError::Masked { .. })
                ),
                "{path:?}"
            );
        }
    }
}
