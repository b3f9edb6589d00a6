//! dsh's own methods (`_dsh/*`), beside ACP's: a tool call as the user, a session's
//! tasks, the daemon's status, stop, and the policy's explanation of a command. Their
//! answers are typed here and shared with the CLI, which reads them.

use super::{AcpService, to_value};
use crate::config::Mode;
use crate::exec::{KillOutcome, TaskStatus};
use crate::policy::Judgement;
use crate::registry::TaskAccess;
use crate::rpc::{RequestContext, RpcError};
use crate::store::iso8601;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// `_dsh/tools/call` params: a tool call made by the user (or a script), not the model.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsCallParams {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<Value>,
    /// The session the call runs as; none: outside any session.
    #[serde(default)]
    pub session_id: Option<String>,
}

/// `_dsh/tools/call`'s answer, shaped like an MCP tool result.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsCallResult {
    pub content: Vec<TextBlock>,
    pub is_error: bool,
}

/// One text block of a [`ToolsCallResult`].
#[derive(Debug, Serialize, Deserialize)]
pub struct TextBlock {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

/// Params naming one session.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionParams {
    pub session_id: String,
}

/// `_dsh/tasks/kill` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskKillParams {
    pub task_id: String,
    /// Kill as this session: only its own tasks (T13). Without it, as the local user,
    /// who owns every task (the socket is theirs alone).
    #[serde(default)]
    pub session_id: Option<String>,
}

/// `_dsh/tasks/kill`'s answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskKillResponse {
    /// `killed` or `already_finished`.
    pub outcome: String,
}

/// `_dsh/session/revoke` params: the prefix as a command (`git push`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevokeParams {
    pub session_id: String,
    pub prefix: String,
}

/// `_dsh/user/revoke` params: the prefix as a command (`git push`).
#[derive(Debug, Deserialize)]
pub struct UserRevokeParams {
    pub prefix: String,
}

/// `_dsh/session/grants`'s answer: the "always" answers that apply to the session (its
/// own and the user's), as command prefixes; `_dsh/user/grants`'s: the user's alone.
#[derive(Debug, Serialize, Deserialize)]
pub struct GrantsResponse {
    pub allowed: Vec<String>,
    pub rejected: Vec<String>,
}

impl GrantsResponse {
    /// The lists as command prefixes.
    pub fn of(allowed: &[crate::policy::Grant], rejected: &[crate::policy::Grant]) -> Self {
        let shown = |list: &[crate::policy::Grant]| list.iter().map(|g| g.display()).collect();
        Self {
            allowed: shown(allowed),
            rejected: shown(rejected),
        }
    }
}

/// `_dsh/tasks/list`'s answer: the session's tasks, oldest first.
#[derive(Debug, Serialize, Deserialize)]
pub struct TasksResponse {
    pub tasks: Vec<TaskSummary>,
}

/// One background task as `_dsh/*` answers show it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSummary {
    pub task_id: crate::exec::TaskId,
    pub command: String,
    /// `running`, `completed`, `killed` or `lost`.
    pub status: String,
    pub started_at: String,
    pub started_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal's name, when one ended the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// The owning session (`_dsh/status` only; absent in a session's own list, and
    /// null for a task no session owns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Option<String>>,
    /// It runs (or ran) outside the sandbox: the person let it out (issue 27).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outside_sandbox: bool,
    /// Connections it holds open through the sandbox's network proxy (E10).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub proxied_connections: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// `_dsh/status`'s answer, read by `dsh status`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusResponse {
    pub version: String,
    pub pid: u32,
    pub uptime_ms: u64,
    /// When the daemon started (unix ms, and as ISO 8601 UTC): `dsh acp` compares it
    /// with the binary on disk.
    #[serde(default)]
    pub started_at_ms: u64,
    #[serde(default)]
    pub started_at: String,
    /// The state directory and what it holds per kind.
    #[serde(default)]
    pub state_dir: PathBuf,
    #[serde(default)]
    pub state: crate::state_dir::Usage,
    /// `local`, `sandbox`, `ssh` or `none`.
    pub executor: String,
    pub connections: usize,
    pub sessions: Vec<SessionStatus>,
    pub running_tasks: Vec<TaskSummary>,
    /// How the check after each local command's exit went (`exec::children`).
    #[serde(default)]
    pub exit_checks: crate::exec::children::ExitChecks,
    /// [`crate::config::Config::fingerprint`] of the config in force: `dsh exec --config`
    /// runs on this daemon only when its candidate has the same one. `None` from a
    /// daemon older than the field.
    #[serde(default)]
    pub config_fingerprint: Option<String>,
}

