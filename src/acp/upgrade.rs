//! The ACP side of `dsh upgrade`: what a connection's sessions need to be served again
//! by the next daemon program (`crate::upgrade` carries it across the `exec`), and the
//! two requests the CLI sends.
//!
//! A frozen connection ([`crate::rpc::serve_freezable`]) is described by a
//! [`ConnectionState`]: whether it was initialized, how its client shows things, and
//! the sessions bound to it with what is not in their logs (extra directories, the MCP
//! servers the client passed). Serving it again attaches each session as a
//! `session/load` would, without the replay (the editor already shows the history),
//! and starts its MCP servers again.

use super::{AcpService, Connection, updates};
use crate::rpc::{Peer, RequestContext, RpcError};
use agent_client_protocol_schema::v1 as acp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// What the next daemon program needs to serve a frozen connection again.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionState {
    pub initialized: bool,
    pub display: updates::ClientDisplay,
    pub sessions: Vec<CarriedSession>,
    /// The connection was served by a wrapped agent (issue 44): its process cannot be
    /// carried, so the next program ends the connection, saying so in its sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrapped: Option<CarriedWrap>,
}

/// A wrapped connection as the next program needs it to end it clearly.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CarriedWrap {
    /// The `[[agents]]` name.
    pub agent: String,
    /// The agent's session ids, as the editor knows them.
    pub sessions: Vec<String>,
}

/// A session bound to a frozen connection: what its log does not hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CarriedSession {
    pub id: String,
    pub extra_roots: Vec<PathBuf>,
    /// May hold secrets (an MCP server's environment): the hand-over state lives only
    /// in memory (`crate::upgrade`), never on disk.
    pub mcp_servers: Vec<acp::McpServer>,
    /// The batch the session belongs to (`_meta.dsh.runId` of its `session/new`): not
    /// in its log, so its calls after the hand-over carry it only from here. Absent
    /// when it has none, and from programs before the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<crate::policy::audit::RunId>,
}

/// How the last upgrade of this daemon went, as `_dsh/upgrade/outcome` tells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum UpgradeOutcome {
    /// This program took over from the one before it.
    Upgraded { from_version: String },
    /// The hand-over failed; the program that was running goes on, with everything.
    RolledBack { reason: String },
}

/// `_dsh/upgrade`'s ask to the daemon's serve loop: check, then freeze and hand over.
/// The answer comes once the connections are freezing (so the CLI's next request is
/// kept for the program that follows), or with why the upgrade was refused.
pub struct UpgradeOrder {
    pub answer: oneshot::Sender<Result<(), String>>,
}

/// `_dsh/upgrade`'s answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeStarted {
    /// The version handing over.
    pub from_version: String,
}

/// Counts the handed-over connections still attaching their sessions, so the daemon
/// can take over the running tasks once their owners are back (a task that ends is
/// then told to its session's log, as before the upgrade).
#[derive(Default)]
pub(super) struct Resumes {
    pending: std::sync::atomic::AtomicUsize,
    changed: tokio::sync::Notify,
}

/// One resume's end, counted when dropped (whatever way it ends).
struct ResumeDone<'a>(&'a Resumes);

impl Drop for ResumeDone<'_> {
    fn drop(&mut self) {
        let _ = self
            .0
            .pending
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        self.0.changed.notify_waiters();
    }
}

impl AcpService {
    /// `n` handed-over connections are about to be served again.
    pub fn expect_resumes(&self, n: usize) {
        self.resumes.pending.store(n, Ordering::SeqCst);
    }

