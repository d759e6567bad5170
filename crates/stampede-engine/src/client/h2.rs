//! HTTP/2 with hyper's client: a per-worker pool of connections per origin, each carrying
//! up to `maxStreams` requests at once, shared by the worker's VUs.
//!
//! Workers are single-threaded runtimes running a `LocalSet`, so the pool lives in `Rc`s
//! and `Cell`s, and hyper's connection tasks are spawned with `spawn_local`. A VU that
//! needs a stream takes the least busy connection; while the origin has fewer than its
//! share of connections and none is idle, it opens another; when every connection is full
//! it waits for a stream to end.
//!
//! Requests are written once as HTTP/1.1 bytes by the plan (templates, cookies and
//! redirects all work on those) and turned into an HTTP/2 request here; the answer is read
//! into the same [`ResponseInfo`] and [`Headers`] the HTTP/1.1 codec fills.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::sync::Notify;

use crate::client::connect::{self, Io};
use crate::client::exchange::{ExchangeError, Headers, ResponseInfo, classify_io};
use crate::client::settings::Transport;
#[cfg(test)]
use crate::client::settings::TransportPlan;
use crate::client::tls::Alpn;
use crate::client::url::HttpUrl;
use crate::stats::phases::ConnectTimes;
use stampede_model::ErrorKind;

const MAX_HEADERS: usize = 64;

/// Spawns hyper's connection tasks on the worker's `LocalSet`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LocalExec;

impl<F> hyper::rt::Executor<F> for LocalExec
where
    F: std::future::Future + 'static,
    F::Output: 'static,
{
    fn execute(&self, fut: F) {
        tokio::task::spawn_local(fut);
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct OriginKey {
    tls: bool,
    host: String,
    port: u16,
}

/// One open HTTP/2 connection.
struct Conn {
    sender: RefCell<SendRequest<Full<Bytes>>>,
    in_flight: Cell<u32>,
    /// The connection task ended (closed by either side, or failed).
    closed: Rc<Cell<bool>>,
}

impl Conn {
    fn usable(&self) -> bool {
        !self.closed.get() && !self.sender.borrow().is_closed()
    }
}

/// The connections of one origin.
#[derive(Default)]
struct Origin {
    conns: RefCell<Vec<Rc<Conn>>>,
    /// Connections being opened now.
    opening: Cell<usize>,
    /// `auto`: the server chose HTTP/1.1, so VUs use their own HTTP/1.1 connections.
    http1: Cell<bool>,
    /// A connection opened, closed or freed a stream.
    changed: Notify,
}

/// Holds a stream of a connection until the exchange ends.
struct StreamSlot {
    conn: Rc<Conn>,
    origin: Rc<Origin>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.conn.in_flight.set(self.conn.in_flight.get().saturating_sub(1));
        self.origin.changed.notify_waiters();
    }
}

enum Slot {
    Stream(StreamSlot),
    Open,
    Http1,
}

/// What an HTTP/2 exchange came to.
pub(crate) enum Outcome {
    /// The answer.
    Answer(ResponseInfo),
    /// `auto`: the server chose HTTP/1.1 on the connection just opened, which the VU now
    /// takes as its own.
    Http1(Io),
}

/// A worker's HTTP/2 connections, by origin.
pub(crate) struct Pool {
    per_origin: usize,
    max_streams: u32,
    /// Few (one per host a scenario names): looked up by a scan, without building a key.
    origins: RefCell<Vec<(OriginKey, Rc<Origin>)>>,
    /// Requests already turned into their HTTP/2 form (see [`Pool::request`]).
    requests: RefCell<Vec<CachedRequest>>,
}

/// A request's HTTP/2 form, kept for the next time the same bytes go to the same origin.
struct CachedRequest {
    /// Where the bytes were (a fixed request's bytes stay put; a VU's buffer is reused for its
    /// rendered requests, so the bytes are compared too).
    at: usize,
    bytes: Vec<u8>,
    tls: bool,
    authority: String,
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: Bytes,
}

/// Most requests kept in their HTTP/2 form per worker.
const CACHED_REQUESTS: usize = 32;

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("per_origin", &self.per_origin)
            .field("max_streams", &self.max_streams)
            .field("origins", &self.origins.borrow().len())
            .finish()
    }
}