/// `_dsh/state/gc` params.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GcParams {
    /// Say what would go, remove nothing.
    pub dry_run: bool,
}

/// One session in [`StatusResponse`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStatus {
    pub session_id: String,
    pub cwd: PathBuf,
    pub mode: String,
    /// `prompting` or `idle`.
    pub state: String,
    /// Bound to a live connection.
    pub connected: bool,
    /// Closed by its client and kept until loaded again (its tasks run on).
    #[serde(default)]
    pub closed: bool,
}

/// `_dsh/policy/explain` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExplainParams {
    /// bash's command line (with no `tool`, or `tool: "bash"`).
    #[serde(default)]
    pub command: String,
    /// `read_file`, `edit_file` or `write_file` with `path`: a file tool's call,
    /// judged by the policy and, under the sandbox, by its layout (issue 39).
    #[serde(default)]
    pub tool: Option<String>,
    /// The file tool's path, resolved against the session's cwd.
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
    /// `ask`, `auto` or `read-only`; default: the session's, else the config's.
    #[serde(default)]
    pub mode: Option<String>,
    /// The call's `sandbox` argument (`"off"`: it asks to run outside the sandbox, which
    /// under the sandbox executor is judged as such; see issue 27).
    #[serde(default)]
    pub sandbox: Option<Value>,
    /// The call's `justification`, with `sandbox`.
    #[serde(default)]
    pub justification: Option<String>,
}

/// `_dsh/policy/explain`'s answer.
#[derive(Debug, Serialize)]
pub struct ExplainResponse {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// A file tool's call: the tool and its resolved path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    pub mode: &'static str,
    pub judgement: Judgement,
    /// A file tool's call: the entry of the executor's containment that decides the
    /// path (as the CLI's `dsh policy explain` shows it), when the executor has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containment: Option<crate::containment::Containment>,
    /// The session's project file, when one adds rules to its judge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<PathBuf>,
    /// What of that project file was left out, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl AcpService {
    pub(super) async fn tools_call(
        &self,
        ctx: RequestContext,
        p: ToolsCallParams,
    ) -> Result<Value, RpcError> {
        let session = self.optional_session(&ctx, p.session_id.as_deref())?;
        let arguments = p.arguments.unwrap_or_else(|| json!({}));
        let out = self
            .run_tool(session.as_ref(), &p.name, arguments, ctx.cancel.clone())
            .await;
        to_value(ToolsCallResult {
            content: vec![TextBlock {
                kind: "text".into(),
                text: out.text,
            }],
            is_error: out.is_error,
        })
    }

    pub(super) async fn tasks_list(
        &self,
        ctx: RequestContext,
        p: SessionParams,
    ) -> Result<Value, RpcError> {
        self.addressable(&ctx, &p.session_id)?;
        let mut tasks: Vec<TaskSummary> = self
            .sessions
            .tasks_of(&p.session_id)
            .into_iter()
            .filter_map(|t| self.executor.as_ref()?.get(t))
            .map(|t| self.task_summary(&t, None))
            .collect();
        tasks.sort_by_key(|t| t.started_at_ms);
        to_value(TasksResponse { tasks })
    }

    pub(super) async fn tasks_kill(
        &self,
        ctx: RequestContext,
        p: TaskKillParams,
    ) -> Result<Value, RpcError> {
        // The wire's text becomes a TaskId here, once.
        let task_id = match p.task_id.parse::<crate::exec::TaskId>() {
            Ok(id) => id,
            Err(e) => return Err(RpcError::invalid_params(format!("invalid taskId: {e}"))),
        };
        let unknown = || RpcError::not_found(format!("unknown bash task \"{task_id}\""));
        if let Some(session) = &p.session_id {
            self.addressable(&ctx, session)?;
            match self.sessions.check_task_access(task_id, Some(session)) {
                TaskAccess::Allowed => {}
                // Another session's task is as unknown to this one (T13).
                TaskAccess::Refused | TaskAccess::Unknown => return Err(unknown()),
            }
        }
        let exec = self.executor.as_ref().ok_or_else(unknown)?;
        let outcome = match exec.kill(task_id).await {
            KillOutcome::Killed => "killed",
            KillOutcome::AlreadyFinished => "already_finished",
            KillOutcome::Unknown => return Err(unknown()),
        };
        to_value(TaskKillResponse {
            outcome: outcome.into(),
        })
    }

