//! `dsh upgrade` (src/upgrade.rs): the daemon replaces its program with the binary on
//! disk in the same process. Each test starts the daemon from a copy of the binary, so
//! it can put something else at that path (a program that refuses, one that fails after
//! it started), and drives it as an editor does, through `dsh acp`.

use crate::common::client::Client;
use crate::common::daemon::{BIN, SocketDaemon, workspace};
use crate::common::{self};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::process::{Child, Command};

/// A daemon started from `dir/bin/dsh`, a copy of the binary under test, and that path.
struct Copied {
    daemon: SocketDaemon,
    program: PathBuf,
}

impl std::ops::Deref for Copied {
    type Target = SocketDaemon;

    fn deref(&self) -> &SocketDaemon {
        &self.daemon
    }
}

async fn start_copied(dir: &Path, extra_config: &str) -> Copied {
    Copied {
        daemon: SocketDaemon::start_copy(dir, extra_config).await,
        program: dir.join("bin/dsh"),
    }
}

impl Copied {
    /// `dsh acp` as an editor starts it (its pipes handed over to the daemon).
    async fn editor(&self) -> (Child, Client) {
        let mut cmd = common::launcher(&self.socket);
        let (child, mut client) = common::spawn_client(&mut cmd);
        client.initialize().await;
        (child, client)
    }

    /// `dsh upgrade` run now, its output when it ends.
    fn upgrade(&self) -> tokio::task::JoinHandle<std::process::Output> {
        let mut cmd = Command::new(BIN);
        cmd.args(["upgrade", "--socket"]).arg(&self.socket);
        tokio::spawn(async move { cmd.output().await.expect("run dsh upgrade") })
    }

