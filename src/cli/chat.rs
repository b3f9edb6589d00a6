//! `dsh chat`: an interactive session at the terminal, to try dsh without an editor.
//!
//! A client of the daemon like an editor ([`Client`]): its session is listed by `dsh
//! status` and loadable later. Lines are read with rustyline (editing, history); each is
//! sent as the prompt as it was typed, so `!command` and slash commands reach the daemon
//! as an editor's would, and kept in a private history file in the daemon's state
//! directory ([`History`]). The agent's text streams as it comes, each tool call shows
//! its title, a command's output as it prints it, and how it ended; permission
//! questions are asked at the terminal. Ctrl-C
//! during a turn sends `session/cancel`; a second one, or Ctrl-C / Ctrl-D at the prompt,
//! leaves.

use crate::cli::client::{Asker, Client, Incoming, Interrupts, Prompted, run_command, session_dir};
use crate::cli::history::History;
use crate::cli::reach::Where;
use crate::cli::terminal::shown;
use agent_client_protocol_schema::v1 as acp;
use rustyline::error::ReadlineError;
use serde_json::json;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// `dsh chat`'s arguments.
#[derive(clap::Args)]
pub struct ChatArgs {
    /// The session's working directory (default: the current directory).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// The session mode (default: the config's default_mode).
    #[arg(long, value_parser = ["ask", "auto", "read-only"])]
    mode: Option<String>,
    /// Go on with this session (its history is shown first) instead of a new one.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    #[command(flatten)]
    at: Where,
}

/// `dsh chat`: 0 when the person leaves, 1 when the daemon cannot be reached or goes away.
pub fn run(args: ChatArgs) -> ExitCode {
    match run_command(chat(args)) {
        Some(()) => ExitCode::SUCCESS,
        None => ExitCode::FAILURE,
    }
}

/// What the person does next at the prompt.
enum Next {
    Line(String),
    Leave,
}

async fn chat(args: ChatArgs) -> Result<(), String> {
    let cwd = session_dir(args.cwd.as_deref())?;
    // As Zed does: a command's output comes as the bytes it printed, while it runs.
    let display = json!({"_meta": {"terminal_output": true}});
    // A chat is one long session on the user's daemon: a candidate config that daemon
    // does not judge by is refused, not ignored (a batch or `dsh exec` would run on a
    // daemon of its own).
    crate::cli::candidate::refuse_unless_in_force(&args.at).await?;
    let client = Client::open(&args.at, Asker::of(None), "dsh chat", display).await?;
    let mut incoming = client.take_incoming();
    let mut shown = Shown::default();
    let session = match args.session {
        Some(id) => {
            client.load_session(&id, &cwd, args.mode.as_deref()).await?;
            // The history, with the person's own lines, before the first prompt.
            shown.replaying = true;
            while let Ok(message) = incoming.try_recv() {
                shown.take(message);
            }
            shown.end_turn();
            shown.replaying = false;
            id
        }
        None => client.new_session(&cwd, args.mode.as_deref(), None).await?,
    };
    println!(
        "dsh chat: session {session} in {}\n`!command` runs a command, `/help` lists the commands; Ctrl-C \
         cancels a turn, Ctrl-D or Ctrl-C at the prompt leaves.",
        cwd.display()
    );
    let mut editor =
        Some(rustyline::DefaultEditor::new().map_err(|e| format!("cannot edit lines here: {e}"))?);
    // The typed lines of earlier runs; a chat without one still works.
    let mut history = match client.state_dir().await {
        Some(dir) => match History::open(&dir) {
            Ok(history) => Some(history),
            Err(e) => {
                eprintln!("dsh: no history kept: {e}");
                None
            }
        },
        None => None,
    };
    if let (Some(history), Some(ed)) = (&history, editor.as_mut()) {
        for entry in &history.entries {
            let _ = ed.add_history_entry(entry.as_str());
        }
    }
    // At the prompt rustyline reads Ctrl-C as a key; during a turn it is SIGINT.
    let mut interrupts = Interrupts::watch()?;
    loop {
        let Some(mut ed) = editor.take() else {
            break;
        };
        // rustyline blocks on the terminal: off the runtime's threads.
        let (ed, read) = tokio::task::spawn_blocking(move || {
            let read = ed.readline("> ");
            (ed, read)
        })
        .await
        .map_err(|e| format!("the line reader failed: {e}"))?;
        let mut ed = ed;
        let next = match read {
            Ok(line) => Next::Line(line),
            Err(ReadlineError::Interrupted | ReadlineError::Eof) => Next::Leave,
            Err(e) => return Err(format!("cannot read a line: {e}")),
        };
        let line = match next {
            Next::Leave => break,
            Next::Line(line) if line.trim().is_empty() => {
                editor = Some(ed);
                continue;
            }
            Next::Line(line) => line,
        };
        let _ = ed.add_history_entry(line.as_str());
        editor = Some(ed);
        if let Some(kept) = &mut history
            && let Err(e) = kept.add(&line)
        {
            eprintln!("dsh: history not kept: {e}");
            history = None;
        }

        interrupts.begin();
        let prompted = client
            .prompt(
                &session,
                &line,
                &mut incoming,
                &mut interrupts,
                |message| {
                    shown.take(message);
                    Ok(())
                },
                || println!("\n(cancelling; Ctrl-C again leaves)"),
            )
            .await;
        shown.end_turn();
        match prompted {
            Ok(Prompted::Answered(r)) if r.stop_reason == acp::StopReason::EndTurn => {}
            Ok(Prompted::Answered(r)) => println!("(turn ended: {})", stop_name(r.stop_reason)),
            Ok(Prompted::Left) => {
                println!();
                client.close().await;
                return Ok(());
            }
            Err(e) => {
                if client.peer.is_closed() {
                    return Err(e);
                }
                eprintln!("dsh: {e}");
            }
        }
    }
    client.close().await;
    Ok(())
}

