//! A real OpenSSH server on loopback for the ssh executor's tests: its own host
//! key, a client key, its own config (keys only, no passwords), on a free port,
//! started per test and stopped when dropped. The "remote" host is this machine,
//! so tests can check the remote process table through /proc.

use dsh::config::{HelperMode, KnownHosts, SshConfig};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Variables the server puts into every session's environment, so tests can prove
/// that the remote side filters them (E4).
pub const SERVER_ENV: &str = "MY_API_KEY=k GH_TOKEN=t db_secret=s Monkey=m KEEP_ME=yes TERM=xterm-256color PAGER=less \
     PGPASSWORD=p MYSQL_PWD=m SMTP_PASSWORD=s GITHUB_PAT=g PKG_CONFIG_PATH=/nonexistent";

/// Also put into every session's environment, apart from [`SERVER_ENV`] because
/// it is not there to be filtered: with `SHLVL` set, the login shell that sshd
/// runs a command through is not top-level, and Debian's bash then skips
/// `~/.bashrc` for it. The test host is this machine, whose `~/.bashrc` runs
/// `pyenv init`: 0.3 s a wrapper-path command, and a login shell killed by a
/// test mid-`pyenv rehash` leaves pyenv's lock file behind, which made every
/// later wrapper-path command wait 60 s for it. A real host's rc files are its
/// owner's business; these tests are about dsh.
const QUIET_LOGIN_SHELL: &str = "SHLVL=1";

/// A running sshd; killed on drop.
pub struct Sshd {
    child: Child,
    pub port: u16,
    keys: tempfile::TempDir,
}

/// Makes an ed25519 key pair without passphrase at `path` (and `path.pub`).
pub fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen (Debian: openssh-client) must be installed");
    assert!(status.success(), "ssh-keygen failed");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Where the tests' ssh executors cache the `dsh exec-helper` binary on the
/// "remote" host: one directory for the whole run (and the next: it is a cache),
/// so only the first test that needs it pays for the upload. Tests of the install
/// itself use a fresh directory of their own.
pub fn shared_helper_dir() -> String {
    format!("{}/helper-cache", env!("CARGO_TARGET_TMPDIR"))
}

impl Sshd {
    /// Starts a server and waits until it listens (it says so on stderr).
    pub fn start() -> Sshd {
        Sshd::start_with_env("")
    }

    /// As [`Sshd::start`], with `extra` (`NAME=value ...`) added to every
    /// session's environment (a `PATH` that puts a fake `uname` first).
    pub fn start_with_env(extra: &str) -> Sshd {
        let keys = tempfile::tempdir().expect("tempdir");
        let dir = keys.path();
        keygen(&dir.join("host_key"));
        keygen(&dir.join("client_key"));
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
        if nix::unistd::geteuid().is_root() {
            // sshd's privilege separation directory (Debian creates it at boot).
            std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
        }
        let sshd = ["/usr/sbin/sshd", "/usr/bin/sshd"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("sshd (Debian: openssh-server) must be installed; `scripts/test` installs it");
        // A port can be taken between choosing and binding it: try a few.
        for _ in 0..10 {
            let port = free_port();
            let config = format!(
                "ListenAddress 127.0.0.1\nPort {port}\nHostKey {d}/host_key\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nUsePAM no\n\
                 StrictModes no\nPermitRootLogin prohibit-password\nPidFile none\n\
                 MaxSessions 1000\nMaxStartups 100\nSetEnv {SERVER_ENV} {QUIET_LOGIN_SHELL} {extra}\n",
                d = dir.display()
            );
            let config_path = dir.join("sshd_config");
            std::fs::write(&config_path, config).unwrap();
            let mut child = Command::new(sshd)
                .args(["-D", "-e", "-f"])
                .arg(&config_path)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start sshd");
            let mut stderr = BufReader::new(child.stderr.take().unwrap());
            let mut line = String::new();
            let mut said = String::new();
            let listening = loop {
                line.clear();
                match stderr.read_line(&mut line) {
                    Ok(0) | Err(_) => break false,
                    Ok(_) if line.contains("Server listening") => break true,
                    Ok(_) => said.push_str(&line),
                }
            };
            if listening {
                // Keep draining its stderr so the server never blocks on a full pipe.
                std::thread::spawn(move || {
                    let mut sink = String::new();
                    while stderr.read_line(&mut sink).is_ok_and(|n| n > 0) {
                        sink.clear();
                    }
                });
                let known = format!(
                    "[127.0.0.1]:{port} {}",
                    std::fs::read_to_string(dir.join("host_key.pub")).unwrap()
                );
                std::fs::write(dir.join("known_hosts"), known).unwrap();
                return Sshd { child, port, keys };
            }
            let _ = child.kill();
            let _ = child.wait();
            eprintln!("sshd did not start on port {port}: {said}");
        }
        panic!("sshd did not start");
    }

    fn dir(&self) -> &Path {
        self.keys.path()
    }

    /// The `dsh exec-helper` processes running under this server (its sessions'
    /// descendants), by pid.
    pub fn helpers(&self) -> Vec<i32> {
        let server = self.child.id() as i32;
        let parent = |pid: i32| -> Option<i32> {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 2..];
            rest.split(' ').nth(1)?.parse().ok()
        };
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let is_helper = cmdline
                    .split(|b| *b == 0)
                    .any(|a| a == b"exec-helper".as_slice());
                let mut at = *pid;
                let mut under = false;
                for _ in 0..64 {
                    match parent(at) {
                        Some(p) if p == server => {
                            under = true;
                            break;
                        }
                        Some(p) if p > 1 => at = p,
                        _ => break,
                    }
                }
                is_helper && under && crate::common::alive(*pid)
            })
            .collect()
    }

    /// `[exec.ssh]` settings that reach this server as the current user and run
    /// commands through the `dsh exec-helper` it caches in `shared_helper_dir()`
    /// (`helper = "required"`: a test never passes on the wrapper path by accident).
    pub fn helper_config(&self) -> SshConfig {
        SshConfig {
            helper: HelperMode::Required,
            helper_dir: shared_helper_dir(),
            ..self.config()
        }
    }

    /// `[exec.ssh]` settings that reach this server as the current user, on the
    /// wrapper path (`helper = "off"`).
    pub fn config(&self) -> SshConfig {
        SshConfig {
            host: "127.0.0.1".into(),
            port: self.port,
            user: None,
            identity_file: Some(self.dir().join("client_key")),
            known_hosts: KnownHosts::Strict,
            known_hosts_file: Some(self.dir().join("known_hosts")),
            connect_timeout_ms: 5_000,
            path_map: Vec::new(),
            ssh: PathBuf::from("ssh"),
            helper: HelperMode::Off,
            helper_dir: shared_helper_dir(),
            sandbox: false,
        }
    }
}

impl Sshd {
    /// The `[exec.ssh]` table of a daemon's config file reaching this server (after
    /// `[exec] kind = "ssh"`): the wrapper path with `HelperMode::Off`, else the
    /// helper cached in `shared_helper_dir()`.
    pub fn config_toml(&self, helper: HelperMode) -> String {
        let c = self.config();
        format!(
            "[exec.ssh]\nhost = \"127.0.0.1\"\nport = {}\nidentity_file = \"{}\"\n\
             known_hosts_file = \"{}\"\nhelper = \"{}\"\nhelper_dir = \"{}\"\n",
            c.port,
            self.dir().join("client_key").display(),
            self.dir().join("known_hosts").display(),
            match helper {
                HelperMode::Off => "off",
                HelperMode::Auto => "auto",
                HelperMode::Required => "required",
            },
            shared_helper_dir(),
        )
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
