//! The delivery worker: claims due outbox rows with a lease, runs timers,
//! delivers to the channels that serve each row, and settles it —
//! delivered, retried with backoff and jitter, or dead after the last
//! attempt. Every replica may run one: the store's claim gives each row to
//! one of them at a time, and a row whose worker died is claimed again
//! once its lease lapses.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use chrono::Utc;
use holdpoint::session::outbox::{ESCALATE_TO, EVENT_TYPES, HOLD_ESCALATED, HOLD_EXPIRED, HOLD_IN_DOUBT, ON_EXPIRE};
use holdpoint::session::{OnExpire, OutboxEvent, OutboxLease, OutboxOutcome, SessionStore};
use tokio::sync::watch;
use tracing::Instrument;

use crate::actions::{ExpireOutcome, HoldActions, HoldRef};
use crate::channel::{Channel, DeliveryError, Route};
use crate::config::{NotifyConfig, WorkerOptions};
use crate::email::{EmailChannel, mailbox, transport};
use crate::error::NotifyError;
use crate::message::Notification;
use crate::metrics::NotifyMetrics;
use crate::slack::SlackChannel;
use crate::webhook::WebhookChannel;

const TARGET: &str = "holdpoint::notify";

/// The `done` marker of a timer whose action ran: a retry of its
/// deliveries does not check or act again.
const TIMER_DONE: &str = "timer";

/// The checked channels, the link base and the worker's options.
pub struct Notifier {
    channels: Vec<Arc<dyn Channel>>,
    public_url: Option<url::Url>,
    options: WorkerOptions,
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
            channels.push(Arc::new(WebhookChannel {
                id: format!("webhook:{i}"),
                url,
                signer,
                client: client.clone(),
                route: Route {
                    events: w.events.clone(),
                    roles: w.roles.clone(),
                },
                gone: AtomicBool::new(false),
            }));
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
                gone: AtomicBool::new(false),
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

/// What a due timer leads to.
enum Fire {
    /// Deliver it.
    Go,
    /// Not to be delivered.
    Cancel(String),
    /// Not yet: check again then (an in-doubt check whose lease was renewed).
    Postpone(chrono::DateTime<Utc>),
    /// Its action failed: retry.
    Failed(String),
}

/// The delivery worker of one store.
#[derive(Clone)]
pub struct Worker {
    store: Arc<dyn SessionStore>,
    notifier: Arc<Notifier>,
    actions: Option<Arc<dyn HoldActions>>,
    metrics: Arc<NotifyMetrics>,
}

/// A running worker: stop it with [`WorkerHandle::shutdown`].
pub struct WorkerHandle {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    metrics: Arc<NotifyMetrics>,
}

impl WorkerHandle {
    /// The worker's counters.
    pub fn metrics(&self) -> Arc<NotifyMetrics> {
        Arc::clone(&self.metrics)
    }

    /// Stops the worker after the batch in hand (its rows are settled, or
    /// their leases lapse and another worker claims them).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

impl Worker {
    /// A worker delivering `store`'s outbox through `notifier`.
    pub fn new(store: Arc<dyn SessionStore>, notifier: Notifier) -> Self {
        Worker {
            store,
            notifier: Arc::new(notifier),
            actions: None,
            metrics: Arc::default(),
        }
    }

    /// What expiry and escalation timers do (without it, they only
    /// notify, and an `on_expire = "deny"` hold stays as it is).
    pub fn actions(mut self, actions: Arc<dyn HoldActions>) -> Self {
        self.actions = Some(actions);
        self
    }

    /// The worker's counters.
    pub fn metrics(&self) -> Arc<NotifyMetrics> {
        Arc::clone(&self.metrics)
    }

