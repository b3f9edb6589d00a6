//! A session's log told again as the turn events it recorded, so a client that loads
//! the session sees what a live one saw (less the live output, which the log does not
//! keep: a call shows its result).

use super::TurnEvent;
use crate::store::Event;
use crate::tools::CallView;
use std::collections::HashMap;
use std::path::Path;

/// Calls `emit` with the turn event of each logged event a client is shown, in order.
/// `cwd` is the session's working directory, against which calls' views are built as
/// they were live.
pub fn replay(events: &[Event], cwd: &Path, mut emit: impl FnMut(TurnEvent<'_>)) {
    let mut views: HashMap<&str, CallView> = HashMap::new();
    let mut tools: HashMap<&str, &str> = HashMap::new();
    for event in events {
        match event {
            // A prompt as it was sent, block by block; older logs kept only its text.
            Event::UserMessage { text, content, .. } => {
                if content.is_empty() {
                    emit(TurnEvent::UserText(text));
                }
                for block in content {
                    emit(TurnEvent::UserBlock(block));
                }
            }
            Event::AgentMessage { text, .. } => emit(TurnEvent::AgentText(text)),
            Event::AgentThought { text, .. } => emit(TurnEvent::AgentThought(text)),
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
            Event::Notice { source, text, .. } => {
                emit(TurnEvent::UserText(&super::context_text(source, text)))
            }
            Event::ModeChange { mode_id, .. } => emit(TurnEvent::ModeChanged(mode_id)),
            Event::Title { title, .. } => emit(TurnEvent::TitleChanged(title)),
            _ => {}
        }
    }
}
