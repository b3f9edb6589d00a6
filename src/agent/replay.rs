//! A session's log told again as the turn events it recorded, so a client that loads
//! the session sees what a live one saw (less the live output, which the log does not
//! keep: a call shows its result).

use super::TurnEvent;
use crate::store::Event;
use crate::tools::CallView;
use std::collections::HashMap;
use std::path::Path;

/// The ACP `messageId` a replay gives the message logged as `event`, the `at`-th event
/// of its log: the one logged with it, else one from its place (older logs), and for a
/// notice one from what its line keeps. `None` for an event that is no message.
pub fn message_id_of(at: usize, event: &Event) -> Option<String> {
    match event {
        Event::UserMessage { message_id, .. } | Event::AgentMessage { message_id, .. } => {
            Some(message_id.clone().unwrap_or_else(|| format!("log-{at}")))
        }
        Event::Notice {
            at_ms,
            source,
            text,
            ..
        } => Some(crate::store::notice_message_id(*at_ms, source, text)),
        _ => None,
    }
}

/// Calls `emit` with the turn event of each logged event a client is shown, in order.
/// `cwd` is the session's working directory, against which calls' views are built as
/// they were live.
pub fn replay(events: &[Event], cwd: &Path, mut emit: impl FnMut(TurnEvent<'_>)) {
    let mut views: HashMap<&str, CallView> = HashMap::new();
    let mut tools: HashMap<&str, &str> = HashMap::new();
    // `todo_write` calls show as the plan, never as tool cards (agent::plan).
    let mut plan_calls: std::collections::HashSet<&str> = Default::default();
    for (at, event) in events.iter().enumerate() {
        let message_id = message_id_of(at, event).unwrap_or_default();
        match event {
            // A prompt as it was sent, block by block; older logs kept only its text.
            Event::UserMessage { text, content, .. } => {
                if content.is_empty() {
                    emit(TurnEvent::UserText {
                        text,
                        message_id: &message_id,
                    });
                }
                for block in content {
                    emit(TurnEvent::UserBlock {
                        block,
                        message_id: &message_id,
                    });
                }
            }
            Event::AgentMessage { text, .. } => emit(TurnEvent::AgentText {
                text,
                message_id: &message_id,
            }),
            Event::AgentThought { text, .. } => emit(TurnEvent::AgentThought(text)),
            Event::ToolCall { call_id, tool, .. } if tool == super::plan::NAME => {
                plan_calls.insert(call_id);
            }
            Event::ToolResult { call_id, .. } if plan_calls.contains(call_id.as_str()) => {}
            Event::Plan { entries, .. } => emit(TurnEvent::Plan(entries)),
            Event::ToolCall {
                call_id,
                tool,
                kind,
                arguments,
                ..
            } => {
                let view = CallView::of(tool, arguments, Some(cwd));
                emit(TurnEvent::ToolCall {
                    call_id,
                    view: &view,
                    kind: *kind,
                    arguments,
                });
                views.insert(call_id, view);
                tools.insert(call_id, tool);
            }
            Event::ToolRewritten {
                call_id, arguments, ..
            } => {
                if let Some(view) = views.get_mut(call_id.as_str()) {
                    let tool = tools.get(call_id.as_str()).copied().unwrap_or_default();
                    *view = CallView::of(tool, arguments, Some(cwd));
                    emit(TurnEvent::ToolRewritten {
                        call_id,
                        view,
                        arguments,
                    });
                }
            }
            Event::ToolResult {
                call_id,
                text,
                is_error,
                ..
            } => {
                let view = views
                    .remove(call_id.as_str())
                    .unwrap_or_else(|| CallView::of("", &serde_json::Value::Null, Some(cwd)));
                emit(TurnEvent::ToolDone {
                    call_id,
                    view: &view,
                    text,
                    is_error: *is_error,
                    exit: None,
                });
            }
            // Notices are context for the model; a client sees them where they arrived,
            // tagged the way the model will see them.
            Event::Notice { source, text, .. } => emit(TurnEvent::UserText {
                text: &super::context_text(source, text),
                message_id: &message_id,
            }),
            Event::ModeChange { mode_id, .. } => emit(TurnEvent::ModeChanged(mode_id)),
            Event::Title { title, .. } => emit(TurnEvent::TitleChanged(title)),
            _ => {}
        }
    }
}
