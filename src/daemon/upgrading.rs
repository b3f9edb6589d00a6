//! The daemon's side of `dsh upgrade`: the drain (freeze every connection, give turns
//! their time, then cancel what is still in flight), the hand-over to the program on
//! disk, and the adoption of the tasks it carries; and when this program started,
//! which `dsh acp` compares with the binary on disk.

use super::*;

impl Daemon {
    /// Why the tasks running now cannot be carried, asked again when the drain is over
    /// (a turn that ran during it may have started one): a closure the drain's task
    /// owns.
    pub(super) fn why_tasks_stay(&self) -> impl Fn() -> Option<String> + Send + 'static {
        let executor = self.executor.clone();
        move || running_tasks(executor.as_ref())
    }

    /// The rest of `dsh upgrade` once every connection is frozen (the accept loop waits
    /// here; what connects meanwhile waits in the listener's backlog, which is handed
    /// over too): lets the tasks go, drains the completion notices, and executes the
    /// program on disk with the hand-over. Returns only when this program serves on, with
    /// the frozen connections to serve again (the outcome is recorded for
    /// `_dsh/upgrade/outcome`).
    pub(super) async fn hand_over(
        &self,
        listener: &UnixListener,
        connections: &TaskTracker,
        freeze: &Freeze,
    ) -> Vec<FrozenConnection> {
        // Connections accepted after the drain ended freeze at once; wait for them.
        connections.close();
        if tokio::time::timeout(LAST_WAIT, connections.wait())
            .await
            .is_err()
        {
            tracing::error!(
                "upgrade: a connection is still busy after every request was cancelled; \
                 it ends with this program"
            );
        }
        connections.reopen();
        let carried = std::mem::take(&mut *freeze.frozen.lock().unwrap_or_else(|p| p.into_inner()));
        // A turn that ran during the drain may have started a task it cannot carry:
        // then nothing is let go, and the upgrade is refused naming it.
        let letting_go = match &self.executor {
            Some(exec) => exec.let_go_tasks().await,
            None => Ok(Vec::new()),
        };
        let why = match letting_go {
            Err(cannot) => cannot.to_string(),
            Ok(tasks) => {
                // A task that ended while it was let go has its notice in the router's
                // queue: delivered (and logged) before this program is replaced.
                if let Some(router) = &self.router {
                    router.flush().await;
                }
                self.service.stop_all_mcp().await;
                self.service.stop_all_wrapped().await;
                self.tools.hooks().stop_servers().await;
                // A SIGTERM that came during this part must not be replaced with the
                // next program: this one serves on just long enough to stop.
                let ready = if self.shutdown.is_cancelled() {
                    Err("the daemon is stopping".to_string())
                } else {
                    crate::program::binary_fd()
                        .map_err(|e| e.to_string())
                        .and_then(|fd| Ok((fd, self.service.config_toml()?)))
                };
                let why = match ready {
                    Ok((old_program, config)) => upgrade::exec(&Handover {
                        format: upgrade::FORMAT,
                        from_version: env!("CARGO_PKG_VERSION").to_string(),
                        args: crate::program::args(),
                        program: Some(upgrade::CarriedBytes(
                            crate::program::path().into_os_string().into_vec(),
                        )),
                        config,
                        listener: listener.as_raw_fd(),
                        old_program,
                        connections: carried
                            .iter()
                            .map(|c| CarriedConnection {
                                ends: c.ends.raw(),
                                unread: upgrade::CarriedBytes(c.unread.clone()),
                                state: c.state.clone(),
                            })
                            .collect(),
                        tasks: tasks.iter().map(CarriedTask::of).collect(),
                        rolled_back: None,
                    }),
                    Err(e) => e,
                };
                // Still here: the new program never started.
                self.adopt_tasks(tasks);
                self.tools.hooks().start_servers().await;
                why
            }
        };
        tracing::error!(%why, "upgrade failed; this program serves on");
        self.service
            .set_upgrade_outcome(crate::acp::UpgradeOutcome::RolledBack { reason: why });
        carried
    }

    /// Where a daemon on `socket` says when its program started (`dsh acp` compares it
    /// with the binary on disk): beside the socket, since an upgrade keeps the process
    /// (and its start time in /proc) but not its program.
    pub(super) fn program_started_file(socket: &Path) -> PathBuf {
        socket.with_extension("started")
    }

    /// When the program of the daemon `pid` on `socket` started, if it said so.
    pub fn program_started(socket: &Path, pid: i32) -> Option<std::time::SystemTime> {
        let text = std::fs::read_to_string(Self::program_started_file(socket)).ok()?;
        let (who, ms) = text.trim().split_once(' ')?;
        let ms: u64 = ms.parse().ok()?;
        (who.parse::<i32>().ok()? == pid)
            .then(|| std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
    }

    /// Writes [`Daemon::program_started`]'s file (the socket's directory is private).
    pub(super) fn say_program_started(path: &Path) {
        let now = crate::store::now_ms();
        let text = format!("{} {now}\n", std::process::id());
        if let Err(e) = std::fs::write(Self::program_started_file(path), text) {
            tracing::warn!("cannot write when this program started: {e}");
        }
    }

    /// Supervises again the tasks an upgrade let go (handed over, or kept after a failed
    /// one), each owned again by its session.
    pub(super) fn adopt_tasks(&self, tasks: Vec<crate::exec::HandedTask>) {
        let Some(exec) = &self.executor else {
            return;
        };
        for (info, taken) in exec.adopt_tasks(tasks) {
            self.sessions.record_owner(info.id, info.scope.as_deref());
            match taken {
                Ok(()) => tracing::info!(id = %info.id, "a running task was carried over"),
                Err(why) => {
                    tracing::error!(id = %info.id, %why, "a running task was lost in the upgrade")
                }
            }
        }
    }
}

