//! Issue 44 with Claude Code itself (2.1.83, through `@zed-industries/claude-agent-acp`
//! from npm) behind dsh, its model the scripted Messages endpoint on loopback
//! (`common::anthropic`): under the sandbox executor its whole process is inside
//! bubblewrap, reaching its model through the sandbox's proxy by the one network rule
//! the user writes (`[exec.sandbox.network] allow`), as docs/agents.md shows.
//!
//! Each containment test runs the same turn under `local` first: Claude Code runs in
//! its own process whatever its client allowed, so there the write, the privilege and
//! the connection are the attack, shown working.

use crate::common::anthropic::ScriptedAnthropic;
use crate::common::client::Client;
use crate::common::daemon::SocketDaemon;
use crate::common::{launcher, spawn_client};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A daemon with Claude Code as `[[agents]]` `claude`, its model the scripted endpoint,
/// its workspace `work` (a git repository) and its `HOME` a directory of its own.
pub struct Claude {
    pub daemon: SocketDaemon,
    pub model: ScriptedAnthropic,
    pub work: PathBuf,
}

/// Which executor runs a wrapped agent (Claude Code here, Gemini CLI beside it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Under {
    Local,
    Sandbox,
}

impl Under {
    /// The `[exec]` section, the agent's `command` (TOML) and entries for its `env`
    /// (each after a comma) for an agent whose program is `argv`, whose HOME is `home`
    /// and whose scripted model listens on loopback `port`. Under the sandbox
    /// (docs/agents.md): the agent writes its HOME, which is no root of the session's,
    /// so the config makes it writable; its model is reached only through the proxy,
    /// so the one network rule allows that host and port, and the agent's `env` clears
    /// NO_PROXY (which the sandbox sets to loopback, for the sandbox's own).
    pub fn agent_config(self, argv: &[&str], home: &Path, port: &str) -> (String, String, String) {
        let words: Vec<String> = argv.iter().map(|w| format!("{w:?}")).collect();
        let command = format!("[{}]", words.join(", "));
        match self {
            Under::Local => (String::new(), command, String::new()),
            Under::Sandbox => (
                format!(
                    "kind = \"sandbox\"\n[exec.sandbox]\nwritable = [\"{}\"]\n\
                     [exec.sandbox.network]\nallow = [\"localhost:{port}\"]\n",
                    home.display()
                ),
                command,
                ", NO_PROXY = \"\", no_proxy = \"\"".to_string(),
            ),
        }
    }
}

impl Claude {
    /// Starts it under `under` with `rules` (TOML for `[permissions]`' tables); `None`
    /// when npm is absent (the caller says the test is skipped).
    pub async fn start(dir: &Path, under: Under, rules: &str) -> Option<Self> {
        let Some(adapter) = crate::common::anthropic::claude_agent_acp() else {
            eprintln!("skipped: npm is not installed, so Claude Code's ACP adapter cannot be");
            return None;
        };
        let model = ScriptedAnthropic::start(dir).await;
        let work = dir.join("work");
        let home = dir.join("home");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let git = std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(&work)
            .status()
            .unwrap();
        assert!(git.success());
        let port = model.base_url.rsplit(':').next().unwrap().to_string();
        // IS_SANDBOX=1 (below): as root Claude Code's session/new fails without.
        let adapter = adapter.display().to_string();
        let (exec, command, env) = under.agent_config(&[&adapter], &home, &port);
        let config = format!(
            "{exec}[permissions]\ndefault_mode = \"ask\"\n{rules}\n\
             [[agents]]\nname = \"claude\"\ncommand = {command}\n\
             env = {{ HOME = \"{home}\", CLAUDE_CONFIG_DIR = \"{home}/claude-config\", IS_SANDBOX = \"1\", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\", \
             ANTHROPIC_BASE_URL = \"http://localhost:{port}\", ANTHROPIC_API_KEY = \"sk-scripted\"{env} }}\n",
            home = home.display(),
        );
        let daemon = SocketDaemon::start(dir, &config).await;
        Some(Self {
            daemon,
            model,
            work,
        })
    }

    /// `dsh acp --agent claude` as the editor starts it, initialized, with a session.
    pub async fn editor(&self) -> (tokio::process::Child, Client, String) {
        let mut cmd = launcher(&self.daemon.socket);
        cmd.args(["--agent", "claude"]).current_dir(&self.work);
        let (child, mut c) = spawn_client(&mut cmd);
        c.initialize().await;
        let session = c
            .request("session/new", json!({"cwd": self.work, "mcpServers": []}))
            .await
            .unwrap_or_else(|e| panic!("Claude Code's session/new through dsh: {e}"))["sessionId"]
            .as_str()
            .unwrap()
            .to_string();
        (child, c, session)
    }

