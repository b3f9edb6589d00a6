//! Built-in hooks of the permission waterfall.
//!
//! [`shell`] splits a bash command line into the simple commands it would run.

pub mod shell;
