//! Issue 44: dsh in front of another ACP agent (`[[agents]]`, `dsh acp --agent NAME`).
//!
//! The agent here is a real process speaking ACP on its stdio, scripted in Python
//! (`AGENT`): it behaves as Claude Code's adapter does, asking its client
//! `session/request_permission` with `rawInput.command` and then running the command
//! itself when allowed. So each test shows what the agent would do unjudged (it runs
//! whatever its client allows) and that dsh's waterfall decides what "allowed" is.
//! More tests with Claude Code itself are in `wrapped_claude`, with Gemini CLI in
//! `wrapped_gemini`.

use crate::common::client::Client;
use crate::common::daemon::SocketDaemon;
use crate::common::{alive, launcher, spawn_client};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A scripted ACP agent: answers initialize (echoing the client capabilities it was
/// offered), opens sessions, and for each prompt asks permission to run the prompt's
/// text as a command, runs it itself when an allow option is chosen, and reports.
/// Prompts starting `term:`, `termstart:`, `termshow:`, `release:`, `read:` and `write:` instead use
/// its client's terminal and file system (as an agent offered them does) and report
/// the answer; `get:URL` fetches URL as the agent's own HTTP client would (the proxy
/// variables of its environment honoured) and `connect:HOST:PORT` opens a TCP
/// connection, each reporting what it got. `in:DIR:COMMAND` asks about COMMAND as
/// Gemini CLI asks about a shell call with a `dir_path` (the directory only in its
/// explanation, no `rawInput`) and runs it in DIR once allowed. Its initialize answer shows its proxy
/// variables (`_meta.env`).
const AGENT: &str = r#"
import json, os, socket, subprocess, sys, urllib.request
with open(os.environ["AGENT_PIDFILE"], "a") as f:
    f.write(f"{os.getpid()}\n")
print("scripted agent started", file=sys.stderr, flush=True)
pending = []
PROXY_NAMES = [n for v in ("HTTP", "HTTPS", "ALL", "NO") for n in (v + "_PROXY", v.lower() + "_proxy")]
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
def read():
    if pending:
        return pending.pop(0)
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)
def update(sid, text):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid,
          "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
asks = 0
def call(method, params):
    global asks
    asks += 1
    qid = f"c{asks}"
    send({"jsonrpc": "2.0", "id": qid, "method": method, "params": params})
    while True:
        a = read()
        if a.get("id") == qid and "method" not in a:
            return a
        pending.append(a)
def client_prompt(sid, text):
    verb, _, rest = text.partition(":")
    if verb in ("term", "termstart"):
        a = call("terminal/create", {"sessionId": sid, "command": rest})
        if "error" in a:
            return "refused: " + a["error"]["message"]
        tid = a["result"]["terminalId"]
        if verb == "termstart":
            return "started " + tid
        code = call("terminal/wait_for_exit", {"sessionId": sid, "terminalId": tid})["result"]
        out = call("terminal/output", {"sessionId": sid, "terminalId": tid})["result"]
        call("terminal/release", {"sessionId": sid, "terminalId": tid})
        return f"exit {code.get('exitCode')}: {out['output']}"
    if verb == "termshow":
        # As an agent shows its terminal: a tool call whose content names it.
        a = call("terminal/create", {"sessionId": sid, "command": rest})
        if "error" in a:
            return "refused: " + a["error"]["message"]
        tid = a["result"]["terminalId"]
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
              "sessionUpdate": "tool_call", "toolCallId": "shows-" + tid, "title": rest,
              "kind": "execute", "status": "in_progress",
              "content": [{"type": "content", "content": {"type": "text", "text": "the agent's words"}},
                          {"type": "terminal", "terminalId": tid}]}}})
        code = call("terminal/wait_for_exit", {"sessionId": sid, "terminalId": tid})["result"]
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
              "sessionUpdate": "tool_call_update", "toolCallId": "shows-" + tid, "status": "completed",
              "content": [{"type": "content", "content": {"type": "text", "text": "the agent's words"}},
                          {"type": "terminal", "terminalId": tid}]}}})
        call("terminal/release", {"sessionId": sid, "terminalId": tid})
        return f"shown {tid}, exit {code.get('exitCode')}"
    if verb == "get":
        try:
            return "got: " + urllib.request.urlopen(rest, timeout=30).read().decode()
        except Exception as e:
            return f"failed: {e!r}"
    if verb == "connect":
        host, _, port = rest.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=30).close()
            return "connected"
        except Exception as e:
            return f"failed: {e!r}"
    if verb == "release":
        a = call("terminal/release", {"sessionId": sid, "terminalId": rest})
        return "released" if "result" in a else "refused: " + a["error"]["message"]
    if verb == "read":
        a = call("fs/read_text_file", {"sessionId": sid, "path": rest})
        return "read: " + a["result"]["content"] if "result" in a else "refused: " + a["error"]["message"]
    if verb == "write":
        path, _, content = rest.partition("=")
        a = call("fs/write_text_file", {"sessionId": sid, "path": path, "content": content})
        return "wrote" if "result" in a else "refused: " + a["error"]["message"]
    return None
while True:
    m = read()
    method, mid, p = m.get("method"), m.get("id"), m.get("params") or {}
    if method == "initialize":
        status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
        status = {k: status.get(k, "").strip() for k in ("NoNewPrivs", "CapEff")}
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1,
              "agentCapabilities": {}, "_meta": {"offered": p.get("clientCapabilities"), "status": status,
              "env": {n: os.environ.get(n) for n in PROXY_NAMES}}}})
    elif method == "session/new":
        cwd = p.get("cwd")
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "agent-s1"}})
    elif method == "session/set_mode":
        send({"jsonrpc": "2.0", "id": mid, "result": {"_meta": {"mode": p.get("modeId")}}})
    elif method == "session/prompt":
        sid = p["sessionId"]
        command = p["prompt"][0]["text"]
        said = client_prompt(sid, command)
        if said is not None:
            update(sid, said)
            send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
            continue
        asks += 1
        qid = f"q{asks}"
        # "edit:PATH" asks to edit PATH (as Claude Code's Edit does); else a command.
        where = None
        if command.startswith("in:"):
            # As Gemini CLI asks about its shell call with a `dir_path`: the command as
            # the title, the directory only in the explanation, no rawInput; it runs
            # there once allowed.
            where, _, command = command[3:].partition(":")
            tool_call = {"toolCallId": f"call-{asks}", "title": command, "kind": "execute",
                         "status": "pending", "locations": [],
                         "content": [{"type": "content", "content": {"type": "text",
                                      "text": f"[in {where}] (scripted)"}}]}
            where = os.path.join(cwd, where)
        elif command.startswith("edit:"):
            path = command[5:]
            tool_call = {"toolCallId": f"call-{asks}", "title": "Edit " + path, "kind": "edit",
                         "rawInput": {"file_path": path, "old_string": "", "new_string": "edited"},
                         "locations": [{"path": path}]}
            command = f"echo edited > '{path}'"
        elif command.startswith("argv:"):
            # As Codex's adapter asks: the command as argv.
            command = command[5:]
            tool_call = {"toolCallId": f"call-{asks}", "title": command, "kind": "execute",
                         "rawInput": {"command": ["/bin/bash", "-lc", command]}}
        else:
            tool_call = {"toolCallId": f"call-{asks}", "title": command, "kind": "execute",
                         "rawInput": {"command": command, "description": "scripted"},
                         "_meta": {"claudeCode": {"toolName": "Bash"}}}
        send({"jsonrpc": "2.0", "id": qid, "method": "session/request_permission", "params": {
              "sessionId": sid,
              "toolCall": tool_call,
              "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                          {"optionId": "always", "name": "Always", "kind": "allow_always"},
                          {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]}})
        while True:
            a = read()
            if a.get("id") == qid and "method" not in a:
                break
            pending.append(a)
        outcome = (a.get("result") or {}).get("outcome") or {}
        if outcome.get("outcome") == "selected" and outcome.get("optionId") in ("allow", "always"):
            subprocess.run(["bash", "-c", command], cwd=where)
            update(sid, "ran: " + command)
        else:
            update(sid, "refused: " + command)
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "unknown " + str(method)}})
"#;

