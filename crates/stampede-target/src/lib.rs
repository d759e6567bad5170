//! The built-in target: a small, fast hyper server to test against without setting one up.
//!
//! `/` serves a static page like nginx's test page; `/get`, `/post`, `/put`, `/patch`,
//! `/delete` and `/anything` echo the request as JSON in httpbin's shape (args, headers,
//! form, files, data, json); `/status/{code}`, `/delay/{ms}` and `/bytes/{n}` do what they
//! say; `/cookies` echoes cookies, `/cookies/set?name=value` sets them and redirects there;
//! `/redirect/{n}` redirects n times to `/get`; `/redirect-to?url=…&status_code=…` redirects
//! once; `/response-headers?name=value` answers with those headers; `/stats` counts requests
//! served. `/shop/…` is a small shop (log in, products, cart, checkout; see [`shop`]) for
//! trying user flows, `/shop/app` a page that calls it as a person clicks. `/openapi.yaml`
//! describes these routes (OpenAPI 3.1, with this server's address).
//!
//! By default it speaks plain HTTP/1.1. [`TargetOptions`] add TLS (with the caller's
//! certificate) and HTTP/2 (via ALPN over TLS, by prior knowledge over cleartext), for
//! testing the client's TLS and HTTP/2 paths on loopback.
//!
//! A service time and a concurrency limit give it a known capacity (to try a capacity search
//! against): every request but `/stats` holds one of `concurrency` permits for `service_time`,
//! so it completes at most `concurrency / service_time` requests per second; the rest wait in
//! a FIFO queue (their latency grows), or with a `queue_limit` get 503 at once when that many
//! already wait (errors grow instead).

#![warn(missing_docs)]

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

pub mod grpc;
mod grpc_call;
pub mod reflection;
pub mod shop;
pub mod ws;

use grpc::TargetBody;

/// The page served at `/`.
/// A page that calls the shop's API (log in, products, cart, checkout) as a person clicks: what a
/// browser recording (HAR) records. Served at `/shop/app`.
const SHOP_APP: &str = include_str!("shop.html");

/// This server's OpenAPI description, served at `/openapi.yaml` (`__SERVER__`: its address).
const OPENAPI: &str = include_str!("openapi.yaml");

/// The static page served at `/` and `/index.html`.
pub const INDEX_HTML: &str = "<html>\n<body>\n<p><em>Hello,World!</em></p>\n</body>\n</html>\n";
const MAX_DELAY_MS: u64 = 60_000;
const MAX_SERVICE_TIME: Duration = Duration::from_secs(365 * 24 * 3600);
const MAX_BYTES: usize = 64 * 1024 * 1024;
const MAX_BODY: usize = 64 * 1024 * 1024;

/// Counters shared by the server's threads.
#[derive(Debug, Default)]
pub struct TargetStats {
    requests: AtomicU64,
    http2_requests: AtomicU64,
    connections: AtomicU64,
    tls_sessions: AtomicU64,
    in_service: AtomicU64,
    max_in_service: AtomicU64,
    waiting: AtomicU64,
    queue_full_rejections: AtomicU64,
    shop: shop::Shop,
    grpc: grpc::GrpcStats,
    ws: ws::WsStats,
}

impl TargetStats {
    /// The gRPC service's counters.
    pub fn grpc(&self) -> &grpc::GrpcStats {
        &self.grpc
    }

    /// The WebSocket endpoints' counters.
    pub fn ws(&self) -> &ws::WsStats {
        &self.ws
    }

    /// The shop's state and counters.
    pub fn shop(&self) -> &shop::Shop {
        &self.shop
    }

    /// Requests served so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Requests that came over HTTP/2.
    pub fn http2_requests(&self) -> u64 {
        self.http2_requests.load(Ordering::Relaxed)
    }

    /// TCP connections accepted.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// TLS handshakes that succeeded.
    pub fn tls_sessions(&self) -> u64 {
        self.tls_sessions.load(Ordering::Relaxed)
    }

    /// Requests in their service time now (holding a permit when there is a concurrency limit).
    pub fn in_service(&self) -> u64 {
        self.in_service.load(Ordering::Relaxed)
    }

