//! The agent loop against a scripted OpenAI-compatible server on loopback (the
//! real model is a paid service elsewhere): what dsh sends, how it streams,
//! calls tools, recovers from errors, and keeps history across restarts.

use crate::common;

use common::client::Client;
use common::fake_model::{self, FakeModel, Reply, bash_call, messages, text, tool_call};
use serde_json::{Value, json};
use std::path::Path;
use tokio::process::Child;

/// `dsh serve --stdio` pointed at `model`, sessions in auto mode.
async fn daemon(dir: &Path, model: &FakeModel, extra: &str) -> (Child, Client) {
    let config = dir.join("dsh.toml");
    std::fs::write(
        &config,
        format!(
            "[exec]\nkill_grace_ms = 300\ndrain_ms = 300\n[permissions]\ndefault_mode = \"auto\"\n{}{extra}",
            model.config()
        ),
    )
    .unwrap();
    let (child, mut client) = common::spawn_client(
        common::dsh()
            .args(["serve", "--stdio", "--state-dir"])
            .arg(dir.join("state"))
            .arg("--config")
            .arg(&config),
    );
    client.initialize().await;
    (child, client)
}

fn ws(dir: &Path, name: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::create_dir_all(&p).unwrap();
    p
}

fn chunks(c: &Client, session: &str, kind: &str) -> String {
    c.updates_of(session, kind)
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_tool_call_result_with_its_id_then_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let mut model =
        FakeModel::start(vec![bash_call("call_1", "echo hi"), text("It printed hi.")]).await;
    let (_d, mut c) = daemon(dir.path(), &model, "").await;
    let s = c.new_session(&ws(dir.path(), "w")).await;
    let r = c.prompt(&s, "say hi with bash").await.unwrap();
    assert_eq!(r["stopReason"], "end_turn");
    let first = model.requests.recv().await.unwrap();
    assert_eq!(first["model"], "fake");
    assert_eq!(first["stream"], true);
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "bash",
            "bash_output",
            "bash_kill",
            "read_file",
            "edit_file",
            "write_file",
            "todo_write"
        ]
    );
    let m = messages(&first);
    assert_eq!(m[0]["role"], "system");
    assert!(m[0]["content"].as_str().unwrap().contains("bash_output"));
    assert_eq!(
        m.last().unwrap(),
        &json!({"role": "user", "content": "say hi with bash"})
    );
    let second = model.requests.recv().await.unwrap();
    let m = messages(&second);
    let n = m.len();
    assert_eq!(m[n - 2]["role"], "assistant");
    assert_eq!(m[n - 2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(m[n - 2]["tool_calls"][0]["function"]["name"], "bash");
    assert_eq!(
        m[n - 1],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "hi\n"})
    );
    // The client saw the call and its result, then the answer.
    let call = &c.updates_of(&s, "tool_call")[0];
    assert_eq!(call["toolCallId"], "call_1");
    assert_eq!(call["status"], "pending");
    assert_eq!(call["kind"], "execute");
    assert_eq!(chunks(&c, &s, "agent_message_chunk"), "It printed hi.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t14_a_finished_background_task_is_in_the_next_request_once_and_only_for_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    let go = common::Fifo::new(dir.path(), "go");
    let background = tool_call(
        "call_bg",
        "bash",
        &json!({"command": format!("cat {} > /dev/null; echo built", go.path()), "description": "build", "run_in_background": true}).to_string(),
    );
    let mut model = FakeModel::start(vec![
        background,
        text("Started it."),
        text("a"),
        text("b"),
        text("c"),
    ])
    .await;
    let (_d, mut c) = daemon(dir.path(), &model, "").await;
    let a = c.new_session(&ws(dir.path(), "a")).await;
    let b = c.new_session(&ws(dir.path(), "b")).await;
    c.prompt(&a, "start the build").await.unwrap();
    for _ in 0..2 {
        model.requests.recv().await.unwrap();
    }
    go.release().await;
    // The notice lands in A's log when the task ends: wait for that line.
    let log = dir.path().join(format!("state/sessions/{a}.jsonl"));
    for _ in 0..5000 {
        if std::fs::read_to_string(&log)
            .unwrap()
            .contains("\"type\":\"notice\"")
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    c.prompt(&b, "anything new?").await.unwrap();
    let for_b = model.requests.recv().await.unwrap().to_string();
    assert!(
        !for_b.contains("background bash task"),
        "B was told about A's task"
    );
    c.prompt(&a, "anything new?").await.unwrap();
    let for_a = messages(&model.requests.recv().await.unwrap());
    let notices: Vec<&Value> = for_a
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|t| t.starts_with("<context source=\"tool-bash\">"))
        })
        .collect();
    assert_eq!(notices.len(), 1, "{for_a:?}");
    assert_eq!(notices[0]["role"], "user");
    assert!(
        notices[0]["content"].as_str().unwrap().contains(
            "finished [status: completed, exit code: 0]. Read its output with bash_output."
        )
    );
    // It came after the turn that started the task, before the new question.
    let last_user = for_a
        .iter()
        .rposition(|m| m["content"] == "anything new?")
        .unwrap();
    let notice_at = for_a
        .iter()
        .position(|m| std::ptr::eq(m, notices[0]))
        .unwrap();
    assert!(notice_at < last_user);
    // Idle sessions stay idle: no request was made for the notice itself.
    assert_eq!(model.count(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_prompting_at_once_do_not_interleave() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![Reply::EchoLastUser, Reply::EchoLastUser]).await;
    let (_d, mut c) = daemon(dir.path(), &model, "").await;
    let a = c.new_session(&ws(dir.path(), "a")).await;
    let b = c.new_session(&ws(dir.path(), "b")).await;
    let pa = c
        .start(
            "session/prompt",
            json!({"sessionId": a, "prompt": [{"type": "text", "text": "from A"}]}),
        )
        .await;
    let pb = c
        .start(
            "session/prompt",
            json!({"sessionId": b, "prompt": [{"type": "text", "text": "from B"}]}),
        )
        .await;
    c.wait_for(json!(pa)).await.unwrap();
    c.wait_for(json!(pb)).await.unwrap();
    assert_eq!(chunks(&c, &a, "agent_message_chunk"), "echo: from A");
    assert_eq!(chunks(&c, &b, "agent_message_chunk"), "echo: from B");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_mid_stream_and_mid_command() {
    let dir = tempfile::tempdir().unwrap();
    let ready = common::Fifo::new(dir.path(), "ready");
    let pidfile = dir.path().join("pid");
    let held = Reply::EventsThenHold(vec![
        json!({"choices": [{"index": 0, "delta": {"content": "thinking about it"}}]}),
    ]);
    let cmd = format!(
        "echo $$ > {}; echo x > {}; exec sleep 1000",
        pidfile.display(),
        ready.path()
    );
    let model = FakeModel::start(vec![held, bash_call("call_s", &cmd)]).await;
    let (_d, mut c) = daemon(dir.path(), &model, "").await;
    let s = c.new_session(&ws(dir.path(), "w")).await;
    let id = c
        .start(
            "session/prompt",
            json!({"sessionId": s, "prompt": [{"type": "text", "text": "go"}]}),
        )
        .await;
    c.wait_update(|u| u["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    c.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": s}}))
        .await;
    assert_eq!(
        c.wait_for(json!(id)).await.unwrap()["stopReason"],
        "cancelled"
    );
    model.released.notified().await; // the stream was really dropped
    let id = c
        .start(
            "session/prompt",
            json!({"sessionId": s, "prompt": [{"type": "text", "text": "run it"}]}),
        )
        .await;
    ready.wait().await;
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    c.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": s}}))
        .await;
    assert_eq!(
        c.wait_for(json!(id)).await.unwrap()["stopReason"],
        "cancelled"
    );
    assert!(
        !common::alive(pid),
        "the cancelled command is still running"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_429_then_succeeds_and_gives_up_on_500_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![
        Reply::Status(429, "slow down", Some(0)),
        text("fine now"),
        Reply::Status(500, "kaput", None),
        Reply::Status(500, "kaput", None),
        Reply::Status(500, "kaput", None),
    ])
    .await;
    let (_d, mut c) = daemon(dir.path(), &model, "").await;
    let s = c.new_session(&ws(dir.path(), "w")).await;
    assert_eq!(
        c.prompt(&s, "hello").await.unwrap()["stopReason"],
        "end_turn"
    );
    assert_eq!(model.count(), 2);
    let e = c.prompt(&s, "again").await.unwrap_err();
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("500") && message.contains("kaput"),
        "{message}"
    );
    assert_eq!(model.count(), 5, "one try and two retries");
    // The session goes on.
    model_push_and_prompt(&model, &mut c, &s).await;
}

