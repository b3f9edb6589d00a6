//! The sandbox executor: `bash -c` inside bubblewrap on this machine.
//!
//! Each command gets the whole file system read-only except its writable roots
//! (the calling session's cwd, the directories it was granted, and
//! `[exec.sandbox] writable`), a private /tmp, /dev and /proc, no network unless
//! configured, and a PID namespace of its own, which is what ends everything it
//! started (`pidns`). The engine (`process`) does the rest, as for local commands.
//!
//! Containment (E6-E9, spec/tools.md), each a layer of its own:
//! * no privilege: a user namespace with every capability dropped and no nested
//!   user namespaces (`--unshare-user --disable-userns --cap-drop ALL`), and the
//!   kernel's interfaces read-only or masked (`/sys`, `/proc` outside the sandbox's
//!   own processes: `layout::Kernel`), since uid 0 inside is the host's root
//!   to procfs;
//! * no way back: the runtime directory and the host's service sockets are masked,
//!   and a command is refused when the layout would still show the daemon's
//!   socket (`layout`); the daemon also refuses any connection from a process it
//!   started, whatever the executor (`exec::lineage`);
//! * a seccomp floor that bwrap installs just before the command (`seccomp`);
//! * secrets masked (`deny_read`) and the paths that would run code later kept
//!   read-only inside the writable roots (`protect`).
//!
//! Fail closed: the executor is only built after a probe sandbox ran and showed
//! no capability, no_new_privs and the seccomp filter in force; a missing or old
//! bwrap or a kernel that refuses namespaces stops `dsh serve` with a message, and
//! nothing ever runs unsandboxed or in a weaker sandbox instead.

mod files;
mod layout;
mod netns;
mod network;
mod protect;
mod seccomp;
mod tripwires;

use crate::config::NetworkMode;
use layout::{Layout, Mount};
use protect::Guard;
use seccomp::Floor;
#[doc(hidden)]
pub use tripwires::RootSearch;
use tripwires::{Tripwires, Watch};

use super::pidns;
use super::process::{Launcher, ProcessExecutor, check_local_workdir};
use super::procs::Selector;
use super::{ExecError, ExecSpec};
use crate::config::{ExecConfig, SandboxConfig};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::process::Command;

/// The oldest bubblewrap with every option the sandbox needs (`--disable-userns`
/// came in 0.8.0; `--cap-drop` and `--seccomp`-era options long before).
pub const MIN_BWRAP: (u32, u32, u32) = (0, 8, 0);

/// Builds the `bwrap` command line of each command.
pub struct SandboxLauncher {
    bwrap: PathBuf,
    network: crate::config::NetworkMode,
    writable: Vec<PathBuf>,
    /// `deny_read` resolved (`~`, the XDG directories: [`crate::config::DenyRead`]),
    /// plus dsh's own state and config directories.
    deny_read: Vec<PathBuf>,
    allow_git_config: bool,
    /// The seccomp floor's program, in a sealed memfd: each command's bwrap reads
    /// it through a description of its own ([`SandboxLauncher::seccomp_fd`]).
    seccomp: std::os::fd::OwnedFd,
    /// Each started command's descriptors for bwrap (its copy of the program's, and
    /// in proxy mode the network's pipes), from its command line until the engine
    /// takes them to hand on ([`Launcher::inherited`]).
    pending: std::sync::Mutex<std::collections::HashMap<String, Vec<std::os::fd::OwnedFd>>>,
    /// The commands' proxies, in `network = "proxy"` mode.
    proxies: Option<network::Proxies>,
    /// `[exec.sandbox] allow_home_root`.
    allow_home_root: bool,
    /// What a masked file shows ([`empty_file`]).
    empty: PathBuf,
    /// The daemon's home directory, its real path (rc files are held there).
    home: Option<PathBuf>,
    /// The placeholders of missing protected entries, by the sandboxes holding them.
    placeholders: std::sync::Mutex<Placeholders>,
    /// What each running command's sandbox is checked for when it is gone.
    tripwires: std::sync::Mutex<Tripwires>,
    /// The host's sockets, and where the ones no command may reach (the daemon's
    /// own) can be reached: a command whose layout would show one is refused.
    host: HostView,
    /// `core.hooksPath` of the user's global git config.
    global_hooks: Vec<PathBuf>,
    /// The kernel's interfaces in `/proc` and `/sys` to hold, read once.
    kernel: layout::Kernel,
    /// Where the executor spills output (inside the masked state directory): the file
    /// tools read the spill files dsh names in a command's result (`files`).
    spill_dir: PathBuf,
    /// The variables `[exec] env_pass` and `env_set` give every command
    /// ([`given_env`]).
    given_env: Vec<(OsString, OsString)>,
}

/// Runs commands in bubblewrap sandboxes (see the module docs).
pub type SandboxExecutor = ProcessExecutor<SandboxLauncher>;

impl ProcessExecutor<SandboxLauncher> {
    /// A sandbox executor over the daemon's environment (filtered by E4), or why
    /// none can exist on this machine. `guarded` are sockets no command may reach
    /// (the daemon's own).
    pub fn new(config: &ExecConfig, guarded: &[PathBuf]) -> Result<Self, String> {
        Self::with_env(config, guarded, std::env::vars_os())
    }

