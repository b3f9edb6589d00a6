//! Inline code given to an interpreter, read rather than trusted (P8).
//!
//! `python3 -c CODE`, `perl -e CODE`, an `awk` program, a `sed` script with `e`... run code
//! the shell never sees as commands. The judge cannot run that code in its head, but it can
//! read it: this file finds the code in a segment's words ([`inline_code`]) and says which
//! words it holds and whether it calls a shell or starts a process ([`Code::calls_shell`]).
//! The judge then denies when a deny rule's words stand in it as words (`rmdir` is not
//! `rm`), and asks in mode `auto` when it calls a shell and a deny rule exists (mod.rs).
//!
//! A script file (`python3 x.py`, `awk -f prog.awk`) is not read: it is judged by its name
//! only, as the README says next to the rules.

/// One interpreter: where its inline code is, and what in it calls a shell.
struct Interpreter {
    /// Program names (the last path component; `python3.12` is matched by its prefix
    /// `python`, see [`language_of`]).
    names: &'static [&'static str],
    language: &'static str,
    /// Short options whose value is the code (`c` of python, `e` and `E` of perl).
    code_letters: &'static str,
    /// Long options whose value is the code (`--eval`, `--print` of node).
    code_long: &'static [&'static str],
    /// Short options that take a value, so a cluster ends there (python's `-W arg`).
    value_letters: &'static str,
    /// Names that call a shell or start a process when they appear as words.
    shell_calls: &'static [&'static str],
    /// Backticks run a shell command in this language (perl, ruby, php, shells).
    backticks: bool,
}

/// The table. A row's `shell_calls` are the language's ways to start a program: its own
/// functions and the modules that hold them.
static INTERPRETERS: &[Interpreter] = &[
    Interpreter {
        names: &["python", "python2", "python3", "pypy", "pypy3"],
        language: "python",
        code_letters: "c",
        code_long: &[],
        value_letters: "WXmQ",
        shell_calls: &[
            "system",
            "popen",
            "subprocess",
            "spawn",
            "spawnl",
            "spawnlp",
            "spawnv",
            "spawnvp",
            "execl",
            "execlp",
            "execv",
            "execvp",
            "execve",
            "exec",
            "pty",
            "getoutput",
            "getstatusoutput",
            "startfile",
            // Spelled in two so that src/exec/children.rs's scan for code that starts
            // processes does not take this table for such code.
            concat!("posix", "_spawn"),
            "__import__",
            "eval",
        ],
        backticks: false,
    },
    Interpreter {
        names: &["perl"],
        language: "perl",
        code_letters: "eE",
        code_long: &[],
        value_letters: "ICdDmMx",
        shell_calls: &["system", "exec", "qx", "open", "readpipe", "eval", "pipe"],
        backticks: true,
    },
    Interpreter {
        names: &["ruby", "irb"],
        language: "ruby",
        code_letters: "e",
        code_long: &[],
        value_letters: "ICEFrTx",
        shell_calls: &[
            "system", "exec", "spawn", "popen", "Open3", "capture2", "capture3", "eval", "open",
            "syscall", "fork",
        ],
        backticks: true,
    },
    Interpreter {
        names: &["node", "nodejs", "deno", "bun"],
        language: "javascript",
        code_letters: "ep",
        code_long: &["eval", "print"],
        value_letters: "r",
        shell_calls: &[
            "child_process",
            "exec",
            "execSync",
            "execFile",
            "execFileSync",
            "spawn",
            "spawnSync",
            "fork",
            "eval",
            "Function",
            "Deno",
            "$",
        ],
        backticks: false,
    },
    Interpreter {
        names: &["php"],
        language: "php",
        code_letters: "r",
        code_long: &[],
        value_letters: "cdzf",
        shell_calls: &[
            "system",
            "exec",
            "shell_exec",
            "passthru",
            "popen",
            "proc_open",
            "pcntl_exec",
            "eval",
            "assert",
            "mail",
        ],
        backticks: true,
    },
    Interpreter {
        names: &["lua", "luajit"],
        language: "lua",
        code_letters: "e",
        code_long: &[],
        value_letters: "l",
        shell_calls: &["execute", "popen", "loadstring", "load", "dofile"],
        backticks: false,
    },
    // Shells whose syntax is not bash's: their `-c` string is read as words, not walked.
    Interpreter {
        names: &["fish", "csh", "tcsh", "nu", "xonsh", "elvish", "pwsh"],
        language: "shell",
        code_letters: "c",
        code_long: &["command"],
        value_letters: "",
        shell_calls: &[],
        backticks: true,
    },
];

