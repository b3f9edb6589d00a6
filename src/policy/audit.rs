//! The audit log's line (`state_dir/audit.jsonl`), as written and as read: one type, so
//! the on-disk format is defined in one place and `dsh policy replay` and
//! `shadow-report` read exactly what the audit hook wrote.
//!
//! Every name on disk is spelled out in a `serde` attribute, never derived from a Rust
//! name through `Debug`: renaming a variant cannot silently change what older lines
//! mean. Lines written before this type existed read back as they are (a test keeps one
//! of each).

use super::Grant;
use crate::config::{Decision, HookEvent, Mode};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// One line of the audit log. Lines of an event this build does not know (a newer
/// dsh's) read as [`AuditLine::Other`], so a reader skips them instead of failing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum AuditLine {
    /// A tool execution, whatever happened to it.
    Execution(Box<ExecutionLine>),
    /// A refused cross-session access (T13).
    Refusal(RefusalLine),
    #[serde(other)]
    Other,
}

/// How a judged call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The tool ran and succeeded.
    #[default]
    Ok,
    /// The tool ran (or tried to) and failed.
    Error,
    /// A hook, a rule or the person refused it: it did not run.
    Vetoed,
}

/// What the person answered to a permission question: kept on the call's verdict, in
/// its trace and on its audit line. Written in ACP's own words (`allow_once`, ...);
/// lines written before read back through the aliases (the `Debug` spelling dsh once
/// wrote).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PermissionAnswer {
    #[serde(rename = "allow_once", alias = "AllowOnce")]
    AllowOnce,
    #[serde(rename = "allow_always", alias = "AllowAlways")]
    AllowAlways,
    #[serde(rename = "reject_once", alias = "RejectOnce")]
    RejectOnce,
    #[serde(rename = "reject_always", alias = "RejectAlways")]
    RejectAlways,
    /// Nobody answered: the prompt was cancelled, the client went away, or it failed.
    #[serde(rename = "cancelled", alias = "Cancelled")]
    Cancelled,
}

/// What one hook (or the policy, or the person) said about a call, as its trace entry
/// names it. One lowercase vocabulary, ACP's words for permission answers (the entry's
/// name says whether the person or a permission hook gave one); the spellings older
/// lines had read back through the aliases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TraceDecision {
    #[serde(rename = "allow")]
    Allow,
    #[serde(rename = "ask")]
    Ask,
    #[serde(rename = "deny")]
    Deny,
    /// It answered with no opinion on the decision.
    #[serde(rename = "none")]
    NoOpinion,
    /// It rewrote the call's arguments (the call is judged again from the start).
    #[serde(rename = "rewrite")]
    Rewrite,
    /// Older lines: it asked for a rewrite of a call already rewritten, and was not
    /// followed. No longer written: such a rewrite is now [`TraceDecision::RewriteRefused`].
    #[serde(rename = "rewrite_ignored", alias = "rewrite ignored")]
    RewriteIgnored,
    /// It still asked for a change on the call's last pass (a rewritten call): the call
    /// is refused (fail closed), since running it would ignore the hook.
    #[serde(rename = "rewrite_refused")]
    RewriteRefused,
    /// Its rewrite changed a field another hook of its batch (earlier in config order)
    /// had changed too, from the call before that change: set aside, and the hook asked
    /// again about the merged call.
    #[serde(rename = "rewrite_conflict")]
    RewriteConflict,
    /// A post_tool hook replaced the result's text.
    #[serde(rename = "replace")]
    Replace,
    /// A post_tool hook added context only.
    #[serde(rename = "context")]
    Context,
    /// A permission hook left the question to the person.
    #[serde(rename = "pass")]
    Pass,
    /// The person, or a permission hook for them, allowed this call once.
    #[serde(rename = "allow_once", alias = "AllowOnce")]
    AllowOnce,
    /// The person allowed it and what its grants cover, for good.
    #[serde(rename = "allow_always", alias = "AllowAlways")]
    AllowAlways,
    /// The person, or a permission hook for them (`reject`), refused this call.
    #[serde(rename = "reject_once", alias = "RejectOnce", alias = "reject")]
    RejectOnce,
    /// The person refused it and its like, for good.
    #[serde(rename = "reject_always", alias = "RejectAlways")]
    RejectAlways,
    /// Nobody answered the question (cancelled, the client went away).
    #[serde(rename = "cancelled", alias = "Cancelled")]
    Cancelled,
    /// A shadow that had not answered when the call ended.
    #[serde(rename = "unfinished")]
    Unfinished,
    /// A word a newer dsh wrote: read, counted under its own name nowhere, never a decision.
    #[serde(other, rename = "unknown")]
    Unknown,
}

