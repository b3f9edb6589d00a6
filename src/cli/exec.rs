//! `dsh exec`: one turn, non-interactive, for scripts and CI.
//!
//! It is a client of the daemon's ACP surface like any editor (`initialize`,
//! `session/new`, `session/set_mode`, `session/prompt`), starting the daemon if none
//! answers exactly as `dsh acp` does. A permission question is answered by `--ask`, else
//! asked at the controlling terminal, else denied: a script in CI that did not say
//! otherwise never runs what the policy wanted a person to see. The exit status says how
//! the turn ended ([`Ending`]).

use crate::cli::client::{
    AskAnswer, Asker, Client, Incoming, Interrupts, Prompted, run_command, session_dir,
};
use crate::cli::reach::Where;
use agent_client_protocol_schema::v1 as acp;
use dsh::config::Decision;
use dsh::policy::audit::{AuditLine, ExecutionLine, Outcome, RunId};
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
    pub(crate) cwd: Option<PathBuf>,
    /// The session mode (default: the config's default_mode).
    #[arg(long, value_parser = ["ask", "auto", "read-only"])]
    pub(crate) mode: Option<String>,
    /// Print one JSON line per event (session updates, permission answers, tool calls
    /// with their decision, the stop reason) instead of the final message.
    #[arg(long)]
    pub(crate) json: bool,
    /// How a permission question is answered without asking: `deny` rejects the call
    /// once, `allow` allows it once. Without it, the question goes to the controlling
    /// terminal when there is one, and is denied when there is none (fail closed).
    #[arg(long, value_enum)]
    pub(crate) ask: Option<AskAnswer>,
    /// A batch: each prompt of FILE (one a line, or JSON lines `{"prompt": "..."}`)
    /// runs as its own session, all under one run id; a table per prompt at the end.
    #[arg(long, value_name = "FILE", conflicts_with = "prompt")]
    pub(crate) prompts: Option<PathBuf>,
    /// With --prompts: each prompt runs in its own copy of the working directory,
    /// DIR/INDEX (`cp -a`), so the sessions cannot write over each other. DIR is made
    /// (0700) and must not exist yet, nor be inside the working directory.
    #[arg(long, value_name = "DIR", requires = "prompts")]
    pub(crate) workdirs: Option<PathBuf>,
    /// With --prompts: each prompt runs in its own git worktree of the repository the
    /// working directory is in, DIR/INDEX, detached at HEAD (committed work only),
    /// removed after the batch unless --keep-worktrees. DIR is made (0700) and must not
    /// exist yet, nor be inside the repository.
    #[arg(
        long,
        value_name = "DIR",
        requires = "prompts",
        conflicts_with = "workdirs"
    )]
    pub(crate) worktrees: Option<PathBuf>,
    /// With --worktrees: leave the worktrees after the batch.
    #[arg(long, requires = "worktrees")]
    pub(crate) keep_worktrees: bool,
    /// With --prompts: how many sessions run at a time.
    #[arg(long, value_name = "N", requires = "prompts", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) jobs: u16,
    /// The prompt; read from stdin when not given.
    prompt: Option<String>,
    #[command(flatten)]
    pub(crate) at: Where,
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

    /// How bad an ending is, for a batch's exit status (the worst of its turns):
    /// an error, then a refusal, a cancel, a limit, an end of turn.
    pub(crate) fn badness(self) -> u8 {
        match self {
            Ending::EndTurn => 0,
            Ending::Limit => 1,
            Ending::Cancelled => 2,
            Ending::Refusal => 3,
            Ending::Error => 4,
        }
    }

    /// The word a batch's table shows.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Ending::EndTurn => "end_turn",
            Ending::Error => "error",
            Ending::Refusal => "refusal",
            Ending::Cancelled => "cancelled",
            Ending::Limit => "limit",
        }
    }

    pub(crate) fn code(self) -> u8 {
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
pub(crate) enum Event<'a> {
    /// The session the turn runs in (loadable later by an editor), and the run its
    /// audit lines carry (`dsh policy replay --run`).
    Session {
        session_id: &'a str,
        cwd: &'a Path,
        mode: Option<&'a str>,
        run_id: &'a RunId,
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

/// `dsh exec` of one prompt: runs the turn and maps how it ended to the exit status
/// (`--prompts` is `batch::run`, which builds on this module; `main` chooses).
pub fn run(args: ExecArgs) -> ExitCode {
    exit_of(run_command(single(args)))
}

/// The exit status of a turn's (or a batch's) ending; 1 when there was none (the
/// error was said).
pub(crate) fn exit_of(ending: Option<Ending>) -> ExitCode {
    ExitCode::from(ending.unwrap_or(Ending::Error).code())
}

async fn single(args: ExecArgs) -> Result<Ending, String> {
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
    let cwd = session_dir(args.cwd.as_deref())?;
    // From here a Ctrl-C cancels the turn, even while it is still connecting.
    let mut interrupts = Interrupts::watch()?;
    // A run of one: its audit lines are replayable by themselves too.
    let run = fresh_run()?;
    let daemon = crate::cli::candidate::pick(&args.at, run.as_str()).await?;
    let turn = Turn {
        at: &daemon.at,
        asker: Asker::of(args.ask),
        cwd: &cwd,
        mode: args.mode.as_deref(),
        run: &run,
        prompt: &prompt,
    };
    let mut out = Output::new(args.json, None, &prompt);
    let turned = one_turn(turn, &mut out, &mut interrupts).await;
    daemon.finish().await;
    let turned = turned?;
    out.finish()?;
    Ok(turned.ending)
}

/// A fresh run id: `run-` and 12 random hex digits.
pub(crate) fn fresh_run() -> Result<RunId, String> {
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("run-{}", &random[..12]).parse()
}

/// One prompt's turn in a new session of its own: what `dsh exec` runs once and a
/// batch runs for each of its prompts.
pub(crate) struct Turn<'a> {
    pub at: &'a Where,
    pub asker: Asker,
    pub cwd: &'a Path,
    pub mode: Option<&'a str>,
    /// The run it belongs to (a batch's, or its own): the daemon writes it in the
    /// session's audit lines.
    pub run: &'a RunId,
    pub prompt: &'a str,
}

/// How a turn went.
pub(crate) struct Turned {
    pub ending: Ending,
    /// The session it ran in and how the daemon said it ended, when it did (not
    /// after a second Ctrl-C).
    pub ended: Option<(String, acp::StopReason)>,
}

/// Runs `turn`, reporting its events to `out` as they come. One `dsh exec` then reads
/// its calls back from the daemon's audit log (with `--json`) and reports them and the
/// stop; a batch's turn (`out` tagged) leaves both to the batch, which reads the log
/// once for all its turns. A Ctrl-C of `interrupts` before the prompt is sent (while
/// connecting) ends the turn cancelled with no prompt sent; after, it cancels the turn.
/// The session is closed at the end (the daemon keeps only its log, which a load reads
/// again): a batch leaves no session loaded behind it.
pub(crate) async fn one_turn(
    turn: Turn<'_>,
    out: &mut Output,
    interrupts: &mut Interrupts,
) -> Result<Turned, String> {
    let not_sent = Turned {
        ending: Ending::Cancelled,
        ended: None,
    };
    let connecting = async {
        let client = Client::open(turn.at, turn.asker, "dsh exec", json!({})).await?;
        let incoming = client.take_incoming();
        let session = client
            .new_session(turn.cwd, turn.mode, Some(turn.run))
            .await?;
        Ok::<_, String>((client, incoming, session))
    };
    let (client, mut incoming, session) = tokio::select! {
        connected = connecting => connected?,
        () = interrupts.first() => return Ok(not_sent),
    };
    out.emit(&Event::Session {
        session_id: &session,
        cwd: turn.cwd,
        mode: turn.mode,
        run_id: turn.run,
    })?;
    if interrupts.seen() > 0 {
        // Connected as the Ctrl-C came: the prompt is never sent.
        close(&client, &session).await;
        return Ok(not_sent);
    }
    let prompted = client
        .prompt(
            &session,
            turn.prompt,
            &mut incoming,
            interrupts,
            |m| out.take(m),
            || {},
        )
        .await?;
    let answer = match prompted {
        Prompted::Answered(answer) => answer,
        // A second Ctrl-C: leave without waiting for the daemon to wind the turn
        // down (it does so on its own when the connection ends).
        Prompted::Left => {
            return Ok(Turned {
                ending: Ending::Cancelled,
                ended: None,
            });
        }
    };
    if out.tag.is_none() {
        let mut calls = Vec::new();
        if out.json {
            match client.state_dir().await {
                Some(dir) => calls = audit_calls(&dir, |l| l.session.as_deref() == Some(&session))?,
                None => eprintln!("dsh: the daemon did not say where its audit log is"),
            }
        }
        out.report(&calls, answer.stop_reason, out.usage.as_ref())?;
    }
    close(&client, &session).await;
    Ok(Turned {
        ending: Ending::of(answer.stop_reason),
        ended: Some((session, answer.stop_reason)),
    })
}

/// Closes `session` (`session/close`: the daemon unloads it; its log stays, for a
/// later load) and the connection. A close that fails leaves the session loaded, as
/// every session was before closing: nothing the turn's result depends on.
async fn close(client: &Client, session: &str) {
    let _ = client
        .call("session/close", json!({"sessionId": session}))
        .await;
    client.close().await;
}

/// The execution lines of the audit log of `state_dir` that `wanted` keeps, oldest
/// first, the rotated files (`audit.jsonl.N`) included: a turn that wrote past the
/// size limit has its first calls in `audit.jsonl.1`.
pub(crate) fn audit_calls(
    state_dir: &Path,
    wanted: impl Fn(&ExecutionLine) -> bool,
) -> Result<Vec<ExecutionLine>, String> {
    let mut calls = Vec::new();
    for file in dsh::state_dir::rotate::in_order(state_dir, dsh::state_dir::AUDIT_LOG) {
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            // Rotated away (or never written) between the listing and the read.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
        };
        for line in text.lines() {
            if let Ok(AuditLine::Execution(line)) = serde_json::from_str::<AuditLine>(line)
                && wanted(&line)
            {
                calls.push(*line);
            }
        }
    }
    Ok(calls)
}

