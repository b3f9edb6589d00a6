//! Commands hidden in a program's options, config keys and arguments (P3b).
//!
//! This file owns the table of programs that are not wrappers, yet run a command line given
//! to them in an option (`tar --to-command=CMD`, `rsync -e CMD`, `ssh -o ProxyCommand=CMD`),
//! a config key (`git -c core.fsmonitor=CMD`, a `!` alias), or an argument (`tmux new CMD`,
//! `gdb -ex 'shell CMD'`). One row per program says where; the shell walk judges what comes
//! back as more segments, through the same judge (wrappers and all), so a deny inside
//! denies. A place that names a file of commands (`ssh -F`, `tar --info-script`,
//! `git -c core.hooksPath`) is opaque: the file cannot be seen from the line (P5).
//!
//! A row also says that everything else its program is given is data: `git commit -m "rm old
//! files"` and `grep "rm -rf" notes.md` run nothing. For a program with no row here and no
//! wrapper row, the judge's safety net (P3b, [`has_row`]) asks about an argument that parses
//! as a command line naming a denied command.
//!
//! Options are read as getopt_long reads them, without the program's whole grammar: a long
//! option by any prefix of its name (`--to-c` is `--to-command`: a prefix the real program
//! finds ambiguous is refused by it, so reading it as ours only judges more), a value
//! attached or in the next word, short options in clusters up to a letter that takes a value.
//! A whole word known only at run time (`tar $OPTS`) is not read as an option; a word that
//! starts as one of ours and holds an expansion (`--to-command=$X`) is opaque.

use super::inner::InnerCommand;
use super::word::Word;

/// What the value in one of a program's places is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holds {
    /// A command line the program runs (through `sh -c`, or split into words).
    CommandLine,
    /// A file of commands or code: opaque.
    File,
    /// An ssh option `Key=Value` or `Key Value`: some keys run a command ([`SSH_KEYS`]).
    SshOption,
}

/// One option of a program whose value holds a command or a file of them.
#[derive(Debug, Clone, Copy)]
struct Spot {
    short: Option<char>,
    /// The long name (without `--`), or `""` for none.
    long: &'static str,
    /// The value is only attached (`-Ocmd`, `--open-files-in-pager=cmd`).
    optional: bool,
    /// Text the value starts with before the command (`exec=` of tar's
    /// `--checkpoint-action`); a value without it holds no command.
    prefix: &'static str,
    holds: Holds,
}

const fn spot(short: Option<char>, long: &'static str, holds: Holds) -> Spot {
    Spot {
        short,
        long,
        optional: false,
        prefix: "",
        holds,
    }
}

const COMMAND: Holds = Holds::CommandLine;
const FILE: Holds = Holds::File;

/// How a row finds the commands in its program's words.
#[derive(Clone, Copy)]
enum Reads {
    /// The options in `spots`, anywhere among the words (the program permutes).
    Options,
    /// Only the row's own function knows (subcommands, operands that are commands).
    Custom(fn(&Row, &[Word]) -> Vec<InnerCommand>),
    /// Nothing it is given runs: its arguments are data (messages, patterns, text).
    Data,
}

/// One program that runs commands from its options, config or arguments, or whose
/// arguments are data.
struct Row {
    name: &'static str,
    /// Short letters of the program that take a value (a cluster ends at one).
    short_values: &'static str,
    spots: &'static [Spot],
    reads: Reads,
}

const fn options(name: &'static str, short_values: &'static str, spots: &'static [Spot]) -> Row {
    Row {
        name,
        short_values,
        spots,
        reads: Reads::Options,
    }
}

const fn data(name: &'static str) -> Row {
    Row {
        name,
        short_values: "",
        spots: &[],
        reads: Reads::Data,
    }
}

/// tar's short options that take a value.
const TAR_VALUES: &str = "bCfFgHIKLNTVX";

const TAR_SPOTS: &[Spot] = &[
    spot(None, "to-command", COMMAND),
    spot(Some('I'), "use-compress-program", COMMAND),
    spot(None, "rsh-command", COMMAND),
    Spot {
        prefix: "exec=",
        ..spot(None, "checkpoint-action", COMMAND)
    },
    spot(Some('F'), "info-script", FILE),
    spot(None, "new-volume-script", FILE),
];

const SSH_SPOTS: &[Spot] = &[
    spot(Some('o'), "", Holds::SshOption),
    spot(Some('F'), "", FILE),
];

