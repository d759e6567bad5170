//! A WebSocket session: the handshake on a connection of the VU's own (opened and timed like
//! any other), then the step's actions — sends, receives that wait for a matching message,
//! holds — and a close, unless the step keeps the socket for a later step of the iteration.
//!
//! The answer's status is the handshake's (101); a refused upgrade is that status. Its body,
//! for the step's checks and extractors, is the last matching message.

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use crate::client::connect::{self, Io};
use crate::client::exchange::ExchangeError;
use crate::client::tls::Alpn;
use crate::client::transport::WorkerTransport;
use crate::compile::extract::ResponseView;
use crate::compile::plan::StepPlan;
use crate::compile::ws::{WsActionPlan, WsPlan};
use stampede_model::ErrorKind;

use super::outcome::SAMPLE_BYTES;
use super::step::{Answer, Ending, Failure};
use super::vu::Vu;

/// The most bytes of a handshake answer's head.
const MAX_HEAD: usize = 16 * 1024;

/// A socket kept open across steps of an iteration (`keepOpen`), by its URL.
pub(super) struct Socket {
    key: String,
    stream: WebSocketStream<Io>,
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket").field("key", &self.key).finish()
    }
}

/// Small buffers: tungstenite's defaults (128 KiB each way, allocated per socket) would make
/// 10,000 open sockets cost 2.5 GB. Reads grow their buffer for a larger message; writes go out
/// at once.
pub(crate) fn config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(4096).write_buffer_size(0)
}

/// Closes the sockets kept for the iteration that ended.
pub(super) async fn close_kept(sockets: &mut Vec<Socket>) {
    for mut s in sockets.drain(..) {
        let frame = CloseFrame { code: CloseCode::Normal, reason: "".into() };
        let _ = tokio::time::timeout(Duration::from_secs(1), s.stream.close(Some(frame))).await;
    }
}

/// Counts of one session, kept as it goes so a failure still reports them.
#[derive(Default)]
struct Tally {
    sent: u64,
    received: u64,
    bytes_sent: u64,
    bytes_received: u64,
    /// Each send to its matching message, µs.
    round_trips: Vec<u64>,
    /// The last send.
    last_send: Option<Instant>,
    /// The server's close code (1005 for a close frame without one, 1006 for none at all).
    closed_with: Option<u16>,
}

/// Runs `step`'s session.
pub(super) async fn session(
    vu: &mut Vu,
    step: &StepPlan,
    w: &WsPlan,
    wt: &WorkerTransport,
    started: Instant,
) -> Result<Answer, Failure> {
    vu.request_buf.clear();
    let Vu { slots, request_buf, generator, sent_head, .. } = &mut *vu;
    let target = match generator.lend(|| step.request.render(slots, request_buf)) {
        Ok(t) => t,
        Err(e) => {
            sent_head.clear();
            let error =
                ExchangeError { kind: ErrorKind::Protocol, message: e.to_string(), sent: false, answered: false };
            return Err(Failure { error, sent: 0, messages: None, ending: None });
        }
    };
    sent_head.clear();
    sent_head.extend_from_slice(&request_buf[..request_buf.len().min(SAMPLE_BYTES + 1)]);
    let key = format!("{}://{}{}", if target.tls { "wss" } else { "ws" }, target.authority, target.path_and_query);
    let deadline = started + w.timeout;
    let mut tally = Tally::default();
    let kept = vu.sockets.iter().position(|s| s.key == key).map(|i| vu.sockets.swap_remove(i));
    let (mut stream, first_byte) = match kept {
        Some(s) => (s.stream, None),
        None => {
            let opened = tokio::time::timeout_at(
                deadline.into(),
                handshake(vu, w, wt, &target, &mut tally, step.request.connect_timeout),
            )
            .await;
            match opened {
                Err(_) => return Err(tally.failed(timeout(w.timeout, "the handshake"))),
                Ok(Err(e)) => return Err(tally.failed(e)),
                // A refused upgrade: its status is the answer.
                Ok(Ok(Handshake::Refused(status))) => {
                    return Ok(Answer {
                        status,
                        http_status: Some(status),
                        sent: tally.bytes_sent,
                        received: tally.bytes_received,
                        first_byte: Some(Instant::now()),
                        messages: Some((0, 0)),
                        detail: None,
                        round_trips: Vec::new(),
                    });
                }
                Ok(Ok(Handshake::Open(stream))) => (*stream, Some(Instant::now())),
            }
        }
    };
    let acted = tokio::time::timeout_at(deadline.into(), act(vu, step, w, &mut stream, &mut tally)).await;
    let result = match acted {
        Err(_) => Err(timeout(w.timeout, "the session")),
        Ok(r) => r,
    };
    match &result {
        Ok(()) if w.keep_open => vu.sockets.push(Socket { key, stream }),
        Ok(()) => {
            let frame = CloseFrame { code: CloseCode::from(w.close_code), reason: "".into() };
            let closing = tokio::time::timeout_at(deadline.into(), stream.close(Some(frame))).await;
            if closing.is_err() {
                return Err(tally.failed(timeout(w.timeout, "the close")));
            }
        }
        Err(_) => {}
    }
    result.map_err(|e| tally.failed(e))?;
    Ok(Answer {
        status: 101,
        http_status: Some(101),
        sent: tally.bytes_sent,
        received: tally.bytes_received,
        first_byte,
        messages: Some((tally.sent, tally.received)),
        detail: None,
        round_trips: std::mem::take(&mut tally.round_trips),
    })
}