impl Pool {
    /// A pool of up to `per_origin` connections per origin, `max_streams` streams each.
    pub(crate) fn new(per_origin: usize, max_streams: u32) -> Pool {
        Pool {
            per_origin: per_origin.max(1),
            max_streams: max_streams.max(1),
            origins: RefCell::default(),
            requests: RefCell::default(),
        }
    }

    fn find_origin(&self, target: &HttpUrl) -> Option<Rc<Origin>> {
        let origins = self.origins.borrow();
        origins
            .iter()
            .find(|(k, _)| k.tls == target.tls && k.port == target.port && k.host == target.host)
            .map(|(_, o)| o.clone())
    }

    fn origin(&self, target: &HttpUrl) -> Rc<Origin> {
        if let Some(o) = self.find_origin(target) {
            return o;
        }
        let key = OriginKey { tls: target.tls, host: target.host.clone(), port: target.port };
        let origin = Rc::new(Origin::default());
        self.origins.borrow_mut().push((key, origin.clone()));
        origin
    }

    /// `auto`: whether the origin's server chose HTTP/1.1.
    pub(crate) fn is_http1(&self, target: &HttpUrl) -> bool {
        self.find_origin(target).is_some_and(|o| o.http1.get())
    }

    /// The HTTP/2 form of `bytes` (an HTTP/1.1 request) to `target`. Parsing the head,
    /// validating each header and the URI again for every request cost a tenth of the CPU per
    /// request: the forms of recent requests are kept, found by where the bytes are and what
    /// they are.
    fn request(&self, bytes: &[u8], target: &HttpUrl) -> Result<http::Request<Full<Bytes>>, String> {
        let at = bytes.as_ptr() as usize;
        let mut cache = self.requests.borrow_mut();
        let hit = cache
            .iter()
            .position(|c| c.at == at && c.tls == target.tls && c.bytes == bytes && c.authority == target.authority);
        let i = match hit {
            Some(i) => i,
            None => {
                let req = to_http2_request(bytes, target)?;
                let (parts, body) = req.into_parts();
                let entry = CachedRequest {
                    at,
                    bytes: bytes.to_vec(),
                    tls: target.tls,
                    authority: target.authority.clone(),
                    method: parts.method,
                    uri: parts.uri,
                    headers: parts.headers,
                    body: body_bytes(body),
                };
                // The same place with other bytes (a VU's rendered request): replace it.
                match cache.iter().position(|c| c.at == at) {
                    Some(j) => cache[j] = entry,
                    None if cache.len() < CACHED_REQUESTS => cache.push(entry),
                    None => {
                        cache.remove(0);
                        cache.push(entry);
                    }
                }
                cache.iter().position(|c| c.at == at).expect("just stored")
            }
        };
        let c = &cache[i];
        let mut req = http::Request::new(Full::new(c.body.clone()));
        *req.method_mut() = c.method.clone();
        *req.uri_mut() = c.uri.clone();
        *req.version_mut() = http::Version::HTTP_2;
        *req.headers_mut() = c.headers.clone();
        Ok(req)
    }

    async fn acquire(&self, origin: &Rc<Origin>) -> Slot {
        loop {
            // Registered before looking, so that no change between the look and the wait is missed.
            let changed = origin.changed.notified();
            if origin.http1.get() {
                return Slot::Http1;
            }
            let best = {
                let mut conns = origin.conns.borrow_mut();
                conns.retain(|c| c.usable());
                conns.iter().filter(|c| c.in_flight.get() < self.max_streams).min_by_key(|c| c.in_flight.get()).cloned()
            };
            let room = origin.conns.borrow().len() + origin.opening.get() < self.per_origin;
            match best {
                Some(conn) if conn.in_flight.get() == 0 || !room => {
                    conn.in_flight.set(conn.in_flight.get() + 1);
                    return Slot::Stream(StreamSlot { conn, origin: origin.clone() });
                }
                _ if room => {
                    origin.opening.set(origin.opening.get() + 1);
                    return Slot::Open;
                }
                _ => changed.await,
            }
        }
    }

