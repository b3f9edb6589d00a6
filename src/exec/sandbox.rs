//! The sandbox executor: `bash -c` inside bubblewrap on this machine.
//!
//! Each command gets the whole file system read-only except its writable roots
//! (the calling session's cwd, the directories it was granted, and
//! `[exec.sandbox] writable`), a private /tmp, /dev and /proc, no network unless
//! configured, and a PID namespace of its own, which is what ends everything it
//! started (`pidns`). The engine (`process`) does the rest, as for local commands.
//!
//! Fail closed: the executor is only built after a probe sandbox ran; a missing
//! bwrap or a kernel that refuses namespaces stops `dsh serve` with a message, and
//! nothing ever runs unsandboxed instead.

use super::pidns;
use super::process::{Launcher, ProcessExecutor, check_local_workdir};
use super::procs::Selector;
use super::{ExecError, ExecSpec};
use crate::config::{ExecConfig, SandboxConfig};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::process::Command;

/// Builds the `bwrap` command line of each command.
pub struct SandboxLauncher {
    bwrap: PathBuf,
    network: bool,
    writable: Vec<PathBuf>,
}

/// Runs commands in bubblewrap sandboxes (see the module docs).
pub type SandboxExecutor = ProcessExecutor<SandboxLauncher>;

impl ProcessExecutor<SandboxLauncher> {
    /// A sandbox executor over the daemon's environment (filtered by E4), or why
    /// none can exist on this machine.
    pub fn new(config: &ExecConfig) -> Result<Self, String> {
        Self::with_env(config, std::env::vars_os())
    }

    /// As [`Self::new`], with `base_env` in place of the daemon's environment.
    pub fn with_env(
        config: &ExecConfig,
        base_env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<Self, String> {
        let launcher = SandboxLauncher::new(&config.sandbox);
        launcher.probe()?;
        Self::with_launcher(config, base_env, launcher)
            .map_err(|e| format!("cannot start the sandbox executor: {e}"))
    }
}

impl SandboxLauncher {
    fn new(config: &SandboxConfig) -> Self {
        Self {
            bwrap: config.bwrap.clone(),
            network: config.network,
            writable: config.writable.clone(),
        }
    }

    /// The `bwrap` arguments up to and including `--`, for a command in `workdir`
    /// that may write to `roots`.
    fn arguments(&self, workdir: &Path, roots: &[PathBuf]) -> Vec<OsString> {
        let mut args: Vec<OsString> = [
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
        ]
        .map(OsString::from)
        .to_vec();
        // Binds come after the private /tmp so that a root under /tmp shows through.
        for root in roots.iter().chain(&self.writable) {
            if root.is_absolute() && root.is_dir() {
                args.extend(["--bind".into(), root.into(), root.into()]);
            }
        }
        args.extend(
            [
                "--unshare-pid",
                "--unshare-ipc",
                "--unshare-uts",
                "--unshare-cgroup-try",
            ]
            .map(OsString::from),
        );
        if !self.network {
            args.push("--unshare-net".into());
        }
        args.extend(["--die-with-parent", "--new-session"].map(OsString::from));
        args.extend(["--chdir".into(), workdir.into(), "--".into()]);
        args
    }

    /// Runs `true` in a sandbox like every command's; the error says what is
    /// missing and how to fix it.
    fn probe(&self) -> Result<(), String> {
        let start = super::children::starting();
        let output = std::process::Command::new(&self.bwrap)
            .args(self.arguments(Path::new("/"), &[]))
            .arg("true")
            .stdin(std::process::Stdio::null())
            .output();
        drop(start);
        let bwrap = self.bwrap.display();
        match output {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
                "the sandbox executor needs bubblewrap, and `{bwrap}` was not found: install \
                 it (Debian: `apt install bubblewrap`), set [exec.sandbox] bwrap to its path, \
                 or choose another [exec] kind"
            )),
            Err(e) => Err(format!("the sandbox executor cannot run `{bwrap}`: {e}")),
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(format!(
                "bubblewrap cannot create a sandbox on this machine ({}): {}. It needs user \
                 namespaces (sysctls kernel.unprivileged_userns_clone=1 and \
                 user.max_user_namespaces > 0; on Ubuntu 24.04+ an AppArmor profile that allows \
                 bwrap) or a setuid bwrap; commands are never run unsandboxed instead",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    }
}

#[async_trait::async_trait]
impl Launcher for SandboxLauncher {
    fn kind(&self) -> &'static str {
        "sandbox"
    }

