//! Issue 39, E11 and E13 through the real binary (real bubblewrap, a loopback sshd): the
//! file tools reach files through the executor, so one containment holds for every tool.
//!
//! Attack first: under the local executor `write_file` and `edit_file` write a
//! repository's hooks and config, `.dsh/config.toml`, an rc file and an editor folder's
//! tasks, and `read_file` reads a `deny_read` file. Under the sandbox executor the same
//! calls are refused, saying why, and nothing changes; a symlink inside the root that
//! points at a masked file, a protected one or outside the roots widens nothing. Under the
//! ssh executor with a `path_map` whose two sides differ, the file tools read and write
//! the mapped side. E13: `workdir: "/tmp"` works in the sandbox, and a plain `exit 3` or
//! a timeout reads the same under the sandbox as under the local executor.

use crate::common;

use common::client::Client;
use common::daemon::{stdio_daemon, workspace};
use common::sshd::Sshd;
use dsh::config::HelperMode;
use serde_json::json;
use std::path::{Path, PathBuf};

const HOOK: &str = "#!/bin/sh\necho planted\n";

/// A workspace as a project looks: a git repository (hooks and config), `.dsh/`, an
/// existing `.bashrc`, `.vscode/`, and a secret the config masks. Returns it and the
/// secret's path.
fn project(dir: &Path) -> (PathBuf, PathBuf) {
    let ws = workspace(dir, "ws");
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "git init: {out:?}");
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    for (name, text) in [
        (".dsh/config.toml", "# project\n"),
        (".bashrc", "# rc\n"),
        (".vscode/tasks.json", "{}\n"),
        ("secret.env", "TOKEN=hunter2\n"),
        ("src.txt", "hello\n"),
    ] {
        let path = ws.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let secret = ws.join("secret.env");
    (ws, secret)
}

/// The config: `kind`, mode auto, the secret masked.
fn config(kind: &str, secret: &Path) -> String {
    format!(
        "kind = \"{kind}\"\n[exec.sandbox]\ndeny_read = [\"{}\"]\n\
         [permissions]\ndefault_mode = \"auto\"\n",
        secret.display()
    )
}

