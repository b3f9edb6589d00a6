//! The file tools under the sandbox (E11): every read and write is decided by the same
//! [`Layout`] that renders the commands' bwrap arguments (`layout_with`, with the
//! missing protected entries shown as masks but nothing made on the host), so the file
//! tools and `bash` answer from one list: writable roots, the read-only rest, the
//! protected names, `deny_read` and dsh's own directories.
//!
//! The check runs in the daemon, not in a process: a path is resolved to its real
//! path (links followed), that path is judged, and then opened with `openat2` and
//! `RESOLVE_NO_SYMLINKS` (beneath `/`, or beneath the writable root for a write) so
//! nothing on the way can be a link: one swapped in between the check and the open
//! makes the open fail instead of reaching somewhere else. A write then goes through
//! the directory's descriptor (a new file beside the target, renamed over it), never
//! a path again.

use super::SandboxLauncher;
use super::layout::{Layout, Mount};
use crate::containment::{Containment, MaskedBy, OwnPlace, Protection};
use crate::exec::local::{blocking, read_opened, replace_in, split};
use crate::exec::{FileError, FileIntent, FileRead, FileRequest, FileStat, WriteOutcome};
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::Mode;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the sandbox shows the file tools: its layout and the real paths it was made
/// from. Built once per set of roots and kept while nothing it was read from changed
/// ([`super::view_cache`]), so a call pays for neither the walk nor the resolving.
pub(super) struct FileView {
    pub(super) layout: Layout,
    /// The real writable roots, in the layout's order.
    pub(super) writable: Vec<PathBuf>,
    /// The real paths of `deny_read` and dsh's own directories, with which they are.
    pub(super) masked: Vec<(PathBuf, MaskedBy)>,
    /// The spill directory, real: its files are readable (a command's own output).
    pub(super) spill_dir: Option<PathBuf>,
}

/// Where a judged path is opened from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Allowed {
    /// Beneath `/` (a read of the read-only rest or of a spill file).
    Anywhere,
    /// Beneath this writable root.
    Within(PathBuf),
}

impl SandboxLauncher {
    /// The sandbox a command of a session with `roots` would get, for the file tools.
    pub(super) fn file_view(&self, roots: &[PathBuf]) -> Result<Arc<FileView>, FileError> {
        self.views
            .view(self, roots)
            .map_err(|why| FileError::Unavailable(format!("the sandbox refuses: {why}")))
    }

    /// The view over `layout` (made for `roots`), every path it names resolved by
    /// `real` (its real path, links followed; `None` when nothing is there), which
    /// the cache gives as a resolver that watches what it reads.
    pub(super) fn view_over(
        &self,
        layout: Layout,
        roots: &[PathBuf],
        real: &mut dyn FnMut(&Path) -> Option<PathBuf>,
    ) -> FileView {
        // The same real roots the layout bound (it refused a symlinked one).
        let writable = roots
            .iter()
            .chain(&self.writable)
            .filter(|r| r.is_absolute())
            .filter_map(|r| real(r))
            .filter(|r| r.is_dir())
            .collect();
        let own: Vec<PathBuf> = self
            .spill_dir
            .parent()
            .map(Path::to_path_buf)
            .into_iter()
            .chain(
                crate::config::user_config_file().and_then(|f| f.parent().map(Path::to_path_buf)),
            )
            .collect();
        let masked = self
            .deny_read
            .iter()
            .filter_map(|p| {
                let by = if own.contains(p) {
                    MaskedBy::DshOwn
                } else {
                    MaskedBy::DenyRead
                };
                real(p).map(|real| (real, by))
            })
            .collect();
        FileView {
            layout,
            writable,
            masked,
            spill_dir: real(&self.spill_dir),
        }
    }
}

impl FileView {
    /// Whether a file tool may `intent` the file at `real` (its real path), and where
    /// it is then opened from; refused, the error names the layout entry that refused.
    /// (The tests ask this; a call acts on [`FileView::judged`].)
    #[cfg(test)]
    pub(super) fn judge(&self, real: &Path, intent: FileIntent) -> Result<Allowed, FileError> {
        self.judged(real, intent).map(|(allowed, _)| allowed)
    }

