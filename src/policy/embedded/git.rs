//! git's row (P3b): config keys whose value runs (`-c`, `--config-env`, `git config`,
//! `clone -c`), subcommand options that run a command (`clone -u`, `fetch-pack --exec`),
//! and the `ext::` transport, whose URL is a command git runs. Everything else git is
//! given (messages, paths, revisions) is data.

use super::{COMMAND, Row, Spot, joined, scan_spots, script, spot, through_opaque};
use crate::policy::inner::InnerCommand;
use crate::policy::word::Word;

/// Git config keys whose value runs (lower-cased section and key; `*` a subsection).
/// `alias.*` and `credential.helper` run a command line only when the value starts with
/// `!` (otherwise it is git's own arguments, or a helper's name); paths of hooks and
/// included files are opaque.
const GIT_KEYS: &[(&str, GitValue)] = &[
    ("core.pager", GitValue::Command),
    ("core.editor", GitValue::Command),
    ("core.sshcommand", GitValue::Command),
    ("core.fsmonitor", GitValue::Command),
    ("core.askpass", GitValue::Command),
    ("core.gitproxy", GitValue::Command),
    ("core.hookspath", GitValue::File),
    ("init.templatedir", GitValue::File),
    ("include.path", GitValue::File),
    ("includeif.*.path", GitValue::File),
    ("diff.external", GitValue::Command),
    ("diff.*.textconv", GitValue::Command),
    ("diff.*.command", GitValue::Command),
    ("alias.*", GitValue::Alias),
    ("credential.helper", GitValue::Helper),
    ("credential.*.helper", GitValue::Helper),
    ("sequence.editor", GitValue::Command),
    ("gpg.program", GitValue::Command),
    ("gpg.*.program", GitValue::Command),
    ("gpg.ssh.defaultkeycommand", GitValue::Command),
    ("filter.*.clean", GitValue::Command),
    ("filter.*.smudge", GitValue::Command),
    ("filter.*.process", GitValue::Command),
    ("merge.*.driver", GitValue::Command),
    ("uploadpack.packobjectshook", GitValue::Command),
    ("pager.*", GitValue::Command),
    ("difftool.*.cmd", GitValue::Command),
    ("mergetool.*.cmd", GitValue::Command),
    ("browser.*.cmd", GitValue::Command),
    ("man.*.cmd", GitValue::Command),
    ("remote.*.uploadpack", GitValue::Command),
    ("remote.*.receivepack", GitValue::Command),
    ("remote.*.proxy", GitValue::Command),
    ("submodule.*.update", GitValue::Alias),
    ("sendemail.sendmailcmd", GitValue::Command),
    ("sendemail.tocmd", GitValue::Command),
    ("sendemail.cccmd", GitValue::Command),
    // Issue 41: more keys git runs.
    ("trailer.*.cmd", GitValue::Command),
    ("trailer.*.command", GitValue::Command),
    ("interactive.difffilter", GitValue::Command),
    ("core.alternaterefscommand", GitValue::Command),
    ("web.browser", GitValue::Command),
    ("browser.*.path", GitValue::Command),
    ("instaweb.httpd", GitValue::Command),
    ("uploadarchive.allowunreachable", GitValue::Data),
];

/// What a git config value holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GitValue {
    Command,
    /// A command line after `!`, else git's own arguments (judged as `git VALUE`).
    Alias,
    /// A command line after `!`, else a helper: an absolute path or `git credential-NAME`.
    Helper,
    File,
    /// Listed only to say it runs nothing.
    Data,
}

/// Whether the config key `key` (as given: section and name case-insensitive, a
/// subsection as is) is `pattern`.
fn key_is(key: &str, pattern: &str) -> bool {
    let parts: Vec<&str> = pattern.split('.').collect();
    let (Some(section), Some(name)) = (key.split('.').next(), key.rsplit('.').next()) else {
        return false;
    };
    let has_sub = key.matches('.').count() >= 2;
    match parts.as_slice() {
        [s, n] if *n == "*" => section.eq_ignore_ascii_case(s) && key.contains('.'),
        [s, n] => !has_sub && section.eq_ignore_ascii_case(s) && name.eq_ignore_ascii_case(n),
        [s, _, n] => has_sub && section.eq_ignore_ascii_case(s) && name.eq_ignore_ascii_case(n),
        _ => false,
    }
}

