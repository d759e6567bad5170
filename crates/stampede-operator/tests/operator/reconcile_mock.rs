//! One reconcile against a mock API server. Each test scripts the exact requests the
//! operator must make for one situation, in order (method, path, query), answers them as
//! an API server would, then checks the bodies it was sent and the status it wrote. The
//! mock fails the test on a request it did not expect, and on one it expected but never got.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::api::batch::v1::JobStatus;
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use stampede_api::{
    LoadTest, LoadTestSpec, LoadTestStatus, OnceStatus, Phase, RESULT_KEY, RunnerReport, RunnerState, SCENARIO_KEY,
};
use stampede_core::WorkerMetrics;
use stampede_core::portable;
use stampede_operator::children::Children;
use stampede_operator::controller::{Context, Metrics, reconcile_one};
use stampede_operator::leader::Fence;
use stampede_operator::lifecycle::{self, Observed, START_DELAY};
use stampede_operator::validation::validate;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::task::JoinHandle;
use tower_test::mock;

pub(crate) const NS: &str = "perf";
pub(crate) const NAME: &str = "shop";
pub(crate) const UID: &str = "0b0b0b0b-1111-2222-3333-444444444444";
/// Longest wait for the reconcile, and for the mock to see the end of its script.
const TIMEOUT: Duration = Duration::from_secs(10);

use crate::common::SCENARIO;

// ---------------------------------------------------------------------------------------
// The mock API server.

/// One request the operator must make next, and how the mock answers it.
#[derive(Debug)]
pub(crate) enum Expect {
    /// Server-side apply of a child at this path; answered with the applied object.
    Apply(String),
    /// The list of this LoadTest's ConfigMaps by label; answered with one result ConfigMap
    /// per runner, holding its report where there is one.
    ListResults(Vec<Option<RunnerReport>>),
    /// The same list, answered with these ConfigMaps.
    ListConfigMaps(Vec<Value>),
    /// A get of the runner Job; answered with a Job in this state, or 404.
    GetJob(Option<JobStatus>),
    /// An Event about the LoadTest, with this reason.
    Event { reason: &'static str, warning: bool },
    /// A DELETE (background propagation) of this path.
    Delete(String),
    /// A DELETE in the foreground (dependents first) of this path.
    DeleteForeground(String),
    /// A get of the runner Job; answered with a finished Job of another LoadTest object (a
    /// deleted one of the same name).
    GetStaleJob,
    /// The server-side apply of the status subresource; answered with the LoadTest.
    ApplyStatus,
    /// The same apply, answered 409 Conflict (the LoadTest changed since it was read).
    ApplyStatusConflict,
    /// A server-side apply answered 422 Invalid, as the API server answers an invalid object.
    ApplyRejected(String),
    /// A get of the run's scenario ConfigMap (a started run merges what its runners run);
    /// answered with the common scenario.
    GetScenario,
    /// A GET of this path answered 503 Service Unavailable (an API server under load).
    Unavailable(String),
    /// The list of this LoadTest's pods by label; answered with these pods.
    ListPods(Vec<Value>),
}

/// What the operator's watches hold when it reconciles (it reads a run's results and Jobs
/// there, not from the API server).
#[derive(Clone, Debug)]
pub(crate) enum Watched {
    /// One result ConfigMap of run 1 per runner, holding its report where there is one.
    Results(Vec<Option<RunnerReport>>),
    /// Like `Results`, with each result ConfigMap's text as given (e.g. not a report).
    ResultTexts(Vec<Option<String>>),
    /// The runner Job of run 1, in this state.
    Job(JobStatus),
    /// The once ConfigMap, holding the setup pod's report of run 1.
    SetupReport(OnceStatus),
    /// The Job of `setup` or `teardown` of run 1, in this state.
    OnceJob(&'static str, JobStatus),
}

/// The objects of `watched`, as the operator's watches would hold them.
pub(crate) fn view(watched: Vec<Watched>) -> Children {
    let (mut cms, mut jobs) = (Vec::new(), Vec::new());
    for w in watched {
        match w {
            Watched::Results(reports) => cms.extend(result_config_maps(&stamped(&reports))),
            Watched::ResultTexts(texts) => cms.extend(result_config_maps(&texts)),
            Watched::Job(state) => jobs.push(runner_job(&state)),
            Watched::SetupReport(report) => cms.push(setup_report(&report)),
            Watched::OnceJob(which, state) => jobs.push(once_job(which, &state)),
        }
    }
    let cms = cms.into_iter().map(|v| serde_json::from_value(v).expect("a ConfigMap")).collect();
    let jobs = jobs.into_iter().map(|v| serde_json::from_value(v).expect("a Job")).collect();
    Children::fixed(cms, jobs)
}

/// Runner reports as the runners of run 1 write them: stamped with it.
fn stamped(reports: &[Option<RunnerReport>]) -> Vec<Option<String>> {
    reports
        .iter()
        .map(|r| {
            r.as_ref().map(|r| {
                let run = r.run.clone().or_else(|| Some(stampede_api::run_id(UID, 1)));
                serde_json::to_string(&RunnerReport { run, ..r.clone() }).unwrap()
            })
        })
        .collect()
}

/// The owner reference of this LoadTest (or of a deleted one of the same name: `uid`).
fn owned_by(uid: &str) -> Value {
    json!([{"apiVersion": "stampede.dev/v1alpha1", "kind": "LoadTest", "name": NAME, "uid": uid}])
}

/// One result ConfigMap of run 1 per runner, holding its text where there is one.
fn result_config_maps(texts: &[Option<String>]) -> Vec<Value> {
    texts
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut cm = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": format!("{NAME}-result-{i}"), "namespace": NS,
                             "labels": {"stampede.dev/loadtest": NAME, "stampede.dev/run": "1"},
                             "ownerReferences": owned_by(UID)},
            });
            if let Some(text) = r {
                cm["data"] = json!({RESULT_KEY: text});
            }
            cm
        })
        .collect()
}

