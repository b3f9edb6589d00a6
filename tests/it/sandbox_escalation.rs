//! Issue 27 escalation, through the real binary with `[exec] kind = "sandbox"` (real
//! bubblewrap): a `bash` call with `sandbox: "off"` and a `justification` asks to run
//! outside the sandbox (E6, E9 are what it leaves behind). No mode and no grant lets it
//! out silently: the person is asked (the question shows the justification and offers
//! no "always"), unless a rule naming its command allows it; deny rules deny. Allowed,
//! it runs on the local executor with the same ids, ownership, audit line and shutdown.
//! Under `kind = "local"` the argument changes nothing. A command that fails in the
//! sandbox is told what the sandbox refuses and how to ask to leave it.

use crate::common;

use common::client::Client;
use common::daemon::{SocketDaemon, stdio_daemon};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const JUSTIFICATION: &str = "the report must be written outside the workspace";

/// `[exec]` lines (after `kind`) and the rest of a config: the sandbox, mode `mode`.
fn sandbox_config(mode: &str, rules: &str) -> String {
    format!("kind = \"sandbox\"\n[permissions]\ndefault_mode = \"{mode}\"\n{rules}")
}

fn rule(command: &str, action: &str) -> String {
    format!(
        "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"{command}\"\naction = \"{action}\"\n"
    )
}

/// The arguments of a call asking to run `command` outside the sandbox.
fn escalated(command: &str) -> Value {
    json!({"command": command, "description": "write outside", "sandbox": "off",
           "justification": JUSTIFICATION})
}

/// A workspace for the session and a directory outside every writable root.
fn places(dir: &Path) -> (PathBuf, PathBuf) {
    let ws = common::daemon::workspace(dir, "ws");
    let out = common::daemon::workspace(dir, "outside");
    (ws, out)
}

/// The note a failing sandboxed command in a session of `ws` gets (the default
/// network, through the proxy), byte for byte (`daemon_executors` expects it too).
pub(crate) fn note(ws: &Path) -> String {
    format!(
        "[this ran in the sandbox: it can write only in {} (and its private /tmp), secret paths \
         ([exec.sandbox] deny_read) read as empty, it reaches the network only through dsh's \
         proxy (HTTP_PROXY, ALL_PROXY: each host is judged, names resolve only there, raw \
         sockets and UDP go nowhere), new Unix sockets are refused, and git hooks and config, shell rc files and editor folders are read-only]\n[if \
         the sandbox \
         is why it failed, call bash again with sandbox: \"off\" and a justification: the \
         person is asked to run it outside]",
        ws.display()
    )
}

/// The audit lines of executions, oldest first.
fn audit(state: &Path) -> Vec<Value> {
    std::fs::read_to_string(state.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["event"] == "execution")
        .collect()
}

/// The texts of a permission question's content blocks.
fn question_texts(request: &Value) -> Vec<String> {
    request["toolCall"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["content"]["text"].as_str().map(str::to_string))
        .collect()
}

