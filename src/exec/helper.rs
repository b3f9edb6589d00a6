//! `dsh exec-helper`: the remote end of the ssh executor's fast path, and the small
//! JSON-RPC protocol it speaks with the local side.
//!
//! The helper hosts the very engine the local executor uses
//! (`ProcessExecutor<LocalLauncher>`) on the remote host, so E3, E4, timeouts,
//! drain, spill files and statuses are the same code there as here. It speaks
//! JSON-RPC 2.0, one message per line, on stdin/stdout (the `rpc` module, both
//! directions), over one long-lived channel of the ssh master connection:
//!
//! * requests from the local side: `hello` (settings; builds the executor),
//!   `run` (a foreground command, answered with its outcome), `start`, `kill`,
//!   `kill_scope`, `shutdown`;
//! * notifications from the local side: `cancel` (a foreground run by number;
//!   the run still answers, with `aborted`);
//! * notifications to the local side: `output` (what a background task printed
//!   since the last one) and `done` (its final status, after its last output).
//!
//! Background output is pushed, not pulled: the seam's `read` is synchronous, so
//! the local side answers it from what the helper sent. The helper reads its own
//! executor every [`POLL`] while tasks run (and once more when one finishes), and
//! sends what it got; the local side keeps it with the same bounds (see `remote`).
//!
//! Parent death: when the channel closes (the ssh session ended, the connection
//! dropped, the daemon died) the helper's stdin ends, every foreground run is
//! cancelled, and it shuts its executor down (E3: everything it started, detached
//! or not, is gone) before it exits. SIGTERM and SIGHUP take the same path. A
//! helper killed outright leaves its commands to the next helper's stale sweep,
//! which kills what a dead owner left under the same state directory.

mod files;

pub use files::{FileAnswer, FileOp, FileParams};

use super::{
    BashExecutor, CollectedOutput, ExecError, ExecSpec, KillOutcome, LocalExecutor, OutputStream,
    RunOutcome, Spill, StreamRead, TaskId, TaskStatus,
};
use crate::config::ExecConfig;
use crate::rpc::{self, Peer, RequestContext, RpcError, Service};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the helper looks for new output of running background tasks. Reads
/// of a task that finished are exact (the last output goes before `done`); while it
/// runs, what the local side sees is at most this old.
pub const POLL: Duration = Duration::from_millis(10);

/// The protocol version; `hello` refuses a helper that speaks another.
pub const PROTOCOL: u32 = 1;

/// Longest line either side accepts: a `run` answer carries up to two full tails,
/// JSON-escaped (six bytes per control byte at worst).
pub fn max_line_bytes(max_output_bytes: usize) -> usize {
    (16 * 1024 * 1024).max(max_output_bytes.saturating_mul(14) + 64 * 1024)
}

/// The settings the local side passes in `hello`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    pub max_output_bytes: usize,
    pub finished_output_bytes: usize,
    pub kill_grace_ms: u64,
    pub drain_ms: u64,
    /// `[exec.ssh] sandbox`: commands run in this sandbox on the host (its
    /// `deny_read` `~/` is the host's home), and the helper refuses to start without
    /// one that holds.
    #[serde(default)]
    pub sandbox: Option<crate::config::SandboxConfig>,
    /// `[exec] env_pass`: the names of the helper's own variables (the host's, as the
    /// ssh session has them) its sandboxed commands get beyond the allowlist (E4).
    /// The names travel, not the daemon's values: a secret of this machine is never
    /// sent to the host by being named.
    #[serde(default)]
    pub env_pass: Vec<String>,
    /// `[exec] env_set`: variables set in every sandboxed command on the host.
    #[serde(default)]
    pub env_set: std::collections::BTreeMap<String, String>,
}

/// A command as the wire carries it: the workdir is already the remote path.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireSpec {
    pub command: String,
    pub workdir: PathBuf,
    pub timeout_ms: u64,
    pub scope: Option<String>,
    /// The session's writable roots as host paths (what a sandbox binds).
    #[serde(default)]
    pub writable_roots: Vec<PathBuf>,
}

/// `run` params: the local side's number for the run, for `cancel`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunParams {
    pub run: u64,
    pub spec: WireSpec,
    /// Send the output as it comes (`run_output` notifications), for a live display.
    #[serde(default)]
    pub watch: bool,
}

