//! The approval page's sign-in that lasts across tabs: an `HttpOnly`,
//! `SameSite=Strict` cookie set by `POST /auth/session` once the page's API
//! key or OpenID Connect token has been verified by the server's providers
//! (docs/reference.md §12.10).
//!
//! The cookie holds no server-side state (replicas share nothing but their
//! signing keys): its value is the signed-in [`Identity`] and an expiry,
//! signed with the server's [`KeyRing`] (HMAC-SHA256, the same keys as the
//! client-held agent state, under a scope of its own). Every request that
//! carries it is verified again: a changed byte, a key the ring no longer
//! holds or a passed expiry is refused 401. The expiry is at most
//! [`SESSION_MAX_AGE`] after sign-in, and never later than a token's own
//! `exp`.
//!
//! A cookie also lasts no longer than the credential it was signed in with:
//! it keeps a [`SessionCredential`] (an HMAC, under the server's signing
//! key, of the credential's SHA-256 digest; never the credential), and when
//! a provider could vouch for that credential at sign-in (an [`ApiKeys`]
//! key does), one of the server's providers must still vouch for it on
//! every request the cookie makes ([`ContextProvider::still_accepts`]): a
//! key removed from the configuration, or given other roles or agents, ends
//! its sessions at once (401). A credential no provider can vouch for again
//! (a token) is bounded by its own expiry.
//!
//! [`ApiKeys`]: super::ApiKeys
//! [`ContextProvider::still_accepts`]: super::ContextProvider::still_accepts

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{AgentScope, AuthError, Identity};
use crate::signing::{KeyRing, SigningCodec, SigningKey};

/// The cookie's name.
pub const SESSION_COOKIE: &str = "holdpoint_session";

/// The longest a session cookie lasts: 12 hours.
pub const SESSION_MAX_AGE: Duration = Duration::from_secs(12 * 60 * 60);

/// The largest cookie value issued (browsers keep cookies up to 4096 bytes).
pub const MAX_SESSION_COOKIE_BYTES: usize = 3800;

/// The MAC scope: no agent name contains `/`, so no agent state verifies
/// as a session and no session as agent state.
const SCOPE: &str = "/auth/session";

/// Domain separation for the credential's MAC: it proves nothing else.
const CREDENTIAL_CONTEXT: &[u8] = b"holdpoint-session-credential-v1\n";

type HmacSha256 = Hmac<Sha256>;

/// What a session cookie keeps of the credential it was signed in with:
/// an HMAC-SHA256, under one of the server's signing keys, of the
/// credential's SHA-256 digest. The credential cannot be read back from it,
/// nor guessed offline without the server's key; a provider that holds the
/// credential (or its SHA-256 digest) can tell whether it is the one
/// ([`is`](Self::is), [`is_digest`](Self::is_digest)).
///
/// ```
/// use std::sync::Arc;
/// use holdpoint_server::auth::SessionCookies;
/// use holdpoint_server::signing::KeyRing;
///
/// let cookies = SessionCookies::new(Arc::new(KeyRing::ephemeral()?));
/// let signed_in_with = cookies.credential("k-olga-0123456789")?;
/// assert!(signed_in_with.is("k-olga-0123456789"));
/// assert!(!signed_in_with.is("k-olga-rotated-0123"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct SessionCredential {
    kid: String,
    keyed: HmacSha256,
    mac: Vec<u8>,
}

impl std::fmt::Debug for SessionCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCredential")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl SessionCredential {
    /// The MAC machine of `key`, ready for a digest.
    fn keyed(key: &SigningKey) -> Option<HmacSha256> {
        let mut mac = HmacSha256::new_from_slice(key.secret()).ok()?;
        mac.update(CREDENTIAL_CONTEXT);
        Some(mac)
    }

    /// Whether this is the credential whose SHA-256 digest is `sha256`
    /// (compared in constant time).
    pub fn is_digest(&self, sha256: &[u8; 32]) -> bool {
        let mut mac = self.keyed.clone();
        mac.update(sha256);
        mac.verify_slice(&self.mac).is_ok()
    }

    /// Whether this is `credential` (as presented: the API key or token).
    pub fn is(&self, credential: &str) -> bool {
        self.is_digest(&Sha256::digest(credential.as_bytes()).into())
    }

    /// The cookie's record of it.
    fn to_json(&self) -> Value {
        json!({"kid": self.kid, "mac": URL_SAFE_NO_PAD.encode(&self.mac)})
    }
}

