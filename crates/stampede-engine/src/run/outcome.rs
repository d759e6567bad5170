//! What a run takes ([`RunOptions`]) and gives (the core's [`stampede_core::outcome`]).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use stampede_core::output::live::LiveChange;
use stampede_model::report::{LoadChange, round3};

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
    /// Load changes the run takes while it goes on (the dashboard's controls).
    pub control: Arc<LiveControl>,
}

/// Load changes a run takes while it goes on: a closed model's VUs, an open model's rate, and a
/// pause. Shared by
/// the caller (who checks a change with [`stampede_core::output::live::check_change`] first) and the
/// run's workers, who look at it with the ramp, every 25 ms: a change takes effect on every
/// worker at their next look.
#[derive(Debug, Default)]
pub struct LiveControl {
    /// The VUs wanted instead of the plan's, plus one (0: the plan's).
    vus: AtomicU32,
    paused: AtomicBool,
    /// How many changes of an open model's schedule (a rate, a pause) were taken: its
    /// schedulers rebuild their schedule when it moves.
    schedule_changes: AtomicU32,
    /// The run's start (set by the run): changes are recorded as seconds since it.
    start: OnceLock<Instant>,
    changes: Mutex<Vec<LoadChange>>,
}

impl LiveControl {
    /// The VUs wanted instead of the plan's, when a change asked for them.
    pub fn vus(&self) -> Option<u32> {
        self.vus.load(Ordering::Relaxed).checked_sub(1)
    }

    /// Whether no new iteration may start.
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// Takes `change` now, and records it (with the time since the run's start).
    pub fn apply(&self, change: &LiveChange) -> LoadChange {
        let mut changes = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(vus) = change.vus {
            self.vus.store(vus.saturating_add(1), Ordering::Relaxed);
        }
        if let Some(paused) = change.paused {
            self.paused.store(paused, Ordering::Relaxed);
        }
        let t = self.start.get().map_or(0.0, |s| round3(s.elapsed().as_secs_f64()));
        let recorded = LoadChange { t, vus: change.vus, rate: change.rate, paused: change.paused };
        changes.push(recorded.clone());
        if change.rate.is_some() || change.paused.is_some() {
            // Released with the change list's lock: a scheduler that sees the new count reads
            // the list with this change in it.
            self.schedule_changes.fetch_add(1, Ordering::Release);
        }
        recorded
    }

    /// How many changes of an open model's schedule were taken so far.
    pub(crate) fn schedule_changes(&self) -> u32 {
        self.schedule_changes.load(Ordering::Acquire)
    }

    /// Every change taken so far, in order.
    pub fn changes(&self) -> Vec<LoadChange> {
        self.changes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Marks the run's start (the first call counts).
    pub(crate) fn started(&self, at: Instant) {
        let _ = self.start.set(at);
    }
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
            control: Arc::default(),
        }
    }
}
