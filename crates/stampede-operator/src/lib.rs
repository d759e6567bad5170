//! The LoadTest operator: pure functions compute the desired runner objects
//! ([`desired`]), the next status ([`lifecycle`]) and merged results ([`results`]) from a
//! `LoadTest` and what was observed, and whether its scenario is valid ([`validation`]); a
//! thin shell ([`controller`]) does the I/O.

#![warn(missing_docs)]

pub mod api_count;
pub mod children;
pub mod conditions;
pub mod controller;
pub mod dashboard;
pub mod desired;
pub mod leader;
pub mod lifecycle;
pub mod metrics;
pub mod results;
pub mod schedule;
pub mod shell;
pub mod validation;

/// Errors of the operator's shell. Each is retried with back-off by the controller: a user's
/// mistake is never one of these (it becomes a condition and an Event instead).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed (a 5xx, a 429, a time-out, a refused permission).
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// A read the decision needs failed: the object may exist, it could not be had now.
    #[error("cannot read {what}: {source}")]
    Unavailable {
        /// What was being read, e.g. `ConfigMap perf/shop-scenario`.
        what: String,
        /// The API error.
        source: kube::Error,
    },
    /// An object could not be serialized to JSON.
    #[error("cannot serialize: {0}")]
    Serialize(#[from] serde_json::Error),
    /// An object of a namespaced kind came without a namespace.
    #[error("{0} has no namespace")]
    NoNamespace(&'static str),
    /// This replica no longer leads (or cannot tell that it still does): it writes nothing.
    #[error("not leading: another replica may act now")]
    NotLeading,
    /// The watch of these children has not listed them yet (the operator just started, or
    /// cannot list them): what the run has is not known.
    #[error("the watch of {0} has not listed them yet")]
    NotSynced(&'static str),
}

impl Error {
    /// Every value [`Error::metric_label`] returns.
    pub const METRIC_LABELS: [&'static str; 6] =
        ["kube", "unavailable", "serialize", "no_namespace", "not_leading", "not_synced"];

    /// A short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Unavailable { .. } => "unavailable",
            Error::Serialize(_) => "serialize",
            Error::NoNamespace(_) => "no_namespace",
            Error::NotLeading => "not_leading",
            Error::NotSynced(_) => "not_synced",
        }
    }
}

/// The result of the shell's work: it fails with an [`Error`], retried with back-off.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the user must fix (a spec, or what it names), in words for a status condition and an
/// Event. Never retried, unlike an [`Error`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);
