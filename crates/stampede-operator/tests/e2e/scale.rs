//! Issue #17, item 5: the operator at scale on the node-agent cluster (`make bench-scale`, not
//! `make e2e`: `tests/cluster/e2e.sh` skips `scale::` unless `STAMPEDE_SCALE=1`). LoadTests of
//! 100 and 300 runners, and 50 LoadTests of 2 runners at once, each against a target on
//! 127.0.0.1.
//!
//! The operator runs as its own process (the `stampede-operator` binary, watching the test's
//! namespace only), so that its CPU time and peak memory are its own. Runner pods are local
//! `stampede runner` processes of the node agent; their memory is sampled from `/proc`.
//!
//! The tests assert exact counts only (every LoadTest's merged `status.summary.requests` is its
//! runners' iterations and what its own target counted) and print the timings; the figures are
//! in bench/RESULTS.md (section `bench/scale`).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use stampede_api::{LoadTest, Phase, RESULT_KEY, RunnerReport, RunnerState, names};
use stampede_target::TargetServer;
use stampede_testcluster::{TestCluster, wait_for};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::operator::{install_crds, loadtest, phase_is, scenario};

mod dashboards;

/// Seconds of CPU time from `/proc/<pid>/stat` (user + system), and the peak resident set
/// (`VmHWM`, MiB) from `/proc/<pid>/status`.
fn usage(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some((ticks / clock_ticks(), status_kib(&status, "VmHWM:")? / 1024.0))
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

fn status_kib(status: &str, key: &str) -> Option<f64> {
    status.lines().find(|l| l.starts_with(key))?.split_whitespace().nth(1)?.parse().ok()
}

/// The operator as a process of its own, watching `ns` only; killed when dropped.
struct OperatorProcess {
    child: std::process::Child,
    log: PathBuf,
}

impl OperatorProcess {
    fn start(ns: &str) -> Self {
        Self::start_with(ns, &[])
    }

    /// With `extra` arguments.
    fn start_with(ns: &str, extra: &[&str]) -> Self {
        let log = std::env::temp_dir().join(format!("stampede-{ns}-operator.log"));
        let file = std::fs::File::create(&log).unwrap();
        // `STAMPEDE_OPERATOR_BIN`: another build of it (the benchmarks run a release build).
        let bin =
            std::env::var("STAMPEDE_OPERATOR_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_stampede-operator").into());
        let child = std::process::Command::new(bin)
            .args(["--namespace", ns, "--http-addr", "127.0.0.1:0"])
            .args(extra)
            .env("KUBECONFIG", TestCluster::shared().kubeconfig())
            .env("RUST_LOG", "info,kube=warn")
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        OperatorProcess { child, log }
    }

    /// CPU seconds and peak RSS (MiB) so far.
    fn usage(&mut self) -> (f64, f64) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the operator exited; its log: {}\n{}",
            self.log.display(),
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
        usage(self.child.id()).unwrap_or_default()
    }
}

impl OperatorProcess {
    /// Every sample of the operator's `/metrics` now, by series (name with its labels).
    fn metrics(&self) -> std::collections::BTreeMap<String, f64> {
        use std::io::{Read, Write};
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let Some(addr) = log.lines().find_map(|l| l.split("/metrics on ").nth(1)).map(str::trim) else {
            return Default::default();
        };
        let Ok(mut conn) = std::net::TcpStream::connect(addr) else { return Default::default() };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = write!(conn, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        let mut text = String::new();
        let _ = conn.read_to_string(&mut text);
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (series, value) = l.rsplit_once(' ')?;
                Some((series.to_string(), value.parse().ok()?))
            })
            .collect()
    }

    /// Requests the operator made to the API server, by verb (`list configmaps`, `patch
    /// loadtests/status`…), from its `/metrics`.
    fn api_requests(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for (series, value) in self.metrics() {
            let Some(labels) = series.strip_prefix("stampede_operator_api_requests_total{") else { continue };
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|l| l.strip_prefix(&format!("{name}=\"")))
                    .map(|v| v.trim_end_matches(['"', '}']))
            };
            if let (Some(verb), Some(resource)) = (label("verb"), label("resource")) {
                *out.entry(format!("{verb} {resource}")).or_default() += value;
            }
        }
        out
    }

    /// Reconciles run and their total seconds, from the operator's `/metrics`.
    fn reconciles(&self) -> (f64, f64) {
        let m = self.metrics();
        let value = |name: &str| m.get(name).copied().unwrap_or(0.0);
        (value("stampede_operator_reconciles_total"), value("stampede_operator_reconcile_duration_seconds_sum"))
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU seconds of the control plane's processes (kube-apiserver, etcd, controller manager,
/// scheduler, node agent), from the cluster's `pids` record.
fn control_plane_cpu() -> BTreeMap<String, f64> {
    let pids = std::fs::read_to_string(TestCluster::shared().state_dir().join("pids")).unwrap_or_default();
    pids.lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let (name, pid) = (parts.next()?, parts.next()?.parse().ok()?);
            Some((name.to_string(), usage(pid)?.0))
        })
        .collect()
}

