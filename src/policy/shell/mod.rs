//! Splits a bash command line into the simple commands it would run.
//!
//! The permission policy judges a command segment by segment, so this module has to find
//! every simple command a line can run: those joined by `&&`, `||`, `;`, `|` and `&`, the
//! ones inside subshells, groups, loops, conditionals and function bodies, the ones hidden in
//! command substitutions (`$( )` and backticks) wherever they appear inside a word, and the
//! ones run through wrappers such as `sudo`, `env`, `xargs`, `bash -c` or `eval`.
//!
//! Parsing is done by `brush-parser`. Command substitutions are not AST nodes there: they stay
//! inside the raw text of words, so every word is parsed again into pieces and each
//! substitution body is parsed recursively as a command line.
//!
//! The input is untrusted model output, so the parse is defended in depth:
//! - input longer than `MAX_INPUT_BYTES` is refused;
//! - a linear pre-scan (`check_nesting`) refuses lines nested more than `MAX_NESTING`
//!   levels deep, or costing more than `MAX_PARSE_COST` to parse, *before* `brush-parser`
//!   sees them: its PEG parser backtracks exponentially on some nested inputs (24 unclosed
//!   `(` take seconds; each nested `case` doubles the time to parse what it contains) and
//!   recurses once per level (a few thousand levels overflow any normal stack);
//! - recursion through substitutions, wrappers and nested compound commands is capped at
//!   `MAX_RECURSION`;
//! - every `brush-parser` call runs under `catch_unwind` (it has `unwrap`s on user input),
//!   and so does each whole walk, which runs on the caller's thread but on a fresh 64 MiB
//!   stack segment (`stacker`) whenever less than 1 MiB of the caller's stack is left, so a
//!   parse can neither take the daemon down nor depend on the stack size of the thread that
//!   asked. (Parser threads did this before; handing a line to one and back cost 0.11 ms,
//!   35 times the parse and walk of `git status`, on the path of every bash call.)
//!
//! Anything the walk cannot make sense of is an error: the policy treats an unparsable line
//! as unknown, never as harmless.

mod scan;
mod values;
mod walk;
mod words;

pub use values::{KnownValue, LineValue, ValueReading};

use walk::Walker;

/// Longest command line that is parsed at all. Real commands are far shorter; the cap bounds
/// the work an adversarial line can cause.
pub(super) const MAX_INPUT_BYTES: usize = 64 * 1024;

/// Deepest recursion through command substitutions, wrappers (`sudo`, `bash -c`...) and
/// nested compound commands. Deeper lines are refused as unparsable.
pub(super) const MAX_RECURSION: usize = 32;

/// Deepest lexical nesting (parentheses, quotes, `${ }`, keyword blocks, `[[ ]]` operators)
/// of one line handed to `brush-parser`. Its parser needs time exponential in this depth on
/// some malformed inputs, so the cap is kept low; real commands rarely nest beyond 6.
pub(super) const MAX_NESTING: usize = 16;

/// Parsing work one call may cause, in bytes parsed; see `check_nesting`. A 64 KiB line
/// costs a quarter of it; nesting multiplies the cost of what is nested.
pub(super) const MAX_PARSE_COST: u64 = 1 << 18;

/// Stack segment a walk gets when its caller's is nearly used up. Only touched pages are
/// committed, so this is cheap; it leaves a wide margin over what `MAX_NESTING` and
/// `MAX_RECURSION` allow.
pub(super) const PARSER_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Longest error text kept from `brush-parser`, whose messages can quote the input.
pub(super) const MAX_ERROR_CHARS: usize = 160;

