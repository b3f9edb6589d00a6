//! The turn loop of one session: prompt -> model stream -> tool calls through
//! the waterfall -> results -> the next model request, until the model stops
//! calling tools, hits a limit, fails, or is cancelled.
//!
//! The session log is written as things happen and is the only history: each
//! step's request is rebuilt from it ([`history`]), with completion notices at
//! their place. Notices never start a turn; they wait for the next request.

pub mod commands;
pub mod history;
pub mod live;
pub mod plan;
mod prompt;
mod replay;
mod titles;

pub use prompt::text_of;
pub use replay::{message_id_of, replay};

use crate::config::{AgentConfig, ModelConfig, SystemPromptMode, TitleSource};
use crate::hooks::waterfall::{CommandExit, ToolExecution, ToolOutput};
use crate::llm::{FinishReason, Model, ModelError, ModelEvent, ModelRequest};
use crate::registry::Session;
use crate::store::{Event, PromptBlock, SessionLog, ToolKind, ToolStatus, now_ms};
use crate::tools::{CallView, ToolRegistry};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What a turn tells the session's client as it happens, in no protocol's terms: the
/// ACP side turns each into a `session/update` (src/acp/updates.rs), for live turns and
/// for replays of the session log alike.
#[derive(Debug, Clone, Copy)]
pub enum TurnEvent<'a> {
    /// What the user said (a prompt, or a notice shown where it arrived), as part of
    /// the message `message_id` (ACP's `messageId`: stable, the same on every replay).
    UserText { text: &'a str, message_id: &'a str },
    /// One block of a user's prompt as it was sent (a replay shows a prompt so).
    UserBlock {
        block: &'a PromptBlock,
        message_id: &'a str,
    },
    /// A tool call begins: pending until every hook and the person have let it
    /// through.
    ToolCall {
        call_id: &'a str,
        view: &'a CallView,
        kind: ToolKind,
        arguments: &'a Value,
    },
    /// The tool started running.
    ToolRunning {
        call_id: &'a str,
        view: &'a CallView,
    },
    /// A hook rewrote the call: `view` and `arguments` are what runs now.
    ToolRewritten {
        call_id: &'a str,
        view: &'a CallView,
        arguments: &'a Value,
    },
    /// Output while the call runs: `shown` is all of it the client is shown now (the
    /// last 64 KB), `new` what arrived since the previous event.
    ToolOutput {
        call_id: &'a str,
        view: &'a CallView,
        shown: &'a str,
        new: &'a str,
    },
    /// The call's result text, completed or failed.
    ToolDone {
        call_id: &'a str,
        view: &'a CallView,
        text: &'a str,
        is_error: bool,
        /// How the command ended, when one ran in the foreground.
        exit: Option<CommandExit>,
    },
    /// A piece of the model's answer, part of the message `message_id` (logged with
    /// the answer, so a replay shows it under the same id).
    AgentText { text: &'a str, message_id: &'a str },
    /// A piece of the model's reasoning.
    AgentThought(&'a str),
    /// The session's mode changed.
    ModeChanged(&'a str),
    /// The session got a title.
    TitleChanged(&'a str),
    /// The model's plan as it now stands (`todo_write`; each replaces the last).
    Plan(&'a [crate::store::PlanItem]),
    /// What the context holds after a model request, against the window, and what the
    /// session has cost so far (amount, currency) when prices are configured.
    Usage {
        used: u64,
        size: u64,
        cost: Option<(f64, &'a str)>,
    },
}

/// Tells a session's client about events after the turn that caused them may have
/// ended (a model-written title): owned, unlike [`TurnContext::events`].
pub type EventSink = Arc<dyn Fn(TurnEvent<'_>) + Send + Sync>;

/// Context as the model reads it in the history (`<context source="...">`), and as a
/// client is shown it, live and on replay alike.
pub fn context_text(source: &str, text: &str) -> String {
    format!("<context source=\"{source}\">{text}</context>")
}

/// Everything a turn (or a single user-initiated tool call) works with.
pub struct TurnContext<'a> {
    pub session: &'a Arc<Session>,
    pub log: Option<Arc<SessionLog>>,
    pub tools: &'a ToolRegistry,
    /// Tells the session's client what happens.
    pub events: &'a (dyn Fn(TurnEvent<'_>) + Send + Sync),
    pub cancel: CancellationToken,
    /// What slash commands ask of the daemon; `None`: slash commands are plain prompts.
    pub control: Option<&'a dyn commands::SessionControl>,
}

impl TurnEvent<'_> {
    /// Part of a tool call's card (its start, progress, rewrite, output and end).
    fn is_tool_card(&self) -> bool {
        matches!(
            self,
            TurnEvent::ToolCall { .. }
                | TurnEvent::ToolRunning { .. }
                | TurnEvent::ToolRewritten { .. }
                | TurnEvent::ToolOutput { .. }
                | TurnEvent::ToolDone { .. }
        )
    }
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
         You act through the tools bash, bash_output and bash_kill, and read_file, edit_file and write_file.\n\
         - Read and change files with read_file, edit_file and write_file, not cat, sed -i or heredocs: the \
           user sees each change as a diff, and the editor's unsaved text is what you read and edit.\n\
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

/// Runs one tool call with the full choreography (a pending call, running once the
/// waterfall lets it through, its output as it comes, then completed or failed),
/// logging the call and its result.
/// `arguments` that are not a JSON object (a model's unparsable output) are
/// answered with an error result and never reach the tool.
pub async fn run_tool(
    ctx: &TurnContext<'_>,
    call_id: &str,
    tool: &str,
    arguments: Value,
    by_model: bool,
) -> ToolOutput {
    if tool == plan::NAME {
        // The plan is how a `todo_write` call shows (as the editors' own agents do):
        // through the waterfall like any call, but without a tool card.
        let events = |event: TurnEvent<'_>| {
            if !event.is_tool_card() {
                (ctx.events)(event)
            }
        };
        let quiet = TurnContext {
            session: ctx.session,
            log: ctx.log.clone(),
            tools: ctx.tools,
            events: &events,
            cancel: ctx.cancel.clone(),
            control: ctx.control,
        };
        return run_any_tool(&quiet, call_id, tool, arguments, by_model).await;
    }
    run_any_tool(ctx, call_id, tool, arguments, by_model).await
}

async fn run_any_tool(
    ctx: &TurnContext<'_>,
    call_id: &str,
    tool: &str,
    arguments: Value,
    by_model: bool,
) -> ToolOutput {
    let kind = ctx
        .tools
        .get_in(&ctx.session.id, tool)
        .map(|t| t.kind())
        .unwrap_or(ToolKind::Other);
    // An edit or write shows its diff from the first update, before any question.
    let diff = if crate::tools::files::writes(tool) && ctx.tools.get(tool).is_some() {
        // Before any judgement: through the executor's own containment.
        let place = ctx.tools.file_place();
        crate::tools::files::preview(place, Some(ctx.session), tool, &arguments, false).await
    } else {
        None
    };
    let view = CallView::of(tool, &arguments, Some(&ctx.session.cwd)).with_diff(diff);
    // The plan is shown from the arguments that ran, once the call has.
    let planned = (tool == plan::NAME).then(|| arguments.clone());
    ctx.append(Event::ToolCall {
        at_ms: now_ms(),
        call_id: call_id.to_string(),
        tool: tool.to_string(),
        title: view.title.clone(),
        kind,
        arguments: arguments.clone(),
        by_model,
    });
    (ctx.events)(TurnEvent::ToolCall {
        call_id,
        view: &view,
        kind,
        arguments: &arguments,
    });
    let out = match &arguments {
        Value::String(raw) => ToolOutput::error(format!(
            "invalid arguments: not a JSON object: {}",
            raw.chars().take(200).collect::<String>()
        )),
        _ => {
            let live = Arc::new(live::LiveCall::new());
            let call = ToolExecution::new(
                call_id,
                tool,
                arguments,
                Some(ctx.session.clone()),
                ctx.cancel.clone(),
            )
            .watched_by(live.clone());
            live::watch(ctx, call_id, tool, &view, &live, ctx.tools.execute(&call)).await
        }
    };
    if let Some(planned) = &planned {
        plan::show(ctx, out.arguments_run.as_ref().unwrap_or(planned), &out);
    }
    if let Some(arguments) = &out.arguments_run {
        ctx.append(Event::ToolRewritten {
            at_ms: now_ms(),
            call_id: call_id.to_string(),
            arguments: arguments.clone(),
        });
    }
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
        spills: Some(out.spills.clone()),
    });
    if let Some(original) = &out.original_text {
        ctx.append(Event::ToolResultReplaced {
            at_ms: now_ms(),
            call_id: call_id.to_string(),
            original_text: original.clone(),
        });
    }
    let view = match &out.arguments_run {
        // A rewritten edit's diff is not known any more: the result says what was done.
        Some(arguments) => CallView::of(tool, arguments, Some(&ctx.session.cwd)),
        None => view,
    };
    (ctx.events)(TurnEvent::ToolDone {
        call_id,
        view: &view,
        text: &out.text,
        is_error: out.is_error,
        exit: out.exit,
    });
    add_context(ctx, &out.context);
    out
}

