//! `dsh upgrade` / `dsh restart`: the daemon replaces its own program with the one now
//! on disk, in the same process, without an editor noticing.
//!
//! Why the same process (`execve` of the new binary) rather than a hand-over to a new
//! process over `SCM_RIGHTS`: everything a command starts is a child (or, through the
//! subreaper, an adopted orphan) of the daemon's process, and only a parent can reap
//! its children and read their exit status. A new process would inherit none of them.
//! `execve` keeps the pid, the children, the subreaper mark and every descriptor not
//! marked close-on-exec, so what the old program hands over is only descriptors and a
//! description of them: the listening socket, each editor connection (its socket, or
//! the editor's own pipes and the launcher's lifeline that `dsh acp` handed over), and
//! what the ACP side needs to serve each again ([`crate::acp::ConnectionState`]).
//!
//! The order (`Daemon`'s serve loop runs it):
//! 1. refuse at once what cannot be carried: a background task still running that its
//!    executor cannot let go (`BashExecutor::tasks_kept`: the local executor carries
//!    them, in [`Handover::tasks`], as the sandbox's pair does for the calls it let out;
//!    tasks in the sandbox and over ssh are not carried yet), or a new program that
//!    does not answer [`check`] (it reads this state format and the config as it is now);
//! 2. freeze every connection ([`crate::rpc::serve_freezable`]): requests in flight
//!    finish, new ones stay unread (up to a bound; the rest waits in the descriptor);
//!    turns get `[daemon] upgrade_drain_secs`, then every request in flight is
//!    cancelled and the last wait is bounded (the daemon accepts meanwhile, and freezes
//!    what it accepts at once);
//! 3. stop hook and MCP servers (the next program starts them again), let the
//!    executor's running tasks go (their processes stay children of this pid), write the
//!    [`Handover`] into a memory file and `execve` with its descriptor in
//!    `DSH_HANDOVER`;
//! 4. the new program ([`take`]) reads it, builds the daemon from the config, and
//!    serves the listener and every connection again, each with its unread bytes, and
//!    the executor supervises the carried tasks again (their output neither lost nor
//!    repeated).
//!
//! A failure never loses the daemon: before the `execve` (refused, or `execve` itself
//! failed), the old program serves the frozen connections again in place; after it,
//! the new program that cannot take over executes the old binary again ([`roll_back`],
//! from a descriptor opened at start, so a replaced file does not matter) with the same
//! state and the reason, and that one serves everything on. Only a new program that
//! crashes before it can roll back loses the connections (the editor sees its agent
//! end; nothing is left running: the subreaper's children die with their pipes).

use crate::acp::UpgradeOutcome;
use serde::{Deserialize, Serialize};
use std::ffi::{CString, OsString};
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

/// The version of [`Handover`]'s layout this program writes. A program refuses a
/// hand-over of a format it does not read ([`check`] says so before anything is
/// frozen). 2: a connection's unread bytes are base64 ([`CarriedBytes`]), and the
/// program's path is carried ([`Handover::program`]).
pub const FORMAT: u32 = 2;

/// The oldest format this program still reads (and writes back on a roll back to a
/// program of that format).
pub const OLDEST_FORMAT: u32 = 1;

/// The environment variable that carries the hand-over's descriptor.
pub const HANDOVER_VAR: &str = "DSH_HANDOVER";

/// Everything one daemon program hands to the next.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handover {
    pub format: u32,
    /// The version handing over.
    pub from_version: String,
    /// The arguments the daemon was started with (the new program gets the same).
    pub args: Vec<Vec<u8>>,
    /// This daemon's program path as first resolved ([`crate::program::path`]): after a roll
    /// back the program runs from a file that is gone, and its own path reads
    /// `.../dsh (deleted)`. Absent from format 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<CarriedBytes>,
    /// The config in force, as TOML: what the old program serves on with after a roll
    /// back (the file may be what the new program could not read).
    pub config: String,
    /// The listening socket.
    pub listener: RawFd,
    /// The old program's binary, for a roll back.
    pub old_program: RawFd,
    pub connections: Vec<CarriedConnection>,
    /// The running background tasks, let go by the executor.
    #[serde(default)]
    pub tasks: Vec<CarriedTask>,
    /// Set when a new program gave the hand-over back: why.
    #[serde(default)]
    pub rolled_back: Option<String>,
}

