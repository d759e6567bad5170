//! A load block (`load:`): the executor and its numbers, and how it is split over runners so
//! that the parts add up exactly.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Dur;

/// The workload model. Executor names follow k6's; each executor uses some of the fields.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LoadSpec {
    /// Which workload model runs the scenarios.
    pub executor: Executor,
    /// constant-vus: number of virtual users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vus: Option<u32>,
    /// constant-vus: how long to run. With `iterations` too, whichever comes first ends the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Dur>,
    /// constant-vus: total iterations, shared by all VUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u64>,
    /// ramping-vus: VUs at the start (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_vus: Option<u32>,
    /// ramping-vus: stages run in order; over `duration`, VUs move linearly from the
    /// previous target to `target`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<Stage>,
    /// ramping-vus: time an iteration of a retiring VU gets to finish when the target drops (default 30s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_ramp_down: Option<Dur>,
    /// Time in-flight iterations get to finish when the run ends (default 30s); then they are cut off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_stop: Option<Dur>,
    /// constant-arrival-rate: iterations started per `timeUnit`, whatever the response times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
    /// Arrival-rate executors: the unit of `rate`, `startRate` and stage targets (default 1s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_unit: Option<Dur>,
    /// ramping-arrival-rate: the rate at the start (default 0); stages then move it linearly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_rate: Option<u32>,
    /// Arrival-rate executors: VUs started before the run (default: `maxVUs`, at most 100).
    #[serde(default, rename = "preAllocatedVUs", skip_serializing_if = "Option::is_none")]
    pub pre_allocated_vus: Option<u32>,
    /// Arrival-rate executors: most VUs (one connection each). An iteration due when all are
    /// busy waits for the next free one (see `maxWaiting`, `maxWait`). Closed executors: the
    /// most VUs a live change (the dashboard, `spec.live`) may raise the run to (default: `vus`,
    /// or the highest stage target).
    #[serde(default, rename = "maxVUs", skip_serializing_if = "Option::is_none")]
    pub max_vus: Option<u32>,
    /// Arrival-rate executors: how many due iterations may wait for a free VU at once when all
    /// `maxVUs` are busy (default 10000, capacity 0; 0: never wait, drop at once as k6 does). One due when
    /// this many wait is dropped and counted (`queue full`). Latency counts from the scheduled
    /// start, so the wait is in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_waiting: Option<u32>,
    /// Arrival-rate executors: how long a due iteration may wait for a free VU (default 1s); one
    /// that waited longer is dropped and counted (`waited too long`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<Dur>,
    /// capacity: iterations per `timeUnit` added from one plateau to the next (or `stepFactor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// capacity: each plateau's rate is the previous one's times this (more than 1; or `step`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_factor: Option<f64>,
    /// capacity: how long each plateau lasts, warm-up included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plateau: Option<Dur>,
    /// capacity: the first part of each plateau, left out of its figures (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Dur>,
    /// capacity: the highest rate tried (iterations per `timeUnit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rate: Option<u32>,
    /// capacity: the search stops after this many plateaus in a row failed (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_after: Option<u32>,
    /// capacity: after the search, this many shorter plateaus (half as long) between the last
    /// rate that passed and the first that failed, each halving the interval (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refine: Option<u32>,
}

/// Workload models.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Executor {
    /// A fixed number of VUs loop over iterations for a duration or an iteration count.
    #[default]
    ConstantVus,
    /// VUs ramp linearly through stages.
    RampingVus,
    /// Open model: `rate` iterations start per `timeUnit` on schedule, however slow the answers.
    ConstantArrivalRate,
    /// Open model: the arrival rate moves linearly through stages (targets are rates).
    RampingArrivalRate,
    /// Open model: plateaus of rising rate until the thresholds (the SLO) fail; the answer is
    /// the highest rate that met them (`startRate`, `step` or `stepFactor`, `plateau`, `warmup`,
    /// `maxRate`, `stopAfter`, `refine`).
    Capacity,
}

impl Executor {
    /// The executor's name as `load.executor` writes it (`constant-vus`, `capacity`…).
    pub fn name(self) -> &'static str {
        match self {
            Executor::ConstantVus => "constant-vus",
            Executor::RampingVus => "ramping-vus",
            Executor::ConstantArrivalRate => "constant-arrival-rate",
            Executor::RampingArrivalRate => "ramping-arrival-rate",
            Executor::Capacity => "capacity",
        }
    }

    /// Whether iterations start on a schedule (open model) rather than when a VU is free.
    pub fn is_open(self) -> bool {
        matches!(self, Executor::ConstantArrivalRate | Executor::RampingArrivalRate | Executor::Capacity)
    }
}

