//! Holdpoint request -> Messages API request, and an answer -> Holdpoint
//! message, finish reason and usage.

use holdpoint::model::{FinishReason, GenerateRequest, Usage};
use holdpoint::{Error, Message, Part, PartKind, Result, Role, Status};
use serde_json::{Map, Value};

use super::wire::{
    ImageSource, MessagesRequest, RequestBlock, ResponseBlock, Thinking, Tool, ToolChoice, WireMessage, WireUsage,
};
use crate::config::ModelConfig;
use crate::content::{data_text, output_text, parse_data_uri, soft_failure, system_text};
use crate::schema::{Dialect, tool_input};

/// Part-metadata key holding the signature of an Anthropic thinking
/// block, which must go back with the block on later turns.
pub const THINKING_SIGNATURE: &str = "thinkingSignature";

/// Builds the request body (without `stream`).
pub(crate) fn to_request(
    request: &GenerateRequest,
    config: &ModelConfig,
    model: String,
    default_max_tokens: u32,
) -> Result<MessagesRequest> {
    let mut messages: Vec<WireMessage> = Vec::new();
    for message in request.messages.iter().filter(|m| m.role != Role::System) {
        let role = if message.role == Role::Model {
            "assistant"
        } else {
            "user"
        };
        let blocks: Vec<RequestBlock> = message
            .content
            .iter()
            .enumerate()
            .filter_map(|(i, p)| to_block(i, p))
            .collect();
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => messages.push(WireMessage { role, content: blocks }),
        }
    }
    let tools = request
        .tools
        .iter()
        .map(|t| Tool {
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema: tool_input(t.input_schema.as_ref(), Dialect::JsonSchema),
        })
        .collect();
    let tool_choice = match request.tool_choice.as_deref() {
        None => None,
        Some("auto") => Some(ToolChoice { kind: "auto" }),
        Some("required") => Some(ToolChoice { kind: "any" }),
        Some("none") => Some(ToolChoice { kind: "none" }),
        Some(other) => {
            return Err(Error::with_status(
                Status::InvalidArgument,
                format!("unknown tool choice \"{other}\" (auto, required or none)"),
            ));
        }
    };
    Ok(MessagesRequest {
        model,
        max_tokens: config.max_output_tokens.unwrap_or(default_max_tokens),
        messages,
        system: system_text(&request.messages),
        tools,
        tool_choice,
        temperature: config.temperature,
        top_p: config.top_p,
        top_k: config.top_k,
        stop_sequences: config.stop_sequences.clone(),
        thinking: config.budget_tokens.map(|budget_tokens| Thinking {
            kind: "enabled",
            budget_tokens,
        }),
        stream: None,
    })
}

fn to_block(index: usize, part: &Part) -> Option<RequestBlock> {
    Some(match &part.kind {
        // Anthropic rejects empty text blocks.
        PartKind::Text(t) if t.is_empty() => return None,
        PartKind::Text(t) => RequestBlock::Text { text: t.clone() },
        PartKind::Data(v) => RequestBlock::Text { text: data_text(v) },
        PartKind::Media(m) => RequestBlock::Image {
            source: match parse_data_uri(&m.url) {
                Some((mime, data)) => ImageSource::Base64 {
                    media_type: m.content_type.clone().unwrap_or(mime),
                    data,
                },
                None => ImageSource::Url { url: m.url.clone() },
            },
        },
        PartKind::Reasoning(text) => {
            // Thinking goes back only with its signature.
            let signature = part.meta(THINKING_SIGNATURE)?.as_str()?.to_owned();
            RequestBlock::Thinking {
                thinking: text.clone(),
                signature,
            }
        }
        PartKind::ToolRequest(r) => RequestBlock::ToolUse {
            id: r.reference.clone().unwrap_or_else(|| format!("toolu_{index}")),
            name: r.name.clone(),
            input: r.input.clone().unwrap_or_else(|| Value::Object(Map::new())),
        },
        PartKind::ToolResponse(r) => {
            // A soft failure is sent as an error result, as Anthropic asks.
            let failure = soft_failure(r.output.as_ref());
            RequestBlock::ToolResult {
                tool_use_id: r.reference.clone().unwrap_or_else(|| format!("toolu_{index}")),
                content: failure.map_or_else(|| output_text(r.output.as_ref()), str::to_owned),
                is_error: failure.map(|_| true),
            }
        }
        PartKind::Resource(_) | PartKind::Custom(_) => return None,
    })
}

/// A response block as a Holdpoint part.
pub(crate) fn from_block(block: ResponseBlock) -> Option<Part> {
    match block {
        ResponseBlock::Text { text } => Some(Part::text(text)),
        ResponseBlock::ToolUse { id, name, input } => {
            let input = if input.is_null() {
                Value::Object(Map::new())
            } else {
                input
            };
            Some(Part::tool_request(name, Some(id), Some(input)))
        }
        ResponseBlock::Thinking { thinking, signature } => Some(reasoning(thinking, signature)),
        ResponseBlock::Other => None,
    }
}

/// A reasoning part carrying its signature.
pub(crate) fn reasoning(text: String, signature: String) -> Part {
    let mut part = Part::from_kind(PartKind::Reasoning(text));
    if !signature.is_empty() {
        part.set_meta(THINKING_SIGNATURE, Value::String(signature));
    }
    part
}

/// A whole answer's message.
pub(crate) fn message(blocks: Vec<ResponseBlock>) -> Message {
    Message::new(Role::Model, blocks.into_iter().filter_map(from_block).collect())
}

/// The stop reason as Holdpoint's finish reason.
pub(crate) fn finish_reason(reason: Option<&str>) -> FinishReason {
    match reason {
        Some("end_turn" | "stop_sequence" | "tool_use") => FinishReason::Stop,
        Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
        Some("refusal") => FinishReason::Blocked,
        None => FinishReason::Unknown,
        Some(_) => FinishReason::Other,
    }
}

/// Token counts as Holdpoint's.
pub(crate) fn usage(u: Option<&WireUsage>) -> Usage {
    let Some(u) = u else {
        return Usage::default();
    };
    let total = match (u.input_tokens, u.output_tokens) {
        (Some(i), Some(o)) => Some(i.saturating_add(o)),
        _ => None,
    };
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        total_tokens: total,
        thoughts_tokens: None,
        cached_content_tokens: u.cache_read_input_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn soft_failures_become_error_results_and_roles_merge() {
        let req = GenerateRequest::new(vec![
            Message::new(Role::System, vec![Part::text("sys")]),
            Message::user_text("hi"),
            Message::new(
                Role::Model,
                vec![Part::text(""), Part::tool_request("t", Some("tu1".into()), None)],
            ),
            Message::new(
                Role::Tool,
                vec![Part::tool_response(
                    "t",
                    Some("tu1".into()),
                    Some(json!({"error": "no"})),
                )],
            ),
            Message::user_text("and?"),
        ]);
        let body = to_request(&req, &ModelConfig::default(), "m".into(), 1024).unwrap();
        let v = serde_json::to_value(body).unwrap();
        assert_eq!(v["system"], "sys");
        assert_eq!(v["max_tokens"], 1024);
        assert_eq!(
            v["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "tu1", "name": "t", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "tu1", "content": "no", "is_error": true},
                    {"type": "text", "text": "and?"}
                ]}
            ])
        );
    }
}
