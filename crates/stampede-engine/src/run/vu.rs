//! A virtual user's own state: its connection, value slots, generator and buffers.

use crate::client::exchange::Headers;
use crate::client::transport::VuConn;
use crate::compile::expr::Gen;
use crate::compile::plan::Plan;
use crate::compile::random::Stream;
use stampede_model::scenario::VarScope;
use std::pin::Pin;
use std::time::Instant;

use super::shared::Shared;

/// A virtual user's own state.
pub(super) struct Vu {
    /// Its HTTP/1.1 connection, and the connections it opened during the current step.
    pub(super) conn: VuConn,
    pub(super) slots: Vec<String>,
    /// Its choices: data rows, scenario picks, think times.
    pub(super) rng: fastrand::Rng,
    /// Its generated values' source (`uuid()`, `vu.iteration`…), lent while its templates render.
    pub(super) generator: Gen,
    /// Whether it ran the `init` steps.
    pub(super) initialized: bool,
    pub(super) request_buf: Vec<u8>,
    /// The request with the jar's cookies spliced in, or a redirect's request.
    pub(super) extra_buf: Vec<u8>,
    /// The last response body, kept only for steps that read it.
    pub(super) body: Vec<u8>,
    /// The last response's kept headers.
    pub(super) headers: Headers,
    pub(super) jar: Option<crate::client::cookies::Jar>,
    /// The first request bytes of the current step, for an error sample.
    pub(super) sent_head: Vec<u8>,
    /// The request timeout's timer, kept from request to request (see [`WithDeadline`]).
    pub(super) timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// When its last step ended, if it has not waited since: "now" for deciding whether to
    /// start another iteration, without reading the clock again.
    pub(super) ended: Option<Instant>,
    /// WebSockets kept open by `keepOpen` steps until the iteration ends.
    pub(super) sockets: Vec<super::socket::Socket>,
}

impl Vu {
    /// VU `index` (from 0 in its runner) of the load.
    pub(super) fn new(index: u32, shared: &Shared) -> Vu {
        let (runner, runners) = shared.plan.runner;
        Vu::with(Gen::new(shared.plan.seed, index + 1, runner, runners), shared)
    }

    /// The VU that runs `setup` or `teardown` (`stream`): its numbers are its own, not a
    /// load VU's.
    pub(super) fn outside_load(stream: Stream, shared: &Shared) -> Vu {
        let (runner, runners) = shared.plan.runner;
        Vu::with(Gen::outside_load(shared.plan.seed, stream, runner, runners), shared)
    }

    /// A VU drawing from `generator`'s stream: its own choices (data rows, scenario picks,
    /// think times) from a generator forked from it.
    fn with(mut generator: Gen, shared: &Shared) -> Vu {
        let rng = generator.rng.fork();
        let mut vu = Vu {
            conn: VuConn::default(),
            slots: vec![String::new(); shared.plan.slot_count],
            rng,
            generator,
            initialized: false,
            request_buf: Vec::new(),
            extra_buf: Vec::new(),
            body: Vec::new(),
            headers: Headers::default(),
            jar: None,
            sent_head: Vec::new(),
            timer: None,
            ended: None,
            sockets: Vec::new(),
        };
        for (slot, value) in &shared.setup_values {
            vu.slots[*slot].clone_from(value);
        }
        vu.renew_vars(&shared.plan, VarScope::Vu, false);
        vu
    }

    /// Computes the variables kept `per` VU or iteration into their slots, in their order
    /// (one may use another defined before it): those that use what `init` extracts
    /// (`after_init`), or the others.
    pub(super) fn renew_vars(&mut self, plan: &Plan, per: VarScope, after_init: bool) {
        if plan.vars.is_empty() {
            return;
        }
        let Vu { generator, slots, .. } = self;
        generator.lend(|| {
            for var in plan.vars.iter().filter(|v| v.per == per && v.after_init == after_init) {
                let value = var.template.render(slots);
                slots[var.slot] = value;
            }
        });
        // A failed expression leaves its variable empty (it is logged; the expression itself
        // was checked when the scenario compiled).
        if let Some(e) = crate::compile::template::take_render_error() {
            tracing::debug!("a variable's expression failed: {e}");
        }
    }
}

#[cfg(test)]
mod size {
    use super::Vu;

    /// A VU's own state, kept for every VU of a run (15,000 of them at the seed's last level):
    /// what a plain HTTP scenario does not use (WebSockets kept open, a cookie jar, a request
    /// timer, block state) costs it an empty field, never a heap allocation. Issue #36 keeps the
    /// size measured: the task's future around it is bounded in `a_vu_task_stays_small`.
    #[test]
    fn a_vu_struct_stays_small() {
        let size = std::mem::size_of::<Vu>();
        println!("Vu: {size} bytes");
        assert!(size <= VU_BYTES, "a VU is {size} bytes, more than its budget of {VU_BYTES}");
    }

    /// The budget of [`a_vu_struct_stays_small`].
    const VU_BYTES: usize = 512;
}
