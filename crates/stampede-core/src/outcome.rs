//! What a run gives: the ticks it reports while it runs, the totals they carry, the error
//! samples it keeps, and its outcome.

use std::sync::Arc;
use std::time::Duration;
use std::time::SystemTime;

use crate::stats::histogram::Latencies as _;
use crate::stats::metrics::IntervalStats;
use crate::stats::metrics::StepStats;
use crate::stats::metrics::WorkerMetrics;
use stampede_model::ErrorKind;
use stampede_model::report::TimelinePoint;

/// One reporting interval, merged over all workers.
#[derive(Clone, Debug)]
pub struct Tick {
    /// 1-based interval number.
    pub index: u64,
    /// Time since the start at the end of this interval.
    pub elapsed: Duration,
    /// Length of this interval (the last one may be short).
    pub length: Duration,
    /// VUs running at the end of the interval.
    pub active_vus: u32,
    /// What the workers recorded in this interval alone, merged.
    pub stats: IntervalStats,
    /// Everything recorded since the start, merged over workers (when the run was asked for them).
    /// Each worker's part is its latest snapshot, so counters only grow from tick to tick.
    pub totals: Option<Arc<Totals>>,
}

/// Cumulative per-step statistics and per-scenario iterations.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    /// Indexed like [`Plan::step_keys`].
    pub steps: Vec<StepStats>,
    /// Indexed like [`Plan::group_keys`] (the `group` blocks' transactions so far).
    pub groups: Vec<StepStats>,
    /// Completed iterations per scenario.
    pub iterations: Vec<u64>,
    /// Open models: schedule lag, µs.
    pub schedule_lag: Option<hdrhistogram::Histogram<u64>>,
    /// Open models: dropped iterations by load group.
    pub dropped: Vec<u64>,
    /// Open models: dropped iterations by [`DropReason`](crate::stats::metrics::DropReason).
    pub dropped_by_reason: [u64; crate::stats::metrics::DropReason::ALL.len()],
    /// Open models: how long iterations that found every VU busy waited for one, µs.
    pub queue_wait: Option<hdrhistogram::Histogram<u64>>,
}

impl Totals {
    /// A copy of one worker's cumulative recordings (the open-model histograms `None` when empty).
    pub fn of(metrics: &WorkerMetrics) -> Self {
        Totals {
            steps: metrics.steps.clone(),
            groups: metrics.groups.clone(),
            iterations: metrics.iterations.clone(),
            schedule_lag: (!metrics.schedule_lag.is_empty()).then(|| metrics.schedule_lag.clone()),
            dropped: metrics.dropped.clone(),
            dropped_by_reason: metrics.dropped_by_reason,
            queue_wait: (!metrics.queue_wait.is_empty()).then(|| metrics.queue_wait.clone()),
        }
    }

    /// Adds `other` into these; empty totals (no steps) become a copy of it.
    pub fn merge(&mut self, other: &Totals) {
        if self.steps.is_empty() {
            *self = other.clone();
            return;
        }
        for (a, b) in self.steps.iter_mut().zip(&other.steps) {
            a.merge(b);
        }
        for (g, b) in other.groups.iter().enumerate() {
            if self.groups.len() <= g {
                self.groups.resize_with(g + 1, StepStats::default);
            }
            self.groups[g].merge(b);
        }
        for (a, b) in self.iterations.iter_mut().zip(&other.iterations) {
            *a += b;
        }
        match (&mut self.schedule_lag, &other.schedule_lag) {
            (Some(a), Some(b)) => a.merge_from(b).expect("histograms share bounds"),
            (None, Some(b)) => self.schedule_lag = Some(b.clone()),
            _ => {}
        }
        for (g, n) in other.dropped.iter().enumerate() {
            if self.dropped.len() <= g {
                self.dropped.resize(g + 1, 0);
            }
            self.dropped[g] += n;
        }
        for (a, b) in self.dropped_by_reason.iter_mut().zip(other.dropped_by_reason) {
            *a += b;
        }
        match (&mut self.queue_wait, &other.queue_wait) {
            (Some(a), Some(b)) => a.merge_from(b).expect("histograms share bounds"),
            (None, Some(b)) => self.queue_wait = Some(b.clone()),
            _ => {}
        }
    }
}

/// A failure kept with its message and, truncated, the request and response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorSample {
    /// The failing step's metric index (like [`Plan::step_keys`](crate::Plan::step_keys)).
    pub metric: usize,
    /// What kind of failure it was.
    pub kind: ErrorKind,
    /// ``step `NAME`: `` and the reason, secrets redacted.
    pub message: String,
    /// The request as sent (first [`SAMPLE_BYTES`] bytes, lossy UTF-8).
    pub request: String,
    /// Status line, kept headers and kept body of the answer, when there was one.
    pub response: Option<String>,
}

/// How much of a failing request and response a sample keeps.
pub const SAMPLE_BYTES: usize = 1024;

/// What a run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// Every worker's recordings, merged.
    pub metrics: WorkerMetrics,
    /// Wall-clock time the load started.
    pub started_at: SystemTime,
    /// How long the load ran, from its start until every worker had finished.
    pub duration: Duration,
    /// Worker threads the run used.
    pub threads: usize,
    /// CPU time of the worker threads together.
    pub worker_cpu: Duration,
    /// One point per interval (the merged histograms are summarized, not kept).
    pub timeline: Vec<TimelinePoint>,
    /// Peak VUs active at once: each worker's peak, added up.
    pub max_active_vus: u32,
    /// The run was stopped early from outside (Ctrl-C, or the caller's interrupt flag).
    pub interrupted: bool,
    /// Examples of failures: per worker, the first of each kind at each step, up to a cap (empty:
    /// nothing failed).
    pub error_samples: Vec<ErrorSample>,
    /// Why the run was aborted early by a step's `onError: abort-run`.
    pub aborted: Option<String>,
    /// How many loopback source addresses new connections were spread over once the system's
    /// ports ran out (0: they did not run out, or `http.localAddresses` was given).
    pub source_addresses_spread: usize,
    /// Load changed while the run went on, in order.
    pub load_changes: Vec<stampede_model::report::LoadChange>,
}
