//! `dsh kill`.

use crate::cli::reach::{Where, ask_daemon_with};

pub(crate) async fn kill(at: Where, task_id: dsh::exec::TaskId) -> Result<(), String> {
    let answer = ask_daemon_with(
        &at,
        "_dsh/tasks/kill",
        serde_json::json!({ "taskId": task_id.to_string() }),
    )
    .await?;
    match answer["outcome"].as_str() {
        Some("killed") => println!("killed {task_id}"),
        _ => println!("{task_id} had already finished"),
    }
    Ok(())
}
