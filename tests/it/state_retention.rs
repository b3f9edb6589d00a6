//! The state directory stays bounded (issue 32, `[state]`), through the real binary:
//! each spill limit with tiny values (ages set on the test's own files with
//! `utimensat`, never the clock), `dsh gc` with and without a daemon, the files it
//! must keep (a running task's, a recently used session's), the "removed by
//! retention" answers, audit rotation read back by `dsh policy replay`, daemon.log
//! rotation, `dsh status`, and `dsh acp`'s note about a newer binary.

use crate::common;
use common::daemon::{BIN, SocketDaemon, workspace, write_config};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const DAY: u64 = 86_400;

/// Sets `path`'s mtime to `secs` seconds ago (by path: a file being written or run
/// cannot be opened for writing).
fn age(path: &Path, secs: u64) {
    set_mtime(path, SystemTime::now() - Duration::from_secs(secs));
}

fn set_mtime(path: &Path, when: SystemTime) {
    use nix::sys::stat::{UtimensatFlags, utimensat};
    use nix::sys::time::TimeSpec;
    let since = when.duration_since(SystemTime::UNIX_EPOCH).unwrap();
    let t = TimeSpec::from_duration(since);
    utimensat(
        nix::fcntl::AT_FDCWD,
        path,
        &t,
        &t,
        UtimensatFlags::NoFollowSymlink,
    )
    .unwrap();
}

/// `dsh gc ARGS` against `socket`, `state` and `config`: (stdout, stderr, success).
fn gc(socket: &Path, state: &Path, config: &Path, args: &[&str]) -> (String, String, bool) {
    let out = std::process::Command::new(BIN)
        .arg("gc")
        .args(args)
        .arg("--socket")
        .arg(socket)
        .arg("--state-dir")
        .arg(state)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

fn write(path: &Path, bytes: usize) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, vec![b'x'; bytes]).unwrap();
}

