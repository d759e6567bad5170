//! The `LoadTest` custom resource: its spec, its status (phase, conditions, the merged
//! summary, verdicts, history, a capacity search's curve, setup and teardown).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, LocalObjectReference, ResourceRequirements, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use stampede_model::report::{LatencySummary, TrendPoint, Verdict};

/// A load test: a scenario run by `runners` pods that start together; the merged
/// result and the threshold verdicts are written to `.status`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "stampede.dev",
    version = "v1alpha1",
    kind = "LoadTest",
    namespaced,
    shortname = "lt",
    status = "LoadTestStatus",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Runners","type":"integer","jsonPath":".spec.runners"}"#,
    printcolumn = r#"{"name":"RPS","type":"number","jsonPath":".status.summary.rps"}"#,
    printcolumn = r#"{"name":"P99","type":"string","jsonPath":".status.summary.p99"}"#,
    printcolumn = r#"{"name":"Errors","type":"string","jsonPath":".status.summary.errors"}"#,
    printcolumn = r#"{"name":"Capacity","type":"string","jsonPath":".status.capacity.text"}"#,
    printcolumn = r#"{"name":"Run","type":"integer","jsonPath":".status.run","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    validation = "has(self.spec.scenario) != has(self.spec.scenarioFrom)"
)]
#[serde(rename_all = "camelCase")]
pub struct LoadTestSpec {
    /// Number of runner pods. VUs and iteration counts are split between them so that the
    /// parts add up exactly.
    #[schemars(range(min = 1, max = 1000))]
    pub runners: i32,
    /// The scenario, inline: the same schema as a Stampede scenario file
    /// (`stampede schema scenario`). Set this or `scenarioFrom`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "scenario_schema")]
    pub scenario: Option<serde_json::Value>,
    /// The scenario from a ConfigMap key, as YAML. Set this or `scenario`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario_from: Option<ConfigMapKey>,
    /// Data files (e.g. CSV) from ConfigMaps, available to the scenario by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<DataFile>,
    /// Runner image (default: the Stampede release image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Runner image pull policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(Always|IfNotPresent|Never)$"))]
    pub image_pull_policy: Option<String>,
    /// Secrets for pulling the runner image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// CPU and memory for each runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Node selector for runner pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations for runner pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Affinity for runner pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Environment for runners (`{{env.NAME}}` in the scenario). Use `valueFrom.secretKeyRef`
    /// for secrets: they are passed by reference, never copied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Environment from ConfigMaps or Secrets, by reference.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_from: Vec<EnvFromSource>,
    /// Extra labels for runner pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_labels: BTreeMap<String, String>,
    /// Extra annotations for runner pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_annotations: BTreeMap<String, String>,
    /// Run at most one runner per node (pod anti-affinity on the node name).
    #[serde(default)]
    pub separate: bool,
    /// Longest wait for all runners to be ready before the run fails (default 5m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub start_timeout: Option<String>,
    /// Longest run, from the start instant, before it fails (default: the scenario's
    /// planned length plus 5m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub run_timeout: Option<String>,
    /// What to delete when the test ends.
    #[serde(default)]
    pub cleanup: CleanupPolicy,
    /// Delete the LoadTest itself this many seconds after it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Set to true to stop the runners gracefully; the test ends Aborted with partial results.
    #[serde(default)]
    pub abort: bool,
    /// An earlier run to compare with: relative thresholds (`latency.p99 < baseline * 1.10`)
    /// are judged against it, and its figures stand beside this run's in the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    /// Load changed while the run goes on, for the whole fleet: its VUs, or a pause. Never
    /// starts a new run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<crate::LiveSpec>,
}

/// Where a baseline's result is: a finished LoadTest in this namespace (its report), or a
/// ConfigMap key holding a report (`stampede run --out json`, or a LoadTest's report saved).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.loadTest) != has(self.configMap)",
    "message": "set exactly one of baseline.loadTest and baseline.configMap"
}]))]
pub struct Baseline {
    /// The name of a finished LoadTest in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_test: Option<String>,
    /// A ConfigMap key holding a report in JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapKey>,
}

