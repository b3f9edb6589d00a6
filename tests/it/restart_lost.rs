//! A daemon that crashes reports what it lost (issue 32): each background task it ran
//! is `lost` after the next start, with the output it had written (on disk as it came),
//! a T14 notice in its owner's log that a load replays, and nothing of it left alive.

use crate::common;
use common::daemon::{SocketDaemon, workspace};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const CONFIG: &str = "[permissions]\ndefault_mode = \"auto\"\n";
const LOST: &str = "[status: lost: the daemon stopped while it ran]";

/// The lines of `session`'s log that are notices about `task`.
fn notices(state: &Path, session: &str, task: &str) -> Vec<String> {
    std::fs::read_to_string(state.join(format!("sessions/{session}.jsonl")))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"type\":\"notice\"") && l.contains(&format!("\"{task}\"")))
        .map(str::to_string)
        .collect()
}

/// Waits until the task's stdout file holds `wanted` (the output reaches the disk as
/// the command writes it, whoever reads it).
async fn on_disk(state: &Path, task: &str, wanted: &str) {
    let path = state.join(format!("spill/{task}.stdout"));
    for _ in 0..2000 {
        if std::fs::read_to_string(&path).is_ok_and(|t| t.contains(wanted)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{} never held {wanted:?}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t14_t8_t13_a_crash_reports_each_running_task_lost_with_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), CONFIG).await;
    let state = daemon.state.clone();
    let ws = workspace(dir.path(), "ws");
    let token = common::token();
    let mut a = daemon.connect().await;
    let mut b = daemon.connect().await;
    let s1 = a.new_session(&ws).await;
    let s2 = b.new_session(&ws).await;
    let t1 = a
        .start_task(
            &s1,
            &format!("echo one-out; echo one-err >&2; exec sleep 1000.{token}"),
        )
        .await;
    // More than the memory bound (64000 bytes): the read names the file.
    let t2 = a
        .start_task(&s1, &format!("seq 1 20000; exec sleep 1000.{token}"))
        .await;
    // A process that left the task's session: the parent-death signal does not reach
    // it, the next daemon must.
    let t3 = b
        .start_task(
            &s2,
            &format!("setsid sleep 1000.{token} & echo three; exec sleep 1000.{token}"),
        )
        .await;
    on_disk(&state, &t1, "one-out\n").await;
    on_disk(&state, &t2, "\n20000\n").await;
    on_disk(&state, &t3, "three\n").await;
    while common::with_token(&token).len() < 4 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop((a, b));
    daemon.sigkill().await;

    let daemon = SocketDaemon::start(dir.path(), CONFIG).await;
    assert_eq!(
        common::with_token(&token),
        Vec::<i32>::new(),
        "a lost task's processes outlived the restart"
    );
    for (session, task) in [(&s1, &t1), (&s1, &t2), (&s2, &t3)] {
        let found = notices(&state, session, task);
        assert_eq!(found.len(), 1, "{task} in {session}: {found:?}");
        assert!(
            found[0].contains(&format!(
                "background bash task {task} finished {LOST}. Read its output with bash_output."
            )),
            "{}",
            found[0]
        );
    }
    assert!(notices(&state, &s2, &t1).is_empty(), "only to the owner");

    // The replay shows each task's end; its owner reads its saved output.
    let mut a = daemon.connect().await;
    a.load_session(&s1, &ws).await;
    let replayed: Vec<String> = a
        .updates_of(&s1, "user_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_string))
        .collect();
    for task in [&t1, &t2] {
        assert!(
            replayed
                .iter()
                .any(|t| t.contains("tool-bash") && t.contains(task.as_str()) && t.contains(LOST)),
            "{replayed:?}"
        );
    }
    assert_eq!(
        a.tool(Some(&s1), "bash_output", json!({"task_id": t1}))
            .await,
        (format!("one-out\n[stderr]\none-err\n{LOST}"), false)
    );
    assert_eq!(
        a.tool(Some(&s1), "bash_output", json!({"task_id": t1}))
            .await,
        (format!("(no new output)\n{LOST}"), false)
    );
    let (text, is_error) = a
        .tool(Some(&s1), "bash_output", json!({"task_id": t2}))
        .await;
    assert!(
        !is_error
            && text.contains("\n20000\n[some output was dropped from memory; full output: ")
            && text.ends_with(&format!("]\n{LOST}")),
        "{text}"
    );
    let path = text
        .split("full output: ")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap_or_else(|| panic!("no path in {text}"));
    let all: String = (1..=20000).map(|i| format!("{i}\n")).collect();
    assert_eq!(std::fs::read_to_string(path).unwrap(), all);
    // T13 holds across the restart: another session's lost task is not this one's.
    assert_eq!(
        a.tool(Some(&s1), "bash_output", json!({"task_id": t3}))
            .await,
        (format!("Error: task {t3} belongs to another session"), true)
    );
    let listed = a
        .request("_dsh/tasks/list", json!({"sessionId": s1}))
        .await
        .unwrap();
    let statuses: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["lost", "lost"], "{listed}");
    assert_eq!(
        a.tool(Some(&s1), "bash_kill", json!({"task_id": t1})).await,
        (format!("task {t1} had already finished"), false)
    );
    let mut b = daemon.connect().await;
    b.load_session(&s2, &ws).await;
    assert_eq!(
        b.tool(Some(&s2), "bash_output", json!({"task_id": t3}))
            .await,
        (format!("three\n{LOST}"), false)
    );
    drop((a, b));
    daemon.stop().await;

    // A later start serves them again, and tells nobody twice.
    let daemon = SocketDaemon::start(dir.path(), CONFIG).await;
    for (session, task) in [(&s1, &t1), (&s1, &t2), (&s2, &t3)] {
        assert_eq!(notices(&state, session, task).len(), 1, "{task}");
    }
    let mut a = daemon.connect().await;
    a.load_session(&s1, &ws).await;
    assert_eq!(
        a.tool(Some(&s1), "bash_output", json!({"task_id": t1}))
            .await,
        (format!("one-out\n[stderr]\none-err\n{LOST}"), false)
    );
    drop(a);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_leaves_no_task_to_report() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), CONFIG).await;
    let ws = workspace(dir.path(), "ws");
    let mut a = daemon.connect().await;
    let s = a.new_session(&ws).await;
    let task = a.start_task(&s, "echo hi; exec sleep 1000").await;
    on_disk(&daemon.state, &task, "hi\n").await;
    assert!(daemon.state.join(format!("tasks/{task}.json")).exists());
    drop(a);
    let state = daemon.state.clone();
    daemon.stop().await;
    // Shutdown killed it: its end is an ordinary `killed`, and its record is gone.
    assert!(!state.join(format!("tasks/{task}.json")).exists());
    let daemon = SocketDaemon::start(dir.path(), CONFIG).await;
    let found = notices(&state, &s, &task);
    assert!(found.iter().all(|n| !n.contains("lost")), "{found:?}");
    daemon.stop().await;
}

