//! The load: the workload models that run a scenario's VUs ([`LoadPlan`]) and capacity
//! searches ([`CapacitySearch`]), compiled from a `load` ([`LoadSpec`]) with their defaults.

use std::time::Duration;

use crate::error::Problems;
use stampede_model::Dur;
use stampede_model::scenario::{Executor, LoadSpec, Stage};

/// Default grace for in-flight iterations when a run (or a VU) stops, as in k6.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// Open models: due iterations that may wait for a free VU at once, by default. A queued
/// iteration is an instant (16 bytes), so this bounds memory, not the measurement.
pub const DEFAULT_MAX_WAITING: u32 = 10_000;
/// Open models: how long a due iteration may wait for a free VU, by default.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(1);

/// A capacity search (`executor: capacity`): plateaus of a constant arrival rate, each higher
/// than the one before, until the thresholds (the SLO) fail.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacitySearch {
    /// Iterations per second of the first plateau.
    pub start: f64,
    /// How the rate rises from one plateau to the next (`step` or `stepFactor`).
    pub step: CapacityStep,
    /// Each plateau's length, warm-up included.
    pub plateau: Duration,
    /// The first part of each plateau, left out of its figures.
    pub warmup: Duration,
    /// The highest rate tried, per second.
    pub max: f64,
    /// Consecutive failing plateaus that end the search.
    pub stop_after: u32,
    /// Shorter plateaus between the last pass and the first failure, after the search.
    pub refine: u32,
}

/// How the rate rises from one plateau to the next.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CapacityStep {
    /// Per second.
    Add(f64),
    /// Multiplied by this factor (`stepFactor`: more than 1, at most 100).
    Multiply(f64),
}

impl CapacitySearch {
    /// The rate of plateau `k` (0-based) of the rising search; `None` past the maximum.
    pub fn rate(&self, k: u32) -> Option<f64> {
        let r = match self.step {
            CapacityStep::Add(n) => self.start + n * f64::from(k),
            CapacityStep::Multiply(f) => self.start * f.powi(k as i32),
        };
        (r <= self.max * (1.0 + 1e-9)).then_some(r)
    }

    /// How many plateaus the rising search has at most.
    pub fn max_plateaus(&self) -> u32 {
        (0..10_000).take_while(|&k| self.rate(k).is_some()).count() as u32
    }

    /// The length of a refining plateau (half a plateau, warm-up included).
    pub fn refine_plateau(&self) -> Duration {
        self.plateau / 2
    }

    /// The warm-up of a refining plateau (half the warm-up).
    pub fn refine_warmup(&self) -> Duration {
        self.warmup / 2
    }

    /// The longest the whole search can last.
    pub fn longest(&self) -> Duration {
        self.plateau * self.max_plateaus() + self.refine_plateau() * self.refine
    }
}

/// The workload model with defaults applied.
#[derive(Clone, Debug, PartialEq)]
pub enum LoadPlan {
    /// `constant-vus`: a fixed number of VUs loop over iterations (closed model).
    ConstantVus {
        /// VUs running the whole time (`vus`, at least 1).
        vus: u32,
        /// How long to run (`duration`); `None`: until `iterations` are done.
        duration: Option<Duration>,
        /// Iterations in all, shared by the VUs (`iterations`); `None`: until `duration` has passed.
        /// With both, whichever comes first ends the run.
        iterations: Option<u64>,
        /// Time in-flight iterations get to finish when the run ends (`gracefulStop`, default 30s).
        graceful_stop: Duration,
        /// The most VUs a live change may raise the run to (`maxVUs`, default `vus`).
        max_vus: u32,
    },
    /// `ramping-vus`: the VU count moves linearly from stage to stage (closed model).
    RampingVus {
        /// VUs at the start (`startVus`, default 0).
        start_vus: u32,
        /// Each stage's length and the VU count it ends at, in order.
        stages: Vec<(Duration, u32)>,
        /// Time an iteration of a retiring VU gets to finish when the target drops (`gracefulRampDown`,
        /// default 30s).
        graceful_ramp_down: Duration,
        /// Time in-flight iterations get to finish when the run ends (`gracefulStop`, default 30s).
        graceful_stop: Duration,
        /// The most VUs a live change may raise the run to (`maxVUs`, default the highest of
        /// `startVus` and the stage targets).
        max_vus: u32,
    },
    /// Open model: iterations start on a schedule; rates are per second, moving linearly
    /// from the previous stage's rate (`start_rate` first) to each stage's.
    ArrivalRate {
        /// `constant-arrival-rate` (one stage at `rate`; a capacity plateau too) rather than
        /// `ramping-arrival-rate`.
        constant: bool,
        /// Iterations per second at the start: `rate`, or `startRate` (default 0) for a ramp.
        start_rate: f64,
        /// Each stage's length and the rate it ends at, in iterations per second.
        stages: Vec<(Duration, f64)>,
        /// VUs started before the run (`preAllocatedVUs`, default `maxVUs` up to 100).
        pre_allocated: u32,
        /// Most VUs the pool may grow to (`maxVUs`, default `preAllocatedVUs`).
        max_vus: u32,
        /// Due iterations that may wait for a free VU at once (0: drop at once).
        max_waiting: u32,
        /// How long a due iteration may wait for a free VU before it is dropped.
        max_wait: Duration,
        /// Time in-flight iterations get to finish when the run ends (`gracefulStop`, default 30s).
        graceful_stop: Duration,
    },
}

