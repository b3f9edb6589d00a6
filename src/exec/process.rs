//! The process engine every executor shares: tasks, timeouts, output, completions.
//!
//! An executor kind (local, sandbox, ssh) differs only in how a command becomes a
//! process on this machine and how that command's processes are found and ended;
//! that is its [`Launcher`]. Everything the model can observe (ids, output bounds,
//! spill files, statuses, the order of cleanup) lives here once, so the kinds cannot
//! drift apart.
//!
//! Every command's host process is the leader of a new session with stdin from
//! /dev/null, a filtered environment (E4) and a marker variable (see `procs`). One
//! supervisor per command waits for the first of: the main process exiting, the
//! timer, or a stop request; then it cleans up by the rules of E3:
//!
//! * normal exit: wait up to `drain_ms` for stdout/stderr to close, then let the
//!   launcher end what is left of the command (local: its process session; plain
//!   `cmd &`). Processes that detached on purpose are left running, remembered by
//!   their marker, and ended by `kill`, `kill_scope` or `shutdown`;
//! * timeout, kill, cancel, shutdown: the launcher's `stop`: SIGTERM to everything
//!   of the command, SIGKILL after `kill_grace_ms`, until nothing is left.

use super::children;
use super::collector::{Collector, Spill, SpillTarget};
use super::ids::{TaskId, TaskIds};
use super::outfiles;
use super::procs::{self, MARK_VAR, Selector};
use super::records::{LOST_REASON, RecordState, TaskRecord, TaskRecords};
use super::retention::Retention;
use super::spawn::{self, HostProcess, SpawnSpec};
use super::{
    BashExecutor, ExecError, ExecRequest, ExecSpec, FileError, FileIntent, FileRequest, FileStat,
    HandedTask, KillOutcome, OutputStream, OutputWatch, RecoveredTask, RunOutcome, Scope,
    ServiceHandle, ServiceProcess, TaskInfo, TaskRead, TaskStatus, WriteOutcome,
};
use crate::config::ExecConfig;
use crate::fsutil::ensure_private_dir;
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How one executor kind turns a command into a process on this machine and ends
/// what it started. The engine adds the marker, environment, stdio and the new
/// session to the command a launcher builds, and calls the launcher's cleanup at the
/// right moments.
#[async_trait::async_trait]
pub trait Launcher: Send + Sync + 'static {
    /// A short name for status output ("local", "sandbox", "ssh").
    fn kind(&self) -> &'static str;

    /// Whether the host process's exit status is the command's own. A wrapper that
    /// reports a signal death as exit code 128+n (bwrap, ssh) makes it inexact; the
    /// engine then reads 128+n as that signal when it had stopped the command.
    fn exact_status(&self) -> bool {
        true
    }

    /// Checks that `dir` can be the command's working directory.
    async fn check_workdir(&self, dir: &Path) -> Result<(), ExecError>;

    /// The host program that runs `spec`; `mark` is the command's marker, for
    /// launchers that must pass it on (a remote host does not inherit environments).
    /// Only the program, its arguments and the working directory are used: the
    /// engine sets the environment, stdio and session and starts it with
    /// `spawn::spawn` (a `Command` because the ssh launcher builds its other calls,
    /// which it runs itself, the same way).
    fn command(&self, spec: &ExecSpec, mark: &str) -> Result<Command, ExecError>;

    /// The host program that runs `spec` as a server spoken to over stdin and stdout
    /// ([`BashExecutor::start_service`]); a launcher whose command closes stdin refuses.
    /// `env` is the server's own environment: returned to be set on the host process
    /// (the default), or put into the command by a launcher that cannot pass it on.
    fn service_command(
        &self,
        spec: &ExecSpec,
        mark: &str,
        env: &[(String, String)],
    ) -> Result<(Command, Vec<(OsString, OsString)>), ExecError> {
        let env = env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect();
        Ok((self.command(spec, mark)?, env))
    }

    /// Ends one command: everything marked `mark` or in session `sid` (the host
    /// process's), SIGTERM first, SIGKILL after `grace`, until none is left.
    async fn stop(&self, mark: &str, sid: Option<i32>, grace: Duration) {
        procs::terminate(
            Selector::Task {
                mark: mark.to_string(),
                sid,
            },
            grace,
        )
        .await;
    }

    /// After the host process exited by itself: ends what is left in its session,
    /// leaving processes that detached on purpose. `mark` is the command's marker.
    /// Returns what the command's output should end with (lines the launcher has to
    /// tell about what the command left; a sandbox's tripwires).
    async fn after_exit(&self, _mark: &str, sid: i32, grace: Duration) -> Vec<String> {
        // The common case, nothing left anywhere, is told by the daemon's own
        // children instead of a pass over /proc (`children`).
        if super::children::leftovers_possible() {
            procs::terminate(Selector::Session(sid), grace).await;
        }
        Vec::new()
    }

    /// Ends everything whose marker starts with `prefix` (one scope, or all).
    async fn stop_prefix(&self, prefix: &str, grace: Duration) {
        procs::terminate(Selector::MarkPrefix(prefix.to_string()), grace).await;
    }

    /// Called when the host process exited by itself with `exit_code`: a message
    /// when that exit means the command was lost rather than finished (ssh: the
    /// connection dropped). The task is then reported killed, with the message in
    /// its stderr.
    async fn lost(&self, exit_code: Option<i32>, mark: &str) -> Option<String> {
        let _ = (exit_code, mark);
        None
    }

    /// Descriptors the host process of `mark` must inherit (the sandbox's seccomp
    /// program, read by bwrap), set aside by [`Launcher::command`] or
    /// [`Launcher::service_command`]; taken once, closed here once it started.
    fn inherited(&self, mark: &str) -> Vec<std::os::fd::OwnedFd> {
        let _ = mark;
        Vec::new()
    }

    /// The host process of `mark`, whose command line [`Launcher::command`] built,
    /// could not be started: what the launcher set aside for it can go.
    fn never_started(&self, mark: &str) {
        let _ = mark;
    }

    /// The host process of `mark` started, as process `pid`. A launcher whose
    /// process waits for something of the daemon's before it runs the command (the
    /// sandbox's network proxy, made in the sandbox's own network namespace) provides
    /// it here. An error stops the command and is its result.
    async fn started(&self, mark: &str, pid: i32) -> Result<(), String> {
        let _ = (mark, pid);
        Ok(())
    }

    /// Who judges the connections of commands whose network goes through dsh's
    /// proxy (the sandbox's); others have none to judge.
    fn set_connection_judge(&self, judge: Arc<dyn crate::exec::netproxy::ConnectionJudge>) {
        let _ = judge;
    }

    /// Connections its commands hold open through dsh's network proxy, by task or
    /// call id ([`BashExecutor::proxied_connections`]).
    fn proxied_connections(&self) -> Vec<(String, usize)> {
        Vec::new()
    }

    /// The last step of shutdown, once every command is gone.
    async fn close(&self) {}

    /// Whether a running command of this kind can be let go by one daemon program and
    /// supervised again by the next (`dsh upgrade`): true when its host process is all
    /// there is to it (local); a launcher that keeps per-command state of its own (the
    /// sandbox's proxy and tripwires, the ssh helper) cannot.
    fn carries_tasks(&self) -> bool {
        false
    }

    // File access (E11): what `BashExecutor`'s file methods ask of the executor's
    // place. No defaults, so each launcher says where its files are.

    /// See [`BashExecutor::files_are_local`].
    fn files_are_local(&self) -> bool;

    /// See [`BashExecutor::stat_file`].
    async fn stat_file(
        &self,
        request: &FileRequest,
        intent: FileIntent,
    ) -> Result<Option<FileStat>, FileError>;

    /// See [`BashExecutor::read_file`].
    async fn read_file(&self, request: &FileRequest) -> Result<Option<Vec<u8>>, FileError>;

    /// See [`BashExecutor::write_file`].
    async fn write_file(
        &self,
        request: &FileRequest,
        content: &[u8],
    ) -> Result<WriteOutcome, FileError>;

    /// Where a command of this launcher reads the spill file `local` (on this
    /// machine): the path itself where commands run here. A launcher whose commands
    /// run on another host copies the file there and returns its path there, since
    /// the model's next command can open only that (issue 32).
    async fn publish_spill(&self, local: &Path) -> Result<PathBuf, String> {
        Ok(local.to_path_buf())
    }
}

