//! Code the line writes to a file and then runs (P8, issue 41).
//!
//! The judge reads a line before any of it runs, so a file a segment writes
//! (`printf '...' > x.py`, a here-document through `cat` or `tee`, an `echo` appended to `.git/config`)
//! and a later segment runs (`python3 x.py`, `sh x.sh`, `./x`, a hook, a Makefile, an
//! alias) holds code the line shows: code on the line, which P8 reads or asks. Two readings:
//!
//! 1. The words of a deny rule in any text written, when any program runs after it (it may
//!    run that file: a hook, an alias, a Makefile recipe): asked, not denied, for the text
//!    may as well be notes ([`Cause::WrittenCode`]).
//! 2. The text written, read as the language of a later segment that runs a script file
//!    (`python3 x.py`, `perl x.pl`, `awk -f p.awk`, `node x.js`, `php x.php`, `lua x.lua`,
//!    `ruby x.rb`, `sed -f x.sed`, `sh x.sh`, `source x.sh`, `./x` by its shebang, `java
//!    X.java`) or loads a module that may be the file (`python3 -m x`, `ruby -r./x`, `node -r
//!    ./x.js`, `lua -l x`), with the readers inline code uses (`inline::Code::read`,
//!    `harmless`, sed's reader): shown harmless, nothing; a deny rule's words in it, denied;
//!    anything else asked in `auto` under a deny or ask rule, as inline code is
//!    ([`Cause::WrittenScript`]). A language the judge has no reader for (java, go, typescript,
//!    tcl: [`UNREAD`]), a php.ini and a `-x` run are never shown harmless; a program the judge cannot tie to a language (`make`, `git`, `jq`)
//!    gets reading 1 only.
//!
//! Where the line shows which file is which, a text is not read as a script it cannot be: a
//! line that names every file it writes by a literal word (the walk keeps each
//! redirection's target), moves no text between names and makes no link (no `cp`, `mv`,
//! `ln`, `dd of=`, `sed -i`, loop, function, `cd` or `exec 3>`: only readers, builtins,
//! `tee` and the test runners of an allowlist write), and runs a script by a literal name
//! that no write has, nor a module of its language (`helper.py` beside `python3 x.py`),
//! writes no code of it: `echo hello > out.txt; python3 x.py` and `pytest > log; python3
//! x.py` are not read as python ([`apart`] says each condition; reading 1 still reads
//! every text for a deny rule's words). Elsewhere it fails closed:
//! every text the line writes is read as the language of every script it runs, each alone
//! and all of them as one file (appends), and a note costs nothing (`# notes` is a comment
//! in each language read here; `hello` is not, the price of not knowing the file: asked).
//! What a writer puts in a file that the line does not show but may hand it (`base64 -d <<<
//! ... > x.py`, `echo ... | tr ... > x.py`, `dd of=x.py <<< ...`, an expansion, an
//! expanding here-document, `exec 3> x.py`, a process substitution, `echo` escapes that
//! `shopt -s xpg_echo` decodes) cannot be read, and is asked; so is a segment between the
//! write and the run that may change the file in place (`sed -i`; also `git add`, which
//! cannot, the price of an allowlist). A writer whose text comes from the project (`make >
//! log`, `cat a b > c`) is the project's code, out of reach of a rule as before (the
//! sandbox contains it). Segments are read in the order the line runs them, except when a
//! write later in the text may run first: the line may loop or define a function, a
//! command substitution runs before the command that holds it (`python3 x.py "$(echo ... >
//! x.py)"`), a run in the background races what follows it (`python3 x.py & echo ... >
//! x.py`); then every write counts.

mod apart;

use super::made_here::{makes_no_file, takes_paths_as_data};
use super::printed::{echo, printf};
use crate::config::{Decision, Mode};
use crate::policy::harmless::Lang;
use crate::policy::shell::{self, Segment};
use crate::policy::word::base_name;
use crate::policy::{Cause, Policy, RuleRef, Verdict, inline, quote_segment, tokens};
use std::cell::OnceCell;

