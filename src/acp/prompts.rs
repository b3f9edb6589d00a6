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
        self.require_key(&crate::agent::text_of(&blocks))?;
        // A child of the request's token: $/cancel_request and the connection
        // ending cancel the prompt too; session/cancel cancels just the prompt.
        let cancel = ctx.cancel.child_token();
        let Some(_slot) = PromptSlot::take(self, &session.id, &cancel) else {
            return Err(RpcError::invalid_request(
                "a prompt is already running in this session",
            ));
        };
        // The slot is freed when `_slot` drops: after the turn, and just as well
        // when the turn panics (the rpc layer catches it) or this future is dropped.
        let stop = self.run_prompt(&session, &blocks, &cancel).await;
        to_value(acp::PromptResponse::new(stop?))
    }

    pub(super) async fn run_prompt(
        &self,
        session: &Arc<Session>,
        prompt: &[PromptBlock],
        cancel: &CancellationToken,
    ) -> Result<acp::StopReason, RpcError> {
        use agent::StopReason as Agent;
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
        .map(|stop| match stop {
            Agent::EndTurn => acp::StopReason::EndTurn,
            Agent::MaxTokens => acp::StopReason::MaxTokens,
            Agent::MaxTurnRequests => acp::StopReason::MaxTurnRequests,
            Agent::Refusal => acp::StopReason::Refusal,
            Agent::Cancelled => acp::StopReason::Cancelled,
        })
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
        if self.live.bound_to(id) == Some(peer.id()) {
            self.live.cancel_prompt(id);
        }
    }
}

/// A session's prompt slot (its one prompt in flight, holding the prompt's cancel token),
/// taken for as long as the turn runs. Dropping it frees the slot, so no way a turn
/// can end (an answer, an error, a panic, its future dropped) leaves the session
/// refusing every later prompt.
struct PromptSlot<'a> {
    service: &'a AcpService,
    session: String,
}

impl<'a> PromptSlot<'a> {
    /// The slot of `session`, or `None` when a prompt of it is already running.
    fn take(service: &'a AcpService, session: &str, cancel: &CancellationToken) -> Option<Self> {
        service.live.take_prompt(session, cancel)?;
        Some(Self {
            service,
            session: session.to_string(),
        })
    }
}

impl Drop for PromptSlot<'_> {
    fn drop(&mut self) {
        // Only the holder took the slot, and nothing else frees it.
        self.service.live.free_prompt(&self.session);
        // A session closed or left while its turn ended was kept for the turn.
        self.service
            .unload(&self.session, super::unloading::Unload::IfIdle);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Mode};
    use crate::llm::{Model, ModelError, ModelEvent, ModelRequest};
    use crate::registry::SessionRegistry;
    use crate::tools::ToolRegistry;
    use futures::FutureExt;
    use serde_json::json;
    use tokio::sync::{Notify, mpsc};

    /// A model that says it was asked and then never answers, or panics.
    struct Stuck {
        asked: Arc<Notify>,
        panics: bool,
    }

    #[async_trait::async_trait]
    impl Model for Stuck {
        fn describe(&self) -> String {
            "a model that never answers".into()
        }

        async fn stream(
            &self,
            _request: &ModelRequest,
            _events: mpsc::UnboundedSender<ModelEvent>,
            _cancel: &CancellationToken,
        ) -> Result<(), ModelError> {
            self.asked.notify_one();
            if self.panics {
                panic!("the turn fails");
            }
            std::future::pending().await
        }
    }

    /// A service whose model is `Stuck`, a connection's request context and a session
    /// of that connection, with the request `session/prompt` gets.
    async fn setup(
        state: &std::path::Path,
        panics: bool,
    ) -> (
        Arc<AcpService>,
        RequestContext,
        String,
        acp::PromptRequest,
        Arc<Notify>,
        mpsc::Receiver<String>,
    ) {
        let asked = Arc::new(Notify::new());
        let model = Arc::new(Stuck {
            asked: asked.clone(),
            panics,
        });
        let mut config = Config::default();
        config.exec.state_dir = Some(state.to_path_buf());
        // The stuck model needs no key (the default endpoint would).
        config.model.keyless = Some(true);
        let service = AcpService::new(
            config,
            Some(model),
            None,
            Arc::new(SessionRegistry::new(Mode::Ask)),
            Arc::new(ToolRegistry::new()),
            CancellationToken::new(),
        );
        let (queue, lines) = mpsc::channel(1024);
        let ctx = RequestContext::new(Peer::new(queue, 1024, None, true), CancellationToken::new());
        let new: acp::NewSessionRequest =
            serde_json::from_value(json!({"cwd": state, "mcpServers": []})).unwrap();
        let answer = service.new_session(ctx.clone(), new).await.unwrap();
        let id = answer["sessionId"].as_str().unwrap().to_string();
        let prompt = serde_json::from_value(
            json!({"sessionId": id, "prompt": [{"type": "text", "text": "hello"}]}),
        )
        .unwrap();
        (service, ctx, id, prompt, asked, lines)
    }

    #[tokio::test]
    async fn a_dropped_turn_frees_its_sessions_prompt_slot() {
        let state = tempfile::tempdir().unwrap();
        let (service, ctx, id, prompt, asked, _lines) = setup(state.path(), false).await;

        let mut first = Box::pin(service.prompt(ctx.clone(), prompt.clone()));
        tokio::select! {
            answer = &mut first => panic!("the stuck model answered: {answer:?}"),
            _ = asked.notified() => {}
        }
        assert!(service.live.prompting(&id), "the turn holds the slot");
        drop(first);
        assert!(!service.live.prompting(&id), "a dropped turn frees it");

        // The next prompt of the session runs (it reaches the model) instead of
        // answering "a prompt is already running".
        let mut second = Box::pin(service.prompt(ctx.clone(), prompt.clone()));
        tokio::select! {
            answer = &mut second => panic!("the next prompt was not run: {answer:?}"),
            _ = asked.notified() => {}
        }
        assert!(service.live.prompting(&id));
        // While it runs, a third is refused as before.
        let third = service.prompt(ctx.clone(), prompt).await.unwrap_err();
        assert!(
            third.message.contains("a prompt is already running"),
            "{third:?}"
        );
    }

    #[tokio::test]
    async fn a_panicking_turn_frees_its_sessions_prompt_slot() {
        let state = tempfile::tempdir().unwrap();
        let (service, ctx, id, prompt, asked, _lines) = setup(state.path(), true).await;

        for _ in 0..2 {
            // As the rpc layer does: the panic is caught and the request answered.
            let turn = std::panic::AssertUnwindSafe(service.prompt(ctx.clone(), prompt.clone()));
            assert!(turn.catch_unwind().await.is_err(), "the turn panicked");
            asked.notified().await;
            assert!(!service.live.prompting(&id), "the slot is free again");
        }
    }
}
