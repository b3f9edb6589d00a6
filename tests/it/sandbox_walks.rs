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
    let socket = held.join(".hold");
    let walks = tokio::net::UnixListener::bind(&socket).unwrap();
    let other = common::daemon::workspace(d, "other");
    // One worker: a walk on it would stop every other call of the daemon.
    let (_daemon, mut c) = common::daemon::stdio_daemon(
        d,
        "kind = \"sandbox\"\n[permissions]\ndefault_mode = \"auto\"\n",
        &[
            ("TOKIO_WORKER_THREADS", "1"),
            ("DSH_DEBUG_HOLD_WALKS", socket.to_str().unwrap()),
        ],
    )
    .await;
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
