//! `dsh exec --prompts FILE --jobs N`: a batch of turns, for policy experiments.
//!
//! Each prompt runs as its own session (its own connection, as `dsh exec` runs one),
//! N at a time, all under one fresh run id that the daemon writes in every audit line
//! of those sessions: `dsh policy replay --run ID` then judges exactly this batch's
//! calls under another policy. The person reads a table per prompt (how it ended,
//! its calls allowed / asked / refused from the audit log, time, tokens); a script
//! reads `--json` lines tagged with the prompt's index, and the exit status, which is
//! the worst ending of the batch. The audit log is read once, at the end, for the
//! whole run (each turn reading it would cost the batch the square of its length):
//! each prompt's `tool_call` and `stop` lines come then, in the prompts' order.
//!
//! Questions are never asked at the terminal here (several sessions would ask at once
//! on one screen): `--ask`, else deny.

use crate::cli::client::{AskAnswer, Asker, Client, Interrupts, run_command, session_dir};
use crate::cli::exec::{Ending, ExecArgs, Output, Turn, audit_calls, exit_of, fresh_run, one_turn};
use crate::cli::reach::Where;
use crate::cli::workdirs::Workdirs;
use agent_client_protocol_schema::v1 as acp;
use dsh::config::Decision;
use dsh::policy::audit::{ExecutionLine, RunId};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest prompts file read, in bytes: a batch is a list of tasks, not a corpus.
const MAX_FILE: u64 = 16 << 20;

/// `dsh exec --prompts`: runs the batch; the exit status is its worst ending.
pub fn run(args: ExecArgs) -> ExitCode {
    exit_of(run_command(batch(args)))
}

/// One line of a JSON-lines prompts file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptLine {
    prompt: String,
}

/// The prompts of `file`: JSON lines (`{"prompt": "..."}`) when its first non-blank
/// line starts with `{`, else one prompt a line. Blank lines are skipped; a JSON line
/// that does not read is an error naming it (never sent as a prompt as it stands).
pub(crate) fn read_prompts(file: &Path) -> Result<Vec<String>, String> {
    let text = dsh::fsutil::read_small_text(file, MAX_FILE + 1)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    if text.len() as u64 > MAX_FILE {
        return Err(format!("{}: larger than {MAX_FILE} bytes", file.display()));
    }
    let lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let json = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| l.trim_start().starts_with('{'));
    let mut prompts = Vec::new();
    for (n, line) in lines {
        let prompt = if json {
            serde_json::from_str::<PromptLine>(line)
                .map_err(|e| format!("{}:{}: {e}", file.display(), n + 1))?
                .prompt
        } else {
            line.to_string()
        };
        if prompt.trim().is_empty() {
            return Err(format!("{}:{}: the prompt is empty", file.display(), n + 1));
        }
        prompts.push(prompt);
    }
    if prompts.is_empty() {
        return Err(format!("{}: no prompts", file.display()));
    }
    Ok(prompts)
}

/// What one prompt's row of the table says.
struct Row {
    index: usize,
    /// Its directory of its own was made (`--workdirs`, `--worktrees`).
    made_dir: bool,
    ending: Ending,
    /// Its session and how the daemon said the turn ended, when it did.
    ended: Option<(String, acp::StopReason)>,
    /// Its calls, from the audit log (read once for the whole batch, at its end).
    calls: Vec<ExecutionLine>,
    took: Duration,
    /// The last `usage_update`'s fields.
    usage: Option<Value>,
    /// Why it failed, for an error.
    error: Option<String>,
}

async fn batch(args: ExecArgs) -> Result<Ending, String> {
    // A file that does not read stops the batch before any daemon is asked.
    let prompts = read_prompts(args.prompts.as_deref().unwrap_or(Path::new("")))?;
    // From here a Ctrl-C cancels the batch: the turns still connecting too.
    let interrupts = Interrupts::watch()?;
    let run = fresh_run()?;
    let daemon = crate::cli::candidate::pick(&args.at, run.as_str()).await?;
    let ended = batch_on(&args, prompts, &daemon.at, run, interrupts).await;
    daemon.finish().await;
    ended
}

