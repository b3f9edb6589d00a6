//! ACP v1 as dsh speaks it (spec/acp.md): the methods, the session/connection
//! rules, session updates and the permission prompter.
//!
//! [`AcpService`] is the daemon's one ACP service: every connection dispatches into
//! it through the rpc layer. It holds which connection each session is bound to
//! (a connection may address only sessions it created, loaded or resumed), the
//! in-flight prompt of each session, and each session's log. Everything about
//! running tools is delegated to the ToolRegistry (and so the waterfall).

mod auth;
mod ext;
mod files;
mod fork;
mod live;
mod mcp;
mod options;
mod prompter;
mod prompts;
mod sessions;
mod unloading;
pub mod updates;
mod upgrade;

pub use ext::{GrantsResponse, SessionStatus, StatusResponse, TaskSummary};
pub use upgrade::{ConnectionState, UpgradeOrder, UpgradeOutcome, UpgradeStarted};

use crate::agent;
use crate::config::{AgentConfig, Config, ModelConfig};
use crate::exec::BashExecutor;
use crate::llm::Model;
use crate::registry::{Notice, NoticeListener, Session, SessionRegistry};
use crate::rpc::{Peer, RequestContext, RpcError, Service};
use crate::store::{Event, SessionLog, now_ms};
use crate::tools::ToolRegistry;
use agent_client_protocol_schema::v1 as acp;
use dashmap::DashMap;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a replay waits for a client to read before giving up on it.
const REPLAY_STALL: std::time::Duration = std::time::Duration::from_secs(30);

/// Reads the config again, as the daemon first read it (file and command-line overrides).
pub type ConfigSource = Arc<dyn Fn() -> Result<Config, String> + Send + Sync>;

/// What a reload changes besides the waterfall: the model and the turn's settings.
pub(crate) struct Settings {
    /// The model prompts go to; `None` when none is configured.
    pub(crate) model: Option<Arc<dyn Model>>,
    pub(crate) model_config: ModelConfig,
    pub(crate) agent_config: AgentConfig,
    /// `[sessions] close_kills_tasks`.
    pub(crate) close_kills_tasks: bool,
}

/// What a reload did.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadResponse {
    /// The version every call is judged under from now on.
    pub policy_version: String,
    /// Sections that changed but take effect only when the daemon restarts.
    pub restart_needed: Vec<String>,
}

/// How a session's time on its connection ends (see [`AcpService::forget`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Its connection ended: unbound, its tasks and log kept.
    Disconnected,
    /// `session/close`.
    Closed,
    /// `session/delete`.
    Deleted,
}

/// Per-connection state.
struct Connection {
    peer: Peer,
    initialized: AtomicBool,
    /// How the client shows things, from its `initialize`.
    display: std::sync::Mutex<updates::ClientDisplay>,
    /// The agent that serves this connection instead of dsh's own loop (`_dsh/wrap`).
    wrapped: std::sync::OnceLock<Arc<crate::wrap::Wrapped>>,
}

/// The daemon's ACP side, shared by every connection.
pub struct AcpService {
    state_dir: PathBuf,
    /// The model and the turn's settings, swapped whole by a reload.
    settings: std::sync::RwLock<Arc<Settings>>,
    /// The config in force (its `exec` as the daemon started: that needs a restart).
    config: std::sync::Mutex<Config>,
    /// Where a reload reads the config again; `None`: reload is refused.
    source: std::sync::Mutex<Option<ConfigSource>>,
    executor: Option<Arc<dyn BashExecutor>>,
    sessions: Arc<SessionRegistry>,
    tools: Arc<ToolRegistry>,
    /// Each live session's log, binding, prompt, closed mark and MCP servers.
    live: live::LiveSessions,
    connections: DashMap<u64, Arc<Connection>>,
    started: Instant,
    /// When the daemon started, as `dsh status` shows it.
    started_at: std::time::SystemTime,
    /// The state directory's limits, sweep and usage (`crate::state_dir`).
    keeper: Arc<crate::state_dir::StateKeeper>,
    /// The daemon's shutdown trigger (owned by `Daemon`): `_dsh/stop` cancels it.
    shutdown: CancellationToken,
    /// Where `_dsh/upgrade` asks the serve loop to hand over (`None`: refused).
    upgrades: std::sync::Mutex<Option<tokio::sync::mpsc::Sender<UpgradeOrder>>>,
    /// How the last upgrade went (`_dsh/upgrade/outcome`).
    last_upgrade: std::sync::Mutex<Option<UpgradeOutcome>>,
    /// Connections handed over by an upgrade whose sessions are not attached yet.
    resumes: upgrade::Resumes,
    this: Weak<AcpService>,
}

