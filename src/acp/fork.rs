//! Forking a session: `_dsh/session/fork`, and the same under the draft ACP method
//! `session/fork` (advertised as `sessionCapabilities.fork`), which Zed has a pull
//! request for. The new session gets the source's history up to and including the
//! message `messageId` names (a dsh addition; without it, the whole history), its own
//! cwd, and nothing else: no tasks (they stay the source's), no "always" answers (they
//! were given for the other session's work), no MCP servers but those passed here.

use super::{AcpService, to_value};
use crate::agent;
use crate::rpc::{RequestContext, RpcError};
use crate::store::{Event, Header, SessionLog, now_ms};
use agent_client_protocol_schema::v1 as acp;
use serde::Deserialize;
use serde_json::Value;
use std::path::PathBuf;

/// `_dsh/session/fork` (and `session/fork`) params: the draft's fields, plus `messageId`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkParams {
    /// The session forked (this connection must be able to address it).
    pub session_id: String,
    /// The new session's working directory.
    pub cwd: PathBuf,
    /// The last message the fork keeps (a `messageId` the session's chunks carried);
    /// none: all of it.
    #[serde(default)]
    pub message_id: Option<String>,
    #[serde(default)]
    pub additional_directories: Vec<PathBuf>,
    #[serde(default)]
    pub mcp_servers: Vec<acp::McpServer>,
}

/// The events a fork keeps: the conversation and the session's settings up to the
/// message `until` (inclusive), never grants or revocations. `None` when `until` names
/// no message of the log.
fn kept(events: &[Event], until: Option<&str>) -> Option<Vec<Event>> {
    let end = match until {
        None => events.len(),
        Some(id) => {
            events
                .iter()
                .enumerate()
                .position(|(at, e)| agent::message_id_of(at, e).as_deref() == Some(id))?
                + 1
        }
    };
    Some(
        events[..end]
            .iter()
            .filter(|e| !matches!(e, Event::Grant { .. } | Event::Revoke { .. }))
            .cloned()
            .collect(),
    )
}

impl AcpService {
    /// Writes the fork's log (a turn left open by the cut is closed when the log is
    /// opened, as after a crash) and attaches it to this connection, without a replay:
    /// the client has the history it forked.
    pub(super) async fn fork_session(
        &self,
        ctx: RequestContext,
        p: ForkParams,
    ) -> Result<Value, RpcError> {
        let source = self.addressable(&ctx, &p.session_id)?;
        Self::check_cwd(&p.cwd)?;
        let log = self
            .log_of(&source.id)
            .ok_or_else(|| RpcError::not_found(format!("session {} not found", p.session_id)))?;
        let (header, events) = log
            .replay()
            .map_err(|e| RpcError::internal(format!("cannot read the session log: {e}")))?;
        let events = kept(&events, p.message_id.as_deref()).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "session {} has no message {}",
                p.session_id,
                p.message_id.as_deref().unwrap_or_default()
            ))
        })?;
        let id = uuid::Uuid::new_v4().to_string();
        let fork = Header {
            id: id.clone(),
            cwd: p.cwd.clone(),
            created_ms: now_ms(),
            title: header.title.clone(),
        };
        {
            let new_log = SessionLog::create(&self.state_dir, &fork)
                .map_err(|e| RpcError::internal(format!("cannot create the session log: {e}")))?;
            for event in &events {
                new_log
                    .append(event)
                    .map_err(|e| RpcError::internal(format!("cannot write the fork: {e}")))?;
            }
        }
        let session = self.attach(&ctx, &id, false).await?;
        session.set_extra_roots(&p.additional_directories);
        self.start_mcp(&ctx, &session, &p.mcp_servers).await;
        self.after_answer(&ctx, &session.id);
        let mut answer = to_value(
            acp::ResumeSessionResponse::new()
                .modes(super::sessions::modes_state(session.mode()))
                .config_options(self.config_options_of(&session)),
        )?;
        answer["sessionId"] = Value::String(id);
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: &str) -> Event {
        Event::UserMessage {
            at_ms: 1,
            text: id.into(),
            content: Vec::new(),
            message_id: Some(id.into()),
        }
    }

    #[test]
    fn a_fork_keeps_up_to_its_message_and_no_grants() {
        let grant = Event::Revoke {
            at_ms: 1,
            prefix: crate::policy::Grant::Command(vec!["git".into()]),
        };
        let events = vec![user("a"), grant, user("b"), user("c")];
        let kept_b = kept(&events, Some("b")).unwrap();
        assert_eq!(kept_b, vec![user("a"), user("b")]);
        assert_eq!(kept(&events, None).unwrap().len(), 3);
        assert!(kept(&events, Some("nope")).is_none());
    }
}
