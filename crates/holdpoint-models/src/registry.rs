//! Resolving `provider/model` names to models.
//!
//! | prefix | provider | key | base URL (env) |
//! |---|---|---|---|
//! | `googleai/` | Gemini API | `GEMINI_API_KEY` or `GOOGLE_API_KEY` | `GEMINI_BASE_URL` |
//! | `openai/` | OpenAI Chat Completions | `OPENAI_API_KEY` | `OPENAI_BASE_URL` |
//! | `anthropic/` | Anthropic Messages | `ANTHROPIC_API_KEY` | `ANTHROPIC_BASE_URL` |
//! | `ollama/` | Ollama (OpenAI-compatible) | none | `OLLAMA_HOST` (default `http://localhost:11434`) |
//! | `openai-compatible/` | vLLM, llama.cpp, … | `OPENAI_COMPATIBLE_API_KEY` (optional) | `OPENAI_COMPATIBLE_BASE_URL` (required) |
//! | `local/` (feature `local`) | SmolLM2 in-process (`local/smollm2`) | none | model files in `HOLDPOINT_MODEL_DIR` (default `$XDG_DATA_HOME/holdpoint/models` or `~/.local/share/holdpoint/models`) |
//!
//! [`Registry::from_env`] reads the table's variables once; tests build a
//! [`Registry`] by hand instead, so they never touch the environment.

use std::sync::Arc;

use holdpoint::model::Model;
use holdpoint::{Error, Result, Status};
#[cfg(feature = "local")]
use holdpoint_models_local::{LOCAL_MODELS, LocalConfig, LocalModel};

#[cfg(feature = "anthropic")]
use crate::anthropic::{AnthropicConfig, AnthropicModel};
#[cfg(feature = "gemini")]
use crate::gemini::{GeminiConfig, GeminiModel};
use crate::http::HttpOptions;
#[cfg(feature = "openai")]
use crate::openai::{OpenAiConfig, OpenAiModel};

/// The provider prefixes [`Registry::resolve`] knows, in the order
/// [`Registry::first_available`] tries them (keyless ones last).
pub const PROVIDERS: &[&str] = &[
    "googleai",
    "openai",
    "anthropic",
    "ollama",
    "openai-compatible",
    "local",
];

/// The default model of each provider that needs a key, for
/// [`Registry::first_available`].
const DEFAULT_MODELS: &[(&str, &str)] = &[
    ("googleai", "googleai/gemini-flash-latest"),
    ("openai", "openai/gpt-4o-mini"),
    ("anthropic", "anthropic/claude-sonnet-4-5"),
];

/// Provider configs by prefix. A provider whose config is `None` has no
/// key (or, for `openai-compatible`, no base URL) and cannot resolve.
///
/// ```
/// # #[cfg(feature = "openai")] {
/// use holdpoint_models::{OpenAiConfig, Registry};
/// let mut registry = Registry::default();
/// registry.compatible = Some(OpenAiConfig::compatible("http://127.0.0.1:8000/v1", None));
/// let model = registry.resolve("openai-compatible/qwen2.5")?;
/// assert_eq!(model.name(), "openai-compatible/qwen2.5");
/// assert!(registry.resolve("openai/gpt-4o").is_err()); // no key
/// # }
/// # Ok::<(), holdpoint::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Registry {
    /// `googleai/…`.
    #[cfg(feature = "gemini")]
    pub gemini: Option<GeminiConfig>,
    /// `openai/…`.
    #[cfg(feature = "openai")]
    pub openai: Option<OpenAiConfig>,
    /// `ollama/…` (`None` means the default local address).
    #[cfg(feature = "openai")]
    pub ollama: Option<OpenAiConfig>,
    /// `openai-compatible/…`.
    #[cfg(feature = "openai")]
    pub compatible: Option<OpenAiConfig>,
    /// `anthropic/…`.
    #[cfg(feature = "anthropic")]
    pub anthropic: Option<AnthropicConfig>,
    /// `local/…` (`None`: no model directory is known).
    #[cfg(feature = "local")]
    pub local: Option<LocalConfig>,
}