/// A rule that lets the agent's `touch` run.
const ALLOW_TOUCH: &str =
    "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"allow\"\n";

/// A daemon whose `[[agents]]` has the scripted agent as `scripted`, with `rules`.
struct Setup {
    _dir: tempfile::TempDir,
    daemon: SocketDaemon,
    work: PathBuf,
    pidfile: PathBuf,
}

async fn setup(rules: &str) -> Setup {
    setup_under("", rules).await
}

/// As [`setup`], `exec` added to the `[exec]` table (the executor's kind). The agent's
/// script and pid file are in the workspace, where the sandbox shows (and lets write).
async fn setup_under(exec: &str, rules: &str) -> Setup {
    setup_started(exec, rules, false).await
}

/// As [`setup_under`]; `copied`: the daemon runs a copy of the binary, as `dsh upgrade`
/// tests start it.
async fn setup_started(exec: &str, rules: &str, copied: bool) -> Setup {
    setup_with_env(exec, rules, copied, "").await
}

/// As [`setup_started`], `env` (entries of a TOML inline table) added to the agent's
/// `env`.
async fn setup_with_env(exec: &str, rules: &str, copied: bool, env: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join(".agent")).unwrap();
    let script = work.join(".agent/agent.py");
    std::fs::write(&script, AGENT).unwrap();
    let pidfile = work.join(".agent/pids");
    let config = format!(
        "{exec}[permissions]\ndefault_mode = \"ask\"\n{rules}\n\
         [[agents]]\nname = \"scripted\"\ncommand = [\"python3\", \"{}\"]\n\
         env = {{ AGENT_PIDFILE = \"{}\"{env} }}\n",
        script.display(),
        pidfile.display()
    );
    let daemon = if copied {
        SocketDaemon::start_copy(dir.path(), &config).await
    } else {
        SocketDaemon::start(dir.path(), &config).await
    };
    Setup {
        _dir: dir,
        daemon,
        work,
        pidfile,
    }
}

impl Setup {
    /// `dsh acp --agent scripted` as the editor starts it, run in the workspace, with an
    /// initialized connection and a session.
    async fn editor(&self) -> (tokio::process::Child, Client, String, Value) {
        self.editor_offering(
            json!({"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true}),
        )
        .await
    }

    /// As [`Setup::editor`], the editor offering `capabilities`.
    async fn editor_offering(
        &self,
        capabilities: Value,
    ) -> (tokio::process::Child, Client, String, Value) {
        let mut cmd = launcher(&self.daemon.socket);
        cmd.args(["--agent", "scripted"]).current_dir(&self.work);
        let (child, mut client) = spawn_client(&mut cmd);
        let init = client
            .request(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
            )
            .await
            .expect("initialize through dsh");
        let session = client
            .request("session/new", json!({"cwd": self.work, "mcpServers": []}))
            .await
            .expect("session/new through dsh")["sessionId"]
            .as_str()
            .unwrap()
            .to_string();
        (child, client, session, init)
    }

    /// An editor whose agent ran an allowed `touch` (so it works); its pid.
    async fn working_agent(&self) -> (tokio::process::Child, Client, String, i32) {
        let (child, mut c, session, _) = self.editor().await;
        let (command, file) = command_in(&self.work, "before");
        prompt(&mut c, &session, &command).await;
        assert!(file.exists(), "the agent did not work");
        let pid = crate::common::pids(&self.pidfile)[0];
        (child, c, session, pid)
    }

    /// `dsh upgrade` of the daemon.
    async fn upgrade(&self) -> std::process::Output {
        tokio::process::Command::new(crate::common::daemon::BIN)
            .args(["upgrade", "--socket"])
            .arg(&self.daemon.socket)
            .output()
            .await
            .unwrap()
    }

    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.daemon.state.join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

async fn prompt(client: &mut Client, session: &str, text: &str) -> Value {
    client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
        .expect("prompt through dsh")
}

fn said(client: &Client, text: &str) -> bool {
    client
        .updates
        .iter()
        .any(|u| u["update"]["content"]["text"].as_str() == Some(text))
}

/// Waits (bounded) until `pid` is gone.
async fn gone(pid: i32) -> bool {
    for _ in 0..1500 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn command_in(work: &Path, name: &str) -> (String, PathBuf) {
    let file = work.join(name);
    (format!("touch {}", file.display()), file)
}

/// P1 through a wrapped agent: a deny rule refuses the agent's command without asking the
/// editor, the agent (which runs whatever its client allows) runs nothing, and the
/// audit line names the agent. Under an allow rule the same agent runs it (the attack's
/// path, shown working), also without a question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p1_a_deny_rule_refuses_the_wrapped_agents_command_without_asking() {
    let s =
        setup("[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"deny\"\n")
            .await;
    let (_child, mut c, session, _) = s.editor().await;
    let (command, file) = command_in(&s.work, "denied");
    let answer = prompt(&mut c, &session, &command).await;
    assert_eq!(answer["stopReason"], "end_turn");
    assert!(said(&c, &format!("refused: {command}")), "{:?}", c.updates);
    assert!(!file.exists(), "the agent ran a denied command");
    assert!(c.permission_requests.is_empty(), "the editor was asked");
    let audit = s.audit();
    let line = audit
        .iter()
        .find(|l| l["arguments"]["command"] == command.as_str())
        .expect("an audit line for the agent's call");
    assert_eq!(line["agent"], "scripted");
    assert_eq!(line["tool"], "bash");
    assert_eq!(line["decision"], "deny", "{line}");
    assert_eq!(line["callId"], "call-1");

    let allowing =
        setup("[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"allow\"\n")
            .await;
    let (_child, mut c, session, _) = allowing.editor().await;
    let (command, file) = command_in(&allowing.work, "allowed");
    prompt(&mut c, &session, &command).await;
    assert!(said(&c, &format!("ran: {command}")), "{:?}", c.updates);
    assert!(file.exists(), "the allowed command did not run");
    assert!(c.permission_requests.is_empty(), "the editor was asked");
    let audit = allowing.audit();
    assert_eq!(audit.last().unwrap()["decision"], "allow");
    assert_eq!(audit.last().unwrap()["agent"], "scripted");
}

/// An "ask" reaches the editor as the agent's own question (its tool call and options);
/// the person's answer decides, and the audit line keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_reaches_the_editor_with_the_agents_question() {
    let s = setup("").await;
    let (_child, mut c, session, _) = s.editor().await;
    let (command, file) = command_in(&s.work, "rejected");
    c.permission_answers.push_back("reject");
    prompt(&mut c, &session, &command).await;
    assert!(!file.exists());
    assert!(said(&c, &format!("refused: {command}")));
    assert_eq!(c.permission_requests.len(), 1);
    let question = &c.permission_requests[0];
    assert_eq!(question["sessionId"], session.as_str());
    assert_eq!(
        question["toolCall"]["rawInput"]["command"],
        command.as_str()
    );
    assert_eq!(question["options"][0]["optionId"], "allow");

    let (command, file) = command_in(&s.work, "asked");
    c.permission_answers.push_back("allow");
    prompt(&mut c, &session, &command).await;
    assert!(file.exists(), "the command the person allowed did not run");
    assert_eq!(c.permission_requests.len(), 2);
    let audit = s.audit();
    let answers: Vec<_> = audit.iter().map(|l| l["answer"].clone()).collect();
    assert_eq!(answers, vec![json!("reject_once"), json!("allow_once")]);
    assert!(audit.iter().all(|l| l["agent"] == "scripted"));
}

/// An "always" from the person is kept by dsh (a grant of the session) and the agent is
/// told "once": the next such command is allowed by dsh's grant, not asked again and
/// not left to the agent's memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_answer_is_dshs_grant_and_the_agent_hears_once() {
    let s = setup("").await;
    let (_child, mut c, session, _) = s.editor().await;
    let (command, first) = command_in(&s.work, "one");
    c.permission_answers.push_back("always");
    prompt(&mut c, &session, &command).await;
    assert!(first.exists());
    let (command, second) = command_in(&s.work, "two");
    prompt(&mut c, &session, &command).await;
    assert!(second.exists());
    assert_eq!(c.permission_requests.len(), 1, "asked again after always");
    let audit = s.audit();
    assert_eq!(audit[1]["decision"], "allow");
    assert_eq!(audit[1]["answer"], Value::Null);
}

/// Requests and notifications pass through with ids mapped: `initialize` (offering
/// dsh's own `fs` and `terminal`, which dsh serves judged), `session/set_mode`, and an
/// error of the agent's comes back as its error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_pass_through_and_dsh_offers_fs_and_terminal() {
    let s = setup("").await;
    let (_child, mut c, session, init) = s.editor().await;
    assert_eq!(
        init["_meta"]["offered"],
        json!({"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true})
    );
    let mode = c
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "plan"}),
        )
        .await
        .unwrap();
    assert_eq!(mode["_meta"]["mode"], "plan");
    let err = c
        .request("session/list", json!({}))
        .await
        .expect_err("the agent does not list sessions");
    assert_eq!(err["message"], "unknown session/list");
}

