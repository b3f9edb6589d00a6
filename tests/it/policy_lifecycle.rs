//! The policy while the daemon runs (issue 14): `dsh reload`, `_dsh/config/reload` and
//! SIGHUP put a new config in force without dropping a session; a config that fails its
//! own rule examples is refused and the old one stays; a call in flight is judged whole
//! by one version or the other; what only a restart can change is named.

use crate::common;
use common::daemon::{BIN, SocketDaemon, workspace};
use serde_json::{Value, json};
use std::path::Path;

const AUTO: &str = "[permissions]\ndefault_mode = \"auto\"\n";

fn deny(command: &str) -> String {
    format!("[[permissions.rules]]\ntool = \"bash\"\ncommand = \"{command}\"\naction = \"deny\"\n")
}

fn rewrite(config: &Path, extra: &str) {
    std::fs::write(
        config,
        format!("[exec]\nkill_grace_ms = 300\ndrain_ms = 300\n{extra}"),
    )
    .unwrap();
}

/// `dsh reload` against `daemon`'s socket.
pub(crate) fn reload(daemon: &SocketDaemon) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(["reload", "--socket"])
        .arg(&daemon.socket)
        .output()
        .unwrap()
}

fn audit(daemon: &SocketDaemon) -> Vec<Value> {
    std::fs::read_to_string(daemon.state.join("audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l["event"] == "execution")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_swaps_the_rules_live_and_refuses_a_broken_config() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), &format!("{AUTO}{}", deny("rm"))).await;
    let mut c = daemon.connect().await;
    let s = c.new_session(&workspace(dir.path(), "ws")).await;
    assert_eq!(c.bash(&s, "echo before").await, ("before\n".into(), false));
    let first = audit(&daemon).pop().unwrap()["policyVersion"].clone();

    // A broken config: its rule's example does not match. Refused, old one in force.
    rewrite(
        &daemon.config,
        &format!("{AUTO}{}examples = [\"git status\"]\n", deny("echo")),
    );
    let out = reload(&daemon);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not reloaded") && err.contains("git status"),
        "{err}"
    );
    assert_eq!(c.bash(&s, "echo still").await, ("still\n".into(), false));

    // A good one: in force at once for the same session, a new version on the audit.
    rewrite(
        &daemon.config,
        &format!("{AUTO}{}{}", deny("rm"), deny("echo")),
    );
    let out = reload(&daemon);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with("reloaded: policy version "), "{said}");
    let (text, is_error) = c.bash(&s, "echo after").await;
    assert!(is_error && text.contains("vetoed by policy"), "{text}");
    let second = audit(&daemon).pop().unwrap()["policyVersion"].clone();
    assert_ne!(first, second);
    assert!(said.contains(second.as_str().unwrap()));

    // What only a restart can change is named, not applied.
    rewrite(
        &daemon.config,
        &format!("{AUTO}{}[exec.sandbox]\nnetwork = true\n", deny("rm")),
    );
    let out = reload(&daemon);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("needs a restart to take effect: [exec]"),
        "{said}"
    );
    assert_eq!(c.bash(&s, "echo again").await, ("again\n".into(), false));

    // SIGHUP does the same.
    rewrite(&daemon.config, &format!("{AUTO}{}", deny("echo")));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.pid),
        nix::sys::signal::SIGHUP,
    )
    .unwrap();
    let mut denied = false;
    for _ in 0..500 {
        let judged = c
            .request("_dsh/policy/explain", json!({"command": "echo x"}))
            .await
            .unwrap();
        if judged["judgement"]["decision"] == "deny" {
            denied = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(denied, "SIGHUP did not reload");
    drop(c);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_amid_calls_judges_each_call_whole_by_one_version() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), AUTO).await;
    let mut c = daemon.connect().await;
    let s = c.new_session(&workspace(dir.path(), "ws")).await;
    let before = {
        c.bash(&s, "true").await;
        audit(&daemon).pop().unwrap()["policyVersion"].clone()
    };
    rewrite(&daemon.config, &format!("{AUTO}{}", deny("echo")));
    let mut ids = Vec::new();
    for i in 0..50 {
        if i == 25 {
            let out = reload(&daemon);
            assert!(out.status.success());
        }
        ids.push(
            c.start(
                "_dsh/tools/call",
                json!({"sessionId": s, "name": "bash",
                       "arguments": {"command": format!("echo {i}"), "description": "d"}}),
            )
            .await,
        );
    }
    for id in ids {
        c.wait_for(json!(id)).await.unwrap();
    }
    let lines: Vec<Value> = audit(&daemon).into_iter().skip(1).collect();
    assert_eq!(lines.len(), 50);
    let (mut old, mut new) = (0, 0);
    for line in &lines {
        let denied = line["decision"] == "deny";
        if line["policyVersion"] == before {
            assert!(!denied, "an old-version line denied: {line}");
            old += 1;
        } else {
            assert!(denied, "a new-version line allowed: {line}");
            new += 1;
        }
    }
    assert!(old > 0 && new > 0, "old {old}, new {new}");
    drop(c);
    daemon.stop().await;
}

