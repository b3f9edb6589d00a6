//! `bash`, `bash_output` and `bash_kill` (spec/tools.md T1-T13): argument checks
//! and the exact text the model reads. Running, reading and killing go through
//! the executor seam; who may touch a task is the session registry's call.

use super::schema::{self, ToolSchema};
use super::{Tool, ToolKind};
use crate::config::{ExecConfig, ExecutorKind};
use crate::exec::{
    BashExecutor, CollectedOutput, ExecRequest, KillOutcome, RunOutcome, Spill, StreamRead, TaskId,
    TaskStatus,
};
use crate::hooks::audit::AuditLog;
use crate::hooks::waterfall::{CommandExit, ToolExecution, ToolOutput};
use crate::policy::Escalation;
use crate::registry::{SessionRegistry, TaskAccess};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the bash tools share: the executor, the registry, the audit log, and what the
/// sandbox denies when commands run in one.
struct Shared {
    exec: Arc<dyn BashExecutor>,
    sessions: Arc<SessionRegistry>,
    audit: Arc<AuditLog>,
    sandbox: Option<SandboxTerms>,
}

/// The daemon's commands run in the sandbox executor (`[exec] kind = "sandbox"`), on these
/// terms. It decides two things of the bash tool (issue 27): a call may ask to leave the
/// sandbox (`sandbox: "off"`), and a command that fails there is told what the sandbox
/// refuses. Taken from the config the daemon started with (an `[exec]` change needs a
/// restart), so the policy hook and the tool agree on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxTerms {
    /// `[exec.sandbox] writable`: writable for every command, besides its session's roots.
    pub writable: Vec<PathBuf>,
    /// `[exec.sandbox] network`: how commands reach the network.
    pub network: crate::config::NetworkMode,
    /// `[exec.sandbox] allow_unix_sockets`: new Unix sockets are allowed.
    pub unix_sockets: bool,
    /// `[exec.sandbox] allow_git_config`: `.git/config` is writable.
    pub git_config: bool,
}

impl SandboxTerms {
    /// The terms of `config`'s executor, when it is the sandbox.
    pub fn of(config: &ExecConfig) -> Option<Self> {
        (config.kind == ExecutorKind::Sandbox).then(|| Self {
            writable: config.sandbox.writable.clone(),
            network: config.sandbox.network.mode,
            unix_sockets: config.sandbox.allow_unix_sockets,
            git_config: config.sandbox.allow_git_config,
        })
    }

    /// Whether a failed sandboxed command's output says the sandbox may be why (E13):
    /// a read-only file system; a permission refused on a path outside `roots` and the
    /// configured writable directories, or on no path at all (a masked file, the seccomp
    /// floor's EPERM, a dropped capability); a missing path under the host's /tmp or
    /// /run outside the roots (the sandbox has its own); a name or network it withholds;
    /// dsh's own notes (its proxy's refusals, its tripwires); a death by SIGSYS. A plain
    /// non-zero exit reads as it would under the local executor.
    pub fn plausibly_why(&self, outcome: &RunOutcome, roots: &[PathBuf]) -> bool {
        if outcome.signal == Some(libc::SIGSYS) {
            return true;
        }
        let inside = |word: &str| {
            let path = Path::new(word);
            roots
                .iter()
                .chain(&self.writable)
                .any(|r| path.starts_with(r))
        };
        let network = self.network != crate::config::NetworkMode::Host;
        [&outcome.stdout.text, &outcome.stderr.text]
            .iter()
            .flat_map(|text| text.lines())
            .any(|line| {
                let lower = line.to_ascii_lowercase();
                if lower.contains("read-only file system")
                    || lower.contains("operation not permitted")
                    || lower.contains("the sandbox")
                {
                    return true;
                }
                // The paths the line names.
                let paths = || {
                    line.split(|c: char| c.is_whitespace() || matches!(c, ':' | '\'' | '"' | '`'))
                        .filter(|w| w.starts_with('/'))
                        .collect::<Vec<&str>>()
                };
                if lower.contains("permission denied") {
                    // One of the session's own is its own business (a chmod 000
                    // file); any other may be the sandbox's.
                    let paths = paths();
                    return paths.is_empty() || paths.iter().any(|p| !inside(p));
                }
                if lower.contains("no such file or directory") {
                    // The host's /tmp and /run are not the sandbox's: what is there
                    // outside the roots is missing in it.
                    return paths()
                        .iter()
                        .any(|p| !inside(p) && (p.starts_with("/tmp/") || p.starts_with("/run/")));
                }
                network
                    && (lower.contains("network is unreachable")
                        || lower.contains("could not resolve host")
                        || lower.contains("temporary failure in name resolution")
                        || lower.contains("name or service not known"))
            })
    }