fn option_ids(request: &Value) -> Vec<String> {
    request["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap().to_string())
        .collect()
}

async fn session(c: &mut Client, ws: &Path) -> String {
    c.new_session(ws).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_27_escalation_is_asked_in_auto_and_allowed_once_runs_outside_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, out) = places(dir.path());
    let (_child, mut c) = stdio_daemon(dir.path(), &sandbox_config("auto", ""), &[]).await;
    let s = session(&mut c, &ws).await;
    let target = out.join("report");
    let write = format!("echo x > {}", target.display());

    // In the sandbox the write fails, and the result says why it may have.
    let (text, is_error) = c.bash(&s, &write).await;
    assert!(!is_error, "{text}");
    assert!(!target.exists(), "the sandbox let a write out: {text}");
    let status = text.find("\n[exit code: 1]\n").expect(&text);
    assert_eq!(&text[status + "\n[exit code: 1]\n".len()..], note(&ws));
    assert!(c.permission_requests.is_empty(), "mode auto asked");

    // Asking to leave is put to the person even in auto; allowed once, it runs outside.
    c.permission_answers.push_back("allow_once");
    let ran = c.tool(Some(&s), "bash", escalated(&write)).await;
    assert_eq!(ran, ("(no output)".to_string(), false));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "x\n");
    assert_eq!(c.permission_requests.len(), 1);
    let question = &c.permission_requests[0];
    assert_eq!(option_ids(question), ["allow_once", "reject_once"]);
    let texts = question_texts(question);
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("Runs OUTSIDE the sandbox")
                && t.ends_with(&format!("The model's justification: {JUSTIFICATION}"))),
        "{texts:?}"
    );
    let asked = texts
        .iter()
        .find(|t| t.starts_with("Asked because: "))
        .expect("the reason");
    assert!(
        asked.ends_with(&format!("Outside the sandbox because: {JUSTIFICATION}")),
        "{asked}"
    );
    assert!(
        asked.contains("no rule naming `echo x` allows it outside the sandbox"),
        "{asked}"
    );

    // Outside, a failure is a failure: no sandbox note.
    c.permission_answers.push_back("allow_once");
    let failed = c.tool(Some(&s), "bash", escalated("exit 3")).await;
    assert_eq!(failed, ("(no output)\n[exit code: 3]".to_string(), false));

    // The audit line keeps the arguments, the answer, and that it left the sandbox.
    let lines = audit(&dir.path().join("state"));
    let line = lines
        .iter()
        .find(|l| l["arguments"]["command"] == json!(write) && l["outsideSandbox"] == true)
        .expect("the escalated call's audit line");
    assert_eq!(line["arguments"]["sandbox"], "off");
    assert_eq!(line["arguments"]["justification"], JUSTIFICATION);
    assert_eq!(line["decision"], "ask");
    assert_eq!(line["answer"], "allow_once");
    assert_eq!(line["outcome"], "ok");
    let plain = lines
        .iter()
        .find(|l| l["arguments"]["command"] == json!(write) && l["outsideSandbox"].is_null())
        .expect("the sandboxed call's audit line");
    assert_eq!(plain["decision"], "allow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_27_escalation_rejected_or_unanswered_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, out) = places(dir.path());
    let (_child, mut c) = stdio_daemon(dir.path(), &sandbox_config("auto", ""), &[]).await;
    let s = session(&mut c, &ws).await;
    let target = out.join("never");
    let write = format!("touch {}", target.display());
    c.permission_answers.push_back("reject_once");
    let (text, is_error) = c.tool(Some(&s), "bash", escalated(&write)).await;
    assert_eq!(
        (text.as_str(), is_error),
        (
            "Error: vetoed by permission: the user rejected this call",
            true
        )
    );
    // No answer at all (the question is cancelled) is a no as well.
    let (text, is_error) = c.tool(Some(&s), "bash", escalated(&write)).await;
    assert!(is_error && text.contains("cancelled"), "{text}");
    assert_eq!(c.permission_requests.len(), 2);
    assert!(!target.exists());
    let lines = audit(&dir.path().join("state"));
    assert!(
        lines
            .iter()
            .filter(|l| l["outsideSandbox"] == true)
            .all(|l| l["outcome"] == "vetoed"),
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_27_escalation_an_allow_rule_naming_the_command_lets_it_out_and_deny_rules_deny() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, out) = places(dir.path());
    let rules = rule("touch", "allow") + &rule("rm", "deny") + &rule("*", "allow");
    let (_child, mut c) = stdio_daemon(dir.path(), &sandbox_config("ask", &rules), &[]).await;
    let s = session(&mut c, &ws).await;
    // A rule naming the command allows it without asking (by prefix, as rules match).
    let target = out.join("touched");
    let touch = format!("touch {}", target.display());
    assert_eq!(
        c.tool(Some(&s), "bash", escalated(&touch)).await,
        ("(no output)".to_string(), false)
    );
    assert!(target.exists(), "it did not run outside the sandbox");
    // A deny rule denies, without a question.
    let victim = out.join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let (text, is_error) = c
        .tool(
            Some(&s),
            "bash",
            escalated(&format!("rm {}", victim.display())),
        )
        .await;
    assert!(
        is_error && text.starts_with("Error: vetoed by policy: rule bash `rm` (deny)"),
        "{text}"
    );
    assert!(victim.exists());
    // A rule whose command is only `*` names nothing: the person is asked.
    c.permission_answers.push_back("reject_once");
    let (text, _) = c
        .tool(
            Some(&s),
            "bash",
            escalated(&format!(
                "cp {} {}",
                victim.display(),
                out.join("copy").display()
            )),
        )
        .await;
    assert!(text.contains("the user rejected this call"), "{text}");
    assert_eq!(c.permission_requests.len(), 1);
    assert!(!out.join("copy").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_27_escalation_a_grant_from_allow_always_does_not_let_it_out_silently() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, out) = places(dir.path());
    let (_child, mut c) = stdio_daemon(dir.path(), &sandbox_config("ask", ""), &[]).await;
    let s = session(&mut c, &ws).await;
    // "Allow always" on an ordinary call grants `touch` for the session...
    c.permission_answers.push_back("allow_always");
    let in_ws = |name: &str| format!("touch {}", ws.join(name).display());
    assert_eq!(c.bash(&s, &in_ws("a")).await.0, "(no output)");
    assert_eq!(c.bash(&s, &in_ws("b")).await.0, "(no output)");
    assert_eq!(c.permission_requests.len(), 1, "the grant did not hold");
    // ...which does not let an escalated `touch` out without asking.
    let first = format!("touch {}", out.join("first").display());
    c.permission_answers.push_back("allow_always");
    assert_eq!(
        c.tool(Some(&s), "bash", escalated(&first)).await.0,
        "(no output)"
    );
    assert_eq!(c.permission_requests.len(), 2);
    assert!(out.join("first").exists());
    // And an "always" answer to an escalation (not offered, sent anyway) grants nothing:
    // the next one is asked again.
    let second = format!("touch {}", out.join("second").display());
    c.permission_answers.push_back("reject_once");
    let (text, _) = c.tool(Some(&s), "bash", escalated(&second)).await;
    assert!(text.contains("the user rejected this call"), "{text}");
    assert_eq!(c.permission_requests.len(), 3);
    assert!(!out.join("second").exists());
    let grants = c
        .request("_dsh/session/grants", json!({"sessionId": s}))
        .await
        .unwrap();
    assert_eq!(grants["allowed"], json!(["touch"]), "{grants}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_27_escalation_background_tasks_outside_share_ids_output_kill_status_and_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, out) = places(dir.path());
    let daemon = SocketDaemon::start(dir.path(), &sandbox_config("auto", "")).await;
    let mut c = daemon.connect().await;
    let s = session(&mut c, &ws).await;
    let other = session(&mut c, &ws).await;
    let token = common::token();
    let inside = c.start_task(&s, &format!("exec sleep 1000.{token}")).await;
    let target = out.join("bg");
    let go = common::Fifo::new(&ws, "go");
    let mut args = escalated(&format!(
        "echo started; cat {} >/dev/null; echo x > {}; echo done",
        go.path(),
        target.display()
    ));
    args["run_in_background"] = true.into();
    c.permission_answers.push_back("allow_once");
    let (text, is_error) = c.tool(Some(&s), "bash", args).await;
    assert!(!is_error, "{text}");
    let outside = text
        .strip_prefix("started background task ")
        .expect(&text)
        .to_string();
    assert_ne!(inside, outside, "two executors, one id");
    let mut args = escalated(&format!("exec sleep 1000.{token}"));
    args["run_in_background"] = true.into();
    c.permission_answers.push_back("allow_once");
    let sleeper = c.tool(Some(&s), "bash", args).await.0;
    let sleeper = sleeper
        .strip_prefix("started background task ")
        .expect(&sleeper)
        .to_string();
    // `dsh status` lists the tasks of both sides, and says which left the sandbox.
    let status = daemon.cli_status();
    for id in [&inside, &outside, &sleeper] {
        assert!(status.contains(&format!("  {id}  owner {s}")), "{status}");
    }
    assert!(
        status.contains(&format!(
            "  {outside}  owner {s}  (outside the sandbox)  echo started"
        )),
        "{status}"
    );
    assert!(
        !status.contains(&format!("  {inside}  owner {s}  (outside")),
        "{status}"
    );
    // Ownership holds for it (T13), and bash_output / bash_kill find it.
    assert_eq!(
        c.tool(Some(&other), "bash_output", json!({"task_id": outside}))
            .await,
        (
            format!("Error: task {outside} belongs to another session"),
            true
        )
    );
    go.release().await;
    loop {
        let (text, _) = c
            .tool(Some(&s), "bash_output", json!({"task_id": outside}))
            .await;
        if text.ends_with("[status: completed, exit code: 0]") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "x\n");
    assert_eq!(
        c.tool(Some(&s), "bash_kill", json!({"task_id": outside}))
            .await,
        (format!("task {outside} had already finished"), false)
    );
    // Shutdown ends what runs on either side.
    while common::with_token(&token).len() < 2 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    drop(c);
    daemon.stop().await;
    assert!(
        common::with_token(&token).is_empty(),
        "a task outlived the shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_27_escalation_is_ignored_under_the_local_executor() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, out) = places(dir.path());
    let config = "kind = \"local\"\n[permissions]\ndefault_mode = \"auto\"\n";
    let (_child, mut c) = stdio_daemon(dir.path(), config, &[]).await;
    let s = session(&mut c, &ws).await;
    let target = out.join("local");
    let write = format!("echo x > {}", target.display());
    // Judged and run as any call: mode auto allows it, nobody is asked.
    assert_eq!(
        c.tool(Some(&s), "bash", escalated(&write)).await,
        ("(no output)".to_string(), false)
    );
    assert!(target.exists());
    assert!(c.permission_requests.is_empty());
    // A failure carries no sandbox note.
    assert_eq!(
        c.tool(Some(&s), "bash", escalated("echo failing; exit 3"))
            .await,
        ("failing\n[exit code: 3]".to_string(), false)
    );
    let lines = audit(&dir.path().join("state"));
    assert!(lines.iter().all(|l| l["outsideSandbox"].is_null()));
    // The values are checked under every executor (T1-style).
    let (text, is_error) = c
        .tool(
            Some(&s),
            "bash",
            json!({"command": "true", "description": "d", "sandbox": "on"}),
        )
        .await;
    assert!(is_error && text.contains("`sandbox`"), "{text}");
    for justification in [json!(null), json!("  ")] {
        let mut args = json!({"command": "true", "description": "d", "sandbox": "off"});
        if !justification.is_null() {
            args["justification"] = justification;
        }
        assert_eq!(
            c.tool(Some(&s), "bash", args).await,
            ("Error: invalid justification".to_string(), true)
        );
    }
}

/// `dsh policy explain` and `_dsh/policy/explain` judge an escalated call as the daemon
/// does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_27_escalation_explain_agrees_with_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, _) = places(dir.path());
    let rules = rule("git push", "allow");
    let (_child, mut c) = stdio_daemon(dir.path(), &sandbox_config("auto", &rules), &[]).await;
    let s = session(&mut c, &ws).await;
    let config = dir.path().join("dsh.toml");
    let cli = |command: &'static str, leave: bool| {
        let mut cmd = common::dsh();
        cmd.args(["policy", "explain", "--config"])
            .arg(&config)
            .arg("--cwd")
            .arg(&ws);
        if leave {
            cmd.args(["--sandbox", "off", "--justification", JUSTIFICATION]);
        }
        cmd.args(["--", command]);
        cmd
    };
    for (command, leave, want) in [
        ("ls", true, "ask"),
        ("ls", false, "allow"),
        ("git push origin", true, "allow"),
    ] {
        let out = cli(command, leave).output().await.unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with(&format!("{want}: ")), "{command}: {text}");
        assert_eq!(
            text.contains(&format!("outside the sandbox because: {JUSTIFICATION}")),
            leave,
            "{text}"
        );
        let mut params = json!({"sessionId": s, "command": command});
        if leave {
            params["sandbox"] = "off".into();
            params["justification"] = JUSTIFICATION.into();
        }
        let answer = c.request("_dsh/policy/explain", params).await.unwrap();
        assert_eq!(answer["judgement"]["decision"], want, "{answer}");
        assert_eq!(
            answer["judgement"]["escalation"]["justification"].as_str(),
            leave.then_some(JUSTIFICATION)
        );
    }
    let out = cli("ls", true).output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("1. ls\n     ask: outside the sandbox"),
        "{text}"
    );
    // Under the local executor the same call is judged as any.
    std::fs::write(
        &config,
        "[exec]\nkind = \"local\"\n[permissions]\ndefault_mode = \"auto\"\n",
    )
    .unwrap();
    let out = cli("ls", true).output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("allow: "), "{text}");
    assert!(
        text.contains("sandbox \"off\" changes nothing: commands run in no sandbox"),
        "{text}"
    );
}

