//! Pins: what dsh runs for a trusted project, by content (issue 39, part 4).
//!
//! `trusted_projects` in the user's config names places; a place is only as
//! trustworthy as the files in it, and a sandboxed command may write inside its
//! project. So trusting a project (`dsh trust DIR`) records the sha256 of what would
//! run for it: its `.dsh/config.toml`, its `.claude/settings.json`, and every program
//! or script their hooks (or the user's own hooks, through `$CLAUDE_PROJECT_DIR`)
//! name inside the project, or that such a file is absent. Before a call of a session
//! in a trusted project is judged, what would run is surveyed again and compared
//! with the pins: any difference (a changed file, a new one, no pins at all)
//! suspends the project's hooks fail closed. The call is refused with the reason and
//! the command to review it, never run without the hooks that should judge it.
//!
//! The pins live in the state directory (`pins.json`, written whole: a temporary
//! file, 0600, renamed over the old one, as `grants.json`), out of every sandbox's
//! reach (the state directory is masked, E9).

use crate::config::{Config, ExternalHookConfig};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Component, Path, PathBuf};

/// The file's name in the state directory.
pub const FILE: &str = "pins.json";

/// The files of a project that name what runs for it, relative to its directory.
const CONFIG_FILES: [&str; 2] = [crate::project::PROJECT_FILE, ".claude/settings.json"];

/// The content of one file that runs (or configures what runs) for a project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Content {
    /// Nothing is there: one appearing later would run unreviewed.
    Absent,
    /// A regular file with these bytes (sha256, hex).
    Sha256(String),
    /// Something that is not a readable regular file (a directory, a FIFO, a file
    /// dsh may not read): never the same as a pinned file.
    Unreadable(String),
}

impl Content {
    /// What is at `path` now. A FIFO planted there does not block (`O_NONBLOCK`).
    pub fn of(path: &Path) -> Content {
        use sha2::{Digest, Sha256};
        use std::os::unix::fs::OpenOptionsExt;
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Content::Absent,
            Err(e) => return Content::Unreadable(e.to_string()),
            Ok(_) => {}
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path);
        let mut file = match file {
            Ok(file) => file,
            Err(e) => return Content::Unreadable(e.to_string()),
        };
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Content::Unreadable("not a regular file".into());
        }
        let mut hash = Sha256::new();
        match std::io::copy(&mut file, &mut hash) {
            Ok(_) => Content::Sha256(hex(&hash.finalize())),
            Err(e) => Content::Unreadable(e.to_string()),
        }
    }

    fn describe(&self) -> String {
        match self {
            Content::Absent => "absent".into(),
            Content::Sha256(h) => format!("sha256 {}", &h[..h.len().min(16)]),
            Content::Unreadable(why) => format!("unreadable ({why})"),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What runs for one project: each file's content, by its path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pins {
    pub files: BTreeMap<PathBuf, Content>,
}

/// `pins.json`: the pins of every trusted project, by its directory (real path).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Store {
    projects: BTreeMap<PathBuf, Pins>,
}

/// One way what would run differs from what was pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The project was never pinned (or `pins.json` cannot be read: the reason).
    NotPinned(Option<String>),
    /// A pinned file's content is not what was pinned (or it is gone).
    Changed {
        path: PathBuf,
        was: Content,
        now: Content,
    },
    /// A file that would run now and was not there (or not named) when pinned.
    Appeared(PathBuf),
    /// The session's hooks were read from a config file before its pins were
    /// recorded: they are not what was reviewed.
    ReadBefore(PathBuf),
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::NotPinned(None) => write!(f, "nothing of it is pinned yet"),
            Change::NotPinned(Some(why)) => write!(f, "its pins cannot be read: {why}"),
            Change::Changed { path, was, now } => write!(
                f,
                "{} changed since it was pinned ({} -> {})",
                path.display(),
                was.describe(),
                now.describe()
            ),
            Change::Appeared(path) => write!(f, "{} would run and was not pinned", path.display()),
            Change::ReadBefore(path) => write!(
                f,
                "this session read {} before it was pinned as it is (`dsh reload` or a new \
                 session reads it again)",
                path.display()
            ),
        }
    }
}

