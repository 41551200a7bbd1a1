//! A loopback server that plays scripted provider answers and records what
//! Holdpoint sent, plus small helpers shared by the provider tests.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use futures::StreamExt;
use holdpoint::model::{ChunkSink, GenerateChunk};
use holdpoint_models::HttpOptions;
use serde_json::Value;

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// What the server answers one request with.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A JSON body with a status and extra headers.
    Json(u16, Value, Vec<(&'static str, &'static str)>),
    /// An event stream, sent in pieces of `piece` bytes (0 = whole), with a
    /// short pause between pieces so they arrive separately.
    Sse { text: String, piece: usize },
    /// An event stream that sends `text` and then breaks the connection.
    #[cfg(feature = "openai")]
    SseThenAbort(String),
    /// An event stream that sends its headers and then nothing, forever.
    #[cfg(all(feature = "gemini", feature = "openai", feature = "anthropic"))]
    Stall,
}

impl Reply {
    pub fn json(body: Value) -> Self {
        Reply::Json(200, body, Vec::new())
    }

    #[cfg(feature = "gemini")]
    pub fn error(status: u16, body: Value) -> Self {
        Reply::Json(status, body, Vec::new())
    }

    pub fn sse(text: impl Into<String>) -> Self {
        Reply::Sse {
            text: text.into(),
            piece: 0,
        }
    }

    /// An event stream cut into pieces of `piece` bytes, which split JSON,
    /// field names and multi-byte characters at arbitrary places.
    pub fn sse_in_pieces(text: impl Into<String>, piece: usize) -> Self {
        Reply::Sse {
            text: text.into(),
            piece,
        }
    }
}

/// Builds an event-stream body from `(event name, JSON data)` pairs; an
/// empty name writes a bare `data:` event.
pub fn sse_text(events: &[(&str, Value)]) -> String {
    let mut out = String::new();
    for (name, data) in events {
        if !name.is_empty() {
            out.push_str(&format!("event: {name}\n"));
        }
        out.push_str(&format!("data: {data}\n\n"));
    }
    out
}

#[derive(Clone, Default)]
struct Shared {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    recorded: Arc<Mutex<Vec<Recorded>>>,
}

/// The server; dropped with the test's runtime.
pub struct MockServer {
    pub url: String,
    shared: Shared,
}

impl MockServer {
    /// Starts a server on 127.0.0.1 that answers requests with `replies`,
    /// in order (a 599 once they run out).
    pub async fn start(replies: Vec<Reply>) -> Self {
        let shared = Shared {
            replies: Arc::new(Mutex::new(replies.into())),
            recorded: Arc::default(),
        };
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        MockServer {
            url: format!("http://{addr}"),
            shared,
        }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.recorded.lock().unwrap().clone()
    }

    /// The only request received.
    pub fn request(&self) -> Recorded {
        let all = self.requests();
        assert_eq!(all.len(), 1, "expected one request, got {}", all.len());
        all.into_iter().next().unwrap()
    }
}

async fn handle(State(shared): State<Shared>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 24).await.unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    shared.recorded.lock().unwrap().push(Recorded {
        path: parts.uri.to_string(),
        headers: parts.headers,
        body,
    });
    let reply = shared.replies.lock().unwrap().pop_front();
    match reply {
        None => Response::builder()
            .status(599)
            .body(Body::from("no more scripted replies"))
            .unwrap(),
        Some(Reply::Json(status, body, headers)) => {
            let mut b = Response::builder()
                .status(StatusCode::from_u16(status).unwrap())
                .header("content-type", "application/json");
            for (k, v) in headers {
                b = b.header(k, v);
            }
            b.body(Body::from(body.to_string())).unwrap()
        }
        Some(Reply::Sse { text, piece }) => {
            let bytes = text.into_bytes();
            let size = if piece == 0 { bytes.len().max(1) } else { piece };
            let pieces: Vec<Bytes> = bytes.chunks(size).map(Bytes::copy_from_slice).collect();
            let stream = futures::stream::iter(pieces.into_iter().enumerate()).then(|(i, p)| async move {
                // Pause now and then so pieces reach the client in separate reads.
                if i % 8 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                } else {
                    tokio::task::yield_now().await;
                }
                Ok::<_, std::io::Error>(p)
            });
            sse_response(Body::from_stream(stream))
        }
        #[cfg(feature = "openai")]
        Some(Reply::SseThenAbort(text)) => {
            let first = futures::stream::once(async move { Ok::<_, std::io::Error>(Bytes::from(text)) });
            let fail = futures::stream::once(async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Err(std::io::Error::other("connection dropped"))
            });
            sse_response(Body::from_stream(first.chain(fail)))
        }
        #[cfg(all(feature = "gemini", feature = "openai", feature = "anthropic"))]
        Some(Reply::Stall) => sse_response(Body::from_stream(futures::stream::pending::<
            Result<Bytes, std::io::Error>,
        >())),
    }
}

fn sse_response(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .unwrap()
}

/// A sink that records chunks.
pub fn recording_sink() -> (ChunkSink, Arc<Mutex<Vec<GenerateChunk>>>) {
    let chunks = Arc::new(Mutex::new(Vec::new()));
    let c = Arc::clone(&chunks);
    (ChunkSink::new(move |chunk| c.lock().unwrap().push(chunk)), chunks)
}

/// The concatenated text of recorded chunks, and their count.
pub fn chunk_texts(chunks: &Arc<Mutex<Vec<GenerateChunk>>>) -> Vec<String> {
    chunks.lock().unwrap().iter().map(GenerateChunk::text).collect()
}

/// Quick retries so tests stay fast.
pub fn fast_http() -> HttpOptions {
    HttpOptions::default()
        .max_retries(2)
        .backoff(Duration::from_millis(10), Duration::from_secs(5))
        .timeout(Duration::from_secs(20))
}

pub const KEY: &str = "test-key-0123456789-abcdefghijklmnop";
