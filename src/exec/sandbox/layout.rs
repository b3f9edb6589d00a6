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
    /// mount order to, and where a placeholder can be made.
    pub fn writable(&self, path: &Path) -> bool {
        self.covering(path).is_some_and(Mount::writable)
    }

    /// Where each mount is, in order: the placeholders a command's layout names are
    /// held by it (`placeholders`).
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.mounts.iter().map(Mount::path)
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

/// The kernel's files in the sandbox's own `/proc` that are masked (read as empty):
/// Docker's masked paths, and `kallsyms` (the kernel's symbols: their addresses
/// read as zeros without CAP_SYSLOG, but not their names and order). Each is a
/// mount on every command (about 0.25 ms, bench X1), so the ones the kernel itself
/// keeps behind a capability no sandbox has (`kmsg`: CAP_SYSLOG; `kpage*`:
/// CAP_SYS_ADMIN; the addresses in `iomem`, `ioports`, `vmallocinfo`) are left
/// out, and so is any the daemon's user could not read anyway ([`readable`]).
const MASKED_PROC: &[&str] = &[
    "acpi",
    "asound",
    "kallsyms",
    "kcore",
    "keys",
    "latency_stats",
    "sched_debug",
    "scsi",
    "timer_list",
    "timer_stats",
];

/// The parts of `/sys` masked besides the whole being read-only: Docker's
/// (`firmware`: ACPI tables and EFI variables; `powercap`: the RAPL energy counters,
/// a side channel).
const MASKED_SYS: &[&str] = &["/sys/firmware", "/sys/devices/virtual/powercap"];

/// The kernel's own file systems under `/sys`, masked where one is mounted (an
/// empty directory shows nothing): debugfs, tracefs, securityfs.
const MASKED_SYS_MOUNTS: &[&str] = &[
    "/sys/kernel/debug",
    "/sys/kernel/tracing",
    "/sys/kernel/security",
];

/// How many entries the search for writable files below one `/proc` directory
/// reads before it gives up and holds the directory (fail closed).
const PROC_WALK_BUDGET: usize = 5000;

/// Whether the daemon's user may read `meta`'s file by its mode (a command runs as
/// that user; a mask over what it cannot read would cost a mount for nothing).
fn readable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    meta.mode() & 0o004 != 0 || (meta.uid() == me && meta.mode() & 0o400 != 0)
}

/// Whether anything below `dir` (never following a link) has a write bit, or the
/// search ran out of `budget` (then the answer is yes).
fn holds_writable(dir: &Path, budget: &mut usize) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return true;
        }
        *budget -= 1;
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        if meta.is_dir() {
            if holds_writable(&entry.path(), budget) {
                return true;
            }
        } else if meta.permissions().mode() & 0o222 != 0 {
            return true;
        }
    }
    false
}

/// The mounts that keep the kernel's interfaces from the sandbox's root (issue 39,
/// "root is not root"): uid 0 inside is the host's uid 0 to procfs, which checks
/// only the owner, so without them a command of a daemon run as root could open
/// `/proc/sys/kernel/core_pattern` for writing and have the host's root run a
/// program of its choosing at the next crash. Read from this host once (the
/// launcher keeps it: the same kernel shows the same entries in every `/proc`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kernel {
    mounts: Vec<Mount>,
}

