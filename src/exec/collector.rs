//! Bounded output collection for one stream of one command (T6, T8, T9, E5).
//!
//! A [`Collector`] keeps the last `max` bytes in memory and, from the first byte
//! that does not fit, writes the whole stream to a spill file. Memory per stream is
//! therefore bounded by `max` whatever the command prints; the spill file receives
//! every byte at disk speed. It also remembers how far the stream has been read,
//! so incremental reads never re-deliver and can tell when data was dropped.
//!
//! A background task's stream writes its file from the first byte instead
//! ([`SpillTarget::from_first_byte`]): the file is then the task's output on disk,
//! which survives the daemon (a crash is reported with it, see `records`). The model
//! still hears of the file only once the stream outgrew memory, as T6 and T9 say.
//!
//! The file is written under the same lock as the tail. Writes go to the page cache
//! and take microseconds, and readers of a running stream are rare, so a second
//! writer thread would add a copy per chunk for no measurable gain.

use crate::fsutil::{ensure_private_dir, private_file};
use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

/// Where the full stream went once it outgrew memory.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Spill {
    /// The stream never outgrew memory.
    #[default]
    None,
    /// Every byte of the stream is in this file.
    Written(PathBuf),
    /// The stream outgrew memory but the file could not be made or written.
    Unavailable(String),
}

impl Spill {
    /// The file holding every byte, when there is one.
    pub fn file(&self) -> Option<&std::path::Path> {
        match self {
            Spill::Written(p) => Some(p),
            Spill::None | Spill::Unavailable(_) => None,
        }
    }

    /// The path to show for this spill: the file, or `(unavailable)`.
    pub fn display_path(&self) -> Option<String> {
        match self {
            Spill::None => None,
            Spill::Written(p) => Some(p.display().to_string()),
            Spill::Unavailable(_) => Some("(unavailable)".to_string()),
        }
    }
}

/// The collected output of a finished stream (E1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollectedOutput {
    /// The tail kept in memory, decoded lossily, never starting mid-character.
    pub text: String,
    /// The stream was longer than the memory bound.
    pub truncated: bool,
    pub spill: Spill,
    /// Bytes the stream carried in total.
    pub total_bytes: u64,
}

/// One incremental read of a stream (T8, T9).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamRead {
    /// The bytes since the previous read, decoded lossily.
    pub text: String,
    /// Some bytes since the previous read were no longer in memory.
    pub dropped: bool,
    pub spill: Spill,
}

/// Where and under which name a stream may spill (names: `outfiles`).
#[derive(Debug, Clone)]
pub struct SpillTarget {
    pub dir: PathBuf,
    pub file_name: String,
    /// Write the file from the stream's first byte (a background task's output on
    /// disk), not only from its first overflow.
    pub from_first_byte: bool,
}

/// Bounded collector of one stream; shared by the reader that fills it and the
/// callers that read it.
#[derive(Debug)]
pub struct Collector {
    state: Mutex<State>,
    /// Counts every push and the close, so a follower waits for the next one
    /// ([`Collector::changes`]) rather than polling.
    changed: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug)]
struct State {
    max: usize,
    tail: VecDeque<u8>,
    /// Bytes received so far.
    total: u64,
    /// Bytes delivered by `read_new` so far.
    read_pos: u64,
    target: Option<SpillTarget>,
    file: Option<File>,
    /// Where `file` is.
    file_path: Option<PathBuf>,
    /// Why the file could not be made or written (then it is not tried again).
    file_error: Option<String>,
    spill: Spill,
    closed: bool,
}

impl Collector {
    /// A collector keeping at most `max` bytes, spilling to `target` on overflow
    /// (with no target an overflow is reported as unavailable).
    pub fn new(max: usize, target: Option<SpillTarget>) -> Self {
        Self {
            state: Mutex::new(State {
                max,
                tail: VecDeque::new(),
                total: 0,
                read_pos: 0,
                target,
                file: None,
                file_path: None,
                file_error: None,
                spill: Spill::None,
                closed: false,
            }),
            changed: tokio::sync::watch::Sender::new(0),
        }
    }

