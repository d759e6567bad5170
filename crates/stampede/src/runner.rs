//! `stampede runner`: the in-pod mode the operator's Indexed Job runs.
//!
//! One runner, index `i` of `N`:
//! 1. reads its environment ([`RunnerEnv`]), GETs the scenario ConfigMap and takes its exact
//!    share of the load ([`LoadSpec::share`]);
//! 2. prepares (compiles; `baseUrl: builtin` starts a built-in target), resolves the base URL's
//!    host once, and reports `Ready` in its result ConfigMap;
//! 3. watches its LoadTest (GET, then a watch with a `metadata.name` field selector) until
//!    `status.startAt`, and starts at that wall-clock instant (at once if it has passed);
//! 4. runs, reporting `Running` with a cumulative `live` total every [`LIVE_EVERY`];
//!    `spec.abort`, a finished phase or the LoadTest's deletion stop it, keeping partial results;
//! 5. reports `Done` with its per-step counters and histograms.
//!
//! A runner whose report already says `Done` (its pod restarted after the final report) exits 0
//! at once. SIGTERM stops the wait or the run; the runner reports `Failed` ("terminated"),
//! keeping partial results, and exits 143.
//!
//! Exit codes: 0 done (whatever the requests or thresholds did: the operator judges the merged
//! result), 2 invalid input (environment, scenario), 3 could not run (API errors, the target
//! cannot be resolved, the run failed), 143 terminated by SIGTERM. On 2 and 3 the runner
//! reports `Failed` with a message when it can.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, anyhow};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, WatchEvent, WatchParams};
use kube::{Api, Client, ResourceExt as _};
use stampede_api::{LoadTest, RESULT_KEY, RunnerReport, RunnerState, SCENARIO_KEY, env, names};
use stampede_engine::portable::{self, PortableStep};
use stampede_engine::{CompileOptions, RunOptions, Tick};
use stampede_engine::{Exporter, MetricsServer};
use stampede_engine::{HttpUrl, Plan};
use stampede_engine::{IntervalStats, WorkerMetrics};
use stampede_engine::{PrepareError, Prepared};
use stampede_model::report::round3;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

/// How often a running runner reports its cumulative total.
pub(crate) const LIVE_EVERY: Duration = Duration::from_secs(2);
/// Most runners a LoadTest may have (the CRD's limit).
pub(crate) const MAX_RUNNERS: u32 = 1000;
/// Attempts for an API call that fails transiently (backoff 100 ms doubling to 2 s).
const API_ATTEMPTS: u32 = 6;
/// Attempts for the final report (about 30 s in all): losing it loses the run.
const FINAL_ATTEMPTS: u32 = 18;
/// How long the LoadTest may stay unreadable before the runner gives up.
const WATCH_GIVE_UP: Duration = Duration::from_secs(60);
/// Server-side timeout of one watch request; the runner re-GETs and re-watches after it.
const WATCH_TIMEOUT_SECS: u32 = 60;
/// GET interval when the LoadTest cannot be watched.
const POLL_FALLBACK: Duration = Duration::from_millis(200);
/// The last stretch before the start instant, which the runner spins through instead of sleeping.
const SPIN_MARGIN: Duration = Duration::from_millis(2);

/// What a runner learns from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunnerEnv {
    pub loadtest: String,
    pub namespace: String,
    pub index: u32,
    pub runners: u32,
    /// Where to serve `/metrics` (`None`: nowhere).
    pub metrics_addr: Option<std::net::SocketAddr>,
}

/// Reads the runner's environment through `get` (e.g. `std::env::var`): the LoadTest's name and
/// namespace, the runner count and Kubernetes' `JOB_COMPLETION_INDEX`.
pub(crate) fn parse_env(get: impl Fn(&str) -> Option<String>) -> Result<RunnerEnv, String> {
    let required = |name: &str| -> Result<String, String> {
        let v = get(name).ok_or_else(|| format!("{name} is not set"))?;
        let v = v.trim().to_string();
        if v.is_empty() { Err(format!("{name} is empty")) } else { Ok(v) }
    };
    let number = |name: &str| -> Result<u32, String> {
        let v = required(name)?;
        v.parse::<u32>().map_err(|_| format!("{name}={v:?} is not a non-negative integer"))
    };
    let loadtest = required(env::LOADTEST)?;
    let namespace = required(env::NAMESPACE)?;
    let runners = number(env::RUNNERS)?;
    let index = number(env::RUNNER_INDEX)?;
    if !(1..=MAX_RUNNERS).contains(&runners) {
        return Err(format!("{}={runners} is out of range (1–{MAX_RUNNERS})", env::RUNNERS));
    }
    if index >= runners {
        return Err(format!("{}={index} is not below {}={runners}", env::RUNNER_INDEX, env::RUNNERS));
    }
    let metrics_addr = match get(env::METRICS_ADDR).map(|v| v.trim().to_string()) {
        None => Some(std::net::SocketAddr::from(([0, 0, 0, 0], stampede_api::METRICS_PORT))),
        Some(v) if v.is_empty() || v == "off" => None,
        Some(v) => {
            Some(v.parse().map_err(|_| format!("{}={v:?} is not an address like 0.0.0.0:9464", env::METRICS_ADDR))?)
        }
    };
    Ok(RunnerEnv { loadtest, namespace, index, runners, metrics_addr })
}

