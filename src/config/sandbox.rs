//! `[exec.sandbox]`: the bubblewrap sandbox's paths and its network (`[exec.sandbox.network]`).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `[exec.sandbox]`: how the bubblewrap sandbox is built.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// The bubblewrap program (a name looked up in PATH, or a path).
    pub bwrap: PathBuf,
    /// How commands reach the network (E10): through dsh's proxy, each host judged
    /// (the default), not at all, or the host's network unguarded.
    pub network: NetworkConfig,
    /// Directories every command may write to, besides the calling session's cwd
    /// and the directories the session was granted.
    pub writable: Vec<PathBuf>,
    /// Paths a command cannot read (E9): a directory shows as empty, a file as
    /// empty. Absolute, or `~/...` for the daemon's home. The list replaces the
    /// defaults (secrets of common tools), so a user narrows it by leaving one out;
    /// dsh's own state and config directories are masked whatever it says.
    pub deny_read: Vec<PathBuf>,
    /// Whether commands may create Unix sockets (E8 blocks them by default: a local
    /// socket is how a command reaches a host service the sandbox cannot see).
    pub allow_unix_sockets: bool,
    /// Whether commands may write `.git/config` in a writable root. Its hooks stay
    /// read-only, but a writable config can name programs git runs (fsmonitor,
    /// hooksPath, a pager, a credential helper): this gives up E9 for git, and so
    /// also lets a command create repositories (the tripwires leave a new `.git`).
    pub allow_git_config: bool,
    /// Whether the home directory (or a directory holding it) may be a writable
    /// root. Off, a command there is refused: a home holds what runs at the next
    /// login or shell (systemd user units, `~/.local/bin` ahead on PATH, autostart
    /// entries, every tool's startup file), more than any list of protected names
    /// can cover.
    pub allow_home_root: bool,
}

/// `[exec.sandbox] network`: a mode (`network = "proxy"`, `"none"`, `"host"`; `true` and
/// `false` are read as `"host"` and `"none"`, what they meant before the proxy), or the
/// table `[exec.sandbox.network]` with the mode and how the proxy judges hosts.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct NetworkConfig {
    pub mode: NetworkMode,
    /// What mode `auto` does with a host no rule, hook or grant decides.
    pub default: NetworkDefault,
    /// Hosts let through without asking: sugar for `[[permissions.rules]] tool =
    /// "network"`, `host = ...`, `action = "allow"` (each entry `HOST` or `HOST:PORT`;
    /// `*.example.com` matches its subdomains only).
    pub allow: Vec<String>,
    /// Hosts refused, the same way with `action = "deny"`.
    pub deny: Vec<String>,
}

/// How a sandboxed command reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// A private network namespace whose only way out is dsh's proxy on its loopback:
    /// each new host is a call of the tool `network` through the waterfall.
    #[default]
    Proxy,
    /// A private network namespace with only loopback.
    None,
    /// The host's own network, unguarded (what `network = true` was).
    Host,
}

/// What mode `auto` does with a host nothing else decided (`ask` asks, `read-only`
/// refuses, whatever this says).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkDefault {
    #[default]
    Ask,
    Allow,
    Deny,
}

/// The table form of [`NetworkConfig`], as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkTable {
    #[serde(default)]
    mode: NetworkMode,
    #[serde(default)]
    default: NetworkDefault,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

