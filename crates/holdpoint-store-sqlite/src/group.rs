//! Group commit: one writer task per store handle runs the writes callers
//! queue, a batch at a time, in one `BEGIN IMMEDIATE` transaction with one
//! commit (so one fsync under `synchronous=FULL`).
//!
//! Each write in a batch runs in order against the rows as the transaction
//! sees them (so a claim queued behind another claim of the same row sees
//! it claimed), and validates before writing: a write whose update fails
//! has written nothing, and only its caller hears the error. A caller is
//! answered only after the batch committed, so a save that returned `Ok` is
//! as durable as before. A failure of the transaction itself (cannot begin,
//! cannot commit, SQLite rolled the whole transaction back) fails every
//! write of the batch; none of them is visible.

use std::sync::Arc;

use holdpoint::session::row::Columns;
use holdpoint::session::{AuditRecord, ResumeClaim, Snapshot, SnapshotUpdate, claim_update};
use holdpoint::{Error, Result};
use sqlx::{Sqlite, SqliteConnection, SqlitePool};
use tokio::sync::{mpsc, oneshot};

use crate::error::store_error;
use crate::watch::Watchers;
use crate::write;

const TARGET: &str = "holdpoint::store::sqlite";

/// The most writes one transaction carries.
const MAX_BATCH: usize = 256;

/// One queued write.
pub(crate) enum Op {
    /// `save_snapshot`: run `update` on row `id` and write what it returns.
    Save { id: String, update: SnapshotUpdate },
    /// `save_snapshot` under a freshly minted id: there is no row to read,
    /// so the caller built and encoded the row already; only the write is
    /// left for the batch.
    /// `row` is what the caller hears once written (taken then).
    Insert {
        row: Option<Box<Snapshot>>,
        cols: Box<Columns>,
    },
    /// `claim_resume`: claim row `id` and append `audit`, both or neither.
    Claim {
        claim: ResumeClaim,
        audit: Vec<AuditRecord>,
    },
    /// `append_audit`.
    Audit { records: Vec<AuditRecord> },
}

impl Op {
    fn what(&self) -> String {
        match self {
            Op::Save { id, .. } => format!("save snapshot {id}"),
            Op::Insert { cols, .. } => format!("save snapshot {}", cols.snapshot_id),
            Op::Claim { claim, .. } => format!("claim snapshot {}", claim.snapshot_id),
            Op::Audit { .. } => "append audit records".to_owned(),
        }
    }

    /// The row this write touches, for the watchers.
    fn row_id(&self) -> Option<&str> {
        match self {
            Op::Save { id, .. } => Some(id),
            Op::Claim { claim, .. } => Some(&claim.snapshot_id),
            Op::Insert { cols, .. } => Some(&cols.snapshot_id),
            Op::Audit { .. } => None,
        }
    }
}

struct Job {
    op: Op,
    reply: oneshot::Sender<Result<Option<Snapshot>>>,
}

/// The queue in front of one writer task.
pub(crate) struct Writer {
    queue: mpsc::UnboundedSender<Job>,
}

impl Writer {
    /// Starts the writer task on the current runtime. It ends when the
    /// last `Writer` handle is dropped.
    pub fn spawn(pool: SqlitePool, watchers: Arc<Watchers>) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, watchers, rx));
        Writer { queue }
    }

    /// Queues `op` and waits for its batch to commit.
    pub async fn write(&self, op: Op) -> Result<Option<Snapshot>> {
        let what = op.what();
        let (reply, answer) = oneshot::channel();
        self.queue.send(Job { op, reply }).map_err(|_| stopped(&what))?;
        answer.await.map_err(|_| stopped(&what))?
    }
}

fn stopped(what: &str) -> Error {
    Error::Unavailable(format!("sqlite store: {what}: the store's writer has stopped"))
}