    /// As [`Self::new`], with `base_env` in place of the daemon's environment.
    pub fn with_env(
        config: &ExecConfig,
        guarded: &[PathBuf],
        base_env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<Self, String> {
        let base_env: Vec<(OsString, OsString)> = base_env.into_iter().collect();
        let mut launcher = SandboxLauncher::new(config, guarded)?;
        launcher.given_env = given_env(config, &base_env);
        launcher.probe()?;
        Self::with_launcher(config, allowed_env(base_env), launcher)
            .map_err(|e| format!("cannot start the sandbox executor: {e}"))
    }
}

/// The part of the daemon's environment a sandboxed command inherits (E4): only the
/// allowlist ([`crate::config::sandbox_env_allowed`]); the engine's denylist and
/// forced settings apply on top, as for every executor. It is also bwrap's own
/// environment, which needs nothing more. A name that is not UTF-8 is no name of
/// the allowlist.
fn allowed_env(base: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
    base.into_iter()
        .filter(|(name, _)| {
            name.to_str()
                .is_some_and(crate::config::sandbox_env_allowed)
        })
        .collect()
}

/// What `[exec] env_pass` (the daemon's values of the names it lists, when set) and
/// `env_set` give every sandboxed command, set by bwrap inside the sandbox
/// (`--setenv`) so the denylist does not drop what the person named.
fn given_env(config: &ExecConfig, base: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
    let mut given: Vec<(OsString, OsString)> = Vec::new();
    for name in &config.env_pass {
        if let Some((_, value)) = base.iter().find(|(n, _)| n.as_os_str() == name.as_str()) {
            given.push((name.into(), value.clone()));
        }
    }
    for (name, value) in &config.env_set {
        given.retain(|(n, _)| n.as_os_str() != name.as_str());
        given.push((name.into(), value.into()));
    }
    given
}

/// The daemon's home directory (for `~/` in `deny_read` and the global git config).
fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// How long what [`HostView`] read of the host is used before it is read again.
const HOST_VIEW_FRESH: Duration = Duration::from_secs(2);

/// What the layout needs to know of the host beyond the roots: where its service
/// sockets are and where the daemon's socket can be reached. Reading both costs a
/// command about 0.23 ms (a walk of `/run`, a parse of mountinfo), so it is read at
/// most every [`HOST_VIEW_FRESH`]. A socket or a bind mount newer than that can
/// reach a command only past the other layers (the seccomp floor refuses new Unix
/// sockets; the daemon refuses its own descendants), and never one of the
/// daemon's: its socket exists before any command.
struct HostView {
    /// The sockets no command may reach (the daemon's own).
    guarded: Vec<PathBuf>,
    seen: std::sync::Mutex<Option<(std::time::Instant, std::sync::Arc<HostSnapshot>)>>,
}

/// One reading of the host.
struct HostSnapshot {
    /// The service sockets to mask ([`host_sockets`]).
    sockets: Vec<PathBuf>,
    /// Every path each guarded socket is reached at ([`socket_aliases`]).
    guarded_at: Vec<PathBuf>,
}

impl HostView {
    fn new(guarded: &[PathBuf]) -> Self {
        Self {
            guarded: guarded.to_vec(),
            seen: Default::default(),
        }
    }

    fn now(&self) -> std::sync::Arc<HostSnapshot> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, snapshot)) = seen.as_ref()
            && at.elapsed() < HOST_VIEW_FRESH
        {
            return snapshot.clone();
        }
        let snapshot = std::sync::Arc::new(HostSnapshot {
            sockets: host_sockets(),
            guarded_at: self
                .guarded
                .iter()
                .flat_map(|s| socket_aliases(s))
                .collect(),
        });
        *seen = Some((std::time::Instant::now(), snapshot.clone()));
        snapshot
    }
}

/// Where the host's service sockets live, each masked wherever it holds one:
/// every top-level entry of `/run` (and `/var/run`, where it is a directory of its
/// own) with a Unix socket in it (D-Bus, systemd, container engines, a database,
/// every user's runtime directory), LXD's, and, whether or not a socket is there
/// yet, the daemon's own runtime directory (its socket, gpg and ssh agents), the ssh
/// agent's socket and the D-Bus session bus. Found afresh for each command by a
/// bounded walk, so a mount is spent only where a socket is: each costs a command
/// about a quarter of a millisecond (bench X1). A socket made after the command
/// started is not masked; the seccomp floor refuses new Unix sockets anyway unless
/// `allow_unix_sockets` lifts it.
fn host_sockets() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for base in ["/run", "/var/run", "/var/lib/lxd"] {
        let base = Path::new(base);
        // /var/run is usually a link to /run: walked once.
        if base.is_symlink() {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(base) else {
            continue;
        };
        let mut budget = 2000;
        for entry in entries.flatten() {
            if holds_socket(&entry.path(), 4, &mut budget) {
                paths.push(entry.path());
            }
        }
    }
    for var in ["XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"] {
        paths.extend(std::env::var_os(var).map(PathBuf::from));
    }
    if let Some(bus) = std::env::var("DBUS_SESSION_BUS_ADDRESS")
        .ok()
        .and_then(|a| {
            a.split(',')
                .find_map(|p| p.split_once("path=").map(|(_, v)| v.to_string()))
        })
    {
        paths.push(PathBuf::from(bus));
    }
    paths
}

/// Whether `path` is a Unix socket or a directory with one within `depth` levels;
/// `budget` bounds the entries looked at. A directory deeper than `depth` or past
/// the budget counts as holding one: the closed side.
fn holds_socket(path: &Path, depth: usize, budget: &mut usize) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    let kind = meta.file_type();
    if kind.is_socket() {
        return true;
    }
    if !kind.is_dir() {
        return false;
    }
    if depth == 0 || *budget == 0 {
        return true;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        // Unreadable to us is unreachable to a command too.
        return false;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return true;
        }
        *budget -= 1;
        if holds_socket(&entry.path(), depth - 1, budget) {
            return true;
        }
    }
    false
}

/// A mask for whatever is at `path` now, at its real place: `None` when nothing is
/// there (nothing to read, and a read-only parent keeps it so).
fn mask(path: &Path, empty: &Path) -> Option<Mount> {
    Some(mask_real(path.canonicalize().ok()?, empty))
}

/// [`mask`] of a path already canonical.
fn mask_real(real: PathBuf, empty: &Path) -> Mount {
    if real.is_dir() {
        Mount::EmptyDir(real)
    } else {
        Mount::EmptyFile {
            path: real,
            empty: empty.to_path_buf(),
        }
    }
}

/// The floor's program in a memfd sealed against any change, made once.
fn sealed_program(bytes: &[u8]) -> Result<std::os::fd::OwnedFd, String> {
    use std::io::Write;
    use std::os::fd::{AsRawFd, FromRawFd};
    let fail = |what: &str| {
        format!(
            "cannot hold the seccomp floor ({what}): {}",
            std::io::Error::last_os_error()
        )
    };
    // SAFETY: a constant, NUL-terminated name.
    let fd = unsafe {
        libc::memfd_create(
            c"dsh-seccomp".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(fail("memfd_create"));
    }
    // SAFETY: memfd_create just returned it; nothing else owns it.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)
        .map_err(|e| format!("cannot hold the seccomp floor: {e}"))?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: fcntl on a descriptor we own.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(fail("seal"));
    }
    Ok(file.into())
}

