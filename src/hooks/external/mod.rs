//! External hooks (`[[hooks.command]]`): the user's own policy code, at nine events (see
//! [`crate::config::HookEvent`]), as a program (a process per call or a server), an HTTP
//! endpoint ([`http`]) or a model judge ([`judge`]).
//!
//! Enforced pre_tool hooks are links of the waterfall after the policy, asked at once per
//! group and combined in config order ([`PreToolBatch`]); shadows, post_tool and
//! post_tool_failure hooks follow, one link each. `permission` hooks are asked by the
//! permission gate before the person, `notification` hooks told beside the question;
//! `prompt`, `session_start`, `stop` and `session_end` hooks by the turn and the
//! session's life, through the [`HookSet`]. A hook reads its event as JSON (protocol v1
//! or v2, or Claude Code's dialect) and answers with a decision, context, a rewrite, a
//! replacement, a permission answer or a `continue`. Every failure (a crash, another
//! exit code, a timeout, an answer it cannot read, an API or HTTP error) denies where a
//! hook decides, naming what went wrong: a broken policy must not open the door. A hook
//! can tighten a decision, never loosen it.

mod claude;
mod http;
mod judge;
pub mod protocol;
mod runner;
mod set;

pub use set::HookSet;

use super::waterfall::{Hook, Next, Passed, ToolExecution, ToolOutput, TraceDecision, TraceEntry};
use crate::config::{
    Config, Decision, ExternalHookConfig, HookDialect, HookEvent, HookRun, ModelConfig, ToolMatcher,
};
use crate::policy::{CommandMatcher, glob_matches};
use crate::registry::Session;
use protocol::{Answer, EventInput, PermissionReply, Reply};
use runner::{Program, Server};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One configured hook program.
pub struct ExternalHook {
    config: ExternalHookConfig,
    /// `hook NAME`, as vetoes and the trace name it.
    name: String,
    /// NAME, for `<context source="hook:NAME">`.
    label: String,
    commands: Option<CommandMatcher>,
    /// Claude Code's matcher over its tool names, when the config has one.
    matcher: Option<ToolMatcher>,
    runner: Runner,
    /// Where session logs live, to tell hooks the path of theirs.
    state_dir: Option<PathBuf>,
    /// The `[model]` it was made with: a model judge is made again when it changes.
    model_fingerprint: String,
}

enum Runner {
    Spawn(Program),
    Server(Server),
    /// A model judge, or why it cannot be made (every call then denies with it).
    Model(Result<judge::ModelJudge, String>),
    /// An HTTP endpoint, or why it cannot be reached (every call then denies with it).
    Http(Result<Box<http::HttpHook>, String>),
}

/// One consultation of a hook: its answer (or why it failed), what it said as it said it
/// (stdout, or exit code 2 and stderr; `None` when it said nothing readable), how long.
pub struct Consulted {
    pub answer: Result<Answer, String>,
    pub raw: Option<String>,
    pub ms: u64,
}

/// What a session event tells its hooks (each field for the events that have it).
#[derive(Default, Clone, Copy)]
struct SessionEvent<'a> {
    prompt: Option<&'a str>,
    source: Option<&'a str>,
    stop_active: Option<bool>,
    message: Option<&'a str>,
}

/// What a prompt's hooks said.
#[derive(Debug, Default)]
pub struct PromptOutcome {
    /// Context for the model, as (source, text).
    pub context: Vec<(String, String)>,
    /// The first hook that blocked the prompt, and why.
    pub blocked: Option<(String, String)>,
}

impl ExternalHook {
    /// The hook `config` describes; session logs are found under `state_dir`, and a
    /// model judge asks `[model]`'s endpoint (`model`) unless it names its own.
    pub fn new(
        config: ExternalHookConfig,
        state_dir: Option<PathBuf>,
        model: &ModelConfig,
    ) -> Self {
        let label = config.label();
        let process = Program::new(&config.argv, &config.env, state_dir.clone());
        let runner = match config.run {
            HookRun::Model => Runner::Model(judge::ModelJudge::new(&config, model)),
            HookRun::Spawn if config.url.is_some() => {
                Runner::Http(http::HttpHook::new(&config).map(Box::new))
            }
            HookRun::Spawn => Runner::Spawn(process),
            HookRun::Server => Runner::Server(Server::new(
                &label,
                process,
                std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            )),
        };
        Self {
            name: format!("hook {label}"),
            label,
            commands: (!config.commands.is_empty()).then(|| CommandMatcher::new(&config.commands)),
            // The config was validated: a matcher that does not parse never gets here, and
            // would match nothing if it did.
            matcher: config
                .matcher
                .as_deref()
                .map(|m| ToolMatcher::parse(m).unwrap_or_else(|_| ToolMatcher::Names(Vec::new()))),
            runner,
            state_dir,
            model_fingerprint: format!("{model:?}"),
            config,
        }
    }