    /// The most requests that were ever in their service time at once (at most the
    /// concurrency limit).
    pub fn max_in_service(&self) -> u64 {
        self.max_in_service.load(Ordering::Relaxed)
    }

    /// Requests waiting now for a permit to start their service time.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Requests answered 503 at once because `queue_limit` requests already waited.
    pub fn queue_full_rejections(&self) -> u64 {
        self.queue_full_rejections.load(Ordering::Relaxed)
    }
}

/// How the built-in target serves.
#[derive(Clone, Debug, Default)]
pub struct TargetOptions {
    /// Serve TLS with this configuration; its ALPN list decides what clients may pick.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Speak HTTP/2 too: after ALPN `h2` over TLS, by prior knowledge over cleartext.
    pub http2: bool,
    /// Every request but `/stats` waits this long (an async sleep, at most a year) before its
    /// route answers; with `concurrency`, while holding a permit. Alone it is a pure delay.
    pub service_time: Option<Duration>,
    /// At most this many requests in their service time at once (at least 1; needs a
    /// `service_time` above zero): capacity = concurrency / service time requests per second.
    /// The rest wait for a permit in arrival order.
    pub concurrency: Option<usize>,
    /// With `concurrency`: a request that finds this many already waiting gets 503 at once.
    /// Without it the queue is unbounded.
    pub queue_limit: Option<usize>,
}

/// Why [`TargetOptions`] cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetOptionsError {
    /// `concurrency` is 0.
    #[error("concurrency must be at least 1 (it is how many requests are in service at once)")]
    ZeroConcurrency,
    /// `concurrency` without a `service_time` above zero.
    #[error("a concurrency limit needs a service time above zero (capacity = concurrency / service time)")]
    ConcurrencyWithoutServiceTime,
    /// `queue_limit` without `concurrency`.
    #[error("a queue limit needs a concurrency limit (without one no request waits)")]
    QueueLimitWithoutConcurrency,
}

impl TargetOptions {
    /// Checks the capacity options: `concurrency` at least 1 and only with a `service_time`
    /// above zero, `queue_limit` only with `concurrency`.
    pub fn check(&self) -> Result<(), TargetOptionsError> {
        match (self.concurrency, self.service_time) {
            (Some(0), _) => return Err(TargetOptionsError::ZeroConcurrency),
            (Some(_), None) => return Err(TargetOptionsError::ConcurrencyWithoutServiceTime),
            (Some(_), Some(t)) if t.is_zero() => return Err(TargetOptionsError::ConcurrencyWithoutServiceTime),
            _ => {}
        }
        if self.queue_limit.is_some() && self.concurrency.is_none() {
            return Err(TargetOptionsError::QueueLimitWithoutConcurrency);
        }
        Ok(())
    }

    /// The most requests per second the target completes: concurrency / service time, or
    /// `None` when unlimited.
    pub fn capacity(&self) -> Option<f64> {
        match (self.concurrency, self.service_time) {
            (Some(n), Some(t)) if n > 0 && !t.is_zero() => Some(n as f64 * 1e9 / t.as_nanos() as f64),
            _ => None,
        }
    }
}

/// The service time and permits shared by all of a server's threads.
#[derive(Debug)]
struct Capacity {
    service_time: Option<Duration>,
    permits: Option<Semaphore>,
    /// When the permits' last service times were due to end. A request's service time starts
    /// when it asked for a permit or when the permit it takes was due back, whichever is later,
    /// so the timer waking late does not push the capacity below concurrency / service time.
    due_back: Mutex<DueBack>,
    queue_limit: Option<u64>,
}

impl Capacity {
    fn new(options: &TargetOptions) -> Capacity {
        Capacity {
            // Capped so that adding it to an instant cannot overflow.
            service_time: options.service_time.filter(|t| !t.is_zero()).map(|t| t.min(MAX_SERVICE_TIME)),
            permits: options.concurrency.map(Semaphore::new),
            due_back: Mutex::new(DueBack { unused: options.concurrency.unwrap_or(0), ends: BinaryHeap::new() }),
            queue_limit: options.queue_limit.map(|l| l as u64),
        }
    }

