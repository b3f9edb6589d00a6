//! The ssh executor: commands on another host, through `dsh exec-helper` there
//! (src/exec/remote.rs, the engine itself on the host) or the per-command wrapper
//! (src/exec/ssh.rs), as `[exec.ssh] helper` says. It sits above both, so neither
//! imports the other's executor.

use super::helper::{FileAnswer, FileOp};
use super::process::Launcher;
use super::remote::{ConnectError, HelperClient, InstallReport};
use super::ssh::{SshLauncher, WrapperExecutor, wrapper};
use super::{
    BashExecutor, ExecError, ExecRequest, ExecSpec, FileError, FileIntent, FileRequest, FileStat,
    KillOutcome, OutputWatch, RunOutcome, ServiceProcess, TaskId, TaskInfo, TaskRead, WriteOutcome,
};
use crate::config::{ExecConfig, HelperMode};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Which path an ssh executor runs commands on, decided at first contact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Helper,
    Wrapper,
}

/// Runs commands on a remote host over ssh: through `dsh exec-helper` there
/// (`remote`, `helper`) or the per-command wrapper (this module's scripts), as
/// `[exec.ssh] helper` says. Both ride the same master connection; task ids come
/// from the same counter, so a task is one path's or the other's by its id.
pub struct SshExecutor {
    mode: HelperMode,
    /// `[exec.ssh] sandbox`: only the helper can sandbox, so nothing takes the
    /// wrapper path (commands or servers).
    sandbox: bool,
    ssh: SshLauncher,
    wrapper: WrapperExecutor,
    helper: HelperClient,
    choice: tokio::sync::OnceCell<Backend>,
    shutting_down: AtomicBool,
    /// Whether a server was ever started. Servers run on the wrapper path whichever
    /// path commands take (they need only the master connection), so then
    /// `kill_scope` and `shutdown` must reach the wrapper executor too.
    services: AtomicBool,
    completions_tx: Mutex<Option<mpsc::UnboundedSender<TaskInfo>>>,
    completions_rx: Mutex<Option<mpsc::UnboundedReceiver<TaskInfo>>>,
    /// Forwards the wrapper's completions into ours once the wrapper is chosen.
    forwarder: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl SshExecutor {
    /// An ssh executor for `[exec.ssh]` whose helper is this executable. It
    /// connects on first use: a host that is down fails each call with an
    /// infrastructure error, not the daemon's start.
    pub fn new(config: &ExecConfig) -> Result<Self, String> {
        let exe = crate::program::path();
        Self::with_helper(config, exe)
    }

    /// As [`SshExecutor::new`] with `helper_exe` as the helper (tests, whose own
    /// executable is a test harness, pass the `dsh` binary).
    pub fn with_helper(config: &ExecConfig, helper_exe: PathBuf) -> Result<Self, String> {
        let (wrapper, ssh) = wrapper(config)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let helper = HelperClient::new(config, ssh.clone(), helper_exe, tx.clone());
        Ok(Self {
            mode: config.ssh.helper,
            sandbox: config.ssh.sandbox,
            ssh,
            wrapper,
            helper,
            choice: tokio::sync::OnceCell::new(),
            shutting_down: AtomicBool::new(false),
            services: AtomicBool::new(false),
            completions_tx: Mutex::new(Some(tx)),
            completions_rx: Mutex::new(Some(rx)),
            forwarder: Mutex::new(None),
        })
    }

    /// What the helper's last first contact did (uploaded or reused, sizes, time);
    /// `None` before one succeeded.
    pub fn install_report(&self) -> Option<InstallReport> {
        self.helper.install_report()
    }

    /// The path commands take, choosing it on first contact (see `HelperMode`).
    async fn backend(&self) -> Result<Backend, ExecError> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(ExecError::ShuttingDown);
        }
        let chosen = self
            .choice
            .get_or_try_init(|| async {
                match self.mode {
                    HelperMode::Off => Ok(Backend::Wrapper),
                    mode => match self.helper.connect_now().await {
                        Ok(_) => Ok(Backend::Helper),
                        Err(ConnectError::Unreachable(e)) => Err(e),
                        Err(ConnectError::Unusable(why)) if self.sandbox => {
                            let e = self.helper.unusable(ConnectError::Unusable(why));
                            Err(ExecError::Remote(format!(
                                "{e} ([exec.ssh] sandbox = true: only the helper sandboxes \
                                 commands on the host, so none runs without it)"
                            )))
                        }
                        Err(ConnectError::Unusable(why)) if mode == HelperMode::Required => {
                            let e = self.helper.unusable(ConnectError::Unusable(why));
                            Err(ExecError::Remote(format!(
                                "{e} ([exec.ssh] helper = \"required\"; \"auto\" would use the \
                                 slower wrapper path instead)"
                            )))
                        }
                        Err(ConnectError::Unusable(why)) => {
                            tracing::warn!(
                                host = %self.ssh.host(),
                                "the dsh helper cannot run there ({why}); using the wrapper path"
                            );
                            Ok(Backend::Wrapper)
                        }
                    },
                }
            })
            .await
            .copied()?;
        if chosen == Backend::Wrapper {
            let mut forwarder = self.forwarder.lock().unwrap_or_else(|p| p.into_inner());
            if forwarder.is_none()
                && let Some(mut from) = self.wrapper.take_completions()
                && let Some(to) = self
                    .completions_tx
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
            {
                *forwarder = Some(tokio::spawn(async move {
                    while let Some(info) = from.recv().await {
                        let _ = to.send(info);
                    }
                }));
            }
        }
        Ok(chosen)
    }
}

