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

use brush_parser::word::{
    self as bash_word, Parameter, ParameterExpr, WordPiece, WordPieceWithSource,
};
use brush_parser::{Parser, ParserOptions, ast};
use std::collections::VecDeque;

/// Longest command line that is parsed at all. Real commands are far shorter; the cap bounds
/// the work an adversarial line can cause.
const MAX_INPUT_BYTES: usize = 64 * 1024;

/// Deepest recursion through command substitutions, wrappers (`sudo`, `bash -c`...) and
/// nested compound commands. Deeper lines are refused as unparsable.
const MAX_RECURSION: usize = 32;

/// Deepest lexical nesting (parentheses, quotes, `${ }`, keyword blocks, `[[ ]]` operators)
/// of one line handed to `brush-parser`. Its parser needs time exponential in this depth on
/// some malformed inputs, so the cap is kept low; real commands rarely nest beyond 6.
const MAX_NESTING: usize = 16;

/// Parsing work one call may cause, in bytes parsed; see `check_nesting`. A 64 KiB line
/// costs a quarter of it; nesting multiplies the cost of what is nested.
const MAX_PARSE_COST: u64 = 1 << 18;

/// Stack of the thread the walk runs on. Only touched pages are committed, so this is cheap;
/// it leaves a wide margin over what `MAX_NESTING` and `MAX_RECURSION` allow.
const PARSER_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Longest error text kept from `brush-parser`, whose messages can quote the input.
const MAX_ERROR_CHARS: usize = 160;

/// One simple command found anywhere in a command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Segment {
    /// Its words with quoting removed; leading assignments (FOO=1) and redirections excluded.
    /// A word whose value is only known at run time keeps its source text (`$X`, `$(date)`).
    pub words: Vec<String>,
    /// Some word's value cannot be known without running the shell ($VAR, ${..}, $(..), `..`,
    /// $((..))) in the command NAME position, or the name is empty while there are other
    /// words. Also set when the name is an unquoted glob or brace pattern (`r?`), when the
    /// command assigns a variable that changes what code runs (`PATH=... ls`,
    /// `LD_PRELOAD=...`), and on the extra segments that stand for an arithmetic evaluation
    /// of variables (`$((x))`), which bash can turn into command execution.
    pub dynamic_name: bool,
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
fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|_| format!("{what} panicked"))
}