impl TraceDecision {
    /// The allow/ask/deny it stands for, if it is one (what replay and the shadow
    /// report compare).
    pub fn decision(self) -> Option<Decision> {
        match self {
            TraceDecision::Allow => Some(Decision::Allow),
            TraceDecision::Ask => Some(Decision::Ask),
            TraceDecision::Deny => Some(Decision::Deny),
            _ => None,
        }
    }

    /// Its name on disk and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceDecision::Allow => "allow",
            TraceDecision::Ask => "ask",
            TraceDecision::Deny => "deny",
            TraceDecision::NoOpinion => "none",
            TraceDecision::Rewrite => "rewrite",
            TraceDecision::RewriteIgnored => "rewrite_ignored",
            TraceDecision::RewriteRefused => "rewrite_refused",
            TraceDecision::RewriteConflict => "rewrite_conflict",
            TraceDecision::Replace => "replace",
            TraceDecision::Context => "context",
            TraceDecision::Pass => "pass",
            TraceDecision::AllowOnce => "allow_once",
            TraceDecision::AllowAlways => "allow_always",
            TraceDecision::RejectOnce => "reject_once",
            TraceDecision::RejectAlways => "reject_always",
            TraceDecision::Cancelled => "cancelled",
            TraceDecision::Unfinished => "unfinished",
            TraceDecision::Unknown => "unknown",
        }
    }
}

impl From<Decision> for TraceDecision {
    fn from(decision: Decision) -> Self {
        match decision {
            Decision::Allow => TraceDecision::Allow,
            Decision::Ask => TraceDecision::Ask,
            Decision::Deny => TraceDecision::Deny,
        }
    }
}

impl From<Option<Decision>> for TraceDecision {
    fn from(decision: Option<Decision>) -> Self {
        decision.map_or(TraceDecision::NoOpinion, TraceDecision::from)
    }
}

impl From<PermissionAnswer> for TraceDecision {
    fn from(answer: PermissionAnswer) -> Self {
        match answer {
            PermissionAnswer::AllowOnce => TraceDecision::AllowOnce,
            PermissionAnswer::AllowAlways => TraceDecision::AllowAlways,
            PermissionAnswer::RejectOnce => TraceDecision::RejectOnce,
            PermissionAnswer::RejectAlways => TraceDecision::RejectAlways,
            PermissionAnswer::Cancelled => TraceDecision::Cancelled,
        }
    }
}

impl std::fmt::Display for TraceDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One hook's (or the policy's, or the person's) word on a call, in the order spoken:
/// what the audit line's `trace` holds and the call's trace keeps while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceEntry {
    pub name: String,
    /// The hook event it spoke at (`pre_tool`, `post_tool`, `permission`); every line
    /// dsh wrote names it, hand-made ones may not (read as `pre_tool`).
    #[serde(default)]
    pub event: HookEvent,
    pub decision: TraceDecision,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default)]
    pub ms: u64,
    /// `false` for a shadow (a hook with `enforce = false`, or the `[permissions] shadow`
    /// rules): what it would have decided, which changed nothing.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub enforced: bool,
}

fn lossy_path<S: serde::Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match path {
        Some(path) => s.serialize_str(&path.to_string_lossy()),
        None => s.serialize_none(),
    }
}

