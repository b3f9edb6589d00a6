//! Sessions over ACP: new, load and resume (with the replay of the log), list, close
//! and the mode, and the rules binding a session to one connection.

use super::{AcpService, REPLAY_STALL, to_value, updates};
use crate::agent;
use crate::config::Mode;
use crate::policy::audit::RunId;
use crate::registry::Session;
use crate::rpc::{RequestContext, RpcError};
use crate::store::{self, Event, Header, SessionLog, iso8601, now_ms};
use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// How long a `session/load` waits for the connection holding its session to end before
/// calling it in use: an editor that quits and reconnects at once reaches the daemon
/// before the end of its old connection is read (a few milliseconds on a busy machine).
/// Only a load that would otherwise fail waits.
const HOLDER_ENDING: std::time::Duration = std::time::Duration::from_secs(1);

/// The session's config options: the model (from `[model] models`, else just the
/// configured one) and the mode (category `mode`: with config options present Zed shows
/// no separate mode selector, so the mode must be among them).
pub(super) fn config_options(
    models: &[String],
    default_model: &str,
    session: &Session,
) -> Vec<acp::SessionConfigOption> {
    let mut choices: Vec<String> = models.to_vec();
    if choices.is_empty() {
        choices.push(default_model.to_string());
    }
    let current_model = session.model().unwrap_or_else(|| default_model.to_string());
    let model = acp::SessionConfigOption::select(
        "model",
        "Model",
        current_model,
        choices
            .iter()
            .map(|m| acp::SessionConfigSelectOption::new(m.clone(), m.clone()))
            .collect::<Vec<_>>(),
    )
    .category(acp::SessionConfigOptionCategory::Model)
    .description("The model this session's next requests go to");
    let modes = modes_state(session.mode());
    let mode = acp::SessionConfigOption::select(
        "mode",
        "Mode",
        modes.current_mode_id.0.to_string(),
        modes
            .available_modes
            .iter()
            .map(|m| {
                acp::SessionConfigSelectOption::new(m.id.0.to_string(), m.name.clone())
                    .description(m.description.clone())
            })
            .collect::<Vec<_>>(),
    )
    .category(acp::SessionConfigOptionCategory::Mode)
    .description("What runs without asking");
    vec![model, mode]
}

/// The session's config options as they stand, as an update.
pub(super) fn config_options_update(agent: &AcpService, session: &Session) -> acp::SessionUpdate {
    acp::SessionUpdate::ConfigOptionUpdate(acp::ConfigOptionUpdate::new(
        agent.config_options_of(session),
    ))
}

