//! [`Limits`]: how much a request may carry, and [`BodyTimeout`]: how long
//! its body may take to arrive.

use std::time::Duration;

/// The default largest request body: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// Size limits. A body over [`body`](Self::body) is answered 413 before it
/// is parsed; a WebSocket message over [`ws_message`](Self::ws_message)
/// closes the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest request body, in bytes (default 1 MiB).
    pub body: usize,
    /// The largest WebSocket message, in bytes (default: the body limit).
    pub ws_message: usize,
    /// The most items a listing returns (`limit` is capped to it; default 1000).
    pub max_list: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            body: DEFAULT_BODY_LIMIT,
            ws_message: DEFAULT_BODY_LIMIT,
            max_list: 1000,
        }
    }
}

impl Limits {
    /// The same limits with another body limit (also used for WebSocket
    /// messages).
    pub fn with_body(mut self, bytes: usize) -> Self {
        self.body = bytes;
        self.ws_message = bytes;
        self
    }
}

/// How long a request body may take to arrive (`None`: no limit), as the
/// handler state provides it to the body extractor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyTimeout(pub Option<Duration>);
