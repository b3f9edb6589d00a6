//! The policy hook: the configured rules and the session's mode, applied to every
//! call (see [`crate::hooks::policy`] for how a call is judged).

use super::project::ProjectLayers;
use super::waterfall::{Hook, Next, Passed, ToolExecution, TraceEntry};
use crate::config::{Decision, HookEvent, Mode};
use crate::policy::{Cause, Judgement, Place, Policy};
use crate::registry::Session;
use std::path::PathBuf;
use std::sync::Arc;

/// What a session's own tools (its MCP servers') say of themselves; the registry's
/// `SessionTools` answers. A trait so the hooks need not know the tools.
pub trait ToolHints: Send + Sync {
    /// `session`'s tool `tool` says it only reads (an MCP tool's `readOnlyHint`).
    fn read_only_hint(&self, session: &str, tool: &str) -> bool;
}

/// Vetoes what the policy denies and marks what it wants asked.
pub struct PolicyHook {
    policy: Arc<Policy>,
    /// The `[permissions] shadow` rules: judged beside, traced, never applied.
    shadow: Option<Arc<Policy>>,
    /// The mode of a call made outside any session.
    sessionless_mode: Mode,
    /// Under the sandbox executor, the config's writable roots (`[exec.sandbox]
    /// writable`): with a session's own roots, where file tools may write at all.
    sandbox_writable: Option<Vec<PathBuf>>,
    /// The sessions' own tools (MCP servers'), for what they say of themselves.
    session_tools: Option<Arc<dyn ToolHints>>,
    /// Sessions whose project file adds rules are judged by their layer's policy.
    projects: Option<Arc<ProjectLayers>>,
}

impl PolicyHook {
    pub fn new(policy: Arc<Policy>) -> Self {
        Self {
            policy,
            shadow: None,
            sessionless_mode: Mode::Ask,
            sandbox_writable: None,
            session_tools: None,
            projects: None,
        }
    }

    /// Looks up a session's own tools for their `readOnlyHint` (read-only mode may allow
    /// such a tool when a rule does).
    pub fn with_session_tools(mut self, tools: Arc<dyn ToolHints>) -> Self {
        self.session_tools = Some(tools);
        self
    }

    /// Judges a session with a project file by its layer's policy (user + project rules).
    pub fn with_projects(mut self, projects: Arc<ProjectLayers>) -> Self {
        self.projects = Some(projects);
        self
    }

    /// The executor is the sandbox: file writes outside its writable roots (the
    /// session's and these) are denied, as a command's would fail there.
    pub fn sandboxed(mut self, writable: Vec<PathBuf>) -> Self {
        self.sandbox_writable = Some(writable);
        self
    }

    /// Judges every call with `shadow` too and traces what it would decide.
    pub fn with_shadow(mut self, shadow: Option<Arc<Policy>>) -> Self {
        self.shadow = shadow;
        self
    }
}

#[async_trait::async_trait]
impl Hook for PolicyHook {
    fn name(&self) -> &str {
        "policy"
    }