fn stop_name(reason: acp::StopReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// What the terminal shows of a turn as it runs.
#[derive(Default)]
struct Shown {
    /// Each tool call's title, by id, for the line that says how it ended.
    titles: HashMap<String, String>,
    /// Whether the last thing printed left the cursor mid-line.
    mid_line: bool,
    /// A loaded session's history is being shown: the person's lines too (in a live
    /// turn they are on the screen already).
    replaying: bool,
}

impl Shown {
    fn line(&mut self, text: &str) {
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
        println!("{text}");
    }

    fn take(&mut self, message: Incoming) {
        let Incoming::Update(params) = message else {
            // The question and its answer were on the terminal already.
            return;
        };
        let Ok(note) = serde_json::from_value::<acp::SessionNotification>(params) else {
            return;
        };
        match note.update {
            acp::SessionUpdate::UserMessageChunk(chunk) if self.replaying => {
                if let acp::ContentBlock::Text(text) = chunk.content {
                    self.line(&format!("> {}", shown(&text.text)));
                }
            }
            acp::SessionUpdate::AgentMessageChunk(chunk) => {
                if let acp::ContentBlock::Text(text) = chunk.content {
                    print!("{}", shown(&text.text));
                    let _ = std::io::stdout().flush();
                    self.mid_line = !text.text.ends_with('\n');
                }
            }
            acp::SessionUpdate::ToolCall(call) => {
                let title = shown(&call.title);
                self.line(&format!("[{title}] ..."));
                self.titles.insert(call.tool_call_id.0.to_string(), title);
            }
            acp::SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                if let Some(title) = &update.fields.title {
                    self.titles.insert(id.clone(), shown(title));
                }
                // A running command's output, as the bytes it printed arrive
                // (`_meta.terminal_output`: offered at `initialize`); also the text of a
                // call that ran no command, at its end.
                if let Some(data) = update
                    .meta
                    .as_ref()
                    .and_then(|m| m.get("terminal_output"))
                    .and_then(|t| t.get("data"))
                    .and_then(|d| d.as_str())
                    .filter(|d| !d.is_empty())
                {
                    print!("{}", shown(data));
                    let _ = std::io::stdout().flush();
                    self.mid_line = !data.ends_with('\n');
                }
                let end = match update.fields.status {
                    Some(acp::ToolCallStatus::Completed) => "completed",
                    Some(acp::ToolCallStatus::Failed) => "failed",
                    _ => return,
                };
                let title = self.titles.get(&id).cloned().unwrap_or(id);
                // What a call shown without a terminal gave back, once it ended.
                for content in update.fields.content.iter().flatten() {
                    if let acp::ToolCallContent::Content(c) = content
                        && let acp::ContentBlock::Text(text) = &c.content
                        && !text.text.is_empty()
                    {
                        self.line(shown(&text.text).trim_end());
                    }
                }
                self.line(&format!("[{title}] {end}"));
            }
            _ => {}
        }
    }

    fn end_turn(&mut self) {
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
        self.titles.clear();
    }
}
