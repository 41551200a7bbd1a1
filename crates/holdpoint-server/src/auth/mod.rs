//! Authentication: context providers that turn a request's credentials into
//! an [`Identity`] (docs/reference.md §12).
//!
//! Providers run per request, in the order they were added. Each looks at
//! the request head and answers one of three ways:
//!
//! - `Ok(None)`: no credentials it understands; the next provider tries;
//! - `Ok(Some(identity))`: authenticated;
//! - `Err(AuthError)`: credentials it understands but refuses (401), or a
//!   caller it knows but will not let in (403).
//!
//! When no provider authenticates the request it is answered 401, unless
//! anonymous access is on (the default only when no provider is
//! configured). Two providers are built in: [`ApiKeys`] (keys from
//! configuration, `X-API-Key` or `Authorization: Bearer`) and [`JwtVerifier`]
//! (signed bearer tokens: HS256 secrets, RS256 and ES256 public keys).
//! Implement [`ContextProvider`] for anything else.
//!
//! Principals of the two never meet: an API key's principal is the name it
//! was configured with, and may not start with `jwt:`; a token's principal
//! is `jwt:<iss>#<sub>` (`<iss>` empty when the token has none), unless the
//! verifier is told to use the bare subject
//! ([`JwtVerifier::principal_as_subject`]).
//!
//! The identity's principal goes into the request context under
//! [`holdpoint::agent::PRINCIPAL`]: tools and middleware see it, the sessions
//! it starts belong to it (another principal gets 404 for them), and it is
//! written into the audit trail.
//!
//! An [`Identity`] is the core's [`holdpoint::agent::Caller`] (principal,
//! roles, actor, context) plus the agents it may use:
//! [`Identity::caller`] gives the caller the agent sees, and
//! `Identity::from(caller)` makes one allowed every agent. The
//! request context is the caller's ([`holdpoint::agent::Caller::context`]).

mod api_key;
mod jwt;
mod page_login;
mod session;

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use axum::extract::{FromRef, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;
use holdpoint::agent::{AsCaller, PRINCIPAL};
use holdpoint::approval::ROLES;
use serde_json::{Map, Value};

pub use api_key::ApiKeys;
pub use jwt::{
    JWT_PRINCIPAL_PREFIX, JwksError, JwksSource, JwtAlgorithm, JwtHs256, JwtKey, JwtKeyError, JwtVerifier,
    MAX_ISSUER_BYTES, MAX_JWKS_BYTES, MAX_JWKS_KEYS, MAX_ROLE_BYTES, MAX_ROLES, MAX_SUBJECT_BYTES, MAX_TIME_SECS,
    MAX_TOKEN_BYTES, PrincipalNaming,
};
pub use page_login::{LoginError, PageLogin};
pub use session::{MAX_SESSION_COOKIE_BYTES, SESSION_COOKIE, SESSION_MAX_AGE, SessionCookies, SessionCredential};
pub(crate) use session::{check_same_origin, now_secs as session_now, set_cookie};

use crate::error::ApiError;

/// Why a provider refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The credentials are missing, malformed, expired or wrong (401).
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller is known but not allowed in (403).
    #[error("{0}")]
    PermissionDenied(String),
}

impl From<AuthError> for ApiError {
    fn from(err: AuthError) -> Self {
        match err {
            AuthError::Unauthenticated(m) => ApiError::unauthenticated(m),
            AuthError::PermissionDenied(m) => ApiError::permission_denied(m),
        }
    }
}

/// Which agents an identity may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AgentScope {
    /// Every agent.
    #[default]
    All,
    /// Only these (by name).
    Only(BTreeSet<String>),
}

impl AgentScope {
    /// Only the named agents.
    pub fn only<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        AgentScope::Only(names.into_iter().map(Into::into).collect())
    }

    /// Whether `agent` is in scope.
    pub fn allows(&self, agent: &str) -> bool {
        match self {
            AgentScope::All => true,
            AgentScope::Only(names) => names.contains(agent),
        }
    }
}

/// An authenticated (or anonymous) caller: a core
/// [`Caller`](holdpoint::agent::Caller) ([`Identity::caller`]) and the
/// agents it may use. Agent methods that act for someone take `&identity`
/// directly (it is [`AsCaller`]).
///
/// ```
/// use holdpoint::agent::Caller;
/// use holdpoint_server::auth::{AgentScope, Identity};
///
/// let olga = Identity::new("olga").with_roles(["finance"]).with_scope(AgentScope::only(["bank"]));
/// assert_eq!(olga.caller(), Caller::new("olga").with_roles(["finance"]));
/// assert_eq!(olga.request_context(), olga.caller().context());
/// // And back: a core caller as an identity allowed every agent.
/// assert_eq!(Identity::from(Caller::new("olga").with_roles(["finance"])), Identity::new("olga").with_roles(["finance"]));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Identity {
    /// Who it is; `None` only for anonymous access.
    pub principal: Option<String>,
    /// Extra request context for tools and middleware (for example JWT
    /// claims). The principal is added under [`PRINCIPAL`].
    pub context: Map<String, Value>,
    /// The agents it may use.
    pub scope: AgentScope,
    /// Its roles (for approval rules); added to the request context under
    /// [`ROLES`].
    pub roles: BTreeSet<String>,
}