    /// [`FileView::judge`], with the entry that allowed it (for the call's audit line).
    pub(super) fn judged(
        &self,
        real: &Path,
        intent: FileIntent,
    ) -> Result<(Allowed, Containment), FileError> {
        let decided = self.containment(real, intent);
        let path = real.to_path_buf();
        match decided.clone() {
            Containment::WritableRoot { root } => Ok((Allowed::Within(root), decided)),
            Containment::ReadOnly { .. } | Containment::SpillFile => {
                Ok((Allowed::Anywhere, decided))
            }
            Containment::Protected { entry, what } => {
                Err(FileError::Protected { path, entry, what })
            }
            Containment::OutsideRoots { roots } => Err(FileError::OutsideRoots { path, roots }),
            Containment::Masked { entry, masked_by } => Err(FileError::Masked {
                path,
                entry,
                masked_by,
            }),
            Containment::NotReachable { place, .. } => Err(FileError::NotReachable {
                path,
                place,
                why: match place {
                    OwnPlace::Tmp => "it is in the sandbox's private /tmp: each command has its \
                                      own, empty at its start and gone at its end, so no file \
                                      tool can reach it; use bash, or a directory of the session"
                        .into(),
                    OwnPlace::DevOrProc => "it is in the sandbox's own /dev or /proc, which the \
                                            file tools do not reach; use bash"
                        .into(),
                    OwnPlace::Nothing => "the sandbox shows nothing there".into(),
                },
            }),
        }
    }

    /// Which entry of the layout decides whether a file tool may `intent` the file at
    /// `real`: the one answer the check above acts on and `dsh policy explain` shows.
    pub(super) fn containment(&self, real: &Path, intent: FileIntent) -> Containment {
        let root = self.writable.iter().find(|r| real.starts_with(r));
        if let Some((entry, masked_by)) = self.masked.iter().find(|(m, _)| real.starts_with(m)) {
            let spill = self.spill_dir.as_deref().is_some_and(|d| {
                real.parent() == Some(d)
                    && real
                        .file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(crate::exec::outfiles::is_spill_file)
            });
            return match intent {
                FileIntent::Read if spill => Containment::SpillFile,
                _ => Containment::Masked {
                    entry: entry.clone(),
                    masked_by: *masked_by,
                },
            };
        }
        let mount = self.layout.covering(real);
        let entry = mount.map(|m| m.path().to_path_buf());
        match (mount, intent) {
            (Some(Mount::HostWritable(e)), _) => match root {
                Some(root) => Containment::WritableRoot { root: root.clone() },
                // A pin outside every root cannot be: a root holds it. Read-only then.
                None if intent == FileIntent::Read => Containment::ReadOnly { entry: e.clone() },
                None => Containment::OutsideRoots {
                    roots: self.writable.clone(),
                },
            },
            (Some(Mount::HostReadOnly(e)), FileIntent::Read) => {
                Containment::ReadOnly { entry: e.clone() }
            }
            (Some(Mount::HostReadOnly(e) | Mount::EmptyDir(e)), _) if root.is_some() => {
                match intent {
                    // A protected entry that does not exist yet (a hooks directory, a
                    // held `.vscode/`): commands see it empty, and so does a read.
                    FileIntent::Read => Containment::ReadOnly { entry: e.clone() },
                    FileIntent::Write => Containment::Protected {
                        what: protection(
                            root.map_or(e.as_path(), |r| real.strip_prefix(r).unwrap_or(real)),
                        ),
                        entry: e.clone(),
                    },
                }
            }
            (Some(Mount::EmptyFile { path: e, .. }), _) if root.is_some() => match intent {
                FileIntent::Read => Containment::ReadOnly { entry: e.clone() },
                FileIntent::Write => Containment::Protected {
                    what: protection(
                        root.map_or(e.as_path(), |r| real.strip_prefix(r).unwrap_or(real)),
                    ),
                    entry: e.clone(),
                },
            },
            (Some(Mount::HostReadOnly(_)), FileIntent::Write) => Containment::OutsideRoots {
                roots: self.writable.clone(),
            },
            (Some(Mount::EmptyDir(e) | Mount::EmptyFile { path: e, .. }), _) => {
                Containment::Masked {
                    entry: e.clone(),
                    masked_by: MaskedBy::Host,
                }
            }
            (Some(Mount::Scratch(_)), _) => Containment::NotReachable {
                entry,
                place: OwnPlace::Tmp,
            },
            (Some(Mount::Devices(_) | Mount::Processes(_)), _) => Containment::NotReachable {
                entry,
                place: OwnPlace::DevOrProc,
            },
            (None, _) => Containment::NotReachable {
                entry: None,
                place: OwnPlace::Nothing,
            },
        }
    }
}

