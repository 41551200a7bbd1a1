//! [`Secret`]: the one type every deployment setting that must not be
//! shown is held in — API keys, the store URL, webhook secrets, Slack
//! webhook URLs, SMTP passwords, MCP environment values, headers and bearer
//! tokens. `holdpoint-notify`, `holdpoint-mcp` and `holdpoint-deploy` all
//! use this one type, so a secret keeps its guard on its way from the
//! configuration file to the code that sends it.
//!
//! Invariant: the value leaves a `Secret` only through [`Secret::expose`].
//! `Debug` prints `Secret(***)`; there is no `Display` and no `Serialize`,
//! so `format!`, `tracing` fields and error messages cannot carry it by
//! accident.
//!
//! ```
//! use holdpoint_secret::Secret;
//! let key = Secret::new("k-alice-0123456789");
//! assert_eq!(format!("{key:?}"), "Secret(***)");
//! assert_eq!(key.expose(), "k-alice-0123456789");
//! ```
#![deny(missing_docs)]

use serde::{Deserialize, Deserializer};

/// A value that must not be shown: its `Debug` output is `Secret(***)`,
/// and it has no `Display`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value, for the code that uses it (never for logs or errors).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

/// A secret is read as a plain string (a TOML or JSON value).
impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_read_from_json_is_never_shown() {
        let s: Secret = serde_json::from_str("\"whsec_abc\"").unwrap();
        assert_eq!(s.expose(), "whsec_abc");
        assert!(!format!("{s:?}").contains("abc"));
    }
}
