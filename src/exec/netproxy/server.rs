//! The listener, one task per client connection, and the bookkeeping that lets
//! cancellation close all of them.

use super::outbound::{self, Refused, Resolver, SystemResolver};
use super::{ConnectRequest, ConnectionGate, http, socks, socks_conn};
use std::future::Future;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, Interest};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Where the proxy's clients connect: a Unix socket (the tests, or a socket bound
/// into a sandbox), or a TCP listener the daemon made on the loopback of a
/// sandbox's own network namespace (what the sandbox executor uses: no process
/// inside carries bytes, and nothing outside that namespace can reach it).
pub enum ProxyListener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

impl From<UnixListener> for ProxyListener {
    fn from(listener: UnixListener) -> Self {
        ProxyListener::Unix(listener)
    }
}

impl From<TcpListener> for ProxyListener {
    fn from(listener: TcpListener) -> Self {
        ProxyListener::Tcp(listener)
    }
}

/// A client's connection, whichever listener took it: what the protocols need
/// beyond reading and writing is a look at the first byte without taking it.
pub(super) trait ClientStream:
    AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + Sync + 'static
{
    fn readable(&self) -> impl Future<Output = std::io::Result<()>> + Send;
    fn try_io<R>(
        &self,
        interest: Interest,
        f: impl FnOnce() -> std::io::Result<R>,
    ) -> std::io::Result<R>;
}

macro_rules! client_stream {
    ($t:ty) => {
        impl ClientStream for $t {
            fn readable(&self) -> impl Future<Output = std::io::Result<()>> + Send {
                <$t>::readable(self)
            }
            fn try_io<R>(
                &self,
                interest: Interest,
                f: impl FnOnce() -> std::io::Result<R>,
            ) -> std::io::Result<R> {
                <$t>::try_io(self, interest, f)
            }
        }
    };
}
client_stream!(UnixStream);
client_stream!(TcpStream);

/// The proxy's limits. The defaults suit the daemon; tests shorten the
/// timeouts and swap the resolver.
#[derive(Clone)]
pub struct ProxyOptions {
    /// How long a client has to send a whole request head (the SOCKS greeting
    /// and request, or an HTTP head) before it is dropped.
    pub head_timeout: Duration,
    /// How long resolving and connecting out may take, all addresses together.
    pub connect_timeout: Duration,
    /// The largest HTTP request head accepted; a bigger one gets 431. At least
    /// 8 KiB (hyper's floor).
    pub max_head_bytes: usize,
    /// Where allowed names are resolved.
    pub resolver: Arc<dyn Resolver>,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        ProxyOptions {
            head_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(30),
            max_head_bytes: 64 * 1024,
            resolver: Arc::new(SystemResolver),
        }
    }
}

/// How many client connections the proxy is serving right now (tunnels,
/// kept-alive HTTP connections, connections waiting for an answer): what
/// `dsh status` shows. A clonable handle, read without locking.
#[derive(Debug, Clone, Default)]
pub struct OpenConnections(Arc<AtomicUsize>);

impl OpenConnections {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    fn enter(&self) -> OpenGuard {
        self.0.fetch_add(1, Ordering::Relaxed);
        OpenGuard(self.0.clone())
    }
}

/// One counted connection; uncounted when the last of its tasks drops it.
struct OpenGuard(Arc<AtomicUsize>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A running proxy for one sandboxed command.
///
/// It stops when the token given to [`ProxyServer::start`] is cancelled, or
/// when it is dropped: the listener is closed and so is every connection it
/// opened, tunnels included, and any question still pending is dropped.
pub struct ProxyServer {
    cancel: CancellationToken,
    tracker: TaskTracker,
    open: OpenConnections,
}

impl ProxyServer {
    /// Serve `listener` with the default options. Must be called inside a tokio
    /// runtime.
    pub fn start(
        listener: impl Into<ProxyListener>,
        gate: Arc<dyn ConnectionGate>,
        cancel: CancellationToken,
    ) -> ProxyServer {
        Self::start_with(listener, gate, cancel, ProxyOptions::default())
    }

    /// Serve `listener` with the given options.
    pub fn start_with(
        listener: impl Into<ProxyListener>,
        gate: Arc<dyn ConnectionGate>,
        cancel: CancellationToken,
        options: ProxyOptions,
    ) -> ProxyServer {
        // A child token: dropping the server stops it without cancelling the
        // caller's token.
        let cancel = cancel.child_token();
        let tracker = TaskTracker::new();
        let open = OpenConnections::default();
        let shared = Arc::new(Shared {
            gate,
            options,
            tracker: tracker.clone(),
            cancel: cancel.clone(),
        });
        tracker.spawn(accept_loop(listener.into(), shared, open.clone()));
        tracker.close();
        ProxyServer {
            cancel,
            tracker,
            open,
        }
    }

    /// The count of open client connections.
    pub fn open_connections(&self) -> OpenConnections {
        self.open.clone()
    }

    /// Resolves once the proxy has stopped and every connection is closed.
    pub async fn stopped(&self) {
        self.tracker.wait().await;
    }
}

impl Drop for ProxyServer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// What every connection's tasks share.
pub(super) struct Shared {
    gate: Arc<dyn ConnectionGate>,
    pub(super) options: ProxyOptions,
    tracker: TaskTracker,
    cancel: CancellationToken,
}

impl Shared {
    /// Run `work` as one of the proxy's tasks: counted for
    /// [`ProxyServer::stopped`], dropped (closing what it owns) on cancellation.
    pub(super) fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        let cancel = self.cancel.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = work => {}
            }
        });
    }

    /// Ask the gate, then connect out.
    pub(super) async fn open(&self, request: &ConnectRequest) -> Result<TcpStream, Refused> {
        let options = &self.options;
        outbound::open(
            &*self.gate,
            request,
            &*options.resolver,
            options.connect_timeout,
        )
        .await
    }
}

