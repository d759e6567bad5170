//! Results that travel: a runner's counters and HDR histograms in a form that can be
//! stored in a Kubernetes object and merged exactly by the operator.
//!
//! Histograms use the HdrHistogram V2 format with deflate, in base64. Merging decodes
//! them and adds them bin by bin, so merged percentiles equal those of one histogram of
//! all samples (within HDR precision); percentiles are never averaged.

use std::collections::BTreeMap;
use std::io::Cursor;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer, V2Serializer};
pub use stampede_model::portable::{
    PortableInterval, PortableIntervalStep, PortableMetrics, PortablePhase, PortableStep, PortableTimeline,
};
use stampede_model::{ErrorKind, StepKey};

use crate::stats::histogram::{Latencies as _, new_interval_histogram};
use crate::stats::metrics::{
    DropReason, IntervalStats, IntervalStep, StepStats, WorkerMetrics, errors_by_name, grpc_status_code,
    grpc_status_name,
};
use crate::stats::phases::{LatencyPhase, PhaseStats, Phases};

/// Why portable metrics could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum PortableError {
    /// A histogram's text is not valid base64.
    #[error("step `{scenario}/{step}`: histogram is not valid base64: {source}")]
    Base64 {
        /// Scenario of the histogram's step (empty for the run's schedule lag and queue wait).
        scenario: String,
        /// The histogram's step (`schedule lag` or `queue wait` for those of the whole run).
        step: String,
        /// What the base64 decoder found.
        source: base64::DecodeError,
    },
    /// A histogram is not HdrHistogram V2 with deflate, or does not fit the bounds it is added to.
    #[error("step `{scenario}/{step}`: histogram cannot be decoded: {message}")]
    Histogram {
        /// Scenario of the histogram's step (empty for the run's schedule lag and queue wait).
        scenario: String,
        /// The histogram's step (`schedule lag` or `queue wait` for those of the whole run).
        step: String,
        /// The decoder's or the histogram's error, in its debug form.
        message: String,
    },
    /// Errors counted under a kind name this version does not know (the name).
    #[error("unknown error kind `{0}`")]
    ErrorKind(String),
    /// Dropped iterations counted under a reason this version does not know (the name).
    #[error("unknown reason for dropped iterations `{0}`")]
    DropReason(String),
    /// Calls counted under a gRPC status name that is not one of the 17 (the name).
    #[error("unknown gRPC status `{0}`")]
    GrpcStatus(String),
    /// Sessions counted under a close code that is not a number from 0 to 65535 (the text).
    #[error("`{0}` is not a WebSocket close code")]
    CloseCode(String),
}

/// A step's HTTP status codes with their counts, keyed by the code as text (`"200"`), as reports,
/// results and statuses show them.
pub fn status_codes_by_name(s: &StepStats) -> BTreeMap<String, u64> {
    s.status_counts().map(|(c, n)| (c.to_string(), n)).collect()
}

/// A step's WebSocket close codes with their counts, keyed by the code as text (`"1000"`).
pub fn ws_close_codes_by_name(s: &StepStats) -> BTreeMap<String, u64> {
    s.ws_close_counts().map(|(c, n)| (c.to_string(), n)).collect()
}

/// A step's gRPC statuses by name (`OK`, `NOT_FOUND`), as reports and results show them.
pub fn grpc_statuses_by_name(s: &StepStats) -> BTreeMap<String, u64> {
    s.grpc_status_counts().map(|(c, n)| (grpc_status_name(c).to_string(), n)).collect()
}

/// Encodes interval stats (all steps together, e.g. a runner's running total) as one
/// step named `scenario`/`step`. Intervals carry no byte or status counts, so those stay
/// zero/empty; min and max come from the histogram (within its precision).
pub fn step_from_interval(scenario: &str, step: &str, stats: &IntervalStats) -> PortableStep {
    let mut raw = Vec::new();
    let _ = V2DeflateSerializer::new().serialize(&stats.latency, &mut raw);
    let empty = stats.latency.is_empty();
    PortableStep {
        scenario: scenario.to_string(),
        step: step.to_string(),
        requests: stats.requests,
        errors: errors_by_name(&stats.errors_by_kind),
        status: BTreeMap::new(),
        grpc_statuses: BTreeMap::new(),
        ws_close_codes: BTreeMap::new(),
        bytes_sent: 0,
        bytes_received: 0,
        messages_sent: 0,
        messages_received: 0,
        min_us: (!empty).then(|| stats.latency.min()),
        max_us: if empty { 0 } else { stats.latency.max() },
        histogram: STANDARD.encode(raw),
        round_trip: None,
        checks: Vec::new(),
        phases: BTreeMap::new(),
    }
}

/// Encodes a run: per-step stats (named by a plan's `keys`), the `group` blocks'
/// transactions (by its `group_keys`), and iterations per scenario.
pub fn encode_run(
    keys: &[StepKey],
    group_keys: &[StepKey],
    metrics: &WorkerMetrics,
    scenario_names: &[String],
) -> PortableMetrics {
    let mut portable = encode(keys, metrics, scenario_names);
    portable.groups = encode_steps(group_keys, &metrics.groups);
    portable
}

/// Adds a runner's `portable` run into `into`: steps and groups matched by name.
pub fn merge_run_into(
    portable: &PortableMetrics,
    keys: &[StepKey],
    group_keys: &[StepKey],
    scenario_names: &[String],
    into: &mut WorkerMetrics,
) -> Result<(), PortableError> {
    merge_into(portable, keys, scenario_names, into)?;
    for p in &portable.groups {
        if let Some(index) = group_keys.iter().position(|k| k.scenario == p.scenario && k.step == p.step) {
            let stats = decode_step(p)?;
            into.group(index).merge(&stats);
        }
    }
    Ok(())
}

