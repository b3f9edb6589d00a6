//! The paths inside a writable root that a sandboxed command may never write (E9):
//! what would run code outside the sandbox later, or change how dsh or an editor
//! treats the project. Git hooks run unsandboxed at the person's next commit; a
//! repository's config can name programs (`core.fsmonitor`, `core.hooksPath`, a
//! pager); the hook managers' files (husky, pre-commit, lefthook, overcommit) say
//! what those hooks run; `.dsh/` is dsh's own project config; shell rc files run
//! at the next login; editor folders hold tasks that run when the project opens.
//!
//! Found afresh for each command (a repository cloned by the last command is
//! protected in the next), by a bounded walk: the root and three levels below it,
//! at most [`MAX_DIRS`] directories, skipping folders that only hold dependencies
//! and build output. A repository's `.git` is itself made a mount point, so it
//! cannot be renamed away and replaced by one whose hooks the command wrote.

use std::path::{Path, PathBuf};

/// How deep below a root the walk looks for nested repositories and protected names.
pub(super) const MAX_DEPTH: usize = 3;

/// How many directories one walk reads at most (a huge tree is cut short, with the
/// root's own entries always covered).
pub const MAX_DIRS: usize = 2000;

/// Directories whose contents are dependencies or build output, never walked.
pub(super) const SKIPPED: &[&str] = &[
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    ".tox",
    ".cache",
    "dist",
    "build",
];

/// Whether the walk reads the directory `dir` (below a root; empty for the root
/// itself) when it is not cut short: no deeper than [`MAX_DEPTH`], under no
/// [`SKIPPED`] folder. The tripwires take a repository there that the start's walk
/// did not see for one the command put there, however old it is.
pub fn walk_covers(dir: &Path) -> bool {
    let parts: Vec<_> = dir.components().collect();
    parts.len() <= MAX_DEPTH
        && !parts
            .iter()
            .any(|p| SKIPPED.iter().any(|s| p.as_os_str() == *s))
}

/// Names protected wherever the walk finds them: dsh's project config, editor
/// folders, git's own files outside `.git` (the global config in both its places,
/// for a root that is a home directory), shell startup files.
const PROTECTED_NAMES: &[&str] = &[
    ".dsh",
    ".claude",
    ".vscode",
    ".zed",
    ".idea",
    ".gitmodules",
    ".gitconfig",
    ".config/git",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".zlogout",
];

/// The most of a git config, `commondir` or `.git` file the walk reads: a command
/// can write these inside its root, and neither a FIFO nor a huge file there may stall
/// or swell the check (`fsutil::read_small_text`).
const CONFIG_LIMIT: u64 = 1024 * 1024;

/// The files and folders of the common git hook managers, protected wherever the
/// walk finds them, as `.git/hooks` is (E9, issue 40): what they name runs at the
/// person's next commit, outside the sandbox. husky's hooks (`.husky/`, also
/// guarded as the tree `core.hooksPath` lives in), pre-commit's config (its `repo:
/// local` hooks are commands), lefthook's configs (`.lefthook/` holds its scripts)
/// and overcommit's config and hooks (`.git-hooks/`). What a config names beside
/// them (a script of the project's) stays writable: project code the person chose
/// to run, like `package.json` scripts, a Makefile or `build.rs` (see the README).
const HOOK_MANAGER_NAMES: &[&str] = &[
    ".husky",
    ".pre-commit-config.yaml",
    ".pre-commit-hooks.yaml",
    "lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yml",
    ".lefthook.yaml",
    "lefthook-local.yml",
    "lefthook-local.yaml",
    ".lefthook-local.yml",
    ".lefthook-local.yaml",
    ".lefthook",
    ".overcommit.yml",
    ".git-hooks",
];

