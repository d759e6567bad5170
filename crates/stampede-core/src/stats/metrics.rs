//! Latency histograms and counters.
//!
//! Each worker thread owns one [`StepStats`] per (scenario, step) and records into it
//! without locks; a reporter merges the workers' stats. Percentiles of a merged run come
//! only from merged histograms, never from averaging percentiles.

use hdrhistogram::Histogram;

use stampede_model::ErrorKind;
pub use stampede_model::errors_by_name;

use crate::stats::histogram::{Latencies as _, new_histogram, new_interval_histogram};

use crate::stats::phases::Phases;

const KINDS: usize = ErrorKind::ALL.len();

/// Status codes 100–599 counted in a flat array.
const STATUS_MIN: u16 = 100;
const STATUS_SLOTS: usize = 500;

/// Everything recorded for one (scenario, step).
#[derive(Clone, Debug)]
pub struct StepStats {
    /// Total latency of answered requests, µs.
    pub latency: Histogram<u64>,
    /// Requests attempted.
    pub requests: u64,
    /// Requests that failed, by kind.
    pub errors: [u64; KINDS],
    /// Bytes of the step's requests sent, failed requests included.
    pub bytes_sent: u64,
    /// Bytes of answers read: head, framing and body.
    pub bytes_received: u64,
    /// gRPC and WebSocket messages sent.
    pub messages_sent: u64,
    /// gRPC and WebSocket messages received.
    pub messages_received: u64,
    /// Exact smallest latency, µs, where the histogram rounds within its precision (`u64::MAX`
    /// when there is none; see [`Self::min_latency_us`]).
    pub min_us: u64,
    /// Exact largest latency, µs (0 when there is none).
    pub max_us: u64,
    /// Passes and failures of each named check of the step, by check index.
    pub checks: Vec<[u64; 2]>,
    /// DNS, connect, TLS, time to first byte and receive, µs.
    pub phases: Phases,
    /// Open models: latency from the actual send (service time), while `latency` counts from
    /// the intended start. Absent for closed models, where the two are the same.
    pub service: Option<Box<Histogram<u64>>>,
    /// WebSocket steps: each send to its matching message, µs.
    pub round_trip: Option<Box<Histogram<u64>>>,
    status: Vec<u64>,
    /// gRPC calls by the status code they ended with (0–16; others count as UNKNOWN, as gRPC
    /// clients read them).
    grpc_status: [u64; GRPC_CODES],
    /// WebSocket sessions by the close code they ended with, in ascending code order.
    ws_close: Vec<(u16, u64)>,
}

/// The name of gRPC status `code` (`OK`, `NOT_FOUND`…); a code gRPC does not define is
/// `UNKNOWN`, as gRPC clients read it.
pub fn grpc_status_name(code: u16) -> &'static str {
    match code {
        0 => "OK",
        c => ErrorKind::grpc(u32::from(c)).map_or("UNKNOWN", ErrorKind::name),
    }
}

/// The code of gRPC status `name` (any case; `OK` is 0).
pub fn grpc_status_code(name: &str) -> Option<u16> {
    (0..GRPC_CODES as u16).find(|c| grpc_status_name(*c).eq_ignore_ascii_case(name))
}

/// gRPC status codes 0 (OK) to 16 (UNAUTHENTICATED).
const GRPC_CODES: usize = 17;
/// The code a status outside 0–16 counts as (UNKNOWN).
const GRPC_UNKNOWN: usize = 2;

impl Default for StepStats {
    fn default() -> Self {
        StepStats {
            latency: new_histogram(),
            requests: 0,
            errors: [0; KINDS],
            bytes_sent: 0,
            bytes_received: 0,
            messages_sent: 0,
            messages_received: 0,
            min_us: u64::MAX,
            max_us: 0,
            checks: Vec::new(),
            phases: Phases::default(),
            service: None,
            round_trip: None,
            status: vec![0; STATUS_SLOTS],
            grpc_status: [0; GRPC_CODES],
            ws_close: Vec::new(),
        }
    }
}