    /// Opens a connection for `origin` and adds it to the pool, or, under `auto` when the
    /// server chose HTTP/1.1, hands the connection back.
    async fn open(
        &self,
        origin: &Rc<Origin>,
        target: &HttpUrl,
        plan: &Transport,
        alpn: Alpn,
        limit: Duration,
        opened: &mut Vec<ConnectTimes>,
    ) -> Result<Result<StreamSlot, Io>, ExchangeError> {
        /// Leaves the opening count right however the opening ends (even when abandoned).
        struct Opening<'a>(&'a Origin);
        impl Drop for Opening<'_> {
            fn drop(&mut self) {
                self.0.opening.set(self.0.opening.get().saturating_sub(1));
                self.0.changed.notify_waiters();
            }
        }
        let _opening = Opening(origin);
        let tls_alpn = target.tls.then_some((&plan.tls, alpn));
        let (io, times) = connect::open(target, limit, tls_alpn, &plan.sources).await?;
        opened.push(times);
        match io.alpn() {
            Some(b"h2") => {}
            // Cleartext: prior knowledge. TLS without ALPN: try HTTP/2 all the same.
            None => {}
            Some(_) if alpn == Alpn::Both => {
                origin.http1.set(true);
                return Ok(Err(io));
            }
            Some(other) => {
                return Err(ExchangeError {
                    kind: ErrorKind::Protocol,
                    message: format!(
                        "the server chose `{}` in the TLS handshake; `http.version: 2` needs h2",
                        String::from_utf8_lossy(other)
                    ),
                    sent: false,
                    answered: false,
                });
            }
        }
        let handshake = http2::Builder::new(LocalExec).handshake::<_, Full<Bytes>>(TokioIo::new(io));
        let (sender, connection) = tokio::time::timeout(limit, handshake)
            .await
            .map_err(|_| ExchangeError {
                kind: ErrorKind::Timeout,
                message: format!("HTTP/2 handshake with {}:{} timed out", target.host, target.port),
                sent: false,
                answered: false,
            })?
            .map_err(|e| ExchangeError { sent: false, ..hyper_error(&e, false) })?;
        let closed = Rc::new(Cell::new(false));
        let watch = (closed.clone(), Rc::downgrade(origin));
        tokio::task::spawn_local(async move {
            let _ = connection.await;
            watch.0.set(true);
            if let Some(origin) = watch.1.upgrade() {
                origin.changed.notify_waiters();
            }
        });
        let conn = Rc::new(Conn { sender: RefCell::new(sender), in_flight: Cell::new(1), closed });
        origin.conns.borrow_mut().push(conn.clone());
        Ok(Ok(StreamSlot { conn, origin: origin.clone() }))
    }

    /// Sends `request` (HTTP/1.1 bytes) to `target` over HTTP/2 and reads the answer. A
    /// request the server provably did not process (see [`hyper_error`]) is sent once more;
    /// any other failure is the request's error, since the server may have acted on it.
    #[expect(clippy::too_many_arguments, reason = "the same inputs as the HTTP/1.1 exchange")]
    pub(crate) async fn exchange(
        &self,
        target: &HttpUrl,
        request: &[u8],
        plan: &Transport,
        alpn: Alpn,
        limit: Duration,
        mut body: Option<&mut Vec<u8>>,
        headers: &mut Headers,
        opened: &mut Vec<ConnectTimes>,
    ) -> Result<Outcome, ExchangeError> {
        let origin = self.origin(target);
        let mut retried = false;
        loop {
            let (slot, fresh) = match self.acquire(&origin).await {
                Slot::Stream(s) => (s, false),
                Slot::Http1 => {
                    // Another VU found the server speaks HTTP/1.1: go the HTTP/1.1 way.
                    let (io, times) =
                        connect::open(target, limit, Some((&plan.tls, Alpn::Http11)), &plan.sources).await?;
                    opened.push(times);
                    return Ok(Outcome::Http1(io));
                }
                Slot::Open => match self.open(&origin, target, plan, alpn, limit, opened).await? {
                    Ok(s) => (s, true),
                    Err(io) => return Ok(Outcome::Http1(io)),
                },
            };
            let req = self.request(request, target).map_err(|message| ExchangeError {
                kind: ErrorKind::Protocol,
                message,
                sent: false,
                answered: false,
            })?;
            if let Some(b) = body.as_deref_mut() {
                b.clear();
            }
            match send(&slot.conn, req, body.as_deref_mut(), headers).await {
                Ok(info) => return Ok(Outcome::Answer(info)),
                Err(mut e) => {
                    let dead = !slot.conn.usable();
                    if dead {
                        slot.conn.closed.set(true);
                    }
                    // Under TLS 1.3 a server refuses a client certificate after the handshake,
                    // with an alert that hyper, writing its preface, may meet as a broken pipe;
                    // when read, the alert reaches us through h2 as a bare I/O error.
                    if fresh && target.tls && !e.answered && matches!(e.kind, ErrorKind::Reset | ErrorKind::Io) {
                        e.kind = ErrorKind::Tls;
                        e.message = format!(
                            "TLS: the server closed the new connection before any answer (did it refuse the \
                             client certificate?): {}",
                            e.message
                        );
                    }
                    if !e.sent && !e.answered && !retried {
                        retried = true;
                        continue;
                    }
                    return Err(e);
                }
            }
        }
    }
}

