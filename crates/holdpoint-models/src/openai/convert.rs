//! Holdpoint request -> Chat Completions request, and a Chat Completions
//! answer -> Holdpoint message, finish reason and usage.

use holdpoint::model::{FinishReason, GenerateRequest, GenerateResponse, Usage};
use holdpoint::{Error, Message, Part, PartKind, Result, Role, Status};
use serde_json::{Map, Value};

use super::MaxTokensField;
use super::wire::{
    ChatMessage, ChatRequest, ChatResponse, ChatTool, ChatUsage, ContentPart, FunctionCall, FunctionDef, ImageUrl,
    JsonSchemaFormat, ResponseFormat, ToolCall, UserContent,
};
use crate::config::ModelConfig;
use crate::content::{data_text, output_text, parse_arguments};
use crate::http::HttpClient;
use crate::schema::{Dialect, shape, tool_input};

/// Builds the request body (without the streaming fields).
pub(crate) fn to_request(
    request: &GenerateRequest,
    config: &ModelConfig,
    model: String,
    max_field: MaxTokensField,
) -> Result<ChatRequest> {
    let mut messages = Vec::new();
    for message in &request.messages {
        push_message(&mut messages, message);
    }
    let tools = request
        .tools
        .iter()
        .map(|t| ChatTool {
            kind: "function",
            function: FunctionDef {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: tool_input(t.input_schema.as_ref(), Dialect::JsonSchema),
            },
        })
        .collect();
    let tool_choice = match request.tool_choice.as_deref() {
        None => None,
        Some(c @ ("auto" | "required" | "none")) => Some(c.to_owned()),
        Some(other) => {
            return Err(Error::with_status(
                Status::InvalidArgument,
                format!("unknown tool choice \"{other}\" (auto, required or none)"),
            ));
        }
    };
    let output = request.output_format();
    let response_format = output.json.then(|| match &output.schema {
        Some(schema) => ResponseFormat::JsonSchema {
            json_schema: JsonSchemaFormat {
                name: "output".to_owned(),
                schema: shape(schema, Dialect::JsonSchema),
            },
        },
        None => ResponseFormat::JsonObject,
    });
    let (max_completion_tokens, max_tokens) = match max_field {
        MaxTokensField::MaxCompletionTokens => (config.max_output_tokens, None),
        MaxTokensField::MaxTokens => (None, config.max_output_tokens),
    };
    Ok(ChatRequest {
        model,
        messages,
        tools,
        tool_choice,
        temperature: config.temperature,
        top_p: config.top_p,
        max_completion_tokens,
        max_tokens,
        stop: config.stop_sequences.clone(),
        seed: config.seed,
        presence_penalty: config.presence_penalty,
        frequency_penalty: config.frequency_penalty,
        reasoning_effort: config.reasoning_effort.clone(),
        response_format,
        stream: None,
        stream_options: None,
    })
}

fn push_message(out: &mut Vec<ChatMessage>, message: &Message) {
    match message.role {
        Role::System => out.push(ChatMessage::System {
            content: message.text(),
        }),
        Role::User => out.push(ChatMessage::User {
            content: user_content(&message.content),
        }),
        Role::Model => {
            let text = message.text();
            let tool_calls: Vec<ToolCall> = message
                .content
                .iter()
                .filter_map(Part::as_tool_request)
                .enumerate()
                .map(|(i, r)| ToolCall {
                    id: r.reference.clone().unwrap_or_else(|| format!("call_{i}")),
                    kind: "function".to_owned(),
                    function: FunctionCall {
                        name: r.name.clone(),
                        arguments: r.input.as_ref().map_or_else(|| "{}".to_owned(), Value::to_string),
                    },
                })
                .collect();
            if text.is_empty() && tool_calls.is_empty() {
                return;
            }
            out.push(ChatMessage::Assistant {
                content: (!text.is_empty()).then_some(text),
                tool_calls,
            });
        }
        Role::Tool => {
            for (i, r) in message.content.iter().filter_map(Part::as_tool_response).enumerate() {
                out.push(ChatMessage::Tool {
                    tool_call_id: r.reference.clone().unwrap_or_else(|| format!("call_{i}")),
                    content: output_text(r.output.as_ref()),
                });
            }
        }
    }
}