/// Why a trusted project's hooks are suspended: what differs, and how to review it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspended {
    pub dir: PathBuf,
    pub changes: Vec<Change>,
}

impl std::fmt::Display for Suspended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the hooks of the trusted project {} are suspended, so the calls they judge are \
             refused: ",
            self.dir.display()
        )?;
        for (i, change) in self.changes.iter().enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            write!(f, "{change}")?;
        }
        write!(
            f,
            ". Review what would run and pin it with `dsh trust {}`",
            self.dir.display()
        )
    }
}

/// What would run for the project in `dir` under the user's config `user`, as it
/// is on disk now: the project's config files, and every file inside `dir` that a
/// hook it would run names (the project's own hooks, read as trusted, and the
/// user's). Paths are real where they exist.
pub fn survey(dir: &Path, user: &Config) -> Pins {
    let dir = crate::fsutil::real_path(dir);
    let mut pins = Pins::default();
    for file in CONFIG_FILES {
        let path = dir.join(file);
        pins.files.insert(path.clone(), Content::of(&path));
    }
    let mut hooks: Vec<ExternalHookConfig> = user.hooks.all();
    // The project's file read for its hooks only (no rule is checked: this runs
    // before every call of a trusted project's session). One that does not parse
    // names nothing, and its own bytes are pinned all the same.
    let project_file = dir.join(crate::project::PROJECT_FILE);
    let project = crate::fsutil::read_small_text(&project_file, 4 * 1024 * 1024)
        .ok()
        .and_then(|text| toml::from_str::<Config>(&text).ok());
    if let Some(project) = project {
        hooks.extend(project.hooks.command);
        // Claude Code settings files or plugin folders it imports, when inside it.
        for listed in &project.hooks.claude_settings {
            let path = normalize(&dir.join(listed));
            let file = if path.is_dir() {
                path.join("hooks/hooks.json")
            } else {
                path.clone()
            };
            if file.starts_with(&dir) {
                pins.files.insert(file.clone(), Content::of(&file));
                if let Ok(imported) = crate::config::claude_settings::read(&path) {
                    hooks.extend(imported.hooks);
                }
            }
        }
    }
    // dsh reads a project's Claude Code settings only beside a `.dsh/config.toml`;
    // one made later is a change all the same, so its programs are pinned either way.
    if let Some(Ok(imported)) = crate::config::claude_settings::read_project(&dir) {
        hooks.extend(imported.hooks);
    }
    for hook in &hooks {
        for path in named_files(&hook.argv, &dir) {
            let content = Content::of(&path);
            pins.files.insert(path, content);
        }
    }
    pins
}

/// The files inside `dir` that a hook's `argv` names: every word of it (a `sh -c`
/// line split at blanks, quotes and shell punctuation) that is a path, with
/// `$CLAUDE_PROJECT_DIR` as `dir` and a relative one taken from `dir` (where a
/// session of the project works). A relative word that names nothing is left out
/// (it may not be a path at all); an absolute one, or one through
/// `$CLAUDE_PROJECT_DIR` or `./`, is pinned absent.
fn named_files(argv: &[String], dir: &Path) -> Vec<PathBuf> {
    let shown = dir.to_string_lossy();
    let mut found = Vec::new();
    for arg in argv {
        // Quotes join what they hold (`"$CLAUDE_PROJECT_DIR"/x` is one word).
        let arg = arg
            .replace(['"', '\''], "")
            .replace("${CLAUDE_PROJECT_DIR}", &shown)
            .replace("$CLAUDE_PROJECT_DIR", &shown);
        let words = arg.split(|c: char| c.is_whitespace() || "`;|&()<>=".contains(c));
        for word in words.filter(|w| w.contains('/')) {
            let explicit =
                word.starts_with('/') || word.starts_with("./") || word.starts_with("../");
            let path = normalize(&dir.join(word));
            if !path.starts_with(dir) || path == dir {
                continue;
            }
            let path = path.canonicalize().unwrap_or(path);
            if !path.starts_with(dir) || path.is_dir() {
                continue;
            }
            if explicit || path.exists() {
                found.push(path);
            }
        }
    }
    found
}

