//! Values the line chooses, read by the judge (issue 41).
//!
//! A word bash expands reaches its program as a value. The shell walk reads each word that
//! holds a value the line itself chooses (a variable or positional parameter it sets, a
//! command's output: [`crate::policy::shell::LineValue`]); here a program is judged on each
//! value as it would be on that value written out. A program without a row (whose other
//! words the tables read as data): `x=rm; logsave /dev/null $x c` as `logsave /dev/null rm
//! c`; a value the judge cannot know is opaque, asked in mode `auto` under a deny or ask
//! rule, unless the program is known to take its arguments as data. A wrapper, a program
//! with a row or an interpreter, which finds its options in its words: the line each known
//! value makes, judged again by the bash judge (`e=-e; perl $e '...'` as `perl -e '...'`).

use super::made_here::takes_paths_as_data;
use super::unknown_wrapper::command_line;
use crate::config::{Decision, Mode};
use crate::policy::shell::{KnownValue, Segment, ValueReading};
use crate::policy::word::base_name;
use crate::policy::{
    Cause, Grant, Policy, Verdict, embedded, globs, inline, read_only, shorten, wrappers,
};

/// Most readings of one segment judged; a segment with more is unknown.
const MAX_VARIANTS: usize = 64;

thread_local! {
    /// Set while the line a value makes is judged (`row_read_by_value`): the judge is
    /// pure and runs on the caller's thread, so this marks one judgement's own recursion.
    static READING_BY_VALUE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Builtins and programs that take a value they are given as data, never as a command
/// to run, besides [`SHELL_ONLY`], the readers and [`takes_paths_as_data`]: `kill
/// $(pgrep x)`, `declare -r v="$(date)"`. An allowlist: anything else may run it.
const TAKES_VALUES_AS_DATA: &[&str] = &[
    "kill", "wait", "sleep", "declare", "typeset", "readonly", "export", "pushd", "popd", "umask",
    "unset",
];

impl Policy {
    /// P3b, P6 on the values the line chooses: the verdict on the first value that names
    /// what a deny rule names or is a command line that cannot be known, else an ask for a
    /// value that cannot be known.
    pub(in crate::policy) fn judge_line_values(
        &self,
        segment: &Segment,
        mode: Mode,
        grants: &[Grant],
        globs: Option<&dyn globs::Globs>,
    ) -> Option<Verdict> {
        if segment.line_values.is_empty() || segment.opaque.is_some() {
            return None;
        }
        let program = base_name(segment.words.first()?);
        if wrappers::is_wrapper(program)
            || embedded::has_row(program)
            || inline::is_interpreter(program)
        {
            return self
                .unknown_value_as_option(segment, mode)
                .or_else(|| self.row_read_by_value(segment, mode, grants, globs));
        }
        let unknown = match variants(segment) {
            Ok(variants) => {
                for (variant, shown) in variants {
                    let verdict = self
                        .names_denied_command(&variant, globs)
                        .or_else(|| self.runs_denied_argument(&variant.words))
                        .or_else(|| self.runs_opaque_argument(&variant, mode))
                        .or_else(|| self.runs_code_through_argument(&variant, mode, globs));
                    if let Some(verdict) = verdict {
                        return Some(Verdict {
                            reason: format!("{shown}: {}", verdict.reason),
                            ..verdict
                        });
                    }
                }
                segment.line_values.iter().find_map(|v| match &v.reading {
                    ValueReading::Unknown(why) => Some((v.index, why.clone())),
                    ValueReading::Known(_) => None,
                })
            }
            Err(why) => segment.line_values.first().map(|v| (v.index, why)),
        };
        let (index, why) = unknown?;
        let takes_data = SHELL_ONLY.contains(&program)
            || TAKES_VALUES_AS_DATA.contains(&program)
            || takes_paths_as_data(program)
            || self.read_only.iter().any(|p| segment.words.starts_with(p));
        if mode != Mode::Auto || !self.guarded() || takes_data {
            return None;
        }
        let word = segment.words.get(index)?;
        let why = format!(
            "its argument `{}` holds a value the line chooses that cannot be known before it runs ({why})",
            shorten(word)
        );
        Some(Verdict::new(
            Decision::Ask,
            format!("`{program}` has no row in the tables, and {why}"),
            Cause::Opaque { why },
        ))
    }

    /// A wrapper, a program with a row or an interpreter handed a value the judge cannot
    /// know where it reads its options: the value may be the option that runs code
    /// (`x=$(cat f); perl $x 'system q(rm c)'` with `-e` in the file, `rg $x c` with
    /// `--pre=rm`). Asked in mode `auto` under a deny or ask rule, as any code not shown
    /// harmless is (P8); a place that can only hold data (`git checkout "$(git merge-base a
    /// b)"`, after `--`, an option's value) is not. A wrapper's grammar refuses such a word
    /// itself (`argv`), so only rows, interpreters and find's expression are asked here.
    fn unknown_value_as_option(&self, segment: &Segment, mode: Mode) -> Option<Verdict> {
        if mode != Mode::Auto || !self.guarded() {
            return None;
        }
        let program = base_name(segment.words.first()?);
        segment.line_values.iter().find_map(|value| {
            let ValueReading::Unknown(why) = &value.reading else {
                return None;
            };
            let words = &segment.words;
            let (option, splits) = (value.may_be_option, value.splits);
            let stdin = segment.stdin.as_deref();
            let runs = option && inline::may_take_as_option(words, value.index, splits, stdin)
                || embedded::may_run_from(words, value.index, option)
                || wrappers::may_run_from(words, value.index, splits);
            runs.then(|| {
                let why = format!(
                    "its argument `{}` holds a value the line chooses that cannot be known before it runs ({why}), where `{program}` may read it as an option or a command it runs",
                    shorten(&words[value.index])
                );
                Verdict::new(
                    Decision::Ask,
                    format!("`{program}` reads code or commands from its words, and {why}"),
                    Cause::Opaque { why },
                )
            })
        })
    }

    /// A wrapper, a program with a row or an interpreter finds its options, and the
    /// command lines or code they carry, in its words, so a known value is read by judging
    /// the line that value makes, written out, with the bash judge itself: `o=--pre=rm; rg
    /// $o x c` as `rg --pre=rm x c`, `e=-e; perl $e '...'` as `perl -e '...'`. Denied when
    /// a value is; asked in mode `auto` when one is asked (in mode `ask` every line is, and
    /// read-only mode reads the values itself, `writing_option`). A value the judge cannot
    /// know is [`Self::unknown_value_as_option`]'s.
    fn row_read_by_value(
        &self,
        segment: &Segment,
        mode: Mode,
        grants: &[Grant],
        globs: Option<&dyn globs::Globs>,
    ) -> Option<Verdict> {
        match self.judge_variants(segment, mode, grants, globs)? {
            Ok(verdicts) => verdicts
                .into_iter()
                .filter(|v| {
                    v.decision == Decision::Deny
                        || v.decision == Decision::Ask && mode == Mode::Auto
                })
                .max_by_key(|v| v.decision),
            Err(why) if mode == Mode::Auto && self.guarded() => Some(Verdict::new(
                Decision::Ask,
                why.clone(),
                Cause::Opaque { why },
            )),
            Err(_) => None,
        }
    }

    /// A wrapper's command its grammar could not read for a word known only at run time
    /// ([`Segment::unread_wrapper`], `t=5; timeout $t cargo test`): when the line gives
    /// such words values the judge knows, the worst verdict on the lines those values
    /// make, each judged by the bash judge itself (a word still unknown there is opaque
    /// again, and asked). None when no value is known: the segment stays opaque.
    pub(in crate::policy) fn unread_wrapper_by_value(
        &self,
        segment: &Segment,
        mode: Mode,
        grants: &[Grant],
        globs: Option<&dyn globs::Globs>,
    ) -> Option<Verdict> {
        if !segment.unread_wrapper {
            return None;
        }
        let verdicts = self.judge_variants(segment, mode, grants, globs)?.ok()?;
        verdicts.into_iter().max_by_key(|v| v.decision)
    }

    /// The verdict of the bash judge on the line each combination of the known values of
    /// `segment`'s words makes, written out, with which values it holds before its reason;
    /// an error when there are too many to judge. None when no value is known (only a
    /// known value changes the line) or when a reading by value is under way ([`by_value`]).
    fn judge_variants(
        &self,
        segment: &Segment,
        mode: Mode,
        grants: &[Grant],
        globs: Option<&dyn globs::Globs>,
    ) -> Option<Result<Vec<Verdict>, String>> {
        let known = segment
            .line_values
            .iter()
            .any(|v| matches!(v.reading, ValueReading::Known(_)));
        if !known {
            return None;
        }
        by_value(|| {
            variants(segment).map(|variants| {
                variants
                    .into_iter()
                    .map(|(variant, shown)| {
                        let judged =
                            self.judge_bash(&command_line(&variant, 0), mode, grants, globs);
                        Verdict::new(
                            judged.decision,
                            format!("{shown}: {}", judged.reason),
                            judged.cause,
                        )
                    })
                    .collect()
            })
        })
    }
}

/// The words `xargs` reads ([`crate::policy::word::Expansion::Piped`]) are the line's
/// choice when the line prints text that may reach them (`printf -- '--pre=rm' | xargs
/// rg`); else they are what the programs before it write, file names of the project
/// (`find . -name '*.py' | xargs sed -i ...`), whose content a rule cannot promise about
/// (P8), and are not read as options.
pub(in crate::policy) fn piped_words_of_the_project(command: &str, segments: &mut [Segment]) {
    if super::written::line_prints_text(command, segments) {
        return;
    }
    for value in segments
        .iter_mut()
        .flat_map(|s| s.line_values.iter_mut())
        .filter(|v| v.piped)
    {
        value.may_be_option = false;
    }
}

/// `read` run as one judgement's reading by value; None when one is under way on this
/// thread. The line a value makes is judged without reading values again: a known value
/// may keep its expansion's text (an unset variable's default, `${x:-$y}`), which would
/// make the same line again, forever (found by the shell_judge fuzz target).
fn by_value<T>(read: impl FnOnce() -> T) -> Option<T> {
    if READING_BY_VALUE.get() {
        return None;
    }
    // Cleared on the way out even by a panic, which must not leave this thread's later
    // judgements reading no values.
    struct Reading;
    impl Drop for Reading {
        fn drop(&mut self) {
            READING_BY_VALUE.set(false);
        }
    }
    READING_BY_VALUE.set(true);
    let _reading = Reading;
    Some(read())
}

/// [`read_only::writing_option`] on what the segment's words hold: an expansion counts
/// as an option it could be, unless every value the line gives it is known and none is
/// one (`i=0; while [ $i -lt 3 ]; ...`).
pub(in crate::policy) fn writing_option(segment: &Segment) -> Option<String> {
    let option = read_only::writing_option(&segment.words)?.to_owned();
    let Some(at) = segment.words.iter().position(|w| *w == option) else {
        return Some(option);
    };
    let known = segment
        .line_values
        .iter()
        .any(|v| v.index == at && matches!(v.reading, ValueReading::Known(_)));
    if !known {
        return Some(option);
    }
    match variants(segment) {
        Ok(variants)
            if variants.iter().all(|(variant, _)| {
                variant.expanded.is_empty() && read_only::writing_option(&variant.words).is_none()
            }) =>
        {
            None
        }
        _ => Some(option),
    }
}

/// The segment once for each combination of the known values of its words, each with a
/// text saying which values it holds; an error when there are too many to judge.
fn variants(segment: &Segment) -> Result<Vec<(Segment, String)>, String> {
    let known: Vec<(usize, &[KnownValue])> = segment
        .line_values
        .iter()
        .filter_map(|v| match &v.reading {
            ValueReading::Known(values) => Some((v.index, values.as_slice())),
            ValueReading::Unknown(_) => None,
        })
        .collect();
    let count = known
        .iter()
        .try_fold(1usize, |n, (_, values)| n.checked_mul(values.len()))
        .filter(|&n| n <= MAX_VARIANTS)
        .ok_or_else(|| format!("its words can hold more than {MAX_VARIANTS} values"))?;
    Ok((0..count)
        .map(|mut choice| {
            let chosen: Vec<(usize, &KnownValue)> = known
                .iter()
                .map(|(index, values)| {
                    let value = &values[choice % values.len()];
                    choice /= values.len();
                    (*index, value)
                })
                .collect();
            with_values(segment, &chosen)
        })
        .collect())
}

/// `segment` with the words at the chosen indices replaced by the chosen values.
fn with_values(segment: &Segment, chosen: &[(usize, &KnownValue)]) -> (Segment, String) {
    let mut variant = Segment {
        words: Vec::new(),
        patterns: Vec::new(),
        expanded: Vec::new(),
        line_values: Vec::new(),
        ..segment.clone()
    };
    let mut shown = Vec::new();
    for (at, word) in segment.words.iter().enumerate() {
        match chosen.iter().find(|(index, _)| *index == at) {
            Some((_, value)) => {
                shown.push(format!(
                    "`{}` as `{}`",
                    shorten(word),
                    value.words.join(" ")
                ));
                for text in &value.words {
                    let index = variant.words.len();
                    if value.pattern {
                        variant.patterns.push(index);
                    }
                    if value.dynamic {
                        variant.expanded.push(index);
                    }
                    variant.words.push(text.clone());
                }
            }
            None => {
                let index = variant.words.len();
                if segment.patterns.contains(&at) {
                    variant.patterns.push(index);
                }
                if segment.expanded.contains(&at) {
                    variant.expanded.push(index);
                }
                variant.words.push(word.clone());
            }
        }
    }
    let shown = format!("read with {} (set on the line)", shown.join(", "));
    (variant, shown)
}

/// Builtins that run no program and read no exported variable: after a standalone
/// assignment they inherit nothing from it (`bash.rs`), and a value the line gives them
/// is data. An allowlist; anything else may be a program.
pub(in crate::policy) const SHELL_ONLY: &[&str] = &[
    "echo", "printf", "test", "[", "[[", ":", "true", "false", "cd", "pwd", "read", "shift",
    "return", "exit", "unset", "local", "set", "shopt", "let", "break", "continue",
];
