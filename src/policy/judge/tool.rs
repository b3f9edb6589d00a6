//! The judge of a tool other than bash, the file tools and `network`: tool-wide rules only.

use crate::config::{Decision, Mode};
use crate::policy::{Cause, Judgement, Policy};

impl Policy {
    /// A tool other than bash: only tool-wide rules apply. `read_only_tool`: the tool
    /// says it only reads (see [`Place::read_only_tool`]).
    pub(in crate::policy) fn judge_tool(
        &self,
        tool: &str,
        mode: Mode,
        read_only_tool: bool,
    ) -> Judgement {
        // `bash_output` only reads output already collected; `bash_kill` stops a command
        // that was itself allowed, but changes state, so read-only mode refuses it.
        let (default, kind) = match (tool, mode) {
            ("bash_output", _) => (Decision::Allow, "reads command output"),
            // The model's plan: it changes nothing but what the editor shows.
            ("todo_write", _) => (Decision::Allow, "changes only the session's plan"),
            ("bash_kill", Mode::ReadOnly) => (Decision::Deny, "stops a command"),
            ("bash_kill", _) => (Decision::Allow, "stops a command"),
            (_, Mode::Ask) => (Decision::Ask, "is not covered by any rule"),
            (_, Mode::Auto) => (Decision::Allow, "is not covered by any rule"),
            (_, Mode::ReadOnly) => (Decision::Deny, "is not known to be read-only"),
        };
        // A tool that says it only reads may run in read-only mode, but only when a rule
        // allows it: the hint is its author's word, so the person's rule is the proof.
        if mode == Mode::ReadOnly && default == Decision::Deny && read_only_tool {
            let rule = self.tool_wide(tool).max_by_key(|r| r.action);
            let mut judgement = match rule {
                Some(rule) if rule.action == Decision::Allow => Judgement {
                    cause: rule.cause(),
                    ..Judgement::of_call(
                        Decision::Allow,
                        format!(
                            "{} matches tool `{tool}`, which says it only reads",
                            rule.describe()
                        ),
                    )
                },
                _ => Judgement::of_call(
                    Decision::Deny,
                    format!(
                        "read-only mode: tool `{tool}` says it only reads, but no rule allows it"
                    ),
                ),
            };
            if judgement.decision == Decision::Deny {
                judgement.cause = Cause::ReadOnly;
            }
            return judgement;
        }
        // Read-only mode vetoes whatever may change state; no rule can loosen that.
        if mode == Mode::ReadOnly && default == Decision::Deny {
            let mut judgement = Judgement::of_call(
                Decision::Deny,
                format!("read-only mode: tool `{tool}` {kind}"),
            );
            judgement.cause = Cause::ReadOnly;
            return judgement;
        }
        match self.tool_wide(tool).max_by_key(|r| r.action) {
            Some(rule) => Judgement {
                cause: rule.cause(),
                ..Judgement::of_call(
                    rule.action,
                    format!("{} matches tool `{tool}`", rule.describe()),
                )
            },
            None => Judgement {
                cause: Cause::Mode { mode },
                ..Judgement::of_call(
                    default,
                    format!("tool `{tool}` {kind} (mode {})", mode.id()),
                )
            },
        }
    }
}
