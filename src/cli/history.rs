//! `dsh chat`'s history of typed lines, kept across runs in the daemon's state
//! directory (`chat_history.jsonl`).
//!
//! The lines a person types may hold secrets (a token pasted into a `!command`), so the
//! file is private like everything else dsh keeps: created 0600 (an older file's mode
//! is tightened), never opened through a link or as anything but a regular file. One
//! JSON string a line, so a line with a newline in it (pasted text) stays one entry.
//! It is bounded: the last [`KEPT`] entries are read, and the file is rewritten to
//! them once it holds twice that many.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The file's name in the state directory.
pub const FILE: &str = "chat_history.jsonl";

/// Entries kept (and offered to the line editor).
pub const KEPT: usize = 1000;

/// Largest history file read, in bytes; a longer one is read from its end.
const MAX_BYTES: u64 = 8 << 20;

/// The history file, open for appending.
pub struct History {
    path: PathBuf,
    file: File,
    /// The entries read at open, oldest first.
    pub entries: Vec<String>,
}

impl History {
    /// Opens (or creates) the history in `state_dir`, reading its last entries.
    pub fn open(state_dir: &Path) -> Result<Self, String> {
        let path = state_dir.join(FILE);
        let named = |e: std::io::Error| format!("{}: {e}", path.display());
        let (entries, lines) = match dsh::fsutil::open_regular(&path, false) {
            Ok(file) => read_entries(file).map_err(named)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), 0),
            Err(e) => return Err(named(e)),
        };
        if lines > 2 * KEPT {
            rewrite(&path, &entries).map_err(named)?;
        }
        let file = dsh::fsutil::private_file()
            .append(true)
            .create(true)
            .open(&path)
            .map_err(named)?;
        let meta = file.metadata().map_err(named)?;
        if !meta.is_file() {
            return Err(format!("{}: not a regular file", path.display()));
        }
        if meta.permissions().mode() & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(named)?;
        }
        Ok(Self {
            path,
            file,
            entries,
        })
    }

    /// Appends one typed line.
    pub fn add(&mut self, line: &str) -> Result<(), String> {
        let mut record = serde_json::Value::from(line).to_string();
        record.push('\n');
        self.file
            .write_all(record.as_bytes())
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }
}

/// The last [`KEPT`] entries of `file`, and how many lines it has. A line that is not
/// a JSON string (a torn write, another program's) is skipped.
fn read_entries(file: File) -> std::io::Result<(Vec<String>, usize)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = file;
    let len = file.metadata()?.len();
    let from_end = len > MAX_BYTES;
    if from_end {
        file.seek(SeekFrom::Start(len - MAX_BYTES))?;
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    if from_end && !lines.is_empty() {
        // The first line read may be the end of one cut in the middle.
        lines.remove(0);
    }
    let count = if from_end { usize::MAX } else { lines.len() };
    let entries: Vec<String> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<String>(l).ok())
        .collect();
    let start = entries.len().saturating_sub(KEPT);
    Ok((entries[start..].to_vec(), count))
}

/// Replaces the file with `entries`: written to a new private file beside it, then
/// renamed over it, so a crash leaves one or the other.
fn rewrite(path: &Path, entries: &[String]) -> std::io::Result<()> {
    let temporary = path.with_extension(format!("jsonl.{}.tmp", std::process::id()));
    let mut file = dsh::fsutil::private_file()
        .write(true)
        .create_new(true)
        .open(&temporary)?;
    let mut text = String::new();
    for entry in entries {
        text.push_str(&serde_json::Value::from(entry.as_str()).to_string());
        text.push('\n');
    }
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all());
    if let Err(e) = written.and_then(|()| std::fs::rename(&temporary, path)) {
        let _ = std::fs::remove_file(&temporary);
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn history_is_private_bounded_and_keeps_multi_line_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut history = History::open(dir.path()).expect("open");
        assert!(history.entries.is_empty());
        history.add("!echo one\ntwo").expect("add");
        history.add("hi").expect("add");
        let path = dir.path().join(FILE);
        assert_eq!(
            std::fs::metadata(&path).expect("meta").mode() & 0o777,
            0o600
        );
        let history = History::open(dir.path()).expect("reopen");
        assert_eq!(history.entries, vec!["!echo one\ntwo", "hi"]);

        // A file grown past twice the bound is cut back to the last entries.
        let mut text = String::from("not json\n");
        for n in 0..2 * KEPT + 5 {
            text.push_str(&format!("\"line {n}\"\n"));
        }
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let history = History::open(dir.path()).expect("reopen");
        assert_eq!(history.entries.len(), KEPT);
        assert_eq!(
            history.entries.last().map(String::as_str),
            Some("line 2004")
        );
        let meta = std::fs::metadata(&path).expect("meta");
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(&path)
                .expect("read")
                .lines()
                .count(),
            KEPT
        );
    }

    #[test]
    fn history_is_never_opened_through_a_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "").expect("write");
        std::os::unix::fs::symlink(&elsewhere, dir.path().join(FILE)).expect("symlink");
        assert!(History::open(dir.path()).is_err());
    }
}
