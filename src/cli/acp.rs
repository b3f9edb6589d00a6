//! `dsh acp`: what an editor launches.

use crate::cli::reach::{Where, connect_or_start, warn_if_daemon_is_older};
use tokio::io::AsyncWriteExt;

pub(crate) async fn acp(at: Where, agent: Option<String>) -> Result<(), String> {
    let stream = connect_or_start(&at).await?;
    warn_if_daemon_is_older(&stream, &at.socket());
    // Editors start agents on pipes: hand them to the daemon and step out of the
    // path (`rpc::handover`); copy only when that cannot be done. A wrapped agent's
    // connection is copied: its `_dsh/wrap` goes first (`cli::agent`).
    let handed = match agent {
        Some(_) => Ok(false),
        None => dsh::rpc::handover::offer(&stream).await,
    };
    match handed {
        Ok(true) => {
            dsh::rpc::handover::wait_for_end(stream).await;
            return Ok(());
        }
        Ok(false) => {}
        Err(e) => return Err(format!("cannot hand the connection to the daemon: {e}")),
    }
    // Registered for reads only, as the daemon's side is (`rpc::socket`).
    let (mut from_daemon, mut to_daemon) = dsh::rpc::socket::split(stream)
        .map_err(|e| format!("cannot use the daemon's socket: {e}"))?;
    if let Some(agent) = &agent {
        super::agent::ask_for_agent(agent, &mut from_daemon, &mut to_daemon).await?;
    }
    let (mut stdin, mut stdout) = dsh::rpc::stdio::stdio();
    let up = async {
        let _ = tokio::io::copy(&mut stdin, &mut to_daemon).await;
        let _ = to_daemon.shutdown().await;
    };
    let down = async {
        let _ = tokio::io::copy(&mut from_daemon, &mut stdout).await;
        let _ = stdout.flush().await;
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
    Ok(())
}