async fn model_push_and_prompt(model: &FakeModel, c: &mut Client, s: &str) {
    model.push(text("back"));
    assert_eq!(
        c.prompt(s, "still there?").await.unwrap()["stopReason"],
        "end_turn"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_stream_is_an_error_and_the_session_survives() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![Reply::Raw("data: {not json\n\n")]).await;
    let (_d, mut c) = daemon(dir.path(), &model, "").await;
    let s = c.new_session(&ws(dir.path(), "w")).await;
    let e = c.prompt(&s, "hi").await.unwrap_err();
    assert!(e["message"].as_str().unwrap().contains("malformed"), "{e}");
    model_push_and_prompt(&model, &mut c, &s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tools_and_bad_arguments_become_error_results_the_model_sees() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = FakeModel::start(vec![
        tool_call("call_u", "teleport", "{}"),
        tool_call("call_j", "bash", "{\"command\": oops"),
        text("I give up."),
    ])
    .await;
    let (_d, mut c) = daemon(dir.path(), &model, "").await;
    let s = c.new_session(&ws(dir.path(), "w")).await;
    assert_eq!(c.prompt(&s, "try").await.unwrap()["stopReason"], "end_turn");
    model.requests.recv().await.unwrap();
    let m = messages(&model.requests.recv().await.unwrap());
    assert_eq!(m.last().unwrap()["tool_call_id"], "call_u");
    assert_eq!(
        m.last().unwrap()["content"],
        "Error: unknown tool `teleport`"
    );
    let m = messages(&model.requests.recv().await.unwrap());
    assert_eq!(m.last().unwrap()["tool_call_id"], "call_j");
    assert!(
        m.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: invalid arguments")
    );
    let failed = c
        .updates_of(&s, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "failed")
        .count();
    assert_eq!(failed, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_becomes_thoughts_length_is_max_tokens_and_max_steps_ends_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let thinking = Reply::Events(vec![
        json!({"choices": [{"index": 0, "delta": {"reasoning_content": "Let me think."}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "Done."}, "finish_reason": "stop"}]}),
    ]);
    let model = FakeModel::start(vec![
        thinking,
        bash_call("c1", "true"),
        bash_call("c2", "true"),
    ])
    .await;
    let (_d, mut c) = daemon(dir.path(), &model, "[agent]\nmax_steps = 2\n").await;
    let s = c.new_session(&ws(dir.path(), "w")).await;
    c.prompt(&s, "think").await.unwrap();
    assert_eq!(chunks(&c, &s, "agent_thought_chunk"), "Let me think.");
    assert_eq!(chunks(&c, &s, "agent_message_chunk"), "Done.");
    assert_eq!(
        c.prompt(&s, "loop").await.unwrap()["stopReason"],
        "max_turn_requests"
    );
    assert_eq!(model.count(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_a_loaded_session_prompts_with_its_earlier_history() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = FakeModel::start(vec![text("Noted: 42."), text("It was 42.")]).await;
    let w = ws(dir.path(), "w");
    let s = {
        let (mut d, mut c) = daemon(dir.path(), &model, "").await;
        let s = c.new_session(&w).await;
        c.prompt(&s, "remember 42").await.unwrap();
        drop(c);
        d.wait().await.unwrap();
        s
    };
    model.requests.recv().await.unwrap();
    let (_d, mut c) = daemon(dir.path(), &model, "").await;
    c.load_session(&s, &w).await;
    c.prompt(&s, "what was it?").await.unwrap();
    let m = messages(&model.requests.recv().await.unwrap());
    let roles: Vec<(&str, &str)> = m[1..]
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        roles,
        [
            ("user", "remember 42"),
            ("assistant", "Noted: 42."),
            ("user", "what was it?")
        ]
    );
    assert_eq!(
        chunks(&c, &s, "agent_message_chunk")
            .rsplit("Noted: 42.")
            .next()
            .unwrap(),
        "It was 42."
    );
    let _ = fake_model::messages;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_a_prompt_says_what_to_set_and_bang_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut c) = common::spawn_client(
        common::dsh()
            .args(["serve", "--stdio", "--state-dir"])
            .arg(dir.path().join("state"))
            .env("XDG_CONFIG_HOME", dir.path().join("conf")),
    );
    c.initialize().await;
    let s = c.new_session(&ws(dir.path(), "w")).await;
    c.set_mode(&s, "auto").await;
    let e = c.prompt(&s, "hello").await.unwrap_err();
    assert_eq!(e["code"], -32000, "ACP's auth-required: {e}");
    let said = e["message"].as_str().unwrap();
    assert!(
        said.contains("DEEPSEEK_API_KEY") && said.contains("DSH_MODEL_BASE_URL"),
        "{said}"
    );
    c.prompt(&s, "!echo shell").await.unwrap();
    let done = c.updates_of(&s, "tool_call_update");
    assert_eq!(done.last().unwrap()["rawOutput"]["text"], "shell\n");
}
