//! Typed daemon configuration.
//!
//! `config/dsh.toml` in the repository is the documented default; every key has a
//! default here, so the daemon runs with no file at all. Unknown keys are rejected so
//! that a typo in a config file is an error rather than a silently ignored setting.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub mod claude_settings;
pub use claude_settings::ToolMatcher;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file named on the command line could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not valid TOML or does not match the schema.
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// The values parse but contradict each other.
    #[error("invalid config: {0}")]
    Invalid(String),
}

/// The whole daemon configuration.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// How commands are run: see [`ExecConfig`].
    pub exec: ExecConfig,
    /// What the waterfall allows, asks about or denies: see [`PermissionsConfig`].
    pub permissions: PermissionsConfig,
    /// External hook programs: see [`HooksConfig`].
    pub hooks: HooksConfig,
    /// The model endpoint: see [`ModelConfig`].
    pub model: ModelConfig,
    /// The turn loop: see [`AgentConfig`].
    pub agent: AgentConfig,
    /// What closing a session does: see [`SessionsConfig`].
    pub sessions: SessionsConfig,
    /// The editor's MCP servers: see [`McpConfig`].
    pub mcp: McpConfig,
    /// The daemon process itself: see [`DaemonConfig`].
    pub daemon: DaemonConfig,
    /// How much the state directory may hold: see [`StateConfig`].
    pub state: StateConfig,
    /// Other ACP agents dsh can stand in front of (`dsh acp --agent NAME`): see
    /// [`crate::wrap::WrappedAgent`].
    pub agents: Vec<crate::wrap::WrappedAgent>,
}

/// `[state]`: the limits that keep the state directory bounded for a daemon that runs
/// for months (applied by `crate::state_dir`: a sweep in the daemon, and `dsh gc`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StateConfig {
    /// Spill files (`state_dir/spill`) last written more than this many days ago are
    /// removed, unless a running task writes one or a session loaded in the last day
    /// names it.
    pub spill_max_age_days: u64,
    /// Past this many bytes of spill files, the oldest are removed until the rest fit
    /// (with the same exceptions).
    pub spill_max_bytes: u64,
    /// `audit.jsonl` is renamed `audit.jsonl.1` (and older ones shift up) when a line
    /// would take it past this many bytes.
    pub audit_max_bytes: u64,
    /// Rotated audit files kept (`audit.jsonl.1` .. `audit.jsonl.N`); older ones go.
    pub audit_keep: u32,
    /// `daemon.log` rotates the same way past this many bytes.
    pub log_max_bytes: u64,
    /// Rotated daemon logs kept.
    pub log_keep: u32,
    /// How often the daemon sweeps the spill files (off its async workers).
    pub sweep_interval_secs: u64,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            spill_max_age_days: 14,
            spill_max_bytes: 2 << 30,
            audit_max_bytes: 256 << 20,
            audit_keep: 8,
            log_max_bytes: 64 << 20,
            log_keep: 4,
            sweep_interval_secs: 3600,
        }
    }
}

/// `[daemon]`: the daemon process's own life.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// A daemon that `dsh acp` started exits by itself after this many seconds with no
    /// connection and no running task, so a one-off client (a registry check, an editor
    /// tried once) leaves nothing behind; 0: never. `dsh serve` run by a person ignores it.
    pub idle_exit_secs: u64,
    /// `dsh upgrade` lets turns in flight finish for this many seconds (new prompts wait
    /// meanwhile); past it they are cancelled, and the upgrade goes on.
    pub upgrade_drain_secs: u64,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            idle_exit_secs: 600,
            upgrade_drain_secs: 30,
        }
    }
}

/// `[mcp]`: the MCP servers an editor passes in `session/new` (and load/resume).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// How long one tool call may take before it is answered with an error.
    pub call_timeout_ms: u64,
    /// How long a server may take to start, answer `initialize` and list its tools;
    /// past it the server is reported as failed and stopped.
    pub start_timeout_ms: u64,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            call_timeout_ms: 120_000,
            start_timeout_ms: 30_000,
        }
    }
}

/// `[sessions]`: the life of a session beyond its connection.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionsConfig {
    /// `session/close` kills the session's background tasks. Off by default: Zed closes
    /// a session whenever its thread view goes (a new thread, say), and a dev server
    /// started in the background must survive that; the tasks stay the session's and
    /// their notices reach its log, where a later load finds them.
    pub close_kills_tasks: bool,
}

/// DeepSeek's API, the default model endpoint.
pub const DEFAULT_MODEL_BASE_URL: &str = "https://api.deepseek.com";

/// `[model]`: an OpenAI-compatible chat-completions endpoint. The environment
/// (`DSH_MODEL_BASE_URL`, `DSH_MODEL`, `DSH_API_KEY`) overrides these.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// Base URL; requests go to `<base_url>/chat/completions`.
    pub base_url: String,
    pub model: String,
    /// The environment variable holding the API key (keys never live in config).
    pub api_key_env: String,
    /// Retries of a 429/5xx/connect failure before any of the answer streamed.
    pub max_retries: u32,
    /// First backoff; doubled per retry unless the server sends Retry-After.
    pub retry_base_ms: u64,
    pub connect_timeout_ms: u64,
    /// The stream fails if the server sends nothing for this long.
    pub idle_timeout_ms: u64,
    /// The model's context window in tokens, for the editor's context meter.
    pub context_window: u64,
    /// Prices per million prompt and completion tokens (in `currency`), so the editor
    /// can show what a session cost; unset: no cost is reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_per_mtok_in: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_per_mtok_out: Option<f64>,
    pub currency: String,
    /// Models the person may pick per session (the editor's model menu); empty: only
    /// `model`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// The model reads images: `initialize` advertises `promptCapabilities.image` and
    /// image blocks of a prompt go to it as image parts. Off, an image prompt is refused
    /// (a client may send only what was advertised).
    pub vision: bool,
    /// The endpoint takes requests without a key: no auth-required error, no key sent
    /// unless one is found. Unset: true for an endpoint on a loopback address (a local
    /// server), false for any other (src/auth.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyless: Option<bool>,
    /// The model that reasons longer (DeepSeek: `deepseek-reasoner`): with it set, each
    /// session has a "Think harder" switch (a boolean config option) that sends its
    /// requests there while on. Unset: no switch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think_harder_model: Option<String>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            base_url: DEFAULT_MODEL_BASE_URL.into(),
            model: "deepseek-chat".into(),
            api_key_env: "DEEPSEEK_API_KEY".into(),
            max_retries: 3,
            retry_base_ms: 500,
            connect_timeout_ms: 10_000,
            idle_timeout_ms: 120_000,
            context_window: 128_000,
            price_per_mtok_in: None,
            price_per_mtok_out: None,
            currency: "USD".into(),
            models: Vec::new(),
            vision: false,
            keyless: None,
            think_harder_model: None,
        }
    }
}

/// `[agent]`: the turn loop.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// Model requests per prompt before the turn ends with `max_turn_requests`.
    pub max_steps: u32,
    /// A file whose text replaces (or, with `system_prompt_mode = "extend"`,
    /// follows) the built-in system prompt.
    pub system_prompt_file: Option<PathBuf>,
    pub system_prompt_mode: SystemPromptMode,
    /// Characters of history sent to the model; past it the oldest tool outputs
    /// are shortened to a marker (the session log keeps everything).
    pub history_budget_chars: usize,
    /// Where a session's title comes from.
    pub titles: TitleSource,
}

/// Where a session's title comes from (`[agent] titles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TitleSource {
    /// The first line of the first prompt, at once.
    #[default]
    FirstLine,
    /// The first line at once, then a title the model writes, asked for in the
    /// background after the first prompt that goes to the model.
    Model,
}

