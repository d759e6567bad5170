//! The decision's entry points: [`decide`] takes a LoadTest to its next status, through a new
//! run when one is asked for ([`rerun_reason`]), the [`Run`] of a valid test in progress, or
//! what remains of a finished one (its teardown, its TTL).

use std::time::Duration;

use stampede_api::{HISTORY_LIMIT, LoadTest, LoadTestStatus, OnceState, Phase, RERUN_ANNOTATION, RunRecord};

use super::decision::{Action, Decision, Observed, Scenario};
use super::end::{cleanup, conclude, counts, invalid};
use super::once::{tear_down_after, teardown_ended};
use super::run::Run;
use super::stamp::{Stamp, parse};
use crate::Invalid;
use crate::results;

/// The next status and actions for `lt`. A finished test carries the conditions `Finished`
/// (True) and `Passed` (True when it succeeded), for `kubectl wait --for=condition=…`.
pub fn decide(lt: &LoadTest, obs: &Observed) -> Decision {
    let mut decision = decide_run(lt, obs);
    let before = lt.status.as_ref().map(|s| s.phase).unwrap_or_default();
    tear_down_after(before, &mut decision, obs.now);
    conclude(&mut decision.status, Stamp { now: obs.now, generation: lt.metadata.generation });
    decision
}

/// Why a finished LoadTest runs again, if it does: a new value of the annotation
/// [`RERUN_ANNOTATION`], or a spec generation other than the one the last run started from (an
/// edit, e.g. from a Git sync). Not while `spec.abort` is set.
pub fn rerun_reason(lt: &LoadTest) -> Option<String> {
    let st = lt.status.as_ref()?;
    if !st.phase.is_finished() || lt.spec.abort || st.teardown.as_ref().is_some_and(|t| t.state == OnceState::Running) {
        return None;
    }
    if let Some(token) = lt.metadata.annotations.as_ref().and_then(|a| a.get(RERUN_ANNOTATION))
        && st.rerun_token.as_ref() != Some(token)
    {
        return Some(format!("annotation {RERUN_ANNOTATION}={token}"));
    }
    match (lt.metadata.generation, st.run_generation) {
        (Some(now), Some(ran)) if super::live::spec_changed(lt, st) => {
            Some(format!("the spec changed (generation {now}; the last run was of generation {ran})"))
        }
        _ => None,
    }
}

/// A new run: the finished one's summary goes to the front of `.status.history` (at most
/// [`HISTORY_LIMIT`]), and the status starts again from `Pending` with the next run number; the
/// next step replaces the previous run's children and starts the runners.
fn rerun(lt: &LoadTest, why: String) -> Decision {
    let old = lt.status.clone().unwrap_or_default();
    let mut history = old.history.clone();
    history.insert(0, RunRecord::of(&old));
    history.truncate(HISTORY_LIMIT);
    let next = old.run.unwrap_or(1) + 1;
    let status = LoadTestStatus {
        phase: Phase::Pending,
        observed_generation: lt.metadata.generation,
        run: Some(next),
        message: Some(format!("run {next} starts: {why}")),
        history,
        ..LoadTestStatus::default()
    };
    let event = Action::Event { warning: false, reason: "Rerun".into(), note: format!("run {next} starts: {why}") };
    Decision { status, actions: vec![event], requeue: Some(Duration::ZERO) }
}

