//! `dsh stop`.

use crate::cli::reach::{Where, ask_daemon_typed, ask_daemon_with};
use dsh::rpc::client::ClientError;
use std::time::Duration;

pub(crate) async fn stop(at: Where) -> Result<(), String> {
    stop_quietly(&at).await?;
    println!("dsh daemon stopped");
    Ok(())
}

/// Stops the daemon of `at` and returns once it is gone (its socket removed, its
/// process ended): also how a batch stops the daemon it ran on for a candidate config.
pub(crate) async fn stop_quietly(at: &Where) -> Result<(), String> {
    // Known first, so `stop` can return only once the process itself is gone.
    let pid = ask_daemon_with(at, "_dsh/status", serde_json::json!({"stateUsage": false}))
        .await
        .ok()
        .and_then(|s| s["pid"].as_i64());
    match ask_daemon_typed(at, "_dsh/stop", serde_json::json!({})).await {
        // The daemon may close the connection as it starts shutting down, before
        // its answer is written; the socket going away below is the real proof.
        Ok(_) | Err(ClientError::Closed) => {}
        Err(e) => return Err(e.to_string()),
    }
    // The daemon removes its socket as the last step of a clean shutdown.
    let socket = at.socket();
    let mut pause = Duration::from_millis(5);
    for _ in 0..400 {
        let running = pid.is_some_and(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|st| st.rfind(')').and_then(|i| st[i + 2..].chars().next()))
                .is_some_and(|state| state != 'Z' && state != 'X')
        });
        if !socket.exists() && !running {
            return Ok(());
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
    Err("the daemon did not finish shutting down in time".into())
}
