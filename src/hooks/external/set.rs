//! [`HookSet`]: every configured hook, for the events outside the waterfall (the
//! permission gate, the turn and the session's life) and the lifecycle of hook servers.

use super::*;

/// Every configured hook, for the events outside the waterfall and the lifecycle of
/// hook servers.
#[derive(Default)]
pub struct HookSet {
    hooks: Vec<Arc<ExternalHook>>,
    /// `[hooks] max_continues`: how often the stop hooks may send a turn on.
    max_continues: u32,
}

impl HookSet {
    /// The hooks of `configs`, in order, under `config` (session logs in its state
    /// directory, model judges asking its `[model]`).
    pub fn new(configs: &[ExternalHookConfig], config: &Config) -> Self {
        // Nothing to reuse: every hook is made new.
        Self::reusing(configs, config, &HookSet::default())
    }

    /// The hooks of `configs` under `config`, keeping those of `old` whose config is the
    /// same (a hook server keeps running across a reload that did not change it).
    pub fn reusing(configs: &[ExternalHookConfig], config: &Config, old: &HookSet) -> Self {
        let state_dir = Some(config.exec.state_dir());
        let model = format!("{:?}", config.model);
        Self {
            hooks: configs
                .iter()
                .map(|c| {
                    old.hooks
                        .iter()
                        .find(|h| {
                            h.config == *c
                                && h.state_dir == state_dir
                                && (c.run != HookRun::Model || h.model_fingerprint == model)
                        })
                        .cloned()
                        .unwrap_or_else(|| {
                            Arc::new(ExternalHook::new(
                                c.clone(),
                                state_dir.clone(),
                                &config.model,
                            ))
                        })
                })
                .collect(),
            max_continues: config.hooks.max_continues,
        }
    }

    /// `first`'s hooks, then `then`'s: a session's set when its project adds hooks.
    pub fn joined(first: &HookSet, then: &HookSet) -> Self {
        Self {
            hooks: first.hooks.iter().chain(&then.hooks).cloned().collect(),
            max_continues: first.max_continues,
        }
    }

    /// Whether it holds no hook at all.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Stops the servers of the hooks `now` does not keep (after a reload).
    pub async fn stop_servers_not_in(&self, now: &HookSet) {
        for hook in &self.hooks {
            if now.hooks.iter().any(|h| Arc::ptr_eq(h, hook)) {
                continue;
            }
            if let Runner::Server(server) = &hook.runner {
                server.stop().await;
            }
        }
    }

    /// The waterfall's links: the enforced pre_tool hooks in batches asked at once (a
    /// hook with `sequential = true` starts a new batch, after the ones before it), then
    /// the shadows and the post_tool hooks, each in config order.
    pub fn waterfall_hooks(&self) -> Vec<Arc<dyn Hook>> {
        let mut links: Vec<Arc<dyn Hook>> = Vec::new();
        let mut others: Vec<Arc<dyn Hook>> = Vec::new();
        let mut batch: Vec<Arc<ExternalHook>> = Vec::new();
        let flush = |batch: &mut Vec<Arc<ExternalHook>>, links: &mut Vec<Arc<dyn Hook>>| match batch
            .len()
        {
            0 => {}
            1 => links.push(batch.remove(0)),
            _ => {
                let names: Vec<&str> = batch.iter().map(|h| h.label.as_str()).collect();
                let name = format!("hooks {}", names.join(" + "));
                links.push(Arc::new(PreToolBatch {
                    hooks: std::mem::take(batch),
                    name,
                }));
            }
        };
        for hook in &self.hooks {
            match hook.event() {
                HookEvent::PreTool if hook.config.enforce => {
                    if hook.config.sequential {
                        flush(&mut batch, &mut links);
                    }
                    batch.push(hook.clone());
                }
                HookEvent::PreTool | HookEvent::PostTool | HookEvent::PostToolFailure => {
                    others.push(hook.clone())
                }
                _ => {}
            }
        }
        flush(&mut batch, &mut links);
        links.extend(others);
        links
    }

