//! The daemon process: builds the shared pieces once (executor, registry, tools,
//! ACP service) and serves connections on a private unix socket or on stdio,
//! until a signal or `_dsh/stop` asks it to shut down.
//!
//! One shutdown mechanism (as in mini-redis): the daemon owns a cancellation token that
//! a signal, `_dsh/stop` or the end of the stdio connection cancels; both serve paths
//! wait on it and end in the same ordered [`Daemon::stop`]: stop accepting, cancel
//! prompts (which settles pending permission questions), close connections and wait for
//! them, kill every task (E3) and wait, drain the notice router; then the socket path
//! removes its socket. Session logs need no flush: every append is already one complete
//! write.

use crate::acp::AcpService;
use crate::config::Config;
use crate::exec::BashExecutor;
use crate::hooks::audit::AuditLog;
use crate::registry::SessionRegistry;
use crate::rpc::{self, Options, Service};
use crate::tools::ToolRegistry;
use crate::upgrade::{self, CarriedConnection, CarriedTask, Ends, Handover};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Where the daemon listens unless told otherwise: `$XDG_RUNTIME_DIR/dsh/dsh.sock`, else
/// `/tmp/dsh-<uid>/dsh.sock`. A daemon serves one HOME's config and state, so a process
/// whose HOME is not the user's own home (an isolated HOME, as the ACP Registry's check
/// starts agents with) gets a socket of its own without XDG_RUNTIME_DIR:
/// `/tmp/dsh-<uid>-<hash of HOME>/dsh.sock`, which it can always create.
pub fn default_socket_path() -> PathBuf {
    socket_path_for(
        std::env::var_os("XDG_RUNTIME_DIR").as_deref(),
        std::env::var_os("HOME").as_deref(),
        nix::unistd::getuid(),
    )
}

/// [`default_socket_path`] for a given environment and user (tests find the socket of
/// a daemon started in an environment of their making with it).
pub fn socket_path_for(
    runtime_dir: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
    uid: nix::unistd::Uid,
) -> PathBuf {
    if let Some(dir) = runtime_dir.filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("dsh/dsh.sock");
    }
    let own_home = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.dir);
    match home.filter(|h| !h.is_empty()) {
        Some(home) if own_home.as_deref() != Some(Path::new(home)) => {
            use sha2::Digest;
            use std::os::unix::ffi::OsStrExt;
            let digest = sha2::Sha256::digest(home.as_bytes());
            let tag: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
            PathBuf::from(format!("/tmp/dsh-{uid}-{tag}/dsh.sock"))
        }
        _ => PathBuf::from(format!("/tmp/dsh-{uid}/dsh.sock")),
    }
}

/// Everything one daemon process shares between its connections.
pub struct Daemon {
    service: Arc<AcpService>,
    executor: Option<Arc<dyn BashExecutor>>,
    /// The completion-notice router; it ends after the executor's shutdown, once
    /// every notice is delivered (and logged).
    router: Option<tokio::task::JoinHandle<()>>,
    /// The tools and the waterfall: their hook servers start with the daemon and stop
    /// with it.
    tools: Arc<ToolRegistry>,
    /// The one shutdown trigger: cancelled by SIGTERM/SIGINT, `_dsh/stop` (the service
    /// holds a clone), or the end of the stdio connection. Both serve paths wait on it,
    /// then run the same ordered [`Daemon::stop`].
    shutdown: CancellationToken,
    /// Cancelled by [`Daemon::stop`] right after it closed the service's connections:
    /// ends those the service does not know yet (no request made), at the same point.
    closing: CancellationToken,
    /// Stop after this long with no connection and no running task (a daemon `dsh acp`
    /// started); `None`: serve until told to stop.
    idle_exit: Option<std::time::Duration>,
    /// `[daemon] upgrade_drain_secs`.
    upgrade_drain: std::time::Duration,
    /// The session registry: tasks handed over by an upgrade are owned again here.
    sessions: Arc<SessionRegistry>,
}

