//! The tools, the session registry and the waterfall together, over the real
//! local executor: T1-T14 as the model sees them, plus policy, external hooks,
//! the permission gate and the audit log. Rule ids are in the test names.

use crate::common;

use dsh::config::{Config, Decision, ExternalHookConfig, Mode, PermissionRule};
use dsh::exec::{BashExecutor, LocalExecutor};
use dsh::hooks::audit::AuditLog;
use dsh::hooks::waterfall::{ToolExecution, ToolOutput};
use dsh::policy::Grant;
use dsh::registry::{
    Notice, NoticeListener, PermissionAnswer, PermissionPrompter, PermissionRequest, Session,
    SessionRegistry,
};
use dsh::tools::ToolRegistry;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

struct Harness {
    dir: tempfile::TempDir,
    sessions: Arc<SessionRegistry>,
    tools: ToolRegistry,
    audit_path: std::path::PathBuf,
    notices: mpsc::UnboundedReceiver<(String, String)>,
    calls: AtomicU64,
}

struct ChannelListener(mpsc::UnboundedSender<(String, String)>);

impl NoticeListener for ChannelListener {
    fn notice(&self, session: &Session, notice: &Notice) {
        let _ = self.0.send((session.id.clone(), notice.text.clone()));
    }
}

fn harness(configure: impl FnOnce(&mut Config)) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config {
        exec: common::test_config(&dir.path().join("state")),
        ..Config::default()
    };
    config.exec.max_output_bytes = 1000;
    configure(&mut config);
    let exec: Arc<dyn BashExecutor> = Arc::new(LocalExecutor::new(&config.exec).unwrap());
    let sessions = Arc::new(SessionRegistry::new(config.permissions.default_mode));
    let (tx, notices) = mpsc::unbounded_channel();
    sessions.add_notice_listener(Arc::new(ChannelListener(tx)));
    dsh::tools::notices::spawn_router(&exec, sessions.clone()).unwrap();
    let audit_path = dir.path().join("state/audit.jsonl");
    let audit = Arc::new(AuditLog::open(&audit_path).unwrap());
    let tools = ToolRegistry::standard(&config, Some(exec), sessions.clone(), audit);
    Harness {
        dir,
        sessions,
        tools,
        audit_path,
        notices,
        calls: AtomicU64::new(0),
    }
}

impl Harness {
    fn session(&self, mode: Mode) -> Arc<Session> {
        let cwd = self
            .dir
            .path()
            .join(format!("ws{}", self.sessions.sessions().len()));
        std::fs::create_dir_all(&cwd).unwrap();
        let s = self.sessions.create(cwd);
        s.set_mode(mode);
        s
    }

    async fn call(&self, session: Option<&Arc<Session>>, tool: &str, args: Value) -> ToolOutput {
        self.call_with(session, tool, args, CancellationToken::new())
            .await
    }

    /// The call's text, error and veto flags: what the model sees (how a command
    /// exited, for displays, is compared where a test is about it).
    async fn call_with(
        &self,
        session: Option<&Arc<Session>>,
        tool: &str,
        args: Value,
        cancel: CancellationToken,
    ) -> ToolOutput {
        ToolOutput {
            exit: None,
            ..self.call_full(session, tool, args, cancel).await
        }
    }

    async fn call_full(
        &self,
        session: Option<&Arc<Session>>,
        tool: &str,
        args: Value,
        cancel: CancellationToken,
    ) -> ToolOutput {
        let id = format!("call-{}", self.calls.fetch_add(1, Ordering::Relaxed));
        let call = ToolExecution::new(id, tool, args, session.cloned(), cancel);
        self.tools.execute(&call).await
    }

    async fn bash(&self, session: &Arc<Session>, command: &str) -> ToolOutput {
        self.call(
            Some(session),
            "bash",
            json!({"command": command, "description": "run a test command"}),
        )
        .await
    }

