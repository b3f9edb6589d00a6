//! A plain JSON-lines ACP client over any byte stream, for driving the real dsh
//! binary the way an editor does. It answers `session/request_permission` from a
//! script and keeps every `session/update` it receives.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::collections::VecDeque;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

pub struct Client {
    writer: Box<dyn AsyncWrite + Unpin + Send>,
    lines: tokio::io::Lines<BufReader<Box<dyn AsyncRead + Unpin + Send>>>,
    next_id: u64,
    /// `session/update` params received so far, oldest first.
    pub updates: Vec<Value>,
    /// Answers to give to permission requests, in order; when empty: cancelled.
    pub permission_answers: VecDeque<&'static str>,
    /// Permission requests received (their params).
    pub permission_requests: Vec<Value>,
    /// When set, permission requests are left unanswered.
    pub ignore_permissions: bool,
    /// Responses that arrived while waiting for another one.
    early: Vec<Value>,
    /// The editor's open buffers by path, when this client offers `fs` (see
    /// [`Client::initialize_with_fs`]): reads are answered from them (a path without one
    /// fails like an unknown file), writes replace them.
    pub buffers: Option<std::collections::HashMap<String, String>>,
    /// `fs/*` requests received (method and params), in order.
    pub fs_requests: Vec<(String, Value)>,
}

impl Client {
    pub fn new(
        reader: impl AsyncRead + Unpin + Send + 'static,
        writer: impl AsyncWrite + Unpin + Send + 'static,
    ) -> Self {
        let reader: Box<dyn AsyncRead + Unpin + Send> = Box::new(reader);
        Self {
            writer: Box::new(writer),
            lines: BufReader::new(reader).lines(),
            next_id: 1,
            updates: Vec::new(),
            permission_answers: VecDeque::new(),
            permission_requests: Vec::new(),
            ignore_permissions: false,
            early: Vec::new(),
            buffers: None,
            fs_requests: Vec::new(),
        }
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.expect("write");
        self.writer.flush().await.expect("flush");
    }

    pub async fn send(&mut self, message: Value) {
        self.send_raw(format!("{message}\n").as_bytes()).await;
    }

