//! The config keys the local model honours (`request.config`, with
//! Genkit's names); the output format is the core's
//! [`GenerateRequest::output_format`].
//!
//! Keys the local model does not use are ignored; a key it uses with a
//! value of the wrong type is `INVALID_ARGUMENT`.

use holdpoint::{Error, GenerateRequest, Result, Status};
use serde::Deserialize;
use serde_json::Value;

/// The keys of `request.config` the local model reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Options {
    /// 0 (the default) decodes greedily.
    pub temperature: Option<f64>,
    /// The most tokens to generate.
    #[serde(alias = "maxTokens")]
    pub max_output_tokens: Option<u32>,
    /// Texts that end a plain-text reply (not included in it).
    pub stop_sequences: Option<Vec<String>>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Top-k sampling.
    pub top_k: Option<u32>,
    /// The sampling seed.
    pub seed: Option<i64>,
}

impl Options {
    /// Reads `request.config` (absent or `null` is the default).
    pub fn from_request(request: &GenerateRequest) -> Result<Self> {
        match &request.config {
            None | Some(Value::Null) => Ok(Options::default()),
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
        req.config = Some(json!({
            "temperature": 0.2, "maxTokens": 50, "stopSequences": ["END"], "topP": 0.9, "topK": 4, "seed": 7,
            "thinkingConfig": 1
        }));
        let o = Options::from_request(&req).unwrap();
        assert_eq!(
            o,
            Options {
                temperature: Some(0.2),
                max_output_tokens: Some(50),
                stop_sequences: Some(vec!["END".to_owned()]),
                top_p: Some(0.9),
                top_k: Some(4),
                seed: Some(7),
            }
        );
        req.config = Some(json!({"temperature": "hot"}));
        assert_eq!(
            Options::from_request(&req).unwrap_err().status(),
            Status::InvalidArgument
        );
        req.config = Some(json!(3));
        assert!(Options::from_request(&req).is_err());
    }
}
