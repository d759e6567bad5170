//! Runs a capacity search (`executor: capacity`) plateau by plateau; the judging and the
//! search's rules are `stampede_core::capacity`'s (pure: the operator judges alike).

use std::sync::Arc;
use std::time::{Duration, Instant};

use stampede_core::capacity::{Judged, SearchState, answer, judge, next_plateau, record};
use stampede_model::report::{PlateauResult, Report};

use crate::compile::plan::{CapacitySearch, Plan};
use crate::error::RunError;
use crate::output::report::{self, round3};
use crate::run::executor::{self, RunOptions, RunOutcome, Tick, Totals};
use crate::stats::metrics::{StepStats, WorkerMetrics};
use crate::stats::sysstat;

/// What one plateau measured, and the raw run (merged into the whole report at the end).
pub struct Plateau {
    /// The plateau's figures after its warm-up, with its threshold verdicts.
    pub result: PlateauResult,
    /// Whether it passed, and whether the generator rather than the service held it back (what
    /// the search goes on from).
    pub verdict: Judged,
    /// What it measured after its warm-up: per-step counters and histograms, dropped
    /// iterations, schedule lag (what a runner ships for the operator to add up).
    pub window: WorkerMetrics,
    /// Seconds measured.
    pub seconds: f64,
    /// Why the generator's CPU was saturated, if it was.
    pub cpu_saturated: Option<String>,
    /// The whole run of the plateau, warm-up included (merged into the search's report).
    pub outcome: RunOutcome,
    /// CPU time the process used during the plateau, all threads (the built-in target's
    /// included).
    pub cpu: Duration,
    /// Wall-clock time the plateau's run took.
    pub wall: Duration,
}

/// Runs one plateau of `plan` at `rate`/s for `length`, measured after `warmup`.
pub fn plateau(
    plan: &Plan,
    rate: f64,
    length: Duration,
    warmup: Duration,
    refine: bool,
    opts: &RunOptions,
    on_tick: &mut dyn FnMut(&Tick),
) -> Result<Plateau, RunError> {
    let plan = Arc::new(plan.plateau(rate, length));
    let opts = RunOptions { totals: true, ..opts.clone() };
    // Everything recorded up to the first tick past the warm-up is the warm-up's.
    let mut at_warmup: Option<(Duration, Arc<Totals>)> =
        warmup.is_zero().then(|| (Duration::ZERO, Arc::new(Totals::default())));
    let before = sysstat::process();
    let wall = Instant::now();
    let outcome = executor::run(plan.clone(), &opts, &mut |tick: &Tick| {
        if at_warmup.is_none() && tick.elapsed + Duration::from_millis(1) >= warmup {
            at_warmup = Some((tick.elapsed, tick.totals.clone().unwrap_or_default()));
        }
        on_tick(tick);
    })?;
    let wall = wall.elapsed();
    let cpu = sysstat::process().cpu().saturating_sub(before.cpu());
    // The measured window: from the first tick past the warm-up to the end. When that tick
    // came too late to leave half the window meant (a plateau a tick or two long, a busy
    // machine), the whole plateau is measured, warm-up included: never a window of nothing,
    // which measured no rate (`achieved 0.0/s`) and still counted.
    let meant = length.saturating_sub(warmup);
    let (from, snapshot) = match at_warmup {
        Some((from, snapshot)) if length.saturating_sub(from) * 2 >= meant && from < length => (from, snapshot),
        _ => (Duration::ZERO, Arc::new(Totals::default())),
    };
    let seconds = length.saturating_sub(from).as_secs_f64().max(1e-9);
    let steps: Vec<StepStats> = outcome
        .metrics
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| match snapshot.steps.get(i) {
            Some(earlier) => s.since(earlier),
            None => s.clone(),
        })
        .collect();
    let mut lag = outcome.metrics.schedule_lag.clone();
    if let Some(earlier) = &snapshot.schedule_lag {
        let _ = lag.subtract(earlier);
    }
    let dropped: u64 = outcome.metrics.dropped.iter().sum::<u64>().saturating_sub(snapshot.dropped.iter().sum::<u64>());
    let mut window = WorkerMetrics::new(plan.step_keys.len(), plan.scenarios.len());
    window.steps = steps;
    window.schedule_lag = lag;
    window.dropped = vec![dropped];
    let cpu_percent = cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9) * 100.0;
    let cpu_saturated = (cpu_percent > report::SATURATION_CPU_SHARE * 100.0 * outcome.threads as f64)
        .then(|| format!("generator CPU {cpu_percent:.0}% of {} core(s)", outcome.threads));
    let (result, verdict) = judge(&plan, rate, seconds, &window, cpu_saturated.clone(), refine, opts.baseline());
    Ok(Plateau { result, verdict, window, seconds, cpu_saturated, outcome, cpu, wall })
}

