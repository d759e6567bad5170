//! One reconcile against the mock API server (see `reconcile_mock.rs`) when something goes
//! wrong around the operator: a status write that conflicts, a child the API server refuses,
//! the leftovers of a LoadTest deleted and created again, a read answered 503, and a replica
//! that no longer leads.

use std::time::Duration;

use http::Method;
use serde_json::json;
use stampede_api::{LoadTestStatus, Phase, RESULT_KEY, RunnerReport, RunnerState};
use stampede_operator::leader::Fence;

use crate::common::SCENARIO;
use crate::reconcile_mock::{
    Expect, NAME, NS, Watched, active, all_done, api_path, applied_status, condition, done, job_path, loadtest,
    reconcile_against, reconcile_fenced, reconcile_in_turn, reconcile_watching, running, succeeds,
};

/// A decision taken on a stale copy of the LoadTest (its status write conflicts) deletes
/// nothing: the runners' results stay for the next decision, on the newer copy. (Deleting
/// first left a finished test Running with its results gone.) Nor does it announce anything:
/// its Events went out before the write, and again with the decision taken on the newer copy
/// (#22).
#[tokio::test]
async fn a_conflicting_status_write_deletes_no_child_and_records_no_event() {
    let mut lt = running(2, Duration::from_secs(30));
    lt.spec.cleanup.on_success = stampede_api::CleanupMode::All;
    let seen = reconcile_watching(
        &lt,
        all_done(),
        vec![
            Expect::GetScenario,
            Expect::Apply(api_path("configmaps", &format!("{NAME}-report"))),
            Expect::ApplyStatusConflict,
        ],
    )
    .await;
    assert!(!seen.iter().any(|s| s.method == Method::DELETE), "{seen:?}");
    assert!(!seen.iter().any(|s| s.path.ends_with("/events")), "{seen:?}");
}

/// An object the API server refuses as invalid ends the test with a condition and an Event (it
/// used to be retried every 5 s forever, with nothing in the status), and what was created is
/// removed.
#[tokio::test]
async fn a_child_the_api_server_refuses_fails_the_test_once_with_a_condition_and_an_event() {
    let lt = loadtest(3, SCENARIO);
    let mut script = vec![Expect::GetJob(None), Expect::ListResults(vec![])];
    script.extend(
        [
            api_path("serviceaccounts", "shop-runner"),
            api_path("roles", "shop-runner"),
            api_path("rolebindings", "shop-runner"),
            api_path("configmaps", "shop-scenario"),
            api_path("configmaps", "shop-result-0"),
            api_path("configmaps", "shop-result-1"),
            api_path("configmaps", "shop-result-2"),
        ]
        .into_iter()
        .map(Expect::Apply),
    );
    script.push(Expect::ApplyRejected(job_path()));
    script.push(Expect::ApplyStatus);
    script.push(Expect::Event { reason: "Rejected", warning: true });
    for path in [
        job_path(),
        api_path("configmaps", "shop-scenario"),
        api_path("configmaps", "shop-result-0"),
        api_path("configmaps", "shop-result-1"),
        api_path("configmaps", "shop-result-2"),
        api_path("rolebindings", "shop-runner"),
        api_path("roles", "shop-runner"),
        api_path("serviceaccounts", "shop-runner"),
    ] {
        script.push(Expect::Delete(path));
    }
    let seen = reconcile_against(&lt, script).await;
    let st = applied_status(&seen);
    assert_eq!(st.phase, Phase::Failed);
    let (status, reason, message) = condition(&st, "Valid");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Rejected"));
    assert!(message.contains("is invalid"), "{message}");
}

/// #15: a LoadTest deleted and created again at once under the same name finds the old object's
/// children still there until the garbage collector removes them. The new object deletes them
/// itself (the Job in the foreground, so its pods go first) and creates nothing, and writes no
/// status, until they are gone: no stale "done" result can be merged into its run.
#[tokio::test]
async fn a_recreated_loadtest_replaces_the_old_objects_children_before_it_starts() {
    let lt = loadtest(2, SCENARIO);
    let stale_result = |i: u32| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": format!("{NAME}-result-{i}"), "namespace": NS,
                            "labels": {"stampede.dev/loadtest": NAME, "stampede.dev/run": "1"},
                            "ownerReferences": [{"apiVersion": "stampede.dev/v1alpha1", "kind": "LoadTest",
                                                 "name": NAME, "uid": "an-older-object"}]},
               "data": {RESULT_KEY: serde_json::to_string(&done(i, 1000)).unwrap()}})
    };
    let report = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("{NAME}-report"), "namespace": NS,
                                     "labels": {"stampede.dev/loadtest": NAME}}});
    let seen = reconcile_against(
        &lt,
        vec![
            Expect::GetStaleJob,
            Expect::DeleteForeground(job_path()),
            Expect::ListConfigMaps(vec![stale_result(0), stale_result(1), report]),
            Expect::Delete(api_path("configmaps", &format!("{NAME}-result-0"))),
            Expect::Delete(api_path("configmaps", &format!("{NAME}-result-1"))),
        ],
    )
    .await;
    assert!(!seen.iter().any(|s| s.path.ends_with("/status")), "no status before the old children are gone");
    assert!(!seen.iter().any(|s| s.path.ends_with("-report") && s.method == Method::DELETE), "the report stays");
}