/// One stage of a ramp.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// How long this stage lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Dur>,
    /// VU count reached at the end of the stage.
    pub target: u32,
}

/// Runner `index`'s part of `total` when it is split over `count` runners: the parts
/// differ by at most one and always add up to `total` exactly.
pub fn split_evenly(total: u64, count: u32, index: u32) -> u64 {
    let count = u64::from(count.max(1));
    let index = u64::from(index);
    total / count + u64::from(index < total % count)
}

impl LoadSpec {
    /// The part of this load that runner `index` of `count` runs: VU counts and every stage
    /// target are split with [`split_evenly`]; durations are kept. An iteration count is split
    /// over the runners that get VUs (the first `min(vus, count)`), so that every iteration has
    /// a VU to run it and the parts add up to the total.
    pub fn share(&self, index: u32, count: u32) -> LoadSpec {
        let split32 = |v: u32| split_evenly(u64::from(v), count, index) as u32;
        let iterations = |n: u64| match self.vus {
            Some(vus) => {
                let with_vus = vus.min(count.max(1));
                if index < with_vus { split_evenly(n, with_vus, index) } else { 0 }
            }
            None => split_evenly(n, count, index),
        };
        LoadSpec {
            executor: self.executor,
            vus: self.vus.map(split32),
            duration: self.duration,
            iterations: self.iterations.map(iterations),
            start_vus: self.start_vus.map(split32),
            stages: self.stages.iter().map(|s| Stage { duration: s.duration, target: split32(s.target) }).collect(),
            graceful_ramp_down: self.graceful_ramp_down,
            graceful_stop: self.graceful_stop,
            rate: self.rate.map(split32),
            time_unit: self.time_unit,
            start_rate: self.start_rate.map(split32),
            pre_allocated_vus: self.pre_allocated_vus.map(split32),
            max_vus: self.max_vus.map(split32),
            max_waiting: self.max_waiting.map(split32),
            max_wait: self.max_wait,
            // capacity: rates and steps are split like rates; the plateau plan is the same.
            step: self.step.map(split32),
            step_factor: self.step_factor,
            plateau: self.plateau,
            warmup: self.warmup,
            max_rate: self.max_rate.map(split32),
            stop_after: self.stop_after,
            refine: self.refine,
        }
    }

    /// Why this load cannot be split over `count` runners without losing part of it, as
    /// `(field, reason)`: an arrival rate whose VUs are fewer than the runners gives some runner
    /// a share of the rate and no VU to run it, and that runner's share would never run.
    pub fn share_problem(&self, count: u32) -> Option<(&'static str, String)> {
        if !matches!(self.executor, Executor::ConstantArrivalRate | Executor::RampingArrivalRate | Executor::Capacity) {
            return None;
        }
        let field = if self.max_vus.is_some() { "maxVUs" } else { "preAllocatedVUs" };
        let total = self.max_vus.or(self.pre_allocated_vus).unwrap_or(0);
        (0..count).map(|i| self.share(i, count)).enumerate().find_map(|(i, s)| {
            let rate = s
                .rate
                .unwrap_or(0)
                .max(s.start_rate.unwrap_or(0))
                .max(s.stages.iter().map(|t| t.target).max().unwrap_or(0));
            let vus = s.max_vus.or(s.pre_allocated_vus).unwrap_or(0);
            (rate > 0 && vus == 0).then(|| {
                (
                    field,
                    format!(
                        "{total} VU(s) cannot be split over {count} runners: runner {i} would get a share of the rate \
                         and no VU to run it; set {field} to at least {count} or use fewer runners"
                    ),
                )
            })
        })
    }

    /// Whether this load runs anything at all.
    pub fn has_work(&self) -> bool {
        let vus = self.max_vus.or(self.pre_allocated_vus).unwrap_or(0) > 0;
        match self.executor {
            Executor::ConstantVus => self.vus.unwrap_or(0) > 0 && self.iterations != Some(0),
            Executor::RampingVus => self.start_vus.unwrap_or(0) > 0 || self.stages.iter().any(|s| s.target > 0),
            Executor::ConstantArrivalRate => vus && self.rate.unwrap_or(0) > 0,
            Executor::RampingArrivalRate => {
                vus && (self.start_rate.unwrap_or(0) > 0 || self.stages.iter().any(|s| s.target > 0))
            }
            Executor::Capacity => vus && self.start_rate.unwrap_or(0) > 0,
        }
    }
}
