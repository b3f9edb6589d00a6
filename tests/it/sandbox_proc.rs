//! Issue 39, part 3: root is not root (E6). To procfs, uid 0 inside a user namespace
//! is the host's uid 0 when the daemon runs as root, and procfs checks only the
//! owner: a sandbox over a plain `--proc /proc` leaves `/proc/sys` writable, and a
//! command that rewrote `core_pattern` would have the host's root run a program of
//! its choosing at the next crash. The walk below opens every file under `/proc` and
//! `/sys` inside the sandbox for writing and closes it without writing a byte
//! (`O_NONBLOCK`: nothing may wait on open); only the sandbox's own processes'
//! entries may open. scripts/test runs this module again as `nobody`.

use crate::common;
use crate::sandbox_escape::{PYTHON, run_in, visible_dir};

use common::*;
use dsh::config::ExecutorKind;
use dsh::exec::{BashExecutor, SandboxExecutor};
use std::path::Path;

/// Opens `path` for writing and closes it: `OPENED` or the error. Never writes.
const OPEN_FOR_WRITING: &str = r#"
import os, sys
try:
    os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY))
    print("OPENED")
except OSError as e:
    print("REFUSED", e.strerror)
"#;

/// Walks `/proc` and `/sys` (never following links) and opens each file for
/// writing, then closes it without writing. Prints `WRITABLE path` for each that
/// opened outside a process's own directory, and `OWN n` for those inside one.
const WALK: &str = r#"
import os, re
own = re.compile(r"^/proc/(self|thread-self|[0-9]+)(/|$)")
count = 0
for top in ("/proc", "/sys"):
    for d, dirs, files in os.walk(top, followlinks=False):
        if own.match(d):
            dirs[:] = []
        for name in files:
            p = os.path.join(d, name)
            if os.path.islink(p):
                continue
            try:
                fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
            except OSError:
                continue
            os.close(fd)
            if own.match(p):
                count += 1
            else:
                print("WRITABLE", p)
print("OWN", count)
"#;

fn am_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Writes the script `body` into `root` (a writable root, so the sandbox sees it)
/// and returns the command that runs it with `args`.
fn script(root: &Path, name: &str, body: &str, args: &str) -> String {
    std::fs::write(root.join(name), body).unwrap();
    format!("{PYTHON} {name} {args}")
}

/// Runs python `code` with `args` in plain bwrap under the layout dsh rendered
/// before issue 39: the host's root read-only, a fresh `/proc`, a user namespace
/// without capabilities.
fn in_the_old_layout(code: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--unshare-user",
            "--disable-userns",
            "--cap-drop",
            "ALL",
            "--unshare-pid",
            "--die-with-parent",
            "--",
            PYTHON,
            "-c",
            code,
        ])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The control, the attack without the defence: as root, the old layout let a
/// command open the kernel's crash handler (and hundreds of other tunables) for
/// writing; as any other user, a few of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e6_issue_39_the_old_layout_let_root_open_core_pattern_for_writing() {
    let out = in_the_old_layout(OPEN_FOR_WRITING, &["/proc/sys/kernel/core_pattern"]);
    let walk = in_the_old_layout(WALK, &[]);
    let writable = walk.lines().filter(|l| l.starts_with("WRITABLE")).count();
    if am_root() {
        assert!(out.contains("OPENED"), "{out}");
        assert!(
            walk.contains("WRITABLE /proc/sys/kernel/core_pattern") && writable > 100,
            "{writable}: {walk}"
        );
    } else {
        // The crash handler is root's; but the sysctls of the command's own PID
        // namespace (`kernel/ns_last_pid`, on new kernels `pid_max`) belong to its
        // user namespace's root, and `/proc/pressure` is open to all: the walk finds
        // something to hold as any user.
        assert!(out.contains("REFUSED"), "{out}");
        assert!(writable > 0, "{walk}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e6_issue_39_nothing_under_proc_or_sys_opens_for_writing_but_the_sandboxs_own() {
    let state = tempfile::tempdir().unwrap();
    let dir = visible_dir();
    let root = dir.path().canonicalize().unwrap();
    let mut cfg = test_config(state.path());
    cfg.kind = ExecutorKind::Sandbox;
    let sandbox = SandboxExecutor::new(&cfg, &[]).unwrap();
    let one = script(
        &root,
        "open.py",
        OPEN_FOR_WRITING,
        "/proc/sys/kernel/core_pattern",
    );
    let out = run_in(&sandbox, &one, &root).await.unwrap();
    assert!(out.contains("REFUSED"), "core_pattern: {out}");
    let walk = script(&root, "walk.py", WALK, "");
    let out = run_in(&sandbox, &walk, &root).await.unwrap();
    let writable: Vec<&str> = out.lines().filter(|l| l.starts_with("WRITABLE")).collect();
    assert!(
        writable.is_empty(),
        "{} writable: {writable:#?}",
        writable.len()
    );
    // The walk can see a writable file: the command's own /proc/self/comm is one.
    let own: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("OWN "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count: {out}"));
    assert!(own > 0, "{out}");
    sandbox.shutdown().await;
}
