//! [`SqliteStore`]: the `SessionStore` over one SQLite file.
//!
//! The required trait's methods here, the capability traits' in `capable`:
//! each a few lines that hand the work to the writer or a reader; the SQL
//! and the batching live in the sibling modules.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::approval::{Grant, GrantQuery};
use holdpoint::session::outbox::hold_events;
use holdpoint::session::{
    AuditQuery, AuditRecord, AuditStore, Capabilities, GrantStore, OutboxEvent, OutboxLease, OutboxOutcome,
    OutboxQuery, OutboxStore, PruneOutcome, PruneRequest, PruneStore, ResumeClaim, SessionStore, Snapshot,
    SnapshotListing, SnapshotQuery, SnapshotStatus, SnapshotUpdate, WaitingCount, prepare_row,
};
use holdpoint::{Error, Result};
use holdpoint_store_sql::row;

use crate::files;
use crate::group::{Op, Writer};
use crate::options::SqliteStoreOptions;
use crate::read;
use crate::readers::Readers;
use crate::watch::Watchers;

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
/// and its commit (group commit): whoever finds the writer's connection
/// free runs every queued write in order, each validated before it writes, so a failed
/// update fails only its own write and every caller is answered after the
/// shared commit.
///
/// SQLite's calls are short, and a store call runs them on the caller's
/// thread: writes on the writer's connection (one batch, at most one
/// fsync; see group commit above), single-row reads on the writer's
/// connection when it is free (its page cache is the one that saw the last
/// write), else on an idle read connection
/// ([`SqliteStoreOptions::max_connections`] are kept). Listings,
/// and writes that must wait for another process's lock or queue behind a
/// batch, run on tokio's blocking pool.
///
/// Clones share the writer and the readers.
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
    readers: Arc<Readers>,
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
        // Missing folders and a missing file are created owner-only (see
        // `files`); existing ones keep their permissions.
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            files::create_dir(parent).map_err(|e| {
                Error::Unavailable(format!("sqlite store: cannot create folder {}: {e}", parent.display()))
            })?;
        }
        files::create_database(&path)
            .map_err(|e| Error::Unavailable(format!("sqlite store: cannot create {}: {e}", path.display())))?;
        if let Some(mode) = files::shared_bits(&path) {
            tracing::warn!(
                target: TARGET,
                path = %path.display(),
                mode = %format!("{mode:o}"),
                "the database file, which holds every tool input and output, is open to its group or others; `chmod 600` it (its -wal and -shm files follow)"
            );
        }
        // The writer opens the file first and brings its schema up to
        // date; the readers open it after.
        let watchers: Arc<Watchers> = Arc::default();
        let writer = Writer::start(&options, Arc::clone(&watchers)).await?;
        let readers = match Readers::open(&options, options.max_connections as usize).await {
            Ok(readers) => Arc::new(readers),
            Err(e) => {
                writer.close().await;
                return Err(e);
            }
        };
        tracing::debug!(target: TARGET, path = %path.display(), "opened");
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                readers,
                watchers,
                writer,
                options,
            }),
        })
    }

    /// Runs a single-row read on this thread: on the writer's connection
    /// when it is free (its page cache saw the last write), else on an idle
    /// read connection. `what` names the read in errors.
    fn read_row<T>(&self, what: &str, read: impl Fn(&rusqlite::Connection) -> Result<T>) -> Result<T> {
        match self.inner.writer.try_read(&read) {
            Some(found) => found,
            None => self.inner.readers.run(what, read),
        }
    }

    /// Runs a write of its own (outbox, grants, an audited save) on the
    /// writer's connection, inside a savepoint of a batch's transaction
    /// (a failure undoes what it wrote); its result once the batch
    /// committed.
    async fn outbox_write<T: Send + 'static>(
        &self,
        run: impl FnOnce(&rusqlite::Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let slot: Arc<std::sync::Mutex<Option<Result<T>>>> = Arc::default();
        let filled = Arc::clone(&slot);
        let op = Op::Outbox(Box::new(move |conn| {
            let result = run(conn);
            let failed = result.as_ref().err().cloned();
            *filled.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            failed.map_or(Ok(()), Err)
        }));
        self.inner.writer.write(op).await?;
        let result = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        result.unwrap_or_else(|| Err(Error::Internal("sqlite store: an outbox write did not run".into())))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.options.path
    }

    /// Closes the store (for every clone): lets the writes queued so far
    /// commit, then closes the writer's connection and the idle read
    /// connections (a read in progress closes its own when it ends). Later
    /// calls fail with `UNAVAILABLE`.
    pub async fn close(&self) {
        self.inner.writer.close().await;
        self.inner.readers.close().await;
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.options.path)
            .finish()
    }
}