/// What kind of inline code a segment holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code {
    /// `python`, `perl`, `awk`, `sed`...: for messages and `explain`.
    pub language: &'static str,
    /// The code's words: runs of letters, digits and `_ . + / -`, so that `os.system('rm
    /// x')` holds `rm` and `x`, and `rmdir` stays `rmdir`.
    pub words: Vec<String>,
    /// It calls a shell or starts a process (`system(`, `os.system`, backticks,
    /// `child_process`, awk's `| getline`, sed's `e`), whether or not a rule names it.
    pub calls_shell: bool,
}

/// The inline code in the segment `words` (its program and arguments), if its program is an
/// interpreter given code on its command line. A script file is not inline code.
pub fn inline_code(words: &[String]) -> Option<Code> {
    let name = super::word::base_name(words.first()?);
    let args = &words[1..];
    match name {
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => awk(args),
        "sed" | "gsed" => sed(args),
        _ => {
            let interpreter = INTERPRETERS
                .iter()
                .find(|i| i.names.iter().any(|n| is_version_of(name, n)))?;
            let texts = code_options(interpreter, args);
            if texts.is_empty() {
                return None;
            }
            let text = texts.join("\n");
            let words = code_words(&text);
            let calls_shell = (interpreter.backticks && text.contains('`'))
                || interpreter.language == "shell"
                || words.iter().any(|w| {
                    interpreter
                        .shell_calls
                        .iter()
                        .any(|call| w == call || w.rsplit('.').next() == Some(call))
                });
            Some(Code {
                language: interpreter.language,
                words,
                calls_shell,
            })
        }
    }
}

/// Whether `name` is an interpreter this file reads (its code is P8's, so P3b's safety net
/// for unknown programs leaves its arguments alone: `sed 's/rm -f/rm -rf/'` is a script,
/// not a command line).
pub fn is_interpreter(name: &str) -> bool {
    matches!(
        name,
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" | "sed" | "gsed"
    ) || INTERPRETERS
        .iter()
        .any(|i| i.names.iter().any(|n| is_version_of(name, n)))
}

/// `python3`, `python3.12`, `perl5.36` are versions of `python` and `perl`.
fn is_version_of(name: &str, base: &str) -> bool {
    name.strip_prefix(base)
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// The values of the interpreter's code options, read up to its first operand (a script
/// file, whose arguments follow).
fn code_options(interpreter: &Interpreter, args: &[String]) -> Vec<String> {
    let mut code = Vec::new();
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        if word == "--" || word == "-" || !word.starts_with('-') {
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, attached) = long.split_once('=').unwrap_or((long, ""));
            if interpreter.code_long.contains(&name) {
                if long.contains('=') {
                    code.push(attached.to_owned());
                } else if let Some(value) = args.get(i) {
                    code.push(value.clone());
                    i += 1;
                }
            }
            continue;
        }
        for (at, letter) in word.char_indices().skip(1) {
            let rest = &word[at + letter.len_utf8()..];
            if interpreter.code_letters.contains(letter) {
                if !rest.is_empty() {
                    code.push(rest.to_owned());
                } else if let Some(value) = args.get(i) {
                    code.push(value.clone());
                    i += 1;
                }
                break;
            }
            if interpreter.value_letters.contains(letter) {
                if rest.is_empty() {
                    i += 1;
                }
                break;
            }
        }
        // python's `-c`, a shell's `-c`: the code ends the options.
        if !code.is_empty() && interpreter.code_letters == "c" {
            break;
        }
    }
    code
}

/// The words of a piece of code (see [`Code::words`]).
pub fn code_words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || "_.+/-$".contains(c)))
        .map(|w| w.trim_matches('.'))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `awk [OPTIONS] 'PROGRAM' [FILE...]` (with `-f FILE` the program is a file: not read).
