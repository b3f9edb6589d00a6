//! Claude Code's own hook settings read as dsh hooks: the `hooks` section of a
//! `settings.json` (`[hooks] claude_settings`, a trusted project's `.claude/settings.json`)
//! or a plugin's `hooks/hooks.json`, each hook becoming an [`ExternalHookConfig`] in the
//! claude-code dialect. `dsh hooks import` prints what this reads as TOML. Events dsh has
//! no counterpart for, and hook kinds it cannot run, are listed as skipped, never dropped
//! in silence.

use super::{ExternalHookConfig, HookDialect, HookEvent, HookRun};
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most of a settings file read: settings are small, and a named path must not make
/// the config load read without end.
const MAX_SETTINGS_BYTES: u64 = 1024 * 1024;

/// Claude Code's default hook timeout, in seconds.
const CLAUDE_TIMEOUT_SECS: u64 = 60;

/// What a settings file or plugin holds, as dsh hooks.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Imported {
    pub hooks: Vec<ExternalHookConfig>,
    /// A line per hook not taken, saying which and why.
    pub skipped: Vec<String>,
}

/// Names `hook` apart from those in `taken` (its label, then `-2`, `-3`...), and takes
/// the name.
pub fn name_apart(hook: &mut ExternalHookConfig, taken: &mut HashSet<String>) {
    let base = hook.label();
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}-{n}");
        n += 1;
    }
    taken.insert(name.clone());
    hook.name = Some(name);
}

/// Where the settings come from: what `$CLAUDE_PROJECT_DIR` and `${CLAUDE_PLUGIN_ROOT}`
/// mean for its hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin<'a> {
    /// The user's own settings: the project is the session's cwd (set when a hook runs).
    User,
    /// A project's `.claude/settings.json`: the project is this directory.
    Project(&'a Path),
    /// A plugin folder.
    Plugin(&'a Path),
}

#[derive(Deserialize)]
struct Settings {
    #[serde(default)]
    hooks: BTreeMap<String, Vec<Group>>,
}

#[derive(Deserialize)]
struct Group {
    #[serde(default)]
    matcher: Option<String>,
    #[serde(default)]
    hooks: Vec<Handler>,
}

#[derive(Deserialize)]
struct Handler {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    timeout: Option<f64>,
}

/// A `~/` path made absolute against `$HOME`.
pub fn expand_home(path: &Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => std::env::var_os("HOME")
            .map(|home| PathBuf::from(home).join(rest))
            .unwrap_or_else(|| path.to_path_buf()),
        Err(_) => path.to_path_buf(),
    }
}

/// dsh's event for a Claude Code event name, if it has one.
fn event_of(name: &str) -> Option<HookEvent> {
    Some(match name {
        "PreToolUse" => HookEvent::PreTool,
        "PostToolUse" => HookEvent::PostTool,
        "PermissionRequest" => HookEvent::Permission,
        "UserPromptSubmit" => HookEvent::Prompt,
        "SessionStart" => HookEvent::SessionStart,
        "Stop" => HookEvent::Stop,
        "SessionEnd" => HookEvent::SessionEnd,
        "Notification" => HookEvent::Notification,
        "PostToolUseFailure" => HookEvent::PostToolFailure,
        _ => return None,
    })
}

fn read_bounded(path: &Path) -> Result<String, String> {
    let file = crate::fsutil::open_regular(path, false)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_SETTINGS_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if text.len() as u64 > MAX_SETTINGS_BYTES {
        return Err(format!(
            "{} is over {MAX_SETTINGS_BYTES} bytes",
            path.display()
        ));
    }
    Ok(text)
}

/// Reads `path`: a plugin folder (its `hooks/hooks.json`, `${CLAUDE_PLUGIN_ROOT}` the
/// folder) or a settings file (the user's own: `$CLAUDE_PROJECT_DIR` is the session's
/// cwd).
pub fn read(path: &Path) -> Result<Imported, String> {
    let path = expand_home(path);
    if path.is_dir() {
        let file = path.join("hooks").join("hooks.json");
        let root = std::fs::canonicalize(&path).unwrap_or(path.clone());
        return parse(&read_bounded(&file)?, &file, Origin::Plugin(&root));
    }
    parse(&read_bounded(&path)?, &path, Origin::User)
}