    /// The event it answers.
    pub fn event(&self) -> HookEvent {
        self.config.event
    }

    /// Whether the hook is asked about `call`: its tool matches one of `tools` (names or
    /// globs) and, with `commands`, a segment of its bash command matches one of them.
    fn applies_to(&self, call: &ToolExecution) -> bool {
        let tools = &self.config.tools;
        if !tools.is_empty() && !tools.iter().any(|t| glob_matches(t, &call.tool)) {
            return false;
        }
        if let Some(matcher) = &self.matcher
            && !matcher.matches(claude::tool_name(&call.tool))
        {
            return false;
        }
        match &self.commands {
            None => true,
            Some(matcher) => {
                call.tool == "bash"
                    && call
                        .judged()
                        .is_some_and(|(_, judgement)| matcher.matches(&judgement.segments))
            }
        }
    }

    /// Asks the program about one event: its answer, or (on any failure) a deny naming
    /// what went wrong, and how long it took.
    async fn consult(&self, input: EventInput<'_>) -> (Result<Answer, String>, u64) {
        let c = self.consult_raw(input).await;
        (c.answer, c.ms)
    }

    /// [`ExternalHook::consult`], keeping what the hook said as it said it.
    async fn consult_raw(&self, input: EventInput<'_>) -> Consulted {
        let started = Instant::now();
        let event = input.event;
        let json = match self.config.dialect {
            HookDialect::Dsh => protocol::input(self.config.protocol, &input),
            HookDialect::ClaudeCode => claude::input(&input),
        };
        let timeout = Duration::from_millis(self.config.timeout_ms);
        let reply: Result<Reply, String> = match &self.runner {
            Runner::Http(Err(why)) => Err(why.clone()),
            Runner::Http(Ok(endpoint)) => {
                endpoint.call(json.to_string().into_bytes(), timeout).await
            }
            Runner::Model(Err(why)) => Err(format!("model judge failed: {why}")),
            Runner::Model(Ok(judge)) => {
                // A judge reads dsh's own input (v2), whatever the dialect says.
                let input = protocol::input(crate::config::HookProtocol::V2, &input);
                let judged = judge
                    .judge(event, &input, input_session(&input), timeout)
                    .await;
                let mut answer = judged.answer.map_err(|e| e.to_string());
                if let Ok(a) = &mut answer
                    && judged.cached
                {
                    a.reason = format!("{} (cached)", a.reason);
                }
                return Consulted {
                    answer,
                    raw: judged.raw,
                    ms: started.elapsed().as_millis() as u64,
                };
            }
            Runner::Spawn(program) => {
                runner::spawn_once(
                    program,
                    input.cwd,
                    input.session_id,
                    event,
                    // Claude Code's scripts find their project by it; the session's cwd
                    // is dsh's nearest (a project's settings set their own first).
                    self.config.dialect == HookDialect::ClaudeCode,
                    json.to_string().as_bytes(),
                    timeout,
                )
                .await
            }
            Runner::Server(server) => server.call(event, json, timeout).await,
        };
        let raw = match &reply {
            Ok(Reply::Output(out)) => Some(String::from_utf8_lossy(out).into_owned()),
            Ok(Reply::Exit2(stderr)) => Some(format!("(exit code 2) {stderr}")),
            Err(_) => None,
        };
        let answer = reply.and_then(|r| match self.config.dialect {
            HookDialect::Dsh => protocol::answer(self.config.protocol, event, r),
            HookDialect::ClaudeCode => claude::reply(event, r),
        });
        Consulted {
            answer,
            raw,
            ms: started.elapsed().as_millis() as u64,
        }
    }