/// One editor connection in a [`Handover`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CarriedConnection {
    pub ends: Ends,
    /// Bytes read from the editor and not yet handled.
    pub unread: CarriedBytes,
    /// The ACP side's [`crate::acp::ConnectionState`].
    pub state: serde_json::Value,
}

/// Bytes in a [`Handover`]: a base64 string (format 2; a JSON array of numbers took
/// up to four bytes per byte), and read from format 1's array of numbers too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CarriedBytes(pub Vec<u8>);

impl Serialize for CarriedBytes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use base64::Engine;
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for CarriedBytes {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Format 2's string, or format 1's array of numbers.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Shape {
            Base64(String),
            Numbers(Vec<u8>),
        }
        match Shape::deserialize(deserializer)? {
            Shape::Numbers(bytes) => Ok(Self(bytes)),
            Shape::Base64(text) => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map(Self)
                    .map_err(serde::de::Error::custom)
            }
        }
    }
}

/// A running background task in a [`Handover`] (see [`crate::exec::HandedTask`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CarriedTask {
    pub id: crate::exec::TaskId,
    pub pid: i32,
    pub stdout: Option<RawFd>,
    pub stderr: Option<RawFd>,
    pub stdout_read: u64,
    pub stderr_read: u64,
}

impl CarriedTask {
    /// The task as the hand-over names it; its descriptors stay owned by `task`.
    pub fn of(task: &crate::exec::HandedTask) -> Self {
        Self {
            id: task.id,
            pid: task.pid,
            stdout: task.stdout.as_ref().map(|fd| fd.as_raw_fd()),
            stderr: task.stderr.as_ref().map(|fd| fd.as_raw_fd()),
            stdout_read: task.stdout_read,
            stderr_read: task.stderr_read,
        }
    }

    /// The task for the executor to adopt, owning its descriptors and the booking
    /// [`take`] made.
    ///
    /// # Safety
    /// `self` comes from the [`Handover`] this program took, and is taken once.
    pub unsafe fn into_handed(self) -> crate::exec::HandedTask {
        let booking = BOOKED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.pid);
        // SAFETY: the caller's promise.
        let own = |fd: Option<RawFd>| fd.map(|fd| unsafe { owned(fd) });
        crate::exec::HandedTask {
            id: self.id,
            pid: self.pid,
            stdout: own(self.stdout),
            stderr: own(self.stderr),
            stdout_read: self.stdout_read,
            stderr_read: self.stderr_read,
            booking,
        }
    }
}

/// The handed-over tasks' host processes, booked as soon as the hand-over is read (so
/// the orphan reaper, which starts with the daemon, never takes one's exit) until the
/// executor adopts them.
static BOOKED: std::sync::Mutex<std::collections::BTreeMap<i32, crate::exec::children::Owned>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// A connection's descriptors.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Ends {
    /// ACP on the socket itself.
    Socket { fd: RawFd },
    /// ACP on the editor's pipes, the socket kept as the launcher's lifeline.
    Pipes {
        input: RawFd,
        output: RawFd,
        lifeline: RawFd,
    },
}

impl Ends {
    fn fds(&self) -> Vec<RawFd> {
        match *self {
            Ends::Socket { fd } => vec![fd],
            Ends::Pipes {
                input,
                output,
                lifeline,
            } => vec![input, output, lifeline],
        }
    }
}

impl Handover {
    /// Every descriptor it names, each kept across the `execve`.
    fn fds(&self) -> Vec<RawFd> {
        let mut fds = vec![self.listener, self.old_program];
        for c in &self.connections {
            fds.extend(c.ends.fds());
        }
        for t in &self.tasks {
            fds.extend(t.stdout.iter().chain(t.stderr.iter()));
        }
        fds
    }

    /// How the program that reads it should say the upgrade went.
    pub fn outcome(&self) -> UpgradeOutcome {
        match &self.rolled_back {
            Some(reason) => UpgradeOutcome::RolledBack {
                reason: reason.clone(),
            },
            None => UpgradeOutcome::Upgraded {
                from_version: self.from_version.clone(),
            },
        }
    }
}