    /// A closed stream whose bytes are in `path` already (a task the daemon lost in a
    /// crash): its tail is the file's last `max` bytes, and the file is its spill (a
    /// read that cannot deliver everything names it, whether the stream was longer
    /// than `max` or its tail was released unread). A file that cannot be read is an
    /// empty stream.
    pub fn recovered(max: usize, path: PathBuf) -> Self {
        let (tail, total) = read_tail(&path, max).unwrap_or_default();
        let spill = if total > 0 {
            Spill::Written(path)
        } else {
            Spill::None
        };
        Self {
            state: Mutex::new(State {
                max,
                tail: tail.into(),
                total,
                read_pos: 0,
                target: None,
                file: None,
                file_path: None,
                file_error: None,
                spill,
                closed: true,
            }),
            changed: tokio::sync::watch::Sender::new(0),
        }
    }

    /// A running stream whose bytes so far are in `path` (a task handed over by the
    /// daemon's previous program across `dsh upgrade`): it goes on appending there,
    /// its tail is the file's last `max` bytes, and `read_pos` bytes were delivered.
    pub fn resumed(
        max: usize,
        path: PathBuf,
        read_pos: u64,
        target: Option<SpillTarget>,
    ) -> std::io::Result<Self> {
        // A stream that printed nothing yet has no file: it is made at its first byte,
        // as it would have been.
        if !path.exists() {
            return Ok(Self::new(max, target));
        }
        let (tail, total) = read_tail(&path, max)?;
        let file = std::fs::OpenOptions::new().append(true).open(&path)?;
        let spill = if total > max as u64 {
            Spill::Written(path.clone())
        } else {
            Spill::None
        };
        Ok(Self {
            state: Mutex::new(State {
                max,
                tail: tail.into(),
                total,
                read_pos: read_pos.min(total),
                target,
                file: Some(file),
                file_path: Some(path),
                file_error: None,
                spill,
                closed: false,
            }),
            changed: tokio::sync::watch::Sender::new(0),
        })
    }

    /// How many bytes [`Collector::read_new`] has delivered.
    pub fn read_position(&self) -> u64 {
        self.lock().read_pos
    }

    /// Wakes on every later push and on the close (a stream that never changes
    /// again is closed or its task gone: the receiver then reports the sender gone).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Tells the followers ([`Collector::changes`]), once the lock is let go.
    fn tell(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Appends bytes produced by the command.
    pub fn push(&self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        self.push_locked(chunk);
        self.tell();
    }

    fn push_locked(&self, chunk: &[u8]) {
        let mut s = self.lock();
        let s = &mut *s;
        let overflows = s.total + chunk.len() as u64 > s.max as u64;
        let from_first_byte = s.target.as_ref().is_some_and(|t| t.from_first_byte);
        if (overflows || from_first_byte)
            && s.file.is_none()
            && s.file_error.is_none()
            && s.spill == Spill::None
        {
            // The file starts now: at the first byte, or at the first overflow, when
            // nothing has been dropped yet, so the tail is the whole stream so far and
            // the file starts complete either way.
            match open_spill(s.target.as_ref()) {
                Ok((path, mut file)) => {
                    let (a, b) = s.tail.as_slices();
                    match file.write_all(a).and_then(|_| file.write_all(b)) {
                        Ok(()) => {
                            s.file = Some(file);
                            s.file_path = Some(path);
                        }
                        Err(e) => s.file_error = Some(format!("write {}: {e}", path.display())),
                    }
                }
                Err(reason) => s.file_error = Some(reason),
            }
        }
        if let Some(file) = s.file.as_mut()
            && let Err(e) = file.write_all(chunk)
        {
            s.file_error = Some(format!("write failed: {e}"));
            s.file = None;
            if s.spill != Spill::None {
                s.spill = Spill::Unavailable(format!("write failed: {e}"));
            }
        }
        if overflows && s.spill == Spill::None {
            s.spill = match (&s.file, &s.file_path, &s.file_error) {
                (Some(_), Some(path), _) => Spill::Written(path.clone()),
                (_, _, Some(reason)) => Spill::Unavailable(reason.clone()),
                _ => Spill::Unavailable("no spill file".into()),
            };
        }
        s.total += chunk.len() as u64;
        if chunk.len() >= s.max {
            s.tail.clear();
            s.tail.extend(&chunk[chunk.len() - s.max..]);
        } else {
            let excess = (s.tail.len() + chunk.len()).saturating_sub(s.max);
            s.tail.drain(..excess);
            s.tail.extend(chunk);
        }
    }

    /// Marks the stream as ended: a trailing partial character is then final.
    pub fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        s.file = None;
        s.file_path = None;
        // Nothing will spill any more: the target's paths (two allocations per
        // stream, kept for as long as the task is) are not needed.
        s.target = None;
        // A closed stream never grows again, so the ring gives back the spare
        // capacity its growth left (up to as much again as it holds): a finished
        // task then costs what `heap_bytes` says, and the retention budget that
        // counts it is exact.
        s.tail.shrink_to_fit();
        drop(s);
        self.tell();
    }

