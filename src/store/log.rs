//! One session's append-only log file: creation, crash-safe appends, and the
//! recovery that runs when a log is opened again.
//!
//! Crash safety rests on one rule: every append is a single `write(2)` of one
//! complete line on an `O_APPEND` descriptor. A crash can then only leave the last
//! line short (no newline, or bytes that are not JSON), which [`SessionLog::open`]
//! cuts off; every line before it is whole. Appends are serialized by a mutex per
//! log so that concurrent writers in the daemon never interleave, and the file is
//! `flock`ed for as long as a [`SessionLog`] holds it, so recovery (which appends
//! closing events) runs in exactly one place at a time.
//!
//! Appends are not fsynced. A daemon crash or kill keeps everything written (it is
//! in the page cache), and only a machine crash could lose the last events, which
//! recovery then treats like any torn tail. An fsync per event would put a disk
//! flush (milliseconds, far more on a busy laptop disk) inside every tool call and
//! streamed message. What is synced: a new log (file and directory, so a session id
//! handed to an editor survives power loss), the repairs recovery makes, and
//! whatever callers ask for with [`SessionLog::sync`] (e.g. at the end of a turn or
//! at shutdown).

use super::event::{Event, HeaderLine, INTERRUPTED_TEXT, STOP_INTERRUPTED, ToolStatus, now_ms};
use super::{Header, log_path, sessions_dir};
use crate::fsutil::{ensure_private_dir, open_regular, private_file};
use nix::fcntl::{Flock, FlockArg};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// An open, locked session log. Share it as `Arc<SessionLog>`: appends take
/// `&self` and are serialized internally.
///
/// At most one `SessionLog` per file exists at a time, across threads and
/// processes: a second [`SessionLog::open`] of a log that is already open fails
/// with [`io::ErrorKind::WouldBlock`]. To replay a live session, use
/// [`SessionLog::replay`] on the instance that holds it.
#[derive(Debug)]
pub struct SessionLog {
    id: String,
    path: PathBuf,
    file: Flock<File>,
    /// Held for the whole of each append. The flag is set when a write failed
    /// part-way, so the file may end in a fragment without a newline.
    torn: Mutex<bool>,
}

