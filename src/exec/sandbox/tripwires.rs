//! What a mount cannot hold, checked when a command's sandbox is gone (E9).
//!
//! A mount guards what exists when the sandbox starts. Three things a command can
//! still make in a writable root would run its code outside the sandbox later, and
//! each is found afterwards and renamed to `<name>.dsh-refused` (or, when taken,
//! `<name>.dsh-refused-<command>-<N>`, N without a bound; git and editors no longer
//! read it; a person can look and rename it back), logged, and told in the
//! command's output:
//!
//! - a git redirect in a guarded repository's writable `.git`: `commondir` (git then
//!   takes config and hooks from the directory it names) or `config.worktree`;
//! - a new `.git` or bare repository (whose `HEAD` is renamed) anywhere the walk
//!   reaches: git takes the nearest one, so a
//!   repository made inside a project runs its own hooks and config (a
//!   `core.fsmonitor` runs at the next `git status`, which editors run by
//!   themselves). `[exec.sandbox] allow_git_config` lifts this one, as it lifts the
//!   guard on config;
//! - a protected name that was a symlink (`.vscode -> settings`) and now is not,
//!   or leads elsewhere: the mount held the link's target, not the link. The link
//!   is put back.
//!
//! What is left: the window while the command runs (a background task can keep a
//! redirect in place for as long as it lives), and a `.git` a person made by hand
//! in a root while a command ran there, which is renamed like the command's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The files that would send git elsewhere for its config and hooks, which a
/// command can create in a repository's writable `.git` (a mount cannot hold a
/// file that does not exist, and git refuses an empty one).
const REDIRECTS: [&str; 2] = ["commondir", "config.worktree"];

/// What one command's sandbox is checked for when it is gone, as it was when the
/// sandbox started.
#[derive(Debug, Default)]
pub struct Watch {
    /// Guarded git directories (a redirect in them is refused).
    pub gitdirs: Vec<PathBuf>,
    /// Protected names that were symlinks, with their targets.
    pub links: Vec<(PathBuf, PathBuf)>,
    /// Each root whose new `.git` entries are refused, with the ones it had.
    pub repositories: Vec<(PathBuf, Vec<PathBuf>)>,
    /// Which redirects each of `gitdirs` already had (filled by [`Tripwires::set`]).
    redirects_before: Vec<[bool; 2]>,
    /// The command's own part of the names refusals take (its sequence number in
    /// the executor, from its mark; filled by [`Tripwires::set`]).
    label: String,
}

/// The watches of the running sandboxes, by their commands' marks.
#[derive(Debug, Default)]
pub struct Tripwires {
    by_mark: HashMap<String, Watch>,
}

impl Tripwires {
    /// Starts watching for the command marked `mark`.
    pub fn set(&mut self, mark: &str, mut watch: Watch) {
        watch.label = mark
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect();
        watch.redirects_before = watch
            .gitdirs
            .iter()
            .map(|g| REDIRECTS.map(|name| g.join(name).symlink_metadata().is_ok()))
            .collect();
        self.by_mark.insert(mark.to_string(), watch);
    }

    /// The watches of the sandboxes `ended` picks, which stop being watched.
    pub fn take(&mut self, ended: &impl Fn(&str) -> bool) -> Vec<Watch> {
        let marks: Vec<String> = self.by_mark.keys().filter(|m| ended(m)).cloned().collect();
        marks
            .iter()
            .filter_map(|m| self.by_mark.remove(m))
            .collect()
    }
}

impl Watch {
    /// Checks what the sandbox left, refusing what it made; `repositories_now`
    /// walks a root again. Returns one line per refusal, for the command's output.
    pub fn check(self, repositories_now: impl Fn(&Path) -> Vec<PathBuf>) -> Vec<String> {
        let mut notes = Vec::new();
        for (gitdir, before) in self.gitdirs.iter().zip(&self.redirects_before) {
            for (name, existed) in REDIRECTS.iter().zip(before) {
                let path = gitdir.join(name);
                if !existed && path.symlink_metadata().is_ok() {
                    notes.push(refuse(
                        &path,
                        "a git redirect (git would read config and hooks elsewhere)",
                        &self.label,
                    ));
                }
            }
        }
        for (root, before) in &self.repositories {
            for git in repositories_now(root) {
                if !before.contains(&git) {
                    // A `.git` is renamed whole; a bare repository (whose directory may
                    // be the root itself) loses its HEAD, without which git takes it
                    // for no repository at all.
                    let (target, what) = if git.file_name().is_some_and(|n| n == ".git") {
                        (git.clone(), "a new repository")
                    } else {
                        (git.join("HEAD"), "the HEAD of a new bare repository")
                    };
                    notes.push(refuse(
                        &target,
                        &format!(
                            "{what} (its hooks and config would run outside the sandbox; \
                             [exec.sandbox] allow_git_config allows it)"
                        ),
                        &self.label,
                    ));
                }
            }
        }
        for (link, target) in &self.links {
            if std::fs::read_link(link).is_ok_and(|now| now == *target) {
                continue;
            }
            if link.symlink_metadata().is_ok() {
                notes.push(refuse(
                    link,
                    "a protected path that was a symlink and was replaced",
                    &self.label,
                ));
            }
            if let Err(e) = std::os::unix::fs::symlink(target, link) {
                tracing::error!(link = %link.display(), "cannot put back a protected symlink: {e}");
            }
        }
        notes
    }
}

