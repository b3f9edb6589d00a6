//! The executor seam: every command dsh runs goes through [`BashExecutor`].
//!
//! One executor is shared by all sessions as an `Arc<dyn BashExecutor>`. It knows
//! processes, timeouts, output bounds and spill files; it knows nothing about
//! sessions, JSON or the text the model reads. Callers may tag work with an opaque
//! [`Scope`] (dsh uses the session id) so that everything started under it can be
//! ended at once, but the executor never interprets it.

pub mod children;
mod collector;
pub mod escalation;
pub mod forker;
pub mod helper;
mod ids;
pub mod lineage;
pub mod local;
pub mod netproxy;
pub mod outfiles;
mod pidns;
pub mod process;
mod procs;
pub mod records;
pub mod remote;
mod retention;
pub mod sandbox;
mod spawn;
pub mod ssh;
mod ssh_executor;

pub use collector::{CollectedOutput, Collector, Spill, SpillTarget, StreamRead};
pub use ids::{NotATaskId, TaskId};
pub use local::LocalExecutor;
pub use process::{Launcher, ProcessExecutor};
pub use sandbox::SandboxExecutor;
pub use ssh_executor::SshExecutor;

use crate::config::{ExecConfig, ExecutorKind};
use std::sync::Arc;

use std::path::PathBuf;
use std::time::SystemTime;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// An opaque label the caller groups work under, so that [`BashExecutor::kill_scope`]
/// can end all of it (dsh uses the session id).
pub type Scope = String;

/// What a caller asks to run, before defaults are applied.
#[derive(Debug, Clone, Default)]
pub struct ExecRequest {
    /// Run as `bash -c <command>`.
    pub command: String,
    /// Working directory; relative paths are joined to the executor's fallback cwd.
    /// The tool layer fills it from the session cwd before calling `resolve` (T2).
    pub workdir: Option<PathBuf>,
    /// Requested timeout; clamped to the configured cap.
    pub timeout_ms: Option<u64>,
    /// Who the work belongs to, for [`BashExecutor::kill_scope`].
    pub scope: Option<Scope>,
    /// Directories the command may write to when the executor confines writes (the
    /// sandbox): the calling session's cwd and the directories it was granted.
    /// Executors that do not confine ignore it.
    pub writable_roots: Vec<PathBuf>,
    /// The tool call that asks for it: a connection the command makes through the
    /// sandbox's proxy is judged as that call's (a background task names its task).
    pub call_id: Option<String>,
}

/// A fully resolved command: every choice is explicit (T2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSpec {
    pub command: String,
    pub workdir: PathBuf,
    /// Applies to foreground runs only; background tasks have no timeout (E2).
    pub timeout_ms: u64,
    pub scope: Option<Scope>,
    /// See [`ExecRequest::writable_roots`].
    pub writable_roots: Vec<PathBuf>,
    /// See [`ExecRequest::call_id`].
    pub call_id: Option<String>,
    /// The task id of a background command (set by the executor's `start`).
    pub task_id: Option<TaskId>,
}

/// Which stream a piece of live output came from (`stdout`/`stderr` on the helper's wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// Sees a foreground command's output as it arrives, chunk by chunk, so an editor can
/// show a long build while it runs. It is called on the executor's reader task, so it
/// must copy what it wants and return (never block). The result of the run is the
/// same with or without one (T3-T6).
pub type OutputWatch = Arc<dyn Fn(OutputStream, &[u8]) + Send + Sync>;

/// The result of a foreground command (E1). Exits, timeouts and aborts all end
/// here; only infrastructure problems are errors.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Exit code when the main process exited normally.
    pub exit_code: Option<i32>,
    /// Signal number when the main process died of a signal.
    pub signal: Option<i32>,
    /// The timer fired, whatever the process did afterwards.
    pub timed_out: bool,
    /// The caller cancelled the run.
    pub aborted: bool,
    /// The timeout that applied.
    pub timeout_ms: u64,
    pub stdout: CollectedOutput,
    pub stderr: CollectedOutput,
}

