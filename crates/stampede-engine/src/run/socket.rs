//! A WebSocket kept open across the steps of an iteration: what a VU holds between them
//! (opened, used and closed by [`super::ws`]).

use tokio_tungstenite::WebSocketStream;

use crate::client::connect::Io;

/// A socket kept open across steps of an iteration (`keepOpen`), by its URL.
pub(super) struct Socket {
    pub(super) key: String,
    pub(super) stream: WebSocketStream<Io>,
    /// The close code of the step that kept it, for when the iteration ends.
    pub(super) close_code: u16,
}

impl std::fmt::Debug for Socket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Socket").field("key", &self.key).finish()
    }
}
