//! Results that travel: a runner's counters and HDR histograms in a form that can be stored
//! in a Kubernetes object and merged exactly by the operator (the engine encodes and merges
//! them).
//!
//! Histograms use the HdrHistogram V2 format with deflate, in base64, so merged percentiles
//! equal those of one histogram of all samples; percentiles are never averaged.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One step's stats in portable form.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PortableStep {
    /// Name of the step's scenario (`init`, `setup` or `teardown` for those steps; empty in an
    /// interim total).
    pub scenario: String,
    /// The step's name (a group's name in `groups`; `total` in an interim total).
    pub step: String,
    /// Requests sent (answered or not).
    pub requests: u64,
    /// Failed requests by error kind (`connect`, `timeout`, `NOT_FOUND`…); kinds without any are absent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// HTTP answers by status code.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub status: BTreeMap<String, u64>,
    /// gRPC calls by the status they ended with, by name (`OK`, `NOT_FOUND`…).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grpc_statuses: BTreeMap<String, u64>,
    /// WebSocket sessions by the close code they ended with (`1000`, `1006`…).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ws_close_codes: BTreeMap<String, u64>,
    /// Bytes sent: request heads and bodies (WebSocket: the handshake and message payloads).
    pub bytes_sent: u64,
    /// Bytes received: response heads and bodies as read (WebSocket: the handshake and message
    /// payloads).
    pub bytes_received: u64,
    /// gRPC and WebSocket messages sent (absent for HTTP steps).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub messages_sent: u64,
    /// gRPC and WebSocket messages received (absent for HTTP steps).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub messages_received: u64,
    /// Exact smallest latency, µs (absent without samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_us: Option<u64>,
    /// Exact largest latency, µs (0 without samples).
    pub max_us: u64,
    /// Total latency histogram (µs), HdrHistogram V2 + deflate, base64.
    pub histogram: String,
    /// WebSocket steps: round trips (a send to its matching message), µs, encoded the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trip: Option<String>,
    /// Passes and failures of each named check, by the check's index in its step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<[u64; 2]>,
    /// Latency phases by name (`dns`, `connect`, `tls`, `ttfb`, `receive`); a phase without
    /// samples is absent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub phases: BTreeMap<String, PortablePhase>,
}

/// One latency phase's samples in portable form.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PortablePhase {
    /// Exact smallest value, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_us: Option<u64>,
    /// Exact largest value, µs.
    pub max_us: u64,
    /// Histogram (µs), HdrHistogram V2 + deflate, base64.
    pub histogram: String,
}

/// A run's (or a runner's) counters and histograms.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PortableMetrics {
    /// Each step's stats, one entry per (scenario, step), in file order.
    pub steps: Vec<PortableStep>,
    /// The `group` blocks' transactions, as steps named by the group (`requests` counts the
    /// transactions, `errors` the failed ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<PortableStep>,
    /// Completed iterations by scenario name.
    pub iterations: BTreeMap<String, u64>,
    /// Open models: iterations dropped (every VU busy; all groups).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_iterations: u64,
    /// Open models: dropped iterations by reason (`queueFull`, `waitedTooLong`, `runEnded`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dropped_by_reason: BTreeMap<String, u64>,
    /// Open models: how long iterations that found every VU busy waited for one before they
    /// ran (µs), HdrHistogram V2 + deflate, base64; its count is the number that waited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_wait: Option<String>,
    /// Open models: how late iterations started against their schedule (µs), HdrHistogram V2
    /// + deflate, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_lag: Option<String>,
}

/// A run's timeline in a form that merges: per interval, the counts and each step's latency
/// histogram. Interval `index` (from 1) covers seconds `((index - 1) * intervalSeconds,
/// index * intervalSeconds]` after the start; runners of one LoadTest start together, so their
/// intervals of the same index cover the same time and merge bin by bin.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PortableTimeline {
    /// Length of every interval in whole seconds: 1, or more so that a long run keeps at most
    /// 240 intervals.
    pub interval_seconds: u32,
    /// Seconds the run lasted (the last interval may be shorter than the others).
    pub duration_seconds: f64,
    /// The intervals, in `index` order.
    pub points: Vec<PortableInterval>,
}

/// One interval of a [`PortableTimeline`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PortableInterval {
    /// The interval's number, from 1 (see [`PortableTimeline`] for the seconds it covers).
    pub index: u64,
    /// VUs running at the end of the interval.
    #[serde(default, skip_serializing_if = "is_zero32")]
    pub active_vus: u32,
    /// Iterations completed in this interval.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub iterations: u64,
    /// Open models: iterations started on schedule.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub started: u64,
    /// Open models: iterations dropped (every VU busy).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
    /// Open models: iterations that started after waiting for a free VU.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waited: u64,
    /// Open models: the latest start against the schedule, µs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lag_max_us: u64,
    /// Steps with requests in this interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<PortableIntervalStep>,
}

/// One step's part of an interval.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PortableIntervalStep {
    /// The step's position in the result's `steps` (which names it).
    pub step: usize,
    /// Requests of this step that ended in this interval (answered or not).
    pub requests: u64,
    /// Failed requests of this step in this interval, by error kind; kinds without any are absent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// Latency histogram (µs, 2 significant digits), HdrHistogram V2 + deflate, base64.
    pub histogram: String,
}

fn is_zero32(n: &u32) -> bool {
    *n == 0
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
