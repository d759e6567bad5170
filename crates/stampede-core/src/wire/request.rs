//! The one writer of HTTP/1.1 requests. A VU's first request and every redirect it follows
//! are written here (HTTP/2 translates these bytes), so they carry the same default headers.

use std::io::Write as _;

use crate::wire::url::HttpUrl;

/// The `user-agent` sent unless a request sets its own.
pub const USER_AGENT: &str = concat!("stampede/", env!("CARGO_PKG_VERSION"));

/// What the writer needs besides the caller's own headers.
#[derive(Clone, Copy, Debug)]
pub struct Head<'a> {
    /// The request method as sent, e.g. `GET`.
    pub method: &'a str,
    /// Where the request goes: the request line's path and query, and the `host` header.
    pub url: &'a HttpUrl,
    /// The body's media type, sent unless a caller's header sets `content-type`.
    pub content_type: Option<&'a str>,
    /// The body; `Some` (also when empty) sends `content-length`.
    pub body: Option<&'a [u8]>,
}

/// Writes a request into `out`: the request line and `host`, the caller's `headers` (lowercase
/// names; `write_value` writes each value), `user-agent` and `accept` unless the caller set
/// them, the body's content type, `content-length` and the body.
pub fn write_request<'h, V: 'h>(
    head: &Head<'_>,
    headers: impl Iterator<Item = (&'h str, &'h V)> + Clone,
    mut write_value: impl FnMut(&V, &mut Vec<u8>),
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(head.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(head.url.path_and_query.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(head.url.authority.as_bytes());
    out.extend_from_slice(b"\r\n");
    let has = |name: &str| headers.clone().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !has("user-agent") {
        out.extend_from_slice(b"user-agent: ");
        out.extend_from_slice(USER_AGENT.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !has("accept") {
        out.extend_from_slice(b"accept: */*\r\n");
    }
    if let Some(ct) = head.content_type
        && !has("content-type")
    {
        out.extend_from_slice(b"content-type: ");
        out.extend_from_slice(ct.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    for (name, value) in headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        write_value(value, out);
        out.extend_from_slice(b"\r\n");
    }
    if let Some(body) = head.body {
        let _ = write!(out, "content-length: {}\r\n\r\n", body.len());
        out.extend_from_slice(body);
    } else {
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(method: &str, headers: &[(&str, &str)], content_type: Option<&str>, body: Option<&[u8]>) -> String {
        let url = HttpUrl::parse("http://127.0.0.1:8080/a?b=1").unwrap();
        let mut out = Vec::new();
        let head = Head { method, url: &url, content_type, body };
        write_request(
            &head,
            headers.iter().map(|(n, v)| (*n, v)),
            |v, out| out.extend_from_slice(v.as_bytes()),
            &mut out,
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn defaults_are_added_unless_the_caller_sets_them() {
        let plain = written("GET", &[], None, None);
        assert_eq!(
            plain,
            format!("GET /a?b=1 HTTP/1.1\r\nhost: 127.0.0.1:8080\r\nuser-agent: {USER_AGENT}\r\naccept: */*\r\n\r\n")
        );
        let own = written(
            "POST",
            &[("user-agent", "me"), ("accept", "text/plain"), ("content-type", "x/y")],
            Some("a/b"),
            Some(b"hi"),
        );
        assert_eq!(
            own,
            "POST /a?b=1 HTTP/1.1\r\nhost: 127.0.0.1:8080\r\nuser-agent: me\r\naccept: text/plain\r\ncontent-type: x/y\r\n\
             content-length: 2\r\n\r\nhi"
        );
        let typed = written("PUT", &[], Some("application/json"), Some(b""));
        assert!(typed.ends_with("content-type: application/json\r\ncontent-length: 0\r\n\r\n"), "{typed}");
    }
}
