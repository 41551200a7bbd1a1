//! Anthropic's Messages API (`anthropic/…`): `POST /v1/messages`, with
//! `"stream": true` when someone listens for chunks.
//!
//! Authentication is the `x-api-key` header, with `anthropic-version`.
//! The system prompt goes in `system`; tool results travel as `user`
//! turns of `tool_result` blocks, soft failures with `is_error: true`;
//! consecutive turns of one role are merged. `max_tokens` is required by
//! the API: it comes from `maxOutputTokens`, else
//! [`AnthropicConfig::default_max_tokens`]. JSON output mode is not
//! native to this API and is not requested.

mod convert;
pub(crate) mod stream;
mod wire;

use std::time::Instant;

use async_trait::async_trait;
use holdpoint::Result;
use holdpoint::model::{ChunkSink, GenerateRequest, GenerateResponse, Model};

pub use convert::THINKING_SIGNATURE;

use crate::config::ModelConfig;
use crate::http::{Header, HttpClient, HttpOptions};
use crate::key::ApiKey;
use wire::MessagesResponse;

/// Where and how to reach the Messages API.
///
/// ```
/// use holdpoint_models::AnthropicConfig;
/// let config = AnthropicConfig::new("sk-ant-secret");
/// assert_eq!(config.default_max_tokens, 4096);
/// assert!(!format!("{config:?}").contains("sk-ant-secret"));
/// ```
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    /// The API key (`ANTHROPIC_API_KEY`).
    pub api_key: ApiKey,
    /// Scheme and host; `/v1/messages` is appended (default
    /// [`AnthropicConfig::DEFAULT_BASE_URL`]; env `ANTHROPIC_BASE_URL`).
    pub base_url: String,
    /// The `anthropic-version` header (default `2023-06-01`).
    pub version: String,
    /// `max_tokens` when the request's config sets no `maxOutputTokens`.
    pub default_max_tokens: u32,
    /// Timeouts and retries.
    pub http: HttpOptions,
}

impl AnthropicConfig {
    /// Anthropic's endpoint.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";

    /// The default endpoint with this key.
    pub fn new(api_key: impl Into<ApiKey>) -> Self {
        AnthropicConfig {
            api_key: api_key.into(),
            base_url: Self::DEFAULT_BASE_URL.to_owned(),
            version: "2023-06-01".to_owned(),
            default_max_tokens: 4096,
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

/// A Claude model, e.g. `anthropic/claude-sonnet-4-5`.
#[derive(Debug)]
pub struct AnthropicModel {
    name: String,
    model: String,
    url: String,
    default_max_tokens: u32,
    http: HttpClient,
}

impl AnthropicModel {
    /// A model by its Anthropic id.
    pub fn from_config(model: impl Into<String>, config: AnthropicConfig) -> Result<Self> {
        let model = model.into();
        let headers = vec![
            Header {
                name: "x-api-key",
                value: config.api_key.expose().to_owned(),
                sensitive: true,
            },
            Header {
                name: "anthropic-version",
                value: config.version.clone(),
                sensitive: false,
            },
        ];
        let http = HttpClient::new("anthropic", &config.http, headers, Some(config.api_key.clone()))?;
        Ok(AnthropicModel {
            name: format!("anthropic/{model}"),
            model,
            url: format!("{}/v1/messages", config.base_url.trim_end_matches('/')),
            default_max_tokens: config.default_max_tokens,
            http,
        })
    }
}

#[async_trait]
impl Model for AnthropicModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn generate(&self, request: GenerateRequest, chunks: ChunkSink) -> Result<GenerateResponse> {
        let config = ModelConfig::from_request(&request)?;
        let model = config.version.clone().unwrap_or_else(|| self.model.clone());
        let mut body = convert::to_request(&request, &config, model, self.default_max_tokens)?;
        let streaming = chunks.is_listening();
        if streaming {
            body.stream = Some(true);
        }
        tracing::debug!(target: "holdpoint_models::anthropic", model = %body.model, streaming, tools = request.tools.len(), "generate");
        let started = Instant::now();
        let resp = self.http.post_json(&self.url, &body).await?;
        let mut response = if streaming {
            stream::read(resp, &self.http, &chunks).await?
        } else {
            let answer: MessagesResponse = self.http.read_json(resp).await?;
            let mut r = GenerateResponse::from_message(convert::message(answer.content));
            r.finish_reason = Some(convert::finish_reason(answer.stop_reason.as_deref()));
            r.usage = convert::usage(answer.usage.as_ref());
            r
        };
        response.latency_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
        Ok(response)
    }
}