/// The table. Option names were read off the programs' manuals on Debian 12 (GNU tar 1.34,
/// OpenSSH 9.2, rsync 3.2, git 2.39, tmux 3.3, gdb 13, GNU parallel, screen 4.9); the
/// walk-around table runs each form against the real program.
static ROWS: &[Row] = &[
    Row {
        reads: Reads::Custom(tar),
        ..options("tar", TAR_VALUES, TAR_SPOTS)
    },
    Row {
        reads: Reads::Custom(ssh),
        ..options("ssh", "BbcDEeFIiJLlmOoPpQRSWw", SSH_SPOTS)
    },
    options(
        "scp",
        "cDFiJloPSX",
        &[
            spot(Some('o'), "", Holds::SshOption),
            spot(Some('F'), "", FILE),
            spot(Some('S'), "", COMMAND),
        ],
    ),
    options(
        "sftp",
        "BbcDFiJloPRSs",
        &[
            spot(Some('o'), "", Holds::SshOption),
            spot(Some('F'), "", FILE),
            spot(Some('S'), "", COMMAND),
            spot(Some('D'), "", COMMAND),
            // A batch file's lines may start with `!`, a local shell command.
            spot(Some('b'), "", FILE),
        ],
    ),
    options(
        "rsync",
        "eBfMT",
        &[
            spot(Some('e'), "rsh", COMMAND),
            spot(None, "rsync-path", COMMAND),
        ],
    ),
    Row {
        reads: Reads::Custom(git),
        ..options("git", "cC", &[])
    },
    Row {
        reads: Reads::Custom(tmux),
        ..options("tmux", "cfLST", &[spot(Some('f'), "", FILE)])
    },
    Row {
        reads: Reads::Custom(gdb),
        ..options("gdb", "", &[])
    },
    Row {
        reads: Reads::Custom(screen),
        ..options("screen", "", &[])
    },
    Row {
        reads: Reads::Custom(parallel),
        ..options("parallel", "", &[])
    },
    // What it opens with is the desktop's choice; `BROWSER=` is judged as a variable.
    data("xdg-open"),
    data("echo"),
    data("printf"),
    data("grep"),
    data("egrep"),
    data("fgrep"),
    data("rg"),
    data("ag"),
    data("ack"),
    data("man"),
    data("logger"),
    data("notify-send"),
];

/// Whether `name` has a row here: then its row says where its commands are and the rest of
/// its words is data, so the judge's safety net for unknown programs (P3b) leaves it alone.
pub fn has_row(name: &str) -> bool {
    ROWS.iter().any(|row| row.name == name)
}

/// The commands that `words` (a simple command) runs from its options, config keys and
/// arguments, each found [`InnerCommand::Through`] the place that holds it.
pub fn commands_in(words: &[Word]) -> Vec<InnerCommand> {
    let Some(name) = words.first().filter(|name| name.is_known_name()) else {
        return Vec::new();
    };
    let base = name.base_name();
    let Some(row) = ROWS.iter().find(|row| row.name == base) else {
        return Vec::new();
    };
    let args = &words[1..];
    match row.reads {
        Reads::Options => scan(row, args).found,
        Reads::Custom(read) => read(row, args),
        Reads::Data => Vec::new(),
    }
}

/// What [`scan`] finds in a program's words.
#[derive(Default)]
struct Scanned {
    found: Vec<InnerCommand>,
    /// Indices of the words that are not options or their values, in order.
    operands: Vec<usize>,
}

/// Reads `args` as getopt_long does (permuting, up to `--`), collecting what the row's
/// spots hold. With `stop_at_operand`, stops at the first operand (the rest is another
/// command's: a subcommand's or a remote one's).
fn scan_from(row: &Row, args: &[Word], stop_at_operand: bool) -> Scanned {
    scan_spots(row.short_values, row.spots, args, stop_at_operand)
}

