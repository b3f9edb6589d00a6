//! The judge's tests: decisions of whole calls under rules, modes and grants.

use super::*;
use crate::config::PermissionRule;
use Decision::{Allow, Ask, Deny};
use serde_json::json;
use std::path::{Path, PathBuf};

fn rule(tool: &str, command: Option<&str>, action: Decision) -> PermissionRule {
    PermissionRule {
        tool: tool.into(),
        command: command.map(str::to_owned),
        action,
        ..PermissionRule::default()
    }
}

/// A policy with `rules` for bash (`None` command: tool-wide) and the default read-only list.
fn policy(rules: &[(Option<&str>, Decision)]) -> Policy {
    Policy::new(&PermissionsConfig {
        rules: rules.iter().map(|(c, a)| rule("bash", *c, *a)).collect(),
        ..PermissionsConfig::default()
    })
}

fn bash(policy: &Policy, command: &str, mode: Mode) -> Judgement {
    policy.judge("bash", &json!({ "command": command }), mode, &[])
}

fn bash_with(policy: &Policy, command: &str, mode: Mode, grants: &[Grant]) -> Judgement {
    policy.judge(
        "bash",
        &json!({ "command": command, "timeout": 5 }),
        mode,
        grants,
    )
}

fn grant(words: &[&str]) -> Grant {
    Grant::Command(words.iter().map(|w| w.to_string()).collect())
}

#[test]
fn a_rule_prefix_matches_whole_words() {
    let p = policy(&[(Some("git status"), Allow)]);
    assert_eq!(bash(&p, "git status", Mode::Ask).decision, Allow);
    assert_eq!(bash(&p, "git status --short", Mode::Ask).decision, Allow);
    assert_eq!(bash(&p, "git statusx", Mode::Ask).decision, Ask);
    assert_eq!(bash(&p, "git", Mode::Ask).decision, Ask);
    assert_eq!(bash(&p, "git  'status'", Mode::Ask).decision, Allow);
}

#[test]
fn a_star_in_a_rule_matches_any_one_word() {
    let p = policy(&[(Some("git * --force"), Deny)]);
    assert_eq!(bash(&p, "git push --force", Mode::Auto).decision, Deny);
    assert_eq!(
        bash(&p, "git push origin --force", Mode::Auto).decision,
        Allow
    );
    let p = policy(&[(Some("*"), Allow)]);
    assert_eq!(bash(&p, "anything at all", Mode::Ask).decision, Allow);
}

#[test]
fn a_rule_without_command_covers_every_bash_call() {
    let p = policy(&[(None, Allow)]);
    assert_eq!(bash(&p, "rm -rf build", Mode::Ask).decision, Allow);
    // P5: what cannot be known is never allowed by a rule, even one for every call.
    assert_eq!(bash(&p, "$CMD foo", Mode::Ask).decision, Ask);
    let p = Policy::new(&PermissionsConfig {
        rules: vec![rule("*", None, Ask)],
        ..PermissionsConfig::default()
    });
    assert_eq!(bash(&p, "ls", Mode::Auto).decision, Ask);
    // A prefix rule for another tool does not apply to bash.
    let p = Policy::new(&PermissionsConfig {
        rules: vec![rule("bash_output", Some("ls"), Deny)],
        ..PermissionsConfig::default()
    });
    assert_eq!(bash(&p, "ls", Mode::Auto).decision, Allow);
}

#[test]
fn every_segment_of_a_compound_command_is_judged() {
    let p = policy(&[(Some("git status"), Allow)]);
    let j = bash(&p, "git status && rm -rf build", Mode::Ask);
    assert_eq!(j.decision, Ask);
    assert_eq!(j.reason, "no rule matches `rm -rf build` (mode ask)");
    assert_eq!(j.grants_on_allow_always, [grant(&["rm"])]);

    let p = policy(&[(Some("git status"), Allow), (Some("rm"), Deny)]);
    let j = bash(&p, "git status && rm -rf build", Mode::Ask);
    assert_eq!(j.decision, Deny);
    assert_eq!(j.reason, "rule bash `rm` (deny) matches `rm -rf build`");
    assert!(j.grants_on_allow_always.is_empty());
}

#[test]
fn pipes_background_subshells_and_groups_are_all_judged() {
    let p = policy(&[(Some("ls"), Allow), (Some("rm"), Deny)]);
    for command in [
        "ls | rm x",
        "ls & rm x",
        "(ls; rm x)",
        "{ ls; rm x; }",
        "ls; if true; then rm x; fi",
        "for f in a; do rm $f; done",
    ] {
        assert_eq!(bash(&p, command, Mode::Auto).decision, Deny, "{command}");
    }
}

#[test]
fn a_substitution_is_judged_apart_from_its_command() {
    let p = policy(&[(Some("ls"), Allow)]);
    let j = bash(&p, "ls $(rm -rf x)", Mode::Ask);
    assert_eq!(j.decision, Ask);
    assert!(j.reason.contains("`rm -rf x`"), "{}", j.reason);
    let p = policy(&[(Some("ls"), Allow), (Some("rm"), Deny)]);
    for command in [
        "ls $(rm -rf x)",
        "ls `rm -rf x`",
        "ls $(echo $(rm -rf x))",
        "X=$(rm -rf x) ls",
        "ls > \"$(rm -rf x)\"",
        "ls \"${y:-$(rm -rf x)}\"",
        "for f in $(rm -rf x); do ls; done",
    ] {
        assert_eq!(bash(&p, command, Mode::Auto).decision, Deny, "{command}");
    }
}

#[test]
fn wrapped_commands_meet_the_rules_for_what_they_run() {
    let p = policy(&[(Some("rm"), Deny)]);
    for command in [
        "sudo rm -rf /",
        "bash -c 'rm -rf /'",
        "sh -c \"cd /tmp && rm -rf x\"",
        "env FOO=1 rm x",
        "timeout 5 rm x",
        "xargs rm",
        "find . -exec rm {} \\;",
        "eval 'rm x'",
        "nice -n 10 nohup rm x",
        "/bin/rm -rf /",
        "\\rm x",
        "trap 'rm x' EXIT",
        "trap -- 'ls; rm x' INT TERM",
    ] {
        let j = bash(&p, command, Mode::Auto);
        assert_eq!(j.decision, Deny, "{command}: {}", j.reason);
        assert!(
            j.reason.starts_with("rule bash `rm` (deny) matches `"),
            "{}",
            j.reason
        );
    }
}

#[test]
fn allow_rules_match_the_exact_command_name() {
    // `./ls` is not the `ls` an allow rule means; a deny rule for `rm` still catches `/bin/rm`.
    let p = policy(&[(Some("ls"), Allow)]);
    assert_eq!(bash(&p, "./ls", Mode::Ask).decision, Ask);
    assert_eq!(bash(&p, "/usr/bin/ls", Mode::Ask).decision, Ask);
    let p = policy(&[(Some("/bin/rm"), Deny)]);
    assert_eq!(bash(&p, "rm x", Mode::Auto).decision, Allow);
    assert_eq!(bash(&p, "/bin/rm x", Mode::Auto).decision, Deny);
}

#[test]
fn modes_decide_what_no_rule_matches() {
    let p = policy(&[]);
    let j = bash(&p, "curl example.com", Mode::Ask);
    assert_eq!(j.decision, Ask);
    assert_eq!(j.reason, "no rule matches `curl example.com` (mode ask)");
    assert_eq!(j.grants_on_allow_always, [grant(&["curl"])]);
    let j = bash(&p, "curl example.com", Mode::Auto);
    assert_eq!(j.decision, Allow);
    assert_eq!(j.reason, "no rule matches `curl example.com` (mode auto)");
    assert!(j.grants_on_allow_always.is_empty());
    // Deny rules still veto in auto mode.
    let p = policy(&[(Some("curl"), Deny)]);
    assert_eq!(bash(&p, "curl example.com", Mode::Auto).decision, Deny);
}

#[test]
fn the_strongest_matching_rule_wins() {
    let p = policy(&[(Some("git"), Allow), (Some("git push"), Ask), (None, Allow)]);
    let j = bash(&p, "git push", Mode::Auto);
    assert_eq!(j.decision, Ask);
    assert_eq!(j.reason, "rule bash `git push` (ask) matches `git push`");
    // An ask a rule insists on offers nothing to grant: a grant could not lift it.
    assert!(j.grants_on_allow_always.is_empty());
    assert_eq!(bash(&p, "git log", Mode::Ask).decision, Allow);
}

#[test]
fn a_dynamic_command_name_is_matched_only_by_tool_wide_rules() {
    let p = policy(&[(Some("*"), Allow), (Some("$CMD"), Allow)]);
    let j = bash(&p, "$CMD foo", Mode::Ask);
    assert_eq!(j.decision, Ask);
    assert!(
        j.reason.contains("cannot be known before it runs"),
        "{}",
        j.reason
    );
    assert!(j.grants_on_allow_always.is_empty());
    assert_eq!(bash(&p, "$CMD foo", Mode::ReadOnly).decision, Deny);
    let j = bash_with(&p, "$CMD foo", Mode::Ask, &[grant(&["$CMD"])]);
    assert_eq!(j.decision, Ask);
    let p = policy(&[(None, Deny)]);
    assert_eq!(bash(&p, "$CMD foo", Mode::Auto).decision, Deny);
}

/// P5: an opaque segment is asked in auto mode too, and a deny rule whose words it
/// holds literally denies it.
#[test]
fn p5_in_auto_mode_an_opaque_segment_is_asked_and_a_literal_deny_denies() {
    for p in [policy(&[]), policy(&[(Some("ls"), Allow)])] {
        let j = bash(&p, "$CMD foo", Mode::Auto);
        assert_eq!(j.decision, Ask);
        assert!(matches!(j.cause, Cause::Opaque { .. }), "{:?}", j.cause);
    }
    let p = policy(&[(Some("rm"), Deny)]);
    let j = bash(&p, "$(echo r''m) -rf /", Mode::Auto);
    assert_eq!(j.decision, Ask);
    assert!(j.reason.contains("cannot be known"), "{}", j.reason);
    assert_eq!(bash(&p, "$(echo rm) -rf /", Mode::Auto).decision, Deny);
    assert!(j.grants_on_allow_always.is_empty());
    let j = bash(&p, "$X rm -rf /", Mode::Auto);
    assert_eq!(j.decision, Deny, "{}", j.reason);
    assert!(
        matches!(j.cause, Cause::Rule { index: 0, .. }),
        "{:?}",
        j.cause
    );
    assert_eq!(
        bash(&p, "bash -c \"$X; rm -rf /\"", Mode::Auto).decision,
        Deny
    );
    assert_eq!(
        bash(&p, "echo 'unclosed; /bin/rm x", Mode::Auto).decision,
        Deny
    );
    assert_eq!(bash(&p, "source ./env.sh", Mode::Auto).decision, Ask);
}

/// P6: a program that is not a known wrapper, given what a deny rule names as an
/// argument, is asked about in auto mode (it may run it).
#[test]
fn p6_an_unknown_wrappers_argument_naming_a_denied_command_is_asked() {
    let p = policy(&[(Some("rm"), Deny), (Some("lockrun"), Allow)]);
    for line in ["lockrun f rm x", "lockrun f /bin/rm x"] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
        assert!(
            matches!(j.cause, Cause::UnknownWrapper { index: 0, .. }),
            "{:?}",
            j.cause
        );
        assert!(j.grants_on_allow_always.is_empty());
    }
    // A known wrapper's command is judged itself, and so is a row's (P3b).
    assert_eq!(bash(&p, "nice rm x", Mode::Auto).decision, Deny);
    assert_eq!(bash(&p, "parallel rm ::: x", Mode::Auto).decision, Deny);
    assert_eq!(bash(&p, "ls -l", Mode::Auto).decision, Allow);
}

/// P3b: a command in an option, config key, argument or environment variable that the
/// program runs is judged as the command line it is; a deny inside denies, and the
/// chain names the place.
#[test]
fn p3b_commands_in_options_config_and_environment_are_judged() {
    let p = policy(&[(Some("rm"), Deny)]);
    for (line, chain) in [
        (
            "tar -xf a.tar --to-command='rm x'",
            "tar --to-command -> rm",
        ),
        ("tar -I 'rm x' -cf a.tar f", "tar -I -> rm"),
        (
            "git -c core.fsmonitor='rm x' status",
            "git -c core.fsmonitor -> rm",
        ),
        ("git -c alias.x='!rm x' x", "git -c alias.x -> rm"),
        (
            "git -c diff.external='rm x' diff",
            "git -c diff.external -> rm",
        ),
        (
            "ssh -o ProxyCommand='rm x' host",
            "ssh -o proxycommand -> rm",
        ),
        ("tmux new -d 'rm x'", "tmux new-session -> rm"),
        ("rsync -e 'rm x' a h:b", "rsync -e -> rm"),
        (
            "GIT_SSH_COMMAND='rm x' git fetch",
            "env GIT_SSH_COMMAND -> rm",
        ),
        ("env PAGER='rm x' git log", "env PAGER -> rm"),
        ("LESSOPEN='|rm x %s' less f", "env LESSOPEN -> rm"),
        ("sudo EDITOR='rm x' visudo", "sudo -> env EDITOR -> rm"),
        (
            "timeout 5 tar --to-c 'rm x' -xf a",
            "timeout -> tar --to-command -> rm",
        ),
        (
            "git -c core.pager='nice rm x' log",
            "git -c core.pager -> nice -> rm",
        ),
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Deny, "{line}: {}", j.reason);
        assert!(
            j.segments
                .iter()
                .any(|s| s.decision == Deny && s.chain() == chain),
            "{line}: {:?}",
            j.segments.iter().map(|s| s.chain()).collect::<Vec<_>>()
        );
    }
    // A file of commands is opaque: asked in auto, denied in read-only.
    for line in [
        "ssh -F ./cfg host",
        "BASH_ENV=./x bash -c :",
        "git -c core.hooksPath=h commit",
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, Ask, "{line}");
        assert_eq!(bash(&p, line, Mode::ReadOnly).decision, Deny, "{line}");
    }
    // Messages and data run nothing.
    for line in [
        "git commit -m 'rm old files'",
        "grep 'rm -rf' notes.md",
        "echo 'rm x'",
        "git -c user.name='rm x' commit -m x",
        "tar -czf a.tgz src",
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
    }
}

