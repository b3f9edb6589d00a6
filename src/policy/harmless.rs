//! Whether a piece of inline code is shown harmless (P8): an allowlist, not a scan.
//!
//! The judge cannot run code in its head, and a list of dangerous words is a list of the
//! ways someone has already thought of (`getattr(os, 'sys'+'tem')` has none of them). So
//! code is allowed only when every name it uses is one this file knows cannot start a
//! process or write a file, and nothing is computed into a name: anything else is
//! [`NotShown`] and the judge treats the code as opaque (P5).
//!
//! A tokenizer per language, not a parser crate: the question is only "which names does
//! this code use, and how" (a bare name, an attribute after `.`/`->`/`::`, a subscript, a
//! call of something that is not a name), which tokens answer; a full parser per language
//! (tree-sitter grammars are C and megabytes each) would answer it no better for the
//! one-liners on a command line. Where the tokens are ambiguous (a regular expression or a
//! division, a quoting operator or a name) the reading chosen is the one that shows more
//! code: a misreading can only make code look less harmless, never hide it (tests).
//!
//! The lists are deliberately small: a name missing from them costs a question, a name
//! wrongly on them costs the promise.

use std::collections::HashSet;

/// A language whose inline code this file reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Python,
    JavaScript,
    Perl,
    Ruby,
    Php,
    Lua,
    Awk,
}

/// Why code was not shown harmless: said in the judgement and by `dsh policy explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotShown(pub String);

impl std::fmt::Display for NotShown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn not(why: impl Into<String>) -> NotShown {
    NotShown(why.into())
}

/// Longest code read at all; longer inline code is not shown harmless.
const MAX_CODE_BYTES: usize = 16 * 1024;
/// Deepest nesting of interpolations (`f"{f'{x}'}"`) read.
const MAX_DEPTH: usize = 8;

/// `Ok` when `code`, in `lang`, is shown harmless; else why not.
pub fn check(lang: Lang, code: &str) -> Result<(), NotShown> {
    if code.len() > MAX_CODE_BYTES {
        return Err(not("the code is too long to read"));
    }
    let tokens = lex(lang, code, 0)?;
    Rules::of(lang).check(&tokens)
}

// ---------------------------------------------------------------- tokens

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A name (perl and ruby join `A::B`).
    Name(String),
    /// A sigiled variable: perl's `$x @x %x`, php's `$x`, ruby's `$x @x`, awk's `$1`.
    Var,
    /// A string literal without code in it; its text, for `require('x')` and subscripts.
    Str(String),
    Num,
    /// Punctuation; `\n` ends a line.
    P(&'static str),
}

const PUNCTS: &[&str] = &[
    "===", "!==", "**=", "...", "<=>", "->", "=>", "::", "==", "!=", "<=", ">=", "&&", "||", "??",
    "?.", "+=", "-=", "*=", "/=", "%=", ".=", "=~", "!~", ":=", "<<", ">>", "**", "++", "--", "(",
    ")", "[", "]", "{", "}", ",", ";", ".", ":", "?", "=", "<", ">", "+", "-", "*", "/", "%", "!",
    "~", "^", "&", "|", "@", "$", "#", "\\", "\n",
];

struct Lexer<'a> {
    lang: Lang,
    s: &'a [u8],
    text: &'a str,
    i: usize,
    out: Vec<Tok>,
    depth: usize,
}

