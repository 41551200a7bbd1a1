//! [`Server`] and [`ServerBuilder`]: agents, auth, keys and limits composed
//! into an axum [`Router`].

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use holdpoint::agent::Agent;
use holdpoint::session::{InMemoryStore, SessionStore};

use crate::auth::{ApiKeys, Authenticator, ContextProvider, JwtVerifier};
use crate::hosts::HostPolicy;
use crate::inflight::Turns;
use crate::limits::Limits;
use crate::listen::ConnectionLimits;
use crate::metrics::Metrics;
use crate::signing::{KeyRing, SigningCodec};
use crate::state::{AppState, StateInner};

/// Why a server could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// Two agents have the same name.
    #[error("two agents are named \"{0}\"")]
    DuplicateAgent(String),
    /// An agent name cannot be a path segment (empty, or contains `/`).
    #[error("agent name {0:?} cannot be served (empty or contains '/')")]
    BadAgentName(String),
    /// The state-signing keys could not be loaded or created.
    #[error("state-signing keys: {0}")]
    Keys(#[from] io::Error),
    /// A store lacks a capability the server needs of it: a listing for
    /// each server-managed agent's (its inbox and metrics), an outbox for
    /// the one given to [`ServerBuilder::notifications`]. The error is
    /// [`holdpoint::Error::MissingCapability`], naming both.
    #[error("{0}")]
    Store(holdpoint::Error),
}

/// Builds a [`Server`].
///
/// ```
/// use std::sync::Arc;
/// use holdpoint::agent::Agent;
/// use holdpoint::session::InMemoryStore;
/// use holdpoint::{ScriptedModel, ScriptedTurn};
/// use holdpoint_server::Server;
/// use holdpoint_server::auth::ApiKeys;
///
/// let model = ScriptedModel::new("m");
/// model.push(ScriptedTurn::text("hello"));
/// let agent = Agent::builder("greeter")
///     .model(Arc::new(model))
///     .store(Arc::new(InMemoryStore::new()))
///     .build()?;
/// let data = tempfile::tempdir()?;
/// let server = Server::builder()
///     .agent(agent)
///     .api_keys(ApiKeys::new().key("k-alice-0123456789", "alice"))
///     .data_dir(data.path())
///     .build()?;
/// let app: axum::Router = axum::Router::new().merge(server.router());
/// # let _ = app;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use]
pub struct ServerBuilder {
    agents: Vec<Agent>,
    providers: Vec<Arc<dyn ContextProvider>>,
    anonymous: Option<bool>,
    limits: Limits,
    keys: Option<KeyRing>,
    data_dir: Option<PathBuf>,
    grace: Duration,
    metrics: Option<Metrics>,
    metrics_token: Option<String>,
    metrics_open: bool,
    allowed_hosts: Option<Vec<String>>,
    request_timeout: Option<Duration>,
    connections: ConnectionLimits,
    state_claims: Option<Arc<dyn SessionStore>>,
    page_login: Option<crate::PageLogin>,
    outbox: Option<Arc<dyn SessionStore>>,
    receipt_keys: Option<serde_json::Value>,
}

impl Default for ServerBuilder {
    fn default() -> Self {
        ServerBuilder {
            agents: Vec::new(),
            providers: Vec::new(),
            anonymous: None,
            limits: Limits::default(),
            keys: None,
            data_dir: None,
            grace: Duration::from_secs(30),
            metrics: None,
            metrics_token: None,
            metrics_open: false,
            allowed_hosts: None,
            request_timeout: Some(Duration::from_secs(30)),
            connections: ConnectionLimits::default(),
            state_claims: None,
            page_login: None,
            outbox: None,
            receipt_keys: None,
        }
    }
}

impl ServerBuilder {
    /// Serves `agent` at `/agents/{its name}`.
    pub fn agent(mut self, agent: Agent) -> Self {
        self.agents.push(agent);
        self
    }

    /// Serves each of `agents`.
    pub fn agents(mut self, agents: impl IntoIterator<Item = Agent>) -> Self {
        self.agents.extend(agents);
        self
    }

    /// Accepts these API keys.
    pub fn api_keys(self, keys: ApiKeys) -> Self {
        self.provider(Arc::new(keys))
    }

    /// Accepts signed bearer tokens (JWTs) that `jwt` verifies.
    pub fn jwt(self, jwt: JwtVerifier) -> Self {
        self.provider(Arc::new(jwt))
    }

    /// Adds a context provider (run after those added before it).
    pub fn provider(mut self, provider: Arc<dyn ContextProvider>) -> Self {
        self.providers.push(provider);
        self
    }

    /// Whether requests without credentials are served (as the anonymous
    /// principal). Default: only when no provider is configured.
    pub fn allow_anonymous(mut self, allow: bool) -> Self {
        self.anonymous = Some(allow);
        self
    }

