//! The Capacity section: a capacity search's answer, its curve by target rate and its
//! plateaus.

use std::fmt::Write as _;

use stampede_model::report::{CapacityResult, PlateauResult};

use super::format::{esc, ms, pct, short};
use super::svg::chart;
use super::{BASELINE, Dot, Marks, PALETTE, Series, XAxis};

/// A capacity search: the answer in large text, what limited it and why the search stopped;
/// then the curve by target rate (a dot per plateau, hollow for a refining one, red for one
/// that failed, a line at the capacity) and a row per plateau, both sorted by rate.
pub(super) fn capacity(h: &mut String, c: &CapacityResult) {
    h.push_str("<section class=\"capacity\"><h2>Capacity</h2>");
    let answer = match c.capacity {
        Some(rate) => format!("{}{rate:.1} iterations/s", if c.lower_bound { "at least " } else { "" }),
        None => "none found".into(),
    };
    let _ = write!(h, "<p class=\"capacity-answer\">{}</p><ul class=\"capacity-facts\">", esc(&answer));
    match c.capacity {
        Some(_) => {
            let _ = write!(
                h,
                "<li>at that rate: p99 {} ms, errors {}</li>",
                c.p99_ms.map_or_else(|| "–".to_string(), ms),
                c.error_rate.map_or_else(|| "–".to_string(), pct)
            );
        }
        None => h.push_str("<li>not even the first plateau met every threshold</li>"),
    }
    if c.lower_bound {
        h.push_str("<li>a lower bound: the service was not shown to be the limit, so it may take more</li>");
    }
    let _ = write!(h, "<li>limited by: {}</li><li>stopped: {}</li></ul>", esc(&c.limited_by), esc(&c.stopped));
    if c.plateaus.is_empty() {
        h.push_str("</section>\n");
        return;
    }
    let mut plateaus: Vec<&PlateauResult> = c.plateaus.iter().collect();
    plateaus.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    let per_plateau = |name: &str, color: &'static str, f: &dyn Fn(&PlateauResult) -> f64| Series {
        name: name.into(),
        color: color.into(),
        points: plateaus.iter().map(|p| (p.rate, f(p))).collect(),
    };
    // Every series has a point per plateau, in this order: the dot of point i is plateau i's.
    let dot = |i: usize| Dot { hollow: plateaus[i].refine, failed: !plateaus[i].passed };
    let marker =
        c.capacity.map(|rate| (rate, format!("capacity {}{}/s", if c.lower_bound { "≥ " } else { "" }, short(rate))));
    let marks = Marks { dots: Some(&dot), marker: marker.as_ref().map(|(x, t)| (*x, t.as_str())), ..Marks::default() };
    h.push_str(
        "<p class=\"note\">Each plateau's figures after its warm-up, by target rate: a dot per plateau, \
         hollow for a refining plateau, red for one that failed; the vertical line marks the capacity.</p>\
         <div class=\"charts\">",
    );
    h.push_str(&chart(
        "Latency by target rate",
        "ms",
        &XAxis::Rate,
        &[
            per_plateau("p50", PALETTE[1], &|p| p.latency_ms.p50),
            per_plateau("p90", PALETTE[5], &|p| p.latency_ms.p90),
            per_plateau("p99", PALETTE[2], &|p| p.latency_ms.p99),
        ],
        &marks,
    ));
    h.push_str(&chart(
        "Error rate by target rate",
        "%",
        &XAxis::Rate,
        &[per_plateau("errors", PALETTE[4], &|p| p.error_rate * 100.0)],
        &marks,
    ));
    // The target in the baseline's grey, dashed: the line the achieved rate should follow.
    h.push_str(&chart(
        "Achieved vs target rate",
        "iterations/s",
        &XAxis::Rate,
        &[per_plateau("target", BASELINE, &|p| p.rate), per_plateau("achieved", PALETTE[0], &|p| p.achieved_rate)],
        &marks,
    ));
    h.push_str(
        "</div><table><tr><th>rate/s</th><th>achieved/s</th><th>requests</th><th>p50</th><th>p90</th><th>p99</th>\
         <th>max</th><th>errors</th><th>dropped</th><th>verdict</th></tr>",
    );
    for p in &plateaus {
        let at_capacity = c.capacity == Some(p.rate) && p.passed;
        let l = &p.latency_ms;
        let _ = write!(
            h,
            "<tr{}><td class=\"num\">{:.1}{}</td><td class=\"num{}\">{:.1}</td><td class=\"num\">{}</td>",
            if at_capacity { " class=\"at-capacity\"" } else { "" },
            p.rate,
            if p.refine { " (refine)" } else { "" },
            if p.achieved_rate < p.rate * 0.99 { " failed" } else { "" },
            p.achieved_rate,
            p.requests
        );
        for v in [l.p50, l.p90, l.p99, l.max] {
            let _ = write!(h, "<td class=\"num\">{}</td>", ms(v));
        }
        let _ = write!(
            h,
            "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"{}\">{}</td></tr>",
            pct(p.error_rate),
            p.dropped_iterations,
            if p.passed { "passed" } else { "failed" },
            esc(&plateau_verdict(p))
        );
    }
    h.push_str(
        "</table><p class=\"note\">Latencies in milliseconds, after each plateau's warm-up; in bold, the \
         capacity's plateau. A plateau passes when every threshold is met, 99 % or more of its target rate \
         started and the generator kept up.</p></section>\n",
    );
}

/// A plateau's verdict as the table says it: `pass`, or `FAIL: ` and why (the failed thresholds
/// with their values, the rate not reached, the generator's reason).
pub(super) fn plateau_verdict(p: &PlateauResult) -> String {
    if p.passed {
        return "pass".into();
    }
    let mut why: Vec<String> =
        p.thresholds.iter().filter(|v| !v.passed).map(|v| format!("{} ({})", v.threshold, v.actual_text)).collect();
    if p.achieved_rate < p.rate * 0.99 {
        why.push(format!("only {:.1}/s started", p.achieved_rate));
    }
    if let Some(s) = &p.saturated {
        why.push(format!("generator: {s}"));
    }
    if why.is_empty() { "FAIL".into() } else { format!("FAIL: {}", why.join("; ")) }
}
