//! [`JwksSource`] and the remote key set: verification keys fetched from a
//! JWKS URL, or from an OIDC issuer's discovery document
//! (`{issuer}/.well-known/openid-configuration` → `jwks_uri`), cached and
//! refetched so the provider can rotate keys without a restart.
//!
//! Invariants:
//! - at most one fetch is in flight at a time (a mutex around fetching);
//! - fetches start at most once per [`JwksSource::min_refetch_interval`],
//!   however many tokens name unknown key ids, so a flood of forged `kid`s
//!   cannot hammer the provider;
//! - a failed fetch keeps the last good keys;
//! - every response is read with a timeout and at most
//!   [`MAX_JWKS_BYTES`] bytes; redirects are not followed;
//! - only RSA (RS256) and P-256 (ES256) signing keys are taken from a set:
//!   symmetric (`oct`) keys, encryption keys and other curves are skipped.

use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::{Mutex, MutexGuard, RwLock};
use tokio::time::Instant;

use super::key::{JwtAlgorithm, JwtKey, probe};

/// The largest JWKS or discovery document read, in bytes.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;

/// The most keys taken from one JWKS.
pub const MAX_JWKS_KEYS: usize = 64;

/// Where a remote key set comes from, and how often it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwksSource {
    location: Location,
    refresh_interval: Duration,
    min_refetch_interval: Duration,
    timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Location {
    Url(String),
    Issuer(String),
}

impl JwksSource {
    /// The default [`refresh_interval`](Self::refresh_interval): 5 minutes.
    pub const DEFAULT_REFRESH: Duration = Duration::from_secs(300);
    /// The default [`min_refetch_interval`](Self::min_refetch_interval): 10 s.
    pub const DEFAULT_MIN_REFETCH: Duration = Duration::from_secs(10);
    /// The default [`timeout`](Self::timeout) of one fetch: 5 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
    /// The longest refresh interval accepted (1 day): keys are reread at
    /// least this often.
    pub const MAX_REFRESH: Duration = Duration::from_secs(86_400);

    /// Keys from the JWKS document at `url`.
    pub fn url(url: impl Into<String>) -> Self {
        Self::at(Location::Url(url.into()))
    }

    /// Keys from the `jwks_uri` of `issuer`'s OIDC discovery document
    /// (`{issuer}/.well-known/openid-configuration`).
    pub fn issuer(issuer: impl Into<String>) -> Self {
        Self::at(Location::Issuer(issuer.into()))
    }

    fn at(location: Location) -> Self {
        JwksSource {
            location,
            refresh_interval: Self::DEFAULT_REFRESH,
            min_refetch_interval: Self::DEFAULT_MIN_REFETCH,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }

    /// How long fetched keys are used before they are reread (at most
    /// [`Self::MAX_REFRESH`]; rereads still start at most once per
    /// [`min_refetch_interval`](Self::min_refetch_interval)).
    pub fn refresh_interval(mut self, interval: Duration) -> Self {
        self.refresh_interval = interval.min(Self::MAX_REFRESH);
        self
    }

    /// The least time between two fetches, whatever asks for them (stale
    /// keys or a token naming an unknown key id).
    pub fn min_refetch_interval(mut self, interval: Duration) -> Self {
        self.min_refetch_interval = interval;
        self
    }

    /// The time one fetch (connect, headers and body) may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The configured URL: the JWKS URL or the issuer.
    pub fn location(&self) -> &str {
        match &self.location {
            Location::Url(u) | Location::Issuer(u) => u,
        }
    }

    /// Whether keys are found through OIDC discovery.
    pub fn is_discovery(&self) -> bool {
        matches!(self.location, Location::Issuer(_))
    }
}

/// Why a key set could not be fetched (logged; the last good keys stay).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JwksError {
    /// The HTTP client could not be built.
    #[error("the HTTP client for JWKS could not be built: {0}")]
    Client(String),
    /// The request failed or timed out.
    #[error("fetching {url} failed: {message}")]
    Fetch {
        /// What was fetched.
        url: String,
        /// Why it failed.
        message: String,
    },
    /// The document is not what was expected.
    #[error("{url}: {message}")]
    Document {
        /// What was fetched.
        url: String,
        /// What is wrong with it.
        message: String,
    },
}

