//! The editor's MCP servers (issue 17) through the real daemon, with a real MCP server
//! process (examples/mcp_fixture.rs, rmcp's server side): its tools are offered to the
//! model as `mcp__<server>__<tool>`, every call goes through the waterfall (schema,
//! rules by tool glob, modes, readOnlyHint), results are bounded like command output,
//! a server that fails or dies is reported and its tools withdrawn, and the servers and
//! everything they started end with the session's close, delete and the daemon's
//! shutdown (seen in the process table). Under `[exec] kind = "ssh"` they run on the
//! remote host (the loopback sshd), over the executor's connection.

use crate::common;
use common::assert_on_no_command_line;
use common::client::Client;
use common::daemon::{SocketDaemon, workspace};
use common::fake_model::{FakeModel, messages, text, tool_call};
use common::sshd::Sshd;
use dsh::config::HelperMode;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// The fixture as a client passes it in `mcpServers`, named `name`.
fn fixture(name: &str, args: &[&str]) -> Value {
    json!({
        "name": name,
        "command": common::mcp_fixture(),
        "args": args,
        "env": [{"name": "FIXTURE_TOKEN", "value": "tok-123"}]
    })
}

async fn new_session_with(c: &mut Client, cwd: &Path, servers: Value) -> String {
    let r = c
        .request("session/new", json!({"cwd": cwd, "mcpServers": servers}))
        .await
        .expect("session/new");
    r["sessionId"].as_str().expect("sessionId").to_string()
}

