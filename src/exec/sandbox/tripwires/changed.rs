//! Where a command may have made a repository (E12): the directories of a root that
//! changed since a snapshot of them, so the end-of-command check reads what changed,
//! not the whole tree.
//!
//! A snapshot records, for every directory of a root, its device, inode and change
//! time (`ctime`), and the repositories in them (so a repository that appears is
//! known for new whatever its birth time). Making, removing or renaming an entry
//! changes its directory's `ctime`, and nothing a sandboxed command can do sets a `ctime` back (that takes
//! the clock, `CAP_SYS_TIME`): `mtime` would not do, `touch -d` sets it. So at the
//! end of a command every recorded directory is stat'ed (one `statx` each, no read),
//! the ones whose stamp differs are read, and a directory not in the snapshot is
//! walked whole. The search at a command's start goes the same way from the root's
//! last snapshot (a full search without one), and the end's from the start's.
//!
//! A full search reads each directory once with `getdents64` into one buffer: the
//! entry's type comes from the directory (`d_type`; a `statx` only where the file
//! system gives none), no allocation per file, and each directory is opened beneath
//! its parent's descriptor by its one name ([`HELD_DEPTH`] levels deep at most).
//!
//! A directory that cannot be read is recorded as racy (tried again at every
//! search) and, when the daemon's user owns it or may enter it, listed in
//! [`Search::unreadable`]: the caller says below it was not checked.
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

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime};

/// How close to a snapshot's time a directory's `ctime` may be before it is not
/// trusted (see the module docs): the coarsest common file time granularity (FAT's
/// two seconds; ext4 and tmpfs move in kernel ticks).
const RACY: Duration = Duration::from_secs(2);

/// How deep the search keeps the directories on its way open, so that each one is
/// opened beneath its parent's descriptor by one name (no path walked again from
/// the root). Deeper, a directory is opened beneath the root by its whole path:
/// a chain of directories cannot run the daemon out of descriptors, and one too
/// long to open that way is said (`unreadable`), never skipped.
const HELD_DEPTH: usize = 64;

/// The buffer `getdents64` fills: one call lists a few hundred entries.
const DIRENT_BUFFER: usize = 32 * 1024;

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
    is_file: bool,
    /// The birth time, or where the file system keeps none, the last change.
    born: Option<SystemTime>,
}

/// Every directory of one root with its stamp (`None`: racy or unreadable, read
/// again at the next check), by its path below the root (the root itself is the
/// empty path), and every repository in them: what was there when it was taken.
#[derive(Debug, Default)]
pub struct Snapshot {
    dirs: HashMap<PathBuf, Option<Stamp>>,
    /// Each `.git` entry and each bare repository's directory, below the root.
    repositories: HashSet<PathBuf>,
}

impl Snapshot {
    /// How many directories it records.
    pub fn len(&self) -> usize {
        self.dirs.len()
    }

    /// Whether the repository at `rel` (a `.git` entry or a bare repository's
    /// directory, below the root) was there when the snapshot was taken.
    pub fn had(&self, rel: &Path) -> bool {
        self.repositories.contains(rel)
    }
}

