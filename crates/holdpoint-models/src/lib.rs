//! Model providers for Holdpoint: thin adapters over reqwest and serde
//! that implement [`holdpoint::Model`] for Google's Gemini API, OpenAI's
//! Chat Completions (and the servers that speak it: Ollama, vLLM,
//! llama.cpp) and Anthropic's Messages API. No provider SDKs.
//!
//! # How the pieces fit
//!
//! - [`resolve_model`] turns a `provider/model` name
//!   (`googleai/gemini-flash-latest`, `openai/gpt-4o-mini`,
//!   `anthropic/claude-sonnet-4-5`, `ollama/llama3.2`,
//!   `openai-compatible/qwen2.5`) into an `Arc<dyn Model>`, with keys and
//!   base URLs from the environment ([`registry`] lists the variables).
//!   [`first_available_provider`] names a default model for the first
//!   provider whose key is set.
//! - [`Registry`] does the same from explicit configs ([`GeminiConfig`],
//!   [`OpenAiConfig`], [`AnthropicConfig`]), so tests and applications can
//!   point a provider at any base URL with any key, without env vars.
//! - Each model maps a [`GenerateRequest`](holdpoint::GenerateRequest)
//!   faithfully: the system prompt (leading `system` messages), the
//!   history, tool declarations (schemas shaped to what the provider
//!   accepts), parallel tool calls, tool results (soft failures included),
//!   and config with Genkit's names (`temperature`, `maxOutputTokens`,
//!   `stopSequences`, `topP`, …). When the [`ChunkSink`](holdpoint::model::ChunkSink)
//!   listens, it uses the provider's streaming endpoint, sends a chunk per
//!   text delta, and assembles streamed tool-call arguments into whole
//!   tool requests; the final response holds the full message, finish
//!   reason and usage.
//! - Failures carry a [`Status`](holdpoint::Status): 401
//!   `UNAUTHENTICATED`, 403 `PERMISSION_DENIED`, 429 `RESOURCE_EXHAUSTED`
//!   and 5xx `UNAVAILABLE` after retries that honour `Retry-After`
//!   ([`HttpOptions`]), each with the provider's own message; a malformed
//!   or truncated stream is `INTERNAL`. Keys ([`ApiKey`]) never appear in
//!   `Debug` output, logs or error messages.
//!
//! # Features
//!
//! | feature | adds | default |
//! |---|---|---|
//! | `gemini` | [`GeminiModel`] (`googleai/…`) | yes |
//! | `openai` | [`OpenAiModel`] (`openai/…`, `ollama/…`, `openai-compatible/…`) | yes |
//! | `anthropic` | [`AnthropicModel`] (`anthropic/…`) | yes |
//! | `local` | `local::LocalModel` (`local/smollm2`): SmolLM2-135M run offline by llama.cpp; `local` is the `holdpoint-models-local` crate | no |
//!
//! # Offline local model
//!
//! With the non-default `local` feature, `local/smollm2` runs
//! SmolLM2-135M-Instruct in-process through llama.cpp: no key, no server,
//! no network once the model file is fetched.
//!
//! ```text
//! scripts/fetch-smollm2.sh        # the .gguf (93 MB, sha256-checked) into ~/.local/share/holdpoint/models
//! # llama.cpp is compiled from source: needs cmake, a C++ compiler and libclang
//! # (Debian: apt-get install cmake libclang-dev); the first build takes minutes
//! HOLDPOINT_MODEL=local/smollm2 cargo run -p banking --features holdpoint-models/local -- …
//! ```
//!
//! Then `resolve_model("local/smollm2")` works like any other provider.
//! Tool calls are grammar-constrained to the tools' JSON Schemas, so even
//! this small model produces well-formed calls. The model lives in its own
//! crate, `holdpoint-models-local` (re-exported here as `local`), which
//! depends on the Holdpoint core only; see its docs for the details, and
//! `scripts/ci-local-model.sh` for the smoke test.
//!
//! # Example
//!
//! ```no_run
//! use holdpoint::{generate, GenerateOptions, Message};
//! # async fn run() -> holdpoint::Result<()> {
//! let model = holdpoint_models::resolve_model("googleai/gemini-flash-latest")?;
//! let out = generate(GenerateOptions::new(model).messages(vec![Message::user_text("Hello!")])).await?;
//! println!("{}", out.response.text());
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

// The shared machinery of the HTTP providers, built when one of them is.
#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
mod config;
#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
mod content;
#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod key;
pub mod registry;
#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
mod schema;
#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
mod sse;

#[cfg(feature = "anthropic")]
pub mod anthropic;
#[cfg(feature = "gemini")]
pub mod gemini;
/// The offline local model: the `holdpoint-models-local` crate (feature `local`).
#[cfg(feature = "local")]
pub use holdpoint_models_local as local;
#[cfg(feature = "openai")]
pub mod openai;

#[cfg(feature = "anthropic")]
pub use anthropic::{AnthropicConfig, AnthropicModel};
#[cfg(feature = "gemini")]
pub use gemini::{GeminiConfig, GeminiModel};
pub use http::HttpOptions;
pub use key::ApiKey;
#[cfg(feature = "local")]
pub use local::{LocalConfig, LocalModel};
#[cfg(feature = "openai")]
pub use openai::{MaxTokensField, OpenAiConfig, OpenAiModel};
pub use registry::{Registry, first_available_provider, resolve_model};