    /// Starts the loop as a tokio task: poll, claim, deliver, settle.
    pub fn spawn(self) -> WorkerHandle {
        let (stop, mut stopped) = watch::channel(false);
        let metrics = self.metrics();
        let task = tokio::spawn(async move {
            let poll = self.notifier.options.poll_interval;
            loop {
                let claimed = match self.run_once().await {
                    Ok(n) => n,
                    Err(e) => {
                        tracing::warn!(target: TARGET, error = %e, "claiming outbox events failed; retrying");
                        0
                    }
                };
                if *stopped.borrow() {
                    return;
                }
                if claimed < self.notifier.options.batch {
                    tokio::select! {
                        _ = tokio::time::sleep(poll) => {}
                        _ = stopped.changed() => return,
                    }
                }
            }
        });
        WorkerHandle { stop, task, metrics }
    }

    /// Claims one batch of due rows and handles them (concurrently);
    /// returns how many were claimed.
    pub async fn run_once(&self) -> holdpoint::Result<usize> {
        let options = &self.notifier.options;
        let leases = self
            .store
            .claim_outbox(Utc::now(), options.batch, options.lease)
            .await?;
        let n = leases.len();
        self.metrics.claimed(n as u64);
        futures::future::join_all(leases.into_iter().map(|l| self.handle(l))).await;
        Ok(n)
    }

    async fn handle(&self, lease: OutboxLease) {
        let event = &lease.event;
        let span = tracing::info_span!(
            target: TARGET,
            "notify.event",
            event_id = %event.id,
            kind = %event.kind,
            attempt = event.attempts,
            snapshot_id = %event.snapshot_id,
        );
        let outcome = self.outcome(event).instrument(span.clone()).await;
        let _entered = span.enter();
        if let Err(e) = self.store.settle_outbox(&event.id, &lease.token, outcome).await {
            // The lease lapsed (another worker has the row now) or the
            // store is down: the row is delivered again, at least once.
            tracing::warn!(target: TARGET, error = %e, "settling the event failed");
        }
    }

    async fn outcome(&self, event: &OutboxEvent) -> OutboxOutcome {
        let mut done = event.done.clone();
        if event.timer && !done.iter().any(|d| d == TIMER_DONE) {
            match self.fire(event).await {
                Fire::Go => done.push(TIMER_DONE.to_owned()),
                Fire::Cancel(reason) => {
                    self.metrics.cancelled();
                    tracing::debug!(target: TARGET, %reason, "timer cancelled");
                    return OutboxOutcome::Cancelled { reason };
                }
                Fire::Postpone(due_at) => {
                    return OutboxOutcome::Retry {
                        due_at,
                        error: None,
                        done,
                        counted: false,
                    };
                }
                Fire::Failed(error) => return self.retry_or_dead(event, error, done),
            }
        }
        let n = Notification::of(event, self.notifier.public_url.as_ref());
        let mut errors = Vec::new();
        for channel in &self.notifier.channels {
            let id = channel.id();
            if done.iter().any(|d| d == id) || !channel.serves(&n) {
                continue;
            }
            let span = tracing::info_span!(target: TARGET, "notify.delivery", channel = id);
            let sent = tokio::time::timeout(self.notifier.options.timeout, channel.deliver(&n))
                .instrument(span.clone())
                .await;
            let _entered = span.enter();
            match sent {
                Ok(Ok(())) => {
                    let delay = (Utc::now() - event.due_at).num_milliseconds().max(0);
                    self.metrics.delivered(u64::try_from(delay).unwrap_or(0));
                    tracing::debug!(target: TARGET, "delivered");
                    done.push(id.to_owned());
                }
                Ok(Err(DeliveryError::Gone(why))) => {
                    tracing::warn!(target: TARGET, reason = %why, "the endpoint is gone; it gets no more deliveries");
                    done.push(id.to_owned());
                }
                Ok(Err(DeliveryError::Retry(why))) => {
                    self.metrics.failed();
                    tracing::info!(target: TARGET, reason = %why, "delivery failed");
                    errors.push(format!("{id}: {why}"));
                }
                Err(_) => {
                    self.metrics.failed();
                    tracing::info!(target: TARGET, "delivery timed out");
                    errors.push(format!("{id}: timed out"));
                }
            }
        }
        if errors.is_empty() {
            OutboxOutcome::Delivered { done }
        } else {
            self.retry_or_dead(event, errors.join("; "), done)
        }
    }

