//! What a command runs inside it: the one vocabulary of the wrapper table
//! (`wrappers.rs`) and the table of commands in options, config and arguments
//! (`embedded/`), which the walk follows. Its own module so neither table imports
//! the other's.

use super::word::Word;

/// A command that another command runs.
#[derive(Debug, Clone)]
pub enum InnerCommand {
    /// Given as words: `sudo rm x` runs `rm x`.
    Command {
        words: Vec<Word>,
        /// The wrapper sets a variable that changes what code runs (`env PATH=. ls`).
        risky_env: bool,
        /// The variables the wrapper sets that are not shown harmless (`env X=1 cmd`).
        assigned: Vec<super::word::Assigned>,
    },
    /// Given as a command line: `bash -c 'rm x'`, `eval "rm x"`.
    Script(String),
    /// Only known at run time: `bash -c "$X"`, `sudo $OPTS rm`, `source f`.
    Opaque { words: Vec<Word>, why: String },
    /// The wrapper's own words cannot be read: a word known only at run time stands where
    /// its grammar reads an option (`t=5; timeout $t cargo test`). Opaque as
    /// [`InnerCommand::Opaque`] is, unless the line itself gives such words their values:
    /// then the judge reads the wrapper's whole line with each value written out
    /// (`judge/line_values.rs`, issue 41).
    Unread { why: String },
    /// Found in an option, a config key, an argument or an environment variable that the
    /// program runs as a command (P3b): `how` names the place for the chain, so that
    /// `explain` shows `tar --to-command -> rm` or `git -c core.fsmonitor -> rm`.
    Through {
        how: String,
        inner: Box<InnerCommand>,
    },
}

impl InnerCommand {
    /// `inner`, found through the option, key or variable `how` (P3b).
    pub fn through(how: impl Into<String>, inner: InnerCommand) -> InnerCommand {
        InnerCommand::Through {
            how: how.into(),
            inner: Box::new(inner),
        }
    }
}
