//! One worker thread: its single-threaded runtime, the VUs it hosts (closed or open model),
//! its per-interval snapshots to the reporter, and its share of the run's metrics.

use crate::stats::metrics::IntervalStats;
use crate::stats::metrics::WorkerMetrics;
use crate::stats::sysstat;
use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Instant;
use tokio::task::AbortHandle;
use tokio::task::JoinSet;

use super::closed::vu_task;
use super::open::open_scheduler;
use super::outcome::Totals;
use super::shared::{CONTROL_TICK, Shared, WorkerLocal, WorkerMsg, WorkerResult};

pub(super) fn worker_main(
    id: usize,
    threads: usize,
    shared: Arc<Shared>,
    tx: mpsc::Sender<WorkerMsg>,
) -> Result<WorkerResult, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot build a runtime: {e}"))?;
    let local = Rc::new(WorkerLocal::new(&shared, id, threads));
    let set = tokio::task::LocalSet::new();
    // The control loop runs as a task of its own, polled when its timer or a VU's end wakes
    // it. As the future `block_on` runs it would be polled at every wake of any VU (the local
    // set polls the future it runs until before its tasks, each time): a select over a timer
    // and two join sets, with a random pick, per request at one connection.
    set.block_on(&rt, async {
        let control = tokio::task::spawn_local(worker_loop(id, threads, shared.clone(), local.clone(), tx));
        if let Err(e) = control.await
            && e.is_panic()
        {
            std::panic::resume_unwind(e.into_panic());
        }
    });
    drop(set);
    let metrics = local.metrics.replace(WorkerMetrics::new(0, 0));
    let error_samples = local.error_samples.take();
    Ok(WorkerResult { metrics, cpu: sysstat::this_thread().cpu(), max_active: local.max_active.get(), error_samples })
}

pub(super) struct RunningVu {
    pub(super) retire: Rc<Cell<bool>>,
    pub(super) retiring_since: Option<Instant>,
    pub(super) abort: AbortHandle,
}

