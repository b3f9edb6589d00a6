//! Helpers shared by the integration tests: temporary state, the process table,
//! and fifos that let a test wait for a command to reach a point (an event, not a
//! sleep).
#![allow(dead_code)]

pub mod client;
pub mod daemon;
pub mod fake_model;

use dsh::config::ExecConfig;
use dsh::exec::LocalExecutor;
use std::path::{Path, PathBuf};

/// Executor settings for tests: short grace and drain so kills and drains are quick.
pub fn test_config(state: &Path) -> ExecConfig {
    ExecConfig {
        kill_grace_ms: 300,
        drain_ms: 300,
        state_dir: Some(state.to_path_buf()),
        ..ExecConfig::default()
    }
}

pub fn local(state: &Path) -> LocalExecutor {
    LocalExecutor::new(&test_config(state)).expect("executor")
}

/// Whether `pid` is a live process (a zombie is already dead).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 2..].chars().next())
                .unwrap_or('X');
            state != 'Z' && state != 'X'
        }
        Err(_) => false,
    }
}

/// The pids written one per line to `file` by the commands under test.
pub fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// A named pipe a command writes to when it reaches a point the test waits for.
pub struct Fifo(pub PathBuf);

impl Fifo {
    pub fn new(dir: &Path, name: &str) -> Self {
        let path = dir.join(name);
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        Fifo(path)
    }

    /// Waits until a writer has opened, written and closed the fifo; returns what it wrote.
    pub async fn wait(&self) -> String {
        let path = self.0.clone();
        tokio::task::spawn_blocking(move || std::fs::read_to_string(path).expect("read fifo"))
            .await
            .expect("join")
    }

    /// Releases a command blocked reading the fifo.
    pub async fn release(&self) {
        let path = self.0.clone();
        tokio::task::spawn_blocking(move || std::fs::write(path, "go\n").expect("write fifo"))
            .await
            .expect("join")
    }

    pub fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 path")
    }
}

/// A script that starts one process by each escape pattern (each writes its pid
/// to `$PIDS` and becomes `sleep 1000`), waits until all have, signals `ready`
/// on the fifo, then runs `tail` in the foreground.
pub fn escape_script(pids: &Path, ready: &Fifo, tail: &str) -> String {
    format!(
        r#"export PIDS='{pids}'
export SPAWN='echo $$ >> "$PIDS"; exec sleep 1000'
: > "$PIDS"
setsid bash -c "$SPAWN" &
( bash -c "$SPAWN" & ) &
nohup bash -c "$SPAWN" >/dev/null 2>&1 &
bash -c "$SPAWN" & disown
bash -c "$SPAWN" &
setsid bash -c '( bash -c "$SPAWN" & ) ; exit 0' &
while [ "$(wc -l < "$PIDS")" -lt {n} ]; do sleep 0.01; done
echo ready > '{ready}'
{tail}"#,
        pids = pids.display(),
        ready = ready.path(),
        n = ESCAPE_PATTERNS,
    )
}

/// How many processes `escape_script` starts.
pub const ESCAPE_PATTERNS: usize = 6;

/// Asserts that every listed process is gone, naming the survivors.
pub fn assert_all_dead(pids: &[i32], when: &str) {
    assert_eq!(
        pids.len(),
        ESCAPE_PATTERNS,
        "not every escape pattern started ({when})"
    );
    let survivors: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    assert!(
        survivors.is_empty(),
        "{when}: processes survived: {survivors:?}"
    );
}

/// The dsh binary as tests start it: killed when dropped, and with no model
/// settings inherited from the environment, so a developer's key never changes
/// what a test sees.
pub fn dsh() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
    for var in [
        "DEEPSEEK_API_KEY",
        "DSH_API_KEY",
        "DSH_MODEL_BASE_URL",
        "DSH_MODEL",
    ] {
        cmd.env_remove(var);
    }
    cmd.kill_on_drop(true);
    cmd
}

/// Starts `cmd` with its stdin/stdout as an ACP connection (stderr discarded).
pub fn spawn_client(cmd: &mut tokio::process::Command) -> (tokio::process::Child, client::Client) {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start dsh");
    let client = client::Client::new(
        child.stdout.take().expect("stdout"),
        child.stdin.take().expect("stdin"),
    );
    (child, client)
}
