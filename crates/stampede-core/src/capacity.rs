//! A capacity search (`executor: capacity`): plateaus of a constant arrival rate, each one
//! higher, judged one by one against the thresholds (the SLO), until `stopAfter` plateaus in a
//! row fail or `maxRate` is reached; then, optionally, shorter plateaus between the last pass
//! and the first failure.
//!
//! Each plateau is one run of the same plan at its rate. Its figures are those recorded after
//! its warm-up: the cumulative counters at the first tick past the warm-up are taken away from
//! the run's final ones ([`StepStats::since`]). A plateau passes when every threshold does, the
//! iterations started per second are within 1 % of its rate, and the generator kept up (schedule
//! lag and CPU): a plateau the generator could not drive is no evidence about the service, and
//! makes the answer a lower bound.

use stampede_model::report::{CapacityResult, LatencySummary, PlateauResult, Verdict};

use crate::compile::plan::{CapacitySearch, Plan};
use crate::compile::threshold::{Baseline, Measured, judge_thresholds};
use crate::output::report::{self, histogram_summary, round3};
use crate::stats::metrics::{StepStats, WorkerMetrics};

/// The achieved rate must be at least this share of the target for a plateau to count.
pub const RATE_TOLERANCE: f64 = 0.99;

/// How many times a plateau is run again at one rate after a stall of the generator's machine.
pub const STALL_RETRIES: usize = 2;

/// Judges a plateau at `rate`/s from what it measured in `seconds` after its warm-up (`window`:
/// per-step counters and histograms, dropped iterations, schedule lag; a cluster's runners'
/// added together) and whether a generator's CPU was saturated. Pure: the CLI and the operator
/// judge alike.
pub fn judge(
    plan: &Plan,
    rate: f64,
    seconds: f64,
    window: &WorkerMetrics,
    cpu_saturated: Option<String>,
    refine: bool,
    baseline: Baseline<'_>,
) -> (PlateauResult, Judged) {
    let seconds = seconds.max(1e-9);
    let mut total = StepStats::default();
    for s in &window.steps {
        total.merge(s);
    }
    let errors: u64 = total.errors.iter().sum();
    let dropped: u64 = window.dropped.iter().sum();
    let measured = Measured::new(&plan.step_keys, &plan.group_keys, window);
    let thresholds: Vec<Verdict> = judge_thresholds(&plan.thresholds, &measured, seconds, baseline);
    // The schedule is exact, so what was due in the measured part is rate × seconds; what started
    // is that less the iterations dropped (counted when due). Counting starts per tick instead
    // would be off by one at each edge of the window, 2 % of a 1-s window at 50/s. An iteration
    // that starts late is the schedule lag's business (below).
    let achieved = ((rate * seconds).round() - dropped as f64).max(0.0) / seconds;
    let lag_ms = histogram_summary(&window.schedule_lag);
    let mut why = Vec::new();
    if lag_ms.p99 > report::SATURATION_LAG_P99_MS {
        why.push(format!("schedule lag p99 {:.1} ms", lag_ms.p99));
    }
    let cpu = cpu_saturated.is_some();
    why.extend(cpu_saturated);
    let saturated = (!why.is_empty()).then(|| why.join("; "));
    let slo_met = thresholds.iter().all(|v| v.passed);
    let rate_met = achieved >= rate * RATE_TOLERANCE;
    let latency_ms =
        if total.latency.is_empty() { LatencySummary::default() } else { histogram_summary(&total.latency) };
    // Requests in flight on average, by Little's law: well under the pool means the VUs were not
    // short, so iterations dropped with the CPU idle were a stall of the machine, not the pool.
    let in_flight = total.requests as f64 / seconds * latency_ms.mean / 1000.0;
    let pool_sufficed = in_flight <= f64::from(plan.max_vus()) / 2.0;
    // The thresholds are judged first. The generator is to blame only when the SLO held and
    // the rate still could not be driven (too few iterations started), or when its own CPU was
    // saturated (its figures are suspect then). When a threshold failed, VUs exhausted and
    // iterations started late are the service's slowness: its latency grew past the SLO and held
    // the VUs. Iterations that started late but all started, with the SLO met, are a pass: the
    // latency counts from the scheduled start, so the lag is in it and the SLO held anyway (the
    // lag is still reported in `saturated`).
    let generator_limited = cpu || (slo_met && !rate_met);
    let passed = slo_met && rate_met && !generator_limited;
    let result = PlateauResult {
        rate: round3(rate),
        achieved_rate: round3(achieved),
        refine,
        seconds: round3(seconds),
        requests: total.requests,
        errors,
        error_rate: if total.requests > 0 { round3(errors as f64 / total.requests as f64 * 1e6) / 1e6 } else { 0.0 },
        latency_ms,
        dropped_iterations: dropped,
        lag_p99_ms: lag_ms.p99,
        saturated,
        passed,
        thresholds,
    };
    // The CPU was fine and the pool far from full, yet too few iterations started: a stall of
    // the generator's machine, worth another try.
    let stall = generator_limited && !cpu && pool_sufficed;
    (result, Judged { rate, passed, generator_limited, stall, refine })
}

