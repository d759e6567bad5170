//! The `LoadTestSchedule` custom resource: LoadTests created from a template on a cron
//! schedule, and the figures of past runs.

use std::collections::BTreeMap;

use crate::loadtest::{LoadTestSpec, RunRecord};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Runs a LoadTest on a schedule, as a CronJob runs a Job: it creates LoadTests from `template`,
/// named by schedule time and owned by it, keeps the last few by the history limits, and keeps
/// the figures of past runs in `.status.history`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "stampede.dev",
    version = "v1alpha1",
    kind = "LoadTestSchedule",
    namespaced,
    shortname = "lts",
    status = "LoadTestScheduleStatus",
    printcolumn = r#"{"name":"Schedule","type":"string","jsonPath":".spec.schedule"}"#,
    printcolumn = r#"{"name":"Suspend","type":"boolean","jsonPath":".spec.suspend"}"#,
    printcolumn = r#"{"name":"Active","type":"integer","jsonPath":".status.activeCount"}"#,
    printcolumn = r#"{"name":"Last Run","type":"date","jsonPath":".status.lastScheduleTime"}"#,
    printcolumn = r#"{"name":"Last Verdict","type":"string","jsonPath":".status.lastRun.verdict"}"#,
    printcolumn = r#"{"name":"Last P99","type":"string","jsonPath":".status.lastRun.p99"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct LoadTestScheduleSpec {
    /// When to run, in cron syntax: `minute hour day-of-month month day-of-week` as a CronJob
    /// (e.g. `0 3 * * *`), or a macro (`@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`).
    /// A sixth field in front gives seconds (`*/20 * * * * *`): finer than a CronJob, for
    /// trying schedules out.
    #[schemars(length(min = 1))]
    pub schedule: String,
    /// The time zone of `schedule`, an IANA name such as `Europe/Berlin` (default: UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// True: no new runs are created (a run in progress goes on).
    #[serde(default)]
    pub suspend: bool,
    /// When a run is due while an earlier one is still running: `Allow` starts it anyway,
    /// `Forbid` (the default) holds it back until the running one ends (missed if that is past
    /// `startingDeadlineSeconds`), `Replace` aborts the running one (it ends Aborted, with
    /// partial results) and starts the new one.
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,
    /// A run that could not start on time (the operator was down, or `Forbid` held it back)
    /// still starts if it is at most this late; later than that it is missed (counted, with an
    /// Event). Unset: no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub starting_deadline_seconds: Option<i64>,
    /// How many LoadTests that passed are kept (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub successful_runs_history_limit: Option<i32>,
    /// How many LoadTests that failed or were aborted are kept (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub failed_runs_history_limit: Option<i32>,
    /// The LoadTest each run creates.
    pub template: LoadTestTemplate,
}

/// What a scheduled run's LoadTest is made of.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadTestTemplate {
    /// Labels and annotations for the LoadTest (its name is the schedule's and the time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMeta>,
    /// The LoadTest's spec.
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "has(self.scenario) != has(self.scenarioFrom)",
        "message": "set exactly one of template.spec.scenario and template.spec.scenarioFrom"
    }]))]
    pub spec: LoadTestSpec,
}

/// Labels and annotations of a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMeta {
    /// Labels of each LoadTest created.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations of each LoadTest created.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// What happens when a run is due while another is running.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Start the new run anyway, beside the running one.
    Allow,
    /// Hold the new run back until the running one ends (missed if that is past
    /// `startingDeadlineSeconds`).
    #[default]
    Forbid,
    /// Abort the running one (it ends `Aborted`, with partial results) and start the new run.
    Replace,
}

/// Observed state of a LoadTestSchedule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadTestScheduleStatus {
    /// The spec generation this status is of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The schedule time of the last run created (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<String>,
    /// When the last run that passed finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<String>,
    /// The next schedule time (RFC 3339), unless suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<String>,
    /// The runs in progress (LoadTest names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<String>,
    /// How many runs are in progress (for `kubectl get`).
    #[serde(default)]
    pub active_count: i32,
    /// The last finished run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<RunRecord>,
    /// Finished runs, newest first (at most [`SCHEDULE_HISTORY_LIMIT`]), kept after their
    /// LoadTests are deleted by the history limits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<RunRecord>,
    /// Schedule times that passed without a run: too late for `startingDeadlineSeconds`, or
    /// skipped because a later one was due (only the latest runs).
    #[serde(default)]
    pub missed_runs: u64,
    /// The last schedule time missed for `startingDeadlineSeconds` (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_missed_time: Option<String>,
    /// Valid (the schedule and time zone parse).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// What the controller last said: why a run was skipped or missed, or an invalid spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// How many finished runs a LoadTestSchedule's `.status.history` keeps.
pub const SCHEDULE_HISTORY_LIMIT: usize = 20;