/// `run_output` notification params: a piece of a watched run's output, whole UTF-8
/// characters only (a character cut by a read waits for its rest).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunOutputParams {
    pub run: u64,
    pub stream: OutputStream,
    pub data: String,
}

/// `start` params: the local side's key for the task, which names it in `output`,
/// `done` and `kill`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StartParams {
    pub key: u64,
    pub spec: WireSpec,
}

/// `kill` params.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KeyParams {
    pub key: u64,
}

/// `kill_scope` params.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScopeParams {
    pub scope: String,
}

/// `cancel` notification params.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CancelParams {
    pub run: u64,
}

/// [`Spill`] on the wire; paths are the remote host's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WireSpill {
    None,
    Written(PathBuf),
    Unavailable(String),
}

impl From<&Spill> for WireSpill {
    fn from(s: &Spill) -> Self {
        match s {
            Spill::None => WireSpill::None,
            Spill::Written(p) => WireSpill::Written(p.clone()),
            Spill::Unavailable(r) => WireSpill::Unavailable(r.clone()),
        }
    }
}

/// [`CollectedOutput`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireCollected {
    pub text: String,
    pub truncated: bool,
    pub spill: WireSpill,
    pub total_bytes: u64,
}

impl From<&CollectedOutput> for WireCollected {
    fn from(c: &CollectedOutput) -> Self {
        Self {
            text: c.text.clone(),
            truncated: c.truncated,
            spill: (&c.spill).into(),
            total_bytes: c.total_bytes,
        }
    }
}

/// [`RunOutcome`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireOutcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub aborted: bool,
    pub timeout_ms: u64,
    pub stdout: WireCollected,
    pub stderr: WireCollected,
}

impl From<&RunOutcome> for WireOutcome {
    fn from(o: &RunOutcome) -> Self {
        Self {
            exit_code: o.exit_code,
            signal: o.signal,
            timed_out: o.timed_out,
            aborted: o.aborted,
            timeout_ms: o.timeout_ms,
            stdout: (&o.stdout).into(),
            stderr: (&o.stderr).into(),
        }
    }
}

/// [`TaskStatus`] on the wire.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WireStatus {
    Running,
    Completed { exit_code: i32 },
    Killed { signal: Option<i32> },
    Lost,
}

impl From<TaskStatus> for WireStatus {
    fn from(s: TaskStatus) -> Self {
        match s {
            TaskStatus::Running => WireStatus::Running,
            TaskStatus::Completed { exit_code } => WireStatus::Completed { exit_code },
            TaskStatus::Killed { signal } => WireStatus::Killed { signal },
            TaskStatus::Lost => WireStatus::Lost,
        }
    }
}

impl From<WireStatus> for TaskStatus {
    fn from(s: WireStatus) -> Self {
        match s {
            WireStatus::Running => TaskStatus::Running,
            WireStatus::Completed { exit_code } => TaskStatus::Completed { exit_code },
            WireStatus::Killed { signal } => TaskStatus::Killed { signal },
            WireStatus::Lost => TaskStatus::Lost,
        }
    }
}

/// [`ExecError`] on the wire (paths are the remote host's).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WireError {
    WorkdirMissing(PathBuf),
    WorkdirNotDirectory(PathBuf),
    WorkdirUnusable { path: PathBuf, reason: String },
    Spawn(String),
    ShuttingDown,
    Other(String),
}

impl From<&ExecError> for WireError {
    fn from(e: &ExecError) -> Self {
        match e {
            ExecError::WorkdirMissing(p) => WireError::WorkdirMissing(p.clone()),
            ExecError::WorkdirNotDirectory(p) => WireError::WorkdirNotDirectory(p.clone()),
            ExecError::WorkdirUnusable { path, reason } => WireError::WorkdirUnusable {
                path: path.clone(),
                reason: reason.clone(),
            },
            ExecError::Spawn(s) => WireError::Spawn(s.clone()),
            ExecError::ShuttingDown => WireError::ShuttingDown,
            other => WireError::Other(other.to_string()),
        }
    }
}

