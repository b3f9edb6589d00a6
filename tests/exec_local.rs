//! The local executor against real processes: rules E1-E5, T2, T4 (timeouts),
//! T6-T8 as the seam sees them. Rule ids are in the test names.

mod common;

use common::*;
use dsh::exec::{BashExecutor, ExecError, ExecRequest, KillOutcome, Spill, TaskStatus};
use std::ffi::OsString;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

fn req(command: &str, workdir: &std::path::Path) -> ExecRequest {
    ExecRequest {
        command: command.to_string(),
        workdir: Some(workdir.to_path_buf()),
        ..ExecRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e1_exit_code_and_both_streams() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    let spec = exec.resolve(req("echo out; echo err >&2; exit 3", dir.path()));
    let out = exec.run(spec, CancellationToken::new()).await.unwrap();
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.signal, None);
    assert!(!out.timed_out && !out.aborted);
    assert_eq!(out.stdout.text, "out\n");
    assert_eq!(out.stderr.text, "err\n");
    assert!(!out.stdout.truncated);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e1_signal_death_is_a_normal_result() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    let spec = exec.resolve(req("kill -TERM $$", dir.path()));
    let out = exec.run(spec, CancellationToken::new()).await.unwrap();
    assert_eq!(out.signal, Some(libc::SIGTERM));
    assert_eq!(out.exit_code, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t2_resolve_defaults_and_caps() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = test_config(dir.path());
    cfg.cwd = Some(PathBuf::from("/usr"));
    cfg.max_timeout_ms = 1000;
    cfg.default_timeout_ms = 500;
    let exec = dsh::exec::LocalExecutor::new(&cfg).unwrap();
    let spec = exec.resolve(ExecRequest {
        command: "true".into(),
        workdir: Some(PathBuf::from("lib")),
        timeout_ms: Some(5000),
        scope: None,
    });
    assert_eq!(spec.workdir, PathBuf::from("/usr/lib"));
    assert_eq!(spec.timeout_ms, 1000);
    let spec = exec.resolve(ExecRequest {
        command: "true".into(),
        ..ExecRequest::default()
    });
    assert_eq!(spec.workdir, PathBuf::from("/usr"));
    assert_eq!(spec.timeout_ms, 500);
    let spec = exec.resolve(req("pwd", dir.path()));
    assert_eq!(spec.workdir, dir.path());
    let out = exec.run(spec, CancellationToken::new()).await.unwrap();
    assert_eq!(out.stdout.text.trim_end(), dir.path().to_str().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t2_missing_or_file_workdir_is_an_infrastructure_error() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    let missing = dir.path().join("nope");
    let err = exec
        .run(
            exec.resolve(req("true", &missing)),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err, ExecError::WorkdirMissing(missing.clone()));
    assert!(err.to_string().contains(missing.to_str().unwrap()));
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let err = exec
        .start(exec.resolve(req("true", &file)))
        .await
        .unwrap_err();
    assert_eq!(err, ExecError::WorkdirNotDirectory(file));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e4_environment_is_filtered_and_stdin_is_dev_null() {
    let dir = tempfile::tempdir().unwrap();
    let base: Vec<(OsString, OsString)> = [
        ("PATH", std::env::var("PATH").unwrap().as_str()),
        ("MY_API_KEY", "k"),
        ("GH_TOKEN", "t"),
        ("db_secret", "s"),
        ("Monkey", "m"),
        ("KEEP_ME", "yes"),
        ("TERM", "xterm-256color"),
        ("PAGER", "less"),
    ]
    .iter()
    .map(|(k, v)| (k.into(), v.into()))
    .collect();
    let exec = dsh::exec::LocalExecutor::with_env(&test_config(dir.path()), base).unwrap();
    let spec = exec.resolve(req("env | sort; readlink /proc/self/fd/0; cat", dir.path()));
    let out = exec.run(spec, CancellationToken::new()).await.unwrap();
    let text = out.stdout.text;
    for gone in ["MY_API_KEY", "GH_TOKEN", "db_secret", "Monkey"] {
        assert!(
            !text.contains(&format!("{gone}=")),
            "{gone} leaked:\n{text}"
        );
    }
    for line in [
        "KEEP_ME=yes",
        "NO_COLOR=1",
        "TERM=dumb",
        "PAGER=cat",
        "GIT_PAGER=cat",
        "GIT_TERMINAL_PROMPT=0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
    }
    assert!(
        text.lines().any(|l| l == "/dev/null"),
        "stdin is not /dev/null:\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t4_timeout_of_term_trapping_command_escalates_to_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    let mut spec = exec.resolve(req("trap '' TERM; echo started; sleep 1000", dir.path()));
    spec.timeout_ms = 200;
    let out = exec.run(spec, CancellationToken::new()).await.unwrap();
    assert!(out.timed_out);
    assert_eq!(out.signal, Some(libc::SIGKILL));
    assert_eq!(out.stdout.text, "started\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t4_timed_out_is_kept_when_the_command_exits_zero_on_term() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    let mut spec = exec.resolve(req("trap 'exit 0' TERM; sleep 1000 & wait", dir.path()));
    spec.timeout_ms = 200;
    let out = exec.run(spec, CancellationToken::new()).await.unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.signal, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e3_escaped_processes_die_on_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    let pidfile = dir.path().join("pids");
    let ready = Fifo::new(dir.path(), "ready");
    // The fifo write blocks (nobody reads it): the command sits there until the timer.
    let mut spec = exec.resolve(req(
        &escape_script(&pidfile, &ready, "sleep 1000"),
        dir.path(),
    ));
    spec.timeout_ms = 3000;
    let out = exec.run(spec, CancellationToken::new()).await.unwrap();
    assert!(out.timed_out);
    assert_all_dead(&pids(&pidfile), "after timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e3_escaped_processes_die_on_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    let pidfile = dir.path().join("pids");
    let ready = Fifo::new(dir.path(), "ready");
    let spec = exec.resolve(req(
        &escape_script(&pidfile, &ready, "sleep 1000"),
        dir.path(),
    ));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { exec.run(spec, cancel).await }
    });
    ready.wait().await;
    assert_eq!(
        pids(&pidfile).iter().filter(|p| alive(**p)).count(),
        ESCAPE_PATTERNS
    );
    cancel.cancel();
    let out = run.await.unwrap().unwrap();
    assert!(out.aborted);
    assert!(!out.timed_out);
    assert_all_dead(&pids(&pidfile), "after cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e3_escaped_processes_die_when_the_caller_drops_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let exec = std::sync::Arc::new(local(dir.path()));
    let pidfile = dir.path().join("pids");
    let ready = Fifo::new(dir.path(), "ready");
    let spec = exec.resolve(req(
        &escape_script(&pidfile, &ready, "sleep 1000"),
        dir.path(),
    ));
    let run = tokio::spawn({
        let exec = exec.clone();
        async move { exec.run(spec, CancellationToken::new()).await }
    });
    ready.wait().await;
    run.abort();
    let _ = run.await;
    // Dropping the call stops the command; shutdown waits for that stop to finish.
    exec.shutdown().await;
    assert_all_dead(&pids(&pidfile), "after the caller went away");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e3_t11_escaped_processes_die_on_kill() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    let pidfile = dir.path().join("pids");
    let ready = Fifo::new(dir.path(), "ready");
    let spec = exec.resolve(req(
        &escape_script(&pidfile, &ready, "sleep 1000"),
        dir.path(),
    ));
    let task = exec.start(spec).await.unwrap();
    assert_eq!(task.status, TaskStatus::Running);
    ready.wait().await;
    assert_eq!(exec.kill(&task.id).await, KillOutcome::Killed);
    assert_all_dead(&pids(&pidfile), "after kill");
    assert_eq!(
        exec.get(&task.id).unwrap().status,
        TaskStatus::Killed {
            signal: Some(libc::SIGTERM)
        }
    );
    assert_eq!(exec.kill(&task.id).await, KillOutcome::AlreadyFinished);
    assert_eq!(exec.kill("bash-999999").await, KillOutcome::Unknown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e3_everything_dies_on_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    let pidfile = dir.path().join("pids");
    let ready = Fifo::new(dir.path(), "ready");
    let spec = exec.resolve(req(
        &escape_script(&pidfile, &ready, "trap '' TERM; sleep 1000"),
        dir.path(),
    ));
    let task = exec.start(spec).await.unwrap();
    ready.wait().await;
    // A finished foreground run that left a detached process behind.
    let detached_pid = dir.path().join("detached");
    let cmd = format!(
        "setsid bash -c 'echo $$ > {p}; exec sleep 1000' >/dev/null 2>&1 &
         while [ ! -s {p} ]; do sleep 0.01; done",
        p = detached_pid.display()
    );
    let out = exec
        .run(
            exec.resolve(req(&cmd, dir.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0));
    let detached = pids(&detached_pid)[0];
    assert!(alive(detached), "a setsid child survives a normal exit");
    exec.shutdown().await;
    assert_all_dead(&pids(&pidfile), "after shutdown");
    assert!(!alive(detached), "detached process survived shutdown");
    assert_eq!(
        exec.get(&task.id).unwrap().status,
        TaskStatus::Killed {
            signal: Some(libc::SIGKILL)
        }
    );
    let err = exec
        .run(
            exec.resolve(req("true", dir.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err, ExecError::ShuttingDown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e3_kill_scope_ends_running_tasks_and_detached_leftovers_of_that_scope_only() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    let start_detached = |name: &str| {
        let file = dir.path().join(name);
        let cmd = format!(
            "setsid bash -c 'echo $$ > {p}; exec sleep 1000' >/dev/null 2>&1 &
             while [ ! -s {p} ]; do sleep 0.01; done",
            p = file.display()
        );
        (file, cmd)
    };
    let (mine_file, mine_cmd) = start_detached("mine");
    let (theirs_file, theirs_cmd) = start_detached("theirs");
    for (cmd, scope) in [(&mine_cmd, "s1"), (&theirs_cmd, "s2")] {
        let mut r = req(cmd, dir.path());
        r.scope = Some(scope.into());
        exec.run(exec.resolve(r), CancellationToken::new())
            .await
            .unwrap();
    }
    let mut r = req("sleep 1000", dir.path());
    r.scope = Some("s1".into());
    let task = exec.start(exec.resolve(r)).await.unwrap();
    exec.kill_scope("s1").await;
    assert!(!alive(pids(&mine_file)[0]));
    assert!(
        alive(pids(&theirs_file)[0]),
        "another scope's process was killed"
    );
    assert!(exec.get(&task.id).unwrap().status.is_finished());
    exec.shutdown().await;
    assert!(!alive(pids(&theirs_file)[0]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e3_plain_background_child_of_a_foreground_command_is_gone_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    for redirect in ["", ">/dev/null 2>&1"] {
        let file = dir.path().join(format!("pid{}", redirect.len()));
        let cmd = format!(
            "bash -c 'echo $$ > {p}; exec sleep 1000' {redirect} &
             while [ ! -s {p} ]; do sleep 0.01; done; echo done",
            p = file.display()
        );
        let out = exec
            .run(
                exec.resolve(req(&cmd, dir.path())),
                CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(out.stdout.text, "done\n");
        assert_eq!(out.exit_code, Some(0));
        let pid = pids(&file)[0];
        assert!(
            !alive(pid),
            "`sleep 1000 &` {redirect} outlived its command"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2_t8_background_reads_are_incremental() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    let mut done = exec.take_completions().unwrap();
    assert!(
        exec.take_completions().is_none(),
        "completions are handed out once"
    );
    let ready = Fifo::new(dir.path(), "ready");
    let go = Fifo::new(dir.path(), "go");
    let cmd = format!(
        "echo one; echo e1 >&2; echo x > {r}; cat {g} > /dev/null; echo two; exit 4",
        r = ready.path(),
        g = go.path()
    );
    let task = exec
        .start(exec.resolve(req(&cmd, dir.path())))
        .await
        .unwrap();
    assert!(task.id.starts_with("bash-"));
    ready.wait().await;
    // What the command wrote may still be in the pipe: read until it arrives,
    // checking that the pieces add up (reads are incremental).
    let (mut out, mut err) = (String::new(), String::new());
    for _ in 0..5000 {
        let r = exec.read(&task.id).unwrap();
        assert_eq!(r.status, TaskStatus::Running);
        out.push_str(&r.stdout.text);
        err.push_str(&r.stderr.text);
        if (out.as_str(), err.as_str()) == ("one\n", "e1\n") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    assert_eq!((out.as_str(), err.as_str()), ("one\n", "e1\n"));
    let r = exec.read(&task.id).unwrap();
    assert_eq!((r.stdout.text.as_str(), r.stderr.text.as_str()), ("", ""));
    go.release().await;
    let finished = done.recv().await.unwrap();
    assert_eq!(finished.id, task.id);
    assert_eq!(finished.status, TaskStatus::Completed { exit_code: 4 });
    let r = exec.read(&task.id).unwrap();
    assert_eq!(r.stdout.text, "two\n");
    assert!(!r.stdout.dropped);
    assert_eq!(r.status, TaskStatus::Completed { exit_code: 4 });
    assert!(exec.read("bash-0").is_none());
    assert_eq!(exec.list().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t9_a_read_that_lost_data_is_flagged_with_the_spill_path() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = test_config(dir.path());
    cfg.max_output_bytes = 1000;
    let exec = dsh::exec::LocalExecutor::new(&cfg).unwrap();
    let mut done = exec.take_completions().unwrap();
    let task = exec
        .start(exec.resolve(req("seq 1 2000", dir.path())))
        .await
        .unwrap();
    done.recv().await.unwrap();
    let r = exec.read(&task.id).unwrap();
    assert!(r.stdout.dropped);
    assert!(r.stdout.text.ends_with("1999\n2000\n"));
    assert!(r.stdout.text.len() <= 1000);
    let Spill::Written(path) = r.stdout.spill else {
        panic!("{:?}", r.stdout.spill)
    };
    let expected: String = (1..=2000).map(|i| format!("{i}\n")).collect();
    assert_eq!(std::fs::read_to_string(path).unwrap(), expected);
    let again = exec.read(&task.id).unwrap();
    assert_eq!(again.stdout.text, "");
    assert!(!again.stdout.dropped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t6_invalid_utf8_is_rendered_lossily() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    let spec = exec.resolve(req(r"printf 'a\xffb\n'", dir.path()));
    let out = exec.run(spec, CancellationToken::new()).await.unwrap();
    assert_eq!(out.stdout.text, "a\u{fffd}b\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t7_ids_never_repeat_across_executors_on_one_state_dir() {
    let dir = tempfile::tempdir().unwrap();
    let first = local(dir.path());
    let a = first
        .start(first.resolve(req("true", dir.path())))
        .await
        .unwrap();
    let b = first
        .start(first.resolve(req("true", dir.path())))
        .await
        .unwrap();
    first.shutdown().await;
    let second = local(dir.path());
    let c = second
        .start(second.resolve(req("true", dir.path())))
        .await
        .unwrap();
    second.shutdown().await;
    assert_eq!([a.id, b.id, c.id], ["bash-1", "bash-2", "bash-3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2_spawn_failure_leaves_a_killed_task_that_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let base = vec![(OsString::from("PATH"), OsString::from("/nonexistent"))];
    let exec = dsh::exec::LocalExecutor::with_env(&test_config(dir.path()), base).unwrap();
    let mut done = exec.take_completions().unwrap();
    let task = exec
        .start(exec.resolve(req("true", dir.path())))
        .await
        .unwrap();
    assert_eq!(task.status, TaskStatus::Killed { signal: None });
    assert_eq!(done.recv().await.unwrap().id, task.id);
    let r = exec.read(&task.id).unwrap();
    assert!(
        r.stderr.text.starts_with("spawn failed: "),
        "{}",
        r.stderr.text
    );
    let err = exec
        .run(
            exec.resolve(req("true", dir.path())),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ExecError::Spawn(_)), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t14_each_finished_task_is_delivered_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let exec = local(dir.path());
    let mut done = exec.take_completions().unwrap();
    let mut ids = Vec::new();
    for cmd in ["true", "exit 2", "sleep 1000"] {
        ids.push(
            exec.start(exec.resolve(req(cmd, dir.path())))
                .await
                .unwrap()
                .id,
        );
    }
    exec.kill(&ids[2]).await;
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(done.recv().await.unwrap().id);
    }
    exec.shutdown().await;
    seen.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(seen, want);
    assert!(done.try_recv().is_err(), "a task was delivered twice");
}
