//! The `stampede run` CLI's exposition, scraped from its `/metrics` while it runs: every runner
//! metric, label, unit and variable value the load-test dashboard reads is there.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use regex::Regex;
use serde_json::Value;

use super::exposition::Exposition;
use super::{
    Labels, VariableQuery, check_dashboard_against, evaluate_variables, exprs, is_operator_metric, load_dashboard,
    names, parse_variable_query, promql, variable_query, variables,
};

const SCENARIO_NAME: &str = "dashboards";

/// Two VUs against the built-in target; one step always fails its check, so errors of kind
/// `check` and status 500 responses are in the exposition too. Both steps are a `group` (a
/// transaction that always fails). The run is long and the timeout wide so that no busy machine
/// ends it or times a request out (a new connection) before the scrape; it is killed then.
const SCENARIO: &str = r#"
name: dashboards
baseUrl: builtin
load:
  executor: constant-vus
  vus: 2
  duration: 60s
http:
  timeout: 30s
scenarios:
  - name: browse
    steps:
      - group: visit
        steps:
          - name: home
            request: {url: "{{baseUrl}}/"}
            check: {status: 200}
          - name: broken
            request: {url: "{{baseUrl}}/status/500"}
            check: {status: 200}
            think: 5ms
"#;

struct CliScrape {
    exposition: Exposition,
    text: String,
}

/// Runs `stampede run --metrics-addr` once per test binary and scrapes `/metrics` during the
/// run, until every runner metric the load-test dashboard uses is there (or the run ends).
fn cli_scrape() -> &'static CliScrape {
    static SCRAPE: OnceLock<CliScrape> = OnceLock::new();
    SCRAPE.get_or_init(|| {
        let wanted = runner_metrics_of(&load_dashboard("loadtest.json"));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("scenario.yaml");
        std::fs::write(&file, SCENARIO).unwrap();
        let stderr_path = dir.path().join("stderr.txt");
        // Port 0: the CLI binds a free port and names it on stderr.
        let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["run", file.to_str().unwrap(), "--quiet", "--threads", "1", "--metrics-addr", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .expect("stampede starts");
        let deadline = Instant::now() + Duration::from_secs(30);
        let announced = Regex::new(r"metrics at http://([^/\s]+)/metrics").unwrap();
        let mut addr: Option<SocketAddr> = None;
        let mut last: Option<(String, Vec<String>)> = None;
        let outcome = loop {
            std::thread::sleep(Duration::from_millis(250));
            if addr.is_none() {
                let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                addr = announced.captures(&stderr).map(|c| c[1].parse().expect("a socket address"));
            }
            if let Some(Ok(text)) = addr.map(|addr| http_get(addr, "/metrics")) {
                let e = Exposition::parse(&text)
                    .unwrap_or_else(|err| panic!("the CLI's /metrics is not valid exposition text: {err}\n{text}"));
                let present = e.names();
                let missing: Vec<String> = wanted.iter().filter(|n| !present.contains(n.as_str())).cloned().collect();
                let running = e.series("stampede_active_vus").any(|s| s.value > 0.0);
                if missing.is_empty() && running {
                    break Ok(CliScrape { exposition: e, text });
                }
                last = Some((text, missing));
            }
            if let Ok(Some(status)) = child.try_wait() {
                break Err(format!("the run ended ({status}) before a complete scrape"));
            }
            if Instant::now() > deadline {
                break Err("no complete scrape in 30 s".to_string());
            }
        };
        let _ = child.kill();
        let _ = child.wait();
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        match outcome {
            Ok(scrape) => scrape,
            Err(why) => match last {
                Some((text, missing)) => {
                    panic!("{why}; missing {missing:?} in the last scrape:\n{text}\nstderr:\n{stderr}")
                }
                None => panic!("{why}; /metrics on {addr:?} never answered\nstderr:\n{stderr}"),
            },
        }
    })
}

