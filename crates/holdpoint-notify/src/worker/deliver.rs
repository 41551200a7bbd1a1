//! One claimed row: its timer's check, its deliveries to the channels that
//! serve it (each in its own span), and how its attempt ends.

use std::time::Duration;

use chrono::Utc;
use holdpoint::session::{OutboxEvent, OutboxOutcome};
use tracing::Instrument;

use super::timers::Fire;
use super::{TARGET, Worker};
use crate::channel::{Channel, DeliveryError};
use crate::message::Notification;

/// The `done` marker of a timer whose action ran: a retry of its
/// deliveries does not check or act again.
const TIMER_DONE: &str = "timer";

/// Why a row that no channel serves was not sent: its type and the
/// approvers it names (the routing a channel would need), and whether its
/// timer fired first (an expiry's deny or an escalation still happened).
fn unrouted_reason(event: &OutboxEvent, n: &Notification) -> String {
    let approvers = n.approvers();
    let whose = if approvers.is_empty() {
        String::new()
    } else {
        format!(" for approvers {}", approvers.join(", "))
    };
    let fired = if event.timer { "the timer fired; " } else { "" };
    format!(
        "{fired}not sent: no channel takes `{}` events{whose} (see the channels' `events` and `roles`)",
        event.kind
    )
}

/// How one channel's delivery went.
enum Sent {
    Delivered,
    Skipped,
    Failed(String),
}

impl Worker {
    /// Runs the row's timer (if it is one) and delivers it to every channel
    /// that serves it and has not taken it yet.
    pub(super) async fn outcome(&self, event: &OutboxEvent) -> OutboxOutcome {
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
            let span =
                tracing::info_span!(target: TARGET, "notify.delivery", channel = id, outcome = tracing::field::Empty);
            match self.send(channel.as_ref(), event, &n).instrument(span.clone()).await {
                Sent::Delivered => {
                    span.record("outcome", "delivered");
                    done.push(id.to_owned());
                }
                Sent::Skipped => {
                    span.record("outcome", "stopped");
                    done.push(id.to_owned());
                }
                Sent::Failed(why) => {
                    span.record("outcome", "failed");
                    errors.push(format!("{id}: {why}"));
                }
            }
        }
        if !errors.is_empty() {
            return self.retry_or_dead(event, errors.join("; "), done);
        }
        // Invariant: a row is settled `delivered` only when a channel took
        // it (on this attempt or an earlier one; an endpoint stopped by a
        // 410 counts as reached, as everywhere). A row no channel serves
        // was sent nowhere: it is settled `cancelled` with the reason, and
        // counted as unrouted, never as delivered.
        if !done.iter().any(|d| d != TIMER_DONE) {
            let reason = unrouted_reason(event, &n);
            self.metrics.unrouted();
            for o in &self.observers {
                o.unrouted(&event.kind);
            }
            tracing::debug!(target: TARGET, %reason, "no channel takes the event");
            return OutboxOutcome::Cancelled { reason };
        }
        OutboxOutcome::Delivered { done }
    }

    /// One delivery to `channel`, unless its endpoint is stopped; a 410
    /// stops it (in the store, for every replica) and the row counts it as
    /// reached.
    async fn send(&self, channel: &dyn Channel, event: &OutboxEvent, n: &Notification) -> Sent {
        let id = channel.id();
        if self.stops.is_stopped(channel) {
            tracing::debug!(target: TARGET, "the endpoint is stopped (it answered 410); skipped");
            return Sent::Skipped;
        }
        let sent = tokio::time::timeout(self.notifier.options.timeout, channel.deliver(n)).await;
        match sent {
            Ok(Ok(())) => {
                let delay = (Utc::now() - event.due_at).to_std().unwrap_or(Duration::ZERO);
                self.metrics
                    .delivered(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX));
                for o in &self.observers {
                    o.delivered(id, delay);
                }
                tracing::debug!(target: TARGET, "delivered");
                Sent::Delivered
            }
            Ok(Err(DeliveryError::Gone(why))) => {
                tracing::warn!(target: TARGET, reason = %why, "the endpoint is gone; it gets no more deliveries until re-enabled");
                self.stops.stop(self.outbox.as_ref(), channel, &why).await;
                for o in &self.observers {
                    o.stopped(id);
                }
                Sent::Skipped
            }
            Ok(Err(DeliveryError::Retry(why))) => {
                self.failed(id);
                tracing::info!(target: TARGET, reason = %why, "delivery failed");
                Sent::Failed(why)
            }
            Err(_) => {
                self.failed(id);
                tracing::info!(target: TARGET, "delivery timed out");
                Sent::Failed("timed out".into())
            }
        }
    }

    fn failed(&self, channel: &str) {
        self.metrics.failed();
        for o in &self.observers {
            o.failed(channel);
        }
    }

    /// A retry with backoff and jitter, or dead after the last attempt.
    pub(super) fn retry_or_dead(&self, event: &OutboxEvent, error: String, done: Vec<String>) -> OutboxOutcome {
        let retry = self.notifier.options.retry;
        if event.attempts >= retry.max_attempts.max(1) {
            self.metrics.dead();
            for o in &self.observers {
                o.dead(&event.kind);
            }
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
}
