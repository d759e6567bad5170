//! A gRPC call on the wire, below the service and reflection that answer calls: its sending
//! half, the length-prefixed messages read from its request, its status, and the counters
//! (calls by method, messages each way, statuses by name).

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming};
use prost::Message;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The longest message accepted.
const MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// The service's methods, in the order their counters are kept.
pub(crate) const METHODS: [&str; 4] = ["Echo", "Count", "Sum", "Chat"];

/// gRPC status names by code.
pub const STATUS_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The gRPC counters.
#[derive(Debug, Default)]
pub struct GrpcStats {
    pub(crate) calls: [AtomicU64; 4],
    pub(crate) messages_received: AtomicU64,
    pub(crate) messages_sent: AtomicU64,
    pub(crate) statuses: [AtomicU64; 17],
    pub(crate) echoed: AtomicU64,
    /// Server reflection calls (counted apart from the service's calls, messages and statuses).
    pub(crate) reflections: AtomicU64,
}

impl GrpcStats {
    /// Calls of `method` (`Echo`, `Count`, `Sum`, `Chat`) begun.
    pub fn calls(&self, method: &str) -> u64 {
        METHODS.iter().position(|m| *m == method).map_or(0, |i| self.calls[i].load(Ordering::Relaxed))
    }

    /// Calls that ended with `status` (a gRPC status name).
    pub fn status(&self, status: &str) -> u64 {
        STATUS_NAMES.iter().position(|s| *s == status).map_or(0, |i| self.statuses[i].load(Ordering::Relaxed))
    }

    /// Messages the service's calls received (server reflection's not counted).
    pub fn messages_received(&self) -> u64 {
        self.messages_received.load(Ordering::Relaxed)
    }

    /// Messages the service's calls sent (server reflection's not counted).
    pub fn messages_sent(&self) -> u64 {
        self.messages_sent.load(Ordering::Relaxed)
    }

    /// The counters as JSON, for `/stats`.
    pub fn to_json(&self) -> Value {
        let calls: serde_json::Map<String, Value> =
            METHODS.iter().zip(&self.calls).map(|(m, c)| (m.to_string(), json!(c.load(Ordering::Relaxed)))).collect();
        let statuses: serde_json::Map<String, Value> = STATUS_NAMES
            .iter()
            .zip(&self.statuses)
            .map(|(s, c)| (s.to_string(), json!(c.load(Ordering::Relaxed))))
            .filter(|(_, c)| c != &json!(0))
            .collect();
        json!({
            "calls": calls,
            "messagesReceived": self.messages_received(),
            "messagesSent": self.messages_sent(),
            "statuses": statuses,
            "reflection": self.reflections.load(Ordering::Relaxed),
        })
    }

    pub(crate) fn ended(&self, code: u32) {
        self.statuses[code.min(16) as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// A call's sending half and the counters.
pub(crate) struct Call<'a> {
    pub(crate) tx: &'a mpsc::Sender<Frame<Bytes>>,
    pub(crate) stats: &'a GrpcStats,
}

pub(crate) type Status = (u32, String);

impl Call<'_> {
    /// Sends one message; `false` when the client is gone.
    pub(crate) async fn send(&self, message: &impl Message) -> bool {
        let mut buf = BytesMut::with_capacity(5 + message.encoded_len());
        buf.put_u8(0);
        buf.put_u32(message.encoded_len() as u32);
        message.encode(&mut buf).expect("capacity reserved");
        let sent = self.tx.send(Frame::data(buf.freeze())).await.is_ok();
        if sent {
            self.stats.messages_sent.fetch_add(1, Ordering::Relaxed);
        }
        sent
    }
}

/// Length-prefixed messages read from a request body as they come.
pub(crate) struct Messages {
    body: Incoming,
    buf: BytesMut,
    ended: bool,
}

impl Messages {
    pub(crate) fn new(body: Incoming) -> Messages {
        Messages { body, buf: BytesMut::new(), ended: false }
    }

    /// The next message; `None` at the end of the stream.
    pub(crate) async fn next<M: Message + Default>(&mut self, stats: &GrpcStats) -> Result<Option<M>, Status> {
        loop {
            if self.buf.len() >= 5 {
                if self.buf[0] != 0 {
                    return Err((12, "compressed messages are not supported".into()));
                }
                let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
                if len > MAX_MESSAGE {
                    return Err((8, format!("a message of {len} bytes is over the limit of {MAX_MESSAGE}")));
                }
                if self.buf.len() >= 5 + len {
                    self.buf.advance(5);
                    let bytes = self.buf.split_to(len);
                    stats.messages_received.fetch_add(1, Ordering::Relaxed);
                    return M::decode(bytes).map(Some).map_err(|e| (13, format!("cannot decode the message: {e}")));
                }
            }
            if self.ended {
                return if self.buf.is_empty() { Ok(None) } else { Err((13, "the stream ended mid-message".into())) };
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => return Err((1, format!("the request stream failed: {e}"))),
                None => self.ended = true,
            }
        }
    }

    /// Exactly one message (unary and server-streaming requests).
    pub(crate) async fn one<M: Message + Default>(&mut self, stats: &GrpcStats) -> Result<M, Status> {
        match self.next(stats).await? {
            Some(m) => Ok(m),
            None => Err((13, "no request message".into())),
        }
    }
}
