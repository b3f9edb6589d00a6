//! The listener, one task per client connection (dispatched by its first byte to
//! SOCKS or HTTP), and the bookkeeping that lets cancellation close all of them.

use super::conn::{ClientStream, Conn, OpenGuard, ProxyOptions, Shared, first_byte};
use super::{ConnectionGate, http, socks, socks_conn};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
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

async fn accept_loop(listener: ProxyListener, shared: Arc<Shared>, open: OpenConnections) {
    loop {
        let accepted = tokio::select! {
            _ = shared.cancel.cancelled() => return,
            accepted = accept(&listener) => accepted,
        };
        match accepted {
            Ok(_) if open.get() >= shared.options.max_connections => {
                // Dropped: the client sees its connection closed.
                tracing::warn!(
                    limit = shared.options.max_connections,
                    "network proxy: a command holds as many connections as it may; one more closed"
                );
            }
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