    /// The largest request body in bytes (default 1 MiB; larger is 413).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.limits = self.limits.with_body(bytes);
        self
    }

    /// All size limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Signs client-held state with these keys (the newest signs).
    pub fn signing_keys(mut self, keys: KeyRing) -> Self {
        self.keys = Some(keys);
        self
    }

    /// Keeps generated state-signing keys in `dir` (created on first start),
    /// when no keys are given with [`signing_keys`](Self::signing_keys).
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Where resumes from signed client-held state are claimed (docs/reference.md §9):
    /// a marker snapshot `state-claim:MAC` per resumed state, written before
    /// any tool runs, so replaying the same state gets 409 "already
    /// resumed". By default the store of the first server-managed agent
    /// (durable, and shared by replicas that share it); with none, an
    /// in-memory store, which guards one process until it restarts — give
    /// replicas one shared durable store then. Server-managed agents claim
    /// their snapshots instead.
    pub fn state_claims(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.state_claims = Some(store);
        self
    }

    /// How long a shutdown waits for running turns (default 30 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Records into these metrics (share them with the agents' store and
    /// middleware, see [`Metrics`]); by default the server makes its own.
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Accepts `Authorization: Bearer TOKEN` for `GET /metrics`, for a
    /// scraper that has no principal's credentials. With a token set, the
    /// anonymous caller of a server that allows one is refused too (401).
    ///
    /// Who may scrape: with [`metrics_open`](Self::metrics_open), anyone;
    /// otherwise a caller with the metrics token or with credentials the
    /// server's providers accept (any principal). A server that serves
    /// anonymous callers and has no metrics token lets them scrape as well
    /// (it answers loopback hosts only, see
    /// [`allowed_hosts`](Self::allowed_hosts)).
    pub fn metrics_token(mut self, token: impl Into<String>) -> Self {
        self.metrics_token = Some(token.into());
        self
    }

    /// Lets the approval page sign people in with OpenID Connect
    /// (authorization code + PKCE, run by the page against `login`'s
    /// issuer; docs/reference.md §12.9). The token the page gets is sent as
    /// a bearer token: configure a provider that verifies it (a JWT
    /// verifier for the same issuer). API keys keep working.
    pub fn page_login(mut self, login: crate::PageLogin) -> Self {
        self.page_login = Some(login);
        self
    }

    /// Serves `GET /metrics` to anyone who can reach it (default: `false`,
    /// see [`metrics_token`](Self::metrics_token)). The metrics hold only
    /// aggregate counts by agent, tool and route; open them when the
    /// listener is reachable by the scraper only, or mount the router
    /// twice: an app with `/metrics` open on a private address and the
    /// public one without.
    pub fn metrics_open(mut self, open: bool) -> Self {
        self.metrics_open = open;
        self
    }

    /// The host names, besides the loopback ones, that requests may name
    /// in `Host` (and in `Origin`): for a server that serves anonymous
    /// callers behind a proxy that sends its own name. An entry is a name
    /// or address without port, matched case-insensitively; `"*"` turns
    /// the check off.
    ///
    /// By default a server that allows anonymous callers (no provider, or
    /// [`allow_anonymous`](Self::allow_anonymous)) answers only requests
    /// for `localhost`, names under `.localhost`, `127.0.0.0/8` and
    /// `[::1]` (any port): a page that rebinds its own DNS name to
    /// `127.0.0.1` names that name in `Host` and is answered 421
    /// `PERMISSION_DENIED`; a request whose `Origin` is not such a host
    /// is answered 403. A server whose callers must all authenticate
    /// checks hosts only when given allowed hosts.
    pub fn allowed_hosts<I, S>(mut self, hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allowed_hosts
            .get_or_insert_with(Vec::new)
            .extend(hosts.into_iter().map(Into::into));
        self
    }

    /// How long a request head may take to arrive, from its first byte (a
    /// new connection's first head: from the accept). Default 10 s; a
    /// client that sends its head slower is disconnected, so half-sent
    /// requests hold no connection for long. Used by
    /// [`serve`](crate::serve) and [`serve_app`](crate::serve_app).
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.connections.header_read_timeout = timeout;
        self
    }

    /// How long a keep-alive connection may sit with no request in flight
    /// and no bytes either way before it is closed (default 60 s).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.connections.idle_timeout = timeout;
        self
    }

    /// How many connections may be open at once (default 1024; at least
    /// 1). A WebSocket counts until it closes. Past the bound the server
    /// stops accepting: new connections wait in the listener's backlog
    /// until a place frees. Keep it below the process's file-descriptor
    /// limit.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.connections.max_connections = max.max(1);
        self
    }

    /// How many of the open connections one client (an IPv4 address, an
    /// IPv6 /64) may hold (at least 1). By default the bound in force less
    /// a quarter of it, so a reverse proxy, whose address every connection
    /// has, is not limited before the server is nearly full; set it lower
    /// when clients connect directly. A connection past it is closed as
    /// soon as it is accepted.
    pub fn max_connections_per_client(mut self, max: usize) -> Self {
        self.connections.max_per_client = Some(max.max(1));
        self
    }

    /// Publishes the public keys of the agents' approval receipts at
    /// `GET /.well-known/holdpoint-receipts.json`, for services and
    /// `holdpoint receipt verify` (docs/reference.md §20). `jwks` is the
    /// JSON Web Key Set, public keys only: with `holdpoint-receipt`,
    /// `serde_json::to_value(signer.jwks())`.
    pub fn receipt_keys(mut self, jwks: serde_json::Value) -> Self {
        self.receipt_keys = Some(jwks);
        self
    }

    /// How long a request body may take to arrive (default 30 s; `None`:
    /// no limit). A client that sends its body slower is answered 408
    /// `DEADLINE_EXCEEDED`; it never holds up other requests.
    pub fn request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Serves the notification outbox of `store` to operators
    /// (docs/reference.md §11.3): `GET /notifications`, `POST
    /// /notifications/{id}/retry`, `POST
    /// /notifications/endpoints/{channel}/enable`, for callers with the
    /// [`OPERATOR_ROLE`](crate::OPERATOR_ROLE) role only; and the outbox's
    /// counts (rows due, retrying, dead, the queue's age) on `/metrics`.
    /// Without it those routes answer 404.
    pub fn notifications(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.outbox = Some(store);
        self
    }

    /// Builds the server. Without keys or a data directory the signing key
    /// is generated in memory (state it signed will not verify after a
    /// restart; a warning says so).
    pub fn build(self) -> Result<Server, BuildError> {
        let outbox = match &self.outbox {
            Some(store) => Some(
                holdpoint::session::needed_by(
                    store.capabilities().outbox().cloned(),
                    "the server's notification routes",
                )
                .map_err(BuildError::Store)?,
            ),
            None => None,
        };
        let keys = match (self.keys, &self.data_dir) {
            (Some(keys), _) => keys,
            (None, Some(dir)) => KeyRing::load_or_create(dir)?,
            (None, None) => {
                tracing::warn!(
                    "no state-signing key or data directory configured; using a key that lives only in memory"
                );
                KeyRing::ephemeral()?
            }
        };
        let keys = Arc::new(keys);
        let claims = self
            .state_claims
            .or_else(|| self.agents.iter().find_map(|a| a.store().cloned()))
            .unwrap_or_else(|| Arc::new(InMemoryStore::new()) as Arc<dyn SessionStore>);
        let mut agents = BTreeMap::new();
        for agent in self.agents {
            let name = agent.name().to_owned();
            if name.is_empty() || name.contains('/') {
                return Err(BuildError::BadAgentName(name));
            }
            let codec = SigningCodec::scoped(Arc::clone(&keys), name.clone());
            let mut agent = agent.with_state_codec(Arc::new(codec));
            if agent.is_server_managed() {
                // The inbox (`GET /pending`) and the metrics' waiting count list the store.
                let who = format!("the server's inbox of agent \"{name}\"");
                holdpoint::session::needed_by(agent.capabilities().listing().map(|_| ()), who)
                    .map_err(BuildError::Store)?;
            } else {
                agent = agent.with_state_claims(Arc::clone(&claims));
            }
            if agents.insert(name.clone(), agent).is_some() {
                return Err(BuildError::DuplicateAgent(name));
            }
        }
        let metrics = self.metrics.unwrap_or_default();
        for agent in agents.values().filter(|a| a.is_server_managed()) {
            metrics.serve_agent(agent.name());
        }
        let anonymous = self.anonymous.unwrap_or(self.providers.is_empty());
        let hosts = match self.allowed_hosts {
            Some(hosts) => HostPolicy::from_entries(hosts),
            None if anonymous => HostPolicy::Loopback(Vec::new()),
            None => HostPolicy::Any,
        };
        let state = AppState::new(StateInner {
            agents,
            auth: Arc::new(Authenticator::new(self.providers, anonymous).with_sessions(Arc::clone(&keys))),
            limits: self.limits,
            turns: Turns::default(),
            keys,
            metrics,
            metrics_token: self.metrics_token,
            metrics_open: self.metrics_open,
            hosts: Arc::new(hosts),
            request_timeout: self.request_timeout,
            page_login: self.page_login,
            outbox,
            receipt_keys: self.receipt_keys,
        });
        Ok(Server {
            state,
            grace: self.grace,
            connections: self.connections,
        })
    }
}

/// Agents served over HTTP: build one with [`Server::builder`], mount
/// [`router`](Self::router) in an axum app, and [`serve`](crate::serve) it.
#[derive(Clone, Debug)]
pub struct Server {
    state: AppState,
    grace: Duration,
    connections: ConnectionLimits,
}

impl Server {
    /// Starts building a server.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// The routes of docs/reference.md §12, the approval page and `/openapi.json`.
    pub fn router(&self) -> Router {
        crate::routes::router(self.state.clone())
    }

    /// The shared handler state.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The turn tracker used by graceful shutdown.
    pub fn turns(&self) -> &Turns {
        self.state.turns()
    }

    /// How long a shutdown waits for running turns.
    pub fn shutdown_grace(&self) -> Duration {
        self.grace
    }

    pub(crate) fn connection_limits(&self) -> ConnectionLimits {
        self.connections
    }
}
