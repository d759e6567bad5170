//! The LoadTest lifecycle as a pure function: from the LoadTest and what was observed of
//! its children, the next status and the actions the shell must take.
//!
//! `Pending → Initializing → Running → Succeeded | Failed | Aborted`
//!
//! Its files, lowest first (each uses only those before it): `decision` what a decision is
//! given and returns, `stamp` times and conditions, `live` the changes of `spec.live`, `once` the
//! setup and teardown pods, `end` the end of a run, `run` a valid test in progress, and `decide`
//! the entry points.

mod decide;
mod decision;
mod end;
mod live;
mod once;
mod run;
mod stamp;

pub use decide::{decide, only_counts_changed, rerun_reason};
pub use decision::{
    ABORT_GRACE, Action, DEFAULT_START_TIMEOUT, Decision, FAILURE_GRACE, IMAGE_PULL_GRACE, JobState, Observed,
    OncePods, OnceSeen, PodProblem, RUN_TIMEOUT_MARGIN, START_DELAY, Scenario, TEARDOWN_TIMEOUT, pod_failure,
    read_once, read_report,
};
pub use end::{REPORT_LIMIT_BYTES, rejected, write_report};
pub use live::LIVE_DELAY;
pub(crate) use stamp::Stamp;