impl SessionLog {
    /// Creates `state_dir/sessions/<header.id>.jsonl` holding only the header.
    ///
    /// Fails if the id is not a valid session id, or with
    /// [`io::ErrorKind::AlreadyExists`] if anything (a log, a symlink, ...) is
    /// already at that path; the file is created with `O_EXCL | O_NOFOLLOW`, so a
    /// planted symlink is never followed.
    pub fn create(state_dir: &Path, header: &Header) -> io::Result<SessionLog> {
        let path = log_path(state_dir, &header.id)?;
        let dir = sessions_dir(state_dir);
        ensure_private_dir(&dir)?;
        let line = encode(&HeaderLine::Header(header.clone()))?;
        // Readable too, for [`SessionLog::replay`].
        let file = private_file()
            .read(true)
            .append(true)
            .create_new(true)
            .open(&path)?;
        let file = lock(file, &path)?;
        // Without its header the file is not a log (open and list reject it) but
        // would still block the id, so a failed write removes it.
        let written = (&*file)
            .write_all(&line)
            .and_then(|()| file.sync_all())
            .and_then(|()| File::open(&dir)?.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        Ok(SessionLog {
            id: header.id.clone(),
            path,
            file,
            torn: Mutex::new(false),
        })
    }

    /// Opens an existing log, repairs it, and returns it with its header and every
    /// event, in order, including the ones recovery added.
    ///
    /// Recovery, in order:
    /// - a torn last line (no trailing newline, or not JSON at all) is dropped and
    ///   the file truncated to the end of the last complete line, so the next
    ///   append starts on a clean line;
    /// - a complete line that does not read as an event (garbage, or an event
    ///   type this build does not know) is skipped with a warning and left in the
    ///   file; nothing else is lost;
    /// - every `tool_call` without a `tool_result` gets a failed result with the
    ///   text `interrupted`, then, if the last `turn_start` has no `turn_end`, a
    ///   `turn_end` with stop reason `interrupted` is appended. Both are written to
    ///   the file, so a second open finds nothing left to close.
    ///
    /// A file whose first line is not a header for `id` is refused with
    /// [`io::ErrorKind::InvalidData`] and left untouched.
    pub fn open(state_dir: &Path, id: &str) -> io::Result<(SessionLog, Header, Vec<Event>)> {
        let path = log_path(state_dir, id)?;
        ensure_private_dir(&sessions_dir(state_dir))?;
        let file = open_regular(&path, true)?;
        let file = lock(file, &path)?;
        let mut bytes = Vec::new();
        (&*file).read_to_end(&mut bytes)?;
        let parsed = parse(&bytes, id, &path)?;

        let log = SessionLog {
            id: id.to_string(),
            path,
            file,
            torn: Mutex::new(false),
        };
        let truncated = parsed.good_len < bytes.len() as u64;
        if truncated {
            tracing::warn!(
                path = %log.path.display(),
                dropped_bytes = bytes.len() as u64 - parsed.good_len,
                "session log ended in a torn line; truncating it"
            );
            log.file.set_len(parsed.good_len)?;
        }
        let mut events = parsed.events;
        let closing = closing_events(&events, now_ms());
        for event in &closing {
            log.append(event)?;
        }
        if truncated || !closing.is_empty() {
            log.file.sync_data()?;
        }
        events.extend(closing);
        Ok((log, parsed.header, events))
    }

    /// Appends one event as one line, in one write.
    ///
    /// The event is serialized before the lock is taken, so the lock covers only
    /// the write. If a write fails part-way (disk full), the next append starts
    /// with a newline: the fragment becomes a line of its own, which recovery
    /// skips, instead of corrupting the event written after it.
    pub fn append(&self, event: &Event) -> io::Result<()> {
        // A spare leading newline, used only after a failed write.
        let mut buf = vec![b'\n'];
        serde_json::to_writer(&mut buf, event).map_err(io::Error::other)?;
        buf.push(b'\n');
        let mut torn = self.lock_appends();
        let bytes = if *torn { &buf[..] } else { &buf[1..] };
        match (&*self.file).write_all(bytes) {
            Ok(()) => {
                *torn = false;
                Ok(())
            }
            Err(e) => {
                *torn = true;
                Err(e)
            }
        }
    }

    /// Flushes every appended event to disk (`fdatasync`). Appends do not do this
    /// themselves; call it where losing the tail to a power cut would matter.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Reads the log back as it is now, for replaying a session that is open
    /// (`session/load` of a live session). It changes nothing: no truncation, no
    /// closing events; lines that do not read are skipped as in [`SessionLog::open`].
    pub fn replay(&self) -> io::Result<(Header, Vec<Event>)> {
        // Holding the append lock gives a snapshot that ends on a line boundary.
        let _appends = self.lock_appends();
        let len = self.file.metadata()?.len();
        let len = usize::try_from(len).map_err(io::Error::other)?;
        let mut bytes = vec![0; len];
        self.file.read_exact_at(&mut bytes, 0)?;
        let parsed = parse(&bytes, &self.id, &self.path)?;
        Ok((parsed.header, parsed.events))
    }

    /// The events appended after byte `from` of the log, and where the last complete
    /// line ends (the `from` of the next call). `from` is 0 (the whole log: its header
    /// is checked as by [`SessionLog::replay`]) or what an earlier call returned. A
    /// turn reads its history once and then, at each model step, only what was added
    /// since (its own events, notices, titles): reading the whole log at every step
    /// made a long session's steps cost in proportion to everything it ever said.
    pub fn replay_from(&self, from: u64) -> io::Result<(Vec<Event>, u64)> {
        let _appends = self.lock_appends();
        let len = self.file.metadata()?.len();
        if from > len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is {len} bytes, read from {from}", self.path.display()),
            ));
        }
        let read = usize::try_from(len - from).map_err(io::Error::other)?;
        let mut bytes = vec![0; read];
        self.file.read_exact_at(&mut bytes, from)?;
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let events = if from == 0 {
            parse(&bytes, &self.id, &self.path)?.events
        } else {
            let mut events = Vec::new();
            for line in bytes[..complete].split(|&b| b == b'\n') {
                push_event(&mut events, line, &self.path);
            }
            events
        };
        Ok((events, from + complete as u64))
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where the log is on disk.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Pretends a write failed part-way, to test what the next append does.
    #[cfg(test)]
    pub(super) fn mark_torn(&self) {
        *self.lock_appends() = true;
    }

    fn lock_appends(&self) -> MutexGuard<'_, bool> {
        // A panic while holding the lock cannot leave it inconsistent: the flag is
        // only set after the write it describes.
        self.torn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Takes the exclusive, non-blocking lock that makes this the only open log.
fn lock(file: File, path: &Path) -> io::Result<Flock<File>> {
    Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
        let e = io::Error::from(errno);
        io::Error::new(e.kind(), format!("{} is already open: {e}", path.display()))
    })
}

