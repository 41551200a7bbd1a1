//! Assembling a `streamGenerateContent?alt=sse` stream: each event is a
//! whole `GenerateContentResponse` holding the next parts; text deltas are
//! streamed as chunks and joined into the final message, function calls
//! arrive whole. The stream is complete once a candidate carries a
//! `finishReason` (or the prompt was blocked); ending before that is an
//! `INTERNAL` error.

use holdpoint::model::{ChunkSink, GenerateChunk, GenerateResponse};
use holdpoint::{Message, Part, PartKind, Result, Role};
use reqwest::Response;
use serde_json::{Map, Value};

use super::convert::{self, THOUGHT_SIGNATURE};
use super::wire::{GenerateContentResponse, PromptFeedback, UsageMetadata};
use crate::http::{HttpClient, status_for};
use crate::sse::EventReader;

#[derive(Default)]
struct Assembly {
    parts: Vec<Part>,
    finish_reason: Option<String>,
    finish_message: Option<String>,
    usage: Option<UsageMetadata>,
    blocked: Option<PromptFeedback>,
}

impl Assembly {
    /// Folds one event in; returns the parts to stream.
    fn add(&mut self, event: GenerateContentResponse) -> Vec<Part> {
        if event.usage_metadata.is_some() {
            self.usage = event.usage_metadata;
        }
        if let Some(feedback) = event.prompt_feedback
            && feedback.block_reason.is_some()
        {
            self.blocked = Some(feedback);
        }
        let Some(candidate) = event.candidates.into_iter().next() else {
            return Vec::new();
        };
        if candidate.finish_reason.is_some() {
            self.finish_reason = candidate.finish_reason;
            self.finish_message = candidate.finish_message;
        }
        let mut streamed = Vec::new();
        for wire in candidate.content.map(|c| c.parts).unwrap_or_default() {
            let Some(part) = convert::from_wire_part(wire) else {
                continue;
            };
            if matches!(&part.kind, PartKind::Text(_) | PartKind::Reasoning(_)) {
                let mut delta = part.clone();
                delta.metadata = None;
                if delta.as_text().is_some_and(|t| !t.is_empty())
                    || matches!(&delta.kind, PartKind::Reasoning(t) if !t.is_empty())
                {
                    streamed.push(delta);
                }
            }
            self.push(part);
        }
        streamed
    }

    /// Appends a part, joining text to text and reasoning to reasoning.
    fn push(&mut self, part: Part) {
        let sig = part.meta(THOUGHT_SIGNATURE).cloned();
        if part.as_text() == Some("") && sig.is_none() {
            return;
        }
        if let Some(last) = self.parts.last_mut() {
            let joined = match (&mut last.kind, &part.kind) {
                (PartKind::Text(a), PartKind::Text(b)) | (PartKind::Reasoning(a), PartKind::Reasoning(b)) => {
                    a.push_str(b);
                    true
                }
                // A signature-only empty text part belongs to what came before.
                (_, PartKind::Text(b)) if b.is_empty() => true,
                _ => false,
            };
            if joined {
                if let Some(sig) = sig
                    && last.meta(THOUGHT_SIGNATURE).is_none()
                {
                    last.set_meta(THOUGHT_SIGNATURE, sig);
                }
                return;
            }
        }
        self.parts.push(part);
    }
}

/// Reads the stream to its end, streaming text to `chunks`.
pub(crate) async fn read(resp: Response, http: &HttpClient, chunks: &ChunkSink) -> Result<GenerateResponse> {
    let mut events = EventReader::new(resp, http);
    let mut assembly = Assembly::default();
    while let Some(event) = events.next().await? {
        if event.data.trim().is_empty() {
            continue;
        }
        let decoded: GenerateContentResponse = events.decode(&event)?;
        if let Some(err) = decoded.error {
            let status = err
                .code
                .and_then(|c| reqwest::StatusCode::from_u16(c).ok())
                .map(status_for)
                .unwrap_or(holdpoint::Status::Unavailable);
            return Err(http.error(
                status,
                format!("stream failed: {}", err.message.unwrap_or_else(|| "no message".into())),
            ));
        }
        let streamed = assembly.add(decoded);
        if !streamed.is_empty() {
            chunks.send(GenerateChunk::new(Role::Model, streamed));
        }
    }
    if assembly.finish_reason.is_none() && assembly.blocked.is_none() {
        return Err(events.truncated("a candidate with a finishReason"));
    }
    let mut response = GenerateResponse::from_message(Message::new(Role::Model, assembly.parts));
    response.usage = convert::usage(assembly.usage.as_ref());
    match (assembly.finish_reason, assembly.blocked) {
        (Some(reason), _) => {
            response.finish_reason = Some(convert::finish_reason(Some(&reason)));
            response.finish_message = assembly.finish_message;
        }
        (None, Some(feedback)) => {
            response.finish_reason = Some(holdpoint::FinishReason::Blocked);
            response.finish_message = feedback.block_reason_message.or(feedback.block_reason);
        }
        (None, None) => {}
    }
    response.custom = Value::Object(Map::new());
    Ok(response)
}
