//! The operator's exposition, rendered by the operator's own code for LoadTests in every
//! phase: every operator metric, phase, unit and variable value the dashboards read is there.

use std::collections::BTreeSet;
use std::sync::Arc;

use stampede_api::{LoadTest, LoadTestSpec, LoadTestStatus, Phase, Summary};
use stampede_model::report::{LatencySummary, Verdict};

use super::exposition::Exposition;
use super::{
    DASHBOARDS, Labels, check_dashboard_against, evaluate_variables, exprs, is_operator_metric, load_dashboard, names,
    promql,
};

const PHASE_NAMES: [&str; 6] = ["Pending", "Initializing", "Running", "Succeeded", "Failed", "Aborted"];

/// A LoadTest in `phase`; finished ones carry a final summary (p50 20 ms ... p99 120 ms) and one
/// failed threshold when Failed.
fn loadtest(namespace: &str, name: &str, phase: Phase) -> Arc<LoadTest> {
    let spec: LoadTestSpec = serde_json::from_value(serde_json::json!({
        "runners": 2,
        "scenario": {"name": name, "baseUrl": "http://target", "load": {"executor": "constant-vus", "vus": 4, "duration": "10s"},
                     "scenarios": [{"name": "s", "steps": [{"name": "home", "request": {"url": "{{baseUrl}}/"}}]}]}
    }))
    .expect("a LoadTest spec");
    let mut lt = LoadTest::new(name, spec);
    lt.metadata.namespace = Some(namespace.to_string());
    if phase == Phase::Pending {
        return Arc::new(lt);
    }
    let finished = phase.is_finished();
    lt.status = Some(LoadTestStatus {
        phase,
        start_time: Some("2025-01-02T03:04:05Z".into()),
        completion_time: finished.then(|| "2025-01-02T03:04:15Z".into()),
        summary: Some(Summary {
            is_final: finished,
            requests: 5000,
            rps: 500.0,
            error_rate: 0.01,
            duration_seconds: 10.0,
            latency_ms: LatencySummary { p50: 20.0, p90: 80.0, p95: 100.0, p99: 120.0, ..Default::default() },
            ..Default::default()
        }),
        // The load changed once mid-run (spec.live), 4 s after the start.
        live: Some(stampede_api::LiveStatus {
            decided: stampede_api::LiveSpec { vus: Some(8), ..Default::default() },
            changes: vec![stampede_api::ControlChange {
                seq: 1,
                at: "2025-01-02T03:04:09Z".into(),
                vus: Some(8),
                ..Default::default()
            }],
        }),
        thresholds: if phase == Phase::Failed {
            vec![Verdict {
                threshold: "latency.p99 < 100ms".into(),
                passed: false,
                actual: 120.0,
                actual_text: "120ms".into(),
                baseline: None,
                ratio: None,
                message: None,
            }]
        } else {
            Vec::new()
        },
        ..Default::default()
    });
    Arc::new(lt)
}

/// The operator's `/metrics` text after one reconcile, as leader, with LoadTests in every
/// phase in namespace `shop`.
fn operator_exposition() -> (Exposition, String) {
    let metrics = stampede_operator::metrics::Metrics::default();
    metrics.reconciles.inc();
    metrics.duration.observe(0.004);
    metrics.leader.set(1);
    let loadtests = [
        loadtest("shop", "queued", Phase::Pending),
        loadtest("shop", "starting", Phase::Initializing),
        loadtest("shop", "live", Phase::Running),
        loadtest("shop", "checkout", Phase::Succeeded),
        loadtest("shop", "search", Phase::Failed),
        loadtest("shop", "stopped", Phase::Aborted),
    ];
    let text = metrics.render_with(&loadtests);
    let e =
        Exposition::parse(&text).unwrap_or_else(|err| panic!("the operator's /metrics is not valid: {err}\n{text}"));
    (e, text)
}

