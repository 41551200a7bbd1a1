//! The generate loop (docs/reference.md §4): model call, concurrent tool calls, next
//! model call, until the model stops, a call pauses, or `max_turns` is hit.

mod dispatch;
mod resume;

use std::sync::Arc;

use serde_json::{Map, Value};
use tracing::Instrument;

pub use resume::{Resume, validate as validate_resume};

use crate::error::{Error, Result};
use crate::message::{Message, Part, Role, metadata};
use crate::middleware::{
    Chain, IterationFn, IterationInfo, IterationOutcome, IterationReport, Middleware, RestartPlan,
};
use crate::model::{ChunkSink, FinishReason, GenerateChunk, GenerateRequest, GenerateResponse, Model, Usage};
use crate::tool::{Tool, ToolOutcome};
pub(crate) use dispatch::Toolset;
use dispatch::{Dispatcher, PlannedCall};

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
    generate_with(options, resume.as_ref(), toolset, true).await
}

/// [`generate`] with the tool set built beforehand from `options.tools`
/// (prompt agents build theirs once) and the resume lent rather than moved
/// in (`options.resume` is ignored; a turn's input keeps its own). With
/// `keep_request` false the response's `request` stays `None`, and each
/// model call gets the request without a copy being kept (agent turns
/// never read it).
pub(crate) async fn generate_with(
    options: GenerateOptions,
    resume: Option<&Resume>,
    toolset: Arc<Toolset>,
    keep_request: bool,
) -> Result<Generation> {
    let span = tracing::info_span!("generate", model = %options.model.name());
    run(options, resume, toolset, keep_request).instrument(span).await
}

fn fresh_ref(taken: &[String]) -> String {
    loop {
        let candidate = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        if !taken.contains(&candidate) {
            return candidate;
        }
    }
}

/// Gives every tool request without a ref — or with a ref an earlier call
/// of the same name already uses — a fresh ref unique in the message, so
/// every call can be answered by name and ref.
fn assign_refs(message: &mut Message) {
    let mut taken: Vec<String> = message
        .content
        .iter()
        .filter_map(|p| p.as_tool_request().and_then(|r| r.reference.clone()))
        .collect();
    let mut seen: Vec<(String, String)> = Vec::new();
    for part in &mut message.content {
        let Some(req) = part.as_tool_request_mut() else {
            continue;
        };
        let duplicate = req
            .reference
            .as_ref()
            .is_some_and(|r| seen.iter().any(|(n, s)| *n == req.name && s == r));
        if req.reference.is_none() || duplicate {
            let r = fresh_ref(&taken);
            taken.push(r.clone());
            req.reference = Some(r);
        }
        if let Some(r) = &req.reference {
            seen.push((req.name.clone(), r.clone()));
        }
    }
}

struct Loop {
    model: Arc<dyn Model>,
    system: Option<Message>,
    config: Option<Value>,
    dispatcher: Dispatcher,
    usage: Usage,
    index: u32,
    last_request: Option<GenerateRequest>,
    /// Whether to keep `last_request` (a copy of every request) at all.
    keep_request: bool,
    /// How long the history was at the last seam. The loop only appends
    /// after a seam (and marks parts of messages appended since), so
    /// `history[..seam]` is the history as it stood there.
    seam: Option<usize>,
}

impl Loop {
    fn request(&self, history: &[Message]) -> GenerateRequest {
        let mut messages = Vec::with_capacity(history.len() + usize::from(self.system.is_some()));
        messages.extend(self.system.iter().cloned());
        messages.extend(history.iter().cloned());
        let mut req = GenerateRequest::new(messages);
        req.tools = Arc::clone(&self.dispatcher.tools.definitions);
        req.config = self.config.clone();
        req
    }

    fn seam(&mut self, history: &[Message]) {
        self.seam = Some(history.len());
    }

    fn emit_tool_chunk(&self, parts: Vec<Part>) {
        let mut chunk = GenerateChunk::new(Role::Tool, parts);
        chunk.index = Some(self.index);
        self.dispatcher.sink.send(chunk);
    }