impl StepStats {
    /// Records the latency of one answer, µs (raised to at least 1), and the exact extremes.
    #[inline]
    pub fn record_latency_us(&mut self, us: u64) {
        let us = us.max(1);
        self.latency.record_us(us);
        self.min_us = self.min_us.min(us);
        self.max_us = self.max_us.max(us);
    }

    /// Records a service time (open models).
    #[inline]
    pub fn record_service_us(&mut self, us: u64) {
        self.service.get_or_insert_with(|| Box::new(new_histogram())).record_us(us.max(1));
    }

    /// Records a WebSocket round trip: a send to its matching message.
    pub fn record_round_trip_us(&mut self, us: u64) {
        self.round_trip.get_or_insert_with(|| Box::new(new_histogram())).record_us(us.max(1));
    }

    /// Latency at quantile `q` (0–1) in µs, never above the exact maximum.
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.latency.is_empty() { 0 } else { self.latency.value_at_quantile(q).min(self.max_us) }
    }

    /// Exact smallest latency in µs (0 when there is none).
    pub fn min_latency_us(&self) -> u64 {
        if self.latency.is_empty() { 0 } else { self.min_us }
    }

    /// Counts one answer with HTTP `status`; a code outside 100–599 is not counted.
    #[inline]
    pub fn record_status(&mut self, status: u16) {
        if let Some(slot) = status.checked_sub(STATUS_MIN).map(usize::from)
            && slot < STATUS_SLOTS
        {
            self.status[slot] += 1;
        }
    }

    /// Adds `n` answers with `status`.
    pub fn add_status(&mut self, status: u16, n: u64) {
        if let Some(slot) = status.checked_sub(STATUS_MIN).map(usize::from)
            && slot < STATUS_SLOTS
        {
            self.status[slot] += n;
        }
    }

    /// Adds `n` gRPC calls that ended with status `code`.
    pub fn add_grpc_status(&mut self, code: u16, n: u64) {
        let slot = usize::from(code);
        self.grpc_status[if slot < GRPC_CODES { slot } else { GRPC_UNKNOWN }] += n;
    }

    /// gRPC status codes the calls ended with, with counts, in ascending code order.
    pub fn grpc_status_counts(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.grpc_status.iter().enumerate().filter(|(_, n)| **n > 0).map(|(c, n)| (c as u16, *n))
    }

    /// Adds `n` WebSocket sessions that ended with close code `code`.
    pub fn add_ws_close(&mut self, code: u16, n: u64) {
        match self.ws_close.binary_search_by_key(&code, |(c, _)| *c) {
            Ok(i) => self.ws_close[i].1 += n,
            Err(i) => self.ws_close.insert(i, (code, n)),
        }
    }

    /// Takes out `n` answers with `status` (saturating at none).
    pub fn take_out_status(&mut self, status: u16, n: u64) {
        if let Some(slot) = status.checked_sub(STATUS_MIN).map(usize::from)
            && slot < STATUS_SLOTS
        {
            self.status[slot] = self.status[slot].saturating_sub(n);
        }
    }

    /// Takes out `n` gRPC calls that ended with status `code` (saturating at none).
    pub fn take_out_grpc_status(&mut self, code: u16, n: u64) {
        let slot = usize::from(code);
        let slot = if slot < GRPC_CODES { slot } else { GRPC_UNKNOWN };
        self.grpc_status[slot] = self.grpc_status[slot].saturating_sub(n);
    }

    /// Takes out `n` WebSocket sessions that ended with close code `code` (a code left with none
    /// goes).
    pub fn take_out_ws_close(&mut self, code: u16, n: u64) {
        if let Ok(i) = self.ws_close.binary_search_by_key(&code, |(c, _)| *c) {
            self.ws_close[i].1 = self.ws_close[i].1.saturating_sub(n);
            if self.ws_close[i].1 == 0 {
                self.ws_close.remove(i);
            }
        }
    }

    /// WebSocket close codes the sessions ended with, with counts, in ascending order.
    pub fn ws_close_counts(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.ws_close.iter().copied()
    }

    /// Counts one failed request of `kind`.
    #[inline]
    pub fn record_error(&mut self, kind: ErrorKind) {
        self.errors[kind.index()] += 1;
    }

    /// Counts one evaluation of check `index`.
    #[inline]
    pub fn record_check(&mut self, index: usize, passed: bool) {
        self.add_check(index, u64::from(passed), u64::from(!passed));
    }

    /// Adds `passed` passes and `failed` failures of check `index`.
    pub fn add_check(&mut self, index: usize, passed: u64, failed: u64) {
        if self.checks.len() <= index {
            self.checks.resize(index + 1, [0, 0]);
        }
        self.checks[index][0] += passed;
        self.checks[index][1] += failed;
    }

    /// Check evaluations that passed and failed, all checks together.
    pub fn check_totals(&self) -> (u64, u64) {
        self.checks.iter().fold((0, 0), |(p, f), c| (p + c[0], f + c[1]))
    }

    /// Failed requests, all kinds together.
    pub fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Status codes seen, with counts, in ascending order.
    pub fn status_counts(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.status.iter().enumerate().filter(|(_, n)| **n > 0).map(|(i, n)| (i as u16 + STATUS_MIN, *n))
    }

    /// What was recorded after `earlier`, a snapshot of these same counters: e.g. a capacity
    /// plateau's figures without its warm-up. Latency phases are left out; the smallest and
    /// largest latency are the histogram's (within its precision).
    pub fn since(&self, earlier: &StepStats) -> StepStats {
        let mut d = StepStats { phases: Phases::default(), ..self.clone() };
        let _ = d.latency.subtract(&earlier.latency);
        d.requests = self.requests.saturating_sub(earlier.requests);
        for (a, b) in d.errors.iter_mut().zip(earlier.errors.iter()) {
            *a = a.saturating_sub(*b);
        }
        d.bytes_sent = self.bytes_sent.saturating_sub(earlier.bytes_sent);
        d.bytes_received = self.bytes_received.saturating_sub(earlier.bytes_received);
        d.messages_sent = self.messages_sent.saturating_sub(earlier.messages_sent);
        d.messages_received = self.messages_received.saturating_sub(earlier.messages_received);
        for (a, b) in d.status.iter_mut().zip(earlier.status.iter()) {
            *a = a.saturating_sub(*b);
        }
        for (a, b) in d.grpc_status.iter_mut().zip(earlier.grpc_status.iter()) {
            *a = a.saturating_sub(*b);
        }
        for (code, n) in &mut d.ws_close {
            let before = earlier.ws_close.iter().find(|(c, _)| c == code).map_or(0, |(_, n)| *n);
            *n = n.saturating_sub(before);
        }
        d.ws_close.retain(|(_, n)| *n > 0);
        for (a, b) in d.checks.iter_mut().zip(earlier.checks.iter()) {
            a[0] = a[0].saturating_sub(b[0]);
            a[1] = a[1].saturating_sub(b[1]);
        }
        if let (Some(mine), Some(before)) = (d.service.as_mut(), earlier.service.as_ref()) {
            let _ = mine.subtract(before.as_ref());
        }
        if let (Some(mine), Some(before)) = (d.round_trip.as_mut(), earlier.round_trip.as_ref()) {
            let _ = mine.subtract(before.as_ref());
        }
        (d.min_us, d.max_us) =
            if d.latency.is_empty() { (u64::MAX, 0) } else { (d.latency.min().max(1), d.latency.max()) };
        d
    }

    /// Takes `part`'s requests, errors, latency counts and codes out of these, where `part`
    /// was merged in before: a running sum that replaces one of its parts with a newer one.
    /// The extremes stay (a part is replaced only by one that holds it). `Err` when `part` is
    /// not in these (its latency counts are not), and nothing was taken.
    pub fn take_out(&mut self, part: &StepStats) -> Result<(), hdrhistogram::SubtractionError> {
        self.latency.subtract(&part.latency)?;
        self.requests = self.requests.saturating_sub(part.requests);
        for (a, b) in self.errors.iter_mut().zip(part.errors.iter()) {
            *a = a.saturating_sub(*b);
        }
        for (a, b) in self.status.iter_mut().zip(part.status.iter()) {
            *a = a.saturating_sub(*b);
        }
        for (a, b) in self.grpc_status.iter_mut().zip(part.grpc_status.iter()) {
            *a = a.saturating_sub(*b);
        }
        for (code, n) in &mut self.ws_close {
            let theirs = part.ws_close.iter().find(|(c, _)| c == code).map_or(0, |(_, n)| *n);
            *n = n.saturating_sub(theirs);
        }
        self.ws_close.retain(|(_, n)| *n > 0);
        Ok(())
    }

    /// Adds another's HTTP status codes, gRPC statuses and WebSocket close codes into these
    /// (and nothing else).
    pub fn merge_codes(&mut self, other: &StepStats) {
        for (a, b) in self.status.iter_mut().zip(other.status.iter()) {
            *a += b;
        }
        for (a, b) in self.grpc_status.iter_mut().zip(other.grpc_status.iter()) {
            *a += b;
        }
        for &(code, n) in &other.ws_close {
            self.add_ws_close(code, n);
        }
    }

    /// Adds another worker's stats into these.
    pub fn merge(&mut self, other: &StepStats) {
        self.latency.merge_from(&other.latency).expect("histograms share bounds");
        self.requests += other.requests;
        for (a, b) in self.errors.iter_mut().zip(other.errors.iter()) {
            *a += b;
        }
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.messages_sent += other.messages_sent;
        self.messages_received += other.messages_received;
        self.min_us = self.min_us.min(other.min_us);
        self.max_us = self.max_us.max(other.max_us);
        self.merge_codes(other);
        for (i, c) in other.checks.iter().enumerate() {
            self.add_check(i, c[0], c[1]);
        }
        self.phases.merge(&other.phases);
        if let Some(o) = &other.service {
            let mine = self.service.get_or_insert_with(|| Box::new(new_histogram()));
            mine.merge_from(o.as_ref()).expect("histograms share bounds");
        }
        if let Some(o) = &other.round_trip {
            let mine = self.round_trip.get_or_insert_with(|| Box::new(new_histogram()));
            mine.merge_from(o.as_ref()).expect("histograms share bounds");
        }
    }
}

