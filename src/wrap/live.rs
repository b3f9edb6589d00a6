//! A wrapped agent's terminals shown live in the editor (issue 44).
//!
//! The agent creates a terminal (dsh runs it as a background `bash` task: `client`),
//! then tells the editor about it in its own `session/update`: a tool call whose content
//! is `{type: "terminal", terminalId}`. The editor never created that terminal, so by
//! itself it shows nothing. dsh runs the command and reads its output as it comes
//! ([`crate::exec::TaskChanges`]), so it shows it the way it shows its own commands':
//! * to an editor that draws display-only terminals (Zed's `_meta.terminal_output`
//!   capability), the agent's update keeps its terminal content and gains
//!   `_meta.terminal_info`; each new piece of output follows on the agent's tool call as
//!   `_meta.terminal_output`, and the end as `_meta.terminal_exit`;
//! * to any other editor, the terminal in the content is replaced by the output so far,
//!   fenced, and each new piece replaces the content again (the agent's other items
//!   kept, in their places).
//!
//! The other design, creating the terminal on the editor's side (`terminal/create` sent
//! to an editor that offers `terminal`), would run the command a second time, in the
//! editor's process, outside dsh's executor, sandbox and audit: the command runs once,
//! in dsh, and the editor is shown what it wrote.

use super::Shared;
use crate::exec::{TaskId, TaskStatus};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The most of a terminal's output a text display shows (its last 64 KiB), as dsh's own
/// commands are shown.
const SHOWN_BYTES: usize = 64 * 1024;

/// After an update, more output waits this long to go with the next one: a command
/// printing fast is shown in pieces, not a message a write.
const PACE: Duration = Duration::from_millis(40);

/// What the editor offered in `initialize` that changes what dsh sends it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct EditorOffers {
    /// Display-only terminals (`clientCapabilities._meta.terminal_output`).
    pub terminal_output: bool,
    /// `fs/read_text_file` (its unsaved buffers).
    pub fs_read: bool,
    /// `fs/write_text_file`.
    pub fs_write: bool,
}

impl EditorOffers {
    /// What the editor's `clientCapabilities` say.
    pub fn of(capabilities: Option<&Value>) -> Self {
        let flag = |pointer: &str| {
            capabilities
                .and_then(|c| c.pointer(pointer))
                .and_then(Value::as_bool)
                == Some(true)
        };
        Self {
            terminal_output: flag("/_meta/terminal_output"),
            fs_read: flag("/fs/readTextFile"),
            fs_write: flag("/fs/writeTextFile"),
        }
    }
}

/// One terminal the agent created: a background task of its dsh session.
pub(super) struct Term {
    /// Its id, as the agent and the editor know it (the task's).
    pub id: String,
    pub task: TaskId,
    /// The agent's session that created it: only that session may use it.
    pub agent_session: String,
    /// Everything read from the task so far (stdout and stderr as they were read), cut
    /// from the front to `limit`.
    pub output: Mutex<Kept>,
    pub limit: usize,
    /// Where the editor is shown it, once the agent named it in a tool call (`live`).
    pub view: Mutex<Option<View>>,
    /// Ends its follower (released, or the connection ended).
    pub stop: CancellationToken,
}

impl Term {
    /// What it wrote so far.
    pub fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.output.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where the editor is shown it. Taken before [`Term::kept`] where both are.
    pub fn view(&self) -> std::sync::MutexGuard<'_, Option<View>> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A terminal's output as kept for the agent's `terminal/output` and the editor.
#[derive(Default)]
pub(super) struct Kept {
    pub text: String,
    pub truncated: bool,
    /// Bytes of text ever kept (what was cut from the front included).
    pub total: u64,
}

impl Kept {
    /// What was kept after the first `from` bytes of the output, as far as it is still
    /// kept (all of it when the front was cut past `from`).
    pub fn since(&self, from: u64) -> &str {
        let start = self.total - self.text.len() as u64;
        let Some(skip) = from.checked_sub(start) else {
            return &self.text;
        };
        let mut at = usize::try_from(skip)
            .unwrap_or(usize::MAX)
            .min(self.text.len());
        while !self.text.is_char_boundary(at) {
            at += 1;
        }
        &self.text[at..]
    }

