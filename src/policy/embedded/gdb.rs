//! gdb's row (P3b, P8): the gdb commands given on the line (`-ex`, `-iex` and every
//! spelling gdb's `getopt_long_only` takes for them) are read by an allowlist. gdb takes any
//! unambiguous prefix of a command (`she` is `shell`), formats strings into commands
//! (`eval`), runs one under settings (`with ... --`), calls functions of the program it
//! debugs from any expression (`print system("...")`) and has `$_shell(...)` (gdb 13), so
//! a command is harmless only when the judge knows it starts no process: `run`, `bt`,
//! `info ...`, an expression without a call. `shell`, `!` and `pipe` in any prefix are
//! judged as the command line they run; anything else is opaque (P5).

use super::{Row, script, through_opaque};
use crate::policy::inner::InnerCommand;
use crate::policy::word::Word;

/// What an option of gdb's does with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GdbOption {
    /// `-ex`, `-eval-command`, `-iex`, `-init-eval-command`: a gdb command.
    Command,
    /// `-x`, `-command`, `-ix`, `-init-command`: a file of gdb commands.
    File,
    /// `--args PROG ARGS`: the program to debug, run by `run`.
    Args,
}

/// What option `name` (without dashes and `=value`) is. gdb reads options with
/// `getopt_long_only`: one or two dashes, any unambiguous prefix of a long name; an
/// ambiguous prefix is refused by gdb, so reading it as ours only judges more.
fn gdb_option(name: &str) -> Option<GdbOption> {
    let prefix_of = |long: &str, min: usize| name.len() >= min && long.starts_with(name);
    // `-in`, `-init`, `-init-` are ambiguous between the two init options: read as the one
    // that runs a command, which gdb would refuse anyway.
    if name == "ex"
        || name == "iex"
        || prefix_of("eval-command", 2)
        || prefix_of("init-eval-command", 2)
    {
        Some(GdbOption::Command)
    } else if name == "x" || name == "ix" || prefix_of("command", 3) || prefix_of("init-command", 6)
    {
        Some(GdbOption::File)
    } else if prefix_of("args", 2) {
        Some(GdbOption::Args)
    } else {
        None
    }
}

/// `gdb [OPTIONS] [PROG [CORE|PID]]`: see the module's comment.
pub(super) fn gdb(_row: &Row, args: &[Word]) -> Vec<InnerCommand> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        let text = word.text.trim_start_matches('-');
        let dashes = word.text.len() - text.len();
        if dashes == 0 || dashes > 2 || text.is_empty() {
            continue;
        }
        let (name, attached) = match text.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (text, None),
        };
        let Some(option) = gdb_option(name) else {
            continue;
        };
        if option == GdbOption::Args {
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
        let value = match attached {
            Some(value) => Some((word, value)),
            None => {
                i += 1;
                args.get(i - 1).map(|w| (w, w.text.as_str()))
            }
        };
        let Some((value_word, value)) = value else {
            continue;
        };
        match option {
            GdbOption::Command => found.extend(gdb_command(value_word, value)),
            _ => found.push(through_opaque(
                "-x",
                value_word,
                "it runs a file of gdb commands, which cannot be seen from the line",
            )),
        }
    }
    found
}

/// gdb commands known to start no process and write nothing but gdb's own output, by the
/// names and aliases gdb documents. An expression they are given is checked apart
/// ([`calls_nothing`]).
const HARMLESS: &[&str] = &[
    "run",
    "r",
    "start",
    "starti",
    "continue",
    "c",
    "next",
    "n",
    "step",
    "s",
    "nexti",
    "ni",
    "stepi",
    "si",
    "finish",
    "fin",
    "until",
    "u",
    "advance",
    "backtrace",
    "bt",
    "where",
    "info",
    "i",
    "list",
    "l",
    "break",
    "b",
    "tbreak",
    "rbreak",
    "watch",
    "rwatch",
    "awatch",
    "delete",
    "d",
    "disable",
    "enable",
    "frame",
    "f",
    "up",
    "down",
    "quit",
    "q",
    "kill",
    "k",
    "detach",
    "disassemble",
    "print",
    "p",
    "output",
    "x",
    "ptype",
    "whatis",
    "display",
    "set",
    "show",
    "handle",
    "catch",
    "thread",
    "inferior",
    "file",
    "core-file",
    "attach",
    "directory",
    "echo",
];

