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
//! Positional arguments `B1`..`B6`, `J1` run only those scenarios (for profiling one);
//! `DSH_BENCH_BIN=<path>` measures another build of dsh (to compare a change).
//! Results: the table on stdout, and `target/bench-daemon.json`
//! (`bench-daemon-quick.json` in quick mode). BENCHMARKS.md records a full run.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::task::JoinSet;

/// The daemon under test: the binary cargo built with this bench (same profile),
/// or another build named by `DSH_BENCH_BIN`, to measure a change against it.
fn dsh_bin() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var_os("DSH_BENCH_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_dsh")))
    })
}

/// Longest wait for any ordinary answer. Generous: it only bounds a hang.
const REQUEST_LIMIT: Duration = Duration::from_secs(60);
/// Longest wait for the 1 GiB call of B3 (it takes seconds; this bounds a hang).
const BULK_LIMIT: Duration = Duration::from_secs(600);

type Res<T> = Result<T, String>;

/// How much work each scenario does. Quick mode has the same shape, smaller.
#[derive(Debug, Clone, Copy)]
struct Counts {
    /// Untimed calls before each latency scenario: the first calls fault in code
    /// and grow buffers, which is start-up cost, not per-call cost.
    warmup: usize,
    b1_calls: usize,
    b2_connections: usize,
    b2_calls: usize,
    /// B2 alternates dsh and baseline phases this many times.
    b2_rounds: usize,
    b3_bytes: u64,
    /// B3 repetitions (each is one dsh call and one direct run).
    b3_reps: usize,
    b4_tasks: usize,
    b4_sessions: usize,
    b5_sessions: usize,
    b6_calls: usize,
    j1_judgements: usize,
}

const FULL: Counts = Counts {
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
};

const QUICK: Counts = Counts {
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
};

// ---------------------------------------------------------------------------
// Results

/// One judged figure: a row of the printed table and of the JSON.
#[derive(Debug, Clone)]
struct Row {
    id: &'static str,
    scenario: String,
    metric: &'static str,
    unit: &'static str,
    dsh: f64,
    baseline: Option<f64>,
    /// dsh / baseline: for a time lower is better, for a throughput higher.
    /// `None` where the issue names no baseline.
    ratio: Option<f64>,
    target: Target,
}

/// A target of the table.
#[derive(Debug, Clone, Copy)]
enum Target {
    RatioAtMost(f64),
    RatioAtLeast(f64),
    ValueAtMost(f64),
}

impl Target {
    fn met(self, row: &Row) -> bool {
        match self {
            Target::RatioAtMost(t) => row.ratio.is_some_and(|r| r <= t),
            Target::RatioAtLeast(t) => row.ratio.is_some_and(|r| r >= t),
            Target::ValueAtMost(t) => row.dsh <= t,
        }
    }

    fn describe(self, unit: &str) -> String {
        match self {
            Target::RatioAtMost(t) => format!("ratio <= {t}"),
            Target::RatioAtLeast(t) => format!("ratio >= {t}"),
            Target::ValueAtMost(t) => format!("<= {t} {unit}"),
        }
    }
}

/// Everything a scenario reports: judged rows plus the numbers behind them.
struct Outcome {
    rows: Vec<Row>,
    details: Value,
    /// Human-readable lines printed under the table.
    notes: Vec<String>,
}

/// Latency distribution of one series, in milliseconds.
#[derive(Debug, Clone, Copy)]
struct Stats {
    n: usize,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
    mean: f64,
}

impl Stats {
    fn of(samples: &[Duration]) -> Stats {
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

    fn json(&self) -> Value {
        json!({"n": self.n, "p50_ms": self.p50, "p90_ms": self.p90, "p99_ms": self.p99,
               "max_ms": self.max, "mean_ms": self.mean})
    }

    fn line(&self, label: &str) -> String {
        format!(
            "{label}: n={} p50={:.3} p90={:.3} p99={:.3} max={:.3} mean={:.3} ms",
            self.n, self.p50, self.p90, self.p99, self.max, self.mean
        )
    }
}

// ---------------------------------------------------------------------------
// The ACP client

/// A minimal sequential JSON-lines ACP client: one request in flight, every
/// notification read (and dropped) while waiting, permission requests answered
/// `allow_once` at once. Sequential is all the scenarios need: concurrency
/// comes from several clients.
struct Client {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    next_id: u64,
    line: String,
    /// `session/update` notifications read.
    updates: u64,
    /// `session/request_permission` requests answered.
    asked: u64,
}

impl Client {
    async fn connect(socket: &Path) -> Res<Client> {
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|e| format!("connect {}: {e}", socket.display()))?;
        let (reader, writer) = stream.into_split();
        let mut client = Client {
            reader: BufReader::with_capacity(64 * 1024, reader),
            writer,
            next_id: 1,
            line: String::new(),
            updates: 0,
            asked: 0,
        };
        // ACP: nothing but initialize before initialize has been answered.
        client
            .request("initialize", json!({"protocolVersion": 1}), REQUEST_LIMIT)
            .await?;
        Ok(client)
    }