/// Shortens an error message from the parser, which can quote arbitrary input.
fn short_error(message: impl std::fmt::Display) -> String {
    let text = message.to_string();
    match text.char_indices().nth(MAX_ERROR_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// A word of a simple command, as far as it can be known without running anything.
#[derive(Debug, Clone, Default)]
struct Word {
    /// The value with quoting removed; expansions keep their source text.
    text: String,
    /// It contains an expansion ($X, $(..), `..`, $((..))).
    dynamic: bool,
    /// It contains unquoted glob or brace-expansion characters, so bash may replace it.
    pattern: bool,
}

impl Word {
    fn literal(text: &str) -> Word {
        Word {
            text: text.to_owned(),
            ..Word::default()
        }
    }

    /// Whether, as a command name, it names one known command.
    fn is_known_name(&self) -> bool {
        !self.dynamic && !self.pattern && !self.text.is_empty()
    }
}

fn texts(words: &[Word]) -> Vec<String> {
    words.iter().map(|w| w.text.clone()).collect()
}

/// Walks parsed command lines and collects their segments.
struct Walker {
    options: ParserOptions,
    out: Vec<Segment>,
    depth: usize,
    /// What is left of `MAX_PARSE_COST` for all the lines parsed in this call.
    budget: u64,
}

impl Walker {
    fn new() -> Walker {
        Walker {
            options: ParserOptions::default(),
            out: Vec::new(),
            depth: 0,
            budget: MAX_PARSE_COST,
        }
    }

    /// Runs `f` one recursion level deeper, refusing to go past `MAX_RECURSION`.
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, String>) -> Result<T, String> {
        if self.depth >= MAX_RECURSION {
            return Err(format!(
                "the command is nested more than {MAX_RECURSION} levels deep"
            ));
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    /// Parses `source` as a command line and walks it.
    fn line(&mut self, source: &str) -> Result<(), String> {
        self.nested(|w| {
            if source.len() > MAX_INPUT_BYTES {
                return Err(format!(
                    "a nested command is longer than {} KiB",
                    MAX_INPUT_BYTES / 1024
                ));
            }
            check_nesting(source, &mut w.budget)?;
            let options = &w.options;
            let program = guarded("the shell parser", || {
                Parser::new(source.as_bytes(), options).parse_program()
            })?
            .map_err(short_error)?;
            for list in &program.complete_commands {
                w.list(list)?;
            }
            Ok(())
        })
    }

    fn list(&mut self, list: &ast::CompoundList) -> Result<(), String> {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first)?;
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p)?,
                }
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline) -> Result<(), String> {
        for command in &pipeline.seq {
            self.command(command)?;
        }
        Ok(())
    }

    fn command(&mut self, command: &ast::Command) -> Result<(), String> {
        match command {
            ast::Command::Simple(simple) => self.simple(simple),
            ast::Command::Compound(compound, redirects) => {
                self.redirected(redirects.as_ref(), |w| w.compound(compound))
            }
            // A definition runs nothing by itself, but its body runs whenever the name is
            // called later in the line, which cannot be tracked; judge the body as if run.
            ast::Command::Function(def) => {
                let ast::FunctionBody(body, redirects) = &def.body;
                self.redirected(redirects.as_ref(), |w| w.compound(body))
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.redirected(redirects.as_ref(), |w| w.test(&test.expr))
            }
        }
    }

    /// Walks a compound command, then applies its redirections to what it ran: every segment
    /// inside writes through them. One that runs no simple command at all (`((1)) > f`) still
    /// truncates the file, so it becomes a segment of its own.
    fn redirected(
        &mut self,
        redirects: Option<&ast::RedirectList>,
        body: impl FnOnce(&mut Self) -> Result<(), String>,
    ) -> Result<(), String> {
        let start = self.out.len();
        body(self)?;
        let end = self.out.len();
        let mut writes = false;
        for redirect in redirects.iter().flat_map(|list| list.0.iter()) {
            writes |= self.redirect(redirect)?;
        }
        if writes {
            if start == end {
                let only_redirect = Segment {
                    writes_redirect: true,
                    ..Segment::default()
                };
                self.out.insert(end, only_redirect);
            } else {
                for segment in &mut self.out[start..end] {
                    segment.writes_redirect = true;
                }
            }
        }
        Ok(())
    }

    fn compound(&mut self, compound: &ast::CompoundCommand) -> Result<(), String> {
        use ast::CompoundCommand as C;
        self.nested(|w| match compound {
            C::Arithmetic(a) => w.arithmetic(&a.expr.value, &format!("(({}))", a.expr.value)),
            C::ArithmeticForClause(f) => {
                for expr in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    w.arithmetic(&expr.value, &format!("(({}))", expr.value))?;
                }
                w.list(&f.body.list)
            }
            C::BraceGroup(group) => w.list(&group.list),
            C::Subshell(subshell) => w.list(&subshell.list),
            C::ForClause(f) => {
                for value in f.values.iter().flatten() {
                    w.word(value)?;
                }
                w.list(&f.body.list)
            }
            C::CaseClause(c) => {
                w.word(&c.value)?;
                for item in &c.cases {
                    for pattern in &item.patterns {
                        w.word(pattern)?;
                    }
                    if let Some(list) = &item.cmd {
                        w.list(list)?;
                    }
                }
                Ok(())
            }
            C::IfClause(i) => {
                w.list(&i.condition)?;
                w.list(&i.then)?;
                for clause in i.elses.iter().flatten() {
                    if let Some(condition) = &clause.condition {
                        w.list(condition)?;
                    }
                    w.list(&clause.body)?;
                }
                Ok(())
            }
            C::WhileClause(clause) | C::UntilClause(clause) => {
                w.list(&clause.0)?;
                w.list(&clause.1.list)
            }
            C::Coprocess(coproc) => w.command(&coproc.body),
        })
    }

    /// `[[ ]]`: runs nothing itself, but its operands can hold substitutions, and its
    /// arithmetic comparisons and `-v` evaluate variables as arithmetic.
    fn test(&mut self, expr: &ast::ExtendedTestExpr) -> Result<(), String> {
        use ast::{BinaryPredicate as B, ExtendedTestExpr as E, UnaryPredicate as U};
        self.nested(|w| match expr {
            E::And(a, b) | E::Or(a, b) => {
                w.test(a)?;
                w.test(b)
            }
            E::Not(a) | E::Parenthesized(a) => w.test(a),
            E::UnaryTest(predicate, operand) => {
                let operand = w.word(operand)?;
                if matches!(
                    predicate,
                    U::ShellVariableIsSetAndAssigned | U::ShellVariableIsSetAndNameRef
                ) && operand.text.contains('[')
                {
                    w.arithmetic_hazard(&format!("[[ -v {} ]]", operand.text));
                }
                Ok(())
            }
            E::BinaryTest(predicate, left, right) => {
                let left = w.word(left)?;
                let right = w.word(right)?;
                let arithmetic = matches!(
                    predicate,
                    B::ArithmeticEqualTo
                        | B::ArithmeticNotEqualTo
                        | B::ArithmeticLessThan
                        | B::ArithmeticLessThanOrEqualTo
                        | B::ArithmeticGreaterThan
                        | B::ArithmeticGreaterThanOrEqualTo
                );
                if arithmetic
                    && (evaluates_variables(&left.text) || evaluates_variables(&right.text))
                {
                    w.arithmetic_hazard(&format!("[[ {} {predicate} {} ]]", left.text, right.text));
                }
                Ok(())
            }
        })
    }

    fn simple(&mut self, command: &ast::SimpleCommand) -> Result<(), String> {
        // Reserve the command's place so that it precedes the commands nested in its words.
        let index = self.out.len();
        self.out.push(Segment::default());
        let mut parts = Parts::default();
        if let Some(prefix) = &command.prefix {
            for item in &prefix.0 {
                self.item(item, true, &mut parts)?;
            }
        }
        if let Some(name) = &command.word_or_name {
            let name = self.word(name)?;
            parts.words.push(name);
        }
        if let Some(suffix) = &command.suffix {
            for item in &suffix.0 {
                self.item(item, false, &mut parts)?;
            }
        }
        let dynamic_name = parts.risky_env
            || parts
                .words
                .first()
                .is_some_and(|name| !name.is_known_name());
        self.out[index] = Segment {
            words: texts(&parts.words),
            dynamic_name,
            writes_redirect: parts.writes,
        };
        self.unwrap(&parts.words)
    }

    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        in_prefix: bool,
        parts: &mut Parts,
    ) -> Result<(), String> {
        use ast::CommandPrefixOrSuffixItem as I;
        match item {
            I::Word(word) => {
                let word = self.word(word)?;
                parts.words.push(word);
            }
            // Before the name it is an assignment (not a word); after it, an argument such
            // as `export X=1` or `declare a=(1 2)`.
            I::AssignmentWord(assignment, word) => {
                if in_prefix {
                    self.assignment(assignment)?;
                    parts.risky_env |= changes_code(assignment_name(assignment));
                } else {
                    let word = self.word(word)?;
                    parts.words.push(word);
                }
            }
            I::IoRedirect(redirect) => parts.writes |= self.redirect(redirect)?,
            I::ProcessSubstitution(kind, subshell) => {
                self.nested(|w| w.list(&subshell.list))?;
                parts.words.push(Word {
                    text: format!("{kind}({})", subshell.list),
                    dynamic: true,
                    pattern: false,
                });
            }
        }
        Ok(())
    }

    fn assignment(&mut self, assignment: &ast::Assignment) -> Result<(), String> {
        if let ast::AssignmentName::ArrayElementName(name, index) = &assignment.name {
            self.arithmetic(index, &format!("{name}[{index}]="))?;
        }
        match &assignment.value {
            ast::AssignmentValue::Scalar(value) => {
                self.word(value)?;
            }
            ast::AssignmentValue::Array(elements) => {
                for (key, value) in elements {
                    if let Some(key) = key {
                        self.word(key)?;
                    }
                    self.word(value)?;
                }
            }
        }
        Ok(())
    }

    /// Walks a redirection's words; true when it writes to a file.
    fn redirect(&mut self, redirect: &ast::IoRedirect) -> Result<bool, String> {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T, IoRedirect as R};
        Ok(match redirect {
            R::File(_, kind, target) => {
                let output = matches!(
                    kind,
                    K::Write | K::Append | K::Clobber | K::ReadAndWrite | K::DuplicateOutput
                );
                match target {
                    T::Filename(word) | T::Duplicate(word) => {
                        let target = self.word(word)?;
                        // `>&2`, `2>&1-`, `>&-` duplicate or close descriptors; `>&file` is
                        // bash for `&>file`.
                        let duplicates = matches!(kind, K::DuplicateOutput | K::DuplicateInput)
                            && is_descriptor(&target);
                        output && !duplicates && !is_dev_null(&target)
                    }
                    T::Fd(_) => false,
                    T::ProcessSubstitution(_, subshell) => {
                        self.nested(|w| w.list(&subshell.list))?;
                        false
                    }
                }
            }
            R::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    self.heredoc(&doc.doc.value)?;
                }
                false
            }
            R::HereString(_, word) => {
                self.word(word)?;
                false
            }
            R::OutputAndError(word, _) => {
                let target = self.word(word)?;
                !is_dev_null(&target)
            }
        })
    }

    fn word(&mut self, word: &ast::Word) -> Result<Word, String> {
        self.word_text(&word.value)
    }

    /// Parses raw word text into pieces, walking every substitution in it.
    fn word_text(&mut self, raw: &str) -> Result<Word, String> {
        self.nested(|w| {
            let options = &w.options;
            let pieces = guarded("the word parser", || bash_word::parse(raw, options))?
                .map_err(short_error)?;
            let mut word = Word::default();
            w.pieces(raw, &pieces, false, &mut word)?;
            Ok(word)
        })
    }

    /// A here-document body that expands: only its substitutions matter.
    fn heredoc(&mut self, body: &str) -> Result<(), String> {
        self.nested(|w| {
            let options = &w.options;
            let pieces = guarded("the here-document parser", || {
                bash_word::parse_heredoc(body, options)
            })?
            .map_err(short_error)?;
            w.pieces(body, &pieces, true, &mut Word::default())
        })
    }

    fn pieces(
        &mut self,
        raw: &str,
        pieces: &[WordPieceWithSource],
        quoted: bool,
        word: &mut Word,
    ) -> Result<(), String> {
        for piece in pieces {
            // Piece indices are offsets into `raw`, also for pieces nested in double quotes.
            let source = raw
                .get(piece.start_index..piece.end_index)
                .unwrap_or_default();
            match &piece.piece {
                WordPiece::Text(text) => {
                    word.pattern |= !quoted && has_pattern(text);
                    word.text.push_str(text);
                }
                WordPiece::SingleQuotedText(text) => word.text.push_str(text),
                WordPiece::AnsiCQuotedText(text) => word.text.push_str(&decode_ansi_c(text)),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(raw, inner, true, word)?;
                }
                // `~` depends only on the user's home, not on anything the command controls.
                WordPiece::TildeExpansion(_) => word.text.push_str(source),
                WordPiece::ParameterExpansion(expr) => {
                    word.dynamic = true;
                    word.text.push_str(source);
                    self.parameter(expr, source)?;
                }
                WordPiece::CommandSubstitution(body)
                | WordPiece::BackquotedCommandSubstitution(body) => {
                    word.dynamic = true;
                    word.text.push_str(source);
                    self.line(body)?;
                }
                WordPiece::EscapeSequence(escape) => word.text.push_str(unescape(escape)),
                WordPiece::ArithmeticExpression(expr) => {
                    word.dynamic = true;
                    word.text.push_str(source);
                    self.arithmetic(&expr.value, source)?;
                }
            }
        }
        Ok(())
    }

    /// `${...}`: its operands are words of their own (`${x:-$(cmd)}`), and some forms
    /// evaluate arithmetic (`${a[i]}`, `${x:i:n}`) or a name taken from a value (`${!x}`).
    fn parameter(&mut self, expr: &ParameterExpr, source: &str) -> Result<(), String> {
        use ParameterExpr as P;
        let (parameter, indirect) = match expr {
            P::Parameter {
                parameter,
                indirect,
            }
            | P::ParameterLength {
                parameter,
                indirect,
            }
            | P::Transform {
                parameter,
                indirect,
                ..
            } => (parameter, *indirect),
            P::UseDefaultValues {
                parameter,
                indirect,
                default_value: text,
                ..
            }
            | P::AssignDefaultValues {
                parameter,
                indirect,
                default_value: text,
                ..
            }
            | P::IndicateErrorIfNullOrUnset {
                parameter,
                indirect,
                error_message: text,
                ..
            }
            | P::UseAlternativeValue {
                parameter,
                indirect,
                alternative_value: text,
                ..
            }
            | P::RemoveSmallestSuffixPattern {
                parameter,
                indirect,
                pattern: text,
            }
            | P::RemoveLargestSuffixPattern {
                parameter,
                indirect,
                pattern: text,
            }
            | P::RemoveSmallestPrefixPattern {
                parameter,
                indirect,
                pattern: text,
            }
            | P::RemoveLargestPrefixPattern {
                parameter,
                indirect,
                pattern: text,
            }
            | P::UppercaseFirstChar {
                parameter,
                indirect,
                pattern: text,
            }
            | P::UppercasePattern {
                parameter,
                indirect,
                pattern: text,
            }
            | P::LowercaseFirstChar {
                parameter,
                indirect,
                pattern: text,
            }
            | P::LowercasePattern {
                parameter,
                indirect,
                pattern: text,
            } => {
                if let Some(text) = text {
                    self.word_text(text)?;
                }
                (parameter, *indirect)
            }
            P::Substring {
                parameter,
                indirect,
                offset,
                length,
            } => {
                self.arithmetic(&offset.value, source)?;
                if let Some(length) = length {
                    self.arithmetic(&length.value, source)?;
                }
                (parameter, *indirect)
            }
            P::ReplaceSubstring {
                parameter,
                indirect,
                pattern,
                replacement,
                ..
            } => {
                self.word_text(pattern)?;
                if let Some(replacement) = replacement {
                    self.word_text(replacement)?;
                }
                (parameter, *indirect)
            }
            P::VariableNames { .. } | P::MemberKeys { .. } => return Ok(()),
        };
        if indirect {
            self.arithmetic_hazard(source);
        }
        if let Parameter::NamedWithIndex { index, .. } = parameter
            && index != "@"
            && index != "*"
        {
            self.arithmetic(index, source)?;
        }
        Ok(())
    }

    /// Arithmetic text (`$(( ))`, `(( ))`, subscripts): walks its substitutions, and adds a
    /// hazard segment when it reads variables.
    fn arithmetic(&mut self, text: &str, display: &str) -> Result<(), String> {
        // Quotes are not special in arithmetic, so the here-document grammar (which only
        // knows `$`, backticks and backslashes) finds the substitutions without choking on
        // operators that a word cannot contain.
        self.heredoc(text)?;
        if evaluates_variables(text) {
            self.arithmetic_hazard(display);
        }
        Ok(())
    }

    /// Bash evaluates a variable used in arithmetic as an expression in turn, and array
    /// subscripts in that expression run command substitutions: after
    /// `x='a[$(rm -rf ~)]'`, `echo $((x))` runs `rm`. What a variable holds cannot be known
    /// statically, so such an evaluation is a segment whose command is unknown.
    fn arithmetic_hazard(&mut self, display: &str) {
        self.out.push(Segment {
            words: vec![display.to_owned()],
            dynamic_name: true,
            writes_redirect: false,
        });
    }

    /// Adds the commands that the command `words` runs through a wrapper.
    fn unwrap(&mut self, words: &[Word]) -> Result<(), String> {
        for inner in inner_commands(words) {
            self.nested(|w| match inner {
                Inner::Command { words, risky_env } => {
                    let dynamic_name =
                        risky_env || words.first().is_none_or(|n| !n.is_known_name());
                    w.out.push(Segment {
                        words: texts(&words),
                        dynamic_name,
                        writes_redirect: false,
                    });
                    w.unwrap(&words)
                }
                Inner::Script(script) => w.line(&script),
                Inner::Unknown(words) => {
                    w.out.push(Segment {
                        words: texts(&words),
                        dynamic_name: true,
                        writes_redirect: false,
                    });
                    Ok(())
                }
            })?;
        }
        Ok(())
    }
}

/// What one simple command is made of, collected while walking it.
#[derive(Default)]
struct Parts {
    words: Vec<Word>,
    writes: bool,
    risky_env: bool,
}

