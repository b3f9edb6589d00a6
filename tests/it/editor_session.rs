//! A session as an editor shows it (issue 16): titles, usage and the context meter,
//! slash commands without a model, the model and mode pickers.

use crate::common;
use common::client::Client;
use common::fake_model::{FakeModel, Reply, bash_call, text};
use serde_json::{Value, json};
use std::path::Path;
use tokio::process::Child;

async fn daemon(dir: &Path, config: &str) -> (Child, Client) {
    // The key file `dsh login` writes lives there: never the developer's own.
    let conf = dir.join("conf");
    common::daemon::stdio_daemon(dir, config, &[("XDG_CONFIG_HOME", conf.to_str().unwrap())]).await
}

fn agent_said(c: &Client, s: &str) -> String {
    c.updates_of(s, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_titled_by_its_first_prompt_and_listed_so() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![text("ok"), text("ok")]).await;
    let (_d, mut c) = daemon(dir.path(), &model.config()).await;
    let ws = common::daemon::workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    c.prompt(
        &s,
        "\n  Fix the failing build on main  \nand then tell me why",
    )
    .await
    .unwrap();
    let info = c.updates_of(&s, "session_info_update");
    assert_eq!(info.len(), 1);
    assert_eq!(info[0]["title"], "Fix the failing build on main");
    // Only the first prompt titles it.
    c.prompt(&s, "another thing").await.unwrap();
    assert_eq!(c.updates_of(&s, "session_info_update").len(), 1);
    let listed = c.request("session/list", json!({})).await.unwrap();
    assert_eq!(
        listed["sessions"][0]["title"],
        "Fix the failing build on main"
    );
    let s2 = c.new_session(&ws).await;
    let long = "x".repeat(100);
    c.prompt(&s2, &format!("!echo {long}")).await.unwrap();
    let title = c.updates_of(&s2, "session_info_update")[0]["title"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(title.chars().count(), 61, "{title}");
    assert!(title.ends_with('…'));
}

/// The titles a session was told of, in order.
fn titles_told(c: &Client, s: &str) -> Vec<String> {
    c.updates_of(s, "session_info_update")
        .iter()
        .filter_map(|u| u["title"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_titles_model_the_model_writes_the_title_after_the_first_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = FakeModel::start(vec![text("ok"), text("ok")]).await;
    model.push_title(text("  \"Fixing the flaky CI build\".\nsecond line"));
    let config = format!("{}[agent]\ntitles = \"model\"\n", model.config());
    let (_d, mut c) = daemon(dir.path(), &config).await;
    let ws = common::daemon::workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    c.prompt(&s, "the CI build fails now and then\nlook at the logs")
        .await
        .unwrap();
    // The model's title comes after the first line's, whenever the model answers.
    c.wait_update(|u| {
        u["update"]["sessionUpdate"] == "session_info_update"
            && u["update"]["title"] == "Fixing the flaky CI build"
    })
    .await;
    assert_eq!(
        titles_told(&c, &s),
        [
            "the CI build fails now and then",
            "Fixing the flaky CI build"
        ]
    );
    // A small request of its own: a token cap, no tools, the prompt shown.
    let asked = model.title_requests.recv().await.unwrap();
    assert_eq!(asked["max_tokens"], 24);
    assert!(asked.get("tools").is_none());
    let shown = common::fake_model::messages(&asked);
    assert!(
        shown[0]["content"]
            .as_str()
            .unwrap()
            .contains("3 to 7 words")
    );
    assert_eq!(
        shown[1]["content"],
        "the CI build fails now and then\nlook at the logs"
    );
    let listed = c.request("session/list", json!({})).await.unwrap();
    assert_eq!(listed["sessions"][0]["title"], "Fixing the flaky CI build");
    // Only the first prompt asks; the log keeps the title for a load.
    c.prompt(&s, "and now?").await.unwrap();
    assert_eq!(model.title_requests.try_recv().ok(), None);
    let log =
        std::fs::read_to_string(dir.path().join(format!("state/sessions/{s}.jsonl"))).unwrap();
    assert!(log.contains(r#""type":"title","atMs":"#) && log.contains("Fixing the flaky CI build"));
    let before = c.updates_of(&s, "session_info_update").len();
    c.load_session(&s, &ws).await;
    let replayed = titles_told(&c, &s);
    assert_eq!(
        replayed.last().map(String::as_str),
        Some("Fixing the flaky CI build"),
        "{:?}",
        &replayed[before..]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_title_request_that_hangs_delays_no_turn_and_leaves_the_first_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = FakeModel::start(vec![text("first answer"), text("second answer")]).await;
    // Headers, then nothing until the client goes away; dsh's idle timeout is longer
    // than the test may take, so a turn that waited for the title would not end.
    model.push_title(Reply::EventsThenHold(Vec::new()));
    let config = format!(
        "{}[agent]\ntitles = \"model\"\n",
        model
            .config()
            .replace("idle_timeout_ms = 20000", "idle_timeout_ms = 600000")
    );
    let (_d, mut c) = daemon(dir.path(), &config).await;
    let s = c
        .new_session(&common::daemon::workspace(dir.path(), "ws"))
        .await;
    let bound = std::time::Duration::from_secs(30);
    let answer = tokio::time::timeout(bound, c.prompt(&s, "Refactor the parser"))
        .await
        .expect("the turn waited for the title")
        .unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    // The title request is out and held; turns go on regardless.
    model.title_requests.recv().await.unwrap();
    let answer = c.prompt(&s, "and the lexer").await.unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    assert_eq!(agent_said(&c, &s), "first answersecond answer");
    assert_eq!(model.count(), 2);
    assert_eq!(titles_told(&c, &s), ["Refactor the parser"]);
    let listed = c.request("session/list", json!({})).await.unwrap();
    assert_eq!(listed["sessions"][0]["title"], "Refactor the parser");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_goes_out_after_each_request_with_window_and_cost() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![bash_call("call_1", "echo hi"), text("done")]).await;
    let config = format!(
        "[permissions]\ndefault_mode = \"auto\"\n{}context_window = 1000\nprice_per_mtok_in = 1.0\nprice_per_mtok_out = 2.0\n",
        model.config()
    );
    let (_d, mut c) = daemon(dir.path(), &config).await;
    let s = c
        .new_session(&common::daemon::workspace(dir.path(), "ws"))
        .await;
    c.prompt(&s, "go").await.unwrap();
    // The scripted tool-call reply reports no usage; the text reply reports 10 + 2.
    let usage = c.updates_of(&s, "usage_update");
    assert_eq!(usage.len(), 1, "{usage:?}");
    assert_eq!(usage[0]["used"], 12);
    assert_eq!(usage[0]["size"], 1000);
    let cost = usage[0]["cost"]["amount"].as_f64().unwrap();
    assert!((cost - 14e-6).abs() < 1e-12, "{cost}");
    assert_eq!(usage[0]["cost"]["currency"], "USD");
    let log =
        std::fs::read_to_string(dir.path().join(format!("state/sessions/{s}.jsonl"))).unwrap();
    assert!(log.contains("\"type\":\"usage\"") && log.contains("\"promptTokens\":10"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shortened_history_is_said_once_per_turn() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = FakeModel::start(vec![
        bash_call("call_1", "seq 1 2000"),
        bash_call("call_2", "seq 1 2000"),
        text("done"),
    ])
    .await;
    let config = format!(
        "[permissions]\ndefault_mode = \"auto\"\n[agent]\nhistory_budget_chars = 3000\n{}",
        model.config()
    );
    let (_d, mut c) = daemon(dir.path(), &config).await;
    let s = c
        .new_session(&common::daemon::workspace(dir.path(), "ws"))
        .await;
    c.prompt(&s, "count").await.unwrap();
    let thoughts: Vec<String> = c
        .updates_of(&s, "agent_thought_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_string))
        .collect();
    let told: Vec<&String> = thoughts
        .iter()
        .filter(|t| t.contains("history budget"))
        .collect();
    assert_eq!(told.len(), 1, "{thoughts:?}");
    assert!(told[0].contains("spill files keep everything"));
    // The model did get the shortened history.
    for _ in 0..3 {
        model.requests.recv().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_are_listed_and_each_answers_without_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut c) = daemon(dir.path(), "[permissions]\ndefault_mode = \"auto\"\n").await;
    let ws = common::daemon::workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    let listed = c
        .wait_update(|u| u["update"]["sessionUpdate"] == "available_commands_update")
        .await;
    let names: Vec<&str> = listed["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["tasks", "kill", "status", "mode", "explain", "shell"]
    );

    c.prompt(&s, "/tasks").await.unwrap();
    assert!(agent_said(&c, &s).contains("No background tasks"));
    let task = c.start_task(&s, "sleep 1000").await;
    c.prompt(&s, "/tasks").await.unwrap();
    assert!(agent_said(&c, &s).contains(&format!("{task}  running  sleep 1000")));
    c.prompt(&s, &format!("/kill {task}")).await.unwrap();
    let done = c.updates_of(&s, "tool_call_update");
    assert_eq!(
        done.last().unwrap()["rawOutput"]["text"],
        format!("killed background task {task}")
    );
    c.prompt(&s, "/status").await.unwrap();
    assert!(agent_said(&c, &s).contains("executor local"));
    c.prompt(&s, "/explain rm -rf build").await.unwrap();
    assert!(agent_said(&c, &s).contains("command: rm -rf build"));
    c.prompt(&s, "/shell echo from-shell").await.unwrap();
    assert_eq!(
        c.updates_of(&s, "tool_call_update").last().unwrap()["rawOutput"]["text"],
        "from-shell\n"
    );
    c.prompt(&s, "/mode read-only").await.unwrap();
    let modes = c.updates_of(&s, "current_mode_update");
    assert_eq!(modes.last().unwrap()["currentModeId"], "read-only");
    let (out, is_error) = c.bash(&s, "touch nope").await;
    assert!(is_error, "{out}");
    // An unknown /word is an ordinary prompt (here: no key for the default endpoint, so
    // it is refused as auth-required, saying what to do).
    let e = c.prompt(&s, "/etc/hosts is odd").await.unwrap_err();
    assert_eq!(e["code"], -32000, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mode_and_model_are_config_options() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = FakeModel::start(vec![text("ok")]).await;
    let config = format!("{}models = [\"fake\", \"fake-large\"]\n", model.config());
    let (_d, mut c) = daemon(dir.path(), &config).await;
    let ws = common::daemon::workspace(dir.path(), "ws");
    let r = c
        .request("session/new", json!({"cwd": ws, "mcpServers": []}))
        .await
        .unwrap();
    let s = r["sessionId"].as_str().unwrap().to_string();
    let options = r["configOptions"].as_array().unwrap();
    let by_id = |id: &str| options.iter().find(|o| o["id"] == id).unwrap().clone();
    let model_opt = by_id("model");
    assert_eq!(model_opt["category"], "model");
    assert_eq!(model_opt["currentValue"], "fake");
    let values: Vec<&Value> = model_opt["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| &o["value"])
        .collect();
    assert_eq!(values, [&json!("fake"), &json!("fake-large")]);
    let mode_opt = by_id("mode");
    assert_eq!(mode_opt["category"], "mode");
    assert_eq!(mode_opt["currentValue"], "ask");
    let r = c
        .request(
            "session/set_config_option",
            json!({"sessionId": s, "configId": "mode", "value": "read-only"}),
        )
        .await
        .unwrap();
    let mode_now = r["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "mode")
        .unwrap()["currentValue"]
        .clone();
    assert_eq!(mode_now, "read-only");
    let (out, is_error) = c.bash(&s, "touch nope").await;
    assert!(is_error && out.contains("read-only"), "{out}");
    let e = c
        .request(
            "session/set_config_option",
            json!({"sessionId": s, "configId": "model", "value": "gpt-nothing"}),
        )
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32602);
    c.request(
        "session/set_config_option",
        json!({"sessionId": s, "configId": "model", "value": "fake-large"}),
    )
    .await
    .unwrap();
    let log =
        std::fs::read_to_string(dir.path().join(format!("state/sessions/{s}.jsonl"))).unwrap();
    assert!(log.contains("\"type\":\"model_change\"") && log.contains("fake-large"));
    // The next request names the model picked.
    c.prompt(&s, "hello").await.unwrap();
    assert_eq!(model.requests.recv().await.unwrap()["model"], "fake-large");
}
