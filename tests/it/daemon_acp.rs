//! The real `dsh` binary driven as an editor drives it: ACP over `dsh serve
//! --stdio`, over the socket, and through `dsh acp`. Rule ids (spec/tools.md,
//! spec/acp.md) are in the test names where one applies.

use crate::common;

use common::client::Client;
use common::daemon::{SocketDaemon, workspace, write_config};
use serde_json::{Value, json};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

/// Bounds a wait that should end at once, so a failure fails instead of hanging.
const LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

const BIN: &str = env!("CARGO_BIN_EXE_dsh");

async fn stdio_daemon(dir: &Path) -> (Child, Client) {
    stdio_daemon_on(dir, &dir.join("state")).await
}

async fn stdio_daemon_on(dir: &Path, state: &Path) -> (Child, Client) {
    let config = write_config(dir, "");
    let (child, client) = common::spawn_client(
        common::dsh()
            .args(["serve", "--stdio", "--state-dir"])
            .arg(state)
            .arg("--config")
            .arg(config)
            // The key file `dsh login` writes lives there: never the developer's own.
            .env("XDG_CONFIG_HOME", dir.join("conf")),
    );
    (child, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_advertises_capabilities_and_comes_first() {
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut c) = stdio_daemon(dir.path()).await;
    let early = c
        .request("session/new", json!({"cwd": dir.path(), "mcpServers": []}))
        .await;
    assert_eq!(early.unwrap_err()["code"], -32600);
    let init = c
        .request(
            "initialize",
            json!({"protocolVersion": 7, "clientCapabilities": {}}),
        )
        .await
        .unwrap();
    assert_eq!(init["protocolVersion"], 1);
    let caps = &init["agentCapabilities"];
    assert_eq!(caps["loadSession"], true);
    assert_eq!(caps["promptCapabilities"]["embeddedContext"], true);
    for cap in ["list", "resume", "close"] {
        assert!(
            caps["sessionCapabilities"][cap].is_object(),
            "{cap} not advertised: {caps}"
        );
    }
    assert!(
        caps["_meta"]["dsh"]["methods"]
            .as_array()
            .unwrap()
            .contains(&json!("_dsh/tools/call"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_its_error_and_the_connection_keeps_working() {
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut c) = stdio_daemon(dir.path()).await;
    c.initialize().await;
    let unknown = c.request("session/nope", json!({})).await.unwrap_err();
    assert_eq!(unknown["code"], -32601);
    let unknown_ext = c.request("_dsh/nope", json!({})).await.unwrap_err();
    assert_eq!(unknown_ext["code"], -32601);
    let wrong = c
        .request("session/new", json!({"cwd": 5}))
        .await
        .unwrap_err();
    assert_eq!(wrong["code"], -32602);
    c.send_raw(b"{this is not json\n").await;
    assert_eq!(c.wait_for(Value::Null).await.unwrap_err()["code"], -32700);
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"\xff\xfe\"}\n")
        .await;
    assert_eq!(c.wait_for(Value::Null).await.unwrap_err()["code"], -32700);
    // A 20 MiB line is over the 16 MiB bound: an error, then the next line works.
    let mut huge =
        b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"initialize\",\"params\":{\"pad\":\"".to_vec();
    huge.resize(20 << 20, b'a');
    huge.extend_from_slice(b"\"}}\n");
    c.send_raw(&huge).await;
    assert_eq!(c.wait_for(Value::Null).await.unwrap_err()["code"], -32600);
    // Unknown `_` notifications are ignored; the connection answers the next request.
    c.send(json!({"jsonrpc": "2.0", "method": "_dsh/whatever", "params": {}}))
        .await;
    let ws = workspace(dir.path(), "ws");
    let id = c.new_session(&ws).await;
    assert!(
        uuid::Uuid::parse_str(&id).is_ok(),
        "session ids are random UUIDs: {id}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_new_rejects_a_relative_or_missing_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut c) = stdio_daemon(dir.path()).await;
    c.initialize().await;
    for cwd in [json!("relative/dir"), json!(dir.path().join("missing"))] {
        let e = c
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await
            .unwrap_err();
        assert_eq!(e["code"], -32602, "{e}");
        assert!(e["message"].as_str().unwrap().contains("cwd"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bang_prompt_runs_bash_with_tool_call_updates_and_other_prompts_need_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut c) = stdio_daemon(dir.path()).await;
    c.initialize().await;
    let ws = workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    c.set_mode(&s, "auto").await;
    let r = c.prompt(&s, "!echo hi; pwd").await.unwrap();
    assert_eq!(r["stopReason"], "end_turn");
    let calls = c.updates_of(&s, "tool_call");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["kind"], "execute");
    assert_eq!(calls[0]["rawInput"]["command"], "echo hi; pwd");
    let id = calls[0]["toolCallId"].clone();
    let ups = c.updates_of(&s, "tool_call_update");
    assert!(ups.iter().all(|u| u["toolCallId"] == id));
    assert_eq!(ups[0]["status"], "in_progress");
    let done = ups.last().unwrap();
    assert_eq!(done["status"], "completed");
    let text = format!("hi\n{}\n", ws.display());
    assert_eq!(done["rawOutput"]["text"], text);
    // Shown as its description, then the output verbatim in a fence.
    assert_eq!(
        done["content"][0]["content"]["text"],
        "Run the user's ! command"
    );
    assert_eq!(
        done["content"][1]["content"]["text"],
        format!("```\n{text}```")
    );
    // The default endpoint needs a key and there is none: ACP's auth-required.
    let e = c
        .prompt(&s, "what is in this directory?")
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32000, "{e}");
    assert!(e["message"].as_str().unwrap().contains("dsh login"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_reach_the_client_and_its_answer_decides() {
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut c) = stdio_daemon(dir.path()).await;
    c.initialize().await;
    let ws = workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    c.permission_answers
        .extend(["allow_once", "reject_once", "allow_always"]);
    assert_eq!(
        c.bash(&s, "touch a && echo made a").await,
        ("made a\n".into(), false)
    );
    let (text, is_error) = c.bash(&s, "touch b").await;
    assert!(is_error && text.contains("rejected"), "{text}");
    assert!(!ws.join("b").exists());
    assert_eq!(c.bash(&s, "touch c && echo c").await, ("c\n".into(), false));
    // allow_always granted `touch` for this session: no further question.
    assert_eq!(c.bash(&s, "touch d && echo d").await, ("d\n".into(), false));
    assert_eq!(c.permission_requests.len(), 3);
    let req = &c.permission_requests[0];
    assert_eq!(req["sessionId"], json!(s));
    let kinds: Vec<&str> = req["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    // No answer left: the client answers cancelled, which denies.
    let (text, is_error) = c.bash(&s, "mkdir e").await;
    assert!(is_error && text.contains("cancelled"), "{text}");
    // The vetoed call ended `failed` with the veto text.
    let failed: Vec<Value> = c
        .updates_of(&s, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_cancel_stops_the_running_command_and_a_pending_question() {
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut c) = stdio_daemon(dir.path()).await;
    c.initialize().await;
    let ws = workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    c.set_mode(&s, "auto").await;
    let ready = common::Fifo::new(dir.path(), "ready");
    let pidfile = dir.path().join("pid");
    let cmd = format!(
        "!echo $$ > {}; echo x > {}; exec sleep 1000",
        pidfile.display(),
        ready.path()
    );
    let id = c
        .start(
            "session/prompt",
            json!({"sessionId": s, "prompt": [{"type": "text", "text": cmd}]}),
        )
        .await;
    ready.wait().await;
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(common::alive(pid));
    c.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": s}}))
        .await;
    let r = c.wait_for(json!(id)).await.unwrap();
    assert_eq!(r["stopReason"], "cancelled");
    assert!(
        !common::alive(pid),
        "the cancelled command is still running"
    );

    // Cancel while a permission question is pending.
    c.set_mode(&s, "ask").await;
    c.ignore_permissions = true;
    let id = c
        .start(
            "session/prompt",
            json!({"sessionId": s, "prompt": [{"type": "text", "text": "!touch never"}]}),
        )
        .await;
    c.wait_permission_request().await;
    c.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": s}}))
        .await;
    let r = c.wait_for(json!(id)).await.unwrap();
    assert_eq!(r["stopReason"], "cancelled");
    assert!(!ws.join("never").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t12_t13_two_connections_two_sessions_each_are_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "[permissions]\ndefault_mode = \"auto\"\n").await;
    let mut a = daemon.connect().await;
    let mut b = daemon.connect().await;
    let (wa1, wa2, wb1, wb2) = (
        workspace(dir.path(), "a1"),
        workspace(dir.path(), "a2"),
        workspace(dir.path(), "b1"),
        workspace(dir.path(), "b2"),
    );
    let (a1, a2) = (a.new_session(&wa1).await, a.new_session(&wa2).await);
    let (b1, b2) = (b.new_session(&wb1).await, b.new_session(&wb2).await);
    // Each connection runs in both of its sessions at once, each in its own cwd.
    let (ra, rb) = tokio::join!(
        async {
            let x = a.bash(&a1, "pwd").await;
            let y = a.bash(&a2, "pwd").await;
            (x, y)
        },
        async {
            let x = b.bash(&b1, "pwd").await;
            let y = b.bash(&b2, "pwd").await;
            (x, y)
        }
    );
    assert_eq!(ra.0.0, format!("{}\n", wa1.display()));
    assert_eq!(ra.1.0, format!("{}\n", wa2.display()));
    assert_eq!(rb.0.0, format!("{}\n", wb1.display()));
    assert_eq!(rb.1.0, format!("{}\n", wb2.display()));
    // B naming A's session: not found, never "exists elsewhere".
    let e = b.prompt(&a1, "!true").await.unwrap_err();
    assert_eq!(e["code"], -32002);
    let e = b
        .request(
            "_dsh/tools/call",
            json!({"sessionId": a1, "name": "bash", "arguments": {}}),
        )
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32002);
    // A task of a1 is fenced off from a2 (same connection) and from b's sessions.
    let task = a.start_task(&a1, "sleep 1000").await;
    let refused = format!("Error: task {task} belongs to another session");
    assert_eq!(
        a.tool(Some(&a2), "bash_output", json!({"task_id": task}))
            .await,
        (refused.clone(), true)
    );
    assert_eq!(
        b.tool(Some(&b1), "bash_kill", json!({"task_id": task}))
            .await,
        (refused.clone(), true)
    );
    let listed = a
        .request("_dsh/tasks/list", json!({"sessionId": a1}))
        .await
        .unwrap();
    assert_eq!(listed["tasks"][0]["taskId"], json!(task));
    assert_eq!(listed["tasks"][0]["status"], "running");
    let status = b.request("_dsh/status", json!({})).await.unwrap();
    assert_eq!(status["executor"], "local");
    assert_eq!(status["connections"], 2);
    assert_eq!(status["runningTasks"][0]["owner"], json!(a1));
    // After session/close the session is no longer this connection's to address.
    a.request("session/close", json!({"sessionId": a1}))
        .await
        .unwrap();
    assert_eq!(a.prompt(&a1, "!true").await.unwrap_err()["code"], -32002);
    drop((a, b));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t14_disconnect_reload_and_restart_keep_history_tasks_and_notices() {
    let dir = tempfile::tempdir().unwrap();
    let extra = "[permissions]\ndefault_mode = \"auto\"\n";
    let daemon = SocketDaemon::start(dir.path(), extra).await;
    let ws = workspace(dir.path(), "ws");
    let go = common::Fifo::new(dir.path(), "go");
    let ready = common::Fifo::new(dir.path(), "ready");
    let mut a = daemon.connect().await;
    let s = a.new_session(&ws).await;
    assert_eq!(
        a.prompt(&s, "!echo remembered").await.unwrap()["stopReason"],
        "end_turn"
    );
    let cmd = format!(
        "echo from-task; cat {} > /dev/null; echo x > {}",
        go.path(),
        ready.path()
    );
    let task = a.start_task(&s, &cmd).await;
    // The client vanishes in the middle of a prompt.
    a.start(
        "session/prompt",
        json!({"sessionId": s, "prompt": [{"type": "text", "text": "!sleep 1000"}]}),
    )
    .await;
    a.wait_update(|u| {
        u["update"]["sessionUpdate"] == "tool_call_update"
            && u["update"]["status"] == "in_progress"
            && u["sessionId"] == json!(s)
    })
    .await;
    drop(a);
    // A new connection loads the session: history replayed before the answer.
    let mut b = daemon.connect().await;
    b.load_session(&s, &ws).await;
    let replayed_user: Vec<String> = b
        .updates_of(&s, "user_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap().to_string())
        .collect();
    assert!(
        replayed_user.contains(&"!echo remembered".to_string()),
        "{replayed_user:?}"
    );
    let texts: Vec<Value> = b
        .updates_of(&s, "tool_call_update")
        .iter()
        .map(|u| u["rawOutput"]["text"].clone())
        .collect();
    assert!(texts.contains(&json!("remembered\n")), "{texts:?}");
    // The background task is still owned by the session and readable from here.
    go.release().await;
    ready.wait().await;
    // Its completion notice, once the daemon has read all it wrote (the signal alone
    // can come before the daemon has read the output it follows).
    b.wait_task_finished(&task).await;
    let (out, is_error) = b
        .tool(Some(&s), "bash_output", json!({"task_id": task}))
        .await;
    assert!(!is_error && out.starts_with("from-task\n"), "{out}");
    drop(b);
    daemon.stop().await;
    // After a restart the session loads again, with the task's notice in its history.
    let daemon = SocketDaemon::start(dir.path(), extra).await;
    let mut c = daemon.connect().await;
    c.load_session(&s, &ws).await;
    let notices: Vec<String> = c
        .updates_of(&s, "user_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .filter(|t| t.starts_with("<context source=\"tool-bash\">"))
        .map(str::to_string)
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].contains(&format!("background bash task {task} finished [status: ")),
        "{}",
        notices[0]
    );
    let listed = c.request("session/list", json!({})).await.unwrap();
    assert!(
        listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["sessionId"] == json!(s))
    );
    // The prompt interrupted by the disconnect is closed, and the session accepts a new one.
    assert_eq!(
        c.prompt(&s, "!echo again").await.unwrap()["stopReason"],
        "end_turn"
    );
    drop(c);
    let _ = (&daemon.state, &daemon.config);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dsh_acp_from_three_clients_at_once_starts_one_daemon_and_stop_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/dsh.sock");
    let state = dir.path().join("state");
    let config = write_config(dir.path(), "");
    let spawn = || {
        let mut child = Command::new(BIN)
            .args(["acp", "--socket"])
            .arg(&socket)
            .arg("--state-dir")
            .arg(&state)
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let client = Client::new(child.stdout.take().unwrap(), child.stdin.take().unwrap());
        (child, client)
    };
    let (mut c1, mut c2, mut c3) = (spawn(), spawn(), spawn());
    let (i1, i2, i3) = tokio::join!(c1.1.initialize(), c2.1.initialize(), c3.1.initialize());
    assert_eq!(
        (
            i1["protocolVersion"].clone(),
            i2["protocolVersion"].clone(),
            i3["protocolVersion"].clone()
        ),
        (json!(1), json!(1), json!(1))
    );
    let s1 = c1.1.request("_dsh/status", json!({})).await.unwrap();
    let s3 = c3.1.request("_dsh/status", json!({})).await.unwrap();
    assert_eq!(s1["pid"], s3["pid"], "more than one daemon");
    assert_eq!(s3["connections"], 3);
    let daemon_pid = s1["pid"].as_i64().unwrap() as i32;
    let ws = workspace(dir.path(), "ws");
    let s = c2.1.new_session(&ws).await;
    c2.1.set_mode(&s, "auto").await;
    let (started, _) =
        c2.1.tool(
            Some(&s),
            "bash",
            json!({"command": "sleep 1000", "description": "d", "run_in_background": true}),
        )
        .await;
    assert!(started.starts_with("started background task"));
    let out = Command::new(BIN)
        .args(["status", "--socket"])
        .arg(&socket)
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("running tasks: 1") && text.contains("sleep 1000"),
        "{text}"
    );
    let out = Command::new(BIN)
        .args(["stop", "--socket"])
        .arg(&socket)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (mut child, _) in [c1, c2, c3] {
        child.wait().await.unwrap();
    }
    assert!(!common::alive(daemon_pid), "the daemon outlived dsh stop");
    // Any live process still working in this test's workspace would be a leak.
    let mine: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| common::alive(*pid))
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c == ws))
        .collect();
    assert!(
        mine.is_empty(),
        "task processes outlived the daemon: {mine:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_with_another_uid_is_refused_before_a_byte_is_read() {
    // The daemon runs as `nobody`; this test process (root) is the other user.
    const NOBODY: u32 = 65534;
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: starting a daemon as another user needs root (CI runs as root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("nobody");
    std::fs::create_dir(&home).unwrap();
    nix::unistd::chown(&home, Some(NOBODY.into()), Some(NOBODY.into())).unwrap();
    let socket = home.join("run/dsh.sock");
    let mut daemon = Command::new(BIN)
        .args(["serve", "--socket"])
        .arg(&socket)
        .arg("--state-dir")
        .arg(home.join("state"))
        .current_dir(&home)
        .uid(NOBODY)
        .gid(NOBODY)
        .env("HOME", &home)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(daemon.stdout.take().unwrap()).lines();
    let line = lines
        .next_line()
        .await
        .unwrap()
        .expect("daemon exited at start");
    assert!(line.starts_with("dsh daemon listening on "), "{line}");
    let mut intruder = UnixStream::connect(&socket).await.unwrap();
    // The daemon may already have closed the connection, so the write may fail;
    // either way no answer may come back.
    let hello = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}});
    let _ = intruder.write_all(format!("{hello}\n").as_bytes()).await;
    let mut answer = Vec::new();
    let _ = intruder.read_to_end(&mut answer).await;
    assert!(
        answer.is_empty(),
        "another uid got an answer: {}",
        String::from_utf8_lossy(&answer)
    );
    // The daemon's own user is served.
    let out = std::process::Command::new(BIN)
        .args(["stop", "--socket"])
        .arg(&socket)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(daemon.wait().await.unwrap().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_daemon_per_socket_and_a_stale_socket_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "").await;
    let second = Command::new(BIN)
        .args(["serve", "--socket"])
        .arg(&daemon.socket)
        .arg("--state-dir")
        .arg(&daemon.state)
        .output()
        .await
        .unwrap();
    assert!(!second.status.success());
    let message = String::from_utf8_lossy(&second.stderr);
    assert!(message.contains("already running"), "{message}");
    // Two prompts at once in one session: the second is refused, the first goes on.
    let mut c = daemon.connect().await;
    let ws = workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    c.set_mode(&s, "auto").await;
    let ready = common::Fifo::new(dir.path(), "ready");
    let first = c
        .start("session/prompt", json!({"sessionId": s, "prompt": [{"type": "text", "text": format!("!echo x > {}; sleep 1000", ready.path())}]}))
        .await;
    ready.wait().await;
    let e = c.prompt(&s, "!true").await.unwrap_err();
    assert_eq!(e["code"], -32600, "{e}");
    c.send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": first}}))
        .await;
    assert_eq!(
        c.wait_for(json!(first)).await.unwrap()["stopReason"],
        "cancelled"
    );
    drop(c);
    // A daemon killed outright leaves its socket file behind; the next one replaces it.
    let SocketDaemon {
        mut child, socket, ..
    } = daemon;
    child.kill().await.unwrap();
    child.wait().await.unwrap();
    assert!(socket.exists());
    let daemon = SocketDaemon::start(dir.path(), "").await;
    let mut c = daemon.connect().await;
    assert!(c.request("_dsh/status", json!({})).await.is_ok());
    drop(c);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e3_a_killed_daemon_leaves_nothing_running_once_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let extra = "[permissions]\ndefault_mode = \"auto\"\n";
    let daemon = SocketDaemon::start(dir.path(), extra).await;
    let mut c = daemon.connect().await;
    let ws = workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    let ready = common::Fifo::new(dir.path(), "ready");
    let pids = dir.path().join("pids");
    // The task's own shell, a child of it, and a child that left its session.
    let cmd = format!(
        "echo $$ >> {p}; sleep 1000 & echo $! >> {p}; setsid bash -c 'echo $$ >> {p}; exec sleep 1000' & \
         while [ $(wc -l < {p}) -lt 3 ]; do sleep 0.01; done; echo x > {r}; wait",
        p = pids.display(),
        r = ready.path()
    );
    let (started, _) = c
        .tool(
            Some(&s),
            "bash",
            json!({"command": cmd, "description": "d", "run_in_background": true}),
        )
        .await;
    assert!(started.starts_with("started background task"), "{started}");
    ready.wait().await;
    let before = common::pids(&pids);
    assert_eq!(before.len(), 3);
    let SocketDaemon { mut child, .. } = daemon;
    child.kill().await.unwrap(); // SIGKILL: no shutdown runs
    child.wait().await.unwrap();
    drop(c);
    // The next daemon on this state directory sweeps before it listens.
    let daemon = SocketDaemon::start(dir.path(), extra).await;
    let survivors: Vec<i32> = before
        .iter()
        .copied()
        .filter(|p| common::alive(*p))
        .collect();
    assert!(
        survivors.is_empty(),
        "processes from the killed daemon survived: {survivors:?}"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_on_the_same_state_leaves_the_first_ones_tasks_alone() {
    let dir = tempfile::tempdir().unwrap();
    let extra = "[permissions]\ndefault_mode = \"auto\"\n";
    let first = SocketDaemon::start(dir.path(), extra).await;
    let mut c = first.connect().await;
    let ws = workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    let ready = common::Fifo::new(dir.path(), "ready");
    let pidfile = dir.path().join("pid");
    let cmd = format!(
        "echo $$ > {}; echo x > {}; exec sleep 1000",
        pidfile.display(),
        ready.path()
    );
    c.tool(
        Some(&s),
        "bash",
        json!({"command": cmd, "description": "d", "run_in_background": true}),
    )
    .await;
    ready.wait().await;
    let pid = common::pids(&pidfile)[0];
    // An editor starting `dsh serve --stdio` on the same state directory.
    let (_second, mut other) = stdio_daemon_on(dir.path(), &first.state).await;
    other.initialize().await;
    assert!(common::alive(pid), "a live daemon's task was swept");
    drop(c);
    first.stop().await;
}

/// `dsh acp` on stdio that is not a pipe (here a socket, as some launchers give;
/// a terminal or a file is the same case): it falls back to plain stdio and still
/// carries the conversation both ways. Pipes, the usual case, are what every other
/// `dsh acp` test uses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dsh_acp_on_stdio_that_is_not_a_pipe_still_carries_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "").await;
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let output = theirs.try_clone().unwrap();
    let mut launcher = Command::new(common::daemon::BIN)
        .args(["acp", "--socket"])
        .arg(&daemon.socket)
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(output)))
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    ours.set_nonblocking(true).unwrap();
    let (reader, writer) = UnixStream::from_std(ours).unwrap().into_split();
    let mut client = Client::new(reader, writer);
    client.initialize().await;
    let ws = workspace(dir.path(), "ws");
    let session = client.new_session(&ws).await;
    // The default mode asks: the question crosses too, and its answer back.
    client.permission_answers.push_back("allow_once");
    assert_eq!(
        client.bash(&session, "echo carried").await,
        ("carried\n".to_string(), false)
    );
    drop(client);
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), launcher.wait())
        .await
        .expect("dsh acp ends when its input ends")
        .unwrap();
    assert!(status.success(), "{status}");
    daemon.stop().await;
}