    async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> Passed {
        let started = std::time::Instant::now();
        let (mode, grants) = match &call.session {
            Some(s) => (s.mode(), s.grants()),
            None => (self.sessionless_mode, Vec::new()),
        };
        let at = SessionPlace::of_call(
            call.session.as_deref(),
            self.sandbox_writable.as_deref(),
            &call.tool,
            &call.arguments,
        );
        let file_path = crate::policy::FILE_TOOLS
            .contains(&call.tool.as_str())
            .then(|| call.arguments.get("path").and_then(|p| p.as_str()))
            .flatten();
        // A file tool is judged by where its path really is (links followed), against the
        // roots as they really are: a link in the cwd pointing out is judged out.
        let (arguments, at) = match file_path {
            Some(raw) => {
                let at = at.real();
                let path = crate::fsutil::real_path(&crate::policy::resolve_path(&at.cwd, raw));
                let mut arguments = call.arguments.clone();
                if let Some(args) = arguments.as_object_mut() {
                    args.insert("path".into(), path.to_string_lossy().into_owned().into());
                }
                (arguments, at)
            }
            None => (call.arguments.clone(), at),
        };
        let read_only_tool = match (&self.session_tools, &call.session) {
            (Some(tools), Some(session)) => tools.read_only_hint(&session.id, &call.tool),
            _ => false,
        };
        let place = at.place(read_only_tool);
        let layer = match (&self.projects, &call.session) {
            (Some(projects), Some(session)) => projects.get(&session.id),
            _ => None,
        };
        let policy = layer.as_ref().map_or(&self.policy, |l| &l.policy);
        let judgement = policy.judge_in(&call.tool, &arguments, mode, &grants, Some(&place));
        // Tightened by a rule naming the agent's tool: its ask is a rule's, not the mode's.
        let (judgement, by_own_name) = match call.agent_tool.as_deref() {
            Some(own) if own != call.tool => {
                let own = policy.judge_in(own, &arguments, mode, &grants, Some(&place));
                by_agents_name(judgement, own)
            }
            _ => (judgement, false),
        };
        call.record(TraceEntry {
            name: self.name().into(),
            event: HookEvent::PreTool,
            decision: judgement.decision.into(),
            reason: judgement.reason.clone(),
            ms: started.elapsed().as_millis() as u64,
            enforced: true,
        });
        if let Some(shadow) = &self.shadow {
            let started = std::time::Instant::now();
            // Judged exactly as the enforced rules judge, so they differ only by their rules.
            let judged = shadow.judge_in(&call.tool, &arguments, mode, &grants, Some(&place));
            call.record(TraceEntry {
                name: "shadow policy".into(),
                event: HookEvent::PreTool,
                decision: judged.decision.into(),
                reason: judged.reason,
                ms: started.elapsed().as_millis() as u64,
                enforced: false,
            });
        }
        let judgement = Arc::new(judgement);
        call.set_judged(mode, grants, judgement.clone());
        if judgement.decision == Decision::Deny {
            return call.veto(self.name(), &judgement.reason).into();
        }
        call.tighten_as(
            judgement.decision,
            self.name(),
            &judgement.reason,
            judgement.grants_on_allow_always.clone(),
            asks_only_by_mode(&judgement) && !by_own_name,
        );
        next.run(call).await
    }
}

/// A wrapped agent's call judged under dsh's tool name (`judged`) and under the agent's
/// own (`own`, issue 44: `tool = "Bash"` names Claude Code's Bash): a rule naming the
/// agent's tool decides too when it is stricter. Only a rule's word counts (the mode's
/// default for an unknown tool would ask about everything), and it can only tighten, so
/// an allow rule for `Bash` never lets through what the `bash` rules ask about. An ask
/// it adds grants nothing on "always" (the person is asked again next time). Whether
/// the agent's name decided.
fn by_agents_name(judged: Judgement, own: Judgement) -> (Judgement, bool) {
    let by_rule = matches!(own.cause, Cause::Rule { .. });
    if !by_rule || own.decision <= judged.decision {
        return (judged, false);
    }
    let tightened = Judgement {
        decision: own.decision,
        reason: own.reason,
        cause: own.cause,
        grants_on_allow_always: Vec::new(),
        ..judged
    };
    (tightened, true)
}

/// Where a call's session works, owned (what [`Place`] borrows): its cwd, its roots and,
/// under the sandbox, the sandbox's writable roots. The policy hook and `explain`
/// ([`crate::tools::ToolRegistry::explain`]) build it alike, so they judge a call alike.
pub struct SessionPlace {
    pub cwd: PathBuf,
    pub roots: Vec<PathBuf>,
    /// `Some` under the sandbox executor: the session's roots and `[exec.sandbox]
    /// writable`.
    pub sandbox_roots: Option<Vec<PathBuf>>,
    /// Patterns of the line expanded against the disk, from `cwd` (P6).
    globs: DiskGlobs,
}

