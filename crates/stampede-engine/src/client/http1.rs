//! A lean HTTP/1.1 client connection over `httparse`.
//!
//! Measured on this project's benchmark machine (nginx on one core, the generator on the
//! other), hyper's client added 2.5–4 µs of CPU per request over this codec (a `HeaderMap` per
//! response, request cloning, hand-offs between tasks); see `bench/RESULTS.md`. A virtual
//! user here owns one connection (plain TCP or TLS, see [`Io`]) and drives it in its own
//! task: it writes the request bytes (often serialized once for the whole run), parses the
//! response head in place and skips or keeps the body, with no allocation per request.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, Interest, ReadBuf};

use stampede_model::ErrorKind;

use crate::client::connect::Io;
use crate::client::exchange::{ExchangeError, Headers, ResponseInfo};
use crate::client::url::HttpUrl;

/// A connection's read buffer starts this small (most answers' heads and many bodies fit;
/// 15,000 connections hold 7.7 MB of it) …
const INITIAL_BUF: usize = 512;
/// … and doubles, up to this, while reads fill it whole (large bodies: fewer reads).
const GROWN_BUF: usize = 16 * 1024;
const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;

/// One keep-alive HTTP/1.1 connection with its read buffer.
#[derive(Debug)]
pub(crate) struct Connection {
    stream: Io,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    host: String,
    port: u16,
    tls: bool,
    /// Requests sent on this connection so far.
    pub uses: u32,
    /// When the current response's first byte came.
    first_byte: FirstByte,
}

/// When the first byte of the current response arrived. The clock is read only when the
/// response needs a second read: an answer that came whole in its first read has its first byte
/// at (about) the end of the exchange, and most answers to a load test do.
#[derive(Clone, Copy, Debug)]
enum FirstByte {
    /// Nothing read yet.
    Waiting,
    /// The first read brought bytes; no more were needed so far.
    InFirstRead,
    /// More reads were needed: the first byte came at about this instant.
    At(Instant),
}

/// How writing a request ended.
enum Sent {
    /// All of it went out (over TLS, flushed too).
    Whole,
    /// The server's final answer came before all of it went out; writing stopped.
    AnsweredEarly,
    /// The server closed the connection before all of it went out.
    Closed,
    /// Writing (or reading the early answer) failed.
    Failed(io::Error),
}

/// Whether a request was cut short, kept while its answer is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CutShort {
    /// It went out whole.
    No,
    /// The server answered (or closed) before it was all written.
    Answered,
    /// Writing it failed after some of it went out.
    Failed(io::ErrorKind),
}

/// How the response body is delimited.
enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

impl Connection {
    /// An HTTP/1.1 connection over `io`, which goes to `target`.
    pub(crate) fn new(io: Io, target: &HttpUrl) -> Connection {
        Connection {
            tls: io.is_tls(),
            stream: io,
            buf: vec![0; INITIAL_BUF],
            start: 0,
            end: 0,
            host: target.host.clone(),
            port: target.port,
            uses: 0,
            first_byte: FirstByte::Waiting,
        }
    }

    /// Whether this connection goes where `target` does.
    pub(crate) fn serves(&self, target: &HttpUrl) -> bool {
        self.port == target.port && self.tls == target.tls && self.host == target.host
    }

    /// Whether the server closed this idle connection since its last answer (or broke it, or
    /// sent bytes nobody asked for), so that the next request should go on a new one rather
    /// than be written into a connection that is gone.
    ///
    /// It looks at what tokio's reactor last heard of the socket, its cached read readiness
    /// (`try_io` with an operation that does nothing: an atomic load, no system call, no lock,
    /// no waker stored). Only a socket reported readable is read, once, without waiting; a
    /// quiet keep-alive connection is not, so the common case costs no system call. The
    /// answer is as fresh as the reactor's last look at the socket: a close it has not seen
    /// yet shows as a failed write (the request then goes on a new connection) or, once the
    /// request is written, as an error.
    pub(crate) fn closed_while_idle(&mut self) -> bool {
        // TLS reads through its TCP socket, whose readiness says whether records came in.
        let tcp = match &self.stream {
            Io::Tcp(s) => s,
            Io::Tls(s) => s.get_ref().0,
        };
        if tcp.try_io(Interest::READABLE, || Ok(())).is_err() {
            return false; // not readable (nor closed) as far as the reactor knows
        }
        // Readable: an end of stream, an error, or bytes before any request. Over TLS the
        // records may also be ones rustls takes in itself (a session ticket, a key update):
        // then the read finds no data (pending) and the connection is still good. Any answer,
        // no byte (the end), a byte or an error, means it is not. The no-op waker stored by a
        // pending read is replaced by the task's own at the next read.
        let mut cx = Context::from_waker(Waker::noop());
        let mut byte = [0u8; 1];
        let mut read = ReadBuf::new(&mut byte);
        Pin::new(&mut self.stream).poll_read(&mut cx, &mut read).is_ready()
    }

