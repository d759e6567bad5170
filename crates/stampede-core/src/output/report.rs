//! The run report: one summary per step plus a total, the run facts and a timeline.
//! Rendered as a terminal table and as JSON (schema: `schemas/report.schema.json`).

use crate::compile::threshold::{Baseline, Measured, judge_thresholds};
use std::fmt::Write as _;

pub use stampede_model::report::*;

/// Schedule lag p99 above this means the generator could not keep its schedule.
pub const SATURATION_LAG_P99_MS: f64 = 10.0;
/// Generator CPU above this share of its worker threads' cores means it was saturated.
pub const SATURATION_CPU_SHARE: f64 = 0.9;

use crate::compile::plan::{Plan, StepKey};
use crate::outcome::RunOutcome;
use crate::stats::metrics::{DropReason, StepStats, WorkerMetrics, errors_by_name};
use crate::stats::phases::{LatencyPhase, PhaseStats, Phases};

fn ms(us: u64) -> f64 {
    round3(us as f64 / 1000.0)
}

/// Summary of a histogram in µs, as ms.
pub fn histogram_summary(h: &hdrhistogram::Histogram<u64>) -> LatencySummary {
    if h.is_empty() { LatencySummary::default() } else { summary_with_exact(h, h.min(), h.max()) }
}

/// A summary with the exact smallest and largest values (the histogram rounds within its
/// precision); percentiles never exceed the exact maximum. `h` is not empty.
fn summary_with_exact(h: &hdrhistogram::Histogram<u64>, min_us: u64, max_us: u64) -> LatencySummary {
    let q = |q: f64| ms(h.value_at_quantile(q).min(max_us));
    LatencySummary {
        mean: round3(h.mean() / 1000.0),
        min: ms(min_us),
        max: ms(max_us),
        p50: q(0.50),
        p75: q(0.75),
        p90: q(0.90),
        p95: q(0.95),
        p99: q(0.99),
        p999: q(0.999),
    }
}

/// Latency summary of a step's stats: exact min and max, percentiles from the histogram.
pub fn latency_summary(s: &StepStats) -> LatencySummary {
    if s.latency.is_empty() { LatencySummary::default() } else { summary_with_exact(&s.latency, s.min_us, s.max_us) }
}

/// Summary of one phase: exact min and max, percentiles from the histogram.
pub fn phase_summary(p: &PhaseStats) -> PhaseSummary {
    let latency = if p.histogram.is_empty() {
        LatencySummary::default()
    } else {
        summary_with_exact(&p.histogram, p.min_value_us(), p.max_us)
    };
    PhaseSummary { samples: p.count(), latency }
}

fn phases_summary(phases: &Phases) -> PhasesSummary {
    let get = |phase| phases.get(phase).filter(|p| p.count() > 0).map(phase_summary);
    PhasesSummary {
        dns: get(LatencyPhase::Dns),
        connect: get(LatencyPhase::Connect),
        tls: get(LatencyPhase::Tls),
        ttfb: get(LatencyPhase::Ttfb),
        receive: get(LatencyPhase::Receive),
    }
}

fn summarize(stats: &StepStats, seconds: f64, scenario: Option<String>, step: Option<String>) -> StepSummary {
    let errors = stats.error_total();
    let per_sec = |n: u64| if seconds > 0.0 { round3(n as f64 / seconds) } else { 0.0 };
    StepSummary {
        scenario,
        step,
        requests: stats.requests,
        responses: stats.latency.len(),
        errors,
        error_rate: if stats.requests > 0 { errors as f64 / stats.requests as f64 } else { 0.0 },
        errors_by_kind: errors_by_name(&stats.errors),
        status_codes: crate::stats::portable::status_codes_by_name(stats),
        grpc_statuses: crate::stats::portable::grpc_statuses_by_name(stats),
        ws_close_codes: crate::stats::portable::ws_close_codes_by_name(stats),
        latency_ms: latency_summary(stats),
        service_ms: stats.service.as_ref().map(|h| histogram_summary(h)),
        round_trip_ms: stats.round_trip.as_ref().map(|h| histogram_summary(h)),
        phases_ms: phases_summary(&stats.phases),
        rps: per_sec(stats.requests),
        bytes_received: stats.bytes_received,
        bytes_sent: stats.bytes_sent,
        received_per_sec: per_sec(stats.bytes_received),
        sent_per_sec: per_sec(stats.bytes_sent),
        messages: (stats.messages_sent + stats.messages_received > 0).then(|| MessagesSummary {
            sent: stats.messages_sent,
            received: stats.messages_received,
            received_per_sec: per_sec(stats.messages_received),
        }),
    }
}

