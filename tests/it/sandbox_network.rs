//! E10, the sandbox's network in `proxy` mode (issue 28): a command reaches a host only
//! through dsh's proxy, which asks the judge about each host:port; nothing inside
//! resolves names, and a connection that ignores the proxy goes nowhere. Real bwrap,
//! real curl and sockets; every server is the test's own, on the host's loopback.

use crate::common;
use crate::sandbox_escape::{PYTHON, visible_dir};

use dsh::config::{ExecConfig, ExecutorKind, NetworkMode};
use dsh::exec::netproxy::{
    Admission, CommandOrigin, ConnectRequest, ConnectionGate, ConnectionJudge,
};
use dsh::exec::{BashExecutor, ExecRequest, LocalExecutor, SandboxExecutor};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Allows the hosts it was given, refuses the rest, and remembers every question
/// with the command that asked.
#[derive(Default)]
struct ListJudge {
    allowed: Vec<String>,
    asked: Arc<Mutex<Vec<(String, String)>>>,
}

struct ListGate {
    allowed: Vec<String>,
    origin: CommandOrigin,
    asked: Arc<Mutex<Vec<(String, String)>>>,
}

impl ConnectionJudge for ListJudge {
    fn gate_for(&self, origin: CommandOrigin) -> Arc<dyn ConnectionGate> {
        Arc::new(ListGate {
            allowed: self.allowed.clone(),
            origin,
            asked: self.asked.clone(),
        })
    }
}

#[async_trait::async_trait]
impl ConnectionGate for ListGate {
    async fn admit(&self, request: &ConnectRequest) -> Admission {
        let host = request.destination.to_string();
        self.asked
            .lock()
            .unwrap()
            .push((host.clone(), self.origin.command.clone()));
        if self.allowed.contains(&host) {
            Admission::Allow
        } else {
            Admission::Deny {
                reason: format!("the test refuses {host}"),
            }
        }
    }
}

fn config(state: &Path, mode: NetworkMode) -> ExecConfig {
    let mut cfg = common::test_config(state);
    cfg.kind = ExecutorKind::Sandbox;
    cfg.sandbox.network.mode = mode;
    cfg
}

async fn run(exec: &dyn BashExecutor, command: &str, root: &Path) -> String {
    let out = exec
        .run(
            exec.resolve(ExecRequest {
                command: command.to_string(),
                workdir: Some(root.to_path_buf()),
                writable_roots: vec![root.to_path_buf()],
                ..ExecRequest::default()
            }),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    format!("{}{}", out.stdout.text, out.stderr.text)
}

/// A one-shot HTTP server on the host's loopback answering `hello from PORT`.
async fn http_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let body = format!("hello from {port}");
                let _ = conn
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .await;
            });
        }
    });
    port
}

/// E10: an allowed host is reached through the proxy (by name: the proxy resolves
/// it), a refused one gets the proxy's 403 with the reason, and the command's output
/// ends with what was refused. The judge hears the command that asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_an_allowed_host_is_reached_and_a_refused_one_gets_the_reason() {
    let port = http_server().await;
    let other = http_server().await;
    let state = tempfile::tempdir().unwrap();
    let exec = SandboxExecutor::new(&config(state.path(), NetworkMode::Proxy), &[]).unwrap();
    let judge = Arc::new(ListJudge {
        allowed: vec![format!("localhost:{port}")],
        ..Default::default()
    });
    exec.set_connection_judge(judge.clone());
    let dir = visible_dir();
    // NO_PROXY names localhost for the sandbox's own loopback; this test's servers
    // are on the host's, so the command asks the proxy for them.
    let command = format!(
        "NO_PROXY= no_proxy= curl -s http://localhost:{port}/; echo; \
         NO_PROXY= no_proxy= curl -s -w ' %{{http_code}}' http://localhost:{other}/"
    );
    let out = run(&exec, &command, dir.path()).await;
    assert!(out.contains(&format!("hello from {port}\n")), "{out}");
    assert!(
        out.contains(&format!("the test refuses localhost:{other}\n 403")),
        "the proxy's 403 says why: {out}"
    );
    assert!(
        out.contains(&format!(
            "dsh: the sandbox's network refused localhost:{other} (http): the test refuses"
        )),
        "{out}"
    );
    let asked = judge.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked.iter().all(|(_, cmd)| *cmd == command), "{asked:?}");
    exec.shutdown().await;
}

/// E10: with the proxy mode, nothing inside resolves a name (no resolver can be
/// reached: "try again", not "no such name"), and a TCP connection or a UDP datagram
/// that ignores the proxy reaches nothing of the host's (shown reaching the test's
/// own servers on the host's loopback locally first), while the sandbox's own
/// loopback works (a server the command starts). Nothing here sends a packet
/// anywhere but this machine's loopback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_dns_raw_tcp_and_udp_go_nowhere_and_the_own_loopback_works() {
    let port = http_server().await;
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let probe = format!(
        r#"
import socket, sys
def attempt(name, f):
    try:
        f(); print(name, "ok")
    except OSError as e:
        print(name, "failed", e.errno)
if sys.argv[1] == "sandbox":
    attempt("dns", lambda: socket.getaddrinfo("dsh-sandbox-test.invalid", 80))
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=5).close())
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"datagram", ("127.0.0.1", {udp_port}))
attempt("udp", udp)
server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen()
client = socket.create_connection(server.getsockname()); conn, _ = server.accept()
client.sendall(b"own"); print("loopback", conn.recv(3).decode())
"#
    );
    let dir = visible_dir();
    std::fs::write(dir.path().join("probe.py"), probe).unwrap();
    let state = tempfile::tempdir().unwrap();
    let local = LocalExecutor::new(&common::test_config(state.path())).unwrap();
    let out = run(&local, &format!("{PYTHON} probe.py local"), dir.path()).await;
    assert!(
        out.contains("tcp ok"),
        "a raw connection works locally: {out}"
    );
    let mut got = [0u8; 16];
    // Loopback delivers a datagram before `sendto` returns.
    assert_eq!(
        udp.recv(&mut got).ok(),
        Some(8),
        "locally the datagram arrives"
    );
    local.shutdown().await;
    let exec = SandboxExecutor::new(&config(state.path(), NetworkMode::Proxy), &[]).unwrap();
    let out = run(&exec, &format!("{PYTHON} probe.py sandbox"), dir.path()).await;
    assert!(
        out.contains(&format!("dns failed {}", -3)),
        "EAI_AGAIN: {out}"
    );
    assert!(out.contains("tcp failed 111"), "{out}");
    assert!(out.contains("loopback own"), "{out}");
    assert!(
        udp.recv(&mut got).is_err(),
        "the sandbox's datagram reached the host's loopback"
    );
    exec.shutdown().await;
}