    fn interrupted(&mut self, history: Vec<Message>) -> Generation {
        Generation {
            response: GenerateResponse {
                message: history.last().cloned(),
                finish_reason: Some(FinishReason::Interrupted),
                finish_message: Some(INTERRUPTED_MESSAGE.to_owned()),
                usage: self.usage.clone(),
                custom: Value::Object(Map::new()),
                // The loop ends here: hand the request over, no copy.
                request: self.last_request.take(),
                latency_ms: None,
            },
            messages: history,
        }
    }
}

async fn run(
    options: GenerateOptions,
    resume: Option<&Resume>,
    tools: Arc<Toolset>,
    keep_request: bool,
) -> Result<Generation> {
    let mut lp = Loop {
        model: options.model,
        system: options.system,
        config: options.config,
        dispatcher: Dispatcher {
            tools,
            chain: Chain::new(&options.middleware),
            sink: options.chunks,
            context: options.context,
        },
        usage: Usage::default(),
        index: 0,
        last_request: None,
        keep_request,
        seam: None,
    };
    let mut history = options.messages;
    let on_seam = options.on_seam;
    let result = run_loop(&mut lp, &mut history, resume, options.max_turns).await;
    if result.is_err()
        && let (Some(hook), Some(at)) = (on_seam, lp.seam)
        && let Some(kept) = history.get(..at)
    {
        hook(kept);
    }
    result
}

/// The loop itself: resume, then model calls and tool rounds until the
/// model answers or a call pauses.
async fn run_loop(
    lp: &mut Loop,
    history: &mut Vec<Message>,
    resume: Option<&Resume>,
    max_turns: u32,
) -> Result<Generation> {
    match resume {
        // The history as given is where a failed loop without a resume
        // goes back to: nothing of this loop ran yet.
        None => lp.seam(history),
        Some(resume) => resume::validate(history, resume)?,
    }
    if let Some(resume) = resume {
        match resume::apply(history, resume, &lp.dispatcher, lp.index).await? {
            resume::Applied::Interrupted => return Ok(lp.interrupted(std::mem::take(history))),
            resume::Applied::Continue(tool_message) => {
                if lp.dispatcher.sink.is_listening() {
                    lp.emit_tool_chunk(tool_message.content.clone());
                }
                history.push(tool_message);
                lp.index += 1;
                lp.seam(history);
            }
        }
    }

    let mut rounds: u32 = 0;
    loop {
        let step = if lp.dispatcher.chain.is_empty() {
            iteration(lp, history, &mut rounds, max_turns).await?
        } else {
            let chain = lp.dispatcher.chain.clone();
            let info = IterationInfo {
                round: rounds,
                context: Arc::clone(&lp.dispatcher.context),
            };
            let mut step = None;
            let slot = &mut step;
            let (lp, history, rounds) = (&mut *lp, &mut *history, &mut rounds);
            let run: IterationFn<'_> = Box::new(move || {
                Box::pin(async move {
                    let done = iteration(lp, history, rounds, max_turns).await?;
                    let report = done.report(history);
                    *slot = Some(done);
                    Ok(report)
                })
            });
            chain.call_iteration(info, run).await?;
            step.ok_or_else(|| {
                Error::FailedPrecondition(
                    "a middleware's iteration hook returned without running the iteration (call next.run())".into(),
                )
            })?
        };
        if let Step::Done(generation) = step {
            return Ok(*generation);
        }
    }
}

/// How one iteration of the loop ended.
enum Step {
    /// Tools answered; the loop calls the model again.
    Continue,
    /// The generation is over (the model answered, or a call paused).
    Done(Box<Generation>),
}

impl Step {
    /// What an iteration hook is told; `history` is the loop's history
    /// after a `Continue`.
    fn report(&self, history: &[Message]) -> IterationReport {
        match self {
            Step::Continue => IterationReport {
                message: history.iter().rev().find(|m| m.role == Role::Model).cloned(),
                outcome: IterationOutcome::Continue,
            },
            Step::Done(g) => IterationReport {
                message: g.response.message.clone(),
                outcome: if g.is_interrupted() {
                    IterationOutcome::Interrupted
                } else {
                    IterationOutcome::Finished
                },
            },
        }
    }
}

