//! Google's Gemini API (`googleai/…`): `generateContent`, and
//! `streamGenerateContent?alt=sse` when someone listens for chunks.
//!
//! Authentication is the `x-goog-api-key` header (never the URL). Tool
//! schemas are shaped to Gemini's OpenAPI subset (see the crate docs);
//! function-call ids travel as Holdpoint refs, and `thoughtSignature`s are
//! kept in part metadata and sent back, as Gemini requires for tool calls
//! of thinking models.

mod convert;
pub(crate) mod stream;
mod wire;

use std::time::Instant;

use async_trait::async_trait;
use holdpoint::model::{ChunkSink, GenerateRequest, GenerateResponse, Model};
use holdpoint::{FinishReason, Message, Result, Role};

pub use convert::THOUGHT_SIGNATURE;

use crate::config::ModelConfig;
use crate::http::{Header, HttpClient, HttpOptions};
use crate::key::ApiKey;
use wire::GenerateContentResponse;

/// Where and how to reach the Gemini API.
///
/// ```
/// use holdpoint_models::GeminiConfig;
/// let config = GeminiConfig::new("my-key").base_url("http://127.0.0.1:8080");
/// assert!(!format!("{config:?}").contains("my-key"));
/// ```
#[derive(Debug, Clone)]
pub struct GeminiConfig {
    /// The API key (`GEMINI_API_KEY` or `GOOGLE_API_KEY`).
    pub api_key: ApiKey,
    /// Scheme and host, without the API version (default
    /// [`GeminiConfig::DEFAULT_BASE_URL`]; env `GEMINI_BASE_URL`).
    pub base_url: String,
    /// The API version path segment (default `v1beta`).
    pub api_version: String,
    /// Timeouts and retries.
    pub http: HttpOptions,
}

impl GeminiConfig {
    /// Google's endpoint.
    pub const DEFAULT_BASE_URL: &'static str = "https://generativelanguage.googleapis.com";

    /// The default endpoint with this key.
    pub fn new(api_key: impl Into<ApiKey>) -> Self {
        GeminiConfig {
            api_key: api_key.into(),
            base_url: Self::DEFAULT_BASE_URL.to_owned(),
            api_version: "v1beta".to_owned(),
            http: HttpOptions::default(),
        }
    }

    /// Sets the base URL.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// Sets timeouts and retries.
    pub fn http(mut self, http: HttpOptions) -> Self {
        self.http = http;
        self
    }
}

/// A Gemini model, e.g. `googleai/gemini-flash-latest`.
#[derive(Debug)]
pub struct GeminiModel {
    name: String,
    model: String,
    endpoint: String,
    http: HttpClient,
}

impl GeminiModel {
    /// A model by its Gemini id (`gemini-2.5-flash`, …).
    pub fn from_config(model: impl Into<String>, config: GeminiConfig) -> Result<Self> {
        let model = model.into();
        let http = HttpClient::new(
            "googleai",
            &config.http,
            vec![Header {
                name: "x-goog-api-key",
                value: config.api_key.expose().to_owned(),
                sensitive: true,
            }],
            Some(config.api_key.clone()),
        )?;
        Ok(GeminiModel {
            name: format!("googleai/{model}"),
            model,
            endpoint: format!("{}/{}", config.base_url.trim_end_matches('/'), config.api_version),
            http,
        })
    }

    fn url(&self, model: &str, streaming: bool) -> String {
        let path = if model.contains('/') {
            model.to_owned()
        } else {
            format!("models/{model}")
        };
        if streaming {
            format!("{}/{path}:streamGenerateContent?alt=sse", self.endpoint)
        } else {
            format!("{}/{path}:generateContent", self.endpoint)
        }
    }
}

#[async_trait]
impl Model for GeminiModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn generate(&self, request: GenerateRequest, chunks: ChunkSink) -> Result<GenerateResponse> {
        let config = ModelConfig::from_request(&request)?;
        let model = config.version.clone().unwrap_or_else(|| self.model.clone());
        let body = convert::to_request(&request, &config)?;
        let streaming = chunks.is_listening();
        tracing::debug!(target: "holdpoint_models::gemini", model = %model, streaming, tools = request.tools.len(), "generate");
        let started = Instant::now();
        let resp = self.http.post_json(&self.url(&model, streaming), &body).await?;
        let mut response = if streaming {
            stream::read(resp, &self.http, &chunks).await?
        } else {
            let answer: GenerateContentResponse = self.http.read_json(resp).await?;
            from_answer(answer)
        };
        response.latency_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
        Ok(response)
    }
}

fn from_answer(answer: GenerateContentResponse) -> GenerateResponse {
    let candidate = answer.candidates.first();
    let mut response = GenerateResponse::from_message(convert::message(candidate));
    response.usage = convert::usage(answer.usage_metadata.as_ref());
    match candidate {
        Some(c) => {
            response.finish_reason = Some(convert::finish_reason(c.finish_reason.as_deref()));
            response.finish_message = c.finish_message.clone();
        }
        None => {
            let feedback = answer.prompt_feedback.unwrap_or_default();
            response.message = Some(Message::new(Role::Model, Vec::new()));
            response.finish_reason = Some(if feedback.block_reason.is_some() {
                FinishReason::Blocked
            } else {
                FinishReason::Unknown
            });
            response.finish_message = feedback.block_reason_message.or(feedback.block_reason);
        }
    }
    response
}
