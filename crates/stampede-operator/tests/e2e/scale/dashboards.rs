//! Issue #35's benchmark (`make bench-dashboards`): what pages following a run cost the operator.
//! (`STAMPEDE_BENCH_STEPS` sets the steps, `STAMPEDE_BENCH_ITERATIONS` each runner's iterations:
//! 30 make a run long enough for both windows at 100 steps; see bench/RESULTS.md.)
//! One LoadTest of 50 runners (node-agent processes, one VU and two iterations each) and 100 steps, against a target
//! on 127.0.0.1; the operator as a process of its own with its dashboard on. For 20 s it runs with
//! no page, then 20 s with 10 pages following the run: each a stream of `…/events`, read as the
//! page reads it (the pages themselves are stood in for by these readers), made with a user's own
//! token (a ServiceAccount that may get, list and watch LoadTests).
//!
//! Printed (line `DASHBOARDS`): the operator's CPU (cores) and resident memory in each window,
//! its reconciles in the second (how many, their average length, and each part's; status writes refused),
//! and how long after a runner's interim write (as this test's own watch of the result
//! ConfigMaps saw it) a page was sent figures that include it. Asserted: exact counts only —
//! every request counted once, and every page's last event is the final status.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};
use stampede_api::{LoadTest, Phase, RESULT_KEY, RunnerReport, RunnerState, names};
use stampede_target::TargetServer;
use stampede_testcluster::{TestCluster, wait_for};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{OperatorProcess, delete_namespace, status_kib};
use crate::operator::{install_crds, loadtest, phase_is};

const RUNNERS: u32 = 50;
/// Steps of the scenario: `STAMPEDE_BENCH_STEPS`, default 100.
fn step_count() -> usize {
    std::env::var("STAMPEDE_BENCH_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(100)
}

/// Iterations of each runner: `STAMPEDE_BENCH_ITERATIONS`, default 2.
fn iterations() -> u32 {
    std::env::var("STAMPEDE_BENCH_ITERATIONS").ok().and_then(|s| s.parse().ok()).unwrap_or(2)
}
const PAGES: usize = 10;
const WINDOW: Duration = Duration::from_secs(20);

/// The operator's resident memory now (MiB).
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status_kib(&status, "VmRSS:").unwrap_or_default() / 1024.0
}

/// One page: each event's arrival and its `status.summary.requests` (and whether it is final).
type Seen = Arc<Mutex<Vec<(Instant, u64, bool)>>>;

/// Follows `path` as a page does, recording each event, until the stream ends or the task is
/// aborted.
async fn page(addr: std::net::SocketAddr, path: String, token: String, seen: Seen) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: dashboard\r\nAuthorization: Bearer {token}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let (mut text, mut buf) = (String::new(), vec![0u8; 1 << 16]);
    loop {
        let Ok(n) = stream.read(&mut buf).await else { return };
        if n == 0 {
            return;
        }
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
        // Whole lines only; a `data:` line is one event's JSON.
        while let Some(end) = text.find('\n') {
            let line: String = text.drain(..=end).collect();
            let Some(data) = line.strip_prefix("data: ") else { continue };
            let Ok(v) = serde_json::from_str::<Value>(data.trim_end()) else { continue };
            let summary = &v["status"]["summary"];
            let requests = summary["requests"].as_u64().unwrap_or(0);
            seen.lock().unwrap().push((Instant::now(), requests, summary["final"] == json!(true)));
        }
    }
}

/// Interim writes as seen: (when, the sum of every runner's latest interim requests then).
type Writes = Arc<Mutex<Vec<(Instant, u64)>>>;

/// Records each runner's interim writes as this process's watch sees them.
fn watch_interim(client: &kube::Client, ns: &str, lt: &str) -> (Writes, tokio::task::JoinHandle<()>) {
    let writes: Writes = Arc::default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let config = watcher::Config::default().labels(&format!("stampede.dev/loadtest={}", names::label_value(lt)));
    let record = writes.clone();
    let task = tokio::spawn(async move {
        let mut latest: BTreeMap<u32, u64> = BTreeMap::new();
        let events = watcher(api, config);
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            let Ok(watcher::Event::Apply(cm)) = event else { continue };
            let Some(text) = cm.data.as_ref().and_then(|d| d.get(RESULT_KEY)) else { continue };
            let Ok(report) = serde_json::from_str::<RunnerReport>(text) else { continue };
            let (RunnerState::Running, Some(live)) = (report.state, report.live.as_ref()) else { continue };
            if latest.insert(report.index, live.requests) != Some(live.requests) {
                record.lock().unwrap().push((Instant::now(), latest.values().sum()));
            }
        }
    });
    (writes, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "50 runner processes: make bench-dashboards"]