    fn session_log(&self, session: Option<&Arc<Session>>) -> Option<PathBuf> {
        let dir = self.state_dir.as_ref()?;
        crate::store::log_path(dir, &session?.id).ok()
    }

    /// The input of a tool event for `call` (with `result` after the tool ran).
    async fn consult_call(
        &self,
        event: HookEvent,
        call: &ToolExecution,
        result: Option<&ToolOutput>,
    ) -> (Result<Answer, String>, u64) {
        let log = self.session_log(call.session.as_ref());
        let daemon_cwd = daemon_cwd();
        let cwd = call.session.as_ref().map(|s| s.cwd.as_path());
        self.consult(EventInput {
            event,
            session_id: call.session_id(),
            cwd: cwd.unwrap_or(&daemon_cwd),
            mode: call.judged().map(|(mode, _)| mode),
            session_log: log.as_deref(),
            call: Some(call),
            result,
            prompt: None,
            source: None,
            stop_active: None,
            message: None,
        })
        .await
    }

    /// Asks the hook about one event outside any session (`dsh hooks test`): in `cwd`,
    /// about `call` (its result at post_tool) or `prompt`. Whether it applies to the call
    /// is the caller's to ask ([`ExternalHook::applies`]).
    pub async fn probe(
        &self,
        event: HookEvent,
        call: Option<&ToolExecution>,
        result: Option<&ToolOutput>,
        prompt: Option<&str>,
        cwd: &std::path::Path,
    ) -> Consulted {
        self.consult_raw(EventInput {
            event,
            session_id: None,
            cwd,
            mode: call.and_then(|c| c.judged()).map(|(mode, _)| mode),
            session_log: None,
            call,
            result,
            prompt,
            source: None,
            stop_active: None,
            message: None,
        })
        .await
    }

    /// Whether the hook is asked about `call` (its `tools`, `matcher` and `commands`).
    pub fn applies(&self, call: &ToolExecution) -> bool {
        self.applies_to(call)
    }

    /// Whether its word counts (`enforce`), or it is a shadow.
    pub fn enforced(&self) -> bool {
        self.config.enforce
    }

    /// Asks the program about an event of a session with no call in it (a prompt, the
    /// session's start or end, the turn's end, a notification).
    async fn consult_session(
        &self,
        event: HookEvent,
        session: &Arc<Session>,
        about: SessionEvent<'_>,
    ) -> Result<Answer, String> {
        let log = self.session_log(Some(session));
        self.consult(EventInput {
            event,
            session_id: Some(&session.id),
            cwd: &session.cwd,
            mode: Some(session.mode()),
            session_log: log.as_deref(),
            call: None,
            result: None,
            prompt: about.prompt,
            source: about.source,
            stop_active: about.stop_active,
            message: about.message,
        })
        .await
        .0
    }

    fn trace(&self, call: &ToolExecution, decision: TraceDecision, reason: &str, ms: u64) {
        call.record(TraceEntry {
            name: self.name.clone(),
            event: self.config.event,
            decision,
            reason: reason.into(),
            ms,
            enforced: self.config.enforce,
        });
    }

    fn context_source(&self) -> String {
        format!("hook:{}", self.label)
    }

    /// A hook with `enforce = false`: asked beside the call, never before it; what it
    /// says is traced and nothing else. A shadow still running when the call ends is
    /// stopped (dropping it kills its process group) and traced as unfinished.
    async fn shadow(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
        let event = self.config.event;
        // Only pre_tool hooks may be shadows (the config refuses others): a post_tool
        // shadow could only run after the call, holding up its result.
        let asked = async { Some(self.consult_call(event, call, None).await) };
        tokio::pin!(asked);
        let run = next.run(call);
        tokio::pin!(run);
        let mut said = None;
        let out = loop {
            tokio::select! {
                out = &mut run => break out,
                r = &mut asked, if said.is_none() => said = Some(r),
            }
        };
        let said = match said {
            Some(said) => said,
            None => tokio::time::timeout(Duration::ZERO, &mut asked)
                .await
                .ok()
                .flatten(),
        };
        let (decision, reason, ms) = match said {
            Some((Ok(answer), ms)) => {
                // Only pre_tool hooks may be shadows, so a permission reply never
                // comes here: it would be no opinion.
                let decision = match (answer.decision, &answer.rewrite, &answer.replace) {
                    (Some(d), _, _) => d.into(),
                    (None, Some(_), _) => TraceDecision::Rewrite,
                    (None, None, Some(_)) => TraceDecision::Replace,
                    _ => TraceDecision::NoOpinion,
                };
                (decision, answer.reason, ms)
            }
            Some((Err(why), ms)) => (TraceDecision::Deny, why, ms),
            None => (
                TraceDecision::Unfinished,
                "still running when the call ended".into(),
                0,
            ),
        };
        call.record(TraceEntry {
            name: self.name.clone(),
            event,
            decision,
            reason,
            ms,
            enforced: false,
        });
        out
    }

