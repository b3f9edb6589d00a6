//! `[permissions]`: the rules, modes and tests the policy judges with (`crate::policy`).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A policy decision. Ordered so that the strongest wins when decisions combine:
/// `Deny > Ask > Allow` (`max` of several decisions is their combination).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

/// A session's permission mode (ACP `session/set_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Rules decide; calls no rule matches are asked.
    #[default]
    Ask,
    /// Rules decide; calls no rule matches are allowed (deny rules still veto).
    Auto,
    /// Anything not known to be read-only is vetoed.
    ReadOnly,
}

impl Mode {
    /// The id used on the wire (`ask`, `auto`, `read-only`).
    pub fn id(self) -> &'static str {
        match self {
            Mode::Ask => "ask",
            Mode::Auto => "auto",
            Mode::ReadOnly => "read-only",
        }
    }

    /// Parses a wire id.
    pub fn from_id(id: &str) -> Option<Mode> {
        [Mode::Ask, Mode::Auto, Mode::ReadOnly]
            .into_iter()
            .find(|m| m.id() == id)
    }
}

/// One `[[permissions.rules]]` entry.
///
/// Built from the config file, or in code (tests, fuzzing): there, `Default` gives a rule that
/// names no tool and denies, so struct literals can name only what they need and end with
/// `..Default::default()`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionRule {
    /// The tool the rule is about (`bash`, `bash_output`, `bash_kill`, `read_file`,
    /// `edit_file`, `write_file`, `*`), or a glob of tool names (`mcp__github__*`: `*`
    /// any run of characters, `?` one).
    pub tool: String,
    /// For the file tools: a glob of the paths the rule is about (`secrets/**`: `*` within
    /// one path component, `**` across them, `?` one character). A relative glob is matched
    /// against the path relative to the session's cwd, an absolute one against the whole
    /// path. Absent: every path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// For `bash`: a command prefix, word by word (`git status`); `*` as a word
    /// matches any one word. Absent: every call of the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// For `network` (E10): the host the rule is about, `HOST` or `*.SUFFIX` (subdomains
    /// of SUFFIX only), case-insensitive, an IPv6 address bare or in brackets. Absent:
    /// every host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// For `network`: the port the rule is about. Absent: every port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// What a matching call gets; the strongest decision of all matching rules wins.
    pub action: Decision,
    /// Command lines this rule must match: the rule's author says what they meant, so
    /// a prefix that does not cover them is reported instead of silently missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// Command lines this rule must not match (a rule broader than meant is reported).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_examples: Vec<String>,
    /// Where the rule was written, as `FILE:LINE` (the line of its `[[permissions.rules]]`
    /// header, or of its inline table), so that reports about it can point there. `None`
    /// for rules built in code. Not a config key: never read from or written to TOML.
    #[serde(skip)]
    pub origin: Option<String>,
}

impl Default for PermissionRule {
    /// A rule that names no tool (so it matches nothing) and would deny: the safe base for
    /// struct literals with `..Default::default()`.
    fn default() -> Self {
        Self {
            tool: String::new(),
            command: None,
            path: None,
            host: None,
            port: None,
            action: Decision::Deny,
            examples: Vec::new(),
            not_examples: Vec::new(),
            origin: None,
        }
    }
}

/// One `[[permissions.tests]]` entry: a command line and the decision the policy must
/// reach for it in a mode. Lets a config carry its own checks, so a rule change that
/// alters a decision someone relied on is caught when the config is checked.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyTest {
    /// The `bash` command line to judge.
    pub command: String,
    /// The session mode to judge it in.
    #[serde(default)]
    pub mode: Mode,
    /// The decision the policy must reach.
    pub expect: Decision,
    /// Where the test was written, as `FILE:LINE` (the line of its `[[permissions.tests]]`
    /// header, or of its inline table), so a failure can point there. `None` for tests
    /// built in code. Not a config key: never read from or written to TOML.
    #[serde(skip)]
    pub origin: Option<String>,
}

/// `[permissions]`: rules, policy tests and the read-only list.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PermissionsConfig {
    /// The mode of a new session.
    pub default_mode: Mode,
    /// Rules, all consulted; the strongest matching decision wins.
    pub rules: Vec<PermissionRule>,
    /// Command prefixes known to only read (used by `read-only` mode).
    pub read_only_commands: Vec<String>,
    /// Expected decisions for given command lines, checked against the rules above.
    pub tests: Vec<PolicyTest>,
    /// A candidate config whose `[permissions]` rules are judged beside these on every
    /// call, their decision traced as `shadow policy` (`enforced: false`) and never
    /// applied: `dsh policy shadow-report` shows where they would differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<PathBuf>,
    /// Project directories (each holding a `.dsh/config.toml`) whose project file is
    /// honoured fully, allow rules, looser modes and hooks included. Any other project
    /// file can only tighten (see `src/project.rs`). Read only from the user's own file.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trusted_projects: Vec<PathBuf>,
    /// Where "allow always" / "reject always" answers are kept besides the session's
    /// log: `session` (that session only) or `user` (also `grants.json` in the state
    /// directory, applied to every session of this user, across restarts).
    pub remember: Remember,
}

/// `[permissions] remember`: how far an "always" answer reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Remember {
    /// The session that was asked (its log keeps it across loads and restarts).
    #[default]
    Session,
    /// Every session of this user, from the state directory's `grants.json`.
    User,
}

impl Default for PermissionsConfig {
    fn default() -> Self {
        Self {
            default_mode: Mode::Ask,
            rules: Vec::new(),
            read_only_commands: DEFAULT_READ_ONLY_COMMANDS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            tests: Vec::new(),
            shadow: None,
            trusted_projects: Vec::new(),
            remember: Remember::Session,
        }
    }
}

/// Commands that only read, by command prefix. Some of them can also write, run programs
/// or change the system (`find -exec`, `sort -o`, `uniq IN OUT`, `rg --pre`, `date -s`,
/// `hostname NAME`, `file -C`...); the policy refuses those forms in read-only mode
/// (`writing_option` in src/hooks/policy.rs).
pub const DEFAULT_READ_ONLY_COMMANDS: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "rg",
    "find",
    "pwd",
    "echo",
    "printf",
    "stat",
    "file",
    "which",
    "type",
    "date",
    "du",
    "df",
    "diff",
    "sort",
    "uniq",
    "cut",
    "tr",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "tree",
    "true",
    "false",
    "test",
    "[",
    "id",
    "whoami",
    "uname",
    "hostname",
    "ps",
    "git status",
    "git log",
    "git diff",
    "git show",
    "git rev-parse",
    "git ls-files",
    "git blame",
];
