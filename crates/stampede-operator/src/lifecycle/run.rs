//! A valid test in progress: [`Run`], one decision about it, with a method for each phase of
//! the lifecycle (setup, start, abort, a runner's failure, the run, its verdict).

use std::sync::Arc;
use std::time::Duration;

use stampede_api::{LoadTest, LoadTestStatus, OnceState, OnceStatus, Phase, RunnerReport, RunnerState};
use stampede_core::{Once, Plan};
use stampede_model::report::Report;
use time::OffsetDateTime;

use super::decision::{
    ABORT_GRACE, Action, DEFAULT_START_TIMEOUT, Decision, FAILURE_GRACE, IMAGE_PULL_GRACE, JobState, Observed,
    PodProblem, RUN_TIMEOUT_MARGIN, START_DELAY,
};
use super::end::{cleanup, finish, write_report};
use super::once::{once_ended, once_note};
use super::stamp::{Stamp, condition_since, duration_spec, fmt, fmt_micros, parse};
use crate::conditions::Cond;
use crate::results;

/// Whether every runner's last word is in: each wrote its final result (done, or failed with
/// its partial figures), or the Job says every runner pod has ended. A pod that is still
/// stopping (SIGTERM: it writes its partial results first) is waited for.
fn settled(runners: i32, finals: usize, job: Option<&JobState>) -> bool {
    finals >= runners.max(0) as usize || job.is_some_and(|j| j.all_ended(runners))
}

