//! Errors of a run; a scenario's problems are the core's ([`stampede_core::error`]).

pub(crate) use stampede_core::error::*;

/// Why a run could not take place (distinct from requests failing during a run).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start the built-in target: {0}")]
    Target(#[source] std::io::Error),
    #[error("cannot start worker threads: {0}")]
    Threads(#[source] std::io::Error),
    #[error("a worker thread failed: {0}")]
    Worker(String),
    /// A `setup` step failed: the load did not start.
    #[error("setup failed, so no load was sent: {0}")]
    Setup(String),
    #[error("{0}")]
    Other(String),
}