/// `-c key=value` (also what `git config KEY VALUE` stores): the command its key runs.
fn git_config(word: &Word, text: &str) -> Option<InnerCommand> {
    let (key, value) = text.split_once('=').unwrap_or((text, ""));
    let (_, holds) = GIT_KEYS.iter().find(|(pattern, _)| key_is(key, pattern))?;
    let how = format!("-c {key}");
    if word.dynamic {
        return Some(through_opaque(
            &how,
            word,
            "a config value the program runs is known only when the line runs",
        ));
    }
    Some(match holds {
        GitValue::Data => return None,
        GitValue::Command => InnerCommand::through(how, script(value)),
        GitValue::File => through_opaque(
            &how,
            word,
            "it names hooks or a config file, which cannot be seen from the line",
        ),
        GitValue::Alias | GitValue::Helper => match value.strip_prefix('!') {
            Some(line) => InnerCommand::through(how, script(line)),
            None if *holds == GitValue::Alias => {
                InnerCommand::through(how, script(&format!("git {value}")))
            }
            // A helper's name is `git credential-NAME`, its path that program.
            None => InnerCommand::through(how, script(value)),
        },
    })
}

/// git's options before its subcommand that take a value in the next word.
const GIT_VALUES: &[&str] = &[
    "-C",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--super-prefix",
    "--config-env",
    "--attr-source",
    "--list-cmds",
];

/// Options of git subcommands whose value is a command line, `(subcommand, short, long)`.
const GIT_SUBCOMMAND_SPOTS: &[(&str, Option<char>, &str)] = &[
    ("rebase", Some('x'), "exec"),
    ("difftool", Some('x'), "extcmd"),
    ("fetch", None, "upload-pack"),
    ("pull", None, "upload-pack"),
    ("clone", Some('u'), "upload-pack"),
    ("ls-remote", None, "upload-pack"),
    ("archive", None, "exec"),
    ("push", None, "receive-pack"),
    ("push", None, "exec"),
    ("ls-remote", None, "exec"),
    ("fetch-pack", None, "upload-pack"),
    ("fetch-pack", None, "exec"),
    ("send-pack", None, "receive-pack"),
    ("send-pack", None, "exec"),
    ("send-email", None, "to-cmd"),
    ("send-email", None, "cc-cmd"),
    ("send-email", None, "sendmail-cmd"),
    ("filter-branch", None, "env-filter"),
    ("filter-branch", None, "tree-filter"),
    ("filter-branch", None, "index-filter"),
    ("filter-branch", None, "parent-filter"),
    ("filter-branch", None, "msg-filter"),
    ("filter-branch", None, "commit-filter"),
    ("filter-branch", None, "tag-name-filter"),
];

/// `git [OPTIONS] SUBCOMMAND [ARGS]`: `-c key=value` before the subcommand; then what the
/// subcommand runs: options of [`GIT_SUBCOMMAND_SPOTS`], `grep -O[CMD]`, `config KEY VALUE`
/// for a key that runs, `submodule foreach CMD`, `bisect run CMD...`. Everything else
/// (messages, paths, revisions) is data.
pub(super) fn git(_row: &Row, args: &[Word]) -> Vec<InnerCommand> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        let Some(width) = global_option_width(text) else {
            break;
        };
        if text == "-c" {
            if let Some(value) = args.get(i + 1) {
                found.extend(git_config(value, &value.text));
            }
        } else if let Some(value) = text.strip_prefix("-c").filter(|v| !v.is_empty()) {
            found.extend(git_config(word, value));
        } else if text == "--exec-path" || text.starts_with("--exec-path=") {
            // Which git programs run: the judge cannot know them.
            let inner = InnerCommand::Opaque {
                words: vec![word.clone()],
                why: "`--exec-path` chooses the programs git runs".into(),
            };
            found.push(InnerCommand::through("--exec-path", inner));
        } else if let Some(value) = config_env_value(args, i) {
            // `--config-env=KEY=VAR`: the value of KEY is the variable's, which the line
            // may not show; a key that runs is opaque.
            found.extend(config_env(value));
        }
        i += width;
    }
    let Some(sub) = args.get(i).filter(|w| !w.dynamic) else {
        return found;
    };
    let rest = &args[i + 1..];
    let sub = sub.text.as_str();
    let spots: Vec<Spot> = GIT_SUBCOMMAND_SPOTS
        .iter()
        .filter(|(name, _, _)| *name == sub)
        .map(|&(_, short, long)| spot(short, long, COMMAND))
        .chain((sub == "grep").then_some(Spot {
            optional: true,
            ..spot(Some('O'), "open-files-in-pager", COMMAND)
        }))
        .collect();
    if !spots.is_empty() {
        found.extend(scan_spots("", &spots, rest, false).found.into_iter().map(
            |inner| match inner {
                InnerCommand::Through { how, inner } => InnerCommand::Through {
                    how: format!("{sub} {how}"),
                    inner,
                },
                other => other,
            },
        ));
    }
    match sub {
        // Every operand that is a key which runs, with the word after it as its value:
        // not positions, so `-f FILE`, `--file=F`, `set`, `--type T` or any option of a
        // newer git cannot shift the key out of sight (issue 41).
        "config" => {
            for (at, key) in rest.iter().enumerate() {
                if key.text.starts_with('-') {
                    continue;
                }
                let value = rest.get(at + 1);
                let joined = Word {
                    text: format!("{}={}", key.text, value.map_or("", |v| v.text.as_str())),
                    dynamic: key.dynamic || value.is_some_and(|v| v.dynamic),
                    ..Word::default()
                };
                found.extend(git_config(&joined, &joined.text).map(|inner| match inner {
                    InnerCommand::Through { how, inner } => InnerCommand::Through {
                        how: how.replacen("-c", "config", 1),
                        inner,
                    },
                    other => other,
                }));
            }
        }
        // `clone -c KEY=VALUE` (`--config`): set in the new repository and used by the clone.
        "clone" => found.extend(clone_config(rest)),
        "submodule" => {
            if let Some(at) = rest.iter().position(|w| w.text == "foreach") {
                let command: Vec<Word> = rest[at + 1..]
                    .iter()
                    .skip_while(|w| w.text.starts_with('-'))
                    .cloned()
                    .collect();
                found.extend(joined("submodule foreach", &command));
            }
        }
        "bisect" if rest.len() > 1 && rest[0].text == "run" => {
            found.push(InnerCommand::through(
                "bisect run",
                InnerCommand::Command {
                    words: rest[1..].to_vec(),
                    risky_env: false,
                    assigned: Vec::new(),
                },
            ));
        }
        _ => {}
    }
    found.extend(args.iter().filter_map(ext_transport));
    found
}