    /// Sends a request and returns its id without waiting.
    pub async fn start(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Sends a request and waits for its response: Ok(result) or Err(error object).
    /// Asks `_dsh/status` until `pred` holds of it (for 30 s at most); returns that
    /// status, or fails with `what`.
    pub async fn status_until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..3000 {
            let status = self.request("_dsh/status", json!({})).await.unwrap();
            if pred(&status) {
                return status;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("{what}");
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.start(method, params).await;
        self.wait_for(json!(id)).await
    }

    /// The response to request `id` if it arrived while another was awaited (left for
    /// [`Client::wait_for`]).
    pub fn early_response(&self, id: u64) -> Option<&Value> {
        self.early.iter().find(|m| m["id"] == json!(id))
    }

    /// Reads messages until the response with `id` arrives.
    pub async fn wait_for(&mut self, id: Value) -> Result<Value, Value> {
        let early = self.early.iter().position(|m| m["id"] == id);
        let mut next = early.map(|i| self.early.remove(i));
        loop {
            let message = match next.take() {
                Some(m) => m,
                None => self
                    .next_message()
                    .await
                    .expect("connection closed before the response"),
            };
            if message.get("method").is_none() && message["id"] == id {
                return match message.get("error") {
                    Some(e) => Err(e.clone()),
                    None => Ok(message["result"].clone()),
                };
            }
            self.absorb(message).await;
        }
    }

    /// Reads messages until `pred` holds for a received update.
    pub async fn wait_update(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(u) = self.updates.iter().find(|u| pred(u)) {
            return u.clone();
        }
        loop {
            let message = self.next_message().await.expect("connection closed");
            let is_match = message["method"] == "session/update" && pred(&message["params"]);
            self.absorb(message.clone()).await;
            if is_match {
                return message["params"].clone();
            }
        }
    }

    /// Reads messages until the completion notice of background task `task` arrives: the
    /// daemon has then read all the task wrote, which a signal from inside the command
    /// does not promise.
    pub async fn wait_task_finished(&mut self, task: &str) -> Value {
        let notice = format!("background bash task {task} finished");
        self.wait_update(|u| {
            u["update"]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.contains(&notice))
        })
        .await
    }

    /// Reads until a permission request arrives (only with `ignore_permissions`).
    pub async fn wait_permission_request(&mut self) -> Value {
        loop {
            let message = self.next_message().await.expect("connection closed");
            if message["method"] == "session/request_permission" {
                self.permission_requests.push(message["params"].clone());
                return message;
            }
            self.absorb(message).await;
        }
    }

    /// The next message, or None at EOF. Lines that are not JSON fail the test.
    pub async fn next_message(&mut self) -> Option<Value> {
        // A reset is the peer going away, like EOF.
        let line = self.lines.next_line().await.ok().flatten()?;
        Some(
            serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not JSON from dsh ({e}): {line}")),
        )
    }

    async fn absorb(&mut self, message: Value) {
        match message["method"].as_str() {
            Some("session/update") => self.updates.push(message["params"].clone()),
            None => self.early.push(message),
            Some("session/request_permission") => {
                self.permission_requests.push(message["params"].clone());
                if self.ignore_permissions {
                    return;
                }
                let outcome = match self.permission_answers.pop_front() {
                    Some(option) => json!({"outcome": "selected", "optionId": option}),
                    None => json!({"outcome": "cancelled"}),
                };
                let id = message["id"].clone();
                self.send(json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": outcome}}))
                    .await;
            }
            Some(method @ ("fs/read_text_file" | "fs/write_text_file")) => {
                let params = message["params"].clone();
                self.fs_requests.push((method.to_string(), params.clone()));
                let path = params["path"].as_str().unwrap_or_default().to_string();
                let buffers = self.buffers.get_or_insert_with(Default::default);
                let reply = if method == "fs/read_text_file" {
                    match buffers.get(&path) {
                        Some(text) => json!({"result": {"content": text}}),
                        None => json!({"error": {"code": -32002, "message": "not found"}}),
                    }
                } else {
                    let content = params["content"].as_str().unwrap_or_default();
                    buffers.insert(path, content.to_string());
                    json!({"result": null})
                };
                let mut reply = reply;
                reply["jsonrpc"] = "2.0".into();
                reply["id"] = message["id"].clone();
                self.send(reply).await;
            }
            _ => {}
        }
    }

    /// `initialize` as an editor offering `fs/read_text_file` and `fs/write_text_file`,
    /// answered from [`Client::buffers`].
    pub async fn initialize_with_fs(&mut self) -> Value {
        self.buffers.get_or_insert_with(Default::default);
        self.request(
            "initialize",
            json!({"protocolVersion": 1,
                   "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}}}),
        )
        .await
        .expect("initialize")
    }

    pub async fn initialize(&mut self) -> Value {
        self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await
        .expect("initialize")
    }

    /// `session/load` of `session` in `cwd`; its replay is in the updates when it answers.
    pub async fn load_session(&mut self, session: &str, cwd: &std::path::Path) -> Value {
        self.request(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await
        .expect("session/load")
    }

    pub async fn new_session(&mut self, cwd: &std::path::Path) -> String {
        let r = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await
            .expect("session/new");
        r["sessionId"].as_str().expect("sessionId").to_string()
    }

    pub async fn set_mode(&mut self, session: &str, mode: &str) {
        self.request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": mode}),
        )
        .await
        .expect("set_mode");
    }

    /// Runs a tool as the session through `_dsh/tools/call`; returns (text, isError).
    pub async fn tool(
        &mut self,
        session: Option<&str>,
        name: &str,
        arguments: Value,
    ) -> (String, bool) {
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(s) = session {
            params["sessionId"] = json!(s);
        }
        let r = self
            .request("_dsh/tools/call", params)
            .await
            .expect("_dsh/tools/call");
        (
            r["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            r["isError"].as_bool().unwrap_or(false),
        )
    }

    /// Starts `command` as a background task of `session`; returns its id.
    pub async fn start_task(&mut self, session: &str, command: &str) -> String {
        let arguments = json!({"command": command, "description": "d", "run_in_background": true});
        let (text, is_error) = self.tool(Some(session), "bash", arguments).await;
        assert!(!is_error, "{text}");
        text.strip_prefix("started background task ")
            .unwrap_or_else(|| panic!("not a start: {text}"))
            .to_string()
    }

    pub async fn bash(&mut self, session: &str, command: &str) -> (String, bool) {
        self.tool(
            Some(session),
            "bash",
            json!({"command": command, "description": "test command"}),
        )
        .await
    }

    pub async fn prompt(&mut self, session: &str, text: &str) -> Result<Value, Value> {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    /// Updates of one kind for one session.
    pub fn updates_of(&self, session: &str, kind: &str) -> Vec<Value> {
        self.updates
            .iter()
            .filter(|u| u["sessionId"] == session && u["update"]["sessionUpdate"] == kind)
            .map(|u| u["update"].clone())
            .collect()
    }
}
