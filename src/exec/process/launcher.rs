//! The per-kind part of the engine: how a command becomes a process on this machine
//! and how what it started is found and ended.

use super::*;

/// How one executor kind turns a command into a process on this machine and ends
/// what it started. The engine adds the marker, environment, stdio and the new
/// session to the command a launcher builds, and calls the launcher's cleanup at the
/// right moments.
#[async_trait::async_trait]
pub trait Launcher: Send + Sync + 'static {
    /// A short name for status output ("local", "sandbox", "ssh").
    fn kind(&self) -> &'static str;

    /// Whether the host process's exit status is the command's own. A wrapper that
    /// reports a signal death as exit code 128+n (bwrap, ssh) makes it inexact; the
    /// engine then reads 128+n as that signal when it had stopped the command.
    fn exact_status(&self) -> bool {
        true
    }

    /// Checks that `dir` can be the command's working directory.
    async fn check_workdir(&self, dir: &Path) -> Result<(), ExecError>;

    /// The host program that runs `spec`; `mark` is the command's marker, for
    /// launchers that must pass it on (a remote host does not inherit environments).
    /// Only the program, its arguments and the working directory are used: the
    /// engine sets the environment, stdio and session and starts it with
    /// `spawn::spawn` (a `Command` because the ssh launcher builds its other calls,
    /// which it runs itself, the same way).
    fn command(&self, spec: &ExecSpec, mark: &str) -> Result<Command, ExecError>;

    /// How to start `spec` as a server spoken to over stdin and stdout
    /// ([`BashExecutor::start_service`]); a launcher whose command closes stdin refuses.
    /// `env` is the server's own environment: returned to be set on the host process
    /// (the default), or, by a launcher that cannot pass it on that way (ssh), written
    /// to the host process's stdin first ([`ServiceLaunch::stdin_preamble`]). Never put
    /// into the command: a command line is readable by every local user.
    fn service_command(
        &self,
        spec: &ExecSpec,
        mark: &str,
        env: &[(String, String)],
    ) -> Result<ServiceLaunch, ExecError> {
        Ok(ServiceLaunch {
            command: self.command(spec, mark)?,
            env: os_env(env),
            stdin_preamble: Vec::new(),
        })
    }

    /// Ends one command: everything marked `mark` or in session `sid` (the host
    /// process's), SIGTERM first, SIGKILL after `grace`, until none is left.
    async fn stop(&self, mark: &str, sid: Option<i32>, grace: Duration) {
        procs::terminate(
            Selector::Task {
                mark: mark.to_string(),
                sid,
            },
            grace,
        )
        .await;
    }

    /// After the host process exited by itself: ends what is left in its session,
    /// leaving processes that detached on purpose. `mark` is the command's marker.
    /// Returns what the command's output should end with (lines the launcher has to
    /// tell about what the command left; a sandbox's tripwires).
    async fn after_exit(&self, _mark: &str, sid: i32, grace: Duration) -> Vec<String> {
        // The common case, nothing left anywhere, is told by the daemon's own
        // children instead of a pass over /proc (`children`).
        if crate::exec::children::leftovers_possible() {
            procs::terminate(Selector::Session(sid), grace).await;
        }
        Vec::new()
    }

    /// Ends everything whose marker starts with `prefix` (one scope, or all).
    async fn stop_prefix(&self, prefix: &str, grace: Duration) {
        procs::terminate(Selector::MarkPrefix(prefix.to_string()), grace).await;
    }

    /// Called when the host process exited by itself with `exit_code`: a message
    /// when that exit means the command was lost rather than finished (ssh: the
    /// connection dropped). The task is then reported killed, with the message in
    /// its stderr.
    async fn lost(&self, exit_code: Option<i32>, mark: &str) -> Option<String> {
        let _ = (exit_code, mark);
        None
    }

    /// Descriptors the host process of `mark` must inherit (the sandbox's seccomp
    /// program, read by bwrap), set aside by [`Launcher::command`] or
    /// [`Launcher::service_command`]; taken once, closed here once it started.
    fn inherited(&self, mark: &str) -> Vec<std::os::fd::OwnedFd> {
        let _ = mark;
        Vec::new()
    }

    /// The host process of `mark`, whose command line [`Launcher::command`] built,
    /// could not be started: what the launcher set aside for it can go.
    fn never_started(&self, mark: &str) {
        let _ = mark;
    }

    /// The host process of `mark` started, as process `pid`. A launcher whose
    /// process waits for something of the daemon's before it runs the command (the
    /// sandbox's network proxy, made in the sandbox's own network namespace) provides
    /// it here. An error stops the command and is its result.
    async fn started(&self, mark: &str, pid: i32) -> Result<(), String> {
        let _ = (mark, pid);
        Ok(())
    }

    /// Who judges the connections of commands whose network goes through dsh's
    /// proxy (the sandbox's); others have none to judge.
    fn set_connection_judge(&self, judge: Arc<dyn crate::exec::netproxy::ConnectionJudge>) {
        let _ = judge;
    }

    /// Connections its commands hold open through dsh's network proxy, by task or
    /// call id ([`BashExecutor::proxied_connections`]).
    fn proxied_connections(&self) -> Vec<(String, usize)> {
        Vec::new()
    }

    /// The last step of shutdown, once every command is gone.
    async fn close(&self) {}

    /// Whether a running command of this kind can be let go by one daemon program and
    /// supervised again by the next (`dsh upgrade`): true when its host process is all
    /// there is to it (local); a launcher that keeps per-command state of its own (the
    /// sandbox's proxy and tripwires, the ssh helper) cannot.
    fn carries_tasks(&self) -> bool {
        false
    }

    // File access (E11): what `BashExecutor`'s file methods ask of the executor's
    // place. No defaults, so each launcher says where its files are.

    /// See [`BashExecutor::files_are_local`].
    fn files_are_local(&self) -> bool;

    /// See [`BashExecutor::stat_file`].
    async fn stat_file(
        &self,
        request: &FileRequest,
        intent: FileIntent,
    ) -> Result<Option<FileStat>, FileError>;

    /// See [`BashExecutor::read_file`].
    async fn read_file(&self, request: &FileRequest) -> Result<crate::exec::FileRead, FileError>;

    /// See [`BashExecutor::file_containment`].
    async fn file_containment(
        &self,
        request: &FileRequest,
        intent: FileIntent,
    ) -> Result<Option<crate::containment::Containment>, FileError>;

    /// See [`BashExecutor::write_file`].
    async fn write_file(
        &self,
        request: &FileRequest,
        content: &[u8],
    ) -> Result<WriteOutcome, FileError>;

    /// Where a command of this launcher reads the spill file `local` (on this
    /// machine): the path itself where commands run here. A launcher whose commands
    /// run on another host copies the file there and returns its path there, since
    /// the model's next command can open only that (issue 32).
    async fn publish_spill(&self, local: &Path) -> Result<PathBuf, String> {
        Ok(local.to_path_buf())
    }
}

/// What [`Launcher::service_command`] gives the engine to start a server with. The
/// server's own environment (often an API token) reaches it by one of the two fields
/// after the command, never in the command: `ps` shows every command line to every
/// local user.
pub struct ServiceLaunch {
    /// The host program, read as [`Launcher::command`]'s is.
    pub command: Command,
    /// Set on the host process's environment (local, sandbox; empty for ssh, whose
    /// sshd drops a client's environment).
    pub env: Vec<(OsString, OsString)>,
    /// Bytes the engine writes to the host process's stdin before anything else, before
    /// the server's client has its stdin (empty: none). The ssh launcher's server
    /// environment, which its remote wrapper reads off the channel before it starts
    /// the server.
    pub stdin_preamble: Vec<u8>,
}

/// A server's own `env` as the process environment takes it.
pub(crate) fn os_env(env: &[(String, String)]) -> Vec<(OsString, OsString)> {
    env.iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
}