/// The non-operator metric names the dashboard reads (from its queries, annotations and
/// variables).
fn runner_metrics_of(d: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in exprs(d) {
        out.extend(promql::parse(&e.expr).expect("parses").metric_names());
    }
    for v in variables(d).iter().filter(|v| v["type"] == "query") {
        match parse_variable_query(variable_query(v)) {
            Ok(VariableQuery::LabelValues { selector: Some(s), .. }) => out.extend(s.metric().map(str::to_string)),
            Ok(VariableQuery::QueryResult(q)) => out.extend(q.metric_names()),
            _ => {}
        }
    }
    out.retain(|n| !is_operator_metric(n));
    out
}

/// A plain HTTP/1.1 GET; the body as text.
fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").ok_or_else(|| std::io::Error::other("no end of headers"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(std::io::Error::other(format!("answered {}", head.lines().next().unwrap_or_default())));
    }
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if !chunked {
        return Ok(body.to_string());
    }
    let mut out = String::new();
    let mut rest = body;
    loop {
        let (size, after) = rest.split_once("\r\n").ok_or_else(|| std::io::Error::other("bad chunk"))?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or_default().trim(), 16)
            .map_err(|_| std::io::Error::other("bad chunk size"))?;
        if size == 0 {
            return Ok(out);
        }
        out.push_str(after.get(..size).ok_or_else(|| std::io::Error::other("short chunk"))?);
        rest = after.get(size + 2..).ok_or_else(|| std::io::Error::other("short chunk"))?;
    }
}

#[test]
fn cli_exposition_has_every_runner_metric_the_loadtest_dashboard_uses() {
    let d = load_dashboard("loadtest.json");
    let scrape = cli_scrape();
    let e = &scrape.exposition;
    // The CLI labels its series namespace="local", loadtest=<scenario name>; "All" steps.
    let values: Labels =
        [("namespace", "local".to_string()), ("loadtest", SCENARIO_NAME.to_string()), ("step", ".*".to_string())]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
    let checked = check_dashboard_against("loadtest.json", &d, e, &values, |n| !is_operator_metric(n));
    assert_eq!(checked, runner_metrics_of(&d));
    assert!(checked.len() >= 15, "{checked:?}");

    // Every runner series carries namespace, loadtest and runner: the dashboard filters and
    // groups on them.
    for s in e.samples.iter().filter(|s| s.name.starts_with("stampede_")) {
        for label in ["namespace", "loadtest", "runner"] {
            assert!(s.labels.contains_key(label), "{} {:?} lacks `{label}`\n{}", s.name, s.labels, scrape.text);
        }
    }
}

#[test]
fn cli_exposition_has_latency_phases_per_step() {
    let scrape = cli_scrape();
    let e = &scrape.exposition;
    assert_eq!(e.types.get("stampede_request_phase_duration_seconds").map(String::as_str), Some("histogram"));
    let count = |name: &str, step: &str, phase: Option<&str>| -> f64 {
        e.samples
            .iter()
            .filter(|s| s.name == name && s.labels.get("step").map(String::as_str) == Some(step))
            .filter(|s| phase.is_none_or(|p| s.labels.get("phase").map(String::as_str) == Some(p)))
            .map(|s| s.value)
            .sum()
    };
    for step in ["home", "broken"] {
        // One scrape is one snapshot: every answer has its time to first byte and receive.
        let responses = count("stampede_responses_total", step, None);
        assert!(responses > 0.0, "{step}: no responses in\n{}", scrape.text);
        for phase in ["ttfb", "receive"] {
            let n = count("stampede_request_phase_duration_seconds_count", step, Some(phase));
            assert_eq!(n, responses, "{step}/{phase}\n{}", scrape.text);
        }
        // Plain HTTP on an IP: no DNS or TLS series; no more connects than the 2 VUs' first
        // ones (keep-alive), the first request of each VU being `home`.
        for phase in ["dns", "tls"] {
            assert_eq!(count("stampede_request_phase_duration_seconds_count", step, Some(phase)), 0.0, "{phase}");
        }
    }
    assert_eq!(count("stampede_request_phase_duration_seconds_count", "home", Some("connect")), 2.0, "{}", scrape.text);
}