impl Tally {
    fn failed(&self, error: ExchangeError) -> Failure {
        let ending = self.closed_with.map(Ending::WsClose);
        Failure { error, sent: self.bytes_sent, messages: Some((self.sent, self.received)), ending }
    }
}

fn timeout(limit: Duration, what: &str) -> ExchangeError {
    ExchangeError {
        kind: ErrorKind::Timeout,
        message: format!("{what} did not end within the step's timeout of {limit:?}"),
        sent: true,
        answered: false,
    }
}

enum Handshake {
    Open(Box<WebSocketStream<Io>>),
    Refused(u16),
}

/// Opens a connection and upgrades it.
async fn handshake(
    vu: &mut Vu,
    w: &WsPlan,
    wt: &WorkerTransport,
    target: &crate::client::url::HttpUrl,
    tally: &mut Tally,
    connect_timeout: Duration,
) -> Result<Handshake, ExchangeError> {
    let plan = &*wt.plan;
    let tls = target.tls.then_some((&plan.tls, Alpn::Http11));
    let (mut io, times) = Box::pin(connect::open(target, connect_timeout, tls, &plan.sources)).await?;
    vu.conn.opened_one(times);
    // The request as rendered, with a fresh key before its blank line.
    let key = {
        use base64::Engine as _;
        let bytes: [u8; 16] = std::array::from_fn(|_| vu.rng.u8(..));
        base64::engine::general_purpose::STANDARD.encode(bytes)
    };
    let head_end = memchr::memmem::find(&vu.request_buf, b"\r\n\r\n").map_or(vu.request_buf.len(), |i| i + 2);
    let mut request = Vec::with_capacity(vu.request_buf.len() + 48);
    request.extend_from_slice(&vu.request_buf[..head_end]);
    request.extend_from_slice(format!("sec-websocket-key: {key}\r\n").as_bytes());
    request.extend_from_slice(&vu.request_buf[head_end..]);
    io.write_all(&request).await.map_err(|e| ExchangeError::io(e, false))?;
    tally.bytes_sent += request.len() as u64;
    let mut buf = Vec::with_capacity(1024);
    let head_len = loop {
        let mut chunk = [0u8; 2048];
        let n = io.read(&mut chunk).await.map_err(|e| ExchangeError::io(e, !buf.is_empty()))?;
        if n == 0 {
            return Err(ExchangeError {
                kind: ErrorKind::Reset,
                message: "the server closed the connection during the WebSocket handshake".into(),
                sent: true,
                answered: !buf.is_empty(),
            });
        }
        buf.extend_from_slice(&chunk[..n]);
        tally.bytes_received += n as u64;
        if let Some(i) = memchr::memmem::find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(ExchangeError::protocol(format!("the handshake answer's head is over {MAX_HEAD} bytes")));
        }
    };
    let mut parsed = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut parsed);
    if let Err(e) = response.parse(&buf[..head_len]) {
        return Err(ExchangeError::protocol(format!("the handshake answer is not HTTP: {e}")));
    }
    let status = response.code.unwrap_or(0);
    vu.headers.list.clear();
    for h in response.headers.iter() {
        vu.headers.keep(h.name, h.value);
    }
    if status != 101 {
        return Ok(Handshake::Refused(status));
    }
    let header = |name: &str| {
        response.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| String::from_utf8_lossy(h.value))
    };
    let expected = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    if header("sec-websocket-accept").as_deref() != Some(expected.as_str()) {
        return Err(ExchangeError::protocol("the handshake answer's sec-websocket-accept does not match the key"));
    }
    if !w.subprotocols.is_empty() {
        let picked = header("sec-websocket-protocol");
        if !picked.as_deref().is_some_and(|p| w.subprotocols.iter().any(|o| o == p.trim())) {
            return Err(ExchangeError::protocol(format!(
                "the server picked subprotocol {:?}, not one of those offered ({})",
                picked.unwrap_or_default(),
                w.subprotocols.join(", ")
            )));
        }
    }
    let stream = WebSocketStream::from_partially_read(io, buf[head_len..].to_vec(), Role::Client, Some(config())).await;
    Ok(Handshake::Open(Box::new(stream)))
}