/// One simple command found anywhere in a command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Segment {
    /// Its words with quoting removed; leading assignments (FOO=1) and redirections excluded.
    /// A word whose value is only known at run time keeps its source text (`$X`, `$(date)`).
    pub words: Vec<String>,
    /// The wrappers it was found through, outermost first: in `timeout 5 nice rm x` the
    /// segment `rm x` has [`timeout`, `nice`]. Substitutions add nothing: `$(rm x)` runs in
    /// the same place as the command around it.
    pub via: Vec<String>,
    /// Why its command cannot be known before it runs, or `None` when it can (P5): a name
    /// built from an expansion (`$X`, `$(..)`), a glob or brace pattern (`r?`), a variable
    /// set that changes what code runs (`PATH=... ls`, `LD_PRELOAD=...`), an arithmetic
    /// evaluation of variables (`$((x))`, which bash can turn into command execution), a
    /// wrapper whose command line the judge cannot read, a shell reading a script from a
    /// pipe or a file, `source`.
    pub opaque: Option<String>,
    /// Where its output redirections (>, >>, &>, >|, <>, 1>file...) write, its own and
    /// then those of the compound commands around it (`{ a; b; } > f`), in the order the
    /// line shows them; /dev/null and a descriptor duplication like >&2 are none. Empty for
    /// most segments (an empty `Vec` allocates nothing, which keeps J1's long line as cheap
    /// as before). Kept as data so that the judge can tell a file the line writes from a
    /// script it runs (P8, issue 41: `judge/written.rs`).
    pub writes: Vec<WriteTarget>,
    /// The text its stdin holds when the line shows it: a literal here-document or
    /// here-string given to it or to the wrapper that runs it. Code fed this way is read
    /// (P8); stdin from anywhere else is not shown.
    pub stdin: Option<String>,
    /// The variables set in front of it, or exported by it for the commands after it
    /// (`export`, `declare -x`), that the judge cannot show harmless (P8, issue 41): each
    /// may make a program run other code, or names a file it writes.
    pub assigned: Vec<crate::policy::word::Assigned>,
    /// The indices in `words` of those bash expands as patterns (unquoted `*`, `?`, `[`,
    /// braces) before the program sees them: `/usr/bin/r[m]` (P6).
    pub patterns: Vec<usize>,
    /// The indices in `words` of those bash expands (`"$PWD"`, `$(date)`), which keep their
    /// source text: the program gets a value, not that text. A `$` in any other word
    /// reaches the program as written (`'${x}m c'`), for it to expand (issue 41).
    pub expanded: Vec<usize>,
    /// Issue 41: its words that hold a value the line itself chooses (a variable or a
    /// positional parameter the line sets, a command's output), with every value each can
    /// reach the program as, or why that cannot be known.
    pub line_values: Vec<LineValue>,
    /// Its stdin is what the line gives it: a pipe, a redirection, a here-document (or its
    /// wrapper's, so given). Otherwise it is dsh's, which is /dev/null: it reads nothing.
    pub fed: bool,
    /// It is a wrapper's whole command (its `words`), opaque only because a word known
    /// only at run time stands where the wrapper reads an option
    /// ([`crate::policy::inner::InnerCommand::Unread`]): read by the values the line gives
    /// those words when it gives them (issue 41: `t=5; timeout $t cargo test`).
    pub unread_wrapper: bool,
}

impl Segment {
    /// The words joined by spaces, for messages (quoting is not restored).
    pub fn display(&self) -> String {
        self.words.join(" ")
    }

    /// Whether it writes through an output redirection (>, >>, &>, >|, <>, 1>file...) to a
    /// target other than /dev/null or an fd duplication like >&2: what read-only mode (P7)
    /// and the judges of files the line writes ask first.
    pub fn writes_redirect(&self) -> bool {
        !self.writes.is_empty()
    }
}

/// The target of one output redirection of a segment (P8, issue 41): the file the line
/// names, when it names one. The judge of code written to a file and then run
/// (`judge/written.rs`) compares it with the script a later segment runs; nothing else
/// reads more than that there is one ([`Segment::writes_redirect`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteTarget {
    /// A file named by a literal word, quoting removed (`> out.txt`, `>> "my log"`,
    /// `&> ./x.py`), as written: relative to the directory the segment runs in, a `~` not
    /// expanded, `./` and `..` not resolved (comparing is the reader's business).
    File(String),
    /// A word bash expands (`> "$f"`, `> $(mktemp)`) or may replace by a pathname or brace
    /// pattern (`> x*`, `> {a,b}.py`): the file is known only when the line runs.
    Unknown,
}

