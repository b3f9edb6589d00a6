//! Where a command may have made a repository (E12): the directories of a root that
//! changed since a snapshot of them, so the end-of-command check reads what changed,
//! not the whole tree.
//!
//! A snapshot records, for every directory of a root, its device, inode and change
//! time (`ctime`). Making, removing or renaming an entry changes its directory's
//! `ctime`, and nothing a sandboxed command can do sets a `ctime` back (that takes
//! the clock, `CAP_SYS_TIME`): `mtime` would not do, `touch -d` sets it. So at the
//! end of a command every recorded directory is stat'ed (one `statx` each, no read),
//! the ones whose stamp differs are read, and a directory not in the snapshot is
//! walked whole. A snapshot may be older than the command's start (the last check's,
//! kept per root): whatever changed since it was taken is read as well, which costs
//! a read and never hides a change. Which repositories are the command's is decided
//! as before, by birth time (see `made_since` in the parent), not by the snapshot.
//!
//! Why not fanotify or inotify: fanotify's directory events need `CAP_SYS_ADMIN`
//! (the daemon as `nobody` has none), and inotify needs a watch per directory, whose
//! limit (`max_user_watches`) a 100 000-directory tree can exceed; either way a
//! fallback is needed, and this one is it.
//!
//! A `ctime` is stored only when it is older than the snapshot by more than
//! [`RACY`]: file times move in ticks of the file system's clock, and a directory
//! changed again within the tick it was stat'ed in would keep the same stamp (git's
//! "racy" index entries). Such a directory is read at the next check whatever it
//! shows.
//!
//! Fail closed: a search that reads [`super::SEARCH_BUDGET_DIRS`] directories
//! stops, says so, and leaves no snapshot, so the next check is a full search (and
//! says so again if it cannot finish either). Everything is opened beneath the
//! root's descriptor, opened when the command started, with no symlink followed.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How close to a snapshot's time a directory's `ctime` may be before it is not
/// trusted (see the module docs): the coarsest common file time granularity (FAT's
/// two seconds; ext4 and tmpfs move in kernel ticks).
const RACY: Duration = Duration::from_secs(2);

/// A directory's identity and last change, as `statx` gave them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: (u32, u32),
    ino: u64,
    ctime: (i64, u32),
}

/// What one `statx` of an entry says.
struct Status {
    stamp: Stamp,
    is_dir: bool,
    /// The birth time, or where the file system keeps none, the last change.
    born: Option<SystemTime>,
}

/// Every directory of one root with its stamp (`None`: racy, read at the next
/// check), by its path below the root (the root itself is the empty path).
#[derive(Debug, Default)]
pub struct Snapshot {
    dirs: HashMap<PathBuf, Option<Stamp>>,
}

impl Snapshot {
    /// How many directories it records.
    pub fn len(&self) -> usize {
        self.dirs.len()
    }
}

/// What one search found under a root.
#[derive(Debug, Default)]
pub struct Search {
    /// Each `.git` entry born since the command started, and each bare
    /// repository's directory whose `objects/` was; below the root.
    pub made: Vec<PathBuf>,
    /// Every `.git` entry and bare repository in the directories that were read,
    /// however old (a repository moved into place keeps its birth time).
    pub seen: Vec<PathBuf>,
    /// The directories that were read (changed or new), below the root.
    pub read: Vec<PathBuf>,
    /// The search stopped at its budget before reading everything.
    pub unfinished: bool,
    /// There was no snapshot to start from: every directory was read.
    pub full: bool,
    /// The snapshot for the next check, when this one finished.
    pub snapshot: Option<Snapshot>,
}

