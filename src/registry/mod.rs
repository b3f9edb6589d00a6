//! The session registry: the one place that knows sessions.
//!
//! It holds each session's header cwd, permission mode, allow/reject-always grants,
//! the way to ask its user (a [`PermissionPrompter`]) and its inbox of completion
//! notices; and it owns the map from background task to owning session, which is
//! the fence between sessions (T12, T13). It is shared state, not a coordinator:
//! it starts nothing and formats nothing for the model.

pub mod user_grants;

use crate::config::Mode;
use crate::exec::TaskId;
use crate::policy::Grant;
use dashmap::DashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
pub use user_grants::UserGrants;

/// A session id (ACP `sessionId`): a random UUID for sessions created by dsh.
pub type SessionId = String;

/// How a user answered a permission question (ACP option kinds); defined beside the
/// audit line that keeps it.
pub use crate::policy::audit::PermissionAnswer;

/// What the permission gate asks a session's user.
#[derive(Debug, Clone)]
pub struct PermissionRequest {
    pub session_id: SessionId,
    pub call_id: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    /// Why the call is asked about (the policy's reason).
    pub reason: String,
    /// The call asks to run outside the sandbox (issue 27): the question must say so and
    /// show the justification, and offers no "always" answer.
    pub escalation: Option<crate::policy::Escalation>,
    /// Cancelled when the call is abandoned; the prompter withdraws the question.
    pub cancel: tokio_util::sync::CancellationToken,
}

/// The way a session asks its user; the ACP layer implements it with
/// `session/request_permission` on the session's connection.
#[async_trait::async_trait]
pub trait PermissionPrompter: Send + Sync {
    /// Asks and waits for the answer. Must settle: a prompt that cannot be
    /// delivered or is abandoned answers `Cancelled`.
    async fn ask(&self, request: PermissionRequest) -> PermissionAnswer;

    /// The person answered "always": `prefixes` are now allowed (`allow`) or rejected for
    /// the session. The ACP side writes it to the session's log, so the answer outlives
    /// the connection and the daemon.
    fn remember(&self, _prefixes: &[Grant], _allow: bool) {}
}

/// The editor's side of a session's files (ACP `fs/read_text_file`, `fs/write_text_file`):
/// the file tools read and write through it when the client offers it, so the person's
/// unsaved buffers are what is read and edited and the editor records the edit.
#[async_trait::async_trait]
pub trait ClientFiles: Send + Sync {
    /// The file's text as the editor has it; `None` when the client bound to the session
    /// now does not offer reads (the disk is used).
    async fn read(&self, path: &std::path::Path) -> Option<Result<String, String>>;
    /// Writes through the editor; `None` when the client does not offer writes.
    async fn write(&self, path: &std::path::Path, content: &str) -> Option<Result<(), String>>;
    /// Whether the client bound to the session now offers reads or writes. Asked before the executor's check that guards the editor's answer,
    /// so a session whose editor offers neither pays only the executor's own read or
    /// write (issue 39, bench X2). Advisory: `read`/`write` answer `None` if the
    /// client changed in between, and the executor then reads or writes, judging again.
    fn offers(&self, intent: crate::exec::FileIntent) -> bool;
}

/// A completion notice waiting for the session's next model request (T14).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Where it comes from: always `tool-bash` for background task notices.
    pub source: &'static str,
    pub task_id: TaskId,
    pub text: String,
    pub at: SystemTime,
}

/// How many pending notices a session's inbox mirrors (see `deliver_notice`).
const INBOX_LIMIT: usize = 32;

/// Something that wants to hear about notices as they arrive (the session log).
pub trait NoticeListener: Send + Sync {
    /// A notice for `session`, which is loaded (it is in its inbox too).
    fn notice(&self, session: &Session, notice: &Notice);
    /// A notice for session `session_id`, which is not loaded (closed and unloaded, or
    /// never loaded since a restart adopted its tasks): only its log can keep it.
    fn unloaded(&self, _session_id: &str, _notice: &Notice) {}
}