/// Why the protected path `rel` (relative to its root) is held.
fn protection(rel: &Path) -> Protection {
    let names: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let has = |n: &str| names.iter().any(|c| c == n);
    let first = names.first().map(String::as_str).unwrap_or_default();
    if has(".git") || first == ".gitmodules" || first == ".gitconfig" {
        Protection::Git
    } else if has(".dsh") || has(".claude") {
        Protection::ProjectSettings
    } else if has(".vscode") || has(".zed") || has(".idea") {
        Protection::EditorFolder
    } else if first.starts_with(".bash") || first.starts_with(".z") || first == ".profile" {
        Protection::ShellStartup
    } else {
        Protection::Other
    }
}

/// `real` (absolute, free of links) opened with `how`, resolved beneath `base` with
/// no symlink anywhere on the way: a link swapped in after the check fails the open.
fn open_beneath(base: &Path, real: &Path, how: OpenHow) -> nix::Result<OwnedFd> {
    let rel = real.strip_prefix(base).unwrap_or(real);
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let base_fd = nix::fcntl::open(
        base,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )?;
    openat2(
        base_fd,
        rel,
        how.resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        ),
    )
}

fn base_of(allowed: &Allowed) -> &Path {
    match allowed {
        Allowed::Anywhere => Path::new("/"),
        Allowed::Within(root) => root,
    }
}

fn opened_error(path: &Path, e: nix::Error) -> FileError {
    match e {
        nix::Error::ELOOP | nix::Error::EXDEV => FileError::Io {
            path: path.to_path_buf(),
            reason: "refused: a symbolic link appeared on its path after it was checked".into(),
        },
        e => FileError::Io {
            path: path.to_path_buf(),
            reason: std::io::Error::from(e).to_string(),
        },
    }
}

/// How many links one path may pass through (the kernel's own bound).
const MAX_LINKS: usize = 40;

/// What a resolution does with a name that is not there.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Missing {
    /// The rest is taken as written: a dangling link is judged as where it points.
    AsWritten,
    /// Nothing is there (`canonicalize`'s answer).
    Nothing,
}

/// Where `path` (absolute) really is: every symbolic link on it followed. `look` is
/// told each directory before a name is looked up in it, and may stop the walk
/// (`Ok(None)`). A name not there is as `missing` says; too many links, or a link
/// that cannot be read, is the error's reason.
pub(super) fn resolve_links(
    path: &Path,
    missing: Missing,
    look: &mut dyn FnMut(&Path, &std::ffi::OsStr) -> bool,
) -> Result<Option<PathBuf>, String> {
    use std::collections::VecDeque;
    use std::path::Component;
    let mut todo: VecDeque<std::ffi::OsString> = VecDeque::new();
    let push_front = |todo: &mut VecDeque<std::ffi::OsString>, p: &Path| {
        for c in p.components().rev() {
            match c {
                Component::Normal(n) => todo.push_front(n.to_os_string()),
                Component::ParentDir => todo.push_front("..".into()),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
    };
    push_front(&mut todo, path);
    let mut done = PathBuf::from("/");
    let mut hops = 0;
    while let Some(name) = todo.pop_front() {
        if name == ".." {
            done.pop();
            continue;
        }
        if !look(&done, &name) {
            return Ok(None);
        }
        let next = done.join(&name);
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                let target = std::fs::read_link(&next).map_err(|e| e.to_string())?;
                if hops > MAX_LINKS {
                    return Err("too many levels of symbolic links".into());
                }
                if target.is_absolute() {
                    done = PathBuf::from("/");
                }
                push_front(&mut todo, &target);
            }
            Err(_) if missing == Missing::Nothing => return Ok(None),
            _ => done = next,
        }
    }
    Ok(Some(done))
}

/// Where `path` (absolute) really is: every symbolic link on it followed, a dangling
/// one too (a link to a hook that does not exist yet is judged as that hook), the part
/// that does not exist as written. Unlike `fsutil::real_path` it never stops at a link
/// whose target is missing.
fn follow_links(path: &Path) -> Result<PathBuf, FileError> {
    let io = |reason: String| FileError::Io {
        path: path.to_path_buf(),
        reason,
    };
    resolve_links(path, Missing::AsWritten, &mut |_, _| true)
        .map_err(io)?
        .ok_or_else(|| io("no real path".into()))
}

/// Everything a file operation under the sandbox needs, moved onto a blocking thread.
pub(super) struct FileCall {
    view: Arc<FileView>,
    /// The path as asked: resolved to its real path, which is judged and opened.
    asked: PathBuf,
}