/// Waits (polling, 10 s at most) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn gc_without_a_daemon_removes_by_age_then_oldest_first_by_size_and_a_dry_run_removes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let spill = state.join("spill");
    let config = write_config(
        dir.path(),
        "[state]\nspill_max_age_days = 2\nspill_max_bytes = 900\naudit_keep = 2\n",
    );
    for (name, bytes, secs) in [
        ("old.stdout", 100, 5 * DAY),
        ("a.stdout", 400, 36 * 3600),
        ("b.stdout", 400, DAY),
        ("c.stdout", 400, 60),
        ("named.stdout", 50, 5 * DAY),
    ] {
        write(&spill.join(name), bytes);
        age(&spill.join(name), secs);
    }
    // A session log written now names one old file: it stays.
    let log = state.join("sessions/s1.jsonl");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let result = json!({"type": "tool_result", "spills": [spill.join("named.stdout")]});
    std::fs::write(&log, format!("{{\"id\":\"s1\"}}\n{result}\n")).unwrap();
    for k in 1..=3 {
        write(&state.join(format!("audit.jsonl.{k}")), 10);
    }
    let none = dir.path().join("run/none.sock");

    let (dry, err, ok) = gc(&none, &state, &config, &["--dry-run"]);
    assert!(ok, "{err}");
    let s = spill.display();
    let a = state.join("audit.jsonl.3");
    assert_eq!(
        dry,
        format!(
            "would remove {s}/old.stdout (100 bytes; older than 2 days)\n\
             would remove {s}/a.stdout (400 bytes; the oldest while spill files held more than 900 bytes)\n\
             would remove {} (10 bytes; beyond the 2 rotated file(s) kept)\n\
             would remove 3 file(s), 510 bytes (spill files: 5 holding 1.3 KiB, 1 kept in use; \
             no daemon runs: applied to the state directory directly)\n",
            a.display()
        )
    );
    for name in [
        "old.stdout",
        "a.stdout",
        "b.stdout",
        "c.stdout",
        "named.stdout",
    ] {
        assert!(spill.join(name).exists(), "the dry run removed {name}");
    }
    assert!(a.exists());

    let (done, err, ok) = gc(&none, &state, &config, &[]);
    assert!(ok, "{err}");
    assert_eq!(done, dry.replace("would remove", "removed"));
    let mut left: Vec<_> = std::fs::read_dir(&spill)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["b.stdout", "c.stdout", "named.stdout"]);
    assert!(!a.exists() && state.join("audit.jsonl.2").exists());
    // Nothing more to do.
    let (again, _, _) = gc(&none, &state, &config, &[]);
    assert!(again.starts_with("removed 0 file(s), 0 bytes"), "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_keeps_what_is_in_use_and_answers_removed_by_retention() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let spill = state.join("spill");
    // Left by an earlier run: the sweep at the daemon's start removes it.
    write(&spill.join("stale.stdout"), 10);
    age(&spill.join("stale.stdout"), 3 * DAY);
    let daemon = SocketDaemon::start(
        dir.path(),
        "max_output_bytes = 1000\n[permissions]\ndefault_mode = \"auto\"\n\
         [state]\nspill_max_age_days = 1\n",
    )
    .await;
    // Gone, then its tombstone written: the sweep's last step.
    until("the start sweep", || {
        !spill.join("stale.stdout").exists()
            && std::fs::read_to_string(state.join("spill-removed.jsonl"))
                .is_ok_and(|t| t.contains("stale.stdout"))
    })
    .await;
    let ws = workspace(dir.path(), "ws");
    let mut c = daemon.connect().await;
    let s = c.new_session(&ws).await;
    let stale = spill.join("stale.stdout");
    let (text, is_error) = c.tool(Some(&s), "read_file", json!({"path": stale})).await;
    assert!(is_error, "{text}");
    assert!(
        text.ends_with("removed by retention (older than 1 day)"),
        "{text}"
    );

    // A running task's spill file, and a `!` command's, named by the session's log.
    let task = c
        .start_task(&s, "head -c 5000 /dev/zero | tr '\\0' x; exec sleep 1000")
        .await;
    let task_file = spill.join(format!("{task}.stdout"));
    until("the task's spill file", || {
        std::fs::metadata(&task_file).is_ok_and(|m| m.len() == 5000)
    })
    .await;
    let r = c
        .prompt(&s, "!head -c 3000 /dev/zero | tr '\\0' y")
        .await
        .unwrap();
    assert_eq!(r["stopReason"], "end_turn");
    let run_file = std::fs::read_dir(&spill)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p != &task_file)
        .expect("the ! command's spill file");
    age(&task_file, 30 * DAY);
    age(&run_file, 30 * DAY);
    let gc_here = |args: &[&str]| {
        let (out, err, ok) = gc(&daemon.socket, &state, &daemon.config, args);
        assert!(ok, "{err}");
        out
    };
    let kept = gc_here(&[]);
    assert_eq!(
        kept,
        "removed 0 file(s), 0 bytes (spill files: 2 holding 7.8 KiB, 2 kept in use; \
         by the running daemon)\n"
    );

    // The session's log last written days ago: only its load would keep the file.
    let log = state.join(format!("sessions/{s}.jsonl"));
    age(&log, 3 * DAY);
    let would = gc_here(&["--dry-run"]);
    assert!(
        would.starts_with(&format!(
            "would remove {} (2.9 KiB; older than 1 day)\n",
            run_file.display()
        )),
        "{would}"
    );
    drop(c);
    let mut c = daemon.connect().await;
    c.load_session(&s, &ws).await;
    assert!(
        gc_here(&["--dry-run"]).starts_with("would remove 0 file(s)"),
        "a session loaded now keeps what it names"
    );

    // Once the task ends its file is no longer in use: it goes, and the model is told.
    let (text, _) = c
        .tool(Some(&s), "bash_kill", json!({"task_id": task}))
        .await;
    assert_eq!(text, format!("killed background task {task}"));
    let removed = gc_here(&[]);
    assert_eq!(
        removed,
        format!(
            "removed {} (4.9 KiB; older than 1 day)\nremoved 1 file(s), 4.9 KiB (spill files: 2 \
             holding 7.8 KiB, 1 kept in use; by the running daemon)\n",
            task_file.display()
        )
    );
    assert!(!task_file.exists() && run_file.exists());
    let (text, is_error) = c
        .tool(Some(&s), "bash_output", json!({"task_id": task}))
        .await;
    assert!(!is_error, "{text}");
    let note = format!(
        "[{}: removed by retention (older than 1 day)]",
        task_file.display()
    );
    assert!(
        text.contains(&format!(
            "[some output was dropped from memory; full output: {}]",
            task_file.display()
        )) && text.ends_with(&note),
        "{text}"
    );
    let (text, is_error) = c.bash(&s, &format!("cat {}", task_file.display())).await;
    assert!(is_error || text.contains("No such file"), "{text}");
    assert!(text.ends_with(&note), "{text}");

    // `dsh status`: the start, and the state directory per kind.
    let status = daemon.cli_status();
    let first = status.lines().next().unwrap();
    assert!(
        first.contains(", started 20") && first.ends_with("connection(s)"),
        "{status}"
    );
    assert!(
        status.contains(&format!("state directory {}: ", state.display())),
        "{status}"
    );
    assert!(
        status.contains("\n  spill    2.9 KiB in 1 file(s)\n"),
        "{status}"
    );
    for kind in ["sessions ", "logs     ", "audit    ", "other    "] {
        assert!(status.contains(&format!("\n  {kind}")), "{kind}: {status}");
    }
    drop(c);
    let (socket, config) = (daemon.socket.clone(), daemon.config.clone());
    daemon.stop().await;

    // The load is remembered past the daemon: `dsh gc` without one keeps the file.
    age(&log, 3 * DAY);
    let (out, err, ok) = gc(&socket, &state, &config, &["--dry-run"]);
    assert!(ok, "{err}");
    assert!(out.starts_with("would remove 0 file(s)"), "{out}");
    std::fs::remove_file(state.join("session-loads.json")).unwrap();
    let (out, _, _) = gc(&socket, &state, &config, &["--dry-run"]);
    assert!(
        out.starts_with(&format!("would remove {} ", run_file.display())),
        "{out}"
    );
}

