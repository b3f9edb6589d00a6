//! Inline code given to a program that runs it, found and read (P8).
//!
//! `python3 -c CODE`, `perl -e CODE`, an `awk` program, a `sed` script, a here-string fed
//! to `node`, `sqlite3 db '.shell ...'`, `vim -c '!...'` run code the shell never sees as
//! commands. This file finds that code in a segment's words and its literal stdin, each
//! program read with its real option grammar (`argv.rs`, or the program's own switch
//! reader where it is not getopt: perl and ruby read `-le`, `-0777`, `-Mmod` letter by
//! letter), and asks `harmless` whether the code is shown harmless. What is not shown
//! harmless is opaque to the judge (mod.rs): asked in mode `auto` under a deny or ask rule,
//! refused in `read-only`; a deny rule's words standing in it deny.
//!
//! A script file (`python3 x.py`, `awk -f prog.awk`, `make`) is not read: code in a file of
//! the project is out of reach of any rule (spec P8; the sandbox contains it). Code on
//! stdin is read when the line shows it (a here-document or here-string); from anywhere
//! else (a pipe, a process substitution, `/dev/stdin` of the caller) it is not shown.

use super::argv::{self, Grammar, Value, both, long, short};
use super::harmless::{self, Lang};
use Value::{Last, No, Optional, Required};

/// What the judge learned about the inline code of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code {
    /// `python`, `perl`, `awk`, `sqlite3`...: for messages and `explain`.
    pub language: &'static str,
    /// The code's words: runs of letters, digits and `_ . + / - $`, so that `os.system('rm
    /// x')` holds `rm` and `x`, and `rmdir` stays `rmdir`. A deny rule's words among them
    /// deny code that is not shown harmless.
    pub words: Vec<String>,
    pub reading: Reading,
}

/// Whether inline code was shown harmless.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// Every name it uses is on its language's list: it starts no process, writes no file.
    Harmless,
    /// Not shown harmless, and why (for the question and `explain`).
    Opaque(String),
}

impl Code {
    fn new(language: &'static str, text: &str, reading: Reading) -> Code {
        Code {
            language,
            words: code_words(text),
            reading,
        }
    }

    fn opaque(language: &'static str, text: &str, why: impl Into<String>) -> Code {
        Code::new(language, text, Reading::Opaque(why.into()))
    }

    /// Reads `text` in `lang`.
    fn read(language: &'static str, lang: Lang, text: &str) -> Code {
        let reading = match harmless::check(lang, text) {
            Ok(()) => Reading::Harmless,
            Err(why) => Reading::Opaque(why.0),
        };
        Code::new(language, text, reading)
    }

    /// Whether it was shown harmless.
    pub fn is_harmless(&self) -> bool {
        self.reading == Reading::Harmless
    }
}

/// Where a program's code comes from, once its options are read.
enum Source {
    /// Code given on the line (several pieces are one program).
    Given(Vec<String>),
    /// Code read from stdin.
    Stdin,
    /// A file of the project (or a module): out of reach (P8).
    File,
    /// Not shown, and why.
    Opaque(String),
}

/// Paths that name the process's own stdin.
fn is_stdin_path(word: &str) -> bool {
    matches!(
        word,
        "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0" | "/proc/thread-self/fd/0"
    )
}

/// A script operand: stdin, a process substitution or descriptor (code from the line that
/// is not shown), or a file.
fn script_operand(word: &str) -> Source {
    if is_stdin_path(word) {
        Source::Stdin
    } else if word.starts_with("<(") || word.starts_with("/dev/fd/") || word.starts_with("/proc/") {
        Source::Opaque(format!(
            "reads code from `{word}`, which the line does not show"
        ))
    } else {
        Source::File
    }
}

/// The code a `source` stands for, judged in `lang`.
fn judge(language: &'static str, lang: Lang, source: Source, stdin: Option<&str>) -> Option<Code> {
    match source {
        Source::Given(pieces) => Some(Code::read(language, lang, &pieces.join("\n"))),
        Source::Stdin => Some(match stdin {
            Some(text) => Code::read(language, lang, text),
            None => Code::opaque(
                language,
                "",
                "reads code from stdin, which the line does not show",
            ),
        }),
        Source::File => None,
        Source::Opaque(why) => Some(Code::opaque(language, "", why)),
    }
}

/// The inline code of the segment `words` (its program and arguments), given the literal
/// text of its stdin when the line shows it (a here-document or here-string), if its
/// program runs code from its command line or stdin.
pub fn inline_code(words: &[String], stdin: Option<&str>) -> Option<Code> {
    let name = super::word::base_name(words.first()?);
    let args = &words[1..];
    if is_version_of(name, "python") || is_version_of(name, "pypy") {
        return python(args, stdin);
    }
    if is_version_of(name, "perl") {
        return perl(args, stdin);
    }
    if is_version_of(name, "lua") || name == "luajit" {
        return lua(args, stdin);
    }
    if is_version_of(name, "ruby") {
        return ruby(args, stdin);
    }
    if is_version_of(name, "php") {
        return php(args, stdin);
    }
    match name {
        "node" | "nodejs" | "bun" => node(args, stdin),
        "deno" => deno(args),
        "irb" => Some(Code::opaque("ruby", "", "irb reads ruby from stdin")),
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" | "original-awk" => awk(args, stdin),
        "sed" | "gsed" => sed(args, stdin),
        "fish" | "csh" | "tcsh" | "nu" | "xonsh" | "elvish" | "pwsh" | "zsh" | "ksh" | "mksh"
        | "yash" => other_shell(args),
        "tclsh" | "wish" | "expect" | "tclsh8.6" | "jimsh" => tcl(name, args),
        "sqlite3" | "sqlite" => sqlite(args, stdin),
        "ed" | "red" => {
            let text = stdin.unwrap_or("");
            let mut code = Code::opaque(
                "ed",
                text,
                "ed runs the commands on its stdin (`!` runs a shell, `w` writes)",
            );
            code.words.extend(shell_words(text, &["!"]));
            Some(code)
        }
        "vim" | "vi" | "nvim" | "view" | "ex" | "vimdiff" | "rvim" | "gvim" | "vim.tiny"
        | "vim.basic" | "vim.nox" => vim(name, args),
        "emacs" | "emacs-nox" | "emacsclient" => emacs(args),
        "dc" => dc(args, stdin),
        "zip" => zip(args),
        "npm" | "npx" | "pnpm" | "yarn" => npm_exec(name, args),
        "make" | "gmake" | "bmake" => make(args),
        "rg" => option_runs("rg", args, "pre", 3),
        "ag" => option_runs("ag", args, "pager", 3),
        "socat" => socat(args),
        _ => evaluating_builtin(name, args),
    }
}