/// What one worker records in one reporting interval (all steps together).
#[derive(Clone, Debug)]
pub struct IntervalStats {
    /// Latency of the answers of every step, µs.
    pub latency: Histogram<u64>,
    /// Requests attempted, all steps together.
    pub requests: u64,
    /// Failed requests, all kinds together.
    pub errors: u64,
    /// Failed requests by kind (indexed by [`ErrorKind::index`]); they add up to `errors`.
    pub errors_by_kind: [u64; KINDS],
    /// Iterations completed, all scenarios together.
    pub iterations: u64,
    /// Open models: iterations that started on schedule in this interval.
    pub started: u64,
    /// Open models: iterations dropped in this interval (every VU busy: the wait queue was
    /// full, the wait too long, or the run ended while they waited).
    pub dropped: u64,
    /// Open models: iterations that started in this interval after waiting for a free VU.
    pub waited: u64,
    /// Open models: the latest an iteration of this interval started against its schedule, µs.
    pub lag_max_us: u64,
    /// Per step (indexed like the plan's step keys; steps after the last one recorded are
    /// missing): what the timeline keeps of each step.
    pub steps: Vec<IntervalStep>,
}

/// One step's part of an interval.
#[derive(Clone, Debug)]
pub struct IntervalStep {
    /// Requests attempted.
    pub requests: u64,
    /// Failed requests by kind (indexed by [`ErrorKind::index`]).
    pub errors_by_kind: [u64; KINDS],
    /// Latency of answered requests, µs, at 2 significant digits.
    pub latency: Histogram<u64>,
}