/// The runner Job of run 1 of the LoadTest with `uid`, in this state.
fn runner_job_of(uid: &str, state: &JobStatus) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": format!("{NAME}-runners"), "namespace": NS,
                        "labels": {"stampede.dev/run": "1"}, "ownerReferences": owned_by(uid)},
           "status": state})
}

fn runner_job(state: &JobStatus) -> Value {
    runner_job_of(UID, state)
}

/// The once ConfigMap of run 1, holding the setup pod's report.
fn setup_report(report: &OnceStatus) -> Value {
    let name = stampede_api::names::once_config_map(NAME);
    let report = OnceStatus { run: Some(stampede_api::run_id(UID, 1)), ..report.clone() };
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": NS,
                        "labels": {"stampede.dev/loadtest": NAME, "stampede.dev/run": "1"}},
           "data": {stampede_api::SETUP_KEY: serde_json::to_string(&report).unwrap()}})
}

/// The Job of `setup` or `teardown` of run 1, in this state.
fn once_job(which: &str, state: &JobStatus) -> Value {
    let name = stampede_api::names::once_job(NAME, which);
    json!({"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": NS, "labels": {"stampede.dev/run": "1"},
                        "ownerReferences": owned_by(UID)},
           "status": state})
}

/// A request the mock answered.
#[derive(Debug)]
pub(crate) struct Seen {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) body: Value,
}

pub(crate) fn api_path(kind: &str, name: &str) -> String {
    let prefix = match kind {
        "serviceaccounts" | "configmaps" | "secrets" => "/api/v1".to_string(),
        "roles" | "rolebindings" => "/apis/rbac.authorization.k8s.io/v1".to_string(),
        "jobs" => "/apis/batch/v1".to_string(),
        "events" => "/apis/events.k8s.io/v1".to_string(),
        "loadtests" => "/apis/stampede.dev/v1alpha1".to_string(),
        other => panic!("no API path for {other}"),
    };
    if name.is_empty() {
        format!("{prefix}/namespaces/{NS}/{kind}")
    } else {
        format!("{prefix}/namespaces/{NS}/{kind}/{name}")
    }
}

pub(crate) fn job_path() -> String {
    api_path("jobs", &format!("{NAME}-runners"))
}

/// Answers the operator's requests from a script, asserting each one.
struct ApiServerVerifier {
    handle: mock::Handle<Request<Body>, Response<Body>>,
    lt: LoadTest,
}

