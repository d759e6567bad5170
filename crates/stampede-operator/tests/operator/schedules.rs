//! #15: the LoadTestSchedule's pure core, CronJob's rules at fixed instants: which run is
//! created when, concurrency policies, missed times and the deadline, suspend, history and the
//! history limits, time zones, and the same name for the same schedule time (no duplicate after
//! a restart).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use stampede_api::{
    LoadTest, LoadTestSchedule, LoadTestScheduleSpec, LoadTestStatus, Phase, SCHEDULE_LABEL, SCHEDULED_TIME_ANNOTATION,
    Summary,
};
use stampede_operator::schedule::{self, CronSchedule, Decision, Observed};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use time::macros::datetime;

use crate::common::SCENARIO;

/// The schedule's creation: 2026-12-01 10:00:00 UTC.
const T0: OffsetDateTime = datetime!(2026-12-01 10:00:00 UTC);

fn at(secs: i64) -> OffsetDateTime {
    T0 + time::Duration::seconds(secs)
}

fn lts(schedule: &str, extra: serde_json::Value) -> LoadTestSchedule {
    let scenario: serde_json::Value = serde_yaml::from_str(SCENARIO).unwrap();
    let mut spec = serde_json::json!({
        "schedule": schedule,
        "template": {"metadata": {"labels": {"team": "shop"}}, "spec": {"runners": 2, "scenario": scenario}},
    });
    spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let spec: LoadTestScheduleSpec = serde_json::from_value(spec).unwrap();
    let mut s = LoadTestSchedule::new("nightly", spec);
    s.metadata.namespace = Some("perf".into());
    s.metadata.uid = Some("5c4ed01e".into());
    s.metadata.generation = Some(1);
    s.metadata.creation_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::from_second(T0.unix_timestamp()).unwrap()));
    s
}

/// Decides at `now` and keeps the status, as the shell does.
fn step(s: &mut LoadTestSchedule, now: OffsetDateTime, runs: &[LoadTest]) -> Decision {
    let d = schedule::decide(s, &Observed { now, runs: runs.to_vec() });
    s.status = Some(d.status.clone());
    d
}

/// The run `d` created, in `phase` (with figures when finished).
fn run_in(d: &Decision, phase: Phase, p99_ms: f64) -> LoadTest {
    let mut lt = d.create.clone().expect("a run was created");
    lt.status = Some(LoadTestStatus {
        phase,
        run: Some(1),
        start_time: Some("2026-12-01T10:00:01Z".into()),
        completion_time: phase.is_finished().then(|| "2026-12-01T10:00:09Z".into()),
        summary: phase.is_finished().then(|| Summary {
            is_final: true,
            requests: 1000,
            rps: 125.0,
            p99: format!("{p99_ms}ms"),
            latency_ms: stampede_model::report::LatencySummary { p99: p99_ms, ..Default::default() },
            ..Summary::default()
        }),
        ..LoadTestStatus::default()
    });
    lt
}

fn reasons(d: &Decision) -> Vec<&str> {
    d.events.iter().map(|e| e.reason.as_str()).collect()
}

fn time_of(text: Option<&str>) -> Option<OffsetDateTime> {
    text.map(|t| OffsetDateTime::parse(t, &Rfc3339).unwrap())
}

#[test]
fn the_latest_due_time_runs_named_by_its_time_and_owned_by_the_schedule() {
    let mut s = lts("*/10 * * * * *", serde_json::json!({}));
    let d = step(&mut s, at(5), &[]);
    assert!(d.create.is_none(), "nothing due yet");
    assert_eq!(time_of(d.status.next_schedule_time.as_deref()), Some(at(10)));
    assert_eq!(d.requeue, Some(Duration::from_secs(5)), "wakes at the next schedule time");

    // 10:00:25: 10:00:10 and 10:00:20 passed; only the latest runs, the other is counted missed.
    let d = step(&mut s, at(25), &[]);
    let lt = d.create.clone().expect("a run");
    let name = format!("nightly-{}", at(20).unix_timestamp());
    assert_eq!(lt.metadata.name.as_deref(), Some(name.as_str()));
    let labels = lt.metadata.labels.clone().unwrap();
    assert_eq!((labels[SCHEDULE_LABEL].as_str(), labels["team"].as_str()), ("nightly", "shop"));
    assert_eq!(lt.metadata.annotations.unwrap()[SCHEDULED_TIME_ANNOTATION], "2026-12-01T10:00:20Z");
    let owner = &lt.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("LoadTestSchedule", "5c4ed01e", Some(true))
    );
    assert_eq!(lt.spec.runners, 2);
    let st = &d.status;
    assert_eq!(time_of(st.last_schedule_time.as_deref()), Some(at(20)));
    assert_eq!((st.active.clone(), st.active_count, st.missed_runs), (vec![name.clone()], 1, 1));
    assert_eq!(reasons(&d), ["Created"]);

    // The same instant decided again from the same status (a status write lost, an operator
    // restart): the same name, so the shell finds that run instead of making a second one.
    let mut again = s.clone();
    again.status = None;
    let d2 = step(&mut again, at(25), &[]);
    assert_eq!(d2.create.unwrap().metadata.name, Some(name));
}

