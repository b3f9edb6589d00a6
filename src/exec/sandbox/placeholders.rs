//! The placeholders of missing protected entries: what a layout does with the
//! protected names its roots lack, and the empty entries bwrap leaves on the host
//! for them, counted by the sandboxes holding them.

use std::path::{Path, PathBuf};

/// What a layout does with the protected entries its roots lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Held<'a> {
    /// Nothing (the probe, a check of the workdir).
    Nothing,
    /// The command marked so holds them with placeholders, and its tripwires are set.
    Taken(&'a str),
    /// They are in the layout as the masks a command would get, but nothing is made on
    /// the host: what the file tools judge by (`files`).
    Shown,
}

/// The placeholders bwrap leaves on the host for the protected entries a root
/// lacks (an empty `.vscode/`, `.gitmodules`, ...): a mount needs a place, and
/// without one a command could create the entry itself. Each is counted by the
/// sandboxes that hold it and removed when the last of them is gone and it is still
/// empty (never something a person put there meanwhile). A path already held is
/// held again by the next command, even though it now exists: removing it under a
/// running sandbox would detach that sandbox's mount.
#[derive(Debug, Default)]
pub struct Placeholders {
    users: std::collections::HashMap<PathBuf, usize>,
    by_mark: std::collections::HashMap<String, Vec<PathBuf>>,
}

impl Placeholders {
    pub(super) fn holds(&self, path: &Path) -> bool {
        self.users.contains_key(path)
    }

    pub(super) fn take(&mut self, mark: &str, path: &Path) {
        *self.users.entry(path.to_path_buf()).or_default() += 1;
        self.by_mark
            .entry(mark.to_string())
            .or_default()
            .push(path.to_path_buf());
    }

    pub(super) fn release(&mut self, ended: impl Fn(&str) -> bool) {
        let marks: Vec<String> = self.by_mark.keys().filter(|m| ended(m)).cloned().collect();
        for mark in marks {
            for path in self.by_mark.remove(&mark).unwrap_or_default() {
                let Some(count) = self.users.get_mut(&path) else {
                    continue;
                };
                *count -= 1;
                if *count == 0 {
                    self.users.remove(&path);
                    remove_if_empty(&path);
                }
            }
        }
    }
}

/// Removes an empty directory or an empty regular file (a placeholder as bwrap
/// made it); anything with content stays.
pub(super) fn remove_if_empty(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            let _ = std::fs::remove_dir(path); // fails when not empty
        }
        Ok(meta) if meta.is_file() && meta.len() == 0 => {
            let _ = std::fs::remove_file(path);
        }
        _ => {}
    }
}