impl Policy {
    /// P8 (issue 41): the verdicts on the code a line writes to files, each with the index
    /// of the segment it falls on (a writer for reading 1, the segment that runs the file
    /// for reading 2; at most one a segment, the strongest). `command` is the whole line,
    /// for whether it may loop.
    pub(in crate::policy) fn written_code(
        &self,
        command: &str,
        segments: &[Segment],
        mode: Mode,
    ) -> Vec<(usize, Verdict)> {
        // Most lines write nothing, and a line that writes no file from what it shows
        // costs only this look (J1's long line has no writer).
        let may_write = segments.iter().any(|s| is_writer(s) || s.stdin.is_some())
            || segments.windows(2).any(|w| prints_line_text(&w[0]));
        if !self.guarded() || !may_write {
            return Vec::new();
        }
        // A write later in the text may come first: a loop, a function, a substitution, a
        // run in the background.
        let order = Order::of(command);
        let mut verdicts = self.files_written_with_denied_words(segments, &order);
        verdicts.extend(self.written_scripts_run(command, segments, mode, &order));
        // One verdict a segment: the strongest, the first of equals.
        let mut merged: Vec<(usize, Verdict)> = Vec::new();
        for (at, verdict) in verdicts {
            match merged.iter_mut().find(|(m, _)| *m == at) {
                Some((_, kept)) if verdict.decision > kept.decision => *kept = verdict,
                Some(_) => {}
                None => merged.push((at, verdict)),
            }
        }
        merged
    }

    /// Reading 1: text a segment writes to a file (`printf '...' > Makefile`, an `echo`
    /// appended to `.git/config`, a here-document through `tee`) in which a deny rule's
    /// words stand, when a later segment of the line runs something: that program may run
    /// the file (a hook, a Makefile, an alias, `python3 x.py`), so the write is asked in
    /// mode `auto`. Not denied: the text may as well be notes. Only the words the line
    /// shows are read. A program earlier in the text may run after the write when `order`
    /// says so.
    fn files_written_with_denied_words(
        &self,
        segments: &[Segment],
        order: &Order,
    ) -> Vec<(usize, Verdict)> {
        if self.denied_names.is_empty() {
            return Vec::new();
        }
        segments
            .iter()
            .enumerate()
            .filter(|(_, s)| is_writer(s))
            .filter(|&(at, _)| {
                let after = if order.any() { 0 } else { at + 1 };
                segments[after..]
                    .iter()
                    .enumerate()
                    .any(|(b, s)| after + b != at && !s.words.is_empty())
            })
            .filter_map(|(at, s)| {
                // What reaches the file: the words as written (a word the shell expands
                // gives a value, not code) and a literal here-document. `printf`'s and
                // `echo -e`'s escapes are blanks there (`\trm c`).
                let mut text: Vec<&str> = (1..s.words.len())
                    .filter(|i| !s.expanded.contains(i))
                    .map(|i| s.words[i].as_str())
                    .collect();
                text.extend(s.stdin.as_deref());
                let text = text.join("\n").replace("\\t", "\t").replace("\\n", "\n");
                let words = inline::code_words(&text);
                let words: Vec<&str> = words.iter().map(String::as_str).collect();
                // Read as a shell would run it too (a recipe, a hook): `r''m` is `rm`, and
                // a name built from an expansion hides what it runs.
                let parsed = shell::segments(&text).unwrap_or_default();
                let rule = self.naming_deny_rules().find(|r| {
                    r.appears_in(&words)
                        || parsed.iter().any(|p| {
                            let opaque = p.opaque.as_ref().map(|_| tokens(&p.words));
                            r.applies(&p.words, opaque.as_deref())
                        })
                });
                let written = quote_segment(s);
                let verdict = match rule {
                    Some(rule) => Verdict::new(
                        Decision::Ask,
                        format!(
                            "{written} writes a file holding the words of {}, and the line runs a program after it that may run that file",
                            rule.describe()
                        ),
                        Cause::WrittenCode {
                            index: rule.index,
                            rule: rule.describe(),
                            origin: rule.origin.clone(),
                        },
                    ),
                    None => {
                        let why = parsed
                            .iter()
                            .filter(|_| text.contains(['$', '`']))
                            .find_map(|p| p.opaque.clone())?;
                        Verdict::new(
                            Decision::Ask,
                            format!(
                                "{written} writes a file holding a command line that cannot be known before it runs ({why}), and the line runs a program after it that may run that file"
                            ),
                            Cause::Opaque { why },
                        )
                    }
                };
                Some((at, verdict))
            })
            .collect()
    }

