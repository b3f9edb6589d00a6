//! `[exec]`: how commands are run (the executor's kind, timeouts, output bounds, the
//! environment), and the state directory it writes to.

use super::{SandboxConfig, SshConfig, default_state_dir};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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

impl ExecConfig {
    /// The state directory: the configured one, else the XDG default.
    pub fn state_dir(&self) -> PathBuf {
        if let Some(dir) = &self.state_dir {
            return dir.clone();
        }
        default_state_dir()
    }
}