/// [`scan_from`] over `spots`, with `short_values` the letters that take a value.
fn scan_spots(short_values: &str, spots: &[Spot], args: &[Word], stop_at_operand: bool) -> Scanned {
    let mut out = Scanned::default();
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        let text = word.text.as_str();
        if text == "--" {
            out.operands.extend(i..args.len());
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            // Every spot the prefix names (the real program refuses an ambiguous one; reading
            // it as each only judges more), all with the one value the word has.
            let named: Vec<&Spot> = spots
                .iter()
                .filter(|s| !s.long.is_empty() && !name.is_empty() && s.long.starts_with(name))
                .collect();
            let takes_next = attached.is_none() && named.iter().any(|s| !s.optional);
            let value = match attached {
                Some(value) => Some(Value::of(word, value)),
                None if takes_next => {
                    i += 1;
                    args.get(i - 1).map(|w| Value::of(w, &w.text))
                }
                None => None,
            };
            if let Some(value) = value {
                for spot in named.iter().filter(|s| attached.is_some() || !s.optional) {
                    out.found
                        .extend(held(spot, &format!("--{}", spot.long), value));
                }
            }
            continue;
        }
        if text.len() > 1 && text.starts_with('-') {
            for (at, letter) in text.char_indices().skip(1) {
                let rest = &text[at + letter.len_utf8()..];
                if let Some(spot) = spots.iter().find(|s| s.short == Some(letter)) {
                    let value = if !rest.is_empty() {
                        Some(Value::of(word, rest))
                    } else if spot.optional {
                        None
                    } else {
                        i += 1;
                        args.get(i - 1).map(|w| Value::of(w, &w.text))
                    };
                    if let Some(value) = value {
                        out.found.extend(held(spot, &format!("-{letter}"), value));
                    }
                    break;
                }
                if short_values.contains(letter) {
                    if rest.is_empty() {
                        i += 1;
                    }
                    break;
                }
            }
            continue;
        }
        out.operands.push(i - 1);
        if stop_at_operand {
            out.operands.extend(i..args.len());
            break;
        }
    }
    out
}

fn scan(row: &Row, args: &[Word]) -> Scanned {
    scan_from(row, args, false)
}

/// An option's value: its text and whether it is known before the line runs.
#[derive(Clone, Copy)]
struct Value<'a> {
    text: &'a str,
    known: bool,
    word: &'a Word,
}

impl<'a> Value<'a> {
    fn of(word: &'a Word, text: &'a str) -> Value<'a> {
        Value {
            text,
            known: !word.dynamic,
            word,
        }
    }
}

/// What a spot's value runs.
fn held(spot: &Spot, how: &str, value: Value) -> Option<InnerCommand> {
    let Some(text) = value.text.strip_prefix(spot.prefix) else {
        // `--checkpoint-action=echo`: another action, no command.
        return None;
    };
    if !value.known {
        return Some(through_opaque(
            how,
            value.word,
            "an option whose value the program runs is known only when the line runs",
        ));
    }
    match spot.holds {
        Holds::CommandLine => Some(InnerCommand::through(how, script(text))),
        Holds::File => Some(through_opaque(
            how,
            value.word,
            "it names a file of commands, which cannot be seen from the line",
        )),
        Holds::SshOption => ssh_option(how, value.word, text),
    }
}

fn script(text: &str) -> InnerCommand {
    InnerCommand::Script(text.to_owned())
}

fn through_opaque(how: &str, word: &Word, why: &str) -> InnerCommand {
    InnerCommand::through(
        how,
        InnerCommand::Opaque {
            words: vec![word.clone()],
            why: why.to_owned(),
        },
    )
}

/// ssh options (`ssh_config(5)`) whose value is a command line run on this host, or a file
/// of configuration (opaque). Keys are case-insensitive.
const SSH_KEYS: &[(&str, Holds)] = &[
    ("proxycommand", COMMAND),
    ("localcommand", COMMAND),
    ("knownhostscommand", COMMAND),
    ("include", FILE),
    ("pkcs11provider", FILE),
    ("securitykeyprovider", FILE),
];

/// `tar [-]LETTERS [VALUES...] [OPTIONS] [FILES]`: a first word without a dash is the
/// traditional form, each letter that takes a value taking the next word in turn (`tar cIf
/// PROG a.tar f` is `tar -c -I PROG -f a.tar f`); it is read as that, then as usual.
fn tar(row: &Row, args: &[Word]) -> Vec<InnerCommand> {
    let Some(first) = args
        .first()
        .filter(|w| !w.text.starts_with('-') && !w.dynamic)
    else {
        return scan(row, args).found;
    };
    let mut rewritten = Vec::new();
    let mut next = 1;
    for letter in first.text.chars() {
        rewritten.push(Word::literal(&format!("-{letter}")));
        if row.short_values.contains(letter)
            && let Some(value) = args.get(next)
        {
            rewritten.push(value.clone());
            next += 1;
        }
    }
    rewritten.extend(args[next.min(args.len())..].iter().cloned());
    scan(row, &rewritten).found
}

