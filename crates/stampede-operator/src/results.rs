//! Merging runner results, without I/O: histograms are added bin by bin (never averaged
//! percentiles), timelines interval by interval, and thresholds are evaluated on the merged
//! data (relative ones against the baseline's report).

use std::time::{Duration, SystemTime};

use stampede_api::{RunnerReport, RunnerState, StepResult, Summary};
use stampede_core::Plan;
use stampede_core::portable::{self, PortableError};
use stampede_core::{RunOutcome, StepStats, WorkerMetrics};
use stampede_core::{build_report, latency_summary, merged_point};
use stampede_model::errors_by_name;
use stampede_model::portable::PortableStep;
use stampede_model::report::{GeneratorFacts, Report, RunnerRow, Verdict, round3};

/// How many error samples the merged report keeps (the runners' first ones).
const ERROR_SAMPLES: usize = 20;

fn scenario_names(plan: &Plan) -> Vec<String> {
    plan.scenarios.iter().map(|s| s.name.clone()).collect()
}

/// What the merged report says about where it comes from.
#[derive(Clone, Copy, Debug)]
pub struct ReportContext<'a> {
    /// `namespace/name` of the LoadTest.
    pub loadtest: &'a str,
    /// The common start instant (RFC 3339).
    pub start_at: Option<&'a str>,
    /// The baseline's report, or why there is none (relative thresholds fail, saying so).
    pub baseline: Result<&'a Report, &'a str>,
    /// The changes of load the run took (`status.live`), in order.
    pub live: &'a [stampede_api::ControlChange],
}

/// The runners' final reports merged: the status summary, the verdicts and the whole report.
#[derive(Clone, Debug)]
pub struct Merged {
    /// The figures for `.status.summary`: totals and per-step rows, final.
    pub summary: Summary,
    /// The threshold verdicts for `.status.thresholds`, judged on the merged histograms.
    pub verdicts: Vec<Verdict>,
    /// The whole report, the same document as a local run's JSON report.
    pub report: Report,
}

/// The run's changes of load as the report says them: seconds from the start to each instant.
fn load_changes(ctx: &ReportContext<'_>, started_at: SystemTime) -> Vec<stampede_model::report::LoadChange> {
    ctx.live
        .iter()
        .map(|c| {
            let at = time::OffsetDateTime::parse(&c.at, &time::format_description::well_known::Rfc3339)
                .map_or(started_at, SystemTime::from);
            let t = at.duration_since(started_at).unwrap_or(Duration::ZERO).as_secs_f64();
            stampede_model::report::LoadChange { t: round3(t), vus: c.vus, rate: c.rate, paused: c.paused }
        })
        .collect()
}

/// The final summary, verdicts and report from the runners' final reports (those that have one).
pub fn final_summary(plan: &Plan, reports: &[&RunnerReport], ctx: &ReportContext<'_>) -> Result<Merged, PortableError> {
    let names = scenario_names(plan);
    let mut merged = WorkerMetrics::new(plan.step_keys.len(), names.len());
    let mut seconds: f64 = 0.0;
    // Each runner's histograms are decoded once: for its own row, then added to the total.
    let mut rows = Vec::with_capacity(reports.len());
    for r in reports {
        let mut own = WorkerMetrics::new(plan.step_keys.len(), names.len());
        if let Some(result) = &r.result {
            portable::merge_run_into(result, &plan.step_keys, &plan.group_keys, &names, &mut own)?;
        }
        rows.push(runner_row(r, &own));
        merged.merge(&own);
        seconds = seconds.max(r.duration_seconds);
    }
    let steps = step_rows(plan, &merged.steps, seconds);
    let mut total = StepStats::default();
    for s in &merged.steps {
        total.merge(s);
    }
    let mut summary = summarize(&total, seconds, merged.iterations.iter().sum());
    codes(&mut summary, &total);
    summary.dropped_iterations = merged.dropped.iter().sum();
    summary.waited_iterations = merged.queue_wait.len();
    summary.is_final = true;
    summary.steps = steps;
    // The thresholds are judged once, on the merged histograms, as the report is built.
    let report = merged_report(plan, reports, rows, merged, seconds, ctx)?;
    let verdicts = report.thresholds.clone();
    Ok(Merged { summary, verdicts, report })
}