/// The protected files and what each attack writes there.
fn targets(ws: &Path) -> Vec<PathBuf> {
    [
        ".git/hooks/pre-commit",
        ".git/config",
        ".dsh/config.toml",
        ".bashrc",
        ".vscode/tasks.json",
    ]
    .iter()
    .map(|n| ws.join(n))
    .collect()
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

async fn write_file(c: &mut Client, s: &str, path: &Path, content: &str) -> (String, bool) {
    c.tool(
        Some(s),
        "write_file",
        json!({"path": path.display().to_string(), "content": content}),
    )
    .await
}

async fn read_file(c: &mut Client, s: &str, path: &Path) -> (String, bool) {
    c.tool(
        Some(s),
        "read_file",
        json!({"path": path.display().to_string()}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e11_under_the_local_executor_the_file_tools_write_what_the_sandbox_protects() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, secret) = project(dir.path());
    let (_child, mut c) = stdio_daemon(dir.path(), &config("local", &secret), &[]).await;
    let s = c.new_session(&ws).await;
    for target in targets(&ws) {
        let (text, is_error) = write_file(&mut c, &s, &target, HOOK).await;
        assert!(!is_error, "{}: {text}", target.display());
        assert_eq!(read(&target).as_deref(), Some(HOOK), "{}", target.display());
    }
    let config = ws.join(".git/config");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "edit_file",
            json!({"path": config.display().to_string(), "old_string": "#!/bin/sh",
                   "new_string": "[core]\n\tfsmonitor = ./planted"}),
        )
        .await;
    assert!(!is_error, "{text}");
    assert!(read(&config).unwrap().contains("fsmonitor"));
    let (text, is_error) = read_file(&mut c, &s, &secret).await;
    assert!(!is_error && text.contains("hunter2"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e11_under_the_sandbox_the_file_tools_are_held_by_the_same_layout_as_bash() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, secret) = project(dir.path());
    let outside = workspace(dir.path(), "outside");
    std::fs::write(outside.join("x"), "outside\n").unwrap();
    let (_child, mut c) = stdio_daemon(dir.path(), &config("sandbox", &secret), &[]).await;
    let s = c.new_session(&ws).await;

    // Every protected file: refused, saying why and how to ask; nothing changed.
    for target in targets(&ws) {
        let before = read(&target);
        let (text, is_error) = write_file(&mut c, &s, &target, HOOK).await;
        assert!(is_error, "{}: {text}", target.display());
        assert!(
            text.contains("refused: the sandbox keeps it read-only")
                && text.contains("sandbox: \"off\""),
            "{text}"
        );
        assert_eq!(read(&target), before, "{}", target.display());
        // bash in the same sandbox cannot either: one list.
        let (out, _) = c
            .bash(&s, &format!("echo x > {} && echo wrote", target.display()))
            .await;
        assert!(!out.starts_with("wrote"), "{out}");
        assert_eq!(read(&target), before, "{}", target.display());
    }
    let config = ws.join(".git/config");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "edit_file",
            json!({"path": config.display().to_string(), "old_string": "[core]",
                   "new_string": "[core]\n\tfsmonitor = ./planted"}),
        )
        .await;
    assert!(
        is_error && text.contains("git's hooks and config"),
        "{text}"
    );
    assert!(!read(&config).unwrap().contains("fsmonitor"));
    // A protected folder the project lacks is held too (a command would get it empty).
    let zed = ws.join(".zed/settings.json");
    let (text, is_error) = write_file(&mut c, &s, &zed, "{}").await;
    assert!(is_error && text.contains("an editor folder"), "{text}");
    assert!(!ws.join(".zed").exists());

    // The masked file: refused, as commands read it empty.
    let (text, is_error) = read_file(&mut c, &s, &secret).await;
    assert!(
        is_error && text.contains("the sandbox masks this path"),
        "{text}"
    );
    assert!(!text.contains("hunter2"));
    let (out, _) = c.bash(&s, &format!("cat {}", secret.display())).await;
    assert!(!out.contains("hunter2"), "{out}");

    // Links inside the root widen nothing: judged by where they point.
    for (name, to) in [
        ("to-secret", secret.clone()),
        ("to-hook", ws.join(".git/hooks/pre-commit")),
        ("to-outside", outside.join("x")),
    ] {
        std::os::unix::fs::symlink(&to, ws.join(name)).unwrap();
    }
    let (text, is_error) = read_file(&mut c, &s, &ws.join("to-secret")).await;
    assert!(is_error && text.contains("masks"), "{text}");
    let (text, is_error) = write_file(&mut c, &s, &ws.join("to-hook"), HOOK).await;
    assert!(is_error && text.contains("read-only"), "{text}");
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    let (text, is_error) = write_file(&mut c, &s, &ws.join("to-outside"), "changed").await;
    // The policy already refuses it (it judges by the same sandbox roots); the
    // executor's own check stands behind it.
    assert!(
        is_error && text.contains("outside the sandbox's writable roots"),
        "{text}"
    );
    assert_eq!(read(&outside.join("x")).as_deref(), Some("outside\n"));
    // Reading answers as a command would: this outside directory is under the host's
    // /tmp, which the sandbox replaces with its own; the read-only rest reads.
    let (text, is_error) = read_file(&mut c, &s, &ws.join("to-outside")).await;
    assert!(is_error && text.contains("private /tmp"), "{text}");
    let (out, _) = c
        .bash(&s, &format!("cat {}", outside.join("x").display()))
        .await;
    assert!(!out.contains("outside\n"), "{out}");
    let (text, is_error) = read_file(&mut c, &s, Path::new("/etc/passwd")).await;
    assert!(!is_error && text.contains("root:"), "{text}");

    // What the sandbox allows still works: the project's own files, atomically.
    let src = ws.join("src.txt");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "edit_file",
            json!({"path": src.display().to_string(), "old_string": "hello",
                   "new_string": "bye"}),
        )
        .await;
    assert!(!is_error, "{text}");
    assert_eq!(read(&src).as_deref(), Some("bye\n"));
    let (text, is_error) = write_file(&mut c, &s, &ws.join("new.txt"), "n").await;
    assert_eq!(
        (text, is_error),
        (
            format!("Created {} (1 bytes)", ws.join("new.txt").display()),
            false
        )
    );
    assert_eq!(read(&ws.join("new.txt")).as_deref(), Some("n"));
    // Its private /tmp is no file of the host's.
    let (text, is_error) = read_file(&mut c, &s, Path::new("/tmp/x")).await;
    assert!(is_error && text.contains("private /tmp"), "{text}");
}

