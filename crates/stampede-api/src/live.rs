//! Load changed while a run goes on: what a LoadTest asks for (`spec.live`), what the operator
//! took and the runners take (`status.live`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Load changed while the run goes on, for the whole fleet (`vus`, `rate`, `paused`): `kubectl patch` it (or use the
/// dashboard's controls). The operator turns each new value into one instant every runner
/// applies together, each taking its share; a value the run cannot take is refused with the
/// condition `LiveChange=False` and an Event, and the run goes on unchanged. Changing it never
/// starts a new run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LiveSpec {
    /// The VUs of the whole fleet from now on (closed models, one load; at most the load's
    /// `maxVUs`, which defaults to its `vus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vus: Option<i64>,
    /// The iterations per second of the whole fleet from now on (arrival-rate models, one load:
    /// from then on a constant rate, to the end of the load's schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<i64>,
    /// `true`: no runner starts a new iteration until it is `false` again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

/// What the operator made of `spec.live`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LiveStatus {
    /// The last `spec.live` decided (taken or refused): a new value is decided once.
    #[serde(default)]
    pub decided: LiveSpec,
    /// The changes taken in this run, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ControlChange>,
}

/// One change the runners take together.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlChange {
    /// Its number in the run, from 1.
    pub seq: u32,
    /// The instant every runner takes it (RFC 3339).
    pub at: String,
    /// The fleet's VUs from then on (each runner takes its share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vus: Option<u32>,
    /// The fleet's iterations per second from then on (each runner takes its share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
    /// Paused (`true`) or resumed (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

/// A digest of what a run is of in `spec` (as JSON): everything but `live`, which changes a
/// run while it goes on and never starts a new one.
pub fn spec_digest(spec: &crate::LoadTestSpec) -> String {
    let spec = crate::LoadTestSpec { live: None, ..spec.clone() };
    let text = serde_json::to_string(&spec).unwrap_or_default();
    let hash =
        text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("{hash:016x}")
}
