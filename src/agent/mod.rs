//! The turn loop of one session: prompt -> model stream -> tool calls through
//! the waterfall -> results -> the next model request, until the model stops
//! calling tools, hits a limit, fails, or is cancelled.
//!
//! The session log is written as things happen and is the only history: each
//! step's request is rebuilt from it ([`history`]), with completion notices at
//! their place. Notices never start a turn; they wait for the next request.

pub mod history;

use crate::config::{AgentConfig, SystemPromptMode};
use crate::hooks::waterfall::{ToolExecution, ToolOutput};
use crate::llm::{FinishReason, Model, ModelError, ModelEvent, ModelRequest};
use crate::registry::Session;
use crate::store::{Event, SessionLog, ToolStatus, now_ms};
use crate::tools::ToolRegistry;
use agent_client_protocol_schema::v1::StopReason;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What a turn tells the session's client as it happens, in no protocol's terms: the
/// ACP side turns each into a `session/update` (src/acp/updates.rs).
#[derive(Debug, Clone, Copy)]
pub enum TurnEvent<'a> {
    /// A tool call begins (pending), with its title and kind for the client's card.
    ToolCall {
        call_id: &'a str,
        title: &'a str,
        kind: &'a str,
        arguments: &'a Value,
    },
    /// The call passed to the waterfall.
    ToolInProgress { call_id: &'a str },
    /// The call's result text, completed or failed.
    ToolDone {
        call_id: &'a str,
        text: &'a str,
        is_error: bool,
    },
    /// A piece of the model's answer.
    AgentText(&'a str),
    /// A piece of the model's reasoning.
    AgentThought(&'a str),
}

/// Everything a turn (or a single user-initiated tool call) works with.
pub struct TurnContext<'a> {
    pub session: &'a Arc<Session>,
    pub log: Option<Arc<SessionLog>>,
    pub tools: &'a ToolRegistry,
    /// Tells the session's client what happens.
    pub events: &'a (dyn Fn(TurnEvent<'_>) + Send + Sync),
    pub cancel: CancellationToken,
}

impl TurnContext<'_> {
    fn append(&self, event: Event) {
        if let Some(log) = &self.log
            && let Err(e) = log.append(&event)
        {
            tracing::error!(session = %self.session.id, "session log append failed: {e}");
        }
    }
}

/// The built-in system prompt: our own words on where the model is and how the
/// tools behave.
pub fn system_prompt(session: &Session, config: &AgentConfig) -> String {
    let today = crate::store::iso8601(now_ms());
    let builtin = format!(
        "You are a coding agent working in a user's project through dsh.\n\
         Working directory: {cwd}\nPlatform: {os}\nToday: {date}\n\n\
         You act through the tools bash, bash_output and bash_kill.\n\
         - Every bash call starts a fresh shell: nothing carries over between calls. Pass `workdir` instead \
           of running cd; paths are relative to the working directory above.\n\
         - A non-zero exit is reported after the output as `[exit code: N]`; read it and decide.\n\
         - Long output is cut to its end, with the path of a file holding all of it; read that file with \
           tools like grep, head or sed when you need more.\n\
         - For long-running commands (servers, watchers, long builds) use run_in_background and poll with \
           bash_output; stop them with bash_kill. When a background task finishes, a notice appears in the \
           conversation as <context source=\"tool-bash\">, but nothing wakes you: poll when you need to know.\n\
         - Messages in <context source=\"user-shell\"> show commands the user ran themselves.\n\
         - Some commands need the user's permission; a refusal comes back as an error result. Do not retry a \
           refused command in another form.\n\
         Keep answers short and say what you did.",
        cwd = session.cwd.display(),
        os = std::env::consts::OS,
        date = &today[..10],
    );
    let Some(path) = &config.system_prompt_file else {
        return builtin;
    };
    match std::fs::read_to_string(path) {
        Ok(extra) => match config.system_prompt_mode {
            SystemPromptMode::Replace => extra,
            SystemPromptMode::Extend => format!("{builtin}\n\n{extra}"),
        },
        Err(e) => {
            tracing::warn!(path = %path.display(), "cannot read the system prompt file: {e}");
            builtin
        }
    }
}

