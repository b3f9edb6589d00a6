//! What the ACP side keeps per live session, in one entry of one map: its log, the
//! connection it is bound to, its prompt in flight, whether its client closed it, its
//! MCP servers. Ending a session (a close, a delete, its connection's end) frees what it
//! must in one place, so no path can forget a piece, and binding goes through the
//! map's `entry()`, so two connections attaching at once cannot both win.
//!
//! A session nothing needs any more is unloaded (`LiveSessions::unload`, in one step
//! of its entry with the check): its history is its log on disk, which `session/load`
//! reads again. A log something still holds after that (a title being written, a call
//! ending) lingers here by a weak reference, so a load takes that one back instead of
//! finding the file locked.

use crate::mcp::SessionServers;
use crate::store::SessionLog;
use dashmap::DashMap;
use std::sync::{Arc, Weak};
use tokio_util::sync::CancellationToken;

/// One live session's state on the ACP side.
#[derive(Default)]
pub(super) struct SessionEntry {
    /// Its log, open for appending.
    pub log: Option<Arc<SessionLog>>,
    /// The id of the connection it is bound to.
    pub bound_to: Option<u64>,
    /// The cancel token of its prompt in flight.
    pub prompt: Option<CancellationToken>,
    /// Closed by its client but kept (its tasks run on) until loaded again.
    pub closed: bool,
    /// The MCP servers its client passed, running.
    pub mcp: Option<Arc<SessionServers>>,
    /// What its client passed for them, to start them again after an upgrade. Keeps no
    /// entry alive by itself.
    pub mcp_config: Vec<agent_client_protocol_schema::v1::McpServer>,
}

impl SessionEntry {
    /// Nothing is left in it: the entry can go.
    fn is_empty(&self) -> bool {
        self.log.is_none()
            && self.bound_to.is_none()
            && self.prompt.is_none()
            && !self.closed
            && self.mcp.is_none()
    }
}

/// The ACP side's sessions, by id.
#[derive(Default)]
pub(super) struct LiveSessions {
    entries: DashMap<String, SessionEntry>,
    /// Logs of unloaded sessions that something still held when they were unloaded.
    /// Dead references are swept at each unload, so it holds at most what is still
    /// held elsewhere plus what was unloaded since the last sweep.
    lingering: DashMap<String, Weak<SessionLog>>,
}

/// What an unloaded session's entry said of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unloaded {
    /// Its client had closed it (its `session_end` hooks were told then).
    pub closed: bool,
}

/// Why binding a session to a connection was refused.
pub(super) struct InUse;

impl LiveSessions {
    /// Reads a session's entry (`None`: nothing kept for it).
    pub fn with<T>(&self, id: &str, read: impl FnOnce(&SessionEntry) -> T) -> Option<T> {
        self.entries.get(id).map(|e| read(&e))
    }

    /// Changes a session's entry, made if missing; an entry left empty goes.
    pub fn update<T>(&self, id: &str, change: impl FnOnce(&mut SessionEntry) -> T) -> T {
        let mut entry = self.entries.entry(id.to_string()).or_default();
        let out = change(&mut entry);
        let empty = entry.is_empty();
        drop(entry);
        if empty {
            self.entries.remove_if(id, |_, e| e.is_empty());
        }
        out
    }

    /// Unloads the session if `idle` holds of its entry, in one step with the check, so
    /// a connection that binds it first keeps it and one that binds it after finds it
    /// unloaded. `unloaded` runs inside that step (the registry forgets the session
    /// there, so the two never disagree). A session without an entry is not this
    /// side's (a wrapped agent's) and stays. `None`: not unloaded.
    pub fn unload(
        &self,
        id: &str,
        idle: impl FnOnce(&SessionEntry) -> bool,
        unloaded: impl FnOnce(),
    ) -> Option<Unloaded> {
        let mut entry = self.entries.get_mut(id)?;
        if !idle(&entry) {
            return None;
        }
        unloaded();
        // Let go (the file unlocked) or kept lingering before the entry is: a load that
        // binds the session next finds one or the other.
        self.lingering.retain(|_, log| log.strong_count() > 0);
        if let Some(log) = entry.log.take()
            && Arc::strong_count(&log) > 1
        {
            self.lingering.insert(id.to_string(), Arc::downgrade(&log));
        }
        let closed = std::mem::take(&mut entry.closed);
        let empty = entry.is_empty();
        drop(entry);
        if empty {
            self.entries.remove_if(id, |_, e| e.is_empty());
        }
        Some(Unloaded { closed })
    }

    /// The log of an unloaded session that something still holds (the file is locked
    /// by it until it goes), to be used instead of opening the file again.
    pub fn lingering_log(&self, id: &str) -> Option<Arc<SessionLog>> {
        self.lingering.get(id).and_then(|log| log.upgrade())
    }

    /// The session's log.
    pub fn log(&self, id: &str) -> Option<Arc<SessionLog>> {
        self.with(id, |e| e.log.clone()).flatten()
    }

    /// The connection the session is bound to.
    pub fn bound_to(&self, id: &str) -> Option<u64> {
        self.with(id, |e| e.bound_to).flatten()
    }

    /// Binds the session to connection `peer`, in one step with the check: refused when
    /// it is bound to another connection that `live` says still is.
    pub fn bind(&self, id: &str, peer: u64, live: impl Fn(u64) -> bool) -> Result<(), InUse> {
        self.update(id, |e| match e.bound_to {
            Some(other) if other != peer && live(other) => Err(InUse),
            _ => {
                e.bound_to = Some(peer);
                Ok(())
            }
        })
    }