impl ApiServerVerifier {
    /// Serves `script` in order, then expects no further request until the client is
    /// dropped. Yields every request it answered.
    fn serve(mut self, script: Vec<Expect>) -> JoinHandle<Vec<Seen>> {
        tokio::spawn(async move {
            let mut seen = Vec::new();
            for (i, expect) in script.into_iter().enumerate() {
                let Some((request, send)) = self.handle.next_request().await else {
                    panic!("request #{i} never came; expected {expect:?}");
                };
                let (parts, body) = request.into_parts();
                let bytes = body.collect().await.expect("request body").to_bytes();
                let body: Value = if bytes.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&bytes).expect("the request body is JSON")
                };
                let query: BTreeMap<String, String> = parts
                    .uri
                    .query()
                    .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
                    .unwrap_or_default();
                let content_type =
                    parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
                let got = format!("{} {}", parts.method, parts.uri);
                let (method, path) = (parts.method, parts.uri.path().to_string());
                let is = |m: Method, p: &str| {
                    assert!(method == m && path == p, "request #{i}: expected {expect:?} ({m} {p}), got {got}");
                };
                let applied = || {
                    assert_eq!(content_type, "application/apply-patch+yaml", "request #{i} ({got}) is an apply");
                    assert_eq!(query.get("fieldManager").map(String::as_str), Some("stampede-operator"), "{got}");
                    assert_eq!(query.get("force").map(String::as_str), Some("true"), "{got}");
                };
                let (status, answer) = match &expect {
                    Expect::Apply(p) => {
                        is(Method::PATCH, p);
                        applied();
                        (StatusCode::OK, body.clone())
                    }
                    Expect::ApplyRejected(p) => {
                        is(Method::PATCH, p);
                        applied();
                        (
                            StatusCode::UNPROCESSABLE_ENTITY,
                            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": "Job.batch \"shop-runners\" is invalid: spec.template.labels: Invalid value",
                                   "reason": "Invalid", "code": 422}),
                        )
                    }
                    Expect::ApplyStatus => {
                        is(Method::PATCH, &format!("{}/status", api_path("loadtests", NAME)));
                        applied();
                        assert_eq!(
                            (body["apiVersion"].as_str(), body["kind"].as_str()),
                            (Some("stampede.dev/v1alpha1"), Some("LoadTest"))
                        );
                        let mut lt = self.lt.clone();
                        lt.status = Some(serde_json::from_value(body["status"].clone()).expect("a valid status"));
                        (StatusCode::OK, serde_json::to_value(&lt).unwrap())
                    }
                    Expect::ApplyStatusConflict => {
                        is(Method::PATCH, &format!("{}/status", api_path("loadtests", NAME)));
                        applied();
                        (
                            StatusCode::CONFLICT,
                            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": "the object has been modified", "reason": "Conflict", "code": 409}),
                        )
                    }
                    Expect::GetScenario => {
                        is(Method::GET, &api_path("configmaps", &format!("{NAME}-scenario")));
                        (
                            StatusCode::OK,
                            json!({"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": format!("{NAME}-scenario"), "namespace": NS},
                                   "data": {"scenario.yaml": crate::common::SCENARIO}}),
                        )
                    }
                    Expect::Unavailable(p) => {
                        is(Method::GET, p);
                        (
                            StatusCode::SERVICE_UNAVAILABLE,
                            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": "the server is currently unable to handle the request",
                                   "reason": "ServiceUnavailable", "code": 503}),
                        )
                    }
                    Expect::ListPods(items) => {
                        is(Method::GET, &format!("/api/v1/namespaces/{NS}/pods"));
                        let selector = query.get("labelSelector").map(String::as_str);
                        assert_eq!(selector, Some("stampede.dev/loadtest=shop,stampede.dev/role=runner"), "{got}");
                        // Served from the API server's cache, not read through to etcd.
                        assert_eq!(query.get("resourceVersion").map(String::as_str), Some("0"), "{got}");
                        (StatusCode::OK, json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}))
                    }
                    Expect::ListConfigMaps(items) => {
                        is(Method::GET, &api_path("configmaps", ""));
                        let selector = query.get("labelSelector").map(String::as_str);
                        assert_eq!(selector, Some("stampede.dev/loadtest=shop"), "{got}");
                        (
                            StatusCode::OK,
                            json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {}, "items": items}),
                        )
                    }
                    Expect::ListResults(reports) => {
                        is(Method::GET, &api_path("configmaps", ""));
                        let selector = query.get("labelSelector").map(String::as_str);
                        assert_eq!(selector, Some("stampede.dev/loadtest=shop"), "{got}");
                        let items = result_config_maps(&stamped(reports));
                        (
                            StatusCode::OK,
                            json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {}, "items": items}),
                        )
                    }
                    Expect::GetJob(state) => {
                        is(Method::GET, &job_path());
                        match state {
                            Some(s) => (StatusCode::OK, runner_job(s)),
                            None => (StatusCode::NOT_FOUND, not_found(&format!("{NAME}-runners"))),
                        }
                    }
                    Expect::GetStaleJob => {
                        is(Method::GET, &job_path());
                        let finished = JobStatus { succeeded: Some(1), ..JobStatus::default() };
                        (StatusCode::OK, runner_job_of("an-older-object", &finished))
                    }
                    Expect::Event { reason, warning } => {
                        is(Method::POST, &api_path("events", ""));
                        assert_eq!(body["reason"], *reason, "{body}");
                        assert_eq!(body["type"], if *warning { "Warning" } else { "Normal" }, "{body}");
                        assert_eq!(body["reportingController"], "stampede-operator", "{body}");
                        let regarding = &body["regarding"];
                        assert_eq!(
                            (&regarding["kind"], &regarding["name"], &regarding["namespace"], &regarding["uid"]),
                            (&json!("LoadTest"), &json!(NAME), &json!(NS), &json!(UID)),
                            "{body}"
                        );
                        (StatusCode::CREATED, body.clone())
                    }
                    Expect::Delete(p) | Expect::DeleteForeground(p) => {
                        is(Method::DELETE, p);
                        let policy = if matches!(expect, Expect::Delete(_)) { "Background" } else { "Foreground" };
                        assert_eq!(body["propagationPolicy"], policy, "{body}");
                        (
                            StatusCode::OK,
                            json!({"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 200}),
                        )
                    }
                };
                let response = Response::builder()
                    .status(status)
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Body::from(serde_json::to_vec(&answer).unwrap()))
                    .unwrap();
                send.send_response(response);
                seen.push(Seen { method, path, body });
            }
            if let Some((request, _)) = self.handle.next_request().await {
                panic!("unexpected request after the script: {} {}", request.method(), request.uri());
            }
            seen
        })
    }
}

fn not_found(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404,
           "message": format!("\"{name}\" not found")})
}

/// Reconciles `lt` once against a mock serving `script`, its watches holding nothing; returns
/// what the mock saw.
pub(crate) async fn reconcile_against(lt: &LoadTest, script: Vec<Expect>) -> Vec<Seen> {
    reconcile_watching(lt, vec![], script).await
}

/// Reconciles `lt` once, its watches holding `watched`, against a mock serving `script`;
/// returns what the mock saw.
pub(crate) async fn reconcile_watching(lt: &LoadTest, watched: Vec<Watched>, script: Vec<Expect>) -> Vec<Seen> {
    let (outcomes, seen) = reconcile_fenced(&[(lt.clone(), watched)], script, Fence::always()).await;
    if let Err(e) = &outcomes[0] {
        panic!("reconcile failed: {e}");
    }
    seen
}

/// Reconciles each LoadTest of `lts` in turn, the watches holding what is given with it, with
/// one operator (one [`Context`]) against a mock serving `script`; returns each reconcile's
/// outcome (an error as text) and what the mock saw.
pub(crate) async fn reconcile_in_turn(
    lts: Vec<(LoadTest, Vec<Watched>)>,
    script: Vec<Expect>,
) -> (Vec<Result<(), String>>, Vec<Seen>) {
    reconcile_fenced(&lts, script, Fence::always()).await
}

/// [`reconcile_in_turn`] by a replica whose leadership is `fence`.
pub(crate) async fn reconcile_fenced(
    lts: &[(LoadTest, Vec<Watched>)],
    script: Vec<Expect>,
    fence: Fence,
) -> (Vec<Result<(), String>>, Vec<Seen>) {
    // Reconciles in a row, each taking the runners' figures (not paced as the operator does).
    let (outcomes, seen) = reconcile_paced(lts, script, fence, Duration::ZERO).await;
    (outcomes.into_iter().map(|o| o.map(|_| ())).collect(), seen)
}