/// How many words the global option `text` of git spans (itself and its value), or None
/// when it is no option: then it is the subcommand. One reading for [`git`] and
/// [`may_run_from`], so the two cannot disagree on where the subcommand is.
fn global_option_width(text: &str) -> Option<usize> {
    if text == "-c" || GIT_VALUES.contains(&text) {
        Some(2)
    } else if text.starts_with('-') {
        Some(1)
    } else {
        None
    }
}

/// Subcommands none of whose options or operands holds a command or a config key git
/// runs: a word the line builds at run time is data to them (`git checkout "$(git
/// merge-base a b)"`). An allowlist: any other subcommand may read such a word as an
/// option that runs (`--upload-pack`, `-x`), a key (`config`) or an `ext::` transport.
const GIT_DATA_SUBCOMMANDS: &[&str] = &[
    "add",
    "apply",
    "blame",
    "branch",
    "cat-file",
    "checkout",
    "clean",
    // `git commit -m "$(cat <<'EOF' ...)"`: how agents write a commit message.
    "commit",
    "describe",
    "diff",
    "log",
    "ls-files",
    "ls-tree",
    "merge-base",
    "mv",
    "notes",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "rm",
    "shortlog",
    "show",
    "stash",
    "status",
    "switch",
    "tag",
];

/// Whether git may run what a word at `args[at]` holds, were it any word at all: a global
/// option or the subcommand itself (`-cpager.log=...`), or a word of a subcommand that is
/// not [`GIT_DATA_SUBCOMMANDS`] (issue 41: a value the judge cannot know).
pub(super) fn may_run_from(args: &[String], at: usize) -> bool {
    let mut sub = 0;
    while let Some(width) = args.get(sub).and_then(|w| global_option_width(w)) {
        sub += width;
    }
    at <= sub
        || !args
            .get(sub)
            .is_some_and(|name| GIT_DATA_SUBCOMMANDS.contains(&name.as_str()))
}

/// The value of `--config-env KEY=VAR` (or `--config-env=KEY=VAR`) at `args[i]`.
fn config_env_value(args: &[Word], i: usize) -> Option<&Word> {
    let word = args.get(i)?;
    if word.text == "--config-env" {
        return args.get(i + 1);
    }
    word.text.strip_prefix("--config-env=").map(|_| word)
}

/// A `--config-env` whose key runs its value: the value is a variable's, opaque.
fn config_env(word: &Word) -> Option<InnerCommand> {
    let text = word
        .text
        .strip_prefix("--config-env=")
        .unwrap_or(&word.text);
    let (key, _) = text.split_once('=')?;
    GIT_KEYS
        .iter()
        .any(|(pattern, holds)| *holds != GitValue::Data && key_is(key, pattern))
        .then(|| {
            through_opaque(
                &format!("--config-env {key}"),
                word,
                "git runs the value of a variable here, which the line may not show",
            )
        })
}