/// One request and its whole answer on `conn`.
async fn send(
    conn: &Conn,
    req: http::Request<Full<Bytes>>,
    mut body: Option<&mut Vec<u8>>,
    headers: &mut Headers,
) -> Result<ResponseInfo, ExchangeError> {
    let pending = conn.sender.borrow_mut().try_send_request(req);
    let response = pending.await.map_err(|mut e| {
        // The request came back: the connection closed before hyper handed it to HTTP/2.
        let dispatched = e.take_message().is_none();
        if server_refused(e.error()) == Some(Refusal::Connection) {
            // The connection takes no new stream: the next goes on another.
            conn.closed.set(true);
        }
        let e = hyper_error(e.error(), false);
        ExchangeError { sent: e.sent && dispatched, ..e }
    })?;
    let first_byte = Instant::now();
    headers.list.clear();
    let status = response.status().as_u16();
    // Counted as the HTTP/1.1 text of the head would be: HPACK and framing are not.
    let mut received = 12u64 + 2;
    for (name, value) in response.headers() {
        received += (name.as_str().len() + value.len() + 4) as u64;
        headers.keep(name.as_str(), value.as_bytes());
    }
    let mut stream = response.into_body();
    let mut body_len = 0u64;
    while let Some(frame) = stream.frame().await {
        let frame = frame.map_err(|e| hyper_error(&e, true))?;
        match frame.into_data() {
            Ok(data) => {
                body_len += data.len() as u64;
                if let Some(b) = body.as_deref_mut() {
                    b.extend_from_slice(&data);
                }
            }
            // Trailers (gRPC's status) join the headers.
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    for (name, value) in &trailers {
                        received += (name.as_str().len() + value.len() + 4) as u64;
                        headers.keep(name.as_str(), value.as_bytes());
                    }
                }
            }
        }
    }
    received += body_len;
    Ok(ResponseInfo { status, bytes_received: received, body_len, keep_alive: true, first_byte: Some(first_byte) })
}

