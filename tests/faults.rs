//! Faults against the real binary (issue 8): clients that die at the worst
//! moment, a daemon SIGKILLed in the middle of a turn, a spill directory that
//! cannot be used, and a process limit that makes spawning fail. The daemon
//! must go on serving, lose nothing that was complete, and leave nothing
//! running. Tests wait on responses, updates and fifos; the only polling is
//! of `_dsh/status` for the daemon to notice a dead peer, which it reports.

mod common;

use common::client::Client;
use common::daemon::{SocketDaemon, processes_under, workspace};
use common::fake_model::{FakeModel, Reply, bash_call, messages, text};
use serde_json::{Value, json};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::time::Duration;

const AUTO: &str = "[permissions]\ndefault_mode = \"auto\"\n";

/// Waits until the daemon reports `session` neither bound to a connection nor
/// prompting, or no longer loaded at all (a session nothing needs is unloaded once
/// released; its log stays for `session/load`): it has noticed that its client died and
/// finished cleaning up.
async fn wait_released(c: &mut Client, session: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = c.request("_dsh/status", json!({})).await.expect("status");
        let me = status["sessions"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s["sessionId"] == session))
            .cloned()
            .unwrap_or(Value::Null);
        if me.is_null() || (me["connected"] == false && me["state"] == "idle") {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the daemon never released {session}: {me}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn load(c: &mut Client, session: &str, cwd: &Path) {
    c.request(
        "session/load",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    )
    .await
    .expect("session/load");
}

fn texts(c: &Client, session: &str, kind: &str) -> Vec<String> {
    c.updates_of(session, kind)
        .iter()
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_string))
        .collect()
}

