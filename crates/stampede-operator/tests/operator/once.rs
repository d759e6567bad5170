//! `setup` and `teardown` once for the whole LoadTest (#23): the desired pods and the
//! lifecycle's decisions, pure.

use std::sync::Arc;
use std::time::Duration;

use stampede_api::{LoadTest, LoadTestSpec, OnceState, OnceStatus, Phase, RunnerReport, RunnerState, env, names};
use stampede_core::{Once, Plan};
use stampede_operator::desired::{OnceSteps, Replaced, desired, once_job, replaced};
use stampede_operator::lifecycle::{Action, JobState, Observed, OnceSeen, Scenario, decide, read_once};
use stampede_operator::validation::validate;
use time::OffsetDateTime;

const SCENARIO: &str = r#"
name: shop
baseUrl: http://my-service.default.svc
load: {executor: constant-vus, vus: 2, duration: 10s}
setup:
  - name: admin login
    request: {method: POST, url: "{{baseUrl}}/shop/login"}
    extract: {token: {json: token}}
teardown:
  - name: clean up
    request: {method: POST, url: "{{baseUrl}}/shop/reset", headers: {Authorization: "Bearer {{setup.token}}"}}
scenarios:
  - name: buy
    steps:
      - {name: home, request: {url: "{{baseUrl}}/", headers: {Authorization: "Bearer {{setup.token}}"}}}
"#;

const RUN: &str = "uid-1/1";

fn loadtest(runners: i32, cleanup_all: bool) -> LoadTest {
    let scenario: serde_json::Value = serde_yaml::from_str(SCENARIO).unwrap();
    let mut spec = serde_json::json!({"runners": runners, "scenario": scenario});
    if cleanup_all {
        spec["cleanup"] = serde_json::json!({"onSuccess": "all", "onFailure": "all"});
    }
    let spec: LoadTestSpec = serde_json::from_value(spec).unwrap();
    let mut lt = LoadTest::new("shop", spec);
    lt.metadata.namespace = Some("perf".into());
    lt.metadata.uid = Some("uid-1".into());
    lt.metadata.generation = Some(1);
    lt
}

fn plan(lt: &LoadTest) -> Arc<Plan> {
    validate(lt, &serde_yaml::to_string(&lt.spec.scenario).unwrap(), "test").expect("setup and teardown are valid")
}

fn observed(now: OffsetDateTime) -> Observed {
    Observed {
        live: None,
        now,
        plan: Scenario::Compiled(plan(&loadtest(1, false))),
        reports: vec![],
        unreadable: vec![],
        job: None,
        baseline: None,
        once: Default::default(),
    }
}

fn step(lt: &mut LoadTest, obs: &Observed) -> Vec<Action> {
    let d = decide(lt, obs);
    lt.status = Some(d.status);
    d.actions
}

fn report(state: OnceState, message: Option<&str>) -> Option<OnceStatus> {
    Some(OnceStatus {
        state,
        message: message.map(str::to_string),
        requests: 1,
        failures: u64::from(state == OnceState::Failed),
        values: if state == OnceState::Succeeded { vec!["token".into()] } else { vec![] },
        ..OnceStatus::default()
    })
}

fn events(actions: &[Action]) -> Vec<(bool, String, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Event { warning, reason, note } => Some((*warning, reason.clone(), note.clone())),
            _ => None,
        })
        .collect()
}