/// A project's `dir/.claude/settings.json`, if it has one (`$CLAUDE_PROJECT_DIR` is `dir`).
pub fn read_project(dir: &Path) -> Option<Result<Imported, String>> {
    let file = dir.join(".claude").join("settings.json");
    file.is_file()
        .then(|| parse(&read_bounded(&file)?, &file, Origin::Project(dir)))
}

fn parse(text: &str, file: &Path, origin: Origin<'_>) -> Result<Imported, String> {
    let settings: Settings = serde_json::from_str(text)
        .map_err(|e| format!("{} is not Claude Code settings: {e}", file.display()))?;
    let mut imported = Imported::default();
    let mut names = HashSet::new();
    for (event_name, groups) in &settings.hooks {
        for group in groups {
            for handler in &group.hooks {
                let described = handler
                    .command
                    .as_deref()
                    .map(|c| format!("`{c}`"))
                    .unwrap_or_else(|| format!("a {} hook", handler.kind));
                let Some(event) = event_of(event_name) else {
                    imported.skipped.push(format!(
                        "{event_name} {described}: dsh has no {event_name} event"
                    ));
                    continue;
                };
                let command = match (handler.kind.as_str(), &handler.command) {
                    ("command", Some(command)) => command,
                    ("command", None) => {
                        return Err(format!(
                            "{}: a {event_name} command hook without `command`",
                            file.display()
                        ));
                    }
                    (kind, _) => {
                        imported.skipped.push(format!(
                            "{event_name} {described}: dsh does not run `{kind}` hooks from Claude Code settings"
                        ));
                        continue;
                    }
                };
                // Claude Code runs the command through a shell, with the project's and
                // the plugin's directories in its environment.
                let mut argv = Vec::new();
                match origin {
                    Origin::User => {}
                    Origin::Project(dir) => {
                        argv.push("/usr/bin/env".to_string());
                        argv.push(format!("CLAUDE_PROJECT_DIR={}", dir.display()));
                    }
                    Origin::Plugin(root) => {
                        argv.push("/usr/bin/env".to_string());
                        argv.push(format!("CLAUDE_PLUGIN_ROOT={}", root.display()));
                    }
                }
                argv.extend(["/bin/sh".to_string(), "-c".to_string(), command.clone()]);
                let matcher = group.matcher.clone().filter(|m| !m.is_empty() && m != "*");
                if let Some(m) = &matcher {
                    ToolMatcher::parse(m).map_err(|e| format!("{}: {e}", file.display()))?;
                }
                let timeout_secs = handler.timeout.unwrap_or(CLAUDE_TIMEOUT_SECS as f64);
                let mut hook = ExternalHookConfig {
                    argv: vec!["/bin/sh".into(), "-c".into(), command.clone()],
                    event,
                    matcher,
                    dialect: HookDialect::ClaudeCode,
                    run: HookRun::Spawn,
                    timeout_ms: (timeout_secs.max(0.001) * 1000.0) as u64,
                    ..ExternalHookConfig::default()
                };
                // Named by its script (the `sh -c` line's), made unique within the file.
                name_apart(&mut hook, &mut names);
                hook.argv = argv;
                imported.hooks.push(hook);
            }
        }
    }
    Ok(imported)
}

/// `imported` as the `[[hooks.command]]` TOML of a dsh config, what was skipped listed
/// as comments first (`dsh hooks import`).
pub fn to_toml(imported: &Imported, source: &Path) -> Result<String, String> {
    #[derive(serde::Serialize)]
    struct Hooks<'a> {
        command: &'a [ExternalHookConfig],
    }
    #[derive(serde::Serialize)]
    struct File<'a> {
        hooks: Hooks<'a>,
    }
    let mut out = format!(
        "# Claude Code hooks of {}, as dsh hooks ({} hook(s), {} skipped)\n",
        source.display(),
        imported.hooks.len(),
        imported.skipped.len()
    );
    for skipped in &imported.skipped {
        out.push_str(&format!("# skipped: {skipped}\n"));
    }
    if !imported.hooks.is_empty() {
        out.push('\n');
        out.push_str(
            &toml::to_string_pretty(&File {
                hooks: Hooks {
                    command: &imported.hooks,
                },
            })
            .map_err(|e| format!("cannot render the hooks as TOML: {e}"))?,
        );
    }
    Ok(out)
}