/// The answer to `run`: an outcome or the infrastructure error (E1).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunAnswer {
    Ok(WireOutcome),
    Err(WireError),
}

/// The answer to `start`: the task's status right after the start (a spawn
/// failure is already `killed`), or the infrastructure error.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartAnswer {
    Ok(WireStatus),
    Err(WireError),
}

/// [`StreamRead`] on the wire, plus the stream's spill file once there is one
/// (the local side names it when its own bound drops what the helper sent).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct WireRead {
    pub text: String,
    pub dropped: bool,
    pub spill: Option<WireSpill>,
}

/// `output` notification params.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OutputParams {
    pub key: u64,
    pub stdout: WireRead,
    pub stderr: WireRead,
}

/// `done` notification params: sent after the task's last `output`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DoneParams {
    pub key: u64,
    pub status: WireStatus,
}

/// One background task as the helper tracks it: the local key, and how many
/// bytes of each stream went out (to name the spill file once a stream outgrew
/// the bound).
struct Tracked {
    key: u64,
    sent: [u64; 2],
    spill_named: [bool; 2],
}

/// The helper's state, shared by its request handlers and its output pump.
struct Helper {
    state_dir: PathBuf,
    exec: OnceLock<Arc<dyn BashExecutor>>,
    hello: OnceLock<Hello>,
    peer: OnceLock<Peer>,
    /// Remote task id -> tracking. A tokio mutex held across `start`, so the pump
    /// never sees a completion of a task it cannot name yet.
    tasks: tokio::sync::Mutex<HashMap<TaskId, Tracked>>,
    /// Local key -> remote task id, for `kill`.
    keys: Mutex<HashMap<u64, TaskId>>,
    /// Foreground runs in flight, by the local side's number, for `cancel`.
    runs: Mutex<HashMap<u64, CancellationToken>>,
    /// Wakes an idle pump when a task starts.
    started: tokio::sync::Notify,
    /// Cancelled when the pump has sent every completion (after shutdown).
    pump_done: CancellationToken,
    /// Cancelled when the connection has ended: the helper's end.
    end: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn parse<T: serde::de::DeserializeOwned>(params: &jsonrpsee::types::Params) -> Result<T, RpcError> {
    let value: Value = params
        .parse()
        .map_err(|e| RpcError::invalid_params(e.to_string()))?;
    serde_json::from_value(value).map_err(|e| RpcError::invalid_params(e.to_string()))
}

fn spec_of(w: WireSpec) -> ExecSpec {
    ExecSpec {
        command: w.command,
        workdir: w.workdir,
        timeout_ms: w.timeout_ms,
        scope: w.scope,
        writable_roots: w.writable_roots,
        call_id: None,
        task_id: None,
    }
}

impl Helper {
    fn exec(&self) -> Result<Arc<dyn BashExecutor>, RpcError> {
        self.exec
            .get()
            .cloned()
            .ok_or_else(|| RpcError::invalid_request("hello first"))
    }

