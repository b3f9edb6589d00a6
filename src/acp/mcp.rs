//! The MCP servers a client passes in `session/new`, `load` and `resume`: started for
//! the session (src/mcp), their tools given to it alone, stopped when it is closed or
//! deleted or its connection ends. What fails is said to the person as an agent
//! message and logged as a notice, so the model learns it too.

use super::{AcpService, updates};
use crate::mcp::{ServerPlace, ServerReport, ServerSpec, SessionServers};
use crate::registry::Session;
use crate::rpc::RequestContext;
use crate::store::{Event, now_ms};
use agent_client_protocol_schema::v1 as acp;
use std::sync::{Arc, Mutex};

/// The scope a session's servers are marked with in the executor: not the session's
/// own, whose background tasks outlive a close that ends the servers.
fn scope_of(session_id: &str) -> String {
    format!("{session_id}/mcp")
}

impl AcpService {
    /// Starts `servers` for `session` (ending those it had), gives it their tools and
    /// tells the person, after the answer, what could not be started.
    pub(super) async fn start_mcp(
        &self,
        ctx: &RequestContext,
        session: &Arc<Session>,
        servers: &[acp::McpServer],
    ) {
        self.stop_mcp(&session.id).await;
        self.live
            .update(&session.id, |e| e.mcp_config = servers.to_vec());
        if servers.is_empty() {
            return;
        }
        let failures = Arc::new(Mutex::new(Vec::new()));
        let mut specs = Vec::new();
        for server in servers {
            match server {
                acp::McpServer::Stdio(s) => specs.push(ServerSpec {
                    name: s.name.clone(),
                    command: s.command.clone(),
                    args: s.args.clone(),
                    env: s
                        .env
                        .iter()
                        .map(|v| (v.name.clone(), v.value.clone()))
                        .collect(),
                }),
                acp::McpServer::Http(s) => push(&failures, unsupported(&s.name, "HTTP")),
                acp::McpServer::Sse(s) => push(&failures, unsupported(&s.name, "SSE")),
                _ => push(
                    &failures,
                    "an MCP server of a kind dsh does not know was not started".into(),
                ),
            }
        }
        let started = match (&self.executor, specs.is_empty()) {
            (_, true) => None,
            (None, false) => {
                push(
                    &failures,
                    "MCP servers were not started: this daemon has no executor ([exec] kind = \"none\")"
                        .into(),
                );
                None
            }
            (Some(exec), false) => {
                let config = self
                    .config
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                let place = ServerPlace {
                    cwd: session.cwd.clone(),
                    scope: scope_of(&session.id),
                    writable_roots: session.writable_roots(),
                    spill_dir: config.exec.state_dir().join("spill"),
                    max_output_bytes: config.exec.max_output_bytes,
                    config: &config.mcp,
                };
                // Until the answer, reports are collected and sent after it; later ones
                // (a server that dies) go to whichever connection the session has then.
                let answered = Arc::new(std::sync::atomic::AtomicBool::new(false));
                let report: ServerReport = {
                    let (agent, id) = (self.this.clone(), session.id.clone());
                    let (failures, answered) = (failures.clone(), answered.clone());
                    Arc::new(move |text: String| {
                        if answered.load(std::sync::atomic::Ordering::SeqCst) {
                            if let Some(agent) = agent.upgrade() {
                                agent.tell_about_mcp(&id, &text);
                            }
                        } else {
                            push(&failures, text);
                        }
                    })
                };
                let servers = SessionServers::start(exec, &specs, &place, report).await;
                answered.store(true, std::sync::atomic::Ordering::SeqCst);
                Some(servers)
            }
        };
        if let Some(servers) = started {
            // The start took time: a close, delete or disconnect meanwhile found nothing to
            // stop, so these would run on for nobody.
            // Checked and put in place in one step of the session's entry.
            let servers = Arc::new(servers);
            let placed = self.live.update(&session.id, |e| {
                let still_bound =
                    e.bound_to == Some(ctx.peer.id()) && !ctx.peer.is_closed() && !e.closed;
                // A second start for the session (two loads at once) replaces the first's.
                still_bound.then(|| e.mcp.replace(servers.clone()))
            });
            match placed {
                None => {
                    servers.stop().await;
                    return;
                }
                Some(replaced) => {
                    self.tools.session_tools().set(&session.id, servers.tools());
                    if let Some(replaced) = replaced {
                        replaced.stop().await;
                    }
                }
            }
        }
        let failures = std::mem::take(&mut *failures.lock().unwrap_or_else(|p| p.into_inner()));
        for text in failures {
            self.log_mcp_notice(&session.id, &text);
            ctx.notify_after(
                "session/update",
                &updates::notification(&session.id, updates::agent_text(&format!("{text}\n"))),
            );
        }
    }

    /// Ends `session_id`'s servers (and everything they started) and withdraws their
    /// tools; returns once they are gone.
    pub(super) async fn stop_mcp(&self, session_id: &str) {
        let servers = self.live.take_mcp(session_id);
        self.stop_taken_mcp(session_id, servers).await;
    }

    /// [`AcpService::stop_mcp`] for a session no connection holds, checked and taken in
    /// one step: a session another connection took meanwhile keeps the servers (and
    /// tools) its own client started.
    pub(super) async fn stop_unbound_mcp(&self, session_id: &str) {
        let taken = self
            .live
            .update(session_id, |e| e.bound_to.is_none().then(|| e.mcp.take()));
        if let Some(servers) = taken {
            self.stop_taken_mcp(session_id, servers).await;
        }
    }

    /// Withdraws the session's server tools and stops `servers`, taken from its entry.
    async fn stop_taken_mcp(&self, session_id: &str, servers: Option<Arc<SessionServers>>) {
        self.tools.session_tools().remove(session_id);
        if let Some(servers) = servers {
            servers.stop().await;
            // What a server detached (its own session, still marked) outlives the stop
            // of the server, even more so a server that had exited: the scope finds it.
            if let Some(exec) = &self.executor {
                exec.kill_scope(&scope_of(session_id)).await;
            }
        }
    }

    /// Ends every session's servers (daemon shutdown).
    pub async fn stop_all_mcp(&self) {
        for id in self.live.with_mcp() {
            self.stop_mcp(&id).await;
        }
    }

    /// A server's report after the session was answered: to its client and its log.
    fn tell_about_mcp(&self, session_id: &str, text: &str) {
        self.log_mcp_notice(session_id, text);
        self.send_update(session_id, updates::agent_text(&format!("{text}\n")));
    }

    fn log_mcp_notice(&self, session_id: &str, text: &str) {
        if let Some(log) = self.log_of(session_id) {
            self.append(
                &log,
                Event::Notice {
                    at_ms: now_ms(),
                    source: "mcp".into(),
                    task_id: String::new(),
                    text: text.to_string(),
                },
            );
        }
    }
}

fn push(failures: &Mutex<Vec<String>>, text: String) {
    failures
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(text);
}

fn unsupported(name: &str, kind: &str) -> String {
    format!("MCP server `{name}` was not started: dsh runs stdio MCP servers only, not {kind} ones")
}