/// E3 for a wrapped agent: its process is started by the daemon (not the launcher) and
/// is gone once the editor's connection ends; its stderr is in `daemon.log`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e3_the_agent_ends_with_its_connection_and_logs_to_daemon_log() {
    let s = setup("").await;
    let (mut child, _c, _session, _) = s.editor().await;
    let pids = crate::common::pids(&s.pidfile);
    assert_eq!(pids.len(), 1);
    let pid = pids[0];
    assert!(alive(pid));
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let ppid: i32 = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(
        ppid,
        child.id().unwrap() as i32,
        "the launcher started the agent"
    );
    child.kill().await.unwrap();
    child.wait().await.unwrap();
    assert!(gone(pid).await, "the wrapped agent outlived its connection");
    let log = s.daemon.state.join("daemon.log");
    let mut logged = false;
    for _ in 0..500 {
        logged = std::fs::read_to_string(&log).is_ok_and(|t| t.contains("scripted agent started"));
        if logged {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(logged, "the agent's stderr is not in daemon.log");
}

/// An agent name the config does not have: the launcher says so on stderr and fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_agent_name_is_refused_by_the_launcher() {
    let s = setup("").await;
    let out = crate::common::dsh()
        .args(["acp", "--agent", "nosuch", "--socket"])
        .arg(&s.daemon.socket)
        .stdin(std::process::Stdio::piped())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no [[agents]] entry is named `nosuch`"),
        "{stderr}"
    );
}

/// E6/E9 for a wrapped agent: under the sandbox executor the agent's whole process runs
/// inside bubblewrap (no privilege: `NoNewPrivs` set, no capabilities, even as root), so
/// what it runs itself after dsh allowed it still cannot write outside the session's
/// roots. Under the local executor (the control) the same allowed command writes there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e6_e9_under_the_sandbox_the_agent_itself_is_contained() {
    let allow_touch =
        "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"allow\"\n";
    let local = setup(allow_touch).await;
    let (_child, mut c, session, init) = local.editor().await;
    let outside = local.work.parent().unwrap().join("outside");
    let command = format!("touch {}", outside.display());
    prompt(&mut c, &session, &command).await;
    assert!(
        outside.exists(),
        "control: the local agent's own write did not happen"
    );
    assert_eq!(init["_meta"]["status"]["NoNewPrivs"], "0", "{init}");

    let sandboxed = setup_under("kind = \"sandbox\"\n", allow_touch).await;
    let (_child, mut c, session, init) = sandboxed.editor().await;
    assert_eq!(init["_meta"]["status"]["NoNewPrivs"], "1", "{init}");
    assert_eq!(
        init["_meta"]["status"]["CapEff"], "0000000000000000",
        "{init}"
    );
    let outside = sandboxed.work.parent().unwrap().join("outside");
    let command = format!("touch {}", outside.display());
    prompt(&mut c, &session, &command).await;
    assert!(said(&c, &format!("ran: {command}")), "dsh did not allow it");
    assert!(
        !outside.exists(),
        "the sandboxed agent wrote outside its roots"
    );
    let (command, inside) = command_in(&sandboxed.work, "inside");
    prompt(&mut c, &session, &command).await;
    assert!(
        inside.exists(),
        "the sandboxed agent could not write its workspace"
    );
}

/// Claude Code behind dsh (issue 44), P1: its Bash call under a deny rule is refused by
/// dsh without asking the editor, and nothing ran (Claude Code runs what its client
/// allows, in its own process); another command, which no rule decides, is asked at the
/// editor as Claude Code's own question, and runs once the person allows it. The audit
/// lines name the agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p1_claude_code_behind_dsh_deny_refuses_and_ask_reaches_the_editor() {
    let dir = tempfile::tempdir().unwrap();
    let Some(claude) = crate::wrapped_claude::Claude::start(
        dir.path(),
        crate::wrapped_claude::Under::Local,
        "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"deny\"\n",
    )
    .await
    else {
        return;
    };
    let (daemon, model, work) = (&claude.daemon, &claude.model, &claude.work);
    let mut cmd = launcher(&daemon.socket);
    cmd.args(["--agent", "claude"]).current_dir(work);
    let (_child, mut c) = spawn_client(&mut cmd);
    c.initialize().await;
    let session = c
        .request("session/new", json!({"cwd": work, "mcpServers": []}))
        .await
        .expect("Claude Code's session/new through dsh")["sessionId"]
        .as_str()
        .unwrap()
        .to_string();

    let denied = work.join("denied");
    let command = format!("touch {}", denied.display());
    model.next_command(&command);
    let answer = prompt(&mut c, &session, &command).await;
    assert_eq!(answer["stopReason"], "end_turn", "{answer}");
    assert!(!denied.exists(), "Claude Code ran a denied command");
    assert!(c.permission_requests.is_empty(), "the editor was asked");

    let asked = work.join("asked");
    let command = format!("mkdir {}", asked.display());
    model.next_command(&command);
    c.permission_answers.push_back("allow");
    prompt(&mut c, &session, &command).await;
    assert!(
        asked.is_dir(),
        "the command the person allowed did not run: {:?} {:?} {}",
        c.permission_requests,
        c.updates
            .iter()
            .map(|u| u["update"].to_string())
            .collect::<Vec<_>>(),
        std::fs::read_to_string(daemon.state.join("audit.jsonl")).unwrap_or_default()
    );
    assert_eq!(c.permission_requests.len(), 1);
    assert_eq!(
        c.permission_requests[0]["toolCall"]["rawInput"]["command"],
        command.as_str()
    );

    let audit: Vec<Value> = std::fs::read_to_string(daemon.state.join("audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert!(
        audit
            .iter()
            .all(|l| l["agent"] == "claude" && l["tool"] == "bash")
    );
    assert_eq!(audit[0]["decision"], "deny");
    assert_eq!(audit[1]["answer"], "allow_once");
}