/// Issues and verifies session cookie values with a server's signing keys.
///
/// ```
/// use std::sync::Arc;
/// use holdpoint_server::auth::{Identity, SessionCookies};
/// use holdpoint_server::signing::KeyRing;
///
/// let cookies = SessionCookies::new(Arc::new(KeyRing::ephemeral()?));
/// let olga = Identity::new("olga").with_roles(["finance"]);
/// let value = cookies.seal(&olga, 4_102_444_800)?;
/// assert_eq!(cookies.open(&value)?, olga);
/// assert!(cookies.open(&value.replace('e', "f")).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct SessionCookies {
    codec: SigningCodec,
    keys: Arc<KeyRing>,
}

impl std::fmt::Debug for SessionCookies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCookies").finish_non_exhaustive()
    }
}

/// Seconds since the Unix epoch, now.
pub(crate) fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl SessionCookies {
    /// Cookies signed with `keys` (the current key signs; any key of the
    /// ring verifies).
    pub fn new(keys: Arc<KeyRing>) -> Self {
        SessionCookies {
            codec: SigningCodec::scoped(Arc::clone(&keys), SCOPE),
            keys,
        }
    }

    /// The record a cookie keeps of `credential` (the API key or token as
    /// presented), made with the ring's current key.
    pub fn credential(&self, credential: &str) -> Result<SessionCredential, AuthError> {
        let key = self.keys.current();
        // HMAC takes keys of any length: this does not fail.
        let keyed = SessionCredential::keyed(key)
            .ok_or_else(|| AuthError::Unauthenticated("the session could not be signed".into()))?;
        let mut mac = keyed.clone();
        mac.update(&Sha256::digest(credential.as_bytes()));
        Ok(SessionCredential {
            kid: key.kid().to_owned(),
            keyed,
            mac: mac.finalize().into_bytes().to_vec(),
        })
    }

    /// The cookie value for `identity`, valid until `expires_at` (Unix
    /// seconds), bound to no credential: it lasts until it expires.
    /// Refused when the identity is anonymous or its value would exceed
    /// [`MAX_SESSION_COOKIE_BYTES`].
    pub fn seal(&self, identity: &Identity, expires_at: i64) -> Result<String, AuthError> {
        self.seal_bound(identity, expires_at, None)
    }

    /// [`seal`](Self::seal), bound to the credential it was signed in with
    /// when `credential` is given: [`open_bound`](Self::open_bound) hands
    /// it back, for the server to ask its providers whether they still
    /// accept it.
    pub fn seal_bound(
        &self,
        identity: &Identity,
        expires_at: i64,
        credential: Option<&SessionCredential>,
    ) -> Result<String, AuthError> {
        let Some(principal) = identity.principal() else {
            return Err(AuthError::Unauthenticated(
                "an anonymous caller has nothing to sign in as".into(),
            ));
        };
        let scope = match &identity.scope {
            AgentScope::All => Value::Null,
            AgentScope::Only(names) => json!(names),
        };
        let mut payload = json!({
            "v": 1,
            "principal": principal,
            "roles": identity.roles,
            "scope": scope,
            "context": identity.context,
            "exp": expires_at,
        });
        if let (Some(credential), Value::Object(map)) = (credential, &mut payload) {
            map.insert("cred".to_owned(), credential.to_json());
        }
        let signed = self
            .codec
            .sign(payload)
            .map_err(|e| AuthError::Unauthenticated(format!("the session could not be signed: {e}")))?;
        let value = URL_SAFE_NO_PAD.encode(signed.to_string());
        if value.len() > MAX_SESSION_COOKIE_BYTES {
            return Err(AuthError::Unauthenticated(format!(
                "this credential's identity is too large for a session cookie ({} bytes, at most {MAX_SESSION_COOKIE_BYTES}); send it with every request instead",
                value.len()
            )));
        }
        Ok(value)
    }

    /// The identity of a cookie value this server (or a replica sharing
    /// its keys) issued and that has not expired; else 401. This does not
    /// ask whether the credential it was signed in with is still accepted:
    /// the server does that with [`open_bound`](Self::open_bound).
    pub fn open(&self, value: &str) -> Result<Identity, AuthError> {
        self.open_bound(value).map(|(identity, _)| identity)
    }

    /// [`open`](Self::open), with the credential the cookie is bound to
    /// (`None` for a cookie sealed without one).
    pub fn open_bound(&self, value: &str) -> Result<(Identity, Option<SessionCredential>), AuthError> {
        let refused = || AuthError::Unauthenticated("the session cookie is not valid; sign in again".into());
        let bytes = URL_SAFE_NO_PAD.decode(value.trim()).map_err(|_| refused())?;
        let signed: Value = serde_json::from_slice(&bytes).map_err(|_| refused())?;
        let payload = self.codec.verify(signed).map_err(|_| refused())?;
        if payload.get("v") != Some(&json!(1)) {
            return Err(refused());
        }
        let exp = payload.get("exp").and_then(Value::as_i64).ok_or_else(refused)?;
        if exp <= now_secs() {
            return Err(AuthError::Unauthenticated(
                "the session has expired; sign in again".into(),
            ));
        }
        let principal = payload.get("principal").and_then(Value::as_str).ok_or_else(refused)?;
        let strings = |v: Option<&Value>| -> Option<Vec<String>> {
            v?.as_array()?.iter().map(|s| s.as_str().map(str::to_owned)).collect()
        };
        let roles = strings(payload.get("roles")).ok_or_else(refused)?;
        let scope = match payload.get("scope") {
            Some(Value::Null) => AgentScope::All,
            other => AgentScope::only(strings(other).ok_or_else(refused)?),
        };
        let context = match payload.get("context") {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        };
        let credential = match payload.get("cred") {
            None => None,
            Some(cred) => {
                let kid = cred.get("kid").and_then(Value::as_str).ok_or_else(refused)?;
                let mac = cred.get("mac").and_then(Value::as_str).ok_or_else(refused)?;
                let mac = URL_SAFE_NO_PAD.decode(mac).map_err(|_| refused())?;
                let key = self.keys.get(kid).ok_or_else(refused)?;
                let keyed = SessionCredential::keyed(key).ok_or_else(refused)?;
                Some(SessionCredential {
                    kid: kid.to_owned(),
                    keyed,
                    mac,
                })
            }
        };
        let identity = Identity {
            principal: Some(principal.to_owned()),
            context,
            scope,
            roles: roles.into_iter().collect(),
        };
        Ok((identity, credential))
    }

    /// When a session for `identity` signed in now ends: after
    /// [`SESSION_MAX_AGE`], or at a token's own `exp` when that is sooner.
    pub fn expiry_for(identity: &Identity) -> i64 {
        let max = now_secs().saturating_add(SESSION_MAX_AGE.as_secs() as i64);
        let token_exp = identity
            .context
            .get("auth")
            .and_then(|a| a.get("claims"))
            .and_then(|c| c.get("exp"))
            .and_then(Value::as_f64)
            .map(|e| e as i64);
        token_exp.map_or(max, |e| e.min(max))
    }
}

