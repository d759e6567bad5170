//! What one lifecycle decision is given and what it returns: what the shell observed of a
//! LoadTest's children (read from the runners' and once-run pods' reports and their Jobs), the
//! actions it must take and the next status, with the waits and grace periods the lifecycle
//! keeps.

use std::sync::Arc;
use std::time::Duration;

use stampede_api::{LoadTestStatus, OnceStatus, RunnerReport};
use stampede_core::{Once, Plan};
use stampede_model::report::Report;
use time::OffsetDateTime;

use crate::Invalid;

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
    /// When the shell observed: timeouts are measured from it and times in the status stamped
    /// with it.
    pub now: OffsetDateTime,
    /// The scenario compiled by the engine, or why it is invalid.
    pub plan: Scenario,
    /// Runner reports by index (`None`: nothing reported yet).
    pub reports: Vec<Option<RunnerReport>>,
    /// The runners' interim figures merged (by the shell's [`crate::results::LiveMerge`] of the
    /// run, which decodes each report once); `None` when they cannot be merged or were not.
    pub live: Option<crate::results::LiveFigures>,
    /// Result ConfigMaps whose report cannot be read, e.g. `runner 2: …` (see [`read_report`]).
    pub unreadable: Vec<String>,
    /// The counters of this run's runner Job (`None`: there is none, or it was not looked at).
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
    /// The `setup` pod (looked at while `status.setup` is `Running`).
    pub setup: OnceSeen,
    /// The `teardown` pod (looked at while `status.teardown` is `Running`).
    pub teardown: OnceSeen,
}

/// One once-run pod: its report (this run's only, see [`read_once`]) and its Job.
#[derive(Clone, Debug, Default)]
pub struct OnceSeen {
    /// Its report (`None`: none yet, or another run's, or one that does not parse).
    pub report: Option<OnceStatus>,
    /// The counters of its Job (`None`: this run has none).
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
    /// Valid: the plan the runners run.
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
    /// Pods pending or running (`status.active`).
    pub active: i32,
    /// Pods being deleted that have not ended yet (`status.terminating`): a runner stopped by
    /// SIGTERM writes its partial results before its pod ends.
    pub terminating: i32,
    /// Pods that succeeded (`status.succeeded`).
    pub succeeded: i32,
    /// Pods that failed (`status.failed`).
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
    /// The kubelet's or scheduler's message (may be empty).
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
    Event {
        /// A `Warning` Event, not a `Normal` one.
        warning: bool,
        /// The Event's reason, one CamelCase word (e.g. `Started`, `InvalidSpec`).
        reason: String,
        /// What happened, in words.
        note: String,
    },
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
    /// The next status (written when it differs from the current one, as a conditional write).
    pub status: LoadTestStatus,
    /// What the shell must do: creations first, then the status write, then Events and
    /// deletions.
    pub actions: Vec<Action>,
    /// When to decide again at the latest (`None`: only when something changes).
    pub requeue: Option<Duration>,
}
