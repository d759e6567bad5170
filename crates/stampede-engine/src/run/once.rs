//! The steps a test runs once, outside the load: `setup` before it, `teardown` after it. One
//! VU on a thread of its own runs them in order, recording like any worker.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::compile::plan::{Plan, ScenarioPlan};
use crate::compile::random::Stream;
use crate::error::RunError;
use crate::stats::metrics::WorkerMetrics;

use super::flow::{Next, Walk, run_nodes};
use super::outcome::ErrorSample;
use super::shared::{Shared, WorkerLocal};
use super::vu::Vu;

pub use crate::compile::plan::Once;

/// What a run of `setup` or `teardown` gave.
#[derive(Debug)]
pub struct OnceOutcome {
    /// Recorded like a worker's (the steps' metric indices are the plan's).
    pub metrics: WorkerMetrics,
    /// A few failed requests with their messages (at most 5, one per step and kind of failure).
    pub error_samples: Vec<ErrorSample>,
    /// Why it failed: the first failed step's message (any failed step fails a setup).
    pub failure: Option<String>,
    /// What `setup` extracted, by name.
    pub values: BTreeMap<String, String>,
}

/// Runs `which` of `plan`'s once-run steps, with the setup's `values` (for `teardown`), on a
/// thread of its own with a worker's stack ([`crate::compile::budget::WORKER_STACK`]): its
/// expressions are evaluated as deep as a worker's may be.
pub fn run_once(plan: &Arc<Plan>, which: Once, values: &BTreeMap<String, String>) -> Result<OnceOutcome, RunError> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("stampede-once".into())
            .stack_size(crate::compile::budget::WORKER_STACK)
            .spawn_scoped(s, || run_once_here(plan, which, values))
            .map_err(RunError::Threads)?
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

fn run_once_here(plan: &Arc<Plan>, which: Once, values: &BTreeMap<String, String>) -> Result<OnceOutcome, RunError> {
    let steps: &ScenarioPlan = match which {
        Once::Setup => &plan.setup,
        Once::Teardown => &plan.teardown,
    };
    let mut out = OnceOutcome {
        metrics: WorkerMetrics::new(plan.step_keys.len(), plan.scenarios.len()),
        error_samples: Vec::new(),
        failure: None,
        values: BTreeMap::new(),
    };
    if steps.flow.is_empty() {
        return Ok(out);
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(RunError::Threads)?;
    let tick = (std::time::Duration::from_secs(1), false);
    let shared = Shared::new(
        plan.clone(),
        (std::time::Instant::now(), Vec::new()),
        Arc::new(AtomicBool::new(false)),
        tick,
        values,
        Arc::default(),
    );
    let local = WorkerLocal::new(&shared, 0, 1);
    let set = tokio::task::LocalSet::new();
    let (next, failed, vu_slots) = set.block_on(&rt, async {
        let stream = match which {
            Once::Setup => Stream::Setup,
            Once::Teardown => Stream::Teardown,
        };
        let mut vu = Vu::outside_load(stream, &shared);
        vu.jar = plan.cookies.then(crate::client::cookies::Jar::default);
        let mut walk = Walk::new(steps, &shared, &local, None);
        let next = run_nodes(&mut vu, &steps.flow, &mut walk).await;
        (next, walk.failed, vu.slots)
    });
    drop(set);
    out.metrics = local.metrics.replace(WorkerMetrics::new(0, 0));
    out.error_samples = local.error_samples.take();
    if failed.is_some() || next != Next::Go {
        let first = out.error_samples.first().map(|e| e.message.clone());
        out.failure = Some(first.unwrap_or_else(|| format!("a step of `{}` failed", steps.name)));
    }
    if which == Once::Setup {
        out.values = plan
            .setup_outputs
            .iter()
            .map(|(name, slot)| (name.clone(), plan.portable_setup_value(*slot, &vu_slots[*slot])))
            .collect();
    }
    Ok(out)
}