impl LoadPlan {
    /// The most VUs the model may run at once (a closed model's, with its live changes).
    pub fn max_vus(&self) -> u32 {
        match self {
            LoadPlan::ConstantVus { max_vus, .. }
            | LoadPlan::RampingVus { max_vus, .. }
            | LoadPlan::ArrivalRate { max_vus, .. } => *max_vus,
        }
    }

    /// Whether iterations start on a schedule (open model).
    pub fn is_open(&self) -> bool {
        matches!(self, LoadPlan::ArrivalRate { .. })
    }

    /// When iteration `k` (0-based) of an open model is due, from the start; `None` past the
    /// end. Iteration k starts when the integral of the rate reaches k.
    pub fn start_of(&self, k: u64) -> Option<Duration> {
        self.time_at_integral(k as f64)
    }

    /// Open models: when the integral of the rate (iterations due so far) reaches `x`; `None`
    /// past the end, or for a closed model.
    pub fn time_at_integral(&self, x: f64) -> Option<Duration> {
        let LoadPlan::ArrivalRate { start_rate, stages, .. } = self else { return None };
        let mut left = x;
        let mut t0 = Duration::ZERO;
        let mut r0 = *start_rate;
        for &(len, r1) in stages {
            let secs = len.as_secs_f64();
            let in_stage = (r0 + r1) / 2.0 * secs;
            if left < in_stage || (left == 0.0 && in_stage > 0.0) {
                // Solve r0·τ + (r1 − r0)·τ²/(2·secs) = left for τ in [0, secs].
                let a = (r1 - r0) / (2.0 * secs);
                let tau =
                    if a.abs() < 1e-12 { left / r0 } else { (-r0 + (r0 * r0 + 4.0 * a * left).sqrt()) / (2.0 * a) };
                return Some(t0 + Duration::from_secs_f64(tau.clamp(0.0, secs)));
            }
            left -= in_stage;
            t0 += len;
            r0 = r1;
        }
        None
    }

    /// Open models: the integral of the rate from the start to `t` (iterations due by then,
    /// as a real number); 0 for a closed model.
    pub fn integral_to(&self, t: Duration) -> f64 {
        let LoadPlan::ArrivalRate { start_rate, stages, .. } = self else { return 0.0 };
        let mut total = 0.0;
        let mut t0 = Duration::ZERO;
        let mut r0 = *start_rate;
        for &(len, r1) in stages {
            let secs = len.as_secs_f64();
            if t < t0 + len {
                let tau = (t - t0).as_secs_f64();
                return total + r0 * tau + (r1 - r0) * tau * tau / (2.0 * secs);
            }
            total += (r0 + r1) / 2.0 * secs;
            t0 += len;
            r0 = r1;
        }
        total
    }

    /// Open models: the highest rate of the schedule, per second.
    pub fn peak_rate(&self) -> f64 {
        let LoadPlan::ArrivalRate { start_rate, stages, .. } = self else { return 0.0 };
        stages.iter().map(|s| s.1).fold(*start_rate, f64::max)
    }

