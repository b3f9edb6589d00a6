//! Benchmarks of issue 7: what a `bash` tool call through the dsh daemon costs,
//! measured against the bare process (`cargo bench --bench daemon`).
//!
//! Why it is built this way:
//!
//! * The physical floor of a `bash` tool call is starting `bash -c`. Absolute times
//!   mean little on a shared 2-core machine where other builds run, so every
//!   scenario that has a baseline runs it in this same process, interleaved with the
//!   dsh runs (one dsh call, one baseline call, alternating which goes first), and
//!   the figure that is judged is the ratio of the two. Noise that hits one hits the
//!   other within milliseconds.
//! * The daemon is the real binary (`dsh serve` on a temporary socket and state
//!   directory), driven over ACP exactly as an editor drives it: one JSON line per
//!   message, `_dsh/tools/call`, every `session/update` read. Each scenario gets a
//!   fresh daemon, so memory figures (VmRSS/VmHWM from /proc) belong to it alone.
//! * `--quick` runs the same code paths with small counts; CI runs it to prove the
//!   benchmark still works. It asserts nothing about speed: a missed target is
//!   reported, never an error. Errors are for a benchmark that could not measure
//!   (a call failed, an answer had the wrong text, a timeout).
//! * Every loop has a fixed count, every wait a timeout, and a watchdog ends the
//!   run (and, through PR_SET_PDEATHSIG, the daemon and its tasks) if it hangs.
//!
//! Positional arguments `B1`..`B7`, `A1`, `J1`, `S1`, `X1`, `X2`, `H1`, `H2`, `L1`, `M1`, `N1`, `N2`, `R1` (with R2), `E12`, `W1`
//! run only
//! those scenarios (for profiling one; N1 and N2, the network proxy, run in-process without a daemon);
//! `P1` (only when named) profiles B1's no-process call stretch by stretch, `--perf` adds a
//! `perf record` of the daemon; `P7` (only when named) splits B7's turn the same way;
//! `DSH_BENCH_BIN=<path>` measures another build of dsh (to compare a change).
//! Results: the table on stdout, and `target/bench-daemon.json`
//! (`bench-daemon-quick.json` in quick mode). BENCHMARKS.md records a full run.

mod answerer;
mod client;
mod daemon;
mod editor_path;
mod hooks;
mod mcp;
mod model;
mod netproxy;
mod profile;
mod report;
mod retention;
mod sandbox;
mod scenarios;
mod ssh;
mod tripwires;
mod turn;
mod wrapped;

pub(crate) use answerer::*;
pub(crate) use client::*;
pub(crate) use daemon::*;
pub(crate) use editor_path::a1;
pub(crate) use hooks::{h1, h2, l1};
pub(crate) use mcp::m1;
pub(crate) use model::*;
pub(crate) use profile::*;
pub(crate) use report::*;
pub(crate) use scenarios::*;
pub(crate) use ssh::s1;
pub(crate) use turn::*;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The daemon under test: the binary cargo built with this bench (same profile),
/// or another build named by `DSH_BENCH_BIN`, to measure a change against it.
pub(crate) fn dsh_bin() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var_os("DSH_BENCH_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_dsh")))
    })
}

/// Longest wait for any ordinary answer. Generous: it only bounds a hang.
pub(crate) const REQUEST_LIMIT: Duration = Duration::from_secs(60);
/// Longest wait for the 1 GiB call of B3 (it takes seconds; this bounds a hang).
pub(crate) const BULK_LIMIT: Duration = Duration::from_secs(600);

pub(crate) type Res<T> = Result<T, String>;

/// How much work each scenario does. Quick mode has the same shape, smaller.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counts {
    /// Untimed calls before each latency scenario: the first calls fault in code
    /// and grow buffers, which is start-up cost, not per-call cost.
    pub(crate) warmup: usize,
    pub(crate) b1_calls: usize,
    pub(crate) b2_connections: usize,
    pub(crate) b2_calls: usize,
    /// B2 alternates dsh and baseline phases this many times.
    pub(crate) b2_rounds: usize,
    pub(crate) b3_bytes: u64,
    /// B3 repetitions (each is one dsh call and one direct run).
    pub(crate) b3_reps: usize,
    pub(crate) b4_tasks: usize,
    pub(crate) b4_sessions: usize,
    pub(crate) b5_sessions: usize,
    pub(crate) b6_calls: usize,
    pub(crate) j1_judgements: usize,
    /// B7 turns of each kind (dsh, its floor, dsh against the split server).
    pub(crate) b7_turns: usize,
    /// N1: bytes of each download, and rounds (one through the proxy, one direct).
    pub(crate) n1_bytes: u64,
    pub(crate) n1_rounds: usize,
    /// N2: first bytes timed each way, and tunnels held open for the memory figure.
    pub(crate) n2_iterations: usize,
    pub(crate) n2_tunnels: usize,
    /// R1, R2: spill files in the swept directory, and rounds of the repeated
    /// measurements (the removing sweep runs once: each run remakes half the files).
    pub(crate) r1_files: usize,
    pub(crate) r1_rounds: usize,
    /// E12: rounds of each search (full, path-based, from the snapshot).
    pub(crate) e12_rounds: usize,
}

pub(crate) const FULL: Counts = Counts {
    warmup: 20,
    b1_calls: 1000,
    b2_connections: 32,
    b2_calls: 50,
    b2_rounds: 5,
    b3_bytes: 1 << 30,
    b3_reps: 3,
    b4_tasks: 1000,
    b4_sessions: 100,
    b5_sessions: 10_000,
    b6_calls: 1000,
    j1_judgements: 300,
    b7_turns: 300,
    n1_bytes: 100_000_000,
    n1_rounds: 15,
    n2_iterations: 1000,
    n2_tunnels: 200,
    r1_files: 100_000,
    r1_rounds: 6,
    e12_rounds: 21,
};

