//! `spec.live` in the pure core: a change taken once for the whole fleet at one instant, a
//! change refused with a condition and an Event while the run goes on unchanged, and never a
//! new run for it.

use stampede_api::{LiveSpec, LoadTest, Phase, RunnerState};
use stampede_operator::lifecycle::{self, Action, LIVE_DELAY};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use stampede_operator::lifecycle::{Observed, Scenario};

use crate::decisions::{plan, report, started, step, written_report};

/// What a reconcile of `lt` sees: its own scenario compiled, and these runner reports.
fn observed_of(lt: &LoadTest, now: OffsetDateTime, reports: Vec<Option<stampede_api::RunnerReport>>) -> Observed {
    Observed { plan: Scenario::Compiled(plan(lt)), ..crate::decisions::observed(now, reports, None) }
}

/// One reconcile of `lt` seeing these runner reports.
fn tick(lt: &mut LoadTest, now: OffsetDateTime, reports: Vec<Option<stampede_api::RunnerReport>>) -> Vec<Action> {
    let obs = observed_of(lt, now, reports);
    step(lt, &obs)
}

/// A 2-runner LoadTest of 6 VUs that may go to 12 (`maxVUs`), running.
fn running(now: OffsetDateTime) -> LoadTest {
    let mut lt = crate::decisions::loadtest(2);
    let scenario = crate::common::SCENARIO.replace("vus: 10,", "vus: 6, maxVUs: 12,");
    lt.spec.scenario = Some(serde_yaml::from_str(&scenario).unwrap());
    tick(&mut lt, now, vec![]);
    started(&mut lt, now);
    tick(&mut lt, now, runners(RunnerState::Running));
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Running);
    lt
}

fn runners(state: RunnerState) -> Vec<Option<stampede_api::RunnerReport>> {
    vec![Some(report(0, state, 100, 1_000)), Some(report(1, state, 100, 1_000))]
}

/// `kubectl patch` of `spec.live`: a new generation.
fn patch(lt: &mut LoadTest, vus: Option<i64>, paused: Option<bool>) {
    patch_live(lt, LiveSpec { vus, rate: None, paused });
}

fn patch_live(lt: &mut LoadTest, live: LiveSpec) {
    lt.spec.live = Some(live);
    lt.metadata.generation = Some(lt.metadata.generation.unwrap_or(1) + 1);
}

fn events<'a>(actions: &'a [Action], reason: &str) -> Vec<&'a str> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Event { reason: r, note, .. } if r == reason => Some(note.as_str()),
            _ => None,
        })
        .collect()
}

fn condition(lt: &LoadTest, type_: &str) -> Option<(String, String, String)> {
    let c = lt.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[test]
fn a_change_of_vus_is_taken_once_for_the_fleet_at_one_instant_ahead() {
    let now = OffsetDateTime::now_utc();
    let mut lt = running(now);
    patch(&mut lt, Some(12), None);
    let actions = tick(&mut lt, now, runners(RunnerState::Running));
    let st = lt.status.as_ref().unwrap();
    assert_eq!(st.phase, Phase::Running);
    let live = st.live.as_ref().expect("status.live");
    assert_eq!(live.changes.len(), 1);
    let change = &live.changes[0];
    assert_eq!((change.seq, change.vus, change.paused), (1, Some(12), None));
    let at = OffsetDateTime::parse(&change.at, &Rfc3339).unwrap();
    // LIVE_DELAY after the decision, to the microsecond (as a start instant is written).
    let behind = now + LIVE_DELAY - at;
    assert!(
        behind >= time::Duration::ZERO && behind < time::Duration::microseconds(1),
        "{} is {LIVE_DELAY:?} ahead",
        change.at
    );
    assert_eq!(events(&actions, "LoadChanged"), [format!("spec.live: vus 12 at {}", change.at)]);
    assert_eq!(condition(&lt, "LiveChange").map(|c| (c.0, c.1)), Some(("True".into(), "Taken".into())));
    // Not a change of the run: no SpecApplied=False, and the run's generation follows.
    assert!(condition(&lt, "SpecApplied").is_none(), "{:?}", lt.status);
    assert_eq!(lt.status.as_ref().unwrap().run_generation, lt.metadata.generation);

    // Decided once: the next reconcile changes nothing.
    let actions = tick(&mut lt, now, runners(RunnerState::Running));
    assert!(events(&actions, "LoadChanged").is_empty());
    assert_eq!(lt.status.as_ref().unwrap().live.as_ref().unwrap().changes.len(), 1);

    // A pause, then the resume: numbered in order.
    patch(&mut lt, Some(12), Some(true));
    tick(&mut lt, now, runners(RunnerState::Running));
    patch(&mut lt, Some(12), Some(false));
    tick(&mut lt, now, runners(RunnerState::Running));
    let changes = &lt.status.as_ref().unwrap().live.as_ref().unwrap().changes;
    let seen: Vec<(u32, Option<u32>, Option<bool>)> = changes.iter().map(|c| (c.seq, c.vus, c.paused)).collect();
    assert_eq!(seen, [(1, Some(12), None), (2, Some(12), Some(true)), (3, Some(12), Some(false))]);

    // The merged report says each change, in seconds from the start.
    let actions = tick(&mut lt, now, runners(RunnerState::Done));
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Succeeded, "{:?}", lt.status);
    let report = written_report(&actions);
    let recorded: Vec<(Option<u32>, Option<bool>)> =
        report.run.load_changes.iter().map(|c| (c.vus, c.paused)).collect();
    assert_eq!(recorded, [(Some(12), None), (Some(12), Some(true)), (Some(12), Some(false))]);
    // Started a second before `now`; each change LIVE_DELAY after `now`.
    assert!(report.run.load_changes.iter().all(|c| (c.t - 3.0).abs() < 0.5), "{:?}", report.run.load_changes);
    // And no new run for a spec that changed only in `live`.
    assert_eq!(lifecycle::rerun_reason(&lt), None);
}

