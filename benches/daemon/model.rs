//! Scripted OpenAI-compatible model servers for B7 (issue 19), and the bench's own
//! HTTP client for B7's baseline.
//!
//! The server plays a model that asks for `bash true` and then answers: a request
//! whose conversation holds no tool result gets a streamed tool call, one that
//! holds the result gets a streamed text answer. It decides from the request alone
//! (no script to run out), so any number of turns can be driven through it, by the
//! daemon and by the baseline alike.
//!
//! HTTP/1.1 with keep-alive (connections are reused, as a real server lets
//! them be). Two ways of writing an answer, because how a server writes decides
//! whether a client waits on a delayed ACK: [`Wire::Prompt`] sets `TCP_NODELAY`
//! and writes the whole chunked SSE answer in one `write`; [`Wire::Split`] leaves
//! Nagle on and writes the head, then a Content-Length body, as Python's
//! `http.server` does (BENCHMARKS.md, B7).

use crate::Res;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How the server writes its answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    /// `TCP_NODELAY`, head and body in one write: nothing for a client to wait on.
    Prompt,
    /// Nagle on, head then body in two writes: the body leaves only once the head
    /// is acknowledged.
    Split,
    /// As `Prompt`, but the chunked body's end is written 1 ms after the answer:
    /// a client that drops the body at `[DONE]` cannot reuse the connection.
    LateEnd,
}

/// What the server counts, for the scenario to check and report.
#[derive(Debug, Default)]
pub(crate) struct ServerCounts {
    pub(crate) requests: AtomicU64,
    pub(crate) connections: AtomicU64,
    /// Second requests whose tool result was not `(no output)`: the command did
    /// not run as asked. Must stay 0.
    pub(crate) bad_results: AtomicU64,
    /// Requests that could not be parsed. Must stay 0.
    pub(crate) bad_requests: AtomicU64,
    /// The first body of each kind that arrived (asking, then carrying the
    /// result): the daemon's own requests, which the baseline sends again.
    pub(crate) bodies: Mutex<[Option<Vec<u8>>; 2]>,
    /// When each request had arrived whole, for P7 to place in a turn's timeline
    /// (it takes them; nothing else reads them).
    pub(crate) arrivals: Mutex<Vec<std::time::Instant>>,
}

/// One scripted model server on a loopback port, stopped when dropped.
pub(crate) struct ModelServer {
    pub(crate) base_url: String,
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) counts: Arc<ServerCounts>,
    accept: JoinHandle<()>,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        // Connection tasks end when their peers close (the daemon is stopped first).
        self.accept.abort();
    }
}

impl ModelServer {
    pub(crate) async fn start(wire: Wire) -> Res<ModelServer> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("bind the model server: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let counts = Arc::new(ServerCounts::default());
        let c = counts.clone();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                c.connections.fetch_add(1, Ordering::Relaxed);
                let c = c.clone();
                tokio::spawn(async move { serve(stream, wire, &c).await });
            }
        });
        Ok(ModelServer {
            base_url: format!("http://{addr}/v1"),
            addr,
            counts,
            accept,
        })
    }

    /// The daemon's two request bodies, once a turn has run through this server.
    pub(crate) fn bodies(&self) -> Res<(Vec<u8>, Vec<u8>)> {
        let bodies = self.counts.bodies.lock().map_err(|e| e.to_string())?;
        match &*bodies {
            [Some(ask), Some(result)] => Ok((ask.clone(), result.clone())),
            _ => Err("no whole turn has reached the model server yet".into()),
        }
    }

    /// `[model]` lines pointing a daemon at this server.
    pub(crate) fn config(&self) -> String {
        format!(
            "[model]\nbase_url = \"{}\"\nmodel = \"bench\"\nmax_retries = 0\nidle_timeout_ms = 60000\n",
            self.base_url
        )
    }
}

/// The answer to a request that has no tool result yet: `bash true`, streamed in
/// two fragments as real servers send tool calls.
fn tool_call_sse() -> String {
    let args = json!({"command": "true", "description": "bench"}).to_string();
    let (a, b) = args.split_at(args.len() / 2);
    sse(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
            {"index": 0, "id": "call_b7", "type": "function",
             "function": {"name": "bash", "arguments": a}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": b}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
               "usage": {"prompt_tokens": 100, "completion_tokens": 10}}),
    ])
}

/// The answer once the tool result is in.
fn answer_sse() -> String {
    sse(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "It ran."}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 120, "completion_tokens": 3}}),
    ])
}

