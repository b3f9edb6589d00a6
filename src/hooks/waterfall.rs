//! The `tools/execute` waterfall: an ordered chain of around-middleware hooks
//! that every tool call passes through before (and instead of) the tool.
//!
//! A hook gets the call and a [`Next`]; it may run the rest of the chain
//! (delegate), return without doing so (veto: an error result saying who vetoed
//! and why), or just watch. Hooks that judge record their decision on the call
//! with [`ToolExecution::tighten`], which only ever raises it (deny > ask > allow), so
//! a later hook can tighten but never loosen an earlier decision.

use crate::config::{Decision, Mode};
use crate::exec::{OutputStream, OutputWatch};
use crate::policy::{Grant, Judgement};
use crate::registry::{PermissionAnswer, Session};
use std::sync::{Arc, Mutex, RwLock};
use tokio_util::sync::CancellationToken;

/// One tool call on its way through the waterfall.
pub struct ToolExecution {
    /// The model's (or client's) id for this call.
    pub call_id: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    /// The calling session; `None` for a call made outside any session.
    pub session: Option<Arc<Session>>,
    /// Cancelled when the caller gives up (session/cancel, connection closed).
    pub cancel: CancellationToken,
    verdict: Mutex<Verdict>,
    /// Who shows this call while it runs; `None` when nobody does.
    watcher: Option<Arc<dyn CallWatcher>>,
    /// Everyone who spoke about the call, in order (the audit line's `trace`).
    trace: Mutex<Vec<TraceEntry>>,
    /// The arguments the caller gave, when these are a hook's rewrite of them.
    pub original_arguments: Option<serde_json::Value>,
    /// The policy's judgement and the mode it judged in, once the policy hook ran: hooks
    /// see its segments, the audit line its mode.
    judged: Mutex<Option<(Mode, Arc<Judgement>)>>,
    /// The session's grants the policy judged with (the audit line keeps them, so a
    /// replay judges as the call was judged).
    grants_used: Mutex<Vec<Grant>>,
    /// Made by dsh itself ([`ToolExecution::internal`]), not by a model or a client.
    internal: bool,
    /// The wrapped agent whose permission question this call is (`[[agents]]` name),
    /// `None` for dsh's own calls: the audit line names it.
    pub agent: Option<String>,
    /// The wrapped agent's own name for the tool (Claude Code's `Bash` for a call judged
    /// as `bash`): a rule naming it judges the call too, and can only tighten it.
    pub agent_tool: Option<String>,
}

/// One decider's word on a call (a rule set, a hook or the person), as the audit line
/// keeps it.
pub use crate::policy::audit::{TraceDecision, TraceEntry};

/// Watches a call for whoever shows it live (the turn loop): the moment the tool starts,
/// once every hook and the person have let it through, and its output as it comes.
/// Both are called on the tool's own task and must not block.
pub trait CallWatcher: Send + Sync {
    /// The tool starts running.
    fn running(&self);
    /// A chunk of the command's output, as the executor read it.
    fn output(&self, stream: OutputStream, bytes: &[u8]);
    /// A hook rewrote the call: these arguments are what will run.
    fn rewritten(&self, _arguments: &serde_json::Value) {}
}

/// What the hooks decided about a call so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    /// The hook (or `user`) whose decision stands; `None` while nothing has decided
    /// (the starting allow, which any decider's word replaces).
    pub decided_by: Option<String>,
    pub reason: String,
    /// What an "allow always" answer would grant (from the policy).
    pub grants: Vec<Grant>,
    /// The user's answer, when the call was asked about.
    pub answer: Option<PermissionAnswer>,
    /// The ask stands only because of the mode's default (no rule, hook or opaque
    /// segment asked): the one kind of ask a `permission` hook may answer.
    pub ask_from_mode_default: bool,
}

impl Verdict {
    /// Who decided, as lines and hooks name it: `default` while nothing has.
    pub fn decider(&self) -> &str {
        self.decided_by.as_deref().unwrap_or("default")
    }
}

