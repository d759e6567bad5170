//! Prometheus metrics: the runners' latency histograms merged with PromQL agree with the
//! operator's merged summary, and the operator's own series describe its LoadTests.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;

use stampede_api::{LoadTest, LoadTestSpec, LoadTestStatus, Phase, RunnerReport, RunnerState, Summary};
use stampede_engine::portable;
use stampede_engine::{CompileOptions, RunOptions};
use stampede_engine::{Exporter, MetricsServer};
use stampede_operator::metrics::Metrics;
use stampede_operator::results::final_summary;
use stampede_target::TargetServer;

/// One parsed sample: name, labels, value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the Prometheus text format (the subset our encoders write: no timestamps, label
/// values without escaped quotes).
fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').expect("`series value`");
        let value = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').expect("closing brace");
                let labels = body
                    .split("\",")
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        let (k, v) = p.split_once("=\"").expect("label=\"value\"");
                        (k.to_string(), v.trim_end_matches('"').to_string())
                    })
                    .collect();
                (name.to_string(), labels)
            }
        };
        out.push(Sample { name, labels, value });
    }
    out
}

fn scrape(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"), "{head}");
    body.to_string()
}

/// PromQL's `histogram_quantile(q, buckets)`: linear interpolation inside the bucket that
/// holds rank q·count; the lowest bucket starts at 0; a rank in +Inf gives the highest bound.
fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> f64 {
    let total = buckets.last().unwrap().1;
    let rank = q * total;
    let i = buckets.iter().position(|(_, c)| *c >= rank).unwrap();
    if buckets[i].0.is_infinite() {
        return buckets[i - 1].0;
    }
    let (lower, below) = if i == 0 { (0.0, 0.0) } else { buckets[i - 1] };
    let (upper, count) = buckets[i];
    lower + (upper - lower) * (rank - below) / (count - below)
}

/// The bucket `(lower, upper]` that holds `x`.
fn bucket_of(x: f64, bounds: &[f64]) -> (f64, f64) {
    let i = bounds.iter().position(|b| x <= *b).unwrap();
    (if i == 0 { 0.0 } else { bounds[i - 1] }, bounds[i])
}

const SCENARIO: &str = r#"
name: merge
baseUrl: builtin
load: {executor: constant-vus, vus: 2, iterations: ITERATIONS}
vars: {delay: "DELAY"}
scenarios:
  - name: api
    steps:
      - {name: slow, request: {url: "{{baseUrl}}/delay/{{delay}}"}}
"#;

