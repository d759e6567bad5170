//! The page's tables: the run's facts, thresholds, steps and groups, the comparison with a
//! baseline, runners, phases, messages, statuses, checks and error samples.

use std::fmt::Write as _;

use stampede_model::report::{LatencySummary, PhaseSummary, Report, StepSummary};

use super::format::{bytes, esc, ms, pct};

/// The Run section: when, how long, the load model, the target, requests and errors, the
/// generator, and an open model's schedule.
pub(super) fn facts(h: &mut String, r: &Report) {
    let run = &r.run;
    let mut rows: Vec<(&str, String)> = vec![
        ("Started", r.started_at.clone()),
        ("Duration", format!("{:.1} s", run.duration_seconds)),
        (
            "Load model",
            format!(
                "{}, up to {} VUs ({} at the peak), {} threads",
                run.executor, run.vus_max, run.generator.peak_vus, run.threads
            ),
        ),
        ("Target", run.base_url.clone().unwrap_or_else(|| "the URLs in the file".into())),
        (
            "Requests",
            format!(
                "{} ({:.1}/s), {} errors ({})",
                r.total.requests,
                r.total.rps,
                r.total.errors,
                pct(r.total.error_rate)
            ),
        ),
        ("Iterations", run.iterations.to_string()),
        (
            "Generator",
            format!(
                "{:.1} % of a core, {:.1} µs CPU per request, peak RSS {}",
                run.generator.cpu_percent,
                run.generator.cpu_micros_per_request,
                bytes(run.generator.peak_rss_bytes)
            ),
        ),
    ];
    if let Some(s) = &run.schedule {
        rows.push((
            "Schedule",
            format!(
                "{:.1}/s achieved of {:.1}/s; {} of {} iterations dropped; lag p99 {:.2} ms",
                s.achieved_rate, s.target_rate, s.dropped_iterations, s.scheduled_iterations, s.lag_ms.p99
            ),
        ));
        if let Some(w) = &s.wait_ms {
            rows.push((
                "Waited for a VU",
                format!(
                    "{} iterations; wait p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (in their latency)",
                    s.waited_iterations, w.p50, w.p99, w.max
                ),
            ));
        }
        if !s.dropped_by_reason.is_empty() {
            let reasons: Vec<String> = s.dropped_by_reason.iter().map(|(k, n)| format!("{k} {n}")).collect();
            rows.push(("Dropped by reason", reasons.join(", ")));
        }
        if s.interrupted_iterations > 0 {
            rows.push((
                "Interrupted",
                format!(
                    "{} iterations started but did not complete (cut off at the hard stop)",
                    s.interrupted_iterations
                ),
            ));
        }
        if let Some(hint) = &s.hint {
            rows.push(("Hint", hint.clone()));
        }
    }
    if let Some(why) = &run.saturated {
        rows.push(("Saturated", format!("the generator could not keep up: {why}")));
    }
    if let Some(lt) = &run.loadtest {
        rows.insert(0, ("LoadTest", format!("{lt}, {} runners", r.runners.len())));
    }
    h.push_str("<section><h2>Run</h2><table class=\"facts\">");
    for (k, v) in rows {
        let _ = write!(h, "<tr><th>{k}</th><td>{}</td></tr>", esc(&v));
    }
    h.push_str("</table></section>\n");
}

/// Each threshold with what was measured and its verdict.
pub(super) fn thresholds(h: &mut String, r: &Report) {
    if r.thresholds.is_empty() {
        return;
    }
    h.push_str("<section><h2>Thresholds</h2><table><tr><th>threshold</th><th>measured</th><th>verdict</th></tr>");
    for v in &r.thresholds {
        let measured = match &v.message {
            Some(why) => format!("{} ({why})", v.actual_text),
            None => v.actual_text.clone(),
        };
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"{}\">{}</td></tr>",
            esc(&v.threshold),
            esc(&measured),
            if v.passed { "passed" } else { "failed" },
            if v.passed { "passed" } else { "failed" }
        );
    }
    h.push_str("</table></section>\n");
}

/// A step's name in a table: `scenario / step`, or `total`.
fn step_name(s: &StepSummary) -> String {
    match (&s.scenario, &s.step) {
        (Some(sc), Some(st)) => format!("{sc} / {st}"),
        _ => "total".into(),
    }
}

/// The steps' latency table and the total, then the groups' when the run had any.
pub(super) fn steps_table(h: &mut String, r: &Report) {
    h.push_str(
        "<section><h2>Steps</h2><table><tr><th>step</th><th>requests</th><th>errors</th><th>rps</th>\
         <th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>p99.9</th><th>max</th></tr>",
    );
    for s in r.steps.iter().chain(std::iter::once(&r.total)) {
        latency_row(h, s);
    }
    h.push_str("</table><p class=\"note\">Latencies in milliseconds");
    if r.run.schedule.is_some() {
        h.push_str(", from each iteration's scheduled start (open model: no coordinated omission)");
    }
    h.push_str(".</p></section>\n");
    if !r.groups.is_empty() {
        groups_table(h, r);
    }
}

