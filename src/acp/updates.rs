//! `session/update` payloads, built from the ACP schema types so the wire format
//! is the official one.

use crate::agent::TurnEvent;
use crate::hooks::waterfall::CommandExit;
use crate::store::PromptBlock;
use crate::tools::CallView;
use agent_client_protocol_schema::v1::{
    Content, ContentBlock, ContentChunk, Cost, CurrentModeUpdate, Diff, Meta, SessionInfoUpdate,
    SessionNotification, SessionUpdate, Terminal, TextContent, ToolCall, ToolCallContent,
    ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind, UsageUpdate,
};
use serde_json::Value;

/// Wraps an update for `session` as `session/update` params.
pub fn notification(session: &str, update: SessionUpdate) -> Value {
    let mut value = serde_json::to_value(SessionNotification::new(session.to_string(), update))
        .unwrap_or(Value::Null);
    // The schema leaves a default `pending` status out; spec/acp.md lists it in
    // `tool_call`, and saying it costs clients nothing.
    if let Some(update) = value.get_mut("update")
        && update["sessionUpdate"] == "tool_call"
        && update.get("status").is_none()
    {
        update["status"] = "pending".into();
    }
    value
}

fn text_chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text.to_string())))
}

pub fn user_text(text: &str) -> SessionUpdate {
    SessionUpdate::UserMessageChunk(text_chunk(text))
}

/// One block of a user's prompt, as the ACP block it was sent as.
pub fn user_block(block: &PromptBlock) -> SessionUpdate {
    use agent_client_protocol_schema::v1::{
        BlobResourceContents, EmbeddedResource, EmbeddedResourceResource, ImageContent,
        ResourceLink, TextResourceContents,
    };
    let content = match block {
        PromptBlock::Text { text } => ContentBlock::Text(TextContent::new(text.clone())),
        PromptBlock::Image {
            mime_type,
            data,
            uri,
        } => {
            ContentBlock::Image(ImageContent::new(data.clone(), mime_type.clone()).uri(uri.clone()))
        }
        PromptBlock::ResourceLink {
            uri,
            name,
            title,
            description,
            mime_type,
            size,
        } => ContentBlock::ResourceLink(
            ResourceLink::new(name.clone(), uri.clone())
                .title(title.clone())
                .description(description.clone())
                .mime_type(mime_type.clone())
                .size(*size),
        ),
        PromptBlock::Resource {
            uri,
            mime_type,
            text,
            blob,
        } => {
            let resource = match (text, blob) {
                (Some(text), _) => EmbeddedResourceResource::TextResourceContents(
                    TextResourceContents::new(text.clone(), uri.clone())
                        .mime_type(mime_type.clone()),
                ),
                (None, blob) => EmbeddedResourceResource::BlobResourceContents(
                    BlobResourceContents::new(blob.clone().unwrap_or_default(), uri.clone())
                        .mime_type(mime_type.clone()),
                ),
            };
            ContentBlock::Resource(EmbeddedResource::new(resource))
        }
    };
    SessionUpdate::UserMessageChunk(ContentChunk::new(content))
}

pub fn agent_text(text: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(text_chunk(text))
}

/// The model's plan as ACP `plan` entries (the whole list: a client replaces what it
/// showed).
pub fn plan(entries: &[crate::store::PlanItem]) -> SessionUpdate {
    use crate::store::{PlanPriority, PlanStatus};
    use agent_client_protocol_schema::v1::{Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus};
    SessionUpdate::Plan(Plan::new(
        entries
            .iter()
            .map(|e| {
                PlanEntry::new(
                    e.content.clone(),
                    match e.priority {
                        PlanPriority::High => PlanEntryPriority::High,
                        PlanPriority::Medium => PlanEntryPriority::Medium,
                        PlanPriority::Low => PlanEntryPriority::Low,
                    },
                    match e.status {
                        PlanStatus::Pending => PlanEntryStatus::Pending,
                        PlanStatus::InProgress => PlanEntryStatus::InProgress,
                        PlanStatus::Completed => PlanEntryStatus::Completed,
                    },
                )
            })
            .collect(),
    ))
}

/// A message chunk as part of the message `message_id` (ACP's `messageId`: every chunk
/// of one message carries the same; a new id starts a new message).
fn in_message(update: SessionUpdate, message_id: &str) -> SessionUpdate {
    match update {
        SessionUpdate::UserMessageChunk(chunk) => {
            SessionUpdate::UserMessageChunk(chunk.message_id(message_id))
        }
        SessionUpdate::AgentMessageChunk(chunk) => {
            SessionUpdate::AgentMessageChunk(chunk.message_id(message_id))
        }
        other => other,
    }
}