/// Encodes per-step stats named by `keys`, and iterations per scenario (no groups: see
/// [`encode_run`]).
pub fn encode(keys: &[StepKey], metrics: &WorkerMetrics, scenario_names: &[String]) -> PortableMetrics {
    let steps = encode_steps(keys, &metrics.steps);
    let iterations = scenario_names.iter().cloned().zip(metrics.iterations.iter().copied()).collect();
    PortableMetrics {
        steps,
        groups: Vec::new(),
        iterations,
        dropped_iterations: metrics.dropped.iter().sum(),
        dropped_by_reason: metrics.dropped_by_reason_named(),
        queue_wait: (!metrics.queue_wait.is_empty()).then(|| encode_histogram(&metrics.queue_wait)),
        schedule_lag: (!metrics.schedule_lag.is_empty()).then(|| encode_histogram(&metrics.schedule_lag)),
    }
}

/// Stats named by `keys` (missing ones as empty).
fn encode_steps(keys: &[StepKey], stats: &[StepStats]) -> Vec<PortableStep> {
    let none = StepStats::default();
    keys.iter().enumerate().map(|(i, key)| encode_step(key, stats.get(i).unwrap_or(&none))).collect()
}

/// One step's stats.
fn encode_step(key: &StepKey, s: &StepStats) -> PortableStep {
    let mut raw = Vec::new();
    let _ = V2DeflateSerializer::new().serialize(&s.latency, &mut raw);
    PortableStep {
        scenario: key.scenario.clone(),
        step: key.step.clone(),
        requests: s.requests,
        errors: errors_by_name(&s.errors),
        status: status_codes_by_name(s),
        grpc_statuses: grpc_statuses_by_name(s),
        ws_close_codes: ws_close_codes_by_name(s),
        bytes_sent: s.bytes_sent,
        bytes_received: s.bytes_received,
        messages_sent: s.messages_sent,
        messages_received: s.messages_received,
        min_us: (!s.latency.is_empty()).then_some(s.min_us),
        max_us: s.max_us,
        histogram: STANDARD.encode(raw),
        round_trip: s.round_trip.as_deref().map(encode_histogram),
        checks: s.checks.clone(),
        phases: encode_phases(&s.phases),
    }
}

/// A running runner's steps so far, for its interim report: those that sent a request (named
/// by `keys`), from its running total (`total`: counts, and latency at the interval precision,
/// [`crate::stats::histogram::INTERVAL_SIGFIG`], which keeps them small to send and cheap to
/// merge) and its codes from `codes` (its totals, when the run keeps them). `None` when their
/// encoded (JSON) size would pass `budget` bytes: a result ConfigMap holds at most 1 MiB, and a
/// plan of thousands of steps would not fit.
pub fn encode_live_steps(
    keys: &[StepKey],
    total: &IntervalStats,
    codes: Option<&[StepStats]>,
    budget: usize,
) -> Option<Vec<PortableStep>> {
    let none = StepStats::default();
    let mut size = 0usize;
    let mut steps = Vec::new();
    for (i, (key, st)) in keys.iter().zip(&total.steps).enumerate().filter(|(_, (_, st))| st.requests > 0) {
        let c = codes.and_then(|c| c.get(i)).unwrap_or(&none);
        let empty = st.latency.is_empty();
        let step = PortableStep {
            scenario: key.scenario.clone(),
            step: key.step.clone(),
            requests: st.requests,
            errors: errors_by_name(&st.errors_by_kind),
            status: status_codes_by_name(c),
            grpc_statuses: grpc_statuses_by_name(c),
            ws_close_codes: ws_close_codes_by_name(c),
            min_us: (!empty).then(|| st.latency.min()),
            max_us: if empty { 0 } else { st.latency.max() },
            // Not deflated: a sparse histogram's counts are short varints already, and the
            // operator decodes every runner's steps each time it merges them.
            histogram: encode_plain_histogram(&st.latency),
            ..PortableStep::default()
        };
        size = size.saturating_add(serde_json::to_vec(&step).map_or(usize::MAX, |v| v.len() + 1));
        if size > budget {
            return None;
        }
        steps.push(step);
    }
    Some(steps)
}

/// One step's live figures, decoded and checked: what [`merge_live_step`] adds and
/// [`take_out_live_step`] takes out.
struct LiveFigures {
    latency: Option<hdrhistogram::Histogram<u64>>,
    /// By [`ErrorKind::index`].
    errors: Vec<(usize, u64)>,
    status: Vec<(u16, u64)>,
    grpc_statuses: Vec<(u16, u64)>,
    ws_close_codes: Vec<(u16, u64)>,
}

/// Decodes what a live view needs of step `p`; its codes are checked as [`merge_into`] checks
/// them (an HTTP status that is not a number is skipped, as it is there).
fn decode_live(p: &PortableStep) -> Result<LiveFigures, PortableError> {
    let errors = p
        .errors
        .iter()
        .map(|(kind, n)| {
            let k = ErrorKind::ALL
                .iter()
                .find(|k| k.name() == kind)
                .ok_or_else(|| PortableError::ErrorKind(kind.clone()))?;
            Ok((k.index(), *n))
        })
        .collect::<Result<_, PortableError>>()?;
    let grpc_statuses = p
        .grpc_statuses
        .iter()
        .map(|(name, n)| Ok((grpc_status_code(name).ok_or_else(|| PortableError::GrpcStatus(name.clone()))?, *n)))
        .collect::<Result<_, PortableError>>()?;
    let ws_close_codes = p
        .ws_close_codes
        .iter()
        .map(|(code, n)| Ok((code.parse::<u16>().map_err(|_| PortableError::CloseCode(code.clone()))?, *n)))
        .collect::<Result<_, PortableError>>()?;
    Ok(LiveFigures {
        latency: decode_histogram(p, &p.histogram)?,
        errors,
        status: p.status.iter().filter_map(|(code, n)| Some((code.parse::<u16>().ok()?, *n))).collect(),
        grpc_statuses,
        ws_close_codes,
    })
}

