//! The audit log (`state_dir/audit.jsonl`): one line per tool execution, whatever
//! happened to it, plus a line per refused cross-session access (T13).
//!
//! The audit hook goes first in the waterfall so it sees every outcome, vetoes
//! included. Arguments are logged as given (secrets in them are not special-cased),
//! so the file is created 0600 and never through a symlink. It rotates by size
//! (`[state] audit_max_bytes`, `audit_keep`: `crate::state_dir::rotate`), a line never
//! split between two files.

use super::waterfall::{Hook, Next, Passed, ToolExecution};
use crate::config::Decision;
use crate::policy::audit::{AuditLine, ExecutionLine, Outcome, RefusalLine};
use crate::state_dir::rotate::{RotatingFile, Rotation};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// An append-only JSON-lines file.
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<Option<RotatingFile>>,
}

impl AuditLog {
    /// Opens (or creates, 0600) `path` for appending, rotating by the default
    /// `[state]` limits (tests; the daemon passes its config's with
    /// [`AuditLog::open_rotating`]).
    pub fn open(path: &Path) -> std::io::Result<Self> {
        Self::open_rotating(
            path,
            crate::state_dir::audit_rotation(&crate::config::StateConfig::default()),
        )
    }

    /// Opens (or creates, 0600) `path` for appending, rotating by `rotation`.
    pub fn open_rotating(path: &Path, rotation: Rotation) -> std::io::Result<Self> {
        let file = RotatingFile::open(path, rotation)?;
        Ok(Self {
            path: path.to_path_buf(),
            file: Mutex::new(Some(file)),
        })
    }

    /// A log that records nothing (no state directory, or tests that do not care).
    pub fn disabled() -> Self {
        Self {
            path: PathBuf::new(),
            file: Mutex::new(None),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line, stamped with the time. A write failure is logged and never
    /// fails the call being audited.
    pub fn write(&self, mut record: AuditLine) {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default();
        match &mut record {
            AuditLine::Execution(line) => line.time_ms = ms,
            AuditLine::Refusal(line) => line.time_ms = ms,
            AuditLine::Other => return,
        }
        let mut line = match serde_json::to_string(&record) {
            Ok(line) => line,
            Err(e) => {
                tracing::error!(path = %self.path.display(), "audit line not written: {e}");
                return;
            }
        };
        line.push('\n');
        let mut guard = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(file) = guard.as_mut()
            && let Err(e) = file.append(line.as_bytes())
        {
            tracing::error!(path = %self.path.display(), "audit write failed: {e}");
        }
    }

    /// Records a refused cross-session access (T13), with the batch of the session
    /// that tried it.
    pub fn refusal(
        &self,
        session: Option<&crate::registry::Session>,
        call_id: &str,
        tool: &str,
        task_id: &str,
    ) {
        self.write(AuditLine::Refusal(RefusalLine {
            session: session.map(|s| s.id.to_string()),
            run: session.and_then(|s| s.run().cloned()),
            call_id: call_id.to_string(),
            tool: tool.to_string(),
            task_id: task_id.to_string(),
            reason: "task belongs to another session".into(),
            time_ms: 0,
        }));
    }
}

impl AuditLog {
    /// Records a call refused after the waterfall let it through, by someone the hooks
    /// did not see (`by`: a wrapped agent's question a hook rewrote, which the agent
    /// cannot run rewritten): the call's arguments as asked, its trace and `reason`.
    pub fn refused_after(
        &self,
        call: &ToolExecution,
        by: &str,
        reason: &str,
        policy_version: String,
    ) {
        self.write(AuditLine::Execution(Box::new(ExecutionLine {
            session: call.session_id().map(str::to_string),
            call_id: call.call_id.clone(),
            tool: call.tool.clone(),
            arguments: call.arguments.clone(),
            decision: Decision::Deny,
            decided_by: by.to_string(),
            reason: reason.to_string(),
            answer: call.verdict().answer,
            duration_ms: 0,
            outcome: Outcome::Vetoed,
            mode: call.judged().map(|(mode, _)| mode),
            policy_version,
            trace: call.trace(),
            grants: Some(call.grants_used()),
            project: None,
            outside_sandbox: false,
            containment: None,
            original_arguments: None,
            original_text: None,
            text: None,
            time_ms: 0,
            run: call.session.as_ref().and_then(|s| s.run().cloned()),
            agent: call.agent.clone(),
        })));
    }
}

/// The hook that writes one audit line per execution.
pub struct AuditHook {
    log: std::sync::Arc<AuditLog>,
    /// The version of the policy every line is judged under (see
    /// `ToolRegistry::policy_version`).
    policy_version: String,
    /// A session judged with its project's rules names the project file's digest too.
    projects: Option<std::sync::Arc<super::project::ProjectLayers>>,
}

impl AuditHook {
    pub fn new(log: std::sync::Arc<AuditLog>, policy_version: String) -> Self {
        Self {
            log,
            policy_version,
            projects: None,
        }
    }

    /// Names each session's project file (`policyVersion` `USER+PROJECT`, and `project`).
    pub fn with_projects(
        mut self,
        projects: std::sync::Arc<super::project::ProjectLayers>,
    ) -> Self {
        self.projects = Some(projects);
        self
    }
}

#[async_trait::async_trait]
impl Hook for AuditHook {
    fn name(&self) -> &str {
        "audit"
    }

    async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
        let started = Instant::now();
        let out = match next.run(call).await {
            Passed::Output(out) => out,
            // A hook rewrote the call: the pass that runs the rewrite writes the line,
            // with both argument sets and the whole trace.
            rewrite @ Passed::Rewrite(_) => return rewrite,
        };
        let verdict = call.verdict();
        let outcome = if out.vetoed {
            Outcome::Vetoed
        } else if out.is_error {
            Outcome::Error
        } else {
            Outcome::Ok
        };
        let mode = call
            .judged()
            .map(|(mode, _)| mode)
            .or_else(|| call.session.as_ref().map(|s| s.mode()));
        let layer = match (&self.projects, &call.session) {
            (Some(projects), Some(session)) => projects.get(&session.id),
            _ => None,
        };
        let policy_version = match &layer {
            Some(l) => format!("{}+{}", self.policy_version, l.version),
            None => self.policy_version.clone(),
        };
        let replaced = out.original_text.is_some();
        let line = ExecutionLine {
            session: call.session_id().map(str::to_string),
            call_id: call.call_id.clone(),
            tool: call.tool.clone(),
            arguments: call.arguments.clone(),
            decision: if out.vetoed {
                Decision::Deny
            } else {
                verdict.decision
            },
            decided_by: verdict.decider().to_string(),
            reason: verdict.reason,
            answer: verdict.answer,
            duration_ms: started.elapsed().as_millis() as u64,
            outcome,
            mode,
            policy_version,
            trace: call.trace(),
            grants: Some(call.grants_used()),
            project: layer.as_ref().map(|l| l.project.file.clone()),
            // Judged as leaving the sandbox (issue 27): it ran outside unless vetoed.
            outside_sandbox: call.judged().is_some_and(|(_, j)| j.escalation.is_some()),
            containment: out.containment.clone(),
            original_arguments: call.original_arguments.clone(),
            original_text: out.original_text.clone(),
            text: replaced.then(|| out.text.clone()),
            time_ms: 0,
            run: call.session.as_ref().and_then(|s| s.run().cloned()),
            agent: call.agent.clone(),
        };
        self.log.write(AuditLine::Execution(Box::new(line)));
        out.into()
    }
}