/// The session cookie's value in a request, if any.
pub(crate) fn cookie_value(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.trim())
}

/// The `Host` a request was sent to (a proxy's `X-Forwarded-Host` first).
fn request_host(parts: &Parts) -> Option<&str> {
    let named = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    named("x-forwarded-host")
        .and_then(|h| h.split(',').next())
        .map(str::trim)
        .or_else(|| named(header::HOST.as_str()))
        .or_else(|| parts.uri.authority().map(|a| a.as_str()))
}

/// The cross-site request check of a cookie-authenticated request: an
/// `Origin` header, when present, must be the server's own origin, and a
/// request that may change something (any method but GET, HEAD and
/// OPTIONS) must carry one. With `SameSite=Strict` this keeps other sites'
/// pages from acting with the cookie.
pub(crate) fn check_same_origin(parts: &Parts) -> Result<(), AuthError> {
    let safe = matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
    let origin = parts.headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let Some(origin) = origin else {
        return if safe {
            Ok(())
        } else {
            Err(AuthError::PermissionDenied(
                "a request signed in by the session cookie that changes something must carry its Origin".into(),
            ))
        };
    };
    let origin_authority = origin.split_once("://").map(|(_, rest)| rest);
    let same = match (origin_authority, request_host(parts)) {
        (Some(from), Some(host)) => from.eq_ignore_ascii_case(host),
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(AuthError::PermissionDenied(format!(
            "requests from origin {origin:?} may not use this server's session cookie"
        )))
    }
}