    /// Reading 2: each segment that runs a script file in a language, against every text
    /// the line writes before it (or anywhere, when `order` says the line may loop or run a
    /// later write first).
    fn written_scripts_run(
        &self,
        command: &str,
        segments: &[Segment],
        mode: Mode,
        order: &Order,
    ) -> Vec<(usize, Verdict)> {
        let runs: Vec<(usize, Runner)> = segments
            .iter()
            .enumerate()
            .filter_map(|(at, s)| Some((at, runner(s)?)))
            .collect();
        if runs.is_empty() {
            return Vec::new();
        }
        // A here-document that expands is no text the walk shows: what reads it is fed by
        // the line all the same.
        // So is a process substitution's command (`echo ... > >(cat > x.py)`), whose place
        // among the segments says nothing of what feeds it.
        let fed_by_line = command.contains("<<") || command.contains(">(");
        let mut verdicts = Vec::new();
        for (at, runner) in runs {
            // The line shows that no file it writes is this script's code.
            if self.writes_apart(command, segments, at, &runner, order) {
                continue;
            }
            let shown = quote_segment(&segments[at]);
            let mut texts: Vec<(usize, String)> = Vec::new();
            let any_order = order.any();
            for w in (0..segments.len()).filter(|&w| w != at && (any_order || w < at)) {
                let segment = &segments[w];
                let written = if is_writer(segment) {
                    let printed = fed_by_line || segments[..w].iter().any(prints_line_text);
                    what_it_writes(segment, printed)
                } else if self.writes_what_it_reads(segments, w) {
                    Written::Hidden(format!(
                        "{} may write what the line feeds it",
                        quote_segment(segment)
                    ))
                } else {
                    continue;
                };
                match written {
                    Written::Shown(text) => texts.push((w, text)),
                    Written::Hidden(why) => verdicts.extend(
                        self.written_ask(&runner, &shown, why, mode)
                            .map(|v| (at, v)),
                    ),
                    Written::Project => {}
                }
            }
            // Each text alone, and all of them as one file: appends join what each write
            // shows apart (`echo -n 'os.sys' > x.py; echo 'tem(...)' >> x.py`).
            let joined = (texts.len() > 1)
                .then(|| texts.iter().map(|(_, t)| t.as_str()).collect::<String>());
            for text in texts
                .iter()
                .map(|(_, t)| t.as_str())
                .chain(joined.as_deref())
            {
                verdicts.extend(
                    self.read_written(text, &runner, &shown, mode)
                        .map(|v| (at, v)),
                );
            }
            let shown_writes: Vec<usize> = texts.iter().map(|(w, _)| *w).collect();
            // A segment between a shown write and the run that may change the file in place
            // (`sed -i`, `patch`): what runs is not what the line showed.
            let first = shown_writes.iter().min().copied();
            if let Some(changer) = first.and_then(|first| {
                // In a loop, a change after the run in the text comes before its next round.
                (first + 1..segments.len()).find(|&b| {
                    b != at
                        && (any_order || b < at)
                        && !shown_writes.contains(&b)
                        && self.may_change_a_file(&segments[b])
                })
            }) {
                let why = format!(
                    "{} may change the file before it runs",
                    quote_segment(&segments[changer])
                );
                if let Some(v) = self.written_ask(&runner, &shown, why, mode) {
                    verdicts.push((at, v));
                }
            }
        }
        verdicts
    }

    /// The verdict on `text` written on the line and run by `runner` (the segment `shown`).
    fn read_written(
        &self,
        text: &str,
        runner: &Runner,
        shown: &str,
        mode: Mode,
    ) -> Option<Verdict> {
        let (language, reading) = match runner {
            Runner::Read { language, lang } => (*language, read_as(language, *lang, text)),
            Runner::Unread(language) => (
                *language,
                inline::Code {
                    language,
                    words: inline::code_words(text),
                    reading: inline::Reading::Opaque(format!(
                        "the judge has no reader for {language}"
                    )),
                },
            ),
            Runner::Shell => return self.shell_text_denied(text, "shell", shown),
            Runner::Sed => (
                "sed",
                inline::inline_code(&["sed".into(), "-e".into(), text.into()], None)?,
            ),
            // Run by its path: the kernel reads the shebang; without one, bash runs the file
            // as a shell script.
            Runner::Path => {
                return match shebang(text) {
                    Some(Some(by)) => self.read_written(text, &by, shown, mode),
                    Some(None) => self.read_written(
                        text,
                        &Runner::Unread("an unknown interpreter"),
                        shown,
                        mode,
                    ),
                    None => self.shell_text_denied(text, "shell", shown),
                };
            }
        };
        let why = match &reading.reading {
            inline::Reading::Harmless => return None,
            inline::Reading::Opaque(why) => why.clone(),
            inline::Reading::Script { path, .. } => format!("it runs the file `{path}`"),
        };
        let words: Vec<&str> = reading.words.iter().map(String::as_str).collect();
        if let Some(rule) = self.naming_deny_rules().find(|r| r.appears_in(&words)) {
            return Some(Verdict::new(
                Decision::Deny,
                format!(
                    "{shown} runs a file the line wrote, and the {language} code written holds the words of {}",
                    rule.describe()
                ),
                Cause::WrittenScript {
                    language: language.into(),
                    runner: shown.trim_matches('`').into(),
                    why,
                    rule: Some(RuleRef {
                        index: rule.index,
                        rule: rule.describe(),
                        origin: rule.origin.clone(),
                    }),
                },
            ));
        }
        self.written_ask(runner, shown, why, mode)
    }

