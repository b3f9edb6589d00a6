//! Handing the editor's pipes to the daemon, so `dsh acp` steps out of the path.
//!
//! An editor starts `dsh acp` and speaks ACP on that process's stdin and stdout.
//! Copying those bytes to and from the daemon's socket cost every message a hop
//! through the launcher each way (BENCHMARKS.md, A1). Instead, when both are
//! pipes, the launcher sends them to the daemon over the socket (`SCM_RIGHTS`)
//! along with one line, [`REQUEST`]; the daemon answers [`ACCEPTED`] and serves the
//! connection on the editor's pipes themselves.
//!
//! The socket stays open as the launcher's lifeline: the connection ends when the
//! editor's input ends *or* the launcher goes (an editor that kills its agent
//! process ends the connection, as it did when the launcher carried the bytes),
//! and the launcher exits once the daemon closes the socket, which it does when
//! the connection is over.
//!
//! The request line is a JSON-RPC request, so a daemon from before this (still
//! running after an upgrade) answers it with an error rather than waiting for
//! more; the launcher then copies bytes as it always did. Such a daemon never
//! asks for the descriptors, and the kernel closes them with the unread message.

use super::socket::SocketReader;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::net::unix::pipe;

/// The line the launcher sends with its stdin and stdout, in that order.
pub const REQUEST: &str =
    "{\"jsonrpc\":\"2.0\",\"id\":\"dsh-handover\",\"method\":\"_dsh/handover\"}\n";

/// The daemon's answer when it took the pipes.
pub const ACCEPTED: &str = "{\"jsonrpc\":\"2.0\",\"id\":\"dsh-handover\",\"result\":{}}\n";

/// The daemon's answer when it could not use what it was sent (the connection
/// then goes on as an ordinary one, the launcher copying).
pub const REFUSED: &str = "{\"jsonrpc\":\"2.0\",\"id\":\"dsh-handover\",\"error\":{\"code\":-32600,\
                           \"message\":\"the hand-over needs two pipes: input, then output\"}}\n";

/// What a new connection turned out to be.
pub enum Arrival {
    /// An ordinary connection: ACP on the socket. Nothing was read from it.
    Socket,
    /// A launcher handed over the editor's pipes; answer [`ACCEPTED`] on the
    /// socket and serve the connection on these.
    Pipes {
        input: pipe::Receiver,
        output: pipe::Sender,
    },
    /// A hand-over of something else (not two pipes): answer [`REFUSED`] on the
    /// socket and serve it as an ordinary connection.
    Refused,
}

/// Looks at a new connection's first bytes without taking them: the hand-over
/// request is taken with its descriptors; anything else is left to be read as
/// ACP. Waits only as long as the bytes so far could still be the request.
pub async fn arrival(reader: &SocketReader) -> io::Result<Arrival> {
    let mut first = [0u8; REQUEST.len()];
    let mut seen = 0;
    loop {
        let n = reader.peek(&mut first, seen).await?;
        if n == 0 || !REQUEST.as_bytes().starts_with(&first[..n]) {
            return Ok(Arrival::Socket);
        }
        if n == REQUEST.len() {
            break;
        }
        seen = n;
    }
    let (taken, fds) = reader.recv_with_fds(&mut first).await?;
    if taken != REQUEST.len() {
        // Peeked whole a moment ago, and only this task reads the socket.
        return Err(io::Error::other("the hand-over request was cut short"));
    }
    let mut fds = fds.into_iter();
    let (Some(input), Some(output), None) = (fds.next(), fds.next(), fds.next()) else {
        return Ok(Arrival::Refused);
    };
    // Each checks that it is a pipe open for its direction, and makes it
    // non-blocking (only the editor's end of its pipe shares that state with
    // no one else: the editor holds the other end).
    match (
        pipe::Receiver::from_owned_fd(input),
        pipe::Sender::from_owned_fd(output),
    ) {
        (Ok(input), Ok(output)) => Ok(Arrival::Pipes { input, output }),
        _ => Ok(Arrival::Refused),
    }
}

/// The editor's input on a handed-over connection, bound to the launcher's
/// lifeline: it ends (EOF) when the editor's pipe does, or when the launcher's
/// socket closes or says anything at all (it has nothing to say after the
/// hand-over).
pub struct Lifelined {
    input: pipe::Receiver,
    lifeline: SocketReader,
}

impl Lifelined {
    /// `input` read until it or `lifeline` ends.
    pub fn new(input: pipe::Receiver, lifeline: SocketReader) -> Self {
        Self { input, lifeline }
    }
}

impl AsyncRead for Lifelined {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Poll::Ready(read) = Pin::new(&mut self.input).poll_read(cx, buf) {
            return Poll::Ready(read);
        }
        let mut probe = [0u8; 1];
        let mut probe = ReadBuf::new(&mut probe);
        match Pin::new(&mut self.lifeline).poll_read(cx, &mut probe) {
            // The launcher went: the connection ends as if the editor's input had.
            Poll::Ready(_) => Poll::Ready(Ok(())),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The launcher's side: when its stdin and stdout are both pipes, sends them to
/// the daemon on `stream` and reads the answer. `Ok(true)`: the daemon took them,
/// and the launcher's part is to wait for `stream` to close ([`wait_for_end`]).
/// `Ok(false)`: they were not pipes, or the daemon declined (one from before the
/// hand-over); the launcher carries the bytes itself, on the same connection.
pub async fn offer(stream: &tokio::net::UnixStream) -> io::Result<bool> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    if !(is_pipe(std::io::stdin())? && is_pipe(std::io::stdout())?) {
        return Ok(false);
    }
    let fds = [std::io::stdin().as_raw_fd(), std::io::stdout().as_raw_fd()];
    let mut sent = 0;
    while sent < REQUEST.len() {
        let rest = &REQUEST.as_bytes()[sent..];
        // The descriptors go with the first byte only.
        let rights = [ControlMessage::ScmRights(&fds)];
        let controls: &[ControlMessage] = if sent == 0 { &rights } else { &[] };
        sent += stream
            .async_io(tokio::io::Interest::WRITABLE, || {
                sendmsg::<()>(
                    stream.as_raw_fd(),
                    &[io::IoSlice::new(rest)],
                    controls,
                    MsgFlags::MSG_NOSIGNAL,
                    None,
                )
                .map_err(io::Error::from)
            })
            .await?;
    }
    // The answer is one line; read byte by byte so nothing after it is taken
    // from what the copy path (on a refusal) must pass on.
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        stream.readable().await?;
        match stream.try_read(&mut byte) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) if answer.len() > 64 * 1024 => {
                return Err(io::Error::other(
                    "the daemon's answer to the hand-over is too long",
                ));
            }
            Ok(_) => answer.push(byte[0]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    let answer: serde_json::Value = serde_json::from_slice(&answer)
        .map_err(|e| io::Error::other(format!("the daemon's answer is not JSON: {e}")))?;
    Ok(answer.get("result").is_some())
}

/// The launcher after a hand-over: waits for the daemon to close the socket (the
/// connection is over), reading and dropping anything else.
pub async fn wait_for_end(stream: tokio::net::UnixStream) {
    let mut stream = stream;
    let mut sink = [0u8; 256];
    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
}

fn is_pipe(fd: impl AsFd) -> io::Result<bool> {
    let stat = nix::sys::stat::fstat(fd).map_err(io::Error::from)?;
    Ok(stat.st_mode & libc::S_IFMT == libc::S_IFIFO)
}