impl ToolExecution {
    /// A call that nothing has judged yet: allowed until a hook says otherwise.
    pub fn new(
        call_id: impl Into<String>,
        tool: impl Into<String>,
        arguments: serde_json::Value,
        session: Option<Arc<Session>>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            tool: tool.into(),
            arguments,
            session,
            cancel,
            verdict: Mutex::new(Verdict {
                decision: Decision::Allow,
                decided_by: None,
                reason: String::new(),
                grants: Vec::new(),
                answer: None,
                ask_from_mode_default: false,
            }),
            watcher: None,
            trace: Mutex::new(Vec::new()),
            original_arguments: None,
            judged: Mutex::new(None),
            grants_used: Mutex::new(Vec::new()),
            internal: false,
            agent: None,
            agent_tool: None,
        }
    }

    /// The same call, as a wrapped agent's question ([`ToolExecution::agent`]).
    pub fn by_agent(mut self, agent: &str) -> Self {
        self.agent = Some(agent.to_string());
        self
    }

    /// The same call, which the wrapped agent names `tool` ([`ToolExecution::agent_tool`]).
    pub fn named_by_agent(mut self, tool: &str) -> Self {
        self.agent_tool = Some(tool.to_string());
        self
    }

    /// A call dsh makes itself (the `network` tool's, for a connection a sandboxed
    /// command asks for): the only way to call an internal tool.
    pub fn internal(
        call_id: impl Into<String>,
        tool: impl Into<String>,
        arguments: serde_json::Value,
        session: Option<Arc<Session>>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            internal: true,
            ..Self::new(call_id, tool, arguments, session, cancel)
        }
    }

    /// Whether dsh made this call itself ([`ToolExecution::internal`]).
    pub fn is_internal(&self) -> bool {
        self.internal
    }

    /// The same call with a hook's `arguments` in place of the caller's: it goes through
    /// the waterfall again from the start, and cannot be rewritten again. The trace so
    /// far carries over.
    pub fn rewritten(&self, arguments: serde_json::Value) -> Self {
        let mut call = ToolExecution::new(
            self.call_id.clone(),
            self.tool.clone(),
            arguments,
            self.session.clone(),
            self.cancel.clone(),
        );
        call.watcher = self.watcher.clone();
        call.internal = self.internal;
        call.agent = self.agent.clone();
        call.agent_tool = self.agent_tool.clone();
        call.original_arguments = Some(self.arguments.clone());
        *lock(&call.trace) = self.trace();
        call
    }

    /// The call as it would read with `arguments`, for asking a batch's hooks again about
    /// their merged rewrite before it is sent round: the same id, tool, session, verdict
    /// and policy judgement, no watcher and a trace of its own (the asker records on the
    /// real call). It never runs: the merged call runs only as [`Passed::Rewrite`].
    pub fn asking_about(&self, arguments: serde_json::Value) -> Self {
        let call = ToolExecution {
            internal: self.internal,
            agent: self.agent.clone(),
            agent_tool: self.agent_tool.clone(),
            original_arguments: self.original_arguments.clone(),
            ..ToolExecution::new(
                self.call_id.clone(),
                self.tool.clone(),
                arguments,
                self.session.clone(),
                self.cancel.clone(),
            )
        };
        *lock(&call.verdict) = self.verdict();
        *lock(&call.judged) = self.judged();
        *lock(&call.grants_used) = self.grants_used();
        call
    }

    /// Whether a hook may rewrite the call ([`Passed::Rewrite`]): not when the call is
    /// itself a rewrite.
    pub fn may_rewrite(&self) -> bool {
        self.original_arguments.is_none()
    }

    /// Keeps the policy's judgement of the call (the policy hook does).
    pub fn set_judged(&self, mode: Mode, grants: Vec<Grant>, judgement: Arc<Judgement>) {
        *lock(&self.judged) = Some((mode, judgement));
        *lock(&self.grants_used) = grants;
    }

    /// The grants the policy judged the call with.
    pub fn grants_used(&self) -> Vec<Grant> {
        lock(&self.grants_used).clone()
    }

    /// The policy's judgement of the call and the mode it judged in, once judged.
    pub fn judged(&self) -> Option<(Mode, Arc<Judgement>)> {
        lock(&self.judged).clone()
    }

    /// Adds a decider's word to the trace.
    pub fn record(&self, entry: TraceEntry) {
        lock(&self.trace).push(entry);
    }

    /// Everyone who spoke so far.
    pub fn trace(&self) -> Vec<TraceEntry> {
        lock(&self.trace).clone()
    }

    /// The same call, shown live by `watcher`.
    pub fn watched_by(mut self, watcher: Arc<dyn CallWatcher>) -> Self {
        self.watcher = Some(watcher);
        self
    }

    /// Tells the watcher the tool starts: the waterfall let the call through.
    pub fn report_running(&self) {
        if let Some(w) = &self.watcher {
            w.running();
        }
    }

    /// Tells the watcher the call now runs with a hook's rewrite of its arguments.
    pub fn report_rewrite(&self) {
        if let Some(w) = &self.watcher {
            w.rewritten(&self.arguments);
        }
    }

    /// What a tool hands the executor so the watcher sees the output as it comes;
    /// `None` when nobody watches, which costs the executor nothing.
    pub fn output_watch(&self) -> Option<OutputWatch> {
        let watcher = self.watcher.clone()?;
        Some(Arc::new(move |stream, bytes: &[u8]| {
            watcher.output(stream, bytes)
        }))
    }

    /// The calling session's id.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_ref().map(|s| s.id.as_str())
    }

    /// Raises the decision to `decision` if it is stronger than the current one;
    /// a weaker or equal decision changes nothing (a hook cannot loosen).
    pub fn tighten(&self, decision: Decision, by: &str, reason: &str, grants: Vec<Grant>) {
        self.tighten_as(decision, by, reason, grants, false);
    }

    /// [`ToolExecution::tighten`] by the policy, saying whether an ask comes only from
    /// the mode's default. Any other ask makes the call's ask explicit for good.
    pub fn tighten_as(
        &self,
        decision: Decision,
        by: &str,
        reason: &str,
        grants: Vec<Grant>,
        from_mode_default: bool,
    ) {
        let mut v = self.lock();
        if decision == Decision::Ask {
            v.ask_from_mode_default = if v.decision == Decision::Ask && v.decided_by.is_some() {
                v.ask_from_mode_default && from_mode_default
            } else {
                from_mode_default
            };
        }
        if decision > v.decision || (v.decided_by.is_none() && decision == v.decision) {
            v.decision = decision;
            v.decided_by = Some(by.to_string());
            v.reason = reason.to_string();
            if decision == Decision::Ask {
                v.grants = grants;
            }
        } else if decision == Decision::Ask && v.decision == Decision::Ask {
            // Two askers: an allow-always answer must cover what both asked about.
            for g in grants {
                if !v.grants.contains(&g) {
                    v.grants.push(g);
                }
            }
        }
    }

    /// Records the user's answer to an ask.
    pub fn record_answer(&self, answer: PermissionAnswer) {
        let mut v = self.lock();
        v.answer = Some(answer);
        v.decided_by = Some("user".into());
    }

    /// The decision so far.
    pub fn verdict(&self) -> Verdict {
        self.lock().clone()
    }

    /// Ends the call with a veto by `hook`: an error result that says who and why.
    pub fn veto(&self, hook: &str, reason: &str) -> ToolOutput {
        {
            let mut v = self.lock();
            v.decision = Decision::Deny;
            v.decided_by = Some(hook.to_string());
            v.reason = reason.to_string();
        }
        ToolOutput {
            text: format!("Error: vetoed by {hook}: {reason}"),
            is_error: true,
            vetoed: true,
            ..ToolOutput::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Verdict> {
        lock(&self.verdict)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves nothing half-done that matters more
    // than the call itself.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The result of a tool call as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolOutput {
    pub text: String,
    /// Only infrastructure failures, invalid arguments and vetoes (T5).
    pub is_error: bool,
    /// The waterfall stopped the call before the tool ran.
    pub vetoed: bool,
    /// How the command ended, when the tool ran one in the foreground: for displays
    /// (a terminal's exit) and hooks that want more than the text.
    pub exit: Option<CommandExit>,
    /// The tool's own text when a post_tool hook replaced it (kept in the session log
    /// and the audit line; the model and the editor see `text`).
    pub original_text: Option<String>,
    /// What hooks added for the model, seen right after the result: (source, text).
    pub context: Vec<(String, String)>,
    /// The arguments that ran, when a hook rewrote the caller's.
    pub arguments_run: Option<serde_json::Value>,
    /// The files that hold output the text names as truncated or dropped (T6, T9): data
    /// for hooks and the history, so nobody reads a path back out of the text.
    pub spills: Vec<std::path::PathBuf>,
    /// For a file tool the sandbox refused: the layout entry that refused it (issue 39),
    /// for the audit line.
    pub containment: Option<crate::containment::Containment>,
    /// The background task a `bash` call started, as data: a wrapped agent's terminal
    /// is that task (`wrap/client.rs`), so nobody reads the id back out of the text.
    pub task: Option<crate::exec::TaskId>,
}

/// How a foreground command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommandExit {
    /// The exit code, when the main process exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended the main process.
    pub signal: Option<i32>,
    pub timed_out: bool,
}

impl ToolOutput {
    /// A normal result.
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// An error result; the text starts with `Error: ` as every error does (T1).
    pub fn error(message: impl std::fmt::Display) -> Self {
        Self {
            text: format!("Error: {message}"),
            is_error: true,
            ..Self::default()
        }
    }
}

/// What a link hands back up the chain: the call's output, or a pre_tool hook's rewrite
/// of its arguments. A rewrite ends the pass (nothing below it ran); the outer links see
/// it as this variant, and [`Waterfall::execute`] alone acts on it, sending the call
/// through once more from the start.
#[derive(Debug, Clone, PartialEq)]
pub enum Passed {
    /// The call ended here or below.
    Output(ToolOutput),
    /// Run the call again with these arguments.
    Rewrite(serde_json::Value),
}

impl From<ToolOutput> for Passed {
    fn from(out: ToolOutput) -> Self {
        Passed::Output(out)
    }
}

/// One link of the waterfall.
#[async_trait::async_trait]
pub trait Hook: Send + Sync {
    /// Named in vetoes and the audit log.
    fn name(&self) -> &str;
    /// Handles the call: run `next` to delegate, or return without it to veto.
    async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> Passed;
}

/// What the waterfall ends in: the tool itself.
#[async_trait::async_trait]
pub trait Terminal: Send + Sync {
    async fn execute(&self, call: &ToolExecution) -> ToolOutput;
}

/// Where a chain ends: the tool, or (for links a session adds) the rest of the chain
/// those links were put in.
#[async_trait::async_trait]
trait Tail: Send + Sync {
    async fn finish(&self, call: &ToolExecution) -> Passed;
}

/// The tool as a chain's end.
struct ToolEnd<'a>(&'a dyn Terminal);

