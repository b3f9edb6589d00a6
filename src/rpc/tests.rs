//! Connection tests over an in-memory duplex pipe, with a small service whose
//! methods cover the shapes dsh uses: a quick answer, typed params, a slow call
//! that waits for its cancellation, a call that asks the client something, a
//! burst of notifications and a handler that panics.
//!
//! Tests wait for messages and events, never for time; a generous timeout only
//! turns a hang into a failure.

use super::*;
use jsonrpsee::types::Params;
use jsonrpsee::{Extensions, Methods, RpcModule};
use serde_json::{Value, json};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{
    AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf,
    duplex, split,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("test step timed out")
}

/// What handlers report back to the test.
struct Probe {
    /// Outcomes of the `ask` method's outgoing request.
    asked: mpsc::UnboundedSender<Result<Value, RpcError>>,
    /// Outcomes of `flood`: how many notifications went out before one failed.
    flooded: mpsc::UnboundedSender<usize>,
}

struct TestService {
    methods: Methods,
    notes: Mutex<mpsc::UnboundedSender<(String, Option<Value>)>>,
    closed: AtomicUsize,
    closed_peer: Mutex<Option<Peer>>,
}

impl Service for TestService {
    fn methods(&self) -> Methods {
        self.methods.clone()
    }

    fn notification(&self, _peer: &Peer, method: &str, params: Option<Value>) {
        let _ = self
            .notes
            .lock()
            .unwrap()
            .send((method.to_string(), params));
    }

    fn closed(&self, peer: &Peer) {
        self.closed.fetch_add(1, Ordering::SeqCst);
        *self.closed_peer.lock().unwrap() = Some(peer.clone());
    }
}

fn context(ext: &Extensions) -> RequestContext {
    ext.get::<RequestContext>()
        .cloned()
        .expect("the connection puts a RequestContext into every request")
}

#[derive(serde::Deserialize)]
struct Typed {
    n: u32,
}

fn module(probe: Probe) -> Methods {
    let mut m = RpcModule::new(probe);
    m.register_method("echo", |params: Params, _, _| {
        params.parse::<Value>().map_err(RpcError::from_params)
    })
    .unwrap();
    m.register_method("typed", |params: Params, _, _| {
        params
            .parse::<Typed>()
            .map(|t| json!({ "n": t.n }))
            .map_err(RpcError::from_params)
    })
    .unwrap();
    m.register_async_method("slow", |_, _, ext: Extensions| async move {
        context(&ext).cancel.cancelled().await;
        Err::<Value, _>(RpcError::cancelled())
    })
    .unwrap();
    m.register_async_method("ask", |params, probe, ext: Extensions| async move {
        let ctx = context(&ext);
        let question: Value = params.parse().map_err(RpcError::from_params)?;
        let answer = ctx
            .peer
            .request("client/question", question, &ctx.cancel)
            .await;
        let _ = probe.asked.send(answer.clone());
        answer
    })
    .unwrap();
    m.register_async_method("flood", |_, probe, ext: Extensions| async move {
        let ctx = context(&ext);
        let mut sent = 0;
        // Yielding lets the writer run between messages, so what fills the
        // queue is a peer that does not read, not a burst the writer never saw.
        while ctx.peer.notify("note", json!({ "n": sent })).is_ok() {
            sent += 1;
            assert!(sent < 100_000, "the queue never filled");
            tokio::task::yield_now().await;
        }
        let _ = probe.flooded.send(sent);
        Ok::<_, RpcError>(sent)
    })
    .unwrap();
    m.register_method("bye", |_, _, ext: &Extensions| {
        context(ext).peer.close();
        "bye"
    })
    .unwrap();
    m.register_method("panic", |_, _, _| -> Value { panic!("handler bug") })
        .unwrap();
    m.into()
}