/// The step's actions on an open socket. The last matching message goes into the VU's body.
async fn act(
    vu: &mut Vu,
    step: &StepPlan,
    w: &WsPlan,
    stream: &mut WebSocketStream<Io>,
    tally: &mut Tally,
) -> Result<(), ExchangeError> {
    for action in &w.actions {
        match action {
            WsActionPlan::Send { message, binary } => {
                let Vu { slots, generator, .. } = &mut *vu;
                let text = generator.lend(|| message.render(slots));
                if let Some(e) = crate::compile::template::take_render_error() {
                    return Err(ExchangeError::protocol(format!("expression {e}")));
                }
                let frame = if *binary {
                    use base64::Engine as _;
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(text.trim())
                        .map_err(|e| ExchangeError::protocol(format!("`sendBinary` is not base64: {e}")))?;
                    Message::Binary(bytes.into())
                } else {
                    Message::Text(text.into())
                };
                tally.bytes_sent += frame.len() as u64;
                stream.send(frame).await.map_err(|e| ws_error(&e))?;
                tally.sent += 1;
                tally.last_send = Some(Instant::now());
            }
            WsActionPlan::Hold(d) => {
                let until = tokio::time::Instant::now() + *d;
                loop {
                    match tokio::time::timeout_at(until, stream.next()).await {
                        Err(_) => break,
                        Ok(next) => {
                            next_message(next, tally, "holding")?;
                        }
                    }
                }
            }
            WsActionPlan::Receive { matchers, timeout, count } => {
                let until = tokio::time::Instant::now() + *timeout;
                let mut matched = 0;
                let mut other = 0u64;
                while matched < *count {
                    let next = tokio::time::timeout_at(until, stream.next()).await.map_err(|_| ExchangeError {
                        kind: ErrorKind::Timeout,
                        message: format!(
                            "{matched} of {count} matching messages within {timeout:?} ({other} others received)"
                        ),
                        sent: true,
                        answered: tally.received > 0,
                    })?;
                    let Some(data) = next_message(next, tally, "waiting for a message")? else { continue };
                    let view = ResponseView { status: 101, headers: &[], body: &data };
                    let mut json = None;
                    let slots = &vu.slots;
                    let pass =
                        vu.generator.lend(|| matchers.iter().all(|m| m.evaluate(&view, slots, &mut json).is_ok()));
                    if pass {
                        matched += 1;
                        if let Some(at) = tally.last_send {
                            tally.round_trips.push(at.elapsed().as_micros() as u64);
                        }
                        if step.needs_body {
                            vu.body = data;
                        }
                    } else {
                        other += 1;
                    }
                }
            }
        }
    }
    Ok(())
}

/// A text or binary message's bytes; `None` for control frames. A close or a failure is the
/// session's error.
fn next_message(
    next: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
    tally: &mut Tally,
    doing: &str,
) -> Result<Option<Vec<u8>>, ExchangeError> {
    let message = match next {
        None => {
            tally.closed_with = Some(1006);
            return Err(closed(None, doing));
        }
        Some(Err(e)) => return Err(ws_error(&e)),
        Some(Ok(m)) => m,
    };
    tally.bytes_received += message.len() as u64;
    match message {
        Message::Text(t) => {
            tally.received += 1;
            Ok(Some(t.as_bytes().to_vec()))
        }
        Message::Binary(b) => {
            tally.received += 1;
            Ok(Some(b.to_vec()))
        }
        Message::Close(frame) => {
            tally.closed_with = Some(frame.as_ref().map_or(1005, |f| u16::from(f.code)));
            Err(closed(frame, doing))
        }
        _ => Ok(None),
    }
}

fn closed(frame: Option<CloseFrame>, doing: &str) -> ExchangeError {
    let how = match frame {
        Some(f) if f.reason.is_empty() => format!("code {}", u16::from(f.code)),
        Some(f) => format!("code {}: {}", u16::from(f.code), f.reason),
        None => "no close frame".to_string(),
    };
    ExchangeError {
        kind: ErrorKind::Close,
        message: format!("the server closed the socket ({how}) while {doing}"),
        sent: true,
        answered: true,
    }
}

fn ws_error(e: &tokio_tungstenite::tungstenite::Error) -> ExchangeError {
    use tokio_tungstenite::tungstenite::Error as E;
    match e {
        E::Io(io) => ExchangeError::io(std::io::Error::new(io.kind(), io.to_string()), true),
        E::ConnectionClosed | E::AlreadyClosed => {
            ExchangeError { kind: ErrorKind::Close, message: format!("WebSocket: {e}"), sent: true, answered: true }
        }
        other => ExchangeError::protocol(format!("WebSocket: {other}")),
    }
}
