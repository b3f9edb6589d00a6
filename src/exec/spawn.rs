//! Starting a host process without copying the daemon: `clone(CLONE_VM |
//! CLONE_VFORK)`, as `posix_spawn` does, plus the two things `posix_spawn` cannot
//! do that every command needs: its own session (`setsid`) and the parent-death
//! signal.
//!
//! Why not `tokio::process`: with a `pre_exec` hook (the only way to get the
//! parent-death signal there) std must `fork`, which copies the page tables of a
//! multi-threaded daemon on every command; on the benchmarks that was the largest
//! cost left between a `bash` tool call and the bare process (BENCHMARKS.md).
//!
//! The child runs on its own small stack in the parent's memory while the parent
//! thread waits (`CLONE_VFORK`), so it may only make system calls: every string,
//! path and array it needs is built before the clone, and an error is reported by
//! writing its errno into the parent's memory before `_exit`. Signals are blocked
//! around the clone and restored to their defaults in the child before `execve`, so
//! no handler of the daemon can run on the child's stack.
//!
//! The parent learns of the end through a pidfd (readable once the child exited)
//! and reaps it with `waitpid`.

use super::children;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

/// What to start: a program, its arguments, its whole environment and its
/// working directory. stdout and stderr are pipes; stdin is /dev/null unless
/// `stdin_pipe` asks for a pipe (a server that is spoken to, such as an MCP server).
#[derive(Debug, Clone, Default)]
pub struct SpawnSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub cwd: Option<PathBuf>,
    pub stdin_pipe: bool,
    /// Descriptors the child keeps at their numbers (all others close on exec): the
    /// caller owns them and keeps them open until `spawn` returns. Never 0-2.
    pub inherit: Vec<RawFd>,
}

/// A started process: the leader of a new session, SIGKILLed if the thread that
/// started it dies.
pub struct HostProcess {
    pid: i32,
    /// The write end of its stdin, when [`SpawnSpec::stdin_pipe`] asked for one.
    pub stdin: Option<pipe::Sender>,
    /// The read end of its stdout (taken by the caller).
    pub stdout: Option<pipe::Receiver>,
    /// The read end of its stderr (taken by the caller).
    pub stderr: Option<pipe::Receiver>,
    pidfd: AsyncFd<OwnedFd>,
    status: Option<ExitStatus>,
    /// Booked until reaped, so the daemon's orphan reaper leaves it to `wait`.
    owned: Option<children::Owned>,
}

impl HostProcess {
    /// A host process this program did not start but still parents: one a daemon's
    /// previous program handed over across `dsh upgrade` (the same process, so the
    /// same children). `booking` holds it against the orphan reaper until it is
    /// reaped here.
    pub fn adopt(
        pid: i32,
        stdout: Option<OwnedFd>,
        stderr: Option<OwnedFd>,
        booking: children::Owned,
    ) -> io::Result<Self> {
        // SAFETY: pidfd_open on our own child, booked, so not reaped by anyone else.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as RawFd;
        if pidfd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the syscall returned a new fd that nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        Ok(HostProcess {
            pid,
            stdin: None,
            stdout: stdout.map(pipe::Receiver::from_owned_fd).transpose()?,
            stderr: stderr.map(pipe::Receiver::from_owned_fd).transpose()?,
            // SAFETY: an OwnedFd stays open for as long as the AsyncFd owns it.
            pidfd: unsafe { AsyncFd::register(pidfd) }.map_err(io::Error::from)?,
            status: None,
            owned: Some(booking),
        })
    }

    /// The process id (also its session id).
    pub fn id(&self) -> i32 {
        self.pid
    }

    /// Waits for the process to end and reaps it; later calls return the same status.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        loop {
            let mut guard = self.pidfd.readable().await?;
            let mut raw = 0;
            // SAFETY: waitpid on our own child, with a valid pointer.
            let reaped = unsafe { libc::waitpid(self.pid, &mut raw, libc::WNOHANG) };
            if reaped == self.pid {
                let status = ExitStatus::from_raw(raw);
                self.status = Some(status);
                self.owned = None;
                return Ok(status);
            }
            if reaped < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            guard.clear_ready();
        }
    }
}

/// Finds `program` the way a shell would: as given when it has a slash, else in
/// the `PATH` of the environment the child gets.
fn resolve(program: &OsStr, env: &[(OsString, OsString)]) -> io::Result<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        if let Ok(c) = CString::new(candidate.as_os_str().as_bytes()) {
            // SAFETY: a valid C string.
            if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 && candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: not found in PATH", Path::new(program).display()),
    ))
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in argument"))
}

