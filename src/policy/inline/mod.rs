//! Inline code given to a program that runs it, found and read (P8).
//!
//! `python3 -c CODE`, `perl -e CODE`, an `awk` program, a `sed` script, a here-string fed
//! to `node`, `sqlite3 db '.shell ...'`, `vim -c '!...'` run code the shell never sees as
//! commands. This file finds that code in a segment's words and its literal stdin, each
//! program read with its real option grammar (`argv.rs`, or the program's own switch
//! reader where it is not getopt: perl and ruby read `-le`, `-0777`, `-Mmod` letter by
//! letter), and asks `harmless` whether the code is shown harmless. What is not shown
//! harmless is opaque to the judge (policy/mod.rs): asked in mode `auto` under a deny or ask rule,
//! refused in `read-only`; a deny rule's words standing in it deny.
//!
//! A script file (`python3 x.py`, `awk -f prog.awk`, `make`) is not read: code in a file of
//! the project is out of reach of any rule (spec P8; the sandbox contains it). The
//! interpreters read here name such a file with its language ([`Reading::Script`]), so that
//! the judge reads what the line itself writes there (`judge/written.rs`, issue 41). Code on
//! stdin is read when the line shows it (a here-document or here-string); from anywhere
//! else (a pipe, a process substitution, `/dev/stdin` of the caller) it is not shown.
//!
//! `options.rs` reads the interpreters' options (where their code is); `rows.rs` holds the
//! rows of programs that run strings (sqlite3, vim, emacs, dc, make, ...).

mod options;
mod rows;

use super::argv;
use super::harmless::{self, Lang};
use options::{awk, deno, lua, node, perl, php, python, ruby, sed};
use rows::{
    dc, emacs, make, npm_exec, option_runs, other_shell, shell_words, socat, sqlite, tcl,
    unread_language, vim, zip,
};

/// What the judge learned about the inline code of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code {
    /// `python`, `perl`, `awk`, `sqlite3`...: for messages and `explain`.
    pub language: &'static str,
    /// The code's words: runs of letters, digits and `_ . + / - $`, so that `os.system('rm
    /// x')` holds `rm` and `x`, and `rmdir` stays `rmdir`. A deny rule's words among them
    /// deny code that is not shown harmless.
    pub words: Vec<String>,
    pub reading: Reading,
}

/// Whether inline code was shown harmless.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// Every name it uses is on its language's list: it starts no process, writes no file.
    Harmless,
    /// Not shown harmless, and why (for the question and `explain`).
    Opaque(String),
    /// Its code is in the file `path` (`python3 x.py`, `awk -f p.awk`), in `lang`: out of
    /// reach of a rule when the file is the project's (P8), read by the judge when the line
    /// itself writes it (`judge/written.rs`, issue 41).
    Script { path: String, lang: Lang },
}

impl Code {
    fn new(language: &'static str, text: &str, reading: Reading) -> Code {
        Code {
            language,
            words: code_words(text),
            reading,
        }
    }

    fn opaque(language: &'static str, text: &str, why: impl Into<String>) -> Code {
        Code::new(language, text, Reading::Opaque(why.into()))
    }

    /// Reads `text` in `lang`.
    pub(in crate::policy) fn read(language: &'static str, lang: Lang, text: &str) -> Code {
        let reading = match harmless::check(lang, text) {
            Ok(()) => Reading::Harmless,
            Err(why) => Reading::Opaque(why.0),
        };
        Code::new(language, text, reading)
    }

    /// Whether it was shown harmless.
    pub fn is_harmless(&self) -> bool {
        self.reading == Reading::Harmless
    }
}

/// Where a program's code comes from, once its options are read.
enum Source {
    /// Code given on the line (several pieces are one program).
    Given(Vec<String>),
    /// Code read from stdin.
    Stdin,
    /// A module (`python3 -m pytest`) or a file it does not name: out of reach (P8).
    File,
    /// A script file it names: out of reach unless the line writes it (P8, issue 41).
    Script(String),
    /// Not shown, and why.
    Opaque(String),
}