fn histogram_error(p: &PortableStep, e: impl std::fmt::Debug) -> PortableError {
    PortableError::Histogram { scenario: p.scenario.clone(), step: p.step.clone(), message: format!("{e:?}") }
}

/// Adds what a live view needs of step `p` into `into`: requests, errors, latency, extremes and
/// codes (not its bytes, phases, checks or round trips, which cost more to decode than a page
/// refreshed every second can spend). The codes are checked as [`merge_into`] checks them.
pub fn merge_live_step(p: &PortableStep, into: &mut StepStats) -> Result<(), PortableError> {
    let f = decode_live(p)?;
    if let Some(h) = &f.latency {
        into.latency.merge_from(h).map_err(|e| histogram_error(p, e))?;
        into.min_us = into.min_us.min(p.min_us.unwrap_or(u64::MAX));
        into.max_us = into.max_us.max(p.max_us);
    }
    into.requests += p.requests;
    for (kind, n) in f.errors {
        into.errors[kind] += n;
    }
    for (code, n) in f.status {
        into.add_status(code, n);
    }
    for (code, n) in f.grpc_statuses {
        into.add_grpc_status(code, n);
    }
    for (code, n) in f.ws_close_codes {
        into.add_ws_close(code, n);
    }
    Ok(())
}

/// Takes out of `from` what [`merge_live_step`] added for `p`: its latency and counts, not its
/// extremes (they stay the sum's; a runner's only grow). So a running runner's figures so far
/// are replaced by its next. An error when `from` does not hold `p`'s latencies; `from` is then
/// only good to be rebuilt.
pub fn take_out_live_step(p: &PortableStep, from: &mut StepStats) -> Result<(), PortableError> {
    let f = decode_live(p)?;
    if let Some(h) = &f.latency {
        from.latency.subtract(h).map_err(|e| histogram_error(p, e))?;
    }
    from.requests = from.requests.saturating_sub(p.requests);
    for (kind, n) in f.errors {
        from.errors[kind] = from.errors[kind].saturating_sub(n);
    }
    for (code, n) in f.status {
        from.take_out_status(code, n);
    }
    for (code, n) in f.grpc_statuses {
        from.take_out_grpc_status(code, n);
    }
    for (code, n) in f.ws_close_codes {
        from.take_out_ws_close(code, n);
    }
    Ok(())
}

/// Adds `portable` into `into`, matching steps by (scenario, step) name; steps unknown to
/// `keys` are skipped.
pub fn merge_into(
    portable: &PortableMetrics,
    keys: &[StepKey],
    scenario_names: &[String],
    into: &mut WorkerMetrics,
) -> Result<(), PortableError> {
    for p in &portable.steps {
        let Some(index) = keys.iter().position(|k| k.scenario == p.scenario && k.step == p.step) else {
            continue;
        };
        let stats = decode_step(p)?;
        into.steps[index].merge(&stats);
    }
    for (name, n) in &portable.iterations {
        if let Some(i) = scenario_names.iter().position(|s| s == name) {
            into.iterations[i] += n;
        }
    }
    if portable.dropped_iterations > 0 {
        // Runners' drops are merged as one count (by group within a runner only).
        if into.dropped.is_empty() {
            into.dropped.push(0);
        }
        into.dropped[0] += portable.dropped_iterations;
    }
    for (name, n) in &portable.dropped_by_reason {
        let Some(r) = DropReason::ALL.iter().find(|r| r.name() == name) else {
            return Err(PortableError::DropReason(name.clone()));
        };
        into.dropped_by_reason[*r as usize] += n;
    }
    for (what, text, into) in [
        ("schedule lag", &portable.schedule_lag, &mut into.schedule_lag),
        ("queue wait", &portable.queue_wait, &mut into.queue_wait),
    ] {
        let Some(text) = text else { continue };
        let named = PortableStep { step: what.into(), ..PortableStep::default() };
        if let Some(h) = decode_histogram(&named, text)? {
            into.merge_from(&h).map_err(|e| PortableError::Histogram {
                scenario: String::new(),
                step: named.step.clone(),
                message: format!("{e:?}"),
            })?;
        }
    }
    Ok(())
}

/// A runner's timeline has at most this many intervals: a 1-hour run keeps 15-s intervals.
pub const MAX_TIMELINE_POINTS: u64 = 240;
/// Encoded (JSON) size a runner's timeline stays under; above it, neighbouring intervals are
/// merged (the interval doubles) until it fits. A runner's result ConfigMap holds it beside
/// the final totals, under the 1 MiB limit of a ConfigMap.
pub const TIMELINE_BUDGET_BYTES: usize = 512 * 1024;

/// The timeline interval in whole seconds for a run planned to last `planned`: 1 s, or the
/// fewest seconds that keep it within [`MAX_TIMELINE_POINTS`] intervals.
pub fn timeline_interval(planned: Option<std::time::Duration>) -> u32 {
    let secs = planned.map_or(0, |d| d.as_secs_f64().ceil() as u64);
    secs.div_ceil(MAX_TIMELINE_POINTS).clamp(1, u32::MAX as u64) as u32
}

