//! The escape suite of issue 27 (E6 no privilege, E8 the seccomp floor, E9 secrets
//! and protected paths), through a real sandbox executor and real bwrap. Each
//! attack is first run by the local executor, where it works (the proof that the
//! test can fail), then in the sandbox, where it must not. Nothing here changes the
//! machine: the attacks that succeed locally only touch the test's own directories.
//! E7 (no way back to the daemon) needs a daemon: `sandbox_no_way_back.rs`.

use crate::common;

use common::*;
use dsh::config::{ExecConfig, ExecutorKind};
use dsh::exec::{BashExecutor, ExecError, ExecRequest, LocalExecutor, SandboxExecutor};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// The attacks' interpreter: Debian's, never a version manager's shim (which may
/// want to write to its own directory).
pub const PYTHON: &str = "/usr/bin/python3";

/// A directory every sandbox shows as it is on the host: not under /tmp (the sandbox's
/// /tmp is private, which would hide a test directory there for reasons other than the
/// defence under test) nor /run/user (masked). The target's tmp directory, unless the
/// checkout itself lives under /tmp (a `git clone` there, issue 42): then /var/tmp. A
/// test that can have neither fails saying what it needs, never for another reason.
pub fn visible_dir() -> tempfile::TempDir {
    let hidden = |dir: &Path| {
        let real = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        ["/tmp", "/run/user", "/dev"]
            .iter()
            .any(|private| real.starts_with(private))
    };
    let candidates = [
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        PathBuf::from("/var/tmp"),
    ];
    for base in &candidates {
        if base.is_dir()
            && !hidden(base)
            && let Ok(dir) = tempfile::Builder::new()
                .prefix("dsh-test-")
                .tempdir_in(base)
        {
            return dir;
        }
    }
    panic!(
        "this test needs a writable directory that the sandbox shows as on the host \
         (outside /tmp and /run/user); none of {candidates:?} is one"
    );
}

fn config(state: &Path, kind: ExecutorKind) -> ExecConfig {
    let mut cfg = test_config(state);
    cfg.kind = kind;
    cfg
}

pub async fn run_in(
    exec: &dyn BashExecutor,
    command: &str,
    root: &Path,
) -> Result<String, ExecError> {
    let out = exec
        .run(
            exec.resolve(ExecRequest {
                command: command.to_string(),
                workdir: Some(root.to_path_buf()),
                writable_roots: vec![root.to_path_buf()],
                ..ExecRequest::default()
            }),
            CancellationToken::new(),
        )
        .await?;
    Ok(format!("{}{}", out.stdout.text, out.stderr.text))
}

/// The same command, locally and in the sandbox, each in a fresh copy of the
/// directory `prepare` makes.
async fn both(
    command: &str,
    tweak: impl Fn(&mut ExecConfig),
    prepare: impl Fn(&Path),
) -> (String, String) {
    let state = tempfile::tempdir().unwrap();
    let mut cfg = config(state.path(), ExecutorKind::Local);
    tweak(&mut cfg);
    let local = LocalExecutor::new(&cfg).unwrap();
    cfg.kind = ExecutorKind::Sandbox;
    let sandbox = SandboxExecutor::new(&cfg, &[]).unwrap();
    let mut outs = Vec::new();
    for exec in [&local as &dyn BashExecutor, &sandbox] {
        let dir = visible_dir();
        let root = dir.path().canonicalize().unwrap();
        prepare(&root);
        outs.push(run_in(exec, command, &root).await.unwrap());
        exec.shutdown().await;
    }
    let sandbox_out = outs.pop().unwrap();
    (outs.pop().unwrap(), sandbox_out)
}

/// A sandbox executor and a root for its commands outside /tmp (with the state
/// and root directories, which must outlive it).
fn sandbox_in_a_root() -> (
    tempfile::TempDir,
    tempfile::TempDir,
    PathBuf,
    SandboxExecutor,
) {
    let state = tempfile::tempdir().unwrap();
    let dir = visible_dir();
    let root = dir.path().canonicalize().unwrap();
    let sandbox = SandboxExecutor::new(&config(state.path(), ExecutorKind::Sandbox), &[]).unwrap();
    (state, dir, root, sandbox)
}