#[test]
fn forbid_holds_a_due_run_back_until_the_running_one_ends() {
    let mut s = lts("*/10 * * * * *", serde_json::json!({}));
    let first = step(&mut s, at(10), &[]);
    let running = run_in(&first, Phase::Running, 0.0);
    let d = step(&mut s, at(21), std::slice::from_ref(&running));
    assert!(d.create.is_none(), "Forbid is the default");
    assert_eq!(reasons(&d), ["RunHeldBack"]);
    assert!(d.status.message.as_deref().unwrap().contains("is still running (concurrencyPolicy Forbid)"));
    assert_eq!(time_of(d.status.last_schedule_time.as_deref()), Some(at(10)), "not consumed");
    let d = step(&mut s, at(22), std::slice::from_ref(&running));
    assert!(d.create.is_none() && d.events.is_empty(), "said once");
    // It ends: the held-back run starts (late, no deadline).
    let finished = run_in(&first, Phase::Succeeded, 9.0);
    let d = step(&mut s, at(24), &[finished]);
    assert_eq!(d.create.clone().unwrap().metadata.name, Some(format!("nightly-{}", at(20).unix_timestamp())));
    assert_eq!(reasons(&d), ["RunFinished", "Created"]);
}

#[test]
fn replace_aborts_the_running_run_and_allow_runs_beside_it() {
    for (policy, aborts) in [("Replace", true), ("Allow", false)] {
        let mut s = lts("*/10 * * * * *", serde_json::json!({"concurrencyPolicy": policy}));
        let first = step(&mut s, at(10), &[]);
        let running = run_in(&first, Phase::Running, 0.0);
        let d = step(&mut s, at(20), std::slice::from_ref(&running));
        let old = running.metadata.name.clone().unwrap();
        let new = d.create.clone().expect("a new run").metadata.name.unwrap();
        assert_eq!(d.abort, if aborts { vec![old.clone()] } else { vec![] }, "{policy}");
        assert_eq!(d.status.active, vec![old, new], "{policy}");
        assert_eq!(d.status.active_count, 2);
    }
}

#[test]
fn a_run_later_than_the_starting_deadline_is_missed_once_and_the_next_one_runs() {
    let mut s = lts("*/10 * * * * *", serde_json::json!({"startingDeadlineSeconds": 3}));
    // The operator was down from 10:00:05 to 10:00:15: the 10:00:10 run is 5 s late.
    let d = step(&mut s, at(15), &[]);
    assert!(d.create.is_none());
    assert_eq!(reasons(&d), ["MissedSchedule"]);
    assert_eq!(d.status.missed_runs, 1);
    assert_eq!(time_of(d.status.last_missed_time.as_deref()), Some(at(10)));
    let d = step(&mut s, at(16), &[]);
    assert!(d.create.is_none() && d.events.is_empty() && d.status.missed_runs == 1, "counted and said once");
    // Down again between two times, back within the deadline: that run, not lost.
    let d = step(&mut s, at(22), &[]);
    assert_eq!(d.create.unwrap().metadata.name, Some(format!("nightly-{}", at(20).unix_timestamp())));
    assert_eq!(d.status.missed_runs, 1);
}

#[test]
fn suspend_creates_nothing_and_a_resumed_schedule_runs_the_latest_missed_time() {
    let mut s = lts("*/10 * * * * *", serde_json::json!({"suspend": true}));
    let d = step(&mut s, at(35), &[]);
    assert!(d.create.is_none() && d.status.next_schedule_time.is_none());
    assert_eq!(d.status.message.as_deref(), Some("suspended: no new runs"));
    s.spec.suspend = false;
    let d = step(&mut s, at(36), &[]);
    assert_eq!(d.create.unwrap().metadata.name, Some(format!("nightly-{}", at(30).unix_timestamp())));
    assert_eq!(d.status.missed_runs, 2, "10:00:10 and 10:00:20 were skipped");
}