impl RpcError {
    /// jsonrpsee's params error as an RpcError (tests only; the daemon's
    /// handlers will have their own mapping).
    fn from_params(e: jsonrpsee::types::ErrorObjectOwned) -> Self {
        RpcError::invalid_params(e.data().map(|d| d.get().to_string()).unwrap_or_default())
    }
}

/// The test's side of a connection.
struct Client {
    reader: BufReader<ReadHalf<DuplexStream>>,
    writer: WriteHalf<DuplexStream>,
}

impl Client {
    async fn send_raw(&mut self, bytes: &[u8]) {
        within(self.writer.write_all(bytes)).await.unwrap();
    }

    async fn send(&mut self, line: &str) {
        self.send_raw(format!("{line}\n").as_bytes()).await;
    }

    async fn send_json(&mut self, v: Value) {
        self.send(&v.to_string()).await;
    }

    /// The next line from the server, as text.
    async fn recv_line(&mut self) -> String {
        let mut line = String::new();
        let n = within(self.reader.read_line(&mut line)).await.unwrap();
        assert!(n > 0, "server closed the connection");
        assert!(line.ends_with('\n'));
        line.trim_end_matches('\n').to_string()
    }

    async fn recv(&mut self) -> Value {
        let line = self.recv_line().await;
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}"))
    }

    async fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send_json(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.recv().await
    }
}

struct Harness {
    client: Client,
    service: Arc<TestService>,
    notes: mpsc::UnboundedReceiver<(String, Option<Value>)>,
    asked: mpsc::UnboundedReceiver<Result<Value, RpcError>>,
    flooded: mpsc::UnboundedReceiver<usize>,
    server: JoinHandle<()>,
}

/// A probed service and a duplex pipe: the test's client on one end, the server's two
/// halves on the other, for the caller to serve as it means to.
struct Parts {
    harness_client: Client,
    service: Arc<TestService>,
    notes: mpsc::UnboundedReceiver<(String, Option<Value>)>,
    asked: mpsc::UnboundedReceiver<Result<Value, RpcError>>,
    flooded: mpsc::UnboundedReceiver<usize>,
    server_read: ReadHalf<DuplexStream>,
    server_write: WriteHalf<DuplexStream>,
}

fn parts(pipe_bytes: usize) -> Parts {
    let (asked_tx, asked) = mpsc::unbounded_channel();
    let (flooded_tx, flooded) = mpsc::unbounded_channel();
    let (notes_tx, notes) = mpsc::unbounded_channel();
    let service = Arc::new(TestService {
        methods: module(Probe {
            asked: asked_tx,
            flooded: flooded_tx,
        }),
        notes: Mutex::new(notes_tx),
        closed: AtomicUsize::new(0),
        closed_peer: Mutex::new(None),
    });
    let (client_end, server_end) = duplex(pipe_bytes);
    let (server_read, server_write) = split(server_end);
    let (client_read, client_write) = split(client_end);
    Parts {
        harness_client: Client {
            reader: BufReader::new(client_read),
            writer: client_write,
        },
        service,
        notes,
        asked,
        flooded,
        server_read,
        server_write,
    }
}

fn start(options: Options, pipe_bytes: usize) -> Harness {
    let p = parts(pipe_bytes);
    let server = tokio::spawn(serve_connection(
        p.server_read,
        p.server_write,
        p.service.clone(),
        options,
    ));
    Harness {
        client: p.harness_client,
        service: p.service,
        notes: p.notes,
        asked: p.asked,
        flooded: p.flooded,
        server,
    }
}

fn start_default() -> Harness {
    start(Options::default(), 64 * 1024)
}

impl Harness {
    /// Waits for `serve_connection` to return and checks the service heard of
    /// the end exactly once.
    async fn finished(&mut self) -> Arc<TestService> {
        within(&mut self.server).await.unwrap();
        assert_eq!(self.service.closed.load(Ordering::SeqCst), 1);
        self.service.clone()
    }
}

fn error_code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {v}"))
}

