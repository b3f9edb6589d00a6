//! A stdio MCP server for dsh's tests and benchmark, built on rmcp's server side.
//!
//! Tools: `echo` (annotated read-only), `add`, `slow` (sleeps), `crash` (the process
//! exits mid-call), `spawn` (starts a long `sleep` child and answers its pid), `detach` (the
//! same in a session of its own, as a daemon would), `big`
//! (a long result), `whoami` (its cwd, `FIXTURE_TOKEN` and pid) and `touch` (creates a file,
//! so a test can prove a denied call never ran).
//!
//! `mcp_fixture --hang` never answers. `mcp_fixture --fail` writes a line to stderr and exits at once (a server that cannot
//! start).

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use std::sync::Arc;

struct Fixture;

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else {
        unreachable!("every schema here is an object")
    };
    Tool::new(name, description, Arc::new(schema))
}

fn tools() -> Vec<Tool> {
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required});
    vec![
        tool(
            "echo",
            "Answers its text",
            object(json!({"text": {"type": "string"}}), &["text"]),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        tool(
            "add",
            "Adds two integers",
            object(
                json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
                &["a", "b"],
            ),
        ),
        tool(
            "slow",
            "Sleeps ms milliseconds",
            object(json!({"ms": {"type": "integer"}}), &["ms"]),
        ),
        tool("crash", "Exits the server mid-call", object(json!({}), &[])),
        tool(
            "spawn",
            "Starts a long sleep and answers its pid",
            object(json!({}), &[]),
        ),
        tool(
            "detach",
            "Starts a long sleep in a session of its own and answers its pid",
            object(json!({}), &[]),
        ),
        tool(
            "big",
            "Answers `bytes` x's and END",
            object(json!({"bytes": {"type": "integer"}}), &["bytes"]),
        ),
        tool(
            "whoami",
            "Answers its cwd, FIXTURE_TOKEN and pid",
            object(json!({}), &[]),
        ),
        tool(
            "touch",
            "Creates the file at path",
            object(json!({"path": {"type": "string"}}), &["path"]),
        ),
    ]
}

fn text(t: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(t)]).into())
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let int = |k: &str| args.get(k).and_then(Value::as_i64).unwrap_or(0);
        let string = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        match &*request.name {
            "echo" => text(string("text")),
            "add" => text((int("a") + int("b")).to_string()),
            "slow" => {
                tokio::time::sleep(std::time::Duration::from_millis(int("ms") as u64)).await;
                text("slept")
            }
            "crash" => {
                eprintln!("fixture: crashing on purpose");
                std::process::exit(3)
            }
            "spawn" => match std::process::Command::new("sleep").arg("300").spawn() {
                Ok(child) => text(child.id().to_string()),
                Err(e) => Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())]).into()),
            },
            "detach" => match std::process::Command::new("setsid")
                .args(["-f", "sh", "-c", "echo $$; exec sleep 300 >/dev/null 2>&1"])
                .stdout(std::process::Stdio::piped())
                .output()
            {
                Ok(out) => text(String::from_utf8_lossy(&out.stdout).trim().to_string()),
                Err(e) => Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())]).into()),
            },
            "big" => text(format!("{}END", "x".repeat(int("bytes") as usize))),
            "whoami" => text(format!(
                "{} {} {}",
                std::env::current_dir().unwrap_or_default().display(),
                std::env::var("FIXTURE_TOKEN").unwrap_or_default(),
                std::process::id()
            )),
            "touch" => match std::fs::write(string("path"), "") {
                Ok(()) => text("touched"),
                Err(e) => Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())]).into()),
            },
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if std::env::args().any(|a| a == "--hang") {
        // Never answers `initialize`: a server that does not start.
        std::future::pending::<()>().await;
    }
    if std::env::args().any(|a| a == "--fail") {
        eprintln!("fixture: refusing to start");
        std::process::exit(2);
    }
    let service = match Fixture.serve(rmcp::transport::stdio()).await {
        Ok(service) => service,
        Err(e) => {
            eprintln!("fixture: {e}");
            std::process::exit(1);
        }
    };
    let _ = service.waiting().await;
}
