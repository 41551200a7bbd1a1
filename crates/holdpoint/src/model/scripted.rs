//! `ScriptedModel`: a programmable model for tests and offline demos.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::{ChunkSink, GenerateChunk, GenerateRequest, GenerateResponse, Model};
use crate::error::{Error, ErrorBody, Result};
use crate::message::{Message, Part, Role};

/// One programmed model call: chunks to stream first, then a response or an error.
///
/// [`text`](Self::text) answers all at once, with no chunks. To stream like
/// a provider does, use [`streamed_text`](Self::streamed_text) (your own
/// pieces) or [`chunked`](Self::chunked) (any turn's text cut into pieces),
/// and [`chunk_delay`](Self::chunk_delay) to space the chunks out:
///
/// ```
/// use std::time::Duration;
/// use holdpoint::ScriptedTurn;
/// let turn = ScriptedTurn::streamed_text(["Done: ", "txn-", "123"]).chunk_delay(Duration::from_millis(20));
/// assert_eq!(turn.chunks.len(), 3);
/// assert_eq!(turn.response.as_ref().unwrap().text(), "Done: txn-123");
/// assert_eq!(ScriptedTurn::text("Done: txn-123").chunked(4).chunks.len(), 4);
/// ```
#[derive(Debug, Clone)]
pub struct ScriptedTurn {
    /// Streamed before the response, in order.
    pub chunks: Vec<GenerateChunk>,
    /// The response, or the error the call fails with.
    pub response: std::result::Result<GenerateResponse, ErrorBody>,
    /// How long the model waits before sending each chunk (zero: no
    /// wait). Only spent when somebody listens to the chunks.
    pub chunk_delay: Duration,
}

impl ScriptedTurn {
    /// A turn returning `response`, with no chunks.
    pub fn response(response: GenerateResponse) -> Self {
        ScriptedTurn {
            chunks: Vec::new(),
            response: Ok(response),
            chunk_delay: Duration::ZERO,
        }
    }

    /// A turn answering with the pieces joined, streamed one model chunk
    /// per piece first, as a provider streams its tokens:
    /// `ScriptedTurn::streamed_text(["Done: ", "txn-", "123"])`.
    pub fn streamed_text<S: Into<String>>(pieces: impl IntoIterator<Item = S>) -> Self {
        let pieces: Vec<String> = pieces.into_iter().map(Into::into).collect();
        let chunks = pieces
            .iter()
            .map(|piece| GenerateChunk::new(Role::Model, vec![Part::text(piece.clone())]))
            .collect();
        Self::text(pieces.concat()).with_chunks(chunks)
    }

    /// Streams this turn's response message before it is returned: each
    /// text part in pieces of at most `chars` characters (at least one),
    /// every other part (a tool request, say) as a chunk of its own.
    /// Replaces any chunks set before; an error turn streams nothing.
    pub fn chunked(mut self, chars: usize) -> Self {
        let chars = chars.max(1);
        let parts = match &self.response {
            Ok(response) => response.message.as_ref().map(|m| m.content.clone()).unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        let mut chunks = Vec::new();
        for part in parts {
            let Some(text) = part.as_text() else {
                chunks.push(GenerateChunk::new(Role::Model, vec![part]));
                continue;
            };
            let letters: Vec<char> = text.chars().collect();
            for piece in letters.chunks(chars) {
                let piece: String = piece.iter().collect();
                chunks.push(GenerateChunk::new(Role::Model, vec![Part::text(piece)]));
            }
        }
        self.chunks = chunks;
        self
    }

    /// Waits `delay` before sending each chunk, so a streaming consumer
    /// sees them arrive one by one (a demo's typing effect). The wait is a
    /// tokio timer, spent only when somebody listens to the chunks.
    pub fn chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// A turn answering with text.
    pub fn text(text: impl Into<String>) -> Self {
        Self::response(GenerateResponse::from_message(Message::model_text(text)))
    }

    /// A turn asking for one tool call.
    pub fn tool_call(name: impl Into<String>, input: Value) -> Self {
        let msg = Message::new(Role::Model, vec![Part::tool_request(name, None, Some(input))]);
        Self::response(GenerateResponse::from_message(msg))
    }

    /// Adds chunks to stream before the response.
    pub fn with_chunks(mut self, chunks: Vec<GenerateChunk>) -> Self {
        self.chunks = chunks;
        self
    }
}

type Handler = dyn Fn(&GenerateRequest, usize) -> Option<ScriptedTurn> + Send + Sync;

#[derive(Default)]
struct Script {
    queue: VecDeque<ScriptedTurn>,
    requests: Vec<GenerateRequest>,
    calls: usize,
    given: usize,
}

/// A model that returns programmed responses in order (streaming programmed
/// chunks first), records every request, and fails clearly when it runs out.
///
/// ```
/// use holdpoint::{GenerateRequest, Message, Model, ScriptedModel, ScriptedTurn, model::ChunkSink};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let model = ScriptedModel::new("scripted");
/// model.push(ScriptedTurn::text("hello"));
/// let resp = model.generate(GenerateRequest::new(vec![Message::user_text("hi")]), ChunkSink::none()).await?;
/// assert_eq!(resp.text(), "hello");
/// assert_eq!(model.requests().len(), 1);
/// assert!(model.generate(GenerateRequest::new(vec![]), ChunkSink::none()).await.is_err());
/// # Ok::<(), holdpoint::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct ScriptedModel {
    name: String,
    script: Arc<Mutex<Script>>,
    handler: Option<Arc<Handler>>,
    recording: bool,
}

