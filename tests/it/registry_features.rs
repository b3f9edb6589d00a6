//! The ACP features clients use now (issue 31): message ids, a boolean config option,
//! plans from `todo_write`, forks, and `$/cancel_request` of a request waiting on a
//! permission question.

use crate::common;
use common::client::Client;
use common::fake_model::{FakeModel, bash_call, text, tool_call};
use serde_json::{Value, json};
use std::path::Path;
use tokio::process::Child;

async fn daemon(dir: &Path, config: &str) -> (Child, Client) {
    let conf = dir.join("conf");
    common::daemon::stdio_daemon(dir, config, &[("XDG_CONFIG_HOME", conf.to_str().unwrap())]).await
}

/// The `messageId`s of one kind of chunk, in order, without repeats.
fn message_ids(updates: &[Value], kind: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for u in updates.iter().filter(|u| u["sessionUpdate"] == kind) {
        let id = u["messageId"]
            .as_str()
            .unwrap_or_else(|| panic!("a {kind} without a messageId: {u}"))
            .to_string();
        if ids.last() != Some(&id) {
            ids.push(id);
        }
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_ids_are_on_every_chunk_and_the_same_at_every_load() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![
        text("first answer"),
        bash_call("c1", "echo hi"),
        text("second answer"),
    ])
    .await;
    let (_d, mut c) = daemon(dir.path(), &model.config()).await;
    let ws = common::daemon::workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    c.set_mode(&s, "auto").await;
    c.prompt(&s, "one").await.unwrap();
    c.prompt(&s, "two").await.unwrap();
    let live: Vec<Value> = c
        .updates
        .iter()
        .filter(|u| u["sessionId"] == s)
        .map(|u| u["update"].clone())
        .collect();
    let live_agent = message_ids(&live, "agent_message_chunk");
    assert_eq!(live_agent.len(), 2, "{live:#?}");
    assert_ne!(live_agent[0], live_agent[1]);

    let mut loads = Vec::new();
    for _ in 0..2 {
        c.updates.clear();
        c.load_session(&s, &ws).await;
        let replayed: Vec<Value> = c.updates_of(&s, "user_message_chunk");
        let mut all = replayed.clone();
        all.extend(c.updates_of(&s, "agent_message_chunk"));
        let users = message_ids(&replayed, "user_message_chunk");
        let agents = message_ids(&all, "agent_message_chunk");
        assert_eq!(users.len(), 2, "{replayed:#?}");
        assert_ne!(users[0], users[1]);
        // What the client saw live is what it sees again.
        assert_eq!(agents, live_agent);
        loads.push((users, agents));
    }
    assert_eq!(loads[0], loads[1], "a second load gives the same ids");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn think_harder_is_a_switch_that_sends_requests_to_the_reasoner_and_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = FakeModel::start(vec![text("quick"), text("slow"), text("slow again")]).await;
    let config = format!("{}think_harder_model = \"fake-reasoner\"\n", model.config());
    let (_d, mut c) = daemon(dir.path(), &config).await;
    // A client that shows boolean options says so (it got a select otherwise).
    c.request(
        "initialize",
        json!({"protocolVersion": 1,
               "clientCapabilities": {"session": {"configOptions": {"boolean": {}}}}}),
    )
    .await
    .unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let made = c
        .request("session/new", json!({"cwd": ws, "mcpServers": []}))
        .await
        .unwrap();
    let s = made["sessionId"].as_str().unwrap().to_string();
    let options = made["configOptions"].as_array().unwrap();
    let model_option = options.iter().find(|o| o["id"] == "model").unwrap();
    assert_eq!(model_option["category"], "model");
    let switch = options.iter().find(|o| o["id"] == "think_harder").unwrap();
    assert_eq!(switch["type"], "boolean", "{switch}");
    assert_eq!(switch["currentValue"], false);

    c.prompt(&s, "one").await.unwrap();
    assert_eq!(model.requests.recv().await.unwrap()["model"], "fake");
    let set = c
        .request(
            "session/set_config_option",
            json!({"sessionId": s, "configId": "think_harder", "type": "boolean", "value": true}),
        )
        .await
        .unwrap();
    let now = set["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "think_harder")
        .unwrap()
        .clone();
    assert_eq!(now["currentValue"], true);
    c.prompt(&s, "two").await.unwrap();
    assert_eq!(
        model.requests.recv().await.unwrap()["model"],
        "fake-reasoner"
    );

    // Logged: a load (after a restart too) finds it on.
    let log =
        std::fs::read_to_string(dir.path().join(format!("state/sessions/{s}.jsonl"))).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("\"option_set\"") && l.contains("think_harder")),
        "{log}"
    );
    drop(c);
    drop(_d);
    let (_d, mut c) = daemon(dir.path(), &config).await;
    let loaded = c.load_session(&s, &ws).await;
    let on = loaded["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "think_harder")
        .unwrap()
        .clone();
    // This client did not say it shows booleans: the same switch, as a select.
    assert_eq!(on["type"], "select", "{on}");
    assert_eq!(on["currentValue"], "on");
    c.prompt(&s, "three").await.unwrap();
    assert_eq!(
        model.requests.recv().await.unwrap()["model"],
        "fake-reasoner"
    );
}