// Issue 39: the file tools' own escalation. A file tool call on a path the sandbox's
// layout refuses (protected, outside the writable roots, masked) is refused with the
// way to ask; with `sandbox: "off"` and a justification it is put to the person (in
// auto too), and allowed once it reaches the file outside the sandbox. The same
// semantics as bash's: deny rules deny, read-only refuses writes, a grant does not let
// it out, and only an allow rule naming the path lets it out unasked.

/// A git repository as the session's workspace (its hooks and config are protected),
/// with a secret the config masks, and a directory outside every root.
fn repository(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (ws, out) = places(dir);
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    let secret = ws.join("secret.env");
    std::fs::write(&secret, "TOKEN=hunter2\n").unwrap();
    (ws, out, secret)
}

/// The sandbox in `mode` with the repository's secret masked, and `rules`.
fn masked_config(mode: &str, secret: &Path, rules: &str) -> String {
    format!(
        "kind = \"sandbox\"\n[exec.sandbox]\ndeny_read = [\"{}\"]\n{}",
        secret.display(),
        &sandbox_config(mode, rules)["kind = \"sandbox\"\n".len()..]
    )
}

fn file_rule(tool: &str, path: &Path, action: &str) -> String {
    format!(
        "[[permissions.rules]]\ntool = \"{tool}\"\npath = \"{}\"\naction = \"{action}\"\n",
        path.display()
    )
}