impl Default for IntervalStep {
    fn default() -> Self {
        IntervalStep { requests: 0, errors_by_kind: [0; KINDS], latency: new_interval_histogram() }
    }
}

impl IntervalStep {
    /// Failed requests, all kinds together.
    pub fn errors(&self) -> u64 {
        self.errors_by_kind.iter().sum()
    }

    /// Adds another worker's part of the same step into this one.
    pub fn merge(&mut self, other: &IntervalStep) {
        self.requests += other.requests;
        for (a, b) in self.errors_by_kind.iter_mut().zip(other.errors_by_kind.iter()) {
            *a += b;
        }
        self.latency.merge_from(&other.latency).expect("histograms share bounds");
    }
}

impl Default for IntervalStats {
    fn default() -> Self {
        IntervalStats {
            latency: new_histogram(),
            requests: 0,
            errors: 0,
            errors_by_kind: [0; KINDS],
            iterations: 0,
            started: 0,
            dropped: 0,
            waited: 0,
            lag_max_us: 0,
            steps: Vec::new(),
        }
    }
}

impl IntervalStats {
    /// Counts one failed request of `kind` at step `metric`.
    #[inline]
    pub fn record_error(&mut self, metric: usize, kind: ErrorKind) {
        self.errors += 1;
        self.errors_by_kind[kind.index()] += 1;
        self.step(metric).errors_by_kind[kind.index()] += 1;
    }

