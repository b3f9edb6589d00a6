//! Sessions that keep their work (issue 16): Zed closes a session whenever its thread
//! view goes, so `session/close` must not kill what the session started in the
//! background; the person can still see and end it (`dsh status`, `dsh kill`), and
//! `session/delete` removes a session for good. A completion notice shows when it
//! arrives, as a later load shows it.

use crate::common;
use common::Fifo;
use common::daemon::{BIN, SocketDaemon, workspace};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

fn log_has_notice(state: &Path, session: &str, task: &str) -> bool {
    std::fs::read_to_string(state.join(format!("sessions/{session}.jsonl")))
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains("\"type\":\"notice\"") && l.contains(task))
}

/// A session on a new connection (in `dir/ws`, mode auto) with a background task
/// that prints `served` once `go` is released: (connection, session, task, go, ws).
async fn session_with_waiting_task(
    daemon: &SocketDaemon,
    dir: &Path,
) -> (
    common::client::Client,
    String,
    String,
    Fifo,
    std::path::PathBuf,
) {
    let ws = workspace(dir, "ws");
    let go = Fifo::new(dir, "go");
    let mut a = daemon.connect().await;
    let s = a.new_session(&ws).await;
    let task = a
        .start_task(&s, &format!("read _ < {}; echo served", go.path()))
        .await;
    (a, s, task, go, ws)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_keeps_background_tasks_and_load_finds_them_and_their_notice() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "[permissions]\ndefault_mode = \"auto\"\n").await;
    let (mut a, s, task, go, ws) = session_with_waiting_task(&daemon, dir.path()).await;
    a.request("session/close", json!({"sessionId": s}))
        .await
        .unwrap();
    // Still running, still the session's; the session shows as closed.
    let status = a.request("_dsh/status", json!({})).await.unwrap();
    assert_eq!(status["runningTasks"][0]["taskId"], json!(task));
    assert_eq!(status["runningTasks"][0]["owner"], json!(s));
    let listed = status["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["sessionId"] == json!(s))
        .cloned()
        .unwrap();
    assert_eq!(listed["closed"], true);
    let printed = daemon.cli_status();
    assert!(
        printed.contains("(closed)") && printed.contains(&task),
        "{printed}"
    );
    // It ends while the session is closed: its notice still reaches the session's log.
    go.release().await;
    a.status_until("the status never got there", |s| {
        s["runningTasks"].as_array().unwrap().is_empty()
    })
    .await;
    for _ in 0..500 {
        if log_has_notice(&daemon.state, &s, &task) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(log_has_notice(&daemon.state, &s, &task));
    drop(a);
    // A later load finds the notice in the replay, and the output.
    let mut b = daemon.connect().await;
    b.load_session(&s, &ws).await;
    let replayed: Vec<String> = b
        .updates_of(&s, "user_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_string))
        .collect();
    assert!(
        replayed
            .iter()
            .any(|t| t.contains(&task) && t.contains("tool-bash")),
        "{replayed:?}"
    );
    let (out, is_error) = b
        .tool(Some(&s), "bash_output", json!({"task_id": task}))
        .await;
    assert!(!is_error && out.starts_with("served\n"), "{out}");
    drop(b);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_notice_replays_as_the_live_session_showed_it() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "[permissions]\ndefault_mode = \"auto\"\n").await;
    let (mut a, s, task, go, ws) = session_with_waiting_task(&daemon, dir.path()).await;
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
    b.load_session(&s, &ws).await;
    let replayed = b.updates_of(&s, "user_message_chunk");
    assert!(replayed.contains(&shown), "{replayed:?} lacks {shown}");
    drop(b);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_kills_tasks_when_configured_and_dsh_kill_ends_any_task() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(
        dir.path(),
        "[permissions]\ndefault_mode = \"auto\"\n[sessions]\nclose_kills_tasks = true\n",
    )
    .await;
    let ws = workspace(dir.path(), "ws");
    let token = common::token();
    let mut a = daemon.connect().await;
    let s = a.new_session(&ws).await;
    let killed = a.start_task(&s, &format!("sleep 1000.{token}")).await;
    running(&token).await;
    a.request("session/close", json!({"sessionId": s}))
        .await
        .unwrap();
    assert!(
        common::with_token(&token).is_empty(),
        "close killed the task"
    );
    // The session is unloaded at the close; its log keeps the killed task's notice (a
    // later load shows it).
    for _ in 0..500 {
        if log_has_notice(&daemon.state, &s, &killed) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(log_has_notice(&daemon.state, &s, &killed));

    // `dsh kill`: the local user ends a task of any session; over the protocol a session
    // may end only its own (T13).
    let s1 = a.new_session(&ws).await;
    let s2 = a.new_session(&ws).await;
    let token = common::token();
    let task = a.start_task(&s1, &format!("sleep 1000.{token}")).await;
    running(&token).await;
    let e = a
        .request("_dsh/tasks/kill", json!({"taskId": task, "sessionId": s2}))
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32002);
    assert_eq!(
        common::with_token(&token).len(),
        1,
        "the refused kill killed nothing"
    );
    let out = std::process::Command::new(BIN)
        .args(["kill", &task, "--socket"])
        .arg(&daemon.socket)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("killed {task}\n")
    );
    assert!(common::with_token(&token).is_empty());
    // A text that is not a task id is refused by the CLI itself, saying why.
    let number = task.strip_prefix("bash-").unwrap();
    let bad = format!("bash-0{number}");
    let out = std::process::Command::new(BIN)
        .args(["kill", &bad, "--socket"])
        .arg(&daemon.socket)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!(
            "\"{bad}\" is not a task id: task ids look like bash-7"
        )),
        "{said}"
    );
    let e = a
        .request("_dsh/tasks/kill", json!({"taskId": "bash-999999"}))
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32002);
    drop(a);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_the_log_and_kills_the_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "[permissions]\ndefault_mode = \"auto\"\n").await;
    let ws = workspace(dir.path(), "ws");
    let token = common::token();
    let mut a = daemon.connect().await;
    let init = a.initialize().await;
    assert!(
        init["agentCapabilities"]["sessionCapabilities"]
            .get("delete")
            .is_some(),
        "{init}"
    );
    let s = a.new_session(&ws).await;
    a.start_task(&s, &format!("sleep 1000.{token}")).await;
    running(&token).await;
    let log = daemon.state.join(format!("sessions/{s}.jsonl"));
    assert!(log.exists());
    a.request("session/delete", json!({"sessionId": s}))
        .await
        .unwrap();
    assert!(!log.exists());
    assert!(common::with_token(&token).is_empty());
    for id in [s.as_str(), "no-such-session", "../escape"] {
        let e = a
            .request("session/delete", json!({"sessionId": id}))
            .await
            .unwrap_err();
        assert_eq!(e["code"], -32002, "{id}: {e}");
    }
    let e = a
        .request(
            "session/load",
            json!({"sessionId": s, "cwd": ws, "mcpServers": []}),
        )
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32002);
    drop(a);
    daemon.stop().await;
}

