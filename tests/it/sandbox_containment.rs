//! Containment that fails closed (issue 40), through real executors and real bwrap:
//! E4 the environment by allowlist, E10 this machine by any of its addresses. Each
//! attack first works under the local executor (the proof the test can fail), then
//! is held in the sandbox.

use crate::common;
use crate::sandbox_escape::{run_in, visible_dir};

use dsh::config::ExecConfig;
use dsh::exec::{BashExecutor, LocalExecutor, SandboxExecutor};
use std::ffi::OsString;

/// The daemon's environment in these tests: the allowlist's names, credentials the
/// old denylist missed, a name nobody thought of, and two the config passes.
fn daemon_env() -> Vec<(OsString, OsString)> {
    [
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", "/home/someone".into()),
        ("LANG", "C.UTF-8".into()),
        ("LC_TIME", "C".into()),
        ("TZ", "UTC".into()),
        ("PGPASSWORD", "pg-secret".into()),
        ("MYSQL_PWD", "mysql-secret".into()),
        ("SMTP_PASSWORD", "smtp-secret".into()),
        ("GITHUB_PAT", "pat-secret".into()),
        ("FOO_BAR", "foo-value".into()),
        ("PASSED_ON", "passed-value".into()),
        ("NPM_TOKEN", "npm-value".into()),
        ("OVERRIDDEN", "daemon-value".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v.into()))
    .collect()
}

fn lines_of(out: &str) -> Vec<&str> {
    out.lines().collect()
}

/// E4: a sandboxed command gets only the allowlist (`PATH`, `HOME`, `LANG`, `LC_*`,
/// `TZ`, ...), what `[exec] env_pass` names (even a name that looks like a
/// credential: the person chose it) and `env_set`; never `PGPASSWORD`,
/// `MYSQL_PWD`, `SMTP_PASSWORD`, `GITHUB_PAT` nor a `FOO_BAR` nobody named. The
/// local executor, with the same environment, shows the attack: `FOO_BAR` reaches
/// its command (only the denylist applies there), the credentials do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e4_a_sandboxed_command_gets_the_allowlist_and_what_the_config_names() {
    let state = tempfile::tempdir().unwrap();
    let mut cfg: ExecConfig = common::test_config(state.path());
    cfg.env_pass = vec!["PASSED_ON".into(), "NPM_TOKEN".into(), "NOT_SET".into()];
    cfg.env_set = [("SET_HERE", "set-value"), ("OVERRIDDEN", "config-value")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let dir = visible_dir();
    let root = dir.path().canonicalize().unwrap();
    let command = "env | sort";

    let local = LocalExecutor::with_env(&cfg, daemon_env()).unwrap();
    let out = run_in(&local, command, &root).await.unwrap();
    local.shutdown().await;
    let seen = lines_of(&out);
    assert!(seen.contains(&"FOO_BAR=foo-value"), "local:\n{out}");
    for secret in ["pg-secret", "mysql-secret", "smtp-secret", "pat-secret"] {
        assert!(!out.contains(secret), "local leaked {secret}:\n{out}");
    }

    let sandbox = SandboxExecutor::with_env(&cfg, &[], daemon_env()).unwrap();
    let out = run_in(&sandbox, command, &root).await.unwrap();
    sandbox.shutdown().await;
    let seen = lines_of(&out);
    for secret in [
        "pg-secret",
        "mysql-secret",
        "smtp-secret",
        "pat-secret",
        "foo-value",
        "daemon-value",
    ] {
        assert!(!out.contains(secret), "sandbox leaked {secret}:\n{out}");
    }
    for line in [
        "HOME=/home/someone",
        "LANG=C.UTF-8",
        "LC_TIME=C",
        "TZ=UTC",
        "PASSED_ON=passed-value",
        "NPM_TOKEN=npm-value",
        "SET_HERE=set-value",
        "OVERRIDDEN=config-value",
        "TERM=dumb",
    ] {
        assert!(seen.contains(&line), "sandbox lacks {line}:\n{out}");
    }
    assert!(
        !seen.iter().any(|l| l.starts_with("NOT_SET=")),
        "an env_pass name the daemon lacks is not made up:\n{out}"
    );
    // Nothing beyond the allowlist, the config's, dsh's own and what bash sets.
    let expected = [
        "PATH",
        "HOME",
        "LANG",
        "LC_TIME",
        "TZ",
        "PASSED_ON",
        "NPM_TOKEN",
        "SET_HERE",
        "OVERRIDDEN",
        "TERM",
        "NO_COLOR",
        "PAGER",
        "GIT_PAGER",
        "GIT_TERMINAL_PROMPT",
        "DSH_TASK_MARK",
        "PWD",
        "SHLVL",
        "_",
        // The proxy's, set by dsh in proxy mode (the default).
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
    ];
    for line in &seen {
        let name = line.split('=').next().unwrap_or_default();
        assert!(expected.contains(&name), "unexpected {line}:\n{out}");
    }
}

