//! [`PostgresStore`]: the `SessionStore` over a PostgreSQL pool.
//!
//! The required trait's methods here, the capability traits' in `capable`:
//! each a few lines that hand the work to the committer, a reader or a
//! sibling module holding the SQL.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use holdpoint::Result;
use holdpoint::session::{
    AuditQuery, AuditRecord, AuditStore, Capabilities, GrantStore, OutboxStore, PruneStore, ResumeClaim, SessionStore,
    Snapshot, SnapshotListing, SnapshotQuery, SnapshotStatus, SnapshotUpdate, WaitingCount, insert_refused,
    prepare_row,
};
use holdpoint_store_sql::row::{self, Columns};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tokio::sync::OnceCell;

use crate::error::store_error;
use crate::group::{Committer, Insert, Op};
use crate::latest::LatestReader;
use crate::listen::{self, Listening, Watchers};
use crate::options::PostgresStoreOptions;
use crate::{endpoints, grants, outbox, read, schema, write};
use holdpoint::approval::{Grant, GrantQuery};
use holdpoint::session::outbox::hold_events;
use holdpoint::session::{
    EndpointStop, OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, OutboxSettle, OutboxStats, PruneOutcome,
    PruneRequest,
};

const TARGET: &str = "holdpoint::store::postgres";

/// A [`SessionStore`] in PostgreSQL, for any number of replicas sharing
/// one database.
///
/// [`connect`](Self::connect) applies the migrations. Each
/// [`save_snapshot`](SessionStore::save_snapshot) of a given id is one
/// transaction that locks the row (`SELECT … FOR UPDATE`; for a row not yet
/// there, an advisory lock on its id) before running the update, so
/// concurrent saves of one id — from this process or another replica — run
/// one after another and each sees the last one's row. Saves under a
/// freshly minted id and first [`claim_resume`](SessionStore::claim_resume)s
/// go through a group commit: the writes queued while earlier batches are
/// in flight share one statement, so one commit (see `group.rs`); each
/// caller is answered after that commit. A claim takes only a row not yet
/// claimed: two resumes of one snapshot never both claim it (docs/reference.md §7). Status watchers hear changes from
/// every replica through LISTEN/NOTIFY, so an abort reaches the replica
/// running the turn.
///
/// Clones share one pool.
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    committer: Committer,
    reader: LatestReader,
    options: PostgresStoreOptions,
    watchers: Arc<Watchers>,
    listening: OnceCell<Listening>,
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://…`) with default
    /// options and applies the migrations.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(PostgresStoreOptions::new(url)?).await
    }

    /// Connects as `options` says and applies the migrations. Fails with
    /// `UNAVAILABLE` when the database cannot be reached, and
    /// `FAILED_PRECONDITION` when a newer Holdpoint migrated it.
    pub async fn connect_with(options: PostgresStoreOptions) -> Result<Self> {
        let lock_timeout = format!("{}ms", options.lock_timeout.as_millis().max(1));
        let connect = options.connect.clone().options([("lock_timeout", lock_timeout)]);
        let pool = PgPoolOptions::new()
            // One connection of the budget is the listener's own.
            .max_connections(options.max_connections.saturating_sub(1).max(1))
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect)
            .await
            .map_err(|e| store_error("connect", e))?;
        schema::migrate(&pool).await?;
        tracing::debug!(target: TARGET, host = options.connect.get_host(), "connected");
        let committer = Committer::new(pool.clone(), flushers(options.max_connections));
        let reader = LatestReader::new(pool.clone(), READERS);
        Ok(PostgresStore {
            inner: Arc::new(Inner {
                pool,
                committer,
                reader,
                options,
                watchers: Arc::default(),
                listening: OnceCell::new(),
            }),
        })
    }

    /// Closes the pool (for every clone), waiting for connections in use.
    /// Later calls fail with `UNAVAILABLE`.
    pub async fn close(&self) {
        self.inner.pool.close().await;
    }

    async fn ensure_listening(&self) -> Result<()> {
        let inner = &self.inner;
        inner
            .listening
            .get_or_try_init(|| {
                listen::start(
                    inner.options.connect.clone(),
                    inner.pool.clone(),
                    Arc::clone(&inner.watchers),
                    inner.options.resync_interval,
                )
            })
            .await
            .map(|_| ())
    }
}

/// How many group-commit statements may be in flight at once: two (one
/// when the pool has fewer than four connections). Fewer statements in
/// flight make bigger batches, so less work per write for the server
/// (BENCHMARKS.md, "PostgreSQL flushers"); the second keeps one claim
/// waiting for a row lock (up to `lock_timeout`) from holding up every
/// other write.
fn flushers(max_connections: u32) -> usize {
    let pool = usize::try_from(max_connections.saturating_sub(1)).unwrap_or(usize::MAX);
    (pool / 2).clamp(1, MAX_FLUSHERS)
}

/// See [`flushers`].
const MAX_FLUSHERS: usize = 2;

/// Batched `get_latest_snapshot` reads in flight at once: a read takes no
/// lock, so nothing can hold one up for long, and one at a time makes the
/// biggest batches.
const READERS: usize = 1;

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("options", &self.inner.options)
            .finish()
    }
}

mod capable;