    async fn hello(self: Arc<Self>, hello: Hello) -> Result<Value, RpcError> {
        if hello.protocol != PROTOCOL {
            return Err(RpcError::invalid_params(format!(
                "this helper speaks protocol {PROTOCOL}, not {}",
                hello.protocol
            )));
        }
        if self.exec.get().is_some() {
            return Err(RpcError::invalid_request("hello twice"));
        }
        let config = ExecConfig {
            state_dir: Some(self.state_dir.clone()),
            max_output_bytes: hello.max_output_bytes,
            finished_output_bytes: hello.finished_output_bytes,
            kill_grace_ms: hello.kill_grace_ms,
            drain_ms: hello.drain_ms,
            // The local side resolved every timeout against its own cap.
            max_timeout_ms: u64::MAX,
            ..ExecConfig::default()
        };
        let exec: Arc<dyn BashExecutor> = match &hello.sandbox {
            None => Arc::new(
                LocalExecutor::with_env(&config, command_env(std::env::vars_os()))
                    .map_err(|e| RpcError::internal(format!("cannot start the executor: {e}")))?,
            ),
            Some(sandbox) => {
                let mut sandbox = sandbox.clone();
                // Nothing judges connections on this side yet (issue 28 leaves the
                // remote proxy for later): a proxied network would refuse every host,
                // so it is the private loopback it amounts to, said as such.
                if sandbox.network.mode == crate::config::NetworkMode::Proxy {
                    sandbox.network.mode = crate::config::NetworkMode::None;
                }
                let config = ExecConfig {
                    sandbox,
                    env_pass: hello.env_pass.clone(),
                    env_set: hello.env_set.clone(),
                    ..config
                };
                Arc::new(
                    super::SandboxExecutor::with_env(
                        &config,
                        &[],
                        command_env(std::env::vars_os()),
                    )
                    .map_err(|e| {
                        RpcError::internal(format!("cannot sandbox commands on this host: {e}"))
                    })?,
                )
            }
        };
        let completions = exec
            .take_completions()
            .ok_or_else(|| RpcError::internal("no completion stream"))?;
        if self.exec.set(exec.clone()).is_err() || self.hello.set(hello.clone()).is_err() {
            return Err(RpcError::invalid_request("hello twice"));
        }
        let peer = self
            .peer
            .get()
            .cloned()
            .ok_or_else(|| RpcError::internal("no peer"))?;
        tokio::spawn(self.clone().pump(exec, completions, peer));
        Ok(json!({
            "protocol": PROTOCOL,
            "version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "state_dir": self.state_dir,
        }))
    }

    async fn run(&self, ctx: RequestContext, p: RunParams) -> Result<Value, RpcError> {
        let exec = self.exec()?;
        // `$/cancel_request` (the local call was dropped) or the channel's end
        // cancels `ctx.cancel`; `cancel` by number cancels this child of it.
        let cancel = ctx.cancel.child_token();
        lock(&self.runs).insert(p.run, cancel.clone());
        let result = if p.watch {
            let (watch, forward) = forward_output(ctx.peer.clone(), p.run);
            let result = exec.run_watched(spec_of(p.spec), cancel, watch).await;
            forward.flush();
            result
        } else {
            exec.run(spec_of(p.spec), cancel).await
        };
        lock(&self.runs).remove(&p.run);
        let answer = match result {
            Ok(outcome) => RunAnswer::Ok((&outcome).into()),
            Err(e) => RunAnswer::Err((&e).into()),
        };
        serde_json::to_value(answer).map_err(|e| RpcError::internal(e.to_string()))
    }

    async fn start(&self, p: StartParams) -> Result<Value, RpcError> {
        let exec = self.exec()?;
        let mut tasks = self.tasks.lock().await;
        let answer = match exec.start(spec_of(p.spec)).await {
            Ok(info) => {
                lock(&self.keys).insert(p.key, info.id);
                tasks.insert(
                    info.id,
                    Tracked {
                        key: p.key,
                        sent: [0; 2],
                        spill_named: [false; 2],
                    },
                );
                self.started.notify_one();
                StartAnswer::Ok(info.status.into())
            }
            Err(e) => StartAnswer::Err((&e).into()),
        };
        drop(tasks);
        serde_json::to_value(answer).map_err(|e| RpcError::internal(e.to_string()))
    }

    async fn kill(&self, p: KeyParams) -> Result<Value, RpcError> {
        let exec = self.exec()?;
        let id = lock(&self.keys).get(&p.key).cloned();
        let outcome = match id {
            Some(id) => exec.kill(id).await,
            None => KillOutcome::Unknown,
        };
        serde_json::to_value(outcome).map_err(|e| RpcError::internal(e.to_string()))
    }

    async fn kill_scope(&self, p: ScopeParams) -> Result<Value, RpcError> {
        self.exec()?.kill_scope(&p.scope).await;
        Ok(Value::Null)
    }

    async fn file(&self, p: FileParams) -> Result<Value, RpcError> {
        let answer = files::answer(self.exec()?.as_ref(), p).await;
        serde_json::to_value(answer).map_err(|e| RpcError::internal(e.to_string()))
    }

    /// Ends everything, then answers once the pump has sent every completion, so
    /// the local side has every task's final status when the answer arrives.
    async fn shutdown(&self) -> Result<Value, RpcError> {
        if let Some(exec) = self.exec.get() {
            exec.shutdown().await;
            self.pump_done.cancelled().await;
        }
        // The local side closes the channel once it has this answer; that ends
        // the helper.
        Ok(Value::Null)
    }