/// gRPC and WebSocket steps: messages each way, and a WebSocket's round trips (a send to its
/// matching message).
fn write_messages(report: &Report, out: &mut String) {
    let steps: Vec<&StepSummary> = report.steps.iter().filter(|s| s.messages.is_some()).collect();
    if steps.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nmessages:");
    for s in steps {
        let m = s.messages.as_ref().expect("filtered");
        let _ = write!(
            out,
            "  {}: sent {}, received {} ({:.1}/s)",
            step_label(report, s),
            m.sent,
            m.received,
            m.received_per_sec
        );
        if let Some(rt) = &s.round_trip_ms {
            let _ = write!(out, "; round trip ms p50 {:.3}, p95 {:.3}, p99 {:.3}", rt.p50, rt.p95, rt.p99);
        }
        out.push('\n');
    }
}

/// One summary per `group` block (a group that never ran has zeros).
fn summarize_groups(keys: &[StepKey], groups: &[StepStats], seconds: f64) -> Vec<StepSummary> {
    let none = StepStats::default();
    keys.iter()
        .enumerate()
        .map(|(i, key)| {
            summarize(groups.get(i).unwrap_or(&none), seconds, Some(key.scenario.clone()), Some(key.step.clone()))
        })
        .collect()
}

/// Builds the report of a finished run. `generator` carries the process's own CPU and memory.
pub fn build_report(
    plan: &Plan,
    outcome: &RunOutcome,
    builtin_target: bool,
    generator: GeneratorFacts,
    baseline: Baseline<'_>,
) -> Report {
    let seconds = outcome.duration.as_secs_f64();
    let steps = summarize_steps(&plan.step_keys, &outcome.metrics.steps, seconds);
    let groups = summarize_groups(&plan.group_keys, &outcome.metrics.groups, seconds);
    let total = summarize_total(&outcome.metrics.steps, seconds);
    let started_at = time::OffsetDateTime::from(outcome.started_at)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let timeline = outcome.timeline.clone();
    let error_samples = error_sample_reports(plan, outcome);
    let checks = check_summaries(plan, outcome);
    let measured = Measured::new(&plan.step_keys, &plan.group_keys, &outcome.metrics);
    let thresholds = judge_thresholds(&plan.thresholds, &measured, seconds, baseline);
    let mut generator = generator;
    if total.requests > 0 {
        generator.cpu_micros_per_request = round3(generator.cpu_seconds * 1e6 / total.requests as f64);
    }
    let schedule = schedule_facts(plan, outcome, &total);
    let saturated = saturation(schedule.as_ref(), &generator, outcome.threads);
    Report {
        groups,
        schema_version: REPORT_SCHEMA_VERSION,
        name: plan.name.clone(),
        started_at,
        run: RunFacts {
            loadtest: None,
            executor: plan.executor_name(),
            duration_seconds: round3(seconds),
            planned_duration_seconds: plan.planned_duration().map(|d| round3(d.as_secs_f64())),
            vus_max: plan.max_vus(),
            threads: outcome.threads,
            iterations: outcome.metrics.iterations.iter().sum(),
            interrupted: outcome.interrupted,
            aborted: outcome.aborted.clone(),
            schedule,
            saturated,
            source_addresses_spread: Some(outcome.source_addresses_spread).filter(|n| *n > 0),
            base_url: plan.base_url.clone(),
            builtin_target,
            generator,
            load_changes: outcome.load_changes.clone(),
        },
        total,
        steps,
        scenarios: plan
            .scenarios
            .iter()
            .zip(&outcome.metrics.iterations)
            .map(|(s, n)| ScenarioSummary { name: s.name.clone(), iterations: *n })
            .collect(),
        timeline,
        checks,
        error_samples,
        thresholds,
        runners: Vec::new(),
        trend: Vec::new(),
        capacity: None,
        omitted: Vec::new(),
    }
}

