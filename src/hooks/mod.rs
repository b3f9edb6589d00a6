//! Built-in hooks of the permission waterfall.
//!
//! [`shell`] splits a bash command line into the simple commands it would run, and
//! [`policy`] judges a tool call (for bash: segment by segment) against the configured
//! rules, the session's mode and its "allow always" grants.

pub mod policy;
pub mod shell;