async fn run(pool: SqlitePool, watchers: Arc<Watchers>, mut rx: mpsc::UnboundedReceiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let jobs = std::mem::replace(&mut batch, Vec::with_capacity(MAX_BATCH));
        let done = run_batch(&pool, jobs).await;
        for (job, result) in done {
            if let (Ok(Some(row)), Some(id)) = (&result, job.op.row_id()) {
                tracing::debug!(target: TARGET, snapshot_id = %id, status = row.status.as_str(), "saved");
                watchers.publish(id, row.read_status(chrono::Utc::now()));
            }
            // The caller may have gone away; its write stands.
            let _ = job.reply.send(result);
        }
    }
}

/// A job whose op has been taken out to run, with what its caller hears.
struct Done {
    op: Op,
    reply: oneshot::Sender<Result<Option<Snapshot>>>,
}

/// Why one write of a batch failed.
enum Fail {
    /// Its update or its check failed before it wrote anything: only its
    /// caller hears of it.
    Caller(Error),
    /// SQLite failed while reading or writing: the transaction is not to be
    /// trusted, and the whole batch fails with it.
    Batch(Error),
}

/// Runs `jobs` in one transaction; returns each with its result.
///
/// Each write validates before writing: its row is read, its update run
/// and the result checked, and only then written. An update that fails has
/// written nothing, so the others go on without a savepoint; a failing SQL
/// statement fails (and rolls back) the whole batch.
async fn run_batch(pool: &SqlitePool, jobs: Vec<Job>) -> Vec<(Done, Result<Option<Snapshot>>)> {
    let batch_len = jobs.len();
    let what = match jobs.first() {
        Some(j) if batch_len == 1 => j.op.what(),
        _ => format!("a batch of {batch_len} writes"),
    };
    // The transaction is driven with plain statements on one pooled
    // connection, so a failure that SQLite answers by rolling back on its
    // own (a full disk, an I/O error) leaves nothing half-open behind.
    let mut conn = match pool.acquire().await {
        Ok(conn) => conn,
        Err(e) => {
            let err = store_error(&format!("start writing ({what})"), e);
            return abort(Vec::new(), jobs.into_iter(), &err);
        }
    };
    // A batch of one fresh row (the common case when writes do not overlap)
    // is one statement, which SQLite commits on its own, as atomically and
    // durably as a transaction, without the BEGIN and COMMIT round trips to
    // the connection's worker thread.
    if batch_len == 1 && matches!(jobs.first().map(|j| &j.op), Some(Op::Insert { .. })) {
        let mut jobs = jobs;
        if let Some(Job { op, reply }) = jobs.pop() {
            let (op, result) = apply(&mut conn, op).await;
            let result = result.map_err(|(Fail::Caller(e) | Fail::Batch(e))| e);
            return vec![(Done { op, reply }, result)];
        }
        return Vec::new();
    }
    if let Err(e) = sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *conn).await {
        let err = store_error(&format!("start writing ({what})"), e);
        rollback(&mut conn).await;
        return abort(Vec::new(), jobs.into_iter(), &err);
    }
    let mut out: Vec<(Done, Result<Option<Snapshot>>)> = Vec::with_capacity(batch_len);
    let mut jobs = jobs.into_iter();
    while let Some(Job { op, reply }) = jobs.next() {
        let (op, result) = apply(&mut conn, op).await;
        match result {
            Ok(row) => out.push((Done { op, reply }, Ok(row))),
            Err(Fail::Caller(err)) => out.push((Done { op, reply }, Err(err))),
            Err(Fail::Batch(err)) => {
                rollback(&mut conn).await;
                out.push((Done { op, reply }, Err(err.clone())));
                return abort(out, jobs, &err);
            }
        }
    }
    if out.iter().all(|(_, r)| r.is_err()) {
        // Nothing was written: nothing to commit.
        rollback(&mut conn).await;
        return out;
    }
    if let Err(e) = sqlx::raw_sql("COMMIT").execute(&mut *conn).await {
        rollback(&mut conn).await;
        let err = store_error(&format!("commit a batch of {batch_len} writes"), e);
        for (_, result) in &mut out {
            if result.is_ok() {
                *result = Err(err.clone());
            }
        }
    }
    out
}