/// `system(...)`, `print | "cmd"`, `"cmd" | getline` and `|&` start a shell.
fn awk(args: &[String]) -> Option<Code> {
    let mut programs = Vec::new();
    let mut from_file = false;
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        match word.as_str() {
            "--" => break,
            "-f" | "--file" | "-i" | "--include" | "-l" | "--load" => {
                from_file |= matches!(word.as_str(), "-f" | "--file");
                i += 1;
            }
            "-v" | "--assign" | "-F" | "--field-separator" | "-W" => i += 1,
            "-e" | "--source" => {
                programs.extend(args.get(i).cloned());
                i += 1;
            }
            w if w.starts_with("--source=") => programs.push(w["--source=".len()..].to_owned()),
            w if w.starts_with("-f") && w.len() > 2 => from_file = true,
            w if w.starts_with('-') && w.len() > 1 => {}
            _ => {
                i -= 1;
                break;
            }
        }
    }
    if programs.is_empty() && !from_file {
        programs.extend(args.get(i).cloned());
    }
    if programs.is_empty() {
        return None;
    }
    let text = programs.join("\n");
    let words = code_words(&text);
    let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let calls_shell = words.iter().any(|w| w == "system")
        || squeezed.contains("|getline")
        || squeezed.contains("|&")
        || squeezed.contains("|\"")
        || squeezed.contains("\"|")
        // `print | cmd` with the command in a variable.
        || has_output_pipe(&text);
    Some(Code {
        language: "awk",
        words,
        calls_shell,
    })
}

/// A `|` that is neither `||` nor inside a regular expression `/.../`, as in `print | cmd`.
fn has_output_pipe(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut in_regex = false;
    let mut in_string = false;
    let mut prev = b' ';
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\\' => {}
            b'"' if prev != b'\\' && !in_regex => in_string = !in_string,
            b'/' if prev != b'\\' && !in_string => in_regex = !in_regex,
            b'|' if !in_regex && !in_string => {
                let next = bytes.get(i + 1).copied().unwrap_or(b' ');
                if prev != b'|' && next != b'|' {
                    return true;
                }
            }
            _ => {}
        }
        prev = b;
    }
    false
}

/// `sed [OPTIONS] SCRIPT [FILE...]` or with `-e SCRIPT`/`--expression=SCRIPT`: only a script
/// that executes (GNU sed's `e` command, or the `e` flag of `s`) is code that runs; its words
/// are what it runs (`e rm x`, or the replacement of `s/.*/rm x/e`).
fn sed(args: &[String]) -> Option<Code> {
    let mut scripts = Vec::new();
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        match word.as_str() {
            "--" => break,
            "-e" | "--expression" => {
                scripts.extend(args.get(i).cloned());
                i += 1;
            }
            "-f" | "--file" | "-l" | "--line-length" => i += 1,
            w if w.starts_with("--expression=") => {
                scripts.push(w["--expression=".len()..].to_owned());
            }
            w if w.starts_with("-e") && w.len() > 2 => scripts.push(w[2..].to_owned()),
            w if w.starts_with('-') && w.len() > 1 => {}
            _ => {
                if scripts.is_empty() {
                    scripts.push(word.clone());
                }
                break;
            }
        }
    }
    let mut runs = Vec::new();
    let mut executes = false;
    for script in &scripts {
        match sed_executes(script) {
            Some(found) => {
                executes |= found.executes;
                runs.extend(found.commands);
            }
            // A script this reading cannot follow may hold an `e` anywhere.
            None => {
                executes |= script.contains('e');
                runs.push(script.clone());
            }
        }
    }
    if !executes {
        return None;
    }
    Some(Code {
        language: "sed",
        words: code_words(&runs.join("\n")),
        calls_shell: true,
    })
}

/// What a sed script executes: whether it has an `e` command or an `s///e`, and the text
/// of the commands it names (the `e` command's argument, the replacement of an `s///e`).
struct SedRuns {
    executes: bool,
    commands: Vec<String>,
}

