//! A linear pre-scan that bounds what `brush-parser` is given: nesting depth and parse cost.

use super::{MAX_NESTING, ParseError};

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
pub(super) fn check_nesting(source: &str, budget: &mut u64) -> Result<(), ParseError> {
    if has_huge_tilde_number(source.as_bytes()) {
        // `brush-parser` unwraps the parse of this number; refuse before it panics.
        return Err(ParseError::TildeNumber);
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

    fn charge(&mut self, bytes: u64) -> Result<(), ParseError> {
        self.spend(bytes.saturating_mul(1u64 << self.cases.min(40)))
    }

    fn spend(&mut self, cost: u64) -> Result<(), ParseError> {
        self.budget = self
            .budget
            .checked_sub(cost)
            .ok_or(ParseError::TooComplex)?;
        Ok(())
    }

    fn too_deep() -> ParseError {
        ParseError::TooDeep { max: MAX_NESTING }
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

    fn push(&mut self, frame: Frame) -> Result<(), ParseError> {
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

    fn deepen(&mut self) -> Result<(), ParseError> {
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
    fn open_in_word(&mut self, frame: Frame, len: usize) -> Result<(), ParseError> {
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

    fn run(&mut self) -> Result<(), ParseError> {
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

    fn code(&mut self, c: u8) -> Result<(), ParseError> {
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
    fn dollar(&mut self, in_code: bool) -> Result<(), ParseError> {
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

    fn double(&mut self, c: u8, closes: bool) -> Result<(), ParseError> {
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

    fn param(&mut self, c: u8) -> Result<(), ParseError> {
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
    fn end_word(&mut self) -> Result<(), ParseError> {
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

    fn open_group(&mut self, group: Group, cmd_start: bool) -> Result<(), ParseError> {
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
    fn heredoc_bodies(&mut self) -> Result<(), ParseError> {
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
