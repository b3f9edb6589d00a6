//! The model-facing tools and the registry that runs them.
//!
//! Tools are argument checks and text shaping only: every process concern is
//! behind the executor seam, every permission concern in the waterfall, every
//! ownership concern in the session registry. [`ToolRegistry::execute`] is the
//! one entry point: it sends each call through the waterfall, which ends in the
//! tool.

pub mod bash;
pub mod files;
pub mod network;
pub mod notices;
pub mod schema;
pub mod todo;

use crate::config::Config;
use crate::exec::BashExecutor;
use crate::hooks::audit::{AuditHook, AuditLog};
use crate::hooks::external::HookSet;
use crate::hooks::gate::PermissionGate;
use crate::hooks::project::{ProjectLayers, SessionLayer};
use crate::hooks::rules::PolicyHook;
use crate::hooks::waterfall::{Hook, Terminal, ToolExecution, ToolOutput, Waterfall};
use crate::policy::Policy;
use crate::registry::{Session, SessionRegistry};
use schema::{SchemaHook, ToolSchema};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

/// What a tool does, as editors show it; defined with the session log that keeps it.
pub use crate::store::ToolKind;

/// One model-facing tool.
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    /// Its contract, from `proto/tools/`.
    fn schema(&self) -> &Arc<ToolSchema>;
    fn kind(&self) -> ToolKind;
    /// The tool says it only reads (an MCP tool's `readOnlyHint`): read-only mode may
    /// then allow it, when a rule does. A hint from its author, never proof.
    fn read_only_hint(&self) -> bool {
        false
    }
    /// Whether it can still be called (an MCP tool whose server stopped cannot): the
    /// model is no longer offered a tool that is not.
    fn available(&self) -> bool {
        true
    }
    /// Whether only dsh itself calls it (the `network` tool, a call per connection a
    /// sandboxed command asks for): it is not offered to the model, and a call of it
    /// from the model or a client is an unknown tool.
    fn internal(&self) -> bool {
        false
    }
    /// Runs a call whose arguments already passed the schema check.
    async fn call(&self, call: &ToolExecution) -> ToolOutput;
}

/// Tools that only some sessions have (the editor's MCP servers), by session id: the
/// registry offers and runs them for that session only, and the schema and policy hooks
/// find them here.
#[derive(Default)]
pub struct SessionTools {
    by_session: dashmap::DashMap<String, Vec<Arc<dyn Tool>>>,
}

impl SessionTools {
    /// Gives `session` these tools (replacing any it had).
    pub fn set(&self, session: &str, tools: Vec<Arc<dyn Tool>>) {
        if tools.is_empty() {
            self.by_session.remove(session);
        } else {
            self.by_session.insert(session.to_string(), tools);
        }
    }

    /// Takes `session`'s tools away.
    pub fn remove(&self, session: &str) {
        self.by_session.remove(session);
    }

    /// `session`'s tool called `name`, available or not (a call to a stopped server's
    /// tool is answered by the tool, with an error).
    pub fn get(&self, session: &str, name: &str) -> Option<Arc<dyn Tool>> {
        self.by_session
            .get(session)?
            .iter()
            .find(|t| t.schema().name() == name)
            .cloned()
    }

