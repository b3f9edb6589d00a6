//! The handlers of the rows whose command only a function can find: `env -S`, `sudo`,
//! `flock -c`, `su -c`, shells, `eval`, `trap`, `find -exec`, `xargs`...

use super::grammars::{
    ENV, FAKEROOT, LTRACE, SETARCH, SSH_AGENT, STRACE_LONG_VALUES, STRACE_SHORT_VALUES, SUDO,
};
use super::{
    COMMAND_NOT_KNOWN, SCRIPT_NOT_KNOWN, Stdin, command_at, env_command, opaque, shell_reading,
};
use crate::policy::argv::{self, Arg, Grammar, Parsed};
use crate::policy::inner::InnerCommand;
use crate::policy::word::{Expansion, Piece, Word, env_assigned_name, note_assignment};

/// `env [OPTIONS] [-] [NAME=value]... [COMMAND...]`. `-S STRING` splits STRING into words
/// that take its place, and option parsing starts again over them (GNU env does exactly
/// this). Its splitting has escapes and `${VAR}` of its own; a string that uses them is not
/// split here but judged opaque.
pub(super) fn env(parsed: &Parsed, args: &[Word], _stdin: &Stdin) -> Vec<InnerCommand> {
    let mut parsed = parsed.clone();
    let mut args = args.to_vec();
    // Each round consumes one -S; the bound is the line's own length.
    for _ in 0..=args.len() {
        let Some(given) = parsed.options.iter().find(|g| g.option.is("split-string")) else {
            break;
        };
        let split = given.value.as_deref().filter(|_| given.value_known);
        let Some(words) = split.and_then(split_env_string) else {
            return vec![opaque(
                &args,
                "`env -S` with escapes or variables in its string".into(),
            )];
        };
        // GNU env puts the split words in place of the option and reads on from there.
        let rest = given.next;
        args = words
            .iter()
            .map(|w| Word::literal(w))
            .chain(args[rest..].iter().cloned())
            .collect();
        parsed = match argv::parse(&ENV, &args) {
            Ok(parsed) => parsed,
            Err(why) => return vec![opaque(&args, format!("`env`: {why}"))],
        };
    }
    let mut start = parsed.first_operand(args.len());
    // A lone `-` right after the options is `-i`.
    if args.get(start).is_some_and(|w| w.known() && w.text == "-") {
        start += 1;
    }
    command_at(&args, start, true)
}

/// `env -S`'s splitting for strings without escapes or variables: whitespace separates,
/// single and double quotes group, `#` at the start of a word ends the string.
pub(super) fn split_env_string(text: &str) -> Option<Vec<String>> {
    if text.contains(['\\', '$']) {
        return None;
    }
    let mut words = Vec::new();
    let mut current: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => current.get_or_insert_default().push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                current.get_or_insert_default();
            }
            None if c.is_whitespace() => words.extend(current.take()),
            None if c == '#' && current.is_none() => break,
            None => current.get_or_insert_default().push(c),
        }
    }
    if quote.is_some() {
        return None;
    }
    words.extend(current);
    Some(words)
}

