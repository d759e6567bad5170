//! How a run ends and the next one starts, in the pure core: the conditions `kubectl wait`
//! reads at every end, a spec change during a run, and reruns by annotation or spec change.

use stampede_api::{LoadTest, Phase, RunnerState};
use stampede_operator::lifecycle::{self, Action, Observed, Scenario, decide};
use time::OffsetDateTime;

use crate::decisions::{loadtest, observed, plan, report, started, step};

/// #15: a change of spec.runners during a run (the API server accepts it) neither hangs the run
/// nor goes unsaid: the run finishes on the count it started with, and a condition and one
/// Event say the change waits for the next run.
#[test]
fn a_spec_change_during_a_run_waits_for_the_next_run_and_says_so() {
    let mut lt = loadtest(2);
    let now = OffsetDateTime::now_utc();
    step(&mut lt, &observed(now, vec![], None));
    assert_eq!(lt.status.as_ref().unwrap().run_generation, Some(1));
    started(&mut lt, now);
    let running = vec![Some(report(0, RunnerState::Running, 0, 0)), Some(report(1, RunnerState::Running, 0, 0))];
    step(&mut lt, &observed(now, running.clone(), None));
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Running);

    // `kubectl edit`: 3 runners, a new generation.
    lt.spec.runners = 3;
    lt.metadata.generation = Some(2);
    let actions = step(&mut lt, &observed(now, running.clone(), None));
    let st = lt.status.as_ref().unwrap();
    let cond = st.conditions.iter().find(|c| c.type_ == "SpecApplied").expect("a SpecApplied condition");
    assert_eq!((cond.status.as_str(), cond.reason.as_str()), ("False", "SpecChangedDuringRun"));
    assert!(cond.message.contains("generation 2") && cond.message.contains("2 runner(s)"), "{}", cond.message);
    let said = |actions: &[Action]| {
        actions.iter().filter(|a| matches!(a, Action::Event { reason, .. } if reason == "SpecChangedDuringRun")).count()
    };
    assert_eq!(said(&actions), 1);
    assert_eq!(st.runners.desired, 2, "the run keeps its count");
    let actions = step(&mut lt, &observed(now, running, None));
    assert_eq!(said(&actions), 0, "said once, not every reconcile");

    // Both runners finish: the test ends now, not at its run timeout.
    let done = vec![Some(report(0, RunnerState::Done, 100, 1_000)), Some(report(1, RunnerState::Done, 100, 1_000))];
    step(&mut lt, &observed(now, done, None));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    assert_eq!(st.summary.as_ref().unwrap().requests, 200);

    // The change applies to the next run, which starts now: 3 runners, from generation 2.
    let actions = step(&mut lt, &observed(now, vec![], None));
    assert!(actions.iter().any(|a| matches!(a, Action::Event { reason, .. } if reason == "Rerun")));
    let actions = step(&mut lt, &observed(now, vec![], None));
    assert!(actions.contains(&Action::ApplyChildren));
    let st = lt.status.as_ref().unwrap();
    assert_eq!((st.phase, st.run, st.run_generation, st.runners.desired), (Phase::Initializing, Some(2), Some(2), 3));
    assert!(!st.conditions.iter().any(|c| c.type_ == "SpecApplied"), "the new run is of the current spec");
}

/// Runs `lt` from its current (pending) run to Succeeded with `requests` requests per runner.
fn run_to_success(lt: &mut LoadTest, now: OffsetDateTime, requests: u64) {
    step(lt, &observed(now, vec![], None));
    started(lt, now);
    let done =
        vec![Some(report(0, RunnerState::Done, requests, 1_000)), Some(report(1, RunnerState::Done, requests, 1_000))];
    step(lt, &observed(now, done, None));
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Succeeded, "{:?}", lt.status);
}

