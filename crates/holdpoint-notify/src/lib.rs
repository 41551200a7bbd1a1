//! Delivery of hold events (docs/reference.md §11.3): a worker that claims due
//! rows from a store's outbox, delivers them to the channels that serve
//! them — Standard Webhooks, Slack incoming webhooks, email over SMTP — with
//! exponential backoff and jitter and a bounded number of attempts, and
//! runs the expiry and escalation timers through [`HoldActions`].
//!
//! | item | what |
//! |---|---|
//! | [`NotifyConfig`] | channels, `public_url` and the worker's options: what the configuration converts into |
//! | [`Notifier`] | the checked channels (a bad URL or secret is an error here, at start) |
//! | [`Worker`] | the delivery loop; [`Worker::spawn`] starts it as a tokio task |
//! | [`HoldActions`] | what the server side does when an expiry or escalation timer fires |
//! | [`NotifyMetrics`] | counters a metrics layer reads |
//!
//! Each outbox row is delivered at least once; its id is the idempotency
//! key every delivery carries (`webhook-id`), and a row's retry goes only
//! to the channels that did not take it yet. Secrets (webhook secrets,
//! Slack URLs, SMTP passwords) never appear in logs, errors or `Debug`.

mod actions;
mod channel;
mod config;
mod email;
mod error;
mod message;
mod metrics;
mod slack;
mod webhook;
mod worker;

pub use actions::{ExpireOutcome, HoldActions, HoldRef};
pub use channel::{Channel, DeliveryError};
pub use config::{
    EmailSpec, NotifyConfig, RetryPolicy, Secret, SlackSpec, SmtpSpec, SmtpTls, WebhookSpec, WorkerOptions,
};
pub use error::NotifyError;
pub use message::{Notification, payload};
pub use metrics::{DeliveryObserver, MetricsSnapshot, NotifyMetrics};
pub use worker::{Notifier, Worker, WorkerHandle};
