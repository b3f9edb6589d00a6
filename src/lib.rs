//! dsh: a per-user agent daemon for editors.
//!
//! See ARCHITECTURE.md for the map of modules and the path of a tool call.

pub mod acp;
pub mod agent;
pub mod auth;
pub mod config;
pub mod containment;
pub mod daemon;
pub mod exec;
pub mod fsutil;
pub mod hooks;
pub mod llm;
pub mod login;
pub mod mcp;
pub mod policy;
pub mod program;
pub mod project;
pub mod registry;
pub mod rpc;
pub mod state_dir;
pub mod store;
pub mod tools;
pub mod upgrade;
pub mod wrap;
