//! ACP v1 as dsh speaks it (spec/acp.md): the methods, the session/connection
//! rules, session updates and the permission prompter.
//!
//! [`AcpService`] is the daemon's one ACP service: every connection dispatches into
//! it through the rpc layer. It holds which connection each session is bound to
//! (a connection may address only sessions it created, loaded or resumed), the
//! in-flight prompt of each session, and each session's log. Everything about
//! running tools is delegated to the ToolRegistry (and so the waterfall).

mod prompter;
pub mod updates;

use crate::agent;
use crate::config::{AgentConfig, Config, Mode, ModelConfig};
use crate::exec::{BashExecutor, TaskStatus};
use crate::hooks::waterfall::ToolExecution;
use crate::llm::Model;
use crate::registry::{Notice, NoticeListener, Session, SessionRegistry};
use crate::rpc::{Peer, RequestContext, RpcError, Service};
use crate::store::{self, Event, Header, SessionLog, iso8601, now_ms};
use crate::tools::ToolRegistry;
use agent_client_protocol_schema::v1 as acp;
use dashmap::DashMap;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a replay waits for a client to read before giving up on it.
const REPLAY_STALL: std::time::Duration = std::time::Duration::from_secs(30);

/// Per-connection state.
struct Connection {
    peer: Peer,
    initialized: AtomicBool,
}

/// The daemon's ACP side, shared by every connection.
pub struct AcpService {
    state_dir: PathBuf,
    /// The model prompts go to; `None` when none is configured.
    model: Option<Arc<dyn Model>>,
    model_config: ModelConfig,
    agent_config: AgentConfig,
    executor: Option<Arc<dyn BashExecutor>>,
    sessions: Arc<SessionRegistry>,
    tools: Arc<ToolRegistry>,
    logs: DashMap<String, Arc<SessionLog>>,
    /// Session id -> id of the live connection it is bound to.
    bindings: DashMap<String, u64>,
    connections: DashMap<u64, Arc<Connection>>,
    /// Session id -> cancel token of its in-flight prompt.
    prompts: DashMap<String, CancellationToken>,
    started: Instant,
    /// The daemon's shutdown trigger (owned by `Daemon`): `_dsh/stop` cancels it.
    shutdown: CancellationToken,
    this: Weak<AcpService>,
}

/// Writes each completion notice to its session's log, so it survives a
/// disconnect and a restart (T14).
struct LogNotices(Weak<AcpService>);

