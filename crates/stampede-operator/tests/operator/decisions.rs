//! The operator's pure core: desired objects (golden files), the lifecycle table, merging.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use stampede_api::{LoadTest, LoadTestSpec, Phase, RunnerReport, RunnerState};
use stampede_core::Plan;
use stampede_core::WorkerMetrics;
use stampede_core::portable::{self, PortableStep};
use stampede_model::ErrorKind;
use stampede_operator::desired::desired;
use stampede_operator::lifecycle::{
    Action, FAILURE_GRACE, JobState, Observed, START_DELAY, Scenario, decide, read_report,
};
use stampede_operator::validation::validate;
use time::OffsetDateTime;

use crate::common::SCENARIO;

pub(crate) fn loadtest(runners: i32) -> LoadTest {
    let scenario: serde_json::Value = serde_yaml::from_str(SCENARIO).unwrap();
    let spec: LoadTestSpec =
        serde_json::from_value(serde_json::json!({"runners": runners, "scenario": scenario})).unwrap();
    let mut lt = LoadTest::new("shop", spec);
    lt.metadata.namespace = Some("perf".into());
    lt.metadata.uid = Some("0b0b0b0b-1111-2222-3333-444444444444".into());
    lt.metadata.generation = Some(1);
    lt
}

pub(crate) fn plan(lt: &LoadTest) -> Arc<Plan> {
    validate(lt, &serde_yaml::to_string(&lt.spec.scenario).unwrap(), "test").unwrap()
}

/// Sets the start instant a second before `now`.
pub(crate) fn started(lt: &mut LoadTest, now: OffsetDateTime) {
    let at = (now - Duration::from_secs(1)).format(&time::format_description::well_known::Rfc3339).unwrap();
    lt.status.as_mut().unwrap().start_at = Some(at);
}

fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(expected == actual, "{name} differs from the golden file (UPDATE_GOLDEN=1 to accept):\n{actual}");
}

#[test]
fn desired_objects_match_the_golden_files() {
    let mut lt = loadtest(3);
    lt.spec.separate = true;
    lt.spec.image = Some("registry.example/stampede:1.2.3".into());
    lt.spec.pod_labels.insert("team".into(), "checkout".into());
    let d = desired(&lt, 1, SCENARIO, stampede_api::DEFAULT_IMAGE, Default::default());
    golden("job.yaml", &serde_yaml::to_string(&d.job).unwrap());
    golden("role.yaml", &serde_yaml::to_string(&d.role).unwrap());
    assert_eq!(d.results.len(), 3);
    assert_eq!(d.scenario.immutable, Some(true));
    for obj in [&d.scenario.metadata, &d.account.metadata, &d.binding.metadata, &d.job.metadata] {
        let owner = &obj.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.controller), ("LoadTest", "shop", Some(true)));
    }
}

pub(crate) fn report(index: u32, state: RunnerState, requests: u64, slow_us: u64) -> RunnerReport {
    let lt = loadtest(1);
    let plan = plan(&lt);
    let mut m = WorkerMetrics::new(1, 1);
    for i in 0..requests {
        m.steps[0].requests += 1;
        m.steps[0].record_latency_us(if i % 100 == 99 { slow_us } else { 1_000 });
        m.steps[0].record_status(200);
    }
    m.iterations[0] = requests;
    let names = vec!["buy".to_string()];
    RunnerReport {
        duration_seconds: 10.0,
        result: (state == RunnerState::Done).then(|| portable::encode(&plan.step_keys, &m, &names)),
        run: Some(RUN.into()),
        ..RunnerReport::new(index, state)
    }
}

/// The run every test report belongs to.
const RUN: &str = "uid-1/1";

/// What the shell observes: with the runners' interim figures merged as its `LiveMerge` does.
pub(crate) fn observed(now: OffsetDateTime, reports: Vec<Option<RunnerReport>>, job: Option<JobState>) -> Observed {
    let plan = plan(&loadtest(1));
    Observed {
        live: stampede_operator::results::live_figures(&plan, &reports).ok(),
        now,
        plan: Scenario::Compiled(plan),
        reports,
        unreadable: vec![],
        job,
        baseline: None,
        once: Default::default(),
    }
}

/// Applies a decision's status to the LoadTest, as the shell does.
pub(crate) fn step(lt: &mut LoadTest, obs: &Observed) -> Vec<Action> {
    let d = decide(lt, obs);
    lt.status = Some(d.status);
    d.actions
}

