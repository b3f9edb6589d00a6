//! The waterfall's permission prompter over ACP: `session/request_permission` to
//! the connection the session is bound to at the moment of asking.

use super::{AcpService, updates};
use crate::registry::{PermissionAnswer, PermissionPrompter, PermissionRequest};
use crate::tools::CallView;
use agent_client_protocol_schema::v1 as acp;
use std::sync::Weak;

/// Asks one session's user through its current connection.
pub struct AcpPrompter {
    agent: Weak<AcpService>,
    session_id: String,
}

impl AcpPrompter {
    pub fn new(agent: Weak<AcpService>, session_id: String) -> Self {
        Self { agent, session_id }
    }
}

const OPTIONS: [(&str, &str, PermissionAnswer); 4] = [
    ("allow_once", "Allow once", PermissionAnswer::AllowOnce),
    (
        "allow_always",
        "Allow always",
        PermissionAnswer::AllowAlways,
    ),
    ("reject_once", "Reject", PermissionAnswer::RejectOnce),
    (
        "reject_always",
        "Reject always",
        PermissionAnswer::RejectAlways,
    ),
];

/// What the person is asked about a connection of a sandboxed command (a call of the
/// tool `network`, E10).
#[derive(Debug, Clone, PartialEq, Eq)]
struct NetworkQuestion {
    /// "`cargo build` wants to reach index.crates.io:443".
    title: String,
    /// The host an "always" answer is remembered for.
    host: String,
}

/// How long the asking command may be in a question's title.
const COMMAND_CHARS: usize = 60;