/// How `system_prompt_file` combines with the built-in prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SystemPromptMode {
    #[default]
    Extend,
    Replace,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_steps: 100,
            system_prompt_file: None,
            system_prompt_mode: SystemPromptMode::Extend,
            history_budget_chars: 400_000,
            titles: TitleSource::FirstLine,
        }
    }
}

/// A policy decision. Ordered so that the strongest wins when decisions combine:
/// `Deny > Ask > Allow` (`max` of several decisions is their combination).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

/// A session's permission mode (ACP `session/set_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Rules decide; calls no rule matches are asked.
    #[default]
    Ask,
    /// Rules decide; calls no rule matches are allowed (deny rules still veto).
    Auto,
    /// Anything not known to be read-only is vetoed.
    ReadOnly,
}

impl Mode {
    /// The id used on the wire (`ask`, `auto`, `read-only`).
    pub fn id(self) -> &'static str {
        match self {
            Mode::Ask => "ask",
            Mode::Auto => "auto",
            Mode::ReadOnly => "read-only",
        }
    }

    /// Parses a wire id.
    pub fn from_id(id: &str) -> Option<Mode> {
        [Mode::Ask, Mode::Auto, Mode::ReadOnly]
            .into_iter()
            .find(|m| m.id() == id)
    }
}

/// One `[[permissions.rules]]` entry.
///
/// Built from the config file, or in code (tests, fuzzing): there, `Default` gives a rule that
/// names no tool and denies, so struct literals can name only what they need and end with
/// `..Default::default()`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionRule {
    /// The tool the rule is about (`bash`, `bash_output`, `bash_kill`, `read_file`,
    /// `edit_file`, `write_file`, `*`), or a glob of tool names (`mcp__github__*`: `*`
    /// any run of characters, `?` one).
    pub tool: String,
    /// For the file tools: a glob of the paths the rule is about (`secrets/**`: `*` within
    /// one path component, `**` across them, `?` one character). A relative glob is matched
    /// against the path relative to the session's cwd, an absolute one against the whole
    /// path. Absent: every path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// For `bash`: a command prefix, word by word (`git status`); `*` as a word
    /// matches any one word. Absent: every call of the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// For `network` (E10): the host the rule is about, `HOST` or `*.SUFFIX` (subdomains
    /// of SUFFIX only), case-insensitive, an IPv6 address bare or in brackets. Absent:
    /// every host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// For `network`: the port the rule is about. Absent: every port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// What a matching call gets; the strongest decision of all matching rules wins.
    pub action: Decision,
    /// Command lines this rule must match: the rule's author says what they meant, so
    /// a prefix that does not cover them is reported instead of silently missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// Command lines this rule must not match (a rule broader than meant is reported).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_examples: Vec<String>,
    /// Where the rule was written, as `FILE:LINE` (the line of its `[[permissions.rules]]`
    /// header, or of its inline table), so that reports about it can point there. `None`
    /// for rules built in code. Not a config key: never read from or written to TOML.
    #[serde(skip)]
    pub origin: Option<String>,
}

impl Default for PermissionRule {
    /// A rule that names no tool (so it matches nothing) and would deny: the safe base for
    /// struct literals with `..Default::default()`.
    fn default() -> Self {
        Self {
            tool: String::new(),
            command: None,
            path: None,
            host: None,
            port: None,
            action: Decision::Deny,
            examples: Vec::new(),
            not_examples: Vec::new(),
            origin: None,
        }
    }
}

/// One `[[permissions.tests]]` entry: a command line and the decision the policy must
/// reach for it in a mode. Lets a config carry its own checks, so a rule change that
/// alters a decision someone relied on is caught when the config is checked.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyTest {
    /// The `bash` command line to judge.
    pub command: String,
    /// The session mode to judge it in.
    #[serde(default)]
    pub mode: Mode,
    /// The decision the policy must reach.
    pub expect: Decision,
    /// Where the test was written, as `FILE:LINE` (the line of its `[[permissions.tests]]`
    /// header, or of its inline table), so a failure can point there. `None` for tests
    /// built in code. Not a config key: never read from or written to TOML.
    #[serde(skip)]
    pub origin: Option<String>,
}

/// `[permissions]`: rules, policy tests and the read-only list.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PermissionsConfig {
    /// The mode of a new session.
    pub default_mode: Mode,
    /// Rules, all consulted; the strongest matching decision wins.
    pub rules: Vec<PermissionRule>,
    /// Command prefixes known to only read (used by `read-only` mode).
    pub read_only_commands: Vec<String>,
    /// Expected decisions for given command lines, checked against the rules above.
    pub tests: Vec<PolicyTest>,
    /// A candidate config whose `[permissions]` rules are judged beside these on every
    /// call, their decision traced as `shadow policy` (`enforced: false`) and never
    /// applied: `dsh policy shadow-report` shows where they would differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<PathBuf>,
    /// Project directories (each holding a `.dsh/config.toml`) whose project file is
    /// honoured fully, allow rules, looser modes and hooks included. Any other project
    /// file can only tighten (see `src/project.rs`). Read only from the user's own file.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trusted_projects: Vec<PathBuf>,
    /// Where "allow always" / "reject always" answers are kept besides the session's
    /// log: `session` (that session only) or `user` (also `grants.json` in the state
    /// directory, applied to every session of this user, across restarts).
    pub remember: Remember,
}

/// `[permissions] remember`: how far an "always" answer reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Remember {
    /// The session that was asked (its log keeps it across loads and restarts).
    #[default]
    Session,
    /// Every session of this user, from the state directory's `grants.json`.
    User,
}

impl Default for PermissionsConfig {
    fn default() -> Self {
        Self {
            default_mode: Mode::Ask,
            rules: Vec::new(),
            read_only_commands: DEFAULT_READ_ONLY_COMMANDS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            tests: Vec::new(),
            shadow: None,
            trusted_projects: Vec::new(),
            remember: Remember::Session,
        }
    }
}

/// Commands that only read, by command prefix. Some of them can also write, run programs
/// or change the system (`find -exec`, `sort -o`, `uniq IN OUT`, `rg --pre`, `date -s`,
/// `hostname NAME`, `file -C`...); the policy refuses those forms in read-only mode
/// (`writing_option` in src/hooks/policy.rs).
pub const DEFAULT_READ_ONLY_COMMANDS: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "rg",
    "find",
    "pwd",
    "echo",
    "printf",
    "stat",
    "file",
    "which",
    "type",
    "date",
    "du",
    "df",
    "diff",
    "sort",
    "uniq",
    "cut",
    "tr",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "tree",
    "true",
    "false",
    "test",
    "[",
    "id",
    "whoami",
    "uname",
    "hostname",
    "ps",
    "git status",
    "git log",
    "git diff",
    "git show",
    "git rev-parse",
    "git ls-files",
    "git blame",
];

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
    fn check_kind(&self) -> Result<(), String> {
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
    fn import_claude_settings(&mut self) -> Result<(), ConfigError> {
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

/// The executor implementations a config can choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    /// `bash -c` on this machine, as the daemon's user.
    Local,
    /// `bash -c` inside a bubblewrap sandbox on this machine ([`SandboxConfig`]).
    Sandbox,
    /// `bash -c` on another host over OpenSSH ([`SshConfig`]).
    Ssh,
    /// No executor: no bash tools are offered.
    None,
}

/// `[exec.sandbox]`: how the bubblewrap sandbox is built.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// The bubblewrap program (a name looked up in PATH, or a path).
    pub bwrap: PathBuf,
    /// How commands reach the network (E10): through dsh's proxy, each host judged
    /// (the default), not at all, or the host's network unguarded.
    pub network: NetworkConfig,
    /// Directories every command may write to, besides the calling session's cwd
    /// and the directories the session was granted.
    pub writable: Vec<PathBuf>,
    /// Paths a command cannot read (E9): a directory shows as empty, a file as
    /// empty. Absolute, or `~/...` for the daemon's home. The list replaces the
    /// defaults (secrets of common tools), so a user narrows it by leaving one out;
    /// dsh's own state and config directories are masked whatever it says.
    pub deny_read: Vec<PathBuf>,
    /// Whether commands may create Unix sockets (E8 blocks them by default: a local
    /// socket is how a command reaches a host service the sandbox cannot see).
    pub allow_unix_sockets: bool,
    /// Whether commands may write `.git/config` in a writable root. Its hooks stay
    /// read-only, but a writable config can name programs git runs (fsmonitor,
    /// hooksPath, a pager, a credential helper): this gives up E9 for git, and so
    /// also lets a command create repositories (the tripwires leave a new `.git`).
    pub allow_git_config: bool,
    /// Whether the home directory (or a directory holding it) may be a writable
    /// root. Off, a command there is refused: a home holds what runs at the next
    /// login or shell (systemd user units, `~/.local/bin` ahead on PATH, autostart
    /// entries, every tool's startup file), more than any list of protected names
    /// can cover.
    pub allow_home_root: bool,
}