    /// Spends the service time, holding a permit while it does (waiting for one first, in
    /// arrival order). `false`: refused, the queue was full.
    async fn serve(&self, stats: &TargetStats) -> bool {
        let Some(service_time) = self.service_time else { return true };
        let asked = Instant::now();
        let permit = match &self.permits {
            None => None,
            Some(permits) => Some(match permits.try_acquire() {
                Ok(permit) => permit,
                Err(_) => {
                    // Counted as waiting until it gets a permit or its connection drops.
                    let waiting = Gauge::up(&stats.waiting);
                    if self.queue_limit.is_some_and(|limit| waiting.before >= limit) {
                        stats.queue_full_rejections.fetch_add(1, Ordering::Relaxed);
                        return false;
                    }
                    match permits.acquire().await {
                        Ok(permit) => permit,
                        Err(_) => return true,
                    }
                }
            }),
        };
        let in_service = Gauge::up(&stats.in_service);
        stats.max_in_service.fetch_max(in_service.before + 1, Ordering::Relaxed);
        // With a permit, its end is due back before the permit is released (also when the
        // request is cancelled): dropped in this order.
        let held = permit.map(|permit| (ServiceTime::take(&self.due_back, asked, service_time), permit));
        let end = held.as_ref().map_or(asked + service_time, |(time, _)| time.end);
        tokio::time::sleep_until(tokio::time::Instant::from_std(end)).await;
        drop(in_service);
        drop(held);
        true
    }
}

/// The permits' service times: how many were never used, and when the others were due back.
#[derive(Debug)]
struct DueBack {
    unused: usize,
    ends: BinaryHeap<Reverse<Instant>>,
}

/// A permit's service time: puts its end back into `due_back` when dropped.
struct ServiceTime<'a> {
    due_back: &'a Mutex<DueBack>,
    end: Instant,
}

impl<'a> ServiceTime<'a> {
    /// Starts when `asked` or when the earliest permit was due back, whichever is later (a
    /// permit never used is free since ever). The caller holds a permit, so one is due back.
    fn take(due_back: &'a Mutex<DueBack>, asked: Instant, service_time: Duration) -> ServiceTime<'a> {
        let mut state = due_back.lock().unwrap_or_else(|e| e.into_inner());
        let start = if state.unused > 0 {
            state.unused -= 1;
            asked
        } else {
            state.ends.pop().map_or(asked, |Reverse(end)| end.max(asked))
        };
        ServiceTime { due_back, end: start + service_time }
    }
}

impl Drop for ServiceTime<'_> {
    fn drop(&mut self) {
        self.due_back.lock().unwrap_or_else(|e| e.into_inner()).ends.push(Reverse(self.end));
    }
}

/// One added to a gauge, taken off again when dropped (also when the request is cancelled).
struct Gauge<'a> {
    gauge: &'a AtomicU64,
    /// The gauge's value before this one was added.
    before: u64,
}

