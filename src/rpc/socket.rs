//! One connection's Unix socket, split into a reader and a writer, with the
//! runtime told only about reads.
//!
//! Why not tokio's `UnixStream` halves: it registers the socket for readiness
//! to read *and* to write, and a Unix stream socket signals "writable" each time
//! the peer reads what was sent (the kernel frees the sent buffers and wakes
//! every waiter, where TCP wakes only a writer that found its buffer full). A
//! daemon that answers and goes back to waiting was woken once more by each
//! answer the editor read, for nothing: two context switches per call where one
//! is needed (BENCHMARKS.md, "The wake-up nobody waited for").
//!
//! Here the reader is registered for reads only. The writer writes straight to
//! the socket; only a write that finds the buffer full (a peer that reads
//! slowly, a large answer) registers a duplicate of the socket for writability,
//! and only for as long as it waits.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// Splits a connected socket (tokio's, as the listener accepts it) into the two
/// halves `serve_connection` takes.
pub fn split(stream: tokio::net::UnixStream) -> io::Result<(SocketReader, SocketWriter)> {
    // Leaves tokio's registration and keeps the socket non-blocking.
    let socket = Arc::new(stream.into_std()?);
    // SAFETY: the descriptor is the socket's, which stays open while the
    // `AsyncFd` holds its `Arc`, and `as_raw_fd` always gives that same one.
    let registered = unsafe { AsyncFd::register_with_interest(socket.clone(), Interest::READABLE) };
    let reader = SocketReader {
        socket: registered?,
    };
    let writer = SocketWriter {
        socket,
        waiting: None,
        shutdown_on_drop: true,
    };
    Ok((reader, writer))
}

/// The read half: registered for readiness to read only.
pub struct SocketReader {
    socket: AsyncFd<Arc<UnixStream>>,
}

/// Room for as many descriptors as one message can carry (the kernel's
/// `SCM_MAX_FD`): a sender's extra ones then arrive whole and are closed here.
/// With less room the kernel would install what fits and flag the rest cut off,
/// and nix refuses to list a cut-off message, so those would leak.
const MAX_FDS: usize = 253;

impl SocketReader {
    /// Waits until more than `seen` bytes are waiting, or `buf` is full, or the
    /// peer will send no more, then copies what is waiting into `buf` without
    /// taking it. So a result of `seen` or less means nothing more is coming. For
    /// a look at a connection's first bytes (`handover`).
    pub async fn peek(&self, buf: &mut [u8], seen: usize) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        loop {
            // `readable()` takes no part in tokio's cooperative budget: this loop
            // must always end or wait, never spin (a closed peer, below).
            tokio::task::consume_budget().await;
            let mut ready = self.socket.readable().await?;
            let peeked = ready.try_io(|socket| {
                nix::sys::socket::recv(
                    socket.get_ref().as_raw_fd(),
                    buf,
                    nix::sys::socket::MsgFlags::MSG_PEEK,
                )
                .map_err(io::Error::from)
            });
            let n = match peeked {
                Ok(result) => result?,
                // Not readable after all: readiness was cleared, wait again.
                Err(_would_block) => continue,
            };
            // A peer that closed its side stays readable for good (clearing
            // does not clear that), so "nothing new" must end here.
            if n == 0 || n > seen || n == buf.len() || ready.ready().is_read_closed() {
                return Ok(n);
            }
            // Nothing new yet. Clearing keeps any arrival since `readable()`
            // (tokio compares the readiness tick), so none is missed.
            ready.clear_ready();
        }
    }

    /// Takes `buf.len()` bytes, and the descriptors sent along with them
    /// (`SCM_RIGHTS`), owned from here on. Call when [`SocketReader::peek`] has
    /// seen the bytes waiting.
    pub async fn recv_with_fds(&self, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
        use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
        use std::os::fd::{AsRawFd, FromRawFd, RawFd};
        self.socket
            .async_io(Interest::READABLE, |socket| {
                let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
                let mut iov = [io::IoSliceMut::new(&mut *buf)];
                let message = recvmsg::<()>(
                    socket.as_raw_fd(),
                    &mut iov,
                    Some(&mut space),
                    MsgFlags::MSG_CMSG_CLOEXEC,
                )
                .map_err(io::Error::from)?;
                let mut fds = Vec::new();
                for control in message.cmsgs().map_err(io::Error::from)? {
                    if let ControlMessageOwned::ScmRights(received) = control {
                        // SAFETY: the kernel just installed these descriptors in
                        // this process for us; nothing else owns them.
                        fds.extend(
                            received
                                .into_iter()
                                .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                        );
                    }
                }
                Ok((message.bytes, fds))
            })
            .await
    }
}

impl AsyncRead for SocketReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.socket.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match ready.try_io(|socket| (&**socket.get_ref()).read(unfilled)) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Not readable after all: readiness was cleared, wait again.
                Err(_would_block) => continue,
            }
        }
    }
}