/// A file tool's arguments asking to reach `path` outside the sandbox.
fn file_escalated(path: &Path, rest: Value) -> Value {
    let mut args = rest;
    args["path"] = path.display().to_string().into();
    args["sandbox"] = "off".into();
    args["justification"] = JUSTIFICATION.into();
    args
}

const HOOK: &str = "#!/bin/sh\necho planted\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e11_issue_39_a_file_tool_refused_by_the_layout_is_asked_and_allowed_once_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, out, secret) = repository(dir.path());
    let (_child, mut c) = stdio_daemon(dir.path(), &masked_config("auto", &secret, ""), &[]).await;
    let s = session(&mut c, &ws).await;
    let hook = ws.join(".git/hooks/pre-commit");

    // Refused in the sandbox, saying how to ask; the audit line names the entry.
    let (text, is_error) = c
        .tool(
            Some(&s),
            "write_file",
            json!({"path": hook.display().to_string(), "content": HOOK}),
        )
        .await;
    assert!(is_error, "{text}");
    assert!(
        text.contains("call this tool again with sandbox: \"off\" and a justification"),
        "{text}"
    );
    assert!(!hook.exists());
    assert!(c.permission_requests.is_empty(), "mode auto asked");
    let lines = audit(&dir.path().join("state"));
    let refused = lines
        .iter()
        .find(|l| l["tool"] == "write_file")
        .expect("the refused call's line");
    assert_eq!(
        refused["containment"],
        json!({"by": "protected", "entry": ws.join(".git/hooks"), "what": "git"}),
        "{refused}"
    );

    // Rejected: nothing is written.
    c.permission_answers.push_back("reject_once");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "write_file",
            file_escalated(&hook, json!({"content": HOOK})),
        )
        .await;
    assert!(
        is_error && text.contains("the user rejected this call"),
        "{text}"
    );
    assert!(!hook.exists());

    // Allowed once: written outside the sandbox, after a question that offers no
    // "always" and shows the justification.
    c.permission_answers.push_back("allow_once");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "write_file",
            file_escalated(&hook, json!({"content": HOOK})),
        )
        .await;
    assert!(!is_error, "{text}");
    assert_eq!(std::fs::read_to_string(&hook).unwrap(), HOOK);
    assert_eq!(c.permission_requests.len(), 2);
    let question = &c.permission_requests[1];
    assert_eq!(option_ids(question), ["allow_once", "reject_once"]);
    let texts = question_texts(question);
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("Runs OUTSIDE the sandbox")
                && t.ends_with(&format!("The model's justification: {JUSTIFICATION}"))),
        "{texts:?}"
    );

    // The same for an edit of git's config, a read of a masked secret and a write
    // outside every root: each asked, each reaching the real file once allowed.
    let config = ws.join(".git/config");
    c.permission_answers.push_back("allow_once");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "edit_file",
            file_escalated(
                &config,
                json!({"old_string": "[core]", "new_string": "[core]\n\thooksPath = .githooks"}),
            ),
        )
        .await;
    assert!(!is_error, "{text}");
    assert!(
        std::fs::read_to_string(&config)
            .unwrap()
            .contains("hooksPath")
    );
    c.permission_answers.push_back("allow_once");
    let (text, is_error) = c
        .tool(Some(&s), "read_file", file_escalated(&secret, json!({})))
        .await;
    assert!(!is_error && text.contains("hunter2"), "{text}");
    let report = out.join("report");
    c.permission_answers.push_back("allow_once");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "write_file",
            file_escalated(&report, json!({"content": "r"})),
        )
        .await;
    assert!(!is_error, "{text}");
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "r");
    assert_eq!(c.permission_requests.len(), 5);

    let lines = audit(&dir.path().join("state"));
    let escalated: Vec<&Value> = lines
        .iter()
        .filter(|l| l["outsideSandbox"] == true)
        .collect();
    assert_eq!(escalated.len(), 5, "{lines:?}");
    // Each was asked: allowed (decision ask) or rejected (the veto stands as deny).
    assert!(escalated.iter().all(|l| {
        (l["decision"] == "ask" && l["answer"] == "allow_once")
            || (l["decision"] == "deny" && l["answer"] == "reject_once")
    }));
    assert_eq!(
        escalated
            .iter()
            .filter(|l| l["answer"] == "allow_once" && l["outcome"] == "ok")
            .count(),
        4
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e11_issue_39_a_file_tools_escalation_deny_rules_read_only_and_path_rules_decide() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, out, secret) = repository(dir.path());
    let allowed = out.join("allowed");
    let rules = file_rule("write_file", &ws.join(".git/config"), "deny")
        + &file_rule("write_file", &allowed, "allow")
        + "[[permissions.rules]]\ntool = \"read_file\"\naction = \"allow\"\n";
    let (_child, mut c) =
        stdio_daemon(dir.path(), &masked_config("auto", &secret, &rules), &[]).await;
    let s = session(&mut c, &ws).await;
    // A deny rule denies, without a question.
    let config = ws.join(".git/config");
    let before = std::fs::read_to_string(&config).unwrap();
    let (text, is_error) = c
        .tool(
            Some(&s),
            "write_file",
            file_escalated(&config, json!({"content": "[core]\n"})),
        )
        .await;
    assert!(
        is_error && text.starts_with("Error: vetoed by policy: rule write_file path"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
    // A rule naming the path lets it out unasked.
    let (text, is_error) = c
        .tool(
            Some(&s),
            "write_file",
            file_escalated(&allowed, json!({"content": "a"})),
        )
        .await;
    assert!(!is_error, "{text}");
    assert_eq!(std::fs::read_to_string(&allowed).unwrap(), "a");
    // A tool-wide allow rule names no path: asked.
    c.permission_answers.push_back("reject_once");
    let (text, _) = c
        .tool(Some(&s), "read_file", file_escalated(&secret, json!({})))
        .await;
    assert!(text.contains("the user rejected this call"), "{text}");
    assert!(!text.contains("hunter2"));
    assert_eq!(c.permission_requests.len(), 1);
    // Read-only mode refuses a write whatever is asked.
    c.set_mode(&s, "read-only").await;
    let hook = ws.join(".git/hooks/pre-commit");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "write_file",
            file_escalated(&hook, json!({"content": HOOK})),
        )
        .await;
    assert!(is_error && text.contains("read-only mode"), "{text}");
    assert!(!hook.exists());
    assert_eq!(c.permission_requests.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e11_issue_39_a_grant_does_not_let_a_file_tool_out_silently_and_local_ignores_it() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, out, secret) = repository(dir.path());
    let (_child, mut c) = stdio_daemon(dir.path(), &masked_config("ask", &secret, ""), &[]).await;
    let s = session(&mut c, &ws).await;
    // "Allow always" on an ordinary write in the workspace...
    c.permission_answers.push_back("allow_always");
    let plain = ws.join("plain.txt");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "write_file",
            json!({"path": plain.display().to_string(), "content": "p"}),
        )
        .await;
    assert!(!is_error, "{text}");
    // ...lets no escalation out unasked, and an "always" answer to one (not offered,
    // sent anyway) grants nothing: the next is asked again.
    let first = out.join("first");
    c.permission_answers.push_back("allow_always");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "write_file",
            file_escalated(&first, json!({"content": "1"})),
        )
        .await;
    assert!(!is_error, "{text}");
    assert_eq!(c.permission_requests.len(), 2);
    let second = out.join("second");
    c.permission_answers.push_back("reject_once");
    let (text, _) = c
        .tool(
            Some(&s),
            "write_file",
            file_escalated(&second, json!({"content": "2"})),
        )
        .await;
    assert!(text.contains("the user rejected this call"), "{text}");
    assert_eq!(c.permission_requests.len(), 3);
    assert!(!second.exists());
    drop(c);

    // Under the local executor the argument changes nothing (judged and run as any
    // call), and its values are still checked.
    let dir = tempfile::tempdir().unwrap();
    let (ws, _, _) = repository(dir.path());
    let config = "kind = \"local\"\n[permissions]\ndefault_mode = \"auto\"\n";
    let (_child, mut c) = stdio_daemon(dir.path(), config, &[]).await;
    let s = session(&mut c, &ws).await;
    let f = ws.join("f.txt");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "write_file",
            file_escalated(&f, json!({"content": "x"})),
        )
        .await;
    assert!(!is_error, "{text}");
    assert!(c.permission_requests.is_empty());
    let (text, is_error) = c
        .tool(
            Some(&s),
            "read_file",
            json!({"path": f.display().to_string(), "sandbox": "off"}),
        )
        .await;
    assert_eq!(
        (text.as_str(), is_error),
        ("Error: invalid justification", true)
    );
}

