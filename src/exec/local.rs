//! The local executor: `bash -c` on this machine, as the daemon's user.
//!
//! Everything but starting `bash` is the shared engine's (`process`): the local
//! launcher's cleanup is the engine's default, the process table of this machine.

use super::process::{Launcher, ProcessExecutor, check_local_workdir};
use super::{
    ExecError, ExecSpec, FileError, FileIntent, FileRequest, FileStat, MAX_FILE_BYTES, WriteOutcome,
};
use crate::config::ExecConfig;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use tokio::process::Command;

/// Starts `bash -c <command>` in the command's workdir.
pub struct LocalLauncher;

/// Runs commands as local processes (see `process` for the lifecycle).
pub type LocalExecutor = ProcessExecutor<LocalLauncher>;

impl ProcessExecutor<LocalLauncher> {
    /// An executor with the daemon's own environment as the base of every
    /// command's environment (filtered by E4).
    pub fn new(config: &ExecConfig) -> std::io::Result<Self> {
        Self::with_env(config, std::env::vars_os())
    }

    /// An executor whose commands inherit `base_env` (filtered by E4) instead of the
    /// daemon's environment; tests use it to prove the filter.
    pub fn with_env(
        config: &ExecConfig,
        base_env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> std::io::Result<Self> {
        Self::with_launcher(config, base_env, LocalLauncher)
    }
}

#[async_trait::async_trait]
impl Launcher for LocalLauncher {
    fn kind(&self) -> &'static str {
        "local"
    }

    async fn check_workdir(&self, dir: &Path) -> Result<(), ExecError> {
        check_local_workdir(dir)
    }

    fn command(&self, spec: &ExecSpec, _mark: &str) -> Result<Command, ExecError> {
        let mut cmd = Command::new("bash");
        cmd.arg("-c").arg(&spec.command).current_dir(&spec.workdir);
        Ok(cmd)
    }

    /// A local command is its host process and what it started: nothing of the
    /// launcher's own to hand over.
    fn carries_tasks(&self) -> bool {
        true
    }

    fn files_are_local(&self) -> bool {
        true
    }

    /// Anything the daemon's user may reach: the local executor contains nothing, so
    /// only the policy's rules by path (F7) stand between a call and a file.
    async fn stat_file(
        &self,
        request: &FileRequest,
        _intent: FileIntent,
    ) -> Result<Option<FileStat>, FileError> {
        let path = request.path.clone();
        blocking(move || stat_disk(&path)).await
    }

    async fn read_file(&self, request: &FileRequest) -> Result<crate::exec::FileRead, FileError> {
        let path = request.path.clone();
        let bytes = blocking(move || read_disk(&path)).await?;
        Ok(crate::exec::FileRead {
            bytes,
            containment: None,
        })
    }

    /// Nothing: the local executor contains no file.
    async fn file_containment(
        &self,
        _request: &FileRequest,
        _intent: FileIntent,
    ) -> Result<Option<crate::containment::Containment>, FileError> {
        Ok(None)
    }

    async fn write_file(
        &self,
        request: &FileRequest,
        content: &[u8],
    ) -> Result<WriteOutcome, FileError> {
        let (path, content) = (request.path.clone(), content.to_vec());
        blocking(move || write_disk(&path, &content)).await
    }
}

/// Runs a file operation off the async threads (a slow disk must not stall them).
pub(crate) async fn blocking<T: Send + 'static>(
    op: impl FnOnce() -> Result<T, FileError> + Send + 'static,
) -> Result<T, FileError> {
    tokio::task::spawn_blocking(op)
        .await
        .map_err(|e| FileError::Unavailable(format!("the file operation failed: {e}")))?
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> FileError + '_ {
    move |e| FileError::Io {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// The file's size and kind, following links (`None`: nothing there).
pub(crate) fn stat_disk(path: &Path) -> Result<Option<FileStat>, FileError> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(Some(FileStat {
            len: meta.len(),
            regular: meta.is_file(),
            containment: None,
        })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path)(e)),
    }
}

/// Reads a file of the daemon's disk, following links (F8's bounds).
pub(crate) fn read_disk(path: &Path) -> Result<Option<Vec<u8>>, FileError> {
    match std::fs::File::open(path) {
        Ok(file) => read_opened(file, path).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path)(e)),
    }
}