    /// Waits until tokio's reactor reports the socket readable (tests: a close or a reset has
    /// been seen).
    #[cfg(test)]
    pub(crate) async fn readable(&self) {
        let tcp = match &self.stream {
            Io::Tcp(s) => s,
            Io::Tls(s) => s.get_ref().0,
        };
        tcp.readable().await.unwrap();
    }

    /// Sends one request and reads its whole response. The body is appended to `body`
    /// when given, and skipped otherwise.
    ///
    /// A request is sent once. A failure before any of its bytes went out (the server had
    /// closed the idle connection) leaves it unsent (`sent: false`), and it may go again on a
    /// new connection; once a byte went out, the server may have taken it for a request. A
    /// server may answer before it has read the whole request (`413` after the head of a large
    /// upload) and then stop reading or close: a write that stalls looks whether an answer
    /// came, and stops once a whole final head is in, and a write that fails reads what the
    /// server had already sent. Either way the answer is reported as it is, and the connection,
    /// whose request was cut short, is not used again.
    pub(crate) async fn exchange(
        &mut self,
        request: &[u8],
        head_request: bool,
        mut body: Option<&mut Vec<u8>>,
        mut headers: Option<&mut Headers>,
    ) -> Result<ResponseInfo, ExchangeError> {
        self.uses += 1;
        // Bytes left over from an earlier response mean the stream is out of step: the server's
        // error, reported (the request is not written).
        if self.start != self.end {
            return Err(ExchangeError {
                sent: false,
                ..ExchangeError::protocol("unexpected bytes before the response")
            });
        }
        self.start = 0;
        self.end = 0;
        self.first_byte = FirstByte::Waiting;
        // Writing, in a block of its own, and `request` not used after it: its state then stays
        // out of the reading states, the largest of every VU's task (see `a_vu_task_stays_small`).
        let cut_short = {
            let mut written = 0;
            let sent = std::future::poll_fn(|cx| self.poll_send(cx, request, &mut written)).await;
            // What came meanwhile went into the buffer, empty until then.
            let answered = self.end > 0;
            let cut_short = match sent {
                Sent::Whole => CutShort::No,
                Sent::AnsweredEarly | Sent::Closed if written > 0 => CutShort::Answered,
                Sent::Failed(e) if written > 0 => CutShort::Failed(e.kind()),
                Sent::Failed(e) => return Err(ExchangeError { answered, ..ExchangeError::unsent(e) }),
                Sent::AnsweredEarly | Sent::Closed => {
                    return Err(ExchangeError {
                        kind: ErrorKind::Reset,
                        message: "connection closed before the request was written".into(),
                        sent: false,
                        answered,
                    });
                }
            };
            if cut_short != CutShort::No {
                // Part of the request went out: whatever the server answered is its answer.
                tracing::debug!(written, ?cut_short, "request cut short; reading the answer");
            }
            cut_short
        };
        let mut received = self.end as u64;
        let answer = 'answer: loop {
            if let Some(h) = headers.as_deref_mut() {
                h.list.clear();
            }
            let (status, framing, keep_alive) =
                match self.read_head(&mut received, head_request, headers.as_deref_mut()).await {
                    Ok(head) => head,
                    Err(e) => break 'answer Err(e),
                };
            if (100..200).contains(&status) && status != 101 {
                continue; // informational: the real answer follows
            }
            let body_len = match framing {
                Framing::None => Ok(0),
                Framing::Length(n) => self.read_exact_body(n, &mut received, body.as_deref_mut()).await,
                Framing::Chunked => self.read_chunked(&mut received, body.as_deref_mut()).await,
                Framing::UntilClose => self.read_to_close(&mut received, body.as_deref_mut()).await,
            };
            let body_len = match body_len {
                Ok(n) => n,
                Err(e) => break 'answer Err(e),
            };
            // A connection whose request was cut short is out of step: not used again.
            let keep_alive = keep_alive && !matches!(framing, Framing::UntilClose) && cut_short == CutShort::No;
            let first_byte = match self.first_byte {
                FirstByte::At(t) => Some(t),
                FirstByte::Waiting | FirstByte::InFirstRead => None,
            };
            break Ok(ResponseInfo { status, bytes_received: received, body_len, keep_alive, first_byte });
        };
        match (answer, cut_short) {
            // No answer came to a request whose write failed: the write's error.
            (Err(e), CutShort::Failed(kind)) if !e.answered => Err(ExchangeError::io(kind.into(), false)),
            (answer, _) => answer,
        }
    }

    /// Writes what is left of `request` (and flushes it over TLS, which may hold written bytes
    /// back) until it is all out, the writing fails, or, while the socket takes no more, the
    /// server's final answer has come (see [`Connection::poll_early_answer`]). `written` counts
    /// the bytes the stream took.
    ///
    /// Over plain TCP a write is one system call, which takes bytes or fails: `written` is
    /// exactly what the socket accepted. Over TLS it counts what rustls took; rustls puts a
    /// request's records out in one vectored write, so a write that fails before any was taken
    /// sent nothing (but for a reset that comes between two writes of one call, as the send
    /// buffer fills).
    fn poll_send(&mut self, cx: &mut Context<'_>, request: &[u8], written: &mut usize) -> Poll<Sent> {
        loop {
            if *written < request.len() {
                match Pin::new(&mut self.stream).poll_write(cx, &request[*written..]) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Sent::Failed(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(n)) => *written += n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Sent::Failed(e)),
                    Poll::Pending => break,
                }
            } else if self.tls {
                // Flushed again at the next poll when pending: a flush of nothing is cheap.
                match Pin::new(&mut self.stream).poll_flush(cx) {
                    Poll::Ready(Ok(())) => return Poll::Ready(Sent::Whole),
                    Poll::Ready(Err(e)) => return Poll::Ready(Sent::Failed(e)),
                    Poll::Pending => break,
                }
            } else {
                return Poll::Ready(Sent::Whole);
            }
        }
        // The socket takes no more for now: the server may have answered already and stopped
        // reading, and then the write would wait for ever.
        self.poll_early_answer(cx)
    }

    /// Reads what the server sent while the request is not all written: ready once a whole
    /// final response head is in the buffer (or bytes that cannot start one, which
    /// [`Connection::read_head`] then reports), or at the end of the stream or an error.
    /// Pending otherwise, with the task woken when more comes.
    fn poll_early_answer(&mut self, cx: &mut Context<'_>) -> Poll<Sent> {
        loop {
            if self.end > self.start && self.final_head_buffered() {
                return Poll::Ready(Sent::AnsweredEarly);
            }
            if self.end == self.buf.len() {
                let new_len = self.buf.len() * 2;
                self.buf.resize(new_len, 0);
            }
            let mut read = ReadBuf::new(&mut self.buf[self.end..]);
            match Pin::new(&mut self.stream).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) => {
                    let n = read.filled().len();
                    if n == 0 {
                        return Poll::Ready(Sent::Closed);
                    }
                    if matches!(self.first_byte, FirstByte::Waiting) {
                        self.first_byte = FirstByte::At(Instant::now());
                    }
                    self.end += n;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Sent::Failed(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Whether the buffer holds a whole final response head (after any informational ones),
    /// or bytes that are no response head (invalid, or too large), for [`Connection::read_head`]
    /// to report.
    fn final_head_buffered(&self) -> bool {
        let mut at = self.start;
        loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut resp = httparse::Response::new(&mut headers);
            match resp.parse(&self.buf[at..self.end]) {
                Ok(httparse::Status::Complete(len)) => match resp.code {
                    Some(code) if (100..200).contains(&code) && code != 101 => at += len,
                    _ => return true,
                },
                Ok(httparse::Status::Partial) => return self.end - at >= MAX_HEAD,
                Err(_) => return true,
            }
        }
    }

    /// Reads more bytes into the buffer; `Ok(0)` at end of stream.
    async fn fill(&mut self, received: &mut u64) -> io::Result<usize> {
        if self.start > 0 && self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                let new_len = self.buf.len() * 2;
                self.buf.resize(new_len, 0);
            }
        }
        if let FirstByte::InFirstRead = self.first_byte {
            self.first_byte = FirstByte::At(Instant::now());
        }
        let room = self.buf.len() - self.end;
        let n = self.stream.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        *received += n as u64;
        if n > 0 && matches!(self.first_byte, FirstByte::Waiting) {
            self.first_byte = FirstByte::InFirstRead;
        }
        if n == room && self.buf.len() < GROWN_BUF {
            // The read filled all the room: more is likely waiting.
            self.buf.resize(self.buf.len() * 2, 0);
        }
        Ok(n)
    }

    async fn read_head(
        &mut self,
        received: &mut u64,
        head_request: bool,
        mut keep: Option<&mut Headers>,
    ) -> Result<(u16, Framing, bool), ExchangeError> {
        loop {
            if self.end > self.start {
                let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut resp = httparse::Response::new(&mut headers);
                match resp.parse(&self.buf[self.start..self.end]) {
                    Ok(httparse::Status::Complete(len)) => {
                        let status = resp.code.unwrap_or(0);
                        let http10 = resp.version == Some(0);
                        let mut length: Option<u64> = None;
                        let mut chunked = false;
                        let mut close = http10;
                        for h in resp.headers.iter() {
                            if let Some(k) = keep.as_deref_mut() {
                                k.keep(h.name, h.value);
                            }
                            // By length first: most headers are none of these three.
                            match h.name.len() {
                                14 if h.name.eq_ignore_ascii_case("content-length") => match parse_length(h.value) {
                                    Some(v) if length.is_none_or(|l| l == v) => length = Some(v),
                                    _ => return Err(ExchangeError::protocol("invalid content-length")),
                                },
                                17 if h.name.eq_ignore_ascii_case("transfer-encoding") => {
                                    chunked = has_token(h.value, b"chunked");
                                }
                                10 if h.name.eq_ignore_ascii_case("connection") => {
                                    if h.value.eq_ignore_ascii_case(b"keep-alive") {
                                        close = false;
                                    } else if has_token(h.value, b"close") {
                                        close = true;
                                    } else if has_token(h.value, b"keep-alive") {
                                        close = false;
                                    }
                                }
                                _ => {}
                            }
                        }
                        self.start += len;
                        let framing = if head_request || status == 204 || status == 304 || (100..200).contains(&status)
                        {
                            Framing::None
                        } else if chunked {
                            Framing::Chunked
                        } else if let Some(n) = length {
                            Framing::Length(n)
                        } else {
                            Framing::UntilClose
                        };
                        return Ok((status, framing, !close));
                    }
                    Ok(httparse::Status::Partial) => {
                        if self.end - self.start >= MAX_HEAD {
                            return Err(ExchangeError::protocol("response head larger than 64 KiB"));
                        }
                    }
                    Err(e) => return Err(ExchangeError::protocol(format!("invalid response: {e}"))),
                }
            }
            let answered = *received > 0;
            match self.fill(received).await {
                Ok(0) => {
                    return Err(ExchangeError {
                        kind: ErrorKind::Reset,
                        message: "connection closed before the response was complete".into(),
                        sent: true,
                        answered,
                    });
                }
                Ok(_) => {}
                Err(e) => return Err(ExchangeError::io(e, answered)),
            }
        }
    }

    /// Takes up to `want` buffered body bytes.
    fn take(&mut self, want: u64, body: &mut Option<&mut Vec<u8>>) -> u64 {
        let n = (self.end - self.start).min(usize::try_from(want).unwrap_or(usize::MAX));
        if let Some(b) = body.as_deref_mut() {
            b.extend_from_slice(&self.buf[self.start..self.start + n]);
        }
        self.start += n;
        n as u64
    }

    async fn read_exact_body(
        &mut self,
        len: u64,
        received: &mut u64,
        mut body: Option<&mut Vec<u8>>,
    ) -> Result<u64, ExchangeError> {
        let mut left = len;
        loop {
            left -= self.take(left, &mut body);
            if left == 0 {
                return Ok(len);
            }
            match self.fill(received).await {
                Ok(0) => {
                    return Err(ExchangeError {
                        kind: ErrorKind::Reset,
                        message: "connection closed in the middle of the body".into(),
                        sent: true,
                        answered: true,
                    });
                }
                Ok(_) => {}
                Err(e) => return Err(ExchangeError::io(e, true)),
            }
        }
    }

    async fn read_to_close(
        &mut self,
        received: &mut u64,
        mut body: Option<&mut Vec<u8>>,
    ) -> Result<u64, ExchangeError> {
        let mut total = 0;
        loop {
            total += self.take(u64::MAX, &mut body);
            match self.fill(received).await {
                Ok(0) => return Ok(total),
                Ok(_) => {}
                Err(e) => return Err(ExchangeError::io(e, true)),
            }
        }
    }

    async fn read_chunked(&mut self, received: &mut u64, mut body: Option<&mut Vec<u8>>) -> Result<u64, ExchangeError> {
        let mut total = 0u64;
        loop {
            // Chunk size line.
            let size = loop {
                match httparse::parse_chunk_size(&self.buf[self.start..self.end]) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        self.start += used;
                        break size;
                    }
                    Ok(httparse::Status::Partial) => self.fill_or_reset(received).await?,
                    Err(_) => return Err(ExchangeError::protocol("invalid chunk size")),
                }
            };
            if size == 0 {
                // Trailers end with an empty line.
                loop {
                    let window = &self.buf[self.start..self.end];
                    if let Some(pos) = memchr::memmem::find(window, b"\r\n") {
                        self.start += pos + 2;
                        if pos == 0 {
                            return Ok(total);
                        }
                    } else {
                        self.fill_or_reset(received).await?;
                    }
                }
            }
            let mut left = size;
            while left > 0 {
                let n = self.take(left, &mut body);
                left -= n;
                total += n;
                if left > 0 {
                    self.fill_or_reset(received).await?;
                }
            }
            while self.end - self.start < 2 {
                self.fill_or_reset(received).await?;
            }
            if &self.buf[self.start..self.start + 2] != b"\r\n" {
                return Err(ExchangeError::protocol("chunk not followed by CRLF"));
            }
            self.start += 2;
        }
    }

    async fn fill_or_reset(&mut self, received: &mut u64) -> Result<(), ExchangeError> {
        match self.fill(received).await {
            Ok(0) => Err(ExchangeError {
                kind: ErrorKind::Reset,
                message: "connection closed in the middle of a chunked body".into(),
                sent: true,
                answered: true,
            }),
            Ok(_) => Ok(()),
            Err(e) => Err(ExchangeError::io(e, true)),
        }
    }
}

