//! P1 (issue 19): where the time of B1's no-process call goes. Run only when named
//! (`cargo bench --bench daemon -- P1 [--perf]`); it judges nothing.
//!
//! A no-process call (`bash_output` of an unknown task) crosses the protocol and
//! the whole waterfall and runs nothing. Two views of it:
//!
//! * From outside, per call: when each message arrived after the request was
//!   written. The daemon sends `tool_call` (after framing, dispatch and the first
//!   session-log append), `in_progress`, then runs the waterfall (audit line,
//!   schema check, policy, permission, tool), appends the result and sends the
//!   `completed` update and the answer. The gaps between arrivals split the wall
//!   time into those stretches.
//! * From inside: the daemon's CPU time per call (utime + stime from
//!   /proc/<pid>/stat over all calls), and with `--perf` a `perf record --call-graph dwarf` of the
//!   daemon over the calls (target/bench-p1-perf.data) whose report attributes that
//!   CPU to functions (BENCHMARKS.md shows how it was read).

use crate::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Arrival times of one call's messages after its request was written.
struct Arrivals {
    tool_call: Duration,
    in_progress: Duration,
    completed: Duration,
    answer: Duration,
}

/// One no-process call, timing each message of it.
async fn traced_call(client: &mut Client, session: &str) -> Res<Arrivals> {
    let id = client.next_id;
    client.next_id += 1;
    let params = json!({"sessionId": session, "name": "bash_output",
                        "arguments": {"task_id": "bash-0"}});
    let start = Instant::now();
    client
        .send(&json!({"jsonrpc": "2.0", "id": id, "method": "_dsh/tools/call", "params": params}))
        .await?;
    let mut seen = [None; 3];
    loop {
        let message = client.next_message().await?;
        let at = start.elapsed();
        if message.get("method").and_then(Value::as_str) == Some("session/update") {
            client.updates += 1;
            let update = &message["params"]["update"];
            let slot = match (update["sessionUpdate"].as_str(), update["status"].as_str()) {
                (Some("tool_call"), _) => 0,
                (Some("tool_call_update"), Some("in_progress")) => 1,
                (Some("tool_call_update"), _) => 2,
                _ => continue,
            };
            seen[slot].get_or_insert(at);
            continue;
        }
        if message["id"] != json!(id) || message.get("error").is_some() {
            return Err(format!("unexpected answer: {message}"));
        }
        let [Some(tool_call), Some(in_progress), Some(completed)] = seen else {
            return Err(format!(
                "the answer came before all three updates: {seen:?}"
            ));
        };
        return Ok(Arrivals {
            tool_call,
            in_progress,
            completed,
            answer: at,
        });
    }
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> Res<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| e.to_string())?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
    Ok(field(11).unwrap_or(0) + field(12).unwrap_or(0))
}

/// Context switches of each of a process's threads so far, by thread id:
/// (voluntary: it waited, involuntary: it was preempted), from
/// /proc/<pid>/task/*/status.
fn context_switches(pid: u32) -> Res<std::collections::HashMap<String, (u64, u64)>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|e| e.to_string())?;
    let mut threads = std::collections::HashMap::new();
    for task in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        let count = |prefix: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(prefix))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let switches = (
            count("voluntary_ctxt_switches:"),
            count("nonvoluntary_ctxt_switches:"),
        );
        threads.insert(task.file_name().to_string_lossy().into_owned(), switches);
    }
    Ok(threads)
}

/// The switches made between two readings: each thread's growth (a thread that
/// started in between counts whole; one that ended in between is not seen, which
/// undercounts only what it did before it ended).
fn switches_between(
    before: &std::collections::HashMap<String, (u64, u64)>,
    after: &std::collections::HashMap<String, (u64, u64)>,
) -> (u64, u64) {
    after.iter().fold((0, 0), |(v, i), (tid, &(av, ai))| {
        let (bv, bi) = before.get(tid).copied().unwrap_or((0, 0));
        (v + av.saturating_sub(bv), i + ai.saturating_sub(bi))
    })
}