/// One editor session as the registry knows it.
pub struct Session {
    pub id: SessionId,
    /// The header cwd: default workdir of every bash call of this session (T2).
    pub cwd: PathBuf,
    /// Directories the editor granted besides the cwd (ACP `additionalDirectories`).
    extra_roots: Mutex<Vec<PathBuf>>,
    mode: Mutex<Mode>,
    grants: Mutex<Vec<Grant>>,
    rejections: Mutex<Vec<Grant>>,
    inbox: Mutex<Vec<Notice>>,
    prompter: Mutex<Option<Arc<dyn PermissionPrompter>>>,
    /// The editor's files, when a client is bound (it may still not offer them).
    client_files: Mutex<Option<Arc<dyn ClientFiles>>>,
    closed: AtomicBool,
    /// What the history list calls it (from its first prompt); `None` until then.
    title: Mutex<Option<String>>,
    /// The model its requests name, when the person picked one (`None`: the config's).
    model: Mutex<Option<String>>,
    /// Its "Think harder" switch: requests go to `[model] think_harder_model` while on.
    think_harder: AtomicBool,
    /// The user's own "always" answers, which apply to every session.
    user: Arc<UserGrants>,
    /// The batch it belongs to (`dsh exec --prompts`), named by its client at
    /// `session/new`: every audit line of the session carries it. Set once.
    run: std::sync::OnceLock<crate::policy::audit::RunId>,
}

