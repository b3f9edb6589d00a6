//! Issue 42 (part 5): the sandbox's walks of a command's roots (the layout before it
//! starts, the tripwires' check after it ends: up to `protect::MAX_DIRS` directories
//! each) never hold an async worker of the daemon. Shown by event order, not time: the
//! daemon has one worker, and each walk of one session's root is held while another
//! session's call must be answered.
//!
//! What holds a walk: the walks read directories only (issue 40), so nothing put in a
//! root holds them any more (a FIFO at `.git/commondir` did, while they opened files).
//! A build with debug assertions (the tests') has a hold for this test alone
//! (`src/exec/sandbox/held.rs`): with `DSH_DEBUG_HOLD_WALKS` naming a unix socket in a
//! root, a walk of that root connects to it from the walk's own thread and waits until
//! the test closes that connection. A walk run on the async worker would take the
//! worker with it, and the other session's call would not be answered.

use crate::common;
use std::time::Duration;

#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_a_sandbox_walk_held_up_does_not_hold_up_another_sessions_call() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let held = common::daemon::workspace(d, "held");
    let other = common::daemon::workspace(d, "other");
    // One worker: a walk on it would stop every other call of the daemon.
    let (walks, _daemon, mut c) = held_daemon(d, &held, Some(("TOKIO_WORKER_THREADS", "1"))).await;
    let held_session = c.new_session(&held).await;
    let other_session = c.new_session(&other).await;

    let arguments = serde_json::json!({"command": "echo held", "description": "d"});
    let held_call = c
        .start(
            "_dsh/tools/call",
            serde_json::json!({"sessionId": held_session, "name": "bash", "arguments": arguments}),
        )
        .await;
    for walk in ["layout", "end-of-command check"] {
        let (held_walk, _) = tokio::time::timeout(Duration::from_secs(60), walks.accept())
            .await
            .unwrap_or_else(|_| panic!("the sandbox's {walk} walk of the root never began"))
            .unwrap();
        // The walk waits: another session's call is answered meanwhile.
        let answered = tokio::time::timeout(
            Duration::from_secs(60),
            c.bash(&other_session, &format!("echo other during the {walk}")),
        )
        .await
        .unwrap_or_else(|_| {
            panic!(
                "another session's call was not answered while the sandbox's {walk} walk \
                 waited: the walk holds the daemon's async worker"
            )
        });
        assert_eq!(
            answered,
            (format!("other during the {walk}\n"), false),
            "{walk}"
        );
        assert!(
            c.early_response(held_call).is_none(),
            "the held call was answered during its {walk} walk"
        );
        drop(held_walk);
    }
    let held_answer = tokio::time::timeout(
        Duration::from_secs(60),
        c.wait_for(serde_json::json!(held_call)),
    )
    .await
    .expect("the held call did not end once its walks went on")
    .expect("an answer");
    assert_eq!(held_answer["content"][0]["text"], "held\n", "{held_answer}");
}

