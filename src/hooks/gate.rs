//! The permission gate: where an "ask" becomes a question to the session's user.
//!
//! It runs after every judging hook, so it sees their combined decision. Only the
//! calling session's own prompter is asked; with no session or no prompter there
//! is nobody to ask and the call is denied. A cancelled or unanswerable question
//! is a deny (fail closed).

use super::waterfall::{Hook, Next, ToolExecution, ToolOutput};
use crate::config::Decision;
use crate::registry::{PermissionAnswer, PermissionRequest};

/// Asks the session's user about calls the hooks marked "ask".
pub struct PermissionGate;

#[async_trait::async_trait]
impl Hook for PermissionGate {
    fn name(&self) -> &str {
        "permission"
    }

    async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> ToolOutput {
        let verdict = call.verdict();
        match verdict.decision {
            Decision::Allow => return next.run(call).await,
            Decision::Deny => return call.veto(&verdict.decided_by, &verdict.reason),
            Decision::Ask => {}
        }
        let Some(session) = &call.session else {
            return call.veto(
                self.name(),
                &format!("{} (no session to ask)", verdict.reason),
            );
        };
        if !verdict.grants.is_empty() {
            let rejected = session.rejections();
            if verdict.grants.iter().all(|g| rejected.contains(g)) {
                return call.veto(
                    self.name(),
                    "the user rejected this command for the session",
                );
            }
        }
        let Some(prompter) = session.prompter() else {
            return call.veto(
                self.name(),
                &format!("{} (no client connected to ask)", verdict.reason),
            );
        };
        let request = PermissionRequest {
            session_id: session.id.clone(),
            call_id: call.call_id.clone(),
            tool: call.tool.clone(),
            arguments: call.arguments.clone(),
            reason: verdict.reason.clone(),
            cancel: call.cancel.clone(),
        };
        let answer = tokio::select! {
            answer = prompter.ask(request) => answer,
            () = call.cancel.cancelled() => PermissionAnswer::Cancelled,
        };
        call.record_answer(answer);
        match answer {
            PermissionAnswer::AllowOnce => next.run(call).await,
            PermissionAnswer::AllowAlways => {
                // Only the prefixes of the segments that were asked about: never
                // the whole compound command.
                session.add_grants(&verdict.grants);
                next.run(call).await
            }
            PermissionAnswer::RejectOnce => call.veto(self.name(), "the user rejected this call"),
            PermissionAnswer::RejectAlways => {
                session.add_rejections(&verdict.grants);
                call.veto(self.name(), "the user rejected this call")
            }
            PermissionAnswer::Cancelled => {
                call.veto(self.name(), "the permission request was cancelled")
            }
        }
    }
}