impl Daemon {
    /// Builds the daemon from its config; fails with a message fit for a person.
    /// `socket` is where the daemon listens (or would): no sandboxed command may
    /// reach it (E7).
    pub fn build(config: Config, socket: &Path) -> Result<Self, String> {
        let state_dir = config.exec.state_dir();
        crate::fsutil::ensure_private_dir(&state_dir).map_err(|e| e.to_string())?;
        let executor = crate::exec::escalation::with_escalation(
            &config.exec,
            crate::exec::from_config(&config.exec, &[socket.to_path_buf()])?,
        )?;
        let user_grants = Arc::new(crate::registry::UserGrants::of_config(&config)?);
        let sessions = Arc::new(
            SessionRegistry::new(config.permissions.default_mode).with_user_grants(user_grants),
        );
        if let Some(exec) = &executor {
            // Before anything is served: a load must find the lost tasks' notices.
            crate::tools::notices::adopt_recovered(exec, &sessions, &state_dir);
        }
        let router = executor
            .as_ref()
            .and_then(|exec| crate::tools::notices::spawn_router(exec, sessions.clone()));
        let audit = Arc::new(
            AuditLog::open_rotating(
                &state_dir.join(crate::state_dir::AUDIT_LOG),
                crate::state_dir::audit_rotation(&config.state),
            )
            .map_err(|e| format!("cannot open the audit log: {e}"))?,
        );
        let tools = Arc::new(ToolRegistry::standard(
            &config,
            executor.clone(),
            sessions.clone(),
            audit,
        ));
        if let Some(exec) = &executor {
            // The sandbox's proxy asks the registry about each host (E10).
            exec.set_connection_judge(Arc::new(crate::tools::network::NetworkJudge::new(
                Arc::downgrade(&tools),
                sessions.clone(),
            )));
        }
        let model = crate::llm::openai::configured(&config.model)?;
        let upgrade_drain = std::time::Duration::from_secs(config.daemon.upgrade_drain_secs);
        let shutdown = CancellationToken::new();
        let service = AcpService::new(
            config,
            model,
            executor.clone(),
            sessions.clone(),
            tools.clone(),
            shutdown.clone(),
        );
        Ok(Self {
            service,
            executor,
            router,
            tools,
            shutdown,
            closing: CancellationToken::new(),
            idle_exit: None,
            upgrade_drain,
            sessions,
        })
    }

    /// Stop by itself after `after` with no connection and no running task: for a daemon
    /// `dsh acp` started, so a one-off client leaves nothing behind. `None` or zero: never.
    pub fn idle_exit(mut self, after: Option<std::time::Duration>) -> Self {
        self.idle_exit = after.filter(|d| !d.is_zero());
        self
    }

    /// Watches for idleness (see [`Daemon::idle_exit`]) and pulls the shutdown trigger
    /// once it has lasted long enough. It looks at most every 5 s (and at least twice
    /// per period), which bounds how late the exit comes: the cost of a timer, not a
    /// hook into every place a connection or task ends.
    fn watch_idle(&self, connections: &TaskTracker) {
        let Some(after) = self.idle_exit else {
            return;
        };
        let (connections, executor, shutdown) = (
            connections.clone(),
            self.executor.clone(),
            self.shutdown.clone(),
        );
        let tick = (after / 2).clamp(
            std::time::Duration::from_millis(100),
            std::time::Duration::from_secs(5),
        );
        tokio::spawn(async move {
            let mut idle_since: Option<tokio::time::Instant> = None;
            loop {
                tokio::select! {
                    () = tokio::time::sleep(tick) => {}
                    () = shutdown.cancelled() => return,
                }
                let running = executor.as_ref().is_some_and(|e| !e.running().is_empty());
                if !connections.is_empty() || running {
                    idle_since = None;
                    continue;
                }
                let since = *idle_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() + tick > after {
                    tracing::info!(
                        after_secs = after.as_secs(),
                        "idle with no connection and no task: stopping"
                    );
                    shutdown.cancel();
                    return;
                }
            }
        });
    }

    /// The config to read again on a reload (SIGHUP, `dsh reload`, `_dsh/config/reload`).
    pub fn reload_from(self, source: crate::acp::ConfigSource) -> Self {
        self.service.set_config_source(source);
        self
    }

