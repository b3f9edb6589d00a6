//! The option grammar of a program's command line, as getopt and getopt_long read it.
//!
//! This file owns one question: given a program's words, which are options (with their
//! values) and where do its operands begin? Both the splitter (finding the command a wrapper
//! runs, `wrappers/`) and the judge (finding a reader's writing flags, `read_only.rs`) ask
//! it, so the two can never disagree about the same words.
//!
//! What it models, each as glibc's getopt_long does it:
//! - short options, alone or clustered (`-xvf`); a required value is the rest of the cluster
//!   or else the next word (`-n5`, `-n 5`); an optional value only the rest of the cluster;
//! - long options with `--name=value` or, for a required value, the next word; every
//!   unambiguous prefix of a long name is that option (`--adj` is `--adjustment`), an exact
//!   name wins over the longer names it prefixes, and a prefix shared by two options is
//!   refused as ambiguous;
//! - `--` ends the options; a lone `-` is an operand;
//! - programs whose optstring starts with `+` stop at the first operand (every wrapper does:
//!   the rest belongs to the command it runs); others permute, reading options after
//!   operands too.
//!
//! Anything the real program would refuse (an unknown option, an ambiguous prefix, a missing
//! value) is an error here: the caller then cannot know what runs, and says so.

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// A flag: `-v`, `--verbose`.
    No,
    /// Always a value: attached (`-n5`, `--adjustment=5`) or the next word (`-n 5`).
    Required,
    /// Only an attached value: `-i{}`, `--replace={}`; `-i` alone has none.
    Optional,
    /// A required value after which the options end and every word is an operand:
    /// python's `-c CODE` and `-m MODULE` (`python3 -c X -v` passes `-v` to the code).
    Last,
}

/// One option of a program: its short letter, its long name, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opt {
    pub short: Option<char>,
    pub long: Option<&'static str>,
    pub value: Value,
    /// Another long name of the option named here (`--wait` of flock is `--timeout`): a
    /// prefix of both names is not ambiguous, as getopt_long finds them the same.
    pub same_as: Option<&'static str>,
}

impl Opt {
    /// The name callers use to ask about it: the long name, or the letter when it has none.
    pub fn key(&self) -> String {
        match (self.long, self.short) {
            (Some(long), _) => long.to_owned(),
            (None, Some(short)) => short.to_string(),
            (None, None) => String::new(),
        }
    }

    /// Whether this is the option named `key` (its long name, the name it is another
    /// name of, or its letter).
    pub fn is(&self, key: &str) -> bool {
        self.long == Some(key)
            || self.same_as == Some(key)
            || self
                .short
                .is_some_and(|s| key.len() == 1 && key.starts_with(s))
    }

    /// The name that tells options apart: an alias shares its original's.
    fn identity(&self) -> Option<&'static str> {
        self.same_as.or(self.long)
    }
}

/// An option with a letter and a long name.
pub const fn both(short: char, long: &'static str, value: Value) -> Opt {
    Opt {
        short: Some(short),
        long: Some(long),
        value,
        same_as: None,
    }
}

/// An option with only a letter.
pub const fn short(short: char, value: Value) -> Opt {
    Opt {
        short: Some(short),
        long: None,
        value,
        same_as: None,
    }
}

/// An option with only a long name.
pub const fn long(long: &'static str, value: Value) -> Opt {
    Opt {
        short: None,
        long: Some(long),
        value,
        same_as: None,
    }
}

/// A second long name `long` for the option whose long name is `of`.
pub const fn alias(long: &'static str, of: &'static str, value: Value) -> Opt {
    Opt {
        short: None,
        long: Some(long),
        value,
        same_as: Some(of),
    }
}

/// How one program reads its command line.
#[derive(Debug, Clone, Copy)]
pub struct Grammar {
    pub options: &'static [Opt],
    /// Options may follow operands (getopt's default). Wrappers stop at the first operand.
    pub permute: bool,
    /// `-N` (digits) is an option of its own: `nice -5` is `nice -n 5`.
    pub numeric_option: bool,
}

impl Grammar {
    /// A grammar that stops at the first operand, as every wrapper's does.
    pub const fn stopping(options: &'static [Opt]) -> Grammar {
        Grammar {
            options,
            permute: false,
            numeric_option: false,
        }
    }

    /// A grammar that reads options anywhere among the operands.
    pub const fn permuting(options: &'static [Opt]) -> Grammar {
        Grammar {
            options,
            permute: true,
            numeric_option: false,
        }
    }

