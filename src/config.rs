//! Typed daemon configuration.
//!
//! `config/dsh.toml` in the repository is the documented default; every key has a
//! default here, so the daemon runs with no file at all. Unknown keys are rejected so
//! that a typo in a config file is an error rather than a silently ignored setting.

use serde::Deserialize;
use std::path::{Path, PathBuf};

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
#[derive(Debug, Clone, Default, Deserialize)]
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
}

/// DeepSeek's API, the default model endpoint.
pub const DEFAULT_MODEL_BASE_URL: &str = "https://api.deepseek.com";

/// `[model]`: an OpenAI-compatible chat-completions endpoint. The environment
/// (`DSH_MODEL_BASE_URL`, `DSH_MODEL`, `DSH_API_KEY`) overrides these.
#[derive(Debug, Clone, Deserialize)]
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
        }
    }
}

/// `[agent]`: the turn loop.
#[derive(Debug, Clone, Deserialize)]
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
}

/// How `system_prompt_file` combines with the built-in prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
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
        }
    }
}

/// A policy decision. Ordered so that the strongest wins when decisions combine:
/// `Deny > Ask > Allow` (`max` of several decisions is their combination).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

/// A session's permission mode (ACP `session/set_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, serde::Serialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionRule {
    /// The tool the rule is about (`bash`, `bash_output`, `bash_kill`, or `*`).
    pub tool: String,
    /// For `bash`: a command prefix, word by word (`git status`); `*` as a word
    /// matches any one word. Absent: every call of the tool.
    pub command: Option<String>,
    pub action: Decision,
}

/// `[permissions]`: rules and the read-only list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PermissionsConfig {
    /// The mode of a new session.
    pub default_mode: Mode,
    /// Rules, all consulted; the strongest matching decision wins.
    pub rules: Vec<PermissionRule>,
    /// Command prefixes known to only read (used by `read-only` mode).
    pub read_only_commands: Vec<String>,
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

/// One `[[hooks.command]]` entry: an external program consulted on tool calls.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalHookConfig {
    /// Program and arguments (no shell).
    pub argv: Vec<String>,
    /// Tools the hook is asked about; empty means all.
    #[serde(default)]
    pub tools: Vec<String>,
    /// How long the program may take before its silence counts as a deny.
    #[serde(default = "default_hook_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_hook_timeout_ms() -> u64 {
    5_000
}

/// `[hooks]`: external hook programs, consulted in order.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HooksConfig {
    pub command: Vec<ExternalHookConfig>,
}

/// The executor implementations a config can choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// The bubblewrap program (a name looked up in PATH, or a path).
    pub bwrap: PathBuf,
    /// Whether commands may use the network (off: a private network namespace with
    /// only loopback).
    pub network: bool,
    /// Directories every command may write to, besides the calling session's cwd
    /// and the directories the session was granted.
    pub writable: Vec<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            bwrap: PathBuf::from("bwrap"),
            network: false,
            writable: Vec::new(),
        }
    }
}

/// How the ssh executor treats the remote host's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
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

/// One `[[exec.ssh.path_map]]` entry: a local directory and where it is remotely.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathMapping {
    pub local: PathBuf,
    pub remote: PathBuf,
}

/// `[exec.ssh]`: the remote host and how to reach it with the system OpenSSH client.
#[derive(Debug, Clone, Deserialize)]
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
        }
    }
}

/// Settings of the shared command executor (`[exec]`).
#[derive(Debug, Clone, Deserialize)]
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
        }
    }
}

impl Config {
    /// Parses a config from TOML text; `origin` names the source in errors.
    pub fn from_toml(text: &str, origin: &Path) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_path_buf(),
            message: e.to_string(),
        })?;
        config.validate()?;
        Ok(config)
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
        if e.max_output_bytes < 16 {
            return Err(ConfigError::Invalid(
                "exec.max_output_bytes must be at least 16".into(),
            ));
        }
        for hook in &self.hooks.command {
            if hook.argv.is_empty() {
                return Err(ConfigError::Invalid(
                    "hooks.command entry with empty argv".into(),
                ));
            }
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

impl ExecConfig {
    /// The state directory: the configured one, else the XDG default.
    pub fn state_dir(&self) -> PathBuf {
        if let Some(dir) = &self.state_dir {
            return dir.clone();
        }
        default_state_dir()
    }
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
        let (cs, ds) = (&c.exec.sandbox, &d.exec.sandbox);
        assert_eq!(
            (&cs.bwrap, cs.network, &cs.writable),
            (&ds.bwrap, ds.network, &ds.writable)
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
        assert!(c.exec.sandbox.network);
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
