//! `session/update` payloads, built from the ACP schema types so the wire format
//! is the official one.

use agent_client_protocol_schema::v1::{
    Content, ContentBlock, ContentChunk, CurrentModeUpdate, SessionNotification, SessionUpdate,
    TextContent, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    ToolKind,
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

pub fn agent_text(text: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(text_chunk(text))
}

pub fn agent_thought(text: &str) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(text_chunk(text))
}

pub fn mode(mode_id: &str) -> SessionUpdate {
    SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode_id.to_string()))
}

/// The ACP kind of one of our tools, by name.
pub fn kind_of(kind: &str) -> ToolKind {
    match kind {
        "read" => ToolKind::Read,
        "execute" => ToolKind::Execute,
        _ => ToolKind::Other,
    }
}

/// A new tool call, pending.
pub fn tool_call(call_id: &str, title: &str, kind: &str, raw_input: &Value) -> SessionUpdate {
    SessionUpdate::ToolCall(
        ToolCall::new(call_id.to_string(), title.to_string())
            .kind(kind_of(kind))
            .status(ToolCallStatus::Pending)
            .raw_input(raw_input.clone()),
    )
}

/// A tool call starting to run.
pub fn tool_in_progress(call_id: &str) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_string(),
        ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
    ))
}

/// A tool call's end, with the text the model saw.
pub fn tool_done(call_id: &str, text: &str, is_error: bool) -> SessionUpdate {
    let status = if is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_string(),
        ToolCallUpdateFields::new()
            .status(status)
            .content(vec![ToolCallContent::Content(Content::new(
                ContentBlock::Text(TextContent::new(text.to_string())),
            ))])
            .raw_output(serde_json::json!({"text": text, "isError": is_error})),
    ))
}

/// The `session/update` for one protocol-neutral event of a turn (src/agent).
pub fn from_turn(event: crate::agent::TurnEvent<'_>) -> SessionUpdate {
    use crate::agent::TurnEvent as E;
    match event {
        E::ToolCall {
            call_id,
            title,
            kind,
            arguments,
        } => tool_call(call_id, title, kind, arguments),
        E::ToolInProgress { call_id } => tool_in_progress(call_id),
        E::ToolDone {
            call_id,
            text,
            is_error,
        } => tool_done(call_id, text, is_error),
        E::AgentText(text) => agent_text(text),
        E::AgentThought(text) => agent_thought(text),
    }
}
