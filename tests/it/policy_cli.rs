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

/// P8 (issue 41): `dsh policy explain` says why code on the line is opaque (the name that
/// is not on its language's list), in text and in JSON, and allows code shown harmless.
#[tokio::test]
async fn p8_explain_says_why_inline_code_is_not_shown_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), RULES);
    for (line, why) in [
        (
            "python3 -c \"import os; getattr(os, 'sys'+'tem')('ls')\"",
            "`getattr` can run code",
        ),
        ("echo 'print(1)' | python3", "reads code from stdin"),
        (
            "node -e \"require('chi'+'ld_process')\"",
            "`require` of a computed name",
        ),
        ("awk '{print $1 | \"sh\"}' f", "awk pipes"),
    ] {
        let (ok, text, err) = run(&["policy", "explain", "--", line], &config).await;
        assert!(ok, "{err}");
        assert!(text.starts_with("ask:"), "{line}: {text}");
        assert!(text.contains("not shown harmless"), "{line}: {text}");
        assert!(text.contains(why), "{line}: {text}");
        let (ok, json, err) = run(&["policy", "explain", "--json", "--", line], &config).await;
        assert!(ok, "{err}");
        let json: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
        let cause = &json["judgement"]["cause"];
        assert_eq!(cause["kind"], "inline_code", "{line}: {json}");
        assert!(
            cause["why"].as_str().is_some_and(|w| w.contains(why)),
            "{line}: {json}"
        );
    }
    let line = "python3 -c 'import platform; print(platform.system())'";
    let (ok, text, err) = run(&["policy", "explain", "--", line], &config).await;
    assert!(ok, "{err}");
    assert!(text.starts_with("allow:"), "{text}");
}

/// P8 (issue 41): `dsh policy explain` says why code the line writes to a file and runs is
/// asked or denied: the language it was read as, what runs it, and why it is not shown
/// harmless (or which rule's words stand in it); in text and in JSON (`written_script`).
#[tokio::test]
async fn p8_explain_says_why_code_written_on_the_line_and_run_is_not_shown_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), RULES);
    for (line, decision, language, runner, why) in [
        (
            r#"printf 'import os\nos.system("r"+"m c")\n' > x.py; python3 x.py"#,
            "ask",
            "python",
            "python3 x.py",
            "`system` is not on the python list",
        ),
        (
            "echo 'class X {}' > X.java; java X.java",
            "ask",
            "java",
            "java X.java",
            "no reader for java",
        ),
        (
            r#"echo 'system("rm c")' > x.pl; perl x.pl"#,
            "deny",
            "perl",
            "perl x.pl",
            "`system`",
        ),
    ] {
        let (ok, text, err) = run(&["policy", "explain", "--", line], &config).await;
        assert!(ok, "{err}");
        assert!(text.starts_with(&format!("{decision}:")), "{line}: {text}");
        assert!(
            text.contains(&format!(
                "`{runner}` runs what the line wrote, and the {language} code written"
            )),
            "{line}: {text}"
        );
        let (ok, json, err) = run(&["policy", "explain", "--json", "--", line], &config).await;
        assert!(ok, "{err}");
        let json: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
        let cause = &json["judgement"]["cause"];
        assert_eq!(cause["kind"], "written_script", "{line}: {json}");
        assert_eq!(cause["language"], language, "{line}: {json}");
        assert_eq!(cause["runner"], runner, "{line}: {json}");
        assert!(
            cause["why"].as_str().is_some_and(|w| w.contains(why)),
            "{line}: {json}"
        );
        assert_eq!(
            cause["rule"].is_object(),
            decision == "deny",
            "{line}: {json}"
        );
    }
    let line = "printf 'print(1)\\n' > x.py; python3 x.py";
    let (ok, text, err) = run(&["policy", "explain", "--", line], &config).await;
    assert!(ok, "{err}");
    assert!(text.starts_with("allow:"), "{text}");
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

/// E10: `dsh policy explain --tool network HOST[:PORT]` judges a connection as the daemon
/// would (rules with a host, `[exec.sandbox.network]` sugar and default, grants), and
/// check-config refuses a bad network entry, naming the key.
#[tokio::test]
async fn e10_explain_judges_a_network_call_and_check_config_refuses_bad_sugar() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "[permissions]
default_mode = \"auto\"

