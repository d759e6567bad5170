//! How large a long cluster run's results are: a 1-hour, 10-step, 20-runner run (synthetic
//! samples), from the runners' ConfigMaps to the merged report and its HTML page. The sizes are
//! invariants (each must fit its ConfigMap); the times are printed for the notes, never bounded.

use std::time::{Duration, Instant};

use stampede_api::{RunnerReport, RunnerState};
use stampede_core::portable::{self, TimelineBuilder};
use stampede_core::{IntervalStats, WorkerMetrics};
use stampede_model::ErrorKind;
use stampede_operator::lifecycle::REPORT_LIMIT_BYTES;
use stampede_operator::results::{ReportContext, final_summary};

const STEPS: usize = 10;
const RUNNERS: u32 = 20;
/// A ConfigMap's data limit (1 MiB with the object).
const CONFIG_MAP_LIMIT: usize = 1024 * 1024;

fn hour_long_plan() -> std::sync::Arc<stampede_core::Plan> {
    let steps: String = (0..STEPS)
        .map(|i| format!("      - {{name: step{i}, request: {{url: \"{{{{baseUrl}}}}/s{i}\"}}}}\n"))
        .collect();
    let yaml = format!(
        "name: hour\nbaseUrl: http://my-service.default.svc\nload: {{executor: constant-vus, vus: 200, duration: 1h}}\n\
         scenarios:\n  - name: shop\n    steps:\n{steps}thresholds: [\"latency.p99 < 500ms\"]\n"
    );
    let file = stampede_core::parse_str(&yaml, std::path::Path::new("hour.yaml")).unwrap();
    std::sync::Arc::new(stampede_core::compile(&file, &stampede_core::CompileOptions::default()).unwrap())
}

/// One runner's final report: an hour of 1-s ticks, 20 requests per step per second with a
/// long-tailed latency and a few errors (a histogram's size depends on how many of its buckets
/// are used, which these samples spread over, more than on its counts).
fn runner(plan: &stampede_core::Plan, index: u32) -> RunnerReport {
    let mut rng = fastrand::Rng::with_seed(index as u64);
    let interval = portable::timeline_interval(plan.planned_duration());
    let mut timeline = TimelineBuilder::new(interval);
    let mut totals = WorkerMetrics::new(STEPS, 1);
    for tick in 1..=3_600u64 {
        let mut t = IntervalStats::default();
        for step in 0..STEPS {
            for _ in 0..20 {
                t.record_request(step);
                totals.steps[step].requests += 1;
                if rng.u16(0..1000) == 0 {
                    t.record_error(step, ErrorKind::Timeout);
                    totals.steps[step].record_error(ErrorKind::Timeout);
                    continue;
                }
                // 1–20 ms mostly, with a tail to ~2 s.
                let us = (1_000.0
                    * (1.0 + 19.0 * rng.f64())
                    * if rng.u8(0..100) == 0 { 100.0 * rng.f64() } else { 1.0 }) as u64;
                t.record_latency(step, us.max(1));
                totals.steps[step].record_latency_us(us.max(1));
            }
        }
        t.iterations = 20;
        timeline.add(Duration::from_secs(tick), 10, &t);
    }
    totals.iterations[0] = 20 * 3_600;
    RunnerReport {
        duration_seconds: 3_600.0,
        result: Some(portable::encode(&plan.step_keys, &totals, &["shop".to_string()])),
        timeline: Some(timeline.finish(Duration::from_secs(3_600), portable::TIMELINE_BUDGET_BYTES)),
        ..RunnerReport::new(index, RunnerState::Done)
    }
}

