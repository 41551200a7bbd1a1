//! `Turn`: what a turn handler sees and changes — the input, the session's
//! messages, artifacts and custom state — and `Responder`, which streams
//! chunks to the caller.

use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::io::{AgentInput, AgentStreamChunk};
use crate::message::{Message, Role};
use crate::model::{ChunkSink, FinishReason, GenerateChunk};
use crate::session::patch::PatchTracker;
use crate::session::{Artifact, SessionState, upsert_artifact};

/// Streams chunks to the connection; after a detach it drops everything and
/// the connection's stream ends.
#[derive(Clone)]
pub struct Responder {
    tx: Arc<Mutex<Option<mpsc::UnboundedSender<AgentStreamChunk>>>>,
}

impl Responder {
    pub(crate) fn new(tx: mpsc::UnboundedSender<AgentStreamChunk>) -> Self {
        Responder {
            tx: Arc::new(Mutex::new(Some(tx))),
        }
    }

    /// A responder nobody listens to (single-shot runs).
    pub(crate) fn disconnected() -> Self {
        Responder {
            tx: Arc::new(Mutex::new(None)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<mpsc::UnboundedSender<AgentStreamChunk>>> {
        self.tx.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends a chunk (dropped when nobody listens or after a detach).
    pub fn send(&self, chunk: AgentStreamChunk) {
        if let Some(tx) = self.lock().as_ref() {
            // A dropped receiver is not an error: the run goes on.
            let _ = tx.send(chunk);
        }
    }

    /// Sends a model (or tool-role) chunk.
    pub fn send_model_chunk(&self, chunk: GenerateChunk) {
        self.send(AgentStreamChunk {
            model_chunk: Some(chunk),
            ..Default::default()
        });
    }

    /// Stops streaming for good and closes the chunk stream.
    pub(crate) fn detach(&self) {
        self.lock().take();
    }

    /// Whether chunks still reach the caller.
    pub fn is_attached(&self) -> bool {
        self.lock().is_some()
    }
}

struct TurnState {
    state: SessionState,
    patches: PatchTracker,
    message: Option<Message>,
    finish_reason: Option<FinishReason>,
    seam: Option<Vec<Message>>,
}

/// One turn of an agent: the input being handled and the session it
/// changes. The input's user message is already in [`messages`](Self::messages). Cheap to clone (a handle); changes are kept only when the turn
/// succeeds.
#[derive(Clone)]
pub struct Turn {
    input: Arc<AgentInput>,
    state: Arc<Mutex<TurnState>>,
    responder: Responder,
    context: Arc<Map<String, Value>>,
    receipts: Option<Arc<crate::receipt::TurnReceipts>>,
}

impl Turn {
    pub(crate) fn new(
        input: AgentInput,
        state: SessionState,
        responder: Responder,
        context: Arc<Map<String, Value>>,
    ) -> Self {
        let mut state = state;
        if let Some(m) = &input.message {
            state.messages.push(m.clone());
        }
        let patches = PatchTracker::new(state.custom.clone());
        Turn {
            input: Arc::new(input),
            state: Arc::new(Mutex::new(TurnState {
                state,
                patches,
                message: None,
                finish_reason: None,
                seam: None,
            })),
            responder,
            context,
            receipts: None,
        }
    }

    fn lock(&self) -> MutexGuard<'_, TurnState> {
        // Never held across an await; a poisoned lock means a handler
        // panicked, and the turn is discarded anyway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// With the receipt issuer of its calls that run after a hold.
    pub(crate) fn with_receipts(mut self, receipts: Option<Arc<crate::receipt::TurnReceipts>>) -> Self {
        self.receipts = receipts;
        self
    }

    /// The receipt issuer of its calls, when the agent issues receipts.
    pub(crate) fn receipts(&self) -> Option<Arc<crate::receipt::TurnReceipts>> {
        self.receipts.clone()
    }

    /// The input this turn handles.
    pub fn input(&self) -> &AgentInput {
        &self.input
    }

    /// The session id.
    pub fn session_id(&self) -> String {
        self.lock().state.session_id.clone()
    }

    /// The request context (principal, …) of the run.
    pub fn request_context(&self) -> Arc<Map<String, Value>> {
        Arc::clone(&self.context)
    }

    /// The session's messages.
    pub fn messages(&self) -> Vec<Message> {
        self.lock().state.messages.clone()
    }

    /// Replaces the session's messages.
    pub fn set_messages(&self, messages: Vec<Message>) {
        self.lock().state.messages = messages;
    }

    /// Appends a message to the session.
    pub fn add_message(&self, message: Message) {
        self.lock().state.messages.push(message);
    }

    /// Appends a model message and makes it the turn's output message.
    pub fn reply(&self, message: Message) {
        let mut s = self.lock();
        s.state.messages.push(message.clone());
        s.message = Some(message);
    }

    /// [`reply`](Self::reply) with a text message.
    pub fn reply_text(&self, text: impl Into<String>) {
        self.reply(Message::model_text(text));
    }

    /// Sets the output message and finish reason of the turn.
    pub fn finish(&self, message: Option<Message>, finish_reason: FinishReason) {
        let mut s = self.lock();
        s.message = message;
        s.finish_reason = Some(finish_reason);
    }

    /// The session's artifacts.
    pub fn artifacts(&self) -> Vec<Artifact> {
        self.lock().state.artifacts.clone()
    }

    /// Adds (or replaces by name) an artifact and streams it.
    pub fn add_artifact(&self, artifact: Artifact) {
        upsert_artifact(&mut self.lock().state.artifacts, artifact.clone());
        self.responder.send(AgentStreamChunk {
            artifact: Some(artifact),
            ..Default::default()
        });
    }

    /// The custom state.
    pub fn custom(&self) -> Value {
        self.lock().state.custom.clone()
    }

    /// Changes the custom state and streams the change as a `customPatch`.
    pub fn update_custom(&self, f: impl FnOnce(&Value) -> Value) {
        let patch = {
            let mut s = self.lock();
            let next = f(&s.state.custom);
            let patch = s.patches.change(&next);
            s.state.custom = next;
            patch
        };
        if let Some(ops) = patch {
            self.responder.send(AgentStreamChunk {
                custom_patch: Some(ops),
                ..Default::default()
            });
        }
    }

    /// Streams a model chunk.
    pub fn send_chunk(&self, chunk: GenerateChunk) {
        self.responder.send_model_chunk(chunk);
    }

    /// A sink that streams generate chunks to this turn's caller.
    pub fn chunk_sink(&self) -> ChunkSink {
        if !self.responder.is_attached() {
            return ChunkSink::none();
        }
        let responder = self.responder.clone();
        ChunkSink::new(move |chunk| responder.send_model_chunk(chunk))
    }

    /// Records the history at a seam: tool calls up to here completed, so a
    /// failure later in the turn keeps them (they never run twice).
    pub fn record_seam(&self, messages: &[Message]) {
        self.lock().seam = Some(messages.to_vec());
    }

    /// The state to keep when the turn fails after a seam.
    pub(crate) fn seam_state(&self) -> Option<SessionState> {
        let s = self.lock();
        s.seam.as_ref().map(|messages| SessionState {
            messages: messages.clone(),
            ..s.state.clone()
        })
    }

    /// The session state as the turn left it, with the output message and
    /// finish reason. A `None` message stands for the state's
    /// [`last_model`] message, read there when the output needs it (not
    /// copied out here).
    pub(crate) fn into_parts(self) -> (SessionState, Option<Message>, FinishReason) {
        // The turn is over: its state moves out instead of being copied (a
        // handler that kept a clone of the turn sees an emptied state).
        let mut s = self.lock();
        let state = std::mem::take(&mut s.state);
        (state, s.message.take(), s.finish_reason.unwrap_or(FinishReason::Stop))
    }

    /// Moves the session's messages out of the turn, leaving none (for the
    /// built-in handler, which sets them again when it succeeds; on failure
    /// the turn's state is discarded).
    pub(crate) fn take_messages(&self) -> Vec<Message> {
        std::mem::take(&mut self.lock().state.messages)
    }
}

/// The last model message of `messages`: a turn's output message when its
/// handler set none.
pub(crate) fn last_model(messages: &[Message]) -> Option<&Message> {
    messages.iter().rev().find(|m| m.role == Role::Model)
}