/// The empty, read-only file masked files show (`state_dir/sandbox-empty`), made
/// afresh at start so that nothing can have been written into it.
fn empty_file(state_dir: &Path) -> Result<PathBuf, String> {
    crate::fsutil::ensure_private_dir(state_dir).map_err(|e| e.to_string())?;
    let path = state_dir.join("sandbox-empty");
    // Made under a name of its own and renamed over the old one: whatever was there
    // (something written since) is replaced whole, and two executors made at once
    // (tests, the escalation pair) never find each other's half-made file.
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let fresh = state_dir.join(format!(
        "sandbox-empty.{}.{}",
        std::process::id(),
        MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    crate::fsutil::private_file()
        .write(true)
        .create_new(true)
        .open(&fresh)
        .and_then(|f| f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o444)))
        .and_then(|()| std::fs::rename(&fresh, &path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&fresh);
            format!("cannot make {}: {e}", path.display())
        })?;
    Ok(path)
}

/// Where a Unix socket can be reached by path on this host: its real path and every
/// other mount of the same file system that shows it (a bind mount of its
/// directory elsewhere), read from `/proc/self/mountinfo`.
fn socket_aliases(socket: &Path) -> Vec<PathBuf> {
    // The socket may not exist yet (the executor starts before the daemon binds):
    // its real place is then its directory's, or the path as written.
    let real = socket.canonicalize().unwrap_or_else(|_| {
        match (socket.parent().map(Path::canonicalize), socket.file_name()) {
            (Some(Ok(dir)), Some(name)) => dir.join(name),
            _ => socket.to_path_buf(),
        }
    });
    let mut aliases = vec![real.clone()];
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return aliases;
    };
    let mounts: Vec<(String, PathBuf, PathBuf)> = info
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let device = fields.nth(2)?.to_string();
            let root = PathBuf::from(unescape(fields.next()?));
            let point = PathBuf::from(unescape(fields.next()?));
            Some((device, root, point))
        })
        .collect();
    // The mount the socket is reached through: the deepest mount point above it.
    let Some((device, root, point)) = mounts
        .iter()
        .filter(|(_, _, point)| real.starts_with(point))
        .max_by_key(|(_, _, point)| point.components().count())
    else {
        return aliases;
    };
    let Ok(below) = real.strip_prefix(point) else {
        return aliases;
    };
    let inside = root.join(below);
    for (other_device, other_root, other_point) in &mounts {
        if other_device == device
            && let Ok(rest) = inside.strip_prefix(other_root)
        {
            let alias = other_point.join(rest);
            if !aliases.contains(&alias) {
                aliases.push(alias);
            }
        }
    }
    aliases
}