pub(crate) const QUICK: Counts = Counts {
    warmup: 3,
    b1_calls: 40,
    b2_connections: 4,
    b2_calls: 6,
    b2_rounds: 2,
    // Still far past the 64000-byte memory bound, so the spill path runs.
    b3_bytes: 8 << 20,
    b3_reps: 1,
    b4_tasks: 40,
    b4_sessions: 4,
    b5_sessions: 200,
    b6_calls: 40,
    j1_judgements: 20,
    b7_turns: 20,
    n1_bytes: 4_000_000,
    n1_rounds: 3,
    n2_iterations: 40,
    n2_tunnels: 20,
    r1_files: 5_000,
    r1_rounds: 2,
    e12_rounds: 3,
};

// ---------------------------------------------------------------------------

pub(crate) type ScenarioFn =
    for<'a> fn(&'a Env) -> std::pin::Pin<Box<dyn Future<Output = Res<Outcome>> + 'a>>;

pub(crate) const SCENARIOS: [(&str, ScenarioFn); 23] = [
    ("B1", |e| Box::pin(b1(e))),
    ("A1", |e| Box::pin(a1(e))),
    ("B2", |e| Box::pin(b2(e))),
    ("B3", |e| Box::pin(b3(e))),
    ("B4", |e| Box::pin(b4(e))),
    ("B5", |e| Box::pin(b5(e))),
    ("B6", |e| Box::pin(b6(e))),
    ("J1", |e| Box::pin(j1(e))),
    ("S1", |e| Box::pin(s1(e))),
    ("X1", |e| Box::pin(sandbox::x1(e))),
    ("X2", |e| Box::pin(sandbox::x2(e))),
    ("B7", |e| Box::pin(b7(e))),
    ("H1", |e| Box::pin(h1(e))),
    ("H2", |e| Box::pin(h2(e))),
    ("L1", |e| Box::pin(l1(e))),
    ("M1", |e| Box::pin(m1(e))),
    ("N1", |e| Box::pin(netproxy::n1(e))),
    ("N2", |e| Box::pin(netproxy::n2(e))),
    ("R1", |e| Box::pin(retention::r1(e))),
    ("E12", |e| Box::pin(tripwires::e12(e))),
    ("W1", |e| Box::pin(wrapped::w1(e))),
    ("P1", |e| Box::pin(p1(e))),
    ("P7", |e| Box::pin(p7(e))),
];

/// Profiles, not benchmarks: they judge nothing and run only when named.
pub(crate) const ON_REQUEST: [&str; 2] = ["P1", "P7"];

pub(crate) async fn run(quick: bool, only: &[String]) -> Res<bool> {
    let counts = if quick { QUICK } else { FULL };
    let tmp = tempfile::Builder::new()
        .prefix("dsh-bench-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    let root = tmp.path().to_path_buf();
    let work = root.join("work");
    std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
    let env = Env { root, work, counts };
    let machine = machine();
    println!(
        "dsh daemon benchmark ({} mode), {}\nmachine: {machine}",
        if quick { "quick" } else { "full" },
        dsh_bin().display()
    );
    let started = Instant::now();
    let (mut rows, mut notes, mut details) = (Vec::new(), Vec::new(), serde_json::Map::new());
    for (id, scenario) in SCENARIOS {
        let named = only.iter().any(|o| o.eq_ignore_ascii_case(id));
        if (!only.is_empty() || ON_REQUEST.contains(&id)) && !named {
            continue;
        }
        let t = Instant::now();
        let outcome = scenario(&env).await.map_err(|e| format!("{id}: {e}"))?;
        println!("{id} done in {:.1} s", t.elapsed().as_secs_f64());
        rows.extend(outcome.rows);
        notes.extend(outcome.notes);
        details.insert(id.to_string(), outcome.details);
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!();
    print_table(&rows);
    println!();
    for n in &notes {
        println!("{n}");
    }
    println!("total {elapsed:.1} s");
    let report = json!({
        "mode": if quick { "quick" } else { "full" },
        "scenarios": if only.is_empty() { json!("all") } else { json!(only) },
        "binary": dsh_bin().display().to_string(),
        "unix_time": unix_now(),
        "machine": machine,
        "counts": format!("{counts:?}"),
        "seconds": elapsed,
        "rows": rows.iter().map(row_json).collect::<Vec<_>>(),
        "details": details,
    });
    // A quick or partial run never overwrites the record of a full one.
    let name = match (quick, only.is_empty()) {
        (true, _) => "bench-daemon-quick.json",
        (false, false) => "bench-daemon-partial.json",
        (false, true) => "bench-daemon.json",
    };
    let path = target_dir().join(name);
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&path, text + "\n").map_err(|e| format!("write {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(rows.iter().all(|r| r.target.met(r)))
}

pub(crate) fn main() -> ExitCode {
    // Started by the bench itself as the floor under B1's no-process call.
    if let Ok(spec) = std::env::var(ANSWERER_ENV) {
        return answerer::serve(&spec);
    }
    // `cargo bench` passes `--bench`; other flags are ignored the same way.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only: Vec<String> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .cloned()
        .collect();
    // Bounds the whole run: a hang becomes a failure, and exiting ends the daemon
    // through its parent-death signal.
    let limit = Duration::from_secs(if quick { 600 } else { 1200 });
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("dsh bench: still running after {limit:?}; giving up");
        std::process::exit(3);
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dsh bench: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(quick, &only)) {
        // Speed is reported, never asserted (the issue: CI proves it runs).
        Ok(all_met) => {
            if !all_met {
                println!("some targets were missed; see BENCHMARKS.md for why");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dsh bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}
