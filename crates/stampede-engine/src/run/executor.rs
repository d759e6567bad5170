//! The workload models: closed (`constant-vus`, `ramping-vus`: VUs loop over iterations)
//! and open (`constant-arrival-rate`, `ramping-arrival-rate`: iterations start on a schedule
//! and take a free VU; when none is free they wait for one, within bounds, or are counted as
//! dropped).
//!
//! The run is split over worker threads, each with its own single-threaded tokio runtime.
//! Virtual user *i* lives on worker *i mod threads*, owns its connection, its buffers and
//! its random generator, and records into its worker's metrics through a `RefCell`: no
//! lock, atomic or channel per request. The only shared state touched per *iteration* is
//! one relaxed atomic counter, and only when the run is bounded by an iteration count.
//! Once per reporting interval each worker sends a snapshot of that interval to the
//! reporter (the calling thread), which merges them into ticks.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use tokio::task::{AbortHandle, JoinSet};

use crate::client::exchange::{ExchangeError, Headers, ResponseInfo};
use crate::client::transport::{self, VuConn, WorkerTransport};
use crate::client::url::HttpUrl;
use crate::compile::extract::ResponseView;
use crate::compile::plan::{LoadPlan, Plan, StepPlan};
use crate::compile::request::RequestPlan;
use crate::error::RunError;
use crate::stats::metrics::{DropReason, IntervalStats, StepStats, WorkerMetrics};
use crate::stats::sysstat;
use stampede_model::ErrorKind;
use stampede_model::report::TimelinePoint;
use stampede_model::scenario::OnError;

/// How often a worker's controller looks at the ramp and the clock.
const CONTROL_TICK: Duration = Duration::from_millis(25);
/// First failures kept per worker, with their messages, for the report.
const ERROR_SAMPLES_PER_WORKER: usize = 5;

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
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            tick: Duration::from_secs(1),
            totals: false,
            interrupt: Arc::new(AtomicBool::new(false)),
        }
    }
}

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
    pub stats: IntervalStats,
    /// Everything recorded since the start, merged over workers (with [`RunOptions::totals`]).
    /// Each worker's part is its latest snapshot, so counters only grow from tick to tick.
    pub totals: Option<Arc<Totals>>,
}

/// Cumulative per-step statistics and per-scenario iterations.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    /// Indexed like [`Plan::step_keys`].
    pub steps: Vec<StepStats>,
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
    fn of(metrics: &WorkerMetrics) -> Self {
        Totals {
            steps: metrics.steps.clone(),
            iterations: metrics.iterations.clone(),
            schedule_lag: (!metrics.schedule_lag.is_empty()).then(|| metrics.schedule_lag.clone()),
            dropped: metrics.dropped.clone(),
            dropped_by_reason: metrics.dropped_by_reason,
            queue_wait: (!metrics.queue_wait.is_empty()).then(|| metrics.queue_wait.clone()),
        }
    }

    fn merge(&mut self, other: &Totals) {
        if self.steps.is_empty() {
            *self = other.clone();
            return;
        }
        for (a, b) in self.steps.iter_mut().zip(&other.steps) {
            a.merge(b);
        }
        for (a, b) in self.iterations.iter_mut().zip(&other.iterations) {
            *a += b;
        }
        match (&mut self.schedule_lag, &other.schedule_lag) {
            (Some(a), Some(b)) => a.add(b).expect("histograms share bounds"),
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
            (Some(a), Some(b)) => a.add(b).expect("histograms share bounds"),
            (None, Some(b)) => self.queue_wait = Some(b.clone()),
            _ => {}
        }
    }
}

/// A failure kept with its message and, truncated, the request and response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorSample {
    pub metric: usize,
    pub kind: ErrorKind,
    pub message: String,
    /// The request as sent (first [`SAMPLE_BYTES`] bytes, lossy UTF-8).
    pub request: String,
    /// Status line, kept headers and kept body of the answer, when there was one.
    pub response: Option<String>,
}

/// How much of a failing request and response a sample keeps.
pub(crate) const SAMPLE_BYTES: usize = 1024;

/// What a run produced.
#[derive(Debug)]
pub struct RunOutcome {
    pub metrics: WorkerMetrics,
    pub started_at: SystemTime,
    pub duration: Duration,
    pub threads: usize,
    /// CPU time of the worker threads together.
    pub worker_cpu: Duration,
    /// One point per interval (the merged histograms are summarized, not kept).
    pub timeline: Vec<TimelinePoint>,
    pub max_active_vus: u32,
    pub interrupted: bool,
    pub error_samples: Vec<ErrorSample>,
    /// Why the run was aborted early by a step's `onError: abort-run`.
    pub aborted: Option<String>,
}

struct Shared {
    plan: Arc<Plan>,
    start: Instant,
    /// One per [`Plan::groups`].
    groups: Vec<GroupRun>,
    interrupt: Arc<AtomicBool>,
    tick: Duration,
    totals: bool,
    /// One shared cursor per data source (touched once per iteration).
    data_cursors: Vec<crate::compile::data::Cursor>,
    /// A data source with `onExhausted: stop` ran out: the run ends.
    data_exhausted: AtomicBool,
    /// A step with `onError: abort-run` failed: the run stops at once, for this reason.
    aborted: std::sync::OnceLock<String>,
}

/// The running state of one group of VUs.
struct GroupRun {
    /// The group's VUs are numbered `first_vu..first_vu + max_vus` across the run.
    first_vu: u32,
    max_vus: u32,
    /// No iteration starts after this.
    deadline: Option<Instant>,
    /// In-flight iterations are abandoned at this instant.
    hard_stop: Option<Instant>,
    iteration_limit: Option<u64>,
    iterations_claimed: AtomicU64,
    ramp_down_grace: Duration,
}

impl Shared {
    /// Stop everything now, abandoning iterations in flight.
    fn halted(&self) -> bool {
        self.interrupt.load(Ordering::Relaxed) || self.aborted.get().is_some()
    }

    /// Group `g` starts no more iterations.
    fn stopping(&self, g: usize, now: Instant) -> bool {
        let group = &self.groups[g];
        self.halted()
            || self.data_exhausted.load(Ordering::Relaxed)
            || group.deadline.is_some_and(|d| now >= d)
            || group.iteration_limit.is_some_and(|l| group.iterations_claimed.load(Ordering::Relaxed) >= l)
    }

