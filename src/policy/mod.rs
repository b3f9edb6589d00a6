//! The built-in permission policy: judges one tool call from the configured rules, the
//! session's mode and the session's "allow always" grants.
//!
//! A bash call is judged segment by segment (see [`shell::segments`]) and the call gets the
//! strongest decision of its segments (`Deny > Ask > Allow`), so an allowed `git status`
//! cannot carry an unjudged `rm -rf build` along with it, and "allow always" grants one
//! command prefix, never a whole compound command.

use self::shell::Segment;
use crate::config::{Decision, Mode, PermissionRule, PermissionsConfig};

pub mod shell;

/// A command prefix granted "allow always" for one session (e.g. ["git", "push"]).
///
/// It acts as an allow rule for that prefix, matched word for word (a `*` in a grant is a
/// literal word, not a wildcard).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Grant(pub Vec<String>);

impl Grant {
    /// The prefix as a command, for permission prompts and messages.
    pub fn display(&self) -> String {
        self.0.join(" ")
    }
}

/// The policy's verdict on one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// What the waterfall does with the call: run it, ask the user, or veto it.
    pub decision: Decision,
    /// Human text saying why: which rule matched which segment, or which mode default applied.
    pub reason: String,
    /// When `decision == Ask`: what an "allow always" answer grants (one prefix per segment
    /// that caused the ask, deduplicated); empty when nothing can be granted safely
    /// (unparsable or dynamic command).
    pub grants_on_allow_always: Vec<Grant>,
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
}

/// A [`PermissionRule`] with its command split into words.
#[derive(Debug, Clone)]
struct Rule {
    tool: String,
    /// `None`: the rule covers every call of its tool.
    prefix: Option<Vec<String>>,
    action: Decision,
}

impl Rule {
    fn new(rule: &PermissionRule) -> Rule {
        // An empty command prefix matches everything, exactly like an absent one.
        let prefix = rule
            .command
            .as_deref()
            .map(|c| c.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .filter(|words| !words.is_empty());
        Rule {
            tool: rule.tool.clone(),
            prefix,
            action: rule.action,
        }
    }

    /// How the rule reads in messages: "rule bash `rm` (deny)", "rule * (every call, ask)".
    fn describe(&self) -> String {
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

    fn covers_tool(&self, tool: &str) -> bool {
        self.tool == tool || self.tool == "*"
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
                        && w.rsplit('/').next() == Some(p.as_str()))
            })
    }
}

/// One segment's verdict.
struct Verdict {
    decision: Decision,
    reason: String,
    /// What "allow always" would grant for it (only for an ask from the mode default).
    grant: Option<Grant>,
}

impl Policy {
    /// Compiles the rules and read-only prefixes of `config`.
    pub fn new(config: &PermissionsConfig) -> Self {
        Policy {
            rules: config.rules.iter().map(Rule::new).collect(),
            read_only: config
                .read_only_commands
                .iter()
                .map(|c| c.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
                .filter(|words| !words.is_empty())
                .collect(),
        }
    }

    /// Judges a call of `tool` with JSON `arguments` (for bash: {"command": "...", ...}) in
    /// `mode`, with the session's allow-always `grants`.
    pub fn judge(
        &self,
        tool: &str,
        arguments: &serde_json::Value,
        mode: Mode,
        grants: &[Grant],
    ) -> Judgement {
        if tool == "bash" {
            self.judge_bash(arguments, mode, grants)
        } else {
            self.judge_tool(tool, mode)
        }
    }

    /// The rules without a command prefix that cover `tool`.
    fn tool_wide<'a>(&'a self, tool: &'a str) -> impl Iterator<Item = &'a Rule> + 'a {
        self.rules
            .iter()
            .filter(move |r| r.prefix.is_none() && r.covers_tool(tool))
    }

