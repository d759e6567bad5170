//! The operator's tests without a cluster, in one binary: the pure core, one reconcile against
//! a mock API server, Prometheus merging, the chart's committed files, the Argo CD health
//! checks and the GitOps gate examples.

mod architecture;
mod argocd_health;
mod chart_files;
mod common;
mod decisions;
mod gitops_examples;
mod leader_mock;
mod metrics;
mod once;
mod reconcile_mock;
mod report_size;
mod schedules;
