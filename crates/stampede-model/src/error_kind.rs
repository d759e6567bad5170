//! Why a request failed: the kinds reports, results and metrics count errors by.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why a request failed. A gRPC status the step does not accept counts under its gRPC name
/// (`UNAVAILABLE`…).
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
    /// gRPC status 1: the operation was cancelled, typically by the caller.
    #[serde(rename = "CANCELLED")]
    Cancelled,
    /// gRPC status 2: an error the server did not classify further.
    #[serde(rename = "UNKNOWN")]
    Unknown,
    /// gRPC status 3: the server rejected the request's arguments, whatever its state.
    #[serde(rename = "INVALID_ARGUMENT")]
    InvalidArgument,
    /// gRPC status 4: the deadline passed before the call ended: the server's status, or the
    /// step's own `deadline` passing first.
    #[serde(rename = "DEADLINE_EXCEEDED")]
    DeadlineExceeded,
    /// gRPC status 5: something the call asked for (a file, a record) was not found.
    #[serde(rename = "NOT_FOUND")]
    NotFound,
    /// gRPC status 6: what the call tried to create already exists.
    #[serde(rename = "ALREADY_EXISTS")]
    AlreadyExists,
    /// gRPC status 7: the caller is known but not allowed to do this.
    #[serde(rename = "PERMISSION_DENIED")]
    PermissionDenied,
    /// gRPC status 8: a resource ran out: a quota or rate limit, the server's memory, a size limit.
    #[serde(rename = "RESOURCE_EXHAUSTED")]
    ResourceExhausted,
    /// gRPC status 9: the system is not in the state the call needs.
    #[serde(rename = "FAILED_PRECONDITION")]
    FailedPrecondition,
    /// gRPC status 10: the call was aborted, typically by a conflict with a concurrent one.
    #[serde(rename = "ABORTED")]
    Aborted,
    /// gRPC status 11: the call went past a valid range (e.g. reading past the end).
    #[serde(rename = "OUT_OF_RANGE")]
    OutOfRange,
    /// gRPC status 12: the server does not implement or support the method.
    #[serde(rename = "UNIMPLEMENTED")]
    Unimplemented,
    /// gRPC status 13: an internal error of the server.
    #[serde(rename = "INTERNAL")]
    Internal,
    /// gRPC status 14: the service is unavailable for now (usually transient: a retry may work).
    #[serde(rename = "UNAVAILABLE")]
    Unavailable,
    /// gRPC status 15: data was lost or corrupted beyond recovery.
    #[serde(rename = "DATA_LOSS")]
    DataLoss,
    /// gRPC status 16: the call has no valid credentials.
    #[serde(rename = "UNAUTHENTICATED")]
    Unauthenticated,
}

impl ErrorKind {
    /// Every kind, in declaration order: `ALL[kind.index()] == kind`.
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

    /// The kind's position in [`ErrorKind::ALL`], for arrays of counts by kind.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The kind's name as scenario files, reports, results and metrics write it (`connect`,
    /// `NOT_FOUND`…).
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