/// P3b's safety net: for a program with no row, an argument that parses as a command
/// line naming a denied command is asked about; anything else is not.
#[test]
fn p3b_an_unknown_programs_argument_holding_a_denied_command_line_is_asked() {
    let p = policy(&[(Some("rm"), Deny)]);
    for line in [
        "lockrun --cmd='rm x'",
        "mytool run 'cd /tmp && rm -rf x'",
        "daemonize -c 'nice rm x'",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
        assert!(
            matches!(j.cause, Cause::CommandInArgument { index: 0, .. }),
            "{line}: {:?}",
            j.cause
        );
    }
    for line in [
        "mytool 'rmdir x'",
        "mytool 'perform x'",
        "mytool --name='a b'",
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
    }
    // Without a deny rule there is nothing to look for.
    let open = policy(&[]);
    assert_eq!(bash(&open, "mytool 'rm x'", Mode::Auto).decision, Allow);
}

/// P8: inline code is read: a deny rule's words in it deny; a shell call without them
/// asks in auto when a deny rule exists; a script file is judged by its name only.
#[test]
fn p8_inline_code_is_read_for_denied_words_and_shell_calls() {
    let p = policy(&[(Some("rm"), Deny)]);
    for line in [
        "python3 -c \"import os; os.system('rm x')\"",
        "perl -e 'system(\"rm x\")'",
        "node -e \"require('child_process').execSync('rm x')\"",
        "ruby -e '`rm x`'",
        "awk 'BEGIN{system(\"rm x\")}'",
        "sed 's/.*/rm x/e' f",
        "timeout 5 python3 -c 'import subprocess; subprocess.run([\"rm\", \"x\"])'",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Deny, "{line}: {}", j.reason);
        assert!(
            j.segments.iter().any(|s| matches!(
                &s.cause,
                Cause::InlineCode { rule: Some(r), .. } if r.index == 0
            )),
            "{line}"
        );
    }
    for line in [
        "python3 -c 'import os; os.rmdir(\"x\")'",
        "python3 -c 'import os; os.system(\"ls\")'",
        "awk 'BEGIN{system(\"ls\")}'",
        "sed '1e date' f",
        "perl -e 'print `date`'",
        "fish -c 'echo hi'",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
    }
    for line in [
        "python3 -c 'print(1)'",
        "awk '{print $1}' f",
        "sed -i 's/rm/del/g' f",
        "python3 x.py",
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
    }
    // No deny rule: a shell call is the mode's to decide.
    let open = policy(&[]);
    assert_eq!(
        bash(&open, "awk 'BEGIN{system(\"ls\")}'", Mode::Auto).decision,
        Allow
    );
}

/// P8 (issue 41): code is allowed only when shown harmless; anything else is opaque:
/// asked in auto under a deny or an ask rule, refused in read-only, denied when a deny
/// rule's words stand in it; code fed on stdin by the line is code too.
#[test]
fn p8_code_not_shown_harmless_is_opaque_in_every_spelling() {
    let p = policy(&[(Some("rm"), Deny)]);
    for line in [
        "python3 -c \"import os; getattr(os, 'sys'+'tem')('r'+'m c')\"",
        "node -pe \"require('chi'+'ld_process')\"",
        "perl <<< 'use IPC::Open3; open3(0, 0, 0, qw(r m))'",
        "python3 - <<'EOF'\nimport os\nos.system('ls')\nEOF",
        "echo 'print(1)' | python3",
        "awk -v c=ls 'BEGIN{x = 4/2; print 1 | c; y = 1/2}'",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
        assert!(
            j.segments
                .iter()
                .any(|s| matches!(&s.cause, Cause::InlineCode { rule: None, .. })),
            "{line}: {:?}",
            j.cause
        );
        assert_eq!(bash(&p, line, Mode::ReadOnly).decision, Deny, "{line}");
    }
    // The words of the deny rule in code that is not shown harmless deny.
    for line in [
        "perl <<< 'system(\"rm c\")'",
        "busybox rm c",
        "sqlite3 :memory: '.shell r''m c'",
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, Deny, "{line}");
    }
    // Shown harmless: allowed in auto, fed on stdin or given on the line.
    for line in [
        "python3 - <<< 'import platform; print(platform.system())'",
        "node -e 'const n = 2; console.log(`n=${n}`)'",
        "awk 'BEGIN{FS=\"|\"} {print $2}' data.psv",
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
    }
    // An ask rule guards as a deny rule does; with no rule, auto allows.
    let asking = policy(&[(Some("curl"), Ask)]);
    let line = "python3 -c 'import os; os.system(\"curl x\")'";
    assert_eq!(bash(&asking, line, Mode::Auto).decision, Ask);
    assert_eq!(bash(&policy(&[]), line, Mode::Auto).decision, Allow);
    // A reader of the read-only list that runs a program is refused in read-only.
    assert_eq!(
        bash(&p, "rg --pre=touch x c", Mode::ReadOnly).decision,
        Deny
    );
}

/// P8 (issue 41): a variable that runs a command is judged by its value, the same
/// whether it prefixes the command, is exported earlier or set through `git -c`;
/// variables that run code by existing make the command unknown.
#[test]
fn p8_variables_are_judged_by_their_value() {
    let p = policy(&[(Some("rm"), Deny)]);
    for line in [
        "PAGER=cat git log -3",
        "export PAGER=cat; git log -3",
        "git -c core.pager=cat log -3",
        "GIT_EDITOR=true git commit -q --amend --allow-empty",
        "GIT_SSH_COMMAND='ssh -o BatchMode=yes' git ls-remote .",
        "MANPAGER=cat man ls",
        "CC=clang make",
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
    }
    for line in [
        "PAGER='rm c' git log",
        "export PAGER='rm c'; git log",
        "git -c core.pager='rm c' log",
        "RSYNC_CONNECT_PROG='rm c' rsync x::a .",
        "CC='rm c;:' make p",
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, Deny, "{line}");
    }
    for line in [
        "LUA_INIT='os.execute(\"ls\")' lua5.4 -e 1",
        "PERL5DB='BEGIN{system q(ls)}' perl -e 1",
        "PS0='$(ls)' bash -i",
        "MAKEFLAGS=--eval=x make",
        "GIT_ALLOW_PROTOCOL=ext git clone 'ext::sh -c ls' x",
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, Ask, "{line}");
    }
}

/// P8 (issue 41, brief 41b item 1): a variable exported for the commands after it
/// (`export`, `declare -x`, `typeset -x`, `readonly`, a bare `export X` of a value set
/// before) is judged as one set in front of a command: one not shown harmless is asked in
/// auto under a deny rule and refused in read-only (`Cause::Environment`); harmless ones,
/// those judged by their value and `PATH` extended at its end keep their decisions.
#[test]
fn p8_exported_variables_are_judged_as_prefixed_ones() {
    let p = policy(&[(Some("rm"), Deny)]);
    for line in [
        "export LUA_INIT='os.execute(\"ls\")'; lua5.4 -e 1",
        "export PERL5OPT=-Mx; perl -e 1",
        "declare -x PERL5DB='BEGIN{system q(ls)}'; perl -d -e 1",
        "typeset -rx TAR_OPTIONS=--to-command=ls; tar xf a.tar",
        "readonly LUA_INIT=x; lua5.4 -e 1",
        "FOO=bar; export FOO; make",
        "export PATH=./bin:$PATH; ls",
        "export FOO=bar; make",
    ] {
        let auto = bash(&p, line, Mode::Auto);
        assert_eq!(auto.decision, Ask, "{line}: {}", auto.reason);
        assert!(
            matches!(auto.cause, Cause::Environment { .. }),
            "{line}: {:?}",
            auto.cause
        );
        let read_only = bash(&p, line, Mode::ReadOnly);
        assert_eq!(read_only.decision, Deny, "{line}");
        assert!(
            matches!(read_only.cause, Cause::Environment { .. }),
            "{line}: {:?}",
            read_only.cause
        );
        // Without a deny or ask rule, auto allows what no rule names (P8).
        assert_eq!(
            bash(&policy(&[]), line, Mode::Auto).decision,
            Allow,
            "{line}"
        );
    }
    // The same variable in front of the command was asked already.
    assert_eq!(bash(&p, "FOO=bar make", Mode::Auto).decision, Ask);
    for line in [
        "export PATH=$PATH:$HOME/.local/bin",
        "export PATH=${PATH}:/opt/x/bin; make",
        "export RUST_BACKTRACE=1; cargo test",
        "export NODE_ENV=production && npm run build",
        "export PAGER=cat; git log -3",
        "declare -a x=(1 2); echo ${x[0]}",
        "declare FOO=bar; echo $FOO",
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
    }
    // In read-only, an exported trace file is a write of the commands after it.
    let j = bash(&p, "export GIT_TRACE2=$PWD/c; git log -1", Mode::ReadOnly);
    assert_eq!(j.decision, Deny);
    assert!(
        matches!(j.cause, Cause::Environment { .. }),
        "{:?}",
        j.cause
    );
}

/// P5, P8 (issue 41, brief 41b item 2): a program named by a path that an earlier segment
/// of the line may have written (`cp /bin/rm y && ./y c`, or a path handed to a program
/// without a row: `ln -s /bin/rm x; logsave /dev/null ./x c`) is opaque: asked under a
/// deny rule in auto. A path run with no write before it, or after a reader only, or
/// through a wrapper that is no write, keeps its decision.
#[test]
fn p5_a_program_the_line_may_have_written_is_opaque() {
    let p = policy(&[(Some("rm"), Deny)]);
    // The program's path comes from the environment (`SRC=/usr/bin/rm`), which the judge
    // reads as written: a value the line chose is read by value (issue 41) and asked
    // before this rule is reached.
    for line in [
        "cp \"$SRC\" y && ./y c",
        "ln -s \"$SRC\" x; logsave /dev/null ./x c",
        "install \"$SRC\" z; ./z c",
        "mv w v; ./v c",
        "cat \"$SRC\" > w; chmod +x w; ./w c",
        "cp \"$SRC\" /tmp/y; timeout 5 /tmp/y c",
        "bash -c 'cp \"$SRC\" y; ./y c'",
        "cargo build && ./target/debug/app",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
        assert!(
            matches!(j.cause, Cause::Opaque { .. }),
            "{line}: {:?}",
            j.cause
        );
        assert_eq!(
            bash(&policy(&[]), line, Mode::Auto).decision,
            Allow,
            "{line}"
        );
    }
    for line in [
        "./configure && make",
        "./gradlew build",
        "./x.sh",
        "timeout 60 ./gradlew build --no-daemon",
        "cd build && ../configure",
        "mkdir -p build && cd build && ../configure",
        "ls bin && ./bin/app",
        "cp a b && cat ./b",
        "make && cp ./a /tmp/b",
        "make && python3 ./tool.py",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Allow, "{line}: {}", j.reason);
    }
}