/// Paths that name the process's own stdin.
fn is_stdin_path(word: &str) -> bool {
    matches!(
        word,
        "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0" | "/proc/thread-self/fd/0"
    )
}

/// A script operand: stdin, a process substitution or descriptor (code from the line that
/// is not shown), or a file.
fn script_operand(word: &str) -> Source {
    if is_stdin_path(word) {
        Source::Stdin
    } else if word.starts_with("<(") || word.starts_with("/dev/fd/") || word.starts_with("/proc/") {
        Source::Opaque(format!(
            "reads code from `{word}`, which the line does not show"
        ))
    } else {
        Source::Script(word.to_owned())
    }
}

/// The code a `source` stands for, judged in `lang`.
fn judge(language: &'static str, lang: Lang, source: Source, stdin: Option<&str>) -> Option<Code> {
    match source {
        Source::Given(pieces) => Some(Code::read(language, lang, &pieces.join("\n"))),
        Source::Stdin => Some(match stdin {
            Some(text) => Code::read(language, lang, text),
            None => Code::opaque(
                language,
                "",
                "reads code from stdin, which the line does not show",
            ),
        }),
        Source::File => None,
        Source::Script(path) => Some(Code {
            language,
            words: Vec::new(),
            reading: Reading::Script { path, lang },
        }),
        Source::Opaque(why) => Some(Code::opaque(language, "", why)),
    }
}

/// The inline code of the segment `words` (its program and arguments), given the literal
/// text of its stdin when the line shows it (a here-document or here-string), if its
/// program runs code from its command line or stdin; for an interpreter this file reads
/// that runs a script file it names, where that code is ([`Reading::Script`]).
pub fn inline_code(words: &[String], stdin: Option<&str>) -> Option<Code> {
    let name = super::word::base_name(words.first()?);
    let args = &words[1..];
    if is_version_of(name, "python") || is_version_of(name, "pypy") {
        return python(args, stdin);
    }
    if is_version_of(name, "perl") {
        return perl(args, stdin);
    }
    if is_version_of(name, "lua") || name == "luajit" {
        return lua(args, stdin);
    }
    if is_version_of(name, "ruby") {
        return ruby(args, stdin);
    }
    if is_version_of(name, "php") {
        return php(args, stdin);
    }
    // Issue 41: the versioned names Debian installs (`irb3.1`, `erb3.1`, `wish8.6`).
    if is_version_of(name, "irb") {
        return Some(Code::opaque("ruby", "", "irb reads ruby from stdin"));
    }
    if is_version_of(name, "erb") {
        return unread_language(
            "ruby",
            "erb runs the ruby of a template, which the judge does not read",
            &["-r", "-S", "-E", "-T"],
            args,
            stdin,
        );
    }
    if is_version_of(name, "tclsh") || is_version_of(name, "wish") {
        return tcl(name, args);
    }
    match name {
        "node" | "nodejs" | "bun" => node(args, stdin),
        "deno" => deno(args),
        "jshell" => unread_language(
            "java",
            "jshell runs java, which the judge does not read",
            &[
                "--class-path",
                "-classpath",
                "-cp",
                "--module-path",
                "-p",
                "--add-modules",
                "--add-exports",
                "--startup",
                "--feedback",
                "--execution",
            ],
            args,
            stdin,
        ),
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" | "original-awk" => awk(args, stdin),
        "sed" | "gsed" => sed(args, stdin),
        "fish" | "csh" | "tcsh" | "nu" | "xonsh" | "elvish" | "pwsh" | "zsh" | "ksh" | "mksh"
        | "yash" => other_shell(args),
        "expect" | "jimsh" => tcl(name, args),
        "sqlite3" | "sqlite" => sqlite(args, stdin),
        "ed" | "red" => {
            let text = stdin.unwrap_or("");
            let mut code = Code::opaque(
                "ed",
                text,
                "ed runs the commands on its stdin (`!` runs a shell, `w` writes)",
            );
            code.words.extend(shell_words(text, &["!"]));
            Some(code)
        }
        "vim" | "vi" | "nvim" | "view" | "ex" | "vimdiff" | "rvim" | "gvim" | "vim.tiny"
        | "vim.basic" | "vim.nox" => vim(name, args),
        "emacs" | "emacs-nox" | "emacsclient" => emacs(args),
        "dc" => dc(args, stdin),
        "zip" => zip(args),
        "npm" | "npx" | "pnpm" | "yarn" => npm_exec(name, args),
        "make" | "gmake" | "bmake" => make(args),
        "rg" => option_runs("rg", args, "pre", 3),
        "ag" => option_runs("ag", args, "pager", 3),
        "socat" => socat(args),
        _ => evaluating_builtin(name, args),
    }
}

