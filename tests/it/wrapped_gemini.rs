//! Issue 44 with a second real agent: Gemini CLI (0.61.0 from npm, `--acp`) behind dsh,
//! its model the scripted Gemini endpoint on loopback (`common::gemini`). Gemini asks
//! before its shell tool with the command only as the question's title (no
//! `rawInput`); dsh judges that as the `bash` command, so the command rules decide.
//! Under the sandbox executor its whole process is inside bubblewrap, as Claude Code's.

use crate::common::client::Client;
use crate::common::daemon::SocketDaemon;
use crate::common::gemini::{GEMINI_CLI, ScriptedGemini};
use crate::common::{launcher, spawn_client};
use crate::wrapped_claude::Under;
use serde_json::{Value, json};
use std::path::Path;

/// A daemon with Gemini CLI as `[[agents]]` `gemini` under `rules`, an editor's
/// connection with a session, and the model; `None` when npm is absent.
async fn gemini(
    dir: &Path,
    under: Under,
    rules: &str,
) -> Option<(
    SocketDaemon,
    ScriptedGemini,
    tokio::process::Child,
    Client,
    String,
)> {
    let Some(cli) = crate::common::anthropic::npm_agent(GEMINI_CLI, "gemini") else {
        eprintln!("skipped: npm is not installed, so Gemini CLI cannot be");
        return None;
    };
    let model = ScriptedGemini::start(dir).await;
    let work = dir.join("work");
    let home = dir.join("home");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let port = model.base_url.rsplit(':').next().unwrap().to_string();
    // Under the sandbox as Claude Code is (docs/agents.md).
    let cli = cli.display().to_string();
    let (exec, command, env) = under.agent_config(&[&cli, "--acp"], &home, &port);
    let config = format!(
        "{exec}[permissions]\ndefault_mode = \"ask\"\n{rules}\n\
         [[agents]]\nname = \"gemini\"\ncommand = {command}\n\
         env = {{ HOME = \"{}\", GEMINI_API_KEY = \"scripted\", \
         GOOGLE_GEMINI_BASE_URL = \"http://localhost:{port}\"{env} }}\n",
        home.display(),
    );
    let daemon = SocketDaemon::start(dir, &config).await;
    let mut cmd = launcher(&daemon.socket);
    cmd.args(["--agent", "gemini"]).current_dir(&work);
    let (child, mut c) = spawn_client(&mut cmd);
    c.initialize().await;
    c.request("authenticate", json!({"methodId": "gemini-api-key"}))
        .await
        .unwrap_or_else(|e| panic!("Gemini's authenticate through dsh: {e}"));
    let session = c
        .request("session/new", json!({"cwd": work, "mcpServers": []}))
        .await
        .unwrap_or_else(|e| panic!("Gemini's session/new through dsh: {e}"))["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    Some((daemon, model, child, c, session))
}

async fn run(model: &ScriptedGemini, c: &mut Client, session: &str, command: &str) -> Value {
    model.next_command(command);
    c.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": command}]}),
    )
    .await
    .unwrap_or_else(|e| panic!("prompt through dsh: {e}"))
}

fn audit(daemon: &SocketDaemon) -> Vec<Value> {
    std::fs::read_to_string(daemon.state.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// P1 with Gemini CLI: under an allow rule for `touch` (the control) its shell command
/// runs, unasked; under a deny rule the same command is refused without asking the
/// editor, and nothing ran (Gemini runs what its client allows, in its own process).
/// Each audit line names the agent and is a `bash` call of the command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p1_gemini_cli_behind_dsh_is_judged_by_the_command_rules() {
    for action in ["allow", "deny"] {
        let dir = tempfile::tempdir().unwrap();
        let rules = format!(
            "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"{action}\"\n"
        );
        let Some((daemon, model, _child, mut c, session)) =
            gemini(dir.path(), Under::Local, &rules).await
        else {
            return;
        };
        let file = dir.path().join("work/made");
        let command = format!("touch {}", file.display());
        let answer = run(&model, &mut c, &session, &command).await;
        assert_eq!(answer["stopReason"], "end_turn", "{answer}");
        assert!(
            c.permission_requests.is_empty(),
            "{action}: the editor was asked"
        );
        let lines = audit(&daemon);
        let line = lines
            .iter()
            .find(|l| l["arguments"]["command"] == command.as_str())
            .unwrap_or_else(|| {
                panic!(
                    "{action}: no audit line for the command: {lines:?} {:?} {}",
                    c.updates,
                    std::fs::read_to_string(daemon.state.join("daemon.log")).unwrap_or_default()
                )
            });
        assert_eq!(line["tool"], "bash", "{line}");
        assert_eq!(line["agent"], "gemini", "{line}");
        assert_eq!(line["decision"], action, "{line}");
        match action {
            "allow" => assert!(file.exists(), "control: the allowed command did not run"),
            _ => assert!(!file.exists(), "Gemini ran a denied command"),
        }
    }
}

/// E6/E9 with Gemini CLI under the sandbox (set up as docs/agents.md shows for Claude
/// Code): its own command, allowed by dsh, has no privilege and cannot write outside
/// the workspace, while one in it is made. The control: under `local` the same command
/// writes outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e6_e9_gemini_cli_under_the_sandbox_is_contained() {
    let rules = "[[permissions.rules]]\ntool = \"bash\"\ncommand = \"touch\"\naction = \"allow\"\n\
                 [[permissions.rules]]\ntool = \"bash\"\ncommand = \"grep\"\naction = \"allow\"\n";
    for under in [Under::Local, Under::Sandbox] {
        let dir = tempfile::tempdir().unwrap();
        let Some((_daemon, model, _child, mut c, session)) = gemini(dir.path(), under, rules).await
        else {
            return;
        };
        let status = dir.path().join("work/status");
        let grep = format!(
            "grep -E 'NoNewPrivs|CapEff' /proc/self/status > {}",
            status.display()
        );
        run(&model, &mut c, &session, &grep).await;
        let outside = dir.path().join("outside");
        run(
            &model,
            &mut c,
            &session,
            &format!("touch {}", outside.display()),
        )
        .await;
        let inside = dir.path().join("work/inside");
        run(
            &model,
            &mut c,
            &session,
            &format!("touch {}", inside.display()),
        )
        .await;
        let status = std::fs::read_to_string(&status)
            .unwrap_or_else(|e| panic!("{under:?}: no status ({e}): {:?}", c.updates));
        assert!(
            inside.exists(),
            "{under:?}: the write in the workspace failed"
        );
        match under {
            Under::Local => {
                assert!(status.contains("NoNewPrivs:\t0"), "control: {status}");
                assert!(outside.exists(), "control: the local write outside failed");
            }
            Under::Sandbox => {
                assert!(status.contains("NoNewPrivs:\t1"), "{status}");
                assert!(status.contains("CapEff:\t0000000000000000"), "{status}");
                assert!(!outside.exists(), "Gemini CLI wrote outside its roots");
            }
        }
        assert!(
            c.permission_requests.is_empty(),
            "{under:?}: the editor was asked"
        );
    }
}
