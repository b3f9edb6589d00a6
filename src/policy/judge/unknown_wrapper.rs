//! A program without a row that is handed a program that runs code (issue 41, round 4).
//!
//! A program the tables do not know may run its arguments as a command (`logsave
//! /dev/null perl -e '...'`, `flock f sh`, `... | foo xargs -I{} sh -c {}`): the judge
//! already asks when an argument names what a deny rule names (P6) or is a command line
//! hiding its name (P3b). Here an argument names a program the tables know to run code (a
//! wrapper, a shell, an interpreter, a program with a row): from it on, the words are
//! judged as the command line they would be, with the stdin the line gives the segment,
//! and what that command line would be asked or refused is asked.

use crate::config::{Decision, Mode};
use crate::policy::shell::Segment;
use crate::policy::word::base_name;
use crate::policy::{Cause, Policy, Verdict, embedded, globs, inline, shorten, wrappers};

/// Shells that no wrapper row names: what they run is a script.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "yash", "ash", "rbash", "busybox", "fish",
];

/// Wrappers that are shell builtins only, which no program can run.
const SHELL_BUILTINS: &[&str] = &[
    ".", "source", "eval", "exec", "command", "builtin", "trap", "alias", "coproc",
];

impl Policy {
    /// The program of `segment` when the safety net for programs without a row asks about
    /// what it may run: in mode `auto` under a deny or ask rule, for a program that is no
    /// wrapper, has no row, is no interpreter and no reader of the read-only list.
    pub(in crate::policy) fn unknown_program<'s>(
        &self,
        segment: &'s Segment,
        mode: Mode,
    ) -> Option<&'s str> {
        let words = &segment.words;
        let program = base_name(words.first()?);
        let known = wrappers::is_wrapper(program)
            || embedded::has_row(program)
            || inline::is_interpreter(program)
            || self.read_only.iter().any(|p| words.starts_with(p));
        (mode == Mode::Auto && self.guarded() && !known).then_some(program)
    }

    /// The ask for an argument of a program without a row that names a program running
    /// code, when the command line from there would be asked or refused.
    pub(in crate::policy) fn runs_code_through_argument(
        &self,
        segment: &Segment,
        mode: Mode,
        globs: Option<&dyn globs::Globs>,
    ) -> Option<Verdict> {
        let program = self.unknown_program(segment, mode)?;
        (1..segment.words.len())
            .filter(|at| !segment.expanded.contains(at) && !segment.patterns.contains(at))
            .flat_map(|at| {
                // The argument itself, or the value of `--opt=value` (`--shell=sh`).
                let word = &segment.words[at];
                let value = word
                    .strip_prefix('-')
                    .and_then(|option| option.split_once('='))
                    .map(|(_, value)| {
                        let mut words = segment.words.clone();
                        words[at] = value.to_owned();
                        Segment {
                            words,
                            ..segment.clone()
                        }
                    });
                [Some((at, None)), value.map(|s| (at, Some(s)))].into_iter().flatten()
            })
            .filter(|(at, given)| runs_code(&given.as_ref().unwrap_or(segment).words[*at..]))
            .find_map(|(at, given)| {
                let line = command_line(given.as_ref().unwrap_or(segment), at);
                let judged = self.judge_bash(&line, mode, &[], globs);
                (judged.decision >= Decision::Ask).then(|| {
                    let why = format!(
                        "`{program}` has no row in the tables, and may run `{}` as its argument names it: {}",
                        shorten(&line),
                        judged.reason
                    );
                    Verdict::new(Decision::Ask, why.clone(), Cause::Opaque { why })
                })
            })
    }
}

/// Whether `words` name a program the tables know to run code (its own or what its words
/// say), so that from there on they are worth judging as a command line.
fn runs_code(words: &[String]) -> bool {
    let name = base_name(&words[0]);
    // A program runs executables, not the shell's builtins: `docker build .` runs no `.`.
    !SHELL_BUILTINS.contains(&name)
        && (wrappers::is_wrapper(name)
            || embedded::has_row(name)
            || SHELLS.contains(&name)
            || inline::inline_code(words, Some("")).is_some())
}

/// The words of `segment` from `at` on as a command line: literal words quoted as
/// they are, expansions and patterns left to expand, and the stdin the line gives the
/// segment (a literal as a here-string, one it does not show left unknown); with none,
/// dsh's own stdin, /dev/null, which holds nothing.
pub(super) fn command_line(segment: &Segment, at: usize) -> String {
    let mut line = String::new();
    for (index, word) in segment.words.iter().enumerate().skip(at) {
        if index > at {
            line.push(' ');
        }
        if segment.patterns.contains(&index) {
            line.push_str(word);
        } else if segment.expanded.contains(&index) {
            line.push('"');
            line.push_str(word);
            line.push('"');
        } else {
            line.push_str(&single_quoted(word));
        }
    }
    match (&segment.stdin, segment.fed) {
        (Some(text), _) => {
            line.push_str(" <<< ");
            line.push_str(&single_quoted(text));
        }
        (None, true) => {}
        (None, false) => line.push_str(" <<< ''"),
    }
    line
}

/// `text` as one single-quoted bash word (a quote inside ends the quoting, is escaped, and
/// starts it again). Four lines, so no crate for it.
fn single_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_keeps_words_expansions_and_stdin() {
        let segment = Segment {
            words: vec![
                "logsave".into(),
                "sh".into(),
                "it's".into(),
                "$x".into(),
                "r*".into(),
            ],
            expanded: vec![3],
            patterns: vec![4],
            stdin: Some("a'b".into()),
            ..Segment::default()
        };
        assert_eq!(
            command_line(&segment, 1),
            r#"'sh' 'it'\''s' "$x" r* <<< 'a'\''b'"#
        );
        let quiet = Segment {
            words: vec!["f".into(), "sh".into()],
            ..Segment::default()
        };
        assert_eq!(command_line(&quiet, 1), "'sh' <<< ''");
        let fed = Segment { fed: true, ..quiet };
        assert_eq!(command_line(&fed, 1), "'sh'");
    }
}