/// Three runners with different latency: the p99 PromQL computes from the sum of their
/// scraped buckets lies in the same bucket as the p99 of the operator's merged summary.
#[test]
fn promql_over_three_runners_buckets_agrees_with_the_merged_summary() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    // Fast, medium and a slow runner with few requests: its tail decides the p99.
    let runners = [(300, 1), (300, 4), (40, 60)];
    let mut reports = Vec::new();
    let mut expositions = Vec::new();
    let mut plan = None;
    for (index, (iterations, delay)) in runners.iter().enumerate() {
        let yaml = SCENARIO.replace("ITERATIONS", &iterations.to_string()).replace("DELAY", &delay.to_string());
        let path = Path::new("merge.yaml");
        let file = stampede_engine::parse_str(&yaml, path).unwrap();
        let opts = CompileOptions { base_url: Some(target.base_url()), ..CompileOptions::default() };
        let prepared = stampede_engine::prepare(&file, path, opts).unwrap();
        let exporter = Arc::new(Exporter::new(
            &prepared.plan,
            vec![
                ("namespace".into(), "perf".into()),
                ("loadtest".into(), "merge".into()),
                ("runner".into(), index.to_string()),
            ],
        ));
        let server = MetricsServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), exporter.clone()).unwrap();
        plan = Some(prepared.plan.clone());
        let run_opts = RunOptions { totals: true, ..RunOptions::default() };
        let (_, outcome) = stampede_engine::execute_full(prepared, &run_opts, &mut |t| exporter.observe(t)).unwrap();
        expositions.push(scrape(server.addr()));
        let keys = &plan.as_ref().unwrap().step_keys;
        reports.push(RunnerReport {
            duration_seconds: outcome.duration.as_secs_f64(),
            result: Some(portable::encode(keys, &outcome.metrics, &["api".to_string()])),
            ..RunnerReport::new(index as u32, RunnerState::Done)
        });
    }
    target.stop();
    let plan = plan.unwrap();
    let ctx = stampede_operator::results::ReportContext {
        loadtest: "perf/merge",
        start_at: None,
        baseline: Err("none"),
        live: &[],
    };
    let summary = final_summary(&plan, &reports.iter().collect::<Vec<_>>(), &ctx).unwrap().summary;

    // sum by (le) (stampede_request_duration_seconds_bucket{namespace="perf",loadtest="merge"})
    let mut by_le: BTreeMap<String, f64> = BTreeMap::new();
    let mut counts = 0.0;
    let mut counters: BTreeMap<String, f64> = BTreeMap::new();
    let mut runner_p99s = Vec::new();
    for text in &expositions {
        let samples = parse_exposition(text);
        let mut mine = Vec::new();
        for s in samples.iter().filter(|s| s.labels.get("loadtest").map(String::as_str) == Some("merge")) {
            if s.name.ends_with("_total") && s.labels.get("status").is_none_or(|st| st == "200") {
                *counters.entry(s.name.clone()).or_default() += s.value;
            }
            if s.name == "stampede_request_duration_seconds_bucket" {
                *by_le.entry(s.labels["le"].clone()).or_default() += s.value;
                mine.push((le(&s.labels["le"]), s.value));
            }
            if s.name == "stampede_request_duration_seconds_count" {
                counts += s.value;
            }
        }
        mine.sort_by(|a, b| a.0.total_cmp(&b.0));
        runner_p99s.push(histogram_quantile(0.99, &mine));
    }
    let mut buckets: Vec<(f64, f64)> = by_le.into_iter().map(|(k, v)| (le(&k), v)).collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total_requests: u64 = runners.iter().map(|(n, _)| *n as u64).sum();
    assert_eq!(counts as u64, total_requests, "every answered request is in the histograms");
    assert_eq!(summary.requests, total_requests);
    assert_eq!(counters["stampede_requests_total"] as u64, total_requests);
    assert_eq!(counters["stampede_responses_total"] as u64, total_requests, "all answered 200");
    assert_eq!(counters["stampede_iterations_total"] as u64, total_requests);
    assert_eq!(counters["stampede_errors_total"], 0.0);
    assert!(counters["stampede_received_bytes_total"] as u64 == summary.bytes_received && summary.bytes_received > 0);

    let promql_p99 = histogram_quantile(0.99, &buckets);
    let merged_p99 = summary.latency_ms.p99 / 1000.0;
    let bounds: Vec<f64> = buckets.iter().map(|b| b.0).collect();
    let bucket = bucket_of(merged_p99, &bounds);
    println!("p99: merged summary {merged_p99:.4} s, PromQL {promql_p99:.4} s, bucket {bucket:?}");
    assert_eq!(bucket_of(promql_p99, &bounds), bucket, "PromQL {promql_p99} vs merged {merged_p99}");
    assert!(merged_p99 >= 0.060, "the slow runner's tail decides the p99: {merged_p99}");
    // Averaging per-runner p99s (what a wrong dashboard would do) gives another figure; which
    // bucket it lands in depends on how fast this machine answered the fast runners (on a busy
    // one their p99 reached 50 ms), so it is printed, not asserted (#22: no test may depend on
    // the machine's speed).
    let averaged = runner_p99s.iter().sum::<f64>() / runner_p99s.len() as f64;
    println!("averaged per-runner p99s: {averaged:.4} s (bucket {:?})", bucket_of(averaged, &bounds));
}

fn le(s: &str) -> f64 {
    if s == "+Inf" { f64::INFINITY } else { s.parse().unwrap() }
}

fn loadtest(name: &str, phase: Option<Phase>, summary: Option<Summary>) -> Arc<LoadTest> {
    let spec: LoadTestSpec = serde_json::from_value(serde_json::json!({"runners": 1, "scenario": {}})).unwrap();
    let mut lt = LoadTest::new(name, spec);
    lt.metadata.namespace = Some("perf".into());
    lt.status = phase.map(|phase| LoadTestStatus {
        phase,
        start_time: Some("2026-11-30T10:00:00Z".into()),
        completion_time: phase.is_finished().then(|| "2026-11-30T10:01:00Z".into()),
        summary,
        ..LoadTestStatus::default()
    });
    Arc::new(lt)
}