    fn by_short(&self, c: char) -> Option<&'static Opt> {
        self.options.iter().find(|o| o.short == Some(c))
    }

    /// The option a `--name` denotes: the exact long name, else the one long name it is a
    /// prefix of.
    fn by_long(&self, name: &str) -> Result<&'static Opt, ArgvError> {
        if let Some(exact) = self.options.iter().find(|o| o.long == Some(name)) {
            return Ok(exact);
        }
        let mut candidates = self
            .options
            .iter()
            .filter(|o| !name.is_empty() && o.long.is_some_and(|l| l.starts_with(name)));
        let first = candidates.next();
        // Names of one option (an alias and its original) are one candidate.
        let mut candidates =
            candidates.filter(|o| first.is_none_or(|f| f.identity() != o.identity()));
        match (first, candidates.next()) {
            (Some(one), None) => Ok(one),
            (None, _) => Err(ArgvError::Unknown(format!("--{name}"))),
            (Some(a), Some(b)) => Err(ArgvError::Ambiguous {
                given: format!("--{name}"),
                candidates: [a, b]
                    .into_iter()
                    .chain(candidates)
                    .filter_map(|o| o.long.map(|l| format!("--{l}")))
                    .collect(),
            }),
        }
    }
}

/// A word of a command line as the judge knows it before anything runs.
pub trait Arg {
    /// The word with quoting removed.
    fn text(&self) -> &str;
    /// Whether `text` is the word's value for certain (no expansion, glob or brace).
    fn known(&self) -> bool;
}

impl Arg for String {
    fn text(&self) -> &str {
        self
    }
    fn known(&self) -> bool {
        true
    }
}

impl Arg for &str {
    fn text(&self) -> &str {
        self
    }
    fn known(&self) -> bool {
        true
    }
}

/// Why a command line cannot be read with its program's grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgvError {
    /// An option the program does not have (it would refuse to run).
    Unknown(String),
    /// A long-option prefix shared by several options (getopt_long refuses it).
    Ambiguous {
        given: String,
        candidates: Vec<String>,
    },
    /// A value-taking option at the end of the line.
    MissingValue(String),
    /// A value given to a flag (`--verbose=1`).
    UnexpectedValue(String),
    /// A word that could be an option is only known when the line runs (`$OPTS`).
    NotKnown(String),
}

impl std::fmt::Display for ArgvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgvError::Unknown(o) => write!(f, "unknown option `{o}`"),
            ArgvError::Ambiguous { given, candidates } => {
                write!(f, "ambiguous option `{given}` ({})", candidates.join(", "))
            }
            ArgvError::MissingValue(o) => write!(f, "option `{o}` needs a value"),
            ArgvError::UnexpectedValue(o) => write!(f, "option `{o}` takes no value"),
            ArgvError::NotKnown(w) => write!(f, "`{w}` is known only when the line runs"),
        }
    }
}

/// One option found on a command line, with its value if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    pub option: &'static Opt,
    pub value: Option<String>,
    /// The value is known for certain (it may come from a word only known at run time).
    pub value_known: bool,
    /// Index of the first word after this option (and its value).
    pub next: usize,
}

/// A command line read with a grammar.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parsed {
    /// The options in the order given.
    pub options: Vec<Given>,
    /// Indices (into the words parsed) of the operands, in order.
    pub operands: Vec<usize>,
}

impl Parsed {
    /// Whether option `key` (long name or letter) was given.
    pub fn has(&self, key: &str) -> bool {
        self.options.iter().any(|g| g.option.is(key))
    }

    /// The value of the last `key` option given (the one a program keeps).
    pub fn value(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|g| g.option.is(key))
            .and_then(|g| g.value.as_deref())
    }

    /// Index of the first operand, or `len` when there is none (a stopping grammar's
    /// operands are the words from there on).
    pub fn first_operand(&self, len: usize) -> usize {
        self.operands.first().copied().unwrap_or(len)
    }
}

