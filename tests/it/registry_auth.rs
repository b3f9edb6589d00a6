//! Authentication as ACP clients and the ACP Registry see it (issue 31): the methods
//! `initialize` lists, `authenticate` with and without a key, `logout`, the
//! auth-required answer to a prompt, and `dsh login` / `dsh logout` at a real terminal.

use crate::common;
use common::client::Client;
use common::fake_model::{FakeModel, text};
use serde_json::json;
use std::path::Path;
use tokio::process::Child;

/// A `dsh serve --stdio` whose user config directory is `dir/conf` (where the key file
/// goes), with `config` as its config file, initialized.
async fn daemon(dir: &Path, config: &str) -> (Child, Client) {
    let conf = dir.join("conf");
    let conf = conf.to_str().unwrap();
    common::daemon::stdio_daemon(dir, config, &[("XDG_CONFIG_HOME", conf)]).await
}

fn key_file(dir: &Path) -> std::path::PathBuf {
    dir.join("conf/dsh/api_key")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_lists_an_agent_and_a_terminal_method_and_logout() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("conf");
    let (_child, mut c) = common::spawn_client(
        common::dsh()
            .args(["serve", "--stdio", "--state-dir"])
            .arg(dir.path().join("state"))
            .env("XDG_CONFIG_HOME", &conf),
    );
    let init = c.initialize().await;
    let methods = init["authMethods"].as_array().unwrap();
    assert_eq!(methods.len(), 2, "{init:#}");
    // The agent method: no `type` on the wire means `agent` (the schema's default).
    assert_eq!(methods[0]["id"], "api-key");
    assert!(methods[0].get("type").is_none_or(|t| t == "agent"));
    assert_eq!(methods[1]["type"], "terminal");
    assert_eq!(methods[1]["id"], "login");
    assert_eq!(methods[1]["args"], json!(["login"]));
    assert_eq!(
        methods[1]["_meta"]["terminal-auth"]["args"],
        json!(["login"])
    );
    assert_eq!(
        methods[1]["_meta"]["terminal-auth"]["command"],
        env!("CARGO_BIN_EXE_dsh")
    );
    assert_eq!(init["agentCapabilities"]["auth"]["logout"], json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_authenticate_and_prompts_say_how_and_bang_still_works() {
    let dir = tempfile::tempdir().unwrap();
    // The default endpoint (DeepSeek) needs a key; none is in the environment.
    let (_child, mut c) = daemon(dir.path(), "").await;
    let e = c
        .request("authenticate", json!({"methodId": "api-key"}))
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32000, "{e}");
    let message = e["message"].as_str().unwrap();
    for says in [
        "dsh login",
        "DEEPSEEK_API_KEY",
        "DSH_API_KEY",
        key_file(dir.path()).to_str().unwrap(),
        "keyless = true",
    ] {
        assert!(message.contains(says), "{says:?} missing from: {message}");
    }
    // The terminal method is the client's to run; sent here, it says so.
    let e = c
        .request("authenticate", json!({"methodId": "login"}))
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("dsh login"));

    let ws = common::daemon::workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    let e = c.prompt(&s, "hello").await.unwrap_err();
    assert_eq!(e["code"], -32000, "{e}");
    assert!(e["message"].as_str().unwrap().contains("dsh login"));
    // Refused before anything of it happened: nothing shown, nothing titled.
    assert!(c.updates_of(&s, "user_message_chunk").is_empty());
    // What needs no model needs no key.
    c.set_mode(&s, "auto").await;
    c.prompt(&s, "!echo shell").await.unwrap();
    let done = c.updates_of(&s, "tool_call_update");
    assert_eq!(done.last().unwrap()["rawOutput"]["text"], "shell\n");
    c.prompt(&s, "/tasks").await.unwrap();

    // A key file written while the daemon runs (as `dsh login` does) is found at once.
    dsh::auth::store_key(&key_file(dir.path()), "sk-test").unwrap();
    c.request("authenticate", json!({"methodId": "api-key"}))
        .await
        .unwrap();
    // ACP logout removes it, and the agent method fails again.
    assert_eq!(c.request("logout", json!({})).await.unwrap(), json!({}));
    assert!(!key_file(dir.path()).exists());
    let e = c
        .request("authenticate", json!({"methodId": "api-key"}))
        .await
        .unwrap_err();
    assert_eq!(e["code"], -32000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_key_reaches_the_model_and_a_keyless_endpoint_needs_none() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![text("with key"), text("keyless")]).await;
    model.require_key("sk-stored");
    // A loopback endpoint is keyless unless the config says otherwise.
    let config = format!("{}keyless = false\n", model.config());
    let (_child, mut c) = daemon(dir.path(), &config).await;
    let ws = common::daemon::workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    let e = c.prompt(&s, "hello").await.unwrap_err();
    assert_eq!(e["code"], -32000, "not the model's 401: {e}");
    assert!(model.authorizations.lock().unwrap().is_empty());
    dsh::auth::store_key(&key_file(dir.path()), "sk-stored").unwrap();
    assert_eq!(
        c.prompt(&s, "hello").await.unwrap()["stopReason"],
        "end_turn"
    );
    assert_eq!(
        *model.authorizations.lock().unwrap(),
        vec!["Bearer sk-stored".to_string()]
    );

    // The same endpoint as a local server: no key, no error, nothing sent.
    let other = tempfile::tempdir().unwrap();
    let local = FakeModel::start(vec![text("keyless")]).await;
    let (_child2, mut c2) = daemon(other.path(), &local.config()).await;
    let ws2 = common::daemon::workspace(other.path(), "ws");
    let s2 = c2.new_session(&ws2).await;
    assert_eq!(
        c2.prompt(&s2, "hello").await.unwrap()["stopReason"],
        "end_turn"
    );
    assert_eq!(*local.authorizations.lock().unwrap(), vec![String::new()]);
}