/// The model a session's next request names: the "Think harder" model while its switch
/// is on (and one is configured), else the one the person picked, else the config's
/// (`None`).
pub fn requested_model(session: &Session, config: &ModelConfig) -> Option<String> {
    match &config.think_harder_model {
        Some(model) if session.think_harder() => Some(model.clone()),
        _ => session.model(),
    }
}

/// A whole agent message of dsh's own (not the model's): logged and shown under one
/// fresh `messageId`.
pub(crate) fn say(ctx: &TurnContext<'_>, text: &str) {
    let message_id = crate::store::new_message_id();
    ctx.append(Event::AgentMessage {
        at_ms: now_ms(),
        text: text.to_string(),
        message_id: Some(message_id.clone()),
    });
    (ctx.events)(TurnEvent::AgentText {
        text,
        message_id: &message_id,
    });
}

/// Context hooks added for the model: logged as notices at their place (the model
/// sees each as `<context source="hook:NAME">` after what it belongs to) and shown.
fn add_context(ctx: &TurnContext<'_>, context: &[(String, String)]) {
    for (source, text) in context {
        let at_ms = now_ms();
        ctx.append(Event::Notice {
            at_ms,
            source: source.clone(),
            task_id: String::new(),
            text: text.clone(),
        });
        (ctx.events)(TurnEvent::UserText {
            text: &context_text(source, text),
            message_id: &crate::store::notice_message_id(at_ms, source, text),
        });
    }
}