/// Reads `args` (the words after the program's name) with `grammar`.
pub fn parse<A: Arg>(grammar: &Grammar, args: &[A]) -> Result<Parsed, ArgvError> {
    let mut parsed = Parsed {
        options: Vec::new(),
        operands: Vec::new(),
    };
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        let text = word.text();
        if !word.known() {
            // In a grammar that stops at its first operand, a word that surely starts with a
            // plain character is that operand whatever the rest expands to (if it splits,
            // the words after it are operands too). Anywhere else it could be an option.
            let plain_start = text
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || "/._+@:,=%^".contains(c));
            if plain_start && !grammar.permute {
                parsed.operands.extend(i - 1..args.len());
                return Ok(parsed);
            }
            return Err(ArgvError::NotKnown(text.to_owned()));
        }
        if text == "--" {
            parsed.operands.extend(i..args.len());
            return Ok(parsed);
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            if grammar.numeric_option
                && !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_digit())
            {
                continue;
            }
            let option = grammar.by_long(name)?;
            let (value, value_known) = match (option.value, attached) {
                (Value::No, Some(_)) => return Err(ArgvError::UnexpectedValue(text.to_owned())),
                (Value::No, None) | (Value::Optional, None) => (None, true),
                (_, Some(value)) => (Some(value.to_owned()), true),
                (Value::Required | Value::Last, None) => {
                    let (value, known) = next_value(args, &mut i, text)?;
                    (Some(value), known)
                }
            };
            parsed.options.push(Given {
                option,
                value,
                value_known,
                next: i,
            });
            if option.value == Value::Last {
                parsed.operands.extend(i..args.len());
                return Ok(parsed);
            }
            continue;
        }
        let cluster = match text.strip_prefix('-') {
            Some(cluster) if !cluster.is_empty() => cluster,
            _ => {
                // An operand (a lone `-` is one too).
                if !grammar.permute {
                    parsed.operands.extend(i - 1..args.len());
                    return Ok(parsed);
                }
                parsed.operands.push(i - 1);
                continue;
            }
        };
        if grammar.numeric_option && is_number(cluster.strip_prefix('+').unwrap_or(cluster)) {
            continue;
        }
        for (at, c) in cluster.char_indices() {
            let option = grammar
                .by_short(c)
                .ok_or_else(|| ArgvError::Unknown(format!("-{c}")))?;
            let rest = &cluster[at + c.len_utf8()..];
            match option.value {
                Value::No => {
                    parsed.options.push(Given {
                        option,
                        value: None,
                        value_known: true,
                        next: i,
                    });
                }
                Value::Optional => {
                    let value = (!rest.is_empty()).then(|| rest.to_owned());
                    parsed.options.push(Given {
                        option,
                        value,
                        value_known: true,
                        next: i,
                    });
                    break;
                }
                Value::Required | Value::Last => {
                    let (value, value_known) = if rest.is_empty() {
                        next_value(args, &mut i, &format!("-{c}"))?
                    } else {
                        (rest.to_owned(), true)
                    };
                    parsed.options.push(Given {
                        option,
                        value: Some(value),
                        value_known,
                        next: i,
                    });
                    if option.value == Value::Last {
                        parsed.operands.extend(i..args.len());
                        return Ok(parsed);
                    }
                    break;
                }
            }
        }
    }
    Ok(parsed)
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// The word after an option that needs one. A value only known at run time is still a
/// value: it cannot turn into an option, so the words after it keep their places.
fn next_value<A: Arg>(
    args: &[A],
    i: &mut usize,
    option: &str,
) -> Result<(String, bool), ArgvError> {
    let word = args
        .get(*i)
        .ok_or_else(|| ArgvError::MissingValue(option.to_owned()))?;
    *i += 1;
    Ok((word.text().to_owned(), word.known()))
}

/// Whether `word` is the long option `--full` (with or without `=value`) or one of its
/// abbreviations of at least `min` characters after the dashes. For a scan that looks for
/// one dangerous option anywhere in a line without the program's whole grammar: `min` is
/// the shortest prefix the real program does not find ambiguous, and anything longer that
/// still prefixes `full` is that option.
pub fn is_long_option(word: &str, full: &str, min: usize) -> bool {
    let Some(name) = word.strip_prefix("--") else {
        return false;
    };
    let name = name.split('=').next().unwrap_or_default();
    name.len() >= min && full.starts_with(name)
}

