//! The floor under B1's no-process call (issue 19): a process that answers a
//! request over a Unix socket as fast as anything can, with the very bytes dsh
//! sends for that call.
//!
//! The no-process call's 0.05 ms target is a round trip: the bench writes a
//! line, a daemon wakes, answers with three `session/update`s and the result,
//! and the bench reads them. Part of that is not any daemon's: the bench's own
//! client (tokio, one reader) and the kernel waking two processes. To tell that
//! part from dsh's, the bench runs this answerer as a second process (the bench
//! binary itself, started with [`ANSWERER_ENV`]): one thread, blocking reads and
//! writes, no runtime, and for each request line only what any JSON-RPC server
//! must do (parse it, put its id on the answer, one write of the four lines: the
//! three updates byte for byte as dsh wrote them, the answer serialized again with
//! the request's id). B1 and P1 time it interleaved with dsh, on the same client
//! code, so the client's own costs are in both.

use crate::*;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::ExitCode;
use tokio::io::AsyncBufReadExt;

/// Set to `<socket path> <reply file>` in the answerer's environment: the bench
/// binary then serves one connection as the answerer instead of benchmarking.
pub(crate) const ANSWERER_ENV: &str = "DSH_BENCH_ANSWERER";

/// What dsh sent for one no-process call: the updates as they were written, and
/// the answer, whose id the answerer replaces with each request's.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Reply {
    updates: Vec<String>,
    answer: Value,
}

impl Client {
    /// One no-process call, keeping the lines dsh sent for it (the reply the
    /// answerer repeats).
    pub(crate) async fn record_no_process_reply(&mut self, session: &str) -> Res<Reply> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "_dsh/tools/call",
            "params": {"sessionId": session, "name": "bash_output",
                       "arguments": {"task_id": "bash-0"}}}),
        )
        .await?;
        let mut updates = Vec::new();
        loop {
            let message = self.next_message().await?;
            if message.get("method").is_some() {
                updates.push(self.line.trim_end().to_string());
                continue;
            }
            if message["id"] != serde_json::json!(id) || message.get("error").is_some() {
                return Err(format!("unexpected answer: {message}"));
            }
            return Ok(Reply {
                updates,
                answer: message,
            });
        }
    }
}

/// The answerer process, and the bench's connection to it.
pub(crate) struct Answerer {
    _child: tokio::process::Child,
    pub(crate) client: Client,
}

impl Answerer {
    /// Starts the answerer in `dir` with `reply`, and connects to it.
    pub(crate) async fn start(dir: &Path, reply: &Reply) -> Res<Answerer> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let socket = dir.join("answerer.sock");
        let _ = std::fs::remove_file(&socket);
        let reply_file = dir.join("answerer-reply.json");
        let text = serde_json::to_string(reply).map_err(|e| e.to_string())?;
        std::fs::write(&reply_file, text).map_err(|e| format!("{}: {e}", reply_file.display()))?;
        let exe = std::env::current_exe().map_err(|e| format!("the bench's own path: {e}"))?;
        let mut child = tokio::process::Command::new(exe)
            .env(
                ANSWERER_ENV,
                format!("{} {}", socket.display(), reply_file.display()),
            )
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("start the answerer: {e}"))?;
        // It says "ready" once it listens.
        let stdout = child.stdout.take().ok_or("the answerer's stdout")?;
        let mut ready = String::new();
        tokio::time::timeout(
            REQUEST_LIMIT,
            tokio::io::BufReader::new(stdout).read_line(&mut ready),
        )
        .await
        .map_err(|_| "the answerer did not start")?
        .map_err(|e| format!("the answerer's stdout: {e}"))?;
        if ready.trim() != "ready" {
            return Err(format!("the answerer said {ready:?}"));
        }
        let client = Client::connect(&socket).await?;
        Ok(Answerer {
            _child: child,
            client,
        })
    }
}

/// The answerer's side (in the child process): serves one connection, then
/// exits. Every line is taken as a request.
pub(crate) fn serve(spec: &str) -> ExitCode {
    match serve_one(spec) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dsh bench answerer: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve_one(spec: &str) -> Res<()> {
    let (socket, reply_file) = spec
        .split_once(' ')
        .ok_or_else(|| format!("{ANSWERER_ENV} is not `<socket> <reply file>`: {spec:?}"))?;
    let text = std::fs::read_to_string(reply_file).map_err(|e| format!("{reply_file}: {e}"))?;
    let Reply {
        updates,
        mut answer,
    } = serde_json::from_str(&text).map_err(|e| format!("{reply_file}: {e}"))?;
    let listener = std::os::unix::net::UnixListener::bind(socket)
        .map_err(|e| format!("bind {socket}: {e}"))?;
    println!("ready");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let (stream, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut out = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Ok(());
        }
        let request: Value = serde_json::from_str(&line).map_err(|e| format!("{line:?}: {e}"))?;
        answer["id"] = request["id"].clone();
        out.clear();
        for update in &updates {
            out.extend_from_slice(update.as_bytes());
            out.push(b'\n');
        }
        serde_json::to_writer(&mut out, &answer).map_err(|e| e.to_string())?;
        out.push(b'\n');
        writer.write_all(&out).map_err(|e| format!("write: {e}"))?;
    }
}