#[test]
fn operator_metrics_count_phases_and_keep_finished_summaries() {
    let mut summary = Summary {
        is_final: true,
        requests: 12_000,
        rps: 200.0,
        error_rate: 0.01,
        dropped_iterations: 42,
        ..Summary::default()
    };
    summary.latency_ms.p50 = 4.0;
    summary.latency_ms.p95 = 9.0;
    summary.latency_ms.p99 = 12.5;
    summary.duration_seconds = 60.0;
    let lts = vec![
        loadtest("new", None, None),
        loadtest("running", Some(Phase::Running), Some(Summary { is_final: false, ..Summary::default() })),
        loadtest("done", Some(Phase::Succeeded), Some(summary)),
        loadtest("broken", Some(Phase::Failed), None),
    ];
    let m = Metrics::default();
    m.reconciles.inc();
    m.errors.with_label_values(&["kube"]).inc();
    let samples = parse_exposition(&m.render_with(&lts));
    let value = |name: &str, labels: &[(&str, &str)]| -> Option<f64> {
        samples
            .iter()
            .find(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
            .map(|s| s.value)
    };
    assert_eq!(value("stampede_operator_reconciles_total", &[]), Some(1.0));
    assert_eq!(value("stampede_operator_reconcile_errors_total", &[("kind", "kube")]), Some(1.0));
    assert_eq!(value("stampede_operator_reconcile_errors_total", &[("kind", "unavailable")]), Some(0.0));
    assert_eq!(value("stampede_operator_reconcile_duration_seconds_count", &[]), Some(0.0));
    assert_eq!(value("stampede_operator_status_conflicts_total", &[]), Some(0.0));
    // Each part of a reconcile is there from the start, and a timed part counts once.
    drop(m.part("status"));
    let samples = parse_exposition(&m.render_with(&lts));
    let count = |part: &str| {
        samples
            .iter()
            .find(|s| {
                s.name == "stampede_operator_reconcile_part_seconds_count"
                    && s.labels.get("part").map(String::as_str) == Some(part)
            })
            .map(|s| s.value)
    };
    assert_eq!(stampede_operator::metrics::RECONCILE_PARTS.map(count), [0.0, 0.0, 0.0, 1.0, 0.0, 0.0].map(Some));
    for (phase, n) in [("Pending", 1.0), ("Running", 1.0), ("Succeeded", 1.0), ("Failed", 1.0), ("Aborted", 0.0)] {
        assert_eq!(value("stampede_operator_loadtests", &[("phase", phase)]), Some(n), "{phase}");
    }
    let done = [("namespace", "perf"), ("loadtest", "done")];
    assert_eq!(value("stampede_operator_loadtest_info", &[("loadtest", "done"), ("phase", "Succeeded")]), Some(1.0));
    assert_eq!(value("stampede_operator_loadtest_requests_per_second", &done), Some(200.0));
    assert_eq!(value("stampede_operator_loadtest_error_ratio", &done), Some(0.01));
    assert_eq!(value("stampede_operator_loadtest_requests", &done), Some(12_000.0));
    assert_eq!(value("stampede_operator_loadtest_dropped_iterations", &done), Some(42.0));
    assert_eq!(
        value("stampede_operator_loadtest_latency_seconds", &[("loadtest", "done"), ("quantile", "0.99")]),
        Some(0.0125)
    );
    assert_eq!(value("stampede_operator_loadtest_duration_seconds", &done), Some(60.0));
    let started = value("stampede_operator_loadtest_start_timestamp_seconds", &done).unwrap();
    let completed = value("stampede_operator_loadtest_completion_timestamp_seconds", &done).unwrap();
    assert_eq!(completed - started, 60.0);
    // A running test has no final summary series; the failed one has no summary at all.
    assert_eq!(value("stampede_operator_loadtest_requests_per_second", &[("loadtest", "running")]), None);
    assert_eq!(value("stampede_operator_loadtest_thresholds_failed", &[("loadtest", "broken")]), Some(0.0));
    assert_eq!(value("stampede_operator_loadtest_requests_per_second", &[("loadtest", "broken")]), None);
    // A deleted LoadTest leaves no series behind.
    let samples_after = parse_exposition(&m.render_with(&lts[..1]));
    assert!(!samples_after.iter().any(|s| s.labels.get("loadtest").map(String::as_str) == Some("done")));
}

/// Prometheus 3 refuses a scrape whose answer has no content type ("non-compliant scrape
/// target sending blank Content-Type"): the operator's `/metrics` names the text format.
#[test]
fn the_operators_metrics_say_their_content_type_and_its_probes_answer() {
    let m = Metrics::default();
    let r = stampede_operator::metrics::http_response("/metrics", &m);
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()[http::header::CONTENT_TYPE], "text/plain; version=0.0.4; charset=utf-8");
    for probe in ["/healthz", "/readyz"] {
        assert_eq!(stampede_operator::metrics::http_response(probe, &m).status(), 200, "{probe}");
    }
    assert_eq!(stampede_operator::metrics::http_response("/nope", &m).status(), 404);
}
