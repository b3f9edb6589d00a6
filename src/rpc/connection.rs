//! One connection's life: the read loop, request tasks, the writer task, and the
//! way it all ends.
//!
//! Ordering at the end is the point of this file. Whatever ends the connection
//! (EOF, a read or write error, [`Peer::close`], a full outgoing queue, the
//! server's [`Options::stop`](super::Options)), the
//! teardown is the same and runs once: the closed token is cancelled (which
//! also cancels every request context, as they are its children, and stops the
//! writer), outgoing requests still pending fail, then we wait for every request
//! task to finish, and only then tell the service. So when
//! [`Service::closed`] runs, no handler of this connection is still running, and
//! when `serve_connection` returns, nothing of the connection is left.
//!
//! After the end no new line is written, not even answers that handlers produce
//! while winding down: a peer that has gone, or stopped reading, cannot take them,
//! and waiting to flush would let a stuck peer hold the connection open forever.
//! A line already being written is finished, for at most [`LINE_GRACE`], so a
//! peer that closed only its sending side never reads half a message.
//!
//! Request dispatch hands jsonrpsee the peer's method and params under an id of
//! our own, then puts the peer's id back on the answer. jsonrpsee only accepts
//! unsigned integer and string ids, while JSON-RPC allows any number; this way
//! every id is echoed exactly as it was written.

use super::codec::{Frame, LineCodec};
use super::error::RpcError;
use super::message::{self, Incoming};
use super::{Options, Peer, RequestContext, Service};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::Decoder;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How much the read buffer grows by before each read.
const READ_CHUNK: usize = 8 * 1024;
/// How long a line that was being written when the connection ended may take
/// to finish (see the module docs).
const LINE_GRACE: std::time::Duration = std::time::Duration::from_millis(200);
/// An idle read buffer larger than this (left over from one big message) is
/// released instead of being kept for the life of the connection.
const KEEP_BUFFER: usize = 1024 * 1024;

/// Serves one connection until EOF, an I/O error, or a disconnect; returns when
/// everything of it is settled (see the module docs for the order).
///
/// "Settled" includes every request handler having returned: handlers must end
/// soon after their [`RequestContext::cancel`] fires, as this waits for them.
/// jsonrpsee subscriptions are not supported (their notifications are dropped).
pub async fn serve_connection<R, W>(
    reader: R,
    writer: W,
    service: Arc<dyn Service>,
    options: Options,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // Never frozen: `options.freeze` of a connection served this way is not
    // meant to be cancelled, and if it were, the connection just ends.
    let _ = serve_freezable(reader, writer, service, options, None).await;
}

/// What a connection was when [`Options::freeze`] took it out of service: its two
/// ends, the bytes read from the peer but not yet handled, and what the service
/// said about it ([`Service::freeze`]). Served again by [`serve_freezable`] with
/// these (in this process, or in the next program this one executes), the peer
/// notices nothing: every request it sent is answered once.
pub struct Frozen<R, W> {
    pub reader: R,
    pub writer: W,
    /// Whole requests that arrived after the freeze (deferred, not handled), then
    /// the start of a line not yet complete.
    pub unread: Vec<u8>,
    pub state: serde_json::Value,
}

/// What a connection served again starts from (see [`Frozen`]).
pub struct Resumed {
    pub unread: Vec<u8>,
    pub state: serde_json::Value,
}

