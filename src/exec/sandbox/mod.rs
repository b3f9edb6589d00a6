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
mod held;
mod host;
mod layout;

pub use files::explain as explain_file;
mod netns;
mod network;
mod placeholders;
mod protect;
mod seccomp;
mod tripwires;
mod view_cache;

use crate::config::NetworkMode;
use host::{HostSnapshot, HostView};
use layout::{Layout, Mount};
use placeholders::{Held, Placeholders};
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
    /// The file tools' layouts, kept while nothing they were built from changed.
    views: view_cache::ViewCache,
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
    let fail =
        |what: &str, e: std::io::Error| format!("cannot hold the seccomp floor ({what}): {e}");
    let fd = crate::fsutil::sealable_memfd(c"dsh-seccomp", false)
        .map_err(|e| fail("memfd_create", e))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)
        .map_err(|e| format!("cannot hold the seccomp floor: {e}"))?;
    crate::fsutil::seal_all(&file).map_err(|e| fail("seal", e))?;
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
            views: Default::default(),
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
        // From before the walks until its placeholders are taken, nothing let go is
        // removed under this layout ([`Placeholders`]).
        let building =
            matches!(held, Held::Taken(_)).then(|| Placeholders::building(&self.placeholders));
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
                // A command's layout walk (the file tools' has no mark), held at its
                // end in the tests' build (`held`).
                held::hold(roots.iter().map(PathBuf::as_path));
                // The session's next command starts only once the checks of its
                // ended ones are done (issue 40).
                let waiter = self
                    .tripwires
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .waiter(mark);
                waiter.wait()?;
                // The start's snapshot of each root is searched off the lock: other
                // sessions' commands start and end meanwhile.
                let snapshots = self
                    .tripwires
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .snapshots();
                watch.prepare(&snapshots);
                self.tripwires
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(mark, watch);
            }
            let home = self.home.as_deref();
            let mut holding = self.placeholders.lock().unwrap_or_else(|p| p.into_inner());
            let mut placed = std::collections::BTreeSet::new();
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
                    placed.insert(path.clone());
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
            if let Held::Taken(mark) = held {
                // Every placeholder the layout names is held until the sandbox is gone:
                // its own, and one of another sandbox that the walk guarded where
                // none is placed (a nested project's, below a guarded path).
                placed.extend(
                    layout
                        .paths()
                        .filter(|p| holding.holds(p))
                        .map(Path::to_path_buf),
                );
                for path in &placed {
                    holding.take(mark, path);
                }
            }
        }
        drop(building);
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

    /// The bwrap command for `spec` as command `mark`. `service_env` is a service's
    /// own environment (empty for a command): with `[exec] env_set` before it, what
    /// the person set, which the proxy's `NO_PROXY` follows ([`network`]).
    fn command_with(
        &self,
        spec: &ExecSpec,
        mark: &str,
        service_env: &[(OsString, OsString)],
    ) -> Result<Command, ExecError> {
        let own: Vec<(OsString, OsString)> =
            self.given_env.iter().chain(service_env).cloned().collect();
        let refuse = |why| {
            // Refused after its placeholders (or its network) were taken: nothing
            // else will end them.
            let _ = self.release(|m| m == mark);
            ExecError::Sandbox(why)
        };
        let (extra, mut inherited) = match &self.proxies {
            Some(proxies) => proxies.prepare(spec, mark, &own).map_err(refuse)?,
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
        self.command_with(spec, mark, &[])
    }

    /// A service (a wrapped agent, an MCP server) with its own `env`, set on bwrap's
    /// process as for any launcher; its `NO_PROXY` is also read for the proxy's
    /// variables, which bwrap sets inside and which would otherwise win over it.
    fn service_command(
        &self,
        spec: &ExecSpec,
        mark: &str,
        env: &[(String, String)],
    ) -> Result<super::process::ServiceLaunch, ExecError> {
        let own = super::process::os_env(env);
        Ok(super::process::ServiceLaunch {
            command: self.command_with(spec, mark, &own)?,
            env: own,
            stdin_preamble: Vec::new(),
        })
    }

    fn never_started(&self, mark: &str) {
        let _ = self.release(|m| m == mark);
    }

    fn inherited(&self, mark: &str) -> Vec<std::os::fd::OwnedFd> {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.remove(mark).unwrap_or_default()
    }

    async fn started(&self, mark: &str, pid: i32) -> Result<(), String> {
        self.tripwires
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .started(mark, pid);
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
    ) -> Result<crate::exec::FileRead, crate::exec::FileError> {
        files::read(self, request).await
    }

    async fn file_containment(
        &self,
        request: &crate::exec::FileRequest,
        intent: crate::exec::FileIntent,
    ) -> Result<Option<crate::containment::Containment>, crate::exec::FileError> {
        files::containment(self, request, intent).map(Some)
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

#[cfg(test)]
mod tests;