/// An edit the agent asks about is judged as `write_file` of its path: a path rule
/// (`tool = "write_file"`, `path = "secrets/**"`) refuses it without asking the editor,
/// and an edit elsewhere, which the rules let through, is made by the agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_edit_is_judged_as_write_file_of_its_path() {
    let s = setup(
        "[[permissions.rules]]\ntool = \"write_file\"\npath = \"secrets/**\"\naction = \"deny\"\n\
         [[permissions.rules]]\ntool = \"write_file\"\naction = \"allow\"\n",
    )
    .await;
    std::fs::create_dir_all(s.work.join("secrets")).unwrap();
    let (_child, mut c, session, _) = s.editor().await;
    let secret = s.work.join("secrets/key");
    prompt(&mut c, &session, &format!("edit:{}", secret.display())).await;
    assert!(!secret.exists(), "the agent edited a denied path");
    let open = s.work.join("notes.txt");
    prompt(&mut c, &session, &format!("edit:{}", open.display())).await;
    assert!(open.exists(), "the allowed edit was not made");
    assert!(c.permission_requests.is_empty(), "the editor was asked");
    let audit = s.audit();
    assert_eq!(audit[0]["tool"], "write_file");
    assert_eq!(audit[0]["decision"], "deny");
    assert_eq!(audit[0]["arguments"]["path"], secret.to_str().unwrap());
    assert_eq!(audit[1]["decision"], "allow");
}

/// The pids of the processes whose argv is exactly `argv`, from the process table.
fn processes(argv: &[&str]) -> Vec<i32> {
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|w| [w.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted) && alive(*pid)
        })
        .collect()
}