    /// Puts `text` at the program's path as an executable script (a rename: the file
    /// the daemon runs is busy).
    fn replace_program(&self, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        let next = self.program.with_extension("next");
        std::fs::write(&next, text).unwrap();
        std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&next, &self.program).unwrap();
    }

    /// Waits until the daemon's log says `needle`.
    async fn log_says(&self, needle: &str) {
        let log = self.state.join("daemon.log");
        for _ in 0..1500 {
            if std::fs::read_to_string(&log).is_ok_and(|t| t.contains(needle)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the daemon's log never said {needle:?}");
    }
}

fn prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

fn text_of(output: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The editor's connection through `dsh acp`, its session, a turn waiting on a
/// permission question and a prompt sent during the hand-over all live through an
/// upgrade: the question is answered and the turn finishes, the prompt is answered by
/// the next program, and the launcher never reconnects (it is the same process, and
/// the daemon the same pid).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_keeps_the_editor_connection_its_session_and_the_turn_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let d = start_copied(dir.path(), "").await;
    let ws = workspace(dir.path(), "ws");
    let (mut launcher, mut c) = d.editor().await;
    let s = c.new_session(&ws).await;

    // When the daemon's program started, as `dsh acp` reads it to tell whether the
    // binary on disk is newer: the upgrade keeps the process, so its /proc start stays.
    let started = || {
        let text = std::fs::read_to_string(d.socket.with_extension("started")).unwrap();
        let (pid, ms) = text.trim().split_once(' ').unwrap();
        (pid.parse::<i32>().unwrap(), ms.parse::<u64>().unwrap())
    };
    let before = started();
    assert_eq!(before.0, d.pid);

    c.ignore_permissions = true;
    let first = c
        .start("session/prompt", prompt(&s, "!echo one > one.txt"))
        .await;
    let question = c.wait_permission_request().await;
    let upgrade = d.upgrade();
    d.log_says("upgrade: freezing every connection").await;
    // Sent while the daemon hands over: it waits for the next program.
    let second = c
        .start("session/prompt", prompt(&s, "!echo two > two.txt"))
        .await;
    c.ignore_permissions = false;
    c.permission_answers.push_back("allow_once");
    c.send(json!({"jsonrpc": "2.0", "id": question["id"],
                  "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}))
        .await;
    let first = c.wait_for(json!(first)).await.unwrap();
    assert_eq!(first["stopReason"], "end_turn");

    let upgraded = upgrade.await.unwrap();
    assert!(upgraded.status.success(), "{}", text_of(&upgraded));
    assert!(
        text_of(&upgraded).contains("upgraded: dsh"),
        "{}",
        text_of(&upgraded)
    );
    let second = c.wait_for(json!(second)).await.unwrap();
    assert_eq!(second["stopReason"], "end_turn");
    assert_eq!(
        std::fs::read_to_string(ws.join("one.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("two.txt")).unwrap(),
        "two\n"
    );

    assert!(common::alive(d.pid), "the same process serves on");
    let after = started();
    assert!(
        after.0 == d.pid && after.1 > before.1,
        "{before:?} {after:?}"
    );
    assert!(
        launcher.try_wait().unwrap().is_none(),
        "the editor's launcher never noticed"
    );
    // The next program says so; the session is still this connection's alone.
    let stream = tokio::net::UnixStream::connect(&d.socket).await.unwrap();
    let (r, w) = stream.into_split();
    let mut other = Client::new(r, w);
    other.initialize().await;
    let outcome = other
        .request("_dsh/upgrade/outcome", json!({}))
        .await
        .unwrap();
    assert_eq!(outcome["outcome"], "upgraded", "{outcome}");
    let stolen = other
        .request(
            "session/load",
            json!({"sessionId": s, "cwd": ws, "mcpServers": []}),
        )
        .await;
    assert!(stolen.is_err(), "{stolen:?}");
    let third = c.prompt(&s, "!echo three").await.unwrap();
    assert_eq!(third["stopReason"], "end_turn");
}

/// The integers among a `bash_output` text's lines (the ticker's sequence numbers).
fn numbers(text: &str) -> Vec<u64> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// Reads task `id`'s new output until its sequence passes `past`.
async fn read_past(c: &mut Client, s: &str, id: &str, seen: &mut Vec<u64>, past: u64) {
    for _ in 0..1500 {
        let (text, is_error) = c.tool(Some(s), "bash_output", json!({"task_id": id})).await;
        assert!(!is_error, "{text}");
        seen.extend(numbers(&text));
        if seen.last().is_some_and(|n| *n > past) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{id} never printed past {past}: {seen:?}");
}

/// Running background tasks live through an upgrade under the local executor: the new
/// program supervises the same processes (the daemon's pid is unchanged), reads their
/// pipes from where the old one stopped (a ticker printing every 10 ms: its sequence,
/// read before and after, has no gap and no repeat), and kills and reports them as its
/// own (T7, T8).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_tasks_live_through_an_upgrade_with_no_output_lost_or_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let d = start_copied(dir.path(), "[permissions]\ndefault_mode = \"auto\"\n").await;
    let ws = workspace(dir.path(), "ws");
    let (_launcher, mut c) = d.editor().await;
    let s = c.new_session(&ws).await;
    // Whatever the policy asks about these, the person allows.
    c.permission_answers.extend(["allow_once"; 4]);
    let ticker = c
        .start_task(
            &s,
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); echo $i; sleep 0.01; done",
        )
        .await;
    let token = common::token();
    let sleeper = c.start_task(&s, &format!("sleep 1000.{token}")).await;
    let mut seen = Vec::new();
    read_past(&mut c, &s, &ticker, &mut seen, 5).await;

    let upgraded = d.upgrade().await.unwrap();
    assert!(upgraded.status.success(), "{}", text_of(&upgraded));
    let last = *seen.last().unwrap();
    read_past(&mut c, &s, &ticker, &mut seen, last + 30).await;
    let expected: Vec<u64> = (1..=*seen.last().unwrap()).collect();
    assert_eq!(
        seen, expected,
        "every line once, in order, across the upgrade"
    );

    let status = c.request("_dsh/status", json!({})).await.unwrap();
    let running: Vec<&str> = status["runningTasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert!(
        running.contains(&ticker.as_str()) && running.contains(&sleeper.as_str()),
        "{status}"
    );
    assert_eq!(common::with_token(&token).len(), 1, "the sleeper runs on");
    let (killed, _) = c
        .tool(Some(&s), "bash_kill", json!({"task_id": sleeper}))
        .await;
    assert!(killed.contains("killed"), "{killed}");
    assert!(
        common::with_token(&token).is_empty(),
        "the new program ends what it took over"
    );
    let (text, _) = c
        .tool(Some(&s), "bash_kill", json!({"task_id": ticker}))
        .await;
    assert!(text.contains("killed"), "{text}");
}

/// An executor that cannot carry running tasks (the sandbox: its proxy and tripwires
/// are the old program's) refuses the upgrade while one runs, naming it, before
/// anything is frozen; the task runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_is_refused_while_a_task_runs_that_the_executor_cannot_carry() {
    let dir = tempfile::tempdir().unwrap();
    let d = start_copied(
        dir.path(),
        "kind = \"sandbox\"\n[permissions]\ndefault_mode = \"auto\"\n",
    )
    .await;
    let ws = workspace(dir.path(), "ws");
    let (_launcher, mut c) = d.editor().await;
    let s = c.new_session(&ws).await;
    let task = c.start_task(&s, "sleep 300").await;
    let refused = d.upgrade().await.unwrap();
    assert!(!refused.status.success());
    let said = text_of(&refused);
    assert!(
        said.contains("upgrade refused") && said.contains(&task) && said.contains("sandbox"),
        "{said}"
    );
    let status = c.request("_dsh/status", json!({})).await.unwrap();
    assert_eq!(
        status["runningTasks"][0]["taskId"],
        task.as_str(),
        "{status}"
    );
    let after = c.prompt(&s, "!echo still").await.unwrap();
    assert_eq!(after["stopReason"], "end_turn");
}

/// Issue 43 item 4: under the sandbox's pair (`Escalating`) a task the person let out of
/// the sandbox runs on the local executor and is carried over an upgrade as that
/// executor's tasks are, while one inside the sandbox still refuses it. Control first:
/// with both running, the upgrade is refused naming the sandboxed task alone; once that
/// one is killed, the upgrade goes through, and the new program reads the let-out
/// ticker's output on with no gap or repeat, reports it as running and ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_let_out_of_the_sandbox_lives_through_an_upgrade_one_inside_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = start_copied(
        dir.path(),
        "kind = \"sandbox\"\n[permissions]\ndefault_mode = \"auto\"\n",
    )
    .await;
    let ws = workspace(dir.path(), "ws");
    let (_launcher, mut c) = d.editor().await;
    let s = c.new_session(&ws).await;
    let (in_token, out_token) = (common::token(), common::token());
    let inside = c
        .start_task(&s, &format!("exec sleep 1000.{in_token}"))
        .await;
    c.permission_answers.push_back("allow_once");
    let ticker = format!(
        "sleep 1000.{out_token} & i=0; while [ $i -lt 100000 ]; do i=$((i+1)); echo $i; sleep 0.01; done"
    );
    let (text, is_error) = c
        .tool(
            Some(&s),
            "bash",
            json!({"command": ticker, "description": "tick", "run_in_background": true,
                   "sandbox": "off", "justification": "it ticks outside the sandbox"}),
        )
        .await;
    assert!(!is_error, "{text}");
    let outside = text
        .strip_prefix("started background task ")
        .expect(&text)
        .to_string();
    let mut seen = Vec::new();
    read_past(&mut c, &s, &outside, &mut seen, 5).await;

    let refused = d.upgrade().await.unwrap();
    assert!(!refused.status.success());
    let said = text_of(&refused);
    assert!(
        said.contains("upgrade refused")
            && said.contains(&format!(
                "1 background task(s) still run ({inside}) and the sandbox executor"
            )),
        "{said}"
    );
    let (killed, _) = c
        .tool(Some(&s), "bash_kill", json!({"task_id": inside}))
        .await;
    assert!(killed.contains("killed"), "{killed}");

    let upgraded = d.upgrade().await.unwrap();
    assert!(upgraded.status.success(), "{}", text_of(&upgraded));
    let last = *seen.last().unwrap();
    read_past(&mut c, &s, &outside, &mut seen, last + 30).await;
    let expected: Vec<u64> = (1..=*seen.last().unwrap()).collect();
    assert_eq!(
        seen, expected,
        "every line once, in order, across the upgrade"
    );
    let status = c.request("_dsh/status", json!({})).await.unwrap();
    assert_eq!(
        status["runningTasks"][0]["taskId"],
        outside.as_str(),
        "{status}"
    );
    assert_eq!(
        common::with_token(&out_token).len(),
        1,
        "the ticker runs on"
    );
    let (killed, _) = c
        .tool(Some(&s), "bash_kill", json!({"task_id": outside}))
        .await;
    assert!(killed.contains("killed"), "{killed}");
    assert!(
        common::with_token(&out_token).is_empty(),
        "the new program ends what it took over"
    );
}

/// A program on disk that cannot take over (here, not a dsh at all) is found out by the
/// check before anything is frozen: refused with what it said, the daemon unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_cannot_take_over_is_refused_before_anything_freezes() {
    let dir = tempfile::tempdir().unwrap();
    let d = start_copied(dir.path(), "").await;
    let ws = workspace(dir.path(), "ws");
    let (_launcher, mut c) = d.editor().await;
    let s = c.new_session(&ws).await;
    d.replace_program("#!/bin/sh\necho 'not a dsh' >&2\nexit 1\n");
    let refused = d.upgrade().await.unwrap();
    assert!(!refused.status.success());
    let said = text_of(&refused);
    assert!(
        said.contains("cannot take over") && said.contains("not a dsh"),
        "{said}"
    );
    let after = c.prompt(&s, "!echo still").await.unwrap();
    assert_eq!(after["stopReason"], "end_turn");
}

/// The new program fails after the `execve` (here its config became unreadable between
/// the check and the start): it executes the old program again with everything, which
/// serves on with the config that was in force. The editor's connection, its session and
/// `dsh upgrade`'s own question all come through, and the failure is told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_program_that_fails_after_it_started_gives_everything_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = start_copied(dir.path(), "").await;
    let ws = workspace(dir.path(), "ws");
    let (mut launcher, mut c) = d.editor().await;
    let s = c.new_session(&ws).await;
    d.replace_program(&format!(
        "#!/bin/sh\ncase \" $* \" in *\" --handover-check \"*) exec {bin} \"$@\";; esac\n\
         printf 'this is [not toml' > {config}\nexec {bin} \"$@\"\n",
        bin = BIN,
        config = d.config.display()
    ));
    let failed = d.upgrade().await.unwrap();
    assert!(!failed.status.success());
    let said = text_of(&failed);
    assert!(
        said.contains("failed and the daemon serves on as it was"),
        "{said}"
    );
    assert!(common::alive(d.pid));
    assert!(launcher.try_wait().unwrap().is_none());
    c.permission_answers.push_back("allow_once");
    let after = c.prompt(&s, "!echo after > after.txt").await.unwrap();
    assert_eq!(after["stopReason"], "end_turn");
    assert_eq!(
        std::fs::read_to_string(ws.join("after.txt")).unwrap(),
        "after\n"
    );
}

