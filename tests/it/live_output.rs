//! What an editor sees of a tool call while it runs (issue 15): live output as it
//! comes, Zed's display-only terminal when the client offers one, titles that are the
//! command, output fenced so Markdown shows it verbatim, and `pending` until the person
//! has answered. Driven through the real daemon; the live-output test with the official
//! Rust SDK as the editor.

use crate::common::Fifo;
use crate::common::daemon::{stdio_daemon, workspace};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, NewSessionRequest, PromptRequest, SessionNotification,
    SessionUpdate, SetSessionModeRequest, StopReason, ToolCallStatus,
};
use agent_client_protocol::{Agent, Client};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The text of every content block of a tool call update, joined.
fn content_text(update: &Value) -> String {
    update["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["content"]["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// A command that prints a line and then waits for the test before the next: it can
/// only finish if the editor saw each line while the command still ran, so the test
/// proves live output without depending on timing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_reaches_the_sdk_client_while_the_command_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "ws");
    // A fifo per step: with one, a read could open it while the previous step's writer
    // still held it, and see end-of-file instead of waiting.
    let steps: Vec<Fifo> = (1..=3)
        .map(|i| Fifo::new(dir.path(), &format!("step{i}")))
        .collect();
    let command = format!(
        "for i in 1 2 3; do echo \"line $i\"; read _ < {}/step$i; done; echo end",
        dir.path().display()
    );
    let (child, transport) = crate::acp_sdk::sdk_acp(dir.path());
    let (updates_tx, mut updates) = mpsc::unbounded_channel::<SessionUpdate>();
    let result: agent_client_protocol::Result<Vec<Value>> = Client
        .v1()
        .name("dsh-live-test")
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                let _ = updates_tx.send(n.update);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let session = cx
                .send_request(NewSessionRequest::new(ws.clone()))
                .block_task()
                .await?;
            let id = session.session_id.clone();
            cx.send_request(SetSessionModeRequest::new(id.clone(), "auto"))
                .block_task()
                .await?;
            let prompt = PromptRequest::new(id, vec![ContentBlock::from(format!("!{command}"))]);
            let turn = cx.send_request(prompt).block_task();
            let watch = async {
                // Every update of the call, in order, until it completes; each line
                // is let through only once the editor has shown the one before.
                let mut seen = Vec::new();
                let mut released = 0;
                while let Some(update) = updates.recv().await {
                    let SessionUpdate::ToolCallUpdate(u) = &update else {
                        continue;
                    };
                    let value = serde_json::to_value(u).unwrap();
                    let done = matches!(
                        u.fields.status,
                        Some(ToolCallStatus::Completed | ToolCallStatus::Failed)
                    );
                    let text = content_text(&value);
                    seen.push(value);
                    if done {
                        break;
                    }
                    while released < 3 && text.contains(&format!("line {}", released + 1)) {
                        steps[released].release().await;
                        released += 1;
                    }
                }
                seen
            };
            let (response, seen) = tokio::join!(turn, watch);
            assert_eq!(response?.stop_reason, StopReason::EndTurn);
            Ok(seen)
        })
        .await;
    let seen = result.unwrap();
    let done = seen.last().unwrap();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["rawOutput"]["text"], "line 1\nline 2\nline 3\nend\n");
    // Before it completed: in progress, then the output growing, one line at a time.
    let live: Vec<String> = seen[..seen.len() - 1]
        .iter()
        .filter(|u| u["content"].is_array())
        .map(content_text)
        .collect();
    assert_eq!(seen[0]["status"], "in_progress");
    for n in 1..=3 {
        let lines: String = (1..=n).map(|i| format!("line {i}\n")).collect();
        assert!(
            live.iter()
                .any(|t| t.ends_with(&format!("```\n{lines}```"))),
            "no update showing exactly {n} lines: {live:#?}"
        );
    }
    drop(child);
    crate::acp_sdk::stop_daemon(dir.path());
}

