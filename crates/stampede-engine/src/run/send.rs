//! Sending one request: the exchange over the VU's connection, with redirects followed as
//! browsers do.

use crate::client::exchange::ExchangeError;
use crate::client::exchange::ResponseInfo;
use crate::client::transport;
use crate::client::transport::WorkerTransport;
use crate::client::url::HttpUrl;
use crate::compile::expr::Gen;
use crate::compile::request::RequestPlan;
use crate::compile::template::take_render_error;
use stampede_model::ErrorKind;
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use super::outcome::SAMPLE_BYTES;
use super::vu::Vu;

pub(super) const REDIRECTS: [u16; 5] = [301, 302, 303, 307, 308];

/// The request a redirect asks for.
#[derive(Debug, PartialEq)]
pub(super) struct Hop {
    pub(super) url: HttpUrl,
    /// The method becomes GET.
    pub(super) to_get: bool,
    /// The body goes again (307, 308, and 301/302 after anything but a POST).
    pub(super) keep_body: bool,
    /// Same scheme, host and port: credentials and cookies set by hand may go along.
    pub(super) same_origin: bool,
}

/// Where answer `status` with header `location` leads from `from`, requested with `method`:
/// 303, and 301/302 after a POST, continue with GET and no body, as browsers do.
pub(super) fn redirect(status: u16, location: &str, from: &HttpUrl, method: &str) -> Result<Hop, String> {
    let scheme = if from.tls { "https" } else { "http" };
    let base = format!("{scheme}://{}{}", from.authority, from.path_and_query);
    let cannot = |e: &dyn std::fmt::Display| format!("cannot follow the redirect to `{location}`: {e}");
    let joined = url::Url::parse(&base).and_then(|b| b.join(location)).map_err(|e| cannot(&e))?;
    let url = HttpUrl::parse(joined.as_str()).map_err(|e| cannot(&e))?;
    let keep_body = matches!(status, 307 | 308) || (status != 303 && method != "POST");
    let same_origin = url.host == from.host && url.port == from.port && url.tls == from.tls;
    Ok(Hop { url, to_get: !keep_body && method != "HEAD", keep_body, same_origin })
}

/// Sends one request on the VU's connection and reads the answer, following redirects;
/// returns the final answer with the bytes sent and received over the whole chain. Cookies
/// from the VU's jar go with each request, and cookies set by each answer go into it.
pub(super) async fn send(
    vu: &mut Vu,
    req: &RequestPlan,
    keep_body: bool,
    wt: &WorkerTransport,
    started: Instant,
) -> Result<(ResponseInfo, u64, u64), (ExchangeError, u64)> {
    let Vu { conn, slots, request_buf, extra_buf, body, headers, jar, sent_head, timer, generator, .. } = vu;
    let (first_target, first) = match first_request(req, slots, generator, request_buf) {
        Ok(first) => first,
        Err(e) => {
            sent_head.clear();
            return Err((e, 0));
        }
    };
    let user_cookie = req.headers.iter().any(|(n, _)| n == "cookie");
    let mut sent = 0u64;
    let mut received = 0u64;
    let mut first_byte = None;
    let chain = async {
        let mut target = first_target;
        let mut method: Cow<'_, str> = Cow::Borrowed(&req.method);
        let mut hops_left = req.redirects;
        let mut redirected = false;
        loop {
            let cookie =
                jar.as_ref().filter(|_| !user_cookie).and_then(|j| j.header_for(&target.host, &target.path_and_query));
            let bytes = hop_bytes(first, cookie.as_deref(), redirected, extra_buf);
            if !redirected {
                sent_head.clear();
                sent_head.extend_from_slice(&bytes[..bytes.len().min(SAMPLE_BYTES + 1)]);
            }
            let head = method == "HEAD";
            // Counted as sent unless it never went out (a refused connect sent nothing).
            sent += bytes.len() as u64;
            let info = transport::exchange(
                conn,
                wt,
                &target,
                bytes,
                head,
                keep_body.then_some(&mut *body),
                &mut *headers,
                req.connect_timeout,
            )
            .await
            .inspect_err(|e| {
                if !e.sent {
                    // This hop's bytes, found again as `bytes` was chosen: a length kept
                    // across the exchange would weigh on every VU's task.
                    let hop = if cookie.is_none() && !redirected { first.len() } else { extra_buf.len() };
                    sent -= hop as u64;
                }
            })?;
            received += info.bytes_received;
            // Time to first byte counts to the first answer of a redirect chain.
            first_byte = first_byte.or(info.first_byte);
            if let Some(j) = jar.as_mut() {
                for (_, v) in headers.list.iter().filter(|(n, _)| n == "set-cookie") {
                    j.store(&target.host, &target.path_and_query, v);
                }
            }
            let location = headers.get("location").filter(|_| REDIRECTS.contains(&info.status) && hops_left > 0);
            let Some(location) = location else { return Ok(ResponseInfo { first_byte, ..info }) };
            // An answer that came in one read had its first byte about now.
            first_byte = first_byte.or_else(|| Some(Instant::now()));
            let hop = redirect(info.status, location, &target, &method).map_err(|message| ExchangeError {
                kind: ErrorKind::Protocol,
                message,
                sent: true,
                answered: true,
            })?;
            if hop.to_get {
                method = Cow::Borrowed("GET");
            }
            render_hop(req, &hop, &method, slots, generator, extra_buf)?;
            target = Cow::Owned(hop.url);
            hops_left -= 1;
            redirected = true;
            body.clear();
        }
    };
    let deadline = tokio::time::Instant::from_std(started + req.timeout);
    let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
    // The timer may stay set for an earlier deadline (it fires early, and is set again, see
    // `WithDeadline`), but never for a later one, nor spent.
    if timer.is_elapsed() || timer.deadline() > deadline {
        timer.as_mut().reset(deadline);
    }
    let outcome = {
        let chain = std::pin::pin!(chain);
        WithDeadline { inner: chain, timer: timer.as_mut(), deadline }.await
    };
    match outcome {
        Some(Ok(info)) => Ok((info, sent, received)),
        Some(Err(e)) => Err((e, sent)),
        None => {
            conn.close();
            let message = format!("no complete answer within {:?}", req.timeout);
            Err((ExchangeError { kind: ErrorKind::Timeout, message, sent: true, answered: false }, sent))
        }
    }
}

