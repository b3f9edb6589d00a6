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

use super::children::{self, Child};
use super::collector::Collector;
use super::collector::SpillTarget;
use super::helper::{
    self, DoneParams, FileAnswer, FileOp, FileParams, Hello, KeyParams, OutputParams, RunAnswer,
    RunParams, ScopeParams, StartAnswer, StartParams, WireCollected, WireError, WireRead, WireSpec,
    WireSpill,
};
use super::ids::{TaskId, TaskIds};
use super::records::{RecordState, TaskRecord, TaskRecords};
use super::retention::Retention;
use super::ssh::SshLauncher;
use super::{
    CollectedOutput, ExecError, ExecSpec, KillOutcome, RunOutcome, Spill, StreamRead, TaskInfo,
    TaskRead, TaskStatus,
};
use crate::config::ExecConfig;
use crate::rpc::{self, Peer, RpcError, Service};
use serde_json::{Value, json};
use sha2::Digest;
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Prints the remote `uname -sm`, whether the cached helper is there, and whether
/// the tools the install needs are: `$1` the helper directory, `$2` the file name.
const PROBE_SCRIPT: &str = r#"
dir=$1 name=$2
case $dir in "~") dir=$HOME ;; "~/"*) dir=$HOME/${dir#"~/"} ;; esac
uname -sm 2>/dev/null || echo unknown
if [ -f "$dir/$name" ]; then echo present; else echo missing; fi
if command -v sha256sum >/dev/null && command -v gzip >/dev/null && command -v mktemp >/dev/null; then
  echo tools
else
  echo "no sha256sum, gzip or mktemp"
fi
"#;

/// Receives the gzip-compressed helper on stdin: `$1` directory, `$2` name, `$3`
/// its sha256. A temporary name in the 0700 directory, 0700, checked, renamed;
/// then the helpers of other builds are removed.
const UPLOAD_SCRIPT: &str = r#"
dir=$1 name=$2 want=$3
case $dir in "~") dir=$HOME ;; "~/"*) dir=$HOME/${dir#"~/"} ;; esac
mkdir -p -- "$dir" && chmod 700 -- "$dir" || exit 1
tmp=$(mktemp "$dir/.upload-XXXXXX") || exit 1
trap 'rm -f -- "$tmp"' EXIT
gzip -dc >"$tmp" || { echo "cannot unpack the helper into $dir" >&2; exit 1; }
chmod 700 -- "$tmp" || exit 1
got=$(sha256sum <"$tmp") || exit 1
got=${got%% *}
[ "$got" = "$want" ] || { echo "the uploaded helper arrived damaged (sha256 $got)" >&2; exit 1; }
mv -f -- "$tmp" "$dir/$name" || exit 1
trap - EXIT
# Helpers of other builds would pile up (one per upgrade, tens of MB each). A
# running one keeps its inode; a daemon of another build uploads its own again.
for old in "$dir"/helper-*; do
  [ "$old" = "$dir/$name" ] || rm -f -- "$old"
done
"#;

/// Exit status of [`START_SCRIPT`] when the cached helper is missing.
const START_MISSING: i32 = 90;
/// Exit status of [`START_SCRIPT`] when the cached helper did not match (removed).
const START_MISMATCH: i32 = 92;

/// Checks the cached helper's sha256 and runs it: `$1` directory, `$2` name, `$3`
/// the sha256. A file that does not match is removed and never run.
const START_SCRIPT: &str = r#"
dir=$1 name=$2 want=$3
case $dir in "~") dir=$HOME ;; "~/"*) dir=$HOME/${dir#"~/"} ;; esac
f=$dir/$name
[ -f "$f" ] || { echo "no helper at $f" >&2; exit 90; }
got=$(sha256sum <"$f") || exit 91
got=${got%% *}
if [ "$got" != "$want" ]; then
  rm -f -- "$f"
  echo "the helper at $f does not match its sha256 (removed, not run)" >&2
  exit 92
fi
exec "$f" exec-helper --state-dir "$dir/state"
"#;

/// This executable as the helper: its path, size and sha256.
#[derive(Debug, Clone)]
struct Identity {
    path: PathBuf,
    size: u64,
    sha256: String,
}

impl Identity {
    /// The cached helper's file name: the version and 16 hex digits of the hash.
    fn file_name(&self) -> String {
        format!(
            "helper-{}-{}",
            env!("CARGO_PKG_VERSION"),
            &self.sha256[..16.min(self.sha256.len())]
        )
    }
}

/// Hashes `path` once per process (it is this executable: tens of MB).
async fn identity(path: &Path) -> Result<Arc<Identity>, String> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<Identity>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(id) = lock(cache).get(path) {
        return Ok(id.clone());
    }
    let owned = path.to_path_buf();
    let id = tokio::task::spawn_blocking(move || -> Result<Identity, String> {
        let mut file = std::fs::File::open(&owned)
            .map_err(|e| format!("cannot read {}: {e}", owned.display()))?;
        let mut hasher = sha2::Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut size = 0u64;
        loop {
            let n = file
                .read(&mut buf)
                .map_err(|e| format!("cannot read {}: {e}", owned.display()))?;
            if n == 0 {
                break;
            }
            size += n as u64;
            hasher.update(&buf[..n]);
        }
        let sha256 = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Identity {
            path: owned,
            size,
            sha256,
        })
    })
    .await
    .map_err(|e| format!("hashing failed: {e}"))??;
    let id = Arc::new(id);
    lock(cache).insert(path.to_path_buf(), id.clone());
    Ok(id)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why a helper could not be started.
