//! `[hooks]`: external hook programs, endpoints and judges, with the names they are
//! known by (a hook's label is its script's stem unless it has a `name`).

use super::{ConfigError, claude_settings};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One `[[hooks.command]]` entry: an external program consulted at one event.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalHookConfig {
    /// Program and arguments (no shell); none for an HTTP hook or a model judge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// Its name in the trace, vetoes and the audit log (`hook NAME`); by default the
    /// script it runs ([`ExternalHookConfig::label`]). Two hooks never share one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When it runs.
    #[serde(default)]
    pub event: HookEvent,
    /// Tools the hook is asked about, as names or globs (`mcp__*`); empty means all.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Claude Code's `matcher` over Claude Code's tool names (`Bash`, `Edit|Write`,
    /// `mcp__.*`; see [`ToolMatcher`]): the hook is asked only about calls it matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// Command prefixes: a bash call is shown to the hook only when one of its segments
    /// matches one (the permission rules' matcher); empty means every call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    /// The shape of its input and output.
    #[serde(default)]
    pub protocol: HookProtocol,
    /// `claude-code`: Claude Code's hook input and output, so its hook scripts run as
    /// they are.
    #[serde(default)]
    pub dialect: HookDialect,
    /// A process per call, or one long-lived server for every call.
    #[serde(default)]
    pub run: HookRun,
    /// Environment variables passed on purpose, beyond what commands get (E4 drops
    /// anything named like a credential).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// How long the program may take before its silence counts as a deny.
    #[serde(default = "default_hook_timeout_ms")]
    pub timeout_ms: u64,
    /// `run = "model"`: the policy the model judges by (it answers `{decision, reason}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// `run = "model"`: the model to ask instead of `[model] model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `run = "model"`: the endpoint to ask instead of `[model] base_url` (the key is
    /// still `[model]`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// An HTTP hook: the input is POSTed here and the answer is the response body
    /// (instead of `argv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// An HTTP hook's headers: each header's value is read from the environment
    /// variable named here (never written in the config).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Run after the hooks before it have answered, rather than beside them.
    #[serde(default, skip_serializing_if = "is_no")]
    pub sequential: bool,
    /// `false` (pre_tool hooks only): a shadow. It runs beside the call on every matching
    /// call and its word goes to the trace (`enforced: false`); it never changes or delays
    /// the outcome (a shadow still running when the call ends is stopped and traced as
    /// unfinished).
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub enforce: bool,
}

fn yes() -> bool {
    true
}

/// Programs that run a script named by a later argument: a hook's default name is the
/// script's, so `python3 a.py` and `python3 b.py` are told apart.
const INTERPRETERS: &[&str] = &[
    "python", "python2", "python3", "node", "nodejs", "deno", "bun", "ruby", "perl", "php", "sh",
    "bash", "dash", "zsh", "ksh", "fish", "lua", "tsx", "ts-node", "npx", "uv", "uvx", "pwsh",
    "Rscript", "env",
];

fn is_interpreter(word: &str) -> bool {
    let program = Path::new(word)
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    // `python3.12` is python too.
    let base = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETERS.contains(&program.as_ref()) || INTERPRETERS.contains(&base)
}

/// A path's file stem (`a/b.py` is `b`).
fn stem(word: &str) -> Option<String> {
    let path = Path::new(word);
    path.file_stem()
        .or_else(|| path.file_name())
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
}

/// The name of what `words` runs: the script an interpreter runs (the first word after it
/// that is no option or subcommand; `-m MODULE`'s module), as a file stem; a program's
/// own stem otherwise, and the interpreter's when it runs inline code (`-c`, `-e`).
fn script_stem(words: &[&str]) -> Option<String> {
    let (first, rest) = words.split_first()?;
    if !is_interpreter(first) {
        return stem(first);
    }
    let mut rest = rest.iter().copied();
    while let Some(word) = rest.next() {
        match word {
            "-m" => return rest.next().and_then(stem),
            "-c" | "-e" | "--eval" => break,
            "run" | "exec" => {}
            w if w.starts_with('-') || w.contains('=') => {}
            w if is_interpreter(w) => {
                let tail: Vec<&str> = std::iter::once(w).chain(rest).collect();
                return script_stem(&tail);
            }
            w => return stem(w),
        }
    }
    stem(first)
}