/// Why an upgrade cannot carry this daemon over now: background tasks run that the
/// executor cannot carry ([`BashExecutor::tasks_kept`]).
fn running_tasks(executor: Option<&Arc<dyn BashExecutor>>) -> Option<String> {
    let executor = executor?;
    crate::exec::CannotCarry::check(executor.kind(), &executor.tasks_kept())
        .err()
        .map(|e| e.to_string())
}

/// How long the end of an upgrade's drain waits for the connections once every request
/// in flight was cancelled (and again once the loop took the hand-over in hand): a
/// handler that ignores its cancellation must not hold every editor and `kill`.
const LAST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The first part of `dsh upgrade`, in a task of its own while the accept loop serves
/// on: refuses what cannot be carried (nothing frozen), else freezes every connection,
/// gives turns `drain`, then cancels every request still in flight (turns, tool calls,
/// anything) and waits at most [`LAST_WAIT`] more. The loop goes on with the hand-over
/// once this returns with `freeze` cancelled.
pub(super) async fn drain_for_upgrade(
    order: crate::acp::UpgradeOrder,
    why_tasks_stay: impl Fn() -> Option<String>,
    service: Arc<AcpService>,
    connections: TaskTracker,
    freeze: Freeze,
    drain: std::time::Duration,
) {
    let refused = match why_tasks_stay() {
        Some(why) => Err(why),
        None => upgrade::check().await.map_err(|e| e.to_string()),
    };
    if let Err(why) = refused {
        tracing::warn!(%why, "upgrade refused");
        let _ = order.answer.send(Err(why));
        return;
    }
    tracing::info!("upgrade: freezing every connection");
    freeze.token.cancel();
    let _ = order.answer.send(Ok(()));
    connections.close();
    if tokio::time::timeout(drain, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            drain_secs = drain.as_secs(),
            "upgrade: requests still in flight after the drain are cancelled"
        );
        service.cancel_all_prompts();
        freeze.requests.cancel();
        if tokio::time::timeout(LAST_WAIT, connections.wait())
            .await
            .is_err()
        {
            tracing::error!("upgrade: a connection did not end its requests when cancelled");
        }
    }
}

/// Waits for the upgrade's drain task, if one runs (else never resolves).
pub(super) async fn join_upgrade(
    upgrading: &mut Option<tokio::task::JoinHandle<()>>,
) -> Result<(), tokio::task::JoinError> {
    match upgrading {
        Some(task) => task.await,
        None => std::future::pending().await,
    }
}