impl Baseline {
    /// How the status and messages name it: `LoadTest checkout-v1` or `ConfigMap base/report.json`.
    pub fn describe(&self) -> String {
        match (&self.load_test, &self.config_map) {
            (Some(lt), _) => format!("LoadTest {lt}"),
            (None, Some(cm)) => format!("ConfigMap {}/{}", cm.name, cm.key),
            (None, None) => "nothing".into(),
        }
    }
}

/// A key of a ConfigMap in the LoadTest's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapKey {
    /// ConfigMap name.
    pub name: String,
    /// Key in the ConfigMap's data.
    pub key: String,
}

/// A data file for the scenario, from a ConfigMap key.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataFile {
    /// File name the scenario refers to (e.g. `users.csv`).
    pub name: String,
    /// Where the content comes from.
    pub config_map: ConfigMapKey,
}

/// What to delete when the test ends.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CleanupPolicy {
    /// After success: `none` keeps everything, `runners` deletes the Job and its pods (the
    /// default), `all` also deletes ConfigMaps, RBAC objects and results.
    #[serde(default = "runners")]
    pub on_success: CleanupMode,
    /// After failure or abort (default `none`, to keep the evidence).
    #[serde(default = "none")]
    pub on_failure: CleanupMode,
}

impl Default for CleanupPolicy {
    fn default() -> Self {
        CleanupPolicy { on_success: CleanupMode::Runners, on_failure: CleanupMode::None }
    }
}

fn runners() -> CleanupMode {
    CleanupMode::Runners
}

fn none() -> CleanupMode {
    CleanupMode::None
}

/// What a cleanup deletes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CleanupMode {
    /// Delete nothing.
    None,
    /// Delete the runner Job and its pods (and a setup Job still running).
    Runners,
    /// Delete every object created for the LoadTest: Jobs, ConfigMaps (results included), the
    /// setup Secret and the RBAC objects; the LoadTest stays.
    All,
}

/// The scenario's schema in the CRD: the parts the API server can check at admission
/// (executor names, VU counts, duration syntax); the engine validates the rest and reports
/// problems as the `Valid` condition.
fn scenario_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let duration = |description: &str| {
        serde_json::json!({
            "type": "string",
            "pattern": r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$|^0$",
            "description": description,
        })
    };
    schemars::json_schema!({
        "description": "The scenario, inline: the same schema as a Stampede scenario file.",
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "required": ["name", "scenarios"],
        "properties": {
            "name": {"type": "string", "description": "The test's name, in reports."},
            "baseUrl": {
                "type": "string",
                "description": "The origin relative URLs are sent to (e.g. `http://my-service.default.svc`), or `builtin` for the built-in target."
            },
            "load": {
                "type": "object",
                "description": "How load is generated for the scenarios without a `load` of their own: the executor and its numbers, split between the runners.",
                "x-kubernetes-preserve-unknown-fields": true,
                "required": ["executor"],
                "properties": {
                    "executor": {
                        "type": "string",
                        "description": "The workload model: closed (`constant-vus`, `ramping-vus`), open (`constant-arrival-rate`, `ramping-arrival-rate`), or a `capacity` search.",
                        "enum": ["constant-vus", "ramping-vus", "constant-arrival-rate", "ramping-arrival-rate", "capacity"]
                    },
                    "rate": {"type": "integer", "minimum": 1, "description": "Open models: iterations started per `timeUnit`."},
                    "startRate": {"type": "integer", "minimum": 0, "description": "`ramping-arrival-rate`: the rate before the first stage."},
                    "timeUnit": duration("Open models: the period `rate` counts over (default 1s)."),
                    "preAllocatedVUs": {"type": "integer", "minimum": 0, "description": "Open models: VUs made before the start."},
                    "maxVUs": {"type": "integer", "minimum": 1, "description": "Open models: the most VUs; an iteration that finds every one busy waits or is dropped."},
                    "vus": {"type": "integer", "minimum": 1, "description": "`constant-vus`: how many VUs run iterations."},
                    "iterations": {"type": "integer", "minimum": 1, "description": "`constant-vus`: iterations in all (instead of a duration)."},
                    "startVus": {"type": "integer", "minimum": 0, "description": "`ramping-vus`: VUs before the first stage."},
                    "duration": duration("How long the load runs."),
                    "gracefulStop": duration("How long iterations in flight may finish after the end (default 30s)."),
                    "gracefulRampDown": duration("`ramping-vus`: how long a VU ramped down may finish its iteration."),
                    "stages": {
                        "type": "array",
                        "description": "Ramping models: each stage moves to `target` (VUs or rate) over `duration`.",
                        "items": {
                            "type": "object",
                            "required": ["duration", "target"],
                            "properties": {
                                "duration": duration("How long the stage takes."),
                                "target": {"type": "integer", "minimum": 0, "description": "The VUs or rate at the stage's end."}
                            }
                        }
                    }
                }
            },
            "scenarios": {
                "type": "array",
                "minItems": 1,
                "description": "The scenarios: each a list of steps (HTTP, gRPC, WebSocket, groups and flow blocks) its VUs run as one iteration.",
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            },
            "thresholds": {
                "type": "array",
                "description": "Pass/fail rules judged on the merged results, e.g. `latency.p95 < 300ms`, `errors.rate < 1%`.",
                "items": {"type": "string"}
            }
        }
    })
}