/// `[exec.sandbox] network`: a mode (`network = "proxy"`, `"none"`, `"host"`; `true` and
/// `false` are read as `"host"` and `"none"`, what they meant before the proxy), or the
/// table `[exec.sandbox.network]` with the mode and how the proxy judges hosts.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct NetworkConfig {
    pub mode: NetworkMode,
    /// What mode `auto` does with a host no rule, hook or grant decides.
    pub default: NetworkDefault,
    /// Hosts let through without asking: sugar for `[[permissions.rules]] tool =
    /// "network"`, `host = ...`, `action = "allow"` (each entry `HOST` or `HOST:PORT`;
    /// `*.example.com` matches its subdomains only).
    pub allow: Vec<String>,
    /// Hosts refused, the same way with `action = "deny"`.
    pub deny: Vec<String>,
}

/// How a sandboxed command reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// A private network namespace whose only way out is dsh's proxy on its loopback:
    /// each new host is a call of the tool `network` through the waterfall.
    #[default]
    Proxy,
    /// A private network namespace with only loopback.
    None,
    /// The host's own network, unguarded (what `network = true` was).
    Host,
}

/// What mode `auto` does with a host nothing else decided (`ask` asks, `read-only`
/// refuses, whatever this says).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkDefault {
    #[default]
    Ask,
    Allow,
    Deny,
}

/// The table form of [`NetworkConfig`], as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkTable {
    #[serde(default)]
    mode: NetworkMode,
    #[serde(default)]
    default: NetworkDefault,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