    fn retry_or_dead(&self, event: &OutboxEvent, error: String, done: Vec<String>) -> OutboxOutcome {
        let retry = self.notifier.options.retry;
        if event.attempts >= retry.max_attempts.max(1) {
            self.metrics.dead();
            tracing::warn!(target: TARGET, attempts = event.attempts, %error, "giving up on the event");
            return OutboxOutcome::Dead { error, done };
        }
        let unit = getrandom::u64().map(|r| r as f64 / u64::MAX as f64).unwrap_or(0.5);
        let delay = retry.delay(event.attempts, unit);
        let due_at = holdpoint::session::lease_end(Utc::now(), delay);
        OutboxOutcome::Retry {
            due_at,
            error: Some(error),
            done,
            counted: true,
        }
    }

    /// Checks a due timer against its hold and runs its action.
    async fn fire(&self, event: &OutboxEvent) -> Fire {
        let row = match self.store.get_snapshot(&event.snapshot_id).await {
            Ok(Some(row)) => row,
            Ok(None) => return Fire::Cancel("the snapshot is gone".into()),
            Err(e) => return Fire::Failed(format!("reading the hold failed: {e}")),
        };
        let now = Utc::now();
        if event.kind == HOLD_IN_DOUBT {
            if let Some(end) = row.resume_lease_end()
                && end > now
            {
                return Fire::Postpone(end);
            }
            if !row.resume_lapsed(now) {
                return Fire::Cancel("the resume was not left in doubt".into());
            }
            return match self.store.get_latest_snapshot(&row.session_id).await {
                Ok(Some(latest))
                    if latest.snapshot_id != row.snapshot_id
                        && !latest.is_unfinished_successor_of(&row.snapshot_id) =>
                {
                    Fire::Cancel("the resume wrote its outcome".into())
                }
                Ok(_) => Fire::Go,
                Err(e) => Fire::Failed(format!("reading the session failed: {e}")),
            };
        }
        if !row.is_waiting() {
            return Fire::Cancel("the hold was answered".into());
        }
        let hold = HoldRef {
            agent: event.agent.clone(),
            session_id: event.session_id.clone(),
            snapshot_id: event.snapshot_id.clone(),
            reference: event.reference().map(str::to_owned),
            tool: event
                .data
                .get("tool")
                .and_then(|t| t.as_str())
                .unwrap_or_default()
                .to_owned(),
        };
        let on_expire = event
            .data
            .get(ON_EXPIRE)
            .and_then(|v| v.as_str())
            .and_then(OnExpire::parse)
            .unwrap_or_default();
        match (event.kind.as_str(), &self.actions) {
            (HOLD_EXPIRED, Some(actions)) if on_expire == OnExpire::Deny => match actions.expire(&hold).await {
                Ok(ExpireOutcome::Denied) => Fire::Go,
                Ok(ExpireOutcome::AlreadyAnswered) => Fire::Cancel("the hold was answered".into()),
                Err(e) => Fire::Failed(format!("denying the expired hold failed: {e}")),
            },
            (HOLD_EXPIRED, None) if on_expire == OnExpire::Deny => {
                tracing::warn!(target: TARGET, "no HoldActions: the expired hold is only notified, not denied");
                Fire::Go
            }
            (HOLD_ESCALATED, Some(actions)) => {
                let roles: Vec<String> = event
                    .data
                    .get(ESCALATE_TO)
                    .and_then(|v| v.as_array())
                    .map(|a| a.iter().filter_map(|r| r.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default();
                match actions.escalate(&hold, &roles).await {
                    Ok(()) => Fire::Go,
                    Err(e) => Fire::Failed(format!("escalating failed: {e}")),
                }
            }
            _ => Fire::Go,
        }
    }
}
