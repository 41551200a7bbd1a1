//! The checked channels: a configuration becomes channels here, and a bad
//! URL, secret or event name is an error at start.

use std::sync::Arc;

use holdpoint::session::outbox::EVENT_TYPES;

use crate::channel::{Channel, Route};
use crate::config::{NotifyConfig, WebhookSpec, WorkerOptions};
use crate::email::{EmailChannel, mailbox, transport};
use crate::error::NotifyError;
use crate::slack::SlackChannel;
use crate::webhook::WebhookChannel;

/// The checked channels, the link base and the worker's options.
pub struct Notifier {
    pub(super) channels: Vec<Arc<dyn Channel>>,
    pub(super) public_url: Option<url::Url>,
    pub(super) options: WorkerOptions,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("channels", &self.channel_ids())
            .field("public_url", &self.public_url.as_ref().map(url::Url::as_str))
            .field("options", &self.options)
            .finish()
    }
}

/// An http(s) URL, or the error naming the setting (never the URL).
fn http_url(what: &str, raw: &str) -> Result<url::Url, NotifyError> {
    let url = url::Url::parse(raw).map_err(|e| NotifyError::BadUrl {
        what: what.to_owned(),
        message: format!("not a URL ({e})"),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(NotifyError::BadUrl {
            what: what.to_owned(),
            message: format!("the scheme is `{}`; only http and https are delivered to", url.scheme()),
        });
    }
    Ok(url)
}

fn check_events(what: &str, events: &[String]) -> Result<(), NotifyError> {
    for e in events {
        if !EVENT_TYPES.contains(&e.as_str()) {
            return Err(NotifyError::UnknownEvent {
                what: what.to_owned(),
                event: e.clone(),
                known: EVENT_TYPES.join(", "),
            });
        }
    }
    Ok(())
}

/// The channel of `[[notify.webhooks]]` entry `i`: an http(s) URL, a
/// Standard Webhooks secret that is not empty and decodes, known events.
fn webhook(i: usize, w: &WebhookSpec, client: &reqwest::Client) -> Result<WebhookChannel, NotifyError> {
    let what = format!("notify.webhooks[{i}]");
    let url = http_url(&format!("{what}.url"), w.url.expose())?;
    let bad_secret = |message: String| NotifyError::BadSecret {
        what: format!("{what}.secret"),
        message,
    };
    let raw = w.secret.expose();
    if raw.strip_prefix("whsec_").unwrap_or(raw).is_empty() {
        return Err(bad_secret("it is empty".into()));
    }
    let signer = standardwebhooks::Webhook::new(raw).map_err(|e| bad_secret(e.to_string()))?;
    check_events(&format!("{what}.events"), &w.events)?;
    Ok(WebhookChannel {
        id: format!("webhook:{i}"),
        url,
        signer,
        client: client.clone(),
        route: Route {
            events: w.events.clone(),
            roles: w.roles.clone(),
        },
    })
}

impl Notifier {
    /// Checks `config` and builds its channels: a URL that is not http(s),
    /// a secret that does not decode, an unknown event type or an email
    /// channel without `[notify.smtp]` is an error.
    pub fn new(config: NotifyConfig) -> Result<Self, NotifyError> {
        let options = config.worker;
        let public_url = config
            .public_url
            .as_deref()
            .map(|u| http_url("public_url", u))
            .transpose()?;
        let client = reqwest::Client::builder()
            .timeout(options.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| NotifyError::Invalid(format!("cannot build the HTTP client: {e}")))?;
        let mut channels: Vec<Arc<dyn Channel>> = Vec::new();
        for (i, w) in config.webhooks.iter().enumerate() {
            channels.push(Arc::new(webhook(i, w, &client)?));
        }
        for (i, s) in config.slack.iter().enumerate() {
            let what = format!("notify.slack[{i}]");
            let url = http_url(&format!("{what}.webhook_url"), s.webhook_url.expose())?;
            check_events(&format!("{what}.events"), &s.events)?;
            channels.push(Arc::new(SlackChannel {
                id: format!("slack:{i}"),
                url,
                client: client.clone(),
                route: Route {
                    events: s.events.clone(),
                    roles: s.roles.clone(),
                },
            }));
        }
        if !config.email.is_empty() {
            let Some(smtp) = &config.smtp else {
                return Err(NotifyError::Invalid(
                    "notify.email needs [notify.smtp] (host, port, from, tls)".into(),
                ));
            };
            let from = mailbox("notify.smtp.from", &smtp.from)?;
            for (i, e) in config.email.iter().enumerate() {
                let what = format!("notify.email[{i}]");
                if e.to.is_empty() {
                    return Err(NotifyError::Invalid(format!("{what}.to: no recipients")));
                }
                let to =
                    e.to.iter()
                        .map(|a| mailbox(&format!("{what}.to"), a))
                        .collect::<Result<Vec<_>, _>>()?;
                check_events(&format!("{what}.events"), &e.events)?;
                channels.push(Arc::new(EmailChannel {
                    id: format!("email:{i}"),
                    from: from.clone(),
                    to,
                    transport: transport(smtp, options.timeout)?,
                    route: Route {
                        events: e.events.clone(),
                        roles: e.roles.clone(),
                    },
                }));
            }
        }
        Ok(Notifier {
            channels,
            public_url,
            options,
        })
    }

    /// Adds a channel of the application's own.
    pub fn with_channel(mut self, channel: Arc<dyn Channel>) -> Self {
        self.channels.push(channel);
        self
    }

    /// The channels' ids, in delivery order.
    pub fn channel_ids(&self) -> Vec<&str> {
        self.channels.iter().map(|c| c.id()).collect()
    }

    /// The worker's options.
    pub fn options(&self) -> &WorkerOptions {
        &self.options
    }
}