/// The MCP servers an editor passed are started again by the next program (their
/// processes are not carried), and the old ones are gone: the session's tools answer
/// from a new process after the upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_servers_are_started_again_by_the_next_program() {
    let dir = tempfile::tempdir().unwrap();
    let d = start_copied(dir.path(), "[permissions]\ndefault_mode = \"auto\"\n").await;
    let ws = workspace(dir.path(), "ws");
    let (_launcher, mut c) = d.editor().await;
    let servers = json!([{"name": "fx", "command": common::mcp_fixture(), "args": [], "env": []}]);
    let s = c
        .request("session/new", json!({"cwd": ws, "mcpServers": servers}))
        .await
        .unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    c.permission_answers.extend(["allow_once"; 4]);
    let whoami = |text: String| -> i32 { text.rsplit(' ').next().unwrap().parse().unwrap() };
    let (before, is_error) = c.tool(Some(&s), "mcp__fx__whoami", json!({})).await;
    assert!(!is_error, "{before}");
    let before = whoami(before);

    let upgraded = d.upgrade().await.unwrap();
    assert!(upgraded.status.success(), "{}", text_of(&upgraded));
    let (after, is_error) = c.tool(Some(&s), "mcp__fx__whoami", json!({})).await;
    assert!(!is_error, "{after}");
    let after = whoami(after);
    assert_ne!(before, after, "a server of the next program's own");
    for _ in 0..500 {
        if !common::alive(before) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the old program's MCP server (pid {before}) outlived the upgrade");
}

