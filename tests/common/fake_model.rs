//! A scripted OpenAI-compatible chat-completions server on loopback: it plays
//! the model in tests (the real one is a paid service elsewhere). Each request
//! is recorded for the test to check, and answered with the next scripted reply.
//! Title requests (dsh's small background request for a session title, the only
//! ones that carry `max_tokens`) have a script and a record of their own, so a test
//! scripts the turn and the title apart and each knows which request it answers.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};

/// One scripted answer.
#[derive(Clone)]
pub enum Reply {
    /// An SSE stream of these `data:` payloads, then `[DONE]`.
    Events(Vec<Value>),
    /// These payloads, then the stream stays open until the client goes away.
    EventsThenHold(Vec<Value>),
    /// An error status with a JSON error body and an optional Retry-After.
    Status(u16, &'static str, Option<u64>),
    /// Raw SSE text, for malformed streams.
    Raw(&'static str),
    /// Answers with text naming the last user message (for concurrency tests).
    EchoLastUser,
}

pub fn text(t: &str) -> Reply {
    Reply::Events(vec![
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": t}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 10, "completion_tokens": 2}}),
    ])
}

/// A stream whose tool call arrives in fragments, as real servers send it.
pub fn tool_call(id: &str, name: &str, arguments: &str) -> Reply {
    let (a, b) = arguments.split_at(arguments.len() / 2);
    Reply::Events(vec![
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": a}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": b}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ])
}

pub fn bash_call(id: &str, command: &str) -> Reply {
    tool_call(
        id,
        "bash",
        &json!({"command": command, "description": "run it"}).to_string(),
    )
}

/// Whether a request body is a title request rather than a turn's.
pub fn is_title_request(body: &Value) -> bool {
    body.get("max_tokens").is_some()
}

/// The scripted replies and records of one kind of request (turn or title).
#[derive(Clone)]
struct Lane {
    script: Arc<Mutex<VecDeque<Reply>>>,
    tx: mpsc::UnboundedSender<Value>,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Lane {
    fn new() -> (Self, mpsc::UnboundedReceiver<Value>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let lane = Self {
            script: Arc::new(Mutex::new(VecDeque::new())),
            tx,
            seen: Arc::new(Mutex::new(Vec::new())),
        };
        (lane, rx)
    }
}

pub struct FakeModel {
    pub base_url: String,
    script: Arc<Mutex<VecDeque<Reply>>>,
    title_script: Arc<Mutex<VecDeque<Reply>>>,
    /// Every turn request body, in arrival order.
    pub requests: mpsc::UnboundedReceiver<Value>,
    /// Every title request body, in arrival order.
    pub title_requests: mpsc::UnboundedReceiver<Value>,
    seen: Arc<Mutex<Vec<Value>>>,
    /// Signalled when a client disconnects from a held stream.
    pub released: Arc<Notify>,
    /// The one key it takes (`Authorization: Bearer <key>`), like a hosted endpoint;
    /// `None`: it takes any request, like a local server.
    key: Arc<Mutex<Option<String>>>,
    /// The `Authorization` header of every chat request (empty when none was sent).
    pub authorizations: Arc<Mutex<Vec<String>>>,
}

/// What the server checks of a request's credentials, and what it saw of them.
#[derive(Clone)]
struct Gate {
    key: Arc<Mutex<Option<String>>>,
    authorizations: Arc<Mutex<Vec<String>>>,
}

impl FakeModel {
    pub async fn start(script: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let (turns, requests) = Lane::new();
        turns.script.lock().unwrap().extend(script);
        let (titles, title_requests) = Lane::new();
        let released = Arc::new(Notify::new());
        let gate = Gate {
            key: Arc::new(Mutex::new(None)),
            authorizations: Arc::new(Mutex::new(Vec::new())),
        };
        let (lanes, rel, g) = (
            (turns.clone(), titles.clone()),
            released.clone(),
            gate.clone(),
        );
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (lanes, rel, g) = (lanes.clone(), rel.clone(), g.clone());
                tokio::spawn(async move { serve(stream, lanes, rel, g).await });
            }
        });
        Self {
            base_url,
            script: turns.script,
            title_script: titles.script,
            requests,
            title_requests,
            seen: turns.seen,
            released,
            key: gate.key,
            authorizations: gate.authorizations,
        }
    }

    /// From now on, only requests carrying `key` are answered (others get 401), as a
    /// hosted endpoint does; `GET <base>/models` answers 200 to it.
    pub fn require_key(&self, key: &str) {
        *self.key.lock().unwrap() = Some(key.to_string());
    }

    pub fn push(&self, reply: Reply) {
        self.script.lock().unwrap().push_back(reply);
    }

    /// Scripts the answer to the next title request. Without one, a title request is
    /// answered 500.
    pub fn push_title(&self, reply: Reply) {
        self.title_script.lock().unwrap().push_back(reply);
    }

    /// How many turn requests arrived so far.
    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// The `index`th turn request body (in arrival order).
    pub fn request_at(&self, index: usize) -> Value {
        self.seen.lock().unwrap()[index].clone()
    }

    /// Config lines pointing dsh at this server.
    pub fn config(&self) -> String {
        format!(
            "[model]\nbase_url = \"{}\"\nmodel = \"fake\"\nmax_retries = 2\nretry_base_ms = 1\nidle_timeout_ms = 20000\n",
            self.base_url
        )
    }
}