/// Collects a run's reporting ticks into intervals of a whole number of seconds, and encodes
/// them as a [`PortableTimeline`]. Only the interval being collected keeps its histograms; a
/// complete one is kept encoded (kilobytes, where an hour of histograms would take tens of MB).
#[derive(Debug)]
pub struct TimelineBuilder {
    interval_seconds: u32,
    /// The interval being collected: (index, VUs at its end, stats).
    current: Option<(u64, u32, IntervalStats)>,
    /// The complete intervals, in index order.
    done: Vec<PortableInterval>,
}

impl TimelineBuilder {
    /// A builder of intervals `interval_seconds` long (0 counts as 1).
    pub fn new(interval_seconds: u32) -> Self {
        TimelineBuilder { interval_seconds: interval_seconds.max(1), current: None, done: Vec::new() }
    }

    /// Adds a tick that ended `elapsed` after the start.
    pub fn add(&mut self, elapsed: std::time::Duration, active_vus: u32, stats: &IntervalStats) {
        let ms = elapsed.as_millis() as u64;
        let width = self.interval_seconds as u64 * 1000;
        let index = ms.div_ceil(width).max(1);
        match &mut self.current {
            Some((i, vus, acc)) if *i == index => {
                acc.merge(stats);
                *vus = active_vus;
            }
            current => {
                if let Some((i, vus, acc)) = current.take() {
                    self.done.push(encode_interval(i, vus, &acc));
                }
                *current = Some((index, active_vus, stats.clone()));
            }
        }
    }

    /// The timeline of a run that lasted `duration`, within `budget` bytes of JSON.
    pub fn finish(mut self, duration: std::time::Duration, budget: usize) -> PortableTimeline {
        if let Some((i, vus, acc)) = self.current.take() {
            self.done.push(encode_interval(i, vus, &acc));
        }
        let mut timeline = PortableTimeline {
            interval_seconds: self.interval_seconds,
            duration_seconds: stampede_model::report::round3(duration.as_secs_f64()),
            points: self.done,
        };
        while timeline.points.len() > 1 && serde_json::to_vec(&timeline).map_or(0, |v| v.len()) > budget {
            coarsen(&mut timeline);
        }
        timeline
    }
}

/// Doubles a timeline's interval, merging neighbours (their histograms bin by bin).
fn coarsen(timeline: &mut PortableTimeline) {
    timeline.interval_seconds = timeline.interval_seconds.saturating_mul(2);
    let mut merged: Vec<PortableInterval> = Vec::new();
    for point in std::mem::take(&mut timeline.points) {
        let index = point.index.div_ceil(2);
        match merged.last_mut() {
            Some(acc) if acc.index == index => {
                acc.active_vus = point.active_vus;
                acc.iterations += point.iterations;
                acc.started += point.started;
                acc.dropped += point.dropped;
                acc.waited += point.waited;
                acc.lag_max_us = acc.lag_max_us.max(point.lag_max_us);
                for part in point.steps {
                    match acc.steps.iter_mut().find(|s| s.step == part.step) {
                        Some(s) => merge_encoded_step(s, &part),
                        None => acc.steps.push(part),
                    }
                }
                acc.steps.sort_by_key(|s| s.step);
            }
            _ => merged.push(PortableInterval { index, ..point }),
        }
    }
    timeline.points = merged;
}

/// Adds `b` into `a`: counts, and the histograms bin by bin (both encoded here, so they decode).
fn merge_encoded_step(a: &mut PortableIntervalStep, b: &PortableIntervalStep) {
    a.requests += b.requests;
    for (kind, n) in &b.errors {
        *a.errors.entry(kind.clone()).or_default() += n;
    }
    let decode = |text: &str| -> Option<hdrhistogram::Histogram<u64>> {
        let raw = STANDARD.decode(text).ok().filter(|r| !r.is_empty())?;
        Deserializer::new().deserialize(&mut Cursor::new(raw)).ok()
    };
    let mut h = new_interval_histogram();
    for part in [decode(&a.histogram), decode(&b.histogram)].into_iter().flatten() {
        h.merge_from(&part).expect("histograms share bounds");
    }
    a.histogram = encode_histogram(&h);
}

/// A histogram in the V2 encoding without deflate (decoded by the same [`Deserializer`]).
fn encode_plain_histogram(h: &hdrhistogram::Histogram<u64>) -> String {
    let mut raw = Vec::new();
    if !h.is_empty() {
        let _ = V2Serializer::new().serialize(h, &mut raw);
    }
    STANDARD.encode(raw)
}

fn encode_histogram(h: &hdrhistogram::Histogram<u64>) -> String {
    let mut raw = Vec::new();
    if !h.is_empty() {
        let _ = V2DeflateSerializer::new().serialize(h, &mut raw);
    }
    STANDARD.encode(raw)
}

fn encode_interval(index: u64, active_vus: u32, s: &IntervalStats) -> PortableInterval {
    PortableInterval {
        index,
        active_vus,
        iterations: s.iterations,
        started: s.started,
        dropped: s.dropped,
        waited: s.waited,
        lag_max_us: s.lag_max_us,
        steps: s
            .steps
            .iter()
            .enumerate()
            .filter(|(_, st)| st.requests > 0 || !st.latency.is_empty())
            .map(|(i, st)| PortableIntervalStep {
                step: i,
                requests: st.requests,
                errors: errors_by_name(&st.errors_by_kind),
                histogram: encode_histogram(&st.latency),
            })
            .collect(),
    }
}

/// One interval of a merged timeline.
#[derive(Clone, Debug)]
pub struct MergedInterval {
    /// Interval number from 1: it ends `index` × the interval length after the start.
    pub index: u64,
    /// VUs of all runners at the end of the interval.
    pub active_vus: u32,
    /// Counts and per-step stats (indexed like the `keys` merged by), all runners together.
    pub stats: IntervalStats,
}