/// `path` with `.` and `..` taken away lexically (a link is judged where it leads
/// by the canonical path after).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// How `now` differs from what was pinned (`pinned`), each difference once.
pub fn changes(pinned: &Pins, now: &Pins) -> Vec<Change> {
    let mut changes = Vec::new();
    for (path, content) in &now.files {
        match pinned.files.get(path) {
            Some(was) if was == content => {}
            Some(was) => changes.push(Change::Changed {
                path: path.clone(),
                was: was.clone(),
                now: content.clone(),
            }),
            None if *content == Content::Absent => {}
            None => changes.push(Change::Appeared(path.clone())),
        }
    }
    // A pinned script no hook names any more runs no more: only what would run
    // matters, so it is no change.
    changes
}

/// The pins recorded for the project in `dir`, from the state directory.
pub fn recorded(state_dir: &Path, dir: &Path) -> Result<Option<Pins>, String> {
    let dir = crate::fsutil::real_path(dir);
    Ok(read_store(state_dir)?.projects.remove(&dir))
}

/// Whether the hooks of the trusted project in `dir` may run: `loaded` is what the
/// session's layer was read from (its config files' contents), compared with the
/// pins as well as what is on disk now.
pub fn check(state_dir: &Path, dir: &Path, user: &Config, loaded: &Pins) -> Result<(), Suspended> {
    let suspended = |changes| Suspended {
        dir: crate::fsutil::real_path(dir),
        changes,
    };
    let pinned = match recorded(state_dir, dir) {
        Ok(Some(pins)) => pins,
        Ok(None) => return Err(suspended(vec![Change::NotPinned(None)])),
        Err(why) => return Err(suspended(vec![Change::NotPinned(Some(why))])),
    };
    let mut found = changes(&pinned, &survey(dir, user));
    if found.is_empty() {
        let dir = crate::fsutil::real_path(dir);
        for file in CONFIG_FILES {
            let path = dir.join(file);
            if loaded.files.get(&path) != pinned.files.get(&path) {
                found.push(Change::ReadBefore(path));
            }
        }
    }
    if found.is_empty() {
        Ok(())
    } else {
        Err(suspended(found))
    }
}

/// Every pinned project's pins, by its directory (real path): what a hook's run
/// holds a file it names to ([`super::sealed`]).
pub fn all_recorded(state_dir: &Path) -> Result<BTreeMap<PathBuf, Pins>, String> {
    Ok(read_store(state_dir)?.projects)
}

