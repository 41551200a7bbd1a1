//! Counters of the delivery worker, for a metrics layer to read, and the
//! [`DeliveryObserver`] hook a metrics layer (the server's `/metrics`)
//! plugs in to see each delivery as it happens.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Sees each delivery's end as it happens. `channel` is a channel's id
/// (`webhook:0`, `slack:1`, `email:0`: from the configuration, never a
/// secret); `kind` an event type. Calls must be cheap: they run on the
/// delivery path.
pub trait DeliveryObserver: Send + Sync {
    /// A channel took an event, `delay` after it was due (queue age).
    fn delivered(&self, channel: &str, delay: Duration);
    /// A delivery to `channel` failed (it is retried, or the row dies).
    fn failed(&self, channel: &str);
    /// A row was given up on after its last attempt.
    fn dead(&self, kind: &str);
    /// `channel`'s endpoint answered 410 and is stopped.
    fn stopped(&self, channel: &str) {
        let _ = channel;
    }
    /// An event of type `kind` was due and no channel takes it (its type
    /// and approvers match no channel's routing): nothing was sent, and
    /// the row is settled `cancelled`, never `delivered`.
    fn unrouted(&self, kind: &str) {
        let _ = kind;
    }
}

/// The worker's counters (monotonic, shared by clones of the worker).
#[derive(Debug, Default)]
pub struct NotifyMetrics {
    delivered: AtomicU64,
    failed: AtomicU64,
    dead: AtomicU64,
    cancelled: AtomicU64,
    unrouted: AtomicU64,
    claimed: AtomicU64,
    /// Milliseconds from an event's due time to its delivery, summed, and
    /// the largest seen (queue age).
    delay_ms_sum: AtomicU64,
    delay_ms_max: AtomicU64,
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MetricsSnapshot {
    /// Channel deliveries that succeeded.
    pub delivered: u64,
    /// Channel deliveries that failed (each retry counts).
    pub failed: u64,
    /// Events given up on.
    pub dead: u64,
    /// Timers cancelled because their hold was answered.
    pub cancelled: u64,
    /// Events no channel takes: sent nowhere, settled `cancelled`. Never
    /// counted in `delivered`.
    pub unrouted: u64,
    /// Rows claimed.
    pub claimed: u64,
    /// Sum of due-to-delivered delays, in milliseconds.
    pub delay_ms_sum: u64,
    /// The largest due-to-delivered delay, in milliseconds.
    pub delay_ms_max: u64,
}

impl NotifyMetrics {
    pub(crate) fn delivered(&self, delay_ms: u64) {
        self.delivered.fetch_add(1, Ordering::Relaxed);
        self.delay_ms_sum.fetch_add(delay_ms, Ordering::Relaxed);
        self.delay_ms_max.fetch_max(delay_ms, Ordering::Relaxed);
    }

    pub(crate) fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn dead(&self) {
        self.dead.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn cancelled(&self) {
        self.cancelled.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn unrouted(&self) {
        self.unrouted.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn claimed(&self, n: u64) {
        self.claimed.fetch_add(n, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MetricsSnapshot {
            delivered: get(&self.delivered),
            failed: get(&self.failed),
            dead: get(&self.dead),
            cancelled: get(&self.cancelled),
            unrouted: get(&self.unrouted),
            claimed: get(&self.claimed),
            delay_ms_sum: get(&self.delay_ms_sum),
            delay_ms_max: get(&self.delay_ms_max),
        }
    }
}