impl Kernel {
    /// This host's: every top-level entry of `/proc` outside the processes' own
    /// (pid directories and links into them) that could be written, bound read-only
    /// from the host's `/proc` (`sys` always; another directory when any file below
    /// it has a write bit, as `irq`, `bus`, `fs`, `pressure` do; a file with a write
    /// bit, as `sysrq-trigger`): what is allowed is a list, not what is known to be
    /// dangerous, so a newer kernel's tunable is held too. Then [`MASKED_PROC`],
    /// [`MASKED_SYS`] and [`MASKED_SYS_MOUNTS`] masked with `empty`. Only what exists
    /// here is mounted (bwrap cannot create a file in procfs).
    pub fn of_this_host(empty: &Path) -> Self {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let proc_root = Path::new("/proc");
        let mut mounts = Vec::new();
        let mut entries: Vec<(String, std::fs::Metadata)> = std::fs::read_dir(proc_root)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| Some((e.file_name().into_string().ok()?, e.metadata().ok()?)))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, meta) in &entries {
            let own = meta.file_type().is_symlink() || name.bytes().all(|b| b.is_ascii_digit());
            if own || MASKED_PROC.contains(&name.as_str()) {
                continue;
            }
            let path = proc_root.join(name);
            let held = if meta.is_dir() {
                name == "sys" || holds_writable(&path, &mut { PROC_WALK_BUDGET })
            } else {
                meta.permissions().mode() & 0o222 != 0
            };
            if held {
                mounts.push(Mount::HostReadOnly(path));
            }
        }
        let mask = |path: PathBuf, mounts: &mut Vec<Mount>| match path.symlink_metadata() {
            Ok(meta) if meta.is_dir() && readable(&meta) => mounts.push(Mount::EmptyDir(path)),
            Ok(meta) if meta.is_file() && readable(&meta) => mounts.push(Mount::EmptyFile {
                path,
                empty: empty.to_path_buf(),
            }),
            _ => {}
        };
        for name in MASKED_PROC {
            mask(proc_root.join(name), &mut mounts);
        }
        for path in MASKED_SYS {
            mask(PathBuf::from(path), &mut mounts);
        }
        for path in MASKED_SYS_MOUNTS {
            let path = Path::new(path);
            let mounted = match (path.metadata(), path.parent().map(Path::metadata)) {
                (Ok(at), Some(Ok(parent))) => at.dev() != parent.dev(),
                _ => false,
            };
            if mounted {
                mask(path.to_path_buf(), &mut mounts);
            }
        }
        Self { mounts }
    }

    /// Puts the kernel's mounts over `layout`, last, so nothing before reopens
    /// them; and `/sys` read-only again first when a writable mount reaches into it
    /// (the root's read-only bind already holds it, with every mount below it).
    pub fn apply(&self, layout: &mut Layout) {
        let sys = Path::new("/sys");
        let reaches_sys = layout
            .mounts
            .iter()
            .any(|m| m.writable() && (m.path().starts_with(sys) || sys.starts_with(m.path())));
        if reaches_sys {
            layout.push(Mount::HostReadOnly(sys.into()));
        }
        for mount in &self.mounts {
            layout.push(mount.clone());
        }
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

    #[test]
    fn issue_39_the_kernels_tunables_are_read_only_and_its_secrets_masked() {
        let mut l = layout();
        let kernel = Kernel::of_this_host(Path::new("/state/empty"));
        kernel.apply(&mut l);
        for path in [
            "/proc/sys/kernel/core_pattern",
            "/proc/sys/vm/overcommit_memory",
            "/proc/sys/net/ipv4/ip_forward",
            "/sys/kernel/mm",
            "/sys/fs/cgroup/x",
        ] {
            assert!(!l.writable(&p(path)), "{path}");
        }
        assert!(l.shows_host(&p("/proc/sys/kernel/hostname")), "readable");
        assert!(
            !l.shows_host(&p("/proc/self/status")),
            "the sandbox's own /proc"
        );
        assert!(!l.shows_host(&p("/proc/kallsyms")), "masked");
        for path in ["/proc/keys", "/proc/timer_list", "/sys/firmware/acpi"] {
            if p(path).exists() && nix::unistd::geteuid().is_root() {
                assert!(!l.shows_host(&p(path)), "{path} is masked");
            }
        }
        // /sys needs no mount of its own under the read-only root; a writable root
        // that reaches into it gets one.
        assert!(!kernel.mounts.iter().any(|m| m.path() == Path::new("/sys")));
        let mut l = layout();
        l.push(Mount::HostWritable(p("/sys/fs/cgroup")));
        kernel.apply(&mut l);
        assert!(!l.writable(&p("/sys/fs/cgroup/x")));
    }
}