/// `dsh acp` on pipes, as an editor starts it, hands the pipes to the daemon and
/// steps out of the path: a call goes through while the launcher is stopped
/// (SIGSTOP). Its end still ends the connection, as when it carried the bytes:
/// after SIGKILL the session is no longer bound, and the editor's output ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dsh_acp_hands_its_pipes_to_the_daemon_and_its_end_ends_the_connection() {
    use nix::sys::signal::{Signal, kill};
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "").await;
    let (mut launcher, mut editor) = daemon.connect_acp().await;
    let ws = workspace(dir.path(), "ws");
    let session = editor.new_session(&ws).await;
    let pid = nix::unistd::Pid::from_raw(launcher.id().unwrap() as i32);
    // The daemon holds the editor's pipes, and keeps them from its commands.
    let link = |path: String| std::fs::read_link(path).unwrap().display().to_string();
    let pipes = [0, 1].map(|fd| link(format!("/proc/{pid}/fd/{fd}")));
    let daemon_fds: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", daemon.pid))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|l| l.display().to_string())
        .collect();
    for pipe in &pipes {
        assert!(pipe.starts_with("pipe:"), "{pipe}");
        assert!(daemon_fds.contains(pipe), "the daemon does not hold {pipe}");
    }
    editor.permission_answers.push_back("allow_once");
    let (seen, is_error) = editor
        .bash(&session, "for f in /proc/$$/fd/*; do readlink $f; done")
        .await;
    assert!(!is_error, "{seen}");
    for pipe in &pipes {
        assert!(
            !seen.contains(pipe.as_str()),
            "a command inherited {pipe}: {seen}"
        );
    }
    kill(pid, Signal::SIGSTOP).unwrap();
    editor.permission_answers.push_back("allow_once");
    let call = editor.bash(&session, "echo around");
    let answer = tokio::time::timeout(std::time::Duration::from_secs(30), call)
        .await
        .expect("a call waited for the stopped launcher: it is still in the path");
    assert_eq!(answer, ("around\n".to_string(), false));
    kill(pid, Signal::SIGCONT).unwrap();

    let mut observer = daemon.connect().await;
    let bound = |status: &Value| {
        status["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["sessionId"] == json!(session) && s["connected"] == json!(true))
    };
    let status = observer.request("_dsh/status", json!({})).await.unwrap();
    assert!(bound(&status), "{status}");
    launcher.kill().await.unwrap();
    launcher.wait().await.unwrap();
    observer
        .status_until("the connection outlived its launcher", |s| !bound(s))
        .await;
    let last = tokio::time::timeout(LIMIT, editor.next_message())
        .await
        .expect("the editor's output stayed open");
    assert!(
        last.is_none(),
        "the editor's output ends with the connection"
    );
    daemon.stop().await;
}