    /// A tool other than bash: only tool-wide rules apply.
    fn judge_tool(&self, tool: &str, mode: Mode) -> Judgement {
        // `bash_output` only reads output already collected; `bash_kill` stops a command
        // that was itself allowed, but changes state, so read-only mode refuses it.
        let (default, kind) = match (tool, mode) {
            ("bash_output", _) => (Decision::Allow, "reads command output"),
            ("bash_kill", Mode::ReadOnly) => (Decision::Deny, "stops a command"),
            ("bash_kill", _) => (Decision::Allow, "stops a command"),
            (_, Mode::Ask) => (Decision::Ask, "is not covered by any rule"),
            (_, Mode::Auto) => (Decision::Allow, "is not covered by any rule"),
            (_, Mode::ReadOnly) => (Decision::Deny, "is not known to be read-only"),
        };
        let strongest = self.tool_wide(tool).max_by_key(|r| r.action);
        let judgement = |decision, reason| Judgement {
            decision,
            reason,
            grants_on_allow_always: Vec::new(),
        };
        // Read-only mode vetoes whatever may change state; no rule can loosen that.
        if mode == Mode::ReadOnly && default == Decision::Deny {
            return judgement(
                Decision::Deny,
                format!("read-only mode: tool `{tool}` {kind}"),
            );
        }
        match strongest {
            Some(rule) => judgement(
                rule.action,
                format!("{} matches tool `{tool}`", rule.describe()),
            ),
            None => judgement(
                default,
                format!("tool `{tool}` {kind} (mode {})", mode.id()),
            ),
        }
    }

    fn judge_bash(&self, arguments: &serde_json::Value, mode: Mode, grants: &[Grant]) -> Judgement {
        let Some(command) = arguments.get("command").and_then(|c| c.as_str()) else {
            return Judgement {
                decision: Decision::Deny,
                reason: "bash call without a string `command` argument".into(),
                grants_on_allow_always: Vec::new(),
            };
        };
        let tool_wide = self.tool_wide("bash").max_by_key(|r| r.action);
        let segments = match shell::segments(command) {
            Ok(segments) => segments,
            Err(why) => {
                // Unknown as a whole: never allowed by a rule, and nothing can be granted.
                let base = if mode == Mode::ReadOnly {
                    Decision::Deny
                } else {
                    Decision::Ask
                };
                let mut reason = format!("cannot parse the command: {why}");
                let mut decision = base;
                if let Some(rule) = tool_wide.filter(|r| r.action > base) {
                    decision = rule.action;
                    reason = format!(
                        "{} applies, and the command cannot be parsed: {why}",
                        rule.describe()
                    );
                }
                return Judgement {
                    decision,
                    reason,
                    grants_on_allow_always: Vec::new(),
                };
            }
        };
        if segments.is_empty() {
            return match tool_wide {
                Some(rule) => Judgement {
                    decision: rule.action,
                    reason: format!("{} matches a command that runs nothing", rule.describe()),
                    grants_on_allow_always: Vec::new(),
                },
                None => Judgement {
                    decision: Decision::Allow,
                    reason: "the command runs nothing".into(),
                    grants_on_allow_always: Vec::new(),
                },
            };
        }
        let verdicts: Vec<Verdict> = segments
            .iter()
            .map(|s| self.judge_segment(s, mode, grants))
            .collect();
        let decision = verdicts
            .iter()
            .map(|v| v.decision)
            .max()
            .unwrap_or(Decision::Allow);
        let mut grants_on_allow_always: Vec<Grant> = Vec::new();
        if decision == Decision::Ask {
            for grant in verdicts.iter().filter_map(|v| v.grant.clone()) {
                if !grants_on_allow_always.contains(&grant) {
                    grants_on_allow_always.push(grant);
                }
            }
        }
        Judgement {
            decision,
            reason: summarize(&verdicts, decision),
            grants_on_allow_always,
        }
    }

