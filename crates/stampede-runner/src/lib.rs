//! The in-cluster runner: one pod of a LoadTest's Indexed Job (`stampede runner` calls [`main`]).
//!
//! One runner, index `i` of `N`:
//! 1. reads its environment ([`env`](mod@env)), GETs the scenario ConfigMap and takes its exact
//!    share of the load (`LoadSpec::share`);
//! 2. prepares (compiles; `baseUrl: builtin` starts a built-in target), resolves the base URL's
//!    host once, and reports `Ready` in its result ConfigMap;
//! 3. watches its LoadTest (GET, then a watch with a `metadata.name` field selector) until
//!    `status.startAt`, and starts at that wall-clock instant (at once if it has passed);
//! 4. runs, reporting `Running` with a cumulative `live` total every 2 s;
//!    `spec.abort`, a finished phase or the LoadTest's deletion stop it, keeping partial results;
//! 5. reports `Done` with its per-step counters and histograms.
//!
//! With `STAMPEDE_ONCE=setup|teardown` the pod runs the scenario's `setup` or `teardown` once
//! for the whole LoadTest instead (see `once`); a runner given `STAMPEDE_SETUP_VALUES` runs
//! neither, and its VUs read those values as `setup.NAME`.
//!
//! A runner whose report already says `Done` (its pod restarted after the final report) exits 0
//! at once. SIGTERM, from the runner's first moment on, stops the start-up, the wait or the
//! run; the runner reports `Failed` ("terminated"), keeping partial results, and exits 143.
//!
//! Exit codes: 0 done (whatever the requests or thresholds did: the operator judges the merged
//! result), 2 invalid input (environment, scenario), 3 could not run (API errors, the target
//! cannot be resolved, the run failed), 143 terminated by SIGTERM. On 2 and 3 the runner
//! reports `Failed` with a message when it can.
//!
//! Modules: [`env`](mod@env) (the environment), `clock` (the start instant), `report` and `view` (pure
//! values: the reports it writes, what it sees of its LoadTest), `api` (its I/O with the API
//! server); this file runs the phases above in order.

#![warn(missing_docs)]

pub mod env;

mod api;
mod clock;
mod once;
mod report;
mod view;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client, ResourceExt as _};
use stampede_api::{LoadTest, RunnerReport, RunnerState, SCENARIO_KEY, names};
use stampede_engine::{
    CompileOptions, Exporter, HttpUrl, IntervalStats, MetricsServer, Plan, PrepareError, Prepared, RunError,
    RunOptions, RunOutcome, ScenarioError, Tick, portable,
};
use stampede_model::StepKey;
use stampede_model::report::{Report, round3};
use stampede_model::scenario::ScenarioFile;
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

use crate::api::{API_ATTEMPTS, FINAL_ATTEMPTS, LIVE_EVERY, Reporter, live_reports, retry, watch_loadtest};
use crate::clock::{format_micros, parse_start_at, signed_micros, start_delay, wait_precisely};
use crate::env::{RunnerEnv, parse_env};
use crate::report::{Live, empty_done_report, failed_report};
use crate::view::View;