/// E9: a sandbox whose layout is built while another sandbox of the same root ends
/// still finds every placeholder its walk saw. The first session's background command
/// holds the root's missing protected entries (`.dsh/`, `.vscode/`, ...) with the
/// placeholders bwrap leaves on the host; the second session's walk sees them and is
/// held at its end (the tests' hold, `src/exec/sandbox/held.rs`) while the first command
/// is killed and its sandbox let go. On the old code its release removed the
/// placeholders the held walk had just guarded read-only, and the second command's
/// bwrap failed ("Can't find source path .../.dsh"): what a wrapped agent hit when its
/// editor reconnected (one agent's sandbox ending as the next one's was built, 4 to 11
/// starts in 30 failed). Now a placeholder is never removed while a layout that may
/// have seen it is still being built, and is removed once both sandboxes are gone.
/// Done three times: each round must hold.
#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_a_sandbox_built_while_another_ends_keeps_the_placeholders_its_walk_saw() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let work = common::daemon::workspace(d, "work");
    let (walks, _daemon, mut c) = held_daemon(d, &work, None).await;
    let ending = c.new_session(&work).await;
    let starting = c.new_session(&work).await;
    for round in 0..3 {
        // The first session's command runs (its sandbox made: it wrote `up`), holding
        // the root's placeholders.
        let up = work.join(format!("up-{round}"));
        nix::unistd::mkfifo(&up, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let arguments = serde_json::json!({
            "command": format!("echo up > {}; exec sleep 600", up.display()),
            "description": "d",
            "run_in_background": true,
        });
        let start = c
            .start(
                "_dsh/tools/call",
                serde_json::json!({"sessionId": ending, "name": "bash", "arguments": arguments}),
            )
            .await;
        drop(next_walk(&walks, "first command's layout").await);
        let started = c.wait_for(serde_json::json!(start)).await.expect("started");
        let text = started["content"][0]["text"].as_str().unwrap_or_default();
        let task = text
            .strip_prefix("started background task ")
            .unwrap_or_else(|| panic!("not a start: {started}"))
            .to_string();
        let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(up));
        let said = tokio::time::timeout(Duration::from_secs(60), read)
            .await
            .expect("the first command never ran")
            .unwrap()
            .unwrap();
        assert_eq!(said, "up\n");
        assert!(work.join(".dsh").is_dir(), "no placeholder was made");

        // The second session's walk has seen them, and waits.
        let call = c
            .start(
                "_dsh/tools/call",
                serde_json::json!({"sessionId": starting, "name": "bash",
                    "arguments": {"command": "echo second", "description": "d"}}),
            )
            .await;
        let held_walk = next_walk(&walks, "second command's layout").await;

        // Meanwhile the first command ends and its sandbox is let go.
        let kill = c
            .start(
                "_dsh/tools/call",
                serde_json::json!({"sessionId": ending, "name": "bash_kill",
                    "arguments": {"task_id": task}}),
            )
            .await;
        drop(next_walk(&walks, "first command's end-of-command check").await);
        c.wait_for(serde_json::json!(kill)).await.expect("killed");

        drop(held_walk);
        // Its own end-of-command check (if it ran) is let go as it comes.
        let answer = tokio::time::timeout(Duration::from_secs(60), async {
            let wait = c.wait_for(serde_json::json!(call));
            tokio::pin!(wait);
            tokio::select! {
                answer = &mut wait => answer,
                check = walks.accept() => {
                    drop(check);
                    wait.await
                }
            }
        })
        .await
        .expect("the second command never ended")
        .expect("an answer");
        assert_eq!(
            answer["content"][0]["text"], "second\n",
            "round {round}: the second sandbox did not start: {answer}"
        );
        // Both sandboxes are gone: their placeholders too (none is left behind).
        for name in [".dsh", ".claude", ".vscode", ".zed"] {
            assert!(!work.join(name).exists(), "round {round}: {name} was left");
        }
    }
}

/// A sandbox daemon in `d` (auto mode, `env` added) whose walks of `root` are held
/// (`DSH_DEBUG_HOLD_WALKS` at `root/.hold`), and where each such walk connects.
#[cfg(debug_assertions)]
async fn held_daemon(
    d: &std::path::Path,
    root: &std::path::Path,
    env: Option<(&str, &str)>,
) -> (
    tokio::net::UnixListener,
    tokio::process::Child,
    common::client::Client,
) {
    let socket = root.join(".hold");
    let walks = tokio::net::UnixListener::bind(&socket).unwrap();
    let hold = ("DSH_DEBUG_HOLD_WALKS", socket.to_str().unwrap());
    let env: Vec<(&str, &str)> = env.into_iter().chain([hold]).collect();
    let (daemon, client) = common::daemon::stdio_daemon(
        d,
        "kind = \"sandbox\"\n[permissions]\ndefault_mode = \"auto\"\n",
        &env,
    )
    .await;
    (walks, daemon, client)
}

/// The next walk of the held root, as the connection that holds it.
#[cfg(debug_assertions)]
async fn next_walk(walks: &tokio::net::UnixListener, what: &str) -> tokio::net::UnixStream {
    tokio::time::timeout(Duration::from_secs(60), walks.accept())
        .await
        .unwrap_or_else(|_| panic!("the {what} walk never began"))
        .unwrap()
        .0
}
