//! [`Peer`]: the handle the rest of dsh holds on one live connection.
//!
//! Everything that goes out to the peer passes through one bounded queue that a
//! single writer task drains (see `connection`). Senders never wait on it: a
//! full queue means the peer has stopped reading, and the connection is ended
//! rather than buffering without bound or stalling the sender (a turn loop, the
//! permission gate) behind one stuck editor.
//!
//! Outgoing requests get ids from a per-connection counter, spelled `dsh-N`.
//! The peer numbers its own requests independently; ours are strings with a
//! prefix so that a log (or a human) can always tell the two id spaces apart.

use super::error::{Closed, RpcError};
use super::message;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Peer ids are unique for the life of the process, not per listener.
static NEXT_PEER_ID: AtomicU64 = AtomicU64::new(1);

/// What a waiting outgoing request is told when the peer answers.
type Answer = Result<serde_json::Value, RpcError>;

/// Why an outgoing request has no result: a caller that acts on the cause (the CLI
/// telling a daemon that went away from one that refused) matches this, never text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestFailure {
    /// The peer answered with an error object.
    #[error("{}", .0.message)]
    Answered(RpcError),
    /// The connection ended before an answer came.
    #[error("connection closed before the peer answered")]
    Closed,
    /// The caller's token fired first; the peer was told with `$/cancel_request`.
    #[error("request cancelled")]
    Cancelled,
    /// `Options::request_timeout` elapsed first.
    #[error("the peer did not answer `{method}` within {} ms", after.as_millis())]
    TimedOut { method: String, after: Duration },
}

impl From<RequestFailure> for RpcError {
    fn from(failure: RequestFailure) -> Self {
        match failure {
            RequestFailure::Answered(e) => e,
            RequestFailure::Closed => RpcError::connection_closed(),
            RequestFailure::Cancelled => RpcError::cancelled(),
            RequestFailure::TimedOut { method, after } => RpcError::timed_out(&method, after),
        }
    }
}

/// Handle to one live connection: send to the peer, ask it things, learn when it
/// ends. Cheap to clone; every clone addresses the same connection.
#[derive(Clone)]
pub struct Peer {
    inner: Arc<Shared>,
}

struct Shared {
    id: u64,
    /// Serialized lines (without `\n`) for the writer task.
    queue: mpsc::Sender<String>,
    /// Capacity of `queue`, for the log line when it overflows.
    queue_len: usize,
    /// Cancelled exactly when the connection has ended (or is ending).
    closed: CancellationToken,
    /// Our outgoing requests still waiting for an answer, by id.
    pending: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    next_request: AtomicU64,
    request_timeout: Option<Duration>,
    /// A withdrawn request is announced with `$/cancel_request`.
    announce_withdrawals: bool,
}

