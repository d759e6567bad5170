//! Latency phases of a request: DNS lookup, TCP connect, TLS handshake (those three only
//! when the request opened a connection), time to first byte and receive.
//!
//! Each phase has its own HDR histogram per step, allocated on the first sample, so steps
//! that never open a connection carry no DNS, connect or TLS histograms. Time to first
//! byte is measured from the start of the step (so it includes any connect and handshake,
//! as curl's `time_starttransfer` does) and receive is the rest of the total: for every
//! sample `ttfb + receive = total`, hence `ttfb <= total`. Both are recorded for exactly
//! the answered requests whose total is recorded, with the same histogram settings, so
//! each percentile of `ttfb` is at most the same percentile of the total.

use hdrhistogram::Histogram;

use crate::stats::histogram::{Latencies as _, new_histogram};

/// One latency phase of a request (not to be mistaken for a LoadTest's lifecycle `Phase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LatencyPhase {
    /// Name resolution (only when the host is a name and a connection was opened).
    Dns,
    /// TCP connect (new connections only).
    Connect,
    /// TLS handshake (new `https` connections only).
    Tls,
    /// From the start of the step to the first byte of the answer.
    Ttfb,
    /// From the first byte to the end of the answer.
    Receive,
}

impl LatencyPhase {
    /// Every phase, in request order (which is also [`LatencyPhase::index`] order).
    pub const ALL: [LatencyPhase; 5] =
        [LatencyPhase::Dns, LatencyPhase::Connect, LatencyPhase::Tls, LatencyPhase::Ttfb, LatencyPhase::Receive];

    /// Position in [`LatencyPhase::ALL`], 0–4.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name in portable results and Prometheus labels: `dns`, `connect`, `tls`, `ttfb`,
    /// `receive`.
    pub fn name(self) -> &'static str {
        match self {
            LatencyPhase::Dns => "dns",
            LatencyPhase::Connect => "connect",
            LatencyPhase::Tls => "tls",
            LatencyPhase::Ttfb => "ttfb",
            LatencyPhase::Receive => "receive",
        }
    }
}

/// What opening one connection took, in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectTimes {
    /// Name resolution, when the host was a name.
    pub dns_us: Option<u64>,
    /// The TCP connect.
    pub connect_us: u64,
    /// The TLS handshake, on an `https` connection.
    pub tls_us: Option<u64>,
}

/// One phase's samples: a histogram and the exact extremes.
#[derive(Clone, Debug)]
pub struct PhaseStats {
    /// Every sample, µs (at least 1).
    pub histogram: Histogram<u64>,
    /// Exact smallest sample, µs (`u64::MAX` when there is none; see [`Self::min_value_us`]).
    pub min_us: u64,
    /// Exact largest sample, µs (0 when there is none).
    pub max_us: u64,
}

impl PhaseStats {
    fn new() -> Self {
        PhaseStats { histogram: new_histogram(), min_us: u64::MAX, max_us: 0 }
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// Value at quantile `q` (0–1) in µs, never above the exact maximum.
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.histogram.is_empty() { 0 } else { self.histogram.value_at_quantile(q).min(self.max_us) }
    }

    /// Exact smallest value in µs (0 when there is none).
    pub fn min_value_us(&self) -> u64 {
        if self.histogram.is_empty() { 0 } else { self.min_us }
    }

    fn record(&mut self, us: u64) {
        let us = us.max(1);
        self.histogram.record_us(us);
        self.min_us = self.min_us.min(us);
        self.max_us = self.max_us.max(us);
    }

    /// Adds `other`'s samples (histograms of any bounds).
    pub fn merge(&mut self, other: &PhaseStats) {
        self.histogram.merge_from(&other.histogram).expect("histograms share bounds");
        self.min_us = self.min_us.min(other.min_us);
        self.max_us = self.max_us.max(other.max_us);
    }

    /// LatencyPhase stats made of a decoded histogram and its exact extremes.
    pub fn from_parts(histogram: &Histogram<u64>, min_us: Option<u64>, max_us: u64) -> Result<PhaseStats, String> {
        let mut s = PhaseStats::new();
        s.histogram.merge_from(histogram).map_err(|e| format!("{e:?}"))?;
        s.min_us = min_us.unwrap_or(u64::MAX);
        s.max_us = max_us;
        Ok(s)
    }
}

