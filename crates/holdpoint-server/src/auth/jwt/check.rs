//! The checks a token must pass (header, algorithm and key, signature,
//! registered claims, subject, issuer, agents, roles), as the type docs of
//! [`JwtVerifier`] list them, and the principal a verified token names.

use std::collections::BTreeSet;

use super::names::check_name;
use super::{
    JWT_PRINCIPAL_PREFIX, JwtAlgorithm, JwtKey, JwtVerifier, LEEWAY_SECS, MAX_ISSUER_BYTES, MAX_SUBJECT_BYTES,
    MAX_TIME_SECS, MAX_TOKEN_BYTES, PrincipalNaming, roles, unauthenticated,
};
use crate::auth::{AgentScope, AuthError};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::Validation;
use jsonwebtoken::errors::ErrorKind;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The header fields looked at before a key is chosen. Unknown fields are
/// ignored (RFC 7515 §4), except that `crit` refuses the token.
#[derive(Deserialize)]
struct Peek {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    crit: Option<Value>,
}

/// The refusal for a `jsonwebtoken` error. Messages name the check that
/// failed, never the token's contents.
fn refusal(kind: &ErrorKind) -> AuthError {
    unauthenticated(match kind {
        ErrorKind::InvalidSignature => "bearer token signature does not verify".to_owned(),
        ErrorKind::ExpiredSignature => "bearer token has expired".to_owned(),
        ErrorKind::ImmatureSignature => "bearer token is not valid yet".to_owned(),
        ErrorKind::InvalidIssuer => "bearer token has the wrong issuer".to_owned(),
        ErrorKind::InvalidAudience => "bearer token is not meant for this audience".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("bearer token has no valid `{claim}` claim"),
        ErrorKind::InvalidClaimFormat(claim) => format!("bearer token claim `{claim}` is malformed"),
        ErrorKind::InvalidAlgorithm => "bearer token algorithm does not match its key".to_owned(),
        _ => "malformed bearer token".to_owned(),
    })
}

/// What a verified token stands for.
pub(super) struct Verified {
    pub(super) claims: Map<String, Value>,
    pub(super) principal: String,
    pub(super) scope: AgentScope,
    pub(super) roles: BTreeSet<String>,
}

/// Why a token was refused: no key could check it (worth a refetch of a
/// remote key set), or a key did and said no.
pub(super) enum Refused {
    NoKey(AuthError),
    Checked(AuthError),
}

impl Refused {
    pub(super) fn into_error(self) -> AuthError {
        match self {
            Refused::NoKey(e) | Refused::Checked(e) => e,
        }
    }
}

impl JwtVerifier {
    #[cfg(test)]
    pub(super) fn check_static(&self, token: &str) -> Result<Verified, AuthError> {
        let keys: Vec<&JwtKey> = self.keys.iter().collect();
        self.check(token, &keys).map_err(Refused::into_error)
    }

    pub(super) fn verify_with(&self, token: &str, remote: &[JwtKey]) -> Result<Verified, Refused> {
        let keys: Vec<&JwtKey> = self.keys.iter().chain(remote).collect();
        self.check(token, &keys)
    }

    /// The principal a verified token's `claims` name.
    pub fn principal_of(&self, claims: &Map<String, Value>) -> Result<String, AuthError> {
        let sub = match claims.get("sub") {
            Some(Value::String(sub)) => sub,
            Some(_) => return Err(unauthenticated("bearer token claim `sub` must be a string")),
            None => return Err(unauthenticated("bearer token has no `sub` claim")),
        };
        check_name(sub, "sub", MAX_SUBJECT_BYTES)?;
        let iss = match claims.get("iss") {
            None => None,
            Some(Value::String(iss)) => {
                check_name(iss, "iss", MAX_ISSUER_BYTES)?;
                Some(iss.as_str())
            }
            Some(_) => return Err(unauthenticated("bearer token claim `iss` must be a string")),
        };
        Ok(match self.naming {
            PrincipalNaming::Subject => sub.clone(),
            PrincipalNaming::IssuerAndSubject => {
                // `#` ends the issuer, so no (iss, sub) pair names another's
                // principal; issuer identifiers carry no fragment anyway.
                let iss = iss.unwrap_or("");
                if iss.contains('#') {
                    return Err(unauthenticated("bearer token claim `iss` may not contain `#`"));
                }
                format!("{JWT_PRINCIPAL_PREFIX}{iss}#{sub}")
            }
        })
    }

