//! The shell: watches LoadTests and their children, gathers what [`lifecycle::decide`]
//! needs, and carries out its decision (server-side apply, deletes, Events, status).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams};
// What the controller does next: reconcile again after a while, or when something changes
// (not to be mistaken for the lifecycle's `Action`s on children).
use kube::runtime::controller::{Action as Next, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use stampede_api::{
    Baseline, DEFAULT_IMAGE, LoadTest, OnceState, OnceStatus, REPORT_KEY, RunnerReport, SCENARIO_KEY, SETUP_KEY,
    TEARDOWN_KEY, names,
};
use stampede_core::Once;
use stampede_model::report::Report;

use crate::children::ChildStream;
use crate::validation::validate_with_files;
use time::OffsetDateTime;

use crate::desired::{self, LOADTEST_LABEL, OnceSteps, ROLE_LABEL};
use crate::lifecycle::{self, Action, JobState, Observed, OncePods, OnceSeen, Scenario};
use crate::{Error, Invalid, Result};

use crate::leader::Fence;
pub use crate::metrics::Metrics;
pub use crate::shell::{Context, MAX_BACKOFF};
use crate::shell::{apply, apply_all, delete, delete_with, object_key, publish, write_status};

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Namespaces to watch; empty: all.
    pub namespaces: Vec<String>,
    /// Runner image for LoadTests that name none.
    pub runner_image: String,
    /// Also reconcile LoadTestSchedules (off when their CRD is not installed).
    pub schedules: bool,
    /// Whether this replica leads, checked before every write ([`Fence::always`] without
    /// leader election).
    pub fence: Fence,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            namespaces: Vec::new(),
            runner_image: DEFAULT_IMAGE.to_string(),
            schedules: true,
            fence: Fence::always(),
        }
    }
}

impl Options {
    /// Watches only `namespace`.
    pub fn namespace(namespace: &str) -> Self {
        Options { namespaces: vec![namespace.to_string()], ..Options::default() }
    }
}

/// Runs the controller until a shutdown signal: over all namespaces when `namespaces` is
/// empty, else one controller per listed namespace (for namespaced RBAC).
pub async fn run(client: Client, metrics: Arc<Metrics>, options: Options) {
    let mut ctx = Context::new(client.clone(), metrics.clone());
    ctx.runner_image = options.runner_image;
    ctx.fence = options.fence;
    let scopes: Vec<Option<String>> =
        if options.namespaces.is_empty() { vec![None] } else { options.namespaces.into_iter().map(Some).collect() };
    // The children's watches fill the context's view and trigger their owner's reconcile.
    let watches: Vec<_> = scopes.iter().map(|ns| ctx.children.watch(&client, ns.as_deref())).collect();
    let ctx = Arc::new(ctx);
    let controllers = scopes.iter().zip(watches).map(|(ns, (jobs, cms))| {
        let controller = controller_for(&client, ns.as_deref(), jobs, cms);
        metrics.watch_store(controller.store());
        controller.run(reconcile, error_policy, ctx.clone()).for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!("reconcile: {e}");
            }
        })
    });
    let schedules = scopes
        .iter()
        .filter(|_| options.schedules)
        .map(|ns| crate::schedule::controller::run(client.clone(), ns.clone(), ctx.clone()));
    futures::future::join(futures::future::join_all(controllers), futures::future::join_all(schedules)).await;
}

fn controller_for(
    client: &Client,
    namespace: Option<&str>,
    jobs: ChildStream<Job>,
    cms: ChildStream<ConfigMap>,
) -> Controller<LoadTest> {
    let lts = match namespace {
        Some(ns) => Api::<LoadTest>::namespaced(client.clone(), ns),
        None => Api::<LoadTest>::all(client.clone()),
    };
    Controller::new(lts, watcher::Config::default()).owns_stream(jobs).owns_stream(cms).shutdown_on_signal()
}

/// A failed reconcile is retried with back-off (1 s doubling to a minute): every [`Error`] is
/// one that may pass; a user's mistake is a condition, decided in [`lifecycle`].
fn error_policy(lt: Arc<LoadTest>, error: &Error, ctx: Arc<Context>) -> Next {
    ctx.metrics.errors.with_label_values(&[error.metric_label()]).inc();
    let wait = ctx.backoff(&object_key(&*lt));
    tracing::warn!(loadtest = %lt.name_any(), kind = error.metric_label(), ?wait, "reconcile failed: {error}");
    Next::requeue(wait)
}