    /// Unbinds the session if `peer` holds it (a failed attach gives back its claim).
    pub fn unbind_from(&self, id: &str, peer: u64) {
        self.update(id, |e| {
            if e.bound_to == Some(peer) {
                e.bound_to = None;
            }
        });
    }

    /// The sessions bound to connection `peer`.
    pub fn bound_to_peer(&self, peer: u64) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| e.bound_to == Some(peer))
            .map(|e| e.key().clone())
            .collect()
    }

    /// Takes the session's prompt slot with `cancel`, or `None` when a prompt of it is
    /// already running.
    pub fn take_prompt(&self, id: &str, cancel: &CancellationToken) -> Option<()> {
        self.update(id, |e| match e.prompt {
            Some(_) => None,
            None => {
                e.prompt = Some(cancel.clone());
                Some(())
            }
        })
    }

    /// Frees the session's prompt slot.
    pub fn free_prompt(&self, id: &str) {
        self.update(id, |e| e.prompt = None);
    }

    /// Cancels the session's prompt in flight, if any.
    pub fn cancel_prompt(&self, id: &str) {
        if let Some(prompt) = self.with(id, |e| e.prompt.clone()).flatten() {
            prompt.cancel();
        }
    }

    /// Cancels every prompt in flight (daemon shutdown).
    pub fn cancel_all_prompts(&self) {
        for e in self.entries.iter() {
            if let Some(prompt) = &e.prompt {
                prompt.cancel();
            }
        }
    }

    /// Whether a prompt of the session is running.
    pub fn prompting(&self, id: &str) -> bool {
        self.with(id, |e| e.prompt.is_some()).unwrap_or(false)
    }

    /// Whether its client closed it (its tasks run on).
    pub fn is_closed(&self, id: &str) -> bool {
        self.with(id, |e| e.closed).unwrap_or(false)
    }

    /// Takes the session's MCP servers out (to stop them).
    pub fn take_mcp(&self, id: &str) -> Option<Arc<SessionServers>> {
        self.update(id, |e| e.mcp.take())
    }

    /// The sessions with MCP servers running.
    pub fn with_mcp(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| e.mcp.is_some())
            .map(|e| e.key().clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Binding is the check and the claim in one step: a second connection is refused
    /// while the first is live, wins once it is not, and a failed attach gives back only
    /// its own claim.
    #[test]
    fn a_session_is_bound_to_one_live_connection_at_a_time() {
        let live = LiveSessions::default();
        let alive = |peer: u64| peer == 1;
        assert!(live.bind("s", 1, alive).is_ok());
        assert!(live.bind("s", 2, alive).is_err(), "1 still holds it");
        assert!(live.bind("s", 1, alive).is_ok(), "its own again");
        live.unbind_from("s", 2);
        assert_eq!(live.bound_to("s"), Some(1), "2 never held it");
        let gone = |_: u64| false;
        assert!(live.bind("s", 2, gone).is_ok(), "1 has gone");
        assert_eq!(live.bound_to_peer(2), ["s"]);
    }

    /// What ending a session leaves behind is nothing: an entry with nothing in it goes,
    /// and the prompt slot is one per session.
    #[test]
    fn an_entry_left_empty_goes() {
        let live = LiveSessions::default();
        let cancel = CancellationToken::new();
        assert!(live.take_prompt("s", &cancel).is_some());
        assert!(
            live.take_prompt("s", &cancel).is_none(),
            "one prompt at a time"
        );
        live.update("s", |e| e.closed = true);
        live.cancel_prompt("s");
        assert!(cancel.is_cancelled());
        live.free_prompt("s");
        assert!(live.is_closed("s") && !live.prompting("s"));
        live.update("s", |e| e.closed = false);
        assert_eq!(live.entries.len(), 0);
    }

    /// Unloading is the check and the removal in one step: a bound session stays; an
    /// idle one goes with its log, which lingers only while something else holds it.
    #[test]
    fn an_idle_entry_unloads_and_its_held_log_lingers_until_let_go() {
        let state = tempfile::tempdir().unwrap();
        let header = crate::store::Header {
            id: uuid::Uuid::new_v4().to_string(),
            cwd: "/".into(),
            created_ms: 0,
            title: None,
        };
        let id = header.id.clone();
        let log = Arc::new(SessionLog::create(state.path(), &header).unwrap());
        let live = LiveSessions::default();
        live.update(&id, |e| {
            e.log = Some(log.clone());
            e.bound_to = Some(1);
            e.closed = true;
        });
        let idle = |e: &SessionEntry| e.bound_to.is_none();
        let mut told = 0;
        assert_eq!(live.unload(&id, idle, || told += 1), None, "bound");
        assert_eq!(told, 0);
        assert!(live.log(&id).is_some());
        live.unbind_from(&id, 1);
        assert_eq!(
            live.unload(&id, idle, || told += 1),
            Some(Unloaded { closed: true })
        );
        assert_eq!(told, 1);
        assert_eq!(live.entries.len(), 0, "nothing of it is kept");
        assert!(live.log(&id).is_none());
        // `log` is still held here: the file stays locked, so a load takes this one.
        assert!(Arc::ptr_eq(&live.lingering_log(&id).unwrap(), &log));
        assert!(SessionLog::open(state.path(), &id).is_err(), "still locked");
        drop(log);
        assert!(live.lingering_log(&id).is_none());
        assert!(SessionLog::open(state.path(), &id).is_ok());
        assert_eq!(live.unload(&id, |_| true, || told += 1), None, "no entry");
    }
}
