//! What a hook program reads and answers, in each protocol and dialect: the input is
//! built from one [`EventInput`], and every answer is read into one [`Answer`], so the
//! rest of dsh does not care which a hook speaks.

use crate::config::{Decision, HookEvent, HookProtocol, Mode};
use crate::hooks::waterfall::{ToolExecution, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::Path;

/// What an event tells a hook.
pub struct EventInput<'a> {
    pub event: HookEvent,
    pub session_id: Option<&'a str>,
    /// The session's cwd (the daemon's when there is no session).
    pub cwd: &'a Path,
    pub mode: Option<Mode>,
    /// The session's JSONL log.
    pub session_log: Option<&'a Path>,
    /// The call, for the tool events and `permission`.
    pub call: Option<&'a ToolExecution>,
    /// The result, for `post_tool`.
    pub result: Option<&'a ToolOutput>,
    /// The user's prompt, for `prompt`.
    pub prompt: Option<&'a str>,
    /// How the session started (`new` or `load`), for `session_start`; how it ended
    /// (`close`, `delete`, `disconnect`, `shutdown`), for `session_end`.
    pub source: Option<&'a str>,
    /// For `stop`: whether a stop hook already sent this turn on (a hook that always
    /// says continue should look at it).
    pub stop_active: Option<bool>,
    /// For `notification`: what dsh is about to ask the person.
    pub message: Option<&'a str>,
}

/// What a permission hook answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionReply {
    AllowOnce,
    Reject,
    /// Ask the person, as without the hook.
    Pass,
}

/// A hook's answer, whatever it speaks. Everything is optional: an empty answer has no
/// opinion.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    pub decision: Option<Decision>,
    pub reason: String,
    /// Text for the model (`<context source="hook:NAME">`).
    pub context: Option<String>,
    /// New arguments for the call (pre_tool).
    pub rewrite: Option<Value>,
    /// New result text (post_tool).
    pub replace: Option<String>,
    /// The answer to a permission question.
    pub permission: Option<PermissionReply>,
    /// At `stop`: go on with the turn, with this as the model's next context.
    pub go_on: Option<String>,
}

/// The JSON a dsh-dialect hook reads on stdin (or as its server method's params).
pub fn input(protocol: HookProtocol, e: &EventInput<'_>) -> Value {
    match protocol {
        HookProtocol::V1 => json!({
            "sessionId": e.session_id,
            "cwd": e.session_id.map(|_| e.cwd.display().to_string()),
            "tool": e.call.map(|c| c.tool.as_str()),
            "arguments": e.call.map(|c| &c.arguments),
            "callId": e.call.map(|c| c.call_id.as_str()),
        }),
        HookProtocol::V2 => v2_input(e),
    }
}

fn v2_input(e: &EventInput<'_>) -> Value {
    let mut v = json!({
        "version": 2,
        "event": e.event.as_str(),
        "sessionId": e.session_id,
        "cwd": e.cwd,
        "mode": e.mode.map(Mode::id),
        "sessionLog": e.session_log,
    });
    if let Some(call) = e.call {
        v["callId"] = call.call_id.clone().into();
        v["tool"] = call.tool.clone().into();
        v["arguments"] = call.arguments.clone();
        if let Some(original) = &call.original_arguments {
            v["originalArguments"] = original.clone();
        }
        // A wrapped agent's call (issue 44): which agent asks, and its own name for the
        // tool, so a hook can judge Claude Code's `Bash` apart from dsh's own `bash`
        // (the rules can name both too). Absent for dsh's own calls.
        if let Some(agent) = &call.agent {
            v["agent"] = agent.clone().into();
        }
        if let Some(tool) = &call.agent_tool {
            v["agentTool"] = tool.clone().into();
        }
        let segments: Vec<Value> = call
            .judged()
            .map(|(_, j)| {
                j.segments
                    .iter()
                    .map(|s| {
                        json!({"words": s.words, "decision": s.decision, "reason": s.reason,
                               "opaque": s.opaque})
                    })
                    .collect()
            })
            .unwrap_or_default();
        v["segments"] = segments.into();
        let verdict = call.verdict();
        v["verdict"] = json!({
            "decision": verdict.decision,
            "decidedBy": verdict.decider(),
            "reason": verdict.reason,
        });
    }
    if let Some(result) = e.result {
        v["result"] = result_json(result);
    }
    if let Some(prompt) = e.prompt {
        v["prompt"] = prompt.into();
    }
    if let Some(source) = e.source {
        v["source"] = source.into();
    }
    if let Some(active) = e.stop_active {
        v["stopHookActive"] = active.into();
    }
    if let Some(message) = e.message {
        v["message"] = message.into();
    }
    v
}

