//! Layered config through the real binary (issue 14): the user's own file read with no
//! `--config`, and a project's `.dsh/config.toml` that adds rules for the sessions working
//! in it. An untrusted project only tightens (its allow rule and its hook are ignored, the
//! hook program never runs, the person is told); once the user's file trusts it, a reload
//! honours it fully, hook included.

use crate::common;
use common::daemon::{BIN, SocketDaemon, workspace};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A repository `dir/proj` with a project file allowing `echo`, denying `printf` and
/// running its own hook `./hooks/mark.sh` (which would leave `marker` in the project);
/// returns the project and the marker's path.
fn project(dir: &Path) -> (PathBuf, PathBuf) {
    let proj = workspace(dir, "proj");
    std::fs::create_dir_all(proj.join(".git")).unwrap();
    std::fs::create_dir_all(proj.join(".dsh")).unwrap();
    std::fs::create_dir_all(proj.join("hooks")).unwrap();
    std::fs::create_dir_all(proj.join("src")).unwrap();
    let marker = proj.join("marker");
    let hook = proj.join("hooks/mark.sh");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ncat > /dev/null\ntouch {}\necho '{{\"decision\": \"allow\"}}'\n",
            marker.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        proj.join(".dsh/config.toml"),
        r#"[[permissions.rules]]
tool = "bash"
command = "echo"
action = "allow"

[[permissions.rules]]
tool = "bash"
command = "printf"
action = "deny"

[[hooks.command]]
name = "mark"
argv = ["./hooks/mark.sh"]
"#,
    )
    .unwrap();
    (proj, marker)
}

