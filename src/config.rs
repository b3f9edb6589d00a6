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
}

/// Settings of the shared command executor (`[exec]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecConfig {
    /// Timeout of a foreground command when the call names none.
    pub default_timeout_ms: u64,
    /// Upper bound for any requested timeout.
    pub max_timeout_ms: u64,
    /// Bytes of each stream (stdout, stderr) kept in memory per command.
    pub max_output_bytes: usize,
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
}

impl Default for ExecConfig {
    fn default() -> Self {
        Self {
            default_timeout_ms: 120_000,
            max_timeout_ms: 600_000,
            max_output_bytes: 64_000,
            kill_grace_ms: 3_000,
            drain_ms: 2_000,
            cwd: None,
            state_dir: None,
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
        if e.max_output_bytes < 16 {
            return Err(ConfigError::Invalid(
                "exec.max_output_bytes must be at least 16".into(),
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
        assert_eq!(c.exec.kill_grace_ms, d.exec.kill_grace_ms);
        assert_eq!(c.exec.drain_ms, d.exec.drain_ms);
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