impl Identity {
    /// An identity for `principal`, allowed every agent.
    pub fn new(principal: impl Into<String>) -> Self {
        Identity {
            principal: Some(principal.into()),
            ..Self::default()
        }
    }

    /// The anonymous caller (no principal; sees only sessions nobody owns).
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// The same identity limited to `scope`.
    pub fn with_scope(mut self, scope: AgentScope) -> Self {
        self.scope = scope;
        self
    }

    /// The same identity with these roles (replacing them), as
    /// [`Caller::with_roles`](holdpoint::agent::Caller::with_roles).
    pub fn with_roles<I, S>(mut self, roles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.roles = roles.into_iter().map(Into::into).collect();
        self
    }

    /// The same identity with an extra context entry.
    pub fn with_context(mut self, key: impl Into<String>, value: Value) -> Self {
        self.context.insert(key.into(), value);
        self
    }

    /// The principal, for ownership checks.
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// The caller the agent sees: the principal, the roles (only from
    /// [`roles`](Self::roles), never from claims copied into the context),
    /// a string [`ACTOR`](holdpoint::agent::ACTOR) of the context as the
    /// actor, and the rest of the context.
    pub fn caller(&self) -> holdpoint::agent::Caller {
        let base = match &self.principal {
            Some(p) => holdpoint::agent::Caller::new(p.clone()),
            None => holdpoint::agent::Caller::anonymous(),
        };
        // `with_context` ignores a principal or roles smuggled into the
        // context, and reads a string actor as the actor.
        self.context
            .iter()
            .fold(base, |caller, (k, v)| caller.with_context(k.clone(), v.clone()))
            .with_roles(self.roles.iter().cloned())
    }

    /// The request context handed to the agent: [`caller`](Self::caller)'s
    /// ([`holdpoint::agent::Caller::context`]).
    pub fn request_context(&self) -> Map<String, Value> {
        self.caller().context()
    }

    /// `Ok` when this identity may use `agent`, else 403.
    pub fn check_agent(&self, agent: &str) -> Result<(), ApiError> {
        if self.scope.allows(agent) {
            return Ok(());
        }
        Err(ApiError::permission_denied(format!(
            "principal \"{}\" may not use agent \"{agent}\"",
            self.principal.as_deref().unwrap_or("anonymous")
        )))
    }
}

impl From<&Identity> for holdpoint::agent::Caller {
    fn from(identity: &Identity) -> Self {
        identity.caller()
    }
}

impl From<Identity> for holdpoint::agent::Caller {
    fn from(identity: Identity) -> Self {
        identity.caller()
    }
}

impl From<holdpoint::agent::Caller> for Identity {
    /// The identity of `caller`, allowed every agent.
    fn from(caller: holdpoint::agent::Caller) -> Self {
        // The extra context and the actor (when one is named) stay in the
        // context; the principal and roles have fields of their own.
        let mut context = caller.context();
        context.remove(PRINCIPAL);
        context.remove(ROLES);
        Identity {
            principal: caller.principal().map(str::to_owned),
            context,
            scope: AgentScope::All,
            roles: caller.roles().iter().cloned().collect(),
        }
    }
}

impl AsCaller for &Identity {
    fn into_context(self) -> Map<String, Value> {
        self.request_context()
    }
}

impl AsCaller for Identity {
    fn into_context(self) -> Map<String, Value> {
        self.request_context()
    }
}

/// Turns a request's credentials into an [`Identity`]. See the module docs
/// for what each answer means.
///
/// ```
/// use async_trait::async_trait;
/// use axum::http::request::Parts;
/// use holdpoint_server::auth::{AuthError, ContextProvider, Identity};
///
/// /// Trusts a header set by an authenticating proxy in front of the server.
/// struct ProxyUser;
///
/// #[async_trait]
/// impl ContextProvider for ProxyUser {
///     async fn authenticate(&self, request: &Parts) -> Result<Option<Identity>, AuthError> {
///         Ok(request
///             .headers
///             .get("x-forwarded-user")
///             .and_then(|v| v.to_str().ok())
///             .map(Identity::new))
///     }
/// }
/// let server = holdpoint_server::Server::builder().provider(std::sync::Arc::new(ProxyUser)).build();
/// # let _ = server;
/// ```
#[async_trait]
pub trait ContextProvider: Send + Sync {
    /// Looks at the request head (method, URI, headers).
    async fn authenticate(&self, request: &Parts) -> Result<Option<Identity>, AuthError>;