/// One row of the steps' or the groups' table: name, count, errors, rate, percentiles.
fn latency_row(h: &mut String, s: &StepSummary) {
    let l = &s.latency_ms;
    let class = if s.scenario.is_none() { " class=\"total\"" } else { "" };
    let _ = write!(
        h,
        "<tr{class}><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{} ({})</td><td class=\"num\">{:.1}</td>",
        esc(&step_name(s)),
        s.requests,
        s.errors,
        pct(s.error_rate),
        s.rps
    );
    for v in [l.p50, l.p90, l.p95, l.p99, l.p999, l.max] {
        let _ = write!(h, "<td class=\"num\">{}</td>", ms(v));
    }
    h.push_str("</tr>");
}

/// The `group` blocks' transactions.
fn groups_table(h: &mut String, r: &Report) {
    h.push_str(
        "<section><h2>Groups</h2><table><tr><th>group</th><th>transactions</th><th>failed</th><th>per s</th>\
         <th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>p99.9</th><th>max</th></tr>",
    );
    for g in &r.groups {
        latency_row(h, g);
    }
    h.push_str(
        "</table><p class=\"note\">A transaction is one run of a <code>group</code> block: from its first send to the \
         end of its last step, think times included; failed when one of its steps failed.</p></section>\n",
    );
}

/// Each step's and the total's figures beside the baseline's, with the change.
pub(super) fn baseline_table(h: &mut String, r: &Report, base: &Report) {
    let _ = write!(
        h,
        "<section><h2>Compared with the baseline</h2><p class=\"note\">Baseline: {} (started {}). Each cell: this \
         run's figure, then the baseline's and the change (relative; percentage points for errors).</p>\
         <table><tr><th>step</th><th>rps</th><th>errors %</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th>\
         <th>p99.9</th><th>max</th><th>requests</th></tr>",
        esc(&base.name),
        esc(&base.started_at)
    );
    for s in crate::output::compare::compare(base, r) {
        let class = if s.step == "total" { " class=\"total\"" } else { "" };
        if !(s.in_base && s.in_new) {
            let _ = write!(
                h,
                "<tr{class}><td>{}</td><td colspan=\"9\">only in {}</td></tr>",
                esc(&s.step),
                if s.in_base { "the baseline" } else { "this run" }
            );
            continue;
        }
        let _ = write!(h, "<tr{class}><td>{}</td>", esc(&s.step));
        for c in &s.changes {
            let _ = write!(
                h,
                "<td class=\"num\">{}<br><small class=\"note\">{} · {}</small></td>",
                c.value(c.new),
                c.value(c.base),
                c.text()
            );
        }
        h.push_str("</tr>");
    }
    h.push_str("</table></section>\n");
}

/// A cluster run: one row per runner, to see one that lagged, failed or saturated.
pub(super) fn runners(h: &mut String, r: &Report) {
    if r.runners.is_empty() {
        return;
    }
    h.push_str(
        "<section><h2>Runners</h2><table><tr><th>runner</th><th>state</th><th>started</th><th>seconds</th>\
         <th>requests</th><th>errors</th><th>rps</th><th>p50</th><th>p99</th><th>max</th><th>CPU</th>\
         <th>peak RSS</th><th>note</th></tr>",
    );
    for x in &r.runners {
        let note = [x.saturated.as_deref(), x.message.as_deref()].into_iter().flatten().collect::<Vec<_>>().join("; ");
        let _ = write!(
            h,
            "<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td class=\"num\">{:.1}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{:.1}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{:.0} %</td><td class=\"num\">{}</td><td>{}</td></tr>",
            x.index,
            esc(&x.state),
            esc(x.started_at.as_deref().unwrap_or("–")),
            x.duration_seconds,
            x.requests,
            x.errors,
            x.rps,
            ms(x.p50_ms),
            ms(x.p99_ms),
            ms(x.max_ms),
            x.cpu_percent,
            bytes(x.peak_rss_bytes),
            esc(&note)
        );
    }
    h.push_str("</table></section>\n");
}

/// The run's phases (DNS, connect, TLS, time to first byte, receive): samples and latency.
pub(super) fn phases(h: &mut String, r: &Report) {
    let rows: Vec<(&str, &PhaseSummary)> = [
        ("DNS", r.total.phases_ms.dns.as_ref()),
        ("connect", r.total.phases_ms.connect.as_ref()),
        ("TLS", r.total.phases_ms.tls.as_ref()),
        ("time to first byte", r.total.phases_ms.ttfb.as_ref()),
        ("receive", r.total.phases_ms.receive.as_ref()),
    ]
    .into_iter()
    .filter_map(|(n, p)| p.map(|p| (n, p)))
    .collect();
    if rows.is_empty() {
        return;
    }
    h.push_str(
        "<section><h2>Phases</h2><table><tr><th>phase</th><th>samples</th><th>p50</th><th>p90</th>\
         <th>p99</th><th>max</th></tr>",
    );
    for (name, p) in rows {
        let l: &LatencySummary = &p.latency;
        let _ = write!(
            h,
            "<tr><td>{name}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            p.samples,
            ms(l.p50),
            ms(l.p90),
            ms(l.p99),
            ms(l.max)
        );
    }
    h.push_str("</table></section>\n");
}