#[test]
fn the_lifecycle_runs_pending_initializing_running_succeeded() {
    let mut lt = loadtest(2);
    let t0 = OffsetDateTime::now_utc();
    let actions = step(&mut lt, &observed(t0, vec![], None));
    assert!(actions.contains(&Action::ApplyChildren));
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Initializing);

    // One runner ready: keep waiting, no start instant.
    let ready = |i| Some(report(i, RunnerState::Ready, 0, 0));
    step(&mut lt, &observed(t0 + Duration::from_secs(1), vec![ready(0), None], None));
    let st = lt.status.as_ref().unwrap();
    assert_eq!((st.phase, st.start_at.is_none(), st.runners.ready), (Phase::Initializing, true, 1));

    // Both ready: a common start instant a moment ahead.
    let t2 = t0 + Duration::from_secs(2);
    let actions = step(&mut lt, &observed(t2, vec![ready(0), ready(1)], None));
    let st = lt.status.clone().unwrap();
    let start_at =
        OffsetDateTime::parse(st.start_at.as_deref().unwrap(), &time::format_description::well_known::Rfc3339).unwrap();
    assert!((start_at - (t2 + START_DELAY)).abs() < Duration::from_micros(1), "{start_at} vs {t2}");
    assert!(actions.iter().any(|a| matches!(a, Action::Event { reason, .. } if reason == "StartScheduled")));

    // Past the start: Running.
    let t3 = start_at + Duration::from_millis(10);
    step(&mut lt, &observed(t3, vec![Some(report(0, RunnerState::Running, 0, 0)), ready(1)], None));
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Running);

    // Both done: merged results, thresholds pass (1% of samples at 50 ms: p99 = 1 ms).
    let t4 = t3 + Duration::from_secs(30);
    let done = vec![Some(report(0, RunnerState::Done, 1000, 50_000)), Some(report(1, RunnerState::Done, 500, 50_000))];
    let actions = step(&mut lt, &observed(t4, done, Some(JobState { succeeded: 2, ..JobState::default() })));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    let summary = st.summary.as_ref().unwrap();
    assert!(summary.is_final);
    assert_eq!(summary.requests, 1500);
    assert_eq!(summary.iterations, 1500);
    assert_eq!(summary.rps, 150.0);
    assert_eq!(st.thresholds.len(), 2);
    assert!(st.thresholds.iter().all(|v| v.passed));
    assert!(actions.contains(&Action::DeleteRunners), "default cleanup on success deletes the runners");
    let cond = |t: &str| st.conditions.iter().find(|c| c.type_ == t).map(|c| c.status.clone());
    assert_eq!(cond("Completed").as_deref(), Some("True"));
    assert_eq!(cond("ThresholdsPassed").as_deref(), Some("True"));
}

#[test]
fn open_model_drops_of_every_runner_add_up_in_the_status() {
    let mut lt = loadtest(2);
    let now = OffsetDateTime::now_utc();
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    let keys = plan(&lt).step_keys.clone();
    let with_drops = |index: u32, dropped: u64| {
        let mut r = report(index, RunnerState::Done, 100, 2_000);
        let mut m = WorkerMetrics::new(1, 1);
        m.steps[0].requests = 100;
        m.steps[0].record_latency_us(1_000);
        m.iterations[0] = 100;
        for _ in 0..dropped {
            m.record_dropped(0, stampede_core::DropReason::QueueFull);
        }
        let encoded = portable::encode(&keys, &m, &["buy".to_string()]);
        // As the runner writes it and the operator reads it back.
        let json = serde_json::to_string(&encoded).unwrap();
        assert_eq!(json.contains("droppedIterations"), dropped > 0, "{json}");
        r.result = Some(serde_json::from_str(&json).unwrap());
        r
    };
    let job = Some(JobState { succeeded: 2, ..JobState::default() });
    step(&mut lt, &observed(now, vec![Some(with_drops(0, 7)), Some(with_drops(1, 5))], job.clone()));
    let summary = lt.status.as_ref().unwrap().summary.clone().unwrap();
    assert_eq!((summary.iterations, summary.dropped_iterations), (200, 12));
    assert!(serde_json::to_string(&summary).unwrap().contains(r#""droppedIterations":12"#));

    // A closed model drops nothing, and the field stays out of the status.
    let mut lt = loadtest(1);
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    step(&mut lt, &observed(now, vec![Some(with_drops(0, 0))], job));
    let summary = lt.status.as_ref().unwrap().summary.clone().unwrap();
    assert_eq!(summary.dropped_iterations, 0);
    assert!(!serde_json::to_string(&summary).unwrap().contains("droppedIterations"));
}

#[test]
fn a_saturated_runner_is_a_condition_and_a_warning_but_keeps_the_verdict() {
    let mut lt = loadtest(2);
    let now = OffsetDateTime::now_utc();
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    let why =
        "the generator saturated (schedule lag p99 31.0 ms > 10 ms: iterations started late); its figures are suspect";
    let hot = RunnerReport { saturated: Some(why.into()), ..report(1, RunnerState::Done, 500, 2_000) };
    let job = Some(JobState { succeeded: 2, ..JobState::default() });
    let actions =
        step(&mut lt, &observed(now, vec![Some(report(0, RunnerState::Done, 500, 2_000)), Some(hot)], job.clone()));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Succeeded, "thresholds decide the phase, not saturation");
    let cond = st.conditions.iter().find(|c| c.type_ == "GeneratorSaturated").unwrap();
    assert_eq!((cond.status.as_str(), cond.reason.as_str()), ("True", "Saturated"));
    assert_eq!(cond.message, format!("runner 1: {why}"));
    assert!(actions.iter().any(
        |a| matches!(a, Action::Event { warning: true, reason, note } if reason == "GeneratorSaturated" && note.contains("runner 1"))
    ));

    // Runners that kept up: the condition is False and there is no warning.
    let mut lt = loadtest(1);
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    let actions = step(&mut lt, &observed(now, vec![Some(report(0, RunnerState::Done, 500, 2_000))], job));
    let st = lt.status.as_ref().unwrap();
    let cond = st.conditions.iter().find(|c| c.type_ == "GeneratorSaturated").unwrap();
    assert_eq!((cond.status.as_str(), cond.reason.as_str()), ("False", "KeptUp"));
    assert!(!actions.iter().any(|a| matches!(a, Action::Event { reason, .. } if reason == "GeneratorSaturated")));
}

#[test]
fn failed_thresholds_fail_the_test_with_their_reason() {
    let mut lt = loadtest(1);
    let now = OffsetDateTime::now_utc();
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    // 5% of samples at 500 ms: p99 = 500 ms > 100 ms.
    let mut r = report(0, RunnerState::Done, 100, 500_000);
    if let Some(res) = r.result.as_mut() {
        let mut m = WorkerMetrics::new(1, 1);
        for i in 0..100 {
            m.steps[0].requests += 1;
            m.steps[0].record_latency_us(if i % 20 == 0 { 500_000 } else { 1_000 });
        }
        m.steps[0].record_error(ErrorKind::Timeout);
        m.steps[0].record_error(ErrorKind::Timeout);
        m.steps[0].requests += 2;
        *res = portable::encode(&plan(&lt).step_keys, &m, &["buy".to_string()]);
    }
    let actions = step(&mut lt, &observed(now, vec![Some(r)], None));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Failed);
    assert!(st.message.as_deref().unwrap().contains("latency.p99 < 100ms"), "{:?}", st.message);
    assert!(!st.thresholds[0].passed && !st.thresholds[1].passed);
    let cond = st.conditions.iter().find(|c| c.type_ == "ThresholdsPassed").unwrap();
    assert_eq!((cond.status.as_str(), cond.reason.as_str()), ("False", "ThresholdsFailed"));
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Event { warning: true, reason, .. } if reason == "ThresholdsFailed"))
    );
    assert!(!actions.contains(&Action::DeleteRunners), "failures keep their evidence by default");
}

