//! The pods that run a scenario's `setup` and `teardown` once: how one ended, as its report or
//! its Job says, in words for an Event and a condition, and the teardown that follows the end
//! of a run.

use std::time::Duration;

use stampede_api::{LoadTestStatus, OnceState, OnceStatus, Phase};
use stampede_core::Once;
use time::OffsetDateTime;

use super::decision::{Action, Decision, JobState, OnceSeen, TEARDOWN_TIMEOUT};
use super::stamp::{Stamp, fmt, parse};
use crate::conditions::Cond;

/// A run that ends in `decision` (it was not over `before`) runs its scenario's `teardown` once,
/// when it has one and its `setup` (if any) succeeded; otherwise the teardown is skipped,
/// saying why. Deleting everything waits for the teardown, whose pod reads the scenario and
/// uses the runners' ServiceAccount; the runners go at once.
pub(super) fn tear_down_after(before: Phase, decision: &mut Decision, now: OffsetDateTime) {
    let st = &mut decision.status;
    if before.is_finished() || !st.phase.is_finished() {
        return;
    }
    let Some(teardown) = st.teardown.as_mut().filter(|t| t.state == OnceState::Pending) else { return };
    if let Some(setup) = st.setup.as_ref().filter(|s| s.state != OnceState::Succeeded) {
        teardown.state = OnceState::Skipped;
        teardown.message = Some(format!("not run: the setup {}", once_state_words(setup.state)));
        return;
    }
    teardown.state = OnceState::Running;
    teardown.start_time = Some(fmt(now));
    let all = decision.actions.iter().position(|a| *a == Action::DeleteAll);
    if let Some(i) = all {
        decision.actions[i] = Action::DeleteRunners;
    }
    decision.actions.push(Action::StartOnce(Once::Teardown));
    decision.requeue = Some(Duration::from_secs(2));
}

fn once_state_words(state: OnceState) -> &'static str {
    match state {
        OnceState::Pending => "did not start",
        OnceState::Running => "did not finish",
        OnceState::Succeeded => "succeeded",
        OnceState::Failed => "failed",
        OnceState::Skipped => "was skipped",
    }
}

/// The teardown's end, when it came (its report, its pod's failure, or its timeout): the
/// status's `teardown`, `TeardownSucceeded`, and the Event to record. `None`: still running.
pub(super) fn teardown_ended(st: &mut LoadTestStatus, seen: &OnceSeen, stamp: Stamp) -> Option<Action> {
    let running = st.teardown.clone().unwrap_or_default();
    let started = running.start_time.as_deref().and_then(parse).unwrap_or(stamp.now);
    let ended = match once_ended("teardown", seen, &running) {
        Some(ended) => ended,
        None if stamp.now - started > TEARDOWN_TIMEOUT => OnceStatus {
            state: OnceState::Failed,
            message: Some(format!("did not finish within {}", stampede_model::Dur(TEARDOWN_TIMEOUT))),
            ..running.clone()
        },
        None => return None,
    };
    let ok = ended.state == OnceState::Succeeded;
    let note = once_note("teardown", &ended);
    let reason = if ok { "TeardownSucceeded" } else { "TeardownFailed" };
    stamp.set(&mut st.conditions, Cond::TeardownSucceeded, ok, if ok { "Succeeded" } else { reason }, &note);
    st.teardown = Some(OnceStatus { start_time: ended.start_time.clone().or(running.start_time), ..ended });
    Some(Action::Event { warning: !ok, reason: reason.into(), note })
}

/// How a once-run pod (`which`: `setup` or `teardown`, now `running`) ended, as observed: its
/// report, or its Job's failure when it failed without one. `None`: not known to have ended.
pub(super) fn once_ended(which: &str, seen: &OnceSeen, running: &OnceStatus) -> Option<OnceStatus> {
    match (&seen.report, &seen.job) {
        (Some(report), _) => Some(report.clone()),
        (None, Some(job)) if job.failed > 0 => {
            Some(OnceStatus { state: OnceState::Failed, message: Some(pod_failed(which, job)), ..running.clone() })
        }
        (None, _) => None,
    }
}

/// Why a once-run pod's Job failed without a report: the kubelet's words when it has some.
fn pod_failed(which: &str, job: &JobState) -> String {
    match job.failures.first() {
        Some(why) => format!("its pod failed without a report: {}", why.replace("runner 0", which)),
        None => "its pod failed without a report".into(),
    }
}

/// What a setup or teardown did, as an Event and a condition say it.
pub(super) fn once_note(which: &str, outcome: &OnceStatus) -> String {
    let mut note = match outcome.state {
        OnceState::Succeeded => format!("{which} succeeded"),
        _ => format!("{which} failed"),
    };
    note.push_str(&format!(": {} request(s), {} failed", outcome.requests, outcome.failures));
    if !outcome.values.is_empty() {
        note.push_str(&format!("; values: {}", outcome.values.join(", ")));
    }
    if let Some(why) = &outcome.message {
        note.push_str(&format!("; {why}"));
    }
    note
}
