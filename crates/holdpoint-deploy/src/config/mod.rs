//! The deployment configuration file: one TOML file that configures
//! authentication, approval rules, notification channels and MCP servers
//! (docs/reference.md §15).
//!
//! [`Config::load`] reads and checks the whole file before anything starts.
//! Every mistake is a [`ConfigError`] naming the file, the line, the key and
//! what is wrong: an unknown key, a key given twice (TOML's own check, and
//! an API key or principal listed twice), a CEL condition that does not
//! compile, a role nobody declares, a URL that is not http(s), a webhook
//! secret that does not decode, a bad duration.
//!
//! **Declared roles.** A role named in a rule's `approvers` or
//! `escalate_to`, or in a notification channel's `roles`, must be declared:
//! held by some `[[auth.api_keys]]` entry, or listed in `[auth] roles = […]`
//! (for roles that only tokens carry). A typo in a role would otherwise
//! make a rule nobody can ever answer.
//!
//! The `notify` and `mcp` sections are checked here into the settings
//! types of the crates that use them: `holdpoint-notify`'s
//! [`NotifyConfig`] and `holdpoint-mcp`'s
//! [`ServerConfig`](holdpoint_mcp::ServerConfig), with no copy of them in
//! between.
//!
//! Secrets (API keys, webhook secrets, SMTP passwords, Slack webhook URLs,
//! MCP header and environment values, the store URL) are held as
//! [`Secret`](holdpoint_secret::Secret)s — the one type notify and MCP hold
//! them in too: never in `Debug` output, never in an error.
//!
//! ```
//! use holdpoint_deploy::config::Config;
//! let config = Config::parse(
//!     r#"
//!     [[auth.api_keys]]
//!     principal = "alice"
//!     key = "k-alice-0123456789"
//!     roles = ["customer"]
//!
//!     [[auth.api_keys]]
//!     principal = "fiona"
//!     key = "k-fiona-0123456789"
//!     roles = ["finance"]
//!
//!     [[approval.rules]]
//!     tool = "transferMoney"
//!     when = "input.amount > 10000"
//!     approvers = ["finance"]
//!     quorum = 2
//!     self_approval = false
//!     "#,
//!     "holdpoint.toml",
//! )?;
//! assert_eq!(config.approval_policy().rules()[0].quorum, 2);
//! assert_eq!(config.api_keys().len(), 2);
//! let err = Config::parse("[auth]\nrolez = []\n", "holdpoint.toml").unwrap_err();
//! assert_eq!(err.to_string(), "holdpoint.toml:2:1: `auth.rolez`: unknown key `rolez` (known: roles, api_keys, jwt)");
//! # Ok::<(), holdpoint_deploy::config::ConfigError>(())
//! ```

mod duration;
mod error;
mod raw;
mod types;
mod validate;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use holdpoint::approval::{Policy, RuleSpec};
use holdpoint::session::outbox::OutboxWrites;
use holdpoint_mcp::ServerConfig as McpServerConfig;
use holdpoint_notify::NotifyConfig;

use holdpoint_server::auth::{ApiKeys, JwksError, JwksSource, JwtVerifier};

pub use duration::{MAX_DURATION, parse_duration};
pub use error::{ConfigError, ConfigErrorKind};
pub use types::{ApiKeyConfig, EVENTS, JwtConfig, JwtKeys, JwtPrincipal, ServerSettings, StoreOrigin, StoreSetting};

/// The largest configuration file read, in bytes.
pub const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// A checked configuration file. See the module docs.
#[derive(Debug, Clone)]
pub struct Config {
    file: PathBuf,
    public_url: Option<String>,
    server: ServerSettings,
    roles: BTreeSet<String>,
    api_keys: Vec<ApiKeyConfig>,
    jwt: Option<JwtConfig>,
    rules: Vec<RuleSpec>,
    policy: Policy,
    notify: NotifyConfig,
    mcp: Vec<McpServerConfig>,
}