/// Why a runner could not do its part; [`RunnerError::exit_code`] says how it exits.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The scenario ConfigMap lacks its key: exit 2.
    #[error("ConfigMap {config_map} has no key {SCENARIO_KEY}")]
    NoScenario {
        /// The name of the scenario ConfigMap.
        config_map: String,
    },
    /// The scenario does not parse or is invalid: exit 2.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// An API call failed (after retries): exit 3.
    #[error("{what}: {source}")]
    Api {
        /// What the runner was doing, as the message begins (e.g. `cannot report Ready`).
        what: String,
        /// The Kubernetes API's error (the last attempt's, when retried).
        #[source]
        source: kube::Error,
    },
    /// The built-in target or the worker threads could not start: exit 3.
    #[error("cannot prepare the run: {0}")]
    Prepare(#[source] RunError),
    /// The base URL's host does not resolve: exit 3.
    #[error("{0}")]
    Resolve(String),
    /// The LoadTest could not be followed, or its start instant read: exit 3.
    #[error("{0}")]
    LoadTest(String),
    /// The run itself failed: exit 3.
    #[error("the run failed: {0}")]
    Run(#[source] RunError),
    /// SIGTERM came before the runner was ready: exit 143.
    #[error("terminated (SIGTERM) while {0}, before the start")]
    Terminated(&'static str),
}

impl RunnerError {
    /// 2 for invalid input, 3 when the runner could not run, 143 after SIGTERM.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunnerError::NoScenario { .. } | RunnerError::Scenario(_) => 2,
            RunnerError::Terminated(_) => 143,
            _ => 3,
        }
    }

    fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> RunnerError {
        let what = what.into();
        move |source| RunnerError::Api { what, source }
    }
}

/// Entry point of `stampede runner`.
pub fn main() -> ExitCode {
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
    // First of all: a SIGTERM at any time from here on is a Failed report and exit 143, never
    // the default action (killed without a word).
    let terminated = Arc::new(AtomicBool::new(false));
    spawn_sigterm_watch(terminated.clone());
    let client = match kube::Config::infer().await.map_err(kube::Error::InferConfig).and_then(|config| {
        // Which API server and credentials: in a pod, the `kubernetes` Service's address and
        // the ServiceAccount token the kubelet mounted.
        info!(
            api = %config.cluster_url,
            token_file = config.auth_info.token_file.as_deref().unwrap_or("none"),
            "Kubernetes API"
        );
        Client::try_from(config)
    }) {
        Ok(c) => c,
        Err(e) => {
            error!("cannot build a Kubernetes client: {e}");
            eprintln!("error: cannot build a Kubernetes client: {e}");
            return ExitCode::from(3);
        }
    };
    if let Some(which) = env.once {
        return once::main(&env, &client, which).await;
    }
    let reporter = Reporter {
        api: Api::namespaced(client.clone(), &env.namespace),
        name: names::result_config_map(&env.loadtest, env.index),
        index: env.index,
        run: env.run.clone(),
    };
    match runner(&env, &client, &reporter, terminated.clone()).await {
        Ok(()) if terminated.load(Ordering::Relaxed) => ExitCode::from(143),
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let message = error_chain(&failure);
            error!("runner failed: {message}");
            eprintln!("error: {message}");
            if let Err(e) = reporter.send(&failed_report(env.index, message), API_ATTEMPTS).await {
                warn!("cannot report the failure: {e}");
            }
            ExitCode::from(failure.exit_code())
        }
    }
}

/// An error with its causes, `outer: inner: …`.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// This runner's part of the LoadTest, compiled once.
struct Share {
    index: u32,
    /// How many runners share the load.
    runners: u32,
    /// Every step of the scenario, which every runner reports, with or without work.
    step_keys: Vec<StepKey>,
    scenario_names: Vec<String>,
    /// The compiled share of the load; `None` when it is empty.
    prepared: Option<Prepared>,
    /// What the LoadTest's `setup` gave ([`RunnerEnv::setup_values`]).
    setup_values: Option<Arc<std::collections::BTreeMap<String, String>>>,
}

impl Share {
    /// The final report of a runner that ran nothing (an empty share, or stopped before the
    /// start): every step with zero counts, so it merges like any other.
    fn empty_done(&self, started_at: Option<SystemTime>) -> RunnerReport {
        empty_done_report(self.index, &self.step_keys, &self.scenario_names, started_at)
    }

    /// How this runner's share runs: with the values of the LoadTest's `setup`, which ran (and
    /// whose `teardown` will run) in pods of their own.
    fn run_options(&self, interrupt: Arc<AtomicBool>) -> RunOptions {
        let mut opts = RunOptions { interrupt, ..RunOptions::default() };
        if let Some(values) = &self.setup_values {
            opts.setup_values = values.clone();
            opts.once_elsewhere = true;
        }
        opts
    }
}