/// P5, P6, P8 (issue 41, round 3): the holes this round found are asked in auto under a
/// deny rule and refused in read-only; their everyday neighbours keep their decisions.
/// (The walk-around table shows each hole deleting a canary in plain bash first.)
#[test]
fn p5_p6_p8_issue_41_round_3_holes_are_asked_and_their_neighbours_are_not() {
    let p = policy(&[(Some("rm"), Deny)]);
    for line in [
        // A write that does not name what it makes, then a path an unknown program gets.
        "tar -xf a.tar; logsave /dev/null ./member c",
        "cp -r /tmp/tools d; logsave /dev/null d/x c",
        "make && foo build/x",
        // A standalone assignment the programs after it may inherit.
        "FOO=1; make",
        "VERSION=1; ./build.sh",
        "set -a; foo=1; make",
        "set -o allexport; foo=1; make",
        // env and sudo take any NAME=value: a function handed to bash.
        "env 'BASH_FUNC_f%%=() { ls; }' bash -c f",
        // An unknown program's literal argument: a command line that hides its name.
        "sem --fg 'x=r; ${x}m c'",
        "logsave /dev/null sh -c 'x=r; ${x}m c'",
        // Programs that run the code fed on their stdin.
        "erb <<< '<%= 1 %>'",
        "echo '<%= 1 %>' | erb",
        "erb -T - <(echo x)",
        "jshell <<< 'System.exit(0);'",
        "irb3.1 <<< 'puts 1'",
        "wish8.6 <<< 'exit'",
        // Not every ex command is a move.
        "vim -S startinsert",
        "LESS='+!ls' git log",
        "LESS='-o log' git log",
        // Code the line writes to a file, then a program that may run it.
        "printf 'x:\\n\\trm c\\n' > Makefile; make x",
        "printf '[alias]\\n\\tx = !rm c\\n' >> .git/config; git x",
        "tee x.sh <<< 'x=r; ${x}m c' > /dev/null; sh x.sh",
        "echo 'x:' > Makefile; echo \"\tr''m c\" >> Makefile; make x",
        "echo 'x:' > Makefile; printf '\\tn=r; $${n}m c\\n' >> Makefile; make x",
        // Code the shell builds when the line runs.
        "perl -e \"$(printf 'system(\\\"%s\\\")' 'ls')\"",
        "python3 -c \"$CODE\"",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
        assert_eq!(bash(&p, line, Mode::ReadOnly).decision, Deny, "{line}");
    }
    for line in [
        "make && cp ./a /tmp/b",
        "make && tar -czf out.tgz ./dist",
        "echo 'rm -rf is bad' > notes.txt",
        "echo hi > out.txt; cat out.txt",
        "python3 -c 'import sys; print(sys.argv[1])' \"$FILE\"",
        // After `--`: node reads options after its code (`node -e A -e B` runs B), so a
        // command's output right after the code could replace it (round 5).
        "node -e 'console.log(process.argv[1])' -- \"$(date)\"",
        "echo \"$VERSION\" > version.txt && git add version.txt",
        "x=1; echo $x",
        "VERSION=1; echo $VERSION",
        "FOO=1",
        "v=1; ./build.sh",
        "docker run --rm -v \"$PWD\":/src img",
        "jq --arg v 1 '.v = $v' f.json",
        "erb template.erb",
        "jshell script.jsh",
        "LESS=-R git log",
        "GIT_EDITOR='vim -c startinsert' git commit",
        "node -e 'console.log(new Date().getFullYear())'",
        "python3 -c 'import shutil; print(shutil.which(\"git\"))'",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Allow, "{line}: {}", j.reason);
    }
    // Read-only: a trace file named with no command is still a write for what follows.
    assert_eq!(
        bash(&p, "GIT_TRACE2=/tmp/t; git status", Mode::ReadOnly).decision,
        Deny
    );
    assert_eq!(bash(&p, "x=1; echo $x", Mode::ReadOnly).decision, Allow);
}

