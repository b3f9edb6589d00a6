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
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

mod upgrading;
use upgrading::{drain_for_upgrade, join_upgrade};

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
    router: Option<NoticeRouter>,
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
    /// Set while an upgrade is under way: its frozen connections have left the tracker
    /// the idle-exit watcher looks at, yet the daemon is anything but idle.
    handing_over: Arc<AtomicBool>,
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
            .and_then(|exec| NoticeRouter::spawn(exec, sessions.clone()));
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
            handing_over: Arc::default(),
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
        let (connections, executor, shutdown, handing_over) = (
            connections.clone(),
            self.executor.clone(),
            self.shutdown.clone(),
            self.handing_over.clone(),
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
                if !connections.is_empty() || running || handing_over.load(Ordering::SeqCst) {
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
        self.stop_on_signals();
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
        self.shutdown.cancelled().await;
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
                unread: c.unread.0,
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
    /// where `dsh upgrade` is carried out (see `crate::upgrade`). The upgrade's long
    /// part (the check, the freeze and the drain) runs as a task of its own
    /// ([`drain_for_upgrade`]) that reports back while this loop keeps accepting: a
    /// connection accepted meanwhile is frozen at once and handed over with the others.
    async fn serve_listener(
        self,
        listener: UnixListener,
        path: &Path,
        resumed: Vec<FrozenConnection>,
        tasks: Vec<crate::exec::HandedTask>,
    ) -> Result<(), String> {
        self.stop_on_signals();
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
        let mut freeze = Freeze::default();
        // One that said nothing yet has no state to resume (it begins as a new one).
        self.service
            .expect_resumes(resumed.iter().filter(|c| !c.said_nothing()).count());
        let carried_tasks = !tasks.is_empty();
        if carried_tasks {
            // Adopted before any connection is served again, so that a request on one
            // (a `bash_output` sent the moment `dsh upgrade` said it was done) finds
            // its task; their notices wait until the sessions are back, below.
            if let Some(router) = &self.router {
                router.hold();
            }
            self.adopt_tasks(tasks);
        }
        for carried in resumed {
            self.spawn_connection(&connections, Arriving::Resumed(carried), &freeze);
        }
        if carried_tasks {
            // Once their sessions are back: a task that ended is told to its owner's log.
            self.service
                .resumes_done(std::time::Duration::from_secs(10))
                .await;
            if let Some(router) = &self.router {
                router.release();
            }
        }
        let mut upgrading: Option<tokio::task::JoinHandle<()>> = None;
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
                        self.spawn_connection(&connections, Arriving::Accepted(stream), &freeze);
                    }
                }
                Some(order) = upgrade_orders.recv(), if upgrading.is_none() => {
                    self.handing_over.store(true, Ordering::SeqCst);
                    upgrading = Some(tokio::spawn(drain_for_upgrade(
                        order,
                        self.why_tasks_stay(),
                        self.service.clone(),
                        connections.clone(),
                        freeze.clone(),
                        self.upgrade_drain,
                    )));
                }
                drained = join_upgrade(&mut upgrading) => {
                    upgrading = None;
                    if let Err(e) = drained {
                        tracing::error!("the upgrade's drain failed: {e}");
                    }
                    if freeze.token.is_cancelled() {
                        // Returns only when this program serves on: the upgrade failed,
                        // and the connections it froze are served again.
                        let carried = self.hand_over(&listener, &connections, &freeze).await;
                        freeze = Freeze::default();
                        self.service.expect_resumes(0);
                        for connection in carried {
                            self.spawn_connection(&connections, Arriving::Resumed(connection), &freeze);
                        }
                    }
                    self.handing_over.store(false, Ordering::SeqCst);
                }
                () = self.shutdown.cancelled() => break,
            }
        }
        // A stop wins over an upgrade still draining: its connections end as any do.
        if let Some(upgrading) = upgrading {
            upgrading.abort();
        }
        // Stop accepting first: nothing new arrives while the rest shuts down.
        drop(listener);
        self.stop(connections).await;
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_file(Self::program_started_file(path));
        tracing::info!("dsh daemon stopped");
        Ok(())
    }

    /// Serves one connection in a task of `connections`: one just accepted, or one an
    /// upgrade froze, served again from where it was.
    fn spawn_connection(&self, connections: &TaskTracker, arriving: Arriving, freeze: &Freeze) {
        let service: Arc<dyn Service> = self.service.clone();
        let hold = Hold {
            closing: self.closing.clone(),
            freeze: freeze.clone(),
        };
        match arriving {
            Arriving::Accepted(stream) => connections.spawn(serve_new(stream, service, hold)),
            Arriving::Resumed(carried) => connections.spawn(serve_resumed(carried, service, hold)),
        };
    }

    /// SIGTERM and SIGINT pull the shutdown trigger. The streams are made once, here,
    /// for the daemon's whole life (mini-redis hands its server one shutdown future):
    /// tokio tells a signal only to the streams that exist when it arrives, so a stream
    /// made anew on each turn of a loop lost a SIGTERM sent between two turns, or
    /// during an upgrade, which held the loop.
    fn stop_on_signals(&self) {
        use tokio::signal::unix::{SignalKind, signal};
        let (mut term, mut int) = match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(term), Ok(int)) => (term, int),
            (Err(e), _) | (_, Err(e)) => {
                // SIGTERM then keeps its default action: the process ends, unordered.
                tracing::error!("cannot listen for SIGTERM and SIGINT: {e}");
                return;
            }
        };
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: stopping"),
                _ = int.recv() => tracing::info!("SIGINT: stopping"),
                () = shutdown.cancelled() => return,
            }
            shutdown.cancel();
        });
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
            let _ = router.task.await;
        }
    }
}

