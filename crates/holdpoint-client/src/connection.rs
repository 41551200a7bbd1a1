//! A multi-turn WebSocket connection (`GET /agents/{name}/connect`): the
//! protocol in `holdpoint-server`'s routes.

use futures::{SinkExt, StreamExt};
use holdpoint::ErrorBody;
use holdpoint::agent::{AgentInit, AgentInput, AgentOutput, AgentStreamChunk};
use serde::Deserialize;
use serde_json::json;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::client::{Client, Credential};
use crate::error::{ClientError, Result, fail_loudly};

#[derive(Deserialize)]
struct Incoming {
    #[serde(default)]
    message: Option<AgentStreamChunk>,
    #[serde(default)]
    result: Option<AgentOutput>,
    #[serde(default)]
    error: Option<ErrorBody>,
}

/// What came from the server.
#[derive(Debug)]
enum Received {
    Chunk(AgentStreamChunk),
    Error(ErrorBody),
    Result(AgentOutput),
    Closed,
}

/// A connection to a remote agent: send inputs one turn at a time, read
/// each turn's chunks up to its `turnEnd`, and close for the output.
pub struct RemoteConnection {
    url: String,
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    result: Option<AgentOutput>,
}

impl std::fmt::Debug for RemoteConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteConnection")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

fn server(error: ErrorBody) -> ClientError {
    ClientError::Server {
        http: 0,
        status: error.status,
        message: error.message,
    }
}

impl RemoteConnection {
    pub(crate) async fn open(client: &Client, path: &str, init: AgentInit) -> Result<Self> {
        let url = client.url(path);
        let ws_url = match url.split_once("://") {
            Some(("https", rest)) => format!("wss://{rest}"),
            Some((_, rest)) => format!("ws://{rest}"),
            None => return Err(ClientError::protocol(&url, "not an http(s) URL")),
        };
        let mut request = ws_url
            .as_str()
            .into_client_request()
            .map_err(|e| ClientError::protocol(&url, e.to_string()))?;
        let header = match &client.credential {
            Credential::None => None,
            Credential::ApiKey(key) => Some(("x-api-key", key.clone())),
            Credential::Bearer(token) => Some(("authorization", format!("Bearer {token}"))),
        };
        if let Some((name, value)) = header {
            let value = HeaderValue::from_str(&value)
                .map_err(|_| ClientError::protocol(&url, "the credential is not a valid header value"))?;
            request.headers_mut().insert(name, value);
        }
        let (socket, _) = tokio_tungstenite::connect_async(request)
            .await
            .map_err(|e| ClientError::transport(&url, e))?;
        let mut conn = RemoteConnection {
            url,
            socket,
            result: None,
        };
        conn.send_json(json!({ "init": init })).await?;
        Ok(conn)
    }

    async fn send_json(&mut self, value: serde_json::Value) -> Result<()> {
        self.socket
            .send(Frame::text(value.to_string()))
            .await
            .map_err(|e| ClientError::transport(&self.url, e))
    }

    async fn receive(&mut self) -> Result<Received> {
        loop {
            let frame = match self.socket.next().await {
                Some(Ok(frame)) => frame,
                Some(Err(e)) => return Err(ClientError::transport(&self.url, e)),
                None => return Ok(Received::Closed),
            };
            let text = match frame {
                Frame::Text(text) => text,
                Frame::Close(close) => {
                    let code = close.as_ref().map(|c| u16::from(c.code)).unwrap_or(1000);
                    if code >= 4000 {
                        return Err(ClientError::Server {
                            http: code - 4000,
                            status: holdpoint::Status::Internal,
                            message: close.map(|c| c.reason.to_string()).unwrap_or_default(),
                        });
                    }
                    return Ok(Received::Closed);
                }
                _ => continue,
            };
            let incoming: Incoming = serde_json::from_str(&text)
                .map_err(|e| ClientError::protocol(&self.url, format!("a frame is not JSON: {e}")))?;
            return Ok(match (incoming.message, incoming.result, incoming.error) {
                (Some(chunk), _, _) => Received::Chunk(chunk),
                (None, Some(out), _) => Received::Result(out),
                (None, None, Some(error)) => Received::Error(error),
                (None, None, None) => {
                    return Err(ClientError::protocol(
                        &self.url,
                        "a frame with no message, result or error",
                    ));
                }
            });
        }
    }

    /// Sends one input (a message, or a resume of the paused calls).
    pub async fn send(&mut self, input: AgentInput) -> Result<()> {
        self.send_json(json!({ "data": input })).await
    }

    /// The next chunk; `None` once the server ended the connection (the
    /// output is then what [`close`](Self::close) returns).
    pub async fn next_chunk(&mut self) -> Option<Result<AgentStreamChunk>> {
        match self.receive().await {
            Ok(Received::Chunk(chunk)) => Some(Ok(chunk)),
            Ok(Received::Error(error)) => Some(Err(server(error))),
            Ok(Received::Result(out)) => {
                self.result = Some(out);
                None
            }
            Ok(Received::Closed) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// Reads the current turn's chunks up to and including its `turnEnd`.
    pub async fn receive_turn(&mut self) -> Result<Vec<AgentStreamChunk>> {
        let mut chunks = Vec::new();
        while let Some(chunk) = self.next_chunk().await {
            let chunk = chunk?;
            let end = chunk.turn_end.is_some();
            chunks.push(chunk);
            if end {
                return Ok(chunks);
            }
        }
        Ok(chunks)
    }

    /// Asks the server to finish queued inputs and close, and returns the
    /// connection's output (a failed last turn is `Err`).
    pub async fn close(mut self) -> Result<AgentOutput> {
        if self.result.is_none() {
            // The server may have closed already (a detach, a failed turn).
            let _ = self.send_json(json!({ "close": true })).await;
            loop {
                match self.receive().await? {
                    Received::Result(out) => {
                        self.result = Some(out);
                        break;
                    }
                    Received::Error(error) => return Err(server(error)),
                    Received::Chunk(_) => {}
                    Received::Closed => break,
                }
            }
        }
        let _ = self.socket.close(None).await;
        match self.result.take() {
            Some(out) => fail_loudly(out),
            None => Err(ClientError::protocol(
                &self.url,
                "the connection closed without a result",
            )),
        }
    }
}
