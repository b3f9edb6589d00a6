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
use crate::containment;
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

/// Wakes whoever follows one background task when it wrote more output or ended (a
/// wrapped agent's terminal shown live in the editor, its `terminal/wait_for_exit`), so
/// nobody polls [`BashExecutor::read`] or [`BashExecutor::get`] on a timer. It says only
/// that something changed; what changed is read as always.
pub struct TaskChanges {
    stdout: Option<tokio::sync::watch::Receiver<u64>>,
    stderr: Option<tokio::sync::watch::Receiver<u64>>,
    /// Cancelled once the task's status is final.
    finished: CancellationToken,
}

impl TaskChanges {
    /// The changes of a task whose streams are `stdout` and `stderr`; `finished` is
    /// cancelled once its status is final.
    pub fn new(stdout: &Collector, stderr: &Collector, finished: CancellationToken) -> Self {
        Self {
            stdout: Some(stdout.changes()),
            stderr: Some(stderr.changes()),
            finished,
        }
    }

    /// Returns once the task wrote more or ended since it was made or last returned
    /// (at once for a finished task: its follower reads the final status and stops).
    pub async fn changed(&mut self) {
        if self.finished.is_cancelled() {
            return;
        }
        // A stream whose collector went (its task forgotten) wakes nobody again.
        async fn next(stream: &mut Option<tokio::sync::watch::Receiver<u64>>) -> bool {
            match stream {
                Some(rx) => rx.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            open = next(&mut self.stdout) => if !open { self.stdout = None },
            open = next(&mut self.stderr) => if !open { self.stderr = None },
            () = self.finished.cancelled() => {}
        }
    }
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

/// Whether `name` can be a variable of a service's own environment
/// ([`BashExecutor::start_service`]): one rule for the MCP servers' `env`, the wrapped
/// agents' and the ssh executor, which exports the variables with bash on the host. It
/// lives in `config`, which every one of them may import.
pub use crate::config::valid_env_name;

/// Largest file the file tools read (F8): bigger files are refused below the seam, not
/// loaded (an executor whose files are elsewhere would otherwise ship them whole).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// One file a file tool reads or writes, as the executor's commands would reach it
/// (E11): the path as the daemon resolved it (absolute, cleaned, unmapped) and the
/// directories the calling session may write, the same `writable_roots` its commands
/// get. Each executor answers for its own place: the local one opens the daemon's
/// disk, the sandbox decides by its own layout, ssh reads the host at the mapped path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRequest {
    pub path: PathBuf,
    pub writable_roots: Vec<PathBuf>,
}

/// What a file tool means to do with a file, for [`BashExecutor::stat_file`]'s check:
/// a write is held to more than a read (the sandbox's read-only rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileIntent {
    Read,
    Write,
}

/// What [`BashExecutor::stat_file`] found at an allowed path.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileStat {
    /// Its size in bytes.
    pub len: u64,
    /// A regular file (not a directory, device or socket).
    pub regular: bool,
    /// The entry of the executor's containment that allowed it (issue 39), where one
    /// decides (the sandbox's layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<containment::Containment>,
}

/// What [`BashExecutor::read_file`] read at an allowed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRead {
    /// The file's bytes; `None`: it does not exist.
    pub bytes: Option<Vec<u8>>,
    /// The entry of the executor's containment that allowed the read (issue 39: the
    /// audit line keeps it), where one decides; the same answer the check acted on.
    pub containment: Option<containment::Containment>,
}

/// What [`BashExecutor::write_file`] did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WriteOutcome {
    /// The file did not exist before.
    pub created: bool,
    /// The entry of the executor's containment that allowed the write, where one
    /// decides (older helpers send none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<containment::Containment>,
}

