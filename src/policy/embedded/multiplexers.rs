//! The terminal multiplexers' rows (P3b): tmux and screen run shell commands given as
//! their arguments. tmux takes any unambiguous prefix of a command's name (`new-ses`,
//! `run-s`), sets options that later run (`set default-command`), and runs `#(...)` in
//! its formats, so its commands are read by an allowlist: those known to run nothing pass,
//! those that run a shell command are judged by it in any spelling, and any other is
//! opaque (P5).

use super::{COMMAND, FILE, Row, Value, held, joined, spot, through_opaque};
use crate::policy::inner::InnerCommand;
use crate::policy::word::Word;

/// tmux commands that run a shell command, with the letters of their options that take a
/// value: the shell command is their first operand and what follows it.
const TMUX_RUNS: &[(&[&str], &str)] = &[
    (&["new-session", "new"], "cefFnstxy"),
    (&["new-window", "neww"], "cefFnt"),
    (&["split-window", "splitw"], "cefFlt"),
    (&["respawn-pane", "respawnp"], "cet"),
    (&["respawn-window", "respawnw"], "cet"),
    (&["run-shell", "run"], "cdt"),
    (&["pipe-pane", "pipep"], "t"),
    (&["display-popup", "popup"], "bcdehsStTwxy"),
    (&["if-shell", "if"], "t"),
];

/// tmux commands known to run no shell command and to set nothing that later runs one,
/// by their names and aliases (tmux 3.3).
const TMUX_HARMLESS: &[&str] = &[
    "attach-session",
    "attach",
    "detach-client",
    "detach",
    "has-session",
    "has",
    "kill-server",
    "kill-session",
    "kill-window",
    "killw",
    "kill-pane",
    "killp",
    "list-sessions",
    "ls",
    "list-windows",
    "lsw",
    "list-panes",
    "lsp",
    "list-clients",
    "lsc",
    "list-keys",
    "lsk",
    "list-buffers",
    "lsb",
    "list-commands",
    "lscm",
    "show-options",
    "show",
    "show-window-options",
    "showw",
    "show-buffer",
    "showb",
    "capture-pane",
    "capturep",
    "display-message",
    "display",
    "select-window",
    "selectw",
    "select-pane",
    "selectp",
    "rename-session",
    "rename",
    "rename-window",
    "renamew",
    "resize-pane",
    "resizep",
    "switch-client",
    "switchc",
    "start-server",
    "start",
    "wait-for",
    "wait",
    "next-window",
    "next",
    "previous-window",
    "prev",
    "last-window",
    "last",
    "server-info",
    "info",
    "clear-history",
    "clearhist",
    "refresh-client",
    "refresh",
];

/// What a tmux command is, as tmux finds it by its name.
enum TmuxCommand {
    /// Runs a shell command: its row of [`TMUX_RUNS`].
    Runs(&'static [&'static str], &'static str),
    Harmless,
    /// Anything else: keys typed into a shell, a file of commands, an option or hook that
    /// runs later, a name the judge does not know.
    Unknown,
}

/// tmux's lookup: an alias or a name exactly, else a prefix of a name (an ambiguous one is
/// refused by tmux; read as a command that runs, it is only judged more).
fn tmux_lookup(name: &str) -> TmuxCommand {
    let runs = |exact: bool| {
        TMUX_RUNS.iter().find(|(names, _)| {
            names.iter().any(|n| {
                if exact {
                    *n == name
                } else {
                    n.starts_with(name)
                }
            })
        })
    };
    if let Some((names, values)) = runs(true) {
        return TmuxCommand::Runs(names, values);
    }
    if TMUX_HARMLESS.contains(&name) {
        return TmuxCommand::Harmless;
    }
    match runs(false).filter(|_| !name.is_empty()) {
        Some((names, values)) => TmuxCommand::Runs(names, values),
        None => TmuxCommand::Unknown,
    }
}