    /// Sends what `id` printed since the last send.
    async fn forward(
        &self,
        exec: &dyn BashExecutor,
        peer: &Peer,
        id: TaskId,
        tracked: &mut Tracked,
    ) {
        if let Some(params) = self.unsent_output(exec, id, tracked) {
            send_output(peer, params).await;
        }
    }

    /// What `id` printed since the last send, as the `output` notification that
    /// sends it (`None`: nothing new). Reading marks it sent, so it must be sent.
    fn unsent_output(
        &self,
        exec: &dyn BashExecutor,
        id: TaskId,
        tracked: &mut Tracked,
    ) -> Option<OutputParams> {
        let read = exec.read(id)?;
        let max = self.hello.get().map(|h| h.max_output_bytes).unwrap_or(0) as u64;
        let mut streams = [
            self.wire_read(id, 0, &read.stdout, tracked, max),
            self.wire_read(id, 1, &read.stderr, tracked, max),
        ];
        let [out, err] = &mut streams;
        if out.text.is_empty()
            && err.text.is_empty()
            && !out.dropped
            && !err.dropped
            && out.spill.is_none()
            && err.spill.is_none()
        {
            return None;
        }
        Some(OutputParams {
            key: tracked.key,
            stdout: std::mem::take(out),
            stderr: std::mem::take(err),
        })
    }

    /// One stream's read for the wire. Once the stream has carried more than the
    /// bound, its spill file exists (the engine creates it on the first byte that
    /// does not fit) and is named once, so the local side can name it in turn.
    fn wire_read(
        &self,
        id: TaskId,
        stream: usize,
        read: &StreamRead,
        tracked: &mut Tracked,
        max: u64,
    ) -> WireRead {
        tracked.sent[stream] += read.text.len() as u64;
        let mut spill = None;
        if read.dropped && read.spill != Spill::None {
            spill = Some(WireSpill::from(&read.spill));
            tracked.spill_named[stream] = true;
        } else if !tracked.spill_named[stream] && tracked.sent[stream] > max {
            let which = [OutputStream::Stdout, OutputStream::Stderr][stream];
            let path = super::outfiles::dir(&self.state_dir)
                .join(super::outfiles::task_file_name(id, which));
            spill = Some(if path.exists() {
                WireSpill::Written(path)
            } else {
                WireSpill::Unavailable("the spill file was not written".into())
            });
            tracked.spill_named[stream] = true;
        }
        WireRead {
            text: read.text.clone(),
            dropped: read.dropped,
            spill,
        }
    }

    /// Sends background output while tasks run, and each completion after the
    /// task's last output, until the executor's completion stream ends (shutdown).
    async fn pump(
        self: Arc<Self>,
        exec: Arc<dyn BashExecutor>,
        mut completions: tokio::sync::mpsc::UnboundedReceiver<super::TaskInfo>,
        peer: Peer,
    ) {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // An idle helper does not wake up every POLL: with nothing running it
            // waits for a start or a completion.
            let idle = self.tasks.lock().await.is_empty();
            tokio::select! {
                biased;
                () = self.started.notified(), if idle => {}
                done = completions.recv() => {
                    let Some(info) = done else { break };
                    let mut tasks = self.tasks.lock().await;
                    let Some(mut tracked) = tasks.remove(&info.id) else { continue };
                    drop(tasks);
                    self.forward(exec.as_ref(), &peer, info.id, &mut tracked).await;
                    let params = DoneParams { key: tracked.key, status: info.status.into() };
                    if let Ok(v) = serde_json::to_value(params) {
                        let _ = peer.notify_paced("done", v, Duration::from_secs(60)).await;
                    }
                }
                _ = tick.tick(), if !idle => {
                    // Read under the lock, send after it: a paced send may wait up to a
                    // minute for a slow channel, and `start` needs the lock meanwhile.
                    let unsent: Vec<OutputParams> = {
                        let mut tasks = self.tasks.lock().await;
                        tasks
                            .iter_mut()
                            .filter_map(|(id, tracked)| {
                                self.unsent_output(exec.as_ref(), *id, tracked)
                            })
                            .collect()
                    };
                    for params in unsent {
                        send_output(&peer, params).await;
                    }
                }
            }
        }
        self.pump_done.cancel();
    }
}