/// [`reconcile_fenced`] with the status taking the runners' figures at most every `live_every`;
/// each reconcile's outcome with what it asked for next.
pub(crate) async fn reconcile_paced(
    lts: &[(LoadTest, Vec<Watched>)],
    script: Vec<Expect>,
    fence: Fence,
    live_every: Duration,
) -> (Vec<Result<kube::runtime::controller::Action, String>>, Vec<Seen>) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let verifier = ApiServerVerifier { handle, lt: lts[0].0.clone() }.serve(script);
    let mut ctx = Context::new(Client::new(service, NS), Arc::new(Metrics::default()));
    ctx.fence = fence;
    ctx.live_every = live_every;
    // Runner pods are listed at most once an hour here, so that a slow machine cannot let the
    // operator's 5 s pass between two reconciles of a test.
    ctx.pod_look_every = Duration::from_secs(3600);
    let mut outcomes = Vec::new();
    for (lt, watched) in lts {
        ctx.children = view(watched.clone());
        let result = tokio::time::timeout(TIMEOUT, reconcile_one(lt, &ctx)).await;
        let result = result.unwrap_or_else(|_| panic!("reconcile did not finish within {TIMEOUT:?}"));
        outcomes.push(result.map_err(|e| e.to_string()));
    }
    // Dropping the client closes the mock: the verifier sees the end of the requests.
    drop(ctx);
    match tokio::time::timeout(TIMEOUT, verifier).await {
        Err(_) => panic!("the mock API server did not finish within {TIMEOUT:?}"),
        Ok(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Ok(Err(e)) => panic!("the mock API server: {e}"),
        Ok(Ok(seen)) => (outcomes, seen),
    }
}

/// The status the operator applied (the last status apply of the script).
pub(crate) fn applied_status(seen: &[Seen]) -> LoadTestStatus {
    let last =
        seen.iter().rev().find(|s| s.method == Method::PATCH && s.path.ends_with("/status")).expect("a status apply");
    serde_json::from_value(last.body["status"].clone()).unwrap()
}

pub(crate) fn condition(st: &LoadTestStatus, type_: &str) -> (String, String, String) {
    let c = st.conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("no {type_} in {st:?}"));
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

// ---------------------------------------------------------------------------------------
// LoadTests in each phase, and runner reports.

pub(crate) fn loadtest(runners: i32, scenario: &str) -> LoadTest {
    let scenario: Value = serde_yaml::from_str(scenario).unwrap();
    let spec: LoadTestSpec = serde_json::from_value(json!({"runners": runners, "scenario": scenario})).unwrap();
    let mut lt = LoadTest::new(NAME, spec);
    lt.metadata.namespace = Some(NS.into());
    lt.metadata.uid = Some(UID.into());
    lt.metadata.generation = Some(1);
    lt
}

/// A LoadTest whose children were created `ago`: the status the operator wrote then.
fn initializing(runners: i32, ago: Duration) -> LoadTest {
    let mut lt = loadtest(runners, SCENARIO);
    let plan = validate(&lt, SCENARIO, "test");
    let obs = Observed {
        live: None,
        now: OffsetDateTime::now_utc() - ago,
        plan: plan.into(),
        reports: vec![],
        unreadable: vec![],
        job: None,
        baseline: None,
        once: Default::default(),
    };
    lt.status = Some(lifecycle::decide(&lt, &obs).status);
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Initializing);
    lt
}

/// A LoadTest whose runners started `ago`.
pub(crate) fn running(runners: i32, ago: Duration) -> LoadTest {
    let mut lt = initializing(runners, ago + Duration::from_secs(5));
    let st = lt.status.as_mut().unwrap();
    let at = (OffsetDateTime::now_utc() - ago).format(&Rfc3339).unwrap();
    st.phase = Phase::Running;
    st.start_at = Some(at.clone());
    st.start_time = Some(at);
    lt
}

/// A final report of `requests` requests at 1 ms each, all 200, over 10 s.
pub(crate) fn done(index: u32, requests: u64) -> RunnerReport {
    let lt = loadtest(1, SCENARIO);
    let plan = validate(&lt, SCENARIO, "test").unwrap();
    let mut m = WorkerMetrics::new(plan.step_keys.len(), 1);
    for _ in 0..requests {
        m.steps[0].requests += 1;
        m.steps[0].record_latency_us(1_000);
        m.steps[0].record_status(200);
    }
    m.iterations[0] = requests;
    RunnerReport {
        duration_seconds: 10.0,
        result: Some(portable::encode(&plan.step_keys, &m, &["buy".to_string()])),
        ..RunnerReport::new(index, RunnerState::Done)
    }
}

pub(crate) fn active(n: i32) -> JobStatus {
    JobStatus { active: Some(n), ..JobStatus::default() }
}

/// What a reconcile that finds every runner done asks for: the merged report written, the
/// status, the Succeeded Event, the runner Job's delete.
pub(crate) fn succeeds() -> [Expect; 4] {
    [
        Expect::Apply(api_path("configmaps", &format!("{NAME}-report"))),
        Expect::ApplyStatus,
        Expect::Event { reason: "Succeeded", warning: false },
        Expect::Delete(job_path()),
    ]
}

/// Both runners of a 2-runner run done (1,000 and 500 requests), their Job succeeded.
pub(crate) fn all_done() -> Vec<Watched> {
    vec![
        Watched::Results(vec![Some(done(0, 1000)), Some(done(1, 500))]),
        Watched::Job(JobStatus { succeeded: Some(2), ..JobStatus::default() }),
    ]
}

