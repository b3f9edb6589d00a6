//! The commands through which a person (or a script) talks to the daemon as an editor
//! would: each is an ACP client of the daemon's socket, so there is no second path into
//! the agent. The start of the CLI's split out of `main.rs` (issue 43): a command that
//! grows here keeps `main.rs` to its clap variant and one dispatch line.

pub mod agent;
pub mod batch;
pub mod chat;
pub mod client;
pub mod exec;
pub mod history;
pub mod reach;
pub mod terminal;