/// Builtins that evaluate text as code (P8: judged alike in every mode): `let` and
/// `declare -i` evaluate arithmetic, whose array subscripts run `$(...)`; `declare -n`
/// makes a name a reference; `printf -v`, `read`, `test -v` with a subscript;
/// `mapfile -C`, `compgen -C`/`-F`/`-W`, `fc` run strings; `${x@P}` expands a prompt; a
/// shell's `--rcfile`/`--init-file` from the line.
fn evaluating_builtin(name: &str, args: &[String]) -> Option<Code> {
    let subscript = |w: &String| w.contains('[');
    let why: Option<&str> = match name {
        "let" => args
            .iter()
            .any(|a| {
                !a.bytes()
                    .all(|b| b.is_ascii_digit() || b"+-*/%() ".contains(&b))
            })
            .then_some("`let` evaluates arithmetic, whose subscripts run commands"),
        "declare" | "typeset" | "local" | "export" | "readonly" => args
            .iter()
            .take_while(|a| a.starts_with('-') || a.starts_with('+'))
            .any(|a| a.contains('i') || a.contains('n'))
            .then_some("`declare -i`/`-n` evaluates or references what it is given"),
        "printf" => (args.first().is_some_and(|a| a == "-v") && args.get(1).is_some_and(subscript))
            .then_some("`printf -v` into a subscript evaluates it"),
        "read" | "mapfile" | "readarray" | "compgen" | "complete" | "fc" | "test" | "[" | "[[" => {
            let flagged = match name {
                "read" => args.iter().any(subscript),
                "test" | "[" | "[[" => args.iter().any(|a| a == "-v") && args.iter().any(subscript),
                "mapfile" | "readarray" => {
                    args.iter().any(|a| a.starts_with("-C") || a.contains('['))
                }
                "compgen" | "complete" => args
                    .iter()
                    .any(|a| a.starts_with("-C") || a.starts_with("-F") || a.starts_with("-W")),
                _ => true,
            };
            flagged.then_some("the builtin evaluates a string it is given")
        }
        "bash" | "sh" | "dash" | "rbash" => args
            .iter()
            .any(|a| a.starts_with("--rcfile") || a.starts_with("--init-file"))
            .then_some("the shell reads a startup file the line names"),
        _ => None,
    };
    let why = why.or_else(|| {
        args.iter()
            .any(|a| a.contains("@P}") || a.contains("@E}"))
            .then_some("`${x@P}` expands a prompt, which runs what the value holds")
    })?;
    Some(Code::opaque("bash builtin", &args.join(" "), why))
}

/// Whether `name` is a program this file reads (its code is P8's, so P3b's safety net for
/// unknown programs leaves its arguments alone: `sed 's/rm -f/rm -rf/'` is a script, not a
/// command line).
pub fn is_interpreter(name: &str) -> bool {
    ["python", "pypy", "perl", "lua", "ruby", "php"]
        .iter()
        .any(|b| is_version_of(name, b))
        || matches!(
            name,
            "node"
                | "nodejs"
                | "bun"
                | "deno"
                | "irb"
                | "luajit"
                | "awk"
                | "gawk"
                | "mawk"
                | "nawk"
                | "busybox-awk"
                | "original-awk"
                | "sed"
                | "gsed"
                | "fish"
                | "csh"
                | "tcsh"
                | "nu"
                | "xonsh"
                | "elvish"
                | "pwsh"
                | "tclsh"
                | "wish"
                | "expect"
                | "sqlite3"
                | "ed"
                | "red"
                | "dc"
        )
}

/// `python3`, `python3.12`, `perl5.36`, `lua5.4` are versions of `python`, `perl`, `lua`.
fn is_version_of(name: &str, base: &str) -> bool {
    name.strip_prefix(base)
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

fn unreadable(language: &'static str, e: argv::ArgvError) -> Option<Code> {
    Some(Code::opaque(
        language,
        "",
        format!("its options cannot be read ({e}), so where its code is is not known"),
    ))
}

// ---------------------------------------------------------------- python

/// CPython 3's options (`python3 --help`); `-c` and `-m` end the options.
const PYTHON: Grammar = Grammar::stopping(&[
    short('b', No),
    short('B', No),
    short('d', No),
    short('E', No),
    both('h', "help", No),
    short('i', No),
    short('I', No),
    short('O', No),
    short('P', No),
    short('q', No),
    short('s', No),
    short('S', No),
    short('u', No),
    short('v', No),
    both('V', "version", No),
    short('x', No),
    short('R', No),
    short('c', Last),
    short('m', Last),
    short('W', Required),
    short('X', Required),
    long("check-hash-based-pycs", Required),
    long("help-env", No),
    long("help-xoptions", No),
    long("help-all", No),
]);

/// Modules of the standard library that run code given as their arguments.
const PYTHON_CODE_MODULES: &[&str] = &[
    "timeit", "pdb", "cProfile", "profile", "trace", "code", "IPython", "doctest",
];

fn python(args: &[String], stdin: Option<&str>) -> Option<Code> {
    let parsed = match argv::parse(&PYTHON, args) {
        Ok(p) => p,
        Err(e) => return unreadable("python", e),
    };
    let interactive = parsed.has("i");
    let source = if let Some(code) = parsed.value("c") {
        Source::Given(vec![code.to_owned()])
    } else if let Some(module) = parsed.value("m") {
        if PYTHON_CODE_MODULES.contains(&module) {
            let rest: Vec<&str> = parsed
                .operands
                .iter()
                .filter_map(|&i| args.get(i))
                .map(String::as_str)
                .collect();
            return Some(Code::opaque(
                "python",
                &rest.join(" "),
                format!("`-m {module}` runs code given as its arguments"),
            ));
        } else {
            Source::File
        }
    } else {
        match parsed.operands.first().and_then(|&i| args.get(i)) {
            Some(script) => script_operand(script),
            None => Source::Stdin,
        }
    };
    let code = judge("python", Lang::Python, source, stdin);
    if interactive
        && !matches!(
            code,
            Some(Code {
                reading: Reading::Opaque(_),
                ..
            })
        )
    {
        // `-i` reads more code from stdin after the script.
        let more = judge("python", Lang::Python, Source::Stdin, stdin);
        return more.filter(|m| !m.is_harmless()).or(code);
    }
    code
}

// ---------------------------------------------------------------- perl

/// What one switch letter of perl or ruby does with what follows it. Both read their
/// switches letter by letter (ruby's `proc_options` follows perl's `moreswitches`), so
/// one reader ([`read_switches`]) serves both, each language giving its letters.
enum Switch {
    /// Stands alone: the next letter is another switch.
    Flag,
    /// Its value is code: the rest of the word, or the next word (`-e`).
    Code,
    /// Takes the rest of the word, or the next word when none is left (`-I dir`).
    Value,
    /// Takes the rest of the word, if any (`-i.bak`).
    RestOfWord,
    /// Takes the run of following bytes it accepts (`-l0`, `-0777`, `-CSD`).
    Run(fn(u8) -> bool),
    /// Reads the rest of the word itself (perl's `-M`): code to add, or the text and why
    /// it is not shown harmless.
    Own(fn(&str) -> Result<String, (String, String)>),
    /// Makes the code unknown (`perl -d` reads debugger commands).
    Opaque(&'static str),
    /// Not known here: the real program may do anything with it.
    Unknown,
}

/// What [`read_switches`] found: the code given on the line, and the first operand.
struct Switches<'a> {
    code: Vec<String>,
    script: Option<&'a String>,
}

/// Reads perl's or ruby's switches: `letter` says what each does, `long` whether a
/// `--name` takes a value (`Some(true)`), stands alone (`Some(false)`), or is not known.
fn read_switches<'a>(
    language: &'static str,
    args: &'a [String],
    letter: impl Fn(u8) -> Switch,
    long: impl Fn(&str) -> Option<bool>,
) -> Result<Switches<'a>, Code> {
    let mut found = Switches {
        code: Vec::new(),
        script: None,
    };
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        if word == "--" {
            found.script = args.get(i);
            break;
        }
        if let Some(name) = word.strip_prefix("--") {
            let (name, attached) = name
                .split_once('=')
                .map_or((name, None), |(n, v)| (n, Some(v)));
            match long(name) {
                Some(true) if attached.is_none() => i += 1,
                Some(_) => {}
                None => {
                    return Err(Code::opaque(
                        language,
                        "",
                        format!("{language}'s option `--{name}` is not known here"),
                    ));
                }
            }
            continue;
        }
        let Some(cluster) = word.strip_prefix('-').filter(|c| !c.is_empty()) else {
            found.script = Some(word);
            break;
        };
        let bytes = cluster.as_bytes();
        let mut k = 0;
        while k < bytes.len() {
            let c = bytes[k];
            k += 1;
            let rest = &cluster[k..];
            match letter(c) {
                Switch::Flag => {}
                Switch::Code => {
                    if !rest.is_empty() {
                        found.code.push(rest.to_owned());
                    } else if let Some(next) = args.get(i) {
                        found.code.push(next.clone());
                        i += 1;
                    } else {
                        return Err(Code::opaque(language, "", "`-e` without its code"));
                    }
                    break;
                }
                Switch::Value => {
                    if rest.is_empty() {
                        i += 1;
                    }
                    break;
                }
                Switch::RestOfWord => break,
                Switch::Run(more) => {
                    while k < bytes.len() && more(bytes[k]) {
                        k += 1;
                    }
                }
                Switch::Own(read) => {
                    match read(rest) {
                        Ok(code) => found.code.push(code),
                        Err((text, why)) => return Err(Code::opaque(language, &text, why)),
                    }
                    break;
                }
                Switch::Opaque(why) => return Err(Code::opaque(language, "", why)),
                Switch::Unknown => {
                    return Err(Code::opaque(
                        language,
                        "",
                        format!("{language}'s switch `-{}` is not known here", c as char),
                    ));
                }
            }
        }
    }
    Ok(found)
}