/// An HTTP server on `ip` (an address of this machine) answering `hello from PORT`
/// to each connection, for the test's life.
async fn server_on(ip: std::net::IpAddr) -> u16 {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let body = format!("hello from {port}");
                let _ = conn
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .await;
            });
        }
    });
    port
}

/// This machine's own addresses that are not loopback: its first IPv4 one (the
/// test needs it) and, when it has one, an IPv6 one that needs no scope
/// (link-local does).
fn own_addresses() -> Vec<std::net::IpAddr> {
    let all = dsh::exec::netproxy::local::interface_addresses().expect("getifaddrs");
    let v4 = all
        .iter()
        .find(|ip| ip.is_ipv4() && !ip.is_loopback())
        .copied()
        .expect("this machine has a non-loopback IPv4 address");
    let v6 = all.iter().find(|ip| match ip {
        std::net::IpAddr::V6(v6) => !v6.is_loopback() && (v6.segments()[0] & 0xffc0) != 0xfe80,
        _ => false,
    });
    std::iter::once(v4).chain(v6.copied()).collect()
}

/// E10 (issue 40): with `[exec.sandbox.network] default = "allow"` in mode auto, a
/// service listening on this machine's own interface address (IPv4, and IPv6 when
/// the machine has one) is asked about like `localhost`, through each of the
/// proxy's ways (CONNECT, plain HTTP, SOCKS5 to the address), never let through by
/// the default; a rejected question leaves it unreached. Only a rule naming it
/// (the allow list) lets it through unasked. The local executor reaches the same
/// service directly: the service is there to be reached (the attack's target).
/// Every connection goes to an address of this machine only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_this_machines_own_addresses_are_asked_under_default_allow() {
    let addresses = own_addresses();
    let mut served = Vec::new();
    for ip in &addresses {
        served.push((*ip, server_on(*ip).await, server_on(*ip).await));
    }
    let url = |ip: &std::net::IpAddr, port: u16| match ip {
        std::net::IpAddr::V6(v6) => format!("http://[{v6}]:{port}/"),
        std::net::IpAddr::V4(v4) => format!("http://{v4}:{port}/"),
    };

    let state = tempfile::tempdir().unwrap();
    let local = LocalExecutor::new(&common::test_config(state.path())).unwrap();
    let root = visible_dir();
    for (ip, asked, _) in &served {
        let out = run_in(
            &local,
            &format!("curl -s --noproxy '*' {}", url(ip, *asked)),
            root.path(),
        )
        .await
        .unwrap();
        assert!(out.contains(&format!("hello from {asked}")), "local: {out}");
    }
    local.shutdown().await;

    let allowed: Vec<String> = served
        .iter()
        .map(|(ip, _, open)| match ip {
            std::net::IpAddr::V6(v6) => format!("\"[{v6}]:{open}\""),
            std::net::IpAddr::V4(v4) => format!("\"{v4}:{open}\""),
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let config = format!(
        "kind = \"sandbox\"\n[exec.sandbox.network]\ndefault = \"allow\"\nallow = [{}]\n\
         [permissions]\ndefault_mode = \"auto\"\n",
        allowed.join(", ")
    );
    let (_daemon, mut c) = common::daemon::stdio_daemon(dir.path(), &config, &[]).await;
    let s = c.new_session(&ws).await;
    let ways = [
        ("CONNECT", "curl -s -p"),
        ("plain HTTP", "curl -s"),
        ("SOCKS5", "curl -s --socks5 127.0.0.1:3128"),
    ];
    for (ip, asked, open) in &served {
        for (way, curl) in ways {
            let before = c.permission_requests.len();
            c.permission_answers.push_back("reject_once");
            let (out, _) = c
                .bash(&s, &format!("{curl} {} ; echo curl=$?", url(ip, *asked)))
                .await;
            assert!(
                !out.contains(&format!("hello from {asked}")),
                "{way} to {ip}: reached under default = allow: {out}"
            );
            let questions = &c.permission_requests[before..];
            assert_eq!(questions.len(), 1, "{way} to {ip}: {questions:?} {out}");
            let input = &questions[0]["toolCall"]["rawInput"];
            assert_eq!(
                input["host"].as_str().map(|h| h.trim_matches(['[', ']'])),
                Some(ip.to_string().as_str()),
                "{way}: {input}"
            );
            assert_eq!(input["port"], *asked, "{way}: {input}");
            // Named by a rule, the same address is reached without a question.
            let before = c.permission_requests.len();
            let (out, _) = c.bash(&s, &format!("{curl} {}", url(ip, *open))).await;
            assert!(
                out.contains(&format!("hello from {open}")),
                "{way} to {ip}, allowed by a rule: {out}"
            );
            assert_eq!(c.permission_requests.len(), before, "{way}: asked: {out}");
        }
    }
}

/// A repository whose hooks are husky's (`core.hooksPath = .husky/_`, whose `h`
/// runs `.husky/<hook>`), with pre-commit's, lefthook's and overcommit's files.
fn hook_managed_repository(root: &std::path::Path) {
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    git(&["config", "core.hooksPath", ".husky/_"]);
    std::fs::create_dir_all(root.join(".husky/_")).unwrap();
    std::fs::write(
        root.join(".husky/_/h"),
        "#!/bin/sh\n. \"$(dirname \"$0\")/../$(basename \"$0\")\"\n",
    )
    .unwrap();
    std::fs::write(root.join(".husky/pre-commit"), "npm test\n").unwrap();
    std::fs::write(root.join(".pre-commit-config.yaml"), "repos: []\n").unwrap();
    std::fs::write(root.join("lefthook.yml"), "pre-commit: {}\n").unwrap();
    std::fs::create_dir_all(root.join(".lefthook/pre-commit")).unwrap();
    std::fs::write(root.join(".overcommit.yml"), "PreCommit: {}\n").unwrap();
}

/// What a command plants in the hook managers' files: the next commit runs it.
const PLANT_HOOKS: &str = "for f in .husky/pre-commit .husky/post-checkout .husky/_/h \
     .pre-commit-config.yaml lefthook.yml .lefthook/pre-commit/x.sh .overcommit.yml; do \
     if echo 'touch /tmp/owned' > \"$f\" 2>/dev/null; then echo \"planted $f\"; \
     else echo \"held $f\"; fi; done";

/// E9 (issue 40): the hook managers are protected like `.git/hooks`. With
/// `core.hooksPath = .husky/_` the guarded `_/h` runs `.husky/pre-commit`, so all
/// of `.husky/` is read-only; so are `.pre-commit-config.yaml`, `lefthook.yml`,
/// `.lefthook/` and `.overcommit.yml`. The local executor plants each (the attack).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e9_hook_managers_files_cannot_be_written_from_the_sandbox() {
    let planted = [
        ".husky/pre-commit",
        ".husky/post-checkout",
        ".husky/_/h",
        ".pre-commit-config.yaml",
        "lefthook.yml",
        ".lefthook/pre-commit/x.sh",
        ".overcommit.yml",
    ];
    assert!(planted.iter().all(|f| PLANT_HOOKS.contains(f)));
    let state = tempfile::tempdir().unwrap();
    let local = LocalExecutor::new(&common::test_config(state.path())).unwrap();
    let dir = visible_dir();
    let root = dir.path().canonicalize().unwrap();
    hook_managed_repository(&root);
    let out = run_in(&local, PLANT_HOOKS, &root).await.unwrap();
    local.shutdown().await;
    for file in &planted {
        assert!(out.contains(&format!("planted {file}")), "local: {out}");
    }

    let mut cfg = common::test_config(state.path());
    cfg.kind = dsh::config::ExecutorKind::Sandbox;
    let sandbox = SandboxExecutor::new(&cfg, &[]).unwrap();
    let dir = visible_dir();
    let root = dir.path().canonicalize().unwrap();
    hook_managed_repository(&root);
    let out = run_in(&sandbox, PLANT_HOOKS, &root).await.unwrap();
    sandbox.shutdown().await;
    for file in &planted {
        assert!(out.contains(&format!("held {file}")), "sandbox: {out}");
        assert!(
            !std::fs::read_to_string(root.join(file))
                .unwrap_or_default()
                .contains("/tmp/owned"),
            "{file} written"
        );
    }
    // The rest of the project stays writable.
    let out = run_in(
        &sandbox_again(&cfg),
        "echo x > src.txt && echo wrote",
        &root,
    )
    .await
    .unwrap();
    assert!(out.contains("wrote"), "{out}");
}