pub fn agent_thought(text: &str) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(text_chunk(text))
}

pub fn mode(mode_id: &str) -> SessionUpdate {
    SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode_id.to_string()))
}

/// How the client shows things, from what it advertised in `initialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClientDisplay {
    /// Zed's display-only terminals (`clientCapabilities._meta.terminal_output`): a
    /// command's output goes to a terminal the editor draws, while it still runs in
    /// dsh's executor.
    pub terminal_output: bool,
    /// It offers `fs/read_text_file` (`clientCapabilities.fs.readTextFile`): the file
    /// tools read its buffers.
    pub fs_read: bool,
    /// It offers `fs/write_text_file`: the file tools write through it.
    pub fs_write: bool,
    /// It shows boolean config options (`clientCapabilities.session.configOptions
    /// .boolean`); without it a switch is offered as a select of `off` and `on`.
    pub boolean_options: bool,
}

impl ClientDisplay {
    /// What `initialize`'s `clientCapabilities` say about display.
    pub fn from_capabilities(capabilities: Option<&Value>) -> Self {
        let flag = capabilities
            .and_then(|c| c.get("_meta"))
            .and_then(|m| m.get("terminal_output"))
            .and_then(Value::as_bool);
        let fs = |key| {
            capabilities
                .and_then(|c| c.get("fs"))
                .and_then(|f| f.get(key))
                .and_then(Value::as_bool)
                == Some(true)
        };
        let boolean = capabilities
            .and_then(|c| c.pointer("/session/configOptions/boolean"))
            .is_some_and(|b| !b.is_null());
        Self {
            terminal_output: flag == Some(true),
            fs_read: fs("readTextFile"),
            fs_write: fs("writeTextFile"),
            boolean_options: boolean,
        }
    }

    fn terminal(self, view: &CallView) -> bool {
        self.terminal_output && view.terminal
    }
}

/// The slash commands the session offers (src/agent/commands.rs), for the editor's menu.
pub fn available_commands() -> SessionUpdate {
    use agent_client_protocol_schema::v1::{
        AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, UnstructuredCommandInput,
    };
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(
        crate::agent::commands::COMMANDS
            .iter()
            .map(|c| {
                let command = AvailableCommand::new(c.name, c.description);
                match c.input {
                    Some(hint) => command.input(AvailableCommandInput::Unstructured(
                        UnstructuredCommandInput::new(hint),
                    )),
                    None => command,
                }
            })
            .collect(),
    ))
}

/// The ACP kind of one of our tools.
pub fn kind_of(kind: crate::tools::ToolKind) -> ToolKind {
    use crate::tools::ToolKind as Ours;
    match kind {
        Ours::Read => ToolKind::Read,
        Ours::Execute => ToolKind::Execute,
        Ours::Edit => ToolKind::Edit,
        Ours::Fetch => ToolKind::Fetch,
        Ours::Think => ToolKind::Think,
        Ours::Other => ToolKind::Other,
    }
}

fn text_content(text: String) -> ToolCallContent {
    ToolCallContent::Content(Content::new(ContentBlock::Text(TextContent::new(text))))
}

/// The change a file tool makes, as the editor's diff view.
fn diff_content(view: &CallView) -> Option<ToolCallContent> {
    view.diff.as_ref().map(|d| {
        ToolCallContent::Diff(
            Diff::new(d.path.clone(), d.new_text.clone()).old_text(d.old_text.clone()),
        )
    })
}

/// What a call shows before any output: the model's description and the diff of an edit.
fn head(view: &CallView) -> Vec<ToolCallContent> {
    let mut content = Vec::with_capacity(3);
    if let Some(description) = &view.description {
        content.push(text_content(description.clone()));
    }
    content.extend(diff_content(view));
    content
}

/// A call's content: the model's description (and an edit's diff), then `body` (output
/// in a fence, or the terminal that shows it).
fn content(view: &CallView, body: ToolCallContent) -> Vec<ToolCallContent> {
    let mut content = head(view);
    content.push(body);
    content
}

/// Where the call works, with the line when one is known (the editor follows it).
fn locations(view: &CallView) -> Vec<ToolCallLocation> {
    view.location
        .iter()
        .map(|p| ToolCallLocation::new(p.clone()).line(view.line))
        .collect()
}

