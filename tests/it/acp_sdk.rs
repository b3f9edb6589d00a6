//! The official Rust ACP SDK (`agent-client-protocol`) as the editor, talking to
//! dsh through `dsh acp` (which starts the daemon on a private socket): the
//! protocol as a real client library speaks it, string request ids included.

use crate::common;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, NewSessionRequest, PermissionOptionKind, PromptRequest,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate, StopReason, ToolCallStatus,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use tokio::sync::mpsc;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

const BIN: &str = env!("CARGO_BIN_EXE_dsh");

/// `dsh acp` (which starts the daemon on `dir/run/dsh.sock`, state in `dir/state`) as the
/// official SDK's byte transport: what an editor launches. The process is killed when
/// the returned child is dropped; [`stop_daemon`] ends the daemon it started.
pub(crate) fn sdk_acp(
    dir: &std::path::Path,
) -> (
    tokio::process::Child,
    ByteStreams<
        tokio_util::compat::Compat<tokio::process::ChildStdin>,
        tokio_util::compat::Compat<tokio::process::ChildStdout>,
    >,
) {
    let mut child = common::launcher(&dir.join("run/dsh.sock"))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .spawn()
        .unwrap();
    let transport = ByteStreams::new(
        child.stdin.take().unwrap().compat_write(),
        child.stdout.take().unwrap().compat(),
    );
    (child, transport)
}

/// `dsh stop` for the daemon [`sdk_acp`] started in `dir`; it must succeed.
pub(crate) fn stop_daemon(dir: &std::path::Path) {
    let out = std::process::Command::new(BIN)
        .args(["stop", "--socket"])
        .arg(dir.join("run/dsh.sock"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One editor connection through `dsh acp` to the daemon of `dir`: runs `main` on it,
/// then returns its answer and every update the connection received.
pub(crate) async fn as_editor<R>(
    dir: &std::path::Path,
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_client_runs_a_bang_prompt_through_dsh_acp_with_a_permission_question() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let (child, transport) = sdk_acp(dir.path());
    let (updates_tx, mut updates) = mpsc::unbounded_channel::<SessionUpdate>();
    let (asked_tx, mut asked) = mpsc::unbounded_channel::<RequestPermissionRequest>();
    let cwd = ws.clone();
    let result: agent_client_protocol::Result<()> = Client
        .v1()
        .name("dsh-test")
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                let _ = updates_tx.send(n.update);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |req: RequestPermissionRequest, responder, _cx| {
                let allow = req
                    .options
                    .iter()
                    .find(|o| o.kind == PermissionOptionKind::AllowOnce)
                    .map(|o| o.option_id.clone());
                let _ = asked_tx.send(req);
                let outcome = match allow {
                    Some(id) => {
                        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id))
                    }
                    None => RequestPermissionOutcome::Cancelled,
                };
                responder.respond(RequestPermissionResponse::new(outcome))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            let init = cx
                .send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            assert!(init.agent_capabilities.load_session);
            let session = cx
                .send_request(NewSessionRequest::new(cwd.clone()))
                .block_task()
                .await?;
            let modes = session.modes.expect("modes are advertised");
            assert_eq!(&*modes.current_mode_id.0, "ask");
            let prompt = PromptRequest::new(
                session.session_id.clone(),
                vec![ContentBlock::from(
                    "!echo from-sdk > made.txt && cat made.txt",
                )],
            );
            let response = cx.send_request(prompt).block_task().await?;
            assert_eq!(response.stop_reason, StopReason::EndTurn);
            Ok(())
        })
        .await;
    result.unwrap();
    let question = asked.recv().await.expect("a permission question");
    assert_eq!(question.options.len(), 4);
    let mut finished = None;
    while let Ok(update) = updates.try_recv() {
        if let SessionUpdate::ToolCallUpdate(u) = update
            && u.fields.status == Some(ToolCallStatus::Completed)
        {
            finished = u.fields.content.clone();
        }
    }
    let content = format!("{:?}", finished.expect("a completed tool call"));
    assert!(content.contains("from-sdk"), "{content}");
    assert_eq!(
        std::fs::read_to_string(ws.join("made.txt")).unwrap(),
        "from-sdk\n"
    );
    drop(child);
    stop_daemon(dir.path());
}