/// The LoadTest's report: the same document as a local run's JSON report, from the merged
/// A run's length from the seconds its runners wrote: a negative, infinite or NaN figure (a
/// result ConfigMap anyone may edit) is clamped, never a panic.
fn run_length(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds.clamp(0.0, 366.0 * 86_400.0)).unwrap_or_default()
}

/// metrics and timelines, with one row per runner.
fn merged_report(
    plan: &Plan,
    reports: &[&RunnerReport],
    rows: Vec<RunnerRow>,
    metrics: WorkerMetrics,
    seconds: f64,
    ctx: &ReportContext<'_>,
) -> Result<Report, PortableError> {
    let duration = run_length(seconds);
    let timelines: Vec<(&portable::PortableTimeline, &[portable::PortableStep])> =
        reports.iter().filter_map(|r| Some((r.timeline.as_ref()?, r.result.as_ref()?.steps.as_slice()))).collect();
    let mut prev_end = Duration::ZERO;
    let timeline = portable::merge_timelines(&timelines, &plan.step_keys, |interval, m| {
        merged_point(interval, duration, &mut prev_end, m, &plan.step_keys)
    })?;
    let started_at = ctx
        .start_at
        .and_then(|t| time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok())
        .map_or(SystemTime::UNIX_EPOCH, SystemTime::from);
    let generators: Vec<&GeneratorFacts> = reports.iter().filter_map(|r| r.generator.as_ref()).collect();
    let generator = GeneratorFacts {
        cpu_percent: round3(generators.iter().map(|g| g.cpu_percent).sum()),
        cpu_seconds: round3(generators.iter().map(|g| g.cpu_seconds).sum()),
        cpu_micros_per_request: 0.0,
        peak_rss_bytes: generators.iter().map(|g| g.peak_rss_bytes).max().unwrap_or(0),
        // As on one machine, where each worker thread's peak is added up.
        peak_vus: generators.iter().map(|g| g.peak_vus).sum(),
    };
    let outcome = RunOutcome {
        max_active_vus: generator.peak_vus,
        metrics,
        started_at,
        duration,
        threads: reports.len().max(1),
        worker_cpu: Duration::ZERO,
        timeline,
        interrupted: reports.iter().any(|r| r.state != RunnerState::Done),
        error_samples: Vec::new(),
        aborted: None,
        source_addresses_spread: 0,
        load_changes: load_changes(ctx, started_at),
    };
    let mut report = build_report(plan, &outcome, false, generator, ctx.baseline);
    report.run.loadtest = Some(ctx.loadtest.to_string());
    // Each runner judged its own saturation; the sum of their CPU says nothing per core.
    let saturated: Vec<String> =
        reports.iter().filter_map(|r| r.saturated.as_ref().map(|why| format!("runner {}: {why}", r.index))).collect();
    report.run.saturated = (!saturated.is_empty()).then(|| saturated.join("; "));
    report.error_samples = reports.iter().flat_map(|r| r.error_samples.iter().cloned()).take(ERROR_SAMPLES).collect();
    report.runners = rows;
    Ok(report)
}

/// One runner's row: its own totals, percentiles from its own histograms (`own`).
fn runner_row(r: &RunnerReport, own: &WorkerMetrics) -> RunnerRow {
    let mut total = StepStats::default();
    for s in &own.steps {
        total.merge(s);
    }
    let latency = latency_summary(&total);
    let generator = r.generator.clone().unwrap_or_default();
    RunnerRow {
        index: r.index,
        state: match r.state {
            RunnerState::Done => "done",
            RunnerState::Failed => "failed",
            RunnerState::Running => "running",
            RunnerState::Ready => "ready",
        }
        .into(),
        started_at: r.started_at.clone(),
        duration_seconds: r.duration_seconds,
        requests: total.requests,
        errors: total.error_total(),
        rps: rate(total.requests, r.duration_seconds),
        p50_ms: latency.p50,
        p99_ms: latency.p99,
        max_ms: latency.max,
        cpu_percent: generator.cpu_percent,
        peak_rss_bytes: generator.peak_rss_bytes,
        saturated: r.saturated.clone(),
        message: r.message.clone(),
    }
}