/// P8 (issue 41): code the line writes to a file and then runs with an interpreter is code
/// on the line, read as the interpreter's language by the reader inline code uses: asked
/// when not shown harmless, denied when a deny rule's words stand in it, allowed when shown
/// harmless. (The walk-around table shows each hole deleting a canary in plain bash first:
/// before this, all of these but the shell's were allowed in auto.)
#[test]
fn p8_issue_41_code_written_to_a_file_and_run_is_read_as_its_language() {
    let p = policy(&[(Some("rm"), Deny)]);
    let written = |j: &Judgement| {
        j.segments.iter().find_map(|s| match &s.cause {
            Cause::WrittenScript { language, rule, .. } => {
                Some((language.clone(), rule.as_ref().map(|r| r.index)))
            }
            _ => None,
        })
    };
    // Hidden names: asked, each read as its own language.
    for (line, language) in [
        (
            r#"printf 'import os\nos.system("r"+"m c")\n' > x.py; python3 x.py"#,
            "python",
        ),
        (
            r#"printf '%s\n' 'import os' 'os.system("r"+"m c")' > x.py; python3 x.py"#,
            "python",
        ),
        (
            "cat > x.py <<'E'\nimport os\nos.system('r'+'m c')\nE\npython3 x.py",
            "python",
        ),
        (
            r#"tee x.py <<< 'import os; os.system("r"+"m c")' > /dev/null; python3 -B x.py"#,
            "python",
        ),
        (r#"echo 'system("r"."m c")' > x.pl && perl x.pl"#, "perl"),
        (r#"echo 'system("r"+"m c")' > x.rb; ruby x.rb"#, "ruby"),
        (
            r#"echo 'require("child_"+"process").execSync("r"+"m c")' > x.js; node x.js"#,
            "javascript",
        ),
        (
            r#"echo '<?php system("r"."m c");' > x.php; php x.php"#,
            "php",
        ),
        (
            r#"echo 'os.execute("r".."m c")' > x.lua; lua5.4 x.lua"#,
            "lua",
        ),
        (
            r#"echo 'BEGIN{system("r" "m c")}' > p.awk; awk -f p.awk"#,
            "awk",
        ),
        // Java has no reader: never shown harmless.
        (
            "echo 'class X { public static void main(String[] a) {} }' > X.java; java X.java",
            "java",
        ),
        // Text the line does not show but hands the file, or changes before it runs.
        (
            "echo aW1wb3J0IG9z | base64 -d > x.py; python3 x.py",
            "python",
        ),
        ("base64 -d <<< aW1wb3J0IG9z > x.py; python3 x.py", "python"),
        (
            "echo 'print(1)' > x.py; sed -i 's/print/exec/' x.py; python3 x.py",
            "python",
        ),
        // A module or library the interpreter loads may be the file written.
        (
            r#"echo 'system("r"+"m c")' > x.rb; ruby -r./x -e 1"#,
            "ruby",
        ),
        (
            r#"echo 'require("child_"+"process").execSync("r"+"m c")' > x.js; node -r ./x.js -e 1"#,
            "javascript",
        ),
        (
            r#"echo 'os.execute("r".."m c")' > x.lua; lua5.4 -l x -e 1"#,
            "lua",
        ),
        (
            r#"echo 'import os; os.system("r"+"m c")' > x.py; python3 -m x"#,
            "python",
        ),
        // sed's script file, read as sed.
        (r#"echo '1e r""m c' > x.sed; sed -f x.sed f"#, "sed"),
        // Pieces appended apart, read as one file.
        (
            r#"echo -n 'import os; os.sys' > x.py; echo 'tem("r"+"m c")' >> x.py; python3 x.py"#,
            "python",
        ),
        // Written by a program fed by the line, not by a redirection.
        (
            r#"dd of=x.py <<< 'import os; os.system("r"+"m c")'; python3 x.py"#,
            "python",
        ),
        (
            r#"echo 'import os; os.system("r"+"m c")' | dd of=x.py; python3 x.py"#,
            "python",
        ),
        // A here-document that expands is no text the walk shows.
        (
            "cat > x.py <<E\nimport os; os.system(\"r\"+\"$(echo m) c\")\nE\npython3 x.py",
            "python",
        ),
        // Output sent to the file by `exec`, a process substitution, a group; escapes that
        // `shopt -s xpg_echo` decodes.
        (
            r#"exec 3> x.py; echo 'import os; os.system("r"+"m c")' >&3; python3 x.py"#,
            "python",
        ),
        (
            r#"echo 'import os; os.system("r"+"m c")' > >(cat > x.py); wait $!; python3 x.py"#,
            "python",
        ),
        (
            r#"shopt -s xpg_echo; echo 'print("\x22); import os; os.system("r"+"m c") #")' > x.py; python3 x.py"#,
            "python",
        ),
        (
            r#"{ echo 'import os'; echo 'os.system("r"+"m c")'; } > x.py; python3 x.py"#,
            "python",
        ),
        // Python's inline code imports from the cwd first; a program prints its code's or
        // its words' text into the file.
        (
            r#"echo 'import os; os.system("r"+"m c")' > json.py; python3 -c 'import json; print(1)'"#,
            "python",
        ),
        (
            r#"perl -e 'print "import os\nos.system(\"r\"+\"m c\")"' > x.py; python3 x.py"#,
            "python",
        ),
        (
            r#"jq -rn '"import os; os.system(\"r\"+\"m c\")"' > x.py; python3 x.py"#,
            "python",
        ),
        (
            r#"basename 'import os; os.system("r"+"m c")' > x.py; python3 x.py"#,
            "python",
        ),
        // An ini file php reads: its settings load code (no reader: asked).
        (
            r#"printf 'auto_prepend_file=p.php\n' > p.ini; php -c p.ini x.php"#,
            "php.ini",
        ),
        // A coding declaration turns a comment into code.
        (
            r"printf '# coding: utf-7\nx = 1 #+AAo-__import__(+ACI-os+ACI-).system(+ACI-r+ACI-+-+ACI-m c+ACI-)\n' > x.py; python3 x.py",
            "python",
        ),
        // `-x` skips lines the judge reads: a string to it is code to them.
        (
            r#"printf 'x = """\nimport os; os.system("r"+"m c") #"""\n' > x.py; python3 -x x.py"#,
            "python -x",
        ),
        (
            r#"printf '\x24x = q{\n#!perl\nsystem("r"."m c");\n__END__\n};\n' > x.pl; perl -x x.pl"#,
            "perl -x",
        ),
        // Other interpreters without a reader, handed a file.
        (
            "echo 'exec [string cat r m] c' > x.tcl; tclsh8.6 x.tcl",
            "tcl",
        ),
        (
            r#"echo 'new Deno.Command("r"+"m", {args: ["c"]}).outputSync()' > x.ts; deno run -A x.ts"#,
            "typescript",
        ),
        // A loop runs the write before the run the second time round.
        (
            r#"for i in 1 2; do python3 x.py; printf 'import os\nos.system("r"+"m c")\n' > x.py; done"#,
            "python",
        ),
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
        assert_eq!(
            written(&j),
            Some((language.to_owned(), None)),
            "{line}: {j:?}"
        );
        assert_eq!(bash(&p, line, Mode::ReadOnly).decision, Deny, "{line}");
    }
    // A path the line wrote is opaque already (`made_here.rs`), whatever its shebang says.
    let line = "printf '#!/usr/bin/env python3\\nimport os\\nos.system(\"r\"+\"m c\")\\n' > x; chmod +x x; ./x";
    assert_eq!(bash(&p, line, Mode::Auto).decision, Ask, "{line}");
    // A deny rule's words in the code written: denied, as in inline code. `printf` decodes
    // its escapes (`\x72m` is `rm`), and a shell script is read as a command line.
    for (line, language) in [
        (
            r#"echo "import os; os.system('rm c')" > x.py; python3 x.py"#,
            "python",
        ),
        (
            r#"printf 'import os\nos.system("\x72m c")\n' > x.py; python3 x.py"#,
            "python",
        ),
        (r#"echo -e 'system("\x72m c")' > x.pl; perl x.pl"#, "perl"),
        (
            "printf '#!/usr/bin/env python3\\nimport os\\nos.system(\"rm c\")\\n' > x; ./x",
            "python",
        ),
        (r#"echo 'r""m c' > x.sh; sh x.sh"#, "shell"),
        ("printf 'rm c\\n' > x; chmod +x x; ./x", "shell"),
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Deny, "{line}: {}", j.reason);
        assert_eq!(
            written(&j),
            Some((language.to_owned(), Some(0))),
            "{line}: {j:?}"
        );
    }
    // Neighbours: shown harmless in their language, or no program of a language runs them.
    for line in [
        "printf 'print(1)\\n' > x.py; python3 x.py",
        "echo '# notes' > README.md; git add README.md",
        "cat > x.json <<E\n{\"a\": 1}\nE\njq . x.json",
        "echo hello > out.txt && cat out.txt",
        "echo '# notes' > README.md; python3 build.py",
        "python3 gen.py > out.json; python3 check.py",
        "cat > x.js <<'E'\nconsole.log(JSON.stringify({a: 1}))\nE\nnode x.js",
        "echo 'print(\"hi\")' > x.lua; lua5.4 x.lua",
        "printf '%s\\n' 'puts 1' > x.rb; ruby x.rb",
        "echo 'BEGIN{print 1}' > p.awk; awk -f p.awk",
        "printf '<?php echo 1;\\n' > x.php; php x.php",
        "echo 'print(1)' > x.py; chmod +x x.py; python3 x.py",
        "make > build.log; python3 report.py",
        "sort data.txt > out.txt; python3 x.py",
        "cargo test > test.log; python3 x.py",
        "echo x > f; deno fmt",
        "echo 'a,b' > x.csv; python3 -c 'print(1 + 1)'",
        "echo hello > f; perl -lne 'print' f",
        "echo hello world > out.txt; awk '{print $1}' out.txt",
        "echo 's/a/b/' > x.sed; sed -f x.sed f.txt",
        "echo '{\"a\": 1}' > x.json && python3 -m json.tool x.json",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Allow, "{line}: {}", j.reason);
    }
}

/// P8 (issue 41): a line that names every file it writes, moves no text between names and
/// runs a script no write names (nor a module of its language) writes no code of that
/// script: the texts are not read as it (`judge/written/apart.rs`). Each of the spared
/// lines was asked before (`hello` is no harmless python). Anything unsure is read as
/// before: the caught lines, each shown running its code in plain bash (the walk-around
/// table, or by hand with the project file they assume: a `run.py` that runs its argument,
/// an `x.py` that imports `helper`).
#[test]
fn p8_issue_41_files_the_line_names_apart_from_the_script_it_runs() {
    let p = policy(&[(Some("rm"), Deny)]);
    let written = |j: &Judgement| {
        j.segments
            .iter()
            .any(|s| matches!(s.cause, Cause::WrittenScript { .. }))
    };
    for line in [
        "echo hello > out.txt; python3 x.py",
        "pytest tests/ > log; python3 x.py",
        "git diff > changes.patch; python3 apply.py",
        "echo done >> progress.log; python3 next.py",
        "git log --oneline -5 > recent.txt; python3 summarize.py",
        "echo hello > out.txt; ruby x.rb",
        "echo hello > out.txt; perl x.pl",
        "echo hello > out.txt; node build.js",
        "git status --short > status.txt; python3 x.py",
        "mkdir -p out && echo hi > out/log.txt && python3 x.py",
        "printf '%s\\n' a b c > list.txt && python3 x.py",
        "echo hello | tee out.txt; python3 x.py",
        "cat > notes.md <<'E'\nhello\nE\npython3 x.py",
        "echo hello > out.txt; python3 x.py out.json",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Allow, "{line}: {}", j.reason);
    }
    // `sh build.sh` is asked as the shell running a script file (P5), not for the write.
    let j = bash(&p, "ls > files.txt && sh build.sh", Mode::Auto);
    assert!(j.decision == Ask && !written(&j), "{j:?}");
    // A deny rule's words in a text no script runs: reading 1 asks (a program runs after
    // it, which may run the file), reading 2 no longer denies.
    let j = bash(
        &p,
        "echo 'rm old files' > TODO.txt; python3 x.py",
        Mode::Auto,
    );
    assert!(j.decision == Ask && !written(&j), "{j:?}");
    let hidden = r#"'import os; os.system("r"+"m c")'"#;
    let missed = [
        // The script's own name, however written.
        format!("printf {hidden} > ./x.py; python3 x.py"),
        format!("echo {hidden} > X.PY; python3 x.py"),
        format!("echo {hidden} >> x.py; python3 x.py"),
        format!("echo {hidden} > /tmp/x.py; python3 x.py"),
        format!("printf {hidden} > ./script; python3 script"),
        format!("echo {hidden} > SCRIPT; python3 script"),
        format!(r#"f=script; echo {hidden} > script; python3 "$f""#),
        format!("echo {hidden} | tee notes.txt x.py > /dev/null; python3 x.py"),
        format!("mkdir sub; cd sub; echo {hidden} > x.py; cd ..; python3 sub/x.py"),
        // A name the line does not show.
        format!(r#"f=x.py; echo {hidden} > "$f"; python3 x.py"#),
        format!("echo {hidden} > x.p*; python3 x.py"),
        format!("echo {hidden} > $(echo x.py); python3 x.py"),
        // Text moved between names, a link.
        format!("echo {hidden} > notes.txt; cp notes.txt y.py; python3 y.py"),
        format!("echo {hidden} > notes.txt; mv notes.txt y.py; python3 y.py"),
        format!("echo {hidden} > notes.txt; ln -s notes.txt y.py; python3 y.py"),
        format!("ln -s notes.txt y.py; echo {hidden} > notes.txt; python3 y.py"),
        format!("echo {hidden} > notes.txt; dd if=notes.txt of=y.py; python3 y.py"),
        format!("echo {hidden} > notes.txt; sed -n 'w y.py' notes.txt; python3 y.py"),
        format!("echo {hidden} > notes.txt; sort -o y.py notes.txt; python3 y.py"),
        // A reader made to move text by a configuration the line writes (`git diff` runs
        // `diff.external`).
        format!(
            r"printf '[diff]\n\texternal = sh -c \x27cp notes.txt y.py\x27\n' >> .git/config; echo {hidden} > notes.txt; git diff > d.txt; python3 y.py"
        ),
        format!("echo {hidden} > notes.txt; exec 3< notes.txt; python3 /dev/fd/3"),
        format!("echo {hidden} > notes.txt; python3 /dev/fd/3 3< notes.txt"),
        format!("echo {hidden} > notes.txt; python3 ../../../dev/fd/3 3< notes.txt"),
        // The script may run a file the run names, or load a module of its language.
        format!("echo {hidden} > notes.txt; python3 run.py notes.txt"),
        format!("echo {hidden} > notes.txt; python3 run.py --input=notes.txt"),
        format!("echo {hidden} > helper.py; python3 x.py"),
        format!("echo {hidden} > site.pth; python3 x.py"),
        format!("echo {hidden} > notes.txt; env -C sub python3 x.py"),
        // A wrapper, an expansion in the run, a module run.
        format!("echo {hidden} > notes.txt; timeout 5 python3 x.py"),
        format!(r#"echo {hidden} > notes.txt; python3 "$s""#),
        format!("echo {hidden} > notes.txt; python3 -m x"),
        // A loop, a function.
        format!("for i in 1; do echo {hidden} > notes.txt; cp notes.txt x.py; done; python3 x.py"),
        format!("f() {{ cp notes.txt x.py; }}; echo {hidden} > notes.txt; f; python3 x.py"),
    ]
    .iter()
    .filter_map(|line| {
        let j = bash(&p, line, Mode::Auto);
        (j.decision != Ask).then(|| format!("{line}: {:?} ({})", j.decision, j.reason))
    })
    .collect::<Vec<_>>();
    assert!(missed.is_empty(), "not asked:\n{}", missed.join("\n"));
    // The brief's own: a deny rule's words written, copied, run.
    let line = r#"echo 'import os; os.system("rm c")' > x.py; cp x.py y.py; python3 y.py"#;
    assert_eq!(bash(&p, line, Mode::Auto).decision, Deny, "{line}");
}

/// P8 (issue 41): a write later in the text than the program that runs its file may come
/// first: a command substitution in the run's own words runs before it, and a run sent to
/// the background races the segments after it. (Each deletes a canary in plain bash; both
/// were allowed before, the walk-around table holds the first two.) In plain sequence, a
/// write after the run is still no code of it.
#[test]
fn p8_issue_41_a_write_later_in_the_text_may_come_first() {
    let p = policy(&[(Some("rm"), Deny)]);
    for line in [
        r#"python3 x.py "$(echo 'import os; os.system("r"+"m c")' > x.py)""#,
        r#"sleep 1 && python3 x.py & echo 'import os; os.system("r"+"m c")' > x.py; wait"#,
        r#"coproc python3 x.py; echo 'import os; os.system("r"+"m c")' > x.py"#,
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
        assert!(
            j.segments
                .iter()
                .any(|s| matches!(s.cause, Cause::WrittenScript { .. })),
            "{line}: {j:?}"
        );
    }
    // Reading 1: a deny rule's words written for a program that may run first.
    let line = r"sleep 1 && make x & printf 'x:\n\trm c\n' > Makefile";
    let j = bash(&p, line, Mode::Auto);
    assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
    assert!(
        j.segments
            .iter()
            .any(|s| matches!(s.cause, Cause::WrittenCode { .. })),
        "{line}: {j:?}"
    );
    for line in [
        r#"python3 x.py; echo 'import os; os.system("r"+"m c")' > x.py"#,
        r#"python3 x.py && echo 'import os; os.system("r"+"m c")' > x.py 2>&1"#,
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
    }
}

/// P3b, P6 (issue 41, round 4): a value the line chooses (a variable or a positional
/// parameter it sets, a command's output) reaches its program as that value, so a program
/// without a row is judged on each value the line can give it, and asked about one the
/// judge cannot know. A variable the line leaves alone keeps its reading as written. (The
/// walk-around table shows each hole deleting a canary in plain bash first; each of these
/// lines was allowed before.)
/// P3b, P6, P8 (issue 41): a wrapper, a program with a row or an interpreter handed a value
/// the line sets finds its options in that value: each known value is judged as the line
/// it makes, written out. These were allowed: the rows read `$o` as written.
#[test]
fn p3b_p6_p8_issue_41_a_row_reads_the_values_the_line_gives_it() {
    let p = policy(&[(Some("rm"), Deny)]);
    for (line, decision) in [
        ("o=--pre=rm; rg $o x c", Deny),
        ("e=-e; perl $e 'system q(rm c)'", Deny),
        ("o=-exec; find . -name c $o rm c \\;", Deny),
        ("x=--to-command=rm; tar $x -xf a.tar", Deny),
        ("p=sh; logsave /dev/null $p <<< 'rm c'", Ask),
        ("for o in -n -exec; do find . $o rm c \\;; done", Deny),
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, decision, "{line}: {}", j.reason);
        assert_eq!(
            bash(&policy(&[]), line, Mode::Auto).decision,
            Allow,
            "{line}: without a rule, auto allows it"
        );
    }
    // Values that make nothing a rule names keep their decisions, in every mode.
    for (line, auto, ask) in [
        ("o=--hidden; rg $o x", Allow, Ask),
        ("e=-c; python3 $e 'print(1)'", Allow, Ask),
        ("b=main; git checkout $b", Allow, Ask),
        ("n=3; git log -$n", Allow, Ask),
        ("v=1.2.3; git tag v$v", Allow, Ask),
        // A value that keeps its expansion's text makes the same line again: judged once
        // (it recursed until the stack overflowed; found by the shell_judge fuzz target).
        ("echo ${x:-$id}", Allow, Ask),
        ("for p in core cli; do cargo test -p $p; done", Allow, Ask),
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, auto, "{line}");
        assert_eq!(bash(&p, line, Mode::Ask).decision, ask, "{line}");
    }
}

/// Issue 41's gap after round 4: a value the judge cannot know, handed to a program with a
/// row or an interpreter where it reads its options, may be the option that runs code.
#[test]
fn p8_p3b_an_unknown_value_where_a_row_reads_options_is_asked() {
    let p = policy(&[(Some("rm"), Deny)]);
    for line in [
        "x=$(printf -- -e); perl $x 'system q(rm c)'",
        "x=$(cat f); perl -e 'print 1' $x",
        "x=$(cat f); python3 $x \"import os; os.system('rm c')\"",
        "python3 \"$(cat f)\"",
        "x=$(cat f); node $x \"require('child_process').execSync('rm c')\"",
        "node -e 'console.log(process.argv[1])' \"$(cat f)\"",
        "x=$(cat f); ruby $x \"system('rm c')\"",
        "x=$(cat f); php $x 'system(\"rm c\");'",
        "x=$(cat f); sed 's/a/b/' \"$x\"",
        "x=$(cat f); rg $x c",
        "read x; ag \"$x\" c",
        "x=$(cat f); find . $x rm c \\;",
        "x=$(cat f); find \"$x\" -name y",
        "x=$(cat f); git $x log",
        "x=$(cat f); git \"$x\"",
        "git fetch origin \"$(cat f)\"",
        "git push origin \"$(git branch --show-current)\"",
        "x=$(cat f); git -C . rebase $x",
        "x=$(cat f); tar cf a.tar $x",
        "x=$(cat f); timeout 5 perl $x 'system q(rm c)'",
        "x=$(cat f); env perl $x 'system q(rm c)'",
        // Unquoted, the value of an option may split into more options.
        "x=$(cat f); python3 -W $x x.py",
        "x=$(cat f); find . -name $x",
        // Words xargs reads from text the line prints.
        "printf '%s\\n' --pre=rm x c | xargs rg",
        "xargs rg <<< '--pre=rm x c'",
        "x=$(cat f); python3 x$x.py",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
        assert_eq!(
            bash(&policy(&[]), line, Mode::Auto).decision,
            Allow,
            "{line}: without a rule, auto allows it"
        );
    }
    for line in [
        // Places that hold data only: after the code or the script, an option's value,
        // after `--`, a test's value, a subcommand whose words are data, a data row.
        "x=$(cat f); python3 x.py $x",
        "x=$(cat f); python3 -- \"$x\"",
        "x=$(cat f); python3 -W \"$x\" x.py",
        "x=$(cat f); python3 -c 'import sys; print(sys.argv)' \"$x\"",
        "x=$(cat f); awk '{print}' $x",
        "x=$(cat f); perl x.pl \"$x\"",
        "x=$(cat f); sed -e 's/a/b/' -- \"$x\"",
        "x=$(cat f); find . -name \"$x\"",
        "git checkout \"$(git merge-base a b)\"",
        "git diff $(git merge-base HEAD main)",
        "git log \"$(git describe --tags --abbrev=0)\"..HEAD",
        "git commit -m \"$(cat <<'EOF'\nFix the thing\n\nCo-Authored-By: x\nEOF\n)\"",
        "git stash push -m \"$(date)\"",
        "gh pr create --title Fix --body \"$(cat <<'EOF'\n## Summary\n- fix the parser\nEOF\n)\"",
        "x=$(cat f); grep -r \"$x\" src",
        "rg -l -- \"$(cat pattern)\" src",
        // Words xargs reads from the programs before it: the project's file names.
        "find . -name '*.py' | xargs sed -i 's/foo/bar/g'",
        "git ls-files | xargs rg -l foo",
        // The environment's values stay the person's.
        "perl $PERLFLAGS x.pl",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Allow, "{line}: {}", j.reason);
    }
}

/// A wrapper whose grammar meets a word known only at run time where it reads options is
/// opaque, unless the line gives that word values the judge knows: then the wrapper's line
/// is judged with each value written out (issue 41: `t=5; timeout $t cargo test` was asked).
#[test]
fn p3_p5_a_wrapper_unread_for_a_value_the_line_sets_is_read_by_value() {
    let p = policy(&[(Some("rm"), Deny)]);
    for line in [
        "t=5; timeout $t cargo test",
        "t=-k; timeout $t 1 5 cargo test",
        "o=-E; sudo $o cargo build",
        "for t in 1 2; do timeout $t make; done",
        // Quoted, the value is one word: a duration (timeout refuses it), not a command.
        "t='5 rm'; timeout \"$t\" c",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Allow, "{line}: {}", j.reason);
    }
    for line in [
        "t=5; timeout $t rm c",
        "t='5 rm'; timeout $t c",
        "t=-s; timeout $t KILL 5 rm c",
        "for t in 1 rm; do timeout $t rm c; done",
        "o=--; env $o rm c",
        "t=5; timeout $t sh -c 'r''m c'",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Deny, "{line}: {}", j.reason);
    }
    for line in [
        // A value the judge cannot know, a value that is no option of the wrapper, a
        // command name from the environment: still opaque.
        "x=$(cat f); timeout $x cargo test",
        "n=-5; timeout $n cargo test",
        "t=5; timeout $t $CMD",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
    }
    // Read-only mode keeps refusing what it cannot read.
    assert_eq!(
        bash(&p, "t=5; timeout $t cat f", Mode::ReadOnly).decision,
        Deny
    );
}

