//! Errors of a run; a scenario's problems are the core's ([`stampede_core::error`]).

pub(crate) use stampede_core::error::*;

/// Why a run could not take place (distinct from requests failing during a run).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The built-in target (`baseUrl: builtin`) could not start.
    #[error("cannot start the built-in target: {0}")]
    Target(#[source] std::io::Error),
    /// A thread (a worker's, or the one `setup` or `teardown` runs on) or its runtime could not
    /// start.
    #[error("cannot start worker threads: {0}")]
    Threads(#[source] std::io::Error),
    /// A worker thread panicked or could not build its runtime; the message says which.
    #[error("a worker thread failed: {0}")]
    Worker(String),
    /// A `setup` step failed: the load did not start.
    #[error("setup failed, so no load was sent: {0}")]
    Setup(String),
    /// Anything else, said in the message (e.g. gRPC reflection could not ask the server).
    #[error("{0}")]
    Other(String),
}