    /// The note after a failed sandboxed command's status markers: what the sandbox
    /// refuses (writes outside `roots` and the configured ones, named), and how to ask
    /// the person to run it outside. Only roots the sandbox binds (existing absolute
    /// directories) are named.
    pub fn failure_note(&self, roots: &[PathBuf]) -> String {
        let mut named: Vec<&Path> = Vec::new();
        for root in roots.iter().chain(&self.writable) {
            if root.is_absolute() && root.is_dir() && !named.contains(&root.as_path()) {
                named.push(root);
            }
        }
        let named: Vec<String> = named.iter().map(|r| r.display().to_string()).collect();
        let writes = if named.is_empty() {
            "it can write nowhere but its private /tmp".to_string()
        } else {
            format!(
                "it can write only in {} (and its private /tmp)",
                named.join(", ")
            )
        };
        let network = match self.network {
            crate::config::NetworkMode::Host => "",
            crate::config::NetworkMode::None => ", it has no network",
            crate::config::NetworkMode::Proxy => {
                ", it reaches the network only through dsh's proxy (HTTP_PROXY, ALL_PROXY: \
                 each host is judged, names resolve only there, raw sockets and UDP go \
                 nowhere)"
            }
        };
        let sockets = if self.unix_sockets {
            ""
        } else {
            ", new Unix sockets are refused"
        };
        let git = if self.git_config {
            "git hooks"
        } else {
            "git hooks and config"
        };
        format!(
            "[this ran in the sandbox: {writes}, secret paths ([exec.sandbox] deny_read) read \
             as empty{network}{sockets}, and {git}, shell rc files and editor folders are \
             read-only]\n[if the sandbox is why it failed, call bash \
             again with sandbox: \"off\" and a justification: the person is asked to run it \
             outside]"
        )
    }
}

/// The three tools, in their contract order. `sandbox`: the terms of the sandbox the
/// commands run in, when `exec` is the sandbox executor.
pub fn tools(
    exec: Arc<dyn BashExecutor>,
    sessions: Arc<SessionRegistry>,
    audit: Arc<AuditLog>,
    sandbox: Option<SandboxTerms>,
) -> Vec<Arc<dyn Tool>> {
    let shared = Arc::new(Shared {
        exec,
        sessions,
        audit,
        sandbox,
    });
    let load = |doc: &str| Arc::new(ToolSchema::parse(doc).expect("embedded tool schema is valid"));
    vec![
        Arc::new(Bash {
            schema: load(schema::BASH),
            shared: shared.clone(),
        }),
        Arc::new(BashOutput {
            schema: load(schema::BASH_OUTPUT),
            shared: shared.clone(),
        }),
        Arc::new(BashKill {
            schema: load(schema::BASH_KILL),
            shared,
        }),
    ]
}

struct Bash {
    schema: Arc<ToolSchema>,
    shared: Arc<Shared>,
}

struct BashOutput {
    schema: Arc<ToolSchema>,
    shared: Arc<Shared>,
}

struct BashKill {
    schema: Arc<ToolSchema>,
    shared: Arc<Shared>,
}

fn str_arg<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

