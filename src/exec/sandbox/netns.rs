//! A listening socket on the loopback of a sandbox's own network namespace, made
//! from outside it: the proxy's door (E10).
//!
//! A socket belongs to the network namespace it was created in, whatever the
//! process that holds it later. So a short-lived child of the daemon enters the
//! sandbox's user namespace (the daemon's user owns it, so it may) and then its
//! network namespace, creates and binds the listener there, hands it back over a
//! socket pair and exits. The daemon then accepts the command's connections itself:
//! no process of dsh's runs inside the sandbox, no socket of the daemon's is bound
//! into it, and nothing outside that namespace can reach the port at all. (The
//! issue sketched a forwarder inside, an exec of dsh's binary per command, 2-2.5 ms
//! measured, and one more copy of every byte.)
//!
//! The child is forked from a multi-threaded process, so between fork and exit it
//! only makes system calls on memory prepared before the fork: no allocation, no
//! lock. `setns` into a user namespace needs a single-threaded caller, which a
//! fork's child is.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

/// `ioctl(NS_GET_USERNS)`: the user namespace that owns a namespace.
const NS_GET_USERNS: libc::c_ulong = 0xb701;

/// A TCP listener on `127.0.0.1:port` inside the network namespace of process
/// `pid` (the sandbox's first process, from bwrap's `--info-fd`).
pub fn loopback_listener(pid: i32, port: u16) -> Result<std::net::TcpListener, String> {
    let net = open_namespace(&Path::new("/proc").join(pid.to_string()).join("ns/net"))?;
    // SAFETY: an ioctl on a descriptor we own, returning a new descriptor or -1.
    let user = unsafe { libc::ioctl(net.as_raw_fd(), NS_GET_USERNS as _) };
    if user < 0 {
        return Err(format!(
            "cannot find the sandbox's user namespace: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: a fresh descriptor the ioctl returned, owned from here on.
    let user = unsafe { OwnedFd::from_raw_fd(user) };
    let fd = made_in(&user, &net, port)?;
    let listener = std::net::TcpListener::from(fd);
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot use the sandbox's listener: {e}"))?;
    Ok(listener)
}

fn open_namespace(path: &Path) -> Result<OwnedFd, String> {
    std::fs::File::open(path)
        .map(OwnedFd::from)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))
}

/// What the child reports when a step fails: the step and its errno.
#[repr(C)]
#[derive(Clone, Copy)]
struct Failure {
    step: u32,
    errno: i32,
}

const STEPS: [&str; 6] = [
    "enter the sandbox's user namespace",
    "enter the sandbox's network namespace",
    "create the socket",
    "bind the loopback port",
    "listen",
    "hand the socket back",
];

/// Forks a child that makes the listener in the namespaces and sends it back.
fn made_in(user: &OwnedFd, net: &OwnedFd, port: u16) -> Result<OwnedFd, String> {
    let (ours, theirs) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| format!("cannot make a socket pair: {e}"))?;
    // Everything the child touches, prepared here.
    let address = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    let (user_fd, net_fd, theirs_fd) = (user.as_raw_fd(), net.as_raw_fd(), theirs.as_raw_fd());
    // Booked from before it exists until it is reaped: the daemon's reaper must not
    // take it (`children`).
    let start = crate::exec::children::starting();
    // SAFETY: the child runs only `in_child`, which makes system calls on the values
    // above (copied into its own address space by the fork) and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!(
            "cannot fork to reach the sandbox's network: {}",
            std::io::Error::last_os_error()
        ));
    }
    if pid == 0 {
        // SAFETY: see `in_child`.
        unsafe { in_child(user_fd, net_fd, theirs_fd, &address) }
    }
    drop(theirs);
    let booked = start.owned(pid);
    let mut status = 0;
    // SAFETY: waiting for the child we just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    drop(booked);
    received(&ours)
}

