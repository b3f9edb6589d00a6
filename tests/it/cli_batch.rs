//! `dsh exec --prompts FILE --jobs N` (issue 45's batches) against a real daemon: each
//! prompt its own session under one run id, the run id in every audit line of the
//! batch, the table's counts equal to the audit log's, `--json` lines tagged with the
//! prompt's index, the exit status the worst of the batch, and `dsh policy replay
//! --run ID` judging only that run's calls (P-replay: what a replay judges is the
//! audit line).

use crate::common;
use common::cli::{Rig, audit_lines, exec as command, run as exec, text};
use common::daemon::SocketDaemon;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;

fn replay(daemon: &SocketDaemon, extra: &[&str]) -> Output {
    std::process::Command::new(common::daemon::BIN)
        .args(["policy", "replay", "--json", "--audit"])
        .arg(&daemon.state)
        .arg("--config")
        .arg(&daemon.config)
        .args(extra)
        .output()
        .expect("run dsh policy replay")
}

/// 20 prompts, 4 at a time: 20 sessions, each audit line of them carrying the run id
/// the table names, the table's per-prompt counts those of the audit log, and a replay
/// with `--run` judging those 20 calls and not the one made outside the batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_of_20_with_jobs_4_tags_every_audit_line_and_replay_reads_only_that_run() {
    let Rig {
        dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(vec![], &rule("echo", "allow")).await;
    // A call outside any batch, in the same audit log.
    let out = exec(&daemon, &ws, &["--mode", "ask", "!echo outside"]).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    // Even prompts echo (allowed by a rule), odd ones write (asked in ask mode, and
    // refused: nobody is at the terminal).
    let prompts: String = (0..20)
        .map(|i| {
            if i % 2 == 0 {
                format!("!echo prompt-{i}\n")
            } else {
                format!("!touch made-{i}\n")
            }
        })
        .collect();
    let file = dir.path().join("prompts.txt");
    std::fs::write(&file, prompts).unwrap();
    let file = file.to_string_lossy().into_owned();
    let out = exec(
        &daemon,
        &ws,
        &["--mode", "ask", "--prompts", &file, "--jobs", "4"],
    )
    .await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for i in (1..20).step_by(2) {
        assert!(!ws.join(format!("made-{i}")).exists(), "a refused call ran");
    }
    let run = stdout
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("run "))
        .and_then(|l| l.split(':').next())
        .unwrap_or_else(|| panic!("no run id in\n{stdout}"))
        .to_string();

    let lines = audit_lines(&daemon.state);
    let of_run: Vec<&Value> = lines.iter().filter(|l| l["run"] == run.as_str()).collect();
    assert_eq!(of_run.len(), 20, "{stdout}");
    assert_eq!(lines.len(), 21);
    let sessions: BTreeSet<&str> = of_run
        .iter()
        .map(|l| l["session"].as_str().unwrap())
        .collect();
    assert_eq!(sessions.len(), 20, "one session per prompt");
    // Per prompt: the table's row against the audit line of the prompt's command.
    let rows: BTreeMap<usize, Vec<&str>> = stdout
        .lines()
        .skip(1)
        .filter_map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            Some((cells.first()?.parse().ok()?, cells))
        })
        .collect();
    assert_eq!(rows.len(), 20, "{stdout}");
    for (i, cells) in &rows {
        let command = if i % 2 == 0 {
            format!("echo prompt-{i}")
        } else {
            format!("touch made-{i}")
        };
        let audited: Vec<&&Value> = of_run
            .iter()
            .filter(|l| l["arguments"]["command"] == command.as_str())
            .collect();
        assert_eq!(audited.len(), 1, "{command}");
        let line = audited[0];
        let allowed = usize::from(line["decision"] == "allow");
        let refused = usize::from(line["decision"] == "deny");
        let asked = usize::from(!line["answer"].is_null());
        // `#  stop  calls  allowed  asked  refused  time  tokens`
        assert_eq!(cells[1], "end_turn", "{cells:?}");
        assert_eq!(
            cells[2..6],
            [
                "1".to_string(),
                allowed.to_string(),
                asked.to_string(),
                refused.to_string()
            ],
            "{cells:?} against {line}"
        );
        assert_eq!(refused, i % 2, "{line}");
    }

    // Replay under the same config: exactly the run's 20 calls, not the 21st.
    let all = replay(&daemon, &[]);
    assert!(all.status.success(), "{}", text_of(&all));
    let all: Value = serde_json::from_slice(&all.stdout).unwrap();
    assert_eq!(all["replayed"], 21);
    let only = replay(&daemon, &["--run", &run]);
    assert!(only.status.success(), "{}", text_of(&only));
    let only: Value = serde_json::from_slice(&only.stdout).unwrap();
    assert_eq!(only["replayed"], 20, "{only}");
    // A run nobody made is said, not reported as "nothing changes".
    let none = replay(&daemon, &["--run", "run-000000000000"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(text_of(&none).contains("no audit line carries run"));
    daemon.stop().await;
}

fn text_of(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `--json`: a `run` line first, then every line tagged with its prompt's index, a
/// `stop` per prompt; the exit status is the worst ending (here the model's length
/// limit, 5, among two ends of turn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_json_lines_are_tagged_and_the_exit_status_is_the_worst() {
    // Only the middle prompt goes to the model.
    let Rig {
        dir,
        model,
        daemon,
        ws,
    } = Rig::start(vec![crate::cli_exec::length_limit()], "").await;
    let file = dir.path().join("prompts.jsonl");
    std::fs::write(
        &file,
        "{\"prompt\": \"!echo first\"}\n{\"prompt\": \"go on\\nplease\"}\n{\"prompt\": \"!echo third\"}\n",
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();
    let out = exec(
        &daemon,
        &ws,
        &[
            "--json",
            "--mode",
            "auto",
            "--prompts",
            &file,
            "--jobs",
            "2",
        ],
    )
    .await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(5), "{stdout}\n{stderr}");
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["type"], "run", "{stdout}");
    let run = events[0]["runId"].as_str().unwrap();
    assert!(events[1..].iter().all(|e| e["prompt"].is_u64()), "{stdout}");
    let stops: BTreeMap<u64, &Value> = events
        .iter()
        .filter(|e| e["type"] == "stop")
        .map(|e| (e["prompt"].as_u64().unwrap(), &e["stopReason"]))
        .collect();
    assert_eq!(stops.len(), 3, "{stdout}");
    assert_eq!(stops[&0], "end_turn");
    assert_eq!(stops[&1], "max_tokens");
    assert_eq!(stops[&2], "end_turn");
    // The model saw the JSON line's prompt with its newline.
    assert!(model.request_at(0).to_string().contains("go on\\nplease"));
    // Each `!` prompt's call, with its decision, under its own index.
    let calls: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool_call").collect();
    assert_eq!(calls.len(), 2, "{stdout}");
    let sessions: BTreeMap<u64, &str> = events
        .iter()
        .filter(|e| e["type"] == "session")
        .map(|e| {
            (
                e["prompt"].as_u64().unwrap(),
                e["sessionId"].as_str().unwrap(),
            )
        })
        .collect();
    let audit = audit_lines(&daemon.state);
    for call in calls {
        let index = call["prompt"].as_u64().unwrap();
        assert_ne!(index, 1);
        let line = audit
            .iter()
            .find(|l| l["callId"] == call["toolCallId"])
            .unwrap();
        assert_eq!(line["session"], sessions[&index]);
        assert_eq!(line["run"], run);
    }
    daemon.stop().await;
}