    async fn send(&mut self, message: &Value) -> Res<()> {
        let mut bytes = serde_json::to_vec(message).map_err(|e| e.to_string())?;
        bytes.push(b'\n');
        self.writer
            .write_all(&bytes)
            .await
            .map_err(|e| format!("write to the daemon: {e}"))
    }

    /// Sends a request and reads until its answer: the result, or the error as text.
    async fn request(&mut self, method: &str, params: Value, limit: Duration) -> Res<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let exchange = async {
            self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
                .await?;
            loop {
                let message = self.next_message().await?;
                if let Some(m) = message.get("method").and_then(Value::as_str) {
                    self.absorb(m, &message).await?;
                    continue;
                }
                if message["id"] != json!(id) {
                    return Err(format!("answer to an unknown request: {message}"));
                }
                return match message.get("error") {
                    Some(e) => Err(format!("{method} failed: {e}")),
                    None => Ok(message["result"].clone()),
                };
            }
        };
        tokio::time::timeout(limit, exchange)
            .await
            .map_err(|_| format!("{method}: no answer within {limit:?}"))?
    }

    async fn next_message(&mut self) -> Res<Value> {
        self.line.clear();
        let n = self
            .reader
            .read_line(&mut self.line)
            .await
            .map_err(|e| format!("read from the daemon: {e}"))?;
        if n == 0 {
            return Err("the daemon closed the connection".into());
        }
        serde_json::from_str(&self.line).map_err(|e| format!("not JSON from dsh ({e})"))
    }

    /// A message from the daemon that is not our answer.
    async fn absorb(&mut self, method: &str, message: &Value) -> Res<()> {
        match method {
            "session/update" => self.updates += 1,
            "session/request_permission" => {
                // The editor's user answering at once: the cost measured in B6 is
                // dsh's round trip, not a person.
                self.asked += 1;
                let answer = json!({"jsonrpc": "2.0", "id": message["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}});
                self.send(&answer).await?;
            }
            other => return Err(format!("unexpected request from dsh: {other}")),
        }
        Ok(())
    }

    async fn new_session(&mut self, cwd: &Path) -> Res<String> {
        let r = self
            .request(
                "session/new",
                json!({"cwd": cwd, "mcpServers": []}),
                REQUEST_LIMIT,
            )
            .await?;
        r["sessionId"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("session/new without a sessionId: {r}"))
    }

    async fn set_mode(&mut self, session: &str, mode: &str) -> Res<()> {
        self.request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": mode}),
            REQUEST_LIMIT,
        )
        .await
        .map(drop)
    }

    /// `_dsh/tools/call` as `session`: (text, isError).
    async fn tool(
        &mut self,
        session: &str,
        name: &str,
        arguments: Value,
        limit: Duration,
    ) -> Res<(String, bool)> {
        let r = self
            .request(
                "_dsh/tools/call",
                json!({"sessionId": session, "name": name, "arguments": arguments}),
                limit,
            )
            .await?;
        let text = r["content"][0]["text"]
            .as_str()
            .ok_or_else(|| format!("tool result without text: {r}"))?;
        Ok((text.to_string(), r["isError"].as_bool().unwrap_or(true)))
    }

    /// A tool call that runs no process: `bash_output` of a task that does not
    /// exist. It crosses the protocol and the whole waterfall (audit, schema,
    /// policy, permission, tool, session log, updates) and ends in the registry,
    /// so it is the part of a `bash` call's cost that is not the executor's.
    async fn no_process_call(&mut self, session: &str) -> Res<()> {
        let args = json!({"task_id": "bash-0"});
        match self
            .tool(session, "bash_output", args, REQUEST_LIMIT)
            .await?
        {
            (text, true) if text.ends_with("unknown bash task \"bash-0\"") => Ok(()),
            (text, is_error) => Err(format!(
                "bash_output bash-0 gave {text:?} (isError {is_error})"
            )),
        }
    }

    /// One `bash` call of `true`, checked to have run and succeeded.
    async fn bash_true(&mut self, session: &str) -> Res<()> {
        let args = json!({"command": "true", "description": "bench"});
        match self.tool(session, "bash", args, REQUEST_LIMIT).await? {
            (text, false) if text == "(no output)" => Ok(()),
            (text, is_error) => Err(format!("bash true gave {text:?} (isError {is_error})")),
        }
    }
}

// ---------------------------------------------------------------------------
// Baselines: the same work without dsh

/// `bash -c <command>` spawned directly with tokio, output captured through pipes
/// as dsh captures it (stdin from /dev/null, as dsh does). Returns stdout.
async fn direct(command: &str) -> Res<Vec<u8>> {
    let out = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("spawn bash: {e}"))?;
    if !out.status.success() {
        return Err(format!("bash -c {command:?} failed: {}", out.status));
    }
    Ok(out.stdout)
}

