//! The LoadTestSchedule as a pure function, modelled on the CronJob controller: from the
//! schedule and the LoadTests it owns, the next status and what to create, abort and delete.
//!
//! Missed schedule times follow CronJob's rules:
//! - Only the most recent schedule time that passed since the last run was created
//!   (`status.lastScheduleTime`, or the schedule's creation) is run; earlier ones are skipped.
//!   That is what happens after the operator was down, or `suspend` was set and cleared.
//! - With `startingDeadlineSeconds`, a run more than that late is not started: it is missed
//!   (`status.missedRuns`, a `MissedSchedule` Event) and the next schedule time is waited for.
//!   Without it there is no deadline.
//! - More than 100 schedule times passed: a `TooManyMissedTimes` Event says so (the most
//!   recent still runs, within the deadline).
//! - `Forbid` with a run in progress holds the due run back without consuming it: when the
//!   running one ends it starts, if still within the deadline.
//!
//! A run's LoadTest is named by its schedule time (`<schedule>-<unix seconds>`), so creating it
//! twice (e.g. by an operator that restarted between the create and the status write) finds it
//! already there instead of starting a second run.

use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::Invalid;
use crate::conditions::Cond;
use crate::lifecycle::Stamp;
use kube::Resource;
use stampede_api::{
    ConcurrencyPolicy, LoadTest, LoadTestSchedule, LoadTestScheduleStatus, Phase, RunRecord, SCHEDULE_HISTORY_LIMIT,
    SCHEDULE_LABEL, SCHEDULED_TIME_ANNOTATION, names,
};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// LoadTests that passed kept by default (`successfulRunsHistoryLimit`), as a CronJob's Jobs.
pub const DEFAULT_SUCCESSFUL_LIMIT: i32 = 3;
/// LoadTests that failed or were aborted kept by default (`failedRunsHistoryLimit`).
pub const DEFAULT_FAILED_LIMIT: i32 = 1;
/// Schedule times that may pass unrun before a `TooManyMissedTimes` Event.
pub const TOO_MANY_MISSED: usize = 100;
/// How often a run held back by `Forbid` looks again (the end of the run wakes it sooner).
const FORBID_RECHECK: Duration = Duration::from_secs(5);

/// What the shell observed.
#[derive(Clone, Debug)]
pub struct Observed {
    /// When the shell observed: schedule times are judged against it.
    pub now: OffsetDateTime,
    /// The LoadTests this schedule owns (by owner UID).
    pub runs: Vec<LoadTest>,
}

/// What the shell must do, in this order: create, abort, write the status, delete, Events.
#[derive(Clone, Debug)]
pub struct Decision {
    /// The schedule's next status.
    pub status: LoadTestScheduleStatus,
    /// A new run (its name is that of its schedule time: an existing one is that run).
    pub create: Option<LoadTest>,
    /// Runs to abort (`spec.abort`), for `Replace`.
    pub abort: Vec<String>,
    /// Finished runs beyond the history limits (their figures are in the status first).
    pub delete: Vec<String>,
    /// Events to record on the schedule, last.
    pub events: Vec<Event>,
    /// When to decide again at the latest: the next schedule time, or sooner while `Forbid`
    /// holds a run back (`None`: only when something changes).
    pub requeue: Option<Duration>,
}

/// An Event on the schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// A `Warning` Event, not a `Normal` one.
    pub warning: bool,
    /// The Event's reason, one CamelCase word (e.g. `Created`, `MissedSchedule`).
    pub reason: String,
    /// What happened, in words.
    pub note: String,
}

fn event(warning: bool, reason: &str, note: String) -> Event {
    Event { warning, reason: reason.into(), note }
}

/// A parsed schedule in its time zone.
#[derive(Clone, Debug)]
pub struct CronSchedule {
    cron: Cron,
    tz: jiff::tz::TimeZone,
}

impl CronSchedule {
    /// Parses `schedule` (5 fields as a CronJob, a macro such as `@daily`, or 6 fields with
    /// seconds first) in `time_zone` (IANA; default UTC). The error says what is wrong.
    pub fn parse(schedule: &str, time_zone: Option<&str>) -> Result<CronSchedule, Invalid> {
        let trimmed = schedule.trim();
        if trimmed.starts_with("TZ=") || trimmed.starts_with("CRON_TZ=") {
            return Err(Invalid(format!(
                "spec.schedule `{schedule}`: set the time zone in spec.timeZone, not in the schedule"
            )));
        }
        let parser = CronParser::builder().seconds(Seconds::Optional).year(Year::Disallowed).build();
        let cron = parser
            .parse(trimmed)
            .map_err(|e| Invalid(format!("spec.schedule `{schedule}` is not a cron schedule: {e}")))?;
        let tz = match time_zone {
            None | Some("") => jiff::tz::TimeZone::UTC,
            Some(name) => jiff::tz::TimeZone::get(name)
                .map_err(|e| Invalid(format!("spec.timeZone `{name}` is not a known time zone: {e}")))?,
        };
        Ok(CronSchedule { cron, tz })
    }

