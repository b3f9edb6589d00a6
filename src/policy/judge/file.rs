//! The file tools' judge (spec/files.md F7): rules by path, read-only mode reads only,
//! writes outside the session's roots asked, and under the sandbox denied.

use crate::config::{Decision, Mode};
use crate::policy::{Cause, Judgement, Policy, globs, path_glob};
use std::path::{Path, PathBuf};

/// The file tools, judged by path ([`Policy::judge_in`]).
pub const FILE_TOOLS: [&str; 3] = ["read_file", "edit_file", "write_file"];

/// Where a session works, for judging the file tools: its cwd (relative paths and path
/// rules are read against it), the roots it may write without being asked (cwd and the
/// editor's additional directories), and under the sandbox executor the roots outside
/// which writes are denied (the same roots plus `[exec.sandbox] writable`: one definition).
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub cwd: &'a Path,
    pub roots: &'a [PathBuf],
    /// `Some` exactly when commands run in the sandbox executor: then a bash call's
    /// `sandbox: "off"` asks to leave it (see [`Escalation`]).
    pub sandbox_roots: Option<&'a [PathBuf]>,
    /// The tool says it only reads (an MCP tool's `readOnlyHint`): in read-only mode a
    /// rule may then allow it; without the hint read-only mode refuses it whatever the
    /// rules say.
    pub read_only_tool: bool,
    /// Expands a word's pathname patterns against the session's file system, as bash will
    /// when the line runs (P6: `logsave /dev/null /usr/bin/r[m] x`). `None`: patterns are
    /// matched against the names deny rules give ([`globs::program_names`]).
    pub globs: Option<&'a dyn globs::Globs>,
}

/// `path` made absolute against `cwd` and cleaned without touching the disk (`.` dropped,
/// `..` taken back), so `a/../secrets/x` is judged as `secrets/x`.
pub fn resolve_path(cwd: &Path, path: &str) -> PathBuf {
    use std::path::Component;
    let joined = if Path::new(path).is_absolute() {
        PathBuf::from(path)
    } else {
        cwd.join(path)
    };
    let mut out = PathBuf::from("/");
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

impl Policy {
    /// A file tool (spec/files.md F7): rules by path, read-only mode allows reading only,
    /// writes outside the session's roots are asked even in auto (only a path rule allows
    /// them), and under the sandbox denied outside its writable roots.
    pub(in crate::policy) fn judge_file(
        &self,
        tool: &str,
        raw: &str,
        mode: Mode,
        place: Option<&Place<'_>>,
    ) -> Judgement {
        let root = Path::new("/");
        let cwd = place.map(|p| p.cwd).unwrap_or(root);
        let path = resolve_path(cwd, raw);
        let shown = path.display().to_string();
        let writes = tool != "read_file";
        let inside = |roots: &[PathBuf]| {
            roots
                .iter()
                .any(|r| path.starts_with(resolve_path(root, &r.to_string_lossy())))
        };
        let in_roots = place.is_none_or(|p| inside(p.roots));
        let call = |decision, reason: String, cause| Judgement {
            cause,
            ..Judgement::of_call(decision, reason)
        };
        if writes && mode == Mode::ReadOnly {
            return call(
                Decision::Deny,
                format!("read-only mode: tool `{tool}` changes {shown}"),
                Cause::ReadOnly,
            );
        }
        if writes
            && let Some(sandbox) = place.and_then(|p| p.sandbox_roots)
            && !inside(sandbox)
        {
            return call(
                Decision::Deny,
                format!(
                    "{shown} is outside the sandbox's writable roots (to write it there, call \
                     {tool} again with sandbox: \"off\" and a justification: the person is asked)"
                ),
                Cause::OutsideSandbox {
                    roots: sandbox.to_vec(),
                },
            );
        }
        let relative = path
            .strip_prefix(cwd)
            .ok()
            .map(|r| r.to_string_lossy().into_owned());
        let rule = self
            .rules
            .iter()
            .filter(|r| r.prefix.is_none() && r.covers_tool(tool))
            .filter(|r| match &r.path {
                None => true,
                Some(glob) if glob.starts_with('/') => path_glob(glob.as_bytes(), shown.as_bytes()),
                Some(glob) => relative
                    .as_deref()
                    .is_some_and(|rel| path_glob(glob.as_bytes(), rel.as_bytes())),
            })
            .max_by_key(|r| (r.action, r.path.is_some()));
        if let Some(rule) = rule {
            // Outside the roots only a rule naming paths allows a write; `*` does not.
            if writes && !in_roots && rule.action == Decision::Allow && rule.path.is_none() {
                return call(
                    Decision::Ask,
                    format!("{shown} is outside the session's directories"),
                    Cause::Call,
                );
            }
            return call(
                rule.action,
                format!("{} matches tool `{tool}` on {shown}", rule.describe()),
                rule.cause(),
            );
        }
        if writes && !in_roots {
            return call(
                Decision::Ask,
                format!("{shown} is outside the session's directories"),
                Cause::Call,
            );
        }
        let decision = match (writes, mode, in_roots) {
            (false, _, true)
            | (false, Mode::Auto | Mode::ReadOnly, false)
            | (true, Mode::Auto, _) => Decision::Allow,
            _ => Decision::Ask,
        };
        call(
            decision,
            format!("tool `{tool}` on {shown} (mode {})", mode.id()),
            Cause::Mode { mode },
        )
    }
}
