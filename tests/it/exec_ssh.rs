//! What only the ssh executor promises (the shared contract is in
//! exec_contract.rs), against a real sshd on loopback: a host it cannot reach is a
//! clear infrastructure error, session directories are mapped to remote ones, and a
//! dropped connection marks the task killed and ends its remote processes once a
//! new connection is up (wrapper path) or at once (the helper). The helper's
//! install: first contact uploads, the next reuses, a tampered cache is replaced,
//! a host of another architecture is refused when the helper is required.

use crate::common;

use common::sshd::Sshd;
use common::*;
use dsh::config::{ExecConfig, ExecutorKind, HelperMode, PathMapping};
use dsh::exec::{BashExecutor, ExecError, ExecRequest, SshExecutor, TaskStatus};
use std::path::{Path, PathBuf};
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
    // Both paths: the wrapper and the helper.
    for helper in [HelperMode::Off, HelperMode::Required] {
        directories_are_mapped(helper).await;
    }
}

async fn directories_are_mapped(helper: HelperMode) {
    let state = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    let sshd = Sshd::start();
    let cfg = mapped_config(state.path(), &sshd, remote.path(), helper);
    std::fs::create_dir(remote.path().join("sub")).unwrap();
    let exec = SshExecutor::with_helper(&cfg, PathBuf::from(common::daemon::BIN)).unwrap();
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
    let expected = if helper == HelperMode::Off {
        "ssh"
    } else {
        "ssh+helper"
    };
    assert_eq!(exec.kind(), expected);
    exec.shutdown().await;
}

