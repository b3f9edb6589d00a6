//! What a wrapped agent is told when the sandbox refuses one of its file requests.
//!
//! dsh's own model is told to call the tool again with `sandbox: "off"` and a
//! justification (issue 27), so the person is asked to let that one call out. A wrapped
//! agent cannot: its `fs/*` requests have no such field, and dsh writes the call, not
//! the agent. So the same refusal, read from its data (the layout entry that refused,
//! [`Containment`], or the judge's [`Cause::OutsideSandbox`]), becomes a text that says
//! what the agent can do: ask the person to make the change, or to change dsh's config.
//! Any other error keeps the tool's own text.

use crate::containment::{Containment, MaskedBy, roots_text};
use crate::hooks::waterfall::{ToolExecution, ToolOutput};
use crate::policy::Cause;

/// What every text ends with: the agent cannot leave dsh's sandbox on its own.
const NO_WAY_OUT: &str = "This agent runs inside dsh's sandbox and cannot ask to leave it";

/// The wrapped agent's text for `out`, the result of its file request `call` on
/// `path`, when the sandbox is what refused it; `None` for any other result.
pub fn for_agent(path: &str, call: &ToolExecution, out: &ToolOutput) -> Option<String> {
    if !out.is_error {
        return None;
    }
    if let Some(containment) = out.containment.as_ref().filter(|c| !c.allows()) {
        return by_containment(path, containment);
    }
    let (_, judged) = call.judged()?;
    match &judged.cause {
        Cause::OutsideSandbox { roots } if out.vetoed => Some(outside(path, roots)),
        _ => None,
    }
}

fn outside(path: &str, roots: &[std::path::PathBuf]) -> String {
    format!(
        "{path}: refused: dsh's sandbox writes only in {}, and this path is outside them. \
         {NO_WAY_OUT}: ask the person to make this change, or to add its directory to \
         `[exec.sandbox] writable` in dsh's config",
        roots_text(roots)
    )
}

fn by_containment(path: &str, containment: &Containment) -> Option<String> {
    Some(match containment {
        Containment::OutsideRoots { roots } => outside(path, roots),
        Containment::Protected { what, .. } => format!(
            "{path}: refused: dsh's sandbox keeps it read-only ({what}), for commands and file \
             requests alike. {NO_WAY_OUT}: if the change is needed, ask the person to make it"
        ),
        Containment::Masked {
            masked_by: MaskedBy::DenyRead,
            ..
        } => format!(
            "{path}: refused: dsh's sandbox masks it (`[exec.sandbox] deny_read`: secrets), so \
             neither the agent's commands nor its file requests read or write it. {NO_WAY_OUT}: \
             ask the person for what is needed from it"
        ),
        Containment::Masked { .. } => format!(
            "{path}: refused: dsh's sandbox masks it (dsh's own files or the host's sockets), \
             and nothing in the sandbox reaches it"
        ),
        // Its own text never offers a way out.
        Containment::NotReachable { .. } => return None,
        Containment::WritableRoot { .. }
        | Containment::ReadOnly { .. }
        | Containment::SpillFile => {
            return None;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::containment::Protection;
    use std::path::PathBuf;

    #[test]
    fn no_text_offers_sandbox_off() {
        let refusals = [
            Containment::OutsideRoots {
                roots: vec![PathBuf::from("/w")],
            },
            Containment::Protected {
                entry: PathBuf::from("/w/.git/hooks"),
                what: Protection::Git,
            },
            Containment::Masked {
                entry: PathBuf::from("/h/.ssh"),
                masked_by: MaskedBy::DenyRead,
            },
            Containment::Masked {
                entry: PathBuf::from("/s"),
                masked_by: MaskedBy::DshOwn,
            },
        ];
        for containment in refusals {
            let text = by_containment("/p", &containment).unwrap();
            assert!(text.starts_with("/p: refused: dsh's sandbox"), "{text}");
            assert!(!text.contains("sandbox: \"off\""), "{text}");
        }
        assert!(by_containment("/p", &Containment::SpillFile).is_none());
        assert!(outside("/x", &[PathBuf::from("/w")]).contains("writes only in /w"));
    }
}
