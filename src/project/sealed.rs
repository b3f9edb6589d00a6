//! A pinned program runs from a sealed copy (issue 39).
//!
//! [`super::pins`] checks, before each call of a trusted project's session, that what
//! would run for it is what `dsh trust` pinned. The hooks run later in that call; a
//! file checked by path and then executed by path can be swapped in between (by the
//! very command the call runs, or by one in the background). So a hook's run does
//! not execute a pinned file by its path: it reads it once into a memfd sealed
//! against every change (`F_SEAL_WRITE|SHRINK|GROW|SEAL`), checks the hash of *that
//! copy* against the pin and runs the copy (`/proc/self/fd/N`): what is checked is
//! what runs, by construction.
//!
//! Which words: every word of a hook's argv that names an existing regular file
//! (relative to the directory the hook runs in) inside a pinned project, a whole
//! argument or a word of a shell line (`sh -c '"$CLAUDE_PROJECT_DIR"/x.sh'`, split
//! as the pins' survey splits it). A pinned one is replaced by its copy's path; one
//! the pins do not name as a file is refused (a file of a pinned project that nobody
//! reviewed does not run). What the line computes at run time (another variable, a
//! path built by a command) is not a word dsh can know: the per-call check holds
//! it, the check-to-exec window stays open for it (said in docs/).
//!
//! What the program sees: `$0` (or the interpreter's script argument) is
//! `/proc/self/fd/N`, not the project's path; the first copy's original path is in
//! `DSH_HOOK_SCRIPT`, and the working directory is what it was (the session's), so
//! relative paths resolve as before, but a script that finds its siblings through
//! `dirname "$0"` must use `$DSH_HOOK_SCRIPT` (or `$CLAUDE_PROJECT_DIR`) instead.

use super::pins::{self, Content};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// The largest program a hook's run copies (a compiled hook of a few MiB fits).
const MAX_PROGRAM_BYTES: u64 = 256 * 1024 * 1024;

/// Why a hook naming a file of a pinned project does not run. The hook fails with it
/// (which denies where the hook decides).
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The pins cannot be read: nothing can be checked.
    #[error("the pins cannot be read: {0}")]
    Store(String),
    /// The file is inside a pinned project and its pins do not name it as a file.
    #[error(
        "{} is in the pinned project {} and is not pinned (review it with `dsh trust {}`)",
        .path.display(),
        .project.display(),
        .project.display()
    )]
    NotPinned { path: PathBuf, project: PathBuf },
    /// The copy read for the run is not what was pinned.
    #[error(
        "{} changed since it was pinned (review it with `dsh trust {}`); it did not run",
        .path.display(),
        .project.display()
    )]
    Changed { path: PathBuf, project: PathBuf },
    /// The file could not be copied.
    #[error("cannot copy {} to run it: {why}", .path.display())]
    Copy { path: PathBuf, why: String },
}

/// One pinned file's sealed copy, open until the program has started.
#[derive(Debug)]
pub struct Sealed {
    fd: OwnedFd,
    /// Where it was read from.
    pub original: PathBuf,
}

impl Sealed {
    /// The descriptor the started program must inherit (the caller clears its
    /// close-on-exec flag in the child only: other children never see it).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The path the program runs it by.
    pub fn run_path(&self) -> String {
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }
}

/// A hook's argv with the files of pinned projects replaced by their sealed copies.
#[derive(Debug, Default)]
pub struct SealedArgv {
    pub argv: Vec<String>,
    pub copies: Vec<Sealed>,
}

impl SealedArgv {
    /// What `DSH_HOOK_SCRIPT` says: the first copy's original path.
    pub fn script(&self) -> Option<&Path> {
        self.copies.first().map(|c| c.original.as_path())
    }
}