/// The runners' interim figures merged (see [`LiveMerge`]), all decoded now.
pub fn live_figures(plan: &Plan, reports: &[Option<RunnerReport>]) -> Result<LiveFigures, PortableError> {
    LiveMerge::default().figures(plan, reports)
}

/// The runners' interim figures merged: `status.summary` and `status.thresholds` while the run
/// goes on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveFigures {
    /// The live summary.
    pub summary: Summary,
    /// The thresholds the figures so far can judge ([`stampede_core::live_verdicts`]); none
    /// while some runner's steps are not in, and none for a capacity search (judged per plateau
    /// at its end).
    pub thresholds: Vec<Verdict>,
}

/// The runners' interim figures merged into a live summary: each running runner's total and
/// steps so far, and each finished runner's result. Per step (and its codes) only when every
/// runner that sent a request sent its steps too (a runner leaves them out past its budget).
/// The steps' latencies are at the interval precision (two digits, as the runners send them);
/// the final summary's are exact.
///
/// A reconcile follows every runner's write, so the sum is kept between reconciles (the
/// operator keeps one of these per running test), with the reports it holds: when a runner's
/// report changed, its old figures are taken out of the sum and its new ones added, and only
/// those two are decoded. What is kept is the reports as they came (encoded, small) and one
/// sum, not every runner's decoded figures.
#[derive(Default)]
pub struct LiveMerge {
    /// By runner index: the report in the sum.
    seen: Vec<Option<RunnerReport>>,
    /// Their figures added up; rebuilt from `seen` when a report's cannot be taken out.
    sum: Option<LivePart>,
}

/// Several runners' decoded figures added up.
struct LivePart {
    total: StepStats,
    steps: Vec<StepStats>,
}

impl LivePart {
    fn empty(steps: usize) -> LivePart {
        LivePart { total: StepStats::default(), steps: interval_steps(steps) }
    }

    /// Adds what `r` adds to a live summary (see [`live_steps`]).
    fn add(&mut self, index: &StepIndex<'_>, r: &RunnerReport) -> Result<(), PortableError> {
        live_steps(index, r).into_iter().try_for_each(|(p, into)| portable::merge_live_step(p, self.get(into)))
    }

    /// Takes out what [`LivePart::add`] added for `r`; an error when it was not in (this is then
    /// only good to rebuild).
    fn take_out(&mut self, index: &StepIndex<'_>, r: &RunnerReport) -> Result<(), PortableError> {
        live_steps(index, r).into_iter().try_for_each(|(p, from)| portable::take_out_live_step(p, self.get(from)))
    }

    fn get(&mut self, step: Option<usize>) -> &mut StepStats {
        match step {
            Some(i) => &mut self.steps[i],
            None => &mut self.total,
        }
    }
}