/// The first request's target and bytes: the plan's, when made only of constants; else
/// rendered into the VU's request buffer. A template that cannot render is a protocol error.
fn first_request<'r>(
    req: &'r RequestPlan,
    slots: &[String],
    generator: &mut Gen,
    request_buf: &'r mut Vec<u8>,
) -> Result<(Cow<'r, HttpUrl>, &'r [u8]), ExchangeError> {
    match &req.fixed {
        Some(fixed) => Ok((Cow::Borrowed(&fixed.target), &fixed.bytes)),
        None => {
            request_buf.clear();
            match generator.lend(|| req.render(slots, request_buf)) {
                Ok(t) => Ok((Cow::Owned(t), request_buf.as_slice())),
                Err(e) => {
                    let message = e.to_string();
                    Err(ExchangeError { kind: ErrorKind::Protocol, message, sent: false, answered: false })
                }
            }
        }
    }
}

/// The bytes of one hop: the request itself (the first's, or a redirect's in `extra_buf`), or
/// with the jar's `cookie` spliced in, into the VU's spare buffer (no allocation per request
/// once it has grown).
fn hop_bytes<'b>(first: &'b [u8], cookie: Option<&str>, redirected: bool, extra_buf: &'b mut Vec<u8>) -> &'b [u8] {
    match (cookie, redirected) {
        (Some(c), false) => {
            crate::client::cookies::splice_header(first, c, extra_buf);
            extra_buf.as_slice()
        }
        (Some(c), true) => {
            let plain = std::mem::take(extra_buf);
            crate::client::cookies::splice_header(&plain, c, extra_buf);
            extra_buf.as_slice()
        }
        (None, false) => first,
        (None, true) => extra_buf.as_slice(),
    }
}

/// Writes the request `hop` asks for into `extra_buf`, with `method` (GET when the redirect
/// turned it so) and the body again when the redirect keeps it.
fn render_hop(
    req: &RequestPlan,
    hop: &Hop,
    method: &str,
    slots: &[String],
    generator: &mut Gen,
    extra_buf: &mut Vec<u8>,
) -> Result<(), ExchangeError> {
    let body_bytes = hop.keep_body.then(|| {
        let mut b = Vec::new();
        if let Some(bp) = &req.body {
            generator.lend(|| bp.render_into(slots, &mut b));
        }
        b
    });
    extra_buf.clear();
    let resent = body_bytes.as_deref().filter(|b| !b.is_empty());
    generator.lend(|| req.render_redirect(method, &hop.url, hop.same_origin, slots, resent, extra_buf));
    match take_render_error() {
        Some(message) => {
            let message = format!("expression {message}");
            Err(ExchangeError { kind: ErrorKind::Protocol, message, sent: true, answered: true })
        }
        None => Ok(()),
    }
}

/// A request's timeout without a timer per request: `timer` is the VU's, kept from request
/// to request. Registering a timer and removing it again for every request was a tenth of the
/// user-space CPU per request. Instead the VU's timer is only set when it is spent or set later
/// than this deadline: with one timeout for every request, once per timeout period. A timer
/// that fires before `deadline` (set for an earlier request) is set to `deadline` then.
/// `None` when the deadline passed first.
pub(super) struct WithDeadline<'a, F> {
    pub(super) inner: Pin<&'a mut F>,
    pub(super) timer: Pin<&'a mut tokio::time::Sleep>,
    pub(super) deadline: tokio::time::Instant,
}

impl<F: Future> Future for WithDeadline<'_, F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        if let Poll::Ready(out) = self.inner.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        let deadline = self.deadline;
        loop {
            match self.timer.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) if self.timer.deadline() >= deadline => return Poll::Ready(None),
                Poll::Ready(()) => self.timer.as_mut().reset(deadline),
            }
        }
    }
}

#[cfg(test)]
mod redirects {
    use super::*;

    #[test]
    fn a_redirect_keeps_or_drops_the_method_and_body_as_browsers_do() {
        let from = HttpUrl::parse("http://127.0.0.1:8080/a/b?x=1").unwrap();
        let hop = redirect(302, "c", &from, "GET").unwrap();
        assert_eq!(hop.url.path_and_query, "/a/c");
        assert!(!hop.to_get && hop.keep_body && hop.same_origin);
        let hop = redirect(303, "/d", &from, "POST").unwrap();
        assert!(hop.to_get && !hop.keep_body);
        let hop = redirect(302, "/d", &from, "POST").unwrap();
        assert!(hop.to_get && !hop.keep_body, "302 after a POST continues with GET");
        let hop = redirect(307, "https://127.0.0.1:8443/e", &from, "PURGE").unwrap();
        assert!(!hop.to_get && hop.keep_body && !hop.same_origin);
        let hop = redirect(303, "/f", &from, "HEAD").unwrap();
        assert!(!hop.to_get, "HEAD stays HEAD");
        let err = redirect(301, "ftp://x/", &from, "GET").unwrap_err();
        assert!(err.starts_with("cannot follow the redirect to `ftp://x/`"), "{err}");
    }
}
