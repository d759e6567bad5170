//! The Trend section: this run and the earlier runs of the same test.

use std::fmt::Write as _;

use stampede_model::report::{Report, TrendPoint};

use super::format::{esc, ms, pct};
use super::svg::chart;
use super::{Dot, Marks, PALETTE, Series, XAxis};

/// This run and the earlier runs of the same test, oldest first (at least two): latency and
/// throughput per run, then a row per run.
pub(super) fn trend(h: &mut String, r: &Report) {
    let t = &r.trend;
    if t.len() < 2 {
        return;
    }
    let axis = XAxis::Ticks(t.iter().enumerate().map(|(i, p)| (i as f64, p.label.clone())).collect());
    let not_passed: Vec<(f64, String)> = t
        .iter()
        .enumerate()
        .filter(|(_, p)| p.verdict != "Passed")
        .map(|(i, p)| (i as f64, format!("{}: {}", p.label, p.verdict)))
        .collect();
    let marks = Marks { dots: Some(&|_| Dot::default()), failed_runs: &not_passed, ..Marks::default() };
    let per_run = |name: &str, color: &'static str, f: &dyn Fn(&TrendPoint) -> Option<f64>| Series {
        name: name.into(),
        color: color.into(),
        points: t.iter().enumerate().filter_map(|(i, p)| f(p).map(|v| (i as f64, v))).collect(),
    };
    h.push_str(
        "<section><h2>Trend</h2><p class=\"note\">This run and the earlier runs of the same test, oldest first; \
         a red dashed line marks a run that did not pass.</p><div class=\"charts\">",
    );
    h.push_str(&chart(
        "Latency by run",
        "ms",
        &axis,
        &[
            per_run("p50", PALETTE[1], &|p| p.p50_ms),
            per_run("p95", PALETTE[5], &|p| p.p95_ms),
            per_run("p99", PALETTE[2], &|p| p.p99_ms),
        ],
        &marks,
    ));
    h.push_str(&chart(
        "Throughput by run",
        "requests/s",
        &axis,
        &[per_run("requests/s", PALETTE[0], &|p| Some(p.rps))],
        &marks,
    ));
    h.push_str(
        "</div><table><tr><th>run</th><th>started</th><th>verdict</th><th>requests</th><th>rps</th>\
         <th>errors</th><th>p50</th><th>p95</th><th>p99</th></tr>",
    );
    for p in t {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.1}</td>\
             <td class=\"num\">{}</td>",
            esc(&p.label),
            esc(p.started_at.as_deref().unwrap_or("–")),
            if p.verdict == "Passed" { "passed" } else { "failed" },
            esc(&p.verdict),
            p.requests,
            p.rps,
            pct(p.error_rate)
        );
        for v in [p.p50_ms, p.p95_ms, p.p99_ms] {
            let _ = write!(h, "<td class=\"num\">{}</td>", v.map_or_else(|| "–".to_string(), ms));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table><p class=\"note\">Latencies in milliseconds.</p></section>\n");
}