/// Samples the `stampede runner` processes every 200 ms: the peak of their summed RSS, the
/// largest single RSS and the most alive at once.
struct RunnerMemory {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(f64, f64, usize)>>,
}

impl RunnerMemory {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut peak_total, mut peak_one, mut most) = (0.0f64, 0.0f64, 0usize);
            while !flag.load(Ordering::Relaxed) {
                let (mut total, mut alive) = (0.0, 0);
                for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                    let dir = entry.path();
                    let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else { continue };
                    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
                    let runner = args.len() >= 2 && args[0].ends_with(b"/stampede") && args[1] == b"runner";
                    if !runner {
                        continue;
                    }
                    let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
                    if let Some(kib) = status_kib(&status, "VmRSS:") {
                        total += kib / 1024.0;
                        peak_one = peak_one.max(kib / 1024.0);
                        alive += 1;
                    }
                }
                peak_total = peak_total.max(total);
                most = most.max(alive);
                std::thread::sleep(Duration::from_millis(200));
            }
            (peak_total, peak_one, most)
        });
        RunnerMemory { stop, thread: Some(thread) }
    }

    /// Peak summed RSS (MiB), largest single RSS (MiB), most runner processes at once.
    fn finish(mut self) -> (f64, f64, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

fn mem_available_gib() -> f64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    status_kib(&meminfo, "MemAvailable:").unwrap_or_default() / 1024.0 / 1024.0
}

