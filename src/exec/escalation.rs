//! The sandbox executor with a local one beside it (issue 27): a bash call may ask to run
//! outside the sandbox, and when the person (or a rule naming its command) allows it, the
//! tool runs it on [`BashExecutor::outside`], a [`LocalExecutor`] on the same state
//! directory.
//!
//! To everyone else the pair is one executor: new work (commands, servers) goes into the
//! sandbox, while lookups, kills, scopes, completions and shutdown reach both, so a task
//! keeps its id, its owner, its notice and its end whichever side runs it. Ids cannot
//! collide: both allocate from the same `task-counter` under `flock` (`ids.rs`), and their
//! markers carry an instance of their own, so neither's cleanup touches the other's work.

use super::{
    BashExecutor, ExecError, ExecRequest, ExecSpec, FileError, FileIntent, FileRequest, FileStat,
    KillOutcome, LocalExecutor, OutputWatch, RunOutcome, ServiceProcess, TaskId, TaskInfo,
    TaskRead, WriteOutcome,
};
use crate::config::{ExecConfig, ExecutorKind};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// `executor` as the daemon runs it: under `[exec] kind = "sandbox"`, paired with the local
/// executor that runs what is let out of it; any other kind as it is.
pub fn with_escalation(
    config: &ExecConfig,
    executor: Option<Arc<dyn BashExecutor>>,
) -> Result<Option<Arc<dyn BashExecutor>>, String> {
    match (config.kind, executor) {
        (ExecutorKind::Sandbox, Some(sandbox)) => {
            let outside = LocalExecutor::new(config).map_err(|e| {
                format!("cannot start the local executor for calls let out of the sandbox: {e}")
            })?;
            Ok(Some(Arc::new(Escalating::new(sandbox, Arc::new(outside)))))
        }
        (_, executor) => Ok(executor),
    }
}

/// A contained executor (the sandbox) and the one that runs outside it.
pub struct Escalating {
    contained: Arc<dyn BashExecutor>,
    outside: Arc<dyn BashExecutor>,
}

impl Escalating {
    /// `contained` runs everything unless a call is let `outside`.
    pub fn new(contained: Arc<dyn BashExecutor>, outside: Arc<dyn BashExecutor>) -> Self {
        Self { contained, outside }
    }

    /// The side that knows task `id` (the contained one when neither does).
    fn holder(&self, id: TaskId) -> &Arc<dyn BashExecutor> {
        if self.contained.get(id).is_none() && self.outside.get(id).is_some() {
            &self.outside
        } else {
            &self.contained
        }
    }
}