/// Runners' timelines merged interval by interval: counts are added, histograms are added bin
/// by bin, per step and in total. Each timeline comes with the steps of its result, which name
/// its step positions; steps unknown to `keys` are left out. Timelines with a shorter interval
/// than the longest (a runner that coarsened to fit its budget) are folded into the longest.
/// Each merged interval is handed to `each` with the interval's length in seconds, in order,
/// one at a time (only one interval's histograms exist at once); returns what `each` made.
pub fn merge_timelines<T>(
    timelines: &[(&PortableTimeline, &[PortableStep])],
    keys: &[StepKey],
    mut each: impl FnMut(u32, &MergedInterval) -> T,
) -> Result<Vec<T>, PortableError> {
    let interval = timelines.iter().map(|(t, _)| t.interval_seconds.max(1)).max().unwrap_or(1);
    // By merged index: each runner's points in it (runner, point, the runner's step names).
    type Part<'a> = (usize, &'a PortableInterval, &'a [PortableStep]);
    let mut by_index: BTreeMap<u64, Vec<Part<'_>>> = BTreeMap::new();
    for (runner, (timeline, steps)) in timelines.iter().enumerate() {
        let factor = (interval / timeline.interval_seconds.max(1)).max(1) as u64;
        for point in &timeline.points {
            by_index.entry(point.index.div_ceil(factor).max(1)).or_default().push((runner, point, steps));
        }
    }
    let mut out = Vec::with_capacity(by_index.len());
    for (index, parts) in by_index {
        let mut merged = MergedInterval {
            index,
            active_vus: 0,
            // The total of the steps' histograms, at their precision (adding them to a
            // finer histogram would move each bucket's value).
            stats: IntervalStats { latency: new_interval_histogram(), ..IntervalStats::default() },
        };
        // The VUs at the end of the merged interval: each runner's latest point in it.
        let mut last_vus: BTreeMap<usize, (u64, u32)> = BTreeMap::new();
        for (runner, point, steps) in parts {
            let stats = &mut merged.stats;
            stats.iterations += point.iterations;
            stats.started += point.started;
            stats.dropped += point.dropped;
            stats.waited += point.waited;
            stats.lag_max_us = stats.lag_max_us.max(point.lag_max_us);
            let latest = last_vus.entry(runner).or_insert((0, 0));
            if point.index >= latest.0 {
                *latest = (point.index, point.active_vus);
            }
            for part in &point.steps {
                let Some(named) = steps.get(part.step) else { continue };
                let Some(k) = keys.iter().position(|k| k.scenario == named.scenario && k.step == named.step) else {
                    continue;
                };
                let mut step = IntervalStep { requests: part.requests, ..IntervalStep::default() };
                for (kind, n) in &part.errors {
                    let kind = ErrorKind::ALL
                        .iter()
                        .find(|x| x.name() == kind)
                        .ok_or_else(|| PortableError::ErrorKind(kind.clone()))?;
                    step.errors_by_kind[kind.index()] += n;
                }
                if let Some(h) = decode_histogram(named, &part.histogram)? {
                    step.latency.merge_from(&h).map_err(|e| PortableError::Histogram {
                        scenario: named.scenario.clone(),
                        step: named.step.clone(),
                        message: format!("{e:?}"),
                    })?;
                }
                stats.requests += step.requests;
                for (kind, n) in step.errors_by_kind.iter().enumerate() {
                    stats.errors += n;
                    stats.errors_by_kind[kind] += n;
                }
                stats.latency.merge_from(&step.latency).expect("histograms share bounds");
                stats.step(k).merge(&step);
            }
        }
        merged.active_vus = last_vus.values().map(|(_, vus)| vus).sum();
        out.push(each(interval, &merged));
    }
    Ok(out)
}

fn encode_phases(phases: &Phases) -> BTreeMap<String, PortablePhase> {
    LatencyPhase::ALL
        .iter()
        .filter_map(|&phase| {
            let stats = phases.get(phase).filter(|p| p.count() > 0)?;
            let mut raw = Vec::new();
            let _ = V2DeflateSerializer::new().serialize(&stats.histogram, &mut raw);
            let portable =
                PortablePhase { min_us: Some(stats.min_us), max_us: stats.max_us, histogram: STANDARD.encode(raw) };
            Some((phase.name().to_string(), portable))
        })
        .collect()
}

fn decode_histogram(p: &PortableStep, encoded: &str) -> Result<Option<hdrhistogram::Histogram<u64>>, PortableError> {
    let raw = STANDARD.decode(encoded).map_err(|source| PortableError::Base64 {
        scenario: p.scenario.clone(),
        step: p.step.clone(),
        source,
    })?;
    if raw.is_empty() {
        return Ok(None);
    }
    Deserializer::new().deserialize(&mut Cursor::new(raw)).map(Some).map_err(|e| PortableError::Histogram {
        scenario: p.scenario.clone(),
        step: p.step.clone(),
        message: format!("{e:?}"),
    })
}

