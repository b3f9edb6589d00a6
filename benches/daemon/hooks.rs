//! H1 (issue 13): what a hook costs a call. The same `bash true` calls through three
//! daemons, interleaved: one with no hook, one with a trivial `allow` hook as a
//! long-lived server (JSON-RPC over its stdio), one with the same hook spawned per call.
//!
//! H2 (issue 30): five matching spawned hooks of 50 ms each on every call, asked at once
//! (the default), against the same five asked one after another (`sequential = true`)
//! and a daemon with no hook, interleaved; the target is the five at once's median.
//!
//! L1 (issue 15): what live output costs a call. `printf x` calls (output, so a live
//! update is built and sent) through a session whose client reads every update, against
//! the same calls made outside any session (no watcher, no updates), interleaved.

use super::*;
use serde_json::Value;

/// A hook server that allows every call; Python, as a hook author would write it.
const SERVER_HOOK: &str = r#"#!/usr/bin/env python3
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {"decision": "allow"}}) + "\n")
    sys.stdout.flush()
"#;

/// The same answer from a program spawned per call.
const SPAWNED_HOOK: &str = "#!/bin/sh\ncat > /dev/null\necho '{\"decision\":\"allow\"}'\n";

fn write_hook(dir: &Path, name: &str, body: &str) -> Res<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, body).map_err(|e| format!("write {}: {e}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    Ok(path)
}

fn hook_config(path: &Path, run: &str) -> String {
    format!(
        "[permissions]\ndefault_mode = \"auto\"\n[[hooks.command]]\nargv = [{:?}]\nrun = \"{run}\"\n",
        path.display().to_string()
    )
}

pub(crate) async fn h1(env: &Env) -> Res<Outcome> {
    let n = env.counts.b1_calls;
    let server = write_hook(&env.root, "allow-server.py", SERVER_HOOK)?;
    let spawned = write_hook(&env.root, "allow-spawned.sh", SPAWNED_HOOK)?;
    let plain = Daemon::start_with(
        &env.root,
        "h1-none",
        "[permissions]\ndefault_mode = \"auto\"\n",
    )
    .await?;
    let with_server =
        Daemon::start_with(&env.root, "h1-server", &hook_config(&server, "server")).await?;
    let with_spawn =
        Daemon::start_with(&env.root, "h1-spawn", &hook_config(&spawned, "spawn")).await?;
    let mut clients = Vec::new();
    for daemon in [&plain, &with_server, &with_spawn] {
        let mut client = daemon.client().await?;
        let session = client.new_session(&env.work).await?;
        for _ in 0..env.counts.warmup {
            client.bash_true(&session).await?;
        }
        clients.push((client, session));
    }
    let mut times: [Vec<Duration>; 3] = Default::default();
    for i in 0..n {
        // Rotate which goes first, so none always follows another.
        for k in 0..3 {
            let j = (i + k) % 3;
            let (client, session) = &mut clients[j];
            times[j].push(timed(client.bash_true(session)).await?.0);
        }
    }
    drop(clients);
    for daemon in [plain, with_server, with_spawn] {
        daemon.stop().await?;
    }
    let [none, srv, spn] = [
        Stats::of(&times[0]),
        Stats::of(&times[1]),
        Stats::of(&times[2]),
    ];
    // The spawned hook's cost is reported, not judged (the issue asks for its figure).
    let rows = vec![Row {
        id: "H1",
        scenario: format!("{n} `bash true` calls with an allow hook as a server"),
        metric: "median latency",
        unit: "ms",
        dsh: srv.p50,
        baseline: Some(none.p50),
        ratio: Some(srv.p50 / none.p50),
        target: Target::RatioAtMost(1.10),
    }];
    Ok(Outcome {
        rows,
        notes: vec![
            none.line("H1 no hook        "),
            srv.line("H1 server hook    "),
            spn.line("H1 spawned hook   "),
            format!(
                "H1 a server hook adds {:.3} ms a call, a spawned one {:.3} ms",
                srv.p50 - none.p50,
                spn.p50 - none.p50
            ),
        ],
        details: json!({"none": none.json(), "server": srv.json(), "spawned": spn.json()}),
    })
}

/// A hook that takes 50 ms and allows.
const SLOW_HOOK: &str = "#!/bin/sh\ncat > /dev/null\nsleep 0.05\necho '{\"decision\":\"allow\"}'\n";

fn five_slow_hooks(path: &Path, sequential: bool) -> String {
    let mut config = String::from("[permissions]\ndefault_mode = \"auto\"\n");
    for i in 1..=5 {
        config.push_str(&format!(
            "[[hooks.command]]\nargv = [{:?}]\nname = \"slow{i}\"\nsequential = {sequential}\n",
            path.display().to_string()
        ));
    }
    config
}

pub(crate) async fn h2(env: &Env) -> Res<Outcome> {
    // Each call costs at least 50 ms (250 ms one after another): a twentieth of B1's count.
    let n = (env.counts.b1_calls / 20).max(10);
    let slow = write_hook(&env.root, "slow-allow.sh", SLOW_HOOK)?;
    let plain = Daemon::start_with(
        &env.root,
        "h2-none",
        "[permissions]\ndefault_mode = \"auto\"\n",
    )
    .await?;
    let at_once =
        Daemon::start_with(&env.root, "h2-parallel", &five_slow_hooks(&slow, false)).await?;
    let in_turn =
        Daemon::start_with(&env.root, "h2-sequential", &five_slow_hooks(&slow, true)).await?;
    let mut clients = Vec::new();
    for daemon in [&plain, &at_once, &in_turn] {
        let mut client = daemon.client().await?;
        let session = client.new_session(&env.work).await?;
        for _ in 0..env.counts.warmup.min(3) {
            client.bash_true(&session).await?;
        }
        clients.push((client, session));
    }
    let mut times: [Vec<Duration>; 3] = Default::default();
    for i in 0..n {
        for k in 0..3 {
            let j = (i + k) % 3;
            let (client, session) = &mut clients[j];
            times[j].push(timed(client.bash_true(session)).await?.0);
        }
    }
    drop(clients);
    for daemon in [plain, at_once, in_turn] {
        daemon.stop().await?;
    }
    let [none, par, seq] = [
        Stats::of(&times[0]),
        Stats::of(&times[1]),
        Stats::of(&times[2]),
    ];
    Ok(Outcome {
        rows: vec![Row {
            id: "H2",
            scenario: format!(
                "{n} `bash true` calls, five matching spawned hooks of 50 ms asked at once"
            ),
            metric: "median latency",
            unit: "ms",
            dsh: par.p50,
            baseline: Some(none.p50),
            ratio: Some(par.p50 / none.p50),
            target: Target::ValueAtMost(70.0),
        }],
        notes: vec![
            none.line("H2 no hook                 "),
            par.line("H2 five hooks at once      "),
            seq.line("H2 five hooks in turn      "),
        ],
        details: json!({"none": none.json(), "parallel": par.json(), "sequential": seq.json()}),
    })
}

pub(crate) async fn l1(env: &Env) -> Res<Outcome> {
    let n = env.counts.b1_calls;
    // A call outside any session is judged in mode ask with nobody to ask: a rule lets
    // `printf` run there too.
    let config = "[permissions]\ndefault_mode = \"auto\"\n[[permissions.rules]]\ntool = \"bash\"\ncommand = \"printf\"\naction = \"allow\"\n";
    let daemon = Daemon::start_with(&env.root, "l1", config).await?;
    let mut client = daemon.client().await?;
    let session = client.new_session(&env.work).await?;
    let args = json!({"command": "printf x", "description": "bench"});
    for _ in 0..env.counts.warmup {
        watched(&mut client, &session, &args).await?;
        unwatched(&mut client, &args).await?;
    }
    let updates_before = client.updates;
    let (mut with, mut without) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if i % 2 == 0 {
            with.push(timed(watched(&mut client, &session, &args)).await?.0);
            without.push(timed(unwatched(&mut client, &args)).await?.0);
        } else {
            without.push(timed(unwatched(&mut client, &args)).await?.0);
            with.push(timed(watched(&mut client, &session, &args)).await?.0);
        }
    }
    let updates = client.updates - updates_before;
    drop(client);
    daemon.stop().await?;
    let (w, o) = (Stats::of(&with), Stats::of(&without));
    Ok(Outcome {
        rows: vec![Row {
            id: "L1",
            scenario: format!("{n} `printf x` calls watched live by the session's client"),
            metric: "median latency",
            unit: "ms",
            dsh: w.p50,
            baseline: Some(o.p50),
            ratio: Some(w.p50 / o.p50),
            target: Target::RatioAtMost(1.05),
        }],
        notes: vec![
            w.line("L1 watched (session, live updates)"),
            o.line("L1 unwatched (no session)          "),
            format!("L1 {updates} session/update read for {n} watched calls"),
        ],
        details: json!({"watched": w.json(), "unwatched": o.json(), "updates": updates}),
    })
}

/// One `printf x` call through `session`, whose client reads its live updates.
async fn watched(client: &mut Client, session: &str, args: &Value) -> Res<()> {
    match client
        .tool(session, "bash", args.clone(), REQUEST_LIMIT)
        .await?
    {
        (text, false) if text == "x" => Ok(()),
        other => Err(format!("printf x gave {other:?}")),
    }
}

/// The same call outside any session: nobody watches it.
async fn unwatched(client: &mut Client, args: &Value) -> Res<()> {
    let r = client
        .request(
            "_dsh/tools/call",
            json!({"name": "bash", "arguments": args}),
            REQUEST_LIMIT,
        )
        .await?;
    match r["content"][0]["text"].as_str() {
        Some("x") => Ok(()),
        _ => Err(format!("printf x (no session) gave {r}")),
    }
}