/// Lifecycle of a LoadTest.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum Phase {
    /// Accepted, nothing created yet.
    #[default]
    Pending,
    /// Runners are being created and prepare themselves.
    Initializing,
    /// Runners started at `startAt` and are running.
    Running,
    /// All runners finished and every threshold passed.
    Succeeded,
    /// The spec is invalid, a runner failed, a timeout passed or a threshold failed.
    Failed,
    /// Stopped by `spec.abort`.
    Aborted,
}

impl Phase {
    /// Succeeded, failed or aborted: the run is over.
    pub fn is_finished(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed | Phase::Aborted)
    }
}

/// Observed state of a LoadTest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadTestStatus {
    /// Where the LoadTest is: `Pending`, `Initializing`, `Running`, then `Succeeded`, `Failed`
    /// or `Aborted`.
    #[serde(default)]
    pub phase: Phase,
    /// The spec generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The spec generation the current run started from: a run finishes on the spec it started
    /// with (its runner count, its scenario as stored at the start); a later change applies to
    /// the next run (condition `SpecApplied=False`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_generation: Option<i64>,
    /// A digest of the spec the current run started from, all but `live`: a new generation
    /// that changed only `spec.live` is not a change of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_spec: Option<String>,
    /// Valid, RunnersReady, Started, Completed, ThresholdsPassed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// How many runner pods are wanted, ready, running, done and failed.
    #[serde(default)]
    pub runners: RunnerCounts,
    /// The instant all runners start at (RFC 3339), set once every runner is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    /// When the load started (RFC 3339): the instant every runner began together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// When the run ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    /// Merged results: live while running, final when finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    /// Threshold verdicts on the merged results: live while running (on the figures so far;
    /// relative, group and check-rate thresholds wait for the end), final when finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<Verdict>,
    /// What went wrong, or what is happening.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The number of the current (or last) run: 1 for the first, one more for each rerun (a new
    /// value of the annotation `stampede.dev/rerun`, or a spec change after the test finished).
    /// Runners and their results carry it: a run never reads another run's results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
    /// The value of the annotation `stampede.dev/rerun` when the current run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_token: Option<String>,
    /// Earlier runs of this LoadTest, newest first (at most [`HISTORY_LIMIT`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<RunRecord>,
    /// `executor: capacity`: the search's answer and curve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityStatus>,
    /// The scenario's `setup` steps, run once for the whole run by a pod of their own before
    /// the runners start (absent when the scenario has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<OnceStatus>,
    /// The scenario's `teardown` steps, run once after the load by a pod of their own, also
    /// after an abort or a failed runner (absent when the scenario has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teardown: Option<OnceStatus>,
    /// The changes of load taken from `spec.live` in this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<crate::LiveStatus>,
}

