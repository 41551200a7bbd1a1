//! Holdpoint request -> Gemini request, and Gemini answer -> Holdpoint
//! parts, finish reason and usage.

use holdpoint::model::{FinishReason, GenerateRequest, Usage};
use holdpoint::{Message, Part, PartKind, Result, Role, Status};
use serde_json::{Map, Value, json};

use super::wire::{
    Blob, Candidate, Content, FileData, FunctionCall, FunctionCallingConfig, FunctionDeclaration, FunctionResponse,
    GenerateContentRequest, GenerationConfig, Tool, ToolConfig, UsageMetadata, WirePart,
};
use crate::config::ModelConfig;
use crate::content::{data_text, parse_data_uri, system_text};
use crate::schema::{Dialect, shape};

/// Part-metadata key holding Gemini's `thoughtSignature`, which must go
/// back to Gemini with the part it came on.
pub const THOUGHT_SIGNATURE: &str = "thoughtSignature";

/// Builds the request body.
pub(crate) fn to_request(request: &GenerateRequest, config: &ModelConfig) -> Result<GenerateContentRequest> {
    let contents = to_contents(request);
    let system_instruction = system_text(&request.messages).map(|text| Content {
        role: None,
        parts: vec![WirePart {
            text: Some(text),
            ..WirePart::default()
        }],
    });
    let tools = to_tools(request);
    let tool_config = to_tool_config(request)?;
    let output = request.output_format();
    // Gemini rejects JSON mode together with function calling.
    let json_mode = output.json && tools.is_empty();
    let generation_config = GenerationConfig {
        temperature: config.temperature,
        top_p: config.top_p,
        top_k: config.top_k,
        max_output_tokens: config.max_output_tokens,
        stop_sequences: config.stop_sequences.clone(),
        seed: config.seed,
        presence_penalty: config.presence_penalty,
        frequency_penalty: config.frequency_penalty,
        response_mime_type: json_mode.then(|| "application/json".to_owned()),
        response_schema: if json_mode {
            output.schema.as_ref().map(|s| shape(s, Dialect::Gemini))
        } else {
            None
        },
        thinking_config: config.thinking_config.clone(),
    };
    Ok(GenerateContentRequest {
        contents,
        system_instruction,
        tools,
        tool_config,
        generation_config: (!generation_config.is_empty()).then_some(generation_config),
    })
}

/// The conversation as Gemini contents: system messages left out (they
/// go in `systemInstruction`), consecutive messages of one role merged.
fn to_contents(request: &GenerateRequest) -> Vec<Content> {
    let mut contents: Vec<Content> = Vec::new();
    for message in request.messages.iter().filter(|m| m.role != Role::System) {
        let role = match message.role {
            Role::Model => "model",
            _ => "user",
        };
        let parts: Vec<WirePart> = message.content.iter().filter_map(to_wire_part).collect();
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some(last) if last.role.as_deref() == Some(role) => last.parts.extend(parts),
            _ => contents.push(Content {
                role: Some(role.to_owned()),
                parts,
            }),
        }
    }
    contents
}

/// The function declarations of the request's tools (none: no tools).
fn to_tools(request: &GenerateRequest) -> Vec<Tool> {
    if request.tools.is_empty() {
        Vec::new()
    } else {
        vec![Tool {
            function_declarations: request
                .tools
                .iter()
                .map(|t| FunctionDeclaration {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    parameters: t
                        .input_schema
                        .as_ref()
                        .map(|s| shape(s, Dialect::Gemini))
                        .filter(has_properties),
                })
                .collect(),
        }]
    }
}

/// The tool choice as Gemini's function-calling mode.
fn to_tool_config(request: &GenerateRequest) -> Result<Option<ToolConfig>> {
    Ok(match request.tool_choice.as_deref() {
        None => None,
        Some(choice) => Some(ToolConfig {
            function_calling_config: FunctionCallingConfig {
                mode: match choice {
                    "auto" => "AUTO",
                    "required" => "ANY",
                    "none" => "NONE",
                    other => {
                        return Err(holdpoint::Error::with_status(
                            Status::InvalidArgument,
                            format!("unknown tool choice \"{other}\" (auto, required or none)"),
                        ));
                    }
                }
                .to_owned(),
            },
        }),
    })
}

/// Gemini rejects an object schema without properties; such a tool is
/// declared with no parameters at all.
fn has_properties(schema: &Value) -> bool {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty())
        || schema
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "object")
}

fn signature(part: &Part) -> Option<String> {
    part.meta(THOUGHT_SIGNATURE).and_then(Value::as_str).map(str::to_owned)
}

