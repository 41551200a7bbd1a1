//! A streamed turn: server-sent events of `{"message": chunk}` frames, then
//! one `{"result": output}` (or `{"error": …}`) frame.

use eventsource_stream::{EventStream, Eventsource};
use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::ErrorBody;
use holdpoint::agent::{AgentOutput, AgentStreamChunk};
use serde::Deserialize;

use crate::agent::fail_loudly;
use crate::error::{ClientError, Result};

/// One frame of a stream.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Frame {
    #[serde(default)]
    message: Option<AgentStreamChunk>,
    #[serde(default)]
    result: Option<AgentOutput>,
    #[serde(default)]
    error: Option<ErrorBody>,
}

type Bytes = BoxStream<'static, reqwest::Result<bytes::Bytes>>;

/// A turn being streamed. Read chunks with [`next_chunk`](Self::next_chunk)
/// until it returns `None`, then take the output with
/// [`output`](Self::output) (which also drains chunks not read).
pub struct TurnStream {
    url: String,
    events: EventStream<Bytes>,
    output: Option<Result<AgentOutput>>,
}

impl std::fmt::Debug for TurnStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnStream")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl TurnStream {
    pub(crate) fn new(url: String, response: reqwest::Response) -> Self {
        let bytes: Bytes = response.bytes_stream().boxed();
        TurnStream {
            url,
            events: bytes.eventsource(),
            output: None,
        }
    }

    /// The next chunk; `None` once the turn's last frame arrived.
    pub async fn next_chunk(&mut self) -> Option<Result<AgentStreamChunk>> {
        if self.output.is_some() {
            return None;
        }
        loop {
            let event = match self.events.next().await {
                Some(Ok(event)) => event,
                Some(Err(e)) => return Some(Err(ClientError::transport(&self.url, e))),
                None => {
                    self.output = Some(Err(ClientError::protocol(
                        &self.url,
                        "the stream ended without a result",
                    )));
                    return None;
                }
            };
            if event.data.trim().is_empty() {
                continue;
            }
            let frame: Frame = match serde_json::from_str(&event.data) {
                Ok(frame) => frame,
                Err(e) => {
                    return Some(Err(ClientError::protocol(
                        &self.url,
                        format!("a frame is not JSON: {e}"),
                    )));
                }
            };
            if let Some(chunk) = frame.message {
                return Some(Ok(chunk));
            }
            self.output = Some(match (frame.result, frame.error) {
                (Some(out), _) => fail_loudly(out),
                (None, Some(error)) => Err(ClientError::Server {
                    http: 0,
                    status: error.status,
                    message: error.message,
                }),
                (None, None) => Err(ClientError::protocol(
                    &self.url,
                    "a frame with neither message nor result",
                )),
            });
            return None;
        }
    }

    /// The turn's output, after every chunk (those not read are dropped).
    pub async fn output(mut self) -> Result<AgentOutput> {
        while let Some(chunk) = self.next_chunk().await {
            chunk?;
        }
        self.output
            .take()
            .unwrap_or_else(|| Err(ClientError::protocol(&self.url, "no result")))
    }
}
