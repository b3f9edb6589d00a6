//! M1 (issue 17): what dsh adds to an MCP tool call. The same `echo` tool of the same
//! kind of server (examples/mcp_fixture.rs) called through the daemon (`_dsh/tools/call`
//! in a session whose client passed the server: protocol, waterfall, rmcp client) and
//! called directly by this benchmark with rmcp's client over the server's pipes,
//! interleaved.

use super::*;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;

/// The fixture server cargo builds with the examples (same profile as the daemon).
fn fixture() -> Res<PathBuf> {
    let path = dsh_bin()
        .parent()
        .ok_or("the daemon binary has no directory")?
        .join("examples/mcp_fixture");
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{} is missing: build it with `cargo build --release --example mcp_fixture`",
            path.display()
        ))
    }
}

pub(crate) async fn m1(env: &Env) -> Res<Outcome> {
    let n = env.counts.b1_calls;
    let server = fixture()?;
    let config = "[permissions]\ndefault_mode = \"auto\"\n";
    let daemon = Daemon::start_with(&env.root, "m1", config).await?;
    let mut client = daemon.client().await?;
    let r = client
        .request(
            "session/new",
            json!({"cwd": env.work, "mcpServers": [
                {"name": "fx", "command": server, "args": [], "env": []}
            ]}),
            REQUEST_LIMIT,
        )
        .await?;
    let session = r["sessionId"]
        .as_str()
        .ok_or_else(|| format!("session/new without a sessionId: {r}"))?
        .to_string();
    let mut child = tokio::process::Command::new(&server)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("start {}: {e}", server.display()))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("the direct server has no pipes".into());
    };
    let direct = ()
        .serve((stdout, stdin))
        .await
        .map_err(|e| format!("MCP handshake with the direct server: {e}"))?;
    let args = json!({"text": "hi"});
    let call_direct = || async {
        let arguments = args.as_object().cloned().unwrap_or_default();
        let result = direct
            .call_tool(CallToolRequestParams::new("echo").with_arguments(arguments))
            .await
            .map_err(|e| format!("direct echo: {e}"))?;
        if result.is_error == Some(true) {
            return Err(format!("direct echo failed: {result:?}"));
        }
        Ok::<(), String>(())
    };
    for _ in 0..env.counts.warmup {
        through_dsh(&mut client, &session, &args).await?;
        call_direct().await?;
    }
    let (mut via, mut base) = (Vec::with_capacity(n), Vec::with_capacity(n));
    // A call that runs nothing (B1's), to split what dsh adds into protocol + waterfall
    // and the leg to the server.
    let mut floor = Vec::with_capacity(n);
    for i in 0..n {
        floor.push(timed(client.no_process_call(&session)).await?.0);
        if i % 2 == 0 {
            via.push(timed(through_dsh(&mut client, &session, &args)).await?.0);
            base.push(timed(call_direct()).await?.0);
        } else {
            base.push(timed(call_direct()).await?.0);
            via.push(timed(through_dsh(&mut client, &session, &args)).await?.0);
        }
    }
    drop(client);
    daemon.stop().await?;
    let _ = direct.cancel().await;
    let (d, b, f) = (Stats::of(&via), Stats::of(&base), Stats::of(&floor));
    Ok(Outcome {
        rows: vec![Row {
            id: "M1",
            scenario: format!("{n} calls of an MCP server's `echo` tool"),
            metric: "median latency",
            unit: "ms",
            dsh: d.p50,
            baseline: Some(b.p50),
            ratio: Some(d.p50 / b.p50),
            target: Target::RatioAtMost(1.2),
        }],
        notes: vec![
            d.line("M1 through dsh (session, waterfall)"),
            b.line("M1 direct (rmcp client, same server)"),
            f.line("M1 no-process call (protocol + waterfall)"),
            format!(
                "M1 dsh adds {:.3} ms a call; a call that reaches no server costs {:.3} ms",
                d.p50 - b.p50,
                f.p50
            ),
        ],
        details: json!({"dsh": d.json(), "direct": b.json(), "no_process_call": f.json()}),
    })
}

/// One `echo` call through the daemon, as the session.
async fn through_dsh(client: &mut Client, session: &str, args: &serde_json::Value) -> Res<()> {
    match client
        .tool(session, "mcp__fx__echo", args.clone(), REQUEST_LIMIT)
        .await?
    {
        (text, false) if text == "hi" => Ok(()),
        other => Err(format!("mcp__fx__echo gave {other:?}")),
    }
}