/// `sudo [OPTIONS] [NAME=value]... [--] COMMAND...`: before `--`, a word with `=` that does
/// not start with `/` sets a variable and option reading goes on after it
/// (`sudo A=1 -u root rm`). With `-s` or `-i` the words are joined for the target user's
/// shell, escaped except for `$`, so a word that holds `$` is expanded over there.
pub(super) fn sudo(parsed: &Parsed, args: &[Word], stdin: &Stdin) -> Vec<InnerCommand> {
    let mut parsed = parsed.clone();
    let mut offset = 0;
    let mut risky_env = false;
    let mut assigned_env = Vec::new();
    let mut env_found = Vec::new();
    loop {
        let start = offset + parsed.first_operand(args.len() - offset);
        let after_dashes = start > 0 && args[start - 1].known() && args[start - 1].text == "--";
        let Some(word) = args.get(start) else {
            return vec![shell_reading(
                stdin,
                args,
                "`sudo` starts a shell that reads its commands from stdin",
            )];
        };
        if !word.known() {
            return vec![opaque(&args[start..], COMMAND_NOT_KNOWN.into())];
        }
        let assigned =
            env_assigned_name(&word.text).filter(|_| !after_dashes && !word.text.starts_with('/'));
        if assigned.is_some() {
            risky_env |= note_assignment(word, &mut assigned_env);
            env_found.extend(env_command(word));
            offset = start + 1;
            parsed = match argv::parse(&SUDO, &args[offset..]) {
                Ok(parsed) => parsed,
                Err(why) => return vec![opaque(args, format!("`sudo`: {why}"))],
            };
            continue;
        }
        if (parsed.has("shell") || parsed.has("login"))
            && args[start..].iter().any(|w| w.text.contains('$'))
        {
            return vec![opaque(
                &args[start..],
                "`sudo -s`/`-i` hands `$` to the target user's shell to expand".into(),
            )];
        }
        let mut found = vec![InnerCommand::Command {
            words: args[start..].to_vec(),
            risky_env,
            assigned: assigned_env,
        }];
        found.append(&mut env_found);
        return found;
    }
}

/// `flock [OPTIONS] FILE|DIR COMMAND [ARGS]`, `flock [OPTIONS] FILE|DIR -c COMMAND`, or
/// `flock [OPTIONS] FD` (runs nothing). `-c` is not an option: only the exact word `-c` or
/// `--command` right after FILE makes the next word a command line for the shell.
pub(super) fn flock(parsed: &Parsed, args: &[Word], _stdin: &Stdin) -> Vec<InnerCommand> {
    let start = parsed.first_operand(args.len()) + 1;
    match args.get(start) {
        Some(word) if word.known() && matches!(word.text.as_str(), "-c" | "--command") => {
            match args.get(start + 1) {
                Some(script) if script.known() => vec![InnerCommand::Script(script.text.clone())],
                Some(_) => vec![opaque(&args[start..], SCRIPT_NOT_KNOWN.into())],
                None => Vec::new(),
            }
        }
        _ => command_at(args, start, false),
    }
}

/// `su [OPTIONS] [-] [USER [ARGS...]]` and `runuser` (also `runuser -u USER COMMAND...`).
/// Without `-c` (handled by `script_in`), ARGS go to the user's shell, which then runs a
/// script file; with no ARGS the shell is interactive and reads stdin.
pub(super) fn su(parsed: &Parsed, args: &[Word], stdin: &Stdin) -> Vec<InnerCommand> {
    let mut operands: Vec<&Word> = parsed.operands.iter().map(|&i| &args[i]).collect();
    if parsed.has("user") {
        let Some(&first) = parsed.operands.first() else {
            return vec![shell_reading(
                stdin,
                args,
                "`runuser` starts a shell that reads its commands from stdin",
            )];
        };
        return command_at(args, first, false);
    }
    if operands.first().is_some_and(|w| w.text == "-") {
        operands.remove(0);
    }
    match operands.len() {
        0 | 1 => vec![shell_reading(
            stdin,
            args,
            "`su` starts a shell that reads its commands from stdin",
        )],
        _ => vec![opaque(
            args,
            "the user's shell runs a script named by its arguments".into(),
        )],
    }
}

/// `script [OPTIONS] [FILE]`: without `-c` it starts an interactive shell.
pub(super) fn script(_parsed: &Parsed, args: &[Word], stdin: &Stdin) -> Vec<InnerCommand> {
    vec![shell_reading(
        stdin,
        args,
        "`script` starts a shell that reads its commands from stdin",
    )]
}

/// `watch [OPTIONS] COMMAND...` joins the words and runs them with `sh -c`, or execs them
/// as they are with `-x`.
pub(super) fn watch(parsed: &Parsed, args: &[Word], _stdin: &Stdin) -> Vec<InnerCommand> {
    let start = parsed.first_operand(args.len());
    if parsed.has("exec") {
        return command_at(args, start, false);
    }
    join_script(&args[start..])
}

