//! The daemon as subreaper (`src/exec/children.rs`), through the real binary: after a
//! command exits, the daemon tells whether anything of it is left from its own
//! children instead of a scan of `/proc`. These tests hold it to E3 where that
//! shortcut could go wrong, and check that what it adopts it also reaps.

use crate::common;

use common::daemon::{SocketDaemon, workspace};
use common::{Fifo, token, with_token};
use std::path::Path;
use std::time::{Duration, Instant};

const AUTO: &str = "[permissions]\ndefault_mode = \"auto\"\n";

/// An upper bound on waiting for the process table to change (not a timing
/// assertion: each change takes milliseconds).
const PATIENCE: Duration = Duration::from_secs(20);

/// The parent pid of `pid`, from `/proc/<pid>/stat` (field 4).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.get(stat.rfind(')')? + 2..)?
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

fn read_pid(file: &Path) -> i32 {
    std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// E3 where the shortcut is weakest: a process leaves the command's session
/// (`setsid`, detached on purpose: it stays) after starting a child that is still in
/// it (not detached: it must go). Neither is the daemon's child when the command
/// ends; only the first is, adopted. Plain leftovers (`cmd &`, a double fork,
/// `nohup`, `disown`) go too, and the session's `setsid` ones stay.
#[tokio::test]
async fn e3_a_child_left_in_the_session_by_a_process_that_detached_still_dies() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), AUTO).await;
    let mut client = daemon.connect().await;
    let ws = workspace(dir.path(), "ws");
    let session = client.new_session(&ws).await;
    let (left, detached, plain) = (token(), token(), token());
    let script = format!(
        r#"python3 -c '
import os, sys
d, left, detached = sys.argv[1:]
if os.fork() == 0:
    open(d + "/left", "w").close()
    os.execvp("sleep", ["sleep", "1000." + left])
os.setsid()
open(d + "/detached", "w").close()
os.execvp("sleep", ["sleep", "1000." + detached])
' {ws} {left} {detached} >/dev/null 2>&1 &
bash -c 'exec sleep 1000.{plain}' >/dev/null 2>&1 &
( bash -c 'exec sleep 1000.{plain}' >/dev/null 2>&1 & ) &
nohup bash -c 'exec sleep 1000.{plain}' >/dev/null 2>&1 &
bash -c 'exec sleep 1000.{plain}' >/dev/null 2>&1 & disown
while [ ! -e {ws}/left ] || [ ! -e {ws}/detached ]; do sleep 0.01; done
echo done"#,
        ws = ws.display(),
    );
    let (text, is_error) = client.bash(&session, &script).await;
    assert!(!is_error && text.contains("done"), "{text}");
    assert!(
        with_token(&left).is_empty(),
        "the child left in the command's session outlived it"
    );
    assert!(with_token(&plain).is_empty(), "a plain leftover survived");
    let kept = with_token(&detached);
    assert_eq!(kept.len(), 1, "what detached on purpose stays");
    assert_eq!(
        parent_of(kept[0]),
        Some(daemon.pid),
        "the detached process was adopted by the daemon"
    );
    // Shutdown ends it (it carries the command's marker).
    drop(client);
    let mut daemon = daemon;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    tokio::time::timeout(PATIENCE, daemon.child.wait())
        .await
        .expect("the daemon stops")
        .unwrap();
    assert!(
        with_token(&detached).is_empty(),
        "the detached process outlived the daemon's shutdown"
    );
}