fn lex(lang: Lang, text: &str, depth: usize) -> Result<Vec<Tok>, NotShown> {
    if depth > MAX_DEPTH {
        return Err(not("interpolations nested too deep"));
    }
    let mut lexer = Lexer {
        lang,
        s: text.as_bytes(),
        text,
        i: 0,
        out: Vec::new(),
        depth,
    };
    lexer.run()?;
    Ok(lexer.out)
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl<'a> Lexer<'a> {
    fn peek(&self, k: usize) -> u8 {
        self.s.get(self.i + k).copied().unwrap_or(0)
    }

    fn rest(&self) -> &'a str {
        self.text.get(self.i..).unwrap_or("")
    }

    /// Whether the previous token ends an operand (so `/` divides, `[` subscripts).
    fn after_operand(&self) -> bool {
        match self.out.last() {
            Some(Tok::Name(n)) => !self.is_operator_word(n),
            Some(Tok::Var | Tok::Str(_) | Tok::Num) => true,
            Some(Tok::P(p)) => matches!(*p, ")" | "]" | "}"),
            None => false,
        }
    }

    /// Words after which a term is expected (`/` starts a regex).
    fn is_operator_word(&self, n: &str) -> bool {
        matches!(
            n,
            "if" | "unless"
                | "and"
                | "or"
                | "not"
                | "return"
                | "split"
                | "grep"
                | "map"
                | "when"
                | "while"
                | "until"
                | "print"
                | "printf"
                | "say"
                | "push"
                | "unshift"
                | "join"
                | "in"
                | "typeof"
                | "case"
                | "do"
                | "else"
                | "elsif"
                | "then"
                | "x"
                | "eq"
                | "ne"
                | "lt"
                | "gt"
                | "le"
                | "ge"
                | "cmp"
                | "keys"
                | "values"
                | "each"
                | "my"
                | "our"
                | "local"
                | "scalar"
                | "sort"
                | "reverse"
                | "for"
                | "foreach"
                | "delete"
                | "exists"
                | "defined"
                | "ref"
        )
    }

    fn push(&mut self, t: Tok) {
        self.out.push(t);
    }

    fn run(&mut self) -> Result<(), NotShown> {
        use Lang::*;
        let lang = self.lang;
        while self.i < self.s.len() {
            let c = self.peek(0);
            let rest = self.rest();
            // Whitespace and line ends.
            if c == b'\n' {
                self.push(Tok::P("\n"));
                self.i += 1;
                continue;
            }
            if c.is_ascii_whitespace() {
                self.i += 1;
                continue;
            }
            if c >= 0x80 {
                // Non-ASCII outside strings: identifiers we do not know.
                return Err(not("non-ASCII text outside a string"));
            }
            // Comments.
            let line_comment = match lang {
                Python | Perl | Ruby | Awk => c == b'#',
                JavaScript => rest.starts_with("//"),
                Php => c == b'#' || rest.starts_with("//"),
                Lua => rest.starts_with("--"),
            };
            if line_comment {
                if lang == Lua && (rest.starts_with("--[[") || rest.starts_with("--[=")) {
                    return Err(not("a Lua block comment"));
                }
                if lang == Perl && self.out.last() == Some(&Tok::P("$")) {
                    // `$#` is not a comment, but it is not read either.
                    return Err(not("`$#`"));
                }
                while self.i < self.s.len() && self.peek(0) != b'\n' {
                    self.i += 1;
                }
                continue;
            }
            if matches!(lang, JavaScript | Php) && rest.starts_with("/*") {
                let end = rest[2..]
                    .find("*/")
                    .ok_or_else(|| not("an unclosed comment"))?;
                self.i += end + 4;
                continue;
            }
            // Numbers.
            if c.is_ascii_digit() || (c == b'.' && self.peek(1).is_ascii_digit()) {
                while self.i < self.s.len() && (is_name_char(self.peek(0)) || self.peek(0) == b'.')
                {
                    // `1..10` in perl, ruby, lua: a range, not a number.
                    if self.peek(0) == b'.' && self.peek(1) == b'.' {
                        break;
                    }
                    self.i += 1;
                }
                self.push(Tok::Num);
                continue;
            }
            // Sigiled variables.
            if self.sigil()? {
                continue;
            }
            // Names, and the quoting words that start strings.
            if is_name_start(c) {
                self.name()?;
                continue;
            }
            // Strings.
            if c == b'`' {
                match lang {
                    JavaScript => {
                        self.i += 1;
                        self.template()?;
                        continue;
                    }
                    Awk | Lua | Python => return Err(not("a backtick")),
                    _ => return Err(not("backticks run a shell command")),
                }
            }
            if c == b'"' || (c == b'\'' && lang != Awk) {
                self.i += 1;
                self.string(c, false)?;
                continue;
            }
            if lang == Lua && (rest.starts_with("[[") || rest.starts_with("[=")) {
                return Err(not("a Lua long string"));
            }
            // Regular expressions.
            if c == b'/'
                && matches!(lang, JavaScript | Perl | Ruby | Awk)
                && !self.after_operand()
                && !rest.starts_with("//")
                && !rest.starts_with("/=")
            {
                self.i += 1;
                let body = self.delimited(b'/', b'/')?;
                self.regex_body(&body)?;
                while is_name_char(self.peek(0)) {
                    self.i += 1;
                }
                self.push(Tok::Str(String::new()));
                continue;
            }
            if rest.starts_with("<<") {
                let next = self.peek(2);
                let heredoc = match lang {
                    Perl | Ruby => {
                        next == b'"'
                            || next == b'\''
                            || next == b'~'
                            || next == b'-'
                            || is_name_start(next)
                    }
                    Php => next == b'<',
                    _ => false,
                };
                if heredoc && !self.after_operand() {
                    return Err(not("a here-document inside the code"));
                }
                if lang == Php && next == b'<' {
                    return Err(not("a here-document inside the code"));
                }
            }
            if lang == Ruby && c == b'%' && !self.after_operand() {
                return Err(not("a ruby `%` literal"));
            }
            if lang == Php && rest.starts_with("<?") {
                return Err(not("php open tag inside -r code"));
            }
            // Punctuation.
            let p = PUNCTS
                .iter()
                .find(|p| rest.starts_with(**p))
                .ok_or_else(|| not(format!("the character `{}`", c as char)))?;
            self.i += p.len();
            self.push(Tok::P(p));
        }
        Ok(())
    }

    /// A sigiled variable at the cursor, if the language has them there.
    fn sigil(&mut self) -> Result<bool, NotShown> {
        use Lang::*;
        let c = self.peek(0);
        let n = self.peek(1);
        match self.lang {
            Perl => {
                match c {
                    b'$' | b'@' => {}
                    b'%' if !self.after_operand() && (is_name_start(n) || n == b'$') => {}
                    b'&' if n != b'&' && !self.after_operand() => {
                        return Err(not("a perl `&` call"));
                    }
                    b'*' if !self.after_operand() && (is_name_start(n) || n == b'{') => {
                        return Err(not("a perl typeglob"));
                    }
                    _ => return Ok(false),
                }
                self.i += 1;
                // `$$x`, `@$x`: dereferences of a variable.
                while self.peek(0) == b'$' && (is_name_start(self.peek(1)) || self.peek(1) == b'$')
                {
                    self.i += 1;
                }
                if c == b'$' && self.peek(0) == b'#' {
                    self.i += 1;
                }
                let b = self.peek(0);
                if is_name_start(b) {
                    while is_name_char(self.peek(0))
                        || (self.peek(0) == b':' && self.peek(1) == b':')
                    {
                        self.i += if self.peek(0) == b':' { 2 } else { 1 };
                    }
                } else if b.is_ascii_digit() {
                    while self.peek(0).is_ascii_digit() {
                        self.i += 1;
                    }
                } else if b == b'{' {
                    // `${name}` only; `${ code }` and `@{[ code ]}` run code.
                    let close = self.rest().find('}').unwrap_or(0);
                    let inner = &self.rest()[1..close.max(1)];
                    if close == 0 || !inner.bytes().all(is_name_char) {
                        return Err(not("a perl `${...}` block"));
                    }
                    self.i += close + 1;
                } else if b == b'^' {
                    return Err(not("a perl `${^...}` variable"));
                } else if b != 0 && !b.is_ascii_whitespace() {
                    // A punctuation variable: `$_`, `$!`, `$/`, `$0`...
                    self.i += 1;
                }
                self.push(Tok::Var);
                Ok(true)
            }
            Php => {
                if c != b'$' {
                    return Ok(false);
                }
                if !is_name_start(n) {
                    return Err(not("a php variable variable"));
                }
                self.i += 1;
                while is_name_char(self.peek(0)) {
                    self.i += 1;
                }
                self.push(Tok::Var);
                Ok(true)
            }
            Ruby => {
                if !(c == b'$' || c == b'@') {
                    return Ok(false);
                }
                self.i += 1;
                if self.peek(0) == b'@' {
                    self.i += 1;
                }
                if is_name_start(self.peek(0)) {
                    while is_name_char(self.peek(0)) {
                        self.i += 1;
                    }
                } else if c == b'$' && self.peek(0) != 0 {
                    self.i += 1;
                } else {
                    return Err(not("a ruby sigil"));
                }
                self.push(Tok::Var);
                Ok(true)
            }
            Awk => {
                if c != b'$' {
                    return Ok(false);
                }
                // `$1`, `$NF`, `$(expr)`: a field; its index is read as code.
                self.i += 1;
                self.push(Tok::Var);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn name(&mut self) -> Result<(), NotShown> {
        use Lang::*;
        let start = self.i;
        while is_name_char(self.peek(0))
            || (matches!(self.lang, Perl | Ruby | Php)
                && self.peek(0) == b':'
                && self.peek(1) == b':'
                && is_name_start(self.peek(2)))
        {
            self.i += if self.peek(0) == b':' { 2 } else { 1 };
        }
        // ruby's `empty?`, `strip!`.
        if self.lang == Ruby && matches!(self.peek(0), b'?' | b'!') && self.peek(1) != b'=' {
            self.i += 1;
        }
        let name = self.text[start..self.i].to_owned();
        let next = self.peek(0);
        // Python's string prefixes: f"..", rb'..'.
        if self.lang == Python
            && name.len() <= 2
            && name.chars().all(|c| "rRbBuUfF".contains(c))
            && (next == b'"' || next == b'\'')
        {
            self.i += 1;
            let f = name.contains(['f', 'F']);
            return self.string(next, f);
        }
        if self.lang == Perl && self.quote_like(&name)? {
            return Ok(());
        }
        self.push(Tok::Name(name));
        Ok(())
    }

    /// Perl's `q qq qw qx m qr s tr y` with their delimiters. A word followed by `=>`, `,`,
    /// `;`, `)` or `}` is a plain word (a hash key), which the rules then judge as a name.
    fn quote_like(&mut self, name: &str) -> Result<bool, NotShown> {
        if !matches!(
            name,
            "q" | "qq" | "qw" | "qx" | "m" | "qr" | "s" | "tr" | "y"
        ) {
            return Ok(false);
        }
        let mut j = self.i;
        while self.s.get(j).is_some_and(|b| *b == b' ' || *b == b'\t') {
            j += 1;
        }
        let Some(&open) = self.s.get(j) else {
            return Ok(false);
        };
        if open == b'=' && self.s.get(j + 1) == Some(&b'>') {
            return Ok(false);
        }
        if !b"([{</|!'\"#~^%:,.+-@".contains(&open) || (open == b'#' && j > self.i) {
            return Ok(false);
        }
        if matches!(open, b',' | b'.' | b'-' | b'+' | b':') && self.after_operand() {
            return Ok(false);
        }
        if name == "qx" || open == b'`' {
            return Err(not("perl `qx` runs a shell command"));
        }
        self.i = j + 1;
        let close = match open {
            b'(' => b')',
            b'[' => b']',
            b'{' => b'}',
            b'<' => b'>',
            o => o,
        };
        let first = self.delimited(open, close)?;
        let interpolates = open != b'\'';
        match name {
            "s" | "tr" | "y" => {
                if open != close {
                    while self.peek(0).is_ascii_whitespace() {
                        self.i += 1;
                    }
                    let o2 = self.peek(0);
                    let c2 = match o2 {
                        b'(' => b')',
                        b'[' => b']',
                        b'{' => b'}',
                        b'<' => b'>',
                        o => o,
                    };
                    self.i += 1;
                    let second = self.delimited(o2, c2)?;
                    self.substitution(name, &first, &second, interpolates)?;
                } else {
                    let second = self.delimited(open, close)?;
                    self.substitution(name, &first, &second, interpolates)?;
                }
            }
            "m" | "qr" => {
                if interpolates {
                    self.regex_body(&first)?;
                }
                while is_name_char(self.peek(0)) {
                    self.i += 1;
                }
            }
            "qq" => perl_interpolation(&first)?,
            _ => {}
        }
        self.push(Tok::Str(first));
        Ok(true)
    }

    fn substitution(
        &mut self,
        name: &str,
        pattern: &str,
        replacement: &str,
        interpolates: bool,
    ) -> Result<(), NotShown> {
        let start = self.i;
        while is_name_char(self.peek(0)) {
            self.i += 1;
        }
        let flags = &self.text[start..self.i];
        if name != "s" {
            return Ok(());
        }
        if interpolates {
            self.regex_body(pattern)?;
        }
        match flags.matches('e').count() {
            0 => {
                if interpolates {
                    perl_interpolation(replacement)?;
                }
            }
            1 => {
                // `s/x/CODE/e`: the replacement is perl code.
                let tokens = lex(Lang::Perl, replacement, self.depth + 1)?;
                self.push(Tok::P("("));
                self.out.extend(tokens);
                self.push(Tok::P(")"));
            }
            _ => return Err(not("perl `s///ee` evaluates a string as code")),
        }
        Ok(())
    }

    /// The text up to the closing delimiter (nesting counted for brackets), escapes kept.
    fn delimited(&mut self, open: u8, close: u8) -> Result<String, NotShown> {
        let start = self.i;
        let mut depth = 0usize;
        while self.i < self.s.len() {
            let b = self.peek(0);
            if b == b'\\' {
                self.i += 2;
                continue;
            }
            if b == close && depth == 0 {
                let body = self.text.get(start..self.i).unwrap_or("").to_owned();
                self.i += 1;
                return Ok(body);
            }
            if open != close {
                if b == open {
                    depth += 1;
                } else if b == close {
                    depth -= 1;
                }
            }
            self.i += 1;
        }
        Err(not("an unclosed string or pattern"))
    }

    fn regex_body(&mut self, body: &str) -> Result<(), NotShown> {
        if body.contains("(?{") || body.contains("(??{") || body.contains("(*{") {
            return Err(not("code inside a regular expression"));
        }
        match self.lang {
            Lang::Perl => perl_interpolation(body),
            Lang::Ruby if body.contains("#{") => Err(not("code inside a ruby regex")),
            Lang::JavaScript | Lang::Awk if body.contains('\n') => {
                Err(not("a regular expression across lines"))
            }
            _ => Ok(()),
        }
    }

    /// A string after its opening quote. Python f-strings, ruby `"#{}"`: their code is read.
    fn string(&mut self, quote: u8, fstring: bool) -> Result<(), NotShown> {
        use Lang::*;
        let triple = self.lang == Python && self.peek(0) == quote && self.peek(1) == quote;
        if triple {
            self.i += 2;
        }
        let start = self.i;
        loop {
            if self.i >= self.s.len() {
                return Err(not("an unclosed string"));
            }
            let b = self.peek(0);
            if b == b'\\' {
                self.i += 2;
                continue;
            }
            if b == quote && (!triple || (self.peek(1) == quote && self.peek(2) == quote)) {
                break;
            }
            self.i += 1;
        }
        let body = self.text[start..self.i].to_owned();
        self.i += if triple { 3 } else { 1 };
        let interpolating = quote == b'"';
        if fstring {
            self.interpolations(&body, "{", "{{")?;
        } else if interpolating {
            match self.lang {
                Perl => perl_interpolation(&body)?,
                Ruby => self.interpolations(&body, "#{", "\\#{")?,
                Php if body.contains("{$") || body.contains("${") => {
                    return Err(not("code inside a php string"));
                }
                _ => {}
            }
        }
        self.push(Tok::Str(body));
        Ok(())
    }

    /// JS template literal after its backtick: `${...}` holds code.
    fn template(&mut self) -> Result<(), NotShown> {
        let start = self.i;
        loop {
            match self.peek(0) {
                0 if self.i >= self.s.len() => return Err(not("an unclosed template")),
                b'\\' => self.i += 2,
                b'`' => break,
                _ => self.i += 1,
            }
        }
        let body = self.text[start..self.i].to_owned();
        self.i += 1;
        self.interpolations(&body, "${", "\\${")?;
        self.push(Tok::Str(String::new()));
        Ok(())
    }

    /// Reads the code inside each `open ... }` of a string body (braces counted, quotes
    /// not: a `}` inside a quoted string there leaves that string unclosed, which fails).
    fn interpolations(&mut self, body: &str, open: &str, escaped: &str) -> Result<(), NotShown> {
        let mut rest = body;
        while let Some(at) = rest.find(open) {
            if rest[at..].starts_with(escaped) || (at > 0 && rest[..at].ends_with('\\')) {
                rest = &rest[at + escaped.len().max(1)..];
                continue;
            }
            let after = &rest[at + open.len()..];
            let mut depth = 1usize;
            let mut end = None;
            for (k, ch) in after.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(k);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let end = end.ok_or_else(|| not("an unclosed interpolation"))?;
            let inner = &after[..end];
            // Python's `{x!r}` and `{x:>10}`: the expression before a format spec (which
            // may hold no replacement field of its own) and a conversion.
            let inner = if self.lang == Lang::Python {
                python_field(inner)?
            } else {
                inner
            };
            let tokens = lex(self.lang, inner, self.depth + 1)?;
            self.push(Tok::P("("));
            self.out.extend(tokens);
            self.push(Tok::P(")"));
            rest = &after[end + 1..];
        }
        Ok(())
    }
}

/// The expression of a python f-string replacement field: up to a `:` outside brackets
/// (the format spec after it must be plain), less a trailing `!r`/`!s`/`!a`.
fn python_field(inner: &str) -> Result<&str, NotShown> {
    let mut depth = 0i32;
    let mut expr = inner;
    for (k, ch) in inner.char_indices() {
        match ch {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ':' if depth == 0 => {
                let spec = &inner[k + 1..];
                if !spec
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b" <>=^+-#.,%_".contains(&b))
                {
                    return Err(not("an f-string format spec with code"));
                }
                expr = &inner[..k];
                break;
            }
            _ => {}
        }
    }
    Ok(["!r", "!s", "!a"]
        .iter()
        .find_map(|c| expr.strip_suffix(c))
        .unwrap_or(expr))
}

/// Perl's double-quoted text interpolates `$x`, `@x`, `$x[...]`, `$x{...}`, `$x->...`,
/// `${...}` and `@{[...]}`; anything but a plain variable, a literal subscript or a
/// method-free arrow is code, which is not read but refused.
fn perl_interpolation(body: &str) -> Result<(), NotShown> {
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            i += 2;
            continue;
        }
        if b[i] == b'$' || b[i] == b'@' {
            i += 1;
            match b.get(i) {
                Some(b'{') => {
                    let close = body[i..].find('}').map(|c| c + i);
                    match close {
                        Some(c) if body[i + 1..c].bytes().all(is_name_char) && c > i + 1 => {
                            i = c + 1;
                        }
                        _ => return Err(not("code interpolated into a perl string")),
                    }
                }
                Some(x) if is_name_start(*x) || *x == b':' => {
                    while i < b.len() && (is_name_char(b[i]) || b[i] == b':') {
                        i += 1;
                    }
                }
                _ => continue,
            }
            // Subscripts and arrows after the variable.
            loop {
                if body[i..].starts_with("->") {
                    i += 2;
                }
                match b.get(i) {
                    Some(open @ (b'[' | b'{')) => {
                        let close = if *open == b'[' { ']' } else { '}' };
                        let Some(c) = body[i..].find(close).map(|c| c + i) else {
                            return Err(not("code interpolated into a perl string"));
                        };
                        let inner = &body[i + 1..c];
                        if !inner
                            .bytes()
                            .all(|x| is_name_char(x) || x == b'$' || x == b'-' || x == b'\'')
                        {
                            return Err(not("code interpolated into a perl string"));
                        }
                        i = c + 1;
                    }
                    _ => break,
                }
            }
            continue;
        }
        i += 1;
    }
    Ok(())
}