/// Searches `root` (a directory descriptor) for repositories born at or after
/// `since`, reading only the directories that changed since `previous` (all of them
/// without one), at most `budget` directories.
pub fn search(
    root: &OwnedFd,
    previous: Option<&Snapshot>,
    since: SystemTime,
    budget: usize,
) -> Search {
    let taken = SystemTime::now();
    let trusted = |stamp: Stamp| {
        let changed = SystemTime::UNIX_EPOCH.checked_add(Duration::new(
            u64::try_from(stamp.ctime.0).unwrap_or(0),
            stamp.ctime.1,
        ));
        changed.is_some_and(|c| c + RACY < taken).then_some(stamp)
    };
    let mut found = Search::default();
    let mut next: HashMap<PathBuf, Option<Stamp>> = HashMap::new();
    let mut to_read: Vec<PathBuf> = Vec::new();
    match previous {
        None => {
            found.full = true;
            to_read.push(PathBuf::new());
        }
        Some(previous) => {
            for (dir, before) in &previous.dirs {
                match status(root, dir) {
                    Some(now) if now.is_dir && Some(now.stamp) == *before => {
                        next.insert(dir.clone(), trusted(now.stamp));
                    }
                    Some(now) if now.is_dir => to_read.push(dir.clone()),
                    // Gone or no longer a directory: what took its place changed its
                    // parent, which is read.
                    _ => {}
                }
            }
        }
    }
    let known = |dir: &Path| previous.is_some_and(|p| p.dirs.contains_key(dir));
    let mut read = 0usize;
    while let Some(dir) = to_read.pop() {
        if read >= budget {
            found.unfinished = true;
            break;
        }
        read += 1;
        let Some((stamp, entries)) = entries_of(root, &dir) else {
            continue;
        };
        found.read.push(dir.clone());
        next.insert(dir.clone(), trusted(stamp));
        let mut bare = [false; 3];
        let mut subdirs = Vec::new();
        for (name, kind) in entries {
            let path = dir.join(&name);
            if name == ".git" {
                found.seen.push(path.clone());
                if born_since(root, &path, since) {
                    found.made.push(path);
                }
                continue;
            }
            match name.to_str() {
                Some("HEAD") => bare[0] = kind == Kind::File,
                Some("objects") => bare[1] = kind == Kind::Dir,
                Some("refs") => bare[2] = kind == Kind::Dir,
                _ => {}
            }
            if kind == Kind::Dir {
                subdirs.push(path);
            }
        }
        if bare == [true; 3] {
            found.seen.push(dir.clone());
            if !born_since(root, &dir.join("objects"), since) {
                // An old repository is not entered (its insides are its own, guarded
                // by the start's walk), nor recorded below: if it stops being one,
                // its directory changes and what it holds is walked then.
                continue;
            }
            // A new one is refused (its HEAD renamed): an ordinary directory from
            // then on, searched like any.
            found.made.push(dir);
        }
        // A subdirectory the snapshot has is stat'ed on its own (above); one it
        // lacks is new since the snapshot, and everything below it too.
        to_read.extend(subdirs.into_iter().filter(|d| !known(d)));
    }
    if !found.unfinished {
        found.snapshot = Some(Snapshot { dirs: next });
    }
    found
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Other,
}

/// Opens `below` beneath `root`, following no symlink on the way or at the end.
pub fn open_beneath(
    root: &impl AsFd,
    below: &Path,
    flags: nix::fcntl::OFlag,
) -> nix::Result<OwnedFd> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
    let below = if below.as_os_str().is_empty() {
        Path::new(".")
    } else {
        below
    };
    nix::fcntl::openat2(
        root,
        below,
        OpenHow::new()
            .flags(flags | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
            .resolve(
                ResolveFlag::RESOLVE_BENEATH
                    | ResolveFlag::RESOLVE_NO_SYMLINKS
                    | ResolveFlag::RESOLVE_NO_MAGICLINKS,
            ),
    )
}

/// A directory's stamp (taken before it is read: a change during the read changes
/// it after) and entries, or `None` when it cannot be opened beneath the root as a
/// directory (a symlink now, gone, unreadable).
fn entries_of(root: &OwnedFd, dir: &Path) -> Option<(Stamp, Vec<(OsString, Kind)>)> {
    use nix::fcntl::OFlag;
    let fd = open_beneath(root, dir, OFlag::O_RDONLY | OFlag::O_DIRECTORY).ok()?;
    let stamp = statx_at(&fd, Path::new(""))?.stamp;
    // The descriptor's own entries: the magic link names the directory opened, not
    // a path that could have been swapped since.
    let entries = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let kind = match entry.file_type() {
            Ok(t) if t.is_dir() => Kind::Dir,
            Ok(t) if t.is_file() => Kind::File,
            _ => Kind::Other,
        };
        out.push((entry.file_name(), kind));
    }
    Some((stamp, out))
}

/// `statx` of `path` below `root`, not following a final symlink. One call, by the
/// path relative to the root's descriptor: an intermediate directory swapped for a
/// symlink is followed here, which only stats (the link itself shows as changed in
/// its own entry, its parent's change has it read, and every read and rename opens
/// beneath the root with no symlink followed).
fn status(root: &OwnedFd, path: &Path) -> Option<Status> {
    statx_at(root, path)
}

