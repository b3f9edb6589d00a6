//! The model endpoint's API key: where dsh finds it, whether the endpoint needs one, and
//! the key file `dsh login` writes.
//!
//! The key comes from the environment first (`DSH_API_KEY`, then `[model] api_key_env`),
//! as it always did; else from the key file next to the user's config file
//! (`$XDG_CONFIG_HOME/dsh/api_key`, else `~/.config/dsh/api_key`), 0600, which `dsh login`
//! writes and `dsh logout` (or ACP `logout`) removes. The file is read again at every
//! model request, so a login or logout reaches a daemon that is already running without a
//! restart. A leaf below `llm` and `acp`: it knows the config's words, nothing of ACP.

use crate::config::ModelConfig;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The key file's name, beside `config.toml` in the user's config directory.
pub const KEY_FILE_NAME: &str = "api_key";

/// Where `dsh login` stores the key: `$XDG_CONFIG_HOME/dsh/api_key`, else
/// `~/.config/dsh/api_key`; `None` when neither variable is set (nowhere to keep it).
pub fn key_file() -> Option<PathBuf> {
    crate::config::user_config_file().map(|f| f.with_file_name(KEY_FILE_NAME))
}

/// Where the model's key comes from, resolved once per model: a key in the environment
/// is fixed for the process's life; the key file is read at each use.
#[derive(Clone)]
pub enum KeySource {
    /// The environment variable `var` holds it.
    Env {
        /// Which variable (named in messages; the key never is).
        var: String,
        /// The key itself.
        key: String,
    },
    /// The key file (it may not exist yet: a later `dsh login` creates it).
    File(PathBuf),
    /// No environment variable holds one and there is no place for a key file.
    Nowhere,
}

impl std::fmt::Debug for KeySource {
    // Never the key: a `Debug` of the model must not print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Env { var, .. } => write!(f, "Env({var})"),
            Self::File(path) => write!(f, "File({})", path.display()),
            Self::Nowhere => f.write_str("Nowhere"),
        }
    }
}

impl KeySource {
    /// The source `config` and the environment (`env` reads a variable) name:
    /// `DSH_API_KEY`, then `[model] api_key_env`, then the key file.
    pub fn resolve(config: &ModelConfig, env: impl Fn(&str) -> Option<String>) -> Self {
        let nonempty = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        for var in ["DSH_API_KEY", config.api_key_env.as_str()] {
            if let Some(key) = nonempty(var) {
                return Self::Env {
                    var: var.to_string(),
                    key: key.trim().to_string(),
                };
            }
        }
        key_file().map_or(Self::Nowhere, Self::File)
    }

    /// The key now: the environment's, or the key file's when it holds one.
    pub fn key(&self) -> Option<String> {
        match self {
            Self::Env { key, .. } => Some(key.clone()),
            Self::File(path) => read_key(path),
            Self::Nowhere => None,
        }
    }
}

/// Whether the endpoint `config` (with `DSH_MODEL_BASE_URL` from `env`) needs a key:
/// `[model] keyless` says so when set; unset, an endpoint on a loopback address (a
/// local vLLM, llama.cpp or Ollama) needs none and any other does.
pub fn needs_key(config: &ModelConfig, env: impl Fn(&str) -> Option<String>) -> bool {
    if let Some(keyless) = config.keyless {
        return !keyless;
    }
    let base = env("DSH_MODEL_BASE_URL")
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| config.base_url.clone());
    !is_loopback(&base)
}

