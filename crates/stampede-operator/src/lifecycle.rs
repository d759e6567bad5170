//! The LoadTest lifecycle as a pure function: from the LoadTest and what was observed of
//! its children, the next status and the actions the shell must take.
//!
//! `Pending → Initializing → Running → Succeeded | Failed | Aborted`

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use stampede_api::{
    CleanupMode, HISTORY_LIMIT, LoadTest, LoadTestStatus, OnceState, OnceStatus, Phase, RERUN_ANNOTATION, RunRecord,
    RunnerCounts, RunnerReport, RunnerState, Summary,
};
use stampede_core::{Once, Plan};
use stampede_model::report::Report;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::Invalid;
use crate::conditions::Cond;
use crate::results;

/// How far ahead of "all ready" the common start instant is set.
pub const START_DELAY: Duration = Duration::from_secs(3);
/// Default longest wait for runners to be ready.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(300);
/// Margin added to the planned run length for the default run timeout.
pub const RUN_TIMEOUT_MARGIN: Duration = Duration::from_secs(300);
/// Longest wait for runners to report after an abort.
pub const ABORT_GRACE: Duration = Duration::from_secs(30);
/// After a runner failed, how long the others are waited for: the Job controller deletes their
/// pods once the Job failed, and each reports its partial results on SIGTERM within the pod's
/// grace period (30 s by default).
pub const FAILURE_GRACE: Duration = Duration::from_secs(45);

/// What the shell observed of a LoadTest's children.
#[derive(Clone, Debug)]
pub struct Observed {
    pub now: OffsetDateTime,
    /// The scenario compiled by the engine, or why it is invalid.
    pub plan: Scenario,
    /// Runner reports by index (`None`: nothing reported yet).
    pub reports: Vec<Option<RunnerReport>>,
    /// Result ConfigMaps whose report cannot be read, e.g. `runner 2: …` (see [`read_report`]).
    pub unreadable: Vec<String>,
    pub job: Option<JobState>,
    /// With `spec.baseline`: its report, or why it cannot be had (not found, not finished, no
    /// report, not a report). `None`: not looked at.
    pub baseline: Option<Result<Report, Invalid>>,
    /// The pods of the scenario's `setup` and `teardown` (looked at while they matter).
    pub once: OncePods,
}

/// What the shell saw of the pods that run `setup` and `teardown` once.
#[derive(Clone, Debug, Default)]
pub struct OncePods {
    pub setup: OnceSeen,
    pub teardown: OnceSeen,
}

/// One once-run pod: its report (this run's only, see [`read_once`]) and its Job.
#[derive(Clone, Debug, Default)]
pub struct OnceSeen {
    pub report: Option<OnceStatus>,
    pub job: Option<JobState>,
}

/// A setup or teardown pod's report from the once ConfigMap; `None` when it is another run's
/// (or does not parse: the pod's Job then says how it ended).
pub fn read_once(text: &str, run: &str) -> Option<OnceStatus> {
    let report: OnceStatus = serde_json::from_str(text).ok()?;
    (report.run.as_deref() == Some(run)).then_some(OnceStatus { run: None, ..report })
}

/// How long a teardown pod may take before the test stops waiting for it (a setup pod has the
/// test's start timeout).
pub const TEARDOWN_TIMEOUT: Duration = Duration::from_secs(300);

/// The LoadTest's scenario, as far as the shell read it.
#[derive(Clone, Debug)]
pub enum Scenario {
    Compiled(Arc<Plan>),
    /// Why it is invalid.
    Invalid(String),
    /// Not read: a finished test needs neither its scenario nor its children.
    NotRead,
}

impl From<Result<Arc<Plan>, Invalid>> for Scenario {
    fn from(r: Result<Arc<Plan>, Invalid>) -> Self {
        match r {
            Ok(plan) => Scenario::Compiled(plan),
            Err(Invalid(problems)) => Scenario::Invalid(problems),
        }
    }
}

/// Reads runner `index`'s report from its result ConfigMap. A report that does not parse is
/// an error naming the runner: the test fails at once instead of waiting for a report that
/// will never be readable.
///
/// A report stamped with another run (`run`: [`stampede_api::run_id`]) is none of this run's:
/// `Ok(None)`, as if nothing were reported yet. It is left by a LoadTest of the same name that
/// was deleted, or by an earlier run of this one, and is never merged.
pub fn read_report(index: u32, text: &str, run: &str) -> Result<Option<RunnerReport>, Invalid> {
    let report: RunnerReport = serde_json::from_str(text)
        .map_err(|e| Invalid(format!("runner {index}: its result is not a runner report ({e})")))?;
    Ok((report.run.as_deref() == Some(run)).then_some(report))
}

