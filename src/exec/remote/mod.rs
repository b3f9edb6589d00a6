//! The local end of the ssh executor's fast path: a client of `dsh exec-helper`
//! (see `helper`) on one long-lived channel of the ssh master connection.
//!
//! Foreground runs are one request each. Background tasks are mirrored here: the
//! seam's `get`, `list` and `read` are synchronous, so they answer from what the
//! helper pushed (`output`, then `done`), kept with the engine's own [`Collector`]
//! (the same memory bound, UTF-8 handling and drop flags as a local task) and the
//! same retention budget. Ids are allocated here, from the daemon's own state
//! directory, so they never repeat whatever happens to the remote host (T7).
//!
//! Spill files live on the remote host, in the helper's state directory; texts
//! name them by their path there, which the session's next command (run there)
//! opens as it is.
//!
//! Install (first contact of each connection): the remote `uname -sm` must match
//! this build's OS and architecture; the helper is cached as
//! `<helper_dir>/helper-<version>-<sha256 prefix>`; when it is missing this
//! executable is uploaded gzip-compressed over the master connection into a
//! temporary name in the 0700 directory, checked, made 0700 and renamed. Every
//! start checks the sha256 remotely before `exec`; a file that does not match is
//! removed, never run, and uploaded again.
//!
//! A dropped channel marks the running tasks killed with a line in their stderr
//! (the helper, whose stdin ended, ends their processes on the host); the next
//! call starts a fresh helper.

mod install;
mod mirror;

pub use install::{ConnectError, InstallReport, check_platform};
use mirror::{Mirror, RState, RTask, Shared, Unwatch, collected, exec_error};

