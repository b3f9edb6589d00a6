//! External hook programs (`[[hooks.command]]`): the user's own policy code.
//!
//! The program gets one JSON object on stdin (`sessionId`, `cwd`, `tool`,
//! `arguments`, `callId`) and answers on stdout with
//! `{"decision": "allow"|"deny"|"ask", "reason": "..."}`. Exit code 2 is a deny with
//! stderr as the reason. Everything else that is not a clean answer (another exit
//! code, a crash, a timeout, unreadable output) is a deny that says what went
//! wrong: a broken policy must not open the door (fail closed).

use super::waterfall::{Hook, Next, ToolExecution, ToolOutput};
use crate::config::{Decision, ExternalHookConfig};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How much of a hook's stdout/stderr is read; an answer is a short JSON object.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// One configured external hook program.
pub struct ExternalHook {
    config: ExternalHookConfig,
    name: String,
}

impl ExternalHook {
    pub fn new(config: ExternalHookConfig) -> Self {
        let program = config.argv.first().cloned().unwrap_or_default();
        Self {
            name: format!("hook {program}"),
            config,
        }
    }

    fn applies_to(&self, tool: &str) -> bool {
        self.config.tools.is_empty() || self.config.tools.iter().any(|t| t == tool)
    }

    /// Runs the program for `call` and returns its decision and reason.
    pub async fn consult(&self, call: &ToolExecution) -> (Decision, String) {
        let input = serde_json::json!({
            "sessionId": call.session_id(),
            "cwd": call.session.as_ref().map(|s| s.cwd.display().to_string()),
            "tool": call.tool,
            "arguments": call.arguments,
            "callId": call.call_id,
        });
        let timeout = Duration::from_millis(self.config.timeout_ms);
        match tokio::time::timeout(timeout, self.exchange(input.to_string())).await {
            Ok(Ok(decision)) => decision,
            Ok(Err(reason)) => (Decision::Deny, reason),
            Err(_) => (
                Decision::Deny,
                format!("did not answer within {}ms", self.config.timeout_ms),
            ),
        }
    }

    async fn exchange(&self, input: String) -> Result<(Decision, String), String> {
        let (program, args) = self
            .config
            .argv
            .split_first()
            .ok_or_else(|| "empty argv".to_string())?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A timed-out hook is dropped with this future; it must not linger.
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start: {e}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A hook that exits without reading its input is not an error here;
            // its answer (or exit code) decides.
            let _ = stdin.write_all(input.as_bytes()).await;
        }
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let out = child.stdout.take().map(|s| s.take(MAX_ANSWER_BYTES));
        let err = child.stderr.take().map(|s| s.take(MAX_ANSWER_BYTES));
        let (status, _, _) = tokio::join!(
            child.wait(),
            async {
                if let Some(mut o) = out {
                    let _ = o.read_to_end(&mut stdout).await;
                }
            },
            async {
                if let Some(mut e) = err {
                    let _ = e.read_to_end(&mut stderr).await;
                }
            }
        );
        let status = status.map_err(|e| format!("wait failed: {e}"))?;
        let stderr = String::from_utf8_lossy(&stderr).trim().to_string();
        match status.code() {
            Some(0) => parse_answer(&stdout),
            Some(2) => Ok((
                Decision::Deny,
                if stderr.is_empty() {
                    "denied (exit code 2)".to_string()
                } else {
                    stderr
                },
            )),
            Some(code) => Err(format!("failed with exit code {code}: {stderr}")),
            None => {
                use std::os::unix::process::ExitStatusExt;
                Err(format!(
                    "crashed (signal {})",
                    status.signal().unwrap_or_default()
                ))
            }
        }
    }
}

#[derive(serde::Deserialize)]
struct Answer {
    decision: Decision,
    #[serde(default)]
    reason: Option<String>,
}

fn parse_answer(stdout: &[u8]) -> Result<(Decision, String), String> {
    let answer: Answer = serde_json::from_slice(stdout).map_err(|e| {
        let shown: String = String::from_utf8_lossy(stdout).chars().take(200).collect();
        format!("unreadable answer ({e}): {shown:?}")
    })?;
    Ok((answer.decision, answer.reason.unwrap_or_default()))
}

#[async_trait::async_trait]
impl Hook for ExternalHook {
    fn name(&self) -> &str {
        &self.name
    }

    async fn handle(&self, call: &ToolExecution, next: Next<'_>) -> ToolOutput {
        if !self.applies_to(&call.tool) {
            return next.run(call).await;
        }
        let (decision, reason) = self.consult(call).await;
        match decision {
            Decision::Deny => call.veto(&self.name, &reason),
            other => {
                call.tighten(other, &self.name, &reason, Vec::new());
                next.run(call).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse() {
        assert_eq!(
            parse_answer(br#"{"decision":"ask","reason":"why"}"#).unwrap(),
            (Decision::Ask, "why".into())
        );
        assert_eq!(
            parse_answer(br#"{"decision":"allow"}"#).unwrap().0,
            Decision::Allow
        );
        assert!(parse_answer(b"yes please").is_err());
        assert!(parse_answer(br#"{"decision":"maybe"}"#).is_err());
    }
}
