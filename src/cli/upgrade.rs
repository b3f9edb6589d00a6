//! `dsh upgrade` and `dsh restart`.

use crate::cli::reach::Where;
use dsh::rpc::client::DaemonClient;

/// `dsh upgrade` / `dsh restart`: asks the daemon to hand over, then asks on the same
/// connection how it went; that question waits (unread, through the freeze) for the
/// program that serves next to answer it.
pub(crate) async fn upgrade(at: Where) -> Result<(), String> {
    let client = DaemonClient::connect(&at.socket())
        .await
        .map_err(|e| e.to_string())?;
    let started = client
        .request("_dsh/upgrade", serde_json::json!({}))
        .await
        .map_err(|e| format!("upgrade refused: {e}"))?;
    let started: dsh::acp::UpgradeStarted = serde_json::from_value(started)
        .map_err(|e| format!("the daemon's answer is not what this dsh reads: {e}"))?;
    let outcome = client
        .request("_dsh/upgrade/outcome", serde_json::json!({}))
        .await
        .map_err(|e| format!("the daemon did not say how the upgrade went: {e}"))?;
    let outcome: Option<dsh::acp::UpgradeOutcome> = serde_json::from_value(outcome)
        .map_err(|e| format!("the daemon's answer is not what this dsh reads: {e}"))?;
    match outcome {
        Some(dsh::acp::UpgradeOutcome::Upgraded { from_version }) => {
            let status = client
                .request("_dsh/status", serde_json::json!({}))
                .await
                .map_err(|e| e.to_string())?;
            println!(
                "upgraded: dsh {from_version} -> {} (pid {}); connections and sessions kept",
                status["version"].as_str().unwrap_or("?"),
                status["pid"]
            );
            Ok(())
        }
        Some(dsh::acp::UpgradeOutcome::RolledBack { reason }) => Err(format!(
            "the upgrade from {} failed and the daemon serves on as it was: {reason}",
            started.from_version
        )),
        None => Err("the daemon did not record an upgrade".into()),
    }
}
