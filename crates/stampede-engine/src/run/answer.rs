//! What a sent step got back, whatever it speaks (HTTP, gRPC, WebSocket): the types the step,
//! the gRPC call and the WebSocket session share, below all three.

use std::time::Instant;

/// What a sent step got back, whatever it speaks.
pub(super) struct Answer {
    /// What checks see as the status: the HTTP status, or a gRPC call's status code.
    pub(super) status: u16,
    /// The HTTP status, counted in the report's statuses.
    pub(super) http_status: Option<u16>,
    pub(super) sent: u64,
    pub(super) received: u64,
    pub(super) first_byte: Option<Instant>,
    /// gRPC and WebSocket: messages sent and received.
    pub(super) messages: Option<(u64, u64)>,
    /// What the server said about its status (`grpc-message`).
    pub(super) detail: Option<String>,
    /// WebSocket: each send to its matching message, µs.
    pub(super) round_trips: Vec<u64>,
}

/// How a gRPC call or a WebSocket session ended, beyond HTTP: tallied apart from HTTP
/// statuses in every report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ending {
    /// The status code a gRPC call ended with: the server's, or DEADLINE_EXCEEDED when its
    /// deadline passed first (as gRPC clients report it).
    Grpc(u16),
    /// The close code a WebSocket session ended with: the one it closed with, the server's,
    /// or 1006 when the connection ended without a close frame.
    WsClose(u16),
}

/// A step that got no answer it could use: why, and what it had sent and received by then.
pub(super) struct Failure {
    pub(super) error: crate::client::exchange::ExchangeError,
    /// Bytes sent.
    pub(super) sent: u64,
    /// gRPC and WebSocket: messages sent and received before the failure.
    pub(super) messages: Option<(u64, u64)>,
    /// How the call or session ended, when it did end so (a deadline, a server's close).
    pub(super) ending: Option<Ending>,
}
