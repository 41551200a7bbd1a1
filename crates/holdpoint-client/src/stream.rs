//! A streamed turn: server-sent events of `{"message": chunk}` frames, then
//! one `{"result": output}` (or `{"error": …}`) frame. Genkit JS writes its
//! error frame on an `error:` line instead of `data:`; both are read.

use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::agent::{AgentOutput, AgentStreamChunk};
use serde::Deserialize;

use crate::error::{ClientError, Result, fail_loudly};

/// One frame of a stream.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Frame {
    #[serde(default)]
    message: Option<AgentStreamChunk>,
    #[serde(default)]
    result: Option<AgentOutput>,
    #[serde(default)]
    error: Option<WireError>,
}

/// An error frame: `{status, message}` (holdpoint-server, Genkit's
/// `getCallableJSON`), the status perhaps missing.
#[derive(Deserialize)]
struct WireError {
    #[serde(default)]
    status: Option<holdpoint::Status>,
    #[serde(default)]
    message: String,
}

type Bytes = BoxStream<'static, reqwest::Result<bytes::Bytes>>;

/// A turn being streamed. Read chunks with [`next_chunk`](Self::next_chunk)
/// until it returns `None`, then take the output with
/// [`output`](Self::output) (which also drains chunks not read).
pub struct TurnStream {
    url: String,
    bytes: Bytes,
    /// Bytes read but not yet split into events.
    buffer: Vec<u8>,
    ended: bool,
    output: Option<Result<AgentOutput>>,
}

/// The payload of one event block: its `data:` and `error:` lines joined
/// (comments and other fields dropped).
fn payload(block: &str) -> String {
    let mut out = Vec::new();
    for line in block.lines() {
        let value = line.strip_prefix("data:").or_else(|| line.strip_prefix("error:"));
        if let Some(v) = value {
            out.push(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    out.join("\n")
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
            bytes,
            buffer: Vec::new(),
            ended: false,
            output: None,
        }
    }

    /// The next event's payload; `None` at the end of the body.
    async fn next_event(&mut self) -> Option<Result<String>> {
        loop {
            let text = String::from_utf8_lossy(&self.buffer);
            let split = text
                .find("\n\n")
                .map(|i| (i, 2))
                .or_else(|| text.find("\r\n\r\n").map(|i| (i, 4)));
            if let Some((at, len)) = split {
                let block = text[..at].to_owned();
                self.buffer.drain(..at + len);
                return Some(Ok(payload(&block)));
            }
            if self.ended {
                if text.trim().is_empty() {
                    return None;
                }
                let block = text.into_owned();
                self.buffer.clear();
                return Some(Ok(payload(&block)));
            }
            match self.bytes.next().await {
                Some(Ok(b)) => self.buffer.extend_from_slice(&b),
                Some(Err(e)) => return Some(Err(ClientError::transport(&self.url, e))),
                None => self.ended = true,
            }
        }
    }

    /// The next chunk; `None` once the turn's last frame arrived.
    pub async fn next_chunk(&mut self) -> Option<Result<AgentStreamChunk>> {
        if self.output.is_some() {
            return None;
        }
        loop {
            let data = match self.next_event().await {
                Some(Ok(data)) => data,
                Some(Err(e)) => return Some(Err(ClientError::transport(&self.url, e))),
                None => {
                    self.output = Some(Err(ClientError::protocol(
                        &self.url,
                        "the stream ended without a result",
                    )));
                    return None;
                }
            };
            if data.trim().is_empty() {
                continue;
            }
            let frame: Frame = match serde_json::from_str(&data) {
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
                    status: error.status.unwrap_or(holdpoint::Status::Internal),
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