    /// One turn whose model has Claude Code run `command` with its Bash tool.
    pub async fn run(&self, c: &mut Client, session: &str, command: &str) -> Value {
        self.model.next_command(command);
        c.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": command}]}),
        )
        .await
        .unwrap_or_else(|e| panic!("prompt through dsh: {e}"))
    }

    pub fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.daemon.state.join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// What went wrong, for a failed assertion: the updates, the audit log, the log.
    pub fn story(&self, c: &Client) -> String {
        format!(
            "updates: {:?}\naudit: {:?}\ndaemon.log: {}",
            c.updates
                .iter()
                .map(|u| u["update"].to_string())
                .collect::<Vec<_>>(),
            self.audit(),
            std::fs::read_to_string(self.daemon.state.join("daemon.log")).unwrap_or_default()
        )
    }
}

/// The rules of the containment tests: the commands the model has Claude Code run are
/// allowed by dsh (so what stops them is the sandbox), `rm` is denied.
const RULES: &str = "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"grep\"\naction = \"allow\"\n\
     [[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"allow\"\n\
     [[permissions.rules]]\ntool = \"bash\"\ncommand = \"curl\"\naction = \"allow\"\n\
     [[permissions.rules]]\ntool = \"bash\"\ncommand = \"rm\"\naction = \"deny\"\n";

/// E6/E9 with Claude Code: what it runs itself, allowed by dsh, runs in its own process.
/// Under `local` (the attack) its command has the daemon's privilege and writes a git
/// hook and outside the workspace; under `sandbox` the same turn's command has no
/// privilege (NoNewPrivs 1, CapEff 0), the hook and the outside path are not written,
/// while a file in the workspace is. A deny rule refuses its Bash call without asking
/// the editor, under both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e6_e9_claude_code_under_the_sandbox_is_contained() {
    for under in [Under::Local, Under::Sandbox] {
        let dir = tempfile::tempdir().unwrap();
        let Some(claude) = Claude::start(dir.path(), under, RULES).await else {
            return;
        };
        let (_child, mut c, session) = claude.editor().await;
        let work = &claude.work;

        let status = work.join("status");
        claude
            .run(
                &mut c,
                &session,
                &format!(
                    "grep -E 'NoNewPrivs|CapEff' /proc/self/status > {}",
                    status.display()
                ),
            )
            .await;
        let status = std::fs::read_to_string(&status)
            .unwrap_or_else(|e| panic!("{under:?}: no status ({e}): {}", claude.story(&c)));
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
                .unwrap_or_default()
        };

        let hook = work.join(".git/hooks/x");
        let outside = dir.path().join("outside");
        let inside = work.join("inside");
        for target in [&hook, &outside, &inside] {
            claude
                .run(&mut c, &session, &format!("touch {}", target.display()))
                .await;
        }
        let kept = work.join("kept");
        std::fs::write(&kept, "").unwrap();
        claude
            .run(&mut c, &session, &format!("rm {}", kept.display()))
            .await;
        assert!(kept.exists(), "{under:?}: Claude Code ran a denied command");
        assert!(c.permission_requests.is_empty(), "{under:?}: asked");
        assert!(
            inside.exists(),
            "{under:?}: an allowed write in the workspace failed: {}",
            claude.story(&c)
        );
        match under {
            Under::Local => {
                assert_eq!(field("NoNewPrivs:"), "0", "control: {status}");
                assert!(hook.exists(), "control: the local write of a hook failed");
                assert!(outside.exists(), "control: the local write outside failed");
            }
            Under::Sandbox => {
                assert_eq!(field("NoNewPrivs:"), "1", "{status}");
                assert_eq!(field("CapEff:"), "0000000000000000", "{status}");
                assert!(
                    !hook.exists(),
                    "Claude Code wrote a git hook in the sandbox"
                );
                assert!(!outside.exists(), "Claude Code wrote outside its roots");
            }
        }
        let audit = claude.audit();
        let commands: Vec<&Value> = audit.iter().filter(|l| l["tool"] == "bash").collect();
        assert_eq!(commands.len(), 5, "{under:?}: {audit:?}");
        assert!(commands.iter().all(|l| l["agent"] == "claude"));
        assert_eq!(commands[4]["decision"], "deny");
    }
}

