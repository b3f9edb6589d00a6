//! `dsh gc`.

use crate::cli::reach::{Where, ask_daemon_typed};
use dsh::rpc::client::ClientError;

/// `dsh gc [--dry-run]`: through the daemon when one answers; with none, directly on
/// the state directory (`state_dir::collect_alone`: the task records keep what running
/// tasks write, the sessions used in the last day what they name).
pub(crate) async fn gc(at: Where, dry_run: bool) -> Result<(), String> {
    let params = serde_json::json!({ "dryRun": dry_run });
    let (report, through) = match ask_daemon_typed(&at, "_dsh/state/gc", params).await {
        Ok(answer) => (
            serde_json::from_value::<dsh::state_dir::GcReport>(answer)
                .map_err(|e| format!("the daemon's answer is not what this dsh reads: {e}"))?,
            "by the running daemon",
        ),
        Err(ClientError::Io { .. }) => {
            let config = at.config()?;
            let state_dir = config.exec.state_dir();
            let report = tokio::task::spawn_blocking(move || {
                dsh::state_dir::collect_alone(&state_dir, &config.state, dry_run)
            })
            .await
            .map_err(|e| format!("the collection failed: {e}"))?;
            (
                report,
                "no daemon runs: applied to the state directory directly",
            )
        }
        Err(e) => return Err(e.to_string()),
    };
    let human = dsh::state_dir::retention::human_bytes;
    let verb = if dry_run { "would remove" } else { "removed" };
    for r in &report.removed {
        println!(
            "{verb} {} ({}; {})",
            r.path.display(),
            human(r.bytes),
            r.why
        );
    }
    println!(
        "{verb} {} file(s), {} (spill files: {} holding {}, {} kept in use; {through})",
        report.removed.len(),
        human(report.removed_bytes()),
        report.spill_files,
        human(report.spill_bytes),
        report.in_use,
    );
    Ok(())
}
