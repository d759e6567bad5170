//! The operator's tests without a cluster, in one binary: the pure core, one reconcile against
//! a mock API server, Prometheus merging, the chart's committed files and the Argo CD health
//! check.

mod argocd_health;
mod chart_files;
mod common;
mod decisions;
mod metrics;
mod reconcile_mock;
mod report_size;
