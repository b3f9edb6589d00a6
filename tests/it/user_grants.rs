//! `[permissions] remember = "user"` through the real daemon (issue 14): an "always"
//! answer given in one session applies in every other session and after a restart, is
//! kept 0600 in the state directory, named on the audit line, listed by `dsh policy
//! grants` and removed by `dsh policy grants --revoke`, with or without a daemon.

use crate::common;
use common::daemon::{BIN, SocketDaemon, workspace};
use serde_json::Value;
use std::path::Path;

const REMEMBER_USER: &str = "[permissions]\nremember = \"user\"\n";

/// `dsh policy grants ARGS` against `socket` and `state`: its stdout, or its stderr as
/// the error.
fn grants_cli(socket: &Path, state: &Path, args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new(BIN)
        .args(["policy", "grants", "--socket"])
        .arg(socket)
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn last_audit(state: &Path) -> Value {
    let text = std::fs::read_to_string(state.join("audit.jsonl")).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_grant_applies_in_every_session_and_after_a_restart_until_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), REMEMBER_USER).await;
    let mut a = daemon.connect().await;
    let sa = a.new_session(&workspace(dir.path(), "a")).await;
    a.permission_answers.push_back("allow_always");
    a.permission_answers.push_back("reject_always");
    assert_eq!(a.bash(&sa, "echo one").await, ("one\n".into(), false));
    let (text, is_error) = a.bash(&sa, "printf x").await;
    assert!(is_error && text.contains("rejected"), "{text}");
    assert_eq!(a.permission_requests.len(), 2);
    use std::os::unix::fs::PermissionsExt;
    let file = daemon.state.join("grants.json");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "grants.json mode {mode:o}");

    // Another session on another connection: neither is asked again.
    let mut b = daemon.connect().await;
    let sb = b.new_session(&workspace(dir.path(), "b")).await;
    assert_eq!(b.bash(&sb, "echo two").await, ("two\n".into(), false));
    let line = last_audit(&daemon.state);
    assert_eq!(line["grants"], serde_json::json!([["echo"]]), "{line}");
    let (text, is_error) = b.bash(&sb, "printf y").await;
    assert!(is_error && text.contains("rejected"), "{text}");
    assert!(b.permission_requests.is_empty(), "asked again");
    // A session's own revoke cannot remove the user's grant, and says where it is.
    let err = b
        .request(
            "_dsh/session/revoke",
            serde_json::json!({"sessionId": sb, "prefix": "echo"}),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("dsh policy grants"), "{err}");
    let listed = grants_cli(&daemon.socket, &daemon.state, &[]).unwrap();
    assert_eq!(listed, "allow  echo\nreject printf\n");
    drop((a, b));
    daemon.stop().await;

    // After a restart, a new session has them too.
    let daemon = SocketDaemon::start(dir.path(), REMEMBER_USER).await;
    let mut c = daemon.connect().await;
    let sc = c.new_session(&workspace(dir.path(), "c")).await;
    assert_eq!(c.bash(&sc, "echo three").await, ("three\n".into(), false));
    assert!(c.permission_requests.is_empty());

    // Revoked through the daemon: the next echo is asked (nobody answers: refused).
    let said = grants_cli(&daemon.socket, &daemon.state, &["--revoke", "echo"]).unwrap();
    assert_eq!(said, "revoked: echo\n");
    let (text, is_error) = c.bash(&sc, "echo four").await;
    assert!(is_error && text.contains("cancelled"), "{text}");
    assert_eq!(c.permission_requests.len(), 1);
    let err = grants_cli(&daemon.socket, &daemon.state, &["--revoke", "echo"]).unwrap_err();
    assert!(err.contains("no user grant"), "{err}");
    drop(c);
    daemon.stop().await;

    // With no daemon, the CLI reads and writes the file itself.
    let (none, state) = (dir.path().join("run/none.sock"), dir.path().join("state"));
    assert_eq!(grants_cli(&none, &state, &[]).unwrap(), "reject printf\n");
    grants_cli(&none, &state, &["--revoke", "printf"]).unwrap();
    assert_eq!(grants_cli(&none, &state, &[]).unwrap(), "");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remember_session_keeps_an_answer_to_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "").await;
    let mut a = daemon.connect().await;
    let sa = a.new_session(&workspace(dir.path(), "a")).await;
    a.permission_answers.push_back("allow_always");
    assert_eq!(a.bash(&sa, "echo one").await, ("one\n".into(), false));
    let sb = a.new_session(&workspace(dir.path(), "b")).await;
    let (text, is_error) = a.bash(&sb, "echo two").await;
    assert!(is_error && text.contains("cancelled"), "{text}");
    assert!(!daemon.state.join("grants.json").exists());
    drop(a);
    daemon.stop().await;
}

/// `dsh policy explain --json` of `line` with the daemon's config and state directory, as
/// a session in `cwd`: the decision.
fn explain_cli(daemon: &SocketDaemon, cwd: &Path, line: &str) -> String {
    let out = std::process::Command::new(BIN)
        .args(["policy", "explain", "--json", "--config"])
        .arg(&daemon.config)
        .arg("--state-dir")
        .arg(&daemon.state)
        .arg("--cwd")
        .arg(cwd)
        .args(["--", line])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value: Value = serde_json::from_slice(&out.stdout).unwrap();
    value["judgement"]["decision"]
        .as_str()
        .unwrap_or_else(|| panic!("no decision in {value}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_judges_with_the_users_grants_as_the_daemon_does() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), REMEMBER_USER).await;
    let mut a = daemon.connect().await;
    let wa = workspace(dir.path(), "a");
    let sa = a.new_session(&wa).await;
    // Mode ask: before any answer, explain and the daemon both ask.
    assert_eq!(explain_cli(&daemon, &wa, "echo one"), "ask");
    a.permission_answers.push_back("allow_always");
    assert_eq!(a.bash(&sa, "echo one").await, ("one\n".into(), false));
    assert_eq!(a.permission_requests.len(), 1);

    // Now explain, run with the daemon's config and state directory, says allow ...
    let wb = workspace(dir.path(), "b");
    assert_eq!(explain_cli(&daemon, &wb, "echo two"), "allow");
    // ... and a real call in another session is allowed without a question.
    let mut b = daemon.connect().await;
    let sb = b.new_session(&wb).await;
    assert_eq!(b.bash(&sb, "echo two").await, ("two\n".into(), false));
    assert!(b.permission_requests.is_empty(), "asked although granted");
    // What the user did not grant is still asked, by both.
    assert_eq!(explain_cli(&daemon, &wb, "printf x"), "ask");
    let (text, is_error) = b.bash(&sb, "printf x").await;
    assert!(is_error && text.contains("cancelled"), "{text}");
    assert_eq!(b.permission_requests.len(), 1);
    drop((a, b));
    daemon.stop().await;
}
