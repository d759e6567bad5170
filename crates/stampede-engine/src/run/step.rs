//! One step: the request, its checks and extraction, and what is recorded of it.

use crate::compile::extract::ResponseView;
use crate::compile::plan::StepPlan;
use crate::compile::template::take_render_error;
use stampede_model::ErrorKind;
use std::time::Instant;

use crate::stats::metrics::StepStats;

use super::answer::{Answer, Ending, Failure};
use super::outcome::{ErrorSample, SAMPLE_BYTES};
use super::send::send;
use super::shared::{ERROR_SAMPLES_PER_WORKER, WorkerLocal};
use super::vu::Vu;
use crate::compile::plan::Protocol;
use crate::compile::secrets;

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
    // A gRPC call's status is in `grpc-*` headers or trailers.
    vu.headers.grpc = matches!(step.protocol, Protocol::Grpc(_));
    let result = match step.protocol {
        Protocol::Http => send(vu, &step.request, step.needs_body, &local.transport, started)
            .await
            .map(|(info, sent, received)| Answer {
                status: info.status,
                http_status: Some(info.status),
                sent,
                received,
                first_byte: info.first_byte,
                messages: None,
                detail: None,
                round_trips: Vec::new(),
            })
            .map_err(|(error, sent)| Failure { error, sent, messages: None, ending: None }),
        // Boxed: their states are large, and inline they would weigh on every VU's task.
        _ => Box::pin(other_protocol(vu, step, local, started)).await,
    };
    record(vu, step, result, Timing { started, intended, open }, local)
}

/// When a step started, from when its latency counts (an open model's scheduled start), and
/// whether its service time is kept too (open models).
struct Timing {
    started: Instant,
    intended: Option<Instant>,
    open: bool,
}

/// Counts what a step got: its request, connections, bytes, latency and status, or its failure;
/// judges an answer (checks, extractors). The kind of its failure when it failed.
fn record(
    vu: &mut Vu,
    step: &StepPlan,
    result: Result<Answer, Failure>,
    Timing { started, intended, open }: Timing,
    local: &WorkerLocal,
) -> Result<(), ErrorKind> {
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
        Ok(answer) => {
            status = answer.http_status;
            count_answer(s, step, &answer, (started, micros, service), open);
            m.interval.record_latency(step.metric, micros.max(1));
            judge_answer(vu, step, &answer, s)
        }
        Err(Failure { error, sent, messages, ending }) => {
            match ending {
                Some(Ending::Grpc(code)) => s.add_grpc_status(code, 1),
                Some(Ending::WsClose(code)) => s.add_ws_close(code, 1),
                None => {}
            }
            s.bytes_sent += sent;
            if let Some((out, back)) = messages {
                s.messages_sent += out;
                s.messages_received += back;
            }
            Some((error.kind, error.message))
        }
    };
    vu.generator.status = status.unwrap_or(0);
    let Some((kind, message)) = failure else { return Ok(()) };
    drop(guard);
    record_failure(vu, step, kind, message, status, local);
    Err(kind)
}

/// Counts an answer in its step's stats: bytes, messages, round trips, latency (`micros`, from
/// the intended start) and service time, the answer's phases, its status or ending.
fn count_answer(
    s: &mut StepStats,
    step: &StepPlan,
    answer: &Answer,
    (started, micros, service): (Instant, u64, u64),
    open: bool,
) {
    s.bytes_sent += answer.sent;
    s.bytes_received += answer.received;
    if let Some((out, back)) = answer.messages {
        s.messages_sent += out;
        s.messages_received += back;
    }
    for &us in &answer.round_trips {
        s.record_round_trip_us(us);
    }
    s.record_latency_us(micros);
    if open {
        s.record_service_us(service);
    }
    // No first-byte instant: the whole answer came in one read, at the end.
    let ttfb = answer.first_byte.map_or(service, |at| at.saturating_duration_since(started).as_micros() as u64);
    s.phases.record_answer(ttfb.min(service), service);
    // A gRPC call's answer is its status, not the HTTP/2 200 that carried it.
    match answer_ending(step, answer) {
        Some(Ending::Grpc(code)) => s.add_grpc_status(code, 1),
        ending => {
            if let Some(code) = answer.http_status {
                s.record_status(code);
            }
            if let Some(Ending::WsClose(code)) = ending {
                s.add_ws_close(code, 1);
            }
        }
    }
}

