//! What the run's threads share, and what one worker's VUs share: the run's state
//! ([`Shared`]), the messages workers send the reporter, a worker's metrics and transport
//! ([`WorkerLocal`]), and the rule that aborts a run on a failed threshold.

use crate::client::transport::WorkerTransport;
use crate::compile::plan::Plan;
use crate::stats::metrics::IntervalStats;
use crate::stats::metrics::WorkerMetrics;
use std::cell::Cell;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use super::outcome::{ErrorSample, Totals};

/// How often a worker's controller looks at the ramp and the clock.
pub(super) const CONTROL_TICK: Duration = Duration::from_millis(25);

pub(super) struct Shared {
    pub(super) plan: Arc<Plan>,
    pub(super) start: Instant,
    /// One per [`Plan::groups`].
    pub(super) groups: Vec<GroupRun>,
    pub(super) interrupt: Arc<AtomicBool>,
    pub(super) tick: Duration,
    pub(super) totals: bool,
    /// Per worker: a copy of its totals is on its way to the reporter, not yet read (see
    /// [`super::worker::take_interval`]). Sized by the executor once it knows the threads.
    pub(super) totals_unread: Box<[AtomicBool]>,
    /// One shared cursor per data source (touched once per iteration).
    pub(super) data_cursors: Vec<crate::compile::data::Cursor>,
    /// A data source with `onExhausted: stop` ran out: the run ends.
    pub(super) data_exhausted: AtomicBool,
    /// A step with `onError: abort-run` failed: the run stops at once, for this reason.
    pub(super) aborted: std::sync::OnceLock<String>,
    /// Iterations started on this runner (`test.iteration` numbers them across runners).
    pub(super) iterations_started: AtomicU64,
    /// The `setup` steps' values with their slots: each VU starts with them.
    pub(super) setup_values: Vec<(usize, String)>,
    /// What error samples may not keep: the plan's environment values and setup's values.
    pub(super) redactor: crate::compile::secrets::Redactor,
    /// How the run opens connections: TLS configurations and source addresses, shared by every
    /// worker.
    pub(super) transport: Arc<crate::client::settings::Transport>,
    /// Load changes taken while the run goes on.
    pub(super) control: Arc<super::outcome::LiveControl>,
}

/// The setup values of `values` (by name) in the slots of `plan`'s setup outputs.
pub(super) fn setup_slots(plan: &Plan, values: &std::collections::BTreeMap<String, String>) -> Vec<(usize, String)> {
    plan.setup_outputs
        .iter()
        .filter_map(|(name, slot)| Some((*slot, plan.slot_setup_value(*slot, values.get(name)?))))
        .collect()
}

/// The running state of one group of VUs.
pub(super) struct GroupRun {
    /// The group's VUs are numbered `first_vu..first_vu + max_vus` across the run.
    pub(super) first_vu: u32,
    pub(super) max_vus: u32,
    /// No iteration starts after this.
    pub(super) deadline: Option<Instant>,
    /// In-flight iterations are abandoned at this instant.
    pub(super) hard_stop: Option<Instant>,
    pub(super) iteration_limit: Option<u64>,
    pub(super) iterations_claimed: AtomicU64,
    pub(super) ramp_down_grace: Duration,
}

impl Shared {
    /// The shared state of a run of `plan` with `groups` that started at `start`: no data used,
    /// nothing aborted; the VUs start with the setup's `values` (by name).
    pub(super) fn new(
        plan: Arc<Plan>,
        (start, groups): (Instant, Vec<GroupRun>),
        interrupt: Arc<AtomicBool>,
        (tick, totals): (Duration, bool),
        values: &std::collections::BTreeMap<String, String>,
        control: Arc<super::outcome::LiveControl>,
    ) -> Shared {
        Shared {
            start,
            groups,
            interrupt,
            tick,
            totals,
            totals_unread: Box::default(),
            data_cursors: (0..plan.data.len()).map(|_| crate::compile::data::Cursor::default()).collect(),
            data_exhausted: AtomicBool::new(false),
            aborted: std::sync::OnceLock::new(),
            iterations_started: AtomicU64::new(0),
            setup_values: setup_slots(&plan, values),
            transport: Arc::new(crate::client::settings::Transport::new(plan.transport.clone())),
            control,
            redactor: plan.redactor.with(values.iter().flat_map(|(k, v)| {
                // A value extracted as JSON is held quoted; requests send its text.
                let text = crate::compile::template::slot_text(v);
                let text = (text != v.as_str()).then(|| (text.into_owned(), format!("setup.{k}")));
                std::iter::once((v.clone(), format!("setup.{k}"))).chain(text)
            })),
            plan,
        }
    }

