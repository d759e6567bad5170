//! The open model (`constant-arrival-rate`, `ramping-arrival-rate`): a scheduler starts
//! iterations on time and hands each to a free VU, or lets it wait for one within bounds, or
//! counts it as dropped.

use std::cell::Cell;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use tokio::task::JoinSet;

use crate::compile::plan::LoadPlan;
use crate::compile::schedule::{Due, OpenSchedule};
use crate::stats::metrics::DropReason;

use super::iteration::run_iteration;
use super::shared::{ActiveGuard, Shared, WorkerLocal};
use super::vu::Vu;

/// An open-model iteration handed to a VU.
#[derive(Clone, Copy)]
pub(super) struct Job {
    /// Its scheduled start: latency counts from here.
    pub(super) intended: Instant,
    /// When it found every VU busy and began to wait for one.
    pub(super) queued: Option<Instant>,
    /// How long it waited for a VU, when it did (set when a VU took it).
    pub(super) waited: Duration,
}

/// An open-model VU's mailbox: its next iteration.
pub(super) struct VuSlot {
    pub(super) index: usize,
    pub(super) job: Cell<Option<Job>>,
    pub(super) wake: tokio::sync::Notify,
}

/// The resolution of tokio's timer.
pub(super) const TIMER_RESOLUTION: Duration = Duration::from_millis(1);

/// How often a scheduler with nothing due looks for a live change (a rate, a resume): a change
/// reaches it at most this late.
const SCHEDULE_LOOK: Duration = Duration::from_millis(10);

/// Idle VUs, and due iterations waiting for one, of one open-model scheduler. A VU is idle
/// only while no iteration waits: one that finishes takes the oldest waiting iteration first.
pub(super) struct Pool {
    pub(super) group: usize,
    pub(super) free: RefCell<Vec<usize>>,
    /// Iterations due while every VU was busy, oldest first.
    pub(super) waiting: RefCell<std::collections::VecDeque<Job>>,
    pub(super) max_waiting: usize,
    pub(super) max_wait: Duration,
    pub(super) closed: Cell<bool>,
}

impl Pool {
    /// Drops (and counts) waiting iterations that have waited longer than `max_wait` by `now`.
    pub(super) fn expire(&self, now: Instant, local: &WorkerLocal) {
        let mut waiting = self.waiting.borrow_mut();
        while let Some(job) = waiting.front() {
            if job.queued.is_some_and(|q| now.saturating_duration_since(q) <= self.max_wait) {
                break;
            }
            waiting.pop_front();
            local.metrics.borrow_mut().record_dropped(self.group, DropReason::WaitedTooLong);
        }
    }

    /// The oldest waiting iteration that has not waited too long, with its wait until `now`.
    pub(super) fn next_waiting(&self, now: Instant, local: &WorkerLocal) -> Option<Job> {
        self.expire(now, local);
        let job = self.waiting.borrow_mut().pop_front()?;
        Some(Job { waited: job.queued.map_or(Duration::ZERO, |q| now.saturating_duration_since(q)), ..job })
    }

    /// Counts the iterations still waiting when the group ends as dropped.
    pub(super) fn drop_waiting(&self, now: Instant, local: &WorkerLocal) {
        self.expire(now, local);
        let left = std::mem::take(&mut *self.waiting.borrow_mut());
        let mut m = local.metrics.borrow_mut();
        for _ in 0..left.len() {
            m.record_dropped(self.group, DropReason::RunEnded);
        }
    }
}

