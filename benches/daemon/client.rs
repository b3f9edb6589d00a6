//! The ACP client the benchmark drives the daemon with: one JSON line per message, every
//! `session/update` read.

use crate::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

// ---------------------------------------------------------------------------
// The ACP client

/// A minimal sequential JSON-lines ACP client: one request in flight, every
/// notification read (and dropped) while waiting, permission requests answered
/// `allow_once` at once. Sequential is all the scenarios need: concurrency
/// comes from several clients.
pub(crate) struct Client {
    pub(crate) reader: BufReader<Box<dyn AsyncRead + Unpin + Send>>,
    pub(crate) writer: Box<dyn AsyncWrite + Unpin + Send>,
    pub(crate) next_id: u64,
    pub(crate) line: String,
    /// `session/update` notifications read.
    pub(crate) updates: u64,
    /// `session/request_permission` requests answered.
    pub(crate) asked: u64,
}

impl Client {
    pub(crate) async fn connect(socket: &Path) -> Res<Client> {
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|e| format!("connect {}: {e}", socket.display()))?;
        let (reader, writer) = stream.into_split();
        Client::over(Box::new(reader), Box::new(writer)).await
    }

    /// A client over any byte stream (a socket, or the stdio of `dsh acp` as an
    /// editor starts it), initialized.
    pub(crate) async fn over(
        reader: Box<dyn AsyncRead + Unpin + Send>,
        writer: Box<dyn AsyncWrite + Unpin + Send>,
    ) -> Res<Client> {
        let mut client = Client {
            reader: BufReader::with_capacity(64 * 1024, reader),
            writer,
            next_id: 1,
            line: String::new(),
            updates: 0,
            asked: 0,
        };
        // ACP: nothing but initialize before initialize has been answered.
        client
            .request("initialize", json!({"protocolVersion": 1}), REQUEST_LIMIT)
            .await?;
        Ok(client)
    }

    pub(crate) async fn send(&mut self, message: &Value) -> Res<()> {
        let mut bytes = serde_json::to_vec(message).map_err(|e| e.to_string())?;
        bytes.push(b'\n');
        self.writer
            .write_all(&bytes)
            .await
            .map_err(|e| format!("write to the daemon: {e}"))
    }

    /// Sends a request and reads until its answer: the result, or the error as text.
    pub(crate) async fn request(
        &mut self,
        method: &str,
        params: Value,
        limit: Duration,
    ) -> Res<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let exchange = async {
            self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
                .await?;
            loop {
                let message = self.next_message().await?;
                if let Some(m) = message.get("method").and_then(Value::as_str) {
                    self.absorb(m, &message).await?;
                    continue;
                }
                if message["id"] != json!(id) {
                    return Err(format!("answer to an unknown request: {message}"));
                }
                return match message.get("error") {
                    Some(e) => Err(format!("{method} failed: {e}")),
                    None => Ok(message["result"].clone()),
                };
            }
        };
        tokio::time::timeout(limit, exchange)
            .await
            .map_err(|_| format!("{method}: no answer within {limit:?}"))?
    }

    pub(crate) async fn next_message(&mut self) -> Res<Value> {
        self.line.clear();
        let n = self
            .reader
            .read_line(&mut self.line)
            .await
            .map_err(|e| format!("read from the daemon: {e}"))?;
        if n == 0 {
            return Err("the daemon closed the connection".into());
        }
        serde_json::from_str(&self.line).map_err(|e| format!("not JSON from dsh ({e})"))
    }

    /// A message from the daemon that is not our answer.
    pub(crate) async fn absorb(&mut self, method: &str, message: &Value) -> Res<()> {
        match method {
            "session/update" => self.updates += 1,
            "session/request_permission" => {
                // The editor's user answering at once: the cost measured in B6 is
                // dsh's round trip, not a person.
                self.asked += 1;
                let answer = json!({"jsonrpc": "2.0", "id": message["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}});
                self.send(&answer).await?;
            }
            other => return Err(format!("unexpected request from dsh: {other}")),
        }
        Ok(())
    }

    pub(crate) async fn new_session(&mut self, cwd: &Path) -> Res<String> {
        let r = self
            .request(
                "session/new",
                json!({"cwd": cwd, "mcpServers": []}),
                REQUEST_LIMIT,
            )
            .await?;
        r["sessionId"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("session/new without a sessionId: {r}"))
    }

    pub(crate) async fn set_mode(&mut self, session: &str, mode: &str) -> Res<()> {
        self.request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": mode}),
            REQUEST_LIMIT,
        )
        .await
        .map(drop)
    }

    /// A new session in `cwd` whose calls run without asking (mode `auto`), as
    /// most scenarios need.
    pub(crate) async fn auto_session(&mut self, cwd: &Path) -> Res<String> {
        let session = self.new_session(cwd).await?;
        self.set_mode(&session, "auto").await?;
        Ok(session)
    }

    /// `_dsh/tools/call` as `session`: (text, isError).
    pub(crate) async fn tool(
        &mut self,
        session: &str,
        name: &str,
        arguments: Value,
        limit: Duration,
    ) -> Res<(String, bool)> {
        let r = self
            .request(
                "_dsh/tools/call",
                json!({"sessionId": session, "name": name, "arguments": arguments}),
                limit,
            )
            .await?;
        let text = r["content"][0]["text"]
            .as_str()
            .ok_or_else(|| format!("tool result without text: {r}"))?;
        Ok((text.to_string(), r["isError"].as_bool().unwrap_or(true)))
    }

    /// A tool call that runs no process: `bash_output` of a task that does not
    /// exist. It crosses the protocol and the whole waterfall (audit, schema,
    /// policy, permission, tool, session log, updates) and ends in the registry,
    /// so it is the part of a `bash` call's cost that is not the executor's.
    pub(crate) async fn no_process_call(&mut self, session: &str) -> Res<()> {
        let args = json!({"task_id": "bash-0"});
        match self
            .tool(session, "bash_output", args, REQUEST_LIMIT)
            .await?
        {
            (text, true) if text.ends_with("unknown bash task \"bash-0\"") => Ok(()),
            (text, is_error) => Err(format!(
                "bash_output bash-0 gave {text:?} (isError {is_error})"
            )),
        }
    }

    /// One `bash` call of `true`, checked to have run and succeeded.
    pub(crate) async fn bash_true(&mut self, session: &str) -> Res<()> {
        let args = json!({"command": "true", "description": "bench"});
        match self.tool(session, "bash", args, REQUEST_LIMIT).await? {
            (text, false) if text == "(no output)" => Ok(()),
            (text, is_error) => Err(format!("bash true gave {text:?} (isError {is_error})")),
        }
    }
}