/// A daemon under the ssh executor (the helper required) whose `path_map` sends `ws`
/// to `remote`, `ssh_extra` added to `[exec.ssh]` and `extra` after; a session in
/// `ws` whose first read of `f.txt` answered `remote`'s "remote side".
async fn mapped_ssh(
    dir: &Path,
    sshd: &Sshd,
    ws: &Path,
    remote: &Path,
    ssh_extra: &str,
    extra: &str,
) -> (tokio::process::Child, Client, String) {
    let config = format!(
        "kind = \"ssh\"\n[permissions]\ndefault_mode = \"auto\"\n{}{ssh_extra}\
         [[exec.ssh.path_map]]\nlocal = \"{}\"\nremote = \"{}\"\n{extra}",
        sshd.config_toml(HelperMode::Required),
        ws.display(),
        remote.display()
    );
    let (child, mut c) = stdio_daemon(dir, &config, &[]).await;
    let s = c.new_session(ws).await;
    let (text, is_error) = c
        .tool(Some(&s), "read_file", json!({"path": "f.txt"}))
        .await;
    assert_eq!((text.as_str(), is_error), ("     1\tremote side\n", false));
    (child, c, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e11_under_ssh_the_file_tools_read_and_write_the_mapped_side() {
    let dir = tempfile::tempdir().unwrap();
    let sshd = Sshd::start();
    let ws = workspace(dir.path(), "ws");
    let remote = workspace(dir.path(), "remote-ws");
    std::fs::write(ws.join("f.txt"), "local side\n").unwrap();
    std::fs::write(remote.join("f.txt"), "remote side\n").unwrap();
    let (_child, mut c, s) = mapped_ssh(dir.path(), &sshd, &ws, &remote, "", "").await;
    let (text, is_error) = c
        .tool(
            Some(&s),
            "edit_file",
            json!({"path": "f.txt", "old_string": "remote", "new_string": "edited"}),
        )
        .await;
    assert!(!is_error, "{text}");
    let (text, is_error) = c
        .tool(
            Some(&s),
            "write_file",
            json!({"path": "new.txt", "content": "made remotely\n"}),
        )
        .await;
    assert_eq!(
        (text.as_str(), is_error),
        ("Created new.txt (14 bytes)", false)
    );
    assert_eq!(
        read(&remote.join("f.txt")).as_deref(),
        Some("edited side\n")
    );
    assert_eq!(
        read(&remote.join("new.txt")).as_deref(),
        Some("made remotely\n")
    );
    // The daemon's own disk at the unmapped path is untouched.
    assert_eq!(read(&ws.join("f.txt")).as_deref(), Some("local side\n"));
    assert!(!ws.join("new.txt").exists());
    // A refusal on the host comes back as the host's words, naming the mapped path.
    let (text, is_error) = c.tool(Some(&s), "read_file", json!({"path": "."})).await;
    assert_eq!(
        (text, is_error),
        (
            format!(
                "Error: {} is a directory; list it with bash (ls)",
                remote.display()
            ),
            true
        )
    );
    // And the commands see what the file tools wrote.
    let (out, _) = c.bash(&s, "cat new.txt").await;
    assert_eq!(out, "made remotely\n");
}

/// Issue 39, under the ssh executor whose helper sandboxes commands on the host: a
/// read's audit line names the entry of the host's containment that allowed it (the
/// helper answers it with the text, from the check the read acted on), a refused
/// one's the entry that refused, and the daemon's `_dsh/policy/explain` asks the
/// helper, at the mapped path, instead of answering nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e11_issue_39_under_ssh_the_audit_line_and_explain_name_the_hosts_containment() {
    let dir = tempfile::tempdir().unwrap();
    let sshd = Sshd::start();
    let ws = workspace(dir.path(), "ws");
    let remote = workspace(dir.path(), "remote-ws");
    std::fs::write(remote.join("f.txt"), "remote side\n").unwrap();
    let secret = remote.join("secret.env");
    std::fs::write(&secret, "TOKEN=hunter2\n").unwrap();
    let masks = format!("[exec.sandbox]\ndeny_read = [\"{}\"]\n", secret.display());
    let (_child, mut c, s) =
        mapped_ssh(dir.path(), &sshd, &ws, &remote, "sandbox = true\n", &masks).await;
    let (text, is_error) = c
        .tool(Some(&s), "read_file", json!({"path": "secret.env"}))
        .await;
    assert!(
        is_error && text.contains("masks") && !text.contains("hunter2"),
        "{text}"
    );
    let lines = common::cli::audit_lines(&dir.path().join("state"));
    let reads: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["tool"] == "read_file").collect();
    assert_eq!(reads.len(), 2, "{lines:?}");
    assert_eq!(
        reads[0]["containment"],
        json!({"by": "writable_root", "root": remote})
    );
    let masked = json!({"by": "masked", "entry": secret, "masked_by": "deny_read"});
    assert_eq!(reads[1]["containment"], masked);
    for (tool, asked, want) in [
        ("read_file", "secret.env", masked.clone()),
        (
            "write_file",
            "new.rs",
            json!({"by": "writable_root", "root": remote}),
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
    }
    assert!(!remote.join("new.rs").exists(), "explain writes nothing");
}

/// E13: the text of a command that merely fails or times out is the same whichever
/// executor ran it, and the sandbox's own /tmp is a working directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e13_a_plain_failure_and_a_timeout_read_the_same_under_the_sandbox_and_tmp_works() {
    let mut texts = Vec::new();
    for kind in ["local", "sandbox"] {
        let dir = tempfile::tempdir().unwrap();
        let ws = workspace(dir.path(), "ws");
        let (_child, mut c) = stdio_daemon(
            dir.path(),
            &format!("kind = \"{kind}\"\n[permissions]\ndefault_mode = \"auto\"\n"),
            &[],
        )
        .await;
        let s = c.new_session(&ws).await;
        let exit = c.bash(&s, "echo failing; exit 3").await;
        let timeout = c
            .tool(
                Some(&s),
                "bash",
                json!({"command": "sleep 5", "description": "d", "timeoutMs": 100}),
            )
            .await;
        let tmp = c
            .tool(
                Some(&s),
                "bash",
                json!({"command": "pwd", "description": "d", "workdir": "/tmp"}),
            )
            .await;
        texts.push((kind, exit, timeout, tmp));
    }
    let (_, local_exit, local_timeout, local_tmp) = &texts[0];
    let (_, exit, timeout, tmp) = &texts[1];
    assert_eq!(local_exit, &("failing\n[exit code: 3]".to_string(), false));
    assert_eq!(exit, local_exit);
    assert_eq!(timeout, local_timeout);
    assert_eq!(tmp, local_tmp);
    assert_eq!(tmp, &("/tmp\n".to_string(), false));
}