impl SessionPlace {
    /// The place of `session` (none: no cwd and no root, so every file write is asked),
    /// with `sandbox_writable` when commands run in the sandbox.
    pub fn of(session: Option<&Session>, sandbox_writable: Option<&[PathBuf]>) -> Self {
        Self::new(
            session
                .map(|s| s.cwd.clone())
                .unwrap_or_else(|| PathBuf::from("/")),
            session.map(|s| s.writable_roots()).unwrap_or_default(),
            sandbox_writable,
        )
    }

    /// The place a call of `tool` with `arguments` is judged in: [`SessionPlace::of`],
    /// with a `bash` call's `workdir` as its cwd (T2: a relative one is taken from the
    /// session's), since the command runs there and its patterns expand there (P6): a
    /// pattern judged from the session's cwd could match nothing there and be a program
    /// name in the workdir.
    pub fn of_call(
        session: Option<&Session>,
        sandbox_writable: Option<&[PathBuf]>,
        tool: &str,
        arguments: &serde_json::Value,
    ) -> Self {
        let mut place = Self::of(session, sandbox_writable);
        let workdir = (tool == "bash")
            .then(|| arguments.get("workdir").and_then(|w| w.as_str()))
            .flatten()
            .filter(|w| !w.is_empty());
        if let Some(dir) = workdir {
            let cwd = place.cwd.join(dir);
            place.globs = DiskGlobs { cwd: cwd.clone() };
            place.cwd = cwd;
        }
        place
    }

    /// A session working in `cwd` that may write to `roots`, with `sandbox_writable`
    /// (`[exec.sandbox] writable`) when commands run in the sandbox.
    pub fn new(cwd: PathBuf, roots: Vec<PathBuf>, sandbox_writable: Option<&[PathBuf]>) -> Self {
        let sandbox_roots = sandbox_writable.map(|extra| {
            let mut all = roots.clone();
            all.extend(extra.iter().cloned());
            all
        });
        Self {
            globs: DiskGlobs { cwd: cwd.clone() },
            cwd,
            roots,
            sandbox_roots,
        }
    }

    /// The patterns of a line expanded against the disk from this place's cwd, for a
    /// caller that judges without a session (`dsh policy replay`), as the hook does.
    pub fn globs(&self) -> &dyn crate::policy::globs::Globs {
        &self.globs
    }

    /// The same place with every symbolic link followed (a file tool is judged by where
    /// its path really is, against the roots as they really are).
    fn real(self) -> Self {
        let real = |p: &PathBuf| crate::fsutil::real_path(p);
        let cwd = real(&self.cwd);
        Self {
            globs: DiskGlobs { cwd: cwd.clone() },
            cwd,
            roots: self.roots.iter().map(real).collect(),
            sandbox_roots: self.sandbox_roots.map(|all| all.iter().map(real).collect()),
        }
    }

    /// What the judge reads.
    pub fn place(&self, read_only_tool: bool) -> Place<'_> {
        Place {
            cwd: &self.cwd,
            roots: &self.roots,
            sandbox_roots: self.sandbox_roots.as_deref(),
            read_only_tool,
            globs: Some(&self.globs),
        }
    }
}

/// Most directory entries one pattern may make the judge read, and most paths it may
/// give: a pattern over more cannot be expanded here, and the judge assumes the worst
/// (see [`crate::policy::globs`]).
const GLOB_MAX_ENTRIES: usize = 4096;
const GLOB_MAX_PATHS: usize = 256;

/// Pathname expansion over the real file system, from a session's cwd, as bash does it
/// when the line runs (P6): the judge is pure, so the hook reads the directories for it.
/// A file the line itself creates is not there yet: the judge's safety net covers what
/// it can see, and the sandbox is the containment for the rest.
#[derive(Debug)]
struct DiskGlobs {
    cwd: PathBuf,
}