    pub(super) fn check(&self, token: &str, keys: &[&JwtKey]) -> Result<Verified, Refused> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refused::Checked(unauthenticated(format!(
                "bearer token is larger than {MAX_TOKEN_BYTES} bytes"
            ))));
        }
        let header = token.split('.').next().unwrap_or("");
        let peek: Peek = URL_SAFE_NO_PAD
            .decode(header)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(|| {
                Refused::Checked(unauthenticated(
                    "malformed bearer token: its header is not a JSON object",
                ))
            })?;
        if peek.crit.is_some() {
            return Err(Refused::Checked(unauthenticated(
                "bearer token header lists critical extensions (`crit`); none is understood",
            )));
        }
        let known = [JwtAlgorithm::Hs256, JwtAlgorithm::Rs256, JwtAlgorithm::Es256]
            .into_iter()
            .find(|a| a.name() == peek.alg);
        let Some(alg) = known.filter(|a| keys.iter().any(|k| k.alg == *a)) else {
            let refusal = unauthenticated(format!(
                "bearer token algorithm is not accepted; accepted: {}",
                accepted(keys)
            ));
            // An algorithm none of our keys has yet may arrive with the
            // next key set (RS256 or ES256 from a remote set only).
            return Err(match known {
                Some(JwtAlgorithm::Rs256 | JwtAlgorithm::Es256) => Refused::NoKey(refusal),
                _ => Refused::Checked(refusal),
            });
        };
        let candidates: Vec<&JwtKey> = keys
            .iter()
            .copied()
            .filter(|k| k.answers(alg, peek.kid.as_deref()))
            .collect();
        if candidates.is_empty() {
            return Err(Refused::NoKey(unauthenticated(
                "bearer token names an unknown key (kid)",
            )));
        }
        let mut validation = Validation::new(alg.of());
        validation.leeway = LEEWAY_SECS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "sub"]);
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
            validation.required_spec_claims.insert("iss".to_owned());
        }
        if let Some(audience) = &self.audience {
            validation.set_audience(&[audience]);
            validation.required_spec_claims.insert("aud".to_owned());
        }
        // The first key whose signature verifies decides; a claim failure
        // under it is the answer, not a later key's signature mismatch.
        let mut refused = None;
        for key in candidates {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &validation) {
                Ok(data) => return self.accept(data.claims).map_err(Refused::Checked),
                Err(e) => {
                    let signature_failed = matches!(e.kind(), ErrorKind::InvalidSignature);
                    if refused.is_none() || !signature_failed {
                        refused = Some(refusal(e.kind()));
                    }
                    if !signature_failed {
                        break;
                    }
                }
            }
        }
        Err(Refused::Checked(refused.unwrap_or_else(|| {
            unauthenticated("bearer token signature does not verify")
        })))
    }

    fn accept(&self, claims: Map<String, Value>) -> Result<Verified, AuthError> {
        for claim in ["exp", "nbf"] {
            // `jsonwebtoken` has checked these are numbers in 0..2^64.
            if let Some(value) = claims.get(claim)
                && !value.as_u64().map_or_else(
                    || value.as_f64().is_some_and(|f| f <= MAX_TIME_SECS as f64),
                    |n| n <= MAX_TIME_SECS,
                )
            {
                return Err(unauthenticated(format!(
                    "bearer token claim `{claim}` is out of range (after the year 9999)"
                )));
            }
        }
        let principal = self.principal_of(&claims)?;
        let scope = match claims.get("agents") {
            None => AgentScope::All,
            Some(Value::Array(names)) => AgentScope::Only(
                names
                    .iter()
                    .map(|n| n.as_str().map(str::to_owned))
                    .collect::<Option<_>>()
                    .ok_or_else(|| unauthenticated("bearer token claim `agents` must be an array of agent names"))?,
            ),
            Some(_) => {
                return Err(unauthenticated(
                    "bearer token claim `agents` must be an array of agent names",
                ));
            }
        };
        let roles = match &self.roles_claim {
            Some(claim) => roles::roles_of(&claims, claim)?,
            None => BTreeSet::new(),
        };
        Ok(Verified {
            claims,
            principal,
            scope,
            roles,
        })
    }
}

/// The algorithms of `keys`, for an error message.
fn accepted(keys: &[&JwtKey]) -> String {
    let mut names: Vec<&str> = keys.iter().map(|k| k.alg.name()).collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        return "none configured".to_owned();
    }
    names.join(", ")
}