/// One prompt's turn, framed in the log (turn start, the user's message, turn end with
/// its stop reason): a `!COMMAND` prompt runs the command through the waterfall as the
/// user's own call; any other goes to the model, or, with none configured (`Err`
/// carries its settings), is answered with what to set. `Err` is a model failure, for
/// the prompt's JSON-RPC error. `later` hears of what happens after the turn (a
/// model-written title).
/// Why a turn ended: the agent's own words (the session log keeps them), which the ACP
/// side maps to the protocol's stop reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model answered without asking for a tool.
    EndTurn,
    /// The model's answer was cut at its length limit.
    MaxTokens,
    /// `[agent] max_steps` model requests were made in one turn.
    MaxTurnRequests,
    /// A prompt hook blocked the prompt.
    Refusal,
    /// The prompt was cancelled.
    Cancelled,
}

impl StopReason {
    /// Its name in the session log (`turn_end`'s `stop_reason`), the same words ACP uses.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::MaxTurnRequests => "max_turn_requests",
            StopReason::Refusal => "refusal",
            StopReason::Cancelled => "cancelled",
        }
    }
}

pub async fn run_prompt(
    ctx: &TurnContext<'_>,
    blocks: &[PromptBlock],
    model: Option<&Arc<dyn Model>>,
    model_config: &ModelConfig,
    config: &AgentConfig,
    later: EventSink,
) -> Result<StopReason, String> {
    let text = &prompt::text_of(blocks);
    let turn_id = uuid::Uuid::new_v4().simple().to_string();
    ctx.append(Event::TurnStart {
        at_ms: now_ms(),
        turn_id: turn_id.clone(),
    });
    ctx.append(Event::UserMessage {
        at_ms: now_ms(),
        text: text.to_string(),
        content: prompt::blocks_to_log(blocks),
        message_id: Some(crate::store::new_message_id()),
    });
    let first_prompt = ctx.session.title().is_none();
    if first_prompt && let Some(title) = title_of(text) {
        ctx.append(Event::Title {
            at_ms: now_ms(),
            title: title.clone(),
        });
        (ctx.events)(TurnEvent::TitleChanged(&title));
        ctx.session.set_title(Some(title));
    }
    let said = ctx
        .tools
        .hooks_for(ctx.session)
        .on_prompt(ctx.session, text)
        .await;
    add_context(ctx, &said.context);
    let outcome = if let Some((hook, reason)) = said.blocked {
        let text = format!("The prompt was blocked by {hook}: {reason}");
        say(ctx, &text);
        Ok(StopReason::Refusal)
    } else if let Some(control) = ctx.control
        && commands::run(ctx, text, control).await
    {
        Ok(if ctx.cancel.is_cancelled() {
            StopReason::Cancelled
        } else {
            StopReason::EndTurn
        })
    } else if let Some(command) = text.trim_start().strip_prefix('!') {
        let args = serde_json::json!({"command": command.trim(), "description": "Run the user's ! command"});
        let call_id = format!("call-{}", uuid::Uuid::new_v4().simple());
        run_tool(ctx, &call_id, "bash", args, false).await;
        Ok(if ctx.cancel.is_cancelled() {
            StopReason::Cancelled
        } else {
            StopReason::EndTurn
        })
    } else {
        match model {
            Some(model) => {
                // Only a prompt that goes to the model anyway is shown to it for a
                // title: a blocked prompt, a command or a `!` line never is.
                if first_prompt && config.titles == TitleSource::Model {
                    titles::spawn(
                        model.clone(),
                        ctx.session.clone(),
                        ctx.log.clone(),
                        text,
                        (
                            ctx.session.model(),
                            ctx.session
                                .model()
                                .unwrap_or_else(|| model_config.model.clone()),
                        ),
                        later,
                    );
                }
                run_model_turn(ctx, model.as_ref(), model_config, config)
                    .await
                    .map_err(|e| e.to_string())
            }
            None => {
                let text = crate::llm::openai::not_configured_text(model_config);
                say(ctx, &text);
                Ok(StopReason::EndTurn)
            }
        }
    };
    let stop_reason = match &outcome {
        Ok(stop) => stop.as_str().to_string(),
        Err(_) => "error".into(),
    };
    ctx.append(Event::TurnEnd {
        at_ms: now_ms(),
        turn_id,
        stop_reason,
    });
    outcome
}

