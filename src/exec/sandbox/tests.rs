//! The sandbox launcher's unit tests (its layout, probe and placeholders).

use super::host::{holds_socket, socket_aliases, unescape};
use super::*;
use std::os::fd::AsRawFd;

fn config(network: bool, writable: Vec<PathBuf>) -> ExecConfig {
    let mut config = ExecConfig {
        state_dir: Some(std::env::temp_dir().join(format!("dsh-unit-{}", std::process::id()))),
        ..ExecConfig::default()
    };
    config.sandbox.network.mode = if network {
        NetworkMode::Host
    } else {
        NetworkMode::None
    };
    config.sandbox.writable = writable;
    config.sandbox.deny_read = vec![];
    config
}

fn joined(args: &[OsString]) -> String {
    args.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn e6_every_command_gets_a_user_namespace_without_capabilities_and_the_floor() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    let launcher = SandboxLauncher::new(&config(false, vec![]), &[]).unwrap();
    let (args, program) = launcher
        .arguments(&root, std::slice::from_ref(&root))
        .unwrap();
    let args = joined(&args);
    let tmpfs = args.find("--tmpfs /tmp").unwrap();
    let bind = args
        .find(&format!("--bind {0} {0}", root.display()))
        .unwrap();
    assert!(tmpfs < bind, "roots under /tmp show through: {args}");
    assert!(
        args.ends_with(&format!(
            "--unshare-user --disable-userns --cap-drop ALL --unshare-pid --unshare-ipc \
             --unshare-uts --unshare-cgroup-try --unshare-net --seccomp {} --die-with-parent \
             --new-session --chdir {} --",
            program.as_raw_fd(),
            root.display()
        )),
        "{args}"
    );
    let open = SandboxLauncher::new(&config(true, vec![]), &[]).unwrap();
    let args = joined(&open.arguments(Path::new("/"), &[]).unwrap().0);
    assert!(!args.contains("--unshare-net"), "{args}");
}

#[test]
fn missing_or_relative_roots_are_skipped_and_a_symlinked_root_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().canonicalize().unwrap().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = real.with_file_name("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let launcher = SandboxLauncher::new(&config(false, vec![]), &[]).unwrap();
    let args = joined(
        &launcher
            .arguments(
                Path::new("/"),
                &[PathBuf::from("/no/such/dir"), PathBuf::from("relative")],
            )
            .unwrap()
            .0,
    );
    assert!(
        !args.contains("/no/such/dir") && !args.contains("relative"),
        "{args}"
    );
    let err = launcher
        .arguments(&real, std::slice::from_ref(&link))
        .unwrap_err();
    assert!(
        err.contains("symlink") && err.contains(&real.display().to_string()),
        "{err}"
    );
}

#[test]
fn e9_the_directories_between_a_root_and_its_guards_and_masks_are_pinned_first() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(root.join("deps/lib/.git/hooks")).unwrap();
    std::fs::create_dir_all(root.join("conf")).unwrap();
    std::fs::write(root.join("conf/token"), "secret").unwrap();
    let mut config = config(false, vec![]);
    config.sandbox.deny_read = vec![root.join("conf/token")];
    let launcher = SandboxLauncher::new(&config, &[]).unwrap();
    let args = joined(
        &launcher
            .layout_for(&root, std::slice::from_ref(&root), None)
            .unwrap()
            .args(),
    );
    let at = |needle: String| {
        args.find(&needle)
            .unwrap_or_else(|| panic!("{needle} missing from {args}"))
    };
    let r = root.display();
    let pins = [
        at(format!("--bind {r}/.git {r}/.git")),
        at(format!("--bind {r}/conf {r}/conf")),
        at(format!("--bind {r}/deps {r}/deps")),
        at(format!("--bind {r}/deps/lib {r}/deps/lib")),
        at(format!("--bind {r}/deps/lib/.git {r}/deps/lib/.git")),
    ];
    assert!(
        pins.windows(2).all(|w| w[0] < w[1]),
        "outermost first: {args}"
    );
    let guard = at(format!("--ro-bind {r}/deps/lib/.git/hooks"));
    let mask = at(format!("{r}/conf/token"));
    assert!(
        pins[4] < guard && pins[1] < mask,
        "pins before what they hold: {args}"
    );
    // A root whose only repository is its own gets no pin but its `.git`.
    let plain = tempfile::tempdir().unwrap();
    let plain = plain.path().canonicalize().unwrap();
    std::fs::create_dir_all(plain.join(".git/hooks")).unwrap();
    let args = joined(
        &launcher
            .layout_for(&plain, std::slice::from_ref(&plain), None)
            .unwrap()
            .args(),
    );
    assert_eq!(
        args.matches("--bind ").count(),
        2,
        "the root and its .git: {args}"
    );
}