#[tracing::instrument(skip(lt, ctx), fields(loadtest = %lt.name_any()))]
async fn reconcile(lt: Arc<LoadTest>, ctx: Arc<Context>) -> Result<Next> {
    let timer = ctx.metrics.duration.start_timer();
    ctx.metrics.reconciles.inc();
    let result = reconcile_one(&lt, &ctx).await;
    timer.observe_duration();
    if result.is_ok() {
        ctx.succeeded(&object_key(&*lt));
    }
    result
}

/// One reconcile of one LoadTest: observe, decide, act. Public for tests against a mock API.
pub async fn reconcile_one(lt: &LoadTest, ctx: &Context) -> Result<Next> {
    if lt.metadata.deletion_timestamp.is_some() {
        return Ok(Next::await_change());
    }
    let client = &ctx.client;
    let ns = lt.namespace().ok_or_else(|| Error::NoNamespace("a LoadTest"))?;
    let name = lt.name_any();
    let observing = ctx.metrics.part("observe");
    let phase = lt.status.as_ref().map(|s| s.phase).unwrap_or_default();
    // A finished test needs neither its scenario nor its children: only cleanup and TTL remain.
    let (scenario_yaml, plan) = if phase.is_finished() {
        ctx.forget_plans(lt);
        (None, Scenario::NotRead)
    } else if phase == stampede_api::Phase::Pending {
        resolve_scenario(client, lt, &ns).await?
    } else {
        // A run merges what its runners run: the scenario stored (immutable) at its start, not
        // the spec as it may have been edited since.
        (None, stored_scenario(ctx, lt, &ns).await?)
    };
    let ((reports, unreadable), job) = if phase == stampede_api::Phase::Pending || phase.is_finished() {
        ((Vec::new(), Vec::new()), None)
    } else {
        observe(ctx, lt, &ns, run_runners(lt)).await?
    };
    let baseline = match &lt.spec.baseline {
        Some(b) if !phase.is_finished() => Some(read_baseline(client, &ns, b).await?),
        _ => None,
    };
    let once = observe_once(ctx, lt, &ns).await?;
    observing.observe_duration();
    let merging = ctx.metrics.part("merge");
    // The runners' figures, merged at most every `live_every`: a reconcile in between leaves
    // the status's and comes back when the next merge is due.
    let (live, live_wait) = match &plan {
        Scenario::Compiled(p) if phase == stampede_api::Phase::Running => match ctx.live_summary(lt, p, &reports) {
            Ok(live) => (live, None),
            Err(wait) => (None, Some(wait)),
        },
        _ => (None, None),
    };
    merging.observe_duration();
    let deciding = ctx.metrics.part("decide");
    let observed = Observed { now: OffsetDateTime::now_utc(), plan, reports, live, unreadable, job, baseline, once };
    let mut decision = lifecycle::decide(lt, &observed);
    deciding.observe_duration();
    if let Some(wait) = live_wait {
        decision.requeue = Some(decision.requeue.map_or(wait, |d| d.min(wait)));
    }
    carry_out(lt, ctx, &ns, &name, scenario_yaml.as_deref(), decision).await
}

