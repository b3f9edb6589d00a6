//! `dsh sandbox-init`: the first program inside every sandbox, run by bwrap in
//! place of the command. It installs the seccomp floor (E8) and sets
//! no_new_privs, then becomes the command with `execvp`, so it costs one exec and
//! leaves no process behind. It is dsh's own binary so that whatever must run inside
//! the sandbox before the floor closes (the network issue's forwarder) has a home.
//!
//! Its command line is private to the launcher: `dsh sandbox-init [--allow-unix-sockets]
//! -- PROGRAM ARGS...`. It is dispatched before the CLI parser and the async runtime
//! start, so the init is a single-threaded process when it installs the filter.

use super::seccomp::{self, Floor};
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

/// The subcommand that selects the init (never shown in `dsh --help`).
pub const SUBCOMMAND: &str = "sandbox-init";

/// How the launcher asks for [`Floor::allow_unix_sockets`].
pub const ALLOW_UNIX_SOCKETS: &str = "--allow-unix-sockets";

/// The init's arguments, after [`SUBCOMMAND`], as the launcher writes them.
pub fn arguments(floor: Floor) -> Vec<OsString> {
    let mut args = vec![OsString::from(SUBCOMMAND)];
    if floor.allow_unix_sockets {
        args.push(ALLOW_UNIX_SOCKETS.into());
    }
    args.push("--".into());
    args
}

/// Runs the init with the arguments after [`SUBCOMMAND`]; returns only on failure,
/// with the exit code to end with (126, as a shell does for a command it cannot
/// run), after saying why on stderr.
pub fn run(args: impl Iterator<Item = OsString>) -> i32 {
    match prepare(args) {
        Ok(argv) => {
            let err = exec(&argv);
            eprintln!("dsh sandbox init: cannot run {:?}: {err}", argv[0]);
        }
        Err(e) => eprintln!("dsh sandbox init: {e}"),
    }
    126
}

fn prepare(args: impl Iterator<Item = OsString>) -> Result<Vec<CString>, String> {
    let mut floor = Floor::default();
    let mut args = args.into_iter();
    for arg in args.by_ref() {
        match arg.to_str() {
            Some("--") => break,
            Some(ALLOW_UNIX_SOCKETS) => floor.allow_unix_sockets = true,
            _ => return Err(format!("unknown argument {arg:?}")),
        }
    }
    let argv = args
        .map(|a| CString::new(a.as_bytes()).map_err(|_| "an argument holds a NUL byte".to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    if argv.is_empty() {
        return Err("no command to run".into());
    }
    seccomp::install(floor)?;
    Ok(argv)
}

fn exec(argv: &[CString]) -> std::io::Error {
    let mut pointers: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    pointers.push(std::ptr::null());
    // SAFETY: NUL-terminated strings and a null-terminated array that outlive the call.
    unsafe { libc::execvp(pointers[0], pointers.as_ptr()) };
    std::io::Error::last_os_error()
}