#[test]
fn an_invalid_scenario_fails_with_valid_false_an_event_and_no_children() {
    let mut lt = loadtest(1);
    let obs = Observed {
        live: None,
        now: OffsetDateTime::now_utc(),
        plan: Scenario::Invalid("scenario `buy`, step `home`: request.url: unknown variable `nope`".into()),
        reports: vec![],
        unreadable: vec![],
        job: None,
        baseline: None,
        once: Default::default(),
    };
    let actions = step(&mut lt, &obs);
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Failed);
    let valid = st.conditions.iter().find(|c| c.type_ == "Valid").unwrap();
    assert_eq!((valid.status.as_str(), valid.reason.as_str()), ("False", "InvalidSpec"));
    assert!(valid.message.contains("unknown variable `nope`"));
    assert!(!actions.contains(&Action::ApplyChildren));
    assert!(
        actions.iter().any(|a| matches!(a, Action::Event { warning: true, reason, .. } if reason == "InvalidSpec"))
    );
}

#[test]
fn a_failed_runner_fails_the_test_and_keeps_the_others_results() {
    let mut lt = loadtest(3);
    let now = OffsetDateTime::now_utc();
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    let reports = vec![
        Some(report(0, RunnerState::Done, 300, 2_000)),
        Some(report(1, RunnerState::Done, 200, 2_000)),
        Some(report(2, RunnerState::Running, 0, 0)),
    ];
    let job = JobState {
        succeeded: 2,
        failed: 1,
        failures: vec!["runner 2: OOMKilled (exit 137)".into()],
        ..JobState::default()
    };
    step(&mut lt, &observed(now, reports, Some(job)));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Failed);
    assert!(st.message.as_deref().unwrap().contains("runner 2: OOMKilled (exit 137)"), "{:?}", st.message);
    assert_eq!(st.summary.as_ref().unwrap().requests, 500, "the finished runners' results are kept");
    assert_eq!(st.conditions.iter().find(|c| c.type_ == "Completed").unwrap().reason, "RunnerFailed");
}

#[test]
fn abort_before_the_start_ends_at_once_and_after_it_waits_for_partial_results() {
    let mut lt = loadtest(2);
    let now = OffsetDateTime::now_utc();
    step(&mut lt, &observed(now, vec![], None));
    let mut early = lt.clone();
    early.spec.abort = true;
    let actions = step(&mut early, &observed(now, vec![None, None], None));
    assert_eq!(early.status.as_ref().unwrap().phase, Phase::Aborted);
    assert!(actions.contains(&Action::DeleteRunners));

    started(&mut lt, now);
    lt.spec.abort = true;
    let running = vec![Some(report(0, RunnerState::Done, 50, 1_000)), Some(report(1, RunnerState::Running, 0, 0))];
    step(&mut lt, &observed(now, running, None));
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Running, "waits for the runners to stop");
    let stopped = vec![Some(report(0, RunnerState::Done, 50, 1_000)), Some(report(1, RunnerState::Done, 70, 1_000))];
    step(&mut lt, &observed(now, stopped, None));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Aborted);
    assert_eq!(st.summary.as_ref().unwrap().requests, 120);
}