/// Sends one `output` notification, paced: a channel that is slow to drain holds the
/// pump (never the tasks' lock), so output is not lost to a full queue.
async fn send_output(peer: &Peer, params: OutputParams) {
    if let Ok(v) = serde_json::to_value(params) {
        let _ = peer
            .notify_paced("output", v, Duration::from_secs(60))
            .await;
    }
}

/// The base environment of the helper's commands: its own (the ssh session's),
/// with `SHLVL` at least 1. sshd sets `SSH_CLIENT`, and Debian's bash then reads
/// `~/.bashrc` for a top-level `bash -c` (shell level below 2): on the test host
/// that cost 330 ms a command and ran the user's rc file where a local command
/// runs none. With `SHLVL=1` a command's `bash -c` is level 2, as it is on the
/// wrapper path, where the login shell sits above it. (E4 filtering is the
/// executor's, as everywhere.)
fn command_env(
    base: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut env: Vec<_> = base.into_iter().filter(|(k, _)| k != "SHLVL").collect();
    let level = std::env::var("SHLVL")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(0)
        .max(1);
    env.push(("SHLVL".into(), level.to_string().into()));
    env
}

/// The helper's side of the connection.
struct HelperService {
    helper: Arc<Helper>,
}

macro_rules! method {
    ($m:expr, $name:literal, |$h:ident, $ctx:ident, $p:ident : $ty:ty| $body:expr) => {
        $m.register_async_method($name, |params, $h: Arc<Helper>, ext| async move {
            let $ctx = ext
                .get::<RequestContext>()
                .cloned()
                .ok_or_else(|| RpcError::internal("no request context"))?;
            let $p: $ty = parse(&params)?;
            let _ = &$ctx;
            $body.await
        })
        .map_err(|e| e.to_string())?;
    };
}

impl HelperService {
    fn build(&self) -> Result<jsonrpsee::Methods, String> {
        let mut m = jsonrpsee::RpcModule::from_arc(self.helper.clone());
        method!(m, "hello", |h, ctx, p: Hello| h.clone().hello(p));
        method!(m, "run", |h, ctx, p: RunParams| h.run(ctx, p));
        method!(m, "start", |h, ctx, p: StartParams| h.start(p));
        method!(m, "kill", |h, ctx, p: KeyParams| h.kill(p));
        method!(m, "kill_scope", |h, ctx, p: ScopeParams| h.kill_scope(p));
        method!(m, "file", |h, ctx, p: FileParams| h.file(p));
        method!(m, "shutdown", |h, ctx, p: Value| {
            let _ = p;
            h.shutdown()
        });
        Ok(m.into())
    }
}

impl Service for HelperService {
    fn methods(&self) -> jsonrpsee::Methods {
        self.build().unwrap_or_else(|e| {
            tracing::error!("cannot register the helper's methods: {e}");
            jsonrpsee::Methods::new()
        })
    }

    fn opened(&self, peer: &Peer) {
        let _ = self.helper.peer.set(peer.clone());
    }

    fn notification(&self, _peer: &Peer, method: &str, params: Option<Value>) {
        if method == "cancel"
            && let Some(Ok(p)) = params.map(serde_json::from_value::<CancelParams>)
            && let Some(token) = lock(&self.helper.runs).get(&p.run)
        {
            token.cancel();
        }
    }

    fn closed(&self, _peer: &Peer) {
        self.helper.end.cancel();
    }
}

