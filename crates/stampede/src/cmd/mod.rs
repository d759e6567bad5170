//! The commands, one file each; `main.rs` parses the command line and dispatches.

pub(crate) mod history;
pub(crate) mod launch;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod target;
pub(crate) mod validate;