/// The `containment` of a line as this dsh reads it: any JSON that is not one of its
/// entries (another version's) is none, never an unreadable line.
fn lenient_containment<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<crate::containment::Containment>, D::Error> {
    let value = Option::<Value>::deserialize(d)?;
    Ok(value.and_then(|v| serde_json::from_value(v).ok()))
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// The line of one tool execution. Fields a line of an older dsh lacks read as their
/// default (`None`: "not kept then"), so a replay can tell partial lines apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionLine {
    pub session: Option<String>,
    #[serde(default)]
    pub call_id: String,
    pub tool: String,
    #[serde(default)]
    pub arguments: Value,
    /// The decision that stood (a veto's `deny` included).
    pub decision: Decision,
    #[serde(default)]
    pub decided_by: String,
    #[serde(default)]
    pub reason: String,
    /// The person's answer, when the call was asked about.
    #[serde(default)]
    pub answer: Option<PermissionAnswer>,
    #[serde(default)]
    pub duration_ms: u64,
    #[serde(default)]
    pub outcome: Outcome,
    /// The mode the call was judged in (absent on lines from before it was kept).
    #[serde(default)]
    pub mode: Option<Mode>,
    /// The policy's version (`USER` or `USER+PROJECT`).
    #[serde(default)]
    pub policy_version: String,
    #[serde(default)]
    pub trace: Vec<TraceEntry>,
    /// The grants it was judged with (absent on lines from before they were kept).
    #[serde(default)]
    pub grants: Option<Vec<Grant>>,
    /// The project file whose rules the session was judged with too. Written lossily
    /// (a path that is not UTF-8 must not cost the whole line).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "lossy_path"
    )]
    pub project: Option<PathBuf>,
    /// Judged as leaving the sandbox (issue 27): it ran outside unless vetoed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outside_sandbox: bool,
    /// A file tool under the sandbox: the layout entry that allowed or refused it
    /// (issue 39). The type is a leaf both the executor (which decides) and this line
    /// (which keeps it) import; a value this dsh cannot read (a line written by
    /// another version) reads as none rather than costing the whole line.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_containment"
    )]
    pub containment: Option<crate::containment::Containment>,
    /// A hook rewrote the call: the arguments it was made with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_arguments: Option<Value>,
    /// A post_tool hook replaced the result: the text before and after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// When the line was written, in milliseconds since the epoch.
    #[serde(default)]
    pub time_ms: u64,
    /// The batch (`dsh exec --prompts`) whose session made the call, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunId>,
    /// The wrapped agent (`[[agents]]` name) whose permission question the call was;
    /// absent for dsh's own calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl ExecutionLine {
    /// The trace entries of the policy's last word (a rewritten call's trace holds the
    /// first pass's too) and where it stands in the trace.
    pub fn last_policy(&self) -> Option<(usize, &TraceEntry)> {
        self.trace
            .iter()
            .enumerate()
            .rev()
            .find(|(_, e)| e.name == "policy")
    }

    /// The call as a person reads it: the bash command, `host:port (by COMMAND)` for a
    /// connection, the arguments as JSON for other tools.
    pub fn shown_call(&self) -> String {
        shown_call(&self.tool, &self.arguments)
    }
}

/// The line of a refused cross-session access (T13).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusalLine {
    pub session: Option<String>,
    pub call_id: String,
    pub tool: String,
    pub task_id: String,
    pub reason: String,
    #[serde(default)]
    pub time_ms: u64,
    /// The batch whose session tried the access, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunId>,
}

/// The id of one batch of sessions (`dsh exec --prompts`): given to each of its
/// sessions when they are made and written in every audit line they cause, so
/// `dsh policy replay --run ID` judges exactly that batch's calls again. A type (not a
/// string) because it comes from a client: only short ids of letters, digits, `-`,
/// `_` and `.` are accepted, so it can be printed, put in a file name or matched
/// without quoting (a bad one is refused where it arrives, and an audit line carrying
/// one does not read).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