fn assignment_name(assignment: &ast::Assignment) -> &str {
    match &assignment.name {
        ast::AssignmentName::VariableName(name) => name,
        ast::AssignmentName::ArrayElementName(name, _) => name,
    }
}

/// Environment variables that change which program runs or make a program run other code
/// (`PATH=./evil:$PATH ls`, `LD_PRELOAD=x.so cat`, `GIT_PAGER=sh git log`). A command that
/// sets one is not the command its words name. Not exhaustive: programs read many more.
fn changes_code(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "PATH",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "IFS",
        "PS4",
        "PROMPT_COMMAND",
        "HOME",
        "XDG_CONFIG_HOME",
        "PAGER",
        "MANPAGER",
        "EDITOR",
        "VISUAL",
        "LESSOPEN",
        "LESSCLOSE",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "NODE_OPTIONS",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_EXEC_PATH",
        "GIT_EXTERNAL_DIFF",
        "GIT_PAGER",
        "GIT_EDITOR",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_ASKPASS",
        // A ripgrep config file can switch on `--pre PROG`, which runs PROG.
        "RIPGREP_CONFIG_PATH",
    ];
    const PREFIXES: &[&str] = &["LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_"];
    NAMES.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

fn is_dev_null(word: &Word) -> bool {
    !word.dynamic && word.text == "/dev/null"
}

/// `2`, `1-` (move) or `-` (close): the target of a descriptor duplication.
fn is_descriptor(word: &Word) -> bool {
    let digits = word.text.strip_suffix('-').unwrap_or(&word.text);
    !word.dynamic && (digits.is_empty() || digits.bytes().all(|b| b.is_ascii_digit()))
}

/// Unquoted text that bash may replace by pathname or brace expansion.
fn has_pattern(text: &str) -> bool {
    let closes_later = |open: char, close: char| {
        text.find(open)
            .is_some_and(|at| text[at + open.len_utf8()..].contains(close))
    };
    text.contains(['*', '?', '(']) || closes_later('[', ']') || closes_later('{', '}')
}

/// The character an escape sequence stands for; a backslash-newline stands for nothing.
fn unescape(escape: &str) -> &str {
    match escape.strip_prefix('\\') {
        Some("\n") => "",
        Some(rest) if !rest.is_empty() => rest,
        _ => escape,
    }
}

/// Whether arithmetic text reads a variable (a name or an expansion other than the numeric
/// `$#`, `$?`, `$$`, `$!`). Numeric literals such as `0x1f` or `16#ff` are not names.
fn evaluates_variables(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'$' => match bytes.get(i + 1) {
                Some(b'#' | b'?' | b'$' | b'!') => i += 2,
                _ => return true,
            },
            b'`' => return true,
            b'0'..=b'9' => {
                while bytes
                    .get(i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'#' | b'@' | b'_'))
                {
                    i += 1;
                }
            }
            _ if b.is_ascii_alphabetic() || b == b'_' => return true,
            _ => i += 1,
        }
    }
    false
}

/// Decodes the body of `$'...'` as bash does, so that `$'\x72m'` is seen as `rm`.
fn decode_ansi_c(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    // Reads up to `max` digits of `radix` as one number.
    fn number(
        chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
        radix: u32,
        max: usize,
    ) -> Option<u32> {
        let mut value: Option<u32> = None;
        for _ in 0..max {
            let Some(digit) = chars.peek().and_then(|c| c.to_digit(radix)) else {
                break;
            };
            chars.next();
            value = Some(
                value
                    .unwrap_or(0)
                    .saturating_mul(radix)
                    .saturating_add(digit),
            );
        }
        value
    }
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let decoded = match chars.next() {
            None => Some('\\'),
            Some('a') => Some('\x07'),
            Some('b') => Some('\x08'),
            Some('e' | 'E') => Some('\x1b'),
            Some('f') => Some('\x0c'),
            Some('n') => Some('\n'),
            Some('r') => Some('\r'),
            Some('t') => Some('\t'),
            Some('v') => Some('\x0b'),
            Some(c @ ('\\' | '\'' | '"' | '?')) => Some(c),
            Some(c @ '0'..='7') => {
                let mut value = c.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|d| d.to_digit(8)) {
                        Some(digit) => {
                            chars.next();
                            value = value * 8 + digit;
                        }
                        None => break,
                    }
                }
                char::from_u32(value & 0xff)
            }
            Some('x') => match number(&mut chars, 16, 2) {
                Some(v) => char::from_u32(v),
                None => {
                    out.push_str("\\x");
                    continue;
                }
            },
            Some(u @ ('u' | 'U')) => match number(&mut chars, 16, if u == 'u' { 4 } else { 8 }) {
                Some(v) => Some(char::from_u32(v).unwrap_or(char::REPLACEMENT_CHARACTER)),
                None => {
                    out.push('\\');
                    out.push(u);
                    continue;
                }
            },
            Some('c') => match chars.next() {
                Some(c) => char::from_u32(u32::from(c) & 0x1f),
                None => {
                    out.push_str("\\c");
                    continue;
                }
            },
            Some(other) => {
                out.push('\\');
                Some(other)
            }
        };
        match decoded {
            // Bash truncates the string at a NUL.
            Some('\0') => break,
            Some(c) => out.push(c),
            None => {}
        }
    }
    out
}

/// A command that another command runs.
enum Inner {
    /// Given as words: `sudo rm x` runs `rm x`.
    Command {
        words: Vec<Word>,
        /// The wrapper sets a variable that changes what code runs (`env PATH=. ls`).
        risky_env: bool,
    },
    /// Given as a command line: `bash -c 'rm x'`, `eval "rm x"`.
    Script(String),
    /// Only known at run time: `bash -c "$X"`, `sudo $OPTS rm`.
    Unknown(Vec<Word>),
}

/// How a wrapper's options are spelled, to find where the wrapped command starts.
struct Options {
    /// Short options that take a value, attached (`-n5`) or as the next word (`-n 5`).
    with_value: &'static str,
    /// Short options whose value can only be attached (`xargs -i{}`).
    with_attached_value: &'static str,
    /// Long options that take a value as the next word unless given as `--name=value`.
    long_with_value: &'static [&'static str],
}

const NO_OPTIONS: Options = Options {
    with_value: "",
    with_attached_value: "",
    long_with_value: &[],
};

/// What the command `words` runs through a wrapper, if it is one. Wrappers are recognized
/// by the last path component of their name, so `/usr/bin/sudo` is `sudo`.
fn inner_commands(words: &[Word]) -> Vec<Inner> {
    let Some(name) = words.first().filter(|name| name.is_known_name()) else {
        return Vec::new();
    };
    let base = name.text.rsplit('/').next().unwrap_or_default();
    let after = |options: &Options, assignments: bool| after_options(words, options, assignments);
    match base {
        "sudo" => after(
            &Options {
                with_value: "CDghpRrTtUu",
                with_attached_value: "",
                long_with_value: &[
                    "close-from",
                    "chdir",
                    "group",
                    "host",
                    "prompt",
                    "chroot",
                    "role",
                    "type",
                    "command-timeout",
                    "other-user",
                    "user",
                ],
            },
            true,
        ),
        "doas" => after(
            &Options {
                with_value: "uC",
                ..NO_OPTIONS
            },
            false,
        ),
        "nohup" | "builtin" => after(&NO_OPTIONS, false),
        "nice" => after(
            &Options {
                with_value: "n",
                with_attached_value: "",
                long_with_value: &["adjustment"],
            },
            false,
        ),
        "time" => after(
            &Options {
                with_value: "fo",
                with_attached_value: "",
                long_with_value: &["format", "output"],
            },
            false,
        ),
        "exec" => after(
            &Options {
                with_value: "a",
                ..NO_OPTIONS
            },
            false,
        ),
        "stdbuf" => after(
            &Options {
                with_value: "ioe",
                with_attached_value: "",
                long_with_value: &["input", "output", "error"],
            },
            false,
        ),
        "setsid" => after(&NO_OPTIONS, false),
        "xargs" => after(
            &Options {
                with_value: "adEILnPs",
                with_attached_value: "eil",
                long_with_value: &[
                    "arg-file",
                    "delimiter",
                    "max-args",
                    "max-procs",
                    "max-chars",
                    "process-slot-var",
                ],
            },
            false,
        ),
        // `command -v NAME` only looks NAME up.
        "command" => {
            let looks_up = words[1..]
                .iter()
                .take_while(|w| !w.dynamic && w.text.starts_with('-') && w.text != "--")
                .any(|w| w.text.contains(['v', 'V']));
            if looks_up {
                Vec::new()
            } else {
                after(&NO_OPTIONS, false)
            }
        }
        "timeout" => timeout(words),
        "env" => env(words),
        "bash" | "sh" | "zsh" | "dash" | "ksh" | "mksh" | "ash" => shell_script(words),
        "eval" => eval(words),
        "trap" => trap(words),
        "find" => find_exec(words),
        _ => Vec::new(),
    }
}

/// Index of the first word after the options that start at `start`, or `None` when a word
/// that could be an option is only known at run time.
fn skip_options(words: &[Word], start: usize, options: &Options) -> Option<usize> {
    let mut i = start;
    while let Some(word) = words.get(i) {
        if word.dynamic {
            return None;
        }
        let text = word.text.as_str();
        if text == "--" {
            return Some(i + 1);
        }
        if let Some(long) = text.strip_prefix("--") {
            let takes_next = !long.contains('=') && options.long_with_value.contains(&long);
            i += if takes_next { 2 } else { 1 };
            continue;
        }
        let Some(cluster) = text.strip_prefix('-').filter(|c| !c.is_empty()) else {
            return Some(i);
        };
        i += 1;
        for (at, option) in cluster.char_indices() {
            if options.with_value.contains(option) {
                // The rest of the cluster is the value; without one, the next word is.
                if at + option.len_utf8() == cluster.len() {
                    i += 1;
                }
                break;
            }
            if options.with_attached_value.contains(option) {
                break;
            }
        }
    }
    Some(i)
}

/// The command after a wrapper's options (and, for `sudo`/`env`, its `NAME=value` words).
fn after_options(words: &[Word], options: &Options, assignments: bool) -> Vec<Inner> {
    let Some(mut start) = skip_options(words, 1, options) else {
        return vec![Inner::Unknown(words[1..].to_vec())];
    };
    let mut risky_env = false;
    if assignments {
        while let Some(word) = words.get(start) {
            if word.dynamic {
                return vec![Inner::Unknown(words[start..].to_vec())];
            }
            match assigned_name(&word.text) {
                Some(name) => risky_env |= changes_code(name),
                None => break,
            }
            start += 1;
        }
    }
    command_at(words, start, risky_env)
}