/// Waits (bounded) until a process with argv `argv` runs; its pid.
async fn started(argv: &[&str]) -> Option<i32> {
    for _ in 0..1500 {
        if let Some(pid) = processes(argv).first() {
            return Some(*pid);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// The last thing the agent said.
fn last_said(client: &Client) -> String {
    client
        .updates
        .iter()
        .rev()
        .find_map(|u| u["update"]["content"]["text"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Issue 44 item 1, P1 for a terminal: the agent's `terminal/create` is a `bash` call of
/// its dsh session, judged by the waterfall. Under an allow rule (the control) the
/// command runs and its output and exit status reach the agent; under a deny rule the
/// same command never runs (no file, no process), the agent gets an error, the editor is
/// not asked, and the audit line names the agent and the background call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p1_a_terminal_is_a_judged_bash_call_of_the_agents_session() {
    let allowing = setup(
        "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"allow\"\n\
         [[permissions.rules]]\ntool = \"bash\"\ncommand = \"echo\"\naction = \"allow\"\n",
    )
    .await;
    let (_child, mut c, session, _) = allowing.editor().await;
    let (command, file) = command_in(&allowing.work, "by-terminal");
    prompt(&mut c, &session, &format!("term:{command}")).await;
    assert_eq!(last_said(&c), "exit 0: ", "{:?}", c.updates);
    assert!(file.exists(), "control: the allowed terminal did not run");
    prompt(&mut c, &session, "term:echo hello from a terminal").await;
    assert_eq!(last_said(&c), "exit 0: hello from a terminal\n");
    assert!(c.permission_requests.is_empty(), "the editor was asked");

    let denying = setup(
        "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"deny\"\n\
         [[permissions.rules]]\ntool = \"bash\"\ncommand = \"sleep\"\naction = \"deny\"\n",
    )
    .await;
    let (_child, mut c, session, _) = denying.editor().await;
    let (command, file) = command_in(&denying.work, "by-terminal");
    prompt(&mut c, &session, &format!("term:{command}")).await;
    assert!(last_said(&c).starts_with("refused: "), "{:?}", c.updates);
    assert!(!file.exists(), "a denied terminal ran");
    prompt(&mut c, &session, "termstart:sleep 864211").await;
    assert!(last_said(&c).starts_with("refused: "), "{:?}", c.updates);
    assert!(
        processes(&["sleep", "864211"]).is_empty(),
        "a denied terminal's process runs"
    );
    assert!(c.permission_requests.is_empty(), "the editor was asked");
    let audit = denying.audit();
    let line = audit
        .iter()
        .find(|l| l["arguments"]["command"] == command.as_str())
        .expect("an audit line for the terminal");
    assert_eq!(line["tool"], "bash");
    assert_eq!(line["agent"], "scripted");
    assert_eq!(line["decision"], "deny");
    assert_eq!(line["arguments"]["run_in_background"], true);
}

/// Issue 44 item 1, T12 for a terminal: an "ask" for the agent's terminal reaches the
/// editor (a question dsh writes: the command, `kind: execute`); once allowed, the
/// command runs as a task of the agent's session, and `terminal/release` kills it
/// (the process table). A terminal still running when the connection ends is killed
/// too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t12_a_released_terminals_command_is_killed() {
    let s = setup("").await;
    let (mut child, mut c, session, _) = s.editor().await;
    c.permission_answers.push_back("allow_once");
    prompt(&mut c, &session, "termstart:sleep 864212").await;
    let said = last_said(&c);
    let id = said.strip_prefix("started ").expect(&said).to_string();
    assert_eq!(c.permission_requests.len(), 1);
    let question = &c.permission_requests[0];
    assert_eq!(question["sessionId"], session.as_str());
    assert_eq!(question["toolCall"]["kind"], "execute");
    assert_eq!(question["toolCall"]["rawInput"]["command"], "sleep 864212");
    let pid = started(&["sleep", "864212"])
        .await
        .expect("the terminal runs");
    prompt(&mut c, &session, &format!("release:{id}")).await;
    assert_eq!(last_said(&c), "released");
    assert!(gone(pid).await, "a released terminal's command still runs");
    prompt(&mut c, &session, &format!("release:{id}")).await;
    assert!(last_said(&c).starts_with("refused: unknown terminal"));

    c.permission_answers.push_back("allow_once");
    prompt(&mut c, &session, "termstart:sleep 864213").await;
    let pid = started(&["sleep", "864213"])
        .await
        .expect("the terminal runs");
    child.kill().await.unwrap();
    child.wait().await.unwrap();
    assert!(
        gone(pid).await,
        "a terminal outlived the agent's connection"
    );
}

/// Issue 44 item 1, E9 for the file requests: `fs/write_text_file` is dsh's `write_file`
/// (judged by path as the sandbox sees it). Under the local executor (the control) a
/// write outside the workspace is asked about and, allowed, made; under the sandbox the
/// same write is refused unasked and nothing is written, while one in the workspace is
/// made and read back with `fs/read_text_file`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_an_agents_fs_write_outside_the_roots_is_refused_under_the_sandbox() {
    let allow = "[[permissions.rules]]\ntool = \"write_file\"\naction = \"allow\"\n\
                 [[permissions.rules]]\ntool = \"read_file\"\naction = \"allow\"\n";
    let local = setup(allow).await;
    // An editor without `fs`: the writes are the executor's (one with `fs` is below).
    let no_fs = || json!({"terminal": true});
    let (_child, mut c, session, _) = local.editor_offering(no_fs()).await;
    let outside = local.work.parent().unwrap().join("outside.txt");
    // A write outside the session's roots is asked about whatever the rules say.
    c.permission_answers.push_back("allow_once");
    prompt(&mut c, &session, &format!("write:{}=x", outside.display())).await;
    assert_eq!(last_said(&c), "wrote", "{:?}", c.updates);
    assert!(outside.exists(), "control: the local write was not made");

    let sandboxed = setup_under("kind = \"sandbox\"\n", allow).await;
    let (_child, mut c, session, _) = sandboxed.editor_offering(no_fs()).await;
    let outside = sandboxed.work.parent().unwrap().join("outside.txt");
    prompt(&mut c, &session, &format!("write:{}=x", outside.display())).await;
    assert!(last_said(&c).starts_with("refused: "), "{:?}", c.updates);
    assert!(
        c.permission_requests.is_empty(),
        "asked about a write the sandbox refuses"
    );
    assert!(!outside.exists(), "the sandbox let the agent write outside");
    let inside = sandboxed.work.join("inside.txt");
    prompt(
        &mut c,
        &session,
        &format!("write:{}=in here", inside.display()),
    )
    .await;
    assert_eq!(last_said(&c), "wrote");
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "in here");
    prompt(&mut c, &session, &format!("read:{}", inside.display())).await;
    assert_eq!(last_said(&c), "read: in here");
    let audit = sandboxed.audit();
    let refused = audit
        .iter()
        .find(|l| l["tool"] == "write_file" && l["arguments"]["path"] == outside.to_str().unwrap())
        .expect("an audit line for the refused write");
    assert_eq!(refused["agent"], "scripted");
    assert_eq!(refused["decision"], "deny", "{refused}");
    assert_eq!(refused["outcome"], "vetoed", "{refused}");
}

/// Issue 44 item 3: a hook that rewrites a wrapped agent's question cannot have the
/// agent run the rewrite (the agent runs what it asked), so the question is refused and
/// the refusal has its audit line (the audit hook leaves a rewrite's line to the pass
/// that runs it, which never comes here). The control: a question the hook leaves alone
/// is allowed by the same rule and runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_question_is_refused_and_audited() {
    let hooks = tempfile::tempdir().unwrap();
    let hook = hooks.path().join("rewriter.py");
    std::fs::write(
        &hook,
        "import json, sys\ncall = json.load(sys.stdin)\n\
         if call['arguments'].get('command', '').startswith('touch'):\n    \
         print(json.dumps({'rewrite': {'arguments': {'command': 'echo rewritten', 'description': 'd'}}}))\n",
    )
    .unwrap();
    let s = setup(&format!(
        "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"allow\"\n\
         [[permissions.rules]]\ntool = \"bash\"\ncommand = \"echo\"\naction = \"allow\"\n\
         [[hooks.command]]\nargv = [\"python3\", {:?}]\nname = \"rewriter\"\n",
        hook.display().to_string()
    ))
    .await;
    let (_child, mut c, session, _) = s.editor().await;
    prompt(&mut c, &session, "echo untouched").await;
    assert!(said(&c, "ran: echo untouched"), "control: {:?}", c.updates);
    let (command, file) = command_in(&s.work, "rewritten");
    prompt(&mut c, &session, &command).await;
    assert!(said(&c, &format!("refused: {command}")), "{:?}", c.updates);
    assert!(!file.exists(), "the agent ran a rewritten call");
    let audit = s.audit();
    let line = audit
        .iter()
        .find(|l| l["arguments"]["command"] == command.as_str())
        .expect("an audit line for the rewritten question");
    assert_eq!(line["decision"], "deny", "{line}");
    assert_eq!(line["decidedBy"], "wrap", "{line}");
    assert_eq!(line["outcome"], "vetoed", "{line}");
    assert_eq!(line["agent"], "scripted");
    assert!(
        line["reason"].as_str().unwrap().contains("echo rewritten"),
        "{line}"
    );
}

/// Issue 44 item 2: rules see a wrapped agent's command under the agent's own tool name
/// too. The control: an allow rule for `bash` lets the agent's `touch` run. With a deny
/// rule for `Bash` (Claude Code's name for its tool) beside it, the same command is
/// refused unasked and does not run. The agent's name only tightens: an allow rule for
/// `Bash` does not let through what the `bash` rules and the mode ask about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p1_a_rule_names_the_agents_own_tool() {
    let allow_touch =
        "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"allow\"\n";
    let control = setup(allow_touch).await;
    let (_child, mut c, session, _) = control.editor().await;
    let (command, file) = command_in(&control.work, "control");
    prompt(&mut c, &session, &command).await;
    assert!(file.exists(), "control: the allowed command did not run");

    let s = setup(&format!(
        "{allow_touch}[[permissions.rules]]\ntool = \"Bash\"\naction = \"deny\"\n"
    ))
    .await;
    let (_child, mut c, session, _) = s.editor().await;
    let (command, file) = command_in(&s.work, "denied");
    prompt(&mut c, &session, &command).await;
    assert!(said(&c, &format!("refused: {command}")), "{:?}", c.updates);
    assert!(
        !file.exists(),
        "a rule for Bash did not refuse the agent's Bash call"
    );
    assert!(c.permission_requests.is_empty(), "the editor was asked");
    let line = s.audit().pop().unwrap();
    assert_eq!(line["tool"], "bash");
    assert_eq!(line["decision"], "deny");
    assert!(line["reason"].as_str().unwrap().contains("Bash"), "{line}");

    let loosening = setup("[[permissions.rules]]\ntool = \"Bash\"\naction = \"allow\"\n").await;
    let (_child, mut c, session, _) = loosening.editor().await;
    let (command, file) = command_in(&loosening.work, "asked");
    c.permission_answers.push_back("reject");
    prompt(&mut c, &session, &command).await;
    assert_eq!(
        c.permission_requests.len(),
        1,
        "an allow rule for Bash loosened bash's ask"
    );
    assert!(!file.exists());
}

/// Issue 44 item 4: a wrapped connection cannot be carried by `dsh upgrade` (the agent
/// is a process with pipes into the old program). The upgrade stops the agent (gone
/// from the process table), and the next program tells the agent's session so and ends
/// the connection, so the editor's `dsh acp --agent` exits instead of talking to a dsh
/// session it never opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_ends_a_wrapped_connection_and_stops_its_agent() {
    let s = setup_started("", ALLOW_TOUCH, true).await;
    let (mut child, mut c, session, pid) = s.working_agent().await;
    let upgraded = s.upgrade().await;
    assert!(
        upgraded.status.success(),
        "{}",
        String::from_utf8_lossy(&upgraded.stderr)
    );
    assert!(gone(pid).await, "the wrapped agent outlived the upgrade");
    let mut told = false;
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(m) = c.next_message().await {
            told |= m["method"] == "session/update"
                && m["params"]["sessionId"] == session.as_str()
                && m["params"]["update"]["content"]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("dsh was upgraded"));
        }
    })
    .await;
    assert!(ended.is_ok(), "the wrapped connection was not ended");
    assert!(told, "the agent's session was not told why");
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the launcher exits")
        .unwrap();
    assert!(status.code().is_some(), "{status:?}");
}

