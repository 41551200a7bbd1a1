//! The delivery worker: claims a batch of due outbox rows with a lease (one
//! store round trip), runs their timers, delivers each to the channels that
//! serve it — the batch's rows concurrently, at most
//! [`WorkerOptions::concurrency`](crate::WorkerOptions::concurrency) at a
//! time — and settles the batch in one store round trip: delivered,
//! retried with backoff and jitter, or dead after the last attempt.
//!
//! Every replica may run one: the store's claim gives each row to one of
//! them at a time (its lease and token), and a row whose worker died is
//! claimed again once its lease lapses, so each row is delivered at least
//! once and in flight in one place at a time.
//!
//! | module | what |
//! |---|---|
//! | `notifier` | the checked channels ([`Notifier`]) |
//! | `deliver` | one row's deliveries and how its attempt ends |
//! | `timers` | a due timer's check against its hold, and its action |
//! | `stops` | endpoints stopped for good (410), shared through the store |

mod deliver;
mod notifier;
mod stops;
mod timers;

use std::sync::Arc;

use chrono::Utc;
use futures::StreamExt;
use holdpoint::session::{OutboxLease, OutboxSettle, OutboxStore, SessionStore};
use tokio::sync::watch;
use tracing::Instrument;

pub use notifier::Notifier;

use crate::actions::HoldActions;
use crate::metrics::{DeliveryObserver, NotifyMetrics};
use stops::Stops;

pub(crate) const TARGET: &str = "holdpoint::notify";

/// The delivery worker of one store.
#[derive(Clone)]
pub struct Worker {
    store: Arc<dyn SessionStore>,
    /// The store's outbox (a worker is built only on a store that has one).
    outbox: Arc<dyn OutboxStore>,
    notifier: Arc<Notifier>,
    actions: Option<Arc<dyn HoldActions>>,
    metrics: Arc<NotifyMetrics>,
    observers: Vec<Arc<dyn DeliveryObserver>>,
    stops: Arc<Stops>,
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
    /// A worker delivering `store`'s outbox through `notifier`;
    /// [`MissingCapability`](holdpoint::Error::MissingCapability) for a
    /// store without an outbox.
    pub fn new(store: Arc<dyn SessionStore>, notifier: Notifier) -> holdpoint::Result<Self> {
        let outbox = holdpoint::session::needed_by(store.capabilities().outbox().cloned(), "the notification worker")?;
        Ok(Worker {
            store,
            outbox,
            notifier: Arc::new(notifier),
            actions: None,
            metrics: Arc::default(),
            observers: Vec::new(),
            stops: Arc::default(),
        })
    }

    /// What expiry and escalation timers do (without it, they only
    /// notify, and an `on_expire = "deny"` hold stays as it is).
    pub fn actions(mut self, actions: Arc<dyn HoldActions>) -> Self {
        self.actions = Some(actions);
        self
    }

    /// Also reports each delivery, failure and dead row to `observer` (a
    /// metrics layer: the server's `/metrics`).
    pub fn observer(mut self, observer: Arc<dyn DeliveryObserver>) -> Self {
        self.observers.push(observer);
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

    /// Claims one batch of due rows (one store round trip), handles them
    /// concurrently (bounded), and settles them together (one more);
    /// returns how many were claimed.
    pub async fn run_once(&self) -> holdpoint::Result<usize> {
        let options = &self.notifier.options;
        let leases = self
            .outbox
            .claim_outbox(Utc::now(), options.batch, options.lease)
            .await?;
        let n = leases.len();
        if n == 0 {
            return Ok(0);
        }
        // Each batch reads the stops after its claim: an operator's
        // re-enable (one transaction with the retry) applies to the next
        // batch on every worker, never skipped by a stale read.
        self.stops
            .refresh(self.outbox.as_ref(), std::time::Duration::ZERO)
            .await;
        self.metrics.claimed(n as u64);
        let settles: Vec<OutboxSettle> = futures::stream::iter(leases)
            .map(|lease| self.handle(lease))
            .buffer_unordered(options.concurrency.max(1))
            .collect()
            .await;
        let ids: Vec<String> = settles.iter().map(|s| s.id.clone()).collect();
        match self.outbox.settle_outbox_batch(settles).await {
            Ok(results) => {
                for (id, result) in ids.iter().zip(results) {
                    if let Err(e) = result {
                        // The lease lapsed and another worker has the row:
                        // it is delivered again there, at least once.
                        tracing::warn!(target: TARGET, event_id = %id, error = %e, "settling the event failed");
                    }
                }
            }
            // The store is down: the rows' leases lapse and they are
            // claimed and delivered again.
            Err(e) => tracing::warn!(target: TARGET, events = n, error = %e, "settling the batch failed"),
        }
        Ok(n)
    }

    /// One claimed row: its span, its deliveries, and the settle it ends
    /// with.
    async fn handle(&self, lease: OutboxLease) -> OutboxSettle {
        let event = &lease.event;
        let span = tracing::info_span!(
            target: TARGET,
            "notify.event",
            event_id = %event.id,
            kind = %event.kind,
            attempt = event.attempts,
            snapshot_id = %event.snapshot_id,
        );
        let outcome = self.outcome(event).instrument(span).await;
        OutboxSettle {
            id: lease.event.id,
            token: lease.token,
            outcome,
        }
    }
}