/// Runs the whole search of `plan` (whose `capacity` is set), plateau by plateau.
pub(crate) fn search(
    plan: &Arc<Plan>,
    opts: &RunOptions,
    on_tick: &mut dyn FnMut(&Tick),
    on_plateau: &mut dyn FnMut(&PlateauResult),
) -> Result<(SearchState, Vec<Plateau>), RunError> {
    let Some(search) = plan.capacity.clone() else {
        return Err(RunError::Other("not a capacity search".into()));
    };
    let mut state = SearchState::default();
    let mut done: Vec<Plateau> = Vec::new();
    while let Some((rate, refine)) = next_plateau(&search, &state) {
        if opts.interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            state.stopped = Some("interrupted".into());
            break;
        }
        let (length, warmup) =
            if refine { (search.refine_plateau(), search.refine_warmup()) } else { (search.plateau, search.warmup) };
        let p = plateau(plan, rate, length, warmup, refine, opts, on_tick)?;
        record(&search, &mut state, p.verdict);
        on_plateau(&p.result);
        done.push(p);
    }
    Ok((state, done))
}

/// The report of the whole search: every plateau's counts together, as one run, the curve and
/// the answer.
pub(crate) fn whole_report(
    plan: &Plan,
    search: &CapacitySearch,
    state: &SearchState,
    plateaus: Vec<Plateau>,
    (builtin, target_cpu): (bool, Duration),
    opts: &RunOptions,
) -> Report {
    let mut metrics: Option<WorkerMetrics> = None;
    let mut timeline = Vec::new();
    let (mut offset, mut cpu, mut wall, mut worker_cpu) = (0.0, Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut error_samples = Vec::new();
    let mut max_active_vus = 0;
    let mut threads = 1;
    let mut interrupted = false;
    let mut started_at = None;
    let mut spread = 0;
    for p in &plateaus {
        let o = &p.outcome;
        match &mut metrics {
            None => metrics = Some(o.metrics.clone()),
            Some(m) => m.merge(&o.metrics),
        }
        for point in &o.timeline {
            let mut point = point.clone();
            point.t = round3(point.t + offset);
            timeline.push(point);
        }
        offset += o.duration.as_secs_f64();
        cpu += p.cpu;
        wall += p.wall;
        worker_cpu += o.worker_cpu;
        error_samples.extend(o.error_samples.iter().cloned());
        max_active_vus = max_active_vus.max(o.max_active_vus);
        threads = o.threads;
        interrupted |= o.interrupted;
        started_at = started_at.or(Some(o.started_at));
        spread = spread.max(o.source_addresses_spread);
    }
    let results: Vec<PlateauResult> = plateaus.iter().map(|p| p.result.clone()).collect();
    let outcome = RunOutcome {
        metrics: metrics.unwrap_or_else(|| WorkerMetrics::new(plan.step_keys.len(), plan.scenarios.len())),
        started_at: started_at.unwrap_or_else(std::time::SystemTime::now),
        duration: Duration::from_secs_f64(offset),
        threads,
        worker_cpu,
        timeline,
        max_active_vus,
        interrupted,
        error_samples: error_samples.into_iter().take(20).collect(),
        aborted: None,
        source_addresses_spread: spread,
        load_changes: Vec::new(),
    };
    let cpu = cpu.saturating_sub(target_cpu);
    let generator = stampede_model::report::GeneratorFacts {
        cpu_percent: round3(cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9) * 100.0),
        cpu_seconds: round3(cpu.as_secs_f64()),
        cpu_micros_per_request: 0.0,
        peak_rss_bytes: sysstat::process().max_rss_bytes,
        peak_vus: outcome.max_active_vus,
    };
    let mut report = report::build_report(plan, &outcome, builtin, generator, opts.baseline());
    let answer = answer(search, state, &results);
    // The verdicts that matter are those at the capacity; without one, the first plateau's.
    if let Some(p) = answer.verdict_plateau() {
        report.thresholds = p.thresholds.clone();
    }
    // The whole run's schedule mixes every plateau's rate: each plateau's own is in the curve.
    report.run.schedule = None;
    report.capacity = Some(answer);
    report
}