#[test]
fn runners_not_ready_in_time_fail_with_start_timeout() {
    let mut lt = loadtest(2);
    lt.spec.start_timeout = Some("10s".into());
    let t0 = OffsetDateTime::now_utc();
    step(&mut lt, &observed(t0, vec![], None));
    step(&mut lt, &observed(t0 + Duration::from_secs(11), vec![Some(report(0, RunnerState::Ready, 0, 0)), None], None));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Failed);
    assert!(st.message.as_deref().unwrap().contains("only 1 of 2"), "{:?}", st.message);
}

#[test]
fn live_summaries_merge_the_runners_interim_totals() {
    let mut lt = loadtest(2);
    let now = OffsetDateTime::now_utc();
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    let live = |n: u64| {
        let mut m = WorkerMetrics::new(1, 0);
        for _ in 0..n {
            m.steps[0].requests += 1;
            m.steps[0].record_latency_us(2_000);
        }
        let keys = vec![stampede_model::StepKey { scenario: String::new(), step: "total".into() }];
        let p: PortableStep = portable::encode(&keys, &m, &[]).steps.remove(0);
        RunnerReport { live: Some(p), duration_seconds: 5.0, ..report(0, RunnerState::Running, 0, 0) }
    };
    step(&mut lt, &observed(now, vec![Some(live(100)), Some(live(150))], None));
    let s = lt.status.as_ref().unwrap().summary.clone().unwrap();
    assert!(!s.is_final);
    assert_eq!((s.requests, s.rps), (250, 50.0));
    assert_eq!(s.p99, "2.0ms");
    // Sent without their steps, these totals give no live verdict: a threshold names steps.
    assert!(lt.status.as_ref().unwrap().thresholds.is_empty());
}

#[test]
fn a_finished_test_is_deleted_after_its_ttl_and_not_before() {
    let mut lt = loadtest(1);
    lt.spec.ttl_seconds_after_finished = Some(60);
    let now = OffsetDateTime::now_utc();
    let done = (now - Duration::from_secs(30)).format(&time::format_description::well_known::Rfc3339).unwrap();
    lt.status = Some(stampede_api::LoadTestStatus {
        phase: Phase::Succeeded,
        completion_time: Some(done),
        ..Default::default()
    });
    let d = decide(&lt, &observed(now, vec![], None));
    assert!(d.actions.is_empty());
    let wait = d.requeue.unwrap();
    assert!(wait > Duration::from_secs(29) && wait <= Duration::from_secs(30), "{wait:?}");
    let d = decide(&lt, &observed(now + Duration::from_secs(31), vec![], None));
    assert_eq!(d.actions, vec![Action::DeleteLoadTest]);
    lt.spec.ttl_seconds_after_finished = None;
    assert!(decide(&lt, &observed(now + Duration::from_secs(3600), vec![], None)).actions.is_empty(), "no TTL: kept");
}

/// A result ConfigMap whose report does not parse is not "not reported yet": the test fails
/// at once with the runner named, keeping the readable runners' results, instead of waiting
/// for its run timeout.
#[test]
fn an_unreadable_runner_result_fails_the_test_at_once_naming_the_runner() {
    let mut lt = loadtest(2);
    let now = OffsetDateTime::now_utc();
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    let broken = read_report(1, r#"{"index": 1, "state": "done", "result": {"steps": "oops"}}"#, RUN).unwrap_err().0;
    assert!(broken.starts_with("runner 1: its result is not a runner report ("), "{broken}");
    let obs = Observed {
        live: None,
        unreadable: vec![broken.clone()],
        ..observed(now + Duration::from_secs(1), vec![Some(report(0, RunnerState::Done, 300, 2_000)), None], None)
    };
    let actions = step(&mut lt, &obs);
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Failed);
    assert_eq!(st.message.as_deref(), Some(format!("cannot read runner results: {broken}").as_str()));
    assert_eq!(st.conditions.iter().find(|c| c.type_ == "Completed").unwrap().reason, "ResultsInvalid");
    assert_eq!(st.summary.as_ref().unwrap().requests, 300, "the readable result is kept");
    assert!(
        actions.iter().any(|a| matches!(a, Action::Event { warning: true, reason, .. } if reason == "ResultsInvalid"))
    );
    // A readable report parses as before.
    let text = serde_json::to_string(&report(0, RunnerState::Ready, 0, 0)).unwrap();
    assert_eq!(read_report(0, &text, RUN).unwrap().unwrap().state, RunnerState::Ready);
}

/// #15: a result belongs to one run of one LoadTest object. A "done" report left by a deleted
/// LoadTest of the same name (another UID) or by an earlier run of this one is no report of
/// this run: it is read as nothing yet, never merged.
#[test]
fn a_result_of_another_loadtest_object_or_run_is_not_this_runs() {
    let text = serde_json::to_string(&report(0, RunnerState::Done, 300, 2_000)).unwrap();
    assert_eq!(read_report(0, &text, RUN).unwrap().map(|r| r.state), Some(RunnerState::Done));
    assert_eq!(read_report(0, &text, "uid-2/1").unwrap(), None, "a deleted LoadTest of the same name");
    assert_eq!(read_report(0, &text, "uid-1/2").unwrap(), None, "an earlier run");
    let unstamped = serde_json::to_string(&RunnerReport { run: None, ..report(0, RunnerState::Done, 3, 2) }).unwrap();
    assert_eq!(read_report(0, &unstamped, RUN).unwrap(), None, "a report without a run");
}