/// `-o Key=Value` or `-o "Key Value"`.
fn ssh_option(how: &str, word: &Word, text: &str) -> Option<InnerCommand> {
    let text = text.trim_start();
    let cut = text.find(|c: char| c == '=' || c.is_whitespace())?;
    let (key, value) = text.split_at(cut);
    let value = value
        .trim_start()
        .strip_prefix('=')
        .unwrap_or(value)
        .trim_start();
    let key = key.to_ascii_lowercase();
    let (_, holds) = SSH_KEYS.iter().find(|(k, _)| *k == key)?;
    let how = format!("{how} {key}");
    Some(match holds {
        Holds::CommandLine => InnerCommand::through(how, script(value)),
        _ => through_opaque(
            &how,
            word,
            "it names a file of configuration or code, which cannot be seen from the line",
        ),
    })
}

/// `ssh [OPTIONS] HOST [COMMAND...]`: besides its options, the words after the host are a
/// command line for the remote user's shell. The remote host may be this one, so it is
/// judged like any command line.
fn ssh(row: &Row, args: &[Word]) -> Vec<InnerCommand> {
    let before = scan_from(row, args, true);
    let mut found = before.found;
    // ssh reads options again right after the host (`ssh h -o ProxyCommand=...`).
    let after_host = before.operands.first().map_or(args.len(), |&host| host + 1);
    let rest = &args[after_host.min(args.len())..];
    let after = scan_from(row, rest, true);
    found.extend(after.found);
    let remote: Vec<&Word> = after.operands.iter().map(|&i| &rest[i]).collect();
    if !remote.is_empty() {
        let inner = if remote.iter().any(|w| w.dynamic) {
            InnerCommand::Opaque {
                words: remote.iter().map(|w| (*w).clone()).collect(),
                why: "the remote command is known only when the line runs".into(),
            }
        } else {
            script(
                &remote
                    .iter()
                    .map(|w| w.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        };
        found.push(InnerCommand::through("remote command", inner));
    }
    found
}

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
fn git(_row: &Row, args: &[Word]) -> Vec<InnerCommand> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        if text == "-c" {
            if let Some(value) = args.get(i + 1) {
                found.extend(git_config(value, &value.text));
            }
            i += 2;
        } else if let Some(value) = text.strip_prefix("-c").filter(|v| !v.is_empty()) {
            found.extend(git_config(word, value));
            i += 1;
        } else if text == "--exec-path" || text.starts_with("--exec-path=") {
            // Which git programs run: the judge cannot know them.
            let inner = InnerCommand::Opaque {
                words: vec![word.clone()],
                why: "`--exec-path` chooses the programs git runs".into(),
            };
            found.push(InnerCommand::through("--exec-path", inner));
            i += 1;
        } else if GIT_VALUES.contains(&text) {
            i += 2;
        } else if text.starts_with('-') {
            i += 1;
        } else {
            break;
        }
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
        "config" => {
            let operands: Vec<&Word> = rest.iter().filter(|w| !w.text.starts_with('-')).collect();
            if let [key, value, ..] = operands.as_slice() {
                let joined = Word {
                    text: format!("{}={}", key.text, value.text),
                    dynamic: key.dynamic || value.dynamic,
                    pattern: false,
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
    found
}

/// Words a program joins with spaces and hands to a shell, as one command line.
fn joined(how: &str, words: &[Word]) -> Option<InnerCommand> {
    if words.is_empty() {
        return None;
    }
    let inner = if words.iter().any(|w| w.dynamic) {
        InnerCommand::Opaque {
            words: words.to_vec(),
            why: "the command line it runs is known only when the line runs".into(),
        }
    } else {
        script(
            &words
                .iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        )
    };
    Some(InnerCommand::through(how, inner))
}

/// tmux commands that run a shell command, with the letters of their options that take a
/// value: the shell command is their first operand and what follows it.
const TMUX_RUNS: &[(&[&str], &str)] = &[
    (&["new-session", "new"], "cefFnstxy"),
    (&["new-window", "neww"], "cefFnt"),
    (&["split-window", "splitw"], "cefFlt"),
    (&["respawn-pane", "respawnp"], "cet"),
    (&["respawn-window", "respawnw"], "cet"),
    (&["run-shell", "run"], "cdt"),
    (&["pipe-pane", "pipep"], "t"),
    (&["display-popup", "popup"], "bcdehsStTwxy"),
    (&["if-shell", "if"], "t"),
];

/// tmux commands whose effect cannot be seen from the line: keys typed into a shell, a
/// file of commands.
const TMUX_OPAQUE: &[&str] = &["send-keys", "send", "source-file", "source"];

/// `tmux [OPTIONS] [COMMAND [FLAGS] [ARGS]] [; COMMAND ...]`: `-c CMD` runs CMD with the
/// shell; `-f FILE` reads a config file of commands (opaque); each tmux command of the
/// line (separated by a `;` word) may run a shell command ([`TMUX_RUNS`]).
fn tmux(row: &Row, args: &[Word]) -> Vec<InnerCommand> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        if !text.starts_with('-') || text == "-" {
            break;
        }
        i += 1;
        if text == "--" {
            break;
        }
        for (at, letter) in text.char_indices().skip(1) {
            let rest = &text[at + letter.len_utf8()..];
            if row.short_values.contains(letter) {
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i - 1)
                } else {
                    Some(word)
                };
                let text = if rest.is_empty() {
                    value.map(|w| w.text.clone()).unwrap_or_default()
                } else {
                    rest.to_owned()
                };
                if let Some(value) = value {
                    let spot = match letter {
                        'c' => Some(spot(Some('c'), "", COMMAND)),
                        'f' => Some(spot(Some('f'), "", FILE)),
                        _ => None,
                    };
                    if let Some(spot) = spot {
                        found.extend(held(&spot, &format!("-{letter}"), Value::of(value, &text)));
                    }
                }
                break;
            }
        }
    }
    for command in args[i.min(args.len())..].split(|w| w.text == ";" || w.text == "\\;") {
        found.extend(tmux_command(command));
    }
    found
}