impl NoticeListener for LogNotices {
    fn notice(&self, session: &Session, notice: &Notice) {
        if let Some(agent) = self.0.upgrade()
            && let Some(log) = agent.logs.get(&session.id)
        {
            agent.append(
                &log,
                Event::Notice {
                    at_ms: now_ms(),
                    source: notice.source.to_string(),
                    task_id: notice.task_id.clone(),
                    text: notice.text.clone(),
                },
            );
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

fn modes_state(current: Mode) -> acp::SessionModeState {
    let describe = |m: Mode| match m {
        Mode::Ask => "Rules decide; anything they do not cover is asked",
        Mode::Auto => "Rules decide; anything they do not cover runs (deny rules still apply)",
        Mode::ReadOnly => "Only commands known to read run; everything else is refused",
    };
    let name = |m: Mode| match m {
        Mode::Ask => "Ask",
        Mode::Auto => "Auto",
        Mode::ReadOnly => "Read-only",
    };
    acp::SessionModeState::new(
        current.id().to_string(),
        [Mode::Ask, Mode::Auto, Mode::ReadOnly]
            .into_iter()
            .map(|m| acp::SessionMode::new(m.id().to_string(), name(m)).description(describe(m)))
            .collect(),
    )
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
        let agent = Arc::new_cyclic(|this| AcpService {
            state_dir,
            model,
            model_config: config.model,
            agent_config: config.agent,
            executor,
            sessions: sessions.clone(),
            tools,
            logs: DashMap::new(),
            bindings: DashMap::new(),
            connections: DashMap::new(),
            prompts: DashMap::new(),
            started: Instant::now(),
            shutdown,
            this: this.clone(),
        });
        sessions.add_notice_listener(Arc::new(LogNotices(Arc::downgrade(&agent))));
        agent
    }

    /// Cancels every in-flight prompt (daemon shutdown).
    pub fn cancel_all_prompts(&self) {
        for p in self.prompts.iter() {
            p.value().cancel();
        }
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
        self.logs.get(session_id).map(|l| l.clone())
    }

    fn connection(&self, ctx: &RequestContext) -> Arc<Connection> {
        self.connections
            .entry(ctx.peer.id())
            .or_insert_with(|| {
                Arc::new(Connection {
                    peer: ctx.peer.clone(),
                    initialized: AtomicBool::new(false),
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
        let bound = self.bindings.get(session_id).map(|b| *b);
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
        params: &Value,
    ) -> Result<Option<Arc<Session>>, RpcError> {
        match params.get("sessionId") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(id)) => self.addressable(ctx, id).map(Some),
            Some(_) => Err(RpcError::invalid_params("`sessionId` must be a string")),
        }
    }

    /// Sends an update to whichever connection the session is bound to now.
    fn send_update(&self, session_id: &str, update: acp::SessionUpdate) {
        let Some(peer) = self.bindings.get(session_id).map(|b| *b) else {
            return;
        };
        if let Some(conn) = self.connections.get(&peer) {
            let _ = conn
                .peer
                .notify("session/update", updates::notification(session_id, update));
        }
    }

    fn bind(&self, ctx: &RequestContext, session: &Arc<Session>) {
        self.bindings.insert(session.id.clone(), ctx.peer.id());
        session.set_prompter(Some(Arc::new(prompter::AcpPrompter::new(
            self.this.clone(),
            session.id.clone(),
        ))));
    }

    fn check_cwd(cwd: &Path) -> Result<(), RpcError> {
        if !cwd.is_absolute() {
            return Err(RpcError::invalid_params(format!(
                "cwd must be an absolute path, got {}",
                cwd.display()
            )));
        }
        match std::fs::metadata(cwd) {
            Ok(m) if m.is_dir() => Ok(()),
            Ok(_) => Err(RpcError::invalid_params(format!(
                "cwd is not a directory: {}",
                cwd.display()
            ))),
            Err(e) => Err(RpcError::invalid_params(format!(
                "cwd is not usable: {}: {e}",
                cwd.display()
            ))),
        }
    }

    async fn initialize(&self, ctx: RequestContext, _p: Value) -> Result<Value, RpcError> {
        self.connection(&ctx)
            .initialized
            .store(true, Ordering::SeqCst);
        let mut meta = serde_json::Map::new();
        meta.insert(
            "dsh".into(),
            json!({"methods": ["_dsh/tools/call", "_dsh/tasks/list", "_dsh/status", "_dsh/stop",
                               "_dsh/policy/explain"],
                   "executor": self.executor_kind()}),
        );
        let caps = acp::AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(acp::PromptCapabilities::new().embedded_context(true))
            .session_capabilities(
                acp::SessionCapabilities::new()
                    .list(acp::SessionListCapabilities::new())
                    .resume(acp::SessionResumeCapabilities::new())
                    .close(acp::SessionCloseCapabilities::new())
                    // The sandbox executor makes them writable (ExecRequest.writable_roots).
                    .additional_directories(acp::SessionAdditionalDirectoriesCapabilities::new()),
            )
            .meta(meta);
        to_value(
            acp::InitializeResponse::new(agent_client_protocol_schema::ProtocolVersion::V1)
                .agent_capabilities(caps)
                .auth_methods(vec![])
                .agent_info(
                    acp::Implementation::new("dsh", env!("CARGO_PKG_VERSION")).title("dsh"),
                ),
        )
    }

    fn executor_kind(&self) -> &'static str {
        self.executor.as_ref().map(|e| e.kind()).unwrap_or("none")
    }

    async fn new_session(
        &self,
        ctx: RequestContext,
        p: acp::NewSessionRequest,
    ) -> Result<Value, RpcError> {
        Self::check_cwd(&p.cwd)?;
        let session = self.sessions.create(p.cwd.clone());
        session.set_extra_roots(&p.additional_directories);
        let header = Header {
            id: session.id.clone(),
            cwd: p.cwd.clone(),
            created_ms: now_ms(),
            title: None,
        };
        let log = SessionLog::create(&self.state_dir, &header)
            .map_err(|e| RpcError::internal(format!("cannot create the session log: {e}")))?;
        self.logs.insert(session.id.clone(), Arc::new(log));
        self.bind(&ctx, &session);
        to_value(
            acp::NewSessionResponse::new(session.id.clone()).modes(modes_state(session.mode())),
        )
    }

    /// Loads (or resumes) a persisted session onto this connection.
    async fn attach(
        &self,
        ctx: &RequestContext,
        session_id: &str,
        replay: bool,
    ) -> Result<Arc<Session>, RpcError> {
        // A connection that has ended (even if its cleanup is still running) no
        // longer holds its sessions.
        if let Some(peer) = self.bindings.get(session_id).map(|b| *b)
            && peer != ctx.peer.id()
            && self
                .connections
                .get(&peer)
                .is_some_and(|c| !c.peer.is_closed())
        {
            return Err(RpcError::invalid_request(format!(
                "session {session_id} is in use by another connection"
            )));
        }
        let (log, header, events) = match self.log_of(session_id) {
            Some(log) => {
                let (header, events) = log
                    .replay()
                    .map_err(|e| RpcError::internal(format!("cannot read the session log: {e}")))?;
                (log, header, events)
            }
            None => {
                let (log, header, events) = SessionLog::open(&self.state_dir, session_id)
                    .map_err(|_| RpcError::not_found(format!("session {session_id} not found")))?;
                let log = Arc::new(log);
                self.logs.insert(session_id.to_string(), log.clone());
                (log, header, events)
            }
        };
        let _ = log;
        let session = self
            .sessions
            .insert(session_id.to_string(), header.cwd.clone());
        for e in &events {
            if let Event::ModeChange { mode_id, .. } = e
                && let Some(mode) = Mode::from_id(mode_id)
            {
                session.set_mode(mode);
            }
        }
        self.bind(ctx, &session);
        if replay {
            // Replayed before the answer (spec/acp.md), paced to the socket so a
            // long history is not mistaken for a client that stopped reading.
            for event in &events {
                if let Some(update) = replay_update(event) {
                    let params = updates::notification(session_id, update);
                    if ctx
                        .peer
                        .notify_paced("session/update", params, REPLAY_STALL)
                        .await
                        .is_err()
                    {
                        return Err(RpcError::internal("the connection closed during replay"));
                    }
                }
            }
        }
        Ok(session)
    }

    async fn load_session(
        &self,
        ctx: RequestContext,
        p: acp::LoadSessionRequest,
    ) -> Result<Value, RpcError> {
        let session = self.attach(&ctx, &p.session_id.0, true).await?;
        session.set_extra_roots(&p.additional_directories);
        to_value(acp::LoadSessionResponse::new().modes(modes_state(session.mode())))
    }

    async fn resume_session(
        &self,
        ctx: RequestContext,
        p: acp::ResumeSessionRequest,
    ) -> Result<Value, RpcError> {
        let session = self.attach(&ctx, &p.session_id.0, false).await?;
        session.set_extra_roots(&p.additional_directories);
        to_value(acp::ResumeSessionResponse::new().modes(modes_state(session.mode())))
    }

    async fn list_sessions(
        &self,
        _ctx: RequestContext,
        p: acp::ListSessionsRequest,
    ) -> Result<Value, RpcError> {
        let (found, next) = store::list(&self.state_dir, p.cwd.as_deref(), p.cursor.as_deref(), 50)
            .map_err(|e| RpcError::internal(format!("cannot list sessions: {e}")))?;
        let sessions = found
            .into_iter()
            .map(|s| {
                acp::SessionInfo::new(s.id.clone(), s.cwd.clone())
                    .title(s.title.clone())
                    .updated_at(iso8601(s.updated_ms))
            })
            .collect();
        to_value(acp::ListSessionsResponse::new(sessions).next_cursor(next))
    }

    async fn close_session(
        &self,
        ctx: RequestContext,
        p: acp::CloseSessionRequest,
    ) -> Result<Value, RpcError> {
        let id = p.session_id.0.to_string();
        self.addressable(&ctx, &id)?;
        if let Some(prompt) = self.prompts.get(&id) {
            prompt.cancel();
        }
        if let Some(exec) = &self.executor {
            exec.kill_scope(&id).await;
        }
        self.sessions.close(&id);
        self.bindings.remove(&id);
        self.logs.remove(&id);
        to_value(acp::CloseSessionResponse::new())
    }

    async fn set_mode(
        &self,
        ctx: RequestContext,
        p: acp::SetSessionModeRequest,
    ) -> Result<Value, RpcError> {
        let session = self.addressable(&ctx, &p.session_id.0)?;
        let mode = Mode::from_id(&p.mode_id.0)
            .ok_or_else(|| RpcError::invalid_params(format!("unknown mode `{}`", p.mode_id.0)))?;
        session.set_mode(mode);
        if let Some(log) = self.log_of(&session.id) {
            self.append(
                &log,
                Event::ModeChange {
                    at_ms: now_ms(),
                    mode_id: mode.id().to_string(),
                },
            );
        }
        self.send_update(&session.id, updates::mode(mode.id()));
        to_value(acp::SetSessionModeResponse::new())
    }

    /// Runs one user-initiated tool call (a `!` prompt or `_dsh/tools/call`) for
    /// a session, with its updates and log entries, or for no session at all.
    pub async fn run_tool(
        &self,
        session: Option<&Arc<Session>>,
        tool: &str,
        arguments: Value,
        cancel: CancellationToken,
    ) -> crate::hooks::waterfall::ToolOutput {
        let call_id = format!("call-{}", uuid::Uuid::new_v4().simple());
        let Some(session) = session else {
            let call = ToolExecution::new(call_id, tool, arguments, None, cancel);
            return self.tools.execute(&call).await;
        };
        let send =
            |event: agent::TurnEvent<'_>| self.send_update(&session.id, updates::from_turn(event));
        let ctx = agent::TurnContext {
            session,
            log: self.log_of(&session.id),
            tools: &self.tools,
            events: &send,
            cancel,
        };
        agent::run_tool(&ctx, &call_id, tool, arguments, false).await
    }

    async fn prompt(&self, ctx: RequestContext, p: acp::PromptRequest) -> Result<Value, RpcError> {
        let session = self.addressable(&ctx, &p.session_id.0)?;
        // A child of the request's token: $/cancel_request and the connection
        // ending cancel the prompt too; session/cancel cancels just the prompt.
        let cancel = ctx.cancel.child_token();
        {
            use dashmap::mapref::entry::Entry;
            match self.prompts.entry(session.id.clone()) {
                Entry::Occupied(_) => {
                    return Err(RpcError::invalid_request(
                        "a prompt is already running in this session",
                    ));
                }
                Entry::Vacant(v) => {
                    v.insert(cancel.clone());
                }
            }
        }
        let stop = self.run_prompt(&session, &p.prompt, &cancel).await;
        self.prompts.remove(&session.id);
        to_value(acp::PromptResponse::new(stop?))
    }

    async fn run_prompt(
        &self,
        session: &Arc<Session>,
        prompt: &[acp::ContentBlock],
        cancel: &CancellationToken,
    ) -> Result<acp::StopReason, RpcError> {
        let text = prompt_text(prompt);
        let log = self.log_of(&session.id);
        let turn = uuid::Uuid::new_v4().simple().to_string();
        if let Some(log) = &log {
            self.append(
                log,
                Event::TurnStart {
                    at_ms: now_ms(),
                    turn_id: turn.clone(),
                },
            );
            self.append(
                log,
                Event::UserMessage {
                    at_ms: now_ms(),
                    text: text.clone(),
                },
            );
        }
        let send =
            |event: agent::TurnEvent<'_>| self.send_update(&session.id, updates::from_turn(event));
        let ctx = agent::TurnContext {
            session,
            log: log.clone(),
            tools: &self.tools,
            events: &send,
            cancel: cancel.clone(),
        };
        let outcome = if let Some(command) = text.trim_start().strip_prefix('!') {
            let args =
                json!({"command": command.trim(), "description": "Run the user's ! command"});
            let call_id = format!("call-{}", uuid::Uuid::new_v4().simple());
            agent::run_tool(&ctx, &call_id, "bash", args, false).await;
            Ok(if cancel.is_cancelled() {
                acp::StopReason::Cancelled
            } else {
                acp::StopReason::EndTurn
            })
        } else if let Some(model) = &self.model {
            agent::run_model_turn(&ctx, model.as_ref(), &self.agent_config)
                .await
                .map_err(|e| e.to_string())
        } else {
            let text = crate::llm::openai::not_configured_text(&self.model_config);
            if let Some(log) = &log {
                self.append(
                    log,
                    Event::AgentMessage {
                        at_ms: now_ms(),
                        text: text.clone(),
                    },
                );
            }
            self.send_update(&session.id, updates::agent_text(&text));
            Ok(acp::StopReason::EndTurn)
        };
        if let Some(log) = &log {
            let reason = match &outcome {
                Ok(stop) => serde_json::to_value(stop)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| "end_turn".into()),
                Err(_) => "error".into(),
            };
            self.append(
                log,
                Event::TurnEnd {
                    at_ms: now_ms(),
                    turn_id: turn,
                    stop_reason: reason,
                },
            );
        }
        outcome.map_err(RpcError::internal)
    }

    fn cancel_notification(&self, peer: &Peer, params: Option<Value>) {
        let Some(id) = params
            .as_ref()
            .and_then(|p| p.get("sessionId"))
            .and_then(Value::as_str)
        else {
            return;
        };
        // Only the connection the session is bound to can cancel it.
        if self.bindings.get(id).map(|b| *b) == Some(peer.id())
            && let Some(prompt) = self.prompts.get(id)
        {
            prompt.cancel();
        }
    }

    async fn tools_call(&self, ctx: RequestContext, p: Value) -> Result<Value, RpcError> {
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("`name` (string) is required"))?
            .to_string();
        let arguments = p.get("arguments").cloned().unwrap_or_else(|| json!({}));
        let session = self.optional_session(&ctx, &p)?;
        let out = self
            .run_tool(session.as_ref(), &name, arguments, ctx.cancel.clone())
            .await;
        Ok(json!({"content": [{"type": "text", "text": out.text}], "isError": out.is_error}))
    }

    async fn tasks_list(&self, ctx: RequestContext, p: Value) -> Result<Value, RpcError> {
        let id = p
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("`sessionId` (string) is required"))?;
        self.addressable(&ctx, id)?;
        let mut tasks: Vec<Value> = self
            .sessions
            .tasks_of(id)
            .into_iter()
            .filter_map(|t| self.executor.as_ref()?.get(&t))
            .map(|t| task_json(&t, None))
            .collect();
        tasks.sort_by_key(|t| t["startedAtMs"].as_u64());
        Ok(json!({"tasks": tasks}))
    }

