//! The operator's tests without a cluster, in one binary: the pure core, one reconcile against
//! a mock API server, Prometheus merging, the chart's committed files, the Argo CD health
//! checks and the GitOps gate examples.

// A test reads top to bottom, as the story it checks; the 100-line limit is for the code it tests.
#![allow(clippy::too_many_lines, reason = "a test is one story, read top to bottom")]

mod architecture;
mod argocd_health;
mod baselines;
mod chart_files;
mod common;
mod decisions;
mod gitops_examples;
mod leader_mock;
mod live;
mod metrics;
mod once;
mod reconcile_faults;
mod reconcile_mock;
mod reconcile_setup_teardown;
mod report_size;
mod reruns;
mod schedules;
mod spec_validation;
