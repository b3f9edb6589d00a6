//! A program without a row that is handed a shell or an interpreter (issue 41, round 4).
//!
//! A program the tables do not know may run its arguments as a command (`logsave
//! /dev/null perl -e '...'`, `flock f sh`): the judge already asks when an argument names
//! what a deny rule names (P6) or is a command line hiding its name (P3b). Here the argument
//! names a program that runs code: from it on, the words are read as that program's
//! command line would be, its code on the line (P8) or a script it reads from the stdin
//! the line gives it, and asked in mode `auto` under a deny or ask rule when not shown
//! harmless.

use crate::config::{Decision, Mode};
use crate::policy::inline::Reading;
use crate::policy::judge::bash::code_of;
use crate::policy::shell::{self, Segment};
use crate::policy::word::{Word, base_name};
use crate::policy::wrappers::{InnerCommand, Stdin, inner_commands};
use crate::policy::{Cause, Policy, Verdict, embedded, inline, tokens, wrappers};

/// Shells: what they run is a script (their `-c` string, a file, their stdin).
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "yash", "ash", "rbash", "busybox", "fish",
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

    /// The ask for the first argument of a program without a row that names a shell or an
    /// interpreter whose command line, read from there, runs code not shown harmless.
    pub(in crate::policy) fn runs_code_through_argument(
        &self,
        segment: &Segment,
        mode: Mode,
    ) -> Option<Verdict> {
        let program = self.unknown_program(segment, mode)?;
        let words = &segment.words;
        (1..words.len())
            .filter(|at| !segment.expanded.contains(at) && !segment.patterns.contains(at))
            .find_map(|at| {
                let inner = from(segment, at);
                let name = base_name(&words[at]);
                let why = if SHELLS.contains(&name) {
                    self.shell_runs(&inner)?
                } else {
                    match code_of(&inner)?.reading {
                        Reading::Opaque(why) => why,
                        _ => return None,
                    }
                };
                let why = format!(
                    "`{program}` has no row in the tables, and may run `{name}` as its argument names it: {why}"
                );
                Some(Verdict::new(
                    Decision::Ask,
                    why.clone(),
                    Cause::Opaque { why },
                ))
            })
    }
}

/// The words of `segment` from `at` on, as the command they would be, reading the
/// segment's stdin when the line gives one and nothing otherwise (dsh's is /dev/null).
fn from(segment: &Segment, at: usize) -> Segment {
    let shift = |indices: &[usize]| {
        indices
            .iter()
            .filter(|&&i| i >= at)
            .map(|i| i - at)
            .collect()
    };
    Segment {
        words: segment.words[at..].to_vec(),
        stdin: match (&segment.stdin, segment.fed) {
            (Some(text), _) => Some(text.clone()),
            (None, true) => None,
            (None, false) => Some(String::new()),
        },
        expanded: shift(&segment.expanded),
        patterns: shift(&segment.patterns),
        ..Segment::default()
    }
}

impl Policy {
    /// Why the shell command `inner` is asked about, if it is: it runs a script the judge
    /// cannot read, or one in which a deny rule names a command.
    fn shell_runs(&self, inner: &Segment) -> Option<String> {
        let words: Vec<Word> = inner
            .words
            .iter()
            .enumerate()
            .map(|(at, text)| Word {
                text: text.clone(),
                dynamic: inner.expanded.contains(&at),
                pattern: inner.patterns.contains(&at),
                ..Word::default()
            })
            .collect();
        let stdin = match &inner.stdin {
            Some(text) => Stdin::Literal(text.clone()),
            None => Stdin::Unknown,
        };
        inner_commands(&words, &stdin)
            .into_iter()
            .find_map(|command| match command {
                InnerCommand::Opaque { why, .. } => Some(why),
                InnerCommand::Script(script) => match shell::segments(&script) {
                    Err(e) => Some(format!("its script cannot be parsed: {e}")),
                    Ok(segments) => segments.iter().find_map(|s| {
                        let opaque = s.opaque.as_ref().map(|_| tokens(&s.words));
                        match self
                            .naming_deny_rules()
                            .find(|r| r.applies(&s.words, opaque.as_deref()))
                        {
                            Some(rule) => Some(format!(
                                "its script runs `{}`, which {} names",
                                s.display(),
                                rule.describe()
                            )),
                            None => s.opaque.clone(),
                        }
                    }),
                },
                _ => None,
            })
    }
}
