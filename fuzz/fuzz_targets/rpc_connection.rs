//! The JSON-RPC line reader and dispatcher with the daemon's real ACP service
//! behind it: arbitrary bytes from a client, as one connection.
//!
//! Checked, besides "no panic, no hang" (libFuzzer aborts on a panic in any
//! task): every line the daemon writes back is a JSON-RPC 2.0 object, every
//! error carries an integer code and a message, and the connection always
//! ends once the client's side is closed.
//!
//! The service has no executor (no process is ever started) and no model; its
//! state lives in a fresh temporary directory per input, so inputs do not
//! influence each other.

#![no_main]

use dsh::acp::AcpService;
use dsh::config::{Config, ExecutorKind};
use dsh::hooks::audit::AuditLog;
use dsh::registry::SessionRegistry;
use dsh::rpc::{Options, Service, serve_connection};
use dsh::tools::ToolRegistry;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::{Arc, OnceLock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}

fn agent(state: &std::path::Path) -> Arc<AcpService> {
    let mut config = Config::default();
    config.exec.kind = ExecutorKind::None;
    config.exec.state_dir = Some(state.to_path_buf());
    let sessions = Arc::new(SessionRegistry::new(config.permissions.default_mode));
    let tools = Arc::new(ToolRegistry::standard(
        &config,
        None,
        sessions.clone(),
        Arc::new(AuditLog::disabled()),
    ));
    // `_dsh/stop` cancels this token; nothing here waits on it.
    let shutdown = tokio_util::sync::CancellationToken::new();
    AcpService::new(config, None, None, sessions, tools, shutdown)
}

fn check_line(line: &[u8]) {
    let message: Value = serde_json::from_slice(line).unwrap_or_else(|e| {
        panic!(
            "the daemon wrote a line that is not JSON ({e}): {}",
            String::from_utf8_lossy(line)
        )
    });
    assert_eq!(message["jsonrpc"], "2.0", "{message}");
    if let Some(error) = message.get("error") {
        assert!(error["code"].is_i64(), "{message}");
        assert!(error["message"].is_string(), "{message}");
        assert!(
            message.get("id").is_some(),
            "an error without an id: {message}"
        );
    } else if message.get("method").is_none() {
        assert!(message.get("result").is_some(), "{message}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(state) = tempfile::tempdir() else {
        return;
    };
    let service: Arc<dyn Service> = agent(state.path());
    runtime().block_on(async move {
        // A small pipe buffer, so lines arrive split across many reads.
        let (client, server) = tokio::io::duplex(61);
        let (server_read, server_write) = tokio::io::split(server);
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let options = Options {
            max_line_bytes: 1024,
            outgoing_queue: 64,
            request_timeout: None,
            ..Options::default()
        };
        let conn = tokio::spawn(serve_connection(
            server_read,
            server_write,
            service,
            options,
        ));
        let input = data.to_vec();
        let writer = tokio::spawn(async move {
            // The peer may have gone already (a full queue ends the connection).
            let _ = client_write.write_all(&input).await;
            let _ = client_write.shutdown().await;
        });
        let mut output = Vec::new();
        let _ = client_read.read_to_end(&mut output).await;
        writer.await.expect("writer task");
        conn.await.expect("connection task");
        for line in output.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            check_line(line);
        }
        assert!(
            output.is_empty() || output.ends_with(b"\n"),
            "a torn last line"
        );
    });
});
