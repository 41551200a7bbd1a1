//! [`ApiKeys`]: static API keys from configuration, each naming a principal.

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;
use axum::http::request::Parts;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::jwt::JWT_PRINCIPAL_PREFIX;
use super::{AgentScope, AuthError, ContextProvider, Identity, SessionCredential, bearer};

#[derive(Clone)]
struct Entry {
    principal: String,
    scope: AgentScope,
    roles: BTreeSet<String>,
}

/// API keys from configuration. A request presents one in `X-API-Key`, or
/// as `Authorization: Bearer KEY`. Several keys may name one principal (a
/// program's key and its approvers' keys, say).
///
/// A key's principal is the name it was configured with. Names starting
/// with `jwt:` belong to [`JwtVerifier`](super::JwtVerifier) principals: a
/// key configured with one is refused (401) when presented, so an API key
/// can never act as a token's principal.
///
/// A key may carry roles ([`key_with_roles`](Self::key_with_roles)): the
/// identity it authenticates has them (for approval rules).
///
/// Keys are held only as SHA-256 digests, so the map lookup reveals nothing
/// about a key's bytes through timing.
///
/// ```
/// use holdpoint_server::auth::{AgentScope, ApiKeys};
/// let keys = ApiKeys::new()
///     .key("k-alice-1234567890", "alice")
///     .scoped_key("k-ops-1234567890", "ops", AgentScope::only(["bankingAgent"]));
/// assert_eq!(keys.len(), 2);
/// ```
#[derive(Clone, Default)]
pub struct ApiKeys {
    keys: HashMap<[u8; 32], Entry>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeys").field("keys", &self.keys.len()).finish()
    }
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl ApiKeys {
    /// No keys.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a key for `principal`, allowed every agent.
    pub fn key(self, key: impl AsRef<str>, principal: impl Into<String>) -> Self {
        self.scoped_key(key, principal, AgentScope::All)
    }

    /// Adds a key for `principal`, allowed the agents in `scope`.
    pub fn scoped_key(self, key: impl AsRef<str>, principal: impl Into<String>, scope: AgentScope) -> Self {
        self.entry(key, principal, scope, BTreeSet::new())
    }

    /// Adds a key for `principal` with `roles`, allowed every agent.
    pub fn key_with_roles<I, S>(self, key: impl AsRef<str>, principal: impl Into<String>, roles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.entry(
            key,
            principal,
            AgentScope::All,
            roles.into_iter().map(Into::into).collect(),
        )
    }

    /// Adds a key for `principal`, allowed the agents in `scope`, with
    /// `roles`. A key added twice keeps the last entry.
    pub fn entry(
        mut self,
        key: impl AsRef<str>,
        principal: impl Into<String>,
        scope: AgentScope,
        roles: BTreeSet<String>,
    ) -> Self {
        self.keys.insert(
            digest(key.as_ref()),
            Entry {
                principal: principal.into(),
                scope,
                roles,
            },
        );
        self
    }

    /// Whether `key` is one of these keys.
    pub fn contains(&self, key: &str) -> bool {
        self.keys.contains_key(&digest(key))
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// `None` for a key that is not ours.
    fn identity(&self, key: &str) -> Option<Result<Identity, AuthError>> {
        let entry = self.keys.get(&digest(key))?;
        if entry.principal.starts_with(JWT_PRINCIPAL_PREFIX) {
            return Some(Err(AuthError::Unauthenticated(format!(
                "this API key is misconfigured: its principal may not start with `{JWT_PRINCIPAL_PREFIX}` \
                 (reserved for bearer-token principals)"
            ))));
        }
        Some(Ok(Identity::new(entry.principal.clone())
            .with_scope(entry.scope.clone())
            .with_roles(entry.roles.iter().cloned())
            .with_context("auth", json!({"method": "apiKey"}))))
    }
}

#[async_trait]
impl ContextProvider for ApiKeys {
    async fn authenticate(&self, request: &Parts) -> Result<Option<Identity>, AuthError> {
        if let Some(value) = request.headers.get("x-api-key") {
            let key = value.to_str().unwrap_or("").trim();
            return match self.identity(key) {
                Some(identity) => identity.map(Some),
                None => Err(AuthError::Unauthenticated("unknown API key".into())),
            };
        }
        // A bearer token may be an API key or something another provider
        // understands (a JWT): only claim it when it is one of ours.
        bearer(request).and_then(|token| self.identity(token)).transpose()
    }

    /// A session cookie signed in with one of these keys works while the
    /// key is configured with the same principal, roles and agents.
    async fn still_accepts(&self, identity: &Identity, credential: &SessionCredential) -> Option<bool> {
        let (_, entry) = self.keys.iter().find(|(digest, _)| credential.is_digest(digest))?;
        Some(
            identity.principal() == Some(entry.principal.as_str())
                && !entry.principal.starts_with(JWT_PRINCIPAL_PREFIX)
                && identity.roles == entry.roles
                && identity.scope == entry.scope,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn parts(header: (&str, &str)) -> Parts {
        Request::builder()
            .header(header.0, header.1)
            .body(())
            .unwrap()
            .into_parts()
            .0
    }

    #[tokio::test]
    async fn keys_in_either_header() {
        let keys = ApiKeys::new().key("secret-1", "alice");
        let id = keys
            .authenticate(&parts(("x-api-key", "secret-1")))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(id.principal(), Some("alice"));
        let id = keys
            .authenticate(&parts(("authorization", "Bearer secret-1")))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(id.principal(), Some("alice"));
        assert!(keys.authenticate(&parts(("x-api-key", "nope"))).await.is_err());
        assert!(
            keys.authenticate(&parts(("authorization", "Bearer a.b.c")))
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn a_key_carries_its_roles_into_the_identity() {
        let keys = ApiKeys::new()
            .key_with_roles("secret-f", "fiona", ["finance", "auditor"])
            .key("secret-a", "alice");
        let id = keys
            .authenticate(&parts(("x-api-key", "secret-f")))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            id.roles.iter().map(String::as_str).collect::<Vec<_>>(),
            ["auditor", "finance"]
        );
        let id = keys
            .authenticate(&parts(("x-api-key", "secret-a")))
            .await
            .unwrap()
            .unwrap();
        assert!(id.roles.is_empty());
        assert!(keys.contains("secret-f") && !keys.contains("secret-x"));
    }

    #[tokio::test]
    async fn principals_in_the_jwt_namespace_are_refused() {
        let keys = ApiKeys::new().key("secret-1", "jwt:#alice").key("secret-2", "jwt-ops");
        for header in [("x-api-key", "secret-1"), ("authorization", "Bearer secret-1")] {
            let e = keys.authenticate(&parts(header)).await.unwrap_err();
            assert!(e.to_string().contains("`jwt:`"), "{e}");
        }
        let id = keys
            .authenticate(&parts(("x-api-key", "secret-2")))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(id.principal(), Some("jwt-ops"));
    }
}