impl<'de> Deserialize<'de> for NetworkConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = NetworkConfig;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    r#""proxy", "none", "host", or a table with mode, default, allow and deny"#,
                )
            }
            fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<NetworkConfig, E> {
                let mode = if on {
                    NetworkMode::Host
                } else {
                    NetworkMode::None
                };
                Ok(NetworkConfig {
                    mode,
                    ..NetworkConfig::default()
                })
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<NetworkConfig, E> {
                let mode =
                    NetworkMode::deserialize(serde::de::value::StrDeserializer::<E>::new(text))?;
                Ok(NetworkConfig {
                    mode,
                    ..NetworkConfig::default()
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<NetworkConfig, A::Error> {
                let table =
                    NetworkTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(NetworkConfig {
                    mode: table.mode,
                    default: table.default,
                    allow: table.allow,
                    deny: table.deny,
                })
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// The secrets a sandboxed command cannot read unless `[exec.sandbox] deny_read`
/// says otherwise (E9): the credential files of the tools a developer's home usually
/// holds, each where the tool's own documentation puts it. Neither Anthropic's
/// sandbox-runtime nor Codex masks reads by default (both leave it to
/// configuration); this list starts from the secrets their documentation names
/// (`~/.ssh`, `~/.aws`, `~/.gnupg`, `~/.kube`, `~/.docker`, `~/.netrc`) and adds
/// git's, gh's, podman's, gcloud's, azure's, npm's, PyPI's, cargo's, terraform's,
/// vault's, rclone's and the coding agents' own (Claude Code, Codex, Gemini CLI).
/// An entry under `$XDG_CONFIG_HOME/` or `$XDG_DATA_HOME/` is masked both where
/// the variable points and at its default (`~/.config`, `~/.local/share`): a tool
/// may ignore the variable ([`DenyRead::paths`]).
pub const DEFAULT_DENY_READ: &[&str] = &[
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "$XDG_CONFIG_HOME/gcloud",
    "~/.kube",
    "~/.docker/config.json",
    "$XDG_CONFIG_HOME/containers/auth.json",
    "~/.netrc",
    "~/.git-credentials",
    "$XDG_CONFIG_HOME/git/credentials",
    "$XDG_CONFIG_HOME/gh",
    "~/.npmrc",
    "~/.pypirc",
    "~/.cargo/credentials.toml",
    "~/.cargo/credentials",
    "~/.gem/credentials",
    "~/.m2/settings.xml",
    "~/.pgpass",
    "~/.vault-token",
    "~/.terraform.d",
    "~/.terraformrc",
    "$XDG_CONFIG_HOME/rclone",
    "$XDG_DATA_HOME/keyrings",
    "~/.claude/.credentials.json",
    "~/.codex/auth.json",
    "~/.gemini/oauth_creds.json",
];

/// Where a `deny_read` entry points: the forms it may take, and the paths each
/// resolves to for a daemon with a given home and XDG variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DenyRead {
    /// `/...`.
    Absolute(PathBuf),
    /// `~/REST`: under the daemon's home.
    Home(PathBuf),
    /// `$XDG_CONFIG_HOME/REST`.
    ConfigHome(PathBuf),
    /// `$XDG_DATA_HOME/REST`.
    DataHome(PathBuf),
}

impl DenyRead {
    /// The entry as written, or `None` for a form no entry may take (checked
    /// at load by [`SandboxConfig::check`]).
    pub fn parse(entry: &Path) -> Option<Self> {
        use std::path::Component;
        let mut parts = entry.components();
        let first = parts.next()?;
        let rest: PathBuf = parts.collect();
        match first {
            Component::RootDir => Some(Self::Absolute(entry.to_path_buf())),
            Component::Normal(word) if word == "~" => Some(Self::Home(rest)),
            Component::Normal(word) if word == "$XDG_CONFIG_HOME" => Some(Self::ConfigHome(rest)),
            Component::Normal(word) if word == "$XDG_DATA_HOME" => Some(Self::DataHome(rest)),
            _ => None,
        }
    }

    /// The paths to mask for a daemon whose home is `home` and whose environment
    /// says `var`: an XDG entry both where the variable points (when it is set and
    /// absolute, as the XDG specification requires) and at its default. Nothing for
    /// a home-relative entry without a home.
    pub fn paths(
        &self,
        home: Option<&Path>,
        var: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Vec<PathBuf> {
        let xdg = |name: &str, default: &str, rest: &Path| {
            let mut paths: Vec<PathBuf> = var(name)
                .map(PathBuf::from)
                .filter(|dir| dir.is_absolute())
                .map(|dir| dir.join(rest))
                .into_iter()
                .collect();
            if let Some(home) = home {
                let fallback = home.join(default).join(rest);
                if !paths.contains(&fallback) {
                    paths.push(fallback);
                }
            }
            paths
        };
        match self {
            Self::Absolute(path) => vec![path.clone()],
            Self::Home(rest) => home.map(|h| h.join(rest)).into_iter().collect(),
            Self::ConfigHome(rest) => xdg("XDG_CONFIG_HOME", ".config", rest),
            Self::DataHome(rest) => xdg("XDG_DATA_HOME", ".local/share", rest),
        }
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            bwrap: PathBuf::from("bwrap"),
            network: NetworkConfig::default(),
            writable: Vec::new(),
            deny_read: DEFAULT_DENY_READ.iter().map(PathBuf::from).collect(),
            allow_unix_sockets: false,
            allow_git_config: false,
            allow_home_root: false,
        }
    }
}

impl SandboxConfig {
    /// Why a `deny_read` entry or a `writable` root cannot be enforced, if one
    /// cannot: every entry must be absolute (or `~/...`, `$XDG_CONFIG_HOME/...`,
    /// `$XDG_DATA_HOME/...`) without `..`, and no
    /// masked path may contain a configured writable root (the mask would hide it).
    pub fn check(&self) -> Result<(), String> {
        for path in &self.deny_read {
            check_sandbox_path("exec.sandbox.deny_read", path, true)?;
        }
        for path in &self.writable {
            check_sandbox_path("exec.sandbox.writable", path, false)?;
        }
        for denied in &self.deny_read {
            for root in &self.writable {
                if matches!(DenyRead::parse(denied), Some(DenyRead::Absolute(_)))
                    && root.starts_with(denied)
                {
                    return Err(format!(
                        "exec.sandbox.deny_read entry {} contains the writable root {}: the \
                         mask would hide the root, so neither could hold",
                        denied.display(),
                        root.display()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// An absolute path (or, where `home_ok`, one under `~/`, `$XDG_CONFIG_HOME/` or
/// `$XDG_DATA_HOME/`) with no `.` or `..`.
fn check_sandbox_path(key: &str, path: &Path, home_ok: bool) -> Result<(), String> {
    let rooted = match DenyRead::parse(path) {
        Some(DenyRead::Absolute(_)) => true,
        Some(_) => home_ok,
        None => false,
    };
    if !rooted {
        let form = if home_ok {
            "absolute or ~/..., $XDG_CONFIG_HOME/... or $XDG_DATA_HOME/..."
        } else {
            "absolute"
        };
        return Err(format!(
            "{key} entry {} must be {form}: a relative path depends on where dsh runs",
            path.display()
        ));
    }
    // `components()` drops a `.` in the middle, so the raw parts are read.
    if path
        .as_os_str()
        .as_encoded_bytes()
        .split(|b| *b == b'/')
        .any(|part| part == b"." || part == b"..")
    {
        return Err(format!(
            "{key} entry {} has `.` or `..`: write the path it means",
            path.display()
        ));
    }
    Ok(())
}

/// How the ssh executor treats the remote host's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KnownHosts {
    /// The key must already be in the known-hosts file.
    #[default]
    Strict,
    /// An unknown host's key is recorded on first contact; a changed key is refused.
    AcceptNew,
    /// Any key is accepted (only for throwaway hosts).
    Off,
}

impl KnownHosts {
    /// The OpenSSH `StrictHostKeyChecking` value.
    pub fn ssh_option(self) -> &'static str {
        match self {
            KnownHosts::Strict => "yes",
            KnownHosts::AcceptNew => "accept-new",
            KnownHosts::Off => "no",
        }
    }
}

/// Whether the ssh executor runs commands through `dsh exec-helper` on the remote
/// host (one long-lived channel, the local engine's own code over there) or through
/// a shell wrapper per command (one ssh session and login shell per call, slower).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HelperMode {
    /// The helper when the remote host can run it (same OS and architecture, the
    /// upload and its check succeed); the wrapper otherwise. `dsh status` says which.
    #[default]
    Auto,
    /// The helper or nothing: commands fail with the reason it cannot be used.
    Required,
    /// Always the wrapper (nothing is uploaded).
    Off,
}

/// One `[[exec.ssh.path_map]]` entry: a local directory and where it is remotely.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PathMapping {
    pub local: PathBuf,
    pub remote: PathBuf,
}

/// `[exec.ssh]`: the remote host and how to reach it with the system OpenSSH client.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SshConfig {
    /// Host name or address; required when `exec.kind = "ssh"`.
    pub host: String,
    pub port: u16,
    /// Remote user; default: OpenSSH's choice (the local user name).
    pub user: Option<String>,
    /// Private key file; default: OpenSSH's defaults (and the agent).
    pub identity_file: Option<PathBuf>,
    pub known_hosts: KnownHosts,
    /// Known-hosts file; default: OpenSSH's (`~/.ssh/known_hosts`).
    pub known_hosts_file: Option<PathBuf>,
    /// How long to wait for the connection to be established.
    pub connect_timeout_ms: u64,
    /// Local directories (session cwds) and their remote counterparts; the longest
    /// matching prefix wins, an unmatched path is used as is.
    pub path_map: Vec<PathMapping>,
    /// The ssh client program.
    pub ssh: PathBuf,
    /// Run commands through `dsh exec-helper` on the host (see [`HelperMode`]).
    pub helper: HelperMode,
    /// Remote directory where the helper binary is cached and keeps its state
    /// (spill files); a leading `~/` is the remote home. Made 0700.
    pub helper_dir: String,
    /// Run each command inside the same bubblewrap sandbox on the remote host
    /// (`[exec.sandbox]` applies there, with the session's roots mapped). Needs the
    /// helper and bwrap 0.8.0+ on the host; without them commands are refused,
    /// never run unsandboxed.
    pub sandbox: bool,
}

impl Default for SshConfig {
    fn default() -> Self {
        Self {
            host: String::new(),
            port: 22,
            user: None,
            identity_file: None,
            known_hosts: KnownHosts::Strict,
            known_hosts_file: None,
            connect_timeout_ms: 10_000,
            path_map: Vec::new(),
            ssh: PathBuf::from("ssh"),
            helper: HelperMode::Auto,
            helper_dir: "~/.cache/dsh".into(),
            sandbox: false,
        }
    }
}

/// Settings of the shared command executor (`[exec]`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecConfig {
    /// Which executor runs commands; `none` offers no bash tools at all.
    pub kind: ExecutorKind,
    /// Timeout of a foreground command when the call names none.
    pub default_timeout_ms: u64,
    /// Upper bound for any requested timeout.
    pub max_timeout_ms: u64,
    /// Bytes of each stream (stdout, stderr) kept in memory per command.
    pub max_output_bytes: usize,
    /// Bytes of output, over all finished background tasks not yet read to their
    /// end, kept in memory for later reads. Past it the oldest finished tasks'
    /// output is dropped from memory (a read then says so, naming the spill file
    /// when there is one). Bounds the daemon's growth with many chatty tasks.
    pub finished_output_bytes: usize,
    /// Time between SIGTERM and SIGKILL when a command is stopped.
    pub kill_grace_ms: u64,
    /// How long a foreground call waits for stdout/stderr to close after the
    /// command's main process exited.
    pub drain_ms: u64,
    /// Working directory for calls that come with none and no session cwd.
    pub cwd: Option<PathBuf>,
    /// Where spill files, logs and the task counter live. Defaults to
    /// `$XDG_STATE_HOME/dsh` (or `~/.local/state/dsh`).
    pub state_dir: Option<PathBuf>,
    /// Used when `kind = "sandbox"`.
    pub sandbox: SandboxConfig,
    /// Used when `kind = "ssh"`.
    pub ssh: SshConfig,
    /// Variables of the daemon's environment a sandboxed command gets beyond the
    /// allowlist ([`SANDBOX_ENV_ALLOW`], E4). Named here, a variable passes even when
    /// its name looks like a credential: the person chose it.
    pub env_pass: Vec<String>,
    /// Variables set in a sandboxed command's environment, whatever the daemon's
    /// says (applied after `env_pass`).
    pub env_set: std::collections::BTreeMap<String, String>,
}

/// The variables of the daemon's environment a sandboxed command gets (E4), besides
/// every `LC_*` one, `[exec] env_pass` and the proxy variables dsh sets itself: what
/// tools need to find programs, the home and the locale. Everything else stays
/// with the daemon, whatever its name: an allowlist cannot miss a credential whose
/// name nobody thought of.
pub const SANDBOX_ENV_ALLOW: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TZ", "TMPDIR",
];

/// Whether a sandboxed command gets the daemon's variable `name` by the allowlist
/// ([`SANDBOX_ENV_ALLOW`] and `LC_*`), before `env_pass`.
pub fn sandbox_env_allowed(name: &str) -> bool {
    SANDBOX_ENV_ALLOW.contains(&name) || name.starts_with("LC_")
}

impl Default for ExecConfig {
    fn default() -> Self {
        Self {
            kind: ExecutorKind::Local,
            default_timeout_ms: 120_000,
            max_timeout_ms: 600_000,
            max_output_bytes: 64_000,
            finished_output_bytes: 16_000_000,
            kill_grace_ms: 3_000,
            drain_ms: 2_000,
            cwd: None,
            state_dir: None,
            sandbox: SandboxConfig::default(),
            ssh: SshConfig::default(),
            env_pass: Vec::new(),
            env_set: Default::default(),
        }
    }
}

impl Config {
    /// Parses a config from TOML text; `origin` names the source in errors and in the
    /// `FILE:LINE` origins of rules and policy tests.
    pub fn from_toml(text: &str, origin: &Path) -> Result<Self, ConfigError> {
        let parse_error = |e: toml::de::Error| ConfigError::Parse {
            path: origin.to_path_buf(),
            message: e.to_string(),
        };
        let mut config: Config = toml::from_str(text).map_err(parse_error)?;
        // A second, schema-free pass over the same text for where each entry starts. It
        // cannot fail where the typed pass succeeded, and it sees the same entries in the
        // same order (both read the same arrays).
        let spans: Spans = toml::from_str(text).map_err(parse_error)?;
        let permissions = &mut config.permissions;
        for (rule, span) in permissions.rules.iter_mut().zip(&spans.permissions.rules) {
            rule.origin = Some(origin_of(text, span.span().start, origin));
        }
        for (test, span) in permissions.tests.iter_mut().zip(&spans.permissions.tests) {
            test.origin = Some(origin_of(text, span.span().start, origin));
        }
        config.hooks.import_claude_settings()?;
        config.validate()?;
        Ok(config)
    }

    /// The configuration in force as TOML, for `dsh check-config` to print. Every key
    /// is written, defaults included (keys whose value is absent are left out), so the
    /// output is a complete config file that parses back to the same configuration.
    pub fn to_toml(&self) -> Result<String, String> {
        toml::to_string_pretty(self).map_err(|e| format!("cannot render the config as TOML: {e}"))
    }

    /// The config as dsh reads it when no `--config` is given: the user's own file
    /// ([`user_config_file`]) when it exists, else the built-in defaults. Also says
    /// which file was read (`None`: none, the defaults).
    pub fn load_layered(explicit: Option<&Path>) -> Result<(Self, Option<PathBuf>), ConfigError> {
        let file = match explicit {
            Some(path) => Some(path.to_path_buf()),
            None => user_config_file().filter(|f| f.exists()),
        };
        Ok((Self::load(file.as_deref())?, file))
    }

    /// Loads the file at `path`, or the built-in defaults when `path` is `None`.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        match path {
            None => Ok(Config::default()),
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
                Self::from_toml(&text, path)
            }
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let e = &self.exec;
        if e.default_timeout_ms == 0 || e.max_timeout_ms == 0 {
            return Err(ConfigError::Invalid(
                "exec timeouts must be positive".into(),
            ));
        }
        if e.kind == ExecutorKind::Ssh && e.ssh.host.trim().is_empty() {
            return Err(ConfigError::Invalid(
                "exec.kind = \"ssh\" needs exec.ssh.host".into(),
            ));
        }
        if self.state.sweep_interval_secs == 0 {
            return Err(ConfigError::Invalid(
                "state.sweep_interval_secs must be positive".into(),
            ));
        }
        if e.max_output_bytes < 16 {
            return Err(ConfigError::Invalid(
                "exec.max_output_bytes must be at least 16".into(),
            ));
        }
        let mut named: std::collections::HashMap<String, &ExternalHookConfig> =
            std::collections::HashMap::new();
        let hooks = self.hooks.all();
        for hook in &hooks {
            if let Some(other) = named.insert(hook.label(), hook) {
                return Err(ConfigError::Invalid(format!(
                    "hooks {} and {} are both named \"{}\": give one a `name`",
                    other.described(),
                    hook.described(),
                    hook.label()
                )));
            }
        }
        for hook in &hooks {
            if let Some(matcher) = &hook.matcher {
                ToolMatcher::parse(matcher)
                    .map_err(|e| ConfigError::Invalid(format!("hook {}: {e}", hook.described())))?;
            }
            hook.check_kind()
                .map_err(|e| ConfigError::Invalid(format!("hook {}: {e}", hook.described())))?;
            if !hook.enforce && hook.event != HookEvent::PreTool {
                return Err(ConfigError::Invalid(format!(
                    "hook {}: only pre_tool hooks can be shadows (enforce = false); a {} shadow \
                     could only hold up the call",
                    hook.described(),
                    hook.event.as_str()
                )));
            }
            if hook.protocol == HookProtocol::V1
                && hook.dialect == HookDialect::Dsh
                && hook.event != HookEvent::PreTool
            {
                return Err(ConfigError::Invalid(format!(
                    "hook {}: protocol \"v1\" answers only pre_tool, not {}",
                    hook.described(),
                    hook.event.as_str()
                )));
            }
        }
        e.sandbox.check().map_err(ConfigError::Invalid)?;
        for name in e.env_pass.iter().chain(e.env_set.keys()) {
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(ConfigError::Invalid(format!(
                    "exec.env_pass / exec.env_set: {name:?} is not a variable name \
                     (empty, or holds '=' or NUL)"
                )));
            }
        }
        if let Some((name, _)) = e.env_set.iter().find(|(_, v)| v.contains('\0')) {
            return Err(ConfigError::Invalid(format!(
                "exec.env_set: the value of {name} holds NUL"
            )));
        }
        if e.kind == ExecutorKind::Ssh && e.ssh.sandbox && e.ssh.helper == HelperMode::Off {
            return Err(ConfigError::Invalid(
                "exec.ssh.sandbox = true needs the helper (exec.ssh.helper = \"auto\" or \
                 \"required\"): only it can sandbox commands on the host"
                    .into(),
            ));
        }
        if let Some(cwd) = &e.cwd
            && !cwd.is_absolute()
        {
            return Err(ConfigError::Invalid(format!(
                "exec.cwd must be an absolute path, got {}",
                cwd.display()
            )));
        }
        Ok(())
    }
}

/// Where the entries of `permissions.rules` and `permissions.tests` start in the text.
/// Lenient on purpose (no `deny_unknown_fields`, any value): the typed parse has
/// already checked the schema.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Spans {
    permissions: SpanPermissions,
}

