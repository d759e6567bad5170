//! The small HTTP/1.1 server behind `/metrics`, the operator's probes and the live dashboard:
//! one accept loop for all. An accept that fails (out of file descriptors, say) is waited out with a growing
//! pause, never retried at once: a failing accept returns immediately, so retrying at once
//! would spin a core until the cause goes away.

#![warn(missing_docs)]

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

/// The first pause after a failed accept; it doubles while accepts keep failing.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
/// The longest pause between failed accepts.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Something that accepts connections: a TCP listener (tests script their own).
pub trait Accept: Send + 'static {
    /// An accepted connection, served as HTTP/1.1.
    type Conn: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// Waits for the next connection. After an error, [`serve_http`] pauses (longer each time)
    /// before it calls again.
    fn accept(&mut self) -> impl Future<Output = io::Result<Self::Conn>> + Send;
}

impl Accept for tokio::net::TcpListener {
    type Conn = tokio::net::TcpStream;

    async fn accept(&mut self) -> io::Result<Self::Conn> {
        tokio::net::TcpListener::accept(self).await.map(|(stream, _)| stream)
    }
}

/// A response body: whole, or streamed (server-sent events).
pub type Body = BoxBody<Bytes, Infallible>;

/// A whole response body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

/// A body streamed from `chunks` (each sent as it comes, e.g. one server-sent event); it ends
/// when the sender side is dropped.
pub fn streamed(chunks: tokio::sync::mpsc::Receiver<Bytes>) -> Body {
    let stream = futures::stream::unfold(chunks, |mut rx| async move {
        let chunk = rx.recv().await?;
        Some((Ok::<_, Infallible>(Frame::data(chunk)), rx))
    });
    StreamBody::new(stream).boxed()
}

/// Serves HTTP/1.1 on `listener` until `stop` resolves, answering each request with
/// `respond(path)`. Each connection is served on its own task.
pub async fn serve_http<L, F>(listener: L, respond: F, stop: impl Future<Output = ()>)
where
    L: Accept,
    F: Fn(&str) -> Response<Full<Bytes>> + Clone + Send + Sync + 'static,
{
    let handle = move |req: Request<Incoming>| {
        let response = respond(req.uri().path()).map(BodyExt::boxed);
        async move { response }
    };
    serve(listener, handle, stop).await;
}

/// Serves HTTP/1.1 on `listener` until `stop` resolves, answering each request (its method,
/// head and body) with `handle`. Each connection is served on its own task.
pub async fn serve<L, F, R>(mut listener: L, handle: F, stop: impl Future<Output = ()>)
where
    L: Accept,
    F: Fn(Request<Incoming>) -> R + Clone + Send + Sync + 'static,
    R: Future<Output = Response<Body>> + Send + 'static,
{
    let mut stop = std::pin::pin!(stop);
    let mut backoff = ACCEPT_BACKOFF;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => return,
        };
        let conn = match accepted {
            Ok(conn) => {
                backoff = ACCEPT_BACKOFF;
                conn
            }
            Err(e) => {
                tracing::warn!("cannot accept a connection: {e}; trying again in {} ms", backoff.as_millis());
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = &mut stop => return,
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let answer = handle(req);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(conn), service).await;
        });
    }
}

/// A server on a thread of its own, with its own single-threaded runtime (beside a run's
/// workers, which must not host it); it stops, and its thread is joined, when dropped.
#[derive(Debug)]
pub struct Background {
    addr: std::net::SocketAddr,
    shutdown: tokio::sync::watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    /// Binds `addr` (port 0 picks one) and serves each request with `handle` on a thread named
    /// `name`.
    pub fn start<F, R>(name: &str, addr: std::net::SocketAddr, handle: F) -> io::Result<Background>
    where
        F: Fn(Request<Incoming>) -> R + Clone + Send + Sync + 'static,
        R: Future<Output = Response<Body>> + Send + 'static,
    {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (shutdown, mut stop) = tokio::sync::watch::channel(false);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let thread = std::thread::Builder::new().name(name.into()).spawn(move || {
            rt.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                let stopped = async move {
                    let _ = stop.changed().await;
                };
                serve(listener, handle, stopped).await;
            })
        })?;
        Ok(Background { addr, shutdown, thread: Some(thread) })
    }

    /// The bound address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, DuplexStream};

    use super::*;

    /// Fails with "too many open files" a few times, then yields one in-memory connection,
    /// then waits forever.
    struct Scripted {
        script: VecDeque<io::Result<DuplexStream>>,
        accepts: Arc<AtomicUsize>,
    }

    impl Accept for Scripted {
        type Conn = DuplexStream;

        async fn accept(&mut self) -> io::Result<DuplexStream> {
            self.accepts.fetch_add(1, Ordering::Relaxed);
            match self.script.pop_front() {
                Some(next) => next,
                None => std::future::pending().await,
            }
        }
    }

    /// On the paused clock of the test runtime: the loop waits 10, 20 and 40 ms after three
    /// failed accepts (a busy loop would take no time at all), then serves the connection.
    #[tokio::test(start_paused = true)]
    async fn failed_accepts_are_waited_out_and_the_next_connection_is_served() {
        let (mut client, server) = tokio::io::duplex(4096);
        let emfile = || Err(io::Error::from_raw_os_error(24));
        let accepts = Arc::new(AtomicUsize::new(0));
        let listener =
            Scripted { script: VecDeque::from([emfile(), emfile(), emfile(), Ok(server)]), accepts: accepts.clone() };
        let t0 = tokio::time::Instant::now();
        let respond = |path: &str| Response::new(Full::new(Bytes::from(format!("you asked for {path}"))));
        tokio::spawn(serve_http(listener, respond, std::future::pending()));

        client.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.ends_with("you asked for /metrics"), "{answer}");
        assert_eq!(accepts.load(Ordering::Relaxed), 5, "three failures, the connection, then a wait");
        assert!(t0.elapsed() >= ACCEPT_BACKOFF * (1 + 2 + 4), "{:?}", t0.elapsed());
    }

    #[tokio::test]
    async fn stop_ends_the_loop() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let respond = |_: &str| Response::new(Full::new(Bytes::new()));
        // A loop that ignored `stop` would never return; the guard turns that hang into a failure.
        tokio::time::timeout(Duration::from_secs(60), serve_http(listener, respond, async {}))
            .await
            .expect("serve_http returns once stop resolves");
    }
}