/// Times one future.
async fn timed<T>(f: impl Future<Output = Res<T>>) -> Res<(Duration, T)> {
    let t = Instant::now();
    let v = f.await?;
    Ok((t.elapsed(), v))
}

// ---------------------------------------------------------------------------
// The daemon under test

/// Memory of the daemon process, KiB, from /proc/<pid>/status.
#[derive(Debug, Clone, Copy)]
struct Mem {
    rss: u64,
    hwm: u64,
}

fn memory(pid: u32) -> Res<Mem> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("read /proc/{pid}/status: {e}"))?;
    let field = |name: &str| -> Res<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| format!("no {name} in /proc/{pid}/status"))
    };
    Ok(Mem {
        rss: field("VmRSS:")?,
        hwm: field("VmHWM:")?,
    })
}

/// One `dsh serve` on a private socket and state directory.
struct Daemon {
    child: tokio::process::Child,
    pid: u32,
    socket: PathBuf,
    /// Kept open: the daemon's stdout is a pipe, and a closed pipe would turn a
    /// later print into an error inside the daemon.
    _stdout: tokio::process::ChildStdout,
}

impl Daemon {
    async fn start(root: &Path, name: &str) -> Res<Daemon> {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let config = dir.join("dsh.toml");
        // The built-in defaults, written out so the run does not depend on any
        // config of the person running it.
        std::fs::write(&config, "[exec]\nkind = \"local\"\n").map_err(|e| e.to_string())?;
        let stderr = std::fs::File::create(dir.join("daemon.stderr")).map_err(|e| e.to_string())?;
        let socket = dir.join("run/dsh.sock");
        let mut cmd = tokio::process::Command::new(dsh_bin());
        cmd.arg("serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        // If this bench dies (panic, watchdog), the daemon gets SIGTERM and shuts
        // down the way it always does, killing every task it started. Spawned
        // from the main thread (the runtime's block_on), which lives as long as
        // the process.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", dsh_bin().display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout);
        let mut first = String::new();
        tokio::time::timeout(Duration::from_secs(30), lines.read_line(&mut first))
            .await
            .map_err(|_| "the daemon did not report ready within 30 s".to_string())?
            .map_err(|e| e.to_string())?;
        if !first.starts_with("dsh daemon listening on") {
            return Err(format!(
                "the daemon did not start ({first:?}); see {}",
                dir.join("daemon.stderr").display()
            ));
        }
        let mut probe = Client::connect(&socket).await?;
        let status = probe
            .request("_dsh/status", json!({}), REQUEST_LIMIT)
            .await?;
        let pid = status["pid"].as_u64().ok_or("status without pid")? as u32;
        Ok(Daemon {
            child,
            pid,
            socket,
            _stdout: lines.into_inner(),
        })
    }

    async fn client(&self) -> Res<Client> {
        Client::connect(&self.socket).await
    }

    fn memory(&self) -> Res<Mem> {
        memory(self.pid)
    }

    /// `dsh stop`, then wait for the process to end (it kills every task first).
    async fn stop(mut self) -> Res<()> {
        let stopped = tokio::process::Command::new(dsh_bin())
            .arg("stop")
            .arg("--socket")
            .arg(&self.socket)
            .stdout(Stdio::null())
            .status();
        let status = tokio::time::timeout(Duration::from_secs(120), stopped)
            .await
            .map_err(|_| "dsh stop hung".to_string())?
            .map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("dsh stop failed: {status}"));
        }
        tokio::time::timeout(Duration::from_secs(120), self.child.wait())
            .await
            .map_err(|_| "the daemon did not exit after dsh stop".to_string())?
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

impl Drop for Daemon {
    /// On an error path: SIGTERM (a graceful shutdown that kills the tasks), a
    /// bounded wait, then SIGKILL.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: plain kill(2) of our own child.
            unsafe { libc::kill(self.pid as i32, libc::SIGTERM) };
            for _ in 0..300 {
                if !matches!(self.child.try_wait(), Ok(None)) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = self.child.start_kill();
        }
    }
}