/// `argv` as it runs in `cwd`: each word naming a regular file inside a project
/// pinned in `state_dir` replaced by a sealed copy checked against its pin, whether
/// it is a whole argument or a word of a shell line (`sh -c`, as Claude Code's
/// hooks run; there `$CLAUDE_PROJECT_DIR` is `claude_dir`, or the value an
/// `env CLAUDE_PROJECT_DIR=...` argument gives it). Words naming nothing, a
/// directory, or a file outside every pinned project stay as they are; the pins are
/// read only when some word names a file.
pub fn seal_argv(
    argv: &[String],
    cwd: &Path,
    claude_dir: Option<&Path>,
    state_dir: &Path,
) -> Result<SealedArgv, SealError> {
    let claude_dir = argv
        .iter()
        .find_map(|a| a.strip_prefix("CLAUDE_PROJECT_DIR="))
        .map(PathBuf::from)
        .or_else(|| claude_dir.map(Path::to_path_buf));
    let mut sealer = Sealer {
        cwd,
        state_dir,
        projects: None,
        copies: Vec::new(),
    };
    let mut sealed = Vec::with_capacity(argv.len());
    for word in argv {
        let whole = match sealer.seal(word)? {
            Some(run) => run,
            None if is_shell_line(word) => sealer.seal_line(word, claude_dir.as_deref())?,
            None => word.clone(),
        };
        sealed.push(whole);
    }
    Ok(SealedArgv {
        argv: sealed,
        copies: sealer.copies,
    })
}

/// Whether an argument reads as a shell line (words apart, or shell punctuation).
fn is_shell_line(word: &str) -> bool {
    word.contains(|c: char| c.is_whitespace() || "`;|&()<>".contains(c))
}

/// Where a word of a shell line ends: blanks and shell punctuation, as the pins'
/// survey splits a line (`pins::named_files`), so both see the same words.
fn word_end(c: char) -> bool {
    c.is_whitespace() || "`;|&()<>=".contains(c)
}

/// One hook run's sealing: the pins (read once, when some word names a file) and the
/// copies made so far.
struct Sealer<'a> {
    cwd: &'a Path,
    state_dir: &'a Path,
    projects: Option<std::collections::BTreeMap<PathBuf, pins::Pins>>,
    copies: Vec<Sealed>,
}

impl Sealer<'_> {
    /// The path a pinned file named by `word` runs by (its sealed copy), `None` when
    /// it names no file of a pinned project.
    fn seal(&mut self, word: &str) -> Result<Option<String>, SealError> {
        if !word.contains('/') {
            return Ok(None);
        }
        let Ok(path) = self.cwd.join(word).canonicalize() else {
            return Ok(None);
        };
        if !std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            return Ok(None);
        }
        if self.projects.is_none() {
            self.projects = Some(pins::all_recorded(self.state_dir).map_err(SealError::Store)?);
        }
        let Some(projects) = &self.projects else {
            return Ok(None);
        };
        // The innermost pinned project holding it (a nested project has its own pins).
        let Some((project, pinned)) = projects
            .iter()
            .filter(|(dir, _)| path.starts_with(dir))
            .max_by_key(|(dir, _)| dir.as_os_str().len())
        else {
            return Ok(None);
        };
        let Some(Content::Sha256(want)) = pinned.files.get(&path) else {
            return Err(SealError::NotPinned {
                path,
                project: project.clone(),
            });
        };
        let (copy, hash) = copy_sealed(&path)?;
        if hash != *want {
            return Err(SealError::Changed {
                path,
                project: project.clone(),
            });
        }
        let copy = Sealed {
            fd: copy,
            original: path,
        };
        let run = copy.run_path();
        self.copies.push(copy);
        Ok(Some(run))
    }

    /// A shell line with each of its words that names a pinned file (quotes taken
    /// away, `$CLAUDE_PROJECT_DIR` as `claude_dir`) replaced, quotes and all, by its
    /// copy's path; the rest of the line as it was.
    fn seal_line(&mut self, line: &str, claude_dir: Option<&Path>) -> Result<String, SealError> {
        let shown = claude_dir.map(|d| d.to_string_lossy().into_owned());
        let mut out = String::with_capacity(line.len());
        let mut rest = line;
        while !rest.is_empty() {
            let end = rest.find(word_end).unwrap_or(rest.len());
            let (raw, after) = rest.split_at(end);
            let mut word = raw.replace(['"', '\''], "");
            if let Some(dir) = &shown {
                word = word
                    .replace("${CLAUDE_PROJECT_DIR}", dir)
                    .replace("$CLAUDE_PROJECT_DIR", dir);
            }
            match (raw.is_empty(), word.contains('$')) {
                // A word still naming a variable is not a path dsh can know.
                (false, false) => match self.seal(&word)? {
                    Some(run) => out.push_str(&run),
                    None => out.push_str(raw),
                },
                _ => out.push_str(raw),
            }
            let mut chars = after.chars();
            if let Some(separator) = chars.next() {
                out.push(separator);
            }
            rest = chars.as_str();
        }
        Ok(out)
    }
}

