//! What the judge says: the decision on a call and on each of its segments, what decided
//! each ([`Cause`]), and what an "allow always" answer grants ([`Grant`]).

use super::{Escalation, network, word};
use crate::config::{Decision, Mode};
use serde::Serialize;

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
    /// A segment writes a file holding a deny rule's words while a later segment of the
    /// line runs a program that may run that file (P8, issue 41): asked, not denied.
    WrittenCode {
        index: usize,
        rule: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        origin: Option<String>,
    },
    /// Code the line writes to a file that a later segment runs as `language` (P8, issue
    /// 41: `printf '...' > x.py; python3 x.py`, `sh x.sh`, `./x` by its shebang, `java
    /// X.java`), read as that language and not shown harmless (`why`): a deny rule's words
    /// stand in it (then `rule` says which, and it is denied), or it is opaque while a deny
    /// or ask rule exists (`rule` absent, asked in `auto`). `runner` is the segment that runs it.
    WrittenScript {
        language: String,
        runner: String,
        why: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        rule: Option<RuleRef>,
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
    /// A file tool's write outside the sandbox's writable `roots`, refused (as data:
    /// a wrapped agent, which cannot ask to leave the sandbox, is told its own way).
    OutsideSandbox { roots: Vec<std::path::PathBuf> },
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
    pub(super) fn of_call(decision: Decision, reason: String) -> Judgement {
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

/// A decision as a word: `allow`, `ask`, `deny`.
pub fn action(decision: Decision) -> &'static str {
    match decision {
        Decision::Allow => "allow",
        Decision::Ask => "ask",
        Decision::Deny => "deny",
    }
}