    async fn status(&self, _ctx: RequestContext, _p: Value) -> Result<Value, RpcError> {
        let running: Vec<Value> = self
            .executor
            .as_ref()
            .map(|e| e.list())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| !t.status.is_finished())
            .map(|t| {
                let owner = self.sessions.owner(&t.id).flatten();
                task_json(&t, Some(owner))
            })
            .collect();
        let sessions: Vec<Value> = self
            .sessions
            .sessions()
            .into_iter()
            .map(|s| {
                json!({
                    "sessionId": s.id,
                    "cwd": s.cwd,
                    "mode": s.mode().id(),
                    "state": if self.prompts.contains_key(&s.id) { "prompting" } else { "idle" },
                    "connected": self.bindings.contains_key(&s.id),
                })
            })
            .collect();
        Ok(json!({
            "version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "uptimeMs": self.started.elapsed().as_millis() as u64,
            "executor": self.executor_kind(),
            "connections": self.connections.len(),
            "sessions": sessions,
            "runningTasks": running,
        }))
    }

    fn connection_closed(&self, peer: &Peer) {
        self.connections.remove(&peer.id());
        let mine: Vec<String> = self
            .bindings
            .iter()
            .filter(|b| *b.value() == peer.id())
            .map(|b| b.key().clone())
            .collect();
        for id in mine {
            self.bindings.remove(&id);
            if let Some(prompt) = self.prompts.get(&id) {
                prompt.cancel();
            }
            if let Some(session) = self.sessions.get(&id) {
                session.set_prompter(None);
            }
        }
    }

    /// The peer a session is bound to now.
    fn peer_of(&self, session_id: &str) -> Option<Peer> {
        let id = self.bindings.get(session_id).map(|b| *b)?;
        self.connections.get(&id).map(|c| c.peer.clone())
    }
}

