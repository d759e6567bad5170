//! The closed model (`constant-vus`, `ramping-vus`): each VU runs iterations back to back.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use super::iteration::run_iteration;
use super::shared::{ActiveGuard, Shared, WorkerLocal};
use super::vu::Vu;

/// A closed-model VU: runs iterations back to back until its group stops or it retires.
pub(super) async fn vu_task(
    index: u32,
    group: usize,
    shared: Arc<Shared>,
    local: Rc<WorkerLocal>,
    retire: Rc<Cell<bool>>,
) {
    let _active = ActiveGuard::new(local.clone());
    let mut vu = Vu::new(index, &shared);
    while !retire.get()
        && !shared.stopping(group, vu.ended.take().unwrap_or_else(Instant::now))
        && shared.claim_iteration(group)
    {
        if !run_iteration(&mut vu, group, None, &shared, &local).await {
            break;
        }
    }
}