/// The tmux commands of a line: separated by a `;` word, or by a word that ends in an
/// unescaped `;`.
fn tmux_commands(words: &[Word]) -> Vec<Vec<Word>> {
    let mut commands = vec![Vec::new()];
    for word in words {
        let text = word.text.as_str();
        if text == ";" || text == "\\;" {
            commands.push(Vec::new());
        } else if let Some(before) = text.strip_suffix(';').filter(|b| !b.ends_with('\\')) {
            if let Some(last) = commands.last_mut() {
                last.push(Word {
                    text: before.to_owned(),
                    ..word.clone()
                });
            }
            commands.push(Vec::new());
        } else if let Some(last) = commands.last_mut() {
            last.push(word.clone());
        }
    }
    commands
}

/// `tmux [OPTIONS] [COMMAND [FLAGS] [ARGS]] [; COMMAND ...]`: `-c CMD` runs CMD with the
/// shell; `-f FILE` reads a config file of commands (opaque); each tmux command of the
/// line (separated by a `;` word) may run a shell command ([`TMUX_RUNS`]).
pub(super) fn tmux(row: &Row, args: &[Word]) -> Vec<InnerCommand> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(word) = next_option(args, &mut i) {
        let text = word.text.as_str();
        for (at, letter) in text.char_indices().skip(1) {
            let rest = &text[at + letter.len_utf8()..];
            if letter == 'C' {
                found.push(through_opaque(
                    "-C",
                    word,
                    "in control mode tmux reads its commands from stdin",
                ));
            }
            if row.short_values.contains(letter) {
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i - 1)
                } else {
                    Some(word)
                };
                let text = if rest.is_empty() {
                    value.map(|w| w.text.clone()).unwrap_or_default()
                } else {
                    rest.to_owned()
                };
                if let Some(value) = value {
                    let spot = match letter {
                        'c' => Some(spot(Some('c'), "", COMMAND)),
                        'f' => Some(spot(Some('f'), "", FILE)),
                        _ => None,
                    };
                    if let Some(spot) = spot {
                        found.extend(held(&spot, &format!("-{letter}"), Value::of(value, &text)));
                    }
                }
                break;
            }
        }
    }
    for command in tmux_commands(&args[i.min(args.len())..]) {
        found.extend(tmux_command(&command));
    }
    found
}

/// One tmux command and its arguments.
fn tmux_command(words: &[Word]) -> Vec<InnerCommand> {
    let Some(name) = words.first() else {
        return Vec::new();
    };
    // A format's `#(...)` runs a shell command, whatever the command is.
    if let Some(format) = words.iter().find(|w| w.text.contains("#(")) {
        return vec![through_opaque(
            &name.text,
            format,
            "a tmux format's `#(...)` runs a shell command, which is not read here",
        )];
    }
    let (names, values) = match tmux_lookup(&name.text) {
        _ if name.dynamic => {
            return vec![through_opaque(
                "command",
                name,
                "a tmux command known only when the line runs",
            )];
        }
        TmuxCommand::Runs(names, values) => (names, values),
        TmuxCommand::Harmless => return Vec::new(),
        // With all its words: a deny rule's words standing in them deny (P5).
        TmuxCommand::Unknown => {
            return vec![InnerCommand::through(
                name.text.clone(),
                InnerCommand::Opaque {
                    words: words.to_vec(),
                    why: "a tmux command the judge does not know to run nothing: it may type keys into a shell, read a file of commands or set what runs later".into(),
                },
            )];
        }
    };
    let mut i = 1;
    let mut tmux_only = false;
    while let Some(word) = next_option(words, &mut i) {
        let text = word.text.as_str();
        for (at, letter) in text.char_indices().skip(1) {
            // `run-shell -C` runs a tmux command, not a shell command.
            tmux_only |= letter == 'C' && names[0] == "run-shell";
            if values.contains(letter) {
                if text[at + letter.len_utf8()..].is_empty() {
                    i += 1;
                }
                break;
            }
        }
    }
    let operands = &words[i.min(words.len())..];
    let how = names[0];
    if tmux_only {
        return operands
            .iter()
            .filter_map(|w| joined(how, &[Word::literal("tmux"), w.clone()]))
            .collect();
    }
    if how == "if-shell" {
        // The shell command, then tmux commands to run on its result.
        let mut found: Vec<InnerCommand> = operands
            .first()
            .and_then(|w| joined(how, std::slice::from_ref(w)))
            .into_iter()
            .collect();
        for command in operands.iter().skip(1) {
            found.extend(joined(how, &[Word::literal("tmux"), command.clone()]));
        }
        return found;
    }
    joined(how, operands).into_iter().collect()
}