/// Asks the program now on disk whether it can take over: it must read [`FORMAT`] and
/// the config as the daemon's arguments find it now (`serve ... --handover-check N`),
/// within 30 s. Nothing is frozen yet, so a refusal costs nothing.
pub async fn check() -> Result<(), CheckRefused> {
    let program = crate::program::recorded()?;
    let mut cmd = tokio::process::Command::new(&program.path);
    cmd.args(program.args.iter().skip(1))
        .args(["--handover-check", &FORMAT.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child =
        crate::exec::children::spawn(&mut cmd).map_err(|source| CheckRefused::NotStarted {
            path: program.path.clone(),
            source,
        })?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let answered = async {
        use tokio::io::AsyncReadExt;
        let (mut out, mut err) = (Vec::new(), Vec::new());
        if let (Some(mut stdout), Some(mut stderr)) = (stdout, stderr) {
            let _ = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
        }
        (child.wait().await, err)
    };
    // On a timeout the child is dropped, which kills it (`kill_on_drop`).
    let (status, stderr) = tokio::time::timeout(std::time::Duration::from_secs(30), answered)
        .await
        .map_err(|_| CheckRefused::NoAnswer)?;
    let status = status.map_err(CheckRefused::Lost)?;
    if status.success() {
        return Ok(());
    }
    Err(CheckRefused::CannotTakeOver {
        path: program.path.clone(),
        status,
        said: String::from_utf8_lossy(&stderr).trim().to_string(),
    })
}

/// Why the program on disk is not taken over ([`check`]): nothing was frozen, and
/// `dsh upgrade` prints it.
#[derive(Debug, thiserror::Error)]
pub enum CheckRefused {
    /// This daemon cannot say what it runs.
    #[error(transparent)]
    Program(#[from] crate::program::ProgramError),
    #[error("the program on disk ({}) cannot be started: {source}", .path.display())]
    NotStarted {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the program on disk did not answer the hand-over check in 30 s")]
    NoAnswer,
    /// Waiting for its answer failed.
    #[error("the hand-over check failed: {0}")]
    Lost(std::io::Error),
    /// It answered no: it does not read this hand-over's format or the config as it
    /// is now, or it is not a dsh at all; `said` is its stderr.
    #[error(
        "the program on disk ({}) cannot take over ({status}): {}",
        .path.display(),
        if .said.is_empty() { "it said nothing" } else { .said.as_str() }
    )]
    CannotTakeOver {
        path: PathBuf,
        status: std::process::ExitStatus,
        said: String,
    },
}

/// A duplicate of `fd`, closed on `execve` until [`exec`] lets it through.
pub fn keep(fd: &impl std::os::fd::AsFd) -> std::io::Result<OwnedFd> {
    fd.as_fd().try_clone_to_owned()
}

/// Replaces this program with the one on disk, handing `handover` over. Returns only
/// when the `execve` failed, with why; the descriptors are then as they were.
pub fn exec(handover: &Handover) -> String {
    match crate::program::recorded() {
        Ok(program) => exec_program(program.path.clone(), program.args.clone(), handover),
        Err(e) => e.to_string(),
    }
}

/// The new program could not take over: executes the old binary again with the same
/// state and `reason`. Returns only if that failed.
pub fn roll_back(mut handover: Handover, reason: String) -> String {
    tracing::error!(%reason, "this program cannot take over; handing back to the one before");
    handover.rolled_back = Some(reason);
    let path = PathBuf::from(format!("/proc/self/fd/{}", handover.old_program));
    let args: Vec<OsString> = handover
        .args
        .iter()
        .map(|a| OsString::from_vec(a.clone()))
        .collect();
    exec_program(path, args, &handover)
}

/// Executes `path` with the hand-over, on the forking thread (`exec::forker`: the
/// commands it forked keep their parent thread, so their parent-death signal does not
/// fire). Returns why when it could not.
fn exec_program(path: PathBuf, args: Vec<OsString>, handover: &Handover) -> String {
    let file = match write_handover(handover) {
        Ok(file) => file,
        Err(e) => return format!("cannot write the hand-over: {e}"),
    };
    let fds = handover.fds();
    crate::exec::forker::run(move || exec_now(&path, &args, file, fds))
        .unwrap_or_else(|| "the daemon is stopping".to_string())
}

fn exec_now(
    path: &std::path::Path,
    args: &[OsString],
    file: std::fs::File,
    mut fds: Vec<RawFd>,
) -> String {
    let cstring = |bytes: &[u8]| CString::new(bytes).map_err(|e| e.to_string());
    let prepared = (|| -> Result<(CString, Vec<CString>, Vec<CString>), String> {
        let path = cstring(path.as_os_str().as_bytes())?;
        let args = args
            .iter()
            .map(|a| cstring(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut env: Vec<CString> = std::env::vars_os()
            .filter(|(k, _)| k != HANDOVER_VAR)
            .map(|(k, v)| {
                let mut pair = k.into_vec();
                pair.push(b'=');
                pair.extend(v.into_vec());
                cstring(&pair)
            })
            .collect::<Result<_, _>>()?;
        env.push(cstring(
            format!("{HANDOVER_VAR}={}", file.as_raw_fd()).as_bytes(),
        )?);
        Ok((path, args, env))
    })();
    let (path, args, env) = match prepared {
        Ok(p) => p,
        Err(e) => return format!("cannot prepare the new program's arguments: {e}"),
    };
    fds.push(file.as_raw_fd());
    for &fd in &fds {
        set_cloexec(fd, false);
    }
    let error = nix::unistd::execve(&path, &args, &env)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    for &fd in &fds {
        set_cloexec(fd, true);
    }
    format!("cannot execute {}: {error}", path.to_string_lossy())
}

fn set_cloexec(fd: RawFd, on: bool) {
    // SAFETY: F_GETFD/F_SETFD on a descriptor this process holds; no memory involved.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        if flags >= 0 {
            let flags = if on {
                flags | libc::FD_CLOEXEC
            } else {
                flags & !libc::FD_CLOEXEC
            };
            libc::fcntl(fd, libc::F_SETFD, flags);
        }
    }
}

/// The hand-over in a memory file (never on disk: it may hold an MCP server's secrets).
fn write_handover(handover: &Handover) -> std::io::Result<std::fs::File> {
    let fd = nix::sys::memfd::memfd_create(c"dsh-handover", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
        .map_err(std::io::Error::from)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&handover_bytes(handover).map_err(std::io::Error::other)?)?;
    Ok(file)
}

/// The hand-over as the program that reads it reads it: in its own format (a roll back
/// gives a hand-over back in the format it came in, to a program that may read no
/// other).
fn handover_bytes(handover: &Handover) -> serde_json::Result<Vec<u8>> {
    let mut value = serde_json::to_value(handover)?;
    if handover.format < 2 {
        // Format 1: unread bytes as an array of numbers, no program path.
        if let Some(object) = value.as_object_mut() {
            object.remove("program");
        }
        let connections = value
            .get_mut("connections")
            .and_then(|c| c.as_array_mut())
            .into_iter()
            .flatten();
        for (connection, carried) in connections.zip(&handover.connections) {
            connection["unread"] = serde_json::to_value(&carried.unread.0)?;
        }
    }
    serde_json::to_vec(&value)
}

/// The hand-over this program was started with, if any: read from the descriptor in
/// [`HANDOVER_VAR`], which is then closed and removed from the environment (commands
/// never see it). Call before any thread starts. `Err` with why when there is one but
/// it cannot be read at all (then there is nothing to roll back to either).
pub fn take() -> Option<Result<Handover, HandoverError>> {
    let value = std::env::var_os(HANDOVER_VAR)?;
    // SAFETY: called at the start of `main`, before any other thread exists.
    unsafe { std::env::remove_var(HANDOVER_VAR) };
    let fd: RawFd = match value.to_str().and_then(|v| v.parse().ok()) {
        Some(fd) if fd > 2 => fd,
        _ => return Some(Err(HandoverError::NotADescriptor)),
    };
    // SAFETY: the previous program put this descriptor here for us alone.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    set_cloexec(fd, true);
    let mut text = Vec::new();
    if let Err(e) = file.rewind().and_then(|()| file.read_to_end(&mut text)) {
        return Some(Err(HandoverError::Unreadable(e)));
    }
    Some(
        serde_json::from_slice::<Handover>(&text)
            .map_err(HandoverError::Malformed)
            .inspect(|handover| {
                for fd in handover.fds() {
                    set_cloexec(fd, true);
                }
                let mut booked = BOOKED.lock().unwrap_or_else(|p| p.into_inner());
                for task in &handover.tasks {
                    booked.insert(task.pid, crate::exec::children::starting().owned(task.pid));
                }
            }),
    )
}

/// Why [`take`] found a hand-over it cannot use: this program then stops (there is
/// nothing to roll back to either), saying so.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    #[error("{} is not a descriptor", HANDOVER_VAR)]
    NotADescriptor,
    #[error("cannot read the hand-over: {0}")]
    Unreadable(std::io::Error),
    #[error("the hand-over is unreadable: {0}")]
    Malformed(serde_json::Error),
}

/// Whether this program reads hand-overs of `format` ([`check`]'s question).
pub fn reads_format(format: u32) -> Result<(), UnknownFormat> {
    if (OLDEST_FORMAT..=FORMAT).contains(&format) {
        Ok(())
    } else {
        Err(UnknownFormat { format })
    }
}

/// A hand-over format this program does not read ([`reads_format`]): the check answers
/// no, and the upgrade is refused before anything is frozen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "this dsh ({}) reads hand-overs of format {} to {}, not {}",
    env!("CARGO_PKG_VERSION"),
    OLDEST_FORMAT,
    FORMAT,
    .format
)]
pub struct UnknownFormat {
    pub format: u32,
}

