//! Prompts: a session's turn (src/agent does the turn; this is its ACP side: one prompt
//! in flight per session, cancel, the updates), and the user's own tool calls.

use super::{AcpService, to_value};
use crate::agent;
use crate::hooks::waterfall::ToolExecution;
use crate::registry::Session;
use crate::rpc::{Peer, RequestContext, RpcError};
use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

impl AcpService {
    /// Runs one user-initiated tool call (a `!` prompt or `_dsh/tools/call`) for
    /// a session, with its updates and log entries, or for no session at all.
    pub async fn run_tool(
        &self,
        session: Option<&Arc<Session>>,
        tool: &str,
        arguments: Value,
        cancel: CancellationToken,
    ) -> crate::hooks::waterfall::ToolOutput {
        let call_id = format!("call-{}", uuid::Uuid::new_v4().simple());
        let Some(session) = session else {
            let call = ToolExecution::new(call_id, tool, arguments, None, cancel);
            return self.tools.execute(&call).await;
        };
        let send = |event: agent::TurnEvent<'_>| self.send_turn_event(&session.id, event);
        let ctx = agent::TurnContext {
            session,
            log: self.log_of(&session.id),
            tools: &self.tools,
            events: &send,
            cancel,
            control: Some(self),
        };
        agent::run_tool(&ctx, &call_id, tool, arguments, false).await
    }

    pub(super) async fn prompt(
        &self,
        ctx: RequestContext,
        p: acp::PromptRequest,
    ) -> Result<Value, RpcError> {
        let session = self.addressable(&ctx, &p.session_id.0)?;
        // A child of the request's token: $/cancel_request and the connection
        // ending cancel the prompt too; session/cancel cancels just the prompt.
        let cancel = ctx.cancel.child_token();
        {
            use dashmap::mapref::entry::Entry;
            match self.prompts.entry(session.id.clone()) {
                Entry::Occupied(_) => {
                    return Err(RpcError::invalid_request(
                        "a prompt is already running in this session",
                    ));
                }
                Entry::Vacant(v) => {
                    v.insert(cancel.clone());
                }
            }
        }
        let stop = self.run_prompt(&session, &p.prompt, &cancel).await;
        self.prompts.remove(&session.id);
        to_value(acp::PromptResponse::new(stop?))
    }

    pub(super) async fn run_prompt(
        &self,
        session: &Arc<Session>,
        prompt: &[acp::ContentBlock],
        cancel: &CancellationToken,
    ) -> Result<acp::StopReason, RpcError> {
        let send = |event: agent::TurnEvent<'_>| self.send_turn_event(&session.id, event);
        let ctx = agent::TurnContext {
            session,
            log: self.log_of(&session.id),
            tools: &self.tools,
            events: &send,
            cancel: cancel.clone(),
            control: Some(self),
        };
        let settings = self.settings();
        agent::run_prompt(
            &ctx,
            &prompt_text(prompt),
            settings.model.as_deref(),
            &settings.model_config,
            &settings.agent_config,
        )
        .await
        .map_err(RpcError::internal)
    }

    pub(super) fn cancel_notification(&self, peer: &Peer, params: Option<Value>) {
        let Some(id) = params
            .as_ref()
            .and_then(|p| p.get("sessionId"))
            .and_then(Value::as_str)
        else {
            return;
        };
        // Only the connection the session is bound to can cancel it.
        if self.bindings.get(id).map(|b| *b) == Some(peer.id())
            && let Some(prompt) = self.prompts.get(id)
        {
            prompt.cancel();
        }
    }
}

/// The text of a prompt: text blocks as they are, resources by name and content.
fn prompt_text(blocks: &[acp::ContentBlock]) -> String {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            acp::ContentBlock::Text(t) => parts.push(t.text.clone()),
            acp::ContentBlock::ResourceLink(l) => parts.push(format!("[resource: {}]", l.uri)),
            acp::ContentBlock::Resource(r) => match &r.resource {
                acp::EmbeddedResourceResource::TextResourceContents(t) => parts.push(format!(
                    "<resource uri=\"{}\">\n{}\n</resource>",
                    t.uri, t.text
                )),
                _ => parts.push("[binary resource]".into()),
            },
            _ => parts.push("[unsupported content]".into()),
        }
    }
    parts.join("\n")
}
