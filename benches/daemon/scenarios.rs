//! The scenarios B1-B6 (issue 7) and J1 (issue 12): each runs dsh and its baseline
//! interleaved and returns its judged rows.

use crate::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

// ---------------------------------------------------------------------------
// Scenarios

/// What every scenario gets.
pub(crate) struct Env {
    pub(crate) root: PathBuf,
    /// The sessions' cwd.
    pub(crate) work: PathBuf,
    pub(crate) counts: Counts,
}

pub(crate) fn kib_to_mib(kib: f64) -> f64 {
    kib / 1024.0
}

/// B1: sequential `bash true` calls on one session against direct spawns.
pub(crate) async fn b1(env: &Env) -> Res<Outcome> {
    let n = env.counts.b1_calls;
    let daemon = Daemon::start(&env.root, "b1").await?;
    let mut client = daemon.client().await?;
    let session = client.auto_session(&env.work).await?;
    for _ in 0..env.counts.warmup {
        client.bash_true(&session).await?;
        direct("true").await?;
    }
    let reply = client.record_no_process_reply(&session).await?;
    let mut answerer = Answerer::start(&env.root.join("b1"), &reply).await?;
    let before = daemon.memory()?;
    let (mut dsh, mut base) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut floor, mut answered) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        // Alternate which goes first, so neither always follows the other.
        if i % 2 == 0 {
            dsh.push(timed(client.bash_true(&session)).await?.0);
            base.push(timed(direct("true")).await?.0);
        } else {
            base.push(timed(direct("true")).await?.0);
            dsh.push(timed(client.bash_true(&session)).await?.0);
        }
        // Not judged: splits dsh's overhead into protocol + waterfall (this)
        // and executor (the rest).
        floor.push(timed(client.no_process_call(&session)).await?.0);
        // The floor under that: the same reply from a process that only answers.
        answered.push(timed(answerer.client.no_process_call(&session)).await?.0);
    }
    let after = daemon.memory()?;
    let updates = client.updates;
    daemon.stop().await?;
    let (d, b, f) = (Stats::of(&dsh), Stats::of(&base), Stats::of(&floor));
    let a = Stats::of(&answered);
    let row = Row {
        id: "B1",
        scenario: format!("{n} sequential `bash true` calls, one session"),
        metric: "median latency",
        unit: "ms",
        dsh: d.p50,
        baseline: Some(b.p50),
        ratio: Some(d.p50 / b.p50),
        target: Target::RatioAtMost(1.15),
    };
    Ok(Outcome {
        rows: vec![row],
        notes: vec![
            d.line("B1 dsh call     "),
            b.line("B1 direct spawn "),
            f.line("B1 no-process call (protocol + waterfall, not judged)"),
            a.line("B1 the same reply from a bare answerer (the round trip's floor)"),
            format!(
                "B1 dsh adds {:.3} ms per call at the median; a call that runs no process costs {:.3} ms, \
                 of which the round trip itself (bare answerer) {:.3} ms",
                d.p50 - b.p50,
                f.p50,
                a.p50
            ),
            format!(
                "B1 a daemon whose call cost the spawn plus the bare answerer's round trip would be at ratio {:.3}",
                (b.p50 + a.p50) / b.p50
            ),
            format!(
                "B1 daemon RSS {} -> {} KiB over the calls; {updates} session/update read",
                before.rss, after.rss
            ),
        ],
        details: json!({"dsh": d.json(), "baseline": b.json(), "no_process_call": f.json(),
                        "bare_answerer": a.json(),
                        "rss_kib_before": before.rss, "rss_kib_after": after.rss,
                        "session_updates": updates}),
    })
}

