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
    ];
    const PREFIXES: &[&str] = &["LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_"];
    NAMES.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}
