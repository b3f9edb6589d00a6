//! A word of a command line as far as it can be known before anything runs.
//!
//! The shell walk makes them, the wrapper table and the option grammar read them. It lives
//! apart from both so that neither imports the other for it.

use super::argv::Arg;

/// A word of a simple command, as far as it can be known without running anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Word {
    /// The value with quoting removed; expansions keep their source text.
    pub text: String,
    /// It contains an expansion ($X, $(..), `..`, $((..))).
    pub dynamic: bool,
    /// It contains unquoted glob or brace-expansion characters, so bash may replace it.
    pub pattern: bool,
    /// How bash builds its value, piece by piece, when it holds an expansion (empty when
    /// it does not): what lets the judge read a variable the line itself sets by its value
    /// (issue 41). Their texts joined are `text` while nothing rewrote the word.
    pub pieces: Vec<Piece>,
}

/// One part of a word's value (issue 41).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text that is its own value, quoting removed.
    Text(String),
    /// An expansion, with its source text as the word shows it.
    Expansion {
        source: String,
        kind: Expansion,
        /// Inside double quotes: the value is neither split into words nor a pattern.
        quoted: bool,
    },
}

/// What an expansion in a word reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expansion {
    /// `$x`, `${x}`: the variable's value as it is.
    Variable(String),
    /// `${x:-word}`, `${x:=word}`: what the first reads, or the word's value.
    Or(Box<Expansion>, Box<Word>),
    /// `${x:+word}`: nothing, or the word's value.
    IfSet(Box<Word>),
    /// `${x%.c}`, `${x:0:2}`, `${x^^}`, `${x@Q}`: a part of what the inner expansion reads
    /// (nothing at all, too: `${HOME:0:0}rm` is `rm`), or its text in another case.
    Part(Box<Expansion>),
    /// `${x/a/b}`, `${a[1]}`, `${!x}`: a value the judge does not follow (a replacement
    /// the line chooses, an element of an array, a name taken from a value).
    Computed(Box<Expansion>),
    /// `$1`, `${10}` (`Some`), `$@`, `$*` (`None`); `nested` when inside a function body or
    /// a script a wrapper runs, where they are that call's arguments.
    Positional { at: Option<u32>, nested: bool },
    /// `$(...)`, backquotes: a command's output.
    Output,
    /// `"$(cat <<'EOF' ... EOF)"`: the output of `cat` fed only a here-document or
    /// here-string the line shows, which is that text without its trailing newlines (how
    /// agents write a commit message or a pull request's body).
    Printed(String),
    /// The words `xargs` reads from its input and appends to its command: the line's
    /// choice when the line prints the text it pipes (`printf ... | xargs`), else what the
    /// programs before it write (`find ... | xargs`): file names of the project.
    Piped,
    /// `${!prefix*}`, `${!a[@]}`: names of variables or keys, which the line can choose.
    Names,
    /// `$?`, `$$`, `$#`, `$((...))`, `$0`: a number or the shell's own name, nothing the
    /// line can make a command name of.
    Fixed,
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

/// `NAME` of a `NAME=value` word given to `env` or `sudo` before the command: unlike the
/// shell, they take any word holding `=` as an assignment, whatever its name (GNU env's
/// `strchr (argv[optind], '=')`), so `env 'BASH_FUNC_f%%=() { ...; }' bash -c f` hands
/// bash a function, not a command named `BASH_FUNC_f%%=...` (issue 41).
pub fn env_assigned_name(text: &str) -> Option<&str> {
    text.split_once('=').map(|(name, _)| name)
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

/// What setting a variable in front of a command does to it, as far as the judge can tell
/// (P8, issue 41). Variables are read by an allowlist: only those known to change nothing
/// but data pass; one the judge has not met may make the program run other code
/// (`PERL5DB`, `LUA_INIT`, `RUSTFLAGS`, `npm_config_script_shell`), so it is never harmless.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvEffect {
    /// Known to change nothing but data the program reads: `LANG`, `RUST_LOG`, `CI`.
    Harmless,
    /// Its value is run and judged as what it runs ([`env_runs`]): `PAGER=cat`.
    JudgedByValue,
    /// Changes which program runs (`PATH`, `LD_PRELOAD`, `BASH_ENV`): the command named
    /// is not the command that runs, so the segment is opaque (P5). Exported
    /// (`export LUA_INIT=...`), it is carried by the export's segment ([`note_export`]).
    ChangesCode,
    /// Names a file the program writes (`GIT_TRACE2=/tmp/t`): a write in read-only mode.
    WritesFile,
    /// Not known to the judge: it may make the program run other code, so it is judged
    /// as code not shown harmless (asked in `auto` under a deny or ask rule, refused in
    /// `read-only`).
    Unknown,
}