    fn claim_iteration(&self, g: usize) -> bool {
        let group = &self.groups[g];
        match group.iteration_limit {
            None => true,
            Some(limit) => group.iterations_claimed.fetch_add(1, Ordering::Relaxed) < limit,
        }
    }

    /// The group and the group-local number of VU `vu`.
    fn group_of(&self, vu: u32) -> (usize, u32) {
        let g = self.groups.partition_point(|gr| gr.first_vu + gr.max_vus <= vu).min(self.groups.len() - 1);
        (g, vu - self.groups[g].first_vu)
    }
}

enum WorkerMsg {
    Tick { worker: usize, index: u64, active: u32, stats: IntervalStats, totals: Option<Box<Totals>> },
    Done { worker: usize, index: u64, stats: IntervalStats, totals: Option<Box<Totals>> },
}

struct WorkerResult {
    metrics: WorkerMetrics,
    cpu: Duration,
    max_active: u32,
    error_samples: Vec<ErrorSample>,
}

/// What one worker's tasks share (single thread: `Rc`/`Cell`/`RefCell`).
struct WorkerLocal {
    metrics: RefCell<WorkerMetrics>,
    active: Cell<u32>,
    max_active: Cell<u32>,
    error_samples: RefCell<Vec<ErrorSample>>,
    /// The worker's HTTP/2 connections, shared by its VUs.
    transport: WorkerTransport,
    /// The interval the ticker sends next: what is recorded now belongs to it.
    next_tick: Cell<u64>,
}

/// Counts a VU as active for as long as it lives, even when it is aborted.
struct ActiveGuard(Rc<WorkerLocal>);

impl ActiveGuard {
    fn new(local: Rc<WorkerLocal>) -> Self {
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

/// Runs `plan` to completion on worker threads; `on_tick` sees each merged interval.
pub fn run(plan: Arc<Plan>, opts: &RunOptions, on_tick: &mut dyn FnMut(&Tick)) -> Result<RunOutcome, RunError> {
    let max_vus = plan.max_vus().max(1) as usize;
    let threads = opts.threads.clamp(1, max_vus);
    let plan_data_len = plan.data.len();
    let plan_aborts = plan.thresholds.iter().any(|t| t.abort_on_fail);
    let started_at = SystemTime::now();
    let start = Instant::now();
    let mut first_vu = 0;
    let groups = plan
        .groups
        .iter()
        .map(|g| {
            let deadline = g.load.planned_duration().map(|d| start + d);
            let run = GroupRun {
                first_vu,
                max_vus: g.load.max_vus(),
                deadline,
                hard_stop: deadline.map(|d| d + g.load.graceful_stop()),
                iteration_limit: match &g.load {
                    LoadPlan::ConstantVus { iterations, .. } => *iterations,
                    LoadPlan::RampingVus { .. } | LoadPlan::ArrivalRate { .. } => None,
                },
                iterations_claimed: AtomicU64::new(0),
                ramp_down_grace: match &g.load {
                    LoadPlan::RampingVus { graceful_ramp_down, .. } => *graceful_ramp_down,
                    LoadPlan::ConstantVus { .. } | LoadPlan::ArrivalRate { .. } => Duration::ZERO,
                },
            };
            first_vu += run.max_vus;
            run
        })
        .collect();
    let shared = Arc::new(Shared {
        plan,
        start,
        groups,
        interrupt: opts.interrupt.clone(),
        tick: opts.tick,
        totals: opts.totals || plan_aborts,
        data_cursors: (0..plan_data_len).map(|_| crate::compile::data::Cursor::default()).collect(),
        data_exhausted: AtomicBool::new(false),
        aborted: std::sync::OnceLock::new(),
    });

    let (tx, rx) = mpsc::channel::<WorkerMsg>();
    let handles = start_all(threads, &shared.interrupt, |id| {
        let (shared, tx) = (shared.clone(), tx.clone());
        std::thread::Builder::new()
            .name(format!("stampede-worker-{id}"))
            .spawn(move || worker_main(id, threads, shared, tx))
    })
    .map_err(RunError::Threads)?;
    drop(tx);

    let mut reporter = Reporter::new(&shared, threads, on_tick);
    for msg in rx {
        reporter.receive(msg, start.elapsed());
    }
    let duration = start.elapsed();
    let timeline = reporter.finish(duration);

    let mut merged: Option<WorkerMetrics> = None;
    let mut worker_cpu = Duration::ZERO;
    let mut max_active_vus = 0;
    let mut error_samples = Vec::new();
    for handle in handles {
        let result = handle
            .join()
            .map_err(|_| RunError::Worker("a worker thread panicked".into()))?
            .map_err(RunError::Worker)?;
        worker_cpu += result.cpu;
        max_active_vus += result.max_active;
        error_samples.extend(result.error_samples);
        match &mut merged {
            None => merged = Some(result.metrics),
            Some(m) => m.merge(&result.metrics),
        }
    }
    let plan = &shared.plan;
    Ok(RunOutcome {
        metrics: merged.unwrap_or_else(|| WorkerMetrics::new(plan.step_keys.len(), plan.scenarios.len())),
        started_at,
        duration,
        threads,
        worker_cpu,
        max_active_vus,
        timeline,
        interrupted: shared.interrupt.load(Ordering::Relaxed),
        error_samples,
        aborted: shared.aborted.get().cloned(),
    })
}

/// One reporting interval, being assembled from the workers' snapshots.
struct PendingTick {
    /// Which workers sent their part.
    seen: Vec<bool>,
    stats: IntervalStats,
    active_vus: u32,
}

/// Merges the workers' interval snapshots into ticks, in order: an interval is complete once
/// every worker still running has sent its part. Runs on the calling thread.
struct Reporter<'a> {
    shared: &'a Shared,
    pending: BTreeMap<u64, PendingTick>,
    /// Workers that have finished (they send no more intervals).
    done: Vec<bool>,
    /// Each worker's latest cumulative totals (when ticks carry totals).
    latest: Vec<Option<Box<Totals>>>,
    /// The end of the last tick emitted.
    prev_end: Duration,
    timeline: Vec<TimelinePoint>,
    on_tick: &'a mut dyn FnMut(&Tick),
}

impl<'a> Reporter<'a> {
    fn new(shared: &'a Shared, threads: usize, on_tick: &'a mut dyn FnMut(&Tick)) -> Self {
        Reporter {
            shared,
            pending: BTreeMap::new(),
            done: vec![false; threads],
            latest: (0..threads).map(|_| None).collect(),
            prev_end: Duration::ZERO,
            timeline: Vec::new(),
            on_tick,
        }
    }