pub(super) async fn worker_loop(
    id: usize,
    threads: usize,
    shared: Arc<Shared>,
    local: Rc<WorkerLocal>,
    tx: mpsc::Sender<WorkerMsg>,
) {
    let total_vus = shared.plan.max_vus();
    let owned: Vec<(u32, usize, u32)> = (0..total_vus)
        .filter(|i| *i as usize % threads == id)
        .map(|vu| {
            let (g, local_vu) = shared.group_of(vu);
            (vu, g, local_vu)
        })
        .filter(|(_, g, _)| !shared.plan.groups[*g].load.is_open())
        .collect();
    let ticker = tokio::task::spawn_local(ticker(id, shared.clone(), local.clone(), tx.clone()));
    // Open-model groups: this worker runs its share of each schedule.
    let mut open: JoinSet<()> = JoinSet::new();
    for (g, group) in shared.plan.groups.iter().enumerate() {
        let workers = threads.min(group.load.max_vus().max(1) as usize);
        if group.load.is_open() && id < workers {
            open.spawn_local(open_scheduler(g, id, workers, shared.clone(), local.clone()));
        }
    }
    let mut set: JoinSet<()> = JoinSet::new();
    // The running VU task of each `owned` entry, by position: the scan below touches every
    // entry on each control tick, so it must be cheap at 15,000 VUs. Completions find their
    // entry by task id.
    let mut slots: Vec<Option<RunningVu>> = owned.iter().map(|_| None).collect();
    let mut slot_of: HashMap<tokio::task::Id, usize> = HashMap::new();
    loop {
        let now = Instant::now();
        if shared.halted() {
            set.abort_all();
            open.abort_all();
            while set.join_next().await.is_some() {}
            while open.join_next().await.is_some() {}
            break;
        }
        let elapsed = now - shared.start;
        // A live change of VUs holds from then on, instead of the plan's ramp.
        let live = shared.control.vus();
        let targets: Vec<u32> =
            shared.plan.groups.iter().map(|g| live.unwrap_or_else(|| g.load.target_vus_at(elapsed))).collect();
        let mut all_stopping = true;
        for (i, (slot, &(vu, g, local_vu))) in slots.iter_mut().zip(&owned).enumerate() {
            let group = &shared.groups[g];
            let hard_stopped = group.hard_stop.is_some_and(|h| now >= h);
            if let Some(r) = slot.as_ref()
                && (hard_stopped || r.retiring_since.is_some_and(|t| now - t >= group.ramp_down_grace))
            {
                r.abort.abort();
            }
            if hard_stopped || shared.stopping(g, now) {
                continue;
            }
            all_stopping = false;
            let target = targets[g];
            match slot {
                None if local_vu < target => {
                    let retire = Rc::new(Cell::new(false));
                    let abort = set.spawn_local(vu_task(vu, g, shared.clone(), local.clone(), retire.clone()));
                    slot_of.insert(abort.id(), i);
                    *slot = Some(RunningVu { retire, retiring_since: None, abort });
                }
                Some(r) if local_vu >= target && r.retiring_since.is_none() => {
                    r.retire.set(true);
                    r.retiring_since = Some(now);
                }
                Some(r) if local_vu < target && r.retiring_since.is_some() => {
                    // Wanted again before it left: keep it.
                    r.retire.set(false);
                    r.retiring_since = None;
                }
                _ => {}
            }
        }
        if all_stopping && set.is_empty() && open.is_empty() {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(CONTROL_TICK) => {}
            Some(_) = open.join_next(), if !open.is_empty() => {}
            Some(res) = set.join_next_with_id(), if !set.is_empty() => {
                // Take every VU task that has ended by now, not one per scan: at the end of
                // a run thousands end at once.
                let mut ended = Some(res);
                while let Some(res) = ended {
                    let id = match res {
                        Ok((id, ())) => id,
                        Err(e) => e.id(),
                    };
                    if let Some(i) = slot_of.remove(&id) {
                        slots[i] = None;
                    }
                    ended = set.try_join_next_with_id();
                }
            }
        }
    }
    ticker.abort();
    // What is left belongs to the interval the ticker has not sent yet, even when the run ended
    // after that interval's end but before the ticker ran (a busy thread): numbering it by the
    // time now would move a whole interval's counts into the next one.
    let index = local.next_tick.get();
    let (stats, totals) = take_interval(&shared, &local, id, true);
    let _ = tx.send(WorkerMsg::Done { worker: id, index, stats, totals });
}

/// The interval just ended (reset for the next) and, when the run carries totals, a copy of
/// worker `id`'s: always with its `last` interval, otherwise only once the reporter has read
/// the copy sent before. A reporter that falls behind (a starved CPU) would otherwise find a
/// copy of every step's histograms per worker per tick waiting for it, and the process would
/// grow until the run ends; instead it reads the latest totals a tick later.
pub(super) fn take_interval(
    shared: &Shared,
    local: &WorkerLocal,
    id: usize,
    last: bool,
) -> (IntervalStats, Option<Box<Totals>>) {
    let mut metrics = local.metrics.borrow_mut();
    let stats = std::mem::take(&mut metrics.interval);
    let send = shared.totals && (!shared.totals_unread[id].swap(true, Ordering::AcqRel) || last);
    (stats, send.then(|| Box::new(Totals::of(&metrics))))
}

pub(super) async fn ticker(id: usize, shared: Arc<Shared>, local: Rc<WorkerLocal>, tx: mpsc::Sender<WorkerMsg>) {
    let start = tokio::time::Instant::from_std(shared.start);
    let mut index: u64 = 1;
    loop {
        tokio::time::sleep_until(start + shared.tick * index as u32).await;
        let (stats, totals) = take_interval(&shared, &local, id, false);
        if tx.send(WorkerMsg::Tick { worker: id, index, active: local.active.get(), stats, totals }).is_err() {
            return;
        }
        index += 1;
        local.next_tick.set(index);
    }
}
