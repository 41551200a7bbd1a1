//! Group commit: writes queued at the same time through one store handle
//! run as one batch, in one `BEGIN IMMEDIATE` transaction with one commit
//! (so one fsync under `synchronous=FULL`).
//!
//! Each write in a batch runs in order against the rows as the transaction
//! sees them (so a claim queued behind another claim of the same row sees
//! it claimed), and validates before writing: a write whose update fails
//! has written nothing, and only its caller hears the error. A caller is
//! answered only after the batch committed, so a save that returned `Ok` is
//! durable. A failure of the transaction itself (cannot begin, cannot
//! commit, a statement failed) fails every write of the batch; none of them
//! is visible.
//!
//! Who runs a batch: the caller that finds the writer's connection free
//! takes it and runs what is queued, itself included, on its own thread
//! (SQLite's calls are short: one batch is at most one fsync). Handing the
//! work to another thread and back costs more than the work on a small
//! machine (BENCHMARKS.md, "SQLite group commit"). At most
//! one runtime thread at a time runs a batch. Callers that arrive
//! meanwhile queue and wait; when the
//! batch ends with writes queued behind it, or the database is locked by
//! another handle or process (a wait of up to the busy timeout), the rest
//! runs on tokio's blocking pool instead, so no runtime thread waits for
//! another process.
//!
//! The queue, the leader hand-off and the batch transaction uphold one
//! lock's invariants together and stay in this file; what each write does
//! inside the transaction is in [`apply`].

mod apply;
mod claim;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use holdpoint::session::outbox::OutboxWrites;
use holdpoint::session::{AuditRecord, ResumeClaim, Snapshot, SnapshotUpdate};
use holdpoint::{Error, Result};
use holdpoint_store_sql::outbox::OutboxColumns;
use holdpoint_store_sql::row::Columns;
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::error::{Kind, classify, closed, store_error};
use crate::options::SqliteStoreOptions;
use crate::watch::Watchers;
use crate::{conn, schema};
use apply::{Fail, apply};

/// Runs `update` on row `id` and, when it writes a row, writes it with
/// `audit` and the outbox rows of a new hold, all or nothing inside the
/// caller's transaction (see `AuditStore::save_snapshot_audited`): the
/// batch's own save with records.
pub(crate) fn save_audited(
    conn: &Connection,
    id: &str,
    update: SnapshotUpdate,
    audit: &[AuditRecord],
    writes: OutboxWrites,
) -> Result<Option<Snapshot>> {
    apply::save(conn, id, update, audit, writes).map_err(|(Fail::Caller(e) | Fail::Batch(e))| e)
}

const TARGET: &str = "holdpoint::store::sqlite";

/// The most writes one transaction carries.
const MAX_BATCH: usize = 256;

/// One queued write.
pub(crate) enum Op {
    /// `save_snapshot`: run `update` on row `id` and write what it returns.
    Save { id: String, update: SnapshotUpdate },
    /// `save_snapshot` under a freshly minted id, or `insert_snapshot`:
    /// there is no row to read, so the caller built and encoded the row
    /// already; only the write is left for the batch, and it writes only if
    /// no row has the id (else the caller hears `FAILED_PRECONDITION`).
    /// `row` is what the caller hears once written; `events` are its
    /// outbox rows, written only with it.
    Insert {
        row: Box<Snapshot>,
        cols: Box<Columns>,
        events: Vec<OutboxColumns>,
    },
    /// `insert_snapshots`: insert every row (with its outbox rows) only if
    /// no row has any of their ids, inside a savepoint: all or none. The
    /// caller keeps the rows it hears back.
    InsertAll { rows: Vec<(Columns, Vec<OutboxColumns>)> },
    /// `claim_resume`: claim row `id` and append `audit`, both or neither.
    Claim {
        claim: ResumeClaim,
        audit: Vec<AuditRecord>,
    },
    /// `append_audit`.
    Audit { records: Vec<AuditRecord> },
    /// An outbox operation, run inside a savepoint (a failure undoes what
    /// it wrote and fails only its caller). It answers its caller itself;
    /// the batch's reply carries only a failure of the batch.
    Outbox(OutboxRun),
}

/// An outbox operation of [`Op::Outbox`].
pub(crate) type OutboxRun = Box<dyn FnOnce(&Connection) -> Result<()> + Send>;

/// What one write's caller hears.
type Reply = oneshot::Sender<Result<Option<Snapshot>>>;

struct Job {
    op: Op,
    reply: Reply,
}

/// The writes of one store handle: its queue and its connection.
pub(crate) struct Writer {
    shared: Arc<Shared>,
}

struct Shared {
    queue: Mutex<VecDeque<Job>>,
    /// The connection; `None` once closed. Whoever holds this lock runs
    /// batches.
    conn: Mutex<Option<Connection>>,
    options: SqliteStoreOptions,
    watchers: Arc<Watchers>,
}

/// How long a batch run on a runtime thread waits for the database's write
/// lock before it moves to the blocking pool.
const INLINE_PATIENCE: Duration = Duration::ZERO;

