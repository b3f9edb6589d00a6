//! The ssh executor: `bash -c` on another host, through the system OpenSSH client.
//!
//! One master connection (`ControlMaster`) per daemon carries every command, so a
//! call pays no handshake. Each command is a local `ssh` process (the engine's host
//! process: its stdout and stderr are the command's, collected here with the same
//! bounds and spill files) running a small bash wrapper on the remote side
//! ([`RUN_SCRIPT`]) that applies the local rules there: the workdir, the E4
//! environment filter, the marker, its own session, stdin from /dev/null (or, for a
//! server spoken to over stdio, the channel's), and the end of what is left in its
//! session after it exits. Stopping a command runs
//! [`KILL_SCRIPT`] remotely (SIGTERM, grace, SIGKILL by marker and session), then
//! ends the local `ssh` process.
//!
//! A command whose connection drops is reported killed with a line in its stderr;
//! its remote processes are ended as soon as a new connection is up.
//!
//! Remote processes carry the marker as `DSH_REMOTE_MARK`, not the local
//! `DSH_TASK_MARK` the local `ssh` process has: when the "remote" host is this
//! machine (tests, or ssh to localhost), neither side's cleanup touches the other's
//! processes.
//!
//! The remote side needs Linux (`/proc`), bash and `setsid`, and a POSIX login
//! shell (OpenSSH runs every command through it).

use super::children::{self, Child};
use super::process::{Launcher, ProcessExecutor, ServiceLaunch, child_env};
use super::procs::{self, MARK_VAR, Selector};
use super::{ExecError, ExecSpec};
use crate::config::{ExecConfig, SshConfig};
use crate::fsutil::ensure_private_dir;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncBufReadExt;
use tokio::process::Command;