#[test]
fn e9_the_home_directory_or_one_holding_it_is_no_writable_root_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    let home = top.join("home");
    std::fs::create_dir_all(home.join("project")).unwrap();
    let mut launcher = SandboxLauncher::new(&config(false, vec![]), &[]).unwrap();
    launcher.home = Some(home.clone());
    for root in [&home, &top] {
        let err = launcher
            .layout_for(&home, std::slice::from_ref(root), None)
            .unwrap_err();
        assert!(err.contains("allow_home_root"), "{err}");
    }
    let project = home.join("project");
    launcher
        .layout_for(&project, std::slice::from_ref(&project), None)
        .unwrap();
    launcher.allow_home_root = true;
    launcher
        .layout_for(&home, std::slice::from_ref(&home), None)
        .unwrap();
}

#[test]
fn e7_a_command_is_refused_when_the_layout_would_show_the_daemons_socket() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    let socket = root.join("dsh.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let guarded = [socket.clone()];
    let launcher = SandboxLauncher::new(&config(false, vec![]), &guarded).unwrap();
    // Outside every root, the private /tmp hides it.
    launcher.layout_for(Path::new("/"), &[], None).unwrap();
    let err = launcher
        .layout_for(&root, std::slice::from_ref(&root), None)
        .unwrap_err();
    assert!(err.contains("dsh's own socket"), "{err}");
}

#[test]
fn a_directory_holds_a_socket_however_deep_within_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("a/b");
    std::fs::create_dir_all(&deep).unwrap();
    let mut budget = 100;
    assert!(!holds_socket(dir.path(), 4, &mut budget), "no socket yet");
    let _listener = std::os::unix::net::UnixListener::bind(deep.join("s")).unwrap();
    let mut budget = 100;
    assert!(holds_socket(dir.path(), 4, &mut budget));
    let mut budget = 100;
    assert!(
        holds_socket(dir.path(), 1, &mut budget),
        "deeper than looked: held"
    );
    let mut budget = 0;
    assert!(
        holds_socket(dir.path(), 4, &mut budget),
        "out of budget: held"
    );
}

#[test]
fn a_socket_is_reached_at_least_at_its_real_path_and_mountinfo_is_unescaped() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let aliases = socket_aliases(&socket);
    assert_eq!(aliases[0], socket.canonicalize().unwrap());
    assert_eq!(unescape("/a\\040b\\134c"), "/a b\\c");
    assert_eq!(unescape("/trailing\\04"), "/trailing\\04");
}

#[test]
fn the_probe_reads_capabilities_no_new_privs_and_seccomp() {
    let good = "Name:\tcat\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n";
    check_status(good).unwrap();
    let root = good.replace("0000000000000000", "000001ffffffffff");
    assert!(
        check_status(&root)
            .unwrap_err()
            .contains("keeps capabilities")
    );
    let unfiltered = good.replace("Seccomp:\t2", "Seccomp:\t0");
    assert!(
        check_status(&unfiltered)
            .unwrap_err()
            .contains("seccomp floor")
    );
    assert!(check_status("").is_err());
    assert_eq!(parse_version("bubblewrap 0.8.0\n"), Some((0, 8, 0)));
    assert_eq!(parse_version("bubblewrap 0.11\n"), Some((0, 11, 0)));
    assert_eq!(parse_version("nonsense"), None);
}

#[test]
fn a_placeholder_goes_when_its_last_sandbox_does_and_only_while_empty() {
    let dir = tempfile::tempdir().unwrap();
    let (held, filled) = (dir.path().join(".vscode"), dir.path().join(".gitmodules"));
    let mut p = Placeholders::default();
    p.take("a/1", &held);
    p.take("a/2", &held);
    p.take("b/1", &filled);
    std::fs::create_dir(&held).unwrap();
    std::fs::write(&filled, "[submodule]\n").unwrap();
    p.release(|m| m == "a/1");
    assert!(held.exists() && p.holds(&held), "a/2 still holds it");
    p.release(|m| m.starts_with("a/"));
    assert!(!held.exists() && !p.holds(&held));
    p.release(|m| m == "b/1");
    assert!(
        filled.exists(),
        "a file with content is a person's, not a placeholder"
    );
}

#[test]
fn a_missing_bwrap_is_refused_with_how_to_fix_it() {
    let mut config = config(false, vec![]);
    config.sandbox.bwrap = PathBuf::from("/nonexistent/bwrap");
    let err = SandboxLauncher::new(&config, &[])
        .unwrap()
        .probe()
        .unwrap_err();
    assert!(
        err.contains("apt install bubblewrap") && err.contains("0.8.0"),
        "{err}"
    );
}