// ---------------------------------------------------------------- rules

/// The allowlists of one language.
struct Rules {
    lang: Lang,
    /// Keywords and operators spelled as words.
    keywords: &'static [&'static str],
    /// Global functions and values that start no process and write no file.
    globals: &'static [&'static str],
    /// Modules (or global objects) usable only as `module.attr`, with their attributes
    /// (`*`: every attribute not starting with `_`).
    modules: &'static [(&'static str, &'static [&'static str])],
    /// Attributes and methods allowed on any value.
    attrs: &'static [&'static str],
    /// Names never allowed, even when the code binds them (`def f(eval=eval)`).
    never: &'static [&'static str],
}

impl Rules {
    fn of(lang: Lang) -> &'static Rules {
        match lang {
            Lang::Python => &PYTHON,
            Lang::JavaScript => &JAVASCRIPT,
            Lang::Perl => &PERL,
            Lang::Ruby => &RUBY,
            Lang::Php => &PHP,
            Lang::Lua => &LUA,
            Lang::Awk => &AWK,
        }
    }

    fn norm(&self, name: &str) -> String {
        if self.lang == Lang::Php {
            name.to_ascii_lowercase()
        } else {
            name.to_owned()
        }
    }

    fn module(&self, name: &str) -> Option<&'static [&'static str]> {
        self.modules
            .iter()
            .find(|(m, _)| *m == name)
            .map(|(_, attrs)| *attrs)
    }

    fn attr_ok(&self, name: &str, of_module: Option<&[&str]>) -> bool {
        if name.starts_with('_') || REFLECTIVE.contains(&name) {
            return false;
        }
        // Constants: `process.env.HOME`, `Math.PI`, `os.O_RDONLY`.
        if name.len() > 1
            && name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        {
            return true;
        }
        match of_module {
            Some(list) => list.contains(&"*") || list.contains(&name),
            None => self.attrs.contains(&name),
        }
    }

    /// Names the code binds itself (variables, parameters, its own functions).
    fn bound(&self, t: &[Tok]) -> HashSet<String> {
        let mut bound = HashSet::new();
        // A perl sub named like a builtin does not replace it (`sub system {}` leaves
        // `system` the builtin), so perl code binds no names here.
        if self.lang == Lang::Perl {
            return bound;
        }
        // Python's `import a, b` and `from m import a, b` bind what they import (checked
        // by `module_use`); a module's own name keeps its list.
        for k in 0..t.len() {
            if matches!(&t[k], Tok::Name(w) if w == "import") && self.lang == Lang::Python {
                for tok in &t[k + 1..] {
                    match tok {
                        Tok::Name(n) if n != "as" && self.module(n).is_none() => {
                            bound.insert(n.clone());
                        }
                        Tok::P(";" | "\n") => break,
                        _ => {}
                    }
                }
            }
        }
        let name_at = |k: usize| match t.get(k) {
            Some(Tok::Name(n)) => Some(n.clone()),
            _ => None,
        };
        for k in 0..t.len() {
            let Some(n) = name_at(k) else { continue };
            let prev = k.checked_sub(1).and_then(|p| t.get(p));
            let next = t.get(k + 1);
            if matches!(prev, Some(Tok::P("." | "->" | "::"))) {
                continue;
            }
            let binds = matches!(next, Some(Tok::P("=" | ":=")))
                || matches!(
                    prev.and_then(|p| if let Tok::Name(w) = p { Some(w.as_str()) } else { None }),
                    Some(
                        "def" | "class" | "function" | "func" | "sub" | "const" | "let" | "var"
                            | "local" | "as" | "for" | "foreach" | "lambda"
                    )
                )
                // Arrow functions and lambdas: `x => ..`, `(a, b) => ..`.
                || matches!(next, Some(Tok::P("=>"))) && self.lang == Lang::JavaScript;
            if binds {
                bound.insert(n);
            }
        }
        // Lists of names bound together: parameters `(a, b)` after a function name or
        // before `=>`, `for a, b in`, `|a, b|` of a ruby block, `a, b = ...`.
        let mut k = 0;
        while k < t.len() {
            if let Tok::P(open) = &t[k]
                && matches!(*open, "(" | "|")
            {
                let open: &str = open;
                let close = if open == "(" { ")" } else { "|" };
                let opener = k.checked_sub(1).and_then(|p| t.get(p)).cloned();
                let params = match (&opener, open) {
                    (Some(Tok::Name(_)), "(") => {
                        let before = k.checked_sub(2).and_then(|p| t.get(p));
                        matches!(before, Some(Tok::Name(w)) if matches!(w.as_str(), "def" | "function" | "func" | "sub"))
                    }
                    (Some(Tok::P("{")) | Some(Tok::Name(_)), "|") => {
                        self.lang == Lang::Ruby
                            && matches!(&opener, Some(Tok::P("{")) | Some(Tok::Name(_)))
                            && (matches!(&opener, Some(Tok::P("{")))
                                || matches!(&opener, Some(Tok::Name(w)) if w == "do"))
                    }
                    (Some(Tok::Name(w)), _) if w == "function" || w == "catch" => true,
                    _ => false,
                };
                let mut j = k + 1;
                let mut names = Vec::new();
                let mut depth = 0usize;
                while j < t.len() {
                    match &t[j] {
                        Tok::P(p) if *p == close && depth == 0 => break,
                        Tok::P("(" | "[" | "{") => depth += 1,
                        Tok::P(")" | "]" | "}") => depth = depth.saturating_sub(1),
                        Tok::Name(n) if depth == 0 => names.push(n.clone()),
                        _ => {}
                    }
                    j += 1;
                }
                let arrow = open == "(" && matches!(t.get(j + 1), Some(Tok::P("=>")));
                if params || arrow {
                    // Only names followed by `,`, `)`, `=`, `|` or `:` are parameters.
                    for idx in k + 1..j {
                        if let Tok::Name(n) = &t[idx]
                            && matches!(t.get(idx + 1), Some(Tok::P("," | ")" | "=" | "|" | ":")))
                        {
                            bound.insert(n.clone());
                        }
                    }
                }
                let _ = names;
            }
            k += 1;
        }
        // `for a, b in`, `a, b = `, `local a, b`, destructuring `const {a, b} =`.
        let mut k = 0;
        while k < t.len() {
            let starts = matches!(&t[k], Tok::Name(w) if matches!(w.as_str(), "for" | "local" | "const" | "let" | "var" | "my"));
            let stmt_start = k == 0 || matches!(t[k - 1], Tok::P(";" | "\n" | "{"));
            if starts || stmt_start {
                let from = if starts { k + 1 } else { k };
                let mut j = from;
                let mut names = Vec::new();
                while let Some(tok) = t.get(j) {
                    match tok {
                        Tok::Name(n) if n != "in" && n != "of" => names.push(n.clone()),
                        Tok::P("," | "(" | ")" | "[" | "]" | "{" | "}") => {}
                        _ => break,
                    }
                    j += 1;
                }
                let ends = match t.get(j) {
                    Some(Tok::P("=")) => true,
                    Some(Tok::Name(w)) => starts && (w == "in" || w == "of"),
                    _ => starts && names.len() == 1,
                };
                if ends && (names.len() > 1 || starts) {
                    bound.extend(names);
                }
            }
            k += 1;
        }
        bound
    }

    fn check(&self, t: &[Tok]) -> Result<(), NotShown> {
        let bound = self.bound(t);
        let lang = self.lang;
        let mut in_print = false;
        let mut print_depth = 0usize;
        let mut depth = 0usize;
        let mut skip_to = 0usize;
        for (k, tok) in t.iter().enumerate() {
            if k < skip_to {
                continue;
            }
            let prev = k.checked_sub(1).and_then(|p| t.get(p));
            let next = t.get(k + 1);
            match tok {
                Tok::P(p) => {
                    match *p {
                        "(" | "[" | "{" => depth += 1,
                        ")" | "]" | "}" => depth = depth.saturating_sub(1),
                        _ => {}
                    }
                    if lang == Lang::Awk {
                        if matches!(*p, ";" | "\n" | "}") && depth <= print_depth {
                            in_print = false;
                        }
                        if *p == "|" {
                            return Err(not("awk pipes to or from a command (`|`)"));
                        }
                        if in_print && depth == print_depth && matches!(*p, ">" | ">>") {
                            return Err(not("awk `print >` writes a file"));
                        }
                        if *p == "@" {
                            return Err(not("a gawk `@` directive or indirect call"));
                        }
                    }
                    // A call of something that is not a name: `x[0](..)`, `f()(..)`.
                    if *p == "("
                        && lang == Lang::Php
                        && matches!(
                            prev,
                            Some(Tok::P(")" | "]")) | Some(Tok::Var) | Some(Tok::Str(_))
                        )
                    {
                        return Err(not(
                            "php calls a computed value (a string can name any function)",
                        ));
                    }
                    if *p == "->"
                        && lang == Lang::Perl
                        && !matches!(next, Some(Tok::Name(_)) | Some(Tok::P("[" | "{")))
                    {
                        return Err(not("a perl call through a reference"));
                    }
                    if *p == "->" && lang == Lang::Php && !matches!(next, Some(Tok::Name(_))) {
                        return Err(not("a php computed method"));
                    }
                    if *p == "::" && matches!(next, Some(Tok::Var)) {
                        return Err(not("a computed static member"));
                    }
                    // Subscripts that are attribute lookups: JS and Lua.
                    if *p == "["
                        && matches!(lang, Lang::JavaScript | Lang::Lua)
                        && matches!(
                            prev,
                            Some(Tok::Name(_)) | Some(Tok::P(")" | "]")) | Some(Tok::Str(_))
                        )
                        && !matches!(prev, Some(Tok::Name(n)) if self.keywords.contains(&n.as_str()))
                    {
                        let ok = match (next, t.get(k + 2)) {
                            (Some(Tok::Num), Some(Tok::P("]"))) => true,
                            (Some(Tok::Str(s)), Some(Tok::P("]"))) => self.attr_ok(s, None),
                            _ => false,
                        };
                        if !ok {
                            return Err(not(
                                "a computed member (`x[...]` can reach any attribute)",
                            ));
                        }
                    }
                    if *p == "." && lang == Lang::Ruby && matches!(next, Some(Tok::P("("))) {
                        return Err(not("a ruby `.()` call"));
                    }
                }
                Tok::Name(name) => {
                    let name = self.norm(name);
                    let name = name.as_str();
                    // Hash keys and object keys: `$h{key}`, `key => 1`, `{key: 1}`.
                    if matches!(next, Some(Tok::P("=>"))) && lang != Lang::JavaScript {
                        continue;
                    }
                    if lang == Lang::Perl
                        && matches!(prev, Some(Tok::P("{")))
                        && matches!(next, Some(Tok::P("}")))
                        && k >= 2
                        && matches!(
                            t[k - 2],
                            Tok::Var | Tok::P("->") | Tok::P("]") | Tok::P("}")
                        )
                    {
                        continue;
                    }
                    if matches!(lang, Lang::JavaScript | Lang::Ruby | Lang::Php)
                        && matches!(prev, Some(Tok::P("{" | ",")))
                        && matches!(next, Some(Tok::P(":")))
                        && lang != Lang::Php
                    {
                        continue;
                    }
                    // Attributes: after `.`, `?.`, `->`, `::`, lua's `:`.
                    let attr_of = match prev {
                        Some(Tok::P("." | "?." | "->" | "::")) => true,
                        Some(Tok::P(":")) => lang == Lang::Lua,
                        _ => false,
                    };
                    // A ruby symbol `:name` names a method (`inject(:system)`).
                    if lang == Lang::Ruby
                        && matches!(prev, Some(Tok::P(":")))
                        && !self.attr_ok(name, None)
                        && !bound.contains(name)
                    {
                        return Err(not(format!(
                            "the ruby symbol `:{name}` is not on the list of harmless names"
                        )));
                    }
                    if attr_of {
                        // `module.attr` with the module's own list.
                        let owner = k.checked_sub(2).and_then(|o| t.get(o));
                        let owner_list = match owner {
                            Some(Tok::Name(o))
                                if !bound.contains(o.as_str())
                                    && !matches!(
                                        k.checked_sub(3).and_then(|x| t.get(x)),
                                        Some(Tok::P("." | "?." | "->" | "::"))
                                    ) =>
                            {
                                self.module(&self.norm(o))
                            }
                            _ => None,
                        };
                        if !self.attr_ok(name, owner_list) {
                            return Err(not(format!(
                                "`{name}` is not on the {} list of harmless attributes",
                                lang_name(lang)
                            )));
                        }
                        continue;
                    }
                    if name == "require" && matches!(lang, Lang::JavaScript | Lang::Ruby) {
                        // Always read, even when the code assigns the name.
                        self.require(&t[k + 1..])?;
                        continue;
                    }
                    if name.starts_with("__") && name != "__name__" {
                        return Err(not(format!("the dunder name `{name}`")));
                    }
                    if self.never.contains(&name) {
                        return Err(not(format!("`{name}` can run code or reach what does")));
                    }
                    if lang == Lang::Awk {
                        if name == "print" || name == "printf" {
                            in_print = true;
                            print_depth = depth;
                        }
                        // Any other name is a variable unless it is called.
                        let called = matches!(next, Some(Tok::P("(")));
                        if called
                            && !self.keywords.contains(&name)
                            && !self.globals.contains(&name)
                            && !bound.contains(name)
                        {
                            return Err(not(format!(
                                "the awk function `{name}` is not on the list of harmless ones"
                            )));
                        }
                        if name == "getline" && matches!(prev, Some(Tok::P("|"))) {
                            return Err(not("awk reads a command's output"));
                        }
                        continue;
                    }
                    if self.keywords.contains(&name) || bound.contains(name) {
                        // `import x`, `use X`, `require 'x'` are judged below.
                        if matches!(name, "import" | "from" | "use" | "no") {
                            self.module_use(name, &t[k + 1..])?;
                            // The rest of the statement names what it imports.
                            skip_to = t[k + 1..]
                                .iter()
                                .position(|t| matches!(t, Tok::P(";" | "\n")))
                                .map_or(t.len(), |p| k + 1 + p);
                        }
                        continue;
                    }
                    if let Some(_attrs) = self.module(name) {
                        // A module is used only through its attributes.
                        if matches!(next, Some(Tok::P("." | "::" | "->" | "?."))) {
                            continue;
                        }
                        if lang == Lang::Lua && matches!(next, Some(Tok::P(":"))) {
                            continue;
                        }
                        return Err(not(format!(
                            "`{name}` is used other than through its attributes"
                        )));
                    }
                    if self.globals.contains(&name) {
                        continue;
                    }
                    if name == "require" {
                        self.require(&t[k + 1..])?;
                        continue;
                    }
                    if lang == Lang::Perl && matches!(next, Some(Tok::P("=>"))) {
                        continue;
                    }
                    return Err(not(format!(
                        "`{name}` is not on the {} list of harmless names",
                        lang_name(lang)
                    )));
                }
                Tok::Var => {
                    if lang == Lang::Php && matches!(next, Some(Tok::P("("))) {
                        return Err(not("a php variable function"));
                    }
                    if lang == Lang::Perl && matches!(next, Some(Tok::P("("))) {
                        return Err(not("a perl call through a variable"));
                    }
                }
                Tok::Str(_) | Tok::Num => {}
            }
        }
        Ok(())
    }

    /// `import a.b, c as d` / `from a import b` (python), `use A::B` (perl): the module
    /// must be on the list, and what `from` imports must be its harmless attributes.
    fn module_use(&self, word: &str, rest: &[Tok]) -> Result<(), NotShown> {
        let first = match rest.first() {
            Some(Tok::Name(n)) => n.clone(),
            _ if word == "import" && self.lang == Lang::JavaScript => {
                return Err(not("a javascript import"));
            }
            _ => return Err(not(format!("`{word}` of something that is not a name"))),
        };
        let top = first.split("::").next().unwrap_or(&first).to_owned();
        match self.lang {
            Lang::Python => {
                let Some(attrs) = self.module(&top) else {
                    return Err(not(format!("the module `{first}` is not on the list")));
                };
                if word == "from" {
                    // from M import a, b
                    let mut k = 1;
                    while matches!(rest.get(k), Some(Tok::P(".")))
                        && matches!(rest.get(k + 1), Some(Tok::Name(_)))
                    {
                        k += 2;
                    }
                    if !matches!(rest.get(k), Some(Tok::Name(w)) if w == "import") {
                        return Err(not("a `from` import this reading does not follow"));
                    }
                    k += 1;
                    while let Some(tok) = rest.get(k) {
                        match tok {
                            Tok::Name(n) if n == "as" => k += 1,
                            Tok::Name(n) => {
                                if !(self.attr_ok(n, Some(attrs)) || self.module(n).is_some()) {
                                    return Err(not(format!("`{first}.{n}` is not on the list")));
                                }
                            }
                            Tok::P(",") | Tok::P("(") | Tok::P(")") => {}
                            Tok::P("*") => return Err(not("`import *`")),
                            _ => break,
                        }
                        k += 1;
                    }
                } else {
                    let mut k = 0;
                    while let Some(tok) = rest.get(k) {
                        match tok {
                            Tok::Name(n) if n == "as" => k += 1,
                            Tok::Name(n) => {
                                let top = n.as_str();
                                if self.module(top).is_none() {
                                    return Err(not(format!(
                                        "the module `{n}` is not on the list"
                                    )));
                                }
                            }
                            Tok::P(",") => {}
                            Tok::P(".") => k += 1,
                            _ => break,
                        }
                        k += 1;
                    }
                }
                Ok(())
            }
            Lang::Perl => {
                if PERL_MODULES.contains(&first.as_str()) {
                    Ok(())
                } else {
                    Err(not(format!("the perl module `{first}` is not on the list")))
                }
            }
            _ => Err(not(format!("`{word}`"))),
        }
    }

    /// `require('x')` (javascript) / `require 'x'` (ruby): a literal module on the list, or
    /// a file of the project (a path), which P8 leaves to the sandbox.
    fn require(&self, rest: &[Tok]) -> Result<(), NotShown> {
        let module = match rest {
            [Tok::P("("), Tok::Str(s), Tok::P(")"), ..] => s,
            [Tok::Str(s), ..] if self.lang == Lang::Ruby => s,
            _ => return Err(not("`require` of a computed name")),
        };
        let module = module.strip_prefix("node:").unwrap_or(module);
        let path = module.starts_with("./") || module.starts_with("../") || module.starts_with('/');
        let listed = match self.lang {
            Lang::JavaScript => NODE_MODULES.contains(&module),
            Lang::Ruby => RUBY_LIBS.contains(&module),
            _ => false,
        };
        if listed || (path && module.ends_with(".json")) {
            Ok(())
        } else {
            Err(not(format!(
                "`require` of `{module}`, which is not on the list"
            )))
        }
    }
}

