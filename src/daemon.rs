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
        let router = executor
            .as_ref()
            .and_then(|exec| crate::tools::notices::spawn_router(exec, sessions.clone()));
        let audit = Arc::new(
            AuditLog::open(&state_dir.join("audit.jsonl"))
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
        let shutdown = CancellationToken::new();
        let service = AcpService::new(
            config,
            model,
            executor.clone(),
            sessions,
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
                let running = executor
                    .as_ref()
                    .is_some_and(|e| e.list().iter().any(|t| !t.status.is_finished()));
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
        self.tools.hooks().start_servers().await;
        self.reload_on_sighup();
        // The one line on stdout: people (and tests) learn the daemon is ready.
        println!("dsh daemon listening on {}", path.display());
        tracing::info!(socket = %path.display(), pid = std::process::id(), "dsh daemon listening");
        let me = nix::unistd::getuid().as_raw();
        let connections = TaskTracker::new();
        self.watch_idle(&connections);
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
                    // SO_PEERCRED: another user's connection is closed before a byte is read.
                    match stream.peer_cred() {
                        Ok(cred) if cred.uid() == me => {}
                        Ok(cred) => {
                            tracing::warn!(uid = cred.uid(), "refused a connection from another user");
                            continue;
                        }
                        Err(e) => {
                            tracing::warn!("cannot read peer credentials, refusing: {e}");
                            continue;
                        }
                    }
                    let service: Arc<dyn Service> = self.service.clone();
                    let closing = self.closing.clone();
                    connections.spawn(async move {
                        // E7: nothing the daemon started (a command however detached, a
                        // hook, an MCP server) may drive it (exec::lineage). Judged in the
                        // connection's task: the walk reads /proc, off the accept loop.
                        let me = std::process::id();
                        if let Some(origin) = crate::exec::lineage::started_by(&stream, me) {
                            tracing::warn!(%origin, "refused a connection from a process dsh started");
                            refuse_started(stream, origin).await;
                        } else {
                            serve_accepted(stream, service, closing).await;
                        }
                    });
                }
                () = self.triggered() => break,
            }
        }
        // Stop accepting first: nothing new arrives while the rest shuts down.
        drop(listener);
        self.stop(connections).await;
        let _ = std::fs::remove_file(path);
        tracing::info!("dsh daemon stopped");
        Ok(())
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

/// One accepted connection, from its first byte to its end: ACP on the socket, or,
/// when a launcher hands over the editor's pipes (`rpc::handover`), ACP on those
/// with the socket kept as the launcher's lifeline.
async fn serve_accepted(
    stream: tokio::net::UnixStream,
    service: Arc<dyn Service>,
    closing: CancellationToken,
) {
    use rpc::handover::{self, Arrival};
    use tokio::io::AsyncWriteExt;
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
    // first bytes arrive (here) and after (`Options::stop`).
    let arrival = tokio::select! {
        arrival = handover::arrival(&reader) => arrival,
        () = closing.cancelled() => return,
    };
    let options = Options {
        stop: closing,
        ..Options::default()
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
            rpc::serve_connection(reader, writer, service, options).await;
        }
        Arrival::Refused => {
            tracing::warn!("a hand-over without two pipes; serving the socket instead");
            if writer.write_all(handover::REFUSED.as_bytes()).await.is_ok() {
                rpc::serve_connection(reader, writer, service, options).await;
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
            let input = handover::Lifelined::new(input, reader);
            rpc::serve_connection(input, output, service, options).await;
            // Dropping `writer` (and the reader inside `input`, gone with the
            // connection) closes the socket: the launcher sees it and exits.
            drop(writer);
        }
    }
}
