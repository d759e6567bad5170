//! The run report's document: one summary per step plus a total, the run facts, a timeline,
//! checks, error samples and threshold verdicts. `stampede run --out` writes it as JSON
//! (schema: `schemas/report.schema.json`); the engine fills it and renders it as a table.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ErrorKind;

/// Version of the JSON report layout.
pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// The whole report of one run.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Layout version of this document (currently 1).
    pub schema_version: u32,
    /// The scenario file's `name`.
    pub name: String,
    /// Start of the run, RFC 3339 (UTC).
    pub started_at: String,
    /// The run itself: executor, duration, VUs, iterations, schedule and the generator's own
    /// resource use.
    pub run: RunFacts,
    /// All steps together.
    pub total: StepSummary,
    /// One entry per (scenario, step), in file order.
    pub steps: Vec<StepSummary>,
    /// One entry per `group` block (a transaction), in file order: `step` is the group's
    /// name, `requests` counts its transactions, `errors` the failed ones (by the kind of their
    /// first failure), `latencyMs` their durations (first send to last step's end, think
    /// times included).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<StepSummary>,
    /// Iterations completed per scenario.
    pub scenarios: Vec<ScenarioSummary>,
    /// One point per reporting interval (1 s).
    pub timeline: Vec<TimelinePoint>,
    /// Every named check: how often it passed and failed.
    pub checks: Vec<CheckSummary>,
    /// The first failures of each kind per step: message, request and response (truncated).
    pub error_samples: Vec<ErrorSampleReport>,
    /// Threshold verdicts, in file order.
    pub thresholds: Vec<Verdict>,
    /// A cluster run: one row per runner.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runners: Vec<RunnerRow>,
    /// Earlier runs of the same test and this one, oldest first (`stampede report
    /// loadtest/NAME` fills it from the LoadTest's history); the HTML report charts it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trend: Vec<TrendPoint>,
    /// `executor: capacity`: every plateau's figures and the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityResult>,
    /// What was left out of this report so that it fits where it is kept (a LoadTest's report
    /// ConfigMap holds at most 900 KiB), e.g. `the timeline`, `runner rows 40-299`. The totals
    /// and the threshold verdicts are never left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub omitted: Vec<String>,
}

/// The answer of a capacity search, and the curve that led to it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CapacityResult {
    /// The highest rate (iterations/s) whose plateau met every threshold, at its target rate
    /// (within 1 %) with the generator keeping up. `None`: not even the first plateau did.
    pub capacity: Option<f64>,
    /// True when the service was not shown to be the limit: the generator could not drive more
    /// (too few VUs, CPU, schedule lag) or `maxRate` was reached, so the capacity is at least
    /// `capacity`, and may be higher.
    pub lower_bound: bool,
    /// What limited it, in words: the threshold that failed first above it (with its value and
    /// rate), or the generator's reason, or `maxRate`.
    pub limited_by: String,
    /// `service` (a threshold failed), `generator` or `maxRate`.
    pub limit: String,
    /// Why the search stopped.
    pub stopped: String,
    /// p99 latency at the capacity's plateau, ms; absent without a capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// Error rate (failed requests / requests, 0–1) at the capacity's plateau; absent without a capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_rate: Option<f64>,
    /// In the order run: the rising search, then any refining plateaus.
    pub plateaus: Vec<PlateauResult>,
}

impl CapacityResult {
    /// The plateau whose verdicts are the search's: the capacity's (the highest rate that passed),
    /// or without one the first plateau's.
    pub fn verdict_plateau(&self) -> Option<&PlateauResult> {
        let best = self.plateaus.iter().filter(|p| p.passed).max_by(|a, b| a.rate.total_cmp(&b.rate));
        best.or(self.plateaus.first())
    }
}

