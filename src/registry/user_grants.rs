//! "Always" answers kept for the user, not one session (`[permissions] remember =
//! "user"`): `grants.json` in the state directory, applied to every session of this user
//! and read again when the daemon starts.
//!
//! The file is written whole on each change (a temporary file in the same directory,
//! 0600, then renamed over the old one), so a crash leaves the old list or the new one,
//! never half of either. The daemon is its one writer while it runs; `dsh policy grants
//! --revoke` goes through the daemon when one answers and writes the file itself only
//! when none does.

use crate::policy::Grant;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The file's name in the state directory.
pub const FILE: &str = "grants.json";

/// What the file holds: command prefixes, word by word (`["git","push"]`), and hosts
/// (`{"host":"index.crates.io"}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Lists {
    allowed: Vec<Grant>,
    rejected: Vec<Grant>,
}

/// The user's grants and rejections, shared by every session.
pub struct UserGrants {
    /// `None`: kept in memory only (a registry without a state directory).
    path: Option<PathBuf>,
    /// `remember = "user"`: new "always" answers are added here too.
    remember: AtomicBool,
    /// The lists and their version (bumped on each change). Judgements read them, so
    /// the lock is only ever held to read or swap, never across the file's I/O.
    lists: Mutex<(Lists, u64)>,
    /// Held while writing the file: the version last written, so a writer that lost
    /// the race to a newer change never puts an older list back.
    written: Mutex<u64>,
}

