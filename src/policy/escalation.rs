//! A bash call's request to run outside the sandbox (issue 27): `sandbox: "off"` with a
//! `justification`. The tool and the judge read the arguments with this one function, so
//! what the tool would run outside is exactly what the judge judged as leaving the sandbox.
//!
//! Under the sandbox executor such a call always reaches the person unless a rule naming
//! its command allows it ([`super::Policy::judge_in`]); under the other executors the
//! arguments change nothing.

use serde::Serialize;

/// A valid request to leave the sandbox: the one value `sandbox` accepts, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Escalation {
    /// The model's reason, shown to the person in the question (never blank).
    pub justification: String,
}

/// Why a call's `sandbox` / `justification` arguments make no valid request: the text of
/// the tool's error result (T1-style value checks).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EscalationError {
    /// `sandbox` holds something other than `"off"` (its JSON text).
    #[error("invalid sandbox {0}: the only accepted value is \"off\"")]
    Sandbox(String),
    /// `sandbox: "off"` without a justification that says anything.
    #[error("invalid justification")]
    Justification,
}

/// The argument that asks to leave the sandbox, and its one accepted value.
const ARGUMENT: &str = "sandbox";
const OFF: &str = "off";

impl Escalation {
    /// Reads a bash call's `arguments`: `Ok(None)` when it does not ask to leave the
    /// sandbox (a `justification` alone asks nothing), `Ok(Some)` for `sandbox: "off"`
    /// with a non-blank `justification`, the error otherwise.
    pub fn requested(arguments: &serde_json::Value) -> Result<Option<Escalation>, EscalationError> {
        let Some(value) = arguments.get(ARGUMENT) else {
            return Ok(None);
        };
        if value.as_str() != Some(OFF) {
            return Err(EscalationError::Sandbox(value.to_string()));
        }
        match arguments.get("justification").and_then(|j| j.as_str()) {
            Some(text) if !text.trim().is_empty() => Ok(Some(Escalation {
                justification: text.trim().to_string(),
            })),
            _ => Err(EscalationError::Justification),
        }
    }
}