    /// SIGHUP reads the config again (as `dsh reload` does); the outcome is logged.
    fn reload_on_sighup(&self) {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangup) = signal(SignalKind::hangup()) else {
            return;
        };
        let service = self.service.clone();
        let end = self.shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = hangup.recv() => match service.reload().await {
                        Ok(r) => tracing::info!(policy_version = %r.policy_version, restart_needed = ?r.restart_needed, "config reloaded (SIGHUP)"),
                        Err(errors) => tracing::error!(?errors, "config reload refused; the old one stays in force"),
                    },
                    () = end.cancelled() => break,
                }
            }
        });
    }

    /// Serves exactly one connection on stdin/stdout; its end stops the daemon.
    pub async fn serve_stdio(self) {
        self.tools.hooks().start_servers().await;
        self.reload_on_sighup();
        self.service
            .state_keeper()
            .run_periodically(self.shutdown.clone());
        let connections = TaskTracker::new();
        let service: Arc<dyn Service> = self.service.clone();
        let end = self.shutdown.clone();
        let closing = self.closing.clone();
        connections.spawn(async move {
            let (input, output) = rpc::stdio::stdio();
            let options = Options {
                stop: closing,
                ..Options::default()
            };
            rpc::serve_connection(input, output, service, options).await;
            end.cancel();
        });
        self.triggered().await;
        self.stop(connections).await;
        tracing::info!("dsh daemon stopped");
    }

    /// Serves the unix socket at `path` until the shutdown trigger fires.
    pub async fn serve_socket(self, path: &Path) -> Result<(), String> {
        let listener = bind_socket(path).await?;
        // The one line on stdout: people (and tests) learn the daemon is ready.
        println!("dsh daemon listening on {}", path.display());
        self.serve_listener(listener, path, Vec::new(), Vec::new())
            .await
    }

    /// Serves on after `dsh upgrade` (`crate::upgrade`): the listener and every
    /// connection the previous program handed over, each from where it was frozen.
    pub async fn resume_socket(self, path: &Path, handover: Handover) -> Result<(), String> {
        // SAFETY: descriptors of the hand-over this program took, each taken once here.
        let listener =
            std::os::unix::net::UnixListener::from(unsafe { upgrade::owned(handover.listener) });
        drop(unsafe { upgrade::owned(handover.old_program) });
        let listener = listener
            .set_nonblocking(true)
            .and_then(|()| UnixListener::from_std(listener))
            .map_err(|e| format!("cannot listen on the handed-over socket: {e}"))?;
        self.service.set_upgrade_outcome(handover.outcome());
        // SAFETY: as above.
        let tasks: Vec<_> = handover
            .tasks
            .into_iter()
            .map(|t| unsafe { t.into_handed() })
            .collect();
        let connections: Vec<FrozenConnection> = handover
            .connections
            .into_iter()
            .map(|c| FrozenConnection {
                // SAFETY: as above.
                ends: unsafe { KeptEnds::from_handover(c.ends) },
                unread: c.unread,
                state: c.state,
            })
            .collect();
        tracing::info!(
            outcome = ?handover.rolled_back,
            "serving again what the previous program handed over"
        );
        self.serve_listener(listener, path, connections, tasks)
            .await
    }

    /// The accept loop of [`Daemon::serve_socket`] and [`Daemon::resume_socket`]; also
    /// where `dsh upgrade` is carried out (see `crate::upgrade`).
    async fn serve_listener(
        self,
        listener: UnixListener,
        path: &Path,
        resumed: Vec<FrozenConnection>,
        tasks: Vec<crate::exec::HandedTask>,
    ) -> Result<(), String> {
        self.tools.hooks().start_servers().await;
        self.reload_on_sighup();
        self.service
            .state_keeper()
            .run_periodically(self.shutdown.clone());
        Self::say_program_started(path);
        tracing::info!(socket = %path.display(), pid = std::process::id(), "dsh daemon listening");
        let (orders, mut upgrade_orders) = tokio::sync::mpsc::channel(1);
        self.service.accept_upgrades(orders);
        let connections = TaskTracker::new();
        self.watch_idle(&connections);
        let frozen: FrozenList = Arc::default();
        let mut freeze = CancellationToken::new();
        self.service.expect_resumes(resumed.len());
        for carried in resumed {
            self.spawn_resumed(&connections, carried, &freeze, &frozen);
        }
        if !tasks.is_empty() {
            // Once their sessions are back: a task that ends is told to its owner's log.
            // The processes run on meanwhile, their output waiting in its pipes.
            self.service
                .resumes_done(std::time::Duration::from_secs(10))
                .await;
            self.adopt_tasks(tasks);
        }
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, _) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            tracing::warn!("accept failed: {e}");
                            continue;
                        }
                    };
                    if let Some(stream) = own_user(stream) {
                        self.spawn_accepted(&connections, stream, &freeze, &frozen);
                    }
                }
                Some(order) = upgrade_orders.recv() => {
                    // Returns only when this program serves on: the upgrade was refused
                    // or failed, and the connections it froze are served again.
                    let carried = self.hand_over(order, &listener, &connections, &freeze, &frozen).await;
                    freeze = CancellationToken::new();
                    self.service.expect_resumes(0);
                    for connection in carried {
                        self.spawn_resumed(&connections, connection, &freeze, &frozen);
                    }
                }
                () = self.triggered() => break,
            }
        }
        // Stop accepting first: nothing new arrives while the rest shuts down.
        drop(listener);
        self.stop(connections).await;
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_file(Self::program_started_file(path));
        tracing::info!("dsh daemon stopped");
        Ok(())
    }

    fn spawn_accepted(
        &self,
        connections: &TaskTracker,
        stream: tokio::net::UnixStream,
        freeze: &CancellationToken,
        frozen: &FrozenList,
    ) {
        let service: Arc<dyn Service> = self.service.clone();
        let hold = Hold {
            closing: self.closing.clone(),
            freeze: freeze.clone(),
            frozen: frozen.clone(),
        };
        connections.spawn(async move {
            // E7: nothing the daemon started (a command however detached, a
            // hook, an MCP server) may drive it (exec::lineage). Judged in the
            // connection's task: the walk reads /proc, off the accept loop.
            let me = std::process::id();
            if let Some(origin) = crate::exec::lineage::started_by(&stream, me) {
                tracing::warn!(%origin, "refused a connection from a process dsh started");
                refuse_started(stream, origin).await;
            } else {
                serve_accepted(stream, service, hold).await;
            }
        });
    }

    fn spawn_resumed(
        &self,
        connections: &TaskTracker,
        carried: FrozenConnection,
        freeze: &CancellationToken,
        frozen: &FrozenList,
    ) {
        let service: Arc<dyn Service> = self.service.clone();
        let hold = Hold {
            closing: self.closing.clone(),
            freeze: freeze.clone(),
            frozen: frozen.clone(),
        };
        connections.spawn(serve_resumed(carried, service, hold));
    }

    /// `dsh upgrade`: refuses what cannot be carried, else freezes every connection,
    /// lets turns finish (for `upgrade_drain`, then cancels them), and executes the
    /// program on disk with the hand-over. Returns only when this program serves on,
    /// with the frozen connections to serve again (the outcome is recorded for
    /// `_dsh/upgrade/outcome`).
    async fn hand_over(
        &self,
        order: crate::acp::UpgradeOrder,
        listener: &UnixListener,
        connections: &TaskTracker,
        freeze: &CancellationToken,
        frozen: &FrozenList,
    ) -> Vec<FrozenConnection> {
        let refused = match self.running_tasks() {
            Some(why) => Err(why),
            None => upgrade::check().await,
        };
        if let Err(why) = refused {
            tracing::warn!(%why, "upgrade refused");
            let _ = order.answer.send(Err(why));
            return Vec::new();
        }
        tracing::info!("upgrade: freezing every connection");
        freeze.cancel();
        let _ = order.answer.send(Ok(()));
        connections.close();
        if tokio::time::timeout(self.upgrade_drain, connections.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                drain_secs = self.upgrade_drain.as_secs(),
                "upgrade: turns still running after the drain are cancelled"
            );
            self.service.cancel_all_prompts();
            connections.wait().await;
        }
        connections.reopen();
        let carried = std::mem::take(&mut *frozen.lock().unwrap_or_else(|p| p.into_inner()));
        // A turn that ran during the drain may have started a task.
        let why = match self.running_tasks() {
            Some(why) => why,
            None => {
                let tasks = match &self.executor {
                    Some(exec) => exec.let_go_tasks().await.unwrap_or_default(),
                    None => Vec::new(),
                };
                self.service.stop_all_mcp().await;
                self.tools.hooks().stop_servers().await;
                let ready =
                    upgrade::binary_fd().and_then(|fd| Ok((fd, self.service.config_toml()?)));
                let why = match ready {
                    Ok((old_program, config)) => upgrade::exec(&Handover {
                        format: upgrade::FORMAT,
                        from_version: env!("CARGO_PKG_VERSION").to_string(),
                        args: upgrade::args(),
                        config,
                        listener: listener.as_raw_fd(),
                        old_program,
                        connections: carried
                            .iter()
                            .map(|c| CarriedConnection {
                                ends: c.ends.raw(),
                                unread: c.unread.clone(),
                                state: c.state.clone(),
                            })
                            .collect(),
                        tasks: tasks.iter().map(CarriedTask::of).collect(),
                        rolled_back: None,
                    }),
                    Err(e) => e,
                };
                // Still here: the new program never started.
                self.adopt_tasks(tasks);
                self.tools.hooks().start_servers().await;
                why
            }
        };
        tracing::error!(%why, "upgrade failed; this program serves on");
        self.service
            .set_upgrade_outcome(crate::acp::UpgradeOutcome::RolledBack { reason: why });
        carried
    }

    /// Where a daemon on `socket` says when its program started (`dsh acp` compares it
    /// with the binary on disk): beside the socket, since an upgrade keeps the process
    /// (and its start time in /proc) but not its program.
    fn program_started_file(socket: &Path) -> PathBuf {
        socket.with_extension("started")
    }

    /// When the program of the daemon `pid` on `socket` started, if it said so.
    pub fn program_started(socket: &Path, pid: i32) -> Option<std::time::SystemTime> {
        let text = std::fs::read_to_string(Self::program_started_file(socket)).ok()?;
        let (who, ms) = text.trim().split_once(' ')?;
        let ms: u64 = ms.parse().ok()?;
        (who.parse::<i32>().ok()? == pid)
            .then(|| std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
    }

    /// Writes [`Daemon::program_started`]'s file (the socket's directory is private).
    fn say_program_started(path: &Path) {
        let now = crate::store::now_ms();
        let text = format!("{} {now}\n", std::process::id());
        if let Err(e) = std::fs::write(Self::program_started_file(path), text) {
            tracing::warn!("cannot write when this program started: {e}");
        }
    }

    /// Supervises again the tasks an upgrade let go (handed over, or kept after a failed
    /// one), each owned again by its session.
    fn adopt_tasks(&self, tasks: Vec<crate::exec::HandedTask>) {
        let Some(exec) = &self.executor else {
            return;
        };
        for (info, taken) in exec.adopt_tasks(tasks) {
            self.sessions.record_owner(info.id, info.scope.as_deref());
            match taken {
                Ok(()) => tracing::info!(id = %info.id, "a running task was carried over"),
                Err(why) => {
                    tracing::error!(id = %info.id, %why, "a running task was lost in the upgrade")
                }
            }
        }
    }

    /// Why an upgrade cannot carry this daemon over now: background tasks run under an
    /// executor that cannot carry them.
    fn running_tasks(&self) -> Option<String> {
        if self.executor.as_ref().is_some_and(|e| e.carries_tasks()) {
            return None;
        }
        let running: Vec<String> = self
            .executor
            .as_ref()
            .map(|e| e.running())
            .unwrap_or_default()
            .iter()
            .map(|t| t.id.to_string())
            .collect();
        (!running.is_empty()).then(|| {
            format!(
                "{} background task(s) still run ({}) and the {} executor cannot carry running \
                 tasks over an upgrade; let them finish or kill them (`dsh kill ID`), then upgrade",
                running.len(),
                running.join(", "),
                self.executor.as_ref().map(|e| e.kind()).unwrap_or("none")
            )
        })
    }

    /// Resolves when the daemon should stop: a signal, `_dsh/stop`, or (stdio) the end of
    /// its connection.
    async fn triggered(&self) {
        tokio::select! {
            () = shutdown_signal() => self.shutdown.cancel(),
            () = self.shutdown.cancelled() => {}
        }
    }

    /// The ordered shutdown both serve paths end in: cancel prompts (pending permission
    /// questions settle as cancelled), close the connections and wait for them, kill every
    /// task and what it started (E3), then wait for the notice router to drain so every
    /// completion notice is in its session log.
    async fn stop(mut self, connections: TaskTracker) {
        self.shutdown.cancel();
        self.service.cancel_all_prompts();
        self.service.close_all_connections();
        self.closing.cancel();
        connections.close();
        connections.wait().await;
        self.service.stop_all_mcp().await;
        if let Some(exec) = &self.executor {
            exec.shutdown().await;
        }
        self.service.end_sessions().await;
        self.tools.hooks().stop_servers().await;
        if let Some(router) = self.router.take() {
            let _ = router.await;
        }
    }
}

/// SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Binds the socket in a 0700 directory with mode 0600. A live daemon on the
/// path is an error; a stale socket file (nobody answers) is replaced.
async fn bind_socket(path: &Path) -> Result<UnixListener, String> {
    let dir = path
        .parent()
        .ok_or_else(|| format!("socket path has no directory: {}", path.display()))?;
    crate::fsutil::ensure_private_dir(dir).map_err(|e| e.to_string())?;
    if path.exists() {
        if tokio::net::UnixStream::connect(path).await.is_ok() {
            return Err(format!(
                "a dsh daemon is already running on {} (stop it with `dsh stop`)",
                path.display()
            ));
        }
        std::fs::remove_file(path)
            .map_err(|e| format!("cannot remove the stale socket {}: {e}", path.display()))?;
    }
    let listener = UnixListener::bind(path)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot restrict {}: {e}", path.display()))?;
    Ok(listener)
}

/// The error code of a refused connection's answer (JSON-RPC's server-error range).
pub const REFUSED_STARTED_BY_DSH: i32 = -32001;

/// A connection from a process the daemon started (E7): its first request (the
/// first line, read for at most 2 s and 64 KiB) is answered with an error that
/// says why, then the connection is closed. Nothing of it reaches the service.
async fn refuse_started(stream: tokio::net::UnixStream, origin: crate::exec::lineage::Origin) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let (reader, mut writer) = stream.into_split();
    let mut line = Vec::new();
    let mut reader = BufReader::new(reader.take(64 * 1024));
    let read = reader.read_until(b'\n', &mut line);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), read).await;
    let id = serde_json::from_slice::<serde_json::Value>(&line)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .unwrap_or(serde_json::Value::Null);
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": REFUSED_STARTED_BY_DSH,
            "message": format!(
                "dsh refuses connections from processes it started (this is {origin}): a \
                 command, hook or MCP server cannot drive its own daemon"
            ),
        },
    });
    let mut bytes = answer.to_string().into_bytes();
    bytes.push(b'\n');
    let _ = writer.write_all(&bytes).await;
    let _ = writer.shutdown().await;
}

