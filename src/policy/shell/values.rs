//! The values a command line gives its own variables and positional parameters (issue 41).
//!
//! A word bash expands reaches its program as a value, not as its text: after `x=rm`,
//! `logsave /dev/null $x c` runs `rm`. A variable the line does not touch keeps the
//! environment's value, which the person chose and the judge reads as it always has (the
//! word's source text, `cargo build --target $TARGET`). A variable or positional parameter the
//! line sets is the line's choice, so what the judge reads is its value: every value the
//! line can give it, when the judge can know them, and "unknown" when it cannot (a command's
//! output, `read`, `mapfile`...), which fails closed.
//!
//! The reading is flow-insensitive on purpose: every assignment anywhere on the line (in a
//! loop, a branch, a function body, a script a wrapper runs) is a value the name may hold
//! at every use, with the environment's value besides. That is a superset of what bash can
//! do, which is what a judge that may only err towards asking needs; control flow would buy
//! precision at the price of a second interpreter.

use super::words::has_pattern;
use crate::policy::word::{Expansion, Piece, Word};
use std::collections::HashMap;

/// Most values one word is read as; a word with more is unknown.
const MAX_VALUES: usize = 32;

/// Deepest chain of variables set from variables (`a=$b; b=$c ...`) followed; a deeper one,
/// or a cycle, is unknown.
const MAX_DEPTH: usize = 8;

/// Variables bash itself sets from what the line does (`$_` is the last word of the
/// command before, `BASH_REMATCH` what `=~` matched): the line chooses their values, which
/// the judge does not follow, so they are always unknown.
const SET_BY_THE_SHELL: &[&str] = &[
    "_",
    "REPLY",
    "OPTARG",
    "MAPFILE",
    "BASH_REMATCH",
    "BASH_COMMAND",
    "BASH_ARGV",
    "BASH_EXECUTION_STRING",
    "COPROC",
    "FUNCNAME",
    "COMP_WORDS",
    "COMPREPLY",
    "DIRSTACK",
];

/// How a word holding a value the line chooses is read (issue 41).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineValue {
    /// Its index in the segment's words.
    pub index: usize,
    pub reading: ValueReading,
    /// Its value, or a word bash splits it into, may begin with `-` (it starts with an
    /// expansion or a dash, or [`LineValue::splits`]): a program that finds options among
    /// its words may read it as one.
    pub may_be_option: bool,
    /// It holds an unquoted expansion, which bash may split into several words: the value
    /// of an option may be followed by more options (`python3 -W $x x.py`).
    pub splits: bool,
    /// It holds words `xargs` reads from its input ([`Expansion::Piped`]).
    pub piped: bool,
}

/// Every value such a word can reach its program as, or why the judge cannot know them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueReading {
    Known(Vec<KnownValue>),
    Unknown(String),
}

/// One value a word can reach its program as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownValue {
    /// The words bash makes of it: more than one when an unquoted expansion holds blanks.
    pub words: Vec<String>,
    /// Bash expands it as a pattern before the program sees it.
    pub pattern: bool,
    /// It still holds an expansion of the environment's (`$HOME/x`), kept as source text.
    pub dynamic: bool,
}

/// One value a variable can hold, as far as the walk saw it set.
#[derive(Debug, Clone)]
enum Assigned {
    /// `x=...`, `declare x=...`, `printf -v x text`: that word's value; `repeats` when it
    /// is inside a loop, a function body or a script a wrapper runs, which may set it
    /// again from itself.
    Value { word: Word, repeats: bool },
    /// `for x in ...`: each word of the list, as bash splits and expands it.
    Loop(Word),
    /// A number: written (`x=5`, read as that number) or from arithmetic (`((x = y +
    /// 1))`, `let x++`, `x=$((x+1))`, read as `0`: any number is read alike).
    Number(Option<String>),
    /// Set in a way the judge does not follow, and why.
    Unknown(&'static str),
}

/// What the line sets, collected over the whole walk.
#[derive(Debug, Default)]
pub(super) struct LineSets {
    variables: HashMap<String, Vec<Assigned>>,
    /// The words of every `set` that sets the positional parameters at the top of the line.
    positional: Option<Vec<Word>>,
    /// The line sets `IFS`: how an unquoted value splits is then its choice too.
    ifs: bool,
}

impl LineSets {
    /// `name=value` (or `declare name=value`...).
    pub(super) fn assign(&mut self, name: &str, value: Word, repeats: bool) {
        let assigned = if is_number(&value) {
            // Written out it is that number; one arithmetic makes is any number.
            Assigned::Number((!value.dynamic).then_some(value.text))
        } else {
            Assigned::Value {
                word: value,
                repeats,
            }
        };
        self.record(name, assigned);
    }