/// The write half: writes go straight to the socket (see the module docs).
pub struct SocketWriter {
    socket: Arc<UnixStream>,
    /// A duplicate of the socket registered for writability, while a write waits
    /// for room; dropped (deregistered) by the next write that goes through.
    waiting: Option<AsyncFd<OwnedFd>>,
    /// Shut the socket's sending side when dropped (see the `Drop`).
    shutdown_on_drop: bool,
}

impl SocketWriter {
    /// Dropping this writer will leave the socket as it is: for a connection handed to
    /// the daemon's next program (`crate::upgrade`), whose duplicate of the socket
    /// goes on, so the peer must not see an end.
    pub fn keep_open(&mut self) {
        self.shutdown_on_drop = false;
    }
}

impl AsyncWrite for SocketWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        loop {
            let Some(waiting) = &this.waiting else {
                match (&*this.socket).write(data) {
                    Ok(n) => return Poll::Ready(Ok(n)),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        // Registering reports the socket's state at once, so room
                        // made since the failed write is not missed.
                        let duplicate = this.socket.as_fd().try_clone_to_owned()?;
                        // SAFETY: the `AsyncFd` owns the duplicate, open until it drops.
                        let registered = unsafe {
                            AsyncFd::register_with_interest(duplicate, Interest::WRITABLE)
                        };
                        this.waiting = Some(registered?);
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Poll::Ready(Err(e)),
                }
            };
            let mut ready = ready!(waiting.poll_write_ready(cx))?;
            match ready.try_io(|_| (&*this.socket).write(data)) {
                Ok(Ok(n)) => {
                    this.waiting = None;
                    return Poll::Ready(Ok(n));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Still full: readiness was cleared, wait for the next room.
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Nothing is buffered here (the connection's `BufWriter` is above).
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.socket.shutdown(std::net::Shutdown::Write))
    }
}

impl Drop for SocketWriter {
    /// The peer sees the end of our output when the writer goes, even while the
    /// reader still lives (the connection winding down), as with tokio's halves.
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            let _ = self.socket.shutdown(std::net::Shutdown::Write);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn pair() -> (SocketReader, SocketWriter, tokio::net::UnixStream) {
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        let (reader, writer) = split(ours).unwrap();
        (reader, writer, theirs)
    }

    #[tokio::test]
    async fn reads_what_the_peer_writes_and_sees_its_end() {
        let (mut reader, _writer, mut peer) = pair();
        peer.write_all(b"hello\n").await.unwrap();
        let mut got = [0u8; 16];
        let n = reader.read(&mut got).await.unwrap();
        assert_eq!(&got[..n], b"hello\n");
        drop(peer);
        assert_eq!(reader.read(&mut got).await.unwrap(), 0, "EOF");
    }

    /// A write that finds the buffer full waits for the peer to read, then goes
    /// on, every byte in order: the path that registers for writability.
    #[tokio::test]
    async fn a_write_into_a_full_buffer_waits_for_the_reader_and_loses_nothing() {
        let (_reader, mut writer, mut peer) = pair();
        let message: Vec<u8> = (0..8 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
        let sent = message.clone();
        let writing = tokio::spawn(async move {
            writer.write_all(&sent).await.unwrap();
            writer.shutdown().await.unwrap();
            writer
        });
        // Far more than a socket buffer: the writer must have waited.
        tokio::task::yield_now().await;
        let mut got = Vec::new();
        peer.read_to_end(&mut got).await.unwrap();
        let writer = writing.await.unwrap();
        assert!(
            got == message,
            "the bytes arrived changed or in another order"
        );
        assert!(
            writer.waiting.is_none(),
            "the registration outlived the wait"
        );
    }

    /// A write waiting for room fails, rather than waiting forever, when the
    /// peer goes without reading.
    #[tokio::test]
    async fn a_waiting_write_fails_when_the_peer_leaves() {
        let (_reader, mut writer, peer) = pair();
        let chunk = vec![b'x'; 64 * 1024];
        // Fill the socket's buffer until a write has to wait.
        let mut cx = Context::from_waker(std::task::Waker::noop());
        while let Poll::Ready(written) = Pin::new(&mut writer).poll_write(&mut cx, &chunk) {
            written.unwrap();
        }
        assert!(writer.waiting.is_some(), "a full buffer registers the wait");
        drop(peer);
        assert!(writer.write_all(&chunk).await.is_err());
    }

    #[tokio::test]
    async fn dropping_the_writer_ends_the_peers_input() {
        let (_reader, writer, mut peer) = pair();
        drop(writer);
        let mut got = Vec::new();
        peer.read_to_end(&mut got).await.unwrap();
        assert!(got.is_empty());
    }

    #[tokio::test]
    async fn a_write_to_a_peer_that_left_is_an_error() {
        let (_reader, mut writer, peer) = pair();
        drop(peer);
        let mut failed = false;
        for _ in 0..4 {
            if writer.write_all(b"x\n").await.is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed, "writing to a closed socket kept succeeding");
    }
}