async fn explain(c: &mut common::client::Client, session: &str, command: &str) -> Value {
    c.request(
        "_dsh/policy/explain",
        json!({"sessionId": session, "command": command}),
    )
    .await
    .expect("explain")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_project_only_tightens_and_a_trusted_one_is_honoured_after_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let (proj, marker) = project(dir.path());
    // The user's config: mode ask (the default), nothing else.
    let daemon = SocketDaemon::start(dir.path(), "").await;
    let mut c = daemon.connect().await;
    // A session in a subdirectory of the project gets the project's file.
    let s = c.new_session(&proj.join("src")).await;
    let told = c
        .wait_update(|u| {
            u["sessionId"] == s.as_str() && u["update"]["sessionUpdate"] == "agent_message_chunk"
        })
        .await;
    let text = told["update"]["content"]["text"].as_str().unwrap();
    assert!(
        text.contains("allow rule bash `echo` is ignored")
            && text.contains("hook `./hooks/mark.sh` (pre_tool) is ignored")
            && text.contains("trusted_projects"),
        "{text}"
    );

    // The project's deny rule applies; explain names the project file as its origin.
    let (text, is_error) = c.bash(&s, "printf x").await;
    assert!(is_error && text.contains("vetoed by policy"), "{text}");
    let explained = explain(&mut c, &s, "printf x").await;
    let origin = explained["judgement"]["cause"]["origin"]
        .as_str()
        .unwrap_or_default();
    assert!(origin.contains("proj/.dsh/config.toml:"), "{explained}");
    // Its allow rule does not: `echo` is still asked (nobody answers: refused), and its
    // hook, which every call reaching the hooks would run, never ran.
    let asked = c.permission_requests.len();
    let (text, is_error) = c.bash(&s, "echo hi").await;
    assert!(is_error && text.contains("cancelled"), "{text}");
    assert_eq!(c.permission_requests.len(), asked + 1);
    assert!(!marker.exists(), "the untrusted project's hook ran");
    let explained = explain(&mut c, &s, "echo hi").await;
    assert_eq!(explained["judgement"]["decision"], "ask");
    assert!(
        explained["project"]
            .as_str()
            .is_some_and(|p| p.ends_with("proj/.dsh/config.toml")),
        "{explained}"
    );
    let warnings = explained["warnings"].to_string();
    assert!(warnings.contains("allow rule bash `echo`"), "{warnings}");
    let audited = std::fs::read_to_string(daemon.state.join("audit.jsonl")).unwrap();
    let last: Value = serde_json::from_str(audited.lines().last().unwrap()).unwrap();
    assert!(last["project"].as_str().is_some(), "{last}");
    assert!(
        last["policyVersion"].as_str().unwrap().contains('+'),
        "{last}"
    );

    // A session elsewhere is judged by the user's rules alone: printf is only asked.
    let other = c.new_session(&workspace(dir.path(), "elsewhere")).await;
    let explained = explain(&mut c, &other, "printf x").await;
    assert_eq!(explained["judgement"]["decision"], "ask", "{explained}");
    assert!(explained.get("warnings").is_none(), "{explained}");

    // The user trusts the project; a reload reads the project file again for the live
    // session: its allow rule and its hook now apply.
    std::fs::write(
        &daemon.config,
        format!(
            "[exec]\nkill_grace_ms = 300\ndrain_ms = 300\n[permissions]\ntrusted_projects = [\"{}\"]\n",
            proj.display()
        ),
    )
    .unwrap();
    crate::sandbox_pins::trust(&daemon.state, &daemon.config, &proj).await;
    let out = crate::policy_lifecycle::reload(&daemon);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let asked = c.permission_requests.len();
    assert_eq!(c.bash(&s, "echo hi").await, ("hi\n".into(), false));
    assert_eq!(c.permission_requests.len(), asked, "asked although allowed");
    assert!(marker.exists(), "the trusted project's hook did not run");
    let explained = explain(&mut c, &s, "echo hi").await;
    assert_eq!(explained["judgement"]["decision"], "allow");
    assert!(explained.get("warnings").is_none(), "{explained}");
    // Its deny rule still applies.
    let (text, is_error) = c.bash(&s, "printf x").await;
    assert!(is_error && text.contains("vetoed by policy"), "{text}");
    drop(c);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_started_in_a_trusted_project_runs_its_hook_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let (proj, marker) = project(dir.path());
    let daemon = SocketDaemon::start(
        dir.path(),
        &format!(
            "[permissions]\ntrusted_projects = [\"{}\"]\n",
            proj.display()
        ),
    )
    .await;
    crate::sandbox_pins::trust(&daemon.state, &daemon.config, &proj).await;
    let mut c = daemon.connect().await;
    let s = c.new_session(&proj).await;
    assert_eq!(c.bash(&s, "echo hi").await, ("hi\n".into(), false));
    assert!(marker.exists(), "the trusted project's hook did not run");
    // Nothing was left out, so nothing is said.
    assert!(c.updates_of(&s, "agent_message_chunk").is_empty());
    drop(c);
    let (state, config) = (daemon.state.clone(), daemon.config.clone());
    daemon.stop().await;

    // Replayed under the config that produced it, the call is judged with its project's
    // rules again (the user's alone would ask about `echo`): nothing changes. With
    // --hooks, the project's hook runs again too.
    std::fs::remove_file(&marker).unwrap();
    for extra in [&[][..], &["--hooks"][..]] {
        let out = std::process::Command::new(BIN)
            .args(["policy", "replay", "--fail-on", "change", "--audit"])
            .arg(state.join("audit.jsonl"))
            .arg("--config")
            .arg(&config)
            .args(extra)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{extra:?}: {said}");
        assert!(said.contains("1 call(s) replayed, 0 changed"), "{said}");
    }
    assert!(
        marker.exists(),
        "replay --hooks did not run the project's hook"
    );
}