/// Connections frozen by an upgrade, as their tasks hand them back.
type FrozenList = Arc<std::sync::Mutex<Vec<FrozenConnection>>>;

/// What every connection task holds besides its own ends: the service's closing of all
/// connections, the upgrade's freeze, and where a frozen connection goes.
struct Hold {
    closing: CancellationToken,
    freeze: CancellationToken,
    frozen: FrozenList,
}

impl Hold {
    fn options(&self) -> Options {
        Options {
            stop: self.closing.clone(),
            freeze: self.freeze.clone(),
            ..Options::default()
        }
    }

    fn keep(&self, ends: KeptEnds, unread: Vec<u8>, state: serde_json::Value) {
        self.frozen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(FrozenConnection {
                ends,
                unread,
                state,
            });
    }
}

/// A connection frozen by an upgrade: its descriptors (duplicates, so the objects that
/// served it could go) and where it was.
struct FrozenConnection {
    ends: KeptEnds,
    unread: Vec<u8>,
    state: serde_json::Value,
}

/// A connection's descriptors, duplicated when it began (close-on-exec: only the
/// upgrade's `execve` lets them through).
enum KeptEnds {
    Socket(OwnedFd),
    Pipes {
        input: OwnedFd,
        output: OwnedFd,
        lifeline: OwnedFd,
    },
}