fn lang_name(lang: Lang) -> &'static str {
    match lang {
        Lang::Python => "python",
        Lang::JavaScript => "javascript",
        Lang::Perl => "perl",
        Lang::Ruby => "ruby",
        Lang::Php => "php",
        Lang::Lua => "lua",
        Lang::Awk => "awk",
    }
}

// ---------------------------------------------------------------- lists

/// `*` in a module's list: every attribute not starting with `_` and not in
/// [`REFLECTIVE`].
const STAR: &[&str] = &["*"];

/// Attributes that reach code from any value (`x.constructor('code')()` in javascript),
/// refused whatever list would admit them.
const REFLECTIVE: &[&str] = &[
    "constructor",
    "prototype",
    "caller",
    "callee",
    "arguments",
    "mro",
    "gi_frame",
    "f_globals",
    "f_back",
    "tb_frame",
    "cr_frame",
    "ag_frame",
    "func_globals",
    "im_func",
    "mainModule",
    "binding",
    "dlopen",
    "send",
    "public_send",
    "instance_eval",
    "method",
];

static PYTHON: Rules = Rules {
    lang: Lang::Python,
    keywords: &[
        "and", "or", "not", "in", "is", "if", "elif", "else", "for", "while", "break", "continue",
        "return", "def", "lambda", "pass", "None", "True", "False", "try", "except", "finally",
        "raise", "with", "as", "import", "from", "del", "assert", "yield", "async", "await",
        "__name__",
    ],
    globals: &[
        "print",
        "len",
        "range",
        "str",
        "int",
        "float",
        "bool",
        "list",
        "dict",
        "set",
        "tuple",
        "sorted",
        "reversed",
        "enumerate",
        "zip",
        "map",
        "filter",
        "sum",
        "min",
        "max",
        "abs",
        "round",
        "any",
        "all",
        "repr",
        "chr",
        "ord",
        "hex",
        "oct",
        "bin",
        "isinstance",
        "hash",
        "divmod",
        "pow",
        "format",
        "iter",
        "next",
        "frozenset",
        "bytes",
        "slice",
        "ascii",
        "Exception",
        "ValueError",
        "KeyError",
        "IndexError",
        "TypeError",
        "SystemExit",
        "StopIteration",
        "RuntimeError",
        "exit",
    ],
    modules: &[
        (
            "sys",
            &[
                "argv",
                "stdin",
                "stdout",
                "stderr",
                "version",
                "version_info",
                "platform",
                "path",
                "executable",
                "maxsize",
                "byteorder",
                "exit",
                "implementation",
                "prefix",
                "getdefaultencoding",
                "getrecursionlimit",
                "float_info",
                "hexversion",
            ],
        ),
        (
            "os",
            &[
                "path",
                "getcwd",
                "environ",
                "getenv",
                "sep",
                "linesep",
                "pathsep",
                "name",
                "cpu_count",
                "getpid",
                "getppid",
                "getuid",
                "uname",
                "listdir",
                "curdir",
            ],
        ),
        (
            "json",
            &["load", "loads", "dumps", "dump", "JSONDecodeError"],
        ),
        ("platform", STAR),
        ("math", STAR),
        ("re", STAR),
        ("string", STAR),
        ("collections", STAR),
        ("itertools", STAR),
        ("datetime", STAR),
        ("time", STAR),
        ("random", STAR),
        ("base64", STAR),
        ("hashlib", STAR),
        ("textwrap", STAR),
        ("pprint", &["pprint", "pformat", "pp"]),
        ("statistics", STAR),
        ("decimal", STAR),
        ("fractions", STAR),
        ("uuid", STAR),
        ("struct", STAR),
        ("binascii", STAR),
        ("unicodedata", STAR),
        ("calendar", STAR),
        ("locale", &["getlocale", "getpreferredencoding"]),
        ("pathlib", &["Path", "PurePath", "PurePosixPath"]),
        (
            "csv",
            &["reader", "writer", "DictReader", "DictWriter", "excel"],
        ),
        ("html", &["escape", "unescape"]),
        ("urllib", &["parse"]),
        ("keyword", STAR),
    ],
    attrs: &[
        "join",
        "split",
        "rsplit",
        "strip",
        "lstrip",
        "rstrip",
        "upper",
        "lower",
        "replace",
        "format",
        "startswith",
        "endswith",
        "find",
        "rfind",
        "count",
        "index",
        "items",
        "keys",
        "values",
        "get",
        "append",
        "extend",
        "insert",
        "pop",
        "sort",
        "copy",
        "update",
        "setdefault",
        "read",
        "readline",
        "readlines",
        "write",
        "writerow",
        "writerows",
        "flush",
        "buffer",
        "encode",
        "decode",
        "splitlines",
        "isdigit",
        "isalpha",
        "isalnum",
        "isspace",
        "title",
        "capitalize",
        "zfill",
        "ljust",
        "rjust",
        "center",
        "group",
        "groups",
        "groupdict",
        "match",
        "search",
        "findall",
        "finditer",
        "fullmatch",
        "sub",
        "most_common",
        "path",
        "exists",
        "isfile",
        "isdir",
        "basename",
        "dirname",
        "splitext",
        "abspath",
        "realpath",
        "relpath",
        "normpath",
        "expanduser",
        "getsize",
        "name",
        "stem",
        "suffix",
        "suffixes",
        "parent",
        "parents",
        "parts",
        "read_text",
        "read_bytes",
        "is_file",
        "is_dir",
        "iterdir",
        "glob",
        "rglob",
        "resolve",
        "absolute",
        "home",
        "cwd",
        "version",
        "major",
        "minor",
        "micro",
        "now",
        "today",
        "utcnow",
        "strftime",
        "isoformat",
        "fromisoformat",
        "fromtimestamp",
        "year",
        "month",
        "day",
        "hour",
        "minute",
        "second",
        "timestamp",
        "total_seconds",
        "days",
        "hexdigest",
        "digest",
        "real",
        "imag",
        "add",
        "discard",
        "union",
        "intersection",
        "difference",
        "issubset",
        "is_integer",
        "bit_length",
        "quote",
        "unquote",
        "urlparse",
        "urlencode",
        "parse_qs",
        "netloc",
        "scheme",
        "hostname",
        "port",
        "query",
        "fragment",
        "machine",
        "release",
        "node",
        "python_version",
        "uname",
        "as_posix",
        "with_suffix",
        "with_name",
        "relative_to",
        "joinpath",
        "casefold",
        "partition",
        "rpartition",
        "translate",
        "maketrans",
        "expandtabs",
        "removeprefix",
        "removesuffix",
        "tolist",
        "conjugate",
        "environ",
        "getcwd",
        "sep",
        "argv",
        "stdin",
        "stdout",
        "stderr",
        "platform",
    ],
    never: &[
        "eval",
        "exec",
        "compile",
        "getattr",
        "setattr",
        "delattr",
        "globals",
        "locals",
        "vars",
        "open",
        "breakpoint",
        "help",
        "input",
        "memoryview",
        "type",
        "object",
        "super",
        "classmethod",
        "staticmethod",
        "property",
        "dir",
        "class",
        "global",
        "nonlocal",
    ],
};

