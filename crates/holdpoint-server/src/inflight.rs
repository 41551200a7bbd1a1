//! [`Turns`]: the tracker of the turns in flight.
//!
//! Every turn the server starts holds a [`TurnGuard`] until the agent has
//! written its result, even when the caller went away mid-turn, and a
//! detached run holds one until its snapshot settles. Graceful shutdown
//! ([`serve`](crate::serve)) marks the tracker closing, which long-lived
//! connections watch, and waits for the guards.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

struct TurnsInner {
    running: AtomicUsize,
    idle: Notify,
    closing: watch::Sender<bool>,
}

/// Counts the turns in flight and tells long-lived connections when the
/// server is closing.
#[derive(Clone)]
pub struct Turns {
    inner: Arc<TurnsInner>,
}

impl std::fmt::Debug for Turns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turns")
            .field("running", &self.running())
            .field("closing", &self.is_closing())
            .finish()
    }
}

impl Default for Turns {
    fn default() -> Self {
        Turns {
            inner: Arc::new(TurnsInner {
                running: AtomicUsize::new(0),
                idle: Notify::new(),
                closing: watch::channel(false).0,
            }),
        }
    }
}

/// Held while a turn runs; dropping it marks the turn finished.
#[derive(Debug)]
pub(crate) struct TurnGuard {
    turns: Turns,
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        if self.turns.inner.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.turns.inner.idle.notify_waiters();
        }
    }
}

impl Turns {
    pub(crate) fn begin(&self) -> TurnGuard {
        self.inner.running.fetch_add(1, Ordering::SeqCst);
        TurnGuard { turns: self.clone() }
    }

    /// How many turns are in flight.
    pub fn running(&self) -> usize {
        self.inner.running.load(Ordering::SeqCst)
    }

    /// Whether shutdown has begun.
    pub fn is_closing(&self) -> bool {
        *self.inner.closing.borrow()
    }

    /// Begins shutdown: `/healthz` answers 503 and WebSocket connections
    /// finish their current turn, send their output and close.
    pub fn close(&self) {
        self.inner.closing.send_replace(true);
    }

    pub(crate) fn closing(&self) -> watch::Receiver<bool> {
        self.inner.closing.subscribe()
    }

    /// Waits until no turn is in flight, at most `timeout`. Returns whether
    /// it got there.
    pub async fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.inner.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.running() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.running() == 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_for_guards() {
        let turns = Turns::default();
        assert!(turns.wait_idle(Duration::from_millis(1)).await);
        let guard = turns.begin();
        assert!(!turns.wait_idle(Duration::from_millis(20)).await);
        let t = turns.clone();
        let waiter = tokio::spawn(async move { t.wait_idle(Duration::from_secs(5)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(guard);
        assert!(waiter.await.unwrap());
        assert_eq!(turns.running(), 0);
    }
}