    /// Frees the tail kept in memory, for good; the totals, the read position and
    /// the spill stay. Nothing is lost that a reader could still want when the
    /// stream is closed and fully read; otherwise the next [`Collector::read_new`]
    /// delivers nothing of what was not read and flags it as dropped, naming the
    /// spill (which is [`Spill::None`] when the stream never outgrew memory: then
    /// those bytes are gone). Reads never re-deliver after a release either.
    pub fn release(&self) {
        let mut s = self.lock();
        // A new, empty ring: `clear` would keep the allocation.
        s.tail = VecDeque::new();
    }

    /// The bytes since the previous call, never re-delivered. A trailing partial
    /// UTF-8 character is held back until it completes or the stream closes.
    pub fn read_new(&self) -> StreamRead {
        let mut s = self.lock();
        let start = s.total - s.tail.len() as u64;
        let dropped = s.read_pos < start;
        let from = s.read_pos.max(start);
        let offset = (from - start) as usize;
        let bytes: Vec<u8> = s.tail.range(offset..).copied().collect();
        let mut begin = 0;
        if dropped {
            // The read starts where memory starts, possibly mid-character; the
            // whole character is in the spill file.
            begin = skip_continuation(&bytes);
        }
        let end = if s.closed {
            bytes.len()
        } else {
            complete_prefix_len(&bytes).max(begin)
        };
        s.read_pos = from + end as u64;
        StreamRead {
            text: String::from_utf8_lossy(&bytes[begin..end]).into_owned(),
            dropped,
            spill: if dropped {
                s.spill.clone()
            } else {
                Spill::None
            },
        }
    }

    /// Where the stream spilled, if it did.
    pub fn spill(&self) -> Spill {
        self.lock().spill.clone()
    }

    /// The stream's file is to be named by `shown` from now on (`Ok`: where the
    /// session's commands can open it), or is out of their reach (`Err`: why).
    /// Only a stream that spilled changes.
    pub fn publish(&self, shown: Result<PathBuf, String>) {
        let mut s = self.lock();
        if let Spill::Written(_) = s.spill {
            s.spill = match shown {
                Ok(path) => Spill::Written(path),
                Err(why) => Spill::Unavailable(why),
            };
        }
    }

    /// The spill file, once the stream has one (no copy of the tail, unlike
    /// [`Collector::collected`]).
    pub fn spill_file(&self) -> Option<PathBuf> {
        self.lock().spill.file().map(std::path::Path::to_path_buf)
    }

    /// Bytes received so far.
    pub fn total_bytes(&self) -> u64 {
        self.lock().total
    }

    /// The final result of the stream: its tail and where the rest went.
    pub fn collected(&self) -> CollectedOutput {
        let s = self.lock();
        let bytes: Vec<u8> = s.tail.iter().copied().collect();
        let truncated = s.total > s.tail.len() as u64;
        let begin = if truncated {
            skip_continuation(&bytes)
        } else {
            0
        };
        CollectedOutput {
            text: String::from_utf8_lossy(&bytes[begin..]).into_owned(),
            truncated,
            spill: s.spill.clone(),
            total_bytes: s.total,
        }
    }

    /// Bytes held in memory now (for tests of the memory bound).
    #[cfg(test)]
    pub fn memory_bytes(&self) -> usize {
        self.lock().tail.len()
    }