/// Where a run's `setup` or `teardown` is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum OnceState {
    /// Not started yet.
    #[default]
    Pending,
    /// Its pod was created.
    Running,
    /// Every step passed.
    Succeeded,
    /// A step failed, or its pod did; `message` says why.
    Failed,
    /// Not run: `message` says why (a teardown after a setup that did not succeed).
    Skipped,
}

impl OnceState {
    /// Succeeded, failed or skipped: nothing more will happen.
    pub fn is_final(self) -> bool {
        matches!(self, OnceState::Succeeded | OnceState::Failed | OnceState::Skipped)
    }
}

/// A run's `setup` or `teardown`: in `.status`, and as its pod reports it (key
/// [`SETUP_KEY`] or [`TEARDOWN_KEY`] of the ConfigMap [`crate::names::once_config_map`]). The values
/// setup extracted are never here: they go to the Secret [`crate::names::setup_secret`], and only their
/// names are listed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OnceStatus {
    /// Where it is: `Pending`, `Running`, then `Succeeded`, `Failed` or `Skipped`.
    pub state: OnceState,
    /// Why it failed, or what it said at its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When its pod started the steps (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// When its steps ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    /// Requests sent.
    #[serde(default)]
    pub requests: u64,
    /// Requests (or checks) that failed.
    #[serde(default)]
    pub failures: u64,
    /// The names of the values setup gave every runner (as `{{setup.NAME}}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The run it belongs to ([`run_id`]); set in a pod's report only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

/// The key of the setup pod's report ([`OnceStatus`], JSON) in [`names::once_config_map`].
pub const SETUP_KEY: &str = "setup.json";
/// The key of the teardown pod's report in [`names::once_config_map`].
pub const TEARDOWN_KEY: &str = "teardown.json";
/// The key of the setup's values (a JSON object, name → value) in [`names::setup_secret`].
pub const SETUP_VALUES_KEY: &str = "values.json";

/// How many earlier runs a LoadTest's `.status.history` keeps.
pub const HISTORY_LIMIT: usize = 10;
/// A new value of this annotation on a LoadTest starts a new run once the current one finished.
pub const RERUN_ANNOTATION: &str = "stampede.dev/rerun";
/// The label on a run's children (Job, scenario and result ConfigMaps) with its run number.
pub const RUN_LABEL: &str = "stampede.dev/run";
/// The label on the LoadTests a LoadTestSchedule created, with the schedule's name.
pub const SCHEDULE_LABEL: &str = "stampede.dev/schedule";
/// The annotation on a scheduled LoadTest with the schedule time it was created for (RFC 3339).
pub const SCHEDULED_TIME_ANNOTATION: &str = "stampede.dev/scheduled-time";

/// The identity of one run of one LoadTest object: its UID and run number. Runners stamp their
/// results with it; results with another identity (a deleted LoadTest of the same name, an
/// earlier run) are never merged.
pub fn run_id(uid: &str, run: u32) -> String {
    format!("{uid}/{run}")
}