/// Whether `word` is a cluster of short options (`-uo`) containing `option` before any
/// option in `with_value` (whose value is the rest of the word).
pub fn short_cluster_has(word: &str, option: char, with_value: &str) -> bool {
    let Some(cluster) = word.strip_prefix('-').filter(|c| !c.starts_with('-')) else {
        return false;
    };
    for c in cluster.chars() {
        if c == option {
            return true;
        }
        if with_value.contains(c) {
            return false;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use Value::{No, Optional, Required};

    const NICE: Grammar = Grammar {
        options: &[
            both('n', "adjustment", Required),
            long("help", No),
            long("version", No),
        ],
        permute: false,
        numeric_option: true,
    };

    fn start(grammar: &Grammar, line: &str) -> Result<usize, ArgvError> {
        let words: Vec<&str> = line.split_whitespace().collect();
        parse(grammar, &words).map(|p| p.first_operand(words.len()))
    }

    #[test]
    fn short_values_attach_or_take_the_next_word() {
        assert_eq!(start(&NICE, "-n 5 rm x"), Ok(2));
        assert_eq!(start(&NICE, "-n5 rm x"), Ok(1));
        assert_eq!(start(&NICE, "-5 rm x"), Ok(1));
        assert_eq!(start(&NICE, "--5 rm x"), Ok(1));
        assert_eq!(start(&NICE, "-+5 rm x"), Ok(1));
        assert_eq!(start(&NICE, "rm -n 5"), Ok(0));
    }

    #[test]
    fn long_options_take_every_unambiguous_prefix() {
        for spelling in ["--adjustment", "--adjust", "--adj", "--a"] {
            assert_eq!(
                start(&NICE, &format!("{spelling} 5 rm x")),
                Ok(2),
                "{spelling}"
            );
            assert_eq!(
                start(&NICE, &format!("{spelling}=5 rm x")),
                Ok(1),
                "{spelling}="
            );
        }
        assert_eq!(start(&NICE, "--he rm"), Ok(1));
    }

    #[test]
    fn an_exact_name_wins_over_longer_names_it_prefixes() {
        const G: Grammar = Grammar::stopping(&[long("out", Required), long("output", No)]);
        assert_eq!(start(&G, "--out x rm"), Ok(2));
        assert_eq!(start(&G, "--outp rm"), Ok(1));
    }

    #[test]
    fn a_prefix_of_two_names_of_one_option_is_not_ambiguous() {
        const G: Grammar = Grammar::stopping(&[
            both('w', "timeout", Required),
            alias("wait", "timeout", Required),
            long("nnp", No),
            alias("no-new-privs", "nnp", No),
            long("verbose", No),
        ]);
        assert_eq!(start(&G, "--t 1 rm"), Ok(2));
        assert_eq!(start(&G, "--wa 1 rm"), Ok(2));
        assert_eq!(start(&G, "--n rm"), Ok(1));
        let words = ["--wait", "1", "rm"];
        assert_eq!(parse(&G, &words).unwrap().value("timeout"), Some("1"));
    }

    #[test]
    fn ambiguous_and_unknown_options_are_errors() {
        const G: Grammar = Grammar::stopping(&[long("verbose", No), long("version", No)]);
        assert!(matches!(
            start(&G, "--ver rm"),
            Err(ArgvError::Ambiguous { .. })
        ));
        assert_eq!(start(&G, "--verb rm"), Ok(1));
        assert_eq!(start(&G, "--x rm"), Err(ArgvError::Unknown("--x".into())));
        assert_eq!(start(&G, "-- rm"), Ok(1));
        assert_eq!(start(&G, "--=x rm"), Err(ArgvError::Unknown("--".into())));
        assert_eq!(start(&NICE, "-z rm"), Err(ArgvError::Unknown("-z".into())));
        assert_eq!(
            start(&NICE, "--help=1 rm"),
            Err(ArgvError::UnexpectedValue("--help=1".into()))
        );
        assert_eq!(
            start(&NICE, "-n"),
            Err(ArgvError::MissingValue("-n".into()))
        );
    }

    #[test]
    fn optional_values_only_attach() {
        const G: Grammar = Grammar::stopping(&[both('i', "replace", Optional), short('t', No)]);
        assert_eq!(start(&G, "-i rm"), Ok(1));
        assert_eq!(start(&G, "-i{} rm"), Ok(1));
        assert_eq!(start(&G, "-ti{} rm"), Ok(1));
        assert_eq!(start(&G, "--replace rm"), Ok(1));
        assert_eq!(start(&G, "--rep={} rm"), Ok(1));
    }

    #[test]
    fn permuting_grammars_read_options_after_operands() {
        const G: Grammar = Grammar::permuting(&[both('c', "command", Required)]);
        let words = ["root", "-c", "rm x", "more"];
        let parsed = parse(&G, &words).unwrap();
        assert_eq!(parsed.value("command"), Some("rm x"));
        assert_eq!(parsed.value("c"), Some("rm x"));
        assert_eq!(parsed.operands, vec![0, 3]);
    }

    struct W(&'static str, bool);
    impl Arg for W {
        fn text(&self) -> &str {
            self.0
        }
        fn known(&self) -> bool {
            self.1
        }
    }

    #[test]
    fn a_word_known_only_at_run_time_is_an_error_where_it_could_be_an_option() {
        let line = [W("$OPTS", false), W("rm", true)];
        assert_eq!(
            parse(&NICE, &line),
            Err(ArgvError::NotKnown("$OPTS".into()))
        );
        // As the value of an option it is only a value.
        let line = [W("-n", true), W("$N", false), W("rm", true)];
        assert_eq!(parse(&NICE, &line).unwrap().first_operand(3), 2);
        // A word that cannot start with `-` is an operand whatever it holds.
        let line = [W("x$N", false), W("-n", true)];
        assert_eq!(parse(&NICE, &line).unwrap().first_operand(2), 0);
    }
}