/// "Always" answers are events in the session log: they survive a load and a restart,
/// can be listed, and revoking one is logged too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_answers_survive_a_restart_and_can_be_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path(), "ws");
    let daemon = SocketDaemon::start(dir.path(), "").await; // mode ask
    let mut c = daemon.connect().await;
    let s = c.new_session(&ws).await;
    c.permission_answers
        .extend(["allow_always", "reject_always"]);
    assert_eq!(c.bash(&s, "touch a && echo a").await, ("a\n".into(), false));
    let (_, is_error) = c.bash(&s, "mkdir never").await;
    assert!(is_error);
    assert_eq!(c.permission_requests.len(), 2);
    drop(c);
    daemon.stop().await;

    let daemon = SocketDaemon::start(dir.path(), "").await;
    let mut c = daemon.connect().await;
    c.load_session(&s, &ws).await;
    let grants = c
        .request("_dsh/session/grants", json!({"sessionId": s}))
        .await
        .unwrap();
    // Each segment that was asked about is granted: `touch` and `echo`.
    assert_eq!(
        grants,
        json!({"allowed": ["touch", "echo"], "rejected": ["mkdir"]})
    );
    // Remembered: no question for `touch`, and `mkdir` is refused without one.
    assert_eq!(c.bash(&s, "touch b && echo b").await, ("b\n".into(), false));
    let (text, is_error) = c.bash(&s, "mkdir again").await;
    assert!(is_error && text.contains("rejected"), "{text}");
    assert!(c.permission_requests.is_empty());
    c.request(
        "_dsh/session/revoke",
        json!({"sessionId": s, "prefix": "touch"}),
    )
    .await
    .unwrap();
    let e = c
        .request(
            "_dsh/session/revoke",
            json!({"sessionId": s, "prefix": "touch"}),
        )
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32002);
    c.permission_answers.push_back("reject_once");
    c.bash(&s, "touch c").await;
    assert_eq!(
        c.permission_requests.len(),
        1,
        "asked again after the revoke"
    );
    drop(c);
    // The revoke holds across a load.
    let mut c = daemon.connect().await;
    c.load_session(&s, &ws).await;
    let grants = c
        .request("_dsh/session/grants", json!({"sessionId": s}))
        .await
        .unwrap();
    assert_eq!(grants["allowed"], json!(["echo"]));
    drop(c);
    daemon.stop().await;
}