/// Every step's summary together, and one per step (in the order of `keys`), of cumulative
/// `steps` over `seconds`: what a live view shows before the report exists.
pub fn live_summaries(keys: &[StepKey], steps: &[StepStats], seconds: f64) -> (StepSummary, Vec<StepSummary>) {
    (summarize_total(steps, seconds), summarize_steps(keys, steps, seconds))
}

/// One summary per step, in the plan's order of step keys.
fn summarize_steps(keys: &[StepKey], steps: &[StepStats], seconds: f64) -> Vec<StepSummary> {
    keys.iter()
        .zip(steps)
        .map(|(key, stats)| summarize(stats, seconds, Some(key.scenario.clone()), Some(key.step.clone())))
        .collect()
}

/// The summary of every step's requests together (no scenario, no step).
fn summarize_total(steps: &[StepStats], seconds: f64) -> StepSummary {
    let mut total_stats = StepStats::default();
    for s in steps {
        total_stats.merge(s);
    }
    summarize(&total_stats, seconds, None, None)
}

/// The run's error samples, each named by its scenario and step.
fn error_sample_reports(plan: &Plan, outcome: &RunOutcome) -> Vec<ErrorSampleReport> {
    outcome
        .error_samples
        .iter()
        .map(|e| ErrorSampleReport {
            scenario: plan.step_keys[e.metric].scenario.clone(),
            step: plan.step_keys[e.metric].step.clone(),
            kind: e.kind,
            message: e.message.clone(),
            request: e.request.clone(),
            response: e.response.clone(),
        })
        .collect()
}

/// Each named check's passes and failures, in the order of the flows (setup, init, the
/// scenarios, teardown) and of their steps.
fn check_summaries(plan: &Plan, outcome: &RunOutcome) -> Vec<CheckSummary> {
    [plan.setup.as_ref(), plan.init.as_ref()]
        .into_iter()
        .chain(plan.scenarios.iter())
        .chain(std::iter::once(plan.teardown.as_ref()))
        .flat_map(|sc| sc.steps.iter())
        .flat_map(|step| {
            let stats = &outcome.metrics.steps[step.metric];
            step.checks.iter().enumerate().map(move |(i, c)| {
                let [passes, fails] = stats.checks.get(i).copied().unwrap_or([0, 0]);
                CheckSummary {
                    scenario: plan.step_keys[step.metric].scenario.clone(),
                    step: step.name.clone(),
                    name: c.name.clone(),
                    passes,
                    fails,
                }
            })
        })
        .collect()
}