impl ExternalHookConfig {
    /// The hook's name: `name` when set, else what tells it apart from others: the
    /// script a command runs, not its interpreter (`node x/block.js` is `block`,
    /// `python3 a/b.py` is `b`, `sh -c "$DIR/guard.sh --strict"` is `guard`), the last
    /// part of an HTTP hook's URL path (its host when it has none), `model` for a model
    /// judge.
    pub fn label(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        if self.run == HookRun::Model {
            return "model".into();
        }
        if let Some(url) = &self.url {
            let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
            let rest = rest.split(['?', '#']).next().unwrap_or_default();
            let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
            return path
                .rsplit('/')
                .find(|p| !p.is_empty())
                .unwrap_or(host)
                .to_string();
        }
        let words: Vec<&str> = self.argv.iter().map(String::as_str).collect();
        let words: Vec<&str> = match words.as_slice() {
            // A shell's command line (Claude Code's hooks are): its own words.
            [shell, "-c", line, ..]
                if matches!(
                    Path::new(shell).file_name().and_then(|n| n.to_str()),
                    Some("sh" | "bash" | "dash" | "zsh")
                ) =>
            {
                line.split_whitespace()
                    .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
                    .collect()
            }
            _ => words,
        };
        script_stem(&words).unwrap_or_else(|| "hook".into())
    }

    /// The hook as a person recognises it in an error: its program line, URL or prompt.
    pub fn described(&self) -> String {
        if let Some(url) = &self.url {
            return format!("`{url}`");
        }
        if self.run == HookRun::Model {
            let prompt: String = self
                .prompt
                .as_deref()
                .unwrap_or_default()
                .chars()
                .take(40)
                .collect();
            return format!("model judge {prompt:?}");
        }
        format!("`{}`", self.argv.join(" "))
    }

    /// What kind of hook the keys make, or why they make none.
    pub(super) fn check_kind(&self) -> Result<(), String> {
        let model_only = self.prompt.is_some() || self.model.is_some() || self.base_url.is_some();
        let env_name =
            |n: &str| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if self.run == HookRun::Model {
            if self.prompt.as_deref().is_none_or(|p| p.trim().is_empty()) {
                return Err("run = \"model\" needs a `prompt`".into());
            }
            if !self.argv.is_empty() || self.url.is_some() {
                return Err("a model judge has no `argv` or `url`".into());
            }
        } else if model_only {
            return Err("`prompt`, `model` and `base_url` are for run = \"model\"".into());
        } else if let Some(url) = &self.url {
            if !self.argv.is_empty() || self.run != HookRun::Spawn {
                return Err("an HTTP hook (`url`) has no `argv` and no `run`".into());
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("url {url:?} is not an http(s) URL"));
            }
            if let Some((header, var)) = self.headers.iter().find(|(_, v)| !env_name(v)) {
                return Err(format!(
                    "header {header:?}: {var:?} is not the name of an environment variable (a header's value is read from the environment, never written in the config)"
                ));
            }
        } else if self.argv.is_empty() {
            return Err("no `argv` (nor `url`, nor run = \"model\")".into());
        }
        if self.url.is_none() && !self.headers.is_empty() {
            return Err("`headers` are for HTTP hooks (`url`)".into());
        }
        Ok(())
    }
}

fn is_yes(b: &bool) -> bool {
    *b
}

fn is_no(b: &bool) -> bool {
    !*b
}

