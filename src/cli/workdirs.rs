//! Where each prompt of a batch works, so the sessions do not write over each other:
//! `--workdirs DIR`, a copy of the working directory per prompt (`cp -a`, what it holds
//! now, uncommitted work and `.git` included, kept after the batch for comparing), or
//! `--worktrees DIR`, a git worktree per prompt (detached at the repository's `HEAD`:
//! committed work only, cheap for a large repository, removed after the batch unless
//! `--keep-worktrees`). Both are made as each prompt starts, at `DIR/INDEX`, by
//! programs run in the CLI's own process (not the daemon's: nothing of the agent).

use std::path::{Path, PathBuf};

/// Held while a worktree is added (see [`Workdirs::make`]).
static ADDING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How a batch gives each prompt a directory of its own.
pub(crate) enum Workdirs {
    /// A copy of `from` at `dir/INDEX`.
    Copies { from: PathBuf, dir: PathBuf },
    /// A worktree of the repository at `top` at `dir/INDEX`; the prompt works in its
    /// `sub` (the working directory's place in the repository).
    Worktrees {
        top: PathBuf,
        sub: PathBuf,
        dir: PathBuf,
        keep: bool,
    },
}

impl Workdirs {
    /// `--workdirs DIR`: copies of `cwd`.
    pub(crate) fn copies(dir: &Path, cwd: &Path) -> Result<Self, String> {
        Ok(Workdirs::Copies {
            from: cwd.to_path_buf(),
            dir: make_dir(dir, cwd, "--workdirs", "the working directory")?,
        })
    }

    /// `--worktrees DIR`: worktrees of the repository `cwd` is in (an error when it is
    /// in none).
    pub(crate) async fn worktrees(dir: &Path, cwd: &Path, keep: bool) -> Result<Self, String> {
        let top = git(cwd, &["rev-parse", "--show-toplevel"])
            .await
            .map_err(|e| format!("--worktrees needs a git repository: {e}"))?;
        let top = PathBuf::from(top.trim_end_matches('\n'));
        let real_cwd = std::fs::canonicalize(cwd).map_err(|e| format!("{}: {e}", cwd.display()))?;
        let sub = real_cwd
            .strip_prefix(&top)
            .map_err(|_| format!("{} is not inside {}", cwd.display(), top.display()))?
            .to_path_buf();
        // Inside the repository's tree, each worktree would show in the others' status.
        let dir = make_dir(dir, &top, "--worktrees", "the repository")?;
        Ok(Workdirs::Worktrees {
            top,
            sub,
            dir,
            keep,
        })
    }

    /// Makes prompt `index`'s directory and returns where it works.
    pub(crate) async fn make(&self, index: usize) -> Result<PathBuf, String> {
        match self {
            Workdirs::Copies { from, dir } => {
                let own = dir.join(index.to_string());
                let mut cp = tokio::process::Command::new("cp");
                cp.arg("-a").arg("--").arg(from).arg(&own);
                run(cp).await.map_err(|e| {
                    format!("cannot copy {} to {}: {e}", from.display(), own.display())
                })?;
                Ok(own)
            }
            Workdirs::Worktrees { top, sub, dir, .. } => {
                let own = dir.join(index.to_string());
                let own_arg = own.to_string_lossy();
                // One `git worktree add` at a time: two at once race in git itself (one
                // reads the other's half-made `.git/worktrees/N` and fails: "failed to
                // read .git/worktrees/0/commondir"), seen in the batch's worktree test.
                let _one_at_a_time = ADDING.lock().await;
                git(
                    top,
                    &["worktree", "add", "--quiet", "--detach", &own_arg, "HEAD"],
                )
                .await
                .map_err(|e| format!("cannot add a worktree at {}: {e}", own.display()))?;
                Ok(own.join(sub))
            }
        }
    }

    /// At the batch's end: the worktrees made for `indices` are removed (`git worktree
    /// remove --force`: what the session changed in them goes with them), unless kept;
    /// copies always stay. Says what stays, for a person.
    pub(crate) async fn finish(&self, indices: impl Iterator<Item = usize>) -> Option<String> {
        match self {
            Workdirs::Copies { dir, .. } => {
                Some(format!("each prompt's copy: {}/INDEX", dir.display()))
            }
            Workdirs::Worktrees {
                dir, keep: true, ..
            } => Some(format!(
                "each prompt's worktree: {}/INDEX (`git worktree remove` when done)",
                dir.display()
            )),
            Workdirs::Worktrees { top, dir, .. } => {
                for index in indices {
                    let own = dir.join(index.to_string());
                    let own_arg = own.to_string_lossy();
                    if let Err(e) = git(top, &["worktree", "remove", "--force", &own_arg]).await {
                        eprintln!("dsh: cannot remove the worktree {}: {e}", own.display());
                    }
                }
                if let Err(e) = std::fs::remove_dir(dir) {
                    eprintln!("dsh: cannot remove {}: {e}", dir.display());
                }
                None
            }
        }
    }
}

/// Makes `flag`'s DIR (0700, not there before) and returns it absolute. Inside `tree`
/// (`what` names it) it is refused: every copy would hold the copies before it.
fn make_dir(dir: &Path, tree: &Path, flag: &str, what: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = std::path::absolute(dir).map_err(|e| format!("bad {flag}: {e}"))?;
    let parent = dir.parent().unwrap_or(&dir);
    let real_parent =
        std::fs::canonicalize(parent).map_err(|e| format!("{flag} {}: {e}", dir.display()))?;
    let real_tree = std::fs::canonicalize(tree).map_err(|e| format!("{}: {e}", tree.display()))?;
    if real_parent.starts_with(&real_tree) {
        return Err(format!(
            "{flag} {} is inside {what} {}: each prompt's directory would hold the others",
            dir.display(),
            tree.display()
        ));
    }
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("{flag} {}: {e}", dir.display()))?;
    Ok(dir)
}

/// `git -C dir ARGS`: its stdout, or its stderr as the error.
async fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("-C").arg(dir).args(args);
    run(cmd).await
}

/// Runs `cmd` with no stdin, killed if the batch is dropped: its stdout, or why not.
async fn run(mut cmd: tokio::process::Command) -> Result<String, String> {
    let out = cmd
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run it: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
