//! Request URLs.

/// Why a URL cannot be requested.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("invalid URL `{url}`: {reason}")]
    Invalid { url: String, reason: url::ParseError },
    #[error("`{url}`: unsupported scheme `{scheme}` (use http or https)")]
    Scheme { url: String, scheme: String },
    #[error("`{0}` has no host")]
    NoHost(String),
}

/// Where a request goes: an absolute `http://` or `https://` URL, taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpUrl {
    /// `https`: over TLS.
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// `host[:port]` as sent in the Host header.
    pub authority: String,
    pub path_and_query: String,
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