/// Carries out a decision: its actions, and its status (a conditional write).
async fn carry_out(
    lt: &LoadTest,
    ctx: &Context,
    ns: &str,
    name: &str,
    scenario_yaml: Option<&str>,
    decision: lifecycle::Decision,
) -> Result<Next> {
    let (ns, name) = (ns.to_string(), name.to_string());
    // Deletes come after the status is written: a decision taken on a stale copy must not
    // remove the runners' results before the status that holds them is saved (a conflicting
    // write is decided again, on the newer copy, with the children still there). Events too:
    // a decision thrown away for a conflict announces nothing (it would be announced twice).
    let creating = ctx.metrics.part("children");
    for action in &decision.actions {
        match create(lt, ctx, &ns, scenario_yaml, &decision.status, action).await? {
            Created::Done => {}
            Created::Wait => return Ok(Next::requeue(Duration::from_secs(1))),
            // Invalid objects stay invalid: say so once, in the status and an Event.
            Created::Rejected(message) => {
                let decision = lifecycle::rejected(lt, OffsetDateTime::now_utc(), &message);
                return Box::pin(carry_out(lt, ctx, &ns, &name, None, decision)).await;
            }
        }
    }
    creating.observe_duration();
    if lt.status.as_ref() != Some(&decision.status) && !decision.actions.contains(&Action::DeleteLoadTest) {
        // Only the runners' counts moved, and the status was written a moment ago: they go
        // out with the next write, at most `live_every` from now.
        if decision.actions.is_empty()
            && lt.status.as_ref().is_some_and(|old| lifecycle::only_counts_changed(old, &decision.status))
            && let Some(wait) = ctx.counts_wait(lt)
        {
            let wait = decision.requeue.map_or(wait, |d| d.min(wait));
            return Ok(Next::requeue(wait.max(Duration::from_millis(200))));
        }
        let _writing = ctx.metrics.part("status");
        if !write_status(ctx, lt, &decision.status).await? {
            // An already announced start instant, say, must not move; the runners' figures
            // are merged again at once.
            ctx.metrics.status_conflicts.inc();
            ctx.live_not_written(lt);
            return Ok(Next::requeue(Duration::from_millis(200)));
        }
        ctx.status_written(lt);
    }
    let announcing = ctx.metrics.part("events");
    for action in &decision.actions {
        if let Action::Event { warning, reason, note } = action {
            publish(ctx, lt, "Reconcile", *warning, reason, note).await;
        }
    }
    announcing.observe_duration();
    let _removing = ctx.metrics.part("children");
    for action in &decision.actions {
        remove(lt, ctx, &ns, &name, &decision.status, action).await?;
    }
    Ok(match decision.requeue {
        Some(d) => Next::requeue(d.max(Duration::from_millis(200))),
        None => Next::await_change(),
    })
}

/// How a creating action went.
enum Created {
    Done,
    /// The objects of an earlier run are still being deleted: look again in a second.
    Wait,
    /// The API server refused an object as invalid, saying this.
    Rejected(String),
}

/// Carries out an action that creates or writes (before the status is written).
async fn create(
    lt: &LoadTest,
    ctx: &Context,
    ns: &str,
    scenario_yaml: Option<&str>,
    status: &stampede_api::LoadTestStatus,
    action: &Action,
) -> Result<Created> {
    let run = status.run.unwrap_or(1);
    let created = match action {
        Action::ApplyChildren => {
            // What a deleted LoadTest of this name or an earlier run left goes first; the
            // run starts once it is gone (the status stays Pending until then).
            if !replace_previous_run(ctx, lt, ns, run, once_steps(status)).await? {
                tracing::info!(run, "waiting for the objects of an earlier run to be deleted");
                return Ok(Created::Wait);
            }
            apply_children(ctx, lt, run, ns, scenario_yaml.unwrap_or_default(), once_steps(status)).await
        }
        Action::WriteReport(json) => match apply(ctx, ns, &desired::report_config_map(lt, json)).await {
            // Refused as it is (too large, say): retrying cannot help, and the status, which
            // holds the verdict, must not wait for it.
            Err(Error::Kube(kube::Error::Api(e))) if matches!(e.code, 400 | 413 | 422) => {
                let note = format!("the report was not saved: {}", e.message);
                tracing::warn!("{note}");
                publish(ctx, lt, "Reconcile", true, "ReportNotSaved", &note).await;
                Ok(())
            }
            other => other,
        },
        Action::StartOnce(which) => {
            let job = desired::once_job(&as_started(lt), run, *which, &ctx.runner_image, once_steps(status));
            match apply(ctx, ns, &job).await {
                // The run is over and its verdict stands: a teardown pod the API server refuses
                // is said (and, unreported, ends as failed after its time-out), not retried.
                Err(Error::Kube(kube::Error::Api(e))) if *which == Once::Teardown && matches!(e.code, 400 | 422) => {
                    let note = format!("the API server refused the teardown's Job: {}", e.message);
                    publish(ctx, lt, "Reconcile", true, "TeardownFailed", &note).await;
                    Ok(())
                }
                other => other,
            }
        }
        Action::StartRunners => start_runners(ctx, &as_started(lt), ns, status).await,
        Action::Event { .. } | Action::DeleteRunners | Action::DeleteAll | Action::DeleteLoadTest => Ok(()),
    };
    match created {
        Ok(()) => Ok(Created::Done),
        Err(Error::Kube(kube::Error::Api(e))) if e.code == 400 || e.code == 422 => Ok(Created::Rejected(e.message)),
        Err(e) => Err(e),
    }
}