/// B2: many connections calling at once, against as many concurrent spawn loops.
pub(crate) async fn b2(env: &Env) -> Res<Outcome> {
    let c = env.counts;
    let per_round = c.b2_calls / c.b2_rounds;
    let total = c.b2_connections * per_round * c.b2_rounds;
    let daemon = Daemon::start(&env.root, "b2").await?;
    let mut clients = Vec::with_capacity(c.b2_connections);
    for _ in 0..c.b2_connections {
        let mut client = daemon.client().await?;
        let session = client.auto_session(&env.work).await?;
        client.bash_true(&session).await?; // warm-up, one per connection
        clients.push((client, session));
    }
    let (mut dsh_time, mut base_time) = (Duration::ZERO, Duration::ZERO);
    // Phases alternate (dsh, direct, direct, dsh, ...): running both at once would
    // make them share the cores and measure each other.
    for round in 0..c.b2_rounds {
        for dsh_phase in [round % 2 == 0, round % 2 != 0] {
            let start = Instant::now();
            if dsh_phase {
                let mut set = JoinSet::new();
                for (mut client, session) in clients.drain(..) {
                    set.spawn(async move {
                        for _ in 0..per_round {
                            client.bash_true(&session).await?;
                        }
                        Res::Ok((client, session))
                    });
                }
                while let Some(joined) = set.join_next().await {
                    clients.push(joined.map_err(|e| e.to_string())??);
                }
                dsh_time += start.elapsed();
            } else {
                let mut set = JoinSet::new();
                for _ in 0..c.b2_connections {
                    set.spawn(async move {
                        for _ in 0..per_round {
                            direct("true").await?;
                        }
                        Res::Ok(())
                    });
                }
                while let Some(joined) = set.join_next().await {
                    joined.map_err(|e| e.to_string())??;
                }
                base_time += start.elapsed();
            }
        }
    }
    drop(clients);
    daemon.stop().await?;
    let dsh_tp = total as f64 / dsh_time.as_secs_f64();
    let base_tp = total as f64 / base_time.as_secs_f64();
    let row = Row {
        id: "B2",
        scenario: format!(
            "{} connections x 1 session x {} calls at once",
            c.b2_connections,
            per_round * c.b2_rounds
        ),
        metric: "throughput",
        unit: "calls/s",
        dsh: dsh_tp,
        baseline: Some(base_tp),
        ratio: Some(dsh_tp / base_tp),
        target: Target::RatioAtLeast(0.87),
    };
    Ok(Outcome {
        rows: vec![row],
        notes: vec![format!(
            "B2 {total} calls each way in {} rounds: dsh {:.3} s, direct {:.3} s",
            c.b2_rounds,
            dsh_time.as_secs_f64(),
            base_time.as_secs_f64()
        )],
        details: json!({"calls": total, "rounds": c.b2_rounds,
                        "dsh_seconds": dsh_time.as_secs_f64(),
                        "baseline_seconds": base_time.as_secs_f64()}),
    })
}

/// The spill file named by a truncated result.
pub(crate) fn spill_path(text: &str) -> Option<PathBuf> {
    const MARK: &str = "[output truncated; full output: ";
    let start = text.rfind(MARK)? + MARK.len();
    let end = start + text[start..].find(']')?;
    Some(PathBuf::from(&text[start..end]))
}

/// Size of `path`, then removes it: every byte must have arrived, and two GiB of
/// leftovers per repetition would fill a small disk.
pub(crate) fn check_and_remove(path: &Path, bytes: u64) -> Res<()> {
    let len = std::fs::metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    std::fs::remove_file(path).map_err(|e| format!("remove {}: {e}", path.display()))?;
    if len != bytes {
        return Err(format!("{} holds {len} bytes, not {bytes}", path.display()));
    }
    Ok(())
}

