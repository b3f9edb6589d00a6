//! One file a judge: [`Policy::judge_in`](super::Policy::judge_in) hands a call to the
//! judge of its kind (bash, a file tool, a connection, any other tool), and a bash call
//! that asks to leave the sandbox to the escalation judge after the bash judge.

pub mod bash;
pub mod escalation;
pub mod file;
pub mod line_values;
pub mod made_here;
pub mod network;
mod printed;
pub mod tool;
pub mod unknown_wrapper;
pub mod written;
