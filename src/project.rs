//! Project config files, the second layer of the config: `.dsh/config.toml` in a
//! session's cwd or a parent up to the repository root adds rules for that session.
//!
//! A cloned repository is untrusted input, so its file can only tighten what the user's
//! own config allows: its `deny` and `ask` rules and a stricter `default_mode` (over `auto` only) apply;
//! allow rules, a looser mode, `read_only_commands` (it would widen read-only mode) and
//! hooks of any kind (a hook is a program: running one would run the repository's code)
//! are left out, each with a warning the person sees. A project the user's own file lists
//! under `[permissions] trusted_projects` is honoured fully, hooks included. Settings that
//! belong to the user (every section but `[permissions]` and `[hooks]`, and `shadow`,
//! `trusted_projects`, `remember`) are never taken from a project file.
//!
//! Pure apart from reading the file: the daemon keeps what this builds per session
//! (`hooks::project`), and `dsh policy explain` / `check-config` show it.

pub mod pins;
pub mod sealed;

use crate::config::{Config, Decision, ExternalHookConfig, HookRun, Mode, PermissionsConfig};
use std::path::{Path, PathBuf};

/// Where a project keeps its config, relative to the project's directory.
pub const PROJECT_FILE: &str = ".dsh/config.toml";

/// What a project file adds to a session, as it applies.
#[derive(Debug, Clone)]
pub struct Project {
    /// The file read.
    pub file: PathBuf,
    /// The project's directory (the one holding `.dsh`).
    pub dir: PathBuf,
    /// Listed in the user's `trusted_projects`: honoured fully.
    pub trusted: bool,
    /// The session's permissions: the user's, with the project's rules that apply
    /// appended (their origins name the project file).
    pub permissions: PermissionsConfig,
    /// The project's hooks that apply (a trusted project's; per-call programs only).
    pub hooks: Vec<ExternalHookConfig>,
    /// The mode a session there starts in, when the project sets one that applies.
    pub default_mode: Option<Mode>,
    /// What was left out and why, for the person.
    pub warnings: Vec<String>,
    /// A hash of the file's bytes: the policy version of the session's calls names it.
    pub digest: String,
}

/// The project file that applies to a session working in `cwd`: the first
/// `.dsh/config.toml` found in `cwd` or a parent, stopping after the repository root (the
/// directory holding `.git`), and before `home` and the filesystem root (neither is a
/// project: the user's own file is `~/.config/dsh/config.toml`).
pub fn find(cwd: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let mut dir = cwd;
    loop {
        if Some(dir) == home {
            return None;
        }
        let parent = dir.parent()?;
        let file = dir.join(PROJECT_FILE);
        if file.is_file() {
            return Some(file);
        }
        if dir.join(".git").exists() {
            return None;
        }
        dir = parent;
    }
}

/// [`find`] with the daemon's home directory.
pub fn find_for(cwd: &Path) -> Option<PathBuf> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    find(cwd, home.as_deref())
}

/// Whether `project` is at least as strict as `user`, so an untrusted file may set it.
/// Ask and auto are ordered (ask asks what auto runs), and read-only is stricter than
/// auto, but read-only and ask are not ordered: read-only runs the read-only commands
/// and reads outside the roots that ask would ask about. So only the user's own mode,
/// or anything over auto, may come from an untrusted project.
fn at_least_as_strict(project: Mode, user: Mode) -> bool {
    project == user || user == Mode::Auto
}

/// Reads the project file `file` and works out what of it applies on top of `user` (the
/// user's own config). A file that cannot be read or parsed, or that another user owns,
/// adds nothing and says so in a warning.
pub fn load(file: &Path, user: &Config) -> Project {
    let dir = file
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("/"))
        .to_path_buf();
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let trusted = user
        .permissions
        .trusted_projects
        .iter()
        .any(|t| canonical(t) == canonical(&dir));
    let mut project = Project {
        file: file.to_path_buf(),
        dir,
        trusted,
        permissions: user.permissions.clone(),
        hooks: Vec::new(),
        default_mode: None,
        warnings: Vec::new(),
        digest: String::new(),
    };
    let shown = file.display().to_string();
    let text = match read_own(file) {
        Ok(text) => text,
        Err(why) => {
            project.warnings.push(format!("{shown} is ignored: {why}"));
            return project;
        }
    };
    project.digest = digest(&text);
    let parsed = Config::from_toml(&text, file).and_then(|c| {
        let table: toml::Table =
            toml::from_str(&text).map_err(|e| crate::config::ConfigError::Parse {
                path: file.to_path_buf(),
                message: e.to_string(),
            })?;
        Ok((c, table))
    });
    let (config, table) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            project.warnings.push(format!("{shown} is ignored: {e}"));
            return project;
        }
    };
    apply(&mut project, user, config, &table);
    project
}