impl KeptEnds {
    fn raw(&self) -> Ends {
        match self {
            KeptEnds::Socket(fd) => Ends::Socket { fd: fd.as_raw_fd() },
            KeptEnds::Pipes {
                input,
                output,
                lifeline,
            } => Ends::Pipes {
                input: input.as_raw_fd(),
                output: output.as_raw_fd(),
                lifeline: lifeline.as_raw_fd(),
            },
        }
    }

    /// # Safety
    /// `ends` names descriptors of the hand-over this program took, each taken once.
    unsafe fn from_handover(ends: Ends) -> Self {
        // SAFETY: the caller's promise.
        unsafe {
            match ends {
                Ends::Socket { fd } => KeptEnds::Socket(upgrade::owned(fd)),
                Ends::Pipes {
                    input,
                    output,
                    lifeline,
                } => KeptEnds::Pipes {
                    input: upgrade::owned(input),
                    output: upgrade::owned(output),
                    lifeline: upgrade::owned(lifeline),
                },
            }
        }
    }
}

/// SO_PEERCRED: another user's connection is closed before a byte is read.
fn own_user(stream: tokio::net::UnixStream) -> Option<tokio::net::UnixStream> {
    let me = nix::unistd::getuid().as_raw();
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == me => Some(stream),
        Ok(cred) => {
            tracing::warn!(uid = cred.uid(), "refused a connection from another user");
            None
        }
        Err(e) => {
            tracing::warn!("cannot read peer credentials, refusing: {e}");
            None
        }
    }
}

