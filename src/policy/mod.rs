//! The judge: turns one tool call into a decision (`allow < ask < deny`) before anything
//! runs, from the configured rules, the session's mode and its "allow always" grants. The
//! contract is `../shared/spec/policy.md` (P1-P8).
//!
//! A pure leaf: no I/O, no async, nothing from hooks, tools, registry or acp. The policy
//! hook (`hooks/rules.rs`), `dsh policy explain`, `_dsh/policy/explain` and the config
//! check all call [`Policy::judge`], so what they show is what a real call gets.
//!
//! - `shell/`: a bash command line -> the simple commands it runs (segments), through
//!   substitutions, nested shells and wrappers;
//! - `wrappers.rs`: the table of programs that run another command, and where that is;
//! - `argv.rs`: the option grammar (getopt_long's) both of them read words with;
//! - `read_only.rs`: the forms of readers that still write (read-only mode);
//! - `word.rs`: a word as far as it is known before the line runs.
//!
//! A bash call is judged segment by segment and gets the strongest decision of its
//! segments, so an allowed `git status` cannot carry an unjudged `rm -rf build` along with
//! it, and "allow always" grants one command prefix, never a whole compound command.

pub mod argv;
pub mod audit;
pub mod embedded;
pub mod escalation;
pub mod explain;
pub mod globs;
pub mod harmless;
pub mod inline;
pub mod inner;
pub mod network;
pub mod read_only;
pub mod replay;
pub mod shell;
pub mod word;
pub mod wrappers;

use crate::config::{
    Config, Decision, Mode, NetworkConfig, NetworkDefault, PermissionRule, PermissionsConfig,
};
pub use escalation::{Escalation, EscalationError};
use network::{HostEntry, HostPattern};
use serde::Serialize;
use shell::Segment;
use std::path::{Path, PathBuf};
use word::base_name;

/// What an "allow always" answer grants (and a "reject always" refuses) for a session,
/// or with `remember = "user"` for the user: a bash command prefix, or a host the tool
/// `network` may reach. The two kinds never stand for each other: a host grant allows no
/// command and a command grant no host.
///
/// Persisted (session logs, `grants.json`, audit lines) as before for a command prefix,
/// an array of its words (`["git","push"]`), so every grant already written reads back
/// as one; a host grant is an object, `{"host":"index.crates.io"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Grant {
    /// A command prefix, e.g. ["git", "push"]. It acts as an allow rule for that prefix,
    /// matched word for word (a `*` in a grant is a literal word, not a wildcard).
    Command(Vec<String>),
    /// A host (in the form [`network::normalize_host`] gives), on any port.
    Host(String),
}

impl Grant {
    /// The prefix a command names, word by word (`git push`).
    pub fn of(command: &str) -> Grant {
        Grant::Command(command.split_whitespace().map(str::to_owned).collect())
    }

    /// The grant of a host, in the one form hosts are compared in (`None`: not a host).
    pub fn host(host: &str) -> Option<Grant> {
        network::normalize_host(host).map(Grant::Host)
    }

    /// The grants a person may mean by `text` as [`Grant::display`] shows them: the
    /// command prefix, and when it reads `network HOST` the host grant too (revoking by
    /// what was shown forgets whichever of them there is).
    pub fn named(text: &str) -> Vec<Grant> {
        let mut named = vec![Grant::of(text)];
        let words: Vec<&str> = text.split_whitespace().collect();
        if let ["network", host] = words.as_slice()
            && let Some(host) = Grant::host(host)
        {
            named.push(host);
        }
        named
    }

    /// The command prefix, for a command grant.
    pub fn words(&self) -> Option<&[String]> {
        match self {
            Grant::Command(words) => Some(words),
            Grant::Host(_) => None,
        }
    }

    /// How permission prompts and messages show it: the command prefix (`git push`), or
    /// `network HOST`.
    pub fn display(&self) -> String {
        match self {
            Grant::Command(words) => words.join(" "),
            Grant::Host(host) => format!("network {host}"),
        }
    }
}

impl Serialize for Grant {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Grant::Command(words) => words.serialize(serializer),
            Grant::Host(host) => {
                use serde::ser::SerializeMap;
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("host", host)?;
                map.end()
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for Grant {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Words(Vec<String>),
            Host { host: String },
        }
        match Stored::deserialize(deserializer)? {
            Stored::Words(words) => Ok(Grant::Command(words)),
            Stored::Host { host } => Grant::host(&host)
                .ok_or_else(|| serde::de::Error::custom(format!("`{host}` is not a host"))),
        }
    }
}

/// What decided a segment (or a call that has no segments): the part of `explain` that
/// lets a rule author see which of their lines took effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Cause {
    /// A configured rule: its place in `[[permissions.rules]]` (0-based) and its file:line.
    Rule {
        index: usize,
        rule: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        origin: Option<String>,
    },
    /// An "allow always" grant of the session.
    Grant { prefix: String },
    /// The mode's default for what no rule covers.
    Mode { mode: Mode },
    /// Read-only mode: the read-only list allows it, or the mode refuses it.
    ReadOnly,
    /// Its command cannot be known before it runs (P5).
    Opaque { why: String },
    /// An argument names what a deny rule names, under a program that is not a known
    /// wrapper (P6).
    UnknownWrapper {
        word: String,
        index: usize,
        rule: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        origin: Option<String>,
    },
    /// An argument of a program with no row (not a wrapper, not in `embedded/`) parses as
    /// a command line with a segment that a deny rule names (P3b's safety net).
    CommandInArgument {
        argument: String,
        index: usize,
        rule: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        origin: Option<String>,
    },
    /// Inline code given to a program that runs it (P8), not shown harmless (`why`): a
    /// deny rule's words stand in it (then `rule` says which), or it is opaque while a
    /// deny or ask rule exists (`rule` absent).
    InlineCode {
        language: String,
        why: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        rule: Option<RuleRef>,
    },
    /// Variables set in front of it that the judge cannot show harmless (P8, issue 41):
    /// one it has not met may make the program run other code (asked in `auto` under a
    /// deny or ask rule, refused in `read-only`); one naming a file to write is a write
    /// (refused in `read-only`).
    Environment { variables: Vec<word::Assigned> },
    /// It runs nothing (only assignments or input redirections).
    RunsNothing,
    /// The call asks to run outside the sandbox (issue 27), and neither a mode nor a
    /// grant allows that: only a rule naming the command does.
    Escalation,
    /// The call as a whole: a tool other than bash, or a bash call without a command.
    Call,
}

/// A configured rule as a cause names it: its place, its text and its file:line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleRef {
    pub index: usize,
    pub rule: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// One segment's verdict, with what it was judged as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SegmentJudgement {
    /// Its words with quoting removed (see [`Segment`]).
    pub words: Vec<String>,
    /// The wrappers it was found through, outermost first.
    pub via: Vec<String>,
    /// Why its command cannot be known before it runs, when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opaque: Option<String>,
    pub writes_redirect: bool,
    pub decision: Decision,
    pub reason: String,
    pub cause: Cause,
}

impl SegmentJudgement {
    /// The chain that led to it, as `timeout -> nice -> rm`.
    pub fn chain(&self) -> String {
        let mut chain = self.via.clone();
        chain.push(self.words.first().cloned().unwrap_or_default());
        chain.join(" -> ")
    }
}

/// The policy's verdict on one tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Judgement {
    /// What the waterfall does with the call: run it, ask the user, or veto it.
    pub decision: Decision,
    /// Human text saying why: which rule matched which segment, or which mode default applied.
    pub reason: String,
    /// What decided the call: the cause of its first segment with the call's decision, or
    /// of the call as a whole when it has no segments.
    pub cause: Cause,
    /// When `decision == Ask`: what an "allow always" answer grants (one prefix per segment
    /// that caused the ask, deduplicated); empty when nothing can be granted safely
    /// (unparsable or opaque command).
    pub grants_on_allow_always: Vec<Grant>,
    /// Every segment of a bash call with its own verdict, in the order found.
    pub segments: Vec<SegmentJudgement>,
    /// The call asks to run outside the sandbox and was judged so (a bash call with a
    /// valid `sandbox: "off"` under the sandbox executor): the tool runs it outside only
    /// then, and the person is asked about it as such.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Escalation>,
}

impl Judgement {
    fn of_call(decision: Decision, reason: String) -> Judgement {
        Judgement {
            decision,
            reason,
            cause: Cause::Call,
            grants_on_allow_always: Vec::new(),
            segments: Vec::new(),
            escalation: None,
        }
    }
}

/// Tools whose first argument is a subcommand: an "allow always" for `git push` grants
/// `git push`, not all of `git`.
const SUBCOMMAND_TOOLS: &[&str] = &[
    "git",
    "cargo",
    "npm",
    "npx",
    "pnpm",
    "yarn",
    "go",
    "docker",
    "kubectl",
    "pip",
    "uv",
    "make",
    "systemctl",
    "apt",
    "apt-get",
    "brew",
    "gh",
];

/// The permission rules and read-only prefixes of a config, ready to judge calls.
#[derive(Debug, Clone)]
pub struct Policy {
    rules: Vec<Rule>,
    read_only: Vec<Vec<String>>,
    /// What mode `auto` does with a host nothing else decides (`[exec.sandbox.network]
    /// default`).
    network_default: NetworkDefault,
    /// The command names of the deny rules for bash (their first word, not `*`): what P3b's
    /// safety net and P8's reading look for, kept once so that a line without them costs
    /// nothing more.
    denied_names: Vec<String>,
}

/// The tool each outbound connection of a sandboxed command is a call of (E10).
pub const NETWORK_TOOL: &str = "network";

/// A [`PermissionRule`] with its command split into words.
#[derive(Debug, Clone)]
struct Rule {
    index: usize,
    origin: Option<String>,
    tool: String,
    /// `None`: the rule covers every call of its tool.
    prefix: Option<Vec<String>>,
    /// For the file tools: the glob of paths it covers (`None`: every path).
    path: Option<String>,
    /// For `network`: the hosts it covers (`None`: every host, or `host_error`).
    host: Option<HostPattern>,
    /// Why its `host` is not a host pattern: such a rule matches nothing, and
    /// [`check_config`] refuses the config that holds it.
    host_error: Option<String>,
    /// For `network`: the port it covers (`None`: every port).
    port: Option<u16>,
    action: Decision,
}

impl Rule {
    fn new(index: usize, rule: &PermissionRule) -> Rule {
        // An empty command prefix matches everything, exactly like an absent one.
        let prefix = rule
            .command
            .as_deref()
            .map(|c| c.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .filter(|words| !words.is_empty());
        let (host, host_error) = match rule.host.as_deref().map(HostPattern::parse) {
            None => (None, None),
            Some(Ok(pattern)) => (Some(pattern), None),
            Some(Err(why)) => (None, Some(why)),
        };
        Rule {
            index,
            origin: rule.origin.clone(),
            tool: rule.tool.clone(),
            prefix,
            path: rule.path.clone().filter(|p| !p.is_empty()),
            host,
            host_error,
            port: rule.port,
            action: rule.action,
        }
    }

    /// Whether the rule names hosts or ports: then it is only about the tool `network`.
    fn names_hosts(&self) -> bool {
        self.host.is_some() || self.host_error.is_some() || self.port.is_some()
    }

    /// Whether the rule covers a connection to `host`:`port` (a call of `network` it
    /// covers the tool of): its host pattern, if any, matches and its port, if any, is
    /// that one. A rule whose host is not a pattern matches nothing.
    fn matches_host(&self, host: &str, port: u16) -> bool {
        self.host_error.is_none()
            && self.host.as_ref().is_none_or(|h| h.matches(host))
            && self.port.is_none_or(|p| p == port)
    }

    /// How the rule reads in messages: "rule bash `rm` (deny)", "rule * (every call, ask)".
    fn describe(&self) -> String {
        if self.names_hosts() {
            let mut what = Vec::new();
            if let Some(host) = &self.host {
                what.push(format!("host `{host}`"));
            }
            if let Some(port) = self.port {
                what.push(format!("port {port}"));
            }
            if self.host_error.is_some() {
                what.push("host (not a host pattern)".into());
            }
            return format!(
                "rule {} {} ({})",
                self.tool,
                what.join(" "),
                action(self.action)
            );
        }
        if let Some(path) = &self.path {
            return format!("rule {} path `{path}` ({})", self.tool, action(self.action));
        }
        match &self.prefix {
            Some(words) => format!(
                "rule {} `{}` ({})",
                self.tool,
                words.join(" "),
                action(self.action)
            ),
            None => format!("rule {} (every call, {})", self.tool, action(self.action)),
        }
    }

    fn cause(&self) -> Cause {
        Cause::Rule {
            index: self.index,
            rule: self.describe(),
            origin: self.origin.clone(),
        }
    }

    /// Whether the rule is about `tool`: its name or a glob matching it (`mcp__github__*`).
    /// A rule with a `path` is only about the file tools.
    /// A rule with a `host` or `port` only about `network`.
    fn covers_tool(&self, tool: &str) -> bool {
        (self.path.is_none() || FILE_TOOLS.contains(&tool))
            && (!self.names_hosts() || tool == NETWORK_TOOL)
            && glob_matches(&self.tool, tool)
    }

    /// Whether the rule's prefix matches `words`. A `*` matches any one word. Deny and ask
    /// rules also match a command name by its last path component (`/bin/rm` for `rm`):
    /// a restriction must not be dodged by spelling the path, while an allowance must not
    /// extend to a same-named program elsewhere (`./ls`).
    fn matches(&self, words: &[String]) -> bool {
        let Some(prefix) = &self.prefix else {
            return true;
        };
        prefix.len() <= words.len()
            && prefix.iter().zip(words).enumerate().all(|(i, (p, w))| {
                p == "*"
                    || p == w
                    || (i == 0
                        && self.action != Decision::Allow
                        && !p.contains('/')
                        && base_name(w) == p)
            })
    }

    /// Whether the rule decides a segment of `words`; `opaque_tokens` are the segment's
    /// words cut at punctuation when its command cannot be known. A prefix rule matches a
    /// known command; of an opaque one only a deny rule whose words stand in it (P5), and
    /// a rule for every call only when it does not allow: what cannot be known is never
    /// allowed by a rule.
    fn applies(&self, words: &[String], opaque_tokens: Option<&[&str]>) -> bool {
        match (&self.prefix, opaque_tokens) {
            (None, None) => true,
            (None, Some(_)) => self.action != Decision::Allow,
            (Some(_), None) => !words.is_empty() && self.matches(words),
            (Some(_), Some(tokens)) => self.action == Decision::Deny && self.appears_in(tokens),
        }
    }

    /// Whether the rule's words stand, one after another, among `tokens` (the words of an
    /// opaque segment cut at shell punctuation): "a deny rule whose words appear literally
    /// in an opaque segment denies" (P5).
    fn appears_in(&self, tokens: &[&str]) -> bool {
        let Some(prefix) = &self.prefix else {
            return false;
        };
        tokens.windows(prefix.len()).any(|run| {
            prefix.iter().zip(run).enumerate().all(|(i, (p, t))| {
                p == "*" || p == t || (i == 0 && !p.contains('/') && base_name(t) == p)
            })
        })
    }
}

/// The file tools, judged by path ([`Policy::judge_in`]).
pub const FILE_TOOLS: [&str; 3] = ["read_file", "edit_file", "write_file"];

/// Where a session works, for judging the file tools: its cwd (relative paths and path
/// rules are read against it), the roots it may write without being asked (cwd and the
/// editor's additional directories), and under the sandbox executor the roots outside
/// which writes are denied (the same roots plus `[exec.sandbox] writable`: one definition).
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub cwd: &'a Path,
    pub roots: &'a [PathBuf],
    /// `Some` exactly when commands run in the sandbox executor: then a bash call's
    /// `sandbox: "off"` asks to leave it (see [`Escalation`]).
    pub sandbox_roots: Option<&'a [PathBuf]>,
    /// The tool says it only reads (an MCP tool's `readOnlyHint`): in read-only mode a
    /// rule may then allow it; without the hint read-only mode refuses it whatever the
    /// rules say.
    pub read_only_tool: bool,
    /// Expands a word's pathname patterns against the session's file system, as bash will
    /// when the line runs (P6: `logsave /dev/null /usr/bin/r[m] x`). `None`: patterns are
    /// matched against the names deny rules give ([`globs::program_names`]).
    pub globs: Option<&'a dyn globs::Globs>,
}