impl crate::policy::globs::Globs for DiskGlobs {
    fn expand(&self, pattern: &str) -> Option<Vec<String>> {
        use crate::policy::globs::{is_pattern, matches};
        let absolute = pattern.starts_with('/');
        let start = if absolute {
            (PathBuf::from("/"), "/".to_owned())
        } else {
            (self.cwd.clone(), String::new())
        };
        let spell = |before: &str, name: &str| match before {
            "" => name.to_owned(),
            "/" => format!("/{name}"),
            _ => format!("{before}/{name}"),
        };
        let mut found = vec![start];
        let mut budget = GLOB_MAX_ENTRIES;
        for component in pattern.split('/').filter(|c| !c.is_empty()) {
            let mut next = Vec::new();
            for (dir, spelled) in &found {
                if !is_pattern(component) {
                    next.push((dir.join(component), spell(spelled, component)));
                    continue;
                }
                let Ok(entries) = std::fs::read_dir(dir) else {
                    continue;
                };
                for entry in entries {
                    budget = budget.checked_sub(1)?;
                    let name = entry.ok()?.file_name();
                    // A name that is not UTF-8 cannot be matched here: assume the worst.
                    let name = name.to_str()?;
                    if name.starts_with('.') && !component.starts_with('.') {
                        continue;
                    }
                    if matches(component, name) {
                        next.push((dir.join(name), spell(spelled, name)));
                    }
                }
            }
            if next.len() > GLOB_MAX_PATHS {
                return None;
            }
            found = next;
        }
        Some(
            found
                .into_iter()
                .filter(|(path, _)| path.symlink_metadata().is_ok())
                .map(|(_, spelled)| spelled)
                .collect(),
        )
    }
}

