//! The permission gate: where an "ask" becomes a question to the session's user.
//!
//! It runs after every judging hook, so it sees their combined decision. An ask that
//! stands only because of the mode's default is first put to the `permission` hooks,
//! which may answer it; any other ask (a rule's, a hook's, an opaque command's, and
//! every call asking to leave the sandbox) always reaches the person. Only the calling
//! session's own prompter is asked; with no session or no prompter there is nobody to
//! ask and the call is denied. A cancelled or unanswerable question is a deny (fail
//! closed).

use super::external::HookSet;
use super::external::protocol::PermissionReply;
use super::project::ProjectLayers;
use super::waterfall::{Hook, Next, Passed, ToolExecution, TraceEntry};
use crate::config::{Decision, HookEvent};
use crate::registry::{PermissionAnswer, PermissionRequest};
use std::sync::Arc;

/// Asks the session's user (or a `permission` hook) about calls the hooks marked "ask".
pub struct PermissionGate {
    hooks: Arc<HookSet>,
    /// A session's project may add `permission` hooks (a trusted project's).
    projects: Option<Arc<ProjectLayers>>,
}

impl PermissionGate {
    /// A gate that puts mode-default asks to the `permission` hooks of `hooks` first.
    pub fn new(hooks: Arc<HookSet>) -> Self {
        Self {
            hooks,
            projects: None,
        }
    }

    /// Puts mode-default asks to a session's project hooks too, after the user's.
    pub fn with_projects(mut self, projects: Arc<ProjectLayers>) -> Self {
        self.projects = Some(projects);
        self
    }
}

impl Default for PermissionGate {
    fn default() -> Self {
        Self::new(Arc::new(HookSet::default()))
    }
}

#[async_trait::async_trait]
impl Hook for PermissionGate {
    fn name(&self) -> &str {
        "permission"
    }

    async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
        let verdict = call.verdict();
        match verdict.decision {
            Decision::Allow => return next.run(call).await,
            Decision::Deny => return call.veto(verdict.decider(), &verdict.reason).into(),
            Decision::Ask => {}
        }
        let Some(session) = &call.session else {
            return call
                .veto(
                    self.name(),
                    &format!("{} (no session to ask)", verdict.reason),
                )
                .into();
        };
        if !verdict.grants.is_empty() {
            let rejected = session.rejections();
            if verdict.grants.iter().all(|g| rejected.contains(g)) {
                let what = if verdict.grants.iter().all(|g| g.words().is_some()) {
                    "command"
                } else {
                    "host"
                };
                return call
                    .veto(
                        self.name(),
                        &format!("the user rejected this {what} for the session"),
                    )
                    .into();
            }
        }
        // A call asking to leave the sandbox is put to the person, and only once.
        let escalation = call.judged().and_then(|(_, j)| j.escalation.clone());
        let hooks = match &self.projects {
            Some(projects) => projects.hooks_for(&session.id, &self.hooks),
            None => self.hooks.clone(),
        };
        if verdict.ask_from_mode_default
            && escalation.is_none()
            && let Some((reply, hook, reason)) = hooks.answer_permission(call).await
        {
            return match reply {
                PermissionReply::Reject => call.veto(&hook, &reason).into(),
                _ => next.run(call).await,
            };
        }
        let Some(prompter) = session.prompter() else {
            return call
                .veto(
                    self.name(),
                    &format!("{} (no client connected to ask)", verdict.reason),
                )
                .into();
        };
        // For desktop notifiers: the person is about to be asked (not waited for).
        hooks.notify(
            session,
            &format!("dsh needs your permission to use {}", call.tool),
        );
        let request = PermissionRequest {
            session_id: session.id.clone(),
            call_id: call.call_id.clone(),
            tool: call.tool.clone(),
            arguments: call.arguments.clone(),
            reason: verdict.reason.clone(),
            escalation: escalation.clone(),
            cancel: call.cancel.clone(),
        };
        let answer = tokio::select! {
            answer = prompter.ask(request) => answer,
            () = call.cancel.cancelled() => PermissionAnswer::Cancelled,
        };
        // An escalation is allowed or rejected for this call only (the question offers
        // no "always"): such an answer records nothing, so no later escalation goes
        // through, or is refused, unasked.
        let answer = match (answer, &escalation) {
            (PermissionAnswer::AllowAlways, Some(_)) => PermissionAnswer::AllowOnce,
            (PermissionAnswer::RejectAlways, Some(_)) => PermissionAnswer::RejectOnce,
            (answer, _) => answer,
        };
        call.record_answer(answer);
        call.record(TraceEntry {
            name: "user".into(),
            event: HookEvent::Permission,
            decision: answer.into(),
            reason: String::new(),
            ms: 0,
            enforced: true,
        });
        match answer {
            PermissionAnswer::AllowOnce => next.run(call).await,
            PermissionAnswer::AllowAlways => {
                // Only the prefixes of the segments that were asked about: never
                // the whole compound command.
                session.add_grants(&verdict.grants);
                prompter.remember(&verdict.grants, true);
                remember_for_user(session, &verdict.grants, true).await;
                next.run(call).await
            }
            PermissionAnswer::RejectOnce => {
                call.veto(self.name(), "the user rejected this call").into()
            }
            PermissionAnswer::RejectAlways => {
                session.add_rejections(&verdict.grants);
                prompter.remember(&verdict.grants, false);
                remember_for_user(session, &verdict.grants, false).await;
                call.veto(self.name(), "the user rejected this call").into()
            }
            PermissionAnswer::Cancelled => call
                .veto(self.name(), "the permission request was cancelled")
                .into(),
        }
    }
}

/// Keeps an "always" answer for the user (`remember = "user"`): the file is written
/// (and synced) on a blocking thread, not on the async worker, and before the call
/// goes on, so a grant the person gave is on disk when its command runs.
async fn remember_for_user(
    session: &crate::registry::Session,
    grants: &[crate::policy::Grant],
    allow: bool,
) {
    let user = session.user_grants().clone();
    let grants = grants.to_vec();
    if let Err(e) = tokio::task::spawn_blocking(move || user.remember(&grants, allow)).await {
        tracing::error!("keeping the user's answer failed: {e}");
    }
}
