//! Unloading sessions nothing needs any more (issue 45's follow-up): a session its
//! client closed, or whose connection ended, is dropped from the daemon's memory (the
//! registry, its entry, its open log) once no connection holds it, no prompt of it runs
//! and none of its background tasks runs. Its history is its log, which `session/load`
//! reads again. A session whose tasks still run stays loaded for them (their
//! completion notices reach its log and its client, if one loads it, and `dsh status`
//! lists it) and is unloaded when the last one's notice is written.
//!
//! The check runs at every moment one of those conditions can end: at the close or the
//! disconnect ([`AcpService::forget`]), when a prompt's slot is freed, when a task's
//! notice was written, and when an attach failed. A notice for a session that is not
//! loaded (one unloaded an instant before its last task's notice was routed, or one a
//! restart adopted the tasks of) is appended to its log on disk instead of dropped.

use super::AcpService;
use super::live::Unloaded;
use crate::registry::Notice;
use crate::store::{Event, SessionLog, now_ms};
use std::sync::Arc;

/// Why a session is being unloaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unload {
    /// Only if nothing needs it: unbound, no prompt in flight, no task of it running.
    IfIdle,
    /// Whatever it holds (its tasks were killed: a delete, a close under
    /// `close_kills_tasks`). A turn still ending frees its prompt slot with its own guard.
    Now,
}

impl AcpService {
    /// Unloads session `id` as `when` says. A session whose
    /// connection ended and that nobody told of its end is told now (`session_end` with
    /// `disconnect`): for the daemon it ends here. While the daemon stops nothing is
    /// unloaded `IfIdle`: the stop tells every session still loaded (`shutdown`).
    pub(super) fn unload(&self, id: &str, when: Unload) {
        if when == Unload::IfIdle && self.shutdown.is_cancelled() {
            return;
        }
        let mut removed = None;
        let unloaded = self.live.unload(
            id,
            |e| match when {
                Unload::Now => true,
                // Cheapest first: the task list is read only for a session otherwise idle.
                Unload::IfIdle => {
                    e.bound_to.is_none()
                        && e.prompt.is_none()
                        && e.mcp.is_none()
                        && !self.runs_tasks(id)
                }
            },
            || removed = self.sessions.close(id),
        );
        let Some(Unloaded { closed }) = unloaded else {
            if when == Unload::Now {
                // No entry on this side (nothing bound it here): the registry's is all.
                self.sessions.close(id);
                self.tools.forget_project(id);
            }
            return;
        };
        if let Some(session) = removed
            && when == Unload::IfIdle
            && !closed
        {
            // Its hooks as its project had them, before the project is forgotten.
            let hooks = self.tools.hooks_for(&session);
            tokio::spawn(async move { hooks.on_session_end(&session, "disconnect").await });
        }
        self.tools.forget_project(id);
    }

    /// Whether a background task of session `id` is running.
    fn runs_tasks(&self, id: &str) -> bool {
        self.executor
            .as_ref()
            .is_some_and(|e| e.running().iter().any(|t| t.scope.as_deref() == Some(id)))
    }

    /// Appends a notice for session `id`, which is not loaded, to its log: the one a
    /// call still ending holds, else the file (a deleted session's is gone, and the
    /// notice with it).
    pub(super) fn notice_to_unloaded(&self, id: &str, notice: &Notice) {
        let event = Event::Notice {
            at_ms: now_ms(),
            source: notice.source.to_string(),
            task_id: notice.task_id.to_string(),
            text: notice.text.clone(),
        };
        let log = match self.live.log(id).or_else(|| self.live.lingering_log(id)) {
            Some(log) => Ok(log),
            None => SessionLog::open(&self.state_dir, id).map(|(log, _, _)| Arc::new(log)),
        };
        match log {
            Ok(log) => self.append(&log, event),
            Err(e) => tracing::info!(
                task = %notice.task_id,
                session = id,
                "the notice of a session that is not loaded was dropped: {e}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Mode};
    use crate::exec::TaskId;
    use crate::registry::SessionRegistry;
    use crate::store::Header;
    use crate::tools::ToolRegistry;
    use tokio_util::sync::CancellationToken;

    /// A notice for a session that is not loaded (its last task's notice routed an
    /// instant after it was unloaded, or a task a restart adopted) is appended to its log
    /// on disk, where a load finds it; a session without a log (deleted) gets none made.
    #[tokio::test]
    async fn a_notice_for_a_session_not_loaded_reaches_its_log_on_disk() {
        let state = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.exec.state_dir = Some(state.path().to_path_buf());
        let sessions = Arc::new(SessionRegistry::new(Mode::Ask));
        let _service = AcpService::new(
            config,
            None,
            None,
            sessions.clone(),
            Arc::new(ToolRegistry::new()),
            CancellationToken::new(),
        );
        let header = Header {
            id: uuid::Uuid::new_v4().to_string(),
            cwd: "/".into(),
            created_ms: 0,
            title: None,
        };
        drop(SessionLog::create(state.path(), &header).unwrap());
        let deleted = uuid::Uuid::new_v4().to_string();
        for (n, owner) in [(1, &header.id), (2, &deleted)] {
            sessions.record_owner(TaskId::new(n), Some(owner));
            sessions.deliver_notice(TaskId::new(n), format!("task {n} finished"));
        }
        let (_log, _, events) = SessionLog::open(state.path(), &header.id).unwrap();
        let notices: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e, Event::Notice { .. }))
            .collect();
        assert_eq!(notices.len(), 1, "{events:?}");
        assert!(matches!(notices[0], Event::Notice { task_id, text, .. }
                if *task_id == TaskId::new(1).to_string() && text == "task 1 finished"));
        assert!(crate::store::log_path(state.path(), &deleted).is_ok_and(|p| !p.exists()));
    }
}