/// Under ssh with the helper the task runs on the host, and the helper ends it when
/// its channel goes with the daemon; what the daemon had received of its output is in
/// its file here, and the next daemon reports it lost with that output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t14_a_crash_reports_an_ssh_helper_task_lost_with_its_output() {
    let sshd = common::sshd::Sshd::start();
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "kind = \"ssh\"\n{CONFIG}{}",
        sshd.config_toml(dsh::config::HelperMode::Required)
    );
    let daemon = SocketDaemon::start(dir.path(), &config).await;
    let state = daemon.state.clone();
    let ws = workspace(dir.path(), "ws");
    let token = common::token();
    let mut a = daemon.connect().await;
    let s = a.new_session(&ws).await;
    let task = a
        .start_task(&s, &format!("echo remote-out; exec sleep 1000.{token}"))
        .await;
    on_disk(&state, &task, "remote-out\n").await;
    drop(a);
    daemon.sigkill().await;
    let daemon = SocketDaemon::start(dir.path(), &config).await;
    // The helper notices its channel's end and ends what it ran (on the "host",
    // this machine): wait for that to happen, bounded.
    for _ in 0..1000 {
        if common::with_token(&token).is_empty() && sshd.helpers().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(common::with_token(&token), Vec::<i32>::new());
    assert_eq!(notices(&state, &s, &task).len(), 1);
    let mut a = daemon.connect().await;
    a.load_session(&s, &ws).await;
    assert_eq!(
        a.tool(Some(&s), "bash_output", json!({"task_id": task}))
            .await,
        (format!("remote-out\n{LOST}"), false)
    );
    drop(a);
    daemon.stop().await;
}
