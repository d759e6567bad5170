//! What a run takes ([`RunOptions`]) and gives (the core's [`stampede_core::outcome`]).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

pub use stampede_core::outcome::*;

/// How to run a plan.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Worker threads (at least 1; more than the VU count is pointless).
    pub threads: usize,
    /// Reporting interval (ticks).
    pub tick: Duration,
    /// Give every tick the run's cumulative per-step totals so far ([`Tick::totals`]), e.g.
    /// for a Prometheus endpoint. Costs one copy of each worker's histograms per tick; the
    /// hot path is untouched.
    pub totals: bool,
    /// Set to stop the run early (Ctrl-C): in-flight requests are abandoned.
    pub interrupt: Arc<AtomicBool>,
    /// What the test's `setup` extracted, by name: every VU reads them as `setup.NAME`.
    pub setup_values: Arc<std::collections::BTreeMap<String, String>>,
    /// `setup` and `teardown` ran, or will run, elsewhere (in a cluster: once for the whole
    /// LoadTest, in pods of their own); this run only loads, with `setup_values` as they gave.
    pub once_elsewhere: bool,
    /// The baseline run's report (`--baseline`): relative thresholds are judged against it, in
    /// the report and at each plateau of a capacity search.
    pub baseline: Option<Arc<stampede_model::report::Report>>,
}

impl RunOptions {
    /// What relative thresholds are judged against.
    pub fn baseline(&self) -> stampede_core::Baseline<'_> {
        self.baseline.as_deref().ok_or(stampede_core::NO_BASELINE)
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            tick: Duration::from_secs(1),
            totals: false,
            interrupt: Arc::new(AtomicBool::new(false)),
            setup_values: Arc::default(),
            once_elsewhere: false,
            baseline: None,
        }
    }
}
