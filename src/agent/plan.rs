//! The model's plan as the editor sees it: after an allowed `todo_write` call (the tool
//! is `tools::todo`, run through the waterfall like any), the turn logs the plan and
//! shows it as an ACP `plan` update; a load shows the latest again.

use super::{TurnContext, TurnEvent};
use crate::hooks::waterfall::ToolOutput;
use crate::store::{Event, now_ms};
use serde_json::Value;

pub use crate::tools::todo::NAME;

/// Logs and shows the plan of a `todo_write` call that ran (`arguments`: those that ran,
/// a hook's rewrite included); a refused or failed call changes nothing.
pub fn show(ctx: &TurnContext<'_>, arguments: &Value, out: &ToolOutput) {
    if out.is_error || out.vetoed {
        return;
    }
    let Ok(entries) = crate::tools::todo::entries(arguments) else {
        return;
    };
    ctx.append(Event::Plan {
        at_ms: now_ms(),
        entries: entries.clone(),
    });
    (ctx.events)(TurnEvent::Plan(&entries));
}