    /// Open models: how many iterations the schedule starts over the whole run (the integral
    /// of the rate); `None` for closed models.
    pub fn scheduled_iterations(&self) -> Option<u64> {
        let LoadPlan::ArrivalRate { start_rate, stages, .. } = self else { return None };
        let mut r0 = *start_rate;
        let mut total = 0.0;
        for &(len, r1) in stages {
            total += (r0 + r1) / 2.0 * len.as_secs_f64();
            r0 = r1;
        }
        // Iteration k is due while the integral is still above k (see `start_of`).
        Some(total.ceil().max(0.0) as u64)
    }

    /// Planned length of the run, excluding grace periods (`None`: bounded by iterations).
    pub fn planned_duration(&self) -> Option<Duration> {
        match self {
            LoadPlan::ConstantVus { duration, .. } => *duration,
            LoadPlan::RampingVus { stages, .. } => Some(stages.iter().map(|s| s.0).sum()),
            LoadPlan::ArrivalRate { stages, .. } => Some(stages.iter().map(|s| s.0).sum()),
        }
    }

    /// Time in-flight iterations get to finish when the run ends (the model's `gracefulStop`).
    pub fn graceful_stop(&self) -> Duration {
        match self {
            LoadPlan::ConstantVus { graceful_stop, .. }
            | LoadPlan::RampingVus { graceful_stop, .. }
            | LoadPlan::ArrivalRate { graceful_stop, .. } => *graceful_stop,
        }
    }

    /// The executor's name as a scenario file spells it (`constant-vus`, `ramping-arrival-rate`…).
    pub fn executor_name(&self) -> &'static str {
        match self {
            LoadPlan::ConstantVus { .. } => "constant-vus",
            LoadPlan::RampingVus { .. } => "ramping-vus",
            LoadPlan::ArrivalRate { constant: true, .. } => "constant-arrival-rate",
            LoadPlan::ArrivalRate { constant: false, .. } => "ramping-arrival-rate",
        }
    }

    /// Target VU count `elapsed` into a ramp: linear within each stage, rounded down.
    pub fn target_vus_at(&self, elapsed: Duration) -> u32 {
        match self {
            LoadPlan::ConstantVus { vus, .. } => *vus,
            LoadPlan::RampingVus { start_vus, stages, .. } => ramp_target(*start_vus, stages, elapsed),
            LoadPlan::ArrivalRate { .. } => 0,
        }
    }
}

/// VUs wanted `elapsed` into a ramp of `stages` starting at `start`.
pub fn ramp_target(start: u32, stages: &[(Duration, u32)], elapsed: Duration) -> u32 {
    let mut from = start;
    let mut t0 = Duration::ZERO;
    for &(len, to) in stages {
        let t1 = t0 + len;
        if elapsed < t1 {
            let frac = (elapsed - t0).as_secs_f64() / len.as_secs_f64();
            let v = from as f64 + (to as f64 - from as f64) * frac;
            // The epsilon keeps 5.9999999 (float error at a stage's exact boundary) at 6.
            return (v + 1e-9).floor().max(0.0) as u32;
        }
        from = to;
        t0 = t1;
    }
    from
}

/// A `load` (`at` in messages) with its defaults applied; `None` when it has problems (they
/// are recorded).
pub(crate) fn compile_load(spec: &LoadSpec, at: &str, problems: &mut Problems) -> Option<LoadPlan> {
    let before = problems.len();
    if matches!(spec.executor, Executor::ConstantVus | Executor::RampingVus) {
        let open_only = [("maxWaiting", spec.max_waiting.is_some()), ("maxWait", spec.max_wait.is_some())];
        not_for(spec, at, &open_only, problems);
    }
    if spec.executor != Executor::Capacity {
        let capacity_only = [
            ("step", spec.step.is_some()),
            ("stepFactor", spec.step_factor.is_some()),
            ("plateau", spec.plateau.is_some()),
            ("warmup", spec.warmup.is_some()),
            ("maxRate", spec.max_rate.is_some()),
            ("stopAfter", spec.stop_after.is_some()),
            ("refine", spec.refine.is_some()),
        ];
        not_for(spec, at, &capacity_only, problems);
    }
    let plan = match spec.executor {
        Executor::Capacity => capacity_load(spec, at, problems),
        Executor::ConstantVus => constant_vus(spec, at, problems),
        Executor::RampingVus => ramping_vus(spec, at, problems),
        Executor::ConstantArrivalRate | Executor::RampingArrivalRate => arrival_rate(spec, at, problems),
    };
    if plan.max_vus() > super::budget::VUS {
        problems.add(at, super::budget::over("vus", format!("{} VUs", plan.max_vus())));
    }
    if plan.peak_rate() > f64::from(super::budget::RATE) {
        problems.add(at, super::budget::over("rate", format!("{} iterations/s", plan.peak_rate())));
    }
    (problems.len() == before).then_some(plan)
}