async fn batch_on(
    args: &ExecArgs,
    prompts: Vec<String>,
    at: &Where,
    run: RunId,
    interrupts: Interrupts,
) -> Result<Ending, String> {
    let cwd = session_dir(args.cwd.as_deref())?;
    let workdirs = match (&args.workdirs, &args.worktrees) {
        (Some(dir), _) => Some(Workdirs::copies(dir, &cwd)?),
        (None, Some(dir)) => Some(Workdirs::worktrees(dir, &cwd, args.keep_worktrees).await?),
        (None, None) => None,
    };
    let jobs = usize::from(args.jobs.max(1));
    eprintln!(
        "dsh: run {run}: {} prompts, {jobs} at a time",
        prompts.len()
    );
    if args.json {
        println!(
            "{}",
            json!({"type": "run", "runId": run, "prompts": prompts.len(), "jobs": jobs})
        );
    }
    // The daemon is reached (started if need be) once before the turns race for it;
    // its state directory is where the batch's calls are read from at the end.
    let probe = Client::open(at, Asker::Fixed(AskAnswer::Deny), "dsh exec", json!({})).await?;
    let state_dir = probe
        .state_dir()
        .await
        .ok_or("the daemon did not say where its audit log is")?;
    probe.close().await;
    // The first Ctrl-C cancels the running turns (each sends its own
    // `session/cancel`, or sends no prompt when still connecting) and starts no more;
    // a second one leaves each of them.
    let mut stopping = interrupts.clone();
    let shared = Arc::new(Shared {
        at: at.clone(),
        cwd,
        workdirs,
        mode: args.mode.clone(),
        run: run.clone(),
        asker: Asker::Fixed(args.ask.unwrap_or(AskAnswer::Deny)),
        json: args.json,
    });
    let slots = Arc::new(tokio::sync::Semaphore::new(jobs));
    let mut running = tokio::task::JoinSet::new();
    let mut rows = Vec::new();
    // Prompts start in the file's order, each as a slot frees up.
    for (index, prompt) in prompts.into_iter().enumerate() {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.ok(),
            () = stopping.first() => None,
        };
        let Some(slot) = slot.filter(|_| stopping.seen() == 0) else {
            rows.push(shared.not_run(index));
            continue;
        };
        let shared = shared.clone();
        let mut interrupts = interrupts.clone();
        running.spawn(async move {
            let row = shared.turn(index, &prompt, &mut interrupts).await;
            drop(slot);
            row
        });
    }
    while let Some(row) = running.join_next().await {
        rows.push(row.map_err(|e| format!("a turn of the batch failed: {e}"))?);
    }
    rows.sort_by_key(|r| r.index);
    let mut calls: HashMap<String, Vec<ExecutionLine>> = HashMap::new();
    for call in audit_calls(&state_dir, |l| l.run.as_ref() == Some(&run))? {
        calls
            .entry(call.session.clone().unwrap_or_default())
            .or_default()
            .push(call);
    }
    for row in &mut rows {
        let Some((session, stop_reason)) = &row.ended else {
            continue;
        };
        row.calls = calls.remove(session).unwrap_or_default();
        Output::new(args.json, Some(row.index), "").report(
            &row.calls,
            *stop_reason,
            row.usage.as_ref(),
        )?;
    }
    let worst = rows
        .iter()
        .map(|r| r.ending)
        .max_by_key(|e| e.badness())
        .unwrap_or(Ending::EndTurn);
    // The directories made: those of the prompts that started.
    let made = rows.iter().filter(|r| r.made_dir).map(|r| r.index);
    let kept = match &shared.workdirs {
        Some(workdirs) => workdirs.finish(made).await,
        None => None,
    };
    if !args.json {
        print!("{}", table(&rows, &run));
        if let Some(kept) = kept {
            println!("{kept}");
        }
    }
    Ok(worst)
}

/// What every turn of the batch shares.
struct Shared {
    at: Where,
    cwd: PathBuf,
    /// `--workdirs` or `--worktrees`: each prompt's directory of its own.
    workdirs: Option<Workdirs>,
    mode: Option<String>,
    run: RunId,
    asker: Asker,
    json: bool,
}