/// Shadows (issue 14): a hook with `enforce = false` and a `[permissions] shadow`
/// candidate are asked about every call and traced, and never change or hold it up; a
/// slow shadow is traced as unfinished; `dsh policy shadow-report` lists where they differ.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadows_are_traced_and_never_decide() {
    let dir = tempfile::tempdir().unwrap();
    let says_no = dir.path().join("says-no");
    // It answers, closes its output, and only then lets the call finish (the call waits
    // for the marker to go): a shadow is traced only if it answers before the call ends.
    let marker = dir.path().join("shadow-pending");
    std::fs::write(&marker, "").unwrap();
    std::fs::write(
        &says_no,
        format!(
            "#!/bin/sh\ncat > /dev/null\necho '{{\"decision\":\"deny\",\"reason\":\"shadow says no\"}}'\nexec 1>&-\nrm -f {}\n",
            marker.display()
        ),
    )
    .unwrap();
    let slow = dir.path().join("slow");
    std::fs::write(&slow, "#!/bin/sh\ncat > /dev/null\nsleep 30\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    for p in [&says_no, &slow] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let candidate = dir.path().join("candidate.toml");
    std::fs::write(&candidate, deny("echo")).unwrap();
    let config = format!(
        "[permissions]\ndefault_mode = \"auto\"\nshadow = {candidate:?}\n\
         [[hooks.command]]\nargv = [{says_no:?}]\nname = \"says-no\"\nenforce = false\n\
         [[hooks.command]]\nargv = [{slow:?}]\nname = \"slow\"\nenforce = false\ntimeout_ms = 60000\n"
    );
    let daemon = SocketDaemon::start(dir.path(), &config).await;
    let mut c = daemon.connect().await;
    let s = c.new_session(&workspace(dir.path(), "ws")).await;
    let command = format!(
        "while [ -e {} ]; do sleep 0.01; done; echo ran",
        marker.display()
    );
    assert_eq!(c.bash(&s, &command).await, ("ran\n".into(), false));
    let line = audit(&daemon).pop().unwrap();
    let shadow = |name: &str| {
        line["trace"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {line}"))
            .clone()
    };
    assert_eq!(shadow("shadow policy")["decision"], "deny");
    assert_eq!(shadow("shadow policy")["enforced"], false);
    assert_eq!(shadow("hook says-no")["decision"], "deny");
    assert_eq!(shadow("hook says-no")["reason"], "shadow says no");
    assert_eq!(shadow("hook slow")["decision"], "unfinished");
    assert!(
        line["trace"][0].get("enforced").is_none(),
        "the enforced policy: {line}"
    );
    drop(c);
    daemon.stop().await;
    let out = std::process::Command::new(BIN)
        .args(["policy", "shadow-report", "--audit"])
        .arg(daemon_audit(dir.path()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("line 1: shadow policy says deny where allow was enforced  bash while"),
        "{text}"
    );
    assert!(
        text.contains("hook says-no: 1 call(s), 1 differed, 0 unfinished"),
        "{text}"
    );
    assert!(
        text.contains("hook slow: 1 call(s), 0 differed, 1 unfinished"),
        "{text}"
    );
}

fn daemon_audit(dir: &Path) -> std::path::PathBuf {
    dir.join("state/audit.jsonl")
}

/// A reload keeps a hook server whose entry did not change and restarts one whose entry
/// did (README: "Hook servers whose entry did not change keep running").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_an_unchanged_hook_server_and_restarts_a_changed_one() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let server = dir.path().join("server");
    std::fs::write(
        &server,
        format!(
            "#!/usr/bin/env python3\nimport json, os, sys\nopen({:?}, 'a').write('%d\\n' % os.getpid())\n\
             for line in sys.stdin:\n    req = json.loads(line)\n    \
             print(json.dumps({{'jsonrpc': '2.0', 'id': req['id'], 'result': {{}}}}), flush=True)\n",
            pids.display().to_string()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hook = |timeout: u64| {
        format!(
            "{AUTO}[[hooks.command]]\nargv = [{server:?}]\nrun = \"server\"\ntimeout_ms = {timeout}\n"
        )
    };
    let daemon = SocketDaemon::start(dir.path(), &hook(5000)).await;
    let mut c = daemon.connect().await;
    let s = c.new_session(&workspace(dir.path(), "ws")).await;
    let started = || -> Vec<i32> {
        std::fs::read_to_string(&pids)
            .unwrap_or_default()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect()
    };
    assert_eq!(c.bash(&s, "echo one").await, ("one\n".into(), false));
    assert_eq!(started().len(), 1);
    // Unchanged entry (another rule only): the same process answers.
    rewrite(&daemon.config, &format!("{}{}", hook(5000), deny("rm")));
    assert!(reload(&daemon).status.success());
    assert_eq!(c.bash(&s, "echo two").await, ("two\n".into(), false));
    assert_eq!(started().len(), 1, "an unchanged hook server was restarted");
    assert!(common::alive(started()[0]));
    // Changed entry: the old server goes, a new one answers.
    rewrite(&daemon.config, &hook(6000));
    assert!(reload(&daemon).status.success());
    assert_eq!(c.bash(&s, "echo three").await, ("three\n".into(), false));
    let now = started();
    assert_eq!(now.len(), 2);
    let mut gone = false;
    for _ in 0..300 {
        if !common::alive(now[0]) {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(gone, "the replaced hook server still runs");
    drop(c);
    daemon.stop().await;
}
