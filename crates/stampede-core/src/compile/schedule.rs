//! An open model's schedule with the load changes taken while it runs (a live `rate`, a pause,
//! a resume): pure, so that every worker of a run computes the same instants from the same
//! changes, each starting its own share of the iterations (`k ≡ worker (mod workers)`).
//!
//! Iterations keep their numbers across changes. Up to a change's instant they come as before;
//! from it, iteration `first` (the first one not due before the instant) and the next ones come
//! at the new pace: a live rate (constant, per second), none while paused, or the plan's own rate
//! again on a resume without a live rate. Each iteration is due at exactly one instant, so a
//! change neither repeats nor loses one. Every pace ends where the plan does.

use std::time::Duration;

use stampede_model::report::LoadChange;

use crate::compile::load::LoadPlan;

/// How iterations come from a segment's start on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// The plan's rate, its integral counted on from `base` at the segment's start.
    Plan {
        /// The plan's integral at the segment's start.
        base: f64,
    },
    /// A live rate, iterations per second.
    Rate(f64),
    /// None (paused).
    Paused,
}

/// One part of the schedule: from `from` on, iteration `first` and the next ones come at `pace`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    /// Its start, from the run's start.
    pub from: Duration,
    /// The first iteration it starts.
    pub first: u64,
    /// How its iterations come.
    pub pace: Pace,
}

/// When an iteration is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// At this time from the run's start.
    At(Duration),
    /// Not while the run is paused: ask again after the next change.
    Paused,
    /// Never: the plan ends first.
    End,
}

/// An open model's schedule, with the changes taken so far.
#[derive(Clone, Debug)]
pub struct OpenSchedule {
    load: LoadPlan,
    end: Duration,
    segments: Vec<Segment>,
}

impl OpenSchedule {
    /// The schedule of `load` (an open model's) after `changes`, in the order taken (`t` from
    /// the run's start, never decreasing); `vus` changes are not its to take.
    pub fn new(load: &LoadPlan, changes: &[LoadChange]) -> OpenSchedule {
        let end = load.planned_duration().unwrap_or_default();
        let mut schedule = OpenSchedule {
            load: load.clone(),
            end,
            segments: vec![Segment { from: Duration::ZERO, first: 0, pace: Pace::Plan { base: 0.0 } }],
        };
        // What a resume goes back to: the plan, or the last live rate.
        let mut running_rate: Option<f64> = None;
        for change in changes {
            if change.rate.is_none() && change.paused.is_none() {
                continue;
            }
            let last = *schedule.segments.last().unwrap_or(&schedule.segments[0]);
            let at = Duration::from_secs_f64(change.t.max(0.0)).max(last.from);
            if let Some(rate) = change.rate {
                running_rate = Some(f64::from(rate));
            }
            let paused = change.paused.unwrap_or(last.pace == Pace::Paused);
            let pace = match (paused, running_rate) {
                (true, _) => Pace::Paused,
                (false, Some(rate)) => Pace::Rate(rate),
                (false, None) => Pace::Plan { base: load.integral_to(at) },
            };
            let first = schedule.due_before(&last, at);
            schedule.segments.push(Segment { from: at, first, pace });
        }
        schedule
    }

    /// How many iterations the whole schedule starts (the plan's own count without changes).
    pub fn scheduled(&self) -> u64 {
        let last = self.segments.last().unwrap_or(&self.segments[0]);
        self.due_before(last, self.end)
    }

    /// The segments, in order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// How many iterations are due before `at` (at or after `seg.from`) in `seg`, counted from 0.
    fn due_before(&self, seg: &Segment, at: Duration) -> u64 {
        let at = at.min(self.end);
        if at <= seg.from {
            return seg.first;
        }
        let due = match seg.pace {
            Pace::Plan { base } => self.load.integral_to(at) - base,
            Pace::Rate(rate) => (at - seg.from).as_secs_f64() * rate,
            Pace::Paused => 0.0,
        };
        seg.first + due.max(0.0).ceil() as u64
    }

