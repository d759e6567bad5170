//! `stampede run --html`, `stampede report` and `stampede compare`: the HTML report's charts
//! and sections (an open model's schedule, a trend of runs, a capacity search), two runs
//! compared, and relative thresholds judged against a baseline run.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::commands::{stampede, text, write_scenario};

/// `--html` writes one self-contained file: no script, nothing fetched (no `src`, no `href`, no
/// `url(`), every chart draws one point per interval of the JSON report's timeline, the tables
/// hold the JSON's figures, and `stampede report run.json -o x.html` gives the same bytes.
#[test]
fn the_html_report_is_self_contained_and_its_charts_hold_every_interval() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        dir.path(),
        "name: html <report>\nbaseUrl: builtin\nload: {executor: constant-vus, vus: 2, duration: 3s}\n\
         scenarios:\n  - name: s\n    steps:\n      - {name: ok, request: {url: \"{{baseUrl}}/get\"}, check: {status: 200}, think: 5ms}\n      \
         - {name: broken, request: {url: \"{{baseUrl}}/status/500\"}, check: {status: 200}}\n\
         thresholds:\n  - \"errors{step:ok}.rate == 0%\"\n",
    );
    let (json, html) = run_with_reports(&scenario);
    let page = std::fs::read_to_string(&html).unwrap();
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();

    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    for fetching in ["<script", "src=", "url(", "@import"] {
        assert!(!page.contains(fetching), "the page would load something: {fetching}");
    }
    assert_eq!(page.matches("href=").count(), 1, "only the empty favicon");
    assert!(page.contains("<link rel=\"icon\" href=\"data:,\">"));
    // The scenario's name is escaped, not markup.
    assert!(page.contains("html &lt;report&gt;") && !page.contains("html <report>"));
    let intervals = report["timeline"].as_array().unwrap().len();
    assert!(intervals >= 2, "a 3 s run has several intervals: {intervals}");
    let charts = page.matches("<figure class=\"chart\">").count();
    assert_eq!(charts, 6, "throughput, latency, p99 by step, errors, VUs, distribution");
    assert!(!page.contains("chart empty"), "an empty chart");
    let series = chart_series(&page);
    let names: Vec<&str> = series.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["requests/s", "p50", "p90", "p99", "max", "s / broken", "s / ok", "all", "check", "VUs", "latency"]
    );
    for (name, points) in &series {
        if name.starts_with("s / ") {
            // A step's line has a point where the step had requests: every interval but,
            // perhaps, the last (the run's end may cut it to a few microseconds).
            let with_requests = report["timeline"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| {
                    p["steps"]
                        .as_array()
                        .is_some_and(|s| s.iter().any(|s| format!("s / {}", s["step"].as_str().unwrap()) == *name))
                })
                .count();
            assert_eq!(*points, with_requests, "series {name}");
            assert!(with_requests + 1 >= intervals, "series {name}: {with_requests} of {intervals}");
            continue;
        }
        let expected = if name == "latency" { 7 } else { intervals };
        assert_eq!(*points, expected, "series {name}: one point per interval (the distribution: 7 percentiles)");
    }
    // The tables show the JSON's figures.
    let total = &report["total"];
    assert!(page.contains(&format!("<td class=\"num\">{}</td>", total["requests"])), "total requests");
    assert!(page.contains("s / broken"), "per-step rows");
    assert!(page.contains("status is 200"), "the checks table");
    assert!(page.contains("Passed: 1 of 1 thresholds"), "the verdict");
    assert!(page.contains("Error samples"), "the broken step's samples");

    let again = dir.path().join("again.html");
    let out = stampede(&["report", json.to_str().unwrap(), "-o", again.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&again).unwrap(), page, "the same page from the JSON report");
    let bad = stampede(&["report", scenario.to_str().unwrap(), "-o", again.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2), "a file that is not a report is invalid input");
    assert!(text(&bad.stderr).contains("is not a Stampede JSON report"), "{}", text(&bad.stderr));
}