    fn judge_segment(&self, segment: &Segment, mode: Mode, grants: &[Grant]) -> Verdict {
        let shown = quote_segment(segment);
        // What matches: tool-wide rules always; prefix rules and grants only when the
        // command name is known.
        let named = !segment.dynamic_name && !segment.words.is_empty();
        let rule = self
            .rules
            .iter()
            .filter(|r| r.covers_tool("bash"))
            .filter(|r| r.prefix.is_none() || (named && r.matches(&segment.words)))
            .max_by_key(|r| r.action);
        let grant = grants
            .iter()
            .find(|g| named && !g.0.is_empty() && segment.words.starts_with(&g.0));
        // A grant acts as an allow rule, so it only decides when no rule matched.
        let matched = match (rule, grant) {
            (Some(rule), _) => Some((rule.action, format!("{} matches {shown}", rule.describe()))),
            (None, Some(grant)) => Some((
                Decision::Allow,
                format!(
                    "`{}` is allowed always in this session and matches {shown}",
                    grant.display()
                ),
            )),
            (None, None) => None,
        };
        let verdict = |decision, reason| Verdict {
            decision,
            reason,
            grant: None,
        };

        if mode == Mode::ReadOnly {
            if let Some(why) = self.not_read_only(segment) {
                return verdict(Decision::Deny, format!("read-only mode: {shown} {why}"));
            }
            return match matched {
                Some((decision, reason)) => verdict(decision, reason),
                None => verdict(
                    Decision::Allow,
                    format!("read-only mode: {shown} only reads"),
                ),
            };
        }
        if let Some((decision, reason)) = matched {
            return verdict(decision, reason);
        }
        if segment.words.is_empty() && !segment.writes_redirect && !segment.dynamic_name {
            return verdict(Decision::Allow, format!("{shown} runs nothing"));
        }
        if segment.dynamic_name {
            // The command could be anything, including what a deny or ask rule names; in
            // auto mode that matters only when such a rule exists.
            let restricted = self.rules.iter().any(|r| {
                r.covers_tool("bash") && r.prefix.is_some() && r.action != Decision::Allow
            });
            let decision = match mode {
                Mode::Auto if !restricted => Decision::Allow,
                _ => Decision::Ask,
            };
            let why = if mode == Mode::Auto && restricted {
                "; deny and ask rules cannot be checked against it"
            } else {
                ""
            };
            return verdict(
                decision,
                format!(
                    "{shown} depends on values known only when it runs (mode {}){why}",
                    mode.id()
                ),
            );
        }
        match mode {
            Mode::Auto => verdict(
                Decision::Allow,
                format!("no rule matches {shown} (mode auto)"),
            ),
            _ => Verdict {
                decision: Decision::Ask,
                reason: format!("no rule matches {shown} (mode {})", mode.id()),
                grant: grant_for(&segment.words),
            },
        }
    }

    /// Why `segment` is not known to be read-only, or `None` when it is.
    fn not_read_only(&self, segment: &Segment) -> Option<String> {
        if segment.dynamic_name {
            return Some("depends on values known only when it runs".into());
        }
        if segment.writes_redirect {
            return Some("writes through a redirection".into());
        }
        // Only assignments (or an input redirection): nothing runs. Assignments that change
        // what later commands run (`PATH=...`) are marked dynamic by the shell module.
        if segment.words.is_empty() {
            return None;
        }
        if !self
            .read_only
            .iter()
            .any(|prefix| segment.words.starts_with(prefix))
        {
            return Some("is not known to be read-only".into());
        }
        writing_option(&segment.words).map(|option| {
            format!(
                "is not known to be read-only (`{option}` writes, runs code or changes the system)"
            )
        })
    }
}

