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
}
