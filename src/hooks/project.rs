//! Per-session judges from project files (`src/project.rs`): a session whose cwd is in a
//! project with a `.dsh/config.toml` is judged by the user's rules plus the project's
//! (what of them applies), and a trusted project's hooks run for its calls only.
//!
//! One [`ProjectLayers`] belongs to each set of judges the registry installs, so a reload
//! builds new layers (the project files read again) beside the new policy, and a call
//! judged by one chain sees the layers of that same chain. Sessions without a project file
//! have no layer: the policy hook and the link below then cost one atomic load.

use super::external::HookSet;
use super::waterfall::{Hook, Next, Passed, ToolExecution};
use crate::config::{Config, Mode};
use crate::policy::Policy;
use crate::project::Project;
use dashmap::DashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What one session's project adds.
pub struct SessionLayer {
    /// The project file as it applies (its warnings, its mode, its digest).
    pub project: Project,
    /// The user's rules and the project's, as one judge.
    pub policy: Arc<Policy>,
    /// The project's own hooks (a trusted project's; empty otherwise).
    pub hooks: Arc<HookSet>,
    /// Its pre_tool and post_tool hooks, as waterfall links.
    links: Vec<Arc<dyn Hook>>,
    /// A hash of the project file, whether it is trusted and its hook programs' bytes: the
    /// second half of the policy version its session's audit lines name.
    pub version: String,
    /// A trusted project's: what would run for it as the layer was read, which each
    /// call checks against its pins ([`ProjectPins`]).
    pub pins: Option<crate::project::pins::Pins>,
}

impl SessionLayer {
    /// Builds the layer of `project` (read against the user's `config`, whose
    /// `[exec.sandbox.network]` judges hosts too); session logs are under its state
    /// directory, for the hooks.
    fn new(project: Project, user: &Config, pins: Option<crate::project::pins::Pins>) -> Self {
        let hooks = Arc::new(HookSet::new(&project.hooks, user));
        let links = hooks.waterfall_hooks();
        let version = {
            use sha2::{Digest, Sha256};
            let mut hash = Sha256::new();
            hash.update(project.digest.as_bytes());
            hash.update([u8::from(project.trusted)]);
            hooks.hash_programs(&mut hash);
            hash.finalize()[..8]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        Self {
            policy: Arc::new(
                Policy::new(&project.permissions).with_network(&user.exec.sandbox.network),
            ),
            hooks,
            links,
            version,
            project,
            pins,
        }
    }
}

/// The layers of the live sessions that have a project file, under one user config.
pub struct ProjectLayers {
    user: Config,
    sessions: DashMap<String, Arc<SessionLayer>>,
    /// Whether any session has a layer: the fast path skips the map when none has.
    any: AtomicBool,
    /// Keep only enforced pre_tool hooks (a replay: nothing runs after a call that is
    /// not made, and a shadow decides nothing).
    pre_tool_only: bool,
}

impl ProjectLayers {
    /// No layers yet, for sessions judged under `user` (the user's own config).
    pub fn new(user: &Config) -> Self {
        Self {
            user: user.clone(),
            sessions: DashMap::new(),
            any: AtomicBool::new(false),
            pre_tool_only: false,
        }
    }

    /// [`ProjectLayers::new`] for `dsh policy replay --hooks`: a trusted project's hooks
    /// are its enforced pre_tool ones only, as the user's are there.
    pub fn for_replay(user: &Config) -> Self {
        Self {
            pre_tool_only: true,
            ..Self::new(user)
        }
    }

    /// Reads the project file of a session working in `cwd`, if there is one, and keeps
    /// its layer for the session (replacing any it had). `None`: no project file.
    pub fn open(&self, session_id: &str, cwd: &Path) -> Option<Arc<SessionLayer>> {
        let layer = self.load(session_id, cwd);
        self.put(session_id, layer.clone());
        layer
    }