/// Words joined by spaces as one command line, when every word is known.
fn join_script(words: &[Word]) -> Vec<InnerCommand> {
    if words.is_empty() {
        Vec::new()
    } else if words.iter().any(|w| w.dynamic) {
        vec![opaque(words, SCRIPT_NOT_KNOWN.into())]
    } else {
        vec![InnerCommand::Script(
            words
                .iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        )]
    }
}

/// The command after options read with `grammar` (a private one: the program is not a
/// getopt_long program the grammar test can ask, or has too many options to list), or
/// what it runs without one.
fn after_options(
    grammar: &Grammar,
    name: &str,
    args: &[Word],
    stdin: &Stdin,
    shell_without_command: bool,
) -> Vec<InnerCommand> {
    let parsed = match argv::parse(grammar, args) {
        Ok(parsed) => parsed,
        Err(why) => return vec![opaque(args, format!("`{name}`: {why}"))],
    };
    let command = command_at(args, parsed.first_operand(args.len()), false);
    if command.is_empty() && shell_without_command {
        return vec![shell_reading(
            stdin,
            args,
            &format!("`{name}` starts a shell that reads its commands from stdin"),
        )];
    }
    command
}

/// `setarch ARCH [OPTIONS] [COMMAND [ARGS]]`: the architecture comes first, then options;
/// with no command it starts a shell.
pub(super) fn setarch(_parsed: &Parsed, args: &[Word], stdin: &Stdin) -> Vec<InnerCommand> {
    match args.first() {
        Some(arch) if !arch.known() => vec![opaque(args, COMMAND_NOT_KNOWN.into())],
        Some(arch) if arch.text.starts_with('-') => Vec::new(),
        Some(_) => {
            let rest = &args[1..];
            if argv::parse(&SETARCH, rest).is_ok_and(|p| p.has("list")) {
                return Vec::new();
            }
            after_options(&SETARCH, "setarch", rest, stdin, true)
        }
        None => Vec::new(),
    }
}

/// `busybox APPLET [ARGS]`, or one of its own words alone: `--list`, `--list-full` and
/// `--help` print and run nothing; `--install` makes links (a write, so opaque). It is
/// not getopt (held against the real busybox by tests/it/wrapper_grammars.rs's
/// runs): only those exact first words are its own, with no abbreviation and no
/// `=value`; any other first word, `-x` included, is the applet it runs.
pub(super) fn busybox(_parsed: &Parsed, args: &[Word], _stdin: &Stdin) -> Vec<InnerCommand> {
    match args.first() {
        None => Vec::new(),
        Some(first) if !first.known() => vec![opaque(args, COMMAND_NOT_KNOWN.into())],
        Some(first) if matches!(first.text.as_str(), "--list" | "--list-full" | "--help") => {
            Vec::new()
        }
        Some(first) if first.text == "--install" => vec![opaque(
            args,
            "busybox --install makes a link for every applet".into(),
        )],
        Some(_) => command_at(args, 0, false),
    }
}

/// `fakeroot [OPTIONS] [--] [COMMAND]`: with no command it starts `$SHELL`.
pub(super) fn fakeroot(_parsed: &Parsed, args: &[Word], stdin: &Stdin) -> Vec<InnerCommand> {
    after_options(&FAKEROOT, "fakeroot", args, stdin, true)
}

/// `ssh-agent [OPTIONS] [COMMAND [ARGS]]`: `-k` kills an agent and runs nothing; with no
/// command it prints the agent's variables.
pub(super) fn ssh_agent(_parsed: &Parsed, args: &[Word], stdin: &Stdin) -> Vec<InnerCommand> {
    if argv::parse(&SSH_AGENT, args).is_ok_and(|p| p.has("k")) {
        return Vec::new();
    }
    after_options(&SSH_AGENT, "ssh-agent", args, stdin, false)
}