fn task_json(t: &crate::exec::TaskInfo, owner: Option<Option<String>>) -> Value {
    let started = t
        .started_at
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default();
    let (status, exit_code, signal) = match t.status {
        TaskStatus::Running => ("running", None, None),
        TaskStatus::Completed { exit_code } => ("completed", Some(exit_code), None),
        TaskStatus::Killed { signal } => {
            ("killed", None, signal.map(crate::tools::bash::signal_name))
        }
    };
    let mut v = json!({
        "taskId": t.id,
        "command": t.command,
        "status": status,
        "startedAt": iso8601(started),
        "startedAtMs": started,
    });
    if let Some(code) = exit_code {
        v["exitCode"] = code.into();
    }
    if let Some(sig) = signal {
        v["signal"] = sig.into();
    }
    if let Some(owner) = owner {
        v["owner"] = owner.into();
    }
    v
}

/// The text of a prompt: text blocks as they are, resources by name and content.
fn prompt_text(blocks: &[acp::ContentBlock]) -> String {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            acp::ContentBlock::Text(t) => parts.push(t.text.clone()),
            acp::ContentBlock::ResourceLink(l) => parts.push(format!("[resource: {}]", l.uri)),
            acp::ContentBlock::Resource(r) => match &r.resource {
                acp::EmbeddedResourceResource::TextResourceContents(t) => parts.push(format!(
                    "<resource uri=\"{}\">\n{}\n</resource>",
                    t.uri, t.text
                )),
                _ => parts.push("[binary resource]".into()),
            },
            _ => parts.push("[unsupported content]".into()),
        }
    }
    parts.join("\n")
}

