//! The charts over time: throughput, latency, each step's p99, errors by kind, active VUs, an
//! open model's schedule, and the distribution of the run's latency.

use stampede_model::report::{LatencySummary, LoadChange, Report, TimelinePoint, describe_load_change};

use super::svg::{chart, line_chart, series_color};
use super::{BASELINE, Marks, PALETTE, Series, XAxis};

/// The Over time section: a chart of each figure of the timeline, with the baseline's
/// throughput and p99 beside the run's.
pub(super) fn charts(h: &mut String, r: &Report, baseline: Option<&Report>) {
    let t = &r.timeline;
    let changes = change_marks(&r.run.load_changes);
    let marks = Marks { changes: &changes, ..Marks::default() };
    h.push_str("<section><h2>Over time</h2><div class=\"charts\">");
    h.push_str(&throughput_chart(t, baseline, &marks));
    h.push_str(&latency_chart(t, baseline, &marks));
    if let Some(chart) = step_p99_chart(t) {
        h.push_str(&chart);
    }
    h.push_str(&errors_chart(t));
    h.push_str(&chart(
        "Active virtual users",
        "VUs",
        &XAxis::Seconds,
        &[Series { name: "VUs".into(), color: PALETTE[4].into(), points: over_time(t, &|p| f64::from(p.active_vus)) }],
        &marks,
    ));
    // Open models: the schedule against what ran, dropped iterations, lag.
    if t.iter().any(|p| p.due_per_sec.is_some()) {
        schedule_charts(h, t);
    }
    if r.total.responses > 0 {
        h.push_str(&distribution_chart(&r.total.latency_ms));
    }
    h.push_str("</div></section>\n");
}

/// Where the load changed, and to what, as chart marks.
fn change_marks(changes: &[LoadChange]) -> Vec<(f64, String)> {
    changes
        .iter()
        .map(|c| {
            (c.t, format!("{} s: {}", c.t, describe_load_change(c.vus.map(i64::from), c.rate.map(i64::from), c.paused)))
        })
        .collect()
}

/// A figure of each interval, at the interval's time.
fn over_time(t: &[TimelinePoint], f: &dyn Fn(&TimelinePoint) -> f64) -> Vec<(f64, f64)> {
    t.iter().map(|p| (p.t, f(p))).collect()
}

/// The baseline's line of a figure, by time since its own start (none without a baseline).
fn baseline_line(baseline: Option<&Report>, name: &str, f: &dyn Fn(&TimelinePoint) -> f64) -> Option<Series> {
    baseline.map(|b| Series {
        name: format!("baseline {name}"),
        color: BASELINE.into(),
        points: over_time(&b.timeline, f),
    })
}

/// Requests per second, and the baseline's.
fn throughput_chart(t: &[TimelinePoint], baseline: Option<&Report>, marks: &Marks<'_>) -> String {
    let mut throughput =
        vec![Series { name: "requests/s".into(), color: PALETTE[0].into(), points: over_time(t, &|p| p.rps) }];
    throughput.extend(baseline_line(baseline, "requests/s", &|p| p.rps));
    chart("Throughput", "requests/s", &XAxis::Seconds, &throughput, marks)
}

/// The p50, p90, p99 and max latency, and the baseline's p99.
fn latency_chart(t: &[TimelinePoint], baseline: Option<&Report>, marks: &Marks<'_>) -> String {
    let mut latency = vec![
        Series { name: "p50".into(), color: PALETTE[1].into(), points: over_time(t, &|p| p.p50_ms) },
        Series { name: "p90".into(), color: PALETTE[5].into(), points: over_time(t, &|p| p.p90_ms) },
        Series { name: "p99".into(), color: PALETTE[2].into(), points: over_time(t, &|p| p.p99_ms) },
        Series { name: "max".into(), color: PALETTE[3].into(), points: over_time(t, &|p| p.max_ms) },
    ];
    latency.extend(baseline_line(baseline, "p99", &|p| p.p99_ms));
    chart("Latency", "ms", &XAxis::Seconds, &latency, marks)
}