    /// Waits (at most `limit`) until every expected connection has attached its sessions.
    pub async fn resumes_done(&self, limit: std::time::Duration) {
        let wait = async {
            loop {
                let changed = self.resumes.changed.notified();
                if self.resumes.pending.load(Ordering::SeqCst) == 0 {
                    return;
                }
                changed.await;
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }

    /// Lets `_dsh/upgrade` reach the serve loop (a daemon on a socket; the stdio daemon
    /// has no listener and one connection, and refuses).
    pub fn accept_upgrades(&self, orders: mpsc::Sender<UpgradeOrder>) {
        *self.upgrades.lock().unwrap_or_else(|p| p.into_inner()) = Some(orders);
    }

    /// The config in force, as TOML (an upgrade carries it for a roll back).
    pub fn config_toml(&self) -> Result<String, String> {
        self.config
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .to_toml()
    }

    /// Records how the last upgrade went, before any connection is served again.
    pub fn set_upgrade_outcome(&self, outcome: UpgradeOutcome) {
        *self.last_upgrade.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
    }

    pub(super) async fn upgrade(&self, _ctx: RequestContext, _p: Value) -> Result<Value, RpcError> {
        let orders = self
            .upgrades
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| {
                RpcError::invalid_request(
                    "this daemon serves one connection on stdio and cannot be upgraded in place",
                )
            })?;
        let (answer, answered) = oneshot::channel();
        orders
            .send(UpgradeOrder { answer })
            .await
            .map_err(|_| RpcError::internal("the daemon is stopping"))?;
        match answered.await {
            Ok(Ok(())) => super::to_value(UpgradeStarted {
                from_version: env!("CARGO_PKG_VERSION").to_string(),
            }),
            Ok(Err(why)) => Err(RpcError::invalid_request(why)),
            Err(_) => Err(RpcError::internal("the daemon is stopping")),
        }
    }

    pub(super) async fn upgrade_outcome(
        &self,
        _ctx: RequestContext,
        _p: Value,
    ) -> Result<Value, RpcError> {
        let outcome = self
            .last_upgrade
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        super::to_value(outcome)
    }

    /// [`crate::rpc::Service::freeze`]: the connection's sessions and display.
    pub(super) fn freeze_connection(&self, peer: &Peer) -> Value {
        let (initialized, display, wrapped) = self
            .connections
            .get(&peer.id())
            .map(|c| {
                let display = *c.display.lock().unwrap_or_else(|p| p.into_inner());
                let wrapped = c.wrapped.get().map(|w| CarriedWrap {
                    agent: w.name().to_string(),
                    sessions: w.agent_sessions(),
                });
                (c.initialized.load(Ordering::SeqCst), display, wrapped)
            })
            .unwrap_or_default();
        let sessions = self
            .live
            .bound_to_peer(peer.id())
            .into_iter()
            .map(|id| CarriedSession {
                extra_roots: self
                    .sessions
                    .get(&id)
                    .map(|s| s.extra_roots())
                    .unwrap_or_default(),
                mcp_servers: self
                    .live
                    .with(&id, |e| e.mcp_config.clone())
                    .unwrap_or_default(),
                run: self.sessions.get(&id).and_then(|s| s.run().cloned()),
                id,
            })
            .collect();
        serde_json::to_value(ConnectionState {
            initialized,
            display,
            sessions,
            wrapped,
        })
        .unwrap_or(Value::Null)
    }

    /// Stops every wrapped agent before the program is replaced (its process and pipes
    /// cannot be carried); their connections are ended by the next program
    /// ([`Self::resume_connection`]), or by this one's closing when the upgrade fails.
    pub async fn stop_all_wrapped(&self) {
        let wrapped: Vec<_> = self
            .connections
            .iter()
            .filter_map(|c| c.wrapped.get().cloned())
            .collect();
        for w in wrapped {
            w.stop_for_upgrade().await;
        }
    }

    /// [`crate::rpc::Service::resume`]: the connection as it was, its sessions attached
    /// again (from their logs) and their MCP servers started again.
    pub(super) async fn resume_connection(self: Arc<Self>, peer: Peer, state: Value) {
        let _done = ResumeDone(&self.resumes);
        if state.is_null() {
            // Handed over before its first request: nothing was known of it.
            return;
        }
        let state: ConnectionState = match serde_json::from_value(state) {
            Ok(state) => state,
            Err(e) => {
                tracing::error!("a connection's state from the upgrade is unreadable: {e}");
                return;
            }
        };
        if let Some(wrap) = state.wrapped {
            // The agent's process ended with the program before (`stop_all_wrapped`):
            // its sessions are told, and the connection ends, so the editor starts the
            // agent anew rather than talk to a dsh session it never opened.
            // A failed upgrade comes back here too (the old program serves on, executed
            // again or never replaced): the agent was stopped for the hand-over all the
            // same, and a new one would not know the editor's sessions, so the
            // connection ends either way, saying which it was.
            let outcome = self
                .last_upgrade
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let text = match outcome {
                Some(UpgradeOutcome::RolledBack { .. }) => format!(
                    "dsh's upgrade failed and dsh serves on as it was, but the agent `{}` it \
                     wraps was stopped for the upgrade and cannot come back with this \
                     thread. Start a new thread to go on.\n",
                    wrap.agent
                ),
                _ => format!(
                    "dsh was upgraded: the agent `{}` it wrapped could not be carried across \
                     and has stopped. Start a new thread to go on.\n",
                    wrap.agent
                ),
            };
            for id in &wrap.sessions {
                let _ = peer.notify(
                    "session/update",
                    serde_json::json!({"sessionId": id, "update": updates::agent_text(&text)}),
                );
            }
            tracing::warn!(agent = %wrap.agent, "a wrapped connection cannot be carried across an upgrade: ended");
            peer.close_after_queued();
            return;
        }
        self.connections.insert(
            peer.id(),
            Arc::new(Connection {
                peer: peer.clone(),
                initialized: AtomicBool::new(state.initialized),
                display: std::sync::Mutex::new(state.display),
                wrapped: Default::default(),
            }),
        );
        let ctx = RequestContext::new(peer.clone(), CancellationToken::new());
        for carried in state.sessions {
            match self.attach(&ctx, &carried.id, false).await {
                Ok(session) => {
                    session.set_extra_roots(&carried.extra_roots);
                    if let Some(run) = carried.run {
                        session.set_run(run);
                    }
                    self.start_mcp(&ctx, &session, &carried.mcp_servers).await;
                }
                Err(e) => tracing::error!(
                    session = carried.id,
                    "a session could not be attached again after the upgrade: {}",
                    e.message
                ),
            }
        }
    }
}
