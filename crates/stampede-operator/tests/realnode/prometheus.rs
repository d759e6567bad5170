//! Prometheus in the loop: a real Prometheus (built from its Go module by
//! `tests/prometheus/build.sh`, `STAMPEDE_PROMETHEUS`; started here on 127.0.0.1)
//! scrapes the runner pods and the chart's operator the way the chart's PodMonitor and
//! ServiceMonitor describe (the same selection as `kubernetes_sd_configs` against the test API
//! server, `honor_labels`), every panel query of both Grafana dashboards returns data through
//! Prometheus's HTTP API, and the request count Prometheus holds equals the LoadTest's status,
//! with a scrape interval (10 s) longer than the run's tail: the runners stay up for one scrape
//! of their final figures.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use stampede_api::Phase;

use crate::harness::*;

/// A Prometheus process of this test, stopped when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The scrape configuration: runner pods of `ns` on their `metrics` port and the operator's pod
/// on its `http` port, as the chart's PodMonitor and ServiceMonitor select them.
fn scrape_config(kubeconfig: &Path, ns: &str) -> String {
    let job = |name: &str, namespace: &str, role: &str, port: &str| {
        format!(
            "  - job_name: {name}\n    honor_labels: true\n    metrics_path: /metrics\n    kubernetes_sd_configs:\n      \
             - role: pod\n        kubeconfig_file: {kubeconfig}\n        namespaces: {{names: [{namespace}]}}\n    \
             relabel_configs:\n      - {{source_labels: [__meta_kubernetes_pod_label_stampede_dev_role], regex: {role}, \
             action: keep}}\n      - {{source_labels: [__meta_kubernetes_pod_container_port_name], regex: {port}, \
             action: keep}}\n",
            kubeconfig = kubeconfig.display()
        )
    };
    format!(
        "global: {{scrape_interval: 10s, scrape_timeout: 5s, evaluation_interval: 10s}}\nscrape_configs:\n{}{}",
        job("stampede-runners", ns, "runner", "metrics"),
        job("stampede-operator", OPERATOR_NS, "operator", "http")
    )
}

