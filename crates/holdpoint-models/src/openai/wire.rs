//! OpenAI Chat Completions wire types (`POST {base}/chat/completions`),
//! as OpenAI's API reference spells them; Ollama, vLLM and llama.cpp's
//! server speak the same shapes. Responses tolerate unknown fields and the
//! `reasoning_content`/`reasoning` fields those servers add.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The request body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ChatTool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
}

/// `stream_options`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StreamOptions {
    pub include_usage: bool,
}

/// `response_format`: `json_object`, or `json_schema` with a schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ResponseFormat {
    JsonObject,
    JsonSchema { json_schema: JsonSchemaFormat },
}

/// The schema of a `json_schema` response format.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct JsonSchemaFormat {
    pub name: String,
    pub schema: Value,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub(crate) enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: UserContent,
    },
    Assistant {
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// A user message's content: plain text, or parts when there is media.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum UserContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// A part of a user message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ContentPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

/// An image by URL or `data:` URI.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ImageUrl {
    pub url: String,
}

/// A tool call in an assistant message (request side).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function_type() -> String {
    "function".to_owned()
}

/// The function of a tool call; `arguments` is JSON text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FunctionCall {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

/// A tool declaration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ChatTool {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionDef,
}

/// A function declaration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct FunctionDef {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// A whole (non-streamed) answer.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct ChatResponse {
    #[serde(default)]
    pub choices: Vec<Choice>,
    #[serde(default)]
    pub usage: Option<ChatUsage>,
}

/// One choice (Holdpoint asks for one).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct Choice {
    #[serde(default)]
    pub message: ResponseMessage,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// The assistant's message.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct ResponseMessage {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default)]
    pub refusal: Option<String>,
    /// vLLM, DeepSeek: reasoning text.
    #[serde(default)]
    pub reasoning_content: Option<String>,
    /// Ollama: reasoning text.
    #[serde(default)]
    pub reasoning: Option<String>,
}

/// One event of a stream.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct ChatChunk {
    #[serde(default)]
    pub choices: Vec<ChunkChoice>,
    #[serde(default)]
    pub usage: Option<ChatUsage>,
    /// Set when the server fails midway.
    #[serde(default)]
    pub error: Option<Value>,
}

/// A choice's delta.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct ChunkChoice {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub delta: Delta,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// What changed.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct Delta {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
    #[serde(default)]
    pub refusal: Option<String>,
    #[serde(default)]
    pub reasoning_content: Option<String>,
    #[serde(default)]
    pub reasoning: Option<String>,
}

/// A piece of a tool call: the first piece of a call has its id and name,
/// later ones more argument text, matched by `index`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct ToolCallDelta {
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

/// A piece of a function call.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct FunctionDelta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<String>,
}

/// Token counts.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct ChatUsage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    #[serde(default)]
    pub total_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionDetails>,
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptDetails>,
}

/// `completion_tokens_details`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct CompletionDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

/// `prompt_tokens_details`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct PromptDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}