/// P1 for an agent that asks with argv (codex-acp 0.16.0 sends `rawInput.command` as
/// `["/bin/bash", "-lc", LINE]`): judged as the same `bash` command, so a deny rule on
/// `touch` refuses it (without the fix it was judged as an unknown tool of the agent's,
/// which no command rule names). The control: allowed (asked, since `bash -lc` is
/// judged as bash running a script), it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p1_a_command_asked_as_argv_is_judged_as_bash() {
    let allowing =
        setup("[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"allow\"\n")
            .await;
    let (_child, mut c, session, _) = allowing.editor().await;
    let (command, file) = command_in(&allowing.work, "argv-allowed");
    // `bash -lc` itself is no rule's: the person is asked, and allows it.
    c.permission_answers.push_back("allow");
    prompt(&mut c, &session, &format!("argv:{command}")).await;
    assert!(
        file.exists(),
        "control: the allowed argv command did not run"
    );

    let denying =
        setup("[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"deny\"\n")
            .await;
    let (_child, mut c, session, _) = denying.editor().await;
    let (command, file) = command_in(&denying.work, "argv-denied");
    prompt(&mut c, &session, &format!("argv:{command}")).await;
    assert!(said(&c, &format!("refused: {command}")), "{:?}", c.updates);
    assert!(!file.exists(), "a denied argv command ran");
    assert!(c.permission_requests.is_empty(), "the editor was asked");
    let line = denying.audit().pop().unwrap();
    assert_eq!(line["tool"], "bash");
    assert_eq!(line["decision"], "deny", "{line}");
}

/// Issue 44, E9's refusal for a wrapped agent: dsh's own model is told to call again
/// with `sandbox: "off"` (the control: the same write through dsh's `write_file` on a
/// session of its own), which a wrapped agent cannot send. The agent's `fs/write` of
/// the same path outside the roots, and of a git hook inside them, is refused with a
/// text that offers no such retry and says what it can do: ask the person, or have the
/// directory made writable in dsh's config. Nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_a_sandbox_refusal_tells_a_wrapped_agent_what_it_can_do() {
    let allow = "[[permissions.rules]]\ntool = \"write_file\"\naction = \"allow\"\n";
    let s = setup_under("kind = \"sandbox\"\n", allow).await;
    std::fs::create_dir_all(s.work.join(".git/hooks")).unwrap();
    let outside = s.work.parent().unwrap().join("outside.txt");

    let mut own = s.daemon.connect().await;
    own.initialize().await;
    let own_session = own.new_session(&s.work).await;
    let (text, is_error) = own
        .tool(
            Some(&own_session),
            "write_file",
            json!({"path": outside, "content": "x"}),
        )
        .await;
    assert!(is_error, "{text}");
    assert!(text.contains("sandbox: \"off\""), "control: {text}");

    let (_child, mut c, session, _) = s.editor().await;
    prompt(&mut c, &session, &format!("write:{}=x", outside.display())).await;
    let said = last_said(&c);
    assert!(said.starts_with("refused: "), "{said}");
    assert!(!said.contains("sandbox: \"off\""), "{said}");
    assert!(said.contains("[exec.sandbox] writable"), "{said}");
    assert!(said.contains("ask the person"), "{said}");
    let hook = s.work.join(".git/hooks/pre-commit");
    prompt(&mut c, &session, &format!("write:{}=x", hook.display())).await;
    let said = last_said(&c);
    assert!(said.starts_with("refused: "), "{said}");
    assert!(!said.contains("sandbox: \"off\""), "{said}");
    assert!(said.contains("ask the person to make it"), "{said}");
    assert!(
        !outside.exists() && !hook.exists(),
        "the sandbox let a write through"
    );
}

/// The output an update shows of a wrapped agent's terminal: `_meta.terminal_output`'s
/// data (an editor with display-only terminals) or the text of its content items.
fn shown_output(update: &Value) -> String {
    let u = &update["update"];
    let mut shown = u["_meta"]["terminal_output"]["data"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for item in u["content"].as_array().into_iter().flatten() {
        shown.push_str(item["content"]["text"].as_str().unwrap_or_default());
    }
    shown
}

/// Issue 44: a wrapped agent's terminal is shown live in the editor, as dsh's own
/// commands are. The agent names its terminal in a tool call (an id the editor never
/// saw); dsh shows that call with the command's output as it comes: to an editor with
/// display-only terminals as `_meta.terminal_info` / `terminal_output` / `terminal_exit`
/// on the agent's call, to any other as the call's content (the agent's own words kept).
/// The command prints, then waits on a fifo the test writes only once the editor has
/// seen the first line: so that line reached the editor while the command ran. Under the
/// local executor and the sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrapped_agents_terminal_is_shown_live_in_the_editor() {
    let sandbox = "kind = \"sandbox\"\n";
    for (exec, terminal_display) in [("", true), ("", false), (sandbox, true)] {
        let s = setup_under(exec, "").await;
        let fifo = s.work.join("go");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let caps = if terminal_display {
            json!({"_meta": {"terminal_output": true}, "terminal": true})
        } else {
            json!({})
        };
        let (_child, mut c, session, _) = s.editor_offering(caps).await;
        c.permission_answers.push_back("allow_once");
        let command = format!(
            "echo step-one; read line < {}; echo step-two $line",
            fifo.display()
        );
        let turn = c
            .start(
                "session/prompt",
                json!({"sessionId": session,
                       "prompt": [{"type": "text", "text": format!("termshow:{command}")}]}),
            )
            .await;
        let first = c
            .wait_update(|u| shown_output(u).contains("step-one"))
            .await;
        let call_id = first["update"]["toolCallId"].as_str().unwrap().to_string();
        assert!(call_id.starts_with("shows-"), "{first}");
        assert!(
            !c.updates
                .iter()
                .any(|u| shown_output(u).contains("step-two")),
            "the command had not ended"
        );
        let writer = tokio::task::spawn_blocking(move || std::fs::write(&fifo, "now\n"));
        let done = c.wait_for(json!(turn)).await.unwrap();
        writer.await.unwrap().unwrap();
        assert_eq!(done["stopReason"], "end_turn");
        let said = last_said(&c);
        assert!(said.ends_with("exit 0"), "{said}");
        let of_call: Vec<&Value> = c
            .updates
            .iter()
            .filter(|u| u["update"]["toolCallId"] == call_id.as_str())
            .collect();
        let all: String = of_call.iter().map(|u| shown_output(u)).collect();
        assert!(all.contains("step-two now"), "{of_call:?}");
        let terminal_id = call_id.trim_start_matches("shows-");
        if terminal_display {
            let opened = of_call[0];
            assert_eq!(opened["update"]["sessionUpdate"], "tool_call");
            assert_eq!(
                opened["update"]["_meta"]["terminal_info"]["terminal_id"],
                terminal_id
            );
            assert_eq!(
                opened["update"]["content"][1],
                json!({"type": "terminal", "terminalId": terminal_id}),
                "the terminal stays in the content for the editor to draw"
            );
            assert!(
                of_call.iter().any(|u| u["update"]["_meta"]["terminal_exit"]
                    == json!({"terminal_id": terminal_id, "exit_code": 0})),
                "{of_call:?}"
            );
            // The agent names its terminal again in its last update: nothing is shown
            // twice, and the editor's terminal is opened once.
            let data: String = of_call
                .iter()
                .filter_map(|u| u["update"]["_meta"]["terminal_output"]["data"].as_str())
                .collect();
            assert_eq!(data, "step-one\nstep-two now\n", "{of_call:?}");
            let opened = of_call
                .iter()
                .filter(|u| !u["update"]["_meta"]["terminal_info"].is_null())
                .count();
            assert_eq!(opened, 1, "{of_call:?}");
        } else {
            for u in &of_call {
                if let Some(content) = u["update"]["content"].as_array() {
                    assert_eq!(content[0]["content"]["text"], "the agent's words");
                    assert_eq!(content[1]["type"], "content", "{u}");
                }
            }
        }
        assert_eq!(c.permission_requests.len(), 1, "the command was asked once");
    }
}