/// A daemon from before the hand-over (still running after an upgrade) answers
/// the hand-over request with an error; `dsh acp` then carries the bytes itself,
/// both ways, on the same connection. The "old daemon" here is a bare socket that
/// answers as one would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dsh_acp_copies_when_the_daemon_declines_the_hand_over() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("old.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let mut launcher = common::launcher(&socket).spawn().unwrap();
    let (old_daemon, _) = tokio::time::timeout(LIMIT, listener.accept())
        .await
        .expect("dsh acp never connected")
        .unwrap();
    let (from_launcher, mut to_launcher) = old_daemon.into_split();
    let mut from_launcher = tokio::io::BufReader::new(from_launcher).lines();
    let request = from_launcher.next_line().await.unwrap().unwrap();
    assert_eq!(format!("{request}\n"), dsh::rpc::handover::REQUEST);
    // The refusal and what follows it in one write: the launcher must take the
    // refusal alone and pass the rest on.
    to_launcher
        .write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":\"dsh-handover\",\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}\nextra\n",
        )
        .await
        .unwrap();
    let mut editor_in = launcher.stdin.take().unwrap();
    let mut editor_out = tokio::io::BufReader::new(launcher.stdout.take().unwrap()).lines();
    assert_eq!(editor_out.next_line().await.unwrap().unwrap(), "extra");
    editor_in.write_all(b"ping\n").await.unwrap();
    assert_eq!(from_launcher.next_line().await.unwrap().unwrap(), "ping");
    to_launcher.write_all(b"pong\n").await.unwrap();
    assert_eq!(
        editor_out.next_line().await.unwrap().unwrap(),
        "pong",
        "the refusal itself is not passed on to the editor"
    );
    drop(editor_in);
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), launcher.wait())
        .await
        .expect("dsh acp ends when its input ends")
        .unwrap();
    assert!(status.success(), "{status}");
}

