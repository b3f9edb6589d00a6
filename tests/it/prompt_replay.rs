//! Prompts as they were sent (issue 16): `session/load` replays a prompt's blocks
//! (resource links, embedded resources, images) as those blocks, the model reads images
//! as image parts when `[model] vision = true`, and a completion notice replays as the
//! live session showed it. The editor is the official Rust SDK where it can be.

use crate::acp_sdk::sdk_acp;
use crate::common::Fifo;
use crate::common::daemon::{SocketDaemon, workspace};
use crate::common::fake_model::{FakeModel, messages, text};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, EmbeddedResource, EmbeddedResourceResource, ImageContent, InitializeRequest,
    LoadSessionRequest, NewSessionRequest, PromptRequest, ResourceLink, SessionNotification,
    SessionUpdate, StopReason, TextResourceContents,
};
use agent_client_protocol::{Agent, Client, ErrorCode};
use serde_json::json;
use std::path::Path;
use tokio::sync::mpsc;

/// A 1x1 PNG, base64.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// One editor connection through `dsh acp` to the daemon of `dir`: runs `main` on it,
/// then returns its answer and every update the connection received.
async fn as_editor<R>(
    dir: &Path,
    main: impl AsyncFnOnce(ConnectionTo<Agent>) -> agent_client_protocol::Result<R>,
) -> (R, Vec<SessionUpdate>) {
    let (child, transport) = sdk_acp(dir);
    let (tx, mut rx) = mpsc::unbounded_channel::<SessionUpdate>();
    let result = Client
        .v1()
        .name("dsh-replay-test")
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                let _ = tx.send(n.update);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, main)
        .await;
    drop(child);
    let mut updates = Vec::new();
    while let Ok(update) = rx.try_recv() {
        updates.push(update);
    }
    (result.unwrap(), updates)
}

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
        // Nothing of it was logged or sent; the session goes on.
        let done = cx
            .send_request(PromptRequest::new(session, vec![ContentBlock::from("hi")]))
            .block_task()
            .await?;
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        Ok(())
    })
    .await;
    assert_eq!(model.count(), 1);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_notice_replays_as_the_live_session_showed_it() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "[permissions]\ndefault_mode = \"auto\"\n").await;
    let ws = workspace(dir.path(), "ws");
    let go = Fifo::new(dir.path(), "go");
    let mut a = daemon.connect().await;
    let s = a.new_session(&ws).await;
    let task = a
        .start_task(&s, &format!("read _ < {}; echo served", go.path()))
        .await;
    go.release().await;
    // Live: the notice shows where it arrived, while the session is open.
    let live = a
        .wait_update(|u| {
            u["update"]["sessionUpdate"] == "user_message_chunk"
                && u["update"]["content"]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains(&task))
        })
        .await;
    let shown = live["update"].clone();
    assert_eq!(
        shown["content"]["text"],
        format!(
            "<context source=\"tool-bash\">background bash task {task} finished [status: \
             completed, exit code: 0]. Read its output with bash_output.</context>"
        )
    );
    drop(a);
    let mut b = daemon.connect().await;
    b.request(
        "session/load",
        json!({"sessionId": s, "cwd": ws, "mcpServers": []}),
    )
    .await
    .unwrap();
    let replayed = b.updates_of(&s, "user_message_chunk");
    assert!(replayed.contains(&shown), "{replayed:?} lacks {shown}");
    drop(b);
    daemon.stop().await;
}
