//! The reporter: merges the workers' interval snapshots into ticks, in order, on the calling
//! thread, and keeps the run's timeline.

use crate::stats::metrics::IntervalStats;
use stampede_model::report::TimelinePoint;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::outcome::{Tick, Totals};
use super::shared::{Shared, WorkerMsg, abort_on_failed_thresholds};

/// One reporting interval, being assembled from the workers' snapshots.
pub(super) struct PendingTick {
    /// Which workers sent their part.
    pub(super) seen: Vec<bool>,
    pub(super) stats: IntervalStats,
    pub(super) active_vus: u32,
}

/// Merges the workers' interval snapshots into ticks, in order: an interval is complete once
/// every worker still running has sent its part. Runs on the calling thread.
pub(super) struct Reporter<'a> {
    pub(super) shared: &'a Shared,
    pub(super) pending: BTreeMap<u64, PendingTick>,
    /// Workers that have finished (they send no more intervals).
    pub(super) done: Vec<bool>,
    /// Each worker's latest cumulative totals (when ticks carry totals).
    pub(super) latest: Vec<Option<Box<Totals>>>,
    /// The end of the last tick emitted.
    pub(super) prev_end: Duration,
    pub(super) timeline: Vec<TimelinePoint>,
    pub(super) on_tick: &'a mut dyn FnMut(&Tick),
}

impl<'a> Reporter<'a> {
    pub(super) fn new(shared: &'a Shared, threads: usize, on_tick: &'a mut dyn FnMut(&Tick)) -> Self {
        Reporter {
            shared,
            pending: BTreeMap::new(),
            done: vec![false; threads],
            latest: (0..threads).map(|_| None).collect(),
            prev_end: Duration::ZERO,
            timeline: Vec::new(),
            on_tick,
        }
    }

    /// Takes in one worker message (`now`: time since the start) and emits every interval it
    /// completes.
    pub(super) fn receive(&mut self, msg: WorkerMsg, now: Duration) {
        let threads = self.done.len();
        let (worker, index, stats, active, totals) = match msg {
            WorkerMsg::Tick { worker, index, active, stats, totals } => (worker, index, stats, active, totals),
            WorkerMsg::Done { worker, index, stats, totals } => {
                self.done[worker] = true;
                (worker, index, stats, 0, totals)
            }
        };
        if totals.is_some() {
            self.latest[worker] = totals;
            self.shared.totals_unread[worker].store(false, std::sync::atomic::Ordering::Release);
        }
        let entry = self.pending.entry(index).or_insert_with(|| PendingTick {
            seen: vec![false; threads],
            stats: IntervalStats::default(),
            active_vus: 0,
        });
        entry.seen[worker] = true;
        entry.stats.merge(&stats);
        entry.active_vus += active;
        while let Some(first) = self.pending.first_entry() {
            let complete = first.get().seen.iter().zip(&self.done).all(|(seen, done)| *seen || *done);
            if !complete {
                break;
            }
            let (index, tick) = first.remove_entry();
            self.emit(index, tick, now);
        }
    }

    /// Emits what is left when every worker has finished, and returns the timeline.
    pub(super) fn finish(mut self, now: Duration) -> Vec<TimelinePoint> {
        for (index, tick) in std::mem::take(&mut self.pending) {
            self.emit(index, tick, now);
        }
        self.timeline
    }

    pub(super) fn emit(&mut self, index: u64, tick: PendingTick, now: Duration) {
        let shared = self.shared;
        let elapsed = (shared.tick * index as u32).min(now).max(self.prev_end);
        let totals = shared.totals.then(|| {
            let mut sum = Totals::default();
            for t in self.latest.iter().flatten() {
                sum.merge(t);
            }
            Arc::new(sum)
        });
        if let Some(t) = &totals {
            abort_on_failed_thresholds(shared, t, elapsed);
        }
        let tick = Tick {
            index,
            elapsed,
            length: elapsed - self.prev_end,
            active_vus: tick.active_vus,
            stats: tick.stats,
            totals,
        };
        (self.on_tick)(&tick);
        self.timeline.push(timeline_point(&tick, &shared.plan.step_keys));
        self.prev_end = elapsed;
    }
}

/// Summarizes one merged interval.
pub(super) fn timeline_point(t: &Tick, keys: &[stampede_model::StepKey]) -> TimelinePoint {
    crate::stats::timeline::interval_point(t.elapsed, t.length, t.active_vus, &t.stats, keys)
}