/// Clients that never make a request do not hold up the daemon or `dsh stop`:
/// one that says nothing, one that sends half a line and waits, one that sends
/// the start of the hand-over line and closes its side (the daemon looks at a
/// connection's first bytes before it knows what it is; the service knows a
/// connection only from its first request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_without_a_request_hold_up_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "").await;
    let silent = UnixStream::connect(&daemon.socket).await.unwrap();
    let mut half = UnixStream::connect(&daemon.socket).await.unwrap();
    half.write_all(b"x").await.unwrap();
    let mut prefix = UnixStream::connect(&daemon.socket).await.unwrap();
    prefix.write_all(b"{\"jsonrpc\":\"2.0\",").await.unwrap();
    prefix.shutdown().await.unwrap();
    let mut observer = daemon.connect().await;
    let status = tokio::time::timeout(LIMIT, observer.request("_dsh/status", json!({})))
        .await
        .expect("the daemon stopped answering");
    assert!(status.is_ok(), "{status:?}");
    drop(observer);
    tokio::time::timeout(LIMIT, daemon.stop())
        .await
        .expect("dsh stop waited for a connection that made no request");
    drop((silent, half, prefix));
}

/// A hand-over with more descriptors than two is refused, and every descriptor it
/// carried is closed: the daemon's open files do not grow over a few of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_with_extra_descriptors_is_refused_and_leaks_none() {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    use std::io::{BufRead, BufReader};
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "").await;
    let open_files = || {
        std::fs::read_dir(format!("/proc/{}/fd", daemon.pid))
            .unwrap()
            .count()
    };
    let before = open_files();
    let nulls: Vec<std::fs::File> = (0..20)
        .map(|_| std::fs::File::open("/dev/null").unwrap())
        .collect();
    let fds: Vec<i32> = nulls.iter().map(|f| f.as_raw_fd()).collect();
    for _ in 0..5 {
        let socket = std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap();
        let request = dsh::rpc::handover::REQUEST.as_bytes();
        let sent = sendmsg::<()>(
            socket.as_raw_fd(),
            &[std::io::IoSlice::new(request)],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        )
        .unwrap();
        assert_eq!(sent, request.len());
        let mut answer = String::new();
        BufReader::new(&socket).read_line(&mut answer).unwrap();
        assert!(answer.contains("\"error\""), "{answer}");
    }
    // Each connection ends with its socket; then the count is back.
    let mut now = open_files();
    for _ in 0..1000 {
        if now <= before {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        now = open_files();
    }
    assert!(
        now <= before,
        "the daemon holds {now} files, {before} before"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t10_a_malformed_task_id_is_an_error_not_a_task() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "[permissions]\ndefault_mode = \"auto\"\n").await;
    let mut c = daemon.connect().await;
    let ws = workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    let task = c.start_task(&s, "echo from-task").await;
    let number = task.strip_prefix("bash-").unwrap();
    // Each is refused for what it is, by both tools, before any lookup (the executor
    // once read `bash-07` and `bash-+7` as task 7).
    for bad in [
        "bash-x".to_string(),
        "bash-".to_string(),
        number.to_string(),
        format!("bash-0{number}"),
        format!("bash-+{number}"),
    ] {
        for tool in ["bash_output", "bash_kill"] {
            assert_eq!(
                c.tool(Some(&s), tool, json!({"task_id": bad})).await,
                (
                    format!(
                        "Error: invalid task_id: \"{bad}\" is not a task id: task ids look like bash-7"
                    ),
                    true
                ),
                "{tool} {bad}"
            );
        }
    }
    // What was already an error keeps its text (T10).
    assert_eq!(
        c.tool(Some(&s), "bash_output", json!({"task_id": " "}))
            .await,
        ("Error: invalid task_id".to_string(), true)
    );
    assert_eq!(
        c.tool(Some(&s), "bash_kill", json!({"task_id": "bash-999999"}))
            .await,
        ("Error: unknown bash task \"bash-999999\"".to_string(), true)
    );
    // The task itself is read as before, and `_dsh/tasks/kill` (what `dsh kill` sends,
    // as the user, who may kill any task) refuses a bad id instead of killing task N.
    let (out, is_error) = c
        .tool(Some(&s), "bash_output", json!({"task_id": task}))
        .await;
    assert!(!is_error, "{out}");
    let e = c
        .request(
            "_dsh/tasks/kill",
            json!({"taskId": format!("bash-0{number}")}),
        )
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("is not a task id"), "{message}");
    drop(c);
    daemon.stop().await;
}