/// One plateau of a capacity search: its figures after the warm-up.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlateauResult {
    /// The target rate, iterations/s.
    pub rate: f64,
    /// Iterations started per second in the measured part.
    pub achieved_rate: f64,
    /// A shorter plateau between the last pass and the first failure.
    #[serde(default)]
    pub refine: bool,
    /// Seconds measured (the plateau after its warm-up).
    pub seconds: f64,
    /// Requests sent in the measured part.
    pub requests: u64,
    /// Failed requests in the measured part.
    pub errors: u64,
    /// `errors / requests`, 0–1.
    pub error_rate: f64,
    /// Latency of the measured part's answers, ms.
    pub latency_ms: LatencySummary,
    /// Iterations due when every VU was busy.
    pub dropped_iterations: u64,
    /// Schedule lag p99, ms.
    pub lag_p99_ms: f64,
    /// Why the generator's figures are suspect here (lag or CPU), if they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated: Option<String>,
    /// Every threshold met, the rate within 1 % of the target and the generator keeping up.
    pub passed: bool,
    /// The thresholds judged on this plateau alone.
    pub thresholds: Vec<Verdict>,
}

/// One run of a test in a report's trend.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrendPoint {
    /// How charts name the run, e.g. `#3` (a LoadTest's third run).
    pub label: String,
    /// When it started, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// `Passed` (every threshold passed), `Failed` or `Aborted`.
    pub verdict: String,
    /// Requests sent, over every runner.
    pub requests: u64,
    /// Requests per second over the run.
    pub rps: f64,
    /// Failed requests / requests, 0–1.
    pub error_rate: f64,
    /// Latency p50, ms; absent when the run had no answer to measure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    /// Latency p95, ms; absent when the run had no answer to measure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p95_ms: Option<f64>,
    /// Latency p99, ms; absent when the run had no answer to measure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
}

/// One runner of a cluster run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunnerRow {
    /// The runner's number, from 0 (its Job completion index).
    pub index: u32,
    /// `done` or `failed`.
    pub state: String,
    /// When it started sending (RFC 3339 with µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// Seconds the runner ran.
    pub duration_seconds: f64,
    /// Requests the runner sent.
    pub requests: u64,
    /// The runner's failed requests.
    pub errors: u64,
    /// The runner's requests per second over its own duration.
    pub rps: f64,
    /// The runner's median latency, ms (0 without answers).
    pub p50_ms: f64,
    /// The runner's p99 latency, ms (0 without answers).
    pub p99_ms: f64,
    /// The runner's largest latency, ms (0 without answers).
    pub max_ms: f64,
    /// The runner's CPU use (user + system) over wall time, in percent of one core.
    pub cpu_percent: f64,
    /// The runner's peak resident memory, bytes.
    pub peak_rss_bytes: u64,
    /// Why its figures are suspect, if they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated: Option<String>,
    /// Why the runner failed, or a note on its figures (e.g. partial results after SIGTERM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Facts about the run and the generator itself.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunFacts {
    /// A cluster run: the LoadTest, as `namespace/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loadtest: Option<String>,
    /// The load's executor (`constant-vus`…); with several load blocks, theirs joined by ` + `.
    pub executor: String,
    /// Wall-clock length of the run, seconds.
    pub duration_seconds: f64,
    /// Length the load model planned (without grace periods); absent for iteration-bounded runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planned_duration_seconds: Option<f64>,
    /// Most virtual users the load model runs at once.
    pub vus_max: u32,
    /// Worker threads used.
    pub threads: usize,
    /// Iterations completed.
    pub iterations: u64,
    /// The run was stopped early (Ctrl-C).
    pub interrupted: bool,
    /// Why a step's `onError: abort-run` stopped the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<String>,
    /// Open workload models: how well the schedule was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleFacts>,
    /// Why the generator's own figures are suspect (it could not keep up), if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated: Option<String>,
    /// The system's ports for a loopback target ran out: new connections were then spread
    /// over this many source addresses (127.0.0.2 onwards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_addresses_spread: Option<usize>,
    /// Base URL of the system under test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The built-in target served this run in-process (its CPU is excluded below).
    pub builtin_target: bool,
    /// The load generator's own CPU and memory use, and its peak VUs.
    pub generator: GeneratorFacts,
    /// Load changed while the run went on (from the dashboard, or a LoadTest's `spec.live`),
    /// in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load_changes: Vec<LoadChange>,
}

