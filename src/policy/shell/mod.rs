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
//!   and so does each whole walk, which runs on a parser thread with a large stack, so a parse
//!   can neither take the daemon down nor depend on the stack size of the thread that asked.
//!   Parser threads are kept and reused (`ParserPool`): starting a 64 MiB-stack thread for
//!   every command line cost about 0.09 ms per call, on the path of every bash call.
//!
//! Anything the walk cannot make sense of is an error: the policy treats an unparsable line
//! as unknown, never as harmless.

mod scan;
mod walk;
mod words;

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

/// Stack of the thread the walk runs on. Only touched pages are committed, so this is cheap;
/// it leaves a wide margin over what `MAX_NESTING` and `MAX_RECURSION` allow.
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
    /// It writes through an output redirection (>, >>, &>, >|, <>, 1>file...) to a target
    /// other than /dev/null or an fd duplication like >&2.
    pub writes_redirect: bool,
}

impl Segment {
    /// The words joined by spaces, for messages (quoting is not restored).
    pub fn display(&self) -> String {
        self.words.join(" ")
    }
}

/// Every simple command of `command`, in source order, or why it cannot be parsed.
///
/// A command comes before the commands nested in it (its substitutions, then what it runs
/// through a wrapper). A command that only assigns or redirects (`X=1`, `> f`) is a segment
/// with no words.
pub fn segments(command: &str) -> Result<Vec<Segment>, String> {
    if command.len() > MAX_INPUT_BYTES {
        return Err(format!(
            "the command is longer than {} KiB",
            MAX_INPUT_BYTES / 1024
        ));
    }
    PARSERS.parse(command.to_owned())
}

/// The walk of one command line, as a parser thread runs it.
fn walk(line: &str) -> Result<Vec<Segment>, String> {
    let mut walker = Walker::new();
    walker.line(line).map(|()| walker.out)
}

/// The daemon's parser threads.
static PARSERS: ParserPool = ParserPool::new(walk);

/// Parser threads kept idle for reuse. A parse blocks its caller (a runtime worker), so
/// there are rarely more parses at once than runtime workers; a burst beyond this starts
/// extra threads, which end once their parse is answered. A kept thread keeps the stack
/// pages its deepest parse touched: under 300 KiB for the deepest lines `check_nesting`
/// lets through (measured in a debug build), so the pool holds about 1 MiB at worst.
const MAX_IDLE_PARSERS: usize = 4;

/// What a caller hands a parser thread: the line, and where the answer goes.
struct ParseJob {
    line: String,
    answer: std::sync::mpsc::SyncSender<Result<Vec<Segment>, String>>,
}

/// Long-lived parser threads with large stacks, each fed through its own channel.
///
/// A caller takes an idle thread (or starts one), sends it the line and waits for the
/// answer, then puts the thread back. Taking a whole thread instead of queueing on a shared
/// one means a slow parse never delays another caller's. Every walk runs under
/// `catch_unwind`, so a panic is that parse's error and the thread goes on. Should a thread
/// die anyway, its channel closes: the parse that was running fails closed (the policy treats
/// an unparsable line as unknown), the dead thread is never reused, and the next parse starts
/// a fresh one.
struct ParserPool {
    parse: fn(&str) -> Result<Vec<Segment>, String>,
    idle: std::sync::Mutex<Vec<std::sync::mpsc::Sender<ParseJob>>>,
    /// Threads started so far (tests check reuse with it).
    started: std::sync::atomic::AtomicUsize,
}

impl ParserPool {
    const fn new(parse: fn(&str) -> Result<Vec<Segment>, String>) -> Self {
        Self {
            parse,
            idle: std::sync::Mutex::new(Vec::new()),
            started: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn parse(&self, line: String) -> Result<Vec<Segment>, String> {
        let idle = self.lock_idle().pop();
        let thread = match idle {
            Some(thread) => thread,
            None => self.start()?,
        };
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        // An idle thread has no parse running, so its channel is open; if it is not, the
        // thread is gone and this line was never parsed: fail closed like any other death.
        if thread.send(ParseJob { line, answer }).is_err() {
            return Err("the shell parser stopped".into());
        }
        match answered.recv() {
            Ok(result) => {
                let mut idle = self.lock_idle();
                if idle.len() < MAX_IDLE_PARSERS {
                    idle.push(thread);
                }
                result
            }
            // The thread died during the parse (its end of `answer` was dropped); it is
            // not put back.
            Err(_) => Err("the shell parser stopped".into()),
        }
    }

    fn start(&self) -> Result<std::sync::mpsc::Sender<ParseJob>, String> {
        let (jobs, incoming) = std::sync::mpsc::channel::<ParseJob>();
        let parse = self.parse;
        std::thread::Builder::new()
            .name("dsh-shell-parse".into())
            .stack_size(PARSER_STACK_BYTES)
            .spawn(move || {
                // Ends when the pool drops the sender (more idle threads than kept).
                for job in incoming {
                    let result =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parse(&job.line)))
                            .unwrap_or_else(|_| Err("the shell parser panicked".into()));
                    // The caller always waits for its answer; nothing to do if it cannot.
                    let _ = job.answer.send(result);
                }
            })
            .map_err(|e| format!("cannot start the shell parser: {e}"))?;
        self.started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(jobs)
    }

    fn lock_idle(&self) -> std::sync::MutexGuard<'_, Vec<std::sync::mpsc::Sender<ParseJob>>> {
        // The list is only ever pushed to or popped from; a poisoned lock holds a valid one.
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Runs `f`, turning a panic into an error: `brush-parser` unwraps on some inputs
/// (e.g. a tilde expression with a huge number).
pub(super) fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|_| format!("{what} panicked"))
}

/// Shortens an error message from the parser, which can quote arbitrary input.
pub(super) fn short_error(message: impl std::fmt::Display) -> String {
    let text = message.to_string();
    match text.char_indices().nth(MAX_ERROR_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests;
