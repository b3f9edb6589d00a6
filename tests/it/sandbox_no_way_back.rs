//! E7: nothing dsh runs can drive the daemon that started it. Through the real
//! daemon: a command, a detached grandchild that dropped its marker and left its
//! session, and a hook each connect to the daemon's socket and are refused, under
//! the local executor (the daemon knows its own descendants) and under the sandbox
//! (which also hides the socket). The test's own connection is the control: the
//! same socket serves an outside client.

use crate::common;
use crate::sandbox_escape::{NOBODY, PYTHON, daemon_as_nobody, visible_dir};

use common::daemon::SocketDaemon;
use std::path::Path;

/// Connects to the socket in argv[1], sends `initialize`, prints what came back (or
/// why it could not connect).
const CONNECT: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect-failed", e.errno); sys.exit(0)
s.sendall(b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1}}\n')
data = b""
while not data.endswith(b"\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print("answer", data.decode().strip())
"#;

fn script(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("connect.py");
    std::fs::write(&path, CONNECT).unwrap();
    path
}

/// Waits for a FIFO's writer and returns what it wrote (the test waits for the
/// event, not for time).
async fn read_fifo(path: std::path::PathBuf) -> String {
    let fifo = path.clone();
    let mut read = tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo).unwrap());
    // Bounded, so that an attempt that never ran fails the test instead of hanging it.
    match tokio::time::timeout(std::time::Duration::from_secs(60), &mut read).await {
        Ok(seen) => seen.unwrap(),
        Err(_) => {
            // Be the writer that never came, so the blocked reader ends too.
            drop(std::fs::OpenOptions::new().write(true).open(&path));
            let _ = read.await;
            panic!("the attempt never reported: it did not run");
        }
    }
}

