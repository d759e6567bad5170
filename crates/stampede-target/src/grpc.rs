//! The target's gRPC service, `stampede.target.v1.Target` (its `.proto` is
//! `examples/target.proto`): one method of each call kind, over the server's HTTP/2.
//!
//! - `Echo` (unary): the text back, after `delay_ms`; with `status` set, that gRPC status.
//!   A `grpc-timeout` shorter than the delay ends the call with `DEADLINE_EXCEEDED`.
//! - `Count` (server streaming): `count` ticks, `interval_ms` apart.
//! - `Sum` (client streaming): the sum and number of the numbers sent.
//! - `Chat` (bidirectional): each message answered as it comes.
//!
//! It offers server reflection too (`reflection.rs`). Any other path under a gRPC content type
//! is `UNIMPLEMENTED`. The counters (calls by
//! method, messages each way, statuses by name) are what tests compare reports with.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Frame, Incoming};
use prost::Message;
use tokio::sync::mpsc;

use crate::grpc_call::{Call, METHODS, Messages, Status};
pub use crate::grpc_call::{GrpcStats, STATUS_NAMES};

/// The most ticks one `Count` call sends.
const MAX_TICKS: u32 = 100_000;
const SERVICE: &str = "/stampede.target.v1.Target/";

/// The request of `Echo`, and each message a client sends in `Chat`.
#[derive(Clone, PartialEq, Message)]
pub struct EchoRequest {
    /// The text to send back.
    #[prost(string, tag = "1")]
    pub text: String,
    /// `Echo`: how long to wait before answering, ms (0: not at all; at most 60 000).
    #[prost(uint32, tag = "2")]
    pub delay_ms: u32,
    /// A gRPC status code to end the call with instead of answering (0: answer; above 16
    /// counts as 16).
    #[prost(uint32, tag = "3")]
    pub status: u32,
}

/// The answer of `Echo`, and of each message in `Chat`.
#[derive(Clone, PartialEq, Message)]
pub struct EchoReply {
    /// The text that was sent.
    #[prost(string, tag = "1")]
    pub text: String,
    /// The server's count of `Echo` calls answered so far, this one included (`Chat`: of the
    /// messages answered in this call), from 1.
    #[prost(uint64, tag = "2")]
    pub seq: u64,
}

/// The request of `Count`.
#[derive(Clone, PartialEq, Message)]
pub struct CountRequest {
    /// How many ticks to send, at most 100 000 (more: `OUT_OF_RANGE`).
    #[prost(uint32, tag = "1")]
    pub count: u32,
    /// The pause between two ticks, ms (at most 60 000).
    #[prost(uint32, tag = "2")]
    pub interval_ms: u32,
}

/// One message of the stream `Count` sends.
#[derive(Clone, PartialEq, Message)]
pub struct Tick {
    /// The tick's number, from 0.
    #[prost(uint32, tag = "1")]
    pub index: u32,
}

/// One message a client sends in `Sum`.
#[derive(Clone, PartialEq, Message)]
pub struct Number {
    /// The number to add.
    #[prost(int64, tag = "1")]
    pub value: i64,
}

/// The answer of `Sum`.
#[derive(Clone, PartialEq, Message)]
pub struct Total {
    /// The sum of the numbers sent (wrapping on overflow).
    #[prost(int64, tag = "1")]
    pub sum: i64,
    /// How many numbers were sent.
    #[prost(uint32, tag = "2")]
    pub count: u32,
}

/// A response body: whole, or frames (data, then trailers) as the call makes them.
#[derive(Debug)]
pub enum TargetBody {
    /// The whole body at once: every answer but a gRPC call's stream.
    Full(Full<Bytes>),
    /// Frames as the call sends them (its messages, then the trailers with its status); the
    /// body ends when the sender is dropped.
    Frames(mpsc::Receiver<Frame<Bytes>>),
}

impl hyper::body::Body for TargetBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            TargetBody::Full(full) => Pin::new(full).poll_frame(cx),
            TargetBody::Frames(rx) => rx.poll_recv(cx).map(|f| f.map(Ok)),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            TargetBody::Full(full) => full.is_end_stream(),
            TargetBody::Frames(_) => false,
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            TargetBody::Full(full) => full.size_hint(),
            TargetBody::Frames(_) => hyper::body::SizeHint::default(),
        }
    }
}

/// Whether `req` is a gRPC call (its content type says so).
pub fn is_grpc(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct == "application/grpc" || ct.starts_with("application/grpc+proto"))
}

/// A call the target has no room for (its queue is full): `RESOURCE_EXHAUSTED`.
pub fn refused(stats: &crate::TargetStats) -> Response<TargetBody> {
    stats.grpc.ended(8);
    trailers_only(8, "queue full")
}

