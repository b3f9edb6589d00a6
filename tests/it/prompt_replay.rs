//! Prompts as they were sent (issue 16): `session/load` replays a prompt's blocks
//! (resource links, embedded resources, images) as those blocks, the model reads images
//! as image parts when `[model] vision = true`. The editor is the official Rust SDK.

use crate::acp_sdk::as_editor;
use crate::common::daemon::{SocketDaemon, workspace};
use crate::common::fake_model::{FakeModel, messages, text};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AudioContent, ContentBlock, EmbeddedResource, EmbeddedResourceResource, ImageContent,
    InitializeRequest, ListSessionsRequest, LoadSessionRequest, NewSessionRequest, PromptRequest,
    ResourceLink, SessionUpdate, StopReason, TextResourceContents,
};
use agent_client_protocol::{Agent, ErrorCode};
use serde_json::json;

/// A 1x1 PNG, base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// The blocks of the user message chunks among `updates`, in order.
fn user_blocks(updates: &[SessionUpdate]) -> Vec<ContentBlock> {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::UserMessageChunk(chunk) => Some(chunk.content.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_reach_a_vision_model_as_image_parts_and_prompts_replay_block_by_block() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = FakeModel::start(vec![text("a red dot"), text("they differ")]).await;
    let daemon =
        SocketDaemon::start(dir.path(), &format!("{}vision = true\n", model.config())).await;
    let ws = workspace(dir.path(), "ws");
    let image = ContentBlock::Image(ImageContent::new(PNG, "image/png"));
    let link = ContentBlock::ResourceLink(
        ResourceLink::new("main.rs", "file:///ws/src/main.rs").mime_type("text/x-rust".to_string()),
    );
    let embedded = ContentBlock::Resource(EmbeddedResource::new(
        EmbeddedResourceResource::TextResourceContents(
            TextResourceContents::new("fn lib() {}", "file:///ws/src/lib.rs")
                .mime_type("text/x-rust".to_string()),
        ),
    ));
    let first = vec![
        ContentBlock::from("what is in this picture?"),
        image.clone(),
    ];
    let second = vec![
        ContentBlock::from("compare"),
        link.clone(),
        embedded.clone(),
    ];
    let (sent1, sent2) = (first.clone(), second.clone());
    let cwd = ws.clone();
    let (session, _) = as_editor(dir.path(), async move |cx: ConnectionTo<Agent>| {
        let init = cx
            .send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        let prompts = &init.agent_capabilities.prompt_capabilities;
        assert!(prompts.image && prompts.embedded_context, "{prompts:?}");
        let session = cx
            .send_request(NewSessionRequest::new(cwd))
            .block_task()
            .await?
            .session_id;
        for prompt in [sent1, sent2] {
            let done = cx
                .send_request(PromptRequest::new(session.clone(), prompt))
                .block_task()
                .await?;
            assert_eq!(done.stop_reason, StopReason::EndTurn);
        }
        Ok(session)
    })
    .await;

    // The model saw the image as an image part, and the resources in their text form.
    let asked = messages(&model.requests.recv().await.unwrap());
    let user = asked.iter().rev().find(|m| m["role"] == "user").unwrap();
    assert_eq!(
        user["content"],
        json!([
            {"type": "text", "text": "what is in this picture?"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}}
        ])
    );
    let asked = messages(&model.requests.recv().await.unwrap());
    let user = asked.iter().rev().find(|m| m["role"] == "user").unwrap();
    assert_eq!(
        user["content"],
        "compare\n[resource: file:///ws/src/main.rs]\n<resource uri=\"file:///ws/src/lib.rs\">\n\
         fn lib() {}\n</resource>"
    );

    // A later editor loads the session: each prompt comes back block by block, as sent.
    let (_, replayed) = as_editor(dir.path(), async move |cx: ConnectionTo<Agent>| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        cx.send_request(LoadSessionRequest::new(session, ws))
            .block_task()
            .await?;
        Ok(())
    })
    .await;
    let expected: Vec<ContentBlock> = first.into_iter().chain(second).collect();
    assert_eq!(user_blocks(&replayed), expected);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_vision_images_are_not_advertised_and_an_image_prompt_is_invalid_params() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![text("ok")]).await;
    let daemon = SocketDaemon::start(dir.path(), &model.config()).await;
    let ws = workspace(dir.path(), "ws");
    let (_, _) = as_editor(dir.path(), async move |cx: ConnectionTo<Agent>| {
        let init = cx
            .send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        assert!(!init.agent_capabilities.prompt_capabilities.image);
        let session = cx
            .send_request(NewSessionRequest::new(ws))
            .block_task()
            .await?
            .session_id;
        let prompt = vec![
            ContentBlock::from("look"),
            ContentBlock::Image(ImageContent::new(PNG, "image/png")),
        ];
        let refused = cx
            .send_request(PromptRequest::new(session.clone(), prompt))
            .block_task()
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
        assert!(refused.message.contains("vision"), "{}", refused.message);
        // Audio is never advertised.
        let audio = vec![ContentBlock::Audio(AudioContent::new(
            "UklGRg==",
            "audio/wav",
        ))];
        let refused = cx
            .send_request(PromptRequest::new(session.clone(), audio))
            .block_task()
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
        // Nothing of them was logged (the first prompt that was titles the session) or
        // sent; the session goes on.
        let done = cx
            .send_request(PromptRequest::new(
                session.clone(),
                vec![ContentBlock::from("hi")],
            ))
            .block_task()
            .await?;
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        let listed = cx
            .send_request(ListSessionsRequest::new())
            .block_task()
            .await?;
        let mine = listed.sessions.iter().find(|i| i.session_id == session);
        assert_eq!(mine.and_then(|i| i.title.as_deref()), Some("hi"));
        Ok(())
    })
    .await;
    assert_eq!(model.count(), 1);
    daemon.stop().await;
}