static JAVASCRIPT: Rules = Rules {
    lang: Lang::JavaScript,
    keywords: &[
        "const",
        "let",
        "var",
        "function",
        "return",
        "if",
        "else",
        "for",
        "of",
        "in",
        "while",
        "do",
        "break",
        "continue",
        "new",
        "typeof",
        "instanceof",
        "null",
        "undefined",
        "true",
        "false",
        "try",
        "catch",
        "finally",
        "throw",
        "switch",
        "case",
        "default",
        "async",
        "await",
        "void",
        "delete",
        "NaN",
        "Infinity",
    ],
    globals: &[
        "parseInt",
        "parseFloat",
        "isNaN",
        "isFinite",
        "encodeURIComponent",
        "decodeURIComponent",
        "encodeURI",
        "decodeURI",
        "Set",
        "Map",
        "RegExp",
        "Error",
        "TypeError",
        "BigInt",
        "Boolean",
        "Symbol",
        "URL",
        "URLSearchParams",
        "TextEncoder",
        "TextDecoder",
        "structuredClone",
    ],
    modules: &[
        (
            "console",
            &[
                "log", "error", "warn", "info", "debug", "dir", "table", "time", "timeEnd", "trace",
            ],
        ),
        ("JSON", &["parse", "stringify"]),
        ("Math", STAR),
        ("Number", STAR),
        (
            "process",
            &[
                "version",
                "versions",
                "platform",
                "arch",
                "argv",
                "env",
                "cwd",
                "pid",
                "ppid",
                "exit",
                "exitCode",
                "stdout",
                "stderr",
                "stdin",
                "uptime",
                "memoryUsage",
                "hrtime",
                "release",
                "execPath",
                "title",
            ],
        ),
        (
            "Object",
            &[
                "keys",
                "values",
                "entries",
                "assign",
                "fromEntries",
                "freeze",
                "is",
            ],
        ),
        ("Array", &["isArray", "from", "of"]),
        ("String", &["fromCharCode", "fromCodePoint", "raw"]),
        ("Date", &["now", "parse", "UTC"]),
        (
            "Buffer",
            &["from", "alloc", "byteLength", "concat", "isBuffer"],
        ),
        ("Promise", &["resolve", "all", "allSettled", "race"]),
        ("Intl", STAR),
    ],
    attrs: &[
        "length",
        "map",
        "filter",
        "reduce",
        "forEach",
        "join",
        "split",
        "slice",
        "trim",
        "toUpperCase",
        "toLowerCase",
        "includes",
        "indexOf",
        "lastIndexOf",
        "keys",
        "values",
        "entries",
        "push",
        "pop",
        "shift",
        "unshift",
        "sort",
        "reverse",
        "toString",
        "toFixed",
        "padStart",
        "padEnd",
        "replace",
        "replaceAll",
        "match",
        "matchAll",
        "test",
        "startsWith",
        "endsWith",
        "concat",
        "find",
        "findIndex",
        "some",
        "every",
        "flat",
        "flatMap",
        "at",
        "repeat",
        "charAt",
        "charCodeAt",
        "codePointAt",
        "trimStart",
        "trimEnd",
        "version",
        "versions",
        "name",
        "dependencies",
        "devDependencies",
        "peerDependencies",
        "scripts",
        "main",
        "description",
        "engines",
        "license",
        "author",
        "readFileSync",
        "existsSync",
        "readdirSync",
        "statSync",
        "lstatSync",
        "isFile",
        "isDirectory",
        "size",
        "mtime",
        "homedir",
        "platform",
        "arch",
        "cpus",
        "hostname",
        "tmpdir",
        "type",
        "release",
        "totalmem",
        "freemem",
        "EOL",
        "basename",
        "dirname",
        "extname",
        "resolve",
        "relative",
        "normalize",
        "isAbsolute",
        "sep",
        "parse",
        "format",
        "stringify",
        "then",
        "write",
        "getTime",
        "toISOString",
        "toLocaleString",
        "toLocaleDateString",
        "getFullYear",
        "getMonth",
        "getDate",
        "getDay",
        "getHours",
        "now",
        "has",
        "get",
        "set",
        "add",
        "size",
        "delete",
        "clear",
        "node",
        "v8",
        "env",
        "argv",
        "cwd",
        "stdout",
        "stderr",
        "log",
        "error",
        "warn",
        "info",
        "columns",
        "rows",
        "isTTY",
        "floor",
        "ceil",
        "round",
        "max",
        "min",
        "abs",
        "random",
        "sqrt",
        "pow",
        "PI",
        "href",
        "host",
        "hostname",
        "pathname",
        "protocol",
        "search",
        "searchParams",
        "port",
        "from",
        "localeCompare",
        "normalize",
        "toJSON",
        "valueOf",
        "hasOwnProperty",
        "byteLength",
        "encode",
        "decode",
    ],
    never: &[
        "eval",
        "Function",
        "import",
        "globalThis",
        "global",
        "this",
        "module",
        "exports",
        "constructor",
        "prototype",
        "setTimeout",
        "setInterval",
        "setImmediate",
        "queueMicrotask",
        "Reflect",
        "Proxy",
        "WebAssembly",
        "Deno",
        "Bun",
        "arguments",
        "Worker",
        "class",
        "with",
        "yield",
    ],
};

