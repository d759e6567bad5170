//! The one histogram shape every latency is recorded in, so that any two merge exactly.

use hdrhistogram::Histogram;

/// Highest latency a histogram tracks (10 minutes, in µs); larger values saturate.
pub const MAX_LATENCY_US: u64 = 600_000_000;
/// Significant decimal digits kept by every latency histogram.
pub const SIGFIG: u8 = 3;

/// A new latency histogram in microseconds.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, SIGFIG).expect("valid histogram bounds")
}

/// Significant decimal digits of the per-step histograms of one timeline interval: a point of a
/// chart needs no more than 1 %, and it keeps a long cluster run's timeline small (see
/// the portable timeline).
pub const INTERVAL_SIGFIG: u8 = 2;

/// A new per-step interval histogram in microseconds (same bounds, [`INTERVAL_SIGFIG`]).
pub fn new_interval_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, INTERVAL_SIGFIG).expect("valid histogram bounds")
}
