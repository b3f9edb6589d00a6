//! The rows of programs that run strings they are given (shells other than bash, tclsh,
//! sqlite3, vim, emacs, dc, zip -TT, npm exec -c, make --eval, rg --pre, ag --pager, socat):
//! each finds the string and says it is opaque, with the words a deny rule may name in it.

use super::{Code, Reading, Source, is_stdin_path, script_operand};
use crate::policy::argv;

// ---------------------------------------------------------------- programs that run strings

/// Shells whose syntax is not bash's: their `-c` string (or stdin) is not read, only its
/// words are looked at.
pub(super) fn other_shell(args: &[String]) -> Option<Code> {
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

pub(super) fn tcl(name: &str, args: &[String]) -> Option<Code> {
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

/// Programs that run the code of their script operand, or of stdin without one, in a
/// language the judge does not read (issue 41): `erb` runs the ruby of a template, `jshell`
/// java. A file of the project is out of reach (P8); code from stdin or a descriptor is on
/// the line, and opaque, its words still read for a deny rule's. `with_value` lists the
/// options that take the next word.
pub(super) fn unread_language(
    language: &'static str,
    why: &str,
    with_value: &[&str],
    args: &[String],
    stdin: Option<&str>,
) -> Option<Code> {
    let mut operand = None;
    let mut at = 0;
    while let Some(arg) = args.get(at) {
        if arg == "--" {
            operand = args.get(at + 1);
            break;
        }
        if !arg.starts_with('-') || arg == "-" {
            operand = Some(arg);
            break;
        }
        // Its value is the next word (`-r json`, `--startup FILE`), unless attached.
        at += if with_value.contains(&arg.as_str()) {
            2
        } else {
            1
        };
    }
    match operand.map(|o| script_operand(o)) {
        Some(Source::File | Source::Script(_)) => None,
        Some(Source::Opaque(from)) => Some(Code::opaque(language, "", format!("{why}; it {from}"))),
        _ => Some(Code::opaque(language, stdin.unwrap_or(""), why)),
    }
}

/// sqlite3's shell: the arguments after the database are SQL or dot-commands (`.shell`,
/// `.system`, `.output` run or write); `-cmd` adds one; without any it reads stdin.
pub(super) fn sqlite(args: &[String], stdin: Option<&str>) -> Option<Code> {
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
pub(super) fn shell_words(text: &str, prefixes: &[&str]) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            prefixes.iter().find_map(|p| line.strip_prefix(p))
        })
        .filter_map(|command| crate::policy::shell::segments(command).ok())
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
pub(super) fn vim(name: &str, args: &[String]) -> Option<Code> {
    let mut commands = Vec::new();
    // Files of ex commands (`-S`, `-s`, `-u`): never shown harmless.
    let mut files = Vec::new();
    let mut ex_mode = name == "ex";
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        if word == "--" {
            break;
        }
        if word == "-c" || word == "--cmd" {
            commands.extend(args.get(i).cloned());
            i += 1;
        } else if word == "-S" || word == "-s" || word == "-u" {
            files.extend(args.get(i).cloned());
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
    // Issue 41: ex commands that only move the cursor or change the mode run nothing
    // (`GIT_EDITOR='vim -c startinsert'`). An allowlist; a file given with `-S`, `-s` or
    // `-u` is never on it.
    const MOVES_ONLY: &[&str] = &[
        "startinsert",
        "startinsert!",
        "startreplace",
        "stopinsert",
        "$",
    ];
    commands.retain(|c| !MOVES_ONLY.contains(&c.trim()));
    commands.extend(files);
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

pub(super) fn emacs(args: &[String]) -> Option<Code> {
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
pub(super) fn dc(args: &[String], stdin: Option<&str>) -> Option<Code> {
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
                    Source::File | Source::Script(_) => files = true,
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

pub(super) fn zip(args: &[String]) -> Option<Code> {
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
pub(super) fn npm_exec(name: &str, args: &[String]) -> Option<Code> {
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
pub(super) fn make(args: &[String]) -> Option<Code> {
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
            Source::File | Source::Script(_) => None,
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
pub(super) fn option_runs(
    program: &'static str,
    args: &[String],
    option: &str,
    min: usize,
) -> Option<Code> {
    // After `--` every word is an operand (getopt_long).
    let options = args.iter().position(|w| w == "--").unwrap_or(args.len());
    args[..options].iter().enumerate().find_map(|(k, word)| {
        if word == super::UNKNOWN_OPTION {
            return Some(Code::opaque(
                program,
                "",
                format!(
                    "`{program}` may read a word known only when the line runs as `--{option}`"
                ),
            ));
        }
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
pub(super) fn socat(args: &[String]) -> Option<Code> {
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
