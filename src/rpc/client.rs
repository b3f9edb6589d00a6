//! The asking side of a connection, for the places where dsh only asks: the CLI talking
//! to its daemon, the daemon talking to a hook server. Both ride the same connection
//! layer as an editor's connection (framing, line limits, id matching, the one
//! teardown path), so no second JSON-RPC client exists to drift from it.

use super::{Options, Peer, RequestFailure, Service, serve_connection};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The service of a connection on which we only ask: it handles no methods (a request
/// from the other side is answered "method not found") and drops notifications.
struct AskOnly {
    peer: Mutex<Option<oneshot::Sender<Peer>>>,
}

impl Service for AskOnly {
    fn methods(&self) -> jsonrpsee::Methods {
        jsonrpsee::Methods::new()
    }

    fn opened(&self, peer: &Peer) {
        if let Some(tx) = self.peer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(peer.clone());
        }
    }

    fn notification(&self, _peer: &Peer, _method: &str, _params: Option<Value>) {}

    fn closed(&self, _peer: &Peer) {}
}

/// Serves a connection over `reader`/`writer` on which we only ask: its peer (to send
/// requests with) and the task serving it, which ends with the connection.
pub async fn ask_only<R, W>(reader: R, writer: W, options: Options) -> (Peer, JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let service = Arc::new(AskOnly {
        peer: Mutex::new(Some(tx)),
    });
    let serve = tokio::spawn(serve_connection(reader, writer, service, options));
    // `opened` runs before the connection reads a line: the peer always comes.
    match rx.await {
        Ok(peer) => (peer, serve),
        Err(_) => unreachable!("serve_connection calls `opened` first"),
    }
}

/// Why the CLI got no answer from the daemon: each cause is its own case, so a caller
/// (`dsh stop` expecting the daemon to go away) matches it, never its text.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answers on the socket (no daemon, or not ours to reach).
    #[error("no daemon answers on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The daemon closed the connection before it answered.
    #[error("the daemon closed the connection without answering")]
    Closed,
    /// The daemon answered with an error.
    #[error("{message}")]
    Rpc { code: i32, message: String },
}

impl From<RequestFailure> for ClientError {
    fn from(failure: RequestFailure) -> Self {
        match failure {
            RequestFailure::Answered(e) => ClientError::Rpc {
                code: e.code,
                message: e.message,
            },
            // No token and no timeout is ever set on the CLI's requests.
            RequestFailure::Closed
            | RequestFailure::Cancelled
            | RequestFailure::TimedOut { .. } => ClientError::Closed,
        }
    }
}

/// One connection of the CLI to its daemon's socket, initialized.
pub struct DaemonClient {
    peer: Peer,
    _serve: JoinHandle<()>,
}

impl DaemonClient {
    /// Connects to the daemon's socket and sends `initialize` (the daemon answers
    /// nothing else first).
    pub async fn connect(socket: &Path) -> Result<Self, ClientError> {
        let stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|source| ClientError::Io {
                path: socket.to_path_buf(),
                source,
            })?;
        let (reader, writer) = stream.into_split();
        let (peer, serve) = ask_only(reader, writer, Options::default()).await;
        let client = Self {
            peer,
            _serve: serve,
        };
        client
            .request("initialize", serde_json::json!({"protocolVersion": 1}))
            .await?;
        Ok(client)
    }

    /// Asks the daemon one thing.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        Ok(self
            .peer
            .call(method, params, &CancellationToken::new())
            .await?)
    }
}

impl Drop for DaemonClient {
    fn drop(&mut self) {
        self.peer.close();
    }
}