    /// Whether this provider still accepts `credential`, the one a session
    /// cookie was signed in with (docs/reference.md §12.10), as `identity`
    /// (the principal, roles and scope the cookie carries). Asked when the
    /// cookie is issued and on every request it authenticates:
    ///
    /// - `Some(true)`: it is still accepted, as that identity;
    /// - `Some(false)`: this provider knows the credential but no longer
    ///   gives it that identity;
    /// - `None` (the default): this provider cannot tell (not one of its
    ///   credentials, or it keeps no record of them).
    ///
    /// A cookie whose credential some provider could tell about at sign-in
    /// needs a `Some(true)` on every request; otherwise it is refused (401)
    /// at once. A cookie no provider could tell about lasts until its own
    /// expiry ([`SESSION_MAX_AGE`], never past a token's `exp`).
    async fn still_accepts(&self, identity: &Identity, credential: &SessionCredential) -> Option<bool> {
        let _ = (identity, credential);
        None
    }
}

/// The providers of a server, run in order.
#[derive(Clone, Default)]
pub(crate) struct Authenticator {
    providers: Vec<Arc<dyn ContextProvider>>,
    anonymous: bool,
    sessions: Option<SessionCookies>,
}

impl Authenticator {
    pub(crate) fn new(providers: Vec<Arc<dyn ContextProvider>>, anonymous: bool) -> Self {
        Authenticator {
            providers,
            anonymous,
            sessions: None,
        }
    }

    /// The same authenticator accepting session cookies signed with `keys`
    /// (a request without other credentials may carry one).
    pub(crate) fn with_sessions(mut self, keys: Arc<crate::signing::KeyRing>) -> Self {
        self.sessions = Some(SessionCookies::new(keys));
        self
    }

    /// The session cookies this authenticator accepts, if any.
    pub(crate) fn sessions(&self) -> Option<&SessionCookies> {
        self.sessions.as_ref()
    }

    /// The identity the providers give the request's own credentials (its
    /// headers, never a session cookie); `None` when none is presented.
    pub(crate) async fn authenticate_credentials(&self, request: &Parts) -> Result<Option<Identity>, ApiError> {
        for provider in &self.providers {
            if let Some(identity) = provider.authenticate(request).await? {
                return Ok(Some(identity));
            }
        }
        let presented =
            request.headers.contains_key(header::AUTHORIZATION) || request.headers.contains_key("x-api-key");
        if presented {
            return Err(ApiError::unauthenticated("the credentials were not recognised"));
        }
        Ok(None)
    }

    /// What the providers say of `credential` for `identity`: `Some(true)`
    /// when one still accepts it, `Some(false)` when one knows it but none
    /// accepts it, `None` when none can tell.
    async fn vouch(&self, identity: &Identity, credential: &SessionCredential) -> Option<bool> {
        let mut known = None;
        for provider in &self.providers {
            match provider.still_accepts(identity, credential).await {
                Some(true) => return Some(true),
                Some(false) => known = Some(false),
                None => {}
            }
        }
        known
    }

    /// The session cookie value for `identity`, which the request's own
    /// credential authenticated just now, valid until `expires_at`. When a
    /// provider can vouch for that credential the cookie is bound to it
    /// (its MAC, never the credential) and works only as long as a provider
    /// still accepts it.
    pub(crate) async fn seal_session(
        &self,
        request: &Parts,
        identity: &Identity,
        expires_at: i64,
    ) -> Result<String, ApiError> {
        let Some(sessions) = &self.sessions else {
            return Err(ApiError::not_found("this server does not issue session cookies"));
        };
        let presented = request
            .headers
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .or_else(|| bearer(request));
        let mut bound = None;
        if let Some(presented) = presented {
            let credential = sessions.credential(presented)?;
            if self.vouch(identity, &credential).await.is_some() {
                bound = Some(credential);
            }
        }
        Ok(sessions.seal_bound(identity, expires_at, bound.as_ref())?)
    }

    pub(crate) async fn authenticate(&self, request: &Parts) -> Result<Identity, ApiError> {
        if let Some(identity) = self.authenticate_credentials(request).await? {
            return Ok(identity);
        }
        if let (Some(sessions), Some(value)) = (&self.sessions, session::cookie_value(&request.headers)) {
            let (identity, credential) = sessions.open_bound(value)?;
            if let Some(credential) = credential
                && self.vouch(&identity, &credential).await != Some(true)
            {
                return Err(ApiError::unauthenticated(
                    "the credential this session was signed in with is no longer accepted \
                     (the API key was removed or changed); sign in again",
                ));
            }
            check_same_origin(request)?;
            return Ok(identity);
        }
        if self.anonymous {
            return Ok(Identity::anonymous());
        }
        Err(ApiError::unauthenticated(
            "authentication required: send an API key (X-API-Key) or a bearer token (Authorization: Bearer …)",
        ))
    }
}