    /// Counts one request of step `metric`.
    #[inline]
    pub fn record_request(&mut self, metric: usize) {
        self.requests += 1;
        self.step(metric).requests += 1;
    }

    /// Records the latency of an answer of step `metric`, µs.
    #[inline]
    pub fn record_latency(&mut self, metric: usize, micros: u64) {
        self.latency.record_us(micros);
        self.step(metric).latency.record_us(micros);
    }

    /// Step `metric`'s part (created when first used).
    #[inline]
    pub fn step(&mut self, metric: usize) -> &mut IntervalStep {
        if self.steps.len() <= metric {
            self.steps.resize_with(metric + 1, IntervalStep::default);
        }
        &mut self.steps[metric]
    }

    /// Adds another worker's interval into this one (`lag_max_us` is the larger of the two).
    pub fn merge(&mut self, other: &IntervalStats) {
        self.latency.merge_from(&other.latency).expect("histograms share bounds");
        self.requests += other.requests;
        self.errors += other.errors;
        for (a, b) in self.errors_by_kind.iter_mut().zip(other.errors_by_kind.iter()) {
            *a += b;
        }
        self.iterations += other.iterations;
        self.started += other.started;
        self.dropped += other.dropped;
        self.waited += other.waited;
        self.lag_max_us = self.lag_max_us.max(other.lag_max_us);
        for (i, step) in other.steps.iter().enumerate() {
            self.step(i).merge(step);
        }
    }

    /// Empties it for the next interval, keeping the histogram's allocation.
    pub fn reset(&mut self) {
        self.latency.reset();
        self.requests = 0;
        self.errors = 0;
        self.errors_by_kind = [0; KINDS];
        self.iterations = 0;
        self.started = 0;
        self.dropped = 0;
        self.waited = 0;
        self.lag_max_us = 0;
        self.steps.clear();
    }
}

/// All of one worker's recordings.
#[derive(Clone, Debug)]
pub struct WorkerMetrics {
    /// Indexed by the plan's step metric index.
    pub steps: Vec<StepStats>,
    /// The `group` blocks' transactions, indexed like the plan's group keys (those after the
    /// last one recorded are missing): `requests` counts transactions, `errors` the failed ones
    /// by the kind of their first failure, `latency` their durations.
    pub groups: Vec<StepStats>,
    /// Completed iterations per scenario.
    pub iterations: Vec<u64>,
    /// The current reporting interval.
    pub interval: IntervalStats,
    /// Open models: how late iterations started against their schedule, µs.
    pub schedule_lag: Histogram<u64>,
    /// Open models: iterations dropped, by load group.
    pub dropped: Vec<u64>,
    /// Open models: iterations dropped, by [`DropReason`] (all groups; they add up to the sum
    /// of `dropped`).
    pub dropped_by_reason: [u64; DropReason::ALL.len()],
    /// Open models: how long iterations that found every VU busy waited for one, µs (only
    /// those that then started).
    pub queue_wait: Histogram<u64>,
}

