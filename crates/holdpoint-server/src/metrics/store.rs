//! The store timer: the observer ([`StoreObserver`]) that times every
//! operation of an observed store and counts its failures. The decorator
//! itself is the core's [`holdpoint::session::observe`], which wraps the
//! required trait and each capability the inner store has, and nothing
//! else.

use std::time::Instant;

use holdpoint::session::{StoreObserver, StoreOp};

use super::Metrics;

/// Times every operation of the store it observes.
pub(super) struct StoreTimer {
    metrics: Metrics,
}

impl StoreTimer {
    pub(super) fn new(metrics: Metrics) -> Self {
        StoreTimer { metrics }
    }
}

impl StoreObserver for StoreTimer {
    type Started = Instant;

    fn start(&self, _op: StoreOp) -> Instant {
        Instant::now()
    }

    fn finish(&self, op: StoreOp, started: Instant, error: Option<&holdpoint::Error>) {
        self.metrics.store_op(op.name, started.elapsed(), error);
    }
}
