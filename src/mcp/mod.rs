//! The editor's MCP servers: started per session through the executor, their tools
//! offered to the model as `mcp__<server>__<tool>` and called through the same
//! waterfall as every other tool.
//!
//! A server is a [`ServiceProcess`] (so it is contained and accounted for like a
//! command: sandboxed under the sandbox executor, ended at shutdown with everything it
//! started) spoken to with rmcp's client over its pipes. dsh only translates at this
//! seam: the MCP protocol (handshake, versions, framing) is rmcp's.
//!
//! Lifecycle: [`SessionServers::start`] runs when a session is created or loaded; a
//! server that fails to start is reported and left out, one that dies later is reported
//! once and its tools are withdrawn (a call already made gets an error result); nothing
//! is restarted in a loop. [`SessionServers::stop`] ends them all (close, delete,
//! shutdown).

use crate::config::McpConfig;
use crate::exec::{
    BashExecutor, Collector, ExecRequest, ServiceHandle, ServiceProcess, SpillTarget,
};
use crate::hooks::waterfall::{ToolExecution, ToolOutput};
use crate::tools::schema::ToolSchema;
use crate::tools::{Tool, ToolKind};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// One stdio server an editor asked for (ACP `McpServerStdio`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    pub name: String,
    pub command: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// Where a session's servers run and what bounds their results.
pub struct ServerPlace<'a> {
    /// The session's cwd: the servers' working directory.
    pub cwd: PathBuf,
    /// The executor scope their processes are marked with. Not the session's own scope:
    /// closing a session keeps its background tasks but ends its servers.
    pub scope: String,
    /// Where the sandbox lets them write (the session's roots).
    pub writable_roots: Vec<PathBuf>,
    /// Where a result too long for the model is written whole.
    pub spill_dir: PathBuf,
    /// The bound of a result's text, as for a command's output.
    pub max_output_bytes: usize,
    pub config: &'a McpConfig,
}

/// A server's word to the person: it failed to start, or it stopped.
pub type ServerReport = Arc<dyn Fn(String) + Send + Sync>;

/// The running servers of one session and the tools they offer.
#[derive(Default)]
pub struct SessionServers {
    servers: Vec<Arc<Server>>,
    tools: Vec<Arc<dyn Tool>>,
}

/// One running server.
struct Server {
    name: String,
    client: RunningService<RoleClient, ()>,
    handle: ServiceHandle,
    /// Set when it ended without being asked to; its tools are then withdrawn.
    dead: AtomicBool,
    /// The last few KB it wrote to stderr: what a failure report quotes.
    stderr_tail: Arc<Mutex<Vec<u8>>>,
}

/// How much of a server's stderr a report quotes.
const STDERR_TAIL: usize = 2048;

impl SessionServers {
    /// Starts every server in `specs` (concurrently), initializes it and lists its
    /// tools. A server that cannot be started is reported through `report` and left out;
    /// a server that later dies is reported once.
    pub async fn start(
        exec: &Arc<dyn BashExecutor>,
        specs: &[ServerSpec],
        place: &ServerPlace<'_>,
        report: ServerReport,
    ) -> Self {
        let mut seen = std::collections::HashSet::new();
        let mut starts = Vec::new();
        for spec in specs {
            let key = tool_name_part(&spec.name);
            if !seen.insert(key) {
                report(format!(
                    "MCP server `{}` was not started: another server of this session has the same name",
                    spec.name
                ));
                continue;
            }
            starts.push(async move { (spec, start_server(exec, spec, place).await) });
        }
        let mut servers = SessionServers::default();
        for (spec, result) in futures::future::join_all(starts).await {
            match result {
                Ok((server, tools)) => {
                    watch_for_death(&server, report.clone());
                    for tool in tools {
                        let name = tool.schema().name();
                        // Two names that read the same after sanitizing or cutting would
                        // make one call run the other's tool: the later one is left out.
                        if servers.tools.iter().any(|t| t.schema().name() == name) {
                            report(format!(
                                "MCP tool `{name}` of server `{}` was left out: another tool of this session has the same name",
                                spec.name
                            ));
                            continue;
                        }
                        servers.tools.push(tool);
                    }
                    servers.servers.push(server);
                }
                Err(why) => report(format!(
                    "MCP server `{}` could not be started: {why}",
                    spec.name
                )),
            }
        }
        servers
    }

