//! The daemon under test, started on a temporary socket and state directory; and the
//! baselines: the same work without dsh.

use crate::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

// ---------------------------------------------------------------------------
// Baselines: the same work without dsh

/// `bash -c <command>` spawned directly with tokio, output captured through pipes
/// as dsh captures it (stdin from /dev/null, as dsh does). Returns stdout.
pub(crate) async fn direct(command: &str) -> Res<Vec<u8>> {
    let out = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("spawn bash: {e}"))?;
    if !out.status.success() {
        return Err(format!("bash -c {command:?} failed: {}", out.status));
    }
    Ok(out.stdout)
}

/// Times one future.
pub(crate) async fn timed<T>(f: impl Future<Output = Res<T>>) -> Res<(Duration, T)> {
    let t = Instant::now();
    let v = f.await?;
    Ok((t.elapsed(), v))
}

// ---------------------------------------------------------------------------
// The daemon under test

/// Memory of the daemon process, KiB, from /proc/<pid>/status.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mem {
    pub(crate) rss: u64,
    pub(crate) hwm: u64,
}

pub(crate) fn memory(pid: u32) -> Res<Mem> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("read /proc/{pid}/status: {e}"))?;
    let field = |name: &str| -> Res<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| format!("no {name} in /proc/{pid}/status"))
    };
    Ok(Mem {
        rss: field("VmRSS:")?,
        hwm: field("VmHWM:")?,
    })
}

/// One `dsh serve` on a private socket and state directory.
pub(crate) struct Daemon {
    pub(crate) child: tokio::process::Child,
    pub(crate) pid: u32,
    pub(crate) socket: PathBuf,
    /// Kept open: the daemon's stdout is a pipe, and a closed pipe would turn a
    /// later print into an error inside the daemon.
    pub(crate) _stdout: tokio::process::ChildStdout,
}

impl Daemon {
    pub(crate) async fn start(root: &Path, name: &str) -> Res<Daemon> {
        Self::start_with(root, name, "").await
    }

    /// A daemon whose config file adds `extra` (TOML) to the defaults.
    pub(crate) async fn start_with(root: &Path, name: &str, extra: &str) -> Res<Daemon> {
        // The built-in defaults, written out so the run does not depend on any
        // config of the person running it.
        Self::start_config(root, name, &format!("[exec]\nkind = \"local\"\n{extra}")).await
    }

    /// A daemon whose config file is exactly `config` (a scenario that sets `[exec]`
    /// itself, as S1 does for the ssh executor).
    pub(crate) async fn start_config(root: &Path, name: &str, config_text: &str) -> Res<Daemon> {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let config = dir.join("dsh.toml");
        std::fs::write(&config, config_text).map_err(|e| e.to_string())?;
        let stderr = std::fs::File::create(dir.join("daemon.stderr")).map_err(|e| e.to_string())?;
        let socket = dir.join("run/dsh.sock");
        let mut cmd = tokio::process::Command::new(dsh_bin());
        cmd.arg("serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            // The config file says where the model is; the environment would win.
            .env_remove("DSH_MODEL_BASE_URL")
            .env_remove("DSH_MODEL")
            .env_remove("DSH_API_KEY");
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        // If this bench dies (panic, watchdog), the daemon gets SIGTERM and shuts
        // down the way it always does, killing every task it started. Spawned
        // from the main thread (the runtime's block_on), which lives as long as
        // the process.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", dsh_bin().display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout);
        let mut first = String::new();
        tokio::time::timeout(Duration::from_secs(30), lines.read_line(&mut first))
            .await
            .map_err(|_| "the daemon did not report ready within 30 s".to_string())?
            .map_err(|e| e.to_string())?;
        if !first.starts_with("dsh daemon listening on") {
            return Err(format!(
                "the daemon did not start ({first:?}); see {}",
                dir.join("daemon.stderr").display()
            ));
        }
        let mut probe = Client::connect(&socket).await?;
        let status = probe
            .request("_dsh/status", json!({}), REQUEST_LIMIT)
            .await?;
        let pid = status["pid"].as_u64().ok_or("status without pid")? as u32;
        Ok(Daemon {
            child,
            pid,
            socket,
            _stdout: lines.into_inner(),
        })
    }

    pub(crate) async fn client(&self) -> Res<Client> {
        Client::connect(&self.socket).await
    }

    pub(crate) fn memory(&self) -> Res<Mem> {
        memory(self.pid)
    }

    /// `dsh stop`, then wait for the process to end (it kills every task first).
    pub(crate) async fn stop(mut self) -> Res<()> {
        let stopped = tokio::process::Command::new(dsh_bin())
            .arg("stop")
            .arg("--socket")
            .arg(&self.socket)
            .stdout(Stdio::null())
            .status();
        let status = tokio::time::timeout(Duration::from_secs(120), stopped)
            .await
            .map_err(|_| "dsh stop hung".to_string())?
            .map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("dsh stop failed: {status}"));
        }
        tokio::time::timeout(Duration::from_secs(120), self.child.wait())
            .await
            .map_err(|_| "the daemon did not exit after dsh stop".to_string())?
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

impl Drop for Daemon {
    /// On an error path: SIGTERM (a graceful shutdown that kills the tasks), a
    /// bounded wait, then SIGKILL.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: plain kill(2) of our own child.
            unsafe { libc::kill(self.pid as i32, libc::SIGTERM) };
            for _ in 0..300 {
                if !matches!(self.child.try_wait(), Ok(None)) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = self.child.start_kill();
        }
    }
}