/// The completion notices' router (T14): the one consumer of the executor's stream of
/// finished tasks, each handed to the session registry (which logs it for its owner).
/// Kept here rather than as a bare task so an upgrade can drain it before the
/// `execve`: a task that ends while it is let go keeps its notice.
struct NoticeRouter {
    task: tokio::task::JoinHandle<()>,
    flushes: tokio::sync::mpsc::UnboundedSender<tokio::sync::oneshot::Sender<()>>,
    /// Whether notices may be delivered now (see [`NoticeRouter::hold`]).
    open: tokio::sync::watch::Sender<bool>,
}

impl NoticeRouter {
    /// `None` when the stream was already taken (one router per executor).
    fn spawn(executor: &Arc<dyn BashExecutor>, sessions: Arc<SessionRegistry>) -> Option<Self> {
        let mut finished = executor.take_completions()?;
        let (flushes, mut asked) =
            tokio::sync::mpsc::unbounded_channel::<tokio::sync::oneshot::Sender<()>>();
        let deliver = move |task: crate::exec::TaskInfo| {
            sessions.deliver_notice(task.id, crate::tools::notices::notice_text(&task));
        };
        let (open, mut is_open) = tokio::sync::watch::channel(true);
        let task = tokio::spawn(async move {
            loop {
                // Held while an upgrade's sessions come back: what ended meanwhile waits
                // in the stream, and is delivered in order once they are.
                if is_open.wait_for(|open| *open).await.is_err() {
                    break;
                }
                tokio::select! {
                    // Opened or held again: look again before taking the next one.
                    _ = is_open.changed() => continue,
                    task = finished.recv() => match task {
                        Some(task) => deliver(task),
                        // The executor has shut down: every notice is delivered.
                        None => break,
                    },
                    Some(done) = asked.recv() => {
                        while let Ok(task) = finished.try_recv() {
                            deliver(task);
                        }
                        let _ = done.send(());
                    }
                }
            }
        });
        Some(Self {
            task,
            flushes,
            open,
        })
    }

    /// Holds delivery until [`NoticeRouter::release`]: a daemon that took running tasks
    /// over adopts them before it serves the connections it took over (so a
    /// `bash_output` on one of them finds its task), while the notice of a task that
    /// ends meanwhile must wait until its owner's session is back.
    fn hold(&self) {
        self.open.send_replace(false);
    }

