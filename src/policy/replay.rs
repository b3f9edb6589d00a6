//! Replaying an audit log under a candidate policy (`dsh policy replay`): every audited
//! call is judged again with the mode and grants it was judged with, and the calls whose
//! decision would change are reported, with a from -> to matrix. Pure: the caller reads
//! the file and prints.

use super::audit::{AuditLine, ExecutionLine, TraceDecision, shown_call};
use super::{Grant, Policy, action};
use crate::config::HookEvent;
use crate::config::{Decision, Mode};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// One call whose decision changes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// Its line in the audit log (1-based): in `file` when set.
    pub line: usize,
    /// The file of a rotated set the line is in (set by the reader of several files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<std::path::PathBuf>,
    pub tool: String,
    /// The bash command, or the arguments as JSON for other tools.
    pub call: String,
    pub from: Decision,
    pub to: Decision,
    /// What decided it then (from the line) and what decides it now.
    pub before: String,
    pub now: String,
}

/// What a replay found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Calls judged again.
    pub replayed: usize,
    /// Of those, lines from before the audit kept the mode and grants: judged in the
    /// candidate's default mode and with no grants.
    pub partial: usize,
    /// File-tool calls, not judged again: their verdict depends on the session's
    /// directories, which the audit line does not keep.
    pub skipped: usize,
    pub changes: Vec<Change>,
    /// How many calls went from one decision to another, unchanged ones included:
    /// `matrix[from][to]`.
    pub matrix: BTreeMap<String, BTreeMap<String, usize>>,
    /// With `--hooks`: what each of the candidate's pre_tool hooks said, counted:
    /// `hooks[name][decision]` (a decision, `rewrite`, `context`...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub hooks: BTreeMap<String, BTreeMap<String, usize>>,
}

impl Report {
    /// Whether some call would be allowed more than before (deny -> ask or allow,
    /// ask -> allow).
    pub fn loosens(&self) -> bool {
        self.changes.iter().any(|c| c.to < c.from)
    }
}

/// An audit line that cannot be read: the replay stops there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub line: usize,
    pub why: String,
}

/// One audited call, as its line keeps it.
#[derive(Debug, Clone)]
pub struct AuditedCall {
    /// Its line in the audit log (1-based).
    pub line: usize,
    pub session: Option<String>,
    pub tool: String,
    pub arguments: Value,
    /// The mode and grants it was judged with (`None`: a line from before they were kept).
    pub mode: Option<Mode>,
    pub grants: Option<Vec<Grant>>,
    /// What the policy decided then, and why.
    pub by_policy: (Decision, String),
    /// What each enforced pre_tool hook decided then, after the policy's last word.
    pub by_hooks: Vec<(String, Decision, String)>,
    /// The project file whose rules the session was judged with too, if any: a replay
    /// judges the call with that project's rules on top of the candidate's.
    pub project: Option<std::path::PathBuf>,
    /// It was judged as leaving the sandbox (`outsideSandbox`, issue 27): a replay judges
    /// it so again, else a mode's allow would look like a loosening.
    pub outside_sandbox: bool,
}

impl AuditedCall {
    /// What was decided before the person was asked: the policy's word, or with
    /// `hooks` the strongest of it and the hooks'.
    fn before(&self, hooks: bool) -> (Decision, String) {
        let mut before = self.by_policy.clone();
        if hooks {
            for (name, said, reason) in &self.by_hooks {
                if *said > before.0 {
                    before = (*said, format!("{name}: {reason}"));
                }
            }
        }
        before
    }
}

/// The calls of an audit log that can be judged again.
#[derive(Debug, Clone, Default)]
pub struct Audited {
    pub calls: Vec<AuditedCall>,
    /// File-tool calls, left out (see [`Report::skipped`]).
    pub skipped: usize,
}

/// The `execution` lines of an audit log with their line numbers, parsed; blank lines and
/// other events (refusals, anything newer) are skipped, a line that is not an audit line
/// is an error.
fn execution_lines(
    audit: &str,
) -> impl Iterator<Item = Result<(usize, ExecutionLine), Unreadable>> + '_ {
    audit
        .lines()
        .enumerate()
        .filter(|(_, text)| !text.trim().is_empty())
        .filter_map(|(i, text)| {
            let line = i + 1;
            match serde_json::from_str::<AuditLine>(text) {
                Err(e) => Some(Err(Unreadable {
                    line,
                    why: format!("not an audit line: {e}"),
                })),
                Ok(AuditLine::Execution(record)) => Some(Ok((line, *record))),
                Ok(_) => None,
            }
        })
}