/// Found on the real node: a runner pod deleted mid-run reported its partial results on
/// SIGTERM, but the test ended at that first report, before the other runner (stopped by the
/// Job controller a moment later) reported, and kept no figures at all. Now the other runners
/// are waited for (a bounded time) and every partial result is kept.
#[test]
fn after_a_runner_fails_the_others_are_waited_for_and_every_partial_result_is_kept() {
    let partial = |index: u32, requests: u64| {
        let measured = report(index, RunnerState::Done, requests, 2_000);
        RunnerReport {
            state: RunnerState::Failed,
            message: Some("terminated (SIGTERM); partial results".into()),
            ..measured
        }
    };
    let mut lt = loadtest(2);
    let now = OffsetDateTime::now_utc();
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    let failing = JobState { active: 1, failed: 1, ..JobState::default() };

    // Runner 1 stopped; runner 0 still runs: not finished yet, and the status says why.
    let d = decide(
        &lt,
        &observed(now, vec![Some(report(0, RunnerState::Running, 0, 0)), Some(partial(1, 70))], Some(failing.clone())),
    );
    assert_eq!(d.status.phase, Phase::Running);
    assert_eq!(d.requeue, Some(Duration::from_secs(1)));
    let stopping = d.status.conditions.iter().find(|c| c.type_ == "Stopping").expect("a Stopping condition");
    assert_eq!((stopping.status.as_str(), stopping.reason.as_str()), ("True", "RunnerFailed"));
    lt.status = Some(d.status);

    // Runner 0 reports its own partial results: the test fails with both.
    let stopped = JobState { active: 0, failed: 2, ..JobState::default() };
    step(&mut lt, &observed(now, vec![Some(partial(0, 30)), Some(partial(1, 70))], Some(stopped)));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Failed);
    assert_eq!(st.summary.as_ref().unwrap().requests, 100, "both runners' partial results");
    assert!(st.message.as_deref().unwrap().contains("runner 1: terminated (SIGTERM)"), "{:?}", st.message);

    // A runner that never reports is not waited for beyond FAILURE_GRACE.
    let mut lt = loadtest(2);
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    let running = vec![Some(report(0, RunnerState::Running, 0, 0)), Some(partial(1, 70))];
    step(&mut lt, &observed(now, running.clone(), Some(failing.clone())));
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Running);
    let later = now + FAILURE_GRACE + Duration::from_secs(1);
    step(&mut lt, &observed(later, running, Some(failing)));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Failed);
    assert_eq!(st.summary.as_ref().unwrap().requests, 70, "what did report is kept");
}

/// A runner's final report with a timeline: `requests` answered in 1 ms over `seconds` ticks.
pub(crate) fn report_with_timeline(index: u32, requests: u64, seconds: u64) -> RunnerReport {
    let mut r = report(index, RunnerState::Done, requests, 1_000);
    let mut timeline = portable::TimelineBuilder::new(1);
    for tick in 1..=seconds {
        let mut t = stampede_core::IntervalStats::default();
        for _ in 0..requests / seconds {
            t.record_request(0);
            t.record_latency(0, 1_000);
        }
        timeline.add(Duration::from_secs(tick), 5, &t);
    }
    r.timeline = Some(timeline.finish(Duration::from_secs(seconds), portable::TIMELINE_BUDGET_BYTES));
    r
}

pub(crate) fn written_report(actions: &[Action]) -> stampede_model::report::Report {
    let json = actions
        .iter()
        .find_map(|a| match a {
            Action::WriteReport(json) => Some(json.clone()),
            _ => None,
        })
        .expect("a WriteReport action");
    serde_json::from_str(&json).unwrap()
}

#[test]
fn a_finished_test_writes_its_merged_report_with_the_timeline_and_a_row_per_runner() {
    let mut lt = loadtest(2);
    let now = OffsetDateTime::now_utc();
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    // Each runner's own peak of VUs (between ticks: the timeline holds 5 at each tick's end).
    let mut done = vec![Some(report_with_timeline(0, 1000, 10)), Some(report_with_timeline(1, 500, 10))];
    for (r, peak) in done.iter_mut().zip([6, 7]) {
        r.as_mut().unwrap().generator =
            Some(stampede_model::report::GeneratorFacts { peak_vus: peak, ..Default::default() });
    }
    let actions = step(&mut lt, &observed(now, done, Some(JobState { succeeded: 2, ..JobState::default() })));
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Succeeded);
    let report = written_report(&actions);
    // #22: the peak is added up over runners as it is over one machine's worker threads (it
    // was the timeline's maximum here, the sum of worker peaks in the CLI).
    assert_eq!(report.run.generator.peak_vus, 6 + 7);
    assert_eq!(report.run.loadtest.as_deref(), Some("perf/shop"));
    assert_eq!(report.total.requests, 1500);
    assert_eq!(report.timeline.len(), 10);
    assert!(report.timeline.iter().all(|p| p.requests == 150 && p.active_vus == 10), "{:?}", report.timeline[0]);
    assert_eq!(report.timeline.iter().map(|p| p.requests).sum::<u64>(), report.total.requests);
    assert_eq!(report.runners.iter().map(|r| (r.index, r.requests)).collect::<Vec<_>>(), vec![(0, 1000), (1, 500)]);
    assert_eq!(report.thresholds, lt.status.as_ref().unwrap().thresholds);
}