/// `path` as its components when it is absolute and names no `.` or `..`: if no link
/// is on it either, it is its own real path.
fn plain(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    path.components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        .then(|| path.components().collect::<PathBuf>())
        .filter(|p| p.is_absolute())
}

impl FileCall {
    pub(super) fn new(
        launcher: &SandboxLauncher,
        request: &FileRequest,
    ) -> Result<Self, FileError> {
        Ok(Self {
            view: launcher.file_view(&request.writable_roots)?,
            asked: request.path.clone(),
        })
    }

    /// The file opened with `how` where the check allows it (`None`: nothing there),
    /// and the entry that allowed it. A plain path is first judged as written and
    /// opened refusing any link on the way: when that open succeeds (or finds
    /// nothing), no link was on the path, so it was its own real path and the
    /// judgement stands, without resolving it name by name. A link on the way, or a
    /// refusal, and the path is judged where it really leads, as always.
    fn open(
        &self,
        intent: FileIntent,
        how: OpenHow,
    ) -> Result<(Option<OwnedFd>, Containment), FileError> {
        if let Some(plain) = plain(&self.asked)
            && let Ok((allowed, containment)) = self.view.judged(&plain, intent)
        {
            match open_beneath(base_of(&allowed), &plain, how) {
                Ok(fd) => return Ok((Some(fd), containment)),
                Err(nix::Error::ENOENT) => return Ok((None, containment)),
                Err(nix::Error::ELOOP) => {}
                Err(e) => return Err(opened_error(&self.asked, e)),
            }
        }
        let real = follow_links(&self.asked)?;
        let (allowed, containment) = self.view.judged(&real, intent)?;
        match open_beneath(base_of(&allowed), &real, how) {
            Ok(fd) => Ok((Some(fd), containment)),
            Err(nix::Error::ENOENT) => Ok((None, containment)),
            Err(e) => Err(opened_error(&self.asked, e)),
        }
    }

    pub(super) fn stat(&self, intent: FileIntent) -> Result<Option<FileStat>, FileError> {
        let how = OpenHow::new().flags(OFlag::O_PATH | OFlag::O_CLOEXEC);
        let (fd, containment) = self.open(intent, how)?;
        let Some(fd) = fd else {
            return Ok(None);
        };
        let meta = std::fs::File::from(fd)
            .metadata()
            .map_err(|e| FileError::Io {
                path: self.asked.clone(),
                reason: e.to_string(),
            })?;
        Ok(Some(FileStat {
            len: meta.len(),
            regular: meta.is_file(),
            containment: Some(containment),
        }))
    }

    pub(super) fn read(&self) -> Result<FileRead, FileError> {
        let how = OpenHow::new().flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOCTTY);
        let (fd, containment) = self.open(FileIntent::Read, how)?;
        let bytes = match fd {
            Some(fd) => Some(read_opened(std::fs::File::from(fd), &self.asked)?),
            None => None,
        };
        Ok(FileRead {
            bytes,
            containment: Some(containment),
        })
    }

    /// Always by the real path: the last name may be a link, written where it
    /// points (F5), which an open of its directory cannot tell.
    pub(super) fn write(&self, content: &[u8]) -> Result<WriteOutcome, FileError> {
        let real = follow_links(&self.asked)?;
        let (allowed, containment) = self.view.judged(&real, FileIntent::Write)?;
        let (dir, name) = split(&real, &self.asked)?;
        let how = OpenHow::new().flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC);
        let dir_fd = match open_beneath(base_of(&allowed), &dir, how) {
            Ok(fd) => fd,
            Err(nix::Error::ENOENT | nix::Error::ENOTDIR) => {
                return Err(FileError::NoDirectory {
                    path: self.asked.clone(),
                    dir,
                });
            }
            Err(e) => return Err(opened_error(&self.asked, e)),
        };
        replace_in(&dir_fd, &name, content, &self.asked).map(|done| WriteOutcome {
            containment: Some(containment),
            ..done
        })
    }
}

/// What the sandbox of `config` would decide for a file tool that means to `intent`
/// `path` in a session whose writable roots are `roots` (`dsh policy explain`, with no
/// daemon): the same check the executor makes, with nothing opened or written but the
/// state directory's empty file the masks show.
pub fn explain(
    config: &crate::config::ExecConfig,
    roots: &[PathBuf],
    path: &Path,
    intent: FileIntent,
) -> Result<Containment, String> {
    let launcher = SandboxLauncher::new(config, &[])?;
    let request = FileRequest {
        path: path.to_path_buf(),
        writable_roots: roots.to_vec(),
    };
    containment(&launcher, &request, intent).map_err(|e| e.to_string())
}

