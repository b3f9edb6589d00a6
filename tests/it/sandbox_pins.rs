//! Issue 39, part 4: what dsh runs for a trusted project is pinned (E9). A sandboxed
//! command may write inside its project, where the scripts a trusted project's hooks
//! name live: rewritten, they would run on the host, unsandboxed, at the next call.
//! `dsh trust DIR` pins them by content; a difference suspends the project's hooks
//! fail closed (the call is refused with the command to review it, the rewritten
//! script never runs), and trusting again accepts it. The names that make a
//! directory a project (`.dsh/`, `.claude/`) cannot be created by a command, in a
//! root or in a nested project inside it.

use crate::common;
use crate::sandbox_escape::{run_in, visible_dir};

use common::*;
use dsh::config::ExecutorKind;
use dsh::exec::{BashExecutor, LocalExecutor, SandboxExecutor};
use std::path::Path;

/// `dsh trust ws` against a daemon's `state` directory and `config` file: what it
/// printed. (Every test of a trusted project pins it first.)
pub async fn trust(state: &Path, config: &Path, ws: &Path) -> String {
    let out = common::dsh()
        .arg("trust")
        .arg(ws)
        .arg("--state-dir")
        .arg(state)
        .arg("--config")
        .arg(config)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_issue_39_a_rewritten_hook_script_suspends_the_project_until_trusted_again() {
    let dir = visible_dir();
    let d = dir.path().canonicalize().unwrap();
    let ws = common::daemon::workspace(&d, "ws");
    let canary = d.join("canary");
    let judged = d.join("judged");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::create_dir_all(ws.join(".dsh")).unwrap();
    std::fs::create_dir_all(ws.join("tools")).unwrap();
    std::fs::write(
        ws.join(".dsh/config.toml"),
        "[[hooks.command]]\nargv = [\"./tools/guard.sh\"]\nname = \"guard\"\n",
    )
    .unwrap();
    let guard = ws.join("tools/guard.sh");
    std::fs::write(
        &guard,
        format!("#!/bin/sh\necho x >> {}\n", judged.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&guard, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = format!(
        "kind = \"sandbox\"\n[permissions]\ndefault_mode = \"auto\"\ntrusted_projects = [{:?}]\n",
        ws
    );
    common::daemon::write_config(&d, &config);
    let shown = trust(&d.join("state"), &d.join("dsh.toml"), &ws).await;
    assert!(shown.contains(&guard.display().to_string()), "{shown}");
    let (_daemon, mut c) = common::daemon::stdio_daemon(&d, &config, &[]).await;
    let s = c.new_session(&ws).await;
    let (text, _) = c.bash(&s, "echo one").await;
    assert_eq!(text, "one\n");
    assert!(judged.is_file(), "the pinned hook judged the call");
    // The attack: a sandboxed command rewrites the script the hook runs (it is
    // inside the writable root, and not one of the protected names).
    let evil = format!("#!/bin/sh\ntouch {}\n", canary.display());
    let (text, _) = c
        .bash(
            &s,
            &format!(
                "printf '{}' > tools/guard.sh && echo rewritten",
                evil.replace('\n', "\\n")
            ),
        )
        .await;
    assert!(text.contains("rewritten"), "{text}");
    assert_eq!(std::fs::read_to_string(&guard).unwrap(), evil);
    // The next call is refused with the review hint; the rewritten script did not run.
    let (text, is_error) = c.bash(&s, "echo two").await;
    assert!(is_error, "{text}");
    assert!(text.contains("vetoed by project pins"), "{text}");
    assert!(
        text.contains("tools/guard.sh changed since it was pinned"),
        "{text}"
    );
    assert!(
        text.contains(&format!("dsh trust {}", ws.display())),
        "{text}"
    );
    assert!(!canary.exists(), "the rewritten hook ran");
    assert!(!text.contains("two\n"), "the command ran: {text}");
    // Reviewed and trusted again, it is what judges the next call.
    let shown = trust(&d.join("state"), &d.join("dsh.toml"), &ws).await;
    assert!(shown.contains("was different"), "{shown}");
    let (text, _) = c.bash(&s, "echo three").await;
    assert_eq!(text, "three\n");
    assert!(canary.exists(), "the reviewed hook judged the call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_issue_39_a_trusted_project_never_pinned_is_refused_not_run_unhooked() {
    let dir = visible_dir();
    let d = dir.path().canonicalize().unwrap();
    let ws = common::daemon::workspace(&d, "ws");
    std::fs::create_dir_all(ws.join(".dsh")).unwrap();
    std::fs::write(ws.join(".dsh/config.toml"), "").unwrap();
    let config = format!(
        "[permissions]\ndefault_mode = \"auto\"\ntrusted_projects = [{:?}]\n",
        ws
    );
    let (_daemon, mut c) = common::daemon::stdio_daemon(&d, &config, &[]).await;
    let s = c.new_session(&ws).await;
    let (text, is_error) = c.bash(&s, "touch ran").await;
    assert!(
        is_error && text.contains("nothing of it is pinned yet"),
        "{text}"
    );
    assert!(!ws.join("ran").exists());
}

/// A command that tries to make `.claude/settings.json` at the root and
/// `app/.dsh/config.toml` and `app/.claude/settings.json` in the nested project
/// `app`, printing what it managed.
const PLANT: &str = "mkdir -p .claude 2>/dev/null; echo '{}' > .claude/settings.json 2>/dev/null \
     && echo planted-claude; mkdir -p app/.dsh 2>/dev/null; echo '' > app/.dsh/config.toml \
     2>/dev/null && echo planted-dsh; mkdir -p app/.claude 2>/dev/null; echo '{}' > app/.claude/settings.json 2>/dev/null \
     && echo planted-app-claude; \
     echo done";

fn nested(root: &Path) {
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("app/.git")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_issue_39_claude_settings_and_a_nested_projects_dsh_cannot_be_created() {
    let state = tempfile::tempdir().unwrap();
    let mut cfg = test_config(state.path());
    cfg.kind = ExecutorKind::Local;
    // The attack, without the sandbox.
    let local = LocalExecutor::new(&cfg).unwrap();
    let dir = visible_dir();
    let root = dir.path().canonicalize().unwrap();
    nested(&root);
    let out = run_in(&local, PLANT, &root).await.unwrap();
    assert!(
        out.contains("planted-claude")
            && out.contains("planted-dsh")
            && out.contains("planted-app-claude"),
        "{out}"
    );
    local.shutdown().await;
    // Held in the sandbox.
    cfg.kind = ExecutorKind::Sandbox;
    let sandbox = SandboxExecutor::new(&cfg, &[]).unwrap();
    let dir = visible_dir();
    let root = dir.path().canonicalize().unwrap();
    nested(&root);
    let out = run_in(&sandbox, PLANT, &root).await.unwrap();
    assert!(out.contains("done"), "{out}");
    assert!(!out.contains("planted"), "{out}");
    sandbox.shutdown().await;
    for left in [
        ".claude/settings.json",
        "app/.dsh/config.toml",
        "app/.claude/settings.json",
    ] {
        assert!(!root.join(left).exists(), "{left}");
    }
    // The placeholders went with the sandbox.
    for gone in [".claude", ".dsh", "app/.dsh", "app/.claude", "app/.vscode"] {
        assert!(!root.join(gone).exists(), "{gone}");
    }
}

/// Issue 39, item 1 (E9): the pins are checked when a call starts, the hooks run
/// later in it; a script run by its path could be swapped in between, by the very
/// command the call runs. Here a `post_tool` hook (the user's, naming
/// `./tools/post.sh` where the session works) and a command that rewrites that
/// script: the swap is made before the hook runs, deterministically. In a plain
/// directory (nothing pinned: the old run by path) the swapped script runs; in the
/// trusted, pinned project the hook runs from a sealed copy checked against its pin,
/// so the swapped bytes never run and the result is withheld saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_issue_39_a_pinned_script_swapped_after_the_check_does_not_run() {
    use std::os::unix::fs::PermissionsExt;
    let dir = visible_dir();
    let d = dir.path().canonicalize().unwrap();
    let plain = common::daemon::workspace(&d, "plain");
    let ws = common::daemon::workspace(&d, "ws");
    std::fs::create_dir_all(ws.join(".dsh")).unwrap();
    std::fs::write(ws.join(".dsh/config.toml"), "").unwrap();
    for place in [&plain, &ws] {
        std::fs::create_dir_all(place.join(".git")).unwrap();
        std::fs::create_dir_all(place.join("tools")).unwrap();
        let script = place.join("tools/post.sh");
        let judged = d.join(format!(
            "judged-{}",
            place.file_name().unwrap().to_string_lossy()
        ));
        std::fs::write(
            &script,
            format!("#!/bin/sh\necho x >> {}\n", judged.display()),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let config = format!(
        "kind = \"sandbox\"\n[permissions]\ndefault_mode = \"auto\"\ntrusted_projects = [{:?}]\n\
         [[hooks.command]]\nargv = [\"./tools/post.sh\"]\nname = \"post\"\nevent = \"post_tool\"\n",
        ws
    );
    common::daemon::write_config(&d, &config);
    let shown = trust(&d.join("state"), &d.join("dsh.toml"), &ws).await;
    assert!(
        shown.contains(&ws.join("tools/post.sh").display().to_string()),
        "{shown}"
    );
    let (_daemon, mut c) = common::daemon::stdio_daemon(&d, &config, &[]).await;
    let swap = |canary: &Path| {
        let evil = format!("#!/bin/sh\ntouch {}\n", canary.display());
        format!(
            "printf '{}' > tools/post.sh && echo swapped",
            evil.replace('\n', "\\n")
        )
    };
    // The control: nothing pinned, the hook runs by path, and what runs is the swap.
    let s = c.new_session(&plain).await;
    let (text, _) = c.bash(&s, "echo one").await;
    assert_eq!(text, "one\n");
    assert!(d.join("judged-plain").is_file(), "the hook ran");
    let canary = d.join("canary-plain");
    let (text, _) = c.bash(&s, &swap(&canary)).await;
    assert!(text.contains("swapped"), "{text}");
    assert!(
        canary.exists(),
        "the swapped script ran after the call's own rewrite"
    );
    // The pinned project: the same swap, within one call, after its pins were checked.
    let s = c.new_session(&ws).await;
    let (text, _) = c.bash(&s, "echo one").await;
    assert_eq!(text, "one\n");
    assert!(
        d.join("judged-ws").is_file(),
        "the pinned hook ran from its copy"
    );
    let canary = d.join("canary-ws");
    let (text, is_error) = c.bash(&s, &swap(&canary)).await;
    assert!(is_error, "{text}");
    assert!(text.contains("result withheld by hook post"), "{text}");
    assert!(
        text.contains("tools/post.sh changed since it was pinned"),
        "{text}"
    );
    assert!(!canary.exists(), "the swapped script ran on the host");
}