/// The code of `found`, or its script operand, or stdin.
fn switches_source(found: Switches) -> Source {
    if !found.code.is_empty() {
        Source::Given(found.code)
    } else {
        match found.script {
            Some(s) => script_operand(s),
            None => Source::Stdin,
        }
    }
}

/// Perl's switches, read as perl.c's `moreswitches` does: letter by letter, each deciding
/// how much of the rest of the word (or the next word) is its value. `--help` and
/// `--version` are read by perl as `-h` and `-v`; any other `--name` it refuses.
fn perl(args: &[String], stdin: Option<&str>) -> Option<Code> {
    let letter = |c: u8| match c {
        b'a' | b'c' | b'n' | b'p' | b's' | b'S' | b't' | b'T' | b'u' | b'U' | b'w' | b'W'
        | b'X' | b'h' | b'v' | b'f' => Switch::Flag,
        b'e' | b'E' => Switch::Code,
        b'M' | b'm' => Switch::Own(perl_module),
        b'I' => Switch::Value,
        // Rest of the word: -i[ext], -x[dir], -D[flags], -F[pattern], -V[:var].
        b'i' | b'x' | b'D' | b'F' | b'V' => Switch::RestOfWord,
        b'd' => Switch::Opaque("`-d` runs a debugger reading commands"),
        b'l' => Switch::Run(|b| b.is_ascii_digit()),
        b'0' => Switch::Run(|b| b.is_ascii_hexdigit() || b == b'x'),
        b'C' => Switch::Run(|b| b.is_ascii_digit() || b"IOEioSDALa".contains(&b)),
        _ => Switch::Unknown,
    };
    let long = |name: &str| ["help", "version"].contains(&name).then_some(false);
    match read_switches("perl", args, letter, long) {
        Ok(found) => judge("perl", Lang::Perl, switches_source(found), stdin),
        Err(code) => Some(code),
    }
}

/// `-MFoo=a,b` is `use Foo split(/,/, q{a,b})`; anything else in the word is perl code
/// after `use Foo`, which is not shown harmless.
fn perl_module(rest: &str) -> Result<String, (String, String)> {
    if rest.is_empty() || rest == "-" {
        return Err((String::new(), "`-M` without a module".into()));
    }
    let module = rest.strip_prefix('-').unwrap_or(rest);
    let (name, list) = module.split_once('=').unwrap_or((module, ""));
    let plain = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
        && list
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b',' || b == b':');
    if plain {
        Ok(format!("use {name};"))
    } else {
        Err((
            module.to_owned(),
            format!("`-M{module}` is perl code, not only a module name"),
        ))
    }
}

// ---------------------------------------------------------------- node

/// node's options that matter here, and the ones that take a value (node refuses an
/// option it does not have, and so does this reading: the code is then not shown).
const NODE: Grammar = Grammar::stopping(&[
    both('e', "eval", Required),
    both('p', "print", No),
    both('r', "require", Required),
    long("import", Required),
    long("loader", Required),
    long("experimental-loader", Required),
    both('i', "interactive", No),
    both('c', "check", No),
    both('v', "version", No),
    both('h', "help", No),
    both('C', "conditions", Required),
    long("input-type", Required),
    long("title", Required),
    long("env-file", Required),
    long("env-file-if-exists", Required),
    long("max-old-space-size", Required),
    long("stack-size", Required),
    long("stack-trace-limit", Required),
    long("unhandled-rejections", Required),
    long("disable-warning", Required),
    long("inspect", Optional),
    long("inspect-brk", Optional),
    long("no-warnings", No),
    long("no-deprecation", No),
    long("trace-warnings", No),
    long("trace-deprecation", No),
    long("trace-uncaught", No),
    long("throw-deprecation", No),
    long("pending-deprecation", No),
    long("enable-source-maps", No),
    long("preserve-symlinks", No),
    long("abort-on-uncaught-exception", No),
    long("experimental-vm-modules", No),
    long("experimental-strip-types", No),
    long("no-experimental-strip-types", No),
    long("experimental-default-type", Required),
    long("frozen-intrinsics", No),
    long("use-strict", No),
    long("expose-gc", No),
    long("test", No),
]);

fn node(args: &[String], stdin: Option<&str>) -> Option<Code> {
    let parsed = match argv::parse(&NODE, args) {
        Ok(p) => p,
        Err(e) => return unreadable("javascript", e),
    };
    for given in &parsed.options {
        if given.option.is("require")
            || given.option.is("import")
            || given.option.is("loader")
            || given.option.is("experimental-loader")
        {
            let module = given.value.as_deref().unwrap_or("");
            if module.starts_with("data:") || module.contains(':') && !module.starts_with("node:") {
                return Some(Code::opaque(
                    "javascript",
                    module,
                    format!(
                        "`--{}` of `{module}` is code given as a module",
                        given.option.key()
                    ),
                ));
            }
        }
    }
    let codes: Vec<String> = parsed
        .options
        .iter()
        .filter(|g| g.option.is("eval"))
        .filter_map(|g| g.value.clone())
        .collect();
    let first = parsed.operands.first().and_then(|&i| args.get(i));
    let source = if !codes.is_empty() {
        Source::Given(codes)
    } else if parsed.has("print") {
        match first {
            Some(code) => Source::Given(vec![code.clone()]),
            None => Source::Stdin,
        }
    } else if parsed.has("check") || parsed.has("version") || parsed.has("help") {
        return None;
    } else {
        match first {
            Some(script) => script_operand(script),
            None => Source::Stdin,
        }
    };
    let code = judge("javascript", Lang::JavaScript, source, stdin);
    if parsed.has("interactive") {
        let more = judge("javascript", Lang::JavaScript, Source::Stdin, stdin);
        return more.filter(|m| !m.is_harmless()).or(code);
    }
    code
}