#[test]
fn an_hour_of_ten_steps_on_twenty_runners_fits_its_config_maps() {
    let plan = hour_long_plan();
    let t0 = Instant::now();
    // Four distinct runners, each standing for five (making samples is the slow part here).
    let distinct: Vec<RunnerReport> = (0..4).map(|i| runner(&plan, i)).collect();
    let runners: Vec<RunnerReport> =
        (0..RUNNERS).map(|i| RunnerReport { index: i, ..distinct[i as usize % distinct.len()].clone() }).collect();
    let made = t0.elapsed();
    let sizes: Vec<usize> = runners.iter().map(|r| serde_json::to_string(r).unwrap().len()).collect();
    let largest = *sizes.iter().max().unwrap();
    let interval = runners[0].timeline.as_ref().unwrap().interval_seconds;
    assert!(largest < CONFIG_MAP_LIMIT, "a runner's result ConfigMap: {largest} bytes");

    let t1 = Instant::now();
    let ctx = ReportContext {
        loadtest: "perf/hour",
        start_at: Some("2026-12-01T00:00:00Z"),
        baseline: Err("none"),
        live: &[],
    };
    let merged = final_summary(&plan, &runners.iter().collect::<Vec<_>>(), &ctx).unwrap();
    let merge = t1.elapsed();
    let json = serde_json::to_string(&merged.report).unwrap();
    assert!(json.len() < REPORT_LIMIT_BYTES, "the report ConfigMap: {} bytes", json.len());
    assert_eq!(merged.report.timeline.len(), 3_600 / interval as usize);
    assert_eq!(merged.report.runners.len(), RUNNERS as usize);
    assert_eq!(
        merged.report.timeline.iter().map(|p| p.requests).sum::<u64>(),
        merged.summary.requests,
        "every request is in one interval"
    );
    let t2 = Instant::now();
    let html = stampede_core::render_html(&merged.report, None);
    let render = t2.elapsed();
    eprintln!(
        "1 h, {STEPS} steps, {RUNNERS} runners: interval {interval} s ({} points); runner result {} KiB (largest), \
         timeline part {} KiB; merged report {} KiB (merged in {:.2} s); HTML {} KiB (rendered in {:.3} s); \
         synthetic runners made in {:.1} s",
        merged.report.timeline.len(),
        largest / 1024,
        serde_json::to_string(runners[0].timeline.as_ref().unwrap()).unwrap().len() / 1024,
        json.len() / 1024,
        merge.as_secs_f64(),
        html.len() / 1024,
        render.as_secs_f64(),
        made.as_secs_f64()
    );
}

/// #22: a report too large for its ConfigMap is thinned until it fits, whatever makes it large:
/// thinning used to stop at one timeline point and never cut steps or runner rows, so the
/// write was refused every 5 s and the status never written.
#[test]
fn a_report_too_large_for_its_config_map_is_thinned_until_it_fits_keeping_totals_and_verdicts() {
    let plan = hour_long_plan();
    let runners: Vec<RunnerReport> = (0..2).map(|i| runner(&plan, i)).collect();
    let ctx = ReportContext {
        loadtest: "perf/hour",
        start_at: Some("2026-12-01T00:00:00Z"),
        baseline: Err("none"),
        live: &[],
    };
    let mut report = final_summary(&plan, &runners.iter().collect::<Vec<_>>(), &ctx).unwrap().report;
    // 3,000 runner rows with long messages, and 2,000 steps: far over the limit without any timeline.
    let row = report.runners[0].clone();
    report.runners = (0..3_000)
        .map(|i| stampede_model::report::RunnerRow { index: i, message: Some("x".repeat(300)), ..row.clone() })
        .collect();
    let step = report.steps[0].clone();
    report.steps = (0..2_000)
        .map(|i| stampede_model::report::StepSummary {
            step: Some(format!("step-{i:04}-{}", "y".repeat(200))),
            ..step.clone()
        })
        .collect();
    let stampede_operator::lifecycle::Action::WriteReport(json) = stampede_operator::lifecycle::write_report(&report)
    else {
        panic!("a WriteReport action")
    };
    assert!(json.len() <= REPORT_LIMIT_BYTES, "{} bytes", json.len());
    let written: stampede_model::report::Report = serde_json::from_str(&json).unwrap();
    assert_eq!(written.total, report.total, "the totals stay whole");
    assert_eq!(written.thresholds, report.thresholds, "the verdicts stay whole");
    assert!(written.timeline.is_empty());
    assert!(written.runners.len() < 3_000, "runner rows were cut");
    let omitted = written.omitted.join("; ");
    assert!(omitted.contains("runner rows") && omitted.contains("of 3000"), "{omitted}");
    assert!(omitted.contains("timeline"), "{omitted}");
}
