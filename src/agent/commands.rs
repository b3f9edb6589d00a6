//! Slash commands: what the person can ask of the session without a model, listed to
//! the editor (`available_commands_update`) and answered as the agent's message.

use super::{TurnContext, TurnEvent, run_tool};
use crate::config::Mode;
use crate::store::{Event, now_ms};
use serde_json::json;

/// What slash commands need from the daemon beyond the turn (src/acp provides it).
pub trait SessionControl: Send + Sync {
    /// A session's background tasks, oldest first.
    fn tasks(&self, session: &str) -> Vec<TaskLine>;
    /// The daemon's state, in a few lines.
    fn status(&self) -> String;
}

/// One background task as `/tasks` lists it.
pub struct TaskLine {
    pub id: String,
    /// Its status in words, with the exit code or signal once it ended.
    pub status: String,
    pub command: String,
}

/// One slash command as the editor lists it.
pub struct CommandInfo {
    pub name: &'static str,
    pub description: &'static str,
    /// What its argument is, when it takes one.
    pub input: Option<&'static str>,
}

/// The commands, in the order the editor lists them.
pub const COMMANDS: &[CommandInfo] = &[
    CommandInfo {
        name: "tasks",
        description: "This session's background tasks and their status",
        input: None,
    },
    CommandInfo {
        name: "kill",
        description: "Kill a background task of this session and everything it started",
        input: Some("task id, e.g. bash-3"),
    },
    CommandInfo {
        name: "status",
        description: "The daemon: executor, sessions, running tasks",
        input: None,
    },
    CommandInfo {
        name: "mode",
        description: "Switch the permission mode: ask, auto or read-only",
        input: Some("ask | auto | read-only"),
    },
    CommandInfo {
        name: "explain",
        description: "What the permission rules decide for a command, and why (nothing runs)",
        input: Some("a command line"),
    },
    CommandInfo {
        name: "shell",
        description: "Run a command yourself, through the same permission checks; typing !COMMAND does the same",
        input: Some("a command line"),
    },
];

/// Whether `prompt` goes to the model: neither a `!` command nor a known slash command,
/// which dsh answers itself (so they work without a model or a key).
pub fn goes_to_model(prompt: &str) -> bool {
    let text = prompt.trim_start();
    if text.starts_with('!') {
        return false;
    }
    let Some(rest) = text.strip_prefix('/') else {
        return true;
    };
    let name = rest.split(char::is_whitespace).next().unwrap_or("");
    !COMMANDS.iter().any(|c| c.name == name)
}

/// Runs `prompt` when it is a known slash command: `true` if it was one (answered).
pub async fn run(ctx: &TurnContext<'_>, prompt: &str, control: &dyn SessionControl) -> bool {
    let Some(rest) = prompt.trim_start().strip_prefix('/') else {
        return false;
    };
    let (name, arg) = match rest.split_once(char::is_whitespace) {
        Some((name, arg)) => (name, arg.trim()),
        None => (rest.trim(), ""),
    };
    if !COMMANDS.iter().any(|c| c.name == name) {
        return false;
    }
    let answer = match name {
        "tasks" => {
            let tasks = control.tasks(&ctx.session.id);
            if tasks.is_empty() {
                "No background tasks in this session.".to_string()
            } else {
                let lines: Vec<String> = tasks
                    .iter()
                    .map(|t| format!("{}  {}  {}", t.id, t.status, t.command))
                    .collect();
                super::fenced(&lines.join("\n"))
            }
        }
        "kill" if arg.is_empty() => "Usage: /kill TASK_ID (see /tasks)".to_string(),
        "kill" => {
            let call_id = format!("call-{}", uuid::Uuid::new_v4().simple());
            run_tool(ctx, &call_id, "bash_kill", json!({ "task_id": arg }), false).await;
            return true;
        }
        "status" => super::fenced(&control.status()),
        "mode" => match Mode::from_id(arg) {
            Some(mode) => {
                ctx.session.set_mode(mode);
                ctx.append(Event::ModeChange {
                    at_ms: now_ms(),
                    mode_id: mode.id().to_string(),
                });
                (ctx.events)(TurnEvent::ModeChanged(mode.id()));
                format!("Mode: {}.", mode.id())
            }
            None => format!(
                "Mode: {}. Switch with /mode ask, /mode auto or /mode read-only.",
                ctx.session.mode().id()
            ),
        },
        "explain" if arg.is_empty() => "Usage: /explain COMMAND".to_string(),
        "explain" => {
            let mode = ctx.session.mode();
            let judged =
                ctx.tools
                    .explain(Some(ctx.session), "bash", &json!({ "command": arg }), mode);
            super::fenced(&crate::policy::explain::render(arg, mode.id(), &judged))
        }
        "shell" if arg.is_empty() => "Usage: /shell COMMAND (or type !COMMAND)".to_string(),
        "shell" => {
            let args = json!({"command": arg, "description": "Run the user's ! command"});
            let call_id = format!("call-{}", uuid::Uuid::new_v4().simple());
            run_tool(ctx, &call_id, "bash", args, false).await;
            return true;
        }
        _ => return false,
    };
    super::say(ctx, &answer);
    true
}