    /// Every hook of `event`, shadows included, in config order.
    pub fn of_event(&self, event: HookEvent) -> impl Iterator<Item = &Arc<ExternalHook>> {
        self.hooks.iter().filter(move |h| h.event() == event)
    }

    /// The enforced hooks of `event` outside the waterfall (a shadow of a prompt or a
    /// session's start would have nothing to record its word in).
    fn of(&self, event: HookEvent) -> impl Iterator<Item = &Arc<ExternalHook>> {
        self.hooks.iter().filter(move |h| {
            h.event() == event && (h.config.enforce || event == HookEvent::Permission)
        })
    }

    /// Starts every hook server (the daemon does, at startup); one that cannot start is
    /// logged and tried again on its first call.
    pub async fn start_servers(&self) {
        for hook in &self.hooks {
            if let Runner::Server(server) = &hook.runner
                && let Err(e) = server.start().await
            {
                tracing::warn!(hook = %hook.name, "cannot start the hook server: {e}");
            }
        }
    }

    /// Stops every hook server and what it started (daemon shutdown).
    pub async fn stop_servers(&self) {
        for hook in &self.hooks {
            if let Runner::Server(server) = &hook.runner {
                server.stop().await;
            }
        }
    }

    /// Asks the `permission` hooks about a call whose ask comes from the mode's default
    /// only, in order, until one answers other than `pass`: that answer, and who gave it.
    /// A failure or a timeout passes (the person is asked).
    pub async fn answer_permission(
        &self,
        call: &ToolExecution,
    ) -> Option<(PermissionReply, String, String)> {
        for hook in self.of(HookEvent::Permission) {
            if !hook.applies_to(call) {
                continue;
            }
            let (answer, ms) = hook.consult_call(HookEvent::Permission, call, None).await;
            let (reply, reason) = match answer {
                Ok(a) => (a.permission.unwrap_or(PermissionReply::Pass), a.reason),
                Err(why) => (PermissionReply::Pass, why),
            };
            let said = match reply {
                PermissionReply::AllowOnce => TraceDecision::AllowOnce,
                PermissionReply::Reject => TraceDecision::RejectOnce,
                PermissionReply::Pass => TraceDecision::Pass,
            };
            hook.trace(call, said, &reason, ms);
            if reply != PermissionReply::Pass {
                return Some((reply, hook.name.clone(), reason));
            }
        }
        None
    }

    /// Asks the `prompt` hooks about a user prompt. A hook that fails blocks it (fail
    /// closed), naming what went wrong.
    pub async fn on_prompt(&self, session: &Arc<Session>, prompt: &str) -> PromptOutcome {
        let about = SessionEvent {
            prompt: Some(prompt),
            ..SessionEvent::default()
        };
        self.gather_context(HookEvent::Prompt, session, about, true)
            .await
    }

    /// Asks the `session_start` hooks about a session created (`new`) or loaded
    /// (`load`): the context they add. A hook that fails adds nothing and is logged (a
    /// session is not refused for it).
    pub async fn on_session_start(
        &self,
        session: &Arc<Session>,
        source: &str,
    ) -> Vec<(String, String)> {
        let about = SessionEvent {
            source: Some(source),
            ..SessionEvent::default()
        };
        self.gather_context(HookEvent::SessionStart, session, about, false)
            .await
            .context
    }