/// Why an open model's due iteration was dropped. Each means that every VU (`maxVUs`) was busy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// `maxWaiting` iterations were already waiting for a free VU.
    QueueFull,
    /// It waited `maxWait` and no VU came free.
    WaitedTooLong,
    /// It was still waiting when its group's time was up.
    RunEnded,
}

impl DropReason {
    /// Every reason, in the order of their slots in `dropped_by_reason` (`reason as usize`).
    pub const ALL: [DropReason; 3] = [DropReason::QueueFull, DropReason::WaitedTooLong, DropReason::RunEnded];

    /// The name in reports and portable results.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queueFull",
            DropReason::WaitedTooLong => "waitedTooLong",
            DropReason::RunEnded => "runEnded",
        }
    }
}

impl WorkerMetrics {
    /// Empty recordings for `steps` step metrics and `scenarios` scenarios.
    pub fn new(steps: usize, scenarios: usize) -> Self {
        WorkerMetrics {
            steps: (0..steps).map(|_| StepStats::default()).collect(),
            groups: Vec::new(),
            iterations: vec![0; scenarios],
            interval: IntervalStats::default(),
            schedule_lag: new_histogram(),
            dropped: Vec::new(),
            dropped_by_reason: [0; DropReason::ALL.len()],
            queue_wait: new_histogram(),
        }
    }

    /// Counts an iteration of group `g` that could not start, and why.
    pub fn record_dropped(&mut self, g: usize, why: DropReason) {
        if self.dropped.len() <= g {
            self.dropped.resize(g + 1, 0);
        }
        self.dropped[g] += 1;
        self.dropped_by_reason[why as usize] += 1;
        self.interval.dropped += 1;
    }