fn meta(key: &str, value: Value) -> Meta {
    Meta::from_iter([(key.to_string(), value)])
}

/// A new tool call, pending. With a terminal display its content is the terminal
/// (named after the call), announced in `_meta.terminal_info`.
pub fn tool_call(
    call_id: &str,
    view: &CallView,
    kind: crate::tools::ToolKind,
    raw_input: &Value,
    display: ClientDisplay,
) -> SessionUpdate {
    let mut call = ToolCall::new(call_id.to_string(), view.title.clone())
        .kind(kind_of(kind))
        .status(ToolCallStatus::Pending)
        .raw_input(raw_input.clone())
        .locations(locations(view));
    if display.terminal(view) {
        let mut info = serde_json::json!({"terminal_id": call_id});
        if let Some(cwd) = &view.location {
            info["cwd"] = cwd.display().to_string().into();
        }
        call = call
            .content(content(
                view,
                ToolCallContent::Terminal(Terminal::new(call_id.to_string())),
            ))
            .meta(meta("terminal_info", info));
    } else {
        let head = head(view);
        if !head.is_empty() {
            call = call.content(head);
        }
    }
    SessionUpdate::ToolCall(call)
}

/// The tool call a permission question is about: it says why it is asked, beside the
/// description (and the terminal, which must stay in the content).
pub fn permission_tool_call(
    call_id: &str,
    view: &CallView,
    kind: crate::tools::ToolKind,
    raw_input: &Value,
    reason: &str,
    escalation: Option<&crate::policy::Escalation>,
    display: ClientDisplay,
) -> ToolCallUpdate {
    // The question replaces the call's content: the diff stays in it, so the person
    // approves the change they see.
    let mut content = Vec::with_capacity(5);
    if let Some(description) = &view.description {
        content.push(text_content(description.clone()));
    }
    if let Some(escalation) = escalation {
        content.push(text_content(escalation_warning(escalation)));
    }
    if !reason.is_empty() {
        content.push(text_content(format!("Asked because: {reason}")));
    }
    content.extend(diff_content(view));
    if display.terminal(view) {
        content.push(ToolCallContent::Terminal(Terminal::new(
            call_id.to_string(),
        )));
    }
    ToolCallUpdate::new(
        call_id.to_string(),
        ToolCallUpdateFields::new()
            .title(view.title.clone())
            .kind(kind_of(kind))
            .raw_input(raw_input.clone())
            .locations(locations(view))
            .content(content),
    )
}

/// What a question about a call asking to leave the sandbox says first (issue 27).
pub fn escalation_warning(escalation: &crate::policy::Escalation) -> String {
    format!(
        "Runs OUTSIDE the sandbox if allowed (once): with your own access to files, \
         secrets, the network and local services.\nThe model's justification: {}",
        escalation.justification
    )
}

/// A hook rewrote a call: the editor shows what actually runs (title, input,
/// description). No status: it stays what it was.
pub fn tool_rewritten(
    call_id: &str,
    view: &CallView,
    raw_input: &Value,
    display: ClientDisplay,
) -> SessionUpdate {
    let mut content = Vec::with_capacity(2);
    if let Some(description) = &view.description {
        content.push(text_content(description.clone()));
    }
    if display.terminal(view) {
        // The terminal stays: its output is still to come.
        content.push(ToolCallContent::Terminal(Terminal::new(
            call_id.to_string(),
        )));
    }
    let fields = ToolCallUpdateFields::new()
        .title(view.title.clone())
        .raw_input(raw_input.clone())
        .content(content);
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call_id.to_string(), fields))
}

/// A tool call starting to run: the waterfall and the person let it through.
pub fn tool_running(call_id: &str) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_string(),
        ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
    ))
}

/// Output of a running call: the new bytes for a terminal, else all that is shown so
/// far, fenced. No status: it stays what it was.
pub fn tool_output(
    call_id: &str,
    view: &CallView,
    shown: &str,
    new: &str,
    display: ClientDisplay,
) -> SessionUpdate {
    let update = if display.terminal(view) {
        ToolCallUpdate::new(call_id.to_string(), ToolCallUpdateFields::new()).meta(meta(
            "terminal_output",
            serde_json::json!({"terminal_id": call_id, "data": new}),
        ))
    } else {
        ToolCallUpdate::new(
            call_id.to_string(),
            ToolCallUpdateFields::new()
                .content(content(view, text_content(crate::agent::fenced(shown)))),
        )
    };
    SessionUpdate::ToolCallUpdate(update)
}

