//! Completion notices (T14): the single consumer of the executor's stream of
//! finished tasks. It shapes each into the notice text and hands it to the session
//! registry, which appends it to the owner's inbox and nowhere else.

use super::bash::status_line;
use crate::exec::{BashExecutor, TaskInfo};
use crate::registry::SessionRegistry;
use std::sync::Arc;

/// The notice text for a finished task.
pub fn notice_text(task: &TaskInfo) -> String {
    format!(
        "background bash task {} finished {}. Read its output with bash_output.",
        task.id,
        status_line(task.status)
    )
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