    /// Dropped iterations by reason name, the reasons with none left out (reports and
    /// runner results).
    pub fn dropped_by_reason_named(&self) -> std::collections::BTreeMap<String, u64> {
        DropReason::ALL
            .iter()
            .map(|&r| (r.name().to_string(), self.dropped_by_reason[r as usize]))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// An open model's iteration got a VU after waiting `wait_us` for one (it is also counted
    /// by [`Self::record_started`]).
    pub fn record_waited(&mut self, wait_us: u64) {
        self.queue_wait.record_us(wait_us.max(1));
        self.interval.waited += 1;
    }

    /// An open model's iteration started `lag` after its scheduled instant.
    pub fn record_started(&mut self, lag_us: u64) {
        self.schedule_lag.record_us(lag_us.max(1));
        self.interval.started += 1;
        self.interval.lag_max_us = self.interval.lag_max_us.max(lag_us);
    }

    /// Group `g`'s transactions (created when first used).
    pub fn group(&mut self, g: usize) -> &mut StepStats {
        if self.groups.len() <= g {
            self.groups.resize_with(g + 1, StepStats::default);
        }
        &mut self.groups[g]
    }

    /// Adds another worker's recordings into these (steps and scenarios by position).
    pub fn merge(&mut self, other: &WorkerMetrics) {
        for (a, b) in self.steps.iter_mut().zip(other.steps.iter()) {
            a.merge(b);
        }
        for (g, b) in other.groups.iter().enumerate() {
            self.group(g).merge(b);
        }
        for (a, b) in self.iterations.iter_mut().zip(other.iterations.iter()) {
            *a += b;
        }
        self.schedule_lag.merge_from(&other.schedule_lag).expect("histograms share bounds");
        for (g, n) in other.dropped.iter().enumerate() {
            if self.dropped.len() <= g {
                self.dropped.resize(g + 1, 0);
            }
            self.dropped[g] += n;
        }
        for (a, b) in self.dropped_by_reason.iter_mut().zip(other.dropped_by_reason) {
            *a += b;
        }
        self.queue_wait.merge_from(&other.queue_wait).expect("histograms share bounds");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per-worker histograms merged give exactly the percentiles of one histogram of all
    /// samples.
    #[test]
    fn merged_worker_histograms_equal_one_histogram_of_all_samples() {
        let mut rng = fastrand::Rng::with_seed(7);
        let samples: Vec<u64> = (0..30_000)
            .map(|i| match i % 10 {
                0 => rng.u64(50_000..2_000_000), // a slow tail
                _ => rng.u64(80..2_000),
            })
            .collect();
        let mut all = StepStats::default();
        let mut workers: Vec<StepStats> = (0..4).map(|_| StepStats::default()).collect();
        for (i, &s) in samples.iter().enumerate() {
            all.record_latency_us(s);
            // Uneven split: worker 0 gets most of the slow tail.
            let w = if s > 50_000 { i % 2 } else { i % 4 };
            workers[w].record_latency_us(s);
        }
        let mut merged = StepStats::default();
        for w in &workers {
            merged.merge(w);
        }
        for q in [0.5, 0.75, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(merged.latency.value_at_quantile(q), all.latency.value_at_quantile(q), "q={q}");
        }
        assert_eq!(merged.latency.len(), samples.len() as u64);
        assert_eq!(merged.latency.min(), all.latency.min());
        assert_eq!(merged.latency.max(), all.latency.max());
        assert_eq!(merged.max_us, *samples.iter().max().unwrap());
        assert_eq!(merged.min_latency_us(), *samples.iter().min().unwrap());
        assert!((merged.latency.mean() - all.latency.mean()).abs() < 1e-6);
        // Averaging the workers' p99s would be wrong: it differs from the true p99.
        let avg_p99: f64 = workers.iter().map(|w| w.latency.value_at_quantile(0.99) as f64).sum::<f64>() / 4.0;
        assert_ne!(avg_p99 as u64, all.latency.value_at_quantile(0.99));
        // The percentiles match the exact order statistics within histogram precision.
        let mut sorted = samples.clone();
        sorted.sort_unstable();
        let exact_p99 = sorted[(sorted.len() as f64 * 0.99).ceil() as usize - 1];
        let hdr_p99 = merged.latency.value_at_quantile(0.99);
        assert!(hdr_p99.abs_diff(exact_p99) as f64 <= exact_p99 as f64 * 0.001 + 1.0, "{hdr_p99} vs {exact_p99}");
    }

    #[test]
    fn counts_statuses_and_errors() {
        let mut s = StepStats::default();
        s.record_status(200);
        s.record_status(200);
        s.record_status(503);
        s.record_status(42); // out of range: ignored
        s.record_error(ErrorKind::Timeout);
        assert_eq!(s.status_counts().collect::<Vec<_>>(), vec![(200, 2), (503, 1)]);
        assert_eq!(s.error_total(), 1);
    }

    #[test]
    fn grpc_statuses_and_close_codes_are_tallied_apart_from_http_statuses_and_merge_exactly() {
        let mut a = StepStats::default();
        a.add_grpc_status(0, 40);
        a.add_grpc_status(5, 80);
        a.add_grpc_status(99, 1); // not a status gRPC defines: UNKNOWN, as clients read it
        a.add_ws_close(4001, 2);
        a.add_ws_close(1000, 3);
        assert_eq!(a.status_counts().count(), 0, "no HTTP status was recorded");
        assert_eq!(a.grpc_status_counts().collect::<Vec<_>>(), vec![(0, 40), (2, 1), (5, 80)]);
        assert_eq!(a.ws_close_counts().collect::<Vec<_>>(), vec![(1000, 3), (4001, 2)]);
        let mut b = StepStats::default();
        b.add_grpc_status(5, 7);
        b.add_ws_close(1006, 1);
        b.add_ws_close(1000, 1);
        let before = a.clone();
        a.merge(&b);
        assert_eq!(a.grpc_status_counts().collect::<Vec<_>>(), vec![(0, 40), (2, 1), (5, 87)]);
        assert_eq!(a.ws_close_counts().collect::<Vec<_>>(), vec![(1000, 4), (1006, 1), (4001, 2)]);
        // What came after a snapshot is exactly the other's.
        let since = a.since(&before);
        assert_eq!(since.grpc_status_counts().collect::<Vec<_>>(), vec![(5, 7)]);
        assert_eq!(since.ws_close_counts().collect::<Vec<_>>(), vec![(1000, 1), (1006, 1)]);
    }
}