/// Runs commands through a [`Launcher`]; see the module docs for the lifecycle.
pub struct ProcessExecutor<L: Launcher> {
    inner: Arc<Inner<L>>,
}

struct Inner<L> {
    launcher: L,
    default_timeout_ms: u64,
    max_timeout_ms: u64,
    max_output_bytes: usize,
    grace: Duration,
    drain: Duration,
    fallback_cwd: PathBuf,
    state_dir: PathBuf,
    spill_dir: PathBuf,
    ids: TaskIds,
    /// This executor's instance (in its marks and its runs' file names).
    instance: String,
    /// Set by `recover`: from then on each task is recorded on disk (`records`).
    records: std::sync::OnceLock<TaskRecords>,
    /// Cancelled by [`BashExecutor::let_go_tasks`]: every background supervisor lets its
    /// task go. Replaced by a fresh one when tasks are adopted again.
    let_go: Mutex<CancellationToken>,
    /// Where each running background task's supervisor hands it over when let go.
    handing: Mutex<HashMap<u64, oneshot::Receiver<HandedTask>>>,
    /// Prefix of every marker this executor hands out: `<state tag>:<instance>:`,
    /// so `shutdown` can find everything it ever started, and a later executor on
    /// the same state directory can find what a crashed one left running.
    mark_prefix: String,
    seq: AtomicU64,
    env: Vec<(OsString, OsString)>,
    tasks: Mutex<BTreeMap<u64, Arc<Task>>>,
    /// Which finished tasks keep their output tails (see `retention`). Its lock is
    /// held while a task's status becomes final, so a read that sees the final
    /// status finds the task booked.
    retention: Mutex<Retention>,
    /// What a finished task that was read to its end keeps instead of its own
    /// collectors and tokens (see `compact`): one empty closed stream and one
    /// cancelled token, shared, so such a task costs little more than its strings.
    drained: (Arc<Collector>, CancellationToken),
    /// Dropped at the end of shutdown, so the consumer sees the stream end once
    /// every last completion is in it.
    completions_tx: Mutex<Option<mpsc::UnboundedSender<TaskInfo>>>,
    completions_rx: Mutex<Option<mpsc::UnboundedReceiver<TaskInfo>>>,
    shutdown: CancellationToken,
    shutting_down: AtomicBool,
    supervisors: TaskTracker,
}

/// What a supervisor needs to know about one command, foreground or background.
struct Job {
    mark: String,
    scope: Option<Scope>,
    stdout: Arc<Collector>,
    stderr: Arc<Collector>,
    /// Who sees the output live (foreground runs only); `None` costs nothing.
    watch: Option<OutputWatch>,
}

struct Task {
    id: TaskId,
    command: String,
    workdir: PathBuf,
    started_at: SystemTime,
    job: Job,
    status: Mutex<TaskStatus>,
    /// Cancelled to ask the supervisor to kill the task.
    stop: CancellationToken,
    /// Cancelled once the status is final.
    finished: CancellationToken,
}

impl Task {
    fn info(&self) -> TaskInfo {
        TaskInfo {
            id: self.id,
            command: self.command.clone(),
            workdir: self.workdir.clone(),
            scope: self.job.scope.clone(),
            status: *lock(&self.status),
            started_at: self.started_at,
        }
    }

    /// Gives back the memory of both output tails; what was not read by then is
    /// reported as dropped by later reads (T9).
    fn release_output(&self) {
        self.job.stdout.release();
        self.job.stderr.release();
    }

    /// Bytes the task's output holds in memory.
    fn output_heap_bytes(&self) -> usize {
        self.job.stdout.heap_bytes() + self.job.stderr.heap_bytes()
    }
}

/// How the main process of a command ended, as seen by its supervisor.
struct Ended {
    exit_code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    stopped: bool,
    /// The command was lost, not finished (see [`Launcher::lost`]); the message says how.
    lost: Option<String>,
}

impl<L: Launcher> ProcessExecutor<L> {
    /// An executor running commands through `launcher`, whose host processes inherit
    /// `base_env` filtered by E4 (the daemon passes its own environment; tests pass
    /// one to prove the filter).
    pub fn with_launcher(
        config: &ExecConfig,
        base_env: impl IntoIterator<Item = (OsString, OsString)>,
        launcher: L,
    ) -> std::io::Result<Self> {
        let state_dir = config.state_dir();
        ensure_private_dir(&state_dir)?;
        let spill_dir = outfiles::dir(&state_dir);
        ensure_private_dir(&spill_dir)?;
        let fallback_cwd = match &config.cwd {
            Some(cwd) => cwd.clone(),
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        };
        let (completions_tx, completions_rx) = mpsc::unbounded_channel();
        let tag = procs::state_tag(&state_dir);
        let instance = uuid::Uuid::new_v4().simple().to_string();
        let mark_prefix = format!("{tag}:{}:{instance}:", procs::own_identity());
        sweep_stale(&tag);
        Ok(Self {
            inner: Arc::new(Inner {
                launcher,
                default_timeout_ms: config.default_timeout_ms,
                max_timeout_ms: config.max_timeout_ms,
                max_output_bytes: config.max_output_bytes,
                grace: Duration::from_millis(config.kill_grace_ms),
                drain: Duration::from_millis(config.drain_ms),
                fallback_cwd,
                spill_dir,
                ids: TaskIds::new(&state_dir),
                state_dir,
                instance,
                records: std::sync::OnceLock::new(),
                let_go: Mutex::new(CancellationToken::new()),
                handing: Mutex::new(HashMap::new()),
                mark_prefix,
                seq: AtomicU64::new(0),
                env: child_env(base_env),
                tasks: Mutex::new(BTreeMap::new()),
                retention: Mutex::new(Retention::new(config.finished_output_bytes)),
                drained: {
                    let stream = Arc::new(Collector::new(0, None));
                    stream.close();
                    let done = CancellationToken::new();
                    done.cancel();
                    (stream, done)
                },
                completions_tx: Mutex::new(Some(completions_tx)),
                completions_rx: Mutex::new(Some(completions_rx)),
                shutdown: CancellationToken::new(),
                shutting_down: AtomicBool::new(false),
                supervisors: TaskTracker::new(),
            }),
        })
    }
}