fn status_bytes(ns: &str, name: &str) -> usize {
    let out = TestCluster::shared().kubectl().args(["get", "loadtest", name, "-n", ns, "-o", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout.len()
}

fn rfc3339(text: Option<&str>) -> OffsetDateTime {
    OffsetDateTime::parse(text.expect("a time"), &Rfc3339).unwrap()
}

fn secs(d: time::Duration) -> f64 {
    d.as_seconds_f64()
}

/// Watches the result ConfigMaps of `lt` and records when each runner's `Done` report was
/// first seen (by this process, through the API server's watch).
fn watch_results(
    client: &Client,
    ns: &str,
    lt: &str,
) -> (Arc<Mutex<BTreeMap<u32, Instant>>>, tokio::task::JoinHandle<()>) {
    let seen: Arc<Mutex<BTreeMap<u32, Instant>>> = Arc::default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let config = watcher::Config::default().labels(&format!("stampede.dev/loadtest={}", names::label_value(lt)));
    let record = seen.clone();
    let task = tokio::spawn(async move {
        let events = watcher(api, config);
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            let cm = match event {
                Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => cm,
                _ => continue,
            };
            let Some(text) = cm.data.as_ref().and_then(|d| d.get(RESULT_KEY)) else { continue };
            let Ok(report) = serde_json::from_str::<RunnerReport>(text) else { continue };
            if report.state == RunnerState::Done {
                record.lock().unwrap().entry(report.index).or_insert_with(Instant::now);
            }
        }
    });
    (seen, task)
}

/// Counts the versions of LoadTest `lt` seen by a watch (each status write is one, and each is
/// sent to every runner, which watches its LoadTest until it starts and while it runs).
fn watch_versions(client: &Client, ns: &str, lt: &str) -> (Arc<Mutex<usize>>, tokio::task::JoinHandle<()>) {
    let seen: Arc<Mutex<usize>> = Arc::default();
    let api: Api<LoadTest> = Api::namespaced(client.clone(), ns);
    let config = watcher::Config::default().fields(&format!("metadata.name={lt}"));
    let count = seen.clone();
    let task = tokio::spawn(async move {
        let events = watcher(api, config);
        futures::pin_mut!(events);
        let mut versions = std::collections::BTreeSet::new();
        while let Some(event) = events.next().await {
            if let Ok(watcher::Event::Apply(lt) | watcher::Event::InitApply(lt)) = event {
                versions.insert(lt.resource_version().unwrap_or_default());
                *count.lock().unwrap() = versions.len();
            }
        }
    });
    (seen, task)
}

/// One LoadTest of `runners` runners, one VU and `per_runner` iterations each, against a target
/// on 127.0.0.1: exact counts asserted, the timings printed. With a `think` time after each
/// request, the runners run long enough to write interim results (every 2 s) as in a real test.
async fn many_runners(runners: u32, per_runner: u64, think: Option<&str>) {
    let cluster = TestCluster::shared();
    let client = cluster.client().await.unwrap();
    install_crds(&client).await;
    let ns = cluster.namespace(&client, &format!("scale-{runners}")).await.unwrap();
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 2).unwrap();
    let mut operator = OperatorProcess::start(&ns);
    let name = format!("r{runners}");
    let iterations = u64::from(runners) * per_runner;
    let load = serde_json::json!({"executor": "constant-vus", "vus": runners, "iterations": iterations});
    let mut sc = scenario(&target.base_url(), load, "/get", &["errors.rate == 0%"]);
    if let Some(think) = think {
        sc["scenarios"][0]["steps"][0]["think"] = think.into();
    }
    // The pods stay (their processes are gone) so that their creation times can be read.
    let extra = serde_json::json!({"startTimeout": "20m", "runTimeout": "20m", "cleanup": {"onSuccess": "none"}});
    let lt = loadtest(&name, runners as i32, sc, extra);
    eprintln!("{runners} runners: {:.1} GiB of memory available before the start", mem_available_gib());

    let (done_seen, watch_task) = watch_results(&client, &ns, &name);
    let (versions, versions_task) = watch_versions(&client, &ns, &name);
    let memory = RunnerMemory::start();
    let plane_before = control_plane_cpu();
    let applied = OffsetDateTime::now_utc();
    let api: Api<LoadTest> = Api::namespaced(client.clone(), &ns);
    api.create(&PostParams::default(), &lt).await.unwrap();
    let finished = phase_is(&[Phase::Succeeded, Phase::Failed, Phase::Aborted]);
    let lt = wait_for(&api, &name, Duration::from_secs(1800), finished).await.unwrap();
    let merged_seen = Instant::now();
    let (cpu, peak_rss) = operator.usage();
    let (reconciles, reconcile_secs) = operator.reconciles();
    let requests = operator.api_requests();
    let plane_after = control_plane_cpu();
    let st = lt.status.clone().unwrap();
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    let summary = st.summary.clone().unwrap();
    assert!(summary.is_final);
    assert_eq!(summary.requests, iterations, "status.summary.requests = runners × iterations");
    assert_eq!(target.stats().requests(), iterations, "the target counted every request once");
    assert_eq!(st.runners.desired, runners as i32);

    let reps = runner_reports(&client, &ns, &name).await;
    assert_eq!(reps.len(), runners as usize);
    let sum: u64 = reps.iter().map(|r| r.result.as_ref().unwrap().steps.iter().map(|s| s.requests).sum::<u64>()).sum();
    assert_eq!(sum, iterations, "status = sum of the runner results");
    for r in &reps {
        let own: u64 = r.result.as_ref().unwrap().steps.iter().map(|s| s.requests).sum();
        assert_eq!(own, per_runner, "runner {} ran exactly its share", r.index);
    }
    let start_at = rfc3339(st.start_at.as_deref());
    let starts: Vec<OffsetDateTime> = reps.iter().map(|r| rfc3339(r.started_at.as_deref())).collect();
    let (first, last) = (*starts.iter().min().unwrap(), *starts.iter().max().unwrap());
    let mut offsets: Vec<f64> = starts.iter().map(|s| secs(*s - start_at) * 1000.0).collect();
    offsets.sort_by(f64::total_cmp);
    let pct = |p: usize| offsets[(offsets.len() - 1) * p / 100];
    assert!(first >= start_at, "a runner started {:?} before startAt", start_at - first);
    let ends = reps.iter().zip(&starts).map(|(r, s)| *s + time::Duration::seconds_f64(r.duration_seconds));
    let last_end = ends.max().unwrap();
    let completion = rfc3339(st.completion_time.as_deref());
    let seen = done_seen.lock().unwrap().clone();
    watch_task.abort();
    versions_task.abort();
    let versions = *versions.lock().unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &ns);
    let pod_lp = ListParams::default().labels(&format!("stampede.dev/loadtest={}", names::label_value(&name)));
    let created: Vec<OffsetDateTime> = pods
        .list(&pod_lp)
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|p| p.metadata.creation_timestamp.as_ref())
        .map(|t| rfc3339(Some(&t.0.to_string())))
        .collect();
    let pods_spread = created.iter().max().zip(created.iter().min()).map(|(a, b)| secs(*a - *b)).unwrap_or_default();
    let last_done_seen = seen.values().max().copied();
    let size = status_bytes(&ns, &name);
    let (runner_total, runner_one, alive) = memory.finish();
    let plane: Vec<String> = plane_after
        .iter()
        .map(|(k, v)| format!("{k} {:.1}", v - plane_before.get(k).copied().unwrap_or_default()))
        .collect();

    eprintln!(
        "SCALE {runners} runners × {per_runner} iterations: apply → startAt {:.2} s (all ready {:.2} s); \
         apply → all runners started {:.2} s; start skew (spread) {:.1} ms, offset from startAt p50 {:.1} / p90 {:.1} / max {:.1} ms; \
         last runner's end → completionTime {:.2} s; last Done result seen → merged status seen {}; \
         status {size} bytes, {versions} versions of the LoadTest seen; operator CPU {cpu:.1} s, peak RSS \
         {peak_rss:.0} MiB, {reconciles} reconciles taking {reconcile_secs:.1} s in all; \
         {} pods created over {pods_spread:.0} s (creation times, 1 s resolution); runners: peak total RSS {runner_total:.0} MiB, largest {runner_one:.1} MiB, {alive} alive at once; \
         Done results seen {} of {runners}; control plane CPU s: {}; requests {} (exact)\n\
         SCALE {runners} start parts: {}\n\
         SCALE {runners} API requests of the operator: {}",
        secs(start_at - applied),
        secs(start_at - applied) - 3.0,
        secs(last - applied),
        secs(last - first) * 1000.0,
        pct(50),
        pct(90),
        secs(last - start_at) * 1000.0,
        secs(completion - last_end),
        last_done_seen
            .map(|t| format!("{:.2} s", merged_seen.saturating_duration_since(t).as_secs_f64()))
            .unwrap_or_else(|| "n/a".into()),
        created.len(),
        seen.len(),
        plane.join(", "),
        summary.requests,
        start_parts(start_at, &reps),
        per_reconcile(&requests, reconciles),
    );
    drop(operator);
    target.stop();
    delete_namespace(&client, &ns).await;
}