/// A prompts file with a line that is not JSON among JSON lines is refused before any
/// session starts (it is never sent as a prompt as it stands): status 1, the line named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_refuses_a_prompts_file_that_does_not_read() {
    let Rig {
        dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(vec![], "").await;
    let file = dir.path().join("prompts.jsonl");
    std::fs::write(&file, "{\"prompt\": \"!touch one\"}\n!touch two\n").unwrap();
    let file = file.to_string_lossy().into_owned();
    let out = exec(&daemon, &ws, &["--mode", "auto", "--prompts", &file]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("prompts.jsonl:2:"), "{stderr}");
    assert!(!ws.join("one").exists() && !ws.join("two").exists());
    assert!(audit_lines(&daemon.state).is_empty());
    daemon.stop().await;
}

/// Ctrl-C during a batch cancels the running turns (their commands gone from the
/// process table) and starts no more: exit status 4, and only the turns that ran have
/// audit lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_ctrl_c_cancels_the_running_turns_and_starts_no_more() {
    use tokio::io::AsyncBufReadExt;
    let Rig {
        dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(vec![], "").await;
    let file = dir.path().join("prompts.txt");
    std::fs::write(&file, "!sleep 600\n".repeat(4)).unwrap();
    let mut child = command(
        &daemon,
        &ws,
        &[
            "--json",
            "--mode",
            "auto",
            "--prompts",
            &file.to_string_lossy(),
            "--jobs",
            "2",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    // Both running turns have their command in progress.
    let mut running = BTreeSet::new();
    while running.len() < 2 {
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), out.next_line())
            .await
            .expect("the commands did not start in time")
            .unwrap()
            .expect("dsh exec ended before the commands ran");
        let event: Value = serde_json::from_str(&line).unwrap();
        if event["update"]["status"] == "in_progress" {
            running.insert(event["prompt"].as_u64().unwrap());
        }
    }
    assert_eq!(running, BTreeSet::from([0, 1]));
    assert!(common::daemon::processes_under(&ws).len() >= 2);
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let mut rest = Vec::new();
    while let Some(line) = tokio::time::timeout(std::time::Duration::from_secs(30), out.next_line())
        .await
        .expect("dsh exec did not end in time")
        .unwrap()
    {
        rest.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    let status = child.wait().await.unwrap();
    assert_eq!(status.code(), Some(4), "{rest:?}");
    let stops: Vec<&Value> = rest.iter().filter(|e| e["type"] == "stop").collect();
    assert_eq!(stops.len(), 2, "{rest:?}");
    assert!(
        stops.iter().all(|s| s["stopReason"] == "cancelled"),
        "{rest:?}"
    );
    // Prompts 2 and 3 never started: no session, no call.
    assert!(rest.iter().all(|e| e["type"] != "session"), "{rest:?}");
    assert_eq!(audit_lines(&daemon.state).len(), 2);
    assert!(
        common::daemon::processes_under(&ws).is_empty(),
        "{:?}",
        common::daemon::processes_under(&ws)
    );
    daemon.stop().await;
}

/// `--workdirs DIR`: each prompt's session works in its own copy of the working
/// directory (`DIR/INDEX`, the seed file in it), so no prompt writes into another's
/// directory nor into the original; a DIR inside the working directory is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_workdirs_give_each_prompt_its_own_copy() {
    let Rig {
        dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(vec![], "").await;
    std::fs::write(ws.join("seed"), "from the original").unwrap();
    let file = dir.path().join("prompts.txt");
    let prompts: String = (0..6)
        .map(|i| format!("!cat seed > copied-{i} && pwd > where\n"))
        .collect();
    std::fs::write(&file, prompts).unwrap();
    let file = file.to_string_lossy().into_owned();
    let copies = dir.path().join("copies");
    let out = exec(
        &daemon,
        &ws,
        &[
            "--json",
            "--mode",
            "auto",
            "--prompts",
            &file,
            "--jobs",
            "3",
            "--workdirs",
            &copies.to_string_lossy(),
        ],
    )
    .await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let mut original: Vec<_> = std::fs::read_dir(&ws)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    original.sort();
    assert_eq!(original, ["seed"], "a prompt wrote into the original");
    for i in 0..6 {
        let own = copies.join(i.to_string());
        let mut names: Vec<String> = std::fs::read_dir(&own)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [format!("copied-{i}"), "seed".into(), "where".into()]
        );
        assert_eq!(
            std::fs::read_to_string(own.join(format!("copied-{i}"))).unwrap(),
            "from the original"
        );
        assert_eq!(
            std::fs::read_to_string(own.join("where")).unwrap().trim(),
            own.to_string_lossy()
        );
    }
    // Inside the working directory: refused before any session starts.
    let inside = ws.join("runs");
    let out = exec(
        &daemon,
        &ws,
        &["--prompts", &file, "--workdirs", &inside.to_string_lossy()],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("inside the working directory"));
    assert!(!inside.exists());
    daemon.stop().await;
}