fn command_at(words: &[Word], start: usize, risky_env: bool) -> Vec<Inner> {
    match words.get(start..) {
        Some(rest) if !rest.is_empty() => vec![Inner::Command {
            words: rest.to_vec(),
            risky_env,
        }],
        _ => Vec::new(),
    }
}

/// `NAME` of a `NAME=value` word.
fn assigned_name(text: &str) -> Option<&str> {
    let (name, _) = text.split_once('=')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    ((first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
    .then_some(name)
}

/// `timeout [OPTIONS] DURATION COMMAND...`
fn timeout(words: &[Word]) -> Vec<Inner> {
    let options = Options {
        with_value: "ks",
        with_attached_value: "",
        long_with_value: &["kill-after", "signal"],
    };
    match skip_options(words, 1, &options) {
        None => vec![Inner::Unknown(words[1..].to_vec())],
        Some(duration) => command_at(words, duration + 1, false),
    }
}

/// `env [OPTIONS] [NAME=value]... [COMMAND...]`. `-S STRING` splits STRING into more
/// arguments (approximated by splitting at whitespace).
fn env(words: &[Word]) -> Vec<Inner> {
    let mut rest: VecDeque<Word> = words[1..].iter().cloned().collect();
    loop {
        let Some(word) = rest.front() else {
            return Vec::new();
        };
        if word.dynamic {
            return vec![Inner::Unknown(rest.into())];
        }
        let text = word.text.clone();
        if text == "--" {
            rest.pop_front();
            break;
        }
        if text == "-" {
            rest.pop_front();
            continue;
        }
        let mut split: Option<String> = None;
        if let Some(long) = text.strip_prefix("--") {
            rest.pop_front();
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            if matches!(name, "unset" | "chdir" | "split-string") {
                let value = match value {
                    Some(value) => Some(value),
                    None => match rest.pop_front() {
                        Some(next) if next.dynamic => return vec![Inner::Unknown(rest.into())],
                        next => next.map(|w| w.text),
                    },
                };
                if name == "split-string" {
                    split = value;
                }
            }
        } else if let Some(cluster) = text.strip_prefix('-') {
            rest.pop_front();
            for (at, option) in cluster.char_indices() {
                if matches!(option, 'u' | 'C' | 'S') {
                    let attached = &cluster[at + option.len_utf8()..];
                    let value = if attached.is_empty() {
                        match rest.pop_front() {
                            Some(next) if next.dynamic => {
                                return vec![Inner::Unknown(rest.into())];
                            }
                            next => next.map(|w| w.text),
                        }
                    } else {
                        Some(attached.to_owned())
                    };
                    if option == 'S' {
                        split = value;
                    }
                    break;
                }
            }
        } else {
            break;
        }
        if let Some(split) = split {
            for part in split.split_whitespace().rev() {
                rest.push_front(Word::literal(part));
            }
        }
    }
    let mut risky_env = false;
    while let Some(word) = rest.front() {
        if word.dynamic {
            return vec![Inner::Unknown(rest.into())];
        }
        match assigned_name(&word.text) {
            Some(name) => risky_env |= changes_code(name),
            None => break,
        }
        rest.pop_front();
    }
    let rest: Vec<Word> = rest.into();
    command_at(&rest, 0, risky_env)
}

/// `bash [OPTIONS] -c STRING [ARG0 [ARGS]]`: the first operand after the options is the
/// command line when `-c` is among them. Without `-c` the shell runs a script file or
/// stdin, which cannot be seen; the shell's own segment stands for that.
fn shell_script(words: &[Word]) -> Vec<Inner> {
    let mut i = 1;
    let mut has_c = false;
    while let Some(word) = words.get(i) {
        if word.dynamic {
            return vec![Inner::Unknown(words[i..].to_vec())];
        }
        let text = word.text.as_str();
        if text == "--" || text == "-" {
            i += 1;
            break;
        }
        if text.starts_with("--") {
            i += if matches!(text, "--rcfile" | "--init-file") {
                2
            } else {
                1
            };
            continue;
        }
        if text.len() > 1 && (text.starts_with('-') || text.starts_with('+')) {
            let flags = &text[1..];
            has_c |= text.starts_with('-') && flags.contains('c');
            // `-o OPTION` and `-O SHOPT` take the next word.
            i += if flags.contains(['o', 'O']) { 2 } else { 1 };
            continue;
        }
        break;
    }
    if !has_c {
        return Vec::new();
    }
    match words.get(i) {
        None => Vec::new(),
        Some(script) if script.dynamic => vec![Inner::Unknown(words[i..].to_vec())],
        Some(script) => vec![Inner::Script(script.text.clone())],
    }
}

/// `eval ARGS...` runs its arguments joined by spaces as a command line.
fn eval(words: &[Word]) -> Vec<Inner> {
    let mut args = &words[1..];
    if args.first().is_some_and(|w| !w.dynamic && w.text == "--") {
        args = &args[1..];
    }
    if args.is_empty() {
        Vec::new()
    } else if args.iter().any(|w| w.dynamic) {
        vec![Inner::Unknown(args.to_vec())]
    } else {
        vec![Inner::Script(
            args.iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        )]
    }
}

/// `trap [-lpP] [[ACTION] SIGNAL...]`: ACTION is a command line the shell runs later, on the
/// signal or at exit, so it is judged now like `eval`'s. Only with two or more operands is
/// the first one an action: a lone operand resets that signal, and `-` or an empty action
/// resets or ignores the signals. Any option (`-p`, `-l`, `-P`, or an invalid one) makes
/// bash list or fail instead of setting anything. A word only known at run time, or a glob,
/// could become the action or shift the operands, so the action is then unknown.
fn trap(words: &[Word]) -> Vec<Inner> {
    let mut operands = &words[1..];
    match operands.first() {
        Some(first) if first.dynamic || first.pattern => {
            return vec![Inner::Unknown(operands.to_vec())];
        }
        Some(first) if first.text == "--" => operands = &operands[1..],
        Some(first) if first.text.len() > 1 && first.text.starts_with('-') => return Vec::new(),
        _ => {}
    }
    match operands {
        // Checked first: one such word can split or expand into an action and signals.
        [action, ..] if action.dynamic || action.pattern => {
            vec![Inner::Unknown(operands.to_vec())]
        }
        [] | [_] => Vec::new(),
        [action, ..] if action.text.is_empty() || action.text == "-" => Vec::new(),
        [action, ..] => vec![Inner::Script(action.text.clone())],
    }
}

/// `find ... -exec COMMAND... ;` (also `-execdir`, `-ok`, `-okdir`, and `+` as terminator).
fn find_exec(words: &[Word]) -> Vec<Inner> {
    let mut inner = Vec::new();
    let mut i = 1;
    while i < words.len() {
        let word = &words[i];
        i += 1;
        if word.dynamic || !matches!(word.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            continue;
        }
        let start = i;
        while words
            .get(i)
            .is_some_and(|w| w.dynamic || !matches!(w.text.as_str(), ";" | "+"))
        {
            i += 1;
        }
        inner.extend(command_at(&words[..i], start, false));
        i += 1;
    }
    inner
}

/// Refuses `source` when it nests deeper than `MAX_NESTING` or would cost more to parse than
/// what is left of `budget` (which it then reduces), in time linear in its length.
///
/// This is an approximate bash lexer: it tracks quotes, `$( )`, `${ }`, `$[ ]`, backticks,
/// parentheses, keyword blocks (`if`/`fi`, `case`/`esac`, loops, `{ }`), `[[ ]]` (where each
/// `!`, `&&` and `||` nests the expression one level deeper), `coproc` prefixes and
/// here-documents. Where it is unsure it errs towards counting too deep: a closer only
/// closes the construct on top of the stack, and a keyword is only recognized where a
/// command starts. Because it measures what drives `brush-parser`'s recursion and
/// backtracking, a line it accepts parses in bounded time and stack.
///
/// The cost of a byte is 2 to the power of the number of `case` blocks around it: the parser
/// tries the last item of a `case` twice (with and without `;;`), so what a `case` contains
/// is parsed twice, and that compounds with nesting. Opening a parenthesis costs 2 to the
/// power of the parentheses then open: at each one the parser first tries `((` arithmetic,
/// which backtracks through all the parentheses inside it.
fn check_nesting(source: &str, budget: &mut u64) -> Result<(), String> {
    if has_huge_tilde_number(source.as_bytes()) {
        // `brush-parser` unwraps the parse of this number; refuse before it panics.
        return Err("a tilde expression has a number too large".into());
    }
    let mut scanner = Scanner::new(source.as_bytes(), 0, false, *budget);
    scanner.run()?;
    *budget = scanner.budget;
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// `(`, `$(`, `<(`, `a=(`, `@(`: code up to `)`. `arith` inside `((`/`$((`, where `<<`
    /// is a shift, not a here-document.
    Paren {
        arith: bool,
    },
    /// `$[`: legacy arithmetic up to `]`.
    Bracket,
    /// A keyword block.
    Group(Group),
    /// `[[` up to `]]`.
    Test,
    /// `${` up to `}`.
    Param,
    Double,
    Single,
    AnsiC,
    Backtick,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Brace,
    If,
    Case,
    Loop,
}

/// The scanner's view of the word being read in a code context.
#[derive(Debug, Clone, Copy)]
struct WordState {
    active: bool,
    /// No quoting or expansion so far: it may be a keyword.
    plain: bool,
    start: usize,
    /// The word is where a command (or keyword) may start.
    cmd_start: bool,
    /// After `function` or `coproc`: the next word is a name, and the body may follow it.
    after_name: bool,
    /// After `<<` (`Some(true)` for `<<-`): this word is a here-document delimiter.
    heredoc_op: Option<bool>,
}

impl WordState {
    fn fresh() -> WordState {
        WordState {
            active: false,
            plain: true,
            start: 0,
            cmd_start: true,
            after_name: false,
            heredoc_op: None,
        }
    }
}

struct Entry {
    frame: Frame,
    /// How much it adds to the depth.
    weight: usize,
    /// The word state to resume when it closes.
    saved: WordState,
}

struct Heredoc {
    delimiter: Vec<u8>,
    strip_tabs: bool,
    expands: bool,
}

enum Context {
    Code,
    /// Inside `"`; `closes` is false for the body of a here-document, where `"` is literal.
    Double {
        closes: bool,
    },
    Param,
    Single,
    AnsiC,
    Backtick,
}

struct Scanner<'a> {
    src: &'a [u8],
    pos: usize,
    depth: usize,
    entries: Vec<Entry>,
    word: WordState,
    /// `coproc` prefixes of the current command, each nesting what follows.
    chain: usize,
    pending: Vec<Heredoc>,
    heredoc_body: bool,
    /// `case` blocks on the stack.
    cases: u32,
    /// Parentheses on the stack.
    parens: u32,
    budget: u64,
}

impl<'a> Scanner<'a> {
    fn new(src: &'a [u8], depth: usize, heredoc_body: bool, budget: u64) -> Scanner<'a> {
        Scanner {
            src,
            pos: 0,
            depth,
            entries: Vec::new(),
            word: WordState::fresh(),
            chain: 0,
            pending: Vec::new(),
            heredoc_body,
            cases: 0,
            parens: 0,
            budget,
        }
    }

    fn charge(&mut self, bytes: u64) -> Result<(), String> {
        self.spend(bytes.saturating_mul(1u64 << self.cases.min(40)))
    }

    fn spend(&mut self, cost: u64) -> Result<(), String> {
        self.budget = self
            .budget
            .checked_sub(cost)
            .ok_or_else(|| "the command is too complex to judge".to_owned())?;
        Ok(())
    }

    fn too_deep() -> String {
        format!("the command is nested more than {MAX_NESTING} levels deep")
    }

    fn peek(&self, ahead: usize) -> Option<u8> {
        self.src.get(self.pos + ahead).copied()
    }

    fn top(&self) -> Option<Frame> {
        self.entries.last().map(|e| e.frame)
    }

    fn context(&self) -> Context {
        match self.top() {
            None if self.heredoc_body => Context::Double { closes: false },
            None => Context::Code,
            Some(Frame::Paren { .. } | Frame::Bracket | Frame::Group(_) | Frame::Test) => {
                Context::Code
            }
            Some(Frame::Param) => Context::Param,
            Some(Frame::Double) => Context::Double { closes: true },
            Some(Frame::Single) => Context::Single,
            Some(Frame::AnsiC) => Context::AnsiC,
            Some(Frame::Backtick) => Context::Backtick,
        }
    }

    fn push(&mut self, frame: Frame) -> Result<(), String> {
        let weight = 1 + std::mem::take(&mut self.chain);
        self.depth += weight;
        if self.depth > MAX_NESTING {
            return Err(Self::too_deep());
        }
        match frame {
            Frame::Group(Group::Case) => self.cases += 1,
            Frame::Paren { .. } => {
                self.parens += 1;
                self.spend(1u64 << self.parens.min(40))?;
            }
            _ => {}
        }
        self.entries.push(Entry {
            frame,
            weight,
            saved: self.word,
        });
        Ok(())
    }

    fn pop_entry(&mut self) -> Option<Entry> {
        let entry = self.entries.pop()?;
        self.depth -= entry.weight;
        match entry.frame {
            Frame::Group(Group::Case) => self.cases -= 1,
            Frame::Paren { .. } => self.parens -= 1,
            _ => {}
        }
        Some(entry)
    }

    /// Closes the top construct and resumes the word that was being read when it opened.
    fn pop(&mut self) {
        if let Some(entry) = self.pop_entry() {
            self.word = entry.saved;
        }
    }

    fn deepen(&mut self) -> Result<(), String> {
        if let Some(entry) = self.entries.last_mut() {
            entry.weight += 1;
            self.depth += 1;
        }
        if self.depth > MAX_NESTING {
            return Err(Self::too_deep());
        }
        Ok(())
    }

    /// Inside `[[ ]]`, possibly within parentheses.
    fn in_test(&self) -> bool {
        self.entries
            .iter()
            .rev()
            .find(|e| !matches!(e.frame, Frame::Paren { .. }))
            .is_some_and(|e| e.frame == Frame::Test)
    }

    fn in_arith(&self) -> bool {
        matches!(self.top(), Some(Frame::Paren { arith: true }))
    }

    /// Marks the current code word as started here (if it was not) and, unless `plain`, as
    /// containing quoting or an expansion.
    fn touch_word(&mut self, plain: bool) {
        if !self.word.active {
            self.word.active = true;
            self.word.plain = true;
            self.word.start = self.pos;
        }
        self.word.plain &= plain;
    }

    /// Opens a construct inside the current word (`$(`, `${`, quotes...); code inside it
    /// starts with a fresh word state.
    fn open_in_word(&mut self, frame: Frame, len: usize) -> Result<(), String> {
        if matches!(self.context(), Context::Code) {
            self.touch_word(false);
        }
        self.pos += len;
        self.push(frame)?;
        if matches!(
            frame,
            Frame::Paren { .. } | Frame::Bracket | Frame::Group(_) | Frame::Test
        ) {
            self.word = WordState::fresh();
        }
        Ok(())
    }

    fn run(&mut self) -> Result<(), String> {
        while let Some(&c) = self.src.get(self.pos) {
            self.charge(1)?;
            match self.context() {
                Context::Code => self.code(c)?,
                Context::Double { closes } => self.double(c, closes)?,
                Context::Param => self.param(c)?,
                Context::Single => {
                    self.pos += 1;
                    if c == b'\'' {
                        self.pop();
                    }
                }
                Context::AnsiC | Context::Backtick => {
                    let close = if matches!(self.context(), Context::AnsiC) {
                        b'\''
                    } else {
                        b'`'
                    };
                    if c == b'\\' {
                        self.pos += 2;
                    } else {
                        self.pos += 1;
                        if c == close {
                            self.pop();
                        }
                    }
                }
            }
        }
        // An escape at the very end steps past it.
        self.pos = self.pos.min(self.src.len());
        if matches!(self.context(), Context::Code) {
            self.end_word()?;
        }
        Ok(())
    }

    fn code(&mut self, c: u8) -> Result<(), String> {
        match c {
            b' ' | b'\t' | b'\r' => {
                self.end_word()?;
                self.pos += 1;
            }
            b'\n' => {
                self.end_word()?;
                self.separator();
                self.pos += 1;
                self.heredoc_bodies()?;
            }
            b';' | b'&' | b'|' => {
                self.end_word()?;
                let doubled = self.peek(1) == Some(c) && c != b';';
                self.pos += if doubled { 2 } else { 1 };
                if doubled && self.in_test() {
                    self.deepen()?;
                }
                self.separator();
            }
            b'<' | b'>' => {
                self.end_word()?;
                if self.peek(1) == Some(b'(') {
                    self.pos += 2;
                    self.push(Frame::Paren { arith: false })?;
                    self.word = WordState::fresh();
                } else if c == b'<' && self.peek(1) == Some(b'<') && !self.in_arith() {
                    if self.peek(2) == Some(b'<') {
                        self.pos += 3;
                    } else {
                        self.pos += 2;
                        let strip_tabs = self.peek(0) == Some(b'-');
                        if strip_tabs {
                            self.pos += 1;
                        }
                        self.word.heredoc_op = Some(strip_tabs);
                    }
                } else {
                    self.pos += 1;
                }
            }
            b'(' => {
                let arith = self.in_arith() || self.pos > 0 && self.src[self.pos - 1] == b'(';
                let last = self.pos.checked_sub(1).map(|i| self.src[i]);
                let in_word = self.word.active
                    && matches!(last, Some(b'@' | b'!' | b'?' | b'*' | b'+' | b'='));
                if in_word {
                    // An extglob `@(..)` or an array `a=(..)`: part of the word.
                    self.open_in_word(Frame::Paren { arith }, 1)?;
                } else {
                    self.end_word()?;
                    self.pos += 1;
                    self.push(Frame::Paren { arith })?;
                    self.word = WordState::fresh();
                }
            }
            b')' => {
                self.end_word()?;
                self.pos += 1;
                if matches!(self.top(), Some(Frame::Paren { .. })) {
                    self.pop();
                }
                // After a subshell, `name()` or a case pattern, a command may follow.
                if !self.word.active {
                    self.word.cmd_start = true;
                }
            }
            b']' if self.top() == Some(Frame::Bracket) => {
                self.end_word()?;
                self.pos += 1;
                self.pop();
            }
            b'\\' => {
                if self.peek(1) == Some(b'\n') {
                    // A line continuation joins the word around it.
                    self.pos += 2;
                } else {
                    self.touch_word(false);
                    self.pos += 2;
                }
            }
            b'\'' => self.open_in_word(Frame::Single, 1)?,
            b'"' => self.open_in_word(Frame::Double, 1)?,
            b'`' => self.open_in_word(Frame::Backtick, 1)?,
            b'$' => self.dollar(true)?,
            b'#' if !self.word.active => {
                while self.peek(0).is_some_and(|b| b != b'\n') {
                    self.pos += 1;
                }
            }
            _ => {
                self.touch_word(true);
                self.pos += 1;
            }
        }
        Ok(())
    }

    fn separator(&mut self) {
        self.word.cmd_start = true;
        self.word.after_name = false;
        self.word.heredoc_op = None;
        self.chain = 0;
    }

    /// `$` in code (`in_code`), in `${ }` or in double quotes.
    fn dollar(&mut self, in_code: bool) -> Result<(), String> {
        let quotes_allowed = !matches!(self.context(), Context::Double { .. });
        match self.peek(1) {
            Some(b'(') if self.peek(2) == Some(b'(') => {
                self.open_in_word(Frame::Paren { arith: true }, 3)?;
                // The inner level closes first and must not resume the outer word early.
                self.push(Frame::Paren { arith: true })?;
            }
            Some(b'(') => self.open_in_word(Frame::Paren { arith: false }, 2)?,
            Some(b'{') => self.open_in_word(Frame::Param, 2)?,
            Some(b'[') => self.open_in_word(Frame::Bracket, 2)?,
            Some(b'\'') if quotes_allowed => self.open_in_word(Frame::AnsiC, 2)?,
            Some(b'"') if quotes_allowed => self.open_in_word(Frame::Double, 2)?,
            _ => {
                if in_code {
                    self.touch_word(false);
                }
                self.pos += 1;
            }
        }
        Ok(())
    }

    fn double(&mut self, c: u8, closes: bool) -> Result<(), String> {
        match c {
            b'"' if closes => {
                self.pos += 1;
                self.pop();
            }
            b'\\' => self.pos += 2,
            b'$' => self.dollar(false)?,
            b'`' => self.open_in_word(Frame::Backtick, 1)?,
            _ => self.pos += 1,
        }
        Ok(())
    }

    fn param(&mut self, c: u8) -> Result<(), String> {
        match c {
            b'}' => {
                self.pos += 1;
                self.pop();
            }
            b'\\' => self.pos += 2,
            b'\'' => self.open_in_word(Frame::Single, 1)?,
            b'"' => self.open_in_word(Frame::Double, 1)?,
            b'`' => self.open_in_word(Frame::Backtick, 1)?,
            b'$' => self.dollar(false)?,
            _ => self.pos += 1,
        }
        Ok(())
    }

    /// Ends the code word being read, acting on keywords and here-document delimiters.
    fn end_word(&mut self) -> Result<(), String> {
        if !self.word.active {
            return Ok(());
        }
        self.word.active = false;
        let raw = &self.src[self.word.start.min(self.pos)..self.pos];
        if let Some(strip_tabs) = self.word.heredoc_op.take() {
            self.pending.push(Heredoc {
                delimiter: unquote_delimiter(raw),
                strip_tabs,
                expands: !raw.iter().any(|b| matches!(b, b'\'' | b'"' | b'\\')),
            });
            return Ok(());
        }
        let at_start = self.word.cmd_start;
        self.word.cmd_start = std::mem::take(&mut self.word.after_name);
        if !self.word.plain {
            return Ok(());
        }
        if self.in_test() {
            match raw {
                b"]]" if self.top() == Some(Frame::Test) => {
                    self.pop_entry();
                }
                b"!" => self.deepen()?,
                _ => {}
            }
            return Ok(());
        }
        if raw == b"in" && matches!(self.top(), Some(Frame::Group(Group::Case | Group::Loop))) {
            self.word.cmd_start = true;
            return Ok(());
        }
        if !at_start {
            return Ok(());
        }
        match raw {
            b"if" => self.open_group(Group::If, true)?,
            b"while" | b"until" => self.open_group(Group::Loop, true)?,
            b"for" | b"select" => self.open_group(Group::Loop, false)?,
            b"case" => self.open_group(Group::Case, false)?,
            b"{" => self.open_group(Group::Brace, true)?,
            b"}" => self.close_group(Group::Brace),
            b"fi" => self.close_group(Group::If),
            b"esac" => self.close_group(Group::Case),
            b"done" => self.close_group(Group::Loop),
            b"then" | b"else" | b"elif" | b"do" | b"!" | b"time" => self.word.cmd_start = true,
            b"[[" => {
                self.push(Frame::Test)?;
                self.word = WordState::fresh();
                self.word.cmd_start = false;
            }
            b"coproc" => {
                self.chain += 1;
                if self.depth + self.chain > MAX_NESTING {
                    return Err(Self::too_deep());
                }
                self.word.cmd_start = true;
                self.word.after_name = true;
            }
            b"function" => self.word.after_name = true,
            _ => {}
        }
        Ok(())
    }

    fn open_group(&mut self, group: Group, cmd_start: bool) -> Result<(), String> {
        self.push(Frame::Group(group))?;
        self.word = WordState::fresh();
        self.word.cmd_start = cmd_start;
        Ok(())
    }

    /// Closes `group` if it is the innermost construct; a stray closer is ignored.
    fn close_group(&mut self, group: Group) {
        if self.top() == Some(Frame::Group(group)) {
            self.pop_entry();
        }
        // A closer may be followed by another closer (`fi }`), so keep keywords possible.
        self.word.cmd_start = true;
    }

    /// Skips the bodies of the here-documents whose operators were on the line just ended;
    /// an expanding body is scanned for the substitutions it may contain.
    fn heredoc_bodies(&mut self) -> Result<(), String> {
        for heredoc in std::mem::take(&mut self.pending) {
            let start = self.pos.min(self.src.len());
            let mut line_start = start;
            let mut body_end = self.src.len();
            let mut next = self.src.len();
            while line_start < self.src.len() {
                let line_end = self.src[line_start..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(self.src.len(), |at| line_start + at);
                let mut line = &self.src[line_start..line_end];
                if heredoc.strip_tabs {
                    while let [b'\t', rest @ ..] = line {
                        line = rest;
                    }
                }
                if line == heredoc.delimiter.as_slice() {
                    body_end = line_start;
                    next = (line_end + 1).min(self.src.len());
                    break;
                }
                line_start = line_end + 1;
            }
            if heredoc.expands {
                let mut body =
                    Scanner::new(&self.src[start..body_end], self.depth, true, self.budget);
                body.run()?;
                self.budget = body.budget;
            } else {
                self.charge((body_end - start) as u64)?;
            }
            self.pos = next;
        }
        Ok(())
    }
}

/// `~N`, `~+N` or `~-N` with a number that does not fit in 64 bits.
fn has_huge_tilde_number(source: &[u8]) -> bool {
    source.iter().enumerate().any(|(at, &b)| {
        let rest = &source[at + 1..];
        let digits = rest
            .strip_prefix(b"+")
            .or(rest.strip_prefix(b"-"))
            .unwrap_or(rest);
        b == b'~' && digits.iter().take_while(|d| d.is_ascii_digit()).count() > 18
    })
}

/// A here-document delimiter word with its quoting removed.
fn unquote_delimiter(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut bytes = raw.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'\'' | b'"' => {}
            b'\\' => out.extend(bytes.next()),
            _ => out.push(b),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(command: &str) -> Vec<Segment> {
        segments(command).unwrap_or_else(|e| panic!("{command:?} should parse: {e}"))
    }

    /// The words of every segment, each joined by spaces.
    fn shown(command: &str) -> Vec<String> {
        parse(command).iter().map(Segment::display).collect()
    }

    fn has(command: &str, wanted: &str) -> bool {
        shown(command).iter().any(|s| s == wanted)
    }

    fn find(command: &str, wanted: &str) -> Segment {
        parse(command)
            .into_iter()
            .find(|s| s.display() == wanted)
            .unwrap_or_else(|| {
                panic!(
                    "{command:?} has no segment {wanted:?}: {:?}",
                    shown(command)
                )
            })
    }

    #[test]
    fn and_or_sequence_newline_pipe_and_background_are_split() {
        assert_eq!(
            shown("git status && rm -rf build || echo x; ls\npwd | grep a & wc -l"),
            [
                "git status",
                "rm -rf build",
                "echo x",
                "ls",
                "pwd",
                "grep a",
                "wc -l"
            ]
        );
        assert_eq!(shown("a |& b"), ["a", "b"]);
    }

    #[test]
    fn subshells_groups_and_function_bodies_are_walked() {
        assert_eq!(
            shown("(cd /tmp && make) || { echo fail; exit 1; }"),
            ["cd /tmp", "make", "echo fail", "exit 1"]
        );
        assert_eq!(shown("f() { rm -rf /; }; f"), ["rm -rf /", "f"]);
        assert_eq!(shown("function g { ls; }"), ["ls"]);
        assert_eq!(shown("coproc cat x"), ["cat x"]);
    }

    #[test]
    fn conditions_and_bodies_of_control_structures_are_walked() {
        assert_eq!(
            shown("if a; then b; elif c; then d; else e; fi"),
            ["a", "b", "c", "d", "e"]
        );
        assert_eq!(
            shown("while a; do b; done; until c; do d; done"),
            ["a", "b", "c", "d"]
        );
        assert_eq!(shown("for f in x y; do rm $f; done"), ["rm $f"]);
        assert_eq!(shown("case $x in a) ls;; b|c) rm y;; esac"), ["ls", "rm y"]);
        assert_eq!(
            shown("for ((i=0; i<3; i++)); do echo; done"),
            ["((i=0))", "((i<3))", "((i++))", "echo"]
        );
    }

    #[test]
    fn command_substitutions_are_own_segments_after_their_command() {
        assert_eq!(shown("ls $(rm -rf x)"), ["ls $(rm -rf x)", "rm -rf x"]);
        assert_eq!(shown("echo `whoami`"), ["echo `whoami`", "whoami"]);
        assert_eq!(
            shown("echo $(echo $(rm deep))"),
            ["echo $(echo $(rm deep))", "echo $(rm deep)", "rm deep"]
        );
        assert_eq!(
            shown("echo `echo \\`id\\``"),
            ["echo `echo \\`id\\``", "echo `id`", "id"]
        );
    }

    #[test]
    fn substitutions_are_found_in_every_kind_of_word() {
        let cases = [
            ("X=$(rm -rf /)", "rm -rf /"),
            ("X=$(rm a) ls", "rm a"),
            ("a=(1 $(rm b))", "rm b"),
            ("a[$(rm c)]=1", "rm c"),
            ("export Y=$(rm d)", "rm d"),
            ("ls > \"$(rm e)\"", "rm e"),
            ("cat < $(rm f)", "rm f"),
            ("echo \"fail $(rm g)\"", "rm g"),
            ("echo \"$(echo \"$(rm h)\")\"", "rm h"),
            ("for x in a $(rm i); do :; done", "rm i"),
            ("case $(rm j) in *) ;; esac", "rm j"),
            ("case x in $(rm k)) ;; esac", "rm k"),
            ("echo ${x:-$(rm l)}", "rm l"),
            ("echo ${x/$(rm m)/y}", "rm m"),
            ("echo ${x:$(rm n)}", "rm n"),
            ("echo ${a[$(rm o)]}", "rm o"),
            ("echo $((1 + $(rm p)))", "rm p"),
            ("((x = $(rm q)))", "rm q"),
            ("[[ -f $(rm r) ]]", "rm r"),
            ("[[ $(rm s) == x && -n `rm t` ]]", "rm t"),
            ("cat <<< \"$(rm u)\"", "rm u"),
            ("cat <<EOF\n$(rm v)\nEOF", "rm v"),
            ("diff <(rm w) >(rm x2)", "rm w"),
            ("diff <(rm w) >(rm x2)", "rm x2"),
            ("ls > >(rm y)", "rm y"),
            ("echo $'a' \"$(rm z)\"", "rm z"),
        ];
        for (command, inner) in cases {
            assert!(
                has(command, inner),
                "{command:?} should contain {inner:?}: {:?}",
                shown(command)
            );
        }
    }

    #[test]
    fn quoted_heredoc_bodies_and_comments_run_nothing() {
        assert_eq!(shown("cat <<'EOF'\n$(rm v)\nEOF"), ["cat"]);
        assert_eq!(shown("ls # $(rm c)"), ["ls"]);
        assert_eq!(
            shown("echo '$(rm x)' \\$\\(rm y\\)"),
            ["echo $(rm x) $(rm y)"]
        );
    }

    #[test]
    fn quoting_is_removed_from_words() {
        assert_eq!(
            parse(r#"FOO=1 env 'a b' "c\"d" e\ f"#)[0].words,
            ["env", "a b", "c\"d", "e f"]
        );
        assert_eq!(shown("'r'\"m\" -rf /")[0], "rm -rf /");
        assert_eq!(shown("r\\m -rf /")[0], "rm -rf /");
        assert_eq!(shown("$'\\x72\\155' -rf /")[0], "rm -rf /");
        assert_eq!(shown("echo \"a\\b\"")[0], "echo a\\b");
    }

    #[test]
    fn ansi_c_quotes_are_decoded_like_bash() {
        assert_eq!(decode_ansi_c(r"\x72\155\u0041\t\\\'\q"), "rmA\t\\'\\q");
        assert_eq!(decode_ansi_c(r"\cA\e"), "\u{1}\u{1b}");
        assert_eq!(decode_ansi_c(r"a\0b"), "a");
        assert_eq!(decode_ansi_c(r"\x"), "\\x");
        assert_eq!(decode_ansi_c("\\"), "\\");
    }

    #[test]
    fn dynamic_command_names_are_flagged() {
        for command in [
            "$CMD foo",
            "${X} a",
            "$(which rm) x",
            "`which rm` x",
            "\"\" foo",
            "r? -rf /",
            "{rm,x}",
            "/bin/r[m] x",
        ] {
            assert!(parse(command)[0].dynamic_name, "{command:?}");
        }
        for command in ["rm $X", "ls *.rs", "echo ~", "[ -f x ]", "ls \"$(pwd)\""] {
            assert!(!parse(command)[0].dynamic_name, "{command:?}");
        }
    }

    #[test]
    fn assignments_that_change_what_runs_make_the_name_dynamic() {
        assert!(parse("PATH=. ls")[0].dynamic_name);
        assert!(parse("LD_PRELOAD=x.so cat f")[0].dynamic_name);
        assert!(parse("GIT_PAGER=sh git log")[0].dynamic_name);
        assert!(parse("PATH=/tmp/evil:$PATH")[0].dynamic_name);
        assert!(parse("RIPGREP_CONFIG_PATH=./cfg rg x")[0].dynamic_name);
        assert!(!parse("RUST_LOG=debug cargo test")[0].dynamic_name);
        assert!(find("env PATH=. ls", "ls").dynamic_name);
        assert!(!find("env FOO=1 ls", "ls").dynamic_name);
    }

    #[test]
    fn output_redirections_are_writes_except_dev_null_and_descriptors() {
        for command in [
            "echo hi > f",
            "echo hi >> f",
            "echo hi >| f",
            "echo hi &> f",
            "echo hi &>> f",
            "echo hi 1> f",
            "ls 2> err.log",
            "cat 3<> f",
            "echo hi >& f",
            "echo hi > $F",
            "echo hi >&$fd",
        ] {
            assert!(parse(command)[0].writes_redirect, "{command:?}");
        }
        for command in [
            "echo hi > /dev/null",
            "ls 2>/dev/null",
            "ls &>/dev/null",
            "ls 2>&1",
            "ls >&2",
            "ls 2>&1-",
            "ls >&-",
            "cat < f",
            "cat <&0",
            "cat <<< x",
        ] {
            assert!(!parse(command)[0].writes_redirect, "{command:?}");
        }
    }

    #[test]
    fn redirection_only_and_assignment_only_commands_have_no_words() {
        let only = parse("> file");
        assert_eq!(only.len(), 1);
        assert!(only[0].words.is_empty() && only[0].writes_redirect);
        let assign = parse("X=1");
        assert!(
            assign[0].words.is_empty() && !assign[0].writes_redirect && !assign[0].dynamic_name
        );
        assert_eq!(parse("# nothing\n\n").len(), 0);
        assert_eq!(parse("").len(), 0);
    }

    #[test]
    fn redirections_of_compound_commands_apply_to_what_they_run() {
        let segments = parse("{ ls; git status; } > out");
        assert!(segments.iter().all(|s| s.writes_redirect), "{segments:?}");
        assert!(
            parse("while read l; do echo $l; done < in")
                .iter()
                .all(|s| !s.writes_redirect)
        );
        let arithmetic = parse("((1)) > f");
        assert_eq!(arithmetic.len(), 1);
        assert!(arithmetic[0].words.is_empty() && arithmetic[0].writes_redirect);
        assert!(parse("[[ -f x ]] > f")[0].writes_redirect);
    }

    #[test]
    fn wrappers_add_the_wrapped_command_as_another_segment() {
        let cases = [
            ("sudo rm -rf /", "rm -rf /"),
            ("sudo -u root -E rm x", "rm x"),
            ("sudo --user=root HOME=/ rm x", "rm x"),
            ("/usr/bin/sudo rm x", "rm x"),
            ("doas -u root rm x", "rm x"),
            ("env FOO=1 rm x", "rm x"),
            ("env -i -u HOME -C /tmp FOO=1 rm x", "rm x"),
            ("env -S 'rm -rf x'", "rm -rf x"),
            ("nohup rm x", "rm x"),
            ("nice -n 5 rm x", "rm x"),
            ("nice rm x", "rm x"),
            ("timeout 5 rm x", "rm x"),
            ("timeout -s KILL -k 2 5s rm x", "rm x"),
            ("timeout --signal=TERM 5 rm x", "rm x"),
            ("command rm x", "rm x"),
            ("builtin eval x", "eval x"),
            ("exec -a name rm x", "rm x"),
            ("xargs rm", "rm"),
            ("xargs -0 -n 1 -I{} rm {}", "rm {}"),
            ("xargs --max-args 2 rm -f", "rm -f"),
            ("stdbuf -oL rm x", "rm x"),
            ("stdbuf -o L rm x", "rm x"),
            ("setsid -f rm x", "rm x"),
            ("\\time -p rm x", "rm x"),
            ("find . -name '*.o' -exec rm {} \\;", "rm {}"),
            ("find . -execdir rm -f {} +", "rm -f {}"),
        ];
        for (command, inner) in cases {
            let all = shown(command);
            assert!(all.len() >= 2, "{command:?}: {all:?}");
            assert!(
                all.iter().any(|s| s == inner),
                "{command:?} should run {inner:?}: {all:?}"
            );
        }
    }

    #[test]
    fn wrappers_nest_and_keep_every_level() {
        assert_eq!(
            shown("sudo env A=1 timeout 5 nice -n 2 rm x"),
            [
                "sudo env A=1 timeout 5 nice -n 2 rm x",
                "env A=1 timeout 5 nice -n 2 rm x",
                "timeout 5 nice -n 2 rm x",
                "nice -n 2 rm x",
                "rm x",
            ]
        );
    }

    #[test]
    fn wrappers_that_run_nothing_add_nothing() {
        for command in [
            "command -v rm",
            "env",
            "env FOO=1",
            "sudo -l",
            "xargs",
            "nice",
            "timeout 5",
            "bash script.sh",
            "bash",
            "eval",
        ] {
            assert_eq!(parse(command).len(), 1, "{command:?}: {:?}", shown(command));
        }
    }

    #[test]
    fn shell_strings_and_eval_are_parsed_as_command_lines() {
        assert_eq!(
            shown("bash -c 'rm -rf /'"),
            ["bash -c rm -rf /", "rm -rf /"]
        );
        assert!(has("sh -ec 'ls; rm x' arg0", "rm x"));
        assert!(has("/bin/zsh -c \"rm x\"", "rm x"));
        assert!(has("dash -o errexit -c 'rm x'", "rm x"));
        assert!(has("bash -lc 'echo $(rm y)'", "rm y"));
        assert!(has("eval 'rm a' b", "rm a b"));
        assert!(has("eval \"ls && rm z\"", "rm z"));
        assert!(has("sudo bash -c 'rm -rf /'", "rm -rf /"));
        assert!(has("bash -c \"bash -c 'rm deep'\"", "rm deep"));
    }

    #[test]
    fn a_trap_action_is_parsed_as_a_command_line() {
        assert_eq!(shown("trap 'rm x' EXIT"), ["trap rm x EXIT", "rm x"]);
        assert!(has("trap -- 'ls; rm y' INT TERM", "rm y"));
        assert!(has("trap \"echo \\$(rm z)\" EXIT", "rm z"));
        assert!(has("builtin trap 'rm x' EXIT", "rm x"));
        assert!(has("bash -c \"trap 'rm x' EXIT\"", "rm x"));
        // A numeric first operand is judged too: bash takes it as an action unless it is a
        // valid signal number, which is not worth guessing here.
        assert!(has("trap 1 2", "1"));
        assert!(segments("trap 'if' EXIT").is_err());
    }

    #[test]
    fn a_trap_without_an_action_adds_nothing() {
        for command in [
            "trap",
            "trap -p",
            "trap -p EXIT",
            "trap -l",
            "trap -P INT",
            "trap -- EXIT",
            "trap EXIT",
            "trap - EXIT INT",
            "trap '' INT",
            "trap -- - EXIT",
            "trap -x 'rm x' EXIT",
        ] {
            assert_eq!(parse(command).len(), 1, "{command:?}: {:?}", shown(command));
        }
    }

    #[test]
    fn a_trap_action_not_known_statically_is_a_dynamic_segment() {
        for (command, inner) in [
            ("trap \"$A\" EXIT", "$A EXIT"),
            ("trap $A", "$A"),
            ("trap -- $A", "$A"),
            ("trap \"rm $X\" EXIT", "rm $X EXIT"),
            ("trap {rm,EXIT}", "{rm,EXIT}"),
            ("trap $OPT 'rm x' EXIT", "$OPT rm x EXIT"),
        ] {
            let segment = find(command, inner);
            assert!(segment.dynamic_name, "{command:?}");
        }
    }

    #[test]
    fn shell_strings_not_known_statically_are_dynamic_segments() {
        for (command, inner) in [
            ("bash -c \"$X\"", "$X"),
            ("eval $X", "$X"),
            ("eval \"rm $X\"", "rm $X"),
            ("sudo $OPTS rm x", "$OPTS rm x"),
            ("env $VARS rm x", "$VARS rm x"),
        ] {
            let segment = find(command, inner);
            assert!(segment.dynamic_name, "{command:?}");
        }
    }

    #[test]
    fn a_bad_shell_string_makes_the_whole_line_unparsable() {
        assert!(segments("bash -c 'echo \"unclosed'").is_err());
        assert!(segments("eval 'if'").is_err());
    }

    #[test]
    fn arithmetic_on_variables_is_a_dynamic_segment() {
        // Bash evaluates a variable's value as arithmetic, expanding `$( )` in subscripts.
        for (command, hazard) in [
            ("x='a[$(id)]'; echo $((x))", "$((x))"),
            ("((i++))", "((i++))"),
            ("echo ${!name}", "${!name}"),
            ("echo ${a[$i]}", "${a[$i]}"),
            ("echo ${s:$off}", "${s:$off}"),
            ("a[$i]=1", "a[$i]="),
        ] {
            assert!(find(command, hazard).dynamic_name, "{command:?}");
        }
        assert!(parse("[[ $x -eq 1 ]]").iter().any(|s| s.dynamic_name));
        assert!(parse("[[ -v a[$i] ]]").iter().any(|s| s.dynamic_name));
        for command in [
            "echo $((1 + 2 * 0x1f))",
            "[[ 1 -lt 2 ]]",
            "echo ${a[@]} ${#a[*]}",
            "[[ $# -gt 0 ]]",
            "[[ $x == y ]]",
        ] {
            assert!(
                parse(command).iter().all(|s| !s.dynamic_name),
                "{command:?}: {:?}",
                parse(command)
            );
        }
    }

    #[test]
    fn parse_errors_are_short_reasons() {
        for command in [
            "echo 'unclosed",
            "if true; then",
            "echo $(",
            "ls )",
            "select x in a; do :; done",
        ] {
            let error = segments(command).unwrap_err();
            assert!(
                !error.is_empty() && error.len() < 300,
                "{command:?}: {error}"
            );
        }
    }

    #[test]
    fn input_over_the_size_cap_is_refused() {
        let long = format!("echo {}", "a".repeat(100 * 1024));
        assert!(segments(&long).unwrap_err().contains("KiB"));
        // Just under the cap still parses.
        let fits = format!("echo {}", "a".repeat(MAX_INPUT_BYTES - 10));
        assert_eq!(parse(&fits).len(), 1);
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing_the_stack() {
        let inputs = [
            "(".repeat(10_000),
            format!("{}x{}", "(".repeat(10_000), ")".repeat(10_000)),
            format!("echo {}x{}", "$(".repeat(10_000), ")".repeat(10_000)),
            "$(".repeat(30_000),
            format!("echo {}", "\"$(".repeat(10_000)),
            format!("echo {}", "${a:-".repeat(10_000)),
            "{ ".repeat(10_000),
            "if true; then ".repeat(4_000),
            "case a in b) ".repeat(4_000),
            format!("[[ {}a ]]", "! ".repeat(20_000)),
            format!("[[ a{} ]]", " && a".repeat(10_000)),
            format!("{}ls", "coproc ".repeat(5_000)),
            format!("echo {}", "`".repeat(30_001)),
            format!("cat <<EOF\n{}\nEOF", "$(".repeat(20_000)),
        ];
        for input in &inputs {
            let Err(error) = segments(input) else {
                panic!("{}... should not parse", &input[..20]);
            };
            assert!(
                error.contains("nested")
                    || error.contains("complex")
                    || error.contains("syntax")
                    || error.contains("unterminated"),
                "{}...: {error}",
                &input[..20]
            );
        }
    }

    #[test]
    fn nesting_within_the_limits_still_parses() {
        let depth = 6;
        let nested = format!("{}rm x{}", "echo $(".repeat(depth), ")".repeat(depth));
        assert!(has(&nested, "rm x"));
        let groups = format!(
            "{}rm y{}",
            "if true; then { ( ".repeat(3),
            " ) }; fi".repeat(3)
        );
        assert!(has(&groups, "rm y"));
    }

    #[test]
    fn wrapper_chains_beyond_the_recursion_cap_are_refused() {
        assert!(segments(&format!("{}rm x", "sudo ".repeat(20))).is_ok());
        assert!(
            segments(&format!("{}rm x", "sudo ".repeat(40)))
                .unwrap_err()
                .contains("nested")
        );
    }

    #[test]
    fn exponential_parser_inputs_are_refused_quickly() {
        // Each nested `case` doubles brush's work on what it contains, and unclosed
        // parentheses make it backtrack; the pre-scan must keep all of these fast.
        let body = "ls;".repeat(5_000);
        let inputs = [
            format!("{}{body}", "case a in b) ".repeat(12)),
            format!("{}{body}", "(".repeat(15)),
            format!("{}{body}{}", "( case a in b) ".repeat(7), ")".repeat(7)),
            "((((((((((((((((ls;ls))))))))))))))));".repeat(1_000),
        ];
        for input in &inputs {
            let start = std::time::Instant::now();
            let _ = segments(input);
            let elapsed = start.elapsed();
            // Generous for debug builds on a loaded machine; exponential cases take minutes.
            assert!(
                elapsed.as_secs() < 20,
                "{}... took {elapsed:?}",
                &input[..30]
            );
        }
    }

    #[test]
    fn a_parser_panic_is_an_error() {
        assert!(segments("echo ~99999999999999999999999").is_err());
        // The guard itself turns a panic into an error.
        assert!(
            guarded("test", || panic!("boom"))
                .unwrap_err()
                .contains("panicked")
        );
    }

    /// A parse function for the pool tests: "panic" panics inside the walk, "die" ends the
    /// thread (a panic payload whose drop panics escapes the per-parse `catch_unwind`).
    fn test_parse(line: &str) -> Result<Vec<Segment>, String> {
        struct PanicsOnDrop;
        impl Drop for PanicsOnDrop {
            fn drop(&mut self) {
                panic!("the payload's drop panics");
            }
        }
        match line {
            "panic" => panic!("a parse panicked"),
            "die" => std::panic::resume_unwind(Box::new(PanicsOnDrop)),
            _ => Ok(vec![Segment {
                words: vec![line.to_string()],
                ..Segment::default()
            }]),
        }
    }

    #[test]
    fn the_parser_thread_is_reused_and_survives_a_panic() {
        let pool = ParserPool::new(test_parse);
        for _ in 0..3 {
            assert_eq!(pool.parse("ls".into()).unwrap()[0].words, ["ls"]);
        }
        let err = pool.parse("panic".into()).unwrap_err();
        assert!(err.contains("panicked"), "{err}");
        assert_eq!(pool.parse("ls".into()).unwrap()[0].words, ["ls"]);
        assert_eq!(pool.started.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[test]
    fn a_dead_parser_thread_fails_its_parse_and_is_replaced() {
        let pool = ParserPool::new(test_parse);
        assert!(pool.parse("ls".into()).is_ok());
        let err = pool.parse("die".into()).unwrap_err();
        assert!(err.contains("stopped"), "{err}");
        assert_eq!(pool.parse("ls".into()).unwrap()[0].words, ["ls"]);
        assert_eq!(pool.started.load(std::sync::atomic::Ordering::Relaxed), 2);
    }

    #[test]
    fn parses_at_once_each_get_a_thread_and_few_are_kept() {
        let pool = std::sync::Arc::new(ParserPool::new(test_parse));
        let callers: Vec<_> = (0..8)
            .map(|i| {
                let pool = pool.clone();
                std::thread::spawn(move || pool.parse(format!("c{i}")))
            })
            .collect();
        for (i, caller) in callers.into_iter().enumerate() {
            assert_eq!(caller.join().unwrap().unwrap()[0].words, [format!("c{i}")]);
        }
        assert!(pool.lock_idle().len() <= MAX_IDLE_PARSERS);
    }

    #[test]
    fn random_garbage_never_panics() {
        let mut seed: u64 = 0x243f_6a88_85a3_08d3;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let alphabet: &[u8] = b"()[]{}$`'\"\\;&|<>!#*?~=- \n\tabcdefxyz019";
        let tokens = [
            "case a in ",
            "b) ",
            "esac",
            "if ",
            "then ",
            "fi",
            "$((",
            "))",
            "<<EOF\n",
            "EOF\n",
            "[[ ",
            "]]",
            "bash -c ",
            "eval ",
            "sudo ",
            "$'",
            "${",
            "}",
        ];
        for _ in 0..400 {
            let len = (next() % 120) as usize;
            let mut text = String::new();
            for _ in 0..len {
                match next() % 4 {
                    0 => text.push_str(tokens[(next() % tokens.len() as u64) as usize]),
                    1 => text.push(char::from_u32((next() % 0x2000) as u32).unwrap_or('x')),
                    _ => text.push(alphabet[(next() % alphabet.len() as u64) as usize] as char),
                }
            }
            let _ = segments(&text);
        }
        // Raw bytes through lossy UTF-8, as a transport might deliver them.
        for _ in 0..200 {
            let bytes: Vec<u8> = (0..(next() % 200)).map(|_| next() as u8).collect();
            let _ = segments(&String::from_utf8_lossy(&bytes));
        }
    }

    #[test]
    fn display_joins_words_with_spaces() {
        let segment = Segment {
            words: vec!["git".into(), "commit".into(), "-m".into(), "a b".into()],
            ..Segment::default()
        };
        assert_eq!(segment.display(), "git commit -m a b");
        assert_eq!(Segment::default().display(), "");
    }

    #[test]
    fn nesting_scan_tracks_quotes_keywords_and_heredocs() {
        let scan = |s: &str| check_nesting(s, &mut MAX_PARSE_COST.clone());
        // Openers inside quotes, comments and quoted heredoc bodies do not nest.
        assert!(scan(&format!("echo '{}'", "(".repeat(100))).is_ok());
        assert!(scan(&format!("echo \"{}\"", "(".repeat(100))).is_ok());
        assert!(scan(&format!("ls # {}", "(".repeat(100))).is_ok());
        assert!(scan(&format!("cat <<'E'\n{}\nE\nls", "if x\n".repeat(100))).is_ok());
        // Keywords used as arguments do not nest; sequential blocks do not accumulate.
        assert!(scan(&"echo if for while case {\n".repeat(50)).is_ok());
        assert!(scan(&"if a; then b; fi; { c; }; case x in y) z;; esac\n".repeat(50)).is_ok());
        // A quote cannot hide a closer from the scan.
        assert!(scan(&format!("{}x", "( ')' ".repeat(40))).is_err());
        assert!(scan(&format!("{}x", "$( \")\" ".repeat(40))).is_err());
    }
}
