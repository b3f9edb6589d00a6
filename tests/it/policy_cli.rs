//! The policy from the command line (issue 12): `dsh policy explain` in text and JSON,
//! `dsh check-config` printing the configuration as TOML, and `dsh check-config` and
//! `dsh serve` refusing a config whose rule examples or policy tests fail, naming the
//! entry's file:line and what decided instead.

use crate::common;

use serde_json::Value;
use std::path::Path;

const RULES: &str = "[permissions]
default_mode = \"auto\"

[[permissions.rules]]
tool = \"bash\"
command = \"rm\"
action = \"deny\"
examples = [\"rm -rf build\", \"timeout --sig KILL 5 rm x\"]
not_examples = [\"rmdir x\"]

[[permissions.tests]]
command = \"nice --adj 5 rm x\"
mode = \"auto\"
expect = \"deny\"
";

fn write(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("dsh.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs dsh with `args`, `--config CONFIG` put before a `--` if there is one; its exit
/// status, stdout and stderr.
async fn run(args: &[&str], config: &Path) -> (bool, String, String) {
    let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
    let out = common::dsh()
        .args(&args[..split])
        .arg("--config")
        .arg(config)
        .args(&args[split..])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("run dsh");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn explain_shows_the_decision_the_chain_and_the_rule_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), RULES);
    let line = "timeout --sig KILL 5 nice rm x; ls";
    let (ok, text, err) = run(&["policy", "explain", "--", line], &config).await;
    assert!(ok, "{err}");
    let origin = format!("{}:4", config.display());
    assert!(
        text.starts_with(&format!("deny: rule 0 at {origin}")),
        "{text}"
    );
    assert!(text.contains("via: timeout -> nice -> rm"), "{text}");
    assert!(text.contains("mode: auto"), "{text}");

    let (ok, json, err) = run(
        &[
            "policy",
            "explain",
            "--json",
            "--mode",
            "read-only",
            "--",
            "ls -l | wc -l",
        ],
        &config,
    )
    .await;
    assert!(ok, "{err}");
    let json: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!(json["mode"], "read-only");
    assert_eq!(json["judgement"]["decision"], "allow");
    assert_eq!(
        json["judgement"]["segments"][1]["words"],
        serde_json::json!(["wc", "-l"])
    );
    assert_eq!(
        json["judgement"]["segments"][1]["cause"]["kind"],
        "read_only"
    );

    // A grant given on the command line allows its prefix in mode ask.
    let (_, json, _) = run(
        &[
            "policy",
            "explain",
            "--json",
            "--mode",
            "ask",
            "--grant",
            "cargo build",
            "--",
            "cargo build",
        ],
        &config,
    )
    .await;
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["judgement"]["decision"], "allow");
    assert_eq!(json["judgement"]["cause"]["kind"], "grant");
}

#[tokio::test]
async fn check_config_prints_toml_that_loads_again() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), RULES);
    let (ok, text, err) = run(&["check-config"], &config).await;
    assert!(ok, "{err}");
    let parsed: toml::Value = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(
        parsed["permissions"]["rules"][0]["command"].as_str(),
        Some("rm")
    );
    assert_eq!(parsed["permissions"]["default_mode"].as_str(), Some("auto"));
    let copy = dir.path().join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    let again = write(&copy, &text);
    let (ok, _, err) = run(&["check-config"], &again).await;
    assert!(ok, "the printed config does not load: {err}");
}

#[tokio::test]
async fn a_failing_example_or_test_stops_check_config_and_serve() {
    let dir = tempfile::tempdir().unwrap();
    let broken = RULES
        .replace(
            "not_examples = [\"rmdir x\"]",
            "not_examples = [\"sudo rm x\"]",
        )
        .replace("expect = \"deny\"", "expect = \"allow\"");
    let config = write(dir.path(), &broken);
    let origin = config.display().to_string();
    let (ok, _, err) = run(&["check-config"], &config).await;
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "{origin}:4: rule 0 (rule bash `rm` (deny)) should not match `sudo rm x`"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{origin}:11: policy test `nice --adj 5 rm x` in mode auto expects allow, but it is deny"
        )),
        "{err}"
    );
    let state = dir.path().join("state");
    let (ok, _, serve_err) = run(
        &["serve", "--stdio", "--state-dir", state.to_str().unwrap()],
        &config,
    )
    .await;
    assert!(!ok, "serve ran with failing rule examples");
    assert!(
        serve_err.contains("should not match `sudo rm x`"),
        "{serve_err}"
    );
}

/// `dsh policy replay` over a real daemon's audit log (issue 14): the config that
/// produced it changes nothing; an added deny rule changes exactly the calls it matches;
/// a looser rule is caught by `--fail-on loosen`; an unreadable line is exit 2, named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_judges_the_audit_again_under_a_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let produced = "[permissions]\ndefault_mode = \"auto\"\n[[permissions.rules]]\ntool = \"bash\"\ncommand = \"rm\"\naction = \"deny\"\n";
    let (_d, mut c) = common::daemon::stdio_daemon(dir.path(), produced, &[]).await;
    let ws = common::daemon::workspace(dir.path(), "ws");
    let s = c.new_session(&ws).await;
    for command in [
        "git status",
        "echo one",
        "rm -f nothing",
        "git push origin main",
    ] {
        c.bash(&s, command).await;
    }
    c.set_mode(&s, "ask").await;
    c.permission_answers.push_back("allow_always");
    c.bash(&s, "touch made").await;
    c.bash(&s, "touch again").await; // allowed by the grant the answer made
    drop(c);
    let audit = dir.path().join("state/audit.jsonl");
    let replay = |config: &Path, extra: &[&str]| {
        let mut cmd = std::process::Command::new(common::daemon::BIN);
        cmd.args(["policy", "replay", "--audit"])
            .arg(&audit)
            .arg("--config")
            .arg(config)
            .args(extra);
        cmd.output().unwrap()
    };
    let same = dir.path().join("same.toml");
    std::fs::write(
        &same,
        format!("[exec]\nkill_grace_ms = 300\ndrain_ms = 300\n{produced}"),
    )
    .unwrap();
    let out = replay(&same, &["--fail-on", "change"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("6 call(s) replayed, 0 changed"), "{text}");

    let stricter = dir.path().join("stricter.toml");
    std::fs::write(
        &stricter,
        format!("{produced}[[permissions.rules]]\ntool = \"bash\"\ncommand = \"git push\"\naction = \"deny\"\n"),
    )
    .unwrap();
    let out = replay(&stricter, &["--json", "--fail-on", "loosen"]);
    assert!(out.status.success(), "a stricter rule does not loosen");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let changes = report["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{report}");
    assert_eq!(changes[0]["call"], "git push origin main");
    assert_eq!(
        (changes[0]["from"].as_str(), changes[0]["to"].as_str()),
        (Some("allow"), Some("deny"))
    );
    assert_eq!(
        replay(&stricter, &["--fail-on", "change"]).status.code(),
        Some(1)
    );

    let looser = dir.path().join("looser.toml");
    std::fs::write(&looser, "[permissions]\ndefault_mode = \"auto\"\n").unwrap();
    let out = replay(&looser, &["--fail-on", "loosen"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("deny -> allow  bash rm -f nothing"), "{text}");

    std::fs::write(
        &audit,
        format!(
            "{}\n{{broken\n",
            std::fs::read_to_string(&audit)
                .unwrap()
                .lines()
                .next()
                .unwrap()
        ),
    )
    .unwrap();
    let out = replay(&same, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("audit.jsonl:2"));
}