[[permissions.rules]]
tool = \"network\"
host = \"*.crates.io\"
action = \"allow\"
examples = [\"index.crates.io\"]
not_examples = [\"crates.io\"]

[exec.sandbox.network]
default = \"deny\"
deny = [\"static.crates.io:443\"]
",
    );
    let explain = |args: &'static [&'static str]| {
        let mut all = vec!["policy", "explain", "--tool", "network"];
        all.extend_from_slice(args);
        all
    };
    let (ok, text, err) = run(&explain(&["--", "index.crates.io"]), &config).await;
    assert!(ok, "{err}");
    let origin = format!("{}:4", config.display());
    assert!(
        text.starts_with(&format!(
            "allow: rule 0 at {origin}: rule network host `*.crates.io` (allow)"
        )),
        "{text}"
    );
    assert!(text.contains("network: index.crates.io:443"), "{text}");
    let (ok, text, err) = run(&explain(&["--", "static.crates.io:443"]), &config).await;
    assert!(ok, "{err}");
    assert!(
        text.starts_with("deny: rule 1 at [exec.sandbox.network] deny"),
        "{text}"
    );
    let (ok, json, err) = run(&explain(&["--json", "--", "example.com:80"]), &config).await;
    assert!(ok, "{err}");
    let json: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!(
        (json["host"].clone(), json["port"].clone()),
        ("example.com".into(), 80.into())
    );
    assert_eq!(json["judgement"]["decision"], "deny");
    assert_eq!(
        json["judgement"]["reason"],
        "example.com:80 is not covered by any rule (mode auto: [exec.sandbox.network] default = deny)"
    );
    // Mode ask asks and offers the host to "always"; a host grant allows it.
    let (_, json, _) = run(
        &explain(&["--json", "--mode", "ask", "--", "example.com"]),
        &config,
    )
    .await;
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["judgement"]["decision"], "ask");
    assert_eq!(
        json["judgement"]["grants_on_allow_always"],
        serde_json::json!([{"host": "example.com"}])
    );
    let (_, text, _) = run(
        &explain(&[
            "--mode",
            "ask",
            "--grant",
            "network example.com",
            "--",
            "example.com",
        ]),
        &config,
    )
    .await;
    assert!(
        text.starts_with("allow: allowed always in this session: `network example.com`"),
        "{text}"
    );
    let (ok, _, err) = run(&explain(&["--", "*.crates.io"]), &config).await;
    assert!(!ok && err.contains("is a pattern"), "{err}");

    let bad = write(
        dir.path(),
        "[exec.sandbox.network]\nallow = [\"crates.io:https\"]\n",
    );
    let (ok, _, err) = run(&["check-config"], &bad).await;
    assert!(!ok);
    assert!(
        err.contains("[exec.sandbox.network] allow: `crates.io:https`"),
        "{err}"
    );
}

/// `dsh policy replay` over a real daemon's audit log (issue 14): the config that
/// produced it changes nothing; an added deny rule changes exactly the calls it matches;
/// a looser rule is caught by `--fail-on loosen`; an unreadable line is exit 2, named.
/// A pattern is expanded against the disk as the daemon did (P6, issue 41): `ls
/// /nonexistent/r[m]` matches nothing, so bash passes it as written and it stays allowed
/// (with no disk it is taken as the `rm` it could match, and replay reported a change).
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
        "ls /nonexistent/r[m]",
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
    assert!(text.contains("7 call(s) replayed, 0 changed"), "{text}");

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

/// A pre_tool hook program for the replay test: denies what contains `word` (a bash
/// command), allows the rest, and appends each command it judged to `log`.
fn word_hook(dir: &Path, name: &str, word: &str, log: &Path) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            r#"#!/usr/bin/env python3
import json, sys
call = json.load(sys.stdin)
command = call["arguments"].get("command", "")
with open("{log}", "a") as f:
    f.write(command + "\n")
if "{word}" in command:
    print(json.dumps({{"decision": "deny", "reason": "no {word}"}}))
else:
    print(json.dumps({{"decision": "allow"}}))
"#,
            log = log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `dsh policy replay --hooks` (issue 14): the candidate's pre_tool hooks run for real on