    /// `for name in value ...`: one word of the list.
    pub(super) fn loop_value(&mut self, name: &str, value: Word) {
        self.record(name, Assigned::Loop(value));
    }

    /// Arithmetic assigns `name` a number.
    pub(super) fn number(&mut self, name: &str) {
        self.record(name, Assigned::Number(None));
    }

    /// `name` is set in a way the judge does not follow.
    pub(super) fn unknown(&mut self, name: &str, why: &'static str) {
        self.record(name, Assigned::Unknown(why));
    }

    /// `set -- words...` at the top of the line.
    pub(super) fn positional(&mut self, words: &[Word]) {
        self.positional
            .get_or_insert_with(Vec::new)
            .extend(words.iter().cloned());
    }

    fn record(&mut self, name: &str, assigned: Assigned) {
        self.ifs |= name == "IFS";
        self.variables
            .entry(name.to_owned())
            .or_default()
            .push(assigned);
    }

    /// Whether `name` is only ever set to numbers by the line (and so holds a number, or
    /// the environment's value before the line sets it): arithmetic on it runs nothing.
    pub(super) fn only_numbers(&self, name: &str) -> bool {
        !SET_BY_THE_SHELL.contains(&name)
            && self
                .variables
                .get(name)
                .is_some_and(|all| all.iter().all(|a| matches!(a, Assigned::Number(_))))
    }

    /// How each of `words` that holds a value the line chooses is read; the others keep
    /// their reading as written.
    pub(super) fn line_values(&self, words: &[(usize, Word)]) -> Vec<LineValue> {
        words
            .iter()
            .filter_map(|(index, word)| {
                Some(LineValue {
                    index: *index,
                    reading: self.word_values(word, 0, None)?,
                    may_be_option: may_be_option(word),
                    splits: splits(word),
                    piped: word.pieces.iter().any(|p| {
                        matches!(
                            p,
                            Piece::Expansion {
                                kind: Expansion::Piped,
                                ..
                            }
                        )
                    }),
                })
            })
            .collect()
    }

    /// Every value `word` can have, or `None` when nothing in it is the line's choice.
    fn word_values(&self, word: &Word, depth: usize, bound: Bound) -> Option<ValueReading> {
        if word.pieces.is_empty() {
            return None;
        }
        let mut values = vec![KnownValue {
            words: vec![String::new()],
            pattern: word.pattern,
            dynamic: false,
        }];
        let mut chosen = false;
        let mut joined = String::new();
        for piece in &word.pieces {
            let (source, kind, quoted) = match piece {
                Piece::Text(text) => {
                    joined.push_str(text);
                    values.iter_mut().for_each(|v| append(v, text, true));
                    continue;
                }
                Piece::Expansion {
                    source,
                    kind,
                    quoted,
                } => (source, kind, *quoted),
            };
            joined.push_str(source);
            let held = match self.expansion_values(kind, source, depth, bound) {
                Held::Environment => {
                    values.iter_mut().for_each(|v| {
                        append(v, source, true);
                        v.dynamic = true;
                    });
                    continue;
                }
                Held::Unknown(why) => return Some(ValueReading::Unknown(why)),
                Held::Values(held) => held,
            };
            chosen = true;
            if !quoted && self.ifs {
                return Some(ValueReading::Unknown(
                    "the line sets IFS, which decides how the value splits".into(),
                ));
            }
            let mut next = Vec::with_capacity(values.len() * held.len());
            for value in &values {
                for held in &held {
                    let mut value = value.clone();
                    value.dynamic |= held.dynamic;
                    value.pattern |= held.pattern || !quoted && has_pattern(&held.text);
                    append(&mut value, &held.text, quoted);
                    next.push(value);
                }
            }
            if next.len() > MAX_VALUES {
                return Some(ValueReading::Unknown(format!(
                    "it can hold more than {MAX_VALUES} values"
                )));
            }
            values = next;
        }
        // A word something rewrote after the walk (a wrapper's table trims it) is no
        // longer what its pieces say: read as unknown rather than as the wrong value.
        if joined != word.text && chosen {
            return Some(ValueReading::Unknown("the word was rewritten".into()));
        }
        chosen.then_some(ValueReading::Known(values))
    }