    /// Takes in one worker message (`now`: time since the start) and emits every interval it
    /// completes.
    fn receive(&mut self, msg: WorkerMsg, now: Duration) {
        let threads = self.done.len();
        let (worker, index, stats, active, totals) = match msg {
            WorkerMsg::Tick { worker, index, active, stats, totals } => (worker, index, stats, active, totals),
            WorkerMsg::Done { worker, index, stats, totals } => {
                self.done[worker] = true;
                (worker, index, stats, 0, totals)
            }
        };
        if totals.is_some() {
            self.latest[worker] = totals;
        }
        let entry = self.pending.entry(index).or_insert_with(|| PendingTick {
            seen: vec![false; threads],
            stats: IntervalStats::default(),
            active_vus: 0,
        });
        entry.seen[worker] = true;
        entry.stats.merge(&stats);
        entry.active_vus += active;
        while let Some(first) = self.pending.first_entry() {
            let complete = first.get().seen.iter().zip(&self.done).all(|(seen, done)| *seen || *done);
            if !complete {
                break;
            }
            let (index, tick) = first.remove_entry();
            self.emit(index, tick, now);
        }
    }

    /// Emits what is left when every worker has finished, and returns the timeline.
    fn finish(mut self, now: Duration) -> Vec<TimelinePoint> {
        for (index, tick) in std::mem::take(&mut self.pending) {
            self.emit(index, tick, now);
        }
        self.timeline
    }

    fn emit(&mut self, index: u64, tick: PendingTick, now: Duration) {
        let shared = self.shared;
        let elapsed = (shared.tick * index as u32).min(now).max(self.prev_end);
        let totals = shared.totals.then(|| {
            let mut sum = Totals::default();
            for t in self.latest.iter().flatten() {
                sum.merge(t);
            }
            Arc::new(sum)
        });
        if let Some(t) = &totals {
            abort_on_failed_thresholds(shared, t, elapsed);
        }
        let tick = Tick {
            index,
            elapsed,
            length: elapsed - self.prev_end,
            active_vus: tick.active_vus,
            stats: tick.stats,
            totals,
        };
        (self.on_tick)(&tick);
        self.timeline.push(timeline_point(&tick, &shared.plan.step_keys));
        self.prev_end = elapsed;
    }
}

fn worker_main(
    id: usize,
    threads: usize,
    shared: Arc<Shared>,
    tx: mpsc::Sender<WorkerMsg>,
) -> Result<WorkerResult, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot build a runtime: {e}"))?;
    let plan = &shared.plan;
    let local = Rc::new(WorkerLocal {
        metrics: RefCell::new(WorkerMetrics::new(plan.step_keys.len(), plan.scenarios.len())),
        active: Cell::new(0),
        max_active: Cell::new(0),
        next_tick: Cell::new(1),
        error_samples: RefCell::new(Vec::new()),
        transport: WorkerTransport::new(plan.transport.clone(), id, threads),
    });
    let set = tokio::task::LocalSet::new();
    set.block_on(&rt, worker_loop(id, threads, shared.clone(), local.clone(), tx));
    drop(set);
    let metrics = local.metrics.replace(WorkerMetrics::new(0, 0));
    let error_samples = local.error_samples.take();
    Ok(WorkerResult { metrics, cpu: sysstat::this_thread().cpu(), max_active: local.max_active.get(), error_samples })
}

struct RunningVu {
    retire: Rc<Cell<bool>>,
    retiring_since: Option<Instant>,
    abort: AbortHandle,
}

async fn worker_loop(
    id: usize,
    threads: usize,
    shared: Arc<Shared>,
    local: Rc<WorkerLocal>,
    tx: mpsc::Sender<WorkerMsg>,
) {
    let total_vus = shared.plan.max_vus();
    let owned: Vec<(u32, usize, u32)> = (0..total_vus)
        .filter(|i| *i as usize % threads == id)
        .map(|vu| {
            let (g, local_vu) = shared.group_of(vu);
            (vu, g, local_vu)
        })
        .filter(|(_, g, _)| !shared.plan.groups[*g].load.is_open())
        .collect();
    let ticker = tokio::task::spawn_local(ticker(id, shared.clone(), local.clone(), tx.clone()));
    // Open-model groups: this worker runs its share of each schedule.
    let mut open: JoinSet<()> = JoinSet::new();
    for (g, group) in shared.plan.groups.iter().enumerate() {
        let workers = threads.min(group.load.max_vus().max(1) as usize);
        if group.load.is_open() && id < workers {
            open.spawn_local(open_scheduler(g, id, workers, shared.clone(), local.clone()));
        }
    }
    let mut set: JoinSet<()> = JoinSet::new();
    // The running VU task of each `owned` entry, by position: the scan below touches every
    // entry on each control tick, so it must be cheap at 15,000 VUs. Completions find their
    // entry by task id.
    let mut slots: Vec<Option<RunningVu>> = owned.iter().map(|_| None).collect();
    let mut slot_of: HashMap<tokio::task::Id, usize> = HashMap::new();
    loop {
        let now = Instant::now();
        if shared.halted() {
            set.abort_all();
            open.abort_all();
            while set.join_next().await.is_some() {}
            while open.join_next().await.is_some() {}
            break;
        }
        let elapsed = now - shared.start;
        let targets: Vec<u32> = shared.plan.groups.iter().map(|g| g.load.target_vus_at(elapsed)).collect();
        let mut all_stopping = true;
        for (i, (slot, &(vu, g, local_vu))) in slots.iter_mut().zip(&owned).enumerate() {
            let group = &shared.groups[g];
            let hard_stopped = group.hard_stop.is_some_and(|h| now >= h);
            if let Some(r) = slot.as_ref()
                && (hard_stopped || r.retiring_since.is_some_and(|t| now - t >= group.ramp_down_grace))
            {
                r.abort.abort();
            }
            if hard_stopped || shared.stopping(g, now) {
                continue;
            }
            all_stopping = false;
            let target = targets[g];
            match slot {
                None if local_vu < target => {
                    let retire = Rc::new(Cell::new(false));
                    let abort = set.spawn_local(vu_task(vu, g, shared.clone(), local.clone(), retire.clone()));
                    slot_of.insert(abort.id(), i);
                    *slot = Some(RunningVu { retire, retiring_since: None, abort });
                }
                Some(r) if local_vu >= target && r.retiring_since.is_none() => {
                    r.retire.set(true);
                    r.retiring_since = Some(now);
                }
                Some(r) if local_vu < target && r.retiring_since.is_some() => {
                    // Wanted again before it left: keep it.
                    r.retire.set(false);
                    r.retiring_since = None;
                }
                _ => {}
            }
        }
        if all_stopping && set.is_empty() && open.is_empty() {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(CONTROL_TICK) => {}
            Some(_) = open.join_next(), if !open.is_empty() => {}
            Some(res) = set.join_next_with_id(), if !set.is_empty() => {
                // Take every VU task that has ended by now, not one per scan: at the end of
                // a run thousands end at once.
                let mut ended = Some(res);
                while let Some(res) = ended {
                    let id = match res {
                        Ok((id, ())) => id,
                        Err(e) => e.id(),
                    };
                    if let Some(i) = slot_of.remove(&id) {
                        slots[i] = None;
                    }
                    ended = set.try_join_next_with_id();
                }
            }
        }
    }
    ticker.abort();
    // What is left belongs to the interval the ticker has not sent yet, even when the run ended
    // after that interval's end but before the ticker ran (a busy thread): numbering it by the
    // time now would move a whole interval's counts into the next one.
    let index = local.next_tick.get();
    let (stats, totals) = take_interval(&shared, &local);
    let _ = tx.send(WorkerMsg::Done { worker: id, index, stats, totals });
}

