//! This process's stdin and stdout as one connection's two ends, for the
//! connections an editor makes by starting a process (`dsh serve --stdio`, and
//! `dsh acp` when it carries the bytes itself).
//!
//! tokio's own `stdin()`/`stdout()` do every read and write on a blocking thread
//! (a terminal or a file cannot be polled), which hands each message to another
//! thread and back (BENCHMARKS.md, A1). Editors start agents on pipes, and a pipe
//! can be polled: then both ends are non-blocking pipes on the event loop.

use std::os::fd::AsFd;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

/// The reading end of this process's stdin.
pub type Input = Box<dyn AsyncRead + Unpin + Send>;
/// The writing end of this process's stdout.
pub type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// Stdin and stdout: each a non-blocking pipe when it is a pipe, else tokio's
/// stdio (a terminal, a file, a socket). Making a pipe non-blocking changes only
/// this process's end of it, the other end being the editor's own; except when
/// stderr is the same pipe as stdout (an editor that merged them): stderr would
/// turn non-blocking with it and a message on it could fail, so stdout then stays
/// tokio's.
pub fn stdio() -> (Input, Output) {
    let input = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd);
    let output = (!stdout_is_stderr()).then(|| {
        std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .and_then(pipe::Sender::from_owned_fd)
    });
    let input: Input = match input {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let output: Output = match output {
        Some(Ok(pipe)) => Box::new(pipe),
        _ => Box::new(tokio::io::stdout()),
    };
    (input, output)
}

/// Whether stdout and stderr are the same file (the same pipe, when an editor
/// merged them), so that a change to one's open file is the other's too.
pub fn stdout_is_stderr() -> bool {
    let out = nix::sys::stat::fstat(std::io::stdout().as_fd());
    let err = nix::sys::stat::fstat(std::io::stderr().as_fd());
    matches!((out, err), (Ok(o), Ok(e)) if o.st_dev == e.st_dev && o.st_ino == e.st_ino)
}