/// T14: an editor that quits and reconnects at once loads its session. Its old
/// connection's socket is closed, but the daemon may not have read that end yet when the
/// new connection's `session/load` arrives; the session is not "in use" by a connection
/// whose end is in flight. 200 reconnects in a row, each load straight after the drop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t14_an_editor_reconnecting_at_once_loads_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "").await;
    let ws = workspace(dir.path(), "ws");
    let mut c = daemon.connect().await;
    let s = c.new_session(&ws).await;
    for round in 0..200 {
        drop(c);
        c = daemon.connect().await;
        let loaded = c
            .request(
                "session/load",
                json!({"sessionId": s, "cwd": ws, "mcpServers": []}),
            )
            .await;
        assert!(loaded.is_ok(), "round {round}: {loaded:?}");
    }
    // A connection still open holds its session: another's load is refused once the
    // wait for the holder's end (which does not come) is over.
    let mut other = daemon.connect().await;
    let refused = other
        .request(
            "session/load",
            json!({"sessionId": s, "cwd": ws, "mcpServers": []}),
        )
        .await;
    assert!(
        refused.as_ref().is_err_and(|e| e["message"]
            .as_str()
            .is_some_and(|m| m.contains("in use by another connection"))),
        "{refused:?}"
    );
    drop((c, other));
    daemon.stop().await;
}