/// `text` as a fenced code block (kept here by its old name; it is the tools').
pub use crate::tools::fenced;

/// Longest title a session gets from its first prompt, in characters.
const TITLE_CHARS: usize = 60;

/// A session's title from its first prompt: the first line with text, trimmed to 60
/// characters (`…` marks a cut).
pub fn title_of(prompt: &str) -> Option<String> {
    let line = prompt.lines().map(str::trim).find(|l| !l.is_empty())?;
    let mut title: String = line.chars().take(TITLE_CHARS).collect();
    if line.chars().count() > TITLE_CHARS {
        title = title.trim_end().to_string();
        title.push('…');
    }
    Some(title)
}

/// What a model's usage costs at the configured prices, if both are set.
fn cost_of(config: &ModelConfig, prompt_tokens: u64, completion_tokens: u64) -> Option<f64> {
    let (p_in, p_out) = (config.price_per_mtok_in?, config.price_per_mtok_out?);
    Some((prompt_tokens as f64 * p_in + completion_tokens as f64 * p_out) / 1e6)
}

/// A tool call as the model streams it: its pieces, put together by index.
#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// What one model step streamed, folded: its text (one message, one id), its
/// reasoning, its tool calls, its usage and why it finished.
#[derive(Default)]
struct StepFold {
    text: String,
    thought: String,
    message_id: String,
    calls: BTreeMap<usize, PartialCall>,
    usage: Option<(u64, u64)>,
    finish: Option<FinishReason>,
}