/// The start spread split into its parts, from each runner's own clock: how late the start
/// instant reached a runner (the barrier: `startKnownAt` − `startAt`, when positive) and how late
/// it then woke (the machine: `startedAt` − the later of `startAt` and `startKnownAt`).
fn start_parts(start_at: OffsetDateTime, reps: &[RunnerReport]) -> String {
    let mut barrier = Vec::new();
    let mut wake = Vec::new();
    for r in reps {
        let known = rfc3339(r.start_known_at.as_deref());
        let started = rfc3339(r.started_at.as_deref());
        barrier.push(secs(known - start_at).max(0.0) * 1000.0);
        wake.push(secs(started - known.max(start_at)) * 1000.0);
    }
    let summary = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let pct = |p: usize| v[(v.len() - 1) * p / 100];
        format!("p50 {:.1} / p90 {:.1} / max {:.1} ms", pct(50), pct(90), pct(100))
    };
    let late = barrier.iter().filter(|b| **b > 0.0).count();
    let lead = reps.iter().map(|r| secs(start_at - rfc3339(r.start_known_at.as_deref()))).fold(f64::INFINITY, f64::min);
    format!(
        "barrier: {late} of {} runners learned startAt after it, lateness {} (shortest lead {lead:.2} s); \
         machine: wake-up after the start instant {}",
        reps.len(),
        summary(&mut barrier),
        summary(&mut wake)
    )
}

/// The API requests of the operator per reconcile: `list configmaps 0.00, patch … 0.31`.
fn per_reconcile(requests: &BTreeMap<String, f64>, reconciles: f64) -> String {
    let total: f64 = requests.values().sum();
    let each: Vec<String> =
        requests.iter().map(|(k, v)| format!("{k} {v:.0} ({:.2})", v / reconciles.max(1.0))).collect();
    format!("{total:.0} in all, {:.2} per reconcile: {}", total / reconciles.max(1.0), each.join(", "))
}

/// The runners' reports, from their result ConfigMaps (one list), by index.
async fn runner_reports(client: &Client, ns: &str, lt: &str) -> Vec<RunnerReport> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(&format!("stampede.dev/loadtest={}", names::label_value(lt)));
    let mut out: Vec<RunnerReport> = api
        .list(&lp)
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|cm| serde_json::from_str(cm.data.as_ref()?.get(RESULT_KEY)?).ok())
        .collect();
    out.sort_by_key(|r| r.index);
    out
}

