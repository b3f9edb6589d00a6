//! Claude Code's hook dialect (`dialect = "claude-code"`), so its hook scripts run as they
//! are: its input names (`hook_event_name`, `tool_name`, `tool_input`, ...) and its
//! answers (exit code 2, or JSON with `hookSpecificOutput`, `decision: "block"`,
//! `continue: false`). Two differences by design: any failure denies (Claude Code goes
//! on), and `allow` never loosens a rule's deny or ask.

use super::protocol::{Answer, EventInput, PermissionReply, Reply, denial, result_json};
use crate::config::{Decision, HookEvent, Mode};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// Claude Code's event name for each of ours.
fn event_name(event: HookEvent) -> &'static str {
    match event {
        HookEvent::PreTool => "PreToolUse",
        HookEvent::PostTool => "PostToolUse",
        HookEvent::Permission => "PermissionRequest",
        HookEvent::Prompt => "UserPromptSubmit",
        HookEvent::SessionStart => "SessionStart",
        HookEvent::Stop => "Stop",
        HookEvent::SessionEnd => "SessionEnd",
        HookEvent::Notification => "Notification",
        HookEvent::PostToolFailure => "PostToolUseFailure",
    }
}

/// Claude Code's names for dsh's tools (what its matchers and `tool_name` say); others,
/// MCP tools among them (`mcp__server__tool` in both), keep their own.
pub fn tool_name(tool: &str) -> &str {
    match tool {
        "bash" => "Bash",
        "bash_output" => "BashOutput",
        "bash_kill" => "KillShell",
        "read_file" => "Read",
        "edit_file" => "Edit",
        "write_file" => "Write",
        "todo_write" => "TodoWrite",
        other => other,
    }
}

/// Claude Code's permission modes nearest to dsh's.
fn permission_mode(mode: Mode) -> &'static str {
    match mode {
        Mode::Ask => "default",
        Mode::Auto => "acceptEdits",
        Mode::ReadOnly => "plan",
    }
}

/// A call's arguments as Claude Code names them.
fn tool_input(tool: &str, arguments: &Value) -> Value {
    let mut input = Map::new();
    let arg = |name: &str| arguments.get(name).cloned();
    match tool {
        "bash" => {
            for (ours, theirs) in [
                ("command", "command"),
                ("description", "description"),
                ("timeoutMs", "timeout"),
                ("run_in_background", "run_in_background"),
                ("workdir", "workdir"),
            ] {
                if let Some(v) = arg(ours) {
                    input.insert(theirs.into(), v);
                }
            }
        }
        "bash_output" => {
            if let Some(v) = arg("task_id") {
                input.insert("bash_id".into(), v);
            }
        }
        "bash_kill" => {
            if let Some(v) = arg("task_id") {
                input.insert("shell_id".into(), v);
            }
        }
        "read_file" | "edit_file" | "write_file" => {
            let Some(args) = arguments.as_object() else {
                return arguments.clone();
            };
            for (name, v) in args {
                let theirs = if name == "path" { "file_path" } else { name };
                input.insert(theirs.into(), v.clone());
            }
        }
        _ => return arguments.clone(),
    }
    Value::Object(input)
}

/// An `updatedInput` back in dsh's argument names, over the call's own arguments.
fn arguments_from(tool: &str, arguments: &Value, updated: &Value) -> Value {
    let mut args = arguments.as_object().cloned().unwrap_or_default();
    let Some(updated) = updated.as_object() else {
        return Value::Object(args);
    };
    for (theirs, v) in updated {
        let ours = match (tool, theirs.as_str()) {
            ("bash", "timeout") => "timeoutMs",
            ("bash_output", "bash_id") | ("bash_kill", "shell_id") => "task_id",
            ("read_file" | "edit_file" | "write_file", "file_path") => "path",
            (_, name) => name,
        };
        args.insert(ours.into(), v.clone());
    }
    Value::Object(args)
}