/// `dbus-run-session [--config-file=F] [--dbus-daemon=BINARY] [--] PROGRAM [ARGS]`: its
/// own parsing, options only with `=`; BINARY is a program it runs too.
pub(super) fn dbus_run_session(
    _parsed: &Parsed,
    args: &[Word],
    _stdin: &Stdin,
) -> Vec<InnerCommand> {
    let mut found = Vec::new();
    let mut start = 0;
    while let Some(word) = args.get(start) {
        if !word.known() {
            return vec![opaque(&args[start..], COMMAND_NOT_KNOWN.into())];
        }
        if word.text == "--" {
            start += 1;
            break;
        }
        if let Some(daemon) = word.text.strip_prefix("--dbus-daemon=") {
            found.push(InnerCommand::through(
                "--dbus-daemon",
                InnerCommand::Command {
                    words: vec![Word::literal(daemon)],
                    risky_env: false,
                    assigned: Vec::new(),
                },
            ));
        } else if !word.text.starts_with("--") {
            break;
        }
        start += 1;
    }
    let mut command = command_at(args, start, false);
    command.append(&mut found);
    command
}

/// `strace [OPTIONS] COMMAND [ARGS]` (or `-p PID`, which runs nothing): options read with
/// [`STRACE_SHORT_VALUES`] and [`STRACE_LONG_VALUES`].
pub(super) fn strace(_parsed: &Parsed, args: &[Word], _stdin: &Stdin) -> Vec<InnerCommand> {
    let mut i = 0;
    let mut attaches = false;
    while let Some(word) = args.get(i) {
        if !word.known() {
            return vec![opaque(&args[i..], COMMAND_NOT_KNOWN.into())];
        }
        let text = word.text.as_str();
        if text == "--" {
            i += 1;
            break;
        }
        if !text.starts_with('-') || text == "-" {
            break;
        }
        i += 1;
        if let Some(long) = text.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or_default();
            attaches |= "attach".starts_with(name) && name.len() >= 2;
            if !long.contains('=')
                && STRACE_LONG_VALUES
                    .iter()
                    .any(|v| !name.is_empty() && v.starts_with(name))
            {
                i += 1;
            }
            continue;
        }
        for (at, letter) in text.char_indices().skip(1) {
            attaches |= letter == 'p';
            if STRACE_SHORT_VALUES.contains(letter) {
                if text[at + letter.len_utf8()..].is_empty() {
                    i += 1;
                }
                break;
            }
        }
    }
    let command = command_at(args, i, false);
    if command.is_empty() && attaches {
        return Vec::new();
    }
    command
}

/// `ltrace [OPTIONS] [--] COMMAND [ARGS]` (or `-p PID`).
pub(super) fn ltrace(_parsed: &Parsed, args: &[Word], stdin: &Stdin) -> Vec<InnerCommand> {
    after_options(&LTRACE, "ltrace", args, stdin, false)
}

/// `valgrind [OPTIONS] COMMAND [ARGS]`: its options are single words (`--tool=memcheck`,
/// `-q`, `-v`); the first word that is not one is the command.
pub(super) fn valgrind(_parsed: &Parsed, args: &[Word], _stdin: &Stdin) -> Vec<InnerCommand> {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        if !word.known() {
            return vec![opaque(&args[i..], COMMAND_NOT_KNOWN.into())];
        }
        if !word.text.starts_with('-') {
            break;
        }
        i += 1;
    }
    command_at(args, i, false)
}

