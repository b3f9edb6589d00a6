//! `dsh hooks test`: a config's hooks of one event run for real on one made-up call,
//! in the current directory, with no daemon and no session; what each said (raw and as
//! read), how long it took, and the decision they come to together. The call is judged
//! by the config's rules first (as live), so hooks see its segments and `commands`
//! matches as it would; the rules' own word is shown apart and not combined.

use super::external::{ExternalHook, HookSet, protocol::PermissionReply};
use super::rules::PolicyHook;
use super::waterfall::{Hook, Terminal, ToolExecution, ToolOutput, Waterfall};
use crate::config::{Config, Decision, HookEvent};
use crate::policy::Policy;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What a test asks the hooks about.
pub struct TestInput {
    pub event: HookEvent,
    pub tool: String,
    pub arguments: Value,
    /// The result a post_tool hook reads.
    pub result: Option<ToolOutput>,
    /// The prompt a prompt hook reads.
    pub prompt: Option<String>,
}

/// What one hook said.
#[derive(Debug, Serialize)]
pub struct HookSaid {
    pub name: String,
    /// Its word counts (`false`: a shadow, shown but not combined).
    pub enforced: bool,
    /// What it printed (or exit code 2 and its stderr); `null` when it failed to answer.
    pub raw: Option<String>,
    /// `allow`, `ask`, `deny`, or `none` (no opinion); `failed` with `reason` saying why.
    pub decision: String,
    pub reason: String,
    pub ms: u64,
}

/// The whole test.
#[derive(Debug, Serialize)]
pub struct TestReport {
    /// The rules' decision on the call, for reference.
    pub policy: Option<String>,
    pub hooks: Vec<HookSaid>,
    /// `allow`, `ask`, `deny` (the strictest word of the enforced hooks), or `failed`.
    pub decision: String,
}

impl TestReport {
    /// The exit code: 0 allow, 1 deny, 2 ask, 3 a hook failed.
    pub fn exit_code(&self) -> u8 {
        match self.decision.as_str() {
            "allow" => 0,
            "deny" => 1,
            "ask" => 2,
            _ => 3,
        }
    }

    /// The report for people.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Some(policy) = &self.policy {
            out.push_str(&format!("rules: {policy}\n"));
        }
        if self.hooks.is_empty() {
            out.push_str("no hook of this event matches the call\n");
        }
        for h in &self.hooks {
            let shadow = if h.enforced { "" } else { " (shadow)" };
            out.push_str(&format!(
                "hook {}{shadow}: {} in {} ms{}\n",
                h.name,
                h.decision,
                h.ms,
                if h.reason.is_empty() {
                    String::new()
                } else {
                    format!(": {}", h.reason)
                }
            ));
            match &h.raw {
                Some(raw) if !raw.trim().is_empty() => {
                    for line in raw.trim_end().lines() {
                        out.push_str(&format!("    | {line}\n"));
                    }
                }
                Some(_) => out.push_str("    | (nothing)\n"),
                None => {}
            }
        }
        out.push_str(&format!("decision: {}\n", self.decision));
        out
    }
}

/// Ends the rules' pass: nothing runs.
struct NotRun;

#[async_trait::async_trait]
impl Terminal for NotRun {
    async fn execute(&self, _call: &ToolExecution) -> ToolOutput {
        ToolOutput::default()
    }
}

/// An answer as a decision: a permission reply counts as the decision it makes (`pass`
/// is no opinion).
fn decision_of(answer: &super::external::protocol::Answer) -> Option<Decision> {
    match answer.permission {
        Some(PermissionReply::AllowOnce) => Some(Decision::Allow),
        Some(PermissionReply::Reject) => Some(Decision::Deny),
        Some(PermissionReply::Pass) | None => answer.decision,
    }
}

/// Runs the hooks of `input.event` in `config` that match the call, all at once (as the
/// daemon runs pre_tool hooks), in `cwd`.
pub async fn run(config: &Config, input: TestInput, cwd: &Path) -> TestReport {
    let hooks = HookSet::new(&config.hooks.all(), config);
    let call = ToolExecution::new(
        "hooks-test",
        input.tool.clone(),
        input.arguments.clone(),
        None,
        CancellationToken::new(),
    );
    let has_call = !matches!(
        input.event,
        HookEvent::Prompt
            | HookEvent::SessionStart
            | HookEvent::SessionEnd
            | HookEvent::Stop
            | HookEvent::Notification
    );
    let mut policy = None;
    if has_call {
        let rules = Waterfall::new();
        rules.push(Arc::new(PolicyHook::new(Arc::new(Policy::of_config(
            config,
        )))));
        rules.run(&call, &NotRun).await;
        let verdict = call.verdict();
        policy = Some(format!(
            "{} ({})",
            crate::policy::action(verdict.decision),
            verdict.reason
        ));
    }
    let matching: Vec<&Arc<ExternalHook>> = hooks
        .of_event(input.event)
        .filter(|h| !has_call || h.applies(&call))
        .collect();
    let said = futures::future::join_all(matching.iter().map(|h| {
        h.probe(
            input.event,
            has_call.then_some(&call),
            input.result.as_ref(),
            input.prompt.as_deref(),
            cwd,
        )
    }))
    .await;
    let mut report = TestReport {
        policy,
        hooks: Vec::new(),
        decision: String::new(),
    };
    let mut combined = Decision::Allow;
    let mut failed = false;
    for (hook, consulted) in matching.iter().zip(said) {
        let (decision, reason) = match &consulted.answer {
            Ok(answer) => {
                let d = decision_of(answer);
                if hook.enforced()
                    && let Some(d) = d
                {
                    combined = combined.max(d);
                }
                let word = match (d, &answer.rewrite, &answer.replace) {
                    (Some(d), _, _) => crate::policy::action(d).to_string(),
                    (None, Some(args), _) => format!("rewrite {args}"),
                    (None, None, Some(_)) => "replace".to_string(),
                    _ => "none".to_string(),
                };
                (word, answer.reason.clone())
            }
            Err(why) => {
                failed |= hook.enforced();
                ("failed".to_string(), why.clone())
            }
        };
        report.hooks.push(HookSaid {
            name: hook.name().trim_start_matches("hook ").to_string(),
            enforced: hook.enforced(),
            raw: consulted.raw,
            decision,
            reason,
            ms: consulted.ms,
        });
    }
    report.decision = if failed {
        "failed".into()
    } else {
        crate::policy::action(combined).into()
    };
    report
}