    /// The tools of every server that is running (a dead server's are withdrawn).
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.clone()
    }

    /// Ends every server and whatever it started; returns once they are gone.
    pub async fn stop(&self) {
        for server in &self.servers {
            // Asked to stop: not a death to report.
            server.dead.store(true, Ordering::SeqCst);
            server.client.cancellation_token().cancel();
        }
        for server in &self.servers {
            server.handle.stop().await;
        }
    }
}

/// Starts one server and lists its tools.
async fn start_server(
    exec: &Arc<dyn BashExecutor>,
    spec: &ServerSpec,
    place: &ServerPlace<'_>,
) -> Result<(Arc<Server>, Vec<Arc<dyn Tool>>), String> {
    let command = server_command(spec)?;
    let exec_spec = exec.resolve(ExecRequest {
        command,
        workdir: Some(place.cwd.clone()),
        timeout_ms: None,
        scope: Some(place.scope.clone()),
        writable_roots: place.writable_roots.clone(),
        call_id: None,
    });
    let ServiceProcess {
        stdin,
        stdout,
        mut stderr,
        handle,
    } = exec
        .start_service(exec_spec, spec.env.clone())
        .await
        .map_err(|e| e.to_string())?;
    let stderr_tail = Arc::new(Mutex::new(Vec::new()));
    let mut stderr_read = tokio::spawn({
        let tail = stderr_tail.clone();
        async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
                tail.extend_from_slice(&buf[..n]);
                let excess = tail.len().saturating_sub(STDERR_TAIL);
                tail.drain(..excess);
            }
        }
    });
    let quoted = |why: String| {
        let tail = stderr_tail.lock().unwrap_or_else(|p| p.into_inner());
        let text = String::from_utf8_lossy(&tail);
        match text.trim() {
            "" => why,
            said => format!("{why}; it wrote: {said}"),
        }
    };
    let timeout = Duration::from_millis(place.config.start_timeout_ms);
    let started = tokio::time::timeout(timeout, async {
        let client =
            ().serve((stdout, stdin))
                .await
                .map_err(|e| format!("the MCP handshake failed: {e}"))?;
        let tools = client
            .list_all_tools()
            .await
            .map_err(|e| format!("listing its tools failed: {e}"))?;
        Ok::<_, String>((client, tools))
    });
    let (client, listed) = match started.await {
        Ok(Ok(done)) => done,
        Ok(Err(why)) => {
            // A server that failed its handshake has usually exited: its stdout closed
            // first, and what it said on stderr may still be on its way (a race the
            // test of a refusing server showed about once in three runs).
            let _ = tokio::time::timeout(Duration::from_secs(1), &mut stderr_read).await;
            handle.stop().await;
            return Err(quoted(why));
        }
        Err(_) => {
            handle.stop().await;
            return Err(quoted(format!(
                "it did not answer within {} ms ([mcp] start_timeout_ms)",
                place.config.start_timeout_ms
            )));
        }
    };
    let server = Arc::new(Server {
        name: spec.name.clone(),
        client,
        handle,
        dead: AtomicBool::new(false),
        stderr_tail,
    });
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for tool in listed {
        let remote = tool.name.to_string();
        let name = qualified_name(&spec.name, &remote);
        let description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or_default()
            .to_string();
        let parameters = Value::Object((*tool.input_schema).clone());
        let schema = match ToolSchema::new(&name, &description, parameters) {
            Ok(schema) => Arc::new(schema),
            Err(why) => {
                tracing::warn!(server = %spec.name, tool = %remote, "tool left out: its input schema does not compile: {why}");
                continue;
            }
        };
        let read_only = tool
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        tools.push(Arc::new(McpTool {
            server: server.clone(),
            remote,
            schema,
            read_only,
            call_timeout: Duration::from_millis(place.config.call_timeout_ms),
            spill_dir: place.spill_dir.clone(),
            max_output_bytes: place.max_output_bytes,
        }));
    }
    Ok((server, tools))
}