/// `start-stop-daemon --start [OPTIONS] [-- ARGS]`: starts the program of `--startas`, else
/// of `--exec`, with ARGS. Without `--start` it stops, tests or checks: runs nothing.
pub(super) fn start_stop_daemon(
    _parsed: &Parsed,
    args: &[Word],
    _stdin: &Stdin,
) -> Vec<InnerCommand> {
    const VALUES: &[(char, &str)] = &[
        ('p', "pidfile"),
        ('x', "exec"),
        ('n', "name"),
        ('u', "user"),
        ('g', "group"),
        ('c', "chuid"),
        ('s', "signal"),
        ('a', "startas"),
        ('r', "chroot"),
        ('d', "chdir"),
        ('N', "nicelevel"),
        ('P', "procsched"),
        ('I', "iosched"),
        ('k', "umask"),
        ('O', "output"),
        ('R', "retry"),
    ];
    let mut start = false;
    let mut program: Option<Word> = None;
    let mut startas: Option<Word> = None;
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        if !word.known() {
            return vec![opaque(&args[i - 1..], COMMAND_NOT_KNOWN.into())];
        }
        let text = word.text.as_str();
        if text == "--" {
            break;
        }
        let (key, attached): (String, Option<String>) = if let Some(long) = text.strip_prefix("--")
        {
            let (name, value) = long
                .split_once('=')
                .map_or((long, None), |(n, v)| (n, Some(v)));
            let full = ["start", "pid", "ppid", "notify-timeout"]
                .iter()
                .chain(VALUES.iter().map(|(_, l)| l))
                .find(|l| !name.is_empty() && l.starts_with(name))
                .map_or(name.to_owned(), |l| (*l).to_owned());
            (full, value.map(str::to_owned))
        } else if let Some(cluster) = text.strip_prefix('-') {
            let mut chars = cluster.chars();
            let Some(letter) = chars.next() else { continue };
            let rest: String = chars.collect();
            let key = VALUES
                .iter()
                .find(|(s, _)| *s == letter)
                .map_or(letter.to_string(), |(_, l)| (*l).to_owned());
            (key, (!rest.is_empty()).then_some(rest))
        } else {
            continue;
        };
        let takes_value = VALUES.iter().any(|(_, l)| *l == key)
            || matches!(key.as_str(), "pid" | "ppid" | "notify-timeout");
        let value = if takes_value {
            attached.or_else(|| {
                i += 1;
                args.get(i - 1).map(|w| w.text.clone())
            })
        } else {
            None
        };
        match key.as_str() {
            "start" | "S" => start = true,
            "exec" => program = value.map(|v| Word::literal(&v)),
            "startas" => startas = value.map(|v| Word::literal(&v)),
            _ => {}
        }
    }
    match (start, startas.or(program)) {
        (true, Some(program)) => {
            let words: Vec<Word> = std::iter::once(program)
                .chain(args[i.min(args.len())..].iter().cloned())
                .collect();
            command_at(&words, 0, false)
        }
        _ => Vec::new(),
    }
}

/// `eval ARGS...` runs its arguments joined by spaces as a command line.
pub(super) fn eval(_parsed: &Parsed, args: &[Word], _stdin: &Stdin) -> Vec<InnerCommand> {
    let args = match args.first() {
        Some(first) if !first.dynamic && first.text == "--" => &args[1..],
        _ => args,
    };
    join_script(args)
}

/// `alias NAME=VALUE...`: each value is a command line's start, judged like one now (a
/// later use of the alias in the same line runs it).
pub(super) fn alias_values(_parsed: &Parsed, args: &[Word], _stdin: &Stdin) -> Vec<InnerCommand> {
    args.iter()
        .filter_map(|word| {
            let (_, value) = word.text.split_once('=')?;
            Some(if word.dynamic {
                opaque(
                    std::slice::from_ref(word),
                    "an alias whose value is known only when the line runs".into(),
                )
            } else {
                InnerCommand::Script(value.to_owned())
            })
        })
        .collect()
}

/// `source FILE` / `. FILE`: the file's commands cannot be seen from the line (P5).
pub(super) fn source(_parsed: &Parsed, args: &[Word], _stdin: &Stdin) -> Vec<InnerCommand> {
    vec![opaque(args, "it runs the commands of a file".into())]
}

