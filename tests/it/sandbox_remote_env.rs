//! E4 on the ssh executor's helper (issue 40): `[exec] env_pass` and `env_set` reach
//! the sandbox the helper runs commands in on the host, as they reach the local
//! sandbox's. Against the loopback sshd (`tests/common/sshd`), whose sessions carry
//! the variables the test names: the host's values are what `env_pass` passes (the
//! names travel, never this machine's values).

use crate::common;

use common::sshd::Sshd;
use dsh::config::{ExecutorKind, HelperMode};
use dsh::exec::{BashExecutor, ExecRequest, SshExecutor};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

fn sandboxed_over_ssh(
    state: &Path,
    sshd: &Sshd,
    pass: &[&str],
    set: &[(&str, &str)],
) -> SshExecutor {
    let mut cfg = common::test_config(state);
    cfg.kind = ExecutorKind::Ssh;
    cfg.ssh = sshd.helper_config();
    cfg.ssh.helper = HelperMode::Required;
    cfg.ssh.sandbox = true;
    cfg.env_pass = pass.iter().map(|s| s.to_string()).collect();
    cfg.env_set = set
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    SshExecutor::with_helper(&cfg, PathBuf::from(common::daemon::BIN)).unwrap()
}

async fn env_of(exec: &SshExecutor, root: &Path) -> String {
    let out = exec
        .run(
            exec.resolve(ExecRequest {
                command: "env | sort".into(),
                workdir: Some(root.to_path_buf()),
                writable_roots: vec![root.to_path_buf()],
                ..ExecRequest::default()
            }),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    out.stdout.text
}

/// E4: without `env_pass` the host's `T40_NPM_TOKEN` and `T40_PLAIN` stay out of the
/// helper's sandbox (the allowlist holds there); named in `env_pass` they reach it with
/// the host's values, and `env_set` sets its own, over the host's value too. Before,
/// the helper's sandbox got neither (its `hello` carried only `[exec.sandbox]`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e4_env_pass_and_env_set_reach_the_helpers_sandbox_on_the_host() {
    let sshd = Sshd::start_with_env(
        "T40_NPM_TOKEN=host-token T40_PLAIN=host-plain T40_OVERRIDDEN=host-value",
    );
    let state = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();

    let plain = sandboxed_over_ssh(state.path(), &sshd, &[], &[]);
    let out = env_of(&plain, &root).await;
    plain.shutdown().await;
    assert!(out.contains("PATH="), "a sandboxed command ran:\n{out}");
    for held in ["host-token", "host-plain", "host-value"] {
        assert!(!out.contains(held), "{held} passed the allowlist:\n{out}");
    }

    let named = sandboxed_over_ssh(
        state.path(),
        &sshd,
        &[
            "T40_NPM_TOKEN",
            "T40_PLAIN",
            "T40_OVERRIDDEN",
            "T40_NOT_SET",
        ],
        &[("T40_SET", "set-value"), ("T40_OVERRIDDEN", "config-value")],
    );
    let out = env_of(&named, &root).await;
    named.shutdown().await;
    let lines: Vec<&str> = out.lines().collect();
    for line in [
        "T40_NPM_TOKEN=host-token",
        "T40_PLAIN=host-plain",
        "T40_SET=set-value",
        "T40_OVERRIDDEN=config-value",
    ] {
        assert!(
            lines.contains(&line),
            "the helper's sandbox lacks {line}:\n{out}"
        );
    }
    assert!(!out.contains("host-value"), "env_set wins:\n{out}");
    assert!(
        !lines.iter().any(|l| l.starts_with("T40_NOT_SET=")),
        "a name the host lacks is not made up:\n{out}"
    );
}