    /// What one expansion holds.
    fn expansion_values(&self, kind: &Expansion, source: &str, depth: usize, bound: Bound) -> Held {
        match kind {
            Expansion::Fixed => Held::Environment,
            Expansion::Output => Held::Unknown("it holds the output of a command".into()),
            Expansion::Printed(text) => Held::Values(vec![Val {
                text: text.clone(),
                dynamic: false,
                pattern: false,
            }]),
            Expansion::Piped => Held::Unknown("it holds words piped to xargs".into()),
            Expansion::Names => Held::Unknown("it holds names the line chooses".into()),
            // A replacement the line chooses (`${HOME/*/rm}` is `rm`), an array's element.
            Expansion::Computed(_) => Held::Unknown(
                "it computes a value (a replacement, an element of an array) the judge does not follow"
                    .into(),
            ),
            // A part of the environment's value is the person's, as the whole is, or
            // nothing, which leaves the line's own text (`${HOME:0:0}rm`); a part of a
            // value the line chose can be anything it holds.
            Expansion::Part(inner) => match self.expansion_values(inner, source, depth, bound) {
                Held::Environment => Held::Values(vec![
                    Val::of(&Word::default()),
                    Val {
                        text: source.to_owned(),
                        dynamic: true,
                        pattern: false,
                    },
                ]),
                _ => Held::Unknown(
                    "it takes a part of a value the line chooses, which the judge does not follow"
                        .into(),
                ),
            },
            // What the first reads, or the word: `${x:-rm}` is `rm` when `x` is unset.
            Expansion::Or(first, word) => {
                let mut held = match self.expansion_values(first, source, depth, bound) {
                    Held::Environment => vec![Val {
                        text: source.to_owned(),
                        dynamic: true,
                        pattern: false,
                    }],
                    Held::Values(values) => values,
                    unknown @ Held::Unknown(_) => return unknown,
                };
                match self.values_of_word(word, depth + 1, bound) {
                    Held::Values(values) => held.extend(values),
                    Held::Environment => held.push(Val::of(word)),
                    unknown @ Held::Unknown(_) => return unknown,
                }
                Held::Values(held)
            }
            // Nothing, or the word: `${HOME:+rm}` is `rm`.
            Expansion::IfSet(word) => {
                let mut held = vec![Val::of(&Word::default())];
                match self.values_of_word(word, depth + 1, bound) {
                    Held::Values(values) => held.extend(values),
                    Held::Environment => held.push(Val::of(word)),
                    unknown @ Held::Unknown(_) => return unknown,
                }
                Held::Values(held)
            }
            Expansion::Variable(name) if SET_BY_THE_SHELL.contains(&name.as_str()) => {
                Held::Unknown(format!(
                    "`${name}` is set by the shell from what the line runs"
                ))
            }
            Expansion::Variable(name) => match (self.variables.get(name), bound) {
                // Inside its own value: what it held before.
                (_, Some((bound, values))) if bound == name => Held::Values(values.to_vec()),
                (None, _) => Held::Environment,
                (Some(all), _) => self.variable_values(name, all, depth, bound),
            },
            Expansion::Positional { nested: true, .. } => Held::Unknown(
                "it reads an argument of a function or script, which the line chooses".into(),
            ),
            Expansion::Positional { at, nested: false } => match &self.positional {
                // `bash -c LINE` has none: `$1` is empty, as the line is written.
                None => Held::Environment,
                Some(words) => {
                    let mut held = Vec::new();
                    for word in words {
                        match self.values_of_word(word, depth, bound) {
                            Held::Values(values) => held.extend(values),
                            Held::Environment => held.push(Val::of(word)),
                            unknown @ Held::Unknown(_) => return unknown,
                        }
                    }
                    // `"$*"` is all of them in one word.
                    if at.is_none() {
                        held.push(Val {
                            text: held
                                .iter()
                                .map(|v| v.text.as_str())
                                .collect::<Vec<_>>()
                                .join(" "),
                            dynamic: held.iter().any(|v| v.dynamic),
                            pattern: held.iter().any(|v| v.pattern),
                        });
                    }
                    Held::Values(held)
                }
            },
        }
    }

