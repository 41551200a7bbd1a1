//! [`Readers`]: the connections the store reads on.
//!
//! A single-row read is a few microseconds of SQLite work, less than
//! handing it to another thread and back would cost, so it runs on the
//! caller's thread: on the writer's connection when that is free (see
//! `Writer::try_read`), else on an idle connection taken from here. Listings, which
//! may scan many rows, run on tokio's blocking pool. Reads on different
//! connections run in parallel (WAL readers do not block each other or the
//! writer).

use std::sync::{Arc, Mutex, MutexGuard};

use holdpoint::{Error, Result};
use rusqlite::Connection;

use crate::conn;
use crate::error::{closed, store_error};
use crate::options::SqliteStoreOptions;

/// The read connections of one store handle (shared by its clones).
pub(crate) struct Readers {
    /// Idle connections; `None` once closed.
    idle: Mutex<Option<Vec<Connection>>>,
    options: SqliteStoreOptions,
    /// The most idle connections kept.
    keep: usize,
}

impl Readers {
    /// Opens `count` (at least 1) connections, kept idle for reads; fails
    /// when the file cannot be opened.
    pub async fn open(options: &SqliteStoreOptions, count: usize) -> Result<Self> {
        let keep = count.max(1);
        let opening = options.clone();
        let conns = tokio::task::spawn_blocking(move || {
            (0..keep)
                .map(|_| conn::open(&opening))
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(|e| store_error(&format!("open {}", opening.path.display()), e))
        })
        .await
        .map_err(|e| Error::Unavailable(format!("sqlite store: opening read connections failed: {e}")))??;
        Ok(Readers {
            idle: Mutex::new(Some(conns)),
            options: options.clone(),
            keep,
        })
    }

    fn idle(&self) -> MutexGuard<'_, Option<Vec<Connection>>> {
        // Connections are only pushed and popped whole: a poisoned lock
        // still guards a usable list.
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `read` on this thread, on an idle connection (or a new one when
    /// all are in use); `UNAVAILABLE` once the store is closed. `what`
    /// names the read in errors.
    pub fn run<T>(&self, what: &str, read: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let taken = match self.idle().as_mut() {
            None => return Err(closed(what)),
            Some(idle) => idle.pop(),
        };
        let conn = match taken {
            Some(conn) => conn,
            None => conn::open(&self.options)
                .map_err(|e| store_error(&format!("{what}: open {}", self.options.path.display()), e))?,
        };
        let result = read(&conn);
        if let Some(idle) = self.idle().as_mut()
            && idle.len() < self.keep
        {
            idle.push(conn);
        }
        result
    }

    /// [`run`](Self::run) on tokio's blocking pool, for reads that may take
    /// long (listings).
    pub async fn run_blocking<T, F>(self: &Arc<Self>, what: &'static str, read: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let readers = Arc::clone(self);
        tokio::task::spawn_blocking(move || readers.run(what, read))
            .await
            .map_err(|e| Error::Internal(format!("sqlite store: {what}: the read panicked or was cancelled: {e}")))?
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.idle().is_none()
    }

    /// Closes the idle connections; reads in progress close theirs when
    /// they end, and later reads fail with `UNAVAILABLE`.
    pub async fn close(&self) {
        let Some(conns) = self.idle().take() else {
            return;
        };
        let closing = tokio::task::spawn_blocking(move || {
            for conn in conns {
                if let Err((_, e)) = conn.close() {
                    tracing::warn!(target: "holdpoint::store::sqlite", error = %e, "closing a read connection failed");
                }
            }
        });
        let _ = closing.await;
    }
}
