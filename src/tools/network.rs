//! The `network` tool (E10, issue 28): each new host:port a sandboxed command asks
//! dsh's proxy for is one call of it through the whole waterfall, like any tool call:
//! the audit line, the schema, the rules (`tool = "network"`, `host`, `port`), the
//! pre_tool hooks, the permission gate (the person is asked which command wants
//! which host), shadows and replay.
//!
//! The executor carries the bytes and asks a [`ConnectionGate`] per command; this is
//! the side that answers ([`NetworkJudge`]), so `exec` still imports nothing from
//! tools or hooks. Only dsh makes these calls ([`ToolExecution::internal`]): the
//! model is never offered the tool, and a call of it from outside is unknown, since
//! its question would put words of the model's in the command's mouth.

use super::schema::{NETWORK, ToolSchema};
use super::{Tool, ToolKind, ToolRegistry};
use crate::exec::netproxy::{
    Admission, CommandOrigin, ConnectRequest, ConnectionGate, ConnectionJudge,
};
use crate::hooks::waterfall::{ToolExecution, ToolOutput};
use crate::registry::SessionRegistry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

/// The tool itself: a call that got through the waterfall is the connection's
/// permission, so running it only says so.
pub struct NetworkTool {
    schema: Arc<ToolSchema>,
}

impl NetworkTool {
    pub fn tool() -> Arc<dyn Tool> {
        Arc::new(Self {
            schema: Arc::new(
                ToolSchema::parse(NETWORK)
                    .unwrap_or_else(|e| panic!("proto/tools/network.json: {e}")),
            ),
        })
    }
}

#[async_trait::async_trait]
impl Tool for NetworkTool {
    fn schema(&self) -> &Arc<ToolSchema> {
        &self.schema
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Fetch
    }

    fn internal(&self) -> bool {
        true
    }

    /// The schema hook already required `host` and `port`.
    async fn call(&self, call: &ToolExecution) -> ToolOutput {
        let field = |name: &str| call.arguments.get(name).cloned().unwrap_or_default();
        ToolOutput::ok(format!(
            "allowed: {}:{}",
            field("host").as_str().unwrap_or_default(),
            field("port")
        ))
    }
}

/// Makes each proxied command's gate: its questions go to the tool registry as
/// `network` calls of the command's session.
pub struct NetworkJudge {
    /// Weak: the registry owns the executor, which owns this.
    registry: Weak<ToolRegistry>,
    sessions: Arc<SessionRegistry>,
    calls: Arc<AtomicU64>,
}

impl NetworkJudge {
    pub fn new(registry: Weak<ToolRegistry>, sessions: Arc<SessionRegistry>) -> Self {
        Self {
            registry,
            sessions,
            calls: Arc::default(),
        }
    }
}

impl ConnectionJudge for NetworkJudge {
    fn gate_for(&self, origin: CommandOrigin) -> Arc<dyn ConnectionGate> {
        Arc::new(CommandGate {
            registry: self.registry.clone(),
            session: origin.session.as_deref().and_then(|s| self.sessions.get(s)),
            agent: origin
                .session
                .as_deref()
                .and_then(|s| self.sessions.agent_of_scope(s)),
            origin,
            calls: self.calls.clone(),
            decided: Mutex::default(),
            asking: Arc::default(),
        })
    }
}

/// A host's answer for one command, settled once (those who ask meanwhile wait),
/// with whether it is remembered for the command's life: only a real answer is
/// (a rule's, a hook's, the person's). A question nobody answered (no client
/// connected, the question cancelled) refuses the connections waiting on it and
/// is forgotten, so the next connection asks again: a dev server that outlives a
/// closed editor reaches the host once someone is back to answer (issue 40).
type Decision = Arc<OnceCell<(Admission, bool)>>;

/// How many distinct host:ports one command may ask about; past it each is refused
/// without a question. A command is not to be trusted with how many it asks: a
/// loop over 10,000 names would be 10,000 questions and audit lines.
pub const MAX_HOSTS_PER_COMMAND: usize = 256;

/// One command's gate. A decision holds for the command's life, per host and port:
/// a build that opens 200 connections to one host asks once, and connections that
/// arrive while the question is open wait for its answer.
struct CommandGate {
    registry: Weak<ToolRegistry>,
    session: Option<Arc<crate::registry::Session>>,
    /// The wrapped agent whose own process this is (its scope marked so): its
    /// connections' lines name it.
    agent: Option<String>,
    origin: CommandOrigin,
    calls: Arc<AtomicU64>,
    decided: Mutex<HashMap<(String, u16), Decision>>,
    /// Held while one of the command's hosts is judged: its questions reach the
    /// person one at a time, never 500 at once.
    asking: Arc<tokio::sync::Mutex<()>>,
}

