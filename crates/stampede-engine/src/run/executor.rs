//! The workload models: closed (`constant-vus`, `ramping-vus`: VUs loop over iterations)
//! and open (`constant-arrival-rate`, `ramping-arrival-rate`: iterations start on a schedule
//! and take a free VU; when none is free they wait for one, within bounds, or are counted as
//! dropped).
//!
//! The run is split over worker threads, each with its own single-threaded tokio runtime.
//! Virtual user *i* lives on worker *i mod threads*, owns its connection, its buffers and
//! its random generator, and records into its worker's metrics through a `RefCell`: no
//! lock, atomic or channel per request. The only shared state touched per *iteration* is
//! one relaxed atomic counter, and only when the run is bounded by an iteration count.
//! Once per reporting interval each worker sends a snapshot of that interval to the
//! reporter (the calling thread), which merges them into ticks.
//!
//! One job per file, each using only those after it: this one starts the workers and
//! collects the [`RunOutcome`]; `reporter` merges the ticks; `worker` runs one thread's VUs
//! under `closed` and `open`, the two workload models; `iteration` is one iteration of a VU,
//! `flow` its way through the scenario's steps and blocks (`if`, `repeat`, `group`), `step`
//! one step, `send` one request with its redirects, `vu` a VU's own state; `once` runs the
//! `setup` and `teardown` steps outside the load; `shared` is what the threads and a worker's
//! VUs share; `outcome` what a run takes and gives.

use crate::compile::plan::LoadPlan;
use crate::compile::plan::Plan;
use crate::error::RunError;
use crate::stats::metrics::WorkerMetrics;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;
use std::time::Instant;
use std::time::SystemTime;

use super::reporter::Reporter;
use super::shared::{GroupRun, Shared, WorkerMsg};
use super::worker::worker_main;

pub use super::outcome::{LiveControl, RunOptions, RunOutcome, Tick, Totals};

/// Runs `plan` to completion on worker threads; `on_tick` sees each merged interval.
pub fn run(plan: Arc<Plan>, opts: &RunOptions, on_tick: &mut dyn FnMut(&Tick)) -> Result<RunOutcome, RunError> {
    let max_vus = plan.max_vus().max(1) as usize;
    let threads = opts.threads.clamp(1, max_vus);
    let plan_aborts = plan.thresholds.iter().any(|t| t.abort_on_fail);
    let started_at = SystemTime::now();
    let start = Instant::now();
    opts.control.started(start);
    let mut first_vu = 0;
    let groups = plan
        .groups
        .iter()
        .map(|g| {
            let deadline = g.load.planned_duration().map(|d| start + d);
            let run = GroupRun {
                first_vu,
                max_vus: g.load.max_vus(),
                deadline,
                hard_stop: deadline.map(|d| d + g.load.graceful_stop()),
                iteration_limit: match &g.load {
                    LoadPlan::ConstantVus { iterations, .. } => *iterations,
                    LoadPlan::RampingVus { .. } | LoadPlan::ArrivalRate { .. } => None,
                },
                iterations_claimed: AtomicU64::new(0),
                ramp_down_grace: match &g.load {
                    LoadPlan::RampingVus { graceful_ramp_down, .. } => *graceful_ramp_down,
                    LoadPlan::ConstantVus { .. } | LoadPlan::ArrivalRate { .. } => Duration::ZERO,
                },
            };
            first_vu += run.max_vus;
            run
        })
        .collect();
    let mut shared = Shared::new(
        plan,
        (start, groups),
        opts.interrupt.clone(),
        (opts.tick, opts.totals || plan_aborts),
        &opts.setup_values,
        opts.control.clone(),
    );
    shared.totals_unread = (0..threads).map(|_| AtomicBool::new(false)).collect();
    let shared = Arc::new(shared);

    let (tx, rx) = mpsc::channel::<WorkerMsg>();
    let handles = start_all(threads, &shared.interrupt, |id| {
        let (shared, tx) = (shared.clone(), tx.clone());
        std::thread::Builder::new()
            .name(format!("stampede-worker-{id}"))
            .stack_size(crate::compile::budget::WORKER_STACK)
            .spawn(move || worker_main(id, threads, shared, tx))
    })
    .map_err(RunError::Threads)?;
    drop(tx);

    let mut reporter = Reporter::new(&shared, threads, on_tick);
    for msg in rx {
        reporter.receive(msg, start.elapsed());
    }
    let duration = start.elapsed();
    let timeline = reporter.finish(duration);

    let mut merged: Option<WorkerMetrics> = None;
    let mut worker_cpu = Duration::ZERO;
    let mut max_active_vus = 0;
    let mut error_samples = Vec::new();
    for handle in handles {
        let result = handle
            .join()
            .map_err(|_| RunError::Worker("a worker thread panicked".into()))?
            .map_err(RunError::Worker)?;
        worker_cpu += result.cpu;
        max_active_vus += result.max_active;
        error_samples.extend(result.error_samples);
        match &mut merged {
            None => merged = Some(result.metrics),
            Some(m) => m.merge(&result.metrics),
        }
    }
    let plan = &shared.plan;
    Ok(RunOutcome {
        metrics: merged.unwrap_or_else(|| WorkerMetrics::new(plan.step_keys.len(), plan.scenarios.len())),
        started_at,
        duration,
        threads,
        worker_cpu,
        max_active_vus,
        timeline,
        interrupted: shared.interrupt.load(Ordering::Relaxed),
        error_samples,
        aborted: shared.aborted.get().cloned(),
        source_addresses_spread: shared.transport.sources.spread_over(),
        load_changes: shared.control.changes(),
    })
}

/// Starts `n` threads with `start`. When one cannot start, the run cannot happen as planned:
/// those already started are told to stop (`interrupt`) and joined before the error returns,
/// so that no worker goes on sending load for a run that failed.
pub(super) fn start_all<T>(
    n: usize,
    interrupt: &AtomicBool,
    mut start: impl FnMut(usize) -> std::io::Result<std::thread::JoinHandle<T>>,
) -> std::io::Result<Vec<std::thread::JoinHandle<T>>> {
    let mut handles = Vec::with_capacity(n);
    for id in 0..n {
        match start(id) {
            Ok(handle) => handles.push(handle),
            Err(e) => {
                interrupt.store(true, Ordering::Relaxed);
                for handle in handles {
                    let _ = handle.join();
                }
                return Err(e);
            }
        }
    }
    Ok(handles)
}

#[cfg(test)]
mod starting {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// #22: a worker thread that cannot start stops the ones already started (they used to
    /// go on sending load for a run that had failed) before the error returns.
    #[test]
    fn a_thread_that_cannot_start_stops_and_joins_those_started() {
        let interrupt = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(AtomicUsize::new(0));
        let result = super::start_all(4, &interrupt, |id| {
            if id == 2 {
                return Err(std::io::Error::other("no more threads"));
            }
            let (interrupt, ended) = (interrupt.clone(), ended.clone());
            Ok(std::thread::spawn(move || {
                while !interrupt.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                ended.fetch_add(1, Ordering::Relaxed);
            }))
        });
        assert_eq!(result.err().map(|e| e.to_string()), Some("no more threads".to_string()));
        assert!(interrupt.load(Ordering::Relaxed), "the run is interrupted");
        assert_eq!(ended.load(Ordering::Relaxed), 2, "both started workers stopped and were joined");
    }
}
