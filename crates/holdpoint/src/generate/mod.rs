//! The generate loop (docs/reference.md §4): model call, concurrent tool calls, next
//! model call, until the model stops, a call pauses, or `max_turns` is hit.
//!
//! The options and the entry points are here; the loop is in `run.rs`, one
//! iteration in `iteration.rs`, tool dispatch in `dispatch.rs` and the
//! resume of paused calls in `resume.rs`.

mod dispatch;
mod iteration;
mod resume;
mod run;

use std::sync::Arc;

use serde_json::{Map, Value};
use tracing::Instrument;

pub use resume::validate as validate_resume;

pub use crate::message::resume::Resume;

use crate::error::Result;
use crate::message::Message;
use crate::middleware::Middleware;
use crate::model::{ChunkSink, FinishReason, GenerateResponse, Model};
use crate::tool::Tool;
pub(crate) use dispatch::Toolset;

/// The finish message of an interrupted generation.
pub const INTERRUPTED_MESSAGE: &str = "One or more tool calls resulted in interrupts.";

/// The default limit on tool-call rounds.
pub const DEFAULT_MAX_TURNS: u32 = 5;

/// Everything one generation needs.
///
/// ```
/// use std::sync::Arc;
/// use holdpoint::{generate, GenerateOptions, Message, ScriptedModel, ScriptedTurn};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let model = ScriptedModel::new("m");
/// model.push(ScriptedTurn::text("hello"));
/// let out = generate(GenerateOptions::new(Arc::new(model)).messages(vec![Message::user_text("hi")])).await?;
/// assert_eq!(out.response.text(), "hello");
/// # Ok::<(), holdpoint::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct GenerateOptions {
    /// The model to call.
    pub model: Arc<dyn Model>,
    /// A system prompt sent first on every model call (not part of the history).
    pub system: Option<Message>,
    /// The history so far.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<Arc<dyn Tool>>,
    /// Model config (temperature, …).
    pub config: Option<Value>,
    /// The limit on tool-call rounds (default 5).
    pub max_turns: u32,
    /// Answers to a paused generation whose history ends with the paused
    /// model message.
    pub resume: Option<Resume>,
    /// Hooks around model and tool calls, outermost first.
    pub middleware: Vec<Arc<dyn Middleware>>,
    /// Where streamed chunks go (model chunks and tool-role chunks).
    pub chunks: ChunkSink,
    /// Request context visible to tools and middleware (principal, …).
    pub context: Arc<Map<String, Value>>,
    /// Called once when the loop fails, with the history as it stood at
    /// the last seam, so a caller can keep what already ran. Seams are the
    /// start of a loop without a resume (the history as given) and the
    /// end of every completed tool round (the resume's own round
    /// included); a hard tool failure thus drops the round it opened. Not
    /// called when the loop succeeds, nor when a resume fails before its
    /// round completed.
    pub on_seam: Option<SeamHook>,
    /// The turn's approval receipts (set by prompt agents).
    pub(crate) receipts: Option<Arc<crate::receipt::TurnReceipts>>,
}

/// A callback that gets the history at the last seam of a failed loop.
pub type SeamHook = Arc<dyn Fn(&[Message]) + Send + Sync>;

impl GenerateOptions {
    /// Options for `model` with no history, tools or config.
    pub fn new(model: Arc<dyn Model>) -> Self {
        GenerateOptions {
            model,
            system: None,
            messages: Vec::new(),
            tools: Vec::new(),
            config: None,
            max_turns: DEFAULT_MAX_TURNS,
            resume: None,
            middleware: Vec::new(),
            chunks: ChunkSink::none(),
            context: Arc::new(Map::new()),
            on_seam: None,
            receipts: None,
        }
    }

    /// Sets the history.
    pub fn messages(mut self, messages: Vec<Message>) -> Self {
        self.messages = messages;
        self
    }

    /// Sets the tools (typed tools or `Arc<dyn Tool>`s, see
    /// [`IntoTool`](crate::tool::IntoTool)).
    pub fn tools<T: crate::tool::IntoTool>(mut self, tools: impl IntoIterator<Item = T>) -> Self {
        self.tools = tools.into_iter().map(crate::tool::IntoTool::into_tool).collect();
        self
    }

    /// Sets the resume directives.
    pub fn resume(mut self, resume: Resume) -> Self {
        self.resume = Some(resume);
        self
    }

    /// Sets the chunk sink.
    pub fn chunks(mut self, chunks: ChunkSink) -> Self {
        self.chunks = chunks;
        self
    }

    /// Sets the model config.
    pub fn config(mut self, config: Value) -> Self {
        self.config = Some(config);
        self
    }

    /// Sets the tool-round limit.
    pub fn max_turns(mut self, max_turns: u32) -> Self {
        self.max_turns = max_turns;
        self
    }
}

/// The result of a generation: the final response and the whole history
/// after it (the paused model message last, when interrupted).
#[derive(Debug, Clone)]
pub struct Generation {
    /// The final response (its `request` is the last model request).
    pub response: GenerateResponse,
    /// The history, including the final message.
    pub messages: Vec<Message>,
}

impl Generation {
    /// Whether a tool call paused.
    pub fn is_interrupted(&self) -> bool {
        self.response.finish_reason == Some(FinishReason::Interrupted)
    }
}

/// Runs the generate loop.
pub async fn generate(mut options: GenerateOptions) -> Result<Generation> {
    let toolset = Arc::new(Toolset::new(&options.tools));
    let resume = options.resume.take();
    generate_with(options, resume.as_ref(), toolset, Caller::Generate).await
}

/// Who runs the loop, which decides what it does for its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// [`generate`] itself: the resume is checked against the history
    /// here, and the response keeps the last request.
    Generate,
    /// An agent's turn: a resume that answers anything was checked by
    /// the decision path before its claim (`agent/decide.rs`), so it is
    /// not checked again;
    /// each model call gets the request without a copy being kept (turns
    /// never read it); the final model message is left in the history
    /// only (the response's `message` is `None`), where the turn reads it.
    Turn,
}

/// [`generate`] with the tool set built beforehand from `options.tools`
/// (prompt agents build theirs once) and the resume lent rather than moved
/// in (`options.resume` is ignored; a turn's input keeps its own).
pub(crate) async fn generate_with(
    options: GenerateOptions,
    resume: Option<&Resume>,
    toolset: Arc<Toolset>,
    caller: Caller,
) -> Result<Generation> {
    let span = tracing::info_span!("generate", model = %options.model.name());
    run::run(options, resume, toolset, caller).instrument(span).await
}