/// `dsh policy explain --tool write_file` names the layout entry that decides the
/// path, and with `--sandbox off` the question the daemon would ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e11_issue_39_explain_names_what_decided_a_file_tools_containment() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, _, secret) = repository(dir.path());
    let config = common::daemon::write_config(dir.path(), &masked_config("auto", &secret, ""));
    let explain = |tool: &'static str, path: PathBuf, leave: bool, json: bool| {
        let mut cmd = common::dsh();
        cmd.args(["policy", "explain", "--tool", tool, "--config"])
            .arg(&config)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("--cwd")
            .arg(&ws);
        if leave {
            cmd.args(["--sandbox", "off", "--justification", JUSTIFICATION]);
        }
        if json {
            cmd.arg("--json");
        }
        cmd.arg("--").arg(path);
        cmd
    };
    let run = |mut cmd: tokio::process::Command| async move {
        let out = cmd.output().await.unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let hook = ws.join(".git/hooks/pre-commit");
    let text = run(explain("write_file", hook.clone(), false, false)).await;
    assert!(text.starts_with("allow: "), "{text}");
    assert!(
        text.contains(&format!(
            "  sandbox: refused to write: the protected entry {} (git's hooks",
            ws.join(".git/hooks").display()
        )),
        "{text}"
    );
    let text = run(explain("write_file", hook.clone(), true, false)).await;
    assert!(text.starts_with("ask: "), "{text}");
    assert!(
        text.contains("  sandbox (left if allowed): refused to write"),
        "{text}"
    );
    let value: Value =
        serde_json::from_str(&run(explain("read_file", secret.clone(), false, true)).await)
            .unwrap();
    assert_eq!(
        value["containment"],
        json!({"by": "masked", "entry": secret, "masked_by": "deny_read"})
    );
    let value: Value = serde_json::from_str(
        &run(explain(
            "write_file",
            PathBuf::from("/etc/dsh-explained"),
            false,
            true,
        ))
        .await,
    )
    .unwrap();
    assert_eq!(value["judgement"]["decision"], "deny");
    assert_eq!(value["containment"]["by"], "outside_roots");
    let value: Value =
        serde_json::from_str(&run(explain("write_file", ws.join("src.rs"), false, true)).await)
            .unwrap();
    assert_eq!(
        value["containment"],
        json!({"by": "writable_root", "root": ws})
    );
}

