//! Connections and protocols: opening a connection (DNS, TCP, TLS, each timed), and sending
//! a VU's request over HTTP/1.1 or HTTP/2 as the scenario's `http` settings say.
//!
//! HTTP/1.1 goes through the lean codec in [`crate::client::http1`] on the VU's own connection,
//! plain or TLS alike. HTTP/2 goes through the worker's shared [`crate::client::h2::Pool`]. With
//! `version: auto`, an `https` origin is asked for `h2` in the TLS handshake; when the
//! server picks `http/1.1` instead, the worker remembers it and its VUs use HTTP/1.1.

use std::sync::Arc;
use std::time::Duration;

use stampede_model::ErrorKind;
use stampede_model::scenario::{ConnectionPolicy, HttpVersion};

use crate::client::connect::open;
use crate::client::exchange::{ExchangeError, Headers, ResponseInfo};
use crate::client::h2::{Outcome, Pool};
use crate::client::http1::Connection;
use crate::client::settings::TransportPlan;
use crate::client::tls::Alpn;
use crate::client::url::HttpUrl;
use crate::stats::phases::ConnectTimes;

/// What one worker thread shares among its VUs: the HTTP/2 pool.
#[derive(Debug)]
pub(crate) struct WorkerTransport {
    pub plan: Arc<TransportPlan>,
    pub h2: Pool,
}

impl WorkerTransport {
    pub(crate) fn new(plan: Arc<TransportPlan>, worker: usize, threads: usize) -> WorkerTransport {
        let h2 = Pool::new(plan.connections_for(worker, threads), plan.max_streams);
        WorkerTransport { plan, h2 }
    }
}

/// A VU's own connection state.
#[derive(Debug, Default)]
pub(crate) struct VuConn {
    /// The VU's HTTP/1.1 connection.
    h1: Option<Connection>,
    /// Connections opened since the last [`VuConn::take_opened`], with their phase timings.
    opened: Vec<ConnectTimes>,
}

impl VuConn {
    /// Drops the VU's HTTP/1.1 connection (after a timeout, whose answer may still come).
    pub(crate) fn close(&mut self) {
        self.h1 = None;
    }

    /// The end of an iteration: `connectionPolicy: per-iteration` closes the connection.
    pub(crate) fn end_iteration(&mut self, plan: &TransportPlan) {
        if plan.policy == ConnectionPolicy::PerIteration {
            self.h1 = None;
        }
    }

    /// Connections opened since the last call, with their timings.
    pub(crate) fn take_opened(&mut self) -> std::vec::Drain<'_, ConnectTimes> {
        self.opened.drain(..)
    }

    /// Counts a connection the VU opened for itself (a WebSocket's).
    pub(crate) fn opened_one(&mut self, times: ConnectTimes) {
        self.opened.push(times);
    }

    /// Whether a connection was opened since the last [`VuConn::take_opened`].
    pub(crate) fn opened_any(&self) -> bool {
        !self.opened.is_empty()
    }

    /// Waits until tokio's reactor reports the HTTP/1.1 connection's socket readable (tests:
    /// the server's close has been seen).
    #[cfg(test)]
    pub(crate) async fn readable(&self) {
        self.h1.as_ref().expect("an HTTP/1.1 connection").readable().await;
    }
}