/// A runner's partial results, as it writes them when stopped (SIGTERM) after measuring.
fn partial(index: u32, requests: u64) -> RunnerReport {
    RunnerReport {
        state: RunnerState::Failed,
        message: Some("terminated (SIGTERM); partial results".into()),
        ..report(index, RunnerState::Done, requests, 2_000)
    }
}

/// #22: an abort with one runner failed (its report and its pod) and one still running waits
/// for the survivor's partial results. The failed runner used to be counted twice (once for
/// its report, once for its pod), so the abort ended at once and the survivor's figures were lost.
#[test]
fn an_abort_counts_a_failed_runner_once_and_keeps_the_survivors_partial_results() {
    let mut lt = loadtest(2);
    let now = OffsetDateTime::now_utc();
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    lt.spec.abort = true;
    let one_failed = JobState { active: 1, failed: 1, ..JobState::default() };
    step(
        &mut lt,
        &observed(now, vec![Some(report(0, RunnerState::Running, 0, 0)), Some(partial(1, 40))], Some(one_failed)),
    );
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Running, "waits for runner 0: {:?}", st.message);
    assert_eq!(st.conditions.iter().find(|c| c.type_ == "Aborting").map(|c| c.status.as_str()), Some("True"));

    let both_stopped = JobState { active: 0, failed: 2, ..JobState::default() };
    step(&mut lt, &observed(now, vec![Some(partial(0, 60)), Some(partial(1, 40))], Some(both_stopped)));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Aborted);
    assert_eq!(st.summary.as_ref().unwrap().requests, 100, "the survivor's partial results are kept");
}

/// #22: a runner pod deleted mid-run fails the Job at once, and the Job controller stops the
/// other runners: their pods are `terminating` while they write their partial results. The
/// Job's counters already add up (no pod active, every one failed), so the test used to end
/// with only the first runner's figures (42 requests in the status, 102 at the target). It
/// waits until no pod is stopping any more, then keeps every runner's results; a runner whose
/// result never came is named.
#[test]
fn runner_pods_still_stopping_are_waited_for_and_a_runner_without_result_is_named() {
    let mut lt = loadtest(3);
    let now = OffsetDateTime::now_utc();
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    let running = |i| Some(report(i, RunnerState::Running, 0, 0));
    let stopping = JobState { active: 0, terminating: 2, failed: 3, ..JobState::default() };
    step(&mut lt, &observed(now, vec![Some(partial(0, 42)), running(1), running(2)], Some(stopping.clone())));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Running, "runners 1 and 2 are still stopping: {:?}", st.message);

    let later = now + Duration::from_secs(2);
    let ended = JobState { active: 0, terminating: 0, failed: 3, ..JobState::default() };
    let all = vec![Some(partial(0, 42)), Some(partial(1, 30)), Some(partial(2, 30))];
    step(&mut lt, &observed(later, all, Some(ended)));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Failed);
    assert_eq!(st.summary.as_ref().unwrap().requests, 102, "every runner's partial results");

    // Runner 2 never writes a result: after FAILURE_GRACE the test ends, naming it.
    let mut lt = loadtest(3);
    step(&mut lt, &observed(now, vec![], None));
    started(&mut lt, now);
    let some = vec![Some(partial(0, 42)), Some(partial(1, 30)), running(2)];
    step(&mut lt, &observed(now, some.clone(), Some(stopping.clone())));
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Running);
    step(&mut lt, &observed(now + FAILURE_GRACE + Duration::from_secs(1), some, Some(stopping)));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Failed);
    assert_eq!(st.summary.as_ref().unwrap().requests, 72);
    let message = st.message.as_deref().unwrap();
    assert!(message.contains("no result from runner 2 within 45s"), "{message}");
}

/// A two-runner capacity search judged by `threshold`, validated: the LoadTest and its plan.
pub(crate) fn capacity_search(threshold: &str) -> (LoadTest, Arc<Plan>) {
    let yaml = format!(
        r#"
name: capacity
baseUrl: http://my-service.default.svc
load: {{executor: capacity, startRate: 100, step: 100, plateau: 4s, warmup: 1s, maxRate: 1000, stopAfter: 2, preAllocatedVUs: 10, maxVUs: 50}}
scenarios:
  - name: api
    steps:
      - {{name: get, request: {{url: "{{{{baseUrl}}}}/get"}}}}
thresholds: ["{threshold}"]
"#
    );
    let scenario: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
    let spec: LoadTestSpec = serde_json::from_value(serde_json::json!({"runners": 2, "scenario": scenario})).unwrap();
    let lt = LoadTest::new("cap", spec);
    let plan = validate(&lt, &yaml, "test").unwrap();
    (lt, plan)
}

/// Runner `index`'s share of plateau 0 of [`capacity_search`] at 50/s over 4 s: 200 requests
/// answered 200 in 1 ms (its histogram replaced by `histogram`, when given).
pub(crate) fn plateau_share(plan: &Plan, index: u32, histogram: Option<&str>) -> RunnerReport {
    let mut m = WorkerMetrics::new(1, 1);
    for _ in 0..200 {
        m.steps[0].requests += 1;
        m.steps[0].record_latency_us(1_000);
        m.steps[0].record_status(200);
    }
    m.iterations[0] = 200;
    let mut metrics = portable::encode(&plan.step_keys, &m, &["api".to_string()]);
    if let Some(h) = histogram {
        metrics.steps[0].histogram = h.into();
    }
    RunnerReport {
        plateaus: vec![stampede_api::PlateauShare { index: 0, rate: 50.0, seconds: 4.0, metrics, cpu_saturated: None }],
        ..RunnerReport::new(index, RunnerState::Running)
    }
}

