//! OpenAI Chat Completions (`openai/…`) and the servers that speak it:
//! Ollama (`ollama/…`), and vLLM, llama.cpp's `llama-server`, LM Studio
//! and the like (`openai-compatible/…`).
//!
//! One adapter, three presets ([`OpenAiConfig::openai`],
//! [`OpenAiConfig::ollama`], [`OpenAiConfig::compatible`]) that differ in
//! base URL, whether a key is needed, and which max-tokens field they take.
//! Authentication is `Authorization: Bearer KEY` when a key is set.

mod convert;
pub(crate) mod stream;
mod wire;

use std::time::Instant;

use async_trait::async_trait;
use holdpoint::Result;
use holdpoint::model::{ChunkSink, GenerateRequest, GenerateResponse, Model};

use crate::config::ModelConfig;
use crate::http::{Header, HttpClient, HttpOptions};
use crate::key::ApiKey;
use wire::{ChatResponse, StreamOptions};

/// Which field carries `maxOutputTokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_completion_tokens`, which OpenAI's reasoning models require.
    MaxCompletionTokens,
    /// `max_tokens`, which most compatible servers read.
    MaxTokens,
}

/// Where and how to reach a Chat Completions endpoint.
///
/// ```
/// use holdpoint_models::OpenAiConfig;
/// assert_eq!(OpenAiConfig::ollama_host("127.0.0.1:11434").base_url, "http://127.0.0.1:11434/v1");
/// let vllm = OpenAiConfig::compatible("http://gpu-box:8000/v1", None);
/// assert_eq!(vllm.provider, "openai-compatible");
/// ```
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// The model-name prefix and the name used in errors (`openai`,
    /// `ollama`, `openai-compatible`).
    pub provider: String,
    /// The bearer key, when the server needs one.
    pub api_key: Option<ApiKey>,
    /// The URL that `/chat/completions` is appended to, version included
    /// (e.g. `https://api.openai.com/v1`).
    pub base_url: String,
    /// Which max-tokens field to send.
    pub max_tokens_field: MaxTokensField,
    /// Ask for a final usage chunk when streaming
    /// (`stream_options.include_usage`).
    pub stream_usage: bool,
    /// Timeouts and retries.
    pub http: HttpOptions,
}

impl OpenAiConfig {
    /// OpenAI's endpoint.
    pub const OPENAI_BASE_URL: &'static str = "https://api.openai.com/v1";
    /// A local Ollama's OpenAI-compatible endpoint.
    pub const OLLAMA_BASE_URL: &'static str = "http://localhost:11434/v1";

    /// OpenAI itself, with this key.
    pub fn openai(api_key: impl Into<ApiKey>) -> Self {
        OpenAiConfig {
            provider: "openai".to_owned(),
            api_key: Some(api_key.into()),
            base_url: Self::OPENAI_BASE_URL.to_owned(),
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            stream_usage: true,
            http: HttpOptions::default(),
        }
    }

    /// A local Ollama at the default address; no key.
    pub fn ollama() -> Self {
        Self::ollama_host(Self::OLLAMA_BASE_URL)
    }

    /// Ollama at `host`, given as `OLLAMA_HOST` gives it (`host:port`, with
    /// or without a scheme, with or without `/v1`).
    pub fn ollama_host(host: &str) -> Self {
        OpenAiConfig {
            provider: "ollama".to_owned(),
            base_url: ollama_base_url(host),
            ..Self::compatible("", None)
        }
    }

    /// Any OpenAI-compatible server (vLLM, llama.cpp, LM Studio, …) at
    /// `base_url` (version included, e.g. `http://localhost:8000/v1`).
    pub fn compatible(base_url: impl Into<String>, api_key: Option<ApiKey>) -> Self {
        OpenAiConfig {
            provider: "openai-compatible".to_owned(),
            api_key: api_key.filter(|k| !k.is_empty()),
            base_url: base_url.into(),
            max_tokens_field: MaxTokensField::MaxTokens,
            stream_usage: true,
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

fn ollama_base_url(host: &str) -> String {
    let host = host.trim().trim_end_matches('/');
    let with_scheme = if host.contains("://") {
        host.to_owned()
    } else {
        format!("http://{host}")
    };
    if with_scheme.ends_with("/v1") {
        with_scheme
    } else {
        format!("{with_scheme}/v1")
    }
}

/// A model behind a Chat Completions endpoint, e.g. `openai/gpt-4o-mini`
/// or `ollama/llama3.2`.
#[derive(Debug)]
pub struct OpenAiModel {
    name: String,
    model: String,
    url: String,
    max_tokens_field: MaxTokensField,
    stream_usage: bool,
    http: HttpClient,
}

impl OpenAiModel {
    /// A model by the id the server knows it by.
    pub fn from_config(model: impl Into<String>, config: OpenAiConfig) -> Result<Self> {
        let model = model.into();
        let headers = config
            .api_key
            .iter()
            .map(|k| Header {
                name: "authorization",
                value: format!("Bearer {}", k.expose()),
                sensitive: true,
            })
            .collect();
        let http = HttpClient::new(&config.provider, &config.http, headers, config.api_key.clone())?;
        Ok(OpenAiModel {
            name: format!("{}/{model}", config.provider),
            model,
            url: format!("{}/chat/completions", config.base_url.trim_end_matches('/')),
            max_tokens_field: config.max_tokens_field,
            stream_usage: config.stream_usage,
            http,
        })
    }
}

#[async_trait]
impl Model for OpenAiModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn generate(&self, request: GenerateRequest, chunks: ChunkSink) -> Result<GenerateResponse> {
        let config = ModelConfig::from_request(&request)?;
        let model = config.version.clone().unwrap_or_else(|| self.model.clone());
        let mut body = convert::to_request(&request, &config, model, self.max_tokens_field)?;
        let streaming = chunks.is_listening();
        if streaming {
            body.stream = Some(true);
            if self.stream_usage {
                body.stream_options = Some(StreamOptions { include_usage: true });
            }
        }
        tracing::debug!(target: "holdpoint_models::openai", provider = %self.http.provider(), model = %body.model, streaming, tools = request.tools.len(), "generate");
        let started = Instant::now();
        let resp = self.http.post_json(&self.url, &body).await?;
        let mut response = if streaming {
            stream::read(resp, &self.http, &chunks).await?
        } else {
            let answer: ChatResponse = self.http.read_json(resp).await?;
            convert::from_answer(&self.http, answer)?
        };
        response.latency_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
        Ok(response)
    }
}