/// Evaluates the `abortOnFail` thresholds on the totals so far; the first failure aborts
/// the run.
fn abort_on_failed_thresholds(shared: &Shared, totals: &Totals, elapsed: Duration) {
    let plan = &shared.plan;
    for t in plan.thresholds.iter().filter(|t| t.abort_on_fail && elapsed >= t.delay_abort_eval) {
        if let Some(v) = t.evaluate_live(&plan.step_keys, &totals.steps, elapsed.as_secs_f64())
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

/// The interval just ended (reset for the next) and, when asked for, a copy of the totals.
fn take_interval(shared: &Shared, local: &WorkerLocal) -> (IntervalStats, Option<Box<Totals>>) {
    let mut metrics = local.metrics.borrow_mut();
    let stats = std::mem::take(&mut metrics.interval);
    (stats, shared.totals.then(|| Box::new(Totals::of(&metrics))))
}

async fn ticker(id: usize, shared: Arc<Shared>, local: Rc<WorkerLocal>, tx: mpsc::Sender<WorkerMsg>) {
    let start = tokio::time::Instant::from_std(shared.start);
    let mut index: u64 = 1;
    loop {
        tokio::time::sleep_until(start + shared.tick * index as u32).await;
        let (stats, totals) = take_interval(&shared, &local);
        if tx.send(WorkerMsg::Tick { worker: id, index, active: local.active.get(), stats, totals }).is_err() {
            return;
        }
        index += 1;
        local.next_tick.set(index);
    }
}

/// A virtual user's own state.
struct Vu {
    /// Its HTTP/1.1 connection, and the connections it opened during the current step.
    conn: VuConn,
    slots: Vec<String>,
    rng: fastrand::Rng,
    request_buf: Vec<u8>,
    /// The request with the jar's cookies spliced in, or a redirect's request.
    extra_buf: Vec<u8>,
    /// The last response body, kept only for steps that read it.
    body: Vec<u8>,
    /// The last response's kept headers.
    headers: Headers,
    jar: Option<crate::client::cookies::Jar>,
    /// The first request bytes of the current step, for an error sample.
    sent_head: Vec<u8>,
    /// The request timeout's timer, kept from request to request (see [`WithDeadline`]).
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// When its last step ended, if it has not waited since: "now" for deciding whether to
    /// start another iteration, without reading the clock again.
    ended: Option<Instant>,
}

impl Vu {
    fn new(index: u32, shared: &Shared) -> Vu {
        Vu {
            conn: VuConn::default(),
            slots: vec![String::new(); shared.plan.slot_count],
            rng: fastrand::Rng::with_seed(0x5eed_0000_u64 ^ u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            request_buf: Vec::new(),
            extra_buf: Vec::new(),
            body: Vec::new(),
            headers: Headers::default(),
            jar: None,
            sent_head: Vec::new(),
            timer: None,
            ended: None,
        }
    }
}

/// A closed-model VU: runs iterations back to back until its group stops or it retires.
async fn vu_task(index: u32, group: usize, shared: Arc<Shared>, local: Rc<WorkerLocal>, retire: Rc<Cell<bool>>) {
    let _active = ActiveGuard::new(local.clone());
    let mut vu = Vu::new(index, &shared);
    while !retire.get()
        && !shared.stopping(group, vu.ended.take().unwrap_or_else(Instant::now))
        && shared.claim_iteration(group)
    {
        if !run_iteration(&mut vu, group, None, &shared, &local).await {
            break;
        }
    }
}

/// Runs one iteration of a scenario of `group`; `intended` is its scheduled start (open
/// models), from which the first request's latency counts. False when the VU should stop
/// (data used up, or the run was aborted).
async fn run_iteration(
    vu: &mut Vu,
    group: usize,
    intended: Option<Instant>,
    shared: &Shared,
    local: &WorkerLocal,
) -> bool {
    // This iteration's data rows; a used-up source with `onExhausted: stop` ends the VU.
    let mut exhausted = false;
    for (source, cursor) in shared.plan.data.iter().zip(&shared.data_cursors) {
        match cursor.pick(source, &mut vu.rng) {
            Some(row) => crate::compile::data::fill(source, row, &mut vu.slots),
            None => exhausted = true,
        }
    }
    if exhausted {
        shared.data_exhausted.store(true, Ordering::Relaxed);
        return false;
    }
    // Each iteration is a new visit: a fresh cookie jar.
    vu.jar = shared.plan.cookies.then(crate::client::cookies::Jar::default);
    let sc = shared.plan.groups[group].pick(&mut vu.rng);
    let scenario = &shared.plan.scenarios[sc];
    for (i, step) in scenario.steps.iter().enumerate() {
        let ok = run_step(vu, step, if i == 0 { intended } else { None }, local).await;
        if !ok {
            match step.on_error {
                OnError::Continue => {}
                OnError::NextIteration => break,
                OnError::AbortRun => {
                    let _ = shared.aborted.set(format!(
                        "step `{}` of scenario `{}` failed and has `onError: abort-run`",
                        step.name, scenario.name
                    ));
                    return false;
                }
            }
        }
        if let Some(think) = &step.think {
            vu.ended = None;
            tokio::time::sleep(think.pick(&mut vu.rng)).await;
        }
    }
    vu.conn.end_iteration(&shared.plan.transport);
    let mut m = local.metrics.borrow_mut();
    m.iterations[sc] += 1;
    m.interval.iterations += 1;
    true
}

/// An open-model iteration handed to a VU.
#[derive(Clone, Copy)]
struct Job {
    /// Its scheduled start: latency counts from here.
    intended: Instant,
    /// When it found every VU busy and began to wait for one.
    queued: Option<Instant>,
    /// How long it waited for a VU, when it did (set when a VU took it).
    waited: Duration,
}

/// An open-model VU's mailbox: its next iteration.
struct VuSlot {
    index: usize,
    job: Cell<Option<Job>>,
    wake: tokio::sync::Notify,
}

/// The resolution of tokio's timer.
const TIMER_RESOLUTION: Duration = Duration::from_millis(1);

/// Idle VUs, and due iterations waiting for one, of one open-model scheduler. A VU is idle
/// only while no iteration waits: one that finishes takes the oldest waiting iteration first.
struct Pool {
    group: usize,
    free: RefCell<Vec<usize>>,
    /// Iterations due while every VU was busy, oldest first.
    waiting: RefCell<std::collections::VecDeque<Job>>,
    max_waiting: usize,
    max_wait: Duration,
    closed: Cell<bool>,
}

impl Pool {
    /// Drops (and counts) waiting iterations that have waited longer than `max_wait` by `now`.
    fn expire(&self, now: Instant, local: &WorkerLocal) {
        let mut waiting = self.waiting.borrow_mut();
        while let Some(job) = waiting.front() {
            if job.queued.is_some_and(|q| now.saturating_duration_since(q) <= self.max_wait) {
                break;
            }
            waiting.pop_front();
            local.metrics.borrow_mut().record_dropped(self.group, DropReason::WaitedTooLong);
        }
    }

    /// The oldest waiting iteration that has not waited too long, with its wait until `now`.
    fn next_waiting(&self, now: Instant, local: &WorkerLocal) -> Option<Job> {
        self.expire(now, local);
        let job = self.waiting.borrow_mut().pop_front()?;
        Some(Job { waited: job.queued.map_or(Duration::ZERO, |q| now.saturating_duration_since(q)), ..job })
    }

    /// Counts the iterations still waiting when the group ends as dropped.
    fn drop_waiting(&self, now: Instant, local: &WorkerLocal) {
        self.expire(now, local);
        let left = std::mem::take(&mut *self.waiting.borrow_mut());
        let mut m = local.metrics.borrow_mut();
        for _ in 0..left.len() {
            m.record_dropped(self.group, DropReason::RunEnded);
        }
    }
}

/// Starts this worker's share of an open-model group's iterations on schedule (iterations
/// `id`, `id + workers`, …), each on a free VU. When every VU is busy and no more may be
/// started, the iteration waits for the next free VU (at most `maxWaiting` at once, each at
/// most `maxWait`), or is dropped and counted. Ends when the schedule does, after the VUs
/// finish the iterations started or waiting (at most until the group's hard stop).
async fn open_scheduler(g: usize, id: usize, workers: usize, shared: Arc<Shared>, local: Rc<WorkerLocal>) {
    let load = &shared.plan.groups[g].load;
    let LoadPlan::ArrivalRate { pre_allocated, max_vus, max_waiting, max_wait, .. } = load else { return };
    let share = |n: u32| stampede_model::scenario::split_evenly(u64::from(n), workers as u32, id as u32) as usize;
    let (pre, max) = (share(*pre_allocated), share(*max_vus).max(1));
    let pool = Rc::new(Pool {
        group: g,
        free: RefCell::default(),
        waiting: RefCell::default(),
        max_waiting: share(*max_waiting),
        max_wait: *max_wait,
        closed: Cell::new(false),
    });
    let mut slots: Vec<Rc<VuSlot>> = Vec::new();
    let mut vus: JoinSet<()> = JoinSet::new();
    let first_vu = shared.groups[g].first_vu;
    let spawn = |slots: &mut Vec<Rc<VuSlot>>, vus: &mut JoinSet<()>| -> usize {
        let index = slots.len();
        let slot = Rc::new(VuSlot { index, job: Cell::new(None), wake: tokio::sync::Notify::new() });
        slots.push(slot.clone());
        let vu_number = first_vu + (index * workers + id) as u32;
        vus.spawn_local(open_vu(vu_number, slot, pool.clone(), shared.clone(), local.clone()));
        index
    };
    for _ in 0..pre.min(max) {
        let i = spawn(&mut slots, &mut vus);
        pool.free.borrow_mut().push(i);
    }
    let start = tokio::time::Instant::from_std(shared.start);
    let mut k = id as u64;
    while let Some(at) = load.start_of(k) {
        // Tokio's timer fires on whole milliseconds, at or after the deadline: asked for the
        // due instant itself, iterations would start 0–1+ ms late, and that lateness would
        // count in every latency. Asking a millisecond early starts them within the
        // millisecond around their schedule instead; one that starts early counts its
        // latency from its actual send (see `run_step`), never from before it.
        tokio::time::sleep_until((start + at).checked_sub(TIMER_RESOLUTION).unwrap_or(start)).await;
        if shared.halted() || shared.data_exhausted.load(Ordering::Relaxed) {
            break;
        }
        let job = Job { intended: shared.start + at, queued: None, waited: Duration::ZERO };
        let free = pool.free.borrow_mut().pop();
        let vu = match free {
            Some(i) => Some(i),
            None if slots.len() < max => Some(spawn(&mut slots, &mut vus)),
            None => None,
        };
        match vu {
            Some(i) => {
                slots[i].job.set(Some(job));
                slots[i].wake.notify_one();
            }
            None => {
                let now = Instant::now();
                pool.expire(now, &local);
                if pool.waiting.borrow().len() < pool.max_waiting {
                    pool.waiting.borrow_mut().push_back(Job { queued: Some(now), ..job });
                } else {
                    local.metrics.borrow_mut().record_dropped(g, DropReason::QueueFull);
                }
            }
        }
        k += workers as u64;
    }
    // No more iterations are due: idle VUs leave; busy ones finish, and take the iterations
    // still waiting, until the group's hard stop.
    pool.closed.set(true);
    for s in &slots {
        s.wake.notify_one();
    }
    let drain = async { while vus.join_next().await.is_some() {} };
    match shared.groups[g].hard_stop {
        Some(h) => {
            let _ = tokio::time::timeout_at(tokio::time::Instant::from_std(h), drain).await;
        }
        None => drain.await,
    }
    // Whatever still waits now (the hard stop came, or the VUs stopped) never ran.
    pool.drop_waiting(Instant::now(), &local);
}

/// An open-model VU: runs the iterations its scheduler hands it, then those waiting for a VU.
async fn open_vu(index: u32, slot: Rc<VuSlot>, pool: Rc<Pool>, shared: Arc<Shared>, local: Rc<WorkerLocal>) {
    let _active = ActiveGuard::new(local.clone());
    let mut vu = Vu::new(index, &shared);
    loop {
        let job = loop {
            if let Some(job) = slot.job.take() {
                break Some(job);
            }
            if pool.closed.get() {
                break None;
            }
            slot.wake.notified().await;
        };
        let Some(job) = job else { return };
        // Lag is how late the scheduler handed the iteration out; the time it then waited
        // for a VU is counted apart. Both are in its latency, which counts from `intended`.
        {
            let mut m = local.metrics.borrow_mut();
            match job.queued {
                Some(q) => {
                    m.record_started(q.saturating_duration_since(job.intended).as_micros() as u64);
                    m.record_waited(job.waited.as_micros() as u64);
                }
                None => m.record_started(Instant::now().saturating_duration_since(job.intended).as_micros() as u64),
            }
        }
        if !run_iteration(&mut vu, pool.group, Some(job.intended), &shared, &local).await {
            return;
        }
        match pool.next_waiting(Instant::now(), &local) {
            Some(next) => slot.job.set(Some(next)),
            None => pool.free.borrow_mut().push(slot.index),
        }
    }
}

/// Runs one step; false when it failed (no answer, a failed check or extraction). With
/// `intended` (an open model's first step), latency counts from that scheduled start and
/// the service time from the actual send is kept too.
async fn run_step(vu: &mut Vu, step: &StepPlan, intended: Option<Instant>, local: &WorkerLocal) -> bool {
    let started = Instant::now();
    vu.headers.all = step.needs_headers;
    let result = send(vu, &step.request, step.needs_body, &local.transport, started).await;
    let ended = Instant::now();
    vu.ended = Some(ended);
    let service = ended.saturating_duration_since(started).as_micros() as u64;
    // From the scheduled start, or from the actual send when that came first (the scheduler
    // may start an iteration up to a timer tick early).
    let micros = intended.map_or(service, |at| (ended.saturating_duration_since(at).as_micros() as u64).max(service));
    let mut guard = local.metrics.borrow_mut();
    let m = &mut *guard;
    let s = &mut m.steps[step.metric];
    s.requests += 1;
    m.interval.record_request(step.metric);
    if vu.conn.opened_any() {
        for times in vu.conn.take_opened() {
            s.phases.record_connect(&times);
        }
    }
    let mut status = None;
    let failure = match result {
        Ok((info, sent, received)) => {
            status = Some(info.status);
            s.bytes_sent += sent;
            s.bytes_received += received;
            s.record_latency_us(micros);
            if intended.is_some() {
                s.record_service_us(service);
            }
            // No first-byte instant: the whole answer came in one read, at the end.
            let ttfb = info.first_byte.map_or(service, |at| at.saturating_duration_since(started).as_micros() as u64);
            s.phases.record_answer(ttfb, service);
            m.interval.record_latency(step.metric, micros.max(1));
            s.record_status(info.status);
            let resp = ResponseView { status: info.status, headers: &vu.headers.list, body: &vu.body };
            let mut json = None;
            let mut failed_check = None;
            for (i, check) in step.checks.iter().enumerate() {
                let outcome = check.evaluate(&resp, &vu.slots, &mut json);
                s.record_check(i, outcome.is_ok());
                if let (Err(why), None) = (outcome, &failed_check) {
                    failed_check = Some(format!("check `{}` failed: {why}", check.name));
                }
            }
            if failed_check.is_none() && !step.accept.passes(info.status) {
                failed_check =
                    Some(format!("status {} is not accepted (2xx or 3xx without a status check)", info.status));
            }
            let extracted = extract(step, &resp, &mut json, &mut vu.slots);
            match (failed_check, extracted) {
                (Some(why), _) => Some((ErrorKind::Check, why)),
                (None, Err(why)) => Some((ErrorKind::Extract, why)),
                (None, Ok(())) => None,
            }
        }
        Err((e, sent)) => {
            s.bytes_sent += sent;
            Some((e.kind, e.message))
        }
    };
    let Some((kind, message)) = failure else { return true };
    s.record_error(kind);
    m.interval.record_error(step.metric, kind);
    let mut samples = local.error_samples.borrow_mut();
    if samples.len() < ERROR_SAMPLES_PER_WORKER && !samples.iter().any(|x| x.kind == kind && x.metric == step.metric) {
        let response = status.map(|code| {
            let mut text = format!("HTTP {code}\n");
            for (n, v) in &vu.headers.list {
                text.push_str(&format!("{n}: {v}\n"));
            }
            text.push('\n');
            text.push_str(&truncated(&vu.body));
            text
        });
        samples.push(ErrorSample {
            metric: step.metric,
            kind,
            message: format!("step `{}`: {message}", step.name),
            request: truncated(&vu.sent_head),
            response,
        });
    }
    false
}

/// A request's timeout without a timer per request: `timer` is the VU's, kept from request
/// to request. Registering a timer and removing it again for every request was a tenth of the
/// user-space CPU per request. Instead the VU's timer is only set when it is spent or set later
/// than this deadline: with one timeout for every request, once per timeout period. A timer
/// that fires before `deadline` (set for an earlier request) is set to `deadline` then.
/// `None` when the deadline passed first.
struct WithDeadline<'a, F> {
    inner: Pin<&'a mut F>,
    timer: Pin<&'a mut tokio::time::Sleep>,
    deadline: tokio::time::Instant,
}

impl<F: Future> Future for WithDeadline<'_, F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        if let Poll::Ready(out) = self.inner.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        let deadline = self.deadline;
        loop {
            match self.timer.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) if self.timer.deadline() >= deadline => return Poll::Ready(None),
                Poll::Ready(()) => self.timer.as_mut().reset(deadline),
            }
        }
    }
}