/// `deno eval CODE`; `deno run` of a file is out of reach.
fn deno(args: &[String]) -> Option<Code> {
    match args {
        [sub, code] if sub == "eval" => Some(Code::read("javascript", Lang::JavaScript, code)),
        [sub, ..] if sub == "eval" || sub == "repl" => Some(Code::opaque(
            "javascript",
            &args.join(" "),
            "deno eval with options",
        )),
        _ => None,
    }
}

// ---------------------------------------------------------------- ruby, php, lua

/// Ruby's switches (ruby.c `proc_options`): letters clustered like perl's, and long
/// options of its own.
fn ruby(args: &[String], stdin: Option<&str>) -> Option<Code> {
    const LONG_FLAGS: &[&str] = &[
        "version",
        "verbose",
        "help",
        "copyright",
        "yjit",
        "jit",
        "disable-gems",
        "enable-gems",
        "disable-all",
        "enable-all",
    ];
    const LONG_VALUES: &[&str] = &[
        "encoding",
        "external-encoding",
        "internal-encoding",
        "disable",
        "enable",
        "dump",
        "backtrace-limit",
        "crash-report",
    ];
    let letter = |c: u8| match c {
        b'a' | b'c' | b'd' | b'h' | b'l' | b'n' | b'p' | b's' | b'S' | b'v' | b'w' | b'y'
        | b'U' => Switch::Flag,
        b'e' => Switch::Code,
        b'r' | b'I' | b'E' | b'C' | b'X' => Switch::Value,
        b'0' => Switch::Run(|b| b.is_ascii_digit()),
        b'W' | b'T' | b'F' | b'x' | b'K' => Switch::RestOfWord,
        _ => Switch::Unknown,
    };
    let long = |name: &str| {
        if LONG_FLAGS.contains(&name) || name.starts_with("yjit-") || name.starts_with("jit-") {
            Some(false)
        } else {
            LONG_VALUES.contains(&name).then_some(true)
        }
    };
    match read_switches("ruby", args, letter, long) {
        Ok(found) => judge("ruby", Lang::Ruby, switches_source(found), stdin),
        Err(code) => Some(code),
    }
}

/// php-cli's options (`php -h`).
const PHP: Grammar = Grammar::stopping(&[
    both('a', "interactive", No),
    both('c', "php-ini", Required),
    both('n', "no-php-ini", No),
    both('d', "define", Required),
    both('e', "profile-info", No),
    both('f', "file", Required),
    both('h', "help", No),
    both('i', "info", No),
    both('l', "syntax-check", No),
    both('m', "modules", No),
    both('r', "run", Required),
    both('B', "process-begin", Required),
    both('R', "process-code", Required),
    both('F', "process-file", Required),
    both('E', "process-end", Required),
    both('H', "hide-args", No),
    both('q', "no-header", No),
    both('s', "syntax-highlight", No),
    both('S', "server", Required),
    both('t', "docroot", Required),
    both('v', "version", No),
    both('w', "strip", No),
    both('z', "zend-extension", Required),
    long("ini", No),
    long("rf", Required),
    long("rc", Required),
    long("re", Required),
    long("rz", Required),
    long("ri", Required),
]);

fn php(args: &[String], stdin: Option<&str>) -> Option<Code> {
    let parsed = match argv::parse(&PHP, args) {
        Ok(p) => p,
        Err(e) => return unreadable("php", e),
    };
    for given in &parsed.options {
        if given.option.is("define") {
            let setting = given.value.as_deref().unwrap_or("");
            let key = setting.split('=').next().unwrap_or("").trim();
            if matches!(
                key,
                "auto_prepend_file" | "auto_append_file" | "allow_url_include"
            ) {
                return Some(Code::opaque(
                    "php",
                    setting,
                    format!("`-d {key}` loads code"),
                ));
            }
        }
        if given.option.is("server") || given.option.is("zend-extension") {
            return Some(Code::opaque(
                "php",
                "",
                "php runs a server or loads an extension",
            ));
        }
    }
    let codes: Vec<String> = parsed
        .options
        .iter()
        .filter(|g| {
            ["run", "process-begin", "process-code", "process-end"]
                .iter()
                .any(|k| g.option.is(k))
        })
        .filter_map(|g| g.value.clone())
        .collect();
    let source = if !codes.is_empty() {
        Source::Given(codes)
    } else if parsed.has("interactive") {
        Source::Stdin
    } else if let Some(file) = parsed.value("file").or(parsed.value("process-file")) {
        script_operand(file)
    } else if parsed.has("info")
        || parsed.has("version")
        || parsed.has("modules")
        || parsed.has("help")
        || parsed.has("ini")
    {
        return None;
    } else {
        match parsed.operands.first().and_then(|&i| args.get(i)) {
            Some(s) => script_operand(s),
            None => Source::Stdin,
        }
    };
    match (source, stdin) {
        // A script on stdin is a php file: its code follows `<?php`.
        (Source::Stdin, Some(text)) => {
            let text = text.trim_start();
            let body = text.strip_prefix("<?php").unwrap_or(text);
            let body = body.trim_end().strip_suffix("?>").unwrap_or(body);
            Some(Code::read("php", Lang::Php, body))
        }
        (source, stdin) => judge("php", Lang::Php, source, stdin),
    }
}

/// lua's options (`lua -h`): `-e stat`, `-l mod`, `-i`, `-v`, `-E`, `-W`, `-` for stdin.
const LUA: Grammar = Grammar::stopping(&[
    short('e', Required),
    short('l', Required),
    short('i', No),
    short('v', No),
    short('E', No),
    short('W', No),
]);

fn lua(args: &[String], stdin: Option<&str>) -> Option<Code> {
    let parsed = match argv::parse(&LUA, args) {
        Ok(p) => p,
        Err(e) => return unreadable("lua", e),
    };
    let codes: Vec<String> = parsed
        .options
        .iter()
        .filter(|g| g.option.is("e"))
        .filter_map(|g| g.value.clone())
        .collect();
    let first = parsed.operands.first().and_then(|&i| args.get(i));
    // `-e` runs before a script; without either lua reads stdin (unless only `-v`).
    let given = (!codes.is_empty()).then(|| Code::read("lua", Lang::Lua, &codes.join("\n")));
    let script = match first {
        Some(script) => judge("lua", Lang::Lua, script_operand(script), stdin),
        None if codes.is_empty() && !parsed.has("v") => {
            judge("lua", Lang::Lua, Source::Stdin, stdin)
        }
        None => None,
    };
    let interactive = parsed
        .has("i")
        .then(|| judge("lua", Lang::Lua, Source::Stdin, stdin))
        .flatten();
    let all: Vec<Code> = [given, script, interactive].into_iter().flatten().collect();
    all.iter()
        .find(|c| !c.is_harmless())
        .or(all.first())
        .cloned()
}

// ---------------------------------------------------------------- awk, sed

/// gawk's options (a superset of mawk's and POSIX awk's); the program is the first operand
/// unless `-f`/`-e` give it.
const AWK: Grammar = Grammar::stopping(&[
    both('f', "file", Required),
    both('F', "field-separator", Required),
    both('v', "assign", Required),
    both('b', "characters-as-bytes", No),
    both('c', "traditional", No),
    both('C', "copyright", No),
    both('d', "dump-variables", Optional),
    both('D', "debug", Optional),
    both('e', "source", Required),
    both('E', "exec", Required),
    both('g', "gen-pot", No),
    both('h', "help", No),
    both('i', "include", Required),
    both('I', "trace", No),
    both('k', "csv", No),
    both('l', "load", Required),
    both('L', "lint", Optional),
    both('M', "bignum", No),
    both('N', "use-lc-numeric", No),
    both('n', "non-decimal-data", No),
    both('o', "pretty-print", Optional),
    both('O', "optimize", No),
    both('p', "profile", Optional),
    both('P', "posix", No),
    both('r', "re-interval", No),
    both('s', "no-optimize", No),
    both('S', "sandbox", No),
    both('t', "lint-old", No),
    both('V', "version", No),
    short('W', Required),
]);