impl Default for UserGrants {
    fn default() -> Self {
        Self {
            path: None,
            remember: AtomicBool::new(false),
            lists: Mutex::new((Lists::default(), 0)),
            written: Mutex::new(0),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl UserGrants {
    /// The grants kept in `state_dir`'s file (none yet when it does not exist). A file
    /// that cannot be read is an error: silently dropping the user's rejections would
    /// let through what they refused.
    pub fn open(state_dir: &Path) -> Result<Self, String> {
        let path = state_dir.join(FILE);
        let lists = match crate::fsutil::open_regular(&path, false) {
            Ok(file) => serde_json::from_reader(std::io::BufReader::new(file))
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Lists::default(),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        Ok(Self {
            path: Some(path),
            remember: AtomicBool::new(false),
            lists: Mutex::new((lists, 0)),
            written: Mutex::new(0),
        })
    }

    /// The user's grants as a daemon running `config` holds them: its state directory's
    /// file (applied to every session whatever `remember` says: a grant kept there stays
    /// in force until revoked), with new answers kept there when `remember = "user"`. The
    /// daemon and `dsh policy explain` both start from this, so what explain judges with
    /// is what a real call gets.
    pub fn of_config(config: &crate::config::Config) -> Result<Self, String> {
        let grants = Self::open(&config.exec.state_dir())?;
        grants.set_remember(config.permissions.remember == crate::config::Remember::User);
        Ok(grants)
    }

    /// The grants a session holding `session`'s own is judged with: its own, then the
    /// user's (each once).
    pub fn applied_to(&self, session: &[Grant]) -> Vec<Grant> {
        let mut all = session.to_vec();
        for grant in lock(&self.lists).0.allowed.iter() {
            if !all.contains(grant) {
                all.push(grant.clone());
            }
        }
        all
    }

    /// Sets whether new "always" answers are kept for the user (`remember = "user"`).
    pub fn set_remember(&self, user: bool) {
        self.remember.store(user, Ordering::SeqCst);
    }

    /// The prefixes allowed for every session.
    pub fn allowed(&self) -> Vec<Grant> {
        lock(&self.lists).0.allowed.clone()
    }

    /// The prefixes rejected for every session.
    pub fn rejected(&self) -> Vec<Grant> {
        lock(&self.lists).0.rejected.clone()
    }

    /// Keeps an "always" answer for the user, when `remember = "user"` (else nothing).
    /// A failed write is logged: the session still holds the answer. It writes the
    /// file before it returns (blocking I/O: async callers run it on a blocking thread),
    /// with judgements free to read the new lists meanwhile.
    pub fn remember(&self, prefixes: &[Grant], allow: bool) {
        if !self.remember.load(Ordering::SeqCst) || prefixes.is_empty() {
            return;
        }
        let changed = self.change(|lists| {
            let list = if allow {
                &mut lists.allowed
            } else {
                &mut lists.rejected
            };
            let before = list.len();
            for p in prefixes {
                if !list.contains(p) {
                    list.push(p.clone());
                }
            }
            list.len() != before
        });
        if changed && let Err(e) = self.persist() {
            tracing::error!("cannot write the user's grants: {e}");
        }
    }

    /// Forgets the grant or rejection of `prefix`; whether there was one.
    pub fn revoke(&self, prefix: &Grant) -> Result<bool, String> {
        let changed = self.change(|lists| {
            let before = lists.allowed.len() + lists.rejected.len();
            lists.allowed.retain(|g| g != prefix);
            lists.rejected.retain(|g| g != prefix);
            lists.allowed.len() + lists.rejected.len() != before
        });
        if !changed {
            return Ok(false);
        }
        self.persist()
            .map_err(|e| format!("cannot write the user's grants: {e}"))?;
        Ok(true)
    }

    /// Changes the lists in memory (a new version when `edit` says it changed them).
    fn change(&self, edit: impl FnOnce(&mut Lists) -> bool) -> bool {
        let mut guard = lock(&self.lists);
        let (lists, version) = &mut *guard;
        let changed = edit(lists);
        if changed {
            *version += 1;
        }
        changed
    }

    /// Writes the newest lists to the file unless a newer or equal version already is:
    /// the lists' lock is held only to copy them, the writer's across the I/O.
    fn persist(&self) -> std::io::Result<()> {
        let mut written = lock(&self.written);
        let (lists, version) = lock(&self.lists).clone();
        if version <= *written {
            return Ok(());
        }
        self.save(&lists)?;
        *written = version;
        Ok(())
    }

    /// Writes `lists` over the file at once: a temporary file (0600) renamed over it.
    fn save(&self, lists: &Lists) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let mut file = crate::fsutil::private_file()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        let written = serde_json::to_vec_pretty(lists)
            .map_err(std::io::Error::other)
            .and_then(|bytes| file.write_all(&bytes))
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn grant(words: &str) -> Grant {
        Grant::of(words)
    }

    #[test]
    fn kept_only_when_remembering_for_the_user_and_read_back_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let grants = UserGrants::open(dir.path()).unwrap();
        grants.remember(&[grant("git push")], true);
        assert!(
            grants.allowed().is_empty(),
            "remember = session keeps nothing"
        );
        assert!(!dir.path().join(FILE).exists());
        grants.set_remember(true);
        grants.remember(&[grant("git push"), grant("make")], true);
        grants.remember(&[grant("git push")], true);
        grants.remember(&[grant("rm")], false);
        let mode = std::fs::metadata(dir.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = UserGrants::open(dir.path()).unwrap();
        assert_eq!(again.allowed(), [grant("git push"), grant("make")]);
        assert_eq!(again.rejected(), [grant("rm")]);
        assert_eq!(again.revoke(&grant("git push")), Ok(true));
        assert_eq!(again.revoke(&grant("git push")), Ok(false));
        let third = UserGrants::open(dir.path()).unwrap();
        assert_eq!(third.allowed(), [grant("make")]);
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn e10_a_host_is_kept_beside_the_command_prefixes_of_an_older_file() {
        let dir = tempfile::tempdir().unwrap();
        // A file written before host grants existed.
        std::fs::write(
            dir.path().join(FILE),
            r#"{"allowed":[["git","push"]],"rejected":[]}"#,
        )
        .unwrap();
        let grants = UserGrants::open(dir.path()).unwrap();
        assert_eq!(grants.allowed(), [grant("git push")]);
        grants.set_remember(true);
        let host = Grant::Host("index.crates.io".into());
        grants.remember(std::slice::from_ref(&host), true);
        let again = UserGrants::open(dir.path()).unwrap();
        assert_eq!(again.allowed(), [grant("git push"), host.clone()]);
        // Revoking the command prefix of the same words leaves the host alone.
        assert_eq!(again.revoke(&grant("network index.crates.io")), Ok(false));
        assert_eq!(again.revoke(&host), Ok(true));
        assert_eq!(again.allowed(), [grant("git push")]);
    }

    #[test]
    fn an_unreadable_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), "{not json").unwrap();
        let err = UserGrants::open(dir.path()).err().unwrap();
        assert!(err.contains("grants.json"), "{err}");
    }

    /// A slow write (a full disk, a stalled fsync) does not hold up judgements: while
    /// the file is being written, readers see the new lists. (With the write under the
    /// lists' lock, the reader below would wait for the writer.)
    #[test]
    fn judgements_read_the_lists_while_the_file_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let grants = std::sync::Arc::new(UserGrants::open(dir.path()).unwrap());
        grants.set_remember(true);
        let slow_write = lock(&grants.written);
        let writer = std::thread::spawn({
            let grants = grants.clone();
            move || grants.remember(&[grant("make")], true)
        });
        let (seen_tx, seen_rx) = std::sync::mpsc::channel();
        std::thread::spawn({
            let grants = grants.clone();
            move || {
                while !grants.applied_to(&[]).contains(&grant("make")) {
                    std::thread::yield_now();
                }
                let _ = seen_tx.send(());
            }
        });
        seen_rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a judgement waited for the file's write");
        drop(slow_write);
        writer.join().unwrap();
        let again = UserGrants::open(dir.path()).unwrap();
        assert_eq!(again.allowed(), [grant("make")]);
    }
}
