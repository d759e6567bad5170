//! What one exchange (a request and its answer) yields, on HTTP/1.1 and HTTP/2 alike: the
//! answer's facts, the headers kept, and why it failed.

use std::io;
use std::time::Instant;

use stampede_model::ErrorKind;

/// Why an exchange failed, whether the request may have reached the server, and whether the
/// server had started to answer.
#[derive(Debug)]
pub(crate) struct ExchangeError {
    pub kind: ErrorKind,
    pub message: String,
    /// The request may have reached the server: any byte of it was written (HTTP/1.1), it
    /// was handed to the HTTP/2 connection (unless the server said it did not process it), or
    /// the exchange ran out of time. Such a request is never sent again, whatever its method,
    /// since the server may have acted on it. False when the failure came before any byte of
    /// the request went out (name lookup, connect, TLS handshake, a request that could not be
    /// made, a connection the server had closed) or when an HTTP/2 server refused the stream.
    pub sent: bool,
    /// Some response bytes arrived before the failure.
    pub answered: bool,
}

impl ExchangeError {
    /// An I/O error once some of the request went out: while writing the rest, or reading the
    /// answer.
    pub(crate) fn io(e: io::Error, answered: bool) -> Self {
        let kind = classify_io(&e);
        let message = if kind == ErrorKind::Tls { format!("TLS: {e}") } else { e.to_string() };
        ExchangeError { kind, message, sent: true, answered }
    }

    /// An I/O error while writing the request, before any of it went out.
    pub(crate) fn unsent(e: io::Error) -> Self {
        ExchangeError { sent: false, ..ExchangeError::io(e, false) }
    }

    /// An answer that breaks the protocol, after the request was written whole.
    pub(crate) fn protocol(message: impl Into<String>) -> Self {
        ExchangeError { kind: ErrorKind::Protocol, message: message.into(), sent: true, answered: true }
    }
}

/// Maps an I/O error to an error kind. A TLS error after the handshake (an alert from the
/// server, e.g. a refused client certificate under TLS 1.3) is of kind `tls`.
pub(crate) fn classify_io(e: &io::Error) -> ErrorKind {
    use io::ErrorKind as K;
    if e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
        return ErrorKind::Tls;
    }
    match e.kind() {
        K::ConnectionRefused | K::HostUnreachable | K::NetworkUnreachable | K::AddrNotAvailable => ErrorKind::Connect,
        K::TimedOut | K::WouldBlock => ErrorKind::Timeout,
        K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof | K::NotConnected => {
            ErrorKind::Reset
        }
        _ => ErrorKind::Io,
    }
}

/// A response as far as the engine needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResponseInfo {
    pub status: u16,
    /// Bytes read from the socket for this response (head, framing and body).
    pub bytes_received: u64,
    /// Decoded body length.
    pub body_len: u64,
    /// The connection may carry another request.
    pub keep_alive: bool,
    /// When the first byte of the answer arrived; `None` when the whole answer came in the
    /// first read, so its first byte came at (about) the end of the exchange.
    pub first_byte: Option<Instant>,
}

/// Which response headers an exchange keeps.
#[derive(Debug, Default)]
pub(crate) struct Headers {
    /// Keep every header; otherwise only `set-cookie` and `location` (for the cookie jar and
    /// redirects), which most responses lack, so the common case stores nothing.
    pub all: bool,
    /// Keep `grpc-*` headers and trailers too (a gRPC call's status).
    pub grpc: bool,
    /// Kept headers of the last response: lowercase name, value.
    pub list: Vec<(String, String)>,
}

impl Headers {
    /// The first header called `name` (lowercase).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.list.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub(crate) fn keep(&mut self, name: &str, value: &[u8]) {
        let wanted = self.all
            || name.eq_ignore_ascii_case("set-cookie")
            || name.eq_ignore_ascii_case("location")
            || (self.grpc && name.len() > 5 && name[..5].eq_ignore_ascii_case("grpc-"));
        if wanted {
            self.list.push((name.to_ascii_lowercase(), String::from_utf8_lossy(value).into_owned()));
        }
    }
}
