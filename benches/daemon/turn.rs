//! B7 (issue 19): one whole agent turn against a scripted model on loopback.
//!
//! A turn is `session/prompt` -> model request -> `bash true` through the whole
//! waterfall -> model request -> `end_turn`, every `session/update` read. Its
//! floor, measured interleaved in the same run, is the same work without dsh: the
//! bench sends the daemon's own two request bodies to the same server on one
//! kept-alive connection and spawns `bash -c true` between them.
//!
//! The same turn runs against a second server that leaves Nagle on and writes
//! each answer's head and body apart ([`Wire::Split`]): a client that delays its
//! ACK of the head waits for the body until its delayed-ACK timer fires (about
//! 40 ms a request). That row is judged against the first server's turn.
//!
//! A third server ends each chunked answer a millisecond after `[DONE]`, as a
//! streaming server's framework does; a client that drops the body at `[DONE]`
//! loses the connection and opens one a request. Its row counts connections.

use crate::*;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl Client {
    /// One `session/prompt` of `text`, answered `end_turn`; the updates of the
    /// turn are read (and counted) on the way.
    pub(crate) async fn prompt(&mut self, session: &str, text: &str) -> Res<()> {
        let r = self
            .request(
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
                REQUEST_LIMIT,
            )
            .await?;
        match r["stopReason"].as_str() {
            Some("end_turn") => Ok(()),
            _ => Err(format!("the turn ended {r}")),
        }
    }
}

/// One daemon turn on a fresh session (created untimed, so every turn sends the
/// same two requests and history never grows): the time of the prompt alone.
async fn turn(client: &mut Client, env: &Env) -> Res<Duration> {
    let session = client.new_session(&env.work).await?;
    let (took, ()) = timed(client.prompt(&session, "run true")).await?;
    Ok(took)
}

/// The floor of a turn: the same two requests to the same server, and the process.
async fn floor(http: &mut HttpClient, bodies: &(Vec<u8>, Vec<u8>)) -> Res<Duration> {
    let start = Instant::now();
    let first = http.post(&bodies.0).await?;
    direct("true").await?;
    let second = http.post(&bodies.1).await?;
    let took = start.elapsed();
    if first.is_empty() || second.is_empty() {
        return Err("the model server answered the baseline with nothing".into());
    }
    Ok(took)
}

/// B7: a model turn against its floor, and against a server that writes in two.
pub(crate) async fn b7(env: &Env) -> Res<Outcome> {
    let n = env.counts.b7_turns;
    let prompt_server = ModelServer::start(Wire::Prompt).await?;
    let split_server = ModelServer::start(Wire::Split).await?;
    let config = |server: &ModelServer| {
        format!(
            "[permissions]\ndefault_mode = \"auto\"\n{}",
            server.config()
        )
    };
    let fast = Daemon::start_with(&env.root, "b7", &config(&prompt_server)).await?;
    let split = Daemon::start_with(&env.root, "b7-split", &config(&split_server)).await?;
    let mut fast_client = fast.client().await?;
    let mut split_client = split.client().await?;
    for _ in 0..env.counts.warmup {
        turn(&mut fast_client, env).await?;
        turn(&mut split_client, env).await?;
    }
    let bodies = prompt_server.bodies()?;
    let mut http = HttpClient::connect(&prompt_server).await?;
    for _ in 0..env.counts.warmup {
        floor(&mut http, &bodies).await?;
    }
    let updates_before = fast_client.updates;
    let (mut dsh, mut base, mut slow) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for i in 0..n {
        // Rotate which goes first, so none always follows another.
        for k in 0..3 {
            match (i + k) % 3 {
                0 => dsh.push(turn(&mut fast_client, env).await?),
                1 => base.push(floor(&mut http, &bodies).await?),
                _ => slow.push(turn(&mut split_client, env).await?),
            }
        }
    }
    let updates = (fast_client.updates - updates_before) as f64 / n as f64;
    drop((fast_client, split_client, http));
    fast.stop().await?;
    split.stop().await?;
    for (name, server) in [("", &prompt_server), ("split ", &split_server)] {
        let c = &server.counts;
        let (bad_results, bad_requests) = (
            c.bad_results.load(Ordering::Relaxed),
            c.bad_requests.load(Ordering::Relaxed),
        );
        if bad_results + bad_requests > 0 {
            return Err(format!(
                "the {name}model server saw {bad_results} wrong tool results and \
                 {bad_requests} unreadable requests"
            ));
        }
    }
    let conns = |s: &ModelServer| {
        (
            s.counts.connections.load(Ordering::Relaxed),
            s.counts.requests.load(Ordering::Relaxed),
        )
    };
    let ((fast_conns, fast_reqs), (split_conns, split_reqs)) =
        (conns(&prompt_server), conns(&split_server));
    // Connection reuse against a server that ends each body a moment after
    // `[DONE]`: a handful of turns, counted, not timed.
    let late_server = ModelServer::start(Wire::LateEnd).await?;
    let late = Daemon::start_with(&env.root, "b7-late", &config(&late_server)).await?;
    let mut late_client = late.client().await?;
    let late_turns = env.counts.warmup.max(10);
    for _ in 0..late_turns {
        turn(&mut late_client, env).await?;
    }
    drop(late_client);
    late.stop().await?;
    let (late_conns, late_reqs) = conns(&late_server);
    let (d, b, s) = (Stats::of(&dsh), Stats::of(&base), Stats::of(&slow));
    let rows = vec![
        Row {
            id: "B7",
            scenario: format!("{n} model turns: prompt -> `bash true` -> answer"),
            metric: "median turn",
            unit: "ms",
            dsh: d.p50,
            baseline: Some(b.p50),
            ratio: Some(d.p50 / b.p50),
            target: Target::RatioAtMost(1.5),
        },
        Row {
            id: "B7",
            scenario: "same, server without TCP_NODELAY writing head and body apart".into(),
            metric: "median turn",
            unit: "ms",
            dsh: s.p50,
            baseline: Some(d.p50),
            ratio: Some(s.p50 / d.p50),
            target: Target::ExcessAtMost(2.0),
        },
        Row {
            id: "B7",
            scenario: format!(
                "{late_turns} turns, server ending each chunked answer 1 ms after `[DONE]`"
            ),
            metric: "connections a request",
            unit: "",
            dsh: late_conns as f64 / late_reqs.max(1) as f64,
            baseline: None,
            ratio: None,
            target: Target::ValueAtMost(0.25),
        },
    ];
    Ok(Outcome {
        rows,
        notes: vec![
            d.line("B7 dsh turn                 "),
            b.line("B7 floor (2 requests + bash)"),
            s.line("B7 dsh turn, split server   "),
            format!(
                "B7 a turn costs {:.3} ms over its floor at the median; against the split server \
                 {:+.3} ms over the TCP_NODELAY one; {updates:.1} session/update a turn",
                d.p50 - b.p50,
                s.p50 - d.p50
            ),
            format!(
                "B7 model connections: {fast_conns} for {fast_reqs} requests (TCP_NODELAY server, \
                 baseline included), {split_conns} for {split_reqs} (split server), {late_conns} for \
                 {late_reqs} (server ending its answers late)"
            ),
        ],
        details: json!({"dsh": d.json(), "baseline": b.json(), "split_server": s.json(),
                        "updates_per_turn": updates,
                        "connections": fast_conns, "requests": fast_reqs,
                        "split_connections": split_conns, "split_requests": split_reqs,
                        "late_end_connections": late_conns, "late_end_requests": late_reqs}),
    })
}