/// E10 with Claude Code: under the sandbox its network is the proxy's, which lets
/// through its model (the rule the user wrote) and refuses a host no rule allows, with
/// an audit line (the `network` call). The control: under `local` the same `curl`, which
/// dsh allowed, reaches the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e10_claude_code_under_the_sandbox_reaches_only_allowed_hosts() {
    for under in [Under::Local, Under::Sandbox] {
        let dir = tempfile::tempdir().unwrap();
        let Some(claude) = Claude::start(dir.path(), under, RULES).await else {
            return;
        };
        let (_child, mut c, session) = claude.editor().await;
        // The other host: it notes a connection before it answers, so once curl has
        // its answer (the Bash call is over) the note is there.
        let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = other.local_addr().unwrap().port();
        let reached = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let server = tokio::spawn({
            let reached = reached.clone();
            async move {
                use tokio::io::AsyncWriteExt;
                while let Ok((mut stream, _)) = other.accept().await {
                    reached.store(true, std::sync::atomic::Ordering::SeqCst);
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                }
            }
        });
        let answer = claude
            .run(
                &mut c,
                &session,
                &format!("curl -s -o /dev/null http://localhost:{port}/"),
            )
            .await;
        assert_eq!(answer["stopReason"], "end_turn", "{}", claude.story(&c));
        let reached = reached.load(std::sync::atomic::Ordering::SeqCst);
        server.abort();
        let network: Vec<Value> = claude
            .audit()
            .into_iter()
            .filter(|l| l["tool"] == "network")
            .collect();
        match under {
            Under::Local => assert!(reached, "control: curl did not reach the host"),
            Under::Sandbox => {
                assert!(
                    !reached,
                    "the sandboxed Claude Code reached a host no rule allows"
                );
                let model_port: u64 = claude
                    .model
                    .base_url
                    .rsplit(':')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                let refused = network
                    .iter()
                    .find(|l| l["arguments"]["port"] == port)
                    .unwrap_or_else(|| panic!("no audit line: {}", claude.story(&c)));
                assert_eq!(refused["decision"], "deny", "{refused}");
                assert_eq!(refused["arguments"]["host"], "localhost");
                assert_eq!(refused["agent"], "claude", "{refused}");
                let model = network
                    .iter()
                    .find(|l| l["arguments"]["port"] == model_port)
                    .unwrap_or_else(|| panic!("the model's host was not judged: {network:?}"));
                assert_eq!(model["decision"], "allow", "{model}");
            }
        }
    }
}

/// Claude Code under `local` with `rules` (its files in `dir`), made to `touch` a file
/// in its workspace: whether the file was made, whether the editor was asked, and the
/// command's audit line. `None` when npm is absent.
async fn touch_under(dir: &Path, rules: &str) -> Option<(bool, bool, Value)> {
    let claude = Claude::start(dir, Under::Local, rules).await?;
    let (_child, mut c, session) = claude.editor().await;
    let file = claude.work.join("touched");
    claude
        .run(&mut c, &session, &format!("touch {}", file.display()))
        .await;
    let line = claude
        .audit()
        .into_iter()
        .rfind(|l| l["tool"] == "bash")
        .unwrap_or_else(|| panic!("no audit line: {}", claude.story(&c)));
    Some((file.exists(), !c.permission_requests.is_empty(), line))
}

/// Issue 44, hooks see the agent: a pre_tool hook's input for a wrapped agent's call
/// carries `agent` (the `[[agents]]` name) and `agentTool` (Claude Code's own `Bash`),
/// so a real hook script that denies on `agent == "claude"` refuses Claude Code's
/// command without asking the editor, and it does not run. The control: the same
/// command, which the rules allow, runs without the hook. Claude Code names its tool
/// only in its `tool_call` update, not in the question (adapter 0.23.1): dsh takes the
/// name from the update, so a rule `tool = "Bash"` refuses the same command too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p1_a_hook_and_a_rule_deny_on_the_agents_names() {
    let allow = "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"allow\"\n";
    let dir = tempfile::tempdir().unwrap();
    let Some((ran, asked, _)) = touch_under(dir.path(), allow).await else {
        return;
    };
    assert!(
        ran && !asked,
        "control: the allowed command did not run unasked"
    );

    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("no_claude.py");
    let seen = dir.path().join("seen.json");
    std::fs::write(
        &hook,
        format!(
            "import json, sys\ncall = json.load(sys.stdin)\n\
             open({seen:?}, 'w').write(json.dumps(call))\n\
             if call.get('agent') == 'claude' and call.get('agentTool') == 'Bash':\n    \
             print(json.dumps({{'decision': 'deny', 'reason': 'no Bash for claude'}}))\n",
            seen = seen.display().to_string()
        ),
    )
    .unwrap();
    let hooked = format!(
        "{allow}[[hooks.command]]\nargv = [\"python3\", {:?}]\n",
        hook.display().to_string()
    );
    let Some((ran, asked, line)) = touch_under(dir.path(), &hooked).await else {
        return;
    };
    assert!(!ran, "the hook's deny did not hold");
    assert!(!asked, "the editor was asked");
    let input: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(input["agent"], "claude", "{input}");
    assert_eq!(input["agentTool"], "Bash", "{input}");
    assert_eq!(input["tool"], "bash", "{input}");
    assert_eq!(line["decision"], "deny", "{line}");
    assert_eq!(line["decidedBy"], "hook no_claude", "{line}");

    let dir = tempfile::tempdir().unwrap();
    let ruled = format!("{allow}[[permissions.rules]]\ntool = \"Bash\"\naction = \"deny\"\n");
    let Some((ran, asked, line)) = touch_under(dir.path(), &ruled).await else {
        return;
    };
    assert!(
        !ran,
        "a rule for Bash did not refuse Claude Code's Bash call"
    );
    assert!(!asked, "the editor was asked");
    assert_eq!(line["decision"], "deny", "{line}");
    assert!(line["reason"].as_str().unwrap().contains("Bash"), "{line}");
}