/// #22: a capacity search whose plateau share cannot be merged fails saying so; it used to be
/// dropped without a word, and the verdict fell back to thresholds over every plateau together.
#[test]
fn a_capacity_plateau_that_cannot_be_merged_fails_the_test_naming_runner_and_plateau() {
    let (mut lt, plan) = capacity_search("latency.p99 < 100ms");
    lt.metadata.namespace = Some("perf".into());
    lt.metadata.generation = Some(1);
    let share = |index: u32, histogram: Option<&str>| plateau_share(&plan, index, histogram);
    let job = JobState { active: 2, ..JobState::default() };
    let obs = |reports| Observed {
        live: None,
        plan: Scenario::Compiled(plan.clone()),
        ..observed(OffsetDateTime::now_utc(), reports, Some(job.clone()))
    };
    let now = OffsetDateTime::now_utc();
    step(&mut lt, &obs(vec![]));
    started(&mut lt, now);
    let actions = step(&mut lt, &obs(vec![Some(share(0, None)), Some(share(1, Some("not base64!")))]));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Failed);
    let message = st.message.as_deref().unwrap();
    assert!(message.contains("runner 1's share of plateau 0 cannot be merged"), "{message}");
    assert!(actions.contains(&Action::DeleteRunners), "the runners stop: {actions:?}");
    assert_eq!(st.conditions.iter().find(|c| c.type_ == "Completed").unwrap().reason, "ResultsInvalid");
}

/// #22: a runner pod that cannot start is named at once (status and one Event, with the
/// kubelet's reason); an image that keeps failing to pull fails the test after
/// IMAGE_PULL_GRACE, not at its start timeout; a missing Secret (may be created) only waits.
#[test]
fn runner_pods_that_cannot_start_are_named_and_an_image_that_never_pulls_fails_the_test() {
    use stampede_operator::lifecycle::{IMAGE_PULL_GRACE, PodProblem};
    let backoff =
        PodProblem::of("0", Some(("ImagePullBackOff", "Back-off pulling image \"stampede:nope\"")), None).unwrap();
    let secret =
        PodProblem::of("1", Some(("CreateContainerConfigError", "secret \"tokens\" not found")), None).unwrap();
    assert!(PodProblem::of("0", Some(("ContainerCreating", "")), None).is_none(), "progress is no problem");
    assert!(!backoff.is_permanent() && !secret.is_permanent() && !secret.is_image_pull());
    let job = |problems: Vec<PodProblem>| JobState { active: 2, not_starting: problems, ..JobState::default() };

    let mut lt = loadtest(2);
    let t0 = OffsetDateTime::now_utc();
    step(&mut lt, &observed(t0, vec![], None));
    let actions = step(
        &mut lt,
        &observed(t0 + Duration::from_secs(3), vec![None, None], Some(job(vec![backoff.clone(), secret.clone()]))),
    );
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Initializing);
    let ready = st.conditions.iter().find(|c| c.type_ == "RunnersReady").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "ImagePullBackOff"));
    assert!(
        ready.message.contains("runner 1: CreateContainerConfigError: secret \"tokens\" not found"),
        "{}",
        ready.message
    );
    let events: Vec<&Action> = actions.iter().filter(|a| matches!(a, Action::Event { .. })).collect();
    assert_eq!(events.len(), 1, "{actions:?}");
    // Said once: the same problems again are no new Event.
    let actions = step(
        &mut lt,
        &observed(t0 + Duration::from_secs(8), vec![None, None], Some(job(vec![backoff.clone(), secret.clone()]))),
    );
    assert!(!actions.iter().any(|a| matches!(a, Action::Event { .. })), "{actions:?}");

    // The Secret alone waits (for its start timeout); the image failing past the grace fails.
    let later = t0 + IMAGE_PULL_GRACE + Duration::from_secs(5);
    let mut only_secret = lt.clone();
    step(&mut only_secret, &observed(later, vec![None, None], Some(job(vec![secret.clone()]))));
    assert_eq!(only_secret.status.as_ref().unwrap().phase, Phase::Initializing);
    let actions = step(&mut lt, &observed(later, vec![None, None], Some(job(vec![backoff, secret]))));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Failed);
    assert!(
        st.message.as_deref().unwrap().starts_with("runner pods cannot start: runner 0: ImagePullBackOff"),
        "{:?}",
        st.message
    );
    assert!(actions.contains(&Action::DeleteRunners));
    let passed = st.conditions.iter().find(|c| c.type_ == "Passed").unwrap();
    assert_eq!((passed.status.as_str(), passed.reason.as_str()), ("False", "ImagePullBackOff"));
}