/// The protected entries a project level (a root, or a nested project in it: see
/// [`Found::projects`]) may lack and a command must not create, each with whether it
/// is a directory: the ones that name programs to run outside the sandbox later
/// (dsh's project config and hooks, Claude Code's project settings, which dsh reads
/// as hooks, Zed's and VS Code's settings and tasks), and in the home directory,
/// when it is a root, the shell's and git's startup files. Each costs every command a mount (about 0.25 ms, bench X1), so
/// entries that only configure what a person starts by hand (`.idea/` run
/// configurations, `.gitmodules`, whose update commands git ignores) are held only
/// when they exist.
pub fn held_if_missing(at_home: bool) -> Vec<(&'static str, bool)> {
    let mut names = vec![
        (".dsh", true),
        (".claude", true),
        (".vscode", true),
        (".zed", true),
    ];
    if at_home {
        names.extend(
            PROTECTED_NAMES
                .iter()
                .filter(|n| {
                    n.starts_with(".bash")
                        || n.starts_with(".z") && **n != ".zed"
                        || **n == ".profile"
                        || **n == ".gitconfig"
                })
                .map(|n| (*n, false)),
        );
    }
    names
}

/// What the layout does with one protected path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// An existing file or directory: the host's own, read-only.
    ReadOnly(PathBuf),
    /// A repository's `.git` directory: writable (objects, refs, the index), but
    /// pinned as a mount point so it cannot be renamed or removed.
    Pinned(PathBuf),
    /// A hooks directory that does not exist yet: an empty read-only one in its
    /// place (bwrap leaves the empty directory on the host, as `git init` would).
    EmptyDir(PathBuf),
}

impl Guard {
    /// The guarded path.
    pub fn path(&self) -> &Path {
        match self {
            Guard::ReadOnly(p) | Guard::Pinned(p) | Guard::EmptyDir(p) => p,
        }
    }
}

/// What one walk of a root found: what the layout guards, and what the end of the
/// command's sandbox checks again (a mount holds what exists; what a command
/// creates or swaps is found afterwards, by the launcher's tripwires).
#[derive(Debug, Default)]
pub struct Found {
    /// In an order the layout can apply (a `.git` pin before the read-only parts
    /// inside it).
    pub guards: Vec<Guard>,
    /// Every `.git` entry (directory, pointer file or symlink) and every bare
    /// repository's directory the walk saw: git takes the nearest one for the
    /// directories below it, so one that was not there before the command is one
    /// the command made.
    pub repositories: Vec<PathBuf>,
    /// Protected names that are symlinks, with what each pointed to: the mount holds
    /// the target, and the link itself could be replaced by an entry the command
    /// wrote.
    pub links: Vec<(PathBuf, PathBuf)>,
    /// The nested projects below the root: directories holding a `.git` or a `.dsh`
    /// (a session there reads its own `.dsh/config.toml`, and dsh trusts projects by
    /// directory), where missing protected entries are held as at the root.
    pub projects: Vec<PathBuf>,
    /// Whether the walk stopped at [`MAX_DIRS`] before reading all it would have.
    pub truncated: bool,
}

/// What the walk needs besides the root: the daemon's settings and the user's.
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    /// `[exec.sandbox] allow_git_config`.
    pub allow_git_config: bool,
    /// `core.hooksPath` of the user's global git config ([`global_hooks_paths`]).
    pub global_hooks: &'a [PathBuf],
    /// The home directory (an include's `~/`).
    pub home: Option<&'a Path>,
}

/// Everything to guard inside `root` (canonical).
pub fn in_root(root: &Path, settings: Settings<'_>) -> Found {
    let mut walk = Walk {
        root,
        allow_git_config: settings.allow_git_config,
        global_hooks: settings.global_hooks,
        home: settings.home,
        found: Found::default(),
        dirs_read: 0,
        visited: Default::default(),
    };
    walk.dir(root, 0);
    walk.found
}

/// The directories strictly between `root` and `path` (below the one, above the
/// other), outermost first: a directory that holds a mount point can be renamed,
/// taking the guard away from the path a person's git and editor will look at,
/// unless it is a mount point itself.
pub fn between(root: &Path, path: &Path) -> Vec<PathBuf> {
    let Ok(rest) = path.strip_prefix(root) else {
        return Vec::new();
    };
    let parts: Vec<_> = rest.components().collect();
    let mut at = root.to_path_buf();
    let mut dirs = Vec::new();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        at.push(part);
        dirs.push(at.clone());
    }
    dirs
}