/// The content of an opened file, refused when it is no regular file or larger than
/// [`MAX_FILE_BYTES`]. `path` names it in messages.
pub(crate) fn read_opened(file: std::fs::File, path: &Path) -> Result<Vec<u8>, FileError> {
    use std::io::Read;
    let meta = file.metadata().map_err(io_error(path))?;
    if meta.is_dir() {
        return Err(FileError::IsDirectory(path.to_path_buf()));
    }
    if !meta.is_file() {
        return Err(FileError::NotRegular(path.to_path_buf()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            len: meta.len(),
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error(path))?;
    Ok(bytes)
}

/// Writes a file of the daemon's disk atomically; a link is written where it points,
/// so it stays a link (F5).
pub(crate) fn write_disk(path: &Path, content: &[u8]) -> Result<WriteOutcome, FileError> {
    let target = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::canonicalize(path).map_err(io_error(path))?
        }
        _ => path.to_path_buf(),
    };
    let (dir, name) = split(&target, path)?;
    let dir_fd = match std::fs::File::open(&dir) {
        Ok(f) if f.metadata().is_ok_and(|m| m.is_dir()) => OwnedFd::from(f),
        _ => {
            return Err(FileError::NoDirectory {
                path: path.to_path_buf(),
                dir,
            });
        }
    };
    replace_in(&dir_fd, &name, content, path)
}

/// `path`'s directory and last name; `shown` names it in messages.
pub(crate) fn split(path: &Path, shown: &Path) -> Result<(PathBuf, OsString), FileError> {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => Ok((dir.to_path_buf(), name.to_os_string())),
        _ => Err(FileError::Io {
            path: shown.to_path_buf(),
            reason: "no parent directory".into(),
        }),
    }
}

/// Replaces (or creates) `name` in the directory `dir` atomically: a new file beside
/// it, its mode kept whole, synced, renamed over it. Everything is relative to the
/// directory's descriptor and no link is followed at `name`: a caller that checked the
/// directory writes exactly there. `shown` names the file in messages.
pub(crate) fn replace_in(
    dir: &OwnedFd,
    name: &OsStr,
    content: &[u8],
    shown: &Path,
) -> Result<WriteOutcome, FileError> {
    use nix::fcntl::{AtFlags, OFlag, openat, renameat};
    use nix::sys::stat::{Mode, fchmod, fstatat};
    use std::io::Write;
    let fail = |e: nix::Error| FileError::Io {
        path: shown.to_path_buf(),
        reason: std::io::Error::from(e).to_string(),
    };
    let existing = match fstatat(dir.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Some(st),
        Err(nix::Error::ENOENT) => None,
        Err(e) => return Err(fail(e)),
    };
    if let Some(st) = &existing {
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG | libc::S_IFLNK => {}
            libc::S_IFDIR => return Err(FileError::IsDirectory(shown.to_path_buf())),
            _ => return Err(FileError::NotRegular(shown.to_path_buf())),
        }
    }
    let mode = existing
        .filter(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG)
        .map(|st| st.st_mode & 0o7777);
    let mut temp = OsString::from(".");
    temp.push(name);
    temp.push(format!(".dsh-{}", uuid::Uuid::new_v4().simple()));
    let temp = PathBuf::from(temp);
    let fd = openat(
        dir.as_fd(),
        &temp,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(mode.unwrap_or(0o666)),
    )
    .map_err(fail)?;
    let written = (|| {
        if let Some(mode) = mode {
            // O_CREAT's mode is masked by the umask; the old file's mode is kept whole.
            fchmod(fd.as_fd(), Mode::from_bits_truncate(mode))?;
        }
        let mut file = std::fs::File::from(fd);
        file.write_all(content).map_err(io_to_nix)?;
        file.sync_all().map_err(io_to_nix)?;
        renameat(dir.as_fd(), &temp, dir.as_fd(), name)
    })();
    if let Err(e) = written {
        let _ = nix::unistd::unlinkat(dir.as_fd(), &temp, nix::unistd::UnlinkatFlags::NoRemoveDir);
        return Err(fail(e));
    }
    Ok(WriteOutcome {
        created: existing.is_none(),
        containment: None,
    })
}

fn io_to_nix(e: std::io::Error) -> nix::Error {
    e.raw_os_error()
        .map(nix::Error::from_raw)
        .unwrap_or(nix::Error::EIO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f5_disk_writes_are_atomic_and_keep_the_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.sh");
        std::fs::write(&file, "old").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o750)).unwrap();
        write_disk(&file, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o750);
        // Nothing left beside it.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // A link stays a link; its target changes.
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        write_disk(&link, b"via link").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "via link");
        assert!(
            write_disk(&dir.path().join("no/such/f"), b"x")
                .unwrap_err()
                .to_string()
                .contains("does not exist")
        );
    }

    #[test]
    fn f8_disk_reads_refuse_what_is_not_a_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_disk(&dir.path().join("none")).unwrap(), None);
        assert!(matches!(
            read_disk(dir.path()),
            Err(FileError::IsDirectory(_))
        ));
    }
}