    /// The one walk of the hooks that add context to a session event, in config order:
    /// each one's context, and with `may_block` the first that denies or fails (fail
    /// closed: asking stops there). Without it a failure is logged and adds nothing,
    /// and a decision means nothing.
    async fn gather_context(
        &self,
        event: HookEvent,
        session: &Arc<Session>,
        about: SessionEvent<'_>,
        may_block: bool,
    ) -> PromptOutcome {
        let mut outcome = PromptOutcome::default();
        for hook in self.of(event) {
            match hook.consult_session(event, session, about).await {
                Err(why) if may_block => {
                    outcome.blocked = Some((hook.name.clone(), why));
                    break;
                }
                Err(why) => {
                    tracing::warn!(hook = %hook.name, "{} hook failed: {why}", event.as_str())
                }
                Ok(a) => {
                    if let Some(context) = a.context {
                        outcome.context.push((hook.context_source(), context));
                    }
                    if may_block && a.decision == Some(Decision::Deny) {
                        outcome.blocked = Some((hook.name.clone(), a.reason));
                        break;
                    }
                }
            }
        }
        outcome
    }

    /// Asks the `stop` hooks whether the turn `session`'s model just ended should go on,
    /// `continued` times sent on already: the first (in config order) that answers
    /// `continue`, as (context source, what the model reads next). `None` once
    /// `max_continues` is reached, and when none says so; a hook that fails is logged and
    /// lets the turn end (ending is the side that runs nothing).
    pub async fn on_stop(
        &self,
        session: &Arc<Session>,
        continued: u32,
    ) -> Option<(String, String)> {
        if continued >= self.max_continues {
            return None;
        }
        for hook in self.of(HookEvent::Stop) {
            let about = SessionEvent {
                stop_active: Some(continued > 0),
                ..SessionEvent::default()
            };
            match hook.consult_session(HookEvent::Stop, session, about).await {
                Ok(Answer {
                    go_on: Some(reason),
                    ..
                }) => return Some((hook.context_source(), reason)),
                Ok(_) => {}
                Err(why) => tracing::warn!(hook = %hook.name, "stop hook failed: {why}"),
            }
        }
        None
    }

    /// Tells the `session_end` hooks that `session` ended (`close`, `delete`,
    /// `disconnect`, `shutdown`), each in turn; failures are logged.
    pub async fn on_session_end(&self, session: &Arc<Session>, how: &str) {
        for hook in self.of(HookEvent::SessionEnd) {
            let about = SessionEvent {
                source: Some(how),
                ..SessionEvent::default()
            };
            if let Err(why) = hook
                .consult_session(HookEvent::SessionEnd, session, about)
                .await
            {
                tracing::warn!(hook = %hook.name, "session_end hook failed: {why}");
            }
        }
    }

    /// Tells the `notification` hooks `message` (dsh is about to ask the person) without
    /// waiting for them: the question is not held up. Each runs in a task of its own;
    /// its process group goes with the task (at the latest at daemon shutdown).
    pub fn notify(&self, session: &Arc<Session>, message: &str) {
        for hook in self.of(HookEvent::Notification) {
            let (hook, session, message) = (hook.clone(), session.clone(), message.to_string());
            tokio::spawn(async move {
                let about = SessionEvent {
                    message: Some(&message),
                    ..SessionEvent::default()
                };
                if let Err(why) = hook
                    .consult_session(HookEvent::Notification, &session, about)
                    .await
                {
                    tracing::warn!(hook = %hook.name, "notification hook failed: {why}");
                }
            });
        }
    }

    /// The programs' files, for the policy version (a changed script shows).
    pub fn program_paths(&self) -> Vec<PathBuf> {
        self.hooks
            .iter()
            .filter_map(|h| h.config.argv.first())
            .map(|p| resolve_program(p))
            .collect()
    }

    /// Feeds every program's path and bytes to `hash`: a policy version that names these
    /// hooks changes when a script does.
    pub fn hash_programs(&self, hash: &mut sha2::Sha256) {
        use sha2::Digest;
        for path in self.program_paths() {
            hash.update(path.to_string_lossy().as_bytes());
            // An unreadable program hashes as its name: it will fail (and deny) anyway.
            if let Ok(bytes) = std::fs::read(&path) {
                hash.update(&bytes);
            }
        }
    }
}