#[derive(Debug, Clone)]
pub enum ConnectError {
    /// The host could not be reached (or we are shutting down): no reason to give
    /// up on the helper.
    Unreachable(ExecError),
    /// The host was reached but cannot run the helper; the message says why.
    Unusable(String),
}

/// What the last first contact did, for status and logs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstallReport {
    /// Whether this contact uploaded the helper (it was missing or did not match).
    pub uploaded: bool,
    /// A cached helper was refused because its sha256 did not match.
    pub replaced_mismatch: bool,
    /// Bytes of the executable and bytes sent (compressed) when uploaded.
    pub size: u64,
    pub sent: u64,
    /// From the start of the contact to the helper's answer to `hello`.
    pub elapsed: Duration,
    /// The remote path of the helper.
    pub path: String,
}

/// One output stream of a mirrored task: the engine's collector (bound, UTF-8,
/// incremental reads), plus what only the helper knows: drops on its side and the
/// remote spill file.
struct Mirror {
    collector: Collector,
    /// The helper's own read had lost bytes (they went past its bound before it
    /// sent them); reported by the next local read.
    dropped: Mutex<bool>,
    spill: Mutex<Spill>,
}

impl Mirror {
    /// A mirror whose bytes also go to `file` here as they arrive (the task's output
    /// on this machine, for a report after a crash; texts name the helper's file).
    fn new(max: usize, file: Option<SpillTarget>) -> Self {
        Self {
            collector: Collector::new(max, file),
            dropped: Mutex::new(false),
            spill: Mutex::new(Spill::None),
        }
    }

    fn push(&self, r: WireRead) {
        if let Some(spill) = r.spill {
            *lock(&self.spill) = remote_spill(spill);
        }
        if r.dropped {
            *lock(&self.dropped) = true;
        }
        self.collector.push(r.text.as_bytes());
    }

    fn read(&self) -> StreamRead {
        let mut r = self.collector.read_new();
        let remote_dropped = std::mem::take(&mut *lock(&self.dropped));
        // The collector has no file of its own: when it (or the helper) dropped
        // bytes of a stream that spilled, the file is the helper's.
        if remote_dropped || (r.dropped && r.spill != Spill::None) {
            r.dropped = true;
            r.spill = match lock(&self.spill).clone() {
                Spill::None => Spill::Unavailable("the helper named no spill file".into()),
                s => s,
            };
        }
        r
    }
}

/// A remote path as an error names it: `host:/path` (a path to open is shown as the
/// host has it, see `remote_spill`).
fn on_host(host: &str, path: &Path) -> PathBuf {
    PathBuf::from(format!("{host}:{}", path.display()))
}

