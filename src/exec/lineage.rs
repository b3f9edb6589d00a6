//! Whether a process on this machine was started by this daemon, however far down
//! and however detached (E7: nothing dsh runs can drive dsh).
//!
//! The daemon is a child subreaper (`children`), so a process it started stays
//! below it in the process tree for its whole life: when a parent exits, the kernel
//! hands the orphan to the nearest living subreaper above it, which is the daemon
//! or one of its own descendants, never init. `setsid`, double forks, `nohup`,
//! `env -i` and a new PID namespace change a process's session, environment or the
//! pids it sees, but not who its ancestors are on the host. So walking the parents of
//! a connection's peer up from the pid the kernel recorded at `connect()` tells,
//! without any cooperation from the peer, whether the daemon started it.
//!
//! Two more signs cover what the tree cannot: a peer that carries a dsh task
//! marker in its environment (a command of the ssh executor on this very host runs
//! under sshd, not under us), and an ancestor that is a `dsh exec-helper` (the ssh
//! helper, a subreaper too, on a loopback host).
//!
//! A pid can be reused once its process is gone. The peer is pinned with a pidfd
//! (`SO_PEERPIDFD`, Linux 6.5+) when the kernel offers one: after the walk, a peer
//! that is no longer alive is refused, so the walk cannot have read a stranger that
//! took its pid. Every doubt (a peer or ancestor that cannot be read) counts as
//! "started by us": the refusal is the closed side.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Makes this process untraceable by processes of its own user
/// (`PR_SET_DUMPABLE 0`). A command the local executor runs is of the daemon's
/// user; without this it could attach to the daemon, to `dsh acp` or to the ssh
/// helper with ptrace (where Yama does not forbid it, as on a kernel without Yama),
/// read their memory or take their descriptors with `pidfd_getfd`, and so drive
/// them without ever connecting to the socket this module guards. Only a process
/// with `CAP_SYS_PTRACE` still can (root's commands, which hold the machine anyway).
/// It also turns off core dumps of these processes, which would hold the same
/// memory: a crash is reported by the log instead.
pub fn untraceable() -> Result<(), String> {
    nix::sys::prctl::set_dumpable(false)
        .map_err(|e| format!("cannot make dsh untraceable (PR_SET_DUMPABLE): {e}"))
}

/// What tied a connecting process to this daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The daemon is one of its ancestors (the pid of the ancestor just below the
    /// daemon: the command, hook or server that started the chain).
    Descendant { child_of_daemon: i32 },
    /// It carries a dsh task marker (`DSH_TASK_MARK` or `DSH_REMOTE_MARK`).
    Marked,
    /// One of its ancestors is a `dsh exec-helper`.
    UnderHelper,
    /// It could not be read: it vanished or its pid was reused mid-check.
    Unknown,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Descendant { child_of_daemon } => {
                write!(
                    f,
                    "a process the daemon started (under pid {child_of_daemon})"
                )
            }
            Origin::Marked => f.write_str("a process carrying a dsh task marker"),
            Origin::UnderHelper => f.write_str("a process under a dsh exec-helper"),
            Origin::Unknown => f.write_str("a process that could not be identified"),
        }
    }
}

/// The variables that mark a command's processes (the local one and the ssh
/// executor's remote one).
const MARKS: [&[u8]; 2] = [b"DSH_TASK_MARK=", b"DSH_REMOTE_MARK="];

/// Why the peer of `socket` may not drive the daemon whose pid is `daemon`, or
/// `None` when it is an outside client (an editor's `dsh acp`, a person's `dsh
/// status`).
pub fn started_by(socket: &impl AsRawFd, daemon: u32) -> Option<Origin> {
    let pidfd = match peer_pidfd(socket.as_raw_fd()) {
        Ok(pidfd) => pidfd,
        // A kernel that has the option but could not pin the peer (it has exited,
        // on 6.5-6.15): its pid may already be someone else's.
        Err(_) => return Some(Origin::Unknown),
    };
    let Some(pid) = peer_pid(socket.as_raw_fd()) else {
        return Some(Origin::Unknown);
    };
    let verdict = origin(pid, daemon as i32);
    // A peer that died during the walk may have lent its pid to someone else.
    match &pidfd {
        Some(fd) if !alive(fd) => Some(Origin::Unknown),
        _ => verdict,
    }
}

/// The walk from `pid` up to init (see the module docs).
pub fn origin(pid: i32, daemon: i32) -> Option<Origin> {
    if marked(pid) {
        return Some(Origin::Marked);
    }
    let mut current = pid;
    // A tree deeper than this is itself a sign of something odd; it is refused.
    for _ in 0..4096 {
        if current == daemon {
            return Some(Origin::Descendant {
                child_of_daemon: pid,
            });
        }
        if current <= 1 {
            return None;
        }
        if is_exec_helper(current) {
            return Some(Origin::UnderHelper);
        }
        let Some(parent) = parent_of(current) else {
            return Some(Origin::Unknown);
        };
        if parent == daemon {
            return Some(Origin::Descendant {
                child_of_daemon: current,
            });
        }
        current = parent;
    }
    Some(Origin::Unknown)
}

