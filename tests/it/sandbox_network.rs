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
use dsh::exec::{BashExecutor, LocalExecutor, SandboxExecutor};
use std::path::Path;
use std::sync::{Arc, Mutex};

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
    crate::sandbox_escape::run_in(exec, command, root)
        .await
        .unwrap()
}

/// A one-shot HTTP server on the host's loopback answering `hello from PORT`.
pub(crate) async fn http_server() -> u16 {
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
/// ends with what was refused. The judge hears the command that asked. Locally the
/// same command reaches both hosts unasked (the attack without the defence).
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
    // Without the sandbox the command reaches both, and nobody is asked.
    let state_local = tempfile::tempdir().unwrap();
    let local = LocalExecutor::new(&common::test_config(state_local.path())).unwrap();
    let out = run(&local, &command, dir.path()).await;
    assert!(out.contains(&format!("hello from {other} 200")), "{out}");
    local.shutdown().await;
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

/// A daemon under the sandbox (proxy mode, the default) in mode `mode`, with `extra`
/// config after `[permissions]`.
async fn daemon(
    dir: &Path,
    mode: &str,
    extra: &str,
) -> (tokio::process::Child, common::client::Client) {
    common::daemon::stdio_daemon(
        dir,
        &format!("kind = \"sandbox\"\n[permissions]\ndefault_mode = \"{mode}\"\n{extra}"),
        &[],
    )
    .await
}

/// The audit lines of `network` calls, oldest first.
fn network_audit(state: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(state.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["event"] == "execution" && l["tool"] == "network")
        .collect()
}

/// `curl` through the proxy to the host's loopback (NO_PROXY emptied: it names the
/// sandbox's own loopback), printing the body or the proxy's refusal and the status.
fn curl(port: u16) -> String {
    format!("NO_PROXY= no_proxy= curl -s -w ' %{{http_code}}\\n' http://localhost:{port}/")
}

/// E10 through the daemon: each new host:port is a `network` call through the
/// waterfall. In mode ask the person is asked once per host for the command (200
/// connections to an allowed host, one question), a rejected host gets the proxy's
/// refusal, the result ends with what was refused, and each call has its audit line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_each_host_is_asked_once_per_command_and_a_rejected_one_is_refused() {
    let (asked, refused) = (http_server().await, http_server().await);
    let dir = tempfile::tempdir().unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let (_daemon, mut c) = daemon(dir.path(), "ask", "").await;
    let s = c.new_session(&ws).await;
    let command = format!(
        "for i in $(seq 200); do {} ; done | sort | uniq -c; {}",
        curl(asked),
        curl(refused)
    );
    // The bash call itself, then one question per host.
    c.permission_answers
        .extend(["allow_once", "allow_once", "reject_once"]);
    let (out, is_error) = c.bash(&s, &command).await;
    assert!(!is_error, "{out}");
    assert!(
        out.contains(&format!("200 hello from {asked} 200")),
        "200 connections, all through: {out}"
    );
    assert!(out.contains(" 403"), "{out}");
    assert!(
        out.contains(&format!(
            "dsh: the sandbox's network refused localhost:{refused} (http)"
        )),
        "{out}"
    );
    assert_eq!(
        c.permission_requests.len(),
        3,
        "{:?}",
        c.permission_requests
    );
    let questions: Vec<&serde_json::Value> = c.permission_requests[1..].iter().collect();
    for (question, port) in questions.iter().zip([asked, refused]) {
        let input = &question["toolCall"]["rawInput"];
        assert_eq!(input["host"], "localhost", "{question}");
        assert_eq!(input["port"], port, "{question}");
        assert_eq!(input["command"], command.as_str(), "{question}");
    }
    let lines = network_audit(&dir.path().join("state"));
    assert_eq!(lines.len(), 2, "{lines:?}");
}

/// E10: the model (or a client) cannot call `network` itself: its question would put
/// the model's words in a command's mouth. It is not offered either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_the_network_tool_is_dshs_own_never_the_models() {
    let dir = tempfile::tempdir().unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let (_daemon, mut c) = daemon(dir.path(), "ask", "").await;
    let s = c.new_session(&ws).await;
    let call = c
        .tool(
            Some(&s),
            "network",
            serde_json::json!({"host": "example.com", "port": 443, "scheme": "https",
                               "command": "cargo build"}),
        )
        .await;
    assert_eq!(call, ("Error: unknown tool `network`".to_string(), true));
    assert!(c.permission_requests.is_empty());
}