use super::children::{self, Child};
use super::collector::SpillTarget;
use super::helper::{
    self, FileAnswer, FileOp, FileParams, Hello, KeyParams, RunAnswer, RunParams, ScopeParams,
    StartAnswer, StartParams, WireSpec,
};
use super::ids::{TaskId, TaskIds};
use super::records::{RecordState, TaskRecord, TaskRecords};
use super::retention::Retention;
use super::ssh::SshLauncher;
use super::{ExecError, ExecSpec, KillOutcome, RunOutcome, TaskInfo, TaskRead, TaskStatus};
use crate::config::ExecConfig;
use crate::rpc::{Peer, RpcError};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Kills the helper named by `$1` and returns once it has died: gone from `/proc`,
/// or a zombie (its state `Z`/`X`), which holds nothing. The caller's time limit
/// bounds the wait.
const KILL_AND_WAIT_SCRIPT: &str = r#"kill -KILL "$1" 2>/dev/null
while read -r stat < "/proc/$1/stat"; do
  case ${stat##*) } in Z*|X*) break ;; esac
  sleep 0.01
done 2>/dev/null
exit 0"#;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One helper process and its channel.
struct Conn {
    generation: u64,
    peer: Peer,
    /// The helper's pid on the host (from `hello`), to kill a helper that stopped
    /// answering.
    pid: Option<u64>,
    child: tokio::sync::Mutex<Child>,
    serve: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// The client of `dsh exec-helper`: a [`super::BashExecutor`] in all but name (the
/// ssh executor dispatches to it; `resolve` is the engine's).
pub struct HelperClient {
    ssh: SshLauncher,
    helper_exe: PathBuf,
    helper_dir: String,
    hello: Hello,
    ids: TaskIds,
    /// The daemon's state directory (here, not the helper's).
    state_dir: PathBuf,
    shared: Arc<Shared>,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    generation: AtomicU64,
    next_key: AtomicU64,
    next_run: AtomicU64,
    shutting_down: AtomicBool,
    report: Mutex<Option<InstallReport>>,
}

impl HelperClient {
    /// A client that uploads `helper_exe` (normally this executable) to the host
    /// `ssh` reaches; completions go to `completions`.
    pub(crate) fn new(
        config: &ExecConfig,
        ssh: SshLauncher,
        helper_exe: PathBuf,
        completions: mpsc::UnboundedSender<TaskInfo>,
    ) -> Self {
        let host = ssh.host().to_string();
        Self {
            helper_dir: config.ssh.helper_dir.clone(),
            hello: Hello {
                protocol: helper::PROTOCOL,
                max_output_bytes: config.max_output_bytes,
                finished_output_bytes: config.finished_output_bytes,
                kill_grace_ms: config.kill_grace_ms,
                drain_ms: config.drain_ms,
                sandbox: config.ssh.sandbox.then(|| config.sandbox.clone()),
                env_pass: config.env_pass.clone(),
                env_set: config.env_set.clone(),
            },
            ids: TaskIds::new(&config.state_dir()),
            state_dir: config.state_dir(),
            shared: Arc::new(Shared {
                host,
                tasks: Mutex::new(BTreeMap::new()),
                by_key: Mutex::new(HashMap::new()),
                retention: Mutex::new(Retention::new(config.finished_output_bytes)),
                completions: Mutex::new(Some(completions)),
                watches: Mutex::new(HashMap::new()),
                spill_dir: super::outfiles::dir(&config.state_dir()),
                records: std::sync::OnceLock::new(),
            }),
            ssh,
            helper_exe,
            conn: tokio::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
            next_key: AtomicU64::new(0),
            next_run: AtomicU64::new(0),
            shutting_down: AtomicBool::new(false),
            report: Mutex::new(None),
        }
    }

    /// What the last first contact did (uploaded or reused, size, time).
    pub fn install_report(&self) -> Option<InstallReport> {
        lock(&self.report).clone()
    }

    /// Makes sure a helper is up (for the first-contact decision).
    pub(crate) async fn connect_now(&self) -> Result<(), ConnectError> {
        self.connection().await.map(|_| ())
    }

    /// The live connection, or a fresh helper.
    async fn connection(&self) -> Result<Arc<Conn>, ConnectError> {
        let mut guard = self.conn.lock().await;
        if let Some(c) = guard.as_ref()
            && !c.peer.is_closed()
        {
            return Ok(c.clone());
        }
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(ConnectError::Unreachable(ExecError::ShuttingDown));
        }
        if let Some(old) = guard.take() {
            old.end().await;
        }
        let conn = Arc::new(self.connect().await?);
        *guard = Some(conn.clone());
        Ok(conn)
    }

    pub(crate) fn unusable(&self, e: ConnectError) -> ExecError {
        match e {
            ConnectError::Unreachable(e) => e,
            ConnectError::Unusable(why) => ExecError::Remote(format!(
                "the dsh helper cannot run on ssh host {}: {why}",
                self.shared.host
            )),
        }
    }

    fn lost_message(&self) -> String {
        format!(
            "dsh: lost the connection to ssh host {}; the command is counted as killed (the \
             dsh helper there ends its processes)",
            self.shared.host
        )
    }

    /// A helper that stopped answering on a live connection (stopped, wedged): it
    /// is killed on the host and its channel closed. What it ran is then owned by a
    /// dead process, which the next helper's stale sweep (same state directory)
    /// kills when it starts, on the next call.
    async fn give_up(&self, conn: &Conn) {
        tracing::warn!(host = %self.shared.host, pid = ?conn.pid, "the dsh helper stopped answering; killing it");
        if let Some(pid) = conn.pid {
            // kill(2) returns before the process has died: a helper that was stopped
            // is woken to die, which on a busy host can take a while. The script waits
            // until it is gone or a zombie (dead, its parent not yet told), so "it was
            // killed" in the error is true when it reaches the caller.
            let mut cmd = self
                .ssh
                .remote_bash(KILL_AND_WAIT_SCRIPT, &[&pid.to_string()]);
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true);
            let limit =
                Duration::from_millis(self.ssh.connect_timeout_ms()) + Duration::from_secs(5);
            let _start = children::starting();
            let _ = tokio::time::timeout(limit, cmd.status()).await;
        }
        conn.peer.close();
    }

    /// A failed request: lost when its connection is gone, else refused.
    fn rpc_error(&self, conn: &Conn, e: RpcError) -> ExecError {
        if conn.peer.is_closed() {
            ExecError::Lost(self.lost_message())
        } else {
            ExecError::Remote(format!("the dsh helper refused: {}", e.message))
        }
    }

    fn wire_spec(&self, spec: &ExecSpec) -> WireSpec {
        WireSpec {
            command: spec.command.clone(),
            workdir: self.ssh.remote_path(&spec.workdir),
            timeout_ms: spec.timeout_ms,
            scope: spec.scope.clone(),
            writable_roots: spec
                .writable_roots
                .iter()
                .map(|root| self.ssh.remote_path(root))
                .collect(),
        }
    }

    pub(crate) async fn run(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, ExecError> {
        self.run_with(spec, cancel, None).await
    }

    /// [`HelperClient::run`], with the output handed to `watch` as the helper sends it.
    pub(crate) async fn run_watched(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
        watch: super::OutputWatch,
    ) -> Result<RunOutcome, ExecError> {
        self.run_with(spec, cancel, Some(watch)).await
    }

    async fn run_with(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
        watch: Option<super::OutputWatch>,
    ) -> Result<RunOutcome, ExecError> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(ExecError::ShuttingDown);
        }
        let conn = self.connection().await.map_err(|e| self.unusable(e))?;
        let run = self.next_run.fetch_add(1, Ordering::Relaxed);
        let watched = watch.is_some();
        if let Some(watch) = watch {
            lock(&self.shared.watches).insert(run, watch);
        }
        // However the run ends (an answer, an error, this future dropped), its watch goes.
        let _unwatch = Unwatch(&self.shared, run);
        let params = serde_json::to_value(RunParams {
            run,
            spec: self.wire_spec(&spec),
            watch: watched,
        })
        .map_err(|e| ExecError::Remote(e.to_string()))?;
        // A cancel is a stop like any other: the helper ends the command and still
        // answers, with `aborted` and the output. Dropping this future withdraws
        // the request, which the helper takes as a cancel too.
        let never = CancellationToken::new();
        let request = conn.peer.request("run", params, &never);
        tokio::pin!(request);
        // The helper ends the command by its timer; if it has not answered well
        // after that (a helper stopped or wedged on a live connection), the
        // connection is given up, which ends the helper and what it ran.
        const YEAR_MS: u64 = 365 * 24 * 3600 * 1000;
        let limit = Duration::from_millis(
            spec.timeout_ms.min(YEAR_MS)
                + self.hello.kill_grace_ms.min(YEAR_MS) * 2
                + self.hello.drain_ms.min(YEAR_MS)
                + self.ssh.connect_timeout_ms().min(YEAR_MS),
        );
        let deadline = tokio::time::sleep(limit);
        tokio::pin!(deadline);
        let mut cancel_sent = false;
        let answer = loop {
            tokio::select! {
                a = &mut request => break Some(a),
                () = cancel.cancelled(), if !cancel_sent => {
                    cancel_sent = true;
                    let _ = conn.peer.notify("cancel", json!({ "run": run }));
                }
                () = &mut deadline => break None,
            }
        };
        let Some(answer) = answer else {
            self.give_up(&conn).await;
            return Err(ExecError::Lost(format!(
                "dsh: the dsh helper on ssh host {} did not answer within {} ms of the command's \
                 start; it was killed, and the next helper ends what it ran",
                self.shared.host,
                limit.as_millis()
            )));
        };
        let answer = answer.map_err(|e| self.rpc_error(&conn, e))?;
        let answer: RunAnswer =
            serde_json::from_value(answer).map_err(|e| ExecError::Remote(e.to_string()))?;
        let host = &self.shared.host;
        match answer {
            RunAnswer::Ok(o) => Ok(RunOutcome {
                exit_code: o.exit_code,
                signal: o.signal,
                timed_out: o.timed_out,
                aborted: o.aborted,
                timeout_ms: o.timeout_ms,
                stdout: collected(o.stdout),
                stderr: collected(o.stderr),
            }),
            RunAnswer::Err(e) => Err(exec_error(e, host)),
        }
    }

    pub(crate) async fn start(&self, spec: ExecSpec) -> Result<TaskInfo, ExecError> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(ExecError::ShuttingDown);
        }
        let conn = self.connection().await.map_err(|e| self.unusable(e))?;
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let max = self.hello.max_output_bytes;
        // The id comes first, so the mirrors' files here have their names from the
        // first byte; a start the helper refuses leaves its number unused (ids never
        // repeat; they may skip).
        let id = self
            .ids
            .next()
            .map_err(|e| ExecError::Spawn(format!("cannot allocate a task id: {e}")))?;
        let file = |stream| SpillTarget {
            dir: self.shared.spill_dir.clone(),
            file_name: super::outfiles::task_file_name(id, stream),
            from_first_byte: true,
        };
        let task = Arc::new(RTask {
            key,
            generation: conn.generation,
            command: spec.command.clone(),
            workdir: spec.workdir.clone(),
            scope: spec.scope.clone(),
            started_at: SystemTime::now(),
            stdout: Mirror::new(max, Some(file(super::OutputStream::Stdout))),
            stderr: Mirror::new(max, Some(file(super::OutputStream::Stderr))),
            state: Mutex::new(RState {
                id: None,
                status: TaskStatus::Running,
                announced: false,
            }),
            finished: CancellationToken::new(),
        });
        // Registered before the request: its output may arrive before the answer.
        lock(&self.shared.by_key).insert(key, task.clone());
        let params = serde_json::to_value(StartParams {
            key,
            spec: self.wire_spec(&spec),
        })
        .map_err(|e| ExecError::Remote(e.to_string()));
        let answer = match params {
            Ok(params) => conn
                .peer
                .request("start", params, &CancellationToken::new())
                .await
                .map_err(|e| self.rpc_error(&conn, e))
                .and_then(|v| {
                    serde_json::from_value::<StartAnswer>(v)
                        .map_err(|e| ExecError::Remote(e.to_string()))
                }),
            Err(e) => Err(e),
        };
        let refused = match answer {
            Ok(StartAnswer::Ok(_)) => None,
            Ok(StartAnswer::Err(e)) => Some(exec_error(e, &self.shared.host)),
            Err(e) => Some(e),
        };
        if let Some(e) = refused {
            lock(&self.shared.by_key).remove(&key);
            return Err(e);
        }
        let number = id.number();
        lock(&task.state).id = Some(id);
        self.record(&task, id);
        if task.finished.is_cancelled()
            && let Some(records) = self.shared.records.get()
        {
            // It finished before its record was written: `finish` found none to
            // remove, and a running record of a finished task would be reported lost.
            records.remove(id);
        }
        lock(&self.shared.tasks).insert(number, task.clone());
        if task.finished.is_cancelled() {
            // It finished before it had an id: book and announce it now.
            let heap = task.stdout.collector.heap_bytes() + task.stderr.collector.heap_bytes();
            let release = lock(&self.shared.retention).finished(number, heap);
            for n in release {
                let old = lock(&self.shared.tasks).get(&n).cloned();
                if let Some(old) = old {
                    old.stdout.collector.release();
                    old.stderr.collector.release();
                }
            }
            self.shared.announce(&task);
        }
        task.info()
            .ok_or_else(|| ExecError::Spawn("the task has no id".into()))
    }

    /// Records each task from now on (the daemon recovered: see `records`).
    pub(crate) fn keep_records(&self) {
        let _ = self.shared.records.set(TaskRecords::new(&self.state_dir));
    }

    /// A running task's record: no process of it runs here (the helper, which dies
    /// with its channel, ends them on the host), so no pid and no mark; its files
    /// are the mirrors'.
    fn record(&self, task: &RTask, id: TaskId) {
        let Some(records) = self.shared.records.get() else {
            return;
        };
        let file = |stream| {
            self.shared
                .spill_dir
                .join(super::outfiles::task_file_name(id, stream))
        };
        let record = TaskRecord {
            version: super::records::RECORD_VERSION,
            id,
            scope: task.scope.clone(),
            command: task.command.clone(),
            workdir: task.workdir.clone(),
            started_at_ms: task
                .started_at
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or_default(),
            executor: "ssh+helper".into(),
            stdout: file(super::OutputStream::Stdout),
            stderr: file(super::OutputStream::Stderr),
            pid: 0,
            mark: String::new(),
            held_by: super::procs::own_identity(),
            state: RecordState::Running,
        };
        if let Err(e) = records.save(&record) {
            tracing::warn!(%id, "cannot record the task: {e}");
        }
    }

    fn task(&self, id: TaskId) -> Option<Arc<RTask>> {
        lock(&self.shared.tasks).get(&id.number()).cloned()
    }

    pub(crate) fn get(&self, id: TaskId) -> Option<TaskInfo> {
        self.task(id)?.info()
    }

    pub(crate) fn list(&self) -> Vec<TaskInfo> {
        lock(&self.shared.tasks)
            .values()
            .filter_map(|t| t.info())
            .collect()
    }

    /// Follows a mirrored task: its mirrors take the helper's pushes as they come.
    pub(crate) fn task_changes(&self, id: TaskId) -> Option<super::TaskChanges> {
        let task = self.task(id)?;
        Some(super::TaskChanges::new(
            &task.stdout.collector,
            &task.stderr.collector,
            task.finished.clone(),
        ))
    }

    pub(crate) fn read(&self, id: TaskId) -> Option<TaskRead> {
        let task = self.task(id)?;
        // Status first, as the engine does: a final status means both mirrors are
        // complete (the helper sends `done` after the last output).
        let (status, number) = {
            let s = lock(&task.state);
            (s.status, s.id.map(TaskId::number))
        };
        let read = TaskRead {
            stdout: task.stdout.read(),
            stderr: task.stderr.read(),
            status,
        };
        if status.is_finished() {
            if let Some(n) = number {
                lock(&self.shared.retention).drained(n);
            }
            task.stdout.collector.release();
            task.stderr.collector.release();
        }
        Some(read)
    }

    /// Whether a task with this id is one of the helper's.
    pub(crate) fn has(&self, id: TaskId) -> bool {
        self.task(id).is_some()
    }

    pub(crate) async fn kill(&self, id: TaskId) -> KillOutcome {
        let Some(task) = self.task(id) else {
            return KillOutcome::Unknown;
        };
        let live = self.live(task.generation).await;
        if task.finished.is_cancelled() {
            // Like the engine: a finished task's detached leftovers end too.
            if let Some(conn) = live
                && let Ok(params) = serde_json::to_value(KeyParams { key: task.key })
            {
                let _ = conn
                    .peer
                    .request("kill", params, &CancellationToken::new())
                    .await;
            }
            return KillOutcome::AlreadyFinished;
        }
        if let Some(conn) = live
            && let Ok(params) = serde_json::to_value(KeyParams { key: task.key })
        {
            let _ = conn
                .peer
                .request("kill", params, &CancellationToken::new())
                .await;
        }
        // `done` (or the connection's end) makes the status final.
        task.finished.cancelled().await;
        match lock(&task.state).status {
            TaskStatus::Killed { .. } => KillOutcome::Killed,
            _ => KillOutcome::AlreadyFinished,
        }
    }

    /// The connection of `generation` if it is still the live one.
    async fn live(&self, generation: u64) -> Option<Arc<Conn>> {
        let guard = self.conn.lock().await;
        guard
            .as_ref()
            .filter(|c| c.generation == generation && !c.peer.is_closed())
            .cloned()
    }

    /// One file tool's access to a file on the host, through the helper (`file`), at
    /// the mapped path with the mapped roots.
    pub(crate) async fn file(
        &self,
        request: &super::FileRequest,
        op: FileOp,
    ) -> Result<FileAnswer, super::FileError> {
        use super::FileError;
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(FileError::Unavailable(ExecError::ShuttingDown.to_string()));
        }
        let conn = self
            .connection()
            .await
            .map_err(|e| FileError::Unavailable(self.unusable(e).to_string()))?;
        let params = serde_json::to_value(FileParams {
            path: self.ssh.remote_path(&request.path),
            writable_roots: request
                .writable_roots
                .iter()
                .map(|root| self.ssh.remote_path(root))
                .collect(),
            op,
        })
        .map_err(|e| FileError::Unavailable(e.to_string()))?;
        let answer = conn
            .peer
            .request("file", params, &CancellationToken::new())
            .await
            .map_err(|e| FileError::Unavailable(self.rpc_error(&conn, e).to_string()))?;
        match serde_json::from_value::<FileAnswer>(answer) {
            Ok(FileAnswer::Err(e)) => Err(e),
            Ok(answer) => Ok(answer),
            Err(e) => Err(FileError::Unavailable(format!(
                "the dsh helper on ssh host {} answered a file request with {e}",
                self.shared.host
            ))),
        }
    }

    pub(crate) async fn kill_scope(&self, scope: &str) {
        let conn = self.conn.lock().await.clone();
        if let Some(conn) = conn.filter(|c| !c.peer.is_closed())
            && let Ok(params) = serde_json::to_value(ScopeParams {
                scope: scope.to_string(),
            })
        {
            let _ = conn
                .peer
                .request("kill_scope", params, &CancellationToken::new())
                .await;
        }
        let running: Vec<Arc<RTask>> = lock(&self.shared.by_key)
            .values()
            .filter(|t| t.scope.as_deref() == Some(scope))
            .cloned()
            .collect();
        for task in running {
            task.finished.cancelled().await;
        }
    }

    /// Ends the helper (it kills everything first and sends every completion),
    /// closes its channel, and ends the completion stream.
    pub(crate) async fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        let conn = self.conn.lock().await.take();
        if let Some(conn) = conn {
            if !conn.peer.is_closed() {
                let _ = conn
                    .peer
                    .request("shutdown", Value::Null, &CancellationToken::new())
                    .await;
            }
            conn.end().await;
        }
        // Anything the helper could not report is lost with it.
        let left: Vec<u64> = lock(&self.shared.by_key)
            .values()
            .map(|t| t.generation)
            .collect();
        for generation in left {
            self.shared.lost(generation);
        }
        lock(&self.shared.completions).take();
    }
}

impl Conn {
    /// Closes the channel (the helper's stdin ends: it ends everything it started
    /// and exits) and waits for the ssh process.
    async fn end(&self) {
        self.peer.close();
        if let Some(serve) = self.serve.lock().await.take() {
            let _ = serve.await;
        }
        let mut child = self.child.lock().await;
        // The helper exits once its stdin is closed; ssh then ends.
        if tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .is_err()
        {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }
}
