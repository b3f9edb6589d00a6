//! A bounded soak of the real daemon (issue 8): 50 connections with 4 sessions
//! each issue a seeded mix of commands on loopback until a deadline, then the
//! test checks there were no protocol errors, that nothing is left running,
//! that the daemon's memory came back, and that every session's log replays
//! exactly what its client saw.
//!
//! `DSH_SOAK_SECS` sets how long the mixed load runs (default 10, so `cargo
//! test` stays quick; CI runs 60), `DSH_SOAK_SEED` the seed. The operations
//! each connection issues are a function of the seed and its index; only their
//! interleaving depends on the machine.
//!
//! Memory: glibc keeps freed memory in its arenas and a fresh daemon has never
//! touched most of what it will use, so "RSS at start" means the RSS after a
//! warm-up in which every connection ran every kind of operation once, measured
//! once the daemon is idle again. The soak then runs for its whole duration and
//! the RSS, measured the same way, must be within 10% of that baseline: a leak
//! grows with the work done, the allocator's high-water mark does not.

mod common;

use common::client::Client;
use common::daemon::{SocketDaemon, processes_under, workspace};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;

const CONNECTIONS: usize = 50;
const SESSIONS_PER_CONNECTION: usize = 4;
/// Bytes the "large" command prints: over the 64000-byte bound, so it spills.
const LARGE: usize = 100_000;

/// The commands the sessions may run without a question; `touch` is asked.
const CONFIG: &str = r#"[permissions]
default_mode = "ask"
[[permissions.rules]]
tool = "bash"
command = "echo"
action = "allow"
[[permissions.rules]]
tool = "bash"
command = "sleep"
action = "allow"
[[permissions.rules]]
tool = "bash"
command = "head"
action = "allow"
[[permissions.rules]]
tool = "bash"
command = "tr"
action = "allow"
[[permissions.rules]]
tool = "bash"
command = "seq"
action = "allow"
"#;

/// SplitMix64: a tiny, well-mixed generator, so runs repeat from their seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    /// `echo N` through `_dsh/tools/call`.
    Short,
    /// `!echo N` as a prompt.
    BangPrompt,
    /// A command that takes a while.
    Long,
    /// Output over the bound: truncated text plus a spill file holding all of it.
    Large,
    /// Background task: start, poll while it runs, kill, read the final status.
    Background,
    /// A command that is asked; the answer is picked at random.
    Ask,
}

const OPS: [Op; 6] = [
    Op::Short,
    Op::BangPrompt,
    Op::Long,
    Op::Large,
    Op::Background,
    Op::Ask,
];

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One connection's client and sessions.
struct Worker {
    index: usize,
    client: Client,
    sessions: Vec<(String, PathBuf)>,
    rng: Rng,
    counter: u64,
    done: HashMap<Op, u64>,
}