/// A change of load in words, as reports, Events and metric labels say it: `vus 12, paused`
/// (empty when it changes nothing).
pub fn describe_load_change(vus: Option<i64>, rate: Option<i64>, paused: Option<bool>) -> String {
    let vus = vus.map(|v| format!("vus {v}"));
    let rate = rate.map(|r| format!("rate {r}/s"));
    let paused = paused.map(|p| if p { "paused" } else { "resumed" }.to_string());
    [vus, rate, paused].into_iter().flatten().collect::<Vec<_>>().join(", ")
}

/// A change of load during a run: it took effect at one instant.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LoadChange {
    /// When it took effect, seconds since the start.
    pub t: f64,
    /// The VUs the run moved to (closed models), all load groups together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vus: Option<u32>,
    /// The iterations per second the run moved to (open models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
    /// Paused (`true`: no new iteration starts) or resumed (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

/// How an open model kept its schedule.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleFacts {
    /// Iterations due per second by the schedule, over the planned duration.
    pub target_rate: f64,
    /// Iterations that ran per second, over the planned duration (closed-model scenarios
    /// running beside the open ones left out).
    pub achieved_rate: f64,
    /// Iterations due over the whole run by the schedule.
    pub scheduled_iterations: u64,
    /// Iterations due that never ran: every VU was busy, and the wait queue was full, the wait
    /// too long, or the run ended first (`droppedByReason`).
    pub dropped_iterations: u64,
    /// Dropped iterations by reason: `queueFull` (`maxWaiting` already waiting), `waitedTooLong`
    /// (`maxWait` passed), `runEnded` (still waiting at the end).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dropped_by_reason: BTreeMap<String, u64>,
    /// Iterations that found every VU busy, waited for one, and ran.
    #[serde(default)]
    pub waited_iterations: u64,
    /// Iterations that started but did not complete: cut off by the hard stop (`gracefulStop`)
    /// or an abort, or stopped by a used-up data source. With the completed and the dropped
    /// ones they add up to `scheduledIterations`.
    #[serde(default)]
    pub interrupted_iterations: u64,
    /// How long those waited for a VU, ms (in their latency, which counts from the scheduled start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<LatencySummary>,
    /// How late the scheduler handed iterations out against their schedule, ms (the generator's
    /// own lateness; the wait for a VU is in `waitMs`).
    pub lag_ms: LatencySummary,
    /// What to change when iterations were dropped because the VU pool was exhausted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// The load generator's own resource use.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GeneratorFacts {
    /// CPU time (user + system) divided by wall time, in percent of one core.
    pub cpu_percent: f64,
    /// CPU time used by the generator, seconds.
    pub cpu_seconds: f64,
    /// CPU microseconds per request.
    pub cpu_micros_per_request: f64,
    /// Peak resident memory of the process, bytes.
    pub peak_rss_bytes: u64,
    /// Most virtual users running at once: each worker thread's peak, added up (for a cluster
    /// run, each runner's, added up: the same figure one machine would give).
    #[serde(default)]
    pub peak_vus: u32,
}

/// Latency statistics in milliseconds (µs precision).
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct LatencySummary {
    /// Mean, ms.
    pub mean: f64,
    /// Smallest, ms.
    pub min: f64,
    /// Largest, ms.
    pub max: f64,
    /// Median, ms.
    pub p50: f64,
    /// 75th percentile, ms.
    pub p75: f64,
    /// 90th percentile, ms.
    pub p90: f64,
    /// 95th percentile, ms.
    pub p95: f64,
    /// 99th percentile, ms.
    pub p99: f64,
    /// 99.9th percentile, ms.
    #[serde(rename = "p99.9")]
    pub p999: f64,
}