fn user_content(parts: &[Part]) -> UserContent {
    let plain = parts
        .iter()
        .all(|p| matches!(p.kind, PartKind::Text(_) | PartKind::Data(_)));
    if plain {
        let text: String = parts
            .iter()
            .map(|p| match &p.kind {
                PartKind::Text(t) => t.clone(),
                PartKind::Data(v) => data_text(v),
                _ => String::new(),
            })
            .collect();
        return UserContent::Text(text);
    }
    UserContent::Parts(
        parts
            .iter()
            .filter_map(|p| match &p.kind {
                PartKind::Text(t) => Some(ContentPart::Text { text: t.clone() }),
                PartKind::Data(v) => Some(ContentPart::Text { text: data_text(v) }),
                PartKind::Media(m) => Some(ContentPart::ImageUrl {
                    image_url: ImageUrl { url: m.url.clone() },
                }),
                _ => None,
            })
            .collect(),
    )
}

/// Builds the Holdpoint parts of an answer: reasoning, text, tool calls.
pub(crate) fn parts(
    http: &HttpClient,
    reasoning: Option<String>,
    text: Option<String>,
    calls: Vec<(Option<String>, String, String)>,
) -> Result<Vec<Part>> {
    let mut parts = Vec::new();
    if let Some(r) = reasoning.filter(|r| !r.is_empty()) {
        parts.push(Part::from_kind(PartKind::Reasoning(r)));
    }
    if let Some(t) = text.filter(|t| !t.is_empty()) {
        parts.push(Part::text(t));
    }
    for (id, name, arguments) in calls {
        if name.is_empty() {
            return Err(http.error(Status::Internal, "a tool call came without a function name"));
        }
        let input = parse_arguments(http, &name, &arguments)?;
        parts.push(Part::tool_request(name, id, Some(input)));
    }
    Ok(parts)
}

/// A whole answer as a response.
pub(crate) fn from_answer(http: &HttpClient, answer: ChatResponse) -> Result<GenerateResponse> {
    let Some(choice) = answer.choices.into_iter().next() else {
        return Err(http.error(Status::Internal, "the answer has no choices"));
    };
    let msg = choice.message;
    let calls = msg
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|c| (Some(c.id), c.function.name, c.function.arguments))
        .collect();
    let refusal = msg.refusal.clone();
    let text = msg.content.or(msg.refusal);
    let parts = parts(http, msg.reasoning_content.or(msg.reasoning), text, calls)?;
    let mut response = GenerateResponse::from_message(Message::new(Role::Model, parts));
    response.finish_reason = Some(finish_reason(choice.finish_reason.as_deref()));
    if let Some(r) = refusal {
        response.finish_reason = Some(FinishReason::Blocked);
        response.finish_message = Some(r);
    }
    response.usage = usage(answer.usage.as_ref());
    response.custom = Value::Object(Map::new());
    Ok(response)
}

/// The finish reason as Holdpoint's.
pub(crate) fn finish_reason(reason: Option<&str>) -> FinishReason {
    match reason {
        Some("stop" | "tool_calls" | "function_call") => FinishReason::Stop,
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::Blocked,
        None => FinishReason::Unknown,
        Some(_) => FinishReason::Other,
    }
}

/// Token counts as Holdpoint's.
pub(crate) fn usage(u: Option<&ChatUsage>) -> Usage {
    let Some(u) = u else {
        return Usage::default();
    };
    Usage {
        input_tokens: u.prompt_tokens,
        output_tokens: u.completion_tokens,
        total_tokens: u.total_tokens,
        thoughts_tokens: u.completion_tokens_details.as_ref().and_then(|d| d.reasoning_tokens),
        cached_content_tokens: u.prompt_tokens_details.as_ref().and_then(|d| d.cached_tokens),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn history_maps_to_chat_messages() {
        let req = GenerateRequest::new(vec![
            Message::new(Role::System, vec![Part::text("sys")]),
            Message::user_text("hi"),
            Message::new(
                Role::Model,
                vec![
                    Part::tool_request("a", Some("c1".into()), Some(json!({"x": 1}))),
                    Part::tool_request("b", Some("c2".into()), None),
                ],
            ),
            Message::new(
                Role::Tool,
                vec![
                    Part::tool_response("a", Some("c1".into()), Some(json!("ok"))),
                    Part::tool_response("b", Some("c2".into()), Some(json!({"error": "boom"}))),
                ],
            ),
        ]);
        let body = to_request(&req, &ModelConfig::default(), "m".into(), MaxTokensField::MaxTokens).unwrap();
        let v = serde_json::to_value(body).unwrap();
        assert_eq!(
            v["messages"],
            json!([
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{\"x\":1}"}},
                    {"id": "c2", "type": "function", "function": {"name": "b", "arguments": "{}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                {"role": "tool", "tool_call_id": "c2", "content": "{\"error\":\"boom\"}"}
            ])
        );
    }
}