/// Lifecycle of a background task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    Running,
    /// The main process exited on its own with this code.
    Completed {
        exit_code: i32,
    },
    /// Killed (by `kill`, shutdown, a signal from elsewhere) or never started.
    /// `signal` is the signal that ended the main process when known.
    Killed {
        signal: Option<i32>,
    },
    /// The daemon that ran it ended while it ran ([`records::LOST_REASON`]); a later
    /// daemon found its record, ended what was left of it and kept its output.
    Lost,
}

impl TaskStatus {
    /// Whether the task has reached a final state.
    pub fn is_finished(&self) -> bool {
        !matches!(self, TaskStatus::Running)
    }
}

/// A snapshot of one background task.
#[derive(Debug, Clone)]
pub struct TaskInfo {
    pub id: TaskId,
    pub command: String,
    pub workdir: PathBuf,
    pub scope: Option<Scope>,
    pub status: TaskStatus,
    pub started_at: SystemTime,
}

/// A task a previous daemon on the state directory left unfinished, as
/// [`BashExecutor::recover`] found it.
#[derive(Debug, Clone)]
pub struct RecoveredTask {
    /// Its status is [`TaskStatus::Lost`]; `scope` is the one it ran under.
    pub info: TaskInfo,
    /// This start is the first to find it (it was running): its end has not been
    /// told to anyone yet. Otherwise an earlier start reported it.
    pub newly_lost: bool,
}

/// A running background task let go by one daemon program for the next (`dsh upgrade`,
/// `crate::upgrade`): its host process (still this process's child), the read ends of
/// its output pipes, and how far each stream was delivered. Everything else is in its
/// record (`records`) and its output files.
#[derive(Debug)]
pub struct HandedTask {
    pub id: TaskId,
    pub pid: i32,
    pub stdout: Option<std::os::fd::OwnedFd>,
    pub stderr: Option<std::os::fd::OwnedFd>,
    pub stdout_read: u64,
    pub stderr_read: u64,
    /// Keeps the orphan reaper off the host process until the next program waits for
    /// it (`None` in a program just started: it books the pid itself).
    pub booking: Option<children::Owned>,
}

/// The output of a task since the previous read, per stream (E2, T8, T9).
#[derive(Debug, Clone)]
pub struct TaskRead {
    pub stdout: StreamRead,
    pub stderr: StreamRead,
    /// Status at the time of the read; a finished status means nothing more will
    /// ever be produced.
    pub status: TaskStatus,
}

/// What `kill` did (`killed`, `already_finished`, `unknown` on the helper's wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillOutcome {
    Killed,
    AlreadyFinished,
    Unknown,
}

/// Infrastructure failures: the command could not be run at all.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ExecError {
    #[error("workdir does not exist: {0}")]
    WorkdirMissing(PathBuf),
    #[error("workdir is not a directory: {0}")]
    WorkdirNotDirectory(PathBuf),
    #[error("workdir is not usable: {path}: {reason}")]
    WorkdirUnusable { path: PathBuf, reason: String },
    #[error("spawn failed: {0}")]
    Spawn(String),
    /// The sandbox cannot hold for this command (a symlinked root, a workdir it
    /// masks, the daemon's socket in reach): it is refused, never run unsandboxed.
    #[error("the sandbox refuses to run this command: {0}")]
    Sandbox(String),
    #[error("executor is shutting down")]
    ShuttingDown,
    /// The remote host could not be reached or refused the command.
    #[error("{0}")]
    Remote(String),
    /// The command's fate is unknown: the executor lost it (a dropped connection).
    #[error("{0}")]
    Lost(String),
}

/// A long-lived program spoken to over its stdin and stdout (an MCP server), started
/// through the executor like a command: the same launcher (so it is sandboxed under the
/// sandbox executor), environment filter, marker and accounting, so shutdown ends it
/// and everything it started.
pub struct ServiceProcess {
    /// Its stdin (the requests).
    pub stdin: tokio::net::unix::pipe::Sender,
    /// Its stdout (the answers).
    pub stdout: tokio::net::unix::pipe::Receiver,
    /// Its stderr, as written (a server's log; the caller decides what to keep).
    pub stderr: tokio::net::unix::pipe::Receiver,
    /// Ends it; dropping the handle ends it too.
    pub handle: ServiceHandle,
}