impl<'a> Gauge<'a> {
    fn up(gauge: &'a AtomicU64) -> Gauge<'a> {
        Gauge { gauge, before: gauge.fetch_add(1, Ordering::AcqRel) }
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.gauge.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A running built-in target.
#[derive(Debug)]
pub struct TargetServer {
    addr: SocketAddr,
    tls: bool,
    stats: Arc<TargetStats>,
    shutdown: watch::Sender<bool>,
    threads: Vec<std::thread::JoinHandle<Duration>>,
}

impl TargetServer {
    /// Binds `addr` (port 0 picks a free port) and serves plain HTTP/1.1 on `threads` threads.
    pub fn start(addr: SocketAddr, threads: usize) -> std::io::Result<TargetServer> {
        Self::start_with(addr, threads, TargetOptions::default())
    }

    /// Like [`TargetServer::start`], serving as `options` say (invalid capacity options, see
    /// [`TargetOptions::check`], are an `InvalidInput` error).
    pub fn start_with(addr: SocketAddr, threads: usize, options: TargetOptions) -> std::io::Result<TargetServer> {
        options.check().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let capacity = Arc::new(Capacity::new(&options));
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stats = Arc::new(TargetStats::default());
        let (shutdown, rx) = watch::channel(false);
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let listener = listener.try_clone()?;
            let stats = stats.clone();
            let rx = rx.clone();
            let options = options.clone();
            let capacity = capacity.clone();
            let handle = std::thread::Builder::new().name(format!("stampede-target-{i}")).spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!("target runtime: {e}");
                        return Duration::ZERO;
                    }
                };
                rt.block_on(serve(listener, stats, capacity, rx, options));
                drop(rt);
                thread_cpu()
            })?;
            handles.push(handle);
        }
        Ok(TargetServer { addr, tls: options.tls.is_some(), stats, shutdown, threads: handles })
    }

    /// The address it listens on (with the port picked, when asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (`https://` when serving TLS).
    pub fn base_url(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.addr)
    }

    /// The server's counters, live: they go on counting while it serves.
    pub fn stats(&self) -> Arc<TargetStats> {
        self.stats.clone()
    }

    /// Stops serving and returns the CPU time the server's threads used.
    pub fn stop(self) -> Duration {
        let _ = self.shutdown.send(true);
        self.threads.into_iter().map(|h| h.join().unwrap_or_default()).sum()
    }

    /// Binds `addr` (port 0 picks a free port) to serve as `options` say, without serving yet
    /// (for `stampede target`, which says where it listens only once it is bound). Invalid
    /// capacity options (see [`TargetOptions::check`]) are an `InvalidInput` error; a bind that
    /// fails is the system's error (`AddrInUse`, say).
    pub fn bind(addr: SocketAddr, options: TargetOptions) -> std::io::Result<BoundTarget> {
        options.check().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        Ok(BoundTarget { listener, addr, options })
    }
}

/// A built-in target bound to its address, serving once [`BoundTarget::serve_until`] runs.
#[derive(Debug)]
pub struct BoundTarget {
    listener: std::net::TcpListener,
    addr: SocketAddr,
    options: TargetOptions,
}

impl BoundTarget {
    /// The address it is bound to (with the port picked, when asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` resolves, on the current tokio runtime.
    pub async fn serve_until(self, shutdown: impl std::future::Future<Output = ()>) {
        let capacity = Arc::new(Capacity::new(&self.options));
        let (tx, rx) = watch::channel(false);
        let server = tokio::spawn(serve(self.listener, Arc::new(TargetStats::default()), capacity, rx, self.options));
        shutdown.await;
        let _ = tx.send(true);
        let _ = server.await;
    }
}

async fn serve(
    listener: std::net::TcpListener,
    stats: Arc<TargetStats>,
    capacity: Arc<Capacity>,
    mut shutdown: watch::Receiver<bool>,
    options: TargetOptions,
) {
    let acceptor = options.tls.clone().map(tokio_rustls::TlsAcceptor::from);
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("target listener: {e}");
            return;
        }
    };
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                stats.connections.fetch_add(1, Ordering::Relaxed);
                let stats = stats.clone();
                let capacity = capacity.clone();
                let stop = shutdown.clone();
                let http2 = options.http2;
                match acceptor.clone() {
                    None => {
                        conns.spawn(serve_connection(stream, peer, stats, capacity, stop, http2));
                    }
                    Some(acceptor) => {
                        conns.spawn(async move {
                            let Ok(stream) = acceptor.accept(stream).await else { return };
                            stats.tls_sessions.fetch_add(1, Ordering::Relaxed);
                            serve_connection(stream, peer, stats, capacity, stop, http2).await;
                        });
                    }
                }
            }
            _ = shutdown.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.abort_all();
}

