//! R1, R2 (issue 32): the state directory's spill sweep.
//!
//! R1 times `dsh::state_dir::collect` (what the daemon's periodic sweep and `dsh gc`
//! run: list, in-use set, decision, removals, tombstones) over N spill files, against
//! the floor of any sweep, a plain walk of the same directory (`read_dir` and one
//! `fstatat` per file; for the removing case, plus `unlink` of the same files),
//! alternating which runs first. Two cases: nothing to remove (the steady state), and
//! half the files past the age limit. The target is the issue's: under a second for
//! 100 000 files.
//!
//! R2 (run with R1, on the same files: making 100 000 files takes a minute on a shared
//! disk) is the other half of the claim, that a sweep never blocks a call: a daemon whose
//! spill directory holds N files answers B1's no-process call (`bash_output` of an
//! unknown task: protocol and waterfall, no process) while another connection keeps
//! asking it for `_dsh/state/gc {dryRun: true}` sweeps, against the same calls with
//! nothing else running, in alternating phases. A sweep on an async worker would hold
//! calls for as long as it runs; on the blocking pool it only shares the CPU.

use super::*;
use std::time::SystemTime;

/// Creates spill files `from..to` of 100 bytes in `spill`.
fn make_files(spill: &Path, from: usize, to: usize) -> Res<()> {
    std::fs::create_dir_all(spill).map_err(|e| format!("mkdir {}: {e}", spill.display()))?;
    let body = [b'x'; 100];
    for i in from..to {
        let path = spill.join(format!("bash-{i}.stdout"));
        std::fs::write(&path, body).map_err(|e| format!("create {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Sets every other file's mtime (the even numbers) `days` days back: what a sweep
/// with the default 14-day limit then removes.
fn age_half(spill: &Path, n: usize, days: u64) -> Res<()> {
    let when = SystemTime::now() - Duration::from_secs(days * 86_400);
    for i in (0..n).step_by(2) {
        let path = spill.join(format!("bash-{i}.stdout"));
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(when))
            .map_err(|e| format!("age {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Brings back the files [`age_half`] aged (after a removal), aged again.
fn restore_half(spill: &Path, n: usize) -> Res<()> {
    for i in (0..n).step_by(2) {
        make_files(spill, i, i + 1)?;
    }
    age_half(spill, n, 30)
}

/// The floor: every entry's metadata, as any sweep must read it; with `unlink_before`,
/// the files last written before it are removed too.
fn plain_walk(spill: &Path, unlink_before: Option<SystemTime>) -> Res<usize> {
    let mut seen = 0;
    for entry in std::fs::read_dir(spill).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let meta = entry.metadata().map_err(|e| e.to_string())?;
        seen += 1;
        if let Some(before) = unlink_before
            && meta.modified().map_err(|e| e.to_string())? < before
        {
            std::fs::remove_file(entry.path()).map_err(|e| e.to_string())?;
        }
    }
    Ok(seen)
}

/// One collection of `state` as the daemon's sweep runs it (nothing in use).
fn sweep(state: &Path) -> dsh::state_dir::GcReport {
    let config = dsh::config::StateConfig::default();
    dsh::state_dir::collect(state, &config, Default::default, true, false)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub(crate) async fn r1(env: &Env) -> Res<Outcome> {
    let n = env.counts.r1_files;
    let rounds = env.counts.r1_rounds;
    // The daemon's state directory (R2), used in-process first.
    let state = env.root.join("r1/state");
    let spill = state.join("spill");
    let made = Instant::now();
    make_files(&spill, 0, n)?;
    let made = made.elapsed();
    let (mut swept, mut walked) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let time_sweep = || -> Res<f64> {
            let t = Instant::now();
            let report = sweep(&state);
            let took = ms(t.elapsed());
            if report.spill_files != n || !report.removed.is_empty() {
                return Err(format!(
                    "R1 sweep saw {} files, removed {}",
                    report.spill_files,
                    report.removed.len()
                ));
            }
            Ok(took)
        };
        let time_walk = || -> Res<f64> {
            let t = Instant::now();
            let seen = plain_walk(&spill, None)?;
            if seen != n {
                return Err(format!("R1 walk saw {seen} files"));
            }
            Ok(ms(t.elapsed()))
        };
        if round % 2 == 0 {
            swept.push(time_sweep()?);
            walked.push(time_walk()?);
        } else {
            walked.push(time_walk()?);
            swept.push(time_sweep()?);
        }
    }
    let r2 = r2(env, n).await?;
    // Half the files past the age limit, once each way (a round remakes n/2 files).
    age_half(&spill, n, 30)?;
    let t = Instant::now();
    let report = sweep(&state);
    let removing = ms(t.elapsed());
    if report.removed.len() != n.div_ceil(2) {
        return Err(format!("R1 sweep removed {}", report.removed.len()));
    }
    restore_half(&spill, n)?;
    let t = Instant::now();
    plain_walk(
        &spill,
        Some(SystemTime::now() - Duration::from_secs(14 * 86_400)),
    )?;
    let unlinking = ms(t.elapsed());
    let _ = std::fs::remove_dir_all(env.root.join("r1"));
    let (s, w) = (median(swept.clone()), median(walked.clone()));
    let mut rows = vec![
        Row {
            id: "R1",
            scenario: format!("sweep of {n} spill files, none due"),
            metric: "median time",
            unit: "ms",
            dsh: s,
            baseline: Some(w),
            ratio: Some(s / w),
            target: Target::ValueAtMost(1000.0),
        },
        Row {
            id: "R1",
            scenario: format!("sweep of {n} spill files, half past the age"),
            metric: "time",
            unit: "ms",
            dsh: removing,
            baseline: Some(unlinking),
            ratio: Some(removing / unlinking),
            target: Target::ValueAtMost(1000.0),
        },
    ];
    rows.extend(r2.rows);
    let mut notes = vec![
        format!(
            "R1 {n} files made in {:.1} s; sweep, none due (ms): {swept:.1?}; plain walk: {walked:.1?}",
            made.as_secs_f64()
        ),
        format!("R1 sweep removing half: {removing:.1} ms; walk + unlink: {unlinking:.1} ms"),
    ];
    notes.extend(r2.notes);
    Ok(Outcome {
        rows,
        notes,
        details: json!({"files": n, "sweep_ms": swept, "walk_ms": walked,
                        "sweep_removing_ms": removing, "walk_unlink_ms": unlinking,
                        "r2": r2.details}),
    })
}

/// R2 on the `n` files R1 left in `r1/state/spill` (fresh: every sweep walks all of
/// them and removes none).
async fn r2(env: &Env, n: usize) -> Res<Outcome> {
    let calls = env.counts.b1_calls / 2;
    let daemon = Daemon::start(&env.root, "r1").await?;
    let mut client = daemon.client().await?;
    // After the sweep the daemon starts with (one collection at a time).
    let t = Instant::now();
    daemon
        .client()
        .await?
        .request("_dsh/state/gc", json!({"dryRun": true}), REQUEST_LIMIT)
        .await?;
    let first_sweep = ms(t.elapsed());
    let session = client.new_session(&env.work).await?;
    for _ in 0..env.counts.warmup {
        client.no_process_call(&session).await?;
    }
    let (mut idle, mut during) = (Vec::new(), Vec::new());
    let mut sweeps: Vec<f64> = Vec::new();
    for round in 0..env.counts.r1_rounds {
        let sweeping = round % 2 == 1;
        let stop = tokio_util::sync::CancellationToken::new();
        let background = if sweeping {
            let stop = stop.clone();
            let mut sweeper = daemon.client().await?;
            Some(tokio::spawn(async move {
                let mut took = Vec::new();
                while !stop.is_cancelled() {
                    let t = Instant::now();
                    sweeper
                        .request("_dsh/state/gc", json!({"dryRun": true}), REQUEST_LIMIT)
                        .await?;
                    took.push(ms(t.elapsed()));
                }
                Ok::<_, String>(took)
            }))
        } else {
            None
        };
        for _ in 0..calls {
            let (d, ()) = timed(client.no_process_call(&session)).await?;
            if sweeping { &mut during } else { &mut idle }.push(d);
        }
        stop.cancel();
        if let Some(task) = background {
            sweeps.extend(task.await.map_err(|e| e.to_string())??);
        }
    }
    drop(client);
    daemon.stop().await?;
    let (d, i) = (Stats::of(&during), Stats::of(&idle));
    let sweep_median = if sweeps.is_empty() {
        f64::NAN
    } else {
        median(sweeps.clone())
    };
    Ok(Outcome {
        rows: vec![Row {
            id: "R2",
            scenario: format!("no-process call while `dsh gc` sweeps {n} files"),
            metric: "p99 latency",
            unit: "ms",
            dsh: d.p99,
            baseline: Some(i.p99),
            ratio: Some(d.p99 / i.p99),
            target: Target::Reported,
        }],
        notes: vec![
            d.line("R2 calls during sweeps"),
            i.line("R2 calls with nothing else running"),
            format!(
                "R2 {} sweeps through the daemon ran meanwhile, median {sweep_median:.1} ms each \
                 (the first, after the start sweep: {first_sweep:.1} ms); the slowest call took \
                 {:.3} ms",
                sweeps.len(),
                d.max
            ),
        ],
        details: json!({"during": d.json(), "idle": i.json(), "sweep_ms": sweeps,
                        "first_sweep_ms": first_sweep}),
    })
}