/// Renames `path` to `<path>.dsh-refused`, or when that is taken to the first free
/// `<path>.dsh-refused-<label>-<N>` (`label` the command's, `N` counting up without
/// a bound: a command that took names ahead cannot run them out), logs it and says
/// it.
fn refuse(path: &Path, what: &str, label: &str) -> String {
    let mut name = path.as_os_str().to_owned();
    name.push(".dsh-refused");
    let first = PathBuf::from(name);
    let free = std::iter::once(first.clone())
        .chain((1..=u64::MAX).map(|n| {
            let mut name = first.clone().into_os_string();
            name.push(format!("-{label}-{n}"));
            PathBuf::from(name)
        }))
        .find(|p| p.symlink_metadata().is_err());
    let Some(free) = free else {
        // 2^64 names taken: not on any file system there is.
        return format!(
            "the sandbox could not refuse {} ({what}): every *.dsh-refused name is taken",
            path.display()
        );
    };
    match std::fs::rename(path, &free) {
        Ok(()) => {
            tracing::warn!(path = %path.display(), "a sandboxed command made {what}; renamed to {}", free.display());
            format!(
                "the sandbox renamed {} to {}: {what}",
                path.display(),
                free.display()
            )
        }
        Err(e) => {
            tracing::error!(path = %path.display(), "a sandboxed command made {what}, which cannot be renamed: {e}");
            format!(
                "the sandbox could not refuse {} ({what}): {e}",
                path.display()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(root: &Path) -> Watch {
        let mut wires = Tripwires::default();
        wires.set(
            "tag:1.2:abc:/7",
            Watch {
                gitdirs: vec![root.join(".git")],
                links: vec![(root.join(".vscode"), PathBuf::from("settings"))],
                repositories: vec![(root.to_path_buf(), vec![root.join(".git")])],
                ..Default::default()
            },
        );
        wires.take(&|m: &str| m == "tag:1.2:abc:/7").pop().unwrap()
    }

    #[test]
    fn what_a_sandbox_made_is_renamed_away_and_a_swapped_link_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config.worktree"), "").unwrap(); // the person's
        std::fs::create_dir(root.join("settings")).unwrap();
        std::os::unix::fs::symlink("settings", root.join(".vscode")).unwrap();
        let watch = watched(root);
        // What a command does meanwhile.
        std::fs::write(root.join(".git/commondir"), "../evil\n").unwrap();
        std::fs::create_dir_all(root.join("sub/.git")).unwrap();
        std::fs::remove_file(root.join(".vscode")).unwrap();
        std::fs::create_dir(root.join(".vscode")).unwrap();
        std::fs::create_dir(root.join("sub/.git.dsh-refused")).unwrap(); // taken
        // Issue 40: the names a command could take ahead never run out.
        for n in 1..=150 {
            std::fs::create_dir(root.join(format!("sub/.git.dsh-refused-7-{n}"))).unwrap();
        }
        // A bare repository the command made in the root itself.
        std::fs::write(root.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let notes = watch.check(|r| vec![r.join(".git"), r.join("sub/.git"), r.to_path_buf()]);
        assert_eq!(notes.len(), 4, "{notes:?}");
        assert!(root.join(".git/commondir.dsh-refused").is_file());
        assert!(root.join(".git/config.worktree").is_file(), "kept");
        assert!(
            root.join("sub/.git.dsh-refused-7-151").is_dir(),
            "{notes:?}"
        );
        assert!(!root.join("HEAD").exists() && root.join("HEAD.dsh-refused").is_file());
        assert!(!root.join("sub/.git").exists());
        assert!(root.join(".vscode.dsh-refused").is_dir());
        assert_eq!(
            std::fs::read_link(root.join(".vscode")).unwrap(),
            PathBuf::from("settings")
        );
    }

    #[test]
    fn a_sandbox_that_changed_nothing_has_nothing_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir(root.join("settings")).unwrap();
        std::os::unix::fs::symlink("settings", root.join(".vscode")).unwrap();
        let watch = watched(root);
        assert!(watch.check(|r| vec![r.join(".git")]).is_empty());
        assert!(root.join(".vscode").is_symlink());
    }
}