/// One gdb command (see the module's comment).
fn gdb_command(word: &Word, command: &str) -> Option<InnerCommand> {
    if word.dynamic {
        return Some(through_opaque(
            "-ex",
            word,
            "a gdb command known only when the line runs",
        ));
    }
    let command = command.trim_start();
    if let Some(line) = command.strip_prefix('!') {
        return Some(InnerCommand::through("-ex !", script(line)));
    }
    if let Some(rest) = command.strip_prefix('|') {
        return Some(pipe(word, rest));
    }
    let (first, rest) = command
        .split_once(char::is_whitespace)
        .unwrap_or((command, ""));
    // gdb takes any unambiguous prefix: `she` is `shell`, `pip` is `pipe`.
    let is = |name: &str, min: usize| first.len() >= min && name.starts_with(first);
    if is("shell", 3) {
        return Some(InnerCommand::through("-ex shell", script(rest)));
    }
    if is("pipe", 3) {
        return Some(pipe(word, rest));
    }
    if first.is_empty() {
        return None;
    }
    let harmless = HARMLESS.contains(&first)
        && calls_nothing(rest)
        // `thread apply`, `frame apply`: run other gdb commands.
        && !rest.split_whitespace().any(|w| w == "apply")
        // `set logging`, `set pagination`... are settings; only these change what runs.
        && !(first == "set"
            && rest
                .split_whitespace()
                .next()
                .is_some_and(|s| ["shell", "exec-wrapper", "startup-with-shell"].contains(&s)));
    if harmless || thread_apply_backtrace(first, rest) {
        return None;
    }
    Some(through_opaque(
        "-ex",
        word,
        "a gdb command the judge does not know to start no process",
    ))
}

/// `thread apply all bt` (and `bt full`, `backtrace`): the one `apply` a crash report uses.
fn thread_apply_backtrace(first: &str, rest: &str) -> bool {
    let words: Vec<&str> = rest.split_whitespace().collect();
    first == "thread"
        && matches!(
            words.as_slice(),
            ["apply", "all", "bt" | "backtrace"] | ["apply", "all", "bt" | "backtrace", "full"]
        )
}

/// An expression that calls nothing: a call (`f(...)`, `$_shell(...)`) may run anything
/// the debugged program or gdb can.
fn calls_nothing(expression: &str) -> bool {
    !expression.contains('(')
}

/// `pipe [COMMAND] | SHELL_COMMAND` (or `-d DELIM`): the shell command after the
/// delimiter; with another delimiter, opaque.
fn pipe(word: &Word, rest: &str) -> InnerCommand {
    match rest.split_once('|') {
        Some((_, line)) if !rest.trim_start().starts_with("-d") => {
            InnerCommand::through("-ex pipe", script(line))
        }
        _ => through_opaque(
            "-ex pipe",
            word,
            "a `pipe` with its own delimiter, which is not read here",
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Decision::{Allow, Ask, Deny};
    use crate::policy::embedded::tests::decide;

    /// P3b, P8 (issue 41): gdb commands in every spelling gdb takes; what is not known to
    /// start no process is opaque.
    #[test]
    fn p3b_p8_gdb_commands_are_read_by_an_allowlist() {
        for line in [
            "gdb -batch -ex 'she rm x'",
            "gdb -batch -ex 'shel rm x'",
            "gdb -batch --eval-c='shell rm x'",
            "gdb -batch -ev 'shell rm x'",
            "gdb -batch -init-eval-command='!rm x'",
            "gdb -batch -ex 'pip bt | rm x'",
            "gdb -batch -ex '| bt | rm x'",
            "gdb -batch -ex 'with print pretty -- shell rm x'",
            "gdb -batch -ex run --args rm x",
        ] {
            assert_eq!(decide(line), Deny, "{line}");
        }
        for line in [
            "gdb -batch -ex 'eval \"shell r%s x\", \"m\"'",
            "gdb -batch -ex 'print $_shell(\"true\")'",
            "gdb -batch -ex 'call system(\"true\")'",
            "gdb -batch -ex 'thread apply all shell true'",
            "gdb -batch -ex 'python import os'",
            "gdb -batch -x cmds.gdb",
            "gdb -batch -com=cmds.gdb",
        ] {
            assert_eq!(decide(line), Ask, "{line}");
        }
        for line in [
            "gdb -batch -ex run -ex bt --args ./app",
            "gdb -batch -ex 'thread apply all bt full' -p 1",
            "gdb -q -ex 'info registers' -ex 'p x' ./app core",
            "gdb --version",
        ] {
            assert_eq!(decide(line), Allow, "{line}");
        }
    }
}