pub fn input(e: &EventInput<'_>) -> Value {
    let mut v = json!({
        "session_id": e.session_id,
        "transcript_path": e.session_log,
        "cwd": e.cwd,
        "hook_event_name": event_name(e.event),
        "permission_mode": e.mode.map(permission_mode),
    });
    if let Some(call) = e.call {
        v["tool_name"] = tool_name(&call.tool).into();
        v["tool_input"] = tool_input(&call.tool, &call.arguments);
        v["tool_use_id"] = call.call_id.clone().into();
    }
    if let Some(result) = e.result {
        v["tool_response"] = result_json(result);
    }
    if let Some(prompt) = e.prompt {
        v["prompt"] = prompt.into();
    }
    match (e.event, e.source) {
        (HookEvent::SessionEnd, _) => v["reason"] = "other".into(),
        (_, Some("load")) => v["source"] = "resume".into(),
        (_, Some(_)) => v["source"] = "startup".into(),
        _ => {}
    }
    if let Some(active) = e.stop_active {
        v["stop_hook_active"] = active.into();
    }
    if let Some(message) = e.message {
        v["message"] = message.into();
        v["notification_type"] = "permission_prompt".into();
    }
    if e.event == HookEvent::PostToolFailure
        && let Some(result) = e.result
    {
        v["error"] = result.text.clone().into();
        v["is_interrupt"] = false.into();
    }
    v
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Output {
    #[serde(rename = "continue")]
    go_on: Option<bool>,
    stop_reason: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
    system_message: Option<String>,
    hook_specific_output: Option<Specific>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Specific {
    permission_decision: Option<String>,
    permission_decision_reason: Option<String>,
    updated_input: Option<Value>,
    additional_context: Option<String>,
    /// PermissionRequest's answer.
    decision: Option<PermissionDecision>,
}

#[derive(Deserialize)]
struct PermissionDecision {
    behavior: String,
    #[serde(default)]
    message: Option<String>,
}

/// Reads a Claude Code hook's reply: exit code 2 denies with stderr as the reason, except
/// at PostToolUse, where Claude Code shows stderr to the model (context here).
pub fn reply(event: HookEvent, reply: Reply) -> Result<Answer, String> {
    match reply {
        Reply::Exit2(stderr) if event == HookEvent::PostTool => Ok(Answer {
            context: Some(if stderr.is_empty() {
                "denied (exit code 2)".to_string()
            } else {
                stderr
            }),
            ..Answer::default()
        }),
        Reply::Exit2(stderr) => Ok(denial(event, stderr)),
        Reply::Output(stdout) => answer(event, &stdout),
    }
}

/// Reads a Claude Code hook's stdout (exit code 0). Plain text is context where Claude
/// Code takes it so (a prompt or a session's start) and no opinion elsewhere; JSON is
/// read leniently (Claude Code's outputs carry fields dsh has no use for), but a decision
/// it cannot read is an error, so it denies.
pub fn answer(event: HookEvent, stdout: &[u8]) -> Result<Answer, String> {
    let text = String::from_utf8_lossy(stdout);
    let trimmed = text.trim();
    if !trimmed.starts_with('{') {
        let context = matches!(event, HookEvent::Prompt | HookEvent::SessionStart)
            .then(|| trimmed.to_string())
            .filter(|t| !t.is_empty());
        return Ok(Answer {
            context,
            ..Answer::default()
        });
    }
    let out: Output = serde_json::from_str(trimmed).map_err(|e| {
        let shown: String = trimmed.chars().take(200).collect();
        format!("unreadable answer ({e}): {shown:?}")
    })?;
    let specific = out.hook_specific_output.unwrap_or_default();
    let mut a = Answer {
        context: specific.additional_context.filter(|c| !c.is_empty()),
        ..Answer::default()
    };
    let mut reasons: Vec<String> = Vec::new();
    if let Some(d) = &specific.permission_decision {
        a.decision = Some(match d.as_str() {
            "allow" => Decision::Allow,
            "ask" => Decision::Ask,
            "deny" => Decision::Deny,
            other => return Err(format!("unknown permissionDecision `{other}`")),
        });
        reasons.extend(specific.permission_decision_reason.clone());
    }
    if let Some(updated) = specific.updated_input {
        a.rewrite = Some(updated);
    }
    if let Some(p) = specific.decision {
        a.permission = Some(match p.behavior.as_str() {
            "allow" => PermissionReply::AllowOnce,
            "deny" => PermissionReply::Reject,
            other => return Err(format!("unknown decision.behavior `{other}`")),
        });
        reasons.extend(p.message);
    }
    match out.decision.as_deref() {
        None | Some("approve") => {}
        Some("block") => {
            let reason = out.reason.clone().unwrap_or_else(|| "blocked".into());
            if event == HookEvent::Stop {
                // A Stop hook's block keeps the turn going, its reason the model's next word.
                a.go_on = Some(reason.clone());
                reasons.push(reason);
            } else if event == HookEvent::PostTool {
                // Claude Code shows a PostToolUse block's reason to the model.
                a.context = Some(match a.context {
                    Some(c) => format!("{c}\n{reason}"),
                    None => reason,
                });
            } else {
                a.decision = Some(Decision::Deny);
                reasons.push(reason);
            }
        }
        Some(other) => return Err(format!("unknown decision `{other}`")),
    }
    if out.go_on == Some(false) {
        // `continue: false` stops: at Stop the turn ends (no going on) whatever else.
        a.go_on = None;
        a.decision = Some(Decision::Deny);
        reasons.push(out.stop_reason.unwrap_or_else(|| "stopped by hook".into()));
    }
    reasons.extend(out.system_message);
    a.reason = reasons.join("; ");
    Ok(a)
}

/// Turns an answer's `updatedInput` into dsh's arguments for `tool`.
pub fn rewrite_arguments(tool: &str, arguments: &Value, updated: &Value) -> Value {
    arguments_from(tool, arguments, updated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways() {
        let args = json!({"command": "ls", "description": "d", "timeoutMs": 5, "run_in_background": false});
        let input = tool_input("bash", &args);
        assert_eq!(input["timeout"], 5);
        assert_eq!(input["command"], "ls");
        assert_eq!(
            tool_input("bash_kill", &json!({"task_id": "bash-1"})),
            json!({"shell_id": "bash-1"})
        );
        let back = rewrite_arguments("bash", &args, &json!({"command": "ls -a", "timeout": 9}));
        assert_eq!(back["command"], "ls -a");
        assert_eq!(back["timeoutMs"], 9);
        assert_eq!(back["description"], "d");
        let edit = json!({"path": "a.rs", "old_string": "x", "new_string": "y"});
        assert_eq!(tool_input("edit_file", &edit)["file_path"], "a.rs");
        let back = rewrite_arguments("edit_file", &edit, &json!({"file_path": "b.rs"}));
        assert_eq!(
            (back["path"].as_str(), back.get("file_path")),
            (Some("b.rs"), None)
        );
        assert_eq!(tool_name("write_file"), "Write");
    }

    #[test]
    fn answers_read_as_claude_code_means_them() {
        let a = answer(
            HookEvent::PreTool,
            br#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"},"suppressOutput":true}"#,
        )
        .unwrap();
        assert_eq!(a.decision, Some(Decision::Deny));
        assert_eq!(a.reason, "no");
        let a = answer(HookEvent::Prompt, b"remember the tests\n").unwrap();
        assert_eq!(a.context.as_deref(), Some("remember the tests"));
        assert_eq!(
            answer(HookEvent::PreTool, b"hello").unwrap(),
            Answer::default()
        );
        let a = answer(
            HookEvent::Prompt,
            br#"{"decision":"block","reason":"secret"}"#,
        )
        .unwrap();
        assert_eq!(a.decision, Some(Decision::Deny));
        let a = answer(
            HookEvent::PostTool,
            br#"{"decision":"block","reason":"look"}"#,
        )
        .unwrap();
        assert_eq!((a.decision, a.context.as_deref()), (None, Some("look")));
        let a = answer(
            HookEvent::Permission,
            br#"{"hookSpecificOutput":{"decision":{"behavior":"allow"}}}"#,
        )
        .unwrap();
        assert_eq!(a.permission, Some(PermissionReply::AllowOnce));
        let a = answer(
            HookEvent::PreTool,
            br#"{"continue":false,"stopReason":"halt"}"#,
        )
        .unwrap();
        assert_eq!(
            (a.decision, a.reason.as_str()),
            (Some(Decision::Deny), "halt")
        );
        assert!(answer(HookEvent::PreTool, br#"{"decision":"maybe"}"#).is_err());
        let a = answer(
            HookEvent::Stop,
            br#"{"decision":"block","reason":"tests fail"}"#,
        )
        .unwrap();
        assert_eq!(a.go_on.as_deref(), Some("tests fail"));
        let a = reply(HookEvent::Stop, Reply::Exit2("lint first".into())).unwrap();
        assert_eq!(a.go_on.as_deref(), Some("lint first"));
        assert!(answer(HookEvent::PreTool, b"{not json").is_err());
    }
}