/// Sends one request (`bytes`, HTTP/1.1 as written by the plan) to `target` and reads the
/// answer, over HTTP/2 or the VU's HTTP/1.1 connection.
#[expect(clippy::too_many_arguments, reason = "the parts of one exchange, borrowed from the VU")]
pub(crate) async fn exchange(
    vc: &mut VuConn,
    wt: &WorkerTransport,
    target: &HttpUrl,
    bytes: &[u8],
    head: bool,
    mut body: Option<&mut Vec<u8>>,
    headers: &mut Headers,
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

/// Sends one request over HTTP/2 whatever `http.version` says (gRPC): TLS asks for `h2`,
/// cleartext goes by prior knowledge.
pub(crate) async fn exchange_h2(
    vc: &mut VuConn,
    wt: &WorkerTransport,
    target: &HttpUrl,
    bytes: &[u8],
    body: Option<&mut Vec<u8>>,
    headers: &mut Headers,
    connect_timeout: Duration,
) -> Result<ResponseInfo, ExchangeError> {
    let plan = &*wt.plan;
    let outcome =
        Box::pin(wt.h2.exchange(target, bytes, plan, Alpn::H2, connect_timeout, body, headers, &mut vc.opened)).await?;
    match outcome {
        Outcome::Answer(info) => Ok(info),
        Outcome::Http1(_) => Err(ExchangeError::protocol(format!(
            "{}:{} speaks HTTP/1.1 only; gRPC needs HTTP/2",
            target.host, target.port
        ))),
    }
}

/// One request and its answer on the VU's HTTP/1.1 connection (opening one when needed).
///
/// A request written whole is never sent again: it may have reached the server, which may
/// have acted on it (a POST), so a connection that then closes without an answer is an error
/// of its kind (`reset` for a close), counted like any other. Only a request that did not go
/// out whole goes on a new connection: the server had closed the idle keep-alive connection.
/// Either tokio's reactor already saw that close (or unasked bytes) before the request, and
/// the connection is replaced before writing (see [`Connection::closed_while_idle`]), or the
/// write itself fails on the reused connection, and the request is written once more on a
/// new one.
#[expect(clippy::too_many_arguments, reason = "the parts of one exchange, borrowed from the VU")]
async fn exchange_http1(
    vc: &mut VuConn,
    plan: &TransportPlan,
    target: &HttpUrl,
    bytes: &[u8],
    head: bool,
    mut body: Option<&mut Vec<u8>>,
    headers: &mut Headers,
    connect_timeout: Duration,
) -> Result<ResponseInfo, ExchangeError> {
    let mut retried = false;
    loop {
        // A reused connection is checked for a close while it was idle; a new one is not.
        let have = vc.h1.as_mut().is_some_and(|c| c.serves(target) && (c.uses == 0 || !c.closed_while_idle()));
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
                // The write failed: the server closed the idle connection just before it (bytes
                // left over from the last answer, also unsent, are the server's error).
                if reused && !e.sent && !e.answered && !retried {
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
    use std::sync::atomic::{AtomicU32, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";

    /// A server that answers one request on each connection and then closes it, as a server
    /// closing idle keep-alive connections does (without `connection: close` first). Counts
    /// the requests it read.
    async fn one_answer_per_connection() -> (HttpUrl, Arc<AtomicU32>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(AtomicU32::new(0));
        let count = seen.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 4096];
                if s.read(&mut buf).await.unwrap_or(0) > 0 {
                    count.fetch_add(1, Ordering::Relaxed);
                    s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await.unwrap();
                }
            }
        });
        (HttpUrl::parse(&format!("http://127.0.0.1:{port}/")).unwrap(), seen)
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_while_idle_is_replaced_before_the_next_request() {
        let (target, seen) = one_answer_per_connection().await;
        let wt = WorkerTransport::new(Arc::new(TransportPlan::default()), 0, 1);
        let mut vc = VuConn::default();
        let mut headers = Headers::default();
        let limit = Duration::from_secs(5);
        let first = exchange(&mut vc, &wt, &target, GET, false, None, &mut headers, limit).await.unwrap();
        assert_eq!((first.status, first.keep_alive), (200, true));
        // The server closed the connection after its answer; the reactor has seen it.
        vc.readable().await;
        let second = exchange(&mut vc, &wt, &target, GET, false, None, &mut headers, limit).await;
        assert_eq!(second.map(|i| i.status).map_err(|e| e.message), Ok(200));
        assert_eq!(seen.load(Ordering::Relaxed), 2, "each request reached the server once");
        assert_eq!(vc.take_opened().count(), 2, "the second request went on a new connection");
    }
}