    /// When iteration `k` is due.
    pub fn due(&self, k: u64) -> Due {
        let Some(i) = self.segments.iter().rposition(|s| s.first <= k) else { return Due::End };
        let seg = &self.segments[i];
        // Before the next segment's start, even where floating point would put it a hair after.
        let until = self.segments.get(i + 1).map_or(self.end, |next| next.from.min(self.end));
        let n = (k - seg.first) as f64;
        let at = match seg.pace {
            Pace::Paused => return if seg.from >= self.end { Due::End } else { Due::Paused },
            Pace::Plan { base } => self.load.time_at_integral(base + n),
            Pace::Rate(rate) => Some(seg.from + Duration::from_secs_f64(n / rate)),
        };
        match at {
            Some(at) if at < self.end => Due::At(at.max(seg.from).min(until)),
            _ => Due::End,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn constant(rate: f64, secs: u64) -> LoadPlan {
        LoadPlan::ArrivalRate {
            constant: true,
            start_rate: rate,
            stages: vec![(Duration::from_secs(secs), rate)],
            pre_allocated: 1,
            max_vus: 1,
            max_waiting: 0,
            max_wait: Duration::ZERO,
            graceful_stop: Duration::ZERO,
        }
    }

    fn change(t: f64, rate: Option<u32>, paused: Option<bool>) -> LoadChange {
        LoadChange { t, vus: None, rate, paused }
    }

    /// Every instant the schedule starts, in order of the iterations' numbers.
    fn instants(s: &OpenSchedule) -> Vec<Duration> {
        (0..)
            .map_while(|k| match s.due(k) {
                Due::At(t) => Some(t),
                Due::Paused | Due::End => None,
            })
            .collect()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn without_changes_it_is_the_plans_schedule() {
        let load = constant(10.0, 2);
        let s = OpenSchedule::new(&load, &[]);
        let all = instants(&s);
        assert_eq!(all.len() as u64, load.scheduled_iterations().unwrap());
        assert_eq!(s.scheduled(), load.scheduled_iterations().unwrap());
        assert!(all.iter().enumerate().all(|(k, t)| Some(*t) == load.start_of(k as u64)));
    }

    #[test]
    fn a_live_rate_starts_at_its_instant_and_keeps_the_ones_before() {
        // 10/s for 1 s (iterations 0..10 at 0, 100, …, 900 ms), then 40/s to the end at 2 s.
        let s = OpenSchedule::new(&constant(10.0, 2), &[change(1.0, Some(40), None)]);
        let all = instants(&s);
        assert_eq!(all.len(), 10 + 40);
        assert_eq!(s.scheduled(), 50);
        assert_eq!(all[9], ms(900));
        assert_eq!(all[10], ms(1000));
        assert_eq!(all[11], ms(1025));
        assert_eq!(*all.last().unwrap(), ms(1975));
        assert!(all.windows(2).all(|w| w[0] <= w[1]), "in order");
    }

    #[test]
    fn a_pause_holds_every_iteration_and_a_resume_goes_back_to_the_pace_before() {
        let changes = [change(0.5, None, Some(true))];
        let s = OpenSchedule::new(&constant(10.0, 2), &changes);
        assert_eq!(instants(&s).len(), 5, "0, 100, …, 400 ms");
        assert_eq!(s.due(5), Due::Paused);
        assert_eq!(s.due(500), Due::Paused);
        // Resumed at 1.5 s: the plan's 10/s again, for the half second left.
        let changes = [change(0.5, None, Some(true)), change(1.5, None, Some(false))];
        let all = instants(&OpenSchedule::new(&constant(10.0, 2), &changes));
        assert_eq!(all.len(), 5 + 5);
        assert_eq!(&all[5..7], &[ms(1500), ms(1600)]);
        // A rate asked while paused holds until the resume, which takes it.
        let changes = [change(0.5, None, Some(true)), change(1.0, Some(20), None), change(1.5, None, Some(false))];
        let all = instants(&OpenSchedule::new(&constant(10.0, 2), &changes));
        assert_eq!(all.len(), 5 + 10);
        assert_eq!(all[6], ms(1550));
        // Paused to the end: nothing more, ever.
        let s = OpenSchedule::new(&constant(10.0, 2), &[change(2.5, None, Some(true))]);
        assert_eq!(s.due(1000), Due::End);
    }

    #[test]
    fn a_ramp_resumed_without_a_rate_follows_the_plans_rate_from_there() {
        let ramp = LoadPlan::ArrivalRate {
            constant: false,
            start_rate: 0.0,
            stages: vec![(Duration::from_secs(10), 100.0)],
            pre_allocated: 1,
            max_vus: 1,
            max_waiting: 0,
            max_wait: Duration::ZERO,
            graceful_stop: Duration::ZERO,
        };
        let changes = [change(2.0, None, Some(true)), change(8.0, None, Some(false))];
        let all = instants(&OpenSchedule::new(&ramp, &changes));
        // The rate is 10·t/s: before, the integral to 2 s (20 iterations due before it); after,
        // from 8 s to 10 s at 80 → 100/s (180).
        assert_eq!(all.len(), 20 + 180);
        assert_eq!(all[20], Duration::from_secs(8));
        assert!(all[19] < Duration::from_secs(2));
    }

    #[test]
    fn every_iteration_is_due_once_whatever_the_changes() {
        // A property over many change lists: instants in order, each change's first iteration
        // at or after its instant, none before it after the change, and the count before each
        // change the plan's.
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..300 {
            let load = constant((1 + next(200)) as f64, 1 + next(5));
            let mut t = 0.0;
            let mut changes = Vec::new();
            for _ in 0..next(6) {
                t += next(1500) as f64 / 1000.0;
                let rate = (next(3) == 0).then(|| 1 + next(500) as u32);
                let paused = match next(3) {
                    0 => Some(true),
                    1 => Some(false),
                    _ => None,
                };
                changes.push(change(t, rate, paused));
            }
            let s = OpenSchedule::new(&load, &changes);
            let mut k = 0;
            let mut last = Duration::ZERO;
            let mut started = 0;
            loop {
                match s.due(k) {
                    Due::At(at) => {
                        assert!(at >= last, "in order: {changes:?}");
                        last = at;
                        started += 1;
                    }
                    // Paused from here: the next segment (if any) starts at a later number.
                    Due::Paused => match s.segments().iter().find(|seg| seg.first > k) {
                        Some(seg) => {
                            k = seg.first;
                            continue;
                        }
                        None => break,
                    },
                    Due::End => break,
                }
                k += 1;
            }
            assert_eq!(started, s.scheduled(), "the count is the instants': {changes:?}");
            for seg in s.segments() {
                if let Due::At(at) = s.due(seg.first) {
                    assert!(at >= seg.from, "{seg:?} of {changes:?}");
                }
                if seg.first > 0
                    && let Due::At(before) = s.due(seg.first - 1)
                {
                    assert!(before <= seg.from, "{seg:?} of {changes:?}");
                }
            }
        }
    }
}