/// An executable `dir/name.sh` that tries the daemon at `socket` and writes what it
/// got into the FIFO `dir/name.fifo`, then prints `then` (a hook's answer, say);
/// returns the program and a task reading the FIFO.
fn attempt(
    dir: &Path,
    name: &str,
    socket: &Path,
    then: &str,
) -> (std::path::PathBuf, tokio::task::JoinHandle<String>) {
    let fifo = dir.join(format!("{name}.fifo"));
    mkfifo(&fifo);
    let program = dir.join(format!("{name}.sh"));
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\n{PYTHON} {} {} > {}\n{then}\n",
            script(dir).display(),
            socket.display(),
            fifo.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    (program, tokio::spawn(read_fifo(fifo)))
}

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e7_a_command_and_its_detached_grandchild_cannot_drive_the_local_daemon() {
    let dir = visible_dir();
    let daemon = SocketDaemon::start(dir.path(), "kind = \"local\"\n").await;
    let script = script(dir.path());
    // The control: an outside client (this test) is served.
    let mut client = daemon.connect().await;
    let session = client.new_session(dir.path()).await;
    client.set_mode(&session, "auto").await;
    let sock = daemon.socket.display().to_string();
    let (out, _) = client
        .bash(&session, &format!("{PYTHON} {} {sock}", script.display()))
        .await;
    assert!(out.contains("answer") && out.contains("-32001"), "{out}");
    assert!(
        out.contains("\"id\":7") && out.contains("refuses connections"),
        "{out}"
    );
    // Detached: its own session, no marker, its parent gone before it connects.
    let fifo = dir.path().join("grandchild.fifo");
    mkfifo(&fifo);
    let reading = tokio::spawn(read_fifo(fifo.clone()));
    let (out, _) = client
        .bash(
            &session,
            &format!(
                "(setsid env -u DSH_TASK_MARK sh -c 'sleep 0.2; {PYTHON} {} {sock} > {}' &) ; echo started",
                script.display(),
                fifo.display()
            ),
        )
        .await;
    assert!(out.contains("started"), "{out}");
    let seen = reading.await.unwrap();
    assert!(seen.contains("-32001"), "the grandchild was served: {seen}");
    // The daemon still serves its editor.
    let (out, _) = client.bash(&session, "echo still-here").await;
    assert!(out.contains("still-here"), "{out}");
    drop(client);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e7_a_hook_cannot_drive_its_daemon() {
    let dir = visible_dir();
    let socket = dir.path().join("run/dsh.sock");
    let (hook, reading) = attempt(
        dir.path(),
        "hook",
        &socket,
        "echo '{\"decision\":\"allow\"}'",
    );
    let config = format!(
        "kind = \"local\"\n[[hooks.command]]\nevent = \"pre_tool\"\nargv = [\"{}\"]\n",
        hook.display()
    );
    let daemon = SocketDaemon::start(dir.path(), &config).await;
    let mut client = daemon.connect().await;
    let session = client.new_session(dir.path()).await;
    client.set_mode(&session, "auto").await;
    let _ = client.bash(&session, "true").await;
    let seen = reading.await.unwrap();
    assert!(seen.contains("-32001"), "the hook was served: {seen}");
    drop(client);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e7_an_mcp_server_cannot_drive_its_daemon() {
    let dir = visible_dir();
    let daemon = SocketDaemon::start(dir.path(), "kind = \"local\"\n").await;
    // A "server" that, instead of answering the handshake, connects to its daemon.
    let (server, reading) = attempt(dir.path(), "server", &daemon.socket, "");
    let mut client = daemon.connect().await;
    let servers = serde_json::json!([{"name": "sly", "command": server, "args": [], "env": []}]);
    let _ = client
        .request(
            "session/new",
            serde_json::json!({"cwd": dir.path(), "mcpServers": servers}),
        )
        .await;
    let seen = reading.await.unwrap();
    assert!(seen.contains("-32001"), "the MCP server was served: {seen}");
    drop(client);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e7_under_the_sandbox_the_socket_is_out_of_reach_by_path_runtime_dir_and_proc() {
    let dir = visible_dir();
    let script = script(dir.path());
    // Unix sockets allowed, so what keeps the command out is the mask, not seccomp.
    let config = "kind = \"sandbox\"\n[exec.sandbox]\nallow_unix_sockets = true\n";
    let runtime = dir.path().join("run");
    std::fs::create_dir(&runtime).unwrap();
    let daemon = SocketDaemon::start_with(dir.path(), config, |cmd| {
        cmd.env("XDG_RUNTIME_DIR", &runtime);
    })
    .await;
    // A service of the user's in the runtime directory, reachable locally.
    let service = runtime.join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&service).unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let mut client = daemon.connect().await;
    let session = client.new_session(&ws).await;
    client.set_mode(&session, "auto").await;
    for target in [&daemon.socket, &service] {
        let (out, _) = client
            .bash(
                &session,
                &format!("{PYTHON} {} {}", script.display(), target.display()),
            )
            .await;
        assert!(
            out.contains("connect-failed 2"),
            "{}: {out}",
            target.display()
        );
    }
    let (out, _) = client
        .bash(
            &session,
            &format!("ls /proc/{}/root/ 2>&1 | head -1", daemon.pid),
        )
        .await;
    assert!(out.contains("No such file"), "{out}");
    drop(client);
    daemon.stop().await;
}

/// The premise is built, not assumed: the socket's directory is one every sandbox shows
/// ([`visible_dir`], never under /tmp, whose sandbox copy is private), and the wait for
/// the daemon's refusal is bounded: a daemon that started after all fails the test with
/// a message instead of hanging it (as it did from a checkout under /tmp, issue 42).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e7_a_daemon_whose_socket_every_sandbox_would_show_refuses_to_start() {
    // A socket in a directory the sandbox shows read-only (connect needs no write).
    let dir = visible_dir();
    let socket = dir.path().join("run/dsh.sock");
    let config = common::daemon::write_config(dir.path(), "kind = \"sandbox\"\n");
    let mut serve = common::dsh();
    serve
        .args(["serve", "--socket"])
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--config")
        .arg(config)
        .env_remove("XDG_RUNTIME_DIR");
    // Dropped on the timeout, the daemon is killed (`common::dsh` kills on drop).
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), serve.output())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the daemon did not refuse to start within 60 s: every sandbox shows {}, \
                 so it should have",
                socket.display()
            )
        })
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("dsh's own socket"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e7_a_command_is_refused_when_its_root_would_show_the_daemons_socket() {
    let dir = visible_dir();
    // The socket in the runtime directory, which the sandbox masks; the session works
    // in that directory, so its root would show the socket again.
    let runtime = dir.path().join("run");
    std::fs::create_dir(&runtime).unwrap();
    let daemon = SocketDaemon::start_with(dir.path(), "kind = \"sandbox\"\n", |cmd| {
        cmd.env("XDG_RUNTIME_DIR", &runtime);
    })
    .await;
    let run = daemon.socket.parent().unwrap().to_path_buf();
    let mut client = daemon.connect().await;
    let session = client.new_session(&run).await;
    client.set_mode(&session, "auto").await;
    let (out, is_error) = client.bash(&session, "echo ran").await;
    assert!(is_error, "{out}");
    assert!(out.contains("dsh's own socket"), "{out}");
    // Elsewhere, commands run.
    let ws = common::daemon::workspace(dir.path(), "ws");
    let other = client.new_session(&ws).await;
    client.set_mode(&other, "auto").await;
    let (out, is_error) = client.bash(&other, "echo ran").await;
    assert!(!is_error && out.contains("ran"), "{out}");
    drop(client);
    daemon.stop().await;
}

/// Attaches with ptrace to each pid named `label=pid` in argv, waits for the stop
/// and detaches at once (the tracee runs on), printing `label attach=ERRNO` (0: it
/// could be traced, so its memory and descriptors were the command's).
const TRACE: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for arg in sys.argv[1:]:
    label, pid = arg.split("=")
    pid = int(pid)
    ctypes.set_errno(0)
    attached = libc.ptrace(16, pid, None, None) == 0
    errno = ctypes.get_errno()
    if attached:
        os.waitpid(pid, 0x40000000)
        libc.ptrace(17, pid, None, None)
    print(label, "attach=%d" % (0 if attached else errno))
"#;

/// E7 under the local executor: a command runs as the daemon's user, and where the
/// kernel lets a process trace another of its user (no Yama, as here, or scope 0),
/// it could attach to the daemon and drive it from inside, never touching the
/// socket. The daemon is not dumpable, so the attach is refused; an ordinary
/// process of the same user, traced by the same command, is the control. Run as
/// `nobody` when the suite is root (root's commands hold `CAP_SYS_PTRACE`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e7_a_local_command_cannot_trace_its_daemon() {
    let root = nix::unistd::geteuid().is_root();
    let dir = visible_dir();
    let trace = dir.path().join("trace.py");
    std::fs::write(&trace, TRACE).unwrap();
    let mut control = tokio::process::Command::new("sleep");
    control.arg("600").kill_on_drop(true);
    if root {
        control.uid(NOBODY).gid(NOBODY);
    }
    let control = control.spawn().unwrap();
    let (ws, mut daemon, mut client) =
        daemon_as_nobody(dir.path(), "kind = \"local\"\n", root).await;
    let session = client.new_session(&ws).await;
    client.set_mode(&session, "auto").await;
    let (out, _) = client
        .bash(
            &session,
            &format!(
                "{PYTHON} {} control={} daemon={}",
                trace.display(),
                control.id().unwrap(),
                daemon.id().unwrap()
            ),
        )
        .await;
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").unwrap_or_default();
    if matches!(yama.trim(), "" | "0") {
        assert!(
            out.contains("control attach=0"),
            "the attack works on a traceable process: {out}"
        );
    }
    assert!(out.contains("daemon attach=1\n"), "EPERM: {out}");
    drop(client);
    let status = daemon.wait().await.unwrap();
    assert!(status.success(), "{status}");
}