/// The audit files in the order they were written (rotated oldest first, then live).
fn audit_files(state: &Path) -> Vec<PathBuf> {
    let mut rotated: Vec<(u32, PathBuf)> = std::fs::read_dir(state)
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let k = path
                .file_name()?
                .to_str()?
                .strip_prefix("audit.jsonl.")?
                .parse()
                .ok()?;
            Some((k, path))
        })
        .collect();
    rotated.sort();
    let mut files: Vec<PathBuf> = rotated.into_iter().rev().map(|(_, p)| p).collect();
    files.push(state.join("audit.jsonl"));
    files
}

fn replay(audit: &Path, config: &Path) -> (Value, String, i32) {
    let out = std::process::Command::new(BIN)
        .args(["policy", "replay", "--json", "--audit"])
        .arg(audit)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_rotates_by_size_and_replay_reads_the_rotated_files_in_order() {
    let dir = tempfile::tempdir().unwrap();
    // A shadow that would deny every echo: each line says so.
    let candidate = dir.path().join("candidate.toml");
    let deny_echo =
        "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"echo\"\naction = \"deny\"\n";
    std::fs::write(&candidate, deny_echo).unwrap();
    let daemon = SocketDaemon::start(
        dir.path(),
        &format!(
            "[permissions]\ndefault_mode = \"auto\"\nshadow = {candidate:?}\n\
             [state]\naudit_max_bytes = 1500\naudit_keep = 2\n"
        ),
    )
    .await;
    let mut c = daemon.connect().await;
    let s = c.new_session(&workspace(dir.path(), "ws")).await;
    for n in 1..=12 {
        assert_eq!(
            c.bash(&s, &format!("echo {n}")).await,
            (format!("{n}\n"), false)
        );
    }
    drop(c);
    daemon.stop().await;
    let state = dir.path().join("state");
    let files = audit_files(&state);
    let names: Vec<_> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["audit.jsonl.2", "audit.jsonl.1", "audit.jsonl"]);
    // Whole lines only, each file within the limit, the commands in order.
    let mut commands = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(
            text.len() <= 1500 || text.lines().count() == 1,
            "{}",
            file.display()
        );
        for line in text.lines() {
            let line: Value = serde_json::from_str(line).unwrap();
            commands.push(line["arguments"]["command"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(commands.last().unwrap(), "echo 12");
    assert!(
        commands.len() < 12,
        "nothing was rotated away: {commands:?}"
    );
    let first: usize = commands[0].strip_prefix("echo ").unwrap().parse().unwrap();
    let expected: Vec<String> = (first..=12).map(|n| format!("echo {n}")).collect();
    assert_eq!(commands, expected);

    // The state directory, or the live file: every kept line; one rotated file: its own.
    for given in [state.clone(), state.join("audit.jsonl")] {
        let (report, err, code) = replay(&given, &daemon_config(dir.path()));
        assert_eq!(code, 0, "{err}");
        assert_eq!(report["replayed"], json!(commands.len()), "{report}");
    }
    // A change is named by its own file and line.
    let (report, err, code) = replay(&state, &candidate);
    assert_eq!(code, 0, "{err}");
    let changes = report["changes"].as_array().unwrap();
    assert_eq!(changes.len(), commands.len(), "{report}");
    assert_eq!(changes[0]["file"], json!(files[0]), "{report}");
    assert_eq!(
        (changes[0]["line"].clone(), changes[0]["to"].clone()),
        (json!(1), json!("deny"))
    );
    let last = changes.last().unwrap();
    assert_eq!(last["file"], json!(state.join("audit.jsonl")), "{report}");
    // shadow-report reads the same set: every kept call, each difference in its file.
    let out = std::process::Command::new(BIN)
        .args(["policy", "shadow-report", "--audit"])
        .arg(&state)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with(&format!(
            "{}:1: shadow policy says deny where allow was enforced  bash {}\n",
            files[0].display(),
            commands[0]
        )),
        "{text}"
    );
    let n = commands.len();
    assert!(
        text.ends_with(&format!(
            "shadow policy: {n} call(s), {n} differed, 0 unfinished\n"
        )),
        "{text}"
    );
    let one = std::fs::read_to_string(state.join("audit.jsonl.1")).unwrap();
    let (report, _, _) = replay(&state.join("audit.jsonl.1"), &daemon_config(dir.path()));
    assert_eq!(report["replayed"], json!(one.lines().count()));
    // A broken line is named by its own file and line.
    let oldest = state.join("audit.jsonl.2");
    let mut text = std::fs::read_to_string(&oldest).unwrap();
    text.push_str("not json\n");
    std::fs::write(&oldest, &text).unwrap();
    let (_, err, code) = replay(&state, &daemon_config(dir.path()));
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!("{}:{}:", oldest.display(), text.lines().count())),
        "{err}"
    );
}