/// A `Content-Length` value: decimal digits, optionally with surrounding whitespace.
fn parse_length(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0')))
}

fn has_token(value: &[u8], token: &[u8]) -> bool {
    value.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::*;

    /// Opens a plain TCP connection to `target` within `limit`.
    async fn connect(target: &HttpUrl, limit: Duration) -> Result<Connection, ExchangeError> {
        let (io, _) =
            crate::client::connect::open(target, limit, None, &crate::client::source::SourceAddrs::default()).await?;
        Ok(Connection::new(io, target))
    }

    /// Serves canned byte responses, one per request read, then closes.
    async fn canned(responses: Vec<&'static [u8]>) -> HttpUrl {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            for r in responses {
                let _ = s.read(&mut buf).await;
                s.write_all(r).await.unwrap();
            }
        });
        HttpUrl::parse(&format!("http://127.0.0.1:{port}/")).unwrap()
    }

    const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";

    #[tokio::test]
    async fn reads_length_chunked_and_close_delimited_bodies() {
        let target = canned(vec![
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: v\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.0 200 OK\r\n\r\nuntil close",
        ])
        .await;
        let mut c = connect(&target, Duration::from_secs(1)).await.unwrap();
        let mut body = Vec::new();
        let r = c.exchange(GET, false, Some(&mut body), None).await.unwrap();
        assert_eq!((r.status, r.body_len, r.keep_alive), (200, 5, true));
        assert_eq!(body, b"hello");
        body.clear();
        let r = c.exchange(GET, false, Some(&mut body), None).await.unwrap();
        assert_eq!((r.status, r.body_len, r.keep_alive), (201, 5, true));
        assert_eq!(body, b"abcde");
        let r = c.exchange(GET, false, None, None).await.unwrap();
        assert_eq!((r.status, r.body_len), (204, 0));
        body.clear();
        let r = c.exchange(GET, false, Some(&mut body), None).await.unwrap();
        assert_eq!((r.status, r.keep_alive), (200, false));
        assert_eq!(body, b"until close");
    }

    #[tokio::test]
    async fn garbage_is_a_protocol_error_and_early_close_a_reset() {
        let target = canned(vec![b"SMTP ready\r\n\r\n"]).await;
        let mut c = connect(&target, Duration::from_secs(1)).await.unwrap();
        let e = c.exchange(GET, false, None, None).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Protocol);

        let target = canned(vec![b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc"]).await;
        let mut c = connect(&target, Duration::from_secs(1)).await.unwrap();
        let e = c.exchange(GET, false, None, None).await.unwrap_err();
        assert_eq!((e.kind, e.answered), (ErrorKind::Reset, true));
    }

    #[tokio::test]
    async fn a_head_larger_than_the_buffer_and_a_large_body_are_read_whole() {
        // A 3 KB head (beyond the 512-byte start) and a 100 KB body (reads fill the buffer, which
        // grows to its cap), then a small answer on the same connection.
        let head = format!("HTTP/1.1 200 OK\r\nx-big: {}\r\ncontent-length: 100000\r\n\r\n", "h".repeat(3000));
        let first: &'static [u8] = Box::leak(format!("{head}{}", "b".repeat(100_000)).into_bytes().into_boxed_slice());
        let target = canned(vec![first, b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"]).await;
        let mut c = connect(&target, Duration::from_secs(1)).await.unwrap();
        assert_eq!(c.buf.len(), INITIAL_BUF);
        let mut body = Vec::new();
        let mut headers = Headers { all: true, ..Headers::default() };
        let r = c.exchange(GET, false, Some(&mut body), Some(&mut headers)).await.unwrap();
        assert_eq!((r.status, r.body_len, body.len()), (200, 100_000, 100_000));
        assert!(body.iter().all(|&b| b == b'b'));
        assert_eq!(headers.get("x-big").map(str::len), Some(3000));
        assert_eq!(c.buf.len(), GROWN_BUF, "reads that fill the buffer grow it to the cap");
        body.clear();
        let r = c.exchange(GET, false, Some(&mut body), None).await.unwrap();
        assert_eq!((r.status, body.as_slice()), (200, &b"ok"[..]));
    }

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

    #[tokio::test]
    async fn an_idle_connection_is_seen_closed_once_the_server_closed_it() {
        // Two answers, then the server closes the connection.
        let target = canned(vec![OK, OK]).await;
        let mut c = connect(&target, Duration::from_secs(1)).await.unwrap();
        c.exchange(GET, false, None, None).await.unwrap();
        assert!(!c.closed_while_idle(), "the server waits for the next request");
        c.exchange(GET, false, None, None).await.unwrap();
        c.readable().await;
        assert!(c.closed_while_idle());
    }

    #[tokio::test]
    async fn bytes_on_an_idle_connection_make_it_unusable() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (answered, answered_rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            s.write_all(OK).await.unwrap();
            let _ = answered_rx.await;
            s.write_all(b"HTTP/1.1 408 Request Timeout\r\n\r\n").await.unwrap();
            let _ = s.read(&mut buf).await; // until the client goes
        });
        let target = HttpUrl::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        let mut c = connect(&target, Duration::from_secs(1)).await.unwrap();
        c.exchange(GET, false, None, None).await.unwrap();
        answered.send(()).unwrap();
        c.readable().await;
        assert!(c.closed_while_idle());
    }

    #[tokio::test]
    async fn a_request_that_cannot_be_written_is_not_sent_and_one_unanswered_is() {
        // The server answers once, then resets the connection (SO_LINGER 0) when told.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (answered, answered_rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            s.write_all(OK).await.unwrap();
            let _ = answered_rx.await;
            s.set_zero_linger().unwrap();
        });
        let target = HttpUrl::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        let mut c = connect(&target, Duration::from_secs(1)).await.unwrap();
        c.exchange(GET, false, None, None).await.unwrap();
        answered.send(()).unwrap();
        c.readable().await;
        let e = c.exchange(GET, false, None, None).await.unwrap_err();
        assert_eq!((e.kind, e.sent, e.answered), (ErrorKind::Reset, false, false), "{e:?}");

        // Read whole, then closed without an answer: sent.
        let target = canned(vec![OK]).await;
        let mut c = connect(&target, Duration::from_secs(1)).await.unwrap();
        c.exchange(GET, false, None, None).await.unwrap();
        let e = c.exchange(GET, false, None, None).await.unwrap_err();
        assert_eq!((e.kind, e.sent, e.answered), (ErrorKind::Reset, true, false), "{e:?}");
    }

    #[tokio::test]
    async fn refused_port_is_a_connect_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let target = HttpUrl::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        let e = connect(&target, Duration::from_secs(1)).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Connect);
    }
}