/// The `[permissions]` part of [`Spans`].
#[derive(Deserialize, Default)]
#[serde(default)]
struct SpanPermissions {
    rules: Vec<toml::Spanned<toml::Value>>,
    tests: Vec<toml::Spanned<toml::Value>>,
}

/// `FILE:LINE` of the byte offset `start` in `text` (lines counted from 1).
///
/// With toml 0.9 the span of an array-of-tables element starts at its `[[...]]` header
/// (not at its first key, and comments or blank lines between header and keys do not
/// matter), and the span of an inline-table element starts at its `{`; so the line of
/// `start` is already the header's line, or the inline table's. The unit tests
/// `origins_point_at_headers_and_inline_tables` pin this down should toml change it.
fn origin_of(text: &str, start: usize, file: &Path) -> String {
    let line = text.as_bytes()[..start.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1;
    format!("{}:{}", file.display(), line)
}

impl ExecConfig {
    /// The state directory: the configured one, else the XDG default.
    pub fn state_dir(&self) -> PathBuf {
        if let Some(dir) = &self.state_dir {
            return dir.clone();
        }
        default_state_dir()
    }
}

/// The user's own config file: `$XDG_CONFIG_HOME/dsh/config.toml`, else
/// `~/.config/dsh/config.toml`; `None` when neither variable is set.
pub fn user_config_file() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("dsh/config.toml"));
    }
    std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(|home| PathBuf::from(home).join(".config/dsh/config.toml"))
}

