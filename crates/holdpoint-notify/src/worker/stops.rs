//! Endpoints stopped for good (HTTP 410), shared through the store: a stop
//! one worker records holds for every replica and after a restart, and an
//! operator's re-enable reaches every worker with its next batch.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::Utc;
use holdpoint::session::{EndpointStop, OutboxStore};

use super::TARGET;
use crate::channel::Channel;

/// The stops as last read (channel → fingerprint of the stopped address).
#[derive(Default)]
pub(super) struct Stops {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    stopped: HashMap<String, String>,
    read_at: Option<Instant>,
}

impl Stops {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the store's stops again when the last read is older than
    /// `every` (zero: always). A failed read keeps the last one.
    pub(super) async fn refresh(&self, store: &dyn OutboxStore, every: Duration) {
        let fresh = self.lock().read_at.is_some_and(|t| t.elapsed() < every);
        if fresh {
            return;
        }
        match store.stopped_endpoints().await {
            Ok(stops) => {
                let mut state = self.lock();
                state.stopped = stops.into_iter().map(|s| (s.channel, s.fingerprint)).collect();
                state.read_at = Some(Instant::now());
            }
            Err(e) => {
                self.lock().read_at = Some(Instant::now());
                tracing::debug!(target: TARGET, error = %e, "reading the stopped endpoints failed");
            }
        }
    }

    /// Whether `channel`'s endpoint is stopped: a stop of its id applies
    /// only while it still points at the address that refused.
    pub(super) fn is_stopped(&self, channel: &dyn Channel) -> bool {
        self.lock()
            .stopped
            .get(channel.id())
            .is_some_and(|f| *f == channel.fingerprint())
    }

    /// Stops `channel` here and in the store.
    pub(super) async fn stop(&self, store: &dyn OutboxStore, channel: &dyn Channel, reason: &str) {
        let stop = EndpointStop {
            channel: channel.id().to_owned(),
            fingerprint: channel.fingerprint(),
            reason: reason.to_owned(),
            stopped_at: Utc::now(),
        };
        self.lock()
            .stopped
            .insert(stop.channel.clone(), stop.fingerprint.clone());
        if let Err(e) = store.stop_endpoint(stop).await {
            tracing::warn!(target: TARGET, error = %e, "recording the stopped endpoint failed; it stays stopped in this process");
        }
    }
}
