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

    /// The next id, as `bash-N`.
    pub fn next(&self) -> std::io::Result<String> {
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
        Ok(format!("bash-{next}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t7_ids_continue_across_allocators() {
        let dir = tempfile::tempdir().unwrap();
        let a = TaskIds::new(dir.path());
        assert_eq!(a.next().unwrap(), "bash-1");
        assert_eq!(a.next().unwrap(), "bash-2");
        let b = TaskIds::new(dir.path());
        assert_eq!(b.next().unwrap(), "bash-3");
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
        let mut all: Vec<String> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 200);
    }
}