/// Issue 39: the daemon's `_dsh/policy/explain` shows what decides a file tool's
/// containment, the same answer as the CLI's `dsh policy explain` (one check: the
/// executor's layout); and an allowed file call's audit line names the entry that
/// allowed it, as a refused one's names the entry that refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e11_issue_39_the_daemons_explain_and_an_allowed_calls_line_name_the_containment() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, _, secret) = repository(dir.path());
    let (_child, mut c) = stdio_daemon(dir.path(), &masked_config("auto", &secret, ""), &[]).await;
    let s = session(&mut c, &ws).await;
    let cli = |tool: &str, path: &Path| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"))
            .args(["policy", "explain", "--json", "--tool", tool, "--config"])
            .arg(dir.path().join("dsh.toml"))
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("--cwd")
            .arg(&ws)
            .arg("--")
            .arg(path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["containment"].clone()
    };
    let hook = ws.join(".git/hooks/pre-commit");
    for (tool, asked, path, want) in [
        (
            "write_file",
            ".git/hooks/pre-commit",
            hook.clone(),
            json!({"by": "protected", "entry": ws.join(".git/hooks"), "what": "git"}),
        ),
        (
            "read_file",
            "secret.env",
            secret.clone(),
            json!({"by": "masked", "entry": secret, "masked_by": "deny_read"}),
        ),
        (
            "write_file",
            "src.rs",
            ws.join("src.rs"),
            json!({"by": "writable_root", "root": ws}),
        ),
    ] {
        let answer = c
            .request(
                "_dsh/policy/explain",
                json!({"sessionId": s, "tool": tool, "path": asked}),
            )
            .await
            .unwrap();
        assert_eq!(answer["containment"], want, "{answer}");
        assert_eq!(answer["path"], json!(path), "{answer}");
        assert_eq!(
            cli(tool, &path),
            want,
            "the CLI's answer for {tool} {asked}"
        );
    }
    let (text, is_error) = c
        .tool(
            Some(&s),
            "write_file",
            json!({"path": "src.rs", "content": "x"}),
        )
        .await;
    assert!(!is_error, "{text}");
    let (text, is_error) = c
        .tool(Some(&s), "read_file", json!({"path": "/etc/passwd"}))
        .await;
    assert!(!is_error, "{text}");
    let lines = audit(&dir.path().join("state"));
    let line = |tool: &str| {
        lines
            .iter()
            .find(|l| l["tool"] == tool)
            .unwrap_or_else(|| panic!("no {tool} line in {lines:?}"))
            .clone()
    };
    assert_eq!(
        line("write_file")["containment"],
        json!({"by": "writable_root", "root": ws})
    );
    // The host's read-only rest (this test's directory is under /tmp, the sandbox's own).
    assert_eq!(line("read_file")["containment"]["by"], "read_only");
}

