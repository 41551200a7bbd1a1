//! From the raw file to a [`Config`]: every check, each error at the span
//! of the value at fault.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use holdpoint::approval::{Policy, PolicyField, RuleSpec};
use toml::Spanned;

use super::error::{ConfigError, ConfigErrorKind as K, Source};
use super::raw::*;
use super::types::*;
use super::{ApprovalRuleConfig, Config, parse_duration};
use crate::auth::{AgentScope, JWT_PRINCIPAL_PREFIX};

/// The shortest decoded webhook secret: 24 bytes (Standard Webhooks
/// secrets are 24 to 64).
const MIN_WEBHOOK_SECRET_BYTES: usize = 24;
/// The longest decoded webhook secret.
const MAX_WEBHOOK_SECRET_BYTES: usize = 64;

pub(super) fn build(src: &Source<'_>) -> Result<Config, ConfigError> {
    let raw = parse(src)?;
    let mut c = Checker { src };
    c.config(raw)
}

/// TOML and serde: syntax, types, unknown and duplicate keys.
fn parse(src: &Source<'_>) -> Result<RawConfig, ConfigError> {
    let de = toml::Deserializer::parse(src.text).map_err(|e| toml_error(src, &e, String::new()))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        toml_error(src, e.inner(), path)
    })
}

/// An error of the `toml` crate, by its span and message only (its
/// `Display` quotes the source line, which may hold a secret; values in
/// type errors are left out for the same reason).
fn toml_error(src: &Source<'_>, err: &toml::de::Error, path: String) -> ConfigError {
    let message = err.message().trim().to_owned();
    let offset = err.span().map_or(0, |s| s.start);
    // `Spanned` values deserialize through a private field of this name.
    let path = path
        .split('.')
        .filter(|p| !p.starts_with("$__serde_spanned"))
        .collect::<Vec<_>>()
        .join(".");
    let path = if path == "." { String::new() } else { path };
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (field, expected) = rest.split_once('`').unwrap_or((rest, ""));
        // The path already ends in the unknown key.
        let key = if path.is_empty() { field.to_owned() } else { path };
        let known = expected
            .trim_start_matches(", expected ")
            .trim_start_matches("one of ")
            .replace('`', "");
        let message = if known.is_empty() {
            format!("unknown key `{field}`")
        } else {
            format!("unknown key `{field}` (known: {known})")
        };
        return src.error(offset, key, K::UnknownKey, message);
    }
    if message.contains("duplicate key") {
        let key = key_at(src.text, offset);
        return src.error(
            offset,
            key,
            K::DuplicateKey,
            "this key is given twice in the same table",
        );
    }
    let message = match message.split_once(": ") {
        Some((what @ ("invalid type" | "invalid value" | "invalid length"), detail)) => {
            let (found, expected) = detail.split_once(", expected ").unwrap_or((detail, "another value"));
            let found = found.split([' ', '`', '"']).next().unwrap_or("value");
            format!("{what}: expected {expected}, found {found}")
        }
        _ => message.replace("missing field", "missing key"),
    };
    let message = message.replace("expected i64", "expected an integer");
    src.error(offset, path, K::Syntax, message)
}

