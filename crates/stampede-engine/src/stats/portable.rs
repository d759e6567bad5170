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
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
pub use stampede_model::portable::{PortableMetrics, PortablePhase, PortableStep};
use stampede_model::{ErrorKind, StepKey};

use crate::stats::metrics::{IntervalStats, StepStats, WorkerMetrics, errors_by_name};
use crate::stats::phases::{Phase, PhaseStats, Phases};

/// Why portable metrics could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum PortableError {
    #[error("step `{scenario}/{step}`: histogram is not valid base64: {source}")]
    Base64 { scenario: String, step: String, source: base64::DecodeError },
    #[error("step `{scenario}/{step}`: histogram cannot be decoded: {message}")]
    Histogram { scenario: String, step: String, message: String },
    #[error("unknown error kind `{0}`")]
    ErrorKind(String),
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
        bytes_sent: 0,
        bytes_received: 0,
        min_us: (!empty).then(|| stats.latency.min()),
        max_us: if empty { 0 } else { stats.latency.max() },
        histogram: STANDARD.encode(raw),
        checks: Vec::new(),
        phases: BTreeMap::new(),
    }
}

/// Encodes per-step stats named by `keys`, and iterations per scenario.
pub fn encode(keys: &[StepKey], metrics: &WorkerMetrics, scenario_names: &[String]) -> PortableMetrics {
    let steps = keys
        .iter()
        .zip(&metrics.steps)
        .map(|(key, s)| {
            let mut raw = Vec::new();
            let _ = V2DeflateSerializer::new().serialize(&s.latency, &mut raw);
            PortableStep {
                scenario: key.scenario.clone(),
                step: key.step.clone(),
                requests: s.requests,
                errors: errors_by_name(&s.errors),
                status: s.status_counts().map(|(c, n)| (c.to_string(), n)).collect(),
                bytes_sent: s.bytes_sent,
                bytes_received: s.bytes_received,
                min_us: (!s.latency.is_empty()).then_some(s.min_us),
                max_us: s.max_us,
                histogram: STANDARD.encode(raw),
                checks: s.checks.clone(),
                phases: encode_phases(&s.phases),
            }
        })
        .collect();
    let iterations = scenario_names.iter().cloned().zip(metrics.iterations.iter().copied()).collect();
    PortableMetrics { steps, iterations, dropped_iterations: metrics.dropped.iter().sum() }
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
    Ok(())
}

fn encode_phases(phases: &Phases) -> BTreeMap<String, PortablePhase> {
    Phase::ALL
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
    let raw = STANDARD.decode(&p.histogram).map_err(|source| PortableError::Base64 {
        scenario: p.scenario.clone(),
        step: p.step.clone(),
        source,
    })?;
    let mut s = StepStats::default();
    if !raw.is_empty() {
        let h: hdrhistogram::Histogram<u64> = Deserializer::new().deserialize(&mut Cursor::new(raw)).map_err(|e| {
            PortableError::Histogram { scenario: p.scenario.clone(), step: p.step.clone(), message: format!("{e:?}") }
        })?;
        s.latency.add(&h).map_err(|e| PortableError::Histogram {
            scenario: p.scenario.clone(),
            step: p.step.clone(),
            message: format!("{e:?}"),
        })?;
    }
    s.requests = p.requests;
    for (kind, n) in &p.errors {
        let k =
            ErrorKind::ALL.iter().find(|k| k.name() == kind).ok_or_else(|| PortableError::ErrorKind(kind.clone()))?;
        s.errors[k.index()] += n;
    }
    for (code, n) in &p.status {
        if let Ok(code) = code.parse::<u16>() {
            s.add_status(code, *n);
        }
    }
    s.bytes_sent = p.bytes_sent;
    s.bytes_received = p.bytes_received;
    s.min_us = p.min_us.unwrap_or(u64::MAX);
    s.max_us = p.max_us;
    s.checks = p.checks.clone();
    for (name, portable) in &p.phases {
        // A phase this version does not know (from a newer runner) is left out.
        let Some(&phase) = Phase::ALL.iter().find(|ph| ph.name() == name) else { continue };
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
            m.iterations[0] = 10 + runner;
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
        assert_eq!(merged.iterations[0], 10 + 11 + 12 + 13 + 14);
        let connect = s.phases.get(Phase::Connect).unwrap();
        assert_eq!((connect.count(), connect.min_value_us(), connect.max_us), (5, 100, 104));
        assert_eq!(s.phases.get(Phase::Tls).unwrap().count(), 5);
        assert_eq!(s.phases.get(Phase::Ttfb).unwrap().count(), 5);
        assert!(s.phases.get(Phase::Dns).is_none());
    }

    /// A runner's running total (interval stats) travels as one step and decodes to the
    /// same counts and percentiles.
    #[test]
    fn interval_totals_encode_as_one_step() {
        let mut total = IntervalStats::default();
        for tick in 0..3u64 {
            let mut t = IntervalStats::default();
            for i in 0..1_000 {
                t.latency.saturating_record(200 + i * (tick + 1));
                t.requests += 1;
            }
            t.record_error(ErrorKind::Timeout);
            t.record_error(ErrorKind::Check);
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
            iterations: BTreeMap::new(),
            dropped_iterations: 0,
        };
        let mut m = WorkerMetrics::new(1, 1);
        assert!(merge_into(&bad, &keys, &names, &mut m).is_err());
    }
}
