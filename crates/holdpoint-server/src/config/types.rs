//! The validated configuration: plain data, every value checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::auth::AgentScope;

/// A value that must not be shown: its `Debug` output is `Secret(***)`,
/// and it has no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub(super) fn new(value: String) -> Self {
        Secret(value)
    }

    /// The value, for the code that uses it (never for logs or errors).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// `[server]`: where and how to serve (each overridden by its flag).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerSettings {
    /// `listen`: the socket address (`127.0.0.1:8080`).
    pub listen: Option<std::net::SocketAddr>,
    /// `store`: the session store URL (may hold a database password).
    pub store: Option<Secret>,
    /// `data_dir`: where the state-signing keys are kept.
    pub data_dir: Option<PathBuf>,
    /// `metrics_open`: serve `GET /metrics` without credentials.
    pub metrics_open: Option<bool>,
    /// `allowed_hosts`: host names an anonymous server answers.
    pub allowed_hosts: Vec<String>,
}

/// One `[[auth.api_keys]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyConfig {
    /// `principal`: who the key authenticates.
    pub principal: String,
    /// `key`: the key itself.
    pub key: Secret,
    /// `roles`: the principal's roles.
    pub roles: BTreeSet<String>,
    /// `agents`: the agents it may use (absent: all).
    pub scope: AgentScope,
}

/// How `[auth.jwt]` names a token's principal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwtPrincipal {
    /// `"issuer_and_subject"` (the default): `jwt:<iss>#<sub>`.
    #[default]
    IssuerAndSubject,
    /// `"subject"`: the bare `sub`, shared with API-key principals.
    Subject,
}

/// Where `[auth.jwt]` gets its verification keys.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwtKeys {
    /// `jwks_url`: a JWKS document.
    JwksUrl(String),
    /// `issuer` without `jwks_url`: OIDC discovery on the issuer.
    Discovery(String),
}

/// `[auth.jwt]`: signed bearer tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtConfig {
    /// Where the keys come from.
    pub keys: JwtKeys,
    /// `issuer`: the `iss` tokens must carry.
    pub issuer: Option<String>,
    /// `audience`: the `aud` tokens must carry.
    pub audience: Option<String>,
    /// `roles_claim`: the claim (or dotted path) holding the roles.
    pub roles_claim: Option<String>,
    /// `principal`: how a token's principal is named.
    pub principal: JwtPrincipal,
    /// `refresh_interval`: how long fetched keys are used (default 5 min).
    pub refresh_interval: Option<Duration>,
    /// `min_refetch_interval`: the least time between fetches (default 10 s).
    pub min_refetch_interval: Option<Duration>,
    /// `timeout`: how long one fetch may take (default 5 s).
    pub timeout: Option<Duration>,
    /// `page_client_id`: the approval page signs people in at `issuer`
    /// with OpenID Connect as this public client (docs/reference.md §12.9).
    pub page_client_id: Option<String>,
}

/// What `on_expire` does to a hold nobody answered in time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnExpire {
    /// `"expire"` (the default): the hold ends as `expire`.
    #[default]
    Expire,
    /// `"deny"`: the hold is denied (the model is told).
    Deny,
}

/// The timers of one `[[approval.rules]]` entry (consumed by the
/// notification and escalation machinery).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleTimers {
    /// `remind_after`: notify the same approvers again after this long.
    pub remind_after: Option<Duration>,
    /// `escalate_after`: after this long, `escalate_to` may answer too.
    pub escalate_after: Option<Duration>,
    /// `escalate_to`: the roles added at escalation.
    pub escalate_to: Vec<String>,
    /// `expire_after`: the hold ends after this long.
    pub expire_after: Option<Duration>,
    /// `on_expire`: how it ends.
    pub on_expire: OnExpire,
}

/// The Standard Webhooks events a channel can take: every event type the
/// core's outbox writes ([`holdpoint::session::outbox::EVENT_TYPES`]).
///
/// Invariant: this is the core's list itself, not a copy, so an event the
/// outbox writes is always one a channel can name, and the default (no
/// `events` key) subscribes to all of them (`hold.reminded` and
/// `hold.partially_approved` included).
pub const EVENTS: &[&str] = holdpoint::session::outbox::EVENT_TYPES;

/// Which events and roles a notification channel serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routing {
    /// `events`: the event types (absent: all of [`EVENTS`]).
    pub events: BTreeSet<String>,
    /// `roles`: only holds these roles may answer (absent: every hold).
    pub roles: Option<BTreeSet<String>>,
}

/// A Standard Webhooks secret (`whsec_` and base64), checked to decode.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(Secret);

impl WebhookSecret {
    pub(super) fn new(value: String) -> Self {
        WebhookSecret(Secret::new(value))
    }

    /// The secret as configured (`whsec_…`), as Standard Webhooks
    /// libraries take it.
    pub fn expose(&self) -> &str {
        self.0.expose()
    }

    /// The signing key: the base64 after `whsec_`, decoded.
    pub fn key_bytes(&self) -> Vec<u8> {
        let b64 = self.0.expose().strip_prefix("whsec_").unwrap_or_default();
        STANDARD.decode(b64).unwrap_or_default()
    }
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(***)")
    }
}

/// One `[[notify.webhooks]]` endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// `url`: where events are POSTed (http or https).
    pub url: String,
    /// `secret`: the signing secret.
    pub secret: WebhookSecret,
    /// `events`, `roles`.
    pub routing: Routing,
}

/// How `[notify.smtp]` secures the connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SmtpTls {
    /// `"none"`: plain (local relays only).
    None,
    /// `"starttls"` (the default): upgrade after connecting.
    #[default]
    StartTls,
    /// `"tls"`: TLS from the first byte.
    Tls,
}

/// `[notify.smtp]`: the mail relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpConfig {
    /// `host`.
    pub host: String,
    /// `port` (default 25 for `none`, 587 for `starttls`, 465 for `tls`).
    pub port: u16,
    /// `from`: the sender address.
    pub from: String,
    /// `tls`.
    pub tls: SmtpTls,
    /// `username` and `password`, both or neither.
    pub credentials: Option<(String, Secret)>,
}

/// One `[[notify.email]]` channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailConfig {
    /// `to`: the recipients.
    pub to: Vec<String>,
    /// `events`, `roles`.
    pub routing: Routing,
}

/// One `[[notify.slack]]` channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackConfig {
    /// `webhook_url`: the incoming-webhook URL (it embeds a token, so it is
    /// a secret).
    pub webhook_url: Secret,
    /// `events`, `roles`.
    pub routing: Routing,
}

/// `[notify]`: every notification channel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotifyConfig {
    /// `[[notify.webhooks]]`.
    pub webhooks: Vec<WebhookConfig>,
    /// `[notify.smtp]`.
    pub smtp: Option<SmtpConfig>,
    /// `[[notify.email]]` (needs `[notify.smtp]`).
    pub email: Vec<EmailConfig>,
    /// `[[notify.slack]]`.
    pub slack: Vec<SlackConfig>,
}

/// How an MCP server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpTransport {
    /// `command` + `args` (+ `env`): a child process over stdio.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment (values are secrets).
        env: BTreeMap<String, Secret>,
    },
    /// `url` (+ `headers`): Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Extra headers (values are secrets: they often carry tokens).
        headers: BTreeMap<String, Secret>,
    },
}

/// One `[[mcp.servers]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// `name`: unique; its tools are named `{name}_{tool}`.
    pub name: String,
    /// How it is reached.
    pub transport: McpTransport,
    /// `agents`: which agents get its tools (absent: all).
    pub agents: Option<BTreeSet<String>>,
}