/// Carries out an action that deletes (after the status is written).
async fn remove(
    lt: &LoadTest,
    ctx: &Context,
    ns: &str,
    name: &str,
    status: &stampede_api::LoadTestStatus,
    action: &Action,
) -> Result<()> {
    match action {
        Action::DeleteRunners => {
            delete::<Job>(ctx, ns, &names::job(name)).await?;
            // A setup pod still running (an abort during the setup) goes too.
            if status.setup.is_some() {
                delete::<Job>(ctx, ns, &names::once_job(name, "setup")).await?;
            }
            Ok(())
        }
        Action::DeleteAll => delete_all(ctx, lt, ns, run_runners(lt).max(lt.spec.runners), status).await,
        Action::DeleteLoadTest => delete::<LoadTest>(ctx, ns, name).await,
        _ => Ok(()),
    }
}

/// Makes a failed read [`Error::Unavailable`]: retried with back-off, never the user's mistake.
fn unavailable(what: impl FnOnce() -> String) -> impl FnOnce(kube::Error) -> Error {
    move |source| Error::Unavailable { what: what(), source }
}

/// A ConfigMap the spec names: `Ok(None)` when it does not exist (the user's to fix); an API
/// error is [`Error::Unavailable`] (retried with back-off, never taken for the user's mistake).
async fn config_map(client: &Client, ns: &str, name: &str) -> Result<Option<ConfigMap>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    api.get_opt(name).await.map_err(|source| Error::Unavailable { what: format!("ConfigMap {ns}/{name}"), source })
}

/// The scenario as YAML (when it could be had), and the engine's verdict on it.
async fn resolve_scenario(client: &Client, lt: &LoadTest, ns: &str) -> Result<(Option<String>, Scenario)> {
    let source = format!("LoadTest {ns}/{}", lt.name_any());
    let yaml = match (&lt.spec.scenario, &lt.spec.scenario_from) {
        (Some(inline), _) => serde_yaml::to_string(inline).map_err(|e| format!("spec.scenario: {e}")),
        (None, Some(from)) => match config_map(client, ns, &from.name).await? {
            Some(cm) => cm
                .data
                .and_then(|d| d.get(&from.key).cloned())
                .ok_or_else(|| format!("spec.scenarioFrom: ConfigMap `{}` has no key `{}`", from.name, from.key)),
            None => Err(format!("spec.scenarioFrom: ConfigMap `{}` not found", from.name)),
        },
        (None, None) => Err("set spec.scenario or spec.scenarioFrom".into()),
    };
    let yaml = match yaml {
        Ok(y) => y,
        Err(e) => return Ok((None, Scenario::Invalid(e))),
    };
    let plan = match data_files(client, lt, ns).await? {
        Ok(files) => validate_with_files(lt, &yaml, &source, Some(files)).into(),
        Err(Invalid(e)) => Scenario::Invalid(e),
    };
    Ok((Some(yaml), plan))
}

/// The runner count of the current run: as recorded at its start, or the spec's before it.
fn run_runners(lt: &LoadTest) -> i32 {
    match lt.status.as_ref() {
        Some(s) if s.phase != stampede_api::Phase::Pending && s.runners.desired > 0 => s.runners.desired,
        _ => lt.spec.runners,
    }
}

/// A baseline's report, or why there is none, in words for the status. An API error is
/// [`Error::Unavailable`]: a relative threshold must not fail on a read that may pass.
pub async fn read_baseline(
    client: &Client,
    ns: &str,
    baseline: &Baseline,
) -> Result<std::result::Result<Report, Invalid>> {
    let (cm_name, key) = match (&baseline.load_test, &baseline.config_map) {
        (Some(name), _) => {
            let loadtests: Api<LoadTest> = Api::namespaced(client.clone(), ns);
            let found = loadtests
                .get_opt(name)
                .await
                .map_err(|source| Error::Unavailable { what: format!("LoadTest {ns}/{name}"), source })?;
            let Some(lt) = found else { return Ok(Err(Invalid("not found".into()))) };
            let phase = lt.status.map(|s| s.phase).unwrap_or_default();
            if !phase.is_finished() {
                return Ok(Err(Invalid(format!("has not finished (phase {phase:?})"))));
            }
            (names::report_config_map(name), REPORT_KEY.to_string())
        }
        (None, Some(cm)) => (cm.name.clone(), cm.key.clone()),
        (None, None) => return Ok(Err(Invalid("names neither a LoadTest nor a ConfigMap".into()))),
    };
    let Some(cm) = config_map(client, ns, &cm_name).await? else {
        return Ok(Err(Invalid(format!("has no report (ConfigMap `{cm_name}` not found)"))));
    };
    let Some(text) = cm.data.and_then(|mut d| d.remove(&key)) else {
        return Ok(Err(Invalid(format!("ConfigMap `{cm_name}` has no key `{key}`"))));
    };
    Ok(serde_json::from_str(&text)
        .map_err(|e| Invalid(format!("`{cm_name}/{key}` is not a Stampede report: {}", json_problem(&e)))))
}

