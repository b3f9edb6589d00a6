//! What one line of a session log says: the header, then events.
//!
//! These are the on-disk records, not ACP types: the log must stay readable when
//! the protocol crate changes, so it records what happened in dsh's own words and
//! the ACP layer translates on replay. Unknown fields are ignored when reading
//! (an older dsh can read a newer log); an unknown event type makes that one line
//! unreadable, and recovery skips it with a warning rather than failing the log.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// The `stopReason` recovery writes for a turn the daemon never finished.
pub const STOP_INTERRUPTED: &str = "interrupted";

/// The `text` of the failed `tool_result` recovery writes for a call that never
/// got a result.
pub const INTERRUPTED_TEXT: &str = "interrupted";

/// The first line of every log: who the session is. It is written once, at
/// creation, and never rewritten (the log is append-only), so a later title lives
/// in a [`Event::Title`] event, not here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// The session id; always equal to the file's name without `.jsonl`.
    pub id: String,
    /// The session's working directory (ACP `session/new` cwd).
    pub cwd: PathBuf,
    /// When the session was created, in unix milliseconds.
    pub created_ms: u64,
    /// A title known at creation, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// The header as it is framed on disk: `{"type":"header", ...}`. Kept apart from
/// [`Header`] so callers never see the tag and [`Event`] can never parse as one.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum HeaderLine {
    Header(Header),
}

/// What a tool does, as editors show it (ACP `ToolKind`): kept on each logged call so
/// a replay shows it as it was shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    Execute,
    Read,
    Edit,
    /// Reaches the network (the `network` tool's calls).
    Fetch,
    /// Plans or reasons, touching nothing (`todo_write`).
    Think,
    /// Anything else (an MCP server's tool that does not say it only reads), and any
    /// kind a newer dsh logged that this build does not know.
    #[serde(other)]
    Other,
}

impl ToolKind {
    /// The ACP wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Execute => "execute",
            ToolKind::Read => "read",
            ToolKind::Edit => "edit",
            ToolKind::Fetch => "fetch",
            ToolKind::Think => "think",
            ToolKind::Other => "other",
        }
    }
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Completed,
    Failed,
}

/// One block of a user's prompt as the editor sent it (an ACP `ContentBlock`, in the
/// log's own words so the log outlives the protocol crate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum PromptBlock {
    Text {
        text: String,
    },
    /// An image, its bytes in base64.
    Image {
        mime_type: String,
        data: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uri: Option<String>,
    },
    /// A reference to a resource the agent may read (an editor's @-mention).
    ResourceLink {
        uri: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<i64>,
    },
    /// A resource's contents, embedded: `text`, or `blob` (base64) for binary ones.
    Resource {
        uri: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blob: Option<String>,
    },
}

/// One thing that happened in a session, in the order it happened. Every event
/// carries `at_ms`, the unix time in milliseconds when it was recorded.
///
/// A value this build does not know must still read back instead of costing the
/// whole line: `stop_reason` is kept as a string, `kind` reads an unknown word as
/// [`ToolKind::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Event {
    /// What the user sent: `text` is the prompt as the model reads it (resources
    /// inlined, links named), `content` its blocks as the editor sent them, for a
    /// faithful replay. `content` is left out when the prompt was one text block equal
    /// to `text` (and in logs from before it existed): then `text` is the prompt.
    UserMessage {
        at_ms: u64,
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        content: Vec<PromptBlock>,
        /// The ACP `messageId` its chunks carry on replay (absent in older logs: a
        /// replay then derives one from the event's place, the same at every load).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    /// Text the model answered with.
    AgentMessage {
        at_ms: u64,
        text: String,
        /// The ACP `messageId` its chunks carried live, and carry again on replay.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    /// Reasoning text the model streamed.
    AgentThought { at_ms: u64, text: String },
    /// The model asked for a tool. `kind` is the ACP tool kind (`execute`,
    /// `read`, ...), `title` what the editor shows.
    ToolCall {
        at_ms: u64,
        call_id: String,
        tool: String,
        title: String,
        kind: ToolKind,
        arguments: serde_json::Value,
        /// The model asked for it (as opposed to the user: a `!` prompt or a
        /// client's `_dsh/tools/call`). Only model calls go back to the model as
        /// tool calls; the user's are context. Absent in older logs: false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        by_model: bool,
    },
    /// The outcome of the [`Event::ToolCall`] with the same `call_id`, with the
    /// text the model read.
    ToolResult {
        at_ms: u64,
        call_id: String,
        status: ToolStatus,
        text: String,
        is_error: bool,
        /// The files holding output `text` names as truncated or dropped. `None` in
        /// logs from before it was kept (the history then finds the path in the text).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        spills: Option<Vec<std::path::PathBuf>>,
    },
    /// A pre_tool hook rewrote the arguments of the [`Event::ToolCall`] with the same
    /// `call_id`: these ran instead (the call keeps what was asked).
    ToolRewritten {
        at_ms: u64,
        call_id: String,
        arguments: serde_json::Value,
    },
    /// A post_tool hook replaced the text of the [`Event::ToolResult`] with the same
    /// `call_id` (which holds what the model read): the tool's own text.
    ToolResultReplaced {
        at_ms: u64,
        call_id: String,
        original_text: String,
    },
    /// A completion notice of a background task, injected into the history where
    /// it arrived (`source` is `tool-bash`), or context a hook added (`hook:NAME`, no
    /// task).
    Notice {
        at_ms: u64,
        source: String,
        task_id: String,
        text: String,
    },
    /// A prompt turn began.
    TurnStart { at_ms: u64, turn_id: String },
    /// A prompt turn ended; `stop_reason` is an ACP stop reason (`end_turn`,
    /// `cancelled`, `max_tokens`, `max_turn_requests`, `refusal`), `error`, or
    /// [`STOP_INTERRUPTED`] when recovery closed it.
    TurnEnd {
        at_ms: u64,
        turn_id: String,
        stop_reason: String,
    },
    /// The session's mode (`session/set_mode`) changed.
    ModeChange { at_ms: u64, mode_id: String },
    /// The session's title changed; the latest one wins.
    Title { at_ms: u64, title: String },
    /// What one model request used, as the server counted it.
    Usage {
        at_ms: u64,
        model: String,
        prompt_tokens: u64,
        completion_tokens: u64,
    },
    /// The person picked another model for the session's next requests.
    ModelChange { at_ms: u64, model: String },
    /// The person answered "allow always" (`allow`) or "reject always" for these
    /// command prefixes (arrays of words) or hosts (`{"host": ...}`): the session keeps
    /// them across loads and restarts.
    Grant {
        at_ms: u64,
        prefixes: Vec<crate::policy::Grant>,
        allow: bool,
    },
    /// A grant or rejection of `prefix` was withdrawn.
    Revoke {
        at_ms: u64,
        prefix: crate::policy::Grant,
    },
    /// The model's plan (`todo_write`) as it now stands: each one replaces the last.
    Plan { at_ms: u64, entries: Vec<PlanItem> },
    /// A session config option that is a switch was turned on or off (`think_harder`).
    OptionSet {
        at_ms: u64,
        option: String,
        value: bool,
    },
}

/// One step of a plan, in the log's own words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanItem {
    pub content: String,
    pub status: PlanStatus,
    #[serde(default)]
    pub priority: PlanPriority,
}