fn todo_call(id: &str, todos: Value) -> common::fake_model::Reply {
    tool_call(id, "todo_write", &json!({ "todos": todos }).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todo_write_goes_through_the_waterfall_shows_a_plan_that_replaces_the_last_is_logged_and_replayed()
 {
    let dir = tempfile::tempdir().unwrap();
    let too_many: Vec<Value> = (0..51)
        .map(|i| json!({"content": format!("step {i}"), "status": "pending"}))
        .collect();
    let mut model = FakeModel::start(vec![
        todo_call(
            "t1",
            json!([{"content": "Read the code", "status": "in_progress", "priority": "high"},
                   {"content": "Fix the bug", "status": "pending"}]),
        ),
        todo_call(
            "t2",
            json!([{"content": "Read the code", "status": "completed", "priority": "high"},
                   {"content": "Fix the bug", "status": "in_progress"}]),
        ),
        todo_call("t3", Value::Array(too_many)),
        text("done"),
    ])
    .await;
    let (_d, mut c) = daemon(dir.path(), &model.config()).await;
    let ws = common::daemon::workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    c.prompt(&s, "fix it").await.unwrap();
    let request = model.requests.recv().await.unwrap();
    assert!(
        request["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "todo_write"),
        "the model is offered todo_write"
    );
    let plans = c.updates_of(&s, "plan");
    assert_eq!(plans.len(), 2, "the refused third call changes nothing");
    assert_eq!(
        plans[0]["entries"],
        json!([{"content": "Read the code", "priority": "high", "status": "in_progress"},
               {"content": "Fix the bug", "priority": "medium", "status": "pending"}])
    );
    assert_eq!(plans[1]["entries"][0]["status"], "completed");
    assert_eq!(plans[1]["entries"][1]["status"], "in_progress");
    // No tool card: the plan is how it shows.
    assert!(c.updates_of(&s, "tool_call").is_empty());
    // The model read each answer, the over-cap one as an error with the cap's words.
    let mut last = request;
    for _ in 0..3 {
        last = model.requests.recv().await.unwrap();
    }
    let refused = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    // The schema refuses it before the tool runs: a todo_write call goes through the
    // waterfall like any, and each of the three has its audit line.
    assert!(
        refused.starts_with("Error: invalid arguments") && refused.ends_with("more than 50 items"),
        "{refused}"
    );
    let audit = std::fs::read_to_string(dir.path().join("state/audit.jsonl")).unwrap();
    let audited = audit
        .lines()
        .filter(|l| l.contains(r#""tool":"todo_write""#))
        .count();
    assert_eq!(audited, 3, "{audit}");
    c.updates.clear();
    c.load_session(&s, &ws).await;
    let replayed = c.updates_of(&s, "plan");
    assert_eq!(replayed, plans, "a load shows the same plans again");
    assert!(c.updates_of(&s, "tool_call").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_has_the_history_up_to_a_message_its_own_cwd_and_no_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let mut model =
        FakeModel::start(vec![text("answer one"), text("answer two"), text("forked")]).await;
    let (_d, mut c) = daemon(dir.path(), &model.config()).await;
    let init = c.initialize().await;
    assert_eq!(
        init["agentCapabilities"]["sessionCapabilities"]["fork"],
        json!({})
    );
    let ws = common::daemon::workspace(dir.path(), "ws");
    let other = common::daemon::workspace(dir.path(), "other");
    let s = c.new_session(&ws).await;
    c.set_mode(&s, "auto").await;
    c.prompt(&s, "question one").await.unwrap();
    c.prompt(&s, "question two").await.unwrap();
    let task = c.start_task(&s, "sleep 1000").await;
    let agent_ids = message_ids(
        &c.updates_of(&s, "agent_message_chunk"),
        "agent_message_chunk",
    );
    assert_eq!(agent_ids.len(), 2);

    // Up to the first answer, in another directory.
    let forked = c
        .request(
            "_dsh/session/fork",
            json!({"sessionId": s, "cwd": other, "messageId": agent_ids[0]}),
        )
        .await
        .unwrap();
    let f = forked["sessionId"].as_str().unwrap().to_string();
    assert_ne!(f, s);
    c.updates.clear();
    c.load_session(&f, &other).await;
    let said: Vec<String> = c
        .updates_of(&f, "agent_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(said, ["answer one"]);
    let users = c.updates_of(&f, "user_message_chunk");
    assert_eq!(users.len(), 1, "{users:#?}");
    assert_eq!(users[0]["content"]["text"], "question one");
    // Its own cwd, no tasks of the source's.
    assert_eq!(c.bash(&f, "pwd").await.0.trim(), other.to_str().unwrap());
    let tasks = c
        .request("_dsh/tasks/list", json!({"sessionId": f}))
        .await
        .unwrap();
    assert_eq!(tasks["tasks"], json!([]));
    let source_tasks = c
        .request("_dsh/tasks/list", json!({"sessionId": s}))
        .await
        .unwrap();
    assert_eq!(source_tasks["tasks"][0]["taskId"], task);
    // Its next prompt goes on from the fork's history, not the source's.
    c.prompt(&f, "go on").await.unwrap();
    let mut last = Value::Null;
    while let Ok(r) = model.requests.try_recv() {
        last = r;
    }
    let texts: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert!(texts.iter().any(|t| t == "question one"), "{texts:?}");
    assert!(
        !texts.iter().any(|t| t.contains("question two")),
        "{texts:?}"
    );
    // The draft method is the same; a message the session never had is refused.
    let e = c
        .request(
            "session/fork",
            json!({"sessionId": s, "cwd": other, "mcpServers": [], "messageId": "nope"}),
        )
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");
    let whole = c
        .request(
            "session/fork",
            json!({"sessionId": s, "cwd": other, "mcpServers": []}),
        )
        .await
        .unwrap();
    assert!(whole["sessionId"].is_string());
    c.request("_dsh/tasks/kill", json!({"taskId": task, "sessionId": s}))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_request_of_a_call_waiting_on_a_question_settles_it_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut c) = daemon(dir.path(), "").await;
    let ws = common::daemon::workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    c.ignore_permissions = true;
    let call = c
        .start(
            "_dsh/tools/call",
            json!({"sessionId": s, "name": "bash",
                   "arguments": {"command": "touch made", "description": "make a file"}}),
        )
        .await;
    let asked = c.wait_permission_request().await;
    c.send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": call}}))
        .await;
    let answer = c.wait_for(json!(call)).await;
    match &answer {
        Err(e) => assert_eq!(e["code"], -32800, "{e}"),
        Ok(r) => assert_eq!(r["isError"], true, "{r}"),
    }
    let done = c.updates_of(&s, "tool_call_update");
    assert_eq!(done.last().unwrap()["status"], "failed", "{done:#?}");
    // A late answer to the withdrawn question changes nothing.
    c.send(json!({"jsonrpc": "2.0", "id": asked["id"],
                  "result": {"outcome": {"outcome": "selected", "optionId": "allow_always"}}}))
        .await;
    c.ignore_permissions = false;
    c.permission_answers.push_back("reject_once");
    let (out, is_error) = c.bash(&s, "touch other").await;
    assert!(is_error, "{out}");
    assert_eq!(
        c.permission_requests.len(),
        2,
        "the next call is asked again"
    );
    assert!(!ws.join("made").exists());
}
