//! The per-session event log, persisted as JSONL: what `session/load` replays and
//! `session/list` pages through.
//!
//! Each session is one file, `state_dir/sessions/<id>.jsonl`: a header line
//! (`{"type":"header","id","cwd","createdMs","title"?}`) followed by one
//! [`Event`] per line, appended and never rewritten. Append-only JSON lines keep
//! a crash harmless (at worst the last line is torn, and [`SessionLog::open`]
//! cuts it off) and keep the history readable with `jq` or `tail -f`.
//!
//! Everything read from disk is untrusted: ids are validated before they become
//! paths, files are opened without following symlinks, and a bad line is skipped
//! rather than failing the session or panicking. The directory is 0700 and the
//! files 0600, since a log holds prompts, commands and their output.

mod event;
mod list;
mod log;
mod state;

pub use event::{
    Event, Header, INTERRUPTED_TEXT, PlanItem, PlanPriority, PlanStatus, PromptBlock,
    STOP_INTERRUPTED, ToolKind, ToolStatus, iso8601, latest_title, new_message_id,
    notice_message_id, now_ms,
};
pub use list::{SessionSummary, list};
pub use log::SessionLog;
pub use state::SessionState;

use std::io;
use std::path::{Path, PathBuf};

/// The longest session id accepted. dsh's own ids are UUIDs (36 characters);
/// the bound leaves room for other schemes while keeping file names short.
pub const MAX_ID_LEN: usize = 128;

/// Whether `id` may name a session: 1 to [`MAX_ID_LEN`] characters from
/// `[A-Za-z0-9_-]`. Such an id has no `/` and is never `.` or `..`, so the file it
/// names is always inside the sessions directory.
pub fn is_valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `state_dir/sessions`, where every log lives.
pub fn sessions_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("sessions")
}

/// The log file of session `id`, refusing ids that could escape the directory.
pub fn log_path(state_dir: &Path, id: &str) -> io::Result<PathBuf> {
    if !is_valid_session_id(id) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid session id {id:?}"),
        ));
    }
    Ok(sessions_dir(state_dir).join(format!("{id}.jsonl")))
}

#[cfg(test)]
mod tests;