#[async_trait::async_trait]
impl BashExecutor for Escalating {
    fn kind(&self) -> &'static str {
        self.contained.kind()
    }

    fn outside(&self) -> Option<Arc<dyn BashExecutor>> {
        Some(self.outside.clone())
    }

    fn set_connection_judge(&self, judge: Arc<dyn super::netproxy::ConnectionJudge>) {
        self.contained.set_connection_judge(judge);
    }

    fn proxied_connections(&self) -> Vec<(String, usize)> {
        self.contained.proxied_connections()
    }

    fn resolve(&self, request: ExecRequest) -> ExecSpec {
        self.contained.resolve(request)
    }

    async fn run(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, ExecError> {
        self.contained.run(spec, cancel).await
    }

    async fn run_watched(
        &self,
        spec: ExecSpec,
        cancel: CancellationToken,
        watch: OutputWatch,
    ) -> Result<RunOutcome, ExecError> {
        self.contained.run_watched(spec, cancel, watch).await
    }

    async fn start(&self, spec: ExecSpec) -> Result<TaskInfo, ExecError> {
        self.contained.start(spec).await
    }

    fn get(&self, id: TaskId) -> Option<TaskInfo> {
        self.contained.get(id).or_else(|| self.outside.get(id))
    }

    fn list(&self) -> Vec<TaskInfo> {
        let mut all = self.contained.list();
        all.extend(self.outside.list());
        // Oldest first, as each side lists them; ids break ties (both count up).
        all.sort_by_key(|t| (t.started_at, t.id));
        all
    }

    fn read(&self, id: TaskId) -> Option<TaskRead> {
        self.holder(id).read(id)
    }

    fn task_changes(&self, id: TaskId) -> Option<super::TaskChanges> {
        self.holder(id).task_changes(id)
    }

    fn spill_files_in_use(&self) -> Vec<std::path::PathBuf> {
        let mut all = self.contained.spill_files_in_use();
        all.extend(self.outside.spill_files_in_use());
        all
    }

    async fn kill(&self, id: TaskId) -> KillOutcome {
        self.holder(id).kill(id).await
    }

    /// What either side keeps. The contained side keeps all it runs, whatever it could
    /// carry: [`Escalating::adopt_tasks`] gives everything carried to the outside side.
    fn tasks_kept(&self) -> Vec<TaskInfo> {
        let mut kept = self.contained.running();
        kept.extend(self.outside.tasks_kept());
        kept
    }

    /// The outside side's tasks (the local executor's, which it carries as it does on
    /// its own), once nothing runs in the contained side: a task in the sandbox refuses
    /// the upgrade, named, and nothing is let go.
    async fn let_go_tasks(&self) -> Result<Vec<super::HandedTask>, super::CannotCarry> {
        super::CannotCarry::check(self.contained.kind(), &self.contained.running())?;
        self.outside.let_go_tasks().await
    }

    /// All to the outside side: only its tasks are ever let go (above).
    fn adopt_tasks(&self, tasks: Vec<super::HandedTask>) -> Vec<(TaskInfo, Result<(), String>)> {
        self.outside.adopt_tasks(tasks)
    }

    /// Both sides' records: the first to look takes each (they share the state
    /// directory and its records).
    fn recover(&self) -> Vec<super::RecoveredTask> {
        let mut all = self.contained.recover();
        all.extend(self.outside.recover());
        all
    }

    async fn kill_scope(&self, scope: &str) {
        tokio::join!(
            self.contained.kill_scope(scope),
            self.outside.kill_scope(scope)
        );
    }

    /// Both sides' completions as one stream, which ends once both have (after
    /// `shutdown`, holding every task's completion).
    fn take_completions(&self) -> Option<mpsc::UnboundedReceiver<TaskInfo>> {
        let sides = [
            self.contained.take_completions(),
            self.outside.take_completions(),
        ];
        if sides.iter().all(Option::is_none) {
            return None;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        for mut side in sides.into_iter().flatten() {
            let tx = tx.clone();
            tokio::spawn(async move {
                while let Some(task) = side.recv().await {
                    if tx.send(task).is_err() {
                        break;
                    }
                }
            });
        }
        Some(rx)
    }

    async fn start_service(
        &self,
        spec: ExecSpec,
        env: Vec<(String, String)>,
    ) -> Result<ServiceProcess, ExecError> {
        // Servers (the editor's MCP servers) stay in the sandbox: nobody let them out.
        self.contained.start_service(spec, env).await
    }

    async fn shutdown(&self) {
        tokio::join!(self.contained.shutdown(), self.outside.shutdown());
    }

    // The file tools stay in the sandbox: only a bash call can be let out of it.

    fn files_are_local(&self) -> bool {
        self.contained.files_are_local()
    }

    async fn stat_file(
        &self,
        request: &FileRequest,
        intent: FileIntent,
    ) -> Result<Option<FileStat>, FileError> {
        self.contained.stat_file(request, intent).await
    }

    async fn read_file(&self, request: &FileRequest) -> Result<super::FileRead, FileError> {
        self.contained.read_file(request).await
    }

    async fn file_containment(
        &self,
        request: &FileRequest,
        intent: FileIntent,
    ) -> Result<Option<crate::containment::Containment>, FileError> {
        self.contained.file_containment(request, intent).await
    }

    async fn write_file(
        &self,
        request: &FileRequest,
        content: &[u8],
    ) -> Result<WriteOutcome, FileError> {
        self.contained.write_file(request, content).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(state: &std::path::Path) -> ExecConfig {
        ExecConfig {
            kill_grace_ms: 300,
            drain_ms: 300,
            state_dir: Some(state.to_path_buf()),
            ..ExecConfig::default()
        }
    }

    fn spec(pair: &Escalating, command: &str, scope: &str) -> ExecSpec {
        pair.resolve(ExecRequest {
            command: command.into(),
            workdir: Some(std::env::temp_dir()),
            scope: Some(scope.into()),
            ..ExecRequest::default()
        })
    }

    /// Two local executors stand for the pair (the sandbox's own behaviour is tested
    /// through the binary): ids from both sides never collide, and every lookup, kill,
    /// scope, completion and the shutdown reach the side that runs the task.
    #[tokio::test]
    async fn both_sides_share_ids_lookups_completions_and_shutdown() {
        let dir = tempfile::tempdir().unwrap();
        let contained: Arc<dyn BashExecutor> =
            Arc::new(LocalExecutor::new(&config(dir.path())).unwrap());
        let outside: Arc<dyn BashExecutor> =
            Arc::new(LocalExecutor::new(&config(dir.path())).unwrap());
        let pair = Escalating::new(contained, outside);
        let mut done = pair.take_completions().unwrap();
        assert!(pair.take_completions().is_none());
        let escape = pair.outside().unwrap();
        let mut ids = std::collections::HashSet::new();
        let mut inside_tasks = Vec::new();
        let mut outside_tasks = Vec::new();
        for _ in 0..3 {
            let a = pair.start(spec(&pair, "sleep 1000", "s1")).await.unwrap();
            let b = escape.start(spec(&pair, "sleep 1000", "s2")).await.unwrap();
            assert!(ids.insert(a.id) && ids.insert(b.id), "{ids:?}");
            inside_tasks.push(a.id);
            outside_tasks.push(b.id);
        }
        assert_eq!(pair.list().len(), 6);
        assert!(pair.get(outside_tasks[0]).is_some());
        assert!(pair.read(outside_tasks[0]).is_some());
        assert_eq!(pair.kill(outside_tasks[0]).await, KillOutcome::Killed);
        assert_eq!(pair.kill(inside_tasks[0]).await, KillOutcome::Killed);
        assert_eq!(pair.kill(TaskId::new(999_999)).await, KillOutcome::Unknown);
        pair.kill_scope("s2").await;
        assert!(
            outside_tasks
                .iter()
                .all(|id| pair.get(*id).unwrap().status.is_finished())
        );
        assert!(!pair.get(inside_tasks[1]).unwrap().status.is_finished());
        pair.shutdown().await;
        assert!(pair.list().iter().all(|t| t.status.is_finished()));
        let mut finished = Vec::new();
        while let Some(task) = done.recv().await {
            finished.push(task.id);
        }
        finished.sort();
        let mut all: Vec<TaskId> = ids.into_iter().collect();
        all.sort();
        assert_eq!(finished, all, "each completion once, and the stream ended");
    }
}