/// Records each of `fields` (a name, and whether it is set) that is set: it does not apply to
/// `spec`'s executor.
fn not_for(spec: &LoadSpec, at: &str, fields: &[(&str, bool)], problems: &mut Problems) {
    let name = spec.executor.name();
    for &(field, set) in fields {
        if set {
            problems.add(format!("{at}.{field}"), format!("does not apply to {name}"));
        }
    }
}

/// A grace period as given, else [`DEFAULT_GRACE`].
fn grace(given: Option<Dur>) -> Duration {
    given.map(Dur::get).unwrap_or(DEFAULT_GRACE)
}

/// `timeUnit` (default 1s); 0s is recorded as a problem.
fn time_unit(spec: &LoadSpec, at: &str, problems: &mut Problems) -> Duration {
    let unit = spec.time_unit.map(Dur::get).unwrap_or(Duration::from_secs(1));
    if unit.is_zero() {
        problems.add(format!("{at}.timeUnit"), "must be longer than 0s");
    }
    unit
}

/// `n` iterations per `unit` as a rate per second (0 when `unit` is 0s).
fn per_second(n: u32, unit: Duration) -> f64 {
    if unit.is_zero() { 0.0 } else { f64::from(n) / unit.as_secs_f64() }
}

/// An open model's pool of VUs, (`maxVUs`, `preAllocatedVUs`): `maxVUs` defaults to
/// `preAllocatedVUs`, which defaults to `maxVUs` (at most 100); neither given is a problem.
fn vu_pool(spec: &LoadSpec, at: &str, problems: &mut Problems) -> (u32, u32) {
    match (spec.max_vus, spec.pre_allocated_vus) {
        (None, None) => {
            problems.add(
                format!("{at}.preAllocatedVUs"),
                format!("{} needs `preAllocatedVUs` (and may set `maxVUs`)", spec.executor.name()),
            );
            (0, 0)
        }
        (Some(max), pre) => (max, pre.unwrap_or(max.min(100))),
        (None, Some(pre)) => (pre, pre),
    }
}

/// Records each stage without a `duration`.
fn stage_durations(stages: &[Stage], at: &str, problems: &mut Problems) {
    for (i, s) in stages.iter().enumerate() {
        if s.duration.is_none() {
            problems.add(format!("{at}.stages[{i}]"), "stage has no `duration`");
        }
    }
}

/// An `executor: capacity` load: its first plateau, a constant `startRate` (the search is
/// [`capacity_search`]).
fn capacity_load(spec: &LoadSpec, at: &str, problems: &mut Problems) -> LoadPlan {
    let closed_or_ramping = [
        ("vus", spec.vus.is_some()),
        ("iterations", spec.iterations.is_some()),
        ("startVus", spec.start_vus.is_some()),
        ("gracefulRampDown", spec.graceful_ramp_down.is_some()),
        ("stages", !spec.stages.is_empty()),
        ("rate", spec.rate.is_some()),
        ("duration", spec.duration.is_some()),
    ];
    not_for(spec, at, &closed_or_ramping, problems);
    let unit = time_unit(spec, at, problems);
    let start = capacity_rise(spec, at, problems);
    let plateau = capacity_plateau(spec, at, problems);
    capacity_end(spec, at, start, problems);
    let (max_vus, pre) = vu_pool(spec, at, problems);
    if pre > max_vus {
        problems.add(format!("{at}.preAllocatedVUs"), format!("is more than maxVUs ({max_vus})"));
    }
    let rate = per_second(start, unit);
    LoadPlan::ArrivalRate {
        constant: true,
        start_rate: rate,
        stages: vec![(plateau, rate)],
        pre_allocated: pre,
        max_vus,
        // A search tells a pool too small (dropped iterations, thresholds met) from a
        // service too slow (thresholds failed): an iteration waiting for a VU would put
        // the pool's shortage into the latency, so by default none waits.
        max_waiting: spec.max_waiting.unwrap_or(0),
        max_wait: spec.max_wait.map(Dur::get).unwrap_or(DEFAULT_MAX_WAIT),
        graceful_stop: grace(spec.graceful_stop),
    }
}

