//! The integration tests, in one binary: each file is a module (as codex-rs does), so the
//! crate and its dev-dependencies are linked once instead of once per file, which was
//! most of a cold `cargo test` on two cores.
//!
//! Kept apart, each its own binary, is what must run alone: `tests/soak.rs` (a daemon's
//! memory over time), `tests/exec_big_output.rs` (the 1 GiB peak-memory test) and
//! `tests/faults.rs` (holds the user `nobody` at its process limit, which another test
//! running as `nobody` at the same moment would disturb).

#[path = "../common/mod.rs"]
mod common;

mod acp_sdk;
mod agent_model;
mod cli_batch;
mod cli_exec;
mod daemon_acp;
mod daemon_executors;
mod daemon_upgrade;
mod docs;
mod editor_session;
mod exec_contract;
mod exec_sandbox;
mod exec_ssh;
mod file_tools;
mod hooks_v2;
mod hooks_v3;
mod layered_config;
mod live_output;
mod mcp_servers;
mod orphans;
mod policy_cli;
mod policy_lifecycle;
mod policy_walkaround;
mod prompt_replay;
mod registry_auth;
mod registry_bare_env;
mod registry_features;
mod restart_lost;
mod sandbox_containment;
mod sandbox_escalation;
mod sandbox_escape;
mod sandbox_files;
mod sandbox_network;
mod sandbox_no_way_back;
mod sandbox_pins;
mod sandbox_proc;
mod sandbox_remote_env;
mod sandbox_walks;
mod security;
mod sessions_keep_work;
mod shutdown;
mod state_retention;
mod tools_waterfall;
mod user_grants;
mod wrapped_agents;
mod wrapped_claude;
mod wrapped_gemini;
mod wrapper_grammars;