/// The child's whole life: enter, make, send, exit. Never returns.
///
/// # Safety
/// Called only in the child of a fork, with descriptors valid there.
unsafe fn in_child(user: RawFd, net: RawFd, back: RawFd, address: &libc::sockaddr_in) -> ! {
    let fail = |step: u32| -> ! {
        let failure = Failure {
            step,
            // SAFETY: reading this thread's errno.
            errno: unsafe { *libc::__errno_location() },
        };
        // SAFETY: a write of a plain struct to our socket, then exit.
        unsafe {
            libc::send(
                back,
                (&failure as *const Failure).cast(),
                std::mem::size_of::<Failure>(),
                0,
            );
            libc::_exit(1)
        }
    };
    // SAFETY: each call is a system call on descriptors and memory valid in the child.
    unsafe {
        if libc::setns(user, libc::CLONE_NEWUSER) != 0 {
            fail(0);
        }
        if libc::setns(net, libc::CLONE_NEWNET) != 0 {
            fail(1);
        }
        let socket = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if socket < 0 {
            fail(2);
        }
        let one: libc::c_int = 1;
        let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        libc::setsockopt(
            socket,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            size,
        );
        // bwrap reports the sandbox before its first process has brought the
        // loopback up (127.0.0.1 does not exist yet): bind anyway. The command only
        // runs, and connects, once the sandbox is set up.
        libc::setsockopt(
            socket,
            libc::IPPROTO_IP,
            libc::IP_FREEBIND,
            (&one as *const libc::c_int).cast(),
            size,
        );
        if libc::bind(
            socket,
            (address as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) != 0
        {
            fail(3);
        }
        if libc::listen(socket, 1024) != 0 {
            fail(4);
        }
        // One descriptor in an SCM_RIGHTS message, in a buffer on the stack.
        let mut space = [0u64; 8];
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = space.as_mut_ptr().cast();
        message.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
        let header = libc::CMSG_FIRSTHDR(&message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), socket);
        if libc::sendmsg(back, &message, 0) < 0 {
            fail(5);
        }
        libc::_exit(0)
    }
}

/// The listener the child sent, or why it could not make one.
fn received(ours: &OwnedFd) -> Result<OwnedFd, String> {
    let mut space = nix::cmsg_space!(RawFd);
    let mut buffer = [0u8; std::mem::size_of::<Failure>()];
    let mut iov = [std::io::IoSliceMut::new(&mut buffer)];
    let message = nix::sys::socket::recvmsg::<()>(
        ours.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        nix::sys::socket::MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(|e| format!("cannot receive the sandbox's listener: {e}"))?;
    let bytes = message.bytes;
    if let Ok(cmsgs) = message.cmsgs() {
        for cmsg in cmsgs {
            if let nix::sys::socket::ControlMessageOwned::ScmRights(fds) = cmsg
                && let Some(&fd) = fds.first()
            {
                // SAFETY: a descriptor the kernel just installed for us.
                return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    if bytes == std::mem::size_of::<Failure>() {
        // SAFETY: the child wrote exactly a `Failure`.
        let failure: Failure = unsafe { std::ptr::read_unaligned(buffer.as_ptr().cast()) };
        let step = STEPS.get(failure.step as usize).copied().unwrap_or("?");
        return Err(format!(
            "cannot {step} for the network proxy: {}",
            std::io::Error::from_raw_os_error(failure.errno)
        ));
    }
    Err("the helper that makes the sandbox's listener died".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener made in another process's network namespace is reached from
    /// there and not from here: a real bwrap sandbox with its own network.
    #[test]
    fn e10_a_listener_is_made_in_the_sandboxs_network_and_only_there() {
        use std::io::{Read, Write};
        use std::os::unix::process::CommandExt;
        let (info_r, info_w) = nix::unistd::pipe().unwrap();
        let (block_r, block_w) = nix::unistd::pipe().unwrap();
        let (iw, br) = (info_w.as_raw_fd(), block_r.as_raw_fd());
        let mut child = std::process::Command::new("bwrap");
        child
            .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
            .args(["--unshare-user", "--unshare-pid", "--unshare-net"])
            .args(["--info-fd", &iw.to_string(), "--block-fd", &br.to_string()])
            .args(["--", "/usr/bin/python3", "-c"])
            .arg(
                "import socket; s = socket.create_connection(('127.0.0.1', 3999)); \
                 s.sendall(b'inside'); print(s.recv(10).decode())",
            )
            .stdout(std::process::Stdio::piped());
        // SAFETY: clears close-on-exec of two descriptors in the child.
        unsafe {
            child.pre_exec(move || {
                for fd in [iw, br] {
                    libc::fcntl(fd, libc::F_SETFD, 0);
                }
                Ok(())
            });
        }
        let child = child.spawn().unwrap();
        drop((info_w, block_r));
        let mut info = String::new();
        let mut info_r = std::fs::File::from(info_r);
        let mut byte = [0u8; 1];
        while serde_json::from_str::<serde_json::Value>(&info).is_err() {
            assert_eq!(info_r.read(&mut byte).unwrap(), 1, "{info}");
            info.push(byte[0] as char);
        }
        let pid = serde_json::from_str::<serde_json::Value>(&info).unwrap()["child-pid"]
            .as_i64()
            .unwrap() as i32;
        let listener = loopback_listener(pid, 3999).unwrap();
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", 3999)).is_err(),
            "not on the host's loopback"
        );
        std::fs::File::from(block_w).write_all(b"x").unwrap();
        listener.set_nonblocking(false).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = [0u8; 6];
        conn.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"inside");
        conn.write_all(b"answer").unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "answer\n");
    }
}