    /// Bytes the ring has allocated: what keeping this stream costs. Spare
    /// capacity goes when the stream closes and all of it on `release`.
    pub fn heap_bytes(&self) -> usize {
        self.lock().tail.capacity()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the state inconsistent in a
        // way that matters more than losing the output, so poisoning is ignored.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The last `max` bytes of the file at `path`, and its length.
fn read_tail(path: &std::path::Path, max: usize) -> std::io::Result<(Vec<u8>, u64)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = crate::fsutil::open_regular(path, false)?;
    let total = file.metadata()?.len();
    let from = total.saturating_sub(max as u64);
    file.seek(SeekFrom::Start(from))?;
    let mut tail = Vec::with_capacity((total - from) as usize);
    (&mut file).take(max as u64).read_to_end(&mut tail)?;
    let total = from + tail.len() as u64;
    Ok((tail, total))
}

fn open_spill(target: Option<&SpillTarget>) -> Result<(PathBuf, File), String> {
    let target = target.ok_or_else(|| "no spill directory".to_string())?;
    ensure_private_dir(&target.dir).map_err(|e| e.to_string())?;
    let path = target.dir.join(&target.file_name);
    let file = private_file()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| format!("create {}: {e}", path.display()))?;
    Ok((path, file))
}

/// Number of leading UTF-8 continuation bytes (at most 3): the rest of a
/// character whose start was dropped.
fn skip_continuation(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|b| (**b & 0b1100_0000) == 0b1000_0000)
        .count()
}

/// Length of `bytes` without a trailing UTF-8 sequence that is valid so far but
/// incomplete (it may complete with the next chunk).
pub(crate) fn complete_prefix_len(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for back in 1..=n.min(3) {
        let b = bytes[n - back];
        if (b & 0b1100_0000) == 0b1000_0000 {
            continue; // continuation byte: keep looking for the lead byte
        }
        let need = match b {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return n, // ASCII or invalid lead: nothing to wait for
        };
        return if need > back { n - back } else { n };
    }
    n
}

#[cfg(test)]
mod tests {
    /// A follower is woken by every push and by the close, and only by those: it
    /// waits for output instead of polling.
    #[test]
    fn a_follower_wakes_on_each_push_and_on_the_close() {
        let c = Collector::new(16, None);
        let mut changes = c.changes();
        assert!(!changes.has_changed().unwrap(), "nothing happened yet");
        c.push(b"");
        assert!(
            !changes.has_changed().unwrap(),
            "an empty chunk is no change"
        );
        c.push(b"a");
        assert!(changes.has_changed().unwrap());
        changes.mark_unchanged();
        c.close();
        assert!(changes.has_changed().unwrap());
        drop(c);
        assert!(changes.has_changed().is_err(), "a stream gone says so");
    }

    use super::*;
    use std::path::Path;

    fn target(dir: &Path) -> Option<SpillTarget> {
        Some(SpillTarget {
            dir: dir.join("spill"),
            file_name: "t.stdout".into(),
            from_first_byte: false,
        })
    }

    fn task_target(dir: &Path) -> Option<SpillTarget> {
        Some(SpillTarget {
            from_first_byte: true,
            ..target(dir).unwrap()
        })
    }