/// A word of a read-only command that makes it write files or run code, if any.
///
/// `find` and `sort` are the documented cases. `printf -v` and `test -v` / `[ -v` assign or
/// evaluate array subscripts, which bash expands (so `[ -v 'a[$(rm x)]' ]` runs `rm`);
/// `git ... --output` and `tree -o` write files. `uniq IN OUT` writes OUT, so a second operand
/// (or a glob or brace that could become two) counts. `rg --pre` and `--hostname-bin` run a
/// program (`--pre-glob` only selects files for `--pre`, but is refused with it). `date -s`,
/// `-f` or an operand without a leading `+` set the clock; `hostname NAME`, `-F` and `-b` set
/// the host name, while its bare form and printing flags (`-f`, `-i`, `-s`...) only read.
/// `file -C` compiles a magic file into the working directory. A word holding an expansion
/// (`$X`) could be any option, so for these commands it counts as one too.
fn writing_option(words: &[String]) -> Option<&str> {
    let name = words.first()?.as_str();
    let args = &words[1..];
    let expands = |w: &&String| w.contains(['$', '`']);
    let could_be_several = |w: &&String| w.contains(['*', '?', '[', '{']);
    let found = match name {
        "find" => args.iter().find(|w| {
            matches!(
                w.as_str(),
                "-exec" | "-execdir" | "-ok" | "-okdir" | "-delete" | "-fprint" | "-fprint0"
                    | "-fprintf" | "-fls"
            ) || expands(w)
                // A glob such as `-de*` could expand to `-delete`.
                || (w.starts_with('-') && w.contains(['*', '?', '[']))
        }),
        "sort" => args.iter().find(|w| {
            long_option_is(w, "--output", 3)
                || long_option_is(w, "--compress-program", 4)
                || short_cluster_has(w, 'o', "ktST")
                || expands(w)
        }),
        "printf" | "test" | "[" => args.iter().find(|w| {
            w.as_str() == "-v" || (name == "printf" && w.starts_with("-v")) || expands(w)
        }),
        "git" => args
            .iter()
            .find(|w| long_option_is(w, "--output", 3) || expands(w)),
        "tree" => args.iter().find(|w| {
            short_cluster_has(w, 'o', "LPIHT") || long_option_is(w, "--output", 3) || expands(w)
        }),
        "uniq" => args.iter().find(expands).or_else(|| {
            let files = operands(
                args,
                "fsw",
                "",
                &[
                    ("--skip-fields", 8),
                    ("--skip-chars", 8),
                    ("--check-chars", 4),
                ],
            );
            files
                .iter()
                .copied()
                .find(could_be_several)
                .or(files.get(1).copied())
        }),
        "rg" => args.iter().find(|w| {
            matches!(
                w.split('=').next(),
                Some("--pre" | "--pre-glob" | "--hostname-bin")
            ) || expands(w)
        }),
        "date" => args
            .iter()
            .find(|w| {
                short_cluster_has(w, 's', "dfrI")
                    || short_cluster_has(w, 'f', "dsrI")
                    || long_option_is(w, "--set", 3)
                    || long_option_is(w, "--file", 3)
                    || expands(w)
            })
            .or_else(|| {
                operands(
                    args,
                    "dfrs",
                    "I",
                    &[
                        ("--date", 4),
                        ("--file", 3),
                        ("--reference", 5),
                        ("--set", 3),
                        ("--rfc-3339", 7),
                    ],
                )
                .into_iter()
                .find(|w| !w.starts_with('+'))
            }),
        "hostname" => args
            .iter()
            .find(|w| {
                short_cluster_has(w, 'F', "")
                    || short_cluster_has(w, 'b', "")
                    || long_option_is(w, "--file", 3)
                    || long_option_is(w, "--boot", 3)
                    || expands(w)
            })
            .or_else(|| operands(args, "F", "", &[("--file", 3)]).first().copied()),
        "file" => args.iter().find(|w| {
            short_cluster_has(w, 'C', "eFfmP") || long_option_is(w, "--compile", 4) || expands(w)
        }),
        _ => None,
    };
    found.map(String::as_str)
}