/// #22: a transient API error (503) on the run's scenario read mid-run is retried, never taken
/// for an invalid scenario: no status is written, the reconcile fails (and is retried with
/// back-off), and the next one completes the run. It used to fail the test as
/// `invalid scenario: … 503 …` without merging the runners' results. The scenario is compiled
/// once per run: the third reconcile of the run reads it no more.
#[tokio::test]
async fn a_503_on_the_scenario_read_mid_run_keeps_the_run_running_and_it_completes() {
    let lt = running(2, Duration::from_secs(30));
    let one_done = vec![
        Watched::Results(vec![Some(done(0, 1000)), Some(RunnerReport::new(1, RunnerState::Running))]),
        Watched::Job(active(1)),
    ];
    let (outcomes, seen) = reconcile_in_turn(
        vec![(lt.clone(), one_done.clone()), (lt.clone(), one_done), (lt.clone(), all_done())],
        [
            // 1: the read fails: nothing else is asked, nothing written.
            Expect::Unavailable(api_path("configmaps", &format!("{NAME}-scenario"))),
            // 2: still running (one runner done).
            Expect::GetScenario,
            Expect::ApplyStatus,
            // 3: both done; the compiled plan is reused (no scenario read).
        ]
        .into_iter()
        .chain(succeeds())
        .collect(),
    )
    .await;
    let first = outcomes[0].as_ref().expect_err("the unavailable read fails the reconcile");
    assert!(first.contains("cannot read ConfigMap perf/shop-scenario") && first.contains("503"), "{first}");
    assert_eq!(&outcomes[1..], &[Ok(()), Ok(())]);
    let statuses: Vec<LoadTestStatus> = seen
        .iter()
        .filter(|s| s.method == Method::PATCH && s.path.ends_with("/status"))
        .map(|s| serde_json::from_value(s.body["status"].clone()).unwrap())
        .collect();
    assert_eq!(statuses.iter().map(|s| s.phase).collect::<Vec<_>>(), [Phase::Running, Phase::Succeeded]);
    assert!(statuses.iter().all(|s| !s.conditions.iter().any(|c| c.type_ == "Valid" && c.status == "False")));
    assert_eq!(statuses[1].summary.as_ref().unwrap().requests, 1500);
}

/// #22: a transient error reading `spec.scenarioFrom` before the start is retried too: the
/// LoadTest stays Pending instead of failing as invalid.
#[tokio::test]
async fn a_503_on_the_scenario_from_read_leaves_the_test_pending() {
    let mut lt = loadtest(1, SCENARIO);
    lt.spec.scenario = None;
    lt.spec.scenario_from =
        Some(serde_json::from_value(json!({"name": "shop-scenarios", "key": "shop.yaml"})).unwrap());
    let (outcomes, seen) =
        reconcile_in_turn(vec![(lt, vec![])], vec![Expect::Unavailable(api_path("configmaps", "shop-scenarios"))])
            .await;
    assert!(outcomes[0].as_ref().is_err_and(|e| e.contains("503")), "{outcomes:?}");
    assert_eq!(seen.len(), 1, "no status, no Event");
}

/// #22: a replica that no longer leads (its renew deadline passed: it was frozen, or its
/// connection stalled) still reads, but writes nothing — no child, no status, no Event — even
/// before its renewal task has noticed: another replica may lead by now. The same reconcile
/// by a leading replica writes the merged status and deletes the Job.
#[tokio::test]
async fn a_replica_past_its_renew_deadline_reads_but_writes_nothing() {
    let lt = running(2, Duration::from_secs(30));
    let reads = || vec![Expect::GetScenario];
    let lapsed = Fence::until(tokio::time::Instant::now());
    let (outcomes, seen) = reconcile_fenced(&[(lt.clone(), all_done())], reads(), lapsed).await;
    assert_eq!(outcomes, [Err("not leading: another replica may act now".to_string())]);
    assert!(seen.iter().all(|s| s.method == Method::GET), "{seen:?}");

    let leading = Fence::until(tokio::time::Instant::now() + Duration::from_secs(10));
    let mut script = reads();
    script.extend(succeeds());
    let (outcomes, seen) = reconcile_fenced(&[(lt, all_done())], script, leading).await;
    assert_eq!(outcomes, [Ok(())]);
    assert_eq!(applied_status(&seen).phase, Phase::Succeeded);
}