    /// `_dsh/status`; `{"stateUsage": false}` leaves out the walk of the state
    /// directory (`dsh stop` wants only the pid).
    pub(super) async fn status(&self, _ctx: RequestContext, p: Value) -> Result<Value, RpcError> {
        let running_tasks = self
            .executor
            .as_ref()
            .map(|e| e.running())
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                let owner = self.sessions.owner(t.id).flatten();
                self.task_summary(&t, Some(owner))
            })
            .collect();
        let sessions = self
            .sessions
            .sessions()
            .into_iter()
            .map(|s| SessionStatus {
                state: if self.live.prompting(&s.id) {
                    "prompting"
                } else {
                    "idle"
                }
                .into(),
                connected: self.live.bound_to(&s.id).is_some(),
                closed: self.live.is_closed(&s.id),
                mode: s.mode().id().into(),
                cwd: s.cwd.clone(),
                session_id: s.id.clone(),
            })
            .collect();
        // A walk of the state directory (a spill directory may hold 100 000 files):
        // on a blocking thread, never on the async workers.
        let state_dir = self.state_dir.clone();
        let state = if p.get("stateUsage").and_then(Value::as_bool) == Some(false) {
            crate::state_dir::Usage::default()
        } else {
            let dir = state_dir.clone();
            tokio::task::spawn_blocking(move || crate::state_dir::usage(&dir))
                .await
                .unwrap_or_default()
        };
        let started_at_ms = self
            .started_at
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default();
        to_value(StatusResponse {
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
            uptime_ms: self.started.elapsed().as_millis() as u64,
            started_at_ms,
            started_at: iso8601(started_at_ms),
            state_dir,
            state,
            executor: self.executor_kind().into(),
            connections: self.connections.len(),
            sessions,
            running_tasks,
            exit_checks: crate::exec::children::exit_checks(),
            config_fingerprint: Some(
                self.config
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .fingerprint(),
            ),
        })
    }

    /// `_dsh/state/gc`: applies the `[state]` limits now, on a blocking thread (after
    /// any sweep already running), and says what was removed.
    pub(super) async fn state_gc(
        &self,
        _ctx: RequestContext,
        p: GcParams,
    ) -> Result<Value, RpcError> {
        let keeper = self.keeper.clone();
        let report = tokio::task::spawn_blocking(move || keeper.collect(p.dry_run))
            .await
            .map_err(|e| RpcError::internal(format!("the collection failed: {e}")))?;
        to_value(report)
    }

    /// `_dsh/config/reload`: see [`AcpService::reload`]; a config that fails is an
    /// invalid-params error listing why, and the old one stays in force.
    pub(super) async fn config_reload(
        &self,
        _ctx: RequestContext,
        _p: Value,
    ) -> Result<Value, RpcError> {
        match self.reload().await {
            Ok(done) => to_value(done),
            Err(errors) => Err(RpcError::invalid_params(format!(
                "the config was not reloaded:\n{}",
                errors.join("\n")
            ))),
        }
    }

    pub(super) async fn session_grants(
        &self,
        ctx: RequestContext,
        p: SessionParams,
    ) -> Result<Value, RpcError> {
        let session = self.addressable(&ctx, &p.session_id)?;
        to_value(GrantsResponse::of(&session.grants(), &session.rejections()))
    }

    /// `_dsh/session/revoke`: forgets the session's "always" answer for a prefix (logged,
    /// so it stays forgotten after a load).
    pub(super) async fn session_revoke(
        &self,
        ctx: RequestContext,
        p: RevokeParams,
    ) -> Result<Value, RpcError> {
        let session = self.addressable(&ctx, &p.session_id)?;
        // As shown: `git push`, or `network HOST` for a host.
        let named = crate::policy::Grant::named(&p.prefix);
        let revoked: Vec<_> = named.iter().filter(|g| session.revoke(g)).collect();
        if revoked.is_empty() {
            let user = session.user_grants();
            let (allowed, rejected) = (user.allowed(), user.rejected());
            let why = if named
                .iter()
                .any(|g| allowed.contains(g) || rejected.contains(g))
            {
                "it is the user's (`dsh policy grants --revoke`)"
            } else {
                "none in this session"
            };
            return Err(RpcError::not_found(format!(
                "no grant or rejection of `{}` to revoke here: {why}",
                p.prefix
            )));
        }
        if let Some(log) = self.log_of(&session.id) {
            for prefix in revoked {
                self.append(
                    &log,
                    crate::store::Event::Revoke {
                        at_ms: crate::store::now_ms(),
                        prefix: prefix.clone(),
                    },
                );
            }
        }
        Ok(json!({}))
    }

    /// `_dsh/user/grants`: the user's own "always" answers (`remember = "user"`), which
    /// apply to every session.
    pub(super) async fn user_grants(
        &self,
        _ctx: RequestContext,
        _p: Value,
    ) -> Result<Value, RpcError> {
        let user = self.sessions.user_grants();
        to_value(GrantsResponse::of(&user.allowed(), &user.rejected()))
    }

    /// `_dsh/user/revoke {prefix}`: forgets one of the user's own "always" answers, for
    /// every session, in the file too.
    pub(super) async fn user_revoke(
        &self,
        _ctx: RequestContext,
        p: UserRevokeParams,
    ) -> Result<Value, RpcError> {
        // The file is rewritten and synced: on a blocking thread, as an "always" answer is.
        let user = self.sessions.user_grants().clone();
        let prefix = p.prefix.clone();
        let found = tokio::task::spawn_blocking(move || {
            let mut found = false;
            for grant in crate::policy::Grant::named(&prefix) {
                found |= user.revoke(&grant)?;
            }
            Ok::<bool, String>(found)
        })
        .await
        .map_err(|e| RpcError::internal(e.to_string()))?
        .map_err(RpcError::internal)?;
        if found {
            Ok(json!({}))
        } else {
            Err(RpcError::not_found(format!(
                "no user grant or rejection of `{}`",
                p.prefix
            )))
        }
    }

    pub(super) async fn stop(&self, _ctx: RequestContext, _p: Value) -> Result<Value, RpcError> {
        self.shutdown.cancel();
        Ok(json!({}))
    }

    /// `_dsh/policy/explain {sessionId?, command, mode?, sandbox?, justification?}`: the
    /// judgement a bash call of `command` would get now, from the very policy the
    /// waterfall's hook uses, with the session's mode, grants and place (or the config's
    /// default mode and none), `mode` taking precedence. Nothing runs.
    pub(super) async fn policy_explain(
        &self,
        ctx: RequestContext,
        p: ExplainParams,
    ) -> Result<Value, RpcError> {
        let session = self.optional_session(&ctx, p.session_id.as_deref())?;
        let mode = match &p.mode {
            None => session
                .as_ref()
                .map(|s| s.mode())
                .unwrap_or(self.sessions.default_mode()),
            Some(id) => Mode::from_id(id).ok_or_else(|| {
                RpcError::invalid_params(format!("unknown mode `{id}` (ask, auto, read-only)"))
            })?,
        };
        let tool = p.tool.clone().unwrap_or_else(|| "bash".into());
        let file = crate::tools::files::is_file_tool(&tool);
        let path = match (file, &p.path, &session) {
            (false, _, _) if tool != "bash" => {
                return Err(RpcError::invalid_params(format!(
                    "unknown tool `{tool}` (bash, read_file, edit_file, write_file)"
                )));
            }
            (false, _, _) => None,
            (true, None, _) => return Err(RpcError::invalid_params("a file tool needs `path`")),
            (true, Some(path), Some(s)) => Some(crate::tools::files::resolve(&s.cwd, path)),
            (true, Some(path), None) if Path::new(path).is_absolute() => {
                Some(crate::tools::files::resolve(Path::new("/"), path))
            }
            (true, Some(_), None) => {
                return Err(RpcError::invalid_params(
                    "a relative `path` needs a `sessionId` to resolve it against",
                ));
            }
        };
        let mut arguments = match &path {
            Some(path) => json!({ "path": path }),
            None => json!({ "command": p.command }),
        };
        if let Some(sandbox) = &p.sandbox {
            arguments["sandbox"] = sandbox.clone();
            arguments["justification"] = p.justification.clone().unwrap_or_default().into();
        }
        let judgement = self
            .tools
            .explain(session.as_deref(), &tool, &arguments, mode);
        let containment = match (&path, &self.executor) {
            (Some(path), Some(exec)) => {
                let intent = if crate::tools::files::writes(&tool) {
                    crate::exec::FileIntent::Write
                } else {
                    crate::exec::FileIntent::Read
                };
                let request = crate::exec::FileRequest {
                    path: path.clone(),
                    writable_roots: session
                        .as_ref()
                        .map(|s| s.writable_roots())
                        .unwrap_or_default(),
                };
                // The same check a call makes; a refusal names its entry as well.
                match exec.file_containment(&request, intent).await {
                    Ok(decided) => decided,
                    Err(refused) => refused.containment(),
                }
            }
            _ => None,
        };
        let project = session.as_ref().and_then(|s| self.tools.project_of(&s.id));
        to_value(ExplainResponse {
            command: p.command,
            tool: file.then_some(tool),
            path,
            mode: mode.id(),
            judgement,
            containment,
            project: project.as_ref().map(|l| l.project.file.clone()),
            warnings: project
                .map(|l| l.project.warnings.clone())
                .unwrap_or_default(),
        })
    }
}

