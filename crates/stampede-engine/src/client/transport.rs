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
use crate::client::settings::{Transport, TransportPlan};
use crate::client::tls::Alpn;
use crate::client::url::HttpUrl;
use crate::stats::phases::ConnectTimes;

/// What one worker thread shares among its VUs: the HTTP/2 pool.
#[derive(Debug)]
pub(crate) struct WorkerTransport {
    pub plan: Arc<Transport>,
    pub h2: Pool,
}

impl WorkerTransport {
    pub(crate) fn new(plan: Arc<Transport>, worker: usize, threads: usize) -> WorkerTransport {
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
/// A request of which any byte went out is never sent again, whatever its method: the server
/// may have taken it and acted on it (a POST), so a connection that then closes without an
/// answer is an error of its kind (`reset` for a close), counted like any other, and an answer
/// the server gave before reading it all (`413`) is that answer. Only a request of which no
/// byte went out goes on a new connection: the server had closed the idle keep-alive
/// connection. Either tokio's reactor already saw that close (or unasked bytes) before the
/// request, and the connection is replaced before writing (see
/// [`Connection::closed_while_idle`]), or the first write fails on the reused connection, and
/// the request is written once more on a new one.
#[expect(clippy::too_many_arguments, reason = "the parts of one exchange, borrowed from the VU")]
async fn exchange_http1(
    vc: &mut VuConn,
    plan: &Transport,
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
                // The first write failed, no byte went out: the server closed the idle
                // connection just before it (bytes left over from the last answer, also unsent,
                // are the server's error).
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
        let wt = WorkerTransport::new(Arc::new(Transport::default()), 0, 1);
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

    /// What the upload server does with a POST once it has read its head.
    #[derive(Clone, Copy)]
    enum OnUpload {
        /// Answers `413` with `connection: close` and closes, the body unread (a reset).
        RefuseAndClose,
        /// Answers `413` with `connection: close` and neither reads nor closes.
        RefuseAndHold,
        /// Resets the connection without an answer.
        Reset,
    }

    const REFUSED: &[u8] = b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

    /// A server that answers GETs `200` with keep-alive and treats POSTs as `on_upload` says,
    /// after reading only their head. Counts the connections it accepted and the request heads
    /// it read.
    async fn upload_server(on_upload: OnUpload) -> (HttpUrl, Arc<AtomicU32>, Arc<AtomicU32>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicU32::new(0));
        let requests = Arc::new(AtomicU32::new(0));
        let (conns, reqs) = (connections.clone(), requests.clone());
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                conns.fetch_add(1, Ordering::Relaxed);
                let reqs = reqs.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    while let Some(head) = read_head(&mut s, &mut buf).await {
                        reqs.fetch_add(1, Ordering::Relaxed);
                        if head.starts_with(b"GET ") {
                            s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await.unwrap();
                            continue;
                        }
                        match on_upload {
                            OnUpload::RefuseAndClose => {
                                let _ = s.write_all(REFUSED).await;
                            }
                            OnUpload::RefuseAndHold => {
                                let _ = s.write_all(REFUSED).await;
                                std::future::pending::<()>().await;
                            }
                            OnUpload::Reset => s.set_zero_linger().unwrap(),
                        }
                        return;
                    }
                });
            }
        });
        (HttpUrl::parse(&format!("http://127.0.0.1:{port}/")).unwrap(), connections, requests)
    }

    /// Reads from `s` until `buf` holds a whole request head, which it takes out of `buf`;
    /// `None` at the end of the stream.
    async fn read_head(s: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                return Some(buf.drain(..end + 4).collect());
            }
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// A POST of an 8 MB body.
    fn upload() -> Vec<u8> {
        let len = 8 << 20;
        let mut bytes = format!("POST /upload HTTP/1.1\r\nhost: x\r\ncontent-length: {len}\r\n\r\n").into_bytes();
        bytes.resize(bytes.len() + len, b'x');
        bytes
    }

    /// One exchange through the transport, bounded so that a hang fails the test.
    async fn send(
        vc: &mut VuConn,
        wt: &WorkerTransport,
        target: &HttpUrl,
        bytes: &[u8],
    ) -> Result<ResponseInfo, ExchangeError> {
        let mut headers = Headers::default();
        let exchange = exchange(vc, wt, target, bytes, false, None, &mut headers, Duration::from_secs(5));
        tokio::time::timeout(Duration::from_secs(60), exchange).await.expect("the exchange ended")
    }

    #[tokio::test]
    async fn an_upload_the_server_refuses_early_is_answered_with_its_status_and_sent_once() {
        let body = upload();
        for on_upload in [OnUpload::RefuseAndClose, OnUpload::RefuseAndHold] {
            // On a new connection.
            let (target, connections, requests) = upload_server(on_upload).await;
            let wt = WorkerTransport::new(Arc::new(Transport::default()), 0, 1);
            let mut vc = VuConn::default();
            let r = send(&mut vc, &wt, &target, &body).await;
            assert_eq!(r.map(|i| (i.status, i.keep_alive)).map_err(|e| e.message), Ok((413, false)));
            assert_eq!((connections.load(Ordering::Relaxed), requests.load(Ordering::Relaxed)), (1, 1));

            // On a keep-alive connection a GET used first.
            let (target, connections, requests) = upload_server(on_upload).await;
            let mut vc = VuConn::default();
            assert_eq!(send(&mut vc, &wt, &target, GET).await.map(|i| i.status).map_err(|e| e.message), Ok(200));
            let r = send(&mut vc, &wt, &target, &body).await;
            assert_eq!(r.map(|i| (i.status, i.keep_alive)).map_err(|e| e.message), Ok((413, false)));
            assert_eq!(
                (connections.load(Ordering::Relaxed), requests.load(Ordering::Relaxed)),
                (1, 2),
                "the upload was not sent again"
            );
            assert_eq!(vc.take_opened().count(), 1);
        }
    }

    #[tokio::test]
    async fn an_upload_reset_part_way_without_an_answer_is_an_error_and_not_sent_again() {
        let body = upload();
        let (target, connections, requests) = upload_server(OnUpload::Reset).await;
        let wt = WorkerTransport::new(Arc::new(Transport::default()), 0, 1);
        let mut vc = VuConn::default();
        let e = send(&mut vc, &wt, &target, &body).await.unwrap_err();
        assert_eq!((e.kind, e.sent, e.answered), (ErrorKind::Reset, true, false), "{e:?}");
        assert_eq!((connections.load(Ordering::Relaxed), requests.load(Ordering::Relaxed)), (1, 1));

        let (target, connections, requests) = upload_server(OnUpload::Reset).await;
        let mut vc = VuConn::default();
        assert_eq!(send(&mut vc, &wt, &target, GET).await.map(|i| i.status).map_err(|e| e.message), Ok(200));
        let e = send(&mut vc, &wt, &target, &body).await.unwrap_err();
        assert_eq!((e.kind, e.sent, e.answered), (ErrorKind::Reset, true, false), "{e:?}");
        assert_eq!(
            (connections.load(Ordering::Relaxed), requests.load(Ordering::Relaxed)),
            (1, 2),
            "the upload was not sent again"
        );
    }

    #[tokio::test]
    async fn a_request_on_a_connection_the_server_reset_while_idle_goes_once_on_a_new_one() {
        // The server answers each connection's first request, then resets it when told.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(AtomicU32::new(0));
        let count = seen.clone();
        let (reset_tx, mut reset_rx) = tokio::sync::mpsc::channel::<tokio::sync::oneshot::Sender<()>>(1);
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = Vec::new();
                if read_head(&mut s, &mut buf).await.is_some() {
                    count.fetch_add(1, Ordering::Relaxed);
                    s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await.unwrap();
                }
                if let Some(done) = reset_rx.recv().await {
                    s.set_zero_linger().unwrap();
                    drop(s);
                    let _ = done.send(());
                }
            }
        });
        let target = HttpUrl::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        let wt = WorkerTransport::new(Arc::new(Transport::default()), 0, 1);
        let mut vc = VuConn::default();
        assert_eq!(send(&mut vc, &wt, &target, GET).await.map(|i| i.status).map_err(|e| e.message), Ok(200));
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        reset_tx.send(done_tx).await.unwrap();
        done_rx.await.unwrap();
        // Whether the reactor saw the reset before the write or the write fails on it, no byte
        // went out: the request goes on a new connection, once.
        assert_eq!(send(&mut vc, &wt, &target, GET).await.map(|i| i.status).map_err(|e| e.message), Ok(200));
        assert_eq!(seen.load(Ordering::Relaxed), 2, "each request reached the server once");
        assert_eq!(vc.take_opened().count(), 2);
    }
}
