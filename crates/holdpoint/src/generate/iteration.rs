//! One iteration of the loop: a model call, refs for its tool requests,
//! then the tool calls it asks for, run concurrently; a pause marks the
//! paused requests and ends the generation.

use serde_json::{Map, Value};
use tracing::Instrument;

use crate::error::{Error, Result};
use crate::message::{Message, Part, Role, metadata};
use crate::middleware::{IterationOutcome, IterationReport, RestartPlan};
use crate::model::{ChunkSink, GenerateChunk};
use crate::tool::ToolOutcome;

use super::dispatch::PlannedCall;
use super::run::Loop;
use super::{Generation, dispatch};

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
pub(super) async fn iteration(
    lp: &mut Loop,
    history: &mut Vec<Message>,
    rounds: &mut u32,
    max_turns: u32,
) -> Result<Step> {
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