    /// The layer of a session working in `cwd` under this user config, read (the
    /// project file, its hook programs hashed) but not kept: the slow half of
    /// [`ProjectLayers::open`], which a caller runs off its locks.
    pub fn load(&self, session_id: &str, cwd: &Path) -> Option<Arc<SessionLayer>> {
        let file = crate::project::find_for(cwd)?;
        // Surveyed before the file is read: a change in between shows at the first call.
        let dir = file
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("/"));
        let surveyed = crate::project::pins::survey(dir, &self.user);
        let mut project = crate::project::load(&file, &self.user);
        // A replay (`pre_tool_only`) is the person's own run of the hooks they name,
        // now; the pins guard the live daemon against what its sessions' commands
        // wrote, and are kept in its state directory, which a replay may not know.
        let pins = (project.trusted && !self.pre_tool_only).then_some(surveyed);
        if self.pre_tool_only {
            project
                .hooks
                .retain(|h| h.event == crate::config::HookEvent::PreTool && h.enforce);
        }
        for warning in &project.warnings {
            tracing::warn!(session = session_id, "{warning}");
        }
        Some(Arc::new(SessionLayer::new(project, &self.user, pins)))
    }

    /// Keeps `layer` as the session's (replacing any it had); `None` drops it.
    pub fn put(&self, session_id: &str, layer: Option<Arc<SessionLayer>>) {
        match layer {
            Some(layer) => {
                self.sessions.insert(session_id.to_string(), layer);
                self.any.store(true, Ordering::Release);
            }
            None => self.forget(session_id),
        }
    }

    /// The session's layer, if its project has a file.
    pub fn get(&self, session_id: &str) -> Option<Arc<SessionLayer>> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        self.sessions.get(session_id).map(|l| l.clone())
    }

    /// Drops a session's layer (the session is gone).
    pub fn forget(&self, session_id: &str) {
        self.sessions.remove(session_id);
    }

    /// The session's hooks: the user's, then its project's.
    pub fn hooks_for(&self, session_id: &str, user: &Arc<HookSet>) -> Arc<HookSet> {
        match self.get(session_id) {
            Some(layer) if !layer.hooks.is_empty() => Arc::new(HookSet::joined(user, &layer.hooks)),
            _ => user.clone(),
        }
    }

    /// The mode a new session there starts in, when its project sets one that applies.
    pub fn default_mode(&self, session_id: &str) -> Option<Mode> {
        self.get(session_id)?.project.default_mode
    }
}

/// The waterfall link that runs a session's project hooks, after the user's hooks and
/// before the permission gate (so a project hook's ask is put to the person like any).
pub struct ProjectHooks(pub Arc<ProjectLayers>);

#[async_trait::async_trait]
impl Hook for ProjectHooks {
    fn name(&self) -> &str {
        "project hooks"
    }

    async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
        let layer = call.session.as_ref().and_then(|s| self.0.get(&s.id));
        match layer {
            Some(layer) if !layer.links.is_empty() => next.through(&layer.links, call).await,
            _ => next.run(call).await,
        }
    }
}

/// The waterfall link that holds a trusted project to its pins (issue 39): before the
/// user's hooks (which may run the project's scripts through `$CLAUDE_PROJECT_DIR`)
/// and the project's, what would run for the session's trusted project is compared
/// with what `dsh trust` pinned. Any difference refuses the call with the reason and
/// the command to review it: every call of the session, since which calls a changed
/// hook or config would judge is itself what changed. Never the hooks skipped.
pub struct ProjectPins(pub Arc<ProjectLayers>);

#[async_trait::async_trait]
impl Hook for ProjectPins {
    fn name(&self) -> &str {
        "project pins"
    }

    async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
        let layer = call.session.as_ref().and_then(|s| self.0.get(&s.id));
        if let Some(layer) = layer
            && let Some(loaded) = &layer.pins
        {
            let user = &self.0.user;
            let checked = crate::project::pins::check(
                &user.exec.state_dir(),
                &layer.project.dir,
                user,
                loaded,
            );
            if let Err(suspended) = checked {
                return call.veto(self.name(), &suspended.to_string()).into();
            }
        }
        next.run(call).await
    }
}
