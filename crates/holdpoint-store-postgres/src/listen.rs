//! Status watchers over LISTEN/NOTIFY.
//!
//! A trigger announces every status change of an existing row on
//! [`CHANNEL`] at commit (see `migrations/0002_cheaper_writes.sql`),
//! whichever replica wrote it; an inserted row is not announced, since
//! nobody can watch a row before it exists. The first watcher of a store
//! handle starts two tasks: a listener on a connection of its own that
//! forwards notifications, and a dispatcher that publishes them to the
//! watched rows' `tokio::sync::watch` channels. The dispatcher
//! also re-reads every watched row each `resync_interval` and after the
//! listener's connection was lost, since notifications sent meanwhile are
//! gone, and a stale `pending` row turns `expired` without any write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::Result;
use holdpoint::session::SnapshotStatus;
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;
use tokio_stream::wrappers::WatchStream;

use crate::error::store_error;
use crate::read;

/// The notification channel.
pub(crate) const CHANNEL: &str = "holdpoint_snapshot_status";

const TARGET: &str = "holdpoint::store::postgres";

/// The watch channels of one store handle, by snapshot id.
#[derive(Default)]
pub(crate) struct Watchers {
    channels: Mutex<HashMap<String, watch::Sender<SnapshotStatus>>>,
}

impl Watchers {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, watch::Sender<SnapshotStatus>>> {
        // Each critical section leaves the map consistent, so a poisoned
        // lock (a panicking thread) is safe to keep using.
        self.channels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes `status` for `id` if anyone watches it.
    pub fn publish(&self, id: &str, status: SnapshotStatus) {
        if let Some(tx) = self.lock().get(id) {
            tx.send_if_modified(|current| std::mem::replace(current, status) != status);
        }
    }

    /// A stream of `id`'s status, starting at `current`.
    pub fn subscribe(&self, id: &str, current: SnapshotStatus) -> BoxStream<'static, SnapshotStatus> {
        let mut channels = self.lock();
        let rx = match channels.get(id) {
            Some(tx) => {
                tx.send_if_modified(|now| std::mem::replace(now, current) != current);
                tx.subscribe()
            }
            None => {
                let (tx, rx) = watch::channel(current);
                channels.insert(id.to_owned(), tx);
                rx
            }
        };
        WatchStream::new(rx).boxed()
    }

    /// Drops channels nobody listens to; returns the ids still watched.
    fn watched(&self) -> Vec<String> {
        let mut channels = self.lock();
        channels.retain(|_, tx| tx.receiver_count() > 0);
        channels.keys().cloned().collect()
    }

    /// Ends every watch of `id` (its row is gone).
    fn close(&self, id: &str) {
        self.lock().remove(id);
    }
}

/// The listener and dispatcher tasks; dropping this stops them.
pub(crate) struct Listening {
    tasks: [AbortHandle; 2],
}

impl Drop for Listening {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

enum Event {
    Notified(String),
    Lost,
}

/// LISTENs on [`CHANNEL`] and starts the tasks. Returns once LISTEN is in
/// effect, so no change committed after this returns is missed.
pub(crate) async fn start(
    connect: PgConnectOptions,
    pool: PgPool,
    watchers: Arc<Watchers>,
    resync_interval: Duration,
) -> Result<Listening> {
    // A pool of its own: LISTEN holds its connection for good, and the
    // listener reconnects through it.
    let listen_pool = PgPoolOptions::new()
        .max_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_lazy_with(connect);
    let err = |e| store_error("listen for status changes", e);
    let mut listener = PgListener::connect_with(&listen_pool).await.map_err(err)?;
    listener.listen(CHANNEL).await.map_err(err)?;
    let (tx, rx) = mpsc::unbounded_channel();
    let listen = tokio::spawn(listen_loop(listener, tx)).abort_handle();
    let dispatch = tokio::spawn(dispatch_loop(rx, pool, watchers, resync_interval)).abort_handle();
    Ok(Listening {
        tasks: [listen, dispatch],
    })
}

async fn listen_loop(mut listener: PgListener, tx: mpsc::UnboundedSender<Event>) {
    loop {
        let event = match listener.try_recv().await {
            Ok(Some(note)) => Event::Notified(note.payload().to_owned()),
            Ok(None) => {
                tracing::warn!(target: TARGET, "status listener lost its connection; reconnecting");
                Event::Lost
            }
            Err(err) => {
                tracing::warn!(target: TARGET, error = %err, "status listener failed; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                Event::Lost
            }
        };
        if tx.send(event).is_err() {
            return;
        }
    }
}

async fn dispatch_loop(
    mut rx: mpsc::UnboundedReceiver<Event>,
    pool: PgPool,
    watchers: Arc<Watchers>,
    resync_interval: Duration,
) {
    let mut tick = tokio::time::interval(resync_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            event = rx.recv() => match event {
                Some(Event::Notified(payload)) => {
                    if let Some((status, id)) = parse_payload(&payload) {
                        watchers.publish(id, status);
                    }
                }
                Some(Event::Lost) => resync(&pool, &watchers).await,
                None => return,
            },
            _ = tick.tick() => resync(&pool, &watchers).await,
        }
    }
}

/// Re-reads every watched row and publishes its status.
async fn resync(pool: &PgPool, watchers: &Watchers) {
    let ids = watchers.watched();
    if ids.is_empty() {
        return;
    }
    match read::statuses(pool, &ids).await {
        Ok(found) => {
            for id in &ids {
                match found.get(id) {
                    Some(status) => watchers.publish(id, *status),
                    None => watchers.close(id),
                }
            }
        }
        Err(err) => tracing::warn!(target: TARGET, error = %err, "status re-read failed; retrying"),
    }
}

/// `"STATUS\tID"` as the trigger writes it.
fn parse_payload(payload: &str) -> Option<(SnapshotStatus, &str)> {
    let (status, id) = payload.split_once('\t')?;
    let status = serde_json::from_value(serde_json::Value::String(status.to_owned())).ok()?;
    Some((status, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_parse() {
        assert_eq!(
            parse_payload("aborting\tab\tc"),
            Some((SnapshotStatus::Aborting, "ab\tc"))
        );
        assert_eq!(parse_payload("nonsense\tx"), None);
        assert_eq!(parse_payload("pending"), None);
    }
}
