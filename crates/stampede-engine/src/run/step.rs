//! One iteration of a VU's scenario, its `init` steps, and one step: the request, checks,
//! extraction, think time.

use crate::compile::extract::ResponseView;
use crate::compile::plan::StepPlan;
use crate::compile::template::take_render_error;
use stampede_model::ErrorKind;
use stampede_model::scenario::OnError;
use stampede_model::scenario::VarScope;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::outcome::{ErrorSample, SAMPLE_BYTES};
use super::send::send;
use super::shared::{ERROR_SAMPLES_PER_WORKER, Shared, WorkerLocal};
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
    vu.renew_vars(&shared.plan, VarScope::Iteration);
    // Each iteration is a new visit: a fresh cookie jar.
    vu.jar = shared.plan.cookies.then(crate::client::cookies::Jar::default);
    if !vu.initialized {
        vu.initialized = true;
        if !run_init(vu, shared, local).await {
            return false;
        }
    }
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

/// Runs the `init` steps, once per VU before its first iteration. A failed one goes on to the
/// next (`onError: continue`, the default) or stops the init steps (`next-iteration`); false
/// when one aborts the run.
async fn run_init(vu: &mut Vu, shared: &Shared, local: &WorkerLocal) -> bool {
    for step in shared.plan.init.iter() {
        let ok = run_step(vu, step, None, local).await;
        if !ok {
            match step.on_error {
                OnError::Continue => {}
                OnError::NextIteration => break,
                OnError::AbortRun => {
                    let _ =
                        shared.aborted.set(format!("init step `{}` failed and has `onError: abort-run`", step.name));
                    return false;
                }
            }
        }
        if let Some(think) = &step.think {
            vu.ended = None;
            tokio::time::sleep(think.pick(&mut vu.rng)).await;
        }
    }
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