impl crate::agent::commands::SessionControl for AcpService {
    fn tasks(&self, session: &str) -> Vec<crate::agent::commands::TaskLine> {
        let mut tasks: Vec<TaskSummary> = self
            .sessions
            .tasks_of(session)
            .into_iter()
            .filter_map(|t| self.executor.as_ref()?.get(t))
            .map(|t| task_summary(&t, None))
            .collect();
        tasks.sort_by_key(|t| t.started_at_ms);
        tasks
            .into_iter()
            .map(|t| {
                let status = match (&t.exit_code, &t.signal) {
                    (Some(code), _) => format!("{} (exit {code})", t.status),
                    (_, Some(signal)) => format!("{} ({signal})", t.status),
                    _ => t.status.clone(),
                };
                crate::agent::commands::TaskLine {
                    id: t.task_id.to_string(),
                    status,
                    command: t.command,
                }
            })
            .collect()
    }

    fn status(&self) -> String {
        let running = self
            .executor
            .as_ref()
            .map(|e| e.running())
            .unwrap_or_default();
        format!(
            "dsh {} (pid {}), executor {}, up {}s\n{} connection(s), {} session(s), {} running task(s)",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            self.executor_kind(),
            self.started.elapsed().as_secs(),
            self.connections.len(),
            self.sessions.sessions().len(),
            running.len(),
        )
    }
}

