//! Hooks v3 (issue 30) through the real binary: names that tell hooks apart, Claude
//! Code's own settings and `dsh hooks import`, `dsh hooks test`, model judges against
//! the scripted model server, HTTP hooks against loopback servers, hooks in parallel,
//! and the new events.

use crate::common;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// `dsh ARGS` to its end: exit code, stdout, stderr.
async fn run_dsh(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = common::dsh();
    cmd.args(args).current_dir(cwd);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().await.expect("run dsh");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hooks_of_one_interpreter_get_their_scripts_names_and_duplicates_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let config = d.join("dsh.toml");
    std::fs::write(
        &config,
        "[[hooks.command]]\nargv = [\"python3\", \"a/block.py\"]\n\
         [[hooks.command]]\nargv = [\"node\", \"b/block.js\"]\n",
    )
    .unwrap();
    let (code, _, err) = run_dsh(
        &["check-config", "--config", config.to_str().unwrap()],
        d,
        &[],
    )
    .await;
    assert_ne!(code, 0);
    assert!(
        err.contains("`python3 a/block.py`")
            && err.contains("`node b/block.js`")
            && err.contains("\"block\""),
        "{err}"
    );
    std::fs::write(
        &config,
        "[[hooks.command]]\nargv = [\"python3\", \"a/block.py\"]\n\
         [[hooks.command]]\nargv = [\"node\", \"b/other.js\"]\n",
    )
    .unwrap();
    let (code, out, err) = run_dsh(
        &["check-config", "--config", config.to_str().unwrap()],
        d,
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("a/block.py"), "{out}");
}

/// Writes an executable script `dir/name` (parents made).
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn audit(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("state/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l["event"] == "execution")
        .collect()
}

/// Three Claude Code hooks as Claude Code runs them: each logs the tool it saw to
/// `$CLAUDE_PROJECT_DIR/seen.log` and refuses one thing, each its own way.
fn claude_hooks(ws: &Path) {
    let common = r#"#!/usr/bin/env python3
import json, os, sys
event = json.load(sys.stdin)
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], "seen.log"), "a") as f:
    f.write(os.path.basename(sys.argv[0]) + " " + event["hook_event_name"] + " " + event["tool_name"] + "\n")
tool_input = event["tool_input"]
"#;
    script(
        ws,
        ".claude/hooks/bash_guard.py",
        &format!(
            "{common}if 'rm ' in tool_input.get('command', ''):\n    print('no rm here', file=sys.stderr)\n    sys.exit(2)\n"
        ),
    );
    script(
        ws,
        ".claude/hooks/write_guard.py",
        &format!(
            "{common}if tool_input.get('file_path', '').endswith('.lock'):\n    print(json.dumps({{'hookSpecificOutput': {{'hookEventName': 'PreToolUse', 'permissionDecision': 'deny', 'permissionDecisionReason': 'lock files are generated'}}}}))\n"
        ),
    );
    script(
        ws,
        ".claude/hooks/read_guard.py",
        &format!(
            "{common}if 'secret' in tool_input.get('file_path', ''):\n    print(json.dumps({{'decision': 'block', 'reason': 'secrets stay put'}}))\n"
        ),
    );
}

const CLAUDE_SETTINGS: &str = r#"{
  "permissions": {"allow": ["Bash(ls:*)"]},
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "python3 \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/bash_guard.py", "timeout": 30}]},
      {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "python3 \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/write_guard.py"}]},
      {"matcher": "^Re.d$", "hooks": [{"type": "command", "command": "python3 \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/read_guard.py"}]}
    ],
    "PreCompact": [{"hooks": [{"type": "command", "command": "echo compacting"}]}]
  }
}"#;

/// The same calls in a session of `c` working in `ws`: each result's text and error flag.
async fn exercise_claude_hooks(c: &mut common::client::Client, ws: &Path) -> Vec<(String, bool)> {
    let s = c.new_session(ws).await;
    std::fs::write(ws.join("ok.txt"), "fine\n").unwrap();
    std::fs::write(ws.join("secret.txt"), "hidden\n").unwrap();
    let path = |name: &str| ws.join(name).to_string_lossy().into_owned();
    vec![
        c.bash(&s, "echo hi").await,
        c.bash(&s, "rm -f ok.txt").await,
        c.tool(
            Some(&s),
            "write_file",
            json!({"path": path("a.lock"), "content": "x"}),
        )
        .await,
        c.tool(
            Some(&s),
            "write_file",
            json!({"path": path("b.txt"), "content": "x"}),
        )
        .await,
        c.tool(Some(&s), "read_file", json!({"path": path("secret.txt")}))
            .await,
        c.tool(Some(&s), "read_file", json!({"path": path("ok.txt")}))
            .await,
    ]
}