/// `dsh serve` with no --config reads the user's own file, as check-config does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_reads_the_users_own_file_without_config() {
    let dir = tempfile::tempdir().unwrap();
    let xdg = dir.path().join("xdg");
    std::fs::create_dir_all(xdg.join("dsh")).unwrap();
    std::fs::write(
        xdg.join("dsh/config.toml"),
        "[permissions]\ndefault_mode = \"auto\"\n",
    )
    .unwrap();
    let mut cmd = common::dsh();
    cmd.args(["serve", "--stdio", "--state-dir"])
        .arg(dir.path().join("state"))
        .env("XDG_CONFIG_HOME", &xdg);
    let (_child, mut c) = common::spawn_client(&mut cmd);
    c.initialize().await;
    let r = c
        .request("_dsh/policy/explain", json!({"command": "ls"}))
        .await
        .unwrap();
    assert_eq!(r["mode"], "auto", "{r}");
}

#[test]
fn check_config_names_the_files_it_read() {
    let dir = tempfile::tempdir().unwrap();
    let (proj, _) = project(dir.path());
    let xdg = dir.path().join("xdg");
    let run = |cwd: &Path| {
        let out = std::process::Command::new(BIN)
            .arg("check-config")
            .env("XDG_CONFIG_HOME", &xdg)
            .current_dir(cwd)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let said = run(dir.path());
    assert!(said.contains("# read: no config file"), "{said}");
    // With the user's own file there, it is read without --config.
    std::fs::create_dir_all(xdg.join("dsh")).unwrap();
    std::fs::write(
        xdg.join("dsh/config.toml"),
        "[permissions]\ndefault_mode = \"auto\"\n",
    )
    .unwrap();
    let said = run(dir.path());
    assert!(
        said.contains(&format!(
            "# read: {}",
            xdg.join("dsh/config.toml").display()
        )),
        "{said}"
    );
    assert!(said.contains("default_mode = \"auto\""), "{said}");
    // From inside the project: its file, untrusted, and what of it is left out.
    let said = run(&proj.join("src"));
    assert!(said.contains("proj/.dsh/config.toml (untrusted"), "{said}");
    assert!(said.contains("#   ignored: "), "{said}");

    // `dsh policy explain` there judges as a session there would be.
    let out = std::process::Command::new(BIN)
        .args(["policy", "explain", "--json", "--", "printf x"])
        .env("XDG_CONFIG_HOME", &xdg)
        .current_dir(proj.join("src"))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["judgement"]["decision"], "deny", "{v}");
    assert!(v["warnings"].to_string().contains("hook"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stricter_project_mode_applies_when_a_session_starts_and_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let proj = workspace(dir.path(), "strict");
    std::fs::create_dir_all(proj.join(".git")).unwrap();
    std::fs::create_dir_all(proj.join(".dsh")).unwrap();
    std::fs::write(
        proj.join(".dsh/config.toml"),
        "[permissions]\ndefault_mode = \"read-only\"\n",
    )
    .unwrap();
    // The user's mode is auto: the project's read-only is stricter, so it applies.
    let auto = "[permissions]\ndefault_mode = \"auto\"\n";
    let daemon = SocketDaemon::start(dir.path(), auto).await;
    let mut c = daemon.connect().await;
    let r = c
        .request("session/new", json!({"cwd": proj, "mcpServers": []}))
        .await
        .unwrap();
    assert_eq!(r["modes"]["currentModeId"], "read-only", "{r}");
    let s = r["sessionId"].as_str().unwrap().to_string();
    let (text, is_error) = c.bash(&s, "touch x").await;
    assert!(is_error && text.contains("read-only"), "{text}");
    // Nothing of the file was left out: nothing is said.
    assert!(c.updates_of(&s, "agent_message_chunk").is_empty());
    drop(c);
    daemon.stop().await;
    // After a restart, loading the session finds the project's mode again.
    let daemon = SocketDaemon::start(dir.path(), auto).await;
    let mut c = daemon.connect().await;
    let r = c
        .request(
            "session/load",
            json!({"sessionId": s, "cwd": proj, "mcpServers": []}),
        )
        .await
        .unwrap();
    assert_eq!(r["modes"]["currentModeId"], "read-only", "{r}");
    drop(c);
    daemon.stop().await;
}
