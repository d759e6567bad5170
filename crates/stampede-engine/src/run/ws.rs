//! A WebSocket session: the handshake on a connection of the VU's own (opened and timed like
//! any other), then the step's actions — sends, receives that wait for a matching message,
//! holds — and a close, unless the step keeps the socket for a later step of the iteration.
//!
//! The answer's status is the handshake's (101); a refused upgrade is that status. Its body,
//! for the step's checks and extractors, is the last matching message.
//!
//! Every end of a session closes as RFC 6455 §7 says: a server's Close is answered with its
//! code before the connection ends; the client's own close (the end of the actions, a `close`
//! action, a timeout, an error) sends a Close with its code — 1002 for a server's protocol
//! violation, 1007 for a text message that is not UTF-8, 1009 for a message over the
//! `ws.message` budget — and waits up to [`CLOSE_WAIT`] for the server to end the connection.

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
use crate::compile::budget;
use crate::compile::extract::ResponseView;
use crate::compile::plan::StepPlan;
use crate::compile::ws::{WsActionPlan, WsPlan};
use stampede_model::ErrorKind;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::error::{CapacityError, ProtocolError};

use super::answer::{Answer, Ending as StepEnding, Failure};
use super::outcome::SAMPLE_BYTES;
use super::socket::Socket;
use super::vu::Vu;

/// The most bytes of a handshake answer's head.
const MAX_HEAD: usize = 16 * 1024;

/// How long a client that closed waits for the server's side of the close (its Close frame
/// and the end of the TCP connection, which the server ends first: RFC 6455 §7.1.1) before it
/// drops the connection itself.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(3);

/// Small buffers: tungstenite's defaults (128 KiB each way, allocated per socket) would make
/// 10,000 open sockets cost 2.5 GB. Reads grow their buffer for a larger message; writes go out
/// at once. A message (and so a frame) may be as large as the `ws.message` budget.
pub(crate) fn config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0)
        .max_message_size(Some(budget::WS_MESSAGE_BYTES))
        .max_frame_size(Some(budget::WS_MESSAGE_BYTES))
}

/// Closes the sockets kept for the iteration that ended, each with the code of the step that
/// kept it.
pub(super) async fn close_kept(sockets: &mut Vec<Socket>) {
    for mut s in sockets.drain(..) {
        let ending = Ending::Close(s.close_code, String::new());
        // Boxed: this runs in every VU's iteration, whose task state must stay small.
        let _ = tokio::time::timeout(CLOSE_WAIT, Box::pin(end(&mut s.stream, ending))).await;
    }
}

/// How a session's connection ends.
#[derive(Debug, PartialEq, Eq)]
enum Ending {
    /// The client closes with this code and reason, then waits for the server's end.
    Close(u16, String),
    /// The server's Close came: the answer tungstenite queued (the server's code echoed, or
    /// 1002 for a code a server may not send) goes out, then the client waits for the end.
    Answer,
    /// The connection is gone (or unusable): nothing more goes out on it.
    Gone,
}

/// A session that failed, and how its connection ends.
struct Broken {
    error: ExchangeError,
    ending: Ending,
}

/// Ends a connection as `ending` says: the Close (sent, or the server's answered), then the
/// server's end of the connection, read and dropped (messages after a Close are not the
/// session's). The caller bounds the time.
async fn end(stream: &mut WebSocketStream<Io>, ending: Ending) -> Result<(), WsError> {
    match ending {
        Ending::Gone => return Ok(()),
        Ending::Close(code, reason) => {
            let frame = CloseFrame { code: CloseCode::from(code), reason: reason.into() };
            stream.close(Some(frame)).await?;
        }
        Ending::Answer => stream.flush().await?,
    }
    drain(stream).await;
    Ok(())
}