fn awk(args: &[String], stdin: Option<&str>) -> Option<Code> {
    let parsed = match argv::parse(&AWK, args) {
        Ok(p) => p,
        Err(e) => return unreadable("awk", e),
    };
    for given in &parsed.options {
        let key = given.option.key();
        match key.as_str() {
            "dump-variables" | "pretty-print" | "profile" => {
                return Some(Code::opaque("awk", "", format!("`--{key}` writes a file")));
            }
            "debug" | "load" => {
                return Some(Code::opaque(
                    "awk",
                    "",
                    format!("`--{key}` runs what the line does not show"),
                ));
            }
            "W" => {
                let value = given.value.as_deref().unwrap_or("");
                let known = [
                    "version",
                    "dump",
                    "interactive",
                    "posix_space",
                    "usage",
                    "help",
                    "traditional",
                    "posix",
                    "lint",
                ];
                if !(known.contains(&value)
                    || value.starts_with("sprintf=")
                    || value.starts_with("random="))
                {
                    return Some(Code::opaque(
                        "awk",
                        value,
                        format!("`-W {value}` is not known here"),
                    ));
                }
            }
            _ => {}
        }
    }
    let mut program = Vec::new();
    let mut files = Vec::new();
    for given in &parsed.options {
        let value = given.value.clone().unwrap_or_default();
        if given.option.is("source") {
            program.push(value);
        } else if given.option.is("file") || given.option.is("exec") || given.option.is("include") {
            files.push(value);
        }
    }
    if program.is_empty() && files.is_empty() {
        if parsed.has("version") || parsed.has("help") || parsed.has("copyright") {
            return None;
        }
        let first = parsed.operands.first().and_then(|&i| args.get(i))?;
        program.push(first.clone());
    }
    let mut code = (!program.is_empty()).then(|| Code::read("awk", Lang::Awk, &program.join("\n")));
    for file in files {
        if let Some(more) = judge("awk", Lang::Awk, script_operand(&file), stdin)
            && (code.as_ref().is_none_or(Code::is_harmless))
        {
            code = Some(more);
        }
    }
    code
}

/// GNU sed's options (`sed --help`).
const SED: Grammar = Grammar::permuting(&[
    both('n', "quiet", No),
    argv::alias("silent", "quiet", No),
    long("debug", No),
    both('e', "expression", Required),
    both('f', "file", Required),
    long("follow-symlinks", No),
    both('i', "in-place", Optional),
    both('l', "line-length", Required),
    long("posix", No),
    both('E', "regexp-extended", No),
    short('r', No),
    both('s', "separate", No),
    long("sandbox", No),
    both('u', "unbuffered", No),
    both('z', "null-data", No),
    both('b', "binary", No),
    long("help", No),
    long("version", No),
]);

/// `sed [OPTIONS] SCRIPT [FILE...]` or with `-e`/`-f`. Harmless: a script that neither
/// executes (`e`, `s///e`) nor writes a file (`w`, `W`, `s///w`, other than to
/// /dev/stdout or /dev/stderr); `-i` edits the files the line names, which the line shows.
fn sed(args: &[String], stdin: Option<&str>) -> Option<Code> {
    let parsed = match argv::parse(&SED, args) {
        Ok(p) => p,
        Err(e) => return unreadable("sed", e),
    };
    let mut scripts: Vec<String> = Vec::new();
    let mut from_files = false;
    for given in &parsed.options {
        let value = given.value.clone().unwrap_or_default();
        if given.option.is("expression") {
            scripts.push(value);
        } else if given.option.is("file") {
            from_files = true;
            match script_operand(&value) {
                Source::Stdin => match stdin {
                    Some(text) => scripts.push(text.to_owned()),
                    None => {
                        return Some(Code::opaque(
                            "sed",
                            "",
                            "reads its script from stdin, which the line does not show",
                        ));
                    }
                },
                Source::Opaque(why) => return Some(Code::opaque("sed", &value, why)),
                _ => {}
            }
        }
    }
    if scripts.is_empty() && !from_files {
        if parsed.has("help") || parsed.has("version") {
            return None;
        }
        let first = parsed.operands.first().and_then(|&i| args.get(i))?;
        scripts.push(first.clone());
    }
    if scripts.is_empty() {
        return None;
    }
    let mut runs = Vec::new();
    let mut why = None;
    for script in &scripts {
        match sed_executes(script) {
            Some(found) => {
                if found.executes {
                    why.get_or_insert("the sed script executes a command (`e`)");
                } else if found.writes {
                    why.get_or_insert("the sed script writes a file (`w`)");
                }
                runs.extend(found.commands);
            }
            None => {
                why.get_or_insert("the sed script cannot be read");
                runs.push(script.clone());
            }
        }
    }
    Some(match why {
        None => Code::new("sed", &scripts.join("\n"), Reading::Harmless),
        Some(why) => Code::opaque("sed", &runs.join("\n"), why),
    })
}

// ---------------------------------------------------------------- programs that run strings

/// Shells whose syntax is not bash's: their `-c` string (or stdin) is not read, only its
/// words are looked at.
fn other_shell(args: &[String]) -> Option<Code> {
    let text = args.join(" ");
    let script = args.iter().find(|a| !a.starts_with('-'));
    if args
        .iter()
        .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('c'))
        || args
            .iter()
            .any(|a| a == "--command" || a.starts_with("--command="))
        || script.is_none()
    {
        return Some(Code::opaque(
            "shell",
            &text,
            "a shell whose syntax the judge does not read",
        ));
    }
    None
}

fn tcl(name: &str, args: &[String]) -> Option<Code> {
    let script = args.iter().find(|a| !a.starts_with('-'));
    if name == "expect" && args.iter().any(|a| a.starts_with("-c"))
        || script.is_none_or(|s| is_stdin_path(s))
    {
        return Some(Code::opaque(
            "tcl",
            &args.join(" "),
            "tcl code (its `exec` runs programs), which the judge does not read",
        ));
    }
    None
}

/// sqlite3's shell: the arguments after the database are SQL or dot-commands (`.shell`,
/// `.system`, `.output` run or write); `-cmd` adds one; without any it reads stdin.
fn sqlite(args: &[String], stdin: Option<&str>) -> Option<Code> {
    const WITH_VALUE: &[&str] = &[
        "cmd",
        "init",
        "separator",
        "newline",
        "nullvalue",
        "mmap",
        "lookaside",
        "pagecache",
        "heap",
        "maxsize",
        "vfs",
        "escape",
        "ascii_",
        "A",
    ];
    let mut commands = Vec::new();
    let mut db_seen = false;
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        if let Some(opt) = word
            .strip_prefix("--")
            .or_else(|| word.strip_prefix('-'))
            .filter(|_| word.len() > 1 && !db_seen)
        {
            if opt == "A" || opt.starts_with('A') {
                return Some(Code::opaque(
                    "sqlite3",
                    &args.join(" "),
                    "sqlite3 -A works on archives",
                ));
            }
            if opt == "init" {
                return Some(Code::opaque(
                    "sqlite3",
                    &args.join(" "),
                    "sqlite3 -init runs a file",
                ));
            }
            if WITH_VALUE.contains(&opt) {
                if opt == "cmd" {
                    commands.extend(args.get(i).cloned());
                }
                i += 1;
            }
            continue;
        }
        if !db_seen {
            db_seen = true;
            continue;
        }
        commands.push(word.clone());
    }
    if commands.is_empty() {
        match stdin {
            Some(text) => commands.push(text.to_owned()),
            None => {
                return Some(Code::opaque(
                    "sqlite3",
                    "",
                    "sqlite3 reads commands from stdin, which the line does not show",
                ));
            }
        }
    }
    let text = commands.join("\n");
    Some(match sqlite_harmless(&text) {
        Ok(()) => Code::new("sqlite3", &text, Reading::Harmless),
        Err(why) => {
            let mut code = Code::opaque("sqlite3", &text, why);
            code.words
                .extend(shell_words(&text, &[".shell", ".system"]));
            code
        }
    })
}

