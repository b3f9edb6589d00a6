//! What decided a file tool's containment (issue 39): which entry of the sandbox's
//! layout allowed or refused a path, as data. The sandbox's file check
//! (`sandbox/files.rs`) produces it; a refusal carries it in its [`super::FileError`],
//! so the audit line records it and `dsh policy explain` shows it, and nobody reads it
//! back out of the error's text.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The layout entry that decided one file tool access under the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Containment {
    /// Allowed: the path is under this writable root.
    WritableRoot { root: PathBuf },
    /// Allowed to read: the host's read-only rest (or an entry a command sees empty).
    ReadOnly { entry: PathBuf },
    /// Allowed to read: a spill file dsh named in a command's result.
    SpillFile,
    /// Refused to write: a protected entry inside a writable root.
    Protected { entry: PathBuf, what: Protection },
    /// Refused to write: under no writable root.
    OutsideRoots { roots: Vec<PathBuf> },
    /// Refused: a masked entry (commands read it as empty).
    Masked { entry: PathBuf, masked_by: MaskedBy },
    /// Refused: a place of the sandbox's own, or one it does not show.
    NotReachable {
        entry: Option<PathBuf>,
        place: OwnPlace,
    },
}

impl Containment {
    /// Whether it lets the access through.
    pub fn allows(&self) -> bool {
        matches!(
            self,
            Containment::WritableRoot { .. }
                | Containment::ReadOnly { .. }
                | Containment::SpillFile
        )
    }
}

impl std::fmt::Display for Containment {
    /// The line `dsh policy explain` shows.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Containment::WritableRoot { root } => {
                write!(f, "allowed: under the writable root {}", root.display())
            }
            Containment::ReadOnly { entry } => write!(
                f,
                "allowed to read: the sandbox shows it read-only (its entry {})",
                entry.display()
            ),
            Containment::SpillFile => f.write_str("allowed to read: a spill file dsh named"),
            Containment::Protected { entry, what } => write!(
                f,
                "refused to write: the protected entry {} ({what})",
                entry.display()
            ),
            Containment::OutsideRoots { roots } => write!(
                f,
                "refused to write: under no writable root (they are {})",
                roots_text(roots)
            ),
            Containment::Masked { entry, masked_by } => {
                let by = match masked_by {
                    MaskedBy::DenyRead => "[exec.sandbox] deny_read",
                    MaskedBy::DshOwn => "dsh's own directories",
                    MaskedBy::Host => "the host's sockets or kernel interfaces",
                };
                write!(f, "refused: masked at {} by {by}", entry.display())
            }
            Containment::NotReachable { place, .. } => f.write_str(match place {
                OwnPlace::Tmp => "refused: the sandbox's private /tmp",
                OwnPlace::DevOrProc => "refused: the sandbox's own /dev or /proc",
                OwnPlace::Nothing => "refused: the sandbox shows nothing there",
            }),
        }
    }
}

/// Why a protected path inside a writable root is held read-only: what would run it
/// on the host later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protection {
    /// A repository's hooks and config (`.git/hooks`, `.git/config`, `.gitmodules`).
    Git,
    /// A project's dsh or Claude Code settings and hooks (`.dsh/`, `.claude/`).
    ProjectSettings,
    /// An editor folder (`.vscode/`, `.zed/`, `.idea/`).
    EditorFolder,
    /// A shell startup file (`.bashrc`, `.zshrc`, `.profile`...).
    ShellStartup,
    /// Anything else the sandbox keeps read-only in a root (hook managers...).
    Other,
}

impl std::fmt::Display for Protection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protection::Git => "git's hooks and config: git runs what they name on the host",
            Protection::ProjectSettings => {
                "a project's dsh settings and hooks, which run on the host"
            }
            Protection::EditorFolder => {
                "an editor folder, whose tasks and settings run when the project opens"
            }
            Protection::ShellStartup => "a shell startup file, run at the next login or shell",
            Protection::Other => "a path the sandbox keeps read-only",
        })
    }
}

/// What put a mask over a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaskedBy {
    /// `[exec.sandbox] deny_read` (its defaults included).
    DenyRead,
    /// dsh's own state or config directory.
    DshOwn,
    /// A host socket's directory, or a kernel interface the sandbox masks.
    Host,
}

/// A place of the sandbox's own, which no file tool reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnPlace {
    /// Its private `/tmp`, a new one for each command.
    Tmp,
    /// Its own `/dev` or `/proc`.
    DevOrProc,
    /// Nothing of the host is shown there.
    Nothing,
}

/// The roots as a person reads them in a refusal.
pub fn roots_text(roots: &[PathBuf]) -> String {
    if roots.is_empty() {
        return "no directory of the host (only its private /tmp)".into();
    }
    let named: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    named.join(", ")
}