impl fmt::Debug for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Peer")
            .field("id", &self.inner.id)
            .field("closed", &self.inner.closed.is_cancelled())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Peer {
    /// A peer whose outgoing lines go to `queue`; used by `serve_connection`,
    /// which owns the other end.
    /// `announce_withdrawals`: whether a withdrawn request is announced with
    /// `$/cancel_request` (see [`super::Options::announce_withdrawals`]).
    pub(crate) fn new(
        queue: mpsc::Sender<String>,
        queue_len: usize,
        request_timeout: Option<Duration>,
        announce_withdrawals: bool,
    ) -> Self {
        Self {
            inner: Arc::new(Shared {
                id: NEXT_PEER_ID.fetch_add(1, Ordering::Relaxed),
                queue,
                queue_len,
                closed: CancellationToken::new(),
                pending: Mutex::new(HashMap::new()),
                next_request: AtomicU64::new(1),
                request_timeout,
                announce_withdrawals,
            }),
        }
    }

    /// The connection's id, unique within this process (for logs and tables).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Sends a notification. Never waits: if the outgoing queue is full the peer
    /// is not reading, and the connection is closed instead (`Err(Closed)`).
    /// A `null` `params` is left out of the message.
    pub fn notify(&self, method: &str, params: serde_json::Value) -> Result<(), Closed> {
        let line = match message::call(None, method, &params) {
            Ok(line) => line,
            Err(e) => {
                // Unreachable for a Value; logged rather than sent half-formed.
                tracing::error!(
                    peer = self.id(),
                    method,
                    "cannot serialize notification: {e}"
                );
                return Ok(());
            }
        };
        self.send_line(line)
    }

    /// Sends a notification, waiting up to `stall` for room in the outgoing queue.
    /// For bursts the daemon makes itself (a `session/load` replay of a long
    /// history), where a full queue means "faster than the socket drains", not
    /// "the peer stopped reading". A peer still not reading after `stall` is
    /// disconnected as with [`Peer::notify`].
    pub async fn notify_paced(
        &self,
        method: &str,
        params: serde_json::Value,
        stall: std::time::Duration,
    ) -> Result<(), Closed> {
        if self.is_closed() {
            return Err(Closed);
        }
        let line = message::call(None, method, &params).map_err(|_| Closed)?;
        match self.inner.queue.send_timeout(line, stall).await {
            Ok(()) => Ok(()),
            Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                tracing::warn!(
                    peer = self.id(),
                    "peer stopped reading during a burst: disconnecting it"
                );
                self.close();
                Err(Closed)
            }
            Err(mpsc::error::SendTimeoutError::Closed(_)) => Err(Closed),
        }
    }

    /// Sends a request to the peer and waits for its answer.
    ///
    /// Resolves to the peer's result, or to its error object. If `cancel` fires or
    /// `Options::request_timeout` elapses first, the request is withdrawn and the
    /// peer is told with `$/cancel_request`; the result is then
    /// [`RpcError::cancelled`] or a timeout error (-32603). If the connection
    /// ends first, the error says so. Dropping the future withdraws the request
    /// the same way. As with [`Peer::notify`], a `null` `params` is left out.
    pub async fn request(
        &self,
        method: &str,
        params: serde_json::Value,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Value, RpcError> {
        self.call(method, params, cancel)
            .await
            .map_err(RpcError::from)
    }

    /// [`Peer::request`] for a caller that acts on why there is no result: the peer's
    /// error, or the connection's end, a cancel or the timeout, told apart.
    pub async fn call(
        &self,
        method: &str,
        params: serde_json::Value,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Value, RequestFailure> {
        let shared = &self.inner;
        let id = format!(
            "dsh-{}",
            shared.next_request.fetch_add(1, Ordering::Relaxed)
        );
        let line = message::call(Some(&id), method, &params).map_err(|e| {
            RequestFailure::Answered(RpcError::internal(format!("cannot serialize request: {e}")))
        })?;

        let (tx, rx) = oneshot::channel();
        lock(&shared.pending).insert(id.clone(), tx);
        // From here on the entry is withdrawn however this function ends: on
        // cancel, timeout, error or the future being dropped.
        let _withdraw = Withdraw {
            peer: self,
            id: &id,
        };
        self.send_line(line)
            .map_err(|Closed| RequestFailure::Closed)?;

        let timeout = async {
            match shared.request_timeout {
                Some(after) => tokio::time::sleep(after).await,
                None => std::future::pending().await,
            }
        };
        // Biased so that an answer that is already there wins, and a closed
        // connection is reported as such even though it also cancels the
        // request contexts that callers usually pass as `cancel`.
        tokio::select! {
            biased;
            // A dropped sender is the connection's end (`fail_pending`).
            answer = rx => match answer {
                Ok(answer) => answer.map_err(RequestFailure::Answered),
                Err(_) => Err(RequestFailure::Closed),
            },
            () = shared.closed.cancelled() => Err(RequestFailure::Closed),
            () = cancel.cancelled() => {
                tracing::debug!(peer = self.id(), id, method, "outgoing request cancelled");
                Err(RequestFailure::Cancelled)
            }
            () = timeout => {
                let after = shared.request_timeout.unwrap_or_default();
                tracing::warn!(peer = self.id(), id, method, "peer did not answer in time");
                Err(RequestFailure::TimedOut {
                    method: method.to_string(),
                    after,
                })
            }
        }
    }

    /// A token cancelled when the connection has ended. Cancelling the returned
    /// token does not end the connection; use [`Peer::close`] for that.
    pub fn closed(&self) -> CancellationToken {
        self.inner.closed.child_token()
    }

    /// Ends the connection from our side. Idempotent; `serve_connection` then
    /// winds it down as it would after EOF.
    pub fn close(&self) {
        self.inner.closed.cancel();
    }

    /// Ends the connection once everything queued before now is written (a last word
    /// to a peer, then the end): an empty line marks the place in the writer's queue.
    pub fn close_after_queued(&self) {
        if self.send_line(String::new()).is_err() {
            self.close();
        }
    }

    /// True once the connection has ended or is ending.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.is_cancelled()
    }

    /// Queues one serialized message for the writer task.
    pub(crate) fn send_line(&self, line: String) -> Result<(), Closed> {
        if self.is_closed() {
            return Err(Closed);
        }
        match self.inner.queue.try_send(line) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(
                    peer = self.id(),
                    queue = self.inner.queue_len,
                    "outgoing queue is full, so the peer is not reading: disconnecting it"
                );
                self.close();
                Err(Closed)
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Closed),
        }
    }

    /// The token itself (not a child), for the connection's own use: request
    /// contexts are its children, and the read and write loops watch it.
    pub(crate) fn closed_token(&self) -> &CancellationToken {
        &self.inner.closed
    }

    /// Delivers the peer's answer to the outgoing request `id`, if still waited
    /// for. An unknown id (never ours, or already withdrawn) is logged and ignored.
    pub(crate) fn resolve(&self, id: &str, answer: Answer) {
        match lock(&self.inner.pending).remove(id) {
            // The waiter may have gone in the meantime; nothing to do then.
            Some(waiter) => drop(waiter.send(answer)),
            // Normal after a withdrawal (the answer crossed our `$/cancel_request`),
            // so not worth a warning.
            None => tracing::debug!(
                peer = self.id(),
                id,
                "response to an unknown or withdrawn request id ignored"
            ),
        }
    }

    /// Fails every outgoing request still waiting; called once the connection
    /// has ended.
    pub(crate) fn fail_pending(&self) {
        // Dropping each sender tells its waiter the connection ended.
        drop(lock(&self.inner.pending).drain().collect::<Vec<_>>());
    }
}

/// Removes an outgoing request from the pending map when its caller stops
/// waiting; if it was still pending (no answer came), tells the peer with
/// `$/cancel_request` so it can stop working on it.
struct Withdraw<'a> {
    peer: &'a Peer,
    id: &'a str,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        let still_pending = lock(&self.peer.inner.pending).remove(self.id).is_some();
        if still_pending && self.peer.inner.announce_withdrawals && !self.peer.is_closed() {
            let params = serde_json::json!({ "requestId": self.id });
            // Best effort: if the queue refuses it, the connection is ending anyway.
            let _ = self.peer.notify("$/cancel_request", params);
        }
    }
}