/// The local ssh master of an executor on `state`, found by its control path.
fn master_pid(state: &Path) -> Option<i32> {
    let control = state.join("ssh").join("control");
    let wanted = format!("ControlPath={}", control.display());
    common::live_pids_where(|args| {
        args.contains(&b"-M".as_slice()) && args.contains(&wanted.as_bytes())
    })
    .first()
    .copied()
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
    let read = exec.read(task.id).unwrap();
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

/// An executor on the helper path (`helper` as given), whose helper binary is the
/// `dsh` under test, cached in `helper_dir`.
fn helper_exec(state: &Path, sshd: &Sshd, helper: HelperMode, helper_dir: &Path) -> SshExecutor {
    let mut cfg = config(state, sshd);
    cfg.ssh.helper = helper;
    cfg.ssh.helper_dir = helper_dir.display().to_string();
    SshExecutor::with_helper(&cfg, PathBuf::from(common::daemon::BIN)).unwrap()
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Install: the first contact uploads dsh (compressed) into a 0700 directory as a
/// 0700 file named by version and hash, and removes other builds' helpers; the
/// next executor reuses it; a cached helper whose bytes changed is refused (never
/// run), removed and uploaded again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_contact_uploads_the_helper_the_next_reuses_it_and_a_tampered_one_is_replaced() {
    let state = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let helper_dir = cache.path().join("dsh");
    let sshd = Sshd::start();
    // The helper of an older build: removed by the upload.
    std::fs::create_dir(&helper_dir).unwrap();
    let older = helper_dir.join("helper-0.0.1-0123456789abcdef");
    std::fs::write(&older, "old").unwrap();
    let exec = helper_exec(state.path(), &sshd, HelperMode::Required, &helper_dir);
    assert_eq!(exec.kind(), "ssh (not connected yet)");
    let out = exec
        .run(
            exec.resolve(req("echo one", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout.text, "one\n");
    assert_eq!(exec.kind(), "ssh+helper");
    let first = exec.install_report().unwrap();
    assert!(first.uploaded && !first.replaced_mismatch, "{first:?}");
    let size = std::fs::metadata(common::daemon::BIN).unwrap().len();
    assert_eq!(first.size, size);
    assert!(first.sent < size, "the upload is compressed: {first:?}");
    eprintln!(
        "first contact: {} bytes of dsh, {} sent, {:?}",
        first.size, first.sent, first.elapsed
    );
    let cached = PathBuf::from(&first.path);
    assert_eq!(cached.parent().unwrap(), helper_dir);
    assert_eq!(mode_of(&helper_dir), 0o700);
    assert_eq!(mode_of(&cached), 0o700);
    assert_eq!(std::fs::metadata(&cached).unwrap().len(), size);
    assert!(!older.exists(), "an older build's helper is left behind");
    exec.shutdown().await;

    let exec = helper_exec(state.path(), &sshd, HelperMode::Required, &helper_dir);
    let out = exec
        .run(
            exec.resolve(req("echo two", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout.text, "two\n");
    let second = exec.install_report().unwrap();
    assert!(!second.uploaded, "{second:?}");
    eprintln!("second contact: {:?}", second.elapsed);
    exec.shutdown().await;

    // The helper exits once its channel is closed; a file being executed cannot
    // be rewritten (ETXTBSY): wait for it to go.
    while !sshd.helpers().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // Same name, other bytes: a script that would leave a mark if it ever ran.
    let ran = state.path().join("tampered-helper-ran");
    std::fs::write(
        &cached,
        format!("#!/bin/sh\ntouch {}\nsleep 1000\n", ran.display()),
    )
    .unwrap();
    let exec = helper_exec(state.path(), &sshd, HelperMode::Required, &helper_dir);
    let out = exec
        .run(
            exec.resolve(req("echo three", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout.text, "three\n");
    let third = exec.install_report().unwrap();
    assert!(third.replaced_mismatch && third.uploaded, "{third:?}");
    assert!(!ran.exists(), "the tampered helper ran");
    assert_eq!(std::fs::metadata(&cached).unwrap().len(), size);
    exec.shutdown().await;
    assert!(sshd.helpers().is_empty(), "a helper outlived shutdown");
}

/// A host whose `uname -m` is not this build's (a fake `uname` first in the remote
/// PATH): `required` refuses with the reason, `auto` takes the wrapper path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_of_another_architecture_is_refused_when_required_and_wrapped_when_auto() {
    let state = tempfile::tempdir().unwrap();
    let bin = state.path().join("fakebin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::write(bin.join("uname"), "#!/bin/sh\necho Linux riscv64\n").unwrap();
    std::fs::set_permissions(
        bin.join("uname"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let sshd = Sshd::start_with_env(&format!("PATH={}:/usr/bin:/bin", bin.display()));
    let helper_dir = state.path().join("cache");
    let exec = helper_exec(state.path(), &sshd, HelperMode::Required, &helper_dir);
    let err = exec
        .run(
            exec.resolve(req("true", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ExecError::Remote(_)), "{err:?}");
    for part in [
        "cannot run on ssh host 127.0.0.1",
        "Linux riscv64",
        "required",
    ] {
        assert!(text.contains(part), "{part:?} missing: {text}");
    }
    assert!(!helper_dir.exists(), "nothing is uploaded to such a host");
    exec.shutdown().await;

    let exec = helper_exec(state.path(), &sshd, HelperMode::Auto, &helper_dir);
    let out = exec
        .run(
            exec.resolve(req("uname", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        out.stdout.text, "Linux riscv64\n",
        "the fake uname ran there"
    );
    assert_eq!(exec.kind(), "ssh (wrapper: the helper cannot run there)");
    assert!(exec.install_report().is_none());
    exec.shutdown().await;
}

/// E3 over the helper: a connection killed while a foreground run and a
/// background task run leaves no remote process (the helper's stdin ends, it ends
/// everything and exits); the run fails as lost, the task is killed with a line in
/// its stderr, and the next call starts a fresh helper.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_killed_mid_command_leaves_no_remote_process() {
    let state = tempfile::tempdir().unwrap();
    let sshd = Sshd::start();
    let helper_dir = PathBuf::from(common::sshd::shared_helper_dir());
    let exec = std::sync::Arc::new(helper_exec(
        state.path(),
        &sshd,
        HelperMode::Required,
        &helper_dir,
    ));
    let mut done = exec.take_completions().unwrap();
    let (fg, bg) = (token(), token());
    let task = exec
        .start(exec.resolve(req(&format!("exec sleep 1000.{bg}"), state.path())))
        .await
        .unwrap();
    let run = tokio::spawn({
        let exec = exec.clone();
        let spec = exec.resolve(req(
            &format!("setsid sleep 1000.{fg} & exec sleep 1000.{fg}"),
            state.path(),
        ));
        async move { exec.run(spec, CancellationToken::new()).await }
    });
    while with_token(&fg).len() < 2 || with_token(&bg).is_empty() {
        tokio::task::yield_now().await;
    }
    assert_eq!(sshd.helpers().len(), 1);
    let master = master_pid(state.path()).expect("the master connection");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(master),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let err = run.await.unwrap().unwrap_err();
    assert!(matches!(err, ExecError::Lost(_)), "{err:?}");
    let finished = done.recv().await.unwrap();
    assert_eq!(finished.id, task.id);
    assert_eq!(finished.status, TaskStatus::Killed { signal: None });
    let read = exec.read(task.id).unwrap();
    assert!(
        read.stderr
            .text
            .contains("lost the connection to ssh host 127.0.0.1"),
        "{}",
        read.stderr.text
    );
    // The helper notices its stdin's end, ends what it started, and exits: wait
    // for that in the process table.
    while !sshd.helpers().is_empty() || !with_token(&fg).is_empty() || !with_token(&bg).is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let out = exec
        .run(
            exec.resolve(req("echo back", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout.text, "back\n");
    assert_eq!(sshd.helpers().len(), 1, "a fresh helper");
    exec.shutdown().await;
    assert!(sshd.helpers().is_empty(), "the helper outlived shutdown");
    assert!(
        master_pid(state.path()).is_none(),
        "the master outlived shutdown"
    );
}

/// A helper that stops answering on a live connection (here: SIGSTOP): the call
/// gives up once the command's timeout, twice the grace, the drain and the connect
/// timeout have passed, fails as lost and kills the helper; the next call's fresh
/// helper ends what the stopped one ran (its owner is dead: the stale sweep).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_helper_that_stops_answering_is_killed_and_the_next_one_ends_its_commands() {
    let state = tempfile::tempdir().unwrap();
    let sshd = Sshd::start();
    let helper_dir = PathBuf::from(common::sshd::shared_helper_dir());
    let exec = std::sync::Arc::new(helper_exec(
        state.path(),
        &sshd,
        HelperMode::Required,
        &helper_dir,
    ));
    exec.run(
        exec.resolve(req("true", state.path())),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let helpers = sshd.helpers();
    assert_eq!(helpers.len(), 1);
    let token = token();
    let mut spec = exec.resolve(req(&format!("exec sleep 1000.{token}"), state.path()));
    spec.timeout_ms = 1000;
    let run = tokio::spawn({
        let exec = exec.clone();
        async move { exec.run(spec, CancellationToken::new()).await }
    });
    while with_token(&token).is_empty() {
        tokio::task::yield_now().await;
    }
    let stopped = nix::unistd::Pid::from_raw(helpers[0]);
    nix::sys::signal::kill(stopped, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let err = run.await.unwrap().unwrap_err();
    assert!(matches!(err, ExecError::Lost(_)), "{err:?}");
    assert!(err.to_string().contains("did not answer"), "{err}");
    assert!(!alive(helpers[0]), "the stopped helper was not killed");
    let out = exec
        .run(
            exec.resolve(req("echo again", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout.text, "again\n");
    assert!(
        with_token(&token).is_empty(),
        "the stopped helper's command outlived the next helper's start"
    );
    exec.shutdown().await;
}

/// Live output over ssh, both paths: every byte of a foreground run reaches the watch
/// as it is read (through the helper: as `run_output` notifications, characters whole).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_run_shows_its_output_on_both_paths() {
    use dsh::exec::OutputStream;
    use std::sync::{Arc, Mutex};
    for helper in [HelperMode::Off, HelperMode::Required] {
        let state = tempfile::tempdir().unwrap();
        let sshd = Sshd::start();
        let mut cfg = config(state.path(), &sshd);
        cfg.ssh.helper = helper;
        let exec = SshExecutor::with_helper(&cfg, PathBuf::from(common::daemon::BIN)).unwrap();
        let seen: Arc<Mutex<(Vec<u8>, Vec<u8>)>> = Arc::default();
        let watch = {
            let seen = seen.clone();
            Arc::new(move |stream: OutputStream, bytes: &[u8]| {
                let mut seen = seen.lock().unwrap();
                match stream {
                    OutputStream::Stdout => seen.0.extend_from_slice(bytes),
                    OutputStream::Stderr => seen.1.extend_from_slice(bytes),
                }
            })
        };
        let out = exec
            .run_watched(
                exec.resolve(req(
                    "printf 'a\\n'; printf 'caf\\303\\251' >&2; printf 'b\\n'",
                    Path::new("/tmp"),
                )),
                CancellationToken::new(),
                watch,
            )
            .await
            .unwrap();
        assert_eq!(out.stdout.text, "a\nb\n", "{helper:?}");
        let (stdout, stderr) = seen.lock().unwrap().clone();
        assert_eq!(String::from_utf8_lossy(&stdout), "a\nb\n", "{helper:?}");
        assert_eq!(String::from_utf8_lossy(&stderr), "café", "{helper:?}");
        exec.shutdown().await;
    }
}

/// A server (`start_service`) on either path runs remotely over a channel of the
/// master connection: in the mapped workdir, with the E4 filter applied there, spoken
/// to over its stdin and stdout; its own `env` reaches it byte-exact and on no command
/// line (neither the local `ssh` client's nor the remote wrapper's: `ps` shows them to
/// every user); it and everything it started (every escape pattern) end when its
/// handle stops or is dropped, on `kill_scope` of its scope and on shutdown (the
/// "remote" is this machine: the process table shows it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_runs_remotely_over_the_channel_and_ends_with_everything_it_started() {
    for helper in [HelperMode::Off, HelperMode::Required] {
        server_runs_remotely(helper).await;
    }
}

/// Waits (bounded, so a server nothing ends fails the test instead of hanging it)
/// until a server has ended.
async fn ended_within(ended: &CancellationToken, end: &str) {
    let limit = std::time::Duration::from_secs(30);
    if tokio::time::timeout(limit, ended.cancelled())
        .await
        .is_err()
    {
        panic!("{end}: the server did not end");
    }
}

async fn server_runs_remotely(helper: HelperMode) {
    use dsh::exec::ServiceProcess;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let state = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    // A UTF-8 locale over there: the env's values are counted in bytes whatever it is.
    let sshd = Sshd::start_with_env("LC_ALL=C.UTF-8");
    let cfg = mapped_config(state.path(), &sshd, remote.path(), helper);
    let exec = SshExecutor::with_helper(&cfg, PathBuf::from(common::daemon::BIN)).unwrap();
    if helper == HelperMode::Required {
        // Commands take the helper: the server must run beside it.
        let out = exec
            .run(
                exec.resolve(req("true", Path::new("/home/someone/project"))),
                CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(exec.kind(), "ssh+helper");
    }
    for end in ["stop", "drop", "kill_scope", "shutdown"] {
        let token = token();
        // The server's own env: a secret-looking name the E4 filter would drop from
        // what the host gives, kept because it is the server's own; and a value a
        // shell would read as code if it were ever put in a command (a quote, a
        // newline, `$(...)`, backquotes, a backslash, a multibyte character).
        let secret = format!("srv-secret-{token}");
        let canary = state.path().join(format!("canary-{end}"));
        let nasty = format!(
            " it's \"q\"\n$(touch {c}) `touch {c}` ${{HOME}} caf\u{e9} \\\n",
            c = canary.display()
        );
        let server_env = vec![
            ("SERVER_API_TOKEN".to_string(), secret.clone()),
            ("SERVER_NASTY".to_string(), nasty),
            ("SERVER_EMPTY".to_string(), String::new()),
        ];
        let pidfile = state.path().join(format!("pids-{end}"));
        let ready = Fifo::new(state.path(), &format!("ready-{end}"));
        let server = escape_script(
            &pidfile,
            &ready,
            &token,
            r#"echo "server $$"; while read -r l; do echo "got $l in $PWD [$GH_TOKEN$MY_API_KEY] $KEEP_ME"; done"#,
        );
        let scope = format!("session-{end}");
        let spec = exec.resolve(ExecRequest {
            command: server,
            workdir: Some("/home/someone/project".into()),
            scope: Some(scope.clone()),
            ..ExecRequest::default()
        });
        let ServiceProcess {
            mut stdin,
            stdout,
            stderr,
            handle,
        } = exec.start_service(spec, server_env.clone()).await.unwrap();
        ready.wait().await;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let first = lines.next_line().await.unwrap().unwrap();
        let pid: i32 = first.strip_prefix("server ").unwrap().parse().unwrap();
        assert_on_no_command_line(&secret);
        let environ = environ_of(pid);
        for (name, value) in &server_env {
            let wanted = format!("{name}={value}").into_bytes();
            assert!(
                environ.contains(&wanted),
                "{end} ({helper:?}): {name} is not byte-exact in {:?}",
                environ
                    .iter()
                    .map(|v| String::from_utf8_lossy(v))
                    .collect::<Vec<_>>()
            );
        }
        assert!(!canary.exists(), "{end} ({helper:?}): a value was run");
        // What makes the test hold: a locale where `read -N` counts characters.
        assert!(
            environ.contains(&b"LC_ALL=C.UTF-8".to_vec()),
            "{end} ({helper:?}): the host's locale is not UTF-8"
        );
        stdin.write_all(b"hi\n").await.unwrap();
        assert_eq!(
            lines.next_line().await.unwrap().unwrap(),
            format!("got hi in {} [] yes", remote.path().display()),
            "the mapped workdir, E4 on the far side (the server's own session variables)"
        );
        let ended = handle.ended().clone();
        match end {
            "stop" => handle.stop().await,
            "drop" => {
                drop((stdin, lines, stderr, handle));
                ended_within(&ended, end).await;
            }
            "kill_scope" => {
                exec.kill_scope(&scope).await;
                ended_within(&ended, end).await;
            }
            _ => {
                exec.shutdown().await;
                assert!(
                    ended.is_cancelled(),
                    "shutdown returned before the server ended"
                );
            }
        }
        assert!(!alive(pid), "{end}: the server survived");
        assert_all_dead(&pidfile, &token, end);
    }
}

/// A server `env` name bash cannot export (the host's wrapper exports the server's
/// env with bash) is refused by name before anything starts, as the MCP and agent
/// configs refuse it for every executor; it is never dropped silently with the server
/// started without it. A value with a NUL byte, which no environment holds, likewise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_env_name_bash_cannot_export_is_refused_before_the_server_starts() {
    let state = tempfile::tempdir().unwrap();
    let sshd = Sshd::start();
    let exec = SshExecutor::new(&config(state.path(), &sshd)).unwrap();
    let canary = state.path().join("canary");
    let refused = [
        (
            ("BAD-NAME", "x"),
            "`BAD-NAME` is not a valid environment variable name",
        ),
        (("OK", "a\0b"), "the value of `OK` holds a NUL byte"),
    ];
    for ((name, value), why) in refused {
        let spec = exec.resolve(req(
            &format!("touch '{}'; exec cat", canary.display()),
            state.path(),
        ));
        let env = vec![(name.to_string(), value.to_string())];
        match exec.start_service(spec, env).await {
            Err(e) => assert!(e.to_string().contains(why), "{e}"),
            Ok(_) => panic!("{name}: the server started"),
        }
        assert!(!canary.exists(), "{name}: the server ran");
    }
    exec.shutdown().await;
}

/// A server whose connection drops ends here at once (its pipes close); what it
/// started over there is ended once the next call has reconnected, as a lost
/// command's is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_lost_with_its_connection_is_ended_remotely_on_reconnect() {
    let state = tempfile::tempdir().unwrap();
    let sshd = Sshd::start();
    let exec = SshExecutor::new(&config(state.path(), &sshd)).unwrap();
    let token = token();
    let pidfile = state.path().join("pids");
    let ready = Fifo::new(state.path(), "ready");
    // It ignores the end of its stdin, as a wedged server would.
    let server = escape_script(&pidfile, &ready, &token, "exec sleep 1000.$RANDOM");
    let service = exec
        .start_service(
            exec.resolve(ExecRequest {
                command: server,
                workdir: Some(state.path().to_path_buf()),
                scope: Some("s".into()),
                ..ExecRequest::default()
            }),
            Vec::new(),
        )
        .await
        .unwrap();
    ready.wait().await;
    let master = master_pid(state.path()).expect("the master connection");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(master),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    ended_within(service.handle.ended(), "the lost connection").await;
    let out = exec
        .run(
            exec.resolve(req("echo back", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout.text, "back\n");
    assert_all_dead(&pidfile, &token, "after the reconnect");
    exec.shutdown().await;
}

/// `config` with `/home/someone/project` mapped to `remote` and the helper mode set.
fn mapped_config(state: &Path, sshd: &Sshd, remote: &Path, helper: HelperMode) -> ExecConfig {
    let mut cfg = config(state, sshd);
    cfg.ssh.path_map = vec![PathMapping {
        local: "/home/someone/project".into(),
        remote: remote.to_path_buf(),
    }];
    cfg.ssh.helper = helper;
    cfg
}

/// `[exec.ssh] sandbox = true` on the helper path (issue 27): E6 and the writable
/// roots hold on the host, and a host where the sandbox cannot hold refuses every
/// command with why, in `auto` mode too (never the unsandboxed wrapper path).
fn sandboxed(
    state: &Path,
    sshd: &Sshd,
    helper: HelperMode,
    tweak: impl Fn(&mut ExecConfig),
) -> SshExecutor {
    let mut cfg = config(state, sshd);
    cfg.ssh = sshd.helper_config();
    cfg.ssh.helper = helper;
    cfg.ssh.sandbox = true;
    tweak(&mut cfg);
    SshExecutor::with_helper(&cfg, PathBuf::from(common::daemon::BIN)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e6_the_helper_sandboxes_commands_on_the_host() {
    let sshd = Sshd::start();
    let state = tempfile::tempdir().unwrap();
    let (root, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let exec = sandboxed(state.path(), &sshd, HelperMode::Required, |_| {});
    let command = format!(
        "grep -E '^(CapEff|Seccomp):' /proc/self/status; echo in > inside && echo wrote-inside; \
         echo out > {}/f 2>/dev/null || echo outside-refused",
        other.path().display()
    );
    let out = exec
        .run(
            exec.resolve(ExecRequest {
                command,
                workdir: Some(root.path().to_path_buf()),
                writable_roots: vec![root.path().to_path_buf()],
                ..ExecRequest::default()
            }),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let text = out.stdout.text;
    assert!(
        text.contains("CapEff:\t0000000000000000") && text.contains("Seccomp:\t2"),
        "{text}"
    );
    assert!(
        text.contains("wrote-inside") && text.contains("outside-refused"),
        "{text}"
    );
    assert!(root.path().join("inside").exists() && !other.path().join("f").exists());
    exec.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_cannot_sandbox_refuses_commands_with_why_even_in_auto_mode() {
    let sshd = Sshd::start();
    let state = tempfile::tempdir().unwrap();
    let exec = sandboxed(state.path(), &sshd, HelperMode::Auto, |cfg| {
        cfg.sandbox.bwrap = PathBuf::from("/nonexistent/bwrap");
    });
    let err = exec
        .run(
            exec.resolve(req("touch ran", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("bubblewrap"), "{err}");
    assert!(!state.path().join("ran").exists());
    exec.shutdown().await;
}

/// The first contact with a given build of dsh as the helper, for BENCHMARKS.md
/// (issue 31): how long the first call takes when the helper must be uploaded (hashed,
/// gzip on the wire, unpacked and checked remotely, started), against a fresh cache on
/// a loopback sshd. Needs a build to measure, so it runs only when asked:
/// `DSH_HELPER_BIN=target/x86_64-unknown-linux-gnu/dist/dsh cargo test --test it --
/// --ignored first_contact_of_a_build --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: needs DSH_HELPER_BIN"]
async fn first_contact_of_a_build() {
    let bin = PathBuf::from(std::env::var_os("DSH_HELPER_BIN").expect("DSH_HELPER_BIN"));
    let state = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let sshd = Sshd::start();
    let mut cfg = config(state.path(), &sshd);
    cfg.ssh.helper = HelperMode::Required;
    cfg.ssh.helper_dir = cache.path().join("dsh").display().to_string();
    let exec = SshExecutor::with_helper(&cfg, bin.clone()).unwrap();
    let started = std::time::Instant::now();
    let out = exec
        .run(
            exec.resolve(req("true", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let first_call = started.elapsed();
    assert_eq!(out.exit_code, Some(0));
    let report = exec.install_report().unwrap();
    assert!(report.uploaded, "{report:?}");
    exec.shutdown().await;
    // The same against the filled cache: what a contact costs without the upload.
    let again = SshExecutor::with_helper(&cfg, bin.clone()).unwrap();
    let started = std::time::Instant::now();
    again
        .run(
            again.resolve(req("true", state.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let cached_call = started.elapsed();
    assert!(!again.install_report().unwrap().uploaded);
    again.shutdown().await;
    eprintln!(
        "first contact with {}: {} bytes, {} sent, install {:?}, first call {:?}; \
         with the helper cached: first call {:?}",
        bin.display(),
        report.size,
        report.sent,
        report.elapsed,
        first_call,
        cached_call
    );
}