impl SshExecutor {
    /// [`SshExecutor::backend`] for a file tool.
    async fn file_backend(&self) -> Result<Backend, FileError> {
        self.backend()
            .await
            .map_err(|e| FileError::Unavailable(e.to_string()))
    }
}

/// A helper's answer of the wrong kind for the request.
fn unexpected(answer: FileAnswer) -> FileError {
    FileError::Unavailable(format!(
        "the dsh helper answered a file request out of turn: {answer:?}"
    ))
}

#[async_trait::async_trait]
impl BashExecutor for SshExecutor {
    /// `ssh+helper` or `ssh` (the wrapper path), as decided at first contact;
    /// `dsh status` shows it.
    fn kind(&self) -> &'static str {
        match (self.choice.get(), self.mode) {
            (Some(Backend::Helper), _) => "ssh+helper",
            (Some(Backend::Wrapper), HelperMode::Off) | (None, HelperMode::Off) => "ssh",
            (Some(Backend::Wrapper), _) => "ssh (wrapper: the helper cannot run there)",
            (None, _) => "ssh (not connected yet)",
        }
    }

    /// No executor beside it: a request to leave the containment changes nothing here.
    fn outside(&self) -> Option<std::sync::Arc<dyn BashExecutor>> {
        None
    }

    /// No proxy of dsh's runs for the host's commands, so none asks.
    fn set_connection_judge(&self, judge: std::sync::Arc<dyn super::netproxy::ConnectionJudge>) {
        let _ = judge;
    }

    fn proxied_connections(&self) -> Vec<(String, usize)> {
        Vec::new()
    }

    fn resolve(&self, request: ExecRequest) -> ExecSpec {
        self.wrapper.resolve(request)
    }

    async fn run(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, ExecError> {
        match self.backend().await? {
            Backend::Helper => self.helper.run(spec, cancel).await,
            Backend::Wrapper => self.wrapper.run(spec, cancel).await,
        }
    }

    async fn run_watched(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
        watch: OutputWatch,
    ) -> Result<RunOutcome, ExecError> {
        match self.backend().await? {
            Backend::Helper => self.helper.run_watched(spec, cancel, watch).await,
            Backend::Wrapper => self.wrapper.run_watched(spec, cancel, watch).await,
        }
    }

    async fn start(&self, spec: ExecSpec) -> Result<TaskInfo, ExecError> {
        match self.backend().await? {
            Backend::Helper => self.helper.start(spec).await,
            Backend::Wrapper => self.wrapper.start(spec).await,
        }
    }

    fn get(&self, id: TaskId) -> Option<TaskInfo> {
        self.helper.get(id).or_else(|| self.wrapper.get(id))
    }

    fn list(&self) -> Vec<TaskInfo> {
        let mut all = self.helper.list();
        all.extend(self.wrapper.list());
        all.sort_by_key(|t| t.id);
        all
    }

    /// The wrapper path's (the helper's files are on the remote host).
    fn spill_files_in_use(&self) -> Vec<std::path::PathBuf> {
        self.wrapper.spill_files_in_use()
    }

    fn read(&self, id: TaskId) -> Option<TaskRead> {
        if self.helper.has(id) {
            self.helper.read(id)
        } else {
            self.wrapper.read(id)
        }
    }

    fn task_changes(&self, id: TaskId) -> Option<super::TaskChanges> {
        if self.helper.has(id) {
            self.helper.task_changes(id)
        } else {
            self.wrapper.task_changes(id)
        }
    }

    async fn kill(&self, id: TaskId) -> KillOutcome {
        if self.helper.has(id) {
            self.helper.kill(id).await
        } else {
            self.wrapper.kill(id).await
        }
    }

    /// The wrapper path's records (its tasks run through the engine here); the
    /// helper's tasks have none: a daemon that dies takes the helper with it, and its
    /// tasks are not reported.
    fn recover(&self) -> Vec<super::RecoveredTask> {
        self.helper.keep_records();
        self.wrapper.recover()
    }

    async fn kill_scope(&self, scope: &str) {
        let choice = self.choice.get().copied();
        if choice == Some(Backend::Helper) {
            self.helper.kill_scope(scope).await;
        }
        if choice == Some(Backend::Wrapper) || self.services.load(Ordering::SeqCst) {
            self.wrapper.kill_scope(scope).await;
        }
    }

    fn take_completions(&self) -> Option<mpsc::UnboundedReceiver<TaskInfo>> {
        self.completions_rx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// A server runs through the wrapper path's launcher on either path: the helper
    /// speaks JSON-RPC on its own stdin, and a server needs a channel of its own,
    /// which the master connection gives it (RUN_SCRIPT with stdin passed through).
    async fn start_service(
        &self,
        spec: ExecSpec,
        env: Vec<(String, String)>,
    ) -> Result<ServiceProcess, ExecError> {
        // Booked before the check, as shutdown sets its flag before it reads this
        // one: a server either is refused or is ended by shutdown.
        self.services.store(true, Ordering::SeqCst);
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(ExecError::ShuttingDown);
        }
        if self.sandbox {
            return Err(ExecError::Remote(
                "servers run on the ssh wrapper path, which cannot sandbox them, and \
                 [exec.ssh] sandbox = true: refused"
                    .into(),
            ));
        }
        self.wrapper.start_service(spec, env).await
    }

    /// All kept: neither the helper's tasks nor the wrapper path's (its launcher
    /// carries none) are handed to the next program; an upgrade is refused while they run.
    fn tasks_kept(&self) -> Vec<TaskInfo> {
        self.running()
    }

    async fn let_go_tasks(&self) -> Result<Vec<super::HandedTask>, super::CannotCarry> {
        super::CannotCarry::check(self.kind(), &self.tasks_kept())?;
        Ok(Vec::new())
    }

    fn adopt_tasks(&self, tasks: Vec<super::HandedTask>) -> Vec<(TaskInfo, Result<(), String>)> {
        let _ = tasks;
        Vec::new()
    }

    /// The host's files, at the mapped paths: never the editor's buffers here.
    fn files_are_local(&self) -> bool {
        false
    }

    async fn stat_file(
        &self,
        request: &FileRequest,
        intent: FileIntent,
    ) -> Result<Option<FileStat>, FileError> {
        match self.file_backend().await? {
            Backend::Helper => match self.helper.file(request, FileOp::Stat { intent }).await? {
                FileAnswer::Stat(stat) => Ok(stat),
                other => Err(unexpected(other)),
            },
            Backend::Wrapper => self.wrapper.stat_file(request, intent).await,
        }
    }

    async fn read_file(&self, request: &FileRequest) -> Result<super::FileRead, FileError> {
        match self.file_backend().await? {
            Backend::Helper => match self.helper.file(request, FileOp::Read).await? {
                FileAnswer::Read { text, containment } => Ok(super::FileRead {
                    bytes: text.map(String::into_bytes),
                    containment,
                }),
                other => Err(unexpected(other)),
            },
            Backend::Wrapper => self.wrapper.read_file(request).await,
        }
    }

    /// The helper's answer: its own engine's containment on the host, at the mapped
    /// path, by the same check its file calls make (none when it runs commands
    /// unsandboxed).
    async fn file_containment(
        &self,
        request: &FileRequest,
        intent: FileIntent,
    ) -> Result<Option<crate::containment::Containment>, FileError> {
        match self.file_backend().await? {
            Backend::Helper => match self
                .helper
                .file(request, FileOp::Containment { intent })
                .await?
            {
                FileAnswer::Containment(decided) => Ok(decided),
                other => Err(unexpected(other)),
            },
            Backend::Wrapper => self.wrapper.file_containment(request, intent).await,
        }
    }

    async fn write_file(
        &self,
        request: &FileRequest,
        content: &[u8],
    ) -> Result<WriteOutcome, FileError> {
        match self.file_backend().await? {
            Backend::Helper => {
                let content = String::from_utf8(content.to_vec())
                    .map_err(|_| FileError::NotText(request.path.clone()))?;
                match self.helper.file(request, FileOp::Write { content }).await? {
                    FileAnswer::Written(done) => Ok(done),
                    other => Err(unexpected(other)),
                }
            }
            Backend::Wrapper => self.wrapper.write_file(request, content).await,
        }
    }

    async fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        // Ends the helper when there is one, and its share of the stream; first,
        // because the wrapper's shutdown closes the master connection it rides.
        self.helper.shutdown().await;
        if self.choice.get() == Some(&Backend::Wrapper) || self.services.load(Ordering::SeqCst) {
            self.wrapper.shutdown().await;
        }
        Launcher::close(&self.ssh).await;
        let forwarder = self
            .forwarder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(forwarder) = forwarder {
            let _ = forwarder.await;
        }
        self.completions_tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }
}