/// #15: a finished LoadTest runs again for a new value of `stampede.dev/rerun`; the previous
/// run's summary moves to `.status.history`, and the new run's status starts from nothing (its
/// counts are its own). The same value again does nothing.
#[test]
fn a_new_rerun_token_starts_a_new_run_and_keeps_the_last_one_in_history() {
    let mut lt = loadtest(2);
    let now = OffsetDateTime::now_utc();
    run_to_success(&mut lt, now, 150);
    assert_eq!(lt.status.as_ref().unwrap().run, Some(1));
    assert!(decide(&lt, &observed(now, vec![], None)).actions.is_empty(), "nothing to do when finished");

    lt.metadata.annotations = Some([(stampede_api::RERUN_ANNOTATION.to_string(), "a".to_string())].into());
    let actions = step(&mut lt, &observed(now, vec![], None));
    let note = actions
        .iter()
        .find_map(|a| match a {
            Action::Event { reason, note, warning: false } if reason == "Rerun" => Some(note.clone()),
            _ => None,
        })
        .expect("a Rerun Event");
    assert_eq!(note, "run 2 starts: annotation stampede.dev/rerun=a");
    let st = lt.status.clone().unwrap();
    assert_eq!((st.phase, st.run), (Phase::Pending, Some(2)));
    assert!(st.summary.is_none() && st.start_at.is_none() && st.conditions.is_empty(), "{st:?}");
    assert_eq!(st.history.len(), 1);
    let last = &st.history[0];
    assert_eq!(
        (last.run, last.phase, last.verdict.as_str(), last.requests),
        (Some(1), Phase::Succeeded, "Passed", 300)
    );
    assert!(last.p99_ms.is_some() && last.p99.is_some() && last.completion_time.is_some(), "{last:?}");

    run_to_success(&mut lt, now, 7);
    let st = lt.status.clone().unwrap();
    assert_eq!((st.run, st.rerun_token.as_deref()), (Some(2), Some("a")));
    assert_eq!(st.summary.unwrap().requests, 14, "the new run's counts are its own");
    assert!(decide(&lt, &observed(now, vec![], None)).actions.is_empty(), "the same token does not run again");

    // The history is bounded, newest first.
    for token in 0..(stampede_api::HISTORY_LIMIT + 3) {
        lt.metadata.annotations = Some([(stampede_api::RERUN_ANNOTATION.to_string(), format!("t{token}"))].into());
        step(&mut lt, &observed(now, vec![], None));
        run_to_success(&mut lt, now, 1);
    }
    let st = lt.status.clone().unwrap();
    assert_eq!(st.history.len(), stampede_api::HISTORY_LIMIT);
    let runs: Vec<u32> = st.history.iter().filter_map(|r| r.run).collect();
    let newest = st.run.unwrap() - 1;
    assert_eq!(runs, (0..stampede_api::HISTORY_LIMIT as u32).map(|i| newest - i).collect::<Vec<_>>());
}

/// #15: a finished LoadTest whose spec changes (a new generation, e.g. a Git sync) runs again;
/// setting `abort` on a finished one does not.
#[test]
fn a_spec_change_after_the_end_runs_again_and_abort_does_not() {
    let mut lt = loadtest(2);
    let now = OffsetDateTime::now_utc();
    run_to_success(&mut lt, now, 10);
    lt.spec.abort = true;
    lt.metadata.generation = Some(2);
    assert_eq!(lifecycle::rerun_reason(&lt), None);
    lt.spec.abort = false;
    lt.metadata.generation = Some(3);
    assert_eq!(
        lifecycle::rerun_reason(&lt).as_deref(),
        Some("the spec changed (generation 3; the last run was of generation 1)")
    );
    step(&mut lt, &observed(now, vec![], None));
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Pending);
    run_to_success(&mut lt, now, 10);
    assert_eq!(lt.status.as_ref().unwrap().run_generation, Some(3));
}

/// #15: `kubectl wait --for=condition=Finished` and `--for=condition=Passed` need conditions
/// that say so: Finished is True at every end, Passed only when the test succeeded.
#[test]
fn every_end_sets_finished_and_passed_says_the_verdict() {
    let cond = |lt: &LoadTest, t: &str| {
        let c = lt.status.as_ref().unwrap().conditions.iter().find(|c| c.type_ == t).cloned();
        c.map(|c| (c.status, c.reason))
    };
    let mut ok = loadtest(2);
    let now = OffsetDateTime::now_utc();
    step(&mut ok, &observed(now, vec![], None));
    assert_eq!(cond(&ok, "Finished"), None, "not while it runs");
    ok.status = None;
    run_to_success(&mut ok, now, 10);
    assert_eq!(cond(&ok, "Finished"), Some(("True".into(), "Succeeded".into())));
    assert_eq!(cond(&ok, "Passed"), Some(("True".into(), "Passed".into())));

    let mut invalid = loadtest(2);
    let obs = Observed { plan: Scenario::Invalid("no steps".into()), ..observed(now, vec![], None) };
    step(&mut invalid, &obs);
    assert_eq!(cond(&invalid, "Finished"), Some(("True".into(), "Failed".into())));
    assert_eq!(cond(&invalid, "Passed"), Some(("False".into(), "InvalidSpec".into())));

    let mut slow = loadtest(2);
    step(&mut slow, &observed(now, vec![], None));
    started(&mut slow, now);
    let done = vec![Some(report(0, RunnerState::Done, 100, 900_000)), Some(report(1, RunnerState::Done, 100, 900_000))];
    slow.spec.scenario.as_mut().unwrap()["thresholds"] = serde_json::json!(["latency.max < 10ms"]);
    let obs = Observed { plan: Scenario::Compiled(plan(&slow)), ..observed(now, done, None) };
    step(&mut slow, &obs);
    assert_eq!(slow.status.as_ref().unwrap().phase, Phase::Failed);
    assert_eq!(cond(&slow, "Finished"), Some(("True".into(), "Failed".into())));
    assert_eq!(cond(&slow, "Passed"), Some(("False".into(), "ThresholdsFailed".into())));
}
