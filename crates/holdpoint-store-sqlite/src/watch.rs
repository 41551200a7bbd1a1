//! Status watchers: one `tokio::sync::watch` channel per watched row.
//!
//! Writes through this store handle publish at once. Writes by other
//! processes (or other handles on the same file) are found by a poller, one
//! task per watched row, that re-reads the row's status columns every
//! `poll_interval` and stops when the row's last watcher is dropped. The
//! poller also turns a stale `pending` row into `expired`, which no write
//! announces.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::session::SnapshotStatus;
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;

use crate::read;
use crate::readers::Readers;

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

    /// A stream of `id`'s status starting at `current`; starts a poller
    /// for the row when it is the first watcher.
    pub fn subscribe(
        self: &Arc<Self>,
        readers: &Arc<Readers>,
        id: &str,
        current: SnapshotStatus,
        poll_interval: Duration,
    ) -> BoxStream<'static, SnapshotStatus> {
        let mut channels = self.lock();
        let rx = match channels.get(id) {
            Some(tx) => {
                tx.send_if_modified(|now| std::mem::replace(now, current) != current);
                tx.subscribe()
            }
            None => {
                let (tx, rx) = watch::channel(current);
                channels.insert(id.to_owned(), tx);
                tokio::spawn(poll(
                    Arc::clone(self),
                    Arc::clone(readers),
                    id.to_owned(),
                    poll_interval,
                ));
                rx
            }
        };
        WatchStream::new(rx).boxed()
    }

    /// Forgets `id`'s channel when nobody watches it any more; says whether
    /// it did (the poller then stops).
    fn retire_if_unwatched(&self, id: &str) -> bool {
        let mut channels = self.lock();
        match channels.get(id) {
            Some(tx) if tx.receiver_count() > 0 => false,
            _ => {
                channels.remove(id);
                true
            }
        }
    }

    /// Ends every watch of `id` (its row is gone).
    fn close(&self, id: &str) {
        self.lock().remove(id);
    }
}

async fn poll(watchers: Arc<Watchers>, readers: Arc<Readers>, id: String, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        if watchers.retire_if_unwatched(&id) {
            return;
        }
        if readers.is_closed() {
            watchers.close(&id);
            return;
        }
        match readers.run("poll a snapshot's status", |conn| read::status(conn, &id)) {
            Ok(Some(status)) => watchers.publish(&id, status),
            Ok(None) => {
                watchers.close(&id);
                return;
            }
            Err(err) => {
                tracing::warn!(target: "holdpoint::store::sqlite", snapshot_id = %id, error = %err, "status poll failed; retrying");
            }
        }
    }
}
