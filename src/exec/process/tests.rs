use super::*;
use crate::exec::{KillOutcome, LocalExecutor};

/// Bytes of output all tasks of `exec` hold in memory.
fn held(exec: &LocalExecutor) -> usize {
    lock(&exec.inner.tasks)
        .values()
        .map(|t| t.output_heap_bytes())
        .sum()
}

/// A record a dead daemon left running: `recover` ends what still carries its mark,
/// serves it as `Lost` with the output its file holds, and tells it as newly lost
/// once; another executor of the same daemon does not take it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_ends_a_dead_daemons_task_and_serves_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let config = ExecConfig {
        state_dir: Some(dir.path().to_path_buf()),
        ..ExecConfig::default()
    };
    let spill = dir.path().join("spill");
    std::fs::create_dir_all(&spill).unwrap();
    std::fs::write(spill.join("bash-5.stdout"), "before the crash\n").unwrap();
    // Not this state's tag: only the record's own mark finds it, not the stale sweep.
    let mark = format!("elsewhere:999999999.1:x:{}/1", std::process::id());
    let mut leftover = std::process::Command::new("sleep")
        .arg("1000")
        .env(MARK_VAR, &mark)
        .spawn()
        .unwrap();
    let record = TaskRecord {
        version: crate::exec::records::RECORD_VERSION,
        id: TaskId::new(5),
        scope: Some("s1".into()),
        command: "make".into(),
        workdir: dir.path().to_path_buf(),
        started_at_ms: 1_000,
        executor: "local".into(),
        stdout: spill.join("bash-5.stdout"),
        stderr: spill.join("bash-5.stderr"),
        pid: leftover.id() as i32,
        mark,
        held_by: "999999999.1".into(),
        state: RecordState::Running,
    };
    TaskRecords::new(dir.path()).save(&record).unwrap();
    let exec = LocalExecutor::new(&config).unwrap();
    assert!(exec.get(TaskId::new(5)).is_none(), "nothing before recover");
    let found = exec.recover();
    assert_eq!(found.len(), 1);
    assert!(found[0].newly_lost);
    assert_eq!(found[0].info.status, TaskStatus::Lost);
    assert_eq!(found[0].info.scope.as_deref(), Some("s1"));
    let status = leftover.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "its leftover was killed");
    let read = exec.read(TaskId::new(5)).unwrap();
    assert_eq!(read.stdout.text, "before the crash\n");
    assert_eq!(
        (read.stderr.text.as_str(), read.status),
        ("", TaskStatus::Lost)
    );
    assert_eq!(
        exec.kill(TaskId::new(5)).await,
        KillOutcome::AlreadyFinished
    );
    let saved = TaskRecords::new(dir.path()).load_all();
    assert!(matches!(saved[0].state, RecordState::Lost { .. }));
    assert_eq!(saved[0].held_by, procs::own_identity());
    // A second executor of this daemon (the sandbox pair's other side) leaves it.
    let other = LocalExecutor::new(&config).unwrap();
    assert!(other.recover().is_empty());
    exec.shutdown().await;
    other.shutdown().await;
}

/// The state directory's sweep asks which spill files running tasks write
/// (`crate::state_dir`): a running task's, not a finished one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spill_files_in_use_are_the_running_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let config = ExecConfig {
        state_dir: Some(dir.path().to_path_buf()),
        kill_grace_ms: 300,
        max_output_bytes: 100,
        ..ExecConfig::default()
    };
    let exec = LocalExecutor::new(&config).unwrap();
    let mut done = exec.take_completions().unwrap();
    let start = |command: &str| {
        exec.resolve(ExecRequest {
            command: command.into(),
            workdir: Some(dir.path().to_path_buf()),
            ..ExecRequest::default()
        })
    };
    let quiet = exec.start(start("head -c 500 /dev/zero")).await.unwrap();
    assert_eq!(done.recv().await.unwrap().id, quiet.id);
    let task = exec
        .start(start("head -c 500 /dev/zero; exec sleep 1000"))
        .await
        .unwrap();
    let file = dir.path().join(format!("spill/{}.stdout", task.id));
    while std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0) < 500 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(exec.spill_files_in_use(), [file]);
    exec.kill(task.id).await;
    assert!(exec.spill_files_in_use().is_empty());
    exec.shutdown().await;
}

/// The measure of the retention rule: ten finished tasks that each fill both
/// tails held 10 x 2 x `max_output_bytes` before it (unbounded in the number of
/// tasks); with it they hold at most the budget, and nothing once read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_output_memory_is_bounded_and_freed_when_read() {
    let dir = tempfile::tempdir().unwrap();
    let config = ExecConfig {
        state_dir: Some(dir.path().to_path_buf()),
        kill_grace_ms: 300,
        drain_ms: 300,
        max_output_bytes: 10_000,
        finished_output_bytes: 50_000,
        ..ExecConfig::default()
    };
    let exec = LocalExecutor::new(&config).unwrap();
    let mut done = exec.take_completions().unwrap();
    let mut ids = Vec::new();
    for _ in 0..10 {
        let spec = exec.resolve(ExecRequest {
            command: "head -c 30000 /dev/zero; head -c 30000 /dev/zero >&2".into(),
            workdir: Some(dir.path().to_path_buf()),
            ..ExecRequest::default()
        });
        ids.push(exec.start(spec).await.unwrap().id);
    }
    for _ in 0..10 {
        done.recv().await.unwrap();
    }
    let unbounded = 10 * 2 * 10_000;
    let bounded = held(&exec);
    // Two tasks' tails (2 x 20_000) fit the budget, a third would not.
    assert!((40_000..=50_000).contains(&bounded), "{bounded}");
    let mut delivered = 0;
    for id in &ids {
        let r = exec.read(*id).unwrap();
        assert_eq!(r.status, TaskStatus::Completed { exit_code: 0 });
        // Every stream outgrew memory, so every read flags a drop and names
        // the file; only the tasks still held deliver their tails.
        assert!(r.stdout.dropped && r.stderr.dropped);
        assert!(matches!(r.stdout.spill, crate::exec::Spill::Written(_)));
        if !r.stdout.text.is_empty() {
            assert_eq!((r.stdout.text.len(), r.stderr.text.len()), (10_000, 10_000));
            delivered += 1;
        }
    }
    assert_eq!(delivered, 2);
    assert_eq!(held(&exec), 0, "output read to its end is freed");
    eprintln!(
        "10 finished tasks: {unbounded} bytes unbounded, {bounded} with the budget, 0 once read"
    );
    exec.shutdown().await;
}