/// `trap [-lpP] [[ACTION] SIGNAL...]`: ACTION is a command line the shell runs later, on the
/// signal or at exit, so it is judged now like `eval`'s. Only with two or more operands is
/// the first one an action: a lone operand resets that signal, and `-` or an empty action
/// resets or ignores the signals. Any option (`-p`, `-l`, `-P`, or an invalid one) makes
/// bash list or fail instead of setting anything. A word only known at run time, or a glob,
/// could become the action or shift the operands, so the action is then unknown.
pub(super) fn trap(_parsed: &Parsed, words: &[Word], _stdin: &Stdin) -> Vec<InnerCommand> {
    let mut operands = words;
    match operands.first() {
        Some(first) if first.dynamic || first.pattern => {
            return vec![opaque(
                operands,
                "a trap action known only at run time".into(),
            )];
        }
        Some(first) if first.text == "--" => operands = &operands[1..],
        Some(first) if first.text.len() > 1 && first.text.starts_with('-') => return Vec::new(),
        _ => {}
    }
    match operands {
        // Checked first: one such word can split or expand into an action and signals.
        [action, ..] if action.dynamic || action.pattern => {
            vec![opaque(
                operands,
                "a trap action known only at run time".into(),
            )]
        }
        [] | [_] => Vec::new(),
        [action, ..] if action.text.is_empty() || action.text == "-" => Vec::new(),
        [action, ..] => vec![InnerCommand::Script(action.text.clone())],
    }
}

/// `find ... -exec COMMAND... ;` (also `-execdir`, `-ok`, `-okdir`, and `+` as terminator).
pub(super) fn find(_parsed: &Parsed, words: &[Word], _stdin: &Stdin) -> Vec<InnerCommand> {
    let mut inner = Vec::new();
    let mut i = 0;
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
        // `{}` becomes a found path: a word holding it is only known when find runs.
        let command: Vec<Word> = words[start..i].iter().map(|w| filled_in(w, "{}")).collect();
        inner.extend(command_at(&command, 0, false));
        i += 1;
    }
    inner
}

/// find's tests whose value is a name, a pattern, a number or a time: data to find.
const FIND_DATA_VALUES: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-lname",
    "-ilname",
    "-regex",
    "-iregex",
    "-type",
    "-xtype",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-perm",
    "-size",
    "-newer",
    "-anewer",
    "-cnewer",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-maxdepth",
    "-mindepth",
    "-links",
    "-inum",
    "-samefile",
    "-fstype",
];

/// Whether find may run what its word `words[at]` holds when the judge cannot know it
/// (issue 41): anywhere in find's words it may be `-exec` or `-ok`, with the words after
/// it (or its own, split) as the command, unless it is the value of a test that takes data
/// and cannot split (`find . -name "$pattern"`; `-name $x` may be `-name a -o -exec ...`).
pub(super) fn find_may_run_from(words: &[String], at: usize, splits: bool) -> bool {
    at > 0
        && (splits
            || !words
                .get(at - 1)
                .is_some_and(|before| FIND_DATA_VALUES.contains(&before.as_str())))
}

/// `word`, made a word known only at run time when it holds `placeholder` (a value that
/// the wrapper fills in from its input).
fn filled_in(word: &Word, placeholder: &str) -> Word {
    let mut word = word.clone();
    word.dynamic |= word.text.contains(placeholder);
    word
}