    /// Delivers again, starting with what waited (see [`NoticeRouter::hold`]).
    fn release(&self) {
        self.open.send_replace(true);
    }

    /// Returns once every notice queued now is delivered.
    async fn flush(&self) {
        let (done, delivered) = tokio::sync::oneshot::channel();
        if self.flushes.send(done).is_ok() {
            let _ = delivered.await;
        }
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

/// One upgrade's freeze, shared by every connection task (a new one after an upgrade
/// that failed: a connection still frozen by the old one can never come back into a
/// list nobody reads again).
#[derive(Clone, Default)]
struct Freeze {
    /// Cancelled to freeze every connection (`rpc::Options::freeze`).
    token: CancellationToken,
    /// Cancelled at the end of the drain: every request still in flight is cancelled
    /// (`rpc::Options::cancel_requests`).
    requests: CancellationToken,
    /// Where a frozen connection goes.
    frozen: FrozenList,
}

/// What every connection task holds besides its own ends: the service's closing of all
/// connections and the upgrade's freeze.
struct Hold {
    closing: CancellationToken,
    freeze: Freeze,
}

impl Hold {
    fn options(&self) -> Options {
        Options {
            stop: self.closing.clone(),
            freeze: self.freeze.token.clone(),
            cancel_requests: self.freeze.requests.clone(),
            ..Options::default()
        }
    }

    fn keep(&self, ends: KeptEnds, unread: Vec<u8>, state: serde_json::Value) {
        self.freeze
            .frozen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(FrozenConnection {
                ends,
                unread,
                state,
            });
    }
}

/// A connection a task of the accept loop serves.
enum Arriving {
    /// Just accepted.
    Accepted(tokio::net::UnixStream),
    /// Frozen by an upgrade (handed over, or kept by one that failed).
    Resumed(FrozenConnection),
}

/// A connection frozen by an upgrade: its descriptors (duplicates, so the objects that
/// served it could go) and where it was.
struct FrozenConnection {
    ends: KeptEnds,
    unread: Vec<u8>,
    state: serde_json::Value,
}

impl FrozenConnection {
    /// Frozen before its first byte was read ([`serve_accepted`]): a socket, a null
    /// state and nothing unread. It begins in the next program as any new connection.
    fn said_nothing(&self) -> bool {
        matches!(self.ends, KeptEnds::Socket(_)) && self.state.is_null() && self.unread.is_empty()
    }
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
        () = hold.freeze.token.cancelled() => {
            // Said nothing yet: a null state (see `serve_resumed`). The peer must see
            // no end: the socket lives on in the duplicate handed over.
            writer.keep_open();
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

/// A connection just accepted. E7: nothing the daemon started (a command however
/// detached, a hook, an MCP server) may drive it (exec::lineage); judged here, in the
/// connection's task, since the walk reads /proc, off the accept loop.
async fn serve_new(stream: tokio::net::UnixStream, service: Arc<dyn Service>, hold: Hold) {
    if let Some(origin) = crate::exec::lineage::started_by(&stream, std::process::id()) {
        tracing::warn!(%origin, "refused a connection from a process dsh started");
        refuse_started(stream, origin).await;
    } else {
        serve_accepted(stream, service, hold).await;
    }
}

/// A connection frozen by an upgrade, served again from where it was. One frozen
/// before it said anything (a null state, nothing unread: [`serve_accepted`]) begins
/// here as any accepted connection does, with whatever it sends first (ACP, or the
/// launcher's hand-over of the editor's pipes).
async fn serve_resumed(carried: FrozenConnection, service: Arc<dyn Service>, hold: Hold) {
    if carried.said_nothing() {
        let KeptEnds::Socket(fd) = carried.ends else {
            return;
        };
        let stream = std::os::unix::net::UnixStream::from(fd);
        match stream
            .set_nonblocking(true)
            .and_then(|()| tokio::net::UnixStream::from_std(stream))
        {
            Ok(stream) => serve_accepted(stream, service, hold).await,
            Err(e) => tracing::error!("a handed-over connection cannot be served: {e}"),
        }
        return;
    }
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