/// `path` made absolute against `cwd` and cleaned without touching the disk (`.` dropped,
/// `..` taken back), so `a/../secrets/x` is judged as `secrets/x`.
pub fn resolve_path(cwd: &Path, path: &str) -> PathBuf {
    use std::path::Component;
    let joined = if Path::new(path).is_absolute() {
        PathBuf::from(path)
    } else {
        cwd.join(path)
    };
    let mut out = PathBuf::from("/");
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// A tool name against a pattern where `*` matches any run of characters and `?` one
/// (`mcp__github__*`); tool names have no path semantics.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A path against a glob: `*` any run within one component, `**` any run across them
/// (`**/` also none), `?` one character other than `/`.
pub fn path_glob(p: &[u8], s: &[u8]) -> bool {
    // Each (pattern position, text position) is decided once: a pattern full of `**`
    // (a project file is untrusted input) costs at most patterns x text^2 steps, not an
    // exponential search.
    let mut memo = vec![None; (p.len() + 1) * (s.len() + 1)];
    path_glob_at(p, s, 0, 0, &mut memo)
}

fn path_glob_at(p: &[u8], s: &[u8], pi: usize, si: usize, memo: &mut [Option<bool>]) -> bool {
    let key = pi * (s.len() + 1) + si;
    if let Some(known) = memo[key] {
        return known;
    }
    let text = &s[si..];
    let matched = match &p[pi..] {
        [] => text.is_empty(),
        [b'*', b'*', rest @ ..] => {
            (matches!(rest, [b'/', ..]) && path_glob_at(p, s, pi + 3, si, memo))
                || (si..=s.len()).any(|j| path_glob_at(p, s, pi + 2, j, memo))
        }
        [b'*', ..] => (si..=s.len())
            .take_while(|&j| j == si || s[j - 1] != b'/')
            .any(|j| path_glob_at(p, s, pi + 1, j, memo)),
        [b'?', ..] => {
            matches!(text, [c, ..] if *c != b'/') && path_glob_at(p, s, pi + 1, si + 1, memo)
        }
        [c, ..] => matches!(text, [d, ..] if d == c) && path_glob_at(p, s, pi + 1, si + 1, memo),
    };
    memo[key] = Some(matched);
    matched
}

/// Command prefixes matched the way a deny rule matches them (a path spelling of the
/// command included, an opaque segment by the words that stand in it): what
/// `[[hooks.command]] commands` uses, so a hook sees every call a deny rule with the same
/// words would catch.
#[derive(Debug, Clone)]
pub struct CommandMatcher(Vec<Rule>);

impl CommandMatcher {
    /// A matcher for `prefixes` (each split into words; a `*` matches any one word).
    pub fn new(prefixes: &[String]) -> Self {
        CommandMatcher(
            prefixes
                .iter()
                .enumerate()
                .map(|(index, prefix)| {
                    Rule::new(
                        index,
                        &PermissionRule {
                            tool: "bash".into(),
                            command: Some(prefix.clone()),
                            action: Decision::Deny,
                            ..PermissionRule::default()
                        },
                    )
                })
                .collect(),
        )
    }

    /// Whether a segment of a judged call matches one of the prefixes.
    pub fn matches(&self, segments: &[SegmentJudgement]) -> bool {
        segments.iter().any(|segment| {
            let opaque = segment.opaque.as_ref().map(|_| tokens(&segment.words));
            self.0
                .iter()
                .any(|rule| rule.applies(&segment.words, opaque.as_deref()))
        })
    }
}

/// The words of an opaque text cut at whitespace and shell punctuation, so that `rm` is
/// found in `$(echo;rm` or `'rm x'`.
fn tokens(texts: &[String]) -> Vec<&str> {
    texts
        .iter()
        .flat_map(|t| {
            t.split(|c: char| c.is_whitespace() || ";|&()<>'\"`$={}\\".contains(c))
                .filter(|t| !t.is_empty())
        })
        .collect()
}

/// One segment's verdict while judging: what it gets, why, what decided it, and what an
/// "allow always" answer would grant for it (only for an ask from the mode default).
struct Verdict {
    decision: Decision,
    reason: String,
    cause: Cause,
    grant: Option<Grant>,
}

impl Verdict {
    fn new(decision: Decision, reason: String, cause: Cause) -> Verdict {
        Verdict {
            decision,
            reason,
            cause,
            grant: None,
        }
    }
}

impl Policy {
    /// Compiles the rules and read-only prefixes of `config`.
    pub fn new(config: &PermissionsConfig) -> Self {
        Policy {
            rules: config
                .rules
                .iter()
                .enumerate()
                .map(|(i, r)| Rule::new(i, r))
                .collect(),
            read_only: config
                .read_only_commands
                .iter()
                .map(|c| c.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
                .filter(|words| !words.is_empty())
                .collect(),
            network_default: NetworkDefault::default(),
            denied_names: Vec::new(),
        }
        .with_denied_names()
    }

    /// Fills `denied_names` from the rules.
    fn with_denied_names(mut self) -> Self {
        let mut names: Vec<String> = self
            .naming_deny_rules()
            .filter_map(|r| r.prefix.as_ref().and_then(|p| p.first()).cloned())
            .collect();
        names.sort();
        names.dedup();
        self.denied_names = names;
        self
    }

    /// The policy a whole config judges with: its `[permissions]` and its
    /// `[exec.sandbox.network]` (see [`Policy::with_network`]).
    pub fn of_config(config: &Config) -> Self {
        Policy::new(&config.permissions).with_network(&config.exec.sandbox.network)
    }

    /// Adds what `[exec.sandbox.network]` says about hosts: each `allow` and `deny` entry
    /// as the rule it is sugar for (`tool = "network"`, its host and port, the action;
    /// numbered after the configured rules, its origin naming the key), and `default`
    /// for mode `auto`. An entry that is not `HOST`, `HOST:PORT` or `[V6]:PORT` matches
    /// nothing ([`check_network`] refuses it).
    pub fn with_network(mut self, network: &NetworkConfig) -> Self {
        self.network_default = network.default;
        for (list, action) in [
            (&network.allow, Decision::Allow),
            (&network.deny, Decision::Deny),
        ] {
            for entry in list {
                let index = self.rules.len();
                self.rules
                    .push(sugar_rule(index, entry, action, list_name(action)));
            }
        }
        self
    }

    /// Judges a call of `tool` with JSON `arguments` (for bash: {"command": "...", ...}) in
    /// `mode`, with the session's allow-always `grants`. The one function every caller uses.
    pub fn judge(
        &self,
        tool: &str,
        arguments: &serde_json::Value,
        mode: Mode,
        grants: &[Grant],
    ) -> Judgement {
        self.judge_in(tool, arguments, mode, grants, None)
    }

    /// [`Policy::judge`] knowing where the session works: the file tools' paths are
    /// resolved against `place.cwd`, and writes outside its roots are asked (or, under
    /// the sandbox, denied). Without a place, paths are judged as written, against `/`.
    ///
    /// Under the sandbox (`place.sandbox_roots`), a bash call with a valid `sandbox:
    /// "off"` ([`Escalation::requested`]) asks to run outside it (issue 27): a segment
    /// that only a mode, a grant or a rule naming no command would allow is asked
    /// instead, deny and ask rules stand, and nothing is offered to "allow always" (an
    /// escalation is allowed one call at a time). Elsewhere the argument changes nothing.
    pub fn judge_in(
        &self,
        tool: &str,
        arguments: &serde_json::Value,
        mode: Mode,
        grants: &[Grant],
        place: Option<&Place<'_>>,
    ) -> Judgement {
        if FILE_TOOLS.contains(&tool) {
            return match arguments.get("path").and_then(|p| p.as_str()) {
                // Under the sandbox a valid `sandbox: "off"` asks to reach the path
                // outside it, as for bash ([`Policy::judge_file_escalation`]).
                Some(path) => match place
                    .filter(|p| p.sandbox_roots.is_some())
                    .and_then(|_| Escalation::requested(arguments).ok().flatten())
                {
                    Some(escalation) => {
                        self.judge_file_escalation(tool, path, mode, place, escalation)
                    }
                    None => self.judge_file(tool, path, mode, place),
                },
                None => Judgement::of_call(
                    Decision::Deny,
                    format!("{tool} call without a string `path` argument"),
                ),
            };
        }
        if tool == NETWORK_TOOL {
            return self.judge_network(arguments, mode, grants);
        }
        if tool == "bash" {
            let globs = place.and_then(|p| p.globs);
            let escalation = place
                .filter(|p| p.sandbox_roots.is_some())
                .and_then(|_| Escalation::requested(arguments).ok().flatten());
            match arguments.get("command").and_then(|c| c.as_str()) {
                Some(command) => match escalation {
                    Some(escalation) => {
                        self.judge_escalation(command, mode, grants, escalation, globs)
                    }
                    None => self.judge_bash(command, mode, grants, globs),
                },
                None => Judgement::of_call(
                    Decision::Deny,
                    "bash call without a string `command` argument".into(),
                ),
            }
        } else {
            self.judge_tool(tool, mode, place.is_some_and(|p| p.read_only_tool))
        }
    }

    /// The rules without a command prefix that cover `tool`.
    fn tool_wide<'a>(&'a self, tool: &'a str) -> impl Iterator<Item = &'a Rule> + 'a {
        self.rules
            .iter()
            .filter(move |r| r.prefix.is_none() && r.path.is_none() && r.covers_tool(tool))
    }

    /// A file tool (spec/files.md F7): rules by path, read-only mode allows reading only,
    /// writes outside the session's roots are asked even in auto (only a path rule allows
    /// them), and under the sandbox denied outside its writable roots.
    fn judge_file(
        &self,
        tool: &str,
        raw: &str,
        mode: Mode,
        place: Option<&Place<'_>>,
    ) -> Judgement {
        let root = Path::new("/");
        let cwd = place.map(|p| p.cwd).unwrap_or(root);
        let path = resolve_path(cwd, raw);
        let shown = path.display().to_string();
        let writes = tool != "read_file";
        let inside = |roots: &[PathBuf]| {
            roots
                .iter()
                .any(|r| path.starts_with(resolve_path(root, &r.to_string_lossy())))
        };
        let in_roots = place.is_none_or(|p| inside(p.roots));
        let call = |decision, reason: String, cause| Judgement {
            cause,
            ..Judgement::of_call(decision, reason)
        };
        if writes && mode == Mode::ReadOnly {
            return call(
                Decision::Deny,
                format!("read-only mode: tool `{tool}` changes {shown}"),
                Cause::ReadOnly,
            );
        }
        if writes
            && let Some(sandbox) = place.and_then(|p| p.sandbox_roots)
            && !inside(sandbox)
        {
            return call(
                Decision::Deny,
                format!(
                    "{shown} is outside the sandbox's writable roots (to write it there, call \
                     {tool} again with sandbox: \"off\" and a justification: the person is asked)"
                ),
                Cause::Call,
            );
        }
        let relative = path
            .strip_prefix(cwd)
            .ok()
            .map(|r| r.to_string_lossy().into_owned());
        let rule = self
            .rules
            .iter()
            .filter(|r| r.prefix.is_none() && r.covers_tool(tool))
            .filter(|r| match &r.path {
                None => true,
                Some(glob) if glob.starts_with('/') => path_glob(glob.as_bytes(), shown.as_bytes()),
                Some(glob) => relative
                    .as_deref()
                    .is_some_and(|rel| path_glob(glob.as_bytes(), rel.as_bytes())),
            })
            .max_by_key(|r| (r.action, r.path.is_some()));
        if let Some(rule) = rule {
            // Outside the roots only a rule naming paths allows a write; `*` does not.
            if writes && !in_roots && rule.action == Decision::Allow && rule.path.is_none() {
                return call(
                    Decision::Ask,
                    format!("{shown} is outside the session's directories"),
                    Cause::Call,
                );
            }
            return call(
                rule.action,
                format!("{} matches tool `{tool}` on {shown}", rule.describe()),
                rule.cause(),
            );
        }
        if writes && !in_roots {
            return call(
                Decision::Ask,
                format!("{shown} is outside the session's directories"),
                Cause::Call,
            );
        }
        let decision = match (writes, mode, in_roots) {
            (false, _, true)
            | (false, Mode::Auto | Mode::ReadOnly, false)
            | (true, Mode::Auto, _) => Decision::Allow,
            _ => Decision::Ask,
        };
        call(
            decision,
            format!("tool `{tool}` on {shown} (mode {})", mode.id()),
            Cause::Mode { mode },
        )
    }

    /// A tool other than bash: only tool-wide rules apply. `read_only_tool`: the tool
    /// says it only reads (see [`Place::read_only_tool`]).
    fn judge_tool(&self, tool: &str, mode: Mode, read_only_tool: bool) -> Judgement {
        // `bash_output` only reads output already collected; `bash_kill` stops a command
        // that was itself allowed, but changes state, so read-only mode refuses it.
        let (default, kind) = match (tool, mode) {
            ("bash_output", _) => (Decision::Allow, "reads command output"),
            // The model's plan: it changes nothing but what the editor shows.
            ("todo_write", _) => (Decision::Allow, "changes only the session's plan"),
            ("bash_kill", Mode::ReadOnly) => (Decision::Deny, "stops a command"),
            ("bash_kill", _) => (Decision::Allow, "stops a command"),
            (_, Mode::Ask) => (Decision::Ask, "is not covered by any rule"),
            (_, Mode::Auto) => (Decision::Allow, "is not covered by any rule"),
            (_, Mode::ReadOnly) => (Decision::Deny, "is not known to be read-only"),
        };
        // A tool that says it only reads may run in read-only mode, but only when a rule
        // allows it: the hint is its author's word, so the person's rule is the proof.
        if mode == Mode::ReadOnly && default == Decision::Deny && read_only_tool {
            let rule = self.tool_wide(tool).max_by_key(|r| r.action);
            let mut judgement = match rule {
                Some(rule) if rule.action == Decision::Allow => Judgement {
                    cause: rule.cause(),
                    ..Judgement::of_call(
                        Decision::Allow,
                        format!(
                            "{} matches tool `{tool}`, which says it only reads",
                            rule.describe()
                        ),
                    )
                },
                _ => Judgement::of_call(
                    Decision::Deny,
                    format!(
                        "read-only mode: tool `{tool}` says it only reads, but no rule allows it"
                    ),
                ),
            };
            if judgement.decision == Decision::Deny {
                judgement.cause = Cause::ReadOnly;
            }
            return judgement;
        }
        // Read-only mode vetoes whatever may change state; no rule can loosen that.
        if mode == Mode::ReadOnly && default == Decision::Deny {
            let mut judgement = Judgement::of_call(
                Decision::Deny,
                format!("read-only mode: tool `{tool}` {kind}"),
            );
            judgement.cause = Cause::ReadOnly;
            return judgement;
        }
        match self.tool_wide(tool).max_by_key(|r| r.action) {
            Some(rule) => Judgement {
                cause: rule.cause(),
                ..Judgement::of_call(
                    rule.action,
                    format!("{} matches tool `{tool}`", rule.describe()),
                )
            },
            None => Judgement {
                cause: Cause::Mode { mode },
                ..Judgement::of_call(
                    default,
                    format!("tool `{tool}` {kind} (mode {})", mode.id()),
                )
            },
        }
    }

    /// A connection of a sandboxed command (E10), `{host, port, ...}`: the strongest rule
    /// that covers the host and port, else a grant of the host, else the mode (`ask`
    /// asks, `auto` does what `[exec.sandbox.network] default` says, `read-only` denies).
    /// An ask offers the host to "allow always" (any port).
    fn judge_network(
        &self,
        arguments: &serde_json::Value,
        mode: Mode,
        grants: &[Grant],
    ) -> Judgement {
        let host = arguments
            .get("host")
            .and_then(|h| h.as_str())
            .and_then(network::normalize_host);
        let port = arguments
            .get("port")
            .and_then(|p| p.as_u64())
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0);
        let (host, port) = match (host, port) {
            (Some(host), Some(port)) => (host, port),
            (None, _) => {
                return Judgement::of_call(
                    Decision::Deny,
                    "network call without a valid `host` (a host name or an IP address)".into(),
                );
            }
            (_, None) => {
                return Judgement::of_call(
                    Decision::Deny,
                    "network call without a valid `port` (a number from 1 to 65535)".into(),
                );
            }
        };
        let target = network::target(&host, port);
        let call = |decision, reason: String, cause| Judgement {
            cause,
            ..Judgement::of_call(decision, reason)
        };
        let rule = self
            .rules
            .iter()
            .filter(|r| r.prefix.is_none() && r.path.is_none())
            .filter(|r| r.covers_tool(NETWORK_TOOL) && r.matches_host(&host, port))
            .max_by_key(|r| r.action);
        let mut judged = if let Some(rule) = rule {
            call(
                rule.action,
                format!("{} matches {target}", rule.describe()),
                rule.cause(),
            )
        } else if let Some(grant) = grants
            .iter()
            .find(|g| matches!(g, Grant::Host(granted) if *granted == host))
        {
            call(
                Decision::Allow,
                format!(
                    "`{}` is allowed always in this session and matches {target}",
                    grant.display()
                ),
                Cause::Grant {
                    prefix: grant.display(),
                },
            )
        } else {
            let uncovered = format!("{target} is not covered by any rule");
            match mode {
                Mode::Ask => call(
                    Decision::Ask,
                    format!("{uncovered} (mode ask)"),
                    Cause::Mode { mode },
                ),
                Mode::Auto => {
                    let (decision, word) = match self.network_default {
                        NetworkDefault::Ask => (Decision::Ask, "ask"),
                        // This machine's own services are outside the sandbox, and a
                        // non-public address is someone's local network: a default
                        // opens neither, a rule naming the host does (issue 40).
                        NetworkDefault::Allow if network::is_local(&host) => (
                            Decision::Ask,
                            "allow, which does not cover this machine or a non-public address",
                        ),
                        NetworkDefault::Allow => (Decision::Allow, "allow"),
                        NetworkDefault::Deny => (Decision::Deny, "deny"),
                    };
                    call(
                        decision,
                        format!("{uncovered} (mode auto: [exec.sandbox.network] default = {word})"),
                        Cause::Mode { mode },
                    )
                }
                Mode::ReadOnly => call(
                    Decision::Deny,
                    format!("read-only mode: {uncovered}, and no connection is allowed by default"),
                    Cause::ReadOnly,
                ),
            }
        };
        if judged.decision == Decision::Ask {
            judged.grants_on_allow_always = vec![Grant::Host(host)];
        }
        judged
    }

    /// A bash call that asks to run outside the sandbox: judged as any, then every
    /// segment allowed by something other than a rule naming its command is asked.
    fn judge_escalation(
        &self,
        command: &str,
        mode: Mode,
        grants: &[Grant],
        escalation: Escalation,
        globs: Option<&dyn globs::Globs>,
    ) -> Judgement {
        let mut judged = self.judge_bash(command, mode, grants, globs);
        for segment in &mut judged.segments {
            // A mode's own ask becomes this one too: a `permission` hook may answer
            // what only the mode asks, and an escalation must reach the person.
            let raised = match (segment.decision, &segment.cause) {
                (Decision::Allow, Cause::RunsNothing) => false,
                (Decision::Allow, _) => !self.named_by_allow_rule(segment),
                (Decision::Ask, Cause::Mode { .. }) => true,
                _ => false,
            };
            if raised {
                segment.decision = Decision::Ask;
                segment.reason = format!(
                    "no rule naming `{}` allows it outside the sandbox",
                    shorten(&segment.words.join(" "))
                );
                segment.cause = Cause::Escalation;
            }
        }
        if let Some(decision) = judged.segments.iter().map(|s| s.decision).max() {
            judged.decision = decision;
            judged.cause = judged
                .segments
                .iter()
                .find(|s| s.decision == decision)
                .map(|s| s.cause.clone())
                .unwrap_or(Cause::Call);
            judged.reason = summarize(&judged.segments, decision);
        }
        judged.reason = format!(
            "{}. Outside the sandbox because: {}",
            judged.reason, escalation.justification
        );
        // Allowed one call at a time: an "always" answer must not let later escalations
        // through silently, so it grants nothing (see ARCHITECTURE.md).
        judged.grants_on_allow_always.clear();
        judged.escalation = Some(escalation);
        judged
    }

    /// Whether an allow rule whose prefix names a command (its first word is not `*`)
    /// matches `segment`: the only thing that may let a segment out of the sandbox
    /// without asking. (Another allow rule may be the one its cause names: of equal
    /// rules the judge keeps the last.)
    fn named_by_allow_rule(&self, segment: &SegmentJudgement) -> bool {
        segment.opaque.is_none()
            && self.rules.iter().any(|rule| {
                rule.action == Decision::Allow
                    && rule.covers_tool("bash")
                    && rule
                        .prefix
                        .as_ref()
                        .and_then(|prefix| prefix.first())
                        .is_some_and(|first| first != "*")
                    && rule.applies(&segment.words, None)
            })
    }

    fn judge_bash(
        &self,
        command: &str,
        mode: Mode,
        grants: &[Grant],
        globs: Option<&dyn globs::Globs>,
    ) -> Judgement {
        let segments = match shell::segments(command) {
            Ok(segments) => segments,
            // Unknown as a whole: one opaque segment standing for the line, never allowed
            // by a prefix rule, and nothing can be granted.
            Err(why) => vec![Segment {
                words: vec![command.to_owned()],
                opaque: Some(format!("the command cannot be parsed: {why}")),
                ..Segment::default()
            }],
        };
        if segments.is_empty() {
            return match self.tool_wide("bash").max_by_key(|r| r.action) {
                Some(rule) => Judgement {
                    cause: rule.cause(),
                    ..Judgement::of_call(
                        rule.action,
                        format!("{} matches a command that runs nothing", rule.describe()),
                    )
                },
                None => Judgement {
                    cause: Cause::RunsNothing,
                    ..Judgement::of_call(Decision::Allow, "the command runs nothing".into())
                },
            };
        }
        let mut grants_on_allow_always: Vec<Grant> = Vec::new();
        let judged: Vec<SegmentJudgement> = segments
            .into_iter()
            .map(|segment| {
                let verdict = self.judge_segment(&segment, mode, grants, globs);
                if let Some(grant) = verdict
                    .grant
                    .filter(|g| !grants_on_allow_always.contains(g))
                {
                    grants_on_allow_always.push(grant);
                }
                SegmentJudgement {
                    words: segment.words,
                    via: segment.via,
                    opaque: segment.opaque,
                    writes_redirect: segment.writes_redirect,
                    decision: verdict.decision,
                    reason: verdict.reason,
                    cause: verdict.cause,
                }
            })
            .collect();
        let decision = judged
            .iter()
            .map(|s| s.decision)
            .max()
            .unwrap_or(Decision::Allow);
        if decision != Decision::Ask {
            grants_on_allow_always.clear();
        }
        let cause = judged
            .iter()
            .find(|s| s.decision == decision)
            .map(|s| s.cause.clone())
            .unwrap_or(Cause::Call);
        Judgement {
            decision,
            reason: summarize(&judged, decision),
            cause,
            grants_on_allow_always,
            segments: judged,
            escalation: None,
        }
    }

    /// One segment's verdict.
    fn judge_segment(
        &self,
        segment: &Segment,
        mode: Mode,
        grants: &[Grant],
        globs: Option<&dyn globs::Globs>,
    ) -> Verdict {
        let shown = quote_segment(segment);
        // What matches: tool-wide rules always; prefix rules and grants only when the
        // command is known; deny rules also by their words inside an opaque segment.
        let named = segment.opaque.is_none() && !segment.words.is_empty();
        let opaque_tokens = segment.opaque.as_ref().map(|_| tokens(&segment.words));
        let rule = self
            .rules
            .iter()
            .filter(|r| r.covers_tool("bash"))
            .filter(|r| r.applies(&segment.words, opaque_tokens.as_deref()))
            .max_by_key(|r| r.action);
        let grant = grants.iter().find(|g| {
            g.words()
                .is_some_and(|w| named && !w.is_empty() && segment.words.starts_with(w))
        });
        // A grant acts as an allow rule, so it only decides when no rule matched.
        let matched = match (rule, grant) {
            (Some(rule), _) => Some(Verdict::new(
                rule.action,
                match &segment.opaque {
                    Some(why) => format!(
                        "{} matches {shown}, which cannot be known before it runs: {why}",
                        rule.describe()
                    ),
                    None => format!("{} matches {shown}", rule.describe()),
                },
                rule.cause(),
            )),
            (None, Some(grant)) => Some(Verdict::new(
                Decision::Allow,
                format!(
                    "`{}` is allowed always in this session and matches {shown}",
                    grant.display()
                ),
                Cause::Grant {
                    prefix: grant.display(),
                },
            )),
            (None, None) => None,
        };

        if mode == Mode::ReadOnly {
            if let Some((why, cause)) = self.not_read_only(segment) {
                return Verdict::new(
                    Decision::Deny,
                    format!("read-only mode: {shown} {why}"),
                    cause,
                );
            }
            // P8: code on the line not shown harmless is refused, even under a reader of
            // the read-only list (`rg --pre`).
            if named
                && let Some(code) = inline::inline_code(&segment.words, segment.stdin.as_deref())
                && let inline::Reading::Opaque(why) = &code.reading
            {
                return Verdict::new(
                    Decision::Deny,
                    format!(
                        "read-only mode: the {} code of {shown} is not shown harmless: {why}",
                        code.language
                    ),
                    Cause::InlineCode {
                        language: code.language.into(),
                        why: why.clone(),
                        rule: None,
                    },
                );
            }
            return matched.unwrap_or_else(|| {
                Verdict::new(
                    Decision::Allow,
                    format!("read-only mode: {shown} only reads"),
                    Cause::ReadOnly,
                )
            });
        }
        // P8: inline code is read: code not shown harmless is denied when a deny rule's
        // words stand in it, else asked in mode auto when a deny or ask rule exists.
        if let Some(flagged) = named
            .then(|| self.inline_code(segment, mode))
            .flatten()
            .filter(|f| matched.as_ref().is_none_or(|m| f.decision > m.decision))
        {
            return flagged;
        }
        // P8: a variable set in front of it that the judge has not met may make it run
        // other code (`PERL5DB=...`, `LUA_INIT=...`): judged as code not shown harmless.
        if let Some(flagged) = named
            .then(|| self.unknown_environment(segment, mode))
            .flatten()
            .filter(|f| matched.as_ref().is_none_or(|m| f.decision > m.decision))
        {
            return flagged;
        }
        // P6: under a program that is not a known wrapper, an argument that names what a
        // deny rule names may be run by it (`flock F rm x`): never less than ask. P3b: so
        // may an argument that parses as a command line naming it (`lockrun f 'rm x'`).
        let unknown_wrapper = named
            .then(|| {
                self.names_denied_command(segment, globs)
                    .or_else(|| self.runs_denied_argument(&segment.words))
            })
            .flatten();
        match (matched, unknown_wrapper) {
            (Some(matched), Some(flagged)) if matched.decision < Decision::Ask => return flagged,
            (Some(matched), _) => return matched,
            (None, Some(flagged)) => return flagged,
            (None, None) => {}
        }
        if segment.words.is_empty() && !segment.writes_redirect && segment.opaque.is_none() {
            return Verdict::new(
                Decision::Allow,
                format!("{shown} runs nothing"),
                Cause::RunsNothing,
            );
        }
        if let Some(why) = &segment.opaque {
            // The command could be anything, including what a deny or ask rule names, so
            // it is never allowed silently (P5).
            return Verdict::new(
                Decision::Ask,
                format!("{shown} cannot be known before it runs: {why}"),
                Cause::Opaque { why: why.clone() },
            );
        }
        match mode {
            Mode::Auto => Verdict::new(
                Decision::Allow,
                format!("no rule matches {shown} (mode auto)"),
                Cause::Mode { mode },
            ),
            _ => Verdict {
                grant: grant_for(&segment.words),
                ..Verdict::new(
                    Decision::Ask,
                    format!("no rule matches {shown} (mode {})", mode.id()),
                    Cause::Mode { mode },
                )
            },
        }
    }

    /// P6: the first argument of a segment whose program is not a known wrapper that names
    /// the command of a deny rule, as an ask. An argument bash expands (`/usr/bin/r[m]`,
    /// `r{m,x}`) is read as what it expands to ([`globs::program_names`]).
    fn names_denied_command(
        &self,
        segment: &Segment,
        globs: Option<&dyn globs::Globs>,
    ) -> Option<Verdict> {
        let words = &segment.words;
        let program = base_name(words.first()?);
        if wrappers::is_wrapper(program) {
            return None;
        }
        words.iter().enumerate().skip(1).find_map(|(at, word)| {
            // Only a word bash expands costs an expansion; the others are their base name.
            let expanded = segment
                .patterns
                .contains(&at)
                .then(|| globs::program_names(word, &self.denied_names, globs));
            let names_it = |name: &str| match &expanded {
                Some(names) => names.iter().any(|n| n == name),
                None => base_name(word) == name,
            };
            let rule = self.rules.iter().find(|r| {
                r.covers_tool("bash")
                    && r.action == Decision::Deny
                    && r.prefix
                        .as_ref()
                        .and_then(|p| p.first())
                        .is_some_and(|first| first != "*" && names_it(first))
            })?;
            Some(Verdict::new(
                Decision::Ask,
                format!(
                    "`{program}` is not a known wrapper, and its argument `{word}` is what {} names",
                    rule.describe()
                ),
                Cause::UnknownWrapper {
                    word: word.clone(),
                    index: rule.index,
                    rule: rule.describe(),
                    origin: rule.origin.clone(),
                },
            ))
        })
    }

    /// The deny rules for bash that name a command (their first word is not `*`): what P3b's
    /// safety net and P8's reading look for.
    fn naming_deny_rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().filter(|r| {
            r.covers_tool("bash")
                && r.action == Decision::Deny
                && r.prefix
                    .as_ref()
                    .and_then(|p| p.first())
                    .is_some_and(|first| first != "*")
        })
    }

    /// P3b's safety net: for a program with no row (neither a wrapper nor in
    /// `embedded/`), an argument (or the value of `--opt=value`, `key=value`) that parses
    /// as a command line in which a deny rule names a segment, as an ask. Only arguments
    /// holding a deny rule's first word as a word are parsed, so lines without one cost
    /// nothing.
    fn runs_denied_argument(&self, words: &[String]) -> Option<Verdict> {
        let program = base_name(words.first()?);
        if wrappers::is_wrapper(program)
            || embedded::has_row(program)
            || inline::is_interpreter(program)
        {
            return None;
        }
        let firsts = &self.denied_names;
        if firsts.is_empty() {
            return None;
        }
        words[1..].iter().find_map(|word| {
            let value = word.split_once('=').map(|(_, v)| v);
            [Some(word.as_str()), value]
                .into_iter()
                .flatten()
                // A first word standing as a word (`'rm x'`, `--run=/bin/rm`), not inside
                // one (`--format`): only then is the text worth parsing.
                .filter(|text| {
                    firsts.iter().any(|f| text.contains(f.as_str()))
                        && inline::code_words(text)
                            .iter()
                            .any(|w| firsts.iter().any(|f| f == base_name(w)))
                })
                .find_map(|text| {
                    let segments = shell::segments(text).ok()?;
                    let rule = segments.iter().find_map(|s| {
                        let opaque = s.opaque.as_ref().map(|_| tokens(&s.words));
                        self.naming_deny_rules()
                            .find(|r| r.applies(&s.words, opaque.as_deref()))
                    })?;
                    Some(Verdict::new(
                        Decision::Ask,
                        format!(
                            "`{program}` has no row in the tables, and its argument `{}` is a command line that {} names",
                            shorten(word),
                            rule.describe()
                        ),
                        Cause::CommandInArgument {
                            argument: word.clone(),
                            index: rule.index,
                            rule: rule.describe(),
                            origin: rule.origin.clone(),
                        },
                    ))
                })
        })
    }

    /// P8: the verdict on the inline code of a segment (given on its line or fed on its
    /// stdin by the line), if it holds code that is not shown harmless: deny when a deny
    /// rule's words stand in it as words, else ask in mode `auto` when a deny or ask rule
    /// exists (with neither, `auto` allows what no rule names; mode `ask` asks everything
    /// no rule allows already; read-only mode is judged before).
    fn inline_code(&self, segment: &Segment, mode: Mode) -> Option<Verdict> {
        let code = inline::inline_code(&segment.words, segment.stdin.as_deref())?;
        let inline::Reading::Opaque(why) = &code.reading else {
            return None;
        };
        let tokens: Vec<&str> = code.words.iter().map(String::as_str).collect();
        let program = base_name(segment.words.first()?);
        if let Some(rule) = self.naming_deny_rules().find(|r| r.appears_in(&tokens)) {
            return Some(Verdict::new(
                Decision::Deny,
                format!(
                    "the {} code given to `{program}` holds the words of {}",
                    code.language,
                    rule.describe()
                ),
                Cause::InlineCode {
                    language: code.language.into(),
                    why: why.clone(),
                    rule: Some(RuleRef {
                        index: rule.index,
                        rule: rule.describe(),
                        origin: rule.origin.clone(),
                    }),
                },
            ));
        }
        (self.guarded() && mode == Mode::Auto).then(|| {
            Verdict::new(
                Decision::Ask,
                format!(
                    "the {} code given to `{program}` is not shown harmless ({why}), and a rule cannot see into it",
                    code.language
                ),
                Cause::InlineCode {
                    language: code.language.into(),
                    why: why.clone(),
                    rule: None,
                },
            )
        })
    }

    /// Whether a deny or ask rule for bash exists: only then does mode `auto` ask about
    /// what it cannot show harmless (P8); without one, `auto` allows what no rule names.
    fn guarded(&self) -> bool {
        !self.denied_names.is_empty()
            || self
                .rules
                .iter()
                .any(|r| r.covers_tool("bash") && r.action == Decision::Ask)
    }

    /// P8: the ask for a segment given variables the judge has not met, in mode `auto`
    /// under a deny or ask rule. A variable naming a file to write is no code: only
    /// read-only mode refuses it ([`Policy::not_read_only`]).
    fn unknown_environment(&self, segment: &Segment, mode: Mode) -> Option<Verdict> {
        let unknown: Vec<word::Assigned> = segment
            .assigned
            .iter()
            .filter(|a| a.effect == word::EnvEffect::Unknown)
            .cloned()
            .collect();
        if unknown.is_empty() || mode != Mode::Auto || !self.guarded() {
            return None;
        }
        Some(Verdict::new(
            Decision::Ask,
            format!(
                "{} sets {}, which the judge does not know to be harmless: a variable can make a program run other code",
                quote_segment(segment),
                variable_names(&unknown)
            ),
            Cause::Environment { variables: unknown },
        ))
    }

    /// Why `segment` is not known to be read-only (and what decided so), or `None` when it
    /// is (P7).
    fn not_read_only(&self, segment: &Segment) -> Option<(String, Cause)> {
        if let Some(why) = &segment.opaque {
            return Some((
                format!("cannot be known before it runs: {why}"),
                Cause::Opaque { why: why.clone() },
            ));
        }
        // P8: a variable the judge has not met may make the command run code, and one
        // naming a file (`GIT_TRACE2=/tmp/t`) makes it write there.
        if !segment.words.is_empty() && !segment.assigned.is_empty() {
            let writes = segment
                .assigned
                .iter()
                .all(|a| a.effect == word::EnvEffect::WritesFile);
            return Some((
                format!(
                    "sets {}, which {}",
                    variable_names(&segment.assigned),
                    if writes {
                        "names a file the program writes"
                    } else {
                        "the judge does not know to be harmless"
                    }
                ),
                Cause::Environment {
                    variables: segment.assigned.clone(),
                },
            ));
        }
        let why = if segment.writes_redirect {
            Some("writes through a redirection".to_owned())
        } else if segment.words.is_empty() {
            // Only assignments (or an input redirection): nothing runs. Assignments that
            // change what later commands run (`PATH=...`) make the segment opaque.
            None
        } else if !self
            .read_only
            .iter()
            .any(|prefix| segment.words.starts_with(prefix))
        {
            Some("is not known to be read-only".to_owned())
        } else {
            read_only::writing_option(&segment.words).map(|option| {
                format!(
                    "is not known to be read-only (`{option}` writes, runs code or changes the system)"
                )
            })
        };
        why.map(|why| (why, Cause::ReadOnly))
    }

    /// Whether rule `index` applies to some segment of `command`: what a rule's `examples`
    /// and `not_examples` are checked with.
    fn rule_applies(&self, index: usize, command: &str) -> bool {
        let Some(rule) = self.rules.get(index) else {
            return false;
        };
        self.judge_bash(command, Mode::Auto, &[], None)
            .segments
            .iter()
            .any(|s| {
                let opaque_tokens = s.opaque.as_ref().map(|_| tokens(&s.words));
                rule.applies(&s.words, opaque_tokens.as_deref())
            })
    }
}