/// `xargs [OPTIONS] [COMMAND [ARGS]]`: the command gets words read from stdin, appended
/// (one more word only known at run time: `xargs sh -c` takes its script from there), or
/// put in place of the replace string with `-I R` / `-i[R]` (default `{}`).
pub(super) fn xargs(parsed: &Parsed, args: &[Word], _stdin: &Stdin) -> Vec<InnerCommand> {
    let start = parsed.first_operand(args.len());
    let replace = parsed
        .options
        .iter()
        .rev()
        .find(|g| g.option.is("I") || g.option.is("replace"))
        .map(|g| g.value.clone().unwrap_or_else(|| "{}".to_owned()));
    let mut command: Vec<Word> = match &replace {
        Some(placeholder) if !placeholder.is_empty() => args[start..]
            .iter()
            .map(|w| filled_in(w, placeholder))
            .collect(),
        _ => args[start..].to_vec(),
    };
    if command.is_empty() {
        return Vec::new();
    }
    if replace.is_none() {
        // Issue 41: a value the line chooses (what it pipes in), which the judge cannot know.
        let text = "<words read from stdin>";
        command.push(Word {
            text: text.into(),
            dynamic: true,
            pattern: false,
            pieces: vec![Piece::Expansion {
                source: text.into(),
                kind: Expansion::Piped,
                quoted: true,
            }],
        });
    }
    command_at(&command, 0, false)
}

/// `sg [-] [GROUP [-c] COMMAND]`: COMMAND is a command line for `/bin/sh -c`.
pub(super) fn sg(_parsed: &Parsed, args: &[Word], stdin: &Stdin) -> Vec<InnerCommand> {
    let mut rest = args;
    if rest.first().is_some_and(|w| w.text == "-") {
        rest = &rest[1..];
    }
    match rest {
        [] | [_] => vec![shell_reading(
            stdin,
            args,
            "`sg` starts a shell that reads its commands from stdin",
        )],
        [_, flag, script] if flag.text == "-c" => join_script(std::slice::from_ref(script)),
        [_, script] => join_script(std::slice::from_ref(script)),
        _ => vec![opaque(args, "`sg` with more than one command word".into())],
    }
}

/// `bash [OPTIONS] [-c STRING [ARG0 [ARGS]] | FILE [ARGS] | -s [ARGS]]`. With `-c` the first
/// operand is the command line. Without it, an operand is a script file (opaque), and no
/// operand (or `-s`) means the script comes from stdin: a literal here-document or
/// here-string is judged as that script, anything else is opaque. Bash's options are its
/// own: single letters in clusters (`-ec`), `-o NAME` / `-O NAME` (also with `+`), and a
/// few long ones that must be spelled whole.
pub(super) fn shell(_parsed: &Parsed, words: &[Word], stdin: &Stdin) -> Vec<InnerCommand> {
    let mut i = 0;
    let mut has_c = false;
    let mut reads_stdin = false;
    while let Some(word) = words.get(i) {
        if !word.known() {
            return vec![opaque(
                &words[i..],
                "the shell's options or script are known only when the line runs".into(),
            )];
        }
        let text = word.text.as_str();
        if text == "--" || text == "-" {
            i += 1;
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            match long {
                "rcfile" | "init-file" => i += 2,
                "login" | "noprofile" | "norc" | "posix" | "restricted" | "verbose"
                | "noediting" | "debugger" | "protected" | "wordexp" => i += 1,
                _ => {
                    return vec![opaque(
                        &words[i..],
                        format!("the shell option `{text}` is not one dsh knows"),
                    )];
                }
            }
            continue;
        }
        if text.len() > 1 && (text.starts_with('-') || text.starts_with('+')) {
            let flags = &text[1..];
            has_c |= text.starts_with('-') && flags.contains('c');
            reads_stdin |= text.starts_with('-') && flags.contains('s');
            // Each `o` or `O` in a cluster takes the next word.
            i += 1 + flags.chars().filter(|c| matches!(c, 'o' | 'O')).count();
            continue;
        }
        break;
    }
    if has_c {
        return match words.get(i) {
            None => Vec::new(),
            Some(script) if !script.known() => vec![opaque(&words[i..], SCRIPT_NOT_KNOWN.into())],
            Some(script) => vec![InnerCommand::Script(script.text.clone())],
        };
    }
    if reads_stdin || i >= words.len() {
        return vec![shell_reading(
            stdin,
            words,
            "the shell reads its script from stdin (a pipe, a file or the terminal)",
        )];
    }
    vec![opaque(
        &words[i..],
        format!("the shell runs the script file `{}`", words[i].text),
    )]
}
