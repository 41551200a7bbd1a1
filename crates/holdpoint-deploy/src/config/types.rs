//! The validated configuration of the sections this crate owns (`[server]`,
//! `[auth]`, the rules' timers): plain data, every value checked. `[notify]`
//! and `[[mcp.servers]]` are checked into the settings types of
//! `holdpoint-notify` and `holdpoint-mcp` themselves.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use holdpoint_secret::Secret;
use holdpoint_server::auth::AgentScope;

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
