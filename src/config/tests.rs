use super::*;

#[test]
fn hook_names_are_the_scripts_and_duplicates_are_refused() {
    let named = |argv: &[&str]| {
        ExternalHookConfig {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
        .label()
    };
    assert_eq!(named(&["node", "x/block.js"]), "block");
    assert_eq!(named(&["python3", "a/b.py"]), "b");
    assert_eq!(
        named(&["/usr/bin/python3.12", "-u", "hooks/guard.py", "--x"]),
        "guard"
    );
    assert_eq!(named(&["/usr/bin/env", "python3", "check.py"]), "check");
    assert_eq!(named(&["uv", "run", "lint.py"]), "lint");
    assert_eq!(named(&["python3", "-m", "my_hook"]), "my_hook");
    assert_eq!(named(&["python3", "-c", "print(1)"]), "python3");
    assert_eq!(named(&["/opt/hooks/rewriter"]), "rewriter");
    assert_eq!(
        named(&[
            "/bin/sh",
            "-c",
            "node \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/fmt.mjs"
        ]),
        "fmt"
    );
    let two = |a: &str, b: &str| {
        format!(
            "[[hooks.command]]\nargv = [\"python3\", \"{a}\"]\n[[hooks.command]]\nargv = [\"node\", \"{b}\"]\n"
        )
    };
    assert!(Config::from_toml(&two("a/one.py", "b/two.js"), Path::new("t")).is_ok());
    let err = Config::from_toml(&two("a/same.py", "b/same.js"), Path::new("t"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`python3 a/same.py`")
            && err.contains("`node b/same.js`")
            && err.contains("\"same\""),
        "{err}"
    );
}

#[test]
fn sandbox_paths_that_cannot_be_enforced_are_refused_with_their_line() {
    for (toml, says) in [
        (
            "[exec.sandbox]\ndeny_read = [\"relative/x\"]\n",
            "must be absolute or ~/",
        ),
        (
            "[exec.sandbox]\ndeny_read = [\"~/a/../b\"]\n",
            "`.` or `..`",
        ),
        ("[exec.sandbox]\ndeny_read = [\"/a/./b\"]\n", "`.` or `..`"),
        ("[exec.sandbox]\nwritable = [\"rel\"]\n", "must be absolute"),
        (
            "[exec.sandbox]\nwritable = [\"/srv/p\"]\ndeny_read = [\"/srv\"]\n",
            "contains the writable root /srv/p",
        ),
    ] {
        let err = Config::from_toml(toml, Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{toml}: {err}");
    }
    Config::from_toml(
        "[exec.sandbox]\ndeny_read = [\"~/.ssh\", \"/etc/shadow\"]\n",
        Path::new("x.toml"),
    )
    .unwrap();
}

/// E9: an XDG entry is masked where the variable points and at its default; a
/// relative XDG value is ignored (the XDG specification says so).
#[test]
fn deny_read_entries_resolve_through_xdg_and_their_defaults() {
    let home = Path::new("/home/u");
    let env = |config: Option<&'static str>| {
        move |name: &str| match (name, config) {
            ("XDG_CONFIG_HOME", Some(v)) => Some(std::ffi::OsString::from(v)),
            _ => None,
        }
    };
    let gh = DenyRead::parse(Path::new("$XDG_CONFIG_HOME/gh")).unwrap();
    assert_eq!(
        gh.paths(Some(home), env(Some("/x/conf"))),
        [
            PathBuf::from("/x/conf/gh"),
            PathBuf::from("/home/u/.config/gh")
        ]
    );
    assert_eq!(
        gh.paths(Some(home), env(Some("rel"))),
        [PathBuf::from("/home/u/.config/gh")]
    );
    assert_eq!(
        gh.paths(Some(home), env(Some("/home/u/.config"))),
        [PathBuf::from("/home/u/.config/gh")]
    );
    let keyrings = DenyRead::parse(Path::new("$XDG_DATA_HOME/keyrings")).unwrap();
    assert_eq!(
        keyrings.paths(Some(home), env(Some("/x/conf"))),
        [PathBuf::from("/home/u/.local/share/keyrings")]
    );
    let ssh = DenyRead::parse(Path::new("~/.ssh")).unwrap();
    assert_eq!(
        ssh.paths(Some(home), env(None)),
        [PathBuf::from("/home/u/.ssh")]
    );
    assert!(ssh.paths(None, env(None)).is_empty());
    assert_eq!(DenyRead::parse(Path::new("$HOME/.ssh")), None);
    for entry in DEFAULT_DENY_READ {
        assert!(DenyRead::parse(Path::new(entry)).is_some(), "{entry}");
    }
}

/// E4: `env_pass` and `env_set` name variables; anything else is refused at load.
#[test]
fn env_pass_and_env_set_take_variable_names_only() {
    let c = Config::from_toml(
        "[exec]\nenv_pass = [\"NPM_TOKEN\"]\nenv_set = { A = \"1\" }\n",
        Path::new("x.toml"),
    )
    .unwrap();
    assert_eq!(c.exec.env_pass, ["NPM_TOKEN"]);
    assert_eq!(c.exec.env_set.get("A").map(String::as_str), Some("1"));
    for toml in [
        "[exec]\nenv_pass = [\"A=B\"]\n",
        "[exec]\nenv_pass = [\"\"]\n",
        "[exec]\nenv_set = { \"A=B\" = \"1\" }\n",
    ] {
        assert!(
            Config::from_toml(toml, Path::new("x.toml")).is_err(),
            "{toml}"
        );
    }
}

#[test]
fn defaults_without_file() {
    let c = Config::load(None).unwrap();
    assert_eq!(c.exec.default_timeout_ms, 120_000);
    assert_eq!(c.exec.max_timeout_ms, 600_000);
    assert_eq!(c.exec.max_output_bytes, 64_000);
    assert_eq!(c.exec.finished_output_bytes, 16_000_000);
    assert_eq!(c.exec.kill_grace_ms, 3_000);
    assert_eq!(c.exec.drain_ms, 2_000);
}

#[test]
fn e10_the_network_is_a_mode_a_legacy_flag_or_a_table_and_bad_values_are_named() {
    let read =
        |body: &str| Config::from_toml(&format!("[exec.sandbox]\n{body}"), Path::new("x.toml"));
    assert_eq!(
        read("").unwrap().exec.sandbox.network.mode,
        NetworkMode::Proxy
    );
    assert_eq!(
        read("network = false").unwrap().exec.sandbox.network.mode,
        NetworkMode::None
    );
    assert_eq!(
        read("network = \"host\"")
            .unwrap()
            .exec
            .sandbox
            .network
            .mode,
        NetworkMode::Host
    );
    let table =
        read("[exec.sandbox.network]\ndefault = \"deny\"\nallow = [\"*.crates.io\"]").unwrap();
    let network = table.exec.sandbox.network;
    assert_eq!(
        (network.mode, network.default),
        (NetworkMode::Proxy, NetworkDefault::Deny)
    );
    assert_eq!(network.allow, ["*.crates.io"]);
    for bad in [
        "network = \"wifi\"",
        "network = 3",
        "[exec.sandbox.network]\nmode = \"x\"",
        "[exec.sandbox.network]\nallowed = []",
    ] {
        let err = read(bad).unwrap_err().to_string();
        assert!(
            err.contains("network") || err.contains("allowed") || err.contains("variant"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn documented_default_file_matches_built_in_defaults() {
    let text = include_str!("../../config/dsh.toml");
    let c = Config::from_toml(text, Path::new("config/dsh.toml")).unwrap();
    let d = Config::default();
    assert_eq!(c.exec.default_timeout_ms, d.exec.default_timeout_ms);
    assert_eq!(c.exec.max_timeout_ms, d.exec.max_timeout_ms);
    assert_eq!(c.exec.max_output_bytes, d.exec.max_output_bytes);
    assert_eq!(c.exec.finished_output_bytes, d.exec.finished_output_bytes);
    assert_eq!(c.exec.kill_grace_ms, d.exec.kill_grace_ms);
    assert_eq!(c.exec.drain_ms, d.exec.drain_ms);
    assert_eq!(c.exec.kind, d.exec.kind);
    assert_eq!(c.permissions.default_mode, d.permissions.default_mode);
    assert_eq!(
        c.permissions.read_only_commands,
        d.permissions.read_only_commands
    );
    assert!(c.permissions.rules.is_empty() && c.hooks.command.is_empty());
    assert!(c.permissions.tests.is_empty());
    assert_eq!(c.model.base_url, d.model.base_url);
    assert_eq!(c.model.model, d.model.model);
    assert_eq!(c.model.api_key_env, d.model.api_key_env);
    assert_eq!(c.model.max_retries, d.model.max_retries);
    assert_eq!(c.model.retry_base_ms, d.model.retry_base_ms);
    assert_eq!(c.model.connect_timeout_ms, d.model.connect_timeout_ms);
    assert_eq!(c.model.idle_timeout_ms, d.model.idle_timeout_ms);
    assert_eq!(c.agent.max_steps, d.agent.max_steps);
    assert_eq!(c.agent.system_prompt_mode, d.agent.system_prompt_mode);
    assert_eq!(c.agent.history_budget_chars, d.agent.history_budget_chars);
    assert_eq!(c.agent.titles, d.agent.titles);
    assert_eq!(c.model.vision, d.model.vision);
    let (cs, ds) = (&c.exec.sandbox, &d.exec.sandbox);
    assert_eq!(
        (&cs.bwrap, &cs.network, &cs.writable),
        (&ds.bwrap, &ds.network, &ds.writable)
    );
    assert_eq!(
        (
            &cs.deny_read,
            cs.allow_unix_sockets,
            cs.allow_git_config,
            cs.allow_home_root
        ),
        (
            &ds.deny_read,
            ds.allow_unix_sockets,
            ds.allow_git_config,
            ds.allow_home_root
        )
    );
    let (cs, ds) = (&c.exec.ssh, &d.exec.ssh);
    assert_eq!((&cs.host, cs.port, &cs.user), (&ds.host, ds.port, &ds.user));
    assert_eq!(cs.identity_file, ds.identity_file);
    assert_eq!(
        (cs.known_hosts, &cs.known_hosts_file),
        (ds.known_hosts, &ds.known_hosts_file)
    );
    assert_eq!(cs.connect_timeout_ms, ds.connect_timeout_ms);
    assert_eq!((&cs.path_map, &cs.ssh), (&ds.path_map, &ds.ssh));
    assert_eq!((cs.helper, &cs.helper_dir), (ds.helper, &ds.helper_dir));
    assert_eq!(cs.sandbox, ds.sandbox);
}

#[test]
fn executor_kinds_and_their_sections_parse() {
    let text = r#"
        [exec]
        kind = "ssh"
        [exec.ssh]
        host = "build.example"
        port = 2222
        known_hosts = "accept-new"
        [[exec.ssh.path_map]]
        local = "/home/me/src"
        remote = "/srv/src"
        [exec.sandbox]
        network = true
        writable = ["/var/cache/me"]
    "#;
    let c = Config::from_toml(text, Path::new("x.toml")).unwrap();
    assert_eq!(c.exec.kind, ExecutorKind::Ssh);
    assert_eq!(c.exec.ssh.port, 2222);
    assert_eq!(c.exec.ssh.known_hosts.ssh_option(), "accept-new");
    assert_eq!(c.exec.ssh.path_map[0].remote, PathBuf::from("/srv/src"));
    assert_eq!(c.exec.sandbox.network.mode, NetworkMode::Host);
    let err = Config::from_toml("[exec]\nkind = \"ssh\"\n", Path::new("x.toml")).unwrap_err();
    assert!(err.to_string().contains("exec.ssh.host"), "{err}");
}

#[test]
fn rules_and_hooks_parse() {
    let text = r#"
        [exec]
        kind = "none"
        [permissions]
        default_mode = "read-only"
        [[permissions.rules]]
        tool = "bash"
        command = "git status"
        action = "allow"
        [[hooks.command]]
        argv = ["/bin/true"]
    "#;
    let c = Config::from_toml(text, Path::new("x.toml")).unwrap();
    assert_eq!(c.exec.kind, ExecutorKind::None);
    assert_eq!(c.permissions.default_mode, Mode::ReadOnly);
    assert_eq!(c.permissions.rules[0].action, Decision::Allow);
    assert_eq!(c.hooks.command[0].timeout_ms, 5000);
}

/// A config with something in every list: rules (with and without command and
/// examples), policy tests, hooks, ssh path maps, optional paths set.
const FULL: &str = r#"
    [exec]
    kind = "ssh"
    cwd = "/home/me/work"
    [exec.ssh]
    host = "build.example"
    user = "me"
    identity_file = "/home/me/.ssh/id_ed25519"
    known_hosts = "accept-new"
    [[exec.ssh.path_map]]
    local = "/home/me/src"
    remote = "/srv/src"
    [[exec.ssh.path_map]]
    local = "/home/me/other"
    remote = "/srv/other"
    [exec.sandbox]
    writable = ["/var/cache/me"]
    [permissions]
    default_mode = "read-only"
    read_only_commands = ["ls", "git status"]
    [[permissions.rules]]
    tool = "bash"
    command = "git status"
    action = "allow"
    examples = ["git status", "git status --short"]
    not_examples = ["git stash"]
    [[permissions.rules]]
    tool = "*"
    action = "ask"
    [[permissions.tests]]
    command = "rm -rf /"
    expect = "deny"
    [[permissions.tests]]
    command = "ls"
    mode = "auto"
    expect = "allow"
    [[hooks.command]]
    argv = ["/bin/true", "--x"]
    tools = ["bash"]
    [[hooks.command]]
    argv = ["/bin/false"]
    timeout_ms = 7
    [model]
    base_url = "http://localhost:8000/v1"
    [agent]
    system_prompt_file = "/etc/dsh/prompt.md"
    system_prompt_mode = "replace"
"#;

/// Parses `c.to_toml()` back and checks it renders identically (every field is
/// serialized, so equal renderings mean equal configs, origins aside).
fn round_trip(c: &Config) -> Config {
    let text = c.to_toml().unwrap();
    let back = Config::from_toml(&text, Path::new("rendered.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back.to_toml().unwrap(), text);
    back
}

#[test]
fn defaults_render_as_toml_that_parses_back() {
    let d = Config::default();
    let back = round_trip(&d);
    assert_eq!(back.exec.kind, ExecutorKind::Local);
    assert_eq!(back.exec.state_dir, None);
    assert_eq!(
        back.permissions.read_only_commands,
        d.permissions.read_only_commands
    );
    assert!(back.permissions.rules.is_empty() && back.permissions.tests.is_empty());
    assert_eq!(back.model.base_url, d.model.base_url);
    // The documented file is the defaults: it renders the same.
    let doc = Config::from_toml(
        include_str!("../../config/dsh.toml"),
        Path::new("config/dsh.toml"),
    )
    .unwrap();
    assert_eq!(doc.to_toml().unwrap(), d.to_toml().unwrap());
}

#[test]
fn a_full_config_renders_as_toml_that_parses_back() {
    let c = Config::from_toml(FULL, Path::new("full.toml")).unwrap();
    let text = c.to_toml().unwrap();
    let back = round_trip(&c);
    // Enums are written with the names they are read with.
    for line in [
        "kind = \"ssh\"",
        "known_hosts = \"accept-new\"",
        "default_mode = \"read-only\"",
        "system_prompt_mode = \"replace\"",
        "expect = \"deny\"",
        "mode = \"auto\"",
    ] {
        assert!(text.lines().any(|l| l.trim() == line), "{line}\n{text}");
    }
    // Origins are not keys.
    assert!(!text.contains("origin"), "{text}");
    let strip = |rules: &[PermissionRule]| {
        rules
            .iter()
            .map(|r| PermissionRule {
                origin: None,
                ..r.clone()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&back.permissions.rules), strip(&c.permissions.rules));
    let rule = &back.permissions.rules[0];
    assert_eq!(rule.examples, ["git status", "git status --short"]);
    assert_eq!(rule.not_examples, ["git stash"]);
    let star = &back.permissions.rules[1];
    assert_eq!(
        (star.command.as_deref(), star.action),
        (None, Decision::Ask)
    );
    assert!(star.examples.is_empty() && star.not_examples.is_empty());
    let tests: Vec<_> = back
        .permissions
        .tests
        .iter()
        .map(|t| (t.command.as_str(), t.mode, t.expect))
        .collect();
    assert_eq!(
        tests,
        [
            ("rm -rf /", Mode::Ask, Decision::Deny),
            ("ls", Mode::Auto, Decision::Allow)
        ]
    );
    assert_eq!(back.hooks.command, c.hooks.command);
    assert_eq!(back.hooks.command[1].timeout_ms, 7);
    assert_eq!(back.exec.ssh.path_map, c.exec.ssh.path_map);
    assert_eq!(back.exec.ssh.user.as_deref(), Some("me"));
    assert_eq!(back.exec.cwd, Some(PathBuf::from("/home/me/work")));
    assert_eq!(
        back.agent.system_prompt_file,
        Some(PathBuf::from("/etc/dsh/prompt.md"))
    );
}

#[test]
fn origins_point_at_headers_and_inline_tables() {
    // Line numbers are 1-based; the raw string starts with a newline, so its first
    // line is empty.
    let text = r#"
[permissions]
default_mode = "ask"

[[permissions.rules]]
# a comment between header and keys

tool = "bash"
command = "rm"
action = "deny"

[[ permissions . rules ]]
tool = "*"
action = "ask"
[[permissions.tests]]
command = "rm -rf /"
expect = "deny"
"#;
    let c = Config::from_toml(text, Path::new("/etc/dsh.toml")).unwrap();
    let origins: Vec<_> = c
        .permissions
        .rules
        .iter()
        .map(|r| r.origin.as_deref())
        .collect();
    assert_eq!(origins, [Some("/etc/dsh.toml:5"), Some("/etc/dsh.toml:12")]);
    assert_eq!(
        c.permissions.tests[0].origin.as_deref(),
        Some("/etc/dsh.toml:15")
    );

    let inline = "[permissions]\n\
                  tests = [{ command = \"ls\", expect = \"allow\" }]\n\
                  rules = [\n\
                  \x20 { tool = \"bash\", action = \"allow\" },\n\
                  \n\
                  \x20 { tool = \"*\", action = \"deny\" },\n\
                  ]\n";
    let c = Config::from_toml(inline, Path::new("x.toml")).unwrap();
    let origins: Vec<_> = c
        .permissions
        .rules
        .iter()
        .map(|r| r.origin.as_deref())
        .collect();
    assert_eq!(origins, [Some("x.toml:4"), Some("x.toml:6")]);
    assert_eq!(c.permissions.tests[0].origin.as_deref(), Some("x.toml:2"));

    // Built in code and by default: no origin.
    assert_eq!(PermissionRule::default().origin, None);
    assert!(Config::default().permissions.rules.is_empty());
}

#[test]
fn documented_permission_examples_parse() {
    // The commented-out `[[permissions.*]]` examples of config/dsh.toml, uncommented
    // and appended to the file.
    let doc = include_str!("../../config/dsh.toml");
    let mut text = doc.to_string();
    let mut inside = false;
    for line in doc.lines() {
        inside = line.starts_with("# [[permissions.") || (inside && line.starts_with("# "));
        if inside {
            text.push_str(&line[2..]);
            text.push('\n');
        }
    }
    let c = Config::from_toml(&text, Path::new("dsh.toml")).unwrap();
    let p = &c.permissions;
    assert_eq!((p.rules.len(), p.tests.len()), (4, 2));
    assert_eq!(p.rules[2].path.as_deref(), Some("secrets/**"));
    // E10: the network rule's host and port, and its examples hold.
    assert_eq!(
        (p.rules[3].host.as_deref(), p.rules[3].port),
        (Some("*.crates.io"), Some(443))
    );
    assert_eq!(crate::policy::check_config(p), []);
    assert!(!p.rules[0].examples.is_empty() && !p.rules[0].not_examples.is_empty());
    assert_eq!(p.tests[0].mode, Mode::Auto);
    let header = doc.lines().count() + 1;
    assert_eq!(p.rules[0].origin, Some(format!("dsh.toml:{header}")));
}

#[test]
fn policy_tests_default_to_ask_mode_and_reject_unknown_keys() {
    let text = "[[permissions.tests]]\ncommand = \"ls\"\nexpect = \"ask\"\n";
    let c = Config::from_toml(text, Path::new("x.toml")).unwrap();
    assert_eq!(c.permissions.tests[0].mode, Mode::Ask);
    assert_eq!(c.permissions.tests[0].expect, Decision::Ask);
    let err = Config::from_toml(&format!("{text}extra = 1\n"), Path::new("x.toml")).unwrap_err();
    assert!(err.to_string().contains("extra"), "{err}");
    // `origin` is not a key a file can set.
    let err = Config::from_toml(
        "[[permissions.rules]]\ntool = \"bash\"\naction = \"deny\"\norigin = \"a:1\"\n",
        Path::new("x.toml"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("origin"), "{err}");
    let err = Config::from_toml(
        "[[permissions.tests]]\ncommand = \"ls\"\n",
        Path::new("x.toml"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("expect"), "{err}");
}

#[test]
fn decisions_combine_deny_over_ask_over_allow() {
    use Decision::*;
    assert_eq!([Allow, Ask, Allow].into_iter().max(), Some(Ask));
    assert_eq!([Ask, Deny, Allow].into_iter().max(), Some(Deny));
}

#[test]
fn unknown_key_is_an_error() {
    let err = Config::from_toml("[exec]\ntimeout = 3\n", Path::new("x.toml")).unwrap_err();
    assert!(err.to_string().contains("timeout"), "{err}");
}

#[test]
fn relative_cwd_is_rejected() {
    let err = Config::from_toml("[exec]\ncwd = \"rel\"\n", Path::new("x.toml")).unwrap_err();
    assert!(err.to_string().contains("absolute"), "{err}");
}
