//! `stampede compare BASE NEW`: the change from one run's report to another's, per step and in
//! total: requests per second, error rate, and each latency percentile.

use std::fmt::Write as _;

use stampede_model::report::{Report, StepSummary};

/// One figure of one step in both runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// The figure's label: `rps`, `error %`, `p50 ms` … `max ms`, `requests`.
    pub metric: &'static str,
    /// Its value in the base run, in the unit its label says (a count for `requests`).
    pub base: f64,
    /// Its value in the new run, in the same unit.
    pub new: f64,
}

impl Change {
    /// The relative change in percent (`None` when the base is 0).
    pub fn percent(&self) -> Option<f64> {
        (self.base != 0.0).then(|| (self.new - self.base) / self.base * 100.0)
    }

    /// The change as reports show it: percentage points for the error rate, else relative.
    pub fn text(&self) -> String {
        if self.metric == "error %" {
            format!("{:+.2} pp", self.new - self.base)
        } else {
            self.percent().map_or_else(|| "—".to_string(), |p| format!("{p:+.1} %"))
        }
    }

    /// A value of this figure: requests whole, the rest to µs.
    pub fn value(&self, v: f64) -> String {
        if self.metric == "requests" { format!("{v:.0}") } else { format!("{v:.3}") }
    }
}

/// A step (or the total) in both runs; `None` where a run lacks it.
#[derive(Clone, Debug, PartialEq)]
pub struct StepChange {
    /// `scenario/step`, or `total`.
    pub step: String,
    /// The base run has this step.
    pub in_base: bool,
    /// The new run has this step.
    pub in_new: bool,
    /// One per figure, in table order; empty unless both runs have the step.
    pub changes: Vec<Change>,
}

fn key(s: &StepSummary) -> String {
    match (&s.scenario, &s.step) {
        (Some(sc), Some(st)) => format!("{sc}/{st}"),
        _ => "total".into(),
    }
}

fn figures(s: &StepSummary) -> [(&'static str, f64); 9] {
    let l = &s.latency_ms;
    [
        ("rps", s.rps),
        ("error %", s.error_rate * 100.0),
        ("p50 ms", l.p50),
        ("p90 ms", l.p90),
        ("p95 ms", l.p95),
        ("p99 ms", l.p99),
        ("p99.9 ms", l.p999),
        ("max ms", l.max),
        ("requests", s.requests as f64),
    ]
}

/// Every step of either run, in the new run's order (then the base's), and the total last.
pub fn compare(base: &Report, new: &Report) -> Vec<StepChange> {
    let mut order: Vec<String> = new.steps.iter().map(key).collect();
    for k in base.steps.iter().map(key) {
        if !order.contains(&k) {
            order.push(k);
        }
    }
    let find = |r: &'_ Report, k: &str| r.steps.iter().find(|s| key(s) == k).cloned();
    let mut out: Vec<StepChange> = order
        .into_iter()
        .map(|k| {
            let (b, n) = (find(base, &k), find(new, &k));
            step_change(k, b.as_ref(), n.as_ref())
        })
        .collect();
    out.push(step_change("total".into(), Some(&base.total), Some(&new.total)));
    out
}

fn step_change(step: String, base: Option<&StepSummary>, new: Option<&StepSummary>) -> StepChange {
    let changes = match (base, new) {
        (Some(b), Some(n)) => figures(b)
            .iter()
            .zip(figures(n).iter())
            .map(|(&(metric, base), &(_, new))| Change { metric, base, new })
            .collect(),
        _ => Vec::new(),
    };
    StepChange { step, in_base: base.is_some(), in_new: new.is_some(), changes }
}

/// The comparison as a table: a block per step, a row per figure.
pub fn render_comparison(base_name: &str, new_name: &str, steps: &[StepChange]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "base: {base_name}\nnew:  {new_name}\n");
    let _ = writeln!(out, "{:<28} {:<10} {:>14} {:>14} {:>10}", "step", "metric", "base", "new", "change");
    for s in steps {
        if !(s.in_base && s.in_new) {
            let _ = writeln!(out, "{:<28} only in the {} run", s.step, if s.in_base { "base" } else { "new" });
            continue;
        }
        for (i, c) in s.changes.iter().enumerate() {
            let _ = writeln!(
                out,
                "{:<28} {:<10} {:>14} {:>14} {:>10}",
                if i == 0 { s.step.as_str() } else { "" },
                c.metric,
                c.value(c.base),
                c.value(c.new),
                c.text()
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_model::report::LatencySummary;

    fn step(name: Option<&str>, rps: f64, p99: f64, error_rate: f64) -> StepSummary {
        StepSummary {
            scenario: name.map(|_| "s".to_string()),
            step: name.map(str::to_string),
            rps,
            error_rate,
            requests: 100,
            latency_ms: LatencySummary { p99, ..LatencySummary::default() },
            ..StepSummary::default()
        }
    }

    fn report(steps: Vec<StepSummary>, total: StepSummary) -> Report {
        let mut r: Report = serde_json::from_value(serde_json::json!({
            "schemaVersion": 1, "name": "x", "startedAt": "2026-01-01T00:00:00Z",
            "run": {"executor": "constant-vus", "durationSeconds": 1.0, "vusMax": 1, "threads": 1,
                    "iterations": 1, "interrupted": false, "builtinTarget": false,
                    "generator": {"cpuPercent": 0.0, "cpuSeconds": 0.0, "cpuMicrosPerRequest": 0.0, "peakRssBytes": 0}},
            "total": serde_json::to_value(&total).unwrap(),
            "steps": [], "scenarios": [], "timeline": [], "checks": [], "errorSamples": [], "thresholds": [],
        }))
        .unwrap();
        r.steps = steps;
        r
    }

    #[test]
    fn changes_are_per_step_and_in_total_with_steps_of_one_run_only_named() {
        let base = report(
            vec![step(Some("a"), 100.0, 10.0, 0.0), step(Some("gone"), 5.0, 1.0, 0.0)],
            step(None, 105.0, 10.0, 0.0),
        );
        let new = report(
            vec![step(Some("a"), 90.0, 11.0, 0.02), step(Some("added"), 1.0, 1.0, 0.0)],
            step(None, 91.0, 11.0, 0.02),
        );
        let c = compare(&base, &new);
        let names: Vec<&str> = c.iter().map(|s| s.step.as_str()).collect();
        assert_eq!(names, ["s/a", "s/added", "s/gone", "total"]);
        let a = &c[0];
        let p99 = a.changes.iter().find(|c| c.metric == "p99 ms").unwrap();
        assert_eq!((p99.base, p99.new), (10.0, 11.0));
        assert!((p99.percent().unwrap() - 10.0).abs() < 1e-9);
        assert!((a.changes[0].percent().unwrap() + 10.0).abs() < 1e-9, "rps 100 -> 90 is -10 %");
        assert!(c[1].changes.is_empty() && c[1].in_new && !c[1].in_base);
        let table = render_comparison("base.json", "new.json", &c);
        assert!(table.contains("only in the new run") && table.contains("only in the base run"), "{table}");
        assert!(table.contains("+10.0 %") && table.contains("-10.0 %") && table.contains("+2.00 pp"), "{table}");
        let zero = Change { metric: "rps", base: 0.0, new: 3.0 };
        assert_eq!(zero.percent(), None, "no percentage of nothing");
    }
}
