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
//! - `wrappers/`: the table of programs that run another command, and where that is;
//! - `argv.rs`: the option grammar (getopt_long's) both of them read words with;
//! - `read_only.rs`: the forms of readers that still write (read-only mode);
//! - `word.rs`: a word as far as it is known before the line runs.
//! - `judgement.rs`: what the judge says; `rules.rs`: the rules compiled; `judge/`: one
//!   judge a kind of call; `check.rs`: the checks a config carries.
//!
//! A bash call is judged segment by segment and gets the strongest decision of its
//! segments, so an allowed `git status` cannot carry an unjudged `rm -rf build` along with
//! it, and "allow always" grants one command prefix, never a whole compound command.

pub mod argv;
pub mod audit;
mod check;
pub mod embedded;
pub mod escalation;
pub mod explain;
pub mod globs;
pub mod harmless;
pub mod inline;
pub mod inner;
mod judge;
mod judgement;
pub mod network;
pub mod read_only;
pub mod replay;
mod rules;
pub mod shell;
pub mod word;
pub mod wrappers;

use crate::config::{Config, Decision, Mode, NetworkConfig, NetworkDefault, PermissionsConfig};
pub use check::{FailedCheck, check_config, check_network};
pub use escalation::{Escalation, EscalationError};
pub use judge::file::{FILE_TOOLS, Place, resolve_path};
pub use judgement::{Cause, Grant, Judgement, RuleRef, SegmentJudgement, action};
pub use rules::{CommandMatcher, glob_matches, path_glob};
use rules::{Rule, sugar_rule, tokens};
use shell::Segment;

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

/// A segment as quoted in messages.
fn quote_segment(segment: &Segment) -> String {
    if segment.words.is_empty() {
        if segment.writes_redirect() {
            "a redirection-only command".into()
        } else {
            "an assignment-only command".into()
        }
    } else {
        // Written into one buffer: every segment of a line gets a reason that quotes it
        // (J1's 10 KB line has 629), and joining, shortening and quoting each in a buffer
        // of its own was three allocations a segment. The same text as
        // `format!("`{}`", shorten(&segment.display()))`.
        let mut quoted =
            String::with_capacity(segment.words.iter().map(|w| w.len() + 1).sum::<usize>() + 4);
        quoted.push('`');
        for (i, word) in segment.words.iter().enumerate() {
            if i > 0 {
                quoted.push(' ');
            }
            quoted.push_str(word);
        }
        if let Some((cut, _)) = quoted[1..].char_indices().nth(SHORTENED_CHARS) {
            quoted.truncate(1 + cut);
            quoted.push_str("...");
        }
        quoted.push('`');
        quoted
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

/// Characters of a command a message quotes before it cuts the rest to `...`.
const SHORTENED_CHARS: usize = 120;

fn shorten(text: &str) -> String {
    match text.char_indices().nth(SHORTENED_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
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
mod tests;
