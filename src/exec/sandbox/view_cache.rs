//! The file tools' layout, kept per set of roots while nothing it was built from
//! changed (issue 39, bench X2).
//!
//! Building the layout a command would get walks the session's roots (`protect`),
//! which cost a `read_file` under the sandbox about 1.4x the same call under the local
//! executor. The layout depends on the disk only through the directories that walk
//! reads, the host's sockets ([`super::HostView`], re-read every few seconds) and the
//! `deny_read` masks. So the layout is kept with an inotify watch on every directory
//! the walk can read (each root down to the walk's depth, `.git` directories
//! included, what it skips excluded), set up *before* the walk: any name created,
//! removed or renamed there, any file written there (a `.git/config` naming a new
//! hooks path), the root itself moved, or a lost event, and the next call builds the
//! layout afresh. The masks are resolved on every call ([`super::files`]), and every
//! check still ends in an `openat2` beneath the allowed base with no symlink, so the
//! cache opens no window the walk did not already have: the walk's answer was always
//! as old as the walk.
//!
//! When a root holds more directories than the walk reads, or the kernel refuses a
//! watch (`max_user_watches`), nothing is kept: every call walks, as before.

use super::layout::Layout;
use super::{HostSnapshot, SandboxLauncher};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// How many sets of roots keep a layout (each holds an inotify descriptor).
const MAX_VIEWS: usize = 8;

/// How many directories one set of roots may watch: the walk's own bound
/// ([`super::protect::MAX_DIRS`]); a bigger tree is not kept.
const MAX_WATCHED: usize = super::protect::MAX_DIRS;

/// The layouts kept, most recently used last.
#[derive(Default)]
pub(super) struct ViewCache {
    kept: Mutex<Vec<Kept>>,
}

/// One kept layout and what says it still holds.
struct Kept {
    roots: Vec<PathBuf>,
    layout: Arc<Layout>,
    /// The host as the layout saw it: a reading that differs builds it again.
    host: Arc<HostSnapshot>,
    watch: Watch,
}

impl ViewCache {
    /// The layout the file tools judge by for `roots`: the kept one while it holds,
    /// else a new one (kept when it can be watched).
    pub(super) fn layout(
        &self,
        launcher: &SandboxLauncher,
        roots: &[PathBuf],
    ) -> Result<Arc<Layout>, String> {
        let host = launcher.host.now();
        {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(at) = kept.iter().position(|k| k.roots == roots) {
                let entry = kept.remove(at);
                // A new reading of the host that found the same is the same host.
                if *entry.host == *host && entry.watch.unchanged() {
                    let layout = entry.layout.clone();
                    kept.push(entry);
                    return Ok(layout);
                }
                // Stale: dropped (its watch closes with it).
            }
        }
        // Watched first, then walked: whatever changes during the walk is seen.
        let watch = Watch::of(roots.iter().chain(&launcher.writable));
        let layout = Arc::new(launcher.layout_with(Path::new("/"), roots, super::Held::Shown)?);
        if let Some(watch) = watch {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            kept.retain(|k| k.roots != roots);
            if kept.len() >= MAX_VIEWS {
                kept.remove(0);
            }
            kept.push(Kept {
                roots: roots.to_vec(),
                layout: layout.clone(),
                host,
                watch,
            });
        }
        Ok(layout)
    }
}

/// An inotify instance watching the directories a walk of some roots can read.
struct Watch {
    fd: OwnedFd,
}

/// Every event that can change what the walk finds: names made, removed or renamed,
/// files written or their modes changed, the directory itself moved or removed.
const EVENTS: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_MODIFY
    | libc::IN_CLOSE_WRITE
    | libc::IN_ATTRIB
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_DONT_FOLLOW
    | libc::IN_ONLYDIR;