/// Every line of a session log, checked to be whole JSON.
fn log_lines(state: &Path, session: &str) -> Vec<Value> {
    let bytes = std::fs::read(state.join(format!("sessions/{session}.jsonl"))).unwrap();
    assert_eq!(bytes.last(), Some(&b'\n'), "the log ends in a torn line");
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_slice(l)
                .unwrap_or_else(|e| panic!("torn log line ({e}): {}", String::from_utf8_lossy(l)))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_killed_mid_prompt_mid_permission_and_mid_load_the_daemon_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let held = Reply::EventsThenHold(vec![
        json!({"choices": [{"index": 0, "delta": {"content": "thinking"}}]}),
    ]);
    let mut model = FakeModel::start(vec![held, text("Back again.")]).await;
    let daemon = SocketDaemon::start(dir.path(), &model.config()).await;
    let ws = workspace(dir.path(), "ws");
    let mut observer = daemon.connect().await;

    // 1. Killed mid-prompt: the model is streaming when the editor process dies.
    let (mut editor, mut c) = daemon.connect_acp().await;
    let s = c.new_session(&ws).await;
    c.start(
        "session/prompt",
        json!({"sessionId": s, "prompt": [{"type": "text", "text": "think hard"}]}),
    )
    .await;
    c.wait_update(|u| u["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    editor.kill().await.unwrap(); // SIGKILL
    model.released.notified().await; // the daemon dropped the model stream
    wait_released(&mut observer, &s).await;

    // 2. Killed while a permission question is pending.
    let (mut editor, mut c) = daemon.connect_acp().await;
    load(&mut c, &s, &ws).await;
    c.ignore_permissions = true;
    c.start(
        "session/prompt",
        json!({"sessionId": s, "prompt": [{"type": "text", "text": "!touch never"}]}),
    )
    .await;
    c.wait_permission_request().await;
    editor.kill().await.unwrap();
    wait_released(&mut observer, &s).await;
    assert!(!ws.join("never").exists(), "an unanswered ask ran");

    // The session loads again with both interrupted turns in it, and prompts.
    let (_editor, mut c) = daemon.connect_acp().await;
    load(&mut c, &s, &ws).await;
    let users = texts(&c, &s, "user_message_chunk");
    assert_eq!(users, ["think hard", "!touch never"]);
    let failed: Vec<Value> = c
        .updates_of(&s, "tool_call_update")
        .into_iter()
        .filter(|u| u["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "the asked call is closed as failed");
    assert!(
        failed[0]["rawOutput"]["text"]
            .as_str()
            .unwrap()
            .contains("cancelled"),
        "{}",
        failed[0]
    );
    let r = c.prompt(&s, "are you there?").await.unwrap();
    assert_eq!(r["stopReason"], "end_turn");
    assert_eq!(
        texts(&c, &s, "agent_message_chunk").last().unwrap(),
        "Back again."
    );
    model.requests.recv().await.unwrap();
    let last = model.requests.recv().await.unwrap();
    let said: Vec<Value> = messages(&last).into_iter().skip(1).collect();
    assert_eq!(said[0]["content"], "think hard");
    assert_eq!(said.last().unwrap()["content"], "are you there?");
    drop(c);

    // 3. Killed in the middle of a long replay. The log is written beforehand
    // (the daemon does not hold it), large enough that the replay cannot fit in
    // the socket and pipe buffers, so the daemon is still sending when the
    // client dies.
    const EVENTS: usize = 20_000;
    let long = uuid::Uuid::new_v4().to_string();
    {
        let header = dsh::store::Header {
            id: long.clone(),
            cwd: ws.clone(),
            created_ms: 1,
            title: None,
        };
        let log = dsh::store::SessionLog::create(&daemon.state, &header).unwrap();
        for i in 0..EVENTS {
            log.append(&dsh::store::Event::AgentMessage {
                at_ms: 2,
                text: format!("line {i:05} {}", "x".repeat(100)),
                message_id: None,
            })
            .unwrap();
        }
    }
    let (mut editor, mut c) = daemon.connect_acp().await;
    let id = c
        .start(
            "session/load",
            json!({"sessionId": long, "cwd": ws, "mcpServers": []}),
        )
        .await;
    c.wait_update(|u| u["sessionId"] == json!(long)).await;
    editor.kill().await.unwrap();
    let _ = id;
    wait_released(&mut observer, &long).await;
    let mut c = daemon.connect().await;
    load(&mut c, &long, &ws).await;
    let replayed = texts(&c, &long, "agent_message_chunk");
    assert_eq!(replayed.len(), EVENTS);
    assert!(replayed[EVENTS - 1].starts_with(&format!("line {:05} ", EVENTS - 1)));
    drop((c, observer));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_sigkilled_mid_turn_restarts_with_whole_logs_closed_turns_and_no_old_processes() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "ws");
    let pids = dir.path().join("pids");
    let ready = common::Fifo::new(dir.path(), "ready");
    let bg_ready = common::Fifo::new(dir.path(), "bg-ready");
    // The model's command: records its pid, says it is running, then waits.
    let foreground = format!(
        "echo $$ >> {p}; echo x > {r}; exec sleep 1000",
        p = pids.display(),
        r = ready.path()
    );
    let mut model = FakeModel::start(vec![
        text("Noted: 42."),
        bash_call("call_fg", &foreground),
        text("It was interrupted."),
    ])
    .await;
    let config = format!("{AUTO}{}", model.config());
    let daemon = SocketDaemon::start(dir.path(), &config).await;
    let mut c = daemon.connect().await;
    let s = c.new_session(&ws).await;
    // A completed turn.
    assert_eq!(
        c.prompt(&s, "remember 42").await.unwrap()["stopReason"],
        "end_turn"
    );
    // Background tasks: a plain one, one with a child, one that left its
    // process session (only the restart sweep can find that one).
    let bg = format!(
        "echo $$ >> {p}; sleep 1000 & echo $! >> {p}; \
         setsid bash -c 'echo $$ >> {p}; exec sleep 1000' & \
         while [ $(wc -l < {p}) -lt 3 ]; do sleep 0.01; done; echo x > {r}; wait",
        p = pids.display(),
        r = bg_ready.path()
    );
    let task = c.start_task(&s, &bg).await;
    bg_ready.wait().await;
    // The interrupted turn: the model's command is running when the daemon dies.
    c.start(
        "session/prompt",
        json!({"sessionId": s, "prompt": [{"type": "text", "text": "run it"}]}),
    )
    .await;
    ready.wait().await;
    let before = common::pids(&pids);
    assert_eq!(before.len(), 4, "{before:?}");
    daemon.sigkill().await;
    drop(c);

    // What the kill left: every line whole (each append is one write).
    let state = dir.path().join("state");
    let left = log_lines(&state, &s);
    let last_start = left
        .iter()
        .rposition(|e| e["type"] == "turn_start")
        .unwrap();
    assert!(
        !left[last_start..].iter().any(|e| e["type"] == "turn_end"),
        "the second turn cannot have ended yet"
    );
    // A kill in the middle of a write would leave a fragment; plant one.
    let path = state.join(format!("sessions/{s}.jsonl"));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"type":"agent_message","atMs":1,"text":"half a li"#);
    std::fs::write(&path, &bytes).unwrap();

    // The next daemon sweeps what the first one's commands left before it listens.
    let daemon = SocketDaemon::start(dir.path(), &config).await;
    let survivors: Vec<i32> = before
        .iter()
        .copied()
        .filter(|p| common::alive(*p))
        .collect();
    assert!(
        survivors.is_empty(),
        "survived the killed daemon: {survivors:?}"
    );

    let mut c = daemon.connect().await;
    load(&mut c, &s, &ws).await;
    // The background task is told lost (issue 32), after the closed turn.
    let lost = format!(
        "<context source=\"tool-bash\">background bash task {task} finished [status: lost: \
         the daemon stopped while it ran]. Read its output with bash_output.</context>"
    );
    assert_eq!(
        texts(&c, &s, "user_message_chunk"),
        ["remember 42", "run it", lost.as_str()]
    );
    assert_eq!(texts(&c, &s, "agent_message_chunk"), ["Noted: 42."]);
    let fg: Vec<Value> = c
        .updates_of(&s, "tool_call_update")
        .into_iter()
        .filter(|u| u["toolCallId"] == "call_fg")
        .collect();
    assert_eq!(fg.len(), 1, "{fg:?}");
    assert_eq!(fg[0]["status"], "failed");
    assert_eq!(fg[0]["rawOutput"]["text"], "interrupted");
    // On disk: the fragment is gone, the dangling call and the turn are closed.
    let now = log_lines(&state, &s);
    assert!(!now.iter().any(|e| e["text"] == "half a li"));
    let ends: Vec<&str> = now
        .iter()
        .filter(|e| e["type"] == "turn_end")
        .filter_map(|e| e["stopReason"].as_str())
        .collect();
    assert_eq!(ends, ["end_turn", "interrupted"]);
    // The model sees the completed turn intact and the cut call answered.
    assert_eq!(
        c.prompt(&s, "what happened?").await.unwrap()["stopReason"],
        "end_turn"
    );
    for _ in 0..2 {
        model.requests.recv().await.unwrap();
    }
    let m = messages(&model.requests.recv().await.unwrap());
    let roles: Vec<&str> = m.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "user",
            "user",
            "assistant",
            "tool",
            "user",
            "user"
        ],
        "{m:?}"
    );
    // The model reads the task's end at its place, after the cut call's answer.
    assert_eq!(m[7]["content"], lost.as_str());
    assert_eq!(m[1]["content"], "remember 42");
    assert_eq!(m[2]["content"], "Noted: 42.");
    assert_eq!(m[5]["tool_calls"][0]["id"], "call_fg");
    assert_eq!(m[6]["tool_call_id"], "call_fg");
    // The task from before is lost, and its owner reads what it printed (nothing).
    assert_eq!(
        c.tool(Some(&s), "bash_output", json!({"task_id": task}))
            .await,
        (
            "(no new output)\n[status: lost: the daemon stopped while it ran]".to_string(),
            false
        )
    );
    drop(c);
    daemon.stop().await;
    assert!(processes_under(&ws).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_spill_directory_shows_unavailable_and_nothing_breaks() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), AUTO).await;
    let ws = workspace(dir.path(), "ws");
    let mut c = daemon.connect().await;
    let s = c.new_session(&ws).await;
    // The spill directory is replaced by a file: nothing can be created in it
    // (a mode change would not do: the daemon restores 0700, and root ignores it).
    let spill = daemon.state.join("spill");
    std::fs::remove_dir_all(&spill).unwrap();
    std::fs::write(&spill, "not a directory").unwrap();
    let (out, is_error) = c.bash(&s, "head -c 100000 /dev/zero | tr '\\0' a").await;
    assert!(!is_error, "{out}");
    assert_eq!(
        out,
        format!(
            "{}\n[output truncated; full output: (unavailable)]",
            "a".repeat(64000)
        )
    );
    // A background task's first read, after everything was printed, says the same.
    let ready = common::Fifo::new(dir.path(), "ready");
    let task = c
        .start_task(
            &s,
            &format!(
                "head -c 100000 /dev/zero | tr '\\0' b; echo x > {}",
                ready.path()
            ),
        )
        .await;
    ready.wait().await;
    let (read, is_error) = c
        .tool(Some(&s), "bash_output", json!({"task_id": task}))
        .await;
    assert!(!is_error, "{read}");
    assert!(
        read.contains(
            "\n[some output was dropped from memory; full output: (unavailable)]\n[status: "
        ),
        "{}",
        &read[read.len().saturating_sub(200)..]
    );
    // The daemon is fine, and small commands still work.
    assert_eq!(c.bash(&s, "echo fine").await, ("fine\n".into(), false));
    drop(c);
    daemon.stop().await;
}