/// Runs `attack` under the local executor in a fresh directory `prepare` made, and
/// returns that directory (with the guard that keeps it) and the output: the proof
/// that the attack works without the sandbox.
async fn locally(attack: &str, prepare: impl Fn(&Path)) -> (tempfile::TempDir, PathBuf, String) {
    let dir = visible_dir();
    let root = dir.path().canonicalize().unwrap();
    prepare(&root);
    let state = tempfile::tempdir().unwrap();
    let local = LocalExecutor::new(&config(state.path(), ExecutorKind::Local)).unwrap();
    let out = run_in(&local, attack, &root).await.unwrap();
    local.shutdown().await;
    (dir, root, out)
}

fn am_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e6_no_capability_and_no_new_privs_inside_as_root_or_not() {
    let status = "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status";
    let (local, sandbox) = both(status, |_| {}, |_| {}).await;
    if am_root() {
        assert!(
            !local.contains("CapEff:\t0000000000000000"),
            "root keeps capabilities locally: {local}"
        );
    }
    assert!(sandbox.contains("CapEff:\t0000000000000000"), "{sandbox}");
    assert!(sandbox.contains("NoNewPrivs:\t1"), "{sandbox}");
    assert!(sandbox.contains("Seccomp:\t2"), "{sandbox}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e6_a_remount_and_a_nested_user_namespace_are_refused() {
    // Not run locally: a remount that worked would change this machine.
    let (_state, _dir, root, sandbox) = sandbox_in_a_root();
    let out = run_in(
        &sandbox,
        "mount -o remount,bind,rw / && echo REMOUNTED; touch /usr/dsh-escape 2>/dev/null && echo WROTE; \
         unshare -Ur true && echo NESTED; echo done",
        &root,
    )
    .await
    .unwrap();
    assert!(out.contains("done\n"), "{out}");
    assert!(
        !out.contains("REMOUNTED") && !out.contains("WROTE") && !out.contains("NESTED"),
        "{out}"
    );
    assert!(!Path::new("/usr/dsh-escape").exists());
    sandbox.shutdown().await;
}

/// Each probe prints `name=errno` (0: the call worked).
#[cfg(target_arch = "x86_64")]
const SYSCALL_PROBES: &str = r#"
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    return 0 if libc.syscall(nr, *args) >= 0 else ctypes.get_errno()
def made(make):
    try:
        make().close()
        return 0
    except OSError as e:
        return e.errno
def pair(kind):
    return made(lambda: socket.socketpair(socket.AF_UNIX, kind)[0])
out = {}
out["unix"] = made(lambda: socket.socket(socket.AF_UNIX))
out["pair_dgram"] = pair(socket.SOCK_DGRAM)
out["pair_raw"] = pair(socket.SOCK_RAW)
out["pair_stream"] = pair(socket.SOCK_STREAM)
out["vsock"] = made(lambda: socket.socket(40, socket.SOCK_STREAM))
params = ctypes.create_string_buffer(120)
out["io_uring"] = sc(425, 1, params)
out["ptrace"] = sc(101, 0, 0, 0, 0)
out["process_vm_readv"] = sc(310, 1, 0, 0, 0, 0, 0)
out["keyctl"] = sc(250, 0, -3, 0, 0, 0)
out["userfaultfd"] = sc(323, 0)
out["x32_getpid"] = sc(0x40000000 | 39)
print(" ".join(f"{k}={v}" for k, v in sorted(out.items())))
"#;

#[cfg(target_arch = "x86_64")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e8_the_seccomp_floor_refuses_what_reaches_past_the_walls() {
    let command = format!("{PYTHON} -c '{SYSCALL_PROBES}'");
    let field = |out: &str, name: &str| -> i32 {
        out.split_whitespace()
            .find_map(|f| f.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {out}"))
            .trim()
            .parse()
            .unwrap()
    };
    let (local, sandbox) = both(&command, |_| {}, |_| {}).await;
    // Locally the sockets and ptrace work: the probes can see a success.
    for name in ["unix", "pair_dgram", "pair_raw", "pair_stream", "ptrace"] {
        assert_eq!(field(&local, name), 0, "{name} locally: {local}");
    }
    for name in [
        "unix",
        "pair_dgram",
        "pair_raw",
        "vsock",
        "io_uring",
        "ptrace",
        "process_vm_readv",
        "keyctl",
        "userfaultfd",
        "x32_getpid",
    ] {
        assert_eq!(
            field(&sandbox, name),
            libc::EPERM,
            "{name} in the sandbox: {sandbox}"
        );
    }
    assert_eq!(
        field(&sandbox, "pair_stream"),
        0,
        "a pipe-like pair stays: {sandbox}"
    );
    // allow_unix_sockets lifts the Unix part only.
    let (_, lifted) = both(&command, |c| c.sandbox.allow_unix_sockets = true, |_| {}).await;
    assert_eq!(field(&lifted, "unix"), 0, "{lifted}");
    assert_eq!(field(&lifted, "pair_dgram"), 0, "{lifted}");
    assert_eq!(field(&lifted, "io_uring"), libc::EPERM, "{lifted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_deny_read_paths_read_as_empty_even_when_they_appear_later() {
    let home = visible_dir();
    let home = home.path().canonicalize().unwrap();
    let secret = |p: &str| home.join(p);
    std::fs::create_dir_all(secret(".ssh")).unwrap();
    std::fs::write(secret(".ssh/id_ed25519"), "PRIVATE-KEY\n").unwrap();
    std::fs::create_dir_all(secret(".aws")).unwrap();
    std::fs::write(secret(".aws/credentials"), "AWS-SECRET\n").unwrap();
    std::fs::write(secret(".netrc"), "NETRC-SECRET\n").unwrap();
    let deny: Vec<PathBuf> = [".ssh", ".aws", ".netrc", ".kube"]
        .iter()
        .map(|p| secret(p))
        .collect();
    let command = format!(
        "cat {h}/.ssh/id_ed25519 {h}/.aws/credentials {h}/.netrc {h}/.kube/config 2>&1; ls -A {h}/.ssh; \
         echo x > {h}/.netrc 2>&1 || echo unwritable",
        h = home.display()
    );
    let tweak = |c: &mut ExecConfig| c.sandbox.deny_read = deny.clone();
    let (local, sandbox) = both(&command, tweak, |_| {}).await;
    assert!(
        local.contains("PRIVATE-KEY") && local.contains("AWS-SECRET"),
        "{local}"
    );
    std::fs::write(secret(".netrc"), "NETRC-SECRET\n").unwrap();
    for leaked in ["PRIVATE-KEY", "AWS-SECRET", "NETRC-SECRET"] {
        assert!(!sandbox.contains(leaked), "{leaked}: {sandbox}");
    }
    assert!(
        !sandbox.lines().any(|l| l == "id_ed25519"),
        "listed: {sandbox}"
    );
    // A masked file reads as empty, not as an error.
    assert!(!sandbox.contains(".netrc: Permission denied"), "{sandbox}");
    assert!(sandbox.contains("unwritable"), "{sandbox}");
    // A path that did not exist when the daemon started is masked once it does.
    std::fs::create_dir_all(secret(".kube")).unwrap();
    std::fs::write(secret(".kube/config"), "KUBE-SECRET\n").unwrap();
    let (local, sandbox) = both(&command, tweak, |_| {}).await;
    assert!(local.contains("KUBE-SECRET"), "{local}");
    assert!(!sandbox.contains("KUBE-SECRET"), "{sandbox}");
}

/// A repository with hooks, a nested one, a worktree-style `.git` file's target and
/// a shell rc file: what a command must not be able to plant code in.
fn project(root: &Path) {
    let git = |dir: &Path| {
        let out = std::process::Command::new("git")
            .args(["init", "-q"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    git(root);
    std::fs::create_dir_all(root.join("vendor/lib")).unwrap();
    git(&root.join("vendor/lib"));
    std::fs::write(root.join(".bashrc"), "# rc\n").unwrap();
    std::fs::create_dir_all(root.join(".vscode")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_git_hooks_and_config_rc_files_and_editor_folders_stay_read_only() {
    let attacks = [
        ("hook", "echo evil > .git/hooks/pre-commit"),
        ("config", "echo '[core] fsmonitor = evil' >> .git/config"),
        (
            "nested-hook",
            "echo evil > vendor/lib/.git/hooks/pre-commit",
        ),
        ("rc", "echo evil >> .bashrc"),
        ("vscode", "echo '{}' > .vscode/tasks.json"),
        ("moved-git", "mv .git .git-away"),
        ("dsh", "mkdir -p .dsh && echo x > .dsh/config.toml"),
    ];
    let command = attacks
        .iter()
        .map(|(name, attack)| {
            format!(
                "if ({attack}) 2>/dev/null; then echo {name}=written; else echo {name}=refused; fi"
            )
        })
        .chain([
            "mkdir -p .git/objects/zz && echo ok > .git/objects/zz/f && echo objects=written"
                .to_string(),
            "echo ok > src.txt && echo source=written".to_string(),
        ])
        .collect::<Vec<_>>()
        .join("; ");
    let (local, sandbox) = both(&command, |_| {}, project).await;
    for (name, _) in attacks {
        assert!(
            local.contains(&format!("{name}=written")),
            "{name} locally: {local}"
        );
    }
    for (name, _) in attacks {
        assert!(
            sandbox.contains(&format!("{name}=refused")),
            "{name} in the sandbox: {sandbox}"
        );
    }
    assert!(
        sandbox.contains("objects=written") && sandbox.contains("source=written"),
        "{sandbox}"
    );
    // allow_git_config lifts the config part only.
    let (_, relaxed) = both(&command, |c| c.sandbox.allow_git_config = true, project).await;
    assert!(
        relaxed.contains("config=written") && relaxed.contains("hook=refused"),
        "{relaxed}"
    );
}

/// E9: a command can write `.git/commondir` (git needs `.git` writable, and a mount
/// cannot hold a missing file), which would send git to a config and hooks the
/// command made; once the command ends, the redirect is renamed away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_a_git_redirect_a_command_made_is_renamed_away_when_it_ends() {
    let plant = "mkdir -p fake/hooks && cp -r .git/objects .git/refs fake/ \
                 && printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = echo evil\\n' \
                 > fake/config && echo \"$PWD/fake\" > .git/commondir && echo planted";
    // Locally it stays, and git follows it.
    let (_local, local_root, out) = locally(plant, project).await;
    assert!(out.contains("planted"), "{out}");
    assert_eq!(
        fsmonitor(&local_root),
        "echo evil",
        "git follows the redirect"
    );
    let (_state, _dir, root, sandbox) = sandbox_in_a_root();
    project(&root);
    let out = run_in(&sandbox, plant, &root).await.unwrap();
    assert!(
        out.contains("planted"),
        "the write itself cannot be refused: {out}"
    );
    assert!(
        !root.join(".git/commondir").exists(),
        "the redirect outlived its command"
    );
    assert!(root.join(".git/commondir.dsh-refused").exists());
    // The repository is the person's again: git reads its own config.
    assert_eq!(fsmonitor(&root), "");
    sandbox.shutdown().await;
}

/// The host's `core.fsmonitor` for git run in `dir` (what a person's `git status`,
/// or an editor's, would start).
fn fsmonitor(dir: &Path) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["config", "--get", "core.fsmonitor"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// E9: a nested repository's directory holds the mounts that guard its `.git`, and a
/// directory holding a mount point can be renamed: moving it aside and copying the
/// `.git` back gives an unguarded one at the same path. Every directory between a
/// root and a guard is pinned, so the rename itself is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_the_directories_leading_to_a_guarded_git_cannot_be_renamed_away() {
    let attack = "mv vendor/lib vendor/lib2; mv vendor vendor2; \
                  for d in vendor2/lib2 vendor/lib2 vendor2/lib; do \
                    [ -d $d ] && mkdir -p vendor/lib && cp -a $d/.git vendor/lib/ 2>/dev/null; done; \
                  echo hook > vendor/lib/.git/hooks/pre-commit && echo HOOKED";
    let (local, sandbox) = both(attack, |_| {}, project).await;
    assert!(
        local.contains("HOOKED"),
        "the attack works locally: {local}"
    );
    assert!(!sandbox.contains("HOOKED"), "{sandbox}");
    assert!(sandbox.contains("Device or resource busy"), "{sandbox}");
}

/// E9: a repository's config may include another file (`[include] path`, a team's
/// shared settings kept in the work tree); git reads `core.fsmonitor` from it as
/// from the config. The included file is guarded like the config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_a_file_the_git_config_includes_is_as_read_only_as_the_config() {
    let attack = "printf '[core]\\n\\tfsmonitor = echo evil\\n' >> team.gitconfig && echo written";
    let shared = |root: &Path| {
        project(root);
        std::fs::write(root.join("team.gitconfig"), "[user]\n\tname = team\n").unwrap();
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["config", "include.path", "../team.gitconfig"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    let (_local, local_root, out) = locally(attack, shared).await;
    assert!(out.contains("written"), "{out}");
    assert_eq!(fsmonitor(&local_root), "echo evil", "locally git reads it");
    let (_state, _dir, root, sandbox) = sandbox_in_a_root();
    shared(&root);
    let out = run_in(&sandbox, attack, &root).await.unwrap();
    assert!(!out.contains("written"), "{out}");
    assert_eq!(fsmonitor(&root), "");
    sandbox.shutdown().await;
}

/// E9: git takes the nearest `.git`, so a repository a command makes inside a project
/// runs its own config (and hooks) for whoever uses git there next: an editor's
/// `git status` starts its `core.fsmonitor`. When the command ends, a `.git` it made
/// is renamed away and its output says so; `allow_git_config` allows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_a_repository_a_command_made_is_renamed_away_when_it_ends() {
    let plant = "git init -q sub && git -C sub config core.fsmonitor 'echo evil' && echo planted";
    let (_local, local_root, out) = locally(plant, project).await;
    assert!(out.contains("planted"), "{out}");
    assert_eq!(
        fsmonitor(&local_root.join("sub")),
        "echo evil",
        "locally git follows it"
    );

    let (_state, _dir, root, sandbox) = sandbox_in_a_root();
    project(&root);
    let out = run_in(&sandbox, plant, &root).await.unwrap();
    assert!(out.contains("planted"), "git works inside: {out}");
    assert!(
        out.contains(&format!(
            "dsh: the sandbox renamed {}",
            root.join("sub/.git").display()
        )),
        "the output says what was refused: {out}"
    );
    assert!(root.join("sub/.git.dsh-refused").is_dir());
    assert_eq!(
        fsmonitor(&root.join("sub")),
        "",
        "the project's own repository again"
    );
    // Repositories that were there stay; a second command that makes none is told nothing.
    let out = run_in(&sandbox, "git -C vendor/lib status --short; echo ok", &root)
        .await
        .unwrap();
    assert!(!out.contains("dsh:"), "{out}");
    assert!(root.join("vendor/lib/.git").is_dir());
    sandbox.shutdown().await;

    let state = tempfile::tempdir().unwrap();
    let mut cfg = config(state.path(), ExecutorKind::Sandbox);
    cfg.sandbox.allow_git_config = true;
    let relaxed = SandboxExecutor::new(&cfg, &[]).unwrap();
    let dir = visible_dir();
    let root = dir.path().canonicalize().unwrap();
    project(&root);
    let out = run_in(&relaxed, plant, &root).await.unwrap();
    assert!(out.contains("planted") && !out.contains("dsh:"), "{out}");
    assert!(root.join("sub/.git").is_dir(), "allow_git_config allows it");
    relaxed.shutdown().await;
}

/// E9: a protected name that is a symlink is guarded where it leads, but the link
/// itself is no mount point: a command can replace it with a folder of its own
/// (an editor's tasks run when the project opens). The link is put back when the
/// command ends, and what replaced it renamed away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_a_protected_symlink_a_command_replaced_is_put_back_when_it_ends() {
    let swap = "rm .vscode && mkdir .vscode && echo '{}' > .vscode/tasks.json && echo swapped";
    let linked = |root: &Path| {
        std::fs::create_dir(root.join("settings")).unwrap();
        std::os::unix::fs::symlink("settings", root.join(".vscode")).unwrap();
    };
    let (local, _) = both(swap, |_| {}, linked).await;
    assert!(local.contains("swapped"), "{local}");
    let (_state, _dir, root, sandbox) = sandbox_in_a_root();
    linked(&root);
    let out = run_in(&sandbox, swap, &root).await.unwrap();
    assert!(
        out.contains("swapped"),
        "the link itself is no mount: {out}"
    );
    assert_eq!(
        std::fs::read_link(root.join(".vscode")).unwrap(),
        PathBuf::from("settings"),
        "the link is back"
    );
    assert!(root.join(".vscode.dsh-refused/tasks.json").is_file());
    assert!(out.contains("dsh: the sandbox renamed"), "{out}");
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_missing_protected_entries_are_held_while_a_command_runs_and_leave_nothing() {
    let (_state, _dir, root, sandbox) = sandbox_in_a_root();
    let out = run_in(
        &sandbox,
        "mkdir -p .dsh 2>/dev/null; echo x > .dsh/config.toml 2>/dev/null || echo dsh=refused; \
         mkdir -p .zed/x 2>/dev/null || echo zed=refused; \
         mkdir -p .vscode/x 2>/dev/null || echo vscode=refused; echo ok > kept",
        &root,
    )
    .await
    .unwrap();
    for name in ["dsh", "zed", "vscode"] {
        assert!(out.contains(&format!("{name}=refused")), "{name}: {out}");
    }
    // The placeholders bwrap made are gone with the sandbox; the command's own file stays.
    let left: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["kept"], "{left:?}");
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_a_writable_root_reached_through_a_symlink_is_refused_not_followed() {
    let state = tempfile::tempdir().unwrap();
    let dir = visible_dir();
    let real = dir.path().canonicalize().unwrap().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = real.with_file_name("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let sandbox = SandboxExecutor::new(&config(state.path(), ExecutorKind::Sandbox), &[]).unwrap();
    match run_in(&sandbox, "echo x > f", &link).await {
        Err(ExecError::Sandbox(why)) => assert!(why.contains("symlink"), "{why}"),
        other => panic!("a symlinked root ran: {other:?}"),
    }
    assert!(!real.join("f").exists());
    sandbox.shutdown().await;
}

/// `nobody`'s uid and gid.
pub const NOBODY: u32 = 65534;

/// `dsh serve --stdio` with `config` in `dir` (its home; no runtime directory),
/// initialized, with a workspace `dir/ws` for its sessions; run as `nobody` when
/// `as_nobody` (then `dir` and the workspace are given to `nobody`). Over stdio:
/// the daemon would refuse a socket connection from another user.
pub async fn daemon_as_nobody(
    dir: &Path,
    config: &str,
    as_nobody: bool,
) -> (PathBuf, tokio::process::Child, common::client::Client) {
    let ws = dir.join("ws");
    std::fs::create_dir(&ws).unwrap();
    if as_nobody {
        for path in [dir, ws.as_path()] {
            nix::unistd::chown(path, Some(NOBODY.into()), Some(NOBODY.into())).unwrap();
        }
    }
    let config = common::daemon::write_config(dir, config);
    let mut cmd = common::dsh();
    cmd.args(["serve", "--stdio", "--state-dir"])
        .arg(dir.join("state"))
        .arg("--config")
        .arg(config)
        .env("HOME", dir)
        .env_remove("XDG_RUNTIME_DIR")
        .current_dir(dir);
    if as_nobody {
        cmd.uid(NOBODY).gid(NOBODY);
    }
    let (daemon, mut client) = common::spawn_client(&mut cmd);
    client.initialize().await;
    (ws, daemon, client)
}

/// The suite's core as an unprivileged user, when the suite itself runs as root (CI):
/// a daemon run as `nobody` gets the same sandbox (a user namespace it may create
/// itself, no capability, the filter). Run as an unprivileged user, the whole suite
/// above already is this case.
#[cfg(target_arch = "x86_64")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e6_e8_the_sandbox_holds_for_an_unprivileged_user_too() {
    if !am_root() {
        eprintln!("skipped: this suite already runs as an unprivileged user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (ws, mut daemon, mut client) =
        daemon_as_nobody(dir.path(), "kind = \"sandbox\"\n", true).await;
    let session = client.new_session(&ws).await;
    client.set_mode(&session, "auto").await;
    let (out, _) = client
        .bash(
            &session,
            &format!(
                "id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; {PYTHON} -c '{SYSCALL_PROBES}'"
            ),
        )
        .await;
    assert!(out.starts_with("65534\n"), "{out}");
    assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
    assert!(
        out.contains("NoNewPrivs:\t1") && out.contains("Seccomp:\t2"),
        "{out}"
    );
    for probe in ["unix=1 ", "io_uring=1 ", "ptrace=1 ", "x32_getpid=1"] {
        assert!(out.contains(probe), "{probe}: {out}");
    }
    drop(client);
    let status = daemon.wait().await.unwrap();
    assert!(status.success(), "{status}");
}

/// Every default `deny_read` path, in a home of the test's (the daemon's `HOME`),
/// read through the daemon: each is readable by a local daemon's command and by
/// none of a sandboxed one's. With `XDG_CONFIG_HOME` and `XDG_DATA_HOME` set
/// elsewhere, an XDG entry is planted both there and at its default (`~/.config`,
/// `~/.local/share`), and neither reads inside (issue 40: `$XDG_CONFIG_HOME/gh`,
/// `git/credentials`, `rclone` were readable).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_each_default_deny_read_path_is_unreadable() {
    e9_default_deny_read_under(false).await;
}

/// [`e9_each_default_deny_read_path_is_unreadable`] with the XDG variables set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_each_default_deny_read_path_is_unreadable_under_xdg_dirs_too() {
    e9_default_deny_read_under(true).await;
}

async fn e9_default_deny_read_under(xdg: bool) {
    let dir = visible_dir();
    let home = dir.path().join("home");
    let xdg_config = dir.path().join("xdg-config");
    let xdg_data = dir.path().join("xdg-data");
    let mut reads = Vec::new();
    // (the entry, the file planted for it, its marker)
    let mut planted: Vec<(String, PathBuf, String)> = Vec::new();
    for entry in dsh::config::DEFAULT_DENY_READ.iter() {
        let mut places = Vec::new();
        if let Some(rest) = entry.strip_prefix("$XDG_CONFIG_HOME/") {
            places.push(home.join(".config").join(rest));
            if xdg {
                places.push(xdg_config.join(rest));
            }
        } else if let Some(rest) = entry.strip_prefix("$XDG_DATA_HOME/") {
            places.push(home.join(".local/share").join(rest));
            if xdg {
                places.push(xdg_data.join(rest));
            }
        } else {
            places.push(home.join(entry.trim_start_matches("~/")));
        }
        // The credentials that are files; the rest are directories holding one.
        let is_file = [
            ".json",
            ".netrc",
            ".git-credentials",
            ".npmrc",
            ".pypirc",
            ".toml",
            "credentials",
            ".xml",
            ".pgpass",
            ".vault-token",
            ".terraformrc",
        ]
        .iter()
        .any(|end| entry.ends_with(end));
        for path in places {
            let file = if is_file {
                path.clone()
            } else {
                path.join("secret")
            };
            let marker = format!("SECRET-{}", planted.len());
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, format!("{marker}\n")).unwrap();
            reads.push(format!("cat {} 2>/dev/null", file.display()));
            planted.push((entry.to_string(), file, marker));
        }
    }
    // Markers are matched as whole lines: SECRET-1 is no part of SECRET-10.
    let command = reads.join("; ");
    for (kind, readable) in [("local", true), ("sandbox", false)] {
        let sub = dir.path().join(kind);
        // The socket in a runtime directory, which the sandbox masks.
        let runtime = sub.join("run");
        std::fs::create_dir_all(&runtime).unwrap();
        let daemon = common::daemon::SocketDaemon::start_with(
            &sub,
            &format!("kind = \"{kind}\"\n"),
            |cmd| {
                cmd.env("HOME", &home).env("XDG_RUNTIME_DIR", &runtime);
                if xdg {
                    cmd.env("XDG_CONFIG_HOME", &xdg_config)
                        .env("XDG_DATA_HOME", &xdg_data);
                } else {
                    cmd.env_remove("XDG_CONFIG_HOME")
                        .env_remove("XDG_DATA_HOME");
                }
            },
        )
        .await;
        let mut client = daemon.connect().await;
        let ws = common::daemon::workspace(&sub, "ws");
        let session = client.new_session(&ws).await;
        client.set_mode(&session, "auto").await;
        let (out, _) = client.bash(&session, &command).await;
        for (entry, file, marker) in &planted {
            let seen = out.lines().any(|l| l.trim() == marker);
            assert_eq!(
                seen,
                readable,
                "{kind}: {entry} at {} in {out}",
                file.display()
            );
        }
        drop(client);
        daemon.stop().await;
    }
}