// ---------------------------------------------------------------------------------------
// Behaviours.

#[tokio::test]
async fn a_new_loadtest_gets_its_children_applied_then_an_event_and_initializing_status() {
    let lt = loadtest(3, SCENARIO);
    let children = [
        api_path("serviceaccounts", "shop-runner"),
        api_path("roles", "shop-runner"),
        api_path("rolebindings", "shop-runner"),
        api_path("configmaps", "shop-scenario"),
        api_path("configmaps", "shop-result-0"),
        api_path("configmaps", "shop-result-1"),
        api_path("configmaps", "shop-result-2"),
        job_path(),
    ];
    // Nothing of an earlier run or object to replace first.
    let mut script = vec![Expect::GetJob(None), Expect::ListResults(vec![])];
    script.extend(children.into_iter().map(Expect::Apply));
    script.push(Expect::ApplyStatus);
    script.push(Expect::Event { reason: "Initializing", warning: false });
    let seen = reconcile_against(&lt, script).await;

    let seen = &seen[2..];
    let kinds: Vec<&str> = seen[..8].iter().map(|s| s.body["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "ConfigMap", "ConfigMap", "ConfigMap", "Job"]
    );
    for child in &seen[..8] {
        let meta = &child.body["metadata"];
        assert_eq!(meta["namespace"], NS, "{}", child.path);
        assert_eq!(meta["labels"]["stampede.dev/loadtest"], NAME, "{}", child.path);
        assert_eq!(meta["labels"]["app.kubernetes.io/managed-by"], "stampede-operator", "{}", child.path);
        let owners = meta["ownerReferences"].as_array().unwrap();
        assert_eq!(owners.len(), 1, "{}", child.path);
        assert_eq!(
            (&owners[0]["kind"], &owners[0]["name"], &owners[0]["uid"], &owners[0]["controller"]),
            (&json!("LoadTest"), &json!(NAME), &json!(UID), &json!(true)),
            "{}",
            child.path
        );
    }

    // The runners may read their LoadTest and scenario, and write only their own results.
    let rules = seen[1].body["rules"].as_array().unwrap();
    assert_eq!(rules[2]["resourceNames"], json!(["shop-result-0", "shop-result-1", "shop-result-2"]));
    assert_eq!(rules[2]["verbs"], json!(["get", "patch"]));
    assert_eq!(seen[2].body["subjects"], json!([{"kind": "ServiceAccount", "name": "shop-runner", "namespace": NS}]));

    let scenario_cm = &seen[3].body;
    assert_eq!(scenario_cm["immutable"], true);
    let held: Value = serde_yaml::from_str(scenario_cm["data"][SCENARIO_KEY].as_str().unwrap()).unwrap();
    assert_eq!(Some(&held), lt.spec.scenario.as_ref(), "the scenario ConfigMap holds the scenario");
    for r in &seen[4..7] {
        assert!(r.body.get("data").is_none(), "result ConfigMaps start empty: {}", r.body);
    }

    let job = &seen[7].body["spec"];
    assert_eq!(
        (&job["completionMode"], &job["completions"], &job["parallelism"], &job["backoffLimit"]),
        (&json!("Indexed"), &json!(3), &json!(3), &json!(0))
    );
    let pod = &job["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "shop-runner");
    assert_eq!(pod["restartPolicy"], "Never");
    let env = pod["containers"][0]["env"].as_array().unwrap();
    assert!(env.contains(&json!({"name": "STAMPEDE_RUNNERS", "value": "3"})), "{env:?}");
    assert!(env.contains(&json!({"name": "STAMPEDE_LOADTEST", "value": NAME})), "{env:?}");
    assert!(env.contains(&json!({"name": "STAMPEDE_RUN", "value": format!("{UID}/1")})), "{env:?}");
    for child in [&seen[3], &seen[4], &seen[7]] {
        assert_eq!(child.body["metadata"]["labels"]["stampede.dev/run"], "1", "{}", child.path);
    }

    assert_eq!(seen[9].body["note"], "creating 3 runner(s)");

    let st = applied_status(seen);
    assert_eq!(st.phase, Phase::Initializing);
    assert_eq!((st.run, st.run_generation), (Some(1), Some(1)));
    assert_eq!(st.observed_generation, Some(1));
    assert_eq!(st.runners.desired, 3);
    assert_eq!(condition(&st, "Valid").0, "True");
    assert!(st.start_at.is_none());
}

#[tokio::test]
async fn all_runners_ready_schedules_a_common_start_three_seconds_ahead() {
    let lt = initializing(2, Duration::from_secs(10));
    let ready = || vec![Some(RunnerReport::new(0, RunnerState::Ready)), Some(RunnerReport::new(1, RunnerState::Ready))];
    let before = OffsetDateTime::now_utc();
    let seen = reconcile_watching(
        &lt,
        vec![Watched::Results(ready()), Watched::Job(active(2))],
        vec![Expect::GetScenario, Expect::ApplyStatus, Expect::Event { reason: "StartScheduled", warning: false }],
    )
    .await;
    let after = OffsetDateTime::now_utc();

    let st = applied_status(&seen);
    assert_eq!(st.phase, Phase::Initializing, "Running only once the start instant passed");
    assert_eq!(st.runners.ready, 2);
    let start_at = OffsetDateTime::parse(st.start_at.as_deref().expect("startAt"), &Rfc3339).unwrap();
    assert!(
        start_at >= before + START_DELAY - Duration::from_micros(1) && start_at <= after + START_DELAY,
        "startAt {start_at} is not {START_DELAY:?} after the reconcile ({before} .. {after})"
    );
    assert_eq!(START_DELAY, Duration::from_secs(3));
    let (status, reason, _) = condition(&st, "RunnersReady");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "AllReady"));
    let event = seen.iter().find(|s| s.path.ends_with("/events")).expect("the StartScheduled Event");
    let note = event.body["note"].as_str().unwrap();
    assert!(note.ends_with(st.start_at.as_deref().unwrap()), "the Event names the start instant: {note}");
}

