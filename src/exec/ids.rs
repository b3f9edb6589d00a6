//! Background task ids (`bash-N`) that never repeat for a state directory (T7).
//!
//! The last id handed out is kept in `state_dir/task-counter`. Every allocation
//! takes an exclusive `flock` on the file, reads, increments and rewrites it, so
//! two executors on the same state directory (a restarted daemon, or two at once)
//! never hand out the same number. The file is not fsynced: a daemon crash keeps
//! the page cache, and only a machine crash could lose the last few increments.

use nix::fcntl::{Flock, FlockArg};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

/// A background task's id: `bash-N` on the wire, in texts and in logs; `N` in tables.
/// The one place the form is written ([`Display`](std::fmt::Display)) and read
/// ([`FromStr`](std::str::FromStr)): a text that is not exactly what `Display` writes for
/// some number is an error, never a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(u64);

/// The prefix of every task id.
const PREFIX: &str = "bash-";

impl TaskId {
    /// The task numbered `n`.
    pub fn new(n: u64) -> Self {
        Self(n)
    }

    /// The `N` of `bash-N`.
    pub fn number(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{PREFIX}{}", self.0)
    }
}

/// Why a text is not a task id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{0}\" is not a task id: task ids look like bash-7")]
pub struct NotATaskId(pub String);

impl std::str::FromStr for TaskId {
    type Err = NotATaskId;

    /// `bash-` and a number in decimal digits, without a sign or a leading zero (so
    /// `bash-07` is not another way to write `bash-7`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let not = || NotATaskId(text.to_string());
        let digits = text.strip_prefix(PREFIX).ok_or_else(not)?;
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !canonical {
            return Err(not());
        }
        digits.parse().map(TaskId).map_err(|_| not())
    }
}

/// On the wire and on disk a task id is its text (`"bash-7"`), read back through
/// [`FromStr`](std::str::FromStr): a text that is not one fails to deserialize.
impl serde::Serialize for TaskId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for TaskId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Allocator of persistent task numbers.
#[derive(Debug)]
pub struct TaskIds {
    path: PathBuf,
}

impl TaskIds {
    /// An allocator backed by `state_dir/task-counter`.
    pub fn new(state_dir: &std::path::Path) -> Self {
        Self {
            path: state_dir.join("task-counter"),
        }
    }

    /// The next id.
    pub fn next(&self) -> std::io::Result<TaskId> {
        let file = crate::fsutil::private_file()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)?;
        let mut file =
            Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| std::io::Error::from(e))?;
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        let last: u64 = if text.trim().is_empty() {
            0
        } else {
            text.trim().parse().map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{} does not hold a number", self.path.display()),
                )
            })?
        };
        let next = last + 1;
        file.seek(SeekFrom::Start(0))?;
        file.set_len(0)?;
        file.write_all(format!("{next}\n").as_bytes())?;
        Ok(TaskId(next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t7_ids_continue_across_allocators() {
        let dir = tempfile::tempdir().unwrap();
        let a = TaskIds::new(dir.path());
        assert_eq!(a.next().unwrap().to_string(), "bash-1");
        assert_eq!(a.next().unwrap().to_string(), "bash-2");
        let b = TaskIds::new(dir.path());
        assert_eq!(b.next().unwrap(), TaskId::new(3));
    }

    #[test]
    fn t7_concurrent_allocators_never_collide() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let p = path.clone();
                std::thread::spawn(move || {
                    let ids = TaskIds::new(&p);
                    (0..50).map(|_| ids.next().unwrap()).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<TaskId> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 200);
    }

    #[test]
    fn a_task_id_is_its_text_in_json() {
        let id = TaskId::new(12);
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"bash-12\"");
        assert_eq!(serde_json::from_str::<TaskId>("\"bash-12\"").unwrap(), id);
        let err = serde_json::from_str::<TaskId>("\"bash-012\"").unwrap_err();
        assert!(err.to_string().contains("is not a task id"), "{err}");
        assert!(serde_json::from_str::<TaskId>("12").is_err());
    }

    #[test]
    fn a_task_id_reads_back_what_it_writes_and_nothing_else() {
        for n in [0, 1, 7, 10, 4242, u64::MAX] {
            let id = TaskId::new(n);
            assert_eq!(id.to_string(), format!("bash-{n}"));
            assert_eq!(id.to_string().parse::<TaskId>(), Ok(id));
            assert_eq!(id.number(), n);
        }
        for text in [
            "",
            "bash-",
            "bash-x",
            "bash-7x",
            "7",
            "bash 7",
            "Bash-7",
            "bash-07",
            "bash-00",
            "bash-+7",
            "bash--7",
            " bash-7",
            "bash-7 ",
            "bash-\u{0667}",
            "task-7",
            "bash-18446744073709551616",
        ] {
            let err = text.parse::<TaskId>().unwrap_err();
            assert_eq!(err, NotATaskId(text.to_string()));
            assert_eq!(
                err.to_string(),
                format!("\"{text}\" is not a task id: task ids look like bash-7")
            );
        }
    }
}
