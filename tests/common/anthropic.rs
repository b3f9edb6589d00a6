//! A scripted Anthropic Messages endpoint (`/v1/messages`, streamed), for driving a real
//! Claude Code offline: a request whose tools include `Bash` and whose last message
//! holds the command in the server's command file (the test writes it, and prompts with
//! it) gets a streamed `tool_use` of `Bash` with that command, once; anything else gets
//! the text `done`. `count_tokens` and other paths get a small JSON answer. Every request is
//! appended to the log file. A real process (Python's http.server), killed when dropped.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

const SERVER: &str = r#"
log_path, command_path = sys.argv[1], sys.argv[2]
class H(Scripted):
    def do_POST(self):
        body = self.body()
        with open(log_path, "a") as log:
            log.write(json.dumps({"path": self.path, "body": body}) + "\n")
        if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
            return self.answer("application/json", json.dumps({"input_tokens": 10}).encode())
        msgs = body.get("messages") or [{}]
        content = msgs[-1].get("content")
        texts = [c.get("text", "") for c in content if isinstance(c, dict)] if isinstance(content, list) else [str(content)]
        command = open(command_path).read().strip()
        # The prompt that carries the command asks for it once (a refused call's result
        # can arrive in the same message as the next prompt).
        wanted = command != "" and any(command in t for t in texts)
        tools = [t.get("name") for t in body.get("tools") or []]
        events = [("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message",
                   "role": "assistant", "model": body.get("model"), "content": [], "stop_reason": None,
                   "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})]
        if "Bash" in tools and wanted:
            open(command_path, "w").close()
            block = {"type": "tool_use", "id": "toolu_%d" % len(msgs), "name": "Bash", "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps({"command": command, "description": "scripted"})}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": "done"}
            stop = "end_turn"
        events += [("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
                   ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
                   ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                   ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": 5}}),
                   ("message_stop", {"type": "message_stop"})]
        self.answer("text/event-stream",
                    "".join("event: %s\ndata: %s\n\n" % (t, json.dumps(d)) for t, d in events).encode())
    do_GET = do_POST
serve(H)
"#;

/// The running endpoint.
pub struct ScriptedAnthropic {
    _child: tokio::process::Child,
    /// `http://127.0.0.1:PORT`, for `ANTHROPIC_BASE_URL`.
    pub base_url: String,
    command_file: PathBuf,
    /// One JSON line per request: `{"path", "body"}`.
    pub log: PathBuf,
}

impl ScriptedAnthropic {
    /// Starts it, its files in `dir`.
    pub async fn start(dir: &Path) -> Self {
        let script = dir.join("anthropic.py");
        let log = dir.join("anthropic.log");
        let command_file = dir.join("anthropic.command");
        std::fs::write(&command_file, "").unwrap();
        let (child, port) = super::python_server(&script, SERVER, &[&log, &command_file]).await;
        Self {
            _child: child,
            base_url: format!("http://127.0.0.1:{port}"),
            command_file,
            log,
        }
    }

    /// The command the next `Bash` tool use carries.
    pub fn next_command(&self, command: &str) {
        std::fs::write(&self.command_file, command).unwrap();
    }
}

/// `@zed-industries/claude-agent-acp` at the pinned version, installed from npm into
/// `target/test-agents` (scripts/test does it ahead; a test does it once if missing).
/// `None` only when npm is absent (the caller says the test is skipped); an install that
/// fails fails the test.
pub fn claude_agent_acp() -> Option<PathBuf> {
    npm_agent(CLAUDE_AGENT_ACP, "claude-agent-acp")
}

/// The program `bin` of the npm package `package` (pinned, `name@version`), installed
/// into `target/test-agents` when it is not there yet; `None` when npm is absent.
pub fn npm_agent(package: &str, bin: &str) -> Option<PathBuf> {
    static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-agents");
    let bin = dir.join("node_modules/.bin").join(bin);
    if bin.exists() {
        return Some(bin);
    }
    if std::process::Command::new("npm")
        .arg("--version")
        .output()
        .is_err()
    {
        return None;
    }
    let out = std::process::Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .arg(package)
        .output()
        .expect("run npm");
    assert!(
        out.status.success() && bin.exists(),
        "npm install {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(bin)
}

/// The adapter's pinned version (Claude Code 2.1.83 inside).
pub const CLAUDE_AGENT_ACP: &str = "@zed-industries/claude-agent-acp@0.23.1";