/// Serves one connection until it ends or the server stops: HTTP/1.1, or with `http2`
/// HTTP/1.1 and HTTP/2 (told apart by the HTTP/2 preface).
async fn serve_connection<I>(
    io: I,
    peer: SocketAddr,
    stats: Arc<TargetStats>,
    capacity: Arc<Capacity>,
    mut stop: watch::Receiver<bool>,
    http2: bool,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| {
        let stats = stats.clone();
        let capacity = capacity.clone();
        async move {
            if grpc::is_grpc(&req) {
                count(&req, &stats);
                // Calls take their service time too (a capacity search over gRPC).
                if !capacity.serve(&stats).await {
                    return Ok::<_, Infallible>(grpc::refused(&stats));
                }
                return Ok(grpc::serve(req, stats).await);
            }
            if ws::is_upgrade(&req) {
                count(&req, &stats);
                return Ok(ws::upgrade(req, stats));
            }
            Ok(handle(req, peer, &stats, &capacity).await)
        }
    });
    if http2 {
        let builder = auto::Builder::new(TokioExecutor::new());
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
        tokio::pin!(conn);
        tokio::select! {
            _ = conn.as_mut() => {}
            _ = stop.changed() => {}
        }
    } else {
        let conn = http1::Builder::new().serve_connection(TokioIo::new(io), service).with_upgrades();
        tokio::pin!(conn);
        tokio::select! {
            _ = conn.as_mut() => {}
            _ = stop.changed() => {}
        }
    }
}

type Resp = Response<TargetBody>;

/// Counts a request that every route counts (gRPC calls and upgrades skip [`handle`]).
fn count(req: &Request<Incoming>, stats: &TargetStats) {
    stats.requests.fetch_add(1, Ordering::Relaxed);
    if req.version() == http::Version::HTTP_2 {
        stats.http2_requests.fetch_add(1, Ordering::Relaxed);
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(TargetBody::Full(Full::new(body.into())));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut().insert(header::SERVER, HeaderValue::from_static("stampede-target"));
    r
}

fn json_response(status: StatusCode, v: &Value) -> Resp {
    let mut body = serde_json::to_vec_pretty(v).unwrap_or_default();
    body.push(b'\n');
    respond(status, "application/json", body)
}

async fn handle(req: Request<Incoming>, peer: SocketAddr, stats: &TargetStats, capacity: &Capacity) -> Resp {
    count(&req, stats);
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    // `/stats` stays answerable while the target is saturated.
    if path != "/stats" && !capacity.serve(stats).await {
        return respond(StatusCode::SERVICE_UNAVAILABLE, "text/plain", "queue full\n");
    }
    match (path.as_str(), &method) {
        ("/" | "/index.html", &Method::GET | &Method::HEAD) => respond(StatusCode::OK, "text/html", INDEX_HTML),
        ("/shop/app", &Method::GET) => respond(StatusCode::OK, "text/html; charset=utf-8", SHOP_APP),
        ("/openapi.yaml", &Method::GET) => {
            // This server's own address, as the client reached it.
            let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
            let scheme = if req.uri().scheme_str() == Some("https") { "https" } else { "http" };
            respond(StatusCode::OK, "application/yaml", OPENAPI.replace("__SERVER__", &format!("{scheme}://{host}")))
        }
        ("/get", &Method::GET | &Method::HEAD)
        | ("/post", &Method::POST)
        | ("/put", &Method::PUT)
        | ("/patch", &Method::PATCH)
        | ("/delete", &Method::DELETE) => echo(req, peer).await,
        ("/get" | "/post" | "/put" | "/patch" | "/delete", _) => {
            respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "method not allowed\n")
        }
        ("/stats", _) => stats_json(stats),
        ("/cookies", _) => cookies(&req),
        ("/cookies/set", _) => set_cookies(&req),
        ("/redirect-to", _) => redirect_to(&req),
        ("/response-headers", _) => response_headers(&req),
        _ if path == "/anything" || path.starts_with("/anything/") => echo(req, peer).await,
        _ if path.starts_with("/shop/") => {
            let (parts, body) = req.into_parts();
            let Ok(body) = http_body_util::Limited::new(body, MAX_BODY).collect().await else {
                return respond(StatusCode::PAYLOAD_TOO_LARGE, "text/plain", "body too large\n");
            };
            let (status, answer) =
                stats.shop.handle(&method, &path["/shop/".len()..], &parts.headers, &body.to_bytes());
            json_response(status, &answer)
        }
        _ => by_path(req, peer, &path).await,
    }
}