/// The run id comes from any client (`session/new`'s `_meta.dsh.runId`): one that is
/// not a short plain id (a newline, an escape sequence that a table printing it would
/// send to the terminal, a number, nothing) is refused with invalid params; a plain
/// one is written on the session's audit lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_id_from_a_client_is_checked_before_it_reaches_the_audit_log() {
    let Rig {
        dir: _dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(vec![], "").await;
    let mut client = daemon.connect().await;
    client.initialize().await;
    for bad in [
        json!("run\n{\"event\":\"execution\"}"),
        json!("r\u{1b}[2J"),
        json!(7),
        json!(""),
    ] {
        let refused = client
            .request(
                "session/new",
                json!({"cwd": ws, "mcpServers": [], "_meta": {"dsh": {"runId": bad}}}),
            )
            .await
            .expect_err("a bad run id was taken");
        assert_eq!(refused["code"], -32602, "{refused}");
    }
    let made = client
        .request(
            "session/new",
            json!({"cwd": ws, "mcpServers": [], "_meta": {"dsh": {"runId": "run-by-hand"}}}),
        )
        .await
        .unwrap();
    let session = made["sessionId"].as_str().unwrap().to_string();
    client.set_mode(&session, "auto").await;
    client.prompt(&session, "!echo tagged").await.unwrap();
    let lines = audit_lines(&daemon.state);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["run"], "run-by-hand");
    daemon.stop().await;
}