    /// A shell script the line wrote, denied when a deny rule names one of its commands
    /// (`r''m c` is `rm c`); the rest is asked already, the segment that runs it being
    /// opaque (P5).
    fn shell_text_denied(&self, text: &str, language: &str, shown: &str) -> Option<Verdict> {
        let parsed = shell::segments(text).ok()?;
        let rule = self.naming_deny_rules().find(|r| {
            parsed.iter().any(|p| {
                let opaque = p.opaque.as_ref().map(|_| tokens(&p.words));
                r.applies(&p.words, opaque.as_deref())
            })
        })?;
        Some(Verdict::new(
            Decision::Deny,
            format!(
                "{shown} runs a file the line wrote, and the {language} code written runs what {} names",
                rule.describe()
            ),
            Cause::WrittenScript {
                language: language.into(),
                runner: shown.trim_matches('`').into(),
                why: "a command a deny rule names".into(),
                rule: Some(RuleRef {
                    index: rule.index,
                    rule: rule.describe(),
                    origin: rule.origin.clone(),
                }),
            },
        ))
    }

    /// The ask for code written on the line and run by `runner` that is not shown harmless
    /// (`why`), in mode `auto` (a deny or ask rule exists: [`Policy::written_code`]).
    fn written_ask(
        &self,
        runner: &Runner,
        shown: &str,
        why: String,
        mode: Mode,
    ) -> Option<Verdict> {
        let language = runner.language();
        (mode == Mode::Auto).then(|| {
            Verdict::new(
                Decision::Ask,
                format!(
                    "{shown} runs a file the line wrote, and the {language} code written is not shown harmless ({why})"
                ),
                Cause::WrittenScript {
                    language: language.into(),
                    runner: shown.trim_matches('`').into(),
                    why,
                    rule: None,
                },
            )
        })
    }

    /// Whether segment `at`, no redirection or `tee`, may write a file from what the line
    /// feeds it: a here-string or here-document (`dd of=x.py <<< ...`), or a pipe from an
    /// `echo` or `printf` just before it (`echo ... | dd of=x.py`), when it is not known to
    /// be read-only, makes files, and is no interpreter (whose own code is judged).
    fn writes_what_it_reads(&self, segments: &[Segment], at: usize) -> bool {
        let segment = &segments[at];
        let fed = segment.stdin.is_some()
            || at
                .checked_sub(1)
                .is_some_and(|before| prints_line_text(&segments[before]));
        fed && self.not_read_only(segment).is_some()
            && !makes_no_file(segment)
            && runner(segment).is_none()
            && inline::inline_code(&segment.words, segment.stdin.as_deref()).is_none()
    }

    /// Whether `segment` may change a file the line wrote before it is run: it is not
    /// known to be read-only, and it is neither a builtin that makes no file nor a program
    /// that only copies, moves or changes the mode of its paths (`chmod +x x.py`). An
    /// interpreter running a script (`python3 other.py`) is the project's code.
    fn may_change_a_file(&self, segment: &Segment) -> bool {
        self.not_read_only(segment).is_some()
            && !makes_no_file(segment)
            && !segment
                .words
                .first()
                .is_some_and(|w| takes_paths_as_data(base_name(w)))
            && runner(segment).is_none()
    }
}