fn decode_step(p: &PortableStep) -> Result<StepStats, PortableError> {
    let mut s = StepStats::default();
    merge_live_step(p, &mut s)?;
    s.bytes_sent = p.bytes_sent;
    s.bytes_received = p.bytes_received;
    s.messages_sent = p.messages_sent;
    s.messages_received = p.messages_received;
    s.min_us = p.min_us.unwrap_or(u64::MAX);
    s.max_us = p.max_us;
    s.checks = p.checks.clone();
    if let Some(h) = p.round_trip.as_deref().map(|e| decode_histogram(p, e)).transpose()?.flatten() {
        s.round_trip = Some(Box::new(h));
    }
    for (name, portable) in &p.phases {
        // A phase this version does not know (from a newer runner) is left out.
        let Some(&phase) = LatencyPhase::ALL.iter().find(|ph| ph.name() == name) else { continue };
        let Some(h) = decode_histogram(p, &portable.histogram)? else { continue };
        let stats = PhaseStats::from_parts(&h, portable.min_us, portable.max_us).map_err(|message| {
            PortableError::Histogram { scenario: p.scenario.clone(), step: p.step.clone(), message }
        })?;
        s.phases.set(phase, stats);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runners' results, encoded and merged, give the percentiles of all samples together.
    #[test]
    fn merged_runner_results_equal_the_union_of_all_samples() {
        let keys = vec![StepKey { scenario: "s".into(), step: "a".into() }];
        let names = vec!["s".to_string()];
        let mut rng = fastrand::Rng::with_seed(42);
        let mut union = StepStats::default();
        let mut merged = WorkerMetrics::new(1, 1);
        for runner in 0..5u64 {
            let mut m = WorkerMetrics::new(1, 1);
            for _ in 0..(2_000 + runner * 700) {
                // Each runner sees a different latency profile.
                let us = rng.u64(100..(1_000 + runner * 50_000));
                m.steps[0].record_latency_us(us);
                m.steps[0].requests += 1;
                m.steps[0].record_status(200);
                union.record_latency_us(us);
            }
            m.steps[0].record_error(ErrorKind::Timeout);
            m.steps[0].phases.record_connect(&crate::stats::phases::ConnectTimes {
                dns_us: None,
                connect_us: 100 + runner,
                tls_us: Some(900 + runner),
            });
            m.steps[0].phases.record_answer(300, 400);
            // gRPC/WebSocket figures: messages and round trips.
            m.steps[0].messages_sent += 3;
            m.steps[0].messages_received += 4;
            m.steps[0].record_round_trip_us(1_000 * (runner + 1));
            // gRPC statuses and WebSocket close codes, tallied apart from HTTP statuses.
            m.steps[0].add_grpc_status(0, 40);
            m.steps[0].add_grpc_status(5, 80 + runner);
            m.steps[0].add_ws_close(if runner == 4 { 1006 } else { 1000 }, 2);
            m.iterations[0] = 10 + runner;
            m.schedule_lag.record(50 + runner * 1_000).unwrap();
            // Open models: each runner had iterations wait for a VU, and dropped some.
            for k in 0..=runner {
                m.record_waited(1_000 * (k + 1));
            }
            m.record_dropped(0, DropReason::QueueFull);
            m.record_dropped(0, if runner % 2 == 0 { DropReason::WaitedTooLong } else { DropReason::RunEnded });
            let portable = encode(&keys, &m, &names);
            let json = serde_json::to_string(&portable).unwrap();
            let back: PortableMetrics = serde_json::from_str(&json).unwrap();
            merge_into(&back, &keys, &names, &mut merged).unwrap();
        }
        let s = &merged.steps[0];
        for q in [0.5, 0.9, 0.95, 0.99, 0.999] {
            assert_eq!(s.quantile_us(q), union.quantile_us(q), "q={q}");
        }
        assert_eq!(s.max_us, union.max_us);
        assert_eq!(s.min_latency_us(), union.min_latency_us());
        assert_eq!(s.latency.len(), union.latency.len());
        assert_eq!(s.errors[ErrorKind::Timeout.index()], 5);
        assert_eq!(s.status_counts().collect::<Vec<_>>(), vec![(200, union.latency.len())]);
        assert_eq!(s.grpc_status_counts().collect::<Vec<_>>(), vec![(0, 200), (5, 400 + 10)]);
        assert_eq!(s.ws_close_counts().collect::<Vec<_>>(), vec![(1000, 8), (1006, 2)]);
        assert_eq!(grpc_statuses_by_name(s), BTreeMap::from([("NOT_FOUND".to_string(), 410), ("OK".to_string(), 200)]));
        assert_eq!(merged.iterations[0], 10 + 11 + 12 + 13 + 14);
        assert_eq!(
            (merged.schedule_lag.len(), merged.schedule_lag.max()),
            (5, merged.schedule_lag.highest_equivalent(4_050))
        );
        // Waits and drops merge as counts by reason and one histogram of all waits.
        assert_eq!(
            (merged.queue_wait.len(), merged.queue_wait.max()),
            (15, merged.queue_wait.highest_equivalent(5_000))
        );
        assert_eq!(merged.dropped.iter().sum::<u64>(), 10);
        assert_eq!(merged.dropped_by_reason, [5, 3, 2], "queue full, waited too long, run ended");
        let connect = s.phases.get(LatencyPhase::Connect).unwrap();
        assert_eq!((connect.count(), connect.min_value_us(), connect.max_us), (5, 100, 104));
        assert_eq!(s.phases.get(LatencyPhase::Tls).unwrap().count(), 5);
        assert_eq!(s.phases.get(LatencyPhase::Ttfb).unwrap().count(), 5);
        assert!(s.phases.get(LatencyPhase::Dns).is_none());
        assert_eq!((s.messages_sent, s.messages_received), (15, 20));
        let rt = s.round_trip.as_deref().expect("round trips merge");
        assert_eq!((rt.len(), rt.max()), (5, rt.highest_equivalent(5_000)));
    }

    /// A runner's running total (interval stats) travels as one step and decodes to the
    /// same counts and percentiles.
    #[test]
    fn interval_totals_encode_as_one_step() {
        let mut total = IntervalStats::default();
        for tick in 0..3u64 {
            let mut t = IntervalStats::default();
            for i in 0..1_000 {
                t.latency.record_us(200 + i * (tick + 1));
                t.requests += 1;
            }
            t.record_error(0, ErrorKind::Timeout);
            t.record_error(0, ErrorKind::Check);
            t.requests += 1;
            t.iterations += 500;
            total.merge(&t);
        }
        let step = step_from_interval("", "total", &total);
        assert_eq!((step.scenario.as_str(), step.step.as_str()), ("", "total"));
        assert_eq!(step.requests, 3_003);
        assert_eq!(step.errors, BTreeMap::from([("check".to_string(), 3), ("timeout".to_string(), 3)]));
        assert_eq!(step.min_us, Some(200));
        let json = serde_json::to_string(&step).unwrap();
        let back: PortableStep = serde_json::from_str(&json).unwrap();
        let decoded = decode_step(&back).unwrap();
        assert_eq!(decoded.requests, 3_003);
        assert_eq!(decoded.error_total(), 6);
        assert_eq!(decoded.latency.len(), 3_000);
        for q in [0.5, 0.99] {
            assert_eq!(decoded.latency.value_at_quantile(q), total.latency.value_at_quantile(q));
        }

        let empty = step_from_interval("", "total", &IntervalStats::default());
        assert_eq!((empty.requests, empty.min_us, empty.max_us), (0, None, 0));
        assert!(decode_step(&empty).is_ok());
    }

    /// Three runners' timelines, one of them coarsened to fit a small budget, merge interval by
    /// interval into exactly the union of their samples: counts add up, and each merged
    /// histogram (per step and in total) equals one histogram of all samples of that interval.
    #[test]
    fn merged_timelines_equal_the_union_of_the_runners_samples_per_interval() {
        let keys = vec![
            StepKey { scenario: "s".into(), step: "a".into() },
            StepKey { scenario: "s".into(), step: "b".into() },
        ];
        let names = vec!["s".to_string()];
        let mut rng = fastrand::Rng::with_seed(7);
        // The union per 4-s interval (the coarsest runner's): (requests, errors, per-step histograms).
        let mut union: BTreeMap<u64, (u64, u64, Vec<hdrhistogram::Histogram<u64>>)> = BTreeMap::new();
        let mut timelines = Vec::new();
        let mut results = Vec::new();
        for runner in 0..3u64 {
            let mut builder = TimelineBuilder::new(2);
            for tick in 1..=12u64 {
                let mut t = IntervalStats::default();
                for _ in 0..rng.u64(50..400) {
                    let step = rng.usize(0..2);
                    t.record_request(step);
                    if rng.u8(0..20) == 0 {
                        t.record_error(step, ErrorKind::Timeout);
                    } else {
                        let us = rng.u64(100..(2_000 + runner * 40_000 + tick * 1_000));
                        t.record_latency(step, us);
                        let entry = union
                            .entry(tick.div_ceil(4))
                            .or_insert_with(|| (0, 0, vec![crate::stats::histogram::new_interval_histogram(); 2]));
                        entry.2[step].record(us).unwrap();
                    }
                }
                let entry = union.entry(tick.div_ceil(4)).or_default();
                entry.0 += t.requests;
                entry.1 += t.errors;
                t.iterations = 3;
                builder.add(std::time::Duration::from_secs(tick), 10 + runner as u32, &t);
            }
            // Runner 2 gets a budget so small that its 2-s intervals double to 4 s.
            let budget = if runner == 2 { 4_000 } else { TIMELINE_BUDGET_BYTES };
            let timeline = builder.finish(std::time::Duration::from_secs(12), budget);
            assert_eq!(timeline.interval_seconds, if runner == 2 { 4 } else { 2 }, "runner {runner}");
            let json = serde_json::to_string(&timeline).unwrap();
            timelines.push(serde_json::from_str::<PortableTimeline>(&json).unwrap());
            results.push(encode(&keys, &WorkerMetrics::new(2, 1), &names));
        }
        let input: Vec<(&PortableTimeline, &[PortableStep])> =
            timelines.iter().zip(&results).map(|(t, r)| (t, r.steps.as_slice())).collect();
        let merged: Vec<(u32, MergedInterval)> = merge_timelines(&input, &keys, |i, m| (i, m.clone())).unwrap();
        assert!(merged.iter().all(|(interval, _)| *interval == 4));
        let merged: Vec<MergedInterval> = merged.into_iter().map(|(_, m)| m).collect();
        assert_eq!(merged.iter().map(|m| m.index).collect::<Vec<_>>(), vec![1, 2, 3]);
        for m in &merged {
            let (requests, errors, hists) = &union[&m.index];
            assert_eq!((m.stats.requests, m.stats.errors), (*requests, *errors), "interval {}", m.index);
            assert_eq!(m.stats.iterations, 3 * 4 * 3, "4 ticks × 3 runners × 3");
            assert_eq!(m.active_vus, 10 + 11 + 12, "each runner's VUs at the interval's end");
            let mut all = new_interval_histogram();
            for (k, h) in hists.iter().enumerate() {
                let step = &m.stats.steps[k];
                assert_eq!(step.latency.len(), h.len(), "interval {} step {k}", m.index);
                for q in [0.5, 0.9, 0.99, 1.0] {
                    assert_eq!(step.latency.value_at_quantile(q), h.value_at_quantile(q), "q={q}");
                }
                all.merge_from(h).unwrap();
            }
            for q in [0.5, 0.9, 0.99, 1.0] {
                assert_eq!(m.stats.latency.value_at_quantile(q), all.value_at_quantile(q), "total q={q}");
            }
        }
    }

    /// A runner's result with a gRPC status or close code this version cannot read is an
    /// error, not a count silently dropped from the merge.
    #[test]
    fn unknown_grpc_statuses_and_close_codes_are_errors() {
        let keys = vec![StepKey { scenario: "s".into(), step: "a".into() }];
        let names = vec!["s".to_string()];
        for (grpc, close, wanted) in [
            (("NOT_A_STATUS", 1), ("1000", 1), "unknown gRPC status `NOT_A_STATUS`"),
            (("OK", 1), ("normal", 1), "`normal` is not a WebSocket close code"),
        ] {
            let step = PortableStep {
                scenario: "s".into(),
                step: "a".into(),
                grpc_statuses: BTreeMap::from([(grpc.0.to_string(), grpc.1)]),
                ws_close_codes: BTreeMap::from([(close.0.to_string(), close.1)]),
                ..encode(&keys, &WorkerMetrics::new(1, 1), &names).steps[0].clone()
            };
            let portable = PortableMetrics { steps: vec![step], ..PortableMetrics::default() };
            let err = merge_into(&portable, &keys, &names, &mut WorkerMetrics::new(1, 1)).unwrap_err();
            assert_eq!(err.to_string(), wanted);
        }
    }

    /// A running runner's figures so far are replaced by its next: taken out, they leave the
    /// sum as if they had never been added (counts, codes and latencies), and what was never
    /// added cannot be taken out.
    #[test]
    fn live_figures_taken_out_leave_the_others_exactly() {
        let keys = vec![StepKey { scenario: "s".into(), step: "a".into() }];
        let step = |seed: u64, status: u16, grpc: u16, close: u16| {
            let mut m = WorkerMetrics::new(1, 1);
            for i in 0..(50 + seed) {
                m.steps[0].requests += 1;
                m.steps[0].record_latency_us(200 + i * seed * 37);
                m.steps[0].record_status(status);
            }
            m.steps[0].record_error(ErrorKind::Timeout);
            m.steps[0].add_grpc_status(grpc, seed);
            m.steps[0].add_ws_close(close, seed);
            encode(&keys, &m, &["s".to_string()]).steps.remove(0)
        };
        let (mine, theirs) = (step(3, 200, 0, 1000), step(11, 503, 14, 1011));
        let fresh = || {
            let mut s = StepStats::default();
            s.latency = new_interval_histogram();
            s
        };
        let (mut sum, mut alone) = (fresh(), fresh());
        for p in [&mine, &theirs] {
            merge_live_step(p, &mut sum).unwrap();
        }
        merge_live_step(&theirs, &mut alone).unwrap();
        take_out_live_step(&mine, &mut sum).unwrap();
        assert_eq!(sum.latency, alone.latency);
        assert_eq!((sum.requests, sum.errors), (alone.requests, alone.errors));
        assert_eq!(status_codes_by_name(&sum), BTreeMap::from([("503".to_string(), 61)]));
        assert_eq!(grpc_statuses_by_name(&sum), grpc_statuses_by_name(&alone));
        assert_eq!(ws_close_codes_by_name(&sum), BTreeMap::from([("1011".to_string(), 11)]));
        assert!(take_out_live_step(&step(5, 200, 0, 1000), &mut fresh()).is_err(), "never added");
    }

    #[test]
    fn the_timeline_interval_keeps_a_long_run_within_its_points() {
        use std::time::Duration;
        assert_eq!(timeline_interval(None), 1);
        assert_eq!(timeline_interval(Some(Duration::from_secs(60))), 1);
        assert_eq!(timeline_interval(Some(Duration::from_secs(240))), 1);
        assert_eq!(timeline_interval(Some(Duration::from_secs(241))), 2);
        assert_eq!(timeline_interval(Some(Duration::from_secs(3_600))), 15);
    }

    /// #23: the `group` blocks' transactions travel with a runner's result and merge like
    /// steps: counts add up, percentiles come from the union of the samples.
    #[test]
    fn group_transactions_merge_across_runners_by_name() {
        let keys = vec![StepKey { scenario: "s".into(), step: "a".into() }];
        let group_keys = vec![
            StepKey { scenario: "s".into(), step: "checkout".into() },
            StepKey { scenario: "s".into(), step: "browse".into() },
        ];
        let names = vec!["s".to_string()];
        let mut all = StepStats::default();
        let mut merged = WorkerMetrics::new(1, 1);
        for runner in 0..3u64 {
            let mut m = WorkerMetrics::new(1, 1);
            for i in 0..50 {
                let us = 1_000 + runner * 10_000 + i * 97;
                m.group(0).requests += 1;
                m.group(0).record_latency_us(us);
                all.record_latency_us(us);
            }
            m.group(0).record_error(ErrorKind::Check);
            let portable = encode_run(&keys, &group_keys, &m, &names);
            assert_eq!(portable.groups.len(), 2, "every group, the unused one with zeros");
            let back: PortableMetrics = serde_json::from_str(&serde_json::to_string(&portable).unwrap()).unwrap();
            merge_run_into(&back, &keys, &group_keys, &names, &mut merged).unwrap();
        }
        let g = &merged.groups[0];
        assert_eq!((g.requests, g.errors[ErrorKind::Check.index()]), (150, 3));
        for q in [0.5, 0.9, 0.99] {
            assert_eq!(g.quantile_us(q), all.quantile_us(q));
        }
        assert_eq!(merged.groups[1].requests, 0);
    }

    #[test]
    fn corrupt_histograms_are_errors_not_panics() {
        let keys = vec![StepKey { scenario: "s".into(), step: "a".into() }];
        let names = vec!["s".to_string()];
        let bad = PortableMetrics {
            steps: vec![PortableStep {
                scenario: "s".into(),
                step: "a".into(),
                histogram: "AAAA".into(),
                ..Default::default()
            }],
            groups: Vec::new(),
            iterations: BTreeMap::new(),
            dropped_iterations: 0,
            dropped_by_reason: BTreeMap::new(),
            queue_wait: None,
            schedule_lag: None,
        };
        let mut m = WorkerMetrics::new(1, 1);
        assert!(merge_into(&bad, &keys, &names, &mut m).is_err());
    }
}