/// A rule for `bash` of `command` with `action`, as config text.
fn rule(command: &str, action: &str) -> String {
    format!(
        "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"{command}\"\naction = \"{action}\"\n"
    )
}

/// The run id of a `--json` batch's first line.
fn run_of(out: &Output) -> String {
    let first = common::cli::lines(out).into_iter().next().unwrap();
    assert_eq!(first["type"], "run", "{first}");
    first["runId"].as_str().unwrap().to_string()
}

/// Processes whose command line names `needle` (the candidate's daemon's socket path
/// holds the run id).
fn processes_naming(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| common::alive(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

/// Issue 45, item 1: `--config CANDIDATE` against a running daemon is not ignored. The
/// daemon allows `touch` by a rule; the batch under its own config makes the files
/// (the control: that daemon's config decides), the same batch with a candidate that
/// denies `touch` makes none: the candidate's rule decided, on a daemon of its own
/// (gone at the end, its socket directory removed), with the audit lines in the same
/// state directory under the run's id, where `policy replay --run` finds them. One
/// `dsh exec` with the candidate is refused the same way; `dsh chat` with it refuses to
/// start. The running daemon serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_config_candidate_decides_against_a_running_daemon_that_allows() {
    let Rig {
        dir,
        model,
        daemon,
        ws,
    } = Rig::start(vec![], &rule("touch", "allow")).await;
    let candidate = dir.path().join("candidate.toml");
    std::fs::write(
        &candidate,
        format!(
            "[exec]\nkill_grace_ms = 300\ndrain_ms = 300\n{}{}",
            model.config(),
            rule("touch", "deny")
        ),
    )
    .unwrap();
    let file = dir.path().join("prompts.txt");
    std::fs::write(&file, "!touch made-0\n!touch made-1\n").unwrap();
    let file = file.to_string_lossy().into_owned();
    let args = [
        "--json",
        "--mode",
        "auto",
        "--prompts",
        &file,
        "--jobs",
        "2",
    ];

    // The control: under the running daemon's config the calls run.
    let out = exec(&daemon, &ws, &args).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert!(ws.join("made-0").exists() && ws.join("made-1").exists());
    assert!(!text(&out).1.contains("of its own"), "{:?}", text(&out));
    std::fs::remove_file(ws.join("made-0")).unwrap();
    std::fs::remove_file(ws.join("made-1")).unwrap();

    // The candidate decides.
    let out = common::cli::exec_with(&daemon, &candidate, &ws, &args)
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(stderr.contains("a daemon of its own"), "{stderr}");
    assert!(
        !ws.join("made-0").exists(),
        "the candidate's deny was ignored"
    );
    assert!(
        !ws.join("made-1").exists(),
        "the candidate's deny was ignored"
    );
    let run = run_of(&out);
    let lines: Vec<Value> = audit_lines(&daemon.state)
        .into_iter()
        .filter(|l| l["run"] == run.as_str())
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}\n{stderr}");
    for line in &lines {
        assert_eq!(line["decision"], "deny", "{line}");
    }
    // Its daemon is gone, and its directory beside the user's socket.
    assert!(
        processes_naming(&run).is_empty(),
        "the candidate's daemon lives on"
    );
    assert!(!daemon.socket.parent().unwrap().join(&run).exists());
    // The replay of that run reads those two lines from the shared audit log.
    let replayed = replay(&daemon, &["--run", &run]);
    assert_eq!(replayed.status.code(), Some(0), "{}", text_of(&replayed));
    // One `dsh exec` with the candidate: the same, its line under its own run.
    let out = common::cli::exec_with(
        &daemon,
        &candidate,
        &ws,
        &["--json", "--mode", "auto", "!touch single"],
    )
    .output()
    .await
    .unwrap();
    assert!(!ws.join("single").exists(), "{:?}", text(&out));
    let single = common::cli::lines(&out)[0]["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let line = audit_lines(&daemon.state)
        .into_iter()
        .find(|l| l["run"] == single.as_str())
        .unwrap();
    assert_eq!(line["decision"], "deny", "{line}");
    assert!(processes_naming(&single).is_empty());
    // `dsh chat` with the candidate refuses rather than chat under the other config.
    let out = common::dsh()
        .args(["chat", "--socket"])
        .arg(&daemon.socket)
        .arg("--config")
        .arg(&candidate)
        .arg("--cwd")
        .arg(&ws)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{:?}", text(&out));
    assert!(
        text(&out).1.contains("does not judge by"),
        "{:?}",
        text(&out)
    );
    // The running daemon serves on, under its own config.
    let out = exec(&daemon, &ws, &["--mode", "auto", "!touch after"]).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert!(ws.join("after").exists());
    daemon.stop().await;
}

/// Issue 45, item 5: a Ctrl-C while a turn is still connecting is not missed. The
/// batch reaches the daemon through a relay that holds the first turn's `session/new`
/// (the turn is connecting for as long as the test wants); after Ctrl-C the turn
/// gives up its connection without a prompt (the relay sees it close while the
/// request is still held: before the fix the turn waited on), no command of the batch
/// ever runs (the process table and the audit log), and the batch ends cancelled (4)
/// without starting its second prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_ctrl_c_while_a_turn_connects_sends_no_prompt() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let Rig {
        dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(vec![], "").await;
    let relay_dir = dir.path().join("relay");
    std::fs::create_dir(&relay_dir).unwrap();
    let relay_socket = relay_dir.join("dsh.sock");
    let listener = tokio::net::UnixListener::bind(&relay_socket).unwrap();
    // "held" when a `session/new` is held, "closed" when its client then hung up.
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel::<&'static str>();
    let upstream_path = daemon.socket.clone();
    let relay = tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            let upstream = tokio::net::UnixStream::connect(&upstream_path)
                .await
                .unwrap();
            let (client_r, mut client_w) = client.into_split();
            let (upstream_r, mut upstream_w) = upstream.into_split();
            tokio::spawn(async move {
                let mut upstream_r = upstream_r;
                let _ = tokio::io::copy(&mut upstream_r, &mut client_w).await;
            });
            let events_tx = events_tx.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(client_r).lines();
                let mut held = false;
                while let Ok(Some(line)) = lines.next_line().await {
                    if line.contains("\"session/new\"") {
                        held = true;
                        let _ = events_tx.send("held");
                    }
                    if !held {
                        upstream_w
                            .write_all(format!("{line}\n").as_bytes())
                            .await
                            .unwrap();
                    }
                }
                if held {
                    let _ = events_tx.send("closed");
                }
            });
        }
    });
    let file = dir.path().join("prompts.txt");
    std::fs::write(&file, "!sleep 600\n!sleep 600\n").unwrap();
    let mut child = common::cli::exec_at(
        &relay_socket,
        &daemon.state,
        &daemon.config,
        &ws,
        &[
            "--json",
            "--mode",
            "auto",
            "--jobs",
            "1",
            "--prompts",
            &file.to_string_lossy(),
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    assert_eq!(
        next_event(&mut events).await,
        Some("held"),
        "no session/new reached the relay"
    );
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    assert_eq!(
        next_event(&mut events).await,
        Some("closed"),
        "the connecting turn missed the Ctrl-C"
    );
    let out = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        let mut stdout = String::new();
        let mut stderr = String::new();
        use tokio::io::AsyncReadExt;
        let (mut o, mut e) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let _ = tokio::join!(o.read_to_string(&mut stdout), e.read_to_string(&mut stderr));
        (child.wait().await.unwrap(), stdout, stderr)
    })
    .await
    .expect("dsh exec did not end after Ctrl-C");
    assert_eq!(out.0.code(), Some(4), "{}\n{}", out.1, out.2);
    // The second prompt never connected: one session/new ever held.
    assert!(events.try_recv().is_err());
    assert!(common::daemon::processes_under(&ws).is_empty());
    assert!(
        audit_lines(&daemon.state).is_empty(),
        "{:?}",
        audit_lines(&daemon.state)
    );
    relay.abort();
    daemon.stop().await;
}