impl Default for ExternalHookConfig {
    /// A pre_tool hook with no program (invalid until `argv` is set), for struct
    /// literals with `..Default::default()`.
    fn default() -> Self {
        Self {
            argv: Vec::new(),
            name: None,
            event: HookEvent::default(),
            tools: Vec::new(),
            matcher: None,
            commands: Vec::new(),
            protocol: HookProtocol::default(),
            dialect: HookDialect::default(),
            run: HookRun::default(),
            env: Vec::new(),
            timeout_ms: default_hook_timeout_ms(),
            prompt: None,
            model: None,
            base_url: None,
            url: None,
            headers: std::collections::BTreeMap::new(),
            sequential: false,
            enforce: true,
        }
    }
}

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// Before a tool runs: decide, rewrite the arguments, add context.
    #[default]
    PreTool,
    /// After a tool ran: add context, replace the result text.
    PostTool,
    /// A call's final decision is an ask from the mode's default: answer it.
    Permission,
    /// A user prompt arrived: add context or block it.
    Prompt,
    /// A session was created or loaded: add context.
    SessionStart,
    /// The model ended its turn: a hook may answer `continue` with a reason, which the
    /// model reads as the next context, and the turn goes on (at most
    /// `[hooks] max_continues` times a turn).
    Stop,
    /// A session ends: closed, deleted, or the daemon stops. Nothing to answer.
    SessionEnd,
    /// dsh is about to ask the person: for desktop notifiers. Nothing to answer.
    Notification,
    /// A tool ran and failed (an error result, or a command that did not exit 0): add
    /// context.
    PostToolFailure,
}

impl HookEvent {
    /// The wire name (`pre_tool`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreTool => "pre_tool",
            HookEvent::PostTool => "post_tool",
            HookEvent::Permission => "permission",
            HookEvent::Prompt => "prompt",
            HookEvent::SessionStart => "session_start",
            HookEvent::Stop => "stop",
            HookEvent::SessionEnd => "session_end",
            HookEvent::Notification => "notification",
            HookEvent::PostToolFailure => "post_tool_failure",
        }
    }
}

/// The input and output shape of a dsh-dialect hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HookProtocol {
    /// Five fields in, `{decision, reason}` out (the first hooks).
    V1,
    /// The full input (segments, verdict, result, ...) and answer (context, rewrite, ...).
    #[default]
    V2,
}

/// Whose hook conventions a hook follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HookDialect {
    #[default]
    Dsh,
    ClaudeCode,
}

/// How a hook program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HookRun {
    /// A process per call.
    #[default]
    Spawn,
    /// One process started with the daemon, answering JSON-RPC 2.0 on stdin/stdout.
    Server,
    /// No process: a model judges, by `prompt`.
    Model,
}

fn default_hook_timeout_ms() -> u64 {
    5_000
}

fn default_max_continues() -> u32 {
    3
}

/// `[hooks]`: external hook programs, consulted in order.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HooksConfig {
    pub command: Vec<ExternalHookConfig>,
    /// Claude Code settings files (`~/.claude/settings.json`) or plugin folders (with
    /// `hooks/hooks.json`) whose hooks run as dsh hooks in the claude-code dialect, after
    /// `command`'s; read when the config is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claude_settings: Vec<PathBuf>,
    /// How many times the `stop` hooks may send one turn back to the model.
    #[serde(default = "default_max_continues")]
    pub max_continues: u32,
    /// The hooks read from `claude_settings` (named apart from `command`'s).
    #[serde(skip)]
    pub imported: Vec<ExternalHookConfig>,
    /// What of `claude_settings` was not taken, a line each.
    #[serde(skip)]
    pub skipped: Vec<String>,
}

impl Default for HooksConfig {
    fn default() -> Self {
        Self {
            command: Vec::new(),
            claude_settings: Vec::new(),
            max_continues: default_max_continues(),
            imported: Vec::new(),
            skipped: Vec::new(),
        }
    }
}

impl HooksConfig {
    /// Every hook in force: `command`'s, then those read from `claude_settings`.
    pub fn all(&self) -> Vec<ExternalHookConfig> {
        self.command.iter().chain(&self.imported).cloned().collect()
    }

    /// Reads `claude_settings` into `imported` and `skipped`, renaming an imported hook
    /// whose name one of `command` already has.
    pub(super) fn import_claude_settings(&mut self) -> Result<(), ConfigError> {
        let mut taken: std::collections::HashSet<String> =
            self.command.iter().map(ExternalHookConfig::label).collect();
        for path in &self.claude_settings {
            let got = claude_settings::read(path).map_err(ConfigError::Invalid)?;
            for mut hook in got.hooks {
                claude_settings::name_apart(&mut hook, &mut taken);
                self.imported.push(hook);
            }
            self.skipped.extend(
                got.skipped
                    .into_iter()
                    .map(|s| format!("{}: {s}", path.display())),
            );
        }
        Ok(())
    }
}