    fn zoned(&self, t: OffsetDateTime) -> Option<jiff::Zoned> {
        let ts = jiff::Timestamp::from_nanosecond(t.unix_timestamp_nanos()).ok()?;
        Some(ts.to_zoned(self.tz.clone()))
    }

    fn back(z: &jiff::Zoned) -> Option<OffsetDateTime> {
        OffsetDateTime::from_unix_timestamp_nanos(z.timestamp().as_nanosecond()).ok()
    }

    /// The first schedule time after `t`.
    pub fn next_after(&self, t: OffsetDateTime) -> Option<OffsetDateTime> {
        let z = self.zoned(t)?;
        Self::back(&self.cron.find_next_occurrence(&z, false).ok()?)
    }

    /// The schedule times in `(after, until]`, at most `limit + 1` of them (oldest first), and
    /// the most recent one (which may lie beyond the first `limit + 1`).
    pub fn due(&self, after: OffsetDateTime, until: OffsetDateTime, limit: usize) -> (usize, Option<OffsetDateTime>) {
        let Some(end) = self.zoned(until) else { return (0, None) };
        let latest = self.cron.find_previous_occurrence(&end, true).ok().and_then(|z| Self::back(&z));
        let Some(latest) = latest.filter(|l| *l > after) else { return (0, None) };
        let Some(start) = self.zoned(after) else { return (0, None) };
        let count = self
            .cron
            .clone()
            .iter_after(start)
            .map_while(|z| Self::back(&z))
            .take_while(|t| *t <= until)
            .take(limit + 1)
            .count();
        (count.max(1), Some(latest))
    }
}