const NODE_MODULES: &[&str] = &[
    "path",
    "os",
    "util",
    "url",
    "fs",
    "assert",
    "querystring",
    "string_decoder",
    "events",
];

static PERL: Rules = Rules {
    lang: Lang::Perl,
    keywords: &[
        "my",
        "our",
        "local",
        "if",
        "elsif",
        "else",
        "unless",
        "while",
        "until",
        "for",
        "foreach",
        "last",
        "next",
        "redo",
        "return",
        "sub",
        "and",
        "or",
        "not",
        "xor",
        "eq",
        "ne",
        "lt",
        "gt",
        "le",
        "ge",
        "cmp",
        "x",
        "use",
        "no",
        "BEGIN",
        "END",
        "defined",
        "undef",
        "wantarray",
        "STDIN",
        "STDOUT",
        "STDERR",
        "ARGV",
        "__FILE__",
        "__LINE__",
        "__PACKAGE__",
        "strict",
        "warnings",
    ],
    globals: &[
        "print",
        "printf",
        "say",
        "length",
        "substr",
        "index",
        "rindex",
        "uc",
        "lc",
        "ucfirst",
        "lcfirst",
        "sprintf",
        "join",
        "split",
        "reverse",
        "sort",
        "keys",
        "values",
        "each",
        "exists",
        "delete",
        "push",
        "pop",
        "shift",
        "unshift",
        "splice",
        "scalar",
        "map",
        "grep",
        "chomp",
        "chop",
        "chr",
        "ord",
        "hex",
        "oct",
        "abs",
        "int",
        "sqrt",
        "sin",
        "cos",
        "atan2",
        "exp",
        "log",
        "rand",
        "srand",
        "time",
        "localtime",
        "gmtime",
        "die",
        "warn",
        "exit",
        "quotemeta",
        "pack",
        "unpack",
        "pos",
        "ref",
        "lock",
        "min",
        "max",
        "sum",
        "sum0",
        "first",
        "uniq",
        "uniqnum",
        "shuffle",
        "Dumper",
        "encode_json",
        "decode_json",
        "to_json",
        "from_json",
        "basename",
        "dirname",
        "fileparse",
        "floor",
        "ceil",
        "fmod",
        "strftime",
        "blessed",
        "looks_like_number",
        "reftype",
        "eof",
    ],
    modules: &[],
    attrs: &[
        "new",
        "decode",
        "encode",
        "pretty",
        "canonical",
        "utf8",
        "ascii",
        "latin1",
        "Dump",
        "Indent",
        "Sortkeys",
        "allow_nonref",
        "relaxed",
    ],
    never: &[],
};

