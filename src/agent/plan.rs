//! The model's plan: the `todo_write` tool, with the shape models know from Claude
//! Code's TodoWrite (`{todos: [{content, status, priority?}]}`), each call replacing
//! the list. The editor shows it as ACP `plan` updates; the log keeps it (a load shows
//! the latest again).
//!
//! It is the turn's own, not a tool of the registry: it runs nothing, reads and writes
//! nothing outside the session's log, so there is nothing for the waterfall's hooks to
//! allow or stop, and a question about it would only interrupt the person. The call and
//! its result are logged like any (the model reads them back in its history); the client
//! sees the plan, not a tool card.

use super::{TurnContext, TurnEvent};
use crate::store::{Event, PlanItem, PlanPriority, PlanStatus, ToolStatus, now_ms};
use crate::tools::schema::ToolSchema;
use serde_json::Value;
use std::sync::{Arc, LazyLock};

/// The tool's name, as the model calls it.
pub const NAME: &str = "todo_write";

/// Its schema (`proto/tools/todo_write.json`): the caps on the list (50 steps of 500
/// characters) are the schema's, so a call over them is refused with the schema's words.
static SCHEMA: LazyLock<Option<ToolSchema>> = LazyLock::new(|| {
    ToolSchema::parse(include_str!("../../proto/tools/todo_write.json"))
        .map_err(|e| tracing::error!("proto/tools/todo_write.json: {e}"))
        .ok()
});

/// The definition model requests carry.
pub fn definition() -> Option<Arc<serde_json::value::RawValue>> {
    SCHEMA.as_ref().map(|s| s.model_definition().clone())
}

/// The steps of a call's arguments, or why they are not a plan.
fn entries(arguments: &Value) -> Result<Vec<PlanItem>, String> {
    let schema = SCHEMA
        .as_ref()
        .ok_or("the todo_write schema did not load (see the daemon log)")?;
    schema.check(arguments)?;
    let todos = arguments["todos"].as_array().cloned().unwrap_or_default();
    Ok(todos
        .iter()
        .map(|t| PlanItem {
            content: t["content"].as_str().unwrap_or_default().to_string(),
            status: match t["status"].as_str() {
                Some("in_progress") => PlanStatus::InProgress,
                Some("completed") => PlanStatus::Completed,
                _ => PlanStatus::Pending,
            },
            priority: match t["priority"].as_str() {
                Some("high") => PlanPriority::High,
                Some("low") => PlanPriority::Low,
                _ => PlanPriority::Medium,
            },
        })
        .collect())
}

/// Runs one `todo_write` call of the model: logs it, shows the plan, answers the model.
pub fn run(ctx: &TurnContext<'_>, call_id: &str, arguments: Value) {
    ctx.append(Event::ToolCall {
        at_ms: now_ms(),
        call_id: call_id.to_string(),
        tool: NAME.to_string(),
        title: "Update the plan".to_string(),
        kind: crate::store::ToolKind::Think,
        arguments: arguments.clone(),
        by_model: true,
    });
    let (text, is_error) = match entries(&arguments) {
        Ok(entries) => {
            let count = |s: PlanStatus| entries.iter().filter(|e| e.status == s).count();
            let text = format!(
                "The plan now has {} step(s): {} completed, {} in progress, {} pending.",
                entries.len(),
                count(PlanStatus::Completed),
                count(PlanStatus::InProgress),
                count(PlanStatus::Pending)
            );
            ctx.append(Event::Plan {
                at_ms: now_ms(),
                entries: entries.clone(),
            });
            (ctx.events)(TurnEvent::Plan(&entries));
            (text, false)
        }
        Err(why) => (format!("The plan was not changed: {why}"), true),
    };
    ctx.append(Event::ToolResult {
        at_ms: now_ms(),
        call_id: call_id.to_string(),
        status: if is_error {
            ToolStatus::Failed
        } else {
            ToolStatus::Completed
        },
        text,
        is_error,
        spills: Some(Vec::new()),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plan_is_read_with_defaults_and_refused_over_its_caps() {
        let got = entries(&json!({"todos": [
            {"content": "a", "status": "in_progress", "priority": "high"},
            {"content": "b", "status": "pending", "id": "2", "activeForm": "Doing b"}
        ]}))
        .unwrap();
        assert_eq!(got[0].status, PlanStatus::InProgress);
        assert_eq!(got[0].priority, PlanPriority::High);
        assert_eq!(got[1].priority, PlanPriority::Medium);
        let many: Vec<Value> = (0..51)
            .map(|i| json!({"content": format!("step {i}"), "status": "pending"}))
            .collect();
        assert!(entries(&json!({"todos": many})).is_err());
        let long = "x".repeat(501);
        assert!(entries(&json!({"todos": [{"content": long, "status": "pending"}]})).is_err());
        assert!(entries(&json!({"todos": [{"content": "a", "status": "done"}]})).is_err());
    }
}
