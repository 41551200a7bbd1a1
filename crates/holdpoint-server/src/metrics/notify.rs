//! The notification pipe's metrics (docs/reference.md §11.3): what the
//! delivery worker reports as it goes (deliveries, failures, dead letters,
//! stopped endpoints, the delay from due to delivered) and what a scrape
//! counts in the store's outbox (rows due, retrying, dead, the queue's age,
//! stopped endpoints).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `holdpoint_notify_deliveries_total` | counter | `channel` |
//! | `holdpoint_notify_failures_total` | counter | `channel` |
//! | `holdpoint_notify_dead_letters_total` | counter | `type` |
//! | `holdpoint_notify_endpoint_stops_total` | counter | `channel` |
//! | `holdpoint_notify_unrouted_total` | counter | `type` |
//! | `holdpoint_notify_delivery_delay_seconds` | histogram | |
//! | `holdpoint_notify_queue_due` | gauge | |
//! | `holdpoint_notify_queue_retrying` | gauge | |
//! | `holdpoint_notify_queue_dead` | gauge | |
//! | `holdpoint_notify_queue_age_seconds` | gauge | |
//! | `holdpoint_notify_endpoints_stopped` | gauge | |
//!
//! `channel` is a channel's id from the configuration (`webhook:0`,
//! `slack:1`, `email:0`), never its address or secret; `type` is one of the
//! fixed event types (`other` for anything else).

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use holdpoint::session::OutboxStats;
use holdpoint::session::outbox::EVENT_TYPES;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::Metrics;

/// Buckets of the due-to-delivered delay: 5 ms to an hour.
const DELAY: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ChannelLabels {
    pub(super) channel: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TypeLabels {
    pub(super) r#type: &'static str,
}

/// The notification families.
pub(super) struct NotifyFamilies {
    deliveries: Family<ChannelLabels, Counter>,
    failures: Family<ChannelLabels, Counter>,
    dead: Family<TypeLabels, Counter>,
    stops: Family<ChannelLabels, Counter>,
    unrouted: Family<TypeLabels, Counter>,
    delay: Histogram,
    due: Gauge,
    retrying: Gauge,
    dead_rows: Gauge,
    age: Gauge<f64, AtomicU64>,
    stopped: Gauge,
}

impl NotifyFamilies {
    /// The families, registered in `r`.
    pub(super) fn register(r: &mut Registry) -> Self {
        let f = NotifyFamilies {
            deliveries: Family::default(),
            failures: Family::default(),
            dead: Family::default(),
            stops: Family::default(),
            unrouted: Family::default(),
            delay: Histogram::new(DELAY.iter().copied()),
            due: Gauge::default(),
            retrying: Gauge::default(),
            dead_rows: Gauge::default(),
            age: Gauge::default(),
            stopped: Gauge::default(),
        };
        r.register(
            "holdpoint_notify_deliveries",
            "Notifications a channel took, by channel",
            f.deliveries.clone(),
        );
        r.register(
            "holdpoint_notify_failures",
            "Notification deliveries that failed (each retry counts), by channel",
            f.failures.clone(),
        );
        r.register(
            "holdpoint_notify_dead_letters",
            "Outbox events given up on after their last attempt, by event type",
            f.dead.clone(),
        );
        r.register(
            "holdpoint_notify_endpoint_stops",
            "Endpoints stopped after answering HTTP 410, by channel",
            f.stops.clone(),
        );
        r.register(
            "holdpoint_notify_unrouted",
            "Outbox events no channel takes (sent nowhere, settled cancelled), by event type",
            f.unrouted.clone(),
        );
        r.register(
            "holdpoint_notify_delivery_delay_seconds",
            "Seconds from an outbox event being due to a channel taking it",
            f.delay.clone(),
        );
        r.register("holdpoint_notify_queue_due", "Outbox events due now", f.due.clone());
        r.register(
            "holdpoint_notify_queue_retrying",
            "Outbox events that failed and wait for another attempt",
            f.retrying.clone(),
        );
        r.register(
            "holdpoint_notify_queue_dead",
            "Outbox events given up on",
            f.dead_rows.clone(),
        );
        r.register(
            "holdpoint_notify_queue_age_seconds",
            "Seconds the oldest due outbox event has waited",
            f.age.clone(),
        );
        r.register(
            "holdpoint_notify_endpoints_stopped",
            "Notification endpoints stopped for good (HTTP 410) until re-enabled",
            f.stopped.clone(),
        );
        f
    }
}

fn channel(channel: &str) -> ChannelLabels {
    ChannelLabels {
        channel: channel.to_owned(),
    }
}

impl Metrics {
    /// Records that `channel` took a notification `delay` after it was due
    /// (the delivery worker reports it; see
    /// `holdpoint_notify::DeliveryObserver`).
    pub fn notification_delivered(&self, channel_id: &str, delay: Duration) {
        let n = &self.inner.notify;
        n.deliveries.get_or_create(&channel(channel_id)).inc();
        n.delay.observe(delay.as_secs_f64());
    }

    /// Records a failed delivery to `channel`.
    pub fn notification_failed(&self, channel_id: &str) {
        self.inner.notify.failures.get_or_create(&channel(channel_id)).inc();
    }

    /// Records an outbox event of type `kind` given up on.
    pub fn notification_dead(&self, kind: &str) {
        let kind = EVENT_TYPES.iter().find(|k| **k == kind).copied().unwrap_or("other");
        self.inner.notify.dead.get_or_create(&TypeLabels { r#type: kind }).inc();
    }

    /// Records an outbox event of type `kind` that no channel takes: sent
    /// nowhere (a routing gap an operator should see), never counted as
    /// delivered.
    pub fn notification_unrouted(&self, kind: &str) {
        let kind = EVENT_TYPES.iter().find(|k| **k == kind).copied().unwrap_or("other");
        self.inner
            .notify
            .unrouted
            .get_or_create(&TypeLabels { r#type: kind })
            .inc();
    }

    /// Records that `channel`'s endpoint answered 410 and was stopped.
    pub fn notification_endpoint_stopped(&self, channel_id: &str) {
        self.inner.notify.stops.get_or_create(&channel(channel_id)).inc();
    }

    /// Sets the outbox gauges from the store's counts at `now` and the
    /// number of stopped endpoints (a scrape calls it).
    pub(crate) fn outbox(&self, stats: &OutboxStats, stopped: usize, now: chrono::DateTime<chrono::Utc>) {
        let n = &self.inner.notify;
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        n.due.set(gauge(stats.due));
        n.retrying.set(gauge(stats.retrying));
        n.dead_rows.set(gauge(stats.dead));
        n.stopped.set(i64::try_from(stopped).unwrap_or(i64::MAX));
        let age = stats
            .oldest_due
            .map_or(0.0, |t| (now - t).num_milliseconds().max(0) as f64 / 1000.0);
        n.age.set(age);
    }
}