fn cond(lt: &LoadTest, type_: &str) -> Option<(String, String, String)> {
    let c = lt.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn done(index: u32) -> Option<RunnerReport> {
    let lt = loadtest(1, false);
    let plan = plan(&lt);
    let m = stampede_core::WorkerMetrics::new(plan.step_keys.len(), 1);
    Some(RunnerReport {
        result: Some(stampede_core::portable::encode(&plan.step_keys, &m, &["buy".to_string()])),
        run: Some(RUN.into()),
        ..RunnerReport::new(index, RunnerState::Done)
    })
}

#[test]
fn setup_runs_once_before_the_runners_and_teardown_once_after_them() {
    let mut lt = loadtest(3, true);
    let t0 = OffsetDateTime::now_utc();
    // Valid: the run's objects and the setup pod, not the runners.
    let actions = step(&mut lt, &observed(t0));
    assert_eq!(actions[0], Action::ApplyChildren);
    assert!(actions.contains(&Action::StartOnce(Once::Setup)), "{actions:?}");
    assert!(!actions.contains(&Action::StartRunners));
    let st = lt.status.clone().unwrap();
    assert_eq!(st.phase, Phase::Initializing);
    assert_eq!(st.setup.as_ref().map(|s| s.state), Some(OnceState::Running));
    assert_eq!(st.teardown.as_ref().map(|s| s.state), Some(OnceState::Pending));

    // While the setup pod runs, nothing else happens.
    let mut obs = observed(t0 + Duration::from_secs(1));
    obs.once.setup = OnceSeen { report: None, job: Some(JobState { active: 1, ..JobState::default() }) };
    let actions = step(&mut lt, &obs);
    assert!(actions.is_empty(), "{actions:?}");

    // It reported success: the runners are created, once.
    obs.once.setup.report = report(OnceState::Succeeded, None);
    let actions = step(&mut lt, &obs);
    assert_eq!(actions.iter().filter(|a| **a == Action::StartRunners).count(), 1, "{actions:?}");
    let st = lt.status.clone().unwrap();
    let setup = st.setup.clone().unwrap();
    assert_eq!((setup.state, setup.values.clone()), (OnceState::Succeeded, vec!["token".to_string()]));
    assert_eq!(cond(&lt, "SetupSucceeded").unwrap().0, "True");
    assert!(events(&actions).iter().any(|(w, r, n)| !w && r == "SetupSucceeded" && n.contains("values: token")));
    // The next look does not start them again.
    let actions = step(&mut lt, &obs);
    assert!(!actions.contains(&Action::StartRunners), "{actions:?}");

    // The runners finish: the verdict, and the teardown pod; everything else is deleted only
    // once it is over (`cleanup: all`), the runners at once.
    let start = (t0 - Duration::from_secs(60)).format(&time::format_description::well_known::Rfc3339).unwrap();
    lt.status.as_mut().unwrap().start_at = Some(start);
    let mut obs = observed(t0 + Duration::from_secs(90));
    obs.reports = vec![done(0), done(1), done(2)];
    let actions = step(&mut lt, &obs);
    let st = lt.status.clone().unwrap();
    assert!(st.phase.is_finished(), "{:?}", st.message);
    assert!(actions.contains(&Action::StartOnce(Once::Teardown)), "{actions:?}");
    assert!(actions.contains(&Action::DeleteRunners) && !actions.contains(&Action::DeleteAll), "{actions:?}");
    assert_eq!(st.teardown.as_ref().map(|t| t.state), Some(OnceState::Running));

    // Finished, teardown running: waited for (no cleanup, no rerun, no TTL yet).
    let mut obs = observed(t0 + Duration::from_secs(91));
    obs.plan = Scenario::NotRead;
    let d = decide(&lt, &obs);
    assert!(d.actions.is_empty() && d.requeue.is_some(), "{:?}", d.actions);
    // Its report: the status says so, an Event, then the cleanup that waited.
    obs.once.teardown.report = report(OnceState::Succeeded, None);
    let actions = step(&mut lt, &obs);
    assert_eq!(lt.status.as_ref().unwrap().teardown.as_ref().map(|t| t.state), Some(OnceState::Succeeded));
    assert!(actions.contains(&Action::DeleteAll), "{actions:?}");
    assert!(events(&actions).iter().any(|(w, r, _)| !w && r == "TeardownSucceeded"));
    assert_eq!(cond(&lt, "TeardownSucceeded").unwrap().0, "True");
    // And never again.
    let actions = step(&mut lt, &obs);
    assert!(actions.is_empty(), "{actions:?}");
}

#[test]
fn a_failing_setup_fails_the_test_before_any_load_and_skips_the_teardown() {
    for (seen, expect) in [
        (
            OnceSeen { report: report(OnceState::Failed, Some("admin login: status 503")), job: None },
            "setup failed: 1 request(s), 1 failed; admin login: status 503: no load was sent",
        ),
        (
            OnceSeen {
                report: None,
                job: Some(JobState {
                    failed: 1,
                    failures: vec!["runner 0: OOMKilled (exit 137)".into()],
                    ..JobState::default()
                }),
            },
            "its pod failed without a report: setup: OOMKilled (exit 137)",
        ),
    ] {
        let mut lt = loadtest(2, false);
        let t0 = OffsetDateTime::now_utc();
        step(&mut lt, &observed(t0));
        let mut obs = observed(t0 + Duration::from_secs(1));
        obs.once.setup = seen;
        let actions = step(&mut lt, &obs);
        let st = lt.status.clone().unwrap();
        assert_eq!(st.phase, Phase::Failed);
        assert!(st.message.as_deref().unwrap().contains(expect), "{:?}", st.message);
        assert!(!actions.contains(&Action::StartRunners) && !actions.contains(&Action::StartOnce(Once::Teardown)));
        assert_eq!(cond(&lt, "SetupSucceeded").map(|c| (c.0, c.1)), Some(("False".into(), "SetupFailed".into())));
        assert_eq!(cond(&lt, "Passed").map(|c| c.1), Some("SetupFailed".into()));
        assert!(events(&actions).iter().any(|(w, r, n)| *w && r == "SetupFailed" && n.contains(expect)));
        let teardown = st.teardown.unwrap();
        assert_eq!(teardown.state, OnceState::Skipped);
        assert_eq!(teardown.message.as_deref(), Some("not run: the setup failed"));
    }
}

#[test]
fn an_abort_during_the_setup_stops_it_and_a_failed_runner_still_tears_down() {
    let mut lt = loadtest(2, false);
    let t0 = OffsetDateTime::now_utc();
    step(&mut lt, &observed(t0));
    lt.spec.abort = true;
    let actions = step(&mut lt, &observed(t0 + Duration::from_secs(1)));
    let st = lt.status.clone().unwrap();
    assert_eq!(st.phase, Phase::Aborted);
    assert!(actions.contains(&Action::DeleteRunners), "the setup pod is deleted with the runners: {actions:?}");
    assert_eq!(st.setup.unwrap().state, OnceState::Failed);
    assert_eq!(st.teardown.unwrap().state, OnceState::Skipped);

    // After the setup, a runner fails: the test fails, and the teardown still runs, once.
    let mut lt = loadtest(2, false);
    step(&mut lt, &observed(t0));
    let mut obs = observed(t0 + Duration::from_secs(1));
    obs.once.setup.report = report(OnceState::Succeeded, None);
    step(&mut lt, &obs);
    let mut obs = observed(t0 + Duration::from_secs(2));
    obs.job = Some(JobState { failed: 2, failures: vec!["runner 0: Error (exit 3)".into()], ..JobState::default() });
    let actions = step(&mut lt, &obs);
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Failed);
    assert_eq!(actions.iter().filter(|a| **a == Action::StartOnce(Once::Teardown)).count(), 1, "{actions:?}");
    // A teardown pod that fails without a report: said, and the test is done with it.
    let mut obs = observed(t0 + Duration::from_secs(3));
    obs.once.teardown.job = Some(JobState { failed: 1, ..JobState::default() });
    let actions = step(&mut lt, &obs);
    let teardown = lt.status.as_ref().unwrap().teardown.clone().unwrap();
    assert_eq!(teardown.state, OnceState::Failed);
    assert!(events(&actions).iter().any(|(w, r, _)| *w && r == "TeardownFailed"), "{actions:?}");
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Failed, "the verdict stands");
}