impl LiveMerge {
    /// The summary of `reports` (by runner index), decoding only those that changed since the
    /// last call (and what they replace).
    pub fn figures(&mut self, plan: &Plan, reports: &[Option<RunnerReport>]) -> Result<LiveFigures, PortableError> {
        let n = plan.step_keys.len();
        if self.seen.len() != reports.len() || self.sum.as_ref().is_some_and(|s| s.steps.len() != n) {
            *self = LiveMerge::default();
            self.seen.resize_with(reports.len(), || None);
        }
        let index: StepIndex<'_> =
            plan.step_keys.iter().enumerate().map(|(i, k)| ((k.scenario.as_str(), k.step.as_str()), i)).collect();
        let mut sum = self.sum.take();
        for (seen, report) in self.seen.iter_mut().zip(reports) {
            if seen.as_ref() == report.as_ref() {
                continue;
            }
            if let Some(s) = sum.as_mut() {
                if seen.as_ref().is_some_and(|old| s.take_out(&index, old).is_err()) {
                    sum = None;
                } else if let Some(r) = report {
                    s.add(&index, r)?;
                }
            }
            seen.clone_from(report);
        }
        let sum = match sum {
            Some(sum) => sum,
            None => {
                let mut all = LivePart::empty(n);
                for r in self.seen.iter().flatten() {
                    all.add(&index, r)?;
                }
                all
            }
        };
        let (mut seconds, mut active_vus, mut every_step) = (0.0f64, 0u32, true);
        for r in self.seen.iter().flatten() {
            if r.state == RunnerState::Running {
                active_vus = active_vus.saturating_add(r.active_vus.unwrap_or(0));
            }
            if let Some(live) = &r.live {
                every_step &= live.requests == 0 || !r.live_steps.is_empty();
                seconds = seconds.max(r.duration_seconds);
            } else if r.state == RunnerState::Done && r.result.is_some() {
                seconds = seconds.max(r.duration_seconds);
            }
        }
        let mut summary = Summary { active_vus: Some(active_vus), ..summarize(&sum.total, seconds, 0) };
        let mut thresholds = Vec::new();
        if every_step {
            let mut all = StepStats::default();
            sum.steps.iter().for_each(|s| all.merge_codes(s));
            codes(&mut summary, &all);
            summary.steps = step_rows(plan, &sum.steps, seconds);
            if plan.capacity.is_none() {
                thresholds = stampede_core::live_verdicts(&plan.thresholds, &plan.step_keys, &sum.steps, seconds);
            }
        }
        self.sum = Some(sum);
        Ok(LiveFigures { summary, thresholds })
    }
}

/// `n` empty steps whose latency is kept at the interval precision, as runners send it live.
fn interval_steps(n: usize) -> Vec<StepStats> {
    (0..n)
        .map(|_| {
            let mut s = StepStats::default();
            s.latency = stampede_core::stats::histogram::new_interval_histogram();
            s
        })
        .collect()
}

/// A plan's steps by (scenario, step) name.
type StepIndex<'a> = std::collections::HashMap<(&'a str, &'a str), usize>;

/// The portable steps one runner's report adds to a live summary, with where each goes (`None`:
/// the total): a running runner's total and steps so far, a finished runner's result (its
/// steps, and each into the total too); nothing from a runner that is ready or failed. Steps
/// the plan does not have are left out.
fn live_steps<'r>(index: &StepIndex<'_>, r: &'r RunnerReport) -> Vec<(&'r PortableStep, Option<usize>)> {
    let named = |p: &'r PortableStep| Some((p, Some(*index.get(&(p.scenario.as_str(), p.step.as_str()))?)));
    if let Some(live) = &r.live {
        std::iter::once((live, None)).chain(r.live_steps.iter().filter_map(named)).collect()
    } else if let Some(result) = r.result.as_ref().filter(|_| r.state == RunnerState::Done) {
        result.steps.iter().filter_map(named).chain(result.steps.iter().map(|p| (p, None))).collect()
    } else {
        Vec::new()
    }
}

/// The rows of `steps`, named by `plan`'s step keys.
fn step_rows(plan: &Plan, steps: &[StepStats], seconds: f64) -> Vec<StepResult> {
    plan.step_keys
        .iter()
        .zip(steps)
        .map(|(k, s)| StepResult {
            scenario: k.scenario.clone(),
            step: k.step.clone(),
            requests: s.requests,
            errors: s.error_total(),
            rps: rate(s.requests, seconds),
            latency_ms: latency_summary(s),
        })
        .collect()
}

/// The HTTP status codes, gRPC statuses and WebSocket close codes of `all` (every step).
fn codes(summary: &mut Summary, all: &StepStats) {
    summary.status_codes = portable::status_codes_by_name(all);
    summary.grpc_statuses = portable::grpc_statuses_by_name(all);
    summary.ws_close_codes = portable::ws_close_codes_by_name(all);
}

fn rate(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 { round3(n as f64 / seconds) } else { 0.0 }
}