/// How a segment runs a file the line may have written, by the language it reads it in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Runner {
    /// An interpreter the judge reads (`python3 x.py`, `awk -f p.awk`).
    Read { language: &'static str, lang: Lang },
    /// A shell running a script file (`sh x.sh`, `source x.sh`); the walk adds an opaque
    /// segment for what the script does, so the shell's own segment is asked already (P5).
    Shell,
    /// sed running a script file (`sed -f x.sed`), read as sed's commands.
    Sed,
    /// A program running a language the judge does not read (`java X.java`, `go run`).
    Unread(&'static str),
    /// A path run as a program (`./x`): its shebang says the language.
    Path,
}

impl Runner {
    fn language(&self) -> &'static str {
        match self {
            Runner::Read { language, .. } | Runner::Unread(language) => language,
            Runner::Shell => "shell",
            Runner::Sed => "sed",
            Runner::Path => "an executable file's",
        }
    }
}

/// Shells that run a script file named as their first operand.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "rbash", "ksh", "mksh", "zsh", "yash", "posh", "ash",
];

/// How `segment` runs a file the line may have written, if it may.
fn runner(segment: &Segment) -> Option<Runner> {
    let first = segment.words.first()?;
    let program = base_name(first);
    let args = &segment.words[1..];
    if matches!(program, "source" | ".")
        || SHELLS.contains(&program) && shell_script(segment).is_some()
    {
        return Some(Runner::Shell);
    }
    // An interpreter the judge reads running a script it names, or loading a module or
    // library that may be the file the line wrote (`python3 -m x`, `ruby -r./x`, `node -r
    // ./x.js`, `lua -l x`).
    // (`is_interpreter` first: a cheap look that most segments of a long line stop at.)
    if let Some(read) = (inline::is_interpreter(program) && !php_ini(program, args))
        .then(|| language_of(first))
        .flatten()
    {
        let code = inline::inline_code(&segment.words, segment.stdin.as_deref());
        let script = matches!(
            code,
            None | Some(inline::Code {
                reading: inline::Reading::Script { .. },
                ..
            })
        );
        // Python's inline code looks for what it imports in the cwd first (`import json`
        // with a `json.py` the line wrote).
        let imports = matches!(
            read,
            Runner::Read {
                lang: Lang::Python,
                ..
            }
        ) && code.is_some_and(|c| c.words.iter().any(|w| w == "import"));
        if !(script || imports || loads_a_module(&read, args)) {
            return None;
        }
        return Some(skips_lines(&read, args).unwrap_or(read));
    }
    // sed's `-f FILE` is a script of sed's commands (`e` runs one, `w` writes).
    if matches!(program, "sed" | "gsed")
        && args
            .iter()
            .any(|a| a.starts_with("-f") || a.starts_with("--file") || a.starts_with("-nf"))
    {
        return Some(Runner::Sed);
    }
    // A path run as a program; an assignment handed on as a segment of its own
    // (`BASH_ENV=/x` through `env`) is none.
    if first.contains('/') && !first.contains('=') {
        return Some(Runner::Path);
    }
    match program {
        // An ini file is no php the judge reads.
        _ if php_ini(program, args) => Some(Runner::Unread("php.ini")),
        // Java's source-file mode (JEP 330) runs the file it names: no reader exists here.
        "java" if args.iter().any(|a| a.ends_with(".java")) => Some(Runner::Unread("java")),
        "go" if args.first().is_some_and(|a| a == "run") => Some(Runner::Unread("go")),
        // Other interpreters handed a file: no reader exists here (`deno run -A x.ts`).
        _ => UNREAD
            .iter()
            .find(|(name, _)| {
                *name == program
                    || program
                        .strip_prefix(name)
                        .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
            })
            // Handed a file (`x.ts`, `./x`), not a subcommand (`deno fmt`).
            .filter(|_| {
                args.iter()
                    .any(|a| !a.starts_with('-') && a.contains(['.', '/']))
            })
            .map(|(_, language)| Runner::Unread(language)),
    }
}

/// Interpreters of languages the judge has no reader for, and their language: a file one
/// of them is handed after the line writes text is asked (issue 41). Versioned names count
/// (`tclsh8.6`).
const UNREAD: &[(&str, &str)] = &[
    ("deno", "typescript"),
    ("tsx", "typescript"),
    ("ts-node", "typescript"),
    ("Rscript", "R"),
    ("julia", "julia"),
    ("swift", "swift"),
    ("groovy", "groovy"),
    ("elixir", "elixir"),
    ("kotlin", "kotlin"),
    ("scala", "scala"),
    ("tclsh", "tcl"),
    ("wish", "tcl"),
    ("expect", "tcl"),
    ("jshell", "java"),
];