    /// The values the line gives `name` (besides the environment's). An assignment from
    /// itself (`PATH=$PATH:x`, `x=${x}m`) is followed as many times as there are such
    /// assignments, each reading every value found so far: all a straight line can make.
    /// Where one can run more than once (a loop), the values have no bound: unknown.
    fn variable_values(&self, name: &str, all: &[Assigned], depth: usize, bound: Bound) -> Held {
        if depth >= MAX_DEPTH {
            return Held::Unknown(format!(
                "`{name}` is set from a chain of variables too long to follow"
            ));
        }
        let (from_itself, others): (Vec<&Assigned>, Vec<&Assigned>) =
            all.iter().partition(|a| match a {
                Assigned::Value { word, .. } | Assigned::Loop(word) => refers_to(word, name),
                _ => false,
            });
        let mut held = Vec::new();
        for assigned in others {
            match self.assigned_values(name, assigned, depth, bound) {
                Held::Values(values) => held.extend(values),
                other => return other,
            }
        }
        if from_itself.is_empty() {
            return Held::Values(held);
        }
        if from_itself
            .iter()
            .any(|a| matches!(a, Assigned::Value { repeats: true, .. }))
        {
            return Held::Unknown(format!(
                "`{name}` is set from its own value where that can happen more than once"
            ));
        }
        // What the environment gave it, read as written.
        held.push(Val {
            text: format!("${{{name}}}"),
            dynamic: true,
            pattern: false,
        });
        for _ in 0..from_itself.len() {
            let mut next = held.clone();
            for assigned in &from_itself {
                let bound = Some((name, held.as_slice()));
                match self.assigned_values(name, assigned, depth, bound) {
                    Held::Values(values) => {
                        next.extend(values.into_iter().filter(|v| !held.contains(v)))
                    }
                    other => return other,
                }
            }
            next.dedup();
            if next.len() > MAX_VALUES {
                return Held::Unknown(format!("`{name}` can hold more than {MAX_VALUES} values"));
            }
            held = next;
        }
        Held::Values(held)
    }

