//! Where random numbers come from: one stream per user of them, each derived from the run's
//! seed and who draws it.
//!
//! A VU draws its data rows, weighted scenario picks, think times and generated values
//! (`uuid()`, `randomInt`…) from its own stream (a WebSocket key is never drawn: it must differ
//! on every connection, whatever the seed), named by its number in the
//! whole test (`vu.id`, distinct across runners); `setup`, `teardown` and the `test`-scoped
//! variables have streams of their own. The same seed gives every stream the same numbers
//! again; distinct streams of one seed start from distinct states.

/// Who draws from a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stream {
    /// The `test`-scoped variables, computed once when the scenario compiles (the same on
    /// every runner that shares the seed).
    Test,
    /// The `setup` steps.
    Setup,
    /// The `teardown` steps.
    Teardown,
    /// The VU with this number in the whole test (`vu.id`, from 1).
    Vu(u32),
}

impl Stream {
    /// The stream's number, distinct for distinct streams.
    fn code(self) -> u64 {
        match self {
            Stream::Test => 0,
            Stream::Setup => 1,
            Stream::Teardown => 2,
            Stream::Vu(id) => 3 + u64::from(id),
        }
    }
}

/// SplitMix64's output function: a bijection of `u64` that spreads each bit of its input over
/// all of its output.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The starting state of `stream` in a run seeded `seed`. Both steps are bijections, so two
/// streams of one seed never start from the same state.
pub fn stream_seed(seed: u64, stream: Stream) -> u64 {
    splitmix64(splitmix64(seed) ^ stream.code())
}

/// A generator of `stream` in a run seeded `seed`.
pub fn rng(seed: u64, stream: Stream) -> fastrand::Rng {
    fastrand::Rng::with_seed(stream_seed(seed, stream))
}

/// The number in the whole test of VU `vu` (from 1 in its runner) of runner `runner` of
/// `runners`: runner `r` of `n` numbers its VUs `r + 1`, `r + 1 + n`, `r + 1 + 2n`… (distinct
/// across runners, and 1, 2, 3… on one machine).
pub fn fleet_vu_id(vu: u32, runner: u32, runners: u32) -> u32 {
    (vu.max(1) - 1).saturating_mul(runners.max(1)).saturating_add(runner + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_stream_of_a_seed_starts_apart_and_repeats_with_the_seed() {
        let runners = 4;
        let mut streams = vec![Stream::Test, Stream::Setup, Stream::Teardown];
        for runner in 0..runners {
            streams.extend((1..=50).map(|vu| Stream::Vu(fleet_vu_id(vu, runner, runners))));
        }
        let seeds: HashSet<u64> = streams.iter().map(|s| stream_seed(7, *s)).collect();
        assert_eq!(seeds.len(), 3 + 4 * 50, "one starting state per stream");
        // Their first draws differ too (not only their states).
        let firsts: HashSet<u64> = streams.iter().map(|s| rng(7, *s).u64(..)).collect();
        assert_eq!(firsts.len(), streams.len());
        for s in &streams {
            assert_eq!(rng(7, *s).u64(..), rng(7, *s).u64(..), "{s:?} repeats with its seed");
            assert_ne!(stream_seed(7, *s), stream_seed(8, *s), "{s:?} moves with the seed");
        }
    }

    #[test]
    fn vu_numbers_are_distinct_across_runners() {
        let ids: Vec<u32> = (0..3).flat_map(|r| (1..=4).map(move |vu| fleet_vu_id(vu, r, 3))).collect();
        assert_eq!(ids, [1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12]);
        assert_eq!((1..=3).map(|vu| fleet_vu_id(vu, 0, 1)).collect::<Vec<_>>(), [1, 2, 3]);
    }
}