#[test]
fn p3b_p6_issue_41_values_the_line_chooses_are_read_by_value() {
    let p = policy(&[(Some("rm"), Deny)]);
    for line in [
        // Known values: judged as if written out.
        "x=rm; logsave /dev/null $x c",
        "x=r; logsave /dev/null ${x}m c",
        "y=r; x=${y}m; foo $x c",
        "x=r; x=${x}m; foo $x c",
        "y=r; x=\"${y}m c\"; foo $x",
        "for x in ls rm; do foo $x c; done",
        "printf -v x rm; foo $x c",
        "declare -x x=rm; foo \"$x\" c",
        "x=rm; sem --fg \"$x c\"",
        "set -- rm c; logsave /dev/null \"$@\"",
        "touch rm; for f in r*; do logsave /dev/null $f c; done",
        "logsave /dev/null ${x:-rm} c",
        "foo ${HOME:+rm} c",
        "foo ${PATH:0:0}r${PATH:0:0}m c",
        // Values the judge cannot know.
        "read x <<< rm; foo $x c",
        "mapfile -t a <<< rm; foo ${a[0]} c",
        "x=$(printf r)m; foo $x c",
        "foo \"$(printf r)m\" c",
        "bash -c 'foo $1 c' _ rm",
        "f() { foo \"$1\" c; }; f x",
        "printf 'r%s c' m | xargs foo",
        ": x; foo $_ c",
        "[[ rm =~ (.*) ]]; foo ${BASH_REMATCH[1]} c",
        "rm=1; foo ${!r*} c",
        "x=r; foo ${x/r/rm} c",
        "for i in 1 2; do x=${x}m; done; foo $x c",
        // A shell or an interpreter handed to a program without a row.
        "printf 'r%s c' m | logsave /dev/null sh",
        "logsave /dev/null bash <(printf 'r%s c' m)",
        "logsave /dev/null sh <<< 'rm c'",
        "logsave /dev/null xargs -I{} sh -c {} <<< 'rm c'",
        "foo --shell=sh <<< 'rm c'",
        "logsave /dev/null env perl -e 'system(\"r\".\"m c\")'",
        "logsave /dev/null node -e \"require('child_process').execSync('r'+'m c')\"",
        "logsave /dev/null sh <<'E'\nr''m c\nE",
        "logsave /dev/null perl -e 'system(\"r\".\"m c\")'",
        "printf 'system(\"r%s c\")' m | logsave /dev/null perl",
        // Builtins that evaluate a subscript in a name the shell builds.
        "x=$(cat f); printf -v \"$x\" 1",
        "x=$(cat f); test -v \"$x\"",
        "x=$(cat f); read \"$x\" <<< 1",
        "x=$(cat f); declare \"$x=1\"",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
        assert_eq!(
            bash(&policy(&[]), line, Mode::Auto).decision,
            Allow,
            "{line}: without a rule, auto allows it"
        );
    }
    for line in [
        // The environment's values, as written.
        "cargo build --target $TARGET",
        "foo \"$HOME/x\" c",
        "docker build -t \"${PWD##*/}\" .",
        "cargo build --target ${TARGET:-x86_64-unknown-linux-gnu}",
        // Values the line chooses that name nothing a rule names, or go to programs that
        // take them as data.
        "dir=build; mkdir -p $dir && cd $dir && cmake ..",
        "for p in core cli; do cargo test -p $p; done",
        "for f in src/*.rs; do rustfmt --check \"$f\"; done",
        "x=$(git rev-parse --short HEAD); echo \"$x\"",
        "kill $(pgrep -f server)",
        "mkdir -p \"$(dirname out/a/b.txt)\"",
        "export PATH=$PATH:$HOME/.local/bin; cargo build",
        "set -- a b; foo \"$@\"",
        // A name the line sets only to numbers evaluates to a number.
        "i=0; while [ $i -lt 3 ]; do i=$((i+1)); done",
        "i=0; while ((i < 3)); do ((i++)); done",
        "read -r -p \"$prompt\" line <<< x",
        "apt-get install -y python3 perl",
        "docker run img bash -c 'make test'",
        "logsave /dev/null sh -c 'ls'",
        "docker exec c env",
        "kubectl exec p -- sh -c 'ls'",
        "docker build -t app .",
        "cargo build --features=bash",
        "logsave /dev/null python3 -c 'print(1)'",
        "cat f | sort | uniq -c | grep python",
        "printf -v out '%s' x",
        "declare -r v=\"$(date)\"",
    ] {
        let j = bash(&p, line, Mode::Auto);
        assert_eq!(j.decision, Allow, "{line}: {}", j.reason);
    }
    // An opaque segment (P5), asked with no rule too.
    assert_eq!(
        bash(&p, "x=$(cat f); [[ -v $x ]]", Mode::Auto).decision,
        Ask
    );
    // The line's own IFS splits a value its way (asked even with no rule: `IFS` is a
    // variable the judge does not know to be harmless).
    assert_eq!(
        bash(&p, "IFS=:; x=a:rm; foo $x c", Mode::Auto).decision,
        Ask
    );
    // Read-only mode: numbers stay harmless; a value read from input in arithmetic is not.
    assert_eq!(
        bash(
            &p,
            "n=0; for f in *.rs; do n=$((n+1)); done; echo $n",
            Mode::ReadOnly
        )
        .decision,
        Allow
    );
    assert_eq!(
        bash(&p, "read n; echo $((n+1))", Mode::ReadOnly).decision,
        Deny
    );
    assert_eq!(
        bash(
            &p,
            "i=0; while [ $i -lt 3 ]; do i=$((i+1)); done",
            Mode::ReadOnly
        )
        .decision,
        Allow
    );
    assert_eq!(bash(&p, "x=-v; [ $x a ]", Mode::ReadOnly).decision, Deny);
}

/// P8 (issue 41): builtins that evaluate are asked in auto as read-only refuses them.
#[test]
fn p8_builtins_that_evaluate_are_opaque_in_auto() {
    let p = policy(&[(Some("rm"), Deny)]);
    for line in [
        "let 'a[$(ls)]=1'",
        "declare -i x='a[$(ls)]'",
        "declare -n r=x",
        "printf -v 'a[$(ls)]' x",
        "read 'a[$(ls)]' <<< x",
        "mapfile -C f -c 1 a <<< x",
        "compgen -C ls x",
        "fc -e ls",
        "echo ${x@P}",
        "bash --rcfile <(echo ls) -i",
        "test -v 'a[$(ls)]'",
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, Ask, "{line}");
        assert_eq!(bash(&p, line, Mode::ReadOnly).decision, Deny, "{line}");
    }
    for line in [
        "let 1+2",
        "declare -a x",
        "printf -v x %s y",
        "read x <<< y",
        "test -f x",
    ] {
        assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
    }
}

#[test]
fn arithmetic_on_variables_cannot_be_allowed_by_a_prefix_rule() {
    let p = policy(&[(Some("echo"), Allow)]);
    let j = bash(&p, "x='a[$(rm -rf ~)]'; echo $((x))", Mode::Ask);
    assert_eq!(j.decision, Ask);
    assert_eq!(bash(&p, "echo $((1 + 2))", Mode::Ask).decision, Allow);
    assert_eq!(
        bash(&p, "x='a[$(rm -rf ~)]'; echo $((x))", Mode::ReadOnly).decision,
        Deny
    );
}

#[test]
fn an_allow_always_grant_allows_its_prefix_afterwards() {
    let p = policy(&[]);
    let j = bash(&p, "git push origin main", Mode::Ask);
    assert_eq!(j.decision, Ask);
    assert_eq!(j.grants_on_allow_always, [grant(&["git", "push"])]);
    let grants = j.grants_on_allow_always;
    let j = bash_with(&p, "git push --tags", Mode::Ask, &grants);
    assert_eq!(j.decision, Allow);
    assert_eq!(
        j.reason,
        "`git push` is allowed always in this session and matches `git push --tags`"
    );
    assert_eq!(bash_with(&p, "git pull", Mode::Ask, &grants).decision, Ask);
    // A grant is one prefix, never the whole compound command.
    let j = bash_with(&p, "git push && rm -rf /", Mode::Ask, &grants);
    assert_eq!(j.decision, Ask);
    assert_eq!(j.grants_on_allow_always, [grant(&["rm"])]);
}

#[test]
fn a_grant_neither_loosens_a_rule_nor_acts_as_a_wildcard() {
    let p = policy(&[(Some("git push"), Deny)]);
    let grants = [grant(&["git", "push"]), grant(&["*"])];
    assert_eq!(bash_with(&p, "git push", Mode::Ask, &grants).decision, Deny);
    assert_eq!(bash_with(&p, "curl x", Mode::Ask, &grants).decision, Ask);
}

#[test]
fn grants_offered_are_per_segment_and_deduplicated() {
    let p = policy(&[(Some("ls"), Allow)]);
    let j = bash(
        &p,
        "rm a; ls; rm b | cargo build --release; npm -v; make",
        Mode::Ask,
    );
    assert_eq!(j.decision, Ask);
    assert_eq!(
        j.grants_on_allow_always,
        [
            grant(&["rm"]),
            grant(&["cargo", "build"]),
            grant(&["npm"]),
            grant(&["make"])
        ]
    );
    assert!(j.reason.ends_with("; and 2 more"), "{}", j.reason);
    // A subcommand that could stand for other words is not granted at all.
    let j = bash(&p, "git * x", Mode::Ask);
    assert!(j.grants_on_allow_always.is_empty());
    // The wrapper and what it runs are separate prefixes.
    let j = bash(&p, "sudo apt-get install x", Mode::Ask);
    assert_eq!(
        j.grants_on_allow_always,
        [grant(&["sudo"]), grant(&["apt-get", "install"])]
    );
}

#[test]
fn unparsable_commands_are_asked_or_denied_never_allowed() {
    let p = policy(&[(None, Allow), (Some("echo"), Allow)]);
    for mode in [Mode::Ask, Mode::Auto] {
        let j = bash(&p, "echo 'unclosed", mode);
        assert_eq!(j.decision, Ask);
        assert!(
            j.reason.contains("the command cannot be parsed: "),
            "{}",
            j.reason
        );
        assert!(j.grants_on_allow_always.is_empty());
    }
    assert_eq!(bash(&p, "echo 'unclosed", Mode::ReadOnly).decision, Deny);
    let p = policy(&[(None, Deny)]);
    let j = bash(&p, "echo 'unclosed", Mode::Auto);
    assert_eq!(j.decision, Deny);
    assert!(j.reason.contains("cannot be parsed"), "{}", j.reason);
    let huge = "a".repeat(100 * 1024);
    assert_eq!(bash(&policy(&[]), &huge, Mode::Auto).decision, Ask);
    // brush-parser panics on a descriptor number past i32 (found by the
    // tool_args fuzzer): caught around the walk, the line is unparsable.
    let p = policy(&[(None, Allow), (Some("cat"), Allow)]);
    let j = bash(&p, "cat 77777777777<>f", Mode::Auto);
    assert_eq!(j.decision, Ask, "{}", j.reason);
    assert!(
        j.reason.contains("the command cannot be parsed: "),
        "{}",
        j.reason
    );
    assert_eq!(bash(&p, "cat 77777777777<>f", Mode::Auto).decision, Ask);
}

#[test]
fn a_call_without_a_command_string_is_denied() {
    let p = policy(&[(None, Allow)]);
    for arguments in [json!({}), json!({ "command": 5 }), json!(null), json!("ls")] {
        let j = p.judge("bash", &arguments, Mode::Auto, &[]);
        assert_eq!(j.decision, Deny);
        assert!(j.reason.contains("`command`"), "{}", j.reason);
    }
}

#[test]
fn a_command_that_runs_nothing_is_allowed_unless_a_tool_wide_rule_says_otherwise() {
    let p = policy(&[]);
    for command in ["", "   ", "# just a comment", "X=1"] {
        assert_eq!(bash(&p, command, Mode::Ask).decision, Allow, "{command:?}");
        assert_eq!(
            bash(&p, command, Mode::ReadOnly).decision,
            Allow,
            "{command:?}"
        );
    }
    assert_eq!(bash(&p, "", Mode::Ask).reason, "the command runs nothing");
    let p = policy(&[(None, Ask)]);
    assert_eq!(bash(&p, "", Mode::Auto).decision, Ask);
    assert_eq!(bash(&p, "X=1", Mode::Auto).decision, Ask);
}