fn fmt(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

fn parse(t: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(t, &Rfc3339).ok()
}

/// The name of the run for schedule time `at`: `<schedule>-<unix seconds>`, within the limit of
/// an object name.
pub fn run_name(schedule: &str, at: OffsetDateTime) -> String {
    names::fit(schedule, &format!("-{}", at.unix_timestamp()), names::OBJECT_MAX)
}

/// The LoadTest of the run at `at`: the template's spec and labels/annotations, owned by the
/// schedule, labelled with it and annotated with its schedule time.
pub fn run_loadtest(lts: &LoadTestSchedule, at: OffsetDateTime) -> LoadTest {
    let name = lts.metadata.name.clone().unwrap_or_default();
    let template = &lts.spec.template;
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels;
    labels.insert(SCHEDULE_LABEL.into(), names::label_value(&name));
    let mut annotations = meta.annotations;
    annotations.insert(SCHEDULED_TIME_ANNOTATION.into(), fmt(at));
    let mut lt = LoadTest::new(&run_name(&name, at), template.spec.clone());
    lt.metadata = ObjectMeta {
        name: Some(run_name(&name, at)),
        namespace: lts.metadata.namespace.clone(),
        labels: Some(labels),
        annotations: Some(annotations),
        owner_references: Some(vec![OwnerReference {
            api_version: LoadTestSchedule::api_version(&()).into_owned(),
            kind: LoadTestSchedule::kind(&()).into_owned(),
            name,
            uid: lts.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..ObjectMeta::default()
    };
    lt
}

/// When a run was scheduled: its annotation, else its creation.
fn scheduled_time(lt: &LoadTest) -> Option<OffsetDateTime> {
    lt.metadata.annotations.as_ref().and_then(|a| a.get(SCHEDULED_TIME_ANNOTATION)).and_then(|t| parse(t)).or_else(
        || {
            lt.metadata
                .creation_timestamp
                .as_ref()
                .and_then(|t| OffsetDateTime::from_unix_timestamp_nanos(t.0.as_nanosecond()).ok())
        },
    )
}

fn phase(lt: &LoadTest) -> Phase {
    lt.status.as_ref().map(|s| s.phase).unwrap_or_default()
}

/// The next status and actions for `lts`.
pub fn decide(lts: &LoadTestSchedule, obs: &Observed) -> Decision {
    let old = lts.status.clone().unwrap_or_default();
    let mut st = old.clone();
    let now = obs.now;
    let generation = lts.metadata.generation;
    let stamp = Stamp { now, generation };
    st.observed_generation = generation;
    let mut d = Decision { status: st, create: None, abort: vec![], delete: vec![], events: vec![], requeue: None };

    // Runs: finished ones into the history (newest first, bounded), then the limits.
    let mut runs: Vec<&LoadTest> = obs.runs.iter().collect();
    runs.sort_by_key(|lt| std::cmp::Reverse(scheduled_time(lt)));
    let (finished, active): (Vec<&LoadTest>, Vec<&LoadTest>) = runs.iter().partition(|lt| phase(lt).is_finished());
    record_finished(&mut d, &old, &finished);
    d.delete = beyond_limits(lts, &finished);
    d.status.active = active.iter().rev().map(|lt| lt.metadata.name.clone().unwrap_or_default()).collect();

    // The schedule.
    match CronSchedule::parse(&lts.spec.schedule, lts.spec.time_zone.as_deref()) {
        Ok(schedule) => {
            stamp.set(&mut d.status.conditions, Cond::Valid, true, "Valid", "the schedule and time zone are valid");
            if lts.spec.suspend {
                d.status.next_schedule_time = None;
                d.status.message = Some("suspended: no new runs".into());
            } else {
                run_when_due(&mut d, lts, &old, &schedule, &active, now);
            }
        }
        Err(Invalid(why)) => {
            let was_said = Cond::Valid.find(&old.conditions).is_some_and(|c| c.status == "False" && c.message == why);
            stamp.set(&mut d.status.conditions, Cond::Valid, false, "InvalidSchedule", &why);
            if !was_said {
                d.events.push(event(true, "InvalidSchedule", why.clone()));
            }
            d.status.message = Some(why);
            d.status.next_schedule_time = None;
        }
    }
    d.status.active_count = d.status.active.len() as i32;
    d
}

/// Finished runs not yet in the history go there (newest first, at most
/// [`SCHEDULE_HISTORY_LIMIT`]), each announced once with a `RunFinished` Event.
fn record_finished(d: &mut Decision, old: &LoadTestScheduleStatus, finished: &[&LoadTest]) {
    let st = &mut d.status;
    // A full history has forgotten runs older than its oldest record: those were announced
    // when they finished (with history limits adding up to more than the history holds, they
    // are still there, and would be announced again on every reconcile).
    let oldest_kept = (st.history.len() >= SCHEDULE_HISTORY_LIMIT)
        .then(|| st.history.iter().filter_map(|r| r.scheduled_time.as_deref().and_then(parse)).min())
        .flatten();
    for lt in finished {
        let name = lt.metadata.name.clone().unwrap_or_default();
        if st.history.iter().any(|r| r.name.as_deref() == Some(name.as_str()))
            || oldest_kept.is_some_and(|oldest| scheduled_time(lt).is_none_or(|t| t < oldest))
        {
            continue;
        }
        let Some(status) = lt.status.as_ref() else { continue };
        let record = RunRecord {
            name: Some(name.clone()),
            scheduled_time: scheduled_time(lt).map(fmt),
            ..RunRecord::of(status)
        };
        d.events.push(event(
            record.phase != Phase::Succeeded,
            "RunFinished",
            format!(
                "LoadTest {name}: {}{}",
                record.verdict,
                record.p99.as_ref().map(|p| format!(", p99 {p}")).unwrap_or_default()
            ),
        ));
        st.history.push(record);
    }
    st.history.sort_by_key(|r| std::cmp::Reverse(r.scheduled_time.as_deref().and_then(parse)));
    st.history.truncate(SCHEDULE_HISTORY_LIMIT);
    st.last_run = st.history.first().cloned();
    st.last_successful_time = st
        .history
        .iter()
        .find(|r| r.phase == Phase::Succeeded)
        .and_then(|r| r.completion_time.clone())
        .or(old.last_successful_time.clone());
}

/// Finished runs beyond the history limits (newest kept), to delete.
fn beyond_limits(lts: &LoadTestSchedule, finished: &[&LoadTest]) -> Vec<String> {
    let limit = |l: Option<i32>, default: i32| l.unwrap_or(default).max(0) as usize;
    let successful = limit(lts.spec.successful_runs_history_limit, DEFAULT_SUCCESSFUL_LIMIT);
    let failed = limit(lts.spec.failed_runs_history_limit, DEFAULT_FAILED_LIMIT);
    let passed = finished.iter().filter(|lt| phase(lt) == Phase::Succeeded);
    let not_passed = finished.iter().filter(|lt| phase(lt) != Phase::Succeeded);
    passed
        .skip(successful)
        .chain(not_passed.skip(failed))
        .map(|lt| lt.metadata.name.clone().unwrap_or_default())
        .collect()
}

/// Not suspended: the most recent schedule time due since the last one run or missed is run,
/// missed (past `startingDeadlineSeconds`) or held back (`Forbid`), as a CronJob's; then the
/// wake-up at the next schedule time.
fn run_when_due(
    d: &mut Decision,
    lts: &LoadTestSchedule,
    old: &LoadTestScheduleStatus,
    schedule: &CronSchedule,
    active: &[&LoadTest],
    now: OffsetDateTime,
) {
    let created = lts
        .metadata
        .creation_timestamp
        .as_ref()
        .and_then(|t| OffsetDateTime::from_unix_timestamp_nanos(t.0.as_nanosecond()).ok())
        .unwrap_or(now);
    // Times up to the last run created, or the last one missed, are done with.
    let since = [old.last_schedule_time.as_deref(), old.last_missed_time.as_deref()]
        .into_iter()
        .flatten()
        .filter_map(parse)
        .max()
        .unwrap_or(created);
    let (count, latest) = schedule.due(since, now, TOO_MANY_MISSED);
    d.status.message = None;
    if let Some(at) = latest {
        let late = now - at;
        let deadline = lts.spec.starting_deadline_seconds.map(|s| time::Duration::seconds(s.max(0)));
        if count > TOO_MANY_MISSED {
            let note = format!(
                "more than {TOO_MANY_MISSED} schedule times passed since {}; only the latest ({}) may run",
                fmt(since),
                fmt(at)
            );
            if old.message.as_deref() != Some(note.as_str()) {
                d.events.push(event(true, "TooManyMissedTimes", note));
            }
        }
        if deadline.is_some_and(|limit| late > limit) {
            d.status.missed_runs += count as u64;
            d.status.last_missed_time = Some(fmt(at));
            let note = format!(
                "missed the run at {}: {} s late, past startingDeadlineSeconds ({})",
                fmt(at),
                late.whole_seconds(),
                lts.spec.starting_deadline_seconds.unwrap_or_default()
            );
            d.events.push(event(true, "MissedSchedule", note));
        } else if !active.is_empty() && lts.spec.concurrency_policy == ConcurrencyPolicy::Forbid {
            let note = format!(
                "the run at {} waits: {} is still running (concurrencyPolicy Forbid)",
                fmt(at),
                d.status.active.join(", ")
            );
            if old.message.as_deref() != Some(note.as_str()) {
                d.events.push(event(false, "RunHeldBack", note.clone()));
            }
            d.status.message = Some(note);
            d.requeue = Some(FORBID_RECHECK);
        } else {
            start_run(d, lts, active, at, count);
        }
    }
    d.status.next_schedule_time = schedule.next_after(now).map(fmt);
    if let Some(next) = d.status.next_schedule_time.as_deref().and_then(parse) {
        let until: Duration = (next - now).try_into().unwrap_or(Duration::ZERO);
        d.requeue = Some(d.requeue.map_or(until, |r: Duration| r.min(until)));
    }
}

/// The run at `at` starts (the latest of `count` due times; the others are missed); with
/// `Replace`, the runs in progress are aborted.
fn start_run(d: &mut Decision, lts: &LoadTestSchedule, active: &[&LoadTest], at: OffsetDateTime, count: usize) {
    if lts.spec.concurrency_policy == ConcurrencyPolicy::Replace {
        for lt in active.iter().filter(|lt| !lt.spec.abort) {
            let name = lt.metadata.name.clone().unwrap_or_default();
            let note = format!("aborting LoadTest {name} for the run at {} (concurrencyPolicy Replace)", fmt(at));
            d.events.push(event(false, "Replaced", note));
            d.abort.push(name);
        }
    }
    let lt = run_loadtest(lts, at);
    let name = lt.metadata.name.clone().unwrap_or_default();
    if count > 1 {
        d.status.missed_runs += (count - 1) as u64;
    }
    d.events.push(event(false, "Created", format!("created LoadTest {name} for the run at {}", fmt(at))));
    d.status.last_schedule_time = Some(fmt(at));
    if !d.status.active.contains(&name) {
        d.status.active.push(name);
    }
    d.create = Some(lt);
}
