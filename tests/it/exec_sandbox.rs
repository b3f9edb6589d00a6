//! What only the sandbox executor promises (the shared contract is in
//! exec_contract.rs): writes outside the writable roots fail inside the command,
//! the network is off unless configured, /tmp is private, and a process that hides
//! from every marker still dies with its PID namespace.

use crate::common;

use common::*;
use dsh::config::{ExecConfig, ExecutorKind};
use dsh::exec::{BashExecutor, ExecRequest, KillOutcome, SandboxExecutor};
use std::path::Path;
use tokio_util::sync::CancellationToken;

fn config(state: &Path) -> ExecConfig {
    let mut cfg = test_config(state);
    cfg.kind = ExecutorKind::Sandbox;
    cfg
}

fn req(command: &str, root: &Path) -> ExecRequest {
    ExecRequest {
        command: command.to_string(),
        workdir: Some(root.to_path_buf()),
        writable_roots: vec![root.to_path_buf()],
        ..ExecRequest::default()
    }
}

async fn run(exec: &SandboxExecutor, command: &str, root: &Path) -> (String, String, Option<i32>) {
    let out = exec
        .run(exec.resolve(req(command, root)), CancellationToken::new())
        .await
        .unwrap();
    (out.stdout.text, out.stderr.text, out.exit_code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_outside_the_roots_fail_inside_the_command_with_the_shells_own_error() {
    let state = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let exec = SandboxExecutor::new(&config(state.path()), &[]).unwrap();
    let (_, err, code) = run(
        &exec,
        &format!("echo x > {}/f", other.path().display()),
        root.path(),
    )
    .await;
    assert_eq!(code, Some(1));
    // /tmp is private in the sandbox, so a host directory under it is not even there.
    assert!(
        err.contains("No such file or directory") || err.contains("Read-only file system"),
        "{err}"
    );
    assert!(!other.path().join("f").exists());
    let (_, err, code) = run(&exec, "touch /usr/dsh-sandbox-test", root.path()).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("Read-only file system"), "{err}");
    assert!(!Path::new("/usr/dsh-sandbox-test").exists());
    // The session's root is writable, and what is written there is real.
    let (_, err, code) = run(&exec, "echo kept > inside", root.path()).await;
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(
        std::fs::read_to_string(root.path().join("inside")).unwrap(),
        "kept\n"
    );
    // /tmp is the sandbox's own: a file made there is not on the host.
    let name = format!("dsh-private-{}", token());
    let (out, _, _) = run(
        &exec,
        &format!("echo y > /tmp/{name}; ls /tmp"),
        root.path(),
    )
    .await;
    assert!(out.contains(&name), "{out}");
    assert!(!Path::new("/tmp").join(&name).exists());
    exec.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_is_off_unless_config_turns_it_on() {
    let state = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let exec = SandboxExecutor::new(&config(state.path()), &[]).unwrap();
    let (out, err, code) = run(&exec, &probe, root.path()).await;
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("Connection refused"), "{err}");
    exec.shutdown().await;
    let mut cfg = config(state.path());
    cfg.sandbox.network.mode = dsh::config::NetworkMode::Host;
    let exec = SandboxExecutor::new(&cfg, &[]).unwrap();
    let (out, err, code) = run(&exec, &probe, root.path()).await;
    assert_eq!((code, out.as_str()), (Some(0), "connected\n"), "{err}");
    exec.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e3_a_process_without_marker_or_session_dies_with_the_namespace() {
    let state = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let exec = SandboxExecutor::new(&config(state.path()), &[]).unwrap();
    let token = token();
    let ready = Fifo::new(root.path(), "ready");
    // `env -i` drops the marker and `setsid` leaves the session: nothing but the
    // PID namespace still holds this process. The wait is for `sleep` itself: until
    // `setsid` and `env` have exec'd it, their environment (the marker in it) shows.
    let command = format!(
        "setsid env -i /bin/sleep 1000.{token} >/dev/null 2>&1 &
         while ! pgrep -f '^/bin/sleep 1000.{token}' >/dev/null; do sleep 0.01; done
         echo ready > {r}; exec sleep 1000",
        r = ready.path()
    );
    let task = exec
        .start(exec.resolve(req(&command, root.path())))
        .await
        .unwrap();
    ready.wait().await;
    let hidden = with_token(&token);
    assert_eq!(hidden.len(), 1);
    let environ = std::fs::read(format!("/proc/{}/environ", hidden[0])).unwrap();
    assert!(
        !String::from_utf8_lossy(&environ).contains("DSH_TASK_MARK"),
        "the hidden process still has the marker"
    );
    assert_eq!(exec.kill(task.id).await, KillOutcome::Killed);
    assert!(with_token(&token).is_empty(), "the hidden process survived");
    exec.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_granted_by_config_are_writable_too() {
    let state = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let extra = tempfile::tempdir().unwrap();
    let mut cfg = config(state.path());
    cfg.sandbox.writable = vec![extra.path().to_path_buf()];
    let exec = SandboxExecutor::new(&cfg, &[]).unwrap();
    let (_, err, code) = run(
        &exec,
        &format!("echo z > {}/granted", extra.path().display()),
        root.path(),
    )
    .await;
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert!(extra.path().join("granted").exists());
    exec.shutdown().await;
}
