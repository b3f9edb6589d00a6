//! dsh: a per-user agent daemon for editors.
//!
//! See ARCHITECTURE.md for the map of modules and the path of a tool call.

pub mod config;
pub mod exec;
pub mod hooks;
pub mod rpc;
pub mod store;