async fn e2e_scale_ten_pages_follow_a_hundred_step_fifty_runner_loadtest() {
    let cluster = TestCluster::shared();
    let client = cluster.client().await.unwrap();
    install_crds(&client).await;
    let ns = cluster.namespace(&client, "scale-dash").await.unwrap();
    let target = TargetServer::start(std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)), 2).unwrap();
    let mut operator = OperatorProcess::start_with(&ns, &["--dashboard-addr", "127.0.0.1:0"]);
    let mut addr = None;
    for _ in 0..600 {
        let log = std::fs::read_to_string(&operator.log).unwrap_or_default();
        addr = log
            .lines()
            .find_map(|l| l.split("serving the dashboard API on ").nth(1))
            .and_then(|a| a.trim().parse().ok());
        if addr.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let addr: std::net::SocketAddr = addr.expect("the operator said where its dashboard listens");

    // The user: may get, list and watch LoadTests here.
    let yaml = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: viewer, namespace: {ns}}}\n\
         rules: [{{apiGroups: [stampede.dev], resources: [loadtests], verbs: [get, list, watch]}}]\n"
    );
    assert!(cluster.kubectl_run(&["apply", "-f", "-"], Some(&yaml)).status.success());
    assert!(cluster.kubectl_run(&["create", "serviceaccount", "viewer", "-n", &ns], None).status.success());
    let binding = format!("--serviceaccount={ns}:viewer");
    assert!(
        cluster
            .kubectl_run(&["create", "rolebinding", "viewer", "-n", &ns, "--role=viewer", &binding], None)
            .status
            .success()
    );
    let out = cluster.kubectl_run(&["create", "token", "viewer", "-n", &ns, "--duration=30m"], None);
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();

    // 100 steps, one VU per runner, two iterations each (by default): ended by its iterations, so that every
    // request the target saw is counted (a run ended by a clock cuts the requests in flight at
    // its hard stop), and long enough on this machine for both windows.
    let steps: Vec<Value> = (0..step_count())
        .map(|i| json!({"name": format!("step-{i:03}"), "request": {"url": "{{baseUrl}}/get"}}))
        .collect();
    let sc = json!({
        "name": "dash", "baseUrl": target.base_url(),
        "load": {"executor": "constant-vus", "vus": RUNNERS, "iterations": RUNNERS * iterations()},
        "scenarios": [{"name": "s", "steps": steps}],
        // Judged live on every merge, as a user's thresholds are.
        "thresholds": ["latency.p99 < 10s", "errors.rate < 1%", "latency{step:step-000}.p95 < 10s"],
    });
    let extra = json!({"startTimeout": "20m", "runTimeout": "20m"});
    let api: Api<LoadTest> = Api::namespaced(client.clone(), &ns);
    let (writes, watch_task) = watch_interim(&client, &ns, "dash");
    api.create(&PostParams::default(), &loadtest("dash", RUNNERS as i32, sc, extra)).await.unwrap();
    let running = |lt: Option<&LoadTest>| {
        lt.and_then(|l| l.status.as_ref()).is_some_and(|s| s.phase == Phase::Running && s.summary.is_some())
    };
    wait_for(&api, "dash", Duration::from_secs(900), running).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;

    // Without pages.
    let pid = operator.child.id();
    let (cpu0, _) = operator.usage();
    let t0 = Instant::now();
    tokio::time::sleep(WINDOW).await;
    let (cpu1, _) = operator.usage();
    let without = ((cpu1 - cpu0) / t0.elapsed().as_secs_f64(), rss_mib(pid));

    // With 10 pages.
    let pages: Vec<(Seen, tokio::task::JoinHandle<()>)> = (0..PAGES)
        .map(|_| {
            let seen: Seen = Arc::default();
            let task =
                tokio::spawn(page(addr, format!("/api/loadtests/{ns}/dash/events"), token.clone(), seen.clone()));
            (seen, task)
        })
        .collect();
    let opened = Instant::now();
    let (cpu2, _) = operator.usage();
    let reconciles_before = operator.reconciles();
    let parts_before = operator.metrics();
    tokio::time::sleep(WINDOW).await;
    let (cpu3, _) = operator.usage();
    let reconciles_after = operator.reconciles();
    let parts_after = operator.metrics();
    let with = ((cpu3 - cpu2) / opened.elapsed().as_secs_f64(), rss_mib(pid));
    let window_end = Instant::now();
    let still = api.get("dash").await.unwrap().status.unwrap();
    assert_eq!(still.phase, Phase::Running, "the run ended before the windows did: raise STAMPEDE_BENCH_ITERATIONS");
    assert_eq!(still.thresholds.len(), 3, "the thresholds, judged live: {:?}", still.thresholds);

    let lt =
        wait_for(&api, "dash", Duration::from_secs(900), phase_is(&[Phase::Succeeded, Phase::Failed])).await.unwrap();
    // The pages get the final status, then the test closes them.
    let summary = lt.status.clone().unwrap().summary.unwrap();
    for (seen, _) in &pages {
        for _ in 0..600 {
            if seen.lock().unwrap().last().is_some_and(|e| e.2) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    watch_task.abort();
    for (_, task) in &pages {
        task.abort();
    }
    assert_eq!(summary.requests, target.stats().requests(), "every request counted once");
    assert_eq!(lt.status.as_ref().unwrap().thresholds.len(), 3, "the final verdicts");
    for (i, (seen, _)) in pages.iter().enumerate() {
        let last = *seen.lock().unwrap().last().expect("the page got events");
        assert_eq!((last.1, last.2), (summary.requests, true), "page {i} ends with the final status");
    }

    // From each interim write in the window to the first event of page 0 that includes it.
    let events = pages[0].0.lock().unwrap().clone();
    let mut delays: Vec<f64> = writes
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, _)| *at >= opened && *at <= window_end)
        .filter_map(|(at, total)| {
            events.iter().find(|(e, requests, _)| e >= at && requests >= total).map(|(e, ..)| (*e - *at).as_secs_f64())
        })
        .collect();
    delays.sort_by(f64::total_cmp);
    let pct = |p: usize| delays.get((delays.len().max(1) - 1) * p / 100).copied().unwrap_or(f64::NAN);
    let status_bytes = super::status_bytes(&ns, "dash");
    // Where the reconciles' time went: each part's count and total in the window.
    let parts: Vec<String> = parts_after
        .iter()
        .filter_map(|(series, sum)| {
            let part = series.strip_prefix("stampede_operator_reconcile_part_seconds_sum{part=\"")?;
            let part = part.strip_suffix("\"}")?;
            let count_series = format!("stampede_operator_reconcile_part_seconds_count{{part=\"{part}\"}}");
            let count = parts_after.get(&count_series)? - parts_before.get(&count_series).copied().unwrap_or(0.0);
            let sum = sum - parts_before.get(series).copied().unwrap_or(0.0);
            Some(format!("{part} {count} × {:.1} ms", sum * 1000.0 / count.max(1.0)))
        })
        .collect();
    eprintln!(
        "DASHBOARDS {RUNNERS} runners × {} steps, {PAGES} pages: operator CPU {:.3} cores without pages, {:.3} with \
         (+{:.3}); RSS {:.1} MiB without, {:.1} MiB with (+{:.1}); interim write → page: p50 {:.2} s, p90 {:.2} s, \
         max {:.2} s over {} writes; {} events per page; status {status_bytes} bytes; requests {} (exact); \
         with pages: {} reconciles, {:.1} ms each on average; their parts: {}; status writes refused: {}",
        step_count(),
        without.0,
        with.0,
        with.0 - without.0,
        without.1,
        with.1,
        with.1 - without.1,
        pct(50),
        pct(90),
        pct(100),
        delays.len(),
        events.len(),
        summary.requests,
        reconciles_after.0 - reconciles_before.0,
        (reconciles_after.1 - reconciles_before.1) * 1000.0 / (reconciles_after.0 - reconciles_before.0).max(1.0),
        parts.join(", "),
        parts_after.get("stampede_operator_status_conflicts_total").copied().unwrap_or(0.0)
            - parts_before.get("stampede_operator_status_conflicts_total").copied().unwrap_or(0.0),
    );
    drop(operator);
    target.stop();
    delete_namespace(&client, &ns).await;
}
