//! What the configuration converts into: channels, `public_url`, the SMTP
//! relay and the worker's options. Plain data; [`Notifier::new`](crate::Notifier::new)
//! checks it.

use std::time::Duration;

pub use holdpoint_secret::Secret;

/// A `[[notify.webhooks]]` endpoint (Standard Webhooks).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WebhookSpec {
    /// Where to POST (http or https). Kept secret: URLs often carry tokens.
    pub url: Secret,
    /// The Standard Webhooks secret (`whsec_` + base64).
    pub secret: Secret,
    /// The event types it takes (empty: all).
    pub events: Vec<String>,
    /// The approver roles whose holds it takes (empty: all).
    pub roles: Vec<String>,
}

/// A `[[notify.slack]]` incoming webhook.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlackSpec {
    /// The incoming-webhook URL (a secret: it is the credential).
    pub webhook_url: Secret,
    /// The event types it takes (empty: all).
    pub events: Vec<String>,
    /// The approver roles whose holds it takes (empty: all).
    pub roles: Vec<String>,
}

/// How the SMTP connection is secured. The default is STARTTLS, as in
/// the configuration file (`[notify.smtp] tls`): plain text only when
/// asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SmtpTls {
    /// Plain text (local relays only).
    None,
    /// Plain, upgraded with STARTTLS (required).
    #[default]
    Starttls,
    /// TLS from the first byte (SMTPS).
    Tls,
}

impl SmtpTls {
    /// Parses `none` / `starttls` / `tls`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(SmtpTls::None),
            "starttls" => Some(SmtpTls::Starttls),
            "tls" => Some(SmtpTls::Tls),
            _ => None,
        }
    }

    /// The port a relay listens on for this security when none is given:
    /// 25 for `none`, 587 for `starttls`, 465 for `tls`.
    pub fn default_port(self) -> u16 {
        match self {
            SmtpTls::None => 25,
            SmtpTls::Starttls => 587,
            SmtpTls::Tls => 465,
        }
    }
}

/// `[notify.smtp]`: the relay email goes through.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SmtpSpec {
    /// Host name or address.
    pub host: String,
    /// Port (default by `tls`: [`SmtpTls::default_port`]).
    pub port: Option<u16>,
    /// The `From` address.
    pub from: String,
    /// Transport security.
    pub tls: SmtpTls,
    /// Login, when the relay wants one.
    pub username: Option<String>,
    /// Password for `username`.
    pub password: Option<Secret>,
}

/// A `[[notify.email]]` recipient list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EmailSpec {
    /// Recipients.
    pub to: Vec<String>,
    /// The event types it takes (empty: all).
    pub events: Vec<String>,
    /// The approver roles whose holds it takes (empty: all).
    pub roles: Vec<String>,
}

/// Retries: exponential backoff with jitter, then dead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The first retry's delay.
    pub base: Duration,
    /// The longest delay.
    pub max_delay: Duration,
    /// Attempts before an event is dead (at least 1).
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            base: Duration::from_secs(1),
            max_delay: Duration::from_secs(600),
            max_attempts: 10,
        }
    }
}

impl RetryPolicy {
    /// The delay before the retry that follows attempt `attempt` (1-based):
    /// `base * 2^(attempt-1)`, capped at `max_delay`, then scaled by a
    /// random factor in [0.5, 1) so replicas do not retry in step.
    pub fn delay(&self, attempt: u32, unit_random: f64) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let full = self.base.saturating_mul(1u32 << exp).min(self.max_delay);
        full.mul_f64(0.5 + 0.5 * unit_random.clamp(0.0, 1.0))
    }
}

/// How the worker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerOptions {
    /// How long to wait between polls when nothing was due.
    pub poll_interval: Duration,
    /// Rows claimed per poll (one store round trip claims them, one
    /// settles them).
    pub batch: usize,
    /// How many rows of a batch are delivered at once.
    pub concurrency: usize,
    /// How long a claim holds a row (a delivery must end within it).
    pub lease: Duration,
    /// One delivery's timeout (HTTP request, SMTP session).
    pub timeout: Duration,
    /// Retries.
    pub retry: RetryPolicy,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            poll_interval: Duration::from_millis(500),
            batch: 64,
            concurrency: 32,
            lease: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
        }
    }
}

/// Every channel and setting of notifications.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NotifyConfig {
    /// Links in messages point here (`public_url`); without it messages
    /// carry no link.
    pub public_url: Option<String>,
    /// Standard Webhooks endpoints.
    pub webhooks: Vec<WebhookSpec>,
    /// Slack incoming webhooks.
    pub slack: Vec<SlackSpec>,
    /// The SMTP relay (needed by `email`).
    pub smtp: Option<SmtpSpec>,
    /// Email recipient lists.
    pub email: Vec<EmailSpec>,
    /// The worker's options.
    pub worker: WorkerOptions,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A relay built in Rust is secured unless plain text is asked for,
    /// as one read from the configuration file is.
    #[test]
    fn smtp_is_starttls_unless_asked_otherwise() {
        assert_eq!(SmtpSpec::default().tls, SmtpTls::Starttls);
        assert_eq!(SmtpTls::parse("none"), Some(SmtpTls::None));
    }
}
