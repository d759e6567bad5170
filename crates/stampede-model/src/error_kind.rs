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
    /// The server refused a WebSocket upgrade (the message says its HTTP status).
    Upgrade,
    /// A WebSocket closed before the session ended, or with a code other than the expected.
    Close,
    /// A gRPC call ended with this status code (gRPC's own names: `UNIMPLEMENTED`…).
    #[serde(rename = "CANCELLED")]
    Cancelled,
    #[serde(rename = "UNKNOWN")]
    Unknown,
    #[serde(rename = "INVALID_ARGUMENT")]
    InvalidArgument,
    #[serde(rename = "DEADLINE_EXCEEDED")]
    DeadlineExceeded,
    #[serde(rename = "NOT_FOUND")]
    NotFound,
    #[serde(rename = "ALREADY_EXISTS")]
    AlreadyExists,
    #[serde(rename = "PERMISSION_DENIED")]
    PermissionDenied,
    #[serde(rename = "RESOURCE_EXHAUSTED")]
    ResourceExhausted,
    #[serde(rename = "FAILED_PRECONDITION")]
    FailedPrecondition,
    #[serde(rename = "ABORTED")]
    Aborted,
    #[serde(rename = "OUT_OF_RANGE")]
    OutOfRange,
    #[serde(rename = "UNIMPLEMENTED")]
    Unimplemented,
    #[serde(rename = "INTERNAL")]
    Internal,
    #[serde(rename = "UNAVAILABLE")]
    Unavailable,
    #[serde(rename = "DATA_LOSS")]
    DataLoss,
    #[serde(rename = "UNAUTHENTICATED")]
    Unauthenticated,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 27] = [
        ErrorKind::Connect,
        ErrorKind::Dns,
        ErrorKind::Tls,
        ErrorKind::Timeout,
        ErrorKind::Reset,
        ErrorKind::Protocol,
        ErrorKind::Check,
        ErrorKind::Extract,
        ErrorKind::Io,
        ErrorKind::Upgrade,
        ErrorKind::Close,
        ErrorKind::Cancelled,
        ErrorKind::Unknown,
        ErrorKind::InvalidArgument,
        ErrorKind::DeadlineExceeded,
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::PermissionDenied,
        ErrorKind::ResourceExhausted,
        ErrorKind::FailedPrecondition,
        ErrorKind::Aborted,
        ErrorKind::OutOfRange,
        ErrorKind::Unimplemented,
        ErrorKind::Internal,
        ErrorKind::Unavailable,
        ErrorKind::DataLoss,
        ErrorKind::Unauthenticated,
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
            ErrorKind::Upgrade => "upgrade",
            ErrorKind::Close => "close",
            ErrorKind::Cancelled => "CANCELLED",
            ErrorKind::Unknown => "UNKNOWN",
            ErrorKind::InvalidArgument => "INVALID_ARGUMENT",
            ErrorKind::DeadlineExceeded => "DEADLINE_EXCEEDED",
            ErrorKind::NotFound => "NOT_FOUND",
            ErrorKind::AlreadyExists => "ALREADY_EXISTS",
            ErrorKind::PermissionDenied => "PERMISSION_DENIED",
            ErrorKind::ResourceExhausted => "RESOURCE_EXHAUSTED",
            ErrorKind::FailedPrecondition => "FAILED_PRECONDITION",
            ErrorKind::Aborted => "ABORTED",
            ErrorKind::OutOfRange => "OUT_OF_RANGE",
            ErrorKind::Unimplemented => "UNIMPLEMENTED",
            ErrorKind::Internal => "INTERNAL",
            ErrorKind::Unavailable => "UNAVAILABLE",
            ErrorKind::DataLoss => "DATA_LOSS",
            ErrorKind::Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// The kind of a gRPC status code other than OK (0); `None` for 0 and unknown codes.
    pub fn grpc(code: u32) -> Option<ErrorKind> {
        match code {
            1 => Some(ErrorKind::Cancelled),
            2 => Some(ErrorKind::Unknown),
            3 => Some(ErrorKind::InvalidArgument),
            4 => Some(ErrorKind::DeadlineExceeded),
            5 => Some(ErrorKind::NotFound),
            6 => Some(ErrorKind::AlreadyExists),
            7 => Some(ErrorKind::PermissionDenied),
            8 => Some(ErrorKind::ResourceExhausted),
            9 => Some(ErrorKind::FailedPrecondition),
            10 => Some(ErrorKind::Aborted),
            11 => Some(ErrorKind::OutOfRange),
            12 => Some(ErrorKind::Unimplemented),
            13 => Some(ErrorKind::Internal),
            14 => Some(ErrorKind::Unavailable),
            15 => Some(ErrorKind::DataLoss),
            16 => Some(ErrorKind::Unauthenticated),
            _ => None,
        }
    }

    /// A kind only gRPC or WebSocket steps have (a gRPC status, `upgrade`, `close`): metrics show
    /// it once it happened, where HTTP's kinds are always there (at 0).
    pub fn is_protocol_specific(self) -> bool {
        matches!(self, ErrorKind::Upgrade | ErrorKind::Close) || self.grpc_code().is_some()
    }

    /// The gRPC status code of a gRPC kind.
    pub fn grpc_code(self) -> Option<u32> {
        (1..=16).find(|c| ErrorKind::grpc(*c) == Some(self))
    }
}

/// Non-zero error counts by kind name (`connect`, `timeout`, …), for reports and results.
pub fn errors_by_name(counts: &[u64; ErrorKind::ALL.len()]) -> std::collections::BTreeMap<String, u64> {
    ErrorKind::ALL.iter().filter(|k| counts[k.index()] > 0).map(|k| (k.name().to_string(), counts[k.index()])).collect()
}
