//! Typed daemon configuration.
//!
//! `config/dsh.toml` in the repository is the documented default; every key has a
//! default here, so the daemon runs with no file at all. Unknown keys are rejected so
//! that a typo in a config file is an error rather than a silently ignored setting.
//! Each section is a file of `config/`, re-exported here, so every type is `config::X`.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub mod claude_settings;
pub use claude_settings::ToolMatcher;

mod agents;
mod daemon;
mod exec;
mod hooks;
mod model;
mod permissions;
mod sandbox;
mod ssh;
pub use agents::{WrappedAgent, valid_env_name};
pub use daemon::*;
pub use exec::*;
pub use hooks::*;
pub use model::*;
pub use permissions::*;
pub use sandbox::*;
pub use ssh::*;

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
    /// [`WrappedAgent`].
    pub agents: Vec<WrappedAgent>,
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

    /// What identifies the configuration in force, for `dsh exec --config CANDIDATE` to
    /// tell whether the running daemon already judges by the candidate: the SHA-256 of
    /// its JSON (every key, in declaration order; no map of it has a random order), with
    /// the state directory resolved, since a daemon's `--state-dir` and a config's
    /// `[exec] state_dir` name the same thing. Rules' origins are not keys: the same
    /// text at another path is the same configuration.
    pub fn fingerprint(&self) -> String {
        use sha2::Digest;
        let mut resolved = self.clone();
        resolved.exec.state_dir = Some(self.exec.state_dir());
        let json = serde_json::to_vec(&resolved).unwrap_or_default();
        format!("{:x}", sha2::Sha256::digest(&json))
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
mod tests;
