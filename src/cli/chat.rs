//! `dsh chat`: an interactive session at the terminal, to try dsh without an editor.
//!
//! A client of the daemon like an editor ([`Client`]): its session is listed by `dsh
//! status` and loadable later. Lines are read with rustyline (editing, history); each is
//! sent as the prompt as it was typed, so `!command` and slash commands reach the daemon
//! as an editor's would. The agent's text streams as it comes, each tool call shows its
//! title and how it ended, and permission questions are asked at the terminal. Ctrl-C
//! during a turn sends `session/cancel`; a second one, or Ctrl-C / Ctrl-D at the prompt,
//! leaves.

use crate::cli::client::{Asker, Client, Incoming};
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
    let result = crate::cli::reach::runtime().and_then(|rt| {
        let result = rt.block_on(chat(args));
        // A question may still wait for a line on the terminal; do not wait for it.
        rt.shutdown_background();
        result
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("dsh: {message}");
            ExitCode::FAILURE
        }
    }
}

/// What the person does next at the prompt.
enum Next {
    Line(String),
    Leave,
}

async fn chat(args: ChatArgs) -> Result<(), String> {
    let cwd = match args.cwd {
        Some(dir) => {
            std::path::absolute(&dir).map_err(|e| format!("bad --cwd {}: {e}", dir.display()))?
        }
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    if !cwd.is_dir() {
        return Err(format!("{} is not a directory", cwd.display()));
    }
    let client = Client::open(&args.at, Asker::of(None), "dsh chat").await?;
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
        None => client.new_session(&cwd, args.mode.as_deref()).await?,
    };
    println!(
        "dsh chat: session {session} in {}\n`!command` runs a command, `/help` lists the commands; Ctrl-C \
         cancels a turn, Ctrl-D or Ctrl-C at the prompt leaves.",
        cwd.display()
    );
    let mut editor =
        Some(rustyline::DefaultEditor::new().map_err(|e| format!("cannot edit lines here: {e}"))?);
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

        let prompt = client.call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": line}]}),
        );
        tokio::pin!(prompt);
        // Registered once for the whole turn, so a Ctrl-C between two events is not lost.
        let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .map_err(|e| format!("cannot wait for Ctrl-C: {e}"))?;
        let mut cancels = 0;
        let answer = loop {
            tokio::select! {
                answer = &mut prompt => break answer,
                Some(message) = incoming.recv() => shown.take(message),
                Some(()) = sigint.recv() => {
                    cancels += 1;
                    if cancels > 1 {
                        println!();
                        client.close().await;
                        return Ok(());
                    }
                    println!("\n(cancelling; Ctrl-C again leaves)");
                    let _ = client.peer.notify("session/cancel", json!({"sessionId": session}));
                }
            }
        };
        while let Ok(message) = incoming.try_recv() {
            shown.take(message);
        }
        shown.end_turn();
        match answer {
            Ok(answer) => match serde_json::from_value::<acp::PromptResponse>(answer) {
                Ok(r) if r.stop_reason == acp::StopReason::EndTurn => {}
                Ok(r) => println!("(turn ended: {})", stop_name(r.stop_reason)),
                Err(e) => eprintln!("dsh: the daemon's answer is not what this dsh reads: {e}"),
            },
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
                let end = match update.fields.status {
                    Some(acp::ToolCallStatus::Completed) => "completed",
                    Some(acp::ToolCallStatus::Failed) => "failed",
                    _ => return,
                };
                let title = self.titles.get(&id).cloned().unwrap_or(id);
                // What the call gave back (a `!command`'s output), shown once it ended.
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
