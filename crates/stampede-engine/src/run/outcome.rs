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

/// How long after it is asked for a change of an open model's schedule takes effect (more than
/// the millisecond early its schedulers hand out iterations; see [`LiveControl::apply`]).
pub(crate) const SCHEDULE_CHANGE_MARGIN: Duration = Duration::from_millis(2);

/// `d` in seconds, rounded up to the millisecond.
fn ceil_ms(d: Duration) -> f64 {
    d.as_micros().div_ceil(1000) as f64 / 1000.0
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
    ///
    /// A change of an open model's schedule (a rate, a pause) is recorded at
    /// [`SCHEDULE_CHANGE_MARGIN`] after this instant, rounded up to the millisecond: its
    /// schedulers hand out an iteration up to a millisecond before it is due, so one may have
    /// handed out an iteration due a moment after the change was asked for. Every iteration
    /// handed out was due before the recorded instant, and every one due after it follows the
    /// new schedule, so the schedule computed from the recorded changes is exactly the one
    /// that ran.
    pub fn apply(&self, change: &LiveChange) -> LoadChange {
        let mut changes = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        let schedule = change.rate.is_some() || change.paused.is_some();
        if schedule {
            // Odd while this change is being recorded: a scheduler that finds the count odd
            // waits for it (see `schedule_changes`); one that found it even before this point
            // handed out only iterations due before the instant read below.
            self.schedule_changes.fetch_add(1, Ordering::SeqCst);
        }
        if let Some(vus) = change.vus {
            self.vus.store(vus.saturating_add(1), Ordering::Relaxed);
        }
        if let Some(paused) = change.paused {
            self.paused.store(paused, Ordering::Relaxed);
        }
        let t = self.start.get().map_or(0.0, |s| {
            let elapsed = s.elapsed();
            if schedule { ceil_ms(elapsed + SCHEDULE_CHANGE_MARGIN) } else { round3(elapsed.as_secs_f64()) }
        });
        let recorded = LoadChange { t, vus: change.vus, rate: change.rate, paused: change.paused };
        changes.push(recorded.clone());
        if schedule {
            // Even again, with the change in the list: a scheduler that sees the new count
            // reads the list with this change in it.
            self.schedule_changes.fetch_add(1, Ordering::SeqCst);
        }
        recorded
    }

    /// A count that moves with each change of an open model's schedule: odd while one is being
    /// recorded. Waits (briefly: the recording takes microseconds) until it is even, so that
    /// a scheduler that finds it unchanged knows that any change still to come is recorded
    /// after [`SCHEDULE_CHANGE_MARGIN`] from now.
    pub(crate) fn schedule_changes(&self) -> u32 {
        loop {
            let n = self.schedule_changes.load(Ordering::SeqCst);
            if n.is_multiple_of(2) {
                return n;
            }
            std::thread::yield_now();
        }
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