#[tokio::test]
async fn answers_with_string_integer_negative_and_null_ids_echoed_exactly() {
    let mut h = start_default();
    let c = &mut h.client;

    let r = c.request(json!("abc-1"), "echo", json!({"x": 1})).await;
    assert_eq!(
        r,
        json!({"jsonrpc": "2.0", "id": "abc-1", "result": {"x": 1}})
    );
    let r = c.request(json!(7), "echo", json!(["a"])).await;
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": 7, "result": ["a"]}));

    // Forms jsonrpsee would not accept on its own come back byte for byte.
    c.send(r#"{"jsonrpc":"2.0","id":-3,"method":"echo","params":[]}"#)
        .await;
    assert_eq!(
        c.recv_line().await,
        r#"{"jsonrpc":"2.0","id":-3,"result":[]}"#
    );
    c.send(r#"{"jsonrpc":"2.0","id":"a\"b","method":"echo","params":{}}"#)
        .await;
    assert_eq!(
        c.recv_line().await,
        r#"{"jsonrpc":"2.0","id":"a\"b","result":{}}"#
    );
    let r = c.request(Value::Null, "echo", json!({})).await;
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": null, "result": {}}));
}

#[tokio::test]
async fn unknown_methods_including_extensions_are_not_found() {
    let mut h = start_default();
    for method in ["nope", "_dsh/nope", "$/cancel_request"] {
        let r = h.client.request(json!(1), method, json!({})).await;
        assert_eq!(error_code(&r), METHOD_NOT_FOUND as i64, "{method}: {r}");
        assert_eq!(r["id"], json!(1));
    }
}

#[tokio::test]
async fn wrong_param_types_are_invalid_params() {
    let mut h = start_default();
    let r = h.client.request(json!(2), "typed", json!({"n": "x"})).await;
    assert_eq!(error_code(&r), INVALID_PARAMS as i64, "{r}");
    let r = h.client.request(json!(3), "typed", json!({"n": 5})).await;
    assert_eq!(r["result"], json!({"n": 5}));
}

#[tokio::test]
async fn malformed_json_gets_a_parse_error_and_the_connection_goes_on() {
    let mut h = start_default();
    let c = &mut h.client;
    c.send(r#"{"jsonrpc":"2.0","id":1,"method":"#).await;
    let r = c.recv().await;
    assert_eq!(error_code(&r), PARSE_ERROR as i64);
    assert_eq!(r["id"], Value::Null);
    let r = c.request(json!(2), "echo", json!({})).await;
    assert_eq!(r["id"], json!(2));
    assert_eq!(r["result"], json!({}));
}

#[tokio::test]
async fn invalid_utf8_gets_a_parse_error_and_the_connection_goes_on() {
    let mut h = start_default();
    let c = &mut h.client;
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":\"\xff\xfe\"}\n")
        .await;
    let r = c.recv().await;
    assert_eq!(error_code(&r), PARSE_ERROR as i64);
    assert_eq!(r["id"], Value::Null);
    assert!(r["error"]["message"].as_str().unwrap().contains("UTF-8"));
    // Blank lines and CRLF endings are fine.
    c.send_raw(b"\n\r\n").await;
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"echo\",\"params\":[]}\r\n")
        .await;
    assert_eq!(c.recv().await["id"], json!(2));
}

#[tokio::test]
async fn a_20_mib_line_is_refused_and_the_next_line_works() {
    let mut h = start_default();
    let c = &mut h.client;
    let limit = Options::default().max_line_bytes;
    // Written in pieces so the test never holds the whole line; the server
    // keeps at most the limit of it.
    c.send_raw(br#"{"jsonrpc":"2.0","id":1,"method":"echo","params":[""#)
        .await;
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..(20 * 1024 * 1024 / chunk.len()) {
        c.send_raw(&chunk).await;
    }
    c.send_raw(b"\"]}\n").await;
    c.send(r#"{"jsonrpc":"2.0","id":2,"method":"echo","params":["after"]}"#)
        .await;

    let r = c.recv().await;
    assert_eq!(error_code(&r), INVALID_REQUEST as i64);
    assert_eq!(r["id"], Value::Null);
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains(&limit.to_string()), "{message}");
    let r = c.recv().await;
    assert_eq!(r["id"], json!(2));
    assert_eq!(r["result"], json!(["after"]));
}

#[tokio::test]
async fn batches_and_other_versions_are_invalid_requests() {
    let mut h = start_default();
    let c = &mut h.client;

    c.send(r#"[{"jsonrpc":"2.0","id":1,"method":"echo"}]"#)
        .await;
    let r = c.recv().await;
    assert_eq!(error_code(&r), INVALID_REQUEST as i64);
    assert_eq!(r["id"], Value::Null);
    assert!(r["error"]["message"].as_str().unwrap().contains("batch"));

    c.send(r#"{"jsonrpc":"1.0","id":4,"method":"echo","params":[]}"#)
        .await;
    let r = c.recv().await;
    assert_eq!(error_code(&r), INVALID_REQUEST as i64);
    assert_eq!(r["id"], json!(4));

    c.send(r#"{"id":"x","method":"echo","params":[]}"#).await;
    let r = c.recv().await;
    assert_eq!(error_code(&r), INVALID_REQUEST as i64);
    assert_eq!(r["id"], json!("x"));

    for other in [
        "42",
        r#"{"jsonrpc":"2.0"}"#,
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"echo"}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":7}"#,
    ] {
        c.send(other).await;
        let r = c.recv().await;
        assert_eq!(error_code(&r), INVALID_REQUEST as i64, "{other}: {r}");
    }
    // Still serving.
    assert_eq!(c.request(json!(9), "echo", json!([])).await["id"], json!(9));
}

#[tokio::test]
async fn notifications_go_to_the_service() {
    let mut h = start_default();
    h.client
        .send(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}"#)
        .await;
    h.client
        .send(r#"{"jsonrpc":"2.0","method":"_x/ping"}"#)
        .await;
    // An unknown id in a cancel is ignored, and goes nowhere else.
    h.client
        .send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":99}}"#)
        .await;
    // A last line without a newline still counts.
    h.client
        .send_raw(br#"{"jsonrpc":"2.0","method":"last","params":[1]}"#)
        .await;
    h.client.writer.shutdown().await.unwrap();

    let note = within(h.notes.recv()).await.unwrap();
    assert_eq!(
        note,
        ("session/cancel".into(), Some(json!({"sessionId": "s1"})))
    );
    let note = within(h.notes.recv()).await.unwrap();
    assert_eq!(note, ("_x/ping".into(), None));
    let note = within(h.notes.recv()).await.unwrap();
    assert_eq!(note, ("last".into(), Some(json!([1]))));
    h.finished().await;
    // Notifications get no answer: the server wrote nothing at all.
    let mut rest = String::new();
    within(tokio::io::AsyncReadExt::read_to_string(
        &mut h.client.reader,
        &mut rest,
    ))
    .await
    .unwrap();
    assert_eq!(rest, "");
}

#[tokio::test]
async fn cancel_request_cancels_the_named_request_and_others_answer_out_of_order() {
    let mut h = start_default();
    let c = &mut h.client;
    c.send(r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#).await;
    c.send(r#"{"jsonrpc":"2.0","id":"one","method":"slow"}"#)
        .await;
    // The later request is answered while the earlier ones still run.
    let r = c.request(json!(2), "echo", json!(["quick"])).await;
    assert_eq!(r["id"], json!(2));

    c.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"one"}}"#)
        .await;
    let r = c.recv().await;
    assert_eq!(r["id"], json!("one"));
    assert_eq!(error_code(&r), REQUEST_CANCELLED as i64);

    c.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}"#)
        .await;
    let r = c.recv().await;
    assert_eq!(r["id"], json!(1));
    assert_eq!(error_code(&r), REQUEST_CANCELLED as i64);
}

/// Reads the outgoing request the `ask` method sends, checks it, returns its id.
async fn expect_question(c: &mut Client, question: &Value) -> Value {
    let q = c.recv().await;
    assert_eq!(q["jsonrpc"], json!("2.0"));
    assert_eq!(q["method"], json!("client/question"));
    assert_eq!(&q["params"], question);
    assert!(q["id"].as_str().unwrap().starts_with("dsh-"), "{q}");
    q["id"].clone()
}

#[tokio::test]
async fn outgoing_requests_are_answered_by_id() {
    let mut h = start_default();
    let c = &mut h.client;
    c.send(r#"{"jsonrpc":"2.0","id":3,"method":"ask","params":{"q":"first"}}"#)
        .await;
    let first = expect_question(c, &json!({"q": "first"})).await;
    c.send(r#"{"jsonrpc":"2.0","id":4,"method":"ask","params":{"q":"second"}}"#)
        .await;
    let second = expect_question(c, &json!({"q": "second"})).await;
    assert_ne!(first, second);

    // Answers to ids we never used are ignored.
    c.send(r#"{"jsonrpc":"2.0","id":"dsh-999","result":1}"#)
        .await;
    c.send(r#"{"jsonrpc":"2.0","id":12,"result":1}"#).await;
    // Answered in the other order; each reaches its own waiter.
    c.send_json(json!({"jsonrpc": "2.0", "id": second, "error": {"code": -32042, "message": "no", "data": [1]}}))
        .await;
    let r = c.recv().await;
    assert_eq!(r["id"], json!(4));
    assert_eq!(
        r["error"],
        json!({"code": -32042, "message": "no", "data": [1]})
    );
    c.send_json(json!({"jsonrpc": "2.0", "id": first, "result": {"a": 42}}))
        .await;
    let r = c.recv().await;
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": 3, "result": {"a": 42}}));

    let asked = within(h.asked.recv()).await.unwrap();
    assert_eq!(asked.unwrap_err().code, -32042);
    let asked = within(h.asked.recv()).await.unwrap();
    assert_eq!(asked.unwrap(), json!({"a": 42}));
}

#[tokio::test]
async fn a_cancelled_outgoing_request_tells_the_peer() {
    let mut h = start_default();
    let c = &mut h.client;
    c.send(r#"{"jsonrpc":"2.0","id":5,"method":"ask","params":{"q":"?"}}"#)
        .await;
    let question = expect_question(c, &json!({"q": "?"})).await;
    // Cancelling the incoming request cancels the context the handler passed
    // to its outgoing request.
    c.send(r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}"#)
        .await;
    let cancel = c.recv().await;
    assert_eq!(
        cancel,
        json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": question}})
    );
    let r = c.recv().await;
    assert_eq!(r["id"], json!(5));
    assert_eq!(error_code(&r), REQUEST_CANCELLED as i64);
    // A late answer to the withdrawn request is ignored.
    c.send_json(json!({"jsonrpc": "2.0", "id": question, "result": {}}))
        .await;
    assert_eq!(c.request(json!(6), "echo", json!([])).await["id"], json!(6));
}

#[tokio::test]
async fn an_unanswered_outgoing_request_times_out() {
    let options = Options {
        request_timeout: Some(Duration::from_millis(20)),
        ..Options::default()
    };
    let mut h = start(options, 64 * 1024);
    let c = &mut h.client;
    c.send(r#"{"jsonrpc":"2.0","id":"t","method":"ask","params":{"q":"?"}}"#)
        .await;
    let question = expect_question(c, &json!({"q": "?"})).await;
    let cancel = c.recv().await;
    assert_eq!(cancel["method"], json!("$/cancel_request"));
    assert_eq!(cancel["params"]["requestId"], question);
    let r = c.recv().await;
    assert_eq!(r["id"], json!("t"));
    assert_eq!(error_code(&r), INTERNAL_ERROR as i64);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not answer"),
        "{r}"
    );
}

#[tokio::test]
async fn closing_fails_pending_requests_and_tells_the_service_once() {
    let mut h = start_default();
    let c = &mut h.client;
    c.send(r#"{"jsonrpc":"2.0","id":1,"method":"ask","params":{"q":"?"}}"#)
        .await;
    expect_question(c, &json!({"q": "?"})).await;
    c.send(r#"{"jsonrpc":"2.0","id":2,"method":"slow"}"#).await;
    // EOF from the client ends the connection.
    c.writer.shutdown().await.unwrap();

    let asked = within(h.asked.recv()).await.unwrap();
    let error = asked.unwrap_err();
    assert!(error.message.contains("connection closed"), "{error:?}");
    let service = h.finished().await;

    let peer = service.closed_peer.lock().unwrap().clone().unwrap();
    assert!(peer.closed().is_cancelled());
    assert_eq!(peer.notify("late", json!({})), Err(Closed));
    let r = peer
        .request("late", json!({}), &CancellationToken::new())
        .await;
    assert!(r.unwrap_err().message.contains("connection closed"));
}

#[tokio::test]
async fn a_handler_can_close_the_connection() {
    let mut h = start_default();
    h.client
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"bye"}"#)
        .await;
    h.finished().await;
}

#[tokio::test]
async fn a_panicking_handler_gets_an_internal_error_and_the_connection_goes_on() {
    let mut h = start_default();
    let r = h.client.request(json!(1), "panic", json!([])).await;
    assert_eq!(error_code(&r), INTERNAL_ERROR as i64);
    assert_eq!(r["id"], json!(1));
    assert_eq!(
        h.client.request(json!(2), "echo", json!([])).await["id"],
        json!(2)
    );
}

#[tokio::test]
async fn a_client_that_never_reads_is_disconnected_when_the_queue_fills() {
    let options = Options {
        outgoing_queue: 4,
        ..Options::default()
    };
    // A pipe that holds less than one message, and a client that never reads.
    let mut h = start(options, 16);
    h.client
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"flood"}"#)
        .await;
    let sent = within(h.flooded.recv()).await.unwrap();
    // The handler yields after each message, so the writer has taken the first
    // ones and is stuck on the full pipe; then the queue fills.
    assert!((4..100).contains(&sent), "{sent}");
    let service = h.finished().await;
    let peer = service.closed_peer.lock().unwrap().clone().unwrap();
    assert_eq!(peer.notify("late", json!({})), Err(Closed));
}

#[tokio::test]
async fn peers_have_distinct_ids() {
    let mut a = start_default();
    let mut b = start_default();
    a.client.writer.shutdown().await.unwrap();
    b.client.writer.shutdown().await.unwrap();
    let a = a
        .finished()
        .await
        .closed_peer
        .lock()
        .unwrap()
        .clone()
        .unwrap();
    let b = b
        .finished()
        .await
        .closed_peer
        .lock()
        .unwrap()
        .clone()
        .unwrap();
    assert_ne!(a.id(), b.id());
}

#[tokio::test]
async fn a_line_being_written_when_the_peer_stops_sending_is_finished() {
    // A pipe far smaller than the answer, so the writer is in the middle of
    // the line when the client closes its sending side.
    let mut h = start_default_with_pipe(16);
    let pad = "p".repeat(4000);
    h.client
        .send_json(json!({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"pad": pad}}))
        .await;
    let mut first = [0u8; 1];
    within(h.client.reader.read_exact(&mut first))
        .await
        .unwrap();
    h.client.writer.shutdown().await.unwrap();
    let mut rest = Vec::new();
    within(h.client.reader.read_to_end(&mut rest))
        .await
        .unwrap();
    let mut line = first.to_vec();
    line.extend_from_slice(&rest);
    assert_eq!(line.last(), Some(&b'\n'), "a torn line");
    let answer: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(answer["result"]["pad"], json!(pad));
    h.finished().await;
}

fn start_default_with_pipe(pipe_bytes: usize) -> Harness {
    start(Options::default(), pipe_bytes)
}

/// A caller that acts on why a request failed gets the cause as a case: the peer's
/// error object, the connection's end (the CLI's `dsh stop` relies on it), and, with
/// withdrawals not announced (hook servers), no `$/cancel_request` on a dropped call.
#[tokio::test]
async fn an_asking_side_tells_a_refusal_from_a_closed_connection() {
    let (ours, theirs) = duplex(64 * 1024);
    let (our_read, our_write) = split(ours);
    let options = Options {
        announce_withdrawals: false,
        ..Options::default()
    };
    let (peer, serve) = client::ask_only(our_read, our_write, options).await;
    let (their_read, mut their_write) = split(theirs);
    let mut lines = BufReader::new(their_read).lines();

    let asking = tokio::spawn({
        let peer = peer.clone();
        async move {
            peer.call(
                "refuse",
                json!({}),
                &tokio_util::sync::CancellationToken::new(),
            )
            .await
        }
    });
    let request: Value =
        serde_json::from_str(&within(lines.next_line()).await.unwrap().unwrap()).unwrap();
    let answer =
        json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32000, "message": "no"}});
    their_write
        .write_all(format!("{answer}\n").as_bytes())
        .await
        .unwrap();
    match within(asking).await.unwrap() {
        Err(RequestFailure::Answered(e)) => {
            assert_eq!((e.code, e.message.as_str()), (-32000, "no"))
        }
        other => panic!("not the peer's refusal: {other:?}"),
    }

    // A dropped call is not announced: the next line the other side reads is the next
    // request, not a `$/cancel_request`.
    let dropped = {
        let peer = peer.clone();
        tokio::spawn(async move {
            peer.call(
                "slow",
                json!({}),
                &tokio_util::sync::CancellationToken::new(),
            )
            .await
        })
    };
    let slow: Value =
        serde_json::from_str(&within(lines.next_line()).await.unwrap().unwrap()).unwrap();
    assert_eq!(slow["method"], "slow");
    dropped.abort();
    let _ = dropped.await;
    let waiting = tokio::spawn({
        let peer = peer.clone();
        async move {
            peer.call(
                "last",
                json!({}),
                &tokio_util::sync::CancellationToken::new(),
            )
            .await
        }
    });
    let next: Value =
        serde_json::from_str(&within(lines.next_line()).await.unwrap().unwrap()).unwrap();
    assert_eq!(next["method"], "last", "{next}");

    // The other side goes away without answering: the call says the connection closed.
    drop(their_write);
    drop(lines);
    assert!(matches!(
        within(waiting).await.unwrap(),
        Err(RequestFailure::Closed)
    ));
    within(serve).await.unwrap();
}

/// An upgrade's freeze: the request in flight (waiting for the client's answer to a
/// question) finishes, a request that arrives meanwhile is kept unread, and the
/// connection served again from what the freeze gave back answers it and the rest:
/// the client sees each request answered once and no end.
#[tokio::test]
async fn a_frozen_connection_finishes_what_is_in_flight_and_resumes_with_the_rest() {
    let Parts {
        harness_client: mut c,
        service,
        mut asked,
        server_read,
        server_write,
        ..
    } = parts(64 * 1024);
    let freeze = CancellationToken::new();
    let options = Options {
        freeze: freeze.clone(),
        ..Options::default()
    };
    let server = tokio::spawn(serve_freezable(
        server_read,
        server_write,
        service.clone(),
        options,
        None,
    ));

    c.send_json(json!({"jsonrpc": "2.0", "id": 1, "method": "ask", "params": {"q": 1}}))
        .await;
    let question = c.recv().await;
    assert_eq!(question["method"], "client/question");
    freeze.cancel();
    c.send(r#"{"jsonrpc":"2.0","id":2,"method":"echo","params":[2]}"#)
        .await;
    c.send_json(json!({"jsonrpc": "2.0", "id": question["id"], "result": "yes"}))
        .await;
    assert_eq!(
        c.recv().await,
        json!({"jsonrpc": "2.0", "id": 1, "result": "yes"}),
        "the request in flight finishes through the freeze"
    );
    assert_eq!(within(asked.recv()).await.unwrap(), Ok(json!("yes")));
    let frozen = within(server).await.unwrap().expect("frozen, not ended");
    assert!(
        frozen
            .unread
            .starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"echo\""),
        "the request that came during the freeze is kept: {:?}",
        String::from_utf8_lossy(&frozen.unread)
    );
    assert_eq!(service.closed.load(Ordering::SeqCst), 1);

    // Served again, half a line arriving in two parts on top of what was kept.
    let resumed = tokio::spawn(serve_freezable(
        frozen.reader,
        frozen.writer,
        service.clone(),
        Options::default(),
        Some(Resumed {
            unread: frozen.unread,
            state: frozen.state,
        }),
    ));
    c.send_raw(br#"{"jsonrpc":"2.0","id":3,"meth"#).await;
    assert_eq!(
        c.recv().await,
        json!({"jsonrpc": "2.0", "id": 2, "result": [2]})
    );
    c.send(r#"od":"echo","params":[3]}"#).await;
    assert_eq!(
        c.recv().await,
        json!({"jsonrpc": "2.0", "id": 3, "result": [3]})
    );
    drop(c);
    assert!(within(resumed).await.unwrap().is_none());
    assert_eq!(service.closed.load(Ordering::SeqCst), 2);
}

/// Issue 42: at the end of an upgrade's drain every request still in flight is
/// cancelled (`Options::cancel_requests`), so a handler waiting on something that will
/// not come (here the client's answer, stuck behind its own flood) lets the freeze end;
/// and the requests that arrive during the freeze are kept only up to a bound, the
/// rest left unread in the pipe for whoever serves the connection next: nothing lost,
/// nothing read twice.
#[tokio::test]
async fn at_the_drains_end_requests_are_cancelled_and_the_kept_bytes_are_bounded() {
    let max_line = 1024;
    let Parts {
        harness_client: mut c,
        service,
        mut asked,
        server_read,
        server_write,
        ..
    } = parts(1024 * 1024);
    let (freeze, cancel_requests) = (CancellationToken::new(), CancellationToken::new());
    let options = Options {
        max_line_bytes: max_line,
        freeze: freeze.clone(),
        cancel_requests: cancel_requests.clone(),
        ..Options::default()
    };
    let server = tokio::spawn(serve_freezable(
        server_read,
        server_write,
        service.clone(),
        options,
        None,
    ));
    c.send_json(json!({"jsonrpc": "2.0", "id": 1, "method": "ask", "params": {"q": 1}}))
        .await;
    let question = c.recv().await;
    assert_eq!(question["method"], "client/question");
    freeze.cancel();
    let mut sent = Vec::new();
    for id in 2..1000 {
        sent.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"echo\",\"params\":[{id}]}}\n")
                .as_bytes(),
        );
    }
    sent.extend_from_slice(
        format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": question["id"], "result": "late"})
        )
        .as_bytes(),
    );
    c.send_raw(&sent).await;
    cancel_requests.cancel();
    let frozen = within(server).await.unwrap().expect("frozen, not ended");
    let bound = max_line + 2 * 8 * 1024;
    assert!(
        frozen.unread.len() <= bound,
        "{} bytes kept, more than {bound}",
        frozen.unread.len()
    );
    assert!(
        matches!(within(asked.recv()).await, Some(Err(_))),
        "the question in flight was cancelled, its answer never read"
    );
    let mut rest = vec![0; sent.len() - frozen.unread.len()];
    let mut reader = frozen.reader;
    within(reader.read_exact(&mut rest)).await.unwrap();
    let mut whole = frozen.unread;
    whole.extend_from_slice(&rest);
    assert_eq!(whole, sent, "kept then unread: every byte once, in order");
}