/// The first [`SAMPLE_BYTES`] of `bytes` as text.
fn truncated(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(SAMPLE_BYTES)];
    let mut text = String::from_utf8_lossy(cut).into_owned();
    if bytes.len() > SAMPLE_BYTES {
        text.push_str(&format!("… ({} bytes in all)", bytes.len()));
    }
    text
}

/// Runs a step's extractors into the VU's slots; the first failure stops them.
fn extract(
    step: &StepPlan,
    resp: &ResponseView<'_>,
    json: &mut Option<Option<serde_json::Value>>,
    slots: &mut [String],
) -> Result<(), String> {
    for e in &step.extract {
        slots[e.slot] = e.apply(resp, json)?;
    }
    Ok(())
}

const REDIRECTS: [u16; 5] = [301, 302, 303, 307, 308];

/// The request a redirect asks for.
#[derive(Debug, PartialEq)]
struct Hop {
    url: HttpUrl,
    /// The method becomes GET.
    to_get: bool,
    /// The body goes again (307, 308, and 301/302 after anything but a POST).
    keep_body: bool,
    /// Same scheme, host and port: credentials and cookies set by hand may go along.
    same_origin: bool,
}

/// Where answer `status` with header `location` leads from `from`, requested with `method`:
/// 303, and 301/302 after a POST, continue with GET and no body, as browsers do.
fn redirect(status: u16, location: &str, from: &HttpUrl, method: &str) -> Result<Hop, String> {
    let scheme = if from.tls { "https" } else { "http" };
    let base = format!("{scheme}://{}{}", from.authority, from.path_and_query);
    let cannot = |e: &dyn std::fmt::Display| format!("cannot follow the redirect to `{location}`: {e}");
    let joined = url::Url::parse(&base).and_then(|b| b.join(location)).map_err(|e| cannot(&e))?;
    let url = HttpUrl::parse(joined.as_str()).map_err(|e| cannot(&e))?;
    let keep_body = matches!(status, 307 | 308) || (status != 303 && method != "POST");
    let same_origin = url.host == from.host && url.port == from.port && url.tls == from.tls;
    Ok(Hop { url, to_get: !keep_body && method != "HEAD", keep_body, same_origin })
}

