//! `dsh exec`: one turn, non-interactive, for scripts and CI.
//!
//! It is a client of the daemon's ACP surface like any editor (`initialize`,
//! `session/new`, `session/set_mode`, `session/prompt`), starting the daemon if none
//! answers exactly as `dsh acp` does. A permission question is answered by `--ask`, else
//! asked at the controlling terminal, else denied: a script in CI that did not say
//! otherwise never runs what the policy wanted a person to see. The exit status says how
//! the turn ended ([`Ending`]).

use crate::cli::client::{AskAnswer, Asker, Client, Incoming};
use crate::cli::reach::Where;
use agent_client_protocol_schema::v1 as acp;
use dsh::config::Decision;
use dsh::policy::audit::{AuditLine, Outcome};
use serde::Serialize;
use serde_json::{Value, json};
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `dsh exec`'s arguments.
#[derive(clap::Args)]
pub struct ExecArgs {
    /// The session's working directory (default: the current directory).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// The session mode (default: the config's default_mode).
    #[arg(long, value_parser = ["ask", "auto", "read-only"])]
    mode: Option<String>,
    /// Print one JSON line per event (session updates, permission answers, tool calls
    /// with their decision, the stop reason) instead of the final message.
    #[arg(long)]
    json: bool,
    /// How a permission question is answered without asking: `deny` rejects the call
    /// once, `allow` allows it once. Without it, the question goes to the controlling
    /// terminal when there is one, and is denied when there is none (fail closed).
    #[arg(long, value_enum)]
    ask: Option<AskAnswer>,
    /// The prompt; read from stdin when not given.
    prompt: Option<String>,
    #[command(flatten)]
    at: Where,
}

/// How `dsh exec` ended, as its exit status: each stop reason its own code, so a
/// script tells a refusal from a cancel from a limit without parsing output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// `end_turn`: 0.
    EndTurn,
    /// No turn, or no answer: the daemon could not be reached or started, the
    /// connection ended, a request failed: 1 (clap's usage errors are 2).
    Error,
    /// `refusal`: the model refused to go on: 3.
    Refusal,
    /// `cancelled` (Ctrl-C sent `session/cancel`): 4.
    Cancelled,
    /// `max_tokens` or `max_turn_requests`: the turn hit a limit: 5.
    Limit,
}

impl Ending {
    fn of(reason: acp::StopReason) -> Self {
        match reason {
            acp::StopReason::EndTurn => Ending::EndTurn,
            acp::StopReason::Refusal => Ending::Refusal,
            acp::StopReason::Cancelled => Ending::Cancelled,
            acp::StopReason::MaxTokens | acp::StopReason::MaxTurnRequests => Ending::Limit,
            // A reason of a newer protocol: not an end of turn a script may take as done.
            _ => Ending::Error,
        }
    }

    fn code(self) -> u8 {
        match self {
            Ending::EndTurn => 0,
            Ending::Error => 1,
            Ending::Refusal => 3,
            Ending::Cancelled => 4,
            Ending::Limit => 5,
        }
    }
}

/// One line of `--json` output.
#[derive(Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
enum Event<'a> {
    /// The session the turn runs in (loadable later by an editor).
    Session {
        session_id: &'a str,
        cwd: &'a Path,
        mode: Option<&'a str>,
    },
    /// A `session/update` as the daemon sent it (its `update` object).
    Update { update: &'a Value },
    /// A permission question and the answer `--ask` gave it.
    Permission {
        tool_call_id: &'a str,
        title: Option<&'a str>,
        answer: AskAnswer,
        option_id: Option<&'a str>,
    },
    /// A tool call of the turn with the waterfall's decision and who made it, from the
    /// daemon's audit log.
    ToolCall {
        tool_call_id: &'a str,
        tool: &'a str,
        decision: Decision,
        decided_by: &'a str,
        reason: &'a str,
        outcome: Outcome,
    },
    /// How the turn ended, with the last usage the daemon reported.
    Stop {
        stop_reason: acp::StopReason,
        usage: Option<&'a Value>,
    },
}

/// `dsh exec`: runs the turn and maps how it ended to the exit status.
pub fn run(args: ExecArgs) -> ExitCode {
    let result = crate::cli::reach::runtime().and_then(|rt| {
        let result = rt.block_on(turn(args));
        // A stdin reader may still block; nothing else of ours runs.
        rt.shutdown_background();
        result
    });
    match result {
        Ok(ending) => ExitCode::from(ending.code()),
        Err(message) => {
            eprintln!("dsh: {message}");
            ExitCode::from(Ending::Error.code())
        }
    }
}