/// A rule example, not-example or policy test that did not hold, said so that the author
/// can find the line: `dsh.toml:12: rule 0 (bash `rm`, deny) should match "rm -rf x"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedCheck(pub String);

impl std::fmt::Display for FailedCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Runs the checks a config carries: each rule's `examples` (must match) and
/// `not_examples` (must not), and each `[[permissions.tests]]` entry (the decision a bash
/// call of its command gets in its mode, with no grants). `dsh serve` and
/// `dsh check-config` refuse a config for which this returns anything.
pub fn check_config(config: &PermissionsConfig) -> Vec<FailedCheck> {
    let policy = Policy::new(config);
    let mut failed = Vec::new();
    let at = |origin: &Option<String>| match origin {
        Some(origin) => format!("{origin}: "),
        None => String::new(),
    };
    for (index, (rule, compiled)) in config.rules.iter().zip(&policy.rules).enumerate() {
        // A path rule that no file tool can reach, or that also names a command, would
        // silently never match: say so.
        if compiled.path.is_some()
            && (compiled.prefix.is_some() || !FILE_TOOLS.iter().any(|t| compiled.covers_tool(t)))
        {
            failed.push(FailedCheck(format!(
                "{}rule {index} ({}): `path` applies only to the file tools ({}) and not with `command`",
                at(&rule.origin),
                compiled.describe(),
                FILE_TOOLS.join(", ")
            )));
        }
        let network_rule = compiled.names_hosts() || rule.tool == NETWORK_TOOL;
        if compiled.names_hosts() && rule.tool != NETWORK_TOOL {
            failed.push(FailedCheck(format!(
                "{}rule {index} ({}): `host` and `port` apply only to tool `{NETWORK_TOOL}`",
                at(&rule.origin),
                compiled.describe(),
            )));
        }
        if let Some(why) = &compiled.host_error {
            failed.push(FailedCheck(format!(
                "{}rule {index}: `host` {why}",
                at(&rule.origin)
            )));
        }
        if rule.port == Some(0) {
            failed.push(FailedCheck(format!(
                "{}rule {index} ({}): `port` must be from 1 to 65535",
                at(&rule.origin),
                compiled.describe(),
            )));
        }
        if rule.tool == NETWORK_TOOL && compiled.prefix.is_some() {
            failed.push(FailedCheck(format!(
                "{}rule {index} ({}): `command` does not apply to tool `{NETWORK_TOOL}` (use `host` and `port`)",
                at(&rule.origin),
                compiled.describe(),
            )));
        }
        for (examples, must) in [(&rule.examples, true), (&rule.not_examples, false)] {
            for example in examples {
                // A network rule's examples are `HOST` or `HOST:PORT` (port 443 if none).
                if network_rule {
                    let matched = match HostEntry::parse(example) {
                        Ok(HostEntry {
                            host: HostPattern::Exact(host),
                            port,
                        }) => Ok(compiled.matches_host(&host, port.unwrap_or(443))),
                        Ok(_) => Err(format!("`{example}` is a pattern, not a host")),
                        Err(why) => Err(why),
                    };
                    match matched {
                        Ok(matched) if matched == must => {}
                        Ok(_) => failed.push(FailedCheck(format!(
                            "{}rule {index} ({}) {} `{example}`",
                            at(&rule.origin),
                            compiled.describe(),
                            if must {
                                "should match"
                            } else {
                                "should not match"
                            },
                        ))),
                        Err(why) => failed.push(FailedCheck(format!(
                            "{}rule {index} ({}): example {why}",
                            at(&rule.origin),
                            compiled.describe(),
                        ))),
                    }
                    continue;
                }
                // A path rule's examples are paths (relative to the cwd unless absolute).
                if let Some(glob) = &compiled.path {
                    let example_path = example.trim_start_matches("./");
                    if path_glob(glob.as_bytes(), example_path.as_bytes()) != must {
                        failed.push(FailedCheck(format!(
                            "{}rule {index} ({}) {} path `{example}`",
                            at(&rule.origin),
                            compiled.describe(),
                            if must {
                                "should match"
                            } else {
                                "should not match"
                            },
                        )));
                    }
                    continue;
                }
                if policy.rule_applies(index, example) != must {
                    let judged = policy.judge_bash(example, Mode::Auto, &[], None);
                    failed.push(FailedCheck(format!(
                        "{}rule {index} ({}) {} `{example}`; what decides it instead: {}",
                        at(&rule.origin),
                        compiled.describe(),
                        if must {
                            "should match"
                        } else {
                            "should not match"
                        },
                        judged.reason
                    )));
                }
            }
        }
    }
    for test in &config.tests {
        let judged = policy.judge(
            "bash",
            &serde_json::json!({ "command": test.command }),
            test.mode,
            &[],
        );
        if judged.decision != test.expect {
            failed.push(FailedCheck(format!(
                "{}policy test `{}` in mode {} expects {}, but it is {}: {}",
                at(&test.origin),
                test.command,
                test.mode.id(),
                action(test.expect),
                action(judged.decision),
                judged.reason
            )));
        }
    }
    failed
}

