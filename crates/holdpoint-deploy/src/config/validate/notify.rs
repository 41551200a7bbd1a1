//! The `[notify]` section: webhook, mail and Slack channels and the events
//! and roles each is sent, checked into `holdpoint-notify`'s own settings
//! ([`NotifyConfig`]).

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use holdpoint_notify::{EmailSpec, NotifyConfig, SlackSpec, SmtpSpec, SmtpTls, WebhookSpec};
use holdpoint_secret::Secret;
use toml::Spanned;

use super::{Checker, bad_name};
use crate::config::error::{ConfigError, ConfigErrorKind as K};
use crate::config::raw::*;
use crate::config::types::*;

/// The shortest decoded webhook secret: 24 bytes (Standard Webhooks
/// secrets are 24 to 64).
const MIN_WEBHOOK_SECRET_BYTES: usize = 24;
/// The longest decoded webhook secret.
const MAX_WEBHOOK_SECRET_BYTES: usize = 64;

impl Checker<'_, '_> {
    pub(super) fn notify(
        &self,
        raw: RawNotify,
        public_url: Option<String>,
        roles: &BTreeSet<String>,
    ) -> Result<NotifyConfig, ConfigError> {
        let mut notify = NotifyConfig {
            public_url,
            ..NotifyConfig::default()
        };
        for (i, hook) in raw.webhooks.iter().enumerate() {
            notify.webhooks.push(self.webhook(hook.get_ref(), i, roles)?);
        }
        if let Some(smtp) = &raw.smtp {
            notify.smtp = Some(self.smtp(smtp)?);
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
            let (events, channel_roles) = self.routing(&e.events, &e.roles, &p, roles)?;
            notify.email.push(EmailSpec {
                to: e.to.get_ref().iter().map(|s| s.get_ref().clone()).collect(),
                events,
                roles: channel_roles,
            });
        }
        for (i, slack) in raw.slack.iter().enumerate() {
            let s = slack.get_ref();
            let p = format!("notify.slack[{i}]");
            let url = self.url(&s.webhook_url, &format!("{p}.webhook_url"))?;
            let (events, channel_roles) = self.routing(&s.events, &s.roles, &p, roles)?;
            notify.slack.push(SlackSpec {
                webhook_url: Secret::new(url),
                events,
                roles: channel_roles,
            });
        }
        Ok(notify)
    }

    /// One `[[notify.webhooks]]` entry: an http(s) URL and a Standard
    /// Webhooks secret of 24 to 64 bytes.
    fn webhook(&self, h: &RawWebhook, i: usize, roles: &BTreeSet<String>) -> Result<WebhookSpec, ConfigError> {
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
        let (events, channel_roles) = self.routing(&h.events, &h.roles, &p, roles)?;
        Ok(WebhookSpec {
            url: Secret::new(url),
            secret: Secret::new(secret.clone()),
            events,
            roles: channel_roles,
        })
    }

    /// `[notify.smtp]`: a host, a `tls` of notify's three (absent: its
    /// default), a port (absent: left to notify), a sender address,
    /// `username` and `password` both or neither.
    fn smtp(&self, smtp: &Spanned<RawSmtp>) -> Result<SmtpSpec, ConfigError> {
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
        // Absent: notify's default, STARTTLS (plain text only when asked for).
        let tls = match &s.tls {
            None => SmtpTls::default(),
            Some(t) => SmtpTls::parse(t.get_ref()).ok_or_else(|| {
                self.err(
                    t,
                    "notify.smtp.tls",
                    K::Invalid,
                    "must be \"none\", \"starttls\" or \"tls\"",
                )
            })?,
        };
        // Absent: notify picks the port of `tls` (`SmtpTls::default_port`).
        let port = match &s.port {
            None => None,
            Some(p) => Some(
                u16::try_from(*p.get_ref())
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| self.err(p, "notify.smtp.port", K::Invalid, "must be a port from 1 to 65535"))?,
            ),
        };
        self.address(&s.from, "notify.smtp.from")?;
        let (username, password) = match (&s.username, &s.password) {
            (Some(u), Some(pw)) => (Some(u.get_ref().clone()), Some(Secret::new(pw.get_ref().clone()))),
            (None, None) => (None, None),
            (Some(u), None) => {
                return Err(self.err(u, "notify.smtp.username", K::Invalid, "needs `password` as well"));
            }
            (None, Some(pw)) => {
                return Err(self.err(pw, "notify.smtp.password", K::Invalid, "needs `username` as well"));
            }
        };
        Ok(SmtpSpec {
            host: host.clone(),
            port,
            from: s.from.get_ref().clone(),
            tls,
            username,
            password,
        })
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

    /// The events (absent: every one of [`EVENTS`], listed) and the roles
    /// (absent: none listed, so every hold) a channel serves, in notify's
    /// spelling: sorted, each once.
    fn routing(
        &self,
        events: &Option<Vec<Spanned<String>>>,
        channel_roles: &Option<Vec<Spanned<String>>>,
        p: &str,
        roles: &BTreeSet<String>,
    ) -> Result<(Vec<String>, Vec<String>), ConfigError> {
        let events: BTreeSet<String> = match events {
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
        let roles: BTreeSet<String> = match channel_roles {
            None => BTreeSet::new(),
            Some(list) => {
                self.declared(list, &format!("{p}.roles"), roles)?;
                list.iter().map(|s| s.get_ref().clone()).collect()
            }
        };
        Ok((events.into_iter().collect(), roles.into_iter().collect()))
    }
}