/// Whether `word` is the long option `full`, possibly with `=value`, or an abbreviation of
/// at least `min` characters (getopt_long accepts any unambiguous prefix: `--out=f`).
fn long_option_is(word: &str, full: &str, min: usize) -> bool {
    let name = word.split('=').next().unwrap_or_default();
    name.len() >= min && full.starts_with(name)
}

/// The operands among a command's `args`: the words that are neither options nor their
/// values. Short options in `with_value` take the rest of their cluster or else the next word,
/// those in `attached` only the rest of their cluster; long options in `long_with_value`
/// (full name and shortest accepted abbreviation) take the next word unless written
/// `--name=value`. Every word after `--` is an operand. Where it is unsure a word counts as
/// an operand, which can only make a command look less read-only, never more.
fn operands<'a>(
    args: &'a [String],
    with_value: &str,
    attached: &str,
    long_with_value: &[(&str, usize)],
) -> Vec<&'a String> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        if word == "--" {
            found.extend(&args[i..]);
            break;
        }
        if word.starts_with("--") {
            let takes_next = !word.contains('=')
                && long_with_value
                    .iter()
                    .any(|(full, min)| long_option_is(word, full, *min));
            if takes_next {
                i += 1;
            }
            continue;
        }
        let Some(cluster) = word.strip_prefix('-').filter(|c| !c.is_empty()) else {
            found.push(word);
            continue;
        };
        for (at, option) in cluster.char_indices() {
            if with_value.contains(option) {
                if at + option.len_utf8() == cluster.len() {
                    i += 1;
                }
                break;
            }
            if attached.contains(option) {
                break;
            }
        }
    }
    found
}

/// Whether `word` is a cluster of short options (`-uo`) containing `option` before any
/// option in `with_value` (whose value is the rest of the word).
fn short_cluster_has(word: &str, option: char, with_value: &str) -> bool {
    let Some(cluster) = word.strip_prefix('-').filter(|c| !c.starts_with('-')) else {
        return false;
    };
    for c in cluster.chars() {
        if c == option {
            return true;
        }
        if with_value.contains(c) {
            return false;
        }
    }
    false
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
                Some(Grant(vec![name.clone(), sub.clone()]))
            }
        }
        _ => Some(Grant(vec![name.clone()])),
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

fn shorten(text: &str) -> String {
    const MAX: usize = 120;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

fn action(decision: Decision) -> &'static str {
    match decision {
        Decision::Allow => "allow",
        Decision::Ask => "ask",
        Decision::Deny => "deny",
    }
}