async fn turn(args: ExecArgs) -> Result<Ending, String> {
    let prompt = match args.prompt {
        Some(p) => p,
        None => {
            if std::io::stdin().is_terminal() {
                return Err("no prompt: give it as an argument or on stdin".into());
            }
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| format!("cannot read the prompt from stdin: {e}"))?;
            text
        }
    };
    if prompt.trim().is_empty() {
        return Err("the prompt is empty".into());
    }
    let cwd = match args.cwd {
        Some(dir) => {
            std::path::absolute(&dir).map_err(|e| format!("bad --cwd {}: {e}", dir.display()))?
        }
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    if !cwd.is_dir() {
        return Err(format!("{} is not a directory", cwd.display()));
    }

    let client = Client::open(&args.at, Asker::of(args.ask), "dsh exec").await?;
    let (peer, mut incoming) = (client.peer.clone(), client.take_incoming());
    let session = client.new_session(&cwd, args.mode.as_deref()).await?;
    let mut out = Output::new(args.json);
    out.emit(&Event::Session {
        session_id: &session,
        cwd: &cwd,
        mode: args.mode.as_deref(),
    })?;

    let prompt_call = client.call(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": prompt}]}),
    );
    tokio::pin!(prompt_call);
    // Registered once for the whole turn, so a Ctrl-C between two events is not lost.
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| format!("cannot wait for Ctrl-C: {e}"))?;
    let mut cancels = 0;
    let answer = loop {
        tokio::select! {
            answer = &mut prompt_call => break answer?,
            Some(message) = incoming.recv() => out.take(message)?,
            Some(()) = sigint.recv() => {
                cancels += 1;
                if cancels > 1 {
                    // A second Ctrl-C leaves without waiting for the daemon to wind the
                    // turn down (it does so on its own when the connection ends).
                    return Ok(Ending::Cancelled);
                }
                peer.notify("session/cancel", json!({"sessionId": session}))
                    .map_err(|_| "session/cancel: the daemon closed the connection".to_string())?;
            }
        }
    };
    // The daemon sends a turn's updates before its answer, and the connection hands
    // them over in the order read: all of them are in the channel now.
    while let Ok(message) = incoming.try_recv() {
        out.take(message)?;
    }
    let answer: acp::PromptResponse = serde_json::from_value(answer).map_err(|e| {
        format!("session/prompt: the daemon's answer is not what this dsh reads: {e}")
    })?;
    if args.json {
        let state_dir = client
            .call("_dsh/status", json!({"stateUsage": false}))
            .await
            .ok()
            .and_then(|s| {
                s.get("stateDir")
                    .and_then(|d| d.as_str())
                    .map(PathBuf::from)
            });
        match state_dir {
            Some(dir) => out.decisions(&dir, &session)?,
            None => eprintln!("dsh: the daemon did not say where its audit log is"),
        }
    }
    out.emit(&Event::Stop {
        stop_reason: answer.stop_reason,
        usage: out.usage.clone().as_ref(),
    })?;
    out.finish()?;
    client.close().await;
    Ok(Ending::of(answer.stop_reason))
}

/// What `dsh exec` prints: JSON lines as events come, or the final message at the end.
struct Output {
    json: bool,
    /// The agent's text since its last tool call: its final message once the turn ends.
    last_message: String,
    /// The last `usage_update`'s fields.
    usage: Option<Value>,
}

impl Output {
    fn new(json: bool) -> Self {
        Self {
            json,
            last_message: String::new(),
            usage: None,
        }
    }

    fn emit(&self, event: &Event<'_>) -> Result<(), String> {
        if !self.json {
            return Ok(());
        }
        let line = serde_json::to_string(event).map_err(|e| format!("cannot write JSON: {e}"))?;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("cannot write to stdout: {e}"))
    }

    fn take(&mut self, message: Incoming) -> Result<(), String> {
        match message {
            Incoming::Update(params) => {
                let update = params.get("update").cloned().unwrap_or(Value::Null);
                if let Ok(note) = serde_json::from_value::<acp::SessionNotification>(params) {
                    match note.update {
                        acp::SessionUpdate::AgentMessageChunk(chunk) => {
                            if let acp::ContentBlock::Text(text) = chunk.content {
                                self.last_message.push_str(&text.text);
                            }
                        }
                        acp::SessionUpdate::ToolCall(_) => self.last_message.clear(),
                        acp::SessionUpdate::UsageUpdate(_) => {
                            let mut usage = update.clone();
                            if let Some(fields) = usage.as_object_mut() {
                                fields.remove("sessionUpdate");
                            }
                            self.usage = Some(usage);
                        }
                        _ => {}
                    }
                }
                self.emit(&Event::Update { update: &update })
            }
            Incoming::Asked {
                tool_call_id,
                title,
                option_id,
                answer,
            } => {
                if !self.json {
                    // The only trace a plain run leaves of a question nobody saw.
                    eprintln!(
                        "dsh: asked about `{}`: {} (--ask)",
                        title.as_deref().unwrap_or(&tool_call_id),
                        match answer {
                            AskAnswer::Allow => "allowed once",
                            AskAnswer::Deny => "refused",
                        }
                    );
                }
                self.emit(&Event::Permission {
                    tool_call_id: &tool_call_id,
                    title: title.as_deref(),
                    answer,
                    option_id: option_id.as_deref(),
                })
            }
        }
    }

    /// One `tool_call` event per call of `session` in the audit log in `state_dir`:
    /// the decision and who made it are the waterfall's, which only the daemon knows.
    fn decisions(&self, state_dir: &Path, session: &str) -> Result<(), String> {
        let path = state_dir.join("audit.jsonl");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        for line in text.lines() {
            let Ok(AuditLine::Execution(line)) = serde_json::from_str::<AuditLine>(line) else {
                continue;
            };
            if line.session.as_deref() != Some(session) {
                continue;
            }
            self.emit(&Event::ToolCall {
                tool_call_id: &line.call_id,
                tool: &line.tool,
                decision: line.decision,
                decided_by: &line.decided_by,
                reason: &line.reason,
                outcome: line.outcome,
            })?;
        }
        Ok(())
    }

    /// Without `--json`: the agent's final message on stdout.
    fn finish(&self) -> Result<(), String> {
        if self.json {
            return Ok(());
        }
        let mut stdout = std::io::stdout().lock();
        let text = &self.last_message;
        let newline = if text.ends_with('\n') || text.is_empty() {
            ""
        } else {
            "\n"
        };
        write!(stdout, "{text}{newline}")
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("cannot write to stdout: {e}"))
    }
}
