//! `dsh acp --agent NAME` (issue 44): before the editor's first byte, the launcher asks
//! the daemon to serve this connection with the `[[agents]]` entry NAME, and says on
//! stderr (for the editor's log) why it could not.

use dsh::rpc::socket::{SocketReader, SocketWriter};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest answer to `_dsh/wrap` read back (an error message included).
const ANSWER_LIMIT: usize = 64 * 1024;

/// Sends `_dsh/wrap` for `agent` (working in this process's cwd) and reads its answer.
/// Byte by byte, so nothing after the answer's line is taken from the editor's stream.
pub async fn ask_for_agent(
    agent: &str,
    from_daemon: &mut SocketReader,
    to_daemon: &mut SocketWriter,
) -> Result<(), String> {
    let cwd = std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?;
    let line = dsh::wrap::wrap_request_line(agent, &cwd);
    to_daemon
        .write_all(line.as_bytes())
        .await
        .map_err(|e| format!("cannot ask the daemon for agent `{agent}`: {e}"))?;
    let mut answer = Vec::new();
    loop {
        let mut byte = [0u8; 1];
        let n = from_daemon
            .read(&mut byte)
            .await
            .map_err(|e| format!("the daemon did not answer for agent `{agent}`: {e}"))?;
        if n == 0 || answer.len() > ANSWER_LIMIT {
            return Err(format!("the daemon did not answer for agent `{agent}`"));
        }
        if byte[0] == b'\n' {
            break;
        }
        answer.push(byte[0]);
    }
    let answer: serde_json::Value = serde_json::from_slice(&answer)
        .map_err(|e| format!("the daemon's answer for agent `{agent}` is not JSON: {e}"))?;
    match answer.get("error") {
        None => Ok(()),
        Some(error) => Err(format!(
            "agent `{agent}`: {}",
            error["message"].as_str().unwrap_or("refused")
        )),
    }
}