/// mountinfo escapes space, tab, newline and backslash as three octal digits.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value =
                (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(value);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl SandboxLauncher {
    fn new(config: &ExecConfig, guarded: &[PathBuf]) -> Result<Self, String> {
        let sandbox: &SandboxConfig = &config.sandbox;
        sandbox.check()?;
        let home = home();
        let mut deny_read: Vec<PathBuf> = sandbox
            .deny_read
            .iter()
            .filter_map(|p| crate::config::DenyRead::parse(p))
            .flat_map(|entry| entry.paths(home.as_deref(), |v| std::env::var_os(v)))
            .collect();
        deny_read.push(config.state_dir());
        deny_read.extend(
            crate::config::user_config_file().and_then(|f| f.parent().map(Path::to_path_buf)),
        );
        let floor = Floor {
            allow_unix_sockets: sandbox.allow_unix_sockets,
        };
        let empty = empty_file(&config.state_dir())?;
        Ok(Self {
            kernel: layout::Kernel::of_this_host(&empty),
            empty,
            bwrap: sandbox.bwrap.clone(),
            network: sandbox.network.mode,
            writable: sandbox.writable.clone(),
            deny_read,
            allow_git_config: sandbox.allow_git_config,
            allow_home_root: sandbox.allow_home_root,
            seccomp: sealed_program(&seccomp::bytes(floor)?)?,
            pending: Default::default(),
            home: home.as_deref().and_then(|h| h.canonicalize().ok()),
            placeholders: Default::default(),
            tripwires: Default::default(),
            proxies: (sandbox.network.mode == NetworkMode::Proxy).then(Default::default),
            host: HostView::new(guarded),
            global_hooks: protect::global_hooks_paths(home.as_deref()),
            spill_dir: crate::exec::outfiles::dir(&config.state_dir()),
            given_env: Vec::new(),
        })
    }

    /// The file system of a command in `workdir` that may write to `roots`, or why
    /// no sandbox for it can hold (see the module docs for the layers and
    /// ARCHITECTURE.md for the order). For the command marked `mark` it also holds
    /// the missing protected entries of its roots with placeholders
    /// ([`Placeholders`]); `None` (the probe, a check) makes none.
    fn layout_for(
        &self,
        workdir: &Path,
        roots: &[PathBuf],
        mark: Option<&str>,
    ) -> Result<Layout, String> {
        let held = match mark {
            Some(mark) => Held::Taken(mark),
            None => Held::Nothing,
        };
        self.layout_with(workdir, roots, held)
    }

    /// [`SandboxLauncher::layout_for`], with the missing protected entries `held` as
    /// said there.
    fn layout_with(
        &self,
        workdir: &Path,
        roots: &[PathBuf],
        held: Held<'_>,
    ) -> Result<Layout, String> {
        let mut layout = Layout::default();
        for mount in [
            Mount::HostReadOnly("/".into()),
            Mount::Devices("/dev".into()),
            Mount::Processes("/proc".into()),
            Mount::Scratch("/tmp".into()),
        ] {
            layout.push(mount);
        }
        let host = self.host.now();
        for path in &host.sockets {
            layout.extend(mask(path, &self.empty));
        }
        if self.network == NetworkMode::Host {
            // The stub resolver's file, which /etc/resolv.conf often links to.
            let resolve = Path::new("/run/systemd/resolve");
            if resolve.is_dir() {
                layout.push(Mount::HostReadOnly(resolve.into()));
            }
        }
        let mut writable = Vec::new();
        for root in roots.iter().chain(&self.writable) {
            if !root.is_absolute() || !root.is_dir() {
                continue;
            }
            let real = root
                .canonicalize()
                .map_err(|e| format!("{}: {e}", root.display()))?;
            if real != *root {
                return Err(format!(
                    "the writable root {} is reached through a symlink (it is {}): a symlink \
                     never widens what a command may write, so use the real path",
                    root.display(),
                    real.display()
                ));
            }
            if !self.allow_home_root
                && let Some(home) = self.home.as_deref()
                && home.starts_with(&real)
            {
                return Err(format!(
                    "the writable root {} is your home directory or holds it: a command could \
                     write what runs at your next login or shell (systemd user units, \
                     ~/.local/bin, autostart entries, tools' startup files). Start the session \
                     in a project directory, or set [exec.sandbox] allow_home_root = true",
                    root.display()
                ));
            }
            layout.push(Mount::HostWritable(real.clone()));
            writable.push(real);
        }
        let mut watch = Watch::default();
        // Resolved once: the pins below and the masks at the end both use them.
        let masked: Vec<PathBuf> = self
            .deny_read
            .iter()
            .filter_map(|p| p.canonicalize().ok())
            .collect();
        // Each root and the nested projects in it: where missing protected entries
        // are held.
        let mut levels: Vec<PathBuf> = Vec::new();
        for root in &writable {
            let found = protect::in_root(root, self.walk_settings());
            levels.push(root.clone());
            levels.extend(found.projects.iter().cloned());
            if found.truncated {
                watch.truncated.push(root.clone());
                tracing::warn!(
                    root = %root.display(),
                    "the sandbox's walk for repositories and protected names stopped at {} \
                     directories: what lies beyond is not guarded",
                    protect::MAX_DIRS
                );
            }
            // Pins first, outermost first (a mount hides the ones made below it
            // before): each `.git` and every directory between the root and a guard
            // or a mask, so none can be renamed away with the guard inside it.
            let mut pins = std::collections::BTreeSet::new();
            for guard in &found.guards {
                pins.extend(protect::between(root, guard.path()));
                if let Guard::Pinned(git) = guard {
                    pins.insert(git.clone());
                    watch.gitdirs.push(git.clone());
                }
            }
            for mask in masked.iter().filter(|m| m.starts_with(root)) {
                pins.extend(protect::between(root, mask));
            }
            for pin in pins {
                if pin.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                    layout.push(Mount::HostWritable(pin));
                }
            }
            for guard in found.guards {
                match guard {
                    Guard::ReadOnly(p) => layout.push(Mount::HostReadOnly(p)),
                    Guard::EmptyDir(p) => layout.push(Mount::EmptyDir(p)),
                    Guard::Pinned(_) => {}
                }
            }
            watch.links.extend(found.links);
            if !self.allow_git_config {
                watch.repositories.push((root.clone(), found.repositories));
            }
        }
        if held != Held::Nothing {
            if let Held::Taken(mark) = held {
                // The session's next command starts only once the checks of its
                // ended ones are done (issue 40).
                let waiter = self
                    .tripwires
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .waiter(mark);
                waiter.wait()?;
                self.tripwires
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .set(mark, watch);
            }
            let home = self.home.as_deref();
            let mut holding = self.placeholders.lock().unwrap_or_else(|p| p.into_inner());
            for level in &levels {
                let at_home = home == Some(level.as_path());
                for (name, dir) in protect::held_if_missing(at_home) {
                    let path = level.join(name);
                    if path.symlink_metadata().is_ok() && !holding.holds(&path) {
                        continue; // it exists (and was guarded above)
                    }
                    // A nested project inside a guarded path (a repository under
                    // `.vscode/`) is read-only already, and bwrap could not make
                    // the mount point there.
                    if !layout.writable(&path) {
                        continue;
                    }
                    if let Held::Taken(mark) = held {
                        holding.take(mark, &path);
                    }
                    layout.push(if dir {
                        Mount::EmptyDir(path)
                    } else {
                        Mount::EmptyFile {
                            path,
                            empty: self.empty.clone(),
                        }
                    });
                }
            }
        }
        for real in masked {
            layout.extend(Some(mask_real(real, &self.empty)));
        }
        self.kernel.apply(&mut layout);
        let real_workdir = workdir
            .canonicalize()
            .unwrap_or_else(|_| workdir.to_path_buf());
        // The sandbox's own /tmp is a working directory like any (E13): it is there,
        // empty, in every sandbox. Below it, nothing of the host is.
        let own_tmp =
            matches!(layout.covering(&real_workdir), Some(Mount::Scratch(p)) if *p == real_workdir);
        if !layout.shows_host(&real_workdir) && !own_tmp {
            return Err(format!(
                "the working directory {} is inside a path the sandbox masks \
                 ([exec.sandbox] deny_read, dsh's own directories or the host's sockets)",
                workdir.display()
            ));
        }
        {
            if let Some(alias) = host.guarded_at.iter().find(|a| layout.shows_host(a)) {
                return Err(format!(
                    "the sandbox would show dsh's own socket at {} (a writable root or a \
                     bind mount reaches it), and a command must never reach its daemon",
                    alias.display()
                ));
            }
        }
        Ok(layout)
    }

    /// The `bwrap` arguments up to and including `--`, for a command in `workdir`
    /// that may write to `roots`, and the descriptor bwrap reads the seccomp floor
    /// from (`--seccomp N` names it: it must reach bwrap at that number).
    fn arguments(
        &self,
        workdir: &Path,
        roots: &[PathBuf],
    ) -> Result<(Vec<OsString>, std::os::fd::OwnedFd), String> {
        self.arguments_for(workdir, roots, None, Vec::new())
    }

    /// [`SandboxLauncher::arguments`] for the command `mark` (when there is one: its
    /// placeholders and tripwires are taken), with `extra` bwrap options.
    fn arguments_for(
        &self,
        workdir: &Path,
        roots: &[PathBuf],
        mark: Option<&str>,
        extra: Vec<OsString>,
    ) -> Result<(Vec<OsString>, std::os::fd::OwnedFd), String> {
        use std::os::fd::AsRawFd;
        let mut args = self.layout_for(workdir, roots, mark)?.args();
        args.extend(
            [
                "--unshare-user",
                "--disable-userns",
                "--cap-drop",
                "ALL",
                "--unshare-pid",
                "--unshare-ipc",
                "--unshare-uts",
                "--unshare-cgroup-try",
            ]
            .map(OsString::from),
        );
        if self.network != NetworkMode::Host {
            args.push("--unshare-net".into());
        }
        let program = self.seccomp_fd()?;
        args.extend(["--seccomp".into(), program.as_raw_fd().to_string().into()]);
        args.extend(["--die-with-parent", "--new-session"].map(OsString::from));
        for (name, value) in &self.given_env {
            args.extend(["--setenv".into(), name.clone(), value.clone()]);
        }
        args.extend(extra);
        args.extend(["--chdir".into(), workdir.into(), "--".into()]);
        Ok((args, program))
    }

    /// A descriptor of the floor's program with an offset of its own (bwrap reads to
    /// the end, and commands start concurrently), closed on exec unless the spawn
    /// hands it on.
    fn seccomp_fd(&self) -> Result<std::os::fd::OwnedFd, String> {
        use std::os::fd::AsRawFd;
        let path = format!("/proc/self/fd/{}", self.seccomp.as_raw_fd());
        std::fs::File::open(&path)
            .map(Into::into)
            .map_err(|e| format!("cannot read the seccomp floor ({path}): {e}"))
    }

    /// Checks bwrap's version, then runs a sandbox like every command's and reads
    /// what its command sees in `/proc/self/status`: no capability, no_new_privs,
    /// the seccomp filter. The error says what is missing and how to fix it.
    fn probe(&self) -> Result<(), String> {
        self.check_version()?;
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let (mut args, program) = self.arguments(Path::new("/"), &[])?;
        args.extend(["cat", "/proc/self/status"].map(OsString::from));
        let fd = program.as_raw_fd();
        let start = super::children::starting();
        let mut probe = std::process::Command::new(&self.bwrap);
        probe.args(args).stdin(std::process::Stdio::null());
        // SAFETY: only fcntl (async-signal-safe) between fork and exec: bwrap gets
        // the program's descriptor at the number its command line names.
        unsafe {
            probe.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let output = probe.output();
        drop((start, program));
        let bwrap = self.bwrap.display();
        let out = match output {
            Err(e) => return Err(format!("the sandbox executor cannot run `{bwrap}`: {e}")),
            Ok(out) if out.status.success() => out,
            Ok(out) => {
                return Err(format!(
                    "bubblewrap cannot create a sandbox on this machine ({}): {}. It needs user \
                     namespaces (sysctls kernel.unprivileged_userns_clone=1 and \
                     user.max_user_namespaces > 0; on Ubuntu 24.04+ an AppArmor profile that \
                     allows bwrap); commands are never run unsandboxed instead",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        };
        let status = String::from_utf8_lossy(&out.stdout);
        check_status(&status)
    }

    fn check_version(&self) -> Result<(), String> {
        let bwrap = self.bwrap.display();
        let start = super::children::starting();
        let output = std::process::Command::new(&self.bwrap)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .output();
        drop(start);
        let (a, b, c) = MIN_BWRAP;
        let out = match output {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!(
                    "the sandbox executor needs bubblewrap {a}.{b}.{c} or newer, and `{bwrap}` \
                     was not found: install it (Debian: `apt install bubblewrap`), set \
                     [exec.sandbox] bwrap to its path, or choose another [exec] kind"
                ));
            }
            Err(e) => return Err(format!("the sandbox executor cannot run `{bwrap}`: {e}")),
            Ok(out) => out,
        };
        let text = String::from_utf8_lossy(&out.stdout);
        match parse_version(&text) {
            Some(v) if v >= MIN_BWRAP => Ok(()),
            found => Err(format!(
                "the sandbox executor needs bubblewrap {a}.{b}.{c} or newer (for \
                 --disable-userns and --cap-drop); `{bwrap} --version` says {:?}{}",
                text.trim(),
                if found.is_some() { "" } else { " (unreadable)" }
            )),
        }
    }
}

impl Layout {
    /// Adds a mask unless nothing of the host shows there anyway (under the private
    /// /tmp, or an earlier mask): each mount is time on every command.
    fn extend(&mut self, mount: Option<Mount>) {
        if let Some(mount) = mount
            && self.shows_host(mount.path())
        {
            self.push(mount);
        }
    }
}

/// `bubblewrap 0.8.0` -> (0, 8, 0).
fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let version = text.split_whitespace().nth(1)?;
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    Some((
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
        parts.next().flatten().unwrap_or(0),
    ))
}

/// E6 and E8 as the probe's command saw them: refuses a sandbox that kept a
/// capability, lacks no_new_privs or runs without the seccomp filter.
fn check_status(status: &str) -> Result<(), String> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    let cap_eff = field("CapEff:");
    let no_new_privs = field("NoNewPrivs:");
    let seccomp = field("Seccomp:");
    let caps_clear = cap_eff
        .as_deref()
        .is_some_and(|v| u64::from_str_radix(v, 16) == Ok(0));
    if !caps_clear {
        return Err(format!(
            "the sandbox keeps capabilities on this machine (CapEff {}): bubblewrap must \
             support --unshare-user and --cap-drop; refusing to run commands in a weaker sandbox",
            cap_eff.as_deref().unwrap_or("unknown")
        ));
    }
    if no_new_privs.as_deref() != Some("1") || seccomp.as_deref() != Some("2") {
        return Err(format!(
            "the sandbox's seccomp floor is not in force (NoNewPrivs {}, Seccomp {}): the \
             kernel must support seccomp filters; refusing to run commands without it",
            no_new_privs.as_deref().unwrap_or("unknown"),
            seccomp.as_deref().unwrap_or("unknown")
        ));
    }
    Ok(())
}

