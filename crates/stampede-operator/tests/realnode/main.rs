//! The real-node suite (`make e2e-node`): Stampede's own image (`make image`) in real
//! containers on a real kubelet + containerd node (`tests/cluster/up.sh --node=real`), with only
//! the chart's objects and RBAC. The operator is installed once from the rendered chart into a
//! namespace that enforces the `restricted` Pod Security Standard; each test then runs its
//! LoadTests and a target Deployment + Service (`stampede target` from the same image) in a fresh
//! restricted namespace of its own.
//!
//! Every test is `#[ignore]`d (it needs the real node, root and the image); `make e2e-node`
//! starts the node and runs them with `-- --ignored --test-threads=1`. Against the node agent's
//! cluster they fail at once, saying so.

// A test reads top to bottom, as the story it checks; the 100-line limit is for the code it tests.
#![allow(clippy::too_many_lines, reason = "a test is one story, read top to bottom")]

mod harness;
mod prometheus;
mod suite;