/// Checks `[exec.sandbox.network]`'s `allow` and `deny` entries, which are sugar for
/// rules: each must be `HOST`, `HOST:PORT` or `[V6]:PORT` (a host being a name, an IP
/// address or `*.` and a name). `dsh serve`, `dsh check-config` and a reload refuse a
/// config for which this returns anything, as [`check_config`].
pub fn check_network(network: &NetworkConfig) -> Vec<FailedCheck> {
    let mut failed = Vec::new();
    for (list, action) in [
        (&network.allow, Decision::Allow),
        (&network.deny, Decision::Deny),
    ] {
        for entry in list {
            if let Err(why) = HostEntry::parse(entry) {
                failed.push(FailedCheck(format!(
                    "[exec.sandbox.network] {}: {why}",
                    list_name(action)
                )));
            }
        }
    }
    failed
}

/// What "allow always" grants for an asked segment: the command name, plus its subcommand
/// for tools that have subcommands. Nothing when the subcommand could stand for other words
/// (a glob or an expansion), since a grant must not cover more than what was approved.
fn grant_for(words: &[String]) -> Option<Grant> {
    let name = words.first()?;
    match words.get(1) {
        Some(sub) if SUBCOMMAND_TOOLS.contains(&name.as_str()) && !sub.starts_with('-') => {
            if sub.contains(['*', '?', '[', '{', '$', '`']) || sub.is_empty() {
                None
            } else {
                Some(Grant::Command(vec![name.clone(), sub.clone()]))
            }
        }
        _ => Some(Grant::Command(vec![name.clone()])),
    }
}

/// The key an `[exec.sandbox.network]` list of `action` is written under.
fn list_name(action: Decision) -> &'static str {
    match action {
        Decision::Allow => "allow",
        _ => "deny",
    }
}

/// The rule an `[exec.sandbox.network]` `allow` or `deny` entry stands for.
fn sugar_rule(index: usize, entry: &str, action: Decision, key: &str) -> Rule {
    let (host, host_error, port) = match HostEntry::parse(entry) {
        Ok(parsed) => (Some(parsed.host), None, parsed.port),
        Err(why) => (None, Some(why), None),
    };
    Rule {
        index,
        origin: Some(format!("[exec.sandbox.network] {key}")),
        tool: NETWORK_TOOL.into(),
        prefix: None,
        path: None,
        host,
        host_error,
        port,
        action,
    }
}

/// A segment as quoted in messages.
fn quote_segment(segment: &Segment) -> String {
    if segment.words.is_empty() {
        if segment.writes_redirect {
            "a redirection-only command".into()
        } else {
            "an assignment-only command".into()
        }
    } else {
        format!("`{}`", shorten(&segment.display()))
    }
}