/// Why a runner pod failed, as status messages say it: `runner 2: OOMKilled (exit 137)`.
/// `terminated` is the container's termination reason and exit code, `pod_reason` the pod's.
pub fn pod_failure(index: &str, terminated: Option<(Option<&str>, i32)>, pod_reason: Option<&str>) -> String {
    let why = match (terminated, pod_reason) {
        (Some((reason, exit)), _) => format!("{} (exit {exit})", reason.unwrap_or("Error")),
        (None, Some(reason)) => reason.to_string(),
        (None, None) => "failed".into(),
    };
    format!("runner {index}: {why}")
}

/// The runner Job's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobState {
    pub active: i32,
    /// Pods being deleted that have not ended yet (`status.terminating`): a runner stopped by
    /// SIGTERM writes its partial results before its pod ends.
    pub terminating: i32,
    pub succeeded: i32,
    pub failed: i32,
    /// Why runner pods failed, e.g. `runner 2: OOMKilled (exit 137)`.
    pub failures: Vec<String>,
    /// Runner pods that cannot start (looked at while runners are not all ready).
    pub not_starting: Vec<PodProblem>,
}

/// Why a runner pod is not starting, as the kubelet or the scheduler says it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodProblem {
    /// The runner's index (the pod's completion index).
    pub runner: String,
    /// The kubelet's or scheduler's reason: `ErrImagePull`, `ImagePullBackOff`,
    /// `InvalidImageName`, `CreateContainerConfigError`, `CrashLoopBackOff`, `Unschedulable`…
    pub reason: String,
    pub message: String,
}

/// How long runner images may fail to pull before the test fails (rather than at its start
/// timeout): the kubelet retries with back-off, and a registry that refuses or does not know
/// the image rarely changes its mind.
pub const IMAGE_PULL_GRACE: Duration = Duration::from_secs(30);

impl PodProblem {
    /// From a pod's container waiting state (`reason`, `message`) and its `PodScheduled`
    /// condition when False (`reason`, `message`); `None` when neither says anything is wrong
    /// (`ContainerCreating` and `PodInitializing` are progress, not problems).
    pub fn of(runner: &str, waiting: Option<(&str, &str)>, unscheduled: Option<(&str, &str)>) -> Option<PodProblem> {
        let (reason, message) = match (waiting, unscheduled) {
            (Some((reason, message)), _) if !matches!(reason, "ContainerCreating" | "PodInitializing") => {
                (reason, message)
            }
            (_, Some((reason, message))) => (reason, message),
            _ => return None,
        };
        Some(PodProblem { runner: runner.into(), reason: reason.into(), message: message.into() })
    }

    /// The image cannot be pulled (yet).
    pub fn is_image_pull(&self) -> bool {
        matches!(self.reason.as_str(), "ErrImagePull" | "ImagePullBackOff")
    }

    /// It cannot heal by itself: an invalid image name, an image that must not be pulled, or a
    /// registry that says the image does not exist or may not be pulled.
    pub fn is_permanent(&self) -> bool {
        let m = self.message.to_ascii_lowercase();
        matches!(self.reason.as_str(), "InvalidImageName" | "ErrImageNeverPull")
            || (self.is_image_pull()
                && ["not found", "manifest unknown", "repository does not exist", "pull access denied"]
                    .iter()
                    .any(|w| m.contains(w)))
    }
}

impl std::fmt::Display for PodProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "runner {}: {}", self.runner, self.reason)?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl JobState {
    /// No runner pod runs or is stopping any more, and each of `runners` ended: a runner that
    /// has not written its result by now never will (e.g. OOMKilled).
    pub fn all_ended(&self, runners: i32) -> bool {
        self.active == 0 && self.terminating == 0 && self.failed + self.succeeded >= runners
    }
}

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

/// Something the shell must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Create or update the children (server-side apply).
    ApplyChildren,
    /// Delete the runner Job and its pods.
    DeleteRunners,
    /// Delete every child except the LoadTest.
    DeleteAll,
    /// Delete the LoadTest (TTL after finished).
    DeleteLoadTest,
    /// Record an Event on the LoadTest.
    Event { warning: bool, reason: String, note: String },
    /// Write the merged report (JSON) to the LoadTest's report ConfigMap.
    WriteReport(String),
    /// Create the Job that runs the scenario's `setup` or `teardown` once.
    StartOnce(Once),
    /// Create the runners (after the scenario's `setup` succeeded): their result ConfigMaps and
    /// Job.
    StartRunners,
}

/// The outcome of one lifecycle step.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub status: LoadTestStatus,
    pub actions: Vec<Action>,
    pub requeue: Option<Duration>,
}

fn fmt(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

fn parse(t: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(t, &Rfc3339).ok()
}

fn duration_spec(text: Option<&str>) -> Option<Duration> {
    text.and_then(|t| stampede_model::parse_duration(t).ok())
}

/// The instant and generation every condition set by one decision carries (of a LoadTest or a
/// LoadTestSchedule).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stamp {
    pub(crate) now: OffsetDateTime,
    pub(crate) generation: Option<i64>,
}