/// [`serve_connection`], which can also freeze the connection and resume a frozen one.
///
/// Freezing (`options.freeze` cancelled) is the daemon's upgrade: from then on, a
/// request that arrives is kept unread instead of handled, while answers to our own
/// requests (a permission question) and notifications (`session/cancel`) are still
/// taken, so the requests in flight can finish. Once none is left, the queued output
/// is written and flushed, and this returns the connection as a [`Frozen`] instead of
/// ending it: the peer sees no end. The teardown still runs (the service is told the
/// connection closed), so nothing of this side of it is left.
///
/// With `resumed`, [`Service::resume`] runs before the first line is read, and the
/// unread bytes are handled first.
pub async fn serve_freezable<R, W>(
    mut reader: R,
    writer: W,
    service: Arc<dyn Service>,
    options: Options,
    resumed: Option<Resumed>,
) -> Option<Frozen<R, W>>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let queue_len = options.outgoing_queue.max(1);
    let (tx, rx) = mpsc::channel(queue_len);
    let peer = Peer::new(
        tx,
        queue_len,
        options.request_timeout,
        options.announce_withdrawals,
    );
    tracing::debug!(peer = peer.id(), "connection opened");
    let release = CancellationToken::new();
    let writer_task = tokio::spawn(write_loop(writer, rx, peer.clone(), release.clone()));
    service.opened(&peer);
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    if let Some(resumed) = resumed {
        service.resume(&peer, resumed.state).await;
        buf.extend_from_slice(&resumed.unread);
    }

    let conn = Connection {
        peer: peer.clone(),
        service: service.clone(),
        methods: service.methods(),
        in_flight: Arc::new(Mutex::new(HashMap::new())),
        next_seq: AtomicU64::new(0),
        tasks: TaskTracker::new(),
        freeze: options.freeze.clone(),
        cancel_requests: options.cancel_requests.clone(),
        deferred: Mutex::new(Vec::new()),
    };
    let ended = tokio::select! {
        ended = conn.read_loop(&mut reader, buf, options.max_line_bytes) => ended,
        () = options.stop.cancelled() => ReadEnd::Closed,
    };
    // A frozen connection's writer first writes what is queued and gives itself back;
    // only then may the teardown below close the peer (which drops queued lines).
    let (frozen, mut writer_task) = match ended {
        ReadEnd::Frozen(rest) => {
            let mut unread = std::mem::take(&mut *lock(&conn.deferred));
            unread.extend_from_slice(&rest);
            let state = service.freeze(&peer);
            release.cancel();
            (Some((unread, state)), Some(writer_task))
        }
        ReadEnd::Closed => (None, Some(writer_task)),
    };
    let mut writer = None;
    if frozen.is_some()
        && let Some(task) = writer_task.take()
    {
        writer = task.await.ok().flatten();
    }

    // Teardown; see the module docs.
    peer.close();
    peer.fail_pending();
    conn.tasks.close();
    conn.tasks.wait().await;
    if let Some(task) = writer_task
        && let Err(e) = task.await
    {
        tracing::error!(peer = peer.id(), "writer task failed: {e}");
    }
    service.closed(&peer);
    tracing::debug!(
        peer = peer.id(),
        frozen = frozen.is_some(),
        "connection closed"
    );
    let ((unread, state), writer) = (frozen?, writer?);
    Some(Frozen {
        reader,
        writer,
        unread,
        state,
    })
}

/// How the read loop ended.
enum ReadEnd {
    /// EOF, an error, or the connection closed: the ordinary end.
    Closed,
    /// Frozen with nothing in flight: these bytes were read but not handled.
    Frozen(BytesMut),
}

/// A request being handled: the peer's id in canonical form (for
/// `$/cancel_request`) and the token its handler watches.
struct InFlight {
    key: String,
    cancel: CancellationToken,
}

/// Keyed by a sequence number of ours, not by the peer's id: a peer may reuse an
/// id while an earlier request with it still runs, and each must keep its own
/// entry (a cancel naming that id then cancels all of them).
type InFlightMap = Arc<Mutex<HashMap<u64, InFlight>>>;