/// Parses `status.startAt` (RFC 3339).
pub(crate) fn parse_start_at(s: &str) -> Result<SystemTime, String> {
    OffsetDateTime::parse(s.trim(), &Rfc3339)
        .map(SystemTime::from)
        .map_err(|e| format!("status.startAt {s:?} is not an RFC 3339 time: {e}"))
}

/// How long to wait from `now` until `start_at` (zero when it has passed).
pub(crate) fn start_delay(start_at: SystemTime, now: SystemTime) -> Duration {
    start_at.duration_since(now).unwrap_or(Duration::ZERO)
}

/// RFC 3339 in UTC with microseconds, e.g. `2025-01-02T03:04:05.678901Z`.
pub(crate) fn format_micros(t: SystemTime) -> String {
    let t = OffsetDateTime::from(t).to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

/// The report while running: the start instant, seconds since, and the cumulative total.
pub(crate) fn running_report(
    index: u32,
    started_at: SystemTime,
    elapsed: Duration,
    live: PortableStep,
) -> RunnerReport {
    RunnerReport {
        started_at: Some(format_micros(started_at)),
        duration_seconds: round3(elapsed.as_secs_f64()),
        live: Some(live),
        ..RunnerReport::new(index, RunnerState::Running)
    }
}

/// The final report of a runner that did not run (no share of the load, or aborted before the
/// start): zero counts for every step, so it merges like any other.
pub(crate) fn empty_done_report(
    index: u32,
    keys: &[stampede_model::StepKey],
    scenario_names: &[String],
    started_at: Option<SystemTime>,
) -> RunnerReport {
    let metrics = WorkerMetrics::new(keys.len(), scenario_names.len());
    RunnerReport {
        started_at: started_at.map(format_micros),
        result: Some(portable::encode(keys, &metrics, scenario_names)),
        ..RunnerReport::new(index, RunnerState::Done)
    }
}

/// A `Failed` report with what went wrong.
pub(crate) fn failed_report(index: u32, message: String) -> RunnerReport {
    RunnerReport { message: Some(message), ..RunnerReport::new(index, RunnerState::Failed) }
}

/// The JSON merge patch that stores `report` in a result ConfigMap.
pub(crate) fn report_patch(report: &RunnerReport) -> serde_json::Value {
    let text = serde_json::to_string(report).unwrap_or_default();
    serde_json::json!({ "data": { RESULT_KEY: text } })
}

/// What the runner sees of its LoadTest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct View {
    pub start_at: Option<String>,
    pub abort: bool,
    /// The phase is Succeeded, Failed or Aborted.
    pub finished: bool,
    /// The LoadTest was deleted.
    pub gone: bool,
    /// Why the LoadTest could not be read for too long.
    pub lost: Option<String>,
}

impl View {
    fn of(lt: &LoadTest) -> View {
        let status = lt.status.as_ref();
        View {
            start_at: status.and_then(|s| s.start_at.clone()),
            abort: lt.spec.abort,
            finished: status.is_some_and(|s| s.phase.is_finished()),
            gone: false,
            lost: None,
        }
    }

    /// The run must not start, or must stop.
    pub(crate) fn stop(&self) -> bool {
        self.abort || self.finished || self.gone
    }

    fn stop_reason(&self) -> &'static str {
        if self.abort {
            "spec.abort is set"
        } else if self.gone {
            "the LoadTest was deleted"
        } else {
            "the LoadTest has finished"
        }
    }
}

/// A failure with its exit code.
#[derive(Debug)]
enum Failure {
    /// Invalid input: exit 2.
    Invalid(anyhow::Error),
    /// Could not run: exit 3.
    CouldNotRun(anyhow::Error),
}

impl Failure {
    fn code(&self) -> u8 {
        match self {
            Failure::Invalid(_) => 2,
            Failure::CouldNotRun(_) => 3,
        }
    }

    fn error(&self) -> &anyhow::Error {
        match self {
            Failure::Invalid(e) | Failure::CouldNotRun(e) => e,
        }
    }
}

