//! The executor seam's methods over the engine: what every kind built on
//! [`ProcessExecutor`] answers.

use super::*;
use tokio::io::AsyncWriteExt;

#[async_trait::async_trait]
impl<L: Launcher> BashExecutor for ProcessExecutor<L> {
    fn kind(&self) -> &'static str {
        self.inner.launcher.kind()
    }

    /// Commands here run outside no other executor's containment: the pair is
    /// `escalation::Escalating`'s.
    fn outside(&self) -> Option<Arc<dyn BashExecutor>> {
        None
    }

    fn set_connection_judge(&self, judge: Arc<dyn crate::exec::netproxy::ConnectionJudge>) {
        self.inner.launcher.set_connection_judge(judge);
    }

    fn proxied_connections(&self) -> Vec<(String, usize)> {
        self.inner.launcher.proxied_connections()
    }

    fn resolve(&self, request: ExecRequest) -> ExecSpec {
        let inner = &self.inner;
        let workdir = match request.workdir {
            Some(dir) if dir.is_absolute() => dir,
            Some(dir) => inner.fallback_cwd.join(dir),
            None => inner.fallback_cwd.clone(),
        };
        let timeout_ms = request
            .timeout_ms
            .unwrap_or(inner.default_timeout_ms)
            .min(inner.max_timeout_ms);
        ExecSpec {
            command: request.command,
            workdir,
            timeout_ms,
            scope: request.scope,
            writable_roots: request.writable_roots,
            call_id: request.call_id,
            task_id: None,
        }
    }

    async fn run(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, ExecError> {
        self.run_with(spec, cancel, None).await
    }

    async fn run_watched(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
        watch: OutputWatch,
    ) -> Result<RunOutcome, ExecError> {
        self.run_with(spec, cancel, Some(watch)).await
    }

    async fn start(&self, spec: ExecSpec) -> Result<TaskInfo, ExecError> {
        let inner = self.inner.clone();
        if inner.shutting_down.load(Ordering::SeqCst) {
            return Err(ExecError::ShuttingDown);
        }
        inner.launcher.check_workdir(&spec.workdir).await?;
        let id = inner
            .ids
            .next()
            .map_err(|e| ExecError::Spawn(format!("cannot allocate a task id: {e}")))?;
        let number = id.number();
        let (mark, _) = inner.next_mark(spec.scope.as_ref());
        let name = |stream| outfiles::task_file_name(id, stream);
        let task = Arc::new(Task {
            job: Job {
                mark,
                scope: spec.scope.clone(),
                stdout: inner.collector(name(OutputStream::Stdout), true),
                stderr: inner.collector(name(OutputStream::Stderr), true),
                watch: None,
            },
            id,
            command: spec.command.clone(),
            workdir: spec.workdir.clone(),
            started_at: SystemTime::now(),
            status: Mutex::new(TaskStatus::Running),
            stop: inner.shutdown.child_token(),
            finished: CancellationToken::new(),
        });
        lock(&inner.tasks).insert(number, task.clone());
        let spec = ExecSpec {
            task_id: Some(task.id),
            ..spec
        };
        match inner.spawn(&spec, &task.job.mark) {
            Err(e) => {
                task.job.stderr.push(format!("{e}\n").as_bytes());
                task.job.stdout.close();
                task.job.stderr.close();
                inner.finish(&task, TaskStatus::Killed { signal: None });
            }
            Ok(child) => {
                inner.record(&task, child.id());
                inner.supervise_background(task.clone(), child);
            }
        }
        Ok(task.info())
    }

    fn get(&self, id: TaskId) -> Option<TaskInfo> {
        self.inner.task(id).map(|t| t.info())
    }

    fn list(&self) -> Vec<TaskInfo> {
        lock(&self.inner.tasks).values().map(|t| t.info()).collect()
    }

    fn spill_files_in_use(&self) -> Vec<PathBuf> {
        let running: Vec<Arc<Task>> = lock(&self.inner.tasks)
            .values()
            .filter(|t| !lock(&t.status).is_finished())
            .cloned()
            .collect();
        // A background task's output files are written from its first byte, so they
        // are its own whether or not they spilled yet.
        running
            .iter()
            .flat_map(|t| {
                [OutputStream::Stdout, OutputStream::Stderr].map(|stream| {
                    self.inner
                        .spill_dir
                        .join(outfiles::task_file_name(t.id, stream))
                })
            })
            .filter(|path| path.exists())
            .collect()
    }

    fn read(&self, id: TaskId) -> Option<TaskRead> {
        let task = self.inner.task(id)?;
        // Status first: if it is final, both streams are closed and complete, so
        // this read drains them for good.
        let status = *lock(&task.status);
        let read = TaskRead {
            stdout: task.job.stdout.read_new(),
            stderr: task.job.stderr.read_new(),
            status,
        };
        if status.is_finished() {
            // Everything was delivered now and nothing more will come: the tails
            // can only cost memory from here on.
            lock(&self.inner.retention).drained(task.id.number());
            task.release_output();
            self.inner.compact(&task);
        }
        Some(read)
    }

    fn task_changes(&self, id: TaskId) -> Option<TaskChanges> {
        let task = self.inner.task(id)?;
        Some(TaskChanges::new(
            &task.job.stdout,
            &task.job.stderr,
            task.finished.clone(),
        ))
    }

    async fn kill(&self, id: TaskId) -> KillOutcome {
        let Some(task) = self.inner.task(id) else {
            return KillOutcome::Unknown;
        };
        if task.finished.is_cancelled() {
            let inner = &self.inner;
            // A lost task of the ssh helper has no mark: nothing of it runs here.
            if !task.job.mark.is_empty() {
                inner.launcher.stop(&task.job.mark, None, inner.grace).await;
            }
            return KillOutcome::AlreadyFinished;
        }
        task.stop.cancel();
        task.finished.cancelled().await;
        match *lock(&task.status) {
            TaskStatus::Killed { .. } => KillOutcome::Killed,
            _ => KillOutcome::AlreadyFinished,
        }
    }

    async fn kill_scope(&self, scope: &str) {
        let inner = &self.inner;
        let running: Vec<Arc<Task>> = lock(&inner.tasks)
            .values()
            .filter(|t| t.job.scope.as_deref() == Some(scope) && !t.finished.is_cancelled())
            .cloned()
            .collect();
        for task in &running {
            task.stop.cancel();
        }
        // Everything still marked with this scope: detached leftovers of finished
        // commands, and whatever the running ones started.
        let prefix = inner.scope_prefix(Some(&scope.to_string()));
        inner.launcher.stop_prefix(&prefix, inner.grace).await;
        for task in running {
            task.finished.cancelled().await;
        }
    }

    fn take_completions(&self) -> Option<mpsc::UnboundedReceiver<TaskInfo>> {
        lock(&self.inner.completions_rx).take()
    }

    fn recover(&self) -> Vec<RecoveredTask> {
        let inner = &self.inner;
        let records = TaskRecords::new(&inner.state_dir);
        if inner.records.set(records.clone()).is_err() {
            return Vec::new();
        }
        let _held = match records.lock() {
            Ok(held) => held,
            Err(e) => {
                tracing::warn!("cannot read the task records: {e}");
                return Vec::new();
            }
        };
        let me = procs::own_identity();
        let mut found = Vec::new();
        for mut record in records.load_all() {
            // Another executor of this daemon took it, or a live daemon runs it.
            if record.held_by == me || procs::owner_alive(&record.held_by) {
                continue;
            }
            let newly_lost = record.state == RecordState::Running;
            if newly_lost {
                // No mark: nothing of it ran here (the ssh helper's tasks).
                if !record.mark.is_empty() {
                    end_marked(&record.mark);
                }
                record.state = RecordState::Lost {
                    reason: LOST_REASON.to_string(),
                    lost_at_ms: millis(SystemTime::now()),
                };
            }
            record.held_by = me.clone();
            if let Err(e) = records.save(&record) {
                tracing::warn!(id = %record.id, "cannot update the task's record: {e}");
            }
            let task = inner.lost_task(&record);
            let release = {
                let mut book = lock(&inner.retention);
                book.finished(record.id.number(), task.output_heap_bytes())
            };
            lock(&inner.tasks).insert(record.id.number(), task.clone());
            for number in release {
                let old = lock(&inner.tasks).get(&number).cloned();
                if let Some(old) = old {
                    old.release_output();
                }
            }
            found.push(RecoveredTask {
                info: task.info(),
                newly_lost,
            });
        }
        if !found.is_empty() {
            tracing::warn!(
                count = found.iter().filter(|t| t.newly_lost).count(),
                "background tasks were lost when the previous daemon stopped"
            );
        }
        found
    }

    fn tasks_kept(&self) -> Vec<TaskInfo> {
        if self.inner.launcher.carries_tasks() {
            Vec::new()
        } else {
            self.running()
        }
    }

    async fn let_go_tasks(&self) -> Result<Vec<HandedTask>, CannotCarry> {
        let inner = &self.inner;
        if !inner.launcher.carries_tasks() {
            // Nothing of it is let go: with nothing running there is nothing to carry.
            CannotCarry::check(inner.launcher.kind(), &self.running())?;
            return Ok(Vec::new());
        }
        // Taken first: a task that finishes from here on hands nothing, and its
        // receiver then says so.
        let handing: Vec<_> = lock(&inner.handing).drain().collect();
        lock(&inner.let_go).cancel();
        let mut handed = Vec::new();
        for (_, receiver) in handing {
            if let Ok(task) = receiver.await {
                handed.push(task);
            }
        }
        *lock(&inner.let_go) = CancellationToken::new();
        Ok(handed)
    }

    fn adopt_tasks(&self, tasks: Vec<HandedTask>) -> Vec<(TaskInfo, Result<(), String>)> {
        let inner = &self.inner;
        let records: HashMap<TaskId, TaskRecord> = TaskRecords::new(&inner.state_dir)
            .load_all()
            .into_iter()
            .map(|r| (r.id, r))
            .collect();
        let mut adopted = Vec::new();
        for handed in tasks {
            let id = handed.id;
            let Some(record) = records.get(&id) else {
                // Nothing says what it is: ended, as a crash would leave it.
                // SAFETY: kill(2) of the host process's group, which the task leads.
                unsafe { libc::kill(-handed.pid, libc::SIGKILL) };
                tracing::error!(%id, "a handed-over task has no record: ended");
                continue;
            };
            match inner.adopt(record, handed) {
                Ok(info) => adopted.push((info, Ok(()))),
                Err(why) => {
                    end_marked(&record.mark);
                    let mut record = record.clone();
                    record.state = RecordState::Lost {
                        reason: format!("it could not be taken over after an upgrade: {why}"),
                        lost_at_ms: millis(SystemTime::now()),
                    };
                    if let Some(records) = inner.records.get() {
                        let _ = records.save(&record);
                    }
                    let task = inner.lost_task(&record);
                    lock(&inner.tasks).insert(id.number(), task.clone());
                    adopted.push((task.info(), Err(why)));
                }
            }
        }
        adopted
    }

    async fn start_service(
        &self,
        spec: ExecSpec,
        env: Vec<(String, String)>,
    ) -> Result<ServiceProcess, ExecError> {
        let inner = self.inner.clone();
        if inner.shutting_down.load(Ordering::SeqCst) {
            return Err(ExecError::ShuttingDown);
        }
        inner.launcher.check_workdir(&spec.workdir).await?;
        let (mark, _) = inner.next_mark(spec.scope.as_ref());
        let launch = inner.launcher.service_command(&spec, &mark, &env)?;
        let mut child = inner.spawn_command(launch.command, &mark, true, launch.env)?;
        // One fallible start, one cleanup: a host process that does not start, pipes
        // that were not made, or an env the server cannot be handed (EPIPE: the host
        // process is gone) fail the start, and what it left is ended as a stop would.
        let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let pid = child.id();
        let ready = async {
            inner.launcher.started(&mark, pid).await?;
            let (Some(mut stdin), Some(stdout), Some(stderr)) = pipes else {
                return Err("the server's pipes were not made".to_owned());
            };
            // Written whole before the stdin is handed over, so nothing the server's
            // client writes can come first.
            if !launch.stdin_preamble.is_empty() {
                let written = async {
                    stdin.write_all(&launch.stdin_preamble).await?;
                    stdin.flush().await
                };
                written
                    .await
                    .map_err(|e| format!("cannot hand the server its environment: {e}"))?;
            }
            Ok((stdin, stdout, stderr))
        }
        .await;
        let (stdin, stdout, stderr) = match ready {
            Ok(pipes) => pipes,
            Err(why) => {
                inner.launcher.stop(&mark, Some(pid), inner.grace).await;
                let _ = child.wait().await;
                return Err(ExecError::Spawn(why));
            }
        };
        let stop = inner.shutdown.child_token();
        let ended = CancellationToken::new();
        inner.supervisors.spawn({
            let (inner, stop, ended) = (inner.clone(), stop.clone(), ended.clone());
            async move {
                let sid = child.id();
                tokio::select! {
                    status = child.wait() => {
                        // A server lost with its connection (ssh) is gone from here but
                        // maybe not over there: the launcher ends it once it can.
                        let code = status.ok().and_then(|s| s.code());
                        let _ = inner.launcher.lost(code, &mark).await;
                        let _ = inner.launcher.after_exit(&mark, sid, inner.grace).await;
                    }
                    () = stop.cancelled() => {
                        inner.launcher.stop(&mark, Some(sid), inner.grace).await;
                        let _ = child.wait().await;
                    }
                }
                ended.cancel();
            }
        });
        Ok(ServiceProcess {
            stdin,
            stdout,
            stderr,
            handle: ServiceHandle::new(stop, ended),
        })
    }

    fn files_are_local(&self) -> bool {
        self.inner.launcher.files_are_local()
    }

    async fn stat_file(
        &self,
        request: &FileRequest,
        intent: FileIntent,
    ) -> Result<Option<FileStat>, FileError> {
        self.inner.launcher.stat_file(request, intent).await
    }

    async fn read_file(&self, request: &FileRequest) -> Result<crate::exec::FileRead, FileError> {
        self.inner.launcher.read_file(request).await
    }

    async fn file_containment(
        &self,
        request: &FileRequest,
        intent: FileIntent,
    ) -> Result<Option<crate::containment::Containment>, FileError> {
        self.inner.launcher.file_containment(request, intent).await
    }

    async fn write_file(
        &self,
        request: &FileRequest,
        content: &[u8],
    ) -> Result<WriteOutcome, FileError> {
        self.inner.launcher.write_file(request, content).await
    }

    async fn shutdown(&self) {
        let inner = &self.inner;
        inner.shutting_down.store(true, Ordering::SeqCst);
        // First everything this executor started, found in one pass and signalled
        // at once: stopping task by task made every task's stop scan a table full
        // of the others (28 s for 1000 tasks). Supervisors then see their command
        // exit, and count it as stopped because the executor is shutting down.
        inner
            .launcher
            .stop_prefix(&inner.mark_prefix, inner.grace)
            .await;
        inner.shutdown.cancel();
        inner.supervisors.close();
        inner.supervisors.wait().await;
        // What started while the first pass ran, and anything the supervisors missed.
        inner
            .launcher
            .stop_prefix(&inner.mark_prefix, inner.grace)
            .await;
        inner.launcher.close().await;
        lock(&inner.completions_tx).take();
    }
}