/// every audited call and count into the report; the config that produced the log
/// changes nothing with them, a candidate hook that denies something else changes
/// exactly those calls, and without `--hooks` the policy alone is compared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_with_hooks_runs_the_candidates_hook_programs() {
    let dir = tempfile::tempdir().unwrap();
    let live_log = dir.path().join("live.log");
    let guard = word_hook(dir.path(), "guard.py", "push", &live_log);
    let produced = format!(
        "[permissions]\ndefault_mode = \"auto\"\n[[hooks.command]]\nname = \"guard\"\nargv = [\"{}\"]\n",
        guard.display()
    );
    let (_d, mut c) = common::daemon::stdio_daemon(dir.path(), &produced, &[]).await;
    let s = c
        .new_session(&common::daemon::workspace(dir.path(), "ws"))
        .await;
    assert_eq!(c.bash(&s, "echo one").await, ("one\n".into(), false));
    let (text, is_error) = c.bash(&s, "git push origin main").await;
    assert!(is_error && text.contains("no push"), "{text}");
    assert_eq!(c.bash(&s, "echo two").await, ("two\n".into(), false));
    drop(c);
    assert_eq!(
        std::fs::read_to_string(&live_log).unwrap().lines().count(),
        3
    );
    let audit = dir.path().join("state/audit.jsonl");
    let replay = |config: &str, extra: &[&str]| {
        let path = dir.path().join("candidate.toml");
        std::fs::write(&path, config).unwrap();
        let out = std::process::Command::new(common::daemon::BIN)
            .args(["policy", "replay", "--json", "--audit"])
            .arg(&audit)
            .arg("--config")
            .arg(&path)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };

    // The same config, hooks included: nothing changes, and the hook ran on each call.
    let report = replay(&produced, &["--hooks"]);
    assert_eq!(report["changes"], serde_json::json!([]), "{report}");
    assert_eq!(report["hooks"]["hook guard"]["allow"], 2, "{report}");
    assert_eq!(report["hooks"]["hook guard"]["deny"], 1, "{report}");
    assert_eq!(
        std::fs::read_to_string(&live_log).unwrap().lines().count(),
        6
    );

    // A candidate whose hook denies `echo` instead: exactly those calls change, both ways.
    let candidate_log = dir.path().join("candidate.log");
    let echo_guard = word_hook(dir.path(), "echo_guard.py", "echo", &candidate_log);
    let candidate = format!(
        "[permissions]\ndefault_mode = \"auto\"\n[[hooks.command]]\nname = \"echo-guard\"\nargv = [\"{}\"]\n",
        echo_guard.display()
    );
    let report = replay(&candidate, &["--hooks"]);
    let changes: Vec<(String, String, String)> = report["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["call"].as_str().unwrap().into(),
                c["from"].as_str().unwrap().into(),
                c["to"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [
            ("echo one".into(), "allow".into(), "deny".into()),
            ("git push origin main".into(), "deny".into(), "allow".into()),
            ("echo two".into(), "allow".into(), "deny".into()),
        ]
    );
    assert_eq!(report["hooks"]["hook echo-guard"]["deny"], 2, "{report}");
    assert_eq!(
        std::fs::read_to_string(&candidate_log).unwrap(),
        "echo one\ngit push origin main\necho two\n"
    );
    // Without --hooks, only the policies are compared (both allow everything here), and
    // no hook runs.
    let report = replay(&candidate, &[]);
    assert_eq!(report["changes"], serde_json::json!([]), "{report}");
    assert!(report.get("hooks").is_none(), "{report}");
    assert_eq!(
        std::fs::read_to_string(&candidate_log)
            .unwrap()
            .lines()
            .count(),
        3
    );
}

/// A report piped into a reader that has gone (`dsh policy explain ... | head -1` once
/// `head` has its line) ends as Unix tools do, by SIGPIPE, with nothing on stderr: it
/// panicked in `println!` on EPIPE before (exit 101, "failed printing to stdout").
#[tokio::test]
async fn a_report_whose_reader_has_gone_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), RULES);
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    for args in [
        &["policy", "explain", "--config"][..],
        &["check-config", "--config"][..],
    ] {
        let out = common::dsh()
            .args(args)
            .arg(&config)
            .args(if args[0] == "policy" {
                &["--", "ls"][..]
            } else {
                &[][..]
            })
            .stdin(std::process::Stdio::null())
            .stdout(writer.try_clone().unwrap())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run dsh")
            .wait_with_output()
            .await
            .expect("run dsh");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {:?} {stderr}",
            out.status
        );
    }
}