/// The words of the command lines a program hands to a shell (sqlite3's `.shell CMD`,
/// ed's `!CMD`), read as the shell will read them: `r''m` is `rm`.
fn shell_words(text: &str, prefixes: &[&str]) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            prefixes.iter().find_map(|p| line.strip_prefix(p))
        })
        .filter_map(|command| super::shell::segments(command).ok())
        .flatten()
        .flat_map(|segment| segment.words)
        .collect()
}

/// Read-only dot-commands and `SELECT`s calling only functions that read.
fn sqlite_harmless(text: &str) -> Result<(), String> {
    const DOT: &[&str] = &[
        "tables",
        "schema",
        "headers",
        "header",
        "mode",
        "indexes",
        "indices",
        "databases",
        "dbinfo",
        "help",
        "show",
        "width",
        "nullvalue",
        "separator",
        "timer",
        "print",
        "fullschema",
    ];
    const FUNCS: &[&str] = &[
        "count",
        "sum",
        "avg",
        "min",
        "max",
        "total",
        "length",
        "lower",
        "upper",
        "substr",
        "coalesce",
        "ifnull",
        "abs",
        "round",
        "typeof",
        "json_extract",
        "json",
        "date",
        "datetime",
        "time",
        "strftime",
        "julianday",
        "group_concat",
        "trim",
        "ltrim",
        "rtrim",
        "replace",
        "instr",
        "hex",
        "quote",
        "sqlite_version",
        "printf",
        "format",
        "nullif",
        "iif",
        "unicode",
        "char",
        "random",
        "like",
        "glob",
        "cast",
        "exists",
        "in",
    ];
    for line in text.lines() {
        let line = line.trim();
        if let Some(dot) = line.strip_prefix('.') {
            let command = dot.split_whitespace().next().unwrap_or("");
            if !DOT.contains(&command) {
                return Err(format!(
                    "the sqlite3 command `.{command}` is not on the list of harmless ones"
                ));
            }
            continue;
        }
        for statement in line.split(';') {
            let lower = statement.trim().to_ascii_lowercase();
            if lower.is_empty() {
                continue;
            }
            let first = lower.split_whitespace().next().unwrap_or("");
            if !matches!(first, "select" | "values" | "explain") {
                return Err(format!("the sql statement `{first}` may write"));
            }
            let bytes = lower.as_bytes();
            for (k, b) in bytes.iter().enumerate() {
                if *b != b'(' {
                    continue;
                }
                let before = lower[..k].trim_end();
                let name: String = before
                    .chars()
                    .rev()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                if !name.is_empty()
                    && !FUNCS.contains(&name.as_str())
                    && !matches!(
                        name.as_str(),
                        "select" | "from" | "where" | "and" | "or" | "not" | "values" | "as" | "on"
                    )
                {
                    return Err(format!(
                        "the sql function `{name}` is not on the list of harmless ones"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// vim and its names: `-c CMD`, `+CMD`, `--cmd CMD` run ex commands (`!` runs a shell,
/// `:w` writes); `-e`/`-E`/`-es` and `ex` read ex commands from stdin; `-s FILE` reads
/// keys from a file. None of it is read: it is opaque.
fn vim(name: &str, args: &[String]) -> Option<Code> {
    let mut commands = Vec::new();
    let mut ex_mode = name == "ex";
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        if word == "--" {
            break;
        }
        if word == "-c" || word == "--cmd" || word == "-S" || word == "-s" || word == "-u" {
            commands.extend(args.get(i).cloned());
            i += 1;
        } else if let Some(command) = word.strip_prefix('+') {
            if !command.is_empty()
                && !command.bytes().all(|b| b.is_ascii_digit())
                && !command.starts_with('/')
            {
                commands.push(command.to_owned());
            }
        } else if word.starts_with('-')
            && !word.starts_with("--")
            && (word.contains('e') || word.contains('E') || word.contains('s'))
        {
            ex_mode = true;
        }
    }
    if commands.is_empty() && !ex_mode {
        return None;
    }
    let text = commands.join("\n");
    Some(Code::opaque(
        "vim",
        &text,
        "vim runs ex commands (`!` runs a shell, `w` writes), which the judge does not read",
    ))
}

fn emacs(args: &[String]) -> Option<Code> {
    let mut text = Vec::new();
    let mut found = false;
    for (k, word) in args.iter().enumerate() {
        let name = word.trim_start_matches('-');
        let (name, attached) = name
            .split_once('=')
            .map_or((name, None), |(n, v)| (n, Some(v)));
        let runs = word.starts_with('-')
            && (name.len() >= 2
                && ["eval", "execute", "funcall", "load", "script", "batch"]
                    .iter()
                    .any(|f| f.starts_with(name))
                || matches!(name, "f" | "l" | "x"));
        if runs {
            found = true;
            text.extend(
                attached
                    .map(str::to_owned)
                    .or_else(|| args.get(k + 1).cloned()),
            );
        }
    }
    found.then(|| {
        Code::opaque(
            "elisp",
            &text.join(" "),
            "emacs runs lisp (`shell-command`), which the judge does not read",
        )
    })
}

/// `dc -e EXPR` / `--expression=EXPR` / stdin: `!` runs the rest of the line in a shell.
fn dc(args: &[String], stdin: Option<&str>) -> Option<Code> {
    let mut code = Vec::new();
    let mut files = false;
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        if word == "-e" || word == "--expression" || word == "-f" || word == "--file" {
            let value = args.get(i).cloned().unwrap_or_default();
            i += 1;
            if word.contains('e') && !word.contains("fi") {
                code.push(value);
            } else {
                match script_operand(&value) {
                    Source::File => files = true,
                    Source::Stdin => code.extend(stdin.map(str::to_owned).or(Some("!".into()))),
                    _ => code.push("!".into()),
                }
            }
        } else if let Some(v) = word
            .strip_prefix("--expression=")
            .or(word.strip_prefix("-e").filter(|v| !v.is_empty()))
        {
            code.push(v.to_owned());
        } else if !word.starts_with('-') {
            files = true;
        }
    }
    if code.is_empty() {
        if files {
            return None;
        }
        code.extend(stdin.map(str::to_owned).or(Some("!".into())));
    }
    let text = code.join("\n");
    Some(if text.contains('!') {
        Code::opaque(
            "dc",
            &text,
            "dc's `!` runs a shell command (or its code is not shown)",
        )
    } else {
        Code::new("dc", &text, Reading::Harmless)
    })
}

fn zip(args: &[String]) -> Option<Code> {
    args.iter().enumerate().find_map(|(k, word)| {
        let value = if word == "-TT"
            || argv::is_long_option(word, "unzip-command", 3) && !word.contains('=')
        {
            args.get(k + 1).cloned()
        } else if let Some(v) = word.strip_prefix("-TT").filter(|v| !v.is_empty()) {
            Some(v.to_owned())
        } else if argv::is_long_option(word, "unzip-command", 3) {
            word.split_once('=').map(|(_, v)| v.to_owned())
        } else {
            None
        }?;
        Some(Code::opaque("zip", &value, "`zip -TT` runs a command line"))
    })
}

/// `npm exec -c CMD`, `npx -c CMD`, `--call=CMD`: a command line run by a shell.
fn npm_exec(name: &str, args: &[String]) -> Option<Code> {
    let execs = name == "npx"
        || args
            .first()
            .is_some_and(|s| matches!(s.as_str(), "exec" | "x" | "dlx"));
    if !execs {
        return None;
    }
    args.iter().enumerate().find_map(|(k, word)| {
        let value = if word == "-c" || word == "--call" {
            args.get(k + 1).cloned()
        } else {
            word.strip_prefix("--call=").map(str::to_owned)
        }?;
        Some(Code::opaque(
            "npm",
            &value,
            format!("`{name} -c` runs a command line"),
        ))
    })
}

/// `make --eval=TEXT`/`-E TEXT` (make code, whose recipes run commands) and a makefile
/// read from stdin (`-f -`).
fn make(args: &[String]) -> Option<Code> {
    args.iter().enumerate().find_map(|(k, word)| {
        let next = || args.get(k + 1).cloned().unwrap_or_default();
        if word == "-E" || word == "--eval" {
            return Some(Code::opaque("make", &next(), "make code given on the line"));
        }
        if let Some(v) = word
            .strip_prefix("--eval=")
            .or(word.strip_prefix("-E").filter(|v| !v.is_empty()))
        {
            return Some(Code::opaque("make", v, "make code given on the line"));
        }
        let file = if matches!(word.as_str(), "-f" | "--file" | "--makefile") {
            Some(next())
        } else {
            word.strip_prefix("--file=")
                .or(word.strip_prefix("--makefile="))
                .or(word.strip_prefix("-f").filter(|v| !v.is_empty()))
                .map(str::to_owned)
        }?;
        match script_operand(&file) {
            Source::File => None,
            _ => Some(Code::opaque(
                "make",
                &file,
                "a makefile from stdin or the line, which is not read",
            )),
        }
    })
}

/// `rg --pre CMD`, `ag --pager CMD`: a program the tool runs. `min` is the shortest
/// prefix the program takes for the long option.
fn option_runs(program: &'static str, args: &[String], option: &str, min: usize) -> Option<Code> {
    args.iter().enumerate().find_map(|(k, word)| {
        if !argv::is_long_option(word, option, min) {
            return None;
        }
        let value = match word.split_once('=') {
            Some((_, v)) => v.to_owned(),
            None => args.get(k + 1).cloned().unwrap_or_default(),
        };
        Some(Code::opaque(
            program,
            &value,
            format!("`{program} --{option}` runs `{value}`"),
        ))
    })
}

/// socat's `EXEC:` and `SYSTEM:` addresses run a program or a shell command.
fn socat(args: &[String]) -> Option<Code> {
    args.iter().find_map(|word| {
        let lower = word.to_ascii_lowercase();
        let at = lower.find("exec:").or_else(|| lower.find("system:"))?;
        let value = word[at..].split_once(':').map_or("", |(_, v)| v);
        Some(Code::opaque(
            "socat",
            value,
            "a socat address that runs a command",
        ))
    })
}

/// The words of a piece of code (see [`Code::words`]).
pub fn code_words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || "_.+/-$".contains(c)))
        .map(|w| w.trim_matches('.'))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What a sed script executes: whether it has an `e` command or an `s///e`, and the text
/// of the commands it names (the `e` command's argument, the replacement of an `s///e`).
struct SedRuns {
    executes: bool,
    /// It writes a file (`w`, `W`, `s///w`) other than /dev/stdout or /dev/stderr.
    writes: bool,
    commands: Vec<String>,
}

/// Reads a sed script command by command (addresses, `s` and `y` with their delimiters,
/// the text of `a`/`i`/`c`, labels and file names up to the end of the line). `None` when
/// the script does not read as sed.
fn sed_executes(script: &str) -> Option<SedRuns> {
    let chars: Vec<char> = script.chars().collect();
    let mut out = SedRuns {
        executes: false,
        writes: false,
        commands: Vec::new(),
    };
    let mut i = 0;
    let to_line_end = |i: &mut usize| -> String {
        let start = *i;
        while *i < chars.len() && chars[*i] != '\n' {
            *i += 1;
        }
        chars[start..*i].iter().collect()
    };
    // One delimited part (`/re/`): returns its text, escapes kept.
    let delimited = |i: &mut usize, delim: char| -> Option<String> {
        let mut text = String::new();
        while *i < chars.len() {
            let c = chars[*i];
            *i += 1;
            if c == '\\' {
                text.push(c);
                text.push(*chars.get(*i)?);
                *i += 1;
            } else if c == delim {
                return Some(text);
            } else {
                text.push(c);
            }
        }
        None
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() || c == ';' || c == '}' || c == '{' || c == '!' {
            i += 1;
            continue;
        }
        // Addresses: numbers, `$`, `first~step`, `/re/`, `\cREc`, `,`, `+N`, `~N`, and
        // the `I`/`M` flags after a regex.
        if c.is_ascii_digit() || c == '$' || c == ',' || c == '~' || c == '+' {
            i += 1;
            continue;
        }
        if c == '/' || c == '\\' {
            i += 1;
            let delim = if c == '\\' {
                let d = *chars.get(i)?;
                i += 1;
                d
            } else {
                '/'
            };
            delimited(&mut i, delim)?;
            while i < chars.len() && (chars[i] == 'I' || chars[i] == 'M') {
                i += 1;
            }
            continue;
        }
        i += 1;
        match c {
            's' => {
                let delim = *chars.get(i)?;
                i += 1;
                delimited(&mut i, delim)?;
                let replacement = delimited(&mut i, delim)?;
                let mut flags = String::new();
                while i < chars.len() && !matches!(chars[i], ';' | '\n' | '}') {
                    // `w FILE` takes the rest of the line.
                    if chars[i] == 'w' {
                        i += 1;
                        out.writes |= !is_std_stream(to_line_end(&mut i).trim());
                        break;
                    }
                    flags.push(chars[i]);
                    i += 1;
                }
                if flags.contains('e') {
                    out.executes = true;
                    out.commands.push(replacement);
                }
            }
            'y' => {
                let delim = *chars.get(i)?;
                i += 1;
                delimited(&mut i, delim)?;
                delimited(&mut i, delim)?;
            }
            'e' => {
                out.executes = true;
                out.commands.push(to_line_end(&mut i));
            }
            'w' | 'W' => out.writes |= !is_std_stream(to_line_end(&mut i).trim()),
            'a' | 'i' | 'c' | 'r' | 'R' | 'b' | 't' | 'T' | ':' | 'q' | 'Q' | 'l' | 'L' | 'v' => {
                // Text, a file name, a label or a number: up to the end of the line (GNU sed
                // ends a label at `;` too, which only makes this skip less).
                if matches!(c, 'b' | 't' | 'T' | 'q' | 'Q' | 'l' | 'L' | 'v' | ':') {
                    while i < chars.len() && !matches!(chars[i], ';' | '\n' | '}') {
                        i += 1;
                    }
                } else {
                    to_line_end(&mut i);
                }
            }
            '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z' | 'F'
            | '#' => {
                if c == '#' {
                    to_line_end(&mut i);
                }
            }
            _ => return None,
        }
    }
    Some(out)
}

/// sed's names for its own output, which `w` may write without writing a file.
fn is_std_stream(file: &str) -> bool {
    matches!(file, "/dev/stdout" | "/dev/stderr")
}
#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &[&str]) -> Option<Code> {
        let words: Vec<String> = line.iter().map(|w| w.to_string()).collect();
        inline_code(&words, None)
    }

    fn fed(line: &[&str], stdin: &str) -> Option<Code> {
        let words: Vec<String> = line.iter().map(|w| w.to_string()).collect();
        inline_code(&words, Some(stdin))
    }

    fn harmless(c: Option<Code>) -> bool {
        c.is_some_and(|c| c.is_harmless())
    }

    fn opaque(c: Option<Code>) -> bool {
        c.is_some_and(|c| !c.is_harmless())
    }

    #[test]
    fn p8_interpreter_options_are_read_as_the_real_programs_read_them() {
        // Clusters, values, long forms: the code is found wherever the program finds it.
        assert!(opaque(code(&[
            "node",
            "-pe",
            "require('child_process').execSync('rm c')"
        ])));
        assert!(opaque(code(&[
            "node",
            "--title",
            "t",
            "-e",
            "require('child_process')"
        ])));
        assert!(opaque(code(&[
            "node",
            "--import",
            "data:text/javascript,1",
            "-e",
            "1"
        ])));
        assert!(harmless(code(&["node", "-p", "process.version"])));
        assert!(harmless(code(&["node", "-e", "console.log(1)", "x"])));
        assert!(opaque(code(&[
            "python3",
            "-m",
            "timeit",
            "__import__('os').system('rm c')"
        ])));
        assert!(code(&["python3", "-m", "pytest", "-q"]).is_none());
        assert!(harmless(code(&["python3", "-Ic", "print(1)", "-v"])));
        assert!(code(&["python3", "x.py", "-c", "rm"]).is_none());
        assert!(opaque(code(&["perl", "-C", "-e", "system q(rm c)"])));
        assert!(opaque(code(&[
            "perl",
            "-Mstrict;system q(rm c)",
            "-e",
            "1"
        ])));
        assert!(harmless(code(&[
            "perl",
            "-MList::Util=sum",
            "-le",
            "print sum(1,2)"
        ])));
        assert!(harmless(code(&["perl", "-lne", "print if /x/", "f"])));
        assert!(harmless(code(&["perl", "-0777", "-pe", "s/a/b/g", "f"])));
        assert!(opaque(code(&[
            "ruby",
            "--encoding",
            "UTF-8",
            "-e",
            "system('rm c')"
        ])));
        assert!(opaque(code(&["php", "--run", "system('rm c');"])));
        assert!(opaque(code(&["php", "-B", "system('rm c');", "-R", "1;"])));
        assert!(opaque(code(&["lua5.4", "-e", "os.execute('rm c')"])));
        assert!(harmless(code(&["lua5.4", "-e", "print(1)"])));
        // An option the program does not have: where the code is cannot be known.
        assert!(opaque(code(&["node", "--no-such-option", "-e", "1"])));
    }

    #[test]
    fn p8_code_on_stdin_is_code() {
        assert!(opaque(fed(&["perl"], "system('rm c')")));
        assert!(harmless(fed(&["perl"], "print 1")));
        assert!(opaque(code(&["python3"])));
        assert!(opaque(code(&["python3", "-"])));
        assert!(harmless(fed(&["python3", "-"], "print(1)")));
        assert!(opaque(fed(
            &["python3", "/dev/stdin"],
            "import os; os.system('rm c')"
        )));
        assert!(opaque(code(&["node"])));
        assert!(opaque(code(&["lua", "-"])));
        assert!(opaque(code(&["awk", "-f", "/dev/stdin"])));
        assert!(opaque(code(&["sed", "-f", "<(echo 1e rm c)"])));
        assert!(opaque(fed(&["php"], "<?php system('rm c');")));
        assert!(opaque(code(&["make", "-f", "-"])));
        assert!(opaque(code(&["sqlite3", ":memory:"])));
        assert!(opaque(code(&["ed", "f"])));
        assert!(opaque(code(&["vim", "-es"])));
        assert!(opaque(code(&["tclsh"])));
        // A script file is the project's code: out of reach, not read.
        assert!(code(&["perl", "x.pl"]).is_none());
        assert!(code(&["awk", "-f", "prog.awk", "x"]).is_none());
    }

    #[test]
    fn p8_awk_and_sed_are_shown_harmless_or_not() {
        assert!(harmless(code(&[
            "awk",
            "BEGIN{FS=\"|\"} {print $2}",
            "data.psv"
        ])));
        assert!(harmless(code(&["awk", "-F:", "{print $1}", "/etc/passwd"])));
        assert!(opaque(code(&["awk", "BEGIN{system(\"rm x\")}"])));
        assert!(opaque(code(&[
            "awk",
            "-v",
            "x=1",
            "{x = 4/2; print c | s; y = 1/2}"
        ])));
        assert!(opaque(code(&["awk", "--dump-variables=/tmp/x", "1"])));
        assert!(harmless(code(&["sed", "s/a/b/g", "f"])));
        assert!(harmless(code(&["sed", "-i", "-e", "s/rm -f/rm -rf/", "f"])));
        assert!(opaque(code(&["sed", "--expr=1e rm c", "f"])));
        let c = code(&["sed", "s/.*/rm x/e", "f"]).unwrap();
        assert!(
            !c.is_harmless() && c.words.contains(&"rm".to_owned()),
            "{c:?}"
        );
        assert!(opaque(code(&["sed", "-E", "s/(a|b)+/x/w out", "f"])));
        assert!(harmless(code(&["sed", "-n", "w /dev/stdout", "f"])));
        assert!(harmless(code(&["sed", "s|/usr|/opt|; s/e/E/2", "f"])));
    }

    #[test]
    fn p8_programs_that_run_strings() {
        let c = code(&["sqlite3", ":memory:", ".shell r''m c"]).unwrap();
        assert!(!c.is_harmless() && c.words.contains(&"rm".to_owned()));
        assert!(harmless(code(&["sqlite3", "db", "select count(*) from t"])));
        assert!(opaque(code(&[
            "sqlite3",
            "db",
            "select writefile('c', 'x')"
        ])));
        assert!(opaque(code(&["vim", "-c", "!rm c", "-c", "q"])));
        assert!(code(&["vim", "+12", "f"]).is_none());
        assert!(opaque(code(&[
            "emacs",
            "--batch",
            "--ev",
            "(shell-command \"rm c\")"
        ])));
        assert!(opaque(code(&["dc", "-e", "!rm c"])));
        assert!(opaque(code(&["zip", "-T", "-TT", "rm c", "x.zip", "f"])));
        assert!(opaque(code(&["npm", "exec", "-c", "rm c"])));
        assert!(code(&["npm", "test"]).is_none());
        assert!(opaque(code(&["make", "--eval=x: ; rm c", "x"])));
        assert!(opaque(code(&["rg", "--pre=rm", "x", "c"])));
        assert!(opaque(code(&["ag", "--pager", "rm c", "x"])));
        assert!(opaque(code(&["socat", "-", "SYSTEM:rm c"])));
    }
}