/// Statistics of one step, or of all of them (`total`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepSummary {
    /// Scenario name (absent in the total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    /// Step name (absent in the total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// Requests attempted: the table's `samples`.
    pub requests: u64,
    /// Requests that got an answer (latency samples).
    pub responses: u64,
    /// Failed requests of any kind.
    pub errors: u64,
    /// `errors / requests`, 0–1.
    pub error_rate: f64,
    /// Failed requests by kind: connect, dns, timeout, reset, protocol, check, io.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Answers by HTTP status (a WebSocket handshake's too; a gRPC call's HTTP/2 status is not
    /// its answer: see `grpcStatuses`).
    pub status_codes: BTreeMap<String, u64>,
    /// gRPC calls by the status they ended with, by name (`OK`, `NOT_FOUND`…): the server's, or
    /// `DEADLINE_EXCEEDED` when the deadline passed first. Absent without gRPC calls.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grpc_statuses: BTreeMap<String, u64>,
    /// WebSocket sessions by the close code they ended with (`1000` normal, `1006` no close
    /// frame…). Absent without WebSocket sessions that closed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ws_close_codes: BTreeMap<String, u64>,
    /// Total latency of answered requests, ms (open models: from the scheduled start).
    pub latency_ms: LatencySummary,
    /// Open models: latency from the actual send (service time), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_ms: Option<LatencySummary>,
    /// WebSocket steps: each send to its matching message, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trip_ms: Option<LatencySummary>,
    /// Latency phases, ms: DNS, connect and TLS (once per new connection), time to first
    /// byte (from the start of the request) and receive (the rest of it).
    #[serde(default)]
    pub phases_ms: PhasesSummary,
    /// Requests per second over the run.
    pub rps: f64,
    /// Bytes received over the run: response heads and bodies as read (WebSocket: the handshake
    /// and message payloads).
    pub bytes_received: u64,
    /// Bytes sent over the run: request heads and bodies (WebSocket: the handshake and message
    /// payloads).
    pub bytes_sent: u64,
    /// Bytes received per second over the run.
    pub received_per_sec: f64,
    /// Bytes sent per second over the run.
    pub sent_per_sec: f64,
    /// gRPC and WebSocket steps: messages sent and received, and received per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<MessagesSummary>,
}

/// Messages of gRPC calls and WebSocket sessions.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MessagesSummary {
    /// Messages sent: gRPC request messages, WebSocket text and binary messages.
    pub sent: u64,
    /// Messages received: gRPC response messages, WebSocket text and binary messages.
    pub received: u64,
    /// Received per second over the run.
    pub received_per_sec: f64,
}

/// The iterations one scenario completed.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioSummary {
    /// The scenario's name.
    pub name: String,
    /// Iterations it completed over the run.
    pub iterations: u64,
}

/// One reporting interval.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TimelinePoint {
    /// Seconds since the start, at the end of the interval.
    pub t: f64,
    /// VUs running at the end of the interval.
    pub active_vus: u32,
    /// Requests that ended in this interval (answered or not).
    pub requests: u64,
    /// Requests per second in this interval.
    pub rps: f64,
    /// Failed requests of this interval.
    pub errors: u64,
    /// Failed requests of this interval by kind.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Iterations completed in this interval.
    #[serde(default)]
    pub iterations: u64,
    /// Median latency of the answers in this interval, ms (0 without answers).
    pub p50_ms: f64,
    /// 90th percentile latency of the answers in this interval, ms (0 without answers).
    #[serde(default)]
    pub p90_ms: f64,
    /// 99th percentile latency of the answers in this interval, ms (0 without answers).
    pub p99_ms: f64,
    /// Largest latency of the answers in this interval, ms (0 without answers).
    pub max_ms: f64,
    /// Open models: iterations due per second by the schedule in this interval (started + dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_per_sec: Option<f64>,
    /// Open models: iterations started per second in this interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_per_sec: Option<f64>,
    /// Open models: iterations dropped in this interval (every VU busy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u64>,
    /// Open models: iterations that started in this interval after waiting for a free VU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited: Option<u64>,
    /// Open models: the latest start against the schedule in this interval, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_max_ms: Option<f64>,
    /// Each step's part of this interval (steps with requests), when the run has more than one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepPoint>,
}

/// One step's part of a timeline interval.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepPoint {
    /// The step's scenario.
    pub scenario: String,
    /// The step's name.
    pub step: String,
    /// Requests of this step that ended in this interval (answered or not).
    pub requests: u64,
    /// Failed requests of this step in this interval.
    pub errors: u64,
    /// Median latency of this step's answers in this interval, ms.
    pub p50_ms: f64,
    /// 90th percentile latency of this step's answers in this interval, ms.
    pub p90_ms: f64,
    /// 99th percentile latency of this step's answers in this interval, ms.
    pub p99_ms: f64,
    /// Largest latency of this step's answers in this interval, ms.
    pub max_ms: f64,
}