/// `/stats`: the target's counters as JSON (answered while the target is saturated too).
fn stats_json(stats: &TargetStats) -> Resp {
    json_response(
        StatusCode::OK,
        &json!({
            "requests": stats.requests(),
            "http2Requests": stats.http2_requests(),
            "connections": stats.connections(),
            "tlsSessions": stats.tls_sessions(),
            "inService": stats.in_service(),
            "maxInService": stats.max_in_service(),
            "waiting": stats.waiting(),
            "queueFullRejections": stats.queue_full_rejections(),
            "grpc": stats.grpc.to_json(),
            "websocket": stats.ws.to_json(),
        }),
    )
}

/// `/cookies`: the cookies the request carried, as JSON.
fn cookies(req: &Request<Incoming>) -> Resp {
    let cookies: Map<String, Value> = req
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
    json_response(StatusCode::OK, &json!({ "cookies": cookies }))
}

/// `/cookies/set?name=value…`: sets each cookie and redirects to `/cookies`.
fn set_cookies(req: &Request<Incoming>) -> Resp {
    let mut r = redirect(StatusCode::FOUND, "/cookies");
    for (k, v) in query_pairs(req) {
        if let Ok(value) = HeaderValue::from_str(&format!("{k}={v}; Path=/")) {
            r.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    r
}

/// `/redirect-to?url=…&status_code=…`: a redirect there (302 unless another 3xx is asked).
fn redirect_to(req: &Request<Incoming>) -> Resp {
    let q: BTreeMap<String, String> = query_pairs(req).into_iter().collect();
    let status = q
        .get("status_code")
        .and_then(|c| c.parse::<u16>().ok())
        .and_then(|c| StatusCode::from_u16(c).ok())
        .filter(StatusCode::is_redirection)
        .unwrap_or(StatusCode::FOUND);
    redirect(status, q.get("url").map(String::as_str).unwrap_or("/get"))
}

/// `/response-headers?name=value…`: the pairs as headers of the answer and as its JSON body.
fn response_headers(req: &Request<Incoming>) -> Resp {
    let pairs = query_pairs(req);
    let mut r = json_response(StatusCode::OK, &multi_map(pairs.clone()));
    for (k, v) in pairs {
        if let (Ok(name), Ok(value)) = (header::HeaderName::try_from(k), HeaderValue::from_str(&v)) {
            r.headers_mut().append(name, value);
        }
    }
    r
}

/// The paths with a parameter in them: `/status/CODE`, `/delay/MS`, `/redirect/N`,
/// `/bytes/N`; anything else is not found.
async fn by_path(req: Request<Incoming>, peer: SocketAddr, path: &str) -> Resp {
    if let Some(code) = path.strip_prefix("/status/") {
        return match code.parse::<u16>().ok().and_then(|c| StatusCode::from_u16(c).ok()) {
            Some(status) => respond(status, "text/plain", ""),
            None => respond(StatusCode::BAD_REQUEST, "text/plain", "invalid status code\n"),
        };
    }
    if let Some(ms) = path.strip_prefix("/delay/") {
        return match ms.parse::<u64>() {
            Ok(ms) => {
                tokio::time::sleep(Duration::from_millis(ms.min(MAX_DELAY_MS))).await;
                echo(req, peer).await
            }
            Err(_) => respond(StatusCode::BAD_REQUEST, "text/plain", "invalid delay\n"),
        };
    }
    if let Some(n) = path.strip_prefix("/redirect/") {
        return match n.parse::<u32>() {
            Ok(0 | 1) => redirect(StatusCode::FOUND, "/get"),
            Ok(n) => redirect(StatusCode::FOUND, &format!("/redirect/{}", n - 1)),
            Err(_) => respond(StatusCode::BAD_REQUEST, "text/plain", "invalid redirect count\n"),
        };
    }
    if let Some(n) = path.strip_prefix("/bytes/") {
        return match n.parse::<usize>() {
            Ok(n) => {
                let body: Vec<u8> = (0..n.min(MAX_BYTES)).map(|i| (i.wrapping_mul(31) % 251) as u8).collect();
                respond(StatusCode::OK, "application/octet-stream", body)
            }
            Err(_) => respond(StatusCode::BAD_REQUEST, "text/plain", "invalid length\n"),
        };
    }
    respond(StatusCode::NOT_FOUND, "text/plain", "not found\n")
}

fn redirect(status: StatusCode, location: &str) -> Resp {
    let mut r = respond(status, "text/plain", "");
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

fn query_pairs(req: &Request<Incoming>) -> Vec<(String, String)> {
    form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()).into_owned().collect()
}

/// httpbin-style echo of the request.
async fn echo(req: Request<Incoming>, peer: SocketAddr) -> Resp {
    let (parts, body) = req.into_parts();
    let body = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return respond(StatusCode::PAYLOAD_TOO_LARGE, "text/plain", "body too large\n"),
    };
    let mut headers = Map::new();
    for (name, value) in &parts.headers {
        let v = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match headers.get_mut(&title_case(name.as_str())) {
            Some(Value::String(existing)) => {
                existing.push(',');
                existing.push_str(&v);
            }
            _ => {
                headers.insert(title_case(name.as_str()), Value::String(v));
            }
        }
    }
    let args = multi_map(
        form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned())),
    );
    let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let mut form = Vec::new();
    let mut files = Vec::new();
    let mut data = String::new();
    if content_type.starts_with("application/x-www-form-urlencoded") {
        form.extend(form_urlencoded::parse(&body).map(|(k, v)| (k.into_owned(), v.into_owned())));
    } else if let Some(boundary) =
        content_type.starts_with("multipart/form-data").then(|| multipart_boundary(&content_type)).flatten()
    {
        for part in parse_multipart(&body, &boundary) {
            let text = String::from_utf8_lossy(&part.data).into_owned();
            if part.filename.is_some() {
                files.push((part.name, text));
            } else {
                form.push((part.name, text));
            }
        }
    } else {
        data = String::from_utf8_lossy(&body).into_owned();
    }
    let json_body = serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null);
    // HTTP/2 carries the host as the authority.
    let authority = parts.uri.authority().map(|a| a.as_str().to_string());
    let host = parts.headers.get(header::HOST).and_then(|h| h.to_str().ok()).or(authority.as_deref());
    if let (None, Some(a)) = (headers.get("Host"), &authority) {
        headers.insert("Host".into(), Value::String(a.clone()));
    }
    let host = host.unwrap_or("127.0.0.1");
    let v = json!({
        "args": args,
        "data": data,
        "files": multi_map(files),
        "form": multi_map(form),
        "headers": headers,
        "json": json_body,
        "method": parts.method.as_str(),
        "origin": peer.ip().to_string(),
        "url": format!("http://{host}{}", parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/")),
    });
    json_response(StatusCode::OK, &v)
}