fn remote_spill(s: WireSpill) -> Spill {
    match s {
        WireSpill::None => Spill::None,
        // The path as the host has it: the model's next command runs there and can
        // open it as it is (a `host:` prefix made it a path no command can open).
        WireSpill::Written(p) => Spill::Written(p),
        WireSpill::Unavailable(r) => Spill::Unavailable(r),
    }
}

fn collected(c: WireCollected) -> CollectedOutput {
    CollectedOutput {
        text: c.text,
        truncated: c.truncated,
        spill: remote_spill(c.spill),
        total_bytes: c.total_bytes,
    }
}

fn exec_error(e: WireError, host: &str) -> ExecError {
    match e {
        WireError::WorkdirMissing(p) => ExecError::WorkdirMissing(on_host(host, &p)),
        WireError::WorkdirNotDirectory(p) => ExecError::WorkdirNotDirectory(on_host(host, &p)),
        WireError::WorkdirUnusable { path, reason } => ExecError::WorkdirUnusable {
            path: on_host(host, &path),
            reason,
        },
        WireError::Spawn(s) => ExecError::Spawn(s),
        WireError::ShuttingDown => ExecError::ShuttingDown,
        WireError::Other(s) => ExecError::Remote(s),
    }
}

/// A background task as the local side knows it.
struct RTask {
    key: u64,
    /// The connection it runs on; a later one never hears of it.
    generation: u64,
    command: String,
    workdir: PathBuf,
    scope: Option<String>,
    started_at: SystemTime,
    stdout: Mirror,
    stderr: Mirror,
    state: Mutex<RState>,
    /// Cancelled once the status is final.
    finished: CancellationToken,
}

struct RState {
    /// Set once the helper accepted the task (ids are given to started tasks only).
    id: Option<TaskId>,
    status: TaskStatus,
    /// The completion went out (exactly once, T14).
    announced: bool,
}

impl RTask {
    fn info(&self) -> Option<TaskInfo> {
        let s = lock(&self.state);
        let id = s.id?;
        Some(TaskInfo {
            id,
            command: self.command.clone(),
            workdir: self.workdir.clone(),
            scope: self.scope.clone(),
            status: s.status,
            started_at: self.started_at,
        })
    }
}

/// What the client and its connections' services share.
struct Shared {
    host: String,
    /// Task number -> task, for the seam's calls by id.
    tasks: Mutex<BTreeMap<u64, Arc<RTask>>>,
    /// Key -> task, for the helper's notifications (a task has a key before it
    /// has an id).
    by_key: Mutex<HashMap<u64, Arc<RTask>>>,
    retention: Mutex<Retention>,
    completions: Mutex<Option<mpsc::UnboundedSender<TaskInfo>>>,
    /// Where the mirrors' files go (`outfiles`), here.
    spill_dir: PathBuf,
    /// Set once the daemon recovered (`SshExecutor::recover`): each task is recorded
    /// while it runs, so the next daemon reports it if this one dies.
    records: std::sync::OnceLock<TaskRecords>,
    /// Run number -> who watches its output live.
    watches: Mutex<HashMap<u64, super::OutputWatch>>,
}

impl Shared {
    /// Makes a task's status final, books its tails, and announces it when it has
    /// its id (else `started` does, once it has).
    fn finish(&self, task: &Arc<RTask>, status: TaskStatus) {
        if task.finished.is_cancelled() {
            return;
        }
        task.stdout.collector.close();
        task.stderr.collector.close();
        let heap = task.stdout.collector.heap_bytes() + task.stderr.collector.heap_bytes();
        let release = {
            let mut book = lock(&self.retention);
            let mut s = lock(&task.state);
            s.status = status;
            match s.id {
                Some(id) => book.finished(id.number(), heap),
                None => Vec::new(),
            }
        };
        for number in release {
            let old = lock(&self.tasks).get(&number).cloned();
            if let Some(old) = old {
                old.stdout.collector.release();
                old.stderr.collector.release();
            }
        }
        task.finished.cancel();
        lock(&self.by_key).remove(&task.key);
        if let (Some(records), Some(id)) = (self.records.get(), lock(&task.state).id) {
            records.remove(id);
        }
        self.announce(task);
    }

