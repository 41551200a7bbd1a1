//! `ScriptedModel`: a programmable model for tests and offline demos.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use serde_json::Value;

use super::{ChunkSink, GenerateChunk, GenerateRequest, GenerateResponse, Model};
use crate::error::{Error, ErrorBody, Result};
use crate::message::{Message, Part, Role};

/// One programmed model call: chunks to stream first, then a response or an error.
#[derive(Debug, Clone)]
pub struct ScriptedTurn {
    /// Streamed before the response, in order.
    pub chunks: Vec<GenerateChunk>,
    /// The response, or the error the call fails with.
    pub response: std::result::Result<GenerateResponse, ErrorBody>,
}

impl ScriptedTurn {
    /// A turn returning `response`, with no chunks.
    pub fn response(response: GenerateResponse) -> Self {
        ScriptedTurn {
            chunks: Vec::new(),
            response: Ok(response),
        }
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
        for chunk in turn.chunks {
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
