//! How a hook program runs: a process per call, or one long-lived server speaking
//! newline-delimited JSON-RPC 2.0. Either way it runs with the environment commands get
//! (E4: nothing named like a credential) plus what its config names, in its own process
//! group, and everything in that group is killed when it is done, times out, hangs or
//! the daemon stops.

use super::protocol::Reply;
use crate::config::HookEvent;
use crate::exec::children::{self, Child};
use crate::project::sealed::{self, SealedArgv};
use crate::rpc::{self, Peer};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// How much of a spawned hook's stdout/stderr is read; an answer is a short JSON object.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;
/// The longest line a hook server may answer with.
const MAX_SERVER_LINE: usize = 1024 * 1024;
/// Restart delays of a hook server that keeps failing: doubling from the first, capped.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// A hook program and the environment it runs with.
pub struct Program {
    argv: Vec<String>,
    env: Vec<(OsString, OsString)>,
    /// The state directory whose pins hold the files of pinned projects it names
    /// (`None`: nothing is held, as for `dsh hooks test` without one).
    pins_in: Option<PathBuf>,
}

impl Program {
    /// `argv` with the daemon's environment filtered as for commands (E4), plus the
    /// variables `pass` names, passed on purpose; a file of a project pinned in
    /// `pins_in` that it names runs from a sealed copy ([`crate::project::sealed`]).
    pub fn new(argv: &[String], pass: &[String], pins_in: Option<PathBuf>) -> Self {
        let mut env = crate::exec::process::child_env(std::env::vars_os());
        for name in pass {
            if let Some(value) = std::env::var_os(name) {
                env.retain(|(k, _)| k != name.as_str());
                env.push((name.into(), value));
            }
        }
        Self {
            argv: argv.to_vec(),
            env,
            pins_in,
        }
    }