/// `screen [OPTIONS] [CMD [ARGS]]`: runs CMD with its arguments in a new window (a wrapper);
/// `-c FILE` is a file of screen commands and `-X CMD` sends a command to a running screen
/// (`stuff` types keys into its shell): both opaque. Options are read letter by letter, as
/// screen does (`-dmS name`, `-m -d`): `-d`, `-r`, `-x` take a session name instead of a
/// command only without `-m`.
pub(super) fn screen(_row: &Row, args: &[Word]) -> Vec<InnerCommand> {
    // Letters that take a value: the rest of the word, or the next word.
    const VALUES: &str = "ehpsStT";
    let (mut detached, mut attach) = (false, false);
    let mut i = 0;
    while let Some(word) = next_option(args, &mut i) {
        let text = word.text.as_str();
        if text == "-Logfile" {
            i += 1;
            continue;
        }
        if ["-ls", "-list", "-wipe", "-v", "--version", "--help"].contains(&text) {
            return Vec::new();
        }
        for (at, letter) in text.char_indices().skip(1) {
            match letter {
                'c' | 'X' => {
                    return vec![through_opaque(
                        &format!("-{letter}"),
                        word,
                        "it reads screen commands from a file or sends them to a running screen",
                    )];
                }
                'm' => detached = true,
                'd' | 'D' | 'r' | 'R' | 'x' => attach = true,
                _ if VALUES.contains(letter) => {
                    if text[at + letter.len_utf8()..].is_empty() {
                        i += 1;
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    match args.get(i..) {
        // `screen -r NAME`, `screen -d NAME`: a session to attach to or detach.
        _ if attach && !detached => Vec::new(),
        Some(command) if !command.is_empty() => vec![InnerCommand::through(
            "window",
            InnerCommand::Command {
                words: command.to_vec(),
                risky_env: false,
                assigned: Vec::new(),
            },
        )],
        _ => Vec::new(),
    }
}

/// The next word of a run of options read letter by letter, as tmux and screen read them
/// (`-dmS`), moving `i` past it: `None` at the first operand (or a lone `-`), and after
/// `--`, which it moves past too.
fn next_option<'a>(args: &'a [Word], i: &mut usize) -> Option<&'a Word> {
    let word = args.get(*i)?;
    let text = word.text.as_str();
    if !text.starts_with('-') || text == "-" {
        return None;
    }
    *i += 1;
    (text != "--").then_some(word)
}

#[cfg(test)]
mod tests {
    use crate::config::Decision::{Allow, Ask, Deny};
    use crate::policy::embedded::tests::decide;

    /// P3b (issue 41): tmux commands by any prefix tmux takes, its formats' `#(...)`, and
    /// screen's options letter by letter.
    #[test]
    fn p3b_tmux_and_screen_are_read_as_the_real_programs_read_them() {
        for line in [
            "tmux new-ses -d 'rm x'",
            "tmux run-s 'rm x'",
            "tmux new -d sleep 1 \\; run-sh 'rm x'",
            "tmux new -d sleep 1\\; run 'rm x'",
            "tmux set default-command 'rm x'",
            "tmux display -p '#(rm x)'",
            "screen -m -d rm x",
            "screen -d -m -S s rm x",
            "screen -mdS s rm x",
        ] {
            assert_eq!(decide(line), Deny, "{line}");
        }
        for line in [
            "tmux set-hook -g after-new-window 'x'",
            "tmux -C",
            "screen -X stuff x",
        ] {
            assert_eq!(decide(line), Ask, "{line}");
        }
        for line in [
            "tmux ls",
            "tmux attach -t main",
            "tmux kill-server",
            "tmux display -p '#S'",
            "screen -r main",
            "screen -ls",
        ] {
            assert_eq!(decide(line), Allow, "{line}");
        }
    }
}