impl StepFold {
    /// Folds one event in, showing text and reasoning as they come.
    fn add(&mut self, ctx: &TurnContext<'_>, event: ModelEvent) {
        match event {
            ModelEvent::Text(t) => {
                (ctx.events)(TurnEvent::AgentText {
                    text: &t,
                    message_id: &self.message_id,
                });
                self.text.push_str(&t);
            }
            ModelEvent::Reasoning(t) => {
                (ctx.events)(TurnEvent::AgentThought(&t));
                self.thought.push_str(&t);
            }
            ModelEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => {
                let call = self.calls.entry(index).or_default();
                if id.is_some() {
                    call.id = id;
                }
                if let Some(name) = name {
                    call.name.push_str(&name);
                }
                call.arguments.push_str(&arguments);
            }
            ModelEvent::Usage {
                prompt_tokens,
                completion_tokens,
            } => self.usage = Some((prompt_tokens, completion_tokens)),
            ModelEvent::Finish(reason) => self.finish = Some(reason),
        }
    }
}

/// Runs model steps until the turn ends. The user's prompt is already in the
/// log. `Err` carries a model failure for the JSON-RPC error; whatever streamed
/// before it is logged and was sent.
pub async fn run_model_turn(
    ctx: &TurnContext<'_>,
    model: &dyn Model,
    model_config: &ModelConfig,
    config: &AgentConfig,
) -> Result<StopReason, ModelError> {
    let system = system_prompt(ctx.session, config);
    let mut told_shortened = false;
    // How often the stop hooks sent this turn on.
    let mut continued = 0;
    // The history as the log has it: read whole once, then only what each step added.
    let (mut events, mut read_to) = (Vec::new(), 0);
    for _ in 0..config.max_steps {
        if let Some(log) = &ctx.log {
            let (added, to) = log
                .replay_from(read_to)
                .map_err(|e| ModelError::Stream(format!("cannot read the session log: {e}")))?;
            events.extend(added);
            read_to = to;
        }
        let request = ModelRequest {
            messages: history_messages(
                ctx,
                &events,
                &system,
                model_config,
                config,
                &mut told_shortened,
            ),
            tools: ctx.tools.definitions_for(&ctx.session.id),
            model: requested_model(ctx.session, model_config),
            max_tokens: None,
        };
        let (step, result) = stream_step(ctx, model, &request).await;
        log_usage(ctx, model_config, &events, step.usage);
        if !step.thought.is_empty() {
            ctx.append(Event::AgentThought {
                at_ms: now_ms(),
                text: step.thought,
            });
        }
        if !step.text.is_empty() {
            ctx.append(Event::AgentMessage {
                at_ms: now_ms(),
                text: step.text,
                message_id: Some(step.message_id),
            });
        }
        match result {
            Err(ModelError::Cancelled) => return Ok(StopReason::Cancelled),
            Err(e) => return Err(e),
            Ok(()) => {}
        }
        if step.calls.is_empty() {
            if step.finish == Some(FinishReason::Length) {
                return Ok(StopReason::MaxTokens);
            }
            // The model ended its turn: a `stop` hook may send it on, with what it says
            // as the model's next context (at most `[hooks] max_continues` times).
            let hooks = ctx.tools.hooks_for(ctx.session);
            match hooks.on_stop(ctx.session, continued).await {
                Some(go_on) if !ctx.cancel.is_cancelled() => {
                    continued += 1;
                    add_context(ctx, &[go_on]);
                    continue;
                }
                _ => return Ok(StopReason::EndTurn),
            }
        }
        dispatch_calls(ctx, step.calls).await;
        if ctx.cancel.is_cancelled() {
            return Ok(StopReason::Cancelled);
        }
    }
    Ok(StopReason::MaxTurnRequests)
}