#[test]
fn a_redirection_alone_is_a_write_to_judge() {
    let p = policy(&[]);
    let j = bash(&p, "> file", Mode::Ask);
    assert_eq!(j.decision, Ask);
    assert_eq!(
        j.reason,
        "no rule matches a redirection-only command (mode ask)"
    );
    assert!(j.grants_on_allow_always.is_empty());
    assert_eq!(bash(&p, "> file", Mode::Auto).decision, Allow);
    assert_eq!(bash(&p, "> file", Mode::ReadOnly).decision, Deny);
}

#[test]
fn read_only_mode_allows_only_known_readers() {
    let p = policy(&[]);
    for command in [
        "ls -la",
        "git status",
        "git log --oneline | head -5",
        "cat a b | grep -n x | wc -l",
        "find . -name '*.rs' -type f",
        "sort -k2 -n f",
        "echo hi > /dev/null",
        "ls 2>&1",
        "ls 2>/dev/null && pwd",
        "X=1; echo $X",
        "[ -f x ] && test -d y",
        "printf '%s\\n' a",
    ] {
        let j = bash(&p, command, Mode::ReadOnly);
        assert_eq!(j.decision, Allow, "{command}: {}", j.reason);
    }
    let j = bash(&p, "ls", Mode::ReadOnly);
    assert_eq!(j.reason, "read-only mode: `ls` only reads");
}

#[test]
fn read_only_mode_denies_everything_else() {
    let p = policy(&[(None, Allow), (Some("rm"), Allow)]);
    let j = bash(&p, "rm -rf x", Mode::ReadOnly);
    assert_eq!(j.decision, Deny);
    assert_eq!(
        j.reason,
        "read-only mode: `rm -rf x` is not known to be read-only"
    );
    for command in [
        "git status && git push",
        "ls $(rm x)",
        "echo hi > f",
        "ls >> log",
        "{ ls; } > out",
        "find . -delete",
        "find . -name x -exec ls {} \\;",
        "find . -fprint out",
        "find . $ACTION",
        "sort -o f in",
        "sort -uo f in",
        "sort --output=f in",
        "sort --compress-program=sh in",
        "printf -v 'a[$(rm x)]' %s y",
        "test -v 'a[$(rm x)]'",
        "[ -v 'a[$(rm x)]' ]",
        "git log --output=f",
        "tree -o f",
        "$CMD",
        "PATH=. ls",
        "sudo ls",
        "cd /tmp",
        "./ls",
    ] {
        let j = bash(&p, command, Mode::ReadOnly);
        assert_eq!(j.decision, Deny, "{command}: {}", j.reason);
        assert!(j.reason.starts_with("read-only mode: "), "{}", j.reason);
    }
    let j = bash(&p, "find . -delete", Mode::ReadOnly);
    assert!(j.reason.contains("`-delete`"), "{}", j.reason);
    let j = bash(&p, "echo hi > f", Mode::ReadOnly);
    assert_eq!(
        j.reason,
        "read-only mode: `echo hi` writes through a redirection"
    );
}

#[test]
fn a_trap_is_judged_by_its_action() {
    let p = policy(&[(Some("rm"), Deny)]);
    for command in [
        "trap",
        "trap -p EXIT",
        "trap - EXIT",
        "trap '' INT",
        "trap EXIT",
    ] {
        let j = bash(&p, command, Mode::Auto);
        assert_eq!(j.decision, Allow, "{command}: {}", j.reason);
    }
    assert_eq!(bash(&p, "trap 'ls' EXIT", Mode::Auto).decision, Allow);
    // An action only known at run time could be `rm`.
    let j = bash(&p, "trap \"$A\" EXIT", Mode::Auto);
    assert_eq!(j.decision, Ask, "{}", j.reason);
    // Read-only mode refuses the trap (not on its list) whatever the action.
    assert_eq!(bash(&p, "trap 'ls' EXIT", Mode::ReadOnly).decision, Deny);
}

#[test]
fn read_only_mode_refuses_readers_that_write_run_code_or_change_the_system() {
    let p = policy(&[]);
    for (command, culprit) in [
        ("uniq in.txt out.txt", "out.txt"),
        ("uniq -c in out", "out"),
        ("uniq in -c out", "out"),
        ("uniq -f 1 -w2 in out", "out"),
        ("uniq --skip-fields 1 in out", "out"),
        ("uniq -- - out", "out"),
        ("uniq *.txt", "*.txt"),
        ("uniq {a,b}", "{a,b}"),
        ("uniq $IN", "$IN"),
        ("rg --pre ./script pattern", "--pre"),
        ("rg --pre=./script pattern", "--pre=./script"),
        ("rg --pre-glob '*.gz' x", "--pre-glob"),
        ("rg --hostname-bin ./prog x", "--hostname-bin"),
        ("date -s 2020-01-01", "-s"),
        ("date -us 2020-01-01", "-us"),
        ("date --set=2020-01-01", "--set=2020-01-01"),
        ("date --se 2020-01-01", "--se"),
        ("date -f dates", "-f"),
        ("date --file=dates", "--file=dates"),
        ("date 010112002020", "010112002020"),
        ("date -u 0101", "0101"),
        ("date -Is 0101", "0101"),
        ("hostname other", "other"),
        ("hostname -F /etc/hostname", "-F"),
        ("hostname --file=/etc/hostname", "--file=/etc/hostname"),
        ("hostname -b", "-b"),
        ("hostname -- -x", "-x"),
        ("hostname $NAME", "$NAME"),
        ("file -C -m magic", "-C"),
        ("file -zC", "-zC"),
        ("file --compile", "--compile"),
        ("file --comp", "--comp"),
    ] {
        let j = bash(&p, command, Mode::ReadOnly);
        assert_eq!(j.decision, Deny, "{command}: {}", j.reason);
        assert!(
            j.reason.contains(&format!("(`{culprit}` writes")),
            "{command}: {}",
            j.reason
        );
    }
    // A rule that allows them does not loosen read-only mode.
    let p = policy(&[(Some("uniq"), Allow), (Some("date"), Allow)]);
    assert_eq!(bash(&p, "uniq a b", Mode::ReadOnly).decision, Deny);
    assert_eq!(bash(&p, "date -s now", Mode::ReadOnly).decision, Deny);
}

#[test]
fn read_only_mode_still_allows_the_reading_forms_of_those_readers() {
    let p = policy(&[]);
    for command in [
        "uniq",
        "uniq in.txt",
        "uniq -c in.txt",
        "uniq -f 1 -s 2 -w 3 in",
        "uniq --skip-fields 1 --check-chars=3 in",
        "sort f | uniq -c",
        "uniq -",
        "rg pattern src",
        "rg --no-pre -n x",
        "rg -g '*.rs' x",
        "date",
        "date +%s",
        "date -u '+%Y-%m-%d'",
        "date -d tomorrow +%F",
        "date --date 'next week'",
        "date -r file",
        "date --reference file +%s",
        "date -Iseconds",
        "date --rfc-3339 seconds",
        "date -R",
        "hostname",
        "hostname -f",
        "hostname -i",
        "hostname -I",
        "hostname -s",
        "hostname -d",
        "hostname --fqdn",
        "file x",
        "file -m magic x",
        "file -mC x",
        "file -b --mime-type x",
    ] {
        let j = bash(&p, command, Mode::ReadOnly);
        assert_eq!(j.decision, Allow, "{command}: {}", j.reason);
    }
}

#[test]
fn in_read_only_mode_rules_still_restrict_readers() {
    let p = policy(&[
        (Some("cat"), Deny),
        (Some("grep"), Ask),
        (Some("ls"), Allow),
    ]);
    assert_eq!(bash(&p, "cat f", Mode::ReadOnly).decision, Deny);
    assert_eq!(bash(&p, "grep x f", Mode::ReadOnly).decision, Ask);
    assert_eq!(bash(&p, "ls", Mode::ReadOnly).decision, Allow);
    assert_eq!(bash(&p, "ls; grep x f", Mode::ReadOnly).decision, Ask);
}

#[test]
fn the_read_only_list_comes_from_the_config() {
    let p = Policy::new(&PermissionsConfig {
        read_only_commands: vec!["make check".into()],
        ..PermissionsConfig::default()
    });
    assert_eq!(bash(&p, "make check -j4", Mode::ReadOnly).decision, Allow);
    assert_eq!(bash(&p, "make install", Mode::ReadOnly).decision, Deny);
    assert_eq!(bash(&p, "ls", Mode::ReadOnly).decision, Deny);
}

#[test]
fn other_tools_get_their_defaults_when_no_rule_covers_them() {
    let p = policy(&[(Some("ls"), Deny)]);
    let args = json!({ "taskId": "t1" });
    let cases = [
        ("bash_output", Mode::Ask, Allow),
        ("bash_output", Mode::Auto, Allow),
        ("bash_output", Mode::ReadOnly, Allow),
        ("bash_kill", Mode::Ask, Allow),
        ("bash_kill", Mode::Auto, Allow),
        ("bash_kill", Mode::ReadOnly, Deny),
        ("other_tool", Mode::Ask, Ask),
        ("other_tool", Mode::Auto, Allow),
        ("other_tool", Mode::ReadOnly, Deny),
    ];
    for (tool, mode, expected) in cases {
        let j = p.judge(tool, &args, mode, &[]);
        assert_eq!(j.decision, expected, "{tool} {mode:?}: {}", j.reason);
        assert!(j.grants_on_allow_always.is_empty());
    }
    assert_eq!(
        p.judge("other_tool", &args, Mode::Ask, &[]).reason,
        "tool `other_tool` is not covered by any rule (mode ask)"
    );
}

#[test]
fn other_tools_follow_tool_wide_rules_only() {
    let p = Policy::new(&PermissionsConfig {
        rules: vec![
            rule("bash_output", None, Deny),
            rule("bash_kill", Some("x"), Deny),
            rule("*", None, Allow),
        ],
        ..PermissionsConfig::default()
    });
    let args = json!({});
    let j = p.judge("bash_output", &args, Mode::Auto, &[]);
    assert_eq!(j.decision, Deny);
    assert_eq!(
        j.reason,
        "rule bash_output (every call, deny) matches tool `bash_output`"
    );
    assert_eq!(p.judge("bash_kill", &args, Mode::Auto, &[]).decision, Allow);
    assert_eq!(p.judge("other_tool", &args, Mode::Ask, &[]).decision, Allow);
    // No rule loosens read-only mode for a tool that may change state.
    let j = p.judge("other_tool", &args, Mode::ReadOnly, &[]);
    assert_eq!(j.decision, Deny);
    assert_eq!(
        j.reason,
        "read-only mode: tool `other_tool` is not known to be read-only"
    );
    assert_eq!(
        p.judge("bash_kill", &args, Mode::ReadOnly, &[]).decision,
        Deny
    );
}

fn file_rule(tool: &str, path: Option<&str>, action: Decision) -> PermissionRule {
    PermissionRule {
        tool: tool.into(),
        path: path.map(str::to_owned),
        action,
        ..PermissionRule::default()
    }
}