/// Whether `url`'s host is this machine (`localhost`, 127.0.0.0/8, `::1`).
fn is_loopback(url: &str) -> bool {
    let Ok(uri) = url.parse::<hyper::Uri>() else {
        return false;
    };
    let Some(host) = uri.host() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// What a person must do to give dsh a key, in the words an editor shows with an
/// auth-required error.
pub fn how_to_provide(config: &ModelConfig) -> String {
    let file = key_file().map_or_else(
        || "(no key file: neither XDG_CONFIG_HOME nor HOME is set)".to_string(),
        |p| p.display().to_string(),
    );
    format!(
        "dsh has no API key for the model endpoint {}. Run `dsh login` in a terminal (it asks for the key \
         and keeps it in {file}), or set {} (or DSH_API_KEY) in the environment dsh starts in. A local \
         server (DSH_MODEL_BASE_URL or [model] base_url on a loopback address) needs no key; for another \
         that needs none, set `keyless = true` under [model] in the config file.",
        config.base_url, config.api_key_env
    )
}

/// The key file's key, trimmed; `None` when it is missing, empty or unreadable (a
/// symlink or anything but a regular file is refused, as every private file is).
pub fn read_key(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut file = crate::fsutil::open_regular(path, false).ok()?;
    let mut text = String::new();
    // A key is short; a huge file is not a key file.
    Read::by_ref(&mut file)
        .take(64 * 1024)
        .read_to_string(&mut text)
        .ok()?;
    let key = text.trim();
    (!key.is_empty()).then(|| key.to_string())
}

/// Stores `key` at `path`, 0600 in a 0700 directory, replacing any older key whole (a
/// new file renamed over it, so a reader never sees half a key).
pub fn store_key(path: &Path, key: &str) -> io::Result<()> {
    let dir = path.parent().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "the key file has no directory")
    })?;
    crate::fsutil::ensure_private_dir(dir)?;
    let fresh = dir.join(format!(".{KEY_FILE_NAME}.{}", std::process::id()));
    let _ = std::fs::remove_file(&fresh);
    let written = crate::fsutil::private_file()
        .write(true)
        .create_new(true)
        .open(&fresh)
        .and_then(|mut f| {
            f.write_all(key.trim().as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&fresh, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&fresh);
    }
    written
}

/// Removes the key file: `Ok(true)` when there was one.
pub fn remove_key(path: &Path) -> io::Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(base_url: &str, keyless: Option<bool>) -> ModelConfig {
        ModelConfig {
            base_url: base_url.into(),
            keyless,
            ..ModelConfig::default()
        }
    }

    #[test]
    fn a_loopback_endpoint_needs_no_key_unless_told_and_others_do() {
        let none = |_: &str| None;
        assert!(needs_key(&config("https://api.deepseek.com", None), none));
        assert!(needs_key(&config("https://example.org/v1", None), none));
        assert!(!needs_key(&config("http://127.0.0.1:8000/v1", None), none));
        assert!(!needs_key(&config("http://localhost:11434/v1", None), none));
        assert!(!needs_key(&config("http://[::1]:8000/v1", None), none));
        assert!(needs_key(
            &config("http://127.0.0.1:8000/v1", Some(false)),
            none
        ));
        assert!(!needs_key(
            &config("https://example.org/v1", Some(true)),
            none
        ));
        // The environment's endpoint is the one judged.
        let local = |k: &str| (k == "DSH_MODEL_BASE_URL").then(|| "http://127.0.0.1:1/v1".into());
        assert!(!needs_key(&config("https://api.deepseek.com", None), local));
    }

    #[test]
    fn the_key_file_is_private_replaced_whole_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conf/dsh/api_key");
        assert_eq!(read_key(&path), None);
        store_key(&path, "  sk-one \n").unwrap();
        assert_eq!(read_key(&path).as_deref(), Some("sk-one"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        store_key(&path, "sk-two").unwrap();
        assert_eq!(read_key(&path).as_deref(), Some("sk-two"));
        assert!(remove_key(&path).unwrap());
        assert!(!remove_key(&path).unwrap());
        assert_eq!(read_key(&path), None);
    }

    #[test]
    fn the_environment_comes_before_the_file_and_never_shows_in_debug() {
        let env = |k: &str| (k == "DSH_API_KEY").then(|| "sk-secret".to_string());
        let source = KeySource::resolve(&ModelConfig::default(), env);
        assert_eq!(source.key().as_deref(), Some("sk-secret"));
        assert!(!format!("{source:?}").contains("sk-secret"));
    }
}