#[derive(Default)]
struct Cached {
    keys: Arc<Vec<JwtKey>>,
    /// Until when the keys are used without a reread; `None`: never read.
    fresh_until: Option<Instant>,
}

/// A cached remote key set; shared by clones of its verifier.
pub(super) struct RemoteKeys {
    source: JwksSource,
    client: reqwest::Client,
    cached: RwLock<Cached>,
    /// Held while fetching; holds the instant the last fetch started.
    fetching: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for RemoteKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteKeys")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Discovery {
    jwks_uri: String,
    #[serde(default)]
    issuer: Option<String>,
}

impl RemoteKeys {
    pub(super) fn new(source: JwksSource) -> Result<Self, JwksError> {
        let client = reqwest::Client::builder()
            .timeout(source.timeout)
            .connect_timeout(source.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| JwksError::Client(e.to_string()))?;
        Ok(RemoteKeys {
            source,
            client,
            cached: RwLock::new(Cached::default()),
            fetching: Mutex::new(None),
        })
    }

    pub(super) fn source(&self) -> &JwksSource {
        &self.source
    }

    /// The keys held now, without fetching.
    pub(super) async fn current(&self) -> Arc<Vec<JwtKey>> {
        self.cached.read().await.keys.clone()
    }

    /// The current keys, reread first when they are older than the refresh
    /// interval (or were never read) and the rate limit allows. With keys in
    /// hand, a request does not wait for another's fetch in flight: it uses
    /// the keys it has.
    pub(super) async fn keys(&self) -> Arc<Vec<JwtKey>> {
        let (stale, empty) = {
            let cached = self.cached.read().await;
            (
                cached.fresh_until.is_none_or(|until| Instant::now() >= until),
                cached.keys.is_empty(),
            )
        };
        if stale {
            if empty {
                self.refetch().await;
            } else if let Ok(guard) = self.fetching.try_lock() {
                self.refetch_locked(guard).await;
            }
        }
        self.current().await
    }

    /// Rereads the keys unless a fetch started within the minimum refetch
    /// interval; waits for a fetch already in flight instead of starting
    /// another. Returns whether this call fetched.
    pub(super) async fn refetch(&self) -> bool {
        let guard = self.fetching.lock().await;
        self.refetch_locked(guard).await
    }

    async fn refetch_locked(&self, mut last: MutexGuard<'_, Option<Instant>>) -> bool {
        if last.is_some_and(|at| at.elapsed() < self.source.min_refetch_interval) {
            return false;
        }
        *last = Some(Instant::now());
        match self.fetch().await {
            Ok(keys) => {
                tracing::debug!(source = self.source.location(), keys = keys.len(), "JWKS fetched");
                let mut cached = self.cached.write().await;
                cached.keys = Arc::new(keys);
                cached.fresh_until = Some(Instant::now() + self.source.refresh_interval);
            }
            Err(e) => {
                tracing::warn!(error = %e, "JWKS fetch failed; keeping the last keys");
                // The last keys serve until the next attempt is allowed.
                let mut cached = self.cached.write().await;
                cached.fresh_until = Some(Instant::now() + self.source.min_refetch_interval);
            }
        }
        true
    }

    async fn fetch(&self) -> Result<Vec<JwtKey>, JwksError> {
        let jwks_url = match &self.source.location {
            Location::Url(url) => url.clone(),
            Location::Issuer(issuer) => {
                let url = format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
                let doc: Discovery =
                    serde_json::from_slice(&self.get(&url).await?).map_err(|e| JwksError::Document {
                        url: url.clone(),
                        message: format!("not an OpenID provider configuration: {e}"),
                    })?;
                // OIDC Discovery §4.3: the document's issuer must be the one
                // it was fetched for.
                if doc
                    .issuer
                    .as_deref()
                    .is_some_and(|i| i.trim_end_matches('/') != issuer.trim_end_matches('/'))
                {
                    return Err(JwksError::Document {
                        url,
                        message: "its `issuer` is not the configured issuer".into(),
                    });
                }
                if !(doc.jwks_uri.starts_with("https://") || doc.jwks_uri.starts_with("http://")) {
                    return Err(JwksError::Document {
                        url,
                        message: "its `jwks_uri` is not an http(s) URL".into(),
                    });
                }
                doc.jwks_uri
            }
        };
        let body = self.get(&jwks_url).await?;
        parse_jwks(&body).map_err(|message| JwksError::Document { url: jwks_url, message })
    }