/// Whether every ask in `judgement` is the mode's default: no rule, opaque segment or
/// unknown wrapper asked.
fn asks_only_by_mode(judgement: &Judgement) -> bool {
    let by_mode = |cause: &Cause| matches!(cause, Cause::Mode { .. });
    if judgement.segments.is_empty() {
        return by_mode(&judgement.cause);
    }
    judgement
        .segments
        .iter()
        .filter(|s| s.decision == Decision::Ask)
        .all(|s| by_mode(&s.cause))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PermissionRule, PermissionsConfig};
    use crate::hooks::waterfall::ToolOutput;
    use crate::hooks::waterfall::{Terminal, Waterfall};
    use crate::registry::SessionRegistry;
    use tokio_util::sync::CancellationToken;

    /// Stands for the tool: reaching it means the hooks let the call through.
    struct Reached;

    #[async_trait::async_trait]
    impl Terminal for Reached {
        async fn execute(&self, _call: &ToolExecution) -> ToolOutput {
            ToolOutput::ok("reached")
        }
    }

    /// The command lines the fuzzer starts from (fuzz/seeds/shell_judge) and the issue's
    /// walk-around families.
    fn lines() -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/shell_judge");
        let mut lines: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| {
                let bytes = std::fs::read(entry.unwrap().path()).unwrap();
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .collect();
        lines.extend(
            [
                "nice --adj 5 rm x",
                "bash <<< 'rm x'",
                "source <(echo rm x)",
                "flock f rm x",
                "git status",
                "ls | wc -l",
                "$X y",
            ]
            .map(String::from),
        );
        lines
    }

    /// The hook decides exactly what `Policy::judge` (and so `explain`) says, in every mode.
    #[tokio::test]
    async fn the_hook_and_explain_agree_over_the_fuzz_seeds() {
        let rule = |command: &str, action| PermissionRule {
            tool: "bash".into(),
            command: Some(command.into()),
            action,
            ..PermissionRule::default()
        };
        let policy = Arc::new(Policy::new(&PermissionsConfig {
            rules: vec![
                rule("rm", Decision::Deny),
                rule("git status", Decision::Allow),
                rule("curl", Decision::Ask),
            ],
            ..PermissionsConfig::default()
        }));
        let waterfall = Waterfall::new();
        waterfall.push(Arc::new(PolicyHook::new(policy.clone())));
        let sessions = SessionRegistry::new(Mode::Ask);
        let session = sessions.create(std::env::temp_dir());
        for mode in [Mode::Ask, Mode::Auto, Mode::ReadOnly] {
            session.set_mode(mode);
            for line in lines() {
                let arguments = serde_json::json!({ "command": line });
                let explained = policy.judge("bash", &arguments, mode, &[]);
                let call = ToolExecution::new(
                    "c",
                    "bash",
                    arguments,
                    Some(session.clone()),
                    CancellationToken::new(),
                );
                let out = waterfall.execute(&call, &Reached).await.0;
                let verdict = call.verdict();
                assert_eq!(verdict.decision, explained.decision, "{mode:?} {line:?}");
                assert_eq!(out.vetoed, explained.decision == Decision::Deny, "{line:?}");
                if explained.decision != Decision::Allow {
                    assert_eq!(verdict.reason, explained.reason, "{line:?}");
                }
            }
        }
    }

    /// Issue 27 escalation: under the sandbox, the hook judges a call asking to leave it
    /// as `explain` (the same place, through `SessionPlace`) does, in every mode.
    #[tokio::test]
    async fn the_sandboxed_hook_and_explain_agree_on_escalations() {
        let policy = Arc::new(Policy::new(&PermissionsConfig {
            rules: vec![PermissionRule {
                tool: "bash".into(),
                command: Some("git status".into()),
                action: Decision::Allow,
                ..PermissionRule::default()
            }],
            ..PermissionsConfig::default()
        }));
        let waterfall = Waterfall::new();
        waterfall.push(Arc::new(
            PolicyHook::new(policy.clone()).sandboxed(Vec::new()),
        ));
        let sessions = SessionRegistry::new(Mode::Ask);
        let session = sessions.create(std::env::temp_dir());
        let at = SessionPlace::of(Some(&session), Some(&[]));
        for mode in [Mode::Ask, Mode::Auto, Mode::ReadOnly] {
            session.set_mode(mode);
            for line in lines() {
                let arguments = serde_json::json!({ "command": line, "sandbox": "off",
                    "justification": "why" });
                let explained =
                    policy.judge_in("bash", &arguments, mode, &[], Some(&at.place(false)));
                let call = ToolExecution::new(
                    "c",
                    "bash",
                    arguments,
                    Some(session.clone()),
                    CancellationToken::new(),
                );
                let out = waterfall.execute(&call, &Reached).await.0;
                assert_eq!(
                    call.verdict().decision,
                    explained.decision,
                    "{mode:?} {line:?}"
                );
                assert_eq!(out.vetoed, explained.decision == Decision::Deny, "{line:?}");
                let judged = call.judged().map(|(_, j)| j.escalation.is_some());
                assert_eq!(judged, Some(explained.escalation.is_some()), "{line:?}");
                if line == "git status" {
                    assert_eq!(explained.decision, Decision::Allow, "{mode:?}");
                }
            }
        }
    }
}

#[cfg(test)]
mod workdir_tests {
    use super::*;
    use crate::config::{PermissionRule, PermissionsConfig};
    use crate::hooks::waterfall::{Terminal, ToolOutput, Waterfall};
    use crate::registry::SessionRegistry;
    use tokio_util::sync::CancellationToken;

    struct Ran;

    #[async_trait::async_trait]
    impl Terminal for Ran {
        async fn execute(&self, _call: &ToolExecution) -> ToolOutput {
            ToolOutput::ok("ran")
        }
    }