/// Claude Code's `matcher` over its tool names (`Bash`, `Edit`, `mcp__github__x`): `*`
/// or empty matches all; a value of only letters, digits, `_`, `-`, `,`, spaces and `|`
/// is a list of exact names; anything else is an unanchored regular expression.
#[derive(Debug, Clone)]
pub enum ToolMatcher {
    All,
    Names(Vec<String>),
    Pattern(regex::Regex),
}

impl ToolMatcher {
    /// Reads a matcher; `Err` for a pattern that is no regular expression.
    pub fn parse(matcher: &str) -> Result<Self, String> {
        let m = matcher.trim();
        if m.is_empty() || m == "*" {
            return Ok(Self::All);
        }
        let plain = m
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ',' | ' ' | '|'));
        if plain {
            return Ok(Self::Names(
                m.split(['|', ','])
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
            ));
        }
        regex::Regex::new(m)
            .map(Self::Pattern)
            .map_err(|e| format!("matcher {m:?} is not a regular expression: {e}"))
    }

    /// Whether it matches Claude Code's name of a tool.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Self::All => true,
            Self::Names(names) => names.iter().any(|n| n == name),
            Self::Pattern(re) => re.is_match(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matchers_are_claude_codes() {
        let m = |s: &str, name: &str| ToolMatcher::parse(s).unwrap().matches(name);
        assert!(m("Bash", "Bash"));
        assert!(!m("Bash", "BashOutput"));
        assert!(m("Edit|Write", "Write"));
        assert!(!m("Edit|Write", "Read"));
        assert!(m("mcp__.*", "mcp__github__create_issue"));
        assert!(m("Notebook.*", "NotebookEdit"));
        // Unanchored, as Claude Code's.
        assert!(!m("ash", "Bash") && m("a.h", "Bash"));
        assert!(m("*", "anything") && m("", "x"));
        assert!(ToolMatcher::parse("(").is_err());
    }

    #[test]
    fn settings_become_hooks_and_the_rest_is_listed() {
        let text = r#"{"hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "python3 $CLAUDE_PROJECT_DIR/.claude/hooks/guard.py", "timeout": 5}]},
                {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "python3 $CLAUDE_PROJECT_DIR/.claude/hooks/guard.py"}]}
            ],
            "PreCompact": [{"hooks": [{"type": "command", "command": "echo hi"}]}],
            "PostToolUse": [{"matcher": "*", "hooks": [{"type": "agent", "prompt": "x"}]}]
        }}"#;
        let got = parse(text, Path::new("s.json"), Origin::Project(Path::new("/p"))).unwrap();
        assert_eq!(got.hooks.len(), 2);
        let first = &got.hooks[0];
        assert_eq!(first.name.as_deref(), Some("guard"));
        assert_eq!(got.hooks[1].name.as_deref(), Some("guard-2"));
        assert_eq!(first.matcher.as_deref(), Some("Bash"));
        assert_eq!(first.timeout_ms, 5000);
        assert_eq!(got.hooks[1].timeout_ms, 60_000);
        assert_eq!(first.dialect, HookDialect::ClaudeCode);
        assert_eq!(
            first.argv,
            [
                "/usr/bin/env",
                "CLAUDE_PROJECT_DIR=/p",
                "/bin/sh",
                "-c",
                "python3 $CLAUDE_PROJECT_DIR/.claude/hooks/guard.py"
            ]
        );
        assert_eq!(got.skipped.len(), 2, "{:?}", got.skipped);
        assert!(got.skipped.iter().any(|s| s.contains("PreCompact")));
        assert!(got.skipped.iter().any(|s| s.contains("`agent`")));
        assert!(parse("{", Path::new("s.json"), Origin::User).is_err());
    }
}