/// Writes each completion notice to its session's log, so it survives a
/// disconnect and a restart (T14), and shows it to the session's client, if one is
/// bound, as a replay of the log will show it. A closed session whose last task this
/// was is unloaded then.
struct LogNotices(Weak<AcpService>);

impl NoticeListener for LogNotices {
    fn notice(&self, session: &Session, notice: &Notice) {
        let Some(agent) = self.0.upgrade() else {
            return;
        };
        match agent.live.log(&session.id) {
            Some(log) => {
                let at_ms = now_ms();
                agent.append(
                    &log,
                    Event::Notice {
                        at_ms,
                        source: notice.source.to_string(),
                        task_id: notice.task_id.to_string(),
                        text: notice.text.clone(),
                    },
                );
                agent.send_turn_event(
                    &session.id,
                    agent::TurnEvent::UserText {
                        text: &agent::context_text(notice.source, &notice.text),
                        message_id: &crate::store::notice_message_id(
                            at_ms,
                            notice.source,
                            &notice.text,
                        ),
                    },
                );
                agent.unload(&session.id, unloading::Unload::IfIdle);
            }
            // Unloaded since the registry found it (its last task's notice routed as it
            // was closed), or never loaded on this side: only its log on disk keeps it.
            None => agent.notice_to_unloaded(&session.id, notice),
        }
    }

    fn unloaded(&self, session_id: &str, notice: &Notice) {
        if let Some(agent) = self.0.upgrade() {
            agent.notice_to_unloaded(session_id, notice);
        }
    }
}

fn parse<P: DeserializeOwned>(params: &jsonrpsee::types::Params<'_>) -> Result<P, RpcError> {
    let raw = params.as_str().unwrap_or("null");
    serde_json::from_str(raw).map_err(|e| RpcError::invalid_params(e.to_string()))
}

fn to_value<T: serde::Serialize>(v: T) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError::internal(e.to_string()))
}

impl AcpService {
    /// The ACP service over an executor (none: no bash tools) and the registry.
    pub fn new(
        config: Config,
        model: Option<Arc<dyn Model>>,
        executor: Option<Arc<dyn BashExecutor>>,
        sessions: Arc<SessionRegistry>,
        tools: Arc<ToolRegistry>,
        shutdown: CancellationToken,
    ) -> Arc<Self> {
        let state_dir = config.exec.state_dir();
        let keeper = Arc::new(crate::state_dir::StateKeeper::new(
            state_dir.clone(),
            config.state.clone(),
            executor.clone(),
        ));
        let settings = Settings {
            model,
            model_config: config.model.clone(),
            agent_config: config.agent.clone(),
            close_kills_tasks: config.sessions.close_kills_tasks,
        };
        let agent = Arc::new_cyclic(|this| AcpService {
            state_dir,
            settings: std::sync::RwLock::new(Arc::new(settings)),
            config: std::sync::Mutex::new(config),
            source: std::sync::Mutex::new(None),
            executor,
            sessions: sessions.clone(),
            tools,
            live: live::LiveSessions::default(),
            connections: DashMap::new(),
            started: Instant::now(),
            started_at: std::time::SystemTime::now(),
            keeper,
            shutdown,
            upgrades: std::sync::Mutex::new(None),
            last_upgrade: std::sync::Mutex::new(None),
            resumes: Default::default(),
            this: this.clone(),
        });
        sessions.add_notice_listener(Arc::new(LogNotices(Arc::downgrade(&agent))));
        agent
    }

