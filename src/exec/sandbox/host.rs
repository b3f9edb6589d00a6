//! What the sandbox's layout needs to know of the host beyond a session's roots: its
//! service sockets (masked wherever one is) and every path the daemon's own socket
//! can be reached at (a layout that would show one is refused), read at most every
//! [`HOST_VIEW_FRESH`].

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long what [`HostView`] read of the host is used before it is read again.
pub(super) const HOST_VIEW_FRESH: Duration = Duration::from_secs(2);

/// What the layout needs to know of the host beyond the roots: where its service
/// sockets are and where the daemon's socket can be reached. Reading both costs a
/// command about 0.23 ms (a walk of `/run`, a parse of mountinfo), so it is read at
/// most every [`HOST_VIEW_FRESH`]. A socket or a bind mount newer than that can
/// reach a command only past the other layers (the seccomp floor refuses new Unix
/// sockets; the daemon refuses its own descendants), and never one of the
/// daemon's: its socket exists before any command.
pub(super) struct HostView {
    /// The sockets no command may reach (the daemon's own).
    guarded: Vec<PathBuf>,
    seen: std::sync::Mutex<Option<(std::time::Instant, std::sync::Arc<HostSnapshot>)>>,
}

/// One reading of the host.
#[derive(PartialEq, Eq)]
pub(super) struct HostSnapshot {
    /// The service sockets to mask ([`host_sockets`]).
    pub(super) sockets: Vec<PathBuf>,
    /// Every path each guarded socket is reached at ([`socket_aliases`]).
    pub(super) guarded_at: Vec<PathBuf>,
}

impl HostView {
    pub(super) fn new(guarded: &[PathBuf]) -> Self {
        Self {
            guarded: guarded.to_vec(),
            seen: Default::default(),
        }
    }

    pub(super) fn now(&self) -> std::sync::Arc<HostSnapshot> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, snapshot)) = seen.as_ref()
            && at.elapsed() < HOST_VIEW_FRESH
        {
            return snapshot.clone();
        }
        let snapshot = std::sync::Arc::new(HostSnapshot {
            sockets: host_sockets(),
            guarded_at: self
                .guarded
                .iter()
                .flat_map(|s| socket_aliases(s))
                .collect(),
        });
        *seen = Some((std::time::Instant::now(), snapshot.clone()));
        snapshot
    }
}

/// Where the host's service sockets live, each masked wherever it holds one:
/// every top-level entry of `/run` (and `/var/run`, where it is a directory of its
/// own) with a Unix socket in it (D-Bus, systemd, container engines, a database,
/// every user's runtime directory), LXD's, and, whether or not a socket is there
/// yet, the daemon's own runtime directory (its socket, gpg and ssh agents), the ssh
/// agent's socket and the D-Bus session bus. Found afresh for each command by a
/// bounded walk, so a mount is spent only where a socket is: each costs a command
/// about a quarter of a millisecond (bench X1). A socket made after the command
/// started is not masked; the seccomp floor refuses new Unix sockets anyway unless
/// `allow_unix_sockets` lifts it.
pub(super) fn host_sockets() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for base in ["/run", "/var/run", "/var/lib/lxd"] {
        let base = Path::new(base);
        // /var/run is usually a link to /run: walked once.
        if base.is_symlink() {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(base) else {
            continue;
        };
        let mut budget = 2000;
        for entry in entries.flatten() {
            if holds_socket(&entry.path(), 4, &mut budget) {
                paths.push(entry.path());
            }
        }
    }
    for var in ["XDG_RUNTIME_DIR", "SSH_AUTH_SOCK"] {
        paths.extend(std::env::var_os(var).map(PathBuf::from));
    }
    if let Some(bus) = std::env::var("DBUS_SESSION_BUS_ADDRESS")
        .ok()
        .and_then(|a| {
            a.split(',')
                .find_map(|p| p.split_once("path=").map(|(_, v)| v.to_string()))
        })
    {
        paths.push(PathBuf::from(bus));
    }
    paths
}

/// Whether `path` is a Unix socket or a directory with one within `depth` levels;
/// `budget` bounds the entries looked at. A directory deeper than `depth` or past
/// the budget counts as holding one: the closed side.
pub(super) fn holds_socket(path: &Path, depth: usize, budget: &mut usize) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    let kind = meta.file_type();
    if kind.is_socket() {
        return true;
    }
    if !kind.is_dir() {
        return false;
    }
    if depth == 0 || *budget == 0 {
        return true;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        // Unreadable to us is unreachable to a command too.
        return false;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return true;
        }
        *budget -= 1;
        if holds_socket(&entry.path(), depth - 1, budget) {
            return true;
        }
    }
    false
}

/// Where a Unix socket can be reached by path on this host: its real path and every
/// other mount of the same file system that shows it (a bind mount of its
/// directory elsewhere), read from `/proc/self/mountinfo`.
pub(super) fn socket_aliases(socket: &Path) -> Vec<PathBuf> {
    // The socket may not exist yet (the executor starts before the daemon binds):
    // its real place is then its directory's, or the path as written.
    let real = socket.canonicalize().unwrap_or_else(|_| {
        match (socket.parent().map(Path::canonicalize), socket.file_name()) {
            (Some(Ok(dir)), Some(name)) => dir.join(name),
            _ => socket.to_path_buf(),
        }
    });
    let mut aliases = vec![real.clone()];
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return aliases;
    };
    let mounts: Vec<(String, PathBuf, PathBuf)> = info
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let device = fields.nth(2)?.to_string();
            let root = PathBuf::from(unescape(fields.next()?));
            let point = PathBuf::from(unescape(fields.next()?));
            Some((device, root, point))
        })
        .collect();
    // The mount the socket is reached through: the deepest mount point above it.
    let Some((device, root, point)) = mounts
        .iter()
        .filter(|(_, _, point)| real.starts_with(point))
        .max_by_key(|(_, _, point)| point.components().count())
    else {
        return aliases;
    };
    let Ok(below) = real.strip_prefix(point) else {
        return aliases;
    };
    let inside = root.join(below);
    for (other_device, other_root, other_point) in &mounts {
        if other_device == device
            && let Ok(rest) = inside.strip_prefix(other_root)
        {
            let alias = other_point.join(rest);
            if !aliases.contains(&alias) {
                aliases.push(alias);
            }
        }
    }
    aliases
}

/// mountinfo escapes space, tab, newline and backslash as three octal digits.
pub(super) fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value =
                (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(value);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