#[async_trait::async_trait]
impl ConnectionGate for CommandGate {
    async fn admit(&self, request: &ConnectRequest) -> Admission {
        let key = (
            request.destination.host.to_string(),
            request.destination.port,
        );
        let cell = {
            let mut decided = self.decided.lock().unwrap_or_else(|p| p.into_inner());
            if !decided.contains_key(&key) && decided.len() >= MAX_HOSTS_PER_COMMAND {
                return Admission::Deny {
                    reason: format!(
                        "this command asked for more than {MAX_HOSTS_PER_COMMAND} hosts; \
                         the rest are refused without asking"
                    ),
                };
            }
            decided.entry(key.clone()).or_default().clone()
        };
        // The judgement runs as a task of its own: when the asker goes away (the
        // command ended, the client hung up), the guard cancels the call, whose
        // question is withdrawn and whose audit line is still written; the cell
        // stays empty and the next connection asks again.
        let (admission, remembered) = cell
            .get_or_init(|| async {
                let cancel = CancellationToken::new();
                let _withdraw = cancel.clone().drop_guard();
                let judged = tokio::spawn(self.judgement(request, cancel));
                judged.await.unwrap_or_else(|e| {
                    let reason = format!("the judgement failed: {e}");
                    (Admission::Deny { reason }, false)
                })
            })
            .await
            .clone();
        if !remembered {
            let mut decided = self.decided.lock().unwrap_or_else(|p| p.into_inner());
            if decided.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                decided.remove(&key);
            }
        }
        admission
    }
}

impl CommandGate {
    /// The judgement of one host, owning what it needs (it outlives its asker).
    fn judgement(
        &self,
        request: &ConnectRequest,
        cancel: CancellationToken,
    ) -> impl std::future::Future<Output = (Admission, bool)> + Send + 'static {
        let (registry, session, agent, origin) = (
            self.registry.clone(),
            self.session.clone(),
            self.agent.clone(),
            self.origin.clone(),
        );
        let (asking, request) = (self.asking.clone(), request.clone());
        let call_id = format!("net-{}", self.calls.fetch_add(1, Ordering::Relaxed) + 1);
        async move {
            let _one_at_a_time = asking.lock().await;
            if cancel.is_cancelled() {
                let reason = "the connection went away before it was judged".into();
                return (Admission::Deny { reason }, false);
            }
            let asker = Asker {
                session,
                agent,
                origin,
            };
            judge(registry, asker, call_id, &request, cancel).await
        }
    }
}

/// Who a connection is judged for: the command's session (if any), the wrapped agent
/// whose own process it is (if it is one), and the command.
struct Asker {
    session: Option<Arc<crate::registry::Session>>,
    agent: Option<String>,
    origin: CommandOrigin,
}

/// One `network` call through the registry's waterfall, and whether its answer is
/// a real one, to remember ([`Decision`]).
async fn judge(
    registry: Weak<ToolRegistry>,
    asker: Asker,
    call_id: String,
    request: &ConnectRequest,
    cancel: CancellationToken,
) -> (Admission, bool) {
    let Some(registry) = registry.upgrade() else {
        return (
            Admission::Deny {
                reason: "dsh is stopping".into(),
            },
            false,
        );
    };
    let mut arguments = serde_json::json!({
        "host": request.destination.host.to_string(),
        "port": request.destination.port,
        "scheme": request.scheme.as_str(),
        "command": asker.origin.command,
    });
    if let Some(task) = &asker.origin.task_id {
        arguments["taskId"] = task.to_string().into();
    } else if let Some(call) = &asker.origin.call_id {
        arguments["callId"] = call.clone().into();
    }
    let mut call = ToolExecution::internal(call_id, "network", arguments, asker.session, cancel);
    if let Some(agent) = &asker.agent {
        call = call.by_agent(agent);
    }
    let out = registry.execute(&call).await;
    if out.arguments_run.is_some() {
        // The proxy connects where the command asked: a judgement of another
        // host would not be about this connection.
        return (
            Admission::Deny {
                reason: "a hook rewrote the network call; a connection cannot be redirected".into(),
            },
            true,
        );
    }
    // The permission gate refused for want of an answer: no client to ask, or a
    // question cancelled (its answer recorded as such, or none recorded at all).
    let verdict = call.verdict();
    let unanswered = out.vetoed
        && verdict.decided_by.as_deref() == Some("permission")
        && matches!(
            verdict.answer,
            None | Some(crate::registry::PermissionAnswer::Cancelled)
        );
    if out.is_error || out.vetoed {
        let reason = out.text.trim().to_string();
        (Admission::Deny { reason }, !unanswered)
    } else {
        (Admission::Allow, true)
    }
}