impl Shared {
    async fn turn(&self, index: usize, prompt: &str, interrupts: &mut Interrupts) -> Row {
        let started = Instant::now();
        let cwd = match &self.workdirs {
            Some(workdirs) => match workdirs.make(index).await {
                Ok(own) => own,
                Err(message) => {
                    eprintln!("dsh: prompt {index}: {message}");
                    let mut row = self.not_run(index);
                    (row.ending, row.error) = (Ending::Error, Some(message));
                    return row;
                }
            },
            None => self.cwd.clone(),
        };
        let turn = Turn {
            at: &self.at,
            asker: self.asker,
            cwd: &cwd,
            mode: self.mode.as_deref(),
            run: &self.run,
            prompt,
        };
        let mut out = Output::new(self.json, Some(index), prompt);
        let turned = one_turn(turn, &mut out, interrupts).await;
        let usage = out.usage.take();
        match turned {
            Ok(turned) => Row {
                index,
                made_dir: self.workdirs.is_some(),
                ending: turned.ending,
                ended: turned.ended,
                calls: Vec::new(),
                took: started.elapsed(),
                usage,
                error: None,
            },
            Err(message) => {
                eprintln!("dsh: prompt {index}: {message}");
                Row {
                    index,
                    made_dir: self.workdirs.is_some(),
                    ending: Ending::Error,
                    ended: None,
                    calls: Vec::new(),
                    took: started.elapsed(),
                    usage,
                    error: Some(message),
                }
            }
        }
    }

    /// A prompt never started (Ctrl-C came first): cancelled.
    fn not_run(&self, index: usize) -> Row {
        Row {
            index,
            made_dir: false,
            ending: Ending::Cancelled,
            ended: None,
            calls: Vec::new(),
            took: Duration::ZERO,
            usage: None,
            error: Some("not started (Ctrl-C)".into()),
        }
    }
}

/// The counts of a row's calls: allowed, asked (a person or `--ask` answered), refused.
fn counts(calls: &[ExecutionLine]) -> (usize, usize, usize) {
    let allowed = calls
        .iter()
        .filter(|c| c.decision == Decision::Allow)
        .count();
    let asked = calls.iter().filter(|c| c.answer.is_some()).count();
    let refused = calls
        .iter()
        .filter(|c| c.decision == Decision::Deny)
        .count();
    (allowed, asked, refused)
}

/// The table a person reads at the end of a batch, then the run id to replay.
fn table(rows: &[Row], run: &RunId) -> String {
    let mut out = format!(
        "{:>5}  {:<9}  {:>5}  {:>7}  {:>5}  {:>7}  {:>8}  {:>7}\n",
        "#", "stop", "calls", "allowed", "asked", "refused", "time", "tokens"
    );
    let mut total = (0, 0, 0, 0, Duration::ZERO);
    for row in rows {
        let (allowed, asked, refused) = counts(&row.calls);
        total.0 += row.calls.len();
        total.1 += allowed;
        total.2 += asked;
        total.3 += refused;
        total.4 += row.took;
        out.push_str(&format!(
            "{:>5}  {:<9}  {:>5}  {:>7}  {:>5}  {:>7}  {:>7.2}s  {:>7}{}\n",
            row.index,
            row.ending.word(),
            row.calls.len(),
            allowed,
            asked,
            refused,
            row.took.as_secs_f64(),
            // The context's tokens in use at the end.
            row.usage
                .as_ref()
                .and_then(|u| u.get("used"))
                .and_then(Value::as_u64)
                .map_or("-".to_string(), |t| t.to_string()),
            row.error.as_ref().map_or(String::new(), |e| format!(
                "  {}",
                crate::cli::terminal::shown(e)
            )),
        ));
    }
    out.push_str(&format!(
        "{:>5}  {:<9}  {:>5}  {:>7}  {:>5}  {:>7}  {:>7.2}s\n",
        "all",
        "",
        total.0,
        total.1,
        total.2,
        total.3,
        total.4.as_secs_f64()
    ));
    out.push_str(&format!(
        "run {run}: dsh policy replay --run {run} --audit STATE_DIR\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("prompts");
        std::fs::write(&path, text).expect("write");
        (dir, path)
    }

    #[test]
    fn prompts_are_lines_or_json_lines_and_a_bad_json_line_is_named() {
        let (_d, path) = file("say hi\n\n!echo x\n");
        assert_eq!(
            read_prompts(&path),
            Ok(vec!["say hi".into(), "!echo x".into()])
        );
        let (_d, path) = file("{\"prompt\": \"two\\nlines\"}\n{\"prompt\": \"b\"}\n");
        assert_eq!(
            read_prompts(&path),
            Ok(vec!["two\nlines".into(), "b".into()])
        );
        let (_d, path) = file("{\"prompt\": \"a\"}\nnot json\n");
        let err = read_prompts(&path).expect_err("a line that is not JSON");
        assert!(err.contains("prompts:2: "), "{err}");
        let (_d, path) = file("{\"prompt\": \"a\", \"cwd\": \"/\"}\n");
        assert!(read_prompts(&path).is_err());
        let (_d, path) = file("\n \n");
        assert!(read_prompts(&path).is_err());
    }
}
