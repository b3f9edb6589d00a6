//! Completion notices (T14): the single consumer of the executor's stream of
//! finished tasks. It shapes each into the notice text and hands it to the session
//! registry, which appends it to the owner's inbox and nowhere else.

use super::bash::status_line;
use crate::exec::{BashExecutor, TaskInfo};
use crate::registry::SessionRegistry;
use crate::store::{Event, SessionLog, now_ms};
use std::path::Path;
use std::sync::Arc;

/// The notice text for a finished task.
pub fn notice_text(task: &TaskInfo) -> String {
    format!(
        "background bash task {} finished {}. Read its output with bash_output.",
        task.id,
        status_line(task.status)
    )
}

/// Takes over the tasks an earlier daemon on `state_dir` left unfinished
/// ([`BashExecutor::recover`]), before anything is served: each is owned again by the
/// session it ran under (T12, T13: its owner reads it with `bash_output`, nobody else),
/// and a task this start is the first to find gets its T14 notice (`[status: lost: ...]`)
/// appended to its owner's session log, which a `session/load` replays and the model
/// reads. A log that cannot be opened loses that notice, with a log line; the task
/// still answers `bash_output`.
pub fn adopt_recovered(
    executor: &Arc<dyn BashExecutor>,
    sessions: &SessionRegistry,
    state_dir: &Path,
) {
    for task in executor.recover() {
        let info = &task.info;
        sessions.record_owner(info.id, info.scope.as_deref());
        let Some(owner) = info.scope.as_deref().filter(|_| task.newly_lost) else {
            continue;
        };
        let event = Event::Notice {
            at_ms: now_ms(),
            source: "tool-bash".into(),
            task_id: info.id.to_string(),
            text: notice_text(info),
        };
        match SessionLog::open(state_dir, owner).and_then(|(log, _, _)| log.append(&event)) {
            Ok(()) => tracing::info!(id = %info.id, session = owner, "reported a lost task"),
            Err(e) => {
                tracing::warn!(id = %info.id, session = owner, "cannot report the lost task: {e}")
            }
        }
    }
}

/// Starts routing completions of `executor` to their owners. Returns `None` if the
/// stream was already taken (there is exactly one router per executor).
pub fn spawn_router(
    executor: &Arc<dyn BashExecutor>,
    sessions: Arc<SessionRegistry>,
) -> Option<tokio::task::JoinHandle<()>> {
    let mut finished = executor.take_completions()?;
    Some(tokio::spawn(async move {
        while let Some(task) = finished.recv().await {
            sessions.deliver_notice(task.id, notice_text(&task));
        }
    }))
}