/// `clone`'s `-c KEY=VALUE`, `-cKEY=VALUE`, `--config KEY=VALUE`, `--config=KEY=VALUE`
/// (and `--conf`, any prefix git's option parser takes).
fn clone_config(rest: &[Word]) -> Vec<InnerCommand> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(word) = rest.get(i) {
        i += 1;
        let text = word.text.as_str();
        if text == "--" {
            break;
        }
        let value = if text == "-c" || is_config_prefix(text) {
            i += 1;
            rest.get(i - 1).map(|w| (w, w.text.as_str()))
        } else if let Some(v) = text.strip_prefix("-c") {
            Some((word, v))
        } else if let Some((name, v)) = text.split_once('=')
            && is_config_prefix(name)
        {
            Some((word, v))
        } else {
            None
        };
        if let Some((word, value)) = value {
            found.extend(git_config(word, value).map(|inner| match inner {
                InnerCommand::Through { how, inner } => InnerCommand::Through {
                    how: how.replacen("-c", "clone -c", 1),
                    inner,
                },
                other => other,
            }));
        }
    }
    found
}

/// `--config`, or a prefix of it git accepts (`--conf`).
fn is_config_prefix(text: &str) -> bool {
    text.strip_prefix("--")
        .is_some_and(|name| name.len() >= 3 && "config".starts_with(name))
}

/// The `ext::` transport: a URL `ext::CMD ARGS` is a command git runs (with `% ` a space,
/// `%%` a percent sign, `%s`/`%S` the service's name). A word that holds `ext::` anywhere
/// else (`url.ext::....insteadOf`, `remote.x.url=ext::...`) is opaque: what it turns into
/// is not read here.
fn ext_transport(word: &Word) -> Option<InnerCommand> {
    let at = word.text.find("ext::")?;
    let command = word.text[at..].strip_prefix("ext::")?;
    if at > 0 || word.dynamic {
        return Some(through_opaque(
            "ext::",
            word,
            "it holds an `ext::` transport, a command git runs",
        ));
    }
    let mut line = String::with_capacity(command.len());
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            line.push(c);
            continue;
        }
        match chars.next() {
            Some(' ') => line.push(' '),
            Some('%') => line.push('%'),
            Some('s' | 'S') => line.push_str("git-upload-pack"),
            Some(other) => {
                line.push('%');
                line.push(other);
            }
            None => line.push('%'),
        }
    }
    Some(InnerCommand::through("ext::", script(&line)))
}

#[cfg(test)]
mod tests {
    use crate::config::Decision::{Allow, Ask, Deny};
    use crate::policy::embedded::tests::decide;

    /// P3b (issue 41): the `ext::` transport, more keys that run, `config` with its
    /// options, `clone -c`, `fetch-pack`/`send-pack`.
    #[test]
    fn p3b_git_runs_what_these_places_hold() {
        for line in [
            "git ls-remote 'ext::sh -c rm% x'",
            "git clone 'ext::rm x' d",
            "git -c trailer.t.cmd='rm x' commit --trailer t=1",
            "git -c trailer.t.command='rm x' interpret-trailers",
            "git -c interactive.diffFilter='rm x' add -p",
            "git config -f .git/config alias.x '!rm x'",
            "git config --file=.git/config alias.x '!rm x'",
            "git config set alias.x '!rm x'",
            "git config --type string core.pager 'rm x'",
            "git clone -c core.sshCommand='rm x' ssh://h/r",
            "git clone --config=core.sshCommand='rm x' ssh://h/r",
            "git clone --conf core.sshCommand='rm x' ssh://h/r",
            "git fetch-pack --exec='rm x' file:///r",
            "git send-pack --receive-pack='rm x' file:///r",
        ] {
            assert_eq!(decide(line), Deny, "{line}");
        }
        for line in [
            "git -c 'url.ext::sh.insteadOf=https://' fetch",
            "git --config-env=core.pager=P log",
        ] {
            assert_eq!(decide(line), Ask, "{line}");
        }
        for line in [
            "git config user.name 'rm x'",
            "git config -f .gitmodules --get-regexp path",
            "git clone -c http.sslVerify=false https://h/r",
            "git --config-env=user.name=N log",
        ] {
            assert_eq!(decide(line), Allow, "{line}");
        }
    }
}
