//! The operator end to end on the real local control plane (`make e2e`), in one binary: the
//! operator's lifecycle, the Helm chart's objects and RBAC, and the merged reports and baselines.

mod chart;
mod operator;
mod reports;