/// Why a command line cannot be split into segments. The judge decides alike on every
/// kind (the whole line is one opaque segment, P5); the kinds exist so that callers and
/// tests can tell a cap from a refusal of the parser, and the text is what `explain` shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The line, or a command line nested in it, is longer than the walk reads.
    #[error("{what} is longer than {} KiB", max_bytes / 1024)]
    TooLong {
        what: &'static str,
        max_bytes: usize,
    },
    /// Nested deeper than the scan or the walk follows.
    #[error("the command is nested more than {max} levels deep")]
    TooDeep { max: usize },
    /// It would cost the parser more than a line's budget.
    #[error("the command is too complex to judge")]
    TooComplex,
    /// A tilde expression with a number the parser cannot hold (it would panic).
    #[error("a tilde expression has a number too large")]
    TildeNumber,
    /// The parser refused it: its message, shortened (it can quote arbitrary input).
    #[error("{0}")]
    Syntax(String),
    /// A parser panicked on it (caught: `brush-parser` unwraps on some input).
    #[error("{0} panicked")]
    Panicked(&'static str),
}

/// Every simple command of `command`, in source order, or why it cannot be parsed.
///
/// A command comes before the commands nested in it (its substitutions, then what it runs
/// through a wrapper). A command that only assigns or redirects (`X=1`, `> f`) is a segment
/// with no words.
pub fn segments(command: &str) -> Result<Vec<Segment>, ParseError> {
    if command.len() > MAX_INPUT_BYTES {
        return Err(ParseError::TooLong {
            what: "the command",
            max_bytes: MAX_INPUT_BYTES,
        });
    }
    IN_WALK.with(|flag| flag.set(true));
    // The walk runs on the caller's thread, on a fresh stack segment when less than
    // `STACK_RED_ZONE` of the caller's is left, so its depth never depends on who asks.
    // (It used to run on a pool of parser threads: the hand-off cost about 0.11 ms per
    // line, where parsing and walking `git status` takes 3 us.)
    let result = stacker::maybe_grow(STACK_RED_ZONE, PARSER_STACK_BYTES, || {
        guarded("the shell walk", || walk(command))
    })
    .and_then(|walked| walked);
    IN_WALK.with(|flag| flag.set(false));
    result
}

/// Stack a walk may need at most: the deepest line `check_nesting` admits used under
/// 300 KiB in a debug build; the margin covers the rest.
const STACK_RED_ZONE: usize = 1024 * 1024;

thread_local! {
    /// Set while this thread walks a command line (see [`in_walk`]).
    static IN_WALK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread is inside [`segments`], whose panics (from `brush-parser`'s
/// `unwrap`s on some input) are caught and become "unparsable". For panic hooks that
/// must tell such a panic from any other, as the fuzzers' do.
pub fn in_walk() -> bool {
    IN_WALK.with(|flag| flag.get())
}

/// The walk of one command line.
fn walk(line: &str) -> Result<Vec<Segment>, ParseError> {
    let mut walker = Walker::new();
    walker.line(line)?;
    Ok(walker.finish())
}

/// Runs `f`, turning a panic into an error: `brush-parser` unwraps on some inputs
/// (e.g. a tilde expression with a huge number).
pub(super) fn guarded<T>(what: &'static str, f: impl FnOnce() -> T) -> Result<T, ParseError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|_| ParseError::Panicked(what))
}

/// Shortens an error message from the parser, which can quote arbitrary input.
pub(super) fn short_error(message: impl std::fmt::Display) -> ParseError {
    let text = message.to_string();
    match text.char_indices().nth(MAX_ERROR_CHARS) {
        Some((cut, _)) => ParseError::Syntax(format!("{}...", &text[..cut])),
        None => ParseError::Syntax(text),
    }
}

#[cfg(test)]
mod tests;
