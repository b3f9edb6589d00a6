//! A `dsh serve` on a private socket, for tests that need more than one
//! connection, a restart on the same state, a client process to kill, or the
//! daemon's own pid (to SIGKILL it or read its memory).
#![allow(dead_code)]

use super::client::Client;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::io::AsyncBufReadExt;
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

/// The dsh binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_dsh");

/// Writes `dir/dsh.toml`: short kill grace and drain (quick tests), then `extra`.
pub fn write_config(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("dsh.toml");
    std::fs::write(
        &path,
        format!("[exec]\nkill_grace_ms = 300\ndrain_ms = 300\n{extra}"),
    )
    .expect("write config");
    path
}

/// Creates and returns `dir/name`.
pub fn workspace(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::create_dir_all(&p).expect("mkdir workspace");
    p
}

/// A daemon serving `dir/run/dsh.sock` with its state in `dir/state`.
pub struct SocketDaemon {
    pub child: Child,
    pub pid: i32,
    pub socket: PathBuf,
    pub state: PathBuf,
    pub config: PathBuf,
}

impl SocketDaemon {
    /// What `dsh status` prints about this daemon (the CLI, as a person runs it).
    pub fn cli_status(&self) -> String {
        let out = std::process::Command::new(BIN)
            .args(["status", "--socket"])
            .arg(&self.socket)
            .output()
            .expect("run dsh status");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts the daemon with `dir/dsh.toml` (see [`write_config`]) and waits
    /// for its "listening" line.
    pub async fn start(dir: &Path, extra_config: &str) -> Self {
        Self::start_with(dir, extra_config, |_| {}).await
    }

    /// As [`SocketDaemon::start`], letting the caller adjust the command
    /// (environment, user, limits) first.
    pub async fn start_with(
        dir: &Path,
        extra_config: &str,
        adjust: impl FnOnce(&mut Command),
    ) -> Self {
        Self::start_command(super::dsh(), dir, extra_config, adjust).await
    }

    /// As [`SocketDaemon::start`], from `dir/bin/dsh`, a copy of the binary under test
    /// that the test may replace or age (an upgrade, a newer binary on disk).
    pub async fn start_copy(dir: &Path, extra_config: &str) -> Self {
        let program = dir.join("bin/dsh");
        std::fs::create_dir_all(program.parent().unwrap()).unwrap();
        std::fs::copy(BIN, &program).unwrap();
        let mut cmd = Command::new(&program);
        for var in [
            "DEEPSEEK_API_KEY",
            "DSH_API_KEY",
            "DSH_MODEL_BASE_URL",
            "DSH_MODEL",
        ] {
            cmd.env_remove(var);
        }
        cmd.kill_on_drop(true);
        Self::start_command(cmd, dir, extra_config, |_| {}).await
    }

    async fn start_command(
        mut cmd: Command,
        dir: &Path,
        extra_config: &str,
        adjust: impl FnOnce(&mut Command),
    ) -> Self {
        let socket = dir.join("run/dsh.sock");
        let state = dir.join("state");
        let config = write_config(dir, extra_config);
        cmd.args(["serve", "--socket"])
            .arg(&socket)
            .arg("--state-dir")
            .arg(&state)
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        adjust(&mut cmd);
        // A copied program (`start_copy`) may be busy for a moment: another test's fork
        // between the copy's open for writing and its close holds it open until that
        // child executes (ETXTBSY). It is the kernel's race, not dsh's: started again.
        let mut tries = 0;
        let mut child = loop {
            match cmd.spawn() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                spawned => break spawned.expect("start dsh serve"),
            }
        };
        let pid = child.id().expect("daemon pid") as i32;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        let line = lines
            .next_line()
            .await
            .expect("read daemon stdout")
            .expect("daemon exited at start");
        assert!(line.starts_with("dsh daemon listening on "), "{line}");
        Self {
            child,
            pid,
            socket,
            state,
            config,
        }
    }

    /// A raw socket connection, not yet initialized.
    pub async fn connect_raw(&self) -> Client {
        let stream = UnixStream::connect(&self.socket)
            .await
            .expect("connect to the daemon");
        let (r, w) = stream.into_split();
        Client::new(r, w)
    }

    /// An initialized socket connection.
    pub async fn connect(&self) -> Client {
        let mut client = self.connect_raw().await;
        client.initialize().await;
        client
    }

    /// `dsh acp` as an editor launches it: a client process of its own (which a
    /// test can SIGKILL), with an initialized connection on its stdio.
    pub async fn connect_acp(&self) -> (Child, Client) {
        let mut cmd = super::dsh();
        cmd.args(["acp", "--socket"])
            .arg(&self.socket)
            .arg("--state-dir")
            .arg(&self.state)
            .arg("--config")
            .arg(&self.config);
        let (child, mut client) = super::spawn_client(&mut cmd);
        client.initialize().await;
        (child, client)
    }

    /// SIGKILLs the daemon (no shutdown runs) and reaps it.
    pub async fn sigkill(mut self) {
        self.child.kill().await.expect("kill the daemon");
        self.child.wait().await.expect("reap the daemon");
    }

    /// `dsh stop`; the daemon must exit 0 and remove its socket.
    pub async fn stop(mut self) {
        let out = Command::new(BIN)
            .args(["stop", "--socket"])
            .arg(&self.socket)
            .output()
            .await
            .expect("run dsh stop");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let status = self.child.wait().await.expect("wait for the daemon");
        assert!(status.success(), "daemon exit: {status}");
        assert!(!self.socket.exists(), "socket left behind");
    }

    /// The daemon's resident memory, in KiB.
    pub fn rss_kib(&self) -> u64 {
        status_field(self.pid, "VmRSS:")
    }
}

/// A `kB` field of `/proc/<pid>/status` (0 if unreadable).
pub fn status_field(pid: i32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Live processes whose working directory is `dir` or below it: the commands
/// tests run in their workspaces, so after a test any such process is a leak.
pub fn processes_under(dir: &Path) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| super::alive(*pid))
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(dir))
        })
        .collect()
}

/// `dsh serve --stdio` with `dir/dsh.toml` (see [`write_config`]), state in `dir/state` and
/// `env` added, as an initialized connection on its stdio.
pub async fn stdio_daemon(dir: &Path, extra_config: &str, env: &[(&str, &str)]) -> (Child, Client) {
    let config = write_config(dir, extra_config);
    let mut cmd = super::dsh();
    cmd.args(["serve", "--stdio", "--state-dir"])
        .arg(dir.join("state"))
        .arg("--config")
        .arg(config);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (child, mut client) = super::spawn_client(&mut cmd);
    client.initialize().await;
    (child, client)
}