/// The open models' schedule against what ran: rates, dropped, waiting and cut-off
/// iterations, lag, and a hint when iterations were dropped (none without an open model).
fn schedule_facts(plan: &Plan, outcome: &RunOutcome, total: &StepSummary) -> Option<ScheduleFacts> {
    let open: Vec<_> = plan.groups.iter().filter(|g| g.load.is_open()).collect();
    (!open.is_empty()).then(|| {
        // With the rate changes and pauses taken while it ran.
        let scheduled: u64 = open
            .iter()
            .map(|g| crate::compile::schedule::OpenSchedule::new(&g.load, &outcome.load_changes).scheduled())
            .sum();
        let ran: u64 = open
            .iter()
            .flat_map(|g| &g.scenarios)
            .map(|&s| outcome.metrics.iterations.get(s).copied().unwrap_or(0))
            .sum();
        let secs = open.iter().filter_map(|g| g.load.planned_duration()).max().unwrap_or_default().as_secs_f64();
        let per_sec = |n: u64| if secs > 0.0 { round3(n as f64 / secs) } else { 0.0 };
        let m = &outcome.metrics;
        let dropped: u64 = m.dropped.iter().sum();
        let max_vus: u32 = open.iter().map(|g| g.load.max_vus()).sum();
        // The time an iteration holds its VU: its requests' service time (think time left out).
        let service_ms = total.service_ms.as_ref().map_or(total.latency_ms.mean, |s| s.mean);
        let per_iteration_ms = if ran > 0 { service_ms * total.requests as f64 / ran as f64 } else { 0.0 };
        let hint = (dropped > 0).then(|| pool_exhausted_hint(per_sec(scheduled), max_vus, per_iteration_ms, m));
        ScheduleFacts {
            target_rate: per_sec(scheduled),
            achieved_rate: per_sec(ran),
            scheduled_iterations: scheduled,
            dropped_iterations: dropped,
            dropped_by_reason: m.dropped_by_reason_named(),
            waited_iterations: m.queue_wait.len(),
            // Every started iteration records its lag once; those that did not complete were
            // cut off.
            interrupted_iterations: m.schedule_lag.len().saturating_sub(ran),
            wait_ms: (!m.queue_wait.is_empty()).then(|| histogram_summary(&m.queue_wait)),
            lag_ms: histogram_summary(&m.schedule_lag),
            hint,
        }
    })
}

/// Why the generator's figures are suspect, if they are: iterations started late, or its CPU
/// near the whole of its `threads` worker cores.
fn saturation(schedule: Option<&ScheduleFacts>, generator: &GeneratorFacts, threads: usize) -> Option<String> {
    let mut saturated = Vec::new();
    if let Some(s) = schedule
        && s.lag_ms.p99 > SATURATION_LAG_P99_MS
    {
        saturated.push(format!(
            "schedule lag p99 {:.1} ms > {SATURATION_LAG_P99_MS} ms: iterations started late",
            s.lag_ms.p99
        ));
    }
    let cores = threads as f64;
    if generator.cpu_percent > SATURATION_CPU_SHARE * 100.0 * cores {
        saturated.push(format!(
            "generator CPU {:.0}% of {} worker core(s) > {:.0}%",
            generator.cpu_percent,
            threads,
            SATURATION_CPU_SHARE * 100.0 * cores
        ));
    }
    (!saturated.is_empty())
        .then(|| format!("the generator saturated ({}); its figures are suspect", saturated.join("; ")))
}

/// Why iterations were dropped, and what to change: each drop means every one of the open
/// groups' `max_vus` VUs was busy. By Little's law a rate of `rate`/s of iterations that each
/// hold a VU `mean_ms` keeps `rate × mean_ms / 1000` VUs busy on average.
fn pool_exhausted_hint(rate: f64, max_vus: u32, mean_ms: f64, m: &WorkerMetrics) -> String {
    let [full, expired, ended] = DropReason::ALL.map(|r| m.dropped_by_reason[r as usize]);
    let mut why = Vec::new();
    if full > 0 {
        why.push(format!("{full} found `maxWaiting` iterations already waiting"));
    }
    if expired > 0 {
        why.push(format!("{expired} waited `maxWait` in vain"));
    }
    if ended > 0 {
        why.push(format!("{ended} were still waiting when the run ended"));
    }
    let busy = rate * mean_ms / 1000.0;
    format!(
        "the VU pool was exhausted: all {max_vus} VUs (maxVUs) were busy ({}); at {rate:.0} iterations/s that each held \
         a VU {mean_ms:.2} ms on average (service time) about {busy:.0} VUs are busy on average (Little's law): raise maxVUs (one \
         connection each) well above that, let iterations wait longer (maxWaiting, maxWait), or lower the rate if \
         the target cannot answer faster",
        why.join(", ")
    )
}