#[test]
fn the_setup_and_teardown_pods_run_once_with_the_runners_environment_and_values_come_from_a_secret() {
    let lt = loadtest(3, false);
    let once = OnceSteps { setup: true, teardown: true };
    let d = desired(&lt, 1, SCENARIO, stampede_api::DEFAULT_IMAGE, once);
    let secret = names::setup_secret("shop", "uid-1/1");
    assert_eq!(d.setup_secret.as_ref().and_then(|s| s.metadata.name.clone()), Some(secret.clone()));
    assert_eq!(d.once_reports.as_ref().and_then(|c| c.metadata.name.clone()), Some(names::once_config_map("shop")));
    let env_of = |job: &k8s_openapi::api::batch::v1::Job| {
        job.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0].env.clone().unwrap()
    };
    // Runners read the values from the Secret, never from a literal.
    let values = env_of(&d.job).into_iter().find(|e| e.name == env::SETUP_VALUES).unwrap();
    let from = values.value_from.unwrap().secret_key_ref.unwrap();
    assert_eq!((from.name.as_str(), from.key.as_str(), values.value), (secret.as_str(), "values.json", None));
    assert_ne!(from.optional, Some(true), "a runner that lacks them must not start (it would run setup itself)");
    // The setup pod: one, never retried, with the runners' environment and account.
    for (which, name) in [(Once::Setup, "shop-setup"), (Once::Teardown, "shop-teardown")] {
        let job = once_job(&lt, 1, which, stampede_api::DEFAULT_IMAGE, once);
        let spec = job.spec.as_ref().unwrap();
        assert_eq!(job.metadata.name.as_deref(), Some(name));
        assert_eq!((spec.completions, spec.parallelism, spec.backoff_limit), (Some(1), Some(1), Some(0)));
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.service_account_name.as_deref(), Some("shop-runner"));
        let env = env_of(&job);
        let get = |n: &str| env.iter().find(|e| e.name == n).cloned();
        assert_eq!(get(env::ONCE).and_then(|e| e.value).as_deref(), Some(name.trim_start_matches("shop-")));
        assert_eq!(get(env::RUNNERS).and_then(|e| e.value).as_deref(), Some("3"));
        // Teardown gets setup's values; setup gets none.
        assert_eq!(get(env::SETUP_VALUES).is_some(), which == Once::Teardown);
    }
    // The runners' account may write exactly the once reports and the values, nothing more.
    let rules = d.role.rules.unwrap();
    let secret_rule = rules.iter().find(|r| r.resources.as_deref() == Some(&["secrets".to_string()])).unwrap();
    assert_eq!(
        (secret_rule.resource_names.clone().unwrap(), secret_rule.verbs.clone()),
        (vec![secret], vec!["patch".to_string()])
    );
    // Without setup or teardown: none of it.
    let d = desired(&lt, 1, SCENARIO, stampede_api::DEFAULT_IMAGE, OnceSteps::default());
    assert!(d.setup_secret.is_none() && d.once_reports.is_none());
    assert!(env_of(&d.job).iter().all(|e| e.name != env::SETUP_VALUES));
    // Teardown only: runners still skip it, with no values.
    let d = desired(&lt, 1, SCENARIO, stampede_api::DEFAULT_IMAGE, OnceSteps { setup: false, teardown: true });
    let values = env_of(&d.job).into_iter().find(|e| e.name == env::SETUP_VALUES).unwrap();
    assert_eq!(values.value.as_deref(), Some("{}"));
}