impl ScriptedModel {
    /// An empty script named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        ScriptedModel {
            name: name.into(),
            script: Arc::default(),
            handler: None,
            recording: true,
        }
    }

    /// A model whose answers come from `f(request, call_index)`; `None`
    /// falls back to the queued turns.
    pub fn from_fn(
        name: impl Into<String>,
        f: impl Fn(&GenerateRequest, usize) -> Option<ScriptedTurn> + Send + Sync + 'static,
    ) -> Self {
        ScriptedModel {
            handler: Some(Arc::new(f)),
            ..Self::new(name)
        }
    }

    fn lock(&self) -> MutexGuard<'_, Script> {
        // A poisoned lock only means another test thread panicked; the
        // script itself is still consistent, so keep using it.
        self.script.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops recording requests (for benchmarks and long demos, where the
    /// record would grow without bound). [`requests`](Self::requests) then
    /// stays empty.
    pub fn without_recording(mut self) -> Self {
        self.recording = false;
        self
    }

    /// Queues one turn.
    pub fn push(&self, turn: ScriptedTurn) {
        let mut s = self.lock();
        s.queue.push_back(turn);
        s.given += 1;
    }

    /// Replaces the queue with these turns (and forgets recorded requests).
    pub fn reset(&self, turns: impl IntoIterator<Item = ScriptedTurn>) {
        let mut s = self.lock();
        s.queue = turns.into_iter().collect();
        s.given = s.queue.len();
        s.requests.clear();
        s.calls = 0;
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<GenerateRequest> {
        self.lock().requests.clone()
    }

    /// Turns still queued.
    pub fn remaining(&self) -> usize {
        self.lock().queue.len()
    }
}

#[async_trait]
impl Model for ScriptedModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn generate(&self, request: GenerateRequest, chunks: ChunkSink) -> Result<GenerateResponse> {
        let turn = {
            let mut s = self.lock();
            let index = s.calls;
            s.calls += 1;
            if self.recording {
                s.requests.push(request.clone());
            }
            let from_handler = self.handler.as_ref().and_then(|h| h(&request, index));
            match from_handler.or_else(|| s.queue.pop_front()) {
                Some(turn) => turn,
                None => {
                    return Err(Error::FailedPrecondition(format!(
                        "scripted model \"{}\" has no response left for call {} (it was given {})",
                        self.name,
                        index + 1,
                        s.given
                    )));
                }
            }
        };
        let pace = !turn.chunk_delay.is_zero() && chunks.is_listening();
        for chunk in turn.chunks {
            if pace {
                tokio::time::sleep(turn.chunk_delay).await;
            }
            chunks.send(chunk);
        }
        turn.response.map_err(|body| Error::from_body(&body))
    }
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel").field("name", &self.name).finish()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn chunked_cuts_text_by_characters_and_keeps_other_parts_whole() {
        let msg = Message::new(
            Role::Model,
            vec![Part::text("abcde"), Part::tool_request("t", None, Some(json!({})))],
        );
        let turn = ScriptedTurn::response(GenerateResponse::from_message(msg)).chunked(2);
        let shapes: Vec<(String, bool)> = turn
            .chunks
            .iter()
            .map(|c| (c.text(), c.content[0].as_tool_request().is_some()))
            .collect();
        assert_eq!(
            shapes,
            [
                ("ab".into(), false),
                ("cd".into(), false),
                ("e".into(), false),
                (String::new(), true)
            ]
        );
        assert!(turn.chunks.iter().all(|c| c.role == Some(Role::Model)));
        // Zero is read as one character per chunk.
        assert_eq!(ScriptedTurn::text("abc").chunked(0).chunks.len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn the_delay_is_spent_only_when_somebody_listens() {
        let model = ScriptedModel::new("m");
        let turn = || ScriptedTurn::streamed_text(["a", "b"]).chunk_delay(Duration::from_secs(1));
        model.push(turn());
        model.push(turn());
        let start = tokio::time::Instant::now();
        model
            .generate(GenerateRequest::new(vec![]), ChunkSink::none())
            .await
            .unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = {
            let seen = Arc::clone(&seen);
            ChunkSink::new(move |c: GenerateChunk| seen.lock().unwrap().push(c.text()))
        };
        let resp = model.generate(GenerateRequest::new(vec![]), sink).await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        assert_eq!(*seen.lock().unwrap(), ["a", "b"]);
        assert_eq!(resp.text(), "ab");
    }
}
