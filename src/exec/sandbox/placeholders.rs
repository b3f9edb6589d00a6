//! The placeholders of missing protected entries: what a layout does with the
//! protected names its roots lack, and the empty entries bwrap leaves on the host
//! for them, counted by the sandboxes holding them.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
///
/// A command's layout walks its roots off the lock (up to `protect::MAX_DIRS`
/// directories each, while other sandboxes start and end), and its walk guards
/// what exists, placeholders included (read-only: `--ro-bind P P`, which fails
/// when P is gone). So a placeholder let go by its last sandbox is not removed
/// while a layout whose walk began before that is still being built ([`Building`]):
/// that layout takes it at its locked step like any held one, or, once the last
/// such layout is done, it is removed. Without this, a sandbox ending while the next
/// one of its root was built (a wrapped agent's editor reconnecting) removed the
/// `.dsh/` the next one's walk had guarded, and its bwrap failed ("Can't find
/// source path").
///
/// Lock order: this lock is the last one taken; nothing else is locked while it
/// is held (the tripwires' lock is let go before it, the proxies are released
/// before it).
#[derive(Debug, Default)]
pub struct Placeholders {
    users: HashMap<PathBuf, usize>,
    by_mark: HashMap<String, Vec<PathBuf>>,
    /// The layouts being built, by when they began (the next one's number is
    /// `next_build`).
    building: BTreeSet<u64>,
    next_build: u64,
    /// Placeholders no sandbox holds any more, by when they were let go (the
    /// `next_build` of that moment): kept while a layout begun before is built.
    unused: HashMap<PathBuf, u64>,
}

impl Placeholders {
    /// Whether `path` is a placeholder: held by a sandbox, or let go but kept for a
    /// layout still being built.
    pub(super) fn holds(&self, path: &Path) -> bool {
        self.users.contains_key(path) || self.unused.contains_key(path)
    }

    pub(super) fn take(&mut self, mark: &str, path: &Path) {
        self.unused.remove(path);
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
                    self.unused.insert(path, self.next_build);
                }
            }
        }
        self.sweep();
    }

    /// Removes the placeholders let go that no layout being built began before.
    fn sweep(&mut self) {
        let oldest = self.building.first().copied();
        self.unused.retain(|path, let_go| {
            let seen = oldest.is_some_and(|oldest| oldest < *let_go);
            if !seen {
                remove_if_empty(path);
            }
            seen
        });
    }

    /// A layout of a command begins (before its walk): what is let go from now on
    /// stays until it is done.
    pub(super) fn building(this: &Mutex<Self>) -> Building<'_> {
        let mut held = this.lock().unwrap_or_else(|p| p.into_inner());
        let number = held.next_build;
        held.next_build += 1;
        held.building.insert(number);
        Building {
            placeholders: this,
            number,
        }
    }
}

/// A command's layout being built, from before its walk until it is dropped (once
/// it took its placeholders, or failed): see [`Placeholders`].
pub(super) struct Building<'a> {
    placeholders: &'a Mutex<Placeholders>,
    number: u64,
}

impl Drop for Building<'_> {
    fn drop(&mut self) {
        let mut held = self.placeholders.lock().unwrap_or_else(|p| p.into_inner());
        held.building.remove(&self.number);
        held.sweep();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A placeholder let go while a layout begun before is built stays for it (and
    /// is taken by it, or removed once it is done); one let go before a layout began
    /// is removed at once.
    #[test]
    fn a_placeholder_let_go_stays_while_a_layout_begun_before_is_built() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".dsh");
        let placeholders = Mutex::new(Placeholders::default());
        let lock = || placeholders.lock().unwrap();
        // A placeholder as a sandbox `a` made it.
        let made_for_a = || {
            std::fs::create_dir(&path).unwrap();
            lock().take("a", &path);
        };

        // Let go with no layout being built: removed.
        made_for_a();
        lock().release(|m| m == "a");
        assert!(!path.exists());

        // Let go while a layout begun before is built: kept, and that layout takes it.
        made_for_a();
        let building = Placeholders::building(&placeholders);
        lock().release(|m| m == "a");
        assert!(path.is_dir() && lock().holds(&path));
        lock().take("b", &path);
        drop(building);
        assert!(path.is_dir(), "removed under the layout that took it");
        lock().release(|m| m == "b");
        assert!(!path.exists());

        // Kept for a layout that did not take it: removed once it is done, not
        // before; a layout begun after the release keeps nothing.
        made_for_a();
        let before = Placeholders::building(&placeholders);
        lock().release(|m| m == "a");
        let after = Placeholders::building(&placeholders);
        assert!(path.is_dir());
        drop(before);
        assert!(!path.exists() && !lock().holds(&path));
        drop(after);
    }
}