fn decide_run(lt: &LoadTest, obs: &Observed) -> Decision {
    let mut st = lt.status.clone().unwrap_or_default();
    let generation = lt.metadata.generation;
    let stamp = Stamp { now: obs.now, generation };
    if let Some(why) = rerun_reason(lt) {
        return rerun(lt, why);
    }
    // The run starts from this spec and this rerun token (recorded before validation: a spec
    // fixed after it was found invalid runs again).
    if st.phase == Phase::Pending {
        st.run = Some(st.run.unwrap_or(1));
        st.run_generation = generation;
        st.run_spec = Some(stampede_api::spec_digest(&lt.spec));
        st.rerun_token = lt.metadata.annotations.as_ref().and_then(|a| a.get(RERUN_ANNOTATION)).cloned();
    }
    // A run keeps the runner count it started with (recorded in the status at the start): the
    // API server accepts a change of spec.runners during a run, but no runner is added or
    // removed, and waiting for the new count would hang the test until its run timeout.
    let runners = match lt.status.as_ref() {
        Some(s) if s.phase != Phase::Pending && s.runners.desired > 0 => s.runners.desired,
        _ => lt.spec.runners.max(1),
    };
    st.observed_generation = generation;
    // Finished: only cleanup and TTL remain. The runner counts stay as they were when the
    // test ended: cleanup deletes the Job and may delete the reports they were counted from.
    if st.phase.is_finished() {
        return decide_finished(lt, st, obs);
    }
    st.runners = counts(runners, &obs.reports, obs.job.as_ref());
    let plan = match &obs.plan {
        Scenario::Compiled(plan) => plan.clone(),
        // Only a finished test is observed without its scenario; wait for the next look.
        Scenario::NotRead => return Decision { status: st, actions: vec![], requeue: Some(Duration::from_secs(5)) },
        Scenario::Invalid(problems) => return invalid(st, stamp, format!("invalid scenario: {problems}"), problems),
    };
    if lt.spec.baseline.is_none()
        && let Some(t) = plan.thresholds.iter().find(|t| t.relative.is_some())
    {
        let problems = format!("threshold `{}` is relative to a baseline: set spec.baseline", t.source);
        return invalid(st, stamp, format!("invalid spec: {problems}"), &problems);
    }
    let loadtest = format!(
        "{}/{}",
        lt.metadata.namespace.as_deref().unwrap_or_default(),
        lt.metadata.name.as_deref().unwrap_or_default()
    );
    // The start instant as it is now; a start announced later in this decision is no result's.
    let start_at = st.start_at.clone();
    let live = st.live.as_ref().map(|l| l.changes.clone()).unwrap_or_default();
    let ctx = results::ReportContext {
        live: &live,
        loadtest: &loadtest,
        start_at: start_at.as_deref(),
        baseline: match &obs.baseline {
            Some(Ok(r)) => Ok(r),
            Some(Err(Invalid(why))) => Err(why.as_str()),
            None => Err("spec.baseline is not set"),
        },
    };
    Run::new(lt, obs, plan, ctx, st, stamp, runners).decide()
}

/// A finished test: its teardown awaited, then deleted once its `ttlSecondsAfterFinished` has
/// passed.
fn decide_finished(lt: &LoadTest, mut st: LoadTestStatus, obs: &Observed) -> Decision {
    let now = obs.now;
    let stamp = Stamp { now, generation: lt.metadata.generation };
    // The run is over: a new `spec.live` is refused (and starts no new run).
    let mut actions = super::live::decide_live(lt, None, &mut st, stamp);
    if st.teardown.as_ref().is_some_and(|t| t.state == OnceState::Running) {
        match teardown_ended(&mut st, &obs.once.teardown, stamp) {
            None => return Decision { status: st, actions, requeue: Some(Duration::from_secs(2)) },
            Some(event) => {
                actions.push(event);
                // What the cleanup policy deletes waited for the teardown.
                actions.extend(cleanup(lt, st.phase));
            }
        }
    }
    let mut requeue = None;
    if let (Some(ttl), Some(done)) = (lt.spec.ttl_seconds_after_finished, st.completion_time.as_deref().and_then(parse))
    {
        let expires = done + Duration::from_secs(ttl.max(0) as u64);
        if now >= expires {
            actions.retain(|a| matches!(a, Action::Event { .. }));
            actions.push(Action::DeleteLoadTest);
        } else {
            requeue = Some((expires - now).try_into().unwrap_or(Duration::from_secs(1)));
        }
    }
    Decision { status: st, actions, requeue }
}

/// Whether `new` differs from `old` in the runners' counts alone (`status.runners` and the
/// `RunnersReady` condition's message, "7 of 1000 ready"), and the phase is not finished: a
/// change the shell may hold back for a moment. Each runner's write makes a reconcile, and each
/// status write goes to every runner's watch of its LoadTest: a thousand runners getting ready
/// one by one would otherwise make a million watch events. A change of anything else (a start
/// instant, a phase, a condition's status or reason, the figures) is never held back.
pub fn only_counts_changed(old: &LoadTestStatus, new: &LoadTestStatus) -> bool {
    if new.phase.is_finished() || old == new {
        return false;
    }
    let ready = crate::conditions::Cond::RunnersReady;
    let (Some(was), Some(now)) = (ready.find(&old.conditions), ready.find(&new.conditions)) else {
        return false;
    };
    if (&was.status, &was.reason) != (&now.status, &now.reason) {
        return false;
    }
    let mut same = new.clone();
    same.runners = old.runners.clone();
    if let Some(c) = same.conditions.iter_mut().find(|c| c.type_ == now.type_) {
        *c = was.clone();
    }
    &same == old
}