/// The HTTP/2 form of an HTTP/1.1 request written by the plan: the `host` header becomes
/// the authority and connection-specific headers are dropped.
pub(crate) fn to_http2_request(bytes: &[u8], target: &HttpUrl) -> Result<http::Request<Full<Bytes>>, String> {
    let mut parsed = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut parsed);
    let head_len = match req.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err("the request head is incomplete".into()),
        Err(e) => return Err(format!("the request cannot be sent over HTTP/2: {e}")),
    };
    let method = http::Method::from_bytes(req.method.unwrap_or("GET").as_bytes()).map_err(|e| e.to_string())?;
    let mut authority: &[u8] = target.authority.as_bytes();
    let mut builder = http::Request::builder().method(method).version(http::Version::HTTP_2);
    for h in req.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("host") {
            authority = h.value;
            continue;
        }
        let hop_by_hop = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n));
        if hop_by_hop || (name.eq_ignore_ascii_case("te") && !h.value.eq_ignore_ascii_case(b"trailers")) {
            continue;
        }
        builder = builder.header(name, h.value);
    }
    let uri = format!(
        "{}://{}{}",
        if target.tls { "https" } else { "http" },
        String::from_utf8_lossy(authority),
        req.path.unwrap_or("/")
    );
    builder
        .uri(uri)
        .body(Full::new(Bytes::copy_from_slice(&bytes[head_len..])))
        .map_err(|e| format!("the request cannot be sent over HTTP/2: {e}"))
}

/// The bytes of a body made by [`to_http2_request`] (one frame, or none).
fn body_bytes(body: Full<Bytes>) -> Bytes {
    use hyper::body::Body as _;
    let mut body = std::pin::pin!(body);
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match body.as_mut().poll_frame(&mut cx) {
        std::task::Poll::Ready(Some(Ok(frame))) => frame.into_data().unwrap_or_default(),
        _ => Bytes::new(),
    }
}

/// How the server said it did not process a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    /// `RST_STREAM` with `REFUSED_STREAM`: the connection goes on.
    Stream,
    /// A GOAWAY whose last stream is below this one: the connection takes no new stream.
    Connection,
}

/// Whether `e` says the server did not process the stream, and how. h2 fails a stream with
/// the server's GOAWAY only when the GOAWAY's last stream is below it (or the stream was to be
/// opened after it); the streams it names go on, and fail, if they do, with the connection's
/// end. A reset of another kind, or a closed connection, may come after the server acted on
/// the request. (One case slips through: a stream hyper held back for the server's limit of
/// concurrent streams, that went out just before a GOAWAY naming it, fails with that GOAWAY.)
fn server_refused(e: &hyper::Error) -> Option<Refusal> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h2) = s.downcast_ref::<h2::Error>()
            && h2.is_remote()
        {
            if h2.is_go_away() {
                return Some(Refusal::Connection);
            }
            if h2.is_reset() && h2.reason() == Some(h2::Reason::REFUSED_STREAM) {
                return Some(Refusal::Stream);
            }
        }
        source = s.source();
    }
    None
}

