//! The helper's install and start on the host (first contact of each connection):
//! the platform probe, the upload of this executable into the cache, the start that
//! checks its sha256 remotely before `exec`, and the `hello` (see the parent
//! module's docs for the protocol of it).

use super::super::ExecError;
use super::super::children;
use super::super::helper;
use super::mirror::ClientService;
use super::{Conn, HelperClient, lock};
use crate::rpc;
use serde_json::Value;
use sha2::Digest;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

/// Prints the remote `uname -sm`, whether the cached helper is there, and whether
/// the tools the install needs are: `$1` the helper directory, `$2` the file name.
const PROBE_SCRIPT: &str = r#"
dir=$1 name=$2
case $dir in "~") dir=$HOME ;; "~/"*) dir=$HOME/${dir#"~/"} ;; esac
uname -sm 2>/dev/null || echo unknown
if [ -f "$dir/$name" ]; then echo present; else echo missing; fi
if command -v sha256sum >/dev/null && command -v gzip >/dev/null && command -v mktemp >/dev/null; then
  echo tools
else
  echo "no sha256sum, gzip or mktemp"
fi
"#;

/// Receives the gzip-compressed helper on stdin: `$1` directory, `$2` name, `$3`
/// its sha256. A temporary name in the 0700 directory, 0700, checked, renamed;
/// then the helpers of other builds are removed.
const UPLOAD_SCRIPT: &str = r#"
dir=$1 name=$2 want=$3
case $dir in "~") dir=$HOME ;; "~/"*) dir=$HOME/${dir#"~/"} ;; esac
mkdir -p -- "$dir" && chmod 700 -- "$dir" || exit 1
tmp=$(mktemp "$dir/.upload-XXXXXX") || exit 1
trap 'rm -f -- "$tmp"' EXIT
gzip -dc >"$tmp" || { echo "cannot unpack the helper into $dir" >&2; exit 1; }
chmod 700 -- "$tmp" || exit 1
got=$(sha256sum <"$tmp") || exit 1
got=${got%% *}
[ "$got" = "$want" ] || { echo "the uploaded helper arrived damaged (sha256 $got)" >&2; exit 1; }
mv -f -- "$tmp" "$dir/$name" || exit 1
trap - EXIT
# Helpers of other builds would pile up (one per upgrade, tens of MB each). A
# running one keeps its inode; a daemon of another build uploads its own again.
for old in "$dir"/helper-*; do
  [ "$old" = "$dir/$name" ] || rm -f -- "$old"
done
"#;

/// Exit status of [`START_SCRIPT`] when the cached helper is missing.
const START_MISSING: i32 = 90;
/// Exit status of [`START_SCRIPT`] when the cached helper did not match (removed).
const START_MISMATCH: i32 = 92;

/// Checks the cached helper's sha256 and runs it: `$1` directory, `$2` name, `$3`
/// the sha256. A file that does not match is removed and never run.
const START_SCRIPT: &str = r#"
dir=$1 name=$2 want=$3
case $dir in "~") dir=$HOME ;; "~/"*) dir=$HOME/${dir#"~/"} ;; esac
f=$dir/$name
[ -f "$f" ] || { echo "no helper at $f" >&2; exit 90; }
got=$(sha256sum <"$f") || exit 91
got=${got%% *}
if [ "$got" != "$want" ]; then
  rm -f -- "$f"
  echo "the helper at $f does not match its sha256 (removed, not run)" >&2
  exit 92
fi
exec "$f" exec-helper --state-dir "$dir/state"
"#;

/// This executable as the helper: its path, size and sha256.
#[derive(Debug, Clone)]
struct Identity {
    path: PathBuf,
    size: u64,
    sha256: String,
}

impl Identity {
    /// The cached helper's file name: the version and 16 hex digits of the hash.
    fn file_name(&self) -> String {
        format!(
            "helper-{}-{}",
            env!("CARGO_PKG_VERSION"),
            &self.sha256[..16.min(self.sha256.len())]
        )
    }
}

/// Hashes `path` once per process (it is this executable: tens of MB).
async fn identity(path: &Path) -> Result<Arc<Identity>, String> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<Identity>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(id) = lock(cache).get(path) {
        return Ok(id.clone());
    }
    let owned = path.to_path_buf();
    let id = tokio::task::spawn_blocking(move || -> Result<Identity, String> {
        let mut file = std::fs::File::open(&owned)
            .map_err(|e| format!("cannot read {}: {e}", owned.display()))?;
        let mut hasher = sha2::Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut size = 0u64;
        loop {
            let n = file
                .read(&mut buf)
                .map_err(|e| format!("cannot read {}: {e}", owned.display()))?;
            if n == 0 {
                break;
            }
            size += n as u64;
            hasher.update(&buf[..n]);
        }
        let sha256 = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Identity {
            path: owned,
            size,
            sha256,
        })
    })
    .await
    .map_err(|e| format!("hashing failed: {e}"))??;
    let id = Arc::new(id);
    lock(cache).insert(path.to_path_buf(), id.clone());
    Ok(id)
}

