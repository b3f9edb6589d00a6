//! A hold on the sandbox's walks of a command's roots, for the tests that show they
//! never hold an async worker of the daemon (`tests/it/sandbox_walks.rs`, issue 42 part
//! 5) and that a layout built while another sandbox ends keeps the placeholders its
//! walk saw (the same file). The walks read directories only (issue 40), so nothing a
//! test can put in a root holds them any more (a FIFO did, while they opened files),
//! and the test must still see a walk in progress as an event, not guess it from time.
//!
//! Only in a build with debug assertions (the tests' build; a release build has no hold
//! at all), and only when `DSH_DEBUG_HOLD_WALKS` names a unix socket: a walk whose
//! roots include the socket's directory connects to it, on the thread the walk runs on,
//! and reads until the other end closes: a layout's walk at its end (the roots read,
//! its placeholders not yet taken), the end-of-command check's before it walks. The
//! test, listening there, sees each walk begin as a connection of its own (so two walks
//! in a row are never mistaken for one, as two openers of one FIFO could be) and lets
//! it go on by closing it. Called from inside the walks themselves, so a walk moved
//! onto an async worker takes its hold with it, and the test fails as it should.

use std::path::Path;

/// The environment variable naming the socket.
#[cfg(debug_assertions)]
const HOLD: &str = "DSH_DEBUG_HOLD_WALKS";

/// Holds the calling walk of `roots` as the module says (a release build: nothing).
pub(super) fn hold<'a>(roots: impl IntoIterator<Item = &'a Path>) {
    #[cfg(debug_assertions)]
    {
        let Some(socket) = std::env::var_os(HOLD).map(std::path::PathBuf::from) else {
            return;
        };
        let Some(dir) = socket.parent() else {
            return;
        };
        if roots.into_iter().any(|root| root == dir)
            && let Ok(mut held) = std::os::unix::net::UnixStream::connect(&socket)
        {
            let _ = std::io::copy(&mut held, &mut std::io::sink());
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = roots;
}