/// The phases of one runner: load its share, get ready, wait for the start, run, report.
async fn runner(
    env: &RunnerEnv,
    client: &Client,
    reporter: &Reporter,
    terminated: Arc<AtomicBool>,
) -> Result<(), RunnerError> {
    // A runner that already finished (its pod restarted after the final report) does not run
    // its share again.
    if let Some(previous) = reporter.current().await
        && previous.state == RunnerState::Done
    {
        info!("this runner already reported Done; not running again");
        return Ok(());
    }
    let share = until_terminated(&terminated, "loading its share", load_share(env, client)).await?;
    let exporter = share.prepared.as_ref().map(|p| Arc::new(exporter(env, &p.plan)));
    let metrics_server = serve_metrics(exporter.as_ref(), env.metrics_addr);
    let (view_rx, _watcher) =
        until_terminated(&terminated, "following its LoadTest", follow_loadtest(env, client)).await?;
    reporter
        .send(&RunnerReport::new(env.index, RunnerState::Ready), API_ATTEMPTS)
        .await
        .map_err(RunnerError::api("cannot report Ready"))?;
    info!("ready; waiting for status.startAt");

    let Some(start_at) = wait_for_start(env, view_rx.clone(), &terminated).await? else {
        return finish(reporter, share.empty_done(None), &terminated).await;
    };
    let done = run_share(share, start_at, view_rx, exporter.clone(), reporter, &terminated).await?;
    finish(reporter, done, &terminated).await?;
    if metrics_server.is_some()
        && let Some(e) = &exporter
    {
        stay_for_last_scrape(e).await;
    }
    Ok(())
}

/// The longest a runner stays up after its run for a scrape of its final figures.
const LAST_SCRAPE_CAP: Duration = Duration::from_secs(60);

/// Serves `/metrics` a little longer, until the final figures have been scraped once, when a
/// Prometheus scrapes this runner (else there is nothing to wait for): the counts of the run's
/// last seconds would otherwise be lost with the pod. Bounded by twice the scrape interval seen
/// (and [`LAST_SCRAPE_CAP`]); SIGTERM does not cut it short, the pod's grace period does.
async fn stay_for_last_scrape(exporter: &Exporter) {
    let Some(deadline) = exporter.final_scrape_deadline(LAST_SCRAPE_CAP) else { return };
    let started = Instant::now();
    info!(
        up_to_s = format!("{:.1}", deadline.saturating_duration_since(started).as_secs_f64()),
        "staying up for Prometheus to scrape the final figures"
    );
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if exporter.final_scrape_deadline(LAST_SCRAPE_CAP).is_none() {
            info!(after_s = format!("{:.1}", started.elapsed().as_secs_f64()), "final figures scraped");
            return;
        }
    }
    warn!("no scrape of the final figures came in time; exiting");
}

/// 1. Reads the scenario, takes this runner's share of the load and compiles it: the share when
///    it has work (starting a built-in target when asked, and resolving the base URL's host),
///    else the whole scenario, for the names of the steps it reports.
async fn load_share(env: &RunnerEnv, client: &Client) -> Result<Share, RunnerError> {
    let (whole, path) = read_scenario(env, client).await?;
    let mut scenario = whole.clone();
    scenario.share(env.index, env.runners);
    let (plan, prepared) = if scenario.has_work() {
        let prepared = prepare(&scenario, &path, (env.index, env.runners))?;
        resolve_base_url(&prepared.plan).await?;
        info!(
            vus = prepared.plan.max_vus(),
            executor = prepared.plan.executor_name(),
            base_url = prepared.plan.base_url.as_deref().unwrap_or("-"),
            "prepared this runner's share"
        );
        (prepared.plan.clone(), Some(prepared))
    } else {
        info!("this runner's share of the load is empty; it will report an empty result");
        // An empty share has no load to compile; the whole scenario names the steps.
        let full = stampede_engine::validate(&whole, &path, &compile_options(None))?;
        (Arc::new(full), None)
    };
    Ok(Share {
        index: env.index,
        runners: env.runners,
        step_keys: plan.step_keys.clone(),
        scenario_names: plan.scenarios.iter().map(|s| s.name.clone()).collect(),
        prepared,
        setup_values: env.setup_values.clone().map(Arc::new),
    })
}

