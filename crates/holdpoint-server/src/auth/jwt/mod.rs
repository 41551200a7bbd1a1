//! [`JwtVerifier`]: signed bearer tokens (RFC 7519), checked by the
//! `jsonwebtoken` crate against a set of keys.
//!
//! The verifier owns the policy (which keys, which algorithms, which claims
//! and how a token names its principal); `jsonwebtoken` does the signature
//! arithmetic and the registered-claim checks (`exp`, `nbf`, `iss`, `aud`).

use std::sync::Arc;

use async_trait::async_trait;
use axum::http::request::Parts;
use jsonwebtoken::{Algorithm, Header};
use serde_json::{Map, Value, json};

mod check;
mod jwks;
mod key;
mod names;
mod roles;

use check::{Refused, Verified};
pub use jwks::{JwksError, JwksSource, MAX_JWKS_BYTES, MAX_JWKS_KEYS};
pub use key::{JwtAlgorithm, JwtKey, JwtKeyError};
pub use roles::{MAX_ROLE_BYTES, MAX_ROLES};

use super::{AuthError, ContextProvider, Identity, bearer};

/// The largest bearer token accepted, in bytes; longer ones are refused
/// before any decoding.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// The longest `sub` accepted, in bytes.
pub const MAX_SUBJECT_BYTES: usize = 256;

/// The longest `iss` accepted, in bytes.
pub const MAX_ISSUER_BYTES: usize = 512;

/// The prefix of every principal a [`JwtVerifier`] names by issuer and
/// subject (the default): `jwt:<iss>#<sub>`. API-key principals may not
/// start with it, so the two namespaces never meet.
pub const JWT_PRINCIPAL_PREFIX: &str = "jwt:";

/// The latest instant `exp` and `nbf` may name: 9999-12-31T23:59:59Z, in
/// seconds since the epoch. Later values (up to `i64::MAX`, `1e300`) are
/// refused rather than carried into time arithmetic.
pub const MAX_TIME_SECS: u64 = 253_402_300_799;

/// Seconds of clock skew allowed on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 30;

/// How a [`JwtVerifier`] names the principal of a token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrincipalNaming {
    /// `jwt:<iss>#<sub>` (`<iss>` empty when the token has none): never
    /// equal to an API-key principal, and two issuers' subjects never meet.
    #[default]
    IssuerAndSubject,
    /// The raw `sub`, shared with API-key principals (a token with
    /// `sub: "alice"` is the API-key principal `alice`).
    Subject,
}

