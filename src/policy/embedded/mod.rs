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

mod gdb;
mod git;
mod multiplexers;

use super::inner::InnerCommand;
use super::word::{Word, base_name};
use gdb::gdb;
use git::git;
use multiplexers::{screen, tmux};

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
    // `-P`/`--pager` and `-H`/`--html` run a command line; `-C` a config file naming
    // more (issue 41). `MANPAGER=` is judged as a variable.
    options(
        "man",
        "CRLmMSsepPrE",
        &[
            spot(Some('P'), "pager", COMMAND),
            Spot {
                optional: true,
                ..spot(Some('H'), "html", COMMAND)
            },
            spot(Some('C'), "config-file", FILE),
        ],
    ),
    data("logger"),
    // jq has no builtin that starts a process or writes a file: its programs are data
    // (issue 41), so a `$v` in one is jq's variable, not the shell's.
    data("jq"),
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

/// Whether the row of `words`' program may run what the word at `words[at]` holds when
/// the judge cannot know that word (a command's output the line stores: issue 41). A word
/// whose value may begin with `-` (`may_be_option`) may be any option, so a row with a
/// place for a command reads it as one unless it stands after `--`; git asks
/// `git::may_run_from`; the other rows read by their own function (tar, ssh, tmux, gdb,
/// screen, parallel), whose operands may be commands too, so any word there may run. A
/// row whose words are data (`grep`) runs none.
pub fn may_run_from(words: &[String], at: usize, may_be_option: bool) -> bool {
    // The command name itself (`at` 0) is judged as a name, elsewhere.
    let Some(name) = words.first().filter(|_| at > 0 && at < words.len()) else {
        return false;
    };
    let Some(row) = ROWS.iter().find(|row| row.name == base_name(name)) else {
        return false;
    };
    let may_be_option = may_be_option && !words[1..at].iter().any(|w| w == "--");
    match row.reads {
        Reads::Data => false,
        Reads::Options => may_be_option && !row.spots.is_empty(),
        Reads::Custom(_) if row.name == "git" => git::may_run_from(&words[1..], at - 1),
        Reads::Custom(_) => true,
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
pub(super) mod tests {
    use super::*;
    use crate::policy::wrappers::shown;

    /// What `line` gets in mode `auto` under the one rule `rm` -> deny.
    pub(crate) fn decide(line: &str) -> crate::config::Decision {
        let policy = crate::policy::Policy::new(&crate::config::PermissionsConfig {
            rules: vec![crate::config::PermissionRule {
                tool: "bash".into(),
                command: Some("rm".into()),
                action: crate::config::Decision::Deny,
                ..crate::config::PermissionRule::default()
            }],
            ..crate::config::PermissionsConfig::default()
        });
        policy
            .judge(
                "bash",
                &serde_json::json!({ "command": line }),
                crate::config::Mode::Auto,
                &[],
            )
            .decision
    }

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
