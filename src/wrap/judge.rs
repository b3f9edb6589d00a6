//! A wrapped agent's `session/request_permission`, judged by dsh's waterfall.
//!
//! The agent asks its client before it runs something itself. dsh reads the question as
//! one of its own tool calls (the agent's command as a `bash` call, an edit as
//! `write_file` with its path, anything else as a call of the agent's own tool name)
//! and sends that through the same waterfall as its own model's calls: audit, schema,
//! rules, hooks, grants, mode and the permission gate. The waterfall ends here in
//! [`Judged`] instead of the tool, since the agent runs what it asked about: reaching
//! the end is the permission. Only an "ask" reaches the editor, through the session's
//! prompter ([`EditorPrompter`]), with the agent's own question.

use crate::hooks::waterfall::{Terminal, ToolExecution, ToolOutput};
use crate::registry::{PermissionAnswer, PermissionPrompter, PermissionRequest};
use crate::rpc::Peer;
use crate::tools::schema::ToolSchema;
use crate::tools::{Tool, ToolKind};
use dashmap::DashMap;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a permission question is judged as: a dsh tool and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct AskedCall {
    /// `bash`, `write_file`, or the agent's own name for the tool.
    pub tool: String,
    pub arguments: Value,
    /// Whether `tool` is the agent's own (not one of dsh's): the session needs a tool
    /// of that name for the schema hook to let rules and hooks see it.
    pub agents_own: bool,
    /// The agent's own name for a call judged as one of dsh's tools (Claude Code's
    /// `Bash` for `bash`), which rules can name too.
    pub own_name: Option<String>,
    /// Where a command runs, as the question says ([`AskedCall::place`] puts it in
    /// the arguments as `bash`'s `workdir`, where its patterns expand, P6).
    pub dir: AskedDir,
}

/// The directory a command asked about runs in, as its question tells it.
#[derive(Debug, Clone, PartialEq)]
pub enum AskedDir {
    /// None named: the session's cwd.
    Session,
    /// This one (relative to the session's cwd, or absolute).
    Named(String),
    /// One of these, as far as the question's text can tell (Gemini CLI's, when the
    /// directory's name could hold the text that follows it).
    OneOf(Vec<String>),
    /// The question names one that cannot be read: it cannot be judged as it runs.
    Unreadable(String),
}

impl AskedCall {
    /// Puts the command's directory into its arguments, `cwd` being the session's:
    /// of several the question could mean, the one that exists (a command cannot run
    /// in a directory that does not). Returns why it cannot be judged as it runs
    /// (refused) when the directory is unreadable or more than one could be meant.
    pub fn place(&mut self, cwd: &std::path::Path) -> Result<(), String> {
        let dir = match &self.dir {
            AskedDir::Session => return Ok(()),
            AskedDir::Named(dir) => dir.clone(),
            AskedDir::OneOf(dirs) => {
                let existing: Vec<&String> = dirs.iter().filter(|d| cwd.join(d).is_dir()).collect();
                match existing.as_slice() {
                    [dir] => (*dir).clone(),
                    _ => {
                        return Err(format!(
                            "the directory the command runs in cannot be told from the \
                             question: it could be any of {dirs:?}"
                        ));
                    }
                }
            }
            AskedDir::Unreadable(why) => return Err(why.clone()),
        };
        self.arguments["workdir"] = json!(dir);
        Ok(())
    }
}

