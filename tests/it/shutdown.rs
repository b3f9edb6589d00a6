//! Shutdown (issue 18): one trigger, one ordered stop, for both ways of serving. Whatever
//! asks the daemon to stop (`_dsh/stop`, SIGTERM, the editor closing the stdio pipe,
//! `dsh stop` on the socket), it exits 0 and leaves no task behind: the process table
//! is read to prove it (E3), not the daemon's word.

use crate::common::{
    self,
    client::Client,
    daemon::{SocketDaemon, stdio_daemon},
    token, with_token,
};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const AUTO: &str = "[permissions]\ndefault_mode = \"auto\"\n";

/// How long a stopping daemon may take before the test calls it hung (an upper bound
/// against hanging forever, not a timing assertion: a stop takes milliseconds).
const HUNG: Duration = Duration::from_secs(30);

/// `dsh serve --stdio` with state in `dir`, initialized, with a session that runs a
/// background `sleep 1000.<token>`; the token, once the task is in the process table.
async fn stdio_daemon_with_a_task(dir: &Path) -> (tokio::process::Child, Client, String) {
    let (child, mut client) = stdio_daemon(dir, AUTO, &[]).await;
    let token = start_task(&mut client, dir).await;
    (child, client, token)
}

async fn start_task(client: &mut Client, dir: &Path) -> String {
    let session = client
        .new_session(&common::daemon::workspace(dir, "ws"))
        .await;
    let token = token();
    client
        .start_task(&session, &format!("sleep 1000.{token}"))
        .await;
    // `start` returns once the task is spawned; its `sleep` is in the table a moment later.
    let deadline = tokio::time::Instant::now() + HUNG;
    while with_token(&token).is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the task never ran");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    token
}

async fn exits_cleanly(child: &mut tokio::process::Child, token: &str, how: &str) {
    let status = tokio::time::timeout(HUNG, child.wait())
        .await
        .unwrap_or_else(|_| panic!("the daemon did not stop after {how}"))
        .expect("wait for the daemon");
    assert!(status.success(), "{how}: daemon exit {status}");
    assert_eq!(
        with_token(token),
        Vec::<i32>::new(),
        "{how}: a task outlived the daemon"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_dsh_stop_ends_the_daemon_and_every_task_with_stdin_still_open() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut client, token) = stdio_daemon_with_a_task(dir.path()).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 99, "method": "_dsh/stop", "params": {}}))
        .await;
    exits_cleanly(&mut child, &token, "_dsh/stop over stdio").await;
    drop(client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_sigterm_ends_the_daemon_and_every_task() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, client, token) = stdio_daemon_with_a_task(dir.path()).await;
    let pid = nix::unistd::Pid::from_raw(child.id().expect("pid") as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    exits_cleanly(&mut child, &token, "SIGTERM over stdio").await;
    drop(client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_the_editor_closing_the_pipe_ends_the_daemon_and_every_task() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, client, token) = stdio_daemon_with_a_task(dir.path()).await;
    drop(client);
    exits_cleanly(&mut child, &token, "stdin closed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_sigterm_ends_the_daemon_every_task_and_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = SocketDaemon::start(dir.path(), AUTO).await;
    let mut client = daemon.connect().await;
    let token = start_task(&mut client, dir.path()).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    exits_cleanly(&mut daemon.child, &token, "SIGTERM on the socket").await;
    assert!(!daemon.socket.exists(), "socket left behind");
    drop(client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_dsh_stop_ends_the_daemon_every_task_and_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), AUTO).await;
    let mut client = daemon.connect().await;
    let token = start_task(&mut client, dir.path()).await;
    // `stop` asserts the exit status and the socket's removal.
    daemon.stop().await;
    assert_eq!(
        with_token(&token),
        Vec::<i32>::new(),
        "a task outlived the daemon"
    );
    drop(client);
}