/// Whether the interpreter `read` is told to load a module or library from a file by one
/// of `args`: python's `-m`, perl's `-M`/`-m`/`-I`, ruby's `-r`/`-I`, lua's `-l`, node's
/// `-r`/`--require`/`--import`/`--loader`, php's `-d` (`auto_prepend_file`). Read as a
/// letter anywhere in a cluster of the interpreter's switches, erring towards yes.
fn loads_a_module(read: &Runner, args: &[String]) -> bool {
    let Runner::Read { lang, .. } = read else {
        return false;
    };
    let letters: &[char] = match lang {
        Lang::Python => &['m'],
        Lang::Perl => &['M', 'm', 'I'],
        Lang::Ruby => &['r', 'I'],
        Lang::Lua => &['l'],
        Lang::JavaScript => &['r'],
        Lang::Php => &['d'],
        Lang::Awk => &['i', 'l'],
    };
    args.iter().any(|a| match a.strip_prefix("--") {
        Some(long) => [
            "require",
            "import",
            "loader",
            "experimental-loader",
            "include",
            "load",
        ]
        .iter()
        .any(|name| long.starts_with(name)),
        None => a
            .strip_prefix('-')
            .is_some_and(|cluster| cluster.contains(letters)),
    })
}

/// python, perl and ruby told by `-x` to skip lines the judge reads (python the first,
/// perl and ruby all before a `#!` line naming them): what was a string to the judge may
/// be code to them (`x = """` then code, run by `python3 -x`). No reader follows that, so
/// the file is read as a language without one.
fn skips_lines(read: &Runner, args: &[String]) -> Option<Runner> {
    let Runner::Read { lang, .. } = read else {
        return None;
    };
    // The letters whose value is the rest of the word (`-r./x`, `-Mx`), read as each
    // interpreter reads its clusters.
    let (name, valued) = match lang {
        Lang::Python => ("python -x", "cmWX"),
        Lang::Perl => ("perl -x", "MmIeEiDFV"),
        Lang::Ruby => ("ruby -x", "rIECXeWTFK"),
        _ => return None,
    };
    args.iter()
        .filter(|a| !a.starts_with("--"))
        .filter_map(|a| a.strip_prefix('-'))
        .any(|cluster| {
            cluster
                .chars()
                .take_while(|c| !valued.contains(*c))
                .any(|c| c == 'x')
        })
        .then_some(Runner::Unread(name))
}

/// Whether `program` is php told to read an ini file (`-c FILE`, `--php-ini`), whose
/// settings load code (`auto_prepend_file`, `allow_url_include` with a `data:` URL).
fn php_ini(program: &str, args: &[String]) -> bool {
    program
        .strip_prefix("php")
        .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
        && args
            .iter()
            .any(|a| a.starts_with("-c") || a.starts_with("--php-ini"))
}

/// The language `program` reads its script in, when the judge has a reader for it:
/// asked of `inline` with a script operand (awk's is `-f FILE`), so the two never disagree.
fn language_of(program: &str) -> Option<Runner> {
    [&[program, "script"][..], &[program, "-f", "script"]]
        .iter()
        .find_map(|probe| {
            let words: Vec<String> = probe.iter().map(|w| w.to_string()).collect();
            match inline::inline_code(&words, None) {
                Some(inline::Code {
                    language,
                    reading: inline::Reading::Script { lang, .. },
                    ..
                }) => Some(Runner::Read { language, lang }),
                _ => None,
            }
        })
}

/// The index in its words of the script file the shell of `segment` runs (`sh x.sh`, `bash
/// -e x.sh`), if it runs one: not a command string (`-c`) or its stdin (`-s`, no operand).
/// Read as bash reads its options: a cluster of letters, `-o`/`-O` taking the next word,
/// `--rcfile` and `--init-file` a file; an operand only known at run time is no file the
/// line shows.
fn shell_script(segment: &Segment) -> Option<usize> {
    let words = &segment.words;
    let mut at = 1;
    while let Some(word) = words.get(at) {
        match word.as_str() {
            "--" => {
                return (words.get(at + 1).is_some() && !segment.expanded.contains(&(at + 1)))
                    .then_some(at + 1);
            }
            "--rcfile" | "--init-file" => at += 2,
            long if long.starts_with("--") => at += 1,
            flags if flags.len() > 1 && (flags.starts_with('-') || flags.starts_with('+')) => {
                if flags.starts_with('-') && flags.contains(['c', 's']) {
                    return None;
                }
                at += 1 + flags.matches(['o', 'O']).count();
            }
            _ => return (!segment.expanded.contains(&at)).then_some(at),
        }
    }
    None
}