#[async_trait]
impl SessionStore for PostgresStore {
    #[tracing::instrument(name = "store", skip_all, fields(op = "get_snapshot", store = "postgres", snapshot_id = snapshot_id), err(Display))]
    async fn get_snapshot(&self, snapshot_id: &str) -> Result<Option<Snapshot>> {
        read::snapshot(&self.inner.pool, snapshot_id).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "get_latest_snapshot", store = "postgres", session_id = session_id), err(Display))]
    async fn get_latest_snapshot(&self, session_id: &str) -> Result<Option<Snapshot>> {
        self.inner.reader.latest(session_id).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "save_snapshot", store = "postgres", snapshot_id = snapshot_id.unwrap_or_default()), err(Display))]
    async fn save_snapshot(&self, snapshot_id: Option<&str>, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
        let Some(id) = snapshot_id.filter(|id| !id.is_empty()) else {
            // A freshly minted id has no row to read or lock: the row is
            // built here and only its write is left, which the group commit
            // batches with the other writes queued meanwhile.
            let Some((row, cols)) = row::fresh_row(update)? else {
                return Ok(None);
            };
            let events = outbox::columns(&hold_events(false, &row), self.inner.options.outbox_writes)?;
            if !self
                .inner
                .committer
                .write(Op::Insert(Box::new(Insert { cols, events })))
                .await?
            {
                // A minted id that is taken: never write over that row.
                return Err(insert_refused(&row.snapshot_id));
            }
            tracing::debug!(target: TARGET, snapshot_id = %row.snapshot_id, status = row.status.as_str(), "saved");
            return Ok(Some(row));
        };
        let id = id.to_owned();
        let what = format!("save snapshot {id}");
        let mut tx = self.inner.pool.begin().await.map_err(|e| store_error(&what, e))?;
        let saved = write::save_in(&mut tx, &id, update, self.inner.options.outbox_writes).await?;
        if let Some(row) = &saved {
            tx.commit().await.map_err(|e| store_error(&what, e))?;
            tracing::debug!(target: TARGET, snapshot_id = %id, status = row.status.as_str(), "saved");
        }
        Ok(saved)
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "insert_snapshot", store = "postgres", snapshot_id = snapshot_id), err(Display))]
    async fn insert_snapshot(&self, snapshot_id: &str, row: Snapshot) -> Result<Snapshot> {
        // No row to read or lock: the insert joins the group commit, and
        // the statement writes it only if the id is free.
        let row = prepare_row(snapshot_id, None, row)?;
        let cols = Columns::of(&row)?;
        let events = outbox::columns(&hold_events(false, &row), self.inner.options.outbox_writes)?;
        if !self
            .inner
            .committer
            .write(Op::Insert(Box::new(Insert { cols, events })))
            .await?
        {
            return Err(insert_refused(snapshot_id));
        }
        tracing::debug!(target: TARGET, snapshot_id, status = row.status.as_str(), "inserted");
        Ok(row)
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "insert_snapshots", store = "postgres", rows = rows.len()), err(Display))]
    async fn insert_snapshots(&self, rows: Vec<(String, Snapshot)>) -> Result<Vec<Snapshot>> {
        let mut written = Vec::with_capacity(rows.len());
        let mut inserts = Vec::with_capacity(rows.len());
        for (id, row) in rows {
            let row = prepare_row(&id, None, row)?;
            let cols = Columns::of(&row)?;
            let events = outbox::columns(&hold_events(false, &row), self.inner.options.outbox_writes)?;
            inserts.push(Insert { cols, events });
            written.push(row);
        }
        if !crate::group::insert_all(&self.inner.pool, inserts).await? {
            let taken = written
                .iter()
                .map(|r| r.snapshot_id.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(holdpoint::Error::AlreadyExists(format!(
                "one of snapshots {taken} already exists; nothing was written"
            )));
        }
        Ok(written)
    }

    /// The claim and its audit records, both or neither: a first claim
    /// through the group commit, else in a transaction of its own (see
    /// `claim.rs`).
    #[tracing::instrument(name = "store", skip_all, fields(op = "claim_resume", store = "postgres", snapshot_id = %claim.snapshot_id, takeover = claim.takeover, records = audit.len()), err(Display))]
    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> Result<()> {
        let writes = self.inner.options.outbox_writes;
        crate::claim::claim(&self.inner.committer, &self.inner.pool, claim, &audit, writes).await
    }

    #[tracing::instrument(name = "store", skip_all, fields(op = "watch_status", store = "postgres", snapshot_id = snapshot_id), err(Display))]
    async fn watch_status(&self, snapshot_id: &str) -> Result<BoxStream<'static, SnapshotStatus>> {
        // LISTEN first, read second: a change committed after the read is
        // then sure to be heard.
        self.ensure_listening().await?;
        let ids = [snapshot_id.to_owned()];
        let Some(current) = read::statuses(&self.inner.pool, &ids).await?.remove(snapshot_id) else {
            return Ok(futures::stream::empty().boxed());
        };
        let stream = self.inner.watchers.subscribe(snapshot_id, current);
        // A notification dispatched between the read and the subscription
        // found no channel; read once more now that there is one.
        if let Some(now) = read::statuses(&self.inner.pool, &ids).await?.remove(snapshot_id) {
            self.inner.watchers.publish(snapshot_id, now);
        }
        Ok(stream)
    }

    /// Every capability: the handles are clones (they share the store).
    fn capabilities(&self) -> Capabilities {
        Capabilities::all(Arc::new(self.clone()))
    }
}