/// Waits (bounded) until the task's `sleep 1000.<token>` runs: a started task has forked,
/// but its shell may not have become `sleep` yet.
async fn running(token: &str) {
    for _ in 0..500 {
        if common::with_token(token).len() == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the task never ran");
}

/// The ids of the sessions `_dsh/status` lists, sorted.
fn loaded(status: &serde_json::Value) -> Vec<String> {
    let mut ids: Vec<String> = status["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// Issue 45's follow-up: a session nothing needs is unloaded from the daemon. Closed
/// with no task, or left by its connection: at once. Closed with a background task
/// running: kept for the task (listed closed, the process running), its notice written
/// when the task ends, then unloaded. Each loads again from its log: the replay, the
/// task's output by its owner, and a close that unloads it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_nothing_needs_is_unloaded_and_loads_again_from_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "[permissions]\ndefault_mode = \"auto\"\n").await;
    let ws = workspace(dir.path(), "ws");
    let go = Fifo::new(dir.path(), "go");
    let token = common::token();
    let mut a = daemon.connect().await;
    let idle = a.new_session(&ws).await;
    let (out, _) = a.bash(&idle, "echo said-before").await;
    assert_eq!(out, "said-before\n");
    let mut b = daemon.connect().await;
    let left = b.new_session(&ws).await;
    let s = a.new_session(&ws).await;
    let task = a
        .start_task(
            &s,
            &format!(
                "sleep 1000.{token} & read _ < {}; kill $!; echo served",
                go.path()
            ),
        )
        .await;
    running(&token).await;

    a.request("session/close", json!({"sessionId": idle}))
        .await
        .unwrap();
    a.request("session/close", json!({"sessionId": s}))
        .await
        .unwrap();
    drop(b);
    // Only the one its task needs is left, closed, its task running.
    let status = a
        .status_until("the idle and the left sessions stayed loaded", |st| {
            loaded(st) == [s.clone()]
        })
        .await;
    assert_eq!(status["sessions"][0]["closed"], true, "{status}");
    assert_eq!(status["runningTasks"][0]["taskId"], json!(task));
    assert_eq!(common::with_token(&token).len(), 1);

    // Its task ends: the notice is written, then the session goes.
    go.release().await;
    a.status_until("the closed session stayed loaded after its task", |st| {
        loaded(st).is_empty() && st["runningTasks"].as_array().unwrap().is_empty()
    })
    .await;
    assert!(log_has_notice(&daemon.state, &s, &task));
    assert!(common::with_token(&token).is_empty());

    // Each loads again from its log.
    let mut c = daemon.connect().await;
    c.load_session(&s, &ws).await;
    let replayed = serde_json::to_string(&c.updates_of(&s, "user_message_chunk")).unwrap();
    assert!(
        replayed.contains(&task) && replayed.contains("tool-bash"),
        "{replayed}"
    );
    let (out, is_error) = c
        .tool(Some(&s), "bash_output", json!({"task_id": task}))
        .await;
    assert!(!is_error && out.starts_with("served\n"), "{out}");
    c.load_session(&idle, &ws).await;
    let replayed = serde_json::to_string(&c.updates_of(&idle, "tool_call_update")).unwrap();
    assert!(replayed.contains("said-before"), "{replayed}");
    c.load_session(&left, &ws).await;
    let mut all = vec![s.clone(), idle.clone(), left.clone()];
    all.sort();
    let status = c.request("_dsh/status", json!({})).await.unwrap();
    assert_eq!(loaded(&status), all);
    // Closed again with nothing running: unloaded at once.
    for id in [&s, &idle, &left] {
        c.request("session/close", json!({"sessionId": id}))
            .await
            .unwrap();
    }
    let status = c.request("_dsh/status", json!({})).await.unwrap();
    assert!(loaded(&status).is_empty(), "{status}");
    drop((a, c));
    daemon.stop().await;
}

/// The `session_end` hook's lines (`sessionId`, `source`) so far, in order.
fn ended(file: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            (field("sessionId"), field("source"))
        })
        .collect()
}

