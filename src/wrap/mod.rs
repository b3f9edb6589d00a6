//! dsh in front of another ACP agent (issue 44): to the editor dsh is the agent, to
//! the wrapped agent it is the client.
//!
//! A connection that asks for an agent by name (`_dsh/wrap`, sent by `dsh acp --agent
//! NAME` before the editor's first byte) gets one [`Wrapped`]: the agent's program,
//! started through the daemon's executor (so under the sandbox executor its whole
//! process is inside bubblewrap, its network through the proxy), spoken to over its
//! stdio with dsh's own JSON-RPC layer, and ended with the connection.
//!
//! Each direction is translated at one place:
//! * editor -> agent ([`Wrapped::from_editor`]): every request passes through with its
//!   id mapped by the rpc layer (each side numbers its own); a session the agent opens
//!   gets a dsh session of its own (cwd, mode, grants, the editor as its prompter), so
//!   the waterfall judges the agent's calls as it judges dsh's;
//! * agent -> dsh ([`AgentSide`]): `session/request_permission` is judged by the
//!   waterfall (`judge`); `session/update` and other notifications go to the editor
//!   unchanged; `terminal/*` and `fs/*` are dsh's (`client`): a terminal is a
//!   background `bash` task of the session, a file request dsh's file tool, each judged
//!   by the waterfall; any other request is refused (-32601). The agent is offered
//!   `fs` and `terminal` whatever the editor offers, since dsh serves them.

mod client;
mod files;
mod judge;
mod live;
mod refusal;

pub use crate::config::WrappedAgent;

use crate::exec::{BashExecutor, ExecRequest, ServiceHandle, ServiceProcess};
use crate::hooks::waterfall::{Passed, ToolExecution};
use crate::registry::{Session, SessionRegistry};
use crate::rpc::{Peer, RequestContext, RpcError, Service};
use crate::tools::{Tool, ToolRegistry};
use dashmap::DashMap;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

/// What a wrapped connection uses of the daemon.
pub struct Daemon {
    pub executor: Arc<dyn BashExecutor>,
    pub sessions: Arc<SessionRegistry>,
    pub tools: Arc<ToolRegistry>,
}

/// One editor connection served by a wrapped agent.
pub struct Wrapped {
    shared: Arc<Shared>,
    /// The connection to the agent's stdio.
    to_agent: Peer,
    /// Ends the agent's process and everything it started.
    handle: ServiceHandle,
    /// The executor scope of the agent's process (marked as the agent's while it runs).
    scope: String,
}

/// What both directions share.
struct Shared {
    agent: WrappedAgent,
    editor: Peer,
    daemon: Daemon,
    /// Where a session the agent opens without a usable cwd works (the launcher's).
    cwd: PathBuf,
    /// The agent's session ids -> dsh's session for each (its own id: an agent cannot
    /// name, and so take over, a session of dsh's).
    sessions: DashMap<String, Arc<Session>>,
    /// The agent's own tools named so far in its questions, by dsh session.
    own_tools: DashMap<String, Vec<Arc<dyn Tool>>>,
    /// The agent's questions now put to the editor.
    questions: judge::OpenQuestions,
    /// The agent's own tool names from its updates, for questions that lack them.
    tool_names: judge::ToolNames,
    /// Permission questions in flight, cancelled when the agent goes.
    gone: CancellationToken,
    /// The agent's terminals: background tasks of its sessions.
    terminals: client::Terminals,
    /// What the editor offered in `initialize` (how a terminal is shown to it, whether
    /// its `fs` stands behind the agent's file requests).
    offers: Mutex<live::EditorOffers>,
    /// Stopped for `dsh upgrade`: the editor's connection is being handed over and is
    /// ended by the next program, not closed here.
    upgrading: std::sync::atomic::AtomicBool,
}

/// Longest stderr line of the agent kept whole in `daemon.log`.
const STDERR_LINE: usize = 4096;