/// The runners (by index) that have no final result among `reports`, as a status says it:
/// `runner 1, runner 2`.
fn without_result(runners: i32, finals: &[&RunnerReport]) -> String {
    (0..runners.max(1) as u32)
        .filter(|i| !finals.iter().any(|r| r.index == *i))
        .map(|i| format!("runner {i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One decision about a valid run in progress: what it was given, and the status and actions
/// it builds. Each phase of the lifecycle is a method, ending the decision or passing it on.
pub(super) struct Run<'a> {
    lt: &'a LoadTest,
    obs: &'a Observed,
    plan: Arc<Plan>,
    ctx: results::ReportContext<'a>,
    st: LoadTestStatus,
    actions: Vec<Action>,
    stamp: Stamp,
    runners: i32,
    /// Runners that finished.
    done: Vec<&'a RunnerReport>,
    /// Runners that failed (or were stopped), with their partial results when they had some.
    failed: Vec<&'a RunnerReport>,
    /// Every final report, done or failed.
    finals: Vec<&'a RunnerReport>,
    /// Final reports with figures: what a test that ends early keeps.
    measured: Vec<&'a RunnerReport>,
}

impl<'a> Run<'a> {
    pub(super) fn new(
        lt: &'a LoadTest,
        obs: &'a Observed,
        plan: Arc<Plan>,
        ctx: results::ReportContext<'a>,
        st: LoadTestStatus,
        stamp: Stamp,
        runners: i32,
    ) -> Run<'a> {
        let reports = || obs.reports.iter().flatten();
        let done: Vec<&RunnerReport> = reports().filter(|r| r.state == RunnerState::Done).collect();
        let failed: Vec<&RunnerReport> = reports().filter(|r| r.state == RunnerState::Failed).collect();
        let finals: Vec<&RunnerReport> = done.iter().chain(failed.iter()).copied().collect();
        let measured = finals.iter().copied().filter(|r| r.result.is_some()).collect();
        Run { lt, obs, plan, ctx, st, actions: Vec::new(), stamp, runners, done, failed, finals, measured }
    }

    fn event(&mut self, warning: bool, reason: &str, note: String) {
        self.actions.push(Action::Event { warning, reason: reason.into(), note });
    }

    /// The decision as it stands, looked at again after `requeue`.
    fn end(self, requeue: Option<Duration>) -> Decision {
        Decision { status: self.st, actions: self.actions, requeue }
    }

    /// Ends the run with `phase`, keeping the partial results of `reports` (see [`finish`]).
    fn finished(mut self, reports: &[&RunnerReport], phase: Phase, reason: &str, message: &str) -> Self {
        let (plan, stamp) = (self.plan.clone(), self.stamp);
        finish(&mut self.st, &plan, reports, phase, reason, message.to_string(), stamp, &self.ctx, &mut self.actions);
        self
    }

    /// Adds a Warning Event.
    fn warning(mut self, reason: &str, note: String) -> Self {
        self.event(true, reason, note);
        self
    }

    /// Adds `actions`.
    fn then(mut self, actions: Vec<Action>) -> Self {
        self.actions.extend(actions);
        self
    }

    pub(super) fn decide(mut self) -> Decision {
        self.baseline_condition();
        self.spec_change_condition();
        if self.st.phase == Phase::Pending {
            return self.initialize();
        }
        let now = self.stamp.now;
        // The common start instant has passed: the runners are running.
        if let Some(start_at) = self.st.start_at.as_deref().and_then(parse)
            && now >= start_at
            && self.st.phase != Phase::Running
        {
            self.st.phase = Phase::Running;
            self.st.start_time = self.st.start_at.clone();
            self.stamp.set(&mut self.st.conditions, Cond::Started, true, "Started", "runners started together");
            self.st.message = Some("running".into());
            self.event(false, "Started", format!("{} runner(s) started", self.runners));
        }
        if self.lt.spec.abort {
            return self.abort();
        }
        if self.st.setup.as_ref().is_some_and(|s| s.state != OnceState::Succeeded) {
            return self.set_up();
        }
        // A runner's result cannot be read: it never will be, so the test fails now.
        if !self.obs.unreadable.is_empty() {
            let message = format!("cannot read runner results: {}", self.obs.unreadable.join("; "));
            let (measured, cleanup) = (self.measured.clone(), cleanup(self.lt, Phase::Failed));
            return self
                .finished(&measured, Phase::Failed, "ResultsInvalid", &message)
                .warning("ResultsInvalid", message)
                .then(cleanup)
                .end(None);
        }
        let job_failed = self.obs.job.as_ref().is_some_and(|j| j.failed > 0);
        if job_failed || !self.failed.is_empty() {
            return self.runner_failed();
        }
        match self.st.start_at.as_deref().and_then(parse) {
            None => self.wait_for_runners(),
            Some(start_at) if now < start_at => self.end(Some((start_at - now).try_into().unwrap_or(Duration::ZERO))),
            Some(start_at) => self.running(start_at),
        }
    }

    /// `BaselineReady` from what the shell found of `spec.baseline`.
    fn baseline_condition(&mut self) {
        let (Some(baseline), Some(found)) = (&self.lt.spec.baseline, &self.obs.baseline) else { return };
        let was_unavailable = Cond::BaselineReady.is_false(&self.st.conditions);
        match found {
            Ok(_) => {
                let message = format!("{} has a report", baseline.describe());
                self.stamp.set(&mut self.st.conditions, Cond::BaselineReady, true, "Found", &message);
            }
            Err(why) => {
                let message = format!(
                    "baseline {}: {why}; relative thresholds fail unless it has one when this run ends",
                    baseline.describe()
                );
                self.stamp.set(&mut self.st.conditions, Cond::BaselineReady, false, "BaselineUnavailable", &message);
                if !was_unavailable {
                    self.event(true, "BaselineUnavailable", message);
                }
            }
        }
    }

    /// A spec change during a run (other than `abort`, which acts at once) waits for the next
    /// run: `SpecApplied=False`, said once.
    fn spec_change_condition(&mut self) {
        let generation = self.lt.metadata.generation;
        let Some(started_from) = self.st.run_generation else { return };
        if !super::live::spec_changed(self.lt, &self.st) || self.lt.spec.abort {
            return;
        }
        let was_said = Cond::SpecApplied.is_false(&self.st.conditions);
        let message = format!(
            "the spec changed (generation {}) during the run of generation {started_from}: this run finishes on \
             the spec it started with ({} runner(s), its stored scenario); the change applies to the next run",
            generation.unwrap_or_default(),
            self.runners
        );
        self.stamp.set(&mut self.st.conditions, Cond::SpecApplied, false, "SpecChangedDuringRun", &message);
        if !was_said {
            self.event(true, "SpecChangedDuringRun", message);
        }
    }

    /// Pending and valid: create the runners; with a `setup`, first the pod that runs it once
    /// (the runners follow when it succeeded).
    fn initialize(mut self) -> Decision {
        self.stamp.set(&mut self.st.conditions, Cond::Valid, true, "Valid", "the scenario is valid");
        self.st.phase = Phase::Initializing;
        let pending = || Some(OnceStatus::default());
        self.st.setup = if self.plan.setup.flow.is_empty() { None } else { pending() };
        self.st.teardown = if self.plan.teardown.flow.is_empty() { None } else { pending() };
        self.actions.push(Action::ApplyChildren);
        if let Some(setup) = &mut self.st.setup {
            setup.state = OnceState::Running;
            setup.start_time = Some(fmt(self.stamp.now));
            self.actions.push(Action::StartOnce(Once::Setup));
            self.st.message = Some("running the scenario's setup once".into());
            self.event(false, "Initializing", "running setup once, then creating the runners".into());
            return self.end(Some(Duration::from_secs(2)));
        }
        self.st.message = Some(format!("starting {} runner(s)", self.runners));
        self.event(false, "Initializing", format!("creating {} runner(s)", self.runners));
        self.end(Some(Duration::from_secs(5)))
    }

    /// The setup pod runs: once it reported success, the runners are created (they read its
    /// values); a failed step, a failed pod or the start timeout fail the test before any load.
    fn set_up(mut self) -> Decision {
        let now = self.stamp.now;
        let running = self.st.setup.clone().unwrap_or_default();
        let ended = match once_ended("setup", &self.obs.once.setup, &running) {
            Some(ended) => ended,
            None => {
                let since = condition_since(&self.st.conditions, Cond::Valid).unwrap_or(now);
                let limit = duration_spec(self.lt.spec.start_timeout.as_deref()).unwrap_or(DEFAULT_START_TIMEOUT);
                if now - since <= limit {
                    return self.end(Some(Duration::from_secs(2)));
                }
                let why = format!("did not finish within the start timeout of {}", stampede_model::Dur(limit));
                OnceStatus { state: OnceState::Failed, message: Some(why), ..running.clone() }
            }
        };
        let note = self.setup_ended(ended);
        if self.st.setup.as_ref().is_some_and(|s| s.state == OnceState::Succeeded) {
            self.st.message = Some(format!("setup succeeded; starting {} runner(s)", self.runners));
            self.actions.push(Action::StartRunners);
            return self.end(Some(Duration::from_secs(5)));
        }
        let message = format!("{note}: no load was sent");
        let cleanup = cleanup(self.lt, Phase::Failed);
        self.finished(&[], Phase::Failed, "SetupFailed", &message)
            .then(vec![Action::DeleteRunners])
            .then(cleanup)
            .end(None)
    }

    /// Records how the setup ended (`ended`): `.status.setup`, `SetupSucceeded` and its Event
    /// (a Warning when it failed, whose note says why). Returns that note.
    fn setup_ended(&mut self, ended: OnceStatus) -> String {
        let running = self.st.setup.clone().unwrap_or_default();
        let ok = ended.state == OnceState::Succeeded;
        let note = once_note("setup", &ended);
        self.st.setup = Some(OnceStatus { start_time: ended.start_time.clone().or(running.start_time), ..ended });
        let reason = if ok { "SetupSucceeded" } else { "SetupFailed" };
        self.stamp.set(&mut self.st.conditions, Cond::SetupSucceeded, ok, if ok { "Succeeded" } else { reason }, &note);
        if ok {
            self.event(false, reason, note.clone());
        } else {
            self.event(true, reason, format!("{note}: no load was sent"));
        }
        note
    }

    /// `spec.abort`: ends at once before the start; after it, once every runner's partial
    /// results are in (each runner counted once), or after ABORT_GRACE, naming those missing.
    ///
    /// A setup that ended before the abort was seen ends as it did: one that succeeded (its
    /// report says so, or its pod's Job succeeded, which it does only once it reported success)
    /// is torn down after the abort like any other run. A setup still running is stopped (its
    /// pod deleted with the runners) and counts as failed: no teardown follows it.
    fn abort(mut self) -> Decision {
        if let Some(running) = self.st.setup.clone().filter(|s| !s.state.is_final()) {
            let seen = &self.obs.once.setup;
            let ended = once_ended("setup", seen, &running).or_else(|| {
                seen.job.as_ref().filter(|j| j.succeeded > 0).map(|_| OnceStatus {
                    state: OnceState::Succeeded,
                    message: Some("its pod succeeded (its report was not read before the abort)".into()),
                    ..running.clone()
                })
            });
            if let Some(ended) = ended {
                self.setup_ended(ended);
            }
        }
        let now = self.stamp.now;
        let started = self.st.start_at.is_some();
        let settled = settled(self.runners, self.finals.len(), self.obs.job.as_ref());
        let waited_too_long =
            condition_since(&self.st.conditions, Cond::Aborting).is_some_and(|t| now - t > ABORT_GRACE);
        if !started || settled || waited_too_long {
            let mut message = "aborted by spec.abort".to_string();
            if started && !settled {
                let missing = without_result(self.runners, &self.finals);
                message.push_str(&format!("; no result from {missing} within {}", stampede_model::Dur(ABORT_GRACE)));
            }
            if let Some(setup) = self.st.setup.as_mut().filter(|s| !s.state.is_final()) {
                setup.state = OnceState::Failed;
                setup.message = Some("stopped by spec.abort before it finished".into());
            }
            let measured = self.measured.clone();
            return self
                .finished(&measured, Phase::Aborted, "Aborted", &message)
                .then(vec![Action::DeleteRunners])
                .warning("Aborted", "the test was aborted; partial results are in status".into())
                .end(None);
        }
        self.stamp.set(&mut self.st.conditions, Cond::Aborting, true, "AbortRequested", "waiting for runners to stop");
        self.st.message = Some("aborting: waiting for runners to stop".into());
        self.end(Some(Duration::from_secs(1)))
    }

    /// A runner failed. The test fails; first the other runners are given time to stop and
    /// report what they measured (the Job controller stops them once the Job failed), so that
    /// the status keeps every partial result. Not forever: FAILURE_GRACE at most.
    fn runner_failed(mut self) -> Decision {
        let now = self.stamp.now;
        let settled = settled(self.runners, self.finals.len(), self.obs.job.as_ref());
        let waited_too_long =
            condition_since(&self.st.conditions, Cond::Stopping).is_some_and(|t| now - t > FAILURE_GRACE);
        if !settled && !waited_too_long {
            let why = "a runner failed; waiting for the others' partial results";
            self.stamp.set(&mut self.st.conditions, Cond::Stopping, true, "RunnerFailed", why);
            self.st.message = Some("a runner failed; waiting for the other runners to report".into());
            return self.end(Some(Duration::from_secs(1)));
        }
        // Pod failures first (OOMKilled, exit codes); a runner's own words when it said more.
        let reported: Vec<String> = self.failed.iter().map(|r| format!("runner {}:", r.index)).collect();
        let pods = self.obs.job.as_ref().map(|j| j.failures.as_slice()).unwrap_or_default();
        let mut why: Vec<String> =
            pods.iter().filter(|f| !reported.iter().any(|p| f.starts_with(p.as_str()))).cloned().collect();
        why.extend(
            self.failed.iter().map(|r| format!("runner {}: {}", r.index, r.message.clone().unwrap_or_default())),
        );
        if !settled {
            let missing = without_result(self.runners, &self.finals);
            why.push(format!("no result from {missing} within {}", stampede_model::Dur(FAILURE_GRACE)));
        }
        let message =
            format!("runner failed: {}", if why.is_empty() { "a runner pod failed".into() } else { why.join("; ") });
        let (measured, cleanup) = (self.measured.clone(), cleanup(self.lt, Phase::Failed));
        self.finished(&measured, Phase::Failed, "RunnerFailed", &message)
            .warning("RunnerFailed", message)
            .then(cleanup)
            .end(None)
    }

    /// Before the start: once every runner is ready, the common start instant; meanwhile,
    /// runner pods that cannot start are named, and those that never will (or the start
    /// timeout) fail the test.
    fn wait_for_runners(mut self) -> Decision {
        let (now, runners, ready) = (self.stamp.now, self.runners, self.st.runners.ready);
        if ready >= runners {
            let at = now + START_DELAY;
            self.st.start_at = Some(fmt_micros(at));
            let message = format!("{runners} runner(s) ready");
            self.stamp.set(&mut self.st.conditions, Cond::RunnersReady, true, "AllReady", &message);
            self.st.message = Some(format!("all {runners} runner(s) ready; starting at {}", fmt(at)));
            self.event(false, "StartScheduled", format!("all runners ready; start at {}", fmt_micros(at)));
            return self.end(Some(START_DELAY));
        }
        // Runners are created once the setup (if any) succeeded.
        let since = condition_since(&self.st.conditions, Cond::SetupSucceeded)
            .or_else(|| condition_since(&self.st.conditions, Cond::Valid))
            .unwrap_or(now);
        let problems = self.obs.job.as_ref().map(|j| j.not_starting.as_slice()).unwrap_or_default();
        if !problems.is_empty() {
            return self.not_starting(problems, since);
        }
        let limit = duration_spec(self.lt.spec.start_timeout.as_deref()).unwrap_or(DEFAULT_START_TIMEOUT);
        if now - since > limit {
            let message =
                format!("only {ready} of {runners} runner(s) were ready after {}", stampede_model::Dur(limit));
            let done = self.done.clone();
            return self
                .finished(&done, Phase::Failed, "StartTimeout", &message)
                .then(vec![Action::DeleteRunners])
                .warning("StartTimeout", message)
                .end(None);
        }
        let message = format!("{ready} of {runners} ready");
        self.stamp.set(&mut self.st.conditions, Cond::RunnersReady, false, "Waiting", &message);
        self.end(Some(Duration::from_secs(5)))
    }

    /// Runner pods that cannot start are named at once; those that cannot heal (or an image
    /// that has not pulled for IMAGE_PULL_GRACE since the runners were created) fail the test
    /// without waiting for its start timeout.
    fn not_starting(mut self, problems: &[PodProblem], since: OffsetDateTime) -> Decision {
        let now = self.stamp.now;
        let text = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
        let hopeless = problems
            .iter()
            .find(|p| p.is_permanent())
            .or_else(|| problems.iter().find(|p| p.is_image_pull() && now - since > IMAGE_PULL_GRACE));
        if let Some(p) = hopeless {
            self.stamp.set(&mut self.st.conditions, Cond::RunnersReady, false, &p.reason, &text);
            let done = self.done.clone();
            let message = format!("runner pods cannot start: {text}");
            return self
                .finished(&done, Phase::Failed, &p.reason, &message)
                .then(vec![Action::DeleteRunners])
                .warning("RunnersNotStarting", message)
                .end(None);
        }
        let said = Cond::RunnersReady.find(&self.st.conditions).is_some_and(|c| c.message == text);
        self.stamp.set(&mut self.st.conditions, Cond::RunnersReady, false, &problems[0].reason, &text);
        self.st.message = Some(format!("waiting for runner pods that cannot start yet: {text}"));
        if !said {
            self.event(true, "RunnersNotStarting", text);
        }
        self.end(Some(Duration::from_secs(5)))
    }

    /// After the start: a capacity search's answer so far; every runner done: the verdict; the
    /// run timeout; else the live summary.
    fn running(mut self, start_at: OffsetDateTime) -> Decision {
        let now = self.stamp.now;
        let reports: Vec<&RunnerReport> = self.obs.reports.iter().flatten().collect();
        // A capacity search: the plateaus every runner reported, judged; once its stop rule
        // holds, `done` tells the runners to stop (and stays so). A plateau that cannot be
        // merged cannot be judged: the search fails, saying why, rather than a verdict over
        // every plateau together.
        let capacity = match results::capacity(&self.plan, &reports, self.runners as usize, self.ctx.baseline) {
            Ok(capacity) => capacity,
            Err(e) => {
                let message = format!("cannot merge runner results: capacity search: {e}");
                return self
                    .finished(&[], Phase::Failed, "ResultsInvalid", &message)
                    .warning("ResultsInvalid", message)
                    .then(vec![Action::DeleteRunners])
                    .end(None);
            }
        };
        if let Some((found, _)) = &capacity {
            self.capacity_status(found.clone());
        }
        let live = super::live::decide_live(self.lt, Some(&self.plan), &mut self.st, self.stamp);
        self.actions.extend(live);
        if self.done.len() >= self.runners as usize {
            return self.complete(capacity.map(|(_, answer)| answer));
        }
        let plan = &self.plan;
        let limit = duration_spec(self.lt.spec.run_timeout.as_deref()).unwrap_or_else(|| {
            plan.planned_duration().unwrap_or(Duration::ZERO) + plan.graceful_stop() + RUN_TIMEOUT_MARGIN
        });
        if now - start_at > limit {
            let message = format!("the run passed its timeout of {}", stampede_model::Dur(limit));
            let measured = self.measured.clone();
            return self
                .finished(&measured, Phase::Failed, "RunTimeout", &message)
                .then(vec![Action::DeleteRunners])
                .warning("RunTimeout", message)
                .end(None);
        }
        if let Some(live) = self.obs.live.as_ref().filter(|live| live.summary.requests > 0) {
            self.st.summary = Some(live.summary.clone());
            self.st.thresholds.clone_from(&live.thresholds);
        }
        self.end(Some(Duration::from_secs(5)))
    }

    /// `.status.capacity` from the search so far; `done` once its stop rule holds (said once,
    /// with a CapacityFound Event, and kept).
    fn capacity_status(&mut self, mut found: stampede_api::CapacityStatus) {
        match self.st.capacity.as_ref().filter(|c| c.done) {
            Some(before) => {
                found.done = true;
                found.done_at = before.done_at.clone();
                found.limited_by = found.limited_by.or_else(|| before.limited_by.clone());
            }
            None if found.done => {
                found.done_at = Some(fmt_micros(self.stamp.now));
                let note = format!(
                    "capacity {}: {}",
                    found.text.clone().unwrap_or_else(|| "none found".into()),
                    found.limited_by.clone().unwrap_or_default()
                );
                self.event(false, "CapacityFound", note);
            }
            None => {}
        }
        self.st.capacity = Some(found);
    }

    /// Every runner finished: the merged results, the verdicts and the phase.
    fn complete(mut self, capacity: Option<stampede_model::report::CapacityResult>) -> Decision {
        let results::Merged { summary, mut verdicts, mut report } =
            match results::final_summary(&self.plan, &self.done, &self.ctx) {
                Ok(merged) => merged,
                Err(e) => {
                    let message = format!("cannot merge runner results: {e}");
                    return self
                        .finished(&[], Phase::Failed, "ResultsInvalid", &message)
                        .warning("ResultsInvalid", message)
                        .end(None);
                }
            };
        if let Some(answer) = capacity {
            // Judged at the capacity (or, without one, at the first plateau), not over every
            // plateau's rates together.
            if let Some(p) = answer.verdict_plateau() {
                verdicts = p.thresholds.clone();
            }
            report.thresholds = verdicts.clone();
            report.run.schedule = None;
            report.capacity = Some(answer);
        }
        self.actions.push(write_report(&report));
        let failed: Vec<&str> = verdicts.iter().filter(|v| !v.passed).map(|v| v.threshold.as_str()).collect();
        let failed = failed.join(", ");
        self.st.summary = Some(summary);
        self.st.thresholds = verdicts.clone();
        let thresholds_passed = failed.is_empty();
        let reason = if thresholds_passed { "Passed" } else { "ThresholdsFailed" };
        self.stamp.set(&mut self.st.conditions, Cond::ThresholdsPassed, thresholds_passed, reason, &failed);
        let limited = self.load_delivered(&report);
        let passed = thresholds_passed && limited.is_none();
        self.stamp.set(&mut self.st.conditions, Cond::Completed, true, "Completed", "all runners finished");
        self.saturation_condition();
        self.st.phase = if passed { Phase::Succeeded } else { Phase::Failed };
        self.st.completion_time = Some(fmt(self.stamp.now));
        self.st.message = Some(match (&limited, thresholds_passed) {
            (_, false) => format!("thresholds failed: {failed}"),
            (Some(why), true) => {
                format!("every threshold passed, but the load asked for was not delivered ({why}): not a pass")
            }
            (None, true) => "all thresholds passed".into(),
        });
        if passed {
            self.event(false, "Succeeded", "the test finished and every threshold passed".into());
        } else if !thresholds_passed {
            self.event(true, "ThresholdsFailed", format!("thresholds failed: {failed}"));
        }
        let then = cleanup(self.lt, self.st.phase);
        self.actions.extend(then);
        self.end(None)
    }

    /// `LoadDelivered` for an open model. An undelivered load does not pass: its thresholds
    /// judged a lighter load (unless `undeliveredLoad: warn`); returns why, when it counts.
    fn load_delivered(&mut self, report: &Report) -> Option<String> {
        let undelivered = report.undelivered();
        if report.run.schedule.is_some() {
            let (ok, reason) = if undelivered.is_none() { (true, "Delivered") } else { (false, "GeneratorLimited") };
            let message = undelivered.as_deref().unwrap_or_default();
            self.stamp.set(&mut self.st.conditions, Cond::LoadDelivered, ok, reason, message);
        }
        let limited =
            undelivered.filter(|_| self.plan.undelivered_load == stampede_model::scenario::UndeliveredLoad::Fail);
        if let Some(note) = undelivered_note(report, &limited) {
            self.event(true, "GeneratorLimited", note);
        }
        limited
    }

    /// `GeneratorSaturated`: a runner that could not keep up makes the figures suspect; the
    /// verdict stands.
    fn saturation_condition(&mut self) {
        let saturated: Vec<String> = self
            .done
            .iter()
            .filter_map(|r| r.saturated.as_ref().map(|why| format!("runner {}: {why}", r.index)))
            .collect();
        let reason = if saturated.is_empty() { "KeptUp" } else { "Saturated" };
        let text = saturated.join("; ");
        self.stamp.set(&mut self.st.conditions, Cond::GeneratorSaturated, !saturated.is_empty(), reason, &text);
        if !saturated.is_empty() {
            self.event(true, "GeneratorSaturated", text);
        }
    }
}

/// The Warning Event's note for a load that was not delivered, when it changes the verdict.
fn undelivered_note(report: &Report, limited: &Option<String>) -> Option<String> {
    let why = limited.as_ref()?;
    let saturated = report.run.saturated.as_ref().map(|s| format!("; {s}")).unwrap_or_default();
    Some(format!("the load asked for was not delivered: {why}{saturated}"))
}
