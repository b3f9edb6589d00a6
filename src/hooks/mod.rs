//! The `tools/execute` waterfall and its hooks.
//!
//! Every tool call passes, in order: [`audit`] (records the outcome), the schema
//! check (in `tools::schema`), [`rules`] (the configured policy and the session's
//! mode, judged per shell segment by [`policy`] over [`shell`]), [`external`] hook
//! programs, and the permission [`gate`] (asks the session's user). See
//! [`waterfall`] for the chain itself.

pub mod audit;
pub mod external;
pub mod gate;
pub mod policy;
pub mod rules;
pub mod shell;
pub mod waterfall;