/// Maps a hyper error to an error kind, with its causes in the message. The request counts as
/// sent unless the server said it did not process it (see [`server_refused`]).
fn hyper_error(e: &hyper::Error, answered: bool) -> ExchangeError {
    let mut message = format!("HTTP/2: {e}");
    let mut kind = None;
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        if kind.is_none()
            && let Some(io) = s.downcast_ref::<std::io::Error>()
        {
            kind = Some(classify_io(io));
        }
        source = s.source();
    }
    let kind = kind.unwrap_or(if e.is_timeout() {
        ErrorKind::Timeout
    } else if e.is_canceled() || e.is_closed() || e.is_incomplete_message() {
        ErrorKind::Reset
    } else {
        ErrorKind::Protocol
    });
    ExchangeError { kind, message, sent: server_refused(e).is_none(), answered }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::client::transport::{self, VuConn, WorkerTransport};
    use stampede_model::scenario::HttpVersion;

    /// What the test server does with the second stream of its first connection.
    #[derive(Clone, Copy)]
    enum Second {
        /// Resets it with `REFUSED_STREAM`.
        Refuse,
        /// Sends a GOAWAY whose last stream is the first one.
        GoAwayBefore,
        /// Closes the connection without an answer, the request read.
        Close,
    }

    /// A cleartext HTTP/2 server written frame by frame, so that it can refuse a stream or send
    /// a GOAWAY at a chosen moment: it answers every request `200` with no body, except the
    /// second stream of the first connection, which gets `second`. Counts the connections and
    /// the request heads (HEADERS frames) it read.
    async fn h2_server(second: Second) -> (HttpUrl, Arc<AtomicU32>, Arc<AtomicU32>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicU32::new(0));
        let requests = Arc::new(AtomicU32::new(0));
        let (conns, reqs) = (connections.clone(), requests.clone());
        tokio::spawn(async move {
            loop {
                let (s, _) = listener.accept().await.unwrap();
                let first = conns.fetch_add(1, Ordering::Relaxed) == 0;
                tokio::spawn(serve_h2(s, first.then_some(second), reqs.clone()));
            }
        });
        (HttpUrl::parse(&format!("http://127.0.0.1:{port}/")).unwrap(), connections, requests)
    }

    async fn serve_h2(mut s: TcpStream, second: Option<Second>, requests: Arc<AtomicU32>) {
        let frame = |kind: u8, flags: u8, stream: u32, payload: &[u8]| {
            let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
            f.extend_from_slice(&[kind, flags]);
            f.extend_from_slice(&stream.to_be_bytes());
            f.extend_from_slice(payload);
            f
        };
        let mut preface = [0u8; 24];
        if s.read_exact(&mut preface).await.is_err() {
            return;
        }
        s.write_all(&frame(4, 0, 0, &[])).await.unwrap(); // SETTINGS
        let mut streams = Vec::new();
        loop {
            let mut head = [0u8; 9];
            if s.read_exact(&mut head).await.is_err() {
                return;
            }
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let mut payload = vec![0u8; len];
            if s.read_exact(&mut payload).await.is_err() {
                return;
            }
            let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
            match head[3] {
                4 if head[4] & 1 == 0 => s.write_all(&frame(4, 1, 0, &[])).await.unwrap(), // SETTINGS ack
                1 => {
                    requests.fetch_add(1, Ordering::Relaxed);
                    streams.push(stream);
                    let answer = frame(1, 0x4 | 0x1, stream, &[0x88]); // `:status: 200`, end of stream
                    match (streams.len(), second) {
                        (2, Some(Second::Refuse)) => {
                            s.write_all(&frame(3, 0, stream, &7u32.to_be_bytes())).await.unwrap();
                        }
                        (2, Some(Second::GoAwayBefore)) => {
                            let mut goaway = streams[0].to_be_bytes().to_vec();
                            goaway.extend_from_slice(&0u32.to_be_bytes()); // NO_ERROR
                            s.write_all(&frame(7, 0, 0, &goaway)).await.unwrap();
                        }
                        (2, Some(Second::Close)) => return,
                        _ => s.write_all(&answer).await.unwrap(),
                    }
                }
                _ => {}
            }
        }
    }

    /// An exchange's outcome as the tests compare it: the status, or the error's kind and
    /// whether the request counts as sent.
    type Got = Result<u16, (ErrorKind, bool)>;

    /// Two GETs over HTTP/2 (prior knowledge) on a worker's transport, to a server that treats
    /// the second as `second` says: their outcomes (status, or error kind and whether sent),
    /// the connections the server accepted and the requests it read.
    fn two_requests(second: Second) -> (Vec<Got>, u32, u32) {
        let plan = Transport::new(Arc::new(TransportPlan {
            version: HttpVersion::Http2,
            max_streams: 10,
            ..TransportPlan::default()
        }));
        let wt = WorkerTransport::new(Arc::new(plan), 0, 1);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        tokio::task::LocalSet::new().block_on(&rt, async {
            let (target, connections, requests) = h2_server(second).await;
            let mut vc = VuConn::default();
            let mut headers = Headers::default();
            let mut out = Vec::new();
            for _ in 0..2 {
                let bytes = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";
                let exchange = transport::exchange(
                    &mut vc,
                    &wt,
                    &target,
                    bytes,
                    false,
                    None,
                    &mut headers,
                    Duration::from_secs(5),
                );
                let r = tokio::time::timeout(Duration::from_secs(20), exchange).await.expect("the exchange ended");
                out.push(r.map(|i| i.status).map_err(|e| (e.kind, e.sent)));
            }
            (out, connections.load(Ordering::Relaxed), requests.load(Ordering::Relaxed))
        })
    }

    #[test]
    fn a_stream_the_server_refused_is_sent_again_on_the_same_connection() {
        assert_eq!(two_requests(Second::Refuse), (vec![Ok(200), Ok(200)], 1, 3));
    }

    #[test]
    fn a_stream_above_the_servers_goaway_is_sent_again_on_a_new_connection() {
        assert_eq!(two_requests(Second::GoAwayBefore), (vec![Ok(200), Ok(200)], 2, 3));
    }

    #[test]
    fn a_stream_the_server_read_before_closing_is_an_error_and_not_sent_again() {
        let (outcomes, connections, requests) = two_requests(Second::Close);
        assert_eq!(outcomes[0], Ok(200));
        assert!(matches!(outcomes[1], Err((_, true))), "{outcomes:?}");
        assert_eq!((connections, requests), (1, 2), "the request was not sent again");
    }

    #[test]
    fn kept_http2_forms_follow_the_bytes_not_just_their_place() {
        let pool = Pool::new(1, 1);
        let target = HttpUrl::parse("http://127.0.0.1:8080/").unwrap();
        let fixed = b"GET /fixed HTTP/1.1\r\nhost: 127.0.0.1:8080\r\nx-a: 1\r\n\r\n".to_vec();
        for _ in 0..3 {
            let req = pool.request(&fixed, &target).unwrap();
            assert_eq!(req.uri().to_string(), "http://127.0.0.1:8080/fixed");
            assert_eq!(req.headers().get("x-a").unwrap(), "1");
        }
        let mut buf = Vec::with_capacity(256);
        for (i, path) in ["/one", "/two", "/three"].iter().enumerate() {
            buf.clear();
            buf.extend_from_slice(
                format!("POST {path} HTTP/1.1\r\nhost: h.test\r\ncontent-length: 1\r\n\r\n{i}").as_bytes(),
            );
            let req = pool.request(&buf, &target).unwrap();
            assert_eq!(req.uri().to_string(), format!("http://h.test{path}"));
            assert_eq!(req.method(), http::Method::POST);
            assert_eq!(body_bytes(req.into_body()), Bytes::from(i.to_string()));
        }
        // One form for the fixed request, one for the reused buffer.
        assert_eq!(pool.requests.borrow().len(), 2);
        let https = HttpUrl::parse("https://127.0.0.1:8080/").unwrap();
        assert_eq!(pool.request(&fixed, &https).unwrap().uri().to_string(), "https://127.0.0.1:8080/fixed");
    }

    #[test]
    fn requests_become_http2_requests_without_connection_headers() {
        let target = HttpUrl::parse("https://example.test:8443/a?b=1").unwrap();
        let bytes = b"POST /a?b=1 HTTP/1.1\r\nhost: example.test:8443\r\nconnection: keep-alive\r\nX-Thing: 1\r\nte: gzip\r\ncontent-length: 3\r\n\r\nabc";
        let req = to_http2_request(bytes, &target).unwrap();
        assert_eq!(req.method(), http::Method::POST);
        assert_eq!(req.uri().to_string(), "https://example.test:8443/a?b=1");
        assert_eq!(req.version(), http::Version::HTTP_2);
        assert!(req.headers().get("connection").is_none());
        assert!(req.headers().get("te").is_none());
        assert!(req.headers().get("host").is_none());
        assert_eq!(req.headers().get("x-thing").unwrap(), "1");
        assert_eq!(req.headers().get("content-length").unwrap(), "3");
        assert_eq!(hyper::body::Body::size_hint(req.body()).exact(), Some(3));
    }
}