/// One finished run: what `.status.history` of a LoadTest and of a LoadTestSchedule keeps, and
/// what `stampede history` prints.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// The LoadTest (in a schedule's history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The run number (in a LoadTest's history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
    /// The spec generation it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// The schedule time it was created for (scheduled runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_time: Option<String>,
    /// When its load started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// When it ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    /// The phase it ended in: `Succeeded`, `Failed` or `Aborted`.
    pub phase: Phase,
    /// `Passed` (every threshold passed), `Failed` or `Aborted`.
    pub verdict: String,
    /// Requests sent, over every runner.
    pub requests: u64,
    /// Requests per second over the run.
    pub rps: f64,
    /// Failed requests / requests, 0–1.
    pub error_rate: f64,
    /// Median latency, ms, from the histograms merged over every runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    /// 95th percentile latency, ms, from the merged histograms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p95_ms: Option<f64>,
    /// 99th percentile latency, ms, from the merged histograms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// p99 as text for `kubectl get` (e.g. `12.3ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<String>,
    /// Why it failed, or what was said at its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl RunRecord {
    /// The record of a finished run from its LoadTest's status.
    pub fn of(status: &LoadTestStatus) -> RunRecord {
        let summary = status.summary.as_ref();
        let latency = summary.filter(|s| s.requests > 0).map(|s| &s.latency_ms);
        RunRecord {
            name: None,
            run: status.run,
            generation: status.run_generation,
            scheduled_time: None,
            start_time: status.start_time.clone(),
            completion_time: status.completion_time.clone(),
            phase: status.phase,
            verdict: verdict(status.phase).into(),
            requests: summary.map(|s| s.requests).unwrap_or(0),
            rps: summary.map(|s| s.rps).unwrap_or(0.0),
            error_rate: summary.map(|s| s.error_rate).unwrap_or(0.0),
            p50_ms: latency.map(|l| l.p50),
            p95_ms: latency.map(|l| l.p95),
            p99_ms: latency.map(|l| l.p99),
            p99: summary.filter(|s| s.requests > 0).map(|s| s.p99.clone()),
            message: status.message.clone(),
        }
    }

    /// This run as a point of a report's trend, named `label`.
    pub fn trend_point(&self, label: String) -> TrendPoint {
        TrendPoint {
            label,
            started_at: self.start_time.clone(),
            verdict: self.verdict.clone(),
            requests: self.requests,
            rps: self.rps,
            error_rate: self.error_rate,
            p50_ms: self.p50_ms,
            p95_ms: self.p95_ms,
            p99_ms: self.p99_ms,
        }
    }
}

impl LoadTestStatus {
    /// A LoadTest's finished runs, oldest first: its earlier runs (`history`), then the current
    /// one once it has finished.
    pub fn finished_runs(&self) -> Vec<RunRecord> {
        let mut runs: Vec<RunRecord> = self.history.iter().rev().cloned().collect();
        if self.phase.is_finished() {
            runs.push(RunRecord::of(self));
        }
        runs
    }

    /// The trend of its runs for the report of its last one: each finished run labelled `#N`,
    /// oldest first (a report shows a trend from two runs on).
    pub fn trend(&self) -> Vec<TrendPoint> {
        let runs = self.finished_runs();
        runs.iter().map(|r| r.trend_point(r.run.map_or_else(|| "?".into(), |n| format!("#{n}")))).collect()
    }
}

/// The verdict of a finished phase: `Passed`, `Failed` or `Aborted` (empty while running).
pub fn verdict(phase: Phase) -> &'static str {
    match phase {
        Phase::Succeeded => "Passed",
        Phase::Failed => "Failed",
        Phase::Aborted => "Aborted",
        _ => "",
    }
}

/// Runner pods by state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerCounts {
    /// Runner pods wanted (`spec.runners`).
    pub desired: i32,
    /// Runners that prepared and wait for the start instant.
    pub ready: i32,
    /// Runners sending load.
    pub running: i32,
    /// Runners that finished their share and reported it.
    pub succeeded: i32,
    /// Runners that failed (their pod, or their run).
    pub failed: i32,
}