/// The request's messages from the log's events, shortened to the budget; the first
/// time a turn shortens, the person is told (and the log keeps the note).
fn history_messages(
    ctx: &TurnContext<'_>,
    events: &[Event],
    system: &str,
    model_config: &ModelConfig,
    config: &AgentConfig,
    told_shortened: &mut bool,
) -> Vec<crate::llm::Message> {
    // The notices are in the log at their place; the inbox only mirrors them.
    ctx.session.take_notices();
    let (messages, shortened) = history::build_counted(
        events,
        system,
        config.history_budget_chars,
        model_config.vision,
    );
    if shortened > 0 && !*told_shortened {
        *told_shortened = true;
        let note = format!(
            "The conversation is over its history budget ({} characters): the model now sees \
             the {shortened} oldest tool output(s) shortened to a marker. The session log and \
             the spill files keep everything.",
            config.history_budget_chars
        );
        ctx.append(Event::AgentThought {
            at_ms: now_ms(),
            text: note.clone(),
        });
        (ctx.events)(TurnEvent::AgentThought(&note));
    }
    messages
}

/// One model request, streamed: what it said, folded, and how the stream ended.
async fn stream_step(
    ctx: &TurnContext<'_>,
    model: &dyn Model,
    request: &ModelRequest,
) -> (StepFold, Result<(), ModelError>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let stream = model.stream(request, tx, &ctx.cancel);
    tokio::pin!(stream);
    // The answer's text is one message: its deltas and its log line share the id.
    let mut step = StepFold {
        message_id: crate::store::new_message_id(),
        ..StepFold::default()
    };
    let result = loop {
        tokio::select! {
            biased;
            Some(event) = rx.recv() => step.add(ctx, event),
            r = &mut stream => break r,
        }
    };
    while let Ok(event) = rx.try_recv() {
        step.add(ctx, event);
    }
    (step, result)
}

/// Logs a step's usage and shows it with the session's cost so far (`events`: the log
/// before this step, whose usage lines are the cost already spent).
fn log_usage(
    ctx: &TurnContext<'_>,
    model_config: &ModelConfig,
    events: &[Event],
    usage: Option<(u64, u64)>,
) {
    let Some((prompt_tokens, completion_tokens)) = usage else {
        return;
    };
    let spent: f64 = events
        .iter()
        .filter_map(|e| match e {
            Event::Usage {
                prompt_tokens,
                completion_tokens,
                ..
            } => cost_of(model_config, *prompt_tokens, *completion_tokens),
            _ => None,
        })
        .sum();
    ctx.append(Event::Usage {
        at_ms: now_ms(),
        model: requested_model(ctx.session, model_config)
            .unwrap_or_else(|| model_config.model.clone()),
        prompt_tokens,
        completion_tokens,
    });
    let cost = cost_of(model_config, prompt_tokens, completion_tokens)
        .map(|c| (spent + c, model_config.currency.as_str()));
    (ctx.events)(TurnEvent::Usage {
        used: prompt_tokens + completion_tokens,
        size: model_config.context_window,
        cost,
    });
}

/// Runs a step's tool calls in the order the model gave them, until the turn is
/// cancelled. A call without an id gets one; arguments that are not a JSON object go
/// to the tool as their raw text (it refuses them with the reason).
async fn dispatch_calls(ctx: &TurnContext<'_>, calls: BTreeMap<usize, PartialCall>) {
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
}
