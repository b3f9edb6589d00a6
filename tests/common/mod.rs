//! Helpers shared by the integration tests: temporary state, the process table,
//! and fifos that let a test wait for a command to reach a point (an event, not a
//! sleep).
#![allow(dead_code)]

pub mod anthropic;
pub mod cli;
pub mod client;
pub mod daemon;
pub mod fake_model;
pub mod gemini;
pub mod sshd;

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

/// What every scripted Python server starts with: a handler base (`Scripted`, with
/// `answer` and `body`) and `serve(handler)`, which binds a free loopback port, prints
/// it on the first line and serves.
const PY_SERVER_BASE: &str = r#"
import json, sys, http.server
class Scripted(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def answer(self, kind, data):
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def body(self):
        n = int(self.headers.get("content-length", 0))
        return json.loads(self.rfile.read(n) or b"{}")
def serve(handler):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
"#;

/// Writes `script` (after [`PY_SERVER_BASE`]) to `path` and runs it with `args`: a
/// scripted server. The process (killed when dropped) and its port.
pub async fn python_server(
    path: &Path,
    script: &str,
    args: &[&Path],
) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    std::fs::write(path, [PY_SERVER_BASE, script].concat()).unwrap();
    let mut child = tokio::process::Command::new("python3")
        .arg(path)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", path.display()));
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let port = lines.next_line().await.unwrap().expect("its port");
    (child, port)
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

/// A number unique to one test run, carried in the command line of the `sleep`
/// processes a test starts (`sleep 1000.<token>`), so they can be found in the
/// process table whatever PID namespace they live in (the sandbox's own pids mean
/// nothing outside it).
pub fn token() -> String {
    let n = u64::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..8].try_into().unwrap());
    format!("{:09}", n % 1_000_000_000)
}

/// The live processes whose arguments (`/proc/PID/cmdline`, split at NULs) `wanted`
/// accepts: the one walk of the process table the tests share.
pub fn live_pids_where(wanted: impl Fn(&[&[u8]]) -> bool) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                wanted(&args)
            }) && alive(*pid)
        })
        .collect()
}

/// Asserts that no process's command line (`/proc/PID/cmdline`) holds `secret`: `ps`
/// shows every process's command line to every local user, so a server's `env` (an
/// API token the editor configured) must reach it some other way.
pub fn assert_on_no_command_line(secret: &str) {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        assert!(
            !cmdline.contains(secret),
            "a secret is on a command line: {cmdline:?}"
        );
    }
}

/// The environment of process `pid` as the kernel holds it (`/proc/PID/environ`), one
/// `NAME=value` entry each, byte-exact.
pub fn environ_of(pid: i32) -> Vec<Vec<u8>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    raw.split(|b| *b == 0)
        .filter(|v| !v.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// The live processes whose command line holds `sleep 1000.<token>`.
pub fn with_token(token: &str) -> Vec<i32> {
    let wanted = format!("1000.{token}");
    live_pids_where(|args| args.contains(&wanted.as_bytes()))
}

/// A script that starts one process by each escape pattern (each writes a line to
/// `$PIDS` and becomes `sleep 1000.<token>`), waits until all have, signals `ready`
/// on the fifo, then runs `tail` in the foreground.
pub fn escape_script(pids: &Path, ready: &Fifo, token: &str, tail: &str) -> String {
    format!(
        r#"export PIDS='{pids}'
export SPAWN='echo $$ >> "$PIDS"; exec sleep 1000.{token}'
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

/// Asserts that every escape pattern started (`pidfile` has a line each) and that
/// none of their processes is alive, naming the survivors.
pub fn assert_all_dead(pidfile: &Path, token: &str, when: &str) {
    assert_eq!(
        pids(pidfile).len(),
        ESCAPE_PATTERNS,
        "not every escape pattern started ({when})"
    );
    let survivors = with_token(token);
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

/// `dsh acp --socket <socket>` as an editor starts it: stdin and stdout piped,
/// stderr dropped, killed when dropped. Add arguments, then spawn.
pub fn launcher(socket: &std::path::Path) -> tokio::process::Command {
    use std::process::Stdio;
    let mut cmd = dsh();
    cmd.args(["acp", "--socket"])
        .arg(socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
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

/// The MCP server the tests start (examples/mcp_fixture.rs). `cargo test` builds the
/// examples; a filtered run (`cargo test --test it ...`) does not, hence the message.
pub fn mcp_fixture() -> std::path::PathBuf {
    let dsh = std::path::Path::new(env!("CARGO_BIN_EXE_dsh"));
    let path = dsh
        .parent()
        .expect("the binary's directory")
        .join("examples/mcp_fixture");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --examples` (a filtered `cargo test` does not build it)",
        path.display()
    );
    path
}