/// An editor offering `fs` with unsaved buffers for `ws`'s files (the masked secret, a
/// link to it, the project's `src.txt`), on a daemon of `kind`: (daemon, client, session).
async fn with_the_editors_buffers(
    dir: &Path,
    kind: &str,
) -> (tokio::process::Child, Client, String, PathBuf, PathBuf) {
    let (ws, secret) = project(dir);
    std::os::unix::fs::symlink(&secret, ws.join("to-secret")).unwrap();
    let config = common::daemon::write_config(dir, &config(kind, &secret));
    let (child, mut c) = common::spawn_client(
        common::dsh()
            .args(["serve", "--stdio", "--state-dir"])
            .arg(dir.join("state"))
            .arg("--config")
            .arg(config),
    );
    c.initialize_with_fs().await;
    let buffers = c.buffers.as_mut().unwrap();
    for (name, text) in [
        ("secret.env", "TOKEN=from-the-buffer\n"),
        ("to-secret", "TOKEN=from-the-buffer\n"),
        ("src.txt", "unsaved buffer\n"),
    ] {
        buffers.insert(ws.join(name).display().to_string(), text.into());
    }
    let s = c.new_session(&ws).await;
    (child, c, s, ws, secret)
}

/// The paths the editor was asked about by `method` (`fs/read_text_file`, ...).
fn asked(c: &Client, method: &str) -> Vec<String> {
    c.fs_requests
        .iter()
        .filter(|(m, _)| m == method)
        .map(|(_, p)| p["path"].as_str().unwrap().to_string())
        .collect()
}