/// Reads until the server ends the connection (or it fails), dropping what comes: raw bytes,
/// not frames, since after a message over the budget the rest of it is still coming and no
/// frame starts where tungstenite stopped reading.
async fn drain(stream: &mut WebSocketStream<Io>) {
    let io = stream.get_mut();
    let mut sink = vec![0u8; 8192];
    while io.read(&mut sink).await.is_ok_and(|n| n > 0) {}
}

/// What a failed read or write of a session means: its error, and how the connection ends
/// (RFC 6455 §7.4.1: 1002 for a protocol violation, 1007 for text that is not UTF-8, 1009 for
/// a message too big; 1006 — never sent — when the TCP connection ended without a Close).
fn failure(e: &WsError, doing: &str) -> Broken {
    use std::io::ErrorKind as K;
    let dropped = |why: String| Broken {
        error: ExchangeError {
            kind: ErrorKind::Close,
            message: format!("the server ended the connection without a Close frame (code 1006{why}) while {doing}"),
            sent: true,
            answered: true,
        },
        ending: Ending::Gone,
    };
    let refused = |message: String, code: u16, reason: &str| Broken {
        error: ExchangeError::protocol(message),
        ending: Ending::Close(code, reason.to_string()),
    };
    match e {
        WsError::Capacity(CapacityError::MessageTooLong { size, .. }) => refused(
            budget::over("ws.message", format!("WebSocket: a message of {size} bytes while {doing}")),
            1009,
            "message too big",
        ),
        WsError::Capacity(c) => refused(format!("WebSocket: {c} while {doing}"), 1009, "message too big"),
        WsError::Utf8(_) => {
            refused(format!("WebSocket: a text message that is not UTF-8 while {doing}"), 1007, "invalid UTF-8")
        }
        WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => dropped(String::new()),
        WsError::Protocol(p) => refused(format!("WebSocket: {p} while {doing}"), 1002, "protocol error"),
        WsError::ConnectionClosed | WsError::AlreadyClosed => dropped(String::new()),
        WsError::Io(io)
            if matches!(io.kind(), K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof) =>
        {
            dropped(format!(": {io}"))
        }
        WsError::Io(io) => Broken {
            error: ExchangeError::io(std::io::Error::new(io.kind(), io.to_string()), true),
            ending: Ending::Gone,
        },
        other => Broken { error: ExchangeError::protocol(format!("WebSocket: {other}")), ending: Ending::Gone },
    }
}

