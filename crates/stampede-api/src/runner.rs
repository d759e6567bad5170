//! What a runner (or a setup or teardown pod) writes back to its result ConfigMap.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use stampede_model::portable::{PortableMetrics, PortableStep, PortableTimeline};
use stampede_model::report::{ErrorSampleReport, GeneratorFacts};

/// Where a runner is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RunnerState {
    /// Prepared (scenario parsed, data loaded, names resolved), waiting for `startAt`.
    Ready,
    /// Running; `result` holds interim figures.
    Running,
    /// Finished; `result` is final.
    Done,
    /// Could not run; `message` says why.
    Failed,
}

/// What a runner writes to its result ConfigMap (key [`RESULT_KEY`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerReport {
    /// The runner's index in its LoadTest's Job (`JOB_COMPLETION_INDEX`), 0 to runners − 1.
    pub index: u32,
    /// Where the runner is: `ready`, `running`, `done` or `failed`.
    pub state: RunnerState,
    /// When the runner actually started sending (RFC 3339 with µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When the runner learned its start instant (`status.startAt`), by its own clock (RFC 3339
    /// with µs). After `startAt` when the announcement reached it late: then its start was late
    /// by the barrier, not by its own wake-up (`startedAt` − the later of the two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_known_at: Option<String>,
    /// Seconds the runner ran.
    #[serde(default)]
    pub duration_seconds: f64,
    /// Per-step counters and histograms (final), or one `total` step (interim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<PortableMetrics>,
    /// Interim total while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<PortableStep>,
    /// Interim: each step's figures so far, for the steps that sent a request (their latency
    /// histograms and status codes; no phases or checks). Absent when they would take more than
    /// the runner's budget for them (`LIVE_STEPS_BYTES`, 256 KiB): the steps then show at the
    /// end only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub live_steps: Vec<PortableStep>,
    /// Interim: the VUs running at the last interval's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_vus: Option<u32>,
    /// Final: the runner's own resource use (CPU, peak memory, peak VUs); absent in a capacity
    /// search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<GeneratorFacts>,
    /// Why this runner's figures are suspect: it could not keep up (schedule lag or CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated: Option<String>,
    /// Why the runner failed (state `failed` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Final: the run's timeline, per interval and step, with latency histograms (merged by
    /// the operator bin by bin into the LoadTest's report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<PortableTimeline>,
    /// Final: a few failed requests with their messages (at most 5 per worker thread).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_samples: Vec<ErrorSampleReport>,
    /// The run this report belongs to ([`run_id`]: the LoadTest's UID and run number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// `executor: capacity`: this runner's share of each plateau run so far, measured after its
    /// warm-up; the operator adds them up plateau by plateau and judges each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plateaus: Vec<PlateauShare>,
}

/// One runner's part of one plateau of a capacity search.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlateauShare {
    /// The plateau's number in the rising search, from 0.
    pub index: u32,
    /// This runner's rate, iterations/s (the runners' add up to the plateau's).
    pub rate: f64,
    /// Seconds measured (after the warm-up).
    pub seconds: f64,
    /// Per-step counters and histograms, dropped iterations and schedule lag of the measured part.
    pub metrics: PortableMetrics,
    /// Why this runner's CPU was saturated, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_saturated: Option<String>,
}

impl RunnerReport {
    /// A report in `state` and nothing else.
    pub fn new(index: u32, state: RunnerState) -> RunnerReport {
        RunnerReport {
            index,
            state,
            started_at: None,
            start_known_at: None,
            duration_seconds: 0.0,
            result: None,
            live: None,
            live_steps: Vec::new(),
            active_vus: None,
            generator: None,
            saturated: None,
            message: None,
            timeline: None,
            error_samples: Vec::new(),
            run: None,
            plateaus: Vec::new(),
        }
    }
}

/// Data key of the runner report in a result ConfigMap.
pub const RESULT_KEY: &str = "result.json";
/// The key of the merged report (the same document as `stampede run --out json`) in a
/// LoadTest's report ConfigMap.
pub const REPORT_KEY: &str = "report.json";
/// Data key of the resolved scenario in the scenario ConfigMap.
pub const SCENARIO_KEY: &str = "scenario.yaml";