/// Serves one connection; frozen by an upgrade, it goes to `hold.frozen` with `kept`,
/// and its two ends come back (for the caller to let go of without ending anything).
async fn serve_kept<R, W>(
    reader: R,
    writer: W,
    kept: KeptEnds,
    service: Arc<dyn Service>,
    hold: &Hold,
    resumed: Option<rpc::Resumed>,
) -> Option<(R, W)>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let frozen = rpc::serve_freezable(reader, writer, service, hold.options(), resumed).await?;
    hold.keep(kept, frozen.unread, frozen.state);
    Some((frozen.reader, frozen.writer))
}

/// One accepted connection, from its first byte to its end: ACP on the socket, or,
/// when a launcher hands over the editor's pipes (`rpc::handover`), ACP on those
/// with the socket kept as the launcher's lifeline.
async fn serve_accepted(stream: tokio::net::UnixStream, service: Arc<dyn Service>, hold: Hold) {
    use rpc::handover::{self, Arrival};
    use tokio::io::AsyncWriteExt;
    let kept_socket = match upgrade::keep(&stream) {
        Ok(fd) => fd,
        Err(e) => {
            tracing::warn!("cannot set up a connection: {e}");
            return;
        }
    };
    // Registered for reads only (see `rpc::socket`).
    let (reader, mut writer) = match rpc::socket::split(stream) {
        Ok(halves) => halves,
        Err(e) => {
            tracing::warn!("cannot set up a connection: {e}");
            return;
        }
    };
    // The service can close a connection only once it made a request; `closing`
    // (cancelled when the service closes its own) reaches every one, before its
    // first bytes arrive (here) and after (`Options::stop`). An upgrade takes one that
    // has said nothing yet as it is: its first bytes wait in the socket.
    let arrival = tokio::select! {
        arrival = handover::arrival(&reader) => arrival,
        () = hold.closing.cancelled() => return,
        () = hold.freeze.cancelled() => {
            hold.keep(KeptEnds::Socket(kept_socket), Vec::new(), serde_json::Value::Null);
            return;
        }
    };
    let arrival = match arrival {
        Ok(arrival) => arrival,
        Err(e) => {
            tracing::warn!("a connection ended before it began: {e}");
            return;
        }
    };
    match arrival {
        Arrival::Socket => {
            let kept = KeptEnds::Socket(kept_socket);
            if let Some((_, mut writer)) =
                serve_kept(reader, writer, kept, service, &hold, None).await
            {
                writer.keep_open();
            }
        }
        Arrival::Refused => {
            tracing::warn!("a hand-over without two pipes; serving the socket instead");
            if writer.write_all(handover::REFUSED.as_bytes()).await.is_ok() {
                let kept = KeptEnds::Socket(kept_socket);
                if let Some((_, mut writer)) =
                    serve_kept(reader, writer, kept, service, &hold, None).await
                {
                    writer.keep_open();
                }
            }
        }
        Arrival::Pipes { input, output } => {
            if writer
                .write_all(handover::ACCEPTED.as_bytes())
                .await
                .is_err()
            {
                return;
            }
            let kept = match (upgrade::keep(&input), upgrade::keep(&output)) {
                (Ok(input), Ok(output)) => KeptEnds::Pipes {
                    input,
                    output,
                    lifeline: kept_socket,
                },
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!("cannot set up a handed-over connection: {e}");
                    return;
                }
            };
            let input = handover::Lifelined::new(input, reader);
            if serve_kept(input, output, kept, service, &hold, None)
                .await
                .is_some()
            {
                // Frozen: the launcher must not see an end (its socket lives on in
                // the duplicate the upgrade hands over).
                writer.keep_open();
            }
            // Dropping `writer` (and the reader inside `input`, gone with the
            // connection) closes the socket: the launcher sees it and exits.
            drop(writer);
        }
    }
}

