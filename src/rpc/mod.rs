//! The JSON-RPC connection layer: one editor connection, both directions.
//!
//! ACP is JSON-RPC 2.0 with one message per line, and both ends send requests on
//! the same stream. This module owns everything about that stream and nothing
//! about ACP itself: it frames lines, classifies messages, dispatches incoming
//! requests through the daemon's jsonrpsee [`Methods`](jsonrpsee::Methods),
//! hands notifications to a [`Service`], routes answers to our own outgoing
//! requests, and winds a connection down in one well-defined order.
//!
//! jsonrpsee is used only as a dispatcher (its `RpcModule` without any server):
//! it gives method registration, typed params with -32602 on mismatch and
//! -32601 for unknown methods. Framing, classification, notifications and the
//! agent-to-client direction are outside what it does for a custom transport, so
//! they live here.
//!
//! The shape of one connection (see `connection` for the details):
//!
//! * a read loop turns lines into messages; each request runs in its own task, so
//!   a long `session/prompt` never holds up the loop or other requests, and
//!   answers go out in whatever order they finish;
//! * a single writer task owns the output and drains a bounded queue; anyone
//!   who sends goes through [`Peer`];
//! * the end (EOF, an I/O error, [`Peer::close`], a peer that stops reading) is
//!   one path: mark closed, cancel requests, fail our pending requests, wait
//!   for request tasks, tell the service, return.

pub mod client;
mod codec;
mod connection;
mod error;
pub mod handover;
mod message;
mod peer;
pub mod socket;
pub mod stdio;

#[cfg(test)]
mod tests;

pub use connection::{Frozen, Resumed, serve_connection, serve_freezable};
pub use error::{
    Closed, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
    REQUEST_CANCELLED, RESOURCE_NOT_FOUND, RpcError,
};
pub use peer::{Peer, RequestFailure};

use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Per-request context, reachable from handlers through jsonrpsee `Extensions`
/// (`ext.get::<RequestContext>()`).
///
/// jsonrpsee hands a handler only its params and the module's extensions; the
/// connection inserts one of these into a per-request copy of the extensions so
/// that handlers can talk back to the peer and notice cancellation.
#[derive(Clone, Debug)]
pub struct RequestContext {
    /// The connection the request came in on.
    pub peer: Peer,
    /// Cancelled by a `$/cancel_request` naming this request, or when the
    /// connection ends. The handler decides what to answer then: -32800
    /// ([`RpcError::cancelled`]) or its normal result (a prompt answers
    /// `stopReason: cancelled`).
    pub cancel: CancellationToken,
    /// Notifications to send right after the answer (see [`RequestContext::notify_after`]).
    pub(crate) after: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl RequestContext {
    /// A context for `peer`'s request, cancelled by `cancel`.
    pub fn new(peer: Peer, cancel: CancellationToken) -> Self {
        Self {
            peer,
            cancel,
            after: Default::default(),
        }
    }

    /// Sends a notification right after this request's answer, on the same connection:
    /// for what a client can only place once it has the answer (updates about the
    /// session a `session/new` creates).
    pub fn notify_after(&self, method: &str, params: &serde_json::Value) {
        match message::call(None, method, params) {
            Ok(line) => self
                .after
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(line),
            Err(e) => tracing::error!(method, "cannot serialize notification: {e}"),
        }
    }
}

/// What the daemon plugs into a connection.
pub trait Service: Send + Sync + 'static {
    /// The request handlers. Called once per connection; the result is cloned
    /// per request (cheap: the callbacks are shared), so build the methods once
    /// and return a clone.
    fn methods(&self) -> jsonrpsee::Methods;

    /// The connection is open: `peer` sends on it. Called once, before any line is
    /// read, so a side that speaks first (the ssh executor's end of its helper
    /// channel, which has no incoming request to learn the peer from) can keep it.
    fn opened(&self, peer: &Peer) {
        let _ = peer;
    }

    /// A notification from the peer, other than `$/cancel_request` (which the
    /// connection handles). Called on the read loop, so it must not block:
    /// hand anything slow to a task.
    fn notification(&self, peer: &Peer, method: &str, params: Option<serde_json::Value>);

    /// The connection has ended and all of its request tasks have finished.
    /// Called exactly once per connection, last.
    fn closed(&self, peer: &Peer);

    /// The connection is being frozen ([`serve_freezable`]), nothing of it in flight:
    /// what the service must know to serve it again, given back to [`Service::resume`]
    /// (perhaps in the next program). [`Service::closed`] follows as for any end.
    fn freeze(&self, peer: &Peer) -> serde_json::Value {
        let _ = peer;
        serde_json::Value::Null
    }

    /// A frozen connection is served again as `peer`, with what [`Service::freeze`]
    /// said of it; runs to its end before the connection's first line is read.
    fn resume(
        &self,
        peer: &Peer,
        state: serde_json::Value,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        let _ = (peer, state);
        Box::pin(async {})
    }
}

/// Limits of one connection.
#[derive(Debug, Clone)]
pub struct Options {
    /// Longest accepted line in bytes, terminator excluded. A longer line is
    /// answered with -32600 and skipped, and the connection goes on.
    pub max_line_bytes: usize,
    /// Messages that may wait for the writer. A peer that lets this many pile up
    /// is not reading, and is disconnected. Values below 1 count as 1.
    pub outgoing_queue: usize,
    /// How long an outgoing request ([`Peer::request`]) waits for its answer;
    /// `None` waits until cancelled or the connection ends.
    pub request_timeout: Option<Duration>,
    /// Ends the connection when cancelled, as if the peer had closed (the server
    /// shutting down). The service's own list of connections reaches a peer only
    /// once it has made a request; this reaches every connection.
    pub stop: CancellationToken,
    /// A request we withdraw (cancelled, timed out, dropped) is announced to the peer
    /// with `$/cancel_request`, as ACP says. A hook server speaks plain JSON-RPC and
    /// was never sent one: its connection turns this off.
    pub announce_withdrawals: bool,
    /// Cancelled to take the connection out of service without ending it, for an
    /// upgrade of the daemon (see [`serve_freezable`]); [`serve_connection`] ends
    /// the connection instead.
    pub freeze: CancellationToken,
    /// Cancelled at the end of an upgrade's drain: every request still in flight on a
    /// frozen connection is cancelled (its handler's [`RequestContext::cancel`]), so no
    /// handler, however long, holds the hand-over.
    pub cancel_requests: CancellationToken,
}

impl Default for Options {
    /// 16 MiB lines (prompts with embedded context can be large), 4096 queued
    /// messages (a burst of streamed updates fits easily), no timeout (a
    /// permission request legitimately waits for a human), no stop but the peer's.
    fn default() -> Self {
        Self {
            max_line_bytes: 16 * 1024 * 1024,
            outgoing_queue: 4096,
            request_timeout: None,
            stop: CancellationToken::new(),
            announce_withdrawals: true,
            freeze: CancellationToken::new(),
            cancel_requests: CancellationToken::new(),
        }
    }
}
