//! The daemon process: builds the shared pieces once (executor, registry, tools,
//! ACP service) and serves connections on a private unix socket or on stdio,
//! until a signal or `_dsh/stop` asks it to shut down.
//!
//! Shutdown order matters: stop accepting, cancel prompts (which settles pending
//! permission questions), close connections, kill every task (E3) and wait,
//! then remove the socket. Session logs need no flush: every append is already
//! one complete write.

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
use tokio_util::task::TaskTracker;

/// Where the daemon listens unless told otherwise: `$XDG_RUNTIME_DIR/dsh/dsh.sock`,
/// else `/tmp/dsh-<uid>/dsh.sock`.
pub fn default_socket_path() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("dsh/dsh.sock"),
        None => PathBuf::from(format!("/tmp/dsh-{}/dsh.sock", nix::unistd::getuid())),
    }
}

/// Everything one daemon process shares between its connections.
pub struct Daemon {
    pub agent: Arc<AcpService>,
    executor: Option<Arc<dyn BashExecutor>>,
    /// The completion-notice router; it ends after the executor's shutdown, once
    /// every notice is delivered (and logged).
    router: Option<tokio::task::JoinHandle<()>>,
}

impl Daemon {
    /// Builds the daemon from its config; fails with a message fit for a person.
    pub fn build(config: Config) -> Result<Self, String> {
        let state_dir = config.exec.state_dir();
        crate::fsutil::ensure_private_dir(&state_dir).map_err(|e| e.to_string())?;
        let executor = crate::exec::from_config(&config.exec)?;
        let sessions = Arc::new(SessionRegistry::new(config.permissions.default_mode));
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
        let model = crate::llm::openai::OpenAiModel::from_config(&config.model, |name| {
            std::env::var(name).ok()
        })?
        .map(|m| {
            tracing::info!(model = %crate::llm::Model::describe(&m), "model configured");
            Arc::new(m) as Arc<dyn crate::llm::Model>
        });
        let agent = AcpService::new(config, model, executor.clone(), sessions, tools);
        Ok(Self {
            agent,
            executor,
            router,
        })
    }

    /// Serves exactly one connection on stdin/stdout, then shuts down.
    pub async fn serve_stdio(mut self) {
        let service: Arc<dyn Service> = self.agent.clone();
        let conn = rpc::serve_connection(
            tokio::io::stdin(),
            tokio::io::stdout(),
            service,
            Options::default(),
        );
        tokio::select! {
            () = conn => {}
            () = shutdown_signal() => {}
            () = self.agent.stop_requested.cancelled() => {}
        }
        self.shutdown().await;
    }

    /// Serves the unix socket at `path` until a signal or `_dsh/stop`.
    pub async fn serve_socket(mut self, path: &Path) -> Result<(), String> {
        let listener = bind_socket(path).await?;
        // The one line on stdout: people (and tests) learn the daemon is ready.
        println!("dsh daemon listening on {}", path.display());
        tracing::info!(socket = %path.display(), pid = std::process::id(), "dsh daemon listening");
        let me = nix::unistd::getuid().as_raw();
        let connections = TaskTracker::new();
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
                    let (reader, writer) = stream.into_split();
                    let service: Arc<dyn Service> = self.agent.clone();
                    connections.spawn(rpc::serve_connection(reader, writer, service, Options::default()));
                }
                () = shutdown_signal() => break,
                () = self.agent.stop_requested.cancelled() => break,
            }
        }
        drop(listener);
        self.agent.cancel_all_prompts();
        self.agent.close_all_connections();
        connections.close();
        connections.wait().await;
        self.shutdown().await;
        let _ = std::fs::remove_file(path);
        tracing::info!("dsh daemon stopped");
        Ok(())
    }

    async fn shutdown(&mut self) {
        self.agent.cancel_all_prompts();
        if let Some(exec) = &self.executor {
            exec.shutdown().await;
        }
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