    /// P6 with T2's `workdir`: a bash call's patterns expand where it runs. In `sub`,
    /// which holds a file named `rm` and a script `run` that runs its arguments,
    /// `./run r[m] -f canary` is `rm` run by an unknown program (plain bash there
    /// deletes the canary: the control); from the session's cwd `r[m]` matches
    /// nothing (bash would pass it as written), so mode auto allowed it there. With
    /// `workdir = "sub"` (relative or absolute) the argument is what the deny rule on
    /// `rm` names, so it is asked; `explain` agrees.
    #[tokio::test]
    async fn p6_a_bash_calls_patterns_expand_in_its_workdir() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("rm"), "").unwrap();
        std::fs::write(sub.join("run"), "#!/bin/sh\nexec \"$@\"\n").unwrap();
        std::fs::set_permissions(sub.join("run"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(sub.join("canary"), "").unwrap();
        let line = "./run r[m] -f canary";
        let plain = std::process::Command::new("bash")
            .args(["-c", line])
            .current_dir(&sub)
            .status()
            .unwrap();
        assert!(plain.success() && !sub.join("canary").exists(), "control");

        let policy = Arc::new(Policy::new(&PermissionsConfig {
            rules: vec![PermissionRule {
                tool: "bash".into(),
                command: Some("rm".into()),
                action: Decision::Deny,
                ..PermissionRule::default()
            }],
            ..PermissionsConfig::default()
        }));
        let waterfall = Waterfall::new();
        waterfall.push(Arc::new(PolicyHook::new(policy.clone())));
        let sessions = SessionRegistry::new(Mode::Auto);
        let session = sessions.create(dir.path().to_path_buf());
        let absolute = sub.to_string_lossy().into_owned();
        for (workdir, decision) in [
            (None, Decision::Allow),
            (Some("sub"), Decision::Ask),
            (Some(absolute.as_str()), Decision::Ask),
        ] {
            let mut arguments = serde_json::json!({"command": line, "description": "d"});
            if let Some(w) = workdir {
                arguments["workdir"] = w.into();
            }
            let call = ToolExecution::new(
                "c",
                "bash",
                arguments.clone(),
                Some(session.clone()),
                CancellationToken::new(),
            );
            waterfall.execute(&call, &Ran).await;
            assert_eq!(call.verdict().decision, decision, "{workdir:?}");
            let at = SessionPlace::of_call(Some(&session), None, "bash", &arguments);
            let explained =
                policy.judge_in("bash", &arguments, Mode::Auto, &[], Some(&at.place(false)));
            assert_eq!(explained.decision, decision, "{workdir:?}");
        }
    }
}

#[cfg(test)]
mod glob_tests {
    use super::DiskGlobs;
    use crate::policy::globs::Globs;

    /// P6 (issue 41): patterns expand against the session's disk as bash expands them.
    #[test]
    fn p6_patterns_expand_against_the_disk_from_the_cwd() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["rm", "rx", ".rz", "touch"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/rm"), "").unwrap();
        let globs = DiskGlobs {
            cwd: dir.path().to_path_buf(),
        };
        let mut got = globs.expand("r?").unwrap();
        got.sort();
        assert_eq!(got, vec!["rm", "rx"]);
        assert_eq!(globs.expand("b*/r[m]").unwrap(), vec!["bin/rm"]);
        let absolute = format!("{}/t*", dir.path().display());
        assert_eq!(
            globs.expand(&absolute).unwrap(),
            vec![format!("{}/touch", dir.path().display())]
        );
        assert!(globs.expand("q*").unwrap().is_empty());
        // More entries than it may read: it cannot say, and the judge assumes the worst.
        let big = dir.path().join("big");
        std::fs::create_dir(&big).unwrap();
        for i in 0..super::GLOB_MAX_ENTRIES + 1 {
            std::fs::write(big.join(format!("f{i}")), "").unwrap();
        }
        assert_eq!(globs.expand("big/*"), None);
    }
}
