//! The policy hook: the configured rules and the session's mode, applied to every
//! call (see [`crate::hooks::policy`] for how a call is judged).

use super::waterfall::{Hook, Next, ToolCall, ToolOutput};
use crate::config::{Decision, Mode};
use crate::policy::Policy;
use std::sync::Arc;

/// Vetoes what the policy denies and marks what it wants asked.
pub struct PolicyHook {
    policy: Arc<Policy>,
    /// The mode of a call made outside any session.
    sessionless_mode: Mode,
}

impl PolicyHook {
    pub fn new(policy: Arc<Policy>) -> Self {
        Self {
            policy,
            sessionless_mode: Mode::Ask,
        }
    }
}

#[async_trait::async_trait]
impl Hook for PolicyHook {
    fn name(&self) -> &str {
        "policy"
    }

    async fn handle(&self, call: &ToolCall, next: Next<'_>) -> ToolOutput {
        let (mode, grants) = match &call.session {
            Some(s) => (s.mode(), s.grants()),
            None => (self.sessionless_mode, Vec::new()),
        };
        let judgement = self
            .policy
            .judge(&call.tool, &call.arguments, mode, &grants);
        if judgement.decision == Decision::Deny {
            return call.veto(self.name(), &judgement.reason);
        }
        call.tighten(
            judgement.decision,
            self.name(),
            &judgement.reason,
            judgement.grants_on_allow_always,
        );
        next.run(call).await
    }
}