#[test]
fn f7_file_tools_are_judged_by_path_mode_and_roots() {
    let p = Policy::new(&PermissionsConfig {
        rules: vec![
            file_rule("write_file", Some("secrets/**"), Deny),
            file_rule("*_file", Some("/etc/allowed/*"), Allow),
            file_rule("read_file", Some("**/.env"), Ask),
        ],
        ..PermissionsConfig::default()
    });
    let cwd = Path::new("/w");
    let roots = [PathBuf::from("/w"), PathBuf::from("/extra")];
    let place = Place {
        cwd,
        roots: &roots,
        sandbox_roots: None,
        read_only_tool: false,
        globs: None,
    };
    let judge = |tool: &str, path: &str, mode| {
        p.judge_in(tool, &json!({ "path": path }), mode, &[], Some(&place))
    };
    // Rules by path, relative to the cwd, `..` taken back first.
    let j = judge("write_file", "secrets/k", Mode::Auto);
    assert_eq!(j.decision, Deny);
    assert_eq!(
        j.reason,
        "rule write_file path `secrets/**` (deny) matches tool `write_file` on /w/secrets/k"
    );
    assert_eq!(
        judge("write_file", "a/../secrets/x/y", Mode::Auto).decision,
        Deny
    );
    assert_eq!(
        judge("write_file", "/w/secrets/k", Mode::Auto).decision,
        Deny
    );
    assert_eq!(judge("edit_file", "secrets/k", Mode::Auto).decision, Allow);
    assert_eq!(judge("read_file", ".env", Mode::Auto).decision, Ask);
    assert_eq!(judge("read_file", "sub/.env", Mode::Auto).decision, Ask);
    // Mode defaults inside the roots.
    assert_eq!(judge("read_file", "src/a.rs", Mode::Ask).decision, Allow);
    assert_eq!(judge("edit_file", "src/a.rs", Mode::Ask).decision, Ask);
    assert_eq!(judge("edit_file", "src/a.rs", Mode::Auto).decision, Allow);
    assert_eq!(judge("write_file", "/extra/f", Mode::Auto).decision, Allow);
    // Read-only mode allows reading only, whatever a rule says.
    assert_eq!(
        judge("read_file", "src/a.rs", Mode::ReadOnly).decision,
        Allow
    );
    let j = judge("write_file", "/etc/allowed/x", Mode::ReadOnly);
    assert_eq!((j.decision, j.cause), (Deny, Cause::ReadOnly));
    // Writes outside the roots are asked even in auto; only a path rule allows them.
    let j = judge("write_file", "../other/f", Mode::Auto);
    assert_eq!(j.decision, Ask);
    assert_eq!(j.reason, "/other/f is outside the session's directories");
    assert_eq!(
        judge("write_file", "/etc/allowed/x", Mode::Auto).decision,
        Allow
    );
    let star = Policy::new(&PermissionsConfig {
        rules: vec![rule("*", None, Allow)],
        ..PermissionsConfig::default()
    });
    let j = star.judge_in(
        "edit_file",
        &json!({"path": "/tmp/x"}),
        Mode::Auto,
        &[],
        Some(&place),
    );
    assert_eq!(j.decision, Ask);
    // Under the sandbox, writes outside its writable roots are denied.
    let sandbox = [PathBuf::from("/w"), PathBuf::from("/cache")];
    let boxed = Place {
        sandbox_roots: Some(&sandbox),
        ..place
    };
    let j = p.judge_in(
        "write_file",
        &json!({"path": "/etc/allowed/x"}),
        Mode::Auto,
        &[],
        Some(&boxed),
    );
    assert_eq!(j.decision, Deny);
    assert_eq!(
        j.reason,
        "/etc/allowed/x is outside the sandbox's writable roots (to write it there, call \
         write_file again with sandbox: \"off\" and a justification: the person is asked)"
    );
    let j = p.judge_in(
        "write_file",
        &json!({"path": "/cache/x"}),
        Mode::Auto,
        &[],
        Some(&boxed),
    );
    assert_eq!(j.decision, Ask);
    // A path rule is only about the file tools: bash ignores it.
    assert_eq!(
        p.judge("bash", &json!({"command": "ls"}), Mode::Auto, &[])
            .decision,
        Allow
    );
    assert_eq!(
        p.judge("read_file", &json!({}), Mode::Auto, &[]).decision,
        Deny
    );
}

#[test]
fn path_rules_are_checked_with_their_examples_and_reachability() {
    let config = PermissionsConfig {
        rules: vec![
            PermissionRule {
                examples: vec!["secrets/a".into(), "./secrets/b/c".into()],
                not_examples: vec!["src/secrets".into()],
                ..file_rule("write_file", Some("secrets/**"), Deny)
            },
            PermissionRule {
                examples: vec!["src/x".into()],
                ..file_rule("edit_file", Some("secrets/**"), Deny)
            },
            file_rule("bash", Some("x/**"), Deny),
        ],
        ..PermissionsConfig::default()
    };
    let failed: Vec<String> = check_config(&config).into_iter().map(|f| f.0).collect();
    assert_eq!(
        failed,
        [
            "rule 1 (rule edit_file path `secrets/**` (deny)) should match path `src/x`",
            "rule 2 (rule bash path `x/**` (deny)): `path` applies only to the file tools (read_file, edit_file, write_file) and not with `command`",
        ]
    );
}

#[test]
fn tool_rules_match_tool_names_by_glob() {
    let p = Policy::new(&PermissionsConfig {
        rules: vec![
            rule("mcp__github__*", None, Allow),
            rule("mcp__*", None, Ask),
        ],
        ..PermissionsConfig::default()
    });
    let args = json!({});
    let j = p.judge("mcp__github__list", &args, Mode::Ask, &[]);
    assert_eq!(
        j.decision, Ask,
        "the strongest matching rule wins: {}",
        j.reason
    );
    let p = Policy::new(&PermissionsConfig {
        rules: vec![rule("mcp__github__*", None, Allow)],
        ..PermissionsConfig::default()
    });
    assert_eq!(
        p.judge("mcp__github__list", &args, Mode::Ask, &[]).decision,
        Allow
    );
    assert_eq!(
        p.judge("mcp__gitlab__list", &args, Mode::Ask, &[]).decision,
        Ask
    );
    assert!(path_glob(b"**/.env", b".env"));
    assert!(path_glob(b"src/*.rs", b"src/a.rs"));
    assert!(!path_glob(b"src/*.rs", b"src/x/a.rs"));
    assert!(path_glob(b"src/**/*.rs", b"src/x/y/a.rs"));
    assert!(path_glob(b"a?c", b"abc"));
    assert!(!path_glob(b"a?c", b"a/c"));
    // A pattern from an untrusted project file cannot make matching exponential: this
    // one took minutes with plain backtracking.
    let hostile = "**a".repeat(12) + "**b";
    assert!(!path_glob(hostile.as_bytes(), "a".repeat(60).as_bytes()));
}

#[test]
fn grant_display_joins_its_words() {
    assert_eq!(grant(&["git", "push"]).display(), "git push");
}

/// Issue 27 escalation: judged under the sandbox, or not.
fn escalated(
    p: &Policy,
    command: &str,
    mode: Mode,
    grants: &[Grant],
    sandboxed: bool,
) -> Judgement {
    let cwd = Path::new("/w");
    let roots = [cwd.to_path_buf()];
    let place = Place {
        cwd,
        roots: &roots,
        sandbox_roots: sandboxed.then_some(&roots[..]),
        read_only_tool: false,
        globs: None,
    };
    let args = json!({"command": command, "sandbox": "off", "justification": "needs the network"});
    p.judge_in("bash", &args, mode, grants, Some(&place))
}

#[test]
fn issue_27_escalation_no_mode_or_grant_lets_a_call_out_of_the_sandbox() {
    let p = policy(&[]);
    for mode in [Mode::Auto, Mode::Ask, Mode::ReadOnly] {
        let j = escalated(&p, "ls", mode, &[], true);
        assert_eq!(j.decision, Ask, "{mode:?}: {}", j.reason);
        assert_eq!(j.cause, Cause::Escalation);
        assert!(j.grants_on_allow_always.is_empty(), "{mode:?}");
        assert_eq!(
            j.reason,
            "no rule naming `ls` allows it outside the sandbox. Outside the sandbox \
             because: needs the network"
        );
        assert_eq!(
            j.escalation.as_ref().map(|e| e.justification.as_str()),
            Some("needs the network")
        );
    }
    // A grant ("allow always" of an ordinary call) does not either.
    let j = escalated(&p, "git push", Mode::Ask, &[grant(&["git", "push"])], true);
    assert_eq!(j.decision, Ask, "{}", j.reason);
    // Nor a rule for every call, or one whose command is only `*`.
    for every in [None, Some("*")] {
        let j = escalated(&policy(&[(every, Allow)]), "ls", Mode::Auto, &[], true);
        assert_eq!(j.decision, Ask, "{every:?}: {}", j.reason);
    }
    // Read-only mode still denies what it denies.
    assert_eq!(
        escalated(&p, "rm x", Mode::ReadOnly, &[], true).decision,
        Deny
    );
}

#[test]
fn issue_27_escalation_rules_naming_the_command_still_decide() {
    let p = policy(&[
        (Some("git push"), Allow),
        (Some("rm"), Deny),
        (Some("curl"), Ask),
    ]);
    let j = escalated(&p, "git push origin main", Mode::Ask, &[], true);
    assert_eq!(j.decision, Allow, "{}", j.reason);
    assert!(j.escalation.is_some());
    assert!(matches!(j.cause, Cause::Rule { index: 0, .. }));
    // Every segment must be allowed by such a rule: one that is not is asked.
    let j = escalated(&p, "git push && ls", Mode::Auto, &[], true);
    assert_eq!(j.decision, Ask, "{}", j.reason);
    assert_eq!(j.segments[0].decision, Allow);
    assert_eq!(j.segments[1].cause, Cause::Escalation);
    assert_eq!(
        escalated(&p, "rm -rf x", Mode::Auto, &[], true).decision,
        Deny
    );
    let j = escalated(&p, "curl x", Mode::Auto, &[], true);
    assert_eq!(j.decision, Ask);
    assert!(
        matches!(j.cause, Cause::Rule { index: 2, .. }),
        "{:?}",
        j.cause
    );
    assert!(j.grants_on_allow_always.is_empty());
    // Opaque commands are asked as ever.
    assert_eq!(escalated(&p, "$X", Mode::Auto, &[], true).decision, Ask);
    // A rule naming the command allows it beside one that names nothing (of equal
    // rules the judge names the last).
    let p = policy(&[(Some("touch"), Allow), (Some("*"), Allow)]);
    assert_eq!(
        escalated(&p, "touch x", Mode::Ask, &[], true).decision,
        Allow
    );
    assert_eq!(escalated(&p, "cp x y", Mode::Ask, &[], true).decision, Ask);
}

#[test]
fn issue_27_escalation_is_ignored_outside_the_sandbox_and_when_invalid() {
    let p = policy(&[]);
    let j = escalated(&p, "ls", Mode::Auto, &[], false);
    assert_eq!(j, bash(&p, "ls", Mode::Auto));
    assert!(j.escalation.is_none());
    // Without a justification the tool refuses the call; the judge sees no request.
    let cwd = Path::new("/w");
    let roots = [cwd.to_path_buf()];
    let place = Place {
        cwd,
        roots: &roots,
        sandbox_roots: Some(&roots),
        read_only_tool: false,
        globs: None,
    };
    let args = json!({"command": "ls", "sandbox": "off"});
    let j = p.judge_in("bash", &args, Mode::Auto, &[], Some(&place));
    assert_eq!(j.decision, Allow);
    assert!(j.escalation.is_none());
}

fn net_rule(host: Option<&str>, port: Option<u16>, action: Decision) -> PermissionRule {
    PermissionRule {
        tool: "network".into(),
        host: host.map(str::to_owned),
        port,
        action,
        ..PermissionRule::default()
    }
}

fn net_policy(rules: Vec<PermissionRule>, network: &NetworkConfig) -> Policy {
    Policy::new(&PermissionsConfig {
        rules,
        ..PermissionsConfig::default()
    })
    .with_network(network)
}

fn connect(policy: &Policy, host: &str, port: u16, mode: Mode, grants: &[Grant]) -> Judgement {
    policy.judge(
        "network",
        &json!({"host": host, "port": port, "scheme": "https", "command": "cargo build"}),
        mode,
        grants,
    )
}

#[test]
fn e10_network_rules_match_host_and_port_and_the_strongest_wins() {
    let p = net_policy(
        vec![
            net_rule(Some("*.crates.io"), None, Allow),
            net_rule(Some("static.crates.io"), Some(80), Deny),
            net_rule(None, Some(22), Ask),
        ],
        &NetworkConfig::default(),
    );
    let j = connect(&p, "index.crates.io", 443, Mode::Ask, &[]);
    assert_eq!(j.decision, Allow);
    assert_eq!(
        j.reason,
        "rule network host `*.crates.io` (allow) matches index.crates.io:443"
    );
    assert!(
        matches!(j.cause, Cause::Rule { index: 0, .. }),
        "{:?}",
        j.cause
    );
    assert!(j.grants_on_allow_always.is_empty());
    // The port narrows a rule; deny beats allow.
    assert_eq!(
        connect(&p, "static.crates.io", 443, Mode::Ask, &[]).decision,
        Allow
    );
    let j = connect(&p, "static.crates.io", 80, Mode::Ask, &[]);
    assert_eq!(j.decision, Deny);
    assert_eq!(
        j.reason,
        "rule network host `static.crates.io` port 80 (deny) matches static.crates.io:80"
    );
    // `*.` covers subdomains only; a port-only rule covers every host on that port.
    assert_eq!(connect(&p, "crates.io", 443, Mode::Auto, &[]).decision, Ask);
    assert_eq!(connect(&p, "crates.io", 22, Mode::Auto, &[]).decision, Ask);
    assert!(matches!(
        connect(&p, "crates.io", 22, Mode::Auto, &[]).cause,
        Cause::Rule { index: 2, .. }
    ));
    // Mixed case and a trailing dot are judged as the lower-case form.
    assert_eq!(
        connect(&p, "INDEX.Crates.IO.", 443, Mode::Ask, &[]).decision,
        Allow
    );
    // An address is judged as the address, however the call spells it.
    let p = net_policy(
        vec![net_rule(Some("127.0.0.1"), None, Deny)],
        &NetworkConfig::default(),
    );
    for spelling in ["127.0.0.1", "2130706433", "0x7f.1", "::ffff:127.0.0.1"] {
        let j = connect(&p, spelling, 8080, Mode::Auto, &[]);
        assert_eq!(j.decision, Deny, "{spelling}: {}", j.reason);
        assert!(j.reason.ends_with("matches 127.0.0.1:8080"), "{}", j.reason);
    }
    // A tool-wide rule (network or `*`) covers every host.
    let p = net_policy(vec![rule("network", None, Deny)], &NetworkConfig::default());
    assert_eq!(
        connect(&p, "example.com", 443, Mode::Auto, &[]).decision,
        Deny
    );
    let p = net_policy(vec![rule("*", None, Allow)], &NetworkConfig::default());
    assert_eq!(
        connect(&p, "example.com", 443, Mode::Ask, &[]).decision,
        Allow
    );
}