fn sandbox_again(cfg: &ExecConfig) -> SandboxExecutor {
    SandboxExecutor::new(cfg, &[]).unwrap()
}

/// Runs `command` once in a fresh root the sandbox shows as on the host, in the
/// sandbox or locally, and shuts the executor down: the root's guard, the root and
/// the output.
async fn once_in_a_fresh_root(
    state: &std::path::Path,
    sandboxed: bool,
    command: &str,
) -> (tempfile::TempDir, std::path::PathBuf, String) {
    let mut cfg = common::test_config(state);
    let dir = visible_dir();
    let root = dir.path().canonicalize().unwrap();
    let out = if sandboxed {
        cfg.kind = dsh::config::ExecutorKind::Sandbox;
        let sandbox = SandboxExecutor::new(&cfg, &[]).unwrap();
        let out = run_in(&sandbox, command, &root).await.unwrap();
        sandbox.shutdown().await;
        out
    } else {
        let local = LocalExecutor::new(&cfg).unwrap();
        let out = run_in(&local, command, &root).await.unwrap();
        local.shutdown().await;
        out
    };
    (dir, root, out)
}

/// What the command did: a bare repository in a root that held none, with
/// a `core.fsmonitor` the host's next `git status` there would run.
const BARE_WITH_FSMONITOR: &str = "git init -q --bare . && \
     git config core.fsmonitor 'touch fsmonitor-ran' && git config core.bare false && git config core.worktree . && \
     echo made";