fn statx_at(dir: &impl AsFd, name: &Path) -> Option<Status> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(name.as_os_str().as_bytes()).ok()?;
    let mut buf = std::mem::MaybeUninit::<libc::statx>::zeroed();
    let flags = libc::AT_SYMLINK_NOFOLLOW
        | libc::AT_STATX_SYNC_AS_STAT
        | if name.as_bytes().is_empty() {
            libc::AT_EMPTY_PATH
        } else {
            0
        };
    // SAFETY: `name` is a NUL-terminated string and `buf` a statx buffer the call
    // fills; both outlive it.
    let rc = unsafe {
        libc::statx(
            dir.as_fd().as_raw_fd(),
            name.as_ptr(),
            flags,
            libc::STATX_BASIC_STATS | libc::STATX_BTIME,
            buf.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: statx returned 0, so it filled the buffer.
    let st = unsafe { buf.assume_init() };
    let time = |t: libc::statx_timestamp| {
        SystemTime::UNIX_EPOCH.checked_add(Duration::new(u64::try_from(t.tv_sec).ok()?, t.tv_nsec))
    };
    let born = if st.stx_mask & libc::STATX_BTIME != 0 {
        time(st.stx_btime)
    } else {
        time(st.stx_ctime)
    };
    Some(Status {
        stamp: Stamp {
            dev: (st.stx_dev_major, st.stx_dev_minor),
            ino: st.stx_ino,
            ctime: (st.stx_ctime.tv_sec, st.stx_ctime.tv_nsec),
        },
        is_dir: u32::from(st.stx_mode) & libc::S_IFMT == libc::S_IFDIR,
        born,
    })
}

/// Whether the entry at `path` beneath `root` was born at or after `since`; where
/// the file system keeps no birth time, its last change stands in (a repository the
/// command only touched then counts as made: the closed side). A time that cannot
/// be read at all is new; an entry gone is nothing to refuse.
fn born_since(root: &OwnedFd, path: &Path, since: SystemTime) -> bool {
    match status(root, path) {
        None => false,
        Some(s) => s.born.is_none_or(|born| born >= since),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(root: &Path) -> OwnedFd {
        nix::fcntl::open(
            root,
            nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY,
            nix::sys::stat::Mode::empty(),
        )
        .unwrap()
    }

    /// E12: with a snapshot, only what changed is read (a new repository ten levels
    /// down, under `node_modules/`, is still found), an old directory made racy
    /// is read again, and a search past its budget leaves no snapshot.
    #[test]
    fn e12_a_search_from_a_snapshot_reads_only_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for a in 0..20 {
            std::fs::create_dir_all(root.join(format!("d{a}/x/y"))).unwrap();
        }
        let fd = open(root);
        let first = search(&fd, None, SystemTime::now(), 1_000_000);
        assert!(first.full && !first.unfinished);
        let snapshot = first.snapshot.unwrap();
        assert_eq!(snapshot.len(), 61);
        let since = SystemTime::UNIX_EPOCH; // every repository counts as made here
        // Just made: every directory is racy, so all are read.
        let again = search(&fd, Some(&snapshot), since, 1_000_000);
        assert_eq!(again.read.len(), 61);
        // Trusted stamps (as if taken long after): nothing changed, nothing read.
        let trusted = Snapshot {
            dirs: snapshot
                .dirs
                .keys()
                .map(|d| (d.clone(), status(&fd, d).map(|s| s.stamp)))
                .collect(),
        };
        assert!(
            search(&fd, Some(&trusted), since, 1_000_000)
                .read
                .is_empty()
        );
        let deep = "d3/x/y/node_modules/a/b/c/d/e/f/g";
        std::fs::create_dir_all(root.join(deep).join(".git")).unwrap();
        let found = search(&fd, Some(&trusted), since, 1_000_000);
        assert_eq!(found.made, [PathBuf::from(deep).join(".git")]);
        // d3/x/y changed, and the eight new directories below it were walked.
        assert_eq!(found.read.len(), 9, "{:?}", found.read);
        assert!(search(&fd, None, since, 5).unfinished);
        assert!(search(&fd, None, since, 5).snapshot.is_none());
    }
}