/// Where a plan's step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Pending,
    InProgress,
    Completed,
}

/// How much a plan's step matters (the model may say; medium when it does not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanPriority {
    High,
    #[default]
    Medium,
    Low,
}

impl Event {
    /// When the event was recorded, in unix milliseconds.
    pub fn at_ms(&self) -> u64 {
        match self {
            Event::UserMessage { at_ms, .. }
            | Event::AgentMessage { at_ms, .. }
            | Event::AgentThought { at_ms, .. }
            | Event::ToolCall { at_ms, .. }
            | Event::ToolResult { at_ms, .. }
            | Event::ToolRewritten { at_ms, .. }
            | Event::ToolResultReplaced { at_ms, .. }
            | Event::Notice { at_ms, .. }
            | Event::TurnStart { at_ms, .. }
            | Event::TurnEnd { at_ms, .. }
            | Event::ModeChange { at_ms, .. }
            | Event::Title { at_ms, .. }
            | Event::Usage { at_ms, .. }
            | Event::ModelChange { at_ms, .. }
            | Event::Grant { at_ms, .. }
            | Event::Revoke { at_ms, .. }
            | Event::Plan { at_ms, .. }
            | Event::OptionSet { at_ms, .. } => *at_ms,
        }
    }
}

/// The session's current title: the last [`Event::Title`], else the header's.
pub fn latest_title<'a>(header: &'a Header, events: &'a [Event]) -> Option<&'a str> {
    events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::Title { title, .. } => Some(title.as_str()),
            _ => None,
        })
        .or(header.title.as_deref())
}

/// The current unix time in milliseconds, for `at_ms` and `created_ms`. A clock
/// before 1970 reads as 0 rather than failing.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Unix milliseconds as an RFC 3339 UTC timestamp: ACP's `updatedAt`, task start times, and the
/// date in the system prompt.
pub fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// A fresh ACP `messageId` for a message about to be shown (and logged with it).
pub fn new_message_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The `messageId` of a notice: derived from what its log line keeps (time, source,
/// text), so the live message and every replay of it carry the same one.
pub fn notice_message_id(at_ms: u64, source: &str, text: &str) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(source.as_bytes());
    hash.update([0]);
    hash.update(text.as_bytes());
    let digest = hash.finalize();
    let tag: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("notice-{at_ms}-{tag}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn iso8601_formats_known_instants() {
        assert_eq!(super::iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(
            super::iso8601(1_798_675_200_123),
            "2026-12-31T00:00:00.123Z"
        );
    }

    #[test]
    fn e10_grant_events_already_logged_read_back_and_a_host_is_written_distinctly() {
        use super::Event;
        use crate::policy::Grant;
        let old = r#"{"type":"grant","atMs":1,"prefixes":[["git","push"]],"allow":true}"#;
        let Event::Grant { prefixes, .. } = serde_json::from_str(old).unwrap() else {
            panic!("not a grant");
        };
        assert_eq!(prefixes, [Grant::of("git push")]);
        let old = r#"{"type":"revoke","atMs":2,"prefix":["make"]}"#;
        let Event::Revoke { prefix, .. } = serde_json::from_str(old).unwrap() else {
            panic!("not a revoke");
        };
        assert_eq!(prefix, Grant::of("make"));
        let host = Event::Grant {
            at_ms: 3,
            prefixes: vec![Grant::Host("index.crates.io".into())],
            allow: false,
        };
        let text = serde_json::to_string(&host).unwrap();
        assert!(
            text.contains(r#""prefixes":[{"host":"index.crates.io"}]"#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), host);
    }
}