/// The parent pid from `/proc/<pid>/stat` (the field after the state, which follows
/// the command name's last `)`: a name may hold spaces and parentheses).
fn parent_of(pid: i32) -> Option<i32> {
    parse_ppid(&std::fs::read(format!("/proc/{pid}/stat")).ok()?)
}

fn parse_ppid(stat: &[u8]) -> Option<i32> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

fn marked(pid: i32) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    environ
        .split(|b| *b == 0)
        .any(|var| MARKS.iter().any(|m| var.starts_with(m)))
}

fn is_exec_helper(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| helper_cmdline(&c))
}

fn helper_cmdline(cmdline: &[u8]) -> bool {
    let mut args = cmdline.split(|b| *b == 0);
    let program = args.next().unwrap_or_default();
    let name = program.rsplit(|b| *b == b'/').next().unwrap_or_default();
    // dsh itself, or the ssh executor's uploaded copy (`helper-<version>-<hash>`).
    let is_dsh = name == b"dsh" || name.starts_with(b"dsh-") || name.starts_with(b"helper-");
    is_dsh && args.next() == Some(b"exec-helper".as_slice())
}

/// `SO_PEERCRED`'s pid.
fn peer_pid(fd: RawFd) -> Option<i32> {
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt into a properly sized ucred.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid)
}

/// `SO_PEERPIDFD` (not yet in the libc crate; 77 on the architectures dsh builds
/// for). `Ok(None)` on kernels before 6.5, which do not know the option; any other
/// failure is an error.
fn peer_pidfd(fd: RawFd) -> Result<Option<OwnedFd>, std::io::Error> {
    const SO_PEERPIDFD: libc::c_int = 77;
    let mut pidfd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into an int.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&mut pidfd as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOPROTOOPT) => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: the kernel just gave us this descriptor.
    Ok((pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) }))
}

/// Whether the process behind `pidfd` still runs (signal 0 checks without sending).
fn alive(pidfd: &OwnedFd) -> bool {
    // SAFETY: pidfd_send_signal with signal 0 and no info.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    rc == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn a_child_descends_from_us_and_our_parent_does_not() {
        let me = std::process::id() as i32;
        // The test process itself is not below itself: the walk starts at the peer.
        let parent = parent_of(me).unwrap();
        assert!(
            !matches!(origin(parent, me), Some(Origin::Descendant { .. })),
            "our parent is not our descendant"
        );
        let _booked = crate::exec::children::starting();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env_remove("DSH_TASK_MARK")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert_eq!(
            origin(pid, me),
            Some(Origin::Descendant {
                child_of_daemon: pid
            })
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_marked_process_is_refused_whoever_its_parent_is() {
        let _booked = crate::exec::children::starting();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "echo ready; sleep 30"])
            .env("DSH_REMOTE_MARK", "x")
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        // Read once the shell runs (a process read mid-exec shows no environment yet).
        let mut ready = [0u8; 6];
        std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut ready).unwrap();
        // Judged as if some other process (pid 1's child) were the daemon.
        assert_eq!(origin(child.id() as i32, i32::MAX), Some(Origin::Marked));
        // The shell and its sleep, as one group.
        // SAFETY: kill on our own child's process group.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
        child.wait().unwrap();
    }

    #[test]
    fn the_helper_is_known_as_dsh_and_as_its_uploaded_copy() {
        for (cmdline, helper) in [
            (&b"/usr/bin/dsh\0exec-helper\0--state-dir\0/x\0"[..], true),
            (
                b"/home/u/.cache/dsh/helper-0.1.0-abcdef\0exec-helper\0",
                true,
            ),
            (b"dsh\0exec-helper\0", true),
            (b"/usr/bin/dsh\0serve\0", false),
            (b"/usr/bin/python3\0exec-helper\0", false),
            (b"", false),
        ] {
            assert_eq!(
                helper_cmdline(cmdline),
                helper,
                "{:?}",
                String::from_utf8_lossy(cmdline)
            );
        }
    }

    #[test]
    fn a_parent_is_read_past_a_name_with_spaces_and_parentheses() {
        // A process may name itself anything (prctl PR_SET_NAME), `) S 1` included.
        assert_eq!(parse_ppid(b"42 (a) S 1 (b) R 777 42 42 0"), Some(777));
        assert_eq!(parse_ppid(b"42 (sleep) S 9 42"), Some(9));
        assert_eq!(parse_ppid(b"garbage"), None);
        assert_eq!(parent_of(-5), None);
    }
}
