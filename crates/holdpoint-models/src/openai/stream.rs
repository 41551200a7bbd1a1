//! Assembling a streamed Chat Completion: text and reasoning deltas are
//! streamed as chunks; tool calls arrive in pieces keyed by `index` (id and
//! name first, then argument text) and are joined into whole tool requests.
//! The stream is complete at `data: [DONE]` (or, for servers that omit it,
//! once a finish reason came); ending before is an `INTERNAL` error.

use holdpoint::model::{ChunkSink, GenerateChunk, GenerateResponse};
use holdpoint::{Message, Part, PartKind, Result, Role, Status};
use reqwest::Response;

use super::convert;
use super::wire::{ChatChunk, ChatUsage, ToolCallDelta};
use crate::http::{HttpClient, status_for};
use crate::sse::EventReader;

struct CallSlot {
    index: Option<u32>,
    id: Option<String>,
    name: String,
    arguments: String,
}

#[derive(Default)]
struct Assembly {
    text: String,
    reasoning: String,
    refusal: String,
    calls: Vec<CallSlot>,
    finish_reason: Option<String>,
    usage: Option<ChatUsage>,
}

impl Assembly {
    /// Folds one chunk in; returns the parts to stream.
    fn add(&mut self, chunk: ChatChunk) -> Vec<Part> {
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        let mut streamed = Vec::new();
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            let delta = choice.delta;
            if let Some(r) = delta.reasoning_content.or(delta.reasoning).filter(|r| !r.is_empty()) {
                self.reasoning.push_str(&r);
                streamed.push(Part::from_kind(PartKind::Reasoning(r)));
            }
            if let Some(t) = delta.content.filter(|t| !t.is_empty()) {
                self.text.push_str(&t);
                streamed.push(Part::text(t));
            }
            if let Some(r) = delta.refusal {
                self.refusal.push_str(&r);
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.add_call(call);
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
        }
        streamed
    }

    fn add_call(&mut self, delta: ToolCallDelta) {
        let slot = self
            .calls
            .iter()
            .rposition(|s| delta.index.is_none() || s.index == delta.index)
            .filter(|&i| {
                // A new id at a known index opens a new call (Ollama sends
                // parallel calls all at index 0, told apart by id).
                match (&self.calls[i].id, &delta.id) {
                    (Some(old), Some(new)) => old == new,
                    _ => true,
                }
            });
        let i = match slot {
            Some(i) => i,
            None => {
                self.calls.push(CallSlot {
                    index: delta.index,
                    id: None,
                    name: String::new(),
                    arguments: String::new(),
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[i];
        if call.id.is_none() {
            call.id = delta.id.filter(|id| !id.is_empty());
        }
        if let Some(f) = delta.function {
            if let Some(name) = f.name
                && call.name.is_empty()
            {
                call.name = name;
            }
            if let Some(args) = f.arguments {
                call.arguments.push_str(&args);
            }
        }
    }
}

/// Reads the stream to its end, streaming text to `chunks`.
pub(crate) async fn read(resp: Response, http: &HttpClient, chunks: &ChunkSink) -> Result<GenerateResponse> {
    let mut events = EventReader::new(resp, http);
    let mut assembly = Assembly::default();
    let mut done = false;
    while let Some(event) = events.next().await? {
        let data = event.data.trim();
        if data == "[DONE]" {
            done = true;
            break;
        }
        if data.is_empty() {
            continue;
        }
        let chunk: ChatChunk = events.decode(&event)?;
        if let Some(err) = &chunk.error {
            let status = err
                .get("code")
                .and_then(serde_json::Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .and_then(|c| reqwest::StatusCode::from_u16(c).ok())
                .map(status_for)
                .unwrap_or(Status::Unavailable);
            let message = err
                .get("message")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| err.to_string());
            return Err(http.error(status, format!("stream failed: {message}")));
        }
        let streamed = assembly.add(chunk);
        if !streamed.is_empty() {
            chunks.send(GenerateChunk::new(Role::Model, streamed));
        }
    }
    if !done && assembly.finish_reason.is_none() {
        return Err(events.truncated("a finish_reason or [DONE]"));
    }
    let calls = assembly
        .calls
        .into_iter()
        .map(|c| (c.id, c.name, c.arguments))
        .collect();
    let refused = !assembly.refusal.is_empty() && assembly.text.is_empty();
    let text = if refused {
        assembly.refusal.clone()
    } else {
        assembly.text
    };
    let parts = convert::parts(http, Some(assembly.reasoning), Some(text), calls)?;
    let mut response = GenerateResponse::from_message(Message::new(Role::Model, parts));
    response.finish_reason = Some(convert::finish_reason(assembly.finish_reason.as_deref()));
    if refused {
        response.finish_reason = Some(holdpoint::FinishReason::Blocked);
        response.finish_message = Some(assembly.refusal);
    }
    response.usage = convert::usage(assembly.usage.as_ref());
    Ok(response)
}
