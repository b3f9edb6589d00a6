//! The names of the files a command's output goes to: the one place they are made.
//!
//! Every file lives in `state_dir/spill` (0700), one per stream, created exclusively
//! (`O_EXCL|O_NOFOLLOW`, 0600) by the stream's `Collector`:
//!
//! - a background task's stream: `bash-N.stdout` / `bash-N.stderr`, written from the
//!   task's first byte to its last (so a crash of the daemon loses at most what the
//!   kernel had not handed over yet); the task's record (`records`) names both files,
//!   and the model is told the path only once the stream outgrew memory (T6, T9);
//! - a foreground run's stream, only once it outgrows memory (T6):
//!   `<call id>-<instance>-<n>.stdout` / `.stderr`: the tool call's id (reduced to
//!   `[A-Za-z0-9_-]`, at most 40 characters; `run` without one), eight hex digits of
//!   the executor instance (so a restarted daemon, whose counter starts again, never
//!   meets an old name), and the executor's run counter;
//! - an MCP tool's result past the bound (`mcp/`): `mcp-<server>-<call id>.out`.
//!
//! So a file whose name starts `bash-` is a task's: one a running task writes is named
//! by a `running` record in `state_dir/tasks` (`records`); the rest are foreground
//! runs', written only while their call runs. Short names on purpose: a model types
//! them into its next command (under ssh they are paths on the host, where its
//! commands run).

use super::{OutputStream, TaskId};
use std::path::{Path, PathBuf};

/// The directory of every output file, under the state directory.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("spill")
}

fn suffix(stream: OutputStream) -> &'static str {
    match stream {
        OutputStream::Stdout => "stdout",
        OutputStream::Stderr => "stderr",
    }
}

/// A background task's file for `stream`: `bash-N.stdout`.
pub fn task_file_name(id: TaskId, stream: OutputStream) -> String {
    format!("{id}.{}", suffix(stream))
}

/// A foreground run's spill file for `stream`: `<call id>-<instance>-<n>.stdout`.
pub fn run_file_name(
    call_id: Option<&str>,
    instance: &str,
    n: u64,
    stream: OutputStream,
) -> String {
    let call: String = call_id
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .take(40)
        .collect();
    let call = if call.is_empty() { "run".into() } else { call };
    let instance: String = instance.chars().take(8).collect();
    format!("{call}-{instance}-{n}.{}", suffix(stream))
}

/// Whether `name` in the spill directory is a spill file: the one place that says what
/// the spill directory holds (today every regular file is a stream's spill; a name
/// starting with `.` is left alone for anything else to come). The state directory's
/// sweep judges only these, and the sandbox's file access lets the model read them.
pub fn is_spill_file(name: &str) -> bool {
    !name.starts_with('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_and_say_whose_they_are() {
        assert_eq!(
            task_file_name(TaskId::new(7), OutputStream::Stderr),
            "bash-7.stderr"
        );
        assert_eq!(
            run_file_name(Some("call_0a1"), "3f2a9c1b77", 12, OutputStream::Stdout),
            "call_0a1-3f2a9c1b-12.stdout"
        );
        // A call id is the model's text: nothing of it can leave the directory.
        assert_eq!(
            run_file_name(Some("../../etc/x y"), "ab", 1, OutputStream::Stdout),
            "etcxy-ab-1.stdout"
        );
        assert_eq!(
            run_file_name(None, "ab", 2, OutputStream::Stderr),
            "run-ab-2.stderr"
        );
        assert_eq!(
            run_file_name(Some(&"x".repeat(100)), "ab", 3, OutputStream::Stdout).len(),
            40 + "-ab-3.stdout".len()
        );
    }
}
