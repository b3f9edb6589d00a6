//! `[exec.ssh]`: the ssh executor's host, helper and path mapping.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