fn summarize(total: &StepStats, seconds: f64, iterations: u64) -> Summary {
    let latency = latency_summary(total);
    let errors = total.error_total();
    let error_rate = if total.requests > 0 { errors as f64 / total.requests as f64 } else { 0.0 };
    Summary {
        is_final: false,
        requests: total.requests,
        rps: rate(total.requests, seconds),
        error_rate,
        errors: format!("{:.2}%", error_rate * 100.0),
        p99: format!("{:.1}ms", latency.p99),
        errors_by_kind: errors_by_name(&total.errors),
        latency_ms: latency,
        bytes_received: total.bytes_received,
        bytes_sent: total.bytes_sent,
        iterations,
        dropped_iterations: 0,
        waited_iterations: 0,
        duration_seconds: round3(seconds),
        active_vus: None,
        status_codes: Default::default(),
        grpc_statuses: Default::default(),
        ws_close_codes: Default::default(),
        steps: Vec::new(),
    }
}

/// A capacity search so far, from the runners' plateau shares: each plateau that every runner
/// has reported, added up bin by bin and judged as the command line judges it. `None` unless the
/// plan is a capacity search. The search is over (`done`) once its stop rule holds or `maxRate`
/// was reached (a cluster runs no refining plateaus: the runners follow one fixed schedule).
pub fn capacity(
    plan: &Plan,
    reports: &[&RunnerReport],
    runners: usize,
    baseline: stampede_core::Baseline<'_>,
) -> Result<Option<(stampede_api::CapacityStatus, stampede_model::report::CapacityResult)>, ShareError> {
    let Some(search) = plan.capacity.clone() else { return Ok(None) };
    let names = scenario_names(plan);
    let mut state = stampede_core::SearchState::default();
    let mut results = Vec::new();
    for k in 0u32.. {
        let shares: Vec<(u32, &stampede_api::PlateauShare)> =
            reports.iter().filter_map(|r| Some((r.index, r.plateaus.iter().find(|p| p.index == k)?))).collect();
        if shares.len() < runners || state.limit.is_some() || state.stopped.is_some() {
            break;
        }
        let mut window = WorkerMetrics::new(plan.step_keys.len(), names.len());
        for (runner, share) in &shares {
            portable::merge_run_into(&share.metrics, &plan.step_keys, &plan.group_keys, &names, &mut window)
                .map_err(|source| ShareError { runner: *runner, plateau: k, source })?;
        }
        let shares: Vec<&stampede_api::PlateauShare> = shares.into_iter().map(|(_, s)| s).collect();
        let rate: f64 = shares.iter().map(|s| s.rate).sum();
        let seconds = shares.iter().map(|s| s.seconds).fold(0.0, f64::max);
        let cpu = shares.iter().find_map(|s| s.cpu_saturated.clone());
        let (result, mut judged) = stampede_core::judge_plateau(plan, rate, seconds, &window, cpu, false, baseline);
        // Runners keep one schedule: a plateau is not run again after a stall.
        judged.stall = false;
        stampede_core::record_plateau(&search, &mut state, judged);
        results.push(result);
    }
    let all_done = !reports.is_empty() && reports.iter().all(|r| r.state == RunnerState::Done);
    let done = state.limit.is_some() || state.stopped.is_some() || all_done;
    if !done {
        state.stopped = None;
    } else if state.stopped.is_none() {
        state.stopped = Some(match state.limit {
            Some("service") => format!("{} plateau(s) in a row failed", state.failures),
            _ => "the runners finished every plateau".into(),
        });
    }
    let answer = stampede_core::capacity_answer(&search, &state, &results);
    let text = answer.capacity.map(|r| format!("{}{r:.0}/s", if answer.lower_bound { "≥ " } else { "" }));
    let rows = results
        .iter()
        .map(|p| {
            let failed: Vec<&str> = p.thresholds.iter().filter(|v| !v.passed).map(|v| v.threshold.as_str()).collect();
            let why = if p.passed {
                None
            } else if !failed.is_empty() {
                Some(failed.join(", "))
            } else {
                Some(p.saturated.clone().unwrap_or_else(|| format!("only {:.1}/s started", p.achieved_rate)))
            };
            stampede_api::PlateauRow {
                rate: p.rate,
                achieved_rate: p.achieved_rate,
                requests: p.requests,
                p50_ms: p.latency_ms.p50,
                p99_ms: p.latency_ms.p99,
                error_rate: p.error_rate,
                passed: p.passed,
                why,
            }
        })
        .collect();
    let status = stampede_api::CapacityStatus {
        rate: answer.capacity,
        text,
        p99_ms: answer.p99_ms,
        error_rate: answer.error_rate,
        lower_bound: answer.lower_bound,
        limited_by: done.then(|| answer.limited_by.clone()),
        done,
        done_at: None,
        plateaus: rows,
    };
    Ok(Some((status, answer)))
}

