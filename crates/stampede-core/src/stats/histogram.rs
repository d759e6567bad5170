//! The one histogram shape every latency is recorded in, so that any two merge exactly.
//!
//! A histogram starts with the counts of latencies up to [`INITIAL_HIGH_US`] and grows (to at
//! most [`MAX_LATENCY_US`]) as larger ones are recorded or merged in: a step answered within
//! milliseconds keeps a few kilobytes of counts, not the 170 KB that ten minutes take at three
//! digits. Growing keeps every count where it was, so the figures are those of a histogram made
//! at full size. Record with [`Latencies::record_us`] and merge with [`Latencies::merge_from`],
//! which take care of the growing.

use hdrhistogram::{AdditionError, Histogram};

/// Highest latency a histogram tracks (10 minutes, in µs); larger values saturate.
pub const MAX_LATENCY_US: u64 = 600_000_000;
/// Significant decimal digits kept by every latency histogram.
pub const SIGFIG: u8 = 3;
/// The largest latency a new histogram has room for before it grows (µs): at 3 digits, one
/// bucket of 2,048 counts (latencies under 2,048 µs).
pub const INITIAL_HIGH_US: u64 = 2_047;

/// A new latency histogram in microseconds.
pub fn new_histogram() -> Histogram<u64> {
    growing(SIGFIG)
}

/// Significant decimal digits of the per-step histograms of one timeline interval: a point of a
/// chart needs no more than 1 %, and it keeps a long cluster run's timeline small (see
/// the portable timeline).
pub const INTERVAL_SIGFIG: u8 = 2;

/// A new per-step interval histogram in microseconds (same bounds, [`INTERVAL_SIGFIG`]).
pub fn new_interval_histogram() -> Histogram<u64> {
    growing(INTERVAL_SIGFIG)
}

fn growing(sigfig: u8) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, INITIAL_HIGH_US, sigfig).expect("valid histogram bounds");
    h.auto(true);
    h
}

/// Recording into and merging latency histograms of any size.
pub trait Latencies {
    /// Records `us` microseconds: raised to 1, and a value above [`MAX_LATENCY_US`] counted
    /// as that maximum. The counts grow to hold it.
    fn record_us(&mut self, us: u64);

    /// Adds `other`'s counts into these, growing them to hold `other`'s largest value. Refused
    /// when that value is above [`MAX_LATENCY_US`] (no histogram of ours holds one, so
    /// `other` came from elsewhere).
    fn merge_from(&mut self, other: &Histogram<u64>) -> Result<(), AdditionError>;
}

impl Latencies for Histogram<u64> {
    #[inline]
    fn record_us(&mut self, us: u64) {
        let us = us.clamp(1, MAX_LATENCY_US);
        if self.record(us).is_err() {
            // A histogram decoded from a portable result does not grow until told to.
            self.auto(true);
            self.record(us).expect("a histogram grows to MAX_LATENCY_US");
        }
    }

    fn merge_from(&mut self, other: &Histogram<u64>) -> Result<(), AdditionError> {
        if other.max() > MAX_LATENCY_US {
            return Err(AdditionError::OtherAddendValueExceedsRange);
        }
        self.auto(true);
        self.add(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full-size histogram, as every histogram was made before they grew.
    fn full(sigfig: u8) -> Histogram<u64> {
        Histogram::new_with_bounds(1, MAX_LATENCY_US, sigfig).unwrap()
    }

    #[test]
    fn a_histogram_of_small_latencies_is_small_and_grows_only_as_far_as_its_largest_value() {
        let mut h = new_histogram();
        for us in 1..2_000 {
            h.record_us(us);
        }
        assert_eq!(h.distinct_values(), 2_048, "one bucket of counts");
        h.record_us(40_000);
        // Buckets of 1,024 counts up to 65,536 µs, against 20 for ten minutes.
        assert_eq!((h.distinct_values(), full(SIGFIG).distinct_values()), (7_168, 21_504));
        h.record_us(u64::MAX);
        assert_eq!(h.max(), h.highest_equivalent(MAX_LATENCY_US), "saturates at the maximum");
        assert_eq!(h.distinct_values(), full(SIGFIG).distinct_values());
    }

    #[test]
    fn grown_histograms_give_the_same_figures_as_full_size_ones() {
        let values: Vec<u64> = (0..5_000u64).map(|i| (i * i * 7919) % 3_000_000 + 1).collect();
        for sigfig in [SIGFIG, INTERVAL_SIGFIG] {
            let mut reference = full(sigfig);
            let (mut a, mut b) = (growing(sigfig), growing(sigfig));
            for (i, v) in values.iter().enumerate() {
                reference.saturating_record(*v);
                if i % 2 == 0 { a.record_us(*v) } else { b.record_us(*v) }
            }
            // Small into large, large into small, and into a full-size one.
            let mut merged = growing(sigfig);
            merged.merge_from(&b).unwrap();
            merged.merge_from(&a).unwrap();
            let mut into_full = full(sigfig);
            into_full.merge_from(&a).unwrap();
            into_full.merge_from(&b).unwrap();
            for h in [&merged, &into_full] {
                assert_eq!(h.len(), reference.len());
                for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
                    assert_eq!(h.value_at_quantile(q), reference.value_at_quantile(q), "q {q}, sigfig {sigfig}");
                }
                assert_eq!((h.min(), h.max()), (reference.min(), reference.max()));
            }
        }
    }

    #[test]
    fn a_histogram_from_elsewhere_with_values_beyond_the_maximum_is_refused() {
        let mut theirs = Histogram::<u64>::new_with_bounds(1, u64::MAX / 4, 3).unwrap();
        theirs.record(MAX_LATENCY_US * 10).unwrap();
        assert!(new_histogram().merge_from(&theirs).is_err());
    }
}