/// Which entry of the launcher's layout decides a file tool's `intent` on the
/// request's path, with nothing opened: what the executor answers to
/// `_dsh/policy/explain` and, through a launcher made from the config, `dsh policy
/// explain` (above); the answer [`FileView::judged`] acts on for a real call.
pub(super) fn containment(
    launcher: &SandboxLauncher,
    request: &FileRequest,
    intent: FileIntent,
) -> Result<Containment, FileError> {
    let call = FileCall::new(launcher, request)?;
    Ok(call.view.containment(&follow_links(&call.asked)?, intent))
}

/// The launcher's file methods, off the async threads.
pub(super) async fn stat(
    launcher: &SandboxLauncher,
    request: &FileRequest,
    intent: FileIntent,
) -> Result<Option<FileStat>, FileError> {
    let call = FileCall::new(launcher, request)?;
    blocking(move || call.stat(intent)).await
}

pub(super) async fn read(
    launcher: &SandboxLauncher,
    request: &FileRequest,
) -> Result<FileRead, FileError> {
    let call = FileCall::new(launcher, request)?;
    blocking(move || call.read()).await
}

pub(super) async fn write(
    launcher: &SandboxLauncher,
    request: &FileRequest,
    content: &[u8],
) -> Result<WriteOutcome, FileError> {
    let call = FileCall::new(launcher, request)?;
    let content = content.to_vec();
    blocking(move || call.write(&content)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn view() -> FileView {
        let mut layout = Layout::default();
        for m in [
            Mount::HostReadOnly(p("/")),
            Mount::Devices(p("/dev")),
            Mount::Processes(p("/proc")),
            Mount::Scratch(p("/tmp")),
            Mount::HostWritable(p("/w/project")),
            Mount::HostWritable(p("/w/project/.git")),
            Mount::HostReadOnly(p("/w/project/.git/hooks")),
            Mount::HostReadOnly(p("/w/project/.git/config")),
            Mount::EmptyDir(p("/w/project/.vscode")),
            Mount::EmptyFile {
                path: p("/w/project/secret.env"),
                empty: p("/state/empty"),
            },
            Mount::EmptyDir(p("/home/u/.ssh")),
        ] {
            layout.push(m);
        }
        FileView {
            layout,
            writable: vec![p("/w/project")],
            masked: vec![
                (p("/w/project/secret.env"), MaskedBy::DenyRead),
                (p("/home/u/.ssh"), MaskedBy::DenyRead),
                (p("/state"), MaskedBy::DshOwn),
            ],
            spill_dir: Some(p("/state/spill")),
        }
    }

    #[test]
    fn e11_links_are_followed_to_their_end_and_a_link_swapped_in_later_fails_the_open() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("a/b")).unwrap();
        std::fs::create_dir_all(base.join("elsewhere")).unwrap();
        std::fs::write(base.join("a/b/f"), "inside").unwrap();
        std::fs::write(base.join("elsewhere/f"), "elsewhere").unwrap();
        std::os::unix::fs::symlink(base.join("hooks/pre-commit"), base.join("dangling")).unwrap();
        std::os::unix::fs::symlink("a/b", base.join("rel")).unwrap();
        assert_eq!(
            follow_links(&base.join("dangling")).unwrap(),
            base.join("hooks/pre-commit")
        );
        assert_eq!(
            follow_links(&base.join("rel/f")).unwrap(),
            base.join("a/b/f")
        );
        assert_eq!(
            follow_links(&base.join("rel/../x")).unwrap(),
            base.join("a/x")
        );
        // Checked as a/b/f; then `a` becomes a link to elsewhere: the open refuses.
        let real = follow_links(&base.join("a/b/f")).unwrap();
        let how = || OpenHow::new().flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC);
        assert!(open_beneath(&base, &real, how()).is_ok());
        std::fs::rename(base.join("a"), base.join("a-old")).unwrap();
        std::fs::create_dir_all(base.join("elsewhere/b")).unwrap();
        std::fs::rename(base.join("elsewhere/f"), base.join("elsewhere/b/f")).unwrap();
        std::os::unix::fs::symlink(base.join("elsewhere"), base.join("a")).unwrap();
        assert_eq!(
            open_beneath(&base, &real, how()).unwrap_err(),
            nix::Error::ELOOP
        );
        assert_eq!(
            open_beneath(Path::new("/"), &real, how()).unwrap_err(),
            nix::Error::ELOOP
        );
        // A plain open would have followed it.
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "elsewhere");
    }

    /// E11 attack first: a link inside the root to a masked file. Judged as written
    /// (the defence off), the link's path is the writable root's; the read resolves
    /// it, the open refusing links proves a plain path real, and the link's read is
    /// refused as the mask it leads to.
    #[test]
    fn e11_issue_39_a_plain_path_is_judged_as_written_a_link_where_it_leads() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir_all(root.join("secret")).unwrap();
        std::fs::write(root.join("secret/key"), "key").unwrap();
        std::fs::write(root.join("plain.txt"), "text").unwrap();
        std::os::unix::fs::symlink(root.join("secret"), root.join("link")).unwrap();
        let mut config = crate::config::ExecConfig {
            state_dir: Some(dir.path().join("state")),
            ..crate::config::ExecConfig::default()
        };
        config.sandbox.deny_read = vec![root.join("secret")];
        let launcher = SandboxLauncher::new(&config, &[]).unwrap();
        let call = |path: PathBuf| {
            FileCall::new(
                &launcher,
                &FileRequest {
                    path,
                    writable_roots: vec![root.clone()],
                },
            )
            .unwrap()
        };
        let read = call(root.join("plain.txt")).read().unwrap();
        assert_eq!(read.bytes.as_deref(), Some(&b"text"[..]));
        assert_eq!(
            read.containment,
            Some(Containment::WritableRoot { root: root.clone() })
        );
        assert_eq!(call(root.join("none")).read().unwrap().bytes, None);
        let view = launcher.file_view(std::slice::from_ref(&root)).unwrap();
        assert!(view.judge(&root.join("link/key"), FileIntent::Read).is_ok());
        for intent in [FileIntent::Read, FileIntent::Write] {
            assert!(matches!(
                call(root.join("link/key")).stat(intent),
                Err(FileError::Masked { .. })
            ));
        }
        assert!(matches!(
            call(root.join("link/key")).read(),
            Err(FileError::Masked { .. })
        ));
    }

    #[test]
    fn e11_the_layout_decides_each_read_and_write() {
        let v = view();
        let (r, w) = (FileIntent::Read, FileIntent::Write);
        let within = Allowed::Within(p("/w/project"));
        assert_eq!(v.judge(&p("/w/project/src/a.rs"), w), Ok(within.clone()));
        assert_eq!(v.judge(&p("/w/project/.git/index"), w), Ok(within));
        assert_eq!(v.judge(&p("/usr/include/x.h"), r), Ok(Allowed::Anywhere));
        for (path, what) in [
            ("/w/project/.git/hooks/pre-commit", "git's hooks"),
            ("/w/project/.git/config", "git's hooks"),
            ("/w/project/.vscode/tasks.json", "an editor folder"),
        ] {
            match v.judge(&p(path), w) {
                Err(FileError::Protected { what: why, .. }) => {
                    assert!(why.to_string().starts_with(what), "{path}: {why}")
                }
                other => panic!("{path}: {other:?}"),
            }
            // Reading one shows what a command sees there.
            assert_eq!(v.judge(&p(path), r), Ok(Allowed::Anywhere));
        }
        for path in [
            "/w/project/secret.env",
            "/home/u/.ssh/id_ed25519",
            "/state/audit.jsonl",
        ] {
            for intent in [r, w] {
                assert!(
                    matches!(v.judge(&p(path), intent), Err(FileError::Masked { .. })),
                    "{path}"
                );
            }
        }
        assert!(matches!(
            v.judge(&p("/etc/passwd"), w),
            Err(FileError::OutsideRoots { .. })
        ));
        for path in ["/tmp/x", "/proc/self/environ", "/dev/sda"] {
            assert!(
                matches!(v.judge(&p(path), r), Err(FileError::NotReachable { .. })),
                "{path}"
            );
        }
        // dsh's spill files are readable, never writable.
        assert_eq!(
            v.judge(&p("/state/spill/task-1.stdout"), r),
            Ok(Allowed::Anywhere)
        );
        assert!(v.judge(&p("/state/spill/task-1.stdout"), w).is_err());
        assert!(v.judge(&p("/state/spill/.hidden"), r).is_err());
    }
}
