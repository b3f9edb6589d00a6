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
                    prefixes: prefixes.iter().map(|g| g.0.clone()).collect(),
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
        let kind = agent
            .tools
            .get_in(&self.session_id, &request.tool)
            .map(|t| t.kind().as_str())
            .unwrap_or("other");
        let session = agent.sessions.get(&self.session_id);
        let cwd = session.as_ref().map(|s| s.cwd.clone());
        // The question carries the diff again: it replaces the call's content.
        let diff = if crate::tools::files::writes(&request.tool) {
            crate::tools::files::preview(session.as_ref(), &request.tool, &request.arguments).await
        } else {
            None
        };
        let view = CallView::of(&request.tool, &request.arguments, cwd.as_deref()).with_diff(diff);
        let tool_call = updates::permission_tool_call(
            &request.call_id,
            &view,
            kind,
            &request.arguments,
            &request.reason,
            request.escalation.as_ref(),
            display,
        );
        let kinds = [
            acp::PermissionOptionKind::AllowOnce,
            acp::PermissionOptionKind::AllowAlways,
            acp::PermissionOptionKind::RejectOnce,
            acp::PermissionOptionKind::RejectAlways,
        ];
        // A call leaving the sandbox is allowed one call at a time: no "always" is offered.
        let options = OPTIONS
            .iter()
            .zip(kinds)
            .filter(|((_, _, answer), _)| {
                request.escalation.is_none()
                    || matches!(
                        answer,
                        PermissionAnswer::AllowOnce | PermissionAnswer::RejectOnce
                    )
            })
            .map(|((id, name, _), kind)| acp::PermissionOption::new(id.to_string(), *name, kind))
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