#[async_trait::async_trait]
impl Tail for ToolEnd<'_> {
    async fn finish(&self, call: &ToolExecution) -> Passed {
        self.0.execute(call).await.into()
    }
}

/// The rest of the chain after the current hook.
pub struct Next<'a> {
    hooks: &'a [Arc<dyn Hook>],
    tail: &'a dyn Tail,
}

impl Next<'_> {
    /// Runs the remaining hooks and then the tool.
    pub async fn run(self, call: &ToolExecution) -> Passed {
        match self.hooks.split_first() {
            Some((hook, rest)) => {
                hook.handle(
                    call,
                    Next {
                        hooks: rest,
                        tail: self.tail,
                    },
                )
                .await
            }
            None => self.tail.finish(call).await,
        }
    }

    /// Runs `hooks` first and then the rest of this chain: links a session adds to the
    /// shared chain (a trusted project's hooks) without a chain of its own.
    pub async fn through(self, hooks: &[Arc<dyn Hook>], call: &ToolExecution) -> Passed {
        let rest = Rest(Mutex::new(Some(self)));
        Next { hooks, tail: &rest }.run(call).await
    }
}

/// The rest of a chain as the end of an inner one ([`Next::through`]); it runs once.
struct Rest<'a>(Mutex<Option<Next<'a>>>);