/// Tells the person once when a server ends without being asked to.
fn watch_for_death(server: &Arc<Server>, report: ServerReport) {
    let server = server.clone();
    tokio::spawn(async move {
        server.handle.ended().cancelled().await;
        if !server.dead.swap(true, Ordering::SeqCst) {
            // Its pipes are closed: whatever is left of it goes too.
            server.handle.stop().await;
            let tail = server
                .stderr_tail
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let said = String::from_utf8_lossy(&tail);
            let said = said.trim();
            report(if said.is_empty() {
                format!(
                    "MCP server `{}` stopped; its tools are withdrawn",
                    server.name
                )
            } else {
                format!(
                    "MCP server `{}` stopped; its tools are withdrawn. It wrote: {said}",
                    server.name
                )
            });
        }
    });
}

/// The bash line that starts `spec`: the program exec'd with its arguments, every word
/// quoted. Its environment goes beside it ([`BashExecutor::start_service`]), not in it:
/// a command line is readable by every local user. The names are checked here.
fn server_command(spec: &ServerSpec) -> Result<String, String> {
    for (name, _) in &spec.env {
        if !crate::config::valid_env_name(name) {
            return Err(format!("`{name}` is not a valid environment variable name"));
        }
    }
    let mut line = String::from("exec ");
    line.push_str(&quote(&spec.command.to_string_lossy()));
    for arg in &spec.args {
        line.push(' ');
        line.push_str(&quote(arg));
    }
    Ok(line)
}

/// `word` in single quotes, as bash reads it back unchanged.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The part of a tool name a server or tool name gives: the characters models accept
/// in a function name (`[A-Za-z0-9_-]`), others as `_`.
fn tool_name_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `mcp__<server>__<tool>`, cut to the 64 characters function names may have.
pub fn qualified_name(server: &str, tool: &str) -> String {
    let mut name = format!("mcp__{}__{}", tool_name_part(server), tool_name_part(tool));
    name.truncate(64);
    name
}

/// One tool of one server, as the model sees it.
struct McpTool {
    server: Arc<Server>,
    /// Its name on the server.
    remote: String,
    schema: Arc<ToolSchema>,
    /// The server annotates it `readOnlyHint`: read-only mode may allow it (by a rule).
    read_only: bool,
    call_timeout: Duration,
    spill_dir: PathBuf,
    max_output_bytes: usize,
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn schema(&self) -> &Arc<ToolSchema> {
        &self.schema
    }

    fn kind(&self) -> ToolKind {
        if self.read_only {
            ToolKind::Read
        } else {
            ToolKind::Other
        }
    }

    fn read_only_hint(&self) -> bool {
        self.read_only
    }

    fn available(&self) -> bool {
        !self.server.dead.load(Ordering::SeqCst)
    }

    async fn call(&self, call: &ToolExecution) -> ToolOutput {
        if !self.available() {
            return ToolOutput::error(format!(
                "MCP server `{}` has stopped; its tools are no longer available",
                self.server.name
            ));
        }
        let arguments = call.arguments.as_object().cloned().unwrap_or_default();
        let request = CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments);
        let peer = self.server.client.peer().clone();
        // The server's end is watched too: a client waiting on a dead server's pipe may
        // not learn of it before its own timeout.
        let answer = tokio::select! {
            answer = tokio::time::timeout(self.call_timeout, peer.call_tool(request)) => answer,
            () = call.cancel.cancelled() => {
                return ToolOutput::error("the call was cancelled");
            }
            () = self.server.handle.ended().cancelled() => {
                return ToolOutput::error(format!(
                    "MCP server `{}` stopped during the call",
                    self.server.name
                ));
            }
        };
        let result = match answer {
            Err(_) => {
                return ToolOutput::error(format!(
                    "MCP tool `{}` did not answer within {} ms ([mcp] call_timeout_ms)",
                    self.remote,
                    self.call_timeout.as_millis()
                ));
            }
            Ok(Err(e)) => {
                let why = if self.server.dead.load(Ordering::SeqCst)
                    || self.server.handle.ended().is_cancelled()
                {
                    format!("MCP server `{}` stopped during the call", self.server.name)
                } else {
                    format!("MCP server `{}` failed the call: {e}", self.server.name)
                };
                return ToolOutput::error(why);
            }
            Ok(Ok(result)) => result,
        };
        let result = serde_json::to_value(&result).unwrap_or(Value::Null);
        let text = self.bounded(&result_text(&result), &call.call_id);
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            ToolOutput::error(text)
        } else {
            ToolOutput::ok(text)
        }
    }
}

