//! What every task serving one client shares: the proxy's state, the client's
//! place in the count, the stream's first byte, and the tunnel. Apart from the
//! server (which accepts and dispatches) so that the protocols it dispatches to
//! and the server import this, not each other.

use super::outbound::{self, Refused, Resolver, SystemResolver};
use super::{ConnectRequest, ConnectionGate};
use std::future::Future;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, Interest};
use tokio::net::{TcpStream, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

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
    /// How many client connections the proxy serves at once; one more is closed as
    /// it arrives. Each holds descriptors of the daemon's (two for a tunnel), and
    /// the command is not to be trusted with how many it opens: without a bound one
    /// command could spend every descriptor the daemon has.
    pub max_connections: usize,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        ProxyOptions {
            head_timeout: Duration::from_secs(30),
            max_connections: 256,
            connect_timeout: Duration::from_secs(30),
            max_head_bytes: 64 * 1024,
            resolver: Arc::new(SystemResolver),
        }
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

/// One counted connection; uncounted when the last of its tasks drops it.
pub(super) struct OpenGuard(pub(super) Arc<AtomicUsize>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What every connection's tasks share.
pub(super) struct Shared {
    pub(super) gate: Arc<dyn ConnectionGate>,
    pub(super) options: ProxyOptions,
    pub(super) tracker: TaskTracker,
    pub(super) cancel: CancellationToken,
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
    pub(super) _open: OpenGuard,
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
pub(super) async fn first_byte<S: ClientStream>(stream: &S) -> std::io::Result<Option<u8>> {
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