/// What is wrong with a JSON text, and where, without quoting it: serde's words for a wrong
/// value quote the value, and a baseline's ConfigMap is the user's (it may hold anything), while
/// this goes to the status, an Event and the log. A missing field is named (its name is ours).
pub(crate) fn json_problem(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let what = match e.classify() {
        Category::Syntax => "not JSON".to_string(),
        Category::Eof => "JSON cut short".to_string(),
        Category::Io => "unreadable".to_string(),
        Category::Data => {
            let said = e.to_string();
            match said.split(" at line ").next().filter(|w| w.starts_with("missing field `")) {
                Some(missing) => missing.to_string(),
                None => "JSON of another shape (a value of the wrong type or form)".to_string(),
            }
        }
    };
    format!("{what}, at line {} column {}", e.line(), e.column())
}

/// The scenario of a run in progress, from the ConfigMap written at its start (what its runners
/// read); the spec's when that ConfigMap is missing. Compiled once per run: the stored scenario
/// is immutable, so later reconciles of the run take the plan from [`Context`].
async fn stored_scenario(ctx: &Context, lt: &LoadTest, ns: &str) -> Result<Scenario> {
    let key = crate::shell::current_run(lt);
    if let Some(plan) = ctx.plans.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(Scenario::Compiled(plan.clone()));
    }
    let client = &ctx.client;
    let name = names::scenario_config_map(&lt.name_any());
    let stored = config_map(client, ns, &name).await?.and_then(|cm| cm.data).and_then(|mut d| d.remove(SCENARIO_KEY));
    let scenario = match stored {
        None => resolve_scenario(client, lt, ns).await?.1,
        Some(yaml) => match data_files(client, lt, ns).await? {
            Ok(files) => validate_with_files(lt, &yaml, &format!("ConfigMap {ns}/{name}"), Some(files)).into(),
            Err(Invalid(e)) => Scenario::Invalid(e),
        },
    };
    if let Scenario::Compiled(plan) = &scenario {
        ctx.plans.lock().unwrap_or_else(|e| e.into_inner()).insert(key, plan.clone());
    }
    Ok(scenario)
}

/// The contents of `spec.data`, by file name, as the runners will see them mounted; or what the
/// spec names that is not there.
async fn data_files(
    client: &Client,
    lt: &LoadTest,
    ns: &str,
) -> Result<std::result::Result<BTreeMap<String, Vec<u8>>, Invalid>> {
    let mut files = BTreeMap::new();
    for (i, d) in lt.spec.data.iter().enumerate() {
        let (cm, key) = (&d.config_map.name, &d.config_map.key);
        let at = format!("spec.data[{i}] ({})", d.name);
        let Some(found) = config_map(client, ns, cm).await? else {
            return Ok(Err(Invalid(format!("{at}: ConfigMap `{cm}` not found"))));
        };
        let bytes = found
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|t| t.clone().into_bytes())
            .or_else(|| found.binary_data.as_ref().and_then(|b| b.get(key)).map(|b| b.0.clone()));
        match bytes {
            Some(bytes) => files.insert(d.name.clone(), bytes),
            None => return Ok(Err(Invalid(format!("{at}: ConfigMap `{cm}` has no key `{key}`")))),
        };
    }
    Ok(Ok(files))
}