    /// Stop everything now, abandoning iterations in flight.
    pub(super) fn halted(&self) -> bool {
        self.interrupt.load(Ordering::Relaxed) || self.aborted.get().is_some()
    }

    /// Group `g` starts no more iterations.
    pub(super) fn stopping(&self, g: usize, now: Instant) -> bool {
        let group = &self.groups[g];
        self.halted()
            || self.data_exhausted.load(Ordering::Relaxed)
            || group.deadline.is_some_and(|d| now >= d)
            || group.iteration_limit.is_some_and(|l| group.iterations_claimed.load(Ordering::Relaxed) >= l)
    }

    pub(super) fn claim_iteration(&self, g: usize) -> bool {
        let group = &self.groups[g];
        match group.iteration_limit {
            None => true,
            Some(limit) => group.iterations_claimed.fetch_add(1, Ordering::Relaxed) < limit,
        }
    }

    /// The group and the group-local number of VU `vu`.
    pub(super) fn group_of(&self, vu: u32) -> (usize, u32) {
        let g = self.groups.partition_point(|gr| gr.first_vu + gr.max_vus <= vu).min(self.groups.len() - 1);
        (g, vu - self.groups[g].first_vu)
    }
}

pub(super) enum WorkerMsg {
    Tick { worker: usize, index: u64, active: u32, stats: IntervalStats, totals: Option<Box<Totals>> },
    Done { worker: usize, index: u64, stats: IntervalStats, totals: Option<Box<Totals>> },
}

pub(super) struct WorkerResult {
    pub(super) metrics: WorkerMetrics,
    pub(super) cpu: Duration,
    pub(super) max_active: u32,
    pub(super) error_samples: Vec<ErrorSample>,
}

/// First failures kept per worker, with their messages, for the report.
pub(super) const ERROR_SAMPLES_PER_WORKER: usize = 5;

/// What one worker's tasks share (single thread: `Rc`/`Cell`/`RefCell`).
pub(super) struct WorkerLocal {
    pub(super) metrics: RefCell<WorkerMetrics>,
    pub(super) active: Cell<u32>,
    pub(super) max_active: Cell<u32>,
    pub(super) error_samples: RefCell<Vec<ErrorSample>>,
    /// The worker's HTTP/2 connections, shared by its VUs.
    pub(super) transport: WorkerTransport,
    /// The interval the ticker sends next: what is recorded now belongs to it.
    pub(super) next_tick: Cell<u64>,
    /// What error samples may not keep ([`Shared`]'s).
    pub(super) redactor: crate::compile::secrets::Redactor,
}

impl WorkerLocal {
    /// Worker `id` of `threads`' own state, for the run `shared`.
    pub(super) fn new(shared: &Shared, id: usize, threads: usize) -> WorkerLocal {
        let plan = &shared.plan;
        WorkerLocal {
            redactor: shared.redactor.clone(),
            metrics: RefCell::new(WorkerMetrics::new(plan.step_keys.len(), plan.scenarios.len())),
            active: Cell::new(0),
            max_active: Cell::new(0),
            next_tick: Cell::new(1),
            error_samples: RefCell::new(Vec::new()),
            transport: WorkerTransport::new(shared.transport.clone(), id, threads),
        }
    }
}

/// Counts a VU as active while the guard lives — a closed model's VU all its life, an open
/// model's while it runs an iteration — even when it is aborted.
pub(super) struct ActiveGuard(pub(super) Rc<WorkerLocal>);

impl ActiveGuard {
    pub(super) fn new(local: Rc<WorkerLocal>) -> Self {
        let n = local.active.get() + 1;
        local.active.set(n);
        local.max_active.set(local.max_active.get().max(n));
        ActiveGuard(local)
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.set(self.0.active.get().saturating_sub(1));
    }
}

/// Evaluates the `abortOnFail` thresholds on the totals so far; the first failure aborts
/// the run.
pub(super) fn abort_on_failed_thresholds(shared: &Shared, totals: &Totals, elapsed: Duration) {
    let plan = &shared.plan;
    let measured = crate::compile::threshold::Measured {
        step_keys: &plan.step_keys,
        steps: &totals.steps,
        group_keys: &plan.group_keys,
        groups: &totals.groups,
    };
    for t in plan.thresholds.iter().filter(|t| t.abort_on_fail && elapsed >= t.delay_abort_eval) {
        if let Some(v) = t.evaluate_live(&measured, elapsed.as_secs_f64())
            && !v.passed
        {
            let _ = shared.aborted.set(format!(
                "threshold `{}` failed after {:.1}s (actual {}) and has `abortOnFail`",
                t.source,
                elapsed.as_secs_f64(),
                v.actual_text
            ));
            return;
        }
    }
}