/// Why a file tool's read or write was refused or failed below the seam. The texts are
/// the model's: each says what happened and, for a refusal, what it can do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
// Externally tagged: an internally tagged enum cannot carry the newtype variants.
#[serde(rename_all = "snake_case")]
pub enum FileError {
    /// A path the sandbox masks (`[exec.sandbox] deny_read`, dsh's own directories,
    /// the host's sockets): its commands read it as empty, so the file tools refuse it.
    /// `entry` is the layout's mask that covers it.
    #[error(
        "{path}: refused: the sandbox masks this path ([exec.sandbox] deny_read, dsh's own \
         files or the host's sockets), so neither commands nor the file tools read or write it \
         there. If it is needed, call this tool again with sandbox: \"off\" and a \
         justification, so the person is asked to let this one call reach it outside the sandbox"
    )]
    Masked {
        path: PathBuf,
        entry: PathBuf,
        masked_by: containment::MaskedBy,
    },
    /// A path the sandbox keeps read-only inside a writable root (git hooks and config,
    /// `.dsh`, editor folders, shell rc files...); `entry` is the layout's entry.
    #[error(
        "{path}: refused: the sandbox keeps it read-only ({what}: what runs on the host \
         later must not be written by the session). If the change is needed, ask the person \
         to make it, or call this tool again with sandbox: \"off\" and a justification, so \
         the person is asked to let this one call write it outside the sandbox"
    )]
    Protected {
        path: PathBuf,
        entry: PathBuf,
        what: containment::Protection,
    },
    /// A write outside every writable root of the session.
    #[error(
        "{path}: refused: the sandbox writes only in {}; this path is outside them. If it \
         is needed, call this tool again with sandbox: \"off\" and a justification, so the \
         person is asked",
        containment::roots_text(.roots)
    )]
    OutsideRoots { path: PathBuf, roots: Vec<PathBuf> },
    /// A place of the sandbox's own that the file tools cannot reach (its private
    /// `/tmp`, `/proc`, `/dev`): each command's is its own and gone when it ends.
    #[error("{path}: refused: {why}")]
    NotReachable {
        path: PathBuf,
        why: String,
        place: containment::OwnPlace,
    },
    #[error("{0} is a directory; list it with bash (ls)")]
    IsDirectory(PathBuf),
    #[error("{0} is not a regular file")]
    NotRegular(PathBuf),
    #[error("{0} is not UTF-8 text")]
    NotText(PathBuf),
    #[error(
        "{path} is {len} bytes, more than the {max} the file tools read; use bash (head, sed -n, grep)",
        max = MAX_FILE_BYTES
    )]
    TooLarge { path: PathBuf, len: u64 },
    #[error("{path}: the directory {dir} does not exist")]
    NoDirectory { path: PathBuf, dir: PathBuf },
    #[error("{path}: {reason}")]
    Io { path: PathBuf, reason: String },
    /// The executor cannot reach the file at all (a remote host down, a path without
    /// file access).
    #[error("{0}")]
    Unavailable(String),
}

impl FileError {
    /// The layout entry that refused the access, when the sandbox's containment did
    /// (issue 39: the audit line and `dsh policy explain` name it as data).
    pub fn containment(&self) -> Option<containment::Containment> {
        use containment::Containment;
        Some(match self {
            FileError::Masked {
                entry, masked_by, ..
            } => Containment::Masked {
                entry: entry.clone(),
                masked_by: *masked_by,
            },
            FileError::Protected { entry, what, .. } => Containment::Protected {
                entry: entry.clone(),
                what: *what,
            },
            FileError::OutsideRoots { roots, .. } => Containment::OutsideRoots {
                roots: roots.clone(),
            },
            FileError::NotReachable { place, .. } => Containment::NotReachable {
                entry: None,
                place: *place,
            },
            _ => return None,
        })
    }
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
///
/// No method has a default body (but [`BashExecutor::running`], which only filters
/// [`BashExecutor::list`]): the decorators (`escalation::Escalating`, the ssh executor)
/// forward each method by hand, and a default would be taken silently by one that
/// forgot it; without defaults, it does not compile (D7, held by
/// `tests::d7_the_executor_seam_has_no_default_bodies_a_decorator_could_miss`).
#[async_trait::async_trait]
pub trait BashExecutor: Send + Sync + 'static {
    /// A short name for status output ("local", "sandbox", "ssh").
    fn kind(&self) -> &'static str;

    /// The executor that runs a command outside this one's containment, for a call the
    /// person (or a rule naming its command) let out of it (issue 27; see
    /// [`escalation`]). Only the daemon's sandbox has one; `None` means a request to
    /// leave changes nothing here. Its tasks are this executor's too: `get`, `read`,
    /// `kill`, scopes, completions and `shutdown` reach them.
    fn outside(&self) -> Option<Arc<dyn BashExecutor>>;