/// The reports and Job of the current run of `lt`, as the controller's watches last saw them:
/// a result or Job of another run (a deleted LoadTest of the same name, an earlier run) counts
/// as nothing yet.
async fn observe(
    ctx: &Context,
    lt: &LoadTest,
    ns: &str,
    runners: i32,
) -> Result<((Vec<Option<RunnerReport>>, Vec<String>), Option<JobState>)> {
    let name = lt.name_any();
    let run = lt.status.as_ref().and_then(|s| s.run).unwrap_or(1);
    let run_id = stampede_api::run_id(lt.metadata.uid.as_deref().unwrap_or_default(), run);
    let mut unreadable = Vec::new();
    let mut reports = Vec::with_capacity(runners.max(1) as usize);
    for i in 0..runners.max(1) as u32 {
        let found = ctx.children.config_map(ns, &names::result_config_map(&name, i)).await?;
        let report = found.map(|cm| ctx.read_report(&run_id, i, &cm).map_err(|Invalid(e)| unreadable.push(e)).ok());
        reports.push(report.flatten().flatten());
    }
    let job = ctx.children.job(ns, &names::job(&name)).await?;
    let job = match job.filter(|j| desired::is_of_run(&j.metadata, lt, run)) {
        None => None,
        Some(job) => {
            let mut state = job_state(&job);
            let selector = format!("{LOADTEST_LABEL}={}", names::label_value(&name));
            let runner_pods = format!("{selector},{ROLE_LABEL}=runner");
            let client = &ctx.client;
            if state.failed > 0 {
                state.failures = pod_failures(client, ns, &runner_pods).await?;
            }
            // Before the start, while some runner is not ready: why its pod is not starting.
            let ready = reports.iter().flatten().filter(|r| r.state != stampede_api::RunnerState::Failed).count();
            let waiting = lt.status.as_ref().is_some_and(|s| s.start_at.is_none());
            if waiting && state.failed == 0 && ready < runners.max(1) as usize {
                state.not_starting = match ctx.recent_pod_look(&run_id) {
                    Some(found) => found,
                    None => {
                        let found = pods_not_starting(client, ns, &runner_pods).await?;
                        ctx.pods_looked(&run_id, found.clone());
                        found
                    }
                };
            }
            Some(state)
        }
    };
    Ok(((reports, unreadable), job))
}

/// A Job's counters.
fn job_state(job: &Job) -> JobState {
    let status = job.status.clone().unwrap_or_default();
    JobState {
        active: status.active.unwrap_or(0),
        terminating: status.terminating.unwrap_or(0),
        succeeded: status.succeeded.unwrap_or(0),
        failed: status.failed.unwrap_or(0),
        failures: Vec::new(),
        not_starting: Vec::new(),
    }
}

/// Which once-run step lists the run has, as its status (set when the run started) says.
fn once_steps(status: &stampede_api::LoadTestStatus) -> OnceSteps {
    OnceSteps { setup: status.setup.is_some(), teardown: status.teardown.is_some() }
}

/// The setup and teardown pods of the current run, while one runs (else nothing is read): their
/// reports from the once ConfigMap, and their Jobs.
async fn observe_once(ctx: &Context, lt: &LoadTest, ns: &str) -> Result<OncePods> {
    let Some(status) = lt.status.as_ref() else { return Ok(OncePods::default()) };
    let running = |s: &Option<OnceStatus>| s.as_ref().is_some_and(|s| s.state == OnceState::Running);
    let wanted: Vec<Once> = [(Once::Setup, &status.setup), (Once::Teardown, &status.teardown)]
        .into_iter()
        .filter(|(_, s)| running(s))
        .map(|(which, _)| which)
        .collect();
    let mut pods = OncePods::default();
    if wanted.is_empty() {
        return Ok(pods);
    }
    let name = lt.name_any();
    let run = status.run.unwrap_or(1);
    let run_id = stampede_api::run_id(lt.metadata.uid.as_deref().unwrap_or_default(), run);
    let reports = ctx.children.config_map(ns, &names::once_config_map(&name)).await?;
    let reports = reports.as_ref().and_then(|cm| cm.data.as_ref());
    for which in wanted {
        let (role, key) = match which {
            Once::Setup => ("setup", SETUP_KEY),
            Once::Teardown => ("teardown", TEARDOWN_KEY),
        };
        let report = reports.and_then(|d| d.get(key)).and_then(|t| lifecycle::read_once(t, &run_id));
        let job = ctx.children.job(ns, &names::once_job(&name, role)).await?;
        let mut job = job.filter(|j| desired::is_of_run(&j.metadata, lt, run)).map(|j| job_state(&j));
        if let Some(state) = job.as_mut().filter(|j| j.failed > 0 && report.is_none()) {
            let selector = format!("{LOADTEST_LABEL}={},{ROLE_LABEL}={role}", names::label_value(&name));
            state.failures = pod_failures(&ctx.client, ns, &selector).await?;
        }
        let seen = OnceSeen { report, job };
        match which {
            Once::Setup => pods.setup = seen,
            Once::Teardown => pods.teardown = seen,
        }
    }
    Ok(pods)
}