fn start_prometheus(ns: &str) -> Prometheus {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(&config, scrape_config(cluster().kubeconfig(), ns)).unwrap();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let binary = std::env::var("STAMPEDE_PROMETHEUS").unwrap_or_else(|_| "prometheus".into());
    let child = Command::new(&binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address={addr}"))
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("{binary}: {e} (make e2e-node builds it: tests/prometheus/build.sh)"));
    let p = Prometheus { child, addr, _dir: dir };
    for _ in 0..300 {
        if get(addr, "/-/ready").is_some_and(|(status, _)| status == 200) {
            return p;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(p._dir.path().join("prometheus.log")).unwrap_or_default();
    panic!("Prometheus was not ready in 30 s:\n{log}");
}

/// GET on loopback: the status and the body.
fn get(addr: SocketAddr, path_and_query: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    write!(s, "GET {path_and_query} HTTP/1.0\r\nHost: prometheus\r\n\r\n").ok()?;
    let mut response = String::new();
    s.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A range query over `[start, end]`: the series and their values.
fn query_range(p: &Prometheus, query: &str, start: f64, end: f64) -> Result<Vec<serde_json::Value>, String> {
    let path = format!("/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step=5", encode(query));
    let (status, body) = get(p.addr, &path).ok_or("no answer")?;
    let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("{status}: {e}: {body}"))?;
    if v["status"] != "success" {
        return Err(format!("{status}: {body}"));
    }
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

/// An instant query's single value, if there is one.
fn query_value(p: &Prometheus, query: &str) -> Option<f64> {
    let (_, body) = get(p.addr, &format!("/api/v1/query?query={}", encode(query)))?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"].as_array()?.first()?["value"][1].as_str()?.parse().ok()
}

fn now_unix() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

/// Every panel target's expression of a dashboard, and every annotation's (the run's start, its
/// phases, its load changes, its end), with Grafana's variables filled in as a user looking at
/// this LoadTest would have them.
fn dashboard_queries(file: &str, ns: &str, lt: &str) -> Vec<(String, String)> {
    let path = repo().join("charts/stampede/dashboards").join(file);
    let d: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut panels: Vec<&serde_json::Value> = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        panels.push(p);
        panels.extend(p["panels"].as_array().into_iter().flatten());
    }
    let targets = panels.into_iter().flat_map(|p| {
        let title = p["title"].as_str().unwrap_or("?");
        p["targets"].as_array().into_iter().flatten().map(move |t| (format!("panel `{title}` {}", t["refId"]), t))
    });
    let annotations = d["annotations"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| (format!("annotation `{}`", a["name"].as_str().unwrap_or("?")), a));
    let mut out = Vec::new();
    for (place, t) in targets.chain(annotations) {
        let Some(expr) = t["expr"].as_str().filter(|e| !e.trim().is_empty()) else { continue };
        let q = expr
            .replace("${namespace}", ns)
            .replace("$namespace", ns)
            .replace("${loadtest}", lt)
            .replace("$loadtest", lt)
            .replace("${step}", ".*")
            .replace("$step", ".*")
            .replace("$__rate_interval", "1m")
            .replace("$__interval", "10s")
            .replace("$__range", "10m");
        assert!(!q.contains('$'), "{file}: a variable this test does not fill: {q}");
        out.push((format!("{file}: {place}"), q));
    }
    out
}

#[tokio::test]
#[ignore = "needs the real node: make e2e-node"]
async fn realnode_prometheus_scrapes_runners_and_operator_and_every_dashboard_query_has_data() {
    let client = cluster().client().await.unwrap();
    ensure_operator(&client).await;
    let ns = test_namespace(&client, "rn-prom").await;
    deploy_target(&client, &ns).await;
    let prometheus = start_prometheus(&ns);
    let t0 = now_unix();

    // An open model that a short stall of its slow step drops iterations from, with errors:
    // every panel has something to show.
    apply_loadtest(
        &ns,
        &format!(
            "apiVersion: stampede.dev/v1alpha1\nkind: LoadTest\nmetadata: {{name: watched}}\nspec:\n  runners: 3\n  \
             cleanup: {{onSuccess: none, onFailure: none}}\n  scenario:\n    name: watched\n    \
             baseUrl: http://target.{ns}.svc:{TARGET_PORT}\n    \
             load: {{executor: constant-arrival-rate, rate: 90, duration: 25s, preAllocatedVUs: 3, maxVUs: 6}}\n    \
             scenarios:\n      - name: s\n        steps:\n          \
             - {{name: get, request: {{url: \"{{{{baseUrl}}}}/get\"}}, check: {{status: 200}}}}\n          \
             - {{name: slow, request: {{url: \"{{{{baseUrl}}}}/delay/150\"}}}}\n          \
             - {{name: broken, request: {{url: \"{{{{baseUrl}}}}/status/503\"}}}}\n    \
             thresholds: [\"latency.p99 < 10s\"]\n"
        ),
    );
    // Its rate raised mid-run, as a user would: the dashboards mark the change.
    let lts: kube::Api<stampede_api::LoadTest> = kube::Api::namespaced(client.clone(), &ns);
    let running = |lt: Option<&stampede_api::LoadTest>| {
        lt.and_then(|l| l.status.as_ref()).is_some_and(|s| s.phase == Phase::Running)
    };
    stampede_testcluster::wait_for(&lts, "watched", Duration::from_secs(120), running).await.unwrap();
    let out = kubectl(
        &["-n", &ns, "patch", "loadtest", "watched", "--type=merge", "-p", r#"{"spec":{"live":{"rate":120}}}"#],
        None,
    );
    assert!(out.status.success(), "{}", text(&out));
    let lt = wait_finished(&client, &ns, "watched", Duration::from_secs(240)).await;
    let st = lt.status.unwrap();
    assert!(matches!(st.phase, Phase::Succeeded | Phase::Failed), "{:?}", st.message);
    let taken: Vec<Option<u32>> = st.live.iter().flat_map(|l| &l.changes).map(|c| c.rate).collect();
    assert_eq!(taken, [Some(120)], "the rate change, taken while it ran");
    let change_at = st.live.as_ref().unwrap().changes[0].at.clone();
    let summary = st.summary.unwrap();
    assert!(summary.requests > 0 && summary.dropped_iterations > 0, "{summary:?}");

    // Each runner stays up for a scrape of its final figures (the scrape interval is 10 s, so
    // the run's last seconds would otherwise be lost), then exits: its log says so.
    let pods = runner_pods(&client, &ns, "watched").await;
    let deadline = Instant::now() + Duration::from_secs(90);
    for pod in &pods {
        loop {
            let log = text(&kubectl(&["-n", &ns, "logs", &pod.name_any()], None));
            if log.contains("final figures scraped") {
                break;
            }
            assert!(!log.contains("no scrape of the final figures"), "{log}");
            assert!(Instant::now() < deadline, "runner {} was not scraped at its end:\n{log}", pod.name_any());
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    // What Prometheus holds: every runner's last count, adding up to the status.
    let total = format!("sum(max_over_time(stampede_requests_total{{namespace=\"{ns}\",loadtest=\"watched\"}}[10m]))");
    assert_eq!(query_value(&prometheus, &total), Some(summary.requests as f64), "{total}");
    let runners =
        format!("count(count by (runner) (stampede_requests_total{{namespace=\"{ns}\",loadtest=\"watched\"}}))");
    assert_eq!(query_value(&prometheus, &runners), Some(3.0), "every runner was scraped");

    // The operator's series: scraped from its pod, with this LoadTest's final summary. Its
    // gauges come from the status, so wait for a scrape after the test finished.
    let operator = format!("stampede_operator_loadtest_info{{namespace=\"{ns}\",loadtest=\"watched\"}}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while query_value(&prometheus, &format!("count({operator})")).is_none() {
        if Instant::now() >= deadline {
            let targets = get(prometheus.addr, "/api/v1/targets").map(|(_, b)| b).unwrap_or_default();
            let names = get(prometheus.addr, "/api/v1/label/__name__/values").map(|(_, b)| b).unwrap_or_default();
            panic!("the operator's series never came: {operator}\ntargets: {targets}\nnames: {names}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(11)).await;

    // Every panel query of both dashboards, as Grafana would ask it over the run.
    let end = now_unix();
    let mut empty = Vec::new();
    let mut asked = 0;
    for file in ["loadtest.json", "operator.json"] {
        for (place, q) in dashboard_queries(file, &ns, "watched") {
            asked += 1;
            match query_range(&prometheus, &q, t0, end) {
                Ok(series) if series.iter().any(|s| s["values"].as_array().is_some_and(|v| !v.is_empty())) => {}
                Ok(_) => empty.push(format!("{place}: no data: {q}")),
                Err(e) => empty.push(format!("{place}: {e}: {q}")),
            }
        }
    }
    eprintln!("{asked} dashboard queries asked of Prometheus");
    assert!(asked >= 65, "both dashboards' panels and annotations: {asked}");
    // The load-change annotation: at the change's instant (ms, as Grafana takes it), titled with it.
    let at = time::OffsetDateTime::parse(&change_at, &time::format_description::well_known::Rfc3339).unwrap();
    let at_ms = (at.unix_timestamp_nanos() / 1_000_000) as f64;
    let marked = format!(
        "max by (change) (stampede_operator_loadtest_load_change_timestamp_seconds{{namespace=\"{ns}\",\
         loadtest=\"watched\",change=\"rate 120/s\"}}) * 1000"
    );
    let value = query_value(&prometheus, &marked);
    assert!(value.is_some_and(|v| (v - at_ms).abs() < 1.0), "{marked}: {value:?}, the change at {at_ms} ms");
    assert!(empty.is_empty(), "{} of {asked} panel queries without data:\n{}", empty.len(), empty.join("\n"));
    delete_namespace(&client, &ns).await;
}