    /// The model and turn settings in force now.
    pub(crate) fn settings(&self) -> Arc<Settings> {
        self.settings
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The keeper of the state directory (the daemon runs its periodic sweep).
    pub fn state_keeper(&self) -> Arc<crate::state_dir::StateKeeper> {
        self.keeper.clone()
    }

    /// Where a reload reads the config again.
    pub fn set_config_source(&self, source: ConfigSource) {
        *self.source.lock().unwrap_or_else(|p| p.into_inner()) = Some(source);
    }

    /// Reads the config again and, if its rules' examples and tests pass and its model
    /// can be built, puts it in force: the waterfall (policy and hooks) at once (calls
    /// already past the policy finish under the old one), the model and the turn's
    /// settings from the next request. What only a restart can change (the executor,
    /// the state directory) is named, not applied. A config that fails changes nothing;
    /// `Err` lists why.
    pub async fn reload(&self) -> Result<ReloadResponse, Vec<String>> {
        let source = self
            .source
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| vec!["this daemon has no config source to read again".to_string()])?;
        let mut new = source().map_err(|e| vec![e])?;
        let mut failed = crate::policy::check_config(&new.permissions);
        failed.extend(crate::policy::check_network(&new.exec.sandbox.network));
        if !failed.is_empty() {
            return Err(failed.iter().map(|f| f.to_string()).collect());
        }
        let model = crate::llm::openai::configured(&new.model).map_err(|e| vec![e])?;
        let mut restart_needed = Vec::new();
        {
            let old = self.config.lock().unwrap_or_else(|p| p.into_inner());
            let toml_of = |e: &crate::config::ExecConfig| toml::to_string(e).unwrap_or_default();
            if toml_of(&old.exec) != toml_of(&new.exec) {
                restart_needed.push("exec".to_string());
            }
            // The executor keeps running as started: the config in force says so.
            new.exec = old.exec.clone();
            // The logs' rotation is fixed when their files are opened; the spill
            // limits apply from the next sweep.
            let rotations = |s: &crate::config::StateConfig| {
                (s.audit_max_bytes, s.audit_keep, s.log_max_bytes, s.log_keep)
            };
            if rotations(&old.state) != rotations(&new.state) {
                restart_needed.push("state".to_string());
            }
            // As `exec`: the config in force says the rotation the files have.
            (
                new.state.audit_max_bytes,
                new.state.audit_keep,
                new.state.log_max_bytes,
                new.state.log_keep,
            ) = rotations(&old.state);
        }
        self.keeper.set_config(new.state.clone());
        let policy_version = self.tools.reload(&new).await;
        *self.settings.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Settings {
            model,
            model_config: new.model.clone(),
            agent_config: new.agent.clone(),
            close_kills_tasks: new.sessions.close_kills_tasks,
        });
        self.sessions.set_default_mode(new.permissions.default_mode);
        self.sessions
            .user_grants()
            .set_remember(new.permissions.remember == crate::config::Remember::User);
        *self.config.lock().unwrap_or_else(|p| p.into_inner()) = new;
        Ok(ReloadResponse {
            policy_version,
            restart_needed,
        })
    }

    /// Cancels every in-flight prompt (daemon shutdown).
    pub fn cancel_all_prompts(&self) {
        self.live.cancel_all_prompts();
    }

    /// Closes every connection.
    pub fn close_all_connections(&self) {
        for c in self.connections.iter() {
            c.peer.close();
        }
    }

    fn append(&self, log: &SessionLog, event: Event) {
        if let Err(e) = log.append(&event) {
            tracing::error!(path = %log.path().display(), "session log append failed: {e}");
        }
    }

    fn log_of(&self, session_id: &str) -> Option<Arc<SessionLog>> {
        self.live.log(session_id)
    }

    fn connection(&self, ctx: &RequestContext) -> Arc<Connection> {
        self.connections
            .entry(ctx.peer.id())
            .or_insert_with(|| {
                Arc::new(Connection {
                    peer: ctx.peer.clone(),
                    initialized: AtomicBool::new(false),
                    display: Default::default(),
                    wrapped: Default::default(),
                })
            })
            .clone()
    }

    fn require_initialized(&self, ctx: &RequestContext) -> Result<(), RpcError> {
        if self.connection(ctx).initialized.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(RpcError::invalid_request("initialize must come first"))
        }
    }

    /// The session if this connection may address it; "not found" otherwise,
    /// never revealing that it exists elsewhere.
    fn addressable(
        &self,
        ctx: &RequestContext,
        session_id: &str,
    ) -> Result<Arc<Session>, RpcError> {
        let bound = self.live.bound_to(session_id);
        match (bound, self.sessions.get(session_id)) {
            (Some(peer), Some(session)) if peer == ctx.peer.id() => Ok(session),
            _ => Err(RpcError::not_found(format!(
                "session {session_id} not found"
            ))),
        }
    }

    /// The session a `_dsh/*` request names in an optional `sessionId`, if this connection
    /// may address it.
    fn optional_session(
        &self,
        ctx: &RequestContext,
        session_id: Option<&str>,
    ) -> Result<Option<Arc<Session>>, RpcError> {
        session_id.map(|id| self.addressable(ctx, id)).transpose()
    }

    /// Sends an update to whichever connection the session is bound to now.
    fn send_update(&self, session_id: &str, update: acp::SessionUpdate) {
        self.send_to_bound(session_id, |_| update);
    }

    /// Sends a turn's event to whichever connection the session is bound to now, shown
    /// the way that client can show it.
    fn send_turn_event(&self, session_id: &str, event: agent::TurnEvent<'_>) {
        self.send_to_bound(session_id, |display| updates::from_turn(event, display));
        if let agent::TurnEvent::ModeChanged(_) = event
            && let Some(session) = self.sessions.get(session_id)
        {
            // The mode is a config option too (Zed's selector shows that one).
            self.send_update(session_id, sessions::config_options_update(self, &session));
        }
    }

    fn send_to_bound(
        &self,
        session_id: &str,
        update: impl FnOnce(updates::ClientDisplay) -> acp::SessionUpdate,
    ) {
        let Some(peer) = self.live.bound_to(session_id) else {
            return;
        };
        if let Some(conn) = self.connections.get(&peer) {
            let display = *conn.display.lock().unwrap_or_else(|e| e.into_inner());
            let _ = conn.peer.notify(
                "session/update",
                updates::notification(session_id, update(display)),
            );
        }
    }

    /// Binds `session` to the connection of `ctx` (a new session: nobody else holds it)
    /// and gives it that client's prompter and files.
    fn bind(&self, ctx: &RequestContext, session: &Arc<Session>) {
        self.live
            .update(&session.id, |e| e.bound_to = Some(ctx.peer.id()));
        session.set_prompter(Some(Arc::new(prompter::AcpPrompter::new(
            self.this.clone(),
            session.id.clone(),
        ))));
        session.set_client_files(Some(Arc::new(files::AcpFiles::new(
            self.this.clone(),
            session.id.clone(),
        ))));
    }

    async fn initialize(&self, ctx: RequestContext, p: Value) -> Result<Value, RpcError> {
        let connection = self.connection(&ctx);
        *connection.display.lock().unwrap_or_else(|e| e.into_inner()) =
            updates::ClientDisplay::from_capabilities(p.get("clientCapabilities"));
        connection.initialized.store(true, Ordering::SeqCst);
        let mut meta = serde_json::Map::new();
        meta.insert(
            "dsh".into(),
            json!({"methods": ["_dsh/tools/call", "_dsh/tasks/list", "_dsh/tasks/kill",
                               "_dsh/status", "_dsh/stop", "_dsh/policy/explain",
                               "_dsh/config/reload", "_dsh/session/grants",
                               "_dsh/session/revoke", "_dsh/user/grants",
                               "_dsh/user/revoke", "_dsh/session/fork",
                               "_dsh/state/gc"],
                   "executor": self.executor_kind()}),
        );
        let caps = acp::AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(
                acp::PromptCapabilities::new()
                    .embedded_context(true)
                    .image(self.settings().model_config.vision),
            )
            .session_capabilities(
                acp::SessionCapabilities::new()
                    .list(acp::SessionListCapabilities::new())
                    .resume(acp::SessionResumeCapabilities::new())
                    .close(acp::SessionCloseCapabilities::new())
                    .delete(acp::SessionDeleteCapabilities::new())
                    // The sandbox executor makes them writable (ExecRequest.writable_roots).
                    .additional_directories(acp::SessionAdditionalDirectoriesCapabilities::new()),
            )
            .auth(acp::AgentAuthCapabilities::new().logout(acp::LogoutCapabilities::new()))
            .meta(meta);
        let mut answer = to_value(
            acp::InitializeResponse::new(agent_client_protocol_schema::ProtocolVersion::V1)
                .agent_capabilities(caps)
                .auth_methods(auth::methods())
                .agent_info(
                    acp::Implementation::new("dsh", env!("CARGO_PKG_VERSION")).title("dsh"),
                ),
        )?;
        // `session/fork` is a draft the schema crate keeps behind a feature: said here.
        answer["agentCapabilities"]["sessionCapabilities"]["fork"] = json!({});
        Ok(answer)
    }

    fn executor_kind(&self) -> &'static str {
        self.executor.as_ref().map(|e| e.kind()).unwrap_or("none")
    }

    fn connection_closed(&self, peer: &Peer) {
        if let Some((_, conn)) = self.connections.remove(&peer.id())
            && let Some(wrapped) = conn.wrapped.get().cloned()
        {
            // Its agent and everything it started go with the connection.
            tokio::spawn(async move { wrapped.stop().await });
        }
        for id in self.live.bound_to_peer(peer.id()) {
            // Unbound at once, and only if still this connection's: a load from another
            // connection may have taken the session since the list was made.
            if self.release(&id, Some(peer.id()))
                && let Some(agent) = self.this.upgrade()
            {
                // The servers, this client's, go with it.
                tokio::spawn(async move { agent.forget(&id, Ending::Disconnected).await });
            }
        }
    }

    /// The part of ending a session that cannot wait, in one step of its entry: it is
    /// unbound and its prompt cancelled (its questions settle), then its client's
    /// prompter and files go. With `from`, only if connection `from` still holds it;
    /// whether it was released.
    fn release(&self, id: &str, from: Option<u64>) -> bool {
        let released = self.live.update(id, |e| {
            let ours = from.is_none_or(|peer| e.bound_to == Some(peer));
            if ours {
                e.bound_to = None;
                if let Some(prompt) = &e.prompt {
                    prompt.cancel();
                }
            }
            ours
        });
        if released && let Some(session) = self.sessions.get(id) {
            session.set_prompter(None);
            session.set_client_files(None);
        }
        released
    }

    /// Tells the `session_end` hooks of every session still open that it ends with the
    /// daemon (`shutdown`), all at once; one its client closed was told at its close.
    pub async fn end_sessions(&self) {
        let open: Vec<_> = self
            .sessions
            .sessions()
            .into_iter()
            .filter(|s| !self.live.is_closed(&s.id))
            .collect();
        futures::future::join_all(
            open.iter().map(|s| async move {
                self.tools.hooks_for(s).on_session_end(s, "shutdown").await
            }),
        )
        .await;
    }

    /// Ends a session's time on its connection, the one path for a close, a delete and
    /// a connection's end: released, its MCP servers stopped; then, when `ending` kills
    /// its tasks (a delete, a close under `close_kills_tasks`), the tasks go and the
    /// session is unloaded; otherwise a close marks it closed, and it is unloaded if
    /// nothing needs it (`unloading.rs`), else when that ends.
    async fn forget(&self, id: &str, ending: Ending) {
        // Unbound first: a start of its servers still in flight then stops what it started.
        // A disconnect released it already, only if it was still that connection's.
        if ending != Ending::Disconnected {
            self.release(id, None);
        }
        self.stop_unbound_mcp(id).await;
        let how = match ending {
            Ending::Disconnected => None,
            Ending::Closed => Some("close"),
            Ending::Deleted => Some("delete"),
        };
        if let (Some(how), Some(session)) = (how, self.sessions.get(id)) {
            self.tools
                .hooks_for(&session)
                .on_session_end(&session, how)
                .await;
        }
        let kill_tasks = match ending {
            Ending::Disconnected => false,
            Ending::Closed => self.settings().close_kills_tasks,
            Ending::Deleted => true,
        };
        if kill_tasks {
            if let Some(exec) = &self.executor {
                exec.kill_scope(id).await;
            }
            self.unload(id, unloading::Unload::Now);
        } else {
            if ending == Ending::Closed {
                self.live.update(id, |e| e.closed = true);
            }
            self.unload(id, unloading::Unload::IfIdle);
        }
    }

    /// The wrapped agent serving the connection of `ctx`, if one does.
    fn wrapped(&self, ctx: &RequestContext) -> Option<Arc<crate::wrap::Wrapped>> {
        self.connections
            .get(&ctx.peer.id())
            .and_then(|c| c.wrapped.get().cloned())
    }

    /// `_dsh/wrap` (issue 44): this connection is served from now on by the
    /// `[[agents]]` entry it names, started through the daemon's executor. Only as the
    /// connection's first request (the launcher's, before the editor's `initialize`).
    async fn wrap_connection(
        &self,
        ctx: RequestContext,
        p: crate::wrap::WrapRequest,
    ) -> Result<Value, RpcError> {
        let connection = self.connection(&ctx);
        if connection.initialized.load(Ordering::SeqCst) {
            return Err(RpcError::invalid_request(
                "_dsh/wrap must come before initialize",
            ));
        }
        let agent = self
            .config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .agents
            .iter()
            .find(|a| a.name == p.agent)
            .cloned()
            .ok_or_else(|| {
                RpcError::invalid_params(format!("no [[agents]] entry is named `{}`", p.agent))
            })?;
        let executor = self.executor.clone().ok_or_else(|| {
            RpcError::invalid_request("the executor is `none`: no agent can be started")
        })?;
        if !p.cwd.is_absolute() {
            return Err(RpcError::invalid_params("cwd must be absolute"));
        }
        let daemon = crate::wrap::Daemon {
            executor,
            sessions: self.sessions.clone(),
            tools: self.tools.clone(),
        };
        let wrapped = crate::wrap::Wrapped::start(agent, p.cwd, ctx.peer.clone(), daemon)
            .await
            .map_err(RpcError::internal)?;
        if let Err(wrapped) = connection.wrapped.set(wrapped) {
            wrapped.stop().await;
            return Err(RpcError::invalid_request(
                "this connection is wrapped already",
            ));
        }
        Ok(json!({}))
    }

    /// The connection a session is bound to now, and how its client shows things.
    fn peer_of(&self, session_id: &str) -> Option<(Peer, updates::ClientDisplay)> {
        let id = self.live.bound_to(session_id)?;
        self.connections.get(&id).map(|c| {
            let display = *c.display.lock().unwrap_or_else(|e| e.into_inner());
            (c.peer.clone(), display)
        })
    }
}