fn read_store(state_dir: &Path) -> Result<Store, String> {
    let path = state_dir.join(FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not dsh's pins: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Store::default()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Records `pins` as the project's in `dir`, the file written whole.
fn record(state_dir: &Path, dir: &Path, pins: Pins) -> Result<(), String> {
    crate::fsutil::ensure_private_dir(state_dir)
        .map_err(|e| format!("{}: {e}", state_dir.display()))?;
    let mut store = read_store(state_dir)?;
    store.projects.insert(crate::fsutil::real_path(dir), pins);
    let path = state_dir.join(FILE);
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let written = crate::fsutil::private_file()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut file| {
            let bytes = serde_json::to_vec_pretty(&store).map_err(std::io::Error::other)?;
            file.write_all(&bytes)?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `dsh trust [DIR]`: pins what would run for the project in `dir` now and returns
/// what it pinned (and what differs from the pins before), for the person to read.
pub fn trust(dir: &Path, user: &Config) -> Result<String, String> {
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    if !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    let state_dir = user.exec.state_dir();
    let before = recorded(&state_dir, &dir)?;
    let now = survey(&dir, user);
    let mut text = format!("Pinned for {}:\n", dir.display());
    for (path, content) in &now.files {
        text.push_str(&format!("  {}  {}\n", content.describe(), path.display()));
    }
    match &before {
        None => text.push_str("(nothing was pinned before)\n"),
        Some(before) => {
            let changed = changes(before, &now);
            if changed.is_empty() {
                text.push_str("(the same as before)\n");
            }
            for change in changed {
                text.push_str(&format!("  was different: {change}\n"));
            }
        }
    }
    let listed = user
        .permissions
        .trusted_projects
        .iter()
        .any(|t| crate::fsutil::real_path(t) == dir);
    if !listed {
        text.push_str(&format!(
            "{} is not in [permissions] trusted_projects: its hooks run only once it is\n",
            dir.display()
        ));
    }
    record(&state_dir, &dir, now)?;
    Ok(text)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A trusted project `p` (not pinned yet) whose `.dsh/config.toml` runs
    /// `./tools/guard.sh --strict`, and the user config naming it, its state inside.
    pub(in crate::project) fn project() -> (tempfile::TempDir, PathBuf, Config) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap().join("p");
        std::fs::create_dir_all(dir.join(".dsh")).unwrap();
        std::fs::create_dir_all(dir.join("tools")).unwrap();
        std::fs::write(
            dir.join(".dsh/config.toml"),
            "[[hooks.command]]\nargv = [\"./tools/guard.sh\", \"--strict\"]\n",
        )
        .unwrap();
        std::fs::write(dir.join("tools/guard.sh"), "#!/bin/sh\nexit 0\n").unwrap();
        let mut user = Config::default();
        user.exec.state_dir = Some(tmp.path().join("state"));
        user.permissions.trusted_projects = vec![dir.clone()];
        (tmp, dir, user)
    }

    #[test]
    fn a_survey_names_the_config_files_and_the_scripts_their_hooks_run() {
        let (_tmp, dir, user) = project();
        let pins = survey(&dir, &user);
        let paths: Vec<&PathBuf> = pins.files.keys().collect();
        assert_eq!(
            paths,
            [
                &dir.join(".claude/settings.json"),
                &dir.join(".dsh/config.toml"),
                &dir.join("tools/guard.sh")
            ]
        );
        assert_eq!(
            pins.files[&dir.join(".claude/settings.json")],
            Content::Absent
        );
        assert!(matches!(
            pins.files[&dir.join("tools/guard.sh")],
            Content::Sha256(_)
        ));
    }

    #[test]
    fn claude_project_dir_in_a_shell_line_names_a_file_of_the_project() {
        let dir = Path::new("/p");
        let argv = [
            "/usr/bin/env".to_string(),
            "CLAUDE_PROJECT_DIR=/p".into(),
            "/bin/sh".into(),
            "-c".into(),
            "python3 \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/check.py; ${CLAUDE_PROJECT_DIR}/../x.sh"
                .into(),
        ];
        assert_eq!(
            named_files(&argv, dir),
            [PathBuf::from("/p/.claude/hooks/check.py")],
            "/usr/bin/env and /bin/sh are outside; ../x.sh leaves the project"
        );
    }

    #[test]
    fn no_pins_a_changed_script_or_a_new_settings_file_suspends_until_trusted_again() {
        let (_tmp, dir, user) = project();
        let state = user.exec.state_dir();
        let loaded = survey(&dir, &user);
        let err = check(&state, &dir, &user, &loaded).unwrap_err();
        assert_eq!(err.changes, [Change::NotPinned(None)]);
        assert!(
            err.to_string()
                .contains(&format!("dsh trust {}", dir.display())),
            "{err}"
        );
        trust(&dir, &user).unwrap();
        check(&state, &dir, &user, &loaded).unwrap();
        std::fs::write(dir.join("tools/guard.sh"), "#!/bin/sh\ntouch canary\n").unwrap();
        let err = check(&state, &dir, &user, &loaded).unwrap_err();
        assert!(
            matches!(&err.changes[..], [Change::Changed { path, .. }] if path.ends_with("tools/guard.sh")),
            "{err}"
        );
        let shown = trust(&dir, &user).unwrap();
        assert!(shown.contains("was different"), "{shown}");
        check(&state, &dir, &user, &loaded).unwrap();
        std::fs::create_dir_all(dir.join(".claude")).unwrap();
        std::fs::write(dir.join(".claude/settings.json"), "{}").unwrap();
        let err = check(&state, &dir, &user, &loaded).unwrap_err();
        assert!(
            matches!(&err.changes[..], [Change::Changed { path, was: Content::Absent, .. }] if path.ends_with("settings.json")),
            "{err}"
        );
        // Pinned again, the session that read the old (absent) settings must read them again.
        trust(&dir, &user).unwrap();
        let err = check(&state, &dir, &user, &loaded).unwrap_err();
        assert!(matches!(&err.changes[..], [Change::ReadBefore(_)]), "{err}");
        check(&state, &dir, &user, &survey(&dir, &user)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(state.join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