#[test]
fn a_once_report_of_another_run_is_not_this_runs() {
    let text = serde_json::to_string(&OnceStatus { run: Some("uid-1/1".into()), ..OnceStatus::default() }).unwrap();
    assert!(read_once(&text, "uid-1/1").is_some_and(|r| r.run.is_none()));
    assert!(read_once(&text, "uid-1/2").is_none());
    assert!(read_once("not json", "uid-1/1").is_none());
}

/// #32: an abort seen in the same look as the setup's success (its report, or its pod's Job
/// that succeeded before the report was read) records the setup as succeeded and runs the
/// teardown: what the setup created is cleaned up. It used to mark the setup failed ("stopped by
/// spec.abort") and skip the teardown, leaving the setup's resources behind.
#[test]
fn an_abort_just_after_the_setup_succeeded_still_runs_the_teardown() {
    let succeeded_job = JobState { succeeded: 1, ..JobState::default() };
    for seen in [
        OnceSeen { report: report(OnceState::Succeeded, None), job: Some(succeeded_job.clone()) },
        OnceSeen { report: None, job: Some(succeeded_job) },
    ] {
        let mut lt = loadtest(2, false);
        let t0 = OffsetDateTime::now_utc();
        step(&mut lt, &observed(t0));
        assert_eq!(lt.status.as_ref().unwrap().setup.as_ref().map(|s| s.state), Some(OnceState::Running));
        lt.spec.abort = true;
        let mut obs = observed(t0 + Duration::from_secs(1));
        obs.once.setup = seen.clone();
        let actions = step(&mut lt, &obs);
        let st = lt.status.clone().unwrap();
        assert_eq!(st.phase, Phase::Aborted, "{seen:?}");
        assert_eq!(st.setup.as_ref().map(|s| s.state), Some(OnceState::Succeeded), "{seen:?}");
        assert_eq!(cond(&lt, "SetupSucceeded").map(|c| c.0), Some("True".into()), "{seen:?}");
        assert_eq!(st.teardown.as_ref().map(|t| t.state), Some(OnceState::Running), "{seen:?}");
        assert_eq!(actions.iter().filter(|a| **a == Action::StartOnce(Once::Teardown)).count(), 1, "{actions:?}");
        assert!(!actions.contains(&Action::StartRunners), "no load after an abort: {actions:?}");
        assert!(actions.contains(&Action::DeleteRunners), "{actions:?}");
        assert_eq!(cond(&lt, "Passed").map(|c| c.1), Some("Aborted".into()));
    }
}

