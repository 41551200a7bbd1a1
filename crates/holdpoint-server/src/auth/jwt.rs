//! [`JwtHs256`]: HS256-signed bearer tokens (RFC 7519) with a shared secret.

use async_trait::async_trait;
use axum::http::request::Parts;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value, json};
use sha2::Sha256;

use super::{AgentScope, AuthError, ContextProvider, Identity, bearer};

type HmacSha256 = Hmac<Sha256>;

/// Bearer tokens signed with HMAC-SHA256 (`alg: HS256`).
///
/// A token must carry `sub` (the principal) and `exp`; `nbf`, `iss` and
/// `aud` are checked when present or configured (with 30 s of leeway). An
/// optional `agents` claim (array of names) limits the agents it may use.
/// Its claims reach tools and middleware as `context.auth.claims`. Several
/// secrets may be configured (rotation): a token's `kid` header picks the
/// secret added with that id ([`with_key`](Self::with_key)); secrets without
/// an id are tried for every token.
///
/// ```
/// use holdpoint_server::auth::JwtHs256;
/// use serde_json::json;
/// let jwt = JwtHs256::new(b"a-shared-secret-of-32-bytes-or-more!".to_vec()).issuer("https://login.example");
/// let token = jwt.issue(&json!({"sub": "alice", "exp": 4_102_444_800u64, "iss": "https://login.example"}));
/// assert_eq!(token.split('.').count(), 3);
/// ```
#[derive(Clone)]
pub struct JwtHs256 {
    secrets: Vec<(Option<String>, Vec<u8>)>,
    issuer: Option<String>,
    audience: Option<String>,
    leeway: i64,
}

impl std::fmt::Debug for JwtHs256 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtHs256")
            .field("secrets", &self.secrets.len())
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .finish()
    }
}

fn unauthenticated(message: impl Into<String>) -> AuthError {
    AuthError::Unauthenticated(message.into())
}

fn decode_segment(segment: &str, what: &str) -> Result<Value, AuthError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|_| unauthenticated(format!("malformed bearer token: its {what} is not base64url")))?;
    serde_json::from_slice(&bytes)
        .map_err(|_| unauthenticated(format!("malformed bearer token: its {what} is not JSON")))
}

fn numeric(claims: &Map<String, Value>, name: &str) -> Result<Option<i64>, AuthError> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_f64().map(|f| f as i64))
            .map(Some)
            .ok_or_else(|| unauthenticated(format!("bearer token claim `{name}` must be a number"))),
    }
}

impl JwtHs256 {
    /// Verifies tokens signed with `secret` (use at least 32 random bytes).
    pub fn new(secret: impl Into<Vec<u8>>) -> Self {
        JwtHs256 {
            secrets: vec![(None, secret.into())],
            issuer: None,
            audience: None,
            leeway: 30,
        }
    }

    /// Also verifies tokens whose `kid` header is `kid` with `secret`.
    pub fn with_key(mut self, kid: impl Into<String>, secret: impl Into<Vec<u8>>) -> Self {
        self.secrets.push((Some(kid.into()), secret.into()));
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

    fn mac(secret: &[u8], signing_input: &str) -> HmacSha256 {
        // HMAC takes keys of any length; `new_from_slice` cannot fail for it.
        let mut mac = match HmacSha256::new_from_slice(secret) {
            Ok(mac) => mac,
            Err(_) => unreachable_mac(),
        };
        mac.update(signing_input.as_bytes());
        mac
    }

    /// Signs `claims` with the first secret (for tests, tools and demos).
    pub fn issue(&self, claims: &Value) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signing_input = format!("{header}.{payload}");
        let secret = self.secrets.first().map(|(_, s)| s.as_slice()).unwrap_or(&[]);
        let sig = Self::mac(secret, &signing_input).finalize().into_bytes();
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig))
    }

    /// Checks a compact token and returns its claims.
    pub fn verify(&self, token: &str) -> Result<Map<String, Value>, AuthError> {
        let mut segments = token.split('.');
        let (Some(h), Some(p), Some(s), None) = (segments.next(), segments.next(), segments.next(), segments.next())
        else {
            return Err(unauthenticated(
                "malformed bearer token: expected three dot-separated parts",
            ));
        };
        let header = decode_segment(h, "header")?;
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
        if alg != "HS256" {
            return Err(unauthenticated(format!(
                "bearer token algorithm \"{alg}\" is not accepted; only HS256"
            )));
        }
        let signature = URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|_| unauthenticated("malformed bearer token: its signature is not base64url"))?;
        let signing_input = &token[..h.len() + 1 + p.len()];
        let kid = header.get("kid").and_then(Value::as_str);
        // A `kid` picks the secret with that id; secrets configured without
        // an id are tried for every token.
        let candidates: Vec<&[u8]> = self
            .secrets
            .iter()
            .filter(|(k, _)| k.is_none() || kid.is_none() || k.as_deref() == kid)
            .map(|(_, s)| s.as_slice())
            .collect();
        if candidates.is_empty() {
            return Err(unauthenticated("bearer token names an unknown key (kid)"));
        }
        let valid = candidates
            .iter()
            .any(|secret| Self::mac(secret, signing_input).verify_slice(&signature).is_ok());
        if !valid {
            return Err(unauthenticated("bearer token signature does not verify"));
        }
        let Value::Object(claims) = decode_segment(p, "payload")? else {
            return Err(unauthenticated("malformed bearer token: its claims are not an object"));
        };
        self.check_claims(&claims)?;
        Ok(claims)
    }

    fn check_claims(&self, claims: &Map<String, Value>) -> Result<(), AuthError> {
        let now = chrono::Utc::now().timestamp();
        match numeric(claims, "exp")? {
            None => return Err(unauthenticated("bearer token has no `exp` claim")),
            Some(exp) if now > exp + self.leeway => return Err(unauthenticated("bearer token has expired")),
            Some(_) => {}
        }
        if let Some(nbf) = numeric(claims, "nbf")?
            && now + self.leeway < nbf
        {
            return Err(unauthenticated("bearer token is not valid yet"));
        }
        if let Some(want) = &self.issuer
            && claims.get("iss").and_then(Value::as_str) != Some(want.as_str())
        {
            return Err(unauthenticated("bearer token has the wrong issuer"));
        }
        if let Some(want) = &self.audience {
            let ok = match claims.get("aud") {
                Some(Value::String(a)) => a == want,
                Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(want.as_str())),
                _ => false,
            };
            if !ok {
                return Err(unauthenticated("bearer token is not meant for this audience"));
            }
        }
        match claims.get("sub").and_then(Value::as_str) {
            Some(sub) if !sub.is_empty() => Ok(()),
            _ => Err(unauthenticated("bearer token has no `sub` claim")),
        }
    }
}