/// A plateau's verdict, as the search needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Judged {
    /// The plateau's target rate, iterations/s.
    pub rate: f64,
    /// Every threshold held, the achieved rate was within [`RATE_TOLERANCE`] of the target, and
    /// the generator's CPU was not saturated.
    pub passed: bool,
    /// The generator (VUs or CPU), not the service, kept it from passing: the SLO held but too
    /// few iterations started, or the generator's CPU was saturated.
    pub generator_limited: bool,
    /// Too few iterations started with the generator's CPU fine and its VU pool far from full:
    /// a stall of its machine.
    pub stall: bool,
    /// A refining plateau (between the last pass and the first failure), not a rising one.
    pub refine: bool,
}

/// Which plateaus to run next, from what the earlier ones showed: the rising search, then the
/// refinement. Pure, so the CLI and the cluster follow the same rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SearchState {
    /// Plateaus of the rising search run so far.
    pub rising: u32,
    /// Failures in a row.
    pub failures: u32,
    /// The highest rate that passed, iterations/s (`None`: none yet).
    pub pass: Option<f64>,
    /// The lowest rate that failed above `pass`, iterations/s (`None`: none yet, or a later pass
    /// cleared it).
    pub fail: Option<f64>,
    /// Refining plateaus run so far.
    pub refined: u32,
    /// Why the search is over, once it is.
    pub stopped: Option<String>,
    /// `service`, `generator` or `maxRate`, once known.
    pub limit: Option<&'static str>,
    /// A plateau to run again: the generator stalled at this rate, fewer than
    /// [`STALL_RETRIES`] times so far there.
    pub again: Option<(f64, bool)>,
    /// Rates run again so far, once per retry.
    pub retried: Vec<f64>,
}

/// The next plateau: its rate, and whether it refines.
pub fn next_plateau(search: &CapacitySearch, state: &SearchState) -> Option<(f64, bool)> {
    if state.stopped.is_some() {
        return None;
    }
    if let Some(again) = state.again {
        return Some(again);
    }
    if state.limit.is_none() {
        return search.rate(state.rising).map(|r| (r, false));
    }
    match (state.pass, state.fail) {
        (Some(lo), Some(hi)) if state.refined < search.refine && state.limit == Some("service") => {
            Some(((lo + hi) / 2.0, true))
        }
        _ => None,
    }
}

/// Records a plateau's verdict in `state`; says when the search is over.
pub fn record(search: &CapacitySearch, state: &mut SearchState, judged: Judged) {
    let Judged { rate, passed, generator_limited, stall, refine } = judged;
    state.again = None;
    // A stall of the generator's machine is no answer yet: again at this rate, a bounded number
    // of times (a machine that stalls every time cannot drive it).
    if stall && state.retried.iter().filter(|&&r| r == rate).count() < STALL_RETRIES {
        state.retried.push(rate);
        state.again = Some((rate, refine));
        return;
    }
    if refine {
        state.refined += 1;
        if passed {
            state.pass = Some(rate);
        } else {
            state.fail = Some(rate);
        }
        if state.refined >= search.refine {
            state.stopped = Some(format!("{} refining plateau(s) run", state.refined));
        }
        return;
    }
    state.rising += 1;
    if passed {
        state.pass = Some(rate);
        state.fail = None;
        state.failures = 0;
    } else {
        state.failures += 1;
        if state.fail.is_none() {
            state.fail = Some(rate);
        }
        if generator_limited {
            state.limit = Some("generator");
            state.stopped = Some(format!("the generator could not drive {rate:.1}/s"));
            return;
        }
        if state.failures >= search.stop_after {
            state.limit = Some("service");
        }
    }
    if state.limit.is_none() && search.rate(state.rising).is_none() {
        // No higher rate to try: a failure since the last pass says the service was the limit.
        if state.fail.is_some() {
            state.limit = Some("service");
        } else {
            state.limit = Some("maxRate");
            state.stopped = Some(format!("maxRate ({:.1}/s) reached", search.max));
        }
    }
    if state.limit == Some("service") && (search.refine == 0 || state.pass.is_none()) {
        state.stopped = Some(format!("{} plateau(s) in a row failed", state.failures));
    }
}