/// A variable set in front of a command (or exported for those after it) whose effect the
/// judge cannot show harmless: one it has not met, one naming a file to write, or an
/// exported one that changes which program runs (P8).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Assigned {
    pub name: String,
    pub effect: EnvEffect,
}

/// What setting `name` (to `value`, when it is a scalar known before the line runs) in
/// front of a command does (see [`EnvEffect`]).
pub fn env_effect(name: &str, value: Option<&Word>) -> EnvEffect {
    if value.is_some() && env_runs(name) == Some(EnvRuns::CommandLine) {
        return EnvEffect::JudgedByValue;
    }
    if changes_code(name) {
        return EnvEffect::ChangesCode;
    }
    if env_runs(name).is_some() {
        return EnvEffect::JudgedByValue;
    }
    if let Some(effect) = trace_file(name, value) {
        return effect;
    }
    if name == "LESS" && value.is_some_and(|v| !v.dynamic && less_flags_only(&v.text)) {
        return EnvEffect::Harmless;
    }
    if is_harmless_variable(name) {
        EnvEffect::Harmless
    } else {
        EnvEffect::Unknown
    }
}

/// What the word `NAME=value` given to a command by a wrapper (`env X=1 cmd`, `sudo X=1
/// cmd`) does: `true` when it changes which program runs (P5); an effect not shown
/// harmless is added to `assigned` (P8).
pub fn note_assignment(word: &Word, assigned: &mut Vec<Assigned>) -> bool {
    let Some((name, value)) = word.text.split_once('=') else {
        return false;
    };
    let value = Word {
        text: value.to_owned(),
        ..word.clone()
    };
    match env_effect(name, Some(&value)) {
        EnvEffect::Harmless | EnvEffect::JudgedByValue => false,
        EnvEffect::ChangesCode => true,
        effect @ (EnvEffect::WritesFile | EnvEffect::Unknown) => {
            assigned.push(Assigned {
                name: name.to_owned(),
                effect,
            });
            false
        }
    }
}

/// Whether the builtin whose words so far are `words` (its name and the options before the
/// word at hand) gives the variables it sets to the commands after it (P8, issue 41):
/// `export`, `declare -x`/`typeset -x`/`local -x` (also in a cluster such as `-rx`), and
/// `readonly`, which sets a variable that may already be in the environment. Such a variable
/// reaches the programs after it as one set in front of them does, so it is judged alike.
pub fn exports(words: &[Word]) -> bool {
    let Some(name) = words.first() else {
        return false;
    };
    match name.text.as_str() {
        "export" | "readonly" => true,
        "declare" | "typeset" | "local" => words[1..].iter().any(|w| {
            w.text
                .strip_prefix('-')
                .is_some_and(|flags| !flags.starts_with('-') && flags.contains('x'))
        }),
        _ => false,
    }
}

/// What the word `word` given to an exporting builtin ([`exports`]) sets: `NAME=value` or a
/// bare `NAME` (its value set earlier). Options (`-f`, `-n`) set nothing. An effect not
/// shown harmless is added to `assigned`, including one that changes which program runs
/// (`export LUA_INIT=...`, `export PERL5OPT=...`): in front of a command that makes the
/// command opaque, but an export's commands are the segments after it, so the export
/// itself carries it. `PATH` extended at its end (`export PATH=$PATH:~/.local/bin`) is
/// left alone: every name found before is found in the same place.
pub fn note_export(word: &Word, assigned: &mut Vec<Assigned>) {
    if word.text.starts_with('-') {
        return;
    }
    // A bare name exports the value it holds, which the line may have set before
    // (`X=...; export X`): not read by the judge, so judged without one.
    let (name, value) = match word.text.split_once('=') {
        Some((name, value)) => (
            name,
            Some(Word {
                text: value.to_owned(),
                ..word.clone()
            }),
        ),
        None => (word.text.as_str(), None),
    };
    if name == "PATH"
        && value
            .as_ref()
            .is_some_and(|v| v.text.starts_with("$PATH:") || v.text.starts_with("${PATH}:"))
    {
        return;
    }
    if let effect @ (EnvEffect::ChangesCode | EnvEffect::WritesFile | EnvEffect::Unknown) =
        env_effect(name, value.as_ref())
    {
        assigned.push(Assigned {
            name: name.to_owned(),
            effect,
        });
    }
}