impl Stamp {
    /// Sets condition `type_` to `ok` with `reason` and `message`, keeping its transition
    /// time when its status does not change.
    pub(crate) fn set(self, conds: &mut Vec<Condition>, type_: Cond, ok: bool, reason: &str, message: &str) {
        let status = if ok { "True" } else { "False" };
        let now_time = Time(jiff_now(self.now));
        match conds.iter_mut().find(|c| c.type_ == type_.as_str()) {
            Some(c) => {
                if c.status != status {
                    c.last_transition_time = now_time;
                }
                c.status = status.into();
                c.reason = reason.into();
                c.message = message.into();
                c.observed_generation = self.generation;
            }
            None => conds.push(Condition {
                type_: type_.as_str().into(),
                status: status.into(),
                reason: reason.into(),
                message: message.into(),
                last_transition_time: now_time,
                observed_generation: self.generation,
            }),
        }
    }
}

fn jiff_now(now: OffsetDateTime) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_nanosecond(now.unix_timestamp_nanos())
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

fn condition_since(conds: &[Condition], type_: Cond) -> Option<OffsetDateTime> {
    type_
        .find(conds)
        .filter(|c| c.status == "True")
        .and_then(|c| OffsetDateTime::from_unix_timestamp_nanos(c.last_transition_time.0.as_nanosecond()).ok())
}

/// The next status and actions for `lt`. A finished test carries the conditions `Finished`
/// (True) and `Passed` (True when it succeeded), for `kubectl wait --for=condition=…`.
pub fn decide(lt: &LoadTest, obs: &Observed) -> Decision {
    let mut decision = decide_run(lt, obs);
    let before = lt.status.as_ref().map(|s| s.phase).unwrap_or_default();
    tear_down_after(before, &mut decision, obs.now);
    conclude(&mut decision.status, Stamp { now: obs.now, generation: lt.metadata.generation });
    decision
}

/// A run that ends in `decision` (it was not over `before`) runs its scenario's `teardown` once,
/// when it has one and its `setup` (if any) succeeded; otherwise the teardown is skipped,
/// saying why. Deleting everything waits for the teardown, whose pod reads the scenario and
/// uses the runners' ServiceAccount; the runners go at once.
fn tear_down_after(before: Phase, decision: &mut Decision, now: OffsetDateTime) {
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

/// Sets `Finished` and `Passed` on a finished status (once: their times are those of the end).
fn conclude(st: &mut LoadTestStatus, stamp: Stamp) {
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
        (Some(now), Some(ran)) if now != ran => {
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
    let ctx = results::ReportContext {
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
    let mut actions = Vec::new();
    if st.teardown.as_ref().is_some_and(|t| t.state == OnceState::Running) {
        let stamp = Stamp { now, generation: lt.metadata.generation };
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

/// The teardown's end, when it came (its report, its pod's failure, or its timeout): the
/// status's `teardown`, `TeardownSucceeded`, and the Event to record. `None`: still running.
fn teardown_ended(st: &mut LoadTestStatus, seen: &OnceSeen, stamp: Stamp) -> Option<Action> {
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
fn once_ended(which: &str, seen: &OnceSeen, running: &OnceStatus) -> Option<OnceStatus> {
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
fn once_note(which: &str, outcome: &OnceStatus) -> String {
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

/// The spec is invalid (`problems`): the test fails at once with `Valid=False` and an Event.
fn invalid(mut st: LoadTestStatus, stamp: Stamp, message: String, problems: &str) -> Decision {
    stamp.set(&mut st.conditions, Cond::Valid, false, "InvalidSpec", problems);
    st.phase = Phase::Failed;
    st.message = Some(message.clone());
    st.completion_time = Some(fmt(stamp.now));
    let event = Action::Event { warning: true, reason: "InvalidSpec".into(), note: message };
    Decision { status: st, actions: vec![event], requeue: None }
}

/// One decision about a valid run in progress: what it was given, and the status and actions
/// it builds. Each phase of the lifecycle is a method, ending the decision or passing it on.
struct Run<'a> {
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
    fn new(
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

    fn decide(mut self) -> Decision {
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
        if generation.is_none_or(|g| g == started_from) || self.lt.spec.abort {
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
        if let Ok(live) = results::live_summary(&reports)
            && live.requests > 0
        {
            self.st.summary = Some(live);
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

/// RFC 3339 with microseconds: runners start at this instant.
fn fmt_micros(t: OffsetDateTime) -> String {
    let t = t.replace_nanosecond(t.nanosecond() / 1000 * 1000).unwrap_or(t);
    fmt(t)
}

fn counts(desired: i32, reports: &[Option<RunnerReport>], job: Option<&JobState>) -> RunnerCounts {
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
fn finish(
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

fn cleanup(lt: &LoadTest, phase: Phase) -> Vec<Action> {
    let mode = if phase == Phase::Succeeded { lt.spec.cleanup.on_success } else { lt.spec.cleanup.on_failure };
    match mode {
        CleanupMode::None => vec![],
        CleanupMode::Runners => vec![Action::DeleteRunners],
        CleanupMode::All => vec![Action::DeleteAll],
    }
}