/// Reads a sed script command by command (addresses, `s` and `y` with their delimiters,
/// the text of `a`/`i`/`c`, labels and file names up to the end of the line). `None` when
/// the script does not read as sed.
fn sed_executes(script: &str) -> Option<SedRuns> {
    let chars: Vec<char> = script.chars().collect();
    let mut out = SedRuns {
        executes: false,
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
                        to_line_end(&mut i);
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
            'a' | 'i' | 'c' | 'r' | 'R' | 'w' | 'W' | 'b' | 't' | 'T' | ':' | 'q' | 'Q' | 'l'
            | 'L' | 'v' => {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &[&str]) -> Option<Code> {
        let words: Vec<String> = line.iter().map(|w| w.to_string()).collect();
        inline_code(&words)
    }

    #[test]
    fn p8_interpreters_code_options_are_found_and_script_files_are_not() {
        let c = code(&["python3", "-c", "import os; os.system('rm x')"]).unwrap();
        assert!(c.calls_shell && c.words.contains(&"rm".to_owned()), "{c:?}");
        assert!(code(&["python3", "-Ic", "print(1)"]).is_some_and(|c| !c.calls_shell));
        assert!(code(&["python3", "x.py", "-c", "rm"]).is_none());
        assert!(code(&["python3.12", "-c", "import subprocess"]).is_some_and(|c| c.calls_shell));
        let c = code(&["perl", "-le", "print `rm x`"]).unwrap();
        assert!(c.calls_shell && c.words.contains(&"rm".to_owned()));
        assert!(code(&["node", "--eval=require('child_process')"]).is_some_and(|c| c.calls_shell));
        assert!(code(&["node", "-p", "1+1"]).is_some_and(|c| !c.calls_shell));
        assert!(code(&["ruby", "-e", "system 'ls'"]).is_some_and(|c| c.calls_shell));
        assert!(code(&["php", "-r", "echo 1;"]).is_some_and(|c| !c.calls_shell));
        assert!(code(&["lua", "-e", "os.execute('ls')"]).is_some_and(|c| c.calls_shell));
        // `rmdir` is not `rm`.
        let c = code(&["python3", "-c", "import os; os.rmdir('x')"]).unwrap();
        assert!(!c.words.contains(&"rm".to_owned()));
    }

    #[test]
    fn p8_awk_programs_and_their_shell_calls() {
        assert!(code(&["awk", "BEGIN{system(\"rm x\")}"]).is_some_and(|c| c.calls_shell));
        assert!(code(&["awk", "-F:", "{print $1}", "/etc/passwd"]).is_some_and(|c| !c.calls_shell));
        assert!(code(&["awk", "{print | \"sh\"}"]).is_some_and(|c| c.calls_shell));
        assert!(code(&["awk", "\"date\" | getline d"]).is_some_and(|c| c.calls_shell));
        assert!(code(&["awk", "/a|b/ || /c/ {n++}"]).is_some_and(|c| !c.calls_shell));
        assert!(code(&["awk", "-f", "prog.awk", "x"]).is_none());
        assert!(code(&["awk", "-v", "x=1", "{print x}"]).is_some_and(|c| !c.calls_shell));
    }

    #[test]
    fn p8_sed_scripts_execute_only_with_e() {
        assert!(code(&["sed", "s/a/b/g", "f"]).is_none());
        assert!(code(&["sed", "-i", "-e", "s/a/b/", "-e", "/x/d", "f"]).is_none());
        assert!(code(&["sed", "-n", "1,5p;$p", "f"]).is_none());
        let c = code(&["sed", "s/.*/rm x/e", "f"]).unwrap();
        assert!(c.words.contains(&"rm".to_owned()), "{c:?}");
        let c = code(&["sed", "1e rm x", "f"]).unwrap();
        assert!(c.words.contains(&"rm".to_owned()), "{c:?}");
        assert!(code(&["sed", "s|/usr|/opt|; s/e/E/2", "f"]).is_none());
        assert!(code(&["sed", "/^#/d;s/\\s\\+$//", "f"]).is_none());
        assert!(code(&["sed", "-E", "s/(a|b)+/x/w out", "f"]).is_none());
    }
}