    /// Who judges the connections its commands make through dsh's network proxy
    /// (E10): only the sandbox has one; the daemon sets it once its tools exist.
    fn set_connection_judge(&self, judge: Arc<dyn netproxy::ConnectionJudge>);

    /// The connections its commands hold open through dsh's network proxy now, by
    /// the task (or foreground call) that holds them: what `dsh status` lists.
    fn proxied_connections(&self) -> Vec<(String, usize)>;

    /// Applies defaults and caps: the returned spec has an explicit workdir and
    /// timeout (T2). Checking that the workdir exists happens when it runs.
    fn resolve(&self, request: ExecRequest) -> ExecSpec;

    /// Runs a foreground command to its end, its timeout, or `cancel` (E1).
    async fn run(&self, spec: ExecSpec, cancel: CancellationToken)
    -> Result<RunOutcome, ExecError>;

    /// [`BashExecutor::run`], handing every chunk of output to `watch` as it arrives.
    /// An executor that cannot stream runs it as `run`: the output is then seen only in
    /// the result, which is the same either way.
    async fn run_watched(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
        watch: OutputWatch,
    ) -> Result<RunOutcome, ExecError>;

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

    /// Follows a task: wakes on its every new output and on its end (see
    /// [`TaskChanges`]). `None`: no such task.
    fn task_changes(&self, id: TaskId) -> Option<TaskChanges>;

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
    fn recover(&self) -> Vec<RecoveredTask>;

    /// Starts `spec.command` as a [`ServiceProcess`]: no timeout, stdin a pipe, ended
    /// by [`ServiceProcess::stop`], by dropping it, by `kill_scope` of its scope or by
    /// shutdown. Executors that cannot pass stdin through refuse.
    /// `env` is the program's own environment on top of the filtered one (an MCP
    /// server's `env`, often a token): passed in the process environment, never on a
    /// command line where `ps` would show it (over ssh it goes first on the channel's
    /// stdin, and the host's wrapper exports it: `Launcher::service_command`; there a
    /// name that is not [`valid_env_name`] is refused, as its callers refuse it first).
    async fn start_service(
        &self,
        spec: ExecSpec,
        env: Vec<(String, String)>,
    ) -> Result<ServiceProcess, ExecError>;

    /// Lets every running background task go without ending it, for `dsh upgrade`:
    /// their supervisors stop, their output pipes stop being read (what is in them
    /// waits there), and each comes back as a [`HandedTask`] for
    /// [`BashExecutor::adopt_tasks`] (in the next program, or in this one when the
    /// upgrade fails). While any running task is one it cannot carry
    /// ([`BashExecutor::tasks_kept`]) it refuses, letting go of nothing.
    async fn let_go_tasks(&self) -> Result<Vec<HandedTask>, CannotCarry>;

    /// The running tasks [`BashExecutor::let_go_tasks`] cannot carry (an upgrade is
    /// refused while one runs): all of them under an executor whose commands hold state
    /// of its own (the sandbox's proxy and tripwires, the ssh helper), none under one
    /// whose commands are their host processes alone (local).
    fn tasks_kept(&self) -> Vec<TaskInfo>;

    /// Supervises again tasks [`BashExecutor::let_go_tasks`] let go, from their
    /// records and output files: they run on, and are read, killed, listed and
    /// reported as before. A task that cannot be taken is ended by its mark and
    /// reported lost; each comes back with how it was taken. One that carries none
    /// takes none.
    fn adopt_tasks(&self, tasks: Vec<HandedTask>) -> Vec<(TaskInfo, Result<(), String>)>;

    /// Kills everything (E3) and waits until it is gone. New work is refused.
    async fn shutdown(&self);

    // File access (E11). The file tools reach files only through these, so each
    // executor answers for its own place under the containment its commands get.

    /// Whether its files are this machine's, at the paths the daemon sees: only then
    /// may the editor's `fs` (unsaved buffers) stand in for them, after
    /// [`BashExecutor::stat_file`] allowed the path.
    fn files_are_local(&self) -> bool;

    /// Checks that a file tool may `intent` the file, and what is there (`None`:
    /// nothing yet).
    async fn stat_file(
        &self,
        request: &FileRequest,
        intent: FileIntent,
    ) -> Result<Option<FileStat>, FileError>;