    /// The command to start in `cwd` (with `$CLAUDE_PROJECT_DIR` as `claude_dir`), and
    /// the sealed copies it runs, which must stay open until it has started.
    fn command(
        &self,
        cwd: &Path,
        claude_dir: Option<&Path>,
    ) -> Result<(Command, SealedArgv), String> {
        let sealed = match &self.pins_in {
            Some(state_dir) => sealed::seal_argv(&self.argv, cwd, claude_dir, state_dir)
                .map_err(|e| e.to_string())?,
            None => SealedArgv {
                argv: self.argv.clone(),
                copies: Vec::new(),
            },
        };
        let (program, args) = sealed
            .argv
            .split_first()
            .ok_or_else(|| "empty argv".to_string())?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(script) = sealed.script() {
            // `$0` is the copy's /proc/self/fd path: where the script came from, for
            // one that finds its siblings by it.
            cmd.env("DSH_HOOK_SCRIPT", script);
            let fds: Vec<i32> = sealed.copies.iter().map(|c| c.raw_fd()).collect();
            // SAFETY: between fork and exec, fcntl only (async-signal-safe), on
            // descriptors the parent keeps open until the spawn returns. Only this
            // child inherits the copies; they are close-on-exec everywhere else.
            unsafe {
                cmd.pre_exec(move || {
                    for fd in &fds {
                        if libc::fcntl(*fd, libc::F_SETFD, 0) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        Ok((cmd, sealed))
    }
}

/// Kills a process group when dropped: a hook's process and everything it started.
struct Group(Option<i32>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            // ESRCH (all gone already) is the common, fine outcome.
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

/// Runs the program once for one event: `input` on stdin, the reply from its exit code
/// and stdout. `Err` says what went wrong (it denies).
pub async fn spawn_once(
    program: &Program,
    cwd: &Path,
    session_id: Option<&str>,
    event: HookEvent,
    claude_project_dir: bool,
    input: &[u8],
    timeout: Duration,
) -> Result<Reply, String> {
    // The copies stay open until the process has started (it inherits them).
    let (mut cmd, _copies) = program.command(cwd, claude_project_dir.then_some(cwd))?;
    cmd.env("DSH_HOOK_EVENT", event.as_str());
    if claude_project_dir {
        cmd.env("CLAUDE_PROJECT_DIR", cwd);
    }
    if let Some(id) = session_id {
        cmd.env("DSH_SESSION_ID", id);
    }
    let mut child = children::spawn(&mut cmd).map_err(|e| format!("cannot start: {e}"))?;
    // Whatever happens below (an answer, a timeout, the call being dropped), the group
    // goes: a hook must not leave anything running.
    let _group = Group(child.id().map(|id| id as i32));
    let exchange = async {
        if let Some(mut stdin) = child.stdin.take() {
            // A hook that exits without reading its input is not an error here; its
            // answer (or exit code) decides.
            let _ = stdin.write_all(input).await;
        }
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let out = child.stdout.take().map(|s| s.take(MAX_ANSWER_BYTES));
        let err = child.stderr.take().map(|s| s.take(MAX_ANSWER_BYTES));
        let (status, _, _) = tokio::join!(
            child.wait(),
            async {
                if let Some(mut o) = out {
                    let _ = o.read_to_end(&mut stdout).await;
                }
            },
            async {
                if let Some(mut e) = err {
                    let _ = e.read_to_end(&mut stderr).await;
                }
            }
        );
        (status, stdout, stderr)
    };
    let Ok((status, stdout, stderr)) = tokio::time::timeout(timeout, exchange).await else {
        return Err(format!("did not answer within {}ms", timeout.as_millis()));
    };
    let status = status.map_err(|e| format!("wait failed: {e}"))?;
    let stderr = String::from_utf8_lossy(&stderr).trim().to_string();
    match status.code() {
        Some(0) => Ok(Reply::Output(stdout)),
        Some(2) => Ok(Reply::Exit2(stderr)),
        Some(code) => Err(format!("failed with exit code {code}: {stderr}")),
        None => {
            use std::os::unix::process::ExitStatusExt;
            Err(format!(
                "crashed (signal {})",
                status.signal().unwrap_or_default()
            ))
        }
    }
}

/// A long-lived hook process serving every call: `{"jsonrpc":"2.0","id":ID,"method":EVENT,
/// "params":INPUT}` per line in, the answer as the result per line out, calls
/// concurrent, over the daemon's own connection layer (`rpc::client::ask_only`). A
/// crash or a hang fails the calls in flight (they deny) and the next call starts it
/// again, after a delay that doubles while it keeps failing.
pub struct Server {
    name: String,
    program: Program,
    cwd: std::path::PathBuf,
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    conn: Option<Arc<Conn>>,
    /// Starts since it last answered a call.
    failures: u32,
    last_start: Option<Instant>,
}

struct Conn {
    /// Its end of the connection: closing it fails every call in flight.
    peer: Peer,
    _serve: tokio::task::JoinHandle<()>,
    _group: Group,
    _child: Child,
}

impl Conn {
    /// Its stdout ended (or the connection was closed): the process is gone or going.
    fn is_dead(&self) -> bool {
        self.peer.is_closed()
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.peer.close();
    }
}

impl Server {
    /// A server for `program`, started on first use (or by [`Server::start`]) in `cwd`.
    pub fn new(name: &str, program: Program, cwd: std::path::PathBuf) -> Self {
        Self {
            name: name.to_string(),
            program,
            cwd,
            state: tokio::sync::Mutex::new(State::default()),
        }
    }

    /// Starts the process now if it is not running (the daemon does at startup).
    pub async fn start(&self) -> Result<(), String> {
        self.conn().await.map(|_| ())
    }

    /// Stops the process and everything it started (daemon shutdown).
    pub async fn stop(&self) {
        self.state.lock().await.conn = None;
    }

    async fn conn(&self) -> Result<Arc<Conn>, String> {
        let mut state = self.state.lock().await;
        if let Some(conn) = &state.conn
            && !conn.is_dead()
        {
            return Ok(conn.clone());
        }
        if state.conn.take().is_some() {
            state.failures += 1;
        }
        if state.failures > 0
            && let Some(last) = state.last_start
        {
            let delay = BACKOFF_FIRST
                .saturating_mul(1 << (state.failures - 1).min(10))
                .min(BACKOFF_MAX);
            tokio::time::sleep_until((last + delay).into()).await;
            tracing::warn!(hook = %self.name, restarts = state.failures, "restarting the hook server");
        }
        state.last_start = Some(Instant::now());
        let conn = Arc::new(self.launch().await?);
        state.conn = Some(conn.clone());
        Ok(conn)
    }

    async fn launch(&self) -> Result<Conn, String> {
        let (mut cmd, _copies) = self.program.command(&self.cwd, None)?;
        let mut child = children::spawn(&mut cmd).map_err(|e| format!("cannot start: {e}"))?;
        let group = Group(child.id().map(|id| id as i32));
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let options = rpc::Options {
            max_line_bytes: MAX_SERVER_LINE,
            // The hook protocol has no cancel: a call that gives up just stops waiting.
            announce_withdrawals: false,
            ..rpc::Options::default()
        };
        let (peer, serve) = rpc::client::ask_only(stdout, stdin, options).await;
        let name = self.name.clone();
        let gone = peer.closed();
        tokio::spawn(async move {
            gone.cancelled().await;
            tracing::warn!(hook = %name, "the hook server exited");
        });
        if let Some(stderr) = child.stderr.take() {
            let name = self.name.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::info!(hook = %name, "{line}");
                }
            });
        }
        Ok(Conn {
            peer,
            _serve: serve,
            _group: group,
            _child: child,
        })
    }

    /// One call: the answer as a reply, or what went wrong (it denies). A call that
    /// times out takes the server down with it (it hangs), failing the others in flight.
    pub async fn call(
        &self,
        event: HookEvent,
        params: Value,
        timeout: Duration,
    ) -> Result<Reply, String> {
        let deadline = tokio::time::Instant::now() + timeout;
        let silent = || format!("did not answer within {}ms", timeout.as_millis());
        let conn = match tokio::time::timeout_at(deadline, self.conn()).await {
            Ok(conn) => conn?,
            Err(_) => return Err(silent()),
        };
        let attempt = async {
            let asked = conn
                .peer
                .call(event.as_str(), params, &CancellationToken::new())
                .await;
            asked.map_err(|failure| match failure {
                rpc::RequestFailure::Answered(e) => {
                    format!("answered an error: {} ({})", e.message, e.code)
                }
                rpc::RequestFailure::Closed => "the hook server exited".to_string(),
                other => other.to_string(),
            })
        };
        match tokio::time::timeout_at(deadline, attempt).await {
            Ok(Ok(answer)) => {
                self.state.lock().await.failures = 0;
                serde_json::to_vec(&answer)
                    .map(Reply::Output)
                    .map_err(|e| e.to_string())
            }
            Ok(Err(e)) => Err(e),
            Err(_) => {
                // A hang: the server goes, and with it every call it holds; but only the
                // one this call was made to (another caller may have started a new one).
                let mut state = self.state.lock().await;
                if state.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn)) {
                    state.conn = None;
                    // Fails the calls in flight now, not when the last of them lets go.
                    conn.peer.close();
                    state.failures += 1;
                }
                Err(silent())
            }
        }
    }
}