/// Deletes the namespace and waits until it is gone (its pods and results with it), so that the
/// next test does not share the control plane with a thousand deletions.
async fn delete_namespace(client: &Client, ns: &str) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(ns, &DeleteParams::default()).await;
    if let Err(e) = stampede_testcluster::wait_deleted(&namespaces, ns, Duration::from_secs(600)).await {
        eprintln!("namespace {ns} not gone after 10 minutes: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "hundreds of runner processes: make bench-scale"]
async fn e2e_scale_100_runners_merge_exact_counts() {
    many_runners(100, 10, Some("1s")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "hundreds of runner processes: make bench-scale"]
async fn e2e_scale_300_runners_merge_exact_counts() {
    many_runners(300, 10, Some("1s")).await;
}

/// A thousand runner processes: with release builds (as `make bench-scale` runs them) they fit
/// this machine's memory; debug builds (~40 MiB each) would not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a thousand runner processes: make bench-scale"]
async fn e2e_scale_1000_runners_merge_exact_counts() {
    many_runners(1000, 10, Some("1s")).await;
}

/// 50 LoadTests of 2 runners at once, each with its own target and its own iteration count
/// (3, 4, … 52): every one finishes with exactly its own count, so any cross-talk would show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "hundreds of runner processes: make bench-scale"]
async fn e2e_scale_50_loadtests_of_2_runners_at_once_keep_their_own_counts() {
    const TESTS: u64 = 50;
    let cluster = TestCluster::shared();
    let client = cluster.client().await.unwrap();
    install_crds(&client).await;
    let ns = cluster.namespace(&client, "scale-50x2").await.unwrap();
    let mut operator = OperatorProcess::start(&ns);
    let memory = RunnerMemory::start();
    let api: Api<LoadTest> = Api::namespaced(client.clone(), &ns);
    let mut targets = Vec::new();
    let applied = Instant::now();
    for i in 0..TESTS {
        let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
        let load = serde_json::json!({"executor": "constant-vus", "vus": 2, "iterations": 3 + i});
        let sc = scenario(&target.base_url(), load, &format!("/get?lt={i}"), &["errors.rate == 0%"]);
        let extra = serde_json::json!({"startTimeout": "20m"});
        api.create(&PostParams::default(), &loadtest(&format!("lt-{i}"), 2, sc, extra)).await.unwrap();
        targets.push(target);
    }
    let created = applied.elapsed();
    let mut last_finished = Duration::ZERO;
    let mut sizes = Vec::new();
    for (i, target) in targets.iter().enumerate() {
        let name = format!("lt-{i}");
        let finished = phase_is(&[Phase::Succeeded, Phase::Failed, Phase::Aborted]);
        let lt = wait_for(&api, &name, Duration::from_secs(1200), finished).await.unwrap();
        let st = lt.status.unwrap();
        assert_eq!(st.phase, Phase::Succeeded, "{name}: {:?}", st.message);
        let expected = 3 + i as u64;
        assert_eq!(st.summary.unwrap().requests, expected, "{name}: its own runners' iterations");
        assert_eq!(target.stats().requests(), expected, "{name}: its own target's count");
        let done = rfc3339(st.completion_time.as_deref());
        let made = rfc3339(lt.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()).as_deref());
        last_finished = last_finished.max(Duration::try_from(done - made).unwrap_or_default());
        sizes.push(status_bytes(&ns, &name));
    }
    let all = applied.elapsed();
    let (cpu, peak_rss) = operator.usage();
    let (reconciles, reconcile_secs) = operator.reconciles();
    let (runner_total, runner_one, alive) = memory.finish();
    let names: Vec<String> = api.list(&Default::default()).await.unwrap().items.iter().map(|l| l.name_any()).collect();
    assert_eq!(names.len(), TESTS as usize);
    eprintln!(
        "SCALE 50 × 2 runners: created in {:.2} s; all 50 Succeeded with exact counts {:.1} s after the first create \
         (slowest create → completionTime {:.1} s); status {}–{} bytes; operator CPU {cpu:.1} s, peak RSS \
         {peak_rss:.0} MiB, {reconciles} reconciles taking {reconcile_secs:.1} s in all; runners: peak total RSS \
         {runner_total:.0} MiB, largest {runner_one:.1} MiB, {alive} alive at once",
        created.as_secs_f64(),
        all.as_secs_f64(),
        last_finished.as_secs_f64(),
        sizes.iter().min().unwrap(),
        sizes.iter().max().unwrap(),
    );
    drop(operator);
    for t in targets {
        t.stop();
    }
    delete_namespace(&client, &ns).await;
}