// ---------------------------------------------------------------------------
// Scenarios

/// What every scenario gets.
struct Env {
    root: PathBuf,
    /// The sessions' cwd.
    work: PathBuf,
    counts: Counts,
}

fn kib_to_mib(kib: f64) -> f64 {
    kib / 1024.0
}

/// B1: sequential `bash true` calls on one session against direct spawns.
async fn b1(env: &Env) -> Res<Outcome> {
    let n = env.counts.b1_calls;
    let daemon = Daemon::start(&env.root, "b1").await?;
    let mut client = daemon.client().await?;
    let session = client.new_session(&env.work).await?;
    client.set_mode(&session, "auto").await?;
    for _ in 0..env.counts.warmup {
        client.bash_true(&session).await?;
        direct("true").await?;
    }
    let before = daemon.memory()?;
    let (mut dsh, mut base) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut floor = Vec::with_capacity(n);
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
    }
    let after = daemon.memory()?;
    let updates = client.updates;
    daemon.stop().await?;
    let (d, b, f) = (Stats::of(&dsh), Stats::of(&base), Stats::of(&floor));
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
            format!(
                "B1 dsh adds {:.3} ms per call at the median; a call that runs no process costs {:.3} ms",
                d.p50 - b.p50,
                f.p50
            ),
            format!(
                "B1 daemon RSS {} -> {} KiB over the calls; {updates} session/update read",
                before.rss, after.rss
            ),
        ],
        details: json!({"dsh": d.json(), "baseline": b.json(), "no_process_call": f.json(),
                        "rss_kib_before": before.rss, "rss_kib_after": after.rss,
                        "session_updates": updates}),
    })
}

/// B2: many connections calling at once, against as many concurrent spawn loops.
async fn b2(env: &Env) -> Res<Outcome> {
    let c = env.counts;
    let per_round = c.b2_calls / c.b2_rounds;
    let total = c.b2_connections * per_round * c.b2_rounds;
    let daemon = Daemon::start(&env.root, "b2").await?;
    let mut clients = Vec::with_capacity(c.b2_connections);
    for _ in 0..c.b2_connections {
        let mut client = daemon.client().await?;
        let session = client.new_session(&env.work).await?;
        client.set_mode(&session, "auto").await?;
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
fn spill_path(text: &str) -> Option<PathBuf> {
    const MARK: &str = "[output truncated; full output: ";
    let start = text.rfind(MARK)? + MARK.len();
    let end = start + text[start..].find(']')?;
    Some(PathBuf::from(&text[start..end]))
}

/// Size of `path`, then removes it: every byte must have arrived, and two GiB of
/// leftovers per repetition would fill a small disk.
fn check_and_remove(path: &Path, bytes: u64) -> Res<()> {
    let len = std::fs::metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    std::fs::remove_file(path).map_err(|e| format!("remove {}: {e}", path.display()))?;
    if len != bytes {
        return Err(format!("{} holds {len} bytes, not {bytes}", path.display()));
    }
    Ok(())
}

/// B3: one call printing a lot, against the same command writing to a file.
async fn b3(env: &Env) -> Res<Outcome> {
    let c = env.counts;
    let bytes = c.b3_bytes;
    let daemon = Daemon::start(&env.root, "b3").await?;
    let mut client = daemon.client().await?;
    let session = client.new_session(&env.work).await?;
    client.set_mode(&session, "auto").await?;
    client.bash_true(&session).await?;
    let command = format!("head -c {bytes} /dev/zero");
    let direct_file = env.root.join("b3-direct.out");
    let direct_command = format!("{command} > '{}'", direct_file.display());
    let before = daemon.memory()?;
    let (mut dsh, mut base) = (Vec::new(), Vec::new());
    for rep in 0..c.b3_reps {
        for dsh_turn in [rep % 2 == 0, rep % 2 != 0] {
            if dsh_turn {
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
    let (d, b) = (Stats::of(&dsh), Stats::of(&base));
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
                scenario,
                metric: "time (median)",
                unit: "ms",
                dsh: d.p50,
                baseline: Some(b.p50),
                ratio: Some(d.p50 / b.p50),
                target: Target::RatioAtMost(2.0),
            },
        ],
        notes: vec![
            d.line("B3 dsh call          "),
            b.line("B3 direct to a file  "),
            format!(
                "B3 daemon VmRSS before {} KiB, VmHWM after {} KiB, VmRSS after {} KiB",
                before.rss, after.hwm, after.rss
            ),
        ],
        details: json!({"bytes": bytes, "reps": c.b3_reps, "dsh": d.json(), "baseline": b.json(),
                        "rss_kib_before": before.rss, "hwm_kib_after": after.hwm,
                        "rss_kib_after": after.rss}),
    })
}

fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(200);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    &text[start..]
}

