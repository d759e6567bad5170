//! Connections and protocols: opening a connection (DNS, TCP, TLS, each timed), and sending
//! a VU's request over HTTP/1.1 or HTTP/2 as the scenario's `http` settings say.
//!
//! HTTP/1.1 goes through the lean codec in [`crate::http1`] on the VU's own connection,
//! plain or TLS alike. HTTP/2 goes through the worker's shared [`crate::h2::Pool`]. With
//! `version: auto`, an `https` origin is asked for `h2` in the TLS handshake; when the
//! server picks `http/1.1` instead, the worker remembers it and its VUs use HTTP/1.1.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::error::Problem;
use crate::h2::{Outcome, Pool};
use crate::http1::{self, Connection, ExchangeError, ResponseInfo, classify_io};
use crate::metrics::ErrorKind;
use crate::phases::ConnectTimes;
use crate::plan::Target;
use crate::source::{SourceAddrs, parse_local_addresses};
use crate::tls::{Alpn, TlsPlan};
use stampede_model::scenario::{ConnectionPolicy, HttpDefaults, HttpVersion};

/// Default most concurrent streams per HTTP/2 connection.
pub const DEFAULT_MAX_STREAMS: u32 = 100;

/// A connection's byte stream: plain TCP or TLS over TCP.
#[derive(Debug)]
pub enum Io {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Io {
    pub fn is_tls(&self) -> bool {
        matches!(self, Io::Tls(_))
    }

    /// The protocol agreed on in the TLS handshake (ALPN), if any.
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            Io::Tcp(_) => None,
            Io::Tls(s) => s.get_ref().1.alpn_protocol(),
        }
    }
}

// `inline(always)`: for plain HTTP/1.1 the enum then costs a branch, not a call (measured
// with callgrind: about 50 instructions per request otherwise).
impl AsyncRead for Io {
    #[inline(always)]
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    #[inline(always)]
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Tcp(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

fn micros_since(t: Instant) -> u64 {
    t.elapsed().as_micros() as u64
}

/// Opens a connection to `target` within `limit` (name lookup, TCP connect and, with
/// `tls`, the handshake offering the given ALPN protocols), timing each part.
pub async fn open(
    target: &Target,
    limit: Duration,
    tls: Option<(&TlsPlan, Alpn)>,
    sources: &SourceAddrs,
) -> Result<(Io, ConnectTimes), ExchangeError> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut times = ConnectTimes::default();
    let addr = match target.host.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, target.port),
        Err(_) => {
            let started = Instant::now();
            let lookup =
                tokio::time::timeout_at(deadline, tokio::net::lookup_host((target.host.as_str(), target.port)))
                    .await
                    .map_err(|_| ExchangeError {
                    kind: ErrorKind::Timeout,
                    message: "DNS lookup timed out".into(),
                    answered: false,
                })?;
            let mut addrs = lookup.map_err(|e| ExchangeError {
                kind: ErrorKind::Dns,
                message: format!("cannot resolve `{}`: {e}", target.host),
                answered: false,
            })?;
            let addr = addrs.next().ok_or_else(|| ExchangeError {
                kind: ErrorKind::Dns,
                message: format!("`{}` resolved to no address", target.host),
                answered: false,
            })?;
            times.dns_us = Some(micros_since(started));
            addr
        }
    };
    let started = Instant::now();
    let stream = tokio::time::timeout_at(deadline, sources.connect(addr))
        .await
        .map_err(|_| ExchangeError {
            kind: ErrorKind::Timeout,
            message: format!("connect to {addr} timed out"),
            answered: false,
        })?
        .map_err(|e| {
            let kind = match classify_io(&e) {
                ErrorKind::Reset | ErrorKind::Io => ErrorKind::Connect,
                k => k,
            };
            ExchangeError { kind, message: format!("connect to {addr}: {e}"), answered: false }
        })?;
    times.connect_us = micros_since(started);
    let _ = stream.set_nodelay(true);
    let Some((plan, alpn)) = tls else { return Ok((Io::Tcp(stream), times)) };
    let started = Instant::now();
    let stream =
        tokio::time::timeout_at(deadline, plan.handshake(alpn, &target.host, stream)).await.map_err(|_| {
            ExchangeError {
                kind: ErrorKind::Timeout,
                message: format!("TLS handshake with {addr} timed out"),
                answered: false,
            }
        })??;
    times.tls_us = Some(micros_since(started));
    Ok((Io::Tls(Box::new(stream)), times))
}