/// `name` as a tool name dsh accepts: `[A-Za-z0-9_-]`, others as `_`, 64 at most.
fn tool_name(name: &str) -> String {
    name.chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Reads the agent's `toolCall` as a dsh call. A `rawInput.command` string is a command
/// whatever the kind says (an agent that calls `rm -rf` an "edit" is judged as a
/// command); an edit with a path is a write of that path; the rest go by the agent's
/// tool name (Claude Code's `_meta.claudeCode.toolName`), else the title.
pub fn asked_call(tool_call: &Value) -> AskedCall {
    let raw = tool_call.get("rawInput").unwrap_or(&Value::Null);
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    let own_name = tool_call
        .get("_meta")
        .and_then(|m| m.get("claudeCode"))
        .and_then(|c| text(c, "toolName"))
        .map(|n| tool_name(&n))
        .filter(|n| !n.is_empty());
    // Codex's adapter sends its command as argv (`["/bin/bash", "-lc", "touch x"]`): the
    // words quoted whole are the same command as a line, judged as one.
    let argv = raw
        .get("command")
        .and_then(Value::as_array)
        .and_then(|words| {
            words
                .iter()
                .map(|w| {
                    w.as_str()
                        .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
                })
                .collect::<Option<Vec<String>>>()
                .filter(|words| !words.is_empty())
                .map(|words| words.join(" "))
        });
    let kind = tool_call.get("kind").and_then(Value::as_str);
    // Gemini CLI (0.61.0) asks about its shell tool with no `rawInput` at all: the
    // command is the title of an `execute` call (its shell tool's display title is the
    // whole command, read in its source; its shorter description is not used there).
    // Judged as that command, so the command rules apply (as a tool named after the
    // title, no rule would).
    let titled = (kind == Some("execute") && raw.get("command").is_none())
        .then(|| text(tool_call, "title"))
        .flatten()
        .filter(|t| !t.trim().is_empty());
    let by_title = titled.is_some();
    if let Some(command) = text(raw, "command").or(argv).or(titled) {
        // `bash` wants a description: the agent's, else its title for the call.
        let description = text(raw, "description")
            .or_else(|| text(tool_call, "title"))
            .unwrap_or_else(|| "a wrapped agent's command".into());
        return AskedCall {
            tool: "bash".into(),
            arguments: json!({ "command": command, "description": description }),
            agents_own: false,
            own_name,
            dir: match by_title {
                true => gemini_dir(tool_call),
                false => raw_dir(raw),
            },
        };
    }
    let path = text(raw, "file_path")
        .or_else(|| text(raw, "path"))
        .or_else(|| text(raw, "notebook_path"))
        .or_else(|| {
            tool_call
                .get("locations")
                .and_then(|l| l.get(0))
                .and_then(|l| text(l, "path"))
        });
    if let (Some("edit"), Some(path)) = (kind, &path) {
        // The new text as far as the question shows it: a whole file's, else the
        // replacement's; hooks see it, the rules go by the path.
        let content = text(raw, "content")
            .or_else(|| text(raw, "new_string"))
            .unwrap_or_default();
        return AskedCall {
            tool: "write_file".into(),
            arguments: json!({ "path": path, "content": content }),
            agents_own: false,
            own_name,
            dir: AskedDir::Session,
        };
    }
    let tool = own_name
        .clone()
        .unwrap_or_else(|| tool_name(&text(tool_call, "title").unwrap_or_default()));
    AskedCall {
        tool: if tool.is_empty() {
            "unnamed_tool".into()
        } else {
            tool
        },
        arguments: if raw.is_object() {
            raw.clone()
        } else {
            json!({})
        },
        agents_own: true,
        own_name: None,
        dir: AskedDir::Session,
    }
}

/// The names an agent's `rawInput` gives the directory its command runs in (Gemini
/// CLI's shell parameter `dir_path`, and the usual `cwd` and `workdir`).
const DIR_KEYS: [&str; 3] = ["dir_path", "cwd", "workdir"];

/// The directory a command's `rawInput` says it runs in; unreadable when one is not a
/// string or two disagree.
fn raw_dir(raw: &Value) -> AskedDir {
    let mut found: Option<&str> = None;
    for key in DIR_KEYS {
        match raw.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(dir)) if dir.is_empty() => {}
            Some(Value::String(dir)) => match found {
                Some(other) if other != dir => {
                    return AskedDir::Unreadable(format!(
                        "the question names two directories for its command ({other:?}, {dir:?})"
                    ));
                }
                _ => found = Some(dir),
            },
            Some(other) => {
                return AskedDir::Unreadable(format!(
                    "the question's `{key}` is not a directory name: {other}"
                ));
            }
        }
    }
    found.map_or(AskedDir::Session, |d| AskedDir::Named(d.to_string()))
}

