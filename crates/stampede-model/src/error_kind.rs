//! Why a request failed: the kinds reports, results and metrics count errors by.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why a request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ErrorKind {
    /// The connection was refused or the host unreachable.
    Connect,
    /// The host name did not resolve.
    Dns,
    /// The TLS handshake failed: the message says whether the CA was unknown, the name did
    /// not match, or the handshake itself failed.
    Tls,
    /// The request (or its connect) ran past its time limit.
    Timeout,
    /// The connection was reset or closed mid-exchange.
    Reset,
    /// The server's answer was not valid HTTP.
    Protocol,
    /// A check on the response failed.
    Check,
    /// An extractor found nothing to take.
    Extract,
    /// Any other local I/O error.
    Io,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::Connect,
        ErrorKind::Dns,
        ErrorKind::Tls,
        ErrorKind::Timeout,
        ErrorKind::Reset,
        ErrorKind::Protocol,
        ErrorKind::Check,
        ErrorKind::Extract,
        ErrorKind::Io,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Dns => "dns",
            ErrorKind::Tls => "tls",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Check => "check",
            ErrorKind::Extract => "extract",
            ErrorKind::Io => "io",
        }
    }
}

/// Non-zero error counts by kind name (`connect`, `timeout`, …), for reports and results.
pub fn errors_by_name(counts: &[u64; ErrorKind::ALL.len()]) -> std::collections::BTreeMap<String, u64> {
    ErrorKind::ALL.iter().filter(|k| counts[k.index()] > 0).map(|k| (k.name().to_string(), counts[k.index()])).collect()
}