impl RunId {
    /// Longest id accepted, in bytes.
    pub const MAX_LEN: usize = 64;

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunId {
    type Error = String;

    fn try_from(id: String) -> Result<Self, String> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if id.is_empty() || id.len() > Self::MAX_LEN || !id.chars().all(allowed) {
            return Err(format!(
                "a run id is 1 to {} letters, digits, `-`, `_` or `.`",
                Self::MAX_LEN
            ));
        }
        Ok(Self(id))
    }
}

impl std::str::FromStr for RunId {
    type Err = String;

    fn from_str(id: &str) -> Result<Self, String> {
        Self::try_from(id.to_string())
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.0
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The audit text with only run `run`'s lines left: every other line blanked, not
/// removed, so line numbers still point into the file (blank lines are skipped by
/// every reader). A line that does not read is kept, so the reader still stops there
/// rather than a filter hiding it. Returns the text and how many lines are the run's.
pub fn only_run(audit: &str, run: &RunId) -> (String, usize) {
    let mut kept = 0;
    let mut text = String::with_capacity(audit.len());
    for line in audit.lines() {
        let of_run = match serde_json::from_str::<AuditLine>(line) {
            Ok(AuditLine::Execution(l)) => l.run.as_ref() == Some(run),
            Ok(AuditLine::Refusal(l)) => l.run.as_ref() == Some(run),
            Ok(AuditLine::Other) => false,
            Err(_) => !line.trim().is_empty(),
        };
        if of_run {
            kept += 1;
            text.push_str(line);
        }
        text.push('\n');
    }
    (text, kept)
}

/// A call as a report shows it: the bash command, `host:port (by COMMAND)` for a
/// connection, the arguments as JSON for other tools.
pub fn shown_call(tool: &str, arguments: &Value) -> String {
    if tool == super::NETWORK_TOOL
        && let (Some(host), Some(port)) = (arguments["host"].as_str(), arguments["port"].as_u64())
    {
        let target = super::network::target(host, u16::try_from(port).unwrap_or(0));
        return match arguments["command"].as_str().filter(|c| !c.is_empty()) {
            Some(command) => format!("{target} (by `{command}`)"),
            None => target,
        };
    }
    arguments["command"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| arguments.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run id comes from a client (`session/new`'s `_meta`) and is printed and
    /// matched: only the plain alphabet passes, and a line carrying another does not read.
    #[test]
    fn a_run_id_is_short_and_plain_or_refused() {
        assert_eq!(
            "run-1a2b.c_d".parse::<RunId>().map(String::from),
            Ok("run-1a2b.c_d".into())
        );
        for bad in ["", "a b", "x\n", "../x", "r\u{1b}[2J", &"x".repeat(65)] {
            assert!(bad.parse::<RunId>().is_err(), "{bad:?}");
        }
        let line = r#"{"event":"refusal","session":"s","callId":"c","tool":"bash_output","taskId":"1","reason":"r","run":"a/b"}"#;
        assert!(serde_json::from_str::<AuditLine>(line).is_err());
        let line = line.replace("a/b", "run-1");
        let Ok(AuditLine::Refusal(read)) = serde_json::from_str::<AuditLine>(&line) else {
            panic!("does not read: {line}");
        };
        assert_eq!(read.run.as_ref().map(RunId::as_str), Some("run-1"));
    }

    /// Lines as dsh wrote them before this type and before the one vocabulary (the
    /// `Debug` spelling of the answer and the person's trace word, a shadow's
    /// `unfinished`, a permission hook's `allow_once` and `reject`, `rewrite ignored`):
    /// each still reads, with the meaning it had, and is written again in ACP's
    /// lowercase words (P8: the audit line is what replay reads).
    #[test]
    fn lines_of_the_format_written_before_the_type_read_back_and_are_written_lowercase() {
        let old = r#"{"event":"execution","session":"s1","callId":"c1","tool":"bash","arguments":{"command":"rm x"},"decision":"allow","decidedBy":"user","reason":"allowed once","answer":"AllowOnce","durationMs":3,"outcome":"ok","mode":"ask","policyVersion":"abc","trace":[{"name":"policy","event":"pre_tool","decision":"ask","reason":"no rule","ms":0},{"name":"shadow policy","event":"pre_tool","decision":"deny","reason":"r","ms":0,"enforced":false},{"name":"slow","event":"pre_tool","decision":"unfinished","reason":"still running","ms":0,"enforced":false},{"name":"perm","event":"permission","decision":"allow_once","ms":1},{"name":"no","event":"permission","decision":"reject","ms":1},{"name":"twice","event":"pre_tool","decision":"rewrite ignored","ms":1},{"name":"user","event":"permission","decision":"AllowOnce","ms":0}],"grants":[["git","push"],{"host":"crates.io"}],"timeMs":1700000000000}"#;
        let AuditLine::Execution(line) = serde_json::from_str(old).expect("reads") else {
            panic!("not an execution line");
        };
        assert_eq!(line.answer, Some(PermissionAnswer::AllowOnce));
        assert_eq!(line.mode, Some(Mode::Ask));
        assert_eq!(line.outcome, Outcome::Ok);
        let said: Vec<_> = line.trace.iter().map(|e| e.decision).collect();
        assert_eq!(
            said,
            [
                TraceDecision::Ask,
                TraceDecision::Deny,
                TraceDecision::Unfinished,
                TraceDecision::AllowOnce,
                TraceDecision::RejectOnce,
                TraceDecision::RewriteIgnored,
                TraceDecision::AllowOnce
            ]
        );
        assert!(!line.trace[1].enforced && line.trace[0].enforced);
        assert_eq!(line.trace[3].event, HookEvent::Permission);
        assert_eq!(
            line.grants,
            Some(vec![
                Grant::Command(vec!["git".into(), "push".into()]),
                Grant::host("crates.io").expect("a host")
            ])
        );
        // Written again, it is the same line but for the words, now lowercase.
        let again = serde_json::to_value(AuditLine::Execution(line.clone())).expect("writes");
        let mut expected: Value = serde_json::from_str(old).expect("json");
        expected["answer"] = "allow_once".into();
        for (i, word) in [
            (4, "reject_once"),
            (5, "rewrite_ignored"),
            (6, "allow_once"),
        ] {
            expected["trace"][i]["decision"] = word.into();
        }
        assert_eq!(again, expected);
        let AuditLine::Execution(reread) = serde_json::from_value(again).expect("reads") else {
            panic!("not an execution line");
        };
        assert_eq!(reread, line);
    }

    /// Every permission answer is written in ACP's word and reads back as itself; the
    /// old spelling of each reads as the same answer.
    #[test]
    fn permission_answers_are_acp_words_and_old_spellings_read() {
        use PermissionAnswer::*;
        for (answer, word, old) in [
            (AllowOnce, "allow_once", "AllowOnce"),
            (AllowAlways, "allow_always", "AllowAlways"),
            (RejectOnce, "reject_once", "RejectOnce"),
            (RejectAlways, "reject_always", "RejectAlways"),
            (Cancelled, "cancelled", "Cancelled"),
        ] {
            assert_eq!(
                serde_json::to_value(answer).expect("writes"),
                Value::from(word)
            );
            assert_eq!(TraceDecision::from(answer).as_str(), word);
            for spelled in [word, old] {
                assert_eq!(
                    serde_json::from_value::<PermissionAnswer>(spelled.into()).ok(),
                    Some(answer)
                );
                assert_eq!(
                    serde_json::from_value::<TraceDecision>(spelled.into()).ok(),
                    Some(TraceDecision::from(answer))
                );
            }
        }
    }

    /// The oldest lines kept no mode, grants or trace: they read, marked as such.
    #[test]
    fn a_line_from_before_mode_and_grants_were_kept_reads_as_partial() {
        let oldest = r#"{"event":"execution","session":null,"callId":"c","tool":"bash","arguments":{"command":"ls"},"decision":"deny","decidedBy":"policy","reason":"r","timeMs":1}"#;
        let AuditLine::Execution(line) = serde_json::from_str(oldest).expect("reads") else {
            panic!("not an execution line");
        };
        assert_eq!((line.mode, line.grants, line.trace.len()), (None, None, 0));
    }

    /// Issue 39: the containment a file call's line keeps is typed, reads back as
    /// itself, and reads as none (the line still read) when another version wrote a
    /// shape this one does not know.
    #[test]
    fn issue_39_containment_is_typed_and_a_foreign_shape_still_reads() {
        use crate::containment::{Containment, Protection};
        let line = |containment: &str| {
            format!(
                r#"{{"event":"execution","session":"s","callId":"c","tool":"write_file","arguments":{{"path":"/w/.git/config"}},"decision":"allow","decidedBy":"policy","reason":"r","timeMs":1{containment}}}"#
            )
        };
        let read = |text: &str| match serde_json::from_str(text).expect("reads") {
            AuditLine::Execution(line) => line.containment,
            _ => panic!("not an execution line"),
        };
        let refused = Containment::Protected {
            entry: "/w/.git".into(),
            what: Protection::Git,
        };
        // As the stop before this one wrote it (the same tagged shape, then as JSON).
        let written = line(r#","containment":{"by":"protected","entry":"/w/.git","what":"git"}"#);
        assert_eq!(read(&written), Some(refused.clone()));
        let AuditLine::Execution(record) = serde_json::from_str(&written).unwrap() else {
            unreachable!()
        };
        let again = serde_json::to_string(&AuditLine::Execution(record)).unwrap();
        assert_eq!(read(&again), Some(refused));
        assert_eq!(
            read(&line(r#","containment":{"by":"a_later_entry","x":1}"#)),
            None
        );
        assert_eq!(read(&line("")), None);
    }

    /// A refusal, and an event a newer dsh may write, read; a word in a trace this build
    /// does not know is no decision.
    #[test]
    fn refusals_and_unknown_events_and_words_read() {
        let refusal = r#"{"event":"refusal","session":"a","callId":"c","tool":"bash_output","taskId":"bash-1","reason":"task belongs to another session","timeMs":5}"#;
        assert!(matches!(
            serde_json::from_str::<AuditLine>(refusal),
            Ok(AuditLine::Refusal(r)) if r.task_id == "bash-1"
        ));
        let newer = r#"{"event":"handover","from":1}"#;
        assert_eq!(
            serde_json::from_str::<AuditLine>(newer).ok(),
            Some(AuditLine::Other)
        );
        let word: TraceDecision = serde_json::from_str(r#""escalate""#).expect("reads");
        assert_eq!((word, word.decision()), (TraceDecision::Unknown, None));
    }

    /// Each spelling is its own: no two variants share a name on disk, and each
    /// reads back as itself.
    #[test]
    fn every_trace_word_reads_back_as_itself() {
        use TraceDecision::*;
        let all = [
            Allow,
            Ask,
            Deny,
            NoOpinion,
            Rewrite,
            RewriteIgnored,
            RewriteRefused,
            RewriteConflict,
            Replace,
            Context,
            Pass,
            AllowOnce,
            AllowAlways,
            RejectOnce,
            RejectAlways,
            Cancelled,
            Unfinished,
        ];
        for word in all {
            let text = serde_json::to_string(&word).expect("writes");
            assert_eq!(text, format!("\"{}\"", word.as_str()));
            // One vocabulary: lowercase words, `_` between them.
            assert!(
                word.as_str()
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_'),
                "{word}"
            );
            assert_eq!(
                serde_json::from_str::<TraceDecision>(&text).ok(),
                Some(word)
            );
        }
    }
}