/// Ends a [`ServiceProcess`] and says when it has ended. Dropping it stops the program:
/// whoever holds the pipes cannot forget to.
pub struct ServiceHandle {
    stop: CancellationToken,
    ended: CancellationToken,
}

impl ServiceHandle {
    /// `stop` asks the supervisor to end the program; it cancels `ended` once the program
    /// and everything it started are gone.
    pub fn new(stop: CancellationToken, ended: CancellationToken) -> Self {
        Self { stop, ended }
    }

    /// Ends the program and everything it started, and returns once they are gone.
    pub async fn stop(&self) {
        self.stop.cancel();
        self.ended.cancelled().await;
    }

    /// Cancelled once the program is gone (by itself or stopped).
    pub fn ended(&self) -> &CancellationToken {
        &self.ended
    }
}

impl Drop for ServiceHandle {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Builds the executor `config` chooses; `None` for kind `none`. Fails closed with a
/// message fit for a person (what is missing and how to fix it): a sandbox that
/// cannot be created is never replaced by running unsandboxed.
/// `guarded` are sockets no command may reach (the daemon's own, E7).
pub fn from_config(
    config: &ExecConfig,
    guarded: &[std::path::PathBuf],
) -> Result<Option<Arc<dyn BashExecutor>>, String> {
    Ok(match config.kind {
        ExecutorKind::Local => {
            Some(Arc::new(LocalExecutor::new(config).map_err(|e| {
                format!("cannot start the local executor: {e}")
            })?))
        }
        ExecutorKind::Sandbox => Some(Arc::new(SandboxExecutor::new(config, guarded)?)),
        ExecutorKind::Ssh => Some(Arc::new(SshExecutor::new(config)?)),
        ExecutorKind::None => None,
    })
}

/// The seam every executor implements (local, sandbox, ssh).
#[async_trait::async_trait]
pub trait BashExecutor: Send + Sync + 'static {
    /// A short name for status output ("local", "sandbox", "ssh").
    fn kind(&self) -> &'static str;

    /// The executor that runs a command outside this one's containment, for a call the
    /// person (or a rule naming its command) let out of it (issue 27; see
    /// [`escalation`]). Only the daemon's sandbox has one; `None` means a request to
    /// leave changes nothing here. Its tasks are this executor's too: `get`, `read`,
    /// `kill`, scopes, completions and `shutdown` reach them.
    fn outside(&self) -> Option<Arc<dyn BashExecutor>> {
        None
    }

    /// Who judges the connections its commands make through dsh's network proxy
    /// (E10): only the sandbox has one; the daemon sets it once its tools exist.
    fn set_connection_judge(&self, judge: Arc<dyn netproxy::ConnectionJudge>) {
        let _ = judge;
    }

    /// The connections its commands hold open through dsh's network proxy now, by
    /// the task (or foreground call) that holds them: what `dsh status` lists.
    fn proxied_connections(&self) -> Vec<(String, usize)> {
        Vec::new()
    }

    /// Applies defaults and caps: the returned spec has an explicit workdir and
    /// timeout (T2). Checking that the workdir exists happens when it runs.
    fn resolve(&self, request: ExecRequest) -> ExecSpec;

    /// Runs a foreground command to its end, its timeout, or `cancel` (E1).
    async fn run(&self, spec: ExecSpec, cancel: CancellationToken)
    -> Result<RunOutcome, ExecError>;

    /// [`BashExecutor::run`], handing every chunk of output to `watch` as it arrives.
    /// An executor that cannot stream keeps this default: the output is then seen only
    /// in the result, which is the same either way.
    async fn run_watched(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
        watch: OutputWatch,
    ) -> Result<RunOutcome, ExecError> {
        let _ = watch;
        self.run(spec, cancel).await
    }

    /// Starts a background task and returns at once (E2). A spawn failure still
    /// yields a task, already `Killed`, whose stderr says why.
    async fn start(&self, spec: ExecSpec) -> Result<TaskInfo, ExecError>;

    /// A snapshot of one task. Ids arrive typed: a text is read as a [`TaskId`] once,
    /// where it enters dsh (a tool's arguments, the CLI, a wire), and a text that is not
    /// one is refused there, never looked up here.
    fn get(&self, id: TaskId) -> Option<TaskInfo>;