/// One client connection: the shared state, and its place in the count, held
/// by every task serving it (a CONNECT tunnel outlives its HTTP exchange).
pub(super) struct Conn {
    pub(super) shared: Arc<Shared>,
    _open: OpenGuard,
}

async fn accept_loop(listener: ProxyListener, shared: Arc<Shared>, open: OpenConnections) {
    loop {
        let accepted = tokio::select! {
            _ = shared.cancel.cancelled() => return,
            accepted = accept(&listener) => accepted,
        };
        match accepted {
            Ok(client) => {
                let conn = Arc::new(Conn {
                    shared: shared.clone(),
                    _open: open.enter(),
                });
                match client {
                    Accepted::Unix(stream) => shared.spawn(serve_client(stream, conn)),
                    Accepted::Tcp(stream) => {
                        // Small writes (a SOCKS reply, a CONNECT's 200) go out at once.
                        let _ = stream.set_nodelay(true);
                        shared.spawn(serve_client(stream, conn))
                    }
                }
            }
            Err(e) => {
                // Out of descriptors and the like: wait a little instead of
                // spinning on the same error.
                tracing::warn!(error = %e, "network proxy: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

enum Accepted {
    Unix(UnixStream),
    Tcp(TcpStream),
}

async fn accept(listener: &ProxyListener) -> std::io::Result<Accepted> {
    match listener {
        ProxyListener::Unix(l) => l.accept().await.map(|(s, _)| Accepted::Unix(s)),
        ProxyListener::Tcp(l) => l.accept().await.map(|(s, _)| Accepted::Tcp(s)),
    }
}

/// Tell SOCKS from HTTP by the first byte, without taking it off the socket;
/// a client that sends nothing within the head timeout is dropped.
async fn serve_client<S: ClientStream>(stream: S, conn: Arc<Conn>) {
    let head_timeout = conn.shared.options.head_timeout;
    match tokio::time::timeout(head_timeout, first_byte(&stream)).await {
        Ok(Ok(Some(socks::VERSION))) => socks_conn::serve(stream, conn).await,
        Ok(Ok(Some(_))) => http::serve(stream, conn).await,
        Ok(Ok(None)) | Ok(Err(_)) | Err(_) => {}
    }
}

/// Resolves when the client has closed its end without sending more: a
/// question asked for it can be withdrawn. Bytes it sends early (a TLS hello)
/// are left where they are for the tunnel, and the watch stops there: reading
/// them would mean holding them.
pub(super) async fn hung_up<S: ClientStream>(stream: &S) {
    match first_byte(stream).await {
        Ok(None) | Err(_) => {}
        Ok(Some(_)) => std::future::pending().await,
    }
}

/// The first byte, peeked (MSG_PEEK), so each protocol reads its whole
/// message itself; `None` when the client closed without sending anything.
async fn first_byte<S: ClientStream>(stream: &S) -> std::io::Result<Option<u8>> {
    let mut byte = [0u8; 1];
    loop {
        stream.readable().await?;
        let peeked = stream.try_io(Interest::READABLE, || {
            let flags = nix::sys::socket::MsgFlags::MSG_PEEK;
            nix::sys::socket::recv(stream.as_raw_fd(), &mut byte, flags)
                .map_err(std::io::Error::from)
        });
        match peeked {
            Ok(0) => return Ok(None),
            Ok(_) => return Ok(Some(byte[0])),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The size of each direction's buffer in a tunnel: larger than tokio's 8 KiB
/// default, so a bulk download takes fewer wakeups per megabyte.
const TUNNEL_BUFFER: usize = 64 * 1024;

/// Carry bytes both ways until both sides are done (or one fails).
pub(super) async fn tunnel<C>(mut client: C, mut upstream: TcpStream)
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let copied = tokio::io::copy_bidirectional_with_sizes(
        &mut client,
        &mut upstream,
        TUNNEL_BUFFER,
        TUNNEL_BUFFER,
    )
    .await;
    if let Err(e) = copied {
        tracing::debug!(error = %e, "network proxy: tunnel ended");
    }
}
