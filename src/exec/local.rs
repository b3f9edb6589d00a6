//! The local executor: `bash -c` on this machine, as the daemon's user.
//!
//! Everything but starting `bash` is the shared engine's (`process`): the local
//! launcher's cleanup is the engine's default, the process table of this machine.

use super::process::{Launcher, ProcessExecutor, check_local_workdir};
use super::{ExecError, ExecSpec};
use crate::config::ExecConfig;
use std::ffi::OsString;
use std::path::Path;
use tokio::process::Command;

/// Starts `bash -c <command>` in the command's workdir.
pub struct LocalLauncher;

/// Runs commands as local processes (see `process` for the lifecycle).
pub type LocalExecutor = ProcessExecutor<LocalLauncher>;

impl ProcessExecutor<LocalLauncher> {
    /// An executor with the daemon's own environment as the base of every
    /// command's environment (filtered by E4).
    pub fn new(config: &ExecConfig) -> std::io::Result<Self> {
        Self::with_env(config, std::env::vars_os())
    }

    /// An executor whose commands inherit `base_env` (filtered by E4) instead of the
    /// daemon's environment; tests use it to prove the filter.
    pub fn with_env(
        config: &ExecConfig,
        base_env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> std::io::Result<Self> {
        Self::with_launcher(config, base_env, LocalLauncher)
    }
}

#[async_trait::async_trait]
impl Launcher for LocalLauncher {
    fn kind(&self) -> &'static str {
        "local"
    }

    async fn check_workdir(&self, dir: &Path) -> Result<(), ExecError> {
        check_local_workdir(dir)
    }

    fn command(&self, spec: &ExecSpec, _mark: &str) -> Result<Command, ExecError> {
        let mut cmd = Command::new("bash");
        cmd.arg("-c").arg(&spec.command).current_dir(&spec.workdir);
        Ok(cmd)
    }

    /// A local command is its host process and what it started: nothing of the
    /// launcher's own to hand over.
    fn carries_tasks(&self) -> bool {
        true
    }
}