/// E12 (issue 40): a bare repository a command made at the root (`HEAD`, `config`,
/// `objects`, `refs`) is refused when the command ends: its `HEAD` is renamed, so
/// the host's git finds no repository there and runs no fsmonitor. Locally the
/// repository stands and the host's `git status` runs the command's fsmonitor (the
/// attack).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e12_a_bare_repository_made_at_the_root_is_refused_when_the_command_ends() {
    let git_status = |root: &std::path::Path| {
        std::process::Command::new("git")
            .args(["status", "--porcelain"])
            .current_dir(root)
            .env("GIT_CEILING_DIRECTORIES", root.parent().unwrap())
            .output()
            .unwrap()
    };
    let state = tempfile::tempdir().unwrap();
    let (_dir, root, out) = once_in_a_fresh_root(state.path(), false, BARE_WITH_FSMONITOR).await;
    assert!(out.contains("made"), "{out}");
    let _ = git_status(&root);
    assert!(
        root.join("fsmonitor-ran").exists(),
        "the attack works locally"
    );

    let (_dir, root, out) = once_in_a_fresh_root(state.path(), true, BARE_WITH_FSMONITOR).await;
    assert!(out.contains("made"), "{out}");
    assert!(
        out.contains("HEAD of a new bare repository"),
        "the output says what was refused: {out}"
    );
    assert!(!root.join("HEAD").exists() && root.join("HEAD.dsh-refused").is_file());
    let status = git_status(&root);
    assert!(!status.status.success(), "still a repository: {status:?}");
    assert!(!root.join("fsmonitor-ran").exists(), "the fsmonitor ran");
}