/// A tool's result as hooks see it: text, error flag, how its command ended.
pub fn result_json(out: &ToolOutput) -> Value {
    let mut v = json!({"text": out.text, "isError": out.is_error});
    if let Some(exit) = out.exit {
        v["exitCode"] = exit.exit_code.into();
        v["signal"] = exit.signal.into();
        v["timedOut"] = exit.timed_out.into();
    }
    if !out.spills.is_empty() {
        let paths: Vec<_> = out.spills.iter().map(|p| p.to_string_lossy()).collect();
        v["spillPaths"] = paths.into();
    }
    v
}

/// How a hook process ended, or a server's result.
pub enum Reply {
    /// Exit 0 (or a server's result) with this output.
    Output(Vec<u8>),
    /// Exit code 2: a deny with stderr as the reason.
    Exit2(String),
}

/// Reads a dsh-dialect reply as an answer; `Err` says what was wrong with it (a deny,
/// fail closed).
pub fn answer(protocol: HookProtocol, event: HookEvent, reply: Reply) -> Result<Answer, String> {
    match reply {
        Reply::Exit2(stderr) => Ok(denial(event, stderr)),
        Reply::Output(stdout) => match protocol {
            HookProtocol::V1 => v1_answer(&stdout),
            HookProtocol::V2 => v2_answer(event, &stdout),
        },
    }
}

/// Exit code 2: a deny with stderr as the reason (at post_tool the result is withheld,
/// at `prompt` the prompt is blocked, a permission question is rejected); at `stop`, the
/// turn goes on with stderr as the model's next context (as Claude Code's Stop does).
pub fn denial(event: HookEvent, stderr: String) -> Answer {
    let reason = if stderr.is_empty() {
        "denied (exit code 2)".to_string()
    } else {
        stderr
    };
    if event == HookEvent::Stop {
        return Answer {
            go_on: Some(reason.clone()),
            reason,
            ..Answer::default()
        };
    }
    Answer {
        decision: Some(Decision::Deny),
        reason,
        permission: (event == HookEvent::Permission).then_some(PermissionReply::Reject),
        ..Answer::default()
    }
}

fn unreadable(stdout: &[u8], e: impl std::fmt::Display) -> String {
    let shown: String = String::from_utf8_lossy(stdout).chars().take(200).collect();
    format!("unreadable answer ({e}): {shown:?}")
}

fn v1_answer(stdout: &[u8]) -> Result<Answer, String> {
    #[derive(Deserialize)]
    struct V1 {
        decision: Decision,
        #[serde(default)]
        reason: Option<String>,
    }
    let a: V1 = serde_json::from_slice(stdout).map_err(|e| unreadable(stdout, e))?;
    Ok(Answer {
        decision: Some(a.decision),
        reason: a.reason.unwrap_or_default(),
        ..Answer::default()
    })
}

