//! Test support for running Stampede against a real Kubernetes control plane on this machine.
//!
//! `tests/cluster/` builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
//! kubectl from Go modules and starts them on 127.0.0.1. There is no kubelet and no container
//! runtime; this crate supplies the rest:
//!
//! * [`agent`]: the node agent (binary `stampede-node-agent`), which registers a Node and runs
//!   the pods bound to it as local processes, with real ServiceAccount tokens and real exit codes;
//! * [`cluster::TestCluster`]: how integration tests reach the running control plane;
//! * [`env`](mod@env), [`images`] and [`volumes`]: the pure parts of running a pod (environment, argv,
//!   volume files and mount-path rewriting).
//!
//! Cluster tests are `#[ignore]`d so that `cargo test --workspace` never needs a cluster;
//! `make e2e` starts one and runs them with `-- --ignored`.

#![warn(missing_docs)]

pub mod agent;
pub mod cluster;
pub mod env;
pub mod error;
pub mod images;
pub mod volumes;

pub use cluster::{TestCluster, wait_deleted, wait_for};
pub use error::{Error, Result};

/// The repository's root. From the package directory `cargo test` gives the test binary when it
/// runs (every package is `crates/<name>`), not the one this crate was compiled in: a build
/// folder shared by several clones (`make test`'s cache) reuses this crate compiled in another
/// clone, which may be gone.
pub fn repo_root() -> std::path::PathBuf {
    let package = std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
    std::path::PathBuf::from(package).join("../..")
}

/// The pinned Helm: `$STAMPEDE_HELM`, or `tests/chart/helm.sh` (builds it once, then reuses it).
pub fn helm() -> std::path::PathBuf {
    if let Some(h) = std::env::var_os("STAMPEDE_HELM") {
        return h.into();
    }
    let script = repo_root().join("tests/chart/helm.sh");
    let out = std::process::Command::new("bash").arg(&script).output().expect("bash runs");
    assert!(out.status.success(), "{} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().into()
}

/// A command's stdout and stderr together, for assertion messages.
pub fn output_text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}