/// A runner's share of a capacity plateau that cannot be merged: the search cannot be judged
/// (it is never dropped without a word).
#[derive(Debug, thiserror::Error)]
#[error("runner {runner}'s share of plateau {plateau} cannot be merged: {source}")]
pub struct ShareError {
    /// The runner's index.
    pub runner: u32,
    /// The plateau's number, from 0.
    pub plateau: u32,
    /// Why its metrics could not be read back.
    pub source: PortableError,
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_run_length_no_duration_holds_is_clamped_not_a_panic() {
        use std::time::Duration;
        assert_eq!(super::run_length(f64::INFINITY), Duration::from_secs(366 * 86_400));
        assert_eq!(super::run_length(f64::NAN), Duration::ZERO);
        assert_eq!(super::run_length(-3.0), Duration::ZERO);
        assert_eq!(super::run_length(1.5), Duration::from_millis(1500));
    }

    use stampede_api::{RunnerReport, RunnerState};
    use stampede_core::portable;
    use stampede_core::{StepStats, WorkerMetrics};
    use stampede_model::StepKey;

    /// A step's stats: `n` answers with `status`, latencies `base`, `base + 1`… µs.
    fn answers(n: u64, status: u16, base: u64) -> StepStats {
        let mut s = StepStats::default();
        for i in 0..n {
            s.requests += 1;
            s.record_latency_us(base + i);
            s.record_status(status);
        }
        s
    }

    /// A running runner's report, as a runner makes it: its running total (steps `(n, status,
    /// base)` as [`answers`] makes them) and, `with_steps`, its steps so far.
    fn running(index: u32, keys: &[StepKey], steps: &[(u64, u16, u64)], with_steps: bool) -> RunnerReport {
        let mut total = stampede_core::IntervalStats::default();
        let mut codes = Vec::new();
        for (k, &(n, status, base)) in steps.iter().enumerate() {
            total.step(k);
            for i in 0..n {
                total.record_request(k);
                total.record_latency(k, base + i);
            }
            codes.push(answers(n, status, base));
        }
        let live_steps = portable::encode_live_steps(keys, &total, Some(&codes), usize::MAX).unwrap();
        RunnerReport {
            live: Some(portable::step_from_interval("", "total", &total)),
            live_steps: if with_steps { live_steps } else { vec![] },
            duration_seconds: 2.0,
            active_vus: Some(2),
            ..RunnerReport::new(index, RunnerState::Running)
        }
    }

