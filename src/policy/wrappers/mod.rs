//! Programs that run another command, and where in their words that command is (P3, P4).
//!
//! This file owns the table of wrappers: one row per program, naming its option grammar
//! (`argv.rs`) and how the command it runs is found. Adding a wrapper is adding a row. The
//! shell walk asks [`inner_commands`] about every simple command it finds and judges what
//! comes back as more segments.
//!
//! What a wrapper runs is one of three things: words (`nice -n 5 rm x` runs `rm x`), a
//! command line for a shell (`bash -c 'rm x'`, `eval rm x`, `flock F -c 'rm x'`), or
//! something that cannot be known before it runs (`bash script.sh`, `source f`, `sudo $CMD`),
//! which the judge treats as opaque (P5). Whatever the grammar cannot read with certainty
//! (an unknown or ambiguous option, a word only known at run time where an option could
//! be) makes the inner command opaque too: the real program either refuses the line or does
//! something the table did not foresee, and neither may pass as harmless.
//!
//! `table.rs` holds the rows (the data: each program's grammar and where its command is);
//! `grammars.rs` the grammars a handler reads again; `readers.rs` the handlers of the rows whose command only a function can find; this file
//! the lookup that reads a line with them.

mod grammars;
mod readers;
mod table;

use super::argv::{self, Arg, Grammar, Parsed};
use super::word::{EnvRuns, Word, command_value, env_assigned_name, env_runs, note_assignment};
use table::WRAPPERS;

pub use super::inner::InnerCommand;

/// What a command's standard input holds, as far as the line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stdin {
    /// The literal text of a here-document or here-string given to the command itself.
    Literal(String),
    /// Anything else: a pipe, a file, the inherited input, an expanding here-document.
    Unknown,
}

/// How a wrapper's command is found once its options are read.
#[derive(Clone, Copy)]
enum Runs {
    /// The words after the options and `skip` operands (`timeout DURATION CMD`); with
    /// `assignments`, `NAME=value` words before the command set its environment.
    Words { skip: usize, assignments: bool },
    /// Only the wrapper knows: a function reads the parsed line.
    Custom(fn(&Parsed, &[Word], &Stdin) -> Vec<InnerCommand>),
}

/// One program that runs another command.
struct Wrapper {
    name: &'static str,
    /// How it reads its options; `None` for the few whose handler reads the words itself
    /// (shells, `eval`, `trap`, `find`...: not getopt programs).
    grammar: Option<Grammar>,
    runs: Runs,
    /// Options after which the program runs nothing (`taskset -p`, `sudo -l`).
    runs_nothing_with: &'static [&'static str],
    /// Options whose value is a command line for a shell (`su -c`, `script -c`).
    script_in: &'static [&'static str],
    /// With no command given it starts an interactive shell, which reads its stdin
    /// (`chroot /`, `unshare`, `nsenter`, `doas -s`); for `Runs::Words` rows (a custom
    /// handler decides this itself).
    shell_without_command: bool,
}

/// Why a wrapper's command line (`bash -c "$X"`, `eval $X`, `flock f -c "$X"`) is opaque.
const SCRIPT_NOT_KNOWN: &str = "the command line it runs is known only when the line runs";
/// Why a wrapper's command, or an assignment before it (`sudo $CMD`, `sudo $A=1 rm`), is
/// opaque.
const COMMAND_NOT_KNOWN: &str = "an assignment or the command is known only when the line runs";

/// The option grammar the table reads `name`'s words with, for the wrappers that are
/// getopt programs (`None` for the shells, `eval`, `find`..., and for names not in the
/// table). The tests hold it against the real program.
pub fn grammar(name: &str) -> Option<&'static Grammar> {
    WRAPPERS
        .iter()
        .find(|w| w.name == name)
        .and_then(|w| w.grammar.as_ref())
}

/// The names of every row of the table.
pub fn names() -> impl Iterator<Item = &'static str> {
    WRAPPERS.iter().map(|w| w.name)
}

/// Whether `name` (a command name's last path component) is in the wrapper table.
pub fn is_wrapper(name: &str) -> bool {
    WRAPPERS.iter().any(|w| w.name == name)
}

/// Whether the wrapper `words[0]` may run what its word `words[at]` holds when the judge
/// cannot know that word (issue 41). A wrapper read with its grammar refuses such a word
/// where it could be an option ([`argv::ArgvError::NotKnown`]), and its command's words
/// are judged as that command's; find reads its own expression, where the word may be
/// `-exec` (`readers::find_may_run_from`).
pub fn may_run_from(words: &[String], at: usize, splits: bool) -> bool {
    words.first().map(|name| super::word::base_name(name)) == Some("find")
        && readers::find_may_run_from(words, at, splits)
}