/// Sends one request on the VU's connection and reads the answer, following redirects;
/// returns the final answer with the bytes sent and received over the whole chain. Cookies
/// from the VU's jar go with each request, and cookies set by each answer go into it.
async fn send(
    vu: &mut Vu,
    req: &RequestPlan,
    keep_body: bool,
    wt: &WorkerTransport,
    started: Instant,
) -> Result<(ResponseInfo, u64, u64), (ExchangeError, u64)> {
    let Vu { conn, slots, request_buf, extra_buf, body, headers, jar, sent_head, timer, .. } = vu;
    let (first_target, first): (Cow<'_, HttpUrl>, &[u8]) = match &req.fixed {
        Some(fixed) => (Cow::Borrowed(&fixed.target), &fixed.bytes),
        None => {
            request_buf.clear();
            match req.render(slots, request_buf) {
                Ok(t) => (Cow::Owned(t), request_buf.as_slice()),
                Err(e) => {
                    sent_head.clear();
                    let message = e.to_string();
                    return Err((
                        ExchangeError { kind: ErrorKind::Protocol, message, sent: false, answered: false },
                        0,
                    ));
                }
            }
        }
    };
    let user_cookie = req.headers.iter().any(|(n, _)| n == "cookie");
    let mut sent = 0u64;
    let mut received = 0u64;
    let mut first_byte = None;
    let chain = async {
        let mut target = first_target;
        let mut method: Cow<'_, str> = Cow::Borrowed(&req.method);
        let mut hops_left = req.redirects;
        let mut redirected = false;
        loop {
            // The bytes of this hop: the request itself, or with the jar's cookies spliced in.
            let cookie =
                jar.as_ref().filter(|_| !user_cookie).and_then(|j| j.header_for(&target.host, &target.path_and_query));
            let bytes: &[u8] = match (&cookie, redirected) {
                (Some(c), false) => {
                    // Into the VU's spare buffer: no allocation per request once it has grown.
                    crate::client::cookies::splice_header(first, c, extra_buf);
                    extra_buf.as_slice()
                }
                (Some(c), true) => {
                    let plain = std::mem::take(extra_buf);
                    crate::client::cookies::splice_header(&plain, c, extra_buf);
                    extra_buf.as_slice()
                }
                (None, false) => first,
                (None, true) => extra_buf.as_slice(),
            };
            if !redirected {
                sent_head.clear();
                sent_head.extend_from_slice(&bytes[..bytes.len().min(SAMPLE_BYTES + 1)]);
            }
            sent += bytes.len() as u64;
            let head = method == "HEAD";
            let info = transport::exchange(
                conn,
                wt,
                &target,
                bytes,
                head,
                keep_body.then_some(&mut *body),
                &mut *headers,
                req.connect_timeout,
            )
            .await?;
            received += info.bytes_received;
            // Time to first byte counts to the first answer of a redirect chain.
            first_byte = first_byte.or(info.first_byte);
            if let Some(j) = jar.as_mut() {
                for (_, v) in headers.list.iter().filter(|(n, _)| n == "set-cookie") {
                    j.store(&target.host, &target.path_and_query, v);
                }
            }
            let location = headers.get("location").filter(|_| REDIRECTS.contains(&info.status) && hops_left > 0);
            let Some(location) = location else { return Ok(ResponseInfo { first_byte, ..info }) };
            // An answer that came in one read had its first byte about now.
            first_byte = first_byte.or_else(|| Some(Instant::now()));
            let hop = redirect(info.status, location, &target, &method).map_err(|message| ExchangeError {
                kind: ErrorKind::Protocol,
                message,
                sent: true,
                answered: true,
            })?;
            let body_bytes = hop.keep_body.then(|| {
                let mut b = Vec::new();
                if let Some(bp) = &req.body {
                    bp.render_into(slots, &mut b);
                }
                b
            });
            if hop.to_get {
                method = Cow::Borrowed("GET");
            }
            extra_buf.clear();
            let resent = body_bytes.as_deref().filter(|b| !b.is_empty());
            req.render_redirect(&method, &hop.url, hop.same_origin, slots, resent, extra_buf);
            target = Cow::Owned(hop.url);
            hops_left -= 1;
            redirected = true;
            body.clear();
        }
    };
    let deadline = tokio::time::Instant::from_std(started + req.timeout);
    let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
    // The timer may stay set for an earlier deadline (it fires early, and is set again, see
    // `WithDeadline`), but never for a later one, nor spent.
    if timer.is_elapsed() || timer.deadline() > deadline {
        timer.as_mut().reset(deadline);
    }
    let outcome = {
        let chain = std::pin::pin!(chain);
        WithDeadline { inner: chain, timer: timer.as_mut(), deadline }.await
    };
    match outcome {
        Some(Ok(info)) => Ok((info, sent, received)),
        Some(Err(e)) => Err((e, sent)),
        None => {
            conn.close();
            let message = format!("no complete answer within {:?}", req.timeout);
            Err((ExchangeError { kind: ErrorKind::Timeout, message, sent: true, answered: false }, sent))
        }
    }
}

