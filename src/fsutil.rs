//! Private files and directories: the one place for "a 0700 directory we own, 0600 files,
//! never follow a link someone planted".
//!
//! Everything dsh keeps on disk (session logs, spill files, the audit log, the task-id
//! counter, the daemon log, the socket's directory and its lock) lives under directories
//! made here and in files opened with [`private_file`], so a symlink or FIFO planted at a
//! path is refused instead of followed, and nothing is created readable by others.
//! A leaf: it imports nothing from the crate.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Creates `dir` (and its parents) as a 0700 directory, or checks that an existing one is a
/// real directory (not a symlink) owned by us, and tightens its mode. Errors name the path.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    let named = |e: io::Error, what: &str| {
        io::Error::new(e.kind(), format!("{what} {}: {e}", dir.display()))
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| named(e, "create"))?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| named(e, "inspect"))?;
    if !meta.file_type().is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", dir.display()),
        ));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is owned by another user", dir.display()),
        ));
    }
    if meta.mode() & 0o777 != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| named(e, "chmod"))?;
    }
    Ok(())
}

/// Open options for a private file: created 0600, never through a symlink at the last
/// component (`O_NOFOLLOW`), not inherited by commands (`O_CLOEXEC`). Callers add what
/// they open it for (`append`, `create_new` for `O_EXCL`, ...).
pub fn private_file() -> OpenOptions {
    let mut options = OpenOptions::new();
    options
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options
}

/// Opens an existing file for reading (and appending if `append`) without following a
/// symlink or blocking on a FIFO, and refuses anything that is not a regular file.
pub fn open_regular(path: &Path, append: bool) -> io::Result<File> {
    // O_NONBLOCK only matters for the open of a FIFO planted at the path (which would
    // otherwise wait for a writer); regular files ignore it.
    let file = OpenOptions::new()
        .read(true)
        .append(append)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a regular file", path.display()),
        ));
    }
    Ok(file)
}

/// The text of a small regular file that a command may have written: links are
/// followed (as git follows them), but a FIFO, a device or a directory is refused at
/// once instead of blocking the reader (O_NONBLOCK on the open, the type checked
/// before any read), and at most `limit` bytes are read. The sandbox's walks and the
/// pins read files of a writable root with it, so nothing a command plants can stall
/// the daemon's checks.
pub fn read_small_text(path: &Path, limit: u64) -> io::Result<String> {
    use std::io::Read;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a regular file", path.display()),
        ));
    }
    let mut text = String::new();
    file.take(limit).read_to_string(&mut text)?;
    Ok(text)
}

/// Where `path` (absolute, cleaned) really is: its deepest existing ancestor with every
/// symbolic link followed, and the rest as written. Callers of the policy resolve paths
/// with it (the policy itself touches no disk), so a link inside the cwd that points
/// elsewhere is judged by where it points (F1).
pub fn real_path(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut base = path.to_path_buf();
    loop {
        if let Ok(real) = std::fs::canonicalize(&base) {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (base.file_name().map(|n| n.to_os_string()), base.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                base = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// A memfd that can be sealed, closed on exec: the one way dsh holds bytes that must not
/// change once checked (the seccomp floor, a pinned hook's copy). `exec`: it is meant to
/// run, so it asks for `MFD_EXEC` (Linux 6.3), which `vm.memfd_noexec` would otherwise
/// withhold; an older kernel that does not know the flag gets the plain one.
pub fn sealable_memfd(name: &std::ffi::CStr, exec: bool) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let plain = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    let tries: &[libc::c_uint] = if exec {
        &[plain | libc::MFD_EXEC, plain]
    } else {
        &[plain]
    };
    let mut last = io::Error::from_raw_os_error(libc::EINVAL);
    for &flags in tries {
        // SAFETY: a NUL-terminated name the caller owns for the call.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: memfd_create just returned it; nothing else owns it.
            return Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) });
        }
        last = io::Error::last_os_error();
        if last.raw_os_error() != Some(libc::EINVAL) {
            return Err(last);
        }
    }
    Err(last)
}

/// Seals a memfd from [`sealable_memfd`] against every change (write, shrink, grow, and
/// further seals): what was checked is what is read afterwards.
pub fn seal_all(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: fcntl on a descriptor the caller owns.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o777
    }

    #[test]
    fn a_private_dir_is_made_0700_and_an_open_one_is_tightened() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        ensure_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
    }

    #[test]
    fn a_symlink_or_a_file_is_not_a_private_dir() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("target");
        std::fs::create_dir(&target).unwrap();
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = ensure_private_dir(&link).unwrap_err();
        assert!(err.to_string().contains("link"), "{err}");
        let file = root.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(ensure_private_dir(&file).is_err());
    }

    #[test]
    fn private_files_are_0600_and_never_follow_a_planted_link() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("f");
        private_file()
            .append(true)
            .create(true)
            .open(&path)
            .unwrap();
        assert_eq!(mode(&path), 0o600);
        let elsewhere = root.path().join("elsewhere");
        std::fs::write(&elsewhere, "keep").unwrap();
        let planted = root.path().join("planted");
        std::os::unix::fs::symlink(&elsewhere, &planted).unwrap();
        assert!(
            private_file()
                .append(true)
                .create(true)
                .open(&planted)
                .is_err()
        );
        assert!(open_regular(&planted, false).is_err());
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "keep");
        assert!(open_regular(&path, true).is_ok());
        assert!(open_regular(root.path(), false).is_err());
    }
}