/// One tmux command and its arguments.
fn tmux_command(words: &[Word]) -> Vec<InnerCommand> {
    let Some(name) = words.first() else {
        return Vec::new();
    };
    if TMUX_OPAQUE.contains(&name.text.as_str()) {
        return vec![through_opaque(
            &name.text,
            name,
            "it types keys into a shell or reads a file of commands, which cannot be seen from the line",
        )];
    }
    let Some((names, values)) = TMUX_RUNS
        .iter()
        .find(|(names, _)| names.contains(&name.text.as_str()))
    else {
        return Vec::new();
    };
    let mut i = 1;
    let mut tmux_only = false;
    while let Some(word) = words.get(i) {
        let text = word.text.as_str();
        if !text.starts_with('-') || text == "-" {
            break;
        }
        i += 1;
        if text == "--" {
            break;
        }
        for (at, letter) in text.char_indices().skip(1) {
            // `run-shell -C` runs a tmux command, not a shell command.
            tmux_only |= letter == 'C' && names[0] == "run-shell";
            if values.contains(letter) {
                if text[at + letter.len_utf8()..].is_empty() {
                    i += 1;
                }
                break;
            }
        }
    }
    let operands = &words[i.min(words.len())..];
    let how = names[0];
    if tmux_only {
        return operands
            .iter()
            .filter_map(|w| joined(how, &[Word::literal("tmux"), w.clone()]))
            .collect();
    }
    if how == "if-shell" {
        // The shell command, then tmux commands to run on its result.
        let mut found: Vec<InnerCommand> = operands
            .first()
            .and_then(|w| joined(how, std::slice::from_ref(w)))
            .into_iter()
            .collect();
        for command in operands.iter().skip(1) {
            found.extend(joined(how, &[Word::literal("tmux"), command.clone()]));
        }
        return found;
    }
    joined(how, operands).into_iter().collect()
}

/// `gdb`: `-ex CMD`/`--ex=CMD`/`-eval-command` and `-iex` run gdb commands, of which `shell
/// CMD`, `!CMD` and `pipe ...| CMD` run a shell command line; `-x FILE` runs a file of them
/// (opaque); `--args PROG ARGS` starts PROG (with `run`), judged as that command.
fn gdb(_row: &Row, args: &[Word]) -> Vec<InnerCommand> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        let text = word.text.trim_start_matches('-');
        let dashes = word.text.len() - text.len();
        if dashes == 0 {
            continue;
        }
        let (name, attached) = match text.split_once('=') {
            Some((name, value)) => (name, Some(value.to_owned())),
            None => (text, None),
        };
        let mut value = || {
            attached.clone().or_else(|| {
                i += 1;
                args.get(i - 1).map(|w| w.text.clone())
            })
        };
        match name {
            "ex" | "eval-command" | "iex" | "init-eval-command" => {
                if let Some(command) = value() {
                    found.extend(gdb_command(word, &command));
                }
            }
            "x" | "command" | "ix" | "init-command" if value().is_some() => {
                found.push(through_opaque(
                    "-x",
                    word,
                    "it runs a file of gdb commands, which cannot be seen from the line",
                ));
            }
            "args" => {
                found.push(InnerCommand::through(
                    "--args",
                    InnerCommand::Command {
                        words: args[i.min(args.len())..].to_vec(),
                        risky_env: false,
                        assigned: Vec::new(),
                    },
                ));
                break;
            }
            _ => {}
        }
    }
    found
}