struct Connection {
    peer: Peer,
    service: Arc<dyn Service>,
    methods: jsonrpsee::Methods,
    in_flight: InFlightMap,
    next_seq: AtomicU64,
    tasks: TaskTracker,
    /// [`Options::freeze`].
    freeze: CancellationToken,
    /// [`Options::cancel_requests`].
    cancel_requests: CancellationToken,
    /// Request lines that arrived after the freeze, each with its newline.
    deferred: Mutex<Vec<u8>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The canonical text of an id, so that `7`, `7 ` and `"\u0037"`-style
/// spellings of the same JSON value compare equal.
fn id_key(raw: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(raw)
        .ok()
        .map(|v| v.to_string())
}

impl Connection {
    /// Reads and handles messages until EOF, a read error, or the connection
    /// being closed from elsewhere; or, once frozen, until no request is in flight.
    async fn read_loop<R: AsyncRead + Unpin>(
        &self,
        reader: &mut R,
        mut buf: BytesMut,
        max_line_bytes: usize,
    ) -> ReadEnd {
        let closed = self.peer.closed_token();
        let mut codec = LineCodec::new(max_line_bytes);
        let mut eof = false;
        let mut frozen = false;
        let mut cancelled_all = false;
        // Requests that arrive after the freeze wait unread, up to this many bytes; then
        // the rest waits in the kernel's buffer (handed over with the descriptor), so
        // an editor that writes on cannot grow the daemon's memory.
        let deferred_limit = max_line_bytes.saturating_add(READ_CHUNK);
        loop {
            if closed.is_cancelled() {
                return ReadEnd::Closed;
            }
            let next = if eof {
                codec.decode_eof(&mut buf)
            } else {
                codec.decode(&mut buf)
            };
            match next {
                Ok(Some(frame)) => {
                    self.on_frame(frame, max_line_bytes);
                    continue;
                }
                Ok(None) if eof => {
                    tracing::debug!(peer = self.peer.id(), "peer closed its side");
                    return ReadEnd::Closed;
                }
                Ok(None) => {}
                // Our decoder has no error of its own; kept total all the same.
                Err(e) => {
                    tracing::warn!(peer = self.peer.id(), "framing failed: {e}");
                    return ReadEnd::Closed;
                }
            }
            // Checked after `reserve`, which may take back the whole allocation a
            // large frame was split from once that frame is gone.
            buf.reserve(READ_CHUNK);
            if buf.is_empty() && buf.capacity() > KEEP_BUFFER {
                buf = BytesMut::with_capacity(READ_CHUNK);
            }
            // Every whole line in `buf` was handled (or deferred) above: what is left is
            // the start of one, which the next server of the connection reads first.
            tokio::select! {
                biased;
                () = closed.cancelled() => return ReadEnd::Closed,
                () = self.freeze.cancelled(), if !frozen => {
                    frozen = true;
                    // From here no request starts, so the tracker's wait below ends
                    // once those in flight have.
                    self.tasks.close();
                }
                () = self.tasks.wait(), if frozen => return ReadEnd::Frozen(buf),
                () = self.cancel_requests.cancelled(), if !cancelled_all => {
                    cancelled_all = true;
                    for request in lock(&self.in_flight).values() {
                        request.cancel.cancel();
                    }
                }
                read = reader.read_buf(&mut buf),
                    if !(frozen && lock(&self.deferred).len() >= deferred_limit) => match read {
                    Ok(0) => eof = true,
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(peer = self.peer.id(), "read failed: {e}");
                        return ReadEnd::Closed;
                    }
                },
            }
        }
    }

    fn on_frame(&self, frame: Frame, max_line_bytes: usize) {
        let line = match frame {
            Frame::TooLong => {
                tracing::warn!(
                    peer = self.peer.id(),
                    max_line_bytes,
                    "over-long line skipped"
                );
                let error = RpcError::invalid_request(format!(
                    "message too long: the line exceeded {max_line_bytes} bytes"
                ));
                self.reply_error(None, &error);
                return;
            }
            Frame::Line(line) => line,
        };
        let Ok(text) = std::str::from_utf8(&line) else {
            self.reply_error(
                None,
                &RpcError::parse_error("parse error: the line is not valid UTF-8"),
            );
            return;
        };
        if text.trim().is_empty() {
            return;
        }
        match message::classify(text) {
            // Checked per line, not when the loop sees the token: a request read in the
            // same chunk as an answer the freeze let out is still kept for later.
            Incoming::Request { .. } if self.freeze.is_cancelled() => {
                let mut deferred = lock(&self.deferred);
                deferred.extend_from_slice(&line);
                deferred.push(b'\n');
            }
            Incoming::Request { id, method, params } => self.on_request(id, &method, params),
            Incoming::Notification { method, params } => self.on_notification(&method, params),
            Incoming::Response { id, outcome } => self.on_response(id, outcome),
            Incoming::Invalid { id, error } => {
                tracing::debug!(peer = self.peer.id(), error = %error, "invalid message");
                self.reply_error(id, &error);
            }
        }
    }

    /// Sends an error answer; if the connection has ended there is no one to
    /// tell.
    fn reply_error(&self, id: Option<&RawValue>, error: &RpcError) {
        let _ = self.peer.send_line(message::error_response(id, error));
    }