    /// A post_tool_failure hook: after a call that failed (an error result that is no
    /// veto, or a command that did not exit 0), its context reaches the model; a hook
    /// that fails is logged and adds nothing (the result is already a failure).
    async fn post_tool_failure(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
        let mut out = match next.run(call).await {
            Passed::Output(out) if !out.vetoed && failed(&out) => out,
            passed => return passed,
        };
        let (answer, ms) = self
            .consult_call(HookEvent::PostToolFailure, call, Some(&out))
            .await;
        match answer {
            Err(why) => {
                self.trace(
                    call,
                    TraceDecision::NoOpinion,
                    &format!("failed: {why}"),
                    ms,
                );
                tracing::warn!(hook = %self.name, "post_tool_failure hook failed: {why}");
            }
            Ok(answer) => {
                let said = if answer.context.is_some() {
                    TraceDecision::Context
                } else {
                    TraceDecision::NoOpinion
                };
                self.trace(call, said, &answer.reason, ms);
                if let Some(context) = answer.context {
                    out.context.push((self.context_source(), context));
                }
            }
        }
        out.into()
    }

    async fn post_tool(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
        let mut out = match next.run(call).await {
            Passed::Output(out) if !out.vetoed => out,
            passed => return passed,
        };
        let (answer, ms) = self
            .consult_call(HookEvent::PostTool, call, Some(&out))
            .await;
        let withhold = |out: &mut ToolOutput, why: &str| {
            // Fail closed: a hook meant to vet the result (redact a secret, say) that
            // fails must not let it through.
            out.original_text.get_or_insert_with(|| out.text.clone());
            out.text = format!("Error: result withheld by {}: {why}", self.name);
            out.is_error = true;
        };
        match answer {
            Err(why) => {
                self.trace(call, TraceDecision::Deny, &why, ms);
                withhold(&mut out, &why);
            }
            Ok(answer) => {
                let said = match (&answer.decision, &answer.replace, &answer.context) {
                    (Some(Decision::Deny), _, _) => TraceDecision::Deny,
                    (_, Some(_), _) => TraceDecision::Replace,
                    (_, None, Some(_)) => TraceDecision::Context,
                    _ => TraceDecision::NoOpinion,
                };
                self.trace(call, said, &answer.reason, ms);
                if answer.decision == Some(Decision::Deny) {
                    withhold(&mut out, &answer.reason);
                } else if let Some(text) = answer.replace {
                    out.original_text.get_or_insert_with(|| out.text.clone());
                    out.text = text;
                }
                if let Some(context) = answer.context {
                    out.context.push((self.context_source(), context));
                }
            }
        }
        out.into()
    }
}

#[async_trait::async_trait]
impl Hook for ExternalHook {
    fn name(&self) -> &str {
        &self.name
    }

    async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
        if !self.applies_to(call) {
            return next.run(call).await;
        }
        if !self.config.enforce {
            return self.shadow(call, next).await;
        }
        match self.config.event {
            HookEvent::PreTool => judge_together(&[self], call, next).await,
            HookEvent::PostTool => self.post_tool(call, next).await,
            HookEvent::PostToolFailure => self.post_tool_failure(call, next).await,
            _ => next.run(call).await,
        }
    }
}

/// Enforced pre_tool hooks asked about a call at once: one waterfall link. Their word
/// is combined as if asked one after another in config order, so the outcome never
/// depends on which answers first.
pub struct PreToolBatch {
    hooks: Vec<Arc<ExternalHook>>,
    name: String,
}

#[async_trait::async_trait]
impl Hook for PreToolBatch {
    fn name(&self) -> &str {
        &self.name
    }