/// The word [`may_take_as_option`] puts where the shell builds a word the judge cannot
/// know: an option no program has. A reader with its program's grammar refuses it (the
/// program would); a row that looks for one option by name (`rg --pre`) treats it as that
/// option, which it may be.
pub(super) const UNKNOWN_OPTION: &str = "-\u{1}";

/// Whether the program of `words` would read a word at `words[at]` as one of its options
/// (and so perhaps as code) were the shell to make it one (issue 41: `x=$(cat f); perl $x
/// 'system q(rm c)'`, where the file may hold `-e`): its code is not shown harmless once
/// `UNKNOWN_OPTION` stands there. A word in a place for data (after the code, a value of
/// an option, after `--`) leaves the reading as it was; a word bash may split is read too
/// as a value and an option after it. Asked of a word whose value may begin with `-`
/// ([`crate::policy::shell::LineValue::may_be_option`]).
pub fn may_take_as_option(words: &[String], at: usize, splits: bool, stdin: Option<&str>) -> bool {
    // The command name is judged as a name, elsewhere.
    if at == 0 {
        return false;
    }
    let Some((before, after)) = words.get(at).map(|_| (&words[..at], &words[at + 1..])) else {
        return false;
    };
    let opaque_with = |standing: &[&str]| {
        let probe: Vec<String> = before
            .iter()
            .map(String::as_str)
            .chain(standing.iter().copied())
            .chain(after.iter().map(String::as_str))
            .map(str::to_owned)
            .collect();
        inline_code(&probe, stdin).is_some_and(|code| matches!(code.reading, Reading::Opaque(_)))
    };
    // Split, the word may be an option's value followed by more options.
    opaque_with(&[UNKNOWN_OPTION]) || splits && opaque_with(&["dshvalue", UNKNOWN_OPTION])
}

/// Builtins that evaluate text as code (P8: judged alike in every mode): `let` and
/// `declare -i` evaluate arithmetic, whose array subscripts run `$(...)`; `declare -n`
/// makes a name a reference; `printf -v`, `read`, `test -v` with a subscript;
/// `mapfile -C`, `compgen -C`/`-F`/`-W`, `fc` run strings; `${x@P}` expands a prompt; a
/// shell's `--rcfile`/`--init-file` from the line.
fn evaluating_builtin(name: &str, args: &[String]) -> Option<Code> {
    // A name holds a subscript, or may once the shell expands it (issue 41: `x=$(cat f);
    // printf -v "$x" 1` evaluates whatever subscript the file holds).
    let subscript = |w: &String| w.contains(['[', '$', '`']);
    let why: Option<&str> = match name {
        "let" => args
            .iter()
            .any(|a| {
                !a.bytes()
                    .all(|b| b.is_ascii_digit() || b"+-*/%() ".contains(&b))
            })
            .then_some("`let` evaluates arithmetic, whose subscripts run commands"),
        "declare" | "typeset" | "local" | "export" | "readonly" => {
            let options = || {
                args.iter()
                    .take_while(|a| a.starts_with('-') || a.starts_with('+'))
            };
            if options().any(|a| a.contains('i') || a.contains('n')) {
                Some("`declare -i`/`-n` evaluates or references what it is given")
            } else {
                // `declare "$x=1"`: a name the shell builds may hold a subscript.
                args.iter()
                    .skip(options().count())
                    .any(|a| a.split('=').next().is_some_and(|n| n.contains(['$', '`'])))
                    .then_some(
                        "`declare` of a name built when the line runs evaluates its subscript",
                    )
            }
        }
        "printf" => (args.first().is_some_and(|a| a == "-v") && args.get(1).is_some_and(subscript))
            .then_some("`printf -v` into a subscript evaluates it"),
        "read" => read_names(args)
            .any(subscript)
            .then_some("the builtin evaluates a string it is given"),
        "mapfile" | "readarray" | "compgen" | "complete" | "fc" | "test" | "[" | "[[" => {
            let flagged = match name {
                "test" | "[" | "[[" => args.iter().any(|a| a == "-v") && args.iter().any(subscript),
                "mapfile" | "readarray" => {
                    args.iter().any(|a| a.starts_with("-C") || a.contains('['))
                }
                "compgen" | "complete" => args
                    .iter()
                    .any(|a| a.starts_with("-C") || a.starts_with("-F") || a.starts_with("-W")),
                _ => true,
            };
            flagged.then_some("the builtin evaluates a string it is given")
        }
        "bash" | "sh" | "dash" | "rbash" => args
            .iter()
            .any(|a| a.starts_with("--rcfile") || a.starts_with("--init-file"))
            .then_some("the shell reads a startup file the line names"),
        _ => None,
    };
    let why = why.or_else(|| {
        args.iter()
            .any(|a| a.contains("@P}") || a.contains("@E}"))
            .then_some("`${x@P}` expands a prompt, which runs what the value holds")
    })?;
    Some(Code::opaque("bash builtin", &args.join(" "), why))
}