    fn on_request(&self, id: &RawValue, method: &str, params: Option<&RawValue>) {
        let dispatch = match message::dispatch_request(method, params) {
            Ok(line) => line,
            Err(e) => {
                self.reply_error(
                    Some(id),
                    &RpcError::internal(format!("cannot dispatch: {e}")),
                );
                return;
            }
        };
        // Registered before the task starts, so a `$/cancel_request` on the very
        // next line always finds it.
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let cancel = self.peer.closed_token().child_token();
        let key = id_key(id.get()).unwrap_or_default();
        lock(&self.in_flight).insert(
            seq,
            InFlight {
                key,
                cancel: cancel.clone(),
            },
        );

        let mut methods = self.methods.clone();
        let context = RequestContext::new(self.peer.clone(), cancel);
        let after = context.after.clone();
        methods.extensions_mut().insert(context);
        let peer = self.peer.clone();
        let in_flight = self.in_flight.clone();
        let id = id.to_owned();
        let method = method.to_string();
        self.tasks.spawn(async move {
            // A panic in the handler is contained: it becomes an internal error
            // for this request, and this task still does its bookkeeping. Caught
            // here rather than in a task of its own, which cost a spawn and a
            // wake-up per request (BENCHMARKS.md, B1 stage by stage).
            let outcome = CatchUnwind(Box::pin(async move {
                methods
                    .raw_json_request(&dispatch, 1)
                    .await
                    .map(|(response, _subscriptions)| response)
            }))
            .await;
            lock(&in_flight).remove(&seq);
            let line = match outcome {
                Ok(Ok(response)) => message::readdress_response(&id, response.get())
                    .unwrap_or_else(|e| {
                        tracing::error!(
                            peer = peer.id(),
                            method,
                            "unreadable dispatch response: {e}"
                        );
                        message::error_response(
                            Some(&id),
                            &RpcError::internal("malformed response"),
                        )
                    }),
                Ok(Err(e)) => {
                    tracing::error!(
                        peer = peer.id(),
                        method,
                        "jsonrpsee refused the request: {e}"
                    );
                    message::error_response(Some(&id), &RpcError::internal("cannot dispatch"))
                }
                Err(_panic) => {
                    tracing::error!(peer = peer.id(), method, "request handler panicked");
                    message::error_response(
                        Some(&id),
                        &RpcError::internal(format!("the handler of `{method}` failed")),
                    )
                }
            };
            if peer.send_line(line).is_err() {
                tracing::debug!(
                    peer = peer.id(),
                    method,
                    "answer dropped: connection closed"
                );
            }
            let after = std::mem::take(&mut *lock(&after));
            for line in after {
                if peer.send_line(line).is_err() {
                    break;
                }
            }
        });
    }

    fn on_notification(&self, method: &str, params: Option<&RawValue>) {
        let params = match params.map(|p| serde_json::from_str(p.get())).transpose() {
            Ok(params) => params,
            Err(e) => {
                // Valid JSON that serde_json will not build a Value from (nested
                // too deeply); a notification gets no answer, so just say so.
                tracing::warn!(
                    peer = self.peer.id(),
                    method,
                    "notification params dropped: {e}"
                );
                return;
            }
        };
        if method == "$/cancel_request" {
            self.cancel_request(params);
            return;
        }
        self.service.notification(&self.peer, method, params);
    }

    /// `$/cancel_request {requestId}`: cancel the context of every in-flight
    /// request with that id. Unknown ids (already answered, never sent) are
    /// ignored, as the request may simply have finished first.
    fn cancel_request(&self, params: Option<serde_json::Value>) {
        let Some(id) = params.as_ref().and_then(|p| p.get("requestId")) else {
            tracing::debug!(
                peer = self.peer.id(),
                "$/cancel_request without requestId ignored"
            );
            return;
        };
        let key = id.to_string();
        let mut found = false;
        for request in lock(&self.in_flight).values() {
            if request.key == key {
                request.cancel.cancel();
                found = true;
            }
        }
        tracing::debug!(
            peer = self.peer.id(),
            request = key,
            found,
            "$/cancel_request"
        );
    }

