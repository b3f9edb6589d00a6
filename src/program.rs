//! dsh's own program as it was started: its path, arguments and binary, recorded once.
//!
//! A leaf (it imports nothing of the crate), because three layers ask for the same
//! path: the upgrade (what it checks and executes), `initialize` (the terminal-auth
//! command offered to editors) and the ssh executor (what the helper uploads). Once a
//! daemon was rolled back, or rebuilt under it, the kernel names the running file
//! `.../dsh (deleted)`; recording the path at the first start and carrying it across
//! every hand-over keeps all three on the file at the place the person installed.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::OnceLock;

/// This program as started: its path (the binary an upgrade runs is the file now at
/// this path), its arguments, and its binary held open (what a roll back runs, even
/// once the file at the path was replaced).
pub struct Started {
    pub path: PathBuf,
    pub args: Vec<OsString>,
    binary: Option<OwnedFd>,
}

static STARTED: OnceLock<Started> = OnceLock::new();

/// Records this program (see [`Started`]); call first thing in the daemon, with the
/// path a hand-over carried when there is one: the path is resolved once, at the
/// first start, and kept across every upgrade and roll back.
pub fn remember(carried_path: Option<&[u8]>) {
    STARTED.get_or_init(|| Started {
        path: carried_path
            .map(|p| PathBuf::from(OsString::from_vec(p.to_vec())))
            .unwrap_or_else(resolve_path),
        args: std::env::args_os().collect(),
        binary: std::fs::File::open("/proc/self/exe")
            .ok()
            .map(OwnedFd::from),
    });
}

/// Where this program is, asked of the kernel now.
fn resolve_path() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"))
}

/// The path of dsh's own program: the one accessor for what an upgrade checks and
/// executes, what `initialize` offers as the terminal-auth command and what the ssh
/// helper uploads. In the daemon it is the path recorded when it first started
/// ([`remember`]), so neither a rebuild under a running daemon nor a roll back changes
/// it; elsewhere it is resolved now.
pub fn path() -> PathBuf {
    STARTED
        .get()
        .map(|p| p.path.clone())
        .unwrap_or_else(resolve_path)
}

/// The descriptor of this program's binary, held open since it started: a new program
/// that cannot take over executes it again (the upgrade's roll back).
pub fn binary_fd() -> Result<RawFd, ProgramError> {
    recorded()?
        .binary
        .as_ref()
        .map(|fd| fd.as_raw_fd())
        .ok_or(ProgramError::BinaryNotKept)
}

/// The arguments this program was started with, as a hand-over carries them.
pub fn args() -> Vec<Vec<u8>> {
    recorded()
        .map(|p| p.args.iter().map(|a| a.as_bytes().to_vec()).collect())
        .unwrap_or_default()
}

/// What [`remember`] recorded; an error in a process that never called it.
pub fn recorded() -> Result<&'static Started, ProgramError> {
    STARTED.get().ok_or(ProgramError::NotRecorded)
}

/// Why this program cannot say what an upgrade needs of it: the upgrade is refused (or
/// rolled back) with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProgramError {
    /// [`remember`] was never called: not a daemon.
    #[error("this daemon did not record how it was started")]
    NotRecorded,
    /// `/proc/self/exe` could not be opened at the start: nothing to roll back to.
    #[error("this daemon could not keep its own binary open")]
    BinaryNotKept,
}
