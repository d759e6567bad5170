//! The operator end to end on the real local control plane (`make e2e`), in one binary: the
//! operator's lifecycle, and the Helm chart's objects and RBAC.

mod chart;
mod operator;
