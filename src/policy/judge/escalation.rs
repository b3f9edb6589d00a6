//! The escalation judge: a bash call that asks to run outside the sandbox.

use crate::config::{Decision, Mode};
use crate::policy::{
    Cause, Escalation, Grant, Judgement, Policy, SegmentJudgement, globs, shorten, summarize,
};

impl Policy {
    /// A bash call that asks to run outside the sandbox: judged as any, then every
    /// segment allowed by something other than a rule naming its command is asked.
    pub(in crate::policy) fn judge_escalation(
        &self,
        command: &str,
        mode: Mode,
        grants: &[Grant],
        escalation: Escalation,
        globs: Option<&dyn globs::Globs>,
    ) -> Judgement {
        let mut judged = self.judge_bash(command, mode, grants, globs);
        for segment in &mut judged.segments {
            // A mode's own ask becomes this one too: a `permission` hook may answer
            // what only the mode asks, and an escalation must reach the person.
            let raised = match (segment.decision, &segment.cause) {
                (Decision::Allow, Cause::RunsNothing) => false,
                (Decision::Allow, _) => !self.named_by_allow_rule(segment),
                (Decision::Ask, Cause::Mode { .. }) => true,
                _ => false,
            };
            if raised {
                segment.decision = Decision::Ask;
                segment.reason = format!(
                    "no rule naming `{}` allows it outside the sandbox",
                    shorten(&segment.words.join(" "))
                );
                segment.cause = Cause::Escalation;
            }
        }
        if let Some(decision) = judged.segments.iter().map(|s| s.decision).max() {
            judged.decision = decision;
            judged.cause = judged
                .segments
                .iter()
                .find(|s| s.decision == decision)
                .map(|s| s.cause.clone())
                .unwrap_or(Cause::Call);
            judged.reason = summarize(&judged.segments, decision);
        }
        judged.reason = format!(
            "{}. Outside the sandbox because: {}",
            judged.reason, escalation.justification
        );
        // Allowed one call at a time: an "always" answer must not let later escalations
        // through silently, so it grants nothing (see ARCHITECTURE.md).
        judged.grants_on_allow_always.clear();
        judged.escalation = Some(escalation);
        judged
    }

    /// Whether an allow rule whose prefix names a command (its first word is not `*`)
    /// matches `segment`: the only thing that may let a segment out of the sandbox
    /// without asking. (Another allow rule may be the one its cause names: of equal
    /// rules the judge keeps the last.)
    pub(in crate::policy) fn named_by_allow_rule(&self, segment: &SegmentJudgement) -> bool {
        segment.opaque.is_none()
            && self.rules.iter().any(|rule| {
                rule.action == Decision::Allow
                    && rule.covers_tool("bash")
                    && rule
                        .prefix
                        .as_ref()
                        .and_then(|prefix| prefix.first())
                        .is_some_and(|first| first != "*")
                    && rule.applies(&segment.words, None)
            })
    }
}