/// Issue 44: with an editor that offers `fs`, a wrapped agent's file requests are judged
/// and contained as ever, then served by the editor: a read returns the editor's buffer
/// (which differs from the disk), a write goes through the editor's
/// `fs/write_text_file` (the disk keeps its text: the editor saves it) and is shown as a
/// diff on a tool call of dsh's (the buffer's text before, the new text after). A path a
/// rule refuses never reaches the editor: no `fs` request and no update names it. Under
/// the local and the sandbox executor alike (both are this machine's files).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_files_are_the_editors_buffers_and_a_write_shows_its_diff() {
    let rules = "[[permissions.rules]]\ntool = \"read_file\"\npath = \"secret/**\"\naction = \"deny\"\n\
                 [[permissions.rules]]\ntool = \"write_file\"\npath = \"secret/**\"\naction = \"deny\"\n\
                 [[permissions.rules]]\ntool = \"write_file\"\naction = \"allow\"\n\
                 [[permissions.rules]]\ntool = \"read_file\"\naction = \"allow\"\n";
    for exec in ["", "kind = \"sandbox\"\n"] {
        let s = setup_under(exec, rules).await;
        let file = s.work.join("notes.txt");
        std::fs::write(&file, "on disk\n").unwrap();
        std::fs::create_dir_all(s.work.join("secret")).unwrap();
        let secret = s.work.join("secret/key.txt");
        std::fs::write(&secret, "the key\n").unwrap();
        let (_child, mut c, session, _) = s.editor().await;
        let path = file.to_str().unwrap().to_string();
        c.buffers = Some([(path.clone(), "in the buffer\n".to_string())].into());

        prompt(&mut c, &session, &format!("read:{path}")).await;
        assert_eq!(
            last_said(&c),
            "read: in the buffer\n",
            "{exec}: {:?}",
            c.updates
        );
        prompt(&mut c, &session, &format!("write:{path}=new text\n")).await;
        assert_eq!(last_said(&c), "wrote", "{exec}: {:?}", c.updates);
        assert_eq!(c.buffers.as_ref().unwrap()[&path], "new text\n");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "on disk\n",
            "{exec}: written past the editor"
        );
        let shown = c
            .updates
            .iter()
            .find(|u| u["update"]["sessionUpdate"] == "tool_call" && u["update"]["kind"] == "edit")
            .expect("the write is shown as a tool call");
        let diff = &shown["update"]["content"][0];
        assert_eq!(diff["type"], "diff", "{shown}");
        assert_eq!(diff["path"], path.as_str());
        assert_eq!(diff["oldText"], "in the buffer\n");
        assert_eq!(diff["newText"], "new text\n");
        let call_id = shown["update"]["toolCallId"].clone();
        assert!(
            c.updates
                .iter()
                .any(|u| u["update"]["toolCallId"] == call_id
                    && u["update"]["status"] == "completed")
        );
        let methods: Vec<&str> = c.fs_requests.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(
            methods,
            [
                "fs/read_text_file",
                "fs/read_text_file",
                "fs/write_text_file"
            ],
            "{exec}: the read, the diff's old text, the write"
        );

        let secret_path = secret.to_str().unwrap();
        prompt(&mut c, &session, &format!("read:{secret_path}")).await;
        assert!(
            last_said(&c).starts_with("refused: "),
            "{exec}: {:?}",
            c.updates
        );
        prompt(&mut c, &session, &format!("write:{secret_path}=x")).await;
        assert!(
            last_said(&c).starts_with("refused: "),
            "{exec}: {:?}",
            c.updates
        );
        assert_eq!(
            c.fs_requests.len(),
            3,
            "{exec}: a refused path reached the editor"
        );
        assert!(
            !c.updates
                .iter()
                .any(|u| u["update"]["sessionUpdate"] != "agent_message_chunk"
                    && u.to_string().contains(secret_path)),
            "{exec}: an update showed a refused path"
        );
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "the key\n");
        assert!(
            c.permission_requests.is_empty(),
            "{exec}: the editor was asked"
        );
    }
}

/// A failed `dsh upgrade` (the new program fails after it started, so the old one is
/// executed again with everything and serves on): the wrapped agent was stopped for the
/// hand-over and cannot come back with its sessions, so its connection ends cleanly:
/// the agent's session is told that the upgrade failed and the agent stopped, and the
/// connection closes, so the editor's `dsh acp --agent` exits and the editor can start
/// it anew (rather than a connection whose every request fails). The daemon serves on:
/// a new connection gets a new agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_upgrade_ends_a_wrapped_connection_cleanly() {
    let s = setup_started("", ALLOW_TOUCH, true).await;
    let (mut child, mut c, session, pid) = s.working_agent().await;
    // The next program breaks the config once past its check, and so fails to start.
    let program = s._dir.path().join("bin/dsh");
    let next = program.with_extension("next");
    std::fs::write(
        &next,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" --handover-check \"*) exec {bin} \"$@\";; esac\n\
             printf 'this is [not toml' > {config}\nexec {bin} \"$@\"\n",
            bin = crate::common::daemon::BIN,
            config = s.daemon.config.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&next, &program).unwrap();
    let failed = s.upgrade().await;
    assert!(!failed.status.success(), "the upgrade was to fail");
    assert!(gone(pid).await, "the wrapped agent outlived the hand-over");
    let mut told = String::new();
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(m) = c.next_message().await {
            if m["method"] == "session/update" && m["params"]["sessionId"] == session.as_str() {
                told.push_str(
                    m["params"]["update"]["content"]["text"]
                        .as_str()
                        .unwrap_or(""),
                );
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the wrapped connection was not ended");
    assert!(
        told.contains("upgrade failed"),
        "the session was told: {told:?}"
    );
    assert!(!told.contains("was upgraded"), "{told:?}");
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the launcher exits")
        .unwrap();
    assert!(status.code().is_some(), "{status:?}");
    assert!(crate::common::alive(s.daemon.pid), "the daemon serves on");
    let (_child, mut c, session, _) = s.editor().await;
    let (command, file) = command_in(&s.work, "after");
    prompt(&mut c, &session, &command).await;
    assert!(file.exists(), "a new connection's agent does not work");
}

/// E10 with a wrapped agent's own environment (`[[agents]] env`): under the sandbox its
/// `NO_PROXY` (and `no_proxy`) wins over the sandbox's, narrowed to loopback, so an
/// agent told to send even loopback through the proxy reaches its model on the host's
/// loopback by a rule naming its port (on the old code the sandbox's `NO_PROXY` won,
/// the agent went direct and found nothing there). Its `HTTP_PROXY` pointing at a
/// proxy of its own does not: locally (the control) that proxy gets the request,
/// under the sandbox the agent sees dsh's proxy, and a connection to its own goes
/// nowhere (the namespace has no way out but dsh's proxy).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_an_agents_own_no_proxy_wins_narrowed_and_its_own_proxy_goes_nowhere() {
    let model = crate::sandbox_network::http_server().await;
    let own_proxy = crate::sandbox_network::http_server().await;
    let env = format!(
        ", NO_PROXY = \"\", no_proxy = \"example.com\", \
         HTTP_PROXY = \"http://127.0.0.1:{own_proxy}\", http_proxy = \"http://127.0.0.1:{own_proxy}\""
    );
    let get = format!("get:http://localhost:{model}/");

    let local = setup_with_env("", "", false, &env).await;
    let (_child, mut c, session, init) = local.editor().await;
    let seen = &init["_meta"]["env"];
    assert_eq!(
        seen["http_proxy"],
        format!("http://127.0.0.1:{own_proxy}"),
        "{init}"
    );
    prompt(&mut c, &session, &get).await;
    assert_eq!(
        last_said(&c),
        format!("got: hello from {own_proxy}"),
        "control: the local agent's own proxy did not get its request"
    );

    let exec =
        format!("kind = \"sandbox\"\n[exec.sandbox.network]\nallow = [\"localhost:{model}\"]\n");
    let sandboxed = setup_with_env(&exec, "", false, &env).await;
    let (_child, mut c, session, init) = sandboxed.editor().await;
    let seen = &init["_meta"]["env"];
    assert_eq!(seen["NO_PROXY"], "", "{init}");
    assert_eq!(
        seen["no_proxy"], "",
        "beyond loopback goes through the proxy: {init}"
    );
    for name in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"] {
        assert_eq!(seen[name], "http://127.0.0.1:3128", "{name}: {init}");
    }
    prompt(&mut c, &session, &get).await;
    assert_eq!(
        last_said(&c),
        format!("got: hello from {model}"),
        "the agent did not reach its model through dsh's proxy"
    );
    prompt(&mut c, &session, &format!("connect:127.0.0.1:{own_proxy}")).await;
    let said = last_said(&c);
    assert!(
        said.starts_with("failed: ConnectionRefusedError"),
        "the sandboxed agent reached a proxy of its own: {said}"
    );
}