/// The relay's next event, or `None` after 30 s.
async fn next_event(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<&'static str>,
) -> Option<&'static str> {
    tokio::time::timeout(std::time::Duration::from_secs(30), events.recv())
        .await
        .ok()
        .flatten()
}

/// Issue 45, item 3: a session's run id survives `dsh upgrade`. The session is made
/// with a run id; its call before the hand-over carries it (the control), and so does
/// its call after, on the same connection served by the next program (before the
/// run was carried, that line had none: the log does not hold it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_run_id_survives_an_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = SocketDaemon::start_copy(dir.path(), "").await;
    let ws = common::daemon::workspace(dir.path(), "w");
    let mut client = daemon.connect().await;
    let made = client
        .request(
            "session/new",
            json!({"cwd": ws, "mcpServers": [], "_meta": {"dsh": {"runId": "run-kept"}}}),
        )
        .await
        .unwrap();
    let session = made["sessionId"].as_str().unwrap().to_string();
    client.set_mode(&session, "auto").await;
    client.prompt(&session, "!echo before").await.unwrap();
    let upgraded = std::process::Command::new(common::daemon::BIN)
        .args(["upgrade", "--socket"])
        .arg(&daemon.socket)
        .output()
        .unwrap();
    assert!(upgraded.status.success(), "{}", text_of(&upgraded));
    client.prompt(&session, "!echo after").await.unwrap();
    let lines = audit_lines(&daemon.state);
    let runs: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["arguments"]["command"].as_str().unwrap_or_default(),
                l["run"].as_str().unwrap_or("(none)"),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [("echo before", "run-kept"), ("echo after", "run-kept")]
    );
    assert!(common::alive(daemon.pid), "the same process serves on");
    daemon.stop().await;
}