/// Reads `path` (a regular file, its last component no link) into a sealed memfd:
/// the copy and the sha256 (hex) of exactly its bytes.
fn copy_sealed(path: &Path) -> Result<(OwnedFd, String), SealError> {
    use sha2::{Digest, Sha256};
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |why: String| SealError::Copy {
        path: path.to_path_buf(),
        why,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        // A FIFO planted there must not block the call; a link planted since the
        // path was resolved is not followed.
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| fail(e.to_string()))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(fail("not a regular file".into()));
    }
    let memfd = crate::fsutil::sealable_memfd(c"dsh-pinned-hook", true)
        .map_err(|e| fail(format!("memfd: {e}")))?;
    let mut copy = std::fs::File::from(memfd);
    let mut hash = Sha256::new();
    let mut reader = file.take(MAX_PROGRAM_BYTES + 1);
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = reader.read(&mut buf).map_err(|e| fail(e.to_string()))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > MAX_PROGRAM_BYTES {
            return Err(fail(format!("over {MAX_PROGRAM_BYTES} bytes")));
        }
        hash.update(&buf[..n]);
        copy.write_all(&buf[..n]).map_err(|e| fail(e.to_string()))?;
    }
    crate::fsutil::seal_all(&copy).map_err(|e| fail(format!("seal: {e}")))?;
    let hex = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((copy.into(), hex))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A project pinned in a state directory, its hook `sh ./tools/hook.sh`; and the
    /// user config that trusts it.
    fn pinned() -> (tempfile::TempDir, PathBuf, crate::config::Config) {
        let (tmp, dir, user) = pins::tests::project();
        std::fs::write(
            dir.join(".dsh/config.toml"),
            "[[hooks.command]]\nargv = [\"sh\", \"./tools/hook.sh\"]\n",
        )
        .unwrap();
        std::fs::write(dir.join("tools/hook.sh"), "echo pinned\n").unwrap();
        pins::trust(&dir, &user).unwrap();
        (tmp, dir, user)
    }

    fn run(sealed: &SealedArgv, cwd: &Path) -> String {
        use std::os::unix::process::CommandExt;
        let fds: Vec<RawFd> = sealed.copies.iter().map(Sealed::raw_fd).collect();
        let mut cmd = std::process::Command::new(&sealed.argv[0]);
        cmd.args(&sealed.argv[1..]).current_dir(cwd);
        // SAFETY: fcntl only, async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                for fd in &fds {
                    libc::fcntl(*fd, libc::F_SETFD, 0);
                }
                Ok(())
            });
        }
        let out = cmd.output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Issue 39: a pinned script swapped after the check. By path (the old run), the
    /// swapped bytes run; from the sealed copy, what was checked is what runs, and
    /// a swap before the copy is refused.
    #[test]
    fn issue_39_a_pinned_script_runs_as_checked_never_as_swapped() {
        let (_tmp, dir, user) = pinned();
        let state = user.exec.state_dir();
        let argv = ["sh".to_string(), "./tools/hook.sh".to_string()];
        let sealed = seal_argv(&argv, &dir, None, &state).unwrap();
        assert_eq!(sealed.copies.len(), 1);
        assert!(sealed.argv[1].starts_with("/proc/self/fd/"), "{sealed:?}");
        assert_eq!(sealed.script(), Some(dir.join("tools/hook.sh").as_path()));
        // The swap, after the copy was checked and before it runs.
        std::fs::write(dir.join("tools/hook.sh"), "echo swapped\n").unwrap();
        let by_path = SealedArgv {
            argv: argv.to_vec(),
            copies: Vec::new(),
        };
        assert_eq!(run(&by_path, &dir), "swapped\n", "the old run by path");
        assert_eq!(run(&sealed, &dir), "pinned\n");
        // Swapped before the copy: refused, naming the review.
        let err = seal_argv(&argv, &dir, None, &state).unwrap_err();
        assert!(matches!(err, SealError::Changed { .. }), "{err}");
        assert!(err.to_string().contains("dsh trust"), "{err}");
    }

    /// Issue 39: Claude Code's hooks are shell lines naming their script through
    /// `$CLAUDE_PROJECT_DIR`; the word is replaced by the copy, the rest of the line
    /// kept. By path the swap runs; from the copy, what was pinned.
    #[test]
    fn issue_39_a_pinned_script_named_in_a_shell_line_runs_from_its_copy() {
        let (_tmp, dir, user) = pinned();
        let state = user.exec.state_dir();
        let argv = [
            "/usr/bin/env".to_string(),
            format!("CLAUDE_PROJECT_DIR={}", dir.display()),
            "/bin/sh".into(),
            "-c".into(),
            "sh \"$CLAUDE_PROJECT_DIR\"/tools/hook.sh; echo after".into(),
        ];
        let sealed = seal_argv(&argv, &dir, None, &state).unwrap();
        assert_eq!(sealed.copies.len(), 1, "{sealed:?}");
        assert!(
            sealed.argv[4].starts_with("sh /proc/self/fd/")
                && sealed.argv[4].ends_with("; echo after"),
            "{sealed:?}"
        );
        std::fs::write(dir.join("tools/hook.sh"), "echo swapped\n").unwrap();
        let by_path = SealedArgv {
            argv: argv.to_vec(),
            copies: Vec::new(),
        };
        assert_eq!(
            run(&by_path, &dir),
            "swapped\nafter\n",
            "the old run by path"
        );
        assert_eq!(run(&sealed, &dir), "pinned\nafter\n");
        let err = seal_argv(&argv, &dir, None, &state).unwrap_err();
        assert!(matches!(err, SealError::Changed { .. }), "{err}");
    }

    #[test]
    fn issue_39_an_executable_runs_from_its_copy_and_an_unpinned_file_is_refused() {
        let (_tmp, dir, user) = pinned();
        let state = user.exec.state_dir();
        let script = dir.join("tools/run.sh");
        std::fs::write(&script, "#!/bin/sh\necho \"ran $0\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let argv = ["./tools/run.sh".to_string()];
        let err = seal_argv(&argv, &dir, None, &state).unwrap_err();
        assert!(matches!(err, SealError::NotPinned { .. }), "{err}");
        // Named by the project's hook and pinned, it runs from the copy: $0 is the copy.
        std::fs::write(
            dir.join(".dsh/config.toml"),
            "[[hooks.command]]\nargv = [\"./tools/run.sh\"]\n",
        )
        .unwrap();
        pins::trust(&dir, &user).unwrap();
        let sealed = seal_argv(&argv, &dir, None, &state).unwrap();
        let out = run(&sealed, &dir);
        assert!(out.starts_with("ran /proc/self/fd/"), "{out}");
        // Outside every pinned project, a word stays as it is.
        let argv = ["/bin/sh".to_string(), "-c".to_string(), "true".to_string()];
        let sealed = seal_argv(&argv, &dir, None, &state).unwrap();
        assert_eq!(sealed.argv, argv);
        assert!(sealed.copies.is_empty());
    }
}
