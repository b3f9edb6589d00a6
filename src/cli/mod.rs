//! Every command's body, one file a command (`dsh gc` is `gc.rs`), so that `main.rs`
//! keeps only the clap types and one dispatch line per command; and how the command
//! line reaches the daemon (`reach.rs`). `exec` and `chat` talk to the daemon as an
//! editor would: each is an ACP client of the daemon's socket (`client.rs`), so there
//! is no second path into the agent.

pub mod acp;
pub mod agent;
pub mod batch;
pub mod candidate;
pub mod chat;
pub mod check_config;
pub mod client;
pub mod exec;
pub mod gc;
pub mod history;
pub mod hooks;
pub mod kill;
pub mod login;
pub mod policy;
pub mod reach;
pub mod reload;
pub mod serve;
pub mod status;
pub mod stop;
pub mod terminal;
pub mod trust;
pub mod upgrade;
pub mod workdirs;