impl AcpService {
    /// A task as `_dsh/*` answers show it, saying whether it runs outside the sandbox.
    fn task_summary(
        &self,
        t: &crate::exec::TaskInfo,
        owner: Option<Option<String>>,
    ) -> TaskSummary {
        let outside = self.executor.as_ref().and_then(|e| e.outside());
        let proxied = self
            .executor
            .as_ref()
            .map(|e| e.proxied_connections())
            .unwrap_or_default();
        TaskSummary {
            outside_sandbox: outside.is_some_and(|o| o.get(t.id).is_some()),
            proxied_connections: proxied
                .iter()
                .find(|(task, _)| *task == t.id.to_string())
                .map_or(0, |(_, open)| *open),
            ..task_summary(t, owner)
        }
    }
}

/// A task as the `_dsh/*` answers show it; `owner` only where the answer names owners.
fn task_summary(t: &crate::exec::TaskInfo, owner: Option<Option<String>>) -> TaskSummary {
    let started_at_ms = t
        .started_at
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default();
    let (status, exit_code, signal) = match t.status {
        TaskStatus::Running => ("running", None, None),
        TaskStatus::Completed { exit_code } => ("completed", Some(exit_code), None),
        TaskStatus::Killed { signal } => {
            ("killed", None, signal.map(crate::tools::bash::signal_name))
        }
        TaskStatus::Lost => ("lost", None, None),
    };
    TaskSummary {
        task_id: t.id,
        command: t.command.clone(),
        status: status.into(),
        started_at: iso8601(started_at_ms),
        started_at_ms,
        exit_code,
        signal,
        owner,
        outside_sandbox: false,
        proxied_connections: 0,
    }
}