/// The language the shebang of `text` names: `None` without one, `Some(None)` for an
/// interpreter the judge cannot tie to a language.
fn shebang(text: &str) -> Option<Option<Runner>> {
    let line = text.strip_prefix("#!")?.lines().next().unwrap_or("");
    let mut words = line.split_whitespace();
    let mut program = base_name(words.next().unwrap_or(""));
    if program == "env" {
        // `#!/usr/bin/env -S perl -w`, `#!/usr/bin/env python3`: the first word that is no
        // option or assignment.
        program = words
            .find(|w| !w.starts_with('-') && !w.contains('='))
            .map(base_name)
            .unwrap_or("");
    }
    if SHELLS.contains(&program) {
        return Some(Some(Runner::Shell));
    }
    Some(language_of(program))
}

/// `text` read as a file of `lang`: a shebang line is no code, and php's code is what
/// follows `<?php` (text outside it is printed; a file without it runs nothing).
fn read_as(language: &'static str, lang: Lang, text: &str) -> inline::Code {
    let body = if text.starts_with("#!") {
        text.split_once('\n').map_or("", |(_, rest)| rest)
    } else {
        text
    };
    let body = match lang {
        Lang::Php => match body.split_once("<?") {
            None => "",
            Some((_, code)) => {
                let code = code.strip_prefix("php").unwrap_or(code);
                code.trim_end().strip_suffix("?>").unwrap_or(code)
            }
        },
        _ => body,
    };
    inline::Code::read(language, lang, body)
}

/// Whether `segment` writes a file through a redirection or `tee`.
fn is_writer(segment: &Segment) -> bool {
    segment.writes_redirect() || segment.words.first().is_some_and(|w| base_name(w) == "tee")
}

/// Whether text the line shows may reach a pipe or a file anywhere on `command`: a
/// segment prints it, or a here-document or a process substitution feeds something.
pub(in crate::policy) fn line_prints_text(command: &str, segments: &[Segment]) -> bool {
    command.contains("<<") || command.contains(">(") || segments.iter().any(prints_line_text)
}

/// Whether `segment` prints text the line shows to its stdout, which a pipe may hand to the
/// writer after it (`echo ... | base64 -d > x.py`).
fn prints_line_text(segment: &Segment) -> bool {
    !segment.writes_redirect()
        && (segment.stdin.is_some()
            || segment
                .words
                .first()
                .is_some_and(|w| matches!(base_name(w), "echo" | "printf")))
}

/// What a writer puts in its file, as far as the line shows it.
enum Written {
    /// The text, exactly: `echo`'s and `printf`'s output, a here-document through `cat`
    /// or `tee`.
    Shown(String),
    /// Text the line does not show but may hand it (a here-string transformed, a pipe from
    /// an `echo`, an expansion), and why it is not shown.
    Hidden(String),
    /// Text from the project's files or programs, not from the line.
    Project,
}

/// What `segment` writes; `printed` says whether a segment before it prints text the line
/// shows (which may reach it through a pipe).
fn what_it_writes(segment: &Segment, printed: bool) -> Written {
    let words = &segment.words;
    let Some(first) = words.first() else {
        // `> f`: an empty file.
        return Written::Shown(String::new());
    };
    let program = base_name(first);
    if segment.expanded.iter().any(|&i| i > 0) {
        return Written::Hidden(format!(
            "`{program}` writes the value of an expansion, known only when the line runs"
        ));
    }
    let args = &words[1..];
    let stdin = segment.stdin.as_deref();
    // `exec > f` sends what every later command prints to the file.
    if program == "exec" {
        return Written::Hidden("`exec` sends what the commands after it print to the file".into());
    }
    let shown = match program {
        "echo" => echo(args),
        "printf" => printf(args),
        "cat" | "tee" if stdin.is_some() => {
            let files_only = program == "tee" || args.iter().all(|a| a == "-");
            files_only.then(|| stdin.unwrap_or("").to_owned())
        }
        _ => None,
    };
    if let Some(text) = shown {
        return Written::Shown(text);
    }
    // Project code prints what the project says: a script an interpreter runs, a program
    // run by its path.
    let code = inline::inline_code(words, stdin);
    let project = first.contains('/')
        || matches!(
            code,
            Some(inline::Code {
                reading: inline::Reading::Script { .. },
                ..
            })
        );
    // What the line may hand the file: its stdin, a pipe from a printer, code given on the
    // line (`perl -e 'print ...'`), or words of its own that it may print (`jq -n '"..."'`,
    // `basename '...'`) unless it prints from files and the system only.
    let prints_its_words = args.iter().any(|a| !a.starts_with('-')) && !prints_no_argument(program);
    if !project
        && (stdin.is_some()
            || printed
            || matches!(program, "echo" | "printf")
            || code.is_some()
            || prints_its_words)
    {
        return Written::Hidden(format!(
            "what `{program}` writes is not the text the line shows"
        ));
    }
    Written::Project
}

