//! W1 (issue 44): what dsh adds to a wrapped agent's turn. The same scripted ACP agent
//! (a Python process that asks `session/request_permission` about a command, then
//! answers with an update and `end_turn`) driven by this benchmark as an editor would:
//! through `dsh acp --agent w` (the launcher, the daemon's pass-through with ids mapped,
//! its own session, and the question judged by the waterfall, allowed by a rule) and
//! directly over the agent's stdio (the bench answers the question at once, as an
//! editor whose user never hesitates), interleaved.

use super::*;

/// The scripted agent: nothing but ACP, so the turn's cost is the protocol's.
const AGENT: &str = r#"
import json, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
asks = 0
for line in sys.stdin:
    m = json.loads(line)
    method, mid, p = m.get("method"), m.get("id"), m.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "w1"}})
    elif method == "session/prompt":
        asks += 1
        send({"jsonrpc": "2.0", "id": f"q{asks}", "method": "session/request_permission", "params": {
              "sessionId": p["sessionId"],
              "toolCall": {"toolCallId": f"c{asks}", "title": "true", "kind": "execute",
                           "rawInput": {"command": "true", "description": "w1"}},
              "options": [{"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
                          {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"}]}})
        answer = json.loads(sys.stdin.readline())
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": p["sessionId"],
              "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"}}}})
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "unknown"}})
"#;

/// A client over a child's stdio (the child killed when dropped).
async fn over_child(cmd: &mut tokio::process::Command) -> Res<(tokio::process::Child, Client)> {
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("start {cmd:?}: {e}"))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("a child without pipes".into());
    };
    let client = Client::over(Box::new(stdout), Box::new(stdin)).await?;
    Ok((child, client))
}

/// One turn: a prompt answered with `end_turn`.
async fn turn(client: &mut Client, session: &str) -> Res<()> {
    let r = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
            REQUEST_LIMIT,
        )
        .await?;
    if r["stopReason"] != "end_turn" {
        return Err(format!("a turn ended with {r}"));
    }
    Ok(())
}

pub(crate) async fn w1(env: &Env) -> Res<Outcome> {
    let n = env.counts.b7_turns;
    let script = env.root.join("w1-agent.py");
    std::fs::write(&script, AGENT).map_err(|e| e.to_string())?;
    let config = format!(
        "[permissions]\ndefault_mode = \"ask\"\n[[permissions.rules]]\ntool = \"bash\"\n\
         command = \"true\"\naction = \"allow\"\n[[agents]]\nname = \"w\"\n\
         command = [\"python3\", {:?}]\n",
        script.display().to_string()
    );
    let daemon = Daemon::start_with(&env.root, "w1", &config).await?;
    let mut launcher = tokio::process::Command::new(dsh_bin());
    launcher
        .args(["acp", "--agent", "w", "--socket"])
        .arg(&daemon.socket)
        .current_dir(&env.work);
    let (_launcher, mut via) = over_child(&mut launcher).await?;
    let (_agent, mut direct) =
        over_child(tokio::process::Command::new("python3").arg(&script)).await?;
    let mut sessions = Vec::new();
    for client in [&mut via, &mut direct] {
        let r = client
            .request(
                "session/new",
                json!({"cwd": env.work, "mcpServers": []}),
                REQUEST_LIMIT,
            )
            .await?;
        sessions.push(r["sessionId"].as_str().unwrap_or_default().to_string());
    }
    let (s_via, s_direct) = (sessions[0].clone(), sessions[1].clone());
    for _ in 0..env.counts.warmup {
        turn(&mut via, &s_via).await?;
        turn(&mut direct, &s_direct).await?;
    }
    let (mut d, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if i % 2 == 0 {
            d.push(timed(turn(&mut via, &s_via)).await?.0);
            b.push(timed(turn(&mut direct, &s_direct)).await?.0);
        } else {
            b.push(timed(turn(&mut direct, &s_direct)).await?.0);
            d.push(timed(turn(&mut via, &s_via)).await?.0);
        }
    }
    if via.asked != 0 {
        return Err(format!("dsh put {} questions to the editor", via.asked));
    }
    drop(via);
    daemon.stop().await?;
    let (d, b) = (Stats::of(&d), Stats::of(&b));
    Ok(Outcome {
        rows: vec![Row {
            id: "W1",
            scenario: format!("{n} turns of a scripted ACP agent asking one question"),
            metric: "median turn",
            unit: "ms",
            dsh: d.p50,
            baseline: Some(b.p50),
            ratio: Some(d.p50 / b.p50),
            target: Target::Reported,
        }],
        notes: vec![
            d.line("W1 through dsh acp --agent (question judged by a rule)"),
            b.line("W1 the agent driven directly (question answered at once)"),
            format!("W1 dsh adds {:.3} ms a turn", d.p50 - b.p50),
        ],
        details: json!({"dsh": d.json(), "direct": b.json()}),
    })
}