impl Config {
    /// Reads and checks the file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        use std::io::Read;
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(|e| ConfigError::io(path, &e))?;
        let mut text = String::new();
        file.take(MAX_CONFIG_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| ConfigError::io(path, &e))?;
        if text.len() as u64 > MAX_CONFIG_BYTES {
            return Err(ConfigError::io(
                path,
                &std::io::Error::other(format!("larger than {MAX_CONFIG_BYTES} bytes")),
            ));
        }
        Self::parse(&text, path)
    }

    /// Checks `text`; errors name `file`.
    pub fn parse(text: &str, file: impl AsRef<Path>) -> Result<Self, ConfigError> {
        validate::build(&error::Source {
            file: file.as_ref(),
            text,
        })
    }

    /// The file it was read from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The approval policy of `[[approval.rules]]`, in order (already
    /// checked: building it again cannot fail).
    pub fn approval_policy(&self) -> Policy {
        self.policy.clone()
    }

    /// The rules, in order, each with its timers
    /// ([`RuleSpec::timers`]: the core's own type, stamped on its holds).
    pub fn approval_rules(&self) -> &[RuleSpec] {
        &self.rules
    }

    /// `[[auth.api_keys]]`, in order.
    pub fn api_key_entries(&self) -> &[ApiKeyConfig] {
        &self.api_keys
    }

    /// The API keys as a provider, each carrying its roles and scope.
    pub fn api_keys(&self) -> ApiKeys {
        self.api_keys.iter().fold(ApiKeys::new(), |keys, k| {
            keys.entry(k.key.expose(), k.principal.clone(), k.scope.clone(), k.roles.clone())
        })
    }

    /// `[auth.jwt]`, when present.
    pub fn jwt(&self) -> Option<&JwtConfig> {
        self.jwt.as_ref()
    }

    /// The verifier `[auth.jwt]` describes (keys fetched on first use).
    pub fn jwt_verifier(&self) -> Result<Option<JwtVerifier>, JwksError> {
        let Some(jwt) = &self.jwt else { return Ok(None) };
        let mut source = match &jwt.keys {
            JwtKeys::JwksUrl(url) => JwksSource::url(url),
            JwtKeys::Discovery(issuer) => JwksSource::issuer(issuer),
        };
        if let Some(d) = jwt.refresh_interval {
            source = source.refresh_interval(d);
        }
        if let Some(d) = jwt.min_refetch_interval {
            source = source.min_refetch_interval(d);
        }
        if let Some(d) = jwt.timeout {
            source = source.timeout(d);
        }
        let mut verifier = JwtVerifier::jwks(source)?;
        if let Some(issuer) = &jwt.issuer {
            verifier = verifier.issuer(issuer);
        }
        if let Some(audience) = &jwt.audience {
            verifier = verifier.audience(audience);
        }
        if let Some(claim) = &jwt.roles_claim {
            verifier = verifier.roles_claim(claim);
        }
        if jwt.principal == JwtPrincipal::Subject {
            verifier = verifier.principal_as_subject();
        }
        Ok(Some(verifier))
    }

    /// Every declared role: those of the API keys and `[auth] roles`.
    pub fn declared_roles(&self) -> &BTreeSet<String> {
        &self.roles
    }

    /// `public_url`: where links in notifications point (also in
    /// [`notify`](Self::notify)).
    pub fn public_url(&self) -> Option<&str> {
        self.public_url.as_deref()
    }

    /// `[server]`.
    pub fn server(&self) -> &ServerSettings {
        &self.server
    }

    /// `[notify]` (and `public_url`), as `holdpoint-notify` takes it.
    pub fn notify(&self) -> &NotifyConfig {
        &self.notify
    }

    /// Whether `[notify]` configures a channel (a webhook, Slack or email).
    pub fn has_channel(&self) -> bool {
        let n = &self.notify;
        !(n.webhooks.is_empty() && n.slack.is_empty() && n.email.is_empty())
    }

    /// Which outbox rows a store served with this file writes: every row
    /// when a channel is configured, else only the timers that act
    /// (expiry, escalation, in doubt), so a server with no channel writes
    /// no event nobody reads. A channel added to the file later is told
    /// every change made once the server runs with it.
    pub fn outbox_writes(&self) -> OutboxWrites {
        if self.has_channel() {
            OutboxWrites::All
        } else {
            OutboxWrites::Timers
        }
    }

    /// `[[mcp.servers]]`, in order, as `holdpoint-mcp` takes them.
    pub fn mcp_servers(&self) -> &[McpServerConfig] {
        &self.mcp
    }

    /// The approval page's OpenID sign-in `[auth.jwt] page_client_id`
    /// describes (at the `issuer`), if any.
    pub fn page_login(&self) -> Option<holdpoint_server::PageLogin> {
        let jwt = self.jwt.as_ref()?;
        holdpoint_server::PageLogin::new(jwt.issuer.as_deref()?, jwt.page_client_id.as_deref()?).ok()
    }

    /// The one line a server prints about the file: its path, how many API
    /// keys, whether tokens (JWT) are taken, how many approval rules.
    pub fn summary(&self) -> String {
        format!(
            "configuration {}: {} API keys, {}, {} approval rules",
            self.file.display(),
            self.api_keys.len(),
            if self.jwt.is_some() {
                "bearer tokens (JWT)"
            } else {
                "no JWT"
            },
            self.rules.len()
        )
    }

    /// Whether any authentication is configured (API keys or JWT).
    pub fn has_auth(&self) -> bool {
        !self.api_keys.is_empty() || self.jwt.is_some()
    }

    /// `builder` with this file's API keys (if any) and JWT verifier (if
    /// any) added as context providers, API keys first.
    pub fn apply_auth(
        &self,
        mut builder: holdpoint_server::ServerBuilder,
    ) -> Result<holdpoint_server::ServerBuilder, JwksError> {
        if !self.api_keys.is_empty() {
            builder = builder.api_keys(self.api_keys());
        }
        if let Some(jwt) = self.jwt_verifier()? {
            builder = builder.jwt(jwt);
        }
        // Checked when the file was read (an http(s) issuer is required).
        if let Some(login) = self.page_login() {
            builder = builder.page_login(login);
        }
        Ok(builder)
    }
}

#[cfg(test)]
mod tests;