/// A step's name in a table: `scenario/step` when the report has more than one scenario.
pub fn step_label(report: &Report, s: &StepSummary) -> String {
    match (&s.scenario, &s.step) {
        (Some(sc), Some(st)) if report.scenarios.len() > 1 => format!("{sc}/{st}"),
        (_, Some(st)) => st.clone(),
        _ => String::new(),
    }
}

/// The terminal summary: run facts, then one row per step and a total.
pub fn render_table(report: &Report) -> String {
    let mut out = String::new();
    write_run_facts(report, &mut out);
    write_steps(report, &mut out);
    write_messages(report, &mut out);
    write_errors(report, &mut out);
    write_checks(report, &mut out);
    write_thresholds(report, &mut out);
    out.push_str(&status_lines(&report.total));
    if let Some(c) = &report.capacity {
        out.push_str(&render_capacity(c));
    }
    out
}

/// The run's facts above the table: its name and load model, duration, VUs and the
/// generator, the target, why it was aborted, the schedule, and warnings; then a blank line.
fn write_run_facts(report: &Report, out: &mut String) {
    let r = &report.run;
    let _ = writeln!(out, "\n{} · {}{}", report.name, r.executor, if r.interrupted { " · INTERRUPTED" } else { "" });
    let _ = writeln!(
        out,
        "duration {:.2}s · VUs {} (of {}) · threads {} · iterations {} · generator CPU {:.1}% ({:.2} µs/req) · peak RSS {}",
        r.duration_seconds,
        r.generator.peak_vus,
        r.vus_max,
        r.threads,
        r.iterations,
        r.generator.cpu_percent,
        r.generator.cpu_micros_per_request,
        human_bytes(r.generator.peak_rss_bytes as f64),
    );
    if let Some(base) = &r.base_url {
        let _ = writeln!(out, "target {base}{}", if r.builtin_target { " (built-in)" } else { "" });
    }
    if let Some(why) = &r.aborted {
        let _ = writeln!(out, "ABORTED: {why}");
    }
    if let Some(s) = &r.schedule {
        write_schedule(s, out);
    }
    if let Some(why) = &r.saturated {
        let _ = writeln!(out, "WARNING: {why}");
    }
    if let Some(n) = r.source_addresses_spread {
        let _ = writeln!(
            out,
            "note: the system's ports for the loopback target ran out; new connections were spread over {n} \
             source address(es) from 127.0.0.2"
        );
    }
    let _ = writeln!(out);
}

/// An open model's schedule: the rates, dropped iterations and lag, then those that waited
/// for a VU, why iterations were dropped, those cut off, and the hint.
fn write_schedule(s: &ScheduleFacts, out: &mut String) {
    let _ = writeln!(
        out,
        "schedule: {:.1} iterations/s achieved of {:.1}/s · {} of {} dropped · lag p50 {:.3} ms, p99 {:.3} ms, max \
         {:.3} ms (latency counts from the scheduled start)",
        s.achieved_rate,
        s.target_rate,
        s.dropped_iterations,
        s.scheduled_iterations,
        s.lag_ms.p50,
        s.lag_ms.p99,
        s.lag_ms.max
    );
    if let Some(w) = &s.wait_ms {
        let _ = writeln!(
            out,
            "waited for a free VU: {} iterations · wait p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (in their latency)",
            s.waited_iterations, w.p50, w.p99, w.max
        );
    }
    if !s.dropped_by_reason.is_empty() {
        let reasons: Vec<String> = s.dropped_by_reason.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(out, "dropped: {}", reasons.join(", "));
    }
    if s.interrupted_iterations > 0 {
        let _ = writeln!(
            out,
            "interrupted: {} iterations started but did not complete (cut off at the hard stop, gracefulStop)",
            s.interrupted_iterations
        );
    }
    if let Some(hint) = &s.hint {
        let _ = writeln!(out, "HINT: {hint}");
    }
}