const PERL_MODULES: &[&str] = &[
    "strict",
    "warnings",
    "utf8",
    "feature",
    "List::Util",
    "Data::Dumper",
    "JSON::PP",
    "POSIX",
    "File::Basename",
    "Scalar::Util",
    "Time::HiRes",
    "constant",
    "integer",
    "bigint",
    "bignum",
    "open",
];

static RUBY: Rules = Rules {
    lang: Lang::Ruby,
    keywords: &[
        "if", "elsif", "else", "unless", "while", "until", "for", "in", "do", "end", "def",
        "return", "and", "or", "not", "nil", "true", "false", "then", "case", "when", "begin",
        "rescue", "ensure", "next", "break", "self_",
    ],
    globals: &[
        "puts",
        "print",
        "p",
        "pp",
        "printf",
        "sprintf",
        "format",
        "ARGV",
        "STDIN",
        "STDOUT",
        "STDERR",
        "ENV",
        "RUBY_VERSION",
        "RUBY_PLATFORM",
        "RUBY_ENGINE",
        "Integer",
        "Float",
        "String",
        "Array",
        "Hash",
        "rand",
        "exit",
        "abort",
        "loop",
        "lambda",
        "proc",
    ],
    modules: &[
        ("JSON", &["parse", "generate", "pretty_generate", "dump"]),
        ("Math", STAR),
        ("Time", &["now", "at"]),
        ("Date", &["today", "parse"]),
    ],
    attrs: &[
        "each",
        "map",
        "select",
        "reject",
        "to_s",
        "to_i",
        "to_f",
        "to_a",
        "to_h",
        "to_sym",
        "size",
        "length",
        "upcase",
        "downcase",
        "strip",
        "split",
        "join",
        "first",
        "last",
        "sum",
        "sort",
        "sort_by",
        "uniq",
        "include?",
        "keys",
        "values",
        "parse",
        "generate",
        "pretty_generate",
        "now",
        "lines",
        "each_line",
        "each_with_index",
        "chomp",
        "gsub",
        "sub",
        "scan",
        "match",
        "freeze",
        "inspect",
        "dup",
        "reverse",
        "min",
        "max",
        "count",
        "empty?",
        "nil?",
        "zero?",
        "even?",
        "odd?",
        "start_with?",
        "end_with?",
        "capitalize",
        "center",
        "ljust",
        "rjust",
        "tr",
        "squeeze",
        "chars",
        "bytes",
        "succ",
        "times",
        "upto",
        "downto",
        "step",
        "round",
        "floor",
        "ceil",
        "abs",
        "year",
        "month",
        "day",
        "hour",
        "strftime",
        "iso8601",
        "fetch",
        "dig",
        "key?",
        "group_by",
        "tally",
        "zip",
        "flatten",
        "compact",
        "take",
        "drop",
        "find",
        "detect",
        "any?",
        "all?",
        "none?",
        "reduce",
        "inject",
        "each_slice",
        "each_cons",
        "with_index",
        "puts",
        "print",
        "version",
        "name",
        "sqrt",
        "to_json",
        "then",
        "tap",
        "filter_map",
    ],
    never: &[
        "eval",
        "send",
        "public_send",
        "method",
        "instance_eval",
        "class_eval",
        "module_eval",
        "instance_exec",
        "binding",
        "system",
        "exec",
        "spawn",
        "fork",
        "open",
        "syscall",
        "load",
        "Kernel",
        "Object",
        "IO",
        "Open3",
        "Process",
        "define_method",
        "const_get",
        "instance_variable_get",
        "self",
        "Class",
        "Module",
        "ObjectSpace",
    ],
};

const RUBY_LIBS: &[&str] = &[
    "json",
    "set",
    "time",
    "date",
    "pp",
    "securerandom",
    "digest",
    "base64",
];

static PHP: Rules = Rules {
    lang: Lang::Php,
    keywords: &[
        "echo",
        "print",
        "if",
        "else",
        "elseif",
        "foreach",
        "as",
        "for",
        "while",
        "return",
        "null",
        "true",
        "false",
        "array",
        "list",
        "isset",
        "empty",
        "unset",
        "and",
        "or",
        "php_eol",
        "php_version",
        "php_os",
        "php_os_family",
        "php_int_max",
        "php_int_size",
        "m_pi",
        "php_major_version",
        "php_minor_version",
    ],
    globals: &[
        "printf",
        "sprintf",
        "strlen",
        "count",
        "json_encode",
        "json_decode",
        "var_dump",
        "var_export",
        "print_r",
        "implode",
        "explode",
        "join",
        "str_replace",
        "str_repeat",
        "substr",
        "strpos",
        "str_contains",
        "str_starts_with",
        "str_ends_with",
        "strtoupper",
        "strtolower",
        "ucfirst",
        "trim",
        "rtrim",
        "ltrim",
        "phpversion",
        "php_uname",
        "php_sapi_name",
        "date",
        "time",
        "microtime",
        "round",
        "floor",
        "ceil",
        "abs",
        "max",
        "min",
        "intval",
        "floatval",
        "strval",
        "is_array",
        "is_string",
        "is_int",
        "array_keys",
        "array_values",
        "array_sum",
        "array_merge",
        "array_slice",
        "in_array",
        "array_key_exists",
        "range",
        "number_format",
        "str_pad",
        "md5",
        "sha1",
        "crc32",
        "base64_encode",
        "base64_decode",
        "urlencode",
        "rawurlencode",
        "htmlspecialchars",
        "getenv",
        "ini_get",
        "extension_loaded",
        "get_loaded_extensions",
        "php_ini_loaded_file",
        "memory_get_usage",
        "sqrt",
        "pow",
        "rand",
        "mt_rand",
        "random_int",
        "uniqid",
        "str_split",
        "array_reverse",
        "array_unique",
        "array_flip",
        "array_fill",
        "count_chars",
        "ucwords",
        "lcfirst",
        "nl2br",
        "wordwrap",
        "sort",
        "rsort",
        "ksort",
        "krsort",
        "asort",
        "arsort",
        "gettype",
        "version_compare",
        "zend_version",
        "date_default_timezone_get",
        "mb_strlen",
        "mb_strtoupper",
        "mb_substr",
        "bin2hex",
        "hex2bin",
        "dechex",
        "hexdec",
        "pi",
        "exit",
        "die",
    ],
    modules: &[],
    attrs: &["format", "gettimestamp"],
    never: &[],
};

static LUA: Rules = Rules {
    lang: Lang::Lua,
    keywords: &[
        "local", "function", "end", "if", "then", "elseif", "else", "for", "in", "do", "while",
        "repeat", "until", "return", "break", "and", "or", "not", "nil", "true", "false",
    ],
    globals: &[
        "print", "tostring", "tonumber", "type", "pairs", "ipairs", "select", "error", "assert",
        "unpack", "_VERSION",
    ],
    modules: &[
        (
            "string",
            &[
                "format", "rep", "sub", "upper", "lower", "len", "gsub", "gmatch", "match", "find",
                "byte", "char", "reverse",
            ],
        ),
        (
            "table",
            &["insert", "concat", "remove", "sort", "unpack", "pack"],
        ),
        ("math", STAR),
        ("os", &["time", "clock", "date", "getenv", "difftime"]),
        ("io", &["write", "read", "stdout", "stderr"]),
        ("utf8", STAR),
    ],
    attrs: &[
        "format", "rep", "sub", "upper", "lower", "len", "gsub", "gmatch", "match", "find", "byte",
        "reverse", "write", "read",
    ],
    never: &[
        "load",
        "loadstring",
        "dofile",
        "loadfile",
        "require",
        "_G",
        "_ENV",
        "debug",
        "setfenv",
        "getfenv",
        "rawget",
        "rawset",
        "setmetatable",
        "getmetatable",
        "package",
        "collectgarbage",
        "coroutine",
        "pcall",
        "xpcall",
        "next",
    ],
};