fn assert_claude_outcomes(got: &[(String, bool)], seen: &str) {
    assert_eq!(got[0], ("hi\n".to_string(), false), "{got:?}");
    assert_eq!(
        got[1].0, "Error: vetoed by hook bash_guard: no rm here",
        "{got:?}"
    );
    assert_eq!(
        got[2].0,
        "Error: vetoed by hook write_guard: lock files are generated"
    );
    assert!(!got[3].1, "{got:?}");
    assert_eq!(
        got[4].0,
        "Error: vetoed by hook read_guard: secrets stay put"
    );
    assert!(!got[5].1 && got[5].0.contains("fine"), "{got:?}");
    // Each hook saw only what its matcher names, under Claude Code's names.
    let mut lines: Vec<&str> = seen.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "bash_guard.py PreToolUse Bash",
            "bash_guard.py PreToolUse Bash",
            "read_guard.py PreToolUse Read",
            "read_guard.py PreToolUse Read",
            "write_guard.py PreToolUse Write",
            "write_guard.py PreToolUse Write",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_settings_load_as_they_are_and_their_import_behaves_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let settings = d.join("claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, CLAUDE_SETTINGS).unwrap();

    // Loaded straight from Claude Code's settings.
    let live = d.join("live");
    let ws = common::daemon::workspace(&live, "ws");
    claude_hooks(&ws);
    let config = format!(
        "[permissions]\ndefault_mode = \"auto\"\n[hooks]\nclaude_settings = [{settings:?}]\n"
    );
    let (_daemon, mut c) = common::daemon::stdio_daemon(&live, &config, &[]).await;
    let got = exercise_claude_hooks(&mut c, &ws).await;
    assert_claude_outcomes(&got, &std::fs::read_to_string(ws.join("seen.log")).unwrap());
    let names: Vec<String> = audit(&live)
        .iter()
        .flat_map(|l| l["trace"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["name"].as_str().map(String::from))
        .filter(|n| n.starts_with("hook "))
        .collect();
    assert!(names.contains(&"hook read_guard".to_string()), "{names:?}");

    // `dsh hooks import` prints TOML that loads again and decides the same.
    let (code, toml, err) = run_dsh(&["hooks", "import", settings.to_str().unwrap()], d, &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        toml.contains("# skipped: PreCompact `echo compacting`: dsh has no PreCompact event"),
        "{toml}"
    );
    assert_eq!(toml.matches("[[hooks.command]]").count(), 3, "{toml}");
    let imported = d.join("imported");
    let ws = common::daemon::workspace(&imported, "ws");
    claude_hooks(&ws);
    let config = format!("[permissions]\ndefault_mode = \"auto\"\n{toml}");
    let (_daemon, mut c) = common::daemon::stdio_daemon(&imported, &config, &[]).await;
    let again = exercise_claude_hooks(&mut c, &ws).await;
    assert_claude_outcomes(
        &again,
        &std::fs::read_to_string(ws.join("seen.log")).unwrap(),
    );
    assert_eq!(got.len(), again.len());

    // A plugin folder: `${CLAUDE_PLUGIN_ROOT}` is the folder.
    let plugin = d.join("plugin");
    script(
        &plugin,
        "hooks/stamp.sh",
        "#!/bin/sh\ncat >/dev/null\nexit 0\n",
    );
    std::fs::write(
        plugin.join("hooks/hooks.json"),
        r#"{"description": "d", "hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/hooks/stamp.sh"}]}]}}"#,
    )
    .unwrap();
    let (code, toml, err) = run_dsh(&["hooks", "import", plugin.to_str().unwrap()], d, &[]).await;
    assert_eq!(code, 0, "{err}");
    let root = std::fs::canonicalize(&plugin).unwrap();
    assert!(
        toml.contains(&format!("CLAUDE_PLUGIN_ROOT={}", root.display())),
        "{toml}"
    );
    assert!(
        toml.contains("name = \"stamp\"") && toml.contains("event = \"post_tool\""),
        "{toml}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_projects_claude_settings_run_and_an_untrusted_ones_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let trusted = common::daemon::workspace(d, "trusted");
    let untrusted = common::daemon::workspace(d, "untrusted");
    for project in [&trusted, &untrusted] {
        std::fs::create_dir_all(project.join(".git")).unwrap();
        std::fs::create_dir_all(project.join(".dsh")).unwrap();
        std::fs::write(project.join(".dsh/config.toml"), "").unwrap();
        claude_hooks(project);
        std::fs::write(project.join(".claude/settings.json"), CLAUDE_SETTINGS).unwrap();
    }
    let config = format!(
        "[permissions]\ndefault_mode = \"auto\"\ntrusted_projects = [{:?}]\n",
        trusted
    );
    let (_daemon, mut c) = common::daemon::stdio_daemon(d, &config, &[]).await;
    crate::sandbox_pins::trust(&d.join("state"), &d.join("dsh.toml"), &trusted).await;
    let s = c.new_session(&trusted).await;
    let (text, _) = c.bash(&s, "rm -f nothing").await;
    assert_eq!(text, "Error: vetoed by hook bash_guard: no rm here");
    let s = c.new_session(&untrusted).await;
    let (text, is_error) = c.bash(&s, "rm -f nothing").await;
    assert_eq!((text.as_str(), is_error), ("(no output)", false));
    assert!(!untrusted.join("seen.log").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_test_runs_the_matching_hooks_for_real_and_exits_by_their_decision() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let guard = script(
        d,
        "hooks/guard.py",
        r#"#!/usr/bin/env python3
import json, sys
call = json.load(sys.stdin)
command = call["arguments"]["command"]
if command.startswith("rm"):
    print(json.dumps({"decision": "deny", "reason": "no rm"}))
elif command.startswith("git push"):
    print(json.dumps({"decision": "ask", "reason": "pushing"}))
else:
    print(json.dumps({"decision": "allow"}))
"#,
    );
    let broken = script(d, "hooks/broken.sh", "#!/bin/sh\necho oops >&2\nexit 1\n");
    let config = d.join("dsh.toml");
    std::fs::write(
        &config,
        format!(
            "[permissions]\ndefault_mode = \"auto\"\n\
             [[hooks.command]]\nargv = [\"python3\", {guard:?}]\n\
             [[hooks.command]]\nargv = [{broken:?}]\ncommands = [\"boom\"]\n\
             [[hooks.command]]\nargv = [{broken:?}]\nname = \"later\"\nevent = \"post_tool\"\n"
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let test = |command: &'static str| {
        let d = d.to_path_buf();
        let config = config.to_string();
        async move {
            run_dsh(
                &[
                    "hooks", "test", "--config", &config, "--json", "--", command,
                ],
                &d,
                &[],
            )
            .await
        }
    };
    let (code, out, err) = test("echo hi").await;
    assert_eq!(code, 0, "{out}{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["decision"], "allow");
    assert_eq!(report["hooks"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(report["hooks"][0]["name"], "guard");
    assert_eq!(report["hooks"][0]["raw"], "{\"decision\": \"allow\"}\n");
    assert!(report["hooks"][0]["ms"].is_u64());
    let (code, out, _) = test("rm -rf x").await;
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["hooks"][0]["reason"],
        "no rm"
    );
    assert_eq!(test("git push origin").await.0, 2);
    let (code, out, _) = test("boom now").await;
    assert_eq!(code, 3, "{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["hooks"][1]["name"], "broken");
    assert_eq!(report["hooks"][1]["decision"], "failed");
    assert!(
        report["hooks"][1]["reason"]
            .as_str()
            .unwrap()
            .contains("exit code 1: oops"),
        "{report}"
    );
    // A post_tool hook reads a result from --input; the text report for people.
    let input = d.join("input.json");
    std::fs::write(
        &input,
        r#"{"arguments": {"command": "ls"}, "result": {"text": "a\n"}}"#,
    )
    .unwrap();
    let (code, out, _) = run_dsh(
        &[
            "hooks",
            "test",
            "--config",
            config,
            "--event",
            "post_tool",
            "--input",
            input.to_str().unwrap(),
        ],
        d,
        &[],
    )
    .await;
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("hook later: failed") && out.ends_with("decision: failed\n"),
        "{out}"
    );
}

fn trace_of(line: &Value, name: &str) -> Value {
    line["trace"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|t| t["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_judge_decides_fails_closed_caches_and_shadows_and_replays() {
    use common::fake_model::{FakeModel, Reply, text, tool_call};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = FakeModel::start(vec![]).await;
    let config = format!(
        "{}[permissions]\ndefault_mode = \"auto\"\n\
         [[hooks.command]]\nrun = \"model\"\nname = \"judge\"\ntimeout_ms = 1500\ntools = [\"bash\"]\n\
         prompt = \"Deny anything that deletes files.\"\n\
         [[hooks.command]]\nrun = \"model\"\nname = \"watcher\"\nenforce = false\ncommands = [\"cat\"]\n\
         prompt = \"Say deny to every cat.\"\n",
        model.config()
    );
    let (_daemon, mut c) = common::daemon::stdio_daemon(d, &config, &[]).await;
    let ws = common::daemon::workspace(d, "ws");
    let s = c.new_session(&ws).await;

    // allow, as JSON text; deny through the `decide` tool.
    model.push(text("{\"decision\": \"allow\", \"reason\": \"harmless\"}"));
    assert_eq!(c.bash(&s, "echo one").await, ("one\n".into(), false));
    model.push(tool_call(
        "j",
        "decide",
        r#"{"decision":"deny","reason":"deletes files"}"#,
    ));
    assert_eq!(
        c.bash(&s, "rm -rf build").await.0,
        "Error: vetoed by hook judge: deletes files"
    );
    let asked = model.count();
    // The judge read its prompt and the call.
    let request = model_request(&model, asked - 1);
    assert!(
        request.contains("Deny anything that deletes files.") && request.contains("rm -rf build")
    );
    // The same call again in the session: answered from the cache, no request.
    assert_eq!(
        c.bash(&s, "rm -rf build").await.0,
        "Error: vetoed by hook judge: deletes files (cached)"
    );
    assert_eq!(model.count(), asked);
    let line = audit(d).pop().unwrap();
    assert_eq!(
        trace_of(&line, "hook judge")["reason"],
        "deletes files (cached)"
    );

    // Garbage, an API error and silence all deny, each said.
    model.push(text("I think it is probably fine"));
    let (out, _) = c.bash(&s, "echo two").await;
    assert!(
        out.contains("hook judge: model judge failed: unparsable answer"),
        "{out}"
    );
    model.push(Reply::Status(500, "overloaded", None));
    let (out, _) = c.bash(&s, "echo three").await;
    assert!(
        out.contains("model judge failed: API error") && out.contains("500"),
        "{out}"
    );
    model.push(Reply::EventsThenHold(vec![]));
    let (out, _) = c.bash(&s, "echo four").await;
    assert!(
        out.contains("model judge failed: timeout: no answer within 1500ms"),
        "{out}"
    );
    // A failure is not cached: the same call asks again.
    model.push(text("{\"decision\": \"allow\"}"));
    assert_eq!(c.bash(&s, "echo two").await, ("two\n".into(), false));

    // A shadow judge is traced and changes nothing. The command waits until the shadow
    // has been asked, so the shadow answers before the call ends.
    let fifo = common::Fifo::new(d, "go");
    model.push(text("{\"decision\": \"allow\"}"));
    model.push(text(
        "{\"decision\": \"deny\", \"reason\": \"reads are bad\"}",
    ));
    let before = model.count();
    let id = c
        .start(
            "_dsh/tools/call",
            json!({"sessionId": s, "name": "bash",
                   "arguments": {"command": format!("cat {}", fifo.path()), "description": "d"}}),
        )
        .await;
    while model.count() < before + 2 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    fifo.release().await;
    let answer = c.wait_for(json!(id)).await.unwrap();
    assert_eq!(answer["content"][0]["text"], "go\n", "{answer}");
    let line = audit(d).pop().unwrap();
    let shadow = trace_of(&line, "hook watcher");
    assert_eq!(
        (shadow["decision"].as_str(), shadow["enforced"].as_bool()),
        (Some("deny"), Some(false))
    );
    assert_eq!(shadow["reason"], "reads are bad");

    // Replay: how the judge would have decided the log's calls, counted.
    let candidate = d.join("candidate.toml");
    std::fs::write(
        &candidate,
        format!(
            "{}[permissions]\ndefault_mode = \"auto\"\n[[hooks.command]]\nrun = \"model\"\nname = \"strict\"\ntools = [\"bash\"]\nprompt = \"Deny everything.\"\n",
            model.config()
        ),
    )
    .unwrap();
    let bash_calls = audit(d).iter().filter(|l| l["tool"] == "bash").count();
    for _ in 0..bash_calls {
        model.push(text("{\"decision\": \"deny\", \"reason\": \"strict\"}"));
    }
    let (code, out, err) = run_dsh(
        &[
            "policy",
            "replay",
            "--audit",
            d.join("state/audit.jsonl").to_str().unwrap(),
            "--config",
            candidate.to_str().unwrap(),
            "--hooks",
            "--json",
        ],
        d,
        &[],
    )
    .await;
    assert!(code == 0 || code == 1, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"));
    let denied = report["hooks"]["hook strict"]["deny"].as_u64().unwrap_or(0);
    assert_eq!(denied as usize, bash_calls, "{report}");
}

/// The `index`th chat request the fake model saw, as text.
fn model_request(model: &common::fake_model::FakeModel, index: usize) -> String {
    model.request_at(index).to_string()
}

/// A hook endpoint on loopback: it reads each POST, keeps its `x-hook-token` header,
/// and answers by the command in it: `deny` denies, `hang` never answers, `fail`
/// answers 500, anything else allows.
async fn hook_endpoint() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hooks/guard", listener.local_addr().unwrap());
    let tokens = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = tokens.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head_end, length) = loop {
                    let n = stream.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..p]).to_lowercase();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        if let Some(token) =
                            head.lines().find_map(|l| l.strip_prefix("x-hook-token:"))
                        {
                            seen.lock().unwrap().push(token.trim().to_string());
                        }
                        break (p + 4, length);
                    }
                };
                while buf.len() < head_end + length {
                    let n = stream.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let input: Value = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
                let command = input["arguments"]["command"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let (status, body) = if command.contains("hang") {
                    // Holds the connection until the client gives up.
                    let _ = stream.read(&mut chunk).await;
                    return;
                } else if command.contains("fail") {
                    (500, "{\"error\": \"broken\"}".to_string())
                } else if command.contains("deny") {
                    (
                        200,
                        json!({"decision": "deny", "reason": "the endpoint said no"}).to_string(),
                    )
                } else {
                    (200, json!({"decision": "allow"}).to_string())
                };
                let out = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(out.as_bytes()).await;
            });
        }
    });
    (url, tokens)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_hook_answers_and_fails_closed_on_a_hang_a_500_or_a_missing_header() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (url, tokens) = hook_endpoint().await;
    // A header's value is never written in the config.
    let config = d.join("bad.toml");
    std::fs::write(
        &config,
        format!(
            "[[hooks.command]]\nurl = {url:?}\nheaders = {{ \"X-Hook-Token\" = \"Bearer abc\" }}\n"
        ),
    )
    .unwrap();
    let (code, _, err) = run_dsh(
        &["check-config", "--config", config.to_str().unwrap()],
        d,
        &[],
    )
    .await;
    assert!(
        code != 0 && err.contains("is not the name of an environment variable"),
        "{err}"
    );

    let config = format!(
        "[permissions]\ndefault_mode = \"auto\"\n\
         [[hooks.command]]\nurl = {url:?}\ntimeout_ms = 1000\nheaders = {{ \"X-Hook-Token\" = \"HOOK_TOKEN\" }}\n\
         [[hooks.command]]\nurl = {url:?}\nname = \"unset\"\ncommands = [\"printf\"]\nheaders = {{ \"X-Hook-Token\" = \"NO_SUCH_VARIABLE_SET\" }}\n"
    );
    let (_daemon, mut c) =
        common::daemon::stdio_daemon(d, &config, &[("HOOK_TOKEN", "t0ken")]).await;
    let ws = common::daemon::workspace(d, "ws");
    let s = c.new_session(&ws).await;
    assert_eq!(c.bash(&s, "echo fine").await, ("fine\n".into(), false));
    assert_eq!(
        c.bash(&s, "echo deny").await.0,
        "Error: vetoed by hook guard: the endpoint said no"
    );
    assert_eq!(
        c.bash(&s, "echo hang").await.0,
        "Error: vetoed by hook guard: did not answer within 1000ms"
    );
    let (out, _) = c.bash(&s, "echo fail").await;
    assert!(
        out.starts_with("Error: vetoed by hook guard: answered HTTP 500"),
        "{out}"
    );
    let (out, _) = c.bash(&s, "printf x").await;
    assert_eq!(
        out,
        "Error: vetoed by hook unset: header x-hook-token: the environment variable NO_SUCH_VARIABLE_SET is not set"
    );
    assert!(tokens.lock().unwrap().iter().all(|t| t == "t0ken"));
    assert_eq!(
        tokens.lock().unwrap().len(),
        5,
        "{:?}",
        tokens.lock().unwrap()
    );
}

/// A pre_tool hook that marks its start in `$OVERLAP_DIR`, then (with `wait`) stays
/// until five hooks have started, and records how many had started and how many had
/// finished when it began: hooks asked at once all see five started; hooks asked one
/// after another each see every earlier one finished.
const OVERLAP_HOOK: &str = r#"#!/usr/bin/env python3
import json, os, sys, time
json.load(sys.stdin)
d = os.environ["OVERLAP_DIR"]
wait = sys.argv[1] == "wait"
started = len([f for f in os.listdir(d) if f.startswith("start-")])
finished = len([f for f in os.listdir(d) if f.startswith("done-")])
open(os.path.join(d, "start-%d" % os.getpid()), "w").close()
alive_together = 1
if wait:
    # Bounded by the hook's own timeout: a hook left waiting is a failed test, not a hang.
    while len([f for f in os.listdir(d) if f.startswith("start-")]) < 5:
        time.sleep(0.005)
    alive_together = 5
with open(os.path.join(d, "..", "overlap.log"), "a") as f:
    f.write("%d %d %d\n" % (started, finished, alive_together))
open(os.path.join(d, "done-%d" % os.getpid()), "w").close()
print("{}")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_tool_hooks_run_at_once_or_in_turn_and_combine_in_config_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hook = script(d, "overlap.py", OVERLAP_HOOK);
    let marks = d.join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    // Five matching hooks, each staying until all five have started: only hooks asked
    // at once can all answer (one after another, the first would wait for ever, time
    // out, and deny).
    let mut config = String::from("[permissions]\ndefault_mode = \"auto\"\n");
    for i in 1..=5 {
        config.push_str(&format!(
            "[[hooks.command]]\nargv = [{hook:?}, \"wait\"]\nname = \"p{i}\"\ncommands = [\"echo\"]\nenv = [\"OVERLAP_DIR\"]\ntimeout_ms = 20000\n"
        ));
    }
    // Five more that run one after another.
    for i in 1..=5 {
        config.push_str(&format!(
            "[[hooks.command]]\nargv = [{hook:?}, \"go\"]\nname = \"s{i}\"\ncommands = [\"printf\"]\nsequential = true\nenv = [\"OVERLAP_DIR\"]\n"
        ));
    }
    // Two rewriters at once: the later in config order answers first, and the earlier's
    // rewrite is applied first all the same; the later one changed the same field from
    // the original, so it is asked again about the merged call (and has nothing to say).
    let rewriter = script(
        d,
        "rewrite.py",
        r#"#!/usr/bin/env python3
import json, os, sys, time
call = json.load(sys.stdin)
if call["arguments"]["command"] != "true rewrite-me":
    sys.exit(0)
mark = os.path.join(os.environ["OVERLAP_DIR"], "..", "second-answered")
if sys.argv[1] == "first":
    while not os.path.exists(mark):
        time.sleep(0.005)
    print(json.dumps({"rewrite": {"arguments": {"command": "echo from-first", "description": "first"}}}))
else:
    print(json.dumps({"rewrite": {"arguments": {"command": "echo from-second"}}}))
    open(mark, "w").close()
"#,
    );
    config.push_str(&format!(
        "[[hooks.command]]\nargv = [{rewriter:?}, \"first\"]\nname = \"r1\"\ncommands = [\"true\"]\nenv = [\"OVERLAP_DIR\"]\n\
         [[hooks.command]]\nargv = [{rewriter:?}, \"second\"]\nname = \"r2\"\ncommands = [\"true\"]\nenv = [\"OVERLAP_DIR\"]\n"
    ));
    let (_daemon, mut c) =
        common::daemon::stdio_daemon(d, &config, &[("OVERLAP_DIR", marks.to_str().unwrap())]).await;
    let ws = common::daemon::workspace(d, "ws");
    let s = c.new_session(&ws).await;

    assert_eq!(
        c.bash(&s, "echo together").await,
        ("together\n".into(), false)
    );
    let log = std::fs::read_to_string(d.join("overlap.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 5, "{log}");
    assert!(
        lines.iter().all(|l| l.ends_with(" 0 5")),
        "all five alive at once: {log}"
    );
    let line = audit(d).pop().unwrap();
    let said: Vec<&str> = line["trace"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("hook p"))
        .collect();
    assert_eq!(
        said,
        ["hook p1", "hook p2", "hook p3", "hook p4", "hook p5"],
        "traced in config order"
    );

    // `sequential = true`: each starts after every one before it finished.
    std::fs::remove_file(d.join("overlap.log")).unwrap();
    for f in std::fs::read_dir(&marks).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    assert_eq!(c.bash(&s, "printf x").await, ("x".into(), false));
    let log = std::fs::read_to_string(d.join("overlap.log")).unwrap();
    let expected: Vec<String> = (0..5).map(|n| format!("{n} {n} 1")).collect();
    assert_eq!(log.lines().collect::<Vec<_>>(), expected, "{log}");

    // Rewrites in config order, whatever order they came in; a later rewrite of a field
    // an earlier one changed is asked again about the merged call; the rewritten call is
    // judged once more.
    let (out, _) = c.bash(&s, "true rewrite-me").await;
    assert_eq!(out, "from-first\n");
    let line = audit(d).pop().unwrap();
    assert_eq!(line["arguments"]["command"], "echo from-first");
    assert_eq!(line["arguments"]["description"], "first");
    let rewrites: Vec<(String, String)> = line["trace"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"].as_str().is_some_and(|n| n.starts_with("hook r")))
        .map(|t| {
            (
                t["name"].as_str().unwrap().into(),
                t["decision"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        rewrites,
        [
            ("hook r1".to_string(), "rewrite".to_string()),
            ("hook r2".into(), "rewrite_conflict".into()),
            ("hook r2".into(), "none".into())
        ]
    );
}

/// Claude Code hooks at the four new events, as Claude Code would run them: each logs
/// what it read to `$CLAUDE_PROJECT_DIR/events.log`.
const EVENT_HOOK: &str = r#"#!/usr/bin/env python3
import json, os, sys
event = json.load(sys.stdin)
name = event["hook_event_name"]
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], "events.log"), "a") as f:
    f.write(json.dumps(event) + "\n")
if name == "Stop" and not event["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "run the tests before you stop"}))
elif name == "PostToolUseFailure":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": name, "additionalContext": "it failed: " + event["error"].strip()}}))
"#;

fn logged_events(ws: &Path) -> Vec<Value> {
    std::fs::read_to_string(ws.join("events.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_session_end_notification_and_post_tool_failure_through_claude_codes_dialect() {
    use common::fake_model::{FakeModel, text};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ws = common::daemon::workspace(d, "ws");
    script(&ws, ".claude/hooks/events.py", EVENT_HOOK);
    let command = "python3 \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/events.py";
    let group = |event: &str| {
        format!(r#""{event}": [{{"hooks": [{{"type": "command", "command": {command:?}}}]}}]"#)
    };
    let settings = d.join("settings.json");
    std::fs::write(
        &settings,
        format!(
            "{{\"hooks\": {{{}, {}, {}, {}}}}}",
            group("Stop"),
            group("SessionEnd"),
            group("Notification"),
            group("PostToolUseFailure")
        ),
    )
    .unwrap();
    let model = FakeModel::start(vec![text("done"), text("tests pass, done")]).await;
    let config = format!(
        "{}[permissions]\ndefault_mode = \"auto\"\n[hooks]\nclaude_settings = [{settings:?}]\n",
        model.config()
    );
    let (mut daemon, mut c) = common::daemon::stdio_daemon(d, &config, &[]).await;
    let s = c.new_session(&ws).await;

    // Stop: the first end of the turn is sent on with the hook's reason; the second
    // (stop_hook_active) ends it.
    c.prompt(&s, "do the thing").await.unwrap();
    assert_eq!(model.count(), 2);
    assert!(
        model
            .request_at(1)
            .to_string()
            .contains("run the tests before you stop")
    );
    let stops: Vec<Value> = logged_events(&ws)
        .into_iter()
        .filter(|e| e["hook_event_name"] == "Stop")
        .collect();
    assert_eq!(stops.len(), 2);
    assert_eq!(
        (
            stops[0]["stop_hook_active"].as_bool(),
            stops[1]["stop_hook_active"].as_bool()
        ),
        (Some(false), Some(true))
    );
    assert_eq!(stops[0]["session_id"], json!(s));

    // PostToolUseFailure: a command that fails; its context reaches the model's history.
    c.prompt(&s, "!ls /no/such/dir").await.unwrap();
    let failure = logged_events(&ws)
        .into_iter()
        .find(|e| e["hook_event_name"] == "PostToolUseFailure")
        .expect("a PostToolUseFailure event");
    assert_eq!(failure["tool_name"], "Bash");
    assert_eq!(failure["tool_input"]["command"], "ls /no/such/dir");
    let log = std::fs::read_to_string(d.join(format!("state/sessions/{s}.jsonl"))).unwrap();
    assert!(
        log.contains("it failed: ") && log.contains("hook:events"),
        "{log}"
    );
    // A command that succeeds is no failure.
    c.prompt(&s, "!true").await.unwrap();
    let failures = logged_events(&ws)
        .into_iter()
        .filter(|e| e["hook_event_name"] == "PostToolUseFailure")
        .count();
    assert_eq!(failures, 1);

    // Notification: dsh is about to ask the person.
    c.set_mode(&s, "ask").await;
    let id = c
        .start(
            "_dsh/tools/call",
            json!({"sessionId": s, "name": "bash", "arguments": {"command": "touch asked", "description": "d"}}),
        )
        .await;
    let question = c.wait_permission_request().await;
    c.send(json!({"jsonrpc": "2.0", "id": question["id"],
                  "result": {"outcome": {"outcome": "selected", "optionId": "reject_once"}}}))
        .await;
    c.wait_for(json!(id)).await.unwrap();
    // The notifier runs beside the question, not before it: wait for its line.
    let mut notified = None;
    for _ in 0..500 {
        notified = logged_events(&ws)
            .into_iter()
            .find(|e| e["hook_event_name"] == "Notification");
        if notified.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let notified = notified.expect("a Notification event");
    assert_eq!(notified["message"], "dsh needs your permission to use bash");
    assert_eq!(notified["notification_type"], "permission_prompt");

    // SessionEnd: at close.
    c.request("session/close", json!({"sessionId": s}))
        .await
        .unwrap();
    let ended: Vec<Value> = logged_events(&ws)
        .into_iter()
        .filter(|e| e["hook_event_name"] == "SessionEnd")
        .collect();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0]["session_id"], json!(s));

    // And at the daemon's stop, for the sessions still open (not again for the closed one).
    let open = c.new_session(&ws).await;
    // The daemon may close before it answers: the request is only sent.
    c.start("_dsh/stop", json!({})).await;
    daemon.wait().await.unwrap();
    let ended: Vec<Value> = logged_events(&ws)
        .into_iter()
        .filter(|e| e["hook_event_name"] == "SessionEnd")
        .collect();
    let ids: Vec<&Value> = ended.iter().map(|e| &e["session_id"]).collect();
    assert_eq!(ids, [&json!(s), &json!(open)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_hook_sends_a_turn_on_at_most_max_continues_times() {
    use common::fake_model::{FakeModel, text};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hook = script(
        d,
        "never_done.sh",
        "#!/bin/sh\ncat >/dev/null\necho '{\"continue\": true, \"reason\": \"keep going\"}'\n",
    );
    let model = FakeModel::start(vec![text("a"), text("b"), text("c"), text("d")]).await;
    let config = format!(
        "{}[permissions]\ndefault_mode = \"auto\"\n[hooks]\nmax_continues = 2\n\
         [[hooks.command]]\nargv = [{hook:?}]\nevent = \"stop\"\n",
        model.config()
    );
    let (_daemon, mut c) = common::daemon::stdio_daemon(d, &config, &[]).await;
    let s = c.new_session(&common::daemon::workspace(d, "ws")).await;
    let answer = c.prompt(&s, "go").await.unwrap();
    assert_eq!(answer["stopReason"], "end_turn");
    assert_eq!(model.count(), 3, "the first end and two continues");
    assert!(model.request_at(2).to_string().contains("keep going"));
}

/// The guard of issue 42 (part 2): `rm -rf WHAT` becomes `TRASH WHAT`, keeping every
/// other argument.
const RM_GUARD: &str = r#"#!/usr/bin/env python3
import json, os, sys
call = json.load(sys.stdin)
words = call["arguments"].get("command", "").split()
if words[:2] == ["rm", "-rf"]:
    command = " ".join([os.environ["TRASH"]] + words[2:])
    print(json.dumps({"rewrite": {"arguments": dict(call["arguments"], command=command)},
                      "reason": "rm -rf goes to the trash"}))
"#;

/// A formatter: `tidy` squeezes the command's spaces (a change only when there is one to
/// make); `stubborn` puts back the `rm -rf x` it was first given, whatever it is asked
/// about (a formatter that rewrites from the original).
const FORMATTER: &str = r#"#!/usr/bin/env python3
import json, sys
call = json.load(sys.stdin)
command = call["arguments"].get("command", "")
new = " ".join(command.split()) if sys.argv[1] == "tidy" else "rm -rf x"
if new != command:
    print(json.dumps({"rewrite": {"arguments": dict(call["arguments"], command=new)}}))
"#;

/// Issue 42, part 2: a guard and a formatter rewrite `command` of one call, asked at once
/// (both orders, and a formatter that never lets go). Before, rewrites were merged with
/// the later winning and a rewrite on the second pass was ignored: the formatter's
/// `rm -rf x`, made from the original, undid the guard's and ran. Now the guard's rewrite
/// holds or the call is refused, `x` is never removed, and the trace says which.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_rewrites_of_one_field_cannot_undo_a_guards_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let guard = script(d, "guard.py", RM_GUARD);
    let formatter = script(d, "formatter.py", FORMATTER);
    let trash = script(
        d,
        "trash",
        "#!/bin/sh\nmkdir -p .trash && mv -- \"$@\" .trash/\n",
    );
    let hook = |name: &str, argv: String| {
        format!("[[hooks.command]]\nargv = {argv}\nname = \"{name}\"\nenv = [\"TRASH\"]\n")
    };
    let guard_hook = hook("guard", format!("[{guard:?}]"));
    let cases = [
        (
            "guard-first",
            format!(
                "{guard_hook}{}",
                hook("fmt", format!("[{formatter:?}, \"tidy\"]"))
            ),
        ),
        (
            "fmt-first",
            format!(
                "{}{guard_hook}",
                hook("fmt", format!("[{formatter:?}, \"tidy\"]"))
            ),
        ),
        (
            "stubborn",
            format!(
                "{guard_hook}{}",
                hook("fmt", format!("[{formatter:?}, \"stubborn\"]"))
            ),
        ),
    ];
    for (case, hooks) in cases {
        let here = d.join(case);
        std::fs::create_dir_all(&here).unwrap();
        let config = format!("[permissions]\ndefault_mode = \"auto\"\n{hooks}");
        let (_daemon, mut c) =
            common::daemon::stdio_daemon(&here, &config, &[("TRASH", trash.to_str().unwrap())])
                .await;
        let ws = common::daemon::workspace(&here, "ws");
        std::fs::create_dir_all(ws.join("x")).unwrap();
        std::fs::write(ws.join("x/keep"), "precious").unwrap();
        let s = c.new_session(&ws).await;
        let (out, is_error) =
            tokio::time::timeout(std::time::Duration::from_secs(120), c.bash(&s, "rm  -rf x"))
                .await
                .unwrap_or_else(|_| panic!("{case}: the call was not answered within 120 s"));
        assert!(
            ws.join("x/keep").is_file() || ws.join(".trash/x/keep").is_file(),
            "{case}: `rm -rf x` ran ({out})"
        );
        let line = audit(&here).pop().expect("an audit line");
        let said: Vec<(String, String)> = line["trace"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"].as_str().is_some_and(|n| n.starts_with("hook ")))
            .map(|t| {
                (
                    t["name"].as_str().unwrap().into(),
                    t["decision"].as_str().unwrap().into(),
                )
            })
            .collect();
        let said: Vec<(&str, &str)> = said.iter().map(|(n, d)| (n.as_str(), d.as_str())).collect();
        match case {
            // The guard's rewrite holds: x went to the trash.
            "guard-first" | "fmt-first" => {
                assert!(!is_error, "{case}: {out}");
                assert!(ws.join(".trash/x/keep").is_file(), "{case}: {out}");
                assert_eq!(
                    line["arguments"]["command"],
                    format!("{} x", trash.display()),
                    "{case}"
                );
                let expected: &[(&str, &str)] = if case == "guard-first" {
                    &[
                        ("hook guard", "rewrite"),
                        ("hook fmt", "rewrite_conflict"),
                        ("hook fmt", "none"),
                        ("hook guard", "none"),
                        ("hook fmt", "none"),
                    ]
                } else {
                    &[
                        ("hook fmt", "rewrite"),
                        ("hook guard", "rewrite_conflict"),
                        ("hook guard", "rewrite"),
                        ("hook fmt", "none"),
                        ("hook guard", "none"),
                    ]
                };
                assert_eq!(said, expected, "{case}");
            }
            // The formatter insists on `rm -rf x` over the guard's rewrite: on the last
            // pass the guard still asks for its rewrite, and the call is refused.
            _ => {
                assert!(is_error, "{case}: {out}");
                assert!(ws.join("x/keep").is_file(), "{case}: {out}");
                assert!(
                    out.starts_with("Error: vetoed by hook guard: still asks to change `command`"),
                    "{case}: {out}"
                );
                assert_eq!(
                    said,
                    [
                        ("hook guard", "rewrite"),
                        ("hook fmt", "rewrite_conflict"),
                        ("hook fmt", "rewrite"),
                        ("hook guard", "rewrite_refused"),
                    ],
                    "{case}"
                );
            }
        }
    }
}

/// Issue 42, part 2: a deny ends the batch once every hook before it in config order has
/// answered, without waiting for a slower one after it, and the slow one's process is
/// killed. Before, the batch waited for every answer: this call hung for the slow hook's
/// ten-minute timeout (here: the test's bound fails it). Also: a rewrite that is not an
/// object is refused, never applied as no rewrite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_in_a_batch_does_not_wait_for_a_slower_hook_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let token = common::token();
    let marks = d.join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let fast = script(
        d,
        "fast.py",
        r#"#!/usr/bin/env python3
import json, os, sys, time
call = json.load(sys.stdin)
command = call["arguments"]["command"]
if command == "echo veto-me":
    # Deny once the slow hook is surely running (bounded by this hook's timeout).
    while not os.path.exists(os.path.join(os.environ["MARKS"], "slow-started")):
        time.sleep(0.005)
    print(json.dumps({"decision": "deny", "reason": "not this one"}))
"#,
    );
    let slow = script(
        d,
        "slow.py",
        &format!(
            r#"#!/usr/bin/env python3
import json, os, sys
call = json.load(sys.stdin)
if call["arguments"]["command"] == "echo veto-me":
    open(os.path.join(os.environ["MARKS"], "slow-started"), "w").close()
    os.execvp("sleep", ["sleep", "1000.{token}"])
"#
        ),
    );
    let claude = script(
        d,
        "claude.py",
        r#"#!/usr/bin/env python3
import json, sys
call = json.load(sys.stdin)
if call["tool_input"]["command"] == "echo not-an-object":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": "rm -rf x"}}))
"#,
    );
    let config = format!(
        "[permissions]\ndefault_mode = \"auto\"\n\
         [[hooks.command]]\nargv = [{fast:?}]\nname = \"fast\"\nenv = [\"MARKS\"]\ntimeout_ms = 60000\n\
         [[hooks.command]]\nargv = [{slow:?}]\nname = \"slow\"\nenv = [\"MARKS\"]\ntimeout_ms = 600000\n\
         [[hooks.command]]\nargv = [{claude:?}]\nname = \"claude\"\ndialect = \"claude-code\"\ncommands = [\"echo\"]\n"
    );
    let (_daemon, mut c) =
        common::daemon::stdio_daemon(d, &config, &[("MARKS", marks.to_str().unwrap())]).await;
    let ws = common::daemon::workspace(d, "ws");
    let s = c.new_session(&ws).await;
    let (out, is_error) = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        c.bash(&s, "echo veto-me"),
    )
    .await
    .expect("the deny waited for the slow hook (60 s)");
    assert!(is_error);
    assert_eq!(out, "Error: vetoed by hook fast: not this one");
    let mut left = common::with_token(&token);
    for _ in 0..1000 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        left = common::with_token(&token);
    }
    assert!(left.is_empty(), "the slow hook still runs: {left:?}");

    // Claude Code's `updatedInput` that is no object: refused (before, it was read as
    // no change and the call ran).
    let (out, is_error) = c.bash(&s, "echo not-an-object").await;
    assert!(is_error, "{out}");
    assert_eq!(
        out,
        "Error: vetoed by hook claude: its rewrite is not an object of arguments"
    );
}
