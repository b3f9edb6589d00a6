//! `dsh policy replay --hooks`: each audited call judged again by the candidate config's
//! policy *and* its pre_tool hook programs, run for real through the same waterfall links
//! a live call goes through (the policy hook, then each enforced pre_tool hook), ending
//! before the tool: nothing the call named runs. What each hook said is counted into the
//! report. `policy::replay` reads the log and keeps the tally; this only judges.

use super::external::HookSet;
use super::project::ProjectLayers;
use super::rules::PolicyHook;
use super::waterfall::{Terminal, ToolExecution, ToolOutput, Waterfall};
use crate::config::{Config, Decision, HookEvent};
use crate::policy::replay::{Report, Unreadable, audited_calls};
use crate::policy::{Policy, action};
use crate::registry::SessionRegistry;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Where a replayed call ends: the hooks let it through, and it is not run.
struct NotRun;

#[async_trait::async_trait]
impl Terminal for NotRun {
    async fn execute(&self, _call: &ToolExecution) -> ToolOutput {
        ToolOutput::default()
    }
}

/// Judges every call of `audit` again under `config`: its rules and its enforced
/// pre_tool hooks (run in `cwd`, or the project's directory for a call of a session in a
/// project, with the line's session id), and a project's rules and (trusted) hooks for
/// such a call. A hook's rewrite is judged again from the start once, as live.
pub async fn replay_with_hooks(
    audit: &str,
    config: &Config,
    cwd: &Path,
) -> Result<Report, Unreadable> {
    let audited = audited_calls(audit)?;
    let pre_tool: Vec<_> = config
        .hooks
        .all()
        .into_iter()
        .filter(|h| h.event == HookEvent::PreTool && h.enforce)
        .collect();
    let hooks = HookSet::new(&pre_tool, config);
    // A call judged with a project's rules gets them again (the file as it is now, under
    // the candidate's trusted_projects), and a trusted project's hooks, as live.
    let projects = Arc::new(ProjectLayers::for_replay(config));
    let waterfall = Waterfall::new();
    let policy =
        PolicyHook::new(Arc::new(Policy::of_config(config))).with_projects(projects.clone());
    waterfall.replace(super::judging_links(policy, &hooks, &projects));
    let default_mode = config.permissions.default_mode;
    let mut report = Report::of(&audited);
    for call in &audited.calls {
        // A session of its own per call: the line's mode and grants, nothing else.
        let sessions = SessionRegistry::new(call.mode.unwrap_or(default_mode));
        let project_dir = call
            .project
            .as_deref()
            .and_then(|file| file.parent()?.parent());
        let session = sessions.insert(
            call.session
                .clone()
                .unwrap_or_else(|| format!("replay-{}", call.line)),
            project_dir.unwrap_or(cwd).to_path_buf(),
        );
        if let Some(dir) = project_dir {
            projects.open(&session.id, dir);
        } else {
            projects.forget(&session.id);
        }
        session.add_grants(call.grants.as_deref().unwrap_or_default());
        let first = ToolExecution::new(
            format!("replay-{}", call.line),
            call.tool.clone(),
            call.arguments.clone(),
            Some(session),
            CancellationToken::new(),
        );
        let (out, rewritten) = waterfall.execute(&first, &NotRun).await;
        let judged = rewritten.as_ref().unwrap_or(&first);
        for entry in judged.trace() {
            if entry.name != "policy" {
                *report
                    .hooks
                    .entry(entry.name)
                    .or_default()
                    .entry(entry.decision.to_string())
                    .or_default() += 1;
            }
        }
        let verdict = judged.verdict();
        let to = if out.vetoed {
            Decision::Deny
        } else {
            verdict.decision
        };
        let now = format!(
            "{} by {}: {}",
            action(to),
            verdict.decider(),
            verdict.reason
        );
        report.record(call, true, to, now);
    }
    hooks.stop_servers().await;
    Ok(report)
}