impl Registry {
    /// Reads keys and base URLs from the process environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads keys and base URLs through `lookup` (an environment stand-in).
    /// Empty values count as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        #[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
        let get = |name: &str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        // A build without any provider has nothing to read.
        #[cfg(not(any(feature = "gemini", feature = "openai", feature = "anthropic", feature = "local")))]
        let _ = &lookup;
        Registry {
            #[cfg(feature = "gemini")]
            gemini: get("GEMINI_API_KEY").or_else(|| get("GOOGLE_API_KEY")).map(|key| {
                let config = GeminiConfig::new(key);
                match get("GEMINI_BASE_URL") {
                    Some(url) => config.base_url(url),
                    None => config,
                }
            }),
            #[cfg(feature = "openai")]
            openai: get("OPENAI_API_KEY").map(|key| {
                let config = OpenAiConfig::openai(key);
                match get("OPENAI_BASE_URL") {
                    Some(url) => config.base_url(url),
                    None => config,
                }
            }),
            #[cfg(feature = "openai")]
            ollama: get("OLLAMA_HOST").map(|host| OpenAiConfig::ollama_host(&host)),
            #[cfg(feature = "openai")]
            compatible: get("OPENAI_COMPATIBLE_BASE_URL")
                .map(|url| OpenAiConfig::compatible(url, get("OPENAI_COMPATIBLE_API_KEY").map(crate::ApiKey::new))),
            #[cfg(feature = "anthropic")]
            anthropic: get("ANTHROPIC_API_KEY").map(|key| {
                let config = AnthropicConfig::new(key);
                match get("ANTHROPIC_BASE_URL") {
                    Some(url) => config.base_url(url),
                    None => config,
                }
            }),
            #[cfg(feature = "local")]
            local: LocalConfig::from_lookup(&lookup),
        }
    }

    /// Sets timeouts and retries on every configured provider.
    pub fn with_http(mut self, http: HttpOptions) -> Self {
        #[cfg(feature = "gemini")]
        if let Some(c) = &mut self.gemini {
            c.http = http.clone();
        }
        #[cfg(feature = "openai")]
        {
            let ollama = self.ollama.take().unwrap_or_else(OpenAiConfig::ollama);
            self.ollama = Some(ollama);
            for c in [&mut self.openai, &mut self.ollama, &mut self.compatible]
                .into_iter()
                .flatten()
            {
                c.http = http.clone();
            }
        }
        #[cfg(feature = "anthropic")]
        if let Some(c) = &mut self.anthropic {
            c.http = http.clone();
        }
        // A build without any provider has nothing to set.
        #[cfg(not(any(feature = "gemini", feature = "openai", feature = "anthropic")))]
        let _ = (&mut self, http);
        self
    }

    /// The model named `provider/model`.
    ///
    /// Errors: a name without a provider or with an unknown one is
    /// `INVALID_ARGUMENT`; a provider without its key (or base URL), or
    /// left out of this build, is `FAILED_PRECONDITION`.
    pub fn resolve(&self, name: &str) -> Result<Arc<dyn Model>> {
        let Some((provider, model)) = name.split_once('/').filter(|(p, m)| !p.is_empty() && !m.is_empty()) else {
            return Err(Error::with_status(
                Status::InvalidArgument,
                format!("model name \"{name}\" must look like provider/model, e.g. googleai/gemini-flash-latest"),
            ));
        };
        match provider {
            "googleai" => self.gemini_model(model),
            "openai" | "ollama" | "openai-compatible" => self.openai_model(provider, model),
            "anthropic" => self.anthropic_model(model),
            "local" => self.local_model(model),
            other => Err(Error::with_status(
                Status::InvalidArgument,
                format!(
                    "unknown model provider \"{other}\" in \"{name}\"; known providers: {}",
                    PROVIDERS.join(", ")
                ),
            )),
        }
    }

    /// The default model of the first provider whose key is set, in the
    /// order Gemini, OpenAI, Anthropic.
    pub fn first_available(&self) -> Option<String> {
        DEFAULT_MODELS
            .iter()
            .find(|(provider, _)| self.has_key(provider))
            .map(|(_, model)| (*model).to_owned())
    }

    fn has_key(&self, provider: &str) -> bool {
        match provider {
            #[cfg(feature = "gemini")]
            "googleai" => self.gemini.is_some(),
            #[cfg(feature = "openai")]
            "openai" => self.openai.is_some(),
            #[cfg(feature = "anthropic")]
            "anthropic" => self.anthropic.is_some(),
            _ => false,
        }
    }

    #[cfg(feature = "gemini")]
    fn gemini_model(&self, model: &str) -> Result<Arc<dyn Model>> {
        let config = self
            .gemini
            .clone()
            .ok_or_else(|| missing("googleai", "GEMINI_API_KEY or GOOGLE_API_KEY"))?;
        Ok(Arc::new(GeminiModel::from_config(model, config)?))
    }

    #[cfg(not(feature = "gemini"))]
    fn gemini_model(&self, _model: &str) -> Result<Arc<dyn Model>> {
        Err(not_built("googleai", "gemini"))
    }

    #[cfg(feature = "openai")]
    fn openai_model(&self, provider: &str, model: &str) -> Result<Arc<dyn Model>> {
        let config = match provider {
            "openai" => self.openai.clone().ok_or_else(|| missing("openai", "OPENAI_API_KEY"))?,
            "ollama" => self.ollama.clone().unwrap_or_else(OpenAiConfig::ollama),
            _ => self
                .compatible
                .clone()
                .ok_or_else(|| missing("openai-compatible", "OPENAI_COMPATIBLE_BASE_URL"))?,
        };
        Ok(Arc::new(OpenAiModel::from_config(model, config)?))
    }

    #[cfg(not(feature = "openai"))]
    fn openai_model(&self, provider: &str, _model: &str) -> Result<Arc<dyn Model>> {
        Err(not_built(provider, "openai"))
    }

    #[cfg(feature = "anthropic")]
    fn anthropic_model(&self, model: &str) -> Result<Arc<dyn Model>> {
        let config = self
            .anthropic
            .clone()
            .ok_or_else(|| missing("anthropic", "ANTHROPIC_API_KEY"))?;
        Ok(Arc::new(AnthropicModel::from_config(model, config)?))
    }

    #[cfg(not(feature = "anthropic"))]
    fn anthropic_model(&self, _model: &str) -> Result<Arc<dyn Model>> {
        Err(not_built("anthropic", "anthropic"))
    }

    #[cfg(feature = "local")]
    fn local_model(&self, model: &str) -> Result<Arc<dyn Model>> {
        if !LOCAL_MODELS.contains(&model) {
            return Err(Error::with_status(
                Status::InvalidArgument,
                format!(
                    "unknown local model \"local/{model}\"; known local models: {}",
                    LOCAL_MODELS.join(", ")
                ),
            ));
        }
        let config = self.local.clone().ok_or_else(|| {
            Error::with_status(
                Status::FailedPrecondition,
                "local models need a model directory: set HOLDPOINT_MODEL_DIR (or HOME)",
            )
        })?;
        Ok(Arc::new(LocalModel::smollm2(config)?))
    }

    #[cfg(not(feature = "local"))]
    fn local_model(&self, model: &str) -> Result<Arc<dyn Model>> {
        Err(Error::with_status(
            Status::FailedPrecondition,
            format!(
                "local/{model} is not available: holdpoint-models was built without its \"local\" feature; to use it, \
                 build holdpoint-models with `--features local` (llama.cpp is compiled from source: needs cmake, \
                 a C++ compiler and libclang) and fetch the model file with `scripts/fetch-smollm2.sh` \
                 (from the Holdpoint repository)"
            ),
        ))
    }
}

