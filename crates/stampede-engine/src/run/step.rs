//! One step: the request, its checks and extraction, and what is recorded of it.

use crate::compile::extract::ResponseView;
use crate::compile::plan::StepPlan;
use crate::compile::template::take_render_error;
use stampede_model::ErrorKind;
use std::time::Instant;

use super::outcome::{ErrorSample, SAMPLE_BYTES};
use super::send::send;
use super::shared::{ERROR_SAMPLES_PER_WORKER, WorkerLocal};
use super::vu::Vu;

/// Runs one step; the kind of its failure when it failed (no answer, a failed check or
/// extraction). With `intended` (an open model's first step), latency counts from that
/// scheduled start. In an open model (`open`) every step's service time (from the actual send)
/// is kept too: for the steps after the first it equals their latency.
pub(super) async fn run_step(
    vu: &mut Vu,
    step: &StepPlan,
    intended: Option<Instant>,
    open: bool,
    local: &WorkerLocal,
) -> Result<(), ErrorKind> {
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
            if open {
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
            // The generator is lent once for all the checks (their expected values may use it).
            let slots = &vu.slots;
            vu.generator.lend(|| {
                for (i, check) in step.checks.iter().enumerate() {
                    let outcome = match (check.evaluate(&resp, slots, &mut json), take_render_error()) {
                        (_, Some(message)) => Err(format!("expression {message}")),
                        (outcome, None) => outcome,
                    };
                    s.record_check(i, outcome.is_ok());
                    if let (Err(why), None) = (outcome, &failed_check) {
                        failed_check = Some(format!("check `{}` failed: {why}", check.name));
                    }
                }
            });
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
    vu.generator.status = status.unwrap_or(0);
    let Some((kind, message)) = failure else { return Ok(()) };
    drop(guard);
    record_failure(vu, step, kind, message, status, local);
    Err(kind)
}

/// Counts a failure of `step` (its request is already counted) and keeps a sample of it, the
/// first of its kind for the step on this worker.
pub(super) fn record_failure(
    vu: &Vu,
    step: &StepPlan,
    kind: ErrorKind,
    message: String,
    status: Option<u16>,
    local: &WorkerLocal,
) {
    {
        let mut m = local.metrics.borrow_mut();
        m.steps[step.metric].record_error(kind);
        m.interval.record_error(step.metric, kind);
    }
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