/// E10: rules decide without asking: the `[exec.sandbox.network] allow` list lets
/// one host:port through, a `host`/`port` rule refuses another (its reason names
/// the rule), and a tool-wide network deny refuses every host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_rules_and_the_allow_list_decide_without_asking() {
    let (open, closed) = (http_server().await, http_server().await);
    let dir = tempfile::tempdir().unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let config = format!(
        "kind = \"sandbox\"\n[exec.sandbox.network]\nallow = [\"localhost:{open}\"]\n\
         [permissions]\ndefault_mode = \"auto\"\n\
         [[permissions.rules]]\ntool = \"network\"\nhost = \"localhost\"\nport = {closed}\naction = \"deny\"\n"
    );
    let (_daemon, mut c) = common::daemon::stdio_daemon(dir.path(), &config, &[]).await;
    let s = c.new_session(&ws).await;
    let (out, _) = c
        .bash(&s, &format!("{}; {}", curl(open), curl(closed)))
        .await;
    assert!(out.contains(&format!("hello from {open} 200")), "{out}");
    assert!(out.contains(" 403"), "{out}");
    assert!(
        out.contains("rule network"),
        "the reason names the rule: {out}"
    );
    assert!(c.permission_requests.is_empty());
    drop(c);

    let dir = tempfile::tempdir().unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let deny = "[[permissions.rules]]\ntool = \"network\"\naction = \"deny\"\n";
    let (_daemon, mut c) = daemon(dir.path(), "auto", deny).await;
    let s = c.new_session(&ws).await;
    let (out, _) = c.bash(&s, &curl(open)).await;
    assert!(
        out.contains(" 403") && out.contains("rule network"),
        "{out}"
    );
    assert!(c.permission_requests.is_empty());
}

/// A pre_tool hook that refuses the port in `REFUSED_PORT`, and passes the rest.
const PORT_HOOK: &str = r#"#!/usr/bin/env python3
import json, os, sys
call = json.load(sys.stdin)
if call["arguments"].get("port") == int(os.environ["REFUSED_PORT"]):
    print(json.dumps({"decision": "deny", "reason": "the hook keeps this port closed"}))
"#;

/// E10: a pre_tool hook with `tools = ["network"]` sees each connection's call and
/// can refuse one host while another goes through (mode auto, a rule allowing
/// localhost: the hook's deny outranks it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_a_hook_refuses_one_host_and_lets_another_through() {
    let (open, closed) = (http_server().await, http_server().await);
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("port-hook");
    std::fs::write(&hook, PORT_HOOK).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = format!(
        "kind = \"sandbox\"\n[permissions]\ndefault_mode = \"auto\"\n\
         [[permissions.rules]]\ntool = \"network\"\nhost = \"localhost\"\naction = \"allow\"\n\
         [[hooks.command]]\nargv = [{hook:?}]\nname = \"ports\"\ntools = [\"network\"]\n\
         env = [\"REFUSED_PORT\"]\n"
    );
    let closed_text = closed.to_string();
    let (_daemon, mut c) = common::daemon::stdio_daemon(
        dir.path(),
        &config,
        &[("REFUSED_PORT", closed_text.as_str())],
    )
    .await;
    let s = c
        .new_session(&common::daemon::workspace(dir.path(), "ws"))
        .await;
    let (out, _) = c
        .bash(&s, &format!("{}; {}", curl(open), curl(closed)))
        .await;
    assert!(out.contains(&format!("hello from {open} 200")), "{out}");
    assert!(out.contains("the hook keeps this port closed"), "{out}");
    assert!(c.permission_requests.is_empty());
}