#[test]
fn operator_exposition_has_every_operator_metric_the_dashboards_use() {
    let (e, text) = operator_exposition();
    let d = load_dashboard("operator.json");
    let all: Labels = [("namespace".to_string(), ".*".to_string())].into();
    let checked = check_dashboard_against("operator.json", &d, &e, &all, |_| true);
    assert!(checked.iter().all(|n| is_operator_metric(n)), "operator.json reads runner metrics: {checked:?}");
    assert!(checked.len() >= 13, "{checked:?}");

    // The load-test dashboard's annotations and past-runs table, for one finished run.
    let d = load_dashboard("loadtest.json");
    let one: Labels = [("namespace", "shop"), ("loadtest", "checkout"), ("step", ".*")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let checked = check_dashboard_against("loadtest.json", &d, &e, &one, is_operator_metric);
    assert!(checked.len() >= 9, "{checked:?}\n{text}");
}

#[test]
fn dashboards_name_only_real_phases() {
    let (e, _) = operator_exposition();
    let exported: BTreeSet<String> =
        e.series("stampede_operator_loadtests").filter_map(|s| s.labels.get("phase").cloned()).collect();
    assert_eq!(exported, PHASE_NAMES.iter().map(|p| p.to_string()).collect(), "phases exported");
    for (file, _, _) in DASHBOARDS {
        let d = load_dashboard(file);
        let mut used = BTreeSet::new();
        for x in exprs(&d) {
            for s in promql::parse(&x.expr).unwrap().selectors {
                for m in s.matchers.iter().filter(|m| m.label == "phase") {
                    used.extend(m.value.split('|').map(str::to_string));
                }
            }
        }
        // Value mappings that colour phases in tables.
        let text = d.to_string();
        for word in ["Pending", "Initializing", "Starting", "Running", "Succeeded", "Failed", "Aborted", "Completed"] {
            if text.contains(&format!("\"{word}\":{{")) {
                used.insert(word.to_string());
            }
        }
        let unknown: Vec<_> = used.iter().filter(|p| !exported.contains(*p)).collect();
        assert!(unknown.is_empty(), "{file} names phases the operator never exports: {unknown:?}");
    }
}

#[test]
fn operator_exposition_has_the_units_the_dashboards_assume() {
    let (e, text) = operator_exposition();
    let value = |name: &str, lt: &str, extra: Option<(&str, &str)>| {
        e.series(name)
            .find(|s| {
                s.labels.get("loadtest").map(String::as_str) == Some(lt)
                    && extra.is_none_or(|(k, v)| s.labels.get(k).map(String::as_str) == Some(v))
            })
            .map(|s| s.value)
            .unwrap_or_else(|| panic!("no {name} for {lt}\n{text}"))
    };
    // Seconds, like every `_seconds` metric: the table shows them with unit "s".
    assert_eq!(value("stampede_operator_loadtest_latency_seconds", "checkout", Some(("quantile", "0.99"))), 0.12);
    assert_eq!(value("stampede_operator_loadtest_latency_seconds", "checkout", Some(("quantile", "0.5"))), 0.02);
    // Unix seconds (the table and the annotation multiply by 1000).
    assert_eq!(value("stampede_operator_loadtest_start_timestamp_seconds", "checkout", None), 1_735_787_045.0);
    assert_eq!(value("stampede_operator_loadtest_completion_timestamp_seconds", "checkout", None), 1_735_787_055.0);
    assert_eq!(
        value("stampede_operator_loadtest_load_change_timestamp_seconds", "checkout", Some(("change", "vus 8"))),
        1_735_787_049.0
    );
    // A ratio 0-1 (the table's unit is percentunit).
    assert_eq!(value("stampede_operator_loadtest_error_ratio", "checkout", None), 0.01);
    assert_eq!(value("stampede_operator_loadtest_thresholds_failed", "search", None), 1.0);
    // Only finished runs are in the past-runs table.
    assert!(
        e.series("stampede_operator_loadtest_requests_per_second")
            .all(|s| { ["checkout", "search", "stopped"].contains(&s.labels["loadtest"].as_str()) })
    );
}

#[test]
fn operator_dashboard_variables_resolve_against_the_operator_exposition() {
    let (e, _) = operator_exposition();
    let vars =
        evaluate_variables(&load_dashboard("operator.json"), &e).unwrap_or_else(|err| panic!("operator.json: {err}"));
    assert_eq!(vars["namespace"], names(&["shop"]));
}