/// #22: an open model whose runners dropped more than 1 % of the scheduled iterations (a
/// runner throttled below its rate) is not a pass: `Passed=False` (reason `GeneratorLimited`),
/// `LoadDelivered=False`, phase Failed, though every threshold passed. It used to end
/// `Succeeded` with `Passed=True` beside a `GeneratorSaturated` condition. With
/// `undeliveredLoad: warn` the thresholds alone decide.
#[test]
fn an_open_model_that_did_not_deliver_its_load_is_not_passed() {
    let open = |extra: &str| {
        format!(
            "name: open\nbaseUrl: http://my-service.default.svc\n{extra}load: {{executor: constant-arrival-rate, \
             rate: 20, duration: 10s, preAllocatedVUs: 2, maxVUs: 4}}\nscenarios:\n  - name: buy\n    steps:\n      \
             - {{name: home, request: {{url: \"{{{{baseUrl}}}}/\"}}}}\nthresholds: [\"errors.rate < 1%\"]\n"
        )
    };
    let run = |yaml: String| {
        let scenario: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
        let spec: LoadTestSpec =
            serde_json::from_value(serde_json::json!({"runners": 2, "scenario": scenario})).unwrap();
        let mut lt = LoadTest::new("open", spec);
        lt.metadata.namespace = Some("perf".into());
        lt.metadata.generation = Some(1);
        let plan = validate(&lt, &yaml, "test").unwrap();
        // 200 scheduled over the two runners (10/s each for 10 s): runner 1 ran 60 and dropped 40.
        let share = |index: u32, ran: u64, dropped: u64| {
            let mut m = WorkerMetrics::new(1, 1);
            for _ in 0..ran {
                m.steps[0].requests += 1;
                m.steps[0].record_latency_us(1_000);
                m.steps[0].record_status(200);
            }
            m.iterations[0] = ran;
            for _ in 0..dropped {
                m.record_dropped(0, stampede_core::DropReason::QueueFull);
            }
            RunnerReport {
                duration_seconds: 10.0,
                result: Some(portable::encode(&plan.step_keys, &m, &["buy".to_string()])),
                ..RunnerReport::new(index, RunnerState::Done)
            }
        };
        let job = JobState { succeeded: 2, ..JobState::default() };
        let obs = |reports| Observed {
            live: None,
            plan: Scenario::Compiled(plan.clone()),
            ..observed(OffsetDateTime::now_utc(), reports, Some(job.clone()))
        };
        step(&mut lt, &obs(vec![]));
        started(&mut lt, OffsetDateTime::now_utc());
        let actions = step(&mut lt, &obs(vec![Some(share(0, 100, 0)), Some(share(1, 60, 40))]));
        (lt.status.unwrap(), actions)
    };
    let cond = |st: &stampede_api::LoadTestStatus, t: &str| {
        let c = st.conditions.iter().find(|c| c.type_ == t).unwrap_or_else(|| panic!("no {t}"));
        (c.status.clone(), c.reason.clone(), c.message.clone())
    };

    let (st, actions) = run(open(""));
    assert_eq!(st.phase, Phase::Failed, "{:?}", st.message);
    assert_eq!(cond(&st, "ThresholdsPassed").0, "True");
    let (status, reason, message) = cond(&st, "LoadDelivered");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "GeneratorLimited"));
    assert!(
        message.starts_with("40 of 200 scheduled iterations were dropped (20.0%): 16.0/s achieved of 20.0/s"),
        "{message}"
    );
    let (status, reason, _) = cond(&st, "Passed");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "GeneratorLimited"));
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Event { warning: true, reason, .. } if reason == "GeneratorLimited"))
    );

    let (st, _) = run(open("undeliveredLoad: warn\n"));
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    assert_eq!(cond(&st, "LoadDelivered").0, "False");
    assert_eq!(cond(&st, "Passed").0, "True");
}

/// #36: what the shell may hold back for a moment is a change of the runners' counts alone;
/// a start instant, a phase or the end is never held back.
#[test]
fn only_a_change_of_the_runners_counts_may_wait_for_the_next_status_write() {
    use stampede_operator::lifecycle::only_counts_changed;
    let mut lt = loadtest(3);
    let t0 = OffsetDateTime::now_utc();
    step(&mut lt, &observed(t0, vec![], None));
    let ready = |n: u32| (0..3).map(|i| (i < n).then(|| report(i, RunnerState::Ready, 0, 0))).collect::<Vec<_>>();
    let at = |n: u32, secs: u64| {
        let mut next = lt.clone();
        step(&mut next, &observed(t0 + Duration::from_secs(secs), ready(n), None));
        next.status.unwrap()
    };
    let (one, two, three) = (at(1, 1), at(2, 2), at(3, 3));
    assert_eq!((one.runners.ready, two.runners.ready), (1, 2));
    assert!(only_counts_changed(&one, &two), "1 → 2 of 3 ready");
    assert!(!only_counts_changed(&two, &two), "nothing changed");
    assert!(!only_counts_changed(&two, &three), "all ready: the start instant goes out at once");
    let initializing = lt.status.clone().unwrap();
    assert!(!only_counts_changed(&initializing, &one), "the first count comes with the RunnersReady condition itself");
    let mut moved = two.clone();
    moved.message = Some("something else".into());
    assert!(!only_counts_changed(&one, &moved), "a message is not a count");
    let mut ended = two.clone();
    ended.phase = Phase::Failed;
    assert!(!only_counts_changed(&one, &ended), "an end is never held back");
}