/// A pipe whose read end is non-blocking (for tokio) and whose write end is
/// blocking (for the child); both close on exec.
fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these fds; nothing else owns them.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on an fd we own.
    unsafe {
        let flags = libc::fcntl(read.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(read.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    Ok((read, write))
}

/// Sets or clears `O_NONBLOCK` on `fd`.
fn set_blocking(fd: &OwnedFd, blocking: bool) {
    // SAFETY: fcntl on an fd we own.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        let flags = if blocking {
            flags & !libc::O_NONBLOCK
        } else {
            flags | libc::O_NONBLOCK
        };
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags);
    }
}

/// Everything the child touches, prepared before the clone.
struct ChildPlan {
    path: CString,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: Option<CString>,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    inherit: Vec<RawFd>,
    /// errno of the step that failed, written by the child before `_exit`.
    error: AtomicI32,
}

/// The child side. Only system calls: it runs on a borrowed stack in the parent's
/// memory.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildPlan` the parent keeps alive until we exec or exit
    // (CLONE_VFORK suspends it until then).
    let plan = unsafe { &*(arg as *const ChildPlan) };
    let fail = |plan: &ChildPlan| -> libc::c_int {
        // SAFETY: reading errno and exiting are async-signal-safe.
        unsafe {
            plan.error
                .store(*libc::__errno_location(), Ordering::SeqCst);
            libc::_exit(127)
        }
    };
    // SAFETY: async-signal-safe system calls on prepared data only.
    unsafe {
        // Handlers the daemon installed must not run here; then unblock everything
        // (the parent blocked all signals around the clone). SIGPIPE back to its
        // default: Rust ignores it in the daemon.
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        for signal in 1..=libc::SIGRTMAX() {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            let handled = old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN;
            if handled || (signal == libc::SIGPIPE && old.sa_sigaction == libc::SIG_IGN) {
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        if libc::setsid() < 0 {
            return fail(plan);
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return fail(plan);
        }
        for (from, to) in [(plan.stdin, 0), (plan.stdout, 1), (plan.stderr, 2)] {
            if libc::dup2(from, to) < 0 {
                return fail(plan);
            }
        }
        for &fd in &plan.inherit {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return fail(plan);
            }
        }
        if let Some(cwd) = &plan.cwd
            && libc::chdir(cwd.as_ptr()) != 0
        {
            return fail(plan);
        }
        libc::execve(plan.path.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
    }
    fail(plan)
}

/// Clones the child that runs `plan` on the stack below `stack_top`, with every signal
/// blocked on the calling thread meanwhile (its handlers must not run on the child's
/// stack); returns its pid once it has exec'd or failed.
///
/// # Safety
/// `plan` and the stack must stay valid until this returns.
unsafe fn clone_child(plan: *const ChildPlan, stack_top: usize) -> io::Result<i32> {
    // SAFETY: blocking and restoring this thread's signal mask.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: CLONE_VM | CLONE_VFORK: this thread is suspended until the child
    // has exec'd or exited, so `plan` and the stack outlive every use by the child.
    let pid = unsafe {
        libc::clone(
            child_main,
            stack_top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            plan as *mut libc::c_void,
        )
    };
    let clone_error = io::Error::last_os_error();
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    if pid < 0 {
        return Err(clone_error);
    }
    Ok(pid)
}

/// Starts `spec` (see the module docs). Must be called inside a tokio runtime.
pub fn spawn(spec: &SpawnSpec) -> io::Result<HostProcess> {
    if spec.inherit.iter().any(|fd| *fd <= 2) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a descriptor to inherit may not be 0, 1 or 2",
        ));
    }
    let path = resolve(&spec.program, &spec.env)?;
    let path_c = c_string(path.as_os_str().as_bytes())?;
    let mut arg_strings = vec![c_string(spec.program.as_bytes())?];
    for a in &spec.args {
        arg_strings.push(c_string(a.as_bytes())?);
    }
    let env_strings: Vec<CString> = spec
        .env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            c_string(&kv)
        })
        .collect::<io::Result<_>>()?;
    let cwd = spec
        .cwd
        .as_ref()
        .map(|c| c_string(c.as_os_str().as_bytes()))
        .transpose()?;
    // The child's stdin: /dev/null, or the read end of a pipe whose write end is ours
    // (non-blocking, for tokio; the child's end blocks).
    let (stdin_child, stdin_ours): (OwnedFd, Option<OwnedFd>) = if spec.stdin_pipe {
        let (read, write) = pipe_pair()?;
        set_blocking(&read, true);
        set_blocking(&write, false);
        (read, Some(write))
    } else {
        (std::fs::File::open("/dev/null")?.into(), None)
    };
    let (out_read, out_write) = pipe_pair()?;
    let (err_read, err_write) = pipe_pair()?;
    let mut argv: Vec<*const libc::c_char> = arg_strings.iter().map(|s| s.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env_strings.iter().map(|s| s.as_ptr()).collect();
    envp.push(std::ptr::null());
    let plan = ChildPlan {
        path: path_c,
        argv,
        envp,
        cwd,
        stdin: stdin_child.as_raw_fd(),
        stdout: out_write.as_raw_fd(),
        stderr: err_write.as_raw_fd(),
        inherit: spec.inherit.clone(),
        error: AtomicI32::new(0),
    };
    // The child's stack: it only makes system calls, but sigaction structures and
    // the frames of libc wrappers live there. 64 KiB is plenty.
    let mut stack = vec![0u8; 64 * 1024];
    // SAFETY: the stack grows down on every Linux architecture dsh runs on; the top
    // is aligned to 16 bytes.
    let stack_top = unsafe { stack.as_mut_ptr().add(stack.len()) } as usize & !15;
    // From before the child exists until it is booked, no orphan is reaped: the
    // child could be taken for one.
    let start = children::starting();
    // On the forking thread (see `forker`): the parent-death signal is tied to the
    // thread that clones, and only that one survives an upgrade's `execve`.
    let plan_at = &plan as *const ChildPlan as usize;
    let cloned = super::forker::run(move || {
        // SAFETY: this thread (the asking one) waits in `forker::run` until the job
        // has returned, so `plan` and `stack` outlive it.
        unsafe { clone_child(plan_at as *const ChildPlan, stack_top) }
    })
    .unwrap_or_else(|| Err(io::Error::other("the daemon is stopping")));
    let pid = cloned?;
    drop((out_write, err_write, stdin_child));
    let errno = plan.error.load(Ordering::SeqCst);
    if errno != 0 {
        // The child exited without exec'ing: reap it, report why.
        let mut raw = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(pid, &mut raw, 0) };
        return Err(io::Error::from_raw_os_error(errno));
    }
    // SAFETY: pidfd_open on our own, not yet reaped child.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as RawFd;
    if pidfd < 0 {
        let e = io::Error::last_os_error();
        // SAFETY: our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        return Err(e);
    }
    // SAFETY: the syscall returned a new fd that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let owned = Some(start.owned(pid));
    Ok(HostProcess {
        pid,
        stdin: stdin_ours.map(pipe::Sender::from_owned_fd).transpose()?,
        stdout: Some(pipe::Receiver::from_owned_fd(out_read)?),
        stderr: Some(pipe::Receiver::from_owned_fd(err_read)?),
        // SAFETY: an OwnedFd stays open for as long as the AsyncFd owns it.
        pidfd: unsafe { AsyncFd::register(pidfd) }.map_err(io::Error::from)?,
        status: None,
        owned,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn spec(program: &str, args: &[&str]) -> SpawnSpec {
        SpawnSpec {
            program: program.into(),
            args: args.iter().map(|a| a.into()).collect(),
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("X".into(), "y".into()),
            ],
            cwd: Some("/".into()),
            stdin_pipe: false,
            inherit: Vec::new(),
        }
    }

    #[tokio::test]
    async fn runs_in_its_own_session_with_the_given_env_cwd_and_stdio() {
        let mut p = spawn(&spec(
            "bash",
            &[
                "-c",
                "echo $X; pwd; echo err >&2; readlink /proc/self/fd/0; ps -o sid= -p $$; exit 3",
            ],
        ))
        .unwrap();
        let (mut out, mut err) = (String::new(), String::new());
        p.stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .await
            .unwrap();
        p.stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .await
            .unwrap();
        let status = p.wait().await.unwrap();
        assert_eq!(status.code(), Some(3));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(&lines[..3], ["y", "/", "/dev/null"]);
        assert_eq!(lines[3].trim(), p.id().to_string(), "not a session leader");
        assert_eq!(err, "err\n");
        assert_eq!(p.wait().await.unwrap().code(), Some(3));
    }

    #[tokio::test]
    async fn a_signal_death_and_sigpipe_default_are_what_the_command_sees() {
        let mut p = spawn(&spec("bash", &["-c", "kill -TERM $$"])).unwrap();
        assert_eq!(p.wait().await.unwrap().signal(), Some(libc::SIGTERM));
        // SIGPIPE is back to its default: `yes` dies of it when `head` exits.
        let mut p = spawn(&spec(
            "bash",
            &["-c", "yes | head -1 >/dev/null; echo ${PIPESTATUS[0]}"],
        ))
        .unwrap();
        let mut out = String::new();
        p.stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .await
            .unwrap();
        assert_eq!(out, "141\n");
        p.wait().await.unwrap();
    }

    #[tokio::test]
    async fn failures_before_exec_are_errors() {
        let err = spawn(&spec("no-such-program-dsh", &[])).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        let mut bad_cwd = spec("true", &[]);
        bad_cwd.cwd = Some("/no/such/dir".into());
        let err = spawn(&bad_cwd).err().unwrap();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    }
}