/// The phase histograms of one step, each allocated on its first sample.
#[derive(Clone, Debug, Default)]
pub struct Phases {
    slots: [Option<Box<PhaseStats>>; 5],
}

impl Phases {
    /// The samples of `phase`, if any were recorded.
    pub fn get(&self, phase: LatencyPhase) -> Option<&PhaseStats> {
        self.slots[phase.index()].as_deref()
    }

    /// Records one sample of `phase`, µs (raised to at least 1).
    #[inline]
    pub fn record(&mut self, phase: LatencyPhase, us: u64) {
        self.slots[phase.index()].get_or_insert_with(|| Box::new(PhaseStats::new())).record(us);
    }

    /// Records the phases of a newly opened connection.
    pub fn record_connect(&mut self, times: &ConnectTimes) {
        if let Some(us) = times.dns_us {
            self.record(LatencyPhase::Dns, us);
        }
        self.record(LatencyPhase::Connect, times.connect_us);
        if let Some(us) = times.tls_us {
            self.record(LatencyPhase::Tls, us);
        }
    }

    /// Records time to first byte and receive of an answer whose total is `total_us`.
    #[inline]
    pub fn record_answer(&mut self, ttfb_us: u64, total_us: u64) {
        let ttfb = ttfb_us.min(total_us);
        self.record(LatencyPhase::Ttfb, ttfb);
        self.record(LatencyPhase::Receive, total_us - ttfb);
    }

    /// Replaces the samples of `phase`.
    pub fn set(&mut self, phase: LatencyPhase, stats: PhaseStats) {
        self.slots[phase.index()] = Some(Box::new(stats));
    }

    /// Adds another worker's phase samples into these.
    pub fn merge(&mut self, other: &Phases) {
        for (a, b) in self.slots.iter_mut().zip(&other.slots) {
            match (a.as_deref_mut(), b) {
                (_, None) => {}
                (Some(a), Some(b)) => a.merge(b),
                (None, Some(b)) => *a = Some(b.clone()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With `ttfb <= total` per sample, every percentile of ttfb stays at or below the same
    /// percentile of the total, even where HDR rounds values up within its precision.
    #[test]
    fn ttfb_percentiles_never_exceed_total_percentiles() {
        let mut rng = fastrand::Rng::with_seed(3);
        let mut total = crate::stats::metrics::StepStats::default();
        let mut phases = Phases::default();
        for _ in 0..50_000 {
            let t = rng.u64(1..5_000_000);
            // Often almost all of the total, as on loopback.
            let ttfb = if rng.bool() { t.saturating_sub(rng.u64(0..3)) } else { rng.u64(0..=t) };
            total.record_latency_us(t);
            phases.record_answer(ttfb, t.max(1));
        }
        let ttfb = phases.get(LatencyPhase::Ttfb).unwrap();
        assert_eq!(ttfb.count(), total.latency.len());
        for q in [0.0, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert!(ttfb.quantile_us(q) <= total.quantile_us(q), "q={q}");
        }
        assert!(ttfb.max_us <= total.max_us);
        assert!(phases.get(LatencyPhase::Connect).is_none(), "nothing allocated without samples");
    }

    #[test]
    fn connect_phases_are_recorded_only_when_present_and_merge() {
        let mut a = Phases::default();
        a.record_connect(&ConnectTimes { dns_us: None, connect_us: 120, tls_us: Some(900) });
        let mut b = Phases::default();
        b.record_connect(&ConnectTimes { dns_us: Some(40), connect_us: 80, tls_us: None });
        a.merge(&b);
        assert_eq!(a.get(LatencyPhase::Connect).unwrap().count(), 2);
        assert_eq!(a.get(LatencyPhase::Tls).unwrap().count(), 1);
        assert_eq!(a.get(LatencyPhase::Dns).unwrap().count(), 1);
        assert_eq!(a.get(LatencyPhase::Connect).unwrap().min_value_us(), 80);
        assert!(a.get(LatencyPhase::Ttfb).is_none());
    }
}