/// Entry point of `stampede runner`.
pub(crate) fn main() -> ExitCode {
    let env = match parse_env(|k| std::env::var(k).ok()) {
        Ok(env) => env,
        Err(e) => {
            error!("invalid runner environment: {e}");
            eprintln!("error: invalid runner environment: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start a runtime: {e}");
            return ExitCode::from(3);
        }
    };
    let code = rt.block_on(run(env));
    // Do not wait for lingering blocking tasks (e.g. a run that ignored the interrupt).
    rt.shutdown_timeout(Duration::from_secs(1));
    code
}

async fn run(env: RunnerEnv) -> ExitCode {
    info!(loadtest = %env.loadtest, namespace = %env.namespace, index = env.index, runners = env.runners, "runner starting");
    let client = match Client::try_default().await {
        Ok(c) => c,
        Err(e) => {
            error!("cannot build a Kubernetes client: {e}");
            eprintln!("error: cannot build a Kubernetes client: {e}");
            return ExitCode::from(3);
        }
    };
    let reporter = Reporter {
        api: Api::namespaced(client.clone(), &env.namespace),
        name: names::result_config_map(&env.loadtest, env.index),
        index: env.index,
    };
    let terminated = Arc::new(AtomicBool::new(false));
    match runner(&env, &client, &reporter, terminated.clone()).await {
        Ok(()) if terminated.load(Ordering::Relaxed) => ExitCode::from(143),
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let message = format!("{:#}", failure.error());
            error!("runner failed: {message}");
            eprintln!("error: {message}");
            if let Err(e) = reporter.send(&failed_report(env.index, message), API_ATTEMPTS).await {
                warn!("cannot report the failure: {e}");
            }
            ExitCode::from(failure.code())
        }
    }
}

/// Writes the runner's report to its result ConfigMap.
#[derive(Clone)]
struct Reporter {
    api: Api<ConfigMap>,
    name: String,
    index: u32,
}

impl Reporter {
    /// The report already in the ConfigMap, if any and readable.
    async fn current(&self) -> Option<RunnerReport> {
        let cm = match retry(&format!("get configmap {}", self.name), API_ATTEMPTS, || self.api.get(&self.name)).await {
            Ok(cm) => cm,
            Err(e) => {
                warn!("cannot read the previous report: {e}");
                return None;
            }
        };
        let text = cm.data.as_ref()?.get(RESULT_KEY)?;
        serde_json::from_str(text).map_err(|e| warn!("ignoring an unreadable previous report: {e}")).ok()
    }

    async fn send(&self, report: &RunnerReport, attempts: u32) -> Result<(), kube::Error> {
        let patch = report_patch(report);
        retry(&format!("patch configmap {}", self.name), attempts, || async {
            self.api.patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(|_| ())
        })
        .await?;
        debug!(index = self.index, state = ?report.state, "report sent");
        Ok(())
    }
}