    /// Appends `more`, then drops whole characters from the front down to `limit`.
    pub fn push(&mut self, more: &str, limit: usize) {
        self.total += more.len() as u64;
        self.text.push_str(more);
        if self.text.len() > limit {
            let mut cut = self.text.len() - limit;
            while !self.text.is_char_boundary(cut) {
                cut += 1;
            }
            self.text.drain(..cut);
            self.truncated = true;
        }
    }
}

/// Where the editor is shown a terminal: the agent's tool call that named it.
pub(super) struct View {
    session_id: String,
    tool_call_id: String,
    /// The agent's content for the call, the terminal in it (a text display replaces it
    /// with the output in each update).
    content: Vec<Value>,
    /// Bytes of the terminal's output (its [`Kept::total`]) shown so far.
    upto: u64,
    exit_told: bool,
}

/// Whether `item` is the content item `{type: "terminal", terminalId: id}`.
fn names_terminal(item: &Value, id: &str) -> bool {
    item.get("type").and_then(Value::as_str) == Some("terminal")
        && item.get("terminalId").and_then(Value::as_str) == Some(id)
}

/// `text`'s last [`SHOWN_BYTES`], cut at a character.
fn tail(text: &str) -> &str {
    let mut at = text.len().saturating_sub(SHOWN_BYTES);
    while !text.is_char_boundary(at) {
        at += 1;
    }
    &text[at..]
}

/// How a finished task ended, as `_meta.terminal_exit` says it.
fn exit_info(terminal_id: &str, status: TaskStatus) -> Value {
    let mut info = json!({ "terminal_id": terminal_id });
    match status {
        TaskStatus::Completed { exit_code } => info["exit_code"] = exit_code.into(),
        TaskStatus::Killed { signal } => {
            info["signal"] = signal
                .map(crate::tools::bash::signal_name)
                .unwrap_or_else(|| "SIGKILL".into())
                .into();
        }
        TaskStatus::Running | TaskStatus::Lost => {}
    }
    info
}

impl Shared {
    /// The content the editor is shown for `view` with the output `kept`: the agent's,
    /// its terminal replaced by the output (a text display) or left for the editor's
    /// display-only terminal.
    fn shown_content(&self, view: &View, terminal_id: &str, kept: &Kept) -> Vec<Value> {
        let text = crate::tools::fenced(tail(&kept.text));
        view.content
            .iter()
            .map(|item| {
                if names_terminal(item, terminal_id) {
                    json!({"type": "content", "content": {"type": "text", "text": text}})
                } else {
                    item.clone()
                }
            })
            .collect()
    }