/// B3's background turn: the same command as a background task, from its start to
/// the moment `_dsh/tasks/list` says it finished (asked every millisecond), then one
/// `bash_output` for the file's path. A task's stream is on disk from its first byte
/// (issue 32), a call's from its first overflow: the two rows' ratios side by side
/// say what writing from the first byte costs.
async fn b3_background(client: &mut Client, session: &str, command: &str) -> Res<PathBuf> {
    let args = json!({"command": command, "description": "bench", "run_in_background": true});
    let (text, is_error) = client.tool(session, "bash", args, REQUEST_LIMIT).await?;
    let task = text
        .strip_prefix("started background task ")
        .filter(|_| !is_error)
        .ok_or_else(|| format!("B3: the task did not start: {text}"))?
        .to_string();
    let deadline = tokio::time::Instant::now() + BULK_LIMIT;
    loop {
        let listed = client
            .request(
                "_dsh/tasks/list",
                json!({"sessionId": session}),
                REQUEST_LIMIT,
            )
            .await?;
        let running = listed["tasks"].as_array().is_some_and(|t| {
            t.iter()
                .any(|t| t["taskId"] == json!(task) && t["status"] == "running")
        });
        if !running {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("B3: {task} still runs after {BULK_LIMIT:?}"));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let (text, _) = client
        .tool(
            session,
            "bash_output",
            json!({"task_id": task}),
            REQUEST_LIMIT,
        )
        .await?;
    const MARK: &str = "full output: ";
    let start = text
        .rfind(MARK)
        .ok_or_else(|| format!("B3: no file in the read: {:?}", tail(&text)))?
        + MARK.len();
    let end = start + text[start..].find(']').unwrap_or(text.len() - start);
    Ok(PathBuf::from(&text[start..end]))
}

/// B3: one call printing a lot, against the same command writing to a file.
pub(crate) async fn b3(env: &Env) -> Res<Outcome> {
    let c = env.counts;
    let bytes = c.b3_bytes;
    let daemon = Daemon::start(&env.root, "b3").await?;
    let mut client = daemon.client().await?;
    let session = client.auto_session(&env.work).await?;
    client.bash_true(&session).await?;
    let command = format!("head -c {bytes} /dev/zero");
    let direct_file = env.root.join("b3-direct.out");
    let direct_command = format!("{command} > '{}'", direct_file.display());
    let before = daemon.memory()?;
    let (mut dsh, mut base, mut background) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..c.b3_reps {
        // Each repetition runs the three in another order.
        let mut order = [0, 1, 2];
        order.rotate_left(rep % 3);
        for turn in order {
            if turn == 2 {
                let (took, spill) = timed(b3_background(&mut client, &session, &command)).await?;
                check_and_remove(&spill, bytes)?;
                background.push(took);
            } else if turn == 0 {
                // The spill goes to disk at disk speed; the default 120 s timeout
                // is far above what it takes, so the call is as a model makes it.
                let args = json!({"command": command, "description": "bench"});
                let (took, (text, is_error)) =
                    timed(client.tool(&session, "bash", args, BULK_LIMIT)).await?;
                let spill = spill_path(&text)
                    .filter(|_| !is_error)
                    .ok_or_else(|| format!("B3: no spill file in the result: {:?}", tail(&text)))?;
                check_and_remove(&spill, bytes)?;
                dsh.push(took);
            } else {
                let (took, _) = timed(direct(&direct_command)).await?;
                check_and_remove(&direct_file, bytes)?;
                base.push(took);
            }
        }
    }
    let after = daemon.memory()?;
    daemon.stop().await?;
    let (d, b, g) = (Stats::of(&dsh), Stats::of(&base), Stats::of(&background));
    let growth_mib = kib_to_mib(after.hwm.saturating_sub(before.rss) as f64);
    let size = if bytes >= 1 << 30 {
        format!("{} GiB", bytes >> 30)
    } else {
        format!("{} MiB", bytes >> 20)
    };
    let scenario = format!("one call printing {size} (`head -c {bytes} /dev/zero`)");
    Ok(Outcome {
        rows: vec![
            Row {
                id: "B3",
                scenario: scenario.clone(),
                metric: "daemon peak RSS growth",
                unit: "MiB",
                dsh: growth_mib,
                baseline: None,
                ratio: None,
                target: Target::ValueAtMost(32.0),
            },
            Row {
                id: "B3",
                scenario: scenario.clone(),
                metric: "time (median)",
                unit: "ms",
                dsh: d.p50,
                baseline: Some(b.p50),
                ratio: Some(d.p50 / b.p50),
                target: Target::RatioAtMost(2.0),
            },
            Row {
                id: "B3",
                scenario: format!("{scenario}, as a background task (on disk from its first byte)"),
                metric: "time to finished (median)",
                unit: "ms",
                dsh: g.p50,
                baseline: Some(b.p50),
                ratio: Some(g.p50 / b.p50),
                target: Target::RatioAtMost(2.0),
            },
        ],
        notes: vec![
            d.line("B3 dsh call          "),
            g.line("B3 dsh background    "),
            b.line("B3 direct to a file  "),
            format!(
                "B3 daemon VmRSS before {} KiB, VmHWM after {} KiB, VmRSS after {} KiB",
                before.rss, after.hwm, after.rss
            ),
        ],
        details: json!({"bytes": bytes, "reps": c.b3_reps, "dsh": d.json(), "background": g.json(), "baseline": b.json(),
                        "rss_kib_before": before.rss, "hwm_kib_after": after.hwm,
                        "rss_kib_after": after.rss}),
    })
}

pub(crate) fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(200);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    &text[start..]
}