/// Judges an answer: whether the step accepts its status, its checks (counted in `s`), its
/// extractors; the first failure, with its kind and words.
fn judge_answer(vu: &mut Vu, step: &StepPlan, answer: &Answer, s: &mut StepStats) -> Option<(ErrorKind, String)> {
    let resp = ResponseView { status: answer.status, headers: &vu.headers.list, body: &vu.body };
    // An answer the step does not accept: for gRPC its status is the error's kind, for a
    // WebSocket a refused upgrade; for HTTP a failed check.
    let denied = (!step.accept.passes(answer.status)).then(|| denied(step, answer));
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
    let extracted = if denied.is_some() { Ok(()) } else { extract(step, &resp, &mut json, &mut vu.slots) };
    // HTTP: a failed explicit status check says why in its own words.
    let http = matches!(step.protocol, Protocol::Http);
    match (denied, failed_check, extracted) {
        (Some(_), Some(why), _) if http => Some((ErrorKind::Check, why)),
        (Some(d), _, _) => Some(d),
        (None, Some(why), _) => Some((ErrorKind::Check, why)),
        (None, None, Err(why)) => Some((ErrorKind::Extract, why)),
        (None, None, Ok(())) => None,
    }
}

/// A gRPC call or a WebSocket session.
async fn other_protocol(
    vu: &mut Vu,
    step: &StepPlan,
    local: &WorkerLocal,
    started: Instant,
) -> Result<Answer, Failure> {
    match &step.protocol {
        Protocol::Grpc(g) => super::grpc::call(vu, step, g, &local.transport, started).await,
        Protocol::Ws(w) => super::ws::session(vu, step, w, &local.transport, started).await,
        Protocol::Http => unreachable!("HTTP steps are sent inline"),
    }
}

/// How `step`'s answered call or session ended: a gRPC call with its status; a WebSocket
/// session that upgraded and was not kept open with its close code. (Not a field of
/// [`Answer`]: every VU's task holds one, and it is known from the plan.)
fn answer_ending(step: &StepPlan, answer: &Answer) -> Option<Ending> {
    match &step.protocol {
        Protocol::Grpc(_) => Some(Ending::Grpc(answer.status)),
        Protocol::Ws(w) if answer.status == 101 && !w.keep_open => Some(Ending::WsClose(w.close_code)),
        _ => None,
    }
}

/// The failure of an answer whose status `step` does not accept.
fn denied(step: &StepPlan, answer: &Answer) -> (ErrorKind, String) {
    let detail = answer.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default();
    match &step.protocol {
        Protocol::Http => {
            (ErrorKind::Check, format!("status {} is not accepted (2xx or 3xx without a status check)", answer.status))
        }
        Protocol::Grpc(_) => {
            let name = crate::compile::grpc::status_name(answer.status);
            let kind = ErrorKind::grpc(u32::from(answer.status)).unwrap_or(ErrorKind::Check);
            (kind, format!("gRPC status {name}{detail}"))
        }
        Protocol::Ws(_) => (ErrorKind::Upgrade, format!("the server refused the upgrade: HTTP {}", answer.status)),
    }
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
        // The request as kept when it was sent (cut past SAMPLE_BYTES) and the body cut to as
        // much as a sample shows plus the longest secret: a secret their cuts left partly
        // visible is hidden, then each is redacted whole and cut to SAMPLE_BYTES. The
        // exchange's own credential headers are hidden wherever else it shows them.
        let shown = |bytes: &[u8], keep: usize| {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(keep)]).into_owned();
            if bytes.len() > SAMPLE_BYTES { local.redactor.cut_end(&text) } else { text }
        };
        let request = shown(&vu.sent_head, vu.sent_head.len());
        let head = status.map(|code| {
            // A gRPC call's HTTP/2 status carried it: its own status is in `grpc-status`.
            let version = if matches!(step.protocol, Protocol::Grpc(_)) { "HTTP/2" } else { "HTTP" };
            let mut text = format!("{version} {code}\n");
            for (n, v) in &vu.headers.list {
                text.push_str(&format!("{n}: {v}\n"));
            }
            text.push('\n');
            text
        });
        let mut seen = secrets::credentials_in(&request);
        seen.extend(head.as_deref().map(secrets::credentials_in).unwrap_or_default());
        let redactor = local.redactor.with(seen);
        let body = shown(&vu.body, SAMPLE_BYTES + local.redactor.longest());
        let response =
            head.map(|head| redactor.message(&head) + &truncated(redactor.text(&body).as_bytes(), vu.body.len()));
        samples.push(ErrorSample {
            metric: step.metric,
            kind,
            message: redactor.text(&format!("step `{}`: {message}", step.name)),
            request: truncated(redactor.message(&request).as_bytes(), vu.sent_head.len()),
            response,
        });
    }
}

/// The first [`SAMPLE_BYTES`] of `bytes` as text, saying how long it was (`total`) when that
/// is more.
pub(super) fn truncated(bytes: &[u8], total: usize) -> String {
    let cut = &bytes[..bytes.len().min(SAMPLE_BYTES)];
    let mut text = String::from_utf8_lossy(cut).into_owned();
    if bytes.len() > SAMPLE_BYTES || total > SAMPLE_BYTES {
        text.push_str(&format!("… ({} bytes in all)", total.max(bytes.len())));
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