/// `` `A`, `B` `` for messages.
fn variable_names(variables: &[word::Assigned]) -> String {
    variables
        .iter()
        .map(|a| format!("`{}`", a.name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn shorten(text: &str) -> String {
    const MAX: usize = 120;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A decision as a word: `allow`, `ask`, `deny`.
pub fn action(decision: Decision) -> &'static str {
    match decision {
        Decision::Allow => "allow",
        Decision::Ask => "ask",
        Decision::Deny => "deny",
    }
}

/// The reasons of the segments that decided the call: each distinct one, up to three.
fn summarize(judged: &[SegmentJudgement], decision: Decision) -> String {
    const SHOWN: usize = 3;
    let mut reasons: Vec<&str> = Vec::new();
    for segment in judged.iter().filter(|s| s.decision == decision) {
        if !reasons.contains(&segment.reason.as_str()) {
            reasons.push(&segment.reason);
        }
    }
    let more = reasons.len().saturating_sub(SHOWN);
    let mut text = reasons[..reasons.len().min(SHOWN)].join("; ");
    if more > 0 {
        text.push_str(&format!("; and {more} more"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use Decision::{Allow, Ask, Deny};
    use serde_json::json;

    fn rule(tool: &str, command: Option<&str>, action: Decision) -> PermissionRule {
        PermissionRule {
            tool: tool.into(),
            command: command.map(str::to_owned),
            action,
            ..PermissionRule::default()
        }
    }

    /// A policy with `rules` for bash (`None` command: tool-wide) and the default read-only list.
    fn policy(rules: &[(Option<&str>, Decision)]) -> Policy {
        Policy::new(&PermissionsConfig {
            rules: rules.iter().map(|(c, a)| rule("bash", *c, *a)).collect(),
            ..PermissionsConfig::default()
        })
    }

    fn bash(policy: &Policy, command: &str, mode: Mode) -> Judgement {
        policy.judge("bash", &json!({ "command": command }), mode, &[])
    }

    fn bash_with(policy: &Policy, command: &str, mode: Mode, grants: &[Grant]) -> Judgement {
        policy.judge(
            "bash",
            &json!({ "command": command, "timeout": 5 }),
            mode,
            grants,
        )
    }

    fn grant(words: &[&str]) -> Grant {
        Grant::Command(words.iter().map(|w| w.to_string()).collect())
    }

    #[test]
    fn a_rule_prefix_matches_whole_words() {
        let p = policy(&[(Some("git status"), Allow)]);
        assert_eq!(bash(&p, "git status", Mode::Ask).decision, Allow);
        assert_eq!(bash(&p, "git status --short", Mode::Ask).decision, Allow);
        assert_eq!(bash(&p, "git statusx", Mode::Ask).decision, Ask);
        assert_eq!(bash(&p, "git", Mode::Ask).decision, Ask);
        assert_eq!(bash(&p, "git  'status'", Mode::Ask).decision, Allow);
    }

    #[test]
    fn a_star_in_a_rule_matches_any_one_word() {
        let p = policy(&[(Some("git * --force"), Deny)]);
        assert_eq!(bash(&p, "git push --force", Mode::Auto).decision, Deny);
        assert_eq!(
            bash(&p, "git push origin --force", Mode::Auto).decision,
            Allow
        );
        let p = policy(&[(Some("*"), Allow)]);
        assert_eq!(bash(&p, "anything at all", Mode::Ask).decision, Allow);
    }

    #[test]
    fn a_rule_without_command_covers_every_bash_call() {
        let p = policy(&[(None, Allow)]);
        assert_eq!(bash(&p, "rm -rf build", Mode::Ask).decision, Allow);
        // P5: what cannot be known is never allowed by a rule, even one for every call.
        assert_eq!(bash(&p, "$CMD foo", Mode::Ask).decision, Ask);
        let p = Policy::new(&PermissionsConfig {
            rules: vec![rule("*", None, Ask)],
            ..PermissionsConfig::default()
        });
        assert_eq!(bash(&p, "ls", Mode::Auto).decision, Ask);
        // A prefix rule for another tool does not apply to bash.
        let p = Policy::new(&PermissionsConfig {
            rules: vec![rule("bash_output", Some("ls"), Deny)],
            ..PermissionsConfig::default()
        });
        assert_eq!(bash(&p, "ls", Mode::Auto).decision, Allow);
    }

    #[test]
    fn every_segment_of_a_compound_command_is_judged() {
        let p = policy(&[(Some("git status"), Allow)]);
        let j = bash(&p, "git status && rm -rf build", Mode::Ask);
        assert_eq!(j.decision, Ask);
        assert_eq!(j.reason, "no rule matches `rm -rf build` (mode ask)");
        assert_eq!(j.grants_on_allow_always, [grant(&["rm"])]);

        let p = policy(&[(Some("git status"), Allow), (Some("rm"), Deny)]);
        let j = bash(&p, "git status && rm -rf build", Mode::Ask);
        assert_eq!(j.decision, Deny);
        assert_eq!(j.reason, "rule bash `rm` (deny) matches `rm -rf build`");
        assert!(j.grants_on_allow_always.is_empty());
    }

    #[test]
    fn pipes_background_subshells_and_groups_are_all_judged() {
        let p = policy(&[(Some("ls"), Allow), (Some("rm"), Deny)]);
        for command in [
            "ls | rm x",
            "ls & rm x",
            "(ls; rm x)",
            "{ ls; rm x; }",
            "ls; if true; then rm x; fi",
            "for f in a; do rm $f; done",
        ] {
            assert_eq!(bash(&p, command, Mode::Auto).decision, Deny, "{command}");
        }
    }

    #[test]
    fn a_substitution_is_judged_apart_from_its_command() {
        let p = policy(&[(Some("ls"), Allow)]);
        let j = bash(&p, "ls $(rm -rf x)", Mode::Ask);
        assert_eq!(j.decision, Ask);
        assert!(j.reason.contains("`rm -rf x`"), "{}", j.reason);
        let p = policy(&[(Some("ls"), Allow), (Some("rm"), Deny)]);
        for command in [
            "ls $(rm -rf x)",
            "ls `rm -rf x`",
            "ls $(echo $(rm -rf x))",
            "X=$(rm -rf x) ls",
            "ls > \"$(rm -rf x)\"",
            "ls \"${y:-$(rm -rf x)}\"",
            "for f in $(rm -rf x); do ls; done",
        ] {
            assert_eq!(bash(&p, command, Mode::Auto).decision, Deny, "{command}");
        }
    }

    #[test]
    fn wrapped_commands_meet_the_rules_for_what_they_run() {
        let p = policy(&[(Some("rm"), Deny)]);
        for command in [
            "sudo rm -rf /",
            "bash -c 'rm -rf /'",
            "sh -c \"cd /tmp && rm -rf x\"",
            "env FOO=1 rm x",
            "timeout 5 rm x",
            "xargs rm",
            "find . -exec rm {} \\;",
            "eval 'rm x'",
            "nice -n 10 nohup rm x",
            "/bin/rm -rf /",
            "\\rm x",
            "trap 'rm x' EXIT",
            "trap -- 'ls; rm x' INT TERM",
        ] {
            let j = bash(&p, command, Mode::Auto);
            assert_eq!(j.decision, Deny, "{command}: {}", j.reason);
            assert!(
                j.reason.starts_with("rule bash `rm` (deny) matches `"),
                "{}",
                j.reason
            );
        }
    }

    #[test]
    fn allow_rules_match_the_exact_command_name() {
        // `./ls` is not the `ls` an allow rule means; a deny rule for `rm` still catches `/bin/rm`.
        let p = policy(&[(Some("ls"), Allow)]);
        assert_eq!(bash(&p, "./ls", Mode::Ask).decision, Ask);
        assert_eq!(bash(&p, "/usr/bin/ls", Mode::Ask).decision, Ask);
        let p = policy(&[(Some("/bin/rm"), Deny)]);
        assert_eq!(bash(&p, "rm x", Mode::Auto).decision, Allow);
        assert_eq!(bash(&p, "/bin/rm x", Mode::Auto).decision, Deny);
    }

    #[test]
    fn modes_decide_what_no_rule_matches() {
        let p = policy(&[]);
        let j = bash(&p, "curl example.com", Mode::Ask);
        assert_eq!(j.decision, Ask);
        assert_eq!(j.reason, "no rule matches `curl example.com` (mode ask)");
        assert_eq!(j.grants_on_allow_always, [grant(&["curl"])]);
        let j = bash(&p, "curl example.com", Mode::Auto);
        assert_eq!(j.decision, Allow);
        assert_eq!(j.reason, "no rule matches `curl example.com` (mode auto)");
        assert!(j.grants_on_allow_always.is_empty());
        // Deny rules still veto in auto mode.
        let p = policy(&[(Some("curl"), Deny)]);
        assert_eq!(bash(&p, "curl example.com", Mode::Auto).decision, Deny);
    }

    #[test]
    fn the_strongest_matching_rule_wins() {
        let p = policy(&[(Some("git"), Allow), (Some("git push"), Ask), (None, Allow)]);
        let j = bash(&p, "git push", Mode::Auto);
        assert_eq!(j.decision, Ask);
        assert_eq!(j.reason, "rule bash `git push` (ask) matches `git push`");
        // An ask a rule insists on offers nothing to grant: a grant could not lift it.
        assert!(j.grants_on_allow_always.is_empty());
        assert_eq!(bash(&p, "git log", Mode::Ask).decision, Allow);
    }

    #[test]
    fn a_dynamic_command_name_is_matched_only_by_tool_wide_rules() {
        let p = policy(&[(Some("*"), Allow), (Some("$CMD"), Allow)]);
        let j = bash(&p, "$CMD foo", Mode::Ask);
        assert_eq!(j.decision, Ask);
        assert!(
            j.reason.contains("cannot be known before it runs"),
            "{}",
            j.reason
        );
        assert!(j.grants_on_allow_always.is_empty());
        assert_eq!(bash(&p, "$CMD foo", Mode::ReadOnly).decision, Deny);
        let j = bash_with(&p, "$CMD foo", Mode::Ask, &[grant(&["$CMD"])]);
        assert_eq!(j.decision, Ask);
        let p = policy(&[(None, Deny)]);
        assert_eq!(bash(&p, "$CMD foo", Mode::Auto).decision, Deny);
    }

    /// P5: an opaque segment is asked in auto mode too, and a deny rule whose words it
    /// holds literally denies it.
    #[test]
    fn p5_in_auto_mode_an_opaque_segment_is_asked_and_a_literal_deny_denies() {
        for p in [policy(&[]), policy(&[(Some("ls"), Allow)])] {
            let j = bash(&p, "$CMD foo", Mode::Auto);
            assert_eq!(j.decision, Ask);
            assert!(matches!(j.cause, Cause::Opaque { .. }), "{:?}", j.cause);
        }
        let p = policy(&[(Some("rm"), Deny)]);
        let j = bash(&p, "$(echo r''m) -rf /", Mode::Auto);
        assert_eq!(j.decision, Ask);
        assert!(j.reason.contains("cannot be known"), "{}", j.reason);
        assert_eq!(bash(&p, "$(echo rm) -rf /", Mode::Auto).decision, Deny);
        assert!(j.grants_on_allow_always.is_empty());
        let j = bash(&p, "$X rm -rf /", Mode::Auto);
        assert_eq!(j.decision, Deny, "{}", j.reason);
        assert!(
            matches!(j.cause, Cause::Rule { index: 0, .. }),
            "{:?}",
            j.cause
        );
        assert_eq!(
            bash(&p, "bash -c \"$X; rm -rf /\"", Mode::Auto).decision,
            Deny
        );
        assert_eq!(
            bash(&p, "echo 'unclosed; /bin/rm x", Mode::Auto).decision,
            Deny
        );
        assert_eq!(bash(&p, "source ./env.sh", Mode::Auto).decision, Ask);
    }

    /// P6: a program that is not a known wrapper, given what a deny rule names as an
    /// argument, is asked about in auto mode (it may run it).
    #[test]
    fn p6_an_unknown_wrappers_argument_naming_a_denied_command_is_asked() {
        let p = policy(&[(Some("rm"), Deny), (Some("lockrun"), Allow)]);
        for line in ["lockrun f rm x", "lockrun f /bin/rm x"] {
            let j = bash(&p, line, Mode::Auto);
            assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
            assert!(
                matches!(j.cause, Cause::UnknownWrapper { index: 0, .. }),
                "{:?}",
                j.cause
            );
            assert!(j.grants_on_allow_always.is_empty());
        }
        // A known wrapper's command is judged itself, and so is a row's (P3b).
        assert_eq!(bash(&p, "nice rm x", Mode::Auto).decision, Deny);
        assert_eq!(bash(&p, "parallel rm ::: x", Mode::Auto).decision, Deny);
        assert_eq!(bash(&p, "ls -l", Mode::Auto).decision, Allow);
    }

    /// P3b: a command in an option, config key, argument or environment variable that the
    /// program runs is judged as the command line it is; a deny inside denies, and the
    /// chain names the place.
    #[test]
    fn p3b_commands_in_options_config_and_environment_are_judged() {
        let p = policy(&[(Some("rm"), Deny)]);
        for (line, chain) in [
            (
                "tar -xf a.tar --to-command='rm x'",
                "tar --to-command -> rm",
            ),
            ("tar -I 'rm x' -cf a.tar f", "tar -I -> rm"),
            (
                "git -c core.fsmonitor='rm x' status",
                "git -c core.fsmonitor -> rm",
            ),
            ("git -c alias.x='!rm x' x", "git -c alias.x -> rm"),
            (
                "git -c diff.external='rm x' diff",
                "git -c diff.external -> rm",
            ),
            (
                "ssh -o ProxyCommand='rm x' host",
                "ssh -o proxycommand -> rm",
            ),
            ("tmux new -d 'rm x'", "tmux new-session -> rm"),
            ("rsync -e 'rm x' a h:b", "rsync -e -> rm"),
            (
                "GIT_SSH_COMMAND='rm x' git fetch",
                "env GIT_SSH_COMMAND -> rm",
            ),
            ("env PAGER='rm x' git log", "env PAGER -> rm"),
            ("LESSOPEN='|rm x %s' less f", "env LESSOPEN -> rm"),
            ("sudo EDITOR='rm x' visudo", "sudo -> env EDITOR -> rm"),
            (
                "timeout 5 tar --to-c 'rm x' -xf a",
                "timeout -> tar --to-command -> rm",
            ),
            (
                "git -c core.pager='nice rm x' log",
                "git -c core.pager -> nice -> rm",
            ),
        ] {
            let j = bash(&p, line, Mode::Auto);
            assert_eq!(j.decision, Deny, "{line}: {}", j.reason);
            assert!(
                j.segments
                    .iter()
                    .any(|s| s.decision == Deny && s.chain() == chain),
                "{line}: {:?}",
                j.segments.iter().map(|s| s.chain()).collect::<Vec<_>>()
            );
        }
        // A file of commands is opaque: asked in auto, denied in read-only.
        for line in [
            "ssh -F ./cfg host",
            "BASH_ENV=./x bash -c :",
            "git -c core.hooksPath=h commit",
        ] {
            assert_eq!(bash(&p, line, Mode::Auto).decision, Ask, "{line}");
            assert_eq!(bash(&p, line, Mode::ReadOnly).decision, Deny, "{line}");
        }
        // Messages and data run nothing.
        for line in [
            "git commit -m 'rm old files'",
            "grep 'rm -rf' notes.md",
            "echo 'rm x'",
            "git -c user.name='rm x' commit -m x",
            "tar -czf a.tgz src",
        ] {
            assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
        }
    }

    /// P3b's safety net: for a program with no row, an argument that parses as a command
    /// line naming a denied command is asked about; anything else is not.
    #[test]
    fn p3b_an_unknown_programs_argument_holding_a_denied_command_line_is_asked() {
        let p = policy(&[(Some("rm"), Deny)]);
        for line in [
            "lockrun --cmd='rm x'",
            "mytool run 'cd /tmp && rm -rf x'",
            "daemonize -c 'nice rm x'",
        ] {
            let j = bash(&p, line, Mode::Auto);
            assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
            assert!(
                matches!(j.cause, Cause::CommandInArgument { index: 0, .. }),
                "{line}: {:?}",
                j.cause
            );
        }
        for line in [
            "mytool 'rmdir x'",
            "mytool 'perform x'",
            "mytool --name='a b'",
        ] {
            assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
        }
        // Without a deny rule there is nothing to look for.
        let open = policy(&[]);
        assert_eq!(bash(&open, "mytool 'rm x'", Mode::Auto).decision, Allow);
    }

    /// P8: inline code is read: a deny rule's words in it deny; a shell call without them
    /// asks in auto when a deny rule exists; a script file is judged by its name only.
    #[test]
    fn p8_inline_code_is_read_for_denied_words_and_shell_calls() {
        let p = policy(&[(Some("rm"), Deny)]);
        for line in [
            "python3 -c \"import os; os.system('rm x')\"",
            "perl -e 'system(\"rm x\")'",
            "node -e \"require('child_process').execSync('rm x')\"",
            "ruby -e '`rm x`'",
            "awk 'BEGIN{system(\"rm x\")}'",
            "sed 's/.*/rm x/e' f",
            "timeout 5 python3 -c 'import subprocess; subprocess.run([\"rm\", \"x\"])'",
        ] {
            let j = bash(&p, line, Mode::Auto);
            assert_eq!(j.decision, Deny, "{line}: {}", j.reason);
            assert!(
                j.segments.iter().any(|s| matches!(
                    &s.cause,
                    Cause::InlineCode { rule: Some(r), .. } if r.index == 0
                )),
                "{line}"
            );
        }
        for line in [
            "python3 -c 'import os; os.rmdir(\"x\")'",
            "python3 -c 'import os; os.system(\"ls\")'",
            "awk 'BEGIN{system(\"ls\")}'",
            "sed '1e date' f",
            "perl -e 'print `date`'",
            "fish -c 'echo hi'",
        ] {
            let j = bash(&p, line, Mode::Auto);
            assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
        }
        for line in [
            "python3 -c 'print(1)'",
            "awk '{print $1}' f",
            "sed -i 's/rm/del/g' f",
            "python3 x.py",
        ] {
            assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
        }
        // No deny rule: a shell call is the mode's to decide.
        let open = policy(&[]);
        assert_eq!(
            bash(&open, "awk 'BEGIN{system(\"ls\")}'", Mode::Auto).decision,
            Allow
        );
    }

    /// P8 (issue 41): code is allowed only when shown harmless; anything else is opaque:
    /// asked in auto under a deny or an ask rule, refused in read-only, denied when a deny
    /// rule's words stand in it; code fed on stdin by the line is code too.
    #[test]
    fn p8_code_not_shown_harmless_is_opaque_in_every_spelling() {
        let p = policy(&[(Some("rm"), Deny)]);
        for line in [
            "python3 -c \"import os; getattr(os, 'sys'+'tem')('r'+'m c')\"",
            "node -pe \"require('chi'+'ld_process')\"",
            "perl <<< 'use IPC::Open3; open3(0, 0, 0, qw(r m))'",
            "python3 - <<'EOF'\nimport os\nos.system('ls')\nEOF",
            "echo 'print(1)' | python3",
            "awk -v c=ls 'BEGIN{x = 4/2; print 1 | c; y = 1/2}'",
        ] {
            let j = bash(&p, line, Mode::Auto);
            assert_eq!(j.decision, Ask, "{line}: {}", j.reason);
            assert!(
                j.segments
                    .iter()
                    .any(|s| matches!(&s.cause, Cause::InlineCode { rule: None, .. })),
                "{line}: {:?}",
                j.cause
            );
            assert_eq!(bash(&p, line, Mode::ReadOnly).decision, Deny, "{line}");
        }
        // The words of the deny rule in code that is not shown harmless deny.
        for line in [
            "perl <<< 'system(\"rm c\")'",
            "busybox rm c",
            "sqlite3 :memory: '.shell r''m c'",
        ] {
            assert_eq!(bash(&p, line, Mode::Auto).decision, Deny, "{line}");
        }
        // Shown harmless: allowed in auto, fed on stdin or given on the line.
        for line in [
            "python3 - <<< 'import platform; print(platform.system())'",
            "node -e 'const n = 2; console.log(`n=${n}`)'",
            "awk 'BEGIN{FS=\"|\"} {print $2}' data.psv",
        ] {
            assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
        }
        // An ask rule guards as a deny rule does; with no rule, auto allows.
        let asking = policy(&[(Some("curl"), Ask)]);
        let line = "python3 -c 'import os; os.system(\"curl x\")'";
        assert_eq!(bash(&asking, line, Mode::Auto).decision, Ask);
        assert_eq!(bash(&policy(&[]), line, Mode::Auto).decision, Allow);
        // A reader of the read-only list that runs a program is refused in read-only.
        assert_eq!(
            bash(&p, "rg --pre=touch x c", Mode::ReadOnly).decision,
            Deny
        );
    }

    /// P8 (issue 41): a variable that runs a command is judged by its value, the same
    /// whether it prefixes the command, is exported earlier or set through `git -c`;
    /// variables that run code by existing make the command unknown.
    #[test]
    fn p8_variables_are_judged_by_their_value() {
        let p = policy(&[(Some("rm"), Deny)]);
        for line in [
            "PAGER=cat git log -3",
            "export PAGER=cat; git log -3",
            "git -c core.pager=cat log -3",
            "GIT_EDITOR=true git commit -q --amend --allow-empty",
            "GIT_SSH_COMMAND='ssh -o BatchMode=yes' git ls-remote .",
            "MANPAGER=cat man ls",
            "CC=clang make",
        ] {
            assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
        }
        for line in [
            "PAGER='rm c' git log",
            "export PAGER='rm c'; git log",
            "git -c core.pager='rm c' log",
            "RSYNC_CONNECT_PROG='rm c' rsync x::a .",
            "CC='rm c;:' make p",
        ] {
            assert_eq!(bash(&p, line, Mode::Auto).decision, Deny, "{line}");
        }
        for line in [
            "LUA_INIT='os.execute(\"ls\")' lua5.4 -e 1",
            "PERL5DB='BEGIN{system q(ls)}' perl -e 1",
            "PS0='$(ls)' bash -i",
            "MAKEFLAGS=--eval=x make",
            "GIT_ALLOW_PROTOCOL=ext git clone 'ext::sh -c ls' x",
        ] {
            assert_eq!(bash(&p, line, Mode::Auto).decision, Ask, "{line}");
        }
    }

    /// P8 (issue 41): builtins that evaluate are asked in auto as read-only refuses them.
    #[test]
    fn p8_builtins_that_evaluate_are_opaque_in_auto() {
        let p = policy(&[(Some("rm"), Deny)]);
        for line in [
            "let 'a[$(ls)]=1'",
            "declare -i x='a[$(ls)]'",
            "declare -n r=x",
            "printf -v 'a[$(ls)]' x",
            "read 'a[$(ls)]' <<< x",
            "mapfile -C f -c 1 a <<< x",
            "compgen -C ls x",
            "fc -e ls",
            "echo ${x@P}",
            "bash --rcfile <(echo ls) -i",
            "test -v 'a[$(ls)]'",
        ] {
            assert_eq!(bash(&p, line, Mode::Auto).decision, Ask, "{line}");
            assert_eq!(bash(&p, line, Mode::ReadOnly).decision, Deny, "{line}");
        }
        for line in [
            "let 1+2",
            "declare -a x",
            "printf -v x %s y",
            "read x <<< y",
            "test -f x",
        ] {
            assert_eq!(bash(&p, line, Mode::Auto).decision, Allow, "{line}");
        }
    }

    #[test]
    fn arithmetic_on_variables_cannot_be_allowed_by_a_prefix_rule() {
        let p = policy(&[(Some("echo"), Allow)]);
        let j = bash(&p, "x='a[$(rm -rf ~)]'; echo $((x))", Mode::Ask);
        assert_eq!(j.decision, Ask);
        assert_eq!(bash(&p, "echo $((1 + 2))", Mode::Ask).decision, Allow);
        assert_eq!(
            bash(&p, "x='a[$(rm -rf ~)]'; echo $((x))", Mode::ReadOnly).decision,
            Deny
        );
    }

    #[test]
    fn an_allow_always_grant_allows_its_prefix_afterwards() {
        let p = policy(&[]);
        let j = bash(&p, "git push origin main", Mode::Ask);
        assert_eq!(j.decision, Ask);
        assert_eq!(j.grants_on_allow_always, [grant(&["git", "push"])]);
        let grants = j.grants_on_allow_always;
        let j = bash_with(&p, "git push --tags", Mode::Ask, &grants);
        assert_eq!(j.decision, Allow);
        assert_eq!(
            j.reason,
            "`git push` is allowed always in this session and matches `git push --tags`"
        );
        assert_eq!(bash_with(&p, "git pull", Mode::Ask, &grants).decision, Ask);
        // A grant is one prefix, never the whole compound command.
        let j = bash_with(&p, "git push && rm -rf /", Mode::Ask, &grants);
        assert_eq!(j.decision, Ask);
        assert_eq!(j.grants_on_allow_always, [grant(&["rm"])]);
    }

    #[test]
    fn a_grant_neither_loosens_a_rule_nor_acts_as_a_wildcard() {
        let p = policy(&[(Some("git push"), Deny)]);
        let grants = [grant(&["git", "push"]), grant(&["*"])];
        assert_eq!(bash_with(&p, "git push", Mode::Ask, &grants).decision, Deny);
        assert_eq!(bash_with(&p, "curl x", Mode::Ask, &grants).decision, Ask);
    }

    #[test]
    fn grants_offered_are_per_segment_and_deduplicated() {
        let p = policy(&[(Some("ls"), Allow)]);
        let j = bash(
            &p,
            "rm a; ls; rm b | cargo build --release; npm -v; make",
            Mode::Ask,
        );
        assert_eq!(j.decision, Ask);
        assert_eq!(
            j.grants_on_allow_always,
            [
                grant(&["rm"]),
                grant(&["cargo", "build"]),
                grant(&["npm"]),
                grant(&["make"])
            ]
        );
        assert!(j.reason.ends_with("; and 2 more"), "{}", j.reason);
        // A subcommand that could stand for other words is not granted at all.
        let j = bash(&p, "git * x", Mode::Ask);
        assert!(j.grants_on_allow_always.is_empty());
        // The wrapper and what it runs are separate prefixes.
        let j = bash(&p, "sudo apt-get install x", Mode::Ask);
        assert_eq!(
            j.grants_on_allow_always,
            [grant(&["sudo"]), grant(&["apt-get", "install"])]
        );
    }

    #[test]
    fn unparsable_commands_are_asked_or_denied_never_allowed() {
        let p = policy(&[(None, Allow), (Some("echo"), Allow)]);
        for mode in [Mode::Ask, Mode::Auto] {
            let j = bash(&p, "echo 'unclosed", mode);
            assert_eq!(j.decision, Ask);
            assert!(
                j.reason.contains("the command cannot be parsed: "),
                "{}",
                j.reason
            );
            assert!(j.grants_on_allow_always.is_empty());
        }
        assert_eq!(bash(&p, "echo 'unclosed", Mode::ReadOnly).decision, Deny);
        let p = policy(&[(None, Deny)]);
        let j = bash(&p, "echo 'unclosed", Mode::Auto);
        assert_eq!(j.decision, Deny);
        assert!(j.reason.contains("cannot be parsed"), "{}", j.reason);
        let huge = "a".repeat(100 * 1024);
        assert_eq!(bash(&policy(&[]), &huge, Mode::Auto).decision, Ask);
        // brush-parser panics on a descriptor number past i32 (found by the
        // tool_args fuzzer): caught around the walk, the line is unparsable.
        let p = policy(&[(None, Allow), (Some("cat"), Allow)]);
        let j = bash(&p, "cat 77777777777<>f", Mode::Auto);
        assert_eq!(j.decision, Ask, "{}", j.reason);
        assert!(
            j.reason.contains("the command cannot be parsed: "),
            "{}",
            j.reason
        );
        assert_eq!(bash(&p, "cat 77777777777<>f", Mode::Auto).decision, Ask);
    }

    #[test]
    fn a_call_without_a_command_string_is_denied() {
        let p = policy(&[(None, Allow)]);
        for arguments in [json!({}), json!({ "command": 5 }), json!(null), json!("ls")] {
            let j = p.judge("bash", &arguments, Mode::Auto, &[]);
            assert_eq!(j.decision, Deny);
            assert!(j.reason.contains("`command`"), "{}", j.reason);
        }
    }

    #[test]
    fn a_command_that_runs_nothing_is_allowed_unless_a_tool_wide_rule_says_otherwise() {
        let p = policy(&[]);
        for command in ["", "   ", "# just a comment", "X=1"] {
            assert_eq!(bash(&p, command, Mode::Ask).decision, Allow, "{command:?}");
            assert_eq!(
                bash(&p, command, Mode::ReadOnly).decision,
                Allow,
                "{command:?}"
            );
        }
        assert_eq!(bash(&p, "", Mode::Ask).reason, "the command runs nothing");
        let p = policy(&[(None, Ask)]);
        assert_eq!(bash(&p, "", Mode::Auto).decision, Ask);
        assert_eq!(bash(&p, "X=1", Mode::Auto).decision, Ask);
    }

    #[test]
    fn a_redirection_alone_is_a_write_to_judge() {
        let p = policy(&[]);
        let j = bash(&p, "> file", Mode::Ask);
        assert_eq!(j.decision, Ask);
        assert_eq!(
            j.reason,
            "no rule matches a redirection-only command (mode ask)"
        );
        assert!(j.grants_on_allow_always.is_empty());
        assert_eq!(bash(&p, "> file", Mode::Auto).decision, Allow);
        assert_eq!(bash(&p, "> file", Mode::ReadOnly).decision, Deny);
    }

    #[test]
    fn read_only_mode_allows_only_known_readers() {
        let p = policy(&[]);
        for command in [
            "ls -la",
            "git status",
            "git log --oneline | head -5",
            "cat a b | grep -n x | wc -l",
            "find . -name '*.rs' -type f",
            "sort -k2 -n f",
            "echo hi > /dev/null",
            "ls 2>&1",
            "ls 2>/dev/null && pwd",
            "X=1; echo $X",
            "[ -f x ] && test -d y",
            "printf '%s\\n' a",
        ] {
            let j = bash(&p, command, Mode::ReadOnly);
            assert_eq!(j.decision, Allow, "{command}: {}", j.reason);
        }
        let j = bash(&p, "ls", Mode::ReadOnly);
        assert_eq!(j.reason, "read-only mode: `ls` only reads");
    }

    #[test]
    fn read_only_mode_denies_everything_else() {
        let p = policy(&[(None, Allow), (Some("rm"), Allow)]);
        let j = bash(&p, "rm -rf x", Mode::ReadOnly);
        assert_eq!(j.decision, Deny);
        assert_eq!(
            j.reason,
            "read-only mode: `rm -rf x` is not known to be read-only"
        );
        for command in [
            "git status && git push",
            "ls $(rm x)",
            "echo hi > f",
            "ls >> log",
            "{ ls; } > out",
            "find . -delete",
            "find . -name x -exec ls {} \\;",
            "find . -fprint out",
            "find . $ACTION",
            "sort -o f in",
            "sort -uo f in",
            "sort --output=f in",
            "sort --compress-program=sh in",
            "printf -v 'a[$(rm x)]' %s y",
            "test -v 'a[$(rm x)]'",
            "[ -v 'a[$(rm x)]' ]",
            "git log --output=f",
            "tree -o f",
            "$CMD",
            "PATH=. ls",
            "sudo ls",
            "cd /tmp",
            "./ls",
        ] {
            let j = bash(&p, command, Mode::ReadOnly);
            assert_eq!(j.decision, Deny, "{command}: {}", j.reason);
            assert!(j.reason.starts_with("read-only mode: "), "{}", j.reason);
        }
        let j = bash(&p, "find . -delete", Mode::ReadOnly);
        assert!(j.reason.contains("`-delete`"), "{}", j.reason);
        let j = bash(&p, "echo hi > f", Mode::ReadOnly);
        assert_eq!(
            j.reason,
            "read-only mode: `echo hi` writes through a redirection"
        );
    }

    #[test]
    fn a_trap_is_judged_by_its_action() {
        let p = policy(&[(Some("rm"), Deny)]);
        for command in [
            "trap",
            "trap -p EXIT",
            "trap - EXIT",
            "trap '' INT",
            "trap EXIT",
        ] {
            let j = bash(&p, command, Mode::Auto);
            assert_eq!(j.decision, Allow, "{command}: {}", j.reason);
        }
        assert_eq!(bash(&p, "trap 'ls' EXIT", Mode::Auto).decision, Allow);
        // An action only known at run time could be `rm`.
        let j = bash(&p, "trap \"$A\" EXIT", Mode::Auto);
        assert_eq!(j.decision, Ask, "{}", j.reason);
        // Read-only mode refuses the trap (not on its list) whatever the action.
        assert_eq!(bash(&p, "trap 'ls' EXIT", Mode::ReadOnly).decision, Deny);
    }

    #[test]
    fn read_only_mode_refuses_readers_that_write_run_code_or_change_the_system() {
        let p = policy(&[]);
        for (command, culprit) in [
            ("uniq in.txt out.txt", "out.txt"),
            ("uniq -c in out", "out"),
            ("uniq in -c out", "out"),
            ("uniq -f 1 -w2 in out", "out"),
            ("uniq --skip-fields 1 in out", "out"),
            ("uniq -- - out", "out"),
            ("uniq *.txt", "*.txt"),
            ("uniq {a,b}", "{a,b}"),
            ("uniq $IN", "$IN"),
            ("rg --pre ./script pattern", "--pre"),
            ("rg --pre=./script pattern", "--pre=./script"),
            ("rg --pre-glob '*.gz' x", "--pre-glob"),
            ("rg --hostname-bin ./prog x", "--hostname-bin"),
            ("date -s 2020-01-01", "-s"),
            ("date -us 2020-01-01", "-us"),
            ("date --set=2020-01-01", "--set=2020-01-01"),
            ("date --se 2020-01-01", "--se"),
            ("date -f dates", "-f"),
            ("date --file=dates", "--file=dates"),
            ("date 010112002020", "010112002020"),
            ("date -u 0101", "0101"),
            ("date -Is 0101", "0101"),
            ("hostname other", "other"),
            ("hostname -F /etc/hostname", "-F"),
            ("hostname --file=/etc/hostname", "--file=/etc/hostname"),
            ("hostname -b", "-b"),
            ("hostname -- -x", "-x"),
            ("hostname $NAME", "$NAME"),
            ("file -C -m magic", "-C"),
            ("file -zC", "-zC"),
            ("file --compile", "--compile"),
            ("file --comp", "--comp"),
        ] {
            let j = bash(&p, command, Mode::ReadOnly);
            assert_eq!(j.decision, Deny, "{command}: {}", j.reason);
            assert!(
                j.reason.contains(&format!("(`{culprit}` writes")),
                "{command}: {}",
                j.reason
            );
        }
        // A rule that allows them does not loosen read-only mode.
        let p = policy(&[(Some("uniq"), Allow), (Some("date"), Allow)]);
        assert_eq!(bash(&p, "uniq a b", Mode::ReadOnly).decision, Deny);
        assert_eq!(bash(&p, "date -s now", Mode::ReadOnly).decision, Deny);
    }

    #[test]
    fn read_only_mode_still_allows_the_reading_forms_of_those_readers() {
        let p = policy(&[]);
        for command in [
            "uniq",
            "uniq in.txt",
            "uniq -c in.txt",
            "uniq -f 1 -s 2 -w 3 in",
            "uniq --skip-fields 1 --check-chars=3 in",
            "sort f | uniq -c",
            "uniq -",
            "rg pattern src",
            "rg --no-pre -n x",
            "rg -g '*.rs' x",
            "date",
            "date +%s",
            "date -u '+%Y-%m-%d'",
            "date -d tomorrow +%F",
            "date --date 'next week'",
            "date -r file",
            "date --reference file +%s",
            "date -Iseconds",
            "date --rfc-3339 seconds",
            "date -R",
            "hostname",
            "hostname -f",
            "hostname -i",
            "hostname -I",
            "hostname -s",
            "hostname -d",
            "hostname --fqdn",
            "file x",
            "file -m magic x",
            "file -mC x",
            "file -b --mime-type x",
        ] {
            let j = bash(&p, command, Mode::ReadOnly);
            assert_eq!(j.decision, Allow, "{command}: {}", j.reason);
        }
    }

    #[test]
    fn in_read_only_mode_rules_still_restrict_readers() {
        let p = policy(&[
            (Some("cat"), Deny),
            (Some("grep"), Ask),
            (Some("ls"), Allow),
        ]);
        assert_eq!(bash(&p, "cat f", Mode::ReadOnly).decision, Deny);
        assert_eq!(bash(&p, "grep x f", Mode::ReadOnly).decision, Ask);
        assert_eq!(bash(&p, "ls", Mode::ReadOnly).decision, Allow);
        assert_eq!(bash(&p, "ls; grep x f", Mode::ReadOnly).decision, Ask);
    }

    #[test]
    fn the_read_only_list_comes_from_the_config() {
        let p = Policy::new(&PermissionsConfig {
            read_only_commands: vec!["make check".into()],
            ..PermissionsConfig::default()
        });
        assert_eq!(bash(&p, "make check -j4", Mode::ReadOnly).decision, Allow);
        assert_eq!(bash(&p, "make install", Mode::ReadOnly).decision, Deny);
        assert_eq!(bash(&p, "ls", Mode::ReadOnly).decision, Deny);
    }

    #[test]
    fn other_tools_get_their_defaults_when_no_rule_covers_them() {
        let p = policy(&[(Some("ls"), Deny)]);
        let args = json!({ "taskId": "t1" });
        let cases = [
            ("bash_output", Mode::Ask, Allow),
            ("bash_output", Mode::Auto, Allow),
            ("bash_output", Mode::ReadOnly, Allow),
            ("bash_kill", Mode::Ask, Allow),
            ("bash_kill", Mode::Auto, Allow),
            ("bash_kill", Mode::ReadOnly, Deny),
            ("other_tool", Mode::Ask, Ask),
            ("other_tool", Mode::Auto, Allow),
            ("other_tool", Mode::ReadOnly, Deny),
        ];
        for (tool, mode, expected) in cases {
            let j = p.judge(tool, &args, mode, &[]);
            assert_eq!(j.decision, expected, "{tool} {mode:?}: {}", j.reason);
            assert!(j.grants_on_allow_always.is_empty());
        }
        assert_eq!(
            p.judge("other_tool", &args, Mode::Ask, &[]).reason,
            "tool `other_tool` is not covered by any rule (mode ask)"
        );
    }

    #[test]
    fn other_tools_follow_tool_wide_rules_only() {
        let p = Policy::new(&PermissionsConfig {
            rules: vec![
                rule("bash_output", None, Deny),
                rule("bash_kill", Some("x"), Deny),
                rule("*", None, Allow),
            ],
            ..PermissionsConfig::default()
        });
        let args = json!({});
        let j = p.judge("bash_output", &args, Mode::Auto, &[]);
        assert_eq!(j.decision, Deny);
        assert_eq!(
            j.reason,
            "rule bash_output (every call, deny) matches tool `bash_output`"
        );
        assert_eq!(p.judge("bash_kill", &args, Mode::Auto, &[]).decision, Allow);
        assert_eq!(p.judge("other_tool", &args, Mode::Ask, &[]).decision, Allow);
        // No rule loosens read-only mode for a tool that may change state.
        let j = p.judge("other_tool", &args, Mode::ReadOnly, &[]);
        assert_eq!(j.decision, Deny);
        assert_eq!(
            j.reason,
            "read-only mode: tool `other_tool` is not known to be read-only"
        );
        assert_eq!(
            p.judge("bash_kill", &args, Mode::ReadOnly, &[]).decision,
            Deny
        );
    }

    fn file_rule(tool: &str, path: Option<&str>, action: Decision) -> PermissionRule {
        PermissionRule {
            tool: tool.into(),
            path: path.map(str::to_owned),
            action,
            ..PermissionRule::default()
        }
    }

    #[test]
    fn f7_file_tools_are_judged_by_path_mode_and_roots() {
        let p = Policy::new(&PermissionsConfig {
            rules: vec![
                file_rule("write_file", Some("secrets/**"), Deny),
                file_rule("*_file", Some("/etc/allowed/*"), Allow),
                file_rule("read_file", Some("**/.env"), Ask),
            ],
            ..PermissionsConfig::default()
        });
        let cwd = Path::new("/w");
        let roots = [PathBuf::from("/w"), PathBuf::from("/extra")];
        let place = Place {
            cwd,
            roots: &roots,
            sandbox_roots: None,
            read_only_tool: false,
            globs: None,
        };
        let judge = |tool: &str, path: &str, mode| {
            p.judge_in(tool, &json!({ "path": path }), mode, &[], Some(&place))
        };
        // Rules by path, relative to the cwd, `..` taken back first.
        let j = judge("write_file", "secrets/k", Mode::Auto);
        assert_eq!(j.decision, Deny);
        assert_eq!(
            j.reason,
            "rule write_file path `secrets/**` (deny) matches tool `write_file` on /w/secrets/k"
        );
        assert_eq!(
            judge("write_file", "a/../secrets/x/y", Mode::Auto).decision,
            Deny
        );
        assert_eq!(
            judge("write_file", "/w/secrets/k", Mode::Auto).decision,
            Deny
        );
        assert_eq!(judge("edit_file", "secrets/k", Mode::Auto).decision, Allow);
        assert_eq!(judge("read_file", ".env", Mode::Auto).decision, Ask);
        assert_eq!(judge("read_file", "sub/.env", Mode::Auto).decision, Ask);
        // Mode defaults inside the roots.
        assert_eq!(judge("read_file", "src/a.rs", Mode::Ask).decision, Allow);
        assert_eq!(judge("edit_file", "src/a.rs", Mode::Ask).decision, Ask);
        assert_eq!(judge("edit_file", "src/a.rs", Mode::Auto).decision, Allow);
        assert_eq!(judge("write_file", "/extra/f", Mode::Auto).decision, Allow);
        // Read-only mode allows reading only, whatever a rule says.
        assert_eq!(
            judge("read_file", "src/a.rs", Mode::ReadOnly).decision,
            Allow
        );
        let j = judge("write_file", "/etc/allowed/x", Mode::ReadOnly);
        assert_eq!((j.decision, j.cause), (Deny, Cause::ReadOnly));
        // Writes outside the roots are asked even in auto; only a path rule allows them.
        let j = judge("write_file", "../other/f", Mode::Auto);
        assert_eq!(j.decision, Ask);
        assert_eq!(j.reason, "/other/f is outside the session's directories");
        assert_eq!(
            judge("write_file", "/etc/allowed/x", Mode::Auto).decision,
            Allow
        );
        let star = Policy::new(&PermissionsConfig {
            rules: vec![rule("*", None, Allow)],
            ..PermissionsConfig::default()
        });
        let j = star.judge_in(
            "edit_file",
            &json!({"path": "/tmp/x"}),
            Mode::Auto,
            &[],
            Some(&place),
        );
        assert_eq!(j.decision, Ask);
        // Under the sandbox, writes outside its writable roots are denied.
        let sandbox = [PathBuf::from("/w"), PathBuf::from("/cache")];
        let boxed = Place {
            sandbox_roots: Some(&sandbox),
            ..place
        };
        let j = p.judge_in(
            "write_file",
            &json!({"path": "/etc/allowed/x"}),
            Mode::Auto,
            &[],
            Some(&boxed),
        );
        assert_eq!(j.decision, Deny);
        assert_eq!(
            j.reason,
            "/etc/allowed/x is outside the sandbox's writable roots (to write it there, call \
             write_file again with sandbox: \"off\" and a justification: the person is asked)"
        );
        let j = p.judge_in(
            "write_file",
            &json!({"path": "/cache/x"}),
            Mode::Auto,
            &[],
            Some(&boxed),
        );
        assert_eq!(j.decision, Ask);
        // A path rule is only about the file tools: bash ignores it.
        assert_eq!(
            p.judge("bash", &json!({"command": "ls"}), Mode::Auto, &[])
                .decision,
            Allow
        );
        assert_eq!(
            p.judge("read_file", &json!({}), Mode::Auto, &[]).decision,
            Deny
        );
    }

    #[test]
    fn path_rules_are_checked_with_their_examples_and_reachability() {
        let config = PermissionsConfig {
            rules: vec![
                PermissionRule {
                    examples: vec!["secrets/a".into(), "./secrets/b/c".into()],
                    not_examples: vec!["src/secrets".into()],
                    ..file_rule("write_file", Some("secrets/**"), Deny)
                },
                PermissionRule {
                    examples: vec!["src/x".into()],
                    ..file_rule("edit_file", Some("secrets/**"), Deny)
                },
                file_rule("bash", Some("x/**"), Deny),
            ],
            ..PermissionsConfig::default()
        };
        let failed: Vec<String> = check_config(&config).into_iter().map(|f| f.0).collect();
        assert_eq!(
            failed,
            [
                "rule 1 (rule edit_file path `secrets/**` (deny)) should match path `src/x`",
                "rule 2 (rule bash path `x/**` (deny)): `path` applies only to the file tools (read_file, edit_file, write_file) and not with `command`",
            ]
        );
    }

    #[test]
    fn tool_rules_match_tool_names_by_glob() {
        let p = Policy::new(&PermissionsConfig {
            rules: vec![
                rule("mcp__github__*", None, Allow),
                rule("mcp__*", None, Ask),
            ],
            ..PermissionsConfig::default()
        });
        let args = json!({});
        let j = p.judge("mcp__github__list", &args, Mode::Ask, &[]);
        assert_eq!(
            j.decision, Ask,
            "the strongest matching rule wins: {}",
            j.reason
        );
        let p = Policy::new(&PermissionsConfig {
            rules: vec![rule("mcp__github__*", None, Allow)],
            ..PermissionsConfig::default()
        });
        assert_eq!(
            p.judge("mcp__github__list", &args, Mode::Ask, &[]).decision,
            Allow
        );
        assert_eq!(
            p.judge("mcp__gitlab__list", &args, Mode::Ask, &[]).decision,
            Ask
        );
        assert!(path_glob(b"**/.env", b".env"));
        assert!(path_glob(b"src/*.rs", b"src/a.rs"));
        assert!(!path_glob(b"src/*.rs", b"src/x/a.rs"));
        assert!(path_glob(b"src/**/*.rs", b"src/x/y/a.rs"));
        assert!(path_glob(b"a?c", b"abc"));
        assert!(!path_glob(b"a?c", b"a/c"));
        // A pattern from an untrusted project file cannot make matching exponential: this
        // one took minutes with plain backtracking.
        let hostile = "**a".repeat(12) + "**b";
        assert!(!path_glob(hostile.as_bytes(), "a".repeat(60).as_bytes()));
    }

    #[test]
    fn grant_display_joins_its_words() {
        assert_eq!(grant(&["git", "push"]).display(), "git push");
    }

    /// Issue 27 escalation: judged under the sandbox, or not.
    fn escalated(
        p: &Policy,
        command: &str,
        mode: Mode,
        grants: &[Grant],
        sandboxed: bool,
    ) -> Judgement {
        let cwd = Path::new("/w");
        let roots = [cwd.to_path_buf()];
        let place = Place {
            cwd,
            roots: &roots,
            sandbox_roots: sandboxed.then_some(&roots[..]),
            read_only_tool: false,
            globs: None,
        };
        let args =
            json!({"command": command, "sandbox": "off", "justification": "needs the network"});
        p.judge_in("bash", &args, mode, grants, Some(&place))
    }

    #[test]
    fn issue_27_escalation_no_mode_or_grant_lets_a_call_out_of_the_sandbox() {
        let p = policy(&[]);
        for mode in [Mode::Auto, Mode::Ask, Mode::ReadOnly] {
            let j = escalated(&p, "ls", mode, &[], true);
            assert_eq!(j.decision, Ask, "{mode:?}: {}", j.reason);
            assert_eq!(j.cause, Cause::Escalation);
            assert!(j.grants_on_allow_always.is_empty(), "{mode:?}");
            assert_eq!(
                j.reason,
                "no rule naming `ls` allows it outside the sandbox. Outside the sandbox \
                 because: needs the network"
            );
            assert_eq!(
                j.escalation.as_ref().map(|e| e.justification.as_str()),
                Some("needs the network")
            );
        }
        // A grant ("allow always" of an ordinary call) does not either.
        let j = escalated(&p, "git push", Mode::Ask, &[grant(&["git", "push"])], true);
        assert_eq!(j.decision, Ask, "{}", j.reason);
        // Nor a rule for every call, or one whose command is only `*`.
        for every in [None, Some("*")] {
            let j = escalated(&policy(&[(every, Allow)]), "ls", Mode::Auto, &[], true);
            assert_eq!(j.decision, Ask, "{every:?}: {}", j.reason);
        }
        // Read-only mode still denies what it denies.
        assert_eq!(
            escalated(&p, "rm x", Mode::ReadOnly, &[], true).decision,
            Deny
        );
    }

    #[test]
    fn issue_27_escalation_rules_naming_the_command_still_decide() {
        let p = policy(&[
            (Some("git push"), Allow),
            (Some("rm"), Deny),
            (Some("curl"), Ask),
        ]);
        let j = escalated(&p, "git push origin main", Mode::Ask, &[], true);
        assert_eq!(j.decision, Allow, "{}", j.reason);
        assert!(j.escalation.is_some());
        assert!(matches!(j.cause, Cause::Rule { index: 0, .. }));
        // Every segment must be allowed by such a rule: one that is not is asked.
        let j = escalated(&p, "git push && ls", Mode::Auto, &[], true);
        assert_eq!(j.decision, Ask, "{}", j.reason);
        assert_eq!(j.segments[0].decision, Allow);
        assert_eq!(j.segments[1].cause, Cause::Escalation);
        assert_eq!(
            escalated(&p, "rm -rf x", Mode::Auto, &[], true).decision,
            Deny
        );
        let j = escalated(&p, "curl x", Mode::Auto, &[], true);
        assert_eq!(j.decision, Ask);
        assert!(
            matches!(j.cause, Cause::Rule { index: 2, .. }),
            "{:?}",
            j.cause
        );
        assert!(j.grants_on_allow_always.is_empty());
        // Opaque commands are asked as ever.
        assert_eq!(escalated(&p, "$X", Mode::Auto, &[], true).decision, Ask);
        // A rule naming the command allows it beside one that names nothing (of equal
        // rules the judge names the last).
        let p = policy(&[(Some("touch"), Allow), (Some("*"), Allow)]);
        assert_eq!(
            escalated(&p, "touch x", Mode::Ask, &[], true).decision,
            Allow
        );
        assert_eq!(escalated(&p, "cp x y", Mode::Ask, &[], true).decision, Ask);
    }

    #[test]
    fn issue_27_escalation_is_ignored_outside_the_sandbox_and_when_invalid() {
        let p = policy(&[]);
        let j = escalated(&p, "ls", Mode::Auto, &[], false);
        assert_eq!(j, bash(&p, "ls", Mode::Auto));
        assert!(j.escalation.is_none());
        // Without a justification the tool refuses the call; the judge sees no request.
        let cwd = Path::new("/w");
        let roots = [cwd.to_path_buf()];
        let place = Place {
            cwd,
            roots: &roots,
            sandbox_roots: Some(&roots),
            read_only_tool: false,
            globs: None,
        };
        let args = json!({"command": "ls", "sandbox": "off"});
        let j = p.judge_in("bash", &args, Mode::Auto, &[], Some(&place));
        assert_eq!(j.decision, Allow);
        assert!(j.escalation.is_none());
    }

    fn net_rule(host: Option<&str>, port: Option<u16>, action: Decision) -> PermissionRule {
        PermissionRule {
            tool: "network".into(),
            host: host.map(str::to_owned),
            port,
            action,
            ..PermissionRule::default()
        }
    }

    fn net_policy(rules: Vec<PermissionRule>, network: &NetworkConfig) -> Policy {
        Policy::new(&PermissionsConfig {
            rules,
            ..PermissionsConfig::default()
        })
        .with_network(network)
    }

    fn connect(policy: &Policy, host: &str, port: u16, mode: Mode, grants: &[Grant]) -> Judgement {
        policy.judge(
            "network",
            &json!({"host": host, "port": port, "scheme": "https", "command": "cargo build"}),
            mode,
            grants,
        )
    }

    #[test]
    fn e10_network_rules_match_host_and_port_and_the_strongest_wins() {
        let p = net_policy(
            vec![
                net_rule(Some("*.crates.io"), None, Allow),
                net_rule(Some("static.crates.io"), Some(80), Deny),
                net_rule(None, Some(22), Ask),
            ],
            &NetworkConfig::default(),
        );
        let j = connect(&p, "index.crates.io", 443, Mode::Ask, &[]);
        assert_eq!(j.decision, Allow);
        assert_eq!(
            j.reason,
            "rule network host `*.crates.io` (allow) matches index.crates.io:443"
        );
        assert!(
            matches!(j.cause, Cause::Rule { index: 0, .. }),
            "{:?}",
            j.cause
        );
        assert!(j.grants_on_allow_always.is_empty());
        // The port narrows a rule; deny beats allow.
        assert_eq!(
            connect(&p, "static.crates.io", 443, Mode::Ask, &[]).decision,
            Allow
        );
        let j = connect(&p, "static.crates.io", 80, Mode::Ask, &[]);
        assert_eq!(j.decision, Deny);
        assert_eq!(
            j.reason,
            "rule network host `static.crates.io` port 80 (deny) matches static.crates.io:80"
        );
        // `*.` covers subdomains only; a port-only rule covers every host on that port.
        assert_eq!(connect(&p, "crates.io", 443, Mode::Auto, &[]).decision, Ask);
        assert_eq!(connect(&p, "crates.io", 22, Mode::Auto, &[]).decision, Ask);
        assert!(matches!(
            connect(&p, "crates.io", 22, Mode::Auto, &[]).cause,
            Cause::Rule { index: 2, .. }
        ));
        // Mixed case and a trailing dot are judged as the lower-case form.
        assert_eq!(
            connect(&p, "INDEX.Crates.IO.", 443, Mode::Ask, &[]).decision,
            Allow
        );
        // An address is judged as the address, however the call spells it.
        let p = net_policy(
            vec![net_rule(Some("127.0.0.1"), None, Deny)],
            &NetworkConfig::default(),
        );
        for spelling in ["127.0.0.1", "2130706433", "0x7f.1", "::ffff:127.0.0.1"] {
            let j = connect(&p, spelling, 8080, Mode::Auto, &[]);
            assert_eq!(j.decision, Deny, "{spelling}: {}", j.reason);
            assert!(j.reason.ends_with("matches 127.0.0.1:8080"), "{}", j.reason);
        }
        // A tool-wide rule (network or `*`) covers every host.
        let p = net_policy(vec![rule("network", None, Deny)], &NetworkConfig::default());
        assert_eq!(
            connect(&p, "example.com", 443, Mode::Auto, &[]).decision,
            Deny
        );
        let p = net_policy(vec![rule("*", None, Allow)], &NetworkConfig::default());
        assert_eq!(
            connect(&p, "example.com", 443, Mode::Ask, &[]).decision,
            Allow
        );
    }

    #[test]
    fn e10_host_rules_are_about_network_only() {
        // A host rule does not touch bash or other tools, and bash rules never match a host.
        let p = net_policy(
            vec![
                net_rule(Some("example.com"), None, Deny),
                rule("bash", Some("cargo"), Allow),
            ],
            &NetworkConfig::default(),
        );
        assert_eq!(bash(&p, "cargo build", Mode::Ask).decision, Allow);
        assert_eq!(bash(&p, "curl example.com", Mode::Auto).decision, Allow);
        assert_eq!(
            p.judge(
                "bash_output",
                &json!({"task_id": "bash-1"}),
                Mode::Auto,
                &[]
            )
            .decision,
            Allow
        );
        assert_eq!(
            connect(&p, "index.crates.io", 443, Mode::Auto, &[]).decision,
            Ask
        );
        let mut stray = net_rule(Some("example.com"), None, Deny);
        stray.tool = "*".into();
        let p = net_policy(vec![stray], &NetworkConfig::default());
        assert_eq!(bash(&p, "ls", Mode::Auto).decision, Allow);
    }

    #[test]
    fn e10_a_default_of_allow_does_not_open_this_machine() {
        let network = NetworkConfig {
            default: NetworkDefault::Allow,
            ..NetworkConfig::default()
        };
        let p = net_policy(vec![], &network);
        for host in [
            "localhost",
            "db.localhost",
            "127.0.0.1",
            "::1",
            "::ffff:127.0.0.1",
            "0.0.0.0",
            // Issue 40: every non-public address too, however spelt.
            "10.0.0.5",
            "192.168.1.1",
            "172.16.0.1",
            "100.64.0.1",
            "169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.2",
            "fd00::2",
            "fe80::1",
            "ff02::1",
            "::ffff:10.0.0.5",
        ] {
            let j = connect(&p, host, 5432, Mode::Auto, &[]);
            assert_eq!(j.decision, Ask, "{host}: {}", j.reason);
            assert!(
                j.reason.contains("does not cover this machine"),
                "{}",
                j.reason
            );
        }
        for public in ["example.com", "93.184.216.34", "2606:4700::1111"] {
            assert_eq!(
                connect(&p, public, 443, Mode::Auto, &[]).decision,
                Allow,
                "{public}"
            );
        }
        // A rule naming the host still allows it.
        let rule = net_rule(Some("10.0.0.5"), None, Allow);
        let named = net_policy(vec![rule], &network);
        assert_eq!(
            connect(&named, "10.0.0.5", 5432, Mode::Auto, &[]).decision,
            Allow
        );
        let rule = net_rule(Some("localhost"), None, Allow);
        let p = net_policy(vec![rule], &network);
        assert_eq!(
            connect(&p, "localhost", 5432, Mode::Auto, &[]).decision,
            Allow
        );
    }

    #[test]
    fn e10_without_a_rule_the_mode_and_the_network_default_decide() {
        let cases = [
            (Mode::Ask, NetworkDefault::Allow, Ask, "(mode ask)"),
            (
                Mode::Auto,
                NetworkDefault::Ask,
                Ask,
                "(mode auto: [exec.sandbox.network] default = ask)",
            ),
            (
                Mode::Auto,
                NetworkDefault::Allow,
                Allow,
                "(mode auto: [exec.sandbox.network] default = allow)",
            ),
            (
                Mode::Auto,
                NetworkDefault::Deny,
                Deny,
                "(mode auto: [exec.sandbox.network] default = deny)",
            ),
            (
                Mode::ReadOnly,
                NetworkDefault::Allow,
                Deny,
                "read-only mode",
            ),
        ];
        for (mode, default, expected, says) in cases {
            let network = NetworkConfig {
                default,
                ..NetworkConfig::default()
            };
            let j = connect(
                &net_policy(vec![], &network),
                "index.crates.io",
                443,
                mode,
                &[],
            );
            assert_eq!(j.decision, expected, "{mode:?} {default:?}");
            assert!(j.reason.contains(says), "{}", j.reason);
            assert!(
                j.reason
                    .contains("index.crates.io:443 is not covered by any rule"),
                "{}",
                j.reason
            );
            let cause = if mode == Mode::ReadOnly {
                Cause::ReadOnly
            } else {
                Cause::Mode { mode }
            };
            assert_eq!(j.cause, cause);
            // An ask offers the host to "always"; nothing else offers anything.
            let offered = if expected == Ask {
                vec![Grant::Host("index.crates.io".into())]
            } else {
                vec![]
            };
            assert_eq!(j.grants_on_allow_always, offered);
        }
        // The default is `ask`.
        let j = connect(
            &net_policy(vec![], &NetworkConfig::default()),
            "a.b",
            1,
            Mode::Auto,
            &[],
        );
        assert_eq!(j.decision, Ask);
    }

    #[test]
    fn e10_a_host_grant_allows_that_host_on_any_port_and_never_a_command() {
        let p = net_policy(
            vec![net_rule(Some("evil.example"), None, Deny)],
            &NetworkConfig::default(),
        );
        let host = Grant::host("Index.Crates.io.").unwrap();
        assert_eq!(host, Grant::Host("index.crates.io".into()));
        assert_eq!(host.display(), "network index.crates.io");
        for port in [443, 80] {
            let j = connect(
                &p,
                "index.crates.io",
                port,
                Mode::Ask,
                std::slice::from_ref(&host),
            );
            assert_eq!(j.decision, Allow);
            assert_eq!(
                j.cause,
                Cause::Grant {
                    prefix: "network index.crates.io".into()
                }
            );
        }
        // Not another host, nor its subdomains; a rule still comes first.
        assert_eq!(
            connect(
                &p,
                "static.crates.io",
                443,
                Mode::Ask,
                std::slice::from_ref(&host)
            )
            .decision,
            Ask
        );
        let evil = Grant::host("evil.example").unwrap();
        assert_eq!(
            connect(&p, "evil.example", 443, Mode::Ask, &[evil]).decision,
            Deny
        );
        // A command grant never allows a host, a host grant never a command.
        let words = Grant::of("network index.crates.io");
        assert_eq!(
            connect(&p, "index.crates.io", 443, Mode::Ask, &[words]).decision,
            Ask
        );
        let j = bash_with(
            &p,
            "network index.crates.io",
            Mode::Ask,
            std::slice::from_ref(&host),
        );
        assert_eq!(j.decision, Ask);
        let j = bash_with(&p, "index.crates.io", Mode::Ask, &[host]);
        assert_eq!(j.decision, Ask);
    }

    #[test]
    fn e10_a_call_without_a_valid_host_or_port_is_denied() {
        let p = net_policy(
            vec![rule("network", None, Allow)],
            &NetworkConfig::default(),
        );
        for arguments in [
            json!({"port": 443}),
            json!({"host": "", "port": 443}),
            json!({"host": "a b", "port": 443}),
            json!({"host": "example.com"}),
            json!({"host": "example.com", "port": 0}),
            json!({"host": "example.com", "port": 65536}),
            json!({"host": "example.com", "port": "443"}),
        ] {
            let j = p.judge("network", &arguments, Mode::Auto, &[]);
            assert_eq!(j.decision, Deny, "{arguments}");
            assert!(
                j.reason.starts_with("network call without a valid"),
                "{}",
                j.reason
            );
        }
    }

    #[test]
    fn e10_the_sugar_lists_are_rules_that_name_their_key() {
        let network = NetworkConfig {
            allow: vec!["*.crates.io".into(), "[::1]:8080".into()],
            deny: vec!["static.crates.io:443".into()],
            ..NetworkConfig::default()
        };
        let p = net_policy(vec![rule("bash", Some("ls"), Allow)], &network);
        let j = connect(&p, "index.crates.io", 443, Mode::Ask, &[]);
        assert_eq!(j.decision, Allow);
        assert_eq!(
            j.cause,
            Cause::Rule {
                index: 1,
                rule: "rule network host `*.crates.io` (allow)".into(),
                origin: Some("[exec.sandbox.network] allow".into()),
            }
        );
        let j = connect(&p, "static.crates.io", 443, Mode::Ask, &[]);
        assert_eq!(j.decision, Deny);
        assert!(
            matches!(&j.cause, Cause::Rule { index: 3, origin: Some(o), .. } if o == "[exec.sandbox.network] deny"),
            "{:?}",
            j.cause
        );
        assert_eq!(
            connect(&p, "static.crates.io", 80, Mode::Ask, &[]).decision,
            Allow
        );
        assert_eq!(connect(&p, "::1", 8080, Mode::Ask, &[]).decision, Allow);
        assert_eq!(connect(&p, "::1", 8081, Mode::Ask, &[]).decision, Ask);
        // What explain prints points at the key.
        let text = explain::render_network("static.crates.io:443", "ask", &j);
        assert!(
            text.starts_with("deny: rule 3 at [exec.sandbox.network] deny: rule network host `static.crates.io` port 443 (deny)"),
            "{text}"
        );
        assert!(text.contains("  network: static.crates.io:443\n"), "{text}");
        // A bad entry matches nothing (and check_network refuses the config).
        let bad = NetworkConfig {
            deny: vec!["not a host".into()],
            ..NetworkConfig::default()
        };
        let p = net_policy(vec![], &bad);
        assert_eq!(
            connect(&p, "index.crates.io", 443, Mode::Auto, &[]).decision,
            Ask
        );
    }

    #[test]
    fn e10_check_config_reports_misplaced_and_invalid_host_rules_and_bad_sugar() {
        let mut stray = net_rule(Some("example.com"), Some(443), Deny);
        stray.tool = "bash".into();
        stray.origin = Some("dsh.toml:3".into());
        let mut with_command = net_rule(None, None, Allow);
        with_command.command = Some("curl".into());
        let config = PermissionsConfig {
            rules: vec![
                stray,
                net_rule(Some("*.*.example"), None, Deny),
                net_rule(Some("ok.example"), Some(0), Deny),
                with_command,
                PermissionRule {
                    examples: vec!["a.crates.io".into(), "b.crates.io:80".into()],
                    not_examples: vec!["crates.io".into()],
                    ..net_rule(Some("*.crates.io"), None, Allow)
                },
                PermissionRule {
                    examples: vec!["crates.io".into(), "*.x.io".into()],
                    ..net_rule(Some("*.crates.io"), Some(443), Allow)
                },
            ],
            ..PermissionsConfig::default()
        };
        let failed: Vec<String> = check_config(&config).iter().map(|f| f.0.clone()).collect();
        let expected = [
            "dsh.toml:3: rule 0 (rule bash host `example.com` port 443 (deny)): `host` and `port` apply only to tool `network`",
            "rule 1: `host` `*.*.example`: `*.` must be followed by a host name",
            "rule 2 (rule network host `ok.example` port 0 (deny)): `port` must be from 1 to 65535",
            "rule 3 (rule network `curl` (allow)): `command` does not apply to tool `network` (use `host` and `port`)",
            "rule 5 (rule network host `*.crates.io` port 443 (allow)) should match `crates.io`",
            "rule 5 (rule network host `*.crates.io` port 443 (allow)): example `*.x.io` is a pattern, not a host",
        ];
        assert_eq!(failed, expected);
        let network = NetworkConfig {
            allow: vec!["*.crates.io".into(), "crates.io:https".into()],
            deny: vec!["[::1".into()],
            ..NetworkConfig::default()
        };
        let failed: Vec<String> = check_network(&network)
            .iter()
            .map(|f| f.0.clone())
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(
            failed[0].starts_with("[exec.sandbox.network] allow: `crates.io:https`"),
            "{failed:?}"
        );
        assert!(
            failed[1].starts_with("[exec.sandbox.network] deny: `[::1`"),
            "{failed:?}"
        );
        assert!(check_network(&NetworkConfig::default()).is_empty());
    }

    #[test]
    fn e10_grants_read_every_stored_form_and_write_a_host_distinctly() {
        // What logs, grants.json and audit lines already hold: arrays of words.
        let old: Vec<Grant> = serde_json::from_str(r#"[["git","push"],["make"]]"#).unwrap();
        assert_eq!(old, [Grant::of("git push"), Grant::of("make")]);
        let both = vec![Grant::of("git push"), Grant::Host("index.crates.io".into())];
        let text = serde_json::to_string(&both).unwrap();
        assert_eq!(text, r#"[["git","push"],{"host":"index.crates.io"}]"#);
        assert_eq!(serde_json::from_str::<Vec<Grant>>(&text).unwrap(), both);
        // A stored host is read in the one form hosts are compared in; garbage is refused.
        let read: Grant = serde_json::from_str(r#"{"host":"Index.Crates.IO."}"#).unwrap();
        assert_eq!(read, Grant::Host("index.crates.io".into()));
        assert!(serde_json::from_str::<Grant>(r#"{"host":"a b"}"#).is_err());
        assert!(serde_json::from_str::<Grant>(r#""git push""#).is_err());
        // Revoking by what was shown names both spellings.
        assert_eq!(
            Grant::named("network index.crates.io"),
            [
                Grant::of("network index.crates.io"),
                Grant::Host("index.crates.io".into())
            ]
        );
        assert_eq!(Grant::named("git push"), [Grant::of("git push")]);
        assert_eq!(Grant::Host("x.io".into()).words(), None);
    }
}