/// `core.hooksPath` of the user's global git config files, as written (a relative
/// one is taken from each repository's work tree).
pub fn global_hooks_paths(home: Option<&Path>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Some(home) = home {
        files.push(home.join(".gitconfig"));
    }
    match std::env::var_os("XDG_CONFIG_HOME") {
        Some(dir) => files.push(PathBuf::from(dir).join("git/config")),
        None => files.extend(home.map(|h| h.join(".config/git/config"))),
    }
    files.push(PathBuf::from("/etc/gitconfig"));
    files
        .iter()
        .filter_map(|f| crate::fsutil::read_small_text(f, CONFIG_LIMIT).ok())
        .filter_map(|text| hooks_path(&text))
        .map(|p| expand_home(&p, home))
        .collect()
}

struct Walk<'a> {
    root: &'a Path,
    allow_git_config: bool,
    global_hooks: &'a [PathBuf],
    home: Option<&'a Path>,
    found: Found,
    dirs_read: usize,
    /// Git directories already guarded (a commondir may lead back to one).
    visited: std::collections::HashSet<PathBuf>,
}

impl Walk<'_> {
    /// One directory of the walk, read once: its entries name the protected paths,
    /// the `.git` and the subdirectories (a stat per protected name per directory
    /// made the walk of a large tree cost a command tens of milliseconds).
    fn dir(&mut self, dir: &Path, depth: usize) {
        if self.dirs_read >= MAX_DIRS {
            self.found.truncated = true;
            return;
        }
        self.dirs_read += 1;
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut subdirs = Vec::new();
        let mut bare = [false; 3];
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            let path = entry.path();
            if (name == ".git" || name == ".dsh")
                && dir != self.root
                && self.found.projects.last().map(PathBuf::as_path) != Some(dir)
            {
                self.found.projects.push(dir.to_path_buf());
            }
            if name == ".git" {
                self.git_entry(dir, &path, kind);
                continue;
            }
            for protected in PROTECTED_NAMES.iter().chain(HOOK_MANAGER_NAMES) {
                match protected.split_once('/') {
                    None if name == *protected => self.protected(&path, kind.is_symlink()),
                    // A name below a directory (`.config/git`): looked up when the
                    // directory is there.
                    Some((first, _)) if name == first => {
                        let nested = dir.join(protected);
                        if let Ok(meta) = nested.symlink_metadata() {
                            self.protected(&nested, meta.is_symlink());
                        }
                    }
                    _ => {}
                }
            }
            match name.to_str() {
                Some("HEAD") => bare[0] = kind.is_file(),
                Some("objects") => bare[1] = kind.is_dir(),
                Some("refs") => bare[2] = kind.is_dir(),
                _ => {}
            }
            // Symlinks are not followed: what they lead to is guarded where it is.
            if kind.is_dir() && !SKIPPED.iter().any(|s| name == *s) {
                subdirs.push(path);
            }
        }
        // A bare repository (the usual home of worktrees' common hooks): its hooks
        // and config are guarded as a `.git`'s are, and it is pinned the same way.
        if bare == [true; 3] {
            // Reported with the `.git` entries: one a command made (`git init --bare
            // .` in a root that had none) is refused by its tripwire (issue 40).
            self.found.repositories.push(dir.to_path_buf());
            self.repository(dir, dir);
            return;
        }
        if depth >= MAX_DEPTH {
            return;
        }
        for sub in subdirs {
            self.dir(&sub, depth + 1);
        }
    }

    /// A protected name found in a directory of the walk (whose path is real: the
    /// walk starts at a canonical root and follows no symlink).
    fn protected(&mut self, path: &Path, symlink: bool) {
        if symlink {
            self.link(path);
            self.existing(path);
        } else {
            self.found.guards.push(Guard::ReadOnly(path.to_path_buf()));
        }
    }

    /// A directory's `.git`: a git directory, a pointer file or a symlink.
    fn git_entry(&mut self, dir: &Path, git: &Path, kind: std::fs::FileType) {
        self.found.repositories.push(git.to_path_buf());
        if kind.is_symlink() {
            // Guarded where it leads (when that is in the root), and the link
            // watched: it could be pointed at a git directory the command made.
            self.link(git);
            if let Ok(real) = git.canonicalize()
                && real.is_dir()
            {
                self.repository(dir, &real);
            }
        } else if kind.is_dir() {
            self.repository(dir, git);
        } else if kind.is_file() {
            // A worktree's or submodule's pointer: pinned read-only, so it cannot
            // be turned to a git directory the command made.
            self.found.guards.push(Guard::ReadOnly(git.to_path_buf()));
            if let Some(gitdir) = pointed_gitdir(git) {
                self.gitdir(dir, &gitdir);
            }
        }
    }

    /// A protected name that exists, guarded where it really is (inside the root;
    /// outside, it is read-only anyway).
    fn existing(&mut self, path: &Path) {
        if let Ok(real) = path.canonicalize()
            && real.starts_with(self.root)
        {
            self.found.guards.push(Guard::ReadOnly(real));
        }
    }

    /// Notes a protected name that is a symlink, with its target as written.
    fn link(&mut self, path: &Path) {
        if let Ok(target) = std::fs::read_link(path) {
            self.found.links.push((path.to_path_buf(), target));
        }
    }

    fn repository(&mut self, worktree: &Path, git: &Path) {
        if git.starts_with(self.root) {
            self.found.guards.push(Guard::Pinned(git.to_path_buf()));
        }
        self.gitdir(worktree, git);
    }

    /// The parts of one git directory (and of its submodules' ones) that run code
    /// or name programs.
    fn gitdir(&mut self, worktree: &Path, gitdir: &Path) {
        let Ok(gitdir) = gitdir.canonicalize() else {
            return;
        };
        if !gitdir.starts_with(self.root) {
            return;
        }
        let hooks = gitdir.join("hooks");
        if hooks.exists() {
            self.existing(&hooks);
        } else if !gitdir.join("commondir").exists() {
            // (A linked worktree's git directory takes its hooks from the common
            // one, which is guarded where it is.)
            self.found.guards.push(Guard::EmptyDir(hooks));
        }
        let mut files = vec!["commondir", "config.worktree"];
        if !self.allow_git_config {
            files.push("config");
        }
        for file in files {
            self.existing(&gitdir.join(file));
        }
        // A linked worktree's (or a redirected) git directory takes its config and
        // hooks from the common one it names: that one is guarded too.
        if let Ok(common) = crate::fsutil::read_small_text(&gitdir.join("commondir"), CONFIG_LIMIT)
            && let Some(line) = common.lines().next()
        {
            let common = gitdir.join(line.trim());
            if let Ok(real) = common.canonicalize()
                && real != gitdir
                && self.visited.insert(real.clone())
            {
                self.gitdir(worktree, &real);
            }
        }
        let own = self.config_and_includes(&gitdir.join("config"));
        for target in own.iter().chain(self.global_hooks) {
            let target = worktree.join(target);
            // The whole tree the hooks live in, when that is inside the work tree:
            // a hook may run anything beside it (husky's `.husky/_/h` runs
            // `.husky/pre-commit`), so the top directory below the work tree that
            // holds the target is guarded, not only the target.
            let target = tree_of(worktree, &target).unwrap_or(target);
            if target.exists() {
                self.existing(&target);
            } else if target.starts_with(self.root)
                && !target.components().any(|c| c.as_os_str() == "..")
            {
                self.found.guards.push(Guard::EmptyDir(target));
            }
        }
        self.submodules(&gitdir.join("modules"), 0);
    }

    /// A repository's config file and the files it includes (followed five deep),
    /// each included file inside the root guarded as the config is: git reads a
    /// `core.hooksPath` or a `core.fsmonitor` from it as from the config itself.
    /// Returns every `core.hooksPath` they set (which one git takes depends on
    /// the includes' conditions: each is guarded).
    fn config_and_includes(&mut self, config: &Path) -> Vec<PathBuf> {
        let mut hooks = Vec::new();
        let mut files = vec![(config.to_path_buf(), 0)];
        while let Some((file, depth)) = files.pop() {
            let Ok(text) = crate::fsutil::read_small_text(&file, CONFIG_LIMIT) else {
                continue;
            };
            if depth > 0 && !self.allow_git_config {
                self.existing(&file);
            }
            hooks.extend(hooks_path(&text));
            if depth >= 5 {
                continue;
            }
            let dir = file.parent().unwrap_or(Path::new("/"));
            for include in include_paths(&text) {
                files.push((dir.join(expand_home(&include, self.home)), depth + 1));
            }
        }
        hooks
    }

    /// Submodules keep their git directories under the superproject's
    /// `.git/modules/<path>`, nested as deep as the submodules are.
    fn submodules(&mut self, dir: &Path, depth: usize) {
        if depth > 10 || self.dirs_read >= MAX_DIRS {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        self.dirs_read += 1;
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            if path.join("HEAD").is_file() {
                // A submodule's work tree is elsewhere; its hooksPath, if relative,
                // is taken from the superproject's, which is what is known here.
                let worktree = dir.to_path_buf();
                self.gitdir(&worktree, &path);
            } else {
                self.submodules(&path, depth + 1);
            }
        }
    }
}