/// B4: many idle background tasks, then one `bash_output` on each.
pub(crate) async fn b4(env: &Env) -> Res<Outcome> {
    let c = env.counts;
    let daemon = Daemon::start(&env.root, "b4").await?;
    let mut client = daemon.client().await?;
    let mut sessions = Vec::with_capacity(c.b4_sessions);
    for _ in 0..c.b4_sessions {
        let session = client.auto_session(&env.work).await?;
        sessions.push(session);
    }
    let before = daemon.memory()?;
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(c.b4_tasks);
    for i in 0..c.b4_tasks {
        let session = &sessions[i % sessions.len()];
        let args =
            json!({"command": "sleep 60", "description": "bench", "run_in_background": true});
        let (text, is_error) = client.tool(session, "bash", args, REQUEST_LIMIT).await?;
        let id = text
            .strip_prefix("started background task ")
            .filter(|_| !is_error)
            .ok_or_else(|| format!("B4: background start gave {text:?}"))?;
        tasks.push((session.clone(), id.to_string()));
    }
    let started_in = start.elapsed();
    let loaded = daemon.memory()?;
    let mut reads = Vec::with_capacity(tasks.len());
    let mut running = 0;
    for (session, id) in &tasks {
        let args = json!({"task_id": id});
        let (took, (text, is_error)) =
            timed(client.tool(session, "bash_output", args, REQUEST_LIMIT)).await?;
        if is_error {
            return Err(format!("B4: bash_output {id} failed: {text:?}"));
        }
        // `sleep 60` outlives the scenario unless the machine is very slow; a task
        // that already ended is still a valid read, so it is counted, not fatal.
        running += usize::from(text.ends_with("[status: running]"));
        reads.push(took);
    }
    let after = daemon.memory()?;
    let stop_start = Instant::now();
    daemon.stop().await?;
    let stop_took = stop_start.elapsed();
    let r = Stats::of(&reads);
    let per_task = loaded.rss.saturating_sub(before.rss) as f64 / c.b4_tasks as f64;
    let scenario = format!(
        "{} background `sleep 60` over {} sessions, then `bash_output` on each",
        c.b4_tasks, c.b4_sessions
    );
    Ok(Outcome {
        rows: vec![
            Row {
                id: "B4",
                scenario: scenario.clone(),
                metric: "daemon RSS per task",
                unit: "KiB",
                dsh: per_task,
                baseline: None,
                ratio: None,
                target: Target::ValueAtMost(64.0),
            },
            Row {
                id: "B4",
                scenario,
                metric: "bash_output p99",
                unit: "ms",
                dsh: r.p99,
                baseline: None,
                ratio: None,
                target: Target::ValueAtMost(5.0),
            },
        ],
        notes: vec![
            r.line("B4 bash_output"),
            format!(
                "B4 daemon VmRSS {} KiB with {} sessions, {} KiB with {} tasks, {} KiB after the reads; \
                 starts took {:.3} s; {running}/{} still running at their read; dsh stop took {:.3} s",
                before.rss,
                c.b4_sessions,
                loaded.rss,
                c.b4_tasks,
                after.rss,
                started_in.as_secs_f64(),
                c.b4_tasks,
                stop_took.as_secs_f64()
            ),
        ],
        details: json!({"tasks": c.b4_tasks, "sessions": c.b4_sessions, "bash_output": r.json(),
                        "rss_kib_before": before.rss, "rss_kib_loaded": loaded.rss,
                        "rss_kib_after_reads": after.rss,
                        "start_seconds": started_in.as_secs_f64(), "running_at_read": running,
                        "stop_seconds": stop_took.as_secs_f64()}),
    })
}