/// Whether `LESS` holds only less's display flags (`-R`, `-FRX`, `-iMR`): no `+cmd` (which
/// runs less commands, `!` a shell), no log file (`-o`), key file (`-k`) or other option
/// with a value. An allowlist of letters (issue 41): `LESS=-R git log` is `git log`.
fn less_flags_only(value: &str) -> bool {
    const DISPLAY: &str = "aABcCdeEfFgGiIJKLmMnNqQrRsSuUwWX";
    let mut words = value.split_ascii_whitespace().peekable();
    words.peek().is_some()
        && words.all(|w| {
            w.strip_prefix('-').is_some_and(|flags| {
                !flags.is_empty() && flags.chars().all(|c| DISPLAY.contains(c))
            })
        })
}

/// Git's trace variables (`GIT_TRACE`, `GIT_TRACE2_EVENT`, `GIT_TRACE_PACKET`, ...): `1`,
/// `2`, `true` or a descriptor number write to the terminal, `0`, `false` or nothing turn
/// them off, an absolute path (or `af_unix:` socket) names a file git writes. A value
/// known only at run time may be a path.
fn trace_file(name: &str, value: Option<&Word>) -> Option<EnvEffect> {
    if !name.starts_with("GIT_TRACE") {
        return None;
    }
    let terminal = |v: &str| {
        v.is_empty()
            || v.eq_ignore_ascii_case("true")
            || v.eq_ignore_ascii_case("false")
            || v.bytes().all(|b| b.is_ascii_digit())
    };
    Some(match value {
        Some(v) if !v.dynamic && terminal(&v.text) => EnvEffect::Harmless,
        _ => EnvEffect::WritesFile,
    })
}