/// P1: the no-process call's time, stretch by stretch.
pub(crate) async fn p1(env: &Env) -> Res<Outcome> {
    let n = env.counts.b1_calls * 5;
    let daemon = Daemon::start(&env.root, "p1").await?;
    let mut client = daemon.client().await?;
    let session = client.auto_session(&env.work).await?;
    for _ in 0..env.counts.warmup * 10 {
        traced_call(&mut client, &session).await?;
    }
    let reply = client.record_no_process_reply(&session).await?;
    let mut answerer = Answerer::start(&env.root.join("p1"), &reply).await?;
    let perf = if std::env::args().any(|a| a == "--perf") {
        let out = target_dir().join("bench-p1-perf.data");
        let child = tokio::process::Command::new("perf")
            .args(["record", "--call-graph", "dwarf,32768", "-F", "1999", "-o"])
            .arg(&out)
            .args(["-p", &daemon.pid.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("perf: {e}"))?;
        // perf needs a moment to attach before the calls it should see.
        tokio::time::sleep(Duration::from_millis(500)).await;
        Some((child, out))
    } else {
        None
    };
    let ticks_before = cpu_ticks(daemon.pid)?;
    let switches_before = context_switches(daemon.pid)?;
    let started = Instant::now();
    let mut stretches: [Vec<Duration>; 5] = Default::default();
    let mut answered = Vec::with_capacity(n);
    for _ in 0..n {
        // The round trip's floor, interleaved (its time is outside the daemon's CPU).
        answered.push(timed(answerer.client.no_process_call(&session)).await?.0);
        let a = traced_call(&mut client, &session).await?;
        stretches[0].push(a.tool_call);
        stretches[1].push(a.in_progress - a.tool_call);
        stretches[2].push(a.completed - a.in_progress);
        stretches[3].push(a.answer - a.completed);
        stretches[4].push(a.answer);
    }
    let wall = started.elapsed();
    let ticks = cpu_ticks(daemon.pid)? - ticks_before;
    let (voluntary, involuntary) =
        switches_between(&switches_before, &context_switches(daemon.pid)?);
    let (voluntary, involuntary) = (voluntary as f64 / n as f64, involuntary as f64 / n as f64);
    let mut notes = Vec::new();
    if let Some((mut child, out)) = perf {
        if let Some(pid) = child.id() {
            // SAFETY: kill(2) of our own child; SIGINT makes perf write its file.
            unsafe { libc::kill(pid as i32, libc::SIGINT) };
        }
        let _ = tokio::time::timeout(Duration::from_secs(60), child.wait()).await;
        notes.push(format!(
            "P1 perf data: {} (perf report -i it --no-children --sort sym)",
            out.display()
        ));
    }
    daemon.stop().await?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let cpu_us = ticks as f64 / hz * 1e6 / n as f64;
    let labels = [
        "P1 request -> tool_call update (framing, dispatch, session check, log append)",
        "P1 tool_call -> in_progress update                                            ",
        "P1 in_progress -> completed (waterfall: audit, schema, policy, permission, tool, log)",
        "P1 completed -> answer (result JSON, write)                                    ",
        "P1 whole call                                                                  ",
    ];
    let stats: Vec<Stats> = stretches.iter().map(|s| Stats::of(s)).collect();
    notes.extend(labels.iter().zip(&stats).map(|(l, s)| s.line(l)));
    let floor = Stats::of(&answered);
    notes.push(
        floor.line(
            "P1 the same reply from a bare answerer (the round trip's floor)                ",
        ),
    );
    notes.push(format!(
        "P1 {n} calls in {:.2} s (the answerer's among them): daemon CPU {cpu_us:.1} us a call (utime + stime), \
         {voluntary:.2} voluntary and {involuntary:.2} involuntary context switches a call (all threads)",
        wall.as_secs_f64(),
    ));
    Ok(Outcome {
        rows: Vec::new(),
        notes,
        details: json!({"calls": n, "cpu_us_per_call": cpu_us,
                        "voluntary_switches_per_call": voluntary,
                        "involuntary_switches_per_call": involuntary,
                        "to_tool_call": stats[0].json(), "to_in_progress": stats[1].json(),
                        "waterfall": stats[2].json(), "to_answer": stats[3].json(),
                        "whole": stats[4].json(), "bare_answerer": floor.json()}),
    })
}

/// P7: B7's turn stretch by stretch (only when named): when the model server had
/// each request whole, and when each update reached the client, after the prompt
/// was written. Each stretch is then set beside what its part of the floor costs.
pub(crate) async fn p7(env: &Env) -> Res<Outcome> {
    let n = env.counts.b7_turns;
    let server = ModelServer::start(Wire::Prompt).await?;
    let config = format!(
        "[permissions]\ndefault_mode = \"auto\"\n{}",
        server.config()
    );
    let daemon = Daemon::start_with(&env.root, "p7", &config).await?;
    let mut client = daemon.client().await?;
    let labels = [
        "P7 prompt written -> 1st model request whole at the server ",
        "P7 1st request -> tool_call update (answer, SSE, tool call) ",
        "P7 tool_call -> completed update (waterfall + bash true)    ",
        "P7 completed -> 2nd model request whole at the server       ",
        "P7 2nd request -> agent_message_chunk update                ",
        "P7 agent_message_chunk -> end_turn answer                   ",
        "P7 whole turn                                               ",
    ];
    let mut stretches: [Vec<Duration>; 7] = Default::default();
    for turn in 0..n + env.counts.warmup {
        let session = client.new_session(&env.work).await?;
        server
            .counts
            .arrivals
            .lock()
            .map_err(|e| e.to_string())?
            .clear();
        let id = client.next_id;
        client.next_id += 1;
        let start = Instant::now();
        client
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                "params": {"sessionId": session, "prompt": [{"type": "text", "text": "run true"}]}}))
            .await?;
        let mut seen = [None; 3];
        let answer = loop {
            let message = client.next_message().await?;
            let at = Instant::now();
            if message.get("method").and_then(Value::as_str) == Some("session/update") {
                let update = &message["params"]["update"];
                let slot = match (update["sessionUpdate"].as_str(), update["status"].as_str()) {
                    (Some("tool_call"), _) => 0,
                    (Some("tool_call_update"), Some("completed")) => 1,
                    (Some("agent_message_chunk"), _) => 2,
                    _ => continue,
                };
                seen[slot].get_or_insert(at);
                continue;
            }
            if message["id"] != json!(id) || message["result"]["stopReason"] != "end_turn" {
                return Err(format!("P7: the turn ended {message}"));
            }
            break at;
        };
        let arrivals =
            std::mem::take(&mut *server.counts.arrivals.lock().map_err(|e| e.to_string())?);
        let ([Some(call), Some(done), Some(text)], &[first, second]) = (seen, &arrivals[..]) else {
            return Err(format!(
                "P7: a turn without its updates or two requests: {seen:?}"
            ));
        };
        if turn < env.counts.warmup {
            continue;
        }
        let points = [start, first, call, done, second, text, answer];
        for (i, pair) in points.windows(2).enumerate() {
            stretches[i].push(pair[1].saturating_duration_since(pair[0]));
        }
        stretches[6].push(answer - start);
    }
    // The floor's parts, measured the same way: one request answered, one spawn.
    let bodies = server.bodies()?;
    let mut http = HttpClient::connect(&server).await?;
    let (mut post, mut spawn) = (Vec::new(), Vec::new());
    for _ in 0..n {
        post.push(timed(http.post(&bodies.0)).await?.0);
        spawn.push(timed(direct("true")).await?.0);
    }
    drop((client, http));
    daemon.stop().await?;
    let stats: Vec<Stats> = stretches.iter().map(|s| Stats::of(s)).collect();
    let mut notes: Vec<String> = labels.iter().zip(&stats).map(|(l, s)| s.line(l)).collect();
    let (p, s) = (Stats::of(&post), Stats::of(&spawn));
    notes.push(p.line("P7 floor: one request answered (bench's client)          "));
    notes.push(s.line("P7 floor: `bash -c true` spawned directly                "));
    Ok(Outcome {
        rows: Vec::new(),
        notes,
        details: json!({"stretches": labels.iter().zip(&stats)
                            .map(|(l, s)| json!({"stretch": l.trim(), "stats": s.json()}))
                            .collect::<Vec<_>>(),
                        "floor_request": p.json(), "floor_spawn": s.json()}),
    })
}