/// The environment of every command (E4): the base without anything that looks
/// like a credential, plus settings that keep tools from waiting for a person.
/// A remote launcher applies the same rule on the far side. The denylist's words
/// match anywhere in the name, in any case; `PWD` takes `PWD` and `OLDPWD` with it
/// (they name the daemon's directories, not the command's, and bash sets `PWD`
/// to the command's own working directory anyway). `AUTH` takes `SSH_AUTH_SOCK`
/// and `XAUTHORITY` (a way to use the person's keys or display is a credential
/// too) and `GIT_AUTHOR_*` (git falls back to its config): the closed side.
pub(crate) fn child_env(
    base: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    const FORCED: [(&str, &str); 5] = [
        ("NO_COLOR", "1"),
        ("TERM", "dumb"),
        ("PAGER", "cat"),
        ("GIT_PAGER", "cat"),
        ("GIT_TERMINAL_PROMPT", "0"),
    ];
    let mut env: Vec<(OsString, OsString)> = base
        .into_iter()
        .filter(|(name, _)| {
            let upper = name.to_string_lossy().to_ascii_uppercase();
            // `_PAT` (a personal access token) only as a whole word: `GITHUB_PAT`,
            // `GH_PAT_2`, never `LD_LIBRARY_PATH`.
            let pat = upper
                .match_indices("_PAT")
                .any(|(at, _)| matches!(upper.as_bytes().get(at + 4), None | Some(b'_')));
            !pat && ![
                "KEY",
                "SECRET",
                "TOKEN",
                "PASS",
                "PWD",
                "CREDENTIAL",
                "AUTH",
            ]
            .iter()
            .any(|w| upper.contains(w))
                && upper != MARK_VAR
                && !FORCED.iter().any(|(f, _)| *f == upper)
        })
        .collect();
    env.extend(
        FORCED
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    env
}

/// Kills what an earlier daemon on this state directory left running when it died
/// without its shutdown (its marker names a process that no longer exists). Runs
/// before this executor starts anything.
fn sweep_stale(tag: &str) {
    let selector = Selector::Stale {
        prefix: format!("{tag}:"),
    };
    for round in 0..50 {
        let left = procs::find(&selector);
        if left.is_empty() {
            return;
        }
        if round == 0 {
            tracing::warn!(
                count = left.len(),
                "killing processes left by a daemon that died"
            );
        }
        procs::signal_all(&left, nix::sys::signal::Signal::SIGKILL);
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether `path` exists and is a directory on this machine.
pub(crate) fn check_local_workdir(path: &Path) -> Result<(), ExecError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(ExecError::WorkdirNotDirectory(path.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(ExecError::WorkdirMissing(path.to_path_buf()))
        }
        Err(e) => Err(ExecError::WorkdirUnusable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }),
    }
}

/// Milliseconds since the Unix epoch.
fn millis(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// Ends every process carrying `mark` (a task whose daemon is gone); what the stale
/// sweep left, since it ends only processes of owners that are dead, and a record
/// can be older than its owner's end. By the mark alone: the task's session id may
/// belong to another process by now.
fn end_marked(mark: &str) {
    let selector = Selector::Task {
        mark: mark.to_string(),
        sid: None,
    };
    for _ in 0..50 {
        let left = procs::find(&selector);
        if left.is_empty() {
            return;
        }
        procs::signal_all(&left, nix::sys::signal::Signal::SIGKILL);
        std::thread::sleep(Duration::from_millis(5));
    }
    tracing::warn!(mark, "processes of a lost task survived SIGKILL");
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<L: Launcher> Inner<L> {
    /// A fresh marker for a command of `scope`: `<prefix><scope in hex>/<n>`. The
    /// scope is part of the marker so that `kill_scope` finds everything a
    /// session's commands left behind with one scan, and nothing has to be
    /// remembered (or scanned for) when a command exits.
    fn next_mark(&self, scope: Option<&Scope>) -> (String, u64) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        (format!("{}{seq}", self.scope_prefix(scope)), seq)
    }

    fn scope_prefix(&self, scope: Option<&Scope>) -> String {
        let hex: String = scope
            .map(|s| s.bytes().map(|b| format!("{b:02x}")).collect())
            .unwrap_or_default();
        format!("{}{hex}/", self.mark_prefix)
    }

    /// A stream's collector writing to `file_name` (`outfiles`): from the first byte
    /// for a background task, from the first overflow for a foreground run.
    fn collector(&self, file_name: String, from_first_byte: bool) -> Arc<Collector> {
        Arc::new(Collector::new(
            self.max_output_bytes,
            Some(SpillTarget {
                dir: self.spill_dir.clone(),
                file_name,
                from_first_byte,
            }),
        ))
    }

    fn spawn(&self, spec: &ExecSpec, mark: &str) -> Result<HostProcess, ExecError> {
        let cmd = self.launcher.command(spec, mark)?;
        self.spawn_command(cmd, mark, false, Vec::new())
    }

    fn spawn_command(
        &self,
        cmd: Command,
        mark: &str,
        stdin_pipe: bool,
        extra_env: Vec<(OsString, OsString)>,
    ) -> Result<HostProcess, ExecError> {
        let cmd = cmd.as_std();
        let mut env = self.env.clone();
        env.retain(|(k, _)| !extra_env.iter().any(|(e, _)| e == k));
        env.extend(extra_env);
        env.push((MARK_VAR.into(), mark.into()));
        let inherited = self.launcher.inherited(mark);
        spawn::spawn(&SpawnSpec {
            program: cmd.get_program().to_os_string(),
            args: cmd.get_args().map(|a| a.to_os_string()).collect(),
            env,
            cwd: cmd.get_current_dir().map(Path::to_path_buf),
            stdin_pipe,
            inherit: inherited.iter().map(|fd| fd.as_raw_fd()).collect(),
        })
        .map_err(|e| {
            self.launcher.never_started(mark);
            ExecError::Spawn(e.to_string())
        })
    }

    /// The launcher's last step before the command runs ([`Launcher::started`]); when it
    /// fails, the command is ended and this is how it ended. It runs to its end
    /// (the launcher bounds it) even when the command is stopped meanwhile: the stop
    /// then meets a command that runs, and ends it as it ends any (a task killed as
    /// it starts reports SIGTERM, not the SIGKILL a half-made sandbox would need).
    async fn prepare(&self, child: &mut HostProcess, job: &Job) -> Option<Ended> {
        let mark = job.mark.as_str();
        let pid = child.id();
        let why = self.launcher.started(mark, pid).await.err()?;
        self.launcher.stop(mark, Some(pid), self.grace).await;
        let _ = child.wait().await;
        job.stderr.push(format!("dsh: {why}\n").as_bytes());
        job.stdout.close();
        job.stderr.close();
        Some(Ended {
            exit_code: None,
            signal: None,
            timed_out: false,
            stopped: false,
            lost: Some(why),
        })
    }

    /// Waits for the command to end by itself, by its timer or by `stop`, and
    /// cleans up everything it started by the rules in the module docs. With
    /// `let_go`, its cancellation ends the supervision instead, leaving the command
    /// running: its host process and unread pipes come back as [`LetGo`].
    async fn supervise(
        &self,
        mut child: HostProcess,
        job: &Job,
        timeout: Option<Duration>,
        stop: &CancellationToken,
        let_go: Option<&CancellationToken>,
    ) -> Result<Ended, LetGo> {
        let mark = job.mark.as_str();
        let (out, err) = (job.stdout.clone(), job.stderr.clone());
        let watch = job.watch.clone();
        let sid = Some(child.id());
        if let Some(ended) = self.prepare(&mut child, job).await {
            return Ok(ended);
        }
        let abort = CancellationToken::new();
        let release = CancellationToken::new();
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let mut readers = tokio::spawn({
            let (abort, release) = (abort.clone(), release.clone());
            async move {
                tokio::join!(
                    pump(
                        stdout,
                        out,
                        abort.clone(),
                        release.clone(),
                        watch.clone().map(|w| (w, OutputStream::Stdout))
                    ),
                    pump(
                        stderr,
                        err,
                        abort,
                        release,
                        watch.map(|w| (w, OutputStream::Stderr))
                    )
                )
            }
        });
        let let_go = async {
            match let_go {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let mut readers_done = false;
        let timer = async {
            match timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        let (mut timed_out, mut stopped) = (false, false);
        let exited = tokio::select! {
            status = child.wait() => {
                // Shutdown signals every command at once, before it tells the
                // supervisors: an exit then is the shutdown's doing.
                stopped = self.shutting_down.load(Ordering::SeqCst);
                if let Err(e) = &status {
                    tracing::error!(mark, "cannot wait for the command's process: {e}");
                }
                status.ok()
            }
            () = timer => { timed_out = true; None }
            () = stop.cancelled() => { stopped = true; None }
            () = let_go => {
                // The pumps stop at once and give their pipes back: what is in them
                // stays there for the next reader, nothing is read twice.
                release.cancel();
                let (stdout, stderr) = readers.await.unwrap_or_default();
                return Err(LetGo { child, stdout, stderr });
            }
        };
        let status = match exited {
            Some(status) => {
                readers_done = tokio::time::timeout(self.drain, &mut readers).await.is_ok();
                // What detached on purpose stays (and carries the marker, for kill,
                // kill_scope and shutdown); the rest of the command goes.
                if let Some(sid) = sid {
                    for note in self.launcher.after_exit(mark, sid, self.grace).await {
                        job.stderr.push(format!("dsh: {note}\n").as_bytes());
                    }
                }
                Some(status)
            }
            None => {
                self.launcher.stop(mark, sid, self.grace).await;
                child.wait().await.ok()
            }
        };
        abort.cancel();
        if !readers_done {
            let _ = readers.await;
        }
        use std::os::unix::process::ExitStatusExt;
        let mut exit_code = status.and_then(|s| s.code());
        let mut signal = status.and_then(|s| s.signal());
        let mut lost = None;
        if timed_out || stopped {
            // A wrapper reports the signal that ended the command as 128+n; when we
            // were the ones stopping it, that is what the number means.
            if !self.launcher.exact_status()
                && let Some(code) = exit_code.filter(|c| (129..=128 + 64).contains(c))
            {
                (exit_code, signal) = (None, Some(code - 128));
            }
        } else if let Some(message) = self.launcher.lost(exit_code, mark).await {
            job.stderr.push(format!("{message}\n").as_bytes());
            lost = Some(message);
        }
        job.stdout.close();
        job.stderr.close();
        Ok(Ended {
            exit_code,
            signal,
            timed_out,
            stopped,
            lost,
        })
    }

    /// Makes `status` final (both streams are closed by then) and books the task's
    /// tails, releasing those of older finished tasks that no longer fit.
    fn finish(&self, task: &Task, status: TaskStatus) {
        if let Some(records) = self.records.get() {
            records.remove(task.id);
        }
        let release = {
            let mut book = lock(&self.retention);
            *lock(&task.status) = status;
            book.finished(task.id.number(), task.output_heap_bytes())
        };
        for number in release {
            let old = lock(&self.tasks).get(&number).cloned();
            if let Some(old) = old {
                old.release_output();
            }
        }
        task.finished.cancel();
        // The receiver may be gone (nobody routes notices): that loses nothing.
        if let Some(tx) = lock(&self.completions_tx).as_ref() {
            let _ = tx.send(task.info());
        }
    }

    /// Replaces a finished task that was read to its end by a record of what is
    /// still asked of it (its info, final status and marker, for `kill` of what it
    /// left detached), sharing one drained stream and one cancelled token: ids
    /// answer for the daemon's life (T7, T12) and each must cost little.
    fn compact(&self, task: &Arc<Task>) {
        let (stream, done) = &self.drained;
        let record = Arc::new(Task {
            id: task.id,
            command: task.command.clone(),
            workdir: task.workdir.clone(),
            started_at: task.started_at,
            job: Job {
                mark: task.job.mark.clone(),
                scope: task.job.scope.clone(),
                stdout: stream.clone(),
                stderr: stream.clone(),
                watch: None,
            },
            status: Mutex::new(*lock(&task.status)),
            stop: done.clone(),
            finished: done.clone(),
        });
        lock(&self.tasks).insert(task.id.number(), record);
    }

    /// Names each spilled stream of a finished command where the session's commands
    /// can open it ([`Launcher::publish_spill`]; here, the file itself).
    async fn publish_spills(&self, job: &Job) {
        for stream in [&job.stdout, &job.stderr] {
            if let Spill::Written(local) = stream.spill() {
                let shown = self.launcher.publish_spill(&local).await;
                if let Err(why) = &shown {
                    tracing::warn!(file = %local.display(), "cannot show the spill file: {why}");
                }
                stream.publish(shown);
            }
        }
    }

    /// Writes a running task's record (once `recover` turned records on). A record
    /// that cannot be written costs only the report after a crash: the task runs.
    fn record(&self, task: &Task, pid: i32) {
        let Some(records) = self.records.get() else {
            return;
        };
        let record = TaskRecord {
            version: super::records::RECORD_VERSION,
            id: task.id,
            scope: task.job.scope.clone(),
            command: task.command.clone(),
            workdir: task.workdir.clone(),
            started_at_ms: millis(task.started_at),
            executor: self.launcher.kind().to_string(),
            stdout: self
                .spill_dir
                .join(outfiles::task_file_name(task.id, OutputStream::Stdout)),
            stderr: self
                .spill_dir
                .join(outfiles::task_file_name(task.id, OutputStream::Stderr)),
            pid,
            mark: task.job.mark.clone(),
            held_by: procs::own_identity(),
            state: RecordState::Running,
        };
        if let Err(e) = records.save(&record) {
            tracing::warn!(id = %task.id, "cannot record the task: {e}");
        }
    }

    /// A task of an earlier daemon, from its record: finished, `Lost`, its output the
    /// files it wrote.
    fn lost_task(&self, record: &TaskRecord) -> Arc<Task> {
        let (_, done) = &self.drained;
        let stream =
            |path: &Path| Arc::new(Collector::recovered(self.max_output_bytes, path.into()));
        Arc::new(Task {
            id: record.id,
            command: record.command.clone(),
            workdir: record.workdir.clone(),
            started_at: SystemTime::UNIX_EPOCH + Duration::from_millis(record.started_at_ms),
            job: Job {
                mark: record.mark.clone(),
                scope: record.scope.clone(),
                stdout: stream(&record.stdout),
                stderr: stream(&record.stderr),
                watch: None,
            },
            status: Mutex::new(TaskStatus::Lost),
            stop: done.clone(),
            finished: done.clone(),
        })
    }

    /// Supervises a background task until it ends (then its status is final) or an
    /// upgrade lets it go (then it leaves this executor as a [`HandedTask`], running).
    fn supervise_background(self: &Arc<Self>, task: Arc<Task>, child: HostProcess) {
        let (handed, handing) = oneshot::channel();
        lock(&self.handing).insert(task.id.number(), handing);
        let let_go = lock(&self.let_go).clone();
        let inner = self.clone();
        self.supervisors.spawn(async move {
            match inner
                .supervise(child, &task.job, None, &task.stop, Some(&let_go))
                .await
            {
                Ok(ended) => {
                    lock(&inner.handing).remove(&task.id.number());
                    inner.publish_spills(&task.job).await;
                    let status = match (ended.stopped || ended.lost.is_some(), ended.exit_code) {
                        (false, Some(code)) => TaskStatus::Completed { exit_code: code },
                        _ => TaskStatus::Killed {
                            signal: ended.signal,
                        },
                    };
                    inner.finish(&task, status);
                }
                Err(LetGo {
                    child,
                    stdout,
                    stderr,
                }) => {
                    let pid = child.id();
                    // Booked again before the host process's own booking goes, so the
                    // orphan reaper never takes its exit before the next supervisor.
                    let booking = children::starting().owned(pid);
                    drop(child);
                    lock(&inner.tasks).remove(&task.id.number());
                    let _ = handed.send(HandedTask {
                        id: task.id,
                        pid,
                        stdout: stdout.and_then(|p| p.into_nonblocking_fd().ok()),
                        stderr: stderr.and_then(|p| p.into_nonblocking_fd().ok()),
                        stdout_read: task.job.stdout.read_position(),
                        stderr_read: task.job.stderr.read_position(),
                        booking: Some(booking),
                    });
                }
            }
        });
    }

    /// A task let go by [`BashExecutor::let_go_tasks`], from its record: running again
    /// under this executor, its output appended to the same files.
    fn adopt(
        self: &Arc<Self>,
        record: &TaskRecord,
        handed: HandedTask,
    ) -> Result<TaskInfo, String> {
        let stream = |path: &Path, read: u64, stream: OutputStream| {
            Collector::resumed(
                self.max_output_bytes,
                path.to_path_buf(),
                read,
                Some(SpillTarget {
                    dir: self.spill_dir.clone(),
                    file_name: outfiles::task_file_name(record.id, stream),
                    from_first_byte: true,
                }),
            )
            .map(Arc::new)
            .map_err(|e| format!("its output file {} cannot be opened: {e}", path.display()))
        };
        let task = Arc::new(Task {
            id: record.id,
            command: record.command.clone(),
            workdir: record.workdir.clone(),
            started_at: SystemTime::UNIX_EPOCH + Duration::from_millis(record.started_at_ms),
            job: Job {
                mark: record.mark.clone(),
                scope: record.scope.clone(),
                stdout: stream(&record.stdout, handed.stdout_read, OutputStream::Stdout)?,
                stderr: stream(&record.stderr, handed.stderr_read, OutputStream::Stderr)?,
                watch: None,
            },
            status: Mutex::new(TaskStatus::Running),
            stop: self.shutdown.child_token(),
            finished: CancellationToken::new(),
        });
        let booking = handed
            .booking
            .unwrap_or_else(|| children::starting().owned(handed.pid));
        let child = HostProcess::adopt(handed.pid, handed.stdout, handed.stderr, booking)
            .map_err(|e| format!("its process {} cannot be watched: {e}", handed.pid))?;
        lock(&self.tasks).insert(record.id.number(), task.clone());
        let info = task.info();
        self.supervise_background(task, child);
        Ok(info)
    }

    fn task(&self, id: TaskId) -> Option<Arc<Task>> {
        lock(&self.tasks).get(&id.number()).cloned()
    }
}

/// Copies one pipe into its collector until EOF. After `abort` it keeps reading
/// only what is already buffered (bounded, in case a detached process keeps
/// writing), so output written just before a kill is not lost. The supervisor
/// closes the collector, after anything it adds itself. After `release` it stops at
/// once and gives the pipe back (a task let go for the next daemon program).
async fn pump<P: AsyncRead + Unpin>(
    pipe: Option<P>,
    sink: Arc<Collector>,
    abort: CancellationToken,
    release: CancellationToken,
    watch: Option<(OutputWatch, OutputStream)>,
) -> Option<P> {
    const MAX_BUF: usize = 64 * 1024;
    const READS_AFTER_ABORT: u32 = 16;
    let mut pipe = pipe?;
    // Start small so that thousands of idle background tasks cost little; grow
    // while reads fill the buffer so bulk output moves in large chunks.
    let mut buf = vec![0u8; 4096];
    let mut after_abort = 0;
    loop {
        tokio::select! {
            biased;
            // First: a read in progress is dropped unpolled, which loses nothing.
            () = release.cancelled() => return Some(pipe),
            r = pipe.read(&mut buf) => match r {
                Ok(0) | Err(_) => return None,
                Ok(n) => {
                    sink.push(&buf[..n]);
                    if let Some((watch, stream)) = &watch {
                        watch(*stream, &buf[..n]);
                    }
                    if n == buf.len() && buf.len() < MAX_BUF {
                        buf.resize(buf.len() * 2, 0);
                    }
                    if abort.is_cancelled() {
                        after_abort += 1;
                        if after_abort > READS_AFTER_ABORT {
                            return None;
                        }
                    }
                }
            },
            () = abort.cancelled() => return None,
        }
    }
}

/// A command whose supervision ended without ending it ([`BashExecutor::let_go_tasks`]).
struct LetGo {
    child: HostProcess,
    stdout: Option<tokio::net::unix::pipe::Receiver>,
    stderr: Option<tokio::net::unix::pipe::Receiver>,
}

impl<L: Launcher> ProcessExecutor<L> {
    /// A foreground run (E1), its output seen live by `watch` when there is one.
    async fn run_with(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
        watch: Option<OutputWatch>,
    ) -> Result<RunOutcome, ExecError> {
        let inner = self.inner.clone();

        if inner.shutting_down.load(Ordering::SeqCst) {
            return Err(ExecError::ShuttingDown);
        }
        inner.launcher.check_workdir(&spec.workdir).await?;
        let (mark, n) = inner.next_mark(spec.scope.as_ref());
        let name =
            |stream| outfiles::run_file_name(spec.call_id.as_deref(), &inner.instance, n, stream);
        let child = inner.spawn(&spec, &mark)?;
        let job = Arc::new(Job {
            mark,
            scope: spec.scope.clone(),
            stdout: inner.collector(name(OutputStream::Stdout), false),
            stderr: inner.collector(name(OutputStream::Stderr), false),
            watch,
        });
        let stop = inner.shutdown.child_token();
        // If the caller stops waiting (its future is dropped), the command is
        // cancelled rather than left running unobserved.
        let _stop_on_drop = stop.clone().drop_guard();
        let supervisor = {
            let (inner, stop, job) = (inner.clone(), stop.clone(), job.clone());
            let timeout = Duration::from_millis(spec.timeout_ms);
            inner.clone().supervisors.spawn(async move {
                // No `let_go`: a foreground run ends with its turn, which an upgrade
                // waits for.
                match inner
                    .supervise(child, &job, Some(timeout), &stop, None)
                    .await
                {
                    Ok(ended) => ended,
                    Err(LetGo { mut child, .. }) => {
                        inner
                            .launcher
                            .stop(&job.mark, Some(child.id()), inner.grace)
                            .await;
                        let _ = child.wait().await;
                        Ended {
                            exit_code: None,
                            signal: None,
                            timed_out: false,
                            stopped: true,
                            lost: None,
                        }
                    }
                }
            })
        };
        let mut supervisor = supervisor;
        // A cancel is a stop like any other: wait until everything is gone.
        let ended = tokio::select! {
            ended = &mut supervisor => ended,
            () = cancel.cancelled() => {
                stop.cancel();
                supervisor.await
            }
        };
        let ended = ended.map_err(|e| ExecError::Spawn(format!("supervisor failed: {e}")))?;
        if let Some(message) = ended.lost {
            return Err(ExecError::Lost(message));
        }
        inner.publish_spills(&job).await;
        Ok(RunOutcome {
            exit_code: ended.exit_code,
            signal: ended.signal,
            timed_out: ended.timed_out,
            aborted: ended.stopped,
            timeout_ms: spec.timeout_ms,
            stdout: job.stdout.collected(),
            stderr: job.stderr.collected(),
        })
    }
}

#[async_trait::async_trait]
impl<L: Launcher> BashExecutor for ProcessExecutor<L> {
    fn kind(&self) -> &'static str {
        self.inner.launcher.kind()
    }

    fn set_connection_judge(&self, judge: Arc<dyn super::netproxy::ConnectionJudge>) {
        self.inner.launcher.set_connection_judge(judge);
    }

    fn proxied_connections(&self) -> Vec<(String, usize)> {
        self.inner.launcher.proxied_connections()
    }

    fn resolve(&self, request: ExecRequest) -> ExecSpec {
        let inner = &self.inner;
        let workdir = match request.workdir {
            Some(dir) if dir.is_absolute() => dir,
            Some(dir) => inner.fallback_cwd.join(dir),
            None => inner.fallback_cwd.clone(),
        };
        let timeout_ms = request
            .timeout_ms
            .unwrap_or(inner.default_timeout_ms)
            .min(inner.max_timeout_ms);
        ExecSpec {
            command: request.command,
            workdir,
            timeout_ms,
            scope: request.scope,
            writable_roots: request.writable_roots,
            call_id: request.call_id,
            task_id: None,
        }
    }

    async fn run(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, ExecError> {
        self.run_with(spec, cancel, None).await
    }

    async fn run_watched(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
        watch: OutputWatch,
    ) -> Result<RunOutcome, ExecError> {
        self.run_with(spec, cancel, Some(watch)).await
    }

    async fn start(&self, spec: ExecSpec) -> Result<TaskInfo, ExecError> {
        let inner = self.inner.clone();
        if inner.shutting_down.load(Ordering::SeqCst) {
            return Err(ExecError::ShuttingDown);
        }
        inner.launcher.check_workdir(&spec.workdir).await?;
        let id = inner
            .ids
            .next()
            .map_err(|e| ExecError::Spawn(format!("cannot allocate a task id: {e}")))?;
        let number = id.number();
        let (mark, _) = inner.next_mark(spec.scope.as_ref());
        let name = |stream| outfiles::task_file_name(id, stream);
        let task = Arc::new(Task {
            job: Job {
                mark,
                scope: spec.scope.clone(),
                stdout: inner.collector(name(OutputStream::Stdout), true),
                stderr: inner.collector(name(OutputStream::Stderr), true),
                watch: None,
            },
            id,
            command: spec.command.clone(),
            workdir: spec.workdir.clone(),
            started_at: SystemTime::now(),
            status: Mutex::new(TaskStatus::Running),
            stop: inner.shutdown.child_token(),
            finished: CancellationToken::new(),
        });
        lock(&inner.tasks).insert(number, task.clone());
        let spec = ExecSpec {
            task_id: Some(task.id),
            ..spec
        };
        match inner.spawn(&spec, &task.job.mark) {
            Err(e) => {
                task.job.stderr.push(format!("{e}\n").as_bytes());
                task.job.stdout.close();
                task.job.stderr.close();
                inner.finish(&task, TaskStatus::Killed { signal: None });
            }
            Ok(child) => {
                inner.record(&task, child.id());
                inner.supervise_background(task.clone(), child);
            }
        }
        Ok(task.info())
    }

    fn get(&self, id: TaskId) -> Option<TaskInfo> {
        self.inner.task(id).map(|t| t.info())
    }

    fn list(&self) -> Vec<TaskInfo> {
        lock(&self.inner.tasks).values().map(|t| t.info()).collect()
    }

    fn spill_files_in_use(&self) -> Vec<PathBuf> {
        let running: Vec<Arc<Task>> = lock(&self.inner.tasks)
            .values()
            .filter(|t| !lock(&t.status).is_finished())
            .cloned()
            .collect();
        // A background task's output files are written from its first byte, so they
        // are its own whether or not they spilled yet.
        running
            .iter()
            .flat_map(|t| {
                [OutputStream::Stdout, OutputStream::Stderr].map(|stream| {
                    self.inner
                        .spill_dir
                        .join(outfiles::task_file_name(t.id, stream))
                })
            })
            .filter(|path| path.exists())
            .collect()
    }

    fn read(&self, id: TaskId) -> Option<TaskRead> {
        let task = self.inner.task(id)?;
        // Status first: if it is final, both streams are closed and complete, so
        // this read drains them for good.
        let status = *lock(&task.status);
        let read = TaskRead {
            stdout: task.job.stdout.read_new(),
            stderr: task.job.stderr.read_new(),
            status,
        };
        if status.is_finished() {
            // Everything was delivered now and nothing more will come: the tails
            // can only cost memory from here on.
            lock(&self.inner.retention).drained(task.id.number());
            task.release_output();
            self.inner.compact(&task);
        }
        Some(read)
    }

    async fn kill(&self, id: TaskId) -> KillOutcome {
        let Some(task) = self.inner.task(id) else {
            return KillOutcome::Unknown;
        };
        if task.finished.is_cancelled() {
            let inner = &self.inner;
            // A lost task of the ssh helper has no mark: nothing of it runs here.
            if !task.job.mark.is_empty() {
                inner.launcher.stop(&task.job.mark, None, inner.grace).await;
            }
            return KillOutcome::AlreadyFinished;
        }
        task.stop.cancel();
        task.finished.cancelled().await;
        match *lock(&task.status) {
            TaskStatus::Killed { .. } => KillOutcome::Killed,
            _ => KillOutcome::AlreadyFinished,
        }
    }

    async fn kill_scope(&self, scope: &str) {
        let inner = &self.inner;
        let running: Vec<Arc<Task>> = lock(&inner.tasks)
            .values()
            .filter(|t| t.job.scope.as_deref() == Some(scope) && !t.finished.is_cancelled())
            .cloned()
            .collect();
        for task in &running {
            task.stop.cancel();
        }
        // Everything still marked with this scope: detached leftovers of finished
        // commands, and whatever the running ones started.
        let prefix = inner.scope_prefix(Some(&scope.to_string()));
        inner.launcher.stop_prefix(&prefix, inner.grace).await;
        for task in running {
            task.finished.cancelled().await;
        }
    }

    fn take_completions(&self) -> Option<mpsc::UnboundedReceiver<TaskInfo>> {
        lock(&self.inner.completions_rx).take()
    }

    fn recover(&self) -> Vec<RecoveredTask> {
        let inner = &self.inner;
        let records = TaskRecords::new(&inner.state_dir);
        if inner.records.set(records.clone()).is_err() {
            return Vec::new();
        }
        let _held = match records.lock() {
            Ok(held) => held,
            Err(e) => {
                tracing::warn!("cannot read the task records: {e}");
                return Vec::new();
            }
        };
        let me = procs::own_identity();
        let mut found = Vec::new();
        for mut record in records.load_all() {
            // Another executor of this daemon took it, or a live daemon runs it.
            if record.held_by == me || procs::owner_alive(&record.held_by) {
                continue;
            }
            let newly_lost = record.state == RecordState::Running;
            if newly_lost {
                // No mark: nothing of it ran here (the ssh helper's tasks).
                if !record.mark.is_empty() {
                    end_marked(&record.mark);
                }
                record.state = RecordState::Lost {
                    reason: LOST_REASON.to_string(),
                    lost_at_ms: millis(SystemTime::now()),
                };
            }
            record.held_by = me.clone();
            if let Err(e) = records.save(&record) {
                tracing::warn!(id = %record.id, "cannot update the task's record: {e}");
            }
            let task = inner.lost_task(&record);
            let release = {
                let mut book = lock(&inner.retention);
                book.finished(record.id.number(), task.output_heap_bytes())
            };
            lock(&inner.tasks).insert(record.id.number(), task.clone());
            for number in release {
                let old = lock(&inner.tasks).get(&number).cloned();
                if let Some(old) = old {
                    old.release_output();
                }
            }
            found.push(RecoveredTask {
                info: task.info(),
                newly_lost,
            });
        }
        if !found.is_empty() {
            tracing::warn!(
                count = found.iter().filter(|t| t.newly_lost).count(),
                "background tasks were lost when the previous daemon stopped"
            );
        }
        found
    }

    fn carries_tasks(&self) -> bool {
        self.inner.launcher.carries_tasks()
    }

    async fn let_go_tasks(&self) -> Result<Vec<HandedTask>, String> {
        let inner = &self.inner;
        if !inner.launcher.carries_tasks() {
            return Err(format!(
                "the {} executor cannot carry running tasks over an upgrade",
                inner.launcher.kind()
            ));
        }
        // Taken first: a task that finishes from here on hands nothing, and its
        // receiver then says so.
        let handing: Vec<_> = lock(&inner.handing).drain().collect();
        lock(&inner.let_go).cancel();
        let mut handed = Vec::new();
        for (_, receiver) in handing {
            if let Ok(task) = receiver.await {
                handed.push(task);
            }
        }
        *lock(&inner.let_go) = CancellationToken::new();
        Ok(handed)
    }

    fn adopt_tasks(&self, tasks: Vec<HandedTask>) -> Vec<(TaskInfo, Result<(), String>)> {
        let inner = &self.inner;
        let records: HashMap<TaskId, TaskRecord> = TaskRecords::new(&inner.state_dir)
            .load_all()
            .into_iter()
            .map(|r| (r.id, r))
            .collect();
        let mut adopted = Vec::new();
        for handed in tasks {
            let id = handed.id;
            let Some(record) = records.get(&id) else {
                // Nothing says what it is: ended, as a crash would leave it.
                // SAFETY: kill(2) of the host process's group, which the task leads.
                unsafe { libc::kill(-handed.pid, libc::SIGKILL) };
                tracing::error!(%id, "a handed-over task has no record: ended");
                continue;
            };
            match inner.adopt(record, handed) {
                Ok(info) => adopted.push((info, Ok(()))),
                Err(why) => {
                    end_marked(&record.mark);
                    let mut record = record.clone();
                    record.state = RecordState::Lost {
                        reason: format!("it could not be taken over after an upgrade: {why}"),
                        lost_at_ms: millis(SystemTime::now()),
                    };
                    if let Some(records) = inner.records.get() {
                        let _ = records.save(&record);
                    }
                    let task = inner.lost_task(&record);
                    lock(&inner.tasks).insert(id.number(), task.clone());
                    adopted.push((task.info(), Err(why)));
                }
            }
        }
        adopted
    }

    async fn start_service(
        &self,
        spec: ExecSpec,
        env: Vec<(String, String)>,
    ) -> Result<ServiceProcess, ExecError> {
        let inner = self.inner.clone();
        if inner.shutting_down.load(Ordering::SeqCst) {
            return Err(ExecError::ShuttingDown);
        }
        inner.launcher.check_workdir(&spec.workdir).await?;
        let (mark, _) = inner.next_mark(spec.scope.as_ref());
        let (cmd, env) = inner.launcher.service_command(&spec, &mark, &env)?;
        let mut child = inner.spawn_command(cmd, &mark, true, env)?;
        if let Err(why) = inner.launcher.started(&mark, child.id()).await {
            inner
                .launcher
                .stop(&mark, Some(child.id()), inner.grace)
                .await;
            let _ = child.wait().await;
            return Err(ExecError::Spawn(why));
        }
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ExecError::Spawn("the server's pipes were not made".into()));
        };
        let stop = inner.shutdown.child_token();
        let ended = CancellationToken::new();
        inner.supervisors.spawn({
            let (inner, stop, ended) = (inner.clone(), stop.clone(), ended.clone());
            async move {
                let sid = child.id();
                tokio::select! {
                    status = child.wait() => {
                        // A server lost with its connection (ssh) is gone from here but
                        // maybe not over there: the launcher ends it once it can.
                        let code = status.ok().and_then(|s| s.code());
                        let _ = inner.launcher.lost(code, &mark).await;
                        let _ = inner.launcher.after_exit(&mark, sid, inner.grace).await;
                    }
                    () = stop.cancelled() => {
                        inner.launcher.stop(&mark, Some(sid), inner.grace).await;
                        let _ = child.wait().await;
                    }
                }
                ended.cancel();
            }
        });
        Ok(ServiceProcess {
            stdin,
            stdout,
            stderr,
            handle: ServiceHandle::new(stop, ended),
        })
    }

    fn files_are_local(&self) -> bool {
        self.inner.launcher.files_are_local()
    }

    async fn stat_file(
        &self,
        request: &FileRequest,
        intent: FileIntent,
    ) -> Result<Option<FileStat>, FileError> {
        self.inner.launcher.stat_file(request, intent).await
    }

    async fn read_file(&self, request: &FileRequest) -> Result<Option<Vec<u8>>, FileError> {
        self.inner.launcher.read_file(request).await
    }

    async fn write_file(
        &self,
        request: &FileRequest,
        content: &[u8],
    ) -> Result<WriteOutcome, FileError> {
        self.inner.launcher.write_file(request, content).await
    }

    async fn shutdown(&self) {
        let inner = &self.inner;
        inner.shutting_down.store(true, Ordering::SeqCst);
        // First everything this executor started, found in one pass and signalled
        // at once: stopping task by task made every task's stop scan a table full
        // of the others (28 s for 1000 tasks). Supervisors then see their command
        // exit, and count it as stopped because the executor is shutting down.
        inner
            .launcher
            .stop_prefix(&inner.mark_prefix, inner.grace)
            .await;
        inner.shutdown.cancel();
        inner.supervisors.close();
        inner.supervisors.wait().await;
        // What started while the first pass ran, and anything the supervisors missed.
        inner
            .launcher
            .stop_prefix(&inner.mark_prefix, inner.grace)
            .await;
        inner.launcher.close().await;
        lock(&inner.completions_tx).take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{KillOutcome, LocalExecutor};

    /// Bytes of output all tasks of `exec` hold in memory.
    fn held(exec: &LocalExecutor) -> usize {
        lock(&exec.inner.tasks)
            .values()
            .map(|t| t.output_heap_bytes())
            .sum()
    }

    /// A record a dead daemon left running: `recover` ends what still carries its mark,
    /// serves it as `Lost` with the output its file holds, and tells it as newly lost
    /// once; another executor of the same daemon does not take it again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn recover_ends_a_dead_daemons_task_and_serves_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let config = ExecConfig {
            state_dir: Some(dir.path().to_path_buf()),
            ..ExecConfig::default()
        };
        let spill = dir.path().join("spill");
        std::fs::create_dir_all(&spill).unwrap();
        std::fs::write(spill.join("bash-5.stdout"), "before the crash\n").unwrap();
        // Not this state's tag: only the record's own mark finds it, not the stale sweep.
        let mark = format!("elsewhere:999999999.1:x:{}/1", std::process::id());
        let mut leftover = std::process::Command::new("sleep")
            .arg("1000")
            .env(MARK_VAR, &mark)
            .spawn()
            .unwrap();
        let record = TaskRecord {
            version: super::super::records::RECORD_VERSION,
            id: TaskId::new(5),
            scope: Some("s1".into()),
            command: "make".into(),
            workdir: dir.path().to_path_buf(),
            started_at_ms: 1_000,
            executor: "local".into(),
            stdout: spill.join("bash-5.stdout"),
            stderr: spill.join("bash-5.stderr"),
            pid: leftover.id() as i32,
            mark,
            held_by: "999999999.1".into(),
            state: RecordState::Running,
        };
        TaskRecords::new(dir.path()).save(&record).unwrap();
        let exec = LocalExecutor::new(&config).unwrap();
        assert!(exec.get(TaskId::new(5)).is_none(), "nothing before recover");
        let found = exec.recover();
        assert_eq!(found.len(), 1);
        assert!(found[0].newly_lost);
        assert_eq!(found[0].info.status, TaskStatus::Lost);
        assert_eq!(found[0].info.scope.as_deref(), Some("s1"));
        let status = leftover.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "its leftover was killed");
        let read = exec.read(TaskId::new(5)).unwrap();
        assert_eq!(read.stdout.text, "before the crash\n");
        assert_eq!(
            (read.stderr.text.as_str(), read.status),
            ("", TaskStatus::Lost)
        );
        assert_eq!(
            exec.kill(TaskId::new(5)).await,
            KillOutcome::AlreadyFinished
        );
        let saved = TaskRecords::new(dir.path()).load_all();
        assert!(matches!(saved[0].state, RecordState::Lost { .. }));
        assert_eq!(saved[0].held_by, procs::own_identity());
        // A second executor of this daemon (the sandbox pair's other side) leaves it.
        let other = LocalExecutor::new(&config).unwrap();
        assert!(other.recover().is_empty());
        exec.shutdown().await;
        other.shutdown().await;
    }

    /// The state directory's sweep asks which spill files running tasks write
    /// (`crate::state_dir`): a running task's, not a finished one's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn spill_files_in_use_are_the_running_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let config = ExecConfig {
            state_dir: Some(dir.path().to_path_buf()),
            kill_grace_ms: 300,
            max_output_bytes: 100,
            ..ExecConfig::default()
        };
        let exec = LocalExecutor::new(&config).unwrap();
        let mut done = exec.take_completions().unwrap();
        let start = |command: &str| {
            exec.resolve(ExecRequest {
                command: command.into(),
                workdir: Some(dir.path().to_path_buf()),
                ..ExecRequest::default()
            })
        };
        let quiet = exec.start(start("head -c 500 /dev/zero")).await.unwrap();
        assert_eq!(done.recv().await.unwrap().id, quiet.id);
        let task = exec
            .start(start("head -c 500 /dev/zero; exec sleep 1000"))
            .await
            .unwrap();
        let file = dir.path().join(format!("spill/{}.stdout", task.id));
        while std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0) < 500 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(exec.spill_files_in_use(), [file]);
        exec.kill(task.id).await;
        assert!(exec.spill_files_in_use().is_empty());
        exec.shutdown().await;
    }

    /// The measure of the retention rule: ten finished tasks that each fill both
    /// tails held 10 x 2 x `max_output_bytes` before it (unbounded in the number of
    /// tasks); with it they hold at most the budget, and nothing once read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn finished_output_memory_is_bounded_and_freed_when_read() {
        let dir = tempfile::tempdir().unwrap();
        let config = ExecConfig {
            state_dir: Some(dir.path().to_path_buf()),
            kill_grace_ms: 300,
            drain_ms: 300,
            max_output_bytes: 10_000,
            finished_output_bytes: 50_000,
            ..ExecConfig::default()
        };
        let exec = LocalExecutor::new(&config).unwrap();
        let mut done = exec.take_completions().unwrap();
        let mut ids = Vec::new();
        for _ in 0..10 {
            let spec = exec.resolve(ExecRequest {
                command: "head -c 30000 /dev/zero; head -c 30000 /dev/zero >&2".into(),
                workdir: Some(dir.path().to_path_buf()),
                ..ExecRequest::default()
            });
            ids.push(exec.start(spec).await.unwrap().id);
        }
        for _ in 0..10 {
            done.recv().await.unwrap();
        }
        let unbounded = 10 * 2 * 10_000;
        let bounded = held(&exec);
        // Two tasks' tails (2 x 20_000) fit the budget, a third would not.
        assert!((40_000..=50_000).contains(&bounded), "{bounded}");
        let mut delivered = 0;
        for id in &ids {
            let r = exec.read(*id).unwrap();
            assert_eq!(r.status, TaskStatus::Completed { exit_code: 0 });
            // Every stream outgrew memory, so every read flags a drop and names
            // the file; only the tasks still held deliver their tails.
            assert!(r.stdout.dropped && r.stderr.dropped);
            assert!(matches!(r.stdout.spill, crate::exec::Spill::Written(_)));
            if !r.stdout.text.is_empty() {
                assert_eq!((r.stdout.text.len(), r.stderr.text.len()), (10_000, 10_000));
                delivered += 1;
            }
        }
        assert_eq!(delivered, 2);
        assert_eq!(held(&exec), 0, "output read to its end is freed");
        eprintln!(
            "10 finished tasks: {unbounded} bytes unbounded, {bounded} with the budget, 0 once read"
        );
        exec.shutdown().await;
    }
}