/// Issue 39's follow-up, the control: under the local executor, with an editor that
/// offers `fs`, the file tools read a `deny_read` file (and a link to it) from the
/// editor and write a repository's hook through it: nothing stands between the model
/// and what the editor can reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e11_issue_39_under_the_local_executor_the_editors_fs_reads_and_writes_what_the_sandbox_protects()
 {
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut c, s, ws, secret) = with_the_editors_buffers(dir.path(), "local").await;
    for path in [secret.clone(), ws.join("to-secret")] {
        let (text, is_error) = read_file(&mut c, &s, &path).await;
        assert!(!is_error && text.contains("from-the-buffer"), "{text}");
    }
    let hook = ws.join(".git/hooks/pre-commit");
    let (text, is_error) = write_file(&mut c, &s, &hook, HOOK).await;
    assert!(!is_error, "{text}");
    // (The write read the hook's old text through the editor first, for its diff.)
    assert_eq!(
        asked(&c, "fs/read_text_file"),
        [
            secret.display().to_string(),
            ws.join("to-secret").display().to_string(),
            hook.display().to_string()
        ]
    );
    assert_eq!(
        asked(&c, "fs/write_text_file"),
        [hook.display().to_string()]
    );
}

/// Issue 39's follow-up: under the sandbox, the editor's `fs` stands in for the disk
/// only after the executor's own check allowed the path. The masked file, a link inside
/// the root to it, and a protected hook are refused as without an editor, and the
/// editor is never asked about them; an allowed file is read from the editor's unsaved
/// buffer, and an allowed write goes to the editor (the disk untouched).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e11_issue_39_under_the_sandbox_the_editors_fs_is_asked_only_for_what_the_layout_allows() {
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut c, s, ws, secret) = with_the_editors_buffers(dir.path(), "sandbox").await;
    for path in [secret.clone(), ws.join("to-secret")] {
        let (text, is_error) = read_file(&mut c, &s, &path).await;
        assert!(
            is_error && text.contains("the sandbox masks this path"),
            "{text}"
        );
        assert!(!text.contains("from-the-buffer"), "{text}");
    }
    let hook = ws.join(".git/hooks/pre-commit");
    let (text, is_error) = write_file(&mut c, &s, &hook, HOOK).await;
    assert!(
        is_error && text.contains("refused: the sandbox keeps it read-only"),
        "{text}"
    );
    assert!(!hook.exists());
    // The hook is readable in the sandbox (read-only, not masked): the write read its
    // old text through the editor for its diff, and was refused before writing.
    assert_eq!(asked(&c, "fs/read_text_file"), [hook.display().to_string()]);
    assert!(asked(&c, "fs/write_text_file").is_empty());

    // What the layout allows: the editor's buffer is read, and a write goes to it.
    let src = ws.join("src.txt");
    let (text, is_error) = read_file(&mut c, &s, &src).await;
    assert_eq!(
        (text.as_str(), is_error),
        ("     1\tunsaved buffer\n", false)
    );
    let new = ws.join("new.txt");
    let (text, is_error) = write_file(&mut c, &s, &new, "n").await;
    assert!(!is_error, "{text}");
    assert_eq!(c.buffers.as_ref().unwrap()[&new.display().to_string()], "n");
    assert!(!new.exists(), "the editor writes it, not dsh");
    assert_eq!(read(&src).as_deref(), Some("hello\n"));
    assert_eq!(
        asked(&c, "fs/read_text_file"),
        [hook, src, new.clone()].map(|p| p.display().to_string())
    );
    assert_eq!(asked(&c, "fs/write_text_file"), [new.display().to_string()]);
}