/// The directory of Gemini CLI's shell call (0.61.0), which its question carries only
/// in the text it explains the call with (no `rawInput`): `[in DIR]`, then ` (its
/// description)` and ` [background]` when it has them (read in its source,
/// `ShellToolInvocation.getContextualDetails`); without a `dir_path` the text is
/// `[current working directory ...]` and the command runs in the session's cwd. Every
/// `]` the rest of the text could follow ends a name it could mean ([`AskedDir::OneOf`]
/// when there are several).
fn gemini_dir(tool_call: &Value) -> AskedDir {
    let explained = tool_call
        .get("content")
        .and_then(Value::as_array)
        .and_then(|content| {
            content.iter().find_map(|c| {
                (c["type"] == "content" && c["content"]["type"] == "text")
                    .then(|| c["content"]["text"].as_str())
                    .flatten()
            })
        });
    let Some(rest) = explained.and_then(|t| t.strip_prefix("[in ")) else {
        return AskedDir::Session;
    };
    let ends_well = |after: &str| {
        let after = after.strip_suffix(" [background]").unwrap_or(after);
        after.is_empty() || (after.starts_with(" (") && after.ends_with(')'))
    };
    let mut dirs: Vec<String> = rest
        .char_indices()
        .filter(|&(i, c)| c == ']' && ends_well(&rest[i + 1..]))
        .map(|(i, _)| rest[..i].to_string())
        .collect();
    match dirs.len() {
        0 => AskedDir::Unreadable(format!(
            "the directory the command runs in cannot be read from the question ({:?})",
            explained.unwrap_or_default()
        )),
        1 => AskedDir::Named(dirs.remove(0)),
        _ => AskedDir::OneOf(dirs),
    }
}

/// The agent's own names for its tool calls, as its `session/update`s tell the editor:
/// Claude Code's adapter names the tool (`_meta.claudeCode.toolName`, `Bash`) in its
/// `tool_call` update but not in the permission question that follows it (seen with
/// `claude-agent-acp` 0.23.1), so the name is kept here by session and call id and put
/// back into the question ([`ToolNames::fill`]), for rules and hooks to see.
///
/// The name is the agent's word, as it would be in the question itself: it only lets
/// rules and hooks that name it tighten (see [`AskedCall::own_name`]).
#[derive(Default)]
pub struct ToolNames {
    names: DashMap<(String, String), String>,
}

/// Most names kept on one connection: calls that end are dropped, and an agent that
/// leaves more open than this loses the older ones (their questions are still judged
/// by dsh's own tool, only without the agent's name).
const MAX_TOOL_NAMES: usize = 4096;

impl ToolNames {
    /// Notes what an agent's notification says of a tool call's name, and forgets a
    /// call that ended.
    pub fn note(&self, method: &str, params: &Value) {
        if method != "session/update" {
            return;
        }
        let update = &params["update"];
        if !matches!(
            update["sessionUpdate"].as_str(),
            Some("tool_call" | "tool_call_update")
        ) {
            return;
        }
        let (Some(session), Some(call)) =
            (params["sessionId"].as_str(), update["toolCallId"].as_str())
        else {
            return;
        };
        let key = (session.to_string(), call.to_string());
        if matches!(update["status"].as_str(), Some("completed" | "failed")) {
            self.names.remove(&key);
            return;
        }
        if let Some(name) = update["_meta"]["claudeCode"]["toolName"].as_str() {
            if self.names.len() >= MAX_TOOL_NAMES {
                self.names.clear();
            }
            self.names.insert(key, name.to_string());
        }
    }

    /// Puts the noted name into a question of session `session` that lacks one.
    pub fn fill(&self, session: &str, tool_call: &mut Value) {
        if tool_call["_meta"]["claudeCode"]["toolName"].is_string() {
            return;
        }
        let Some(call) = tool_call["toolCallId"].as_str() else {
            return;
        };
        let Some(name) = self
            .names
            .get(&(session.to_string(), call.to_string()))
            .map(|n| n.clone())
        else {
            return;
        };
        if let Some(object) = tool_call.as_object_mut() {
            let meta = object.entry("_meta").or_insert_with(|| json!({}));
            if !meta.is_object() {
                *meta = json!({});
            }
            meta["claudeCode"] = json!({ "toolName": name });
        }
    }
}

/// A tool of the wrapped agent's, known to dsh by name only, so the schema hook lets a
/// call of it through to the rules and hooks (any object is valid: dsh does not know
/// its arguments). It never runs in dsh: the agent runs it.
pub struct AgentsTool {
    schema: Arc<ToolSchema>,
}

impl AgentsTool {
    /// The tool `name` (already reduced to `[A-Za-z0-9_-]`).
    pub fn named(name: &str) -> Result<Arc<dyn Tool>, String> {
        let document = json!({
            "name": name,
            "description": "A tool of a wrapped agent: the agent runs it, dsh judges it.",
            "parameters": {"type": "object"}
        });
        Ok(Arc::new(Self {
            schema: Arc::new(ToolSchema::parse(&document.to_string())?),
        }))
    }
}