    fn on_response(&self, id: &RawValue, outcome: Result<&RawValue, &RawValue>) {
        // Our ids are all strings; any other id cannot be an answer of ours.
        let Ok(id) = serde_json::from_str::<String>(id.get()) else {
            match outcome {
                // Typically `id: null`: the peer could not read something we
                // sent, which is worth seeing in the log.
                Err(error) => tracing::warn!(
                    peer = self.peer.id(),
                    id = id.get(),
                    error = error.get(),
                    "the peer reported an error not tied to one of our requests"
                ),
                Ok(_) => tracing::debug!(
                    peer = self.peer.id(),
                    id = id.get(),
                    "response with a foreign id ignored"
                ),
            }
            return;
        };
        let answer = match outcome {
            Ok(result) => serde_json::from_str(result.get())
                .map_err(|e| RpcError::internal(format!("unreadable result from the peer: {e}"))),
            Err(error) => Err(
                serde_json::from_str::<RpcError>(error.get()).unwrap_or_else(|e| {
                    RpcError::internal(format!("unreadable error from the peer: {e}"))
                }),
            ),
        };
        self.peer.resolve(&id, answer);
    }
}

/// A future polled under `catch_unwind`: `Err` with the panic's payload if a poll
/// panicked (the future is not polled again after that).
struct CatchUnwind<F>(std::pin::Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn std::any::Any + Send>>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let future = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| future.poll(cx))) {
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Ok(std::task::Poll::Ready(output)) => std::task::Poll::Ready(Ok(output)),
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        }
    }
}

/// Owns the output: writes queued lines, flushing whenever the queue runs dry,
/// until the connection ends. A write error ends the connection. Once `release` is
/// cancelled (a frozen connection), it writes what is queued, flushes, and gives the
/// writer back.
async fn write_loop<W: AsyncWrite + Unpin>(
    writer: W,
    mut queue: mpsc::Receiver<String>,
    peer: Peer,
    release: CancellationToken,
) -> Option<W> {
    let closed = peer.closed_token().clone();
    let mut out = BufWriter::new(writer);
    loop {
        // Biased: once the connection has ended, queued lines are dropped (see
        // the module docs).
        let first = tokio::select! {
            biased;
            () = release.cancelled() => {
                let mut batch = Vec::new();
                while let Ok(line) = queue.try_recv() {
                    batch.push(line);
                }
                for line in batch.into_iter().filter(|l| !l.is_empty()) {
                    if out.write_all(line.as_bytes()).await.is_err()
                        || out.write_all(b"\n").await.is_err()
                    {
                        return None;
                    }
                }
                return out.flush().await.ok().map(|()| out.into_inner());
            }
            () = closed.cancelled() => break,
            line = queue.recv() => match line {
                Some(line) => line,
                None => break,
            },
        };
        // A batch in progress when the connection ends stops after its current
        // line, which gets LINE_GRACE to reach the peer.
        let written = tokio::select! {
            written = write_batch(&mut out, first, &mut queue, &closed) => written,
            () = async {
                closed.cancelled().await;
                tokio::time::sleep(LINE_GRACE).await;
            } => break,
        };
        match written {
            Ok(false) => {}
            // [`Peer::close_after_queued`]'s mark: everything before it is written.
            Ok(true) => {
                peer.close();
                break;
            }
            Err(e) => {
                tracing::warn!(peer = peer.id(), "write failed: {e}");
                peer.close();
                break;
            }
        }
    }
    None
}

/// Writes `first` and whatever else is already queued (until the connection
/// ends), then flushes once. True when it met [`Peer::close_after_queued`]'s mark (an
/// empty line, which no message is): the connection is to end now.
async fn write_batch<W: AsyncWrite + Unpin>(
    out: &mut BufWriter<W>,
    first: String,
    queue: &mut mpsc::Receiver<String>,
    closed: &CancellationToken,
) -> std::io::Result<bool> {
    let mut next = Some(first);
    while let Some(line) = next {
        if line.is_empty() {
            out.flush().await?;
            return Ok(true);
        }
        out.write_all(line.as_bytes()).await?;
        out.write_all(b"\n").await?;
        next = if closed.is_cancelled() {
            None
        } else {
            queue.try_recv().ok()
        };
    }
    out.flush().await.map(|()| false)
}