/// Verifies signed bearer tokens (RFC 7519) against a set of keys.
///
/// A token is refused (401) unless all of these hold:
///
/// - it is at most [`MAX_TOKEN_BYTES`] long;
/// - its header has an `alg` of a configured key (HS256, RS256 or ES256;
///   never `none`), no `crit` (no extension is understood), and its
///   signature verifies with a key of exactly that algorithm (and the
///   `kid` it names, if any; keys without an id are tried for every token);
/// - it carries `exp` (not past) and `sub`; `nbf` is checked when present;
///   `iss` must equal [`issuer`](Self::issuer) when one is set; `aud` must
///   be (or contain) [`audience`](Self::audience), and a token with `aud`
///   is refused when no audience is set (RFC 7519 §4.1.3). `exp` and `nbf`
///   are allowed 30 s of clock skew and must be numbers from 0 to
///   [`MAX_TIME_SECS`] (the end of the year 9999);
/// - `sub` is 1 to [`MAX_SUBJECT_BYTES`] bytes with no control, bidi or
///   other invisible formatting characters; `iss`, when present, is a
///   string of the same kind up to [`MAX_ISSUER_BYTES`], and without `#`
///   under the default naming (so a configured issuer must not hold one);
/// - `agents`, when present, is an array of agent names (strings): it
///   limits the agents the token may use. Any other shape is refused.
///
/// The principal is `jwt:<iss>#<sub>` by default
/// ([`PrincipalNaming::IssuerAndSubject`]; `<iss>` is empty for a token
/// without one, giving `jwt:#<sub>`): the first `#` ends the issuer, so no
/// two (issuer, subject) pairs share a principal, and API-key principals
/// may not start with `jwt:`. See
/// [`principal_as_subject`](Self::principal_as_subject) for raw subjects.
/// The claims reach tools and middleware as `context.auth.claims`.
/// `Debug` output never shows key material.
///
/// Keys may also come from a JWKS URL or an OIDC issuer's discovery
/// document ([`jwks`](Self::jwks), [`JwksSource`]): they are cached for the
/// refresh interval and refetched when a token names a key id the cache
/// does not hold (at most once per minimum refetch interval), so the
/// provider rotates keys without a restart. With
/// [`roles_claim`](Self::roles_claim) the token's roles (an array of
/// strings under that claim, or a dotted path to one) become the
/// identity's roles; a claim of any other shape refuses the token.
///
/// ```
/// use holdpoint_server::auth::{JwtKey, JwtVerifier};
/// use serde_json::json;
/// let jwt = JwtVerifier::hs256(b"a-shared-secret-of-32-bytes-or-more!")?
///     .key(JwtKey::hs256(b"the-next-secret-of-32-bytes-or-more!")?.with_kid("2"))
///     .issuer("https://login.example");
/// let token = jwt.issue(&json!({"sub": "alice", "exp": 4_102_444_800u64, "iss": "https://login.example"}))?;
/// assert_eq!(token.split('.').count(), 3);
/// assert_eq!(jwt.principal_of(&jwt.verify(&token)?)?, "jwt:https://login.example#alice");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct JwtVerifier {
    keys: Vec<JwtKey>,
    remote: Option<Arc<jwks::RemoteKeys>>,
    issuer: Option<String>,
    audience: Option<String>,
    naming: PrincipalNaming,
    roles_claim: Option<String>,
}

/// Another name for [`JwtVerifier`] (the same type).
pub type JwtHs256 = JwtVerifier;

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("keys", &self.keys)
            .field("remote", &self.remote.as_ref().map(|r| r.source()))
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("naming", &self.naming)
            .field("roles_claim", &self.roles_claim)
            .finish()
    }
}

fn unauthenticated(message: impl Into<String>) -> AuthError {
    AuthError::Unauthenticated(message.into())
}

impl JwtVerifier {
    /// Verifies tokens with any of `keys` (none: every token is refused).
    pub fn with_keys(keys: impl IntoIterator<Item = JwtKey>) -> Self {
        JwtVerifier {
            keys: keys.into_iter().collect(),
            remote: None,
            issuer: None,
            audience: None,
            naming: PrincipalNaming::default(),
            roles_claim: None,
        }
    }

    /// Verifies tokens with the keys of a remote key set (a JWKS URL, or an
    /// OIDC issuer's discovery document), fetched on first use and then as
    /// [`JwksSource`] says. Keys added with [`key`](Self::key) are tried as
    /// well.
    pub fn jwks(source: JwksSource) -> Result<Self, JwksError> {
        let mut verifier = Self::with_keys([]);
        verifier.remote = Some(Arc::new(jwks::RemoteKeys::new(source)?));
        Ok(verifier)
    }

    /// Fetches the remote key set now (unless a fetch started within the
    /// minimum refetch interval) and returns how many keys it holds; a
    /// verifier without one returns its static key count. For a start-up
    /// check: tokens work without it.
    pub async fn refresh_keys(&self) -> usize {
        match &self.remote {
            Some(remote) => {
                remote.refetch().await;
                remote.keys().await.len()
            }
            None => self.keys.len(),
        }
    }

    /// Takes the identity's roles from `claim`: an array of strings under
    /// that name, or, when no claim has that exact name, under the dotted
    /// path (`realm_access.roles`). An absent claim gives no roles; any
    /// other shape refuses the token.
    pub fn roles_claim(mut self, claim: impl Into<String>) -> Self {
        self.roles_claim = Some(claim.into());
        self
    }