fn daemon_config(dir: &Path) -> PathBuf {
    dir.join("dsh.toml")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_log_rotates_by_size_keeping_log_keep_files() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let daemon =
        SocketDaemon::start(dir.path(), "[state]\nlog_max_bytes = 150\nlog_keep = 2\n").await;
    let live = daemon.state.join("daemon.log");
    until("the listening line", || {
        std::fs::read_to_string(&live).is_ok_and(|t| t.contains("dsh daemon listening"))
    })
    .await;
    // Every line is over half the limit: each one after the first rotates. A reload
    // logs its model and then itself.
    for _ in 0..4 {
        let before = std::fs::metadata(&live).unwrap().ino();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(daemon.pid),
            nix::sys::signal::Signal::SIGHUP,
        )
        .unwrap();
        until("a rotation", || {
            std::fs::metadata(&live).is_ok_and(|m| m.ino() != before)
                && std::fs::read_to_string(&live).is_ok_and(|t| t.contains("config reloaded"))
        })
        .await;
    }
    let state = &daemon.state;
    assert!(state.join("daemon.log.1").exists() && state.join("daemon.log.2").exists());
    assert!(!state.join("daemon.log.3").exists());
    let mut stamps = Vec::new();
    for name in ["daemon.log.2", "daemon.log.1", "daemon.log"] {
        let text = std::fs::read_to_string(state.join(name)).unwrap();
        assert_eq!(text.lines().count(), 1, "{name}: {text}");
        stamps.push(text.split(' ').next().unwrap().to_string());
    }
    let mut sorted = stamps.clone();
    sorted.sort();
    assert_eq!(stamps, sorted, "rotated out of order");
    let last = std::fs::read_to_string(&live).unwrap();
    assert!(last.contains("config reloaded (SIGHUP)"), "{last}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_sweeps_again_every_sweep_interval_secs() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("state/spill/first.stdout");
    write(&first, 10);
    age(&first, 2 * DAY);
    let daemon = SocketDaemon::start(
        dir.path(),
        "[state]\nspill_max_age_days = 1\nsweep_interval_secs = 1\n",
    )
    .await;
    let stones = daemon.state.join("spill-removed.jsonl");
    until("the start sweep's end", || {
        std::fs::read_to_string(&stones).is_ok_and(|t| t.contains("first.stdout"))
    })
    .await;
    // Written after the first sweep ended: only a later one takes it.
    let file = daemon.state.join("spill/later.stdout");
    write(&file, 10);
    age(&file, 2 * DAY);
    until("a periodic sweep", || !file.exists()).await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_applies_spill_limits_at_once_and_names_the_rotation_as_needing_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), "").await;
    let file = daemon.state.join("spill/old.stdout");
    write(&file, 10);
    age(&file, 3 * DAY);
    let (out, err, ok) = gc(
        &daemon.socket,
        &daemon.state,
        &daemon.config,
        &["--dry-run"],
    );
    assert!(ok, "{err}");
    assert!(out.starts_with("would remove 0 file(s)"), "{out}");
    write_config(
        dir.path(),
        "[state]\nspill_max_age_days = 2\nlog_max_bytes = 1000\n",
    );
    let reload = |at: &Path| {
        let out = std::process::Command::new(BIN)
            .args(["reload", "--socket"])
            .arg(at)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let said = reload(&daemon.socket);
    assert!(
        said.contains("needs a restart to take effect: [state]\n"),
        "{said}"
    );
    let (out, _, _) = gc(
        &daemon.socket,
        &daemon.state,
        &daemon.config,
        &["--dry-run"],
    );
    assert!(
        out.starts_with(&format!(
            "would remove {} (10 bytes; older than 2 days)\n",
            file.display()
        )),
        "{out}"
    );
    // The rotation in force is still the one the log was opened with.
    assert!(reload(&daemon.socket).contains("[state]"));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_says_on_stderr_when_the_binary_on_disk_is_newer_than_the_daemon() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    // A copy of dsh of the test's own, whose mtime the test may set.
    let daemon = SocketDaemon::start_copy(dir.path(), "").await;
    let bin = dir.path().join("bin/dsh");
    age(&bin, 3600);
    let (socket, state, config) = (
        daemon.socket.clone(),
        daemon.state.clone(),
        daemon.config.clone(),
    );

    // What an editor sees: an answer on stdout; the note, if any, on stderr.
    let launch = || async {
        let mut cmd = tokio::process::Command::new(&bin);
        cmd.args(["acp", "--socket"])
            .arg(&socket)
            .arg("--state-dir")
            .arg(&state)
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let mut client =
            common::client::Client::new(child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let init = client.initialize().await;
        assert_eq!(init["protocolVersion"], 1);
        drop(client);
        child.wait().await.unwrap();
        let mut said = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut said)
            .await
            .unwrap();
        said
    };
    assert_eq!(launch().await, "", "the daemon is newer than the binary");
    set_mtime(&bin, SystemTime::now() + Duration::from_secs(60));
    let said = launch().await;
    assert!(
        said.starts_with("dsh: the dsh binary on disk (dsh ")
            && said.contains(&format!(
                "is newer than the running daemon (pid {}, started ",
                daemon.pid
            )),
        "{said}"
    );
    daemon.stop().await;
}