/// E10: a background task holding a tunnel to a host server is listed by `dsh status`
/// with its open proxied connection, and when the daemon stops every proxied
/// connection is closed: the server reads an end of file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_the_daemons_shutdown_closes_every_proxied_connection() {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let holder = format!(
        "import socket, time\n\
         s = socket.create_connection(('127.0.0.1', 3128))\n\
         s.sendall(b'CONNECT localhost:{port} HTTP/1.1\\r\\nHost: localhost:{port}\\r\\n\\r\\n')\n\
         print(s.recv(100)); time.sleep(600)\n"
    );
    std::fs::write(ws.join("hold.py"), holder).unwrap();
    let allow = "[[permissions.rules]]\ntool = \"network\"\naction = \"allow\"\n";
    let (mut daemon, mut c) = daemon(dir.path(), "auto", allow).await;
    let s = c.new_session(&ws).await;
    let task = c.start_task(&s, &format!("{PYTHON} hold.py")).await;
    let (mut upstream, _) =
        tokio::time::timeout(std::time::Duration::from_secs(60), listener.accept())
            .await
            .expect("the tunnel reached the host server")
            .unwrap();
    // `dsh status` lists the task's open proxied connection.
    let status = c
        .request("_dsh/status", serde_json::json!({}))
        .await
        .unwrap();
    let listed = status["runningTasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["taskId"] == task.as_str())
        .cloned()
        .unwrap_or_default();
    assert_eq!(listed["proxiedConnections"], 1, "{status}");
    drop(c);
    let status = daemon.wait().await.unwrap();
    assert!(status.success(), "{status}");
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(std::time::Duration::from_secs(60), upstream.read(&mut byte))
        .await
        .expect("the connection outlived the daemon");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

/// E10: "always" is remembered per host: a second command in the session reaches it
/// without a question, and so does one after the daemon restarts and the editor
/// loads the session again (the answer is in the session's log). The bash calls
/// themselves are asked each time (mode ask): only the network question goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_always_is_remembered_per_host_across_commands_and_a_restart() {
    let port = http_server().await;
    let dir = tempfile::tempdir().unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let (mut first, mut c) = daemon(dir.path(), "ask", "").await;
    let s = c.new_session(&ws).await;
    c.permission_answers.extend(["allow_once", "allow_always"]);
    let (out, _) = c.bash(&s, &curl(port)).await;
    assert!(out.contains(&format!("hello from {port} 200")), "{out}");
    assert_eq!(c.permission_requests.len(), 2);
    c.permission_answers.push_back("allow_once");
    let (out, _) = c.bash(&s, &format!("{} # again", curl(port))).await;
    assert!(out.contains(&format!("hello from {port} 200")), "{out}");
    assert_eq!(
        c.permission_requests.len(),
        3,
        "only the bash call was asked"
    );
    drop(c);
    assert!(first.wait().await.unwrap().success());

    let (_second, mut c) = daemon(dir.path(), "ask", "").await;
    c.load_session(&s, &ws).await;
    c.permission_answers.push_back("allow_once");
    let (out, _) = c.bash(&s, &format!("{} # after", curl(port))).await;
    assert!(out.contains(&format!("hello from {port} 200")), "{out}");
    assert_eq!(
        c.permission_requests.len(),
        1,
        "{:?}",
        c.permission_requests
    );
}

/// E10: a network call is as replayable and shadowable as any: a `[permissions]
/// shadow` candidate that would refuse the host is traced on the call's audit line
/// (and changes nothing), and `dsh policy replay` of that audit under a stricter
/// config reports the connection going from allow to deny.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_network_calls_are_shadowed_and_replayed_like_any_call() {
    let port = http_server().await;
    let dir = tempfile::tempdir().unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let stricter = dir.path().join("stricter.toml");
    std::fs::write(
        &stricter,
        "[permissions]\ndefault_mode = \"auto\"\n[[permissions.rules]]\ntool = \"network\"\nhost = \"localhost\"\naction = \"deny\"\n",
    )
    .unwrap();
    let extra = format!(
        "shadow = {stricter:?}\n[[permissions.rules]]\ntool = \"network\"\naction = \"allow\"\n"
    );
    let (mut d, mut c) = daemon(dir.path(), "auto", &extra).await;
    let s = c.new_session(&ws).await;
    let (out, _) = c.bash(&s, &curl(port)).await;
    assert!(out.contains(&format!("hello from {port} 200")), "{out}");
    drop(c);
    assert!(d.wait().await.unwrap().success());
    let state = dir.path().join("state");
    let lines = network_audit(&state);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let shadow = lines[0]["trace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "shadow policy")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (shadow["decision"].as_str(), shadow["enforced"].as_bool()),
        (Some("deny"), Some(false)),
        "{}",
        lines[0]
    );
    let out = std::process::Command::new(common::daemon::BIN)
        .args(["policy", "replay", "--json", "--audit"])
        .arg(state.join("audit.jsonl"))
        .arg("--config")
        .arg(&stricter)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let changes = report["changes"].as_array().unwrap();
    let network: Vec<&serde_json::Value> =
        changes.iter().filter(|c| c["tool"] == "network").collect();
    assert_eq!(network.len(), 1, "{report}");
    assert_eq!(
        (network[0]["from"].as_str(), network[0]["to"].as_str()),
        (Some("allow"), Some("deny")),
        "{report}"
    );
}

