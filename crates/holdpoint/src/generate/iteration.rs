//! One iteration of the loop: a model call, refs for its tool requests,
//! then the tool calls it asks for, run concurrently; a pause marks the
//! paused requests and ends the generation. The loop's state ([`Loop`])
//! is here too: `run` builds it and lends it to each iteration.

use std::sync::Arc;

use serde_json::{Map, Value};
use tracing::Instrument;

use crate::error::{Error, Result};
use crate::message::{Message, Part, Role, metadata};
use crate::middleware::{IterationOutcome, IterationReport, RestartPlan};
use crate::model::{ChunkSink, FinishReason, GenerateChunk, GenerateRequest, GenerateResponse, Model, Usage};
use crate::tool::ToolOutcome;

use super::dispatch::{Dispatcher, PlannedCall};
use super::{Generation, INTERRUPTED_MESSAGE, dispatch};

/// The state of one generate loop, lent to each iteration.
pub(super) struct Loop {
    pub(super) model: Arc<dyn Model>,
    pub(super) system: Option<Message>,
    pub(super) config: Option<Value>,
    pub(super) dispatcher: Dispatcher,
    pub(super) usage: Usage,
    pub(super) index: u32,
    pub(super) last_request: Option<GenerateRequest>,
    /// Whether to keep `last_request` (a copy of every request) at all.
    pub(super) keep_request: bool,
    /// Whether the final model message stays only in the history, its
    /// last entry, with `response.message` left `None` (an agent's turn
    /// reads it there: no copy of the message). `generate` callers get
    /// it in the response as well.
    pub(super) message_in_history: bool,
    /// How long the history was at the last seam. The loop only appends
    /// after a seam (and marks parts of messages appended since), so
    /// `history[..seam]` is the history as it stood there.
    pub(super) seam: Option<usize>,
}

impl Loop {
    pub(super) fn request(&self, history: &[Message]) -> GenerateRequest {
        let mut messages = Vec::with_capacity(history.len() + usize::from(self.system.is_some()));
        messages.extend(self.system.iter().cloned());
        messages.extend(history.iter().cloned());
        let mut req = GenerateRequest::new(messages);
        req.tools = Arc::clone(&self.dispatcher.tools.definitions);
        req.config = self.config.clone();
        req
    }

    pub(super) fn seam(&mut self, history: &[Message]) {
        self.seam = Some(history.len());
    }

    pub(super) fn emit_tool_chunk(&self, parts: Vec<Part>) {
        let mut chunk = GenerateChunk::new(Role::Tool, parts);
        chunk.index = Some(self.index);
        self.dispatcher.sink.send(chunk);
    }

    pub(super) fn interrupted(&mut self, history: Vec<Message>) -> Generation {
        let message = match history.last() {
            Some(last) if self.message_in_history && last.role == Role::Model => None,
            last => last.cloned(),
        };
        Generation {
            response: GenerateResponse {
                message,
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

/// How one iteration of the loop ended.
pub(super) enum Step {
    /// Tools answered; the loop calls the model again.
    Continue,
    /// The generation is over (the model answered, or a call paused).
    Done(Box<Generation>),
}

impl Step {
    /// What an iteration hook is told; `history` is the loop's history
    /// after a `Continue`.
    pub(super) fn report(&self, history: &[Message]) -> IterationReport {
        match self {
            Step::Continue => IterationReport {
                message: history.iter().rev().find(|m| m.role == Role::Model).cloned(),
                outcome: IterationOutcome::Continue,
            },
            Step::Done(g) => IterationReport {
                // A message left in the history (`Loop::message_in_history`)
                // is its last entry, a model message.
                message: g
                    .response
                    .message
                    .clone()
                    .or_else(|| g.messages.last().filter(|m| m.role == Role::Model).cloned()),
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
pub(super) async fn iteration(
    lp: &mut Loop,
    history: &mut Vec<Message>,
    rounds: &mut u32,
    max_turns: u32,
) -> Result<Step> {
    let started = std::time::Instant::now();
    let (mut response, message) = call_model(lp, history).await?;
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
        if lp.message_in_history {
            history.push(message);
        } else {
            history.push(message.clone());
            response.message = Some(message);
        }
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
    run_calls(lp, history, message, calls).await
}

/// The model call of an iteration, its chunks streamed with the
/// iteration's index: the response (its message taken out) and the
/// model message, refs assigned.
async fn call_model(lp: &mut Loop, history: &[Message]) -> Result<(GenerateResponse, Message)> {
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
    Ok((response, message))
}

/// Runs the tool calls `message` asks for: the loop goes on with their
/// responses, or stops when any of them paused (the others keep their
/// output on the paused message).
async fn run_calls(
    lp: &mut Loop,
    history: &mut Vec<Message>,
    message: Message,
    calls: Vec<PlannedCall>,
) -> Result<Step> {
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
            // The results end here: their interrupt data moves into the
            // paused parts.
            for (part, result) in requests.zip(results) {
                match result.outcome {
                    ToolOutcome::Interrupt(data) => {
                        dispatch::mark_interrupt(part, std::borrow::Cow::Owned(data), result.held_by.as_ref());
                    }
                    other => {
                        if let Some(v) = dispatch::pending_value(&other) {
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