/// B5: many `session/new` on one connection.
pub(crate) async fn b5(env: &Env) -> Res<Outcome> {
    let c = env.counts;
    let daemon = Daemon::start(&env.root, "b5").await?;
    let mut client = daemon.client().await?;
    for _ in 0..c.warmup {
        client.new_session(&env.work).await?;
    }
    let before = daemon.memory()?;
    let mut lat = Vec::with_capacity(c.b5_sessions);
    for _ in 0..c.b5_sessions {
        lat.push(timed(client.new_session(&env.work)).await?.0);
    }
    let after = daemon.memory()?;
    daemon.stop().await?;
    let s = Stats::of(&lat);
    let per_session = after.rss.saturating_sub(before.rss) as f64 / c.b5_sessions as f64;
    let scenario = format!("{} `session/new` on one connection", c.b5_sessions);
    Ok(Outcome {
        rows: vec![
            Row {
                id: "B5",
                scenario: scenario.clone(),
                metric: "RSS per idle session",
                unit: "KiB",
                dsh: per_session,
                baseline: None,
                ratio: None,
                target: Target::ValueAtMost(16.0),
            },
            Row {
                id: "B5",
                scenario,
                metric: "session/new p99",
                unit: "ms",
                dsh: s.p99,
                baseline: None,
                ratio: None,
                target: Target::ValueAtMost(2.0),
            },
        ],
        notes: vec![
            s.line("B5 session/new"),
            format!(
                "B5 daemon VmRSS {} -> {} KiB over {} sessions",
                before.rss, after.rss, c.b5_sessions
            ),
        ],
        details: json!({"sessions": c.b5_sessions, "session_new": s.json(),
                        "rss_kib_before": before.rss, "rss_kib_after": after.rss}),
    })
}

/// B6: calls the waterfall asks about (answered at once) against allowed calls.
pub(crate) async fn b6(env: &Env) -> Res<Outcome> {
    let n = env.counts.b6_calls;
    let daemon = Daemon::start(&env.root, "b6").await?;
    let mut client = daemon.client().await?;
    // Mode `ask` is the default: no rule matches `true`, so every call is asked.
    let asking = client.new_session(&env.work).await?;
    let allowed = client.auto_session(&env.work).await?;
    for _ in 0..env.counts.warmup {
        client.bash_true(&asking).await?;
        client.bash_true(&allowed).await?;
    }
    let asked_before = client.asked;
    let (mut ask, mut allow) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if i % 2 == 0 {
            ask.push(timed(client.bash_true(&asking)).await?.0);
            allow.push(timed(client.bash_true(&allowed)).await?.0);
        } else {
            allow.push(timed(client.bash_true(&allowed)).await?.0);
            ask.push(timed(client.bash_true(&asking)).await?.0);
        }
    }
    let asked = client.asked - asked_before;
    daemon.stop().await?;
    if asked != n as u64 {
        return Err(format!(
            "B6: {asked} permission requests for {n} asked calls"
        ));
    }
    let (a, b) = (Stats::of(&ask), Stats::of(&allow));
    Ok(Outcome {
        rows: vec![Row {
            id: "B6",
            scenario: format!("{n} calls asked about, answered at once"),
            metric: "median latency",
            unit: "ms",
            dsh: a.p50,
            baseline: Some(b.p50),
            ratio: Some(a.p50 / b.p50),
            target: Target::RatioAtMost(1.3),
        }],
        notes: vec![a.line("B6 asked call  "), b.line("B6 allowed call")],
        details: json!({"asked": a.json(), "allowed": b.json(), "permission_requests": asked}),
    })
}

/// A compound command line of at least `bytes` bytes: lists, pipes, substitutions,
/// wrappers nested in wrappers, a heredoc to a shell and redirections, as an agent writes
/// them, repeated with varying names.
pub(crate) fn compound_line(bytes: usize) -> String {
    let mut line = String::new();
    let mut i = 0;
    while line.len() < bytes {
        line.push_str(&format!(
            "timeout --sig KILL 5 nice -n 1 env A{i}=1 rm -rf build{i} && git status --short | \
             grep -v '^??' > /dev/null; echo \"$(ls -la dir{i} 2>&1 | wc -l)\" || \
             sudo -u root xargs -I{{}} cp {{}} out{i}/ < list{i}.txt; \
             bash -c 'cd src{i} && cargo build --release'; find . -name '*.o{i}' -exec rm {{}} \\; ;\n"
        ));
        i += 1;
    }
    line
}

