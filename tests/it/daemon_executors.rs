//! Choosing the executor, through the real binary: the model-facing texts of the
//! tool contract (T3-T5, T7, T8, T10, T11, T13, T14) are byte for byte the same
//! whether `[exec] kind` is local, sandbox or ssh (on the wrapper path, or through
//! `dsh exec-helper` on the host), a failed command's too (the sandbox's note of issue
//! 27 is only for failures the sandbox plausibly caused, E13); `_dsh/status` and `dsh status` say which one
//! runs; `_dsh/stop` ends the helper and everything it ran; and a sandbox that
//! cannot be built stops `dsh serve` (fail closed) instead of running anything
//! unsandboxed.

use crate::common;

use common::client::Client;
use common::daemon::SocketDaemon;
use common::sshd::Sshd;
use dsh::config::HelperMode;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The `[exec]` section choosing `kind` (`ssh-helper`: ssh with `helper =
/// "required"`; `ssh`: with `helper = "off"`), with short grace and drain.
fn exec_section(kind: &str, sshd: Option<&Sshd>) -> String {
    let exec_kind = if kind == "ssh-helper" { "ssh" } else { kind };
    let mut text = format!(
        "[exec]\nkind = \"{exec_kind}\"\nkill_grace_ms = 300\ndrain_ms = 300\n\
         [permissions]\ndefault_mode = \"auto\"\n"
    );
    if let Some(sshd) = sshd {
        text.push_str(&sshd.config_toml(if kind == "ssh-helper" {
            HelperMode::Required
        } else {
            HelperMode::Off
        }));
    }
    text
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A daemon on stdio with `config`, its connection initialized, and the answer to
/// `initialize`.
async fn stdio_daemon(dir: &Path, config: &str) -> (tokio::process::Child, Client, Value) {
    let config = write(dir, "dsh.toml", config);
    let (child, mut client) = common::spawn_client(
        common::dsh()
            .args(["serve", "--stdio", "--state-dir"])
            .arg(dir.join("state"))
            .arg("--config")
            .arg(config),
    );
    let init = client.initialize().await;
    (child, client, init)
}

async fn the_tool_texts_are_the_same(kind: &str) {
    let sshd = kind.starts_with("ssh").then(Sshd::start);
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut c, _) = stdio_daemon(dir.path(), &exec_section(kind, sshd.as_ref())).await;
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let s = c.new_session(&ws).await;
    let other = c.new_session(&ws).await;
    let status = c.request("_dsh/status", json!({})).await.unwrap();
    // The helper is chosen on first contact; until then status says so.
    let shown = match kind {
        "ssh-helper" => "ssh (not connected yet)",
        k => k,
    };
    assert_eq!(status["executor"], shown);
    let ok = |t: &str| (t.to_string(), false);
    // E13 (issue 39): a plain non-zero exit or a timeout reads the same under every
    // executor; the sandbox's note is only for failures its output blames on it.
    let failed = ok;
    // T3, T4, T5: texts of foreground calls.
    assert_eq!(c.bash(&s, "echo hello").await, ok("hello\n"));
    if kind == "ssh-helper" {
        let status = c.request("_dsh/status", json!({})).await.unwrap();
        assert_eq!(status["executor"], "ssh+helper");
    }
    assert_eq!(c.bash(&s, "true").await, ok("(no output)"));
    assert_eq!(
        c.bash(&s, "echo out; echo err >&2").await,
        ok("out\n[stderr]\nerr\n")
    );
    assert_eq!(
        c.bash(&s, "echo failing; exit 3").await,
        failed("failing\n[exit code: 3]")
    );
    assert_eq!(c.bash(&s, "pwd").await, ok(&format!("{}\n", ws.display())));
    // Over ssh the remote login shell takes a while to start: the timeout must fire
    // once the command runs (and has set its trap).
    let ms = if kind == "ssh" { 3000 } else { 100 };
    let call = json!({"command": "sleep 5", "description": "d", "timeoutMs": ms});
    assert_eq!(
        c.tool(Some(&s), "bash", call).await,
        failed(&format!(
            "(no output)\n[timed out after {ms}ms]\n[killed by signal: SIGTERM]"
        ))
    );
    let call = json!({"command": "trap 'exit 0' TERM; sleep 5 & wait", "description": "d", "timeoutMs": ms});
    assert_eq!(
        c.tool(Some(&s), "bash", call).await,
        ok(&format!("(no output)\n[timed out after {ms}ms]"))
    );
    // T6: a long output is cut to its tail and names its file, short, which the
    // session's next command opens as it is: under ssh it runs on the host, so the
    // file is there, named as the host names it (issue 32). The sandbox masks dsh's
    // state from its commands (E9): there the text alone is checked.
    let (text, is_error) = c.bash(&s, "seq 1 20000").await;
    assert!(!is_error, "{text}");
    let (tail, note) = text
        .rsplit_once("\n[output truncated; full output: ")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(tail.ends_with("\n19999\n20000\n"), "{tail}");
    let path = note.strip_suffix(']').unwrap();
    let name = Path::new(path).file_name().unwrap().to_str().unwrap();
    assert!(
        path.starts_with('/') && name.len() <= 60 && name.ends_with(".stdout"),
        "{path}"
    );
    if kind != "sandbox" {
        assert_eq!(
            c.bash(&s, &format!("wc -c < {path}")).await,
            ok("108894\n"),
            "{path}"
        );
    }
    // T7, T8, T10, T11, T13: a background task's life.
    // Inside the workspace: the sandbox sees only that of the test directory.
    let go = common::Fifo::new(&ws, "go");
    let task = c
        .start_task(
            &s,
            &format!("echo first; cat {} >/dev/null; echo second", go.path()),
        )
        .await;
    assert!(task.starts_with("bash-"), "{task}");
    go.release().await;
    // No event announces the end to the client (T14 notices go to the model's
    // context): ask the daemon until the task is no longer running.
    loop {
        let listed = c
            .request("_dsh/tasks/list", json!({"sessionId": s}))
            .await
            .unwrap();
        let entry = listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["taskId"] == json!(task))
            .cloned()
            .unwrap();
        if entry["status"] != "running" {
            break;
        }
    }
    assert_eq!(
        c.tool(Some(&s), "bash_output", json!({"task_id": task}))
            .await,
        ok("first\nsecond\n[status: completed, exit code: 0]")
    );
    assert_eq!(
        c.tool(Some(&s), "bash_output", json!({"task_id": task}))
            .await,
        ok("(no new output)\n[status: completed, exit code: 0]")
    );
    assert_eq!(
        c.tool(Some(&s), "bash_kill", json!({"task_id": task}))
            .await,
        ok(&format!("task {task} had already finished"))
    );
    let sleeper = c.start_task(&s, "sleep 1000").await;
    assert_eq!(
        c.tool(Some(&other), "bash_kill", json!({"task_id": sleeper}))
            .await,
        (
            format!("Error: task {sleeper} belongs to another session"),
            true
        )
    );
    assert_eq!(
        c.tool(Some(&s), "bash_kill", json!({"task_id": sleeper}))
            .await,
        ok(&format!("killed background task {sleeper}"))
    );
    assert_eq!(
        c.tool(Some(&s), "bash_output", json!({"task_id": sleeper}))
            .await,
        ok("(no new output)\n[status: killed by SIGTERM]")
    );
    assert_eq!(
        c.tool(Some(&s), "bash_output", json!({"task_id": "bash-999999"}))
            .await,
        ("Error: unknown bash task \"bash-999999\"".to_string(), true)
    );
    if let Some(sshd) = sshd.filter(|_| kind == "ssh-helper") {
        // `_dsh/stop` (what `dsh stop` sends) ends the helper cleanly, and with it
        // a task that was still running there.
        let token = common::token();
        c.start_task(&s, &format!("exec sleep 1000.{token}")).await;
        while common::with_token(&token).is_empty() {
            tokio::task::yield_now().await;
        }
        assert_eq!(sshd.helpers().len(), 1);
        // The daemon may close the connection before its answer goes out.
        c.send(json!({"jsonrpc": "2.0", "id": 99, "method": "_dsh/stop", "params": {}}))
            .await;
        assert!(child.wait().await.unwrap().success());
        assert!(
            common::with_token(&token).is_empty(),
            "the task outlived stop"
        );
        assert!(sshd.helpers().is_empty(), "the helper outlived stop");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_texts_local() {
    the_tool_texts_are_the_same("local").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_texts_sandbox() {
    the_tool_texts_are_the_same("sandbox").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_texts_ssh() {
    the_tool_texts_are_the_same("ssh").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_texts_ssh_helper() {
    the_tool_texts_are_the_same("ssh-helper").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_that_cannot_be_built_stops_the_daemon_before_it_listens() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "dsh.toml",
        "[exec]\nkind = \"sandbox\"\n[exec.sandbox]\nbwrap = \"/nonexistent/bwrap\"\n",
    );
    let socket = dir.path().join("dsh.sock");
    let out = common::dsh()
        .args(["serve", "--socket"])
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("needs bubblewrap") && stderr.contains("apt install bubblewrap"),
        "{stderr}"
    );
    assert!(!socket.exists(), "it listened anyway");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dsh_status_names_the_executor_that_runs() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "kind = \"sandbox\"\n").await;
    let text = daemon.cli_status();
    assert!(text.contains("executor sandbox"), "{text}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_session_writes_to_its_cwd_and_the_directories_the_editor_granted_only() {
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut c, init) = stdio_daemon(dir.path(), &exec_section("sandbox", None)).await;
    assert!(
        init["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"].is_object(),
        "{init}"
    );
    let (ws, granted, other) = (
        dir.path().join("ws"),
        dir.path().join("granted"),
        dir.path().join("other"),
    );
    for d in [&ws, &granted, &other] {
        std::fs::create_dir(d).unwrap();
    }
    let s = c
        .request(
            "session/new",
            json!({"cwd": ws, "mcpServers": [], "additionalDirectories": [granted]}),
        )
        .await
        .unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    for (target, writable) in [(&ws, true), (&granted, true), (&other, false)] {
        let file = target.join("f");
        let (text, _) = c.bash(&s, &format!("echo x > {}", file.display())).await;
        assert_eq!(file.exists(), writable, "{}: {text}", target.display());
    }
}
