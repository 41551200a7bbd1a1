//! Server-sent-event decoding over a reqwest body, with every failure
//! turned into a clear error: a body that is not UTF-8 or not an event
//! stream, or a connection that breaks off, is `INTERNAL`; a stream that
//! stalls past the read timeout is `DEADLINE_EXCEEDED`.
//!
//! A stream that simply ends too early (no terminal event) is each
//! provider's to detect, since only it knows what "done" looks like; it
//! reports that with [`EventReader::truncated`].

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::{Error, Result, Status};
use reqwest::Response;
use serde::de::DeserializeOwned;

use crate::http::HttpClient;

/// One decoded event: its name (empty when the stream names none) and data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    pub event: String,
    pub data: String,
}

/// Reads events from a streaming response.
pub(crate) struct EventReader {
    inner: BoxStream<'static, std::result::Result<Event, EventStreamError<reqwest::Error>>>,
    http: HttpClient,
    events: usize,
}

impl EventReader {
    /// Starts reading `resp`'s body as an event stream.
    pub fn new(resp: Response, http: &HttpClient) -> Self {
        EventReader {
            inner: resp.bytes_stream().eventsource().boxed(),
            http: http.clone(),
            events: 0,
        }
    }

    /// The next event, or `None` when the body ended.
    pub async fn next(&mut self) -> Result<Option<SseEvent>> {
        match self.inner.next().await {
            None => Ok(None),
            Some(Ok(e)) => {
                self.events += 1;
                tracing::trace!(target: "holdpoint_models::sse", provider = %self.http.provider(), event = %e.event, bytes = e.data.len(), "event");
                Ok(Some(SseEvent {
                    event: e.event,
                    data: e.data,
                }))
            }
            Some(Err(EventStreamError::Utf8(e))) => Err(self
                .http
                .error(Status::Internal, format!("malformed event stream (not UTF-8): {e}"))),
            Some(Err(EventStreamError::Parser(e))) => Err(self
                .http
                .error(Status::Internal, format!("malformed event stream: {e}"))),
            Some(Err(EventStreamError::Transport(e))) if e.is_timeout() => Err(self.http.error(
                Status::DeadlineExceeded,
                format!("event stream stalled after {} events: {e}", self.events),
            )),
            // The connection broke: a retry may well succeed.
            Some(Err(EventStreamError::Transport(e))) => Err(self.http.error(
                Status::Unavailable,
                format!("event stream broke off after {} events: {e}", self.events),
            )),
        }
    }

    /// Decodes an event's data as JSON.
    pub fn decode<T: DeserializeOwned>(&self, event: &SseEvent) -> Result<T> {
        serde_json::from_str(&event.data).map_err(|e| {
            let name = if event.event.is_empty() { "data" } else { &event.event };
            self.http
                .error(Status::Internal, format!("malformed stream event \"{name}\": {e}"))
        })
    }

    /// The error for a stream that ended before `missing` arrived: the
    /// connection was cut, so `UNAVAILABLE` (a retry may succeed).
    pub fn truncated(&self, missing: &str) -> Error {
        self.http.error(
            Status::Unavailable,
            format!("the event stream ended after {} events, before {missing}", self.events),
        )
    }
}
