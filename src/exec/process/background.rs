//! Background tasks beyond their start: each one's record on disk while it runs, its
//! supervision until it ends or an upgrade lets it go, its adoption by the next program,
//! and the tasks an earlier daemon left, from their records.

use super::*;

impl<L: Launcher> Inner<L> {
    /// Writes a running task's record (once `recover` turned records on). A record
    /// that cannot be written costs only the report after a crash: the task runs.
    pub(super) fn record(&self, task: &Task, pid: i32) {
        let Some(records) = self.records.get() else {
            return;
        };
        let record = TaskRecord {
            version: crate::exec::records::RECORD_VERSION,
            id: task.id,
            scope: task.job.scope.clone(),
            command: task.command.clone(),
            workdir: task.workdir.clone(),
            started_at_ms: millis(task.started_at),
            executor: self.launcher.kind().to_string(),
            stdout: self
                .spill_dir
                .join(outfiles::task_file_name(task.id, OutputStream::Stdout)),
            stderr: self
                .spill_dir
                .join(outfiles::task_file_name(task.id, OutputStream::Stderr)),
            pid,
            mark: task.job.mark.clone(),
            held_by: procs::own_identity(),
            state: RecordState::Running,
        };
        if let Err(e) = records.save(&record) {
            tracing::warn!(id = %task.id, "cannot record the task: {e}");
        }
    }

    /// A task of an earlier daemon, from its record: finished, `Lost`, its output the
    /// files it wrote.
    pub(super) fn lost_task(&self, record: &TaskRecord) -> Arc<Task> {
        let (_, done) = &self.drained;
        let stream =
            |path: &Path| Arc::new(Collector::recovered(self.max_output_bytes, path.into()));
        Arc::new(Task {
            id: record.id,
            command: record.command.clone(),
            workdir: record.workdir.clone(),
            started_at: SystemTime::UNIX_EPOCH + Duration::from_millis(record.started_at_ms),
            job: Job {
                mark: record.mark.clone(),
                scope: record.scope.clone(),
                stdout: stream(&record.stdout),
                stderr: stream(&record.stderr),
                watch: None,
            },
            status: Mutex::new(TaskStatus::Lost),
            stop: done.clone(),
            finished: done.clone(),
        })
    }

    /// Supervises a background task until it ends (then its status is final) or an
    /// upgrade lets it go (then it leaves this executor as a [`HandedTask`], running).
    pub(super) fn supervise_background(self: &Arc<Self>, task: Arc<Task>, child: HostProcess) {
        let (handed, handing) = oneshot::channel();
        lock(&self.handing).insert(task.id.number(), handing);
        let let_go = lock(&self.let_go).clone();
        let inner = self.clone();
        self.supervisors.spawn(async move {
            match inner
                .supervise(child, &task.job, None, &task.stop, Some(&let_go))
                .await
            {
                Ok(ended) => {
                    lock(&inner.handing).remove(&task.id.number());
                    inner.publish_spills(&task.job).await;
                    let status = match (ended.stopped || ended.lost.is_some(), ended.exit_code) {
                        (false, Some(code)) => TaskStatus::Completed { exit_code: code },
                        _ => TaskStatus::Killed {
                            signal: ended.signal,
                        },
                    };
                    inner.finish(&task, status);
                }
                Err(LetGo {
                    child,
                    stdout,
                    stderr,
                }) => {
                    let pid = child.id();
                    // Booked again before the host process's own booking goes, so the
                    // orphan reaper never takes its exit before the next supervisor.
                    let booking = children::starting().owned(pid);
                    drop(child);
                    lock(&inner.tasks).remove(&task.id.number());
                    let _ = handed.send(HandedTask {
                        id: task.id,
                        pid,
                        stdout: stdout.and_then(|p| p.into_nonblocking_fd().ok()),
                        stderr: stderr.and_then(|p| p.into_nonblocking_fd().ok()),
                        stdout_read: task.job.stdout.read_position(),
                        stderr_read: task.job.stderr.read_position(),
                        booking: Some(booking),
                    });
                }
            }
        });
    }

    /// A task let go by [`BashExecutor::let_go_tasks`], from its record: running again
    /// under this executor, its output appended to the same files.
    pub(super) fn adopt(
        self: &Arc<Self>,
        record: &TaskRecord,
        handed: HandedTask,
    ) -> Result<TaskInfo, String> {
        let stream = |path: &Path, read: u64, stream: OutputStream| {
            Collector::resumed(
                self.max_output_bytes,
                path.to_path_buf(),
                read,
                Some(SpillTarget {
                    dir: self.spill_dir.clone(),
                    file_name: outfiles::task_file_name(record.id, stream),
                    from_first_byte: true,
                }),
            )
            .map(Arc::new)
            .map_err(|e| format!("its output file {} cannot be opened: {e}", path.display()))
        };
        let task = Arc::new(Task {
            id: record.id,
            command: record.command.clone(),
            workdir: record.workdir.clone(),
            started_at: SystemTime::UNIX_EPOCH + Duration::from_millis(record.started_at_ms),
            job: Job {
                mark: record.mark.clone(),
                scope: record.scope.clone(),
                stdout: stream(&record.stdout, handed.stdout_read, OutputStream::Stdout)?,
                stderr: stream(&record.stderr, handed.stderr_read, OutputStream::Stderr)?,
                watch: None,
            },
            status: Mutex::new(TaskStatus::Running),
            stop: self.shutdown.child_token(),
            finished: CancellationToken::new(),
        });
        let booking = handed
            .booking
            .unwrap_or_else(|| children::starting().owned(handed.pid));
        let child = HostProcess::adopt(handed.pid, handed.stdout, handed.stderr, booking)
            .map_err(|e| format!("its process {} cannot be watched: {e}", handed.pid))?;
        lock(&self.tasks).insert(record.id.number(), task.clone());
        let info = task.info();
        self.supervise_background(task, child);
        Ok(info)
    }
}