/// B4: many idle background tasks, then one `bash_output` on each.
async fn b4(env: &Env) -> Res<Outcome> {
    let c = env.counts;
    let daemon = Daemon::start(&env.root, "b4").await?;
    let mut client = daemon.client().await?;
    let mut sessions = Vec::with_capacity(c.b4_sessions);
    for _ in 0..c.b4_sessions {
        let session = client.new_session(&env.work).await?;
        client.set_mode(&session, "auto").await?;
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
async fn b5(env: &Env) -> Res<Outcome> {
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
async fn b6(env: &Env) -> Res<Outcome> {
    let n = env.counts.b6_calls;
    let daemon = Daemon::start(&env.root, "b6").await?;
    let mut client = daemon.client().await?;
    // Mode `ask` is the default: no rule matches `true`, so every call is asked.
    let asking = client.new_session(&env.work).await?;
    let allowed = client.new_session(&env.work).await?;
    client.set_mode(&allowed, "auto").await?;
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
fn compound_line(bytes: usize) -> String {
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

/// J1 (issue 12): judging a 10 KB compound command line in-process, against judging
/// `git status` in the same moment; the target is under 1 ms per judgement.
async fn j1(env: &Env) -> Res<Outcome> {
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
    for i in 0..n + env.counts.warmup {
        let a = Instant::now();
        std::hint::black_box(policy.judge("bash", &long, Mode::Auto, &[]));
        let a = a.elapsed();
        let b = Instant::now();
        std::hint::black_box(policy.judge("bash", &short, Mode::Auto, &[]));
        let b = b.elapsed();
        if i >= env.counts.warmup {
            long_times.push(a);
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
            s.line("J1 `git status`"),
            split.line("J1 10 KB line, splitting only (parse + walk)"),
            tenth.line("J1 a tenth of it, splitting only"),
        ],
        details: json!({"long": l.json(), "short": s.json(), "split_only": split.json(),
                        "tenth_split_only": tenth.json(), "segments": judged.segments.len()}),
    })
}

// ---------------------------------------------------------------------------
// Report

fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn print_table(rows: &[Row]) {
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

fn row_json(r: &Row) -> Value {
    json!({"id": r.id, "scenario": r.scenario, "metric": r.metric, "unit": r.unit,
           "dsh": r.dsh, "baseline": r.baseline, "ratio": r.ratio,
           "target": r.target.describe(r.unit), "met": r.target.met(r)})
}

/// Cores, memory, CPU model and load: what BENCHMARKS.md records with the table.
fn machine() -> Value {
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
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.to_path_buf()))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------

type ScenarioFn = for<'a> fn(&'a Env) -> std::pin::Pin<Box<dyn Future<Output = Res<Outcome>> + 'a>>;

const SCENARIOS: [(&str, ScenarioFn); 7] = [
    ("B1", |e| Box::pin(b1(e))),
    ("B2", |e| Box::pin(b2(e))),
    ("B3", |e| Box::pin(b3(e))),
    ("B4", |e| Box::pin(b4(e))),
    ("B5", |e| Box::pin(b5(e))),
    ("B6", |e| Box::pin(b6(e))),
    ("J1", |e| Box::pin(j1(e))),
];

async fn run(quick: bool, only: &[String]) -> Res<bool> {
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
        if !only.is_empty() && !only.iter().any(|o| o.eq_ignore_ascii_case(id)) {
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

fn main() -> ExitCode {
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