#[test]
fn finished_runs_go_to_history_and_beyond_the_limits_are_deleted() {
    let mut s =
        lts("*/10 * * * * *", serde_json::json!({"successfulRunsHistoryLimit": 2, "failedRunsHistoryLimit": 1}));
    let mut runs = Vec::new();
    for i in 1..=6 {
        let d = step(&mut s, at(10 * i), &runs);
        let phase = if i % 3 == 0 { Phase::Failed } else { Phase::Succeeded };
        runs.push(run_in(&d, phase, i as f64));
    }
    // Runs at 10..60 s: succeeded 10, 20, 40, 50; failed 30, 60.
    let d = step(&mut s, at(65), &runs);
    let name = |secs: i64| format!("nightly-{}", at(secs).unix_timestamp());
    let mut deleted = d.delete.clone();
    deleted.sort();
    assert_eq!(deleted, [name(10), name(20), name(30)], "the 2 newest passed and the newest failed are kept");
    let history: Vec<String> = d.status.history.iter().map(|r| r.name.clone().unwrap()).collect();
    assert_eq!(history, [60, 50, 40, 30, 20, 10].map(name), "newest first, kept after the LoadTests go");
    let last = d.status.last_run.clone().unwrap();
    assert_eq!((last.verdict.as_str(), last.p99.as_deref(), last.requests), ("Failed", Some("6ms"), 1000));
    assert_eq!(last.scheduled_time.as_deref(), Some("2026-12-01T10:01:00Z"));
    assert!(d.status.active.is_empty());

    // Once deleted, the history stays; the records are not added twice.
    let kept: Vec<LoadTest> =
        runs.into_iter().filter(|r| !deleted.contains(r.metadata.name.as_ref().unwrap())).collect();
    let d = step(&mut s, at(66), &kept);
    assert_eq!(d.status.history.len(), 6);
    assert!(d.delete.is_empty() && !reasons(&d).contains(&"RunFinished"));
}

/// #22: history limits that keep more LoadTests than the history holds (20) leave finished runs
/// older than its oldest record: they were announced once, when they finished, and are not
/// announced again (they were, with a `RunFinished` Event on every reconcile, forever).
#[test]
fn runs_kept_beyond_the_history_are_announced_once() {
    let mut s = lts("*/10 * * * * *", serde_json::json!({"successfulRunsHistoryLimit": 25}));
    let mut runs = Vec::new();
    let mut announced = 0;
    for i in 1..=23 {
        let d = step(&mut s, at(10 * i), &runs);
        announced += reasons(&d).iter().filter(|r| **r == "RunFinished").count();
        runs.push(run_in(&d, Phase::Succeeded, i as f64));
    }
    let d = step(&mut s, at(235), &runs);
    announced += reasons(&d).iter().filter(|r| **r == "RunFinished").count();
    assert_eq!(announced, 23, "each run once");
    assert_eq!(d.status.history.len(), stampede_api::SCHEDULE_HISTORY_LIMIT);
    assert!(d.delete.is_empty(), "25 may be kept");
    for later in [236, 237] {
        let d = step(&mut s, at(later), &runs);
        assert!(!reasons(&d).contains(&"RunFinished"), "{:?}", reasons(&d));
    }
}

#[test]
fn schedules_follow_cron_syntax_and_the_time_zone() {
    // 03:00 in Berlin is 02:00 UTC in winter.
    let berlin = CronSchedule::parse("0 3 * * *", Some("Europe/Berlin")).unwrap();
    assert_eq!(berlin.next_after(T0), Some(datetime!(2026-12-02 02:00:00 UTC)));
    let daily = CronSchedule::parse("@daily", None).unwrap();
    assert_eq!(daily.next_after(T0), Some(datetime!(2026-12-02 00:00:00 UTC)));
    let weekdays = CronSchedule::parse("30 9 * * MON-FRI", None).unwrap();
    // 2026-12-05 is a Saturday: after Friday 09:30 comes Monday 09:30.
    assert_eq!(weekdays.next_after(datetime!(2026-12-04 10:00:00 UTC)), Some(datetime!(2026-12-07 09:30:00 UTC)));

    for (schedule, zone, says) in [
        ("every minute", None, "spec.schedule `every minute` is not a cron schedule"),
        ("TZ=UTC 0 3 * * *", None, "set the time zone in spec.timeZone"),
        ("0 3 * * *", Some("Mars/Olympus"), "spec.timeZone `Mars/Olympus` is not a known time zone"),
    ] {
        let err = CronSchedule::parse(schedule, zone).unwrap_err();
        assert!(err.0.contains(says), "{err}");
        let mut s = lts(schedule, serde_json::json!({"timeZone": zone}));
        let d = step(&mut s, at(60), &[]);
        assert!(d.create.is_none());
        let valid = d.status.conditions.iter().find(|c| c.type_ == "Valid").unwrap();
        assert_eq!((valid.status.as_str(), valid.reason.as_str()), ("False", "InvalidSchedule"));
        assert_eq!(reasons(&d), ["InvalidSchedule"]);
        assert!(step(&mut s, at(61), &[]).events.is_empty(), "said once");
    }
}