/// A capacity search's `startRate` and how the rate rises (`step` or `stepFactor`), checked;
/// returns `startRate` (0 when missing).
fn capacity_rise(spec: &LoadSpec, at: &str, problems: &mut Problems) -> u32 {
    let start = spec.start_rate.unwrap_or(0);
    match spec.start_rate {
        None => problems.add(format!("{at}.startRate"), "capacity needs `startRate`"),
        Some(0) => problems.add(format!("{at}.startRate"), "must be at least 1"),
        Some(_) => {}
    }
    match (spec.step, spec.step_factor) {
        (None, None) | (Some(_), Some(_)) => {
            problems.add(at, "capacity needs one of `step` (added) and `stepFactor` (multiplied)")
        }
        (Some(0), None) => problems.add(format!("{at}.step"), "must be at least 1"),
        (None, Some(f)) if !(f > 1.0 && f <= 100.0) => {
            problems.add(format!("{at}.stepFactor"), "must be more than 1 (and at most 100)")
        }
        _ => {}
    }
    start
}

/// A capacity search's `plateau` and its `warmup`, checked; returns the plateau (0s when
/// missing).
fn capacity_plateau(spec: &LoadSpec, at: &str, problems: &mut Problems) -> Duration {
    let plateau = spec.plateau.map(Dur::get).unwrap_or_default();
    match spec.plateau {
        None => problems.add(format!("{at}.plateau"), "capacity needs `plateau` (each rate's duration)"),
        Some(d) if d.get() < Duration::from_secs(1) => problems.add(format!("{at}.plateau"), "must be at least 1s"),
        Some(_) => {}
    }
    if spec.warmup.is_some_and(|w| plateau > Duration::ZERO && w.get() + Duration::from_secs(1) > plateau) {
        problems.add(format!("{at}.warmup"), "must leave at least 1s of the plateau to measure");
    }
    plateau
}

/// When a capacity search ends (`maxRate`, above `start`; `stopAfter`) and how much it
/// refines (`refine`), checked.
fn capacity_end(spec: &LoadSpec, at: &str, start: u32, problems: &mut Problems) {
    match spec.max_rate {
        None => problems.add(format!("{at}.maxRate"), "capacity needs `maxRate` (the highest rate tried)"),
        Some(m) if m < start => problems.add(format!("{at}.maxRate"), format!("is below startRate ({start})")),
        Some(_) => {}
    }
    if spec.stop_after == Some(0) {
        problems.add(format!("{at}.stopAfter"), "must be at least 1");
    }
    if spec.refine.is_some_and(|r| r > 10) {
        problems.add(format!("{at}.refine"), "at most 10");
    }
}

/// A closed model's `maxVUs`: the most VUs a live change may raise it to; `planned` (the most
/// its plan runs) when not given, and never less.
fn live_ceiling(spec: &LoadSpec, at: &str, planned: u32, problems: &mut Problems) -> u32 {
    match spec.max_vus {
        Some(max) if max < planned => {
            problems.add(format!("{at}.maxVUs"), format!("is less than the {planned} VUs the load runs"));
            planned
        }
        Some(max) => max,
        None => planned,
    }
}