/// Whether the request reached the server over plain HTTP on a loopback
/// host (the only case in which the cookie goes without `Secure`).
fn loopback_http(parts: &Parts) -> bool {
    let https = parts.uri.scheme_str() == Some("https")
        || parts
            .headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
    if https {
        return false;
    }
    let Some(host) = request_host(parts) else {
        return false;
    };
    let host = host.to_ascii_lowercase();
    let name = if host.starts_with('[') {
        host.split(']').next().map(|h| format!("{h}]")).unwrap_or_default()
    } else {
        host.split(':').next().unwrap_or_default().to_owned()
    };
    name == "localhost"
        || name.ends_with(".localhost")
        || name == "[::1]"
        || name.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// The `Set-Cookie` value that stores `value` for `max_age` seconds (0
/// clears it).
pub(crate) fn set_cookie(parts: &Parts, value: &str, max_age: i64) -> Option<HeaderValue> {
    let secure = if loopback_http(parts) { "" } else { "; Secure" };
    HeaderValue::from_str(&format!(
        "{SESSION_COOKIE}={value}; Max-Age={}; Path=/; HttpOnly; SameSite=Strict{secure}",
        max_age.max(0)
    ))
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn parts(method: Method, headers: &[(&str, &str)]) -> Parts {
        let mut b = Request::builder().method(method).uri("/inbox");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn sealed_identities_open_until_they_expire() {
        let cookies = SessionCookies::new(Arc::new(KeyRing::ephemeral().unwrap()));
        let id = Identity::new("svc")
            .with_roles(["finance"])
            .with_scope(AgentScope::only(["bank"]))
            .with_context("tenant", json!("t1"));
        let value = cookies.seal(&id, now_secs() + 60).unwrap();
        assert_eq!(cookies.open(&value).unwrap(), id);
        let old = cookies.seal(&id, now_secs() - 1).unwrap();
        assert!(matches!(cookies.open(&old), Err(AuthError::Unauthenticated(m)) if m.contains("expired")));
        let other = SessionCookies::new(Arc::new(KeyRing::ephemeral().unwrap()));
        assert!(other.open(&value).is_err());
        assert!(cookies.seal(&Identity::anonymous(), now_secs() + 60).is_err());
    }

    #[test]
    fn a_bound_cookie_names_its_credential_by_mac_only() {
        let ring = Arc::new(KeyRing::ephemeral().unwrap());
        let cookies = SessionCookies::new(Arc::clone(&ring));
        let id = Identity::new("olga").with_roles(["finance"]);
        let key = "k-olga-0123456789abcdef";
        let credential = cookies.credential(key).unwrap();
        let value = cookies.seal_bound(&id, now_secs() + 60, Some(&credential)).unwrap();
        let (opened, bound) = cookies.open_bound(&value).unwrap();
        assert_eq!(opened, id);
        let bound = bound.unwrap();
        assert!(bound.is(key));
        assert!(bound.is_digest(&Sha256::digest(key.as_bytes()).into()));
        assert!(!bound.is("k-olga-rotated-0123456"));
        let text = String::from_utf8(URL_SAFE_NO_PAD.decode(&value).unwrap()).unwrap();
        assert!(!text.contains(key), "{text}");
        // Unbound cookies open with no credential.
        let plain = cookies.seal(&id, now_secs() + 60).unwrap();
        assert!(cookies.open_bound(&plain).unwrap().1.is_none());
        // Another server's keys make another MAC of the same key.
        let other = SessionCookies::new(Arc::new(KeyRing::ephemeral().unwrap()))
            .credential(key)
            .unwrap();
        assert_ne!(other.mac, bound.mac);
    }

    #[test]
    fn a_token_bounds_the_session() {
        let soon = now_secs() + 30;
        let id = Identity::new("jwt:#a").with_context("auth", json!({"method": "jwt", "claims": {"exp": soon}}));
        assert_eq!(SessionCookies::expiry_for(&id), soon);
        let key = Identity::new("k");
        assert!(SessionCookies::expiry_for(&key) > now_secs() + 11 * 3600);
    }

    #[test]
    fn origins_and_cookie_attributes() {
        let host = ("host", "127.0.0.1:8080");
        assert!(check_same_origin(&parts(Method::GET, &[host])).is_ok());
        assert!(check_same_origin(&parts(Method::POST, &[host])).is_err());
        assert!(check_same_origin(&parts(Method::POST, &[host, ("origin", "http://127.0.0.1:8080")])).is_ok());
        assert!(check_same_origin(&parts(Method::POST, &[host, ("origin", "http://evil.example")])).is_err());
        assert!(check_same_origin(&parts(Method::GET, &[host, ("origin", "http://evil.example")])).is_err());
        let c = set_cookie(&parts(Method::POST, &[host]), "v", 60).unwrap();
        assert_eq!(
            c.to_str().unwrap(),
            "holdpoint_session=v; Max-Age=60; Path=/; HttpOnly; SameSite=Strict"
        );
        let c = set_cookie(&parts(Method::POST, &[("host", "approvals.example")]), "v", 60).unwrap();
        assert!(c.to_str().unwrap().ends_with("; Secure"));
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_static("a=b; holdpoint_session=xyz"));
        assert_eq!(cookie_value(&h), Some("xyz"));
    }
}