impl McpTool {
    /// `text` bounded like a command's output: the tail kept, the whole spilled.
    fn bounded(&self, text: &str, call_id: &str) -> String {
        if text.len() <= self.max_output_bytes {
            return text.to_string();
        }
        let file_name = format!(
            "mcp-{}-{}.out",
            tool_name_part(&self.server.name),
            tool_name_part(call_id)
        );
        let collector = Collector::new(
            self.max_output_bytes,
            Some(SpillTarget {
                dir: self.spill_dir.clone(),
                file_name,
                from_first_byte: false,
            }),
        );
        collector.push(text.as_bytes());
        collector.close();
        let out = collector.collected();
        crate::tools::bash::section(&out.text, out.truncated, &out.spill)
    }
}

/// A tool result as text: text content as it is, other kinds described in one line,
/// the structured content when there is nothing else.
fn result_text(result: &Value) -> String {
    let mut parts = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or_default();
        let size = |k: &str| block.get(k).and_then(Value::as_str).map_or(0, str::len);
        parts.push(match field("type") {
            "text" => field("text").to_string(),
            "image" => format!(
                "[image: {}, {} bytes of base64]",
                field("mimeType"),
                size("data")
            ),
            "audio" => format!(
                "[audio: {}, {} bytes of base64]",
                field("mimeType"),
                size("data")
            ),
            "resource" => {
                let resource = block.get("resource").cloned().unwrap_or_default();
                let get = |k: &str| {
                    resource
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                match resource.get("text").and_then(Value::as_str) {
                    Some(text) => format!("[resource {}]\n{text}", get("uri")),
                    None => format!(
                        "[resource {}: {}, {} bytes of base64]",
                        get("uri"),
                        get("mimeType"),
                        get("blob").len()
                    ),
                }
            }
            "resource_link" => format!("[link: {} {}]", field("uri"), field("name")),
            other => format!("[{other} content]"),
        });
    }
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        return structured.to_string();
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_what_models_accept() {
        assert_eq!(
            qualified_name("github", "create_issue"),
            "mcp__github__create_issue"
        );
        assert_eq!(
            qualified_name("my server", "a.b/c"),
            "mcp__my_server__a_b_c"
        );
        assert_eq!(qualified_name(&"s".repeat(80), "t").len(), 64);
    }

    #[test]
    fn the_command_quotes_every_word_and_checks_env_names() {
        let spec = ServerSpec {
            name: "x".into(),
            command: "/usr/bin/my server".into(),
            args: vec!["it's".into(), "$HOME".into()],
            env: vec![("TOKEN".into(), "a b'c".into())],
        };
        assert_eq!(
            server_command(&spec).unwrap(),
            r"exec '/usr/bin/my server' 'it'\''s' '$HOME'"
        );
        let bad = ServerSpec {
            env: vec![("A=B".into(), "x".into())],
            ..spec
        };
        assert!(server_command(&bad).is_err());
    }

    #[test]
    fn results_read_as_text_with_other_kinds_in_one_line() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
            {"type": "resource_link", "uri": "file:///b", "name": "b"}
        ]});
        assert_eq!(
            result_text(&result),
            "hello\n[image: image/png, 4 bytes of base64]\n[resource file:///a]\nbody\n[link: file:///b b]"
        );
        assert_eq!(
            result_text(&json!({"content": [], "structuredContent": {"n": 1}})),
            r#"{"n":1}"#
        );
    }
}