/// The agent messages `session` was sent, joined.
fn agent_text(c: &Client, session: &str) -> String {
    c.updates_of(session, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// Waits (bounded) until `pid` is gone.
async fn gone(pid: i32, what: &str) {
    for _ in 0..1000 {
        if !common::alive(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} (pid {pid}) outlived what started it");
}

/// The fixture's own pid, from its `whoami` tool.
async fn server_pid(c: &mut Client, session: &str, server: &str) -> i32 {
    let (out, is_error) = c
        .tool(Some(session), &format!("mcp__{server}__whoami"), json!({}))
        .await;
    assert!(!is_error, "{out}");
    out.rsplit(' ').next().unwrap().parse().unwrap()
}

/// A child the server detached (a session of its own) ends with the session's servers
/// too, even when the server itself had already exited.
async fn detached_children_end_with_close(c: &mut Client, ws: &Path) {
    let s = new_session_with(c, ws, json!([fixture("fx", &[])])).await;
    let (detached, _) = c.tool(Some(&s), "mcp__fx__detach", json!({})).await;
    let detached: i32 = detached.parse().unwrap();
    let (escaped, _) = c.tool(Some(&s), "mcp__fx__detach", json!({})).await;
    let escaped: i32 = escaped.parse().unwrap();
    let (out, _) = c.tool(Some(&s), "mcp__fx__crash", json!({})).await;
    assert!(out.contains("`fx`"), "{out}");
    assert!(common::alive(detached) && common::alive(escaped));
    c.request("session/close", json!({"sessionId": s}))
        .await
        .unwrap();
    gone(detached, "a detached child after session/close").await;
    gone(
        escaped,
        "a detached child of a crashed server after session/close",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tools_are_offered_to_the_model_and_judged_by_the_waterfall() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = FakeModel::start(vec![
        tool_call("c1", "mcp__fx__add", r#"{"a": 2, "b": 40}"#),
        text("done"),
    ])
    .await;
    // write_config's [exec] table comes first: its keys lead.
    let config = format!(
        "max_output_bytes = 4096\n[permissions]\ndefault_mode = \"auto\"\n\
         [[permissions.rules]]\ntool = \"mcp__fx__touch\"\naction = \"deny\"\n\
         [[permissions.rules]]\ntool = \"mcp__fx__echo\"\naction = \"allow\"\n\
         [[permissions.rules]]\ntool = \"mcp__fx__add\"\naction = \"allow\"\n\
         [mcp]\ncall_timeout_ms = 500\n{}",
        model.config()
    );
    let daemon = SocketDaemon::start(dir.path(), &config).await;
    let ws = workspace(dir.path(), "ws");
    let mut c = daemon.connect().await;
    let s = new_session_with(&mut c, &ws, json!([fixture("fx", &[])])).await;

    // The model is offered the server's tools, with their schemas, and its call runs.
    let answer = c.prompt(&s, "add them").await.unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    let first = model.requests.recv().await.unwrap();
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for name in ["bash", "mcp__fx__echo", "mcp__fx__add", "mcp__fx__touch"] {
        assert!(offered.contains(&name), "{name} not in {offered:?}");
    }
    let add = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__fx__add")
        .unwrap();
    assert_eq!(add["function"]["parameters"]["required"], json!(["a", "b"]));
    let second = model.requests.recv().await.unwrap();
    let result = messages(&second)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(result["content"], "42");
    // The editor saw the call titled by the tool's name, with its arguments, and not as
    // a command (ACP's default kind, `other`, is left out on the wire).
    let call = c
        .updates_of(&s, "tool_call")
        .into_iter()
        .find(|u| u["toolCallId"] == "c1")
        .unwrap();
    assert_eq!(call["title"], "mcp__fx__add");
    assert_eq!(call["rawInput"], json!({"a": 2, "b": 40}));
    assert!(call["kind"].is_null() || call["kind"] == "other", "{call}");

    // Cwd and env reach the server.
    let (who, _) = c.tool(Some(&s), "mcp__fx__whoami", json!({})).await;
    assert!(
        who.starts_with(&format!("{} tok-123 ", ws.display())),
        "{who}"
    );
    // The server's env reached it beside its command line, never on one (`ps` shows
    // every process's command line to every local user).
    assert_on_no_command_line("tok-123");
    // The schema hook checks the server's input schema.
    let (out, is_error) = c
        .tool(Some(&s), "mcp__fx__add", json!({"a": "two", "b": 1}))
        .await;
    assert!(is_error && out.contains("`a` must be a integer"), "{out}");
    // A deny rule by tool name: the call never reaches the server.
    let touched = ws.join("touched");
    let (out, is_error) = c
        .tool(Some(&s), "mcp__fx__touch", json!({"path": touched}))
        .await;
    assert!(is_error && out.contains("deny"), "{out}");
    assert!(!touched.exists());
    // A long result keeps its tail and names the spill file holding all of it.
    let (out, is_error) = c
        .tool(Some(&s), "mcp__fx__big", json!({"bytes": 20000}))
        .await;
    assert!(!is_error);
    assert!(
        out.contains("END\n[output truncated; full output: "),
        "{out:.200}"
    );
    assert!(out.len() < 6000);
    let spill = out
        .rsplit("full output: ")
        .next()
        .unwrap()
        .trim_end_matches(']');
    let whole = std::fs::read_to_string(spill).unwrap();
    assert_eq!(whole.len(), 20003);
    // [mcp] call_timeout_ms bounds a call.
    let (out, is_error) = c.tool(Some(&s), "mcp__fx__slow", json!({"ms": 5000})).await;
    assert!(
        is_error && out.contains("did not answer within 500 ms"),
        "{out}"
    );

    // Read-only mode: a tool annotated readOnlyHint runs when a rule allows it; any
    // other is refused whatever the rules say.
    c.set_mode(&s, "read-only").await;
    let (out, is_error) = c
        .tool(Some(&s), "mcp__fx__echo", json!({"text": "hi"}))
        .await;
    assert_eq!((out.as_str(), is_error), ("hi", false));
    let (out, is_error) = c
        .tool(Some(&s), "mcp__fx__add", json!({"a": 1, "b": 1}))
        .await;
    assert!(is_error && out.contains("read-only"), "{out}");

    // Another session does not have these tools.
    let other = c.new_session(&ws).await;
    let (out, is_error) = c
        .tool(Some(&other), "mcp__fx__echo", json!({"text": "hi"}))
        .await;
    assert!(is_error && out.contains("unknown tool"), "{out}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_ask_mode_an_mcp_call_is_asked_unless_a_rule_allows_it() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(
        dir.path(),
        "[permissions]\ndefault_mode = \"ask\"\n\
         [[permissions.rules]]\ntool = \"mcp__fx__e*\"\naction = \"allow\"\n",
    )
    .await;
    let ws = workspace(dir.path(), "ws");
    let mut c = daemon.connect().await;
    let s = new_session_with(&mut c, &ws, json!([fixture("fx", &[])])).await;
    let (out, _) = c
        .tool(Some(&s), "mcp__fx__echo", json!({"text": "allowed"}))
        .await;
    assert_eq!(out, "allowed");
    let id = c
        .start(
            "_dsh/tools/call",
            json!({"sessionId": s, "name": "mcp__fx__add", "arguments": {"a": 1, "b": 2}}),
        )
        .await;
    let ask = c.wait_permission_request().await;
    assert_eq!(ask["params"]["toolCall"]["title"], "mcp__fx__add");
    c.send(json!({"jsonrpc": "2.0", "id": ask["id"],
                  "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}))
        .await;
    let r = c.wait_for(json!(id)).await.unwrap();
    assert_eq!(r["content"][0]["text"], "3");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_fails_or_dies_is_reported_and_its_tools_withdrawn() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = FakeModel::start(vec![text("first"), text("second")]).await;
    let config = format!("[permissions]\ndefault_mode = \"auto\"\n{}", model.config());
    let daemon = SocketDaemon::start(dir.path(), &config).await;
    let ws = workspace(dir.path(), "ws");
    let mut c = daemon.connect().await;
    let s = new_session_with(
        &mut c,
        &ws,
        json!([
            fixture("fx", &[]),
            fixture("fx", &[]),
            fixture("broken", &["--fail"])
        ]),
    )
    .await;
    c.wait_update(|u| {
        u["update"]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("another server of this session has the same name"))
    })
    .await;
    let failed = c
        .wait_update(|u| {
            u["update"]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("`broken` could not be started"))
        })
        .await;
    let said = failed["update"]["content"]["text"].as_str().unwrap();
    assert!(said.contains("refusing to start"), "{said}");

    c.prompt(&s, "one").await.unwrap();
    let first = model.requests.recv().await.unwrap();
    assert!(first.to_string().contains("mcp__fx__echo"));
    assert!(!first.to_string().contains("mcp__broken__"));

    // The server dies mid-call: the call is an error, the person is told once, and the
    // model is no longer offered its tools.
    let pid = server_pid(&mut c, &s, "fx").await;
    let (out, is_error) = c.tool(Some(&s), "mcp__fx__crash", json!({})).await;
    assert!(is_error && out.contains("`fx`"), "{out}");
    c.wait_update(|u| {
        u["update"]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("MCP server `fx` stopped"))
    })
    .await;
    gone(pid, "the crashed server").await;
    let (out, is_error) = c
        .tool(Some(&s), "mcp__fx__echo", json!({"text": "x"}))
        .await;
    assert!(is_error && out.contains("has stopped"), "{out}");
    c.prompt(&s, "two").await.unwrap();
    let second = model.requests.recv().await.unwrap();
    let offered = second["tools"].to_string();
    assert!(!offered.contains("mcp__fx__"), "{offered}");
    assert!(agent_text(&c, &s).matches("`fx` stopped").count() == 1);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_and_what_they_started_end_with_close_delete_and_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "[permissions]\ndefault_mode = \"auto\"\n").await;
    let ws = workspace(dir.path(), "ws");
    let mut c = daemon.connect().await;

    // close
    let s = new_session_with(&mut c, &ws, json!([fixture("fx", &[])])).await;
    let server = server_pid(&mut c, &s, "fx").await;
    let (child, _) = c.tool(Some(&s), "mcp__fx__spawn", json!({})).await;
    let child: i32 = child.parse().unwrap();
    assert!(common::alive(child));
    c.request("session/close", json!({"sessionId": s}))
        .await
        .unwrap();
    gone(server, "the server after session/close").await;
    gone(child, "the server's child after session/close").await;

    // load starts them again (the client passes them again); delete ends them
    c.request(
        "session/load",
        json!({"sessionId": s, "cwd": ws, "mcpServers": [fixture("fx", &[])]}),
    )
    .await
    .unwrap();
    let server = server_pid(&mut c, &s, "fx").await;
    c.request("session/delete", json!({"sessionId": s}))
        .await
        .unwrap();
    gone(server, "the server after session/delete").await;

    detached_children_end_with_close(&mut c, &ws).await;

    // shutdown
    let s = new_session_with(&mut c, &ws, json!([fixture("fx", &[])])).await;
    let server = server_pid(&mut c, &s, "fx").await;
    let (child, _) = c.tool(Some(&s), "mcp__fx__spawn", json!({})).await;
    let child: i32 = child.parse().unwrap();
    daemon.stop().await;
    gone(server, "the server after shutdown").await;
    gone(child, "the server's child after shutdown").await;
}

/// Under `[exec] kind = "ssh"` (commands through the helper) a server runs on the remote
/// host: in the session's cwd as `path_map` puts it there, with its own env and the E4
/// filter applied over there, spoken to over the master connection; its env is on no
/// command line, the local `ssh` client's or the remote wrapper's, and arrives
/// byte-exact, never read as shell; it and the child it spawns end with session/close
/// and the daemon's shutdown. The remote host is this machine (a loopback sshd), so its
/// process table is ours to read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_ssh_executor_servers_run_remotely_and_end_with_close_and_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let sshd = Sshd::start();
    let ws = workspace(dir.path(), "ws");
    let remote = workspace(dir.path(), "remote-ws");
    let config = format!(
        "kind = \"ssh\"\n[permissions]\ndefault_mode = \"auto\"\n{}\
         [[exec.ssh.path_map]]\nlocal = \"{}\"\nremote = \"{}\"\n",
        sshd.config_toml(HelperMode::Required),
        ws.display(),
        remote.display()
    );
    let daemon = SocketDaemon::start(dir.path(), &config).await;
    let mut c = daemon.connect().await;

    // close
    let canary = dir.path().join("canary");
    let nasty = format!(
        "it's \"q\"\n$(touch {c}) `touch {c}` $HOME caf\u{e9}\n",
        c = canary.display()
    );
    let mut server = fixture("fx", &[]);
    server["env"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "FIXTURE_NASTY", "value": nasty}));
    let s = new_session_with(&mut c, &ws, json!([server])).await;
    // Commands take the helper; the server runs beside it, in the same remote cwd.
    let (out, _) = c.bash(&s, "pwd").await;
    assert!(out.starts_with(&format!("{}\n", remote.display())), "{out}");
    let (who, is_error) = c.tool(Some(&s), "mcp__fx__whoami", json!({})).await;
    assert!(!is_error, "{who}");
    assert!(
        who.starts_with(&format!("{} tok-123 ", remote.display())),
        "{who}"
    );
    let server: i32 = who.rsplit(' ').next().unwrap().parse().unwrap();
    // The server's env reached it through the channel, not on a command line (`ps`
    // shows those to every local user).
    assert_on_no_command_line("tok-123");
    let environ: Vec<String> = common::environ_of(server)
        .iter()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert!(
        environ.contains(&format!("FIXTURE_NASTY={nasty}")),
        "{environ:?}"
    );
    assert!(!canary.exists(), "a value of the server's env was run");
    // KEEP_ME comes from the sshd's sessions only: the server is remote. Their
    // credentials are filtered there, and its own variable is kept.
    for wanted in ["KEEP_ME=yes", "TERM=dumb", "FIXTURE_TOKEN=tok-123"] {
        assert!(environ.iter().any(|v| v == wanted), "{wanted}: {environ:?}");
    }
    assert!(environ.iter().any(|v| v.starts_with("DSH_REMOTE_MARK=")));
    assert!(
        !environ
            .iter()
            .any(|v| v.starts_with("GH_TOKEN=") || v.starts_with("MY_API_KEY=")),
        "{environ:?}"
    );
    let (child, _) = c.tool(Some(&s), "mcp__fx__spawn", json!({})).await;
    let child: i32 = child.parse().unwrap();
    assert!(common::alive(child));
    c.request("session/close", json!({"sessionId": s}))
        .await
        .unwrap();
    gone(server, "the remote server after session/close").await;
    gone(child, "the remote server's child after session/close").await;

    detached_children_end_with_close(&mut c, &ws).await;

    // shutdown
    let s = new_session_with(&mut c, &ws, json!([fixture("fx", &[])])).await;
    let server = server_pid(&mut c, &s, "fx").await;
    let (child, _) = c.tool(Some(&s), "mcp__fx__spawn", json!({})).await;
    let child: i32 = child.parse().unwrap();
    assert!(common::alive(child));
    daemon.stop().await;
    gone(server, "the remote server after shutdown").await;
    gone(child, "the remote server's child after shutdown").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_sandbox_a_server_runs_confined_and_its_env_is_on_no_command_line() {
    let dir = tempfile::tempdir().unwrap();
    // write_config's [exec] table comes first: its keys lead.
    let daemon = SocketDaemon::start(
        dir.path(),
        "kind = \"sandbox\"\n[permissions]\ndefault_mode = \"auto\"\n",
    )
    .await;
    let ws = workspace(dir.path(), "ws");
    // The sandbox has a private /tmp: a checkout under /tmp (a CI clone) is not visible
    // in it, so the server is run from the session's cwd, which it binds.
    let mut server = fixture("fx", &[]);
    let inside = ws.join("mcp_fixture");
    std::fs::copy(common::mcp_fixture(), &inside).unwrap();
    server["command"] = json!(inside);
    let mut c = daemon.connect().await;
    let s = new_session_with(&mut c, &ws, json!([server])).await;
    let (who, is_error) = c.tool(Some(&s), "mcp__fx__whoami", json!({})).await;
    assert!(!is_error, "{who}: {}", agent_text(&c, &s));
    assert!(
        who.starts_with(&format!("{} tok-123 ", ws.display())),
        "{who}"
    );
    // bwrap stays the server's parent for its whole life: the token must not be in its
    // command line (or any other).
    assert_on_no_command_line("tok-123");
    // Confined: only the session's cwd is written on the host; beside it is the
    // sandbox's private /tmp (the write lands there, or fails).
    let outside = dir.path().join("outside");
    let (out, _) = c
        .tool(Some(&s), "mcp__fx__touch", json!({"path": outside}))
        .await;
    assert!(!outside.exists(), "{out}");
    let (out, is_error) = c
        .tool(
            Some(&s),
            "mcp__fx__touch",
            json!({"path": ws.join("inside")}),
        )
        .await;
    assert!(!is_error && ws.join("inside").exists(), "{out}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_answer_in_start_timeout_ms_is_reported_and_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(
        dir.path(),
        "[permissions]\ndefault_mode = \"auto\"\n[mcp]\nstart_timeout_ms = 300\n",
    )
    .await;
    let ws = workspace(dir.path(), "ws");
    let mut c = daemon.connect().await;
    let s = new_session_with(&mut c, &ws, json!([fixture("slow", &["--hang"])])).await;
    c.wait_update(|u| {
        u["update"]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("`slow` could not be started") && t.contains("300 ms"))
    })
    .await;
    let (out, is_error) = c
        .tool(Some(&s), "mcp__slow__echo", json!({"text": "x"}))
        .await;
    assert!(is_error && out.contains("unknown tool"), "{out}");
    // Stopped: no fixture is left running under this test's workspace.
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let hung = String::from_utf8_lossy(&cmdline).contains("--hang");
        assert!(!(hung && cwd == ws), "the hung server still runs");
    }
    daemon.stop().await;
}