    fn announce(&self, task: &RTask) {
        let info = {
            let mut s = lock(&task.state);
            if s.announced || !s.status.is_finished() || s.id.is_none() {
                return;
            }
            s.announced = true;
            drop(s);
            task.info()
        };
        if let Some(info) = info
            && let Some(tx) = lock(&self.completions).as_ref()
        {
            let _ = tx.send(info);
        }
    }

    /// The connection `generation` is gone: its running tasks are lost.
    fn lost(&self, generation: u64) {
        let lost: Vec<Arc<RTask>> = lock(&self.by_key)
            .values()
            .filter(|t| t.generation == generation)
            .cloned()
            .collect();
        for task in lost {
            task.stderr.collector.push(
                format!(
                    "dsh: lost the connection to ssh host {}; the command is counted as killed \
                     (the dsh helper there ends its processes)\n",
                    self.host
                )
                .as_bytes(),
            );
            self.finish(&task, TaskStatus::Killed { signal: None });
        }
    }
}

/// The service of one helper connection: takes the helper's notifications.
struct ClientService {
    shared: Arc<Shared>,
    generation: u64,
    peer: Mutex<Option<tokio::sync::oneshot::Sender<Peer>>>,
}

impl Service for ClientService {
    fn methods(&self) -> jsonrpsee::Methods {
        jsonrpsee::Methods::new()
    }

    fn opened(&self, peer: &Peer) {
        if let Some(tx) = lock(&self.peer).take() {
            let _ = tx.send(peer.clone());
        }
    }

    fn notification(&self, _peer: &Peer, method: &str, params: Option<Value>) {
        let Some(params) = params else { return };
        match method {
            "output" => {
                let Ok(p) = serde_json::from_value::<OutputParams>(params) else {
                    tracing::warn!("malformed output notification from the helper");
                    return;
                };
                let task = lock(&self.shared.by_key).get(&p.key).cloned();
                if let Some(task) = task {
                    task.stdout.push(p.stdout);
                    task.stderr.push(p.stderr);
                }
            }
            "run_output" => {
                let Ok(p) = serde_json::from_value::<helper::RunOutputParams>(params) else {
                    tracing::warn!("malformed run_output notification from the helper");
                    return;
                };
                let watch = lock(&self.shared.watches).get(&p.run).cloned();
                if let Some(watch) = watch {
                    watch(p.stream, p.data.as_bytes());
                }
            }
            "done" => {
                let Ok(p) = serde_json::from_value::<DoneParams>(params) else {
                    tracing::warn!("malformed done notification from the helper");
                    return;
                };
                let task = lock(&self.shared.by_key).get(&p.key).cloned();
                if let Some(task) = task {
                    self.shared.finish(&task, p.status.into());
                }
            }
            other => tracing::debug!(method = other, "ignored helper notification"),
        }
    }

    fn closed(&self, _peer: &Peer) {
        self.shared.lost(self.generation);
    }
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

