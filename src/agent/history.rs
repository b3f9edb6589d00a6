//! From a session log to the messages of the next model request.
//!
//! The log is the one source of truth; the request is rebuilt from it every step,
//! so a reload, a restart or a notice that arrived while idle all look the same
//! to the model. Rules:
//! - the model's own tool calls go back as assistant tool calls followed by their
//!   results, so every call id the model used is answered;
//! - the user's commands (`!` prompts, `_dsh/tools/call`) and completion notices
//!   are user-role context at their place;
//! - a notice that arrived while a tool call was running waits until the call's
//!   result, because nothing may come between a tool call and its result;
//! - past the budget, the oldest tool outputs are shortened to a marker that
//!   keeps the spill path; the log itself keeps everything.

use crate::llm::{Message, ToolCallRequest, UserPart};
use crate::store::Event;
use std::collections::HashMap;

/// What replaces an old tool output when the history is over budget.
const SHORTENED: &str = "[older output shortened to save context; the session log keeps it]";

/// What an image counts for against the budget, in characters: about what a model
/// charges for one in tokens, not the size of its base64.
const IMAGE_CHARS: usize = 4_000;

/// Builds the request messages: the system prompt, then the history.
pub fn build(events: &[Event], system: &str, budget_chars: usize) -> Vec<Message> {
    build_counted(events, system, budget_chars, false).0
}

/// [`build`], and how many old outputs were shortened to fit the budget. With
/// `vision`, prompts with images go as parts with the images in them; without, as
/// their text (which names each image).
pub fn build_counted(
    events: &[Event],
    system: &str,
    budget_chars: usize,
    vision: bool,
) -> (Vec<Message>, usize) {
    let mut b = Builder {
        vision,
        ..Builder::default()
    };
    b.out.push(Message::System(system.to_string()).into());
    for event in events {
        b.event(event);
    }
    b.flush();
    b.close_dangling();
    let shortened = shorten_to_budget(&mut b.out, budget_chars);
    (
        b.out.into_iter().map(|built| built.message).collect(),
        shortened,
    )
}

/// A message of the request and the spill files of the output it carries: what the
/// shortener names when it shortens the message.
struct Built {
    message: Message,
    spills: Vec<String>,
}

impl From<Message> for Built {
    fn from(message: Message) -> Self {
        Built {
            message,
            spills: Vec::new(),
        }
    }
}

#[derive(Default)]
struct Builder {
    out: Vec<Built>,
    /// The assistant message being assembled: text, then its tool calls.
    pending: Option<(Option<String>, Vec<ToolCallRequest>)>,
    /// Model calls asked for but not yet answered.
    open_calls: Vec<String>,
    /// User-originated calls by id: the command shown with their result.
    user_calls: HashMap<String, String>,
    /// User-role messages waiting for the open calls to be answered.
    deferred: Vec<Built>,
    /// The model reads images.
    vision: bool,
}

impl Builder {
    fn event(&mut self, event: &Event) {
        match event {
            Event::UserMessage { text, content, .. } => {
                if self.vision && super::prompt::has_image(content) {
                    self.user_message(Message::UserParts(super::prompt::parts_of(content)).into());
                } else {
                    self.user(text.clone());
                }
            }
            Event::AgentMessage { text, .. } => {
                self.flush();
                self.pending = Some((Some(text.clone()), Vec::new()));
            }
            Event::ToolCall {
                call_id,
                tool,
                arguments,
                by_model: true,
                ..
            } => {
                let arguments = match arguments {
                    serde_json::Value::String(raw) => raw.clone(),
                    other => other.to_string(),
                };
                self.pending
                    .get_or_insert_with(|| (None, Vec::new()))
                    .1
                    .push(ToolCallRequest {
                        id: call_id.clone(),
                        name: tool.clone(),
                        arguments,
                    });
                self.open_calls.push(call_id.clone());
            }
            Event::ToolCall {
                call_id,
                tool,
                arguments,
                ..
            } => {
                let shown = arguments
                    .get("command")
                    .and_then(|c| c.as_str())
                    .map(|c| format!("$ {c}"))
                    .unwrap_or_else(|| format!("{tool} {arguments}"));
                self.user_calls.insert(call_id.clone(), shown);
            }
            Event::ToolResult {
                call_id,
                text,
                spills,
                ..
            } => {
                let spills = match spills {
                    Some(paths) => paths
                        .iter()
                        .map(|p| p.to_string_lossy().into_owned())
                        .collect(),
                    None => legacy_spill_path(text)
                        .into_iter()
                        .map(str::to_string)
                        .collect(),
                };
                if let Some(pos) = self.open_calls.iter().position(|c| c == call_id) {
                    self.flush();
                    self.open_calls.remove(pos);
                    self.out.push(Built {
                        message: Message::Tool {
                            call_id: call_id.clone(),
                            content: text.clone(),
                        },
                        spills,
                    });
                    if self.open_calls.is_empty() {
                        self.out.append(&mut self.deferred);
                    }
                } else if let Some(shown) = self.user_calls.remove(call_id) {
                    self.user_message(Built {
                        message: Message::User(format!(
                            "<context source=\"user-shell\">{shown}\n{text}</context>"
                        )),
                        spills,
                    });
                }
            }
            Event::Notice { source, text, .. } => {
                self.user(super::context_text(source, text));
            }
            Event::TurnEnd { .. } => self.flush(),
            _ => {}
        }
    }