/// The scenario's connection settings, compiled.
#[derive(Debug, Default)]
pub struct TransportPlan {
    pub version: HttpVersion,
    /// HTTP/2 connections per origin for the whole runner (`None`: one per worker thread).
    pub connections: Option<u32>,
    pub max_streams: u32,
    pub policy: ConnectionPolicy,
    pub max_requests_per_connection: Option<u32>,
    pub tls: TlsPlan,
    /// Source addresses of new connections.
    pub sources: SourceAddrs,
}

impl TransportPlan {
    /// Checks and compiles the `http` block's connection settings; files are relative to `base_dir`.
    pub fn compile(http: &HttpDefaults, base_dir: &Path, problems: &mut Vec<Problem>) -> TransportPlan {
        let h2 = matches!(http.version, HttpVersion::Http2 | HttpVersion::Auto);
        let h1 = matches!(http.version, HttpVersion::Http11 | HttpVersion::Auto);
        let mut at_least_one = |field: &str, value: Option<u32>, applies: bool, to: &str| {
            if value == Some(0) {
                problems.push(Problem::new(format!("http.{field}"), "must be at least 1"));
            } else if value.is_some() && !applies {
                problems.push(Problem::new(format!("http.{field}"), format!("applies to {to}")));
            }
        };
        let for_h2 = "HTTP/2 (`version: 2` or `auto`)";
        let for_h1 = "HTTP/1.1 (`version: 1.1` or `auto`)";
        at_least_one("connections", http.connections, h2, for_h2);
        at_least_one("maxStreams", http.max_streams, h2, for_h2);
        at_least_one("maxRequestsPerConnection", http.max_requests_per_connection, h1, for_h1);
        if http.connection_policy != ConnectionPolicy::KeepAlive && !h1 {
            problems.push(Problem::new("http.connectionPolicy", format!("applies to {for_h1}")));
        }
        let tls = match &http.tls {
            Some(spec) => TlsPlan::compile(spec, base_dir).unwrap_or_else(|found| {
                problems.extend(
                    found.into_iter().map(|(field, message)| Problem::new(format!("http.tls.{field}"), message)),
                );
                TlsPlan::default()
            }),
            None => TlsPlan::default(),
        };
        let sources = match parse_local_addresses(&http.local_addresses) {
            Ok(ips) => SourceAddrs::new(ips),
            Err(bad) => {
                for (i, reason) in bad {
                    problems.push(Problem::new(format!("http.localAddresses[{i}]"), reason));
                }
                SourceAddrs::default()
            }
        };
        TransportPlan {
            version: http.version,
            connections: http.connections,
            max_streams: http.max_streams.unwrap_or(DEFAULT_MAX_STREAMS),
            policy: http.connection_policy,
            max_requests_per_connection: http.max_requests_per_connection,
            tls,
            sources,
        }
    }

    /// HTTP/2 connections per origin for worker `worker` of `threads`: an even share of
    /// `connections`, at least one.
    pub fn connections_for(&self, worker: usize, threads: usize) -> usize {
        let threads = threads.max(1);
        let total = self.connections.map_or(threads, |c| c as usize);
        (total / threads + usize::from(worker < total % threads)).max(1)
    }
}

/// What one worker thread shares among its VUs: the HTTP/2 pool.
#[derive(Debug)]
pub struct WorkerTransport {
    pub plan: Arc<TransportPlan>,
    pub h2: Pool,
}

impl WorkerTransport {
    pub fn new(plan: Arc<TransportPlan>, worker: usize, threads: usize) -> WorkerTransport {
        let h2 = Pool::new(plan.connections_for(worker, threads), plan.max_streams);
        WorkerTransport { plan, h2 }
    }
}

/// A VU's own connection state.
#[derive(Debug, Default)]
pub struct VuConn {
    /// The VU's HTTP/1.1 connection.
    h1: Option<Connection>,
    /// Connections opened since the last [`VuConn::take_opened`], with their phase timings.
    opened: Vec<ConnectTimes>,
}

impl VuConn {
    /// Drops the VU's HTTP/1.1 connection (after a timeout, whose answer may still come).
    pub fn close(&mut self) {
        self.h1 = None;
    }

    /// The end of an iteration: `connectionPolicy: per-iteration` closes the connection.
    pub fn end_iteration(&mut self, plan: &TransportPlan) {
        if plan.policy == ConnectionPolicy::PerIteration {
            self.h1 = None;
        }
    }

    /// Connections opened since the last call, with their timings.
    pub fn take_opened(&mut self) -> std::vec::Drain<'_, ConnectTimes> {
        self.opened.drain(..)
    }

    /// Whether a connection was opened since the last [`VuConn::take_opened`].
    pub fn opened_any(&self) -> bool {
        !self.opened.is_empty()
    }
}

