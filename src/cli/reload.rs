//! `dsh reload`.

use crate::cli::reach::{Where, ask_daemon};

pub(crate) async fn reload(at: Where) -> Result<(), String> {
    let answer = ask_daemon(&at, "_dsh/config/reload").await?;
    let done: dsh::acp::ReloadResponse = serde_json::from_value(answer)
        .map_err(|e| format!("the daemon's answer is not what this dsh reads: {e}"))?;
    println!("reloaded: policy version {}", done.policy_version);
    for section in done.restart_needed {
        println!("needs a restart to take effect: [{section}]");
    }
    Ok(())
}