    async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
        let hooks: Vec<&ExternalHook> = self.hooks.iter().map(|h| h.as_ref()).collect();
        judge_together(&hooks, call, next).await
    }
}

/// What a rewrite changes in the arguments its hook was asked about: each field set to
/// a new value (`Some`) or dropped (`None`). A rewrite is the whole new arguments, so a
/// field it leaves out is dropped; a field it repeats unchanged is no change.
type FieldChanges = Vec<(String, Option<serde_json::Value>)>;

fn field_changes(
    seen: &serde_json::Map<String, serde_json::Value>,
    proposed: &serde_json::Map<String, serde_json::Value>,
) -> FieldChanges {
    let set = proposed
        .iter()
        .filter(|(field, value)| seen.get(*field) != Some(value))
        .map(|(field, value)| (field.clone(), Some(value.clone())));
    let dropped = seen
        .keys()
        .filter(|field| !proposed.contains_key(*field))
        .map(|field| (field.clone(), None));
    set.chain(dropped).collect()
}

fn field_names(changes: &FieldChanges) -> String {
    changes
        .iter()
        .map(|(field, _)| format!("`{field}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Asks the `hooks` that apply to `call` at once and combines their answers in config
/// order, each as soon as every hook before it has answered:
///
/// - a failure or a deny vetoes there and then (the first in config order names it):
///   hooks still thinking are dropped, which kills their process groups;
/// - rewrites are merged field by field over each other in config order. A rewrite that
///   changes a field an earlier hook of the same round already changed was made from a
///   call that no longer stands: it is set aside (`rewrite_conflict`) and that hook and
///   every later one are asked again about the merged call. Rounds start ever later in
///   config order, so they end. The merged call then goes through the waterfall again,
///   from the start, and is judged by every hook anew;
/// - on that last pass (`!call.may_rewrite()`) a hook that still asks for a change is a
///   refusal (`rewrite_refused`): following it would need another pass, and ignoring it
///   could run what it exists to stop. A rewrite equal to the call is no rewrite;
/// - a rewrite that is not an object is refused;
/// - asks and allows tighten in config order, and contexts are added in config order
///   after the call ran.
async fn judge_together(hooks: &[&ExternalHook], call: &ToolExecution, next: Next<'_>) -> Passed {
    use futures::StreamExt;
    use serde_json::Value;
    let asked: Vec<&ExternalHook> = hooks
        .iter()
        .copied()
        .filter(|h| h.applies_to(call))
        .collect();
    if asked.is_empty() {
        return next.run(call).await;
    }
    let original = call.arguments.as_object().cloned().unwrap_or_default();
    let mut merged = original.clone();
    let mut tighten = Vec::new();
    let mut contexts = Vec::new();
    // The first hook (in config order) of the current round: the round asks it and every
    // later one about `merged` as it stood when the round began.
    let mut start = 0;
    'rounds: loop {
        let seen = merged.clone();
        let view = (seen != original).then(|| call.asking_about(Value::Object(seen.clone())));
        let about = view.as_ref().unwrap_or(call);
        let mut pending: futures::stream::FuturesUnordered<_> = asked
            .iter()
            .enumerate()
            .skip(start)
            .map(|(i, hook)| async move {
                (i, hook.consult_call(HookEvent::PreTool, about, None).await)
            })
            .collect();
        let mut answers: Vec<Option<(Result<Answer, String>, u64)>> =
            asked.iter().map(|_| None).collect();
        // The fields this round's rewrites changed so far, and which hook changed each.
        let mut changed_by: std::collections::HashMap<String, &str> = Default::default();
        for (k, hook) in asked.iter().enumerate().skip(start) {
            let (answer, ms) = loop {
                if let Some(answered) = answers[k].take() {
                    break answered;
                }
                match pending.next().await {
                    Some((i, answered)) => answers[i] = Some(answered),
                    // Every hook from `start` on is pending until its answer is taken.
                    None => break (Err("gave no answer".into()), 0),
                }
            };
            let answer = match answer {
                Ok(a) => a,
                Err(why) => {
                    hook.trace(call, TraceDecision::Deny, &why, ms);
                    return call.veto(&hook.name, &why).into();
                }
            };
            // A deny stands, whatever else the answer holds: a rewrite must not carry a
            // call past its own hook's refusal.
            if answer.decision == Some(Decision::Deny) {
                hook.trace(call, TraceDecision::Deny, &answer.reason, ms);
                return call.veto(&hook.name, &answer.reason).into();
            }
            if let Some(arguments) = &answer.rewrite {
                if !arguments.is_object() {
                    let why = "its rewrite is not an object of arguments";
                    hook.trace(call, TraceDecision::Deny, why, ms);
                    return call.veto(&hook.name, why).into();
                }
                let proposed = match hook.config.dialect {
                    HookDialect::ClaudeCode => {
                        claude::rewrite_arguments(&call.tool, &about.arguments, arguments)
                    }
                    HookDialect::Dsh => arguments.clone(),
                };
                let proposed = proposed.as_object().cloned().unwrap_or_default();
                let changes = field_changes(&seen, &proposed);
                if !changes.is_empty() {
                    if !call.may_rewrite() {
                        let why = format!(
                            "still asks to change {} of the rewritten call: refused, since a \
                             call is rewritten once and running it would ignore the hook",
                            field_names(&changes)
                        );
                        hook.trace(call, TraceDecision::RewriteRefused, &why, ms);
                        return call.veto(&hook.name, &why).into();
                    }
                    let stale = changes.iter().find_map(|(field, value)| {
                        let by = changed_by.get(field)?;
                        (merged.get(field) != value.as_ref()).then(|| (field.clone(), *by))
                    });
                    if let Some((field, by)) = stale {
                        hook.trace(
                            call,
                            TraceDecision::RewriteConflict,
                            &format!(
                                "changed `{field}` from the call before {by}'s rewrite of it; \
                                 asked again about the merged call"
                            ),
                            ms,
                        );
                        start = k;
                        continue 'rounds;
                    }
                    for (field, value) in changes {
                        changed_by.insert(field.clone(), &hook.name);
                        match value {
                            Some(value) => merged.insert(field, value),
                            None => merged.remove(&field),
                        };
                    }
                    hook.trace(call, TraceDecision::Rewrite, &answer.reason, ms);
                    // The rewritten call is judged again from the start, this hook too.
                    continue;
                }
            }
            hook.trace(call, answer.decision.into(), &answer.reason, ms);
            if let Some(d) = answer.decision {
                tighten.push((d, hook.name.clone(), answer.reason.clone()));
            }
            if let Some(context) = answer.context {
                contexts.push((hook.context_source(), context));
            }
        }
        break;
    }
    if merged != original {
        // The call runs again, from the start, with the merged arguments
        // (`Waterfall::execute`); this pass ends here.
        return Passed::Rewrite(Value::Object(merged));
    }
    for (decision, by, reason) in tighten {
        call.tighten(decision, &by, &reason, Vec::new());
    }
    let mut out = match next.run(call).await {
        Passed::Output(out) => out,
        rewrite @ Passed::Rewrite(_) => return rewrite,
    };
    if !out.vetoed {
        out.context.extend(contexts);
    }
    out.into()
}

/// A program name as `exec` would find it: a path as given, else the first match in PATH.
fn resolve_program(program: &str) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(program))
                .find(|p| p.is_file())
                .unwrap_or_else(|| PathBuf::from(program))
        })
        .unwrap_or_else(|| PathBuf::from(program))
}

/// Whether a call failed, for post_tool_failure: an error result, or a foreground
/// command that did not exit 0 (a signal, a timeout).
fn failed(out: &ToolOutput) -> bool {
    out.is_error
        || out
            .exit
            .is_some_and(|e| e.exit_code != Some(0) || e.signal.is_some() || e.timed_out)
}

/// The session an input names.
fn input_session(input: &serde_json::Value) -> Option<&str> {
    input.get("sessionId").and_then(|s| s.as_str())
}

fn daemon_cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_globs() {
        assert!(glob_matches("bash", "bash"));
        assert!(!glob_matches("bash", "bash_output"));
        assert!(glob_matches("bash*", "bash_output"));
        assert!(glob_matches("mcp__*", "mcp__github__create_issue"));
        assert!(glob_matches("mcp__github__*", "mcp__github__x"));
        assert!(!glob_matches("mcp__github__*", "mcp__gitlab__x"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("b?sh", "bash"));
        assert!(glob_matches("*_kill", "bash_kill"));
    }
}