fn to_wire_part(part: &Part) -> Option<WirePart> {
    let mut wire = WirePart {
        thought_signature: signature(part),
        ..WirePart::default()
    };
    match &part.kind {
        PartKind::Text(t) => wire.text = Some(t.clone()),
        PartKind::Reasoning(t) => {
            wire.text = Some(t.clone());
            wire.thought = Some(true);
        }
        PartKind::Data(v) => wire.text = Some(data_text(v)),
        PartKind::Media(m) => match parse_data_uri(&m.url) {
            Some((mime, data)) => {
                wire.inline_data = Some(Blob {
                    mime_type: m.content_type.clone().unwrap_or(mime),
                    data,
                });
            }
            None => {
                wire.file_data = Some(FileData {
                    mime_type: m.content_type.clone(),
                    file_uri: m.url.clone(),
                });
            }
        },
        PartKind::ToolRequest(r) => {
            wire.function_call = Some(FunctionCall {
                id: r.reference.clone(),
                name: r.name.clone(),
                args: Some(r.input.clone().unwrap_or_else(|| Value::Object(Map::new()))),
            });
        }
        PartKind::ToolResponse(r) => {
            // `response` must be an object: objects (soft failures'
            // `{"error": …}` among them) go as they are, anything else
            // under `output`, as the API reference asks.
            let response = match &r.output {
                Some(Value::Object(obj)) => Value::Object(obj.clone()),
                None | Some(Value::Null) => json!({}),
                Some(other) => json!({ "output": other }),
            };
            wire.function_response = Some(FunctionResponse {
                id: r.reference.clone(),
                name: r.name.clone(),
                response,
            });
        }
        PartKind::Resource(_) | PartKind::Custom(_) => return None,
    }
    Some(wire)
}

/// A Gemini part as a Holdpoint part (`None` for kinds Holdpoint does not
/// model, such as a stray `functionResponse`).
pub(crate) fn from_wire_part(wire: WirePart) -> Option<Part> {
    let mut part = if let Some(call) = wire.function_call {
        Part::tool_request(
            call.name,
            call.id,
            Some(call.args.unwrap_or_else(|| Value::Object(Map::new()))),
        )
    } else if let Some(text) = wire.text {
        if wire.thought == Some(true) {
            Part::from_kind(PartKind::Reasoning(text))
        } else {
            Part::text(text)
        }
    } else if let Some(blob) = wire.inline_data {
        Part::from_kind(PartKind::Media(holdpoint::message::Media {
            content_type: Some(blob.mime_type.clone()),
            url: format!("data:{};base64,{}", blob.mime_type, blob.data),
        }))
    } else if let Some(file) = wire.file_data {
        Part::from_kind(PartKind::Media(holdpoint::message::Media {
            content_type: file.mime_type,
            url: file.file_uri,
        }))
    } else {
        return None;
    };
    if let Some(sig) = wire.thought_signature {
        part.set_meta(THOUGHT_SIGNATURE, Value::String(sig));
    }
    Some(part)
}

/// The model message of a candidate.
pub(crate) fn message(candidate: Option<&Candidate>) -> Message {
    let parts = candidate
        .and_then(|c| c.content.as_ref())
        .map(|c| {
            c.parts
                .iter()
                .cloned()
                .filter_map(from_wire_part)
                .filter(|p| p.as_text() != Some("") || p.metadata.is_some())
                .collect()
        })
        .unwrap_or_default();
    Message::new(Role::Model, parts)
}

/// Gemini's finish reason as Holdpoint's.
pub(crate) fn finish_reason(reason: Option<&str>) -> FinishReason {
    match reason {
        Some("STOP") => FinishReason::Stop,
        Some("MAX_TOKENS") => FinishReason::Length,
        Some(
            "SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT",
        ) => FinishReason::Blocked,
        None | Some("FINISH_REASON_UNSPECIFIED") => FinishReason::Unknown,
        Some(_) => FinishReason::Other,
    }
}

/// Gemini's token counts as Holdpoint's.
pub(crate) fn usage(meta: Option<&UsageMetadata>) -> Usage {
    let Some(m) = meta else {
        return Usage::default();
    };
    Usage {
        input_tokens: m.prompt_token_count,
        output_tokens: m.candidates_token_count,
        total_tokens: m.total_token_count,
        thoughts_tokens: m.thoughts_token_count,
        cached_content_tokens: m.cached_content_token_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdpoint::model::ToolDefinition;

    #[test]
    fn tool_round_trip_maps_ids_and_wraps_non_object_outputs() {
        let mut req = GenerateRequest::new(vec![
            Message::new(Role::System, vec![Part::text("sys")]),
            Message::user_text("hi"),
            Message::new(
                Role::Model,
                vec![Part::tool_request("t", Some("r1".into()), Some(json!({"a": 1})))],
            ),
            Message::new(
                Role::Tool,
                vec![Part::tool_response("t", Some("r1".into()), Some(json!(42)))],
            ),
        ]);
        req.tools = vec![ToolDefinition {
            name: "noargs".into(),
            description: "d".into(),
            input_schema: Some(json!({"type": "object", "properties": {}})),
            output_schema: None,
            metadata: None,
        }]
        .into();
        let body = serde_json::to_value(to_request(&req, &ModelConfig::default()).unwrap()).unwrap();
        assert_eq!(body["systemInstruction"], json!({"parts": [{"text": "sys"}]}));
        assert_eq!(
            body["contents"][1]["parts"][0]["functionCall"],
            json!({"id": "r1", "name": "t", "args": {"a": 1}})
        );
        assert_eq!(body["contents"][2]["role"], "user");
        assert_eq!(
            body["contents"][2]["parts"][0]["functionResponse"]["response"],
            json!({"output": 42})
        );
        assert_eq!(
            body["tools"][0]["functionDeclarations"][0],
            json!({"name": "noargs", "description": "d"})
        );
        assert!(body.get("generationConfig").is_none());
    }
}