/// One iteration: a model call, then the tool calls it asks for.
async fn iteration(lp: &mut Loop, history: &mut Vec<Message>, rounds: &mut u32, max_turns: u32) -> Result<Step> {
    let request = lp.request(history);
    let index = lp.index;
    let outer = lp.dispatcher.sink.clone();
    let sink = if outer.is_listening() {
        ChunkSink::new(move |mut chunk: GenerateChunk| {
            chunk.index = Some(index);
            if chunk.role.is_none() {
                chunk.role = Some(Role::Model);
            }
            outer.send(chunk);
        })
    } else {
        ChunkSink::none()
    };
    let (request, kept) = if lp.keep_request {
        (request.clone(), Some(request))
    } else {
        (request, None)
    };
    let started = std::time::Instant::now();
    let mut response = lp
        .dispatcher
        .chain
        .call_model(lp.model.as_ref(), request, &sink)
        .instrument(tracing::debug_span!("model_call", index))
        .await?;
    lp.usage.add(&response.usage);
    lp.last_request = kept;
    let Some(mut message) = response.message.take() else {
        return Err(Error::with_status(
            crate::Status::Internal,
            format!("model \"{}\" returned no message", lp.model.name()),
        ));
    };
    message.role = Role::Model;
    assign_refs(&mut message);

    let calls: Vec<PlannedCall> = message
        .tool_requests()
        .filter_map(Part::as_tool_request)
        .map(|r| PlannedCall {
            name: r.name.clone(),
            reference: r.reference.clone(),
            input: r.input.clone().unwrap_or(Value::Object(Map::new())),
            plan: RestartPlan::default(),
        })
        .collect();
    lp.index += 1;
    if calls.is_empty() {
        history.push(message.clone());
        response.message = Some(message);
        response.usage = lp.usage.clone();
        response.request = lp.last_request.take();
        response
            .latency_ms
            .get_or_insert(started.elapsed().as_secs_f64() * 1000.0);
        return Ok(Step::Done(Box::new(Generation {
            response,
            messages: std::mem::take(history),
        })));
    }
    if *rounds >= max_turns {
        return Err(Error::MaxTurnsExceeded(max_turns));
    }
    *rounds += 1;
    // The tool-call names and refs are read from here once the calls
    // ran; the history gets the message itself.
    let requests: Vec<(String, Option<String>)> = message
        .tool_requests()
        .filter_map(Part::as_tool_request)
        .map(|r| (r.name.clone(), r.reference.clone()))
        .collect();
    history.push(message);

    let results = dispatch::run_all_lending(&lp.dispatcher, calls, lp.index, history).await?;
    let paused = results.iter().any(|r| matches!(r.outcome, ToolOutcome::Interrupt(_)));
    if paused {
        if let Some(last) = history.last_mut() {
            let requests = last.content.iter_mut().filter(|p| p.as_tool_request().is_some());
            for (part, result) in requests.zip(&results) {
                match &result.outcome {
                    ToolOutcome::Interrupt(data) => dispatch::mark_interrupt(part, data, result.held_by.as_ref()),
                    other => {
                        if let Some(v) = dispatch::pending_value(other) {
                            part.set_meta(metadata::PENDING_OUTPUT, v);
                        }
                    }
                }
            }
        }
        return Ok(Step::Done(Box::new(lp.interrupted(std::mem::take(history)))));
    }
    let responses: Vec<Part> = requests
        .iter()
        .zip(&results)
        .filter_map(|((name, reference), res)| dispatch::response_part(name, reference.as_deref(), &res.outcome))
        .collect();
    if lp.dispatcher.sink.is_listening() {
        lp.emit_tool_chunk(responses.clone());
    }
    history.push(Message::new(Role::Tool, responses));
    lp.index += 1;
    lp.seam(history);
    Ok(Step::Continue)
}