    #[test]
    fn a_task_stream_is_on_disk_from_its_first_byte_and_named_only_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spill/t.stdout");
        let c = Collector::new(8, task_target(dir.path()));
        c.push(b"one\n");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"one\n",
            "written as it came"
        );
        let r = c.read_new();
        assert_eq!((r.text.as_str(), r.dropped), ("one\n", false));
        assert_eq!(c.collected().spill, Spill::None, "T6: no overflow, no path");
        c.push(b"two\nthree\n");
        c.close();
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\nthree\n");
        assert_eq!(c.collected().spill, Spill::Written(path.clone()));
        let r = c.read_new();
        assert!(r.dropped);
        assert_eq!(r.spill, Spill::Written(path));
    }

    #[test]
    fn a_recovered_stream_reads_its_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let short = dir.path().join("short");
        std::fs::write(&short, "saved\n").unwrap();
        let c = Collector::recovered(64, short);
        let r = c.read_new();
        assert_eq!(
            (r.text.as_str(), r.dropped, r.spill),
            ("saved\n", false, Spill::None)
        );
        assert_eq!(c.read_new(), StreamRead::default());
        let long = dir.path().join("long");
        std::fs::write(&long, "0123456789").unwrap();
        let c = Collector::recovered(4, long.clone());
        let r = c.read_new();
        assert_eq!(r.text, "6789");
        assert!(r.dropped);
        assert_eq!(r.spill, Spill::Written(long));
        let missing = Collector::recovered(4, dir.path().join("none"));
        assert_eq!(missing.read_new(), StreamRead::default());
    }

    #[test]
    fn small_output_stays_in_memory() {
        let c = Collector::new(16, None);
        c.push(b"hello\n");
        c.close();
        let out = c.collected();
        assert_eq!(out.text, "hello\n");
        assert!(!out.truncated);
        assert_eq!(out.spill, Spill::None);
    }

    #[test]
    fn t6_overflow_keeps_tail_and_spills_everything() {
        let dir = tempfile::tempdir().unwrap();
        let c = Collector::new(16, target(dir.path()));
        for i in 0..10 {
            c.push(format!("line {i:02}\n").as_bytes());
        }
        c.close();
        let out = c.collected();
        assert!(out.truncated);
        assert_eq!(out.text, "line 08\nline 09\n");
        let Spill::Written(path) = &out.spill else {
            panic!("{:?}", out.spill)
        };
        let all: String = (0..10).map(|i| format!("line {i:02}\n")).collect();
        assert_eq!(std::fs::read_to_string(path).unwrap(), all);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dmode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dmode & 0o777, 0o700);
    }

    #[test]
    fn t6_no_spill_dir_is_unavailable() {
        let c = Collector::new(4, None);
        c.push(b"0123456789");
        let out = c.collected();
        assert!(matches!(out.spill, Spill::Unavailable(_)));
        assert_eq!(out.spill.display_path().unwrap(), "(unavailable)");
    }

    #[test]
    fn t6_existing_spill_file_is_not_overwritten_or_followed() {
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("spill");
        std::fs::create_dir(&spill).unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, spill.join("t.stdout")).unwrap();
        let c = Collector::new(4, target(dir.path()));
        c.push(b"0123456789");
        assert!(matches!(c.collected().spill, Spill::Unavailable(_)));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }

    #[test]
    fn t6_tail_never_starts_mid_character() {
        let c = Collector::new(5, None);
        c.push("aé€€".as_bytes()); // 1 + 2 + 3 + 3 bytes; the tail cuts into a "€"
        let out = c.collected();
        assert_eq!(out.text, "€");
    }

    #[test]
    fn t6_invalid_utf8_is_lossy() {
        let c = Collector::new(64, None);
        c.push(b"ok \xff\xfe end");
        c.close();
        assert_eq!(c.collected().text, "ok \u{fffd}\u{fffd} end");
    }

    #[test]
    fn t8_reads_are_incremental() {
        let c = Collector::new(64, None);
        c.push(b"one\n");
        assert_eq!(c.read_new().text, "one\n");
        assert_eq!(c.read_new().text, "");
        c.push(b"two\n");
        let r = c.read_new();
        assert_eq!(r.text, "two\n");
        assert!(!r.dropped);
    }

    #[test]
    fn t8_partial_character_is_held_until_complete() {
        let c = Collector::new(64, None);
        let euro = "€".as_bytes();
        c.push(&[b'x', euro[0], euro[1]]);
        assert_eq!(c.read_new().text, "x");
        c.push(&euro[2..]);
        assert_eq!(c.read_new().text, "€");
        c.push(&euro[..1]);
        c.close();
        assert_eq!(c.read_new().text, "\u{fffd}");
    }

    #[test]
    fn t9_read_after_drop_is_flagged() {
        let dir = tempfile::tempdir().unwrap();
        let c = Collector::new(8, target(dir.path()));
        c.push(b"0123456789abcdef");
        let r = c.read_new();
        assert!(r.dropped);
        assert_eq!(r.text, "89abcdef");
        assert!(matches!(r.spill, Spill::Written(_)));
        c.push(b"gh");
        let r = c.read_new();
        assert!(!r.dropped);
        assert_eq!(r.text, "gh");
    }

    #[test]
    fn release_of_a_fully_read_stream_loses_nothing_and_frees_the_ring() {
        let c = Collector::new(64, None);
        c.push(b"all of it\n");
        c.close();
        assert_eq!(c.read_new().text, "all of it\n");
        assert!(c.heap_bytes() > 0);
        c.release();
        assert_eq!(c.heap_bytes(), 0);
        let r = c.read_new();
        assert_eq!(r, StreamRead::default(), "nothing new, nothing dropped");
        assert_eq!(c.collected().total_bytes, 10);
    }

    #[test]
    fn t9_unread_bytes_released_without_spill_are_flagged_once() {
        let c = Collector::new(64, None);
        c.push(b"read ");
        assert_eq!(c.read_new().text, "read ");
        c.push(b"unread\n");
        c.close();
        c.release();
        let r = c.read_new();
        assert_eq!(r.text, "", "released bytes are never delivered");
        assert!(r.dropped);
        assert_eq!(r.spill, Spill::None, "the stream never went to a file");
        assert_eq!(c.read_new(), StreamRead::default(), "flagged only once");
        c.release(); // idempotent
        assert_eq!(c.read_new(), StreamRead::default());
    }

    #[test]
    fn t9_unread_bytes_released_after_spill_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let c = Collector::new(8, target(dir.path()));
        c.push(b"0123456789");
        assert_eq!(c.read_new().text, "23456789");
        c.push(b"abc");
        c.close();
        c.release();
        let r = c.read_new();
        assert_eq!(r.text, "");
        assert!(r.dropped);
        let Spill::Written(path) = &r.spill else {
            panic!("{:?}", r.spill)
        };
        assert_eq!(std::fs::read(path).unwrap(), b"0123456789abc");
        assert_eq!(c.read_new(), StreamRead::default());
    }

    #[test]
    fn close_gives_back_spare_capacity() {
        let c = Collector::new(1000, None);
        for _ in 0..10 {
            c.push(&[b'x'; 300]);
        }
        c.close();
        assert_eq!(c.heap_bytes(), c.memory_bytes());
        assert_eq!(c.memory_bytes(), 1000);
    }

    #[test]
    fn e5_memory_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let c = Collector::new(1000, target(dir.path()));
        let chunk = vec![b'z'; 4096];
        for _ in 0..1000 {
            c.push(&chunk);
            assert!(c.memory_bytes() <= 1000);
        }
        let out = c.collected();
        let Spill::Written(p) = out.spill else {
            panic!()
        };
        assert_eq!(std::fs::metadata(p).unwrap().len(), 4096 * 1000);
        assert_eq!(out.total_bytes, 4096 * 1000);
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Any chunking and bound: memory stays within the bound, the spill file (or
        /// the memory, when nothing overflowed) holds the exact stream, interleaved
        /// reads never deliver a byte twice, and what they deliver, with the bytes
        /// they say were dropped, is the stream.
        #[test]
        fn collector_keeps_the_stream_exactly(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..40),
            bound in 16usize..400,
            read_every in 1usize..6,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let c = Collector::new(bound, Some(SpillTarget { dir: dir.path().join("spill"), file_name: "p".into(), from_first_byte: false }));
            let stream: Vec<u8> = chunks.concat();
            // Lossy decoding changes invalid bytes, so delivered text is compared
            // with the stream byte for byte only when the stream is ASCII.
            let ascii = stream.is_ascii();
            let mut delivered = String::new();
            let mut dropped_any = false;
            for (i, chunk) in chunks.iter().enumerate() {
                c.push(chunk);
                prop_assert!(c.memory_bytes() <= bound);
                if i % read_every == 0 {
                    let r = c.read_new();
                    dropped_any |= r.dropped;
                    delivered.push_str(&r.text);
                }
            }
            c.close();
            let r = c.read_new();
            dropped_any |= r.dropped;
            delivered.push_str(&r.text);
            prop_assert_eq!(c.read_new().text, "", "a read re-delivered");
            let out = c.collected();
            prop_assert_eq!(out.total_bytes, stream.len() as u64);
            if stream.len() > bound {
                let Spill::Written(path) = &out.spill else { panic!("no spill: {:?}", out.spill) };
                prop_assert_eq!(std::fs::read(path).unwrap(), stream.clone());
                prop_assert!(out.truncated);
            } else {
                prop_assert_eq!(&out.spill, &Spill::None);
                prop_assert_eq!(out.text, String::from_utf8_lossy(&stream));
            }
            if ascii {
                // Delivered bytes are a subsequence that ends with the stream's end;
                // without drops they are the whole stream.
                prop_assert!(stream.ends_with(delivered.as_bytes()));
                if !dropped_any {
                    prop_assert_eq!(delivered.as_bytes(), &stream[..]);
                }
            }
        }
    }
}
