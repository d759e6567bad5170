//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong in the node agent or the test-cluster handle.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting, or a watch, that does not work (e.g. an image table entry that names no image,
    /// a `volumeMount` of no volume); the message says which.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A ConfigMap, Secret or key a pod refers to does not exist (yet): the pod waits, as
    /// `CreateContainerConfigError`.
    #[error("{0}")]
    MissingReference(String),
    /// A part of a pod the agent cannot run (a volume type, a `fieldRef`), named in the message.
    #[error("{0}")]
    Unsupported(String),
    /// A container's image is not in the node agent's image table: the pod waits, as
    /// `ErrImagePull`.
    #[error("image {0} is not in the node agent's image table")]
    ImageNotFound(String),
    /// A container gives no command and its image has no program in the image table.
    #[error("{0}")]
    NoCommand(String),
    #[error(
        "the local test cluster is not running ({0}); start it with `make cluster-up` \
         (or run the cluster tests with `make e2e`)"
    )]
    /// No local cluster to reach: `cluster.env` is missing or incomplete, or its kube-apiserver
    /// is not running.
    ClusterNotRunning(String),
    /// An object did not reach the state awaited in time.
    #[error("timed out after {secs} s waiting for {what}")]
    Timeout {
        /// What was awaited, e.g. `Pod p1` or `Pod p1 to be deleted`.
        what: String,
        /// The time allowed, whole seconds.
        secs: u64,
    },
    /// A kubeconfig could not be read or made into a client configuration.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The kubeconfig's path.
        path: PathBuf,
        #[source]
        /// What was wrong with it.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A Kubernetes API call failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. `creating <dir>`.
        context: String,
        #[source]
        /// The system's error.
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