/// Sends one request (`bytes`, HTTP/1.1 as written by the plan) to `target` and reads the
/// answer, over HTTP/2 or the VU's HTTP/1.1 connection.
#[allow(clippy::too_many_arguments)] // the parts of one exchange, borrowed from the VU
pub async fn exchange(
    vc: &mut VuConn,
    wt: &WorkerTransport,
    target: &Target,
    bytes: &[u8],
    head: bool,
    mut body: Option<&mut Vec<u8>>,
    headers: &mut http1::Headers,
    connect_timeout: Duration,
) -> Result<ResponseInfo, ExchangeError> {
    let plan = &*wt.plan;
    let h2 = match (plan.version, target.tls) {
        (HttpVersion::Http11, _) | (HttpVersion::Auto, false) => None,
        (HttpVersion::Http2, _) => Some(Alpn::H2),
        (HttpVersion::Auto, true) => {
            let h1 = vc.h1.as_ref().is_some_and(|c| c.serves(target)) || wt.h2.is_http1(target);
            (!h1).then_some(Alpn::Both)
        }
    };
    if let Some(alpn) = h2 {
        // Boxed: the HTTP/2 exchange's state is large (about 2 KB), and inline it would make
        // every VU's task that much bigger, HTTP/1.1 ones included.
        let outcome = Box::pin(wt.h2.exchange(
            target,
            bytes,
            plan,
            alpn,
            connect_timeout,
            body.as_deref_mut(),
            headers,
            &mut vc.opened,
        ))
        .await?;
        match outcome {
            Outcome::Answer(info) => return Ok(info),
            Outcome::Http1(io) => vc.h1 = Some(Connection::new(io, target)),
        }
    }
    exchange_http1(vc, plan, target, bytes, head, body, headers, connect_timeout).await
}

/// One request and its answer on the VU's HTTP/1.1 connection (opening one when needed). A
/// request that fails on a reused connection before any byte of answer came back is retried
/// once on a new connection: the server had closed the idle connection.
#[allow(clippy::too_many_arguments)]
async fn exchange_http1(
    vc: &mut VuConn,
    plan: &TransportPlan,
    target: &Target,
    bytes: &[u8],
    head: bool,
    mut body: Option<&mut Vec<u8>>,
    headers: &mut http1::Headers,
    connect_timeout: Duration,
) -> Result<ResponseInfo, ExchangeError> {
    let mut retried = false;
    loop {
        let have = vc.h1.as_ref().is_some_and(|c| c.serves(target));
        if !have {
            vc.h1 = None;
            let tls = target.tls.then_some((&plan.tls, Alpn::Http11));
            // Boxed: opening (DNS, TCP, TLS handshake state) is large and rare on keep-alive
            // connections; inline it would weigh on every VU task.
            let (io, times) = Box::pin(open(target, connect_timeout, tls, &plan.sources)).await?;
            vc.opened.push(times);
            vc.h1 = Some(Connection::new(io, target));
        }
        let Some(c) = vc.h1.as_mut() else { unreachable!("connection was just set") };
        let reused = c.uses > 0;
        if let Some(b) = body.as_deref_mut() {
            b.clear();
        }
        match c.exchange(bytes, head, body.as_deref_mut(), Some(&mut *headers)).await {
            Ok(info) => {
                if !info.keep_alive || plan.max_requests_per_connection.is_some_and(|m| c.uses >= m) {
                    vc.h1 = None;
                }
                return Ok(info);
            }
            Err(mut e) => {
                vc.h1 = None;
                if reused && !e.answered && !retried {
                    retried = true;
                    continue;
                }
                // A TLS 1.3 server refuses a client certificate after the handshake; its alert
                // may be lost to the reset that follows.
                if !reused && target.tls && !e.answered && e.kind == ErrorKind::Reset {
                    e.kind = ErrorKind::Tls;
                    e.message = format!(
                        "TLS: the server closed the new connection before any answer (did it refuse the client \
                         certificate?): {}",
                        e.message
                    );
                }
                return Err(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http2_connections_are_spread_over_workers_at_least_one_each() {
        let plan = TransportPlan { connections: Some(5), ..TransportPlan::default() };
        assert_eq!((0..3).map(|w| plan.connections_for(w, 3)).collect::<Vec<_>>(), vec![2, 2, 1]);
        assert_eq!((0..4).map(|w| plan.connections_for(w, 8)).sum::<usize>(), 4);
        let default = TransportPlan::default();
        assert_eq!(default.connections_for(0, 4), 1);
    }
}
