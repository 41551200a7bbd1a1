//! Wire types of a model call: `GenerateRequest`, `GenerateResponse`,
//! `GenerateChunk`, `ToolDefinition`, `Usage`, `FinishReason`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::{Message, Part, Role};

/// Why a generation (or an agent turn) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FinishReason {
    /// The model finished normally.
    Stop,
    /// The output hit a length limit.
    Length,
    /// The provider blocked the output.
    Blocked,
    /// One or more tool calls paused.
    Interrupted,
    /// Another reason.
    Other,
    /// The reason is not known.
    Unknown,
    /// The work was aborted.
    Aborted,
    /// Agents: the turn failed (see the output's `error`).
    Failed,
    /// Agents: the run continues in the background.
    Detached,
}

impl FinishReason {
    /// The wire name, e.g. `interrupted`.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Blocked => "blocked",
            FinishReason::Interrupted => "interrupted",
            FinishReason::Other => "other",
            FinishReason::Unknown => "unknown",
            FinishReason::Aborted => "aborted",
            FinishReason::Failed => "failed",
            FinishReason::Detached => "detached",
        }
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// JSON Schema of its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Optional metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// Token and size counts of a model call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Tokens in the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Tokens generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Reasoning tokens, where the provider reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thoughts_tokens: Option<u64>,
    /// Tokens read from a prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_content_tokens: Option<u64>,
}

impl Usage {
    /// Adds another call's counts to this one. Counts come from model
    /// providers, so the sums saturate instead of overflowing.
    pub fn add(&mut self, other: &Usage) {
        fn sum(a: &mut Option<u64>, b: Option<u64>) {
            if let Some(b) = b {
                *a = Some(a.unwrap_or(0).saturating_add(b));
            }
        }
        sum(&mut self.input_tokens, other.input_tokens);
        sum(&mut self.output_tokens, other.output_tokens);
        sum(&mut self.total_tokens, other.total_tokens);
        sum(&mut self.thoughts_tokens, other.thoughts_tokens);
        sum(&mut self.cached_content_tokens, other.cached_content_tokens);
    }
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// What is sent to a model: history, tools and config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateRequest {
    /// The conversation so far (system prompt first, when there is one).
    pub messages: Vec<Message>,
    /// Provider config (temperature, maxOutputTokens, stopSequences, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// The tools the model may call. Shared: the generate loop builds the
    /// list once and every model call of a generation (and of an agent)
    /// reuses it, so cloning a request never copies the tools' schemas.
    /// Build one from a `Vec` with `.into()`.
    #[serde(default)]
    pub tools: Arc<[ToolDefinition]>,
    /// `auto`, `required` or `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
    /// Output format constraints (`{}` when none).
    #[serde(default = "empty_object")]
    pub output: Value,
}

impl GenerateRequest {
    /// A request with these messages, no tools and no config.
    pub fn new(messages: Vec<Message>) -> Self {
        GenerateRequest {
            messages,
            config: None,
            tools: Arc::default(),
            tool_choice: None,
            output: empty_object(),
        }
    }

    /// What `output` asks for, read from Genkit's
    /// `{format: "json", schema, contentType}`: JSON when `format` is
    /// `"json"` or `contentType` is `application/json`, and then the schema
    /// the output must match, if one was given.
    pub fn output_format(&self) -> OutputFormat {
        let out = &self.output;
        let json = out.get("format").and_then(Value::as_str) == Some("json")
            || out.get("contentType").and_then(Value::as_str) == Some("application/json");
        OutputFormat {
            json,
            schema: if json { out.get("schema").cloned() } else { None },
        }
    }
}

/// What a request's `output` asks of the model
/// ([`GenerateRequest::output_format`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutputFormat {
    /// JSON output was requested.
    pub json: bool,
    /// The JSON Schema the output must match, when one was given.
    pub schema: Option<Value>,
}

/// What a model (or a whole generation) returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateResponse {
    /// The final message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// Why it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// A human-readable explanation of the finish reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_message: Option<String>,
    /// Token counts.
    #[serde(default)]
    pub usage: Usage,
    /// Provider-specific extras (`{}` when none).
    #[serde(default = "empty_object")]
    pub custom: Value,
    /// The last request sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<GenerateRequest>,
    /// Wall time of the call, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
}

impl GenerateResponse {
    /// A response holding one message that ended with `stop`.
    pub fn from_message(message: Message) -> Self {
        GenerateResponse {
            message: Some(message),
            finish_reason: Some(FinishReason::Stop),
            finish_message: None,
            usage: Usage::default(),
            custom: empty_object(),
            request: None,
            latency_ms: None,
        }
    }

    /// The text of the message (empty when there is none).
    pub fn text(&self) -> String {
        self.message.as_ref().map(Message::text).unwrap_or_default()
    }

    /// The paused tool requests of the message.
    pub fn interrupts(&self) -> Vec<Part> {
        self.message
            .as_ref()
            .map(|m| m.interrupts().cloned().collect())
            .unwrap_or_default()
    }
}

/// A piece of a streamed response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerateChunk {
    /// Which message of the generation this chunk belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// `model` for model output, `tool` for tool results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// The parts of this chunk.
    #[serde(default)]
    pub content: Vec<Part>,
    /// Provider-specific extras.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<Value>,
}

impl GenerateChunk {
    /// A chunk with a role and parts.
    pub fn new(role: Role, content: Vec<Part>) -> Self {
        GenerateChunk {
            index: None,
            role: Some(role),
            content,
            custom: None,
        }
    }

    /// The text parts, concatenated.
    pub fn text(&self) -> String {
        self.content.iter().filter_map(Part::as_text).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn output_format_reads_genkits_format_and_content_type() {
        let mut req = GenerateRequest::new(vec![]);
        assert_eq!(req.output_format(), OutputFormat::default());
        req.output = json!({"format": "json", "schema": {"type": "object"}});
        let f = req.output_format();
        assert!(f.json);
        assert_eq!(f.schema, Some(json!({"type": "object"})));
        req.output = json!({"contentType": "application/json"});
        assert_eq!(
            req.output_format(),
            OutputFormat {
                json: true,
                schema: None
            }
        );
        req.output = json!({"format": "text", "schema": {"type": "object"}});
        assert_eq!(
            req.output_format(),
            OutputFormat::default(),
            "a schema without JSON output is ignored"
        );
    }
}