/// Starts this worker's share of an open-model group's iterations on schedule (iterations
/// `id`, `id + workers`, …), each on a free VU. When every VU is busy and no more may be
/// started, the iteration waits for the next free VU (at most `maxWaiting` at once, each at
/// most `maxWait`), or is dropped and counted. Ends when the schedule does, after the VUs
/// finish the iterations started or waiting (at most until the group's hard stop).
pub(super) async fn open_scheduler(g: usize, id: usize, workers: usize, shared: Arc<Shared>, local: Rc<WorkerLocal>) {
    let load = &shared.plan.groups[g].load;
    let LoadPlan::ArrivalRate { pre_allocated, max_vus, max_waiting, max_wait, .. } = load else { return };
    let share = |n: u32| stampede_model::scenario::split_evenly(u64::from(n), workers as u32, id as u32) as usize;
    let (pre, max) = (share(*pre_allocated), share(*max_vus).max(1));
    let pool = Rc::new(Pool {
        group: g,
        free: RefCell::default(),
        waiting: RefCell::default(),
        max_waiting: share(*max_waiting),
        max_wait: *max_wait,
        closed: Cell::new(false),
    });
    let mut slots: Vec<Rc<VuSlot>> = Vec::new();
    let mut vus: JoinSet<()> = JoinSet::new();
    let first_vu = shared.groups[g].first_vu;
    let spawn = |slots: &mut Vec<Rc<VuSlot>>, vus: &mut JoinSet<()>| -> usize {
        let index = slots.len();
        let slot = Rc::new(VuSlot { index, job: Cell::new(None), wake: tokio::sync::Notify::new() });
        slots.push(slot.clone());
        let vu_number = first_vu + (index * workers + id) as u32;
        vus.spawn_local(open_vu(vu_number, slot, pool.clone(), shared.clone(), local.clone()));
        index
    };
    for _ in 0..pre.min(max) {
        let i = spawn(&mut slots, &mut vus);
        pool.free.borrow_mut().push(i);
    }
    let mut timetable = Timetable::new(load, &shared);
    let mut k = id as u64;
    while let Some(at) = timetable.wait_for(k, &shared).await {
        if shared.halted() || shared.data_exhausted.load(Ordering::Relaxed) {
            break;
        }
        let job = Job { intended: shared.start + at, queued: None, waited: Duration::ZERO };
        let free = pool.free.borrow_mut().pop();
        let vu = match free {
            Some(i) => Some(i),
            None if slots.len() < max => Some(spawn(&mut slots, &mut vus)),
            None => None,
        };
        match vu {
            Some(i) => {
                slots[i].job.set(Some(job));
                slots[i].wake.notify_one();
            }
            None => {
                let now = Instant::now();
                pool.expire(now, &local);
                if pool.waiting.borrow().len() < pool.max_waiting {
                    pool.waiting.borrow_mut().push_back(Job { queued: Some(now), ..job });
                } else {
                    local.metrics.borrow_mut().record_dropped(g, DropReason::QueueFull);
                }
            }
        }
        k += workers as u64;
    }
    // No more iterations are due: idle VUs leave; busy ones finish, and take the iterations
    // still waiting, until the group's hard stop.
    pool.closed.set(true);
    for s in &slots {
        s.wake.notify_one();
    }
    let drain = async { while vus.join_next().await.is_some() {} };
    match shared.groups[g].hard_stop {
        Some(h) => {
            let _ = tokio::time::timeout_at(tokio::time::Instant::from_std(h), drain).await;
        }
        None => drain.await,
    }
    // Whatever still waits now (the hard stop came, or the VUs stopped) never ran.
    pool.drop_waiting(Instant::now(), &local);
}

/// A scheduler's schedule, with the live changes (a rate, a pause) taken so far: rebuilt when
/// another comes.
struct Timetable<'a> {
    load: &'a LoadPlan,
    control: &'a super::outcome::LiveControl,
    /// The run's start, and the plan's end.
    start: tokio::time::Instant,
    end: tokio::time::Instant,
    /// The count of schedule changes the schedule was built with.
    seen: u32,
    /// When the last iteration handed out was due.
    last: Duration,
    schedule: OpenSchedule,
}

impl<'a> Timetable<'a> {
    fn new(load: &'a LoadPlan, shared: &'a Shared) -> Self {
        let start = tokio::time::Instant::from_std(shared.start);
        let control = &*shared.control;
        Timetable {
            load,
            control,
            start,
            end: start + load.planned_duration().unwrap_or_default(),
            seen: control.schedule_changes(),
            last: Duration::ZERO,
            schedule: OpenSchedule::new(load, &control.changes()),
        }
    }

    /// Rebuilds the schedule if a change came since; says whether one did.
    fn refresh(&mut self) -> bool {
        let now = self.control.schedule_changes();
        if now == self.seen {
            return false;
        }
        self.seen = now;
        self.schedule = OpenSchedule::new(self.load, &self.control.changes());
        true
    }