/// CPU time this thread has run so far. On a shared machine the wall-clock median of J1's
/// long judgement moves from run to run with how often the thread waits for a core during
/// one; its CPU time does not (BENCHMARKS.md, "J1 in
/// release against the old judge").
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// J1 (issue 12): judging a 10 KB compound command line in-process, against judging
/// `git status` in the same moment; the target is under 1 ms per judgement.
pub(crate) async fn j1(env: &Env) -> Res<Outcome> {
    use dsh::config::{Decision, Mode, PermissionRule, PermissionsConfig};
    use dsh::policy::Policy;
    let rule = |command: &str, action| PermissionRule {
        tool: "bash".into(),
        command: Some(command.into()),
        action,
        ..PermissionRule::default()
    };
    let policy = Policy::new(&PermissionsConfig {
        rules: vec![
            rule("rm", Decision::Deny),
            rule("git status", Decision::Allow),
        ],
        ..PermissionsConfig::default()
    });
    let long = json!({ "command": compound_line(10 * 1024) });
    let short = json!({ "command": "git status" });
    let judged = policy.judge("bash", &long, Mode::Auto, &[]);
    if judged.segments.len() < 100 || judged.decision != Decision::Deny {
        return Err(format!(
            "J1: the long line was not judged as written ({} segments, {:?}: {})",
            judged.segments.len(),
            judged.decision,
            judged.reason
        ));
    }
    let n = env.counts.j1_judgements;
    let (mut long_times, mut short_times) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut long_cpu = Vec::with_capacity(n);
    for i in 0..n + env.counts.warmup {
        let (a, cpu) = (Instant::now(), thread_cpu_time());
        std::hint::black_box(policy.judge("bash", &long, Mode::Auto, &[]));
        let (a, cpu) = (a.elapsed(), thread_cpu_time().saturating_sub(cpu));
        let b = Instant::now();
        std::hint::black_box(policy.judge("bash", &short, Mode::Auto, &[]));
        let b = b.elapsed();
        if i >= env.counts.warmup {
            long_times.push(a);
            long_cpu.push(cpu);
            short_times.push(b);
        }
    }
    // Where the time goes: splitting alone (parse and walk), and a tenth of the line.
    let line = long["command"].as_str().unwrap_or_default().to_owned();
    let tenth: String = line
        .lines()
        .take(line.lines().count() / 10)
        .collect::<Vec<_>>()
        .join("\n");
    let (mut split_times, mut tenth_times) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let a = Instant::now();
        std::hint::black_box(dsh::policy::shell::segments(&line).map(|s| s.len()).ok());
        split_times.push(a.elapsed());
        let b = Instant::now();
        std::hint::black_box(dsh::policy::shell::segments(&tenth).map(|s| s.len()).ok());
        tenth_times.push(b.elapsed());
    }
    let (split, tenth) = (Stats::of(&split_times), Stats::of(&tenth_times));
    let (l, s) = (Stats::of(&long_times), Stats::of(&short_times));
    let cpu = Stats::of(&long_cpu);
    Ok(Outcome {
        rows: vec![Row {
            id: "J1",
            scenario: format!(
                "judge a {} KB compound line ({} segments)",
                long["command"].as_str().map_or(0, str::len) / 1024,
                judged.segments.len()
            ),
            metric: "median judgement",
            unit: "ms",
            dsh: l.p50,
            baseline: Some(s.p50),
            ratio: Some(l.p50 / s.p50),
            target: Target::ValueAtMost(1.0),
        }],
        notes: vec![
            l.line("J1 10 KB line  "),
            cpu.line("J1 10 KB line, CPU time of the judging thread"),
            s.line("J1 `git status`"),
            split.line("J1 10 KB line, splitting only (parse + walk)"),
            tenth.line("J1 a tenth of it, splitting only"),
        ],
        details: json!({"long": l.json(), "long_cpu": cpu.json(), "short": s.json(), "split_only": split.json(),
                        "tenth_split_only": tenth.json(), "segments": judged.segments.len()}),
    })
}
