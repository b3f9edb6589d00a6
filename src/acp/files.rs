//! The file tools' I/O through the editor: `fs/read_text_file` and `fs/write_text_file`
//! on the connection the session is bound to at the moment of the call, when that
//! client advertised them (`clientCapabilities.fs`). So the person's unsaved buffer is
//! what the model reads and edits, and the editor records the edit for review.

use super::AcpService;
use crate::registry::ClientFiles;
use agent_client_protocol_schema::v1 as acp;
use std::path::Path;
use std::sync::Weak;
use tokio_util::sync::CancellationToken;

/// One session's files as its current client has them.
pub struct AcpFiles {
    agent: Weak<AcpService>,
    session_id: String,
}

impl AcpFiles {
    pub fn new(agent: Weak<AcpService>, session_id: String) -> Self {
        Self { agent, session_id }
    }
}

#[async_trait::async_trait]
impl ClientFiles for AcpFiles {
    async fn read(&self, path: &Path) -> Option<Result<String, String>> {
        let agent = self.agent.upgrade()?;
        let (peer, display) = agent.peer_of(&self.session_id)?;
        if !display.fs_read {
            return None;
        }
        let params = acp::ReadTextFileRequest::new(self.session_id.clone(), path.to_path_buf());
        let params = serde_json::to_value(params).ok()?;
        // Nothing cancels a read but the connection ending (the peer settles it then).
        let answer = peer
            .request("fs/read_text_file", params, &CancellationToken::new())
            .await;
        Some(match answer {
            Ok(value) => serde_json::from_value::<acp::ReadTextFileResponse>(value)
                .map(|r| r.content)
                .map_err(|e| format!("unreadable answer: {e}")),
            Err(e) => Err(e.message),
        })
    }

    async fn write(&self, path: &Path, content: &str) -> Option<Result<(), String>> {
        let agent = self.agent.upgrade()?;
        let (peer, display) = agent.peer_of(&self.session_id)?;
        if !display.fs_write {
            return None;
        }
        let params = acp::WriteTextFileRequest::new(
            self.session_id.clone(),
            path.to_path_buf(),
            content.to_string(),
        );
        let params = serde_json::to_value(params).ok()?;
        let answer = peer
            .request("fs/write_text_file", params, &CancellationToken::new())
            .await;
        Some(answer.map(|_| ()).map_err(|e| e.message))
    }

    fn offers(&self, intent: crate::exec::FileIntent) -> bool {
        let Some(agent) = self.agent.upgrade() else {
            return false;
        };
        agent
            .peer_of(&self.session_id)
            .is_some_and(|(_, display)| match intent {
                crate::exec::FileIntent::Read => display.fs_read,
                crate::exec::FileIntent::Write => display.fs_write,
            })
    }
}