async fn runner(
    env: &RunnerEnv,
    client: &Client,
    reporter: &Reporter,
    terminated: Arc<AtomicBool>,
) -> Result<(), Failure> {
    // A runner that already finished (its pod restarted after the final report) does not run
    // its share again.
    if let Some(previous) = reporter.current().await
        && previous.state == RunnerState::Done
    {
        info!("this runner already reported Done; not running again");
        return Ok(());
    }

    // 1. The scenario and this runner's share of it.
    let cm_name = names::scenario_config_map(&env.loadtest);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &env.namespace);
    let cm = retry(&format!("get configmap {cm_name}"), API_ATTEMPTS, || config_maps.get(&cm_name))
        .await
        .with_context(|| format!("cannot read the scenario ConfigMap {cm_name}"))
        .map_err(Failure::CouldNotRun)?;
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(SCENARIO_KEY))
        .ok_or_else(|| Failure::Invalid(anyhow!("ConfigMap {cm_name} has no key {SCENARIO_KEY}")))?;
    let path = PathBuf::from(format!("configmap/{cm_name}/{SCENARIO_KEY}"));
    let mut scenario = stampede_engine::parse_str(text, &path).map_err(|e| Failure::Invalid(e.into()))?;
    // The whole scenario names the steps every runner reports, with or without work.
    let full = stampede_engine::validate(
        &scenario,
        &path,
        &CompileOptions { base_dir: data_dir(), ..CompileOptions::default() },
    )
    .map_err(|e| Failure::Invalid(e.into()))?;
    let scenario_names: Vec<String> = full.scenarios.iter().map(|s| s.name.clone()).collect();
    scenario.share(env.index, env.runners);
    let has_work = scenario.has_work();

    // 2. Prepare, resolve, report Ready.
    let prepared = if has_work {
        let prepared = prepare(&scenario, &path, (env.index, env.runners))?;
        resolve_base_url(&prepared.plan).await.map_err(Failure::CouldNotRun)?;
        info!(
            vus = prepared.plan.max_vus(),
            executor = prepared.plan.executor_name(),
            base_url = prepared.plan.base_url.as_deref().unwrap_or("-"),
            "prepared this runner's share"
        );
        Some(prepared)
    } else {
        info!("this runner's share of the load is empty; it will report an empty result");
        None
    };
    // Prometheus metrics while this runner has work; a busy port must not cost the test.
    let exporter = prepared.as_ref().map(|p| {
        Arc::new(Exporter::new(
            &p.plan,
            vec![
                ("namespace".into(), env.namespace.clone()),
                ("loadtest".into(), env.loadtest.clone()),
                ("runner".into(), env.index.to_string()),
            ],
        ))
    });
    let _metrics_server = match (&exporter, env.metrics_addr) {
        (Some(exporter), Some(addr)) => match MetricsServer::start(addr, exporter.clone()) {
            Ok(server) => {
                info!(addr = %server.addr(), "serving Prometheus metrics at /metrics");
                Some(server)
            }
            Err(e) => {
                warn!("cannot serve metrics on {addr}: {e}; running without them");
                None
            }
        },
        _ => None,
    };
    let loadtests: Api<LoadTest> = Api::namespaced(client.clone(), &env.namespace);
    let lt = retry(&format!("get loadtest {}", env.loadtest), API_ATTEMPTS, || loadtests.get(&env.loadtest))
        .await
        .with_context(|| format!("cannot read LoadTest {}", env.loadtest))
        .map_err(Failure::CouldNotRun)?;
    let (view_tx, mut view_rx) = watch::channel(View::of(&lt));
    let watcher = tokio::spawn(watch_loadtest(
        loadtests,
        env.loadtest.clone(),
        lt.resource_version().unwrap_or_default(),
        view_tx,
    ));
    let _watcher = AbortOnDrop(watcher);
    spawn_sigterm_watch(terminated.clone());
    reporter
        .send(&RunnerReport::new(env.index, RunnerState::Ready), API_ATTEMPTS)
        .await
        .context("cannot report Ready")
        .map_err(Failure::CouldNotRun)?;
    info!("ready; waiting for status.startAt");

    // 3. Wait for the start instant.
    let start_at = loop {
        let view = view_rx.borrow_and_update().clone();
        if let Some(lost) = view.lost {
            return Err(Failure::CouldNotRun(anyhow!(lost)));
        }
        if terminated.load(Ordering::Relaxed) {
            let report = empty_done_report(env.index, &full.step_keys, &scenario_names, None);
            return finish(reporter, report, &terminated).await;
        }
        if view.stop() {
            info!("not starting: {}", view.stop_reason());
            return send_final(reporter, &empty_done_report(env.index, &full.step_keys, &scenario_names, None)).await;
        }
        if let Some(s) = &view.start_at {
            break parse_start_at(s).map_err(|e| Failure::CouldNotRun(anyhow!(e)))?;
        }
        tokio::select! {
            changed = view_rx.changed() => {
                if changed.is_err() {
                    return Err(Failure::CouldNotRun(anyhow!("lost the watch on LoadTest {}", env.loadtest)));
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    };
    let delay = start_delay(start_at, SystemTime::now());
    let target = Instant::now() + delay;
    info!(start_at = %format_micros(start_at), in_ms = delay.as_millis() as u64, "start instant known");

    // Abort, a finished phase, deletion or SIGTERM stop the wait and the run.
    let interrupt = Arc::new(AtomicBool::new(false));
    let monitor = tokio::spawn(monitor(view_rx.clone(), interrupt.clone(), terminated.clone()));
    let _monitor = AbortOnDrop(monitor);

    // 4. Run (or just pass the start, without work).
    let Some(prepared) = prepared else {
        let flag = interrupt.clone();
        let started = tokio::task::spawn_blocking(move || wait_precisely(target, &flag)).await.unwrap_or(false);
        let report = empty_done_report(env.index, &full.step_keys, &scenario_names, started.then_some(start_at));
        return finish(reporter, report, &terminated).await;
    };
    let plan = prepared.plan.clone();
    let (live_tx, live_rx) = watch::channel::<Option<(Duration, PortableStep)>>(None);
    let started_at_cell = Arc::new(std::sync::OnceLock::<SystemTime>::new());
    let live_task = tokio::spawn(live_reports(reporter.clone(), live_rx, started_at_cell.clone()));
    let flag = interrupt.clone();
    let started_cell = started_at_cell.clone();
    let ran = tokio::task::spawn_blocking(move || {
        execute_at(prepared, target, flag, live_tx, exporter, |t| {
            let _ = started_cell.set(t);
        })
    })
    .await
    .map_err(|e| Failure::CouldNotRun(anyhow!("the run panicked: {e}")))?;
    let _ = live_task.await; // no Running report may land after the final one
    let Some(ran) = ran else {
        info!("not starting: {}", view_rx.borrow().stop_reason());
        let report = empty_done_report(env.index, &full.step_keys, &scenario_names, None);
        return finish(reporter, report, &terminated).await;
    };
    let (report, outcome) =
        ran.result.map_err(|e| Failure::CouldNotRun(anyhow::Error::new(e).context("the run failed")))?;
    let result = portable::encode(&plan.step_keys, &outcome.metrics, &scenario_names);
    let requests: u64 = outcome.metrics.steps.iter().map(|s| s.requests).sum();
    info!(
        requests,
        seconds = outcome.duration.as_secs_f64(),
        interrupted = outcome.interrupted,
        skew_us = signed_micros(ran.started_at, start_at),
        "run finished"
    );
    let done = RunnerReport {
        started_at: Some(format_micros(ran.started_at)),
        duration_seconds: round3(outcome.duration.as_secs_f64()),
        result: Some(result),
        live: Some(portable::step_from_interval("", "total", &ran.total)),
        generator: Some(report.run.generator.clone()),
        saturated: report.run.saturated.clone(),
        ..RunnerReport::new(env.index, RunnerState::Done)
    };
    finish(reporter, done, &terminated).await
}

/// `a - b` in µs, negative when `a` is earlier.
fn signed_micros(a: SystemTime, b: SystemTime) -> i64 {
    match a.duration_since(b) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    }
}

/// The final report; after SIGTERM it says so (state Failed, results kept).
async fn finish(reporter: &Reporter, mut report: RunnerReport, terminated: &AtomicBool) -> Result<(), Failure> {
    if terminated.load(Ordering::Relaxed) {
        report.state = RunnerState::Failed;
        report.message = Some("terminated (SIGTERM); partial results".into());
    }
    send_final(reporter, &report).await
}

async fn send_final(reporter: &Reporter, report: &RunnerReport) -> Result<(), Failure> {
    reporter
        .send(report, FINAL_ATTEMPTS)
        .await
        .context("cannot write the final report")
        .map_err(Failure::CouldNotRun)?;
    info!(state = ?report.state, "final report written");
    Ok(())
}

/// Where spec.data is mounted (STAMPEDE_DATA_DIR): the scenario's relative paths start there.
fn data_dir() -> Option<PathBuf> {
    std::env::var_os(stampede_api::env::DATA_DIR).map(PathBuf::from)
}

/// Compiles this runner's share; `unique` data rows are partitioned by runner (`partition`:
/// index, count), so no row is used by two runners.
fn prepare(
    scenario: &stampede_model::scenario::ScenarioFile,
    path: &Path,
    partition: (u32, u32),
) -> Result<Prepared, Failure> {
    let opts = CompileOptions { data_partition: Some(partition), base_dir: data_dir(), ..CompileOptions::default() };
    stampede_engine::prepare(scenario, path, opts).map_err(|e| match e {
        PrepareError::Invalid(e) => Failure::Invalid(e.into()),
        PrepareError::Run(e) => Failure::CouldNotRun(anyhow::Error::new(e).context("cannot prepare the run")),
    })
}

/// Resolves the base URL's host once, so that a name that does not resolve fails the runner
/// before the start rather than every request after it.
async fn resolve_base_url(plan: &Plan) -> anyhow::Result<()> {
    let Some(url) = plan.base_url.as_deref() else { return Ok(()) };
    let target = HttpUrl::parse(url).map_err(|e| anyhow!("base URL {url}: {e}"))?;
    let mut last = None;
    for attempt in 0..3u32 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let lookup = tokio::net::lookup_host((target.host.as_str(), target.port));
        match tokio::time::timeout(Duration::from_secs(5), lookup).await {
            Ok(Ok(mut addrs)) => {
                if let Some(addr) = addrs.next() {
                    debug!(host = %target.host, %addr, "base URL resolved");
                    return Ok(());
                }
                last = Some("no addresses".to_string());
            }
            Ok(Err(e)) => last = Some(e.to_string()),
            Err(_) => last = Some("timed out after 5 s".into()),
        }
    }
    Err(anyhow!("cannot resolve the base URL's host {}: {}", target.host, last.unwrap_or_default()))
}