/// Runs `dsh <args>` on a fresh pseudo-terminal (stdin, stdout and stderr) with `env`,
/// types `key` and Enter once it asks, and returns its exit status and everything the
/// terminal showed.
async fn at_a_terminal(args: &[&str], env: &[(&str, &str)], key: &str) -> (bool, String) {
    use std::io::{Read, Write};
    use std::os::fd::OwnedFd;
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let slave: OwnedFd = pty.slave;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
    cmd.args(args)
        .env_remove("DEEPSEEK_API_KEY")
        .env_remove("DSH_API_KEY")
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave.try_clone().unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start dsh");
    // Only the child holds the terminal now (the command keeps its copies until
    // dropped): its exit ends the master's reads.
    drop(cmd);
    drop(slave);
    let mut master = std::fs::File::from(pty.master);
    let key = key.to_string();
    tokio::task::spawn_blocking(move || {
        let mut shown = Vec::new();
        let mut buf = [0u8; 4096];
        let mut typed = false;
        loop {
            // EIO once the child's side is closed: the end of what it showed.
            let n = match master.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            shown.extend_from_slice(&buf[..n]);
            // The question comes after echo is off: type only then.
            if !typed && String::from_utf8_lossy(&shown).contains("typing is not shown") {
                master.write_all(format!("{key}\r").as_bytes()).unwrap();
                typed = true;
            }
        }
        let status = child.wait().expect("wait for dsh");
        (
            status.success(),
            String::from_utf8_lossy(&shown).into_owned(),
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dsh_login_asks_without_echo_checks_stores_0600_and_logout_removes() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![]).await;
    model.require_key("sk-right-key");
    let conf = dir.path().join("conf");
    let env = [
        ("XDG_CONFIG_HOME", conf.to_str().unwrap()),
        ("DSH_MODEL_BASE_URL", model.base_url.as_str()),
    ];
    let file = key_file(dir.path());

    // A key the endpoint refuses is not stored.
    let (ok, shown) = at_a_terminal(&["login"], &env, "sk-wrong-key").await;
    assert!(!ok, "{shown}");
    assert!(shown.contains("refused the key"), "{shown}");
    assert!(
        !shown.contains("sk-wrong-key"),
        "the key was echoed: {shown}"
    );
    assert!(!file.exists());

    // `dsh acp login` (a client appending the terminal method's args) is the same login.
    let (ok, shown) = at_a_terminal(&["acp", "login"], &env, "sk-right-key").await;
    assert!(ok, "{shown}");
    assert!(shown.contains("accepted the key"), "{shown}");
    assert!(
        !shown.contains("sk-right-key"),
        "the key was echoed: {shown}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "sk-right-key\n");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // An endpoint that does not answer: the key is stored, and the person told so.
    let (ok, shown) = at_a_terminal(
        &["login"],
        &[env[0], ("DSH_MODEL_BASE_URL", "http://127.0.0.1:9/v1")],
        "sk-unchecked",
    )
    .await;
    assert!(ok, "{shown}");
    assert!(shown.contains("could not be checked"), "{shown}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "sk-unchecked\n");

    let out = common::dsh()
        .arg("logout")
        .env("XDG_CONFIG_HOME", &conf)
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed"));
    assert!(!file.exists());
}