    /// The file's bytes (`None`: it does not exist), at most [`MAX_FILE_BYTES`], and
    /// what of the containment allowed the read.
    async fn read_file(&self, request: &FileRequest) -> Result<FileRead, FileError>;

    /// Which entry of its containment decides whether a file tool may `intent` the
    /// file (issue 39), by the check [`BashExecutor::stat_file`] acts on, with nothing
    /// opened: what `_dsh/policy/explain` shows (a call's own answer comes back with
    /// its result). `None` where nothing contains files (local) or where the executor
    /// does not say (ssh: the helper on the host is not asked this).
    async fn file_containment(
        &self,
        request: &FileRequest,
        intent: FileIntent,
    ) -> Result<Option<containment::Containment>, FileError>;

    /// Replaces the file's content atomically (a new file beside it, renamed over it,
    /// its mode kept), or creates it in an existing directory.
    async fn write_file(
        &self,
        request: &FileRequest,
        content: &[u8],
    ) -> Result<WriteOutcome, FileError>;

    /// The spill files (on this host) of the tasks still running: the state
    /// directory's sweep never removes them (`crate::state_dir`). An executor whose
    /// files live elsewhere (the ssh helper's, on the remote host) names none.
    fn spill_files_in_use(&self) -> Vec<PathBuf>;
}

/// Why [`BashExecutor::let_go_tasks`] let nothing go: tasks run that the executor of
/// `kind` cannot carry over an upgrade. The upgrade is refused with it (its text is what
/// `dsh upgrade` prints), and the tasks run on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} background task(s) still run ({}) and the {kind} executor cannot carry running \
     tasks over an upgrade; let them finish or kill them (`dsh kill ID`), then upgrade",
    .tasks.len(),
    ids(.tasks)
)]
pub struct CannotCarry {
    /// The executor that cannot carry them (`sandbox`, `ssh`).
    pub kind: &'static str,
    /// The tasks it keeps, oldest first.
    pub tasks: Vec<TaskId>,
}

impl CannotCarry {
    /// `Err` naming `kept` when any is there (what [`BashExecutor::tasks_kept`] said).
    pub fn check(kind: &'static str, kept: &[TaskInfo]) -> Result<(), CannotCarry> {
        if kept.is_empty() {
            return Ok(());
        }
        Err(CannotCarry {
            kind,
            tasks: kept.iter().map(|t| t.id).collect(),
        })
    }
}

/// `a, b, c`: the ids [`CannotCarry`] names.
fn ids(tasks: &[TaskId]) -> String {
    tasks
        .iter()
        .map(TaskId::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    /// D7: a decorator (`Escalating`, `SshExecutor`) forwards each method of the seam by
    /// hand, so a method with a default body would be silently skipped there: a new
    /// one would take its default in every decorator that forgot it. The trait has no
    /// default bodies (but `running`, which only filters `list`), so every implementor
    /// names every method or does not compile; this keeps one from being added back.
    #[test]
    fn d7_the_executor_seam_has_no_default_bodies_a_decorator_could_miss() {
        const DERIVED: &[&str] = &["running"];
        let code = include_str!("mod.rs");
        let start = code
            .find("pub trait BashExecutor")
            .expect("the trait is in exec/mod.rs");
        let end = start + code[start..].find("\n}\n").expect("the trait ends");
        let lines: Vec<&str> = code[start..end].lines().collect();
        let mut with_bodies = Vec::new();
        let mut methods = 0;
        for (i, line) in lines.iter().enumerate() {
            let Some(rest) = line
                .strip_prefix("    fn ")
                .or_else(|| line.strip_prefix("    async fn "))
            else {
                continue;
            };
            methods += 1;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let ends = lines[i..]
                .iter()
                .map(|l| l.trim_end())
                .find(|l| l.ends_with(';') || l.ends_with('{'))
                .expect("a method's signature ends");
            if ends.ends_with('{') && !DERIVED.contains(&name.as_str()) {
                with_bodies.push(name);
            }
        }
        assert!(methods > 20, "the trait's methods were found ({methods})");
        assert!(
            with_bodies.is_empty(),
            "methods of BashExecutor with a default body, which a decorator would skip \
             silently: {with_bodies:?}"
        );
    }
}
