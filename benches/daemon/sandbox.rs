//! X1: a `bash true` call under the sandbox executor against the same call under
//! the local executor, interleaved in one loop (issue 27). What the sandbox costs a
//! call is bwrap's namespaces and mounts plus dsh's in-sandbox init (one exec of
//! dsh, the seccomp filter) and the layout built per command; to compare two builds
//! (before and after a change to the sandbox), run this scenario with
//! `DSH_BENCH_BIN` pointing at each, alternately.

use crate::*;
use serde_json::json;

pub(crate) async fn x1(env: &Env) -> Res<Outcome> {
    let n = env.counts.b1_calls;
    let local = Daemon::start(&env.root, "x1-local").await?;
    let sandbox =
        Daemon::start_config(&env.root, "x1-sandbox", "[exec]\nkind = \"sandbox\"\n").await?;
    let (mut lc, mut sc) = (local.client().await?, sandbox.client().await?);
    let (ls, ss) = (
        lc.auto_session(&env.work).await?,
        sc.auto_session(&env.work).await?,
    );
    for _ in 0..env.counts.warmup {
        lc.bash_true(&ls).await?;
        sc.bash_true(&ss).await?;
    }
    let (mut loc, mut sbx) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if i % 2 == 0 {
            sbx.push(timed(sc.bash_true(&ss)).await?.0);
            loc.push(timed(lc.bash_true(&ls)).await?.0);
        } else {
            loc.push(timed(lc.bash_true(&ls)).await?.0);
            sbx.push(timed(sc.bash_true(&ss)).await?.0);
        }
    }
    local.stop().await?;
    sandbox.stop().await?;
    let (l, s) = (Stats::of(&loc), Stats::of(&sbx));
    Ok(Outcome {
        rows: vec![Row {
            id: "X1",
            scenario: format!("{n} sequential `bash true` calls, sandbox vs local executor"),
            metric: "median latency",
            unit: "ms",
            dsh: s.p50,
            baseline: Some(l.p50),
            ratio: Some(s.p50 / l.p50),
            // Reported: the sandbox's cost is bwrap's; the target is against
            // the previous build's X1, compared with DSH_BENCH_BIN (BENCHMARKS.md).
            target: Target::RatioAtMost(f64::INFINITY),
        }],
        notes: vec![s.line("X1 sandboxed call"), l.line("X1 local call    ")],
        details: json!({"sandbox": s.json(), "local": l.json()}),
    })
}

/// X2: a `read_file` call under the sandbox executor against the same call under the
/// local executor, interleaved (issue 39). Under the sandbox the file tools are judged
/// by the layout a command would get (the walk of the session's root, the masks) and
/// opened with `openat2` in the daemon: a check, not a process, so the target is 1.2x.
pub(crate) async fn x2(env: &Env) -> Res<Outcome> {
    let n = env.counts.b1_calls;
    let file = env.work.join("x2-read.txt");
    let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&file, &text).map_err(|e| format!("{}: {e}", file.display()))?;
    let local = Daemon::start(&env.root, "x2-local").await?;
    let sandbox =
        Daemon::start_config(&env.root, "x2-sandbox", "[exec]\nkind = \"sandbox\"\n").await?;
    let (mut lc, mut sc) = (local.client().await?, sandbox.client().await?);
    let (ls, ss) = (
        lc.auto_session(&env.work).await?,
        sc.auto_session(&env.work).await?,
    );
    let args = json!({"path": file.display().to_string()});
    for _ in 0..env.counts.warmup {
        read_x2(&mut lc, &ls, &args).await?;
        read_x2(&mut sc, &ss, &args).await?;
    }
    let (mut loc, mut sbx) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if i % 2 == 0 {
            sbx.push(timed(read_x2(&mut sc, &ss, &args)).await?.0);
            loc.push(timed(read_x2(&mut lc, &ls, &args)).await?.0);
        } else {
            loc.push(timed(read_x2(&mut lc, &ls, &args)).await?.0);
            sbx.push(timed(read_x2(&mut sc, &ss, &args)).await?.0);
        }
    }
    local.stop().await?;
    sandbox.stop().await?;
    let _ = std::fs::remove_file(&file);
    let (l, s) = (Stats::of(&loc), Stats::of(&sbx));
    Ok(Outcome {
        rows: vec![Row {
            id: "X2",
            scenario: format!("{n} sequential `read_file` calls, sandbox vs local executor"),
            metric: "median latency",
            unit: "ms",
            dsh: s.p50,
            baseline: Some(l.p50),
            ratio: Some(s.p50 / l.p50),
            target: Target::RatioAtMost(1.2),
        }],
        notes: vec![s.line("X2 sandboxed read"), l.line("X2 local read    ")],
        details: json!({"sandbox": s.json(), "local": l.json()}),
    })
}

/// One X2 `read_file`, checked to have returned the whole file.
async fn read_x2(c: &mut Client, session: &str, args: &serde_json::Value) -> Res<()> {
    match c
        .tool(session, "read_file", args.clone(), REQUEST_LIMIT)
        .await?
    {
        (text, false) if text.ends_with("   100\tline 100\n") => Ok(()),
        (text, is_error) => Err(format!("read_file gave {text:?} (isError {is_error})")),
    }
}
