//! A scripted Gemini API endpoint (`GOOGLE_GEMINI_BASE_URL`), for driving a real Gemini
//! CLI offline: a `generateContent`/`streamGenerateContent` request whose last message
//! holds the command in the server's command file (the test writes it, and prompts
//! with it) and that offers the shell tool gets a `functionCall` of `run_shell_command` with that command, once;
//! anything else gets the text `done`; `countTokens` a count. A real process (Python's
//! http.server), killed when dropped.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

const SERVER: &str = r#"
command_path = sys.argv[1]
class H(Scripted):
    def do_POST(self):
        body = self.body()
        if "countTokens" in self.path:
            return self.answer("application/json", b'{"totalTokens": 10}')
        contents = body.get("contents") or [{}]
        texts = " ".join(p.get("text", "") for p in contents[-1].get("parts") or [])
        command = open(command_path).read().strip()
        # Only the agent's own turn offers its tools (its router and title calls do not).
        tools = [f.get("name") for t in body.get("tools") or [] for f in t.get("functionDeclarations") or []]
        config = body.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json":
            # Its helper calls (the model router's classifier) want JSON of a schema:
            # an answer of that shape, so they do not retry with backoff.
            fill = {"STRING": "scripted", "INTEGER": 1, "NUMBER": 1, "BOOLEAN": False}
            props = (config.get("responseJsonSchema") or {}).get("properties") or {}
            part = {"text": json.dumps({k: fill.get(str(v.get("type")).upper(), "scripted")
                                        for k, v in props.items()})}
        elif command and command in texts and "run_shell_command" in tools:
            open(command_path, "w").close()
            part = {"functionCall": {"name": "run_shell_command",
                                     "args": {"command": command, "description": "scripted"}}}
        else:
            part = {"text": "done"}
        answer = {"candidates": [{"content": {"role": "model", "parts": [part]},
                                  "finishReason": "STOP", "index": 0}],
                  "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                                    "totalTokenCount": 15}}
        if "alt=sse" in self.path:
            self.answer("text/event-stream", ("data: " + json.dumps(answer) + "\r\n\r\n").encode())
        else:
            self.answer("application/json", json.dumps(answer).encode())
    do_GET = do_POST
serve(H)
"#;

/// The running endpoint.
pub struct ScriptedGemini {
    _child: tokio::process::Child,
    /// `http://127.0.0.1:PORT`, for `GOOGLE_GEMINI_BASE_URL`.
    pub base_url: String,
    command_file: PathBuf,
}

impl ScriptedGemini {
    /// Starts it, its files in `dir`.
    pub async fn start(dir: &Path) -> Self {
        let script = dir.join("gemini.py");
        let command_file = dir.join("gemini.command");
        std::fs::write(&command_file, "").unwrap();
        let (child, port) = super::python_server(&script, SERVER, &[&command_file]).await;
        Self {
            _child: child,
            base_url: format!("http://127.0.0.1:{port}"),
            command_file,
        }
    }

    /// The command the next `run_shell_command` call carries.
    pub fn next_command(&self, command: &str) {
        std::fs::write(&self.command_file, command).unwrap();
    }
}

/// Gemini CLI's pinned version (its ACP mode is `--acp`).
pub const GEMINI_CLI: &str = "@google/gemini-cli@0.61.0";