#[async_trait::async_trait]
impl Tool for AgentsTool {
    fn schema(&self) -> &Arc<ToolSchema> {
        &self.schema
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }

    async fn call(&self, _call: &ToolExecution) -> ToolOutput {
        ToolOutput::error("this tool belongs to a wrapped agent, which runs it itself")
    }
}

/// Where a permission question's waterfall ends: reaching it means every hook, rule,
/// grant and the person let the call through. Nothing runs here.
#[derive(Default)]
pub struct Judged {
    reached: AtomicBool,
}

impl Judged {
    /// Whether the call got through the whole waterfall.
    pub fn allowed(&self) -> bool {
        self.reached.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Terminal for Judged {
    async fn execute(&self, _call: &ToolExecution) -> ToolOutput {
        self.reached.store(true, Ordering::SeqCst);
        ToolOutput::ok("allowed: the wrapped agent runs it")
    }
}

/// The answer to send the agent: the option of the kind dsh decided, from the agent's
/// own list. An "always" from the person is kept by dsh as a grant (the gate did), and
/// the agent is told "once", so the next such call is judged by dsh again rather than
/// by the agent's memory. An agent that offers no option of that kind gets
/// `cancelled` (it must not run the call).
pub fn answer_for(request: &Value, allowed: bool) -> Value {
    let wanted: &[&str] = if allowed {
        &["allow_once", "allow_always"]
    } else {
        &["reject_once", "reject_always"]
    };
    let options = request
        .get("options")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for kind in wanted {
        if let Some(id) = options
            .iter()
            .find(|o| o.get("kind").and_then(Value::as_str) == Some(kind))
            .and_then(|o| o.get("optionId"))
        {
            return json!({"outcome": {"outcome": "selected", "optionId": id}});
        }
    }
    json!({"outcome": {"outcome": "cancelled"}})
}

/// The questions put to the editor now, by session and call id: the agent's own
/// question, shown to the person as the agent wrote it.
pub type OpenQuestions = Arc<DashMap<(String, String), Value>>;

/// A wrapped session's prompter: an "ask" becomes the agent's own
/// `session/request_permission`, sent to the editor; the person's option is read back by
/// its kind. A call the agent did not ask about (its terminal or file request, which
/// dsh runs) is put to the editor in a question dsh writes ([`own_question`]).
pub struct EditorPrompter {
    pub editor: Peer,
    pub questions: OpenQuestions,
    /// The agent's id of the session (the one the editor knows).
    pub agent_session: String,
    /// The file tools' place and the sessions: a write asked about is shown with its
    /// diff, the old text read as the file tools read it.
    pub tools: Arc<crate::tools::ToolRegistry>,
    pub sessions: Arc<crate::registry::SessionRegistry>,
}

impl EditorPrompter {
    /// What a write asked about changes (ACP's `diff` content), from the file as the
    /// file tools read it for the session (the editor's buffer when it offers one; under
    /// the sandbox through its containment, so nothing out of its view is read): `None`
    /// when it is no write, the file cannot be read there, or it is too large to show.
    async fn diff(&self, request: &PermissionRequest) -> Option<crate::tools::files::FileDiff> {
        if !crate::tools::files::writes(&request.tool) {
            return None;
        }
        let session = self.sessions.get(&request.session_id);
        crate::tools::files::preview(
            self.tools.file_place(),
            session.as_ref(),
            &request.tool,
            &request.arguments,
            request.escalation.is_some(),
        )
        .await
    }
}

/// The question for a call of the agent's that dsh runs itself (`terminal/create`,
/// `fs/*`): the call as dsh shows its own, with once/always/reject options. A write
/// carries its `diff` (path, old and new text, as ACP v1 defines the tool call's
/// content) and the file as its location, as dsh's own questions do.
pub fn own_question(
    agent_session: &str,
    request: &PermissionRequest,
    diff: Option<crate::tools::files::FileDiff>,
) -> Value {
    let view = crate::tools::CallView::of(&request.tool, &request.arguments, None);
    let kind = match request.tool.as_str() {
        "bash" => "execute",
        "write_file" | "edit_file" => "edit",
        "read_file" => "read",
        _ => "other",
    };
    let mut tool_call = json!({
        "toolCallId": request.call_id,
        "title": view.title,
        "kind": kind,
        "rawInput": request.arguments,
    });
    if let Some(diff) = diff {
        use agent_client_protocol_schema::v1 as acp;
        let location = acp::ToolCallLocation::new(diff.path.clone()).line(diff.line);
        let content = acp::ToolCallContent::Diff(
            acp::Diff::new(diff.path, diff.new_text).old_text(diff.old_text),
        );
        if let (Ok(location), Ok(content)) = (
            serde_json::to_value(location),
            serde_json::to_value(content),
        ) {
            tool_call["locations"] = json!([location]);
            tool_call["content"] = json!([content]);
        }
    }
    json!({
        "sessionId": agent_session,
        "toolCall": tool_call,
        "options": [
            {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
            {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        ],
    })
}

#[async_trait::async_trait]
impl PermissionPrompter for EditorPrompter {
    async fn ask(&self, request: PermissionRequest) -> PermissionAnswer {
        let asked = self
            .questions
            .get(&(request.session_id.clone(), request.call_id.clone()))
            .map(|q| q.clone());
        let question = match asked {
            Some(question) => question,
            None => own_question(&self.agent_session, &request, self.diff(&request).await),
        };
        let answer = self
            .editor
            .request(
                "session/request_permission",
                question.clone(),
                &request.cancel,
            )
            .await;
        let Ok(answer) = answer else {
            return PermissionAnswer::Cancelled;
        };
        let outcome = &answer["outcome"];
        if outcome["outcome"] != "selected" {
            return PermissionAnswer::Cancelled;
        }
        let kind = question["options"]
            .as_array()
            .and_then(|options| {
                options
                    .iter()
                    .find(|o| o["optionId"] == outcome["optionId"])
            })
            .and_then(|o| o["kind"].as_str());
        match kind {
            Some("allow_once") => PermissionAnswer::AllowOnce,
            Some("allow_always") => PermissionAnswer::AllowAlways,
            Some("reject_once") => PermissionAnswer::RejectOnce,
            Some("reject_always") => PermissionAnswer::RejectAlways,
            // An option the agent never offered: nothing to go by.
            _ => PermissionAnswer::Cancelled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_a_bash_call_whatever_its_kind() {
        let call = asked_call(&json!({"kind": "edit", "rawInput": {"command": "rm -rf /"}}));
        assert_eq!(call.tool, "bash");
        assert_eq!(call.arguments["command"], "rm -rf /");
        assert_eq!(call.arguments["description"], "a wrapped agent's command");
        let claude = asked_call(&json!({"kind": "execute", "rawInput": {"command": "ls"},
            "_meta": {"claudeCode": {"toolName": "Bash"}}}));
        assert_eq!(claude.tool, "bash");
        assert_eq!(claude.own_name.as_deref(), Some("Bash"));
        // Codex (codex-acp 0.16.0) asks with argv.
        let codex = asked_call(&json!({"kind": "execute",
            "rawInput": {"command": ["/bin/bash", "-lc", "touch it's"]}}));
        assert_eq!(codex.tool, "bash");
        assert_eq!(
            codex.arguments["command"],
            "'/bin/bash' '-lc' 'touch it'\\''s'"
        );
        let odd =
            asked_call(&json!({"kind": "execute", "title": "t", "rawInput": {"command": [1]}}));
        assert!(odd.agents_own, "argv of non-strings is not a command");
        // Gemini CLI asks with the command as the title and no rawInput.
        let gemini = asked_call(&json!({"kind": "execute", "title": "touch x",
            "toolCallId": "run_shell_command__run_shell_command_1_0"}));
        assert_eq!(gemini.tool, "bash");
        assert_eq!(gemini.arguments["command"], "touch x");
        assert_eq!(gemini.arguments["description"], "touch x");
    }

    /// Gemini CLI's shell call with `dir_path` says it only in its explanation; other
    /// agents in `rawInput`. Of several names the text could mean, the one that exists
    /// is it; with none or more than one, or a name that is not a string, it is refused.
    #[test]
    fn a_commands_directory_is_its_workdir() {
        let cwd = tempfile::tempdir().unwrap();
        for d in ["sub", "a]b", "both", "both] (x)"] {
            std::fs::create_dir(cwd.path().join(d)).unwrap();
        }
        let placed = |mut call: AskedCall| {
            call.place(cwd.path())
                .map(|()| call.arguments.get("workdir").cloned())
        };
        let gemini = |text: &str| {
            placed(asked_call(&json!({"kind": "execute", "title": "ls",
                "content": [{"type": "content", "content": {"type": "text", "text": text}}]})))
        };
        assert_eq!(gemini("[in sub]"), Ok(Some(json!("sub"))));
        assert_eq!(
            gemini("[in sub] (list it) [background]"),
            Ok(Some(json!("sub")))
        );
        assert_eq!(gemini("[in a]b] (x)"), Ok(Some(json!("a]b"))));
        assert_eq!(gemini("[in /abs/x]"), Ok(Some(json!("/abs/x"))));
        assert_eq!(gemini("[current working directory /w] (x)"), Ok(None));
        assert!(gemini("[in both] (x)] (y)").is_err(), "both exist");
        assert!(gemini("[in a").is_err());
        let raw = |input: Value| {
            let mut input = input;
            input["command"] = json!("ls");
            placed(asked_call(&json!({"kind": "execute", "rawInput": input})))
        };
        assert_eq!(raw(json!({"cwd": "/w/sub"})), Ok(Some(json!("/w/sub"))));
        assert_eq!(
            raw(json!({"dir_path": "s", "workdir": "s"})),
            Ok(Some(json!("s")))
        );
        assert_eq!(raw(json!({})), Ok(None));
        assert!(raw(json!({"cwd": "a", "workdir": "b"})).is_err());
        assert!(raw(json!({"cwd": ["a"]})).is_err());
    }

    #[test]
    fn an_edit_is_a_write_of_its_path() {
        let call = asked_call(&json!({"kind": "edit",
            "rawInput": {"file_path": "/p/a.rs", "old_string": "a", "new_string": "b"}}));
        assert_eq!(call.tool, "write_file");
        assert_eq!(call.arguments, json!({"path": "/p/a.rs", "content": "b"}));
    }

    #[test]
    fn other_kinds_go_by_the_agents_tool_name() {
        let call = asked_call(&json!({"kind": "fetch", "title": "Fetch a page",
            "_meta": {"claudeCode": {"toolName": "WebFetch"}},
            "rawInput": {"url": "https://x"}}));
        assert_eq!(call.tool, "WebFetch");
        assert!(call.agents_own);
        let call = asked_call(&json!({"title": "do it; now"}));
        assert_eq!(call.tool, "do_it__now");
    }

    #[test]
    fn a_tool_name_from_the_agents_update_fills_its_question() {
        let names = ToolNames::default();
        names.note(
            "session/update",
            &json!({"sessionId": "s", "update": {"sessionUpdate": "tool_call",
                "toolCallId": "t1", "_meta": {"claudeCode": {"toolName": "Bash"}}}}),
        );
        let mut question = json!({"toolCallId": "t1", "rawInput": {"command": "ls"}});
        names.fill("s", &mut question);
        assert_eq!(asked_call(&question).own_name.as_deref(), Some("Bash"));
        // Another session's call of the same id is not it.
        let mut other = json!({"toolCallId": "t1"});
        names.fill("s2", &mut other);
        assert_eq!(other, json!({"toolCallId": "t1"}));
        // A name the question gives is its own.
        let mut named = json!({"toolCallId": "t1", "_meta": {"claudeCode": {"toolName": "Edit"}}});
        names.fill("s", &mut named);
        assert_eq!(named["_meta"]["claudeCode"]["toolName"], "Edit");
        // An ended call is forgotten.
        names.note(
            "session/update",
            &json!({"sessionId": "s", "update": {"sessionUpdate": "tool_call_update",
                "toolCallId": "t1", "status": "completed"}}),
        );
        let mut late = json!({"toolCallId": "t1"});
        names.fill("s", &mut late);
        assert_eq!(late, json!({"toolCallId": "t1"}));
    }

    #[test]
    fn the_answer_is_the_agents_own_option_and_never_always() {
        let request = json!({"options": [
            {"optionId": "a2", "kind": "allow_always"},
            {"optionId": "a1", "kind": "allow_once"},
            {"optionId": "r1", "kind": "reject_once"}]});
        assert_eq!(answer_for(&request, true)["outcome"]["optionId"], "a1");
        assert_eq!(answer_for(&request, false)["outcome"]["optionId"], "r1");
        let only_allow = json!({"options": [{"optionId": "a1", "kind": "allow_once"}]});
        assert_eq!(
            answer_for(&only_allow, false)["outcome"]["outcome"],
            "cancelled"
        );
    }
}