/// What [`execute_at`] produced once it started.
struct Ran {
    started_at: SystemTime,
    result: Result<(stampede_engine::Report, stampede_engine::RunOutcome), stampede_engine::RunError>,
    /// The cumulative total of all ticks.
    total: IntervalStats,
}

/// Waits until `target` (precisely: sleeps, then spins the last stretch), then runs. Returns
/// `None` when `interrupt` was set before the start. Sends the cumulative total to `live`
/// at the start and every [`LIVE_EVERY`].
fn execute_at(
    prepared: Prepared,
    target: Instant,
    interrupt: Arc<AtomicBool>,
    live: watch::Sender<Option<(Duration, PortableStep)>>,
    exporter: Option<Arc<Exporter>>,
    on_start: impl FnOnce(SystemTime),
) -> Option<Ran> {
    if !wait_precisely(target, &interrupt) {
        return None;
    }
    let started_at = SystemTime::now();
    on_start(started_at);
    if let Some(e) = &exporter {
        e.started(started_at);
    }
    let _ = live.send(Some((Duration::ZERO, portable::step_from_interval("", "total", &IntervalStats::default()))));
    let opts = RunOptions { interrupt, totals: exporter.is_some(), ..RunOptions::default() };
    let mut total = IntervalStats::default();
    let mut last_sent = Duration::ZERO;
    let result = stampede_engine::execute_full(prepared, &opts, &mut |t: &Tick| {
        if let Some(e) = &exporter {
            e.observe(t);
        }
        total.merge(&t.stats);
        if t.elapsed.saturating_sub(last_sent) + Duration::from_millis(100) >= LIVE_EVERY {
            last_sent = t.elapsed;
            let _ = live.send(Some((t.elapsed, portable::step_from_interval("", "total", &total))));
        }
    });
    Some(Ran { started_at, result, total })
}