/// Waits (bounded) until `done` holds; `what` names it in the failure.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..1500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("never: {what}");
}

/// Issue 42, part 1: an upgrade never stalls the daemon. A `_dsh/tools/call` whose command
/// would run for ten minutes is cancelled at the end of the drain (every request in
/// flight is, not only turns), and a `dsh acp` started while the daemon hands over is
/// served: both are answered within a bound far below the command's length (and below
/// the launcher's own 30 s hand-over limit), and the command is gone from the process
/// table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_cancels_a_stuck_tool_call_and_serves_an_editor_arriving_during_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = start_copied(
        dir.path(),
        "[permissions]\ndefault_mode = \"auto\"\n[daemon]\nupgrade_drain_secs = 2\n",
    )
    .await;
    let ws = workspace(dir.path(), "ws");
    let (_launcher, mut c) = d.editor().await;
    let s = c.new_session(&ws).await;
    c.permission_answers.extend(["allow_once"; 4]);
    let token = common::token();
    let stuck = c
        .start(
            "_dsh/tools/call",
            json!({"sessionId": s, "name": "bash",
                   "arguments": {"command": format!("sleep 1000.{token}"), "description": "stuck"}}),
        )
        .await;
    // Read (answering any permission question) until the command runs.
    tokio::select! {
        answer = c.wait_for(json!(stuck)) => panic!("the command ended early: {answer:?}"),
        () = until("the stuck command runs", || common::with_token(&token).len() == 1) => {}
    }

    let upgrade = d.upgrade();
    d.log_says("upgrade: freezing every connection").await;
    let bound = Duration::from_secs(25);
    let (_late_launcher, mut late) = tokio::time::timeout(bound, d.editor())
        .await
        .expect("an editor started during the upgrade is answered within the bound");
    let answer = tokio::time::timeout(bound, c.wait_for(json!(stuck)))
        .await
        .expect("the stuck tool call is answered within the bound");
    let upgraded = tokio::time::timeout(bound, upgrade)
        .await
        .expect("dsh upgrade ends within the bound")
        .unwrap();
    assert!(upgraded.status.success(), "{}", text_of(&upgraded));
    until("the stuck command is gone", || {
        common::with_token(&token).is_empty()
    })
    .await;
    assert!(common::alive(d.pid), "the same process serves on");
    // Answered as a call that was ended: its command aborted.
    let answer = answer.unwrap();
    assert_eq!(answer["isError"], true, "{answer}");
    assert!(answer.to_string().contains("aborted"), "{answer}");
    let s2 = late.new_session(&ws).await;
    late.permission_answers.extend(["allow_once"; 2]);
    let done = late.prompt(&s2, "!echo late").await.unwrap();
    assert_eq!(done["stopReason"], "end_turn");
    let done = c.prompt(&s, "!echo early").await.unwrap();
    assert_eq!(done["stopReason"], "end_turn");
}