    /// A user-role message, at its place or after the open calls' results.
    fn user(&mut self, text: String) {
        self.user_message(Message::User(text).into());
    }

    fn user_message(&mut self, message: Built) {
        if self.open_calls.is_empty() {
            self.flush();
            self.out.push(message);
        } else {
            self.deferred.push(message);
        }
    }

    fn flush(&mut self) {
        if let Some((content, tool_calls)) = self.pending.take() {
            self.out.push(
                Message::Assistant {
                    content,
                    tool_calls,
                }
                .into(),
            );
        }
    }

    /// Calls without a result (a turn still running or cut short) are answered,
    /// so the request is well-formed.
    fn close_dangling(&mut self) {
        for call_id in std::mem::take(&mut self.open_calls) {
            self.out.push(
                Message::Tool {
                    call_id,
                    content: "Error: the call was interrupted before it finished".into(),
                }
                .into(),
            );
        }
        self.out.append(&mut self.deferred);
    }
}

fn size(m: &Message) -> usize {
    match m {
        Message::System(t) | Message::User(t) => t.len(),
        Message::UserParts(parts) => parts
            .iter()
            .map(|p| match p {
                UserPart::Text(t) => t.len(),
                UserPart::Image { .. } => IMAGE_CHARS,
            })
            .sum(),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            content.as_ref().map_or(0, String::len)
                + tool_calls
                    .iter()
                    .map(|c| c.arguments.len() + c.name.len())
                    .sum::<usize>()
        }
        Message::Tool { content, .. } => content.len(),
    }
}

/// The spill path named in a tool output of a log written before results kept their
/// spill files as data (`spills`): the only place a path is read back from text.
fn legacy_spill_path(text: &str) -> Option<&str> {
    let start = text.rfind("full output: ")? + "full output: ".len();
    let rest = &text[start..];
    let end = rest.find([']', ','])?;
    Some(&rest[..end])
}