/// Variables known to change nothing but data: the locale and terminal, colours, log
/// levels and the like. An allowlist (issue 41): what is not here is [`EnvEffect::Unknown`].
/// Left out on purpose, because their value can make a program run code: `SHELL`, `LESS`
/// (`+!cmd`), `RUSTFLAGS` (`-C linker=`), `RUSTC_WRAPPER`, `GOFLAGS` (`-toolexec`),
/// `PYTEST_ADDOPTS` (`-p plugin`), `npm_config_*`, `JAVA_HOME`, `BUNDLE_GEMFILE`.
fn is_harmless_variable(name: &str) -> bool {
    const NAMES: &[&str] = &[
        // Locale, time and terminal.
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "COLUMNS",
        "LINES",
        "COLORTERM",
        "NO_COLOR",
        "FORCE_COLOR",
        "CLICOLOR",
        "CLICOLOR_FORCE",
        "GREP_COLOR",
        "GREP_COLORS",
        "LS_COLORS",
        "MANWIDTH",
        "TMPDIR",
        "SOURCE_DATE_EPOCH",
        // Build and test switches that only say how verbose or which profile.
        "CI",
        "DEBUG",
        "VERBOSE",
        "QUIET",
        "LOG_LEVEL",
        "LOGLEVEL",
        "NODE_ENV",
        "RAILS_ENV",
        "RACK_ENV",
        "APP_ENV",
        "PORT",
        "JOBS",
        "OMP_NUM_THREADS",
        "RAYON_NUM_THREADS",
        "TOKIO_WORKER_THREADS",
        "RUST_LOG",
        "RUST_BACKTRACE",
        "RUST_LIB_BACKTRACE",
        "RUST_MIN_STACK",
        "RUST_TEST_THREADS",
        "RUST_TEST_NOCAPTURE",
        "CARGO_TERM_COLOR",
        "CARGO_TERM_VERBOSE",
        "CARGO_INCREMENTAL",
        "CARGO_BUILD_JOBS",
        "CARGO_TARGET_DIR",
        "CARGO_NET_OFFLINE",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONFAULTHANDLER",
        "NODE_NO_WARNINGS",
        "NODE_DISABLE_COLORS",
        "GOOS",
        "GOARCH",
        "CGO_ENABLED",
        "GO111MODULE",
        "GOPROXY",
        "GOPRIVATE",
        "DEBIAN_FRONTEND",
        "HOMEBREW_NO_AUTO_UPDATE",
        // Proxies: where connections go, not what runs (the sandbox's proxy judges them).
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "all_proxy",
        // Git's identity, dates and prompts.
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
        "GIT_TERMINAL_PROMPT",
        "GIT_OPTIONAL_LOCKS",
        "GIT_MERGE_AUTOEDIT",
        "GIT_LITERAL_PATHSPECS",
        "GIT_FLUSH",
    ];
    NAMES.contains(&name) || name.starts_with("LC_")
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

#[cfg(test)]
mod tests {
    use crate::config::{Decision, Mode, PermissionRule, PermissionsConfig};
    use crate::policy::Policy;

    fn policy(rules: &[(&str, Decision)]) -> Policy {
        Policy::new(&PermissionsConfig {
            rules: rules
                .iter()
                .map(|(command, action)| PermissionRule {
                    tool: "bash".into(),
                    command: Some((*command).into()),
                    action: *action,
                    ..PermissionRule::default()
                })
                .collect(),
            ..PermissionsConfig::default()
        })
    }

    fn decide(policy: &Policy, command: &str, mode: Mode) -> Decision {
        policy
            .judge(
                "bash",
                &serde_json::json!({ "command": command }),
                mode,
                &[],
            )
            .decision
    }

    /// P8, issue 41: variables are read by an allowlist. One the judge has not met, set in
    /// front of a command or by `env`, is judged as code not shown harmless: asked in
    /// `auto` under a deny rule (allowed with no rule), refused in `read-only`; the
    /// everyday ones pass.
    #[test]
    fn p8_a_variable_the_judge_has_not_met_is_judged_as_code() {
        let guarded = policy(&[("rm", Decision::Deny)]);
        let open = policy(&[]);
        for line in [
            "FOO=1 git log",
            "env FOO=1 git log",
            "sudo FOO=1 git log",
            "RUSTFLAGS='-C linker=./x' cargo build",
            "npm_config_script_shell=./x npm test",
        ] {
            assert_eq!(decide(&guarded, line, Mode::Auto), Decision::Ask, "{line}");
            assert_eq!(decide(&open, line, Mode::Auto), Decision::Allow, "{line}");
            assert_eq!(
                decide(&guarded, line, Mode::ReadOnly),
                Decision::Deny,
                "{line}"
            );
        }
        for line in [
            "RUST_BACKTRACE=1 cargo test",
            "env RUST_LOG=debug cargo run",
            "LC_ALL=C sort f",
            "NO_COLOR=1 CI=true npm test",
            "GIT_AUTHOR_DATE=2020-01-01 git commit -m x",
        ] {
            assert_eq!(
                decide(&guarded, line, Mode::Auto),
                Decision::Allow,
                "{line}"
            );
        }
        assert_eq!(
            decide(&guarded, "LANG=C git log", Mode::ReadOnly),
            Decision::Allow
        );
        // Without a command, an assignment runs nothing.
        assert_eq!(decide(&guarded, "FOO=1", Mode::Auto), Decision::Allow);
    }

    /// P7, P8: a variable naming a file the program writes (`GIT_TRACE*=/path`) is a
    /// write in read-only mode; the same variable writing to the terminal is not.
    #[test]
    fn p7_p8_git_trace_to_a_file_is_a_write_in_read_only_mode() {
        let p = policy(&[("rm", Decision::Deny)]);
        for line in [
            "GIT_TRACE2=/tmp/t git log -1",
            "GIT_TRACE=/tmp/t git status",
            "GIT_TRACE2_EVENT=af_unix:/tmp/s git log",
            "GIT_TRACE_PACKET=$HOME/t git status",
            "env GIT_TRACE2_PERF=/tmp/t git log",
        ] {
            assert_eq!(decide(&p, line, Mode::ReadOnly), Decision::Deny, "{line}");
            // A write is no code: auto allows it.
            assert_eq!(decide(&p, line, Mode::Auto), Decision::Allow, "{line}");
        }
        for line in ["GIT_TRACE=1 git status", "GIT_TRACE2=true git log -1"] {
            assert_eq!(decide(&p, line, Mode::ReadOnly), Decision::Allow, "{line}");
        }
    }
}
