//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong in the node agent or the test-cluster handle.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("{0}")]
    MissingReference(String),
    #[error("{0}")]
    Unsupported(String),
    #[error("image {0} is not in the node agent's image table")]
    ImageNotFound(String),
    #[error("{0}")]
    NoCommand(String),
    #[error(
        "the local test cluster is not running ({0}); start it with `make cluster-up` \
         (or run the cluster tests with `make e2e`)"
    )]
    ClusterNotRunning(String),
    #[error("timed out after {secs} s waiting for {what}")]
    Timeout { what: String, secs: u64 },
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attaches what was being done to an I/O error.
pub(crate) trait IoContext<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Io { context: what(), source })
    }
}