#[async_trait::async_trait]
impl Tail for Rest<'_> {
    async fn finish(&self, call: &ToolExecution) -> Passed {
        let next = lock(&self.0).take();
        match next {
            Some(next) => next.run(call).await,
            // An inner hook can only run its `next` once (it is moved), so this is
            // unreachable; a call that got here anyway must not run.
            None => call
                .veto("waterfall", "the rest of the chain already ran")
                .into(),
        }
    }
}

/// The ordered chain of hooks.
#[derive(Default)]
pub struct Waterfall {
    hooks: RwLock<Arc<Vec<Arc<dyn Hook>>>>,
}

impl Waterfall {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a hook: it runs after those already registered.
    pub fn push(&self, hook: Arc<dyn Hook>) {
        self.update(|hooks| hooks.push(hook));
    }

    /// Puts a hook before all others.
    pub fn put_first(&self, hook: Arc<dyn Hook>) {
        self.update(|hooks| hooks.insert(0, hook));
    }

    /// Replaces every hook at once: calls already running finish with the chain they
    /// started with.
    pub fn replace(&self, hooks: Vec<Arc<dyn Hook>>) {
        self.update(|all| *all = hooks);
    }

    /// The names of the hooks, in order.
    pub fn names(&self) -> Vec<String> {
        self.snapshot()
            .iter()
            .map(|h| h.name().to_string())
            .collect()
    }