#[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
fn missing(provider: &str, what: &str) -> Error {
    Error::with_status(
        Status::FailedPrecondition,
        format!("{provider} models need {what} to be set"),
    )
}

#[cfg(not(all(feature = "gemini", feature = "openai", feature = "anthropic")))]
fn not_built(provider: &str, feature: &str) -> Error {
    Error::with_status(
        Status::FailedPrecondition,
        format!("{provider} models are not available: holdpoint-models was built without its \"{feature}\" feature"),
    )
}

/// The model named `provider/model`, configured from the environment
/// (see the [module docs](self) for the variables).
pub fn resolve_model(name: &str) -> Result<Arc<dyn Model>> {
    Registry::from_env().resolve(name)
}

/// The default model of the first provider whose key is set in the
/// environment (Gemini, then OpenAI, then Anthropic), e.g.
/// `googleai/gemini-flash-latest`; `None` when no key is set.
pub fn first_available_provider() -> Option<String> {
    Registry::from_env().first_available()
}

#[cfg(all(test, feature = "gemini", feature = "openai", feature = "anthropic"))]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn every_provider_prefix_resolves_with_its_config() {
        let registry = Registry::from_lookup(env(&[
            ("GOOGLE_API_KEY", "g"),
            ("OPENAI_API_KEY", "o"),
            ("ANTHROPIC_API_KEY", "a"),
            ("OPENAI_COMPATIBLE_BASE_URL", "http://127.0.0.1:9/v1"),
        ]));
        for provider in PROVIDERS.iter().filter(|p| **p != "local") {
            let name = format!("{provider}/some-model");
            let model = registry.resolve(&name).unwrap();
            assert_eq!(model.name(), name);
        }
    }

    #[test]
    fn bad_names_and_missing_keys_are_clear() {
        let registry = Registry::from_lookup(env(&[("GEMINI_API_KEY", "  ")]));
        let err = registry.resolve("googleai/gemini-flash-latest").err().unwrap();
        assert_eq!(err.status(), Status::FailedPrecondition);
        assert!(err.to_string().contains("GEMINI_API_KEY"), "{err}");
        assert_eq!(
            registry.resolve("gpt-4o").err().unwrap().status(),
            Status::InvalidArgument
        );
        let err = registry.resolve("mystery/x").err().unwrap();
        assert!(err.to_string().contains("googleai, openai"), "{err}");
        assert!(registry.resolve("ollama/llama3.2").is_ok());
        assert!(registry.resolve("openai-compatible/x").is_err());
    }

    #[test]
    fn first_available_follows_provider_order() {
        assert_eq!(Registry::from_lookup(env(&[])).first_available(), None);
        let r = Registry::from_lookup(env(&[("ANTHROPIC_API_KEY", "a"), ("OPENAI_API_KEY", "o")]));
        assert_eq!(r.first_available().as_deref(), Some("openai/gpt-4o-mini"));
        let r = Registry::from_lookup(env(&[("ANTHROPIC_API_KEY", "a"), ("GOOGLE_API_KEY", "g")]));
        assert_eq!(r.first_available().as_deref(), Some("googleai/gemini-flash-latest"));
    }

    #[test]
    fn local_models_explain_what_they_need() {
        let registry = Registry::from_lookup(env(&[("HOLDPOINT_MODEL_DIR", "/nonexistent/holdpoint")]));
        let err = registry.resolve("local/smollm2").err().unwrap();
        assert_eq!(err.status(), Status::FailedPrecondition);
        let msg = err.to_string();
        assert!(msg.contains("scripts/fetch-smollm2.sh"), "{msg}");
        if cfg!(feature = "local") {
            assert!(
                msg.contains("/nonexistent/holdpoint/SmolLM2-135M-Instruct.Q4_1.gguf"),
                "{msg}"
            );
            let err = registry.resolve("local/llama-70b").err().unwrap();
            assert_eq!(err.status(), Status::InvalidArgument);
            assert!(err.to_string().contains("smollm2"), "{err}");
        } else {
            assert!(msg.contains("--features local"), "{msg}");
        }
    }

    #[test]
    fn ollama_host_is_normalised() {
        let r = Registry::from_lookup(env(&[("OLLAMA_HOST", "0.0.0.0:11434")]));
        assert_eq!(r.ollama.unwrap().base_url, "http://0.0.0.0:11434/v1");
    }
}