/// A connection frozen by an upgrade, served again from where it was.
async fn serve_resumed(carried: FrozenConnection, service: Arc<dyn Service>, hold: Hold) {
    let resumed = Some(rpc::Resumed {
        unread: carried.unread,
        state: carried.state,
    });
    // The socket served, and the duplicate kept for a later freeze.
    let socket = |fd: OwnedFd| -> std::io::Result<(tokio::net::UnixStream, OwnedFd)> {
        let kept = fd.try_clone()?;
        let stream = std::os::unix::net::UnixStream::from(fd);
        stream.set_nonblocking(true)?;
        Ok((tokio::net::UnixStream::from_std(stream)?, kept))
    };
    let served = match carried.ends {
        KeptEnds::Socket(fd) => socket(fd).and_then(|(stream, kept)| {
            let (reader, writer) = rpc::socket::split(stream)?;
            Ok(tokio::spawn(async move {
                let kept = KeptEnds::Socket(kept);
                if let Some((_, mut writer)) =
                    serve_kept(reader, writer, kept, service, &hold, resumed).await
                {
                    writer.keep_open();
                }
            }))
        }),
        KeptEnds::Pipes {
            input,
            output,
            lifeline,
        } => (|| {
            let (stream, kept_lifeline) = socket(lifeline)?;
            let (reader, mut writer) = rpc::socket::split(stream)?;
            let kept = KeptEnds::Pipes {
                input: input.try_clone()?,
                output: output.try_clone()?,
                lifeline: kept_lifeline,
            };
            let input = tokio::net::unix::pipe::Receiver::from_owned_fd(input)?;
            let output = tokio::net::unix::pipe::Sender::from_owned_fd(output)?;
            let input = rpc::handover::Lifelined::new(input, reader);
            Ok(tokio::spawn(async move {
                if serve_kept(input, output, kept, service, &hold, resumed)
                    .await
                    .is_some()
                {
                    writer.keep_open();
                }
                drop(writer);
            }))
        })(),
    };
    match served {
        Ok(task) => {
            let _ = task.await;
        }
        Err(e) => tracing::error!("a handed-over connection cannot be served again: {e}"),
    }
}