/// Issue 42, part 1: the signal streams are made once, so a SIGTERM that arrives while
/// the daemon hands over (here: in a long drain, a turn waiting on a permission
/// question) is not lost: the daemon stops, ending the connection, its launcher and
/// `dsh upgrade`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigterm_during_the_hand_over_stops_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let d = start_copied(dir.path(), "[daemon]\nupgrade_drain_secs = 600\n").await;
    let ws = workspace(dir.path(), "ws");
    let (mut launcher, mut c) = d.editor().await;
    let s = c.new_session(&ws).await;
    c.ignore_permissions = true;
    let _turn = c
        .start("session/prompt", prompt(&s, "!echo one > one.txt"))
        .await;
    c.wait_permission_request().await;
    let upgrade = d.upgrade();
    d.log_says("upgrade: freezing every connection").await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(d.pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    until("the daemon stopped after SIGTERM", || !common::alive(d.pid)).await;
    let upgraded = tokio::time::timeout(Duration::from_secs(30), upgrade)
        .await
        .expect("dsh upgrade ends with the daemon")
        .unwrap();
    assert!(!upgraded.status.success(), "{}", text_of(&upgraded));
    let ended = tokio::time::timeout(Duration::from_secs(30), launcher.wait())
        .await
        .expect("the launcher ends with the daemon");
    assert!(ended.is_ok());
    assert!(
        !ws.join("one.txt").exists(),
        "the turn never ran its command"
    );
}