/// Reads `file` if the daemon's user (or root) owns it: a file another user put in a
/// shared directory is not this user's project.
fn read_own(file: &Path) -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(file).map_err(|e| e.to_string())?;
    let me = nix::unistd::getuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        return Err(format!(
            "it belongs to uid {}, not to this user",
            meta.uid()
        ));
    }
    // A project file is small; a FIFO or a device planted at its name is refused
    // rather than read (it would block the daemon's load).
    crate::fsutil::read_small_text(file, 4 * 1024 * 1024).map_err(|e| e.to_string())
}

/// Puts what of the project's `config` applies into `project` (whose permissions start
/// as the user's); `table` is the same text untyped, to know which keys it sets.
fn apply(project: &mut Project, user: &Config, config: Config, table: &toml::Table) {
    let shown = project.file.display().to_string();
    let trusted = project.trusted;
    let untrusted = "it is not in your trusted_projects";
    for key in table.keys() {
        if key != "permissions" && key != "hooks" {
            project.warnings.push(format!(
                "{shown}: [{key}] is ignored: a project file sets only [permissions] and [hooks]"
            ));
        }
    }
    let set = |key: &str| {
        table
            .get("permissions")
            .and_then(|p| p.as_table())
            .is_some_and(|p| p.contains_key(key))
    };
    for key in ["shadow", "trusted_projects", "remember"] {
        if set(key) {
            project.warnings.push(format!(
                "{shown}: permissions.{key} is ignored: only your own config sets it"
            ));
        }
    }
    let p = config.permissions;
    if set("default_mode") {
        let user_mode = user.permissions.default_mode;
        if trusted || at_least_as_strict(p.default_mode, user_mode) {
            project.default_mode = Some(p.default_mode);
        } else {
            project.warnings.push(format!(
                "{shown}: default_mode \"{}\" is ignored: it is not stricter than yours (\"{}\") and {untrusted}",
                p.default_mode.id(),
                user_mode.id()
            ));
        }
    }
    if set("read_only_commands") {
        if trusted {
            project.permissions.read_only_commands = p.read_only_commands.clone();
        } else {
            project.warnings.push(format!(
                "{shown}: read_only_commands is ignored: it could let read-only mode run more, and {untrusted}"
            ));
        }
    }
    for mut rule in p.rules {
        // A relative path glob means the project's paths, wherever in it a session works.
        if let Some(glob) = rule.path.as_mut()
            && !glob.starts_with('/')
        {
            // At the directory's real path: the policy judges a file tool's path with
            // every link followed, so a cwd reached through a link must not dodge it.
            let base = crate::fsutil::real_path(&project.dir);
            let anchor = |p: &str| format!("{}/{}", base.display(), p.trim_start_matches("./"));
            *glob = anchor(glob);
            for example in rule.examples.iter_mut().chain(rule.not_examples.iter_mut()) {
                if !example.starts_with('/') {
                    *example = anchor(example);
                }
            }
        }
        if rule.action == Decision::Allow && !trusted {
            project.warnings.push(format!(
                "{}: allow rule {} is ignored: {untrusted}",
                rule.origin.as_deref().unwrap_or(&shown),
                describe(&rule)
            ));
            continue;
        }
        project.permissions.rules.push(rule);
    }
    // The project's own tests, against the rules a session there is judged by.
    project.permissions.tests = p.tests;
    for failed in crate::policy::check_config(&project.permissions) {
        project.warnings.push(format!("{shown}: {failed}"));
    }
    project.permissions.tests = user.permissions.tests.clone();
    for mut hook in config.hooks.all() {
        let program = hook.argv.first().cloned().unwrap_or_default();
        if !trusted {
            project.warnings.push(format!(
                "{shown}: hook `{program}` ({}) is ignored: it would run the project's code, and {untrusted}",
                hook.event.as_str()
            ));
            continue;
        }
        if hook.run == HookRun::Server {
            project.warnings.push(format!(
                "{shown}: hook `{program}` is ignored: a project's hooks run per call (run = \"server\" is for your own config)"
            ));
            continue;
        }
        // `./hook.sh` means the project's, wherever in it the session works.
        if let Some(first) = hook.argv.first_mut()
            && (first.starts_with("./") || first.starts_with("../"))
        {
            *first = project.dir.join(&*first).to_string_lossy().into_owned();
        }
        project.hooks.push(hook);
    }
    claude_project_hooks(project, trusted);
}