/// Every update of one tool call, in order.
fn updates_of_call(c: &crate::common::client::Client, session: &str, call: &Value) -> Vec<Value> {
    c.updates
        .iter()
        .filter(|u| u["sessionId"] == session && u["update"]["toolCallId"] == *call)
        .map(|u| u["update"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zed_terminal_display_gets_info_output_and_exit_in_order_byte_exact() {
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut c) = stdio_daemon(dir.path(), "", &[]).await;
    c.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"_meta": {"terminal_output": true}}}),
    )
    .await
    .unwrap();
    let ws = workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    // Mode `ask`: the call waits for the person, and stays pending meanwhile.
    c.ignore_permissions = true;
    // One stream: what two pipes deliver interleaves as the reader happens to read them.
    let command =
        r#"printf 'one\n# two *x*\n'; printf 'caf\303\251 \342\202\254\n'; printf tail; exit 3"#;
    let prompt = c
        .start(
            "session/prompt",
            json!({"sessionId": s, "prompt": [{"type": "text", "text": format!("!{command}")}]}),
        )
        .await;
    let question = c.wait_permission_request().await;
    let call = c.updates_of(&s, "tool_call");
    assert_eq!(call.len(), 1);
    let call = &call[0];
    let id = call["toolCallId"].clone();
    assert_eq!(call["status"], "pending");
    assert_eq!(call["title"], command, "the title is the command itself");
    assert_eq!(call["kind"], "execute");
    assert_eq!(call["locations"][0]["path"], json!(ws));
    assert_eq!(call["_meta"]["terminal_info"]["terminal_id"], id);
    assert_eq!(call["_meta"]["terminal_info"]["cwd"], json!(ws));
    assert_eq!(
        call["content"][0]["content"]["text"],
        "Run the user's ! command"
    );
    assert_eq!(
        call["content"][1],
        json!({"type": "terminal", "terminalId": id})
    );
    assert!(
        updates_of_call(&c, &s, &id).len() == 1,
        "nothing but the pending call before the answer"
    );
    // The question says why it is asked and keeps the terminal in the content.
    let asked = &question["params"]["toolCall"];
    assert_eq!(asked["title"], command);
    let asked_text = content_text(asked);
    assert!(asked_text.contains("Asked because:"), "{asked}");
    assert!(
        asked["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["type"] == "terminal")
    );
    c.send(json!({"jsonrpc": "2.0", "id": question["id"],
                  "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}))
        .await;
    c.wait_for(json!(prompt)).await.unwrap();
    // Flush: anything sent after the call's end would be read before this answer.
    c.request("_dsh/status", json!({})).await.unwrap();
    let ups = updates_of_call(&c, &s, &id);
    assert_eq!(ups[1]["status"], "in_progress");
    let last = ups.last().unwrap();
    assert_eq!(
        last["status"], "completed",
        "no update after the call completes"
    );
    assert_eq!(
        last["_meta"]["terminal_exit"],
        json!({"terminal_id": id, "exit_code": 3})
    );
    let data: String = ups[2..ups.len() - 1]
        .iter()
        .map(|u| {
            assert_eq!(u["_meta"]["terminal_output"]["terminal_id"], id);
            assert!(
                u.get("status").is_none(),
                "output leaves the status alone: {u}"
            );
            u["_meta"]["terminal_output"]["data"].as_str().unwrap()
        })
        .collect();
    assert_eq!(data, "one\n# two *x*\ncafé €\ntail");
    assert_eq!(
        last["rawOutput"]["text"],
        "one\n# two *x*\ncafé €\ntail\n[exit code: 3]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_terminal_output_is_fenced_so_markdown_shows_it_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut c) = stdio_daemon(dir.path(), "", &[]).await;
    let ws = workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    c.set_mode(&s, "auto").await;
    c.prompt(&s, "!printf '# not a heading\\n*kept* ```\\n'")
        .await
        .unwrap();
    let call = &c.updates_of(&s, "tool_call")[0];
    assert!(call.get("_meta").is_none(), "no terminal unless offered");
    let ups = updates_of_call(&c, &s, &call["toolCallId"]);
    let last = ups.last().unwrap();
    assert_eq!(last["status"], "completed");
    assert_eq!(
        last["content"][1]["content"]["text"],
        "````\n# not a heading\n*kept* ```\n````"
    );
    for u in ups[1..ups.len() - 1]
        .iter()
        .filter(|u| u["content"].is_array())
    {
        // Fenced by what it holds so far: a prefix of the output.
        let shown = u["content"][1]["content"]["text"].as_str().unwrap();
        let fence = &shown[..shown.find('\n').unwrap()];
        assert!(
            fence.len() >= 3 && fence.chars().all(|c| c == '`'),
            "{shown}"
        );
        let body = &shown[fence.len() + 1..shown.len() - fence.len()];
        assert!("# not a heading\n*kept* ```\n".starts_with(body), "{shown}");
    }
    // A refused call is failed without ever running: never in progress.
    c.set_mode(&s, "read-only").await;
    c.prompt(&s, "!touch nope").await.unwrap();
    let call = &c.updates_of(&s, "tool_call")[1];
    let ups = updates_of_call(&c, &s, &call["toolCallId"]);
    let statuses: Vec<&Value> = ups.iter().map(|u| &u["status"]).collect();
    assert_eq!(statuses, [&json!("pending"), &json!("failed")]);
}
