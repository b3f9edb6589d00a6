//! The wrapped agent's `terminal/*` and `fs/*` requests, served by dsh (issue 44).
//!
//! dsh offers the agent a terminal and a file system so that what the agent would
//! otherwise do in its own process goes through dsh: a terminal is a background `bash`
//! task of the agent's dsh session (the same waterfall judges its command, the same
//! executor runs it, the session owns it, T12), and the file requests are dsh's file
//! tools (`read_file`/`write_file` judged by path, the executor's containment applied).
//!
//! `terminal/create` is dsh's `bash` tool with `run_in_background` (through
//! `ToolRegistry::execute`, so a hook's rewrite, the sandbox's terms and the task's
//! ownership are the tool's), and `fs/write_text_file` its `write_file`.
//! `fs/read_text_file` is judged as `read_file` of the path, but the waterfall ends in
//! [`ReadText`], which reads the file through the executor (the same containment as the
//! tool) and hands back its text as it is: `read_file`'s text is numbered for a model.
//!
//! Only these three are judged: reading a terminal's output, waiting for it, killing
//! and releasing it act on a task the agent's session already owns (checked here) and
//! only ever read or end it.

use super::Shared;
use super::live::Term;
use crate::exec::TaskStatus;
use crate::hooks::waterfall::{Terminal, ToolExecution, ToolOutput};
use crate::registry::Session;
use crate::rpc::RpcError;
use agent_client_protocol_schema::v1 as acp;
use dashmap::DashMap;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The output a terminal keeps when the agent names no `outputByteLimit`.
const DEFAULT_OUTPUT_LIMIT: usize = 1024 * 1024;

/// The agent's terminals on one connection, by terminal id.
#[derive(Default)]
pub(super) struct Terminals {
    terms: DashMap<String, Arc<Term>>,
}

/// The command line `terminal/create` asks for: the program and its arguments as single
/// quoted words (a bare `command` is a shell line as an agent writes it), after the
/// `env` it names, exported. A name that is not a shell variable's is refused.
fn command_line(request: &acp::CreateTerminalRequest) -> Result<String, RpcError> {
    let quote = |w: &str| format!("'{}'", w.replace('\'', r"'\''"));
    let mut line = String::new();
    for var in &request.env {
        if !crate::config::valid_env_name(&var.name) {
            return Err(RpcError::invalid_params(format!(
                "`{}` is not an environment variable's name",
                var.name
            )));
        }
        line.push_str(&format!("export {}={}; ", var.name, quote(&var.value)));
    }
    if request.command.trim().is_empty() {
        return Err(RpcError::invalid_params("empty command"));
    }
    if request.args.is_empty() {
        line.push_str(&request.command);
    } else {
        line.push_str(&quote(&request.command));
        for arg in &request.args {
            line.push(' ');
            line.push_str(&quote(arg));
        }
    }
    Ok(line)
}

/// The exit status ACP reports for a finished task.
fn exit_status(status: TaskStatus) -> Option<acp::TerminalExitStatus> {
    match status {
        TaskStatus::Running => None,
        TaskStatus::Completed { exit_code } => {
            Some(acp::TerminalExitStatus::new().exit_code(u32::try_from(exit_code).ok()))
        }
        TaskStatus::Killed { signal } => Some(
            acp::TerminalExitStatus::new().signal(
                signal
                    .map(crate::tools::bash::signal_name)
                    .or(Some("SIGKILL".into())),
            ),
        ),
        TaskStatus::Lost => Some(acp::TerminalExitStatus::new()),
    }
}

/// Where a judged `fs/read_text_file` ends: the file's text as the file tools reach it
/// (the executor's containment first; then the editor's buffer when it offers reads and
/// the file is on this machine, else the executor's read), unnumbered, as ACP wants it.
struct ReadText<'a> {
    shared: &'a Shared,
    text: Mutex<Option<String>>,
}