    /// GET `url`: 2xx only, at most [`MAX_JWKS_BYTES`].
    async fn get(&self, url: &str) -> Result<Vec<u8>, JwksError> {
        let failed = |message: String| JwksError::Fetch {
            url: url.to_owned(),
            message,
        };
        let mut response = self
            .client
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| failed(e.without_url().to_string()))?;
        if !response.status().is_success() {
            return Err(failed(format!("answered {}", response.status())));
        }
        if response.content_length().is_some_and(|n| n > MAX_JWKS_BYTES as u64) {
            return Err(failed(format!("the document is larger than {MAX_JWKS_BYTES} bytes")));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| failed(e.without_url().to_string()))?
        {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(failed(format!("the document is larger than {MAX_JWKS_BYTES} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// The usable signing keys of a JWKS document; keys of other kinds are
/// skipped, a document with none usable is an error.
pub(super) fn parse_jwks(body: &[u8]) -> Result<Vec<JwtKey>, String> {
    #[derive(Deserialize)]
    struct Set {
        keys: Vec<Value>,
    }
    let set: Set = serde_json::from_slice(body).map_err(|e| format!("not a JWK set: {e}"))?;
    let mut keys = Vec::new();
    for value in set.keys.into_iter().take(MAX_JWKS_KEYS) {
        // A key this library cannot read is someone else's (another
        // algorithm or use): skipped, not fatal.
        let Ok(jwk) = serde_json::from_value::<Jwk>(value) else {
            continue;
        };
        if let Some(key) = key_of(&jwk) {
            keys.push(key);
        }
    }
    if keys.is_empty() {
        return Err("no RS256 or ES256 signing key in the set".into());
    }
    Ok(keys)
}

fn key_of(jwk: &Jwk) -> Option<JwtKey> {
    if matches!(
        jwk.common.public_key_use,
        Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
    ) {
        return None;
    }
    let alg = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => JwtAlgorithm::Rs256,
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => JwtAlgorithm::Es256,
        _ => return None,
    };
    let declared = match jwk.common.key_algorithm {
        None => true,
        Some(KeyAlgorithm::RS256) => alg == JwtAlgorithm::Rs256,
        Some(KeyAlgorithm::ES256) => alg == JwtAlgorithm::Es256,
        Some(_) => false,
    };
    if !declared {
        return None;
    }
    let decoding = DecodingKey::from_jwk(jwk).ok()?;
    probe(alg, &decoding).ok()?;
    Some(JwtKey {
        kid: jwk.common.key_id.clone(),
        alg,
        decoding,
        encoding: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A P-256 public key (generated for these tests).
    const EC_X: &str = "vyKXO1Eej9p3ZFGwb8MhlkTOjuQoFPodfxNcyCBtTFo";
    const EC_Y: &str = "_IDUncYI-WNsMg1Bbz0sqSNqx_kjeJWzwjB9OnyZ_dA";

    #[test]
    fn only_rsa_and_p256_signing_keys_are_taken() {
        let doc = serde_json::json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA", "kid": "hmac"},
            {"kty": "RSA", "use": "enc", "kid": "enc", "n": "sXch", "e": "AQAB"},
            {"kty": "weird"},
        ]});
        let err = parse_jwks(doc.to_string().as_bytes()).unwrap_err();
        assert!(err.contains("no RS256 or ES256"), "{err}");
        assert!(parse_jwks(b"[]").is_err());
        let ec = serde_json::json!({"keys": [
            {"kty": "EC", "crv": "P-256", "kid": "ec", "use": "sig", "x": EC_X, "y": EC_Y},
            {"kty": "EC", "crv": "P-256", "kid": "wrong-alg", "alg": "RS256", "x": EC_X, "y": EC_Y},
        ]});
        let keys = parse_jwks(ec.to_string().as_bytes()).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!((keys[0].kid(), keys[0].algorithm()), (Some("ec"), JwtAlgorithm::Es256));
    }
}
