//! Results: the judged rows, latency distributions, the printed table and the JSON.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

// ---------------------------------------------------------------------------
// Results

/// One judged figure: a row of the printed table and of the JSON.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) id: &'static str,
    pub(crate) scenario: String,
    pub(crate) metric: &'static str,
    pub(crate) unit: &'static str,
    pub(crate) dsh: f64,
    pub(crate) baseline: Option<f64>,
    /// dsh / baseline: for a time lower is better, for a throughput higher.
    /// `None` where the issue names no baseline.
    pub(crate) ratio: Option<f64>,
    pub(crate) target: Target,
}

/// A target of the table.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target {
    RatioAtMost(f64),
    RatioAtLeast(f64),
    ValueAtMost(f64),
    /// dsh may exceed the baseline by at most this much (same unit): for a
    /// figure judged against another of dsh's own, where the gap is the point.
    ExcessAtMost(f64),
    /// Stated, not judged (the issue names no bound).
    Reported,
}

impl Target {
    pub(crate) fn met(self, row: &Row) -> bool {
        match self {
            Target::RatioAtMost(t) => row.ratio.is_some_and(|r| r <= t),
            Target::RatioAtLeast(t) => row.ratio.is_some_and(|r| r >= t),
            Target::ValueAtMost(t) => row.dsh <= t,
            Target::ExcessAtMost(t) => row.baseline.is_some_and(|b| row.dsh - b <= t),
            Target::Reported => true,
        }
    }

    pub(crate) fn describe(self, unit: &str) -> String {
        match self {
            Target::RatioAtMost(t) => format!("ratio <= {t}"),
            Target::RatioAtLeast(t) => format!("ratio >= {t}"),
            Target::ValueAtMost(t) => format!("<= {t} {unit}"),
            Target::ExcessAtMost(t) => format!("<= baseline + {t} {unit}"),
            Target::Reported => "(reported)".into(),
        }
    }
}

/// Everything a scenario reports: judged rows plus the numbers behind them.
pub(crate) struct Outcome {
    pub(crate) rows: Vec<Row>,
    pub(crate) details: Value,
    /// Human-readable lines printed under the table.
    pub(crate) notes: Vec<String>,
}

/// Latency distribution of one series, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stats {
    pub(crate) n: usize,
    pub(crate) p50: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
    pub(crate) max: f64,
    pub(crate) mean: f64,
}

impl Stats {
    pub(crate) fn of(samples: &[Duration]) -> Stats {
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        // Nearest-rank percentiles: always a value that was actually measured.
        let pct = |p: f64| {
            if ms.is_empty() {
                return f64::NAN;
            }
            let rank = ((p / 100.0) * ms.len() as f64).ceil() as usize;
            ms[rank.clamp(1, ms.len()) - 1]
        };
        Stats {
            n: ms.len(),
            p50: pct(50.0),
            p90: pct(90.0),
            p99: pct(99.0),
            max: ms.last().copied().unwrap_or(f64::NAN),
            mean: ms.iter().sum::<f64>() / ms.len().max(1) as f64,
        }
    }

    pub(crate) fn json(&self) -> Value {
        json!({"n": self.n, "p50_ms": self.p50, "p90_ms": self.p90, "p99_ms": self.p99,
               "max_ms": self.max, "mean_ms": self.mean})
    }

    pub(crate) fn line(&self, label: &str) -> String {
        format!(
            "{label}: n={} p50={:.3} p90={:.3} p99={:.3} max={:.3} mean={:.3} ms",
            self.n, self.p50, self.p90, self.p99, self.max, self.mean
        )
    }
}

// ---------------------------------------------------------------------------
// Report

pub(crate) fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

pub(crate) fn print_table(rows: &[Row]) {
    let header = [
        "id", "scenario", "metric", "dsh", "baseline", "ratio", "target", "met",
    ];
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            [
                r.id.to_string(),
                r.scenario.clone(),
                r.metric.to_string(),
                format!("{} {}", fmt_num(r.dsh), r.unit),
                r.baseline
                    .map(|b| format!("{} {}", fmt_num(b), r.unit))
                    .unwrap_or_else(|| "-".into()),
                r.ratio
                    .map(|x| format!("{x:.3}"))
                    .unwrap_or_else(|| "-".into()),
                r.target.describe(r.unit),
                if r.target.met(r) { "yes" } else { "NO" }.to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cols: &[String]| {
        let padded: Vec<String> = cols
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("| {} |", padded.join(" | "));
    };
    line(&header.map(String::from));
    println!(
        "|{}|",
        widths
            .iter()
            .map(|w| "-".repeat(w + 2))
            .collect::<Vec<_>>()
            .join("|")
    );
    for row in &cells {
        line(row);
    }
}

pub(crate) fn row_json(r: &Row) -> Value {
    json!({"id": r.id, "scenario": r.scenario, "metric": r.metric, "unit": r.unit,
           "dsh": r.dsh, "baseline": r.baseline, "ratio": r.ratio,
           "target": r.target.describe(r.unit), "met": r.target.met(r)})
}

/// Cores, memory, CPU model and load: what BENCHMARKS.md records with the table.
pub(crate) fn machine() -> Value {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    json!({
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "mem_total_kib": mem_kib,
        "cpu": model,
        "kernel": kernel.trim(),
        "loadavg_at_start": load.trim(),
    })
}

/// target/ of this build: the bench runs as target/<profile>/deps/daemon-<hash>.
pub(crate) fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.to_path_buf()))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}