/// Whether a character of a command may stand in a question's title as it is: not a
/// control character, and not one of the marks that reorder text (bidi overrides
/// and isolates).
fn shown_as_is(c: char) -> bool {
    !c.is_control()
        && !matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The question about a `network` call: who wants to reach what.
fn network_question(tool: &str, arguments: &serde_json::Value) -> Option<NetworkQuestion> {
    if tool != crate::policy::NETWORK_TOOL {
        return None;
    }
    let host = arguments.get("host").and_then(|h| h.as_str())?;
    let host = crate::policy::network::normalize_host(host).unwrap_or_else(|| host.to_owned());
    let target = match arguments.get("port").and_then(|p| p.as_u64()) {
        Some(port) => match u16::try_from(port) {
            Ok(port) => crate::policy::network::target(&host, port),
            Err(_) => format!("{host} port {port}"),
        },
        None => host.clone(),
    };
    let command = arguments
        .get("command")
        .and_then(|c| c.as_str())
        .map(str::trim)
        .filter(|c| !c.is_empty());
    let who = match command {
        Some(command) => {
            let first = command.lines().next().unwrap_or_default().trim_end();
            // The command is the model's text: a control character (an escape
            // sequence, a carriage return) or a direction mark could make the title
            // read as another command. Each shows as `?`.
            let mut shown: String = first
                .chars()
                .take(COMMAND_CHARS)
                .map(|c| if shown_as_is(c) { c } else { '?' })
                .collect();
            let more_lines = command.lines().count().saturating_sub(1);
            if first.chars().count() > COMMAND_CHARS {
                shown.push('…');
            }
            let mut who = format!("`{}`", shown.replace('`', "'"));
            if more_lines > 0 {
                who.push_str(&format!(" (+{more_lines} more line(s))"));
            }
            who
        }
        None => "A command".to_owned(),
    };
    let place = if crate::policy::network::is_this_machine(&host) {
        " on this machine (outside the sandbox)"
    } else {
        ""
    };
    Some(NetworkQuestion {
        title: format!("{who} wants to reach {target}{place}"),
        host,
    })
}

/// The answers offered: all four, or for a call leaving the sandbox (allowed one call at
/// a time) only the "once" ones; about a host, the "always" ones say it is remembered
/// for that host.
fn options(
    escalation: bool,
    host: Option<&str>,
) -> Vec<(&'static str, String, acp::PermissionOptionKind)> {
    let kinds = [
        acp::PermissionOptionKind::AllowOnce,
        acp::PermissionOptionKind::AllowAlways,
        acp::PermissionOptionKind::RejectOnce,
        acp::PermissionOptionKind::RejectAlways,
    ];
    OPTIONS
        .iter()
        .zip(kinds)
        .filter(|((_, _, answer), _)| {
            !escalation
                || matches!(
                    answer,
                    PermissionAnswer::AllowOnce | PermissionAnswer::RejectOnce
                )
        })
        .map(|((id, name, answer), kind)| {
            let name = match (answer, host) {
                (PermissionAnswer::AllowAlways | PermissionAnswer::RejectAlways, Some(host)) => {
                    format!("{name} for {host}")
                }
                _ => name.to_string(),
            };
            (*id, name, kind)
        })
        .collect()
}

#[async_trait::async_trait]
impl PermissionPrompter for AcpPrompter {
    fn remember(&self, prefixes: &[crate::policy::Grant], allow: bool) {
        if let Some(agent) = self.agent.upgrade()
            && let Some(log) = agent.log_of(&self.session_id)
        {
            agent.append(
                &log,
                crate::store::Event::Grant {
                    at_ms: crate::store::now_ms(),
                    prefixes: prefixes.to_vec(),
                    allow,
                },
            );
        }
    }

    async fn ask(&self, request: PermissionRequest) -> PermissionAnswer {
        let Some(agent) = self.agent.upgrade() else {
            return PermissionAnswer::Cancelled;
        };
        let Some((peer, display)) = agent.peer_of(&self.session_id) else {
            return PermissionAnswer::Cancelled;
        };
        let network = network_question(&request.tool, &request.arguments);
        let kind = match &network {
            Some(_) => crate::tools::ToolKind::Fetch,
            None => agent
                .tools
                .get_in(&self.session_id, &request.tool)
                .map(|t| t.kind())
                .unwrap_or(crate::tools::ToolKind::Other),
        };
        let session = agent.sessions.get(&self.session_id);
        let cwd = session.as_ref().map(|s| s.cwd.clone());
        // The question carries the diff again: it replaces the call's content.
        let diff = if crate::tools::files::writes(&request.tool) {
            crate::tools::files::preview(
                agent.tools.file_place(),
                session.as_ref(),
                &request.tool,
                &request.arguments,
                request.escalation.is_some(),
            )
            .await
        } else {
            None
        };
        let mut view =
            CallView::of(&request.tool, &request.arguments, cwd.as_deref()).with_diff(diff);
        if let Some(question) = &network {
            view.title = question.title.clone();
        }
        let tool_call = updates::permission_tool_call(
            &request.call_id,
            &view,
            kind,
            &request.arguments,
            &request.reason,
            request.escalation.as_ref(),
            display,
        );
        let options = options(
            request.escalation.is_some(),
            network.as_ref().map(|q| q.host.as_str()),
        )
        .into_iter()
        .map(|(id, name, kind)| acp::PermissionOption::new(id.to_string(), name, kind))
        .collect();
        let params =
            acp::RequestPermissionRequest::new(self.session_id.clone(), tool_call, options);
        let Ok(params) = serde_json::to_value(params) else {
            return PermissionAnswer::Cancelled;
        };
        let answer = peer
            .request("session/request_permission", params, &request.cancel)
            .await;
        let Ok(answer) = answer else {
            return PermissionAnswer::Cancelled;
        };
        let Ok(response) = serde_json::from_value::<acp::RequestPermissionResponse>(answer) else {
            return PermissionAnswer::Cancelled;
        };
        match response.outcome {
            acp::RequestPermissionOutcome::Selected(selected) => OPTIONS
                .iter()
                .find(|(id, _, _)| *id == &*selected.option_id.0)
                .map(|(_, _, a)| *a)
                .unwrap_or(PermissionAnswer::Cancelled),
            _ => PermissionAnswer::Cancelled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn e10_a_network_question_says_who_wants_to_reach_what() {
        let question = network_question(
            "network",
            &json!({"host": "index.crates.io", "port": 443, "scheme": "https",
                    "command": "cargo build --release"}),
        )
        .unwrap();
        assert_eq!(
            question.title,
            "`cargo build --release` wants to reach index.crates.io:443"
        );
        assert_eq!(question.host, "index.crates.io");
        let long = format!("cargo build {}", "x".repeat(100));
        let question = network_question(
            "network",
            &json!({"host": "::1", "port": 8080, "command": long}),
        )
        .unwrap();
        assert!(
            question
                .title
                .ends_with("…` wants to reach [::1]:8080 on this machine (outside the sandbox)"),
            "{}",
            question.title
        );
        assert!(question.title.chars().count() < 140, "{}", question.title);
        let question = network_question("network", &json!({"host": "a.example", "port": 80}));
        assert_eq!(
            question.unwrap().title,
            "A command wants to reach a.example:80"
        );
        assert_eq!(
            network_question("bash", &json!({"host": "a.example", "command": "x"})),
            None
        );
        // The model's text cannot hide or reorder what the title says.
        let question = network_question(
            "network",
            &json!({"host": "a.example", "port": 443,
                    "command": "curl x\u{1b}[8m hidden\r\u{202e}txet\ncargo build"}),
        )
        .unwrap();
        assert_eq!(
            question.title,
            "`curl x?[8m hidden??txet` (+1 more line(s)) wants to reach a.example:443"
        );
    }

    #[test]
    fn e10_always_is_offered_for_the_host() {
        let names: Vec<String> = options(false, Some("index.crates.io"))
            .into_iter()
            .map(|(_, name, _)| name)
            .collect();
        assert_eq!(
            names,
            [
                "Allow once",
                "Allow always for index.crates.io",
                "Reject",
                "Reject always for index.crates.io"
            ]
        );
        let plain: Vec<String> = options(false, None).into_iter().map(|o| o.1).collect();
        assert_eq!(plain[1], "Allow always");
        let once: Vec<&str> = options(true, None).into_iter().map(|o| o.0).collect();
        assert_eq!(once, ["allow_once", "reject_once"]);
    }
}
