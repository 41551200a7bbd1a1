//! The `[auth]` section: API keys, declared roles and the JWT verifier.

use std::collections::{BTreeSet, HashMap};

use toml::Spanned;

use super::{Checker, bad_name};
use crate::config::error::{ConfigError, ConfigErrorKind as K};
use crate::config::raw::*;
use crate::config::types::*;
use holdpoint_secret::Secret;
use holdpoint_server::auth::{AgentScope, JWT_PRINCIPAL_PREFIX};

impl Checker<'_, '_> {
    pub(super) fn api_keys(&self, auth: &RawAuth) -> Result<(BTreeSet<String>, Vec<ApiKeyConfig>), ConfigError> {
        let mut roles = self.role_names(&auth.roles, "auth.roles")?;
        let mut keys = Vec::new();
        let mut seen_keys: HashMap<&str, usize> = HashMap::new();
        let mut seen_principals: HashMap<&str, usize> = HashMap::new();
        for (i, entry) in auth.api_keys.iter().enumerate() {
            let e = entry.get_ref();
            let p = format!("auth.api_keys[{i}]");
            let principal = e.principal.get_ref();
            if bad_name(principal) {
                return Err(self.err(
                    &e.principal,
                    format!("{p}.principal"),
                    K::Invalid,
                    "must not be empty or hold spaces or control characters",
                ));
            }
            if principal.starts_with(JWT_PRINCIPAL_PREFIX) {
                return Err(self.err(
                    &e.principal,
                    format!("{p}.principal"),
                    K::Invalid,
                    format!("may not start with `{JWT_PRINCIPAL_PREFIX}` (reserved for bearer-token principals)"),
                ));
            }
            if let Some(first) = seen_principals.insert(principal, i) {
                return Err(self.err(
                    &e.principal,
                    format!("{p}.principal"),
                    K::DuplicateKey,
                    format!(
                        "principal \"{principal}\" is already configured by auth.api_keys[{first}]; \
                         list each principal once (its roles belong to the principal, not to one key)"
                    ),
                ));
            }
            let key = e.key.get_ref();
            if key.is_empty() || key.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(self.err(
                    &e.key,
                    format!("{p}.key"),
                    K::Invalid,
                    "must not be empty or hold spaces or control characters",
                ));
            }
            if let Some(first) = seen_keys.insert(key, i) {
                return Err(self.err(
                    &e.key,
                    format!("{p}.key"),
                    K::DuplicateKey,
                    format!("the same key as auth.api_keys[{first}]; every key must be different"),
                ));
            }
            let key_roles = self.role_names(&e.roles, &format!("{p}.roles"))?;
            roles.extend(key_roles.iter().cloned());
            let scope = match &e.agents {
                None => AgentScope::All,
                Some(agents) => AgentScope::only(agents.iter().map(|a| a.get_ref().clone())),
            };
            keys.push(ApiKeyConfig {
                principal: principal.clone(),
                key: Secret::new(key.clone()),
                roles: key_roles,
                scope,
            });
        }
        Ok((roles, keys))
    }

    pub(super) fn jwt(&self, raw: Spanned<RawJwt>) -> Result<JwtConfig, ConfigError> {
        let j = raw.get_ref();
        // With `jwks_url` the issuer is only the `iss` to require (any
        // string); without it, it is where discovery looks, so a URL.
        let issuer = match &j.issuer {
            Some(i) if i.get_ref().contains('#') => {
                return Err(self.err(i, "auth.jwt.issuer", K::Invalid, "an issuer may not contain `#`"));
            }
            Some(i) if i.get_ref().trim().is_empty() => {
                return Err(self.err(i, "auth.jwt.issuer", K::Invalid, "must not be empty"));
            }
            Some(i) if j.jwks_url.is_none() => Some(self.url(i, "auth.jwt.issuer")?),
            Some(i) => Some(i.get_ref().clone()),
            None => None,
        };
        let keys = match (&j.jwks_url, &issuer) {
            (Some(url), _) => JwtKeys::JwksUrl(self.url(url, "auth.jwt.jwks_url")?),
            (None, Some(issuer)) => JwtKeys::Discovery(issuer.clone()),
            (None, None) => {
                return Err(self.err(
                    &raw,
                    "auth.jwt",
                    K::Invalid,
                    "give `jwks_url`, or `issuer` to find the keys by OIDC discovery",
                ));
            }
        };
        let nonempty = |v: &Option<Spanned<String>>, key: &str| -> Result<Option<String>, ConfigError> {
            match v {
                Some(s) if s.get_ref().trim().is_empty() => Err(self.err(s, key, K::Invalid, "must not be empty")),
                Some(s) => Ok(Some(s.get_ref().clone())),
                None => Ok(None),
            }
        };
        let principal = match &j.principal {
            None => JwtPrincipal::IssuerAndSubject,
            Some(p) => match p.get_ref().as_str() {
                "issuer_and_subject" => JwtPrincipal::IssuerAndSubject,
                "subject" => JwtPrincipal::Subject,
                _ => {
                    return Err(self.err(
                        p,
                        "auth.jwt.principal",
                        K::Invalid,
                        "must be \"issuer_and_subject\" or \"subject\"",
                    ));
                }
            },
        };
        let page_client_id = nonempty(&j.page_client_id, "auth.jwt.page_client_id")?;
        if let Some(id) = &j.page_client_id {
            // The page signs in at the issuer: it must be an http(s) URL
            // whose origin a Content-Security-Policy can name.
            let usable = issuer
                .as_deref()
                .is_some_and(|i| holdpoint_server::PageLogin::new(i, id.get_ref().clone()).is_ok());
            if !usable {
                return Err(self.err(
                    id,
                    "auth.jwt.page_client_id",
                    K::Invalid,
                    "needs `issuer` set to the provider's http(s) URL (the page signs in there)",
                ));
            }
        }
        Ok(JwtConfig {
            page_client_id,
            keys,
            issuer,
            audience: nonempty(&j.audience, "auth.jwt.audience")?,
            roles_claim: nonempty(&j.roles_claim, "auth.jwt.roles_claim")?,
            principal,
            refresh_interval: self.duration(&j.refresh_interval, "auth.jwt.refresh_interval".into())?,
            min_refetch_interval: self.duration(&j.min_refetch_interval, "auth.jwt.min_refetch_interval".into())?,
            timeout: self.duration(&j.timeout, "auth.jwt.timeout".into())?,
        })
    }
}