/// A `constant-vus` load: `vus` VUs for a `duration`, a number of `iterations`, or both.
fn constant_vus(spec: &LoadSpec, at: &str, problems: &mut Problems) -> LoadPlan {
    let ramping = [
        ("startVus", spec.start_vus.is_some()),
        ("stages", !spec.stages.is_empty()),
        ("gracefulRampDown", spec.graceful_ramp_down.is_some()),
    ];
    not_for(spec, at, &ramping, problems);
    let vus = spec.vus.unwrap_or(0);
    if spec.vus.is_none() {
        problems.add(format!("{at}.vus"), "constant-vus needs `vus`");
    } else if vus == 0 {
        problems.add(format!("{at}.vus"), "must be at least 1");
    }
    if spec.duration.is_none() && spec.iterations.is_none() {
        problems.add(at, "constant-vus needs `duration`, `iterations` or both");
    }
    if spec.duration.is_some_and(Dur::is_zero) {
        problems.add(format!("{at}.duration"), "must be longer than 0s");
    }
    if spec.iterations == Some(0) {
        problems.add(format!("{at}.iterations"), "must be at least 1");
    }
    LoadPlan::ConstantVus {
        vus,
        duration: spec.duration.map(Dur::get),
        iterations: spec.iterations,
        graceful_stop: grace(spec.graceful_stop),
        max_vus: live_ceiling(spec, at, vus, problems),
    }
}

/// A `ramping-vus` load: VUs from `startVus` to each stage's target in turn.
fn ramping_vus(spec: &LoadSpec, at: &str, problems: &mut Problems) -> LoadPlan {
    let constant =
        [("vus", spec.vus.is_some()), ("duration", spec.duration.is_some()), ("iterations", spec.iterations.is_some())];
    not_for(spec, at, &constant, problems);
    let stages = &spec.stages;
    let start_vus = spec.start_vus.unwrap_or(0);
    if stages.is_empty() {
        problems.add(format!("{at}.stages"), "ramping-vus needs at least one stage");
    }
    stage_durations(stages, at, problems);
    if !stages.is_empty() && stages.iter().all(|s| s.target == 0) && start_vus == 0 {
        problems.add(format!("{at}.stages"), "every target is 0, so no VU would ever run");
    }
    if !stages.is_empty()
        && stages.iter().all(|s| s.duration.is_some())
        && stages.iter().map(|s| s.duration.unwrap_or_default().get()).sum::<Duration>().is_zero()
    {
        problems.add(format!("{at}.stages"), "the stages last 0s in total");
    }
    let highest = stages.iter().map(|s| s.target).chain([start_vus]).max().unwrap_or(0);
    LoadPlan::RampingVus {
        max_vus: live_ceiling(spec, at, highest, problems),
        start_vus,
        stages: stages.iter().map(|s| (s.duration.unwrap_or_default().get(), s.target)).collect(),
        graceful_ramp_down: grace(spec.graceful_ramp_down),
        graceful_stop: grace(spec.graceful_stop),
    }
}

/// A `constant-arrival-rate` or `ramping-arrival-rate` load: iterations started on a schedule,
/// each by a VU of the pool.
fn arrival_rate(spec: &LoadSpec, at: &str, problems: &mut Problems) -> LoadPlan {
    let constant = spec.executor == Executor::ConstantArrivalRate;
    let closed = [
        ("vus", spec.vus.is_some()),
        ("iterations", spec.iterations.is_some()),
        ("startVus", spec.start_vus.is_some()),
        ("gracefulRampDown", spec.graceful_ramp_down.is_some()),
    ];
    not_for(spec, at, &closed, problems);
    let other_schedule = if constant {
        [("stages", !spec.stages.is_empty()), ("startRate", spec.start_rate.is_some())]
    } else {
        [("rate", spec.rate.is_some()), ("duration", spec.duration.is_some())]
    };
    not_for(spec, at, &other_schedule, problems);
    let unit = time_unit(spec, at, problems);
    let (max_vus, pre) = vu_pool(spec, at, problems);
    if max_vus == 0 && (spec.max_vus.is_some() || spec.pre_allocated_vus.is_some()) {
        problems.add(format!("{at}.maxVUs"), "must be at least 1");
    }
    if pre > max_vus {
        problems.add(format!("{at}.preAllocatedVUs"), format!("is more than maxVUs ({max_vus})"));
    }
    let (start_rate, stages) =
        if constant { constant_rate(spec, at, unit, problems) } else { ramping_rates(spec, at, unit, problems) };
    LoadPlan::ArrivalRate {
        constant,
        start_rate,
        stages,
        pre_allocated: pre,
        max_vus,
        max_waiting: spec.max_waiting.unwrap_or(DEFAULT_MAX_WAITING),
        max_wait: spec.max_wait.map(Dur::get).unwrap_or(DEFAULT_MAX_WAIT),
        graceful_stop: grace(spec.graceful_stop),
    }
}

