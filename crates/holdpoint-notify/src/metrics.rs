//! Counters of the delivery worker, for a metrics layer to read.

use std::sync::atomic::{AtomicU64, Ordering};

/// The worker's counters (monotonic, shared by clones of the worker).
#[derive(Debug, Default)]
pub struct NotifyMetrics {
    delivered: AtomicU64,
    failed: AtomicU64,
    dead: AtomicU64,
    cancelled: AtomicU64,
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
            claimed: get(&self.claimed),
            delay_ms_sum: get(&self.delay_ms_sum),
            delay_ms_max: get(&self.delay_ms_max),
        }
    }
}