/// A session whose connection ended ends for the daemon when it is unloaded: its
/// `session_end` hooks hear `disconnect` then (at once with no task, after its last
/// task's notice otherwise), and not `shutdown` again when the daemon stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_left_session_is_told_disconnect_when_it_is_unloaded() {
    let dir = tempfile::tempdir().unwrap();
    let told = dir.path().join("ended.jsonl");
    let hook = dir.path().join("ends.sh");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/bash\n{{ cat; echo; }} >> {}\necho '{{}}'\n",
            told.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let daemon = SocketDaemon::start(
        dir.path(),
        &format!(
            "[permissions]\ndefault_mode = \"auto\"\n[[hooks.command]]\nargv = [{:?}]\n\
             name = \"ends\"\nevent = \"session_end\"\n",
            hook.display().to_string()
        ),
    )
    .await;
    let (mut b, with_task, task, go, ws) = session_with_waiting_task(&daemon, dir.path()).await;
    let idle = b.new_session(&ws).await;
    drop(b);
    let mut a = daemon.connect().await;
    a.status_until("the left session without a task stayed loaded", |st| {
        loaded(st) == [with_task.clone()]
    })
    .await;
    for _ in 0..500 {
        if !ended(&told).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(ended(&told), [(idle.clone(), "disconnect".to_string())]);
    go.release().await;
    a.status_until("the left session stayed loaded after its task", |st| {
        loaded(st).is_empty()
    })
    .await;
    assert!(log_has_notice(&daemon.state, &with_task, &task));
    for _ in 0..500 {
        if ended(&told).len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(a);
    daemon.stop().await;
    assert_eq!(
        ended(&told),
        [
            (idle, "disconnect".to_string()),
            (with_task, "disconnect".to_string())
        ]
    );
}