    /// Waits until iteration `k` is due and says when that was (from the start); `None` once
    /// none is (the plan's end, or the run halted while paused).
    ///
    /// Tokio's timer fires on whole milliseconds, at or after the deadline: asked for the due
    /// instant itself, iterations would start 0–1+ ms late, and that lateness would count in
    /// every latency. Asking a millisecond early starts them within the millisecond around their
    /// schedule instead; one that starts early counts its latency from its actual send (see
    /// `run_step`), never from before it. A long wait looks for a live change every
    /// [`SCHEDULE_LOOK`]: iteration `k` may come at another instant after one.
    async fn wait_for(&mut self, k: u64, shared: &Shared) -> Option<Duration> {
        loop {
            let at = match self.schedule.due(k) {
                Due::At(at) => at,
                Due::End => return None,
                Due::Paused => {
                    // Nothing is due until a resume, or the plan's end.
                    tokio::time::sleep(SCHEDULE_LOOK).await;
                    if shared.halted() || tokio::time::Instant::now() >= self.end {
                        return None;
                    }
                    self.refresh();
                    continue;
                }
            };
            let deadline = (self.start + at).checked_sub(TIMER_RESOLUTION).unwrap_or(self.start);
            if at.saturating_sub(self.last) <= SCHEDULE_LOOK {
                // Soon after the last one (a busy schedule): one sleep, no clock read.
                tokio::time::sleep_until(deadline).await;
            } else {
                let mut now = tokio::time::Instant::now();
                while now < deadline {
                    tokio::time::sleep_until(deadline.min(now + SCHEDULE_LOOK)).await;
                    if self.control.schedule_changes() != self.seen {
                        break;
                    }
                    now = tokio::time::Instant::now();
                }
            }
            if !self.refresh() {
                self.last = at;
                return Some(at);
            }
        }
    }
}

/// An open-model VU: runs the iterations its scheduler hands it, then those waiting for a VU.
pub(super) async fn open_vu(index: u32, slot: Rc<VuSlot>, pool: Rc<Pool>, shared: Arc<Shared>, local: Rc<WorkerLocal>) {
    let mut vu = Vu::new(index, &shared);
    loop {
        let job = loop {
            if let Some(job) = slot.job.take() {
                break Some(job);
            }
            if pool.closed.get() {
                break None;
            }
            slot.wake.notified().await;
        };
        let Some(job) = job else { return };
        // Lag is how late the scheduler handed the iteration out; the time it then waited
        // for a VU is counted apart. Both are in its latency, which counts from `intended`.
        {
            let mut m = local.metrics.borrow_mut();
            match job.queued {
                Some(q) => {
                    m.record_started(q.saturating_duration_since(job.intended).as_micros() as u64);
                    m.record_waited(job.waited.as_micros() as u64);
                }
                None => m.record_started(Instant::now().saturating_duration_since(job.intended).as_micros() as u64),
            }
        }
        // Active while it runs an iteration: an idle VU of the pool is not load (`VUs` and
        // the peak say how many were busy at once, `maxVUs` how many there may be).
        let active = ActiveGuard::new(local.clone());
        if !run_iteration(&mut vu, pool.group, Some(job.intended), &shared, &local).await {
            return;
        }
        drop(active);
        match pool.next_waiting(Instant::now(), &local) {
            Some(next) => slot.job.set(Some(next)),
            None => pool.free.borrow_mut().push(slot.index),
        }
    }
}

#[cfg(test)]
mod task_size {
    use std::cell::Cell;
    use std::rc::Rc;
    use std::sync::Arc;

    use super::{Shared, WorkerLocal};

    /// The size of the future `make` would return (without calling it).
    fn future_size<F: FnOnce(Arc<Shared>, Rc<WorkerLocal>) -> Fut, Fut>(_: &F) -> usize {
        std::mem::size_of::<Fut>()
    }

    /// Every VU is a task whose state is its future: at 15,000 VUs each KB is 15 MB. Rare,
    /// large states (opening a connection with its TLS handshake, an HTTP/2 exchange) are
    /// boxed so they do not weigh on every VU; this keeps them out.
    #[test]
    fn a_vu_task_stays_small() {
        let closed = |s, l| super::super::closed::vu_task(0, 0, s, l, Rc::new(Cell::new(false)));
        let open = |s, l| {
            let pool = super::Pool {
                group: 0,
                free: Default::default(),
                waiting: Default::default(),
                max_waiting: 0,
                max_wait: std::time::Duration::ZERO,
                closed: Cell::new(false),
            };
            super::open_vu(
                0,
                Rc::new(super::VuSlot { index: 0, job: Cell::new(None), wake: tokio::sync::Notify::new() }),
                Rc::new(pool),
                s,
                l,
            )
        };
        let (closed, open) = (future_size(&closed), future_size(&open));
        println!("VU task state: closed model {closed} bytes, open model {open} bytes");
        assert!(closed <= 2048 && open <= 2048, "closed {closed}, open {open} bytes");
    }
}