    /// The values one assignment gives `name`.
    fn assigned_values(&self, name: &str, assigned: &Assigned, depth: usize, bound: Bound) -> Held {
        match assigned {
            Assigned::Number(written) => Held::Values(vec![Val::of(&Word::literal(
                written.as_deref().unwrap_or("0"),
            ))]),
            Assigned::Unknown(why) => Held::Unknown(format!("`{name}` {why}")),
            Assigned::Value { word, .. } => match self.values_of_word(word, depth + 1, bound) {
                Held::Environment => Held::Values(vec![Val::of(word)]),
                other => other,
            },
            // Each word of the list, split and expanded as bash does the list: the whole
            // value and each of its blank-separated parts; a pattern (`*.rs`) stands for
            // the names it matches, which the judge reads as it reads a pattern argument.
            Assigned::Loop(word) => {
                let values = match self.values_of_word(word, depth + 1, bound) {
                    Held::Values(values) => values,
                    Held::Environment => vec![Val::of(word)],
                    unknown @ Held::Unknown(_) => return unknown,
                };
                let mut held = Vec::new();
                for value in values {
                    let pattern = value.pattern || word.pattern;
                    held.extend(
                        value
                            .text
                            .split_ascii_whitespace()
                            .filter(|part| *part != value.text)
                            .map(|part| Val {
                                text: part.to_owned(),
                                dynamic: value.dynamic,
                                pattern,
                            }),
                    );
                    held.push(Val { pattern, ..value });
                }
                Held::Values(held)
            }
        }
    }

    /// The values of a word that was assigned: its own text when nothing in it is the
    /// line's choice.
    fn values_of_word(&self, word: &Word, depth: usize, bound: Bound) -> Held {
        match self.word_values(word, depth, bound) {
            None if word.pieces.is_empty() => Held::Values(vec![Val {
                dynamic: false,
                ..Val::of(word)
            }]),
            None => Held::Environment,
            Some(ValueReading::Unknown(why)) => Held::Unknown(why),
            Some(ValueReading::Known(values)) => Held::Values(
                values
                    .into_iter()
                    .map(|v| Val {
                        text: v.words.join(" "),
                        dynamic: v.dynamic,
                        pattern: v.pattern,
                    })
                    .collect(),
            ),
        }
    }
}

/// A variable read inside its own value, with the values it held before.
type Bound<'a> = Option<(&'a str, &'a [Val])>;

/// Whether `word` reads the variable `name`.
fn refers_to(word: &Word, name: &str) -> bool {
    fn reads(kind: &Expansion, name: &str) -> bool {
        match kind {
            Expansion::Variable(n) => n == name,
            Expansion::Or(first, word) => reads(first, name) || refers_to(word, name),
            Expansion::IfSet(word) => refers_to(word, name),
            Expansion::Computed(inner) | Expansion::Part(inner) => reads(inner, name),
            _ => false,
        }
    }
    word.pieces.iter().any(|piece| match piece {
        Piece::Expansion { kind, .. } => reads(kind, name),
        Piece::Text(_) => false,
    })
}

/// What an expansion holds.
enum Held {
    /// The environment's value: read as the source text, as before.
    Environment,
    Values(Vec<Val>),
    Unknown(String),
}

/// One value a variable can hold.
#[derive(Debug, Clone, PartialEq)]
struct Val {
    text: String,
    /// It still holds an expansion of the environment's, kept as source text.
    dynamic: bool,
    /// It stands for the names of the files it matches (`for f in *.rs`).
    pattern: bool,
}

impl Val {
    /// A word's text as its value, for a word whose pieces hold nothing the line chose.
    fn of(word: &Word) -> Val {
        Val {
            text: word.text.clone(),
            dynamic: word.dynamic,
            pattern: false,
        }
    }
}

/// Appends `text` to `value`; unquoted, its blanks split it into more words.
fn append(value: &mut KnownValue, text: &str, quoted: bool) {
    let mut parts = if quoted {
        vec![text]
    } else {
        text.split([' ', '\t', '\n']).collect()
    };
    if let (Some(last), Some(first)) = (value.words.last_mut(), parts.first()) {
        last.push_str(first);
        parts.remove(0);
    }
    value.words.extend(parts.into_iter().map(str::to_owned));
}

/// Whether a value assigned is a number, as arithmetic makes (`$((x+1))`) or as written.
fn is_number(value: &Word) -> bool {
    let digits = |text: &str| {
        let text = text.strip_prefix('-').unwrap_or(text);
        !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
    };
    if value.pieces.is_empty() {
        return !value.dynamic && digits(&value.text);
    }
    value.pieces.iter().all(|piece| match piece {
        Piece::Text(text) => digits(text),
        Piece::Expansion { source, kind, .. } => {
            matches!(kind, Expansion::Fixed) && source.starts_with("$((")
        }
    })
}

/// See [`LineValue::splits`].
fn splits(word: &Word) -> bool {
    word.pieces
        .iter()
        .any(|p| matches!(p, Piece::Expansion { quoted: false, .. }))
}

/// See [`LineValue::may_be_option`].
fn may_be_option(word: &Word) -> bool {
    let starts_open = match word
        .pieces
        .iter()
        .find(|p| !matches!(p, Piece::Text(t) if t.is_empty()))
    {
        Some(Piece::Text(text)) => text.starts_with('-'),
        Some(Piece::Expansion { .. }) => true,
        None => false,
    };
    starts_open || splits(word)
}

/// Appends text that is its own value to `word`.
pub(super) fn push_text(word: &mut Word, text: &str) {
    word.text.push_str(text);
    match word.pieces.last_mut() {
        Some(Piece::Text(last)) => last.push_str(text),
        _ => word.pieces.push(Piece::Text(text.to_owned())),
    }
}

/// Appends an expansion to `word`: its source text, and what it reads.
pub(super) fn push_expansion(word: &mut Word, source: &str, kind: Expansion, quoted: bool) {
    word.text.push_str(source);
    word.pieces.push(Piece::Expansion {
        source: source.to_owned(),
        kind,
        quoted,
    });
}

/// The names an arithmetic text assigns (`x = 1`, `x += 2`, `x++`, `--x`).
pub(super) fn assigned_in_arithmetic(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut names = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_alphabetic() || b == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let name = &text[start..i];
            let before = text[..start].trim_end();
            let after = text[i..].trim_start();
            let increments = before.ends_with("++")
                || before.ends_with("--")
                || after.starts_with("++")
                || after.starts_with("--");
            let assigns = after.starts_with('=') && !after.starts_with("==")
                || ["+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "^=", "|="]
                    .iter()
                    .any(|op| after.starts_with(op));
            // A digit run before it is a base (`16#ff`), not a name.
            if (increments || assigns) && !before.ends_with('#') {
                names.push(name);
            }
        } else {
            i += 1;
        }
    }
    names
}

