//! Environment variables a runner reads.

/// The name of the LoadTest the pod runs for.
pub const LOADTEST: &str = "STAMPEDE_LOADTEST";
/// The LoadTest's namespace (the pod's own, set from `metadata.namespace`).
pub const NAMESPACE: &str = "STAMPEDE_NAMESPACE";
/// This runner's index, 0 to [`RUNNERS`] − 1: set by Kubernetes in each pod of an Indexed Job.
pub const RUNNER_INDEX: &str = "JOB_COMPLETION_INDEX";
/// How many runners share the load, 1–1000.
pub const RUNNERS: &str = "STAMPEDE_RUNNERS";
/// The run a runner belongs to ([`super::run_id`]); it stamps its results with it.
pub const RUN: &str = "STAMPEDE_RUN";
/// Folder where a runner finds the files of `spec.data` (its scenario's relative paths
/// start there).
pub const DATA_DIR: &str = "STAMPEDE_DATA_DIR";
/// Where a runner serves Prometheus metrics (`off` for nowhere).
pub const METRICS_ADDR: &str = "STAMPEDE_METRICS_ADDR";
/// What `setup` gave (a JSON object, name → value) when the scenario has `setup` or
/// `teardown`: those run once for the LoadTest, in pods of their own, never in a runner.
pub const SETUP_VALUES: &str = "STAMPEDE_SETUP_VALUES";
/// In the pod that runs the scenario's `setup` or `teardown` once: which (`setup` or
/// `teardown`).
pub const ONCE: &str = "STAMPEDE_ONCE";
