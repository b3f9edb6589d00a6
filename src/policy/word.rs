//! A word of a command line as far as it can be known before anything runs.
//!
//! The shell walk makes them, the wrapper table and the option grammar read them. It lives
//! apart from both so that neither imports the other for it.

use super::argv::Arg;

/// A word of a simple command, as far as it can be known without running anything.
#[derive(Debug, Clone, Default)]
pub struct Word {
    /// The value with quoting removed; expansions keep their source text.
    pub text: String,
    /// It contains an expansion ($X, $(..), `..`, $((..))).
    pub dynamic: bool,
    /// It contains unquoted glob or brace-expansion characters, so bash may replace it.
    pub pattern: bool,
}

impl Word {
    /// A word whose value is its text.
    pub fn literal(text: &str) -> Word {
        Word {
            text: text.to_owned(),
            ..Word::default()
        }
    }

    /// Whether, as a command name, it names one known command.
    pub fn is_known_name(&self) -> bool {
        !self.dynamic && !self.pattern && !self.text.is_empty()
    }

    /// The program a command name runs: its last path component (`/bin/rm` is `rm`).
    pub fn base_name(&self) -> &str {
        base_name(&self.text)
    }
}

impl Arg for Word {
    fn text(&self) -> &str {
        &self.text
    }
    fn known(&self) -> bool {
        !self.dynamic && !self.pattern
    }
}

/// The last path component of a command name: what a rule on `rm` matches in `/bin/rm`.
pub fn base_name(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// The texts of `words`.
pub fn texts(words: &[Word]) -> Vec<String> {
    words.iter().map(|w| w.text.clone()).collect()
}

/// `NAME` of a `NAME=value` word.
pub fn assigned_name(text: &str) -> Option<&str> {
    let (name, _) = text.split_once('=')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    ((first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
    .then_some(name)
}

/// Environment variables that change which program runs or make a program run other code
/// (`PATH=./evil:$PATH ls`, `LD_PRELOAD=x.so cat`, `GIT_PAGER=sh git log`). A command that
/// sets one is not the command its words name. Not exhaustive: programs read many more.
pub fn changes_code(name: &str) -> bool {
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
        // Issue 41: variables that run code by existing.
        "LUA_INIT",
        "LUA_INIT_5_4",
        "LUA_INIT_5_3",
        "PERL5DB",
        "PERLDB_OPTS",
        "TAR_OPTIONS",
        "PS0",
        "PS1",
        "PS2",
        "MAKEFLAGS",
        "GNUMAKEFLAGS",
        "MAKEFILES",
        "PYTHONBREAKPOINT",
        "PYTHONINSPECT",
        "PYTHONWARNINGS",
        "PHPRC",
        "PHP_INI_SCAN_DIR",
        "GIT_ALLOW_PROTOCOL",
        "GIT_PROTOCOL_FROM_USER",
    ];
    const PREFIXES: &[&str] = &["LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_"];
    NAMES.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// What a program does with the value of an environment variable it reads (P3b).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvRuns {
    /// The value is a command line (or a program) that the program runs: `GIT_SSH_COMMAND`,
    /// `PAGER`, `EDITOR`, `LESSOPEN` after its `|`.
    CommandLine,
    /// The value names a file whose code runs: `BASH_ENV` and `ENV` (sourced by a shell),
    /// `LD_PRELOAD` and `LD_AUDIT` (loaded into every program). What is in the file cannot be
    /// seen from the line (P5).
    File,
}

/// The variables whose value a program runs, and how (P3b). A table, like the wrappers':
/// adding one is adding a row. `GIT_SSH`, `GIT_ASKPASS` and `SSH_ASKPASS` name a program
/// rather than a command line; judged as a line, a program's path is that program.
const ENV_RUNS: &[(&str, EnvRuns)] = &[
    ("BASH_ENV", EnvRuns::File),
    ("ENV", EnvRuns::File),
    ("LD_PRELOAD", EnvRuns::File),
    ("LD_AUDIT", EnvRuns::File),
    ("PROMPT_COMMAND", EnvRuns::CommandLine),
    ("GIT_SSH_COMMAND", EnvRuns::CommandLine),
    ("GIT_SSH", EnvRuns::CommandLine),
    ("GIT_EXTERNAL_DIFF", EnvRuns::CommandLine),
    ("GIT_EDITOR", EnvRuns::CommandLine),
    ("GIT_SEQUENCE_EDITOR", EnvRuns::CommandLine),
    ("GIT_PAGER", EnvRuns::CommandLine),
    ("GIT_ASKPASS", EnvRuns::CommandLine),
    ("GIT_PROXY_COMMAND", EnvRuns::CommandLine),
    ("SSH_ASKPASS", EnvRuns::CommandLine),
    ("EDITOR", EnvRuns::CommandLine),
    ("VISUAL", EnvRuns::CommandLine),
    ("PAGER", EnvRuns::CommandLine),
    ("MANPAGER", EnvRuns::CommandLine),
    ("SYSTEMD_PAGER", EnvRuns::CommandLine),
    ("LESSOPEN", EnvRuns::CommandLine),
    ("LESSCLOSE", EnvRuns::CommandLine),
    ("RSYNC_RSH", EnvRuns::CommandLine),
    ("BROWSER", EnvRuns::CommandLine),
    // Issue 41: judged by their value, as the ones above.
    ("RSYNC_CONNECT_PROG", EnvRuns::CommandLine),
    ("SUDO_ASKPASS", EnvRuns::CommandLine),
    ("SUDO_EDITOR", EnvRuns::CommandLine),
    ("FCEDIT", EnvRuns::CommandLine),
    ("CC", EnvRuns::CommandLine),
    ("CXX", EnvRuns::CommandLine),
];

/// How a program runs the value of the variable `name`, if it runs it (P3b).
pub fn env_runs(name: &str) -> Option<EnvRuns> {
    ENV_RUNS
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, runs)| *runs)
}

/// The command line in the value of a variable from [`ENV_RUNS`]: `LESSOPEN` and
/// `LESSCLOSE` mark a pipe with a leading `|` (`||` and `|-` too), which is not part of the
/// command.
pub fn command_value<'a>(name: &str, value: &'a str) -> &'a str {
    if name.starts_with("LESS") {
        value.trim_start_matches(['|', '-'])
    } else {
        value
    }
}