/// The git directory a `.git` file points to (`gitdir: PATH`, relative to the file's
/// directory).
fn pointed_gitdir(file: &Path) -> Option<PathBuf> {
    let text = crate::fsutil::read_small_text(file, CONFIG_LIMIT).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    Some(file.parent()?.join(target))
}

/// The top directory below `worktree` that holds the hooks directory `target`
/// (`.husky` for `.husky/_`), or `None` when the target is not below the work
/// tree (an absolute path elsewhere, or one climbing out with `..`).
fn tree_of(worktree: &Path, target: &Path) -> Option<PathBuf> {
    let below = target.strip_prefix(worktree).ok()?;
    let mut parts = below.components();
    match parts.next()? {
        // Inside the git directory only the target: `.git` itself must stay
        // writable (objects, refs, the index), and is pinned anyway.
        std::path::Component::Normal(top) if top != ".git" => Some(worktree.join(top)),
        _ => None,
    }
}

/// `core.hooksPath` in a git config file's text (the last one wins, as in git).
pub fn hooks_path(text: &str) -> Option<PathBuf> {
    values(
        text,
        |section| section.eq_ignore_ascii_case("core"),
        "hookspath",
    )
    .pop()
    .map(PathBuf::from)
}

/// The files a git config file's text includes (`[include] path`, and
/// `[includeIf "..."] path`, whatever the condition: each may apply), as written.
fn include_paths(text: &str) -> Vec<PathBuf> {
    let including = |section: &str| {
        section.eq_ignore_ascii_case("include") || section.eq_ignore_ascii_case("includeif")
    };
    values(text, including, "path")
        .into_iter()
        .map(PathBuf::from)
        .collect()
}