#[async_trait::async_trait]
impl Launcher for SandboxLauncher {
    fn kind(&self) -> &'static str {
        "sandbox"
    }

    /// bwrap reports a signal death of the command as exit code 128+n.
    fn exact_status(&self) -> bool {
        false
    }

    async fn check_workdir(&self, dir: &Path) -> Result<(), ExecError> {
        check_local_workdir(dir)
    }

    fn command(&self, spec: &ExecSpec, mark: &str) -> Result<Command, ExecError> {
        let refuse = |why| {
            // Refused after its placeholders (or its network) were taken: nothing
            // else will end them.
            let _ = self.release(|m| m == mark);
            ExecError::Sandbox(why)
        };
        let (extra, mut inherited) = match &self.proxies {
            Some(proxies) => proxies.prepare(spec, mark).map_err(refuse)?,
            None => (Vec::new(), Vec::new()),
        };
        // The layout walks each writable root (up to `protect::MAX_DIRS` directories):
        // never on an async worker, where it would hold up every other session's calls.
        let (args, program) = off_the_workers(|| {
            self.arguments_for(&spec.workdir, &spec.writable_roots, Some(mark), extra)
        })
        .map_err(refuse)?;
        inherited.push(program);
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(mark.to_string(), inherited);
        let mut cmd = Command::new(&self.bwrap);
        cmd.args(args)
            .arg("bash")
            .arg("-c")
            .arg(&spec.command)
            .current_dir(&spec.workdir);
        Ok(cmd)
    }

    fn never_started(&self, mark: &str) {
        let _ = self.release(|m| m == mark);
    }

    fn inherited(&self, mark: &str) -> Vec<std::os::fd::OwnedFd> {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.remove(mark).unwrap_or_default()
    }

    async fn started(&self, mark: &str, _pid: i32) -> Result<(), String> {
        match &self.proxies {
            Some(proxies) => proxies.started(mark).await,
            None => Ok(()),
        }
    }

    fn proxied_connections(&self) -> Vec<(String, usize)> {
        self.proxies
            .as_ref()
            .map(network::Proxies::open_connections)
            .unwrap_or_default()
    }

    fn set_connection_judge(
        &self,
        judge: std::sync::Arc<dyn crate::exec::netproxy::ConnectionJudge>,
    ) {
        if let Some(proxies) = &self.proxies {
            proxies.set_judge(judge);
        }
    }

    async fn stop(&self, mark: &str, sid: Option<i32>, grace: Duration) {
        if let Some(proxies) = &self.proxies {
            proxies.abandon(&|m: &str| m == mark);
        }
        self.ending(|m| m == mark);
        let selector = Selector::Task {
            mark: mark.to_string(),
            sid,
        };
        pidns::terminate(selector, sid, grace).await;
        let _ = self.release_off_workers(|m| m == mark).await;
    }

    async fn stop_prefix(&self, prefix: &str, grace: Duration) {
        if let Some(proxies) = &self.proxies {
            proxies.abandon(&|m: &str| m.starts_with(prefix));
        }
        self.ending(|m| m.starts_with(prefix));
        pidns::terminate(Selector::MarkPrefix(prefix.to_string()), None, grace).await;
        let _ = self.release_off_workers(|m| m.starts_with(prefix)).await;
    }

    /// When the command's namespace init exits, the kernel SIGKILLs what is left in
    /// the namespace, but those processes are reaped a moment later: a run returns
    /// only once they are gone, so nothing of a sandboxed command is seen after it
    /// (the contract test caught one in the process table about once in five runs).
    async fn after_exit(&self, mark: &str, sid: i32, grace: Duration) -> Vec<String> {
        self.ending(|m| m == mark);
        let selector = Selector::Task {
            mark: mark.to_string(),
            sid: Some(sid),
        };
        pidns::terminate(selector, Some(sid), grace).await;
        self.release_off_workers(|m| m == mark).await
    }

    /// The sandbox's files are the host's, at the same paths (`files`).
    fn files_are_local(&self) -> bool {
        true
    }

    async fn stat_file(
        &self,
        request: &crate::exec::FileRequest,
        intent: crate::exec::FileIntent,
    ) -> Result<Option<crate::exec::FileStat>, crate::exec::FileError> {
        files::stat(self, request, intent).await
    }

    async fn read_file(
        &self,
        request: &crate::exec::FileRequest,
    ) -> Result<Option<Vec<u8>>, crate::exec::FileError> {
        files::read(self, request).await
    }

    async fn write_file(
        &self,
        request: &crate::exec::FileRequest,
        content: &[u8],
    ) -> Result<crate::exec::WriteOutcome, crate::exec::FileError> {
        files::write(self, request, content).await
    }
}