#[tokio::test]
async fn some_runners_ready_keeps_waiting_without_a_start_instant() {
    let lt = initializing(2, Duration::from_secs(10));
    let seen = reconcile_watching(
        &lt,
        vec![Watched::Results(vec![Some(RunnerReport::new(0, RunnerState::Ready)), None]), Watched::Job(active(2))],
        vec![Expect::GetScenario, Expect::ListPods(vec![]), Expect::ApplyStatus],
    )
    .await;

    let st = applied_status(&seen);
    assert_eq!(st.phase, Phase::Initializing);
    assert!(st.start_at.is_none(), "{st:?}");
    assert_eq!(st.runners.ready, 1);
    let (status, reason, message) = condition(&st, "RunnersReady");
    assert_eq!((status.as_str(), reason.as_str(), message.as_str()), ("False", "Waiting", "1 of 2 ready"));
}

/// #36: each runner's `Ready` write makes a reconcile; the runner pods (a thousand of them, in
/// a big test) are listed once per `POD_LOOK_EVERY`, not at each of those reconciles.
#[tokio::test]
async fn runners_getting_ready_one_by_one_list_their_pods_once_not_per_reconcile() {
    let lt = initializing(3, Duration::from_secs(10));
    let ready = |n: u32| (0..3).map(|i| (i < n).then(|| RunnerReport::new(i, RunnerState::Ready))).collect();
    let turns = (1..=3).map(|n| (lt.clone(), vec![Watched::Results(ready(n)), Watched::Job(active(3))])).collect();
    let (outcomes, seen) = reconcile_in_turn(
        turns,
        vec![
            Expect::GetScenario,
            Expect::ListPods(vec![]),
            Expect::ApplyStatus,
            Expect::ApplyStatus,
            Expect::ApplyStatus,
            Expect::Event { reason: "StartScheduled", warning: false },
        ],
    )
    .await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let lists = seen.iter().filter(|s| s.path.ends_with("/pods")).count();
    assert_eq!(lists, 1, "{seen:?}");

    // Paced as the operator paces it (at most once an hour here, so that a slow machine cannot
    // let the pace pass): a change of the ready count alone, a moment after the last status
    // write, waits for the next one; the start instant is written at once.
    // Each reconcile sees the status the first one wrote (1 of 3 ready), as the watch would.
    let mut seen_lt = lt.clone();
    let obs = Observed {
        live: None,
        now: OffsetDateTime::now_utc(),
        plan: validate(&lt, SCENARIO, "test").into(),
        reports: ready(1),
        unreadable: vec![],
        job: Some(lifecycle::JobState { active: 3, ..Default::default() }),
        baseline: None,
        once: Default::default(),
    };
    seen_lt.status = Some(lifecycle::decide(&lt, &obs).status);
    let turns: Vec<_> = [(lt.clone(), 1), (seen_lt.clone(), 2), (seen_lt, 3)]
        .into_iter()
        .map(|(lt, n)| (lt, vec![Watched::Results(ready(n)), Watched::Job(active(3))]))
        .collect();
    let script = vec![
        Expect::GetScenario,
        Expect::ListPods(vec![]),
        Expect::ApplyStatus,
        Expect::ApplyStatus,
        Expect::Event { reason: "StartScheduled", warning: false },
    ];
    let (outcomes, seen) = reconcile_paced(&turns, script, Fence::always(), Duration::from_secs(3600)).await;
    let written: Vec<LoadTestStatus> = seen
        .iter()
        .filter(|s| s.path.ends_with("/status"))
        .map(|s| serde_json::from_value(s.body["status"].clone()).unwrap())
        .collect();
    let ready_counts: Vec<i32> = written.iter().map(|s| s.runners.ready).collect();
    assert_eq!(ready_counts, [1, 3], "the count of 2 was held back; the start was not");
    assert!(written[1].start_at.is_some());
    // Held back, it comes back when its own look would have (5 s), sooner than the hour.
    assert_eq!(outcomes[1], Ok(kube::runtime::controller::Action::requeue(Duration::from_secs(5))));
}

#[tokio::test]
async fn finished_runners_merge_into_a_succeeded_status_and_the_job_is_deleted() {
    let lt = running(2, Duration::from_secs(30));
    let seen = reconcile_watching(&lt, all_done(), [Expect::GetScenario].into_iter().chain(succeeds()).collect()).await;

    // The merged report, owned by the LoadTest (so the runners' cleanup leaves it).
    let cm = &seen.iter().find(|s| s.path.ends_with("-report")).unwrap().body;
    assert_eq!(cm["metadata"]["ownerReferences"][0]["kind"], "LoadTest");
    let report: stampede_model::report::Report =
        serde_json::from_str(cm["data"]["report.json"].as_str().unwrap()).unwrap();
    assert_eq!((report.total.requests, report.runners.len()), (1500, 2));

    let st = applied_status(&seen);
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    let summary = st.summary.as_ref().expect("summary");
    assert!(summary.is_final);
    assert_eq!(summary.requests, 1500, "the sum of the runners' requests");
    assert_eq!(summary.iterations, 1500);
    assert_eq!(summary.rps, 150.0);
    assert_eq!(summary.errors, "0.00%");
    assert_eq!(summary.steps.len(), 1);
    assert_eq!(summary.steps[0].requests, 1500);
    let verdicts: Vec<(&str, bool)> = st.thresholds.iter().map(|v| (v.threshold.as_str(), v.passed)).collect();
    assert_eq!(verdicts, [("latency.p99 < 100ms", true), ("errors.rate < 1%", true)]);
    assert_eq!(st.runners.succeeded, 2);
    assert!(st.completion_time.is_some());
    assert_eq!(condition(&st, "Completed").0, "True");
    assert_eq!(condition(&st, "ThresholdsPassed").0, "True");
}