/// Why a helper could not be started.
#[derive(Debug, Clone)]
pub enum ConnectError {
    /// The host could not be reached (or we are shutting down): no reason to give
    /// up on the helper.
    Unreachable(ExecError),
    /// The host was reached but cannot run the helper; the message says why.
    Unusable(String),
}

/// What the last first contact did, for status and logs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstallReport {
    /// Whether this contact uploaded the helper (it was missing or did not match).
    pub uploaded: bool,
    /// A cached helper was refused because its sha256 did not match.
    pub replaced_mismatch: bool,
    /// Bytes of the executable and bytes sent (compressed) when uploaded.
    pub size: u64,
    pub sent: u64,
    /// From the start of the contact to the helper's answer to `hello`.
    pub elapsed: Duration,
    /// The remote path of the helper.
    pub path: String,
}

impl HelperClient {
    /// First contact: probe, upload when needed, start, `hello`.
    pub(super) async fn connect(&self) -> Result<Conn, ConnectError> {
        let began = Instant::now();
        self.ssh
            .ensure_master()
            .await
            .map_err(ConnectError::Unreachable)?;
        let me = identity(&self.helper_exe)
            .await
            .map_err(ConnectError::Unusable)?;
        let name = me.file_name();
        let start = children::starting();
        let out = self
            .ssh
            .remote_bash(PROBE_SCRIPT, &[&self.helper_dir, &name])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| ConnectError::Unreachable(ExecError::Remote(e.to_string())));
        drop(start);
        let out = out?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let mut lines = text.lines();
        let (uname, present, tools) = (lines.next(), lines.next(), lines.next());
        let (Some(uname), Some(present), Some(tools)) = (uname, present, tools) else {
            return Err(ConnectError::Unreachable(ExecError::Remote(format!(
                "ssh host {} did not answer the helper probe ({}): {}",
                self.shared.host,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))));
        };
        check_platform(uname.trim()).map_err(ConnectError::Unusable)?;
        if tools.trim() != "tools" {
            return Err(ConnectError::Unusable(format!(
                "the host has {}",
                tools.trim()
            )));
        }
        let mut report = InstallReport {
            path: format!("{}/{name}", self.helper_dir),
            ..InstallReport::default()
        };
        if present.trim() != "present" {
            self.upload(&me, &name, &mut report).await?;
        }
        let conn = match self.launch(&me, &name).await {
            Err(StartFailure::Mismatch(why)) if !report.uploaded => {
                tracing::warn!(host = %self.shared.host, "{why}");
                report.replaced_mismatch = true;
                self.upload(&me, &name, &mut report).await?;
                self.launch(&me, &name).await
            }
            other => other,
        }
        .map_err(|f| match f {
            StartFailure::Mismatch(s) | StartFailure::Failed(s) => ConnectError::Unusable(s),
            StartFailure::Unreachable(e) => ConnectError::Unreachable(e),
        })?;
        report.elapsed = began.elapsed();
        tracing::info!(
            host = %self.shared.host,
            uploaded = report.uploaded,
            size = report.size,
            sent = report.sent,
            elapsed_ms = report.elapsed.as_millis() as u64,
            "dsh helper started"
        );
        *lock(&self.report) = Some(report);
        Ok(conn)
    }

    /// Sends this executable, gzip-compressed, into the cache (see the module docs).
    async fn upload(
        &self,
        me: &Identity,
        name: &str,
        report: &mut InstallReport,
    ) -> Result<(), ConnectError> {
        let cmd = self
            .ssh
            .remote_bash_with_stdin(UPLOAD_SCRIPT, &[&self.helper_dir, name, &me.sha256]);
        let std_cmd = to_std(&cmd);
        let path = me.path.clone();
        let result = tokio::task::spawn_blocking(move || upload_blocking(std_cmd, &path))
            .await
            .map_err(|e| ConnectError::Unusable(format!("the upload failed: {e}")))?;
        let sent = result.map_err(|e| {
            ConnectError::Unusable(format!("cannot upload the helper to {name}: {e}"))
        })?;
        report.uploaded = true;
        report.size = me.size;
        report.sent = sent;
        Ok(())
    }

    /// Starts the cached helper (its hash is checked remotely first) and greets it.
    async fn launch(&self, me: &Identity, name: &str) -> Result<Conn, StartFailure> {
        let mut cmd = self
            .ssh
            .remote_bash_with_stdin(START_SCRIPT, &[&self.helper_dir, name, &me.sha256]);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = children::spawn(&mut cmd)
            .map_err(|e| StartFailure::Unreachable(ExecError::Remote(e.to_string())))?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(StartFailure::Failed("the ssh client has no pipes".into()));
        };
        // The helper's complaints (and ssh's): kept for the error, bounded.
        let said = Arc::new(Mutex::new(String::new()));
        let said_w = said.clone();
        let said_done = CancellationToken::new();
        let said_done_w = said_done.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut s = lock(&said_w);
                if s.len() < 16 * 1024 {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
            said_done_w.cancel();
        });
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let (peer_tx, peer_rx) = tokio::sync::oneshot::channel();
        let service = Arc::new(ClientService {
            shared: self.shared.clone(),
            generation,
            peer: Mutex::new(Some(peer_tx)),
        });
        let options = rpc::Options {
            max_line_bytes: helper::max_line_bytes(self.hello.max_output_bytes),
            outgoing_queue: 65_536,
            request_timeout: None,
            ..Default::default()
        };
        let serve = tokio::spawn(rpc::serve_connection(stdout, stdin, service, options));
        let peer = peer_rx
            .await
            .map_err(|_| StartFailure::Failed("the helper channel did not open".into()))?;
        let hello =
            serde_json::to_value(&self.hello).map_err(|e| StartFailure::Failed(e.to_string()))?;
        let limit = Duration::from_millis(self.ssh_connect_timeout()) + Duration::from_secs(30);
        let answer = tokio::time::timeout(
            limit,
            peer.request("hello", hello, &CancellationToken::new()),
        )
        .await;
        match answer {
            Ok(Ok(answer)) => Ok(Conn {
                generation,
                pid: answer.get("pid").and_then(Value::as_u64),
                peer,
                child: tokio::sync::Mutex::new(child),
                serve: tokio::sync::Mutex::new(Some(serve)),
            }),
            other => {
                peer.close();
                // The script's exit status says why (missing, mismatch): let ssh
                // report it before giving up on it.
                let status = match tokio::time::timeout(Duration::from_secs(10), child.wait()).await
                {
                    Ok(status) => status.ok().and_then(|s| s.code()),
                    Err(_) => {
                        let _ = child.start_kill();
                        let _ = child.wait().await;
                        None
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(2), said_done.cancelled()).await;
                let said = lock(&said).trim().to_string();
                let why = match other {
                    Ok(Err(e)) => e.message.clone(),
                    Ok(Ok(_)) => String::new(),
                    Err(_) => "no answer in time".into(),
                };
                let said = if said.is_empty() { why } else { said };
                Err(match status {
                    Some(START_MISMATCH) | Some(START_MISSING) => StartFailure::Mismatch(said),
                    Some(255) => StartFailure::Unreachable(ExecError::Remote(format!(
                        "ssh host {}: {said}",
                        self.shared.host
                    ))),
                    _ => StartFailure::Failed(format!("the helper did not start: {said}")),
                })
            }
        }
    }

    fn ssh_connect_timeout(&self) -> u64 {
        self.ssh.connect_timeout_ms()
    }
}

