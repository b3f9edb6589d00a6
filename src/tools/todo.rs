//! `todo_write`: the model's plan, with the shape models know from Claude Code's
//! TodoWrite (`{todos: [{content, status, priority?}]}`), each call replacing the list.
//!
//! A tool of the registry like any, so its calls go through the waterfall (audited,
//! seen and stoppable by hooks; the policy allows it in every mode: it changes nothing
//! but the session's plan). The tool only checks the plan and answers the model; the
//! turn shows an allowed call's plan (`agent::plan`), from the arguments that ran.

use super::schema::ToolSchema;
use super::{Tool, ToolKind, ToolOutput};
use crate::hooks::waterfall::ToolExecution;
use crate::store::{PlanItem, PlanPriority, PlanStatus};
use serde_json::Value;
use std::sync::{Arc, LazyLock};

/// The tool's name, as the model calls it.
pub const NAME: &str = "todo_write";

/// Its schema (`proto/tools/todo_write.json`): the caps on the list (50 steps of 500
/// characters) are the schema's, so a call over them is refused with the schema's words.
static SCHEMA: LazyLock<Option<Arc<ToolSchema>>> = LazyLock::new(|| {
    ToolSchema::parse(include_str!("../../proto/tools/todo_write.json"))
        .map(Arc::new)
        .map_err(|e| tracing::error!("proto/tools/todo_write.json: {e}"))
        .ok()
});

/// The tool, when its schema loaded (it is embedded: a test proves it does).
pub fn tool() -> Option<Arc<dyn Tool>> {
    let schema = SCHEMA.clone()?;
    Some(Arc::new(TodoWrite { schema }))
}

struct TodoWrite {
    schema: Arc<ToolSchema>,
}

#[async_trait::async_trait]
impl Tool for TodoWrite {
    fn schema(&self) -> &Arc<ToolSchema> {
        &self.schema
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    async fn call(&self, call: &ToolExecution) -> ToolOutput {
        match entries(&call.arguments) {
            Ok(entries) => {
                let count = |s: PlanStatus| entries.iter().filter(|e| e.status == s).count();
                ToolOutput::ok(format!(
                    "The plan now has {} step(s): {} completed, {} in progress, {} pending.",
                    entries.len(),
                    count(PlanStatus::Completed),
                    count(PlanStatus::InProgress),
                    count(PlanStatus::Pending)
                ))
            }
            Err(why) => ToolOutput::error(format!("The plan was not changed: {why}")),
        }
    }
}

/// The steps of a call's arguments, or why they are not a plan.
pub fn entries(arguments: &Value) -> Result<Vec<PlanItem>, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_embedded_schema_loads() {
        assert!(tool().is_some());
    }

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