/// The scenario as stored for the run (the ConfigMap [`names::scenario_config_map`]), parsed, and
/// the path its errors name.
async fn read_scenario(env: &RunnerEnv, client: &Client) -> Result<(ScenarioFile, PathBuf), RunnerError> {
    let cm_name = names::scenario_config_map(&env.loadtest);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &env.namespace);
    let cm = retry(&format!("get configmap {cm_name}"), API_ATTEMPTS, || config_maps.get(&cm_name))
        .await
        .map_err(RunnerError::api(format!("cannot read the scenario ConfigMap {cm_name}")))?;
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(SCENARIO_KEY))
        .ok_or_else(|| RunnerError::NoScenario { config_map: cm_name.clone() })?;
    let path = PathBuf::from(format!("configmap/{cm_name}/{SCENARIO_KEY}"));
    Ok((stampede_engine::parse_str(text, &path)?, path))
}

/// Where spec.data is mounted (STAMPEDE_DATA_DIR): the scenario's relative paths start there.
fn data_dir() -> Option<PathBuf> {
    std::env::var_os(stampede_api::env::DATA_DIR).map(PathBuf::from)
}

/// Compile options of a runner; `unique` data rows are partitioned by runner (`partition`:
/// index, count), so no row is used by two runners.
fn compile_options(partition: Option<(u32, u32)>) -> CompileOptions {
    CompileOptions { data_partition: partition, runner: partition, base_dir: data_dir(), ..CompileOptions::default() }
}

/// Compiles this runner's share, starting a built-in target when the scenario asks for one.
fn prepare(scenario: &ScenarioFile, path: &Path, partition: (u32, u32)) -> Result<Prepared, RunnerError> {
    stampede_engine::prepare(scenario, path, compile_options(Some(partition))).map_err(|e| match e {
        PrepareError::Invalid(e) => RunnerError::Scenario(e),
        PrepareError::Run(e) => RunnerError::Prepare(e),
    })
}

/// Resolves the base URL's host once, so that a name that does not resolve fails the runner
/// before the start rather than every request after it.
async fn resolve_base_url(plan: &Plan) -> Result<(), RunnerError> {
    let Some(url) = plan.base_url.as_deref() else { return Ok(()) };
    let target = HttpUrl::parse(url).map_err(|e| RunnerError::Resolve(format!("base URL {url}: {e}")))?;
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
    Err(RunnerError::Resolve(format!(
        "cannot resolve the base URL's host {}: {}",
        target.host,
        last.unwrap_or_default()
    )))
}

/// The runner's Prometheus metrics, labelled with its LoadTest and index.
fn exporter(env: &RunnerEnv, plan: &Plan) -> Exporter {
    Exporter::new(
        plan,
        vec![
            ("namespace".into(), env.namespace.clone()),
            ("loadtest".into(), env.loadtest.clone()),
            ("runner".into(), env.index.to_string()),
        ],
    )
}

/// Serves `/metrics` while this runner has work; a busy port must not cost the test.
fn serve_metrics(exporter: Option<&Arc<Exporter>>, addr: Option<std::net::SocketAddr>) -> Option<MetricsServer> {
    let (exporter, addr) = (exporter?, addr?);
    match MetricsServer::start(addr, exporter.clone()) {
        Ok(server) => {
            info!(addr = %server.addr(), "serving Prometheus metrics at /metrics");
            Some(server)
        }
        Err(e) => {
            warn!("cannot serve metrics on {addr}: {e}; running without them");
            None
        }
    }
}