/// A fresh `Sec-WebSocket-Key`: 16 bytes from the system's random source, base64 (RFC 6455
/// §4.1: "randomly selected" for each connection — never the seeded generator, which repeats).
fn handshake_key(random: &dyn ring::rand::SecureRandom) -> String {
    use base64::Engine as _;
    let mut bytes = [0u8; 16];
    // The system's source fails only where no Stampede runs (no getrandom, no /dev/urandom);
    // then the process's own fast generator still makes the key differ per connection.
    if random.fill(&mut bytes).is_err() {
        bytes = fastrand::u128(..).to_le_bytes();
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
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
    // A kept socket's step had no handshake: no status of its own is counted.
    let reused = kept.is_some();
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
        Err(_) => Err(Broken {
            error: timeout(w.timeout, "the session"),
            ending: Ending::Close(w.close_code, "timeout".into()),
        }),
        Ok(r) => r,
    };
    match result {
        Ok(None) if w.keep_open => vu.sockets.push(Socket { key, stream, close_code: w.close_code }),
        Ok(closing) => {
            let (code, reason) = closing.unwrap_or((w.close_code, String::new()));
            // The Close must go out within the step's time; the server's end is waited for
            // `CLOSE_WAIT` at most (a server that never ends the connection is not an error).
            let frame = CloseFrame { code: CloseCode::from(code), reason: reason.into() };
            match tokio::time::timeout_at(deadline.into(), stream.close(Some(frame))).await {
                Err(_) => return Err(tally.failed(timeout(w.timeout, "the close"))),
                Ok(Err(e)) => return Err(tally.failed(failure(&e, "closing").error)),
                Ok(Ok(())) => {
                    if tokio::time::timeout(CLOSE_WAIT, drain(&mut stream)).await.is_err() {
                        tracing::debug!("the server did not end the WebSocket connection within {CLOSE_WAIT:?}");
                    }
                }
            }
        }
        Err(Broken { error, ending }) => {
            if tokio::time::timeout(CLOSE_WAIT, end(&mut stream, ending)).await.is_err() {
                tracing::debug!("the server did not end the WebSocket connection within {CLOSE_WAIT:?}");
            }
            return Err(tally.failed(error));
        }
    }
    Ok(Answer {
        status: 101,
        http_status: (!reused).then_some(101),
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
        let ending = self.closed_with.map(StepEnding::WsClose);
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
    let key = handshake_key(&ring::rand::SystemRandom::new());
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
    // One header with the key's digest (two would be one list value, which is not it).
    let mut accepts = response.headers.iter().filter(|h| h.name.eq_ignore_ascii_case("sec-websocket-accept"));
    if !(accepts.next().is_some_and(|h| h.value == expected.as_bytes()) && accepts.next().is_none()) {
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
/// `Some` code and reason when a `close` action ended the session.
async fn act(
    vu: &mut Vu,
    step: &StepPlan,
    w: &WsPlan,
    stream: &mut WebSocketStream<Io>,
    tally: &mut Tally,
) -> Result<Option<(u16, String)>, Broken> {
    // An error of the client's own (a value that does not render): the step's close code.
    let ours = |error: ExchangeError| Broken { error, ending: Ending::Close(w.close_code, String::new()) };
    for action in &w.actions {
        match action {
            WsActionPlan::Send { message, binary } => {
                let Vu { slots, generator, .. } = &mut *vu;
                let text = generator.lend(|| message.render(slots));
                if let Some(e) = crate::compile::template::take_render_error() {
                    return Err(ours(ExchangeError::protocol(format!("expression {e}"))));
                }
                let frame = if *binary {
                    use base64::Engine as _;
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(text.trim())
                        .map_err(|e| ours(ExchangeError::protocol(format!("`sendBinary` is not base64: {e}"))))?;
                    Message::Binary(bytes.into())
                } else {
                    Message::Text(text.into())
                };
                tally.bytes_sent += frame.len() as u64;
                stream.send(frame).await.map_err(|e| failure(&e, "sending"))?;
                tally.sent += 1;
                tally.last_send = Some(Instant::now());
            }
            WsActionPlan::Hold(d) => {
                let until = tokio::time::Instant::now() + *d;
                while let Ok(next) = tokio::time::timeout_at(until, stream.next()).await {
                    next_message(next, tally, "holding")?;
                }
            }
            WsActionPlan::Close { code, reason } => return Ok(Some((*code, reason.clone()))),
            WsActionPlan::Receive { matchers, timeout, count } => {
                let until = tokio::time::Instant::now() + *timeout;
                let mut matched = 0;
                let mut other = 0u64;
                while matched < *count {
                    let next = tokio::time::timeout_at(until, stream.next()).await.map_err(|_| Broken {
                        error: ExchangeError {
                            kind: ErrorKind::Timeout,
                            message: format!(
                                "{matched} of {count} matching messages within {timeout:?} ({other} others received)"
                            ),
                            sent: true,
                            answered: tally.received > 0,
                        },
                        ending: Ending::Close(w.close_code, "timeout".into()),
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
    Ok(None)
}

/// A text or binary message's bytes; `None` for a ping (tungstenite answers it with a pong of
/// the same payload on the next read or write) and a pong (ignored). A close or a failure is
/// the session's error.
fn next_message(
    next: Option<Result<Message, WsError>>,
    tally: &mut Tally,
    doing: &str,
) -> Result<Option<Vec<u8>>, Broken> {
    let message = match next {
        None => {
            tally.closed_with = Some(1006);
            return Err(failure(&WsError::ConnectionClosed, doing));
        }
        Some(Err(e)) => {
            let broken = failure(&e, doing);
            if broken.error.kind == ErrorKind::Close {
                tally.closed_with = Some(1006);
            }
            return Err(broken);
        }
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
            Err(Broken { error: closed(frame, doing), ending: Ending::Answer })
        }
        _ => Ok(None),
    }
}

fn closed(frame: Option<CloseFrame>, doing: &str) -> ExchangeError {
    let how = match frame {
        Some(f) if f.reason.is_empty() => format!("code {}", u16::from(f.code)),
        Some(f) => format!("code {}: {}", u16::from(f.code), f.reason),
        None => "no code".to_string(),
    };
    ExchangeError {
        kind: ErrorKind::Close,
        message: format!("the server closed the socket ({how}) while {doing}"),
        sent: true,
        answered: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::{TcpListener, TcpStream};

    /// A client socket (the session's configuration) and the raw server side of its TCP
    /// connection, to write frames by hand and read the client's.
    async fn pair() -> (WebSocketStream<Io>, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let stream = WebSocketStream::from_raw_socket(Io::Tcp(client), Role::Client, Some(config())).await;
        (stream, server)
    }

    /// The next frame the client sent: its opcode and unmasked payload.
    async fn client_frame(server: &mut TcpStream) -> (u8, Vec<u8>) {
        let mut head = [0u8; 2];
        server.read_exact(&mut head).await.unwrap();
        assert_eq!(head[1] & 0x80, 0x80, "a client's frames are masked");
        let len = match head[1] & 0x7f {
            126 => usize::from(server.read_u16().await.unwrap()),
            127 => server.read_u64().await.unwrap() as usize,
            n => usize::from(n),
        };
        let mut mask = [0u8; 4];
        server.read_exact(&mut mask).await.unwrap();
        let mut payload = vec![0u8; len];
        server.read_exact(&mut payload).await.unwrap();
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= mask[i % 4];
        }
        (head[0], payload)
    }

    /// A Close frame's code and reason.
    fn close_payload(payload: &[u8]) -> (u16, String) {
        (u16::from_be_bytes([payload[0], payload[1]]), String::from_utf8(payload[2..].to_vec()).unwrap())
    }

    /// What the client does after the server wrote `frames`: the session's error, and the
    /// frame the client sent before the connection ended (after which the server ends it).
    async fn after(frames: &[u8]) -> (ExchangeError, (u8, Vec<u8>)) {
        let (mut stream, mut server) = pair().await;
        server.write_all(frames).await.unwrap();
        let mut tally = Tally::default();
        let broken = loop {
            match next_message(stream.next().await, &mut tally, "waiting for a message") {
                Ok(_) => continue,
                Err(b) => break b,
            }
        };
        let error = broken.error;
        let client = tokio::spawn(async move { end(&mut stream, broken.ending).await });
        let frame = client_frame(&mut server).await;
        drop(server);
        client.await.unwrap().unwrap();
        (error, frame)
    }

    #[tokio::test]
    async fn a_servers_close_is_answered_with_its_code_and_reason() {
        let mut frame = vec![0x88, 5];
        frame.extend_from_slice(&4001u16.to_be_bytes());
        frame.extend_from_slice(b"bye");
        let (error, (opcode, payload)) = after(&frame).await;
        assert_eq!(error.kind, ErrorKind::Close);
        assert_eq!(error.message, "the server closed the socket (code 4001: bye) while waiting for a message");
        assert_eq!(opcode, 0x88, "a final Close frame");
        assert_eq!(close_payload(&payload), (4001, "bye".to_string()));
    }

    #[tokio::test]
    async fn a_server_breaking_the_protocol_gets_1002_and_bad_utf8_1007() {
        // A continuation with no message to continue; RSV1 with no extension.
        for frame in [&b"\x80\x01x"[..], &b"\xc1\x01x"[..]] {
            let (error, (opcode, payload)) = after(frame).await;
            assert_eq!(error.kind, ErrorKind::Protocol, "{}", error.message);
            assert_eq!((opcode, close_payload(&payload)), (0x88, (1002, "protocol error".to_string())));
        }
        let (error, (opcode, payload)) = after(b"\x81\x02\xff\xfe").await;
        assert_eq!(error.message, "WebSocket: a text message that is not UTF-8 while waiting for a message");
        assert_eq!((opcode, close_payload(&payload)), (0x88, (1007, "invalid UTF-8".to_string())));
    }

    #[tokio::test]
    async fn a_message_over_the_budget_gets_1009_before_its_payload_is_read() {
        // The head of a binary frame one byte over the budget; its payload never comes.
        let mut head = vec![0x82, 127];
        head.extend_from_slice(&(budget::WS_MESSAGE_BYTES as u64 + 1).to_be_bytes());
        let (error, (opcode, payload)) = after(&head).await;
        assert_eq!(error.kind, ErrorKind::Protocol);
        assert_eq!(
            error.message,
            "WebSocket: a message of 67108865 bytes while waiting for a message: over the `ws.message` budget of \
             64 MiB (see `stampede docs`, Budgets)"
        );
        assert_eq!((opcode, close_payload(&payload)), (0x88, (1009, "message too big".to_string())));
    }

    #[tokio::test]
    async fn a_fragmented_message_is_whole_and_a_ping_is_answered_with_its_payload() {
        let (mut stream, mut server) = pair().await;
        // "hel" + a ping between the fragments + "lo" + "!", then an unsolicited pong and a
        // binary message in two frames.
        server.write_all(b"\x01\x03hel\x89\x04beat\x00\x02lo\x80\x01!\x8a\x01u\x02\x01\x01\x80\x01\x02").await.unwrap();
        let mut tally = Tally::default();
        let mut messages = Vec::new();
        while messages.len() < 2 {
            if let Some(m) = next_message(stream.next().await, &mut tally, "receiving").ok().unwrap() {
                messages.push(m);
            }
        }
        assert_eq!(messages, [b"hello!".to_vec(), vec![1, 2]]);
        assert_eq!(tally.received, 2, "the ping and the pong are not messages");
        assert_eq!(client_frame(&mut server).await, (0x8a, b"beat".to_vec()), "a pong with the ping's payload");
        // Nothing else: the next frame is the session's own close.
        let client = tokio::spawn(async move { end(&mut stream, Ending::Close(1000, String::new())).await });
        let (opcode, payload) = client_frame(&mut server).await;
        assert_eq!((opcode, close_payload(&payload)), (0x88, (1000, String::new())));
        drop(server);
        client.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_connection_that_ends_without_a_close_is_kind_close_1006() {
        let (mut stream, server) = pair().await;
        drop(server);
        let broken = next_message(stream.next().await, &mut Tally::default(), "holding").err().unwrap();
        assert_eq!(broken.error.kind, ErrorKind::Close);
        assert_eq!(
            broken.error.message,
            "the server ended the connection without a Close frame (code 1006) while holding"
        );
        assert_eq!(broken.ending, Ending::Gone);
        let reset = failure(&WsError::Io(std::io::ErrorKind::ConnectionReset.into()), "sending");
        assert_eq!((reset.error.kind, reset.ending), (ErrorKind::Close, Ending::Gone));
        assert!(reset.error.message.starts_with("the server ended the connection without a Close frame (code 1006: "));
    }

    #[test]
    fn every_handshake_key_is_16_fresh_bytes() {
        use base64::Engine as _;
        let random = ring::rand::SystemRandom::new();
        let keys: std::collections::BTreeSet<String> = (0..1000).map(|_| handshake_key(&random)).collect();
        assert_eq!(keys.len(), 1000);
        assert!(keys.iter().all(|k| base64::engine::general_purpose::STANDARD.decode(k).unwrap().len() == 16));
    }
}