/// Starts `n` threads with `start`. When one cannot start, the run cannot happen as planned:
/// those already started are told to stop (`interrupt`) and joined before the error returns,
/// so that no worker goes on sending load for a run that failed.
fn start_all<T>(
    n: usize,
    interrupt: &AtomicBool,
    mut start: impl FnMut(usize) -> std::io::Result<std::thread::JoinHandle<T>>,
) -> std::io::Result<Vec<std::thread::JoinHandle<T>>> {
    let mut handles = Vec::with_capacity(n);
    for id in 0..n {
        match start(id) {
            Ok(handle) => handles.push(handle),
            Err(e) => {
                interrupt.store(true, Ordering::Relaxed);
                for handle in handles {
                    let _ = handle.join();
                }
                return Err(e);
            }
        }
    }
    Ok(handles)
}

/// Summarizes one merged interval.
fn timeline_point(t: &Tick, keys: &[stampede_model::StepKey]) -> TimelinePoint {
    crate::stats::timeline::interval_point(t.elapsed, t.length, t.active_vus, &t.stats, keys)
}

#[cfg(test)]
mod starting {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// #22: a worker thread that cannot start stops the ones already started (they used to
    /// go on sending load for a run that had failed) before the error returns.
    #[test]
    fn a_thread_that_cannot_start_stops_and_joins_those_started() {
        let interrupt = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(AtomicUsize::new(0));
        let result = super::start_all(4, &interrupt, |id| {
            if id == 2 {
                return Err(std::io::Error::other("no more threads"));
            }
            let (interrupt, ended) = (interrupt.clone(), ended.clone());
            Ok(std::thread::spawn(move || {
                while !interrupt.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                ended.fetch_add(1, Ordering::Relaxed);
            }))
        });
        assert_eq!(result.err().map(|e| e.to_string()), Some("no more threads".to_string()));
        assert!(interrupt.load(Ordering::Relaxed), "the run is interrupted");
        assert_eq!(ended.load(Ordering::Relaxed), 2, "both started workers stopped and were joined");
    }
}