/// gRPC and WebSocket steps: messages each way, and WebSocket round trips.
pub(super) fn messages(h: &mut String, r: &Report) {
    let steps: Vec<&StepSummary> = r.steps.iter().filter(|s| s.messages.is_some()).collect();
    if steps.is_empty() {
        return;
    }
    h.push_str(
        "<section><h2>Messages</h2><p class=\"note\">gRPC calls' and WebSocket sessions' messages; a round trip \
         is a WebSocket send to its matching message.</p><table><tr><th>step</th><th>sent</th><th>received</th>\
         <th>received per s</th><th>round trip p50</th><th>p99</th></tr>",
    );
    for s in steps {
        let m = s.messages.as_ref().expect("filtered");
        let (p50, p99) = s.round_trip_ms.as_ref().map_or(("–".into(), "–".into()), |l| (ms(l.p50), ms(l.p99)));
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.1}</td>\
             <td class=\"num\">{p50}</td><td class=\"num\">{p99}</td></tr>",
            esc(&step_name(s)),
            m.sent,
            m.received,
            m.received_per_sec
        );
    }
    h.push_str("</table></section>\n");
}

/// What the answers were, by step and protocol: HTTP status codes, gRPC statuses, WebSocket
/// close codes (the columns a run had).
pub(super) fn statuses(h: &mut String, r: &Report) {
    use crate::output::report::{Tally, status_tallies};
    let rows: Vec<(&StepSummary, Vec<Tally<'_>>)> =
        r.steps.iter().chain(std::iter::once(&r.total)).map(|s| (s, status_tallies(s))).collect();
    let mut columns: Vec<&str> = Vec::new();
    for (label, _) in rows.iter().flat_map(|(_, t)| t) {
        if !columns.contains(label) {
            columns.push(label);
        }
    }
    if columns.is_empty() {
        return;
    }
    // In the report's order: HTTP, gRPC, WebSocket.
    columns
        .sort_by_key(|c| ["HTTP status codes", "gRPC statuses", "WebSocket close codes"].iter().position(|x| x == c));
    h.push_str(
        "<section><h2>Statuses</h2><p class=\"note\">HTTP answers by status code; gRPC calls by the status they \
         ended with (a gRPC call's HTTP/2 200 is not its answer); WebSocket sessions by their close code.</p>\
         <table><tr><th>step</th>",
    );
    for c in &columns {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("</tr>");
    for (s, tallies) in rows.iter().filter(|(_, t)| !t.is_empty()) {
        let class = if s.scenario.is_none() { " class=\"total\"" } else { "" };
        let _ = write!(h, "<tr{class}><td>{}</td>", esc(&step_name(s)));
        for c in &columns {
            let cell = tallies.iter().find(|(label, _)| label == c).map_or("–".to_string(), |(_, t)| {
                t.iter().map(|(k, n)| format!("{} ×{n}", esc(k))).collect::<Vec<_>>().join(", ")
            });
            let _ = write!(h, "<td>{cell}</td>");
        }
        h.push_str("</tr>");
    }
    h.push_str("</table></section>\n");
}

/// Each named check's passes and failures.
pub(super) fn checks(h: &mut String, r: &Report) {
    if r.checks.is_empty() {
        return;
    }
    h.push_str("<section><h2>Checks</h2><table><tr><th>step</th><th>check</th><th>passed</th><th>failed</th></tr>");
    for c in &r.checks {
        let _ = write!(
            h,
            "<tr><td>{} / {}</td><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num{}\">{}</td></tr>",
            esc(&c.scenario),
            esc(&c.step),
            esc(&c.name),
            c.passes,
            if c.fails > 0 { " failed" } else { "" },
            c.fails
        );
    }
    h.push_str("</table></section>\n");
}

/// Each error sample: what failed and why, the request and the answer.
pub(super) fn error_samples(h: &mut String, r: &Report) {
    if r.error_samples.is_empty() {
        return;
    }
    h.push_str("<section><h2>Error samples</h2>");
    for e in &r.error_samples {
        let _ = write!(
            h,
            "<details><summary>{} / {}: <b>{}</b> {}</summary><pre>{}</pre>",
            esc(&e.scenario),
            esc(&e.step),
            esc(&format!("{:?}", e.kind).to_lowercase()),
            esc(&e.message),
            esc(&e.request)
        );
        if let Some(resp) = &e.response {
            let _ = write!(h, "<pre>{}</pre>", esc(resp));
        }
        h.push_str("</details>");
    }
    h.push_str("</section>\n");
}