/// A project's own Claude Code settings (`.claude/settings.json`), under the same rule as
/// its hooks: a trusted project's run (named apart from its other hooks), an untrusted
/// one's are ignored with a warning.
fn claude_project_hooks(project: &mut Project, trusted: bool) {
    let Some(read) = crate::config::claude_settings::read_project(&project.dir) else {
        return;
    };
    let shown = project
        .dir
        .join(".claude/settings.json")
        .display()
        .to_string();
    let imported = match read {
        Ok(imported) => imported,
        Err(why) => {
            project.warnings.push(format!("{shown} is ignored: {why}"));
            return;
        }
    };
    if !trusted {
        if !imported.hooks.is_empty() {
            project.warnings.push(format!(
                "{shown}: its {} hook(s) are ignored: they would run the project's code, and it is not in your trusted_projects",
                imported.hooks.len()
            ));
        }
        return;
    }
    let mut taken: std::collections::HashSet<String> =
        project.hooks.iter().map(|h| h.label()).collect();
    for mut hook in imported.hooks {
        crate::config::claude_settings::name_apart(&mut hook, &mut taken);
        project.hooks.push(hook);
    }
    for skipped in imported.skipped {
        project.warnings.push(format!("{shown}: skipped {skipped}"));
    }
}

/// What a session in `project` is told as its first agent message: what of the project
/// file was left out, and how to have it honoured. `None` when nothing was.
pub fn notice(project: &Project) -> Option<String> {
    if project.warnings.is_empty() {
        return None;
    }
    let mut text = format!(
        "dsh read the project config {} ({}). Not applied:\n",
        project.file.display(),
        if project.trusted {
            "trusted"
        } else {
            "untrusted: it can only tighten"
        }
    );
    for warning in &project.warnings {
        text.push_str(&format!("- {warning}\n"));
    }
    if !project.trusted {
        text.push_str(&format!(
            "To honour it fully, add \"{}\" to [permissions] trusted_projects in your own config.\n",
            project.dir.display()
        ));
    }
    Some(text)
}

/// A rule as a warning names it: `bash \`git push\``, `write_file secrets/**`, `*`.
fn describe(rule: &crate::config::PermissionRule) -> String {
    match (&rule.command, &rule.path) {
        (Some(c), _) => format!("{} `{c}`", rule.tool),
        (None, Some(p)) => format!("{} {p}", rule.tool),
        (None, None) => rule.tool.clone(),
    }
}

/// The first 8 bytes of the text's sha256, as hex.
fn digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn project_dir(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::create_dir_all(root.join(".dsh")).unwrap();
        fs::create_dir_all(root.join("src/deep")).unwrap();
        fs::write(root.join(PROJECT_FILE), text).unwrap();
        (dir, root)
    }

    #[test]
    fn found_from_a_subdirectory_and_not_past_the_repository_root_or_home() {
        let (dir, root) = project_dir("");
        let file = root.join(PROJECT_FILE);
        assert_eq!(find(&root.join("src/deep"), None), Some(file.clone()));
        assert_eq!(find(&root, None), Some(file));
        // A nested repository without a file of its own stops the search at its root.
        let inner = root.join("vendor/lib");
        fs::create_dir_all(inner.join(".git")).unwrap();
        assert_eq!(find(&inner, None), None);
        // Home is a boundary, not a project.
        let home = dir.path().join("home");
        fs::create_dir_all(home.join(".dsh")).unwrap();
        fs::create_dir_all(home.join("work")).unwrap();
        fs::write(home.join(PROJECT_FILE), "").unwrap();
        assert_eq!(find(&home.join("work"), Some(&home)), None);
        assert_eq!(find(Path::new("/"), None), None);
    }

    const PROJECT: &str = r#"
