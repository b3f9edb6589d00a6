//! What only the ssh executor promises (the shared contract is in
//! exec_contract.rs), against a real sshd on loopback: a host it cannot reach is a
//! clear infrastructure error, session directories are mapped to remote ones, and a
//! dropped connection marks the task killed and ends its remote processes once a
//! new connection is up.

use crate::common;

use common::sshd::Sshd;
use common::*;
use dsh::config::{ExecConfig, ExecutorKind, PathMapping};
use dsh::exec::{BashExecutor, ExecError, ExecRequest, SshExecutor, TaskStatus};
use std::path::Path;
use tokio_util::sync::CancellationToken;

fn config(state: &Path, sshd: &Sshd) -> ExecConfig {
    let mut cfg = test_config(state);
    cfg.kind = ExecutorKind::Ssh;
    cfg.ssh = sshd.config();
    cfg
}

fn req(command: &str, workdir: &Path) -> ExecRequest {
    ExecRequest {
        command: command.to_string(),
        workdir: Some(workdir.to_path_buf()),
        ..ExecRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_cannot_be_reached_is_a_clear_infrastructure_error() {
    let state = tempfile::tempdir().unwrap();
    let sshd = Sshd::start();
    let mut cfg = config(state.path(), &sshd);
    // A port nobody listens on (bound and released: free for the moment).
    cfg.ssh.port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let exec = SshExecutor::new(&cfg).unwrap();
    let err = exec
        .run(
            exec.resolve(req("true", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ExecError::Remote(_)), "{err:?}");
    assert!(
        text.contains("127.0.0.1") && text.contains("Connection refused"),
        "{text}"
    );
    let err = exec
        .start(exec.resolve(req("sleep 1", state.path())))
        .await
        .unwrap_err();
    assert!(matches!(err, ExecError::Remote(_)), "{err:?}");
    exec.shutdown().await;
    // A host key that does not match is refused the same way.
    let mut cfg = config(state.path(), &sshd);
    let other_key = state.path().join("other_key");
    common::sshd::keygen(&other_key);
    let other = std::fs::read_to_string(other_key.with_extension("pub")).unwrap();
    let wrong = state.path().join("wrong_known_hosts");
    std::fs::write(&wrong, format!("[127.0.0.1]:{} {other}", sshd.port)).unwrap();
    cfg.ssh.known_hosts_file = Some(wrong);
    let exec = SshExecutor::new(&cfg).unwrap();
    let err = exec
        .run(
            exec.resolve(req("true", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("Host key verification failed"),
        "{err}"
    );
    exec.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_directories_are_mapped_to_remote_ones() {
    let state = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    let sshd = Sshd::start();
    let mut cfg = config(state.path(), &sshd);
    cfg.ssh.path_map = vec![PathMapping {
        local: "/home/someone/project".into(),
        remote: remote.path().to_path_buf(),
    }];
    std::fs::create_dir(remote.path().join("sub")).unwrap();
    let exec = SshExecutor::new(&cfg).unwrap();
    let out = exec
        .run(
            exec.resolve(req("pwd", Path::new("/home/someone/project/sub"))),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        out.stdout.text.trim_end(),
        remote.path().join("sub").to_str().unwrap()
    );
    let err = exec
        .run(
            exec.resolve(req("pwd", Path::new("/home/someone/project/nope"))),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    let remote_missing = remote.path().join("nope");
    assert!(matches!(err, ExecError::WorkdirMissing(_)), "{err:?}");
    assert!(
        err.to_string()
            .ends_with(&format!("127.0.0.1:{}", remote_missing.display())),
        "the error names the remote directory: {err}"
    );
    exec.shutdown().await;
}

/// The local ssh master of an executor on `state`, found by its control path.
fn master_pid(state: &Path) -> Option<i32> {
    let control = state.join("ssh").join("control");
    let wanted = format!("ControlPath={}", control.display());
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .find(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            args.contains(&b"-M".as_slice()) && args.contains(&wanted.as_bytes()) && alive(*pid)
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_marks_the_task_killed_and_its_remote_processes_end_on_reconnect() {
    let state = tempfile::tempdir().unwrap();
    let sshd = Sshd::start();
    let exec = SshExecutor::new(&config(state.path(), &sshd)).unwrap();
    let mut done = exec.take_completions().unwrap();
    let token = token();
    let ready = Fifo::new(state.path(), "ready");
    let task = exec
        .start(exec.resolve(req(
            &format!("echo ready > {}; exec sleep 1000.{token}", ready.path()),
            state.path(),
        )))
        .await
        .unwrap();
    ready.wait().await;
    // The fifo is written just before the `exec`: wait for the sleep itself.
    while with_token(&token).is_empty() {
        tokio::task::yield_now().await;
    }
    // The connection drops: its master process dies.
    let master = master_pid(state.path()).expect("the master connection");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(master),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let finished = done.recv().await.unwrap();
    assert_eq!(finished.id, task.id);
    assert_eq!(finished.status, TaskStatus::Killed { signal: None });
    let read = exec.read(&task.id).unwrap();
    assert!(
        read.stderr
            .text
            .contains("lost the connection to ssh host 127.0.0.1"),
        "{}",
        read.stderr.text
    );
    // The next call reconnects, and the lost task's remote process is ended.
    let out = exec
        .run(
            exec.resolve(req("echo back", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout.text, "back\n");
    assert!(
        with_token(&token).is_empty(),
        "the lost task's remote process survived the reconnect"
    );
    exec.shutdown().await;
    assert!(
        master_pid(state.path()).is_none(),
        "the master outlived shutdown"
    );
}