/// One gdb command: `shell CMD`, `!CMD`, `pipe [COMMAND] | CMD` run CMD with the shell;
/// `python ...` runs Python (read by P8 only through `python3 -c`, so opaque here).
fn gdb_command(word: &Word, command: &str) -> Option<InnerCommand> {
    if word.dynamic {
        return Some(through_opaque(
            "-ex",
            word,
            "a gdb command known only when the line runs",
        ));
    }
    let command = command.trim_start();
    let (first, rest) = command
        .split_once(char::is_whitespace)
        .unwrap_or((command, ""));
    if let Some(line) = command.strip_prefix('!') {
        return Some(InnerCommand::through("-ex !", script(line)));
    }
    match first {
        "shell" => Some(InnerCommand::through("-ex shell", script(rest))),
        "pipe" | "|" => rest
            .split_once('|')
            .map(|(_, line)| InnerCommand::through("-ex pipe", script(line))),
        "python" | "py" | "python-interactive" | "pi" | "source" => Some(through_opaque(
            "-ex",
            word,
            "gdb runs Python code or a file of commands here",
        )),
        _ => None,
    }
}

/// `screen [OPTIONS] [CMD [ARGS]]`: runs CMD with its arguments in a new window (a wrapper);
/// `-c FILE` is a file of screen commands and `-X CMD` sends a command to a running screen
/// (`stuff` types keys into its shell): both opaque.
fn screen(_row: &Row, args: &[Word]) -> Vec<InnerCommand> {
    // Options that take the next word as their value (screen's own reading, not getopt's).
    const VALUES: &[&str] = &["-e", "-h", "-p", "-s", "-S", "-t", "-T", "-Logfile"];
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        if !text.starts_with('-') {
            break;
        }
        i += 1;
        match text {
            "-c" | "-X" => {
                return vec![through_opaque(
                    text,
                    word,
                    "it reads screen commands from a file or sends them to a running screen",
                )];
            }
            // `-dm`, `-dmS name`: flags, and a trailing S takes the next word.
            _ if text.ends_with('S') && text.len() > 2 => i += 1,
            // `-r`, `-x`, `-d`... take a session only when one follows that is no option.
            "-r" | "-R" | "-x" | "-d" | "-D"
                if args.get(i).is_some_and(|w| !w.text.starts_with('-')) =>
            {
                return Vec::new();
            }
            _ if VALUES.contains(&text) => i += 1,
            _ => {}
        }
    }
    match args.get(i..) {
        Some(command) if !command.is_empty() => vec![InnerCommand::through(
            "window",
            InnerCommand::Command {
                words: command.to_vec(),
                risky_env: false,
                assigned: Vec::new(),
            },
        )],
        _ => Vec::new(),
    }
}

/// GNU parallel's options that take the next word as their value.
const PARALLEL_VALUES: &[&str] = &[
    "-j",
    "--jobs",
    "-P",
    "--max-procs",
    "-S",
    "--sshlogin",
    "-a",
    "--arg-file",
    "-d",
    "--delimiter",
    "-C",
    "--colsep",
    "-I",
    "-n",
    "--max-args",
    "-N",
    "--max-replace-args",
    "-s",
    "--max-chars",
    "-L",
    "--max-lines",
    "--results",
    "--res",
    "--joblog",
    "--tmpdir",
    "--workdir",
    "--wd",
    "--env",
    "--timeout",
    "--retries",
    "--delay",
    "-E",
    "--basefile",
    "--bf",
    "--return",
    "--transferfile",
    "--tf",
    "--sshloginfile",
    "--slf",
    "--tagstring",
    "--halt",
    "--memfree",
    "--load",
    "--nice",
    "--block",
    "--blocksize",
    "--header",
    "--profile",
    "-J",
    "--sshdelay",
    "--termseq",
];

