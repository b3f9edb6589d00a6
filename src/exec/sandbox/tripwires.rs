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
//! New repositories are found twice: by the start's bounded walk done again, and
//! by [`made_since`], a search of the whole root without depth cap or skip list
//! for repositories born since the sandbox started (a birth time, not a snapshot:
//! nothing is read at the start, and a repository the person had is never taken
//! for the command's).
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
    /// When the sandbox started (filled by [`Tripwires::set`]): a repository whose
    /// directory was born since is one the command made ([`made_since`]).
    started: Option<std::time::SystemTime>,
}

/// How many directories the end-of-command search for new repositories reads at
/// most per root ([`made_since`]); past it the check says it could not finish.
pub const SEARCH_BUDGET_DIRS: usize = 1_000_000;

/// What the search for repositories made since a time found under one root.
#[derive(Debug, Default)]
pub struct Made {
    /// Each new `.git` entry, and each new bare repository's directory.
    pub repositories: Vec<PathBuf>,
    /// The search stopped at [`SEARCH_BUDGET_DIRS`] before reading everything.
    pub unfinished: bool,
}

/// Every repository under `root` born at or after `since`, at any depth and in
/// every folder (no skip list, no depth cap: a repository under `node_modules/`,
/// ten levels down or behind 3000 directories runs its hooks and fsmonitor as
/// well as one at the top): a `.git` entry whose own birth time is that late,
/// and a bare repository (`HEAD` + `objects/` + `refs/`) whose `objects/` is.
/// Where the file system keeps no birth time, the last change of the entry's
/// inode stands in (a repository the command only touched then counts as made:
/// the closed side, since a rename can be undone by hand and a hook that ran
/// cannot; one nobody touched never does). Symlinks are not
/// followed, nor is a git directory entered (its insides are the repository's
/// own, guarded by the start's walk). Reads each directory once; bounded by
/// `budget` directories.
pub fn made_since(root: &Path, since: std::time::SystemTime, budget: usize) -> Made {
    let born_since = |path: &Path| {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return false; // gone: nothing to refuse
        };
        let born = meta.created().ok().or_else(|| {
            use std::os::unix::fs::MetadataExt;
            let changed = std::time::Duration::new(
                u64::try_from(meta.ctime()).ok()?,
                u32::try_from(meta.ctime_nsec()).unwrap_or(0),
            );
            std::time::UNIX_EPOCH.checked_add(changed)
        });
        // A time that cannot be read at all: new (the closed side).
        born.is_none_or(|born| born >= since)
    };
    let mut made = Made::default();
    let mut stack = vec![root.to_path_buf()];
    let mut read = 0usize;
    while let Some(dir) = stack.pop() {
        if read >= budget {
            made.unfinished = true;
            break;
        }
        read += 1;
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut bare = [false; 3];
        let mut subdirs = Vec::new();
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            if name == ".git" {
                if born_since(&entry.path()) {
                    made.repositories.push(entry.path());
                }
                continue;
            }
            match name.to_str() {
                Some("HEAD") => bare[0] = kind.is_file(),
                Some("objects") => bare[1] = kind.is_dir(),
                Some("refs") => bare[2] = kind.is_dir(),
                _ => {}
            }
            if kind.is_dir() {
                subdirs.push(entry.path());
            }
        }
        if bare == [true; 3] {
            if born_since(&dir.join("objects")) {
                made.repositories.push(dir);
            }
            continue;
        }
        stack.extend(subdirs);
    }
    made
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
        // The precise clock: a person's repository made before the start is never
        // taken for the command's. Where file times come from the coarse clock
        // (a tick behind), a repository made in the tick after the start could
        // look older; bwrap's own start takes longer than that tick.
        watch.started = Some(std::time::SystemTime::now());
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
            let mut now = repositories_now(root);
            if let Some(started) = self.started {
                let made = made_since(root, started, SEARCH_BUDGET_DIRS);
                if made.unfinished {
                    tracing::error!(root = %root.display(), "the search for new repositories did not finish");
                    notes.push(format!(
                        "the sandbox could not finish its search for repositories this command \
                         made under {} ({SEARCH_BUDGET_DIRS} directories read): what lies beyond \
                         was not checked; do not run git there before looking",
                        root.display()
                    ));
                }
                for git in made.repositories {
                    if !now.contains(&git) {
                        now.push(git);
                    }
                }
            }
            for git in now {
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

    /// E12: `made_since` finds a repository made after its time at any depth and
    /// under any folder, never one that was there before, and says when its budget
    /// ran out.
    #[test]
    fn repositories_made_since_are_found_anywhere_and_old_ones_never() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("old/deep/.git")).unwrap();
        // File times move in the coarse clock's ticks: `since` is the first one
        // after the old repository's birth (a bounded wait for the clock, not a
        // sleep).
        let born = |p: &Path| std::fs::metadata(p).unwrap().created().unwrap();
        let old = born(&root.join("old/deep/.git"));
        let since = (0..1_000_000)
            .map(|_| {
                // A new inode each time: a rewrite keeps its birth.
                let _ = std::fs::remove_file(root.join("probe"));
                std::fs::write(root.join("probe"), "").unwrap();
                born(&root.join("probe"))
            })
            .find(|t| *t > old)
            .expect("the file clock moves");
        std::fs::create_dir_all(root.join("node_modules/a/b/c/d/e/.git")).unwrap();
        for bare in ["srv/x.git/objects", "srv/x.git/refs"] {
            std::fs::create_dir_all(root.join(bare)).unwrap();
        }
        std::fs::write(root.join("srv/x.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let mut made = made_since(root, since, SEARCH_BUDGET_DIRS).repositories;
        made.sort();
        assert_eq!(
            made,
            [
                root.join("node_modules/a/b/c/d/e/.git"),
                root.join("srv/x.git")
            ]
        );
        assert!(made_since(root, since, 2).unfinished);
    }

    /// The end-of-command search on a tree of 100 000 files (and on this
    /// repository, when run from it): BENCHMARKS.md, "E12".
    /// `cargo test --lib tripwires::tests::search_cost -- --ignored --nocapture`
    #[test]
    #[ignore = "a measurement, not a check"]
    fn search_cost() {
        let measure = |what: &str, at: &Path, since: std::time::SystemTime| {
            let mut times = Vec::new();
            for _ in 0..5 {
                let start = std::time::Instant::now();
                let made = made_since(at, since, SEARCH_BUDGET_DIRS);
                times.push(start.elapsed());
                assert!(!made.unfinished);
            }
            times.sort();
            println!("{what}: median {:?}, min {:?}", times[2], times[0]);
        };
        let since = std::time::SystemTime::now();
        measure(
            "this repository",
            Path::new(env!("CARGO_MANIFEST_DIR")),
            since,
        );
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // 100 000 files in 10 000 directories, 100 x 100, 10 files each.
        for a in 0..100 {
            for b in 0..100 {
                let d = root.join(format!("{a}/{b}"));
                std::fs::create_dir_all(&d).unwrap();
                for f in 0..10 {
                    std::fs::write(d.join(f.to_string()), "").unwrap();
                }
            }
        }
        measure("100k files", root, since);
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