    /// Verifies HS256 tokens signed with `secret` (at least 32 random
    /// bytes), under no key id.
    pub fn hs256(secret: impl AsRef<[u8]>) -> Result<Self, JwtKeyError> {
        Ok(Self::with_keys([JwtKey::hs256(secret)?]))
    }

    /// Also verifies tokens with `key` (rotation: add the next key before
    /// tokens signed with it appear, drop the old one after the last
    /// expires).
    pub fn key(mut self, key: JwtKey) -> Self {
        self.keys.push(key);
        self
    }

    /// Requires `iss` to be `issuer`.
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// Requires `aud` to be (or contain) `audience`.
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into());
        self
    }

    /// Names a token's principal by its bare `sub`, in the namespace of
    /// API-key principals (and of every other issuer this verifier trusts).
    /// Only for deployments where the token issuer and the API-key
    /// configuration agree on who is who.
    pub fn principal_as_subject(mut self) -> Self {
        self.naming = PrincipalNaming::Subject;
        self
    }

    /// How this verifier names principals.
    pub fn naming(&self) -> PrincipalNaming {
        self.naming
    }

    /// Signs `claims` (a JSON object) with the first HS256 secret, under its
    /// key id if it has one: for tests, tools and demos.
    pub fn issue(&self, claims: &Value) -> Result<String, JwtKeyError> {
        let (key, signing) = self
            .keys
            .iter()
            .find_map(|k| k.encoding.as_ref().map(|e| (k, e)))
            .ok_or(JwtKeyError::NoSigningSecret)?;
        if !claims.is_object() {
            return Err(JwtKeyError::Sign("the claims are not a JSON object".into()));
        }
        let mut header = Header::new(Algorithm::HS256);
        header.kid = key.kid.clone();
        jsonwebtoken::encode(&header, claims, signing).map_err(|e| JwtKeyError::Sign(e.to_string()))
    }

    /// Checks a compact token and returns its claims (see the type docs
    /// for every check).
    /// Only the static keys are used here; [`identify`](Self::identify)
    /// also uses (and refreshes) a remote key set.
    pub fn verify(&self, token: &str) -> Result<Map<String, Value>, AuthError> {
        let keys: Vec<&JwtKey> = self.keys.iter().collect();
        self.check(token, &keys).map(|v| v.claims).map_err(Refused::into_error)
    }

    /// Checks a compact token with every key (static and remote; a token
    /// naming an unknown key id triggers a rate-limited refetch of the
    /// remote set) and returns the identity it stands for.
    pub async fn identify(&self, token: &str) -> Result<Identity, AuthError> {
        let verified = match &self.remote {
            None => self.verify_with(token, &[]),
            Some(remote) => {
                let fetched = remote.keys().await;
                match self.verify_with(token, &fetched) {
                    Err(Refused::NoKey(_)) => {
                        // Rate-limited: a fetch may be refused here, yet a
                        // concurrent one may just have brought the key.
                        remote.refetch().await;
                        self.verify_with(token, &remote.current().await)
                    }
                    other => other,
                }
            }
        };
        let Verified {
            claims,
            principal,
            scope,
            roles,
        } = verified.map_err(Refused::into_error)?;
        Ok(Identity::new(principal)
            .with_scope(scope)
            .with_roles(roles)
            .with_context("auth", json!({"method": "jwt", "claims": Value::Object(claims)})))
    }
}

#[async_trait]
impl ContextProvider for JwtVerifier {
    async fn authenticate(&self, request: &Parts) -> Result<Option<Identity>, AuthError> {
        let Some(token) = bearer(request) else {
            return Ok(None);
        };
        // Only compact JWS (three parts) is ours; anything else may be
        // another provider's bearer credential.
        if token.bytes().filter(|&b| b == b'.').count() != 2 {
            return Ok(None);
        }
        self.identify(token).await.map(Some)
    }
}

#[cfg(test)]
mod tests;