    fn offers(&self) -> EditorOffers {
        *self.offers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A `tool_call_update` of the agent's call for `view`, with `fields`.
    fn send_update(&self, view: &View, fields: Value) {
        let mut update =
            json!({"sessionUpdate": "tool_call_update", "toolCallId": view.tool_call_id});
        if let (Some(update), Value::Object(fields)) = (update.as_object_mut(), fields) {
            update.extend(fields);
        }
        let _ = self.editor.notify(
            "session/update",
            json!({"sessionId": view.session_id, "update": update}),
        );
    }

    /// Sends the editor what `term` wrote since it was last shown there (and its end,
    /// once), when the agent has named it in a tool call.
    fn show_new(&self, term: &Term, view: &mut View, status: TaskStatus) {
        let terminal_id = term.id.as_str();
        let kept = term.kept();
        let display = self.offers().terminal_output;
        if kept.total > view.upto {
            let fields = if display {
                let data = kept.since(view.upto);
                json!({"_meta": {"terminal_output": {"terminal_id": terminal_id, "data": data}}})
            } else {
                json!({"content": self.shown_content(view, terminal_id, &kept)})
            };
            view.upto = kept.total;
            self.send_update(view, fields);
        }
        if display && status.is_finished() && !view.exit_told {
            view.exit_told = true;
            let exit = exit_info(terminal_id, status);
            self.send_update(view, json!({"_meta": {"terminal_exit": exit}}));
        }
    }

    /// Reads what `term` wrote and shows the editor the new part; its status. Also
    /// called before the agent hears that the command ended or the terminal went, so the
    /// editor has the whole output before the agent's own last word on the call.
    pub(super) fn show(&self, term: &Term) -> TaskStatus {
        let status = self.drain(term);
        let mut view = term.view();
        if let Some(view) = view.as_mut() {
            self.show_new(term, view, status);
        }
        status
    }

    /// Follows `term` until its command ends (or it is released, or the agent goes):
    /// every change is read into the terminal at once, and shown in the editor, paced.
    pub(super) async fn follow(self: Arc<Self>, term: Arc<Term>) {
        let Some(mut changes) = self.daemon.executor.task_changes(term.task) else {
            return;
        };
        loop {
            let shown_before = term.view().as_ref().map(|v| v.upto);
            if self.show(&term).is_finished() {
                return;
            }
            let shown_now = term.view().as_ref().map(|v| v.upto);
            let pace = async {
                if shown_now != shown_before {
                    tokio::time::sleep(PACE).await;
                }
            };
            tokio::select! {
                () = async { pace.await; changes.changed().await } => {}
                () = term.stop.cancelled() => return,
                () = self.gone.cancelled() => return,
            }
        }
    }

    /// The agent's `session/update` on its way to the editor: a tool call whose content
    /// names one of the session's terminals is shown with its output ([module
    /// docs](self)), and followed from then on. Sends it.
    pub(super) fn pass_update(&self, mut params: Value) {
        let session_id = params
            .get("sessionId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let update = params.get_mut("update");
        let call = update.and_then(|u| {
            let kind = u.get("sessionUpdate").and_then(Value::as_str);
            matches!(kind, Some("tool_call" | "tool_call_update")).then_some(u)
        });
        let Some(update) = call else {
            let _ = self.editor.notify("session/update", params);
            return;
        };
        let tool_call_id = update
            .get("toolCallId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let content = update.get("content").and_then(Value::as_array).cloned();
        // The session's terminals this update is about, each locked while it is sent, so
        // no output of it reaches the editor before the call that shows it.
        let terms = self.session_terminals(&session_id);
        let mut named: Vec<(Arc<Term>, MutexGuard<'_, Option<View>>)> = Vec::new();
        // Those this update shows for the first time.
        let mut opened: Vec<String> = Vec::new();
        for term in &terms {
            let mut view = term.view();
            let in_content = content
                .as_ref()
                .is_some_and(|c| c.iter().any(|i| names_terminal(i, &term.id)));
            if in_content {
                // Fresh output first, so the call shows all there is now.
                drop(view);
                self.drain(term);
                view = term.view();
                let content = content.clone().unwrap_or_default();
                match view.as_mut() {
                    // Named again by the same call (an agent repeats its content): what
                    // was shown stays shown, the editor's terminal is not opened twice.
                    Some(shown) if shown.tool_call_id == tool_call_id => shown.content = content,
                    _ => {
                        *view = Some(View {
                            session_id: session_id.clone(),
                            tool_call_id: tool_call_id.clone(),
                            content,
                            upto: 0,
                            exit_told: false,
                        });
                        opened.push(term.id.clone());
                    }
                }
                named.push((term.clone(), view));
            } else if content.is_some()
                && view
                    .as_ref()
                    .is_some_and(|v| v.tool_call_id == tool_call_id)
            {
                // The agent shows something else in that call now.
                *view = None;
            }
        }
        let display = self.offers().terminal_output;
        for (term, view) in &mut named {
            let Some(view) = view.as_mut() else { continue };
            if display && opened.contains(&term.id) {
                let meta = update
                    .as_object_mut()
                    .map(|u| u.entry("_meta").or_insert_with(|| json!({})));
                if let Some(Value::Object(meta)) = meta {
                    meta.insert("terminal_info".into(), json!({"terminal_id": term.id}));
                }
            } else if !display {
                let kept = term.kept();
                update["content"] = Value::Array(self.shown_content(view, &term.id, &kept));
                view.upto = kept.total;
            }
        }
        let _ = self.editor.notify("session/update", params);
        for (term, mut view) in named {
            let status = self.drain(&term);
            if let Some(view) = view.as_mut() {
                self.show_new(&term, view, status);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_editors_offers_are_read_from_its_capabilities() {
        let caps = json!({"_meta": {"terminal_output": true}, "fs": {"readTextFile": true}});
        let offers = EditorOffers::of(Some(&caps));
        assert!(offers.terminal_output && offers.fs_read && !offers.fs_write);
        assert!(!EditorOffers::of(None).terminal_output);
    }

    #[test]
    fn a_terminals_exit_is_told_as_dshs_own() {
        let done = exit_info("t", TaskStatus::Completed { exit_code: 3 });
        assert_eq!(done, json!({"terminal_id": "t", "exit_code": 3}));
        let killed = exit_info("t", TaskStatus::Killed { signal: None });
        assert_eq!(killed["signal"], "SIGKILL");
    }

    #[test]
    fn a_text_display_shows_the_tail_at_a_character() {
        let long = format!("é{}", "x".repeat(SHOWN_BYTES - 1));
        assert_eq!(tail(&long).len(), SHOWN_BYTES - 1);
        assert_eq!(tail("short"), "short");
    }
}
