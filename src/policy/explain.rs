//! How a judgement reads for a person: `dsh policy explain`'s text.
//!
//! The JSON form is the [`Judgement`] itself (serde); this is the same content laid out
//! for a terminal: the call's decision and, per segment, its words, the wrapper chain that
//! led to it, its decision and what decided it.

use super::{Cause, Judgement, SegmentJudgement, action};

/// The human-readable explanation of `judgement` for `command` in mode `mode`.
pub fn render(command: &str, mode: &str, judgement: &Judgement) -> String {
    render_call("command", command, mode, judgement)
}

/// The human-readable explanation of `judgement` for a connection (a call of the tool
/// `network`) to `target` (`host:port`) in mode `mode`.
pub fn render_network(target: &str, mode: &str, judgement: &Judgement) -> String {
    render_call("network", target, mode, judgement)
}

/// The human-readable explanation of `judgement` for a file tool's call on `path`
/// (issue 39).
pub fn render_file(tool: &str, path: &str, mode: &str, judgement: &Judgement) -> String {
    render_call(tool, path, mode, judgement)
}

fn render_call(label: &str, call: &str, mode: &str, judgement: &Judgement) -> String {
    let mut out = format!(
        "{}: {}\n  {label}: {call}\n  mode: {mode}\n  because: {}\n",
        action(judgement.decision),
        cause(&judgement.cause),
        judgement.reason
    );
    if let Some(escalation) = &judgement.escalation {
        out.push_str(&format!(
            "  outside the sandbox because: {}\n",
            escalation.justification
        ));
    }
    if !judgement.grants_on_allow_always.is_empty() {
        let grants: Vec<String> = judgement
            .grants_on_allow_always
            .iter()
            .map(|g| format!("`{}`", g.display()))
            .collect();
        out.push_str(&format!(
            "  allow always would grant: {}\n",
            grants.join(", ")
        ));
    }
    if !judgement.segments.is_empty() {
        out.push_str("segments:\n");
    }
    for (i, segment) in judgement.segments.iter().enumerate() {
        out.push_str(&render_segment(i + 1, segment));
    }
    out
}

fn render_segment(number: usize, segment: &SegmentJudgement) -> String {
    let words = if segment.words.is_empty() {
        "(no command)".to_owned()
    } else {
        segment.words.join(" ")
    };
    let mut out = format!("  {number}. {words}\n");
    if !segment.via.is_empty() {
        out.push_str(&format!("     via: {}\n", segment.chain()));
    }
    if let Some(why) = &segment.opaque {
        out.push_str(&format!("     opaque: {why}\n"));
    }
    if segment.writes_redirect {
        out.push_str("     writes through a redirection\n");
    }
    out.push_str(&format!(
        "     {}: {}\n",
        action(segment.decision),
        cause(&segment.cause)
    ));
    out
}

/// What decided, in a few words: `rule 0 (dsh.toml:3)`, `mode auto`, `opaque`.
fn cause(cause: &Cause) -> String {
    let at = |index: &usize, rule: &str, origin: &Option<String>| match origin {
        Some(origin) => format!("rule {index} at {origin}: {rule}"),
        None => format!("rule {index}: {rule}"),
    };
    match cause {
        Cause::Rule {
            index,
            rule,
            origin,
        } => at(index, rule, origin),
        Cause::Grant { prefix } => format!("allowed always in this session: `{prefix}`"),
        Cause::Mode { mode } => format!("the default of mode {}", mode.id()),
        Cause::ReadOnly => "read-only mode".into(),
        Cause::Opaque { why } => format!("opaque ({why})"),
        Cause::UnknownWrapper {
            word,
            index,
            rule,
            origin,
        } => format!(
            "not a known wrapper, and its argument `{word}` is what {} names",
            at(index, rule, origin)
        ),
        Cause::CommandInArgument {
            argument,
            index,
            rule,
            origin,
        } => format!(
            "no row in the tables, and its argument `{argument}` is a command line that {} names",
            at(index, rule, origin)
        ),
        Cause::WrittenCode {
            index,
            rule,
            origin,
        } => format!(
            "writes a file holding the words of {}, and a later program may run it",
            at(index, rule, origin)
        ),
        Cause::WrittenScript {
            language,
            runner,
            rule: Some(r),
            ..
        } => format!(
            "`{runner}` runs what the line wrote, and the {language} code written holds the words of {}",
            at(&r.index, &r.rule, &r.origin)
        ),
        Cause::WrittenScript {
            language,
            runner,
            why,
            ..
        } => format!(
            "`{runner}` runs what the line wrote, and the {language} code written is not shown harmless: {why}"
        ),
        Cause::InlineCode {
            language,
            rule: Some(r),
            ..
        } => format!(
            "{language} program: words of {}",
            at(&r.index, &r.rule, &r.origin)
        ),
        Cause::InlineCode { language, why, .. } => {
            format!("{language} code not shown harmless: {why}")
        }
        Cause::Environment { variables } => {
            let names: Vec<&str> = variables.iter().map(|a| a.name.as_str()).collect();
            format!(
                "sets {}, not shown harmless (a variable can run code or name a file to write)",
                names.join(", ")
            )
        }
        Cause::RunsNothing => "runs nothing".into(),
        Cause::Escalation => "outside the sandbox, which only a rule naming it allows".into(),
        Cause::OutsideSandbox { .. } => "outside the sandbox's writable roots".into(),
        Cause::Call => "the call as a whole".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Decision, Mode, PermissionRule, PermissionsConfig};
    use crate::policy::Policy;

    #[test]
    fn an_explanation_names_the_chain_the_rule_and_its_line() {
        let policy = Policy::new(&PermissionsConfig {
            rules: vec![PermissionRule {
                tool: "bash".into(),
                command: Some("rm".into()),
                action: Decision::Deny,
                origin: Some("dsh.toml:7".into()),
                ..PermissionRule::default()
            }],
            ..PermissionsConfig::default()
        });
        let command = "timeout --sig KILL 5 nice rm x";
        let judged = policy.judge(
            "bash",
            &serde_json::json!({ "command": command }),
            Mode::Auto,
            &[],
        );
        let text = render(command, "auto", &judged);
        assert!(text.starts_with("deny: rule 0 at dsh.toml:7"), "{text}");
        assert!(text.contains("via: timeout -> nice -> rm"), "{text}");
        assert!(
            text.contains(
                "1. timeout --sig KILL 5 nice rm x\n     allow: the default of mode auto"
            ),
            "{text}"
        );
        let json = serde_json::to_value(&judged).unwrap();
        assert_eq!(json["decision"], "deny");
        assert_eq!(
            json["segments"][2]["via"],
            serde_json::json!(["timeout", "nice"])
        );
        assert_eq!(json["segments"][2]["cause"]["kind"], "rule");
        assert_eq!(json["segments"][2]["cause"]["origin"], "dsh.toml:7");
    }
}