/// With more than one step, each step's p99 (an interval where a step had no answer has no
/// point).
fn step_p99_chart(t: &[TimelinePoint]) -> Option<String> {
    let mut step_names: Vec<(String, String)> =
        t.iter().flat_map(|p| p.steps.iter().map(|s| (s.scenario.clone(), s.step.clone()))).collect();
    step_names.sort();
    step_names.dedup();
    if step_names.len() <= 1 {
        return None;
    }
    let per_step: Vec<Series> = step_names
        .iter()
        .enumerate()
        .map(|(n, (scenario, step))| Series {
            name: format!("{scenario} / {step}"),
            color: series_color(n),
            points: t
                .iter()
                .filter_map(|p| {
                    p.steps.iter().find(|s| &s.scenario == scenario && &s.step == step).map(|s| (p.t, s.p99_ms))
                })
                .collect(),
        })
        .collect();
    Some(line_chart("p99 by step", "ms", &XAxis::Seconds, &per_step))
}

/// Errors: the total, and one line per kind that occurred.
fn errors_chart(t: &[TimelinePoint]) -> String {
    let mut kinds: Vec<&String> = t.iter().flat_map(|p| p.errors_by_kind.keys()).collect();
    kinds.sort();
    kinds.dedup();
    let mut error_series =
        vec![Series { name: "all".into(), color: PALETTE[3].into(), points: over_time(t, &|p| p.errors as f64) }];
    for (n, kind) in kinds.into_iter().enumerate() {
        error_series.push(Series {
            name: kind.clone(),
            color: series_color(n + 4),
            points: over_time(t, &|p| p.errors_by_kind.get(kind).copied().unwrap_or(0) as f64),
        });
    }
    line_chart("Errors by kind", "per interval", &XAxis::Seconds, &error_series)
}

/// An open model's charts: iterations due against started, those that waited or were
/// dropped, and the schedule's lag.
fn schedule_charts(h: &mut String, t: &[TimelinePoint]) {
    h.push_str(&line_chart(
        "Arrival rate",
        "iterations/s",
        &XAxis::Seconds,
        &[
            Series {
                name: "due".into(),
                color: PALETTE[0].into(),
                points: over_time(t, &|p| p.due_per_sec.unwrap_or(0.0)),
            },
            Series {
                name: "started".into(),
                color: PALETTE[1].into(),
                points: over_time(t, &|p| p.started_per_sec.unwrap_or(0.0)),
            },
        ],
    ));
    h.push_str(&line_chart(
        "Waiting and dropped iterations",
        "per interval",
        &XAxis::Seconds,
        &[
            Series {
                name: "waited for a VU".into(),
                color: PALETTE[1].into(),
                points: over_time(t, &|p| p.waited.unwrap_or(0) as f64),
            },
            Series {
                name: "dropped".into(),
                color: PALETTE[3].into(),
                points: over_time(t, &|p| p.dropped.unwrap_or(0) as f64),
            },
        ],
    ));
    h.push_str(&line_chart(
        "Schedule lag",
        "ms, latest start",
        &XAxis::Seconds,
        &[Series {
            name: "max".into(),
            color: PALETTE[2].into(),
            points: over_time(t, &|p| p.lag_max_ms.unwrap_or(0.0)),
        }],
    ));
}

/// The distribution: percentiles on a log scale of 1 / (1 - q).
fn distribution_chart(l: &LatencySummary) -> String {
    let at = |q: f64| -(1.0 - q).log10();
    let ranks = [
        (0.5, "p50", l.p50),
        (0.75, "p75", l.p75),
        (0.9, "p90", l.p90),
        (0.95, "p95", l.p95),
        (0.99, "p99", l.p99),
        (0.999, "p99.9", l.p999),
    ];
    let mut points: Vec<(f64, f64)> = ranks.iter().map(|&(q, _, v)| (at(q), v)).collect();
    points.push((at(0.9999), l.max));
    let mut ticks: Vec<(f64, String)> = ranks.iter().map(|&(q, name, _)| (at(q), name.to_string())).collect();
    ticks.push((at(0.9999), "max".into()));
    line_chart(
        "Latency distribution",
        "ms, all steps",
        &XAxis::Ticks(ticks),
        &[Series { name: "latency".into(), color: PALETTE[0].into(), points }],
    )
}