/// The dotted name of the key or table header at `offset`: the header's
/// own name when it is on a `[table]` line, else the enclosing header's
/// name and the key.
fn key_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let line_start = text.get(..offset).and_then(|t| t.rfind('\n')).map_or(0, |i| i + 1);
    let line = text.get(line_start..).unwrap_or("").lines().next().unwrap_or("");
    let header = |l: &str| {
        let l = l.trim();
        l.starts_with('[')
            .then(|| l.trim_matches(|c| c == '[' || c == ']').trim().to_owned())
    };
    if let Some(h) = header(line) {
        return h;
    }
    let name: String = text
        .get(offset..)
        .unwrap_or("")
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '=')
        .collect();
    let table = text.get(..line_start).unwrap_or("").lines().rev().find_map(header);
    match table {
        Some(t) if !t.is_empty() => format!("{t}.{name}"),
        _ => name,
    }
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
        let policy = Policy::new(rules.iter().map(|r| r.spec.clone())).map_err(|e| {
            let rule = &raw.approval.rules[e.rule];
            let key = format!("approval.rules[{}].{}", e.rule, e.field.key());
            let r = rule.get_ref();
            let offset = match e.field {
                PolicyField::Agent => r.agent.as_ref().map(at),
                PolicyField::Tool => r.tool.as_ref().map(at),
                PolicyField::When => r.when.as_ref().map(at),
                PolicyField::Approvers => Some(at(&r.approvers)),
                PolicyField::Quorum => r.quorum.as_ref().map(at),
            }
            .unwrap_or_else(|| at(rule));
            let kind = if e.field == PolicyField::When {
                "the condition does not compile"
            } else {
                "not allowed"
            };
            self.src.error(offset, key, K::Rule, format!("{kind}: {}", e.message))
        })?;
        let notify = self.notify(raw.notify, &roles)?;
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
        Ok(ServerSettings {
            listen,
            store: raw.store.map(Secret::new),
            data_dir: raw.data_dir.map(Into::into),
            metrics_open: raw.metrics_open,
            allowed_hosts: raw.allowed_hosts.unwrap_or_default(),
        })
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

    fn api_keys(&self, auth: &RawAuth) -> Result<(BTreeSet<String>, Vec<ApiKeyConfig>), ConfigError> {
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

    fn jwt(&self, raw: Spanned<RawJwt>) -> Result<JwtConfig, ConfigError> {
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
                .is_some_and(|i| crate::PageLogin::new(i, id.get_ref().clone()).is_ok());
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

    fn rules(
        &self,
        raw: &[Spanned<RawRule>],
        roles: &BTreeSet<String>,
    ) -> Result<Vec<ApprovalRuleConfig>, ConfigError> {
        let mut out = Vec::new();
        for (i, rule) in raw.iter().enumerate() {
            let r = rule.get_ref();
            let p = format!("approval.rules[{i}]");
            self.declared(r.approvers.get_ref(), &format!("{p}.approvers"), roles)?;
            let quorum = match &r.quorum {
                None => 1,
                Some(q) => u32::try_from(*q.get_ref()).ok().filter(|n| *n >= 1).ok_or_else(|| {
                    self.err(
                        q,
                        format!("{p}.quorum"),
                        K::Invalid,
                        "must be a whole number, at least 1",
                    )
                })?,
            };
            let remind_after = self.duration(&r.remind_after, format!("{p}.remind_after"))?;
            let escalate_after = self.duration(&r.escalate_after, format!("{p}.escalate_after"))?;
            let expire_after = self.duration(&r.expire_after, format!("{p}.expire_after"))?;
            let escalate_to = match &r.escalate_to {
                Some(to) => {
                    self.declared(to.get_ref(), &format!("{p}.escalate_to"), roles)?;
                    if to.get_ref().is_empty() {
                        return Err(self.err(to, format!("{p}.escalate_to"), K::Invalid, "name at least one role"));
                    }
                    to.get_ref().iter().map(|s| s.get_ref().clone()).collect()
                }
                None => Vec::new(),
            };
            match (&r.escalate_after, &r.escalate_to) {
                (Some(after), None) => {
                    return Err(self.err(
                        after,
                        format!("{p}.escalate_after"),
                        K::Invalid,
                        "needs `escalate_to` (the roles that may answer after it)",
                    ));
                }
                (None, Some(to)) => {
                    return Err(self.err(
                        to,
                        format!("{p}.escalate_to"),
                        K::Invalid,
                        "needs `escalate_after` (when those roles are added)",
                    ));
                }
                _ => {}
            }
            let on_expire = match &r.on_expire {
                None => OnExpire::Expire,
                Some(o) => {
                    if r.expire_after.is_none() {
                        return Err(self.err(o, format!("{p}.on_expire"), K::Invalid, "needs `expire_after`"));
                    }
                    match o.get_ref().as_str() {
                        "expire" => OnExpire::Expire,
                        "deny" => OnExpire::Deny,
                        _ => {
                            return Err(self.err(
                                o,
                                format!("{p}.on_expire"),
                                K::Invalid,
                                "must be \"deny\" or \"expire\"",
                            ));
                        }
                    }
                }
            };
            let spec = RuleSpec {
                name: r.name.as_ref().map(|n| n.get_ref().clone()),
                agent: r.agent.as_ref().map(|n| n.get_ref().clone()),
                tool: r.tool.as_ref().map(|n| n.get_ref().clone()),
                when: r.when.as_ref().map(|n| n.get_ref().clone()),
                approvers: r.approvers.get_ref().iter().map(|s| s.get_ref().clone()).collect(),
                quorum,
                // docs/reference.md §10.5: the owner may answer its own
                // holds unless a rule says otherwise.
                self_approval: r.self_approval.unwrap_or(true),
                timers: holdpoint::session::HoldTimers {
                    remind_after,
                    escalate_after,
                    escalate_to: escalate_to.clone(),
                    expire_after,
                    on_expire: match on_expire {
                        OnExpire::Deny => holdpoint::session::OnExpire::Deny,
                        OnExpire::Expire => holdpoint::session::OnExpire::Expire,
                    },
                },
            };
            out.push(ApprovalRuleConfig {
                spec,
                timers: RuleTimers {
                    remind_after,
                    escalate_after,
                    escalate_to,
                    expire_after,
                    on_expire,
                },
            });
        }
        Ok(out)
    }

    fn routing(
        &self,
        events: &Option<Vec<Spanned<String>>>,
        channel_roles: &Option<Vec<Spanned<String>>>,
        p: &str,
        roles: &BTreeSet<String>,
    ) -> Result<Routing, ConfigError> {
        let events = match events {
            None => EVENTS.iter().map(|e| (*e).to_owned()).collect(),
            Some(list) => {
                let mut out = BTreeSet::new();
                for (i, e) in list.iter().enumerate() {
                    if !EVENTS.contains(&e.get_ref().as_str()) {
                        return Err(self.err(
                            e,
                            format!("{p}.events[{i}]"),
                            K::Invalid,
                            format!("unknown event \"{}\" (known: {})", e.get_ref(), EVENTS.join(", ")),
                        ));
                    }
                    out.insert(e.get_ref().clone());
                }
                out
            }
        };
        let roles = match channel_roles {
            None => None,
            Some(list) => {
                self.declared(list, &format!("{p}.roles"), roles)?;
                Some(list.iter().map(|s| s.get_ref().clone()).collect())
            }
        };
        Ok(Routing { events, roles })
    }

    fn notify(&self, raw: RawNotify, roles: &BTreeSet<String>) -> Result<NotifyConfig, ConfigError> {
        let mut notify = NotifyConfig::default();
        for (i, hook) in raw.webhooks.iter().enumerate() {
            let h = hook.get_ref();
            let p = format!("notify.webhooks[{i}]");
            let url = self.url(&h.url, &format!("{p}.url"))?;
            let secret = h.secret.get_ref();
            let decoded = secret.strip_prefix("whsec_").map(|b| STANDARD.decode(b));
            match decoded {
                None => {
                    return Err(self.err(
                        &h.secret,
                        format!("{p}.secret"),
                        K::Secret,
                        "a Standard Webhooks secret starts with `whsec_` followed by base64",
                    ));
                }
                Some(Err(_)) => {
                    return Err(self.err(
                        &h.secret,
                        format!("{p}.secret"),
                        K::Secret,
                        "the part after `whsec_` is not valid base64",
                    ));
                }
                Some(Ok(bytes)) if !(MIN_WEBHOOK_SECRET_BYTES..=MAX_WEBHOOK_SECRET_BYTES).contains(&bytes.len()) => {
                    return Err(self.err(
                        &h.secret,
                        format!("{p}.secret"),
                        K::Secret,
                        format!(
                            "the secret decodes to {} bytes; use {MIN_WEBHOOK_SECRET_BYTES} to \
                             {MAX_WEBHOOK_SECRET_BYTES} random bytes",
                            bytes.len()
                        ),
                    ));
                }
                Some(Ok(_)) => {}
            }
            notify.webhooks.push(WebhookConfig {
                url,
                secret: WebhookSecret::new(secret.clone()),
                routing: self.routing(&h.events, &h.roles, &p, roles)?,
            });
        }
        if let Some(smtp) = &raw.smtp {
            let s = smtp.get_ref();
            let host = s.host.get_ref();
            if bad_name(host) {
                return Err(self.err(
                    &s.host,
                    "notify.smtp.host",
                    K::Invalid,
                    "must be a host name or address",
                ));
            }
            let tls = match &s.tls {
                None => SmtpTls::StartTls,
                Some(t) => match t.get_ref().as_str() {
                    "none" => SmtpTls::None,
                    "starttls" => SmtpTls::StartTls,
                    "tls" => SmtpTls::Tls,
                    _ => {
                        return Err(self.err(
                            t,
                            "notify.smtp.tls",
                            K::Invalid,
                            "must be \"none\", \"starttls\" or \"tls\"",
                        ));
                    }
                },
            };
            let port = match &s.port {
                None => match tls {
                    SmtpTls::None => 25,
                    SmtpTls::StartTls => 587,
                    SmtpTls::Tls => 465,
                },
                Some(p) => u16::try_from(*p.get_ref())
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| self.err(p, "notify.smtp.port", K::Invalid, "must be a port from 1 to 65535"))?,
            };
            self.address(&s.from, "notify.smtp.from")?;
            let credentials = match (&s.username, &s.password) {
                (Some(u), Some(pw)) => Some((u.get_ref().clone(), Secret::new(pw.get_ref().clone()))),
                (None, None) => None,
                (Some(u), None) => {
                    return Err(self.err(u, "notify.smtp.username", K::Invalid, "needs `password` as well"));
                }
                (None, Some(pw)) => {
                    return Err(self.err(pw, "notify.smtp.password", K::Invalid, "needs `username` as well"));
                }
            };
            notify.smtp = Some(SmtpConfig {
                host: host.clone(),
                port,
                from: s.from.get_ref().clone(),
                tls,
                credentials,
            });
        }
        for (i, email) in raw.email.iter().enumerate() {
            let e = email.get_ref();
            let p = format!("notify.email[{i}]");
            if notify.smtp.is_none() {
                return Err(self.err(email, p, K::Invalid, "email needs a [notify.smtp] relay"));
            }
            if e.to.get_ref().is_empty() {
                return Err(self.err(&e.to, format!("{p}.to"), K::Invalid, "name at least one recipient"));
            }
            for (j, to) in e.to.get_ref().iter().enumerate() {
                self.address(to, &format!("{p}.to[{j}]"))?;
            }
            notify.email.push(EmailConfig {
                to: e.to.get_ref().iter().map(|s| s.get_ref().clone()).collect(),
                routing: self.routing(&e.events, &e.roles, &p, roles)?,
            });
        }
        for (i, slack) in raw.slack.iter().enumerate() {
            let s = slack.get_ref();
            let p = format!("notify.slack[{i}]");
            let url = self.url(&s.webhook_url, &format!("{p}.webhook_url"))?;
            notify.slack.push(SlackConfig {
                webhook_url: Secret::new(url),
                routing: self.routing(&s.events, &s.roles, &p, roles)?,
            });
        }
        Ok(notify)
    }

    /// A plausible mail address: `local@domain`, no spaces or brackets.
    fn address(&self, value: &Spanned<String>, key: &str) -> Result<(), ConfigError> {
        let a = value.get_ref();
        let ok = a
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty() && !domain.contains('@'))
            && !a
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || "<>,;\"".contains(c));
        if !ok {
            return Err(self.err(value, key, K::Invalid, "must be a mail address such as ops@example.com"));
        }
        Ok(())
    }

    fn mcp(&self, raw: RawMcp) -> Result<Vec<McpServerConfig>, ConfigError> {
        let mut out = Vec::new();
        let mut names: HashMap<String, usize> = HashMap::new();
        for (i, server) in raw.servers.iter().enumerate() {
            let s = server.get_ref();
            let p = format!("mcp.servers[{i}]");
            let name = s.name.get_ref();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return Err(self.err(
                    &s.name,
                    format!("{p}.name"),
                    K::Invalid,
                    "must be letters, digits, `_` or `-` (it prefixes the server's tool names)",
                ));
            }
            if let Some(first) = names.insert(name.clone(), i) {
                return Err(self.err(
                    &s.name,
                    format!("{p}.name"),
                    K::DuplicateKey,
                    format!("server \"{name}\" is already configured by mcp.servers[{first}]"),
                ));
            }
            let secrets = |m: &BTreeMap<String, String>| -> BTreeMap<String, Secret> {
                m.iter().map(|(k, v)| (k.clone(), Secret::new(v.clone()))).collect()
            };
            let transport = match (&s.command, &s.url) {
                (Some(command), None) => {
                    if let Some(h) = &s.headers {
                        return Err(self.err(h, format!("{p}.headers"), K::Invalid, "goes with `url`, not `command`"));
                    }
                    if command.get_ref().trim().is_empty() {
                        return Err(self.err(command, format!("{p}.command"), K::Invalid, "must not be empty"));
                    }
                    McpTransport::Stdio {
                        command: command.get_ref().clone(),
                        args: s.args.as_ref().map(|a| a.get_ref().clone()).unwrap_or_default(),
                        env: s.env.as_ref().map(|e| secrets(e.get_ref())).unwrap_or_default(),
                    }
                }
                (None, Some(url)) => {
                    for (field, value) in [("args", s.args.as_ref().map(at)), ("env", s.env.as_ref().map(at))] {
                        if let Some(offset) = value {
                            return Err(self.src.error(
                                offset,
                                format!("{p}.{field}"),
                                K::Invalid,
                                "goes with `command`, not `url`",
                            ));
                        }
                    }
                    McpTransport::Http {
                        url: self.url(url, &format!("{p}.url"))?,
                        headers: s.headers.as_ref().map(|h| secrets(h.get_ref())).unwrap_or_default(),
                    }
                }
                (Some(command), Some(_)) => {
                    return Err(self.err(
                        command,
                        format!("{p}.command"),
                        K::Invalid,
                        "give either `command` (stdio) or `url` (Streamable HTTP), not both",
                    ));
                }
                (None, None) => {
                    return Err(self.err(
                        server,
                        p,
                        K::Invalid,
                        "give `command` (+ `args`, `env`) for stdio or `url` (+ `headers`) for Streamable HTTP",
                    ));
                }
            };
            out.push(McpServerConfig {
                name: name.clone(),
                transport,
                agents: s
                    .agents
                    .as_ref()
                    .map(|a| a.iter().map(|s| s.get_ref().clone()).collect()),
            });
        }
        Ok(out)
    }
}
