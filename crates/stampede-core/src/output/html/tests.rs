//! The HTML report's tests: axes, escaping, charts, and the Trend and Capacity sections.

use stampede_model::report::{CapacityResult, LatencySummary, PlateauResult, Report, StepSummary, TrendPoint};

use super::capacity::plateau_verdict;
use super::format::{esc, short};
use super::svg::{line_chart, nice, series_color};
use super::{LEFT, RIGHT, Series, W, XAxis, render_html};

#[test]
fn nice_axis_bounds_are_1_2_or_5_times_a_power_of_ten() {
    assert_eq!(nice(0.0), 1.0);
    assert_eq!(nice(f64::NAN), 1.0);
    assert_eq!(nice(3.0), 5.0);
    assert_eq!(nice(12.0), 20.0);
    assert_eq!(nice(5000.0), 5000.0);
    assert_eq!(nice(5001.0), 10000.0);
}

#[test]
fn tick_labels_keep_a_quarter_of_a_small_axis_exact() {
    let labels: Vec<String> = [0.0, 0.25, 0.5, 0.75, 1.0, 37.5, 150.0, 25_000.0].map(short).to_vec();
    assert_eq!(labels, ["0", "0.25", "0.5", "0.75", "1", "37.5", "150", "25k"]);
}

#[test]
fn text_is_escaped_everywhere_it_is_shown() {
    assert_eq!(esc(r#"<a href="x">&'"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

#[test]
fn a_chart_without_points_says_so_and_draws_no_line() {
    let empty = line_chart(
        "Throughput",
        "requests/s",
        &XAxis::Seconds,
        &[Series { name: "rps".into(), color: "#000".into(), points: vec![] }],
    );
    assert!(empty.contains("class=\"chart empty\"") && empty.contains("no data"), "{empty}");
    assert!(!empty.contains("<polyline"));
    let full = line_chart(
        "Throughput",
        "requests/s",
        &XAxis::Seconds,
        &[Series { name: "rps".into(), color: "#000".into(), points: vec![(1.0, 10.0), (2.0, 12.0)] }],
    );
    assert!(full.contains("data-points=\"2\""), "{full}");
    assert!(!full.contains("empty"));
}

/// #24: a chart of many steps keeps its legend on the card (under it, wrapping; it ran off
/// the card's left past about 4 steps) and gives every line its own colour (they repeated
/// every 8).
#[test]
fn many_lines_get_their_own_colours_and_a_legend_that_stays_on_the_card() {
    let series: Vec<Series> = (0..12)
        .map(|n| Series {
            name: format!("checkout / step number {n}"),
            color: series_color(n),
            points: vec![(1.0, n as f64), (2.0, n as f64 + 1.0)],
        })
        .collect();
    let colours: std::collections::BTreeSet<String> = series.iter().map(|s| s.color.to_string()).collect();
    assert_eq!(colours.len(), 12, "{colours:?}");
    let many = line_chart("p99 by step", "ms", &XAxis::Seconds, &series);
    let legend_xs: Vec<f64> = many
        .split("class=\"legend\"")
        .filter_map(|part| part.rsplit("x=\"").next()?.split('"').next()?.parse().ok())
        .collect();
    assert!(legend_xs.iter().all(|x| *x >= 0.0), "legend entries off the card: {legend_xs:?}");
    let caption = many.split("<figcaption class=\"legend\">").nth(1).expect("a legend under the chart");
    assert_eq!(caption.matches("<span").count(), 12, "{caption}");
    for c in &colours {
        assert!(many.contains(&format!("stroke=\"{c}\"")) && caption.contains(c.as_str()), "{c}");
    }
    // A few short names stay beside the title.
    let few = line_chart(
        "Latency",
        "ms",
        &XAxis::Seconds,
        &series[..2]
            .iter()
            .map(|s| Series { name: format!("p{}", s.points.len()), color: s.color.clone(), points: s.points.clone() })
            .collect::<Vec<_>>(),
    );
    assert!(few.contains("<text x=") && few.contains("class=\"legend\"") && !few.contains("figcaption"), "{few}");
}

/// A report of no interval with `trend` of the given runs: (label, verdict, rps, p99 ms).
fn report_with_trend(runs: &[(&str, &str, f64, Option<f64>)]) -> Report {
    let mut r: Report = serde_json::from_value(serde_json::json!({
        "schemaVersion": 1, "name": "checkout", "startedAt": "2026-03-04T10:00:00Z",
        "run": {"executor": "constant-vus", "durationSeconds": 60.0, "vusMax": 10, "threads": 2,
                "iterations": 0, "interrupted": false, "builtinTarget": false,
                "generator": {"cpuPercent": 0.0, "cpuSeconds": 0.0, "cpuMicrosPerRequest": 0.0, "peakRssBytes": 0}},
        "total": StepSummary::default(),
        "steps": [], "scenarios": [], "timeline": [], "checks": [], "errorSamples": [], "thresholds": [],
    }))
    .unwrap();
    r.trend = runs
        .iter()
        .map(|&(label, verdict, rps, p99)| TrendPoint {
            label: label.into(),
            started_at: Some(format!("2026-03-0{}T10:00:00Z", label.trim_start_matches('#'))),
            verdict: verdict.into(),
            requests: (rps * 60.0) as u64,
            rps,
            error_rate: 0.001,
            p50_ms: p99.map(|p| p / 4.0),
            p95_ms: p99.map(|p| p / 2.0),
            p99_ms: p99,
        })
        .collect();
    r
}

/// The Trend section of a page (up to the next section), if it has one.
fn trend_section(page: &str) -> Option<&str> {
    let start = page.find("<section><h2>Trend</h2>")?;
    let len = page[start..].find("</section>").unwrap();
    Some(&page[start..start + len])
}

/// (series, points) of each polyline in `html`, in order.
fn series_points(html: &str) -> Vec<(String, usize)> {
    let attr = |tag: &str, name: &str| {
        let start = tag.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        tag[start..start + tag[start..].find('"').unwrap()].to_string()
    };
    html.split("<polyline ")
        .skip(1)
        .map(|tag| (attr(tag, "data-series"), attr(tag, "data-points").parse().unwrap()))
        .collect()
}

#[test]
fn a_report_with_three_runs_in_its_trend_charts_each_run_and_marks_the_failed_one() {
    let report = report_with_trend(&[
        ("#1", "Passed", 480.0, Some(40.0)),
        ("#2", "Failed", 310.0, Some(95.5)),
        ("#3", "Passed", 502.3, Some(38.0)),
    ]);
    let page = render_html(&report, None);
    let trend = trend_section(&page).expect("a Trend section");
    assert_eq!(trend.matches("<figure class=\"chart\">").count(), 2, "latency and throughput by run");
    assert_eq!(
        series_points(trend),
        [("p50".to_string(), 3), ("p95".into(), 3), ("p99".into(), 3), ("requests/s".into(), 3)]
    );
    assert_eq!(trend.matches("<circle ").count(), 12, "a dot per run and series");
    // Each run's label under the x axis of both charts.
    for label in ["#1", "#2", "#3"] {
        assert_eq!(trend.matches(&format!("text-anchor=\"middle\">{label}</text>")).count(), 2, "{label}");
    }
    // The failed run: a red dashed line in both charts, and its verdict in red in the table.
    assert_eq!(trend.matches("<line class=\"failed-run\"").count(), 2);
    assert_eq!(trend.matches("<title>#2: Failed</title>").count(), 2);
    assert!(trend.contains("<td>#2</td><td>2026-03-02T10:00:00Z</td><td class=\"failed\">Failed</td>"), "{trend}");
    assert!(
        trend.contains(
            "<td class=\"num\">502.3</td><td class=\"num\">0.10 %</td><td class=\"num\">9.50</td>\
         <td class=\"num\">19.00</td><td class=\"num\">38.00</td>"
        ),
        "{trend}"
    );
    assert_eq!(trend.matches("<tr><td>#").count(), 3, "a row per run");
    // The section comes before the charts over time.
    assert!(page.find("<h2>Trend</h2>").unwrap() < page.find("<h2>Over time</h2>").unwrap());
}

#[test]
fn a_run_without_latency_has_no_latency_point_but_keeps_its_place_on_the_axis() {
    let report = report_with_trend(&[("#1", "Passed", 480.0, Some(40.0)), ("#2", "Failed", 0.0, None)]);
    let trend = render_html(&report, None);
    let trend = trend_section(&trend).unwrap().to_string();
    assert_eq!(
        series_points(&trend),
        [("p50".to_string(), 1), ("p95".into(), 1), ("p99".into(), 1), ("requests/s".into(), 2)]
    );
    assert_eq!(trend.matches("text-anchor=\"middle\">#2</text>").count(), 2, "{trend}");
    assert!(
        trend.contains(
            "<td class=\"num\">0.0</td><td class=\"num\">0.10 %</td><td class=\"num\">–</td>\
         <td class=\"num\">–</td><td class=\"num\">–</td>"
        ),
        "{trend}"
    );
    assert!(!trend.contains("NaN") && !trend.contains("inf"), "{trend}");
}

#[test]
fn a_report_without_a_trend_of_two_runs_has_no_trend_section() {
    for runs in [&[][..], &[("#1", "Passed", 480.0, Some(40.0))][..]] {
        let page = render_html(&report_with_trend(runs), None);
        assert!(trend_section(&page).is_none() && !page.contains("Trend"), "{} runs", runs.len());
        assert!(!page.contains("failed-run") && !page.contains("<circle"));
    }
}

/// A plateau at `rate`: p99 `p99` ms (p50 a quarter, p90 a half), 0.1 % errors, judged by
/// `latency.p99 < 50ms`.
fn plateau(rate: f64, refine: bool, p99: f64) -> PlateauResult {
    let passed = p99 < 50.0;
    PlateauResult {
        rate,
        achieved_rate: rate - 1.0,
        refine,
        seconds: 3.0,
        requests: (rate * 3.0) as u64,
        errors: (rate * 0.003) as u64,
        error_rate: 0.001,
        latency_ms: LatencySummary { p50: p99 / 4.0, p90: p99 / 2.0, p99, max: p99 * 2.0, ..Default::default() },
        dropped_iterations: 0,
        lag_p99_ms: 0.2,
        saturated: None,
        passed,
        thresholds: vec![stampede_model::report::Verdict {
            threshold: "latency.p99 < 50ms".into(),
            passed,
            actual: p99,
            actual_text: format!("{p99:.1}ms"),
            baseline: None,
            ratio: None,
            message: None,
        }],
    }
}

/// A report of a capacity search: 200, 400 and 600/s pass, 800/s fails, then a refining
/// plateau at 700/s passes: the capacity is 700/s.
fn report_with_capacity() -> Report {
    let mut r = report_with_trend(&[]);
    r.capacity = Some(CapacityResult {
        capacity: Some(700.0),
        lower_bound: false,
        limited_by: "latency.p99 < 50ms failed at 800.0/s (120.0ms)".into(),
        limit: "service".into(),
        stopped: "2 refining plateaus done".into(),
        p99_ms: Some(41.0),
        error_rate: Some(0.001),
        plateaus: vec![
            plateau(200.0, false, 8.0),
            plateau(400.0, false, 10.0),
            plateau(600.0, false, 20.0),
            plateau(800.0, false, 120.0),
            plateau(700.0, true, 41.0),
        ],
    });
    r
}

/// The Capacity section of a page, if it has one.
fn capacity_section(page: &str) -> Option<&str> {
    let start = page.find("<section class=\"capacity\"><h2>Capacity</h2>")?;
    let len = page[start..].find("</section>").unwrap();
    Some(&page[start..start + len])
}

#[test]
fn a_capacity_search_shows_its_answer_its_curve_and_a_row_per_plateau() {
    let page = render_html(&report_with_capacity(), None);
    let cap = capacity_section(&page).expect("a Capacity section");
    assert!(cap.contains("<p class=\"capacity-answer\">700.0 iterations/s</p>"), "{cap}");
    assert!(cap.contains("<li>at that rate: p99 41.00 ms, errors 0.10 %</li>"), "{cap}");
    assert!(cap.contains("<li>limited by: latency.p99 &lt; 50ms failed at 800.0/s (120.0ms)</li>"), "{cap}");
    assert!(cap.contains("<li>stopped: 2 refining plateaus done</li>"), "{cap}");
    assert!(!cap.contains("at least") && !cap.contains("lower bound"), "{cap}");
    // Three charts, a point per plateau in every series.
    assert_eq!(cap.matches("<figure class=\"chart\">").count(), 3);
    assert_eq!(
        series_points(cap),
        [
            ("p50".to_string(), 5),
            ("p90".into(), 5),
            ("p99".into(), 5),
            ("errors".into(), 5),
            ("target".into(), 5),
            ("achieved".into(), 5)
        ]
    );
    assert_eq!(cap.matches("<circle").count(), 30, "a dot per plateau and series");
    // The failing plateau (800/s) in red, the refining one (700/s) hollow, in every series.
    assert_eq!(cap.matches("<circle class=\"failed\"").count(), 6, "{cap}");
    assert_eq!(cap.matches(&format!("<circle class=\"failed\" cx=\"{:.1}\"", W - RIGHT)).count(), 6);
    assert_eq!(cap.matches("<circle class=\"refine\"").count(), 6, "{cap}");
    assert_eq!(cap.matches("fill=\"#fff\"").count(), 6, "{cap}");
    // The capacity's line, in each chart, at the x of the 700/s plateau.
    let x = format!("{:.1}", LEFT + 700.0 / 800.0 * (W - LEFT - RIGHT));
    assert_eq!(cap.matches(&format!("<line class=\"capacity-marker\" x1=\"{x}\" x2=\"{x}\"")).count(), 3, "{cap}");
    assert_eq!(cap.matches("<title>capacity 700/s</title>").count(), 3);
    assert_eq!(cap.matches(&format!("<circle class=\"refine\" cx=\"{x}\"")).count(), 6);
    // The table: a row per plateau by rate, the capacity's in bold, the failure and why.
    let rates: Vec<&str> =
        cap.split("<tr").skip(2).map(|row| &row[row.find("<td class=\"num\">").unwrap() + 16..]).collect();
    let rates: Vec<&str> = rates.iter().map(|r| &r[..r.find("</td>").unwrap()]).collect();
    assert_eq!(rates, ["200.0", "400.0", "600.0", "700.0 (refine)", "800.0"]);
    assert!(cap.contains("<tr class=\"at-capacity\"><td class=\"num\">700.0 (refine)</td>"), "{cap}");
    assert!(
        cap.contains(
            "<td class=\"num\">800.0</td><td class=\"num\">799.0</td><td class=\"num\">2400</td>\
             <td class=\"num\">30.00</td><td class=\"num\">60.00</td><td class=\"num\">120</td>\
             <td class=\"num\">240</td><td class=\"num\">0.10 %</td><td class=\"num\">0</td>\
             <td class=\"failed\">FAIL: latency.p99 &lt; 50ms (120.0ms)</td></tr>"
        ),
        "{cap}"
    );
    assert_eq!(cap.matches("<td class=\"passed\">pass</td>").count(), 4);
    // After the run's facts, before the charts over time.
    let at = |s: &str| page.find(s).unwrap();
    assert!(at("<h2>Run</h2>") < at("<h2>Capacity</h2>") && at("<h2>Capacity</h2>") < at("<h2>Over time</h2>"));
    assert!(!page.contains("NaN") && !page.contains("inf"));
}

#[test]
fn a_plateau_the_generator_could_not_drive_fails_saying_so() {
    let mut p = plateau(900.0, false, 10.0);
    (p.passed, p.achieved_rate, p.saturated) = (false, 610.5, Some("schedule lag p99 250 ms".into()));
    assert_eq!(plateau_verdict(&p), "FAIL: only 610.5/s started; generator: schedule lag p99 250 ms");
    assert_eq!(plateau_verdict(&plateau(900.0, false, 10.0)), "pass");
}

#[test]
fn a_lower_bound_says_at_least_and_no_answer_says_none_found() {
    let mut report = report_with_capacity();
    let c = report.capacity.as_mut().unwrap();
    (c.lower_bound, c.limit, c.limited_by) = (true, "maxRate".into(), "maxRate 700/s reached".into());
    let page = render_html(&report, None);
    let cap = capacity_section(&page).unwrap();
    assert!(cap.contains("<p class=\"capacity-answer\">at least 700.0 iterations/s</p>"), "{cap}");
    assert!(cap.contains("<li>limited by: maxRate 700/s reached</li>"), "{cap}");
    assert_eq!(cap.matches("<title>capacity ≥ 700/s</title>").count(), 3, "{cap}");

    let c = report.capacity.as_mut().unwrap();
    (c.capacity, c.lower_bound, c.p99_ms, c.error_rate) = (None, false, None, None);
    let page = render_html(&report, None);
    let cap = capacity_section(&page).unwrap();
    assert!(cap.contains("<p class=\"capacity-answer\">none found</p>"), "{cap}");
    assert!(cap.contains("<li>not even the first plateau met every threshold</li>"), "{cap}");
    assert!(!cap.contains("capacity-marker") && !cap.contains("at-capacity"), "{cap}");
    assert_eq!(series_points(cap).len(), 6, "the curve is still drawn");
}

#[test]
fn a_report_without_a_capacity_search_has_no_capacity_section() {
    let page = render_html(&report_with_trend(&[]), None);
    assert!(capacity_section(&page).is_none() && !page.contains("Capacity"));
    assert!(!page.contains("capacity-marker") && !page.contains("<circle"));
}