/// Reads every `execution` line of `audit`; other lines (refusals, anything newer) are
/// skipped. The policy's decision is the line's trace entry named `policy` (the last: a
/// rewritten call's trace holds the first pass's too, and the line's arguments are the
/// rewrite's), else (older lines) its recorded decision.
pub fn audited_calls(audit: &str) -> Result<Audited, Unreadable> {
    let mut audited = Audited::default();
    for item in execution_lines(audit) {
        let (line, record) = item?;
        let last_policy = record.last_policy();
        let by_policy = match last_policy {
            Some((_, entry)) => (
                entry.decision.decision().ok_or_else(|| Unreadable {
                    line,
                    why: format!("the policy said `{}`, not a decision", entry.decision),
                })?,
                entry.reason.clone(),
            ),
            None => (
                record.decision,
                format!("{}: {}", record.decided_by, record.reason),
            ),
        };
        if record.arguments.get("path").is_some() {
            // A file tool is judged against the session's directories, which the line
            // does not keep: it cannot be judged again as it was.
            audited.skipped += 1;
            continue;
        }
        let by_hooks = record.trace[last_policy.map_or(0, |(i, _)| i + 1)..]
            .iter()
            .filter(|e| e.event == HookEvent::PreTool && e.enforced)
            .filter_map(|e| Some((e.name.clone(), e.decision.decision()?, e.reason.clone())))
            .collect();
        audited.calls.push(AuditedCall {
            line,
            session: record.session,
            tool: record.tool,
            arguments: record.arguments,
            mode: record.mode,
            grants: record.grants,
            by_policy,
            by_hooks,
            project: record.project,
            outside_sandbox: record.outside_sandbox,
        });
    }
    Ok(audited)
}

impl Report {
    /// An empty report of `audited`'s calls (its skipped ones counted).
    pub fn of(audited: &Audited) -> Self {
        Report {
            skipped: audited.skipped,
            ..Report::default()
        }
    }

    /// Counts `call` judged again as `to` (because of `now`). With `hooks`, the
    /// decision it is compared with is the policy's and its hooks' together.
    pub fn record(&mut self, call: &AuditedCall, hooks: bool, to: Decision, now: String) {
        let (from, before) = call.before(hooks);
        if call.mode.is_none() || call.grants.is_none() {
            self.partial += 1;
        }
        self.replayed += 1;
        *self
            .matrix
            .entry(action(from).to_string())
            .or_default()
            .entry(action(to).to_string())
            .or_default() += 1;
        if to != from {
            self.changes.push(Change {
                line: call.line,
                file: None,
                tool: call.tool.clone(),
                call: shown_call(&call.tool, &call.arguments),
                from,
                to,
                before,
                now,
            });
        }
    }
}

/// Judges every call of `audit` again with `policy`, with the mode and grants it had
/// (lines without them: `default_mode` and none).
pub fn replay(audit: &str, policy: &Policy, default_mode: Mode) -> Result<Report, Unreadable> {
    Ok(replay_calls(
        &audited_calls(audit)?,
        default_mode,
        |_| policy,
        None,
    ))
}

/// Judges every call of `audited` again with the policy `policy_of` gives it (the
/// candidate's, or its project's on top of it), with the mode and grants it had.
/// `globs` reads the disk for a bash line's patterns (P6) as the daemon's hook does
/// (`dsh policy replay` gives it the current directory's); without it a pattern is
/// judged as anything it could match, stricter than the daemon was.
pub fn replay_calls<'p>(
    audited: &Audited,
    default_mode: Mode,
    policy_of: impl Fn(&AuditedCall) -> &'p Policy,
    globs: Option<&dyn super::globs::Globs>,
) -> Report {
    let mut report = Report::of(audited);
    // A bash call's verdict needs no place but whether it leaves the sandbox and the
    // disk its patterns expand against; other tools keep judging with none.
    let root = std::path::Path::new("/");
    let place = |outside_sandbox: bool| super::Place {
        cwd: root,
        roots: &[],
        sandbox_roots: outside_sandbox.then_some(&[]),
        read_only_tool: false,
        globs,
    };
    let (inside, outside) = (place(false), place(true));
    for call in &audited.calls {
        let place = match (call.tool == "bash", call.outside_sandbox) {
            (_, true) => Some(&outside),
            (true, false) => Some(&inside),
            (false, false) => None,
        };
        let judged = policy_of(call).judge_in(
            &call.tool,
            &call.arguments,
            call.mode.unwrap_or(default_mode),
            call.grants.as_deref().unwrap_or_default(),
            place,
        );
        report.record(call, false, judged.decision, judged.reason);
    }
    report
}