/// Checks what ended sandboxes left against their tripwires (searching what
/// changed in their roots): a line per refusal.
fn check_watches(watches: Vec<Watch>) -> Vec<String> {
    watches.into_iter().flat_map(Watch::check).collect()
}

/// Runs a blocking walk of the file system without holding an async worker. The
/// launcher's `command` is synchronous (the engine calls it as it spawns), so the walk
/// cannot be awaited on the blocking pool there: on a multi-threaded runtime's worker
/// `block_in_place` hands that worker's other tasks to another thread for the walk's
/// time; on a blocking thread, outside any runtime or on a current-thread runtime
/// (where `block_in_place` would panic) it runs as it is.
fn off_the_workers<T>(walk: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(walk)
        }
        _ => walk(),
    }
}

impl SandboxLauncher {
    fn walk_settings(&self) -> protect::Settings<'_> {
        protect::Settings {
            allow_git_config: self.allow_git_config,
            global_hooks: &self.global_hooks,
            home: self.home.as_deref(),
        }
    }

    /// The sandboxes `ended` picks are ending: a command of their sessions waits
    /// from now until their checks are done (`tripwires::Tripwires::waiter`).
    fn ending(&self, ended: impl Fn(&str) -> bool) {
        self.tripwires
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ending(&ended);
    }

    /// The sandboxes of the marks `ended` picks are gone: their placeholders are
    /// let go, and removed once no sandbox holds them.
    /// What their tripwires refused is returned, a line each, for the command's
    /// output. Walks on the calling thread: for the paths where no command ran (a
    /// refused or unstarted one), whose tripwires found nothing yet to walk for.
    fn release(&self, ended: impl Fn(&str) -> bool) -> Vec<String> {
        let watches = self
            .tripwires
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(&ended);
        let notes = check_watches(watches);
        self.release_rest(ended, notes)
    }

    /// [`SandboxLauncher::release`] for a command that ran: the end-of-command check
    /// walks its roots again (up to `protect::MAX_DIRS` directories each), so it runs
    /// on tokio's blocking pool, never on an async worker. Everything else is let go
    /// only after it, as before.
    async fn release_off_workers(&self, ended: impl Fn(&str) -> bool) -> Vec<String> {
        let watches = self
            .tripwires
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(&ended);
        let notes = if watches.is_empty() {
            Vec::new()
        } else {
            match tokio::task::spawn_blocking(move || check_watches(watches)).await {
                Ok(notes) => notes,
                // A check that could not end must not pass for a clean one.
                Err(e) => vec![format!(
                    "dsh: the sandbox's end-of-command check did not complete ({e}); \
                     what the command left in its roots was not checked"
                )],
            }
        };
        self.release_rest(ended, notes)
    }

    /// The rest of a release, after the tripwires' check: the proxies' and the
    /// placeholders'.
    fn release_rest(&self, ended: impl Fn(&str) -> bool, mut notes: Vec<String>) -> Vec<String> {
        if let Some(proxies) = &self.proxies {
            notes.extend(proxies.release(&ended));
        }
        let mut held = self.placeholders.lock().unwrap_or_else(|p| p.into_inner());
        held.release(ended);
        notes
    }
}

