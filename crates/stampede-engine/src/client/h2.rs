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
        plan: &TransportPlan,
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
    /// request that fails on a connection that turns out closed, before any answer, is
    /// retried once.
    #[expect(clippy::too_many_arguments, reason = "the same inputs as the HTTP/1.1 exchange")]
    pub(crate) async fn exchange(
        &self,
        target: &HttpUrl,
        request: &[u8],
        plan: &TransportPlan,
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
                    if dead && !fresh && !e.answered && !retried {
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
    let pending = conn.sender.borrow_mut().send_request(req);
    let response = pending.await.map_err(|e| hyper_error(&e, false))?;
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

/// Maps a hyper error to an error kind, with its causes in the message. The request counts as
/// sent: hyper does not say whether it went out before the failure.
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
    ExchangeError { kind, message, sent: true, answered }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool keeps requests' HTTP/2 forms, found by place and bytes: a buffer that is
    /// reused for other bytes (a VU's rendered requests) never gets an earlier request's form.
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