    /// Snapshots of every task this executor has started, oldest first.
    fn list(&self) -> Vec<TaskInfo>;

    /// The tasks of [`BashExecutor::list`] still running.
    fn running(&self) -> Vec<TaskInfo> {
        let mut tasks = self.list();
        tasks.retain(|t| !t.status.is_finished());
        tasks
    }

    /// The output since the previous `read` of this task (never re-delivered).
    fn read(&self, id: TaskId) -> Option<TaskRead>;

    /// Stops a task and everything it started (E3); returns once it is gone.
    /// On a finished task it also ends anything the task left detached, and
    /// reports `AlreadyFinished`.
    async fn kill(&self, id: TaskId) -> KillOutcome;

    /// Ends every task, and every process left detached by a foreground run,
    /// started under `scope` (used when a session closes). Returns once all are gone.
    async fn kill_scope(&self, scope: &str);

    /// The stream of finished tasks, each delivered exactly once. Only the first
    /// caller gets it; later calls get `None`. The stream ends after `shutdown`,
    /// once it holds every task's completion.
    fn take_completions(&self) -> Option<mpsc::UnboundedReceiver<TaskInfo>>;

    /// Called once, by the daemon as it starts: from then on each task is kept on
    /// disk while it runs (`records`), and the tasks an earlier daemon on the state
    /// directory left unfinished are taken over: what is left of their processes is
    /// ended, each becomes [`TaskStatus::Lost`], and `get`, `read`, `list` and `kill`
    /// answer for it with the output it had written. Executors that keep no records
    /// find nothing.
    fn recover(&self) -> Vec<RecoveredTask> {
        Vec::new()
    }

    /// Starts `spec.command` as a [`ServiceProcess`]: no timeout, stdin a pipe, ended
    /// by [`ServiceProcess::stop`], by dropping it, by `kill_scope` of its scope or by
    /// shutdown. Executors that cannot pass stdin through keep this refusal.
    /// `env` is the program's own environment on top of the filtered one (an MCP
    /// server's `env`, often a token): passed in the process environment, never on a
    /// command line where `ps` would show it (over ssh it must travel on one: see there).
    async fn start_service(
        &self,
        spec: ExecSpec,
        env: Vec<(String, String)>,
    ) -> Result<ServiceProcess, ExecError> {
        let _ = (spec, env);
        Err(ExecError::Spawn(format!(
            "the {} executor cannot start servers",
            self.kind()
        )))
    }

    /// Lets every running background task go without ending it, for `dsh upgrade`:
    /// their supervisors stop, their output pipes stop being read (what is in them
    /// waits there), and each comes back as a [`HandedTask`] for
    /// [`BashExecutor::adopt_tasks`] (in the next program, or in this one when the
    /// upgrade fails). An executor that cannot carry tasks refuses, letting go of
    /// nothing: [`BashExecutor::carries_tasks`] says so beforehand.
    async fn let_go_tasks(&self) -> Result<Vec<HandedTask>, String> {
        Err(format!(
            "the {} executor cannot carry running tasks over an upgrade",
            self.kind()
        ))
    }

    /// Whether [`BashExecutor::let_go_tasks`] can carry this executor's running tasks.
    fn carries_tasks(&self) -> bool {
        false
    }

    /// Supervises again tasks [`BashExecutor::let_go_tasks`] let go, from their
    /// records and output files: they run on, and are read, killed, listed and
    /// reported as before. A task that cannot be taken is ended by its mark and
    /// reported lost; each comes back with how it was taken.
    fn adopt_tasks(&self, tasks: Vec<HandedTask>) -> Vec<(TaskInfo, Result<(), String>)> {
        let _ = tasks;
        Vec::new()
    }

    /// Kills everything (E3) and waits until it is gone. New work is refused.
    async fn shutdown(&self);

    /// The spill files (on this host) of the tasks still running: the state
    /// directory's sweep never removes them (`crate::state_dir`). An executor whose
    /// files live elsewhere (the ssh helper's, on the remote host) names none.
    fn spill_files_in_use(&self) -> Vec<PathBuf> {
        Vec::new()
    }
}