/// Merged results of all runners.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// False while the test runs (interim figures), true once every runner reported.
    #[serde(rename = "final")]
    pub is_final: bool,
    /// Requests sent, over every runner.
    pub requests: u64,
    /// Requests per second over the run (or so far).
    pub rps: f64,
    /// Failed requests / requests, 0–1.
    pub error_rate: f64,
    /// Error rate as text for `kubectl get` (e.g. `0.12%`).
    pub errors: String,
    /// p99 latency as text for `kubectl get` (e.g. `12.3ms`).
    pub p99: String,
    /// Failed requests by kind (`connect`, `timeout`, `status`, `check`, a gRPC status, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Latency over every step, ms, from the histograms merged over every runner (never averaged percentiles).
    pub latency_ms: LatencySummary,
    /// Bytes received, over every runner.
    pub bytes_received: u64,
    /// Bytes sent, over every runner.
    pub bytes_sent: u64,
    /// Iterations completed, over every runner.
    pub iterations: u64,
    /// Open models (arrival-rate executors): iterations due when every VU was busy that never
    /// started (the wait queue was full, or they waited `maxWait` in vain). Non-zero means the
    /// runners had too few VUs (`maxVUs`) for the schedule.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_iterations: u64,
    /// Open models: iterations that found every VU busy, waited for one and ran (the wait is
    /// in their latency, which counts from the scheduled start).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waited_iterations: u64,
    /// How long the load ran, seconds.
    pub duration_seconds: f64,
    /// While the test runs: the VUs running now, summed over the running runners (absent in
    /// the final summary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_vus: Option<u32>,
    /// Answers by HTTP status, over every step and runner (a WebSocket handshake's too).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub status_codes: BTreeMap<String, u64>,
    /// gRPC calls by the status they ended with, by name (`OK`, `NOT_FOUND`…).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grpc_statuses: BTreeMap<String, u64>,
    /// WebSocket sessions by the close code they ended with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ws_close_codes: BTreeMap<String, u64>,
    /// Per step. While the test runs, from the runners' interim figures (absent when a runner
    /// sent none: more steps than its budget for them); in the final summary, from their
    /// results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepResult>,
}

/// One step's merged figures.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    /// The scenario the step belongs to.
    pub scenario: String,
    /// The step's name (a group's name for a group's transaction).
    pub step: String,
    /// Requests the step sent, over every runner.
    pub requests: u64,
    /// Failed requests of the step.
    pub errors: u64,
    /// The step's requests per second.
    pub rps: f64,
    /// The step's latency, ms, from its histograms merged over every runner.
    pub latency_ms: LatencySummary,
}

/// `.status.capacity` of a capacity search: the answer so far (final once `done`), and the curve.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityStatus {
    /// The highest rate (iterations/s) that met every threshold so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// The rate as text for `kubectl get` (e.g. `800/s`, `≥ 800/s` for a lower bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// p99 latency (ms) and error rate (0–1) at that rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// Failed requests / requests (0–1) at that rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_rate: Option<f64>,
    /// The answer is a lower bound (the generator limited it, or maxRate was reached).
    #[serde(default)]
    pub lower_bound: bool,
    /// What limited it, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
    /// The search is over: runners stop (their current plateau is cut short).
    #[serde(default)]
    pub done: bool,
    /// When the operator decided it was over (RFC 3339 with µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_at: Option<String>,
    /// Each plateau judged so far, merged over every runner: rate, achieved, p50/p99, errors, verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plateaus: Vec<PlateauRow>,
}

/// One plateau of `.status.capacity`, merged over the runners.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlateauRow {
    /// The plateau's target rate, iterations/s.
    pub rate: f64,
    /// Iterations started per second, measured after the warm-up.
    pub achieved_rate: f64,
    /// Requests sent in the measured part.
    pub requests: u64,
    /// Median latency, ms, in the measured part.
    pub p50_ms: f64,
    /// 99th percentile latency, ms, in the measured part.
    pub p99_ms: f64,
    /// Failed requests / requests, 0–1, in the measured part.
    pub error_rate: f64,
    /// Every threshold held, the rate was reached and the generator kept up.
    pub passed: bool,
    /// The thresholds that failed, or why the generator fell short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