static AWK: Rules = Rules {
    lang: Lang::Awk,
    keywords: &[
        "if", "else", "while", "for", "do", "in", "return", "delete", "print", "printf", "next",
        "nextfile", "exit", "function", "func", "getline", "BEGIN", "END", "break", "continue",
    ],
    // Builtin functions an awk program may call; any other name is a variable unless
    // called (then it must be a function the program defines).
    globals: &[
        "length", "substr", "index", "split", "sub", "gsub", "gensub", "match", "sprintf",
        "tolower", "toupper", "int", "sqrt", "exp", "log", "sin", "cos", "atan2", "rand", "srand",
        "systime", "strftime", "mktime", "asort", "asorti", "and", "or", "xor", "lshift", "rshift",
        "compl", "isarray", "typeof", "strtonum", "patsplit",
    ],
    modules: &[],
    attrs: &[],
    never: &["system", "close", "fflush"],
};

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(lang: Lang, code: &str) {
        assert_eq!(check(lang, code), Ok(()), "{code}");
    }

    fn no(lang: Lang, code: &str) {
        assert!(
            check(lang, code).is_err(),
            "shown harmless but is not: {code}"
        );
    }

    #[test]
    fn p8_python_everyday_code_is_harmless() {
        ok(Lang::Python, "import platform; print(platform.system())");
        ok(Lang::Python, "import sys; print(sys.version)");
        ok(
            Lang::Python,
            r#"import json,sys; print(json.load(sys.stdin)["version"])"#,
        );
        ok(
            Lang::Python,
            "import os; print(os.path.join('a', 'b'), os.getcwd())",
        );
        ok(Lang::Python, "for i in range(3): print(i * 2)");
        ok(
            Lang::Python,
            "x = [a for a in range(5) if a % 2]; print(len(x))",
        );
        ok(Lang::Python, "print(f'{1+2} and {len(\"ab\")!r}')");
        ok(
            Lang::Python,
            "from pathlib import Path; print(Path('x').exists())",
        );
        ok(
            Lang::Python,
            "import sys\nfor line in sys.stdin:\n    print(line.strip().upper())",
        );
        ok(Lang::Python, "a, b = 1, 2; print(a + b)");
        ok(
            Lang::Python,
            "print(sorted(set('hello'), key=lambda c: -ord(c)))",
        );
    }

    #[test]
    fn p8_python_that_starts_a_process_is_not_shown_harmless() {
        no(Lang::Python, "import os; os.system('rm c')");
        no(Lang::Python, "import os; getattr(os, 'sys'+'tem')('rm c')");
        no(Lang::Python, "breakpoint('r'+'m c')");
        no(Lang::Python, "__import__('os').system('rm c')");
        no(Lang::Python, "import subprocess");
        no(Lang::Python, "from os import system; system('rm c')");
        no(Lang::Python, "import os as o; o.system('rm c')");
        no(Lang::Python, "x = os; x.system('rm c')");
        no(Lang::Python, "def f(e=eval): e('1')");
        no(Lang::Python, "def f(eval=eval): eval('1')");
        no(
            Lang::Python,
            "print(f'{__import__(\"os\").system(\"rm c\")}')",
        );
        no(Lang::Python, "open('c', 'w').write('x')");
        no(Lang::Python, "import sys; sys.modules['os'].system('rm c')");
        no(
            Lang::Python,
            "print(().__class__.__bases__[0].__subclasses__())",
        );
        no(Lang::Python, "exec('import os')");
        no(
            Lang::Python,
            "import importlib; importlib.import_module('os')",
        );
        no(Lang::Python, "from pathlib import Path; Path('c').unlink()");
        no(Lang::Python, "import os; [os.system][0]('rm c')");
    }

    #[test]
    fn p8_javascript_everyday_and_not() {
        ok(Lang::JavaScript, "console.log(process.version)");
        ok(Lang::JavaScript, "const n = 2; console.log(`n=${n}`)");
        ok(Lang::JavaScript, "require('./package.json').version");
        ok(
            Lang::JavaScript,
            "console.log(JSON.stringify({a: 1, b: [1, 2]}))",
        );
        ok(
            Lang::JavaScript,
            "console.log(Math.max(...[1, 2].map(x => x * 2)))",
        );
        ok(
            Lang::JavaScript,
            "console.log(require('os').platform(), process.env.HOME)",
        );
        no(
            Lang::JavaScript,
            "require('child_process').execSync('rm c')",
        );
        no(
            Lang::JavaScript,
            "require('chi'+'ld_process').execSync('rm c')",
        );
        no(Lang::JavaScript, "const m = 'child_process'; require(m)");
        no(
            Lang::JavaScript,
            "process.mainModule.require('child_process')",
        );
        no(Lang::JavaScript, "process['binding']('spawn_sync')");
        no(
            Lang::JavaScript,
            "[].constructor.constructor('return process')()",
        );
        no(
            Lang::JavaScript,
            "const k = 'constructor'; ({})[k][k]('x')()",
        );
        no(
            Lang::JavaScript,
            "console.log(`${require('child_process').execSync('rm c')}`)",
        );
        no(Lang::JavaScript, "eval('1')");
        no(Lang::JavaScript, "const f = Function; f('x')()");
        no(Lang::JavaScript, "require('fs').writeFileSync('c', '')");
        no(Lang::JavaScript, "import('child_process')");
        no(Lang::JavaScript, "globalThis.process");
        no(Lang::JavaScript, "(1 ? eval : 0)('x')");
    }

    #[test]
    fn p8_perl_everyday_and_not() {
        ok(Lang::Perl, "print if /version/");
        ok(Lang::Perl, "s/foo/bar/g");
        ok(Lang::Perl, r#"print join(",", map { $_ * 2 } @ARGV), "\n""#);
        ok(
            Lang::Perl,
            r#"my %h = (a => 1); print "$h{a} $_\n" for keys %h"#,
        );
        ok(Lang::Perl, "use List::Util qw(sum); print sum(1, 2)");
        no(Lang::Perl, r#"system("rm c")"#);
        no(Lang::Perl, "`rm c`");
        no(Lang::Perl, "qx(rm c)");
        no(
            Lang::Perl,
            "use IPC::Open3; open3(my $i, my $o, undef, 'rm', 'c')",
        );
        no(Lang::Perl, r#"s/x/system("rm c")/e"#);
        no(Lang::Perl, r#"print "@{[ system 'rm c' ]}""#);
        no(Lang::Perl, r#"&{"sys"."tem"}("rm c")"#);
        no(Lang::Perl, r#"my $f = \&CORE::system; $f->("rm c")"#);
        no(Lang::Perl, r#"open(my $f, "|rm c")"#);
        no(Lang::Perl, r#"eval "system 'rm c'""#);
        no(Lang::Perl, "$h{q}; system('rm c'); $h{q}");
        no(Lang::Perl, r#"$x = 4 / 2; system("rm c"); $y = 1 / 2"#);
        no(Lang::Perl, r#"print "$x[system('rm c')]""#);
    }

    #[test]
    fn p8_awk_everyday_and_not() {
        ok(Lang::Awk, r#"BEGIN{FS="|"} {print $2}"#);
        ok(Lang::Awk, "{print $1}");
        ok(Lang::Awk, "NR==2{print}");
        ok(Lang::Awk, "{s+=$2} END {print s}");
        ok(Lang::Awk, "/error/ {c++} END {print c}");
        ok(Lang::Awk, "!seen[$0]++");
        ok(Lang::Awk, "length > 100");
        ok(Lang::Awk, "$3 > 10 {print $1, ($2 > 1)}");
        ok(Lang::Awk, "/a|b/ || /c/ {n++}");
        ok(Lang::Awk, "function f(x) { return x * 2 } {print f($1)}");
        ok(
            Lang::Awk,
            "{a[$1]++} END {for (k in a) print k, a[k]; if (NR) print(NR)}",
        );
        no(Lang::Awk, r#"BEGIN{system("rm c")}"#);
        no(Lang::Awk, r#"BEGIN{print "x" | "rm c"}"#);
        no(
            Lang::Awk,
            r#"BEGIN{c="r" "m c"; s="sh"; x = 4/2; print c | s; y = 1/2}"#,
        );
        no(Lang::Awk, r#"BEGIN{"date" | getline d}"#);
        no(Lang::Awk, r#"{print > "out"}"#);
        no(Lang::Awk, r#"BEGIN{f="system"; @f("rm c")}"#);
    }

    #[test]
    fn p8_ruby_php_lua_everyday_and_not() {
        ok(Lang::Ruby, r##"puts "v=#{RUBY_VERSION}""##);
        ok(Lang::Ruby, "puts [1, 2].map { |x| x * 2 }.sum");
        no(Lang::Ruby, r#"system("rm c")"#);
        no(Lang::Ruby, "%x(rm c)");
        no(Lang::Ruby, "Kernel.send(:system, 'rm c')");
        no(Lang::Ruby, r##"puts "#{`rm c`}""##);
        no(Lang::Ruby, "[1].each(&method(:system))");
        ok(Lang::Php, "echo PHP_VERSION, PHP_EOL;");
        ok(Lang::Php, r#"echo json_encode(['a' => 1]);"#);
        no(Lang::Php, r#"system("rm c");"#);
        no(Lang::Php, r#"$f = 'sys'.'tem'; $f('rm c');"#);
        no(Lang::Php, r#"['system'][0]('rm c');"#);
        no(Lang::Php, r#"array_map('system', ['rm c']);"#);
        no(Lang::Php, r#"echo "{${system('rm c')}}";"#);
        ok(Lang::Lua, "print(string.format('%d', 1 + 2))");
        ok(
            Lang::Lua,
            "local t = {1, 2}; for i, v in ipairs(t) do print(i, v) end",
        );
        no(Lang::Lua, r#"os.execute("rm c")"#);
        no(Lang::Lua, r#"os["exe".."cute"]("rm c")"#);
        no(Lang::Lua, r#"local o = os; o.execute("rm c")"#);
        no(Lang::Lua, r#"load("os.execute('rm c')")()"#);
        no(Lang::Lua, r#"io.popen("rm c")"#);
    }
}