#[cfg(test)]
mod redirects {
    use super::*;

    #[test]
    fn a_redirect_keeps_or_drops_the_method_and_body_as_browsers_do() {
        let from = HttpUrl::parse("http://127.0.0.1:8080/a/b?x=1").unwrap();
        let hop = redirect(302, "c", &from, "GET").unwrap();
        assert_eq!(hop.url.path_and_query, "/a/c");
        assert!(!hop.to_get && hop.keep_body && hop.same_origin);
        let hop = redirect(303, "/d", &from, "POST").unwrap();
        assert!(hop.to_get && !hop.keep_body);
        let hop = redirect(302, "/d", &from, "POST").unwrap();
        assert!(hop.to_get && !hop.keep_body, "302 after a POST continues with GET");
        let hop = redirect(307, "https://127.0.0.1:8443/e", &from, "PURGE").unwrap();
        assert!(!hop.to_get && hop.keep_body && !hop.same_origin);
        let hop = redirect(303, "/f", &from, "HEAD").unwrap();
        assert!(!hop.to_get, "HEAD stays HEAD");
        let err = redirect(301, "ftp://x/", &from, "GET").unwrap_err();
        assert!(err.starts_with("cannot follow the redirect to `ftp://x/`"), "{err}");
    }
}

#[cfg(test)]
mod task_size {
    use std::cell::Cell;
    use std::rc::Rc;
    use std::sync::Arc;

    use super::{Shared, WorkerLocal};

    /// The size of the future `make` would return (without calling it).
    fn future_size<F: FnOnce(Arc<Shared>, Rc<WorkerLocal>) -> Fut, Fut>(_: &F) -> usize {
        std::mem::size_of::<Fut>()
    }

    /// Every VU is a task whose state is its future: at 15,000 VUs each KB is 15 MB. Rare,
    /// large states (opening a connection with its TLS handshake, an HTTP/2 exchange) are
    /// boxed so they do not weigh on every VU; this keeps them out.
    #[test]
    fn a_vu_task_stays_small() {
        let closed = |s, l| super::vu_task(0, 0, s, l, Rc::new(Cell::new(false)));
        let open = |s, l| {
            let pool = super::Pool {
                group: 0,
                free: Default::default(),
                waiting: Default::default(),
                max_waiting: 0,
                max_wait: std::time::Duration::ZERO,
                closed: Cell::new(false),
            };
            super::open_vu(
                0,
                Rc::new(super::VuSlot { index: 0, job: Cell::new(None), wake: tokio::sync::Notify::new() }),
                Rc::new(pool),
                s,
                l,
            )
        };
        let (closed, open) = (future_size(&closed), future_size(&open));
        println!("VU task state: closed model {closed} bytes, open model {open} bytes");
        assert!(closed <= 2048 && open <= 2048, "closed {closed}, open {open} bytes");
    }
}