#[async_trait::async_trait]
impl Tool for Bash {
    fn schema(&self) -> &Arc<ToolSchema> {
        &self.schema
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    async fn call(&self, call: &ToolExecution) -> ToolOutput {
        let args = &call.arguments;
        let command = str_arg(args, "command").unwrap_or_default();
        if command.trim().is_empty() {
            return ToolOutput::error("invalid command");
        }
        if str_arg(args, "description")
            .unwrap_or_default()
            .trim()
            .is_empty()
        {
            return ToolOutput::error("invalid description");
        }
        let timeout_ms = match args.get("timeoutMs").filter(|v| !v.is_null()) {
            None => None,
            Some(v) => match v.as_f64() {
                Some(ms) if ms.is_finite() && ms > 0.0 => {
                    Some(ms.ceil().min(u64::MAX as f64) as u64)
                }
                _ => return ToolOutput::error("invalid timeoutMs"),
            },
        };
        // T2: the session's cwd is the default and the base of a relative workdir;
        // only a call with no session leaves the choice to the executor.
        let requested = str_arg(args, "workdir")
            .filter(|w| !w.is_empty())
            .map(PathBuf::from);
        let workdir = match (&call.session, requested) {
            (Some(session), Some(dir)) => Some(session.cwd.join(dir)),
            (Some(session), None) => Some(session.cwd.clone()),
            (None, dir) => dir,
        };
        let escalation = match Escalation::requested(args) {
            Ok(escalation) => escalation,
            Err(e) => return ToolOutput::error(e),
        };
        let background = args
            .get("run_in_background")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        // Under the sandbox a valid `sandbox: "off"` runs outside it; elsewhere the
        // argument changes nothing.
        let outside = match (&escalation, &self.shared.sandbox) {
            (Some(_), Some(_)) => match self.outside(call) {
                Ok(exec) => Some(exec),
                Err(refused) => return *refused,
            },
            _ => None,
        };
        let contained = self.shared.sandbox.as_ref().filter(|_| outside.is_none());
        let exec = outside.as_ref().unwrap_or(&self.shared.exec);
        let writable_roots = call
            .session
            .as_ref()
            .map(|s| s.writable_roots())
            .unwrap_or_default();
        let spec = exec.resolve(ExecRequest {
            command: command.to_string(),
            workdir,
            timeout_ms,
            scope: call.session_id().map(str::to_string),
            writable_roots,
            call_id: Some(call.call_id.clone()),
        });
        if background {
            return match exec.start(spec).await {
                Ok(task) => {
                    self.shared
                        .sessions
                        .record_owner(task.id, call.session_id());
                    ToolOutput {
                        task: Some(task.id),
                        ..ToolOutput::ok(format!("started background task {}", task.id))
                    }
                }
                Err(e) => ToolOutput::error(e),
            };
        }
        let cancel = call.cancel.clone();
        let roots = spec.writable_roots.clone();
        let ran = match call.output_watch() {
            Some(watch) => exec.run_watched(spec, cancel, watch).await,
            None => exec.run(spec, cancel).await,
        };
        match ran {
            Ok(outcome) if outcome.aborted => ToolOutput::error("command aborted"),
            Ok(outcome) => {
                let mut text = run_result_text(&outcome);
                let failed = outcome.signal.is_some() || outcome.exit_code.is_some_and(|c| c != 0);
                // E13: the text is the local executor's unless the sandbox plausibly
                // caused the failure (never for a timeout or a plain exit code).
                if let Some(terms) = contained
                    .filter(|_| failed && !outcome.timed_out)
                    .filter(|terms| terms.plausibly_why(&outcome, &roots))
                {
                    text.push('\n');
                    text.push_str(&terms.failure_note(&roots));
                }
                // A spill file the command names that retention removed: said, so the
                // model does not take "No such file" for a mistake of its own.
                for note in crate::state_dir::sweep::removed_notes_in(command) {
                    text.push('\n');
                    text.push_str(&note);
                }
                ToolOutput {
                    spills: spilled(
                        [&outcome.stdout, &outcome.stderr].map(|s| (s.truncated, &s.spill)),
                    ),
                    exit: Some(CommandExit {
                        exit_code: outcome.exit_code,
                        signal: outcome.signal,
                        timed_out: outcome.timed_out,
                    }),
                    ..ToolOutput::ok(text)
                }
            }
            Err(e) => ToolOutput::error(e),
        }
    }
}

impl Bash {
    /// The executor outside the sandbox, for a call asking to leave it. Only a call the
    /// policy judged as leaving (the person was asked, or a rule naming its command
    /// allowed it) gets it: anything else is refused, never run outside unjudged.
    fn outside(&self, call: &ToolExecution) -> Result<Arc<dyn BashExecutor>, Box<ToolOutput>> {
        let judged = call
            .judged()
            .is_some_and(|(_, judgement)| judgement.escalation.is_some());
        if !judged {
            return Err(Box::new(ToolOutput::error(
                "refused to run outside the sandbox: the call was not judged as leaving it",
            )));
        }
        self.shared.exec.outside().ok_or_else(|| {
            Box::new(ToolOutput::error(
                "this daemon has no executor outside its sandbox",
            ))
        })
    }
}

impl Shared {
    /// Reads `task_id` (the one place a tool's text becomes a [`TaskId`]) and checks the
    /// caller's right to it (T10, T13).
    fn admit(&self, call: &ToolExecution) -> Result<TaskId, Box<ToolOutput>> {
        let task_id = str_arg(&call.arguments, "task_id")
            .unwrap_or_default()
            .trim();
        if task_id.is_empty() {
            return Err(Box::new(ToolOutput::error("invalid task_id")));
        }
        // Only what the executor could have handed out is looked up: `bash-x`, `7` or
        // `bash-07` are mistakes to point out, not unknown tasks (nor task 0 or 7).
        let task_id = match task_id.parse::<TaskId>() {
            Ok(id) => id,
            Err(e) => return Err(Box::new(ToolOutput::error(format!("invalid task_id: {e}")))),
        };
        match self.sessions.check_task_access(task_id, call.session_id()) {
            TaskAccess::Allowed => Ok(task_id),
            TaskAccess::Unknown => Err(Box::new(unknown_task(task_id))),
            TaskAccess::Refused => {
                self.audit.refusal(
                    call.session.as_deref(),
                    &call.call_id,
                    &call.tool,
                    &task_id.to_string(),
                );
                Err(Box::new(ToolOutput::error(format!(
                    "task {task_id} belongs to another session"
                ))))
            }
        }
    }
}

fn unknown_task(task_id: TaskId) -> ToolOutput {
    ToolOutput::error(format!("unknown bash task \"{task_id}\""))
}

#[async_trait::async_trait]
impl Tool for BashOutput {
    fn schema(&self) -> &Arc<ToolSchema> {
        &self.schema
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    async fn call(&self, call: &ToolExecution) -> ToolOutput {
        let task_id = match self.shared.admit(call) {
            Ok(id) => id,
            Err(out) => return *out,
        };
        match self.shared.exec.read(task_id) {
            Some(read) => {
                let spills = spilled([&read.stdout, &read.stderr].map(|s| (s.dropped, &s.spill)));
                let mut text = read_result_text(&read.stdout, &read.stderr, read.status);
                // The file the T9 line names may be gone by `[state]` retention.
                for path in &spills {
                    if let Some(note) = crate::state_dir::sweep::removed_note(path) {
                        text.push_str(&format!("\n[{}: {note}]", path.display()));
                    }
                }
                ToolOutput {
                    spills,
                    ..ToolOutput::ok(text)
                }
            }
            None => unknown_task(task_id),
        }
    }
}

#[async_trait::async_trait]
impl Tool for BashKill {
    fn schema(&self) -> &Arc<ToolSchema> {
        &self.schema
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    async fn call(&self, call: &ToolExecution) -> ToolOutput {
        let task_id = match self.shared.admit(call) {
            Ok(id) => id,
            Err(out) => return *out,
        };
        match self.shared.exec.kill(task_id).await {
            KillOutcome::Killed => ToolOutput::ok(format!("killed background task {task_id}")),
            KillOutcome::AlreadyFinished => {
                ToolOutput::ok(format!("task {task_id} had already finished"))
            }
            KillOutcome::Unknown => unknown_task(task_id),
        }
    }
}

/// A signal's name (`SIGTERM`), or its number when it has none.
pub fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {signal}"))
}

/// The spill files of the streams whose text says bytes are missing (truncated, or
/// dropped from memory): the paths the text names, as data.
fn spilled(streams: [(bool, &Spill); 2]) -> Vec<std::path::PathBuf> {
    streams
        .into_iter()
        .filter(|(missing, _)| *missing)
        .filter_map(|(_, spill)| spill.file().map(std::path::Path::to_path_buf))
        .collect()
}

/// One stream's section: its text, and the truncation note when it overflowed (T6).
pub(crate) fn section(text: &str, truncated: bool, spill: &Spill) -> String {
    if !truncated {
        return text.to_string();
    }
    let path = spill
        .display_path()
        .unwrap_or_else(|| "(unavailable)".into());
    format!("{text}\n[output truncated; full output: {path}]")
}

/// stdout, then `[stderr]` and stderr (T3); `None` when both are empty.
fn body(stdout: &str, stderr: &str) -> Option<String> {
    if stdout.is_empty() && stderr.is_empty() {
        return None;
    }
    let mut text = stdout.to_string();
    if !stderr.is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("[stderr]\n");
        text.push_str(stderr);
    }
    Some(text)
}

/// Appends lines after a body, each on its own line, with a newline before the
/// first only when the body lacks one (T4).
fn with_lines(mut text: String, lines: &[String]) -> String {
    if lines.is_empty() {
        return text;
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&lines.join("\n"));
    text
}

fn stream_section(out: &CollectedOutput) -> String {
    section(&out.text, out.truncated, &out.spill)
}

/// The text of a finished foreground command (T3, T4, T6).
pub fn run_result_text(outcome: &RunOutcome) -> String {
    let text = body(
        &stream_section(&outcome.stdout),
        &stream_section(&outcome.stderr),
    )
    .unwrap_or_else(|| "(no output)".to_string());
    let mut markers = Vec::new();
    if outcome.timed_out {
        markers.push(format!("[timed out after {}ms]", outcome.timeout_ms));
    }
    if let Some(signal) = outcome.signal {
        markers.push(format!("[killed by signal: {}]", signal_name(signal)));
    } else if let Some(code) = outcome.exit_code.filter(|c| *c != 0) {
        markers.push(format!("[exit code: {code}]"));
    }
    with_lines(text, &markers)
}

/// `[status: ...]` for a task (T8).
pub fn status_line(status: TaskStatus) -> String {
    match status {
        TaskStatus::Running => "[status: running]".into(),
        TaskStatus::Completed { exit_code } => {
            format!("[status: completed, exit code: {exit_code}]")
        }
        TaskStatus::Killed {
            signal: Some(signal),
        } => format!("[status: killed by {}]", signal_name(signal)),
        TaskStatus::Killed { signal: None } => "[status: killed]".into(),
        TaskStatus::Lost => format!("[status: lost: {}]", crate::exec::records::LOST_REASON),
    }
}

/// The text of a `bash_output` read (T8, T9).
///
/// A stream can lose unread bytes without a spill file: a finished task's output
/// that never outgrew memory is released when too much finished output waits to be
/// read (see `exec::retention`). No path can be named then, so the T9 line names
/// the stream instead: `[some output was dropped from memory; never written to a
/// file: stdout]`, before `; full output: <path>` when the other stream has a file
/// (last, so the history shortener still finds the path).
pub fn read_result_text(stdout: &StreamRead, stderr: &StreamRead, status: TaskStatus) -> String {
    let text = body(&stdout.text, &stderr.text).unwrap_or_else(|| "(no new output)".to_string());
    let mut lines = Vec::new();
    let dropped = [("stdout", stdout), ("stderr", stderr)]
        .into_iter()
        .filter(|(_, s)| s.dropped);
    let (mut unsaved, mut paths) = (Vec::new(), Vec::new());
    for (name, s) in dropped {
        match s.spill.display_path() {
            Some(path) => paths.push(path),
            None => unsaved.push(name),
        }
    }
    if !unsaved.is_empty() || !paths.is_empty() {
        let mut line = "[some output was dropped from memory".to_string();
        if !unsaved.is_empty() {
            line.push_str(&format!(
                "; never written to a file: {}",
                unsaved.join(", ")
            ));
        }
        if !paths.is_empty() {
            line.push_str(&format!("; full output: {}", paths.join(", ")));
        }
        line.push(']');
        lines.push(line);
    }
    lines.push(status_line(status));
    with_lines(text, &lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(text: &str) -> CollectedOutput {
        CollectedOutput {
            text: text.into(),
            ..CollectedOutput::default()
        }
    }

    fn outcome(stdout: &str, stderr: &str) -> RunOutcome {
        RunOutcome {
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            aborted: false,
            timeout_ms: 100,
            stdout: out(stdout),
            stderr: out(stderr),
        }
    }

    #[test]
    fn t3_exact_examples() {
        assert_eq!(run_result_text(&outcome("hello\n", "")), "hello\n");
        assert_eq!(run_result_text(&outcome("", "")), "(no output)");
        assert_eq!(
            run_result_text(&outcome("out\n", "err\n")),
            "out\n[stderr]\nerr\n"
        );
        assert_eq!(
            run_result_text(&outcome("out", "err\n")),
            "out\n[stderr]\nerr\n"
        );
        assert_eq!(run_result_text(&outcome("", "err")), "[stderr]\nerr");
        let mut o = outcome("failing\n", "");
        o.exit_code = Some(3);
        assert_eq!(run_result_text(&o), "failing\n[exit code: 3]");
    }

    #[test]
    fn t4_markers() {
        let mut o = outcome("", "");
        o.timed_out = true;
        o.exit_code = None;
        o.signal = Some(libc::SIGTERM);
        assert_eq!(
            run_result_text(&o),
            "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]"
        );
        let mut o = outcome("bye", "");
        o.timed_out = true;
        assert_eq!(run_result_text(&o), "bye\n[timed out after 100ms]");
    }

    #[test]
    fn t6_truncation_note() {
        let mut o = outcome("tail", "");
        o.stdout.truncated = true;
        o.stdout.spill = Spill::Written("/s/run.stdout".into());
        assert_eq!(
            run_result_text(&o),
            "tail\n[output truncated; full output: /s/run.stdout]"
        );
        o.stdout.spill = Spill::Unavailable("disk full".into());
        assert_eq!(
            run_result_text(&o),
            "tail\n[output truncated; full output: (unavailable)]"
        );
    }

    /// Issue 27: the note names the roots the sandbox binds, once each, and leaves out
    /// the network when commands have it.
    #[test]
    fn e13_the_note_is_for_failures_the_sandbox_plausibly_caused() {
        let terms = SandboxTerms {
            writable: vec![],
            network: crate::config::NetworkMode::Proxy,
            unix_sockets: false,
            git_config: false,
        };
        let roots = [PathBuf::from("/w/p")];
        let why = |stderr: &str| terms.plausibly_why(&outcome("", stderr), &roots);
        for blamed in [
            "bash: line 1: /etc/x: Read-only file system",
            "touch: cannot touch '/home/u/x': Permission denied",
            "cat: /w/p/.env: Permission denied\ncat: /home/u/.ssh/id: Permission denied",
            "socket: Operation not permitted",
            "bash: line 1: /tmp/outside/report: No such file or directory",
            "curl: (6) Could not resolve host: example.com",
            "[the sandbox's network refused example.com (443): not allowed]",
        ] {
            assert!(why(blamed), "{blamed}");
        }
        for own in [
            "",
            "failing",
            "cat: /w/p/mine: Permission denied",
            "cat: /w/p/missing: No such file or directory",
            "ls: cannot access '/nonexistent': No such file or directory",
        ] {
            assert!(!why(own), "{own}");
        }
        let mut killed = outcome("", "");
        killed.signal = Some(libc::SIGSYS);
        assert!(terms.plausibly_why(&killed, &roots));
    }

    #[test]
    fn issue_27_the_failure_note_names_the_writable_roots() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let terms = SandboxTerms {
            writable: vec![b.clone(), "relative".into(), dir.path().join("missing")],
            network: crate::config::NetworkMode::None,
            unix_sockets: false,
            git_config: false,
        };
        let note = terms.failure_note(&[a.clone(), a.clone()]);
        let first = note.lines().next().unwrap();
        assert!(
            first.starts_with(&format!(
                "[this ran in the sandbox: it can write only in {}, {} (and its private /tmp), \
                 secret paths",
                a.display(),
                b.display()
            )),
            "{note}"
        );
        assert!(first.contains(", it has no network, "), "{note}");
        assert_eq!(note.lines().count(), 2);
        let open = SandboxTerms {
            writable: Vec::new(),
            network: crate::config::NetworkMode::Host,
            unix_sockets: true,
            git_config: true,
        };
        let note = open.failure_note(&[]);
        assert!(
            note.starts_with(
                "[this ran in the sandbox: it can write nowhere but its private /tmp, secret"
            ),
            "{note}"
        );
        assert!(!note.contains("network"), "{note}");
    }

    #[test]
    fn t8_t9_read_texts() {
        let r = |t: &str| StreamRead {
            text: t.into(),
            ..StreamRead::default()
        };
        assert_eq!(
            read_result_text(&r(""), &r(""), TaskStatus::Running),
            "(no new output)\n[status: running]"
        );
        assert_eq!(
            read_result_text(&r("a\n"), &r("b\n"), TaskStatus::Completed { exit_code: 0 }),
            "a\n[stderr]\nb\n[status: completed, exit code: 0]"
        );
        assert_eq!(
            read_result_text(&r(""), &r(""), TaskStatus::Killed { signal: Some(15) }),
            "(no new output)\n[status: killed by SIGTERM]"
        );
        assert_eq!(
            read_result_text(&r(""), &r(""), TaskStatus::Killed { signal: None }),
            "(no new output)\n[status: killed]"
        );
        let dropped = |t: &str, p: &str| StreamRead {
            text: t.into(),
            dropped: true,
            spill: Spill::Written(p.into()),
        };
        assert_eq!(
            read_result_text(
                &dropped("x", "/a"),
                &dropped("y", "/b"),
                TaskStatus::Running
            ),
            "x\n[stderr]\ny\n[some output was dropped from memory; full output: /a, /b]\n[status: running]"
        );
        let unavailable = StreamRead {
            spill: Spill::Unavailable("disk full".into()),
            ..dropped("", "")
        };
        assert_eq!(
            read_result_text(&unavailable, &r(""), TaskStatus::Running),
            "(no new output)\n[some output was dropped from memory; full output: (unavailable)]\n[status: running]"
        );
        // Released from memory after the task finished, never spilled (no path).
        let gone = StreamRead {
            spill: Spill::None,
            ..dropped("", "")
        };
        let done = TaskStatus::Completed { exit_code: 0 };
        assert_eq!(
            read_result_text(&gone, &gone, done),
            "(no new output)\n[some output was dropped from memory; never written to a file: stdout, stderr]\n[status: completed, exit code: 0]"
        );
        assert_eq!(
            read_result_text(&dropped("", "/a"), &gone, done),
            "(no new output)\n[some output was dropped from memory; never written to a file: stderr; full output: /a]\n[status: completed, exit code: 0]"
        );
    }
}
