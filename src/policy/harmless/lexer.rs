//! The tokenizer of `harmless`: code of any of its languages as names, variables,
//! strings without code, numbers and punctuation; interpolated code is lexed again,
//! to a bounded depth.

use super::*;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
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

pub(super) const PUNCTS: &[&str] = &[
    "===", "!==", "**=", "...", "<=>", "->", "=>", "::", "==", "!=", "<=", ">=", "&&", "||", "??",
    "?.", "+=", "-=", "*=", "/=", "%=", ".=", "=~", "!~", ":=", "<<", ">>", "**", "++", "--", "(",
    ")", "[", "]", "{", "}", ",", ";", ".", ":", "?", "=", "<", ">", "+", "-", "*", "/", "%", "!",
    "~", "^", "&", "|", "@", "$", "#", "\\", "\n",
];

pub(super) struct Lexer<'a> {
    lang: Lang,
    s: &'a [u8],
    text: &'a str,
    i: usize,
    out: Vec<Tok>,
    depth: usize,
}

pub(super) fn lex(lang: Lang, text: &str, depth: usize) -> Result<Vec<Tok>, NotShown> {
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

pub(super) fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

pub(super) fn is_name_char(b: u8) -> bool {
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
pub(super) fn python_field(inner: &str) -> Result<&str, NotShown> {
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
pub(super) fn perl_interpolation(body: &str) -> Result<(), NotShown> {
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
