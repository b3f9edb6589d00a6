//! `dsh exec` (issue 45) against a real daemon and a scripted model: one turn from a
//! script, the final message or JSON lines on stdout, questions answered by `--ask`
//! (deny unless told: nobody is at a terminal), the exit status from the stop reason,
//! and Ctrl-C cancelling the turn with nothing left running.

use crate::common;
use common::cli::{Rig, exec, lines, run};
use common::daemon::{SocketDaemon, processes_under, workspace};
use common::fake_model::{FakeModel, Reply, bash_call, text};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Output, Stdio};
use tokio::io::AsyncBufReadExt;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_prints_the_final_message_and_exits_0() {
    let Rig {
        dir: _dir,
        model,
        daemon,
        ws,
    } = Rig::start(
        vec![bash_call("call_1", "echo hi"), text("It printed hi.")],
        "",
    )
    .await;
    let out = run(&daemon, &ws, &["--mode", "auto", "say hi"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Only the final message: not the text before the tool call, not the tool's output.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "It printed hi.\n");
    // The prompt on stdin works the same.
    model.push(text("From stdin."));
    let mut child = exec(&daemon, &ws, &["--mode", "auto"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use tokio::io::AsyncWriteExt;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"what now?").await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "From stdin.\n");
    // The session is the daemon's like an editor's: its history is listed for a load,
    // and once its client is gone nothing of it stays loaded (`dsh status`).
    let mut c = daemon.connect().await;
    let listed = c
        .request("session/list", serde_json::json!({"cwd": ws}))
        .await
        .unwrap();
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 2, "{listed}");
    c.status_until("the ended exec's sessions stayed loaded", |s| {
        s["sessions"].as_array().is_some_and(Vec::is_empty)
    })
    .await;
    assert!(!daemon.cli_status().contains(&*ws.to_string_lossy()));
    drop(c);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_json_lines_carry_the_tool_call_its_decision_and_the_stop_reason() {
    let Rig {
        dir: _dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(vec![bash_call("call_1", "echo hi"), text("Done.")], "").await;
    let out = run(&daemon, &ws, &["--json", "--mode", "auto", "say hi"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = lines(&out);
    assert_eq!(events[0]["type"], "session", "{events:?}");
    let session = events[0]["sessionId"].as_str().unwrap();
    let update = |kind: &str| {
        events
            .iter()
            .filter(|e| e["type"] == "update" && e["update"]["sessionUpdate"] == kind)
            .collect::<Vec<_>>()
    };
    let calls = update("tool_call");
    assert_eq!(calls.len(), 1, "{events:?}");
    assert_eq!(calls[0]["update"]["toolCallId"], "call_1");
    assert!(
        update("tool_call_update")
            .iter()
            .any(|u| u["update"]["status"] == "completed"),
        "{events:?}"
    );
    let decided: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool_call").collect();
    assert_eq!(decided.len(), 1, "{events:?}");
    assert_eq!(decided[0]["toolCallId"], "call_1");
    assert_eq!(decided[0]["tool"], "bash");
    assert_eq!(decided[0]["decision"], "allow");
    assert_eq!(decided[0]["outcome"], "ok");
    assert!(decided[0]["decidedBy"].is_string(), "{:?}", decided[0]);
    // As the audit log says, for that session.
    let audit = std::fs::read_to_string(daemon.state.join("audit.jsonl")).unwrap();
    let line: Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    assert_eq!(line["session"], session);
    assert_eq!(line["decidedBy"], decided[0]["decidedBy"]);
    // Issue 45, item 2: a single turn is a run of its own, named in its session line
    // and carried by its audit lines (`policy replay --run` replays it alone).
    let run = events[0]["runId"].as_str().unwrap();
    assert!(run.starts_with("run-"), "{run}");
    assert_eq!(line["run"], run);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "stop");
    assert_eq!(last["stopReason"], "end_turn");
    daemon.stop().await;
}

/// Nobody is at the terminal: a call the policy asks about is refused by default and does
/// not run (the canary file stays absent); `--ask allow` is what lets it run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_ask_deny_by_default_refuses_a_question_and_the_command_does_not_run() {
    let Rig {
        dir: _dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(
        vec![
            bash_call("call_1", "touch canary"),
            text("Could not."),
            bash_call("call_2", "touch canary"),
            text("Made it."),
        ],
        "",
    )
    .await;
    let canary = ws.join("canary");
    let out = run(&daemon, &ws, &["--json", "--mode", "ask", "make a canary"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!canary.exists(), "the refused command ran");
    let events = lines(&out);
    let asked: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "permission")
        .collect();
    assert_eq!(asked.len(), 1, "{events:?}");
    assert_eq!(asked[0]["answer"], "deny");
    assert_eq!(asked[0]["optionId"], "reject_once");
    let decided = events.iter().find(|e| e["type"] == "tool_call").unwrap();
    assert_eq!(decided["decision"], "deny", "{decided}");
    assert_eq!(decided["decidedBy"], "permission", "{decided}");
    assert_eq!(decided["outcome"], "vetoed", "{decided}");

    let out = run(
        &daemon,
        &ws,
        &["--mode", "ask", "--ask", "allow", "make a canary"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Made it.\n");
    assert!(canary.exists(), "--ask allow did not run it");
    assert!(stderr(&out).contains("allowed once"), "{}", stderr(&out));
    daemon.stop().await;
}

/// A model's answer cut at its length limit (`max_tokens`).
pub(crate) fn length_limit() -> Reply {
    Reply::Events(vec![
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "It went on and"}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
    ])
}

/// A turn that hits the model's length limit exits 5 (`max_tokens`), told apart from
/// an end of turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_exit_status_says_max_tokens() {
    let Rig {
        dir: _dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(vec![length_limit()], "").await;
    let out = run(&daemon, &ws, &["--json", "go on"]).await;
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert_eq!(lines(&out).last().unwrap()["stopReason"], "max_tokens");
    daemon.stop().await;
}

/// Ctrl-C during a long command sends `session/cancel`: the turn ends `cancelled`, exit
/// status 4, and the command is gone from the process table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_ctrl_c_cancels_the_turn_and_nothing_is_left_running() {
    let Rig {
        dir: _dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(vec![bash_call("call_1", "sleep 600")], "").await;
    let mut child = exec(&daemon, &ws, &["--json", "--ask", "allow", "wait a while"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    // The command runs once its call is in progress (or has a terminal).
    loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), out.next_line())
            .await
            .expect("no tool call in time")
            .unwrap()
            .expect("dsh exec ended before the call ran");
        let event: Value = serde_json::from_str(&line).unwrap();
        if event["update"]["sessionUpdate"] == "tool_call_update"
            && event["update"]["status"] == "in_progress"
        {
            break;
        }
    }
    assert!(!processes_under(&ws).is_empty(), "the sleep is not running");
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let mut rest = Vec::new();
    while let Some(line) = tokio::time::timeout(std::time::Duration::from_secs(30), out.next_line())
        .await
        .expect("dsh exec did not end in time")
        .unwrap()
    {
        rest.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    let status = child.wait().await.unwrap();
    assert_eq!(status.code(), Some(4), "{rest:?}");
    assert_eq!(rest.last().unwrap()["stopReason"], "cancelled");
    assert!(
        processes_under(&ws).is_empty(),
        "{:?}",
        processes_under(&ws)
    );
    daemon.stop().await;
}

/// With no daemon on the socket and nothing to start one with (a config that does not
/// load), the status is 1 and stderr says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_without_a_daemon_that_can_start_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "w");
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "[exec\n").unwrap();
    let out = common::dsh()
        .args(["exec", "--socket"])
        .arg(dir.path().join("run/dsh.sock"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(&config)
        .arg("--cwd")
        .arg(&ws)
        .arg("hello")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("daemon"), "{}", stderr(&out));
}

/// With no daemon on the socket, `dsh exec` starts one as `dsh acp` does (the same
/// code), and that daemon serves the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_starts_the_daemon_when_none_answers() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![text("Started and answered.")]).await;
    let ws = workspace(dir.path(), "w");
    let config = common::daemon::write_config(
        dir.path(),
        &format!("{}[daemon]\nidle_exit_secs = 60\n", model.config()),
    );
    let socket = dir.path().join("run/dsh.sock");
    assert!(!socket.exists());
    let out = common::dsh()
        .args(["exec", "--socket"])
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(&config)
        .arg("--cwd")
        .arg(&ws)
        .arg("hello")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Started and answered.\n"
    );
    // The daemon it started outlives it (as for an editor) until stopped.
    let stopped = std::process::Command::new(common::daemon::BIN)
        .args(["stop", "--socket"])
        .arg(&socket)
        .output()
        .unwrap();
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    assert!(!socket.exists());
}

/// A private tmux server: `dsh exec` on a real terminal, driven by keys.
struct Tmux {
    socket: std::path::PathBuf,
}

impl Tmux {
    fn tmux(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits (bounded) until the pane shows `text`; returns the pane.
    async fn wait_for(&self, text: &str) -> String {
        for _ in 0..600 {
            let pane = self.tmux(&["capture-pane", "-p", "-J", "-t", "t"]);
            if pane.contains(text) {
                return pane;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!(
            "the pane never showed {text:?}:\n{}",
            self.tmux(&["capture-pane", "-p", "-J", "-t", "t"])
        );
    }
}

impl Tmux {
    /// Waits (bounded) for the `echo EXIT-{name}=$?` line after `dsh exec`: its status,
    /// and the pane.
    async fn exit_of(&self, name: &str) -> (String, String) {
        let prefix = format!("EXIT-{name}=");
        for _ in 0..600 {
            let pane = self.tmux(&["capture-pane", "-p", "-J", "-t", "t"]);
            if let Some(code) = pane.lines().find_map(|l| l.strip_prefix(&prefix)) {
                return (code.trim().to_string(), pane);
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("dsh exec {name} did not end");
    }
}

impl Tmux {
    /// Waits (bounded) until the pane shows `text` `n` times.
    async fn wait_for_count(&self, text: &str, n: usize) -> String {
        for _ in 0..600 {
            let pane = self.tmux(&["capture-pane", "-p", "-J", "-t", "t"]);
            if pane.matches(text).count() >= n {
                return pane;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!(
            "the pane never showed {text:?} {n} times:\n{}",
            self.tmux(&["capture-pane", "-p", "-J", "-t", "t"])
        );
    }
}

impl Tmux {
    /// Ctrl-D at `dsh chat`'s prompt: it leaves, exit status 0.
    async fn ctrl_d_leaves_chat(&self) {
        self.tmux(&["send-keys", "-t", "t", "C-d"]);
        let (code, pane) = self.exit_of("chat").await;
        assert_eq!(code, "0", "{pane}");
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

/// Without `--ask`, on a terminal, the question goes to the person: `o` (allow once)
/// runs the command; the same question answered `r` does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_on_a_terminal_asks_the_person() {
    let Rig {
        dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(
        vec![
            bash_call("call_1", "touch refused"),
            text("Not made."),
            bash_call("call_2", "touch allowed"),
            text("Made it."),
        ],
        "",
    )
    .await;
    let tmux = Tmux {
        socket: dir.path().join("tmux.sock"),
    };
    let exec_line = |name: &str| {
        format!(
            "env -u DSH_API_KEY -u DEEPSEEK_API_KEY {} exec --socket {} --config {} --cwd {} --mode ask make-{name}; echo EXIT-{name}=$?",
            common::daemon::BIN,
            daemon.socket.display(),
            daemon.config.display(),
            ws.display(),
        )
    };
    tmux.tmux(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "200",
        "-y",
        "50",
        "sh",
    ]);
    tmux.tmux(&["send-keys", "-t", "t", &exec_line("one"), "Enter"]);
    let pane = tmux.wait_for("(anything else: reject) >").await;
    assert!(pane.contains("dsh asks: allow"), "{pane}");
    assert!(pane.contains("[o] Allow once"), "{pane}");
    tmux.tmux(&["send-keys", "-t", "t", "r", "Enter"]);
    let (code, pane) = tmux.exit_of("one").await;
    assert_eq!(code, "0", "{pane}");
    assert!(pane.contains("Not made."), "{pane}");
    assert!(!ws.join("refused").exists());

    tmux.tmux(&["send-keys", "-t", "t", "clear", "Enter"]);
    tmux.tmux(&["send-keys", "-t", "t", &exec_line("two"), "Enter"]);
    tmux.wait_for("(anything else: reject) >").await;
    tmux.tmux(&["send-keys", "-t", "t", "o", "Enter"]);
    let (code, pane) = tmux.exit_of("two").await;
    assert_eq!(code, "0", "{pane}");
    assert!(pane.contains("Made it."), "{pane}");
    assert!(ws.join("allowed").exists());
    drop(tmux);
    daemon.stop().await;
}

/// `dsh chat` on a real terminal (tmux): the agent's text, a question answered at the
/// prompt, a tool call's title and end state, Ctrl-C cancelling a long command (gone
/// from the process table), and Ctrl-C at the prompt leaving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_on_a_terminal_streams_asks_cancels_and_leaves() {
    let Rig {
        dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(
        vec![
            text("Hello there."),
            bash_call("call_1", "touch asked"),
            text("Made it."),
            bash_call("call_2", "sleep 600"),
        ],
        "",
    )
    .await;
    let tmux = Tmux {
        socket: dir.path().join("tmux.sock"),
    };
    start_chat(&tmux, &daemon, &ws, "--mode ask");
    tmux.wait_for("dsh chat: session").await;
    tmux.tmux(&["send-keys", "-t", "t", "hi", "Enter"]);
    tmux.wait_for("Hello there.").await;

    // A `!` line goes as the editor sends it: a command of the person's, no model.
    tmux.tmux(&["send-keys", "-t", "t", "!echo bang-$((6*7))", "Enter"]);
    tmux.wait_for("(anything else: reject) >").await;
    tmux.tmux(&["send-keys", "-t", "t", "o", "Enter"]);
    tmux.wait_for("bang-42").await;

    tmux.tmux(&["send-keys", "-t", "t", "make it", "Enter"]);
    tmux.wait_for_count("(anything else: reject) >", 2).await;
    tmux.tmux(&["send-keys", "-t", "t", "o", "Enter"]);
    let pane = tmux.wait_for("Made it.").await;
    assert!(pane.contains("] completed"), "{pane}");
    assert!(ws.join("asked").exists(), "{pane}");

    tmux.tmux(&["send-keys", "-t", "t", "wait", "Enter"]);
    tmux.wait_for_count("(anything else: reject) >", 3).await;
    tmux.tmux(&["send-keys", "-t", "t", "o", "Enter"]);
    for _ in 0..600 {
        if !processes_under(&ws).is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!processes_under(&ws).is_empty(), "the sleep never ran");
    tmux.tmux(&["send-keys", "-t", "t", "C-c"]);
    let pane = tmux.wait_for("(turn ended: cancelled)").await;
    assert!(
        processes_under(&ws).is_empty(),
        "{:?}\n{pane}",
        processes_under(&ws)
    );

    // Ctrl-C at the prompt leaves.
    tmux.tmux(&["send-keys", "-t", "t", "C-c"]);
    let (code, pane) = tmux.exit_of("chat").await;
    assert_eq!(code, "0", "{pane}");
    drop(tmux);
    daemon.stop().await;
}

/// The daemon going away mid-turn is an error (status 1), not an end of turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_exits_1_when_the_daemon_goes_away_mid_turn() {
    let Rig {
        dir: _dir,
        mut model,
        daemon,
        ws,
    } = Rig::start(
        vec![Reply::EventsThenHold(vec![json!(
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Thinking"}}]}
        )])],
        "",
    )
    .await;
    let child = exec(&daemon, &ws, &["--json", "think"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The turn is at the model (which holds its stream open) when the daemon dies.
    model
        .requests
        .recv()
        .await
        .expect("the turn reached the model");
    daemon.sigkill().await;
    let out = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("dsh exec did not end")
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("closed the connection"),
        "{}",
        stderr(&out)
    );
    assert!(lines(&out).iter().all(|e| e["type"] != "stop"));
}

/// `dsh chat --session ID` goes on with a session another client (here `dsh exec`)
/// started: its history first, then a new turn in it; Ctrl-D leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_goes_on_with_a_session_and_shows_its_history() {
    let Rig {
        dir,
        model,
        daemon,
        ws,
    } = Rig::start(vec![text("First answer."), text("Second answer.")], "").await;
    let out = run(&daemon, &ws, &["--json", "first question"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let session = lines(&out)[0]["sessionId"].as_str().unwrap().to_string();
    let tmux = Tmux {
        socket: dir.path().join("tmux.sock"),
    };
    start_chat(&tmux, &daemon, &ws, &format!("--session {session}"));
    let pane = tmux.wait_for("dsh chat: session").await;
    assert!(pane.contains("> first question"), "{pane}");
    assert!(pane.contains("First answer."), "{pane}");
    tmux.tmux(&["send-keys", "-t", "t", "and then?", "Enter"]);
    tmux.wait_for("Second answer.").await;
    // The model saw the history: the same session.
    let second = model.request_at(1).to_string();
    assert!(second.contains("first question"), "{second}");
    tmux.ctrl_d_leaves_chat().await;
    drop(tmux);
    daemon.stop().await;
}

/// A `!command` prompt has no agent message: `dsh exec` prints what the command gave
/// back (it printed nothing before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_prints_a_bang_commands_output() {
    let Rig {
        dir: _dir,
        model,
        daemon,
        ws,
    } = Rig::start(vec![], "").await;
    let out = run(&daemon, &ws, &["--mode", "auto", "!echo bang-$((6*7))"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("bang-42"), "{stdout:?}");
    assert!(!stdout.contains("$((6*7))"), "{stdout:?}");
    // The model was never asked.
    assert!(model.requests.is_empty());
    daemon.stop().await;
}

/// `--json`'s decisions come from the audit log: a turn whose lines went past the
/// rotation limit has its first calls in `audit.jsonl.N`, and they are reported too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_json_reads_the_rotated_audit_files_too() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![
        bash_call("call_1", "echo one"),
        bash_call("call_2", "echo two"),
        bash_call("call_3", "echo three"),
        text("Done."),
    ])
    .await;
    // Every line is longer than the limit: each goes to a file of its own.
    let config = format!(
        "{}[state]\naudit_max_bytes = 200\naudit_keep = 8\n",
        model.config()
    );
    let daemon = SocketDaemon::start(dir.path(), &config).await;
    let ws = workspace(dir.path(), "w");
    let out = run(&daemon, &ws, &["--json", "--mode", "auto", "count"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(daemon.state.join("audit.jsonl.2").exists(), "no rotation");
    let decided: Vec<Value> = lines(&out)
        .into_iter()
        .filter(|e| e["type"] == "tool_call")
        .map(|e| e["toolCallId"].clone())
        .collect();
    assert_eq!(decided, ["call_1", "call_2", "call_3"]);
    daemon.stop().await;
}

/// Starts `dsh chat` (more `args`) in a fresh tmux session `t`, run by `sh`.
fn start_chat(tmux: &Tmux, daemon: &SocketDaemon, ws: &Path, args: &str) {
    tmux.tmux(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "200",
        "-y",
        "100",
        "sh",
    ]);
    let line = format!(
        "env -u DSH_API_KEY -u DEEPSEEK_API_KEY {} chat --socket {} --config {} --cwd {} {args}; echo EXIT-chat=$?",
        common::daemon::BIN,
        daemon.socket.display(),
        daemon.config.display(),
        ws.display(),
    );
    tmux.tmux(&["send-keys", "-t", "t", &line, "Enter"]);
}

/// `dsh chat` shows a command's output while it runs: the first line is on the screen
/// while the command still waits (for a file the test makes only after seeing it), not
/// only once it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_shows_a_running_commands_output_live() {
    let Rig {
        dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(vec![], "").await;
    let tmux = Tmux {
        socket: dir.path().join("tmux.sock"),
    };
    start_chat(&tmux, &daemon, &ws, "--mode auto");
    tmux.wait_for("dsh chat: session").await;
    tmux.tmux(&[
        "send-keys",
        "-t",
        "t",
        "!echo live-$((1+1)); while [ ! -e go ]; do sleep 0.05; done; echo done-$((2+1))",
        "Enter",
    ]);
    let pane = tmux.wait_for("live-2").await;
    assert!(!pane.contains("done-3"), "{pane}");
    assert!(
        !processes_under(&ws).is_empty(),
        "the command is not running"
    );
    std::fs::write(ws.join("go"), "").unwrap();
    let pane = tmux.wait_for("] completed").await;
    assert!(pane.contains("done-3"), "{pane}");
    tmux.ctrl_d_leaves_chat().await;
    drop(tmux);
    daemon.stop().await;
}

/// The lines typed in `dsh chat` are kept in the daemon's state directory, private
/// (0600), and a later chat offers them again (Up, then Enter, runs the line again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_keeps_a_private_history_across_runs() {
    use std::os::unix::fs::MetadataExt;
    let Rig {
        dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(vec![], "").await;
    let tmux = Tmux {
        socket: dir.path().join("tmux.sock"),
    };
    start_chat(&tmux, &daemon, &ws, "--mode auto");
    tmux.wait_for("dsh chat: session").await;
    tmux.tmux(&["send-keys", "-t", "t", "!echo again-$((3*3))", "Enter"]);
    tmux.wait_for("again-9").await;
    tmux.tmux(&["send-keys", "-t", "t", "C-d"]);
    tmux.exit_of("chat").await;
    let history = daemon.state.join("chat_history.jsonl");
    let meta = std::fs::metadata(&history).expect("no history file");
    assert_eq!(meta.mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::read_to_string(&history).unwrap(),
        "\"!echo again-$((3*3))\"\n"
    );
    drop(tmux);

    let tmux = Tmux {
        socket: dir.path().join("tmux2.sock"),
    };
    start_chat(&tmux, &daemon, &ws, "--mode auto");
    tmux.wait_for("dsh chat: session").await;
    tmux.tmux(&["send-keys", "-t", "t", "Up"]);
    tmux.wait_for("> !echo again-$((3*3))").await;
    tmux.tmux(&["send-keys", "-t", "t", "Enter"]);
    tmux.wait_for("again-9").await;
    tmux.ctrl_d_leaves_chat().await;
    drop(tmux);
    daemon.stop().await;
}