/// A repository made below a directory the command then makes unreadable.
const REPOSITORY_BEHIND_A_LOCK: &str = "mkdir -p a/b && git init -q a/b && chmod 0 a && echo made";

/// E12 (issue 40), unreadable directories: a repository a command made below a
/// directory it then made unreadable is never passed over. As root the daemon
/// reads it anyway and the repository is refused; as `nobody` (scripts/test runs
/// this suite so) the daemon cannot read it, and the output says the check could
/// not be made there. Locally the repository stands and nothing is said (the
/// attack).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e12_a_repository_behind_an_unreadable_directory_is_not_passed_over() {
    use std::os::unix::fs::PermissionsExt;
    let open_up = |root: &std::path::Path| {
        std::fs::set_permissions(root.join("a"), std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let state = tempfile::tempdir().unwrap();
    let (_dir, root, out) =
        once_in_a_fresh_root(state.path(), false, REPOSITORY_BEHIND_A_LOCK).await;
    assert!(out.contains("made") && !out.contains("sandbox"), "{out}");
    open_up(&root);
    assert!(
        root.join("a/b/.git").is_dir(),
        "the attack's repository stands"
    );

    let (_dir, root, out) =
        once_in_a_fresh_root(state.path(), true, REPOSITORY_BEHIND_A_LOCK).await;
    assert!(out.contains("made"), "{out}");
    if nix::unistd::geteuid().is_root() {
        open_up(&root);
        assert!(out.contains("renamed"), "{out}");
        assert!(!root.join("a/b/.git").exists() && root.join("a/b/.git.dsh-refused").is_dir());
    } else {
        let said = format!("could not check {}", root.join("a").display());
        assert!(out.contains(&said), "{out}");
        open_up(&root);
    }
}

/// E10 (issue 40): a question about a host that nobody answered (cancelled here;
/// a closed editor is the same) refuses that connection but is not remembered for
/// the command's life: the command's next connection to the same host asks again,
/// and a real answer then lets it through (and is remembered: a third connection
/// asks nothing). Before, the first refusal stood for as long as the command ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_an_unanswered_question_is_not_remembered_a_real_answer_is() {
    let port = server_on(std::net::Ipv4Addr::LOCALHOST.into()).await;
    let dir = tempfile::tempdir().unwrap();
    let ws = common::daemon::workspace(dir.path(), "ws");
    let (_daemon, mut c) = common::daemon::stdio_daemon(
        dir.path(),
        "kind = \"sandbox\"\n[permissions]\ndefault_mode = \"ask\"\n",
        &[],
    )
    .await;
    let s = c.new_session(&ws).await;
    let curl =
        format!("NO_PROXY= no_proxy= curl -s -w ' %{{http_code}}\\n' http://localhost:{port}/");
    // The bash call; the first question (an option no client offers: cancelled);
    // the second, allowed.
    c.permission_answers
        .extend(["allow_once", "no-such-option", "allow_once"]);
    let (out, _) = c.bash(&s, &format!("{curl}; {curl}; {curl}")).await;
    let refused = out.find(" 403").expect("the first connection is refused");
    assert!(refused < out.find("hello from").unwrap_or(0), "{out}");
    assert_eq!(
        out.matches(&format!("hello from {port} 200")).count(),
        2,
        "asked again after the unanswered question: {out}"
    );
    assert_eq!(
        c.permission_requests.len(),
        3,
        "{:?}",
        c.permission_requests
    );
}

/// Repositories where the start's bounded walk does not reach: ten levels down,
/// under `node_modules/` (a skipped folder), and behind 3000 directories (past
/// the walk's 2000).
const DEEP_REPOSITORIES: &str = "mkdir -p a/b/c/d/e/f/g/h/i/j node_modules/pkg && \
     git -C a/b/c/d/e/f/g/h/i/j init -q && git -C node_modules/pkg init -q && \
     for i in $(seq 3000); do mkdir d$i; done && git -C d3000 init -q && echo made";

