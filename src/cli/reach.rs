//! Reaching the daemon from the command line: where it is (`Where`, the options every
//! such command shares), connecting to it or starting it (`connect_or_start`, one
//! starter wins), and the note when the binary on disk is newer than the daemon. Here,
//! below `main.rs`, so that both `main.rs`'s commands and the ACP clients of `cli/`
//! (`exec`, `chat`) use the one way in.

use dsh::config::Config;
use dsh::daemon::{Daemon, default_socket_path};
use dsh::rpc::client::{ClientError, DaemonClient};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::net::UnixStream;

/// Options every command that starts or finds a daemon shares.
#[derive(clap::Args, Clone)]
pub(crate) struct Where {
    /// The daemon's socket (default: $XDG_RUNTIME_DIR/dsh/dsh.sock, else /tmp/dsh-<uid>/dsh.sock).
    #[arg(long)]
    pub(crate) socket: Option<PathBuf>,
    /// State directory (default: from config, else $XDG_STATE_HOME/dsh).
    #[arg(long)]
    pub(crate) state_dir: Option<PathBuf>,
    /// Config file (default: $XDG_CONFIG_HOME/dsh/config.toml, else
    /// ~/.config/dsh/config.toml, when it exists; else the built-in defaults, documented
    /// in config/dsh.toml).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
}

impl Where {
    pub(crate) fn socket(&self) -> PathBuf {
        self.socket.clone().unwrap_or_else(default_socket_path)
    }

    pub(crate) fn config(&self) -> Result<Config, String> {
        let (mut config, _) =
            Config::load_layered(self.config.as_deref()).map_err(|e| e.to_string())?;
        if let Some(dir) = &self.state_dir {
            config.exec.state_dir = Some(dir.clone());
        }
        Ok(config)
    }
}

/// The multi-threaded runtime every command that talks to the daemon runs on.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// Connects to the daemon, starting it (one starter wins, by a lock file) if
/// nothing answers.
pub(crate) async fn connect_or_start(at: &Where) -> Result<UnixStream, String> {
    let socket = at.socket();
    if let Ok(stream) = UnixStream::connect(&socket).await {
        return Ok(stream);
    }
    let dir = socket
        .parent()
        .ok_or_else(|| format!("socket path has no directory: {}", socket.display()))?
        .to_path_buf();
    dsh::fsutil::ensure_private_dir(&dir).map_err(|e| e.to_string())?;
    let lock_path = dir.join("dsh.lock");
    let lock = tokio::task::spawn_blocking(move || {
        let file = dsh::fsutil::private_file()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| format!("cannot lock {}: {e}", lock_path.display()))
    })
    .await
    .map_err(|e| e.to_string())??;
    // Another starter may have won while we waited for the lock.
    if let Ok(stream) = UnixStream::connect(&socket).await {
        return Ok(stream);
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the dsh binary: {e}"))?;
    let mut cmd = std::process::Command::new(exe);
    // It stops by itself once nothing uses it ([daemon] idle_exit_secs).
    cmd.arg("serve")
        .arg("--idle-exit")
        .arg("--socket")
        .arg(&socket);
    if let Some(dir) = &at.state_dir {
        cmd.arg("--state-dir").arg(dir);
    }
    if let Some(config) = &at.config {
        cmd.arg("--config").arg(config);
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: setsid is async-signal-safe; the daemon must not die with this process.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the daemon: {e}"))?;
    let mut pause = Duration::from_millis(5);
    for _ in 0..200 {
        if let Ok(stream) = UnixStream::connect(&socket).await {
            drop(lock);
            // The daemon is detached for good; reap it if it exits while we run.
            std::thread::spawn(move || child.wait());
            return Ok(stream);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "the daemon exited at start ({status}); see the daemon log in the state directory"
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
    Err(format!(
        "the daemon did not open {} in time",
        socket.display()
    ))
}

/// Says on stderr (stdout is the editor's protocol stream) when the dsh binary on disk
/// changed after the daemon on `stream` started its program: that daemon runs the old
/// code until `dsh upgrade`. Learnt without asking over the protocol (no second
/// connection, and a daemon of any version is judged): the daemon's pid from
/// SO_PEERCRED, when its program started from the file it keeps beside its socket
/// (`dsh upgrade` replaces the program in the same process, whose own start stays) or
/// else from `/proc/<pid>/stat`, and the binary's modification time.
pub(crate) fn warn_if_daemon_is_older(stream: &UnixStream, socket: &Path) {
    let Some(pid) = stream.peer_cred().ok().and_then(|c| c.pid()) else {
        return;
    };
    let (Some(started), Some(built)) = (
        Daemon::program_started(socket, pid).or_else(|| process_start(pid)),
        std::env::current_exe()
            .and_then(std::fs::metadata)
            .and_then(|m| m.modified())
            .ok(),
    ) else {
        return;
    };
    // The start is known to the second (boot time) plus clock ticks: a binary written
    // within a second of the start counts as the daemon's own.
    if built > started + Duration::from_secs(1) {
        let when = |t: std::time::SystemTime| {
            dsh::store::iso8601(
                t.duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or_default(),
            )
        };
        eprintln!(
            "dsh: the dsh binary on disk (dsh {}, written {}) is newer than the running daemon \
             (pid {pid}, started {}); the daemon runs its old code until `dsh upgrade` (which \
             keeps its connections, sessions and tasks)",
            env!("CARGO_PKG_VERSION"),
            when(built),
            when(started),
        );
    }
}

/// When process `pid` started: the boot time (`/proc/stat` btime) plus its start in
/// clock ticks (`/proc/<pid>/stat` field 22).
fn process_start(pid: i32) -> Option<std::time::SystemTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces), from field 3 on.
    let after = &stat[stat.rfind(')')? + 2..];
    let ticks: u64 = after.split(' ').nth(19)?.parse().ok()?;
    let boot: u64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|hz| *hz > 0)? as u64;
    Some(
        std::time::UNIX_EPOCH
            + Duration::from_secs(boot)
            + Duration::from_millis(ticks * 1000 / hz),
    )
}

/// One question to the daemon (`status`, `kill`...), on a connection of its own, for a
/// command that only reports what went wrong.
pub(crate) async fn ask_daemon(at: &Where, method: &str) -> Result<serde_json::Value, String> {
    ask_daemon_with(at, method, serde_json::json!({})).await
}

pub(crate) async fn ask_daemon_with(
    at: &Where,
    method: &str,
    params: serde_json::Value,
) -> Result<serde_json::Value, String> {
    ask_daemon_typed(at, method, params)
        .await
        .map_err(|e| e.to_string())
}

/// [`ask_daemon_with`] for a command that acts on why there was no answer (no daemon,
/// a daemon that went away, a refusal).
pub(crate) async fn ask_daemon_typed(
    at: &Where,
    method: &str,
    params: serde_json::Value,
) -> Result<serde_json::Value, ClientError> {
    DaemonClient::connect(&at.socket())
        .await?
        .request(method, params)
        .await
}