pub(super) fn modes_state(current: Mode) -> acp::SessionModeState {
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

/// The batch a new session belongs to: `_meta.dsh.runId` of `session/new` (what
/// `dsh exec --prompts` sends). Absent is none; present but not a plain short id is
/// refused, so nothing unreadable reaches the audit log.
fn run_of(meta: Option<&acp::Meta>) -> Result<Option<RunId>, RpcError> {
    let Some(run) = meta.and_then(|m| m.get("dsh")).and_then(|d| d.get("runId")) else {
        return Ok(None);
    };
    let id = run
        .as_str()
        .ok_or_else(|| RpcError::invalid_params("_meta.dsh.runId must be a string"))?;
    id.parse()
        .map(Some)
        .map_err(|e: String| RpcError::invalid_params(format!("_meta.dsh.runId: {e}")))
}

impl AcpService {
    pub(super) fn check_cwd(cwd: &Path) -> Result<(), RpcError> {
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

    pub(super) async fn new_session(
        &self,
        ctx: RequestContext,
        p: acp::NewSessionRequest,
    ) -> Result<Value, RpcError> {
        Self::check_cwd(&p.cwd)?;
        let run = run_of(p.meta.as_ref())?;
        let session = self.sessions.create(p.cwd.clone());
        if let Some(run) = run {
            session.set_run(run);
        }
        session.set_extra_roots(&p.additional_directories);
        self.open_project(&ctx, &session).await;
        let header = Header {
            id: session.id.clone(),
            cwd: p.cwd.clone(),
            created_ms: now_ms(),
            title: None,
        };
        let log = SessionLog::create(&self.state_dir, &header)
            .map_err(|e| RpcError::internal(format!("cannot create the session log: {e}")))?;
        self.live
            .update(&session.id, |e| e.log = Some(Arc::new(log)));
        self.bind(&ctx, &session);
        self.start_mcp(&ctx, &session, &p.mcp_servers).await;
        self.session_start_hooks(&session, "new").await;
        self.after_answer(&ctx, &session.id);
        to_value(
            acp::NewSessionResponse::new(session.id.clone())
                .modes(modes_state(session.mode()))
                .config_options(self.config_options_of(&session)),
        )
    }

    pub(super) fn config_options_of(&self, session: &Session) -> Vec<acp::SessionConfigOption> {
        let settings = self.settings();
        let mut options = config_options(
            &settings.model_config.models,
            &settings.model_config.model,
            session,
        );
        options.extend(self.switches(session));
        options
    }

    /// Reads the project file of the session's cwd (src/project.rs): the session is judged
    /// by it from now on, starts in its mode when that applies, and what of it was left
    /// out is told to the person after the answer, as the session's first agent message.
    async fn open_project(&self, ctx: &RequestContext, session: &Arc<Session>) {
        let (tools, opened) = (self.tools.clone(), session.clone());
        let layer = tokio::task::spawn_blocking(move || tools.open_project(&opened)).await;
        let Ok(Some(layer)) = layer else {
            return;
        };
        if let Some(mode) = layer.project.default_mode {
            session.set_mode(mode);
        }
        if let Some(text) = crate::project::notice(&layer.project) {
            ctx.notify_after(
                "session/update",
                &updates::notification(&session.id, updates::agent_text(&text)),
            );
        }
    }

    /// What a client learns right after a session is its: the slash commands.
    pub(super) fn after_answer(&self, ctx: &RequestContext, session_id: &str) {
        ctx.notify_after(
            "session/update",
            &updates::notification(session_id, updates::available_commands()),
        );
    }

    /// `session/set_config_option`: the session's model (its next requests name it) or
    /// mode. The answer is every option as it now stands.
    pub(super) async fn set_config_option(
        &self,
        ctx: RequestContext,
        p: acp::SetSessionConfigOptionRequest,
    ) -> Result<Value, RpcError> {
        let session = self.addressable(&ctx, &p.session_id.0)?;
        if self.set_switch(&session, &p.config_id.0, &p.value)? {
            return to_value(acp::SetSessionConfigOptionResponse::new(
                self.config_options_of(&session),
            ));
        }
        let acp::SessionConfigOptionValue::ValueId { value } = &p.value else {
            return Err(RpcError::invalid_params("this option takes a value id"));
        };
        let value = value.0.to_string();
        match &*p.config_id.0 {
            "model" => {
                let settings = self.settings();
                let allowed = if settings.model_config.models.is_empty() {
                    value == settings.model_config.model
                } else {
                    settings.model_config.models.contains(&value)
                };
                if !allowed {
                    return Err(RpcError::invalid_params(format!("unknown model `{value}`")));
                }
                session.set_model(Some(value.clone()));
                if let Some(log) = self.log_of(&session.id) {
                    self.append(
                        &log,
                        Event::ModelChange {
                            at_ms: now_ms(),
                            model: value,
                        },
                    );
                }
            }
            "mode" => {
                let mode = Mode::from_id(&value)
                    .ok_or_else(|| RpcError::invalid_params(format!("unknown mode `{value}`")))?;
                self.change_mode(&session, mode);
            }
            other => {
                return Err(RpcError::invalid_params(format!(
                    "unknown config option `{other}`"
                )));
            }
        }
        to_value(acp::SetSessionConfigOptionResponse::new(
            self.config_options_of(&session),
        ))
    }

    /// Sets the session's mode, logs it and tells its client.
    fn change_mode(&self, session: &Session, mode: Mode) {
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
        self.send_update(&session.id, config_options_update(self, session));
    }

    /// Asks the `session_start` hooks about `session` and logs the context they add,
    /// where the model will find it.
    async fn session_start_hooks(&self, session: &Arc<Session>, source: &str) {
        let context = self
            .tools
            .hooks_for(session)
            .on_session_start(session, source)
            .await;
        if let Some(log) = self.log_of(&session.id) {
            for (source, text) in context {
                self.append(
                    &log,
                    Event::Notice {
                        at_ms: now_ms(),
                        source,
                        task_id: String::new(),
                        text,
                    },
                );
            }
        }
    }

    /// Loads (or resumes) a persisted session onto this connection.
    pub(super) async fn attach(
        &self,
        ctx: &RequestContext,
        session_id: &str,
        replay: bool,
    ) -> Result<Arc<Session>, RpcError> {
        // Claimed for this connection in the same step as the check, so two attaching
        // at once cannot both win. A connection that has ended (even if its cleanup is
        // still running) no longer holds its sessions.
        let live = |peer: u64| {
            self.connections
                .get(&peer)
                .is_some_and(|c| !c.peer.is_closed())
        };
        if self.live.bind(session_id, ctx.peer.id(), live).is_err() {
            // The holder may be an editor's connection whose end is in flight: it quit
            // and reconnected at once, its socket is closed, and the daemon has not yet
            // read that end. Wait a moment for it to end, then claim once more; a
            // connection still open after that holds the session.
            let holder = self
                .live
                .bound_to(session_id)
                .and_then(|peer| self.connections.get(&peer).map(|c| c.peer.closed()));
            if let Some(closed) = holder {
                let _ = tokio::time::timeout(HOLDER_ENDING, closed.cancelled()).await;
            }
            if self.live.bind(session_id, ctx.peer.id(), live).is_err() {
                return Err(RpcError::invalid_request(format!(
                    "session {session_id} is in use by another connection"
                )));
            }
        }
        let attached = self.attach_claimed(ctx, session_id, replay).await;
        if attached.is_err() {
            self.live.unbind_from(session_id, ctx.peer.id());
            // What the failed attach loaded is not left behind.
            self.unload(session_id, super::unloading::Unload::IfIdle);
        }
        attached
    }

    /// [`AcpService::attach`] once the session is claimed for this connection.
    async fn attach_claimed(
        &self,
        ctx: &RequestContext,
        session_id: &str,
        replay: bool,
    ) -> Result<Arc<Session>, RpcError> {
        // An unloaded session's log that a call still ending holds is taken back: the
        // file stays locked while it is held.
        let held = self.log_of(session_id).or_else(|| {
            let log = self.live.lingering_log(session_id)?;
            self.live.update(session_id, |e| e.log = Some(log.clone()));
            Some(log)
        });
        let (header, events) = match held {
            Some(log) => log
                .replay()
                .map_err(|e| RpcError::internal(format!("cannot read the session log: {e}")))?,
            None => {
                let (log, header, events) = SessionLog::open(&self.state_dir, session_id)
                    .map_err(|_| RpcError::not_found(format!("session {session_id} not found")))?;
                self.live
                    .update(session_id, |e| e.log = Some(Arc::new(log)));
                (header, events)
            }
        };
        let session = self
            .sessions
            .insert(session_id.to_string(), header.cwd.clone());
        self.keeper.session_opened(session_id);
        // Its project's mode first: the modes the log recorded come after it.
        self.open_project(ctx, &session).await;
        let state = store::SessionState::from_events(&header, &events);
        if let Some(mode) = state.mode {
            session.set_mode(mode);
        }
        if let Some(model) = state.model {
            session.set_model(Some(model));
        }
        for (option, value) in &state.options {
            super::options::restore(&session, option, *value);
        }
        session.add_grants(&state.grants);
        session.add_rejections(&state.rejections);
        session.set_title(state.title);
        self.bind(ctx, &session);
        if replay {
            // Replayed before the answer (spec/acp.md), paced to the socket so a
            // long history is not mistaken for a client that stopped reading.
            // Live output is not logged, so a terminal would be empty: a replay shows
            // every result as text.
            let mut replayed = Vec::new();
            agent::replay(&events, &session.cwd, |event| {
                replayed.push(updates::from_turn(event, updates::ClientDisplay::default()))
            });
            for update in replayed {
                {
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
        self.live.update(session_id, |e| e.closed = false);
        self.session_start_hooks(&session, "load").await;
        Ok(session)
    }

    pub(super) async fn load_session(
        &self,
        ctx: RequestContext,
        p: acp::LoadSessionRequest,
    ) -> Result<Value, RpcError> {
        let session = self.attach(&ctx, &p.session_id.0, true).await?;
        session.set_extra_roots(&p.additional_directories);
        self.start_mcp(&ctx, &session, &p.mcp_servers).await;
        self.after_answer(&ctx, &session.id);
        to_value(
            acp::LoadSessionResponse::new()
                .modes(modes_state(session.mode()))
                .config_options(self.config_options_of(&session)),
        )
    }

    pub(super) async fn resume_session(
        &self,
        ctx: RequestContext,
        p: acp::ResumeSessionRequest,
    ) -> Result<Value, RpcError> {
        let session = self.attach(&ctx, &p.session_id.0, false).await?;
        session.set_extra_roots(&p.additional_directories);
        self.start_mcp(&ctx, &session, &p.mcp_servers).await;
        self.after_answer(&ctx, &session.id);
        to_value(
            acp::ResumeSessionResponse::new()
                .modes(modes_state(session.mode()))
                .config_options(self.config_options_of(&session)),
        )
    }

    pub(super) async fn list_sessions(
        &self,
        _ctx: RequestContext,
        p: acp::ListSessionsRequest,
    ) -> Result<Value, RpcError> {
        let (found, next) = store::list(&self.state_dir, p.cwd.as_deref(), p.cursor.as_deref(), 50)
            .map_err(|e| RpcError::internal(format!("cannot list sessions: {e}")))?;
        let sessions = found
            .into_iter()
            .map(|s| {
                let live = self.sessions.get(&s.id).and_then(|l| l.title());
                acp::SessionInfo::new(s.id.clone(), s.cwd.clone())
                    .title(live.or(s.title.clone()))
                    .updated_at(iso8601(s.updated_ms))
            })
            .collect();
        to_value(acp::ListSessionsResponse::new(sessions).next_cursor(next))
    }

    /// `session/close`: the prompt is cancelled (its questions settle), the session is
    /// unbound and what only the connection needed is freed. Its background tasks keep
    /// running, still its own, and their notices reach its log for a later load, unless
    /// `[sessions] close_kills_tasks` says to kill them as well.
    pub(super) async fn close_session(
        &self,
        ctx: RequestContext,
        p: acp::CloseSessionRequest,
    ) -> Result<Value, RpcError> {
        let id = p.session_id.0.to_string();
        self.addressable(&ctx, &id)?;
        self.forget(&id, super::Ending::Closed).await;
        to_value(acp::CloseSessionResponse::new())
    }

    /// `session/delete`: the session's tasks are killed and its log removed. A session
    /// this connection cannot address (unknown, or bound to another live connection) is
    /// "not found".
    pub(super) async fn delete_session(
        &self,
        ctx: RequestContext,
        p: acp::DeleteSessionRequest,
    ) -> Result<Value, RpcError> {
        let id = p.session_id.0.to_string();
        let not_found = || RpcError::not_found(format!("session {id} not found"));
        if !store::is_valid_session_id(&id) {
            return Err(not_found());
        }
        if let Some(peer) = self.live.bound_to(&id)
            && peer != ctx.peer.id()
            && self
                .connections
                .get(&peer)
                .is_some_and(|c| !c.peer.is_closed())
        {
            return Err(not_found());
        }
        let path = store::log_path(&self.state_dir, &id).map_err(|_| not_found())?;
        let known = self.sessions.get(&id).is_some();
        if !known && !path.exists() {
            return Err(not_found());
        }
        self.forget(&id, super::Ending::Deleted).await;
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(RpcError::internal(format!(
                    "cannot remove the session log: {e}"
                )));
            }
        }
        to_value(acp::DeleteSessionResponse::new())
    }

    pub(super) async fn set_mode(
        &self,
        ctx: RequestContext,
        p: acp::SetSessionModeRequest,
    ) -> Result<Value, RpcError> {
        let session = self.addressable(&ctx, &p.session_id.0)?;
        let mode = Mode::from_id(&p.mode_id.0)
            .ok_or_else(|| RpcError::invalid_params(format!("unknown mode `{}`", p.mode_id.0)))?;
        self.change_mode(&session, mode);
        to_value(acp::SetSessionModeResponse::new())
    }
}