/// What a layout does with the protected entries its roots lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held<'a> {
    /// Nothing (the probe, a check of the workdir).
    Nothing,
    /// The command marked so holds them with placeholders, and its tripwires are set.
    Taken(&'a str),
    /// They are in the layout as the masks a command would get, but nothing is made on
    /// the host: what the file tools judge by (`files`).
    Shown,
}

/// The placeholders bwrap leaves on the host for the protected entries a root
/// lacks (an empty `.vscode/`, `.gitmodules`, ...): a mount needs a place, and
/// without one a command could create the entry itself. Each is counted by the
/// sandboxes that hold it and removed when the last of them is gone and it is still
/// empty (never something a person put there meanwhile). A path already held is
/// held again by the next command, even though it now exists: removing it under a
/// running sandbox would detach that sandbox's mount.
#[derive(Debug, Default)]
pub struct Placeholders {
    users: std::collections::HashMap<PathBuf, usize>,
    by_mark: std::collections::HashMap<String, Vec<PathBuf>>,
}

impl Placeholders {
    fn holds(&self, path: &Path) -> bool {
        self.users.contains_key(path)
    }

    fn take(&mut self, mark: &str, path: &Path) {
        *self.users.entry(path.to_path_buf()).or_default() += 1;
        self.by_mark
            .entry(mark.to_string())
            .or_default()
            .push(path.to_path_buf());
    }

    fn release(&mut self, ended: impl Fn(&str) -> bool) {
        let marks: Vec<String> = self.by_mark.keys().filter(|m| ended(m)).cloned().collect();
        for mark in marks {
            for path in self.by_mark.remove(&mark).unwrap_or_default() {
                let Some(count) = self.users.get_mut(&path) else {
                    continue;
                };
                *count -= 1;
                if *count == 0 {
                    self.users.remove(&path);
                    remove_if_empty(&path);
                }
            }
        }
    }
}

