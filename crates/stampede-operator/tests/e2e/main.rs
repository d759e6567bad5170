//! The operator end to end on the real local control plane (`make e2e`), in one binary: the
//! operator's lifecycle, the Helm chart's objects and RBAC, the merged reports and baselines, and
//! the GitOps gate examples with `stampede launch`; and the operator at scale (`scale`, only with
//! `make bench-scale`).

// A test reads top to bottom, as the story it checks; the 100-line limit is for the code it tests.
#![allow(clippy::too_many_lines, reason = "a test is one story, read top to bottom")]

mod capacity;
mod chart;
mod dashboard;
mod explain;
mod faults;
mod gitops;
mod hostile;
mod live;
mod operator;
mod recorder;
mod reports;
mod runs;
mod scale;
mod shop;