impl Watch {
    /// A watch on each root (absolute, a directory) and the directories below it the
    /// walk can read, or `None` when that cannot be had (too many, or refused).
    fn of<'a>(roots: impl Iterator<Item = &'a PathBuf>) -> Option<Watch> {
        // SAFETY: inotify_init1 takes flags only; a non-negative result is a new
        // descriptor that nothing else owns.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` was just returned by the kernel and is owned here alone.
        let watch = Watch {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        };
        let mut budget = MAX_WATCHED;
        for root in roots {
            if !root.is_absolute() || !root.is_dir() {
                continue;
            }
            let real = root.canonicalize().ok()?;
            watch.tree(&real, 0, &mut budget)?;
        }
        Some(watch)
    }

    /// `dir` and the directories below it down to the walk's depth (symlinks not
    /// followed, the walk's skipped names left out; a `.git` directory is watched for
    /// its config and pointers but not entered).
    fn tree(&self, dir: &Path, depth: usize, budget: &mut usize) -> Option<()> {
        if *budget == 0 {
            return None;
        }
        *budget -= 1;
        self.add(dir)?;
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
                if *budget == 0 {
                    return None;
                }
                *budget -= 1;
                self.add(&entry.path())?;
                continue;
            }
            self.tree(&entry.path(), depth + 1, budget)?;
        }
        Some(())
    }

    fn add(&self, dir: &Path) -> Option<()> {
        let path = CString::new(dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: a valid descriptor and a NUL-terminated path that outlives the call.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), path.as_ptr(), EVENTS) };
        // A directory gone since it was listed is fine (its parent saw it go); a
        // refusal (no more watches) is not.
        match wd {
            wd if wd >= 0 => Some(()),
            _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT) => Some(()),
            _ => None,
        }
    }

    /// Whether nothing happened since the watch began: no event queued (an overflow
    /// or a watch the kernel dropped is an event too), and the descriptor answers.
    fn unchanged(&self) -> bool {
        let mut buf = [0u8; 4096];
        // SAFETY: reading into a buffer we own, of its length.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast::<libc::c_void>(),
                buf.len(),
            )
        };
        n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The watch sees what would change the walk's answer, and nothing else keeps
    /// it from holding: a name made at the walk's depth, a `.git/config` written, the
    /// root renamed.
    #[test]
    fn issue_39_the_watch_sees_every_change_the_walk_could() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("r");
        std::fs::create_dir_all(root.join("a/b/c/d")).unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        let fresh = || Watch::of([root.clone()].iter()).unwrap();
        let w = fresh();
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
            let w = fresh();
            change(&root);
            assert!(!w.unchanged());
        }
        let w = fresh();
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
        assert!(Watch::of([root.clone()].iter()).is_none());
        std::fs::remove_dir(root.join("d0")).unwrap();
        assert!(Watch::of([root].iter()).is_some());
    }
    /// E11 attack first: a repository made inside the root after the file tools'
    /// layout was kept. With the kept layout used as it was (the defence off), its
    /// hooks are writable; through the cache, the watch saw the change and the layout
    /// built afresh holds them read-only.
    #[test]
    fn e11_issue_39_a_kept_layout_is_not_used_once_a_repository_appears() {
        use crate::exec::FileIntent;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir_all(root.join("app")).unwrap();
        let config = crate::config::ExecConfig {
            state_dir: Some(dir.path().join("state")),
            ..crate::config::ExecConfig::default()
        };
        let launcher = SandboxLauncher::new(&config, &[]).unwrap();
        let roots = vec![root.clone()];
        let hook = root.join("app/.git/hooks/pre-commit");
        let view = launcher.file_view(&roots).unwrap();
        assert!(view.judge(&hook, FileIntent::Write).is_ok());
        let kept = launcher.views.layout(&launcher, &roots).unwrap();
        assert!(Arc::ptr_eq(&kept, &view.layout), "the layout was not kept");

        std::fs::create_dir_all(root.join("app/.git/hooks")).unwrap();
        std::fs::write(root.join("app/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        // The defence off: the kept layout still lets the hook be written.
        let stale = super::super::files::FileView {
            layout: kept.clone(),
            ..view
        };
        assert!(stale.judge(&hook, FileIntent::Write).is_ok());
        // On: the next call sees the change and refuses.
        let fresh = launcher.file_view(&roots).unwrap();
        assert!(!Arc::ptr_eq(&kept, &fresh.layout));
        assert!(matches!(
            fresh.judge(&hook, FileIntent::Write),
            Err(crate::exec::FileError::Protected { .. })
        ));
        // And, nothing changing, it is kept again.
        let again = launcher.file_view(&roots).unwrap();
        assert!(Arc::ptr_eq(&again.layout, &fresh.layout));
    }
}
