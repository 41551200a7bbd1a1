//! [`SqliteStore`]: the `SessionStore` over one SQLite file.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::session::{
    AuditQuery, AuditRecord, ResumeClaim, SessionStore, Snapshot, SnapshotQuery, SnapshotStatus, SnapshotUpdate, row,
};
use holdpoint::{Error, Result};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{ConnectOptions, SqlitePool};

use crate::error::{Kind, classify, store_error};
use crate::group::{Op, Writer};
use crate::options::SqliteStoreOptions;
use crate::readers::Readers;
use crate::watch::Watchers;
use crate::{read, schema};

const TARGET: &str = "holdpoint::store::sqlite";

/// A [`SessionStore`] in one SQLite file: the embedded default.
///
/// The file is created with its schema on first open and runs in WAL mode
/// with `synchronous=FULL` unless [`SqliteStoreOptions`] says otherwise, so
/// a save that returned is on disk. [`save_snapshot`](SessionStore::save_snapshot)
/// runs its update inside a `BEGIN IMMEDIATE` transaction, which holds the
/// database's write lock from the first read: saves are atomic across
/// handles, pools and processes sharing the file.
///
/// Writes made at the same time through one handle share a transaction
/// and its commit (group commit): one writer task runs them in order on a
/// connection of its own, each validated before it writes, so a failed
/// update fails only its own write and every caller is answered after the
/// shared commit.
///
/// Clones share one connection pool (for reads) and one writer.
///
/// ```
/// use holdpoint::session::{SessionState, SessionStore, Snapshot};
/// use holdpoint_store_sqlite::SqliteStore;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = SqliteStore::open(dir.path().join("sessions.db")).await?;
/// let saved = store
///     .save_snapshot(None, Box::new(|_| Ok(Some(Snapshot::new(SessionState::new("s1"))))))
///     .await?
///     .expect("written");
/// let read = store.get_snapshot(&saved.snapshot_id).await?.expect("present");
/// assert_eq!(read, saved);
/// # Ok::<(), holdpoint::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: SqlitePool,
    readers: Readers,
    watchers: Arc<Watchers>,
    writer: Writer,
    options: SqliteStoreOptions,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path` with default options.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(SqliteStoreOptions::new(path)).await
    }

    /// Opens (creating if needed) the database file `options` names.
    ///
    /// Fails with `UNAVAILABLE` when the file cannot be opened or created,
    /// and `FAILED_PRECONDITION` when a newer Holdpoint migrated it.
    pub async fn open_with(options: SqliteStoreOptions) -> Result<Self> {
        let path = options.path.clone();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                Error::Unavailable(format!("sqlite store: cannot create folder {}: {e}", parent.display()))
            })?;
        }
        let connect = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(options.synchronous.to_sqlx())
            .busy_timeout(options.busy_timeout);
        // The pool serves listings and watchers (single-row reads have
        // connections of their own, see `Readers`). A pooled SQLite connection is a file
        // handle that cannot drop like a network socket, so it is not
        // pinged (a round trip to its worker thread) on every checkout.
        let patience = options.busy_timeout;
        let pool = patiently(patience, || {
            SqlitePoolOptions::new()
                .max_connections(options.max_connections)
                .acquire_timeout(options.busy_timeout + std::time::Duration::from_secs(5))
                .test_before_acquire(false)
                .connect_with(connect.clone())
        })
        .await
        .map_err(|e| store_error(&format!("open {}", path.display()), e))?;
        schema::migrate(&pool).await?;
        // Writes go through one connection of the writer's own.
        let writer_conn = patiently(patience, || connect.connect())
            .await
            .map_err(|e| store_error(&format!("open {}", path.display()), e))?;
        let readers = Readers::open(&connect, options.max_connections as usize, patience)
            .await
            .map_err(|e| store_error(&format!("open {}", path.display()), e))?;
        tracing::debug!(target: TARGET, path = %path.display(), "opened");
        let watchers: Arc<Watchers> = Arc::default();
        let writer = Writer::spawn(writer_conn, connect, Arc::clone(&watchers));
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                pool,
                readers,
                watchers,
                writer,
                options,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.options.path
    }

    /// Closes the store (for every clone): lets the writes queued so far
    /// finish, then closes the writer's connection and the pool, waiting
    /// for connections in use. Later calls fail with `UNAVAILABLE`.
    pub async fn close(&self) {
        self.inner.writer.close().await;
        self.inner.readers.close().await;
        self.inner.pool.close().await;
    }
}

/// Runs `open` (a connection or a pool being opened) again while SQLite
/// answers busy, for up to `patience`. Opening runs pragmas (the switch to
/// WAL) that SQLite's busy handler does not always wait for: two handles
/// creating one new file at once can see `SQLITE_BUSY` straight away.
pub(crate) async fn patiently<T, F, Fut>(
    patience: std::time::Duration,
    mut open: F,
) -> std::result::Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, sqlx::Error>>,
{
    let started = std::time::Instant::now();
    loop {
        match open().await {
            Err(e) if classify(&e) == Kind::Busy && started.elapsed() < patience => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            done => return done,
        }
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.options.path)
            .finish()
    }
}

#[async_trait]
impl SessionStore for SqliteStore {
    #[tracing::instrument(name = "store", skip_all, fields(op = "get_snapshot", store = "sqlite", snapshot_id = snapshot_id), err(Display))]
    async fn get_snapshot(&self, snapshot_id: &str) -> Result<Option<Snapshot>> {
        let mut reader = self.inner.readers.get("read a snapshot").await?;
        read::snapshot(reader.conn()?, snapshot_id).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "get_latest_snapshot", store = "sqlite", session_id = session_id), err(Display))]
    async fn get_latest_snapshot(&self, session_id: &str) -> Result<Option<Snapshot>> {
        let mut reader = self.inner.readers.get("read a session's latest snapshot").await?;
        read::latest(reader.conn()?, session_id).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "save_snapshot", store = "sqlite", snapshot_id = snapshot_id.unwrap_or_default()), err(Display))]
    async fn save_snapshot(&self, snapshot_id: Option<&str>, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
        let Some(id) = snapshot_id.filter(|id| !id.is_empty()) else {
            // A freshly minted id has no row to read: the row is built and
            // encoded here, in the caller's task, and the writer only writes
            // it (its batch stays short and serial work small).
            let Some((row, cols)) = row::fresh_row(update)? else {
                return Ok(None);
            };
            let op = Op::Insert {
                row: Some(Box::new(row)),
                cols: Box::new(cols),
            };
            return self.inner.writer.write(op).await;
        };
        let id = id.to_owned();
        self.inner.writer.write(Op::Save { id, update }).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "watch_status", store = "sqlite", snapshot_id = snapshot_id), err(Display))]
    async fn watch_status(&self, snapshot_id: &str) -> Result<BoxStream<'static, SnapshotStatus>> {
        let Some(current) = read::status(&self.inner.pool, snapshot_id).await? else {
            return Ok(futures::stream::empty().boxed());
        };
        Ok(self
            .inner
            .watchers
            .subscribe(&self.inner.pool, snapshot_id, current, self.inner.options.poll_interval))
    }

    #[tracing::instrument(
        name = "store",
        skip_all,
        fields(op = "list_snapshots", store = "sqlite"),
        err(Display)
    )]
    async fn list_snapshots(&self, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
        read::list(&self.inner.pool, query).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "append_audit", store = "sqlite", records = records.len()), err(Display))]
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.inner.writer.write(Op::Audit { records }).await.map(|_| ())
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "list_audit", store = "sqlite"), err(Display))]
    async fn list_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        read::audit(&self.inner.pool, query).await
    }

    /// The claim and its audit records in one transaction: both or neither.
    #[tracing::instrument(name = "store", skip_all, fields(op = "claim_resume", store = "sqlite", snapshot_id = %claim.snapshot_id, takeover = claim.takeover, records = audit.len()), err(Display))]
    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> Result<()> {
        let op = Op::Claim { claim, audit };
        self.inner.writer.write(op).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Synchronous;

    async fn settings(store: &SqliteStore) -> (String, i64) {
        let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&store.inner.pool)
            .await
            .unwrap();
        let sync: i64 = sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&store.inner.pool)
            .await
            .unwrap();
        (journal, sync)
    }

    #[tokio::test]
    async fn wal_and_full_sync_by_default_and_configurable() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("a.db")).await.unwrap();
        assert_eq!(settings(&store).await, ("wal".to_owned(), 2));
        let options = SqliteStoreOptions::new(dir.path().join("b.db")).synchronous(Synchronous::Normal);
        let store = SqliteStore::open_with(options).await.unwrap();
        assert_eq!(settings(&store).await, ("wal".to_owned(), 1));
    }
}