/// Issue 42, part 1: a daemon upgraded twice in a row (the second by the program the
/// first started) keeps the editor's connection and session through both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_upgraded_twice_in_a_row_keeps_its_editor() {
    let dir = tempfile::tempdir().unwrap();
    let d = start_copied(dir.path(), "").await;
    let ws = workspace(dir.path(), "ws");
    let (mut launcher, mut c) = d.editor().await;
    let s = c.new_session(&ws).await;
    for round in ["first", "second"] {
        let upgraded = d.upgrade().await.unwrap();
        assert!(
            upgraded.status.success() && text_of(&upgraded).contains("upgraded: dsh"),
            "{round}: {}",
            text_of(&upgraded)
        );
        c.permission_answers.push_back("allow_once");
        let file = format!("{round}.txt");
        let done = c
            .prompt(&s, &format!("!echo {round} > {file}"))
            .await
            .unwrap();
        assert_eq!(done["stopReason"], "end_turn", "{round}");
        assert_eq!(
            std::fs::read_to_string(ws.join(&file)).unwrap(),
            format!("{round}\n")
        );
    }
    assert!(common::alive(d.pid), "the same process serves on");
    assert!(launcher.try_wait().unwrap().is_none());
}

/// Issue 42, part 4: after a roll back the program runs from a file that is gone (the
/// path it was executed by reads `.../dsh (deleted)`). The program's path is resolved
/// once, at the first start, and carried across every hand-over: `initialize` still
/// offers the real path as the terminal-auth command, and once a good program is at
/// that path again, the next `dsh upgrade` takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_after_a_roll_back_finds_the_program_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let d = start_copied(dir.path(), "").await;
    let ws = workspace(dir.path(), "ws");
    let (_launcher, mut c) = d.editor().await;
    let s = c.new_session(&ws).await;
    d.replace_program(&format!(
        "#!/bin/sh\ncase \" $* \" in *\" --handover-check \"*) exec {bin} \"$@\";; esac\n\
         printf 'this is [not toml' > {config}\nexec {bin} \"$@\"\n",
        bin = BIN,
        config = d.config.display()
    ));
    let failed = d.upgrade().await.unwrap();
    assert!(!failed.status.success(), "{}", text_of(&failed));
    // The config and the program are good again.
    common::daemon::write_config(dir.path(), "");
    let next = d.program.with_extension("next");
    std::fs::copy(BIN, &next).unwrap();
    std::fs::rename(&next, &d.program).unwrap();

    let mut other = {
        let stream = tokio::net::UnixStream::connect(&d.socket).await.unwrap();
        let (r, w) = stream.into_split();
        Client::new(r, w)
    };
    let init = other.initialize().await.to_string();
    assert!(!init.contains("(deleted)"), "{init}");
    let methods = serde_json::from_str::<Value>(&init).unwrap()["authMethods"].clone();
    let command = methods
        .as_array()
        .unwrap()
        .iter()
        .find_map(|m| m["_meta"]["terminal-auth"]["command"].as_str())
        .map(str::to_string);
    assert_eq!(
        command.as_deref(),
        Some(d.program.to_str().unwrap()),
        "{methods}"
    );

    let upgraded = d.upgrade().await.unwrap();
    assert!(
        upgraded.status.success() && text_of(&upgraded).contains("upgraded: dsh"),
        "{}",
        text_of(&upgraded)
    );
    c.permission_answers.push_back("allow_once");
    let done = c.prompt(&s, "!echo after").await.unwrap();
    assert_eq!(done["stopReason"], "end_turn");
}