/// #32: an abort while the setup pod runs stops it (its Job is deleted with the runners) and,
/// as k6 does, runs no teardown: a setup that did not finish is not taken for one that
/// succeeded. An abort after it failed keeps its failure, and no teardown either.
#[test]
fn an_abort_during_or_after_a_failed_setup_runs_no_teardown() {
    for (seen, message) in [
        (
            OnceSeen { report: None, job: Some(JobState { active: 1, ..JobState::default() }) },
            "stopped by spec.abort before it finished",
        ),
        (
            OnceSeen { report: report(OnceState::Failed, Some("admin login: status 503")), job: None },
            "admin login: status 503",
        ),
    ] {
        let mut lt = loadtest(2, false);
        let t0 = OffsetDateTime::now_utc();
        step(&mut lt, &observed(t0));
        lt.spec.abort = true;
        let mut obs = observed(t0 + Duration::from_secs(1));
        obs.once.setup = seen;
        let actions = step(&mut lt, &obs);
        let st = lt.status.clone().unwrap();
        assert_eq!(st.phase, Phase::Aborted);
        let setup = st.setup.unwrap();
        assert_eq!((setup.state, setup.message.as_deref()), (OnceState::Failed, Some(message)));
        assert!(actions.contains(&Action::DeleteRunners), "the setup pod goes with the runners: {actions:?}");
        assert!(!actions.contains(&Action::StartOnce(Once::Teardown)), "{actions:?}");
        let teardown = st.teardown.unwrap();
        assert_eq!(teardown.state, OnceState::Skipped);
        assert_eq!(teardown.message.as_deref(), Some("not run: the setup failed"));
    }
}

/// #32: a run replaces the setup values Secret of the run before it, whether or not it has a
/// setup itself: a rerun whose spec dropped `setup` used to leave the earlier run's values (a
/// token, say) in the namespace until the LoadTest was deleted. A first run has none to replace.
#[test]
fn a_rerun_removes_the_values_secret_of_the_run_it_replaces_with_or_without_a_setup() {
    let lt = loadtest(2, false);
    let earlier = Some(names::setup_secret("shop", "uid-1/1"));
    let runners = vec![names::job("shop")];
    let with_once = vec![names::job("shop"), names::once_job("shop", "setup"), names::once_job("shop", "teardown")];
    let both = OnceSteps { setup: true, teardown: true };
    assert_eq!(
        replaced(&lt, 2, OnceSteps::default()),
        Replaced { jobs: runners.clone(), setup_secret: earlier.clone() }
    );
    assert_eq!(replaced(&lt, 2, both), Replaced { jobs: with_once.clone(), setup_secret: earlier });
    let teardown_only = OnceSteps { setup: false, teardown: true };
    assert_eq!(replaced(&lt, 3, teardown_only).setup_secret, Some(names::setup_secret("shop", "uid-1/2")));
    assert_eq!(replaced(&lt, 1, both), Replaced { jobs: with_once, setup_secret: None });
    // The rerun with a setup makes its own Secret, under its own run's name.
    let d = desired(&lt, 2, SCENARIO, stampede_api::DEFAULT_IMAGE, both);
    assert_eq!(d.setup_secret.and_then(|s| s.metadata.name), Some(names::setup_secret("shop", "uid-1/2")));
}