#[test]
fn cli_exposition_has_the_units_the_loadtest_dashboard_assumes() {
    let e = &cli_scrape().exposition;
    let sum = |name: &str| e.series(name).map(|s| s.value).sum::<f64>();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64();

    // Seconds since the epoch (the annotation multiplies by 1000 for Grafana's milliseconds).
    let start = e.series("stampede_run_start_timestamp_seconds").next().expect("a start timestamp").value;
    assert!((now - 120.0..=now + 5.0).contains(&start), "start {start} is not unix seconds near {now}");

    assert!(sum("stampede_requests_total") > 0.0);
    let vus = sum("stampede_active_vus");
    assert!(vus > 0.0 && vus <= sum("stampede_max_vus") && sum("stampede_max_vus") == 2.0, "active {vus}");
    assert!(sum("stampede_generator_cpu_seconds_total") > 0.0);
    let rss = sum("stampede_generator_resident_memory_bytes");
    assert!((1e6..8e9).contains(&rss), "RSS {rss} is not bytes");

    // The failing step shows up where the error panels look.
    let check_errors: f64 = e
        .series("stampede_errors_total")
        .filter(|s| s.labels.get("kind").map(String::as_str) == Some("check"))
        .map(|s| s.value)
        .sum();
    assert!(check_errors > 0.0, "no errors of kind check");
    assert!(e.series("stampede_responses_total").any(|s| s.labels.get("status").map(String::as_str) == Some("500")));

    // Latency histograms in seconds, cumulative, +Inf bucket = count: histogram_quantile and
    // the mean panel rely on it.
    // #23: the group's transactions, each failed (its `broken` step), by kind.
    let of_group = |name: &str| {
        e.series(name)
            .filter(|s| s.labels.get("group").map(String::as_str) == Some("visit"))
            .map(|s| s.value)
            .sum::<f64>()
    };
    let transactions = of_group("stampede_group_transactions_total");
    assert!(transactions > 0.0, "no transactions of group visit");
    assert_eq!(of_group("stampede_group_failures_total"), transactions, "every transaction failed");
    assert_eq!(of_group("stampede_group_duration_seconds_count"), transactions);
    for family in
        ["stampede_request_duration_seconds", "stampede_schedule_lag_seconds", "stampede_group_duration_seconds"]
    {
        // Series labels without `le` → (le, cumulative count) of each bucket.
        let mut by_series: BTreeMap<Labels, Vec<(f64, f64)>> = BTreeMap::new();
        for s in e.series(&format!("{family}_bucket")) {
            let le = s.labels.get("le").expect("a bucket has le");
            let le: f64 = if le == "+Inf" { f64::INFINITY } else { le.parse().expect("le is a number") };
            let mut key = s.labels.clone();
            key.remove("le");
            by_series.entry(key).or_default().push((le, s.value));
        }
        assert!(!by_series.is_empty(), "{family} has no buckets");
        for (labels, mut buckets) in by_series {
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{family} {labels:?} buckets not cumulative");
            let of = |suffix: &str| {
                e.series(&format!("{family}{suffix}"))
                    .find(|s| s.labels == labels)
                    .map(|s| s.value)
                    .expect("sum and count")
            };
            let last = buckets.last().unwrap();
            assert!(last.0.is_infinite() && last.1 == of("_count"), "{family} {labels:?}: +Inf bucket != count");
            if family != "stampede_schedule_lag_seconds" && of("_count") > 0.0 {
                let mean = of("_sum") / of("_count");
                assert!(mean > 0.0 && mean < 1.0, "{family} {labels:?}: mean {mean} is not seconds");
            }
        }
    }
}

#[test]
fn loadtest_dashboard_variables_resolve_against_the_cli_exposition() {
    let d = load_dashboard("loadtest.json");
    let e = &cli_scrape().exposition;
    let vars = evaluate_variables(&d, e).unwrap_or_else(|err| panic!("loadtest.json: {err}"));
    assert_eq!(vars["namespace"], names(&["local"]));
    assert_eq!(vars["loadtest"], names(&[SCENARIO_NAME]));
    assert_eq!(vars["step"], names(&["broken", "home"]));
}