/// E12 (issue 40): a repository a command made anywhere under its root is refused
/// when it ends, with no depth cap and no skip list: ten levels down, under
/// `node_modules/`, behind 3000 directories. Locally all three stand (the attack:
/// the host's git would run their hooks and fsmonitor). A repository the person
/// had before, deep down, is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e12_a_repository_made_anywhere_under_the_root_is_refused() {
    let made = [
        "a/b/c/d/e/f/g/h/i/j/.git",
        "node_modules/pkg/.git",
        "d3000/.git",
    ];
    let state = tempfile::tempdir().unwrap();
    let local = LocalExecutor::new(&common::test_config(state.path())).unwrap();
    let dir = visible_dir();
    let root = dir.path().canonicalize().unwrap();
    let out = run_in(&local, DEEP_REPOSITORIES, &root).await.unwrap();
    local.shutdown().await;
    assert!(out.contains("made"), "{out}");
    for git in made {
        assert!(root.join(git).is_dir(), "locally {git} stands");
    }

    let mut cfg = common::test_config(state.path());
    cfg.kind = dsh::config::ExecutorKind::Sandbox;
    let sandbox = SandboxExecutor::new(&cfg, &[]).unwrap();
    let dir = visible_dir();
    let root = dir.path().canonicalize().unwrap();
    // The person's own, deep down and under node_modules, made before.
    for own in ["x/y/z/w/v/.git", "node_modules/dep/.git"] {
        std::fs::create_dir_all(root.join(own)).unwrap();
    }
    // File times move in ticks of a coarse clock: a repository made in the tick
    // the command starts in counts as the command's. The person's are older: wait
    // (bounded) until a new file's birth shows the clock has moved on.
    let born = |p: &std::path::Path| std::fs::metadata(p).unwrap().created().unwrap();
    let own_birth = born(&root.join("node_modules/dep/.git"));
    let probe = dir.path().join("probe");
    let moved = (0..1_000_000).any(|_| {
        let _ = std::fs::remove_file(&probe);
        std::fs::write(&probe, "").unwrap();
        born(&probe) > own_birth
    });
    assert!(moved, "the file clock moves");
    std::fs::remove_file(&probe).unwrap();
    let out = run_in(&sandbox, DEEP_REPOSITORIES, &root).await.unwrap();
    // The next command's check starts from the snapshot the first one left (only
    // what changed is read): repositories it makes in a directory the first command
    // made and deeper below one are refused as well. (One moved into place with an
    // old birth time is refused only where the start's walk looked, and this root,
    // 3000 directories wide, is past that walk's bound: the unit test
    // `tripwires::tests::e12_a_repository_moved_into_place_is_refused_though_it_is_old`.)
    let next = run_in(
        &sandbox,
        "git -C d17 init -q && mkdir -p a/b/c/d/e/f/g/h/i/j/k && git -C a/b/c/d/e/f/g/h/i/j/k init -q \
         && echo again",
        &root,
    )
    .await
    .unwrap();
    sandbox.shutdown().await;
    assert!(next.contains("again"), "{next}");
    for git in ["d17/.git", "a/b/c/d/e/f/g/h/i/j/k/.git"] {
        assert!(
            !root.join(git).exists() && root.join(format!("{git}.dsh-refused")).is_dir(),
            "{git} stands after the second command: {next}"
        );
    }
    assert!(out.contains("made"), "{out}");
    for git in made {
        assert!(!root.join(git).exists(), "{git} stands: {out}");
        assert!(
            root.join(format!("{git}.dsh-refused")).is_dir(),
            "{git}: {out}"
        );
        assert!(out.contains(&root.join(git).display().to_string()), "{out}");
    }
    for own in ["x/y/z/w/v/.git", "node_modules/dep/.git"] {
        assert!(root.join(own).is_dir(), "{own} was the person's: {out}");
    }
}