/// `FILE:LINE`, or `line LINE` when the log is one file.
fn place(file: Option<&std::path::Path>, line: usize) -> String {
    match file {
        Some(file) => format!("{}:{line}", file.display()),
        None => format!("line {line}"),
    }
}

/// The report as text: each change, then the matrix.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for c in &report.changes {
        out.push_str(&format!(
            "{}: {} -> {}  {} {}\n  before: {}\n  now: {}\n",
            place(c.file.as_deref(), c.line),
            action(c.from),
            action(c.to),
            c.tool,
            c.call,
            c.before,
            c.now
        ));
    }
    if report.skipped > 0 {
        out.push_str(&format!(
            "{} file-tool call(s) skipped (judged against the session's directories)\n",
            report.skipped
        ));
    }
    out.push_str(&format!(
        "{} call(s) replayed, {} changed{}\n",
        report.replayed,
        report.changes.len(),
        if report.partial > 0 {
            format!(
                "; {} from lines without mode or grants (judged in the default mode, no grants)",
                report.partial
            )
        } else {
            String::new()
        }
    ));
    out.push_str("from \\ to   allow    ask   deny\n");
    for from in ["allow", "ask", "deny"] {
        let row = report.matrix.get(from);
        let n = |to: &str| row.and_then(|r| r.get(to)).copied().unwrap_or(0);
        out.push_str(&format!(
            "{from:<9} {:>7} {:>6} {:>6}\n",
            n("allow"),
            n("ask"),
            n("deny")
        ));
    }
    for (hook, said) in &report.hooks {
        let counts: Vec<String> = said.iter().map(|(d, n)| format!("{d} {n}")).collect();
        out.push_str(&format!("{hook}: {}\n", counts.join(", ")));
    }
    out
}

/// Where a shadow (a hook with `enforce = false`, or the `[permissions] shadow` rules)
/// would have decided otherwise than what was enforced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShadowDifference {
    pub line: usize,
    /// As [`Change::file`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<std::path::PathBuf>,
    pub tool: String,
    pub call: String,
    /// The shadow's name in the trace.
    pub shadow: String,
    pub enforced: Decision,
    pub shadow_decision: Decision,
    pub reason: String,
}

/// What the shadows in an audit log said, against what was enforced.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ShadowReport {
    /// Per shadow: calls it spoke on, and how many of those it would have decided otherwise.
    pub shadows: BTreeMap<String, ShadowCount>,
    pub differences: Vec<ShadowDifference>,
}

/// One shadow's tally.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ShadowCount {
    pub calls: usize,
    pub differed: usize,
    /// Its answer did not come before the call ended.
    pub unfinished: usize,
}

/// Reads every `execution` line's shadow trace entries (`enforced: false`) and compares
/// each shadow's decision with the line's enforced one. A shadow with no opinion (a hook
/// that answered nothing, a rewrite) agrees.
pub fn shadow_report(audit: &str) -> Result<ShadowReport, Unreadable> {
    let mut report = ShadowReport::default();
    for item in execution_lines(audit) {
        let (line, record) = item?;
        let enforced = record.decision;
        for entry in record.trace.iter().filter(|t| !t.enforced) {
            let count = report.shadows.entry(entry.name.clone()).or_default();
            count.calls += 1;
            if entry.decision == TraceDecision::Unfinished {
                count.unfinished += 1;
                continue;
            }
            let Some(said) = entry.decision.decision() else {
                continue;
            };
            if said != enforced {
                count.differed += 1;
                report.differences.push(ShadowDifference {
                    line,
                    file: None,
                    tool: record.tool.clone(),
                    call: record.shown_call(),
                    shadow: entry.name.clone(),
                    enforced,
                    shadow_decision: said,
                    reason: entry.reason.clone(),
                });
            }
        }
    }
    Ok(report)
}