/// A failed request kept as an example: where and why it failed, what was sent and received.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ErrorSampleReport {
    /// The failed step's scenario.
    pub scenario: String,
    /// The failed step's name.
    pub step: String,
    /// The error kind it counts under.
    pub kind: ErrorKind,
    /// What went wrong, in words (e.g. `status 503 is not accepted …`).
    pub message: String,
    /// The request as sent (truncated to 1 KiB).
    pub request: String,
    /// The answer: status, kept headers and kept body (truncated to 1 KiB); absent when
    /// none came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
}

/// One named check's results.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CheckSummary {
    /// Scenario of the check's step.
    pub scenario: String,
    /// Name of the check's step.
    pub step: String,
    /// The check as reports name it, e.g. `status is 200` or `json json.test equals "test"`.
    pub name: String,
    /// How many times the check held.
    pub passes: u64,
    /// How many times the check failed.
    pub fails: u64,
}

/// One latency phase: how many samples, and their distribution in ms.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct PhaseSummary {
    /// Samples: for `dns`, `connect` and `tls`, the connections opened.
    pub samples: u64,
    /// The samples' distribution, ms (its fields sit beside `samples`).
    #[serde(flatten)]
    pub latency: LatencySummary,
}

/// The phases of a step's requests; a phase without samples is absent.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct PhasesSummary {
    /// Name resolution (hosts given by name, on new connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<PhaseSummary>,
    /// TCP connect (new connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<PhaseSummary>,
    /// TLS handshake (new `https` connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<PhaseSummary>,
    /// Time to first byte of the answer, from the start of the request (connecting included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb: Option<PhaseSummary>,
    /// From the first byte to the end of the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive: Option<PhaseSummary>,
}

/// A threshold's outcome.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The threshold as written.
    pub threshold: String,
    /// Whether the threshold held.
    pub passed: bool,
    /// The measured value, in the threshold's unit (ms, %, req/s or a count).
    pub actual: f64,
    /// The measured value as text, e.g. `212.4ms` or `0.31%`.
    pub actual_text: String,
    /// Relative thresholds (`… < baseline * 1.10`): the baseline's value, in the same unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<f64>,
    /// Relative thresholds: the measured value divided by the baseline's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// Why the threshold could not be judged (e.g. no baseline); it then fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The share of an open model's scheduled iterations that may be dropped with the load still
/// counted as delivered.
pub const UNDELIVERED_TOLERANCE: f64 = 0.01;

impl Report {
    /// Whether every threshold passed (true when there are none).
    pub fn thresholds_passed(&self) -> bool {
        self.thresholds.iter().all(|v| v.passed)
    }

    /// Why the generator did not deliver the load the test asked for, if it did not: an open
    /// model that dropped more than [`UNDELIVERED_TOLERANCE`] of its scheduled iterations
    /// (every VU busy, or the generator too slow to hand them out). Its thresholds judged a
    /// lighter load than the test meant.
    pub fn undelivered(&self) -> Option<String> {
        let s = self.run.schedule.as_ref()?;
        if s.scheduled_iterations == 0
            || (s.dropped_iterations as f64) <= UNDELIVERED_TOLERANCE * s.scheduled_iterations as f64
        {
            return None;
        }
        Some(format!(
            "{} of {} scheduled iterations were dropped ({:.1}%): {:.1}/s achieved of {:.1}/s asked{}",
            s.dropped_iterations,
            s.scheduled_iterations,
            s.dropped_iterations as f64 * 100.0 / s.scheduled_iterations as f64,
            s.achieved_rate,
            s.target_rate,
            s.hint.as_ref().map(|h| format!("; {h}")).unwrap_or_default(),
        ))
    }
}

/// Rounds to 3 decimals: µs precision for milliseconds, ms for seconds. Every figure of a
/// report and of a LoadTest's status is rounded this way.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
