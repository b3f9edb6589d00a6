//! The `tools/execute` waterfall and its hooks.
//!
//! Every tool call passes, in order: [`audit`] (records the outcome), the schema
//! check (in `tools::schema`), [`rules`] (the configured policy and the session's
//! mode, judged by [`crate::policy`]), [`external`] hook
//! programs, a trusted project's hook programs for its sessions ([`project`]), and the
//! permission [`gate`] (asks the session's user). See
//! [`waterfall`] for the chain itself.

pub mod audit;
pub mod external;
pub mod gate;
pub mod project;
pub mod replay;
pub mod rules;
pub mod waterfall;