/// How one logged event is replayed to a client on session/load.
fn replay_update(event: &Event) -> Option<acp::SessionUpdate> {
    Some(match event {
        Event::UserMessage { text, .. } => updates::user_text(text),
        Event::AgentMessage { text, .. } => updates::agent_text(text),
        Event::AgentThought { text, .. } => updates::agent_thought(text),
        Event::ToolCall {
            call_id,
            title,
            kind,
            arguments,
            ..
        } => updates::tool_call(call_id, title, kind, arguments),
        Event::ToolResult {
            call_id,
            text,
            is_error,
            ..
        } => updates::tool_done(call_id, text, *is_error),
        // Notices are context for the model; a client sees them where they
        // arrived, tagged the way the model will see them.
        Event::Notice { source, text, .. } => {
            updates::user_text(&format!("<context source=\"{source}\">{text}</context>"))
        }
        Event::ModeChange { mode_id, .. } => updates::mode(mode_id),
        _ => return None,
    })
}

macro_rules! register {
    ($module:expr, $name:literal, $method:ident) => {
        $module
            .register_async_method($name, |params, agent: Arc<AcpService>, ext| async move {
                let ctx = ext
                    .get::<RequestContext>()
                    .cloned()
                    .ok_or_else(|| RpcError::internal("no request context"))?;
                if $name != "initialize" {
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
        register!(m, "session/new", new_session);
        register!(m, "session/load", load_session);
        register!(m, "session/resume", resume_session);
        register!(m, "session/list", list_sessions);
        register!(m, "session/close", close_session);
        register!(m, "session/set_mode", set_mode);
        register!(m, "session/prompt", prompt);
        register!(m, "_dsh/tools/call", tools_call);
        register!(m, "_dsh/tasks/list", tasks_list);
        register!(m, "_dsh/status", status);
        register!(m, "_dsh/stop", stop);
        register!(m, "_dsh/policy/explain", policy_explain);
        m.into()
    }

    fn notification(&self, peer: &Peer, method: &str, params: Option<Value>) {
        match method {
            "session/cancel" => self.cancel_notification(peer, params),
            other => tracing::debug!(method = other, "ignored notification"),
        }
    }

    fn closed(&self, peer: &Peer) {
        self.connection_closed(peer);
    }
}

impl AcpService {
    async fn stop(&self, _ctx: RequestContext, _p: Value) -> Result<Value, RpcError> {
        self.shutdown.cancel();
        Ok(json!({}))
    }

    /// `_dsh/policy/explain {sessionId?, command, mode?}`: the judgement a bash call of
    /// `command` would get now, from the very policy the waterfall's hook uses, with the
    /// session's mode and grants (or the config's default mode and none), `mode` taking
    /// precedence. Nothing runs.
    async fn policy_explain(&self, ctx: RequestContext, p: Value) -> Result<Value, RpcError> {
        let command = p
            .get("command")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("`command` (string) is required"))?;
        let session = self.optional_session(&ctx, &p)?;
        let mode = match p.get("mode") {
            None | Some(Value::Null) => session
                .as_ref()
                .map(|s| s.mode())
                .unwrap_or(self.sessions.default_mode()),
            Some(Value::String(id)) => Mode::from_id(id).ok_or_else(|| {
                RpcError::invalid_params(format!("unknown mode `{id}` (ask, auto, read-only)"))
            })?,
            Some(_) => return Err(RpcError::invalid_params("`mode` must be a string")),
        };
        let grants = session.as_ref().map(|s| s.grants()).unwrap_or_default();
        let judged =
            self.tools
                .policy()
                .judge("bash", &json!({ "command": command }), mode, &grants);
        Ok(json!({"command": command, "mode": mode.id(), "judgement": judged}))
    }
}
