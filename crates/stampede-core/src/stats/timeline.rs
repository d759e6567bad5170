//! A timeline's points: one interval's counts and percentiles, in total and per step, from a
//! local run's ticks or from runners' merged intervals.

use stampede_model::report::{StepPoint, TimelinePoint, round3};

use crate::stats::metrics::{IntervalStats, errors_by_name};

/// Summarizes one interval of a timeline that ended `elapsed` after the start and lasted
/// `length`: the interval's own counts and percentiles, in total and per step (named by `keys`,
/// when there is more than one step).
pub fn interval_point(
    elapsed: std::time::Duration,
    length: std::time::Duration,
    active_vus: u32,
    s: &IntervalStats,
    keys: &[stampede_model::StepKey],
) -> TimelinePoint {
    let ms = |us: u64| round3(us as f64 / 1000.0);
    let quantiles = |h: &hdrhistogram::Histogram<u64>| {
        if h.is_empty() {
            [0.0; 4]
        } else {
            [ms(h.value_at_quantile(0.5)), ms(h.value_at_quantile(0.9)), ms(h.value_at_quantile(0.99)), ms(h.max())]
        }
    };
    let per_sec =
        |n: u64| if length > std::time::Duration::ZERO { round3(n as f64 / length.as_secs_f64()) } else { 0.0 };
    let open = s.started + s.dropped > 0;
    let [p50_ms, p90_ms, p99_ms, max_ms] = quantiles(&s.latency);
    let steps = if keys.len() > 1 {
        keys.iter()
            .zip(&s.steps)
            .filter(|(_, st)| st.requests > 0)
            .map(|(k, st)| {
                let [p50_ms, p90_ms, p99_ms, max_ms] = quantiles(&st.latency);
                StepPoint {
                    scenario: k.scenario.clone(),
                    step: k.step.clone(),
                    requests: st.requests,
                    errors: st.errors(),
                    p50_ms,
                    p90_ms,
                    p99_ms,
                    max_ms,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    TimelinePoint {
        t: round3(elapsed.as_secs_f64()),
        active_vus,
        requests: s.requests,
        rps: per_sec(s.requests),
        errors: s.errors,
        errors_by_kind: errors_by_name(&s.errors_by_kind),
        iterations: s.iterations,
        p50_ms,
        p90_ms,
        p99_ms,
        max_ms,
        due_per_sec: open.then(|| per_sec(s.started + s.dropped)),
        started_per_sec: open.then(|| per_sec(s.started)),
        dropped: open.then_some(s.dropped),
        waited: open.then_some(s.waited),
        lag_max_ms: open.then(|| ms(s.lag_max_us)),
        steps,
    }
}

/// The point of a merged interval of runners (see [`crate::stats::portable::merge_timelines`]):
/// interval `i` ends at `i * interval_seconds`, the last one at the run's end, and none before the
/// end of the one before (`prev_end`, which this moves on).
pub fn merged_point(
    interval_seconds: u32,
    duration: std::time::Duration,
    prev_end: &mut std::time::Duration,
    m: &crate::stats::portable::MergedInterval,
    keys: &[stampede_model::StepKey],
) -> TimelinePoint {
    let width = std::time::Duration::from_secs(interval_seconds.max(1) as u64);
    let prev = *prev_end;
    let end = (width * m.index as u32).min(duration.max(prev)).max(prev);
    let start = (width * (m.index as u32 - 1)).max(prev).min(end);
    *prev_end = end;
    interval_point(end, end - start, m.active_vus, &m.stats, keys)
}