    /// bwrap reports a signal death of the command as exit code 128+n.
    fn exact_status(&self) -> bool {
        false
    }

    async fn check_workdir(&self, dir: &Path) -> Result<(), ExecError> {
        check_local_workdir(dir)
    }

    fn command(&self, spec: &ExecSpec, _mark: &str) -> Result<Command, ExecError> {
        let mut cmd = Command::new(&self.bwrap);
        cmd.args(self.arguments(&spec.workdir, &spec.writable_roots))
            .arg("bash")
            .arg("-c")
            .arg(&spec.command)
            .current_dir(&spec.workdir);
        Ok(cmd)
    }

    async fn stop(&self, mark: &str, sid: Option<i32>, grace: Duration) {
        let selector = Selector::Task {
            mark: mark.to_string(),
            sid,
        };
        pidns::terminate(selector, sid, grace).await;
    }

    async fn stop_prefix(&self, prefix: &str, grace: Duration) {
        pidns::terminate(Selector::MarkPrefix(prefix.to_string()), None, grace).await;
    }

    /// When the command's namespace init exits, the kernel SIGKILLs what is left in
    /// the namespace, but those processes are reaped a moment later: a run returns
    /// only once they are gone, so nothing of a sandboxed command is seen after it
    /// (the contract test caught one in the process table about once in five runs).
    async fn after_exit(&self, mark: &str, sid: i32, grace: Duration) {
        let selector = Selector::Task {
            mark: mark.to_string(),
            sid: Some(sid),
        };
        pidns::terminate(selector, Some(sid), grace).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launcher(network: bool) -> SandboxLauncher {
        SandboxLauncher::new(&SandboxConfig {
            network,
            writable: vec![PathBuf::from("/")],
            ..SandboxConfig::default()
        })
    }

    fn joined(args: &[OsString]) -> String {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn writable_roots_are_bound_after_the_private_tmp_and_network_is_off_by_default() {
        let args = joined(&launcher(false).arguments(Path::new("/tmp"), &[PathBuf::from("/tmp")]));
        let tmpfs = args.find("--tmpfs /tmp").unwrap();
        let bind = args.find("--bind /tmp /tmp").unwrap();
        assert!(tmpfs < bind, "{args}");
        assert!(
            args.contains("--bind / /"),
            "config roots are bound too: {args}"
        );
        assert!(args.contains("--unshare-net"), "{args}");
        assert!(
            args.ends_with("--die-with-parent --new-session --chdir /tmp --"),
            "{args}"
        );
    }

    #[test]
    fn network_on_and_missing_or_relative_roots_skipped() {
        let args = joined(&launcher(true).arguments(
            Path::new("/"),
            &[PathBuf::from("/no/such/dir"), PathBuf::from("relative")],
        ));
        assert!(!args.contains("--unshare-net"), "{args}");
        assert!(
            !args.contains("/no/such/dir") && !args.contains("relative"),
            "{args}"
        );
    }

    #[test]
    fn a_missing_bwrap_is_refused_with_how_to_fix_it() {
        let launcher = SandboxLauncher::new(&SandboxConfig {
            bwrap: PathBuf::from("/nonexistent/bwrap"),
            ..SandboxConfig::default()
        });
        let err = launcher.probe().unwrap_err();
        assert!(err.contains("apt install bubblewrap"), "{err}");
    }
}
