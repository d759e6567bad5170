//! One iteration of a VU: its data rows and variables, its `init` steps the first time, and
//! the flow of the scenario it picks.

use std::sync::atomic::Ordering;
use std::time::Instant;

use stampede_model::scenario::VarScope;

use super::flow::{Next, Walk, run_nodes};
use super::shared::{Shared, WorkerLocal};
use super::vu::Vu;

/// Runs one iteration of a scenario of `group`; `intended` is its scheduled start (open
/// models), from which the first request's latency counts. False when the VU should stop
/// (data used up, or the run was aborted).
pub(super) async fn run_iteration(
    vu: &mut Vu,
    group: usize,
    intended: Option<Instant>,
    shared: &Shared,
    local: &WorkerLocal,
) -> bool {
    // This iteration's data rows; a used-up source with `onExhausted: stop` ends the VU.
    let mut exhausted = false;
    for (source, cursor) in shared.plan.data.iter().zip(&shared.data_cursors) {
        match cursor.pick(source, &mut vu.rng) {
            Some(row) => crate::compile::data::fill(source, row, &mut vu.slots),
            None => exhausted = true,
        }
    }
    if exhausted {
        shared.data_exhausted.store(true, Ordering::Relaxed);
        return false;
    }
    // Its number in the whole test: runner r of n numbers its iterations r, r + n, r + 2n…
    let (runner, runners) = shared.plan.runner;
    let n = shared.iterations_started.fetch_add(1, Ordering::Relaxed);
    vu.generator.test_iteration = n * u64::from(runners.max(1)) + u64::from(runner);
    vu.renew_vars(&shared.plan, VarScope::Iteration, false);
    // Each iteration is a new visit: a fresh cookie jar.
    vu.jar = shared.plan.cookies.then(crate::client::cookies::Jar::default);
    if !vu.initialized {
        vu.initialized = true;
        let init = &shared.plan.init;
        if !init.flow.is_empty() {
            let mut walk = Walk::new(init, shared, local, None);
            if run_nodes(vu, &init.flow, &mut walk).await == Next::Stop {
                return false;
            }
        }
        // The variables that use what `init` extracted, now that it did.
        vu.renew_vars(&shared.plan, VarScope::Vu, true);
    }
    vu.renew_vars(&shared.plan, VarScope::Iteration, true);
    let sc = shared.plan.groups[group].pick(&mut vu.rng);
    let scenario = &shared.plan.scenarios[sc];
    // The walk ends before the kept sockets close: a VU task keeps no more state across that
    // await than it must.
    let next = {
        let mut walk = Walk::new(scenario, shared, local, intended);
        run_nodes(vu, &scenario.flow, &mut walk).await
    };
    if !vu.sockets.is_empty() {
        super::ws::close_kept(&mut vu.sockets).await;
    }
    if next == Next::Stop {
        return false;
    }
    vu.conn.end_iteration(&shared.plan.transport);
    vu.generator.iteration += 1;
    let mut m = local.metrics.borrow_mut();
    m.iterations[sc] += 1;
    m.interval.iterations += 1;
    true
}