/// `$XDG_STATE_HOME/dsh`, falling back to `~/.local/state/dsh`, then to a
/// per-uid directory under /tmp when no home is known.
pub fn default_state_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("dsh");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(home).join(".local/state/dsh");
    }
    PathBuf::from(format!("/tmp/dsh-state-{}", nix::unistd::getuid()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_names_are_the_scripts_and_duplicates_are_refused() {
        let named = |argv: &[&str]| {
            ExternalHookConfig {
                argv: argv.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            }
            .label()
        };
        assert_eq!(named(&["node", "x/block.js"]), "block");
        assert_eq!(named(&["python3", "a/b.py"]), "b");
        assert_eq!(
            named(&["/usr/bin/python3.12", "-u", "hooks/guard.py", "--x"]),
            "guard"
        );
        assert_eq!(named(&["/usr/bin/env", "python3", "check.py"]), "check");
        assert_eq!(named(&["uv", "run", "lint.py"]), "lint");
        assert_eq!(named(&["python3", "-m", "my_hook"]), "my_hook");
        assert_eq!(named(&["python3", "-c", "print(1)"]), "python3");
        assert_eq!(named(&["/opt/hooks/rewriter"]), "rewriter");
        assert_eq!(
            named(&[
                "/bin/sh",
                "-c",
                "node \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/fmt.mjs"
            ]),
            "fmt"
        );
        let two = |a: &str, b: &str| {
            format!(
                "[[hooks.command]]\nargv = [\"python3\", \"{a}\"]\n[[hooks.command]]\nargv = [\"node\", \"{b}\"]\n"
            )
        };
        assert!(Config::from_toml(&two("a/one.py", "b/two.js"), Path::new("t")).is_ok());
        let err = Config::from_toml(&two("a/same.py", "b/same.js"), Path::new("t"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`python3 a/same.py`")
                && err.contains("`node b/same.js`")
                && err.contains("\"same\""),
            "{err}"
        );
    }

    #[test]
    fn sandbox_paths_that_cannot_be_enforced_are_refused_with_their_line() {
        for (toml, says) in [
            (
                "[exec.sandbox]\ndeny_read = [\"relative/x\"]\n",
                "must be absolute or ~/",
            ),
            (
                "[exec.sandbox]\ndeny_read = [\"~/a/../b\"]\n",
                "`.` or `..`",
            ),
            ("[exec.sandbox]\ndeny_read = [\"/a/./b\"]\n", "`.` or `..`"),
            ("[exec.sandbox]\nwritable = [\"rel\"]\n", "must be absolute"),
            (
                "[exec.sandbox]\nwritable = [\"/srv/p\"]\ndeny_read = [\"/srv\"]\n",
                "contains the writable root /srv/p",
            ),
        ] {
            let err = Config::from_toml(toml, Path::new("x.toml"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{toml}: {err}");
        }
        Config::from_toml(
            "[exec.sandbox]\ndeny_read = [\"~/.ssh\", \"/etc/shadow\"]\n",
            Path::new("x.toml"),
        )
        .unwrap();
    }

    /// E9: an XDG entry is masked where the variable points and at its default; a
    /// relative XDG value is ignored (the XDG specification says so).
    #[test]
    fn deny_read_entries_resolve_through_xdg_and_their_defaults() {
        let home = Path::new("/home/u");
        let env = |config: Option<&'static str>| {
            move |name: &str| match (name, config) {
                ("XDG_CONFIG_HOME", Some(v)) => Some(std::ffi::OsString::from(v)),
                _ => None,
            }
        };
        let gh = DenyRead::parse(Path::new("$XDG_CONFIG_HOME/gh")).unwrap();
        assert_eq!(
            gh.paths(Some(home), env(Some("/x/conf"))),
            [
                PathBuf::from("/x/conf/gh"),
                PathBuf::from("/home/u/.config/gh")
            ]
        );
        assert_eq!(
            gh.paths(Some(home), env(Some("rel"))),
            [PathBuf::from("/home/u/.config/gh")]
        );
        assert_eq!(
            gh.paths(Some(home), env(Some("/home/u/.config"))),
            [PathBuf::from("/home/u/.config/gh")]
        );
        let keyrings = DenyRead::parse(Path::new("$XDG_DATA_HOME/keyrings")).unwrap();
        assert_eq!(
            keyrings.paths(Some(home), env(Some("/x/conf"))),
            [PathBuf::from("/home/u/.local/share/keyrings")]
        );
        let ssh = DenyRead::parse(Path::new("~/.ssh")).unwrap();
        assert_eq!(
            ssh.paths(Some(home), env(None)),
            [PathBuf::from("/home/u/.ssh")]
        );
        assert!(ssh.paths(None, env(None)).is_empty());
        assert_eq!(DenyRead::parse(Path::new("$HOME/.ssh")), None);
        for entry in DEFAULT_DENY_READ {
            assert!(DenyRead::parse(Path::new(entry)).is_some(), "{entry}");
        }
    }

    /// E4: `env_pass` and `env_set` name variables; anything else is refused at load.
    #[test]
    fn env_pass_and_env_set_take_variable_names_only() {
        let c = Config::from_toml(
            "[exec]\nenv_pass = [\"NPM_TOKEN\"]\nenv_set = { A = \"1\" }\n",
            Path::new("x.toml"),
        )
        .unwrap();
        assert_eq!(c.exec.env_pass, ["NPM_TOKEN"]);
        assert_eq!(c.exec.env_set.get("A").map(String::as_str), Some("1"));
        for toml in [
            "[exec]\nenv_pass = [\"A=B\"]\n",
            "[exec]\nenv_pass = [\"\"]\n",
            "[exec]\nenv_set = { \"A=B\" = \"1\" }\n",
        ] {
            assert!(
                Config::from_toml(toml, Path::new("x.toml")).is_err(),
                "{toml}"
            );
        }
    }

    #[test]
    fn defaults_without_file() {
        let c = Config::load(None).unwrap();
        assert_eq!(c.exec.default_timeout_ms, 120_000);
        assert_eq!(c.exec.max_timeout_ms, 600_000);
        assert_eq!(c.exec.max_output_bytes, 64_000);
        assert_eq!(c.exec.finished_output_bytes, 16_000_000);
        assert_eq!(c.exec.kill_grace_ms, 3_000);
        assert_eq!(c.exec.drain_ms, 2_000);
    }

    #[test]
    fn e10_the_network_is_a_mode_a_legacy_flag_or_a_table_and_bad_values_are_named() {
        let read =
            |body: &str| Config::from_toml(&format!("[exec.sandbox]\n{body}"), Path::new("x.toml"));
        assert_eq!(
            read("").unwrap().exec.sandbox.network.mode,
            NetworkMode::Proxy
        );
        assert_eq!(
            read("network = false").unwrap().exec.sandbox.network.mode,
            NetworkMode::None
        );
        assert_eq!(
            read("network = \"host\"")
                .unwrap()
                .exec
                .sandbox
                .network
                .mode,
            NetworkMode::Host
        );
        let table =
            read("[exec.sandbox.network]\ndefault = \"deny\"\nallow = [\"*.crates.io\"]").unwrap();
        let network = table.exec.sandbox.network;
        assert_eq!(
            (network.mode, network.default),
            (NetworkMode::Proxy, NetworkDefault::Deny)
        );
        assert_eq!(network.allow, ["*.crates.io"]);
        for bad in [
            "network = \"wifi\"",
            "network = 3",
            "[exec.sandbox.network]\nmode = \"x\"",
            "[exec.sandbox.network]\nallowed = []",
        ] {
            let err = read(bad).unwrap_err().to_string();
            assert!(
                err.contains("network") || err.contains("allowed") || err.contains("variant"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn documented_default_file_matches_built_in_defaults() {
        let text = include_str!("../config/dsh.toml");
        let c = Config::from_toml(text, Path::new("config/dsh.toml")).unwrap();
        let d = Config::default();
        assert_eq!(c.exec.default_timeout_ms, d.exec.default_timeout_ms);
        assert_eq!(c.exec.max_timeout_ms, d.exec.max_timeout_ms);
        assert_eq!(c.exec.max_output_bytes, d.exec.max_output_bytes);
        assert_eq!(c.exec.finished_output_bytes, d.exec.finished_output_bytes);
        assert_eq!(c.exec.kill_grace_ms, d.exec.kill_grace_ms);
        assert_eq!(c.exec.drain_ms, d.exec.drain_ms);
        assert_eq!(c.exec.kind, d.exec.kind);
        assert_eq!(c.permissions.default_mode, d.permissions.default_mode);
        assert_eq!(
            c.permissions.read_only_commands,
            d.permissions.read_only_commands
        );
        assert!(c.permissions.rules.is_empty() && c.hooks.command.is_empty());
        assert!(c.permissions.tests.is_empty());
        assert_eq!(c.model.base_url, d.model.base_url);
        assert_eq!(c.model.model, d.model.model);
        assert_eq!(c.model.api_key_env, d.model.api_key_env);
        assert_eq!(c.model.max_retries, d.model.max_retries);
        assert_eq!(c.model.retry_base_ms, d.model.retry_base_ms);
        assert_eq!(c.model.connect_timeout_ms, d.model.connect_timeout_ms);
        assert_eq!(c.model.idle_timeout_ms, d.model.idle_timeout_ms);
        assert_eq!(c.agent.max_steps, d.agent.max_steps);
        assert_eq!(c.agent.system_prompt_mode, d.agent.system_prompt_mode);
        assert_eq!(c.agent.history_budget_chars, d.agent.history_budget_chars);
        assert_eq!(c.agent.titles, d.agent.titles);
        assert_eq!(c.model.vision, d.model.vision);
        let (cs, ds) = (&c.exec.sandbox, &d.exec.sandbox);
        assert_eq!(
            (&cs.bwrap, &cs.network, &cs.writable),
            (&ds.bwrap, &ds.network, &ds.writable)
        );
        assert_eq!(
            (
                &cs.deny_read,
                cs.allow_unix_sockets,
                cs.allow_git_config,
                cs.allow_home_root
            ),
            (
                &ds.deny_read,
                ds.allow_unix_sockets,
                ds.allow_git_config,
                ds.allow_home_root
            )
        );
        let (cs, ds) = (&c.exec.ssh, &d.exec.ssh);
        assert_eq!((&cs.host, cs.port, &cs.user), (&ds.host, ds.port, &ds.user));
        assert_eq!(cs.identity_file, ds.identity_file);
        assert_eq!(
            (cs.known_hosts, &cs.known_hosts_file),
            (ds.known_hosts, &ds.known_hosts_file)
        );
        assert_eq!(cs.connect_timeout_ms, ds.connect_timeout_ms);
        assert_eq!((&cs.path_map, &cs.ssh), (&ds.path_map, &ds.ssh));
        assert_eq!((cs.helper, &cs.helper_dir), (ds.helper, &ds.helper_dir));
        assert_eq!(cs.sandbox, ds.sandbox);
    }

    #[test]
    fn executor_kinds_and_their_sections_parse() {
        let text = r#"
            [exec]
            kind = "ssh"
            [exec.ssh]
            host = "build.example"
            port = 2222
            known_hosts = "accept-new"
            [[exec.ssh.path_map]]
            local = "/home/me/src"
            remote = "/srv/src"
            [exec.sandbox]
            network = true
            writable = ["/var/cache/me"]
        "#;
        let c = Config::from_toml(text, Path::new("x.toml")).unwrap();
        assert_eq!(c.exec.kind, ExecutorKind::Ssh);
        assert_eq!(c.exec.ssh.port, 2222);
        assert_eq!(c.exec.ssh.known_hosts.ssh_option(), "accept-new");
        assert_eq!(c.exec.ssh.path_map[0].remote, PathBuf::from("/srv/src"));
        assert_eq!(c.exec.sandbox.network.mode, NetworkMode::Host);
        let err = Config::from_toml("[exec]\nkind = \"ssh\"\n", Path::new("x.toml")).unwrap_err();
        assert!(err.to_string().contains("exec.ssh.host"), "{err}");
    }

    #[test]
    fn rules_and_hooks_parse() {
        let text = r#"
            [exec]
            kind = "none"
            [permissions]
            default_mode = "read-only"
            [[permissions.rules]]
            tool = "bash"
            command = "git status"
            action = "allow"
            [[hooks.command]]
            argv = ["/bin/true"]
        "#;
        let c = Config::from_toml(text, Path::new("x.toml")).unwrap();
        assert_eq!(c.exec.kind, ExecutorKind::None);
        assert_eq!(c.permissions.default_mode, Mode::ReadOnly);
        assert_eq!(c.permissions.rules[0].action, Decision::Allow);
        assert_eq!(c.hooks.command[0].timeout_ms, 5000);
    }

    /// A config with something in every list: rules (with and without command and
    /// examples), policy tests, hooks, ssh path maps, optional paths set.
    const FULL: &str = r#"
        [exec]
        kind = "ssh"
        cwd = "/home/me/work"
        [exec.ssh]
        host = "build.example"
        user = "me"
        identity_file = "/home/me/.ssh/id_ed25519"
        known_hosts = "accept-new"
        [[exec.ssh.path_map]]
        local = "/home/me/src"
        remote = "/srv/src"
        [[exec.ssh.path_map]]
        local = "/home/me/other"
        remote = "/srv/other"
        [exec.sandbox]
        writable = ["/var/cache/me"]
        [permissions]
        default_mode = "read-only"
        read_only_commands = ["ls", "git status"]
        [[permissions.rules]]
        tool = "bash"
        command = "git status"
        action = "allow"
        examples = ["git status", "git status --short"]
        not_examples = ["git stash"]
        [[permissions.rules]]
        tool = "*"
        action = "ask"
        [[permissions.tests]]
        command = "rm -rf /"
        expect = "deny"
        [[permissions.tests]]
        command = "ls"
        mode = "auto"
        expect = "allow"
        [[hooks.command]]
        argv = ["/bin/true", "--x"]
        tools = ["bash"]
        [[hooks.command]]
        argv = ["/bin/false"]
        timeout_ms = 7
        [model]
        base_url = "http://localhost:8000/v1"
        [agent]
        system_prompt_file = "/etc/dsh/prompt.md"
        system_prompt_mode = "replace"
    "#;

    /// Parses `c.to_toml()` back and checks it renders identically (every field is
    /// serialized, so equal renderings mean equal configs, origins aside).
    fn round_trip(c: &Config) -> Config {
        let text = c.to_toml().unwrap();
        let back = Config::from_toml(&text, Path::new("rendered.toml"))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back.to_toml().unwrap(), text);
        back
    }

    #[test]
    fn defaults_render_as_toml_that_parses_back() {
        let d = Config::default();
        let back = round_trip(&d);
        assert_eq!(back.exec.kind, ExecutorKind::Local);
        assert_eq!(back.exec.state_dir, None);
        assert_eq!(
            back.permissions.read_only_commands,
            d.permissions.read_only_commands
        );
        assert!(back.permissions.rules.is_empty() && back.permissions.tests.is_empty());
        assert_eq!(back.model.base_url, d.model.base_url);
        // The documented file is the defaults: it renders the same.
        let doc = Config::from_toml(
            include_str!("../config/dsh.toml"),
            Path::new("config/dsh.toml"),
        )
        .unwrap();
        assert_eq!(doc.to_toml().unwrap(), d.to_toml().unwrap());
    }

    #[test]
    fn a_full_config_renders_as_toml_that_parses_back() {
        let c = Config::from_toml(FULL, Path::new("full.toml")).unwrap();
        let text = c.to_toml().unwrap();
        let back = round_trip(&c);
        // Enums are written with the names they are read with.
        for line in [
            "kind = \"ssh\"",
            "known_hosts = \"accept-new\"",
            "default_mode = \"read-only\"",
            "system_prompt_mode = \"replace\"",
            "expect = \"deny\"",
            "mode = \"auto\"",
        ] {
            assert!(text.lines().any(|l| l.trim() == line), "{line}\n{text}");
        }
        // Origins are not keys.
        assert!(!text.contains("origin"), "{text}");
        let strip = |rules: &[PermissionRule]| {
            rules
                .iter()
                .map(|r| PermissionRule {
                    origin: None,
                    ..r.clone()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(&back.permissions.rules), strip(&c.permissions.rules));
        let rule = &back.permissions.rules[0];
        assert_eq!(rule.examples, ["git status", "git status --short"]);
        assert_eq!(rule.not_examples, ["git stash"]);
        let star = &back.permissions.rules[1];
        assert_eq!(
            (star.command.as_deref(), star.action),
            (None, Decision::Ask)
        );
        assert!(star.examples.is_empty() && star.not_examples.is_empty());
        let tests: Vec<_> = back
            .permissions
            .tests
            .iter()
            .map(|t| (t.command.as_str(), t.mode, t.expect))
            .collect();
        assert_eq!(
            tests,
            [
                ("rm -rf /", Mode::Ask, Decision::Deny),
                ("ls", Mode::Auto, Decision::Allow)
            ]
        );
        assert_eq!(back.hooks.command, c.hooks.command);
        assert_eq!(back.hooks.command[1].timeout_ms, 7);
        assert_eq!(back.exec.ssh.path_map, c.exec.ssh.path_map);
        assert_eq!(back.exec.ssh.user.as_deref(), Some("me"));
        assert_eq!(back.exec.cwd, Some(PathBuf::from("/home/me/work")));
        assert_eq!(
            back.agent.system_prompt_file,
            Some(PathBuf::from("/etc/dsh/prompt.md"))
        );
    }

    #[test]
    fn origins_point_at_headers_and_inline_tables() {
        // Line numbers are 1-based; the raw string starts with a newline, so its first
        // line is empty.
        let text = r#"
[permissions]
default_mode = "ask"

[[permissions.rules]]
# a comment between header and keys

tool = "bash"
command = "rm"
action = "deny"

[[ permissions . rules ]]
tool = "*"
action = "ask"
[[permissions.tests]]
command = "rm -rf /"
expect = "deny"
"#;
        let c = Config::from_toml(text, Path::new("/etc/dsh.toml")).unwrap();
        let origins: Vec<_> = c
            .permissions
            .rules
            .iter()
            .map(|r| r.origin.as_deref())
            .collect();
        assert_eq!(origins, [Some("/etc/dsh.toml:5"), Some("/etc/dsh.toml:12")]);
        assert_eq!(
            c.permissions.tests[0].origin.as_deref(),
            Some("/etc/dsh.toml:15")
        );

        let inline = "[permissions]\n\
                      tests = [{ command = \"ls\", expect = \"allow\" }]\n\
                      rules = [\n\
                      \x20 { tool = \"bash\", action = \"allow\" },\n\
                      \n\
                      \x20 { tool = \"*\", action = \"deny\" },\n\
                      ]\n";
        let c = Config::from_toml(inline, Path::new("x.toml")).unwrap();
        let origins: Vec<_> = c
            .permissions
            .rules
            .iter()
            .map(|r| r.origin.as_deref())
            .collect();
        assert_eq!(origins, [Some("x.toml:4"), Some("x.toml:6")]);
        assert_eq!(c.permissions.tests[0].origin.as_deref(), Some("x.toml:2"));

        // Built in code and by default: no origin.
        assert_eq!(PermissionRule::default().origin, None);
        assert!(Config::default().permissions.rules.is_empty());
    }

    #[test]
    fn documented_permission_examples_parse() {
        // The commented-out `[[permissions.*]]` examples of config/dsh.toml, uncommented
        // and appended to the file.
        let doc = include_str!("../config/dsh.toml");
        let mut text = doc.to_string();
        let mut inside = false;
        for line in doc.lines() {
            inside = line.starts_with("# [[permissions.") || (inside && line.starts_with("# "));
            if inside {
                text.push_str(&line[2..]);
                text.push('\n');
            }
        }
        let c = Config::from_toml(&text, Path::new("dsh.toml")).unwrap();
        let p = &c.permissions;
        assert_eq!((p.rules.len(), p.tests.len()), (4, 2));
        assert_eq!(p.rules[2].path.as_deref(), Some("secrets/**"));
        // E10: the network rule's host and port, and its examples hold.
        assert_eq!(
            (p.rules[3].host.as_deref(), p.rules[3].port),
            (Some("*.crates.io"), Some(443))
        );
        assert_eq!(crate::policy::check_config(p), []);
        assert!(!p.rules[0].examples.is_empty() && !p.rules[0].not_examples.is_empty());
        assert_eq!(p.tests[0].mode, Mode::Auto);
        let header = doc.lines().count() + 1;
        assert_eq!(p.rules[0].origin, Some(format!("dsh.toml:{header}")));
    }

    #[test]
    fn policy_tests_default_to_ask_mode_and_reject_unknown_keys() {
        let text = "[[permissions.tests]]\ncommand = \"ls\"\nexpect = \"ask\"\n";
        let c = Config::from_toml(text, Path::new("x.toml")).unwrap();
        assert_eq!(c.permissions.tests[0].mode, Mode::Ask);
        assert_eq!(c.permissions.tests[0].expect, Decision::Ask);
        let err =
            Config::from_toml(&format!("{text}extra = 1\n"), Path::new("x.toml")).unwrap_err();
        assert!(err.to_string().contains("extra"), "{err}");
        // `origin` is not a key a file can set.
        let err = Config::from_toml(
            "[[permissions.rules]]\ntool = \"bash\"\naction = \"deny\"\norigin = \"a:1\"\n",
            Path::new("x.toml"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("origin"), "{err}");
        let err = Config::from_toml(
            "[[permissions.tests]]\ncommand = \"ls\"\n",
            Path::new("x.toml"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("expect"), "{err}");
    }

    #[test]
    fn decisions_combine_deny_over_ask_over_allow() {
        use Decision::*;
        assert_eq!([Allow, Ask, Allow].into_iter().max(), Some(Ask));
        assert_eq!([Ask, Deny, Allow].into_iter().max(), Some(Deny));
    }

    #[test]
    fn unknown_key_is_an_error() {
        let err = Config::from_toml("[exec]\ntimeout = 3\n", Path::new("x.toml")).unwrap_err();
        assert!(err.to_string().contains("timeout"), "{err}");
    }

    #[test]
    fn relative_cwd_is_rejected() {
        let err = Config::from_toml("[exec]\ncwd = \"rel\"\n", Path::new("x.toml")).unwrap_err();
        assert!(err.to_string().contains("absolute"), "{err}");
    }
}