/// httpbin's shape: a single value is a string, repeated names become a list.
fn multi_map(pairs: impl IntoIterator<Item = (String, String)>) -> Value {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in pairs {
        map.entry(k).or_default().push(v);
    }
    Value::Object(
        map.into_iter()
            .map(|(k, mut v)| (k, if v.len() == 1 { Value::String(v.remove(0)) } else { json!(v) }))
            .collect(),
    )
}

/// `user-agent` → `User-Agent`.
fn title_case(name: &str) -> String {
    name.split('-')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

fn multipart_boundary(content_type: &str) -> Option<String> {
    content_type
        .split(';')
        .map(str::trim)
        .find_map(|p| p.strip_prefix("boundary="))
        .map(|b| b.trim_matches('"').to_string())
}

struct Part {
    name: String,
    filename: Option<String>,
    data: Vec<u8>,
}

fn parse_multipart(body: &[u8], boundary: &str) -> Vec<Part> {
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut pieces = memchr::memmem::find_iter(body, delimiter.as_bytes()).collect::<Vec<_>>();
    pieces.push(body.len());
    for w in pieces.windows(2) {
        let mut chunk = &body[w[0] + delimiter.len()..w[1]];
        if chunk.starts_with(b"--") {
            break;
        }
        chunk = chunk.strip_prefix(b"\r\n").unwrap_or(chunk);
        chunk = chunk.strip_suffix(b"\r\n").unwrap_or(chunk);
        let Some(split) = memchr::memmem::find(chunk, b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&chunk[..split]);
        let data = chunk[split + 4..].to_vec();
        let mut name = None;
        let mut filename = None;
        for line in head.lines() {
            let Some((k, v)) = line.split_once(':') else { continue };
            if !k.trim().eq_ignore_ascii_case("content-disposition") {
                continue;
            }
            for param in v.split(';').map(str::trim) {
                if let Some(n) = param.strip_prefix("name=") {
                    name = Some(n.trim_matches('"').to_string());
                } else if let Some(f) = param.strip_prefix("filename=") {
                    filename = Some(f.trim_matches('"').to_string());
                }
            }
        }
        if let Some(name) = name {
            parts.push(Part { name, filename, data });
        }
    }
    parts
}

/// Why a TLS server configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// The certificate chain's PEM could not be read.
    #[error("invalid certificate PEM: {0}")]
    Certificate(rustls::pki_types::pem::Error),
    /// The key's PEM could not be read, or holds no private key.
    #[error("invalid key PEM: {0}")]
    Key(rustls::pki_types::pem::Error),
    /// rustls refused the certificate or the key (e.g. a key of a type it cannot use).
    #[error(transparent)]
    Rustls(#[from] rustls::Error),
}

/// A TLS server configuration from a PEM certificate chain and key, offering `h2` by ALPN
/// when `http2` (and `http/1.1` always).
pub fn server_config(cert_pem: &str, key_pem: &str, http2: bool) -> Result<rustls::ServerConfig, TlsConfigError> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(TlsConfigError::Certificate)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(TlsConfigError::Key)?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = if http2 { vec![b"h2".to_vec(), b"http/1.1".to_vec()] } else { vec![b"http/1.1".to_vec()] };
    Ok(config)
}