impl Wrapped {
    /// Starts `agent` for the connection of `editor`, working in `cwd`, through the
    /// daemon's executor.
    pub async fn start(
        agent: WrappedAgent,
        cwd: PathBuf,
        editor: Peer,
        daemon: Daemon,
    ) -> Result<Arc<Self>, String> {
        let command = agent.command_line()?;
        let env = agent.environment()?;
        let scope = format!("agent-{}-{}", agent.name, editor.id());
        // Its own connections through the sandbox's proxy have no session: the scope
        // names the agent for their judgement and audit lines.
        daemon.sessions.set_agent_scope(&scope, Some(&agent.name));
        let spec = daemon.executor.resolve(ExecRequest {
            command,
            workdir: Some(cwd.clone()),
            timeout_ms: None,
            scope: Some(scope.clone()),
            writable_roots: vec![cwd.clone()],
            call_id: None,
        });
        let ServiceProcess {
            stdin,
            stdout,
            stderr,
            handle,
        } = daemon
            .executor
            .start_service(spec, env)
            .await
            .map_err(|e| {
                daemon.sessions.set_agent_scope(&scope, None);
                format!("agent `{}` could not be started: {e}", agent.name)
            })?;
        tokio::spawn(log_stderr(agent.name.clone(), stderr));
        let shared = Arc::new(Shared {
            agent,
            editor,
            daemon,
            cwd,
            sessions: DashMap::new(),
            own_tools: DashMap::new(),
            questions: Arc::default(),
            tool_names: judge::ToolNames::default(),
            gone: CancellationToken::new(),
            terminals: client::Terminals::default(),
            offers: Mutex::default(),
            upgrading: Default::default(),
        });
        let (opened, peer) = tokio::sync::oneshot::channel();
        let side = Arc::new(AgentSide {
            shared: shared.clone(),
            opened: Mutex::new(Some(opened)),
        });
        tokio::spawn(crate::rpc::serve_connection(
            stdout,
            stdin,
            side,
            crate::rpc::Options::default(),
        ));
        let Ok(to_agent) = peer.await else {
            shared.daemon.sessions.set_agent_scope(&scope, None);
            return Err("the agent's connection did not open".to_string());
        };
        Ok(Arc::new(Self {
            shared,
            to_agent,
            handle,
            scope,
        }))
    }

    /// The agent's name, as `[[agents]]` gives it.
    pub fn name(&self) -> &str {
        &self.shared.agent.name
    }

    /// An editor's request: passed to the agent, its answer passed back. `initialize`
    /// offers the agent dsh's `fs` and `terminal` in place of the editor's (dsh serves
    /// them, judged); a session the agent opens gets its dsh session.
    pub async fn from_editor(
        &self,
        method: &str,
        mut params: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, RpcError> {
        if method == "initialize" {
            *self.shared.offers.lock().unwrap_or_else(|p| p.into_inner()) =
                live::EditorOffers::of(params.get("clientCapabilities"));
        }
        if method == "initialize"
            && let Some(caps) = params
                .get_mut("clientCapabilities")
                .and_then(Value::as_object_mut)
        {
            caps.insert(
                "fs".into(),
                json!({"readTextFile": true, "writeTextFile": true}),
            );
            caps.insert("terminal".into(), json!(true));
        }
        let answer = self
            .to_agent
            .call(method, params.clone(), cancel)
            .await
            .map_err(RpcError::from)?;
        let opened = match method {
            "session/new" | "session/fork" => answer.get("sessionId"),
            "session/load" | "session/resume" => params.get("sessionId"),
            _ => None,
        };
        if let Some(id) = opened.and_then(Value::as_str) {
            self.shared.open_session(id, &params);
        }
        if matches!(method, "session/close" | "session/delete")
            && let Some(id) = params.get("sessionId").and_then(Value::as_str)
        {
            self.shared.release_terminals(Some(id)).await;
            self.shared.close_session(id);
        }
        Ok(answer)
    }

    /// The agent's session ids (as the editor knows them).
    pub fn agent_sessions(&self) -> Vec<String> {
        self.shared
            .sessions
            .iter()
            .map(|e| e.key().clone())
            .collect()
    }

    /// Ends the agent for `dsh upgrade`: as [`Wrapped::stop`], but the editor's
    /// connection, being handed over, is left to the next program to end.
    pub async fn stop_for_upgrade(&self) {
        self.shared
            .upgrading
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.stop().await;
    }

    /// An editor's notification (`session/cancel`, ...): passed to the agent.
    pub fn editor_notification(&self, method: &str, params: Option<Value>) {
        let _ = self.to_agent.notify(method, params.unwrap_or(Value::Null));
    }

    /// Ends the agent and its sessions (the editor's connection ended); returns once
    /// its process and everything it started are gone.
    pub async fn stop(&self) {
        self.shared.gone.cancel();
        self.to_agent.close();
        self.handle.stop().await;
        self.shared
            .daemon
            .sessions
            .set_agent_scope(&self.scope, None);
        self.shared.release_terminals(None).await;
        let ids: Vec<String> = self
            .shared
            .sessions
            .iter()
            .map(|e| e.key().clone())
            .collect();
        for id in ids {
            self.shared.close_session(&id);
        }
    }
}

impl Shared {
    /// Gives the agent's session `id` a dsh session (once), in the cwd the editor gave.
    fn open_session(&self, id: &str, params: &Value) {
        if self.sessions.contains_key(id) {
            return;
        }
        let cwd = params
            .get("cwd")
            .and_then(Value::as_str)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| self.cwd.clone());
        let session = self.daemon.sessions.create(cwd);
        let offers = *self.offers.lock().unwrap_or_else(|p| p.into_inner());
        if offers.fs_read || offers.fs_write {
            session.set_client_files(Some(Arc::new(files::EditorFiles {
                editor: self.editor.clone(),
                agent_session: id.to_string(),
                offers,
                gone: self.gone.clone(),
            })));
        }
        session.set_prompter(Some(Arc::new(judge::EditorPrompter {
            editor: self.editor.clone(),
            questions: self.questions.clone(),
            agent_session: id.to_string(),
            tools: self.daemon.tools.clone(),
            sessions: self.daemon.sessions.clone(),
        })));
        tracing::info!(agent = %self.agent.name, session = id, dsh_session = %session.id, "wrapped session opened");
        self.sessions.insert(id.to_string(), session);
    }