/// The caller of a request, as the server's providers established it
/// (from any handler state that holds the server's authenticator): an
/// axum extractor of the [`Identity`]. The core's typed caller is
/// [`holdpoint::agent::Caller`] ([`Identity::caller`]).
#[derive(Debug, Clone)]
pub struct Caller(pub Identity);

impl<S> FromRequestParts<S> for Caller
where
    Arc<Authenticator>: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Arc::<Authenticator>::from_ref(state)
            .authenticate(parts)
            .await
            .map(Caller)
    }
}

/// The bearer token of a request, if any.
pub(crate) fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdpoint::agent::ACTOR;
    use serde_json::json;

    #[test]
    fn request_context_carries_the_principal() {
        let id = Identity::new("alice").with_context("tenant", json!("t1"));
        let ctx = id.request_context();
        assert_eq!(ctx[PRINCIPAL], json!("alice"));
        assert_eq!(ctx["tenant"], json!("t1"));
        // A provider cannot smuggle a principal in through the context.
        let anon = Identity::anonymous().with_context(PRINCIPAL, json!("mallory"));
        assert!(!anon.request_context().contains_key(PRINCIPAL));
        let smuggled = Identity::new("eve").with_context(ROLES, json!(["finance"]));
        assert!(!smuggled.request_context().contains_key(ROLES));
        let olga = Identity::new("olga").with_roles(["finance"]);
        assert_eq!(olga.request_context()[ROLES], json!(["finance"]));
    }

    /// The request context as it was built before `Identity` was made of
    /// a core `Caller`.
    fn context_before(id: &Identity) -> Map<String, Value> {
        let mut context = id.context.clone();
        match &id.principal {
            Some(p) => context.insert(PRINCIPAL.to_owned(), Value::String(p.clone())),
            None => context.remove(PRINCIPAL),
        };
        if id.roles.is_empty() {
            context.remove(ROLES);
        } else {
            context.insert(
                ROLES.to_owned(),
                Value::Array(id.roles.iter().cloned().map(Value::String).collect()),
            );
        }
        context
    }

    #[test]
    fn an_identity_is_a_core_caller_with_the_same_context_as_before() {
        let identities = [
            Identity::anonymous(),
            Identity::new("alice"),
            Identity::new("olga").with_roles(["support", "finance"]),
            Identity::new("jwt:iss#sub")
                .with_roles(["finance"])
                .with_context("auth", json!({"method": "jwt", "claims": {"sub": "sub"}}))
                .with_context(ACTOR, json!("Olga P.")),
            Identity::anonymous()
                .with_context(PRINCIPAL, json!("mallory"))
                .with_context(ROLES, json!(["operator"])),
            Identity::new("svc").with_scope(AgentScope::only(["bank"])),
        ];
        for id in &identities {
            assert_eq!(id.request_context(), context_before(id), "{id:?}");
            assert_eq!(id.caller().context(), context_before(id), "{id:?}");
            assert_eq!(id.into_context(), context_before(id), "{id:?}");
            assert_eq!(
                holdpoint::agent::Caller::from_context(&context_before(id)),
                id.caller(),
                "{id:?}"
            );
        }
        let olga = identities[3].caller();
        assert_eq!(olga.principal(), Some("jwt:iss#sub"));
        assert_eq!(olga.roles(), ["finance"]);
        assert_eq!(olga.actor(), Some("Olga P."));
        let roles = ["finance".to_owned()];
        assert_eq!(
            olga.access(),
            holdpoint::agent::Access::Caller {
                principal: Some("jwt:iss#sub"),
                roles: &roles,
            }
        );
        // Back from a core caller: the same identity, allowed every agent.
        let again = Identity::from(olga.clone());
        assert_eq!(again.scope, AgentScope::All);
        assert_eq!(again.caller(), olga);
        assert_eq!(again.request_context(), identities[3].request_context());
        assert_eq!(
            Identity::from(holdpoint::agent::Caller::anonymous()),
            Identity::anonymous()
        );
    }

    #[test]
    fn scopes() {
        let id = Identity::new("bob").with_scope(AgentScope::only(["a"]));
        assert!(id.check_agent("a").is_ok());
        assert_eq!(
            id.check_agent("b").unwrap_err().status(),
            holdpoint::Status::PermissionDenied
        );
    }
}