/// Issue 39, item 5: the diff the person is shown for an escalated edit is read
/// where the write would reach the file, outside the sandbox. Through the sandbox's
/// view a masked file is refused, so the question had no diff at all; now it shows
/// the real text before the change (to the person deciding, never to the model).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e11_issue_39_an_escalated_edits_diff_is_read_where_the_write_reaches() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, _, secret) = repository(dir.path());
    let (_child, mut c) = stdio_daemon(dir.path(), &masked_config("auto", &secret, ""), &[]).await;
    let s = session(&mut c, &ws).await;
    c.permission_answers.push_back("reject_once");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "edit_file",
            file_escalated(
                &secret,
                json!({"old_string": "hunter2", "new_string": "changed"}),
            ),
        )
        .await;
    assert!(
        is_error && text.contains("the user rejected this call"),
        "{text}"
    );
    let question = &c.permission_requests[0];
    let diff = question["toolCall"]["content"]
        .as_array()
        .and_then(|blocks| blocks.iter().find(|b| b["type"] == "diff"))
        .unwrap_or_else(|| panic!("no diff in the question: {question}"));
    assert_eq!(diff["oldText"], "TOKEN=hunter2\n", "{diff}");
    assert_eq!(diff["newText"], "TOKEN=changed\n", "{diff}");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "TOKEN=hunter2\n");
}