/// The answer, from the plateaus run and the search's state.
pub fn answer(search: &CapacitySearch, state: &SearchState, plateaus: &[PlateauResult]) -> CapacityResult {
    // A plateau run again (the generator stalled) counts by its last run.
    let last: Vec<&PlateauResult> = plateaus
        .iter()
        .enumerate()
        .filter(|(i, p)| !plateaus[i + 1..].iter().any(|q| q.rate == p.rate))
        .map(|(_, p)| p)
        .collect();
    let best = last.iter().copied().filter(|p| p.passed).max_by(|a, b| a.rate.total_cmp(&b.rate));
    let capacity = best.map(|p| p.rate);
    let above = |p: &&PlateauResult| !p.passed && capacity.is_none_or(|c| p.rate > c);
    let first_fail = last.iter().copied().filter(above).min_by(|a, b| a.rate.total_cmp(&b.rate));
    let limit =
        state.limit.unwrap_or(if state.stopped.as_deref() == Some("interrupted") { "interrupted" } else { "service" });
    let limited_by = match (limit, first_fail) {
        ("generator", Some(p)) => format!(
            "the generator, not the service: at {:.1}/s it started {:.1}/s{}{}; {} — add runners or raise maxVUs",
            p.rate,
            p.achieved_rate,
            if p.dropped_iterations > 0 {
                format!(" ({} iterations dropped: every VU was busy)", p.dropped_iterations)
            } else {
                String::new()
            },
            p.saturated.as_ref().map(|s| format!(" ({s})")).unwrap_or_default(),
            match capacity {
                Some(c) => format!("the capacity is at least {c:.1}/s"),
                None => "no rate was measured with the generator keeping up, so nothing is known of the capacity"
                    .to_string(),
            },
        ),
        ("maxRate", _) => format!(
            "maxRate ({:.1}/s) was reached with every threshold met: the capacity is at least that — raise maxRate",
            search.max
        ),
        (_, Some(p)) => {
            let failed: Vec<String> = p
                .thresholds
                .iter()
                .filter(|v| !v.passed)
                .map(|v| format!("`{}` ({})", v.threshold, v.actual_text))
                .collect();
            if failed.is_empty() {
                format!("at {:.1}/s only {:.1}/s started", p.rate, p.achieved_rate)
            } else {
                format!("{} failed first, at {:.1}/s", failed.join(" and "), p.rate)
            }
        }
        (_, None) => "nothing failed".into(),
    };
    CapacityResult {
        capacity,
        lower_bound: limit != "service",
        limited_by,
        limit: limit.to_string(),
        stopped: state.stopped.clone().unwrap_or_else(|| "interrupted".into()),
        p99_ms: best.map(|p| p.latency_ms.p99),
        error_rate: best.map(|p| p.error_rate),
        plateaus: plateaus.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::plan::CapacityStep;
    use std::time::Duration;

    fn search(refine: u32) -> CapacitySearch {
        CapacitySearch {
            start: 100.0,
            step: CapacityStep::Add(100.0),
            plateau: Duration::from_secs(10),
            warmup: Duration::from_secs(2),
            max: 1000.0,
            stop_after: 2,
            refine,
        }
    }

    /// Drives the search with `verdict(rate, refine)` until it stops; returns the rates run.
    fn drive(s: &CapacitySearch, verdict: impl Fn(f64, bool, usize) -> (bool, bool, bool)) -> (Vec<f64>, SearchState) {
        let mut state = SearchState::default();
        let mut rates = Vec::new();
        while let Some((rate, refine)) = next_plateau(s, &state) {
            let (passed, generator_limited, stall) = verdict(rate, refine, rates.len());
            rates.push(rate);
            record(s, &mut state, Judged { rate, passed, generator_limited, stall, refine });
            assert!(rates.len() < 100, "the search must end");
        }
        (rates, state)
    }

    /// A plateau at 900/s of 4 s measured: 3,000 iterations started (600 dropped: every VU
    /// busy), each started up to 50 ms late, each answered in `latency_us`.
    fn judged_at_900(latency_us: u64) -> (PlateauResult, Judged) {
        judged_at_900_with(latency_us, 600)
    }

    /// Like [`judged_at_900`], with `dropped` of the 3,600 due iterations dropped.
    fn judged_at_900_with(latency_us: u64, dropped: u64) -> (PlateauResult, Judged) {
        let yaml = "name: c\nbaseUrl: http://127.0.0.1:9\nload: {executor: capacity, startRate: 100, step: 100, \
                    plateau: 4s, maxRate: 1000, preAllocatedVUs: 10, maxVUs: 10}\nscenarios:\n  - name: s\n    \
                    steps:\n      - {name: get, request: {url: \"{{baseUrl}}/\"}}\nthresholds: [\"latency.p99 < 100ms\"]\n";
        let file = crate::parse_str(yaml, std::path::Path::new("c.yaml")).unwrap();
        let plan = crate::compile(&file, &crate::CompileOptions::default()).unwrap();
        let mut window = WorkerMetrics::new(1, 1);
        for _ in 0..3_600 - dropped {
            window.steps[0].requests += 1;
            window.steps[0].record_latency_us(latency_us);
            window.steps[0].record_status(200);
            window.schedule_lag.record(50_000).unwrap();
        }
        window.dropped = vec![dropped];
        judge(&plan, 900.0, 4.0, &window, None, false, Err(crate::compile::threshold::NO_BASELINE))
    }

    /// #22: thresholds are judged first. VUs exhausted and iterations late *because the
    /// service's latency grew past a failed SLO* is the service's limit; it used to be blamed on
    /// the generator ("at least 800/s — add runners"), and `make test` failed on it.
    #[test]
    fn a_failed_slo_is_the_services_limit_even_with_the_vus_exhausted_and_iterations_late() {
        let (result, judged) = judged_at_900(499_000);
        assert!(!judged.passed && !judged.generator_limited && !judged.stall, "{judged:?}");
        assert!(result.saturated.is_some(), "the lag is still reported: {result:?}");
        // The same plateau with the SLO met: the generator could not drive the rate.
        let (_, judged) = judged_at_900(1_000);
        assert!(!judged.passed && judged.generator_limited, "{judged:?}");
    }

    /// #22: iterations that all started, some late (a busy machine), with the SLO met, pass: the
    /// lag is in the latency, which met the SLO anyway. Such a plateau used to fail as the
    /// generator's, and a cluster, which runs no plateau twice, then reported "≥ 450/s — add
    /// runners" for a service that takes 800/s.
    #[test]
    fn iterations_started_late_but_all_started_with_the_slo_met_pass() {
        let (result, judged) = judged_at_900_with(1_000, 0);
        assert!(judged.passed && !judged.generator_limited, "{judged:?}");
        assert!(result.saturated.as_deref().is_some_and(|s| s.contains("schedule lag")), "{result:?}");
    }

    #[test]
    fn the_search_rises_until_stop_after_failures_in_a_row_then_halves_the_interval() {
        // The service takes 640/s.
        let (rates, state) = drive(&search(2), |r, _, _| (r <= 640.0, false, false));
        assert_eq!(rates, [100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0, 650.0, 625.0]);
        assert_eq!((state.pass, state.fail, state.limit), (Some(625.0), Some(650.0), Some("service")));
        // Without refinement it stops at the second failure.
        let (rates, state) = drive(&search(0), |r, _, _| (r <= 640.0, false, false));
        assert_eq!(rates.last(), Some(&800.0));
        assert_eq!(state.stopped.as_deref(), Some("2 plateau(s) in a row failed"));
        // A pass after one failure resets the count (a noisy plateau is not the limit).
        let (rates, _) = drive(&search(0), |r, _, _| (r != 300.0 && r <= 640.0, false, false));
        assert_eq!(rates.len(), 8);
    }

    #[test]
    fn the_generator_ends_the_search_at_once_and_a_stall_is_tried_again_a_bounded_number_of_times() {
        let (rates, state) = drive(&search(2), |r, _, _| (r < 400.0, r >= 400.0, false));
        assert_eq!(rates, [100.0, 200.0, 300.0, 400.0]);
        assert_eq!(state.limit, Some("generator"));
        let a = answer(&search(2), &state, &[]);
        assert!(a.lower_bound);
        // A stall at 300/s: run again; it passes the second time.
        let (rates, _) = drive(&search(0), |r, _, n| match (r, n) {
            (300.0, 2) => (false, true, true),
            _ => (r <= 640.0, false, false),
        });
        assert_eq!(&rates[..4], [100.0, 200.0, 300.0, 300.0]);
        // Two stalls in a row at 100/s, then it passes: one answer for that rate, the search goes on.
        let (rates, state) = drive(&search(0), |r, _, n| (r <= 640.0 && n >= 2, r <= 640.0 && n < 2, n < 2));
        assert_eq!(&rates[..4], [100.0, 100.0, 100.0, 200.0]);
        assert_eq!(state.limit, Some("service"));
        // A machine that stalls every time at 300/s: after STALL_RETRIES more runs, the generator.
        let (rates, state) = drive(&search(0), |r, _, _| (r < 300.0, r >= 300.0, r >= 300.0));
        assert_eq!(rates, [100.0, 200.0, 300.0, 300.0, 300.0]);
        assert_eq!((state.limit, state.pass), (Some("generator"), Some(200.0)));
    }

    #[test]
    fn max_rate_reached_with_every_plateau_passing_is_a_lower_bound() {
        let (rates, state) = drive(&search(2), |_, _, _| (true, false, false));
        assert_eq!(rates.len(), 10);
        assert_eq!(state.limit, Some("maxRate"));
        // The last rate tried failing, with failures left to count: the service was the limit.
        let (_, state) = drive(&search(0), |r, _, _| (r < 1000.0, false, false));
        assert_eq!(state.limit, Some("service"));
    }
}
