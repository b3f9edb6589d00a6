//! Issue 42 (part 5): the sandbox's walks of a command's roots (the layout before it
//! starts, the tripwires' check after it ends: up to `protect::MAX_DIRS` directories
//! each) never hold an async worker of the daemon. Shown by event order, not time: the
//! walk is held inside a root (its `.git/commondir` is a FIFO, read by the walk, whose
//! writer is this test), the daemon has one worker, and another session's call must be
//! answered while the walk waits.

use crate::common;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

// Ignored, not deleted: the walk now opens the files it reads with O_NONBLOCK and
// reads regular files only (issue 40's hardening), so a FIFO no longer holds it up and
// the test's event order is gone (under load the walk can open and close the FIFO
// before the writer thread opens it, and the test waits for an open that never
// comes). It needs another way to hold a walk before it proves anything again.
#[ignore = "a FIFO no longer holds the walk (it reads with O_NONBLOCK): needs another way to hold it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_a_sandbox_walk_held_up_does_not_hold_up_another_sessions_call() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let held = common::daemon::workspace(d, "held");
    std::fs::create_dir_all(held.join(".git")).unwrap();
    let fifo = held.join(".git/commondir");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let other = common::daemon::workspace(d, "other");
    // One worker: a walk on it would stop every other call of the daemon.
    let (_daemon, mut c) = common::daemon::stdio_daemon(
        d,
        "kind = \"sandbox\"\n[permissions]\ndefault_mode = \"auto\"\n",
        &[("TOKIO_WORKER_THREADS", "1")],
    )
    .await;
    let held_session = c.new_session(&held).await;
    let other_session = c.new_session(&other).await;

    // The FIFO's writer: its open returns once the walk opened the FIFO to read it
    // (the event the test waits for); the walk then waits for a line until `go`.
    // Later readers (the check after the command) get a line at once until `stop`.
    let (opened_tx, opened_rx) = tokio::sync::oneshot::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (fifo, stop) = (fifo.clone(), stop.clone());
        std::thread::spawn(move || {
            let Ok(mut first) = std::fs::OpenOptions::new().write(true).open(&fifo) else {
                return;
            };
            let _ = opened_tx.send(());
            let _ = go_rx.recv();
            let _ = first.write_all(b"x\n");
            drop(first);
            while !stop.load(Ordering::SeqCst) {
                match std::fs::OpenOptions::new().write(true).open(&fifo) {
                    Ok(mut next) => drop(next.write_all(b"x\n")),
                    Err(_) => break,
                }
            }
        })
    };
    // Ends the writer: `go` for the first reader, then `stop` for the rest.
    let end_writer = |go_tx: std::sync::mpsc::Sender<()>| {
        let _ = go_tx.send(());
        stop.store(true, Ordering::SeqCst);
        // A writer waiting in open() for a reader gets this one, then sees `stop`.
        use std::os::unix::fs::OpenOptionsExt;
        let unblock = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo);
        let _ = writer.join();
        drop(unblock);
    };

    let arguments = serde_json::json!({"command": "echo held", "description": "d"});
    let held_call = c
        .start(
            "_dsh/tools/call",
            serde_json::json!({"sessionId": held_session, "name": "bash", "arguments": arguments}),
        )
        .await;
    if tokio::time::timeout(Duration::from_secs(60), opened_rx)
        .await
        .is_err()
    {
        end_writer(go_tx);
        panic!("the sandbox's layout walk never read the root's .git/commondir");
    }
    // The walk waits in the FIFO: another session's call is answered meanwhile.
    let answered = tokio::time::timeout(
        Duration::from_secs(60),
        c.bash(&other_session, "echo other"),
    )
    .await;
    // The walk goes on (and the check after the command gets its lines).
    let _ = go_tx.send(());
    let Ok((out, is_error)) = answered else {
        end_writer(go_tx);
        panic!(
            "another session's call was not answered while the sandbox's walk waited: \
             the walk holds the daemon's async worker"
        );
    };
    assert!(!is_error && out == "other\n", "{out}");
    let held_answer = tokio::time::timeout(
        Duration::from_secs(60),
        c.wait_for(serde_json::json!(held_call)),
    )
    .await;
    end_writer(go_tx);
    let held_answer = held_answer
        .expect("the held call did not end once its walk went on")
        .expect("an answer");
    assert_eq!(held_answer["content"][0]["text"], "held\n", "{held_answer}");
}