[exec]
kind = "none"
[permissions]
default_mode = "auto"
remember = "user"
read_only_commands = ["rm"]
[[permissions.rules]]
tool = "bash"
command = "curl"
action = "allow"
[[permissions.rules]]
tool = "bash"
command = "rm"
action = "deny"
[[permissions.rules]]
tool = "bash"
command = "git push"
action = "ask"
[[hooks.command]]
argv = ["./hook.sh"]
"#;

    #[test]
    fn an_untrusted_project_only_tightens_and_says_what_it_left_out() {
        let (_dir, root) = project_dir(PROJECT);
        let p = load(&root.join(PROJECT_FILE), &Config::default());
        assert!(!p.trusted);
        let actions: Vec<_> = p
            .permissions
            .rules
            .iter()
            .map(|r| (r.command.as_deref(), r.action))
            .collect();
        assert_eq!(
            actions,
            [
                (Some("rm"), Decision::Deny),
                (Some("git push"), Decision::Ask)
            ]
        );
        assert!(p.hooks.is_empty());
        assert_eq!(p.default_mode, None, "auto is looser than ask");
        assert_eq!(
            p.permissions.read_only_commands,
            Config::default().permissions.read_only_commands
        );
        let all = p.warnings.join("\n");
        for said in [
            "[exec] is ignored",
            "permissions.remember is ignored",
            "default_mode \"auto\" is ignored",
            "read_only_commands is ignored",
            "allow rule bash `curl` is ignored",
            "hook `./hook.sh` (pre_tool) is ignored",
        ] {
            assert!(all.contains(said), "{said} not in\n{all}");
        }
        assert_eq!(p.warnings.len(), 6, "{all}");
        // Read-only over the user's ask is not stricter (it runs read-only commands and
        // reads outside the roots without asking): ignored. Over auto it applies.
        let strict = PROJECT.replace("\"auto\"", "\"read-only\"");
        std::fs::write(root.join(PROJECT_FILE), strict).unwrap();
        let mut user = Config::default();
        user.permissions.default_mode = Mode::Ask;
        let p = load(&root.join(PROJECT_FILE), &user);
        assert_eq!(p.default_mode, None);
        assert!(
            p.warnings.iter().any(|w| w.contains("not stricter")),
            "{:?}",
            p.warnings
        );
        user.permissions.default_mode = Mode::Auto;
        let p = load(&root.join(PROJECT_FILE), &user);
        assert_eq!(p.default_mode, Some(Mode::ReadOnly));
    }

    #[test]
    fn a_trusted_project_is_honoured_fully() {
        let (_dir, root) = project_dir(PROJECT);
        let mut user = Config::default();
        user.permissions.trusted_projects = vec![root.clone()];
        let p = load(&root.join(PROJECT_FILE), &user);
        assert!(p.trusted);
        assert_eq!(p.permissions.rules.len(), 3);
        assert_eq!(p.default_mode, Some(Mode::Auto));
        assert_eq!(p.permissions.read_only_commands, ["rm"]);
        assert_eq!(p.hooks[0].argv[0], root.join("./hook.sh").to_string_lossy());
        // What only the user sets is still ignored.
        assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
    }

    #[test]
    fn a_relative_path_rule_means_the_projects_paths() {
        let (_dir, root) = project_dir(
            "[[permissions.rules]]\ntool = \"*_file\"\npath = \"secrets/**\"\naction = \"deny\"\nexamples = [\"secrets/a\"]\n",
        );
        let p = load(&root.join(PROJECT_FILE), &Config::default());
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        let policy = crate::policy::Policy::new(&p.permissions);
        // Judged from a subdirectory of the project, the project's secrets are still denied.
        let cwd = root.join("src");
        let place = crate::policy::Place {
            cwd: &cwd,
            roots: std::slice::from_ref(&root),
            sandbox_roots: None,
            read_only_tool: false,
            globs: None,
        };
        let judged = policy.judge_in(
            "read_file",
            &serde_json::json!({"path": "../secrets/key"}),
            Mode::Auto,
            &[],
            Some(&place),
        );
        assert_eq!(judged.decision, Decision::Deny, "{}", judged.reason);
    }

    #[test]
    fn a_project_reached_through_a_link_still_denies_its_real_paths() {
        let (dir, root) = project_dir(
            "[[permissions.rules]]\ntool = \"*_file\"\npath = \"secrets/**\"\naction = \"deny\"\n",
        );
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&root, &link).unwrap();
        // The editor opened the link; the policy hook judges real paths.
        let p = load(&link.join(PROJECT_FILE), &Config::default());
        let policy = crate::policy::Policy::new(&p.permissions);
        let real = crate::fsutil::real_path(&root);
        let place = crate::policy::Place {
            cwd: &real,
            roots: std::slice::from_ref(&real),
            sandbox_roots: None,
            read_only_tool: false,
            globs: None,
        };
        let judged = policy.judge_in(
            "read_file",
            &serde_json::json!({"path": real.join("secrets/key")}),
            Mode::Auto,
            &[],
            Some(&place),
        );
        assert_eq!(judged.decision, Decision::Deny, "{}", judged.reason);
    }

    #[test]
    fn a_broken_file_adds_nothing_and_says_why() {
        let (_dir, root) = project_dir("[permissions\n");
        let p = load(&root.join(PROJECT_FILE), &Config::default());
        assert!(p.permissions.rules.is_empty() && p.hooks.is_empty());
        assert!(p.warnings[0].contains("is ignored"), "{:?}", p.warnings);
    }
}
