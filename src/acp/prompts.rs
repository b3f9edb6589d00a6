//! Prompts: a session's turn (src/agent does the turn; this is its ACP side: one prompt
//! in flight per session, cancel, the updates), and the user's own tool calls.

use super::{AcpService, to_value};
use crate::agent;
use crate::hooks::waterfall::ToolExecution;
use crate::registry::Session;
use crate::rpc::{Peer, RequestContext, RpcError};
use crate::store::PromptBlock;
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
        let blocks = prompt_blocks(&p.prompt, self.settings().model_config.vision)?;
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
        let stop = self.run_prompt(&session, &blocks, &cancel).await;
        self.prompts.remove(&session.id);
        to_value(acp::PromptResponse::new(stop?))
    }

    pub(super) async fn run_prompt(
        &self,
        session: &Arc<Session>,
        prompt: &[PromptBlock],
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
        // What outlives the turn goes to whichever connection the session has then.
        let (service, id) = (self.this.clone(), session.id.clone());
        let later: agent::EventSink = Arc::new(move |event| {
            if let Some(service) = service.upgrade() {
                service.send_turn_event(&id, event);
            }
        });
        agent::run_prompt(
            &ctx,
            prompt,
            settings.model.as_ref(),
            &settings.model_config,
            &settings.agent_config,
            later,
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

/// A prompt's blocks in the log's words. Images are taken only when `vision` has
/// `initialize` advertise them, and audio never is: a client may send only what the
/// agent advertised (ACP `promptCapabilities`), so anything else is invalid params.
fn prompt_blocks(blocks: &[acp::ContentBlock], vision: bool) -> Result<Vec<PromptBlock>, RpcError> {
    blocks
        .iter()
        .map(|block| {
            Ok(match block {
                acp::ContentBlock::Text(t) => PromptBlock::Text {
                    text: t.text.clone(),
                },
                acp::ContentBlock::Image(i) if vision => PromptBlock::Image {
                    mime_type: i.mime_type.clone(),
                    data: i.data.clone(),
                    uri: i.uri.clone(),
                },
                acp::ContentBlock::Image(_) => {
                    return Err(RpcError::invalid_params(
                        "this agent does not take images (promptCapabilities.image is false; \
                         [model] vision = true turns them on for a model that reads images)",
                    ));
                }
                acp::ContentBlock::ResourceLink(l) => PromptBlock::ResourceLink {
                    uri: l.uri.clone(),
                    name: l.name.clone(),
                    title: l.title.clone(),
                    description: l.description.clone(),
                    mime_type: l.mime_type.clone(),
                    size: l.size,
                },
                acp::ContentBlock::Resource(r) => match &r.resource {
                    acp::EmbeddedResourceResource::TextResourceContents(t) => {
                        PromptBlock::Resource {
                            uri: t.uri.clone(),
                            mime_type: t.mime_type.clone(),
                            text: Some(t.text.clone()),
                            blob: None,
                        }
                    }
                    acp::EmbeddedResourceResource::BlobResourceContents(b) => {
                        PromptBlock::Resource {
                            uri: b.uri.clone(),
                            mime_type: b.mime_type.clone(),
                            text: None,
                            blob: Some(b.blob.clone()),
                        }
                    }
                    _ => {
                        return Err(RpcError::invalid_params(
                            "an embedded resource of a kind this agent does not know",
                        ));
                    }
                },
                _ => {
                    return Err(RpcError::invalid_params(
                        "a prompt content block this agent does not take (it advertises text, \
                         resource links and embedded resources, and images when vision is on)",
                    ));
                }
            })
        })
        .collect()
}