/// Runs one tool call with the full ACP choreography (tool_call pending ->
/// in_progress -> completed/failed), logging the call and its result.
/// `arguments` that are not a JSON object (a model's unparsable output) are
/// answered with an error result and never reach the tool.
pub async fn run_tool(
    ctx: &TurnContext<'_>,
    call_id: &str,
    tool: &str,
    arguments: Value,
    by_model: bool,
) -> ToolOutput {
    let kind = ctx
        .tools
        .get(tool)
        .map(|t| t.kind().as_str())
        .unwrap_or("other");
    let title = crate::tools::title_for(tool, &arguments);
    ctx.append(Event::ToolCall {
        at_ms: now_ms(),
        call_id: call_id.to_string(),
        tool: tool.to_string(),
        title: title.clone(),
        kind: kind.to_string(),
        arguments: arguments.clone(),
        by_model,
    });
    (ctx.events)(TurnEvent::ToolCall {
        call_id,
        title: &title,
        kind,
        arguments: &arguments,
    });
    (ctx.events)(TurnEvent::ToolInProgress { call_id });
    let out = match &arguments {
        Value::String(raw) => ToolOutput::error(format!(
            "invalid arguments: not a JSON object: {}",
            raw.chars().take(200).collect::<String>()
        )),
        _ => {
            let call = ToolExecution::new(
                call_id,
                tool,
                arguments,
                Some(ctx.session.clone()),
                ctx.cancel.clone(),
            );
            ctx.tools.execute(&call).await
        }
    };
    ctx.append(Event::ToolResult {
        at_ms: now_ms(),
        call_id: call_id.to_string(),
        status: if out.is_error {
            ToolStatus::Failed
        } else {
            ToolStatus::Completed
        },
        text: out.text.clone(),
        is_error: out.is_error,
    });
    (ctx.events)(TurnEvent::ToolDone {
        call_id,
        text: &out.text,
        is_error: out.is_error,
    });
    out
}

/// A tool call being assembled from stream fragments.
#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Runs model steps until the turn ends. The user's prompt is already in the
/// log. `Err` carries a model failure for the JSON-RPC error; whatever streamed
/// before it is logged and was sent.
pub async fn run_model_turn(
    ctx: &TurnContext<'_>,
    model: &dyn Model,
    config: &AgentConfig,
) -> Result<StopReason, ModelError> {
    let system = system_prompt(ctx.session, config);
    for _ in 0..config.max_steps {
        let events = match &ctx.log {
            Some(log) => log
                .replay()
                .map(|(_, e)| e)
                .map_err(|e| ModelError::Stream(format!("cannot read the session log: {e}")))?,
            None => Vec::new(),
        };
        // The notices are in the log at their place; the inbox only mirrors them.
        ctx.session.take_notices();
        let request = ModelRequest {
            messages: history::build(&events, &system, config.history_budget_chars),
            tools: ctx.tools.definitions(),
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let stream = model.stream(&request, tx, &ctx.cancel);
        tokio::pin!(stream);
        let (mut text, mut thought) = (String::new(), String::new());
        let mut calls: BTreeMap<usize, PartialCall> = BTreeMap::new();
        let mut finish = None;
        let mut handle = |event: ModelEvent| match event {
            ModelEvent::Text(t) => {
                (ctx.events)(TurnEvent::AgentText(&t));
                text.push_str(&t);
            }
            ModelEvent::Reasoning(t) => {
                (ctx.events)(TurnEvent::AgentThought(&t));
                thought.push_str(&t);
            }
            ModelEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => {
                let call = calls.entry(index).or_default();
                if id.is_some() {
                    call.id = id;
                }
                if let Some(name) = name {
                    call.name.push_str(&name);
                }
                call.arguments.push_str(&arguments);
            }
            ModelEvent::Usage { .. } => {}
            ModelEvent::Finish(reason) => finish = Some(reason),
        };
        let result = loop {
            tokio::select! {
                biased;
                Some(event) = rx.recv() => handle(event),
                r = &mut stream => break r,
            }
        };
        while let Ok(event) = rx.try_recv() {
            handle(event);
        }
        if !thought.is_empty() {
            ctx.append(Event::AgentThought {
                at_ms: now_ms(),
                text: thought,
            });
        }
        if !text.is_empty() {
            ctx.append(Event::AgentMessage {
                at_ms: now_ms(),
                text,
            });
        }
        match result {
            Err(ModelError::Cancelled) => return Ok(StopReason::Cancelled),
            Err(e) => return Err(e),
            Ok(()) => {}
        }
        if calls.is_empty() {
            return Ok(match finish {
                Some(FinishReason::Length) => StopReason::MaxTokens,
                _ => StopReason::EndTurn,
            });
        }
        for (index, call) in calls {
            if ctx.cancel.is_cancelled() {
                break;
            }
            let call_id = call
                .id
                .unwrap_or_else(|| format!("call-{}-{index}", uuid::Uuid::new_v4().simple()));
            let arguments = match serde_json::from_str::<Value>(&call.arguments) {
                Ok(v @ Value::Object(_)) => v,
                _ => Value::String(call.arguments),
            };
            let name = if call.name.is_empty() {
                "(none)".to_string()
            } else {
                call.name
            };
            run_tool(ctx, &call_id, &name, arguments, true).await;
        }
        if ctx.cancel.is_cancelled() {
            return Ok(StopReason::Cancelled);
        }
    }
    Ok(StopReason::MaxTurnRequests)
}