/// Issue 42 (part 3): a `serve --stdio` daemon has no socket, so `dsh gc` beside it
/// works on the directory alone. Before, its keep-list knew only the sessions' logs, and
/// the running task's output file (the newest, past `spill_max_bytes`) was removed:
/// `bash_output` then said "removed by retention". Now the task records keep it; the dry
/// run and the real run say and do the same, and the count of kept files is right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_beside_a_stdio_daemon_keeps_its_running_tasks_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let state = d.join("state");
    let spill = state.join("spill");
    let token = crate::common::token();
    let (_daemon, mut c) = crate::common::daemon::stdio_daemon(
        d,
        "[permissions]\ndefault_mode = \"auto\"\n[state]\nspill_max_bytes = 1000\n",
        &[],
    )
    .await;
    let ws = workspace(d, "ws");
    let s = c.new_session(&ws).await;
    let task = c
        .start_task(
            &s,
            &format!("head -c 3000 /dev/zero | tr '\\0' x; exec sleep 1000.{token}"),
        )
        .await;
    let task_file = spill.join(format!("{task}.stdout"));
    until("the task's output file", || {
        std::fs::metadata(&task_file).is_ok_and(|m| m.len() == 3000)
    })
    .await;
    for (name, days) in [("old-1.stdout", 1), ("old-2.stdout", 2)] {
        write(&spill.join(name), 600);
        age(&spill.join(name), days * DAY);
    }
    let task_files = std::fs::read_dir(&spill)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("{task}."))
        })
        .count();
    let config = d.join("dsh.toml");
    let none = d.join("run/none.sock");
    let (dry, err, ok) = gc(&none, &state, &config, &["--dry-run"]);
    assert!(ok, "{err}");
    let size = "the oldest while spill files held more than 1000 bytes";
    let expected_start = format!(
        "would remove {} (600 bytes; {size})\nwould remove {} (600 bytes; {size})\n\
         would remove 2 file(s), 1.2 KiB (spill files: {} holding ",
        spill.join("old-2.stdout").display(),
        spill.join("old-1.stdout").display(),
        task_files + 2,
    );
    assert!(dry.starts_with(&expected_start), "{dry}");
    assert!(
        dry.ends_with(&format!(
            ", {task_files} kept in use; no daemon runs: applied to the state directory directly)\n"
        )),
        "{dry}"
    );
    let (done, err, ok) = gc(&none, &state, &config, &[]);
    assert!(ok, "{err}");
    assert_eq!(done, dry.replace("would remove", "removed"));
    assert!(task_file.is_file(), "the running task's output was removed");
    let (text, is_error) = c
        .tool(Some(&s), "bash_output", json!({"task_id": task}))
        .await;
    assert!(!is_error, "{text}");
    assert!(text.contains(&"x".repeat(3000)), "{text}");
    assert!(!text.contains("removed by retention"), "{text}");
    let (text, _) = c
        .tool(Some(&s), "bash_kill", json!({"task_id": task}))
        .await;
    assert_eq!(text, format!("killed background task {task}"));
    assert!(crate::common::with_token(&token).is_empty());
}
