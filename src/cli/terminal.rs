//! Permission questions asked at the controlling terminal (`/dev/tty`), for the CLI's
//! ACP clients: the question goes to the person even when stdin and stdout belong to a
//! pipe, and a process with no terminal is never mistaken for one with a person.

use agent_client_protocol_schema::v1 as acp;
use std::io::{BufRead, BufReader, Write};

const TTY: &str = "/dev/tty";

/// Whether a controlling terminal can be opened (a process started without one, by
/// `setsid`, cron or CI, has none).
pub fn reachable() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(TTY)
        .is_ok()
}

/// The agent's text as it may stand on a terminal: control characters (escape
/// sequences that would rewrite the screen, a carriage return that would write over
/// a line) and marks that reorder text are shown as `?`; newlines and tabs stay.
pub fn shown(text: &str) -> String {
    text.chars()
        .map(|c| {
            let reorders = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
            if (c.is_control() && c != '\n' && c != '\t') || reorders {
                '?'
            } else {
                c
            }
        })
        .collect()
}

/// The key that picks an option of this kind.
fn key(kind: acp::PermissionOptionKind) -> &'static str {
    match kind {
        acp::PermissionOptionKind::AllowOnce => "o",
        acp::PermissionOptionKind::AllowAlways => "a",
        acp::PermissionOptionKind::RejectOnce => "r",
        acp::PermissionOptionKind::RejectAlways => "R",
        _ => "",
    }
}

/// Asks the person at the terminal; blocks until a line is read. `None` when the
/// terminal cannot be used or the answer picks no option (refused: fail closed).
pub fn ask(request: &acp::RequestPermissionRequest) -> Option<acp::PermissionOption> {
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(TTY)
        .ok()?;
    let mut out = tty.try_clone().ok()?;
    let title = request
        .tool_call
        .fields
        .title
        .as_deref()
        .unwrap_or("a tool call");
    let mut question = format!("\ndsh asks: allow {}?\n", shown(title));
    // What the agent gives for the call (a sandbox escape's justification among it).
    for content in request.tool_call.fields.content.iter().flatten() {
        if let acp::ToolCallContent::Content(c) = content
            && let acp::ContentBlock::Text(text) = &c.content
        {
            question.push_str(&format!("  {}\n", shown(&text.text)));
        }
    }
    let offered: Vec<&acp::PermissionOption> = request
        .options
        .iter()
        .filter(|o| !key(o.kind).is_empty())
        .collect();
    let choices: Vec<String> = offered
        .iter()
        .map(|o| format!("[{}] {}", key(o.kind), shown(&o.name)))
        .collect();
    question.push_str(&format!(
        "  {} (anything else: reject) > ",
        choices.join("  ")
    ));
    out.write_all(question.as_bytes()).ok()?;
    out.flush().ok()?;
    let mut line = String::new();
    BufReader::new(tty).read_line(&mut line).ok()?;
    let typed = line.trim();
    offered.into_iter().find(|o| key(o.kind) == typed).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_text_cannot_rewrite_the_terminal() {
        assert_eq!(shown("rm x\u{1b}[2J\r\u{202e}y"), "rm x?[2J??y");
        assert_eq!(shown("two\nlines\tand a tab"), "two\nlines\tand a tab");
    }
}