#[test]
fn a_change_the_run_cannot_take_is_refused_and_the_run_goes_on_unchanged() {
    let now = OffsetDateTime::now_utc();
    let mut lt = running(now);
    for (vus, why) in [(13, "more than the load's maxVUs (12)"), (-2, "must be at least 1 (got -2)")] {
        patch(&mut lt, Some(vus), None);
        let actions = tick(&mut lt, now, runners(RunnerState::Running));
        let st = lt.status.as_ref().unwrap();
        assert_eq!(st.phase, Phase::Running);
        assert!(st.live.as_ref().unwrap().changes.is_empty(), "nothing taken");
        let (status, reason, message) = condition(&lt, "LiveChange").unwrap();
        assert_eq!((status.as_str(), reason.as_str()), ("False", "Refused"));
        assert!(message.contains(why), "{message}");
        let refused = events(&actions, "LiveChangeRefused");
        assert_eq!(refused.len(), 1);
        assert!(refused[0].contains(why), "{refused:?}");
        assert!(!actions.iter().any(|a| matches!(a, Action::DeleteRunners | Action::DeleteAll)));
    }
    // Said once per value.
    let actions = tick(&mut lt, now, runners(RunnerState::Running));
    assert!(events(&actions, "LiveChangeRefused").is_empty());
    // A rate, on this closed model.
    patch_live(&mut lt, LiveSpec { rate: Some(500), ..LiveSpec::default() });
    let actions = tick(&mut lt, now, runners(RunnerState::Running));
    let refused = events(&actions, "LiveChangeRefused");
    assert_eq!(refused.len(), 1);
    assert!(
        refused[0].contains("spec.live: rate 500/s refused: `rate` applies to arrival-rate executors"),
        "{refused:?}"
    );
    assert!(lt.status.as_ref().unwrap().live.as_ref().unwrap().changes.is_empty());
}

#[test]
fn an_open_models_rate_is_taken_for_the_fleet_and_its_vus_refused() {
    let now = OffsetDateTime::now_utc();
    let mut lt = crate::decisions::loadtest(2);
    let open = "load: {executor: constant-arrival-rate, rate: 100, duration: 30s, preAllocatedVUs: 4}";
    let scenario = crate::common::SCENARIO.replace("load: {executor: constant-vus, vus: 10, duration: 30s}", open);
    lt.spec.scenario = Some(serde_yaml::from_str(&scenario).unwrap());
    tick(&mut lt, now, vec![]);
    started(&mut lt, now);
    tick(&mut lt, now, runners(RunnerState::Running));
    patch_live(&mut lt, LiveSpec { vus: Some(8), ..LiveSpec::default() });
    let actions = tick(&mut lt, now, runners(RunnerState::Running));
    let refused = events(&actions, "LiveChangeRefused");
    assert!(refused.len() == 1 && refused[0].contains("open model): change `rate`"), "{refused:?}");
    patch_live(&mut lt, LiveSpec { rate: Some(250), paused: Some(false), ..LiveSpec::default() });
    let actions = tick(&mut lt, now, runners(RunnerState::Running));
    assert_eq!(events(&actions, "LoadChanged").len(), 1);
    let live = lt.status.as_ref().unwrap().live.clone().unwrap();
    let taken: Vec<_> = live.changes.iter().map(|c| (c.seq, c.vus, c.rate, c.paused)).collect();
    assert_eq!(taken, [(1, None, Some(250), Some(false))]);
    let (status, reason, message) = condition(&lt, "LiveChange").unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Taken"));
    assert!(message.starts_with("spec.live: rate 250/s, resumed at "), "{message}");
}

#[test]
fn after_the_end_a_change_is_refused_and_starts_no_new_run() {
    let now = OffsetDateTime::now_utc();
    let mut lt = running(now);
    tick(&mut lt, now, runners(RunnerState::Done));
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Succeeded);
    patch(&mut lt, Some(8), None);
    assert_eq!(lifecycle::rerun_reason(&lt), None, "a change of spec.live alone is no new run");
    let actions = tick(&mut lt, now, vec![]);
    assert_eq!(lt.status.as_ref().unwrap().phase, Phase::Succeeded);
    assert!(events(&actions, "Rerun").is_empty());
    let refused = events(&actions, "LiveChangeRefused");
    assert_eq!(refused.len(), 1);
    assert!(refused[0].contains("the run has ended"), "{refused:?}");
    assert_eq!(lifecycle::rerun_reason(&lt), None);

    // Another change of the spec still starts a new run, as before.
    lt.spec.runners = 3;
    lt.metadata.generation = Some(lt.metadata.generation.unwrap() + 1);
    assert!(lifecycle::rerun_reason(&lt).is_some_and(|why| why.starts_with("the spec changed")));
}
