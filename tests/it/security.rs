//! Security properties of the real daemon that no other test file covers
//! (issue 8; RELIABILITY.md names the tests that cover the rest): unguessable
//! session ids, secrets kept from commands, sessions fenced from each other's
//! permissions and updates, private state files, planted symlinks, and hooks
//! that fail closed when configured in the daemon.

use crate::common;

use common::daemon::{SocketDaemon, stdio_daemon, workspace};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const AUTO: &str = "[permissions]\ndefault_mode = \"auto\"\n";

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_ids_are_random_v4_uuids_whose_random_bits_all_vary() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut c) = stdio_daemon(dir.path(), "", &[]).await;
    let ws = workspace(dir.path(), "ws");
    let mut ids = Vec::new();
    for _ in 0..64 {
        let id = c.new_session(&ws).await;
        let uuid = uuid::Uuid::parse_str(&id).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(uuid.get_version(), Some(uuid::Version::Random), "{id}");
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122, "{id}");
        ids.push(uuid.as_u128());
    }
    let distinct: std::collections::HashSet<u128> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), ids.len(), "a session id repeated");
    // 122 of the 128 bits are random: across 64 ids each of them must have been
    // both 0 and 1 (a fixed bit by chance: 2^-63). A counter, a clock or a
    // weak generator leaves many bits constant.
    let fixed_bits = (0..128).filter(|b| !(48..52).contains(b) && !(64..66).contains(b));
    let all_ones = ids.iter().fold(u128::MAX, |acc, id| acc & id);
    let any_ones = ids.iter().fold(0u128, |acc, id| acc | id);
    let constant: Vec<u32> = fixed_bits
        .map(|b| 127 - b)
        .filter(|bit| (all_ones >> bit) & 1 == 1 || (any_ones >> bit) & 1 == 0)
        .collect();
    assert!(constant.is_empty(), "bits that never changed: {constant:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_run_through_the_daemon_do_not_see_token_key_or_secret_variables() {
    let dir = tempfile::tempdir().unwrap();
    let secrets = [
        ("GITHUB_TOKEN", "s1"),
        ("npm_token", "s2"),
        ("AWS_SECRET_ACCESS_KEY", "s3"),
        ("MY_API_KEY", "s4"),
        ("Client_Secret", "s5"),
        ("SSH_KEYFILE", "s6"),
    ];
    let mut env = secrets.to_vec();
    env.push(("DSH_TEST_PLAIN", "visible"));
    let (_d, mut c) = stdio_daemon(dir.path(), AUTO, &env).await;
    let s = c.new_session(&workspace(dir.path(), "ws")).await;
    // `env` prints every variable, and a background task sees the same.
    let (out, is_error) = c.bash(&s, "env").await;
    assert!(!is_error, "{out}");
    assert!(out.contains("DSH_TEST_PLAIN=visible\n"), "{out}");
    let task = c.start_task(&s, "env; echo end-of-env").await;
    let bg = loop {
        let (read, _) = c
            .tool(Some(&s), "bash_output", json!({"task_id": task}))
            .await;
        if read.contains("[status: completed") {
            break read;
        }
    };
    for listing in [&out, &bg] {
        for (name, value) in &secrets {
            assert!(
                !listing.contains(&format!("{name}=")) && !listing.contains(&format!("={value}\n")),
                "{name} leaked into a command's environment"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_connection_cannot_answer_cancel_or_watch_a_sessions_permission() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "").await;
    let ws = workspace(dir.path(), "ws");
    let mut a = daemon.connect().await;
    let mut b = daemon.connect().await;
    let sa = a.new_session(&ws).await;
    let sb = b.new_session(&ws).await;
    a.ignore_permissions = true;
    let prompt = a
        .start(
            "session/prompt",
            json!({"sessionId": sa, "prompt": [{"type": "text", "text": "!touch from-a"}]}),
        )
        .await;
    let asked = a.wait_permission_request().await;
    let question = asked["id"].clone();
    // B tries everything it can name: an answer to A's question (by its id),
    // cancels of A's session and of A's request, and A's session in each method.
    b.send(json!({"jsonrpc": "2.0", "id": question,
                  "result": {"outcome": {"outcome": "selected", "optionId": "allow_always"}}}))
        .await;
    b.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sa}}))
        .await;
    b.send(
        json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": prompt}}),
    )
    .await;
    for (method, params) in [
        (
            "session/set_mode",
            json!({"sessionId": sa, "modeId": "auto"}),
        ),
        ("_dsh/tasks/list", json!({"sessionId": sa})),
        ("session/close", json!({"sessionId": sa})),
        (
            "session/prompt",
            json!({"sessionId": sa, "prompt": [{"type": "text", "text": "!true"}]}),
        ),
    ] {
        let e = b.request(method, params).await.unwrap_err();
        assert_eq!(e["code"], -32002, "{method}: {e}");
    }
    let e = b
        .request(
            "session/load",
            json!({"sessionId": sa, "cwd": ws, "mcpServers": []}),
        )
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32600, "{e}");
    // A's question is still open and A's own answer decides it.
    a.send(json!({"jsonrpc": "2.0", "id": question,
                  "result": {"outcome": {"outcome": "selected", "optionId": "reject_once"}}}))
        .await;
    let done = a.wait_for(json!(prompt)).await.unwrap();
    assert_eq!(done["stopReason"], "end_turn");
    let result = a.updates_of(&sa, "tool_call_update");
    let last = result.last().unwrap();
    assert_eq!(last["status"], "failed");
    assert!(
        last["rawOutput"]["text"]
            .as_str()
            .unwrap()
            .contains("rejected"),
        "{last}"
    );
    assert!(!ws.join("from-a").exists());
    // B's own session was asked nothing and B saw nothing of A's session.
    b.request("_dsh/status", json!({})).await.unwrap();
    assert!(b.permission_requests.is_empty());
    assert!(
        b.updates.iter().all(|u| u["sessionId"] == json!(sb)),
        "{:?}",
        b.updates
    );
    drop((a, b));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_files_are_private_and_planted_symlinks_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep\n").unwrap();
    // A state directory left world-readable, and symlinks waiting at the paths
    // of the first background task's spill files and of the daemon's log.
    std::fs::create_dir_all(state.join("spill")).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    for name in ["bash-1.stdout", "bash-1.stderr", "bash-2.stdout"] {
        std::os::unix::fs::symlink(&victim, state.join("spill").join(name)).unwrap();
    }
    std::os::unix::fs::symlink(&victim, state.join("daemon.log")).unwrap();
    let daemon = SocketDaemon::start(dir.path(), AUTO).await;
    let ws = workspace(dir.path(), "ws");
    let mut c = daemon.connect().await;
    let s = c.new_session(&ws).await;

    let task = c
        .start_task(&s, "head -c 100000 /dev/zero | tr '\\0' v")
        .await;
    assert_eq!(task, "bash-1");
    // Its completion notice comes once the daemon has read all of its output (a signal
    // from inside the command came before that, and CI read the task still running
    // with nothing dropped yet).
    c.wait_task_finished(&task).await;
    let (read, _) = c
        .tool(Some(&s), "bash_output", json!({"task_id": task}))
        .await;
    assert!(
        read.contains("[some output was dropped from memory; full output: (unavailable)]"),
        "{}",
        &read[read.len().saturating_sub(300)..]
    );
    // A session log path that is a symlink (to a file that reads as that
    // session's log) is refused, not opened.
    let planted = uuid::Uuid::new_v4().to_string();
    let fake = dir.path().join("fake-log");
    std::fs::write(
        &fake,
        format!(
            "{}\n",
            json!({"type": "header", "id": planted, "cwd": ws, "createdMs": 1})
        ),
    )
    .unwrap();
    let log_link = state.join(format!("sessions/{planted}.jsonl"));
    std::os::unix::fs::symlink(&fake, &log_link).unwrap();
    let e = c
        .request(
            "session/load",
            json!({"sessionId": planted, "cwd": ws, "mcpServers": []}),
        )
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32002, "{e}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
    assert_eq!(
        std::fs::read(&fake)
            .unwrap()
            .iter()
            .filter(|b| **b == b'\n')
            .count(),
        1
    );

    // Private modes: directories 0700, files 0600, whatever existed before.
    let (out, _) = c.bash(&s, "head -c 100000 /dev/zero | tr '\\0' w").await;
    let spill_file = out
        .rsplit_once("[output truncated; full output: ")
        .and_then(|(_, p)| p.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no spill path in {}", &out[out.len() - 200..]));
    let files = [
        Path::new(spill_file).to_path_buf(),
        state.join("audit.jsonl"),
        state.join(format!("sessions/{s}.jsonl")),
        daemon.socket.clone(),
    ];
    for f in &files {
        assert_eq!(mode(f), 0o600, "{}", f.display());
    }
    let dirs = [
        state.clone(),
        state.join("spill"),
        state.join("sessions"),
        daemon.socket.parent().unwrap().to_path_buf(),
    ];
    for d in &dirs {
        assert_eq!(mode(d), 0o700, "{}", d.display());
    }
    assert!(Path::new(spill_file).starts_with(state.join("spill")));
    drop(c);
    daemon.stop().await;
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_hook_that_crashes_or_hangs_denies_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    for (name, body, timeout_ms, says) in [
        ("crash", "kill -SEGV $$", 5000, "crashed"),
        ("hang", "sleep 30", 300, "did not answer within 300ms"),
    ] {
        let hook = dir.path().join(name);
        std::fs::write(&hook, format!("#!/bin/bash\n{body}\n")).unwrap();
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        let config = format!(
            "{AUTO}[[hooks.command]]\nargv = [\"{}\"]\ntimeout_ms = {timeout_ms}\n",
            hook.display()
        );
        let (_d, mut c) = stdio_daemon(dir.path(), &config, &[]).await;
        let ws = workspace(dir.path(), &format!("ws-{name}"));
        let s = c.new_session(&ws).await;
        let (out, is_error) = c.bash(&s, "touch ran").await;
        assert!(is_error, "{name}: {out}");
        assert!(
            out.starts_with("Error: vetoed by hook ") && out.contains(says),
            "{name}: {out}"
        );
        assert!(!ws.join("ran").exists(), "{name}: the command ran");
        let failed: Vec<Value> = c
            .updates_of(&s, "tool_call_update")
            .into_iter()
            .filter(|u| u["status"] == "failed")
            .collect();
        assert_eq!(failed.len(), 1, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_planted_at_the_audit_log_stops_the_daemon_instead_of_being_followed() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep\n").unwrap();
    std::os::unix::fs::symlink(&victim, state.join("audit.jsonl")).unwrap();
    // Refusing to run unaudited is the fail-closed choice.
    let out = common::dsh()
        .args(["serve", "--socket"])
        .arg(dir.path().join("run/dsh.sock"))
        .arg("--state-dir")
        .arg(&state)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("cannot open the audit log"), "{said}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
}

/// Findings of issue 8 in the policy, now closed: a trap's action is judged as a
/// command line (src/hooks/shell.rs), a deny rule catches a path-qualified name,
/// and read-only mode refuses the forms of its readers that write files, run
/// programs or change the system (`writing_option` in src/hooks/policy.rs).
#[test]
fn known_policy_gaps_are_closed() {
    use dsh::config::{Decision, Mode, PermissionRule, PermissionsConfig};
    use dsh::policy::Policy;
    let config = PermissionsConfig {
        rules: vec![PermissionRule {
            tool: "bash".into(),
            command: Some("rm".into()),
            action: Decision::Deny,
            ..PermissionRule::default()
        }],
        ..PermissionsConfig::default()
    };
    let policy = Policy::new(&config);
    let judge = |command: &str, mode| {
        policy
            .judge("bash", &json!({ "command": command }), mode, &[])
            .decision
    };
    let mut open = Vec::new();
    // A deny rule for `rm` must hold however rm is reached.
    for command in ["/bin/rm x", "trap 'rm x' EXIT"] {
        if judge(command, Mode::Auto) != Decision::Deny {
            open.push(format!(
                "auto mode runs {command:?} despite the rm deny rule"
            ));
        }
    }
    // Read-only mode must refuse what writes files, runs programs or changes the system.
    for command in [
        "uniq in.txt out.txt",
        "rg --pre ./script pattern",
        "rg --pre=./script pattern",
        "date -s 2020-01-01",
        "hostname other",
        "file -C -m magic",
    ] {
        if judge(command, Mode::ReadOnly) == Decision::Allow {
            open.push(format!("read-only mode allows {command:?}"));
        }
    }
    assert!(open.is_empty(), "{open:#?}");
}