#[test]
fn e10_host_rules_are_about_network_only() {
    // A host rule does not touch bash or other tools, and bash rules never match a host.
    let p = net_policy(
        vec![
            net_rule(Some("example.com"), None, Deny),
            rule("bash", Some("cargo"), Allow),
        ],
        &NetworkConfig::default(),
    );
    assert_eq!(bash(&p, "cargo build", Mode::Ask).decision, Allow);
    assert_eq!(bash(&p, "curl example.com", Mode::Auto).decision, Allow);
    assert_eq!(
        p.judge(
            "bash_output",
            &json!({"task_id": "bash-1"}),
            Mode::Auto,
            &[]
        )
        .decision,
        Allow
    );
    assert_eq!(
        connect(&p, "index.crates.io", 443, Mode::Auto, &[]).decision,
        Ask
    );
    let mut stray = net_rule(Some("example.com"), None, Deny);
    stray.tool = "*".into();
    let p = net_policy(vec![stray], &NetworkConfig::default());
    assert_eq!(bash(&p, "ls", Mode::Auto).decision, Allow);
}

#[test]
fn e10_a_default_of_allow_does_not_open_this_machine() {
    let network = NetworkConfig {
        default: NetworkDefault::Allow,
        ..NetworkConfig::default()
    };
    let p = net_policy(vec![], &network);
    for host in [
        "localhost",
        "db.localhost",
        "127.0.0.1",
        "::1",
        "::ffff:127.0.0.1",
        "0.0.0.0",
        // Issue 40: every non-public address too, however spelt.
        "10.0.0.5",
        "192.168.1.1",
        "172.16.0.1",
        "100.64.0.1",
        "169.254.169.254",
        "224.0.0.1",
        "255.255.255.255",
        "192.0.2.2",
        "fd00::2",
        "fe80::1",
        "ff02::1",
        "::ffff:10.0.0.5",
    ] {
        let j = connect(&p, host, 5432, Mode::Auto, &[]);
        assert_eq!(j.decision, Ask, "{host}: {}", j.reason);
        assert!(
            j.reason.contains("does not cover this machine"),
            "{}",
            j.reason
        );
    }
    for public in ["example.com", "93.184.216.34", "2606:4700::1111"] {
        assert_eq!(
            connect(&p, public, 443, Mode::Auto, &[]).decision,
            Allow,
            "{public}"
        );
    }
    // A rule naming the host still allows it.
    let rule = net_rule(Some("10.0.0.5"), None, Allow);
    let named = net_policy(vec![rule], &network);
    assert_eq!(
        connect(&named, "10.0.0.5", 5432, Mode::Auto, &[]).decision,
        Allow
    );
    let rule = net_rule(Some("localhost"), None, Allow);
    let p = net_policy(vec![rule], &network);
    assert_eq!(
        connect(&p, "localhost", 5432, Mode::Auto, &[]).decision,
        Allow
    );
}

#[test]
fn e10_without_a_rule_the_mode_and_the_network_default_decide() {
    let cases = [
        (Mode::Ask, NetworkDefault::Allow, Ask, "(mode ask)"),
        (
            Mode::Auto,
            NetworkDefault::Ask,
            Ask,
            "(mode auto: [exec.sandbox.network] default = ask)",
        ),
        (
            Mode::Auto,
            NetworkDefault::Allow,
            Allow,
            "(mode auto: [exec.sandbox.network] default = allow)",
        ),
        (
            Mode::Auto,
            NetworkDefault::Deny,
            Deny,
            "(mode auto: [exec.sandbox.network] default = deny)",
        ),
        (
            Mode::ReadOnly,
            NetworkDefault::Allow,
            Deny,
            "read-only mode",
        ),
    ];
    for (mode, default, expected, says) in cases {
        let network = NetworkConfig {
            default,
            ..NetworkConfig::default()
        };
        let j = connect(
            &net_policy(vec![], &network),
            "index.crates.io",
            443,
            mode,
            &[],
        );
        assert_eq!(j.decision, expected, "{mode:?} {default:?}");
        assert!(j.reason.contains(says), "{}", j.reason);
        assert!(
            j.reason
                .contains("index.crates.io:443 is not covered by any rule"),
            "{}",
            j.reason
        );
        let cause = if mode == Mode::ReadOnly {
            Cause::ReadOnly
        } else {
            Cause::Mode { mode }
        };
        assert_eq!(j.cause, cause);
        // An ask offers the host to "always"; nothing else offers anything.
        let offered = if expected == Ask {
            vec![Grant::Host("index.crates.io".into())]
        } else {
            vec![]
        };
        assert_eq!(j.grants_on_allow_always, offered);
    }
    // The default is `ask`.
    let j = connect(
        &net_policy(vec![], &NetworkConfig::default()),
        "a.b",
        1,
        Mode::Auto,
        &[],
    );
    assert_eq!(j.decision, Ask);
}

#[test]
fn e10_a_host_grant_allows_that_host_on_any_port_and_never_a_command() {
    let p = net_policy(
        vec![net_rule(Some("evil.example"), None, Deny)],
        &NetworkConfig::default(),
    );
    let host = Grant::host("Index.Crates.io.").unwrap();
    assert_eq!(host, Grant::Host("index.crates.io".into()));
    assert_eq!(host.display(), "network index.crates.io");
    for port in [443, 80] {
        let j = connect(
            &p,
            "index.crates.io",
            port,
            Mode::Ask,
            std::slice::from_ref(&host),
        );
        assert_eq!(j.decision, Allow);
        assert_eq!(
            j.cause,
            Cause::Grant {
                prefix: "network index.crates.io".into()
            }
        );
    }
    // Not another host, nor its subdomains; a rule still comes first.
    assert_eq!(
        connect(
            &p,
            "static.crates.io",
            443,
            Mode::Ask,
            std::slice::from_ref(&host)
        )
        .decision,
        Ask
    );
    let evil = Grant::host("evil.example").unwrap();
    assert_eq!(
        connect(&p, "evil.example", 443, Mode::Ask, &[evil]).decision,
        Deny
    );
    // A command grant never allows a host, a host grant never a command.
    let words = Grant::of("network index.crates.io");
    assert_eq!(
        connect(&p, "index.crates.io", 443, Mode::Ask, &[words]).decision,
        Ask
    );
    let j = bash_with(
        &p,
        "network index.crates.io",
        Mode::Ask,
        std::slice::from_ref(&host),
    );
    assert_eq!(j.decision, Ask);
    let j = bash_with(&p, "index.crates.io", Mode::Ask, &[host]);
    assert_eq!(j.decision, Ask);
}

#[test]
fn e10_a_call_without_a_valid_host_or_port_is_denied() {
    let p = net_policy(
        vec![rule("network", None, Allow)],
        &NetworkConfig::default(),
    );
    for arguments in [
        json!({"port": 443}),
        json!({"host": "", "port": 443}),
        json!({"host": "a b", "port": 443}),
        json!({"host": "example.com"}),
        json!({"host": "example.com", "port": 0}),
        json!({"host": "example.com", "port": 65536}),
        json!({"host": "example.com", "port": "443"}),
    ] {
        let j = p.judge("network", &arguments, Mode::Auto, &[]);
        assert_eq!(j.decision, Deny, "{arguments}");
        assert!(
            j.reason.starts_with("network call without a valid"),
            "{}",
            j.reason
        );
    }
}

#[test]
fn e10_the_sugar_lists_are_rules_that_name_their_key() {
    let network = NetworkConfig {
        allow: vec!["*.crates.io".into(), "[::1]:8080".into()],
        deny: vec!["static.crates.io:443".into()],
        ..NetworkConfig::default()
    };
    let p = net_policy(vec![rule("bash", Some("ls"), Allow)], &network);
    let j = connect(&p, "index.crates.io", 443, Mode::Ask, &[]);
    assert_eq!(j.decision, Allow);
    assert_eq!(
        j.cause,
        Cause::Rule {
            index: 1,
            rule: "rule network host `*.crates.io` (allow)".into(),
            origin: Some("[exec.sandbox.network] allow".into()),
        }
    );
    let j = connect(&p, "static.crates.io", 443, Mode::Ask, &[]);
    assert_eq!(j.decision, Deny);
    assert!(
        matches!(&j.cause, Cause::Rule { index: 3, origin: Some(o), .. } if o == "[exec.sandbox.network] deny"),
        "{:?}",
        j.cause
    );
    assert_eq!(
        connect(&p, "static.crates.io", 80, Mode::Ask, &[]).decision,
        Allow
    );
    assert_eq!(connect(&p, "::1", 8080, Mode::Ask, &[]).decision, Allow);
    assert_eq!(connect(&p, "::1", 8081, Mode::Ask, &[]).decision, Ask);
    // What explain prints points at the key.
    let text = explain::render_network("static.crates.io:443", "ask", &j);
    assert!(
        text.starts_with("deny: rule 3 at [exec.sandbox.network] deny: rule network host `static.crates.io` port 443 (deny)"),
        "{text}"
    );
    assert!(text.contains("  network: static.crates.io:443\n"), "{text}");
    // A bad entry matches nothing (and check_network refuses the config).
    let bad = NetworkConfig {
        deny: vec!["not a host".into()],
        ..NetworkConfig::default()
    };
    let p = net_policy(vec![], &bad);
    assert_eq!(
        connect(&p, "index.crates.io", 443, Mode::Auto, &[]).decision,
        Ask
    );
}

#[test]
fn e10_check_config_reports_misplaced_and_invalid_host_rules_and_bad_sugar() {
    let mut stray = net_rule(Some("example.com"), Some(443), Deny);
    stray.tool = "bash".into();
    stray.origin = Some("dsh.toml:3".into());
    let mut with_command = net_rule(None, None, Allow);
    with_command.command = Some("curl".into());
    let config = PermissionsConfig {
        rules: vec![
            stray,
            net_rule(Some("*.*.example"), None, Deny),
            net_rule(Some("ok.example"), Some(0), Deny),
            with_command,
            PermissionRule {
                examples: vec!["a.crates.io".into(), "b.crates.io:80".into()],
                not_examples: vec!["crates.io".into()],
                ..net_rule(Some("*.crates.io"), None, Allow)
            },
            PermissionRule {
                examples: vec!["crates.io".into(), "*.x.io".into()],
                ..net_rule(Some("*.crates.io"), Some(443), Allow)
            },
        ],
        ..PermissionsConfig::default()
    };
    let failed: Vec<String> = check_config(&config).iter().map(|f| f.0.clone()).collect();
    let expected = [
        "dsh.toml:3: rule 0 (rule bash host `example.com` port 443 (deny)): `host` and `port` apply only to tool `network`",
        "rule 1: `host` `*.*.example`: `*.` must be followed by a host name",
        "rule 2 (rule network host `ok.example` port 0 (deny)): `port` must be from 1 to 65535",
        "rule 3 (rule network `curl` (allow)): `command` does not apply to tool `network` (use `host` and `port`)",
        "rule 5 (rule network host `*.crates.io` port 443 (allow)) should match `crates.io`",
        "rule 5 (rule network host `*.crates.io` port 443 (allow)): example `*.x.io` is a pattern, not a host",
    ];
    assert_eq!(failed, expected);
    let network = NetworkConfig {
        allow: vec!["*.crates.io".into(), "crates.io:https".into()],
        deny: vec!["[::1".into()],
        ..NetworkConfig::default()
    };
    let failed: Vec<String> = check_network(&network)
        .iter()
        .map(|f| f.0.clone())
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed[0].starts_with("[exec.sandbox.network] allow: `crates.io:https`"),
        "{failed:?}"
    );
    assert!(
        failed[1].starts_with("[exec.sandbox.network] deny: `[::1`"),
        "{failed:?}"
    );
    assert!(check_network(&NetworkConfig::default()).is_empty());
}

#[test]
fn e10_grants_read_every_stored_form_and_write_a_host_distinctly() {
    // What logs, grants.json and audit lines already hold: arrays of words.
    let old: Vec<Grant> = serde_json::from_str(r#"[["git","push"],["make"]]"#).unwrap();
    assert_eq!(old, [Grant::of("git push"), Grant::of("make")]);
    let both = vec![Grant::of("git push"), Grant::Host("index.crates.io".into())];
    let text = serde_json::to_string(&both).unwrap();
    assert_eq!(text, r#"[["git","push"],{"host":"index.crates.io"}]"#);
    assert_eq!(serde_json::from_str::<Vec<Grant>>(&text).unwrap(), both);
    // A stored host is read in the one form hosts are compared in; garbage is refused.
    let read: Grant = serde_json::from_str(r#"{"host":"Index.Crates.IO."}"#).unwrap();
    assert_eq!(read, Grant::Host("index.crates.io".into()));
    assert!(serde_json::from_str::<Grant>(r#"{"host":"a b"}"#).is_err());
    assert!(serde_json::from_str::<Grant>(r#""git push""#).is_err());
    // Revoking by what was shown names both spellings.
    assert_eq!(
        Grant::named("network index.crates.io"),
        [
            Grant::of("network index.crates.io"),
            Grant::Host("index.crates.io".into())
        ]
    );
    assert_eq!(Grant::named("git push"), [Grant::of("git push")]);
    assert_eq!(Grant::Host("x.io".into()).words(), None);
}
