//! Request URLs.

/// Why a URL cannot be requested.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// The text does not parse as an absolute URL.
    #[error("invalid URL `{url}`: {reason}")]
    Invalid {
        /// The URL as given.
        url: String,
        /// What the URL parser found.
        reason: url::ParseError,
    },
    /// The scheme is neither `http` nor `https`.
    #[error("`{url}`: unsupported scheme `{scheme}` (use http or https)")]
    Scheme {
        /// The URL as given.
        url: String,
        /// Its scheme, e.g. `ftp`.
        scheme: String,
    },
    /// The URL names no host (the URL as given).
    #[error("`{0}` has no host")]
    NoHost(String),
}

/// Where a request goes: an absolute `http://` or `https://` URL, taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpUrl {
    /// `https`: over TLS.
    pub tls: bool,
    /// The host to connect to: a name, or an IP address (IPv6 without brackets).
    pub host: String,
    /// The port to connect to: the URL's, else 80 for `http` and 443 for `https`.
    pub port: u16,
    /// `host[:port]` as sent in the Host header.
    pub authority: String,
    /// The request line's target: the path (`/` at least) and `?query` if any, no fragment.
    pub path_and_query: String,
}

/// A URL's fixed origin (`http://host:port`), parsed once, that rendered URLs start with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The text rendered URLs start with, up to the path's `/`.
    prefix: String,
    base: HttpUrl,
}

impl Origin {
    /// The origin of a URL template whose fixed beginning is `literal` (`http://host:port/…`),
    /// when that beginning holds the whole authority and it parses.
    pub fn of(literal: &str) -> Option<Origin> {
        let after_scheme = literal.find("://")? + 3;
        let slash = after_scheme + literal[after_scheme..].find('/')?;
        let prefix = &literal[..slash];
        let base = HttpUrl::parse(&format!("{prefix}/")).ok()?;
        (base.path_and_query == "/").then(|| Origin { prefix: prefix.to_string(), base })
    }

    /// `url` (which starts with this origin) without parsing it again, when its path and query
    /// are made only of characters a URL parser leaves as they are, and hold no dot segment;
    /// `None` otherwise (parse it).
    pub fn join(&self, url: &str) -> Option<HttpUrl> {
        let rest = url.strip_prefix(self.prefix.as_str())?;
        // A dot segment, written `.` or `%2e` (which parsers read as a dot), is normalized away.
        let plain = rest.starts_with('/')
            && !rest.contains("/.")
            && !rest.as_bytes().windows(3).any(|w| w.eq_ignore_ascii_case(b"%2e"))
            && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~/?=&%+,:;@!$()*".contains(&b));
        plain.then(|| HttpUrl { path_and_query: rest.to_string(), ..self.base.clone() })
    }
}

impl HttpUrl {
    /// Parses an absolute `http://` or `https://` URL.
    pub fn parse(url: &str) -> Result<HttpUrl, UrlError> {
        let parsed = url::Url::parse(url).map_err(|reason| UrlError::Invalid { url: url.to_string(), reason })?;
        let tls = match parsed.scheme() {
            "http" => false,
            "https" => true,
            other => return Err(UrlError::Scheme { url: url.to_string(), scheme: other.to_string() }),
        };
        let host = match parsed.host() {
            Some(url::Host::Domain(d)) => d.to_string(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            None => return Err(UrlError::NoHost(url.to_string())),
        };
        let port = parsed.port_or_known_default().unwrap_or(80);
        let authority = match parsed.port() {
            Some(p) if parsed.host_str().is_some() => format!("{}:{p}", parsed.host_str().unwrap_or_default()),
            _ => parsed.host_str().unwrap_or_default().to_string(),
        };
        let mut path_and_query = parsed.path().to_string();
        if let Some(q) = parsed.query() {
            path_and_query.push('?');
            path_and_query.push_str(q);
        }
        Ok(HttpUrl { tls, host, port, authority, path_and_query })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A URL joined to its parsed origin is what parsing it whole gives; one the parser would
    /// change (spaces, quotes, dot segments, non-ASCII) is left to the parser.
    #[test]
    fn joining_to_a_fixed_origin_gives_what_parsing_gives() {
        for base in ["http://127.0.0.1:8080/shop", "https://api.example.test/v1", "http://[::1]:9/x"] {
            let origin = Origin::of(base).unwrap_or_else(|| panic!("{base}"));
            let prefix = &base[..base.rfind('/').unwrap()];
            for rest in ["/", "/orders/order-3f2a", "/a/b?x=1&y=%20z+q", "/p;v=1,2:(x)*!$@~"] {
                let url = format!("{prefix}{rest}");
                assert_eq!(origin.join(&url), Some(HttpUrl::parse(&url).unwrap()), "{url}");
            }
            for rest in ["/a b", "/a/../b", "/a/%2e%2e/b", "/a/%2E/b", "/q?x='1'", "/é", "/a#frag", "/a\\b", "x"] {
                assert_eq!(origin.join(&format!("{prefix}{rest}")), None, "{rest}");
            }
        }
        assert_eq!(Origin::of("{{baseUrl}}/x"), None);
        assert_eq!(Origin::of("http://host"), None, "no path: the authority may go on in a hole");
    }
}