/// The table: a row per step, the total between rules, the groups' transactions under it;
/// then what its figures mean.
fn write_steps(report: &Report, out: &mut String) {
    let headers = [
        "step", "samples", "mean", "min", "max", "p50", "p75", "p90", "p95", "p99", "p99.9", "req/s", "errors",
        "error %", "recv/s", "sent/s",
    ];
    let (rows, total_at) = step_rows(report);
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String], out: &mut String| {
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == 0 {
                let _ = write!(out, "{cell:<w$}");
            } else {
                let _ = write!(out, "  {cell:>w$}");
            }
        }
        out.push('\n');
    };
    line(&headers.iter().map(|h| h.to_string()).collect::<Vec<_>>(), out);
    let _ = writeln!(out, "{}", "-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1)));
    for (i, row) in rows.iter().enumerate() {
        if i == total_at || i == total_at + 1 {
            let _ = writeln!(out, "{}", "-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1)));
        }
        line(row, out);
    }
    let _ = writeln!(out, "latency in ms; samples = requests sent; error % = errors / samples");
    if !report.groups.is_empty() {
        let _ = writeln!(
            out,
            "a group's samples are its transactions, its latency their durations (first send to the end of its last \
             step, think times included), its errors the transactions with a failed step"
        );
    }
}

/// The table's rows (each step's, the total's, each group's) and the total's index.
fn step_rows(report: &Report) -> (Vec<Vec<String>>, usize) {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let multi = report.scenarios.len() > 1;
    for s in &report.steps {
        rows.push(table_row(step_label(report, s), s));
    }
    rows.push(table_row("TOTAL".into(), &report.total));
    let total_at = rows.len() - 1;
    // The `group` blocks' transactions, under the total (they are not requests).
    for g in &report.groups {
        let name = match (&g.scenario, &g.step) {
            (Some(sc), Some(name)) if multi => format!("group {sc}/{name}"),
            (_, Some(name)) => format!("group {name}"),
            _ => String::new(),
        };
        let mut row = table_row(name, g);
        row.truncate(row.len() - 2);
        row.extend(["-".to_string(), "-".to_string()]);
        rows.push(row);
    }
    (rows, total_at)
}

/// The run's errors by kind, and a line per error sample.
fn write_errors(report: &Report, out: &mut String) {
    if report.total.errors_by_kind.is_empty() {
        return;
    }
    let kinds: Vec<String> = report.total.errors_by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let _ = writeln!(out, "\nerrors by kind: {}", kinds.join(", "));
    for e in &report.error_samples {
        let _ = writeln!(out, "  {}/{} {}: {}", e.scenario, e.step, e.kind.name(), e.message);
    }
}

/// The checks' share passed, and a line per check.
fn write_checks(report: &Report, out: &mut String) {
    if report.checks.is_empty() {
        return;
    }
    let passes: u64 = report.checks.iter().map(|c| c.passes).sum();
    let fails: u64 = report.checks.iter().map(|c| c.fails).sum();
    let rate = if passes + fails > 0 { passes as f64 * 100.0 / (passes + fails) as f64 } else { 100.0 };
    let _ = writeln!(out, "\nchecks: {rate:.2}% passed ({passes} passed, {fails} failed)");
    for c in &report.checks {
        let mark = if c.fails == 0 { "✓" } else { "✗" };
        let _ =
            writeln!(out, "  {mark} {}/{}: {}  ({} passed, {} failed)", c.scenario, c.step, c.name, c.passes, c.fails);
    }
}

/// How many thresholds passed, and a line per threshold with what was measured.
fn write_thresholds(report: &Report, out: &mut String) {
    if report.thresholds.is_empty() {
        return;
    }
    let failed = report.thresholds.iter().filter(|v| !v.passed).count();
    let _ = writeln!(out, "\nthresholds: {} passed, {failed} failed", report.thresholds.len() - failed);
    for v in &report.thresholds {
        let mark = if v.passed { "✓" } else { "✗" };
        let _ = write!(out, "  {mark} {}  (actual {})", v.threshold, v.actual_text);
        // Why it could not be judged (no baseline, nothing measured): on the line it fails.
        match &v.message {
            Some(why) => {
                let _ = writeln!(out, ": {why}");
            }
            None => out.push('\n'),
        }
    }
}

/// What the answers were, one line per protocol: HTTP status codes, gRPC statuses (in code
/// order: OK first) and WebSocket close codes; a line only for what the run had.
pub fn status_lines(total: &StepSummary) -> String {
    let mut out = String::new();
    for (label, tally) in status_tallies(total) {
        let counts: Vec<String> = tally.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
        let _ = writeln!(out, "{label}: {}", counts.join(", "));
    }
    out
}

/// One protocol's tally: its label, and counts by status (name or code).
pub type Tally<'a> = (&'static str, Vec<(&'a str, u64)>);

/// A summary's tallies by protocol, each labelled, in their natural order; only those with
/// counts.
pub fn status_tallies(s: &StepSummary) -> Vec<Tally<'_>> {
    fn listed(m: &std::collections::BTreeMap<String, u64>) -> Vec<(&str, u64)> {
        m.iter().map(|(k, n)| (k.as_str(), *n)).collect()
    }
    let mut grpc = listed(&s.grpc_statuses);
    grpc.sort_by_key(|(name, _)| crate::stats::metrics::grpc_status_code(name).unwrap_or(u16::MAX));
    let mut close = listed(&s.ws_close_codes);
    close.sort_by_key(|(code, _)| code.parse::<u16>().unwrap_or(u16::MAX));
    [("HTTP status codes", listed(&s.status_codes)), ("gRPC statuses", grpc), ("WebSocket close codes", close)]
        .into_iter()
        .filter(|(_, t)| !t.is_empty())
        .collect()
}

/// One plateau as the CLI prints it when it ends.
pub fn plateau_line(p: &PlateauResult) -> String {
    let failed: Vec<&str> = p.thresholds.iter().filter(|v| !v.passed).map(|v| v.threshold.as_str()).collect();
    let mut why = Vec::new();
    if !failed.is_empty() {
        why.push(format!("failed: {}", failed.join(", ")));
    }
    if p.achieved_rate < p.rate * 0.99 {
        why.push(format!("only {:.1}/s started", p.achieved_rate));
    }
    if let Some(s) = &p.saturated {
        why.push(format!("generator: {s}"));
    }
    format!(
        "plateau {}{:.1}/s: achieved {:.1}/s, p50 {:.3} ms, p99 {:.3} ms, errors {:.2}% → {}{}",
        if p.refine { "(refine) " } else { "" },
        p.rate,
        p.achieved_rate,
        p.latency_ms.p50,
        p.latency_ms.p99,
        p.error_rate * 100.0,
        if p.passed { "pass" } else { "FAIL" },
        if why.is_empty() { String::new() } else { format!(" ({})", why.join("; ")) }
    )
}

/// The capacity search's table (one row per plateau, the curve) and its answer.
pub fn render_capacity(c: &CapacityResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "
capacity search: {} plateau(s); stopped: {}",
        c.plateaus.len(),
        c.stopped
    );
    let headers = ["rate/s", "achieved/s", "requests", "p50", "p90", "p99", "max", "error %", "dropped", "verdict"];
    let rows: Vec<Vec<String>> = c
        .plateaus
        .iter()
        .map(|p| {
            vec![
                format!("{:.1}{}", p.rate, if p.refine { "*" } else { "" }),
                format!("{:.1}", p.achieved_rate),
                p.requests.to_string(),
                format!("{:.3}", p.latency_ms.p50),
                format!("{:.3}", p.latency_ms.p90),
                format!("{:.3}", p.latency_ms.p99),
                format!("{:.3}", p.latency_ms.max),
                format!("{:.2}", p.error_rate * 100.0),
                p.dropped_iterations.to_string(),
                if p.passed {
                    "pass".to_string()
                } else if p.saturated.is_some() {
                    "FAIL (generator)".to_string()
                } else {
                    let failed: Vec<&str> =
                        p.thresholds.iter().filter(|v| !v.passed).map(|v| v.threshold.as_str()).collect();
                    if failed.is_empty() { "FAIL (rate)".to_string() } else { format!("FAIL: {}", failed.join(", ")) }
                },
            ]
        })
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String], out: &mut String| {
        let last = cells.len() - 1;
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            let _ = match i {
                0 => write!(out, "{cell:>w$}"),
                _ if i == last => write!(out, "  {cell}"),
                _ => write!(out, "  {cell:>w$}"),
            };
        }
        out.push('\n');
    };
    line(&headers.iter().map(|h| h.to_string()).collect::<Vec<_>>(), &mut out);
    for row in &rows {
        line(row, &mut out);
    }
    let _ = writeln!(out, "latency in ms, after each plateau's warm-up; * a refining plateau");
    match c.capacity {
        Some(rate) => {
            let _ = writeln!(
                out,
                "\nCAPACITY: {}{rate:.1} iterations/s (p99 {:.3} ms, errors {:.2}%)",
                if c.lower_bound { "at least " } else { "" },
                c.p99_ms.unwrap_or_default(),
                c.error_rate.unwrap_or_default() * 100.0
            );
        }
        None => {
            let _ = writeln!(out, "\nCAPACITY: none found: not even the first plateau met every threshold");
        }
    }
    let _ = writeln!(out, "limited by: {}", c.limited_by);
    out
}

