//! Hooks v3 (issue 30) through the real binary: names that tell hooks apart, Claude
//! Code's own settings and `dsh hooks import`, `dsh hooks test`, model judges against
//! the scripted model server, HTTP hooks against loopback servers, hooks in parallel,
//! and the new events.

use crate::common;
use std::path::Path;

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