/// The reasons of the segments that decided the call: each distinct one, up to three.
fn summarize(verdicts: &[Verdict], decision: Decision) -> String {
    const SHOWN: usize = 3;
    let mut reasons: Vec<&str> = Vec::new();
    for verdict in verdicts.iter().filter(|v| v.decision == decision) {
        if !reasons.contains(&verdict.reason.as_str()) {
            reasons.push(&verdict.reason);
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
        Grant(words.iter().map(|w| w.to_string()).collect())
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
        assert_eq!(bash(&p, "$CMD foo", Mode::Ask).decision, Allow);
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
        assert!(j.reason.contains("known only when it runs"), "{}", j.reason);
        assert!(j.grants_on_allow_always.is_empty());
        assert_eq!(bash(&p, "$CMD foo", Mode::ReadOnly).decision, Deny);
        let j = bash_with(&p, "$CMD foo", Mode::Ask, &[grant(&["$CMD"])]);
        assert_eq!(j.decision, Ask);
        let p = policy(&[(None, Deny)]);
        assert_eq!(bash(&p, "$CMD foo", Mode::Auto).decision, Deny);
    }

    #[test]
    fn in_auto_mode_a_dynamic_name_is_asked_only_when_a_restriction_could_match() {
        let p = policy(&[]);
        assert_eq!(bash(&p, "$CMD foo", Mode::Auto).decision, Allow);
        let p = policy(&[(Some("ls"), Allow)]);
        assert_eq!(bash(&p, "$CMD foo", Mode::Auto).decision, Allow);
        let p = policy(&[(Some("rm"), Deny)]);
        let j = bash(&p, "$(echo rm) -rf /", Mode::Auto);
        assert_eq!(j.decision, Ask);
        assert!(j.reason.contains("cannot be checked"), "{}", j.reason);
        assert!(j.grants_on_allow_always.is_empty());
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
                j.reason.starts_with("cannot parse the command: "),
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
        // tool_args fuzzer): caught on the parser thread, the line is unparsable.
        let p = policy(&[(None, Allow), (Some("cat"), Allow)]);
        let j = bash(&p, "cat 77777777777<>f", Mode::Auto);
        assert_eq!(j.decision, Ask, "{}", j.reason);
        assert!(
            j.reason.starts_with("cannot parse the command: "),
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
            ("write_file", Mode::Ask, Ask),
            ("write_file", Mode::Auto, Allow),
            ("write_file", Mode::ReadOnly, Deny),
        ];
        for (tool, mode, expected) in cases {
            let j = p.judge(tool, &args, mode, &[]);
            assert_eq!(j.decision, expected, "{tool} {mode:?}: {}", j.reason);
            assert!(j.grants_on_allow_always.is_empty());
        }
        assert_eq!(
            p.judge("write_file", &args, Mode::Ask, &[]).reason,
            "tool `write_file` is not covered by any rule (mode ask)"
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
        assert_eq!(p.judge("write_file", &args, Mode::Ask, &[]).decision, Allow);
        // No rule loosens read-only mode for a tool that may change state.
        let j = p.judge("write_file", &args, Mode::ReadOnly, &[]);
        assert_eq!(j.decision, Deny);
        assert_eq!(
            j.reason,
            "read-only mode: tool `write_file` is not known to be read-only"
        );
        assert_eq!(
            p.judge("bash_kill", &args, Mode::ReadOnly, &[]).decision,
            Deny
        );
    }

    #[test]
    fn grant_display_joins_its_words() {
        assert_eq!(grant(&["git", "push"]).display(), "git push");
    }

    #[test]
    fn writing_options_are_recognized_in_option_clusters() {
        let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(writing_option(&words("sort -rno out f")), Some("-rno"));
        assert_eq!(writing_option(&words("sort -k1o f")), None);
        assert_eq!(writing_option(&words("sort -t o f")), None);
        assert_eq!(writing_option(&words("tree -L 2")), None);
        assert_eq!(writing_option(&words("find . -de*")), Some("-de*"));
        assert_eq!(writing_option(&words("ls -o")), None);
        assert_eq!(writing_option(&words("sort --out=f")), Some("--out=f"));
        assert_eq!(writing_option(&words("sort --comp=sh")), Some("--comp=sh"));
        assert_eq!(writing_option(&words("sort --check f")), None);
        assert_eq!(writing_option(&words("git log --outp=f")), Some("--outp=f"));
        assert_eq!(writing_option(&words("git log --oneline")), None);
    }

    #[test]
    fn operands_skip_options_and_their_values() {
        let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        let found = |s: &str, with_value, attached, long: &[(&str, usize)]| {
            operands(&words(s), with_value, attached, long)
                .into_iter()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(found("-f 1 a -f2 b", "f", "", &[]), ["a", "b"]);
        assert_eq!(found("-cf 1 a", "f", "", &[]), ["a"]);
        assert_eq!(found("-Is a", "s", "I", &[]), ["a"]);
        assert_eq!(
            found("--long v a --long=v b", "", "", &[("--long", 4)]),
            ["a", "b"]
        );
        assert_eq!(found("--lo v", "", "", &[("--long", 5)]), ["v"]);
        assert_eq!(found("- -- -x --y", "", "", &[]), ["-", "-x", "--y"]);
    }
}