fn sse(events: &[Value]) -> String {
    let mut out = String::new();
    for e in events {
        out.push_str(&format!("data: {e}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}

/// Which answer a request gets: the text once the conversation holds a tool
/// result (checked to be what `true` gives), else the tool call.
fn answer_for(body: &[u8], counts: &ServerCounts) -> String {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        counts.bad_requests.fetch_add(1, Ordering::Relaxed);
        return answer_sse();
    };
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let result = messages.iter().rev().find(|m| m["role"] == "tool");
    if let Ok(mut bodies) = counts.bodies.lock() {
        bodies[usize::from(result.is_some())].get_or_insert_with(|| body.to_vec());
    }
    match result {
        Some(result) => {
            if result["content"] != "(no output)" {
                counts.bad_results.fetch_add(1, Ordering::Relaxed);
            }
            answer_sse()
        }
        None => tool_call_sse(),
    }
}

/// The head of a chunked answer and one chunk an event, without the end.
fn answer_chunks(answer: &str) -> String {
    let mut out = String::from(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
         Transfer-Encoding: chunked\r\n\r\n",
    );
    for event in answer.split_inclusive("\n\n") {
        out.push_str(&format!("{:x}\r\n{event}\r\n", event.len()));
    }
    out
}

/// One connection: requests answered in order until the client closes it.
async fn serve(mut stream: TcpStream, wire: Wire, counts: &ServerCounts) {
    if stream.set_nodelay(wire != Wire::Split).is_err() {
        return;
    }
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        let Ok(Some(body)) = read_message(&mut stream, &mut buf).await else {
            return;
        };
        if let Ok(mut arrivals) = counts.arrivals.lock() {
            // Bounded: only P7 drains it, so keep the last few of a long run.
            if arrivals.len() >= 64 {
                arrivals.clear();
            }
            arrivals.push(std::time::Instant::now());
        }
        counts.requests.fetch_add(1, Ordering::Relaxed);
        let answer = answer_for(&body, counts);
        let written = match wire {
            // As streaming servers (vLLM, llama.cpp, OpenAI's) send it: chunked,
            // one chunk an event, the terminating chunk right after `[DONE]`.
            Wire::Prompt => {
                let mut out = answer_chunks(&answer);
                out.push_str("0\r\n\r\n");
                stream.write_all(out.as_bytes()).await
            }
            // The same, but the body's end follows a millisecond later, as a
            // streaming server's framework writes it once the generator is done.
            Wire::LateEnd => match stream.write_all(answer_chunks(&answer).as_bytes()).await {
                Ok(()) => {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    stream.write_all(b"0\r\n\r\n").await
                }
                Err(e) => Err(e),
            },
            // As Python's http.server sends it: head, then the body, two writes.
            Wire::Split => {
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                     Content-Length: {}\r\n\r\n",
                    answer.len()
                );
                match stream.write_all(head.as_bytes()).await {
                    Ok(()) => stream.write_all(answer.as_bytes()).await,
                    Err(e) => Err(e),
                }
            }
        };
        if written.is_err() {
            return;
        }
    }
}

/// Reads one HTTP/1.1 message with a Content-Length body (requests here, answers
/// in [`HttpClient`]); bytes past it stay in `buf`. `Ok(None)` when the peer
/// closed between messages.
async fn read_message(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Res<Option<Vec<u8>>> {
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err("connection closed inside a message head".into())
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    buf.drain(..head_end);
    if head.contains("transfer-encoding: chunked") {
        return read_chunked(stream, buf).await.map(Some);
    }
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    fill(stream, buf, length).await?;
    Ok(Some(buf.drain(..length).collect()))
}

/// Reads until `buf` holds at least `len` bytes.
async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>, len: usize) -> Res<()> {
    let mut chunk = [0u8; 16 * 1024];
    while buf.len() < len {
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("connection closed inside a message body".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(())
}

/// A chunked body, decoded, through its terminating chunk (no trailers).
async fn read_chunked(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Res<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(p) = buf.windows(2).position(|w| w == b"\r\n") {
                break p;
            }
            let more = buf.len() + 1;
            fill(stream, buf, more).await?;
        };
        let size = std::str::from_utf8(&buf[..line_end])
            .ok()
            .and_then(|l| usize::from_str_radix(l.split(';').next()?.trim(), 16).ok())
            .ok_or("a bad chunk size line")?;
        fill(stream, buf, line_end + 2 + size + 2).await?;
        body.extend_from_slice(&buf[line_end + 2..line_end + 2 + size]);
        buf.drain(..line_end + 2 + size + 2);
        if size == 0 {
            return Ok(body);
        }
    }
}

/// B7's baseline client: one kept-alive connection with `TCP_NODELAY`, each
/// request written whole, each answer read whole. The least any client can do to
/// exchange the same bytes with the same server.
pub(crate) struct HttpClient {
    stream: TcpStream,
    buf: Vec<u8>,
    host: String,
}

impl HttpClient {
    pub(crate) async fn connect(server: &ModelServer) -> Res<HttpClient> {
        let stream = TcpStream::connect(server.addr)
            .await
            .map_err(|e| format!("connect to the model server: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(HttpClient {
            stream,
            buf: Vec::with_capacity(16 * 1024),
            host: server.addr.to_string(),
        })
    }

    /// POSTs `body` to /v1/chat/completions; returns the answer's body.
    pub(crate) async fn post(&mut self, body: &[u8]) -> Res<Vec<u8>> {
        let mut request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: */*\r\nContent-Length: {}\r\n\r\n",
            self.host,
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        self.stream
            .write_all(&request)
            .await
            .map_err(|e| format!("write to the model server: {e}"))?;
        read_message(&mut self.stream, &mut self.buf)
            .await?
            .ok_or_else(|| "the model server closed the connection".to_string())
    }
}
