//! [`PostgresStoreOptions`]: which database, and how patient to be with it.

use std::str::FromStr;
use std::time::Duration;

use holdpoint::session::outbox::OutboxWrites;
use holdpoint::{Error, Result};
use sqlx::postgres::PgConnectOptions;

/// How to connect a [`PostgresStore`](crate::PostgresStore).
///
/// ```
/// use std::time::Duration;
/// use holdpoint_store_postgres::PostgresStoreOptions;
///
/// let options = PostgresStoreOptions::new("postgres://app@db.internal/holdpoint")?
///     .max_connections(20)
///     .lock_timeout(Duration::from_secs(5));
/// # Ok::<(), holdpoint::Error>(())
/// ```
#[derive(Clone)]
pub struct PostgresStoreOptions {
    pub(crate) connect: PgConnectOptions,
    pub(crate) max_connections: u32,
    pub(crate) acquire_timeout: Duration,
    pub(crate) lock_timeout: Duration,
    pub(crate) resync_interval: Duration,
    pub(crate) outbox_writes: OutboxWrites,
}

impl PostgresStoreOptions {
    /// Options for the database at `url` (`postgres://…` or `postgresql://…`,
    /// with libpq's parameters such as `sslmode`). Fails with
    /// `INVALID_ARGUMENT` when the URL does not parse; the message never
    /// repeats the URL, which may hold a password.
    pub fn new(url: &str) -> Result<Self> {
        let connect = PgConnectOptions::from_str(url)
            .map_err(|e| Error::InvalidArgument(format!("invalid PostgreSQL URL: {}", redacted(&e))))?;
        Ok(PostgresStoreOptions {
            connect,
            max_connections: 10,
            acquire_timeout: Duration::from_secs(10),
            lock_timeout: Duration::from_secs(10),
            resync_interval: Duration::from_secs(2),
            outbox_writes: OutboxWrites::All,
        })
    }

    /// Connections in the pool (at least 2: one more is kept for
    /// LISTEN); 10 unless changed.
    pub fn max_connections(mut self, max: u32) -> Self {
        self.max_connections = max.max(2);
        self
    }

    /// How long a call waits for a free connection before failing with
    /// `UNAVAILABLE`; 10 s unless changed.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// How long a save waits for another save of the same row to finish
    /// (PostgreSQL's `lock_timeout`) before failing with `UNAVAILABLE`;
    /// 10 s unless changed.
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// How often status watchers re-read their rows in case a notification
    /// was lost (a dropped connection) and to see stale `pending` rows turn
    /// `expired`; 2 s unless changed.
    pub fn resync_interval(mut self, interval: Duration) -> Self {
        self.resync_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// Which outbox rows this handle writes; [`OutboxWrites::All`] unless
    /// changed. A deployment with no notification channel writes only
    /// [`OutboxWrites::Timers`] (the rows that act); a handle opened later
    /// with `All` (a channel added) writes every change from then on.
    pub fn outbox_writes(mut self, writes: OutboxWrites) -> Self {
        self.outbox_writes = writes;
        self
    }
}

impl std::fmt::Debug for PostgresStoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // PgConnectOptions' own Debug would print the password.
        f.debug_struct("PostgresStoreOptions")
            .field("host", &self.connect.get_host())
            .field("port", &self.connect.get_port())
            .field("database", &self.connect.get_database())
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

/// The error's text, cut before anything that looks like a URL.
fn redacted(err: &sqlx::Error) -> String {
    let text = err.to_string();
    match text.find("://") {
        Some(at) => format!("{}…", &text[..at]),
        None => text,
    }
}
