//! Paging through persisted sessions for ACP `session/list`.
//!
//! The order is by file mtime (the time of the last append), newest first, ties
//! broken by id, and a cursor names the last session of a page by that same key.
//! Because the key is a total order, the next page starts strictly after the
//! cursor, so paging neither repeats nor skips a session while none changes; a
//! session appended to in between moves to the front and is seen again on a fresh
//! listing, not on the pages in flight.
//!
//! Files are ordered by `stat` alone; a header (the first line) is read only for
//! the sessions that may land on the requested page, so a page costs `limit + 1`
//! header reads plus the ones the cwd filter rejects, however many logs exist.

use super::event::{Header, HeaderLine};
use super::{is_valid_session_id, sessions_dir};
use crate::fsutil::{ensure_private_dir, open_regular};
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// A header line longer than this is not ours (cwd is a path, title a line of
/// text); reading stops there instead of pulling in a whole bogus file.
const MAX_HEADER_BYTES: u64 = 64 * 1024;

/// One persisted session as `session/list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub id: String,
    pub cwd: PathBuf,
    /// The last title found in the log's first 64 KB (a session is titled from its
    /// first prompt, near the start), else the header's. Callers that hold a live
    /// session should prefer its title.
    pub title: Option<String>,
    /// The log's mtime (the last append) in unix milliseconds.
    pub updated_ms: u64,
}

/// One page of the sessions under `state_dir`, most recently updated first, and
/// the cursor for the next page (`None` on the last page).
///
/// `cwd`, when given, keeps only sessions whose header cwd equals it (path
/// equality, no canonicalization). `cursor` is a value returned by an earlier
/// call; anything else fails with [`io::ErrorKind::InvalidInput`]. A `limit` of
/// 0 is treated as 1 so that paging always makes progress. Files that are not
/// valid logs (bad name, not a regular file, no readable header, header for
/// another id) are skipped.
pub fn list(
    state_dir: &Path,
    cwd: Option<&Path>,
    cursor: Option<&str>,
    limit: usize,
) -> io::Result<(Vec<SessionSummary>, Option<String>)> {
    let after = cursor.map(parse_cursor).transpose()?;
    let limit = limit.max(1);
    let dir = sessions_dir(state_dir);
    ensure_private_dir(&dir)?;

    let mut candidates: Vec<(u64, String)> = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
            continue;
        };
        if !is_valid_session_id(id) {
            continue;
        }
        // DirEntry::metadata does not follow symlinks, so a link is skipped here.
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        candidates.push((mtime_ms(&meta), id.to_string()));
    }
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));

    let mut page = Vec::new();
    let mut more = false;
    let remaining = candidates.into_iter().filter(|(updated, id)| match &after {
        None => true,
        Some((cursor_updated, cursor_id)) => {
            updated < cursor_updated || (updated == cursor_updated && id > cursor_id)
        }
    });
    for (updated_ms, id) in remaining {
        let Some(header) = read_header(&dir.join(format!("{id}.jsonl")), &id) else {
            continue;
        };
        if cwd.is_some_and(|cwd| header.cwd != cwd) {
            continue;
        }
        if page.len() == limit {
            // Only a session that will really be listed earns a next cursor, so
            // the last page never points at an empty one.
            more = true;
            break;
        }
        page.push(SessionSummary {
            id,
            cwd: header.cwd,
            title: header.title,
            updated_ms,
        });
    }
    let next = if more {
        page.last().map(|s| format!("{}:{}", s.updated_ms, s.id))
    } else {
        None
    };
    Ok((page, next))
}

/// A cursor is `<updated_ms>:<id>`, the sort key of the last session listed.
fn parse_cursor(cursor: &str) -> io::Result<(u64, String)> {
    cursor
        .split_once(':')
        .and_then(|(ms, id)| Some((ms.parse().ok()?, id)))
        .filter(|(_, id)| is_valid_session_id(id))
        .map(|(ms, id)| (ms, id.to_string()))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "invalid cursor"))
}

/// The header of the log at `path` if it is one, for session `id`.
fn read_header(path: &Path, id: &str) -> Option<Header> {
    let result = (|| {
        let file = open_regular(path, false).ok()?;
        let mut line = Vec::new();
        let mut reader = BufReader::new(file.take(MAX_HEADER_BYTES));
        reader.read_until(b'\n', &mut line).ok()?;
        if line.last() != Some(&b'\n') {
            return None;
        }
        let HeaderLine::Header(mut header) = serde_json::from_slice(&line).ok()?;
        if header.id != id {
            return None;
        }
        if let Some(title) = early_title(&mut reader) {
            header.title = Some(title);
        }
        Some(header)
    })();
    if result.is_none() {
        tracing::debug!(path = %path.display(), "not a session log; skipped");
    }
    result
}

/// The last `title` event in what `reader` has left of the log's first 64 KB.
fn early_title(reader: &mut impl BufRead) -> Option<String> {
    let mut title = None;
    for line in reader.lines() {
        let Ok(line) = line else { break };
        if !line.contains("\"type\":\"title\"") {
            continue;
        }
        if let Ok(super::Event::Title { title: t, .. }) = serde_json::from_str(&line) {
            title = Some(t);
        }
    }
    title
}

fn mtime_ms(meta: &std::fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
