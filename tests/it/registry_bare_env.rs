//! `dsh acp` as the ACP Registry's check starts it (issue 31): no environment but an
//! empty HOME, one `initialize`, and nothing on stdout but that answer; then the daemon
//! it started exits by itself once idle, leaving no process behind.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The request the registry's check sends (its client's words, as JSON).
const INITIALIZE: &str = r#"{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"}, "clientCapabilities": {"terminal": true, "fs": {"readTextFile": true, "writeTextFile": true}, "_meta": {"terminal_output": true, "terminal-auth": true}}}}"#;

/// The live processes whose command line holds `serve`, `--idle-exit` and `socket`:
/// the daemons `dsh acp` started on that socket.
fn daemons_on(socket: &Path) -> Vec<i32> {
    let socket = socket.as_os_str().as_encoded_bytes();
    crate::common::live_pids_where(|args| {
        args.contains(&&b"serve"[..])
            && args.contains(&&b"--idle-exit"[..])
            && args.contains(&socket)
    })
}

/// Waits until process `pid` (not our child) has exited: a pidfd becomes readable then.
async fn exited(pid: i32) {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        // Already gone (ESRCH).
        return;
    }
    // SAFETY: the descriptor was just returned to us and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: the AsyncFd owns the descriptor and outlives its registration.
    let fd = unsafe { tokio::io::unix::AsyncFd::register(fd) }.expect("register the pidfd");
    let _ = fd.readable().await.expect("poll the pidfd");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_environment_gets_only_json_on_stdout_and_the_daemon_leaves_when_idle() {
    let home = tempfile::tempdir().unwrap();
    // The daemon reads its config from this HOME: idle for 1 s is enough to leave.
    let conf = home.path().join(".config/dsh");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(conf.join("config.toml"), "[daemon]\nidle_exit_secs = 1\n").unwrap();
    let socket: PathBuf =
        dsh::daemon::socket_path_for(None, Some(home.path().as_os_str()), nix::unistd::getuid());
    let run_dir = socket.parent().unwrap().to_path_buf();
    assert!(
        !socket.exists(),
        "{} is taken before the test",
        socket.display()
    );

    let started = std::time::Instant::now();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dsh"))
        .arg("acp")
        .env_clear()
        .env("HOME", home.path())
        .current_dir(home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start dsh acp");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    stdin
        .write_all(format!("{INITIALIZE}\n").as_bytes())
        .await
        .unwrap();
    // The answer's line, within a second of the start (a daemon started included).
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    let answered = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        while !seen.contains(&b'\n') {
            let n = stdout.read(&mut buf).await.unwrap();
            assert!(n > 0, "stdout ended before an answer");
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    let elapsed = started.elapsed();
    assert!(
        answered.is_ok(),
        "no answer within 1 s; stdout so far: {:?}",
        String::from_utf8_lossy(&seen)
    );
    // While the connection is open, its daemon runs, from the runtime dir it made.
    let daemons = daemons_on(&socket);
    assert_eq!(daemons.len(), 1, "{daemons:?}");
    // The end of the connection: everything stdout ever carried is that one line.
    drop(stdin);
    stdout.read_to_end(&mut seen).await.unwrap();
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{status}");
    let text = String::from_utf8(seen).expect("stdout is UTF-8");
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    assert_eq!(lines.len(), 1, "more than the answer on stdout: {text:?}");
    assert!(lines[0].ends_with('\n') && !lines[0].ends_with("\r\n"));
    let answer: Value = serde_json::from_str(lines[0]).expect("the line is JSON");
    // Byte for byte what the daemon serialized: compact JSON, nothing around it.
    assert_eq!(format!("{answer}\n"), lines[0]);
    assert_eq!(answer["jsonrpc"], "2.0");
    assert_eq!(answer["id"], 1);
    let types: Vec<&str> = answer["result"]["authMethods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["type"].as_str().unwrap_or("agent"))
        .collect();
    assert_eq!(types, ["agent", "terminal"], "{answer}");
    eprintln!("bare-environment initialize answered in {elapsed:?}");

    // Nothing uses the daemon now: it leaves by itself, and takes its socket along.
    tokio::time::timeout(std::time::Duration::from_secs(30), exited(daemons[0]))
        .await
        .expect("the idle daemon did not exit within 30 s");
    assert!(daemons_on(&socket).is_empty());
    assert!(!socket.exists(), "socket left behind");
    let _ = std::fs::remove_dir_all(&run_dir);
}
