//! A scripted OpenAI-compatible chat-completions server on loopback: it plays
//! the model in tests (the real one is a paid service elsewhere). Each request
//! is recorded for the test to check, and answered with the next scripted reply.
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

pub struct FakeModel {
    pub base_url: String,
    script: Arc<Mutex<VecDeque<Reply>>>,
    /// Every request body, in arrival order.
    pub requests: mpsc::UnboundedReceiver<Value>,
    seen: Arc<Mutex<Vec<Value>>>,
    /// Signalled when a client disconnects from a held stream.
    pub released: Arc<Notify>,
}

impl FakeModel {
    pub async fn start(script: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let released = Arc::new(Notify::new());
        let (tx, requests) = mpsc::unbounded_channel();
        let (s, seen2, rel) = (script.clone(), seen.clone(), released.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (s, tx, seen, rel) = (s.clone(), tx.clone(), seen2.clone(), rel.clone());
                tokio::spawn(async move { serve(stream, s, tx, seen, rel).await });
            }
        });
        Self {
            base_url,
            script,
            requests,
            seen,
            released,
        }
    }

    pub fn push(&self, reply: Reply) {
        self.script.lock().unwrap().push_back(reply);
    }

    /// How many requests arrived so far.
    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
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
    script: Arc<Mutex<VecDeque<Reply>>>,
    tx: mpsc::UnboundedSender<Value>,
    seen: Arc<Mutex<Vec<Value>>>,
    released: Arc<Notify>,
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
    seen.lock().unwrap().push(body.clone());
    let _ = tx.send(body.clone());
    let reply = script.lock().unwrap().pop_front().unwrap_or(Reply::Status(
        500,
        "no scripted reply left",
        None,
    ));
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