/// 2. Reads the LoadTest and follows it from then on, until the returned guard is dropped.
async fn follow_loadtest(
    env: &RunnerEnv,
    client: &Client,
) -> Result<(watch::Receiver<View>, AbortOnDrop<()>), RunnerError> {
    let loadtests: Api<LoadTest> = Api::namespaced(client.clone(), &env.namespace);
    let lt = retry(&format!("get loadtest {}", env.loadtest), API_ATTEMPTS, || loadtests.get(&env.loadtest))
        .await
        .map_err(RunnerError::api(format!("cannot read LoadTest {}", env.loadtest)))?;
    let (view_tx, view_rx) = watch::channel(View::of(&lt, env.run.as_deref()));
    let version = lt.resource_version().unwrap_or_default();
    let watcher = tokio::spawn(watch_loadtest(loadtests, env.loadtest.clone(), env.run.clone(), version, view_tx));
    Ok((view_rx, AbortOnDrop(watcher)))
}

/// 3. Waits for `status.startAt`. `None`: the test must not start (abort, a finished phase,
///    deletion or SIGTERM came first).
async fn wait_for_start(
    env: &RunnerEnv,
    mut view_rx: watch::Receiver<View>,
    terminated: &AtomicBool,
) -> Result<Option<SystemTime>, RunnerError> {
    loop {
        let view = view_rx.borrow_and_update().clone();
        if let Some(lost) = view.lost {
            return Err(RunnerError::LoadTest(lost));
        }
        if terminated.load(Ordering::Relaxed) {
            return Ok(None);
        }
        if view.stop() {
            info!("not starting: {}", view.stop_reason());
            return Ok(None);
        }
        if let Some(s) = &view.start_at {
            return parse_start_at(s).map(Some).map_err(|e| RunnerError::LoadTest(e.to_string()));
        }
        tokio::select! {
            changed = view_rx.changed() => {
                if changed.is_err() {
                    return Err(RunnerError::LoadTest(format!("lost the watch on LoadTest {}", env.loadtest)));
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
}

/// 4. Runs this runner's share from `start_at` (or only passes the start, without work), and
///    returns its final report.
async fn run_share(
    mut share: Share,
    start_at: SystemTime,
    view_rx: watch::Receiver<View>,
    exporter: Option<Arc<Exporter>>,
    reporter: &Reporter,
    terminated: &Arc<AtomicBool>,
) -> Result<RunnerReport, RunnerError> {
    let known_at = SystemTime::now();
    let delay = start_delay(start_at, known_at);
    let target = Instant::now() + delay;
    info!(start_at = %format_micros(start_at), in_ms = delay.as_millis() as u64, "start instant known");
    // Abort, a finished phase, deletion or SIGTERM stop the wait and the run.
    let interrupt = Arc::new(AtomicBool::new(false));
    let _monitor = AbortOnDrop(tokio::spawn(monitor(view_rx.clone(), interrupt.clone(), terminated.clone())));

    let Some(prepared) = share.prepared.take() else {
        let flag = interrupt.clone();
        let started = tokio::task::spawn_blocking(move || wait_precisely(target, &flag)).await.unwrap_or(false);
        return Ok(share.empty_done(started.then_some(start_at)));
    };
    if prepared.plan.capacity.is_some() {
        return run_capacity(&share, prepared, start_at, target, interrupt, reporter).await;
    }
    let plan = prepared.plan.clone();
    let exporter_final = exporter.clone();
    let (live_tx, live_rx) = watch::channel::<Option<Live>>(None);
    let started_at_cell = Arc::new(std::sync::OnceLock::<SystemTime>::new());
    let live_task = tokio::spawn(live_reports(reporter.clone(), live_rx, started_at_cell.clone()));
    let flag = interrupt.clone();
    let opts = share.run_options(flag);
    // The operator's changes of load (`status.live`), each taken at its instant.
    let _steering = AbortOnDrop(tokio::spawn(steer(view_rx.clone(), opts.control.clone(), share.index, share.runners)));
    let ran = tokio::task::spawn_blocking(move || {
        execute_at(prepared, target, opts, live_tx, exporter, |t| {
            let _ = started_at_cell.set(t);
        })
    })
    .await
    .map_err(|e| RunnerError::LoadTest(format!("the run panicked: {e}")))?;
    let _ = live_task.await; // no Running report may land after the final one
    if let Some(e) = &exporter_final {
        e.finish();
    }
    let Some(ran) = ran else {
        info!("not starting: {}", view_rx.borrow().stop_reason());
        return Ok(share.empty_done(None));
    };
    let (report, outcome) = ran.result.map_err(RunnerError::Run)?;
    let requests: u64 = outcome.metrics.steps.iter().map(|s| s.requests).sum();
    info!(
        requests,
        seconds = outcome.duration.as_secs_f64(),
        interrupted = outcome.interrupted,
        skew_us = signed_micros(ran.started_at, start_at),
        "run finished"
    );
    Ok(RunnerReport {
        started_at: Some(format_micros(ran.started_at)),
        start_known_at: Some(format_micros(known_at)),
        duration_seconds: round3(outcome.duration.as_secs_f64()),
        result: Some(portable::encode_run(&plan.step_keys, &plan.group_keys, &outcome.metrics, &share.scenario_names)),
        live: Some(portable::step_from_interval("", "total", &ran.total)),
        generator: Some(report.run.generator.clone()),
        saturated: report.run.saturated.clone(),
        timeline: Some(ran.timeline.finish(outcome.duration, portable::TIMELINE_BUDGET_BYTES)),
        error_samples: report.error_samples.clone(),
        ..RunnerReport::new(share.index, RunnerState::Done)
    })
}

/// The pause between two plateaus of a capacity search beyond the graceful stop: every runner
/// starts each plateau at the same instant, whoever finished the last one later.
const PLATEAU_GAP: Duration = Duration::from_secs(1);

/// 4'. `executor: capacity`: this runner's share of each plateau, on one schedule for all the
///     runners (plateau k starts at `startAt + k × (plateau + gracefulStop + 1 s)`). After each,
///     its measured part goes to the operator in a Running report; the operator adds the
///     runners' up, judges each plateau and sets `status.capacity.done` once the search is over,
///     which stops the runners (the plateau in progress is cut short). Refining plateaus are the
///     command line's only.
async fn run_capacity(
    share: &Share,
    prepared: Prepared,
    start_at: SystemTime,
    first: Instant,
    interrupt: Arc<AtomicBool>,
    reporter: &Reporter,
) -> Result<RunnerReport, RunnerError> {
    let plan = prepared.plan.clone();
    let Some(search) = plan.capacity.clone() else { return Ok(share.empty_done(None)) };
    let every = search.plateau + plan.graceful_stop() + PLATEAU_GAP;
    let mut plateaus = Vec::new();
    let mut total = stampede_engine::WorkerMetrics::new(plan.step_keys.len(), share.scenario_names.len());
    let mut seconds = 0.0;
    let target = prepared.target;
    for k in 0.. {
        let Some(rate) = search.rate(k) else { break };
        let at = first + every * k;
        let flag = interrupt.clone();
        if !tokio::task::spawn_blocking(move || wait_precisely(at, &flag)).await.unwrap_or(false) {
            break;
        }
        let (p, opts) = (plan.clone(), share.run_options(interrupt.clone()));
        let ran = tokio::task::spawn_blocking(move || {
            stampede_engine::run_plateau(&p, rate, search.plateau, search.warmup, false, &opts, &mut |_| {})
        })
        .await
        .map_err(|e| RunnerError::LoadTest(format!("plateau {k} panicked: {e}")))?
        .map_err(RunnerError::Run)?;
        total.merge(&ran.outcome.metrics);
        seconds += ran.outcome.duration.as_secs_f64();
        if ran.outcome.interrupted {
            info!(plateau = k, "the plateau was cut short");
            break;
        }
        info!(plateau = k, rate, requests = ran.result.requests, p99_ms = ran.result.latency_ms.p99, "plateau done");
        plateaus.push(stampede_api::PlateauShare {
            index: k,
            rate,
            seconds: ran.seconds,
            metrics: portable::encode_run(&plan.step_keys, &plan.group_keys, &ran.window, &share.scenario_names),
            cpu_saturated: ran.cpu_saturated.clone(),
        });
        let running = RunnerReport {
            started_at: Some(format_micros(start_at)),
            plateaus: plateaus.clone(),
            ..RunnerReport::new(share.index, RunnerState::Running)
        };
        if let Err(e) = reporter.send(&running, API_ATTEMPTS).await {
            warn!("cannot report plateau {k}: {e}");
        }
    }
    if let Some(t) = target {
        t.stop();
    }
    Ok(RunnerReport {
        started_at: Some(format_micros(start_at)),
        duration_seconds: round3(seconds),
        result: Some(portable::encode_run(&plan.step_keys, &plan.group_keys, &total, &share.scenario_names)),
        plateaus,
        ..RunnerReport::new(share.index, RunnerState::Done)
    })
}

/// 5. Writes the final report; after SIGTERM it says so (state Failed, results kept).
async fn finish(reporter: &Reporter, mut report: RunnerReport, terminated: &AtomicBool) -> Result<(), RunnerError> {
    if terminated.load(Ordering::Relaxed) {
        report.state = RunnerState::Failed;
        report.message = Some("terminated (SIGTERM); partial results".into());
    }
    reporter.send(&report, FINAL_ATTEMPTS).await.map_err(RunnerError::api("cannot write the final report"))?;
    info!(state = ?report.state, "final report written");
    Ok(())
}

/// What [`execute_at`] produced once it started.
struct Ran {
    started_at: SystemTime,
    result: Result<(Report, RunOutcome), RunError>,
    /// The cumulative total of all ticks.
    total: IntervalStats,
    /// The ticks, as the timeline the operator merges.
    timeline: portable::TimelineBuilder,
}

/// Waits until `target` (precisely: sleeps, then spins the last stretch), then runs. Returns
/// `None` when `interrupt` was set before the start. Sends the cumulative total (with the VUs
/// running and the steps so far) to `live` at the start and every [`LIVE_EVERY`].
fn execute_at(
    prepared: Prepared,
    target: Instant,
    opts: RunOptions,
    live: watch::Sender<Option<Live>>,
    exporter: Option<Arc<Exporter>>,
    on_start: impl FnOnce(SystemTime),
) -> Option<Ran> {
    if !wait_precisely(target, &opts.interrupt) {
        return None;
    }
    let started_at = SystemTime::now();
    on_start(started_at);
    if let Some(e) = &exporter {
        e.started(started_at);
    }
    let empty = portable::step_from_interval("", "total", &IntervalStats::default());
    let _ = live.send(Some(Live { elapsed: Duration::ZERO, total: empty, active_vus: 0, steps: Vec::new() }));
    // Totals with the ticks: for the exporter, and for the steps of the interim reports.
    let opts = RunOptions { totals: true, ..opts };
    let keys = prepared.plan.step_keys.clone();
    let mut budget_passed = false;
    let mut total = IntervalStats::default();
    let mut timeline = portable::TimelineBuilder::new(portable::timeline_interval(prepared.plan.planned_duration()));
    let mut last_sent = Duration::ZERO;
    let mut last_progress = Duration::ZERO;
    let result = stampede_engine::execute_full(prepared, &opts, &mut |t: &Tick| {
        if let Some(e) = &exporter {
            e.observe(t);
        }
        total.merge(&t.stats);
        timeline.add(t.elapsed, t.active_vus, &t.stats);
        if t.elapsed.saturating_sub(last_sent) + Duration::from_millis(100) >= LIVE_EVERY {
            last_sent = t.elapsed;
            let codes = t.totals.as_ref().map(|totals| &totals.steps[..]);
            let steps = portable::encode_live_steps(&keys, &total, codes, crate::report::LIVE_STEPS_BYTES);
            if steps.is_none() && !budget_passed {
                budget_passed = true;
                warn!(
                    budget_bytes = crate::report::LIVE_STEPS_BYTES,
                    "the steps so far take more than the interim report's budget: they are reported at the end only"
                );
            }
            let total = portable::step_from_interval("", "total", &total);
            let steps = steps.unwrap_or_default();
            let _ = live.send(Some(Live { elapsed: t.elapsed, total, active_vus: t.active_vus, steps }));
        }
        if t.elapsed.saturating_sub(last_progress) + Duration::from_millis(100) >= PROGRESS_EVERY {
            last_progress = t.elapsed;
            log_progress(t.elapsed, &total);
        }
    });
    Some(Ran { started_at, result, total, timeline })
}

/// How often the runner logs its progress (`kubectl logs` of a runner pod).
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// One progress line: elapsed time and this runner's cumulative requests, errors, rate and p99.
fn log_progress(elapsed: Duration, total: &IntervalStats) {
    let secs = elapsed.as_secs_f64();
    let rps = if secs > 0.0 { total.requests as f64 / secs } else { 0.0 };
    let p99_ms = if total.latency.is_empty() { 0.0 } else { total.latency.value_at_quantile(0.99) as f64 / 1000.0 };
    info!(
        elapsed_s = format!("{secs:.0}"),
        requests = total.requests,
        errors = total.errors,
        rps = format!("{rps:.1}"),
        p99_ms = format!("{p99_ms:.2}"),
        "progress"
    );
}

/// Takes each change of load the operator decides (in the LoadTest's status) at its instant:
/// this runner's share of the fleet's VUs or rate (split evenly over `runners`, by `index`), or
/// the pause. A change whose instant has passed (the watch was late) is taken at once.
async fn steer(mut rx: watch::Receiver<View>, control: Arc<stampede_engine::LiveControl>, index: u32, runners: u32) {
    let mut taken = 0u32;
    loop {
        let changes: Vec<stampede_api::ControlChange> =
            rx.borrow_and_update().changes.iter().filter(|c| c.seq > taken).cloned().collect();
        for change in changes {
            let at = parse_start_at(&change.at).unwrap_or_else(|_| SystemTime::now());
            tokio::time::sleep(at.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO)).await;
            let share = |n: u32| stampede_model::scenario::split_evenly(u64::from(n), runners, index) as u32;
            let (vus, rate) = (change.vus.map(share), change.rate.map(share));
            let took = control.apply(&stampede_engine::LiveChange { vus, rate, paused: change.paused });
            info!(seq = change.seq, at = %change.at, ?took, "load changed");
            taken = change.seq;
        }
        if rx.changed().await.is_err() {
            return;
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

/// Runs `phase` of the start-up unless SIGTERM comes first (its API calls retry for a while).
async fn until_terminated<T>(
    terminated: &AtomicBool,
    what: &'static str,
    phase: impl std::future::Future<Output = Result<T, RunnerError>>,
) -> Result<T, RunnerError> {
    let signalled = async {
        while !terminated.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        result = phase => result,
        () = signalled => Err(RunnerError::Terminated(what)),
    }
}

/// Sets `terminated` on SIGTERM. The handler is installed before this returns (a signal that
/// comes before the watching task first runs is still seen).
fn spawn_sigterm_watch(terminated: Arc<AtomicBool>) {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut s) => {
            tokio::spawn(async move {
                if s.recv().await.is_some() {
                    warn!("SIGTERM: stopping");
                    terminated.store(true, Ordering::Relaxed);
                }
            });
        }
        Err(e) => warn!("cannot watch SIGTERM: {e}"),
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