fn add_unique(all: &mut Vec<Grant>, new: &[Grant]) {
    for g in new {
        if !all.contains(g) {
            all.push(g.clone());
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Session {
    /// The batch it belongs to, if its client named one.
    pub fn run(&self) -> Option<&crate::policy::audit::RunId> {
        self.run.get()
    }

    /// Names the batch it belongs to; a session's run never changes once set.
    pub fn set_run(&self, run: crate::policy::audit::RunId) {
        let _ = self.run.set(run);
    }

    /// Its title, once it has one.
    pub fn title(&self) -> Option<String> {
        lock(&self.title).clone()
    }

    /// Sets its title (from its first prompt, or its log when it is loaded).
    pub fn set_title(&self, title: Option<String>) {
        *lock(&self.title) = title;
    }

    /// The model the person picked for it, if any.
    pub fn model(&self) -> Option<String> {
        lock(&self.model).clone()
    }

    /// Picks the model its next requests name.
    pub fn set_model(&self, model: Option<String>) {
        *lock(&self.model) = model;
    }

    /// Whether its "Think harder" switch is on.
    pub fn think_harder(&self) -> bool {
        self.think_harder.load(Ordering::SeqCst)
    }

    /// Turns its "Think harder" switch on or off (its next requests follow).
    pub fn set_think_harder(&self, on: bool) {
        self.think_harder.store(on, Ordering::SeqCst);
    }

    /// Records the directories the editor granted besides the cwd; only absolute
    /// paths count.
    pub fn set_extra_roots(&self, roots: &[PathBuf]) {
        *lock(&self.extra_roots) = roots.iter().filter(|r| r.is_absolute()).cloned().collect();
    }

    /// The directories the editor granted besides the cwd.
    pub fn extra_roots(&self) -> Vec<PathBuf> {
        lock(&self.extra_roots).clone()
    }

    /// Where this session's commands may write when the executor confines writes
    /// (the sandbox): its cwd and the directories it was granted.
    pub fn writable_roots(&self) -> Vec<PathBuf> {
        let mut roots = vec![self.cwd.clone()];
        roots.extend(lock(&self.extra_roots).iter().cloned());
        roots
    }

    /// The session's permission mode.
    pub fn mode(&self) -> Mode {
        *lock(&self.mode)
    }

    pub fn set_mode(&self, mode: Mode) {
        *lock(&self.mode) = mode;
    }

    /// Command prefixes allowed always in this session: its own grants, then the
    /// user's (`remember = "user"`).
    pub fn grants(&self) -> Vec<Grant> {
        let own = lock(&self.grants).clone();
        self.user.applied_to(&own)
    }

    /// The user's grants and rejections, shared by every session.
    pub fn user_grants(&self) -> &Arc<UserGrants> {
        &self.user
    }

    /// Adds allow-always grants (duplicates are ignored).
    pub fn add_grants(&self, grants: &[Grant]) {
        add_unique(&mut lock(&self.grants), grants);
    }

    /// Command prefixes rejected always in this session: its own, then the user's.
    pub fn rejections(&self) -> Vec<Grant> {
        let mut all = lock(&self.rejections).clone();
        add_unique(&mut all, &self.user.rejected());
        all
    }

    /// Adds reject-always prefixes (duplicates are ignored).
    pub fn add_rejections(&self, prefixes: &[Grant]) {
        add_unique(&mut lock(&self.rejections), prefixes);
    }

    /// Forgets a grant or a rejection of `prefix` of this session (not the user's);
    /// whether there was one.
    pub fn revoke(&self, prefix: &Grant) -> bool {
        let mut found = false;
        for list in [&self.grants, &self.rejections] {
            let mut list = lock(list);
            let before = list.len();
            list.retain(|g| g != prefix);
            found |= list.len() != before;
        }
        found
    }

    /// Installs (or removes) the way this session asks its user.
    pub fn set_prompter(&self, prompter: Option<Arc<dyn PermissionPrompter>>) {
        *lock(&self.prompter) = prompter;
    }

    pub fn prompter(&self) -> Option<Arc<dyn PermissionPrompter>> {
        lock(&self.prompter).clone()
    }

    /// Installs (or removes) the editor's side of this session's files.
    pub fn set_client_files(&self, files: Option<Arc<dyn ClientFiles>>) {
        *lock(&self.client_files) = files;
    }

    pub fn client_files(&self) -> Option<Arc<dyn ClientFiles>> {
        lock(&self.client_files).clone()
    }

    /// Takes every pending notice, oldest first (the agent injects them into the
    /// next model request).
    pub fn take_notices(&self) -> Vec<Notice> {
        std::mem::take(&mut *lock(&self.inbox))
    }

    /// The pending notices without taking them.
    pub fn pending_notices(&self) -> Vec<Notice> {
        lock(&self.inbox).clone()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// Who may touch a task, as decided by [`SessionRegistry::check_task_access`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskAccess {
    /// The caller owns it, or nobody does.
    Allowed,
    /// Another session owns it (T13).
    Refused,
    /// The registry never heard of it.
    Unknown,
}

/// Every session and every task owner of the daemon.
pub struct SessionRegistry {
    sessions: DashMap<SessionId, Arc<Session>>,
    /// Task id -> owning session (`None`: started with no session, open to all).
    owners: DashMap<TaskId, Option<SessionId>>,
    /// Completions that arrived before their owner was recorded (a task can finish
    /// before `start` has returned to the tool that records it).
    early: Mutex<Vec<(TaskId, String)>>,
    listeners: Mutex<Vec<Arc<dyn NoticeListener>>>,
    /// Changed by a config reload; sessions already made keep theirs.
    default_mode: Mutex<Mode>,
    /// The user's own "always" answers, given to every session.
    user_grants: Arc<UserGrants>,
    /// Executor scopes of wrapped agents' own processes -> the agent's name, so what
    /// such a process asks with no session (its connections through the sandbox's
    /// proxy) is judged and audited as that agent's (issue 44).
    agent_scopes: DashMap<String, String>,
}

impl SessionRegistry {
    /// An empty registry; new sessions start in `default_mode`.
    pub fn new(default_mode: Mode) -> Self {
        Self {
            sessions: DashMap::new(),
            owners: DashMap::new(),
            early: Mutex::new(Vec::new()),
            listeners: Mutex::new(Vec::new()),
            default_mode: Mutex::new(default_mode),
            user_grants: Arc::new(UserGrants::default()),
            agent_scopes: DashMap::new(),
        }
    }

    /// Marks the executor scope `scope` as the wrapped agent `agent`'s process (`None`:
    /// forgets it, the process has ended).
    pub fn set_agent_scope(&self, scope: &str, agent: Option<&str>) {
        match agent {
            Some(agent) => {
                self.agent_scopes
                    .insert(scope.to_string(), agent.to_string());
            }
            None => {
                self.agent_scopes.remove(scope);
            }
        }
    }

    /// The wrapped agent whose process runs in the executor scope `scope`, if one does.
    pub fn agent_of_scope(&self, scope: &str) -> Option<String> {
        self.agent_scopes.get(scope).map(|a| a.clone())
    }

    /// The same registry with the user's grants (from the state directory) in every
    /// session it makes.
    pub fn with_user_grants(mut self, grants: Arc<UserGrants>) -> Self {
        self.user_grants = grants;
        self
    }

    /// The user's grants every session applies.
    pub fn user_grants(&self) -> &Arc<UserGrants> {
        &self.user_grants
    }

    /// The mode a new session starts in (and a sessionless question is judged in).
    pub fn default_mode(&self) -> Mode {
        *lock(&self.default_mode)
    }

    /// The mode sessions made from now on start in (a config reload).
    pub fn set_default_mode(&self, mode: Mode) {
        *lock(&self.default_mode) = mode;
    }

    /// Creates a session with a fresh random id.
    pub fn create(&self, cwd: PathBuf) -> Arc<Session> {
        self.insert(uuid::Uuid::new_v4().to_string(), cwd)
    }

    /// Registers a session under a known id (a session loaded from disk), or
    /// returns the one already registered under it.
    pub fn insert(&self, id: SessionId, cwd: PathBuf) -> Arc<Session> {
        self.sessions
            .entry(id.clone())
            .or_insert_with(|| {
                Arc::new(Session {
                    id,
                    cwd,
                    extra_roots: Mutex::new(Vec::new()),
                    mode: Mutex::new(self.default_mode()),
                    grants: Mutex::new(Vec::new()),
                    rejections: Mutex::new(Vec::new()),
                    inbox: Mutex::new(Vec::new()),
                    prompter: Mutex::new(None),
                    client_files: Mutex::new(None),
                    closed: AtomicBool::new(false),
                    title: Mutex::new(None),
                    model: Mutex::new(None),
                    think_harder: AtomicBool::new(false),
                    user: self.user_grants.clone(),
                    run: std::sync::OnceLock::new(),
                })
            })
            .clone()
    }

    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions.get(id).map(|s| s.clone())
    }

    /// Every session, in no particular order.
    pub fn sessions(&self) -> Vec<Arc<Session>> {
        self.sessions.iter().map(|s| s.clone()).collect()
    }

    /// Removes a session. Its task ownership stays (T12): a closed session's
    /// tasks remain fenced off from every other session.
    pub fn close(&self, id: &str) -> Option<Arc<Session>> {
        let (_, session) = self.sessions.remove(id)?;
        session.closed.store(true, Ordering::SeqCst);
        session.set_prompter(None);
        Some(session)
    }

    /// Adds a listener told of every notice delivered to a session.
    pub fn add_notice_listener(&self, listener: Arc<dyn NoticeListener>) {
        lock(&self.listeners).push(listener);
    }

    /// Records who started a task (T12); delivers a notice that arrived early.
    pub fn record_owner(&self, task_id: TaskId, owner: Option<&str>) {
        self.owners.insert(task_id, owner.map(str::to_string));
        let early = {
            let mut early = lock(&self.early);
            let (mine, rest): (Vec<_>, Vec<_>) =
                early.drain(..).partition(|(id, _)| *id == task_id);
            *early = rest;
            mine
        };
        for (id, text) in early {
            self.deliver_notice(id, text);
        }
    }

    /// The owner of a task: `Some(None)` for an unowned task, `None` if unknown.
    pub fn owner(&self, task_id: TaskId) -> Option<Option<SessionId>> {
        self.owners.get(&task_id).map(|o| o.clone())
    }

    /// Whether `caller` (a session id, or none) may read or kill `task_id` (T13).
    pub fn check_task_access(&self, task_id: TaskId, caller: Option<&str>) -> TaskAccess {
        match self.owners.get(&task_id) {
            None => TaskAccess::Unknown,
            Some(owner) => match owner.as_deref() {
                None => TaskAccess::Allowed,
                Some(owner) if Some(owner) == caller => TaskAccess::Allowed,
                Some(_) => TaskAccess::Refused,
            },
        }
    }

    /// The task ids a session owns.
    pub fn tasks_of(&self, session_id: &str) -> Vec<TaskId> {
        self.owners
            .iter()
            .filter(|e| e.value().as_deref() == Some(session_id))
            .map(|e| *e.key())
            .collect()
    }

    /// Appends a finished task's notice to its owner's inbox (T14): exactly once,
    /// only to the owner. An unowned task drops the notice with a log line; an owner
    /// that is not loaded has no inbox, and the listeners hear of it as such.
    pub fn deliver_notice(&self, task_id: TaskId, text: String) {
        let owner = match self.owners.get(&task_id) {
            Some(owner) => owner.clone(),
            None => {
                lock(&self.early).push((task_id, text));
                return;
            }
        };
        let Some(owner) = owner else {
            tracing::debug!(%task_id, "finished task has no owner; notice dropped");
            return;
        };
        let notice = Notice {
            source: "tool-bash",
            task_id,
            text,
            at: SystemTime::now(),
        };
        let Some(session) = self.get(&owner) else {
            for listener in lock(&self.listeners).iter() {
                listener.unloaded(&owner, &notice);
            }
            return;
        };
        {
            // The session log holds every notice at its place (that is what the
            // model is sent); the inbox only mirrors the latest, so a session that
            // never prompts a model does not grow the daemon with every task.
            let mut inbox = lock(&session.inbox);
            if inbox.len() >= INBOX_LIMIT {
                inbox.remove(0);
            }
            inbox.push(notice.clone());
        }
        for listener in lock(&self.listeners).iter() {
            listener.notice(&session, &notice);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t13_access_by_owner() {
        let r = SessionRegistry::new(Mode::Ask);
        let a = r.create("/".into());
        let b = r.create("/".into());
        r.record_owner(TaskId::new(1), Some(&a.id));
        r.record_owner(TaskId::new(2), None);
        assert_eq!(
            r.check_task_access(TaskId::new(1), Some(&a.id)),
            TaskAccess::Allowed
        );
        assert_eq!(
            r.check_task_access(TaskId::new(1), Some(&b.id)),
            TaskAccess::Refused
        );
        assert_eq!(
            r.check_task_access(TaskId::new(1), None),
            TaskAccess::Refused
        );
        assert_eq!(
            r.check_task_access(TaskId::new(2), Some(&b.id)),
            TaskAccess::Allowed
        );
        assert_eq!(
            r.check_task_access(TaskId::new(2), None),
            TaskAccess::Allowed
        );
        assert_eq!(
            r.check_task_access(TaskId::new(3), None),
            TaskAccess::Unknown
        );
    }

    #[test]
    fn t12_ownership_survives_close_and_reinsert() {
        let r = SessionRegistry::new(Mode::Ask);
        let a = r.create("/".into());
        r.record_owner(TaskId::new(1), Some(&a.id));
        r.close(&a.id);
        let other = r.create("/".into());
        assert_eq!(
            r.check_task_access(TaskId::new(1), Some(&other.id)),
            TaskAccess::Refused
        );
        let again = r.insert(a.id.clone(), "/".into());
        assert_eq!(
            r.check_task_access(TaskId::new(1), Some(&again.id)),
            TaskAccess::Allowed
        );
    }

    #[test]
    fn t14_notice_goes_to_owner_once_even_if_it_arrives_early() {
        let r = SessionRegistry::new(Mode::Ask);
        let a = r.create("/".into());
        let b = r.create("/".into());
        r.deliver_notice(TaskId::new(1), "done".into());
        assert!(a.pending_notices().is_empty());
        r.record_owner(TaskId::new(1), Some(&a.id));
        let got = a.take_notices();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].source, "tool-bash");
        assert!(a.take_notices().is_empty());
        assert!(b.take_notices().is_empty());
    }

    #[test]
    fn t14_notice_for_closed_session_is_dropped() {
        let r = SessionRegistry::new(Mode::Ask);
        let a = r.create("/".into());
        r.record_owner(TaskId::new(1), Some(&a.id));
        r.close(&a.id);
        r.deliver_notice(TaskId::new(1), "done".into());
        assert!(a.take_notices().is_empty());
    }
}