    /// The page's step table while the run goes on: every runner's steps so far, and the
    /// finished runners' results, merged bin by bin; none when a runner sent its total only.
    #[test]
    fn a_live_summary_merges_running_runners_steps_and_finished_runners_results() {
        let yaml = "name: t\nbaseUrl: http://my-service.default.svc\nload: {executor: constant-vus, vus: 3, duration: 1m}\n\
                    scenarios:\n  - name: s\n    steps:\n      - {name: a, request: {url: \"{{baseUrl}}/a\"}}\n      - {name: b, request: {url: \"{{baseUrl}}/b\"}}\n";
        let file = stampede_core::parse_str(yaml, std::path::Path::new("t.yaml")).unwrap();
        let plan = stampede_core::compile(&file, &stampede_core::CompileOptions::default()).unwrap();
        let keys = plan.step_keys.clone();
        let r0 = running(0, &keys, &[(2, 200, 1_000), (3, 500, 90_000)], true);
        let mut done = WorkerMetrics::new(2, 1);
        done.steps[0] = answers(4, 200, 5_000);
        let r1 = RunnerReport {
            result: Some(portable::encode(&keys, &done, &["s".to_string()])),
            duration_seconds: 3.0,
            ..RunnerReport::new(1, RunnerState::Done)
        };
        let s = super::live_figures(&plan, &[Some(r0.clone()), Some(r1.clone())]).unwrap().summary;
        assert_eq!((s.requests, s.active_vus, s.duration_seconds), (9, Some(2), 3.0), "the finished runner counts");
        let rows: Vec<(&str, u64)> = s.steps.iter().map(|r| (r.step.as_str(), r.requests)).collect();
        assert_eq!(rows, [("a", 6), ("b", 3)]);
        // Step a's percentiles: those of every answer in one histogram of the interval
        // precision, up to the finished runner's exact slowest answer.
        let mut a = StepStats::default();
        a.latency = stampede_core::stats::histogram::new_interval_histogram();
        for us in [1_000, 1_001, 5_000, 5_001, 5_002, 5_003] {
            a.record_latency_us(us);
        }
        assert_eq!(s.steps[0].latency_ms, stampede_core::latency_summary(&a));
        assert_eq!(s.steps[0].latency_ms.max, 5.003, "runner 1's slowest answer of step a");
        let codes: Vec<(&str, u64)> = s.status_codes.iter().map(|(c, n)| (c.as_str(), *n)).collect();
        assert_eq!(codes, [("200", 6), ("500", 3)]);
        // One merge that follows the run (runner 0 with less, runner 1 not yet reported, then
        // both as above) ends with the same figures: a replaced report is taken out exactly.
        let mut merge = super::LiveMerge::default();
        let early = running(0, &keys, &[(1, 200, 1_000), (0, 200, 0)], true);
        assert_eq!(merge.figures(&plan, &[Some(early), None]).unwrap().summary.requests, 1);
        assert_eq!(merge.figures(&plan, &[Some(r0.clone()), Some(r1.clone())]).unwrap().summary, s);

        let r2 = running(2, &keys, &[(1, 200, 1_000), (0, 200, 0)], false);
        let s = super::live_figures(&plan, &[Some(r0), Some(r1), Some(r2)]).unwrap().summary;
        assert_eq!(s.requests, 10);
        assert!(s.steps.is_empty() && s.status_codes.is_empty(), "runner 2 sent its total only");
    }

    /// Thresholds as live verdicts: judged on the fleet's steps so far, those the live figures
    /// can judge; none while a runner's steps are not in.
    #[test]
    fn live_figures_judge_the_thresholds_on_the_fleets_steps_so_far() {
        let yaml = "name: t\nbaseUrl: http://my-service.default.svc\nload: {executor: constant-vus, vus: 3, duration: 1m}\n\
                    scenarios:\n  - name: s\n    steps:\n      - {name: a, request: {url: \"{{baseUrl}}/a\"}}\n      - {name: b, request: {url: \"{{baseUrl}}/b\"}}\n\
                    thresholds: [\"latency{step:a}.max < 10ms\", \"latency{step:b}.p99 < 50ms\", \"checks.rate > 99%\"]\n";
        let file = stampede_core::parse_str(yaml, std::path::Path::new("t.yaml")).unwrap();
        let plan = stampede_core::compile(&file, &stampede_core::CompileOptions::default()).unwrap();
        let keys = plan.step_keys.clone();
        let r0 = running(0, &keys, &[(2, 200, 1_000), (3, 200, 90_000)], true);
        let r1 = running(1, &keys, &[(4, 200, 5_000), (0, 200, 0)], true);
        let live = super::live_figures(&plan, &[Some(r0.clone()), Some(r1)]).unwrap();
        let judged: Vec<(&str, bool, f64)> =
            live.thresholds.iter().map(|v| (v.threshold.as_str(), v.passed, v.actual)).collect();
        // Each verdict's figure is the one the live step table shows.
        let (a, b) = (&live.summary.steps[0].latency_ms, &live.summary.steps[1].latency_ms);
        assert!(a.max < 10.0 && b.p99 > 50.0, "{a:?} {b:?}");
        assert_eq!(judged, [("latency{step:a}.max < 10ms", true, a.max), ("latency{step:b}.p99 < 50ms", false, b.p99)]);
        let without_steps = running(1, &keys, &[(4, 200, 5_000), (0, 200, 0)], false);
        assert!(super::live_figures(&plan, &[Some(r0), Some(without_steps)]).unwrap().thresholds.is_empty());
    }
}