/// A `constant-arrival-rate`'s schedule, per second: (`rate`, one stage of `rate` for
/// `duration`).
fn constant_rate(spec: &LoadSpec, at: &str, unit: Duration, problems: &mut Problems) -> (f64, Vec<(Duration, f64)>) {
    let rate = spec.rate.unwrap_or(0);
    if spec.rate.is_none() {
        problems.add(format!("{at}.rate"), "constant-arrival-rate needs `rate`");
    } else if rate == 0 {
        problems.add(format!("{at}.rate"), "must be at least 1");
    }
    match spec.duration {
        None => problems.add(format!("{at}.duration"), "constant-arrival-rate needs `duration`"),
        Some(d) if d.is_zero() => problems.add(format!("{at}.duration"), "must be longer than 0s"),
        Some(_) => {}
    }
    let d = spec.duration.map(Dur::get).unwrap_or_default();
    (per_second(rate, unit), vec![(d, per_second(rate, unit))])
}

/// A `ramping-arrival-rate`'s schedule, per second: (`startRate`, each stage with its target
/// rate).
fn ramping_rates(spec: &LoadSpec, at: &str, unit: Duration, problems: &mut Problems) -> (f64, Vec<(Duration, f64)>) {
    if spec.stages.is_empty() {
        problems.add(format!("{at}.stages"), "ramping-arrival-rate needs at least one stage");
    }
    stage_durations(&spec.stages, at, problems);
    if !spec.stages.is_empty() && spec.start_rate.unwrap_or(0) == 0 && spec.stages.iter().all(|s| s.target == 0) {
        problems.add(format!("{at}.stages"), "every rate is 0, so no iteration would ever start");
    }
    let stages =
        spec.stages.iter().map(|s| (s.duration.unwrap_or_default().get(), per_second(s.target, unit))).collect();
    (per_second(spec.start_rate.unwrap_or(0), unit), stages)
}

