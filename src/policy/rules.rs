//! The configured rules as the judge matches them: a [`PermissionRule`] compiled into a
//! [`Rule`] (command words, path glob, host and port), the globs tool names and paths are
//! matched with, and [`CommandMatcher`] for hooks that match commands as deny rules do.

use super::judgement::{Cause, SegmentJudgement, action};
use super::network::{HostEntry, HostPattern};
use super::word::base_name;
use super::{FILE_TOOLS, NETWORK_TOOL};
use crate::config::{Decision, PermissionRule};

/// A [`PermissionRule`] with its command split into words.
#[derive(Debug, Clone)]
pub(super) struct Rule {
    pub(super) index: usize,
    pub(super) origin: Option<String>,
    pub(super) tool: String,
    /// `None`: the rule covers every call of its tool.
    pub(super) prefix: Option<Vec<String>>,
    /// For the file tools: the glob of paths it covers (`None`: every path).
    pub(super) path: Option<String>,
    /// For `network`: the hosts it covers (`None`: every host, or `host_error`).
    pub(super) host: Option<HostPattern>,
    /// Why its `host` is not a host pattern: such a rule matches nothing, and
    /// [`check_config`] refuses the config that holds it.
    pub(super) host_error: Option<String>,
    /// For `network`: the port it covers (`None`: every port).
    pub(super) port: Option<u16>,
    pub(super) action: Decision,
}

impl Rule {
    pub(super) fn new(index: usize, rule: &PermissionRule) -> Rule {
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
    pub(super) fn names_hosts(&self) -> bool {
        self.host.is_some() || self.host_error.is_some() || self.port.is_some()
    }

    /// Whether the rule covers a connection to `host`:`port` (a call of `network` it
    /// covers the tool of): its host pattern, if any, matches and its port, if any, is
    /// that one. A rule whose host is not a pattern matches nothing.
    pub(super) fn matches_host(&self, host: &str, port: u16) -> bool {
        self.host_error.is_none()
            && self.host.as_ref().is_none_or(|h| h.matches(host))
            && self.port.is_none_or(|p| p == port)
    }

    /// How the rule reads in messages: "rule bash `rm` (deny)", "rule * (every call, ask)".
    pub(super) fn describe(&self) -> String {
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

    pub(super) fn cause(&self) -> Cause {
        Cause::Rule {
            index: self.index,
            rule: self.describe(),
            origin: self.origin.clone(),
        }
    }

    /// Whether the rule is about `tool`: its name or a glob matching it (`mcp__github__*`).
    /// A rule with a `path` is only about the file tools.
    /// A rule with a `host` or `port` only about `network`.
    pub(super) fn covers_tool(&self, tool: &str) -> bool {
        (self.path.is_none() || FILE_TOOLS.contains(&tool))
            && (!self.names_hosts() || tool == NETWORK_TOOL)
            && glob_matches(&self.tool, tool)
    }

    /// Whether the rule's prefix matches `words`. A `*` matches any one word. Deny and ask
    /// rules also match a command name by its last path component (`/bin/rm` for `rm`):
    /// a restriction must not be dodged by spelling the path, while an allowance must not
    /// extend to a same-named program elsewhere (`./ls`).
    pub(super) fn matches(&self, words: &[String]) -> bool {
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
    pub(super) fn applies(&self, words: &[String], opaque_tokens: Option<&[&str]>) -> bool {
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
    pub(super) fn appears_in(&self, tokens: &[&str]) -> bool {
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

/// A tool name against a pattern where `*` matches any run of characters and `?` one
/// (`mcp__github__*`); tool names have no path semantics.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    // Most rules name their tool outright (`bash`), and every rule is asked about every
    // segment of a line: a pattern without wildcards is compared as it is, without the two
    // buffers below (J1: 2,400 calls a judgement of the 10 KB line).
    if !pattern.contains(['*', '?']) {
        return pattern == name;
    }
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
pub(super) fn tokens(texts: &[String]) -> Vec<&str> {
    texts
        .iter()
        .flat_map(|t| {
            t.split(|c: char| c.is_whitespace() || ";|&()<>'\"`$={}\\".contains(c))
                .filter(|t| !t.is_empty())
        })
        .collect()
}

/// The rule an `[exec.sandbox.network]` `allow` or `deny` entry stands for.
pub(super) fn sugar_rule(index: usize, entry: &str, action: Decision, key: &str) -> Rule {
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