impl<'de> Deserialize<'de> for NetworkConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = NetworkConfig;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    r#""proxy", "none", "host", or a table with mode, default, allow and deny"#,
                )
            }
            fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<NetworkConfig, E> {
                let mode = if on {
                    NetworkMode::Host
                } else {
                    NetworkMode::None
                };
                Ok(NetworkConfig {
                    mode,
                    ..NetworkConfig::default()
                })
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<NetworkConfig, E> {
                let mode =
                    NetworkMode::deserialize(serde::de::value::StrDeserializer::<E>::new(text))?;
                Ok(NetworkConfig {
                    mode,
                    ..NetworkConfig::default()
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<NetworkConfig, A::Error> {
                let table =
                    NetworkTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(NetworkConfig {
                    mode: table.mode,
                    default: table.default,
                    allow: table.allow,
                    deny: table.deny,
                })
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// The secrets a sandboxed command cannot read unless `[exec.sandbox] deny_read`
/// says otherwise (E9): the credential files of the tools a developer's home usually
/// holds, each where the tool's own documentation puts it. Neither Anthropic's
/// sandbox-runtime nor Codex masks reads by default (both leave it to
/// configuration); this list starts from the secrets their documentation names
/// (`~/.ssh`, `~/.aws`, `~/.gnupg`, `~/.kube`, `~/.docker`, `~/.netrc`) and adds
/// git's, gh's, podman's, gcloud's, azure's, npm's, PyPI's, cargo's, terraform's,
/// vault's, rclone's and the coding agents' own (Claude Code, Codex, Gemini CLI).
/// An entry under `$XDG_CONFIG_HOME/` or `$XDG_DATA_HOME/` is masked both where
/// the variable points and at its default (`~/.config`, `~/.local/share`): a tool
/// may ignore the variable ([`DenyRead::paths`]).
pub const DEFAULT_DENY_READ: &[&str] = &[
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "$XDG_CONFIG_HOME/gcloud",
    "~/.kube",
    "~/.docker/config.json",
    "$XDG_CONFIG_HOME/containers/auth.json",
    "~/.netrc",
    "~/.git-credentials",
    "$XDG_CONFIG_HOME/git/credentials",
    "$XDG_CONFIG_HOME/gh",
    "~/.npmrc",
    "~/.pypirc",
    "~/.cargo/credentials.toml",
    "~/.cargo/credentials",
    "~/.gem/credentials",
    "~/.m2/settings.xml",
    "~/.pgpass",
    "~/.vault-token",
    "~/.terraform.d",
    "~/.terraformrc",
    "$XDG_CONFIG_HOME/rclone",
    "$XDG_DATA_HOME/keyrings",
    "~/.claude/.credentials.json",
    "~/.codex/auth.json",
    "~/.gemini/oauth_creds.json",
];

/// Where a `deny_read` entry points: the forms it may take, and the paths each
/// resolves to for a daemon with a given home and XDG variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DenyRead {
    /// `/...`.
    Absolute(PathBuf),
    /// `~/REST`: under the daemon's home.
    Home(PathBuf),
    /// `$XDG_CONFIG_HOME/REST`.
    ConfigHome(PathBuf),
    /// `$XDG_DATA_HOME/REST`.
    DataHome(PathBuf),
}

impl DenyRead {
    /// The entry as written, or `None` for a form no entry may take (checked
    /// at load by [`SandboxConfig::check`]).
    pub fn parse(entry: &Path) -> Option<Self> {
        use std::path::Component;
        let mut parts = entry.components();
        let first = parts.next()?;
        let rest: PathBuf = parts.collect();
        match first {
            Component::RootDir => Some(Self::Absolute(entry.to_path_buf())),
            Component::Normal(word) if word == "~" => Some(Self::Home(rest)),
            Component::Normal(word) if word == "$XDG_CONFIG_HOME" => Some(Self::ConfigHome(rest)),
            Component::Normal(word) if word == "$XDG_DATA_HOME" => Some(Self::DataHome(rest)),
            _ => None,
        }
    }

    /// The paths to mask for a daemon whose home is `home` and whose environment
    /// says `var`: an XDG entry both where the variable points (when it is set and
    /// absolute, as the XDG specification requires) and at its default. Nothing for
    /// a home-relative entry without a home.
    pub fn paths(
        &self,
        home: Option<&Path>,
        var: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Vec<PathBuf> {
        let xdg = |name: &str, default: &str, rest: &Path| {
            let mut paths: Vec<PathBuf> = var(name)
                .map(PathBuf::from)
                .filter(|dir| dir.is_absolute())
                .map(|dir| dir.join(rest))
                .into_iter()
                .collect();
            if let Some(home) = home {
                let fallback = home.join(default).join(rest);
                if !paths.contains(&fallback) {
                    paths.push(fallback);
                }
            }
            paths
        };
        match self {
            Self::Absolute(path) => vec![path.clone()],
            Self::Home(rest) => home.map(|h| h.join(rest)).into_iter().collect(),
            Self::ConfigHome(rest) => xdg("XDG_CONFIG_HOME", ".config", rest),
            Self::DataHome(rest) => xdg("XDG_DATA_HOME", ".local/share", rest),
        }
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            bwrap: PathBuf::from("bwrap"),
            network: NetworkConfig::default(),
            writable: Vec::new(),
            deny_read: DEFAULT_DENY_READ.iter().map(PathBuf::from).collect(),
            allow_unix_sockets: false,
            allow_git_config: false,
            allow_home_root: false,
        }
    }
}

impl SandboxConfig {
    /// Why a `deny_read` entry or a `writable` root cannot be enforced, if one
    /// cannot: every entry must be absolute (or `~/...`, `$XDG_CONFIG_HOME/...`,
    /// `$XDG_DATA_HOME/...`) without `..`, and no
    /// masked path may contain a configured writable root (the mask would hide it).
    pub fn check(&self) -> Result<(), String> {
        for path in &self.deny_read {
            check_sandbox_path("exec.sandbox.deny_read", path, true)?;
        }
        for path in &self.writable {
            check_sandbox_path("exec.sandbox.writable", path, false)?;
        }
        for denied in &self.deny_read {
            for root in &self.writable {
                if matches!(DenyRead::parse(denied), Some(DenyRead::Absolute(_)))
                    && root.starts_with(denied)
                {
                    return Err(format!(
                        "exec.sandbox.deny_read entry {} contains the writable root {}: the \
                         mask would hide the root, so neither could hold",
                        denied.display(),
                        root.display()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// An absolute path (or, where `home_ok`, one under `~/`, `$XDG_CONFIG_HOME/` or
/// `$XDG_DATA_HOME/`) with no `.` or `..`.
fn check_sandbox_path(key: &str, path: &Path, home_ok: bool) -> Result<(), String> {
    let rooted = match DenyRead::parse(path) {
        Some(DenyRead::Absolute(_)) => true,
        Some(_) => home_ok,
        None => false,
    };
    if !rooted {
        let form = if home_ok {
            "absolute or ~/..., $XDG_CONFIG_HOME/... or $XDG_DATA_HOME/..."
        } else {
            "absolute"
        };
        return Err(format!(
            "{key} entry {} must be {form}: a relative path depends on where dsh runs",
            path.display()
        ));
    }
    // `components()` drops a `.` in the middle, so the raw parts are read.
    if path
        .as_os_str()
        .as_encoded_bytes()
        .split(|b| *b == b'/')
        .any(|part| part == b"." || part == b"..")
    {
        return Err(format!(
            "{key} entry {} has `.` or `..`: write the path it means",
            path.display()
        ));
    }
    Ok(())
}