    /// Runs `call` through every hook and then `terminal`. The chain is a
    /// snapshot: hooks added meanwhile apply to later calls.
    pub async fn run(&self, call: &ToolExecution, terminal: &dyn Terminal) -> Passed {
        let hooks = self.snapshot();
        Next {
            hooks: &hooks,
            tail: &ToolEnd(terminal),
        }
        .run(call)
        .await
    }

    /// Runs a call through the chain and the tool, the one place a rewrite is acted on:
    /// the call goes through again from the start with the new arguments, once (a
    /// rewritten call cannot be rewritten again). Its output, and the rewritten call
    /// when there was one (whose trace and verdict are the ones that stood).
    pub async fn execute(
        &self,
        call: &ToolExecution,
        terminal: &dyn Terminal,
    ) -> (ToolOutput, Option<ToolExecution>) {
        let arguments = match self.run(call, terminal).await {
            Passed::Output(out) => return (out, None),
            Passed::Rewrite(arguments) => arguments,
        };
        let again = call.rewritten(arguments);
        again.report_rewrite();
        let mut out = match self.run(&again, terminal).await {
            Passed::Output(out) => out,
            // A hook that rewrote a rewrite without asking (`may_rewrite`) is refused.
            Passed::Rewrite(_) => again.veto("waterfall", "a rewritten call was rewritten again"),
        };
        out.arguments_run = Some(again.arguments.clone());
        (out, Some(again))
    }

    fn snapshot(&self) -> Arc<Vec<Arc<dyn Hook>>> {
        self.hooks.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn update(&self, f: impl FnOnce(&mut Vec<Arc<dyn Hook>>)) {
        let mut guard = self.hooks.write().unwrap_or_else(|p| p.into_inner());
        let mut hooks: Vec<Arc<dyn Hook>> = guard.as_ref().clone();
        f(&mut hooks);
        *guard = Arc::new(hooks);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tag(&'static str, Arc<Mutex<Vec<String>>>, bool);

    #[async_trait::async_trait]
    impl Hook for Tag {
        fn name(&self) -> &str {
            self.0
        }
        async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
            self.1.lock().unwrap().push(format!("{} in", self.0));
            if self.2 {
                return call.veto(self.0, "said no").into();
            }
            let out = next.run(call).await;
            self.1.lock().unwrap().push(format!("{} out", self.0));
            out
        }
    }

    struct Echo;

    #[async_trait::async_trait]
    impl Terminal for Echo {
        async fn execute(&self, _call: &ToolExecution) -> ToolOutput {
            ToolOutput::ok("ran")
        }
    }

    fn call() -> ToolExecution {
        ToolExecution::new(
            "c1",
            "bash",
            serde_json::json!({}),
            None,
            CancellationToken::new(),
        )
    }

    #[tokio::test]
    async fn hooks_run_in_order_around_the_tool_and_put_first_goes_first() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let w = Waterfall::new();
        w.push(Arc::new(Tag("a", log.clone(), false)));
        w.push(Arc::new(Tag("b", log.clone(), false)));
        w.put_first(Arc::new(Tag("first", log.clone(), false)));
        assert_eq!(w.names(), ["first", "a", "b"]);
        let out = w.execute(&call(), &Echo).await.0;
        assert_eq!(out, ToolOutput::ok("ran"));
        assert_eq!(
            *log.lock().unwrap(),
            ["first in", "a in", "b in", "b out", "a out", "first out"]
        );
    }

    #[tokio::test]
    async fn a_veto_stops_the_chain_and_says_who_and_why() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let w = Waterfall::new();
        w.push(Arc::new(Tag("a", log.clone(), false)));
        w.push(Arc::new(Tag("guard", log.clone(), true)));
        w.push(Arc::new(Tag("never", log.clone(), false)));
        let c = call();
        let out = w.execute(&c, &Echo).await.0;
        assert!(out.is_error && out.vetoed);
        assert_eq!(out.text, "Error: vetoed by guard: said no");
        assert_eq!(*log.lock().unwrap(), ["a in", "guard in", "a out"]);
        assert_eq!(c.verdict().decision, Decision::Deny);
        assert_eq!(c.verdict().decider(), "guard");
    }