/// What the command `words` runs through a wrapper, if it is one, given what its stdin
/// holds. Wrappers are recognized by the last path component of their name, so
/// `/usr/bin/sudo` is `sudo`.
pub fn inner_commands(words: &[Word], stdin: &Stdin) -> Vec<InnerCommand> {
    let Some(name) = words.first().filter(|name| name.is_known_name()) else {
        return Vec::new();
    };
    // The base name once, not per row: finding it is a scan of the word.
    let base = name.base_name();
    let Some(wrapper) = WRAPPERS.iter().find(|w| w.name == base) else {
        // Not a wrapper: it may still run commands from its options or config (P3b).
        return super::embedded::commands_in(words);
    };
    let args = &words[1..];
    let parsed = match wrapper.grammar.as_ref().map(|g| argv::parse(g, args)) {
        None => Parsed::default(),
        Some(Ok(parsed)) => parsed,
        Some(Err(why @ argv::ArgvError::NotKnown(_))) => {
            return vec![InnerCommand::Unread {
                why: format!("`{}`: {why}", wrapper.name),
            }];
        }
        Some(Err(why)) => {
            return vec![opaque(args, format!("`{}`: {why}", wrapper.name))];
        }
    };
    // Such an option only lists, checks, edits or is refused; the wrapper's own segment is
    // still judged as itself.
    if parsed
        .options
        .iter()
        .any(|g| wrapper.runs_nothing_with.iter().any(|k| g.option.is(k)))
    {
        return Vec::new();
    }
    if let Some(script) = wrapper
        .script_in
        .iter()
        .find_map(|key| parsed.options.iter().rev().find(|g| g.option.is(key)))
    {
        return match &script.value {
            Some(text) if script.value_known => vec![InnerCommand::Script(text.clone())],
            _ => vec![opaque(args, SCRIPT_NOT_KNOWN.into())],
        };
    }
    match wrapper.runs {
        Runs::Custom(find_inner) => find_inner(&parsed, args, stdin),
        Runs::Words { skip, assignments } => {
            let start = parsed.first_operand(args.len()) + skip;
            let command = command_at(args, start, assignments);
            if command.is_empty() && wrapper.shell_without_command {
                let why = format!(
                    "`{}` starts a shell that reads its commands from stdin",
                    wrapper.name
                );
                return vec![shell_reading(stdin, args, &why)];
            }
            command
        }
    }
}

/// The command in `args` from `start` on (after `NAME=value` words when `assignments`).
fn command_at(args: &[Word], mut start: usize, assignments: bool) -> Vec<InnerCommand> {
    let mut risky_env = false;
    let mut assigned = Vec::new();
    let mut found = Vec::new();
    if assignments {
        while let Some(word) = args.get(start) {
            if !word.known() {
                return vec![opaque(&args[start..], COMMAND_NOT_KNOWN.into())];
            }
            if env_assigned_name(&word.text).is_none() {
                break;
            }
            risky_env |= note_assignment(word, &mut assigned);
            found.extend(env_command(word));
            start += 1;
        }
    }
    if let Some(rest) = args.get(start..).filter(|rest| !rest.is_empty()) {
        found.insert(
            0,
            InnerCommand::Command {
                words: rest.to_vec(),
                risky_env,
                assigned,
            },
        );
    }
    found
}

/// What an assignment `NAME=value` given to a command runs, when NAME is a variable whose
/// value a program runs (P3b): its value as a command line, or opaque when it names a file
/// of code (`BASH_ENV`, `LD_PRELOAD`). Shared by the shell walk (assignments before a
/// command) and the `env`/`sudo` rows (assignments they are given).
pub fn env_command(assignment: &Word) -> Option<InnerCommand> {
    let (name, value) = assignment.text.split_once('=')?;
    let runs = env_runs(name)?;
    let how = format!("env {name}");
    let inner = match runs {
        _ if !assignment.known() => opaque(
            std::slice::from_ref(assignment),
            format!(
                "`{name}` is run by the program, and its value is known only when the line runs"
            ),
        ),
        EnvRuns::File => opaque(
            std::slice::from_ref(assignment),
            format!("`{name}` names a file whose code the program runs"),
        ),
        EnvRuns::CommandLine => InnerCommand::Script(command_value(name, value).to_owned()),
    };
    Some(InnerCommand::through(how, inner))
}

fn opaque(words: &[Word], why: String) -> InnerCommand {
    InnerCommand::Opaque {
        words: words.to_vec(),
        why,
    }
}

/// An interactive shell (no command given) reads its commands from stdin: a literal
/// here-document or here-string is judged as the script it is, anything else is opaque.
fn shell_reading(stdin: &Stdin, args: &[Word], why: &str) -> InnerCommand {
    match stdin {
        Stdin::Literal(text) => InnerCommand::Script(text.clone()),
        Stdin::Unknown => opaque(args, why.to_owned()),
    }
}

/// What `texts` says of a wrapper's inner command, for messages and tests.
#[cfg(test)]
pub(super) fn shown(inner: &[InnerCommand]) -> Vec<String> {
    inner.iter().map(shown_one).collect()
}

#[cfg(test)]
fn shown_one(inner: &InnerCommand) -> String {
    match inner {
        InnerCommand::Command { words, .. } => super::word::texts(words).join(" "),
        InnerCommand::Script(s) => format!("script: {s}"),
        InnerCommand::Opaque { why, .. } | InnerCommand::Unread { why } => {
            format!("opaque: {why}")
        }
        InnerCommand::Through { how, inner } => format!("{how} -> {}", shown_one(inner)),
    }
}

#[cfg(test)]
mod tests;
