//! Sending one gRPC call: its messages rendered and framed, sent over the worker's HTTP/2
//! pool (the connections HTTP/2 requests use), and its answer read: the messages, and the
//! status from the trailers (or the headers of a trailers-only answer).

use std::borrow::Cow;
use std::time::Instant;

use crate::client::url::HttpUrl;

use crate::client::exchange::ExchangeError;
use crate::client::transport::{self, WorkerTransport};
use crate::compile::grpc::GrpcPlan;
use crate::compile::plan::StepPlan;
use stampede_model::ErrorKind;

use super::answer::{Answer, Ending, Failure};
use super::outcome::SAMPLE_BYTES;
use super::send::WithDeadline;
use super::vu::Vu;

/// One call of `step`; the answer's status is the gRPC status code.
pub(super) async fn call(
    vu: &mut Vu,
    step: &StepPlan,
    g: &GrpcPlan,
    wt: &WorkerTransport,
    started: Instant,
) -> Result<Answer, Failure> {
    let Vu { conn, slots, request_buf, extra_buf, body, headers, sent_head, timer, generator, .. } = vu;
    // A call that never varies was written once, when the scenario compiled.
    let (target, bytes): (Cow<'_, HttpUrl>, &[u8]) = match g.fixed_request() {
        Some((target, bytes)) => (Cow::Borrowed(target), bytes),
        None => {
            extra_buf.clear();
            request_buf.clear();
            let rendered = generator.lend(|| {
                g.encode(slots, extra_buf)?;
                step.request.render_with_body(slots, extra_buf, request_buf).map_err(|e| e.to_string())
            });
            match rendered {
                Ok(t) => (Cow::Owned(t), request_buf.as_slice()),
                Err(message) => {
                    sent_head.clear();
                    let error = ExchangeError { kind: ErrorKind::Protocol, message, sent: false, answered: false };
                    return Err(Failure { error, sent: 0, messages: None, ending: None });
                }
            }
        }
    };
    sent_head.clear();
    sent_head.extend_from_slice(&bytes[..bytes.len().min(SAMPLE_BYTES + 1)]);
    let sent = bytes.len() as u64;
    let exchange =
        transport::exchange_h2(conn, wt, &target, bytes, Some(&mut *body), &mut *headers, step.request.connect_timeout);
    let deadline = tokio::time::Instant::from_std(started + g.deadline);
    let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
    if timer.is_elapsed() || timer.deadline() > deadline {
        timer.as_mut().reset(deadline);
    }
    let outcome = {
        let exchange = std::pin::pin!(exchange);
        WithDeadline { inner: exchange, timer: timer.as_mut(), deadline }.await
    };
    // The request's messages went out whole once it was sent (one body); a call that never
    // went out (a refused connect) sent nothing.
    let failed = |error: ExchangeError| {
        let messages = error.sent.then_some((g.messages_per_call(), 0));
        Failure { sent: if error.sent { sent } else { 0 }, error, messages, ending: None }
    };
    let info = match outcome {
        Some(Ok(info)) => info,
        // Past the deadline, a server's reset of the stream (grpc-go cancels it as its own
        // deadline passes) is the deadline too, as gRPC clients report it.
        Some(Err(e)) if Instant::now() >= started + g.deadline => {
            let message = format!("no answer within the deadline of {:?} ({})", g.deadline, e.message);
            return Err(past_deadline(failed(ExchangeError { kind: ErrorKind::DeadlineExceeded, message, ..e })));
        }
        Some(Err(e)) => return Err(failed(e)),
        None => {
            let message = format!("no answer within the deadline of {:?}", g.deadline);
            return Err(past_deadline(failed(ExchangeError {
                kind: ErrorKind::DeadlineExceeded,
                message,
                sent: true,
                answered: false,
            })));
        }
    };
    let answered = |message: String| failed(ExchangeError::protocol(message));
    if info.status != 200 {
        return Err(answered(format!("HTTP status {}: not a gRPC answer", info.status)));
    }
    let Some(code) = headers.get("grpc-status").map(str::trim) else {
        return Err(answered("the answer has no grpc-status (is this a gRPC server?)".into()));
    };
    let Ok(code) = code.parse::<u16>() else {
        return Err(answered(format!("grpc-status `{code}` is not a status code")));
    };
    let detail = headers.get("grpc-message").map(percent_decode).filter(|m| !m.is_empty());
    // An answer that does not decode still ended with the server's status.
    let unreadable = |message: String| Failure { ending: Some(Ending::Grpc(code)), ..answered(message) };
    let received_messages = if step.needs_body {
        let mut json = Vec::new();
        let n = g.decode(body, Some(&mut json), code == 0).map_err(unreadable)?;
        *body = json;
        n
    } else {
        g.decode(body, None, code == 0).map_err(unreadable)?
    };
    Ok(Answer {
        status: code,
        http_status: Some(info.status),
        sent,
        received: info.bytes_received,
        first_byte: info.first_byte,
        messages: Some((g.messages_per_call(), received_messages)),
        detail,
        round_trips: Vec::new(),
    })
}

/// A call its deadline ended: DEADLINE_EXCEEDED, as gRPC clients report it.
fn past_deadline(failure: Failure) -> Failure {
    Failure { ending: Some(Ending::Grpc(DEADLINE_EXCEEDED)), ..failure }
}

/// gRPC's status code DEADLINE_EXCEEDED.
const DEADLINE_EXCEEDED: u16 = 4;

/// `grpc-message` is percent-encoded.
fn percent_decode(v: &str) -> String {
    percent_encoding::percent_decode_str(v).decode_utf8_lossy().into_owned()
}