    /// The definitions of `session`'s available tools, as model requests carry them.
    fn definitions(&self, session: &str) -> Vec<Arc<RawValue>> {
        self.by_session
            .get(session)
            .map(|tools| {
                tools
                    .iter()
                    .filter(|t| t.available())
                    .map(|t| t.schema().model_definition().clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl crate::hooks::rules::ToolHints for SessionTools {
    fn read_only_hint(&self, session: &str, tool: &str) -> bool {
        self.get(session, tool).is_some_and(|t| t.read_only_hint())
    }
}

/// The tools in registration order, and the waterfall every call goes through.
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    /// The tools of single sessions (MCP servers'), after the registered ones.
    session_tools: Arc<SessionTools>,
    waterfall: Waterfall,
    /// What the config gives the waterfall (policy, hooks, their version), swapped as a
    /// whole on reload; a call already in the waterfall finishes under the one it began
    /// with (the waterfall runs on a snapshot of its links).
    judges: RwLock<Arc<Judges>>,
    /// Where `standard()`'s audit hook writes, kept for the chain a reload builds.
    audit: Option<Arc<AuditLog>>,
    /// The live sessions, whose project files a reload reads again.
    sessions: Option<Arc<SessionRegistry>>,
    /// The sandbox the commands run in, when they do: as the daemon started (an
    /// `[exec]` change needs a restart), so the policy hook, `explain` and the bash tool
    /// agree on whether a call can leave it.
    sandbox: Option<bash::SandboxTerms>,
    /// Held while a session's project layer is opened and while judges are installed,
    /// so a session opened during a reload is in the layers that end up in force.
    projects_lock: Mutex<()>,
    /// Where the file tools reach files (the executor's place, E11): the diff preview
    /// reads the file there too.
    files: files::FilePlace,
}

/// The parts of the waterfall a config decides.
pub struct Judges {
    /// The judge of the policy hook (the defaults' for a bare registry).
    pub policy: Arc<Policy>,
    /// The configured hook programs, for the events outside the waterfall.
    pub hooks: Arc<HookSet>,
    /// A hash of the effective config and every hook program's bytes: each audit line
    /// names it, so a changed rule or script shows.
    pub version: String,
    /// The sessions whose project file adds rules (and, trusted, hooks), read under
    /// this config.
    pub projects: Arc<ProjectLayers>,
}

impl ToolRegistry {
    /// A registry with no tools and an empty waterfall.
    pub fn new() -> Self {
        Self {
            tools: Vec::new(),
            session_tools: Arc::new(SessionTools::default()),
            waterfall: Waterfall::new(),
            judges: RwLock::new(Arc::new(Judges {
                policy: Arc::new(Policy::new(&Default::default())),
                hooks: Arc::new(HookSet::default()),
                version: String::new(),
                projects: Arc::new(ProjectLayers::new(&Config::default())),
            })),
            audit: None,
            sessions: None,
            sandbox: None,
            projects_lock: Mutex::new(()),
            files: files::FilePlace::Disk,
        }
    }

    /// Where the file tools reach files, for the diff a file edit's question shows.
    pub fn file_place(&self) -> &files::FilePlace {
        &self.files
    }

    /// The daemon's registry: the bash tools over `executor` (none at all when there
    /// is no executor: they are not offered, rather than offered and failing), the file
    /// tools (through the executor, so its containment holds for them too; the daemon's
    /// disk when there is none), and the waterfall audit -> schema -> policy -> external hooks -> permission gate.
    pub fn standard(
        config: &Config,
        executor: Option<Arc<dyn BashExecutor>>,
        sessions: Arc<SessionRegistry>,
        audit: Arc<AuditLog>,
    ) -> Self {
        let mut registry = Self::new();
        registry.sandbox = bash::SandboxTerms::of(&config.exec);
        if let Some(exec) = &executor {
            registry.files = files::FilePlace::Executor(exec.clone());
        }
        if let Some(exec) = executor {
            let sandbox = registry.sandbox.clone();
            for tool in bash::tools(exec, sessions.clone(), audit.clone(), sandbox) {
                registry.register(tool);
            }
        }
        for tool in files::tools(registry.files.clone()) {
            registry.register(tool);
        }
        if let Some(tool) = todo::tool() {
            registry.register(tool);
        }
        if registry
            .sandbox
            .as_ref()
            .is_some_and(|s| s.network == crate::config::NetworkMode::Proxy)
        {
            registry.register(network::NetworkTool::tool());
        }
        registry.audit = Some(audit);
        registry.sessions = Some(sessions);
        registry.install(config, &HookSet::default());
        registry
    }

    /// Builds the config's policy and hooks and puts the waterfall they make in place
    /// at once. Hooks whose config did not change are kept (a hook server keeps running);
    /// the others' servers are stopped by the caller with [`HookSet::stop_servers`] on
    /// what this returns.
    fn install(&self, config: &Config, old: &HookSet) -> Arc<Judges> {
        let _opening = self.projects_lock.lock().unwrap_or_else(|p| p.into_inner());
        // Every live session's project file is read again under the new config.
        let projects = Arc::new(ProjectLayers::new(config));
        for session in self.sessions.iter().flat_map(|s| s.sessions()) {
            projects.open(&session.id, &session.cwd);
        }
        for skipped in &config.hooks.skipped {
            tracing::warn!("claude_settings: skipped {skipped}");
        }
        let hooks = Arc::new(HookSet::reusing(&config.hooks.all(), config, old));
        let judges = Arc::new(Judges {
            version: policy_version(config, &hooks),
            policy: Arc::new(Policy::of_config(config)),
            hooks,
            projects,
        });
        let mut chain: Vec<Arc<dyn Hook>> = Vec::new();
        if let Some(audit) = &self.audit {
            chain.push(Arc::new(
                AuditHook::new(audit.clone(), judges.version.clone())
                    .with_projects(judges.projects.clone()),
            ));
        }
        chain.push(Arc::new(SchemaHook::new(
            self.schemas(),
            self.tools
                .iter()
                .filter(|t| t.internal())
                .map(|t| t.schema().name().to_string())
                .collect(),
            self.session_tools.clone(),
        )));
        let mut policy_hook = PolicyHook::new(judges.policy.clone())
            .with_shadow(shadow_policy(config))
            .with_session_tools(self.session_tools.clone())
            .with_projects(judges.projects.clone());
        if let Some(sandbox) = &self.sandbox {
            policy_hook = policy_hook.sandboxed(sandbox.writable.clone());
        }
        chain.extend(crate::hooks::judging_links(
            policy_hook,
            &judges.hooks,
            &judges.projects,
        ));
        chain.push(Arc::new(
            PermissionGate::new(judges.hooks.clone()).with_projects(judges.projects.clone()),
        ));
        self.waterfall.replace(chain);
        std::mem::replace(
            &mut *self.judges.write().unwrap_or_else(|p| p.into_inner()),
            judges,
        )
    }

    /// Replaces the policy and hooks with `config`'s (a live reload); returns the new
    /// version. Hook servers whose config changed or went are stopped; unchanged ones
    /// keep running.
    pub async fn reload(&self, config: &Config) -> String {
        let old = self.judges();
        let replaced = self.install(config, &old.hooks);
        let now = self.judges();
        replaced.hooks.stop_servers_not_in(&now.hooks).await;
        now.version.clone()
    }

    /// The policy and hooks in force now.
    pub fn judges(&self) -> Arc<Judges> {
        self.judges
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The configured hook programs (prompt and session_start events, hook servers).
    pub fn hooks(&self) -> Arc<HookSet> {
        self.judges().hooks.clone()
    }

    /// The hooks that apply to `session`: the user's, then its trusted project's.
    pub fn hooks_for(&self, session: &Session) -> Arc<HookSet> {
        let judges = self.judges();
        judges.projects.hooks_for(&session.id, &judges.hooks)
    }

    /// Reads the project file of `session`'s cwd, if any, and judges the session by it
    /// from now on; the layer, for its warnings and mode. A reload reads it again.
    ///
    /// The file is read and its hooks hashed off the lock a reload takes; under it the
    /// layer is only put in place, and only if no reload came meanwhile (then it is read
    /// again, under the new config). Blocking I/O: async callers use a blocking thread.
    pub fn open_project(&self, session: &Session) -> Option<Arc<SessionLayer>> {
        loop {
            let projects = self.judges().projects.clone();
            let layer = projects.load(&session.id, &session.cwd);
            let _opening = self.projects_lock.lock().unwrap_or_else(|p| p.into_inner());
            if Arc::ptr_eq(&self.judges().projects, &projects) {
                projects.put(&session.id, layer.clone());
                return layer;
            }
        }
    }

    /// The session's project layer in force, if its project has a file.
    pub fn project_of(&self, session_id: &str) -> Option<Arc<SessionLayer>> {
        self.judges().projects.get(session_id)
    }

    /// Forgets a session's project layer (the session is gone).
    pub fn forget_project(&self, session_id: &str) {
        self.judges().projects.forget(session_id);
    }

    /// The policy `session`'s calls are judged by: its project's layer, else the user's.
    pub fn policy_for(&self, session: Option<&Session>) -> Arc<Policy> {
        let judges = self.judges();
        session
            .and_then(|s| judges.projects.get(&s.id))
            .map(|l| l.policy.clone())
            .unwrap_or_else(|| judges.policy.clone())
    }

    /// The judgement a call of `tool` with `arguments` (bash's `command` or a file
    /// tool's `path`, and a `sandbox: "off"` with its `justification` when it asks to
    /// leave the sandbox) would get in `session` now, in `mode`: the policy, grants and
    /// place the policy hook would judge it with. `_dsh/policy/explain` and `/explain`
    /// answer with it. Nothing runs.
    pub fn explain(
        &self,
        session: Option<&Session>,
        tool: &str,
        arguments: &serde_json::Value,
        mode: crate::config::Mode,
    ) -> crate::policy::Judgement {
        let grants = session.map(|s| s.grants()).unwrap_or_default();
        let sandbox = self.sandbox.as_ref().map(|t| t.writable.as_slice());
        let at = crate::hooks::rules::SessionPlace::of_call(session, sandbox, tool, arguments);
        self.policy_for(session)
            .judge_in(tool, arguments, mode, &grants, Some(&at.place(false)))
    }

    /// The audit log `standard()`'s audit hook writes, for a refusal made after the
    /// waterfall (a wrapped agent's rewritten question).
    pub fn audit_log(&self) -> Option<&Arc<AuditLog>> {
        self.audit.as_ref()
    }

    /// What each audit line names as `policyVersion`.
    pub fn policy_version(&self) -> String {
        self.judges().version.clone()
    }

    /// Adds a tool after those already registered.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.push(tool);
    }

    /// The policy the waterfall's policy hook judges with: `explain` asks this same one, so
    /// its answer is the one a real call gets.
    pub fn policy(&self) -> Arc<Policy> {
        self.judges().policy.clone()
    }

    /// The waterfall, to add or reorder hooks.
    pub fn waterfall(&self) -> &Waterfall {
        &self.waterfall
    }

    /// Tool names in registration order.
    pub fn names(&self) -> Vec<String> {
        self.tools
            .iter()
            .map(|t| t.schema().name().to_string())
            .collect()
    }

    /// The tool definitions the model is given, in registration order.
    pub fn definitions(&self) -> Vec<serde_json::Value> {
        self.tools.iter().map(|t| t.schema().for_model()).collect()
    }

    /// The definitions a session's model is given: the registered tools, then the
    /// session's own (its MCP servers' that are still running).
    pub fn definitions_for(&self, session: &str) -> Vec<Arc<RawValue>> {
        let mut all: Vec<Arc<RawValue>> = self
            .tools
            .iter()
            .filter(|t| !t.internal())
            .map(|t| t.schema().model_definition().clone())
            .collect();
        all.extend(self.session_tools.definitions(session));
        all
    }

    /// A registered tool.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.schema().name() == name)
    }

    /// The tool `name` as `session` has it: a registered one or one of its own.
    pub fn get_in(&self, session: &str, name: &str) -> Option<Arc<dyn Tool>> {
        self.get(name)
            .cloned()
            .or_else(|| self.session_tools.get(session, name))
    }

    /// Where the sessions' own tools are kept (the MCP servers' tools go there).
    pub fn session_tools(&self) -> &Arc<SessionTools> {
        &self.session_tools
    }

    fn schemas(&self) -> HashMap<String, Arc<ToolSchema>> {
        self.tools
            .iter()
            .map(|t| (t.schema().name().to_string(), t.schema().clone()))
            .collect()
    }

    /// Runs one call through the waterfall and the tool. A pre_tool hook's rewrite sends
    /// the call through again, from the start, with the new arguments (once).
    pub async fn execute(&self, call: &ToolExecution) -> ToolOutput {
        self.waterfall.execute(call, self).await.0
    }
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait::async_trait]
impl Terminal for ToolRegistry {
    async fn execute(&self, call: &ToolExecution) -> ToolOutput {
        let tool = match &call.session {
            Some(session) => self.get_in(&session.id, &call.tool),
            None => self.get(&call.tool).cloned(),
        };
        match tool {
            Some(tool) => {
                call.report_running();
                tool.call(call).await
            }
            None => ToolOutput::error(format!("unknown tool `{}`", call.tool)),
        }
    }
}

/// The `[permissions] shadow` candidate's rules, if it names one that loads; one that
/// does not is logged and left out (it never affects a call).
fn shadow_policy(config: &Config) -> Option<Arc<Policy>> {
    let path = config.permissions.shadow.as_deref()?;
    match Config::load(Some(path)) {
        Ok(candidate) => Some(Arc::new(Policy::of_config(&candidate))),
        Err(e) => {
            tracing::error!(path = %path.display(), "the shadow policy cannot be read: {e}");
            None
        }
    }
}

/// A hash of the config in force (as TOML) and of every hook program's bytes: a
/// changed rule, setting or script gives another version.
fn policy_version(config: &Config, hooks: &HookSet) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(config.to_toml().unwrap_or_default());
    hooks.hash_programs(&mut hash);
    hash.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Longest title a call gets, in characters (a long command is cut and ends in `…`).
const TITLE_CHARS: usize = 120;

/// How a tool call reads in an editor. Built from the call's arguments alone, so a live
/// call and its replay from the session log read the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallView {
    /// One line: the command itself for `bash` (its first line, cut to 120 characters),
    /// `output of bash-3`, `kill bash-3`, else the tool's name.
    pub title: String,
    /// The model's `description` of the call, shown before the output.
    pub description: Option<String>,
    /// Where the call works: bash's workdir (resolved against the session's cwd), or
    /// the session's cwd.
    pub location: Option<PathBuf>,
    /// Its output reads as a terminal: a foreground `bash` command (shown as it comes)
    /// or a read of a background task's output.
    pub terminal: bool,
    /// The line of `location` the call is about (a read's offset, an edit's first line).
    pub line: Option<u32>,
    /// The change an edit or write makes, shown before the person is asked; set by the
    /// caller from [`files::preview`] (it needs the file, this view only the arguments).
    pub diff: Option<files::FileDiff>,
}

impl CallView {
    /// The view of a call of `tool` with `arguments` in a session working in `cwd`.
    pub fn of(tool: &str, arguments: &serde_json::Value, cwd: Option<&Path>) -> Self {
        let arg = |name| {
            arguments
                .get(name)
                .and_then(serde_json::Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
        };
        let title = match (tool, arg("command"), arg("task_id")) {
            ("bash", Some(command), _) => one_line(command, TITLE_CHARS),
            ("bash_output", _, Some(id)) => format!("output of {}", one_line(id, 60)),
            ("bash_kill", _, Some(id)) => format!("kill {}", one_line(id, 60)),
            (todo::NAME, _, _) => "Update the plan".to_string(),
            ("read_file" | "edit_file" | "write_file", _, _) if arg("path").is_some() => {
                let verb = match tool {
                    "read_file" => "Read",
                    "edit_file" => "Edit",
                    _ => "Write",
                };
                format!(
                    "{verb} {}",
                    one_line(arg("path").unwrap_or_default(), TITLE_CHARS)
                )
            }
            _ => tool.to_string(),
        };
        let file = files::is_file_tool(tool);
        let location = match (arg("workdir"), arg("path").filter(|_| file), cwd) {
            (_, Some(path), cwd) => Some(files::resolve(cwd.unwrap_or(Path::new("/")), path)),
            (Some(dir), None, Some(cwd)) => Some(cwd.join(dir)),
            (Some(dir), None, None) => Some(PathBuf::from(dir)),
            (None, None, cwd) => cwd.map(Path::to_path_buf),
        };
        let line = match tool {
            "read_file" => Some(
                arguments
                    .get("offset")
                    .and_then(serde_json::Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(1),
            ),
            _ => None,
        };
        let background = arguments
            .get("run_in_background")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        Self {
            title,
            description: arg("description").map(str::to_string),
            location,
            terminal: (tool == "bash" && !background) || tool == "bash_output",
            line,
            diff: None,
        }
    }

    /// The view with the change a file tool will make (its location follows the diff's line).
    pub fn with_diff(mut self, diff: Option<files::FileDiff>) -> Self {
        if let Some(d) = &diff {
            self.location = Some(d.path.clone());
            self.line = d.line;
        }
        self.diff = diff;
        self
    }
}

/// The first line of `text`, cut to `max` characters; `…` says something was left out.
fn one_line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default().trim_end();
    let more_lines = text.trim_end().contains('\n');
    let mut line: String = first.chars().take(max).collect();
    if more_lines || first.chars().count() > max {
        line.push('…');
    }
    line
}

/// `text` as a fenced code block, so editors that render Markdown show it verbatim:
/// the fence is longer than any run of backticks inside. A call's output is shown so by
/// the turn and by a wrapped agent's terminal alike.
pub fn fenced(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    let newline = if text.ends_with('\n') || text.is_empty() {
        ""
    } else {
        "\n"
    };
    format!("{fence}\n{text}{newline}{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bash_call_is_titled_by_its_command_and_keeps_its_description() {
        let v = CallView::of(
            "bash",
            &json!({"command": "cargo build --release", "description": "Build it", "workdir": "sub"}),
            Some(Path::new("/p")),
        );
        assert_eq!(v.title, "cargo build --release");
        assert_eq!(v.description.as_deref(), Some("Build it"));
        assert_eq!(v.location, Some(PathBuf::from("/p/sub")));
        assert!(v.terminal);
        let long = "x".repeat(200);
        let v = CallView::of("bash", &json!({"command": format!("{long}\necho 2")}), None);
        assert_eq!(v.title.chars().count(), 121);
        assert!(v.title.ends_with('…'));
        let v = CallView::of("bash", &json!({"command": "a\nb"}), None);
        assert_eq!(v.title, "a…");
        let v = CallView::of(
            "bash",
            &json!({"command": "sleep 9", "run_in_background": true}),
            None,
        );
        assert!(!v.terminal);
    }

    #[test]
    fn task_tools_name_the_task() {
        let id = json!({"task_id": "bash-3"});
        assert_eq!(
            CallView::of("bash_output", &id, None).title,
            "output of bash-3"
        );
        assert_eq!(CallView::of("bash_kill", &id, None).title, "kill bash-3");
        assert_eq!(CallView::of("bash", &json!({}), None).title, "bash");
        assert!(CallView::of("bash_output", &id, None).terminal);
        assert!(!CallView::of("bash_kill", &id, None).terminal);
    }
}