#[cold]
fn unreachable_mac() -> ! {
    // Hmac<Sha256> accepts keys of every length (RFC 2104 hashes long keys
    // and pads short ones), so `new_from_slice` never returns an error.
    panic!("HMAC-SHA256 rejected a key")
}

#[async_trait]
impl ContextProvider for JwtHs256 {
    async fn authenticate(&self, request: &Parts) -> Result<Option<Identity>, AuthError> {
        let Some(token) = bearer(request) else {
            return Ok(None);
        };
        if token.split('.').count() != 3 {
            return Ok(None);
        }
        let claims = self.verify(token)?;
        let sub = claims.get("sub").and_then(Value::as_str).unwrap_or_default().to_owned();
        let mut identity = Identity::new(sub);
        if let Some(Value::Array(names)) = claims.get("agents") {
            identity = identity.with_scope(AgentScope::only(names.iter().filter_map(Value::as_str)));
        }
        Ok(Some(identity.with_context(
            "auth",
            json!({"method": "jwt", "claims": Value::Object(claims)}),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt() -> JwtHs256 {
        JwtHs256::new(b"0123456789abcdef0123456789abcdef".to_vec())
    }

    fn far() -> i64 {
        chrono::Utc::now().timestamp() + 3600
    }

    #[test]
    fn round_trip_and_tampering() {
        let j = jwt();
        let token = j.issue(&json!({"sub": "alice", "exp": far()}));
        assert_eq!(j.verify(&token).unwrap()["sub"], json!("alice"));

        let other = JwtHs256::new(b"another-secret-another-secret-xx".to_vec());
        assert!(other.verify(&token).is_err());

        let mut parts: Vec<&str> = token.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(json!({"sub": "mallory", "exp": far()}).to_string());
        parts[1] = &forged;
        assert!(
            j.verify(&parts.join("."))
                .unwrap_err()
                .to_string()
                .contains("signature")
        );
    }

    #[test]
    fn rejects_none_alg_expired_and_missing_claims() {
        let j = jwt();
        let none_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let payload = URL_SAFE_NO_PAD.encode(json!({"sub": "a", "exp": far()}).to_string());
        let e = j.verify(&format!("{none_header}.{payload}.")).unwrap_err();
        assert!(e.to_string().contains("only HS256"), "{e}");

        let expired = j.issue(&json!({"sub": "a", "exp": chrono::Utc::now().timestamp() - 120}));
        assert!(j.verify(&expired).unwrap_err().to_string().contains("expired"));
        let no_exp = j.issue(&json!({"sub": "a"}));
        assert!(j.verify(&no_exp).unwrap_err().to_string().contains("exp"));
        let no_sub = j.issue(&json!({"exp": far()}));
        assert!(j.verify(&no_sub).unwrap_err().to_string().contains("sub"));
    }

    #[test]
    fn issuer_audience_and_kid() {
        let j = jwt().issuer("me").audience("api");
        assert!(j.verify(&j.issue(&json!({"sub": "a", "exp": far()}))).is_err());
        let good = j.issue(&json!({"sub": "a", "exp": far(), "iss": "me", "aud": ["x", "api"]}));
        assert!(j.verify(&good).is_ok());

        // A token naming key "k2" verifies with the secret added as "k2" only.
        let k2 = b"second-secret-second-secret-0123".to_vec();
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","kid":"k2"}"#);
        let payload = URL_SAFE_NO_PAD.encode(json!({"sub": "a", "exp": far()}).to_string());
        let input = format!("{header}.{payload}");
        let sig = URL_SAFE_NO_PAD.encode(JwtHs256::mac(&k2, &input).finalize().into_bytes());
        let token = format!("{input}.{sig}");
        let only_named = JwtHs256 {
            secrets: vec![
                (Some("k1".into()), b"first-secret-first-secret-012345".to_vec()),
                (Some("k2".into()), k2),
            ],
            issuer: None,
            audience: None,
            leeway: 30,
        };
        assert!(only_named.verify(&token).is_ok());
        let without_k2 = JwtHs256 {
            secrets: vec![(Some("k1".into()), b"first-secret-first-secret-012345".to_vec())],
            ..only_named.clone()
        };
        assert!(
            without_k2
                .verify(&token)
                .unwrap_err()
                .to_string()
                .contains("unknown key")
        );
    }
}