/// The scripts' clock, one literal for [`RUN_SCRIPT`] and [`KILL_SCRIPT`] (through
/// `concat!`, which takes only literals): `ms N` sleeps N milliseconds and `now` sets
/// `$now` to the wall clock in milliseconds.
macro_rules! clock {
    () => {
        r#"ms() { sleep "$(( $1 / 1000 )).$(printf %03d $(( $1 % 1000 )))"; }
# The drain and the grace are wall-clock time: counted in sleeps, they stretched by
# every scan of /proc between them (seconds a scan on a busy host), past the local
# side's patience. `$EPOCHREALTIME` is bash 5's; older bash counts whole seconds.
now() { local t=${EPOCHREALTIME:-}; if [ -n "$t" ]; then t=${t//[.,]/}; now=$(( 10#$t / 1000 )); else now=$(( SECONDS * 1000 )); fi; }
"#
    };
}

/// Runs one command remotely: `$1` workdir, `$2` marker, `$3` drain and `$4` grace
/// in milliseconds, `$5` the command, `$6` its stdin: `null`, or `pipe` for a server
/// spoken to over the ssh channel ([`Launcher::service_command`]), whose channel
/// starts with the server's own environment ([`env_header`]): read here, off the
/// channel, and exported before the server starts, so no value is ever on a command
/// line. Exits with the command's status (128+n for a signal death, as bash reports
/// it); 1, without starting the server, when that environment does not arrive whole.
const RUN_SCRIPT: &str = concat!(
    r#"
dir=$1 mark=$2 drain=$3 grace=$4 cmd=$5 stdin=$6
cd -- "$dir" || exit 1
for v in $(compgen -e); do
  case "${v^^}" in *KEY*|*SECRET*|*TOKEN*|*PASS*|*PWD*|*CREDENTIAL*|*AUTH*|*_PAT|*_PAT_*|DSH_*MARK) unset "$v" 2>/dev/null ;; esac
done
export NO_COLOR=1 TERM=dumb PAGER=cat GIT_PAGER=cat GIT_TERMINAL_PROMPT=0
# The server's own env, off the channel (env_header's format): a count line, then per
# variable a `NAME LENGTH` line and exactly LENGTH bytes. bash reads a pipe or socket
# a byte at a time (and `read -N` at most what is still wanted), so nothing of the
# server's own input is consumed; LC_ALL=C makes -N and ${#} count bytes, not
# characters. The numbers are bounded, so `[` never meets one it cannot compare. The
# values land in the global _dsh_env, exported outside the function: an export inside
# it would export its own local of the same name instead.
server_env() {
  local LC_ALL=C count name len value
  _dsh_env=()
  IFS= read -r count && [[ $count =~ ^[0-9]{1,6}$ ]] || return 1
  while [ "$count" -gt 0 ]; do
    IFS=' ' read -r name len && [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ && $len =~ ^[0-9]{1,9}$ ]] || return 1
    value=
    if [ "$len" -gt 0 ]; then
      IFS= read -r -N "$len" value && [ "${#value}" -eq "$len" ] || return 1
    fi
    _dsh_env+=("$name=$value")
    count=$(( count - 1 ))
  done
}
# Read after the filter above, so the server's own variables are kept whatever
# their names; they win over the defaults above (as locally), never over the marker.
# They are exported only in the subshell that becomes the server, after it has taken
# what it needs into its positional parameters: in this shell a server's `cmd`,
# `mark`, `drain` or `IFS` would replace the wrapper's own (and `drain` is read as
# arithmetic). A job started with & reads /dev/null unless its stdin is redirected: a
# server's is the channel's own (0<&0).
if [ "$stdin" = pipe ]; then
  server_env || { echo "dsh: the server's environment did not arrive whole over the ssh channel" >&2; exit 1; }
  (
    set -- "$cmd" "$mark" "$(command -v setsid)" "$BASH" "${_dsh_env[@]}"
    unset _dsh_env
    [ $# -gt 4 ] && export -- "${@:5}"
    export DSH_REMOTE_MARK="$2"
    exec "$3" "$4" -c "$1"
  ) 0<&0 &
else
  export DSH_REMOTE_MARK="$mark"
  setsid bash -c "$cmd" </dev/null &
fi
sid=$!
wait "$sid"
status=$?
# From here on the wrapper's own complaints (a process vanishing mid-scan) must
# not reach the command's stderr.
exec 2>/dev/null
members() {
  local d stat rest
  found=()
  for d in /proc/[0-9]*; do
    read -r stat 2>/dev/null <"$d/stat" || continue
    rest=${stat##*) }
    set -- $rest
    [ "$1" != Z ] && [ "$4" = "$sid" ] && found+=("${d#/proc/}")
  done
}
"#,
    clock!(),
    r#"now; until=$(( now + drain ))
members
while [ ${#found[@]} -gt 0 ] && now && [ "$now" -lt "$until" ]; do
  ms 20; members
done
if [ ${#found[@]} -gt 0 ]; then
  kill -TERM "${found[@]}" 2>/dev/null; kill -CONT "${found[@]}" 2>/dev/null
  now; until=$(( now + grace ))
  while members; [ ${#found[@]} -gt 0 ] && now && [ "$now" -lt "$until" ]; do
    ms 20
  done
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    members; [ ${#found[@]} -eq 0 ] && break
    kill -KILL "${found[@]}" 2>/dev/null; ms 10
  done
fi
exit $status
"#
);

/// Copies a spill file of the wrapper path to the host, where the session's commands
/// run and so where the model can open it: `$1` the helper directory (`~/` is the
/// remote home), `$2` the file's name. It is made in `<dir>/state/spill` (0700, as the
/// helper's spill files are), 0600, from stdin, under that name or, when another
/// daemon's file has it (`bash-1` of two daemons on one host), `<stem>-2.<ext>` and
/// so on; exclusively (`noclobber`: an existing file or a planted link is never
/// written or followed). The path is printed.
const PUBLISH_SCRIPT: &str = r#"
dir=$1 name=$2
case $dir in "~") dir=$HOME ;; "~/"*) dir=$HOME/${dir#"~/"} ;; esac
umask 077
d=$dir/state/spill
mkdir -p -- "$d" || exit 1
stem=${name%.*} ext=${name##*.} f=$d/$name n=1
while [ -e "$f" ] || [ -L "$f" ]; do
  n=$((n + 1))
  [ $n -gt 1000 ] && { echo "no free name for $name in $d" >&2; exit 1; }
  f=$d/$stem-$n.$ext
done
set -o noclobber
cat >"$f" || exit 1
printf '%s\n' "$f"
"#;

/// Ends remote processes: `$1` is `exact` or `prefix`, `$2` the marker (or its
/// prefix), `$3` the grace in milliseconds. Marked processes, and every member of
/// a session a marked process leads, get SIGTERM, then SIGKILL after the grace,
/// until none is left.
const KILL_SCRIPT: &str = concat!(
    r#"
mode=$1 mark=$2 grace=$3
targets() {
  local d pid kv stat rest
  local -A leaders=()
  found=()
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" = "$$" ] && continue
    read -r stat 2>/dev/null <"$d/stat" || continue
    rest=${stat##*) }
    set -- $rest
    [ "$1" = Z ] && continue
    while IFS= read -r -d '' kv; do
      case $kv in
        DSH_REMOTE_MARK=*)
          kv=${kv#DSH_REMOTE_MARK=}
          if [ "$kv" = "$mark" ] || { [ "$mode" = prefix ] && [[ $kv == "$mark"* ]]; }; then
            found+=("$pid")
            [ "$4" = "$pid" ] && leaders[$pid]=1
          fi
          break ;;
      esac
    done 2>/dev/null <"$d/environ"
  done
  [ ${#leaders[@]} -eq 0 ] && return
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" = "$$" ] && continue
    read -r stat 2>/dev/null <"$d/stat" || continue
    rest=${stat##*) }
    set -- $rest
    [ "$1" != Z ] && [ -n "${leaders[$4]}" ] && found+=("$pid")
  done
}
"#,
    clock!(),
    r#"targets
[ ${#found[@]} -eq 0 ] && exit 0
kill -TERM "${found[@]}" 2>/dev/null; kill -CONT "${found[@]}" 2>/dev/null
now; until=$(( now + grace ))
while targets; [ ${#found[@]} -gt 0 ] && now && [ "$now" -lt "$until" ]; do
  ms 20
done
for _ in $(seq 100); do
  targets; [ ${#found[@]} -eq 0 ] && exit 0
  kill -KILL "${found[@]}" 2>/dev/null; ms 10
done
exit 1
"#
);

/// What the local side reads from the master's stdout once it is connected.
const READY: &str = "dsh-ssh-ready";

/// Builds `ssh` command lines and keeps the master connection. Clones share the
/// master (the wrapper path and the helper's channel ride the same connection).
#[derive(Clone)]
pub struct SshLauncher {
    config: SshConfig,
    control_path: PathBuf,
    master_log: PathBuf,
    /// The marker of the master connection: `<state tag>:<owner>:ssh-master`, so a
    /// daemon that died leaves nothing the next one's sweep would miss.
    master_mark: String,
    env: Vec<(OsString, OsString)>,
    drain_ms: u64,
    grace: Duration,
    master: Arc<tokio::sync::Mutex<Option<Child>>>,
    /// Markers of commands whose connection dropped: ended remotely as soon as a new
    /// connection is up.
    lost_marks: Arc<Mutex<Vec<String>>>,
}

/// The wrapper path: each command is a local `ssh` process running
/// [`RUN_SCRIPT`] remotely (see the module docs).
pub type WrapperExecutor = ProcessExecutor<SshLauncher>;

/// The launcher and the wrapper-path executor for `[exec.ssh]`, sharing one master
/// connection.
pub(crate) fn wrapper(config: &ExecConfig) -> Result<(WrapperExecutor, SshLauncher), String> {
    let state_dir = config.state_dir();
    ensure_private_dir(&state_dir).map_err(|e| e.to_string())?;
    let ssh_dir = state_dir.join("ssh");
    ensure_private_dir(&ssh_dir).map_err(|e| e.to_string())?;
    let control_path = ssh_dir.join("control");
    // sockaddr_un holds 108 bytes; OpenSSH adds a random suffix while binding.
    if control_path.as_os_str().len() > 80 {
        return Err(format!(
            "the ssh control socket path {} is too long for a unix socket: choose a \
             shorter [exec] state_dir",
            control_path.display()
        ));
    }
    let launcher = SshLauncher {
        config: config.ssh.clone(),
        control_path,
        master_log: ssh_dir.join("master.log"),
        master_mark: format!(
            "{}:{}:ssh-master",
            procs::state_tag(&state_dir),
            procs::own_identity()
        ),
        env: child_env(std::env::vars_os()),
        drain_ms: config.drain_ms,
        grace: Duration::from_millis(config.kill_grace_ms),
        master: Arc::new(tokio::sync::Mutex::new(None)),
        lost_marks: Arc::new(Mutex::new(Vec::new())),
    };
    let exec = ProcessExecutor::with_launcher(config, std::env::vars_os(), launcher.clone())
        .map_err(|e| format!("cannot start the ssh executor: {e}"))?;
    Ok((exec, launcher))
}

/// Makes the master connection the leader of a new session that is SIGKILLed if the
/// daemon dies without shutting down, as `spawn::spawn` does for every command (the
/// master is started through a `Command` because it is read like one).
fn detach_until_parent_dies(cmd: &mut Command) {
    // SAFETY: setsid and prctl are async-signal-safe and touch no memory of the
    // parent.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A server's own `env` as [`RUN_SCRIPT`] reads it off the ssh channel before the
/// server's input: a line with the count, then for each variable a `NAME LENGTH` line
/// and exactly LENGTH bytes of value (bytes, not characters: the wrapper reads them
/// under `LC_ALL=C`), so a value may hold anything an environment can (quotes,
/// newlines, `$(...)`: data, never read as shell). Always sent, `0` when empty: the
/// wrapper reads it for every server.
///
/// Refused, naming the variable: a name that is not a shell variable name (the
/// wrapper exports it with bash; the MCP and wrapped-agent configs refuse such names
/// with the same words before any executor sees them), and a value holding a NUL
/// byte, which no environment can carry (the local executor's start fails on it too).
fn env_header(env: &[(String, String)]) -> Result<Vec<u8>, ExecError> {
    let mut header = format!("{}\n", env.len()).into_bytes();
    for (name, value) in env {
        if !super::valid_env_name(name) {
            return Err(ExecError::Spawn(format!(
                "`{name}` is not a valid environment variable name"
            )));
        }
        if value.contains('\0') {
            return Err(ExecError::Spawn(format!(
                "the value of `{name}` holds a NUL byte, which no environment can carry"
            )));
        }
        header.extend_from_slice(format!("{name} {}\n", value.len()).as_bytes());
        header.extend_from_slice(value.as_bytes());
    }
    Ok(header)
}

/// `s` as one word for a POSIX shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl SshLauncher {
    pub(crate) fn host(&self) -> &str {
        &self.config.host
    }

    pub(crate) fn connect_timeout_ms(&self) -> u64 {
        self.config.connect_timeout_ms
    }

    /// Where a local directory is on the remote host: the longest mapped prefix
    /// replaced, or the path as it is.
    pub(crate) fn remote_path(&self, local: &Path) -> PathBuf {
        self.config
            .path_map
            .iter()
            .filter(|m| local.starts_with(&m.local))
            .max_by_key(|m| m.local.components().count())
            .map(|m| match local.strip_prefix(&m.local) {
                Ok(rest) if rest.as_os_str().is_empty() => m.remote.clone(),
                Ok(rest) => m.remote.join(rest),
                Err(_) => local.to_path_buf(),
            })
            .unwrap_or_else(|| local.to_path_buf())
    }

    /// Why the wrapper path has no file tools: they go through dsh's helper on the host
    /// (its engine, with the host's containment), and a `cat` or a heredoc over ssh
    /// would be a second, unchecked way in. Refused, saying what to use instead.
    fn no_file_access(&self, request: &crate::exec::FileRequest) -> crate::exec::FileError {
        crate::exec::FileError::Unavailable(format!(
            "{}: refused: the file tools reach {} only through dsh's helper there, and this \
             connection runs commands without it ([exec.ssh] helper); use bash to read or \
             change the file ({}:{})",
            request.path.display(),
            self.host(),
            self.host(),
            self.remote_path(&request.path).display()
        ))
    }

    /// The options every ssh invocation shares.
    fn base_command(&self) -> Command {
        let c = &self.config;
        let mut cmd = Command::new(&c.ssh);
        let timeout_s = c.connect_timeout_ms.div_ceil(1000).max(1);
        cmd.args(["-T", "-o", "BatchMode=yes"])
            .arg("-o")
            .arg(format!("ConnectTimeout={timeout_s}"))
            .arg("-o")
            .arg(format!(
                "StrictHostKeyChecking={}",
                c.known_hosts.ssh_option()
            ))
            .args(["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"])
            .arg("-o")
            .arg(format!("ControlPath={}", self.control_path.display()))
            .arg("-p")
            .arg(c.port.to_string());
        if let Some(file) = &c.known_hosts_file {
            cmd.arg("-o")
                .arg(format!("UserKnownHostsFile={}", file.display()));
        }
        if let Some(identity) = &c.identity_file {
            cmd.arg("-i")
                .arg(identity)
                .args(["-o", "IdentitiesOnly=yes"]);
        }
        if let Some(user) = &c.user {
            cmd.arg("-l").arg(user);
        }
        cmd.current_dir("/")
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// An ssh command over the master connection running `script` with `args` in
    /// bash on the remote host.
    pub(crate) fn remote_bash(&self, script: &str, args: &[&str]) -> Command {
        self.remote_command(script, args, false)
    }

    /// As [`SshLauncher::remote_bash`], with the local stdin passed through (the
    /// helper's channel, the upload).
    pub(crate) fn remote_bash_with_stdin(&self, script: &str, args: &[&str]) -> Command {
        self.remote_command(script, args, true)
    }

    fn remote_command(&self, script: &str, args: &[&str], stdin: bool) -> Command {
        let mut remote = format!("exec bash -c {} dsh", quote(script));
        for arg in args {
            remote.push(' ');
            remote.push_str(&quote(arg));
        }
        let mut cmd = self.base_command();
        cmd.args(["-o", "ControlMaster=no"]);
        if !stdin {
            cmd.arg("-n");
        }
        cmd.arg(self.host()).arg("--").arg(remote);
        cmd
    }

    /// The ssh command running `spec` through [`RUN_SCRIPT`]; with `stdin`, the
    /// local stdin reaches the command (a server), else it reads /dev/null.
    fn run_wrapper(&self, spec: &ExecSpec, mark: &str, stdin: bool) -> Command {
        let workdir = self.remote_path(&spec.workdir);
        let (drain, grace) = (
            self.drain_ms.to_string(),
            self.grace.as_millis().to_string(),
        );
        let args = [
            &*workdir.to_string_lossy(),
            mark,
            &drain,
            &grace,
            &spec.command,
            if stdin { "pipe" } else { "null" },
        ];
        self.remote_command(RUN_SCRIPT, &args, stdin)
    }

    /// Makes sure the master connection is up, (re)connecting if it is not, then
    /// ends what a dropped connection left running.
    pub(crate) async fn ensure_master(&self) -> Result<(), ExecError> {
        let mut master = self.master.lock().await;
        if let Some(child) = master.as_mut()
            && matches!(child.try_wait(), Ok(None))
        {
            return Ok(());
        }
        *master = Some(self.connect().await?);
        drop(master);
        let lost = std::mem::take(&mut *self.lost_marks.lock().unwrap_or_else(|p| p.into_inner()));
        for mark in lost {
            if let Err(e) = self.remote_kill("exact", &mark).await {
                tracing::warn!(%mark, error = %e, "cannot end the processes of a lost command");
            }
        }
        Ok(())
    }

    /// Starts the master and waits until it says it is connected (its
    /// `LocalCommand` runs after authentication) or gives up.
    async fn connect(&self) -> Result<Child, ExecError> {
        let log = std::fs::File::create(&self.master_log).map_err(|e| {
            ExecError::Remote(format!("cannot write {}: {e}", self.master_log.display()))
        })?;
        // A master that was killed (the previous daemon's, or ours at shutdown)
        // leaves its socket behind, and OpenSSH will not bind over it: the new
        // master would run without multiplexing ("ControlSocket ... already
        // exists"), and every command would pay for a connection of its own.
        if let Err(e) = std::fs::remove_file(&self.control_path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.control_path.display(), error = %e, "cannot remove a stale control socket");
        }
        let mut cmd = self.base_command();
        cmd.args(["-M", "-N", "-o", "ControlPersist=no"])
            .args(["-o", "PermitLocalCommand=yes"])
            .arg("-o")
            .arg(format!("LocalCommand=echo {READY}"))
            .arg(self.host())
            .env(MARK_VAR, &self.master_mark)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        detach_until_parent_dies(&mut cmd);
        let mut child = children::spawn(&mut cmd).map_err(|e| {
            ExecError::Remote(format!(
                "cannot run the ssh client `{}`: {e}",
                self.config.ssh.display()
            ))
        })?;
        let mut lines = tokio::io::BufReader::new(
            child
                .stdout
                .take()
                .ok_or_else(|| ExecError::Remote("the ssh client has no stdout".into()))?,
        )
        .lines();
        let limit = Duration::from_millis(self.config.connect_timeout_ms) + Duration::from_secs(2);
        let ready = tokio::time::timeout(limit, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.trim() == READY {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap_or(false);
        if ready {
            return Ok(child);
        }
        let _ = child.start_kill();
        let _ = child.wait().await;
        let said = std::fs::read_to_string(&self.master_log).unwrap_or_default();
        let said = said.trim();
        Err(ExecError::Remote(format!(
            "cannot connect to ssh host {}:{}: {}",
            self.host(),
            self.config.port,
            if said.is_empty() {
                "no answer in time"
            } else {
                said
            }
        )))
    }

    /// Whether the master connection is still up; waits briefly for a master that
    /// is on its way out, so a dropped connection is not mistaken for a command's
    /// own exit code 255.
    async fn master_alive(&self) -> bool {
        let mut master = self.master.lock().await;
        let Some(child) = master.as_mut() else {
            return false;
        };
        tokio::time::timeout(Duration::from_millis(300), child.wait())
            .await
            .is_err()
    }

    /// Runs [`KILL_SCRIPT`] remotely and waits for it.
    async fn remote_kill(&self, mode: &str, mark: &str) -> Result<(), String> {
        let grace = self.grace.as_millis().to_string();
        let mut cmd = self.remote_bash(KILL_SCRIPT, &[mode, mark, &grace]);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let limit = self.grace
            + Duration::from_millis(self.config.connect_timeout_ms)
            + Duration::from_secs(5);
        let _start = children::starting();
        match tokio::time::timeout(limit, cmd.output()).await {
            Err(_) => Err("the remote kill did not finish in time".into()),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(out)) if out.status.success() => Ok(()),
            Ok(Ok(out)) => Err(format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    }

    /// Ends remote processes by marker; if the host cannot be reached, remembers
    /// the marker for when it can. Returns whether the host was reached.
    async fn stop_remote(&self, mode: &str, mark: &str) -> bool {
        match self.remote_kill(mode, mark).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(%mark, error = %e, "remote kill failed; retried on reconnect");
                if mode == "exact" {
                    self.lost_marks
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(mark.to_string());
                }
                false
            }
        }
    }

    /// The last step of a stop: the local ssh clients of what was stopped. When the
    /// host was reached, the remote kill has ended the commands and each wrapper is on
    /// its way to exiting with the command's 128+n, which its client passes on; that
    /// status is the only way the engine learns which signal ended the command.
    /// Terminating a client first makes it exit 255 ("killed by signal 15"), and the
    /// signal is lost (seen under load: `Killed { signal: None }` after a shutdown).
    /// So the clients get the time a wrapper needs on a busy host (its scan of
    /// `/proc`, then the channel's close) before they are terminated; an unreachable
    /// host gets none, its clients are what is left to end.
    async fn let_the_clients_report(&self, local: Selector, reached: bool, grace: Duration) {
        if reached {
            let patience = grace
                + Duration::from_millis(self.config.connect_timeout_ms)
                + Duration::from_secs(5);
            local_gone(&local, patience).await;
        }
        procs::terminate(local, grace).await;
    }
}

/// Waits up to `limit` for every local process of `selector` to end.
async fn local_gone(selector: &Selector, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    let mut pause = Duration::from_millis(5);
    loop {
        if procs::find_async(selector.clone()).await.is_empty() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

#[async_trait::async_trait]
impl Launcher for SshLauncher {
    fn kind(&self) -> &'static str {
        "ssh"
    }

    /// ssh reports a remote signal death as 255 and the wrapper as 128+n.
    fn exact_status(&self) -> bool {
        false
    }

    /// The host's files are elsewhere.
    fn files_are_local(&self) -> bool {
        false
    }

    async fn stat_file(
        &self,
        request: &crate::exec::FileRequest,
        _intent: crate::exec::FileIntent,
    ) -> Result<Option<crate::exec::FileStat>, crate::exec::FileError> {
        Err(self.no_file_access(request))
    }

    async fn read_file(
        &self,
        request: &crate::exec::FileRequest,
    ) -> Result<crate::exec::FileRead, crate::exec::FileError> {
        Err(self.no_file_access(request))
    }

    async fn file_containment(
        &self,
        request: &crate::exec::FileRequest,
        _intent: crate::exec::FileIntent,
    ) -> Result<Option<crate::containment::Containment>, crate::exec::FileError> {
        Err(self.no_file_access(request))
    }

    async fn write_file(
        &self,
        request: &crate::exec::FileRequest,
        _content: &[u8],
    ) -> Result<crate::exec::WriteOutcome, crate::exec::FileError> {
        Err(self.no_file_access(request))
    }

    async fn check_workdir(&self, dir: &Path) -> Result<(), ExecError> {
        self.ensure_master().await?;
        let remote = self.remote_path(dir);
        let remote_str = remote.to_string_lossy();
        let script = r#"if [ -d "$1" ]; then echo dir; elif [ -e "$1" ]; then echo file; else echo missing; fi"#;
        let mut cmd = self.remote_bash(script, &[&remote_str]);
        cmd.stdin(Stdio::null()).kill_on_drop(true);
        let _start = children::starting();
        let out = cmd
            .output()
            .await
            .map_err(|e| ExecError::Remote(format!("cannot run the ssh client: {e}")))?;
        let named = PathBuf::from(format!("{}:{}", self.host(), remote.display()));
        match String::from_utf8_lossy(&out.stdout).trim() {
            "dir" => Ok(()),
            "file" => Err(ExecError::WorkdirNotDirectory(named)),
            "missing" => Err(ExecError::WorkdirMissing(named)),
            _ => Err(ExecError::Remote(format!(
                "ssh host {} did not answer ({}): {}",
                self.host(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))),
        }
    }

    fn command(&self, spec: &ExecSpec, mark: &str) -> Result<Command, ExecError> {
        Ok(self.run_wrapper(spec, mark, false))
    }

    /// The same wrapper, with the local stdin passed through the channel to the
    /// server: it runs where a command would (the mapped workdir, E4, the marker,
    /// its own session) and is ended the same ways.
    ///
    /// The server's own `env` cannot ride the ssh process's environment (sshd drops
    /// it), and on a command line `ps` would show its values (often API tokens) to
    /// every user of either host. So it goes first on the channel itself, as the
    /// stdin preamble ([`env_header`]), which the wrapper reads and exports before it
    /// starts the server: no value is on any command line.
    fn service_command(
        &self,
        spec: &ExecSpec,
        mark: &str,
        env: &[(String, String)],
    ) -> Result<ServiceLaunch, ExecError> {
        let preamble = env_header(env)?;
        Ok(ServiceLaunch {
            command: self.run_wrapper(spec, mark, true),
            env: Vec::new(),
            stdin_preamble: preamble,
        })
    }

    async fn stop(&self, mark: &str, sid: Option<i32>, grace: Duration) {
        let local = Selector::Task {
            mark: mark.to_string(),
            sid,
        };
        // The remote command may not have started yet when the first kill looks for
        // it (the login shell is still starting): the local ssh lives until its
        // remote command has ended, so kill again until it is gone.
        let deadline = tokio::time::Instant::now()
            + grace
            + Duration::from_millis(self.config.connect_timeout_ms);
        let mut reached = false;
        while self.stop_remote("exact", mark).await {
            reached = true;
            if local_gone(&local, Duration::from_millis(300)).await
                || tokio::time::Instant::now() >= deadline
            {
                break;
            }
        }
        self.let_the_clients_report(local, reached, grace).await;
    }

    async fn stop_prefix(&self, prefix: &str, grace: Duration) {
        let reached = self.stop_remote("prefix", prefix).await;
        self.let_the_clients_report(Selector::MarkPrefix(prefix.to_string()), reached, grace)
            .await;
    }

    async fn lost(&self, exit_code: Option<i32>, mark: &str) -> Option<String> {
        if exit_code != Some(255) || self.master_alive().await {
            return None;
        }
        self.lost_marks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(mark.to_string());
        Some(format!(
            "dsh: lost the connection to ssh host {}; the command is counted as killed (its \
             remote processes are ended once the connection is back)",
            self.host()
        ))
    }

    /// The file goes to the host over the master connection, once the stream
    /// is complete (the run or task ended): until then a read names the file here.
    async fn publish_spill(&self, local: &Path) -> Result<PathBuf, String> {
        let name = local
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("{} has no file name", local.display()))?;
        let file = crate::fsutil::open_regular(local, false)
            .map_err(|e| format!("{}: {e}", local.display()))?;
        self.ensure_master().await.map_err(|e| e.to_string())?;
        let mut cmd = self.remote_bash_with_stdin(PUBLISH_SCRIPT, &[&self.config.helper_dir, name]);
        cmd.stdin(Stdio::from(file))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let limit = Duration::from_millis(self.config.connect_timeout_ms) + Duration::from_secs(60);
        let _start = children::starting();
        let out = match tokio::time::timeout(limit, cmd.output()).await {
            Err(_) => return Err("copying it to the host did not finish in time".into()),
            Ok(Err(e)) => return Err(e.to_string()),
            Ok(Ok(out)) => out,
        };
        let said = String::from_utf8_lossy(&out.stdout);
        match said.lines().next().filter(|_| out.status.success()) {
            Some(path) if path.starts_with('/') => Ok(PathBuf::from(path)),
            _ => Err(format!(
                "copying it to the host failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    }

    async fn close(&self) {
        if let Some(mut master) = self.master.lock().await.take() {
            let _ = master.start_kill();
            let _ = master.wait().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PathMapping;

    fn launcher(map: &[(&str, &str)]) -> SshLauncher {
        let config = SshConfig {
            host: "h".into(),
            path_map: map
                .iter()
                .map(|(l, r)| PathMapping {
                    local: l.into(),
                    remote: r.into(),
                })
                .collect(),
            ..SshConfig::default()
        };
        SshLauncher {
            config,
            control_path: "/c".into(),
            master_log: "/l".into(),
            master_mark: "m".into(),
            env: Vec::new(),
            drain_ms: 0,
            grace: Duration::ZERO,
            master: Arc::new(tokio::sync::Mutex::new(None)),
            lost_marks: Arc::new(Mutex::new(Vec::new())),
        }
    }

    #[test]
    fn longest_mapped_prefix_wins_and_unmapped_paths_pass() {
        let l = launcher(&[("/home/me", "/srv"), ("/home/me/src", "/build/src")]);
        assert_eq!(
            l.remote_path(Path::new("/home/me/src/a")),
            Path::new("/build/src/a")
        );
        assert_eq!(
            l.remote_path(Path::new("/home/me/src")),
            Path::new("/build/src")
        );
        assert_eq!(
            l.remote_path(Path::new("/home/me/doc")),
            Path::new("/srv/doc")
        );
        assert_eq!(
            l.remote_path(Path::new("/home/meow")),
            Path::new("/home/meow")
        );
        assert_eq!(l.remote_path(Path::new("/tmp/x")), Path::new("/tmp/x"));
    }

    /// Runs [`RUN_SCRIPT`] on this machine as the host would for a server (`pipe`),
    /// `cmd` being the server and `input` everything the channel carries; the host's
    /// session gives it a secret-looking variable (E4 filters it) and `locale`.
    fn wrapper_here(dir: &Path, locale: &str, cmd: &str, input: &[u8]) -> std::process::Output {
        use std::io::Write;
        let mut child = std::process::Command::new("bash")
            .args(["-c", RUN_SCRIPT, "dsh"])
            .arg(dir)
            .args(["mark-1", "0", "0", cmd, "pipe"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LC_ALL", locale)
            .env("HOST_API_TOKEN", "host-secret")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // From a thread of its own: the wrapper's output may fill its pipe before it
        // has read all of this.
        let input = input.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        out
    }

    /// The server's env arrives over the channel byte-exact, whatever the host's
    /// locale, a value never read as shell, names the wrapper's own variables use
    /// included; the server's own secret-looking names are kept while the host's are
    /// filtered (E4); it wins over the wrapper's defaults but not over the marker; and
    /// every byte after the header is the server's input, none eaten.
    #[test]
    fn the_servers_env_arrives_byte_exact_over_the_channel_and_its_input_is_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let canary = dir.path().join("canary");
        let nasty = format!(
            " it's \"q\"\n$(touch {c}) `touch {c}` ${{HOME}} caf\u{e9} \u{1f600} \\\n",
            c = canary.display()
        );
        // Longer than a pipe holds, and than one read of bash's takes.
        let big = "\u{e9}".repeat(50_000);
        // The wrapper's own names: a server's variable of the same name must not
        // replace the command, the marker or the input, nor be read as arithmetic.
        let arithmetic = format!("a[$(touch {})]", canary.display());
        let env: Vec<(String, String)> = [
            ("cmd", "echo not-the-command"),
            ("mark", "not-the-mark"),
            ("stdin", "null"),
            ("drain", &arithmetic),
            ("grace", &arithmetic),
            ("sid", "1"),
            ("status", "s"),
            ("SERVER_API_TOKEN", "tok-\u{e9}\u{e9}"),
            ("BIG", &big),
            ("NASTY", &nasty),
            ("EMPTY", ""),
            ("TERM", "server-term"),
            ("DSH_REMOTE_MARK", "not-the-mark"),
            ("value", "v"),
            ("count", "c"),
            ("_dsh_env", "d"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let after = b"after the header\n\xff\x01 \xc3 no newline at the end";
        let mut input = env_header(&env).unwrap();
        input.extend_from_slice(after);
        for locale in ["C.UTF-8", "C"] {
            let out = wrapper_here(
                dir.path(),
                locale,
                "env -0; printf '\\001'; exec cat",
                &input,
            );
            assert!(
                out.status.success(),
                "{locale}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let split = out.stdout.iter().position(|b| *b == 1).unwrap();
            let (environ, rest) = out.stdout.split_at(split);
            assert_eq!(&rest[1..], after, "{locale}: the server's input");
            let environ: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
            let have = |entry: &str| environ.contains(&entry.as_bytes());
            for (name, value) in &env {
                if name != "DSH_REMOTE_MARK" {
                    assert!(
                        have(&format!("{name}={value}")),
                        "{locale}: {name}: {environ:?}"
                    );
                }
            }
            assert!(have("DSH_REMOTE_MARK=mark-1"), "{locale}: {environ:?}");
            assert!(!have("HOST_API_TOKEN=host-secret"), "{locale}: {environ:?}");
            assert!(!canary.exists(), "{locale}: a value was run");
        }
    }

    /// An env that does not arrive whole (the channel ends inside it, a value shorter
    /// than its length says, a line that is not the format) starts no server.
    #[test]
    fn a_header_that_does_not_arrive_whole_starts_no_server() {
        let dir = tempfile::tempdir().unwrap();
        let canary = dir.path().join("canary");
        let whole = env_header(&[("A".into(), "xyz".into()), ("B".into(), "1".into())]).unwrap();
        let cut = &whole[..whole.len() - 1];
        for input in [
            cut,
            b"2\nA 3\nxyz",
            b"1\nA 5\nxyz",
            b"1\nA-B 1\nx",
            b"99999999999999999999\nA 1\nx",
            b"1\nA 99999999999999999999\nx",
            b"x\n",
            b"",
        ] {
            let cmd = format!("touch '{}'", canary.display());
            let out = wrapper_here(dir.path(), "C.UTF-8", &cmd, input);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{:?}",
                String::from_utf8_lossy(input)
            );
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("did not arrive whole"),
                "{:?}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(!canary.exists(), "{:?}", String::from_utf8_lossy(input));
        }
    }

    /// What bash cannot export, or no environment can hold, is refused by name
    /// before anything starts.
    #[test]
    fn a_name_bash_cannot_export_or_a_nul_in_a_value_is_refused() {
        for name in ["BAD-NAME", "1ST", "", "A=B", "a b", "caf\u{e9}"] {
            let err = env_header(&[(name.into(), "x".into())]).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("spawn failed: `{name}` is not a valid environment variable name")
            );
        }
        let err = env_header(&[("OK".into(), "a\0b".into())]).unwrap_err();
        assert!(err.to_string().contains("`OK` holds a NUL byte"), "{err}");
        assert_eq!(env_header(&[]).unwrap(), b"0\n");
    }

    #[test]
    fn quoting_survives_a_posix_shell() {
        let nasty = "it's $HOME `id` \"q\" \\ \n end";
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", quote(nasty)))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), nasty);
    }
}