    fn close_session(&self, id: &str) {
        if let Some((_, session)) = self.sessions.remove(id) {
            self.daemon.sessions.close(&session.id);
            self.daemon.tools.session_tools().remove(&session.id);
            self.own_tools.remove(&session.id);
        }
    }

    /// The agent's `session/request_permission`: judged by the waterfall as a dsh call
    /// of the session; the answer is one of the agent's own options.
    async fn request_permission(&self, params: Value, cancel: CancellationToken) -> Value {
        let Some(session) = params
            .get("sessionId")
            .and_then(Value::as_str)
            .and_then(|id| self.sessions.get(id).map(|s| s.clone()))
        else {
            // A session this connection never opened: nobody's to judge, so refused.
            return judge::answer_for(&params, false);
        };
        let mut tool_call = params.get("toolCall").cloned().unwrap_or(Value::Null);
        if let Some(id) = params.get("sessionId").and_then(Value::as_str) {
            self.tool_names.fill(id, &mut tool_call);
        }
        let mut asked = judge::asked_call(&tool_call);
        let unreadable = asked.place(&session.cwd).err();
        if asked.agents_own {
            self.know_tool(&session.id, &asked.tool);
        }
        let call_id = tool_call
            .get("toolCallId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let key = (session.id.clone(), call_id.clone());
        self.questions.insert(key.clone(), params.clone());
        // Cancelled when the agent withdraws its question or goes: the gate then
        // settles it (a deny), and the audit line is still written.
        let stop = CancellationToken::new();
        let mut call = ToolExecution::new(
            call_id,
            asked.tool,
            asked.arguments,
            Some(session),
            stop.clone(),
        )
        .by_agent(&self.agent.name);
        if let Some(own) = &asked.own_name {
            call = call.named_by_agent(own);
        }
        if let Some(why) = unreadable {
            // Judged elsewhere than it runs, a command could be misjudged (P6): refused
            // before the waterfall, with its audit line.
            self.questions.remove(&key);
            tracing::warn!(agent = %self.agent.name, "a wrapped agent's command's directory: {why}");
            if let Some(audit) = self.daemon.tools.audit_log() {
                audit.refused_after(&call, "wrap", &why, self.daemon.tools.policy_version());
            }
            return judge::answer_for(&params, false);
        }
        let judged = judge::Judged::default();
        let waterfall = self.daemon.tools.waterfall().run(&call, &judged);
        tokio::pin!(waterfall);
        let passed = tokio::select! {
            passed = &mut waterfall => passed,
            () = async {
                tokio::select! {
                    () = cancel.cancelled() => {}
                    () = self.gone.cancelled() => {}
                }
            } => {
                stop.cancel();
                waterfall.await
            }
        };
        self.questions.remove(&key);
        if let Passed::Rewrite(rewrite) = passed {
            // The agent runs what it asked about, not a hook's rewrite of it: a call a
            // hook would only let through changed is refused, and the audit hook (which
            // leaves a rewrite to the pass that runs it) has no line for it: this is it.
            tracing::warn!(agent = %self.agent.name, "a hook rewrote a wrapped agent's call: refused");
            if let Some(audit) = self.daemon.tools.audit_log() {
                audit.refused_after(
                    &call,
                    "wrap",
                    &format!(
                        "a hook rewrote the agent's call (to {rewrite}); the agent runs what \
                         it asked, so it is refused"
                    ),
                    self.daemon.tools.policy_version(),
                );
            }
            return judge::answer_for(&params, false);
        }
        judge::answer_for(&params, judged.allowed())
    }

    /// Makes the agent's tool `name` known to the session's schema hook and rules.
    fn know_tool(&self, session: &str, name: &str) {
        let mut tools = self.own_tools.entry(session.to_string()).or_default();
        if tools.iter().any(|t| t.schema().name() == name) {
            return;
        }
        match judge::AgentsTool::named(name) {
            Ok(tool) => tools.push(tool),
            Err(e) => {
                tracing::warn!(agent = %self.agent.name, tool = name, "agent tool not made: {e}");
                return;
            }
        }
        self.daemon
            .tools
            .session_tools()
            .set(session, tools.clone());
    }
}

/// dsh as the wrapped agent's client.
struct AgentSide {
    shared: Arc<Shared>,
    /// Hands the agent's peer to [`Wrapped::start`] once the connection opens.
    opened: Mutex<Option<tokio::sync::oneshot::Sender<Peer>>>,
}

impl Service for AgentSide {
    fn methods(&self) -> jsonrpsee::Methods {
        let mut m = jsonrpsee::RpcModule::from_arc(self.shared.clone());
        m.register_async_method(
            "session/request_permission",
            |params, shared: Arc<Shared>, ext| async move {
                let cancel = ext
                    .get::<RequestContext>()
                    .map(|c| c.cancel.clone())
                    .unwrap_or_default();
                let params: Value = params.parse().unwrap_or(Value::Null);
                Ok::<Value, RpcError>(shared.request_permission(params, cancel).await)
            },
        )
        .expect("method names are unique");
        macro_rules! serve {
            ($name:literal, |$shared:ident, $params:ident, $cancel:ident| $body:expr) => {
                m.register_async_method($name, |params, shared: Arc<Shared>, ext| async move {
                    let $cancel = ext
                        .get::<RequestContext>()
                        .map(|c| c.cancel.clone())
                        .unwrap_or_default();
                    let $params: Value = params.parse().unwrap_or(Value::Null);
                    let $shared = shared;
                    $body
                })
                .expect("method names are unique");
            };
        }
        serve!("terminal/create", |s, p, c| s.terminal_create(p, &c).await);
        serve!("terminal/output", |s, p, _c| s.terminal_output(p));
        serve!("terminal/wait_for_exit", |s, p, c| s
            .terminal_wait(p, &c)
            .await);
        serve!("terminal/kill", |s, p, _c| s.terminal_kill(p).await);
        serve!("terminal/release", |s, p, _c| s.terminal_release(p).await);
        serve!("fs/read_text_file", |s, p, c| s.read_text_file(p, &c).await);
        serve!("fs/write_text_file", |s, p, c| s
            .write_text_file(p, &c)
            .await);
        m.into()
    }

