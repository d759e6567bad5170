//! The closed model (`constant-vus`, `ramping-vus`): each VU runs iterations back to back.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use super::iteration::run_iteration;
use super::shared::{ActiveGuard, CONTROL_TICK, Shared, WorkerLocal};
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
        && !paused(&shared, group, &retire).await
        && shared.claim_iteration(group)
    {
        if !run_iteration(&mut vu, group, None, &shared, &local).await {
            break;
        }
    }
}

/// Waits while the run is paused (looking as often as the workers' controller): `true` when the
/// VU must stop instead (it retires, or its group stops, while paused).
async fn paused(shared: &Shared, group: usize, retire: &Cell<bool>) -> bool {
    while shared.control.paused() {
        if retire.get() || shared.stopping(group, Instant::now()) {
            return true;
        }
        tokio::time::sleep(CONTROL_TICK).await;
    }
    false
}
