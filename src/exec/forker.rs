//! The one thread that forks every command's host process, and that replaces the
//! daemon's program on `dsh upgrade`.
//!
//! Why one thread: a host process carries the parent-death signal (`spawn`), and the
//! kernel ties that signal to the *thread* that created the child, not to the process.
//! An `execve` ends every thread but the one that calls it, so a command forked from a
//! tokio worker would be SIGKILLed by an upgrade. With every fork and the `execve` on
//! the same thread (the daemon's main thread, which the `execve` keeps as the new
//! program's main thread), a running command outlives an upgrade and still dies with
//! the daemon. The daemon's `main` runs the runtime on another thread and serves jobs
//! here ([`serve`]); elsewhere (the CLI, unit tests) there is no such thread and a job
//! runs where it is asked.
//!
//! A job is a closure run to its end on the forking thread while the asking thread
//! waits for its result: a `clone(CLONE_VFORK)` takes microseconds, and the asking
//! thread was going to make that system call itself.

use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, Sender, sync_channel};

/// What the forking thread is asked to do.
pub enum Message {
    /// Run this to its end.
    Run(Box<dyn FnOnce() + Send>),
    /// Stop serving (the daemon is done).
    Stop,
}

static FORKER: OnceLock<Sender<Message>> = OnceLock::new();

/// Makes the calling thread the forking thread: jobs [`run`] from any thread are run
/// here, until [`stop`]. Call once, on the main thread.
pub fn serve(jobs: Receiver<Message>) {
    while let Ok(Message::Run(job)) = jobs.recv() {
        job();
    }
}

/// Where jobs go from now on (the sender of [`serve`]'s receiver).
pub fn install(jobs: Sender<Message>) {
    let _ = FORKER.set(jobs);
}

/// Ends [`serve`].
pub fn stop() {
    if let Some(jobs) = FORKER.get() {
        let _ = jobs.send(Message::Stop);
    }
}

/// Runs `job` on the forking thread when there is one, else on this thread, and
/// returns its result; `None` when the forking thread has stopped.
pub fn run<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let Some(jobs) = FORKER.get() else {
        return Some(job());
    };
    let (done, result) = sync_channel(1);
    let sent = jobs.send(Message::Run(Box::new(move || {
        let _ = done.send(job());
    })));
    sent.ok()?;
    result.recv().ok()
}