impl Writer {
    /// Opens the writer's connection and brings the schema up to date (on
    /// the blocking pool). Fails when the file cannot be opened or migrated.
    pub async fn start(options: &SqliteStoreOptions, watchers: Arc<Watchers>) -> Result<Self> {
        let opening = options.clone();
        let conn = tokio::task::spawn_blocking(move || {
            let path = opening.path.display().to_string();
            let mut conn = conn::open(&opening).map_err(|e| store_error(&format!("open {path}"), e))?;
            schema::migrate(&mut conn)?;
            Ok::<_, Error>(conn)
        })
        .await
        .map_err(|e| Error::Unavailable(format!("sqlite store: opening the writer's connection failed: {e}")))??;
        Ok(Writer {
            shared: Arc::new(Shared {
                queue: Mutex::new(VecDeque::new()),
                conn: Mutex::new(Some(conn)),
                options: options.clone(),
                watchers,
            }),
        })
    }

    /// Queues `op`, sees that a batch runs it, and waits for that batch to
    /// commit.
    pub async fn write(&self, op: Op) -> Result<Option<Snapshot>> {
        let (reply, answer) = oneshot::channel();
        self.shared.queue().push_back(Job { op, reply });
        Shared::run_here(&self.shared);
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }

    /// Runs `read` on the writer's connection if it is free right now, on
    /// this thread; `None` when a batch holds it (or the store is closed).
    /// Right after a write this connection's page cache is the only warm
    /// one: another connection must first drop its cache and read the
    /// changed pages again.
    pub fn try_read<T>(&self, read: impl FnOnce(&Connection) -> T) -> Option<T> {
        let result = {
            let slot = self.shared.conn.try_lock().ok()?;
            let conn = slot.as_ref().filter(|c| c.is_autocommit())?;
            read(conn)
        };
        // Not in this read: writes queued meanwhile run elsewhere.
        Shared::let_go(&self.shared);
        Some(result)
    }

    /// Lets the writes queued so far finish, closes the connection; later
    /// writes fail with `UNAVAILABLE`.
    pub async fn close(&self) {
        let shared = Arc::clone(&self.shared);
        let closing = tokio::task::spawn_blocking(move || {
            let mut slot = shared.lock_conn();
            if let Some(conn) = slot.as_mut() {
                shared.drain(conn, shared.options.busy_timeout);
            }
            if let Some(conn) = slot.take()
                && let Err((_, e)) = conn.close()
            {
                tracing::warn!(target: TARGET, error = %e, "closing the writer's connection failed");
            }
            drop(slot);
            // Writes queued after the close hear that the writer stopped.
            shared.queue().clear();
        });
        let _ = closing.await;
    }
}