/// The shadow report as text: each difference, then a line per shadow.
pub fn render_shadows(report: &ShadowReport) -> String {
    let mut out = String::new();
    for d in &report.differences {
        out.push_str(&format!(
            "{}: {} says {} where {} was enforced  {} {}\n  {}\n",
            place(d.file.as_deref(), d.line),
            d.shadow,
            action(d.shadow_decision),
            action(d.enforced),
            d.tool,
            d.call,
            d.reason
        ));
    }
    if report.shadows.is_empty() {
        out.push_str("no shadow spoke in this log\n");
    }
    for (name, c) in &report.shadows {
        out.push_str(&format!(
            "{name}: {} call(s), {} differed, {} unfinished\n",
            c.calls, c.differed, c.unfinished
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PermissionRule, PermissionsConfig};

    fn policy(rules: &[(&str, Decision)]) -> Policy {
        Policy::new(&PermissionsConfig {
            rules: rules
                .iter()
                .map(|(c, a)| PermissionRule {
                    tool: "bash".into(),
                    command: Some(c.to_string()),
                    action: *a,
                    ..PermissionRule::default()
                })
                .collect(),
            ..PermissionsConfig::default()
        })
    }

    fn line(command: &str, mode: &str, decision: &str) -> String {
        serde_json::json!({"event": "execution", "tool": "bash", "arguments": {"command": command},
            "decision": decision, "mode": mode, "grants": [],
            "trace": [{"name": "policy", "decision": decision, "reason": "r"}]})
        .to_string()
    }

    /// A disk where every pattern matches nothing, as `/nonexistent/r[m]` does.
    #[derive(Debug)]
    struct NothingMatches;

    impl crate::policy::globs::Globs for NothingMatches {
        fn expand(&self, _pattern: &str) -> Option<Vec<String>> {
            Some(Vec::new())
        }
    }

    /// P6 (issue 41): replay reads a pattern against the disk it is given, as the daemon
    /// did. With none (the old path) a pattern that matches nothing is taken as the
    /// denied name and reported as a change the candidate did not make.
    #[test]
    fn p6_replay_expands_patterns_against_the_disk_it_is_given() {
        let audit = line("logsave /dev/null /nonexistent/r[m] x", "auto", "allow");
        let policy = policy(&[("rm", Decision::Deny)]);
        let audited = audited_calls(&audit).unwrap();
        let without_disk = replay_calls(&audited, Mode::Auto, |_| &policy, None);
        assert_eq!(without_disk.changes.len(), 1, "no disk: stricter");
        let with_disk = replay_calls(&audited, Mode::Auto, |_| &policy, Some(&NothingMatches));
        assert!(with_disk.changes.is_empty(), "{:?}", with_disk.changes);
    }

    #[test]
    fn an_added_deny_rule_changes_exactly_the_matching_calls() {
        let audit = [
            line("git status", "auto", "allow"),
            line("git push origin", "auto", "allow"),
            line("ls", "auto", "allow"),
        ]
        .join("\n");
        let same = replay(&audit, &policy(&[]), Mode::Ask).unwrap();
        assert!(same.changes.is_empty());
        assert_eq!(same.matrix["allow"]["allow"], 3);
        let stricter = replay(&audit, &policy(&[("git push", Decision::Deny)]), Mode::Ask).unwrap();
        assert_eq!(stricter.changes.len(), 1);
        assert_eq!(stricter.changes[0].line, 2);
        assert_eq!(
            (stricter.changes[0].from, stricter.changes[0].to),
            (Decision::Allow, Decision::Deny)
        );
        assert!(!stricter.loosens());
    }

    #[test]
    fn issue_27_escalation_a_call_that_left_the_sandbox_is_judged_so_again() {
        let mut escalated: Value = serde_json::from_str(&line("ls", "auto", "ask")).unwrap();
        escalated["arguments"]["sandbox"] = "off".into();
        escalated["arguments"]["justification"] = "why".into();
        escalated["outsideSandbox"] = true.into();
        let audit = escalated.to_string();
        let same = replay(&audit, &policy(&[]), Mode::Ask).unwrap();
        assert!(same.changes.is_empty(), "{:?}", same.changes);
        let looser = replay(&audit, &policy(&[("ls", Decision::Allow)]), Mode::Ask).unwrap();
        assert!(looser.loosens());
    }

    #[test]
    fn e10_a_network_line_is_judged_again_under_a_stricter_candidate() {
        let network = crate::config::NetworkConfig {
            allow: vec!["*.crates.io".into()],
            ..Default::default()
        };
        let audited = serde_json::json!({"event": "execution", "tool": "network",
            "arguments": {"host": "index.crates.io", "port": 443, "scheme": "https",
                          "command": "cargo build", "taskId": "bash-1"},
            "decision": "allow", "mode": "ask", "grants": [["git", "push"], {"host": "github.com"}],
            "trace": [{"name": "policy", "decision": "allow",
                       "reason": "rule network host `*.crates.io` (allow) matches index.crates.io:443"}]})
        .to_string();
        let calls = audited_calls(&audited).unwrap();
        assert_eq!(
            calls.calls[0].grants.as_deref().unwrap(),
            [Grant::of("git push"), Grant::Host("github.com".into())]
        );
        let same = replay(&audited, &policy(&[]).with_network(&network), Mode::Ask).unwrap();
        assert!(same.changes.is_empty(), "{:?}", same.changes);
        // The candidate denies the host, and no longer allows it: both tighten.
        let stricter = crate::config::NetworkConfig {
            deny: vec!["index.crates.io".into()],
            ..network.clone()
        };
        let r = replay(&audited, &policy(&[]).with_network(&stricter), Mode::Ask).unwrap();
        assert_eq!(r.changes.len(), 1);
        let change = &r.changes[0];
        assert_eq!((change.from, change.to), (Decision::Allow, Decision::Deny));
        assert_eq!(change.call, "index.crates.io:443 (by `cargo build`)");
        assert!(
            change.now.contains("[exec.sandbox.network]")
                || change.now.contains("host `index.crates.io`"),
            "{}",
            change.now
        );
        assert!(!r.loosens());
        let r = replay(&audited, &policy(&[]), Mode::Ask).unwrap();
        assert_eq!(
            (r.changes[0].from, r.changes[0].to),
            (Decision::Allow, Decision::Ask)
        );
        // The line's host grant still counts: github.com stays allowed without a rule.
        let github = audited.replace("index.crates.io", "github.com");
        let r = replay(&github, &policy(&[]), Mode::Ask).unwrap();
        assert!(r.changes.is_empty(), "{:?}", r.changes);
    }

    #[test]
    fn loosening_is_detected_and_old_lines_are_counted() {
        let audit = line("rm x", "ask", "ask");
        let looser = replay(&audit, &policy(&[("rm", Decision::Allow)]), Mode::Ask).unwrap();
        assert!(looser.loosens());
        let old = r#"{"event":"execution","tool":"bash","arguments":{"command":"ls"},"decision":"allow","decidedBy":"policy","reason":""}"#;
        let r = replay(old, &policy(&[]), Mode::Auto).unwrap();
        assert_eq!((r.replayed, r.partial), (1, 1));
        // A rewritten call's trace holds both passes: the last policy entry is the one
        // that judged the line's arguments.
        let rewritten = serde_json::json!({"event": "execution", "tool": "bash",
            "arguments": {"command": "ls"}, "decision": "allow", "mode": "auto", "grants": [],
            "trace": [{"name": "policy", "decision": "deny", "reason": "rm"},
                      {"name": "policy", "decision": "allow", "reason": "ls"}]})
        .to_string();
        let r = replay(&rewritten, &policy(&[("rm", Decision::Deny)]), Mode::Auto).unwrap();
        assert!(r.changes.is_empty(), "{:?}", r.changes);
        let file = r#"{"event":"execution","tool":"write_file","arguments":{"path":"x","content":""},"decision":"allow"}"#;
        let r = replay(file, &policy(&[]), Mode::Auto).unwrap();
        assert_eq!((r.replayed, r.skipped), (0, 1));
        let bad = replay(
            "{\"event\":\"execution\"}\nnot json",
            &policy(&[]),
            Mode::Ask,
        );
        assert_eq!(bad.unwrap_err().line, 1);
        assert_eq!(
            replay("\nnot json", &policy(&[]), Mode::Ask)
                .unwrap_err()
                .line,
            2
        );
    }
}
