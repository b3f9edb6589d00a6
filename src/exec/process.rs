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
    BashExecutor, CannotCarry, ExecError, ExecRequest, ExecSpec, FileError, FileIntent,
    FileRequest, FileStat, HandedTask, KillOutcome, OutputStream, OutputWatch, RecoveredTask,
    RunOutcome, Scope, ServiceHandle, ServiceProcess, TaskChanges, TaskInfo, TaskRead, TaskStatus,
    WriteOutcome,
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

mod background;
mod bash_executor;
mod launcher;
pub(crate) use launcher::os_env;
pub use launcher::{Launcher, ServiceLaunch};

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

#[cfg(test)]
mod tests;