#[async_trait::async_trait]
impl Terminal for ReadText<'_> {
    async fn execute(&self, call: &ToolExecution) -> ToolOutput {
        let (Some(session), Some(path)) = (
            &call.session,
            call.arguments.get("path").and_then(Value::as_str),
        ) else {
            return ToolOutput::error("invalid path");
        };
        let place = self.shared.daemon.tools.file_place();
        let resolved = crate::tools::files::resolve(&session.cwd, path);
        match crate::tools::files::read_text(place, Some(session), &resolved).await {
            Ok(read) => match read.text {
                Some(text) => {
                    *self.text.lock().unwrap_or_else(|p| p.into_inner()) = Some(text);
                    ToolOutput {
                        containment: read.containment,
                        ..ToolOutput::ok(format!("read {path}"))
                    }
                }
                None => ToolOutput::error(format!("{path}: no such file")),
            },
            Err(refused) => refused,
        }
    }
}

/// `line` (1-based) and `limit` lines of `text`, as `fs/read_text_file` asks.
fn lines_of(text: &str, line: Option<u32>, limit: Option<u32>) -> String {
    if line.is_none() && limit.is_none() {
        return text.to_string();
    }
    let skip = line.map_or(0, |l| l.saturating_sub(1) as usize);
    let take = limit.map_or(usize::MAX, |l| l as usize);
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

impl Shared {
    /// The dsh session of the agent's `session_id`, for a request of the agent's.
    fn session_for(&self, session_id: &acp::SessionId) -> Result<Arc<Session>, RpcError> {
        self.sessions
            .get(session_id.0.as_ref())
            .map(|s| s.clone())
            .ok_or_else(|| RpcError::invalid_params("no such session on this connection"))
    }

    /// A call of dsh's `tool` for the agent's session, named as the agent's.
    fn agents_call(
        &self,
        session: Arc<Session>,
        call_id: String,
        tool: &str,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> ToolExecution {
        ToolExecution::new(call_id, tool, arguments, Some(session), cancel.clone())
            .by_agent(&self.agent.name)
    }

    /// `terminal/create`: judged as a background `bash` call of the agent's session, run
    /// by the executor when the waterfall lets it through, and followed from then on
    /// (its output read as it comes, for the editor: `live`).
    pub(super) async fn terminal_create(
        self: &Arc<Self>,
        params: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, RpcError> {
        let request: acp::CreateTerminalRequest = parse(params)?;
        let session = self.session_for(&request.session_id)?;
        let command = command_line(&request)?;
        let mut arguments = json!({
            "command": command,
            "description": format!("a terminal of {}", self.agent.name),
            "run_in_background": true,
        });
        if let Some(cwd) = &request.cwd {
            if !cwd.is_absolute() {
                return Err(RpcError::invalid_params("cwd must be absolute"));
            }
            arguments["workdir"] = json!(cwd);
        }
        let call_id = format!("terminal-{}", uuid::Uuid::new_v4());
        let call = self.agents_call(session, call_id, "bash", arguments, cancel);
        let out = self.daemon.tools.execute(&call).await;
        let Some(task) = out.task else {
            return Err(RpcError::new(-32000, out.text));
        };
        let limit = request
            .output_byte_limit
            .and_then(|l| usize::try_from(l).ok())
            .unwrap_or(DEFAULT_OUTPUT_LIMIT);
        let id = task.to_string();
        let term = Arc::new(Term {
            id: id.clone(),
            task,
            agent_session: request.session_id.0.to_string(),
            output: Mutex::default(),
            limit,
            view: Mutex::default(),
            stop: CancellationToken::new(),
        });
        self.terminals.terms.insert(id.clone(), term.clone());
        tokio::spawn(self.clone().follow(term));
        to_value(acp::CreateTerminalResponse::new(id))
    }

    /// The terminal `terminal_id` of the agent's `session_id`: another session's is as
    /// unknown as one that never was.
    fn term(
        &self,
        session_id: &acp::SessionId,
        terminal_id: &acp::TerminalId,
    ) -> Result<Arc<Term>, RpcError> {
        self.terminals
            .terms
            .get(terminal_id.0.as_ref())
            .map(|t| t.clone())
            .filter(|t| t.agent_session == session_id.0.as_ref())
            .ok_or_else(|| RpcError::invalid_params(format!("unknown terminal `{terminal_id}`")))
    }

    /// The terminals of the agent's session `session_id`.
    pub(super) fn session_terminals(&self, session_id: &str) -> Vec<Arc<Term>> {
        self.terminals
            .terms
            .iter()
            .filter(|t| t.agent_session == session_id)
            .map(|t| t.clone())
            .collect()
    }

    /// Reads what the task wrote since the last read into the terminal; its status.
    /// The read and the keeping are one step (under the terminal's lock), so two readers
    /// (the agent's `terminal/output`, the follower) keep the output in its order.
    pub(super) fn drain(&self, term: &Term) -> TaskStatus {
        let exec = &self.daemon.executor;
        let mut kept = term.kept();
        match exec.read(term.task) {
            Some(read) => {
                kept.push(&read.stdout.text, term.limit);
                kept.push(&read.stderr.text, term.limit);
                if read.stdout.dropped || read.stderr.dropped {
                    kept.truncated = true;
                }
                read.status
            }
            None => TaskStatus::Lost,
        }
    }

    /// `terminal/output`: everything the command wrote so far (cut to its limit).
    pub(super) fn terminal_output(&self, params: Value) -> Result<Value, RpcError> {
        let request: acp::TerminalOutputRequest = parse(params)?;
        let term = self.term(&request.session_id, &request.terminal_id)?;
        let status = self.drain(&term);
        let kept = term.kept();
        to_value(
            acp::TerminalOutputResponse::new(kept.text.clone(), kept.truncated)
                .exit_status(exit_status(status)),
        )
    }

    /// `terminal/wait_for_exit`: answers once the command ended (or the agent gave up).
    pub(super) async fn terminal_wait(
        &self,
        params: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, RpcError> {
        let request: acp::WaitForTerminalExitRequest = parse(params)?;
        let term = self.term(&request.session_id, &request.terminal_id)?;
        // Followed before its status is read: an end after the read still wakes it.
        let mut changes = self.daemon.executor.task_changes(term.task);
        loop {
            let status = self
                .daemon
                .executor
                .get(term.task)
                .map_or(TaskStatus::Lost, |t| t.status);
            if let Some(exit) = exit_status(status) {
                self.show(&term);
                return to_value(acp::WaitForTerminalExitResponse::new(exit));
            }
            let changed = async {
                match changes.as_mut() {
                    Some(changes) => changes.changed().await,
                    // Running, yet not followed: no executor says so of a task it has.
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = changed => {}
                () = cancel.cancelled() => return Err(RpcError::new(-32800, "cancelled")),
                () = self.gone.cancelled() => return Err(RpcError::new(-32800, "the agent is gone")),
            }
        }
    }

    /// `terminal/kill`: ends the command; the terminal stays for its output.
    pub(super) async fn terminal_kill(&self, params: Value) -> Result<Value, RpcError> {
        let request: acp::KillTerminalRequest = parse(params)?;
        let term = self.term(&request.session_id, &request.terminal_id)?;
        self.daemon.executor.kill(term.task).await;
        self.show(&term);
        Ok(json!({}))
    }

    /// `terminal/release`: ends the command if it still runs and forgets the terminal.
    pub(super) async fn terminal_release(&self, params: Value) -> Result<Value, RpcError> {
        let request: acp::ReleaseTerminalRequest = parse(params)?;
        let term = self.term(&request.session_id, &request.terminal_id)?;
        self.terminals.terms.remove(request.terminal_id.0.as_ref());
        self.daemon.executor.kill(term.task).await;
        self.show(&term);
        term.stop.cancel();
        Ok(json!({}))
    }

    /// Ends every terminal of the agent's `session_id` (its session closed), or of every
    /// session (`None`: the agent's connection ended).
    pub(super) async fn release_terminals(&self, session_id: Option<&str>) {
        let ids: Vec<String> = self
            .terminals
            .terms
            .iter()
            .filter(|t| session_id.is_none_or(|s| t.agent_session == s))
            .map(|t| t.key().clone())
            .collect();
        for id in ids {
            if let Some((_, term)) = self.terminals.terms.remove(&id) {
                self.daemon.executor.kill(term.task).await;
                self.show(&term);
                term.stop.cancel();
            }
        }
    }

    /// `fs/read_text_file`: judged as `read_file` of the path, read where the executor
    /// reaches it.
    pub(super) async fn read_text_file(
        &self,
        params: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, RpcError> {
        let request: acp::ReadTextFileRequest = parse(params)?;
        let session = self.session_for(&request.session_id)?;
        let arguments = json!({ "path": request.path });
        let call_id = format!("fs-read-{}", uuid::Uuid::new_v4());
        let call = self.agents_call(session, call_id, "read_file", arguments, cancel);
        let read = ReadText {
            shared: self,
            text: Mutex::new(None),
        };
        let (out, _) = self.daemon.tools.waterfall().execute(&call, &read).await;
        let text = read.text.lock().unwrap_or_else(|p| p.into_inner()).take();
        match text {
            Some(text) => to_value(acp::ReadTextFileResponse::new(lines_of(
                &text,
                request.line,
                request.limit,
            ))),
            None => Err(refused(&request.path.to_string_lossy(), &call, out)),
        }
    }

    /// `fs/write_text_file`: dsh's `write_file` tool, through the whole waterfall, shown
    /// to the editor as a diff once allowed (`files::ShownWrite`).
    pub(super) async fn write_text_file(
        &self,
        params: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, RpcError> {
        let request: acp::WriteTextFileRequest = parse(params)?;
        let session = self.session_for(&request.session_id)?;
        let arguments = json!({ "path": request.path, "content": request.content });
        let call_id = format!("fs-write-{}", uuid::Uuid::new_v4());
        let call = self.agents_call(session, call_id, "write_file", arguments, cancel);
        let shown = super::files::ShownWrite {
            shared: self,
            agent_session: &request.session_id.0,
        };
        let (out, _) = self.daemon.tools.waterfall().execute(&call, &shown).await;
        if out.is_error {
            return Err(refused(&request.path.to_string_lossy(), &call, out));
        }
        Ok(json!({}))
    }
}

/// A file request's error: the sandbox's refusal in the agent's own terms
/// ([`super::refusal`]), any other error as the tool said it.
fn refused(path: &str, call: &ToolExecution, out: ToolOutput) -> RpcError {
    RpcError::new(
        -32000,
        super::refusal::for_agent(path, call, &out).unwrap_or(out.text),
    )
}

fn parse<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params).map_err(|e| RpcError::invalid_params(e.to_string()))
}

fn to_value(v: impl serde::Serialize) -> Result<Value, RpcError> {
    serde_json::to_value(v).map_err(|e| RpcError::internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrap::live::Kept;

    #[test]
    fn a_terminals_words_are_quoted_and_its_env_exported() {
        let mut request = acp::CreateTerminalRequest::new("s", "ls");
        request.args = vec!["-l".into(), "it's".into()];
        request.env = vec![acp::EnvVariable::new("A_1", "x y")];
        assert_eq!(
            command_line(&request).unwrap(),
            "export A_1='x y'; 'ls' '-l' 'it'\\''s'"
        );
        let bare = acp::CreateTerminalRequest::new("s", "echo hi && ls");
        assert_eq!(command_line(&bare).unwrap(), "echo hi && ls");
        let mut bad = acp::CreateTerminalRequest::new("s", "ls");
        bad.env = vec![acp::EnvVariable::new("A=B; rm", "x")];
        assert!(command_line(&bad).is_err());
    }

    #[test]
    fn kept_output_is_cut_from_the_front_at_a_character() {
        let mut kept = Kept::default();
        kept.push("héllo", 4);
        assert_eq!(kept.text, "llo");
        assert!(kept.truncated);
    }

    /// The editor is shown what came after what it was shown: from the kept text while
    /// it is kept, all that is kept once the front was cut past it.
    #[test]
    fn what_came_since_is_read_from_the_kept_text() {
        let mut kept = Kept::default();
        kept.push("abc", 10);
        assert_eq!(
            (kept.since(0), kept.since(1), kept.since(3)),
            ("abc", "bc", "")
        );
        kept.push("défghij", 10);
        assert_eq!(kept.total, 11);
        assert_eq!(kept.text, "bcdéfghij");
        assert_eq!(kept.since(0), "bcdéfghij", "the front went past it");
        assert_eq!(kept.since(1), "bcdéfghij");
        assert_eq!(kept.since(4), "éfghij");
        assert_eq!(kept.since(5), "fghij", "inside a character: from the next");
    }

    #[test]
    fn lines_are_taken_from_line_for_limit() {
        assert_eq!(lines_of("a\nb\nc\n", Some(2), Some(1)), "b\n");
        assert_eq!(lines_of("a\nb", None, None), "a\nb");
    }
}