/// `git -C dir ARGS`, which must succeed: its stdout.
fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text_of(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Issue 45, item 6: `--worktrees DIR`: each prompt's session works in its own git
/// worktree of the working directory's repository (`DIR/INDEX`, detached at HEAD: the
/// committed seed in it, the uncommitted file not), so no prompt writes into another's
/// nor into the original; with `--keep-worktrees` they stay (git lists them), without
/// it they are removed after the batch, DIR too. Outside a repository it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_worktrees_give_each_prompt_its_own_worktree_removed_after() {
    let Rig {
        dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(vec![], "").await;
    // Refused where there is no repository, before any session.
    let file = dir.path().join("prompts.txt");
    let prompts: String = (0..4)
        .map(|i| format!("!cat seed > made-{i} && pwd > where\n"))
        .collect();
    std::fs::write(&file, prompts).unwrap();
    let file = file.to_string_lossy().into_owned();
    let trees = dir.path().join("trees");
    let trees_arg = trees.to_string_lossy().into_owned();
    let out = exec(
        &daemon,
        &ws,
        &["--prompts", &file, "--worktrees", &trees_arg],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).1.contains("needs a git repository"),
        "{:?}",
        text(&out)
    );
    assert!(!trees.exists());

    git(&ws, &["init", "-q"]);
    std::fs::write(ws.join("seed"), "committed").unwrap();
    git(&ws, &["add", "seed"]);
    git(&ws, &["commit", "-qm", "seed"]);
    std::fs::write(ws.join("uncommitted"), "not in HEAD").unwrap();
    let args = [
        "--json",
        "--mode",
        "auto",
        "--prompts",
        &file,
        "--jobs",
        "2",
        "--worktrees",
        &trees_arg,
    ];
    let mut kept = args.to_vec();
    kept.push("--keep-worktrees");
    let out = exec(&daemon, &ws, &kept).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!ws.join("made-0").exists() && !ws.join("where").exists());
    for i in 0..4 {
        let own = trees.join(i.to_string());
        assert_eq!(
            std::fs::read_to_string(own.join(format!("made-{i}"))).unwrap(),
            "committed"
        );
        assert_eq!(
            std::fs::read_to_string(own.join("where")).unwrap().trim(),
            own.to_string_lossy()
        );
        assert!(!own.join("uncommitted").exists());
        for j in (0..4).filter(|j| *j != i) {
            assert!(
                !own.join(format!("made-{j}")).exists(),
                "{j} wrote into {i}"
            );
        }
    }
    let listed = git(&ws, &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 5, "{listed}");

    // Without --keep-worktrees: made, used, removed.
    std::fs::remove_dir_all(&trees).unwrap();
    git(&ws, &["worktree", "prune"]);
    let out = exec(&daemon, &ws, &args).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let made: Vec<Value> = audit_lines(&daemon.state)
        .into_iter()
        .filter(|l| l["run"] == run_of(&out).as_str())
        .collect();
    assert_eq!(made.len(), 4, "{stdout}");
    assert!(made.iter().all(|l| l["outcome"] == "ok"), "{made:?}");
    assert!(!trees.exists(), "the worktrees' directory is left");
    let listed = git(&ws, &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
    daemon.stop().await;
}