/// Why a start failed.
pub(super) enum StartFailure {
    /// The cached file was missing or did not match its hash (then removed).
    Mismatch(String),
    Failed(String),
    Unreachable(ExecError),
}

/// Whether `uname -sm` output names this build's OS and architecture.
pub fn check_platform(uname: &str) -> Result<(), String> {
    let mut words = uname.split_whitespace();
    let (os, arch) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let want_arch = std::env::consts::ARCH;
    if os.eq_ignore_ascii_case(std::env::consts::OS) && arch == want_arch {
        Ok(())
    } else {
        Err(format!(
            "`uname -sm` there says `{uname}`, and this dsh is built for {} {want_arch}",
            std::env::consts::OS
        ))
    }
}

/// The same command for `std::process` (the upload writes from a blocking thread).
fn to_std(cmd: &tokio::process::Command) -> std::process::Command {
    let c = cmd.as_std();
    let mut out = std::process::Command::new(c.get_program());
    out.args(c.get_args()).env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            out.env(k, v);
        }
    }
    if let Some(dir) = c.get_current_dir() {
        out.current_dir(dir);
    }
    out
}

/// Runs the upload: `path` gzip-compressed into the command's stdin. Returns the
/// bytes sent.
fn upload_blocking(mut cmd: std::process::Command, path: &Path) -> Result<u64, String> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // Started and reaped here: no orphan is reaped meanwhile (`children`).
    let _start = children::starting();
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| "the ssh client has no stdin".to_string())?;
    let counted = Counting {
        inner: stdin,
        count: 0,
    };
    let sent = (|| -> std::io::Result<u64> {
        let mut file = std::fs::File::open(path)?;
        let mut gz = flate2::write::GzEncoder::new(counted, flate2::Compression::fast());
        std::io::copy(&mut file, &mut gz)?;
        let mut counted = gz.finish()?;
        counted.flush()?;
        Ok(counted.count)
    })();
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    match sent {
        Ok(n) if out.status.success() => Ok(n),
        Ok(_) => Err(format!("{}: {said}", out.status)),
        Err(e) => Err(format!("{e} ({}: {said})", out.status)),
    }
}

/// A writer that counts what passes.
struct Counting<W> {
    inner: W,
    count: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_check_compares_os_and_machine() {
        let here = format!("Linux {}", std::env::consts::ARCH);
        assert!(check_platform(&here).is_ok());
        assert!(check_platform("Linux riscv64").is_err());
        assert!(check_platform("Darwin arm64").is_err());
        assert!(check_platform("").is_err());
    }
}
