//! `dsh login` and `dsh logout`: the terminal side of authentication (ACP's `terminal`
//! auth method, which a client runs in a terminal of its own, and a person at a shell).
//!
//! Login asks for the key on the terminal without echo (a pipe is read as one line, for
//! scripts), checks it with one cheap request to the configured endpoint when that
//! answers, and stores it in the key file (src/auth.rs). A key the endpoint refuses is
//! not stored; one it could not check is stored, and the person is told so.

use crate::config::ModelConfig;
use crate::llm::openai::{KeyCheck, OpenAiModel};
use std::io::Write;
use std::os::fd::AsFd;
use std::time::Duration;

/// How long the key check may take before the key is stored unchecked.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// Turns the terminal's echo off for as long as it lives, and back to what it was
/// when dropped (an error, a Ctrl-C caught below, or the end of the read).
struct NoEcho {
    saved: nix::sys::termios::Termios,
}

impl NoEcho {
    fn on(fd: impl AsFd) -> Option<Self> {
        use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
        let saved = tcgetattr(fd.as_fd()).ok()?;
        let mut quiet = saved.clone();
        quiet.local_flags.remove(LocalFlags::ECHO);
        // The newline is still echoed, so the next line starts where it should.
        quiet.local_flags.insert(LocalFlags::ECHONL);
        tcsetattr(fd.as_fd(), SetArg::TCSANOW, &quiet).ok()?;
        Some(Self { saved })
    }
}

impl Drop for NoEcho {
    fn drop(&mut self) {
        use nix::sys::termios::{SetArg, tcsetattr};
        let _ = tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &self.saved);
    }
}

/// Reads the key from stdin: hidden when it is a terminal. Ctrl-C gives the terminal
/// its echo back before the error.
async fn read_key(endpoint: &str) -> Result<String, String> {
    let stdin = std::io::stdin();
    let tty = nix::unistd::isatty(stdin.as_fd()).unwrap_or(false);
    let hidden = if tty { NoEcho::on(&stdin) } else { None };
    let shown = if hidden.is_some() {
        " (typing is not shown)"
    } else {
        ""
    };
    eprint!("API key for {endpoint}{shown}: ");
    let _ = std::io::stderr().flush();
    // The blocking read runs on its own thread; the guard stays here, so an
    // interrupt restores the terminal even while that thread still waits.
    let read = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    });
    let line = tokio::select! {
        line = read => line.map_err(|e| e.to_string())?.map_err(|e| format!("cannot read the key: {e}"))?,
        _ = tokio::signal::ctrl_c() => {
            drop(hidden);
            eprintln!();
            return Err("interrupted; nothing was stored".into());
        }
    };
    drop(hidden);
    let key = line.trim().to_string();
    if key.is_empty() {
        return Err("no key was given; nothing was stored".into());
    }
    Ok(key)
}

/// `dsh login`: asks for the key, checks it, stores it. `Ok` says what was done.
pub async fn login(config: &ModelConfig) -> Result<String, String> {
    let path = crate::auth::key_file()
        .ok_or("there is nowhere to keep a key: neither XDG_CONFIG_HOME nor HOME is set")?;
    let env = |name: &str| std::env::var(name).ok();
    let endpoint = env("DSH_MODEL_BASE_URL")
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| config.base_url.clone());
    let key = read_key(&endpoint).await?;
    let checked = match OpenAiModel::from_config(config, env)? {
        Some(model) => model.check_key(&key, CHECK_TIMEOUT).await,
        None => KeyCheck::Unverified("no model endpoint is configured".into()),
    };
    let said = match checked {
        KeyCheck::Accepted => format!("{endpoint} accepted the key"),
        KeyCheck::Rejected(why) => {
            return Err(format!(
                "{endpoint} refused the key ({why}); nothing was stored"
            ));
        }
        KeyCheck::Unverified(why) => format!("the key could not be checked ({why})"),
    };
    crate::auth::store_key(&path, &key)
        .map_err(|e| format!("cannot store the key in {}: {e}", path.display()))?;
    Ok(format!("{said}; stored in {} (0600)", path.display()))
}

/// `dsh logout`: removes the stored key. `Ok` says what was done, and names a key in
/// the environment, which still applies.
pub fn logout(config: &ModelConfig) -> Result<String, String> {
    let path = crate::auth::key_file()
        .ok_or("there is no key file to remove: neither XDG_CONFIG_HOME nor HOME is set")?;
    let removed = crate::auth::remove_key(&path)
        .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
    let mut said = if removed {
        format!("removed {}", path.display())
    } else {
        format!("no key was stored in {}", path.display())
    };
    if let crate::auth::KeySource::Env { var, .. } =
        crate::auth::KeySource::resolve(config, |name| std::env::var(name).ok())
    {
        said.push_str(&format!(
            "; {var} in the environment still holds a key, which dsh uses"
        ));
    }
    Ok(said)
}
