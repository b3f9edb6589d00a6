//! What the tests of `dsh exec`, its batches and `dsh chat` (issue 45) share: a real
//! daemon on a private socket with a scripted model and a workspace ([`Rig`]), and
//! `dsh exec` run against it with no controlling terminal.
#![allow(dead_code)]

use super::daemon::{SocketDaemon, workspace};
use super::fake_model::{FakeModel, Reply};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

/// A daemon (`dir/run/dsh.sock`, state in `dir/state`) whose config is the scripted
/// model's and `extra`, and the workspace `dir/w`. Destructured by the tests
/// (`let Rig { dir, model, daemon, ws } = ...`): each part is what it was before the
/// set-up was shared.
pub struct Rig {
    pub dir: tempfile::TempDir,
    pub model: FakeModel,
    pub daemon: SocketDaemon,
    pub ws: PathBuf,
}

impl Rig {
    /// The model answers with `script`; the daemon's config adds `extra` (rules...).
    pub async fn start(script: Vec<Reply>, extra: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let model = FakeModel::start(script).await;
        let daemon = SocketDaemon::start(dir.path(), &format!("{}{extra}", model.config())).await;
        let ws = workspace(dir.path(), "w");
        Self {
            dir,
            model,
            daemon,
            ws,
        }
    }
}

/// `dsh exec` against `daemon` with `config` as its `--config`, in `cwd`, with `args`
/// (prompt included), stdin closed, in a session of its own: no controlling terminal,
/// wherever the tests run, so nobody is there to ask.
pub fn exec_with(
    daemon: &SocketDaemon,
    config: &Path,
    cwd: &Path,
    args: &[&str],
) -> tokio::process::Command {
    exec_at(&daemon.socket, &daemon.state, config, cwd, args)
}

/// [`exec_with`] on `socket` (a relay in front of the daemon) and `state`.
pub fn exec_at(
    socket: &Path,
    state: &Path,
    config: &Path,
    cwd: &Path,
    args: &[&str],
) -> tokio::process::Command {
    let mut cmd = super::dsh();
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    cmd.args(["exec", "--socket"])
        .arg(socket)
        .arg("--state-dir")
        .arg(state)
        .arg("--config")
        .arg(config)
        .arg("--cwd")
        .arg(cwd)
        .args(args)
        .stdin(Stdio::null());
    cmd
}

/// [`exec_with`] the daemon's own config.
pub fn exec(daemon: &SocketDaemon, cwd: &Path, args: &[&str]) -> tokio::process::Command {
    exec_with(daemon, &daemon.config, cwd, args)
}

/// [`exec`] run to its end.
pub async fn run(daemon: &SocketDaemon, cwd: &Path, args: &[&str]) -> Output {
    exec(daemon, cwd, args)
        .output()
        .await
        .expect("run dsh exec")
}

/// Its stdout's JSON lines.
pub fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

/// Its stdout and stderr.
pub fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The execution lines of the audit log of `state` (every file of the rotated set).
pub fn audit_lines(state: &Path) -> Vec<Value> {
    let mut files: Vec<_> = std::fs::read_dir(state)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("audit.jsonl"))
        })
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .filter(|l| l["event"] == "execution")
        .collect()
}