/// A result ConfigMap that holds no readable report fails the test at once (it used to look
/// like "not reported yet", so the test ran on until its run timeout).
#[tokio::test]
async fn an_unreadable_runner_result_fails_the_test_at_once() {
    let lt = running(2, Duration::from_secs(30));
    let seen = reconcile_watching(
        &lt,
        vec![
            Watched::ResultTexts(vec![
                Some(
                    serde_json::to_string(&RunnerReport { run: Some(stampede_api::run_id(UID, 1)), ..done(0, 1000) })
                        .unwrap(),
                ),
                Some("{not json".into()),
            ]),
            Watched::Job(active(1)),
        ],
        vec![
            Expect::GetScenario,
            Expect::Apply(api_path("configmaps", &format!("{NAME}-report"))),
            Expect::ApplyStatus,
            Expect::Event { reason: "ResultsInvalid", warning: true },
        ],
    )
    .await;

    let st = applied_status(&seen);
    assert_eq!(st.phase, Phase::Failed, "{:?}", st.message);
    let message = st.message.as_deref().unwrap();
    assert!(
        message.starts_with("cannot read runner results: runner 1: its result is not a runner report ("),
        "{message}"
    );
    assert_eq!(condition(&st, "Completed").1, "ResultsInvalid");
    assert_eq!(st.summary.as_ref().unwrap().requests, 1000, "runner 0's result is kept");
}

#[tokio::test]
async fn an_invalid_scenario_fails_with_a_warning_and_creates_no_children() {
    let invalid = SCENARIO.replace("{{baseUrl}}/", "{{baseUrl}}/{{nope}}");
    let lt = loadtest(2, &invalid);
    // Nothing but the Event and the status: any apply would be an unexpected request.
    let seen =
        reconcile_against(&lt, vec![Expect::ApplyStatus, Expect::Event { reason: "InvalidSpec", warning: true }]).await;

    let note = seen[1].body["note"].as_str().unwrap();
    assert!(note.contains("nope"), "the Event says what is wrong: {note}");
    let st = applied_status(&seen);
    assert_eq!(st.phase, Phase::Failed);
    let (status, reason, message) = condition(&st, "Valid");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "InvalidSpec"));
    assert!(message.contains("nope"), "{message}");
    assert!(st.message.as_deref().unwrap().starts_with("invalid scenario"), "{:?}", st.message);
    assert!(st.completion_time.is_some());
}

#[tokio::test]
async fn abort_before_the_start_ends_aborted_and_deletes_the_runners() {
    let mut lt = initializing(2, Duration::from_secs(10));
    lt.spec.abort = true;
    let seen = reconcile_watching(
        &lt,
        vec![Watched::Results(vec![Some(RunnerReport::new(0, RunnerState::Ready)), None]), Watched::Job(active(2))],
        vec![
            Expect::GetScenario,
            Expect::ListPods(vec![]),
            Expect::ApplyStatus,
            Expect::Event { reason: "Aborted", warning: true },
            Expect::Delete(job_path()),
        ],
    )
    .await;

    let st = applied_status(&seen);
    assert_eq!(st.phase, Phase::Aborted);
    assert!(st.start_at.is_none());
    assert!(st.summary.is_none(), "no runner ran: no results");
    let (status, reason, _) = condition(&st, "Completed");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Aborted"));
    assert!(st.completion_time.is_some());
}

#[tokio::test]
async fn a_finished_test_keeps_its_status_after_cleanup_deleted_its_children() {
    // Succeeded with `cleanup.onSuccess: all`: the Job and the result ConfigMaps are gone.
    let mut lt = running(2, Duration::from_secs(30));
    lt.spec.cleanup.on_success = stampede_api::CleanupMode::All;
    let plan = validate(&lt, SCENARIO, "test");
    let job = lifecycle::JobState { succeeded: 2, ..lifecycle::JobState::default() };
    let obs = Observed {
        live: None,
        now: OffsetDateTime::now_utc(),
        plan: plan.into(),
        reports: vec![Some(done(0, 1000)), Some(done(1, 500))],
        unreadable: vec![],
        job: Some(job),
        baseline: None,
        once: Default::default(),
    };
    lt.status = Some(lifecycle::decide(&lt, &obs).status);
    let st = lt.status.as_ref().unwrap();
    assert_eq!((st.phase, st.runners.succeeded), (Phase::Succeeded, 2));

    // No request at all: a finished test is not observed again, and its final status (runner
    // counts included) stays as it was.
    let seen = reconcile_against(&lt, vec![]).await;
    assert_eq!(seen.len(), 0);
}