macro_rules! register {
    ($module:expr, $name:literal, $method:ident) => {
        $module
            .register_async_method($name, |params, agent: Arc<AcpService>, ext| async move {
                let ctx = ext
                    .get::<RequestContext>()
                    .cloned()
                    .ok_or_else(|| RpcError::internal("no request context"))?;
                // A wrapped connection's requests are its agent's to answer.
                if let Some(wrapped) = agent.wrapped(&ctx) {
                    let p: Value = parse(&params)?;
                    return wrapped.from_editor($name, p, &ctx.cancel).await;
                }
                if $name != "initialize" && $name != "_dsh/wrap" {
                    agent.require_initialized(&ctx)?;
                }
                let p = parse(&params)?;
                agent.$method(ctx, p).await
            })
            .expect("method names are unique");
    };
}

impl Service for AcpService {
    fn methods(&self) -> jsonrpsee::Methods {
        let Some(agent) = self.this.upgrade() else {
            return jsonrpsee::Methods::new();
        };
        let mut m = jsonrpsee::RpcModule::from_arc(agent);
        register!(m, "initialize", initialize);
        register!(m, "authenticate", authenticate);
        register!(m, "logout", logout);
        register!(m, "session/new", new_session);
        register!(m, "session/load", load_session);
        register!(m, "session/resume", resume_session);
        register!(m, "session/list", list_sessions);
        register!(m, "session/close", close_session);
        register!(m, "session/delete", delete_session);
        register!(m, "session/set_mode", set_mode);
        register!(m, "session/set_config_option", set_config_option);
        register!(m, "session/prompt", prompt);
        register!(m, "_dsh/tools/call", tools_call);
        register!(m, "_dsh/tasks/list", tasks_list);
        register!(m, "_dsh/tasks/kill", tasks_kill);
        register!(m, "_dsh/status", status);
        register!(m, "_dsh/state/gc", state_gc);
        register!(m, "_dsh/stop", stop);
        register!(m, "_dsh/upgrade", upgrade);
        register!(m, "_dsh/upgrade/outcome", upgrade_outcome);
        register!(m, "_dsh/config/reload", config_reload);
        register!(m, "_dsh/session/grants", session_grants);
        register!(m, "_dsh/session/revoke", session_revoke);
        register!(m, "_dsh/user/grants", user_grants);
        register!(m, "_dsh/user/revoke", user_revoke);
        register!(m, "_dsh/policy/explain", policy_explain);
        register!(m, "_dsh/session/fork", fork_session);
        register!(m, "session/fork", fork_session);
        register!(m, "_dsh/wrap", wrap_connection);
        m.into()
    }

    fn notification(&self, peer: &Peer, method: &str, params: Option<Value>) {
        if let Some(wrapped) = self
            .connections
            .get(&peer.id())
            .and_then(|c| c.wrapped.get().cloned())
        {
            return wrapped.editor_notification(method, params);
        }
        match method {
            "session/cancel" => self.cancel_notification(peer, params),
            other => tracing::debug!(method = other, "ignored notification"),
        }
    }

    fn closed(&self, peer: &Peer) {
        self.connection_closed(peer);
    }

    fn freeze(&self, peer: &Peer) -> Value {
        self.freeze_connection(peer)
    }

    fn resume(
        &self,
        peer: &Peer,
        state: Value,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        match self.this.upgrade() {
            Some(agent) => Box::pin(agent.resume_connection(peer.clone(), state)),
            None => Box::pin(async {}),
        }
    }
}