async fn serve(
    mut stream: TcpStream,
    (turns, titles): (Lane, Lane),
    released: Arc<Notify>,
    gate: Gate,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = stream.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = stream.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body: Value =
        serde_json::from_slice(&buf[header_end..header_end + length]).unwrap_or(Value::Null);
    // Header names were lowercased with the rest; the key's case is kept from `buf`.
    let raw_head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let authorization = raw_head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("authorization")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    let wanted = gate.key.lock().unwrap().clone();
    let allowed = wanted.is_none_or(|k| authorization == format!("Bearer {k}"));
    let answer = |code: u16, body: Value| {
        let body = body.to_string();
        format!(
            "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    if head.starts_with("get ") && head.lines().next().is_some_and(|l| l.contains("/models ")) {
        let out = if allowed {
            answer(
                200,
                json!({"object": "list", "data": [{"id": "fake", "object": "model"}]}),
            )
        } else {
            answer(
                401,
                json!({"error": {"message": "Authentication Fails (invalid key)"}}),
            )
        };
        let _ = stream.write_all(out.as_bytes()).await;
        let _ = stream.shutdown().await;
        return;
    }
    gate.authorizations.lock().unwrap().push(authorization);
    if !allowed {
        let out = answer(
            401,
            json!({"error": {"message": "Authentication Fails (invalid key)"}}),
        );
        let _ = stream.write_all(out.as_bytes()).await;
        let _ = stream.shutdown().await;
        return;
    }
    let lane = if is_title_request(&body) {
        titles
    } else {
        turns
    };
    lane.seen.lock().unwrap().push(body.clone());
    let _ = lane.tx.send(body.clone());
    let reply = lane
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Reply::Status(500, "no scripted reply left", None));
    let sse_head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    let event = |v: &Value| format!("data: {v}\n\n");
    match reply {
        Reply::Events(events) => {
            let mut out = sse_head.to_string();
            for e in &events {
                out.push_str(&event(e));
            }
            out.push_str("data: [DONE]\n\n");
            let _ = stream.write_all(out.as_bytes()).await;
        }
        Reply::EventsThenHold(events) => {
            let mut out = sse_head.to_string();
            for e in &events {
                out.push_str(&event(e));
            }
            let _ = stream.write_all(out.as_bytes()).await;
            // Held open until the client hangs up (a read then returns 0).
            let _ = stream.read(&mut chunk).await;
            released.notify_one();
        }
        Reply::Status(code, message, retry_after) => {
            let body = json!({"error": {"message": message}}).to_string();
            let retry = retry_after
                .map(|s| format!("Retry-After: {s}\r\n"))
                .unwrap_or_default();
            let out = format!(
                "HTTP/1.1 {code} Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{retry}Connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(out.as_bytes()).await;
        }
        Reply::Raw(text) => {
            let _ = stream
                .write_all(format!("{sse_head}{text}").as_bytes())
                .await;
        }
        Reply::EchoLastUser => {
            let last = body["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .and_then(|m| m["content"].as_str())
                .unwrap_or("?")
                .to_string();
            let Reply::Events(events) = text(&format!("echo: {last}")) else {
                unreachable!()
            };
            let mut out = sse_head.to_string();
            for e in &events {
                out.push_str(&event(e));
            }
            out.push_str("data: [DONE]\n\n");
            let _ = stream.write_all(out.as_bytes()).await;
        }
    }
    let _ = stream.shutdown().await;
}

/// The messages of a recorded request.
pub fn messages(request: &Value) -> Vec<Value> {
    request["messages"].as_array().cloned().unwrap_or_default()
}