/// The names `read` assigns: its operands and the value of `-a`, not the values of its
/// other options (`-p "$prompt"`, `-d`, `-t`...).
fn read_names(args: &[String]) -> impl Iterator<Item = &String> {
    let mut skip_next = false;
    args.iter().filter(move |a| {
        if std::mem::take(&mut skip_next) {
            return false;
        }
        match a.strip_prefix('-') {
            // An option cluster ending in one that takes a value: the value is its rest
            // or the next word (`-a` takes a name: kept).
            Some(flags) if !flags.is_empty() => {
                let takes = flags.find(['p', 'd', 't', 'n', 'N', 'u', 'i', 'a']);
                match takes {
                    Some(at) if flags[at..].starts_with('a') => flags.len() > at + 1,
                    Some(at) => {
                        skip_next = flags.len() == at + 1;
                        false
                    }
                    None => false,
                }
            }
            _ => true,
        }
    })
}

/// Whether `name` is a program this file reads (its code is P8's, so P3b's safety net for
/// unknown programs leaves its arguments alone: `sed 's/rm -f/rm -rf/'` is a script, not a
/// command line).
pub fn is_interpreter(name: &str) -> bool {
    [
        "python", "pypy", "perl", "lua", "ruby", "php", "irb", "erb", "tclsh", "wish",
    ]
    .iter()
    .any(|b| is_version_of(name, b))
        || matches!(
            name,
            "node"
                | "nodejs"
                | "bun"
                | "deno"
                | "jshell"
                | "luajit"
                | "awk"
                | "gawk"
                | "mawk"
                | "nawk"
                | "busybox-awk"
                | "original-awk"
                | "sed"
                | "gsed"
                | "fish"
                | "csh"
                | "tcsh"
                | "nu"
                | "xonsh"
                | "elvish"
                | "pwsh"
                | "expect"
                | "sqlite3"
                | "ed"
                | "red"
                | "dc"
        )
}

/// `python3`, `python3.12`, `perl5.36`, `lua5.4` are versions of `python`, `perl`, `lua`.
fn is_version_of(name: &str, base: &str) -> bool {
    name.strip_prefix(base)
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

fn unreadable(language: &'static str, e: argv::ArgvError) -> Option<Code> {
    Some(Code::opaque(
        language,
        "",
        format!("its options cannot be read ({e}), so where its code is is not known"),
    ))
}

/// The words of a piece of code (see [`Code::words`]).
pub fn code_words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || "_.+/-$".contains(c)))
        .map(|w| w.trim_matches('.'))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests;