/// Serves one gRPC call.
pub async fn serve(req: Request<Incoming>, stats: std::sync::Arc<crate::TargetStats>) -> Response<TargetBody> {
    let deadline = req.headers().get("grpc-timeout").and_then(|v| parse_timeout(v.as_bytes()));
    let method = req.uri().path().strip_prefix(SERVICE).and_then(|m| METHODS.iter().position(|x| *x == m));
    let (tx, rx) = mpsc::channel(16);
    let mut response = Response::new(TargetBody::Frames(rx));
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    let Some(method) = method else {
        // Not one of the service's methods (looked up first: the load's calls are).
        if crate::reflection::is_reflection(req.uri().path()) {
            stats.grpc.reflections.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let apart = GrpcStats::default();
                let call = Call { tx: &tx, stats: &apart };
                let (code, message) = crate::reflection::serve(&call, req.into_body()).await;
                let _ = tx.send(Frame::trailers(status_trailers(code, &message))).await;
            });
            return response;
        }
        let path = req.uri().path().to_string();
        stats.grpc.ended(12);
        return trailers_only(12, &format!("unknown method {path}"));
    };
    stats.grpc.calls[method].fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        let g = &stats.grpc;
        let call = Call { tx: &tx, stats: g };
        let work = async {
            match method {
                0 => call.echo(req.into_body()).await,
                1 => call.count(req.into_body()).await,
                2 => call.sum(req.into_body()).await,
                _ => call.chat(req.into_body()).await,
            }
        };
        let (code, message) = match deadline {
            Some(d) => tokio::time::timeout(d, work).await.unwrap_or((4, "deadline exceeded".into())),
            None => work.await,
        };
        g.ended(code);
        let _ = tx.send(Frame::trailers(status_trailers(code, &message))).await;
    });
    response
}

impl Call<'_> {
    async fn echo(&self, body: Incoming) -> Status {
        let mut messages = Messages::new(body);
        let req: EchoRequest = match messages.one(self.stats).await {
            Ok(r) => r,
            Err(e) => return e,
        };
        if req.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(u64::from(req.delay_ms).min(60_000))).await;
        }
        if req.status != 0 {
            return (req.status.min(16), format!("asked for status {}", req.status));
        }
        let seq = self.stats.echoed.fetch_add(1, Ordering::Relaxed) + 1;
        self.send(&EchoReply { text: req.text, seq }).await;
        (0, String::new())
    }

    fn gone() -> Status {
        (1, "the client went away".into())
    }

    async fn count(&self, body: Incoming) -> Status {
        let mut messages = Messages::new(body);
        let req: CountRequest = match messages.one(self.stats).await {
            Ok(r) => r,
            Err(e) => return e,
        };
        if req.count > MAX_TICKS {
            return (11, format!("count is at most {MAX_TICKS}"));
        }
        for index in 0..req.count {
            if index > 0 && req.interval_ms > 0 {
                tokio::time::sleep(Duration::from_millis(u64::from(req.interval_ms).min(60_000))).await;
            }
            if !self.send(&Tick { index }).await {
                return Call::gone();
            }
        }
        (0, String::new())
    }

    async fn sum(&self, body: Incoming) -> Status {
        let mut messages = Messages::new(body);
        let mut total = Total::default();
        loop {
            match messages.next::<Number>(self.stats).await {
                Ok(Some(n)) => {
                    total.sum = total.sum.wrapping_add(n.value);
                    total.count += 1;
                }
                Ok(None) => break,
                Err(e) => return e,
            }
        }
        self.send(&total).await;
        (0, String::new())
    }

    async fn chat(&self, body: Incoming) -> Status {
        let mut messages = Messages::new(body);
        let mut seq = 0;
        loop {
            match messages.next::<EchoRequest>(self.stats).await {
                Ok(Some(req)) if req.status != 0 => {
                    return (req.status.min(16), format!("asked for status {}", req.status));
                }
                Ok(Some(req)) => {
                    seq += 1;
                    if !self.send(&EchoReply { text: req.text, seq }).await {
                        return Call::gone();
                    }
                }
                Ok(None) => return (0, String::new()),
                Err(e) => return e,
            }
        }
    }
}

fn status_trailers(code: u32, message: &str) -> HeaderMap {
    let mut t = HeaderMap::new();
    t.insert("grpc-status", HeaderValue::from(code));
    if !message.is_empty() {
        let encoded: String = percent_encode(message);
        if let Ok(v) = HeaderValue::from_str(&encoded) {
            t.insert("grpc-message", v);
        }
    }
    t
}

/// A response with no messages: the status in the headers.
fn trailers_only(code: u32, message: &str) -> Response<TargetBody> {
    let mut r = Response::new(TargetBody::Full(Full::new(Bytes::new())));
    *r.status_mut() = StatusCode::OK;
    r.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    r.headers_mut().extend(status_trailers(code, message));
    r
}

/// gRPC's percent-encoding of `grpc-message`: printable ASCII but `%` as is.
fn percent_encode(message: &str) -> String {
    let mut out = String::new();
    for b in message.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A `grpc-timeout` value: digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`).
pub fn parse_timeout(v: &[u8]) -> Option<Duration> {
    let (unit, digits) = v.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_in_every_unit_and_bad_ones_do_not() {
        assert_eq!(parse_timeout(b"100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_timeout(b"2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_timeout(b"5u"), Some(Duration::from_micros(5)));
        assert_eq!(parse_timeout(b"123456789m"), None, "at most 8 digits");
        assert_eq!(parse_timeout(b"m"), None);
        assert_eq!(parse_timeout(b"10x"), None);
    }

    #[test]
    fn status_messages_are_percent_encoded() {
        assert_eq!(percent_encode("50% off: ü"), "50%25 off: %C3%BC");
    }
}