/// The names an arithmetic text reads, or `None` when it reads something else too (a
/// subscript, an expansion, a substitution), which no name's value can vouch for.
pub(super) fn read_in_arithmetic(text: &str) -> Option<Vec<&str>> {
    if text.contains(['[', '$', '`']) {
        return None;
    }
    let bytes = text.as_bytes();
    let mut names = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_digit() {
            // A number, in any base bash reads (`0x1f`, `16#ff`, `64#_@`).
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'#' | b'@' | b'_'))
            {
                i += 1;
            }
        } else if b.is_ascii_alphabetic() || b == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            names.push(&text[start..i]);
        } else {
            i += 1;
        }
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_names_assigned_and_read() {
        assert_eq!(assigned_in_arithmetic("i = i + 1"), vec!["i"]);
        assert_eq!(
            assigned_in_arithmetic("i++, j += 2, k == 3"),
            vec!["i", "j"]
        );
        assert_eq!(assigned_in_arithmetic("--n"), vec!["n"]);
        assert_eq!(assigned_in_arithmetic("16#ff + x"), Vec::<&str>::new());
        assert_eq!(read_in_arithmetic("i < 3 && 0x1f"), Some(vec!["i"]));
        assert_eq!(read_in_arithmetic("a[$(rm c)]"), None);
        assert_eq!(read_in_arithmetic("$x + 1"), None);
    }

    #[test]
    fn unquoted_blanks_split_a_value_quoted_ones_do_not() {
        let mut value = KnownValue {
            words: vec!["a".into()],
            pattern: false,
            dynamic: false,
        };
        append(&mut value, "b rm", false);
        assert_eq!(value.words, vec!["ab", "rm"]);
        append(&mut value, " c d", true);
        assert_eq!(value.words, vec!["ab", "rm c d"]);
    }
}
