//! The model config a request carries (`request.config`), read with
//! Genkit's names, and the requested output format (`request.output`).
//!
//! | key | Gemini | OpenAI-compatible | Anthropic |
//! |---|---|---|---|
//! | `version` | model id | model id | model id |
//! | `temperature` | `temperature` | `temperature` | `temperature` |
//! | `maxOutputTokens` | `maxOutputTokens` | `max_completion_tokens` (or `max_tokens`) | `max_tokens` |
//! | `stopSequences` | `stopSequences` | `stop` | `stop_sequences` |
//! | `topP` | `topP` | `top_p` | `top_p` |
//! | `topK` | `topK` | — | `top_k` |
//! | `seed`, `presencePenalty`, `frequencyPenalty` | same | `seed`, `presence_penalty`, `frequency_penalty` | — |
//! | `thinkingConfig` | `thinkingConfig` | — | `budgetTokens` → `thinking` |
//! | `reasoningEffort` | — | `reasoning_effort` | — |
//!
//! Keys a provider does not support are ignored; a known key with a value
//! of the wrong type is `INVALID_ARGUMENT`.

use holdpoint::{Error, GenerateRequest, Result, Status};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The recognised keys of `request.config`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ModelConfig {
    /// Overrides the model id for this call.
    pub version: Option<String>,
    pub temperature: Option<f64>,
    #[serde(alias = "maxTokens")]
    pub max_output_tokens: Option<u32>,
    pub stop_sequences: Option<Vec<String>>,
    pub top_p: Option<f64>,
    pub top_k: Option<u32>,
    pub seed: Option<i64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    /// Gemini's thinking controls, passed through.
    pub thinking_config: Option<ThinkingConfig>,
    /// OpenAI reasoning models: `low`, `medium`, `high`.
    pub reasoning_effort: Option<String>,
    /// Anthropic extended thinking: the token budget (enables thinking).
    pub budget_tokens: Option<u32>,
}

/// Gemini's `thinkingConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThinkingConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_thoughts: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<String>,
}

impl ModelConfig {
    /// Reads `request.config` (absent or `null` is the default config).
    pub fn from_request(request: &GenerateRequest) -> Result<Self> {
        match &request.config {
            None | Some(Value::Null) => Ok(ModelConfig::default()),
            Some(v @ Value::Object(_)) => serde_json::from_value(v.clone())
                .map_err(|e| Error::with_status(Status::InvalidArgument, format!("invalid model config: {e}"))),
            Some(other) => Err(Error::with_status(
                Status::InvalidArgument,
                format!("model config must be a JSON object, got {other}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_genkit_names_and_rejects_wrong_types() {
        let mut req = GenerateRequest::new(vec![]);
        req.config =
            Some(json!({"temperature": 0.2, "maxOutputTokens": 50, "stopSequences": ["END"], "topP": 0.9, "other": 1}));
        let c = ModelConfig::from_request(&req).unwrap();
        assert_eq!(c.temperature, Some(0.2));
        assert_eq!(c.max_output_tokens, Some(50));
        assert_eq!(c.stop_sequences, Some(vec!["END".to_owned()]));
        req.config = Some(json!({"temperature": "hot"}));
        assert_eq!(
            ModelConfig::from_request(&req).unwrap_err().status(),
            Status::InvalidArgument
        );
        req.config = Some(json!(3));
        assert!(ModelConfig::from_request(&req).is_err());
    }
}