/// A tool call's end, with the text the model saw (fenced; the exact text is in
/// `rawOutput`). A terminal keeps its content and hears how the command exited.
pub fn tool_done(
    call_id: &str,
    view: &CallView,
    text: &str,
    is_error: bool,
    exit: Option<CommandExit>,
    display: ClientDisplay,
) -> SessionUpdate {
    let status = if is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let fields = ToolCallUpdateFields::new()
        .status(status)
        .raw_output(serde_json::json!({"text": text, "isError": is_error}));
    let update = if display.terminal(view) {
        let mut exit_info = serde_json::json!({"terminal_id": call_id});
        if let Some(exit) = exit {
            if let Some(code) = exit.exit_code {
                exit_info["exit_code"] = code.into();
            }
            if let Some(signal) = exit.signal {
                exit_info["signal"] = crate::tools::bash::signal_name(signal).into();
            }
        }
        let mut meta = meta("terminal_exit", exit_info);
        if exit.is_none() {
            // No command ran in the foreground (a read of a task's output, a refusal):
            // the result is what the terminal shows.
            meta.insert(
                "terminal_output".into(),
                serde_json::json!({"terminal_id": call_id, "data": text}),
            );
        }
        ToolCallUpdate::new(call_id.to_string(), fields).meta(meta)
    } else {
        ToolCallUpdate::new(
            call_id.to_string(),
            fields.content(content(view, text_content(crate::agent::fenced(text)))),
        )
    };
    SessionUpdate::ToolCallUpdate(update)
}

/// The `session/update` for one protocol-neutral event of a turn (src/agent), shown
/// the way `display` allows.
pub fn from_turn(event: TurnEvent<'_>, display: ClientDisplay) -> SessionUpdate {
    use TurnEvent as E;
    match event {
        E::UserText { text, message_id } => in_message(user_text(text), message_id),
        E::UserBlock { block, message_id } => in_message(user_block(block), message_id),
        E::ToolCall {
            call_id,
            view,
            kind,
            arguments,
        } => tool_call(call_id, view, kind, arguments, display),
        E::ToolRunning { call_id, .. } => tool_running(call_id),
        E::ToolRewritten {
            call_id,
            view,
            arguments,
        } => tool_rewritten(call_id, view, arguments, display),
        E::ToolOutput {
            call_id,
            view,
            shown,
            new,
        } => tool_output(call_id, view, shown, new, display),
        E::ToolDone {
            call_id,
            view,
            text,
            is_error,
            exit,
        } => tool_done(call_id, view, text, is_error, exit, display),
        E::AgentText { text, message_id } => in_message(agent_text(text), message_id),
        E::AgentThought(text) => agent_thought(text),
        E::ModeChanged(mode_id) => mode(mode_id),
        E::Plan(entries) => plan(entries),
        E::TitleChanged(title) => SessionUpdate::SessionInfoUpdate(
            SessionInfoUpdate::new()
                .title(title.to_string())
                .updated_at(crate::store::iso8601(crate::store::now_ms())),
        ),
        E::Usage { used, size, cost } => {
            let mut update = UsageUpdate::new(used, size);
            if let Some((amount, currency)) = cost {
                update = update.cost(Cost::new(amount, currency.to_string()));
            }
            SessionUpdate::UsageUpdate(update)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_are_longer_than_any_backtick_run_inside() {
        assert_eq!(crate::agent::fenced("# title\n"), "```\n# title\n```");
        assert_eq!(crate::agent::fenced("a"), "```\na\n```");
        assert_eq!(crate::agent::fenced("x ```` y"), "`````\nx ```` y\n`````");
        assert_eq!(crate::agent::fenced(""), "```\n```");
    }

    #[test]
    fn zed_terminal_capability_is_read_from_meta() {
        let caps = serde_json::json!({"_meta": {"terminal_output": true}, "terminal": true});
        assert!(ClientDisplay::from_capabilities(Some(&caps)).terminal_output);
        let caps = serde_json::json!({"terminal": true});
        assert!(!ClientDisplay::from_capabilities(Some(&caps)).terminal_output);
        assert!(!ClientDisplay::from_capabilities(None).terminal_output);
        let caps = serde_json::json!({"fs": {"readTextFile": true, "writeTextFile": false}});
        let display = ClientDisplay::from_capabilities(Some(&caps));
        assert!(display.fs_read && !display.fs_write);
    }
}