/// `dsh exec-helper`: serves the protocol on stdin/stdout until `shutdown`, the
/// end of stdin, SIGTERM or SIGHUP, then ends everything it started (E3) and
/// returns.
pub async fn serve_stdio(state_dir: PathBuf) -> Result<(), String> {
    // As the daemon does: leftovers are found among its own children.
    super::children::adopt_orphans();
    let helper = Arc::new(Helper {
        state_dir,
        exec: OnceLock::new(),
        hello: OnceLock::new(),
        peer: OnceLock::new(),
        tasks: tokio::sync::Mutex::new(HashMap::new()),
        keys: Mutex::new(HashMap::new()),
        runs: Mutex::new(HashMap::new()),
        started: tokio::sync::Notify::new(),
        pump_done: CancellationToken::new(),
        end: CancellationToken::new(),
    });
    let service = Arc::new(HelperService {
        helper: helper.clone(),
    });
    // The local side's settings are not known yet: the widest line it may send
    // is a request, which is small; answers are bounded by `hello`'s setting, which
    // the other side reads with its own limit.
    let options = rpc::Options {
        max_line_bytes: max_line_bytes(0),
        outgoing_queue: 65_536,
        request_timeout: None,
        ..Default::default()
    };
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| e.to_string())?;
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| e.to_string())?;
    // Non-blocking pipes on the event loop when sshd gave pipes (`rpc::stdio`).
    let (input, output) = rpc::stdio::stdio();
    let serve = rpc::serve_connection(input, output, service.clone(), options);
    let end = helper.end.clone();
    tokio::select! {
        () = serve => {}
        () = end.cancelled() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
    // Whatever ended it, nothing it started outlives it (E3). A `shutdown` that
    // already ran makes this a no-op.
    if let Some(exec) = helper.exec.get() {
        exec.shutdown().await;
    }
    Ok(())
}

/// How often a watched run's output goes to the local side at most, and how much of
/// each stream waits at most: a command printing faster than the channel carries must
/// not fill the helper's outgoing queue (which would end the channel and every run on
/// it). What a full wait drops is only the live view's: the result carries everything.
const FORWARD_EVERY: Duration = Duration::from_millis(50);
const FORWARD_MAX: usize = 64 * 1024;

/// What a watched run has read and not yet sent, per stream.
struct Forward {
    peer: Peer,
    run: u64,
    pending: Mutex<([Vec<u8>; 2], Option<std::time::Instant>)>,
}

impl Forward {
    fn push(&self, stream: super::OutputStream, bytes: &[u8]) {
        let index = match stream {
            super::OutputStream::Stdout => 0,
            super::OutputStream::Stderr => 1,
        };
        let mut guard = lock(&self.pending);
        let (streams, sent_at) = &mut *guard;
        let buffer = &mut streams[index];
        buffer.extend_from_slice(bytes);
        if buffer.len() > FORWARD_MAX {
            let cut = buffer.len() - FORWARD_MAX;
            buffer.drain(..cut);
        }
        if sent_at.is_some_and(|at| at.elapsed() < FORWARD_EVERY) {
            return;
        }
        *sent_at = Some(std::time::Instant::now());
        self.send(streams, false);
    }

    /// Sends what waits; at the run's end (`last`), a character cut by the end too.
    fn send(&self, streams: &mut [Vec<u8>; 2], last: bool) {
        for (index, stream) in [(0, OutputStream::Stdout), (1, OutputStream::Stderr)] {
            let buffer = &mut streams[index];
            let whole = if last {
                buffer.len()
            } else {
                super::collector::complete_prefix_len(buffer)
            };
            if whole == 0 {
                continue;
            }
            let data = String::from_utf8_lossy(&buffer[..whole]).into_owned();
            buffer.drain(..whole);
            let params = RunOutputParams {
                run: self.run,
                stream,
                data,
            };
            if let Ok(params) = serde_json::to_value(params) {
                // A closed channel loses only the live view: the result still carries all.
                let _ = self.peer.notify("run_output", params);
            }
        }
    }

    /// Sends the rest, before the run's answer goes out.
    fn flush(&self) {
        let mut guard = lock(&self.pending);
        self.send(&mut guard.0, true);
    }
}

/// An output watch that sends a run's output to the local side as `run_output`
/// notifications (whole UTF-8 characters, at most every 50 ms), and the [`Forward`] to
/// flush when the run ends.
fn forward_output(peer: Peer, run: u64) -> (super::OutputWatch, Arc<Forward>) {
    let forward = Arc::new(Forward {
        peer,
        run,
        pending: Mutex::new(([Vec::new(), Vec::new()], None)),
    });
    let watch = {
        let forward = forward.clone();
        Arc::new(move |stream: super::OutputStream, bytes: &[u8]| forward.push(stream, bytes))
    };
    (watch, forward)
}
