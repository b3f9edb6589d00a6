//! Whether a piece of inline code is shown harmless (P8): an allowlist, not a scan.
//!
//! The judge cannot run code in its head, and a list of dangerous words is a list of the
//! ways someone has already thought of (`getattr(os, 'sys'+'tem')` has none of them). So
//! code is allowed only when every name it uses is one this module knows cannot start a
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

mod awk;
mod javascript;
mod lexer;
mod lua;
mod perl;
mod php;
mod python;
mod ruby;
#[cfg(test)]
mod tests;

use awk::AWK;
use javascript::{JAVASCRIPT, NODE_MODULES};
use lexer::*;
use lua::LUA;
use perl::{PERL, PERL_MODULES};
use php::PHP;
use python::PYTHON;
use ruby::{RUBY, RUBY_LIBS};

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
    if lang == Lang::Python
        && let Some(encoding) = python::source_encoding(code)
    {
        return Err(not(format!(
            "its `coding: {encoding}` declaration makes python read other text than the judge reads"
        )));
    }
    let tokens = lex(lang, code, 0)?;
    Rules::of(lang).check(&tokens)
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
                        // Issue 41: javascript's data constructors make a value and run
                        // nothing (`new Date()`, `new Map()`); what is done with it is read
                        // through its attributes as any value's.
                        if lang == Lang::JavaScript
                            && matches!(prev, Some(Tok::Name(p)) if p == "new")
                            && javascript::CONSTRUCTORS.contains(&name)
                        {
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
