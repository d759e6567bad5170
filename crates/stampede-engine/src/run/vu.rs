//! A virtual user's own state: its connection, value slots, generator and buffers.

use crate::client::exchange::Headers;
use crate::client::transport::VuConn;
use crate::compile::expr::Gen;
use crate::compile::plan::Plan;
use stampede_model::scenario::VarScope;
use std::pin::Pin;
use std::time::Instant;

use super::shared::Shared;

/// A virtual user's own state.
pub(super) struct Vu {
    /// Its HTTP/1.1 connection, and the connections it opened during the current step.
    pub(super) conn: VuConn,
    pub(super) slots: Vec<String>,
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
    pub(super) sockets: Vec<super::ws::Socket>,
}

impl Vu {
    pub(super) fn new(index: u32, shared: &Shared) -> Vu {
        let mut vu = Vu {
            conn: VuConn::default(),
            slots: vec![String::new(); shared.plan.slot_count],
            rng: fastrand::Rng::with_seed(0x5eed_0000_u64 ^ u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            generator: Gen::new(shared.plan.seed, index + 1, shared.plan.runner.0, shared.plan.runner.1),
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
        vu.renew_vars(&shared.plan, VarScope::Vu);
        vu
    }

    /// Computes the variables kept `per` VU or iteration into their slots, in their order
    /// (one may use another defined before it).
    pub(super) fn renew_vars(&mut self, plan: &Plan, per: VarScope) {
        if plan.vars.is_empty() {
            return;
        }
        let Vu { generator, slots, .. } = self;
        generator.lend(|| {
            for var in plan.vars.iter().filter(|v| v.per == per) {
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
