//! A wrapped agent's file requests through the editor (issue 44): once dsh judged and
//! contained an `fs/read_text_file` or `fs/write_text_file`, the editor's own `fs` (its
//! unsaved buffers) stands behind it when the editor offers it and the file is on this
//! machine (the local or sandbox executor, never ssh: the file tools decide that, by
//! [`crate::exec::BashExecutor::files_are_local`]), and a write is shown to the editor
//! as a diff on a tool call of its own, as dsh's own edits are.
//!
//! [`EditorFiles`] is the agent's dsh session's [`ClientFiles`]: the file tools use it
//! after the executor's containment check, as they do for dsh's own sessions. The diff is
//! sent only once the waterfall let the write through ([`ShownWrite`]), so nothing of a
//! refused path reaches the editor, neither a read of its buffer nor its text.

use super::Shared;
use super::live::EditorOffers;
use crate::hooks::waterfall::{Terminal, ToolExecution, ToolOutput};
use crate::registry::ClientFiles;
use crate::rpc::Peer;
use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// The editor's `fs` for one of the agent's sessions (its id is the agent's, which the
/// editor knows).
pub(super) struct EditorFiles {
    pub editor: Peer,
    pub agent_session: String,
    pub offers: EditorOffers,
    /// The agent went: a request still waiting for the editor is withdrawn.
    pub gone: CancellationToken,
}

impl EditorFiles {
    async fn ask(&self, method: &str, params: impl serde::Serialize) -> Result<Value, String> {
        let params = serde_json::to_value(params).map_err(|e| e.to_string())?;
        self.editor
            .request(method, params, &self.gone)
            .await
            .map_err(|e| e.message)
    }
}

#[async_trait::async_trait]
impl ClientFiles for EditorFiles {
    async fn read(&self, path: &Path) -> Option<Result<String, String>> {
        if !self.offers.fs_read {
            return None;
        }
        let request = acp::ReadTextFileRequest::new(self.agent_session.clone(), path);
        Some(
            self.ask("fs/read_text_file", request)
                .await
                .and_then(|answer| {
                    serde_json::from_value::<acp::ReadTextFileResponse>(answer)
                        .map(|r| r.content)
                        .map_err(|e| format!("unreadable answer: {e}"))
                }),
        )
    }

    async fn write(&self, path: &Path, content: &str) -> Option<Result<(), String>> {
        if !self.offers.fs_write {
            return None;
        }
        let request =
            acp::WriteTextFileRequest::new(self.agent_session.clone(), path, content.to_string());
        Some(self.ask("fs/write_text_file", request).await.map(|_| ()))
    }

    fn offers(&self, intent: crate::exec::FileIntent) -> bool {
        match intent {
            crate::exec::FileIntent::Read => self.offers.fs_read,
            crate::exec::FileIntent::Write => self.offers.fs_write,
        }
    }
}

/// Where a judged `fs/write_text_file` ends: the change is shown to the editor as a diff
/// on a tool call (the call's id), then dsh's `write_file` tool makes it (through the
/// editor when it offers writes), and the call's status follows.
pub(super) struct ShownWrite<'a> {
    pub shared: &'a Shared,
    /// The agent's session id, for the editor's updates.
    pub agent_session: &'a str,
}

impl ShownWrite<'_> {
    fn send(&self, update: acp::SessionUpdate) {
        let notification = acp::SessionNotification::new(self.agent_session.to_string(), update);
        if let Ok(params) = serde_json::to_value(notification) {
            let _ = self.shared.editor.notify("session/update", params);
        }
    }
}

#[async_trait::async_trait]
impl Terminal for ShownWrite<'_> {
    async fn execute(&self, call: &ToolExecution) -> ToolOutput {
        let tools = &self.shared.daemon.tools;
        let session = call.session.as_ref();
        let diff = crate::tools::files::preview(
            tools.file_place(),
            session,
            &call.tool,
            &call.arguments,
            false,
        )
        .await;
        let view = crate::tools::CallView::of(
            &call.tool,
            &call.arguments,
            session.map(|s| s.cwd.as_path()),
        );
        let mut shown = acp::ToolCall::new(call.call_id.clone(), view.title)
            .kind(acp::ToolKind::Edit)
            .status(acp::ToolCallStatus::InProgress)
            .raw_input(call.arguments.clone());
        if let Some(diff) = diff {
            shown = shown
                .locations(vec![
                    acp::ToolCallLocation::new(diff.path.clone()).line(diff.line),
                ])
                .content(vec![acp::ToolCallContent::Diff(
                    acp::Diff::new(diff.path, diff.new_text).old_text(diff.old_text),
                )]);
        }
        self.send(acp::SessionUpdate::ToolCall(shown));
        let out = Terminal::execute(tools.as_ref(), call).await;
        let status = if out.is_error {
            acp::ToolCallStatus::Failed
        } else {
            acp::ToolCallStatus::Completed
        };
        self.send(acp::SessionUpdate::ToolCallUpdate(
            acp::ToolCallUpdate::new(
                call.call_id.clone(),
                acp::ToolCallUpdateFields::new().status(status),
            ),
        ));
        out
    }
}