/// The session logs daemon `pid` holds open (each loaded session holds its own).
fn open_session_logs(pid: i32, state: &std::path::Path) -> usize {
    let sessions = state.join("sessions");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the daemon's descriptors (the tests run as root)")
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|target| target.starts_with(&sessions))
        .count()
}

/// Issue 45's follow-up: the sessions a batch closes are unloaded from the daemon (they
/// were all kept: 400 after 4 batches of 100), so one daemon serving batch after batch
/// stays the size it was; each session's history stays on disk for `session/load`.
/// Against the code before this, the first check waits in vain: the batch's 5 closed
/// sessions (and their 5 open logs) stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_leave_no_session_loaded_in_the_daemon() {
    let Rig {
        dir,
        model: _model,
        daemon,
        ws,
    } = Rig::start(vec![], &rule("echo", "allow")).await;
    let file = dir.path().join("prompts.txt");
    std::fs::write(
        &file,
        (0..5).map(|i| format!("!echo p-{i}\n")).collect::<String>(),
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();
    let mut c = daemon.connect().await;
    for batch in 0..3 {
        let out = exec(&daemon, &ws, &["--prompts", &file, "--jobs", "2"]).await;
        assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
        // The batch's connection may end before the daemon has seen its closes.
        let status = c
            .status_until(&format!("batch {batch}'s sessions stayed loaded"), |s| {
                s["sessions"].as_array().is_some_and(Vec::is_empty)
            })
            .await;
        assert!(
            status["runningTasks"].as_array().unwrap().is_empty(),
            "{status}"
        );
        assert_eq!(open_session_logs(daemon.pid, &daemon.state), 0);
    }
    // Their histories are on disk: 15 logs, and one loads again with what it did.
    let logs: Vec<std::path::PathBuf> = std::fs::read_dir(daemon.state.join("sessions"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(logs.len(), 15, "{logs:?}");
    let id = logs[0].file_stem().unwrap().to_string_lossy().into_owned();
    c.load_session(&id, &ws).await;
    let replayed = serde_json::to_string(&c.updates).unwrap();
    assert!(replayed.contains("echo p-"), "{replayed}");
    let status = c.request("_dsh/status", json!({})).await.unwrap();
    assert_eq!(status["sessions"][0]["sessionId"], json!(id), "{status}");
    assert_eq!(open_session_logs(daemon.pid, &daemon.state), 1);
    drop(c);
    daemon.stop().await;
}
