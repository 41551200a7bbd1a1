//! `ApiKey`: a provider credential that never shows itself.
//!
//! The key is sent in a request header marked sensitive and is otherwise
//! kept out of sight: its `Debug` prints `ApiKey(****)`, it has no
//! `Display`, and every error message built from a provider's answer is
//! scrubbed of it (some providers echo part of a rejected key back).

/// A provider API key. `Debug` never prints it.
///
/// ```
/// use holdpoint_models::ApiKey;
/// let key = ApiKey::new("sk-very-secret");
/// assert_eq!(format!("{key:?}"), "ApiKey(****)");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// Whether the key is the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.trim().is_empty()
    }

    /// The key itself, for the one place that puts it in a header.
    #[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key (and of its longer prefixes
    /// and suffixes, which providers like to echo) replaced by `****`.
    #[cfg(any(feature = "gemini", feature = "openai", feature = "anthropic"))]
    pub(crate) fn scrub(&self, text: &str) -> String {
        let key = self.0.trim();
        if key.len() < 4 {
            return text.to_owned();
        }
        let mut out = text.replace(key, "****");
        // Providers echo masked keys such as "sk-abc***wxyz"; cut any run
        // of eight or more key characters that appears verbatim.
        let chars: Vec<char> = key.chars().collect();
        if chars.len() >= 16 {
            for window in [&chars[..8], &chars[chars.len() - 8..]] {
                let piece: String = window.iter().collect();
                out = out.replace(&piece, "****");
            }
        }
        out
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(****)")
    }
}

impl From<String> for ApiKey {
    fn from(key: String) -> Self {
        ApiKey(key)
    }
}

impl From<&str> for ApiKey {
    fn from(key: &str) -> Self {
        ApiKey(key.to_owned())
    }
}

#[cfg(all(test, any(feature = "gemini", feature = "openai", feature = "anthropic")))]
mod tests {
    use super::*;

    #[test]
    fn scrub_removes_whole_key_and_echoed_ends() {
        let key = ApiKey::new("sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ");
        let msg = "Incorrect API key provided: sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        assert!(!key.scrub(msg).contains("ABCDEFGH"));
        let masked = "Incorrect API key provided: sk-proj-*********************STUVWXYZ.";
        assert!(!key.scrub(masked).contains("STUVWXYZ"), "{}", key.scrub(masked));
        assert_eq!(format!("{key:?}"), "ApiKey(****)");
    }
}
