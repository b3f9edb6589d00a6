//! Append-only files that rotate by size (`audit.jsonl`, `daemon.log`): before a
//! line would take the live file past its limit, `NAME.(k-1)` becomes `NAME.k` for
//! every kept `k` (the oldest beyond `keep` is removed), `NAME` becomes `NAME.1`, and
//! a new `NAME` (0600) takes the line. A line is never split between two files, so
//! every file parses on its own, and reading `NAME.keep` .. `NAME.1`, `NAME` in that
//! order gives the lines in the order they were written ([`in_order`]).
//!
//! Numbered names (as logrotate's) rather than dated ones: readers find the set
//! from the live file's name alone, and the order is in the name.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Size limit and number of rotated files kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// The live file rotates before a write would take it past this.
    pub max_bytes: u64,
    /// Rotated files kept (`NAME.1` .. `NAME.keep`); 0 keeps none.
    pub keep: u32,
}

/// An append-only file of whole lines that rotates by [`Rotation`].
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    rotation: Rotation,
    file: File,
    /// The live file's size, counted from its size at open.
    len: u64,
}

impl RotatingFile {
    /// Opens (or creates, 0600, never through a link) `path` for appending.
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<Self> {
        let file = open_append(path)?;
        let len = file.metadata()?.len();
        Ok(Self {
            path: path.to_path_buf(),
            rotation,
            file,
            len,
        })
    }

    /// Appends `bytes` (one or more whole lines) in one write, rotating first when
    /// they would take a non-empty live file past the limit. A line longer than the
    /// limit gets a file of its own.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.len > 0 && self.len + bytes.len() as u64 > self.rotation.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(bytes)?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Rotates now if the live file is over the limit (`dsh gc` after the limit was
    /// lowered); says whether it did.
    pub fn rotate_if_over(&mut self) -> io::Result<bool> {
        if self.len > self.rotation.max_bytes {
            self.rotate()?;
            return Ok(true);
        }
        Ok(false)
    }

    fn rotate(&mut self) -> io::Result<()> {
        shift(&self.path, self.rotation.keep)?;
        self.file = open_append(&self.path)?;
        self.len = 0;
        Ok(())
    }
}

/// Renames `path` to `path.1` after moving the rotated ones up, removing the one that
/// would become `path.(keep+1)`; with `keep` 0, `path` is removed.
fn shift(path: &Path, keep: u32) -> io::Result<()> {
    if keep == 0 {
        return remove_if_there(path);
    }
    remove_if_there(&numbered(path, keep))?;
    for k in (1..keep).rev() {
        rename_if_there(&numbered(path, k), &numbered(path, k + 1))?;
    }
    rename_if_there(path, &numbered(path, 1))
}

/// Removes rotated files numbered past `keep` (left by a larger `keep` before),
/// and rotates the live file if it is over `max_bytes`: what `dsh gc` does to a
/// log no daemon writes. Returns the files removed.
pub fn enforce(path: &Path, rotation: Rotation, dry_run: bool) -> io::Result<Vec<(PathBuf, u64)>> {
    let mut removed = Vec::new();
    for (k, file) in rotated(path) {
        if k > rotation.keep {
            let bytes = std::fs::symlink_metadata(&file)
                .map(|m| m.len())
                .unwrap_or(0);
            if !dry_run {
                remove_if_there(&file)?;
            }
            removed.push((file, bytes));
        }
    }
    let len = std::fs::symlink_metadata(path)
        .map(|m| m.len())
        .unwrap_or(0);
    if len > rotation.max_bytes {
        if rotation.keep == 0 {
            removed.push((path.to_path_buf(), len));
        } else if let Some((_, oldest)) =
            rotated(path).into_iter().find(|(k, _)| *k == rotation.keep)
        {
            let bytes = std::fs::symlink_metadata(&oldest)
                .map(|m| m.len())
                .unwrap_or(0);
            removed.push((oldest, bytes));
        }
        if !dry_run {
            shift(path, rotation.keep)?;
        }
    }
    Ok(removed)
}

/// `path.k` for `k` in 1..: the rotated files that exist, newest (1) first.
pub fn rotated(path: &Path) -> Vec<(u32, PathBuf)> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let prefix = format!("{name}.");
    let Ok(entries) = std::fs::read_dir(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    }) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let file_name = e.file_name();
            let k = file_name.to_str()?.strip_prefix(&prefix)?;
            // Only `1`, `2`, ...: never `01`, `1.tmp` or anything else beside it.
            if k.starts_with('0') || !k.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some((k.parse().ok()?, path.with_file_name(file_name)))
        })
        .collect();
    found.sort();
    found
}

/// The files of a rotated log to read, oldest first: given the live file, its rotated
/// files then itself; given a directory, `name` in it the same way. Any other path (a
/// rotated file, a copy) is read alone.
pub fn in_order(given: &Path, name: &str) -> Vec<PathBuf> {
    let live = if given.is_dir() {
        given.join(name)
    } else if given.file_name().and_then(|n| n.to_str()) == Some(name) {
        given.to_path_buf()
    } else {
        return vec![given.to_path_buf()];
    };
    let mut files: Vec<PathBuf> = rotated(&live).into_iter().rev().map(|(_, p)| p).collect();
    if live.exists() || files.is_empty() {
        files.push(live);
    }
    files
}

/// The lines of several files as one text, each file's last line ended, with where
/// each file starts: [`Concatenated::locate`] turns a line of the text back into its
/// file and line (for error messages).
pub struct Concatenated {
    pub text: String,
    /// (first line of the file in `text`, 1-based; the file).
    starts: Vec<(usize, PathBuf)>,
}