    /// First contact: probe, upload when needed, start, `hello`.
    async fn connect(&self) -> Result<Conn, ConnectError> {
        let began = Instant::now();
        self.ssh
            .ensure_master()
            .await
            .map_err(ConnectError::Unreachable)?;
        let me = identity(&self.helper_exe)
            .await
            .map_err(ConnectError::Unusable)?;
        let name = me.file_name();
        let start = children::starting();
        let out = self
            .ssh
            .remote_bash(PROBE_SCRIPT, &[&self.helper_dir, &name])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| ConnectError::Unreachable(ExecError::Remote(e.to_string())));
        drop(start);
        let out = out?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let mut lines = text.lines();
        let (uname, present, tools) = (lines.next(), lines.next(), lines.next());
        let (Some(uname), Some(present), Some(tools)) = (uname, present, tools) else {
            return Err(ConnectError::Unreachable(ExecError::Remote(format!(
                "ssh host {} did not answer the helper probe ({}): {}",
                self.shared.host,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))));
        };
        check_platform(uname.trim()).map_err(ConnectError::Unusable)?;
        if tools.trim() != "tools" {
            return Err(ConnectError::Unusable(format!(
                "the host has {}",
                tools.trim()
            )));
        }
        let mut report = InstallReport {
            path: format!("{}/{name}", self.helper_dir),
            ..InstallReport::default()
        };
        if present.trim() != "present" {
            self.upload(&me, &name, &mut report).await?;
        }
        let conn = match self.launch(&me, &name).await {
            Err(StartFailure::Mismatch(why)) if !report.uploaded => {
                tracing::warn!(host = %self.shared.host, "{why}");
                report.replaced_mismatch = true;
                self.upload(&me, &name, &mut report).await?;
                self.launch(&me, &name).await
            }
            other => other,
        }
        .map_err(|f| match f {
            StartFailure::Mismatch(s) | StartFailure::Failed(s) => ConnectError::Unusable(s),
            StartFailure::Unreachable(e) => ConnectError::Unreachable(e),
        })?;
        report.elapsed = began.elapsed();
        tracing::info!(
            host = %self.shared.host,
            uploaded = report.uploaded,
            size = report.size,
            sent = report.sent,
            elapsed_ms = report.elapsed.as_millis() as u64,
            "dsh helper started"
        );
        *lock(&self.report) = Some(report);
        Ok(conn)
    }

    /// Sends this executable, gzip-compressed, into the cache (see the module docs).
    async fn upload(
        &self,
        me: &Identity,
        name: &str,
        report: &mut InstallReport,
    ) -> Result<(), ConnectError> {
        let cmd = self
            .ssh
            .remote_bash_with_stdin(UPLOAD_SCRIPT, &[&self.helper_dir, name, &me.sha256]);
        let std_cmd = to_std(&cmd);
        let path = me.path.clone();
        let result = tokio::task::spawn_blocking(move || upload_blocking(std_cmd, &path))
            .await
            .map_err(|e| ConnectError::Unusable(format!("the upload failed: {e}")))?;
        let sent = result.map_err(|e| {
            ConnectError::Unusable(format!("cannot upload the helper to {name}: {e}"))
        })?;
        report.uploaded = true;
        report.size = me.size;
        report.sent = sent;
        Ok(())
    }

    /// Starts the cached helper (its hash is checked remotely first) and greets it.
    async fn launch(&self, me: &Identity, name: &str) -> Result<Conn, StartFailure> {
        let mut cmd = self
            .ssh
            .remote_bash_with_stdin(START_SCRIPT, &[&self.helper_dir, name, &me.sha256]);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = children::spawn(&mut cmd)
            .map_err(|e| StartFailure::Unreachable(ExecError::Remote(e.to_string())))?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(StartFailure::Failed("the ssh client has no pipes".into()));
        };
        // The helper's complaints (and ssh's): kept for the error, bounded.
        let said = Arc::new(Mutex::new(String::new()));
        let said_w = said.clone();
        let said_done = CancellationToken::new();
        let said_done_w = said_done.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut s = lock(&said_w);
                if s.len() < 16 * 1024 {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
            said_done_w.cancel();
        });
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let (peer_tx, peer_rx) = tokio::sync::oneshot::channel();
        let service = Arc::new(ClientService {
            shared: self.shared.clone(),
            generation,
            peer: Mutex::new(Some(peer_tx)),
        });
        let options = rpc::Options {
            max_line_bytes: helper::max_line_bytes(self.hello.max_output_bytes),
            outgoing_queue: 65_536,
            request_timeout: None,
            ..Default::default()
        };
        let serve = tokio::spawn(rpc::serve_connection(stdout, stdin, service, options));
        let peer = peer_rx
            .await
            .map_err(|_| StartFailure::Failed("the helper channel did not open".into()))?;
        let hello =
            serde_json::to_value(&self.hello).map_err(|e| StartFailure::Failed(e.to_string()))?;
        let limit = Duration::from_millis(self.ssh_connect_timeout()) + Duration::from_secs(30);
        let answer = tokio::time::timeout(
            limit,
            peer.request("hello", hello, &CancellationToken::new()),
        )
        .await;
        match answer {
            Ok(Ok(answer)) => Ok(Conn {
                generation,
                pid: answer.get("pid").and_then(Value::as_u64),
                peer,
                child: tokio::sync::Mutex::new(child),
                serve: tokio::sync::Mutex::new(Some(serve)),
            }),
            other => {
                peer.close();
                // The script's exit status says why (missing, mismatch): let ssh
                // report it before giving up on it.
                let status = match tokio::time::timeout(Duration::from_secs(10), child.wait()).await
                {
                    Ok(status) => status.ok().and_then(|s| s.code()),
                    Err(_) => {
                        let _ = child.start_kill();
                        let _ = child.wait().await;
                        None
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(2), said_done.cancelled()).await;
                let said = lock(&said).trim().to_string();
                let why = match other {
                    Ok(Err(e)) => e.message.clone(),
                    Ok(Ok(_)) => String::new(),
                    Err(_) => "no answer in time".into(),
                };
                let said = if said.is_empty() { why } else { said };
                Err(match status {
                    Some(START_MISMATCH) | Some(START_MISSING) => StartFailure::Mismatch(said),
                    Some(255) => StartFailure::Unreachable(ExecError::Remote(format!(
                        "ssh host {}: {said}",
                        self.shared.host
                    ))),
                    _ => StartFailure::Failed(format!("the helper did not start: {said}")),
                })
            }
        }
    }

    fn ssh_connect_timeout(&self) -> u64 {
        self.ssh.connect_timeout_ms()
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
            let mut cmd = self
                .ssh
                .remote_bash("kill -KILL \"$1\" 2>/dev/null; exit 0", &[&pid.to_string()]);
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

/// Why a start failed.
enum StartFailure {
    /// The cached file was missing or did not match its hash (then removed).
    Mismatch(String),
    Failed(String),
    Unreachable(ExecError),
}

/// Whether `uname -sm` output names this build's OS and architecture.
pub fn check_platform(uname: &str) -> Result<(), String> {
    let mut words = uname.split_whitespace();
    let (os, arch) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let want_arch = std::env::consts::ARCH;
    if os.eq_ignore_ascii_case(std::env::consts::OS) && arch == want_arch {
        Ok(())
    } else {
        Err(format!(
            "`uname -sm` there says `{uname}`, and this dsh is built for {} {want_arch}",
            std::env::consts::OS
        ))
    }
}

/// The same command for `std::process` (the upload writes from a blocking thread).
fn to_std(cmd: &tokio::process::Command) -> std::process::Command {
    let c = cmd.as_std();
    let mut out = std::process::Command::new(c.get_program());
    out.args(c.get_args()).env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            out.env(k, v);
        }
    }
    if let Some(dir) = c.get_current_dir() {
        out.current_dir(dir);
    }
    out
}

