//! Merging runner results, without I/O: histograms are added bin by bin (never averaged
//! percentiles) and thresholds are evaluated on the merged data.

use stampede_api::{RunnerReport, StepResult, Summary};
use stampede_engine::Plan;
use stampede_engine::latency_summary;
use stampede_engine::portable::{self, PortableError, PortableMetrics};
use stampede_engine::{StepStats, WorkerMetrics};
use stampede_model::errors_by_name;
use stampede_model::report::Verdict;
use stampede_model::report::round3;

fn scenario_names(plan: &Plan) -> Vec<String> {
    plan.scenarios.iter().map(|s| s.name.clone()).collect()
}

/// The final summary and verdicts from the runners' final reports (those that have one).
pub fn final_summary(plan: &Plan, reports: &[&RunnerReport]) -> Result<(Summary, Vec<Verdict>), PortableError> {
    let names = scenario_names(plan);
    let mut merged = WorkerMetrics::new(plan.step_keys.len(), names.len());
    let mut seconds: f64 = 0.0;
    for r in reports {
        if let Some(result) = &r.result {
            portable::merge_into(result, &plan.step_keys, &names, &mut merged)?;
        }
        seconds = seconds.max(r.duration_seconds);
    }
    let verdicts = plan.thresholds.iter().map(|t| t.evaluate(&plan.step_keys, &merged.steps, seconds)).collect();
    let steps = plan
        .step_keys
        .iter()
        .zip(&merged.steps)
        .map(|(k, s)| StepResult {
            scenario: k.scenario.clone(),
            step: k.step.clone(),
            requests: s.requests,
            errors: s.error_total(),
            rps: rate(s.requests, seconds),
            latency_ms: latency_summary(s),
        })
        .collect();
    let mut total = StepStats::default();
    for s in &merged.steps {
        total.merge(s);
    }
    let mut summary = summarize(&total, seconds, merged.iterations.iter().sum());
    summary.dropped_iterations = merged.dropped.iter().sum();
    summary.is_final = true;
    summary.steps = steps;
    Ok((summary, verdicts))
}

/// A live summary from the runners' interim totals.
pub fn live_summary(reports: &[&RunnerReport]) -> Result<Summary, PortableError> {
    let keys = vec![stampede_model::StepKey { scenario: String::new(), step: "total".into() }];
    let mut merged = WorkerMetrics::new(1, 0);
    let mut seconds: f64 = 0.0;
    for r in reports {
        if let Some(live) = &r.live {
            let p = PortableMetrics { steps: vec![live.clone()], ..PortableMetrics::default() };
            portable::merge_into(&p, &keys, &[], &mut merged)?;
            seconds = seconds.max(r.duration_seconds);
        }
    }
    Ok(summarize(&merged.steps[0], seconds, 0))
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
        duration_seconds: round3(seconds),
        steps: Vec::new(),
    }
}