/// The phases table (`stampede run --phases`): per step, the connections opened and the
/// p50 and p99 of each phase, in ms.
pub fn render_phases(report: &Report) -> String {
    let headers = [
        "step",
        "conns",
        "dns p50",
        "dns p99",
        "connect p50",
        "connect p99",
        "tls p50",
        "tls p99",
        "ttfb p50",
        "ttfb p99",
        "receive p50",
        "receive p99",
    ];
    let row = |name: String, s: &StepSummary| {
        let p = &s.phases_ms;
        let mut cells = vec![name, p.connect.as_ref().map_or(0, |c| c.samples).to_string()];
        for phase in [&p.dns, &p.connect, &p.tls, &p.ttfb, &p.receive] {
            match phase {
                Some(x) => cells.extend([format!("{:.3}", x.latency.p50), format!("{:.3}", x.latency.p99)]),
                None => cells.extend(["-".to_string(), "-".to_string()]),
            }
        }
        cells
    };
    let mut rows: Vec<Vec<String>> = report.steps.iter().map(|s| row(step_label(report, s), s)).collect();
    rows.push(row("TOTAL".into(), &report.total));
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::from("\nlatency phases (ms; dns, connect and tls once per new connection)\n");
    let rule = "-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1));
    let header: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for (i, r) in std::iter::once(&header).chain(&rows).enumerate() {
        if i == 1 || i == rows.len() {
            let _ = writeln!(out, "{rule}");
        }
        for (j, (cell, w)) in r.iter().zip(&widths).enumerate() {
            if j == 0 {
                let _ = write!(out, "{cell:<w$}");
            } else {
                let _ = write!(out, "  {cell:>w$}");
            }
        }
        out.push('\n');
    }
    out
}

fn table_row(name: String, s: &StepSummary) -> Vec<String> {
    let l = &s.latency_ms;
    let f = |x: f64| format!("{x:.3}");
    vec![
        name,
        s.requests.to_string(),
        f(l.mean),
        f(l.min),
        f(l.max),
        f(l.p50),
        f(l.p75),
        f(l.p90),
        f(l.p95),
        f(l.p99),
        f(l.p999),
        format!("{:.1}", s.rps),
        s.errors.to_string(),
        format!("{:.2}", s.error_rate * 100.0),
        format!("{}/s", human_bytes(s.received_per_sec)),
        format!("{}/s", human_bytes(s.sent_per_sec)),
    ]
}

/// `1.2 MB`, `640 B`, decimal units.
pub fn human_bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n;
    let mut u = 0;
    while v >= 1000.0 && u < UNITS.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 { format!("{v:.0} {}", UNITS[u]) } else { format!("{v:.1} {}", UNITS[u]) }
}