/// What `dsh exec` prints: JSON lines as events come, or the final message at the end.
pub(crate) struct Output {
    json: bool,
    /// A batch's prompt index: every JSON line says which prompt it is of.
    tag: Option<usize>,
    /// The agent's text since its last tool call: its final message once the turn ends.
    last_message: String,
    /// The prompt is a `!command`: no agent speaks, and what the command printed is
    /// the answer.
    bang: bool,
    /// The text a `!command`'s call gave back when it ended.
    bang_output: Option<String>,
    /// The last `usage_update`'s fields.
    pub(crate) usage: Option<Value>,
}

impl Output {
    pub(crate) fn new(json: bool, tag: Option<usize>, prompt: &str) -> Self {
        Self {
            json,
            tag,
            last_message: String::new(),
            bang: prompt.trim_start().starts_with('!'),
            bang_output: None,
            usage: None,
        }
    }

    pub(crate) fn emit(&self, event: &Event<'_>) -> Result<(), String> {
        if !self.json {
            return Ok(());
        }
        let mut value =
            serde_json::to_value(event).map_err(|e| format!("cannot write JSON: {e}"))?;
        if let (Some(index), Some(fields)) = (self.tag, value.as_object_mut()) {
            fields.insert("prompt".into(), index.into());
        }
        let line = value.to_string();
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("cannot write to stdout: {e}"))
    }

    pub(crate) fn take(&mut self, message: Incoming) -> Result<(), String> {
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
                        acp::SessionUpdate::ToolCallUpdate(call)
                            if self.bang
                                && matches!(
                                    call.fields.status,
                                    Some(
                                        acp::ToolCallStatus::Completed
                                            | acp::ToolCallStatus::Failed
                                    )
                                ) =>
                        {
                            self.bang_output = call
                                .fields
                                .raw_output
                                .as_ref()
                                .and_then(|o| o.get("text"))
                                .and_then(Value::as_str)
                                .map(str::to_string);
                        }
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

    /// The end of a turn's lines: a `tool_call` line per call of it in the audit log
    /// (the waterfall's decision and who made it, which only the daemon knows), then
    /// `stop` with the last usage.
    pub(crate) fn report(
        &self,
        calls: &[ExecutionLine],
        stop_reason: acp::StopReason,
        usage: Option<&Value>,
    ) -> Result<(), String> {
        for line in calls {
            self.emit(&Event::ToolCall {
                tool_call_id: &line.call_id,
                tool: &line.tool,
                decision: line.decision,
                decided_by: &line.decided_by,
                reason: &line.reason,
                outcome: line.outcome,
            })?;
        }
        self.emit(&Event::Stop { stop_reason, usage })
    }

    /// Without `--json`: the agent's final message on stdout (for a `!command`, what
    /// the command gave back, when no agent text came after it).
    fn finish(&self) -> Result<(), String> {
        if self.json {
            return Ok(());
        }
        let mut stdout = std::io::stdout().lock();
        let text = match &self.bang_output {
            Some(output) if self.last_message.is_empty() => output,
            _ => &self.last_message,
        };
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
