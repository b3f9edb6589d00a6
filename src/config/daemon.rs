//! `[daemon]`, `[state]`, `[mcp]` and `[sessions]`: the daemon process's own settings.

use serde::{Deserialize, Serialize};

/// `[state]`: the limits that keep the state directory bounded for a daemon that runs
/// for months (applied by `crate::state_dir`: a sweep in the daemon, and `dsh gc`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StateConfig {
    /// Spill files (`state_dir/spill`) last written more than this many days ago are
    /// removed, unless a running task writes one or a session loaded in the last day
    /// names it.
    pub spill_max_age_days: u64,
    /// Past this many bytes of spill files, the oldest are removed until the rest fit
    /// (with the same exceptions).
    pub spill_max_bytes: u64,
    /// `audit.jsonl` is renamed `audit.jsonl.1` (and older ones shift up) when a line
    /// would take it past this many bytes.
    pub audit_max_bytes: u64,
    /// Rotated audit files kept (`audit.jsonl.1` .. `audit.jsonl.N`); older ones go.
    pub audit_keep: u32,
    /// `daemon.log` rotates the same way past this many bytes.
    pub log_max_bytes: u64,
    /// Rotated daemon logs kept.
    pub log_keep: u32,
    /// How often the daemon sweeps the spill files (off its async workers).
    pub sweep_interval_secs: u64,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            spill_max_age_days: 14,
            spill_max_bytes: 2 << 30,
            audit_max_bytes: 256 << 20,
            audit_keep: 8,
            log_max_bytes: 64 << 20,
            log_keep: 4,
            sweep_interval_secs: 3600,
        }
    }
}

/// `[daemon]`: the daemon process's own life.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// A daemon that `dsh acp` started exits by itself after this many seconds with no
    /// connection and no running task, so a one-off client (a registry check, an editor
    /// tried once) leaves nothing behind; 0: never. `dsh serve` run by a person ignores it.
    pub idle_exit_secs: u64,
    /// `dsh upgrade` lets turns in flight finish for this many seconds (new prompts wait
    /// meanwhile); past it they are cancelled, and the upgrade goes on.
    pub upgrade_drain_secs: u64,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            idle_exit_secs: 600,
            upgrade_drain_secs: 30,
        }
    }
}

/// `[mcp]`: the MCP servers an editor passes in `session/new` (and load/resume).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// How long one tool call may take before it is answered with an error.
    pub call_timeout_ms: u64,
    /// How long a server may take to start, answer `initialize` and list its tools;
    /// past it the server is reported as failed and stopped.
    pub start_timeout_ms: u64,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            call_timeout_ms: 120_000,
            start_timeout_ms: 30_000,
        }
    }
}

/// `[sessions]`: the life of a session beyond its connection.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionsConfig {
    /// `session/close` kills the session's background tasks. Off by default: Zed closes
    /// a session whenever its thread view goes (a new thread, say), and a dev server
    /// started in the background must survive that; the tasks stay the session's and
    /// their notices reach its log, where a later load finds them.
    pub close_kills_tasks: bool,
}