/// CPU time (user + system) of the calling thread so far.
fn thread_cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec().max(0) as u64) + Duration::from_micros(t.tv_usec().max(0) as u64)
    };
    getrusage(UsageWho::RUSAGE_THREAD).map(|u| tv(u.user_time()) + tv(u.system_time())).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_multipart_fields_and_files() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"key21\"\r\n\r\nkey22\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.json\"\r\nContent-Type: application/json\r\n\r\n{\"a\":1}\r\n--XyZ--\r\n";
        let parts = parse_multipart(body, "XyZ");
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0].name.as_str(), parts[0].data.as_slice(), parts[0].filename.is_none()),
            ("key21", &b"key22"[..], true)
        );
        assert_eq!((parts[1].name.as_str(), parts[1].data.as_slice()), ("file", &b"{\"a\":1}"[..]));
        assert_eq!(parts[1].filename.as_deref(), Some("a.json"));
    }

    #[test]
    fn a_queued_service_time_runs_from_when_its_permit_was_due_back() {
        let t = Duration::from_millis(10);
        let due_back = Mutex::new(DueBack { unused: 2, ends: BinaryHeap::new() });
        let t0 = Instant::now();
        // Two permits never used: both start when asked.
        let (a, b) = (ServiceTime::take(&due_back, t0, t), ServiceTime::take(&due_back, t0, t));
        assert_eq!((a.end, b.end), (t0 + t, t0 + t));
        drop((a, b));
        // Asked at 1 ms, queued behind them: it runs from 10 ms, however late the timer
        // released the permit, so each permit serves one request per service time.
        let c = ServiceTime::take(&due_back, t0 + Duration::from_millis(1), t);
        assert_eq!(c.end, t0 + 2 * t);
        // Asked after the other permit was due back: it runs from when it asked.
        let d = ServiceTime::take(&due_back, t0 + Duration::from_millis(25), t);
        assert_eq!(d.end, t0 + Duration::from_millis(35));
    }

    #[test]
    fn header_names_are_title_cased_like_httpbin() {
        assert_eq!(title_case("user-agent"), "User-Agent");
        assert_eq!(title_case("authorization"), "Authorization");
        assert_eq!(
            multi_map([("a".into(), "1".into()), ("a".into(), "2".into()), ("b".into(), "x".into())]),
            json!({"a": ["1", "2"], "b": "x"})
        );
    }
}
