//! A VU's way through a scenario's flow: steps in order, and blocks — `if`, `repeat` and
//! `group` (a transaction, timed from its start to the end of its last step, think times
//! included, as k6 times a group).

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use crate::compile::flow::{self, BlockPlan, Node, RepeatPlan};
use crate::compile::plan::{ScenarioPlan, StepPlan};
use stampede_model::ErrorKind;
use stampede_model::scenario::OnError;

use super::shared::{Shared, WorkerLocal};
use super::step::{record_failure, run_step};
use super::vu::Vu;

/// Where the flow goes after a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// On with the next node.
    Go,
    /// A failed step with `onError: next-iteration`: the iteration ends here.
    EndIteration,
    /// A failed step with `onError: abort-run`: the run stops.
    Stop,
}

/// What a VU needs while it walks a flow.
pub(super) struct Walk<'a> {
    pub(super) scenario: &'a ScenarioPlan,
    pub(super) shared: &'a Shared,
    pub(super) local: &'a WorkerLocal,
    /// The iteration's scheduled start (open models), until its first request takes it.
    pub(super) intended: Option<Instant>,
    /// An open model's iteration: every step's service time is kept beside its latency.
    pub(super) open: bool,
    /// The kind of the first failure since the innermost group started.
    pub(super) failed: Option<ErrorKind>,
    /// The steps run so far (not those skipped by their `if`): a group none of whose steps
    /// ran is no transaction.
    pub(super) steps_run: u32,
}

impl<'a> Walk<'a> {
    /// A walk through `scenario`; `intended` is an open model's scheduled start.
    pub(super) fn new(
        scenario: &'a ScenarioPlan,
        shared: &'a Shared,
        local: &'a WorkerLocal,
        intended: Option<Instant>,
    ) -> Walk<'a> {
        Walk { scenario, shared, local, intended, open: intended.is_some(), failed: None, steps_run: 0 }
    }
}

/// Runs `nodes` in order. A block's run is boxed (a block runs nodes again): a flow of plain
/// steps allocates nothing.
pub(super) async fn run_nodes(vu: &mut Vu, nodes: &[Node], walk: &mut Walk<'_>) -> Next {
    for node in nodes {
        let next = match node {
            Node::Step(i) => step(vu, &walk.scenario.steps[*i], walk).await,
            Node::Block(block) => {
                let run: Pin<Box<dyn Future<Output = Next> + '_>> = Box::pin(run_block(vu, block, walk));
                run.await
            }
        };
        if next != Next::Go {
            return next;
        }
    }
    Next::Go
}

/// Whether the condition holds for `vu` (true without one), its generator lent.
fn holds(vu: &mut Vu, when: Option<&crate::compile::expr::Expr>) -> Result<bool, String> {
    let Some(when) = when else { return Ok(true) };
    let Vu { generator, slots, .. } = vu;
    generator.lend(|| flow::truth(when, slots))
}

/// One step: skipped when its `if` does not hold; its failure handled by its `onError`.
async fn step(vu: &mut Vu, step: &StepPlan, walk: &mut Walk<'_>) -> Next {
    match holds(vu, step.when.as_ref()) {
        Ok(true) => {}
        Ok(false) => return Next::Go,
        Err(why) => return failed(vu, step, ErrorKind::Check, format!("its `if` failed: {why}"), walk),
    }
    walk.steps_run = walk.steps_run.wrapping_add(1);
    let ok = run_step(vu, step, walk.intended.take(), walk.open, walk.local).await;
    let next = match ok {
        Ok(()) => Next::Go,
        Err(kind) => {
            walk.failed.get_or_insert(kind);
            on_error(step, walk)
        }
    };
    if let Some(think) = &step.think
        && next == Next::Go
    {
        vu.ended = None;
        tokio::time::sleep(think.pick(&mut vu.rng)).await;
    }
    next
}

/// A step that failed before it sent anything: counted and sampled as its failure.
fn failed(vu: &mut Vu, step: &StepPlan, kind: ErrorKind, message: String, walk: &mut Walk<'_>) -> Next {
    walk.steps_run = walk.steps_run.wrapping_add(1);
    {
        let mut m = walk.local.metrics.borrow_mut();
        m.steps[step.metric].requests += 1;
        m.interval.record_request(step.metric);
    }
    record_failure(vu, step, kind, message, None, walk.local);
    walk.failed.get_or_insert(kind);
    on_error(step, walk)
}

