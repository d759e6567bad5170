//! A VU's cookie jar: what `Set-Cookie` stores goes back in `Cookie` to matching requests
//! (host or domain, path prefix). Session semantics: `Max-Age` ≤ 0 deletes; other expiry
//! dates are not tracked, since a load-test VU lives for minutes.

/// One stored cookie.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cookie {
    name: String,
    value: String,
    /// Host it came from (host-only) or the `Domain` it is for.
    domain: String,
    host_only: bool,
    path: String,
}

/// The cookies of one VU.
#[derive(Clone, Debug, Default)]
pub(crate) struct Jar {
    cookies: Vec<Cookie>,
}

impl Jar {
    /// Stores one `Set-Cookie` header value received from `host` for `path`.
    pub(crate) fn store(&mut self, host: &str, request_path: &str, header: &str) {
        let mut attrs = header.split(';');
        let Some((name, value)) = attrs.next().and_then(|nv| nv.split_once('=')) else { return };
        let name = name.trim();
        if name.is_empty() {
            return;
        }
        let mut domain = None;
        let mut path = None;
        let mut delete = false;
        for attr in attrs {
            let (k, v) = attr.split_once('=').unwrap_or((attr, ""));
            match k.trim().to_ascii_lowercase().as_str() {
                "domain" => domain = Some(v.trim().trim_start_matches('.').to_ascii_lowercase()),
                "path" if v.trim().starts_with('/') => path = Some(v.trim().to_string()),
                "max-age" => delete = v.trim().parse::<i64>().is_ok_and(|s| s <= 0),
                _ => {}
            }
        }
        let host = host.to_ascii_lowercase();
        // A domain attribute must cover the host that set it; otherwise the cookie is ignored.
        if let Some(d) = &domain
            && !domain_matches(&host, d)
        {
            return;
        }
        let cookie = Cookie {
            name: name.to_string(),
            value: value.trim().to_string(),
            host_only: domain.is_none(),
            domain: domain.unwrap_or(host),
            path: path.unwrap_or_else(|| default_path(request_path)),
        };
        self.cookies.retain(|c| !(c.name == cookie.name && c.domain == cookie.domain && c.path == cookie.path));
        if !delete {
            self.cookies.push(cookie);
        }
    }

    /// The `Cookie` header value for a request to `host` and `path`, if any cookie matches.
    pub(crate) fn header_for(&self, host: &str, path: &str) -> Option<String> {
        if self.cookies.is_empty() {
            return None;
        }
        let host = host.to_ascii_lowercase();
        let path = path.split('?').next().unwrap_or("/");
        let mut out = String::new();
        for c in &self.cookies {
            let host_ok = if c.host_only { c.domain == host } else { domain_matches(&host, &c.domain) };
            if host_ok && path_matches(path, &c.path) {
                if !out.is_empty() {
                    out.push_str("; ");
                }
                out.push_str(&c.name);
                out.push('=');
                out.push_str(&c.value);
            }
        }
        (!out.is_empty()).then_some(out)
    }
}

fn domain_matches(host: &str, domain: &str) -> bool {
    host == domain || host.strip_suffix(domain).is_some_and(|rest| rest.ends_with('.'))
}

fn path_matches(path: &str, cookie_path: &str) -> bool {
    path == cookie_path
        || path.starts_with(cookie_path) && (cookie_path.ends_with('/') || path[cookie_path.len()..].starts_with('/'))
}

/// RFC 6265's default path: the request path up to its last `/` (at least `/`).
fn default_path(request_path: &str) -> String {
    let path = request_path.split('?').next().unwrap_or("/");
    match path.rfind('/') {
        Some(0) | None => "/".to_string(),
        Some(i) => path[..i].to_string(),
    }
}

/// Copies the request `head_and_body` into `out` with a `cookie` header added to its head.
pub(crate) fn splice_header(request: &[u8], header_value: &str, out: &mut Vec<u8>) {
    out.clear();
    let head_end = memchr::memmem::find(request, b"\r\n\r\n").map_or(request.len(), |i| i + 2);
    out.extend_from_slice(&request[..head_end]);
    out.extend_from_slice(b"cookie: ");
    out.extend_from_slice(header_value.as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&request[head_end..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_matches_replaces_and_deletes() {
        let mut jar = Jar::default();
        jar.store("shop.example", "/login", "session=abc; Path=/; HttpOnly");
        jar.store("shop.example", "/cart/add", "cart=3");
        jar.store("api.shop.example", "/", "wide=1; Domain=.shop.example");
        jar.store("shop.example", "/", "evil=1; Domain=other.example");
        // `wide` is for the whole domain, `cart` only under /cart.
        assert_eq!(jar.header_for("shop.example", "/cart/view").as_deref(), Some("session=abc; cart=3; wide=1"));
        assert_eq!(jar.header_for("shop.example", "/cartoon").as_deref(), Some("session=abc; wide=1"));
        assert_eq!(jar.header_for("SHOP.example", "/").as_deref(), Some("session=abc; wide=1"));
        assert_eq!(jar.header_for("x.shop.example", "/").as_deref(), Some("wide=1"));
        assert_eq!(jar.header_for("other.example", "/"), None);
        jar.store("shop.example", "/", "session=xyz; Path=/");
        assert_eq!(jar.header_for("shop.example", "/").as_deref(), Some("wide=1; session=xyz"));
        jar.store("shop.example", "/", "session=; Path=/; Max-Age=0");
        assert_eq!(jar.header_for("shop.example", "/").as_deref(), Some("wide=1"));
    }

    #[test]
    fn splices_a_cookie_header_into_the_head() {
        let mut out = Vec::new();
        splice_header(b"POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\nhi", "a=1", &mut out);
        assert_eq!(out, b"POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ncookie: a=1\r\n\r\nhi");
    }
}
