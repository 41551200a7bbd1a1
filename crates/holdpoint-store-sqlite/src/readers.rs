//! [`Readers`]: connections kept open for the single-row reads.
//!
//! A checkout from sqlx's pool costs more than the read itself: the pool
//! returns a connection by spawning a task that pings it (a round trip to
//! the connection's worker thread). The reads on the approval path
//! (`get_snapshot`, `get_latest_snapshot`) therefore use connections of
//! their own, each behind a lock; listings and watchers keep the pool.

use std::sync::atomic::{AtomicUsize, Ordering};

use holdpoint::{Error, Result};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqliteConnection};
use tokio::sync::{Mutex, MutexGuard};

/// A few open connections for reads; `None` in a slot once closed.
pub(crate) struct Readers {
    slots: Vec<Mutex<Option<SqliteConnection>>>,
    next: AtomicUsize,
}

impl Readers {
    /// Opens `count` (at least 1) connections with `options`, each retried
    /// while the file is busy for up to `patience`.
    pub async fn open(
        options: &SqliteConnectOptions,
        count: usize,
        patience: std::time::Duration,
    ) -> std::result::Result<Self, sqlx::Error> {
        let mut slots = Vec::with_capacity(count.max(1));
        for _ in 0..count.max(1) {
            let conn = crate::store::patiently(patience, || options.connect()).await?;
            slots.push(Mutex::new(Some(conn)));
        }
        Ok(Readers {
            slots,
            next: AtomicUsize::new(0),
        })
    }

    /// A free connection, or the next one in turn once it is free;
    /// `UNAVAILABLE` after [`close`](Self::close).
    pub async fn get(&self, what: &str) -> Result<ReaderGuard<'_>> {
        let free = self.slots.iter().find_map(|slot| slot.try_lock().ok());
        let guard = match free {
            Some(guard) => guard,
            None => {
                let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
                match self.slots.get(i) {
                    Some(slot) => slot.lock().await,
                    None => return Err(closed(what)),
                }
            }
        };
        if guard.is_none() {
            return Err(closed(what));
        }
        Ok(ReaderGuard(guard))
    }

    /// Closes every connection (waiting for reads in progress).
    pub async fn close(&self) {
        for slot in &self.slots {
            if let Some(conn) = slot.lock().await.take()
                && let Err(e) = conn.close().await
            {
                tracing::warn!(target: "holdpoint::store::sqlite", error = %e, "closing a read connection failed");
            }
        }
    }
}

fn closed(what: &str) -> Error {
    Error::Unavailable(format!("sqlite store: {what}: the store is closed"))
}

/// A locked, open read connection.
pub(crate) struct ReaderGuard<'a>(MutexGuard<'a, Option<SqliteConnection>>);

impl ReaderGuard<'_> {
    /// The connection.
    pub fn conn(&mut self) -> Result<&mut SqliteConnection> {
        self.0
            .as_mut()
            .ok_or_else(|| Error::Unavailable("sqlite store: the store is closed".into()))
    }
}
