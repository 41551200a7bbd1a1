//! From the raw file to a [`Config`]: every check, each error at the span
//! of the value at fault.
//!
//! This module holds the [`Checker`] and the checks every section shares
//! (URLs, durations, role names, declared roles); each section of the file
//! has its own submodule: [`syntax`] (TOML and serde errors), [`auth`],
//! [`rules`], [`notify`] and [`mcp`].

mod auth;
mod mcp;
mod notify;
mod rules;
mod syntax;

use std::collections::BTreeSet;
use std::time::Duration;

use holdpoint::approval::{Policy, PolicyField};
use toml::Spanned;

use super::error::{ConfigError, ConfigErrorKind as K, Source};
use super::raw::*;
use super::types::*;
use super::{Config, parse_duration};

pub(super) fn build(src: &Source<'_>) -> Result<Config, ConfigError> {
    let raw = syntax::parse(src)?;
    let mut c = Checker { src };
    c.config(raw)
}

struct Checker<'a, 'b> {
    src: &'a Source<'b>,
}

fn at<T>(s: &Spanned<T>) -> usize {
    s.span().start
}

fn is_http_url(text: &str) -> bool {
    match reqwest::Url::parse(text) {
        Ok(url) => matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(|h| !h.is_empty()),
        Err(_) => false,
    }
}

fn bad_name(name: &str) -> bool {
    name.trim().is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace())
}

impl Checker<'_, '_> {
    fn err<T>(&self, value: &Spanned<T>, key: impl Into<String>, kind: K, message: impl Into<String>) -> ConfigError {
        self.src.error(at(value), key, kind, message)
    }

    fn config(&mut self, raw: RawConfig) -> Result<Config, ConfigError> {
        let public_url = match raw.public_url {
            Some(url) => Some(self.url(&url, "public_url")?),
            None => None,
        };
        let server = self.server(raw.server)?;
        let (roles, api_keys) = self.api_keys(&raw.auth)?;
        let jwt = match raw.auth.jwt {
            Some(jwt) => Some(self.jwt(jwt)?),
            None => None,
        };
        let rules = self.rules(&raw.approval.rules, &roles)?;
        let policy = Policy::new(rules.iter().cloned()).map_err(|e| {
            let rule = &raw.approval.rules[e.rule];
            let key = format!("approval.rules[{}].{}", e.rule, e.field.key());
            let r = rule.get_ref();
            let offset = match e.field {
                PolicyField::Agent => r.agent.as_ref().map(at),
                PolicyField::Tool => r.tool.as_ref().map(at),
                PolicyField::When => r.when.as_ref().map(at),
                PolicyField::Approvers => Some(at(&r.approvers)),
                PolicyField::Quorum => r.quorum.as_ref().map(at),
                PolicyField::Redact => r.redact.as_ref().map(at),
            }
            .unwrap_or_else(|| at(rule));
            let kind = if e.field == PolicyField::When {
                "the condition does not compile"
            } else {
                "not allowed"
            };
            self.src.error(offset, key, K::Rule, format!("{kind}: {}", e.message))
        })?;
        let notify = self.notify(raw.notify, public_url.clone(), &roles)?;
        let mcp = self.mcp(raw.mcp)?;
        Ok(Config {
            file: self.src.file.to_owned(),
            public_url,
            server,
            roles,
            api_keys,
            jwt,
            rules,
            policy,
            notify,
            mcp,
        })
    }

    fn url(&self, url: &Spanned<String>, key: &str) -> Result<String, ConfigError> {
        if !is_http_url(url.get_ref()) {
            // The URL itself is not quoted: Slack and webhook URLs embed tokens.
            return Err(self.err(url, key, K::Url, "must be an http:// or https:// URL with a host"));
        }
        Ok(url.get_ref().clone())
    }

    fn duration(&self, value: &Option<Spanned<String>>, key: String) -> Result<Option<Duration>, ConfigError> {
        let Some(value) = value else { return Ok(None) };
        parse_duration(value.get_ref())
            .map(Some)
            .map_err(|m| self.err(value, key, K::Duration, m))
    }

    fn server(&self, raw: RawServer) -> Result<ServerSettings, ConfigError> {
        let listen = match &raw.listen {
            Some(l) => Some(l.get_ref().parse().map_err(|_| {
                self.err(
                    l,
                    "server.listen",
                    K::Invalid,
                    "must be IP:PORT, e.g. \"127.0.0.1:8080\"",
                )
            })?),
            None => None,
        };
        let store = match &raw.store {
            Some(url) => Some(self.store(url)?),
            None => None,
        };
        Ok(ServerSettings {
            listen,
            store,
            data_dir: raw.data_dir.map(Into::into),
            metrics_open: raw.metrics_open,
            allowed_hosts: raw.allowed_hosts.unwrap_or_default(),
        })
    }

    /// `[server] store`: a URL `holdpoint-stores` parses (its error never
    /// quotes the URL, which may hold a password), remembered with its
    /// position so that a failure to open it later names the line too.
    fn store(&self, url: &Spanned<String>) -> Result<StoreSetting, ConfigError> {
        holdpoint_stores::parse_store_url(url.get_ref())
            .map_err(|e| self.err(url, "server.store", K::Invalid, e.to_string()))?;
        let (line, column) = self.src.position(at(url));
        let origin = StoreOrigin::File {
            file: self.src.file.to_owned(),
            line,
            column,
        };
        Ok(StoreSetting::checked(url.get_ref(), origin))
    }

    fn role_names(&self, roles: &[Spanned<String>], key: &str) -> Result<BTreeSet<String>, ConfigError> {
        let mut out = BTreeSet::new();
        for (i, role) in roles.iter().enumerate() {
            if bad_name(role.get_ref()) {
                return Err(self.err(
                    role,
                    format!("{key}[{i}]"),
                    K::Invalid,
                    "a role name must not be empty or hold spaces or control characters",
                ));
            }
            out.insert(role.get_ref().clone());
        }
        Ok(out)
    }

    /// `Ok` when every role in `names` is declared.
    fn declared(&self, names: &[Spanned<String>], key: &str, roles: &BTreeSet<String>) -> Result<(), ConfigError> {
        for (i, name) in names.iter().enumerate() {
            if !roles.contains(name.get_ref()) {
                let known = if roles.is_empty() {
                    "none".to_owned()
                } else {
                    roles.iter().cloned().collect::<Vec<_>>().join(", ")
                };
                return Err(self.err(
                    name,
                    format!("{key}[{i}]"),
                    K::UnknownRole,
                    format!(
                        "role \"{}\" is not declared: give it to an [[auth.api_keys]] entry or list it in \
                         [auth] roles = [...] (declared: {known})",
                        name.get_ref()
                    ),
                ));
            }
        }
        Ok(())
    }
}