/// Runner pods that cannot start, with the kubelet's or the scheduler's reason.
async fn pods_not_starting(client: &Client, ns: &str, selector: &str) -> Result<Vec<lifecycle::PodProblem>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    // From the API server's cache (any recent version), not a read through to etcd.
    let list = pods
        .list(&ListParams::default().labels(selector).match_any())
        .await
        .map_err(unavailable(|| format!("the runner Pods in {ns}")))?;
    let mut out: Vec<lifecycle::PodProblem> = list
        .items
        .iter()
        .filter_map(|pod| {
            let status = pod.status.as_ref()?;
            let index = pod.annotations().get("batch.kubernetes.io/job-completion-index").map_or("?", String::as_str);
            let waiting = status
                .container_statuses
                .iter()
                .flatten()
                .chain(status.init_container_statuses.iter().flatten())
                .find_map(|c| c.state.as_ref()?.waiting.as_ref())
                .map(|w| (w.reason.as_deref().unwrap_or_default(), w.message.as_deref().unwrap_or_default()));
            let unscheduled =
                status.conditions.iter().flatten().find(|c| c.type_ == "PodScheduled" && c.status == "False").map(
                    |c| (c.reason.as_deref().unwrap_or("Unschedulable"), c.message.as_deref().unwrap_or_default()),
                );
            lifecycle::PodProblem::of(index, waiting, unscheduled)
        })
        .collect();
    out.sort_by(|a, b| a.runner.cmp(&b.runner));
    Ok(out)
}

/// Why runner pods failed: `runner 2: OOMKilled (exit 137)`.
async fn pod_failures(client: &Client, ns: &str, selector: &str) -> Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let list = pods
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(unavailable(|| format!("the runner Pods in {ns}")))?;
    let mut out = Vec::new();
    for pod in list.items {
        let status = pod.status.clone().unwrap_or_default();
        if status.phase.as_deref() != Some("Failed") {
            continue;
        }
        let index =
            pod.annotations().get("batch.kubernetes.io/job-completion-index").cloned().unwrap_or_else(|| "?".into());
        let containers = status.container_statuses.unwrap_or_default();
        let terminated = containers.iter().find_map(|c| c.state.as_ref()?.terminated.as_ref());
        let terminated = terminated.map(|t| (t.reason.as_deref(), t.exit_code));
        out.push(lifecycle::pod_failure(&index, terminated, status.reason.as_deref()));
    }
    out.sort();
    Ok(out)
}

