//! A virtual user: its state, one iteration of its scenario, and one step (request, checks,
//! extraction, think time).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::client::exchange::Headers;
use crate::client::transport::VuConn;
use crate::compile::expr::Gen;
use crate::compile::extract::ResponseView;
use crate::compile::plan::{Plan, StepPlan};
use stampede_model::ErrorKind;
use stampede_model::scenario::OnError;
use stampede_model::scenario::VarScope;

use super::executor::Shared;
use super::outcome::{ErrorSample, SAMPLE_BYTES};
use super::send::send;
use super::worker::{ERROR_SAMPLES_PER_WORKER, WorkerLocal};

/// A virtual user's own state.
pub(super) struct Vu {
    /// Its HTTP/1.1 connection, and the connections it opened during the current step.
    pub(super) conn: VuConn,
    pub(super) slots: Vec<String>,
    pub(super) rng: fastrand::Rng,
    /// Its generated values' source (`uuid()`, `vu.iteration`…), lent while its templates render.
    pub(super) generator: Gen,
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
}

impl Vu {
    pub(super) fn new(index: u32, shared: &Shared) -> Vu {
        let mut vu = Vu {
            conn: VuConn::default(),
            slots: vec![String::new(); shared.plan.slot_count],
            rng: fastrand::Rng::with_seed(0x5eed_0000_u64 ^ u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            generator: Gen::new(shared.plan.seed, index + 1, shared.plan.runner.0, shared.plan.runner.1),
            request_buf: Vec::new(),
            extra_buf: Vec::new(),
            body: Vec::new(),
            headers: Headers::default(),
            jar: None,
            sent_head: Vec::new(),
            timer: None,
            ended: None,
        };
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
    vu.renew_vars(&shared.plan, VarScope::Iteration);
    // Each iteration is a new visit: a fresh cookie jar.
    vu.jar = shared.plan.cookies.then(crate::client::cookies::Jar::default);
    let sc = shared.plan.groups[group].pick(&mut vu.rng);
    let scenario = &shared.plan.scenarios[sc];
    for (i, step) in scenario.steps.iter().enumerate() {
        let ok = run_step(vu, step, if i == 0 { intended } else { None }, local).await;
        if !ok {
            match step.on_error {
                OnError::Continue => {}
                OnError::NextIteration => break,
                OnError::AbortRun => {
                    let _ = shared.aborted.set(format!(
                        "step `{}` of scenario `{}` failed and has `onError: abort-run`",
                        step.name, scenario.name
                    ));
                    return false;
                }
            }
        }
        if let Some(think) = &step.think {
            vu.ended = None;
            tokio::time::sleep(think.pick(&mut vu.rng)).await;
        }
    }
    vu.conn.end_iteration(&shared.plan.transport);
    vu.generator.iteration += 1;
    let mut m = local.metrics.borrow_mut();
    m.iterations[sc] += 1;
    m.interval.iterations += 1;
    true
}

/// Runs one step; false when it failed (no answer, a failed check or extraction). With
/// `intended` (an open model's first step), latency counts from that scheduled start and
/// the service time from the actual send is kept too.
pub(super) async fn run_step(vu: &mut Vu, step: &StepPlan, intended: Option<Instant>, local: &WorkerLocal) -> bool {
    let started = Instant::now();
    vu.headers.all = step.needs_headers;
    let result = send(vu, &step.request, step.needs_body, &local.transport, started).await;
    let ended = Instant::now();
    vu.ended = Some(ended);
    let service = ended.saturating_duration_since(started).as_micros() as u64;
    // From the scheduled start, or from the actual send when that came first (the scheduler
    // may start an iteration up to a timer tick early).
    let micros = intended.map_or(service, |at| (ended.saturating_duration_since(at).as_micros() as u64).max(service));
    let mut guard = local.metrics.borrow_mut();
    let m = &mut *guard;
    let s = &mut m.steps[step.metric];
    s.requests += 1;
    m.interval.record_request(step.metric);
    if vu.conn.opened_any() {
        for times in vu.conn.take_opened() {
            s.phases.record_connect(&times);
        }
    }
    let mut status = None;
    let failure = match result {
        Ok((info, sent, received)) => {
            status = Some(info.status);
            s.bytes_sent += sent;
            s.bytes_received += received;
            s.record_latency_us(micros);
            if intended.is_some() {
                s.record_service_us(service);
            }
            // No first-byte instant: the whole answer came in one read, at the end.
            let ttfb = info.first_byte.map_or(service, |at| at.saturating_duration_since(started).as_micros() as u64);
            s.phases.record_answer(ttfb, service);
            m.interval.record_latency(step.metric, micros.max(1));
            s.record_status(info.status);
            let resp = ResponseView { status: info.status, headers: &vu.headers.list, body: &vu.body };
            let mut json = None;
            let mut failed_check = None;
            for (i, check) in step.checks.iter().enumerate() {
                let outcome = vu.generator.lend(|| {
                    let outcome = check.evaluate(&resp, &vu.slots, &mut json);
                    match crate::compile::template::take_render_error() {
                        Some(message) => Err(format!("expression {message}")),
                        None => outcome,
                    }
                });
                s.record_check(i, outcome.is_ok());
                if let (Err(why), None) = (outcome, &failed_check) {
                    failed_check = Some(format!("check `{}` failed: {why}", check.name));
                }
            }
            if failed_check.is_none() && !step.accept.passes(info.status) {
                failed_check =
                    Some(format!("status {} is not accepted (2xx or 3xx without a status check)", info.status));
            }
            let extracted = extract(step, &resp, &mut json, &mut vu.slots);
            match (failed_check, extracted) {
                (Some(why), _) => Some((ErrorKind::Check, why)),
                (None, Err(why)) => Some((ErrorKind::Extract, why)),
                (None, Ok(())) => None,
            }
        }
        Err((e, sent)) => {
            s.bytes_sent += sent;
            Some((e.kind, e.message))
        }
    };
    let Some((kind, message)) = failure else { return true };
    s.record_error(kind);
    m.interval.record_error(step.metric, kind);
    let mut samples = local.error_samples.borrow_mut();
    if samples.len() < ERROR_SAMPLES_PER_WORKER && !samples.iter().any(|x| x.kind == kind && x.metric == step.metric) {
        let response = status.map(|code| {
            let mut text = format!("HTTP {code}\n");
            for (n, v) in &vu.headers.list {
                text.push_str(&format!("{n}: {v}\n"));
            }
            text.push('\n');
            text.push_str(&truncated(&vu.body));
            text
        });
        samples.push(ErrorSample {
            metric: step.metric,
            kind,
            message: format!("step `{}`: {message}", step.name),
            request: truncated(&vu.sent_head),
            response,
        });
    }
    false
}

/// A request's timeout without a timer per request: `timer` is the VU's, kept from request
/// to request. Registering a timer and removing it again for every request was a tenth of the
/// user-space CPU per request. Instead the VU's timer is only set when it is spent or set later
/// than this deadline: with one timeout for every request, once per timeout period. A timer
/// that fires before `deadline` (set for an earlier request) is set to `deadline` then.
/// `None` when the deadline passed first.
pub(super) struct WithDeadline<'a, F> {
    pub(super) inner: Pin<&'a mut F>,
    pub(super) timer: Pin<&'a mut tokio::time::Sleep>,
    pub(super) deadline: tokio::time::Instant,
}

impl<F: Future> Future for WithDeadline<'_, F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        if let Poll::Ready(out) = self.inner.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        let deadline = self.deadline;
        loop {
            match self.timer.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) if self.timer.deadline() >= deadline => return Poll::Ready(None),
                Poll::Ready(()) => self.timer.as_mut().reset(deadline),
            }
        }
    }
}

/// The first [`SAMPLE_BYTES`] of `bytes` as text.
pub(super) fn truncated(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(SAMPLE_BYTES)];
    let mut text = String::from_utf8_lossy(cut).into_owned();
    if bytes.len() > SAMPLE_BYTES {
        text.push_str(&format!("… ({} bytes in all)", bytes.len()));
    }
    text
}

/// Runs a step's extractors into the VU's slots; the first failure stops them.
pub(super) fn extract(
    step: &StepPlan,
    resp: &ResponseView<'_>,
    json: &mut Option<Option<serde_json::Value>>,
    slots: &mut [String],
) -> Result<(), String> {
    for e in &step.extract {
        slots[e.slot] = e.apply(resp, json)?;
    }
    Ok(())
}
