//! The end of a run: the finished status (its partial results, `Finished` and `Passed`), the
//! report written for it, the cleanup its policy asks for, and the tests that fail before
//! they start (an invalid spec, children the API server refused).

use stampede_api::{
    CleanupMode, LoadTest, LoadTestStatus, Phase, RERUN_ANNOTATION, RunnerCounts, RunnerReport, RunnerState, Summary,
};
use stampede_core::Plan;
use stampede_model::report::Report;
use time::OffsetDateTime;

use super::decision::{Action, Decision, JobState};
use super::once::tear_down_after;
use super::stamp::{Stamp, fmt};
use crate::conditions::Cond;
use crate::results;

/// Sets `Finished` and `Passed` on a finished status (once: their times are those of the end).
pub(super) fn conclude(st: &mut LoadTestStatus, stamp: Stamp) {
    if !st.phase.is_finished() || Cond::Finished.is_true(&st.conditions) {
        return;
    }
    let phase = format!("{:?}", st.phase);
    let message = st.message.clone().unwrap_or_default();
    stamp.set(&mut st.conditions, Cond::Finished, true, &phase, &message);
    let failed_reason =
        |type_: Cond| type_.find(&st.conditions).filter(|c| c.status == "False").map(|c| c.reason.clone());
    let reason = match st.phase {
        Phase::Succeeded => "Passed".to_string(),
        Phase::Aborted => "Aborted".to_string(),
        _ => failed_reason(Cond::Valid)
            .or_else(|| failed_reason(Cond::Completed))
            .or_else(|| failed_reason(Cond::ThresholdsPassed))
            .or_else(|| failed_reason(Cond::LoadDelivered))
            .unwrap_or_else(|| "Failed".into()),
    };
    let message = if st.phase == Phase::Succeeded { "every threshold passed".to_string() } else { message };
    stamp.set(&mut st.conditions, Cond::Passed, st.phase == Phase::Succeeded, &reason, &message);
}

/// The spec is invalid (`problems`): the test fails at once with `Valid=False` and an Event.
pub(super) fn invalid(mut st: LoadTestStatus, stamp: Stamp, message: String, problems: &str) -> Decision {
    stamp.set(&mut st.conditions, Cond::Valid, false, "InvalidSpec", problems);
    st.phase = Phase::Failed;
    st.message = Some(message.clone());
    st.completion_time = Some(fmt(stamp.now));
    let event = Action::Event { warning: true, reason: "InvalidSpec".into(), note: message };
    Decision { status: st, actions: vec![event], requeue: None }
}

/// The API server refused one of the LoadTest's children as invalid (`message` says which and
/// why): retrying cannot help, so the test fails with `Valid=False` (reason `Rejected`) and a
/// Warning Event, instead of a retry every few seconds that nobody sees.
pub fn rejected(lt: &LoadTest, now: OffsetDateTime, message: &str) -> Decision {
    let mut st = lt.status.clone().unwrap_or_default();
    let stamp = Stamp { now, generation: lt.metadata.generation };
    st.observed_generation = lt.metadata.generation;
    let message = format!("the API server refused the test's objects: {message}");
    // Refused at the start of a run: a fixed spec runs again.
    if st.phase == Phase::Pending {
        st.run = Some(st.run.unwrap_or(1));
        st.run_generation = lt.metadata.generation;
        st.run_spec = Some(stampede_api::spec_digest(&lt.spec));
        st.rerun_token = lt.metadata.annotations.as_ref().and_then(|a| a.get(RERUN_ANNOTATION)).cloned();
    }
    stamp.set(&mut st.conditions, Cond::Valid, false, "Rejected", &message);
    st.phase = Phase::Failed;
    st.message = Some(message.clone());
    st.completion_time = Some(fmt(now));
    let event = Action::Event { warning: true, reason: "Rejected".into(), note: message };
    let before = lt.status.as_ref().map(|s| s.phase).unwrap_or_default();
    let mut decision = Decision { status: st, actions: vec![event, Action::DeleteAll], requeue: None };
    tear_down_after(before, &mut decision, now);
    conclude(&mut decision.status, stamp);
    decision
}

pub(super) fn counts(desired: i32, reports: &[Option<RunnerReport>], job: Option<&JobState>) -> RunnerCounts {
    let state = |s: RunnerState| reports.iter().flatten().filter(|r| r.state == s).count() as i32;
    RunnerCounts {
        desired,
        ready: reports.iter().flatten().filter(|r| r.state != RunnerState::Failed).count() as i32,
        running: state(RunnerState::Running),
        succeeded: job.map(|j| j.succeeded).unwrap_or(0).max(state(RunnerState::Done)),
        failed: job.map(|j| j.failed).unwrap_or(0).max(state(RunnerState::Failed)),
    }
}

