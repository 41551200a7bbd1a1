//! The validated configuration of the sections this crate owns (`[server]`,
//! `[auth]`): plain data, every value checked. `[[approval.rules]]`,
//! `[notify]` and `[[mcp.servers]]` are checked into the types of the core,
//! `holdpoint-notify` and `holdpoint-mcp` themselves.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use holdpoint_secret::Secret;
use holdpoint_server::auth::AgentScope;

/// `[server]`: where and how to serve (each overridden by its flag).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerSettings {
    /// `listen`: the socket address (`127.0.0.1:8080`).
    pub listen: Option<std::net::SocketAddr>,
    /// `store`: the session store URL, checked (see [`StoreSetting`]).
    pub store: Option<StoreSetting>,
    /// `data_dir`: where the state-signing keys are kept.
    pub data_dir: Option<PathBuf>,
    /// `metrics_open`: serve `GET /metrics` without credentials.
    pub metrics_open: Option<bool>,
    /// `allowed_hosts`: host names an anonymous server answers.
    pub allowed_hosts: Vec<String>,
}

/// Where a store URL was given: every error about it names this.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreOrigin {
    /// A command-line flag (or the environment variable standing for it),
    /// by its name: `--store`.
    Flag(String),
    /// The configuration file's `[server] store`, at this line and column
    /// (1-based).
    File {
        /// The configuration file.
        file: PathBuf,
        /// The line of the value.
        line: usize,
        /// The column of the value.
        column: usize,
    },
    /// The binary's own default (no flag, no file setting).
    Default,
}

impl fmt::Display for StoreOrigin {
    /// `--store`, ``FILE:LINE:COLUMN: `server.store` ``, or `the default
    /// store`: the prefix of an error about the URL.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreOrigin::Flag(name) => f.write_str(name),
            StoreOrigin::File { file, line, column } => {
                write!(f, "{}:{line}:{column}: `server.store`", file.display())
            }
            StoreOrigin::Default => f.write_str("the default store"),
        }
    }
}

/// A session store URL that `holdpoint-stores` understands (`memory:`,
/// `sqlite:PATH`, `postgres://…`), with where it was given.
///
/// Invariant: the URL parsed when this value was made (from the file by
/// [`Config::load`](crate::Config::load), from a flag by
/// [`StoreSetting::given`]); it is held as a [`Secret`] (a PostgreSQL URL
/// may carry a password). [`StoreSetting::open`] opens it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSetting {
    url: Secret,
    origin: StoreOrigin,
}

impl StoreSetting {
    /// `url`, already parsed by `holdpoint_stores::parse_store_url`.
    pub(crate) fn checked(url: &str, origin: StoreOrigin) -> Self {
        StoreSetting {
            url: Secret::new(url.trim()),
            origin,
        }
    }

    /// The URL.
    pub fn url(&self) -> &Secret {
        &self.url
    }

    /// Where it was given.
    pub fn origin(&self) -> &StoreOrigin {
        &self.origin
    }

    /// Whether it is `memory:`: sessions end with the process.
    pub fn is_memory(&self) -> bool {
        matches!(
            holdpoint_stores::parse_store_url(self.url.expose()),
            Ok(holdpoint_stores::StoreUrl::Memory)
        )
    }
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

/// The Standard Webhooks events a channel can take: every event type the
/// core's outbox writes ([`holdpoint::session::outbox::EVENT_TYPES`]).
///
/// Invariant: this is the core's list itself, not a copy, so an event the
/// outbox writes is always one a channel can name, and the default (no
/// `events` key) subscribes to all of them (`hold.reminded` and
/// `hold.partially_approved` included).
pub const EVENTS: &[&str] = holdpoint::session::outbox::EVENT_TYPES;
