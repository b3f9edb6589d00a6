//! `--config CANDIDATE` when a daemon already runs (issue 45's experiments: the same
//! prompts under several policies). The config a daemon judges by is the one it
//! started with (or reloaded), so a client's `--config` would be silently ignored by
//! the daemon it connects to. Instead the running daemon is asked for the fingerprint
//! of its config in force ([`dsh::config::Config::fingerprint`]) and the candidate's is
//! compared with it: the same, the turns run there; not the same, `dsh exec` (one turn
//! or a batch) runs on a daemon of its own for the candidate, started as `dsh acp`
//! starts one (`reach::connect_or_start`) on a private socket beside the user's, with
//! the running daemon's state directory, so its sessions stay loadable by the user's
//! daemon and its audit lines are where `dsh policy replay --run` reads; it is stopped
//! at the command's end. `dsh chat` refuses instead (a long session on a throwaway
//! daemon would vanish with it). With no daemon running, the command starts the
//! user's daemon with the candidate, as before: it judges by it.

use crate::cli::reach::{Where, ask_daemon_typed};
use dsh::acp::StatusResponse;
use dsh::rpc::client::ClientError;
use std::path::PathBuf;

/// The daemon a command's turns run on.
pub(crate) struct Picked {
    /// Where its clients connect (and what starts it if need be).
    pub at: Where,
    /// A daemon started for the candidate alone, stopped by [`Picked::finish`].
    own: Option<PathBuf>,
}

/// What the running daemon says about its config, when one runs and the command
/// named a candidate.
enum Running {
    /// No daemon answers, or no `--config` was given: nothing to compare.
    NotAsked,
    /// It judges by the candidate.
    Same,
    /// It judges by another config: its pid and state directory.
    Other { pid: u32, state_dir: PathBuf },
}

async fn running(at: &Where) -> Result<Running, String> {
    if at.config.is_none() {
        return Ok(Running::NotAsked);
    }
    let status =
        match ask_daemon_typed(at, "_dsh/status", serde_json::json!({"stateUsage": false})).await {
            Ok(status) => status,
            Err(ClientError::Io { .. }) => return Ok(Running::NotAsked),
            Err(e) => return Err(format!("cannot ask the running daemon for its config: {e}")),
        };
    let status: StatusResponse = serde_json::from_value(status)
        .map_err(|e| format!("the daemon's status is not what this dsh reads: {e}"))?;
    // The candidate as that daemon would read it: with its state directory.
    let mut candidate = at.clone();
    candidate.state_dir = Some(status.state_dir.clone());
    let fingerprint = candidate.config()?.fingerprint();
    Ok(
        if status.config_fingerprint.as_deref() == Some(fingerprint.as_str()) {
            Running::Same
        } else {
            Running::Other {
                pid: status.pid,
                state_dir: status.state_dir,
            }
        },
    )
}

/// The daemon `dsh exec` (`name`: its run id) runs on: the one of `at`, or, when `at`
/// names a candidate config that a running daemon does not judge by, one of its own.
pub(crate) async fn pick(at: &Where, name: &str) -> Result<Picked, String> {
    let Running::Other { pid, state_dir } = running(at).await? else {
        return Ok(Picked {
            at: at.clone(),
            own: None,
        });
    };
    let socket = at.socket();
    let parent = socket
        .parent()
        .ok_or_else(|| format!("socket path has no directory: {}", socket.display()))?;
    // Beside the user's socket (a private directory already), named by the run: not
    // there before, so no other daemon answers on it.
    let dir = parent.join(name);
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    }
    let config = at.config.clone().unwrap_or_default();
    eprintln!(
        "dsh: the running daemon (pid {pid}) does not judge by {}: {name} runs on a daemon of \
         its own for it (state directory {}), stopped at the end",
        config.display(),
        state_dir.display()
    );
    Ok(Picked {
        at: Where {
            socket: Some(dir.join("dsh.sock")),
            state_dir: Some(state_dir),
            config: Some(config),
        },
        own: Some(dir),
    })
}

/// For `dsh chat`: an error naming the candidate when a running daemon does not judge
/// by it.
pub(crate) async fn refuse_unless_in_force(at: &Where) -> Result<(), String> {
    match running(at).await? {
        Running::NotAsked | Running::Same => Ok(()),
        Running::Other { pid, .. } => Err(format!(
            "the running daemon (pid {pid}) does not judge by {}, and a chat runs on it: \
             `dsh reload` it with that config, or `dsh stop` it and start the chat again \
             (`dsh exec --config` runs on a daemon of its own instead)",
            at.config
                .as_deref()
                .map(|c| c.display().to_string())
                .unwrap_or_default()
        )),
    }
}

impl Picked {
    /// Stops the daemon of its own, if there is one, and removes its directory. A
    /// failure is said, not fatal: that daemon exits by itself once idle.
    pub(crate) async fn finish(self) {
        let Some(dir) = self.own else {
            return;
        };
        // Started only by the first turn's connection: a command that failed before
        // any has nothing to stop.
        if self.at.socket().exists()
            && let Err(e) = crate::cli::stop::stop_quietly(&self.at).await
        {
            eprintln!("dsh: the candidate's daemon: {e}");
            return;
        }
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            eprintln!("dsh: cannot remove {}: {e}", dir.display());
        }
    }
}
