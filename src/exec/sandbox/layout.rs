//! The sandbox's file system as data: an ordered list of mounts, which bubblewrap
//! applies in order (each hides what an earlier one put at or below its path).
//!
//! Being data, the layout answers questions before anything runs: whether a host
//! path shows through (the daemon's socket must not, E7; a workdir must), and it
//! renders its own `bwrap` arguments, so what is checked and what
//! runs cannot drift apart. Every path in it is absolute and, where it exists,
//! canonical: bwrap follows symlinks in a destination, and a layout over the
//! written path would answer for a place that is not the one mounted.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// One step of the sandbox's file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mount {
    /// The host's tree at this path, read-only (`--ro-bind P P`).
    HostReadOnly(PathBuf),
    /// The host's tree at this path, writable (`--bind P P`).
    HostWritable(PathBuf),
    /// A private `/dev` with the harmless devices (`--dev`).
    Devices(PathBuf),
    /// The sandbox's own `/proc`: only its PID namespace shows (`--proc`).
    Processes(PathBuf),
    /// A private, writable, empty directory that dies with the sandbox (`--tmpfs`).
    Scratch(PathBuf),
    /// A masked directory: empty and read-only (`--tmpfs P --remount-ro P`).
    EmptyDir(PathBuf),
    /// A masked file: reads as empty, cannot be written (`--ro-bind EMPTY P`, where
    /// EMPTY is an empty regular file of dsh's: `/dev/null` would not do, since a
    /// device node bound inside a user namespace cannot be opened).
    EmptyFile { path: PathBuf, empty: PathBuf },
}

impl Mount {
    /// Where the mount is, inside the sandbox (the same path as on the host).
    pub fn path(&self) -> &Path {
        match self {
            Mount::HostReadOnly(p)
            | Mount::HostWritable(p)
            | Mount::Devices(p)
            | Mount::Processes(p)
            | Mount::Scratch(p)
            | Mount::EmptyDir(p)
            | Mount::EmptyFile { path: p, .. } => p,
        }
    }

    /// Whether the host's own files show through at this mount.
    fn shows_host(&self) -> bool {
        matches!(self, Mount::HostReadOnly(_) | Mount::HostWritable(_))
    }

    #[cfg(test)]
    fn writable(&self) -> bool {
        matches!(self, Mount::HostWritable(_) | Mount::Scratch(_))
    }

    fn render(&self, args: &mut Vec<OsString>) {
        let path = || OsString::from(self.path());
        match self {
            Mount::HostReadOnly(p) => args.extend(["--ro-bind".into(), p.into(), p.into()]),
            Mount::HostWritable(p) => args.extend(["--bind".into(), p.into(), p.into()]),
            Mount::Devices(_) => args.extend(["--dev".into(), path()]),
            Mount::Processes(_) => args.extend(["--proc".into(), path()]),
            Mount::Scratch(_) => args.extend(["--tmpfs".into(), path()]),
            Mount::EmptyDir(_) => {
                args.extend(["--tmpfs".into(), path(), "--remount-ro".into(), path()])
            }
            Mount::EmptyFile { empty, .. } => {
                args.extend(["--ro-bind".into(), empty.into(), path()])
            }
        }
    }
}

/// The ordered mounts of one sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    mounts: Vec<Mount>,
}

impl Layout {
    /// Adds a mount on top of the ones before it.
    pub fn push(&mut self, mount: Mount) {
        self.mounts.push(mount);
    }

    /// The mount that decides what is at `path`: the last one at or above it (the
    /// file tools' whole question, `files`).
    pub fn covering(&self, path: &Path) -> Option<&Mount> {
        self.mounts
            .iter()
            .rev()
            .find(|m| path.starts_with(m.path()))
    }

    /// Whether the host's file at `path` (canonical) can be reached in the sandbox
    /// by that path.
    pub fn shows_host(&self, path: &Path) -> bool {
        self.covering(path).is_some_and(Mount::shows_host)
    }

    /// Whether a command may write at `path` (canonical): what the tests hold the
    /// mount order to.
    #[cfg(test)]
    pub fn writable(&self, path: &Path) -> bool {
        self.covering(path).is_some_and(Mount::writable)
    }

    /// The mounts as `bwrap` arguments.
    pub fn args(&self) -> Vec<OsString> {
        let mut args = Vec::with_capacity(self.mounts.len() * 3);
        for mount in &self.mounts {
            mount.render(&mut args);
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn layout() -> Layout {
        let mut l = Layout::default();
        for m in [
            Mount::HostReadOnly(p("/")),
            Mount::Devices(p("/dev")),
            Mount::Processes(p("/proc")),
            Mount::Scratch(p("/tmp")),
            Mount::EmptyDir(p("/run/user")),
            Mount::HostWritable(p("/tmp/project")),
            Mount::HostReadOnly(p("/tmp/project/.git/hooks")),
            Mount::EmptyDir(p("/home/u/.ssh")),
            Mount::EmptyFile {
                path: p("/home/u/.netrc"),
                empty: p("/state/empty"),
            },
        ] {
            l.push(m);
        }
        l
    }

    #[test]
    fn the_last_mount_at_or_above_a_path_decides_what_it_is() {
        let l = layout();
        assert!(l.shows_host(&p("/usr/bin/env")) && !l.writable(&p("/usr/bin/env")));
        assert!(!l.shows_host(&p("/tmp/dsh-0/dsh.sock")), "private /tmp");
        assert!(l.writable(&p("/tmp/scratch")));
        assert!(l.shows_host(&p("/tmp/project/src")) && l.writable(&p("/tmp/project/src")));
        assert!(!l.writable(&p("/tmp/project/.git/hooks/pre-commit")));
        assert!(l.writable(&p("/tmp/project/.git/objects/ab")));
        assert!(!l.shows_host(&p("/run/user/1000/dsh/dsh.sock")));
        assert!(!l.shows_host(&p("/home/u/.ssh/id_ed25519")));
        assert!(!l.shows_host(&p("/home/u/.netrc")));
        // A path is cut at components, not characters.
        assert!(l.shows_host(&p("/home/u/.sshd")) && l.shows_host(&p("/run/username")));
    }

    #[test]
    fn a_later_root_over_an_earlier_mask_shows_the_host_again() {
        let mut l = layout();
        l.push(Mount::HostWritable(p("/run/user/1000")));
        assert!(l.shows_host(&p("/run/user/1000/dsh/dsh.sock")));
        assert!(!l.shows_host(&p("/run/user/1001/x")));
    }

    #[test]
    fn the_arguments_follow_the_order_of_the_mounts() {
        let args: Vec<String> = layout()
            .args()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args.join(" "),
            "--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /run/user --remount-ro \
             /run/user --bind /tmp/project /tmp/project --ro-bind /tmp/project/.git/hooks \
             /tmp/project/.git/hooks --tmpfs /home/u/.ssh --remount-ro /home/u/.ssh --ro-bind \
             /state/empty /home/u/.netrc"
        );
    }
}