/// A value as one JSON line with its newline.
fn encode<T: serde::Serialize>(value: &T) -> io::Result<Vec<u8>> {
    let mut buf = serde_json::to_vec(value).map_err(io::Error::other)?;
    buf.push(b'\n');
    Ok(buf)
}

pub(super) fn invalid(path: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {why}", path.display()),
    )
}

/// A log read into memory.
struct Parsed {
    header: Header,
    events: Vec<Event>,
    /// Where the last complete, kept line ends; anything after it is torn.
    good_len: u64,
}

/// Reads a whole log. Only the header is required; see [`SessionLog::open`] for
/// what happens to lines that do not read.
fn parse(bytes: &[u8], id: &str, path: &Path) -> io::Result<Parsed> {
    // Everything after the last newline is a fragment of an unfinished write.
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut lines: Vec<(usize, &[u8])> = Vec::new();
    let mut start = 0;
    for (i, &b) in bytes[..complete].iter().enumerate() {
        if b == b'\n' {
            lines.push((start, &bytes[start..i]));
            start = i + 1;
        }
    }

    let Some(&(_, first)) = lines.first() else {
        return Err(invalid(path, "no complete header line"));
    };
    let header = match serde_json::from_slice::<HeaderLine>(first) {
        Ok(HeaderLine::Header(h)) => h,
        Err(e) => return Err(invalid(path, &format!("bad header: {e}"))),
    };
    if header.id != id {
        return Err(invalid(
            path,
            &format!("header is for session {:?}", header.id),
        ));
    }

    let mut good_len = complete;
    // With no fragment, the last write may still have ended as a complete line
    // that is not JSON (a machine crash can leave zeroed or stale blocks); it is
    // torn too. A line that is JSON but not an event we know is kept: it may be
    // from a newer dsh.
    if complete == bytes.len()
        && lines.len() > 1
        && let Some(&(last_start, last)) = lines.last()
        && !is_blank(last)
        && serde_json::from_slice::<serde::de::IgnoredAny>(last).is_err()
    {
        good_len = last_start;
        lines.pop();
    }

    let mut events = Vec::with_capacity(lines.len().saturating_sub(1));
    for &(_, line) in lines.iter().skip(1) {
        push_event(&mut events, line, path);
    }
    Ok(Parsed {
        header,
        events,
        good_len: good_len as u64,
    })
}

/// Adds the event on `line` to `events`; a blank line is nothing, and one that does
/// not read is skipped with a warning (as a torn line that later appends ended).
fn push_event(events: &mut Vec<Event>, line: &[u8], path: &Path) {
    if is_blank(line) {
        return;
    }
    match serde_json::from_slice::<Event>(line) {
        Ok(event) => events.push(event),
        Err(e) => tracing::warn!(
            path = %path.display(),
            error = %e,
            "skipping unreadable session log line"
        ),
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// The events that close what a crash left open: a failed result for every tool
/// call without one (in call order), then the end of the last turn if it never
/// ended. Empty when the history is consistent.
fn closing_events(events: &[Event], at_ms: u64) -> Vec<Event> {
    // Call ids are matched as a multiset so a model that reuses an id across
    // turns still pairs each result with one call.
    let mut open_calls: Vec<&str> = Vec::new();
    for event in events {
        match event {
            Event::ToolCall { call_id, .. } => open_calls.push(call_id),
            Event::ToolResult { call_id, .. } => {
                if let Some(i) = open_calls.iter().position(|c| c == call_id) {
                    open_calls.remove(i);
                }
            }
            _ => {}
        }
    }
    let mut closing: Vec<Event> = open_calls
        .into_iter()
        .map(|call_id| Event::ToolResult {
            at_ms,
            call_id: call_id.to_string(),
            status: ToolStatus::Failed,
            text: INTERRUPTED_TEXT.to_string(),
            is_error: true,
            spills: Some(Vec::new()),
        })
        .collect();

    let last_start = events.iter().enumerate().rev().find_map(|(i, e)| match e {
        Event::TurnStart { turn_id, .. } => Some((i, turn_id)),
        _ => None,
    });
    if let Some((i, turn_id)) = last_start {
        let ended = events[i + 1..]
            .iter()
            .any(|e| matches!(e, Event::TurnEnd { turn_id: ended, .. } if ended == turn_id));
        if !ended {
            closing.push(Event::TurnEnd {
                at_ms,
                turn_id: turn_id.clone(),
                stop_reason: STOP_INTERRUPTED.to_string(),
            });
        }
    }
    closing
}