/// Deletes the children of `lt` that belong to no run or another run than `run` (by owner UID
/// and [`stampede_api::RUN_LABEL`]): the runner Job (in the foreground, so that its pods are
/// gone before new ones start) and the scenario, result and once ConfigMaps; when this run has
/// `setup` or `teardown` (`once`), their Jobs too; and the run before's setup Secret, whatever
/// this run has ([`desired::replaced`]). True when none is left.
async fn replace_previous_run(ctx: &Context, lt: &LoadTest, ns: &str, run: u32, once: OnceSteps) -> Result<bool> {
    let client = &ctx.client;
    let name = lt.name_any();
    let mut clear = true;
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let replaced = desired::replaced(lt, run, once);
    for job_name in replaced.jobs {
        if let Some(job) = jobs.get_opt(&job_name).await?
            && !desired::is_of_run(&job.metadata, lt, run)
        {
            clear = false;
            if job.metadata.deletion_timestamp.is_none() {
                tracing::info!(job = %job.name_any(), "deleting a Job of an earlier run");
                delete_with::<Job>(ctx, ns, &job.name_any(), &DeleteParams::foreground()).await?;
            }
        }
    }
    // The setup values of the run before, with or without a setup in this run.
    if let Some(secret) = &replaced.setup_secret {
        delete::<Secret>(ctx, ns, secret).await?;
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let selector = format!("{LOADTEST_LABEL}={}", names::label_value(&name));
    let report = names::report_config_map(&name);
    let ours = |n: &str| {
        let result = n.rsplit_once("-result-").and_then(|(_, i)| i.parse::<u32>().ok());
        n == names::scenario_config_map(&name)
            || n == names::once_config_map(&name)
            || result.is_some_and(|i| n == names::result_config_map(&name, i))
    };
    for cm in cms.list(&ListParams::default().labels(&selector)).await?.items {
        let cm_name = cm.name_any();
        if cm_name == report || !ours(&cm_name) || desired::is_of_run(&cm.metadata, lt, run) {
            continue;
        }
        tracing::info!(configmap = %cm_name, "deleting a ConfigMap of an earlier run");
        delete::<ConfigMap>(ctx, ns, &cm_name).await?;
    }
    Ok(clear)
}

/// Creates the run's objects; the runners too, unless a setup must succeed first
/// ([`start_runners`] then).
async fn apply_children(
    ctx: &Context,
    lt: &LoadTest,
    run: u32,
    ns: &str,
    scenario_yaml: &str,
    once: OnceSteps,
) -> Result<()> {
    let d = desired::desired(lt, run, scenario_yaml, &ctx.runner_image, once);
    apply(ctx, ns, &d.account).await?;
    apply(ctx, ns, &d.role).await?;
    apply(ctx, ns, &d.binding).await?;
    apply(ctx, ns, &d.scenario).await?;
    if let Some(cm) = &d.once_reports {
        apply(ctx, ns, cm).await?;
    }
    if let Some(secret) = &d.setup_secret {
        apply(ctx, ns, secret).await?;
    }
    if once.setup {
        return Ok(());
    }
    apply_all(ctx, ns, &d.results).await?;
    apply(ctx, ns, &d.job).await
}

/// `lt` with the runner count its run started with (a change of `spec.runners` during a run
/// applies to the next one).
fn as_started(lt: &LoadTest) -> std::borrow::Cow<'_, LoadTest> {
    let runners = run_runners(lt);
    if runners == lt.spec.runners {
        return std::borrow::Cow::Borrowed(lt);
    }
    let mut started = lt.clone();
    started.spec.runners = runners;
    std::borrow::Cow::Owned(started)
}

/// Creates the runners (their result ConfigMaps and Job) of a run whose setup succeeded.
async fn start_runners(ctx: &Context, lt: &LoadTest, ns: &str, status: &stampede_api::LoadTestStatus) -> Result<()> {
    let run = status.run.unwrap_or(1);
    let d = desired::desired(lt, run, "", &ctx.runner_image, once_steps(status));
    apply_all(ctx, ns, &d.results).await?;
    apply(ctx, ns, &d.job).await
}

async fn delete_all(
    ctx: &Context,
    lt: &LoadTest,
    ns: &str,
    runners: i32,
    status: &stampede_api::LoadTestStatus,
) -> Result<()> {
    let (name, once) = (&lt.name_any(), once_steps(status));
    delete::<Job>(ctx, ns, &names::job(name)).await?;
    if once.setup || once.teardown {
        delete::<Job>(ctx, ns, &names::once_job(name, "setup")).await?;
        delete::<Job>(ctx, ns, &names::once_job(name, "teardown")).await?;
        delete::<ConfigMap>(ctx, ns, &names::once_config_map(name)).await?;
        let run = stampede_api::run_id(lt.metadata.uid.as_deref().unwrap_or_default(), status.run.unwrap_or(1));
        delete::<Secret>(ctx, ns, &names::setup_secret(name, &run)).await?;
    }
    delete::<ConfigMap>(ctx, ns, &names::scenario_config_map(name)).await?;
    for i in 0..runners.max(1) as u32 {
        delete::<ConfigMap>(ctx, ns, &names::result_config_map(name, i)).await?;
    }
    delete::<RoleBinding>(ctx, ns, &names::runner_account(name)).await?;
    delete::<Role>(ctx, ns, &names::runner_account(name)).await?;
    delete::<ServiceAccount>(ctx, ns, &names::runner_account(name)).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_json_problem_says_what_and_where_and_never_quotes_the_text() {
        let problem = |text: &str| super::json_problem(&serde_json::from_str::<super::Report>(text).unwrap_err());
        let quoted = problem(r#""hunter2""#);
        assert_eq!(quoted, "JSON of another shape (a value of the wrong type or form), at line 1 column 9");
        assert!(!problem(r#"{"name": "hunter2", "run": 7}"#).contains("hunter2"));
        assert!(problem("{}").starts_with("missing field `"), "{}", problem("{}"));
        assert_eq!(problem("{"), "JSON cut short, at line 1 column 1");
        assert_eq!(problem("token=hunter2"), "not JSON, at line 1 column 2");
    }
}