/// Shortens the oldest outputs until the history fits; how many it shortened.
fn shorten_to_budget(messages: &mut [Built], budget: usize) -> usize {
    let mut total: usize = messages.iter().map(|b| size(&b.message)).sum();
    let mut shortened = 0;
    for Built { message, spills } in messages.iter_mut() {
        if total <= budget {
            break;
        }
        let text = match message {
            Message::Tool { content, .. } => content,
            Message::User(t) if t.starts_with("<context source=\"user-shell\">") => t,
            _ => continue,
        };
        if text.len() <= SHORTENED.len() + 64 {
            continue;
        }
        let marker = if spills.is_empty() {
            SHORTENED.to_string()
        } else {
            format!("{SHORTENED} (full output: {})", spills.join(", "))
        };
        total -= text.len() - marker.len();
        *text = marker;
        shortened += 1;
    }
    shortened
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ToolStatus;
    use serde_json::json;

    fn call(id: &str, by_model: bool, command: &str) -> Event {
        Event::ToolCall {
            at_ms: 0,
            call_id: id.into(),
            tool: "bash".into(),
            title: "t".into(),
            kind: crate::store::ToolKind::Execute,
            arguments: json!({"command": command, "description": "d"}),
            by_model,
        }
    }

    fn result(id: &str, text: &str) -> Event {
        Event::ToolResult {
            at_ms: 0,
            call_id: id.into(),
            status: ToolStatus::Completed,
            text: text.into(),
            is_error: false,
            spills: Some(Vec::new()),
        }
    }

    fn notice(text: &str) -> Event {
        Event::Notice {
            at_ms: 0,
            source: "tool-bash".into(),
            task_id: "bash-1".into(),
            text: text.into(),
        }
    }

    fn user(text: &str) -> Event {
        Event::UserMessage {
            at_ms: 0,
            text: text.into(),
            content: Vec::new(),
            message_id: None,
        }
    }

    #[test]
    fn model_calls_pair_with_results_and_user_commands_are_context() {
        let events = [
            user("!ls"),
            call("u1", false, "ls"),
            result("u1", "a\n"),
            user("what now?"),
            Event::AgentMessage {
                at_ms: 0,
                text: "Let me look.".into(),
                message_id: None,
            },
            call("m1", true, "cat a"),
            result("m1", "hello\n"),
        ];
        let m = build(&events, "sys", 1 << 20);
        assert_eq!(m[0], Message::System("sys".into()));
        assert_eq!(m[1], Message::User("!ls".into()));
        assert_eq!(
            m[2],
            Message::User("<context source=\"user-shell\">$ ls\na\n</context>".into())
        );
        assert_eq!(m[3], Message::User("what now?".into()));
        let Message::Assistant {
            content,
            tool_calls,
        } = &m[4]
        else {
            panic!("{:?}", m[4])
        };
        assert_eq!(content.as_deref(), Some("Let me look."));
        assert_eq!(tool_calls[0].id, "m1");
        assert_eq!(
            m[5],
            Message::Tool {
                call_id: "m1".into(),
                content: "hello\n".into()
            }
        );
        assert_eq!(m.len(), 6);
    }

    #[test]
    fn t14_a_notice_during_a_call_waits_for_its_result() {
        let events = [
            user("go"),
            call("m1", true, "make"),
            notice("done"),
            result("m1", "ok"),
        ];
        let m = build(&events, "sys", 1 << 20);
        assert!(matches!(m[2], Message::Assistant { .. }));
        assert!(matches!(m[3], Message::Tool { .. }));
        assert_eq!(
            m[4],
            Message::User("<context source=\"tool-bash\">done</context>".into())
        );
    }

    #[test]
    fn images_go_as_parts_only_to_a_model_that_reads_them() {
        let content = vec![
            crate::store::PromptBlock::Text {
                text: "what is this?".into(),
            },
            crate::store::PromptBlock::Image {
                mime_type: "image/png".into(),
                data: "iVBO".into(),
                uri: None,
            },
        ];
        let events = [Event::UserMessage {
            at_ms: 0,
            text: "what is this?\n[image: image/png]".into(),
            content,
            message_id: None,
        }];
        let (m, _) = build_counted(&events, "sys", 1 << 20, true);
        assert_eq!(
            m[1],
            Message::UserParts(vec![
                UserPart::Text("what is this?".into()),
                UserPart::Image {
                    mime_type: "image/png".into(),
                    data: "iVBO".into()
                }
            ])
        );
        let (m, _) = build_counted(&events, "sys", 1 << 20, false);
        assert_eq!(
            m[1],
            Message::User("what is this?\n[image: image/png]".into())
        );
    }

    #[test]
    fn dangling_calls_are_answered() {
        let m = build(&[user("go"), call("m1", true, "sleep 9")], "sys", 1 << 20);
        assert!(matches!(&m[3], Message::Tool { call_id, .. } if call_id == "m1"));
    }

    #[test]
    fn over_budget_the_oldest_outputs_shrink_and_keep_the_spill_path() {
        // The path comes from the result's data, both streams of a `bash_output` read
        // included (the text's own wording is not read).
        let big = Event::ToolResult {
            at_ms: 0,
            call_id: "m1".into(),
            status: ToolStatus::Completed,
            text: format!(
                "{}\n[some output was dropped from memory]",
                "x".repeat(5000)
            ),
            is_error: false,
            spills: Some(vec!["/s/run-1.stdout".into(), "/s/run-1.stderr".into()]),
        };
        let events = [
            user("go"),
            call("m1", true, "a"),
            big,
            call("m2", true, "b"),
            result("m2", &"y".repeat(5000)),
        ];
        let m = build(&events, "sys", 6000);
        let Message::Tool { content, .. } = &m[3] else {
            panic!()
        };
        assert_eq!(
            content,
            &format!("{SHORTENED} (full output: /s/run-1.stdout, /s/run-1.stderr)")
        );
        let Message::Tool { content, .. } = &m[5] else {
            panic!()
        };
        assert_eq!(content.len(), 5000, "the newest output is kept");
    }

    #[test]
    fn a_result_logged_before_spills_were_kept_still_names_its_path() {
        let big = Event::ToolResult {
            at_ms: 0,
            call_id: "m1".into(),
            status: ToolStatus::Completed,
            text: format!(
                "{}\n[output truncated; full output: /s/run-1.stdout]",
                "x".repeat(5000)
            ),
            is_error: false,
            spills: None,
        };
        let events = [user("go"), call("m1", true, "a"), big];
        let m = build(&events, "sys", 100);
        let Message::Tool { content, .. } = &m[3] else {
            panic!()
        };
        assert_eq!(
            content,
            &format!("{SHORTENED} (full output: /s/run-1.stdout)")
        );
    }
}