/// What the daemon adopts, it reaps: a process that detached on purpose and ends
/// long after its command must not stay behind as the daemon's zombie. Background
/// tasks and hooks (children someone waits for) are never taken from their owner.
#[tokio::test]
async fn an_adopted_process_that_ends_later_is_reaped_and_owned_children_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(
        dir.path(),
        "[permissions]\ndefault_mode = \"auto\"\n\
         [[hooks.command]]\nargv = [\"/bin/sh\", \"-c\", \"cat >/dev/null; exit 0\"]\nname = \"pass\"\n",
    )
    .await;
    let mut client = daemon.connect().await;
    let ws = workspace(dir.path(), "ws");
    let session = client.new_session(&ws).await;
    let go = Fifo::new(&ws, "go");
    let pid_file = ws.join("pid");
    let script = format!(
        "setsid sh -c 'echo $$ > {p}.tmp; mv {p}.tmp {p}; read x < {go}; exit 0' >/dev/null 2>&1 &
         while [ ! -e {p} ]; do sleep 0.01; done; echo started",
        p = pid_file.display(),
        go = go.path(),
    );
    let (text, is_error) = client.bash(&session, &script).await;
    assert!(!is_error && text.contains("started"), "{text}");
    let pid = read_pid(&pid_file);
    assert_eq!(parent_of(pid), Some(daemon.pid), "adopted by the daemon");

    // Meanwhile commands and background tasks come and go, each through the hook
    // (a child of the daemon's own, waited for by its runner): none of them fails
    // because the reaper took its process.
    let task = client
        .start_task(&session, "read x < /dev/stdin; echo bg")
        .await;
    for n in 0..20 {
        let (text, is_error) = client.bash(&session, &format!("echo call-{n}")).await;
        assert!(!is_error && text.contains(&format!("call-{n}")), "{text}");
    }
    go.release().await;
    let deadline = Instant::now() + PATIENCE;
    while std::fs::metadata(format!("/proc/{pid}")).is_ok() {
        assert!(
            Instant::now() < deadline,
            "the adopted process is still in the table (state: {:?})",
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The background task (its stdin is /dev/null: it ends at once) reports its own
    // exit, which its supervisor learns only by reaping it itself.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (text, is_error) = client
            .tool(
                Some(&session),
                "bash_output",
                serde_json::json!({"task_id": task}),
            )
            .await;
        assert!(!is_error, "{text}");
        if text.contains("[status: completed, exit code: 0]") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the task never completed: {text}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The shortcut is taken: with nothing of any command left, each exit skips the scan
/// (`_dsh/status` counts them); while a process detached on purpose runs (the
/// daemon's unbooked child), exits take the scan, as documented.
#[tokio::test]
async fn exits_skip_the_scan_unless_an_unbooked_child_runs() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), AUTO).await;
    let mut client = daemon.connect().await;
    let ws = workspace(dir.path(), "ws");
    let session = client.new_session(&ws).await;
    for _ in 0..3 {
        let (text, is_error) = client.bash(&session, "true").await;
        assert!(!is_error, "{text}");
    }
    assert_eq!(exit_checks(&mut client).await, (true, 3, 0));

    let token = token();
    let started = ws.join("started");
    let detach = format!(
        "setsid bash -c 'touch {s}; exec sleep 1000.{token}' >/dev/null 2>&1 &
         while [ ! -e {s} ]; do sleep 0.01; done",
        s = started.display()
    );
    let (text, is_error) = client.bash(&session, &detach).await;
    assert!(!is_error, "{text}");
    let (text, is_error) = client.bash(&session, "true").await;
    assert!(!is_error, "{text}");
    assert_eq!(exit_checks(&mut client).await, (true, 3, 2));
    let printed = daemon.cli_status();
    assert!(
        printed.contains("3 cleanup scan(s) skipped, 2 run"),
        "`dsh status` shows the counts: {printed}"
    );
    assert_eq!(
        with_token(&token).len(),
        1,
        "what detached on purpose runs on"
    );
    client
        .request("session/delete", serde_json::json!({"sessionId": session}))
        .await
        .unwrap();
    assert!(
        with_token(&token).is_empty(),
        "deleting the session ends it"
    );
}

/// `_dsh/status`'s `exitChecks`: (adopting, skipped, scanned).
async fn exit_checks(client: &mut common::client::Client) -> (bool, u64, u64) {
    let status = client
        .request("_dsh/status", serde_json::json!({}))
        .await
        .unwrap();
    let c = &status["exitChecks"];
    (
        c["adopting"].as_bool().unwrap(),
        c["skipped"].as_u64().unwrap(),
        c["scanned"].as_u64().unwrap(),
    )
}