impl super::Policy {
    /// A file tool call under the sandbox that asks to reach its path outside it (issue
    /// 39: a protected path, one outside the writable roots, a masked one), judged as a
    /// bash escalation is: judged as if no sandbox held it (so the sandbox's own refusal
    /// is what the call asks to pass), then anything allowed by something other than an
    /// allow rule naming the path (`path = ...`) is asked instead. Deny rules and
    /// read-only mode still refuse, and nothing is offered to "allow always": a grant
    /// must never let a later call out silently.
    pub(super) fn judge_file_escalation(
        &self,
        tool: &str,
        raw: &str,
        mode: super::Mode,
        place: Option<&super::Place<'_>>,
        escalation: Escalation,
    ) -> super::Judgement {
        use super::{Cause, Decision};
        let unsandboxed = place.map(|p| super::Place {
            sandbox_roots: None,
            ..*p
        });
        let mut judged = self.judge_file(tool, raw, mode, unsandboxed.as_ref());
        let named_by_path_rule = matches!(
            &judged.cause,
            Cause::Rule { index, .. } if self.rules.iter().any(|r| {
                r.index == *index && r.path.is_some() && r.action == Decision::Allow
            })
        );
        let raised = match (judged.decision, &judged.cause) {
            (Decision::Allow, _) => !named_by_path_rule,
            // What only the mode (or the session's directories) asks is asked as an
            // escalation: a `permission` hook must not answer it for the person.
            (Decision::Ask, Cause::Mode { .. } | Cause::Call) => true,
            _ => false,
        };
        if raised {
            let path = super::resolve_path(place.map_or(std::path::Path::new("/"), |p| p.cwd), raw);
            judged.decision = Decision::Ask;
            judged.cause = Cause::Escalation;
            judged.reason = format!(
                "no rule naming the path {} allows `{tool}` on it outside the sandbox",
                path.display()
            );
        }
        judged.reason = format!(
            "{}. Outside the sandbox because: {}",
            judged.reason, escalation.justification
        );
        judged.grants_on_allow_always.clear();
        judged.escalation = Some(escalation);
        judged
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_off_with_a_justification_asks_to_leave() {
        assert_eq!(Escalation::requested(&json!({"command": "x"})), Ok(None));
        assert_eq!(
            Escalation::requested(&json!({"command": "x", "justification": "why"})),
            Ok(None)
        );
        assert_eq!(
            Escalation::requested(&json!({"sandbox": "off", "justification": " needs the net "})),
            Ok(Some(Escalation {
                justification: "needs the net".into()
            }))
        );
        assert_eq!(
            Escalation::requested(&json!({"sandbox": "on", "justification": "why"})),
            Err(EscalationError::Sandbox("\"on\"".into()))
        );
        assert_eq!(
            Escalation::requested(&json!({"sandbox": null})),
            Err(EscalationError::Sandbox("null".into()))
        );
        for missing in [
            json!({"sandbox": "off"}),
            json!({"sandbox": "off", "justification": "  \n"}),
            json!({"sandbox": "off", "justification": 3}),
        ] {
            assert_eq!(
                Escalation::requested(&missing),
                Err(EscalationError::Justification),
                "{missing}"
            );
        }
        assert_eq!(
            EscalationError::Sandbox("\"on\"".into()).to_string(),
            "invalid sandbox \"on\": the only accepted value is \"off\""
        );
    }
    /// Issue 39: a file tool's `sandbox: "off"` under the sandbox is judged as bash's
    /// is. Attack first: without the request, the sandbox's roots deny the write; with
    /// it, no mode and no tool-wide rule lets it out (asked), a rule naming the path
    /// does, a deny rule and read-only mode still refuse, nothing is offered "always",
    /// and outside the sandbox the argument changes nothing.
    #[test]
    fn e11_issue_39_a_file_tools_escalation_is_asked_unless_a_rule_names_the_path() {
        use crate::config::{Mode, PermissionRule, PermissionsConfig};
        use crate::policy::{Cause, Decision, Place, Policy};
        use std::path::{Path, PathBuf};
        let rule = |tool: &str, path: Option<&str>, action| PermissionRule {
            tool: tool.into(),
            path: path.map(str::to_owned),
            action,
            ..PermissionRule::default()
        };
        let policy = |rules: Vec<PermissionRule>| {
            Policy::new(&PermissionsConfig {
                rules,
                ..PermissionsConfig::default()
            })
        };
        let cwd = Path::new("/w");
        let roots = [PathBuf::from("/w")];
        let place = |sandboxed: bool| Place {
            cwd,
            roots: &roots,
            sandbox_roots: sandboxed.then_some(&roots[..]),
            read_only_tool: false,
            globs: None,
        };
        let judge = |p: &Policy, tool: &str, path: &str, mode, leave: bool, boxed: bool| {
            let mut args = json!({"path": path, "content": "x"});
            if leave {
                args["sandbox"] = "off".into();
                args["justification"] = "the hook must change".into();
            }
            p.judge_in(tool, &args, mode, &[], Some(&place(boxed)))
        };
        let none = policy(vec![]);
        // Without the request the sandbox refuses a write outside its roots.
        let j = judge(&none, "write_file", "/etc/x", Mode::Auto, false, true);
        assert_eq!(j.decision, Decision::Deny, "{}", j.reason);
        assert!(j.reason.contains("sandbox: \"off\""), "{}", j.reason);
        // With it: asked, in every mode that may do it, inside the roots too (a
        // protected path is inside them).
        for (tool, path, mode) in [
            ("write_file", "/etc/x", Mode::Auto),
            ("edit_file", ".git/hooks/pre-commit", Mode::Auto),
            ("write_file", ".git/config", Mode::Ask),
            ("read_file", "/home/u/.ssh/id_ed25519", Mode::Auto),
            ("read_file", "secret.env", Mode::ReadOnly),
        ] {
            let j = judge(&none, tool, path, mode, true, true);
            assert_eq!(j.decision, Decision::Ask, "{tool} {path}: {}", j.reason);
            assert_eq!(j.cause, Cause::Escalation, "{tool} {path}");
            assert!(j.grants_on_allow_always.is_empty());
            assert!(
                j.reason
                    .ends_with("Outside the sandbox because: the hook must change"),
                "{}",
                j.reason
            );
            assert_eq!(
                j.escalation.as_ref().map(|e| e.justification.as_str()),
                Some("the hook must change")
            );
        }
        // A tool-wide allow rule names no path: still asked.
        let every = policy(vec![rule("write_file", None, Decision::Allow)]);
        let j = judge(&every, "write_file", "/etc/x", Mode::Auto, true, true);
        assert_eq!(j.decision, Decision::Ask, "{}", j.reason);
        // A rule naming the path lets it out without a question.
        let named = policy(vec![rule("write_file", Some("/etc/x"), Decision::Allow)]);
        let j = judge(&named, "write_file", "/etc/x", Mode::Auto, true, true);
        assert_eq!(j.decision, Decision::Allow, "{}", j.reason);
        assert!(j.escalation.is_some());
        // Deny rules and read-only mode still refuse.
        let denied = policy(vec![rule("write_file", Some(".git/**"), Decision::Deny)]);
        let j = judge(&denied, "write_file", ".git/config", Mode::Auto, true, true);
        assert_eq!(j.decision, Decision::Deny, "{}", j.reason);
        let j = judge(
            &none,
            "write_file",
            ".git/config",
            Mode::ReadOnly,
            true,
            true,
        );
        assert_eq!((j.decision, j.cause), (Decision::Deny, Cause::ReadOnly));
        // Outside the sandbox the argument changes nothing.
        let j = judge(&none, "write_file", "a.txt", Mode::Auto, true, false);
        assert_eq!(j.decision, Decision::Allow);
        assert!(j.escalation.is_none());
    }
}