fn text_of(result: &Value) -> String {
    result["rawOutput"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

impl Worker {
    fn fail(&self, op: Op, what: &str) -> ! {
        panic!("connection {}: {op:?}: {what}", self.index)
    }

    async fn tool(&mut self, op: Op, session: &str, name: &str, args: Value) -> (String, bool) {
        let params = json!({"sessionId": session, "name": name, "arguments": args});
        match self.client.request("_dsh/tools/call", params).await {
            Ok(r) => (
                r["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                r["isError"].as_bool().unwrap_or(true),
            ),
            Err(e) => self.fail(op, &format!("protocol error {e}")),
        }
    }

    async fn bash(&mut self, op: Op, session: &str, command: &str) -> (String, bool) {
        let args = json!({"command": command, "description": "soak command"});
        self.tool(op, session, "bash", args).await
    }

    /// Runs one operation in one of this connection's sessions and checks its result.
    /// `session`: which of the connection's sessions, or one at random.
    async fn run(&mut self, op: Op, session: Option<usize>) {
        let pick = session.unwrap_or_else(|| self.rng.below(self.sessions.len() as u64) as usize);
        let (session, ws) = self.sessions[pick].clone();
        self.counter += 1;
        let n = format!("{}-{}", self.index, self.counter);
        match op {
            Op::Short => {
                let got = self.bash(op, &session, &format!("echo {n}")).await;
                if got != (format!("{n}\n"), false) {
                    self.fail(op, &format!("{got:?}"));
                }
            }
            Op::BangPrompt => {
                let params = json!({"sessionId": session,
                    "prompt": [{"type": "text", "text": format!("!echo {n}")}]});
                match self.client.request("session/prompt", params).await {
                    Ok(r) if r["stopReason"] == "end_turn" => {}
                    other => self.fail(op, &format!("{other:?}")),
                }
                let last = self
                    .client
                    .updates_of(&session, "tool_call_update")
                    .pop()
                    .unwrap_or_default();
                if last["status"] != "completed" || text_of(&last) != format!("{n}\n") {
                    self.fail(op, &format!("{last}"));
                }
            }
            Op::Long => {
                let got = self
                    .bash(op, &session, &format!("sleep 0.3; echo {n}"))
                    .await;
                if got != (format!("{n}\n"), false) {
                    self.fail(op, &format!("{got:?}"));
                }
            }
            Op::Large => {
                let command = format!("head -c {LARGE} /dev/zero | tr '\\0' x");
                let (text, is_error) = self.bash(op, &session, &command).await;
                let marker = "\n[output truncated; full output: ";
                let Some((kept, path)) = text.split_once(marker) else {
                    self.fail(op, &text[text.len().saturating_sub(200)..])
                };
                let path = path.strip_suffix(']').unwrap_or(path);
                let spilled = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
                if is_error || kept.len() != 64000 || spilled != LARGE as u64 {
                    self.fail(op, &format!("kept {} spilled {spilled}", kept.len()));
                }
                // The test's own output; removed so a long soak does not fill the disk.
                let _ = std::fs::remove_file(path);
            }
            Op::Background => {
                let command =
                    format!("echo {n}; for i in $(seq 1 100000); do echo $i; sleep 0.01; done");
                let args = json!({"command": command, "description": "soak task",
                                  "run_in_background": true});
                let (text, _) = self.tool(op, &session, "bash", args).await;
                let Some(task) = text.strip_prefix("started background task ") else {
                    self.fail(op, &text)
                };
                let task = task.to_string();
                for _ in 0..=self.rng.below(3) {
                    let (read, is_error) = self
                        .tool(op, &session, "bash_output", json!({"task_id": task}))
                        .await;
                    if is_error || !read.ends_with("[status: running]") {
                        self.fail(op, &read);
                    }
                }
                let (killed, _) = self
                    .tool(op, &session, "bash_kill", json!({"task_id": task}))
                    .await;
                if killed != format!("killed background task {task}") {
                    self.fail(op, &killed);
                }
                let (read, _) = self
                    .tool(op, &session, "bash_output", json!({"task_id": task}))
                    .await;
                if !read.ends_with("[status: killed by SIGTERM]") {
                    self.fail(op, &read);
                }
            }
            Op::Ask => {
                let allow = self.rng.below(2) == 0;
                let answer = if allow { "allow_once" } else { "reject_once" };
                self.client.permission_answers.push_back(answer);
                let asked = self.client.permission_requests.len();
                let file = format!("f{n}");
                let (text, is_error) = self.bash(op, &session, &format!("touch {file}")).await;
                let made = ws.join(&file).exists();
                let ok = if allow {
                    !is_error && text == "(no output)" && made
                } else {
                    is_error && text.contains("rejected") && !made
                };
                if !ok || self.client.permission_requests.len() != asked + 1 {
                    self.fail(op, &format!("{answer}: {text:?}, file made: {made}"));
                }
            }
        }
        *self.done.entry(op).or_default() += 1;
    }
}

/// Waits until no task runs and no session is prompting: the daemon is idle.
async fn settle(observer: &mut Client) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = observer
            .request("_dsh/status", json!({}))
            .await
            .expect("status");
        let busy = status["sessions"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["state"] != "idle"));
        if !busy && status["runningTasks"].as_array().is_some_and(Vec::is_empty) {
            return;
        }
        assert!(Instant::now() < deadline, "the daemon never went idle");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A tool call as a client saw it: call id, final status, result text.
type SeenCall = (String, String, String);

/// The tool calls a client saw for a session, in order.
fn calls_seen(client: &Client, session: &str) -> Vec<SeenCall> {
    let mut order = Vec::new();
    let mut last: HashMap<String, (String, String)> = HashMap::new();
    for u in client.updates.iter().filter(|u| u["sessionId"] == session) {
        let update = &u["update"];
        let id = update["toolCallId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match update["sessionUpdate"].as_str() {
            Some("tool_call") => order.push(id),
            Some("tool_call_update")
                if matches!(update["status"].as_str(), Some("completed" | "failed")) =>
            {
                let status = update["status"].as_str().unwrap_or_default().to_string();
                last.insert(id, (status, text_of(update)));
            }
            _ => {}
        }
    }
    order
        .into_iter()
        .map(|id| {
            let (status, text) = last.remove(&id).unwrap_or_default();
            (id, status, text)
        })
        .collect()
}

async fn rss_after_settle(daemon: &SocketDaemon, observer: &mut Client) -> u64 {
    settle(observer).await;
    daemon.rss_kib()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_mixed_load_on_many_connections_and_sessions() {
    let secs = env_u64("DSH_SOAK_SECS", 10);
    let seed = env_u64("DSH_SOAK_SEED", 0x5eed);
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start(dir.path(), CONFIG).await;
    let mut observer = daemon.connect().await;
    let rss_fresh = daemon.rss_kib();

    let mut workers = Vec::new();
    for index in 0..CONNECTIONS {
        let mut client = daemon.connect().await;
        let mut sessions = Vec::new();
        for k in 0..SESSIONS_PER_CONNECTION {
            let ws = workspace(dir.path(), &format!("ws-{index}-{k}"));
            sessions.push((client.new_session(&ws).await, ws));
        }
        workers.push(Worker {
            index,
            client,
            sessions,
            rng: Rng(seed ^ (index as u64).wrapping_mul(0x2545_f491_4f6c_dd1d)),
            counter: 0,
            done: HashMap::new(),
        });
    }

    // Warm-up: every connection runs every operation once (so every session runs
    // something), all at the same time.
    let warm: Vec<_> = workers
        .into_iter()
        .map(|mut w| {
            tokio::spawn(async move {
                for (i, op) in OPS.into_iter().enumerate() {
                    w.run(op, Some(i % SESSIONS_PER_CONNECTION)).await;
                }
                w
            })
        })
        .collect();
    let mut workers = Vec::new();
    for w in warm {
        workers.push(w.await.expect("a warm-up worker failed"));
    }
    let rss_warm = rss_after_settle(&daemon, &mut observer).await;
    let warmed = started.elapsed();

    // The soak: random operations until the deadline.
    let deadline = Instant::now() + Duration::from_secs(secs);
    let running: Vec<_> = workers
        .into_iter()
        .map(|mut w| {
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    let op = OPS[w.rng.below(OPS.len() as u64) as usize];
                    w.run(op, None).await;
                }
                w
            })
        })
        .collect();
    let mut workers = Vec::new();
    for w in running {
        workers.push(w.await.expect("a soak worker failed"));
    }
    let rss_end = rss_after_settle(&daemon, &mut observer).await;
    let mut totals: HashMap<Op, u64> = HashMap::new();
    for w in &workers {
        for (op, n) in &w.done {
            *totals.entry(*op).or_default() += n;
        }
    }
    eprintln!(
        "soak: {secs}s, seed {seed:#x}, operations {totals:?}; daemon RSS KiB: fresh {rss_fresh}, after warm-up {rss_warm}, after soak {rss_end}; set-up and warm-up took {warmed:?}"
    );
    let replay_started = Instant::now();

    // Nothing the sessions ran is still running.
    let leaked = processes_under(dir.path());
    assert!(leaked.is_empty(), "processes left running: {leaked:?}");
    assert!(
        rss_end * 10 <= rss_warm * 11,
        "daemon RSS grew from {rss_warm} KiB to {rss_end} KiB"
    );

    // Every session's log replays exactly the calls its client saw.
    let mut seen: Vec<(String, Vec<SeenCall>)> = Vec::new();
    for w in &workers {
        for (s, _) in &w.sessions {
            seen.push((s.clone(), calls_seen(&w.client, s)));
        }
    }
    drop(workers);
    let mut reader = daemon.connect().await;
    for (session, calls) in &seen {
        let ws = dir.path();
        reader
            .request(
                "session/load",
                json!({"sessionId": session, "cwd": ws, "mcpServers": []}),
            )
            .await
            .unwrap_or_else(|e| panic!("session/load {session}: {e}"));
        let replayed = calls_seen(&reader, session);
        assert!(!calls.is_empty());
        assert_eq!(&replayed, calls, "session {session} replayed differently");
    }
    eprintln!(
        "soak: {} sessions replayed in {:?}",
        seen.len(),
        replay_started.elapsed()
    );
    drop((reader, observer));
    daemon.stop().await;
    assert!(processes_under(dir.path()).is_empty());
}