/// The directory a repository's entry sits in (a `.git`'s parent; a bare
/// repository is its own directory).
fn holder(repository: &Path) -> &Path {
    if repository.file_name() == Some(OsStr::new(".git")) {
        repository.parent().unwrap_or(Path::new(""))
    } else {
        repository
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
    /// Directories that could not be read though a command could have made
    /// something below them (the daemon's user owns them or may enter them), with
    /// why: what is below was not checked.
    pub unreadable: Vec<(PathBuf, nix::errno::Errno)>,
    /// The search stopped at its budget before reading everything.
    pub unfinished: bool,
    /// There was no snapshot to start from: every directory was read.
    pub full: bool,
    /// The snapshot for the next check, when this one finished.
    pub snapshot: Option<Snapshot>,
}

/// A directory waiting to be read: its path below the root, and its parent's
/// descriptor when the search holds it (then it is opened by its last name).
struct Pending {
    rel: PathBuf,
    parent: Option<Rc<OwnedFd>>,
    depth: usize,
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
    let mut to_read: Vec<Pending> = Vec::new();
    let from_root = |rel: PathBuf| Pending {
        depth: rel.components().count(),
        rel,
        parent: None,
    };
    match previous {
        None => {
            found.full = true;
            to_read.push(from_root(PathBuf::new()));
        }
        Some(previous) => {
            for (dir, before) in &previous.dirs {
                match status(root, dir) {
                    Some(now) if now.is_dir && Some(now.stamp) == *before => {
                        next.insert(dir.clone(), trusted(now.stamp));
                    }
                    Some(now) if now.is_dir => to_read.push(from_root(dir.clone())),
                    // Gone or no longer a directory: what took its place changed its
                    // parent, which is read.
                    _ => {}
                }
            }
        }
    }
    let known = |dir: &Path| previous.is_some_and(|p| p.dirs.contains_key(dir));
    let mut buffer = vec![0u8; DIRENT_BUFFER];
    let mut read = 0usize;
    while let Some(pending) = to_read.pop() {
        if read >= budget {
            found.unfinished = true;
            break;
        }
        read += 1;
        let opened = match &pending.parent {
            Some(parent) => open_beneath(
                &**parent,
                Path::new(pending.rel.file_name().unwrap_or_default()),
                nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY,
            ),
            None => open_beneath(
                root,
                &pending.rel,
                nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY,
            ),
        };
        let dir = match opened {
            Ok(dir) => dir,
            // Gone, or swapped for a symlink or a file since its parent was listed:
            // the change shows in the parent, read at the next check.
            Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => continue,
            Err(nix::errno::Errno::ELOOP) => continue,
            Err(e) => {
                // Read again at every check for as long as it cannot be read.
                next.insert(pending.rel.clone(), None);
                if e != nix::errno::Errno::EACCES || reachable(root, &pending.rel) {
                    found.unreadable.push((pending.rel, e));
                }
                continue;
            }
        };
        // The stamp before the read: a change during the read changes it after.
        let Some(stamp) = statx_at(&dir, Path::new("")).map(|s| s.stamp) else {
            next.insert(pending.rel.clone(), None);
            found.unreadable.push((pending.rel, nix::errno::Errno::EIO));
            continue;
        };
        let mut bare = [false; 3];
        let mut git = false;
        let mut subdirs: Vec<PathBuf> = Vec::new();
        let listed = for_each_entry(&dir, &mut buffer, |name, kind| {
            if name == b".git" {
                git = true;
                return;
            }
            let kind = match kind {
                libc::DT_UNKNOWN => statx_at(&dir, Path::new(OsStr::from_bytes(name)))
                    .map_or(Kind::Other, |s| s.kind()),
                libc::DT_DIR => Kind::Dir,
                libc::DT_REG => Kind::File,
                _ => Kind::Other,
            };
            match name {
                b"HEAD" => bare[0] = kind == Kind::File,
                b"objects" => bare[1] = kind == Kind::Dir,
                b"refs" => bare[2] = kind == Kind::Dir,
                _ => {}
            }
            if kind == Kind::Dir {
                let sub = pending.rel.join(OsStr::from_bytes(name));
                // A subdirectory the snapshot has is stat'ed on its own (above); one
                // it lacks is new since the snapshot, and everything below it too.
                if !known(&sub) {
                    subdirs.push(sub);
                }
            }
        });
        if let Err(e) = listed {
            next.insert(pending.rel.clone(), None);
            found.unreadable.push((pending.rel, e));
            continue;
        }
        found.read.push(pending.rel.clone());
        next.insert(pending.rel.clone(), trusted(stamp));
        if git {
            let path = pending.rel.join(".git");
            if born_since(&dir, Path::new(".git"), since) {
                found.made.push(path.clone());
            }
            found.seen.push(path);
        }
        if bare == [true; 3] {
            found.seen.push(pending.rel.clone());
            if !born_since(&dir, Path::new("objects"), since) {
                // An old repository is not entered (its insides are its own, guarded
                // by the start's walk), nor recorded below: if it stops being one,
                // its directory changes and what it holds is walked then.
                continue;
            }
            // A new one is refused (its HEAD renamed): an ordinary directory from
            // then on, searched like any.
            found.made.push(pending.rel.clone());
        }
        let depth = pending.depth + 1;
        let held = (depth <= HELD_DEPTH).then(|| Rc::new(dir));
        to_read.extend(subdirs.into_iter().map(|rel| Pending {
            rel,
            parent: held.clone(),
            depth,
        }));
    }
    if !found.unfinished {
        // What the snapshot had in the directories not read again still stands;
        // the ones read say for themselves.
        let read: HashSet<&Path> = found.read.iter().map(PathBuf::as_path).collect();
        let mut repositories: HashSet<PathBuf> = previous
            .into_iter()
            .flat_map(|p| &p.repositories)
            .filter(|r| next.contains_key(holder(r)) && !read.contains(holder(r)))
            .cloned()
            .collect();
        repositories.extend(found.seen.iter().cloned());
        found.snapshot = Some(Snapshot {
            dirs: next,
            repositories,
        });
    }
    found
}

/// Whether a command running as the daemon's user could have made something below
/// the directory at `rel`, which the daemon cannot read: it owns it (and so could
/// have taken the read permission away itself), or may enter it. Neither: nothing
/// below it is the command's to make (root reads everything, so this is the daemon
/// running as someone else beside another user's directory).
fn reachable(root: &OwnedFd, rel: &Path) -> bool {
    let Ok(st) = nix::sys::stat::fstatat(root, rel, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
    else {
        return true;
    };
    st.st_uid == nix::unistd::geteuid().as_raw()
        || nix::unistd::faccessat(
            root,
            rel,
            nix::unistd::AccessFlags::X_OK,
            nix::fcntl::AtFlags::AT_EACCESS | nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .is_ok()
}

/// Calls `each` with the name and `d_type` of every entry of the directory `dir`
/// but `.` and `..`, read with `getdents64` into `buffer` (no allocation per entry,
/// the type from the directory itself, no `stat`).
fn for_each_entry(
    dir: &OwnedFd,
    buffer: &mut [u8],
    mut each: impl FnMut(&[u8], u8),
) -> nix::Result<()> {
    // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
    const NAME_AT: usize = 19;
    loop {
        // SAFETY: the kernel writes at most `buffer.len()` bytes into `buffer`, which
        // outlives the call.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir.as_raw_fd(),
                buffer.as_mut_ptr(),
                buffer.len(),
            )
        };
        let Ok(n) = usize::try_from(n) else {
            return Err(nix::errno::Errno::last());
        };
        if n == 0 {
            return Ok(());
        }
        let filled = buffer.get(..n).ok_or(nix::errno::Errno::EIO)?;
        let mut at = 0;
        while let Some(record) = filled.get(at..) {
            if record.is_empty() {
                break;
            }
            let (Some(&[lo, hi]), Some(&kind)) = (record.get(16..18), record.get(18)) else {
                return Err(nix::errno::Errno::EIO);
            };
            let length = usize::from(u16::from_ne_bytes([lo, hi]));
            let Some(name) = record.get(NAME_AT..length) else {
                return Err(nix::errno::Errno::EIO);
            };
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            if name != b"." && name != b".." {
                each(name, kind);
            }
            at += length;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Other,
}

impl Status {
    fn kind(&self) -> Kind {
        if self.is_dir {
            Kind::Dir
        } else if self.is_file {
            Kind::File
        } else {
            Kind::Other
        }
    }
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

/// `statx` of `path` below `root`, not following a final symlink. One call, by the
/// path relative to the root's descriptor: an intermediate directory swapped for a
/// symlink is followed here, which only stats (the link itself shows as changed in
/// its own entry, its parent's change has it read, and every read and rename opens
/// beneath the root with no symlink followed).
fn status(root: &OwnedFd, path: &Path) -> Option<Status> {
    statx_at(root, path)
}

fn statx_at(dir: &impl AsFd, name: &Path) -> Option<Status> {
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
    let format = u32::from(st.stx_mode) & libc::S_IFMT;
    Some(Status {
        stamp: Stamp {
            dev: (st.stx_dev_major, st.stx_dev_minor),
            ino: st.stx_ino,
            ctime: (st.stx_ctime.tv_sec, st.stx_ctime.tv_nsec),
        },
        is_dir: format == libc::S_IFDIR,
        is_file: format == libc::S_IFREG,
        born,
    })
}

/// Whether the entry `name` in the directory `dir` was born at or after `since`;
/// where the file system keeps no birth time, its last change stands in (a
/// repository the command only touched then counts as made: the closed side). A
/// time that cannot be read at all is new; an entry gone is nothing to refuse.
fn born_since(dir: &OwnedFd, name: &Path, since: SystemTime) -> bool {
    match statx_at(dir, name) {
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
            repositories: HashSet::new(),
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