    fn opened(&self, peer: &Peer) {
        if let Some(tx) = self.opened.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(peer.clone());
        }
    }

    /// Updates and the agent's other notifications reach the editor as the agent sent
    /// them (the session ids are the agent's on both sides), but a tool call that shows
    /// one of dsh's terminals, which is shown with its output (`live`).
    fn notification(&self, _peer: &Peer, method: &str, params: Option<Value>) {
        let params = params.unwrap_or(Value::Null);
        self.shared.tool_names.note(method, &params);
        if method == "session/update" {
            self.shared.pass_update(params);
        } else {
            let _ = self.shared.editor.notify(method, params);
        }
    }

    /// The agent went (it exited or closed its output): the editor's connection ends
    /// too, so the editor sees its agent gone rather than a silent one.
    fn closed(&self, _peer: &Peer) {
        tracing::info!(agent = %self.shared.agent.name, "wrapped agent's connection ended");
        self.shared.gone.cancel();
        if !self
            .shared
            .upgrading
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            self.shared.editor.close();
        }
    }
}

/// Copies the agent's stderr into `daemon.log`, a line at a time (long lines cut).
async fn log_stderr(name: String, mut stderr: tokio::net::unix::pipe::Receiver) {
    let mut line: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        for &b in &buf[..n] {
            if b == b'\n' {
                tracing::info!(agent = %name, "stderr: {}", String::from_utf8_lossy(&line));
                line.clear();
            } else if line.len() < STDERR_LINE {
                line.push(b);
            }
        }
    }
    if !line.is_empty() {
        tracing::info!(agent = %name, "stderr: {}", String::from_utf8_lossy(&line));
    }
}

/// The `_dsh/wrap` request's parameters.
#[derive(Debug, serde::Deserialize)]
pub struct WrapRequest {
    /// The `[[agents]]` entry's name.
    pub agent: String,
    /// The launcher's working directory (where the editor started it).
    pub cwd: PathBuf,
}

/// The launcher's `_dsh/wrap` line for `agent`, working in `cwd`.
pub fn wrap_request_line(agent: &str, cwd: &std::path::Path) -> String {
    format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": "dsh-wrap", "method": "_dsh/wrap",
               "params": {"agent": agent, "cwd": cwd}})
    )
}