fn stopped() -> Error {
    closed("write")
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, VecDeque<Job>> {
        // Every critical section leaves the queue whole: a poisoned lock
        // (a panic elsewhere) still guards a usable queue.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_conn(&self) -> MutexGuard<'_, Option<Connection>> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one batch of the queue's writes on this thread if the
    /// connection is free, without waiting for another handle's lock;
    /// writes left in the queue (queued behind the batch, or the database
    /// was busy) go to the blocking pool.
    fn run_here(shared: &Arc<Self>) {
        let mut slot = match shared.conn.try_lock() {
            Ok(slot) => slot,
            // Whoever holds the connection runs our write, or sees it in
            // the queue after letting go of the connection.
            Err(TryLockError::WouldBlock) => return,
            // A panic while it was held (updates' panics are caught; this
            // would be SQLite's or ours): the connection is still sound, any
            // transaction left open is rolled back by the next batch.
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        };
        let Some(conn) = slot.as_mut() else {
            // Closed: dropping the replies tells the callers.
            shared.queue().clear();
            return;
        };
        let jobs = shared.take_batch();
        if !jobs.is_empty()
            && let Err(jobs) = shared.run_batch(conn, jobs, INLINE_PATIENCE)
        {
            // Busy: the batch goes back to the head of the queue, for the
            // blocking pool to wait with.
            let mut queue = shared.queue();
            for job in jobs.into_iter().rev() {
                queue.push_front(job);
            }
        }
        drop(slot);
        Self::let_go(shared);
    }

    /// Called after letting go of the connection taken with `try_lock`: a
    /// write that queued meanwhile found it taken and left itself to the
    /// holder, so whatever is queued now goes to the blocking pool.
    fn let_go(shared: &Arc<Self>) {
        if !shared.queue().is_empty() {
            Self::hand_off(shared);
        }
    }

    /// Runs the queue's writes on tokio's blocking pool until it is empty.
    fn hand_off(shared: &Arc<Self>) {
        let shared = Arc::clone(shared);
        tokio::task::spawn_blocking(move || {
            loop {
                {
                    let mut slot = shared.lock_conn();
                    match slot.as_mut() {
                        Some(conn) => shared.drain(conn, shared.options.busy_timeout),
                        None => shared.queue().clear(),
                    }
                }
                if shared.queue().is_empty() {
                    return;
                }
            }
        });
    }

    /// Runs batches until the queue is empty, each waiting up to `patience`
    /// for the write lock (a batch that still finds it busy fails).
    fn drain(&self, conn: &mut Connection, patience: Duration) {
        loop {
            let jobs = self.take_batch();
            if jobs.is_empty() {
                return;
            }
            if let Err(jobs) = self.run_batch(conn, jobs, patience) {
                // Still busy after the whole busy timeout: give up on it.
                let err = Error::Unavailable(format!(
                    "sqlite store: write: the database stayed locked by another writer for {patience:?}; retry later"
                ));
                for job in jobs {
                    let _ = job.reply.send(Err(err.clone()));
                }
            }
        }
    }

    fn take_batch(&self) -> Vec<Job> {
        let mut queue = self.queue();
        let n = queue.len().min(MAX_BATCH);
        queue.drain(..n).collect()
    }

    /// Runs `jobs` as one batch and answers their callers; gives them back
    /// unanswered when the database stayed locked for `patience`.
    fn run_batch(
        &self,
        conn: &mut Connection,
        jobs: Vec<Job>,
        patience: Duration,
    ) -> std::result::Result<(), Vec<Job>> {
        // A transaction left open by a panic in an earlier batch ends here.
        rollback(conn);
        let begun = conn
            .busy_timeout(patience)
            .and_then(|()| control(conn, "BEGIN IMMEDIATE"));
        // Inside the transaction, SQLite waits as configured.
        let restored = conn.busy_timeout(self.options.busy_timeout);
        let done = match begun.and(restored) {
            Err(e) if classify(&e) == Kind::Busy => {
                rollback(conn);
                return Err(jobs);
            }
            Err(e) => {
                rollback(conn);
                let err = store_error(&format!("begin a batch of {} writes", jobs.len()), e);
                jobs.into_iter().map(|j| (j.reply, Err(err.clone()))).collect()
            }
            Ok(()) => run_in_transaction(conn, jobs, self.options.outbox_writes),
        };
        if !conn.is_autocommit() {
            // A transaction is still open (its ROLLBACK failed): start over
            // on a new connection (if that fails, the next batch fails on
            // this one and this is tried again).
            match conn::open(&self.options) {
                Ok(fresh) => *conn = fresh,
                Err(e) => tracing::warn!(target: TARGET, error = %e, "cannot reopen the writer's connection"),
            }
        }
        for (reply, result) in done {
            if let Ok(Some(row)) = &result {
                tracing::debug!(target: TARGET, snapshot_id = %row.snapshot_id, status = row.status.as_str(), "saved");
                self.watchers
                    .publish(&row.snapshot_id, row.read_status(chrono::Utc::now()));
            }
            // The caller may have gone away; its write stands.
            let _ = reply.send(result);
        }
        Ok(())
    }
}

/// Runs `jobs` in the transaction just begun and commits it; returns each
/// caller with its result.
///
/// Each write validates before writing: its row is read, its update run
/// and the result checked, and only then written. An update that fails has
/// written nothing, so the others go on without a savepoint; a failing SQL
/// statement fails (and rolls back) the whole batch.
fn run_in_transaction(
    conn: &Connection,
    jobs: Vec<Job>,
    writes: OutboxWrites,
) -> Vec<(Reply, Result<Option<Snapshot>>)> {
    let batch_len = jobs.len();
    let mut out: Vec<(Reply, Result<Option<Snapshot>>)> = Vec::with_capacity(batch_len);
    let mut jobs = jobs.into_iter();
    while let Some(Job { op, reply }) = jobs.next() {
        match apply(conn, op, writes) {
            Ok(row) => out.push((reply, Ok(row))),
            Err(Fail::Caller(err)) => out.push((reply, Err(err))),
            Err(Fail::Batch(err)) => {
                rollback(conn);
                out.push((reply, Err(err.clone())));
                fail_all(&mut out, &err);
                out.extend(jobs.map(|j| (j.reply, Err(err.clone()))));
                return out;
            }
        }
    }
    if out.iter().all(|(_, r)| r.is_err()) {
        // Nothing was written: nothing to commit.
        rollback(conn);
        return out;
    }
    if let Err(e) = control(conn, "COMMIT") {
        rollback(conn);
        let err = store_error(&format!("commit a batch of {batch_len} writes"), e);
        fail_all(&mut out, &err);
    }
    out
}

/// Runs a transaction-control statement (`BEGIN IMMEDIATE`, `COMMIT`,
/// `ROLLBACK`) from the connection's statement cache, so the two each batch
/// runs are parsed once per connection, not once per batch.
fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// Every write of the batch that went through fails with `err`: the
/// transaction that held it is gone.
fn fail_all(out: &mut [(Reply, Result<Option<Snapshot>>)], err: &Error) {
    for (_, result) in out {
        if result.is_ok() {
            *result = Err(err.clone());
        }
    }
}

/// Ends whatever transaction the connection may still have open. SQLite
/// may already have rolled it back on its own (then there is nothing to
/// end).
fn rollback(conn: &Connection) {
    if !conn.is_autocommit()
        && let Err(e) = control(conn, "ROLLBACK")
    {
        tracing::warn!(target: TARGET, error = %e, "rollback failed; the writer's connection is reopened");
    }
}

#[cfg(test)]
mod tests;