    #[tokio::test]
    async fn through_runs_inner_hooks_then_the_rest_of_the_chain() {
        struct Inner(Vec<Arc<dyn Hook>>);
        #[async_trait::async_trait]
        impl Hook for Inner {
            fn name(&self) -> &str {
                "inner"
            }
            async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
                next.through(&self.0, call).await
            }
        }
        let log = Arc::new(Mutex::new(Vec::new()));
        let w = Waterfall::new();
        w.push(Arc::new(Tag("a", log.clone(), false)));
        w.push(Arc::new(Inner(vec![
            Arc::new(Tag("x", log.clone(), false)),
            Arc::new(Tag("y", log.clone(), false)),
        ])));
        w.push(Arc::new(Tag("b", log.clone(), false)));
        assert_eq!(w.execute(&call(), &Echo).await.0, ToolOutput::ok("ran"));
        assert_eq!(
            *log.lock().unwrap(),
            [
                "a in", "x in", "y in", "b in", "b out", "y out", "x out", "a out"
            ]
        );
        // An inner veto stops the outer rest too.
        log.lock().unwrap().clear();
        let w = Waterfall::new();
        w.push(Arc::new(Inner(vec![Arc::new(Tag(
            "no",
            log.clone(),
            true,
        ))])));
        w.push(Arc::new(Tag("never", log.clone(), false)));
        assert!(w.execute(&call(), &Echo).await.0.vetoed);
        assert_eq!(*log.lock().unwrap(), ["no in"]);
    }

    #[test]
    fn tighten_never_loosens() {
        let c = call();
        c.tighten(Decision::Ask, "policy", "unmatched", vec![]);
        c.tighten(Decision::Allow, "hook", "fine", vec![]);
        assert_eq!(c.verdict().decision, Decision::Ask);
        assert_eq!(c.verdict().decider(), "policy");
        c.tighten(Decision::Deny, "hook", "no", vec![]);
        c.tighten(Decision::Ask, "other", "hm", vec![]);
        assert_eq!(c.verdict().decision, Decision::Deny);
        assert_eq!(c.verdict().decider(), "hook");
    }

    /// A rewrite is what a link returns, and only `execute` acts on it: the pass that
    /// asked ends (the tool does not run in it), the call goes through again from the
    /// start with the new arguments, and a second rewrite is refused.
    #[tokio::test]
    async fn a_rewrite_ends_the_pass_and_the_call_runs_again_once() {
        struct Rewriter(bool);
        #[async_trait::async_trait]
        impl Hook for Rewriter {
            fn name(&self) -> &str {
                "rewriter"
            }
            async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
                // `self.0`: rewrite even a rewritten call (a hook that does not ask).
                if self.0 || call.may_rewrite() {
                    return Passed::Rewrite(serde_json::json!({"command": "safe"}));
                }
                next.run(call).await
            }
        }
        struct Arguments;
        #[async_trait::async_trait]
        impl Terminal for Arguments {
            async fn execute(&self, call: &ToolExecution) -> ToolOutput {
                ToolOutput::ok(call.arguments.to_string())
            }
        }
        let log = Arc::new(Mutex::new(Vec::new()));
        let w = Waterfall::new();
        w.push(Arc::new(Tag("outer", log.clone(), false)));
        w.push(Arc::new(Rewriter(false)));
        let first = call();
        assert!(matches!(
            w.run(&first, &Arguments).await,
            Passed::Rewrite(_)
        ));
        let (out, again) = w.execute(&first, &Arguments).await;
        assert_eq!(out.text, r#"{"command":"safe"}"#);
        assert_eq!(
            out.arguments_run,
            Some(serde_json::json!({"command": "safe"}))
        );
        let again = again.expect("the rewritten call");
        assert_eq!(again.original_arguments, Some(serde_json::json!({})));
        let w = Waterfall::new();
        w.push(Arc::new(Rewriter(true)));
        let (out, _) = w.execute(&call(), &Arguments).await;
        assert!(out.vetoed, "{out:?}");
    }
}