mod capable;

#[async_trait]
impl SessionStore for SqliteStore {
    #[tracing::instrument(name = "store", skip_all, fields(op = "get_snapshot", store = "sqlite", snapshot_id = snapshot_id), err(Display))]
    async fn get_snapshot(&self, snapshot_id: &str) -> Result<Option<Snapshot>> {
        self.read_row("read a snapshot", |conn| read::snapshot(conn, snapshot_id))
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "get_latest_snapshot", store = "sqlite", session_id = session_id), err(Display))]
    async fn get_latest_snapshot(&self, session_id: &str) -> Result<Option<Snapshot>> {
        self.read_row("read a session's latest snapshot", |conn| {
            read::latest(conn, session_id)
        })
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
            let events = crate::outbox::columns(&hold_events(false, &row), self.inner.options.outbox_writes)?;
            let op = Op::Insert {
                row: Box::new(row),
                cols: Box::new(cols),
                events,
            };
            return self.inner.writer.write(op).await;
        };
        let id = id.to_owned();
        self.inner.writer.write(Op::Save { id, update }).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "insert_snapshot", store = "sqlite", snapshot_id = snapshot_id), err(Display))]
    async fn insert_snapshot(&self, snapshot_id: &str, row: Snapshot) -> Result<Snapshot> {
        // Built and encoded here, like a row under a minted id; the batch
        // writes it only if the id is free.
        let row = prepare_row(snapshot_id, None, row)?;
        let cols = row::Columns::of(&row)?;
        let events = crate::outbox::columns(&hold_events(false, &row), self.inner.options.outbox_writes)?;
        let op = Op::Insert {
            row: Box::new(row),
            cols: Box::new(cols),
            events,
        };
        self.inner
            .writer
            .write(op)
            .await?
            .ok_or_else(|| Error::Internal(format!("sqlite store: snapshot {snapshot_id} was not written")))
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "insert_snapshots", store = "sqlite", rows = rows.len()), err(Display))]
    async fn insert_snapshots(&self, rows: Vec<(String, Snapshot)>) -> Result<Vec<Snapshot>> {
        // Built and encoded here, as for one insert; the batch writes them
        // all or none, in one transaction of the group commit.
        let mut written = Vec::with_capacity(rows.len());
        let mut encoded = Vec::with_capacity(rows.len());
        for (id, row) in rows {
            let row = prepare_row(&id, None, row)?;
            let cols = row::Columns::of(&row)?;
            let events = crate::outbox::columns(&hold_events(false, &row), self.inner.options.outbox_writes)?;
            encoded.push((cols, events));
            written.push(row);
        }
        self.inner.writer.write(Op::InsertAll { rows: encoded }).await?;
        Ok(written)
    }

    /// The claim and its audit records in one transaction: both or neither.
    #[tracing::instrument(name = "store", skip_all, fields(op = "claim_resume", store = "sqlite", snapshot_id = %claim.snapshot_id, takeover = claim.takeover, records = audit.len()), err(Display))]
    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> Result<()> {
        let op = Op::Claim { claim, audit };
        self.inner.writer.write(op).await.map(|_| ())
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "watch_status", store = "sqlite", snapshot_id = snapshot_id), err(Display))]
    async fn watch_status(&self, snapshot_id: &str) -> Result<BoxStream<'static, SnapshotStatus>> {
        let current = self
            .inner
            .readers
            .run("read a snapshot's status", |conn| read::status(conn, snapshot_id))?;
        let Some(current) = current else {
            return Ok(futures::stream::empty().boxed());
        };
        Ok(self.inner.watchers.subscribe(
            &self.inner.readers,
            snapshot_id,
            current,
            self.inner.options.poll_interval,
        ))
    }

    /// Every capability: the handles are clones (they share the store).
    fn capabilities(&self) -> Capabilities {
        Capabilities::all(Arc::new(self.clone()))
    }
}

#[cfg(test)]
mod tests;