    /// Reads a task with `bash_output` until the bodies read add up to `want`
    /// (the reader thread may not have collected what the command already wrote);
    /// returns the last status line. Each read must be a well-formed T8 text.
    async fn read_until(&self, session: &Arc<Session>, id: &str, want: &str) -> String {
        let mut got = String::new();
        for _ in 0..5000 {
            let out = self
                .call(Some(session), "bash_output", json!({"task_id": id}))
                .await;
            assert!(!out.is_error, "{}", out.text);
            let (body, status) = out.text.rsplit_once('\n').expect("a status line");
            if body != "(no new output)" {
                got.push_str(body);
                got.push('\n');
            }
            if got == want {
                return status.to_string();
            }
            assert!(want.starts_with(&got), "read {got:?}, want {want:?}");
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        panic!("never read {want:?}, got {got:?}");
    }

    /// Starts `command` in the background for `session`; returns the task id.
    async fn start_task(&self, session: &Arc<Session>, command: &str) -> String {
        let arguments = json!({"command": command, "description": "d", "run_in_background": true});
        let started = self.call(Some(session), "bash", arguments).await;
        started
            .text
            .strip_prefix("started background task ")
            .unwrap_or_else(|| panic!("not a start: {}", started.text))
            .to_string()
    }

    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit_path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn ok(text: &str) -> ToolOutput {
    ToolOutput::ok(text)
}

fn err(text: &str) -> ToolOutput {
    ToolOutput {
        text: text.into(),
        is_error: true,
        ..ToolOutput::default()
    }
}

/// A prompter that answers from a script and records what it was asked.
struct Scripted {
    answers: Mutex<VecDeque<PermissionAnswer>>,
    asked: Mutex<Vec<PermissionRequest>>,
}

impl Scripted {
    fn new(answers: &[PermissionAnswer]) -> Arc<Self> {
        Arc::new(Self {
            answers: Mutex::new(answers.iter().copied().collect()),
            asked: Mutex::new(Vec::new()),
        })
    }
    fn asked(&self) -> Vec<String> {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.arguments["command"].as_str().unwrap_or("").to_string())
            .collect()
    }
}

#[async_trait::async_trait]
impl PermissionPrompter for Scripted {
    async fn ask(&self, request: PermissionRequest) -> PermissionAnswer {
        self.asked.lock().unwrap().push(request);
        self.answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(PermissionAnswer::Cancelled)
    }
}

/// A prompter that never answers (the user walked away).
struct Silent;

#[async_trait::async_trait]
impl PermissionPrompter for Silent {
    async fn ask(&self, _request: PermissionRequest) -> PermissionAnswer {
        std::future::pending().await
    }
}

fn rule(command: &str, action: Decision) -> PermissionRule {
    PermissionRule {
        tool: "bash".into(),
        command: Some(command.into()),
        action,
        ..PermissionRule::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_offered_in_order_and_the_bash_tools_not_at_all_without_an_executor() {
    let h = harness(|_| {});
    assert_eq!(
        h.tools.names(),
        [
            "bash",
            "bash_output",
            "bash_kill",
            "read_file",
            "edit_file",
            "write_file",
            "todo_write"
        ]
    );
    let defs = h.tools.definitions();
    assert_eq!(
        defs[0]["function"]["parameters"]["required"],
        json!(["command", "description"])
    );
    let none = ToolRegistry::standard(
        &Config::default(),
        None,
        h.sessions.clone(),
        Arc::new(AuditLog::disabled()),
    );
    // The file tools and the plan need no executor: they stay.
    assert_eq!(
        none.names(),
        ["read_file", "edit_file", "write_file", "todo_write"]
    );
    assert_eq!(none.definitions().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t1_invalid_arguments_are_rejected_before_anything_runs() {
    let h = harness(|_| {});
    let s = h.session(Mode::Auto);
    let marker = s.cwd.join("ran");
    let touch = format!("touch {}", marker.display());
    let cases = [
        (
            json!({"description": "d"}),
            "Error: invalid arguments: missing required property `command`",
        ),
        (
            json!({"command": touch}),
            "Error: invalid arguments: missing required property `description`",
        ),
        (
            json!({"command": touch, "description": 5}),
            "Error: invalid arguments: `description` must be a string",
        ),
        (
            json!({"command": "  ", "description": "d"}),
            "Error: invalid command",
        ),
        (
            json!({"command": touch, "description": " "}),
            "Error: invalid description",
        ),
        (
            json!({"command": touch, "description": "d", "timeoutMs": 0}),
            "Error: invalid timeoutMs",
        ),
        (
            json!({"command": touch, "description": "d", "timeoutMs": -5}),
            "Error: invalid timeoutMs",
        ),
        (
            json!({"command": touch, "description": "d", "timeoutMs": "9"}),
            "Error: invalid arguments: `timeoutMs` must be a number",
        ),
    ];
    for (args, text) in cases {
        assert_eq!(h.call(Some(&s), "bash", args).await, err(text));
    }
    assert!(!marker.exists(), "a rejected call ran");
    assert_eq!(
        h.call(Some(&s), "nope", json!({})).await,
        err("Error: unknown tool `nope`")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t2_workdir_defaults_to_the_session_cwd_and_relative_joins_it() {
    let h = harness(|_| {});
    let a = h.session(Mode::Auto);
    let b = h.session(Mode::Auto);
    std::fs::create_dir(a.cwd.join("sub")).unwrap();
    assert_eq!(
        h.bash(&a, "pwd").await,
        ok(&format!("{}\n", a.cwd.display()))
    );
    assert_eq!(
        h.bash(&b, "pwd").await,
        ok(&format!("{}\n", b.cwd.display()))
    );
    let out = h
        .call(
            Some(&a),
            "bash",
            json!({"command": "pwd", "description": "d", "workdir": "sub"}),
        )
        .await;
    assert_eq!(out, ok(&format!("{}\n", a.cwd.join("sub").display())));
    let out = h
        .call(
            Some(&a),
            "bash",
            json!({"command": "pwd", "description": "d", "workdir": "missing"}),
        )
        .await;
    assert!(out.is_error);
    assert!(
        out.text
            .contains(&a.cwd.join("missing").display().to_string()),
        "{}",
        out.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t3_t4_t5_result_texts_from_real_commands() {
    let h = harness(|_| {});
    let s = h.session(Mode::Auto);
    assert_eq!(h.bash(&s, "echo hello").await, ok("hello\n"));
    assert_eq!(h.bash(&s, "true").await, ok("(no output)"));
    assert_eq!(
        h.bash(&s, "echo out; echo err >&2").await,
        ok("out\n[stderr]\nerr\n")
    );
    assert_eq!(
        h.bash(&s, "echo failing; exit 3").await,
        ok("failing\n[exit code: 3]")
    );
    assert_eq!(
        h.bash(&s, "kill -KILL $$").await,
        ok("(no output)\n[killed by signal: SIGKILL]")
    );
    let out = h
        .call(
            Some(&s),
            "bash",
            json!({"command": "sleep 5", "description": "d", "timeoutMs": 100}),
        )
        .await;
    assert_eq!(
        out,
        ok("(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]")
    );
    let out = h
        .call(Some(&s), "bash", json!({"command": "trap 'exit 0' TERM; sleep 5 & wait", "description": "d", "timeoutMs": 100}))
        .await;
    assert_eq!(out, ok("(no output)\n[timed out after 100ms]"));
    // How each ended is kept beside the text, for displays (a terminal's exit).
    let exit = |command: &'static str| {
        let args = json!({"command": command, "description": "d", "timeoutMs": 100});
        let (h, s) = (&h, &s);
        async move {
            h.call_full(Some(s), "bash", args, CancellationToken::new())
                .await
                .exit
                .unwrap()
        }
    };
    assert_eq!(exit("exit 3").await.exit_code, Some(3));
    assert_eq!(exit("kill -KILL $$").await.signal, Some(9));
    assert!(exit("sleep 5").await.timed_out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t5_cancel_is_an_aborted_error() {
    let h = harness(|_| {});
    let s = h.session(Mode::Auto);
    let ready = common::Fifo::new(h.dir.path(), "ready");
    let cancel = CancellationToken::new();
    let cmd = format!("echo x > {}; sleep 1000", ready.path());
    let (out, _) = tokio::join!(
        h.call_with(
            Some(&s),
            "bash",
            json!({"command": cmd, "description": "d"}),
            cancel.clone()
        ),
        async {
            ready.wait().await;
            cancel.cancel();
        }
    );
    assert_eq!(out, err("Error: command aborted"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t6_long_output_is_cut_to_its_tail_with_the_spill_path() {
    let h = harness(|_| {});
    let s = h.session(Mode::Auto);
    let out = h.bash(&s, "seq 1 1000").await;
    assert!(!out.is_error);
    let (tail, note) = out
        .text
        .rsplit_once("\n[output truncated; full output: ")
        .unwrap();
    assert!(
        tail.ends_with("999\n1000\n") && tail.len() <= 1000,
        "{tail}"
    );
    let path = note.strip_suffix(']').unwrap();
    let all: String = (1..=1000).map(|i| format!("{i}\n")).collect();
    assert_eq!(std::fs::read_to_string(path).unwrap(), all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t7_t8_t10_t11_background_task_lifecycle() {
    let mut h = harness(|_| {});
    let s = h.session(Mode::Auto);
    let ready = common::Fifo::new(h.dir.path(), "ready");
    let go = common::Fifo::new(h.dir.path(), "go");
    let cmd = format!(
        "echo one; echo x > {}; cat {} >/dev/null; echo two >&2; exit 5",
        ready.path(),
        go.path()
    );
    let id = h.start_task(&s, &cmd).await;
    assert!(id.starts_with("bash-"));
    ready.wait().await;
    let read = |id: &str| json!({"task_id": id});
    assert_eq!(h.read_until(&s, &id, "one\n").await, "[status: running]");
    assert_eq!(
        h.call(Some(&s), "bash_output", read(&id)).await,
        ok("(no new output)\n[status: running]")
    );
    go.release().await;
    let (owner, _) = h.notices.recv().await.unwrap();
    assert_eq!(owner, s.id);
    assert_eq!(
        h.call(Some(&s), "bash_output", read(&id)).await,
        ok("[stderr]\ntwo\n[status: completed, exit code: 5]")
    );
    assert_eq!(
        h.call(Some(&s), "bash_kill", read(&id)).await,
        ok(&format!("task {id} had already finished"))
    );
    assert_eq!(
        h.call(Some(&s), "bash_output", read("bash-999")).await,
        err("Error: unknown bash task \"bash-999\"")
    );
    assert_eq!(
        h.call(Some(&s), "bash_kill", read("bash-999")).await,
        err("Error: unknown bash task \"bash-999\"")
    );
    assert_eq!(
        h.call(Some(&s), "bash_output", read(" ")).await,
        err("Error: invalid task_id")
    );

    let id = h.start_task(&s, "sleep 1000").await;
    assert_eq!(
        h.call(Some(&s), "bash_kill", read(&id)).await,
        ok(&format!("killed background task {id}"))
    );
    assert_eq!(
        h.call(Some(&s), "bash_output", read(&id)).await,
        ok("(no new output)\n[status: killed by SIGTERM]")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t9_a_read_that_lost_output_says_so() {
    let mut h = harness(|_| {});
    let s = h.session(Mode::Auto);
    let id = h.start_task(&s, "seq 1 1000").await;
    h.notices.recv().await.unwrap();
    let out = h
        .call(Some(&s), "bash_output", json!({"task_id": id}))
        .await;
    let spill = h.dir.path().join(format!("state/spill/{id}.stdout"));
    assert!(
        out.text.ends_with(&format!(
            "1000\n[some output was dropped from memory; full output: {}]\n[status: completed, exit code: 0]",
            spill.display()
        )),
        "{}",
        out.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t12_t13_t14_tasks_are_fenced_between_sessions() {
    // A call with no session has nobody to ask, so the unowned task needs a rule.
    let mut h = harness(|c| c.permissions.rules = vec![rule("echo", Decision::Allow)]);
    let a = h.session(Mode::Auto);
    let b = h.session(Mode::Auto);
    let go = common::Fifo::new(h.dir.path(), "go");
    let ready = common::Fifo::new(h.dir.path(), "ready");
    let cmd = format!(
        "echo secret; echo x > {}; cat {} > /dev/null",
        ready.path(),
        go.path()
    );
    let id = h.start_task(&a, &cmd).await;
    ready.wait().await;
    let refused = err(&format!("Error: task {id} belongs to another session"));
    let read = json!({"task_id": id});
    assert_eq!(h.call(Some(&b), "bash_output", read.clone()).await, refused);
    assert_eq!(h.call(Some(&b), "bash_kill", read.clone()).await, refused);
    assert_eq!(h.call(None, "bash_output", read.clone()).await, refused);
    // The refusals changed nothing: the owner still gets the output, unread.
    assert_eq!(h.read_until(&a, &id, "secret\n").await, "[status: running]");
    go.release().await;
    let (owner, text) = h.notices.recv().await.unwrap();
    assert_eq!(owner, a.id);
    assert_eq!(
        text,
        format!(
            "background bash task {id} finished [status: completed, exit code: 0]. Read its output with bash_output."
        )
    );
    let notices = a.take_notices();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].source, "tool-bash");
    assert!(b.take_notices().is_empty(), "another session was notified");
    // T12: ownership outlives completion.
    assert_eq!(h.call(Some(&b), "bash_output", read.clone()).await, refused);
    // T13: a task started with no session is open to anyone.
    let started = h
        .call(None, "bash", json!({"command": "echo open", "description": "d", "run_in_background": true, "workdir": h.dir.path()}))
        .await;
    let open = started
        .text
        .strip_prefix("started background task ")
        .unwrap()
        .to_string();
    h.notices.try_recv().ok(); // unowned: no notice is delivered anywhere
    assert!(
        !h.call(Some(&b), "bash_output", json!({"task_id": open}))
            .await
            .is_error
    );
    let refusals: Vec<Value> = h
        .audit()
        .into_iter()
        .filter(|l| l["event"] == "refusal")
        .collect();
    assert_eq!(refusals.len(), 4);
    assert!(refusals.iter().all(|r| r["taskId"] == json!(id)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_rule_vetoes_and_nothing_runs() {
    let h = harness(|c| {
        c.permissions.rules = vec![rule("rm", Decision::Deny), rule("rm", Decision::Allow)]
    });
    let s = h.session(Mode::Auto);
    std::fs::create_dir(s.cwd.join("build")).unwrap();
    let out = h.bash(&s, "ls && rm -rf build").await;
    assert!(out.is_error && out.vetoed, "{out:?}");
    assert!(
        out.text.starts_with("Error: vetoed by policy: "),
        "{}",
        out.text
    );
    assert!(s.cwd.join("build").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compound_commands_are_judged_per_segment() {
    let h = harness(|c| {
        c.permissions.rules = vec![
            rule("git status", Decision::Allow),
            rule("ls", Decision::Allow),
        ]
    });
    let s = h.session(Mode::Ask);
    let prompter = Scripted::new(&[PermissionAnswer::RejectOnce, PermissionAnswer::RejectOnce]);
    s.set_prompter(Some(prompter.clone()));
    std::fs::create_dir(s.cwd.join("build")).unwrap();
    std::fs::create_dir(s.cwd.join("x")).unwrap();
    let out = h.bash(&s, "git status && rm -rf build").await;
    assert_eq!(
        out.text,
        "Error: vetoed by permission: the user rejected this call"
    );
    let out = h.bash(&s, "ls $(rm -rf x)").await;
    assert!(out.vetoed);
    assert_eq!(
        prompter.asked(),
        ["git status && rm -rf build", "ls $(rm -rf x)"]
    );
    assert!(s.cwd.join("build").exists() && s.cwd.join("x").exists());
    // A command every segment of which is allowed runs without asking.
    assert_eq!(h.bash(&s, "ls -d x").await, ok("x\n"));
    assert_eq!(prompter.asked().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_read_only_and_auto() {
    let h = harness(|_| {});
    let s = h.session(Mode::ReadOnly);
    assert_eq!(h.bash(&s, "echo hi | wc -l").await, ok("1\n"));
    let out = h.bash(&s, "touch f").await;
    assert!(out.vetoed, "{out:?}");
    let out = h.bash(&s, "echo hi > f").await;
    assert!(out.vetoed, "{out:?}");
    assert!(!s.cwd.join("f").exists());
    s.set_mode(Mode::Auto);
    assert_eq!(h.bash(&s, "touch f && echo made").await, ok("made\n"));
    s.set_mode(Mode::Ask);
    // Ask mode with nobody to ask: denied.
    let out = h.bash(&s, "touch g").await;
    assert!(
        out.vetoed && out.text.contains("no client connected to ask"),
        "{}",
        out.text
    );
    let out = h
        .call(
            None,
            "bash",
            json!({"command": "touch g", "description": "d", "workdir": s.cwd}),
        )
        .await;
    assert!(
        out.vetoed && out.text.contains("no session to ask"),
        "{}",
        out.text
    );
    assert!(!s.cwd.join("g").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_grants_the_asked_segment_prefix_only() {
    let h = harness(|c| c.permissions.rules = vec![rule("git status", Decision::Allow)]);
    let s = h.session(Mode::Ask);
    let prompter = Scripted::new(&[PermissionAnswer::AllowAlways, PermissionAnswer::AllowOnce]);
    s.set_prompter(Some(prompter.clone()));
    std::fs::create_dir(s.cwd.join("build")).unwrap();
    let out = h
        .bash(&s, "git status >/dev/null 2>&1; rm -rf build && echo gone")
        .await;
    assert_eq!(out, ok("gone\n"));
    // The two unmatched segments were asked about; the allowed `git status` and the
    // compound line as a whole are not granted.
    assert_eq!(s.grants(), vec![Grant::of("rm"), Grant::of("echo")]);
    // rm is now granted for this session: no question.
    assert_eq!(h.bash(&s, "rm -rf nothing && echo ok").await, ok("ok\n"));
    assert_eq!(prompter.asked().len(), 1);
    // Another unmatched command is still asked.
    assert_eq!(h.bash(&s, "touch t && echo t").await, ok("t\n"));
    assert_eq!(prompter.asked().len(), 2);
    // Grants are per session.
    let other = h.session(Mode::Ask);
    let out = h.bash(&other, "rm -rf nothing").await;
    assert!(out.vetoed);
}

/// A stand-in for the `network` tool (issue 28): its calls go through the same
/// waterfall; it only says what it would reach.
struct FakeNetwork(Arc<dsh::tools::schema::ToolSchema>);

#[async_trait::async_trait]
impl dsh::tools::Tool for FakeNetwork {
    fn schema(&self) -> &Arc<dsh::tools::schema::ToolSchema> {
        &self.0
    }
    fn kind(&self) -> dsh::tools::ToolKind {
        dsh::tools::ToolKind::Other
    }
    async fn call(&self, call: &ToolExecution) -> ToolOutput {
        ToolOutput::ok(format!(
            "reached {}:{}",
            call.arguments["host"].as_str().unwrap_or_default(),
            call.arguments["port"]
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_network_calls_are_judged_by_host_and_always_is_remembered_per_host() {
    let h = harness(|c| {
        c.permissions.rules = vec![PermissionRule {
            tool: "network".into(),
            host: Some("*.crates.io".into()),
            action: Decision::Allow,
            ..PermissionRule::default()
        }];
        c.exec.sandbox.network.deny = vec!["evil.example".into()];
    });
    let s = h.session(Mode::Ask);
    let schema = dsh::tools::schema::ToolSchema::new(
        "network",
        "a connection of a sandboxed command",
        json!({"type": "object", "required": ["host", "port", "scheme", "command"],
               "properties": {"host": {"type": "string"}, "port": {"type": "integer"},
                              "scheme": {"type": "string"}, "command": {"type": "string"}}}),
    )
    .unwrap();
    h.tools
        .session_tools()
        .set(&s.id, vec![Arc::new(FakeNetwork(Arc::new(schema)))]);
    let prompter = Scripted::new(&[
        PermissionAnswer::AllowAlways,
        PermissionAnswer::RejectAlways,
    ]);
    s.set_prompter(Some(prompter.clone()));
    let connect = |host: &str, port: u16| {
        h.call(
            Some(&s),
            "network",
            json!({"host": host, "port": port, "scheme": "https", "command": "cargo build"}),
        )
    };
    // A rule allows, the sugar denies, neither asks.
    assert_eq!(
        connect("index.crates.io", 443).await,
        ok("reached index.crates.io:443")
    );
    let out = connect("evil.example", 443).await;
    assert!(out.vetoed, "{}", out.text);
    assert!(
        out.text
            .contains("rule network host `evil.example` (deny) matches evil.example:443"),
        "{}",
        out.text
    );
    assert!(prompter.asked().is_empty());
    // Asked, "always": the host is granted (any port), and no command.
    assert_eq!(
        connect("example.com", 443).await,
        ok("reached example.com:443")
    );
    assert_eq!(s.grants(), [Grant::Host("example.com".into())]);
    assert_eq!(
        connect("example.com", 80).await,
        ok("reached example.com:80")
    );
    assert_eq!(prompter.asked().len(), 1);
    // "Reject always" refuses that host without asking again.
    assert!(connect("other.example", 443).await.vetoed);
    let out = connect("other.example", 8080).await;
    assert_eq!(
        out.text,
        "Error: vetoed by permission: the user rejected this host for the session"
    );
    assert_eq!(prompter.asked().len(), 2);
    // The audit line keeps the host grant in its own form, for a replay.
    let audit = std::fs::read_to_string(&h.audit_path).unwrap();
    assert!(
        audit.contains(r#""grants":[{"host":"example.com"}]"#),
        "{audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_always_and_cancelled_asks_deny() {
    let h = harness(|_| {});
    let s = h.session(Mode::Ask);
    let prompter = Scripted::new(&[PermissionAnswer::RejectAlways, PermissionAnswer::Cancelled]);
    s.set_prompter(Some(prompter.clone()));
    assert!(h.bash(&s, "touch a").await.vetoed);
    let out = h.bash(&s, "touch b").await;
    assert_eq!(
        out.text,
        "Error: vetoed by permission: the user rejected this command for the session"
    );
    assert_eq!(
        prompter.asked().len(),
        1,
        "a rejected-always command was asked again"
    );
    let out = h.bash(&s, "mkdir c").await;
    assert_eq!(
        out.text,
        "Error: vetoed by permission: the permission request was cancelled"
    );
    // A question nobody answers is settled by the call's cancellation.
    s.set_prompter(Some(Arc::new(Silent)));
    let cancel = CancellationToken::new();
    cancel.cancel();
    let out = h
        .call_with(
            Some(&s),
            "bash",
            json!({"command": "mkdir d", "description": "d"}),
            cancel,
        )
        .await;
    assert_eq!(
        out.text,
        "Error: vetoed by permission: the permission request was cancelled"
    );
}

fn hook_script(dir: &std::path::Path, name: &str, body: &str) -> ExternalHookConfig {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    ExternalHookConfig {
        argv: vec![path.display().to_string()],
        timeout_ms: 2000,
        ..ExternalHookConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_hooks_decide_and_fail_closed() {
    let scripts = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, &str, Option<&str>)> = vec![
        (
            "allow",
            r#"cat > "$0.in"; echo '{"decision":"allow","reason":"fine"}'"#,
            None,
        ),
        (
            "deny",
            r#"echo '{"decision":"deny","reason":"not on fridays"}'"#,
            Some("not on fridays"),
        ),
        (
            "exit2",
            "echo 'policy says no' >&2; exit 2",
            Some("policy says no"),
        ),
        (
            "exit1",
            "echo boom >&2; exit 1",
            Some("failed with exit code 1: boom"),
        ),
        ("crash", "kill -SEGV $$", Some("crashed (signal 11)")),
        ("hang", "sleep 30", Some("did not answer within 300ms")),
        ("garbage", "echo 'sure thing'", Some("unreadable answer")),
        ("missing", "", Some("cannot start")),
    ];
    for (name, body, denied) in cases {
        let mut hook = hook_script(scripts.path(), name, body);
        if name == "hang" {
            hook.timeout_ms = 300;
        }
        if name == "missing" {
            hook.argv = vec![scripts.path().join("nonexistent").display().to_string()];
        }
        let h = harness(|c| c.hooks.command = vec![hook.clone()]);
        let s = h.session(Mode::Auto);
        let out = h.bash(&s, "echo ran").await;
        match denied {
            None => assert_eq!(out, ok("ran\n"), "{name}"),
            Some(reason) => {
                assert!(out.vetoed, "{name}: {out:?}");
                assert!(
                    out.text.starts_with("Error: vetoed by hook "),
                    "{name}: {}",
                    out.text
                );
                assert!(out.text.contains(reason), "{name}: {}", out.text);
            }
        }
        if name == "allow" {
            let input: Value = serde_json::from_str(
                &std::fs::read_to_string(scripts.path().join("allow.in")).unwrap(),
            )
            .unwrap();
            assert_eq!(input["sessionId"], json!(s.id));
            assert_eq!(input["cwd"], json!(s.cwd));
            assert_eq!(input["tool"], "bash");
            assert_eq!(input["arguments"]["command"], "echo ran");
            assert!(input["callId"].is_string());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_tightens_but_never_loosens() {
    let scripts = tempfile::tempdir().unwrap();
    let allow = hook_script(scripts.path(), "allow", r#"echo '{"decision":"allow"}'"#);
    let h = harness(|c| {
        c.permissions.rules = vec![rule("rm", Decision::Deny)];
        c.hooks.command = vec![allow.clone()];
    });
    let s = h.session(Mode::Auto);
    let out = h.bash(&s, "rm -f nothing").await;
    assert!(
        out.text.starts_with("Error: vetoed by policy: "),
        "{}",
        out.text
    );

    let ask = hook_script(
        scripts.path(),
        "ask",
        r#"echo '{"decision":"ask","reason":"double-check"}'"#,
    );
    let h = harness(|c| c.hooks.command = vec![ask.clone()]);
    let s = h.session(Mode::Auto);
    let prompter = Scripted::new(&[PermissionAnswer::AllowOnce]);
    s.set_prompter(Some(prompter.clone()));
    assert_eq!(h.bash(&s, "echo asked").await, ok("asked\n"));
    assert_eq!(prompter.asked(), ["echo asked"]);
    assert_eq!(prompter.asked.lock().unwrap()[0].reason, "double-check");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_has_a_line_for_every_path() {
    let h = harness(|c| c.permissions.rules = vec![rule("rm", Decision::Deny)]);
    let s = h.session(Mode::Ask);
    s.set_prompter(Some(Scripted::new(&[PermissionAnswer::AllowOnce])));
    h.bash(&s, "rm x").await; // vetoed by policy
    h.call(Some(&s), "bash", json!({"command": "ls"})).await; // invalid arguments
    h.bash(&s, "echo asked").await; // asked, allowed once
    let lines: Vec<Value> = h
        .audit()
        .into_iter()
        .filter(|l| l["event"] == "execution")
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(
        (lines[0]["outcome"].as_str(), lines[0]["decidedBy"].as_str()),
        (Some("vetoed"), Some("policy"))
    );
    assert_eq!(lines[0]["decision"], "deny");
    assert_eq!(lines[1]["outcome"], "error");
    assert_eq!(lines[2]["outcome"], "ok");
    assert_eq!(lines[2]["decidedBy"], "user");
    assert_eq!(lines[2]["answer"], "allow_once");
    for l in &lines {
        assert_eq!(l["session"], json!(s.id));
        assert!(l["callId"].is_string() && l["timeMs"].is_u64() && l["durationMs"].is_u64());
        assert_eq!(l["tool"], "bash");
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&h.audit_path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
}