/// Removes an empty directory or an empty regular file (a placeholder as bwrap
/// made it); anything with content stays.
fn remove_if_empty(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            let _ = std::fs::remove_dir(path); // fails when not empty
        }
        Ok(meta) if meta.is_file() && meta.len() == 0 => {
            let _ = std::fs::remove_file(path);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn config(network: bool, writable: Vec<PathBuf>) -> ExecConfig {
        let mut config = ExecConfig {
            state_dir: Some(std::env::temp_dir().join(format!("dsh-unit-{}", std::process::id()))),
            ..ExecConfig::default()
        };
        config.sandbox.network.mode = if network {
            NetworkMode::Host
        } else {
            NetworkMode::None
        };
        config.sandbox.writable = writable;
        config.sandbox.deny_read = vec![];
        config
    }

    fn joined(args: &[OsString]) -> String {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn e6_every_command_gets_a_user_namespace_without_capabilities_and_the_floor() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let launcher = SandboxLauncher::new(&config(false, vec![]), &[]).unwrap();
        let (args, program) = launcher
            .arguments(&root, std::slice::from_ref(&root))
            .unwrap();
        let args = joined(&args);
        let tmpfs = args.find("--tmpfs /tmp").unwrap();
        let bind = args
            .find(&format!("--bind {0} {0}", root.display()))
            .unwrap();
        assert!(tmpfs < bind, "roots under /tmp show through: {args}");
        assert!(
            args.ends_with(&format!(
                "--unshare-user --disable-userns --cap-drop ALL --unshare-pid --unshare-ipc \
                 --unshare-uts --unshare-cgroup-try --unshare-net --seccomp {} --die-with-parent \
                 --new-session --chdir {} --",
                program.as_raw_fd(),
                root.display()
            )),
            "{args}"
        );
        let open = SandboxLauncher::new(&config(true, vec![]), &[]).unwrap();
        let args = joined(&open.arguments(Path::new("/"), &[]).unwrap().0);
        assert!(!args.contains("--unshare-net"), "{args}");
    }

    #[test]
    fn missing_or_relative_roots_are_skipped_and_a_symlinked_root_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = real.with_file_name("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let launcher = SandboxLauncher::new(&config(false, vec![]), &[]).unwrap();
        let args = joined(
            &launcher
                .arguments(
                    Path::new("/"),
                    &[PathBuf::from("/no/such/dir"), PathBuf::from("relative")],
                )
                .unwrap()
                .0,
        );
        assert!(
            !args.contains("/no/such/dir") && !args.contains("relative"),
            "{args}"
        );
        let err = launcher
            .arguments(&real, std::slice::from_ref(&link))
            .unwrap_err();
        assert!(
            err.contains("symlink") && err.contains(&real.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn e9_the_directories_between_a_root_and_its_guards_and_masks_are_pinned_first() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("deps/lib/.git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("conf")).unwrap();
        std::fs::write(root.join("conf/token"), "secret").unwrap();
        let mut config = config(false, vec![]);
        config.sandbox.deny_read = vec![root.join("conf/token")];
        let launcher = SandboxLauncher::new(&config, &[]).unwrap();
        let args = joined(
            &launcher
                .layout_for(&root, std::slice::from_ref(&root), None)
                .unwrap()
                .args(),
        );
        let at = |needle: String| {
            args.find(&needle)
                .unwrap_or_else(|| panic!("{needle} missing from {args}"))
        };
        let r = root.display();
        let pins = [
            at(format!("--bind {r}/.git {r}/.git")),
            at(format!("--bind {r}/conf {r}/conf")),
            at(format!("--bind {r}/deps {r}/deps")),
            at(format!("--bind {r}/deps/lib {r}/deps/lib")),
            at(format!("--bind {r}/deps/lib/.git {r}/deps/lib/.git")),
        ];
        assert!(
            pins.windows(2).all(|w| w[0] < w[1]),
            "outermost first: {args}"
        );
        let guard = at(format!("--ro-bind {r}/deps/lib/.git/hooks"));
        let mask = at(format!("{r}/conf/token"));
        assert!(
            pins[4] < guard && pins[1] < mask,
            "pins before what they hold: {args}"
        );
        // A root whose only repository is its own gets no pin but its `.git`.
        let plain = tempfile::tempdir().unwrap();
        let plain = plain.path().canonicalize().unwrap();
        std::fs::create_dir_all(plain.join(".git/hooks")).unwrap();
        let args = joined(
            &launcher
                .layout_for(&plain, std::slice::from_ref(&plain), None)
                .unwrap()
                .args(),
        );
        assert_eq!(
            args.matches("--bind ").count(),
            2,
            "the root and its .git: {args}"
        );
    }

    #[test]
    fn e9_the_home_directory_or_one_holding_it_is_no_writable_root_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().canonicalize().unwrap();
        let home = top.join("home");
        std::fs::create_dir_all(home.join("project")).unwrap();
        let mut launcher = SandboxLauncher::new(&config(false, vec![]), &[]).unwrap();
        launcher.home = Some(home.clone());
        for root in [&home, &top] {
            let err = launcher
                .layout_for(&home, std::slice::from_ref(root), None)
                .unwrap_err();
            assert!(err.contains("allow_home_root"), "{err}");
        }
        let project = home.join("project");
        launcher
            .layout_for(&project, std::slice::from_ref(&project), None)
            .unwrap();
        launcher.allow_home_root = true;
        launcher
            .layout_for(&home, std::slice::from_ref(&home), None)
            .unwrap();
    }

    #[test]
    fn e7_a_command_is_refused_when_the_layout_would_show_the_daemons_socket() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let socket = root.join("dsh.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let guarded = [socket.clone()];
        let launcher = SandboxLauncher::new(&config(false, vec![]), &guarded).unwrap();
        // Outside every root, the private /tmp hides it.
        launcher.layout_for(Path::new("/"), &[], None).unwrap();
        let err = launcher
            .layout_for(&root, std::slice::from_ref(&root), None)
            .unwrap_err();
        assert!(err.contains("dsh's own socket"), "{err}");
    }

    #[test]
    fn a_directory_holds_a_socket_however_deep_within_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        let mut budget = 100;
        assert!(!holds_socket(dir.path(), 4, &mut budget), "no socket yet");
        let _listener = std::os::unix::net::UnixListener::bind(deep.join("s")).unwrap();
        let mut budget = 100;
        assert!(holds_socket(dir.path(), 4, &mut budget));
        let mut budget = 100;
        assert!(
            holds_socket(dir.path(), 1, &mut budget),
            "deeper than looked: held"
        );
        let mut budget = 0;
        assert!(
            holds_socket(dir.path(), 4, &mut budget),
            "out of budget: held"
        );
    }

    #[test]
    fn a_socket_is_reached_at_least_at_its_real_path_and_mountinfo_is_unescaped() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let aliases = socket_aliases(&socket);
        assert_eq!(aliases[0], socket.canonicalize().unwrap());
        assert_eq!(unescape("/a\\040b\\134c"), "/a b\\c");
        assert_eq!(unescape("/trailing\\04"), "/trailing\\04");
    }

    #[test]
    fn the_probe_reads_capabilities_no_new_privs_and_seccomp() {
        let good = "Name:\tcat\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n";
        check_status(good).unwrap();
        let root = good.replace("0000000000000000", "000001ffffffffff");
        assert!(
            check_status(&root)
                .unwrap_err()
                .contains("keeps capabilities")
        );
        let unfiltered = good.replace("Seccomp:\t2", "Seccomp:\t0");
        assert!(
            check_status(&unfiltered)
                .unwrap_err()
                .contains("seccomp floor")
        );
        assert!(check_status("").is_err());
        assert_eq!(parse_version("bubblewrap 0.8.0\n"), Some((0, 8, 0)));
        assert_eq!(parse_version("bubblewrap 0.11\n"), Some((0, 11, 0)));
        assert_eq!(parse_version("nonsense"), None);
    }

    #[test]
    fn a_placeholder_goes_when_its_last_sandbox_does_and_only_while_empty() {
        let dir = tempfile::tempdir().unwrap();
        let (held, filled) = (dir.path().join(".vscode"), dir.path().join(".gitmodules"));
        let mut p = Placeholders::default();
        p.take("a/1", &held);
        p.take("a/2", &held);
        p.take("b/1", &filled);
        std::fs::create_dir(&held).unwrap();
        std::fs::write(&filled, "[submodule]\n").unwrap();
        p.release(|m| m == "a/1");
        assert!(held.exists() && p.holds(&held), "a/2 still holds it");
        p.release(|m| m.starts_with("a/"));
        assert!(!held.exists() && !p.holds(&held));
        p.release(|m| m == "b/1");
        assert!(
            filled.exists(),
            "a file with content is a person's, not a placeholder"
        );
    }

    #[test]
    fn a_missing_bwrap_is_refused_with_how_to_fix_it() {
        let mut config = config(false, vec![]);
        config.sandbox.bwrap = PathBuf::from("/nonexistent/bwrap");
        let err = SandboxLauncher::new(&config, &[])
            .unwrap()
            .probe()
            .unwrap_err();
        assert!(
            err.contains("apt install bubblewrap") && err.contains("0.8.0"),
            "{err}"
        );
    }
}
