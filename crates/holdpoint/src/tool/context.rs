//! What a running tool sees (`ToolContext`) and what it may return besides
//! its output (`ToolError`).

use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::message::{Part, Role, metadata};
use crate::model::{ChunkSink, GenerateChunk};

/// One tool call as handed to [`Tool::call`](super::Tool::call).
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The arguments (already validated against the input schema by typed tools).
    pub input: Value,
    /// The call's context: resume data, streaming, request context.
    pub context: ToolContext,
}

/// The context of one tool call.
#[derive(Debug, Clone, Default)]
pub struct ToolContext {
    pub(crate) name: String,
    pub(crate) reference: Option<String>,
    pub(crate) resumed: Option<Map<String, Value>>,
    pub(crate) original_input: Option<Value>,
    pub(crate) answered: Option<Map<String, Value>>,
    pub(crate) chunks: ChunkSink,
    pub(crate) index: u32,
    pub(crate) request: Arc<Map<String, Value>>,
    pub(crate) attached: Arc<Mutex<Vec<Part>>>,
    pub(crate) receipt: Option<Arc<str>>,
}

impl ToolContext {
    /// A context for calling a tool directly (tests, custom agents).
    pub fn new(name: impl Into<String>) -> Self {
        ToolContext {
            name: name.into(),
            ..Default::default()
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The ref of the request being answered.
    pub fn reference(&self) -> Option<&str> {
        self.reference.as_deref()
    }

    /// Resume data when this call is a restart (`Some({})` for a bare restart).
    pub fn resumed(&self) -> Option<&Map<String, Value>> {
        self.resumed.as_ref()
    }

    /// Whether this call is a restart of a paused call.
    pub fn is_resumed(&self) -> bool {
        self.resumed.is_some()
    }

    /// On a restart with new input: the input the model first produced.
    pub fn original_input(&self) -> Option<&Value> {
        self.original_input.as_ref()
    }

    /// The request context (for example the authenticated principal) the
    /// caller attached to the generation.
    pub fn request_context(&self) -> &Map<String, Value> {
        &self.request
    }

    /// On a restart of this tool's own interrupt: the interrupt data the
    /// call paused with, as the history records it — the stored (or signed)
    /// paused snapshot, never the client's resume data (`None` on a first
    /// call, and when a middleware raised the hold). Sub-agents find their
    /// child's snapshot here. A tool that keeps work open
    /// across a hold (a live call, a server's request state) finds it again
    /// through what it put there.
    pub fn answered_interrupt(&self) -> Option<&Map<String, Value>> {
        self.answered.as_ref()
    }

    /// Sets the interrupt data a restart answers (see
    /// [`answered_interrupt`](Self::answered_interrupt)); for calling a tool
    /// directly.
    pub fn with_answered_interrupt(mut self, data: Option<Map<String, Value>>) -> Self {
        self.answered = data;
        self
    }

    /// Marks this context as a restart with the given resume data.
    pub fn with_resumed(mut self, resumed: Option<Map<String, Value>>, original_input: Option<Value>) -> Self {
        self.resumed = resumed;
        self.original_input = original_input;
        self
    }

    /// The approval receipt of this call (docs/reference.md, "Approval
    /// receipts"): a signed token binding the hold, the tool, the input this
    /// call runs with and who decided. `Some` only when the call runs after
    /// a hold was approved, edited or answered, or a standing grant let it
    /// through, and the agent issues receipts
    /// ([`AgentBuilder::receipts`](crate::agent::AgentBuilder::receipts));
    /// pass it to the service the tool calls, which checks it with
    /// [`receipt::verify`](crate::receipt::verify).
    pub fn receipt(&self) -> Option<&str> {
        self.receipt.as_deref()
    }

    /// Sets the receipt (see [`receipt`](Self::receipt)); for calling a
    /// tool directly.
    pub fn with_receipt(mut self, receipt: Option<String>) -> Self {
        self.receipt = receipt.map(Arc::from);
        self
    }

    /// Streams a partial result; it is shown to listeners and never stored.
    pub fn send_partial(&self, output: Value) {
        let mut part = Part::tool_response(self.name.clone(), self.reference.clone(), Some(output));
        part.set_meta(metadata::PARTIAL, Value::Bool(true));
        let mut chunk = GenerateChunk::new(Role::Tool, vec![part]);
        chunk.index = Some(self.index);
        self.chunks.send(chunk);
    }

    /// Attaches an extra part (an image, a file, …) to this call's
    /// response; it is sent as the response's `content` when the call
    /// succeeds.
    pub fn attach(&self, part: Part) {
        self.attached.lock().unwrap_or_else(|e| e.into_inner()).push(part);
    }

    /// Takes the parts attached so far.
    pub(crate) fn take_attached(&self) -> Vec<Part> {
        std::mem::take(&mut *self.attached.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Builds the error that pauses this call with `data` (a JSON object).
    ///
    /// ```
    /// # use holdpoint::tool::{ToolContext, ToolError};
    /// let ctx = ToolContext::new("transferMoney");
    /// let err = ctx.interrupt(serde_json::json!({"details": "Transfer $500.00"}));
    /// assert!(matches!(err, ToolError::Interrupt(_)));
    /// ```
    pub fn interrupt(&self, data: impl Serialize) -> ToolError {
        match serde_json::to_value(data) {
            Ok(Value::Object(map)) => ToolError::Interrupt(map),
            Ok(Value::Bool(true)) | Ok(Value::Null) => ToolError::Interrupt(Map::new()),
            Ok(other) => ToolError::Error(format!("interrupt data must be a JSON object, got {}", short(&other))),
            Err(e) => ToolError::Error(format!("interrupt data does not serialise: {e}")),
        }
    }

    /// Builds a soft failure: the model sees `err` as the tool's result and
    /// the loop goes on.
    pub fn fail(&self, err: impl std::fmt::Display) -> ToolError {
        ToolError::Fail(err.to_string())
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!("{}…", &s[..s.floor_char_boundary(60)])
    } else {
        s
    }
}

/// What a tool function returns instead of an output.
///
/// Any error type converts into [`ToolError::Error`] with `?`, which fails
/// the whole generation; use [`ToolContext::interrupt`] and
/// [`ToolContext::fail`] for the other two outcomes.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolError {
    /// Pause the call with this data.
    Interrupt(Map<String, Value>),
    /// Soft failure: tell the model and go on.
    Fail(String),
    /// Hard error: the generation fails with `tool "X" failed: …`.
    Error(String),
}

impl<E> From<E> for ToolError
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn from(err: E) -> Self {
        ToolError::Error(err.into().to_string())
    }
}