/// Ends whatever transaction the connection may still have open. SQLite
/// may already have rolled it back on its own (then there is nothing to
/// end); if even that cannot be told, the connection is not reused.
async fn rollback(conn: &mut sqlx::pool::PoolConnection<Sqlite>) {
    if let Err(e) = sqlx::raw_sql("ROLLBACK").execute(&mut **conn).await {
        let no_transaction = e.to_string().contains("no transaction is active");
        if !no_transaction {
            tracing::warn!(error = %e, "rollback failed; the connection is closed instead of reused");
            conn.close_on_drop();
        }
    }
}

/// The transaction is lost: every write of the batch fails with `err`
/// (those already run were rolled back with it).
fn abort(
    mut out: Vec<(Done, Result<Option<Snapshot>>)>,
    rest: impl Iterator<Item = Job>,
    err: &Error,
) -> Vec<(Done, Result<Option<Snapshot>>)> {
    for (_, result) in &mut out {
        if result.is_ok() {
            *result = Err(err.clone());
        }
    }
    out.extend(rest.map(|j| {
        (
            Done {
                op: j.op,
                reply: j.reply,
            },
            Err(err.clone()),
        )
    }));
    out
}

/// Reads row `id`, runs `update` and checks the result; writes it.
async fn save(
    tx: &mut SqliteConnection,
    id: &str,
    update: SnapshotUpdate,
    audit: Option<&[AuditRecord]>,
) -> std::result::Result<Option<Snapshot>, Fail> {
    let what = || format!("save snapshot {id}");
    let data = write::read_data(tx, id)
        .await
        .map_err(|e| Fail::Batch(store_error(&what(), e)))?;
    let prepared = write::prepare(id, data, update).map_err(Fail::Caller)?;
    let audit = match audit {
        Some(records) => write::audit_columns(records).map_err(Fail::Caller)?,
        None => Vec::new(),
    };
    let saved = match prepared {
        Some((row, cols)) => {
            write::upsert(tx, &cols)
                .await
                .map_err(|e| Fail::Batch(store_error(&what(), e)))?;
            Some(row)
        }
        None => None,
    };
    write::insert_audit(tx, &audit)
        .await
        .map_err(|e| Fail::Batch(store_error(&format!("append audit records of {id}"), e)))?;
    Ok(saved)
}

/// Runs one write; gives the op back (its update consumed) for the reply.
async fn apply(tx: &mut SqliteConnection, op: Op) -> (Op, std::result::Result<Option<Snapshot>, Fail>) {
    match op {
        Op::Save { id, update } => {
            let result = save(tx, &id, update, None).await;
            let spent: SnapshotUpdate = Box::new(|_| Ok(None));
            (Op::Save { id, update: spent }, result)
        }
        Op::Insert { row, cols } => {
            let result = match write::upsert(tx, &cols).await {
                Ok(()) => Ok(row.map(|r| *r)),
                Err(e) => Err(Fail::Batch(store_error(
                    &format!("save snapshot {}", cols.snapshot_id),
                    e,
                ))),
            };
            (Op::Insert { row: None, cols }, result)
        }
        Op::Claim { claim, audit } => {
            let id = claim.snapshot_id.clone();
            let result = save(tx, &id, claim_update(claim.clone()), Some(&audit)).await;
            (
                Op::Claim {
                    claim,
                    audit: Vec::new(),
                },
                result,
            )
        }
        Op::Audit { records } => {
            let result = async {
                let cols = write::audit_columns(&records).map_err(Fail::Caller)?;
                write::insert_audit(tx, &cols)
                    .await
                    .map_err(|e| Fail::Batch(store_error("append audit records", e)))?;
                Ok(None)
            }
            .await;
            (Op::Audit { records: Vec::new() }, result)
        }
    }
}