/// P6 with Gemini CLI's `dir_path`: its shell call may run in a directory it names
/// only in its question's explanation (`[in DIR]`). In `sub`, which holds a file named
/// `rm` and a script `run` that runs its arguments, `./run r[m] -f victim` is `rm` run
/// by a program a rule allows. Judged from the session's cwd (the same line asked
/// without a directory: the control) `r[m]` matches nothing and the rule allows it; asked with
/// `dir_path = sub` it is judged there, where the deny rule on `rm` names it, so it is
/// asked (the editor rejects) and the victim stays. On the old code the directory was
/// ignored, the call was allowed and the agent deleted the victim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p6_a_command_in_its_dir_path_is_judged_there() {
    use std::os::unix::fs::PermissionsExt;
    let s = setup(
        "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"rm\"\naction = \"deny\"\n\
         [[permissions.rules]]\ntool = \"bash\"\ncommand = \"./run\"\naction = \"allow\"\n",
    )
    .await;
    let sub = s.work.join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("rm"), "").unwrap();
    std::fs::write(sub.join("run"), "#!/bin/sh\nexec \"$@\"\n").unwrap();
    std::fs::set_permissions(sub.join("run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(sub.join("victim"), "").unwrap();
    let line = "./run r[m] -f victim";
    let (_child, mut c, session, _) = s.editor().await;
    prompt(&mut c, &session, line).await;
    assert!(
        said(&c, &format!("ran: {line}")),
        "control: {:?}",
        c.updates
    );
    assert!(
        c.permission_requests.is_empty(),
        "control: the editor was asked"
    );

    c.permission_answers.push_back("reject");
    prompt(&mut c, &session, &format!("in:sub:{line}")).await;
    assert!(
        sub.join("victim").exists(),
        "the command judged in the session's cwd ran in its dir_path"
    );
    assert!(said(&c, &format!("refused: {line}")), "{:?}", c.updates);
    assert_eq!(c.permission_requests.len(), 1, "the editor was not asked");
    let line_of = s.audit().last().cloned().unwrap();
    assert_eq!(line_of["arguments"]["workdir"], "sub", "{line_of}");
}

/// ACP v1's diff in the question: an agent's `fs/write_text_file` that no rule decides
/// is asked at the editor in a question dsh writes, and that question carries the
/// write's `diff` (the path, the old text as the file tools read it: the editor's
/// buffer when it offers `fs`, else the disk; the new text) and the file as its
/// location. Rejected, nothing is written. Under the sandbox a link out of the roots is
/// refused unasked: its target's text never reaches the editor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asked_write_carries_its_diff_to_the_editor() {
    for exec in ["", "kind = \"sandbox\"\n"] {
        let s = setup_under(exec, "").await;
        let file = s.work.join("notes.txt");
        std::fs::write(&file, "on disk\n").unwrap();
        let outside = s.work.parent().unwrap().join("outside.txt");
        std::fs::write(&outside, "outside text\n").unwrap();
        std::os::unix::fs::symlink(&outside, s.work.join("link.txt")).unwrap();
        let path = file.to_str().unwrap().to_string();
        // Each editor stays connected to the end: a sandboxed agent ending while the
        // next starts can fail the next one's start (a race of the sandbox's
        // placeholders, not of this test's subject).
        let mut editors = Vec::new();
        for buffer in [Some("in the buffer\n"), None] {
            let (child, mut c, session, _) = match buffer {
                Some(_) => s.editor().await,
                None => s.editor_offering(json!({"terminal": true})).await,
            };
            if let Some(text) = buffer {
                c.buffers = Some([(path.clone(), text.to_string())].into());
            }
            c.permission_answers.push_back("reject_once");
            prompt(&mut c, &session, &format!("write:{path}=new text\n")).await;
            assert!(
                last_said(&c).starts_with("refused: "),
                "{exec}: {:?}",
                c.updates
            );
            assert_eq!(c.permission_requests.len(), 1, "{exec}: not asked");
            let call = &c.permission_requests[0]["toolCall"];
            assert_eq!(call["kind"], "edit", "{call}");
            let diff = &call["content"][0];
            assert_eq!(diff["type"], "diff", "{exec}: {call}");
            assert_eq!(diff["path"], path.as_str());
            assert_eq!(
                diff["oldText"],
                buffer.unwrap_or("on disk\n"),
                "{exec}: {call}"
            );
            assert_eq!(diff["newText"], "new text\n");
            assert_eq!(call["locations"][0]["path"], path.as_str(), "{call}");
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "on disk\n");
            if let Some(text) = buffer {
                assert_eq!(c.buffers.as_ref().unwrap()[&path], text, "{exec}: written");
            }
            editors.push((child, c));
        }
        if !exec.is_empty() {
            let (_child, mut c, session, _) = s.editor().await;
            let link = s.work.join("link.txt");
            prompt(&mut c, &session, &format!("write:{}=x", link.display())).await;
            assert!(last_said(&c).starts_with("refused: "), "{:?}", c.updates);
            assert!(c.permission_requests.is_empty(), "a link out was asked");
            assert!(
                !c.updates
                    .iter()
                    .any(|u| u.to_string().contains("outside text"))
            );
            assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside text\n");
        }
    }
}

/// E9 (the reconnect race): a sandboxed wrapped agent whose editor goes away while the
/// next editor starts the next agent on the same daemon. Each agent's sandbox holds the
/// workspace's placeholders (`.dsh/`, `.zed/`, ...); the next one's layout was walked
/// while the last one's sandbox was let go, which removed placeholders the walk had
/// guarded, and the next agent failed to start (bwrap: "Can't find source path
/// .../work/.zed"; or dsh: "cannot open /proc/N/ns/net", its sandbox already dead):
/// 4 to 11 starts in 30 on the old code. Timing decides here, so this is the users'
/// shape only; `sandbox_walks::e9_a_sandbox_built_while_another_ends_keeps_the_
/// placeholders_its_walk_saw` holds the cause every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_a_sandboxed_agent_restarted_as_its_editor_reconnects_starts_each_time() {
    let s = setup_under("kind = \"sandbox\"\n", ALLOW_TOUCH).await;
    for round in 0..8 {
        let (_child, mut c, session, _) = s.editor().await;
        let (command, file) = command_in(&s.work, &format!("round-{round}"));
        prompt(&mut c, &session, &command).await;
        assert!(
            file.exists(),
            "round {round}: the agent did not start or work: {:?}",
            c.updates
        );
        // The editor goes (its `dsh acp` killed) as the next one comes.
    }
}
