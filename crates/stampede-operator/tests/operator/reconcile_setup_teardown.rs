//! One reconcile against the mock API server (see `reconcile_mock.rs`) of a test with a
//! `setup` or `teardown` run once: an abort just after the setup succeeded, and a rerun whose
//! spec dropped its setup.

use std::time::Duration;

use k8s_openapi::api::batch::v1::JobStatus;
use stampede_api::{LoadTestStatus, OnceState, OnceStatus, Phase};
use stampede_operator::lifecycle::{self, Observed};
use stampede_operator::validation::validate;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::common::SCENARIO;
use crate::reconcile_mock::{
    Expect, NAME, UID, Watched, api_path, applied_status, condition, job_path, loadtest, reconcile_against,
    reconcile_watching,
};

/// A scenario with a `setup` and a `teardown`, run once each.
const ONCE_SCENARIO: &str = r#"
name: shop
baseUrl: http://my-service.default.svc
load: {executor: constant-vus, vus: 2, duration: 10s}
setup:
  - {name: login, request: {method: POST, url: "{{baseUrl}}/login"}, extract: {token: {json: token}}}
teardown:
  - {name: reset, request: {method: POST, url: "{{baseUrl}}/reset"}}
scenarios:
  - name: buy
    steps:
      - {name: home, request: {url: "{{baseUrl}}/"}}
"#;

/// #32: the abort arrives in the look that sees the setup pod's success. The teardown Job is
/// created (the setup's resources are cleaned up), the setup recorded as succeeded and the run
/// as aborted; the runners never start, and the setup and runner Jobs go. It used to record the
/// setup as failed and create no teardown Job.
#[tokio::test]
async fn an_abort_just_after_the_setup_succeeded_creates_the_teardown_job() {
    let mut lt = loadtest(2, ONCE_SCENARIO);
    let plan = validate(&lt, ONCE_SCENARIO, "test");
    let obs = Observed {
        live: None,
        now: OffsetDateTime::now_utc() - Duration::from_secs(5),
        plan: plan.into(),
        reports: vec![],
        unreadable: vec![],
        job: None,
        baseline: None,
        once: Default::default(),
    };
    lt.status = Some(lifecycle::decide(&lt, &obs).status);
    assert_eq!(lt.status.as_ref().unwrap().setup.as_ref().map(|s| s.state), Some(OnceState::Running));
    lt.spec.abort = true;
    let succeeded = OnceStatus { state: OnceState::Succeeded, requests: 1, ..OnceStatus::default() };
    let seen = reconcile_watching(
        &lt,
        vec![
            Watched::SetupReport(succeeded),
            Watched::OnceJob("setup", JobStatus { succeeded: Some(1), ..JobStatus::default() }),
        ],
        vec![
            Expect::GetScenario,
            Expect::Apply(api_path("jobs", &format!("{NAME}-teardown"))),
            Expect::ApplyStatus,
            Expect::Event { reason: "SetupSucceeded", warning: false },
            Expect::Event { reason: "Aborted", warning: true },
            Expect::Delete(job_path()),
            Expect::Delete(api_path("jobs", &format!("{NAME}-setup"))),
        ],
    )
    .await;

    let teardown_job = &seen[1].body;
    let env = teardown_job["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap();
    assert!(env.iter().any(|e| e["name"] == stampede_api::env::ONCE && e["value"] == "teardown"), "{env:?}");
    let st = applied_status(&seen);
    assert_eq!(st.phase, Phase::Aborted);
    assert_eq!(st.setup.as_ref().map(|s| s.state), Some(OnceState::Succeeded));
    assert_eq!(st.teardown.as_ref().map(|t| t.state), Some(OnceState::Running));
    assert_eq!(condition(&st, "SetupSucceeded").0, "True");
}

/// #32: a rerun whose spec dropped `setup` deletes the values Secret of the run before (it used
/// to be left in the namespace, with whatever setup extracted, until the LoadTest was deleted),
/// then creates the new run's objects, with no Secret of its own.
#[tokio::test]
async fn a_rerun_without_a_setup_deletes_the_values_secret_of_the_run_before() {
    let mut lt = loadtest(1, SCENARIO);
    lt.metadata.generation = Some(2);
    lt.status = Some(LoadTestStatus {
        phase: Phase::Succeeded,
        run: Some(1),
        run_generation: Some(1),
        setup: Some(OnceStatus { state: OnceState::Succeeded, ..OnceStatus::default() }),
        completion_time: Some(OffsetDateTime::now_utc().format(&Rfc3339).unwrap()),
        ..LoadTestStatus::default()
    });
    let obs = Observed {
        live: None,
        now: OffsetDateTime::now_utc(),
        plan: lifecycle::Scenario::NotRead,
        reports: vec![],
        unreadable: vec![],
        job: None,
        baseline: None,
        once: Default::default(),
    };
    lt.status = Some(lifecycle::decide(&lt, &obs).status);
    assert_eq!(lt.status.as_ref().map(|s| (s.phase, s.run)), Some((Phase::Pending, Some(2))));

    let earlier = stampede_api::names::setup_secret(NAME, &stampede_api::run_id(UID, 1));
    let mut script =
        vec![Expect::GetJob(None), Expect::Delete(api_path("secrets", &earlier)), Expect::ListResults(vec![])];
    script.extend(
        [
            api_path("serviceaccounts", "shop-runner"),
            api_path("roles", "shop-runner"),
            api_path("rolebindings", "shop-runner"),
            api_path("configmaps", "shop-scenario"),
            api_path("configmaps", "shop-result-0"),
            job_path(),
        ]
        .into_iter()
        .map(Expect::Apply),
    );
    script.extend([Expect::ApplyStatus, Expect::Event { reason: "Initializing", warning: false }]);
    let seen = reconcile_against(&lt, script).await;
    assert!(!seen.iter().any(|s| s.body["kind"] == "Secret"), "no values Secret for a run without setup");
    let st = applied_status(&seen);
    assert_eq!((st.phase, st.run, st.setup), (Phase::Initializing, Some(2), None));
}