/// `parallel [OPTIONS] [COMMAND [ARGS]] [::: ARGS | :::: FILES]...`: COMMAND and its
/// arguments are joined and run by a shell once per input, with `{}` (and `{1}`, `{.}`...)
/// filled in from it; with no COMMAND, each input is itself a command line: the words
/// after `:::`, or lines of a file or stdin (opaque).
fn parallel(_row: &Row, args: &[Word]) -> Vec<InnerCommand> {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        if !text.starts_with('-') || text.starts_with(":::") {
            break;
        }
        i += 1;
        if text == "--" {
            break;
        }
        if PARALLEL_VALUES.contains(&text) {
            i += 1;
        }
    }
    let rest = &args[i.min(args.len())..];
    let end = rest
        .iter()
        .position(|w| w.text.starts_with(":::"))
        .unwrap_or(rest.len());
    let command: Vec<Word> = rest[..end]
        .iter()
        .map(|w| {
            let mut w = w.clone();
            // A replacement string is filled in from the input.
            w.dynamic |= w.text.contains('{') && w.text.contains('}');
            w
        })
        .collect();
    if !command.is_empty() {
        return joined("command", &command).into_iter().collect();
    }
    let inputs = &rest[end..];
    if inputs.first().is_some_and(|w| w.text == ":::") {
        return inputs[1..]
            .iter()
            .take_while(|w| !w.text.starts_with(":::"))
            .filter_map(|w| joined("input", std::slice::from_ref(w)))
            .collect();
    }
    vec![InnerCommand::through(
        "input",
        InnerCommand::Opaque {
            words: args.to_vec(),
            why: "with no command, it runs each line of its input as a command".into(),
        },
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::wrappers::shown;

    fn found(words: &[&str]) -> Vec<String> {
        let words: Vec<Word> = words.iter().map(|w| Word::literal(w)).collect();
        shown(&commands_in(&words))
    }

    #[test]
    fn p3b_tar_runs_its_command_options_in_every_spelling() {
        assert_eq!(
            found(&["tar", "-xf", "a.tar", "--to-command=rm x"]),
            ["--to-command -> script: rm x"]
        );
        assert_eq!(
            found(&["tar", "-xf", "a.tar", "--to-c", "rm x"]),
            ["--to-command -> script: rm x"]
        );
        assert_eq!(
            found(&["tar", "-I", "rm x", "-cf", "a.tar", "f"]),
            ["-I -> script: rm x"]
        );
        assert_eq!(found(&["tar", "-cIrm", "-f", "a"]), ["-I -> script: rm"]);
        assert_eq!(found(&["tar", "-cfI", "a"]), Vec::<String>::new());
        assert_eq!(
            found(&[
                "tar",
                "-cf",
                "a",
                "--checkpoint=1",
                "--checkpoint-action=exec=rm x",
                "f"
            ]),
            ["--checkpoint-action -> script: rm x"]
        );
        assert!(found(&["tar", "--checkpoint-action=echo", "-cf", "a", "f"]).is_empty());
        assert!(found(&["tar", "-F", "s.sh", "-cf", "a"])[0].starts_with("-F -> opaque"));
        assert!(found(&["tar", "-czf", "a.tgz", "src"]).is_empty());
        assert_eq!(
            found(&["tar", "cIf", "rm x", "a.tar", "f"]),
            ["-I -> script: rm x"]
        );
        assert!(found(&["tar", "czf", "a.tgz", "src"]).is_empty());
    }

    #[test]
    fn p3b_git_config_keys_aliases_and_subcommands() {
        assert_eq!(
            found(&["git", "-c", "core.fsmonitor=rm x", "status"]),
            ["-c core.fsmonitor -> script: rm x"]
        );
        assert_eq!(
            found(&["git", "-c", "alias.x=!rm x", "x"]),
            ["-c alias.x -> script: rm x"]
        );
        assert_eq!(
            found(&["git", "-c", "alias.x=-c core.pager=rm log", "x"]),
            ["-c alias.x -> script: git -c core.pager=rm log"]
        );
        assert_eq!(
            found(&["git", "-c", "Diff.Foo.Textconv=rm", "diff"]),
            ["-c Diff.Foo.Textconv -> script: rm"]
        );
        assert_eq!(
            found(&["git", "-c", "diff.external=rm x", "diff"]),
            ["-c diff.external -> script: rm x"]
        );
        assert!(found(&["git", "-c", "core.hooksPath=h", "commit"])[0].contains("opaque"));
        assert!(found(&["git", "-c", "user.name=rm x", "commit"]).is_empty());
        assert_eq!(
            found(&["git", "grep", "-Orm", "x"]),
            ["grep -O -> script: rm"]
        );
        assert!(found(&["git", "grep", "-O", "x"]).is_empty());
        assert_eq!(
            found(&["git", "rebase", "--exec", "rm x", "HEAD~1"]),
            ["rebase --exec -> script: rm x"]
        );
        assert_eq!(
            found(&["git", "config", "alias.x", "!rm x"]),
            ["config alias.x -> script: rm x"]
        );
        assert_eq!(
            found(&["git", "submodule", "foreach", "rm x"]),
            ["submodule foreach -> script: rm x"]
        );
        assert!(found(&["git", "commit", "-m", "rm old files"]).is_empty());
        assert!(found(&["git", "-C", "core.pager=rm", "status"]).is_empty());
    }

    #[test]
    fn p3b_ssh_options_config_and_remote_command() {
        assert_eq!(
            found(&["ssh", "-o", "ProxyCommand=rm x", "h"]),
            ["-o proxycommand -> script: rm x"]
        );
        assert_eq!(
            found(&["ssh", "-oProxyCommand rm x", "h"]),
            ["-o proxycommand -> script: rm x"]
        );
        assert_eq!(
            found(&["ssh", "-o", "LocalCommand=rm x", "h"]),
            ["-o localcommand -> script: rm x"]
        );
        assert!(found(&["ssh", "-F", "cfg", "h"])[0].starts_with("-F -> opaque"));
        assert_eq!(
            found(&["ssh", "-p", "22", "h", "rm", "x"]),
            ["remote command -> script: rm x"]
        );
        assert!(found(&["ssh", "-o", "BatchMode=yes", "h"]).is_empty());
        assert_eq!(
            found(&["ssh", "h", "-oProxyCommand=rm x", "ls"]),
            [
                "-o proxycommand -> script: rm x",
                "remote command -> script: ls"
            ]
        );
        assert_eq!(
            found(&["rsync", "--r", "rm x", "a", "b"]),
            ["--rsh -> script: rm x", "--rsync-path -> script: rm x"]
        );
        assert_eq!(
            found(&["scp", "-S", "rm", "a", "h:b"]),
            ["-S -> script: rm"]
        );
        assert_eq!(
            found(&["rsync", "-av", "-e", "rm x", "a", "b"]),
            ["-e -> script: rm x"]
        );
        assert_eq!(
            found(&["rsync", "--rsh=rm x", "a", "b"]),
            ["--rsh -> script: rm x"]
        );
        assert_eq!(
            found(&["rsync", "-ae", "rm x", "a", "b"]),
            ["-e -> script: rm x"]
        );
    }

    #[test]
    fn p3b_tmux_gdb_screen_parallel() {
        assert_eq!(
            found(&["tmux", "new", "-d", "rm x"]),
            ["new-session -> script: rm x"]
        );
        assert_eq!(
            found(&["tmux", "new-session", "-d", "-s", "a", "rm", "x"]),
            ["new-session -> script: rm x"]
        );
        assert_eq!(found(&["tmux", "-c", "rm x"]), ["-c -> script: rm x"]);
        assert_eq!(
            found(&["tmux", "run-shell", "rm x"]),
            ["run-shell -> script: rm x"]
        );
        assert!(found(&["tmux", "send-keys", "rm x", "Enter"])[0].contains("opaque"));
        assert!(found(&["tmux", "ls"]).is_empty());
        assert_eq!(
            found(&["gdb", "-batch", "-ex", "shell rm x"]),
            ["-ex shell -> script: rm x"]
        );
        assert_eq!(
            found(&["gdb", "--batch", "--ex=!rm x"]),
            ["-ex ! -> script: rm x"]
        );
        assert_eq!(
            found(&["gdb", "-batch", "-ex", "run", "--args", "rm", "x"]),
            ["--args -> rm x"]
        );
        assert_eq!(
            found(&["screen", "-dmS", "s", "rm", "x"]),
            ["window -> rm x"]
        );
        assert_eq!(
            found(&["parallel", "rm", ":::", "x"]),
            ["command -> script: rm"]
        );
        assert_eq!(
            found(&["parallel", ":::", "rm x"]),
            ["input -> script: rm x"]
        );
        assert!(found(&["parallel", "-j", "2", "rm", "{}", ":::", "x"])[0].contains("opaque"));
    }
}