/// Runs the upload: `path` gzip-compressed into the command's stdin. Returns the
/// bytes sent.
fn upload_blocking(mut cmd: std::process::Command, path: &Path) -> Result<u64, String> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // Started and reaped here: no orphan is reaped meanwhile (`children`).
    let _start = children::starting();
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| "the ssh client has no stdin".to_string())?;
    let counted = Counting {
        inner: stdin,
        count: 0,
    };
    let sent = (|| -> std::io::Result<u64> {
        let mut file = std::fs::File::open(path)?;
        let mut gz = flate2::write::GzEncoder::new(counted, flate2::Compression::fast());
        std::io::copy(&mut file, &mut gz)?;
        let mut counted = gz.finish()?;
        counted.flush()?;
        Ok(counted.count)
    })();
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    match sent {
        Ok(n) if out.status.success() => Ok(n),
        Ok(_) => Err(format!("{}: {said}", out.status)),
        Err(e) => Err(format!("{e} ({}: {said})", out.status)),
    }
}

/// A writer that counts what passes.
struct Counting<W> {
    inner: W,
    count: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Removes a run's watch when dropped.
struct Unwatch<'a>(&'a Shared, u64);

impl Drop for Unwatch<'_> {
    fn drop(&mut self) {
        lock(&self.0.watches).remove(&self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_check_compares_os_and_machine() {
        let here = format!("Linux {}", std::env::consts::ARCH);
        assert!(check_platform(&here).is_ok());
        assert!(check_platform("Linux riscv64").is_err());
        assert!(check_platform("Darwin arm64").is_err());
        assert!(check_platform("").is_err());
    }
}