/// E10: a connection waits while its question is open, bounded by the command's own
/// timeout: unanswered, the command times out cleanly, the question is withdrawn and
/// its audit line written, and the next command's question is asked and answered as
/// usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_an_unanswered_question_ends_with_the_commands_timeout() {
    let port = http_server().await;
    let dir = tempfile::tempdir().unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let (_daemon, mut c) = daemon(dir.path(), "auto", "").await;
    let s = c.new_session(&ws).await;
    c.ignore_permissions = true;
    let (out, _) = c
        .tool(
            Some(&s),
            "bash",
            serde_json::json!({"command": curl(port), "description": "d", "timeoutMs": 2000}),
        )
        .await;
    assert!(out.contains("timed out"), "{out}");
    assert_eq!(c.permission_requests.len(), 1);
    c.ignore_permissions = false;
    c.permission_answers.push_back("allow_once");
    let (out, _) = c.bash(&s, &curl(port)).await;
    assert!(out.contains(&format!("hello from {port} 200")), "{out}");
    assert_eq!(c.permission_requests.len(), 2);
    // The withdrawn question is on record too: two network calls, two audit lines.
    let lines = network_audit(&dir.path().join("state"));
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_ne!(lines[0]["outcome"], "ok", "{}", lines[0]);
}

/// E10, bounded: a command that asks for host after host gets at most 256 judged (and
/// audited); past that each is refused without a question, and its output names the
/// first refusals and counts the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_a_flood_of_hosts_is_judged_up_to_a_bound_then_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let flood = "import socket\n\
                 bounded = 0\n\
                 for i in range(300):\n\
                 \x20   s = socket.create_connection(('127.0.0.1', 3128))\n\
                 \x20   s.sendall(b'CONNECT h%d.example:443 HTTP/1.1\\r\\n\\r\\n' % i)\n\
                 \x20   answer = b''\n\
                 \x20   while b'\\r\\n\\r\\n' not in answer or len(answer) < 200:\n\
                 \x20       chunk = s.recv(4096)\n\
                 \x20       if not chunk: break\n\
                 \x20       answer += chunk\n\
                 \x20   bounded += b'more than 256 hosts' in answer\n\
                 \x20   s.close()\n\
                 print('bounded', bounded)\n";
    std::fs::write(ws.join("flood.py"), flood).unwrap();
    let deny = "[[permissions.rules]]\ntool = \"network\"\naction = \"deny\"\n";
    let (mut d, mut c) = daemon(dir.path(), "auto", deny).await;
    let s = c.new_session(&ws).await;
    let (out, _) = c.bash(&s, &format!("{PYTHON} flood.py")).await;
    assert!(out.contains("bounded 44\n"), "{out}");
    assert!(
        out.contains("dsh: the sandbox's network refused 280 more connection(s)"),
        "20 named, the rest counted: {out}"
    );
    assert!(c.permission_requests.is_empty());
    drop(c);
    assert!(d.wait().await.unwrap().success());
    assert_eq!(network_audit(&dir.path().join("state")).len(), 256);
}

/// Logs `enter PORT` and `exit PORT` around half a second of thinking, then answers
/// allow_once: a permission hook standing in for the person.
const SLOW_APPROVER: &str = r#"#!/usr/bin/env python3
import json, os, sys, time
call = json.load(sys.stdin)
port = call["arguments"]["port"]
with open(os.environ["HOOK_LOG"], "a") as log:
    log.write("enter %d\n" % port); log.flush()
    time.sleep(0.5)
    log.write("exit %d\n" % port)
print(json.dumps({"answer": "allow_once", "reason": "the test approves"}))
"#;

/// E10: a command's questions come one at a time: two connections to two new hosts
/// opened together are asked about one after the other (a permission hook that takes
/// half a second never sees the second before it answered the first), and both go
/// through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_a_commands_questions_come_one_at_a_time() {
    let (a, b) = (http_server().await, http_server().await);
    let dir = tempfile::tempdir().unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let hook = dir.path().join("approver");
    std::fs::write(&hook, SLOW_APPROVER).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let log = dir.path().join("hook.log");
    let config = format!(
        "kind = \"sandbox\"\n[permissions]\ndefault_mode = \"auto\"\n\
         [[hooks.command]]\nargv = [{hook:?}]\nname = \"approver\"\nevent = \"permission\"\n\
         env = [\"HOOK_LOG\"]\n"
    );
    let log_text = log.display().to_string();
    let (_daemon, mut c) =
        common::daemon::stdio_daemon(dir.path(), &config, &[("HOOK_LOG", log_text.as_str())]).await;
    let s = c.new_session(&ws).await;
    let (out, _) = c
        .bash(&s, &format!("{} & {}; wait", curl(a), curl(b)))
        .await;
    assert!(out.contains(&format!("hello from {a} 200")), "{out}");
    assert!(out.contains(&format!("hello from {b} 200")), "{out}");
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| l.split(' ').next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        lines,
        ["enter", "exit", "enter", "exit"],
        "never two at once"
    );
    assert!(c.permission_requests.is_empty());
}