/// The search of a `capacity` load (already validated by [`compile_load`]).
pub(crate) fn capacity_search(spec: &LoadSpec) -> CapacitySearch {
    let unit = spec.time_unit.map(Dur::get).unwrap_or(Duration::from_secs(1)).as_secs_f64().max(1e-9);
    let per_sec = |n: u32| f64::from(n) / unit;
    CapacitySearch {
        start: per_sec(spec.start_rate.unwrap_or(1)),
        step: match (spec.step, spec.step_factor) {
            (Some(n), _) => CapacityStep::Add(per_sec(n)),
            (None, Some(f)) => CapacityStep::Multiply(f),
            (None, None) => CapacityStep::Add(per_sec(1)),
        },
        plateau: spec.plateau.map(Dur::get).unwrap_or(Duration::from_secs(10)),
        warmup: spec.warmup.map(Dur::get).unwrap_or_default(),
        max: per_sec(spec.max_rate.unwrap_or(1)),
        stop_after: spec.stop_after.unwrap_or(2).max(1),
        refine: spec.refine.unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_interpolates_linearly_and_holds_the_last_target() {
        let stages = vec![(Duration::from_secs(10), 10), (Duration::from_secs(10), 10), (Duration::from_secs(5), 0)];
        assert_eq!(ramp_target(0, &stages, Duration::ZERO), 0);
        assert_eq!(ramp_target(0, &stages, Duration::from_millis(4_999)), 4);
        assert_eq!(ramp_target(0, &stages, Duration::from_secs(5)), 5);
        assert_eq!(ramp_target(0, &stages, Duration::from_secs(15)), 10);
        assert_eq!(ramp_target(0, &stages, Duration::from_millis(22_500)), 5);
        assert_eq!(ramp_target(0, &stages, Duration::from_secs(60)), 0);
        // A zero-length stage jumps at once.
        let jump = vec![(Duration::ZERO, 7), (Duration::from_secs(1), 7)];
        assert_eq!(ramp_target(1, &jump, Duration::ZERO), 7);
    }

    #[test]
    fn arrival_schedules_integrate_the_rate() {
        let constant = LoadPlan::ArrivalRate {
            constant: true,
            start_rate: 100.0,
            stages: vec![(Duration::from_secs(2), 100.0)],
            pre_allocated: 1,
            max_vus: 1,
            max_waiting: 0,
            max_wait: Duration::ZERO,
            graceful_stop: Duration::ZERO,
        };
        assert_eq!(constant.start_of(0), Some(Duration::ZERO));
        assert_eq!(constant.start_of(100), Some(Duration::from_secs(1)));
        assert_eq!(constant.start_of(199).map(|d| d.as_millis()), Some(1990));
        assert_eq!(constant.start_of(200), None, "200 iterations in 2 s: k = 200 is past the end");
        // 0 → 100/s over 10 s, then 100/s for 1 s: 500 + 100 iterations.
        let ramp = LoadPlan::ArrivalRate {
            constant: false,
            start_rate: 0.0,
            stages: vec![(Duration::from_secs(10), 100.0), (Duration::from_secs(1), 100.0)],
            pre_allocated: 1,
            max_vus: 1,
            max_waiting: 0,
            max_wait: Duration::ZERO,
            graceful_stop: Duration::ZERO,
        };
        // N(t) = 5·t² in the first stage: the 125th iteration is due at 5 s.
        assert_eq!(ramp.start_of(125).map(|d| d.as_millis()), Some(5000));
        assert_eq!(ramp.start_of(550).map(|d| d.as_millis()), Some(10_500));
        assert_eq!(ramp.start_of(600), None);
        let due: Vec<Duration> = (0..600).map_while(|k| ramp.start_of(k)).collect();
        assert_eq!(due.len(), 600);
        assert!(due.windows(2).all(|w| w[0] <= w[1]), "the schedule never goes back");
        // The count agrees with the schedule, also when the integral is fractional.
        assert_eq!(constant.scheduled_iterations(), Some(200));
        assert_eq!(ramp.scheduled_iterations(), Some(600));
        let odd = LoadPlan::ArrivalRate {
            constant: true,
            start_rate: 3.0,
            stages: vec![(Duration::from_millis(1500), 3.0)],
            pre_allocated: 1,
            max_vus: 1,
            max_waiting: 0,
            max_wait: Duration::ZERO,
            graceful_stop: Duration::ZERO,
        };
        let n = (0..10).map_while(|k| odd.start_of(k)).count() as u64;
        assert_eq!((odd.scheduled_iterations(), n), (Some(5), 5), "4.5 iterations due: 0 … 4");
    }

    #[test]
    fn waiting_for_a_vu_is_an_open_model_setting_with_defaults() {
        let load = |yaml: &str| {
            let spec: LoadSpec = serde_yaml::from_str(yaml).unwrap();
            let mut problems = Problems::default();
            let plan = compile_load(&spec, "load", &mut problems);
            (plan, problems.into_vec().iter().map(|p| format!("{}: {}", p.location, p.message)).collect::<Vec<_>>())
        };
        let (plan, problems) = load("{executor: constant-arrival-rate, rate: 10, duration: 1s, maxVUs: 5}");
        assert!(problems.is_empty(), "{problems:?}");
        let Some(LoadPlan::ArrivalRate { max_waiting, max_wait, .. }) = plan else { panic!() };
        assert_eq!((max_waiting, max_wait), (DEFAULT_MAX_WAITING, DEFAULT_MAX_WAIT));
        let (plan, _) = load(
            "{executor: ramping-arrival-rate, stages: [{duration: 1s, target: 5}], maxVUs: 5, maxWaiting: 0, maxWait: 250ms}",
        );
        let Some(LoadPlan::ArrivalRate { max_waiting, max_wait, .. }) = plan else { panic!() };
        assert_eq!((max_waiting, max_wait), (0, Duration::from_millis(250)));
        let (plan, problems) = load("{executor: constant-vus, vus: 2, duration: 1s, maxWaiting: 3, maxWait: 1s}");
        assert!(plan.is_none());
        assert_eq!(
            problems,
            ["load.maxWaiting: does not apply to constant-vus", "load.maxWait: does not apply to constant-vus"]
        );
    }
}