/// Ends the test with `phase`, keeping the partial results of runners that finished (in the
/// status and in the report it asks to write).
#[allow(clippy::too_many_arguments, reason = "how it ends (phase, reason, message) and what the report needs")]
pub(super) fn finish(
    st: &mut LoadTestStatus,
    plan: &Plan,
    done: &[&RunnerReport],
    phase: Phase,
    reason: &str,
    message: String,
    stamp: Stamp,
    ctx: &results::ReportContext<'_>,
    actions: &mut Vec<Action>,
) {
    if !done.is_empty()
        && let Ok(merged) = results::final_summary(plan, done, ctx)
    {
        st.summary = Some(Summary { is_final: false, ..merged.summary });
        st.thresholds = merged.verdicts;
        actions.push(write_report(&merged.report));
    }
    st.phase = phase;
    st.message = Some(message.clone());
    st.completion_time = Some(fmt(stamp.now));
    stamp.set(&mut st.conditions, Cond::Completed, false, reason, &message);
}

/// The largest report a ConfigMap is given (its limit is 1 MiB with the object's metadata).
pub const REPORT_LIMIT_BYTES: usize = 900 * 1024;

/// The report as JSON, within [`REPORT_LIMIT_BYTES`]. When too large, parts go in this order
/// until it fits, each named in `omitted`: the timeline's per-step points, then every other
/// timeline point, then the timeline, the error samples, then halves of the runner rows (the
/// status keeps every runner's counts), of the capacity curve, of the checks and of the steps.
/// The totals and the threshold verdicts always stay: a run is never left without its report.
pub fn write_report(report: &Report) -> Action {
    let size = |r: &Report| serde_json::to_string(r).map(|t| t.len()).unwrap_or(usize::MAX);
    if size(report) <= REPORT_LIMIT_BYTES {
        return Action::WriteReport(serde_json::to_string(report).unwrap_or_default());
    }
    let mut r = report.clone();
    if r.timeline.iter().any(|p| !p.steps.is_empty()) {
        r.timeline.iter_mut().for_each(|p| p.steps.clear());
        r.omitted.push("the timeline's per-step points".into());
    }
    let points = r.timeline.len();
    while size(&r) > REPORT_LIMIT_BYTES && r.timeline.len() > 1 {
        r.timeline = r.timeline.iter().skip(1).step_by(2).cloned().collect();
    }
    if r.timeline.len() < points {
        r.omitted.push(format!("{} of {points} timeline points", points - r.timeline.len()));
    }
    let cut = |r: &mut Report, what: &str, len: fn(&Report) -> usize, keep: fn(&mut Report, usize)| {
        let all = len(r);
        while size(r) > REPORT_LIMIT_BYTES && len(r) > 0 {
            keep(r, len(r) / 2);
        }
        if len(r) < all {
            r.omitted.push(format!("{what} {}-{} of {all}", len(r) + 1, all));
        }
    };
    cut(&mut r, "timeline points", |r| r.timeline.len(), |r, n| r.timeline.truncate(n));
    cut(&mut r, "error samples", |r| r.error_samples.len(), |r, n| r.error_samples.truncate(n));
    cut(&mut r, "runner rows", |r| r.runners.len(), |r, n| r.runners.truncate(n));
    cut(
        &mut r,
        "capacity plateaus",
        |r| r.capacity.as_ref().map_or(0, |c| c.plateaus.len()),
        |r, n| r.capacity.iter_mut().for_each(|c| c.plateaus.truncate(n)),
    );
    cut(&mut r, "checks", |r| r.checks.len(), |r, n| r.checks.truncate(n));
    cut(&mut r, "steps", |r| r.steps.len(), |r, n| r.steps.truncate(n));
    Action::WriteReport(serde_json::to_string(&r).unwrap_or_default())
}

pub(super) fn cleanup(lt: &LoadTest, phase: Phase) -> Vec<Action> {
    let mode = if phase == Phase::Succeeded { lt.spec.cleanup.on_success } else { lt.spec.cleanup.on_failure };
    match mode {
        CleanupMode::None => vec![],
        CleanupMode::Runners => vec![Action::DeleteRunners],
        CleanupMode::All => vec![Action::DeleteAll],
    }
}