/// #22: a runner pod whose image does not exist is named in the status and an Event within one
/// reconcile, with the kubelet's reason, and the test fails at once instead of waiting for its
/// start timeout in `Initializing` ("starting 1 runner(s)", `0 of 1 ready`).
#[tokio::test]
async fn a_runner_image_that_does_not_exist_fails_the_test_at_once_naming_the_kubelets_reason() {
    let lt = initializing(1, Duration::from_secs(2));
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "shop-runners-0-x", "namespace": NS,
                     "annotations": {"batch.kubernetes.io/job-completion-index": "0"}},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "runner", "image": "example.invalid/nope:1",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ErrImagePull",
                "message": "failed to pull and unpack image \"example.invalid/nope:1\": not found"}}}]}});
    let seen = reconcile_watching(
        &lt,
        vec![Watched::Results(vec![None]), Watched::Job(active(1))],
        vec![
            Expect::GetScenario,
            Expect::ListPods(vec![pod]),
            Expect::ApplyStatus,
            Expect::Event { reason: "RunnersNotStarting", warning: true },
            Expect::Delete(job_path()),
        ],
    )
    .await;
    let st = applied_status(&seen);
    assert_eq!(st.phase, Phase::Failed);
    let message = st.message.as_deref().unwrap();
    assert!(message.contains("runner 0: ErrImagePull: failed to pull") && message.contains("not found"), "{message}");
    assert_eq!(condition(&st, "RunnersReady").1, "ErrImagePull");
    assert_eq!(condition(&st, "Passed").1, "ErrImagePull");
}

/// #34: a run's results and Job are read from the controller's watches, not listed and got on
/// every reconcile. Once a running test's scenario is compiled (first reconcile), a reconcile
/// that finds a runner's new interim figures asks the API server for nothing and writes only the
/// status; one that finds nothing new makes no request at all (the mock fails on any other).
#[tokio::test]
async fn a_running_tests_reconcile_reads_its_children_from_the_watches_not_the_api_server() {
    let lt = running(2, Duration::from_secs(5));
    let interim = |requests: u64| {
        // A runner's interim write: its live total so far.
        let step = done(0, requests).result.unwrap().steps[0].clone();
        let live = portable::PortableStep { scenario: String::new(), step: "total".into(), ..step };
        let r = RunnerReport {
            live: Some(live),
            duration_seconds: 1.0,
            active_vus: Some(3),
            ..RunnerReport::new(0, RunnerState::Running)
        };
        let other = RunnerReport { active_vus: Some(4), ..RunnerReport::new(1, RunnerState::Running) };
        vec![Watched::Results(vec![Some(r), Some(other)]), Watched::Job(active(2))]
    };
    let (outcomes, seen) =
        reconcile_in_turn(vec![(lt.clone(), interim(100))], vec![Expect::GetScenario, Expect::ApplyStatus]).await;
    assert_eq!(outcomes, [Ok(())]);
    let mut seen_lt = lt.clone();
    seen_lt.status = Some(applied_status(&seen));
    assert_eq!(
        seen_lt.status.as_ref().unwrap().summary.as_ref().map(|s| s.requests),
        Some(100),
        "{:?}",
        seen_lt.status
    );

    // One operator, three more reconciles: new figures (a status write only), the same figures
    // (nothing), then all done (the merged report, status, Event and the Job's delete).
    let (outcomes, seen) = reconcile_in_turn(
        vec![(lt.clone(), interim(100)), (lt.clone(), interim(250)), (seen_lt.clone(), all_done())],
        [Expect::GetScenario, Expect::ApplyStatus, Expect::ApplyStatus].into_iter().chain(succeeds()).collect(),
    )
    .await;
    assert_eq!(outcomes, [Ok(()), Ok(()), Ok(())]);
    let statuses: Vec<LoadTestStatus> = seen
        .iter()
        .filter(|s| s.path.ends_with("/status"))
        .map(|s| serde_json::from_value(s.body["status"].clone()).unwrap())
        .collect();
    let requests: Vec<u64> = statuses.iter().map(|s| s.summary.as_ref().unwrap().requests).collect();
    assert_eq!(requests, [100, 250, 1500], "each status holds what the watches held at its reconcile");
    let vus: Vec<Option<u32>> = statuses.iter().map(|s| s.summary.as_ref().unwrap().active_vus).collect();
    assert_eq!(vus, [Some(7), Some(7), None], "the running runners' VUs, summed while it runs");
    assert!(!seen.iter().any(|s| s.method == Method::GET && s.path != api_path("configmaps", "shop-scenario")));

    // Paced as the operator paces it (here at most once an hour, so that a slow machine cannot
    // let the pace pass between two reconciles): a reconcile that comes before the next merge is
    // due (a runner's write a moment after another's) writes nothing and comes back as it
    // would have (in 5 s while the run goes on, sooner than the hour).
    let paced = |script: Vec<Expect>| {
        let lts = [(seen_lt.clone(), interim(250)), (seen_lt.clone(), interim(400))];
        async move {
            let (outcomes, seen) = reconcile_paced(&lts, script, Fence::always(), Duration::from_secs(3600)).await;
            let written: Vec<u64> = seen
                .iter()
                .filter(|s| s.path.ends_with("/status"))
                .map(|s| s.body["status"]["summary"]["requests"].as_u64().unwrap())
                .collect();
            (outcomes, written)
        }
    };
    let (outcomes, written) = paced(vec![Expect::GetScenario, Expect::ApplyStatus]).await;
    assert_eq!(written, [250], "one status write");
    assert_eq!(outcomes[1], Ok(kube::runtime::controller::Action::requeue(Duration::from_secs(5))));

    // A merge whose status write was refused (the LoadTest changed meanwhile) is not the pace's:
    // the next reconcile merges again at once, on the newer copy.
    let (outcomes, written) = paced(vec![Expect::GetScenario, Expect::ApplyStatusConflict, Expect::ApplyStatus]).await;
    assert_eq!(written, [250, 400], "the refused write, then the next reconcile's");
    assert_eq!(outcomes[0], Ok(kube::runtime::controller::Action::requeue(Duration::from_millis(200))));
}