impl Concatenated {
    /// Reads `files` in order; the first that cannot be read is the error.
    pub fn read(files: &[PathBuf]) -> Result<Self, String> {
        let mut text = String::new();
        let mut starts = Vec::new();
        let mut line = 1;
        for file in files {
            let part = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            starts.push((line, file.clone()));
            line += part.lines().count();
            text.push_str(&part);
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
        }
        Ok(Self { text, starts })
    }

    /// `file:line` for line `line` (1-based) of the text.
    pub fn locate(&self, line: usize) -> String {
        match self.position(line) {
            Some((file, line)) => format!("{}:{line}", file.display()),
            None => format!("line {line}"),
        }
    }

    /// The file and its own line (1-based) for line `line` of the text.
    pub fn position(&self, line: usize) -> Option<(PathBuf, usize)> {
        let (start, file) = self.starts.iter().rev().find(|(start, _)| *start <= line)?;
        Some((file.clone(), line - start + 1))
    }

    /// How many files the text was read from.
    pub fn files(&self) -> usize {
        self.starts.len()
    }
}

/// A [`RotatingFile`] shared by the threads that log (the daemon's `tracing` writer).
#[derive(Clone)]
pub struct SharedLog(Arc<Mutex<RotatingFile>>);

impl SharedLog {
    /// Shares `file` between the threads that log.
    pub fn new(file: RotatingFile) -> Self {
        Self(Arc::new(Mutex::new(file)))
    }
}

/// One event's write: `tracing`'s formatter hands each event over in one
/// `write_all`, so a line is one [`RotatingFile::append`].
pub struct SharedLogWriter<'a>(&'a SharedLog);

impl Write for SharedLogWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut file = self.0.0.lock().unwrap_or_else(|p| p.into_inner());
        file.append(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for SharedLog {
    type Writer = SharedLogWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        SharedLogWriter(self)
    }
}

/// `path.k`.
fn numbered(path: &Path, k: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{k}"));
    PathBuf::from(name)
}

fn open_append(path: &Path) -> io::Result<File> {
    crate::fsutil::private_file()
        .append(true)
        .create(true)
        .open(path)
}

fn remove_if_there(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn rename_if_there(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::rename(from, to) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(files: &[PathBuf]) -> String {
        Concatenated::read(files).unwrap().text
    }

    #[test]
    fn rotates_before_a_line_would_pass_the_limit_and_keeps_keep_files() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("audit.jsonl");
        let mut log = RotatingFile::open(
            &live,
            Rotation {
                max_bytes: 10,
                keep: 2,
            },
        )
        .unwrap();
        for n in 0..7 {
            log.append(format!("line{n}\n").as_bytes()).unwrap();
        }
        // Six bytes a line, ten a file: one line per file; two rotated kept.
        assert_eq!(std::fs::read_to_string(&live).unwrap(), "line6\n");
        let rotated: Vec<u32> = rotated(&live).into_iter().map(|(k, _)| k).collect();
        assert_eq!(rotated, [1, 2]);
        assert_eq!(
            lines_of(&in_order(&live, "audit.jsonl")),
            "line4\nline5\nline6\n"
        );
        assert_eq!(
            lines_of(&in_order(dir.path(), "audit.jsonl")),
            "line4\nline5\nline6\n"
        );
        // A rotated file named itself is read alone.
        assert_eq!(
            lines_of(&in_order(&dir.path().join("audit.jsonl.2"), "audit.jsonl")),
            "line4\n"
        );
        let mode = {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(&live).unwrap().permissions().mode() & 0o777
        };
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_reopened_file_counts_what_it_holds_and_a_long_line_gets_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("daemon.log");
        std::fs::write(&live, "12345678\n").unwrap();
        let mut log = RotatingFile::open(
            &live,
            Rotation {
                max_bytes: 10,
                keep: 1,
            },
        )
        .unwrap();
        log.append(b"a very long line\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&live).unwrap(),
            "a very long line\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("daemon.log.1")).unwrap(),
            "12345678\n"
        );
    }

    #[test]
    fn enforce_drops_extra_rotations_and_rotates_an_oversized_live_file() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("daemon.log");
        for (name, text) in [
            ("daemon.log", "live live\n"),
            ("daemon.log.1", "one\n"),
            ("daemon.log.2", "two\n"),
            ("daemon.log.3", "three\n"),
            ("daemon.log.03", "not ours\n"),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let rotation = Rotation {
            max_bytes: 5,
            keep: 2,
        };
        let said = enforce(&live, rotation, true).unwrap();
        let names: Vec<_> = said
            .iter()
            .map(|(p, _)| p.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["daemon.log.3", "daemon.log.2"]);
        assert!(dir.path().join("daemon.log.3").exists(), "dry run removed");
        enforce(&live, rotation, false).unwrap();
        assert!(!live.exists());
        assert_eq!(lines_of(&in_order(&live, "daemon.log")), "one\nlive live\n");
        assert!(dir.path().join("daemon.log.03").exists());
    }

    #[test]
    fn concatenated_lines_are_located_in_their_files() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, "1\n2").unwrap();
        std::fs::write(&b, "3\n4\n").unwrap();
        let c = Concatenated::read(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(c.text, "1\n2\n3\n4\n");
        assert_eq!(c.locate(2), format!("{}:2", a.display()));
        assert_eq!(c.locate(4), format!("{}:2", b.display()));
    }
}