/// Takes ownership of a descriptor named in a hand-over.
///
/// # Safety
/// `fd` must come from the [`Handover`] this program took, and be taken once.
pub unsafe fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: the caller's promise.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state reads back as it was written (the memory file is the only copy), and a
    /// format this program does not read is refused with both numbers.
    #[test]
    fn a_handover_reads_back_and_another_format_is_refused() {
        let handover = Handover {
            format: FORMAT,
            from_version: "0.1.0".into(),
            args: vec![b"dsh".to_vec(), b"serve".to_vec()],
            program: Some(CarriedBytes(b"/opt/dsh/bin/dsh".to_vec())),
            config: String::new(),
            listener: 7,
            old_program: 8,
            connections: vec![CarriedConnection {
                ends: Ends::Pipes {
                    input: 9,
                    output: 10,
                    lifeline: 11,
                },
                unread: CarriedBytes(b"{\"half".to_vec()),
                state: serde_json::json!({"initialized": true}),
            }],
            tasks: vec![CarriedTask {
                id: "bash-3".parse().unwrap(),
                pid: 4242,
                stdout: Some(12),
                stderr: None,
                stdout_read: 5,
                stderr_read: 0,
            }],
            rolled_back: None,
        };
        let mut file = write_handover(&handover).unwrap();
        let mut text = Vec::new();
        file.rewind().unwrap();
        file.read_to_end(&mut text).unwrap();
        let back: Handover = serde_json::from_slice(&text).unwrap();
        assert_eq!(back.fds(), vec![7, 8, 9, 10, 11, 12]);
        assert_eq!(back.tasks[0].id.to_string(), "bash-3");
        assert_eq!(back.connections[0].unread.0, b"{\"half");
        assert_eq!(
            back.outcome(),
            UpgradeOutcome::Upgraded {
                from_version: "0.1.0".into()
            }
        );
        assert!(reads_format(FORMAT).is_ok());
        let refused = reads_format(FORMAT + 1).unwrap_err().to_string();
        assert!(
            refused.contains(&format!(
                "format {OLDEST_FORMAT} to {FORMAT}, not {}",
                FORMAT + 1
            )),
            "{refused}"
        );
    }

    /// Format 2 carries bytes as base64 and the program's path; format 1 (an older
    /// daemon handing over to this one) is still read, and a hand-over that came in
    /// format 1 goes back in format 1 (a roll back to a program that reads no other).
    #[test]
    fn unread_bytes_are_base64_and_format_1_is_read_and_written_back() {
        let mut handover = Handover {
            format: FORMAT,
            from_version: "0.1.0".into(),
            args: vec![b"dsh".to_vec()],
            program: Some(CarriedBytes(b"/opt/dsh/bin/dsh".to_vec())),
            config: String::new(),
            listener: 7,
            old_program: 8,
            connections: vec![CarriedConnection {
                ends: Ends::Socket { fd: 9 },
                unread: CarriedBytes(vec![0xff, b'{', 0x00, b'\n']),
                state: serde_json::Value::Null,
            }],
            tasks: Vec::new(),
            rolled_back: None,
        };
        let v2: serde_json::Value =
            serde_json::from_slice(&handover_bytes(&handover).unwrap()).unwrap();
        assert_eq!(v2["connections"][0]["unread"], "/3sACg==");
        assert_eq!(v2["program"], "L29wdC9kc2gvYmluL2RzaA==");

        handover.format = 1;
        let v1 = handover_bytes(&handover).unwrap();
        let v1_value: serde_json::Value = serde_json::from_slice(&v1).unwrap();
        assert_eq!(
            v1_value["connections"][0]["unread"],
            serde_json::json!([255, 123, 0, 10])
        );
        assert!(v1_value.get("program").is_none(), "{v1_value}");
        let back: Handover = serde_json::from_slice(&v1).unwrap();
        assert_eq!(back.connections[0].unread.0, vec![0xff, b'{', 0x00, b'\n']);
        assert_eq!(back.program, None);
        assert!(reads_format(1).is_ok());
    }
}