/// Programs that print from files, the project's tools or the network, never the text of
/// their arguments (`make > build.log`, `sort data > out`, `cargo test > log`): what they
/// write is the project's. An allowlist: any other program given words may print them
/// (`jq -n`, `basename`, `sed`'s `i` command), and many print an option's text (`git log
/// --format`, `date +FORMAT`, `find -printf`, `curl -w`, `ps -o`, `stat -c`, `rg -r`,
/// `cut --output-delimiter`), so those are not here.
fn prints_no_argument(program: &str) -> bool {
    const NAMES: &[&str] = &[
        "cat",
        "head",
        "tail",
        "wc",
        "cmp",
        "sort",
        "uniq",
        "grep",
        "make",
        "cargo",
        "go",
        "npm",
        "pnpm",
        "yarn",
        "pip",
        "pip3",
        "rustc",
        "gcc",
        "cc",
        "clang",
        "tar",
        "gzip",
        "gunzip",
        "zcat",
        "sha256sum",
        "md5sum",
        "wget",
    ];
    NAMES.contains(&program)
}

/// Whether the line may run a segment other than in the order of the text, read from the
/// line only when a reading asks (a line with no writer or no script run never does: J1's
/// long line costs nothing here).
struct Order<'a> {
    command: &'a str,
    loops: OnceCell<bool>,
    jumps: OnceCell<bool>,
}

impl<'a> Order<'a> {
    fn of(command: &'a str) -> Order<'a> {
        Order {
            command,
            loops: OnceCell::new(),
            jumps: OnceCell::new(),
        }
    }

    /// The line may loop or define a function ([`may_loop`]).
    fn loops(&self) -> bool {
        *self.loops.get_or_init(|| may_loop(self.command))
    }

    /// A write later in the text may come first: a loop, a function, a substitution, a run
    /// in the background ([`out_of_order`]).
    fn any(&self) -> bool {
        *self.jumps.get_or_init(|| out_of_order(self.command)) || self.loops()
    }
}

/// Whether a segment later in the text than a run may write before the run reads its
/// file: a command substitution in the run's words or redirections (`python3 x.py "$(echo
/// ... > x.py)"`: the walk puts a command before the commands nested in it, which run
/// first), a process substitution, or a run sent to the background (`python3 x.py & echo
/// ... > x.py`, a `coproc`), which the segments after it race. Read from the line's text,
/// erring towards yes (a quoted `&` or `$(` counts).
fn out_of_order(command: &str) -> bool {
    if command.contains("$(") || command.contains('`') || command.contains("<(") {
        return true;
    }
    // `coproc` as text, not as a word: reading the line's words costs a pass that
    // allocates, and a false yes costs only a stricter reading.
    if command.contains(">(") || command.contains("coproc") {
        return true;
    }
    // A lone `&`; not `&&`, `>&`, `<&`, `&>` or `|&`.
    let bytes = command.as_bytes();
    (0..bytes.len()).any(|at| {
        bytes[at] == b'&'
            && !at
                .checked_sub(1)
                .is_some_and(|before| matches!(bytes[before], b'&' | b'>' | b'<' | b'|'))
            && !bytes
                .get(at + 1)
                .is_some_and(|after| matches!(after, b'&' | b'>'))
    })
}

/// Whether the line may run a segment more than once or later than its place in the text
/// (a loop, a function defined and called): then a write after a run in the text may come
/// first. Read from the line's words, erring towards yes.
fn may_loop(command: &str) -> bool {
    command.contains("()")
        || inline::code_words(command).iter().any(|w| {
            matches!(
                w.as_str(),
                "for" | "while" | "until" | "select" | "function"
            )
        })
}