/// `stampede run FILE --out r.json --html r.html` (beside the file), which must exit 0.
fn run_with_reports(scenario: &Path) -> (PathBuf, PathBuf) {
    let (json, html) = (scenario.with_file_name("r.json"), scenario.with_file_name("r.html"));
    let run = stampede(&[
        "run",
        scenario.to_str().unwrap(),
        "--quiet",
        "--out",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(0), "{}{}", text(&run.stdout), text(&run.stderr));
    (json, html)
}

/// Every chart series of an HTML report: (name, points drawn).
fn chart_series(page: &str) -> Vec<(String, usize)> {
    let attr = |tag: &str, name: &str| {
        let start = tag.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        tag[start..start + tag[start..].find('"').unwrap()].to_string()
    };
    page.split("<polyline ")
        .skip(1)
        .map(|tag| (attr(tag, "data-series"), attr(tag, "data-points").parse().unwrap()))
        .collect()
}

/// An open model's HTML report adds the schedule's charts; the dropped iterations it draws per
/// interval add up to the report's total exactly.
#[test]
fn an_open_models_html_report_charts_due_started_dropped_and_lag() {
    let dir = tempfile::tempdir().unwrap();
    // One VU at most, 100 ms per iteration, 50 due per second: most are dropped.
    let scenario = write_scenario(
        dir.path(),
        "name: open\nbaseUrl: builtin\nundeliveredLoad: warn\nload: {executor: constant-arrival-rate, rate: 50, \
         duration: 2s, preAllocatedVUs: 1, maxVUs: 1}\nscenarios:\n  - name: s\n    steps:\n      \
         - {name: slow, request: {url: \"{{baseUrl}}/delay/100\"}}\n",
    );
    let (json, html) = run_with_reports(&scenario);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let timeline = report["timeline"].as_array().unwrap();
    let dropped: u64 = timeline.iter().map(|p| p["dropped"].as_u64().unwrap_or(0)).sum();
    let total = report["run"]["schedule"]["droppedIterations"].as_u64().unwrap();
    assert!(total > 0, "one VU cannot keep 50/s of 100 ms iterations");
    assert_eq!(dropped, total, "the timeline's dropped iterations add up to the total");
    let page = std::fs::read_to_string(&html).unwrap();
    for title in ["Arrival rate", "Waiting and dropped iterations", "Schedule lag"] {
        assert!(page.contains(&format!("aria-label=\"{title}\"")), "no {title} chart");
    }
    let series = chart_series(&page);
    for name in ["due", "started", "dropped"] {
        let (_, points) = series.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no {name} series"));
        assert_eq!(*points, timeline.len(), "{name}");
    }
    assert!(!page.contains("chart empty"));
}

/// `stampede compare` of two real runs: per step and in total, each figure as the two JSON
/// reports hold it, and the relative change between them.
#[test]
fn compare_prints_each_steps_change_from_the_base_run_to_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = |delay: u32| {
        write_scenario(
            dir.path(),
            &format!(
                "name: cmp\nbaseUrl: builtin\nload: {{executor: constant-vus, vus: 2, iterations: 40}}\n\
                 scenarios:\n  - name: s\n    steps:\n      - {{name: slow, request: {{url: \"{{{{baseUrl}}}}/delay/{delay}\"}}}}\n"
            ),
        )
    };
    let (base, new) = (dir.path().join("base.json"), dir.path().join("new.json"));
    for (delay, out) in [(5, &base), (25, &new)] {
        let run = stampede(&["run", scenario(delay).to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
        assert!(run.status.success(), "{}", text(&run.stderr));
    }
    let out = stampede(&["compare", base.to_str().unwrap(), new.to_str().unwrap(), "--details"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let b: Value = serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    let n: Value = serde_json::from_str(&std::fs::read_to_string(&new).unwrap()).unwrap();
    // The total's p50 row: both values as the reports hold them, and their relative change.
    let (p50_base, p50_new) =
        (b["total"]["latencyMs"]["p50"].as_f64().unwrap(), n["total"]["latencyMs"]["p50"].as_f64().unwrap());
    let total_block = &table[table.find("\ntotal").expect("a total block")..];
    let row = total_block.lines().find(|l| l.contains("p50 ms")).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[cells.len() - 4], format!("{p50_base:.3}"), "{row}");
    assert_eq!(cells[cells.len() - 3], format!("{p50_new:.3}"), "{row}");
    assert_eq!(
        cells[cells.len() - 2..].join(" "),
        format!("{:+.1} %", (p50_new - p50_base) / p50_base * 100.0),
        "{row}"
    );
    assert!(p50_new > p50_base, "25 ms against 5 ms of server delay");
    assert!(table.contains("s/slow"), "{table}");
    // The HTML report with the baseline beside the run: the changes, and its lines in the charts.
    let html = dir.path().join("new.html");
    let out = stampede(&[
        "report",
        new.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
        "--baseline",
        base.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Compared with the baseline"), "no comparison section");
    assert!(page.contains(&format!("{:+.1} %", (p50_new - p50_base) / p50_base * 100.0)), "the total p50's change");
    let series = chart_series(&page);
    let base_points = b["timeline"].as_array().unwrap().len();
    for name in ["baseline requests/s", "baseline p99"] {
        let (_, points) = series.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no {name} line"));
        assert_eq!(*points, base_points, "{name}: the baseline's every interval");
    }
    let bad = stampede(&["compare", base.to_str().unwrap(), dir.path().join("missing.json").to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("missing.json"), "{}", text(&bad.stderr));
}

/// #24: `stampede compare` says first whether anything changed beyond run-to-run noise: a run
/// and the same run 3 % slower in every latency figure are within noise (exit 0 even under
/// `--fail-on p50:+10%`), and after the target is slowed from 50 to 150 ms the regression is
/// named first and `--fail-on p50:+10%` exits 1. The full table waits for `--details`. (Two
/// real runs of one scenario are within noise only as often as the machine is even-handed; a
/// busy one is not: the small change is made by hand. A slowdown of 20 ms hid in a busy
/// machine's p99 noise: the gap is wide, and judged at the median, which no tail bridges.)
#[test]
fn compare_gives_a_verdict_within_noise_for_the_same_scenario_and_names_a_slowdown() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = |delay: u32| {
        write_scenario(
            dir.path(),
            &format!(
                "name: cmp\nbaseUrl: builtin\nload: {{executor: constant-vus, vus: 20, duration: 3s}}\n\
                 scenarios:\n  - name: s\n    steps:\n      - {{name: get, request: {{url: \"{{{{baseUrl}}}}/delay/{delay}\"}}}}\n"
            ),
        )
    };
    let runs: Vec<PathBuf> = ["a", "b", "slow"].iter().map(|n| dir.path().join(format!("{n}.json"))).collect();
    let run = stampede(&["run", scenario(50).to_str().unwrap(), "--quiet", "--out", runs[0].to_str().unwrap()]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    // The same run, every latency figure of every row 3 % higher: inside any noise band.
    let mut same: Value = serde_json::from_str(&std::fs::read_to_string(&runs[0]).unwrap()).unwrap();
    let slower = |row: &mut Value| {
        for figure in row["latencyMs"].as_object_mut().unwrap().values_mut() {
            *figure = serde_json::json!(figure.as_f64().unwrap() * 1.03);
        }
    };
    slower(&mut same["total"]);
    same["steps"].as_array_mut().unwrap().iter_mut().for_each(slower);
    std::fs::write(&runs[1], serde_json::to_string(&same).unwrap()).unwrap();
    let run = stampede(&["run", scenario(150).to_str().unwrap(), "--quiet", "--out", runs[2].to_str().unwrap()]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let compare = |base: &Path, new: &Path| {
        stampede(&[
            "compare",
            base.to_str().unwrap(),
            new.to_str().unwrap(),
            "--fail-on",
            "p99:+10%",
            "--fail-on",
            "p50:+10%",
        ])
    };
    let same = compare(&runs[0], &runs[1]);
    let verdict = text(&same.stdout);
    assert_eq!(same.status.code(), Some(0), "{verdict}{}", text(&same.stderr));
    let head = verdict.lines().nth(2).unwrap_or_default();
    assert!(head.starts_with("WITHIN NOISE"), "{verdict}");
    assert!(!verdict.contains("worse") && !verdict.contains("better"), "{verdict}");
    assert!(verdict.lines().count() <= 5, "short, the table behind --details:\n{verdict}");

    let slow = compare(&runs[0], &runs[2]);
    let verdict = text(&slow.stdout);
    assert_eq!(slow.status.code(), Some(1), "{verdict}{}", text(&slow.stderr));
    let lines: Vec<&str> = verdict.lines().collect();
    assert!(lines[2].starts_with("WORSE") || lines[2].starts_with("MIXED"), "{verdict}");
    assert!(lines[3].contains("worse") && lines[3].contains("total"), "the regression first:\n{verdict}");
    // The median is named; whether the tail is too depends on how busy the machine was (a
    // loaded one's p99 at 50 ms can pass 150 ms).
    assert!(verdict.contains(" p50 "), "{verdict}");
    assert!(text(&slow.stderr).contains("FAILED: --fail-on p50:+10%: total p50 +"), "{}", text(&slow.stderr));
    let bad = stampede(&["compare", runs[0].to_str().unwrap(), runs[1].to_str().unwrap(), "--fail-on", "p99:10%"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("with + (a rise) or - (a fall)"), "{}", text(&bad.stderr));
}

/// `stampede run --baseline base.json`: relative thresholds are judged against the earlier
/// run's report, and say base, new and ratio; without a baseline they fail, saying why.
#[test]
fn relative_thresholds_are_judged_against_the_baseline_run() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = |thresholds: &str| {
        format!(
            "name: rel\nbaseUrl: builtin\nload: {{executor: constant-vus, vus: 2, iterations: 200}}\nscenarios:\n  \
             - name: s\n    steps:\n      - {{name: get, request: {{url: \"{{{{baseUrl}}}}/get\"}}}}\nthresholds: {thresholds}\n"
        )
    };
    let base_file = write_scenario(dir.path(), &scenario("[]"));
    let base = dir.path().join("base.json");
    let out = stampede(&["run", base_file.to_str().unwrap(), "--quiet", "--out", base.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let file = write_scenario(
        dir.path(),
        &scenario(
            r#"["requests.count >= baseline", "requests.count > baseline * 1.5", "latency.p99 < baseline * 1000"]"#,
        ),
    );
    let new = dir.path().join("new.json");
    let out = stampede(&[
        "run",
        file.to_str().unwrap(),
        "--quiet",
        "--out",
        new.to_str().unwrap(),
        "--baseline",
        base.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "one relative threshold fails: {}", text(&out.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&new).unwrap()).unwrap();
    let verdicts = report["thresholds"].as_array().unwrap();
    let passed: Vec<bool> = verdicts.iter().map(|v| v["passed"].as_bool().unwrap()).collect();
    assert_eq!(passed[..2], [true, false], "{verdicts:?}");
    // The latency ratio is the machine's (a stall in one run and not the other); its verdict is
    // what its ratio says.
    let ratio = verdicts[2]["ratio"].as_f64().unwrap();
    assert!(verdicts[2]["baseline"].as_f64().unwrap() > 0.0, "{verdicts:?}");
    assert_eq!(passed[2], ratio < 1000.0, "{verdicts:?}");
    assert_eq!((verdicts[1]["baseline"].as_f64(), verdicts[1]["ratio"].as_f64()), (Some(200.0), Some(1.0)));
    assert!(verdicts[1]["actualText"].as_str().unwrap().contains("baseline 200"), "{verdicts:?}");

    // No baseline given: the relative thresholds fail and say so; never a silent pass.
    let out = stampede(&["run", file.to_str().unwrap(), "--quiet", "--out", new.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&new).unwrap()).unwrap();
    for v in report["thresholds"].as_array().unwrap() {
        assert!(!v["passed"].as_bool().unwrap() && v["message"].as_str().unwrap().contains("no baseline"), "{v}");
    }
    // A baseline that cannot be read stops before the run.
    let out = stampede(&["run", file.to_str().unwrap(), "--quiet", "--baseline", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("is not a Stampede JSON report"), "{}", text(&out.stderr));
}

/// A JSON report's `trend` (earlier runs of the same test and this one) becomes the HTML
/// report's Trend section: latency and throughput by run, a point per run in each series; a
/// trend of one run has none.
#[test]
fn a_reports_trend_of_runs_is_charted_per_run_in_the_html_report() {
    let dir = tempfile::tempdir().unwrap();
    let run = |label: &str, verdict: &str, rps: f64, p99: f64| {
        serde_json::json!({"label": label, "startedAt": "2026-03-01T03:00:00Z", "verdict": verdict,
            "requests": (rps * 60.0) as u64, "rps": rps, "errorRate": 0.001,
            "p50Ms": p99 / 4.0, "p95Ms": p99 / 2.0, "p99Ms": p99})
    };
    let mut report = serde_json::json!({
        "schemaVersion": 1, "name": "checkout", "startedAt": "2026-03-03T03:00:00Z",
        "run": {"executor": "constant-vus", "durationSeconds": 60.0, "vusMax": 10, "threads": 2,
                "iterations": 0, "interrupted": false, "builtinTarget": false,
                "generator": {"cpuPercent": 0.0, "cpuSeconds": 0.0, "cpuMicrosPerRequest": 0.0, "peakRssBytes": 0}},
        "total": {"requests": 0, "responses": 0, "errors": 0, "errorRate": 0.0, "errorsByKind": {},
                  "statusCodes": {}, "latencyMs": {"mean": 0.0, "min": 0.0, "max": 0.0, "p50": 0.0, "p75": 0.0,
                  "p90": 0.0, "p95": 0.0, "p99": 0.0, "p99.9": 0.0}, "rps": 0.0, "bytesReceived": 0,
                  "bytesSent": 0, "receivedPerSec": 0.0, "sentPerSec": 0.0},
        "steps": [], "scenarios": [], "timeline": [], "checks": [], "errorSamples": [], "thresholds": [],
        "trend": [run("#1", "Passed", 490.0, 40.0), run("#2", "Failed", 310.0, 95.5), run("#3", "Passed", 502.0, 38.0)],
    });
    let (json, html) = (dir.path().join("r.json"), dir.path().join("r.html"));
    std::fs::write(&json, report.to_string()).unwrap();
    let out = stampede(&["report", json.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    let trend = &page[page.find("<h2>Trend</h2>").expect("a Trend section")..page.find("<h2>Over time</h2>").unwrap()];
    let series = chart_series(trend);
    assert_eq!(
        series,
        [("p50".to_string(), 3), ("p95".into(), 3), ("p99".into(), 3), ("requests/s".into(), 3)],
        "a point per run"
    );
    assert_eq!(trend.matches("<title>#2: Failed</title>").count(), 2, "the failed run marked in both charts");

    report["trend"].as_array_mut().unwrap().truncate(1);
    std::fs::write(&json, report.to_string()).unwrap();
    let out = stampede(&["report", json.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!std::fs::read_to_string(&html).unwrap().contains("Trend"), "one run is no trend");
}

/// A JSON report of a capacity search becomes the HTML report's Capacity section: the answer,
/// what limited it, the curve (a point per plateau in every series, the failed plateau in red,
/// a line at the capacity) and a row per plateau.
#[test]
fn a_reports_capacity_search_is_answered_and_charted_in_the_html_report() {
    let dir = tempfile::tempdir().unwrap();
    let latency = |p99: f64| {
        serde_json::json!({"mean": p99 / 4.0, "min": 1.0, "max": p99 * 2.0, "p50": p99 / 4.0, "p75": p99 / 3.0,
            "p90": p99 / 2.0, "p95": p99 / 1.5, "p99": p99, "p99.9": p99 * 1.5})
    };
    let plateau = |rate: f64, refine: bool, p99: f64| {
        let passed = p99 < 50.0;
        serde_json::json!({"rate": rate, "achievedRate": rate, "refine": refine, "seconds": 3.0,
            "requests": (rate * 3.0) as u64, "errors": 0, "errorRate": 0.0, "latencyMs": latency(p99),
            "droppedIterations": 0, "lagP99Ms": 0.3, "passed": passed,
            "thresholds": [{"threshold": "latency.p99 < 50ms", "passed": passed, "actual": p99,
                            "actualText": format!("{p99:.1}ms")}]})
    };
    let report = serde_json::json!({
        "schemaVersion": 1, "name": "capacity", "startedAt": "2026-03-03T03:00:00Z",
        "run": {"executor": "capacity", "durationSeconds": 20.0, "vusMax": 400, "threads": 2,
                "iterations": 9000, "interrupted": false, "builtinTarget": true,
                "generator": {"cpuPercent": 0.0, "cpuSeconds": 0.0, "cpuMicrosPerRequest": 0.0, "peakRssBytes": 0}},
        "total": {"requests": 9000, "responses": 9000, "errors": 0, "errorRate": 0.0, "errorsByKind": {},
                  "statusCodes": {}, "latencyMs": latency(30.0), "rps": 450.0, "bytesReceived": 0,
                  "bytesSent": 0, "receivedPerSec": 0.0, "sentPerSec": 0.0},
        "steps": [], "scenarios": [], "timeline": [], "checks": [], "errorSamples": [], "thresholds": [],
        "capacity": {"capacity": 750.0, "lowerBound": false, "limit": "service",
            "limitedBy": "latency.p99 < 50ms failed at 900.0/s (140.0ms)", "stopped": "refined to 750.0/s",
            "p99Ms": 44.0, "errorRate": 0.0,
            "plateaus": [plateau(300.0, false, 9.0), plateau(600.0, false, 20.0), plateau(900.0, false, 140.0),
                         plateau(750.0, true, 44.0), plateau(825.0, true, 80.0)]},
    });
    let (json, html) = (dir.path().join("r.json"), dir.path().join("r.html"));
    std::fs::write(&json, report.to_string()).unwrap();
    let out = stampede(&["report", json.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    let start = page.find("<h2>Capacity</h2>").expect("a Capacity section");
    let cap = &page[start..start + page[start..].find("</section>").unwrap()];
    assert!(cap.contains(">750.0 iterations/s</p>"), "{cap}");
    assert!(cap.contains("limited by: latency.p99 &lt; 50ms failed at 900.0/s (140.0ms)"), "{cap}");
    assert!(cap.contains("stopped: refined to 750.0/s"), "{cap}");
    let series = chart_series(cap);
    let names: Vec<&str> = series.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["p50", "p90", "p99", "errors", "target", "achieved"]);
    assert!(series.iter().all(|(_, points)| *points == 5), "a point per plateau: {series:?}");
    assert_eq!(cap.matches("<line class=\"capacity-marker\"").count(), 3, "the capacity in each chart");
    assert_eq!(cap.matches("<circle class=\"failed\"").count(), 6, "900/s failed: a red dot per series");
    assert_eq!(cap.matches("<circle class=\"refine failed\"").count(), 6, "825/s failed while refining");
    assert_eq!(cap.matches("<circle class=\"refine\"").count(), 6, "750/s passed while refining");
    assert_eq!(cap.matches("FAIL: latency.p99 &lt; 50ms").count(), 2, "{cap}");
    assert_eq!(cap.matches("<td class=\"passed\">pass</td>").count(), 3, "{cap}");
    assert!(page.find("<h2>Capacity</h2>").unwrap() < page.find("<h2>Over time</h2>").unwrap());
}