/// How many tasks (threads included) run as `uid`: what RLIMIT_NPROC counts.
fn tasks_of(uid: u32) -> usize {
    let real_uid = |status: &str| -> Option<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    procs
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .flat_map(|e| {
            std::fs::read_dir(e.path().join("task"))
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter(|t| {
            std::fs::read_to_string(t.path().join("status"))
                .ok()
                .and_then(|s| real_uid(&s))
                == Some(uid)
        })
        .count()
}

/// Idle processes that hold a user at its process limit; ended when dropped,
/// whatever happened to the test.
struct Fillers(Vec<std::process::Child>);

impl Drop for Fillers {
    fn drop(&mut self) {
        for filler in &mut self.0 {
            let _ = filler.kill();
            let _ = filler.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_process_limit_a_call_fails_with_an_error_and_the_daemon_stays_up() {
    // The limit binds only a user without privileges, so the daemon and its
    // client run as `nobody`. The daemon starts with a process limit well above
    // what it needs; this test (root, to which limits do not apply) then starts
    // idle processes as `nobody` until the user is at the limit, so the daemon's
    // next fork fails with EAGAIN, and ends them to lift it again.
    const NOBODY: u32 = 65534;
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: running the daemon as another user needs root (CI runs as root)");
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let limit = (128 + 2 * cores) as libc::rlim_t;
    let dir = tempfile::tempdir().unwrap();
    nix::unistd::chown(dir.path(), Some(NOBODY.into()), Some(NOBODY.into())).unwrap();
    let as_nobody = |cmd: &mut tokio::process::Command| {
        cmd.uid(NOBODY)
            .gid(NOBODY)
            .env("HOME", dir.path())
            .current_dir(dir.path());
    };
    let daemon = SocketDaemon::start_with(dir.path(), AUTO, |cmd| {
        as_nobody(cmd);
        // SAFETY: only setrlimit (async-signal-safe) runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let value = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_NPROC, &value) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    })
    .await;
    let mut acp = common::dsh();
    acp.args(["acp", "--socket"]).arg(&daemon.socket);
    as_nobody(&mut acp);
    let (_editor, mut c) = common::spawn_client(&mut acp);
    c.initialize().await;
    let s = c.new_session(dir.path()).await;
    assert_eq!(c.bash(&s, "echo before").await, ("before\n".into(), false));

    let mut fillers = Fillers(Vec::new());
    // A margin over the limit, so other `nobody` processes ending meanwhile
    // (another test run on this machine) do not lift it.
    while tasks_of(NOBODY) < limit as usize + 32 {
        fillers.0.push(
            std::process::Command::new("sleep")
                .arg("1000")
                .uid(NOBODY)
                .gid(NOBODY)
                .spawn()
                .expect("start a filler"),
        );
    }
    // Starting the shell parser's thread may fail too, which makes the command
    // unparsable, so asked: allow it, to reach the spawn.
    c.permission_answers.push_back("allow_once");
    let (text, is_error) = c.bash(&s, "echo never").await;
    assert!(
        is_error,
        "a failed spawn is an infrastructure error: {text}"
    );
    assert!(!text.contains("never\n"), "{text}");
    assert!(text.contains("spawn failed"), "{text}");
    // A background start that cannot spawn is a task killed at once, whose
    // stderr says why (the executor's contract, E2).
    c.permission_answers.push_back("allow_once");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "bash",
            json!({"command": "echo bg", "description": "d", "run_in_background": true}),
        )
        .await;
    assert!(!is_error, "{text}");
    let task = text.strip_prefix("started background task ").unwrap();
    let (read, _) = c
        .tool(Some(&s), "bash_output", json!({"task_id": task}))
        .await;
    assert!(
        read.starts_with("[stderr]\nspawn failed: ") && read.ends_with("[status: killed]"),
        "{read}"
    );
    drop(fillers);
    assert_eq!(c.bash(&s, "echo after").await, ("after\n".into(), false));
    let status = c.request("_dsh/status", json!({})).await.unwrap();
    assert_eq!(status["pid"], daemon.pid);
    drop(c);
    let out = tokio::process::Command::new(common::daemon::BIN)
        .args(["stop", "--socket"])
        .arg(&daemon.socket)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let SocketDaemon { mut child, .. } = daemon;
    assert!(child.wait().await.unwrap().success());
}