/// Sleeps until `target` on this (blocking) thread, spinning the last [`SPIN_MARGIN`] for
/// precision. False when `interrupt` was set first.
fn wait_precisely(target: Instant, interrupt: &AtomicBool) -> bool {
    loop {
        if interrupt.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= target {
            return true;
        }
        let left = target - now;
        if left > SPIN_MARGIN {
            std::thread::sleep((left - SPIN_MARGIN).min(Duration::from_millis(20)));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Patches a `Running` report each time the run sends a new cumulative total; ends when the
/// run drops its sender.
async fn live_reports(
    reporter: Reporter,
    mut rx: watch::Receiver<Option<(Duration, PortableStep)>>,
    started_at: Arc<std::sync::OnceLock<SystemTime>>,
) {
    while rx.changed().await.is_ok() {
        let Some((elapsed, live)) = rx.borrow_and_update().clone() else { continue };
        let Some(&started) = started_at.get() else { continue };
        let report = running_report(reporter.index, started, elapsed, live);
        // One try each time, bounded: the next total comes in two seconds, and the final
        // report waits for this one.
        match tokio::time::timeout(LIVE_EVERY * 2, reporter.send(&report, 1)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!("cannot report progress: {e}"),
            Err(_) => warn!("progress report timed out"),
        }
    }
}

/// Sets `interrupt` when the LoadTest says stop or SIGTERM arrives.
async fn monitor(mut rx: watch::Receiver<View>, interrupt: Arc<AtomicBool>, terminated: Arc<AtomicBool>) {
    loop {
        let view = rx.borrow_and_update().clone();
        if view.stop() || view.lost.is_some() || terminated.load(Ordering::Relaxed) {
            let why = if terminated.load(Ordering::Relaxed) {
                "SIGTERM"
            } else if let Some(lost) = &view.lost {
                lost.as_str()
            } else {
                view.stop_reason()
            };
            info!("stopping: {why}");
            interrupt.store(true, Ordering::Relaxed);
            return;
        }
        tokio::select! {
            changed = rx.changed() => if changed.is_err() {
                // The watcher ended without a verdict: keep running, nothing more to learn.
                return;
            },
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}

fn spawn_sigterm_watch(terminated: Arc<AtomicBool>) {
    tokio::spawn(async move {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                if s.recv().await.is_some() {
                    warn!("SIGTERM: stopping");
                    terminated.store(true, Ordering::Relaxed);
                }
            }
            Err(e) => warn!("cannot watch SIGTERM: {e}"),
        }
    });
}

/// Follows the LoadTest: a watch (field selector `metadata.name`, from the last resource
/// version), re-GET and re-watch whenever the watch ends. When watching fails (e.g. the Role
/// lacks `watch`) it falls back to a GET every [`POLL_FALLBACK`]. Publishes every change to
/// `tx`; after [`WATCH_GIVE_UP`] without a successful read it publishes `lost`.
async fn watch_loadtest(api: Api<LoadTest>, name: String, mut version: String, tx: watch::Sender<View>) {
    let mut last_ok = Instant::now();
    let mut watch_failures = 0u32;
    loop {
        let wp = WatchParams::default().fields(&format!("metadata.name={name}")).timeout(WATCH_TIMEOUT_SECS);
        let opened = Instant::now();
        let mut events = 0u32;
        match api.watch(&wp, &version).await {
            Ok(stream) => {
                let mut stream = std::pin::pin!(stream);
                while let Some(event) = stream.next().await {
                    match event {
                        Ok(WatchEvent::Added(lt) | WatchEvent::Modified(lt)) => {
                            events += 1;
                            last_ok = Instant::now();
                            version = lt.resource_version().unwrap_or_default();
                            tx.send_replace(View::of(&lt));
                        }
                        Ok(WatchEvent::Deleted(_)) => {
                            tx.send_modify(|v| v.gone = true);
                            return;
                        }
                        Ok(WatchEvent::Bookmark(b)) => version = b.metadata.resource_version,
                        Ok(WatchEvent::Error(status)) => {
                            debug!(code = status.code, "watch error: {}", status.message);
                            break;
                        }
                        Err(e) => {
                            debug!("watch stream error: {e}");
                            break;
                        }
                    }
                }
            }
            Err(e) if watch_failures == 0 => warn!("cannot watch LoadTest {name} (polling instead): {e}"),
            Err(e) => debug!("cannot watch LoadTest {name}: {e}"),
        }
        // A watch that ended at once without news is a failure: poll, do not spin.
        let healthy = events > 0 || opened.elapsed() >= Duration::from_secs(1);
        watch_failures = if healthy { 0 } else { watch_failures + 1 };
        if !healthy {
            tokio::time::sleep(POLL_FALLBACK).await;
        }
        // Resynchronise with a GET (after a timeout, a 410 Gone or an error).
        match api.get(&name).await {
            Ok(lt) => {
                last_ok = Instant::now();
                version = lt.resource_version().unwrap_or_default();
                tx.send_replace(View::of(&lt));
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                tx.send_modify(|v| v.gone = true);
                return;
            }
            Err(e) => warn!("cannot read LoadTest {name}: {e}"),
        }
        if last_ok.elapsed() > WATCH_GIVE_UP {
            tx.send_modify(|v| v.lost = Some(format!("LoadTest {name} unreadable for {} s", WATCH_GIVE_UP.as_secs())));
            return;
        }
    }
}

/// Whether an API error is worth retrying.
fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => matches!(s.code, 408 | 429 | 500 | 502 | 503 | 504),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// Runs `f` up to `attempts` times while it fails transiently (backoff 100 ms doubling to 2 s).
async fn retry<T, F, Fut>(what: &str, attempts: u32, mut f: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut delay = Duration::from_millis(100);
    let mut attempt = 1;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt < attempts && transient(&e) => {
                warn!(attempt, "{what}: {e}; retrying in {} ms", delay.as_millis());
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    const GOOD: [(&str, &str); 4] = [
        ("STAMPEDE_LOADTEST", "checkout"),
        ("STAMPEDE_NAMESPACE", "load"),
        ("STAMPEDE_RUNNERS", "3"),
        ("JOB_COMPLETION_INDEX", "2"),
    ];

    #[test]
    fn env_parses_the_operators_contract() {
        let env = parse_env(env_of(&GOOD)).unwrap();
        assert_eq!(
            env,
            RunnerEnv {
                loadtest: "checkout".into(),
                namespace: "load".into(),
                index: 2,
                runners: 3,
                metrics_addr: Some(([0, 0, 0, 0], 9464).into())
            }
        );
    }

    #[test]
    fn env_problems_name_the_variable() {
        let with = |k: &str, v: Option<&str>| {
            let mut pairs: Vec<(&str, &str)> = GOOD.iter().copied().filter(|(n, _)| *n != k).collect();
            if let Some(v) = v {
                pairs.push((k, v));
            }
            parse_env(env_of(&pairs)).unwrap_err()
        };
        assert!(with("STAMPEDE_LOADTEST", None).contains("STAMPEDE_LOADTEST is not set"));
        assert!(with("STAMPEDE_NAMESPACE", Some("  ")).contains("STAMPEDE_NAMESPACE is empty"));
        assert!(with("STAMPEDE_RUNNERS", Some("two")).contains("STAMPEDE_RUNNERS=\"two\""));
        assert!(with("STAMPEDE_RUNNERS", Some("0")).contains("out of range"));
        assert!(with("STAMPEDE_RUNNERS", Some("1001")).contains("out of range"));
        assert!(with("JOB_COMPLETION_INDEX", Some("-1")).contains("JOB_COMPLETION_INDEX"));
        assert!(with("JOB_COMPLETION_INDEX", Some("3")).contains("not below STAMPEDE_RUNNERS=3"));
        assert!(with("JOB_COMPLETION_INDEX", None).contains("JOB_COMPLETION_INDEX is not set"));
    }

    #[test]
    fn start_instant_parses_rfc3339_and_waits_only_for_the_future() {
        let t = parse_start_at("2030-01-02T03:04:05.250Z").unwrap();
        let same = parse_start_at("2030-01-02T05:04:05.25+02:00").unwrap();
        assert_eq!(t, same);
        assert_eq!(start_delay(t, t - Duration::from_millis(1500)), Duration::from_millis(1500));
        assert_eq!(start_delay(t, t + Duration::from_secs(3)), Duration::ZERO, "past: start at once");
        assert_eq!(start_delay(t, t), Duration::ZERO);
        assert!(parse_start_at("tomorrow").unwrap_err().contains("startAt"));
        assert!(parse_start_at("2030-01-02 03:04:05").is_err());
    }

    #[test]
    fn start_instants_are_written_with_microseconds_and_read_back_exactly() {
        let t = parse_start_at("2030-01-02T03:04:05.123456Z").unwrap();
        assert_eq!(format_micros(t), "2030-01-02T03:04:05.123456Z");
        let whole = parse_start_at("2030-01-02T03:04:05Z").unwrap();
        assert_eq!(format_micros(whole), "2030-01-02T03:04:05.000000Z");
        let now = SystemTime::now();
        let back = parse_start_at(&format_micros(now)).unwrap();
        assert!(signed_micros(now, back).abs() <= 1);
        assert_eq!(signed_micros(whole, t), -123_456);
    }

    #[test]
    fn precise_wait_starts_on_time_and_stops_when_interrupted() {
        let flag = AtomicBool::new(false);
        let target = Instant::now() + Duration::from_millis(30);
        assert!(wait_precisely(target, &flag));
        let late = Instant::now() - target;
        assert!(late < Duration::from_millis(5), "started {late:?} late");
        flag.store(true, Ordering::Relaxed);
        assert!(!wait_precisely(Instant::now() + Duration::from_secs(60), &flag));
    }

    #[test]
    fn reports_serialize_into_a_merge_patch_of_one_key() {
        let live = portable::step_from_interval("", "total", &IntervalStats::default());
        let t = parse_start_at("2030-01-02T03:04:05.000007Z").unwrap();
        let r = running_report(1, t, Duration::from_millis(2_001), live);
        let patch = report_patch(&r);
        let text = patch["data"]["result.json"].as_str().unwrap();
        let back: RunnerReport = serde_json::from_str(text).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.state, RunnerState::Running);
        assert_eq!(back.started_at.as_deref(), Some("2030-01-02T03:04:05.000007Z"));
        assert_eq!(back.duration_seconds, 2.001);
        assert_eq!(patch["data"].as_object().unwrap().len(), 1);

        let ready: serde_json::Value = serde_json::from_str(
            report_patch(&RunnerReport::new(0, RunnerState::Ready))["data"]["result.json"].as_str().unwrap(),
        )
        .unwrap();
        assert_eq!(ready, serde_json::json!({"index": 0, "state": "ready", "durationSeconds": 0.0}));

        let failed = failed_report(2, "bad".into());
        assert_eq!((failed.state, failed.message.as_deref()), (RunnerState::Failed, Some("bad")));
    }

    #[test]
    fn an_empty_result_has_every_step_with_zero_counts() {
        let keys = vec![
            stampede_model::StepKey { scenario: "buy".into(), step: "a".into() },
            stampede_model::StepKey { scenario: "buy".into(), step: "b".into() },
        ];
        let names = vec!["buy".to_string()];
        let r = empty_done_report(4, &keys, &names, None);
        assert_eq!(r.state, RunnerState::Done);
        let result = r.result.unwrap();
        assert_eq!(result.steps.len(), 2);
        assert!(result.steps.iter().all(|s| s.requests == 0));
        assert_eq!(result.iterations.get("buy"), Some(&0));
        let mut merged = WorkerMetrics::new(2, 1);
        portable::merge_into(&result, &keys, &names, &mut merged).unwrap();
        assert_eq!(merged.steps[0].requests, 0);
    }

    #[test]
    fn views_stop_on_abort_finish_or_deletion() {
        assert!(!View::default().stop());
        assert!(View { abort: true, ..View::default() }.stop());
        assert!(View { finished: true, ..View::default() }.stop());
        assert!(View { gone: true, ..View::default() }.stop());
        let lt: LoadTest = serde_json::from_value(serde_json::json!({
            "apiVersion": "stampede.dev/v1alpha1", "kind": "LoadTest",
            "metadata": {"name": "x"},
            "spec": {"runners": 2, "abort": true},
            "status": {"phase": "Running", "startAt": "2030-01-02T03:04:05Z"}
        }))
        .unwrap();
        let v = View::of(&lt);
        assert!(v.abort && !v.finished);
        assert_eq!(v.start_at.as_deref(), Some("2030-01-02T03:04:05Z"));
    }
}
