//! The LoadTest operator: pure functions compute the desired runner objects
//! ([`desired`]), the next status ([`lifecycle`]) and merged results ([`results`]) from a
//! `LoadTest` and what was observed, and whether its scenario is valid ([`validation`]); a
//! thin shell ([`controller`]) does the I/O.

pub mod controller;
pub mod desired;
pub mod leader;
pub mod lifecycle;
pub mod metrics;
pub mod results;
pub mod schedule;
pub mod scheduler;
pub mod validation;

/// Errors of the operator's shell.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("cannot serialize: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// A short label for metrics.
    /// Every value [`Error::metric_label`] returns.
    pub const METRIC_LABELS: [&'static str; 3] = ["kube", "serialize", "other"];

    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Serialize(_) => "serialize",
            Error::Other(_) => "other",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