/// The values of `key` in the sections `section` accepts, in order. Section names
/// and keys are matched case-insensitively (a subsection, `[x "y"]`, is matched by
/// its section); quotes and trailing comments are removed. Enough of git's grammar
/// for the keys that name files: a value git would read differently is at worst
/// guarded in vain.
fn values(text: &str, section: impl Fn(&str) -> bool, key: &str) -> Vec<String> {
    let mut inside = false;
    let mut found = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let name = header.split([']', ' ', '"']).next().unwrap_or_default();
            inside = section(name);
            continue;
        }
        if !inside {
            continue;
        }
        let Some((k, value)) = line.split_once('=') else {
            continue;
        };
        if k.trim().eq_ignore_ascii_case(key) {
            let value = value.split(['#', ';']).next().unwrap_or_default().trim();
            let value = value.trim_matches('"');
            if !value.is_empty() {
                found.push(value.to_string());
            }
        }
    }
    found
}

fn expand_home(path: &Path, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(allow_git_config: bool) -> Settings<'static> {
        Settings {
            allow_git_config,
            global_hooks: &[],
            home: None,
        }
    }

    #[test]
    fn hooks_path_is_read_from_the_core_section_only() {
        let text = "[user]\n\thooksPath = /nope\n[core]\n\tbare = false\n\
                    \tHooksPath = \".husky\" # comment\n[alias]\n\tx = y\n";
        assert_eq!(hooks_path(text), Some(PathBuf::from(".husky")));
        assert_eq!(
            hooks_path("[Core]\nhookspath=/a\nhookspath = /b\n"),
            Some(PathBuf::from("/b"))
        );
        assert_eq!(hooks_path("[core]\nbare = true\n"), None);
    }

    /// E12: the walk reads files a command can write inside its root (`commondir`, a
    /// `.git` file, a config and its includes). A FIFO planted at any of them once
    /// blocked the walk, and with it the command's call, for good: now it is refused
    /// at once and the rest of the repository is still guarded.
    #[test]
    fn e12_a_fifo_planted_where_the_walk_reads_cannot_stall_it() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::create_dir_all(root.join("sub")).unwrap();
        for fifo in [
            root.join(".git/commondir"),
            root.join(".git/config"),
            root.join("sub/.git"),
        ] {
            nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let walked = root.clone();
        std::thread::spawn(move || {
            let _ = tx.send(in_root(&walked, settings(false)));
        });
        let found = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the walk blocked on a FIFO in the root (E12)");
        assert!(
            found
                .guards
                .iter()
                .any(|g| g.path().starts_with(root.join(".git"))),
            "the repository is still guarded: {:?}",
            found.guards
        );
    }

    #[test]
    fn a_repository_its_nested_one_and_a_worktree_pointer_are_all_guarded() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(
            root.join(".git/config"),
            "[core]\n\thooksPath = .githooks\n",
        )
        .unwrap();
        std::fs::create_dir_all(root.join("vendor/lib/.git")).unwrap();
        std::fs::write(root.join("vendor/lib/.git/config"), "").unwrap();
        std::fs::create_dir_all(root.join("wt")).unwrap();
        std::fs::write(root.join("wt/.git"), "gitdir: ../.git/worktrees/wt\n").unwrap();
        std::fs::create_dir_all(root.join(".git/worktrees/wt")).unwrap();
        std::fs::write(root.join(".bashrc"), "").unwrap();
        std::fs::create_dir_all(root.join("node_modules/x/.git")).unwrap();
        let guards = in_root(&root, settings(false)).guards;
        let has = |g: Guard| guards.contains(&g);
        assert!(has(Guard::Pinned(root.join(".git"))), "{guards:?}");
        assert!(has(Guard::ReadOnly(root.join(".git/hooks"))));
        assert!(has(Guard::ReadOnly(root.join(".git/config"))));
        assert!(
            has(Guard::EmptyDir(root.join(".githooks"))),
            "hooksPath target"
        );
        // Issue 40: the tree a hooksPath lives in (husky's `.husky/_` runs
        // `.husky/pre-commit`), and the hook managers' files.
        std::fs::write(
            root.join("vendor/lib/.git/config"),
            "[core]\n\thooksPath = .husky/_\n",
        )
        .unwrap();
        std::fs::create_dir_all(root.join("vendor/lib/.husky/_")).unwrap();
        std::fs::write(root.join(".pre-commit-config.yaml"), "").unwrap();
        std::fs::create_dir_all(root.join("app/.lefthook")).unwrap();
        let guards = in_root(&root, settings(false)).guards;
        let has = |g: Guard| guards.contains(&g);
        assert!(
            has(Guard::ReadOnly(root.join("vendor/lib/.husky"))),
            "{guards:?}"
        );
        assert!(has(Guard::ReadOnly(root.join(".pre-commit-config.yaml"))));
        assert!(has(Guard::ReadOnly(root.join("app/.lefthook"))));
        assert!(has(Guard::Pinned(root.join("vendor/lib/.git"))));
        assert!(has(Guard::EmptyDir(root.join("vendor/lib/.git/hooks"))));
        assert!(has(Guard::ReadOnly(root.join("wt/.git"))));
        assert!(has(Guard::ReadOnly(root.join(".bashrc"))));
        assert!(
            !guards
                .iter()
                .any(|g| format!("{g:?}").contains("node_modules")),
            "{guards:?}"
        );
        // A bare repository is found and guarded like a `.git`.
        let bare = root.join("srv/project.git");
        for sub in ["objects", "refs", "hooks"] {
            std::fs::create_dir_all(bare.join(sub)).unwrap();
        }
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(bare.join("config"), "[core]\n\tbare = true\n").unwrap();
        let guards = in_root(&root, settings(false)).guards;
        assert!(guards.contains(&Guard::Pinned(bare.clone())), "{guards:?}");
        assert!(
            guards.contains(&Guard::ReadOnly(bare.join("hooks"))),
            "{guards:?}"
        );
        assert!(
            guards.contains(&Guard::ReadOnly(bare.join("config"))),
            "{guards:?}"
        );
        // A common directory named by an existing commondir is guarded too.
        std::fs::create_dir_all(root.join("shared/hooks")).unwrap();
        std::fs::write(root.join("shared/config"), "").unwrap();
        std::fs::write(
            root.join(".git/worktrees/wt/commondir"),
            "../../../shared\n",
        )
        .unwrap();
        let guards = in_root(&root, settings(false)).guards;
        assert!(
            guards.contains(&Guard::ReadOnly(root.join("shared/hooks"))),
            "{guards:?}"
        );
        assert!(
            guards.contains(&Guard::ReadOnly(root.join("shared/config"))),
            "{guards:?}"
        );
        let relaxed = in_root(&root, settings(true)).guards;
        assert!(!relaxed.contains(&Guard::ReadOnly(root.join(".git/config"))));
    }

    #[test]
    fn the_directories_between_a_root_and_a_guarded_path_are_listed_outermost_first() {
        let root = Path::new("/r");
        assert_eq!(
            between(root, Path::new("/r/a/b/.git")),
            vec![PathBuf::from("/r/a"), PathBuf::from("/r/a/b")]
        );
        assert!(between(root, Path::new("/r/.git")).is_empty());
        assert!(between(root, Path::new("/elsewhere/x")).is_empty());
    }

    #[test]
    fn symlinked_protected_names_and_every_git_entry_are_reported_for_the_tripwires() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("real-git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("settings")).unwrap();
        std::os::unix::fs::symlink("real-git", root.join(".git")).unwrap();
        std::os::unix::fs::symlink("settings", root.join(".vscode")).unwrap();
        std::fs::create_dir_all(root.join("sub/.git")).unwrap();
        let found = in_root(&root, settings(false));
        assert!(
            found
                .links
                .contains(&(root.join(".git"), PathBuf::from("real-git")))
        );
        assert!(
            found
                .links
                .contains(&(root.join(".vscode"), PathBuf::from("settings")))
        );
        assert!(found.repositories.contains(&root.join(".git")));
        assert!(found.repositories.contains(&root.join("sub/.git")));
        // A symlinked `.git` is guarded where it leads.
        assert!(found.guards.contains(&Guard::Pinned(root.join("real-git"))));
        assert!(
            found
                .guards
                .contains(&Guard::ReadOnly(root.join("real-git/hooks")))
        );
        assert!(!found.truncated);
    }

    #[test]
    fn files_a_config_includes_are_guarded_and_their_hooks_path_followed() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(
            root.join(".git/config"),
            "[include]\n\tpath = ../team.gitconfig\n[includeIf \"onbranch:main\"]\n\tpath = /nowhere\n",
        )
        .unwrap();
        std::fs::write(
            root.join("team.gitconfig"),
            "[core]\n\thooksPath = .team-hooks\n[include]\n\tpath = more.gitconfig\n",
        )
        .unwrap();
        std::fs::write(root.join("more.gitconfig"), "").unwrap();
        let guards = in_root(&root, settings(false)).guards;
        for guarded in [
            Guard::ReadOnly(root.join("team.gitconfig")),
            Guard::ReadOnly(root.join("more.gitconfig")),
            Guard::EmptyDir(root.join(".team-hooks")),
        ] {
            assert!(guards.contains(&guarded), "{guarded:?} in {guards:?}");
        }
        assert_eq!(
            include_paths(
                "[IncludeIf \"gitdir:~/w/\"]\n path = \"~/w.inc\" ; c\n[user]\npath = x\n"
            ),
            vec![PathBuf::from("~/w.inc")]
        );
        let relaxed = in_root(&root, settings(true)).guards;
        assert!(!relaxed.contains(&Guard::ReadOnly(root.join("team.gitconfig"))));
    }
}