fn v2_answer(event: HookEvent, stdout: &[u8]) -> Result<Answer, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Rewrite {
        arguments: Value,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct V2 {
        decision: Option<Decision>,
        reason: Option<String>,
        context: Option<String>,
        rewrite: Option<Rewrite>,
        replace: Option<String>,
        answer: Option<PermissionReply>,
        #[serde(rename = "continue")]
        go_on: Option<bool>,
    }
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Ok(Answer::default());
    }
    let a: V2 = serde_json::from_slice(stdout).map_err(|e| unreadable(stdout, e))?;
    let misplaced = |what: &str, allowed: &[HookEvent]| {
        if allowed.contains(&event) {
            Ok(())
        } else {
            Err(format!("`{what}` is not an answer to {}", event.as_str()))
        }
    };
    if a.rewrite.is_some() {
        misplaced("rewrite", &[HookEvent::PreTool])?;
    }
    if a.replace.is_some() {
        misplaced("replace", &[HookEvent::PostTool])?;
    }
    if a.answer.is_some() {
        misplaced("answer", &[HookEvent::Permission])?;
    }
    if a.go_on.is_some() {
        misplaced("continue", &[HookEvent::Stop])?;
    }
    let reason = a.reason.unwrap_or_default();
    if a.go_on == Some(true) && reason.trim().is_empty() {
        return Err("`continue` needs a `reason` (what the model should do next)".into());
    }
    if let Some(rewrite) = &a.rewrite
        && !rewrite.arguments.is_object()
    {
        return Err("`rewrite.arguments` must be an object".into());
    }
    Ok(Answer {
        decision: a.decision,
        go_on: (a.go_on == Some(true)).then(|| reason.clone()),
        reason,
        context: a.context.filter(|c| !c.is_empty()),
        rewrite: a.rewrite.map(|r| r.arguments),
        replace: a.replace,
        permission: a.answer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(event: HookEvent, out: &str) -> Result<Answer, String> {
        answer(
            HookProtocol::V2,
            event,
            Reply::Output(out.as_bytes().to_vec()),
        )
    }

    #[test]
    fn v1_answers_need_a_decision() {
        let a = answer(
            HookProtocol::V1,
            HookEvent::PreTool,
            Reply::Output(br#"{"decision":"ask","reason":"why"}"#.to_vec()),
        )
        .unwrap();
        assert_eq!(a.decision, Some(Decision::Ask));
        assert_eq!(a.reason, "why");
        let bad = |out: &[u8]| {
            answer(
                HookProtocol::V1,
                HookEvent::PreTool,
                Reply::Output(out.to_vec()),
            )
            .is_err()
        };
        assert!(bad(b"yes please"));
        assert!(bad(br#"{"decision":"maybe"}"#));
        assert!(bad(b""));
    }

    #[test]
    fn v2_answers_are_strict_about_fields_and_events() {
        assert_eq!(v2(HookEvent::PreTool, "").unwrap(), Answer::default());
        let a = v2(
            HookEvent::PreTool,
            r#"{"rewrite":{"arguments":{"command":"ls"}},"context":"c"}"#,
        )
        .unwrap();
        assert_eq!(a.rewrite, Some(json!({"command": "ls"})));
        assert_eq!(a.context.as_deref(), Some("c"));
        assert!(v2(HookEvent::PreTool, r#"{"decision":"allow","extra":1}"#).is_err());
        assert!(v2(HookEvent::PostTool, r#"{"rewrite":{"arguments":{}}}"#).is_err());
        assert!(v2(HookEvent::PreTool, r#"{"replace":"x"}"#).is_err());
        assert!(v2(HookEvent::PreTool, r#"{"rewrite":{"arguments":"rm"}}"#).is_err());
        let a = v2(HookEvent::Permission, r#"{"answer":"allow_once"}"#).unwrap();
        assert_eq!(a.permission, Some(PermissionReply::AllowOnce));
        let a = v2(
            HookEvent::Stop,
            r#"{"continue":true,"reason":"run the tests"}"#,
        )
        .unwrap();
        assert_eq!(a.go_on.as_deref(), Some("run the tests"));
        assert!(v2(HookEvent::Stop, r#"{"continue":true}"#).is_err());
        assert!(v2(HookEvent::PreTool, r#"{"continue":true,"reason":"x"}"#).is_err());
    }

    #[test]
    fn exit_code_two_denies_with_stderr() {
        let a = answer(
            HookProtocol::V2,
            HookEvent::Permission,
            Reply::Exit2("no".into()),
        )
        .unwrap();
        assert_eq!(a.decision, Some(Decision::Deny));
        assert_eq!(a.permission, Some(PermissionReply::Reject));
        assert_eq!(a.reason, "no");
    }
}