fn on_error(step: &StepPlan, walk: &Walk<'_>) -> Next {
    match step.on_error {
        OnError::Continue => Next::Go,
        OnError::NextIteration => Next::EndIteration,
        OnError::AbortRun => {
            let _ = walk.shared.aborted.set(format!(
                "step `{}` of scenario `{}` failed and has `onError: abort-run`",
                step.name, walk.scenario.name
            ));
            Next::Stop
        }
    }
}

/// A block: its condition, then its runs, timed as a transaction when it is a group.
async fn run_block(vu: &mut Vu, block: &BlockPlan, walk: &mut Walk<'_>) -> Next {
    match holds(vu, block.when.as_ref()) {
        Ok(true) => {}
        Ok(false) => return Next::Go,
        Err(why) => return block_failed(vu, block, format!("its `if` failed: {why}"), walk),
    }
    let Some(group) = block.group else { return runs(vu, block, walk).await };
    let started = walk.intended.unwrap_or_else(Instant::now);
    let outer = walk.failed.take();
    let steps_before = walk.steps_run;
    let next = runs(vu, block, walk).await;
    let failed = walk.failed;
    walk.failed = outer.or(failed);
    // A pass whose steps were all skipped sent nothing: no transaction to time.
    if next != Next::Stop && walk.steps_run != steps_before {
        let micros = started.elapsed().as_micros() as u64;
        let mut m = walk.local.metrics.borrow_mut();
        let g = m.group(group);
        g.requests += 1;
        g.record_latency_us(micros);
        if let Some(kind) = failed {
            g.record_error(kind);
        }
    }
    next
}

/// The block's body, as often as its `repeat` says (once without one).
async fn runs(vu: &mut Vu, block: &BlockPlan, walk: &mut Walk<'_>) -> Next {
    let Some(repeat) = &block.repeat else { return run_nodes(vu, &block.body, walk).await };
    match repeat {
        RepeatPlan::Count { count, max, slot } => {
            let Vu { generator, slots, .. } = vu;
            let n = match generator.lend(|| flow::count(count, slots, *max)) {
                Ok(n) => n,
                Err(why) => return block_failed(vu, block, format!("its `repeat.count` failed: {why}"), walk),
            };
            for i in 0..n {
                vu.slots[*slot] = i.to_string();
                let next = pass(vu, block, walk).await;
                if next != Next::Go {
                    return next;
                }
            }
            Next::Go
        }
        RepeatPlan::ForEach { list, max, slot } => {
            let Vu { generator, slots, .. } = vu;
            let items = match generator.lend(|| flow::elements(list, slots, *max)) {
                Ok(items) => items,
                Err(why) => return block_failed(vu, block, format!("its `repeat.forEach` failed: {why}"), walk),
            };
            for item in items {
                vu.slots[*slot] = item;
                let next = pass(vu, block, walk).await;
                if next != Next::Go {
                    return next;
                }
            }
            Next::Go
        }
        RepeatPlan::While { cond, max, slot } => {
            for i in 0..*max {
                vu.slots[*slot] = i.to_string();
                match holds(vu, Some(cond)) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(why) => return block_failed(vu, block, format!("its `repeat.while` failed: {why}"), walk),
                }
                let next = pass(vu, block, walk).await;
                if next != Next::Go {
                    return next;
                }
            }
            Next::Go
        }
    }
}

/// One pass of a loop's body, then a yield to the worker's scheduler, whatever the body did:
/// a pass whose steps were all skipped awaits nothing, and without it a long loop would keep
/// the worker's thread from its other VUs, its ticks, the run's end and Ctrl-C (the worker
/// aborts a VU only when the VU yields).
async fn pass(vu: &mut Vu, block: &BlockPlan, walk: &mut Walk<'_>) -> Next {
    let next = run_nodes(vu, &block.body, walk).await;
    tokio::task::yield_now().await;
    next
}

/// A block whose expression failed: counted as a failure of its first step (the report's
/// rows are steps), which also decides what follows by its `onError`.
fn block_failed(vu: &mut Vu, block: &BlockPlan, why: String, walk: &mut Walk<'_>) -> Next {
    let Some(first) = first_step(&block.body) else { return Next::Go };
    let step = &walk.scenario.steps[first];
    failed(vu, step, ErrorKind::Check, format!("the block {} was not run: {why}", block.at), walk)
}

fn first_step(nodes: &[Node]) -> Option<usize> {
    nodes.iter().find_map(|n| match n {
        Node::Step(i) => Some(*i),
        Node::Block(b) => first_step(&b.body),
    })
}
