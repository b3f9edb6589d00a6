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
        // Not the request, or the start of it and then nothing more (the peer
        // closed): either way the ordinary path reads and answers it.
        if n <= seen || !REQUEST.as_bytes().starts_with(&first[..n]) {
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
    // non-blocking. That flag belongs to the open pipe end, which the launcher
    // shares (its stdin and stdout, idle from now on; it made sure stderr is not
    // among them); the editor's ends of the pipes are separate and untouched.
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

/// How long the launcher waits for the daemon's answer to the hand-over before it
/// gives up (a daemon that stalls this long would leave the editor with no answer
/// to anything).
const ANSWER_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The launcher's side: when its stdin and stdout are both pipes of its own (see
/// [`own_pipes`]), sends them to the daemon on `stream` and reads the answer.
/// `Ok(true)`: the daemon took them, and the launcher's part is to wait for
/// `stream` to close ([`wait_for_end`]). `Ok(false)`: they were not pipes, or the
/// daemon declined (one from before the hand-over); the launcher carries the
/// bytes itself, on the same connection.
pub async fn offer(stream: &tokio::net::UnixStream) -> io::Result<bool> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    if !own_pipes() {
        return Ok(false);
    }
    let fds = [std::io::stdin().as_raw_fd(), std::io::stdout().as_raw_fd()];
    // One send: the daemon reads the line and its descriptors as one message (a
    // line split across sends would stop its look at the first part). A few dozen
    // bytes on a fresh connection always go whole.
    let sent = stream
        .async_io(tokio::io::Interest::WRITABLE, || {
            sendmsg::<()>(
                stream.as_raw_fd(),
                &[io::IoSlice::new(REQUEST.as_bytes())],
                &[ControlMessage::ScmRights(&fds)],
                MsgFlags::MSG_NOSIGNAL,
                None,
            )
            .map_err(io::Error::from)
        })
        .await?;
    if sent != REQUEST.len() {
        return Err(io::Error::other("the hand-over request went out cut short"));
    }
    let answer = tokio::time::timeout(ANSWER_LIMIT, answer_line(stream))
        .await
        .map_err(|_| io::Error::other("the daemon did not answer the hand-over"))??;
    let answer: serde_json::Value = serde_json::from_slice(&answer)
        .map_err(|e| io::Error::other(format!("the daemon's answer is not JSON: {e}")))?;
    if answer.get("id").and_then(serde_json::Value::as_str) != Some("dsh-handover") {
        return Err(io::Error::other(format!(
            "the daemon answered something else than the hand-over: {answer}"
        )));
    }
    Ok(answer.get("result").is_some())
}

/// The daemon's first line, read byte by byte so that nothing after it is taken
/// from what the copy path (after a refusal) must pass on to the editor.
async fn answer_line(stream: &tokio::net::UnixStream) -> io::Result<Vec<u8>> {
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        stream.readable().await?;
        match stream.try_read(&mut byte) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) if byte[0] == b'\n' => return Ok(answer),
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
}

/// The launcher after a hand-over: waits for the daemon to close the socket (the
/// connection is over), reading and dropping anything else.
pub async fn wait_for_end(mut stream: tokio::net::UnixStream) {
    let mut sink = [0u8; 256];
    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
}

/// Whether this process's stdin and stdout are pipes that can be handed over: both
/// pipes, and stdout not also stderr (the daemon makes them non-blocking, which
/// would reach a merged stderr: see `stdio::stdio`). Any doubt (a closed
/// descriptor) says no.
pub fn own_pipes() -> bool {
    let is_pipe = |fd: std::os::fd::BorrowedFd<'_>| {
        nix::sys::stat::fstat(fd).is_ok_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFIFO)
    };
    is_pipe(std::io::stdin().as_fd())
        && is_pipe(std::io::stdout().as_fd())
        && !super::stdio::stdout_is_stderr()
}
