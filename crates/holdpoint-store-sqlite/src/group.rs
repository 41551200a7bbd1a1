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
//!
//! The writer has a connection of its own, outside the pool: no pool
//! checkout per batch, and its page cache stays warm (no other connection
//! of this handle writes, so SQLite need not re-read pages it holds).
//! Statements are sent in [`Chain`]s: a batch of one fresh row is a single
//! round trip to sqlx's worker thread, a claim two.

use std::sync::Arc;

use holdpoint::session::row::Columns;
use holdpoint::session::{AuditRecord, ResumeClaim, Snapshot, SnapshotUpdate, claim_update};
use holdpoint::{Error, Result};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

use crate::chain::Chain;
use crate::error::store_error;
use crate::known::Known;
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

/// What the writer task is asked to do.
enum Msg {
    /// Run a write.
    Job(Job),
    /// Close the connection (after the writes queued before) and stop;
    /// answered once the connection is closed.
    Close(oneshot::Sender<()>),
}

/// The queue in front of one writer task.
pub(crate) struct Writer {
    queue: mpsc::UnboundedSender<Msg>,
}

impl Writer {
    /// Starts the writer task on the current runtime, writing on `conn`.
    /// It ends when asked to [`close`](Self::close) or when the last
    /// `Writer` handle is dropped.
    /// `options` reopen the connection if a failed transaction cannot be
    /// ended on it.
    pub fn spawn(conn: SqliteConnection, options: SqliteConnectOptions, watchers: Arc<Watchers>) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(conn, options, watchers, rx));
        Writer { queue }
    }

    /// Queues `op` and waits for its batch to commit.
    pub async fn write(&self, op: Op) -> Result<Option<Snapshot>> {
        let what = op.what();
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Msg::Job(Job { op, reply }))
            .map_err(|_| stopped(&what))?;
        answer.await.map_err(|_| stopped(&what))?
    }

    /// Lets the writes queued so far finish, closes the connection and
    /// stops the writer: later writes fail with `UNAVAILABLE`.
    pub async fn close(&self) {
        let (done, closed) = oneshot::channel();
        if self.queue.send(Msg::Close(done)).is_ok() {
            let _ = closed.await;
        }
    }
}

fn stopped(what: &str) -> Error {
    Error::Unavailable(format!("sqlite store: {what}: the store's writer has stopped"))
}

async fn run(
    mut conn: SqliteConnection,
    options: SqliteConnectOptions,
    watchers: Arc<Watchers>,
    mut rx: mpsc::UnboundedReceiver<Msg>,
) {
    let mut known = Known::default();
    let mut msgs = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut msgs, MAX_BATCH).await > 0 {
        let mut jobs = Vec::with_capacity(msgs.len());
        let mut close = None;
        for msg in msgs.drain(..) {
            match msg {
                Msg::Job(job) if close.is_none() => jobs.push(job),
                // Queued after a close: dropping the reply tells its
                // caller that the writer stopped.
                Msg::Job(_) => {}
                Msg::Close(done) => close = close.or(Some(done)),
            }
        }
        if !jobs.is_empty() {
            let mut broken = false;
            let done = run_batch(&mut conn, &mut known, jobs, &mut broken).await;
            if broken {
                // A transaction may still be open on the connection: start
                // over on a new one (if that fails, the next batch fails
                // and this is tried again).
                match options.connect().await {
                    Ok(fresh) => {
                        let old = std::mem::replace(&mut conn, fresh);
                        let _ = old.close().await;
                    }
                    Err(e) => tracing::warn!(target: TARGET, error = %e, "cannot reopen the writer's connection"),
                }
            }
            for (job, result) in done {
                if let (Ok(Some(row)), Some(id)) = (&result, job.op.row_id()) {
                    tracing::debug!(target: TARGET, snapshot_id = %id, status = row.status.as_str(), "saved");
                    watchers.publish(id, row.read_status(chrono::Utc::now()));
                }
                // The caller may have gone away; its write stands.
                let _ = job.reply.send(result);
            }
        }
        if let Some(done) = close {
            rx.close();
            if let Err(e) = conn.close().await {
                tracing::warn!(target: TARGET, error = %e, "closing the writer's connection failed");
            }
            let _ = done.send(());
            return;
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
///
/// The statements travel in a [`Chain`]: `BEGIN IMMEDIATE` goes with the
/// first statement sent, each write waits for the next read or for the
/// `COMMIT`. A batch of one fresh row is therefore one round trip
/// (`BEGIN IMMEDIATE; INSERT; COMMIT`), a claim of a row this writer
/// wrote one (see [`Known`]), any other claim two.
///
/// `known` learns the rows the batch committed; it forgets everything when
/// the batch fails.
async fn run_batch(
    conn: &mut SqliteConnection,
    known: &mut Known,
    jobs: Vec<Job>,
    broken: &mut bool,
) -> Vec<(Done, Result<Option<Snapshot>>)> {
    let batch_len = jobs.len();
    let mut chain = Chain::default();
    chain.push("BEGIN IMMEDIATE");
    let mut out: Vec<(Done, Result<Option<Snapshot>>)> = Vec::with_capacity(batch_len);
    let mut written: Vec<String> = Vec::with_capacity(batch_len);
    let mut committed = false;
    // Fresh rows first: nothing else in the batch can touch them, and up
    // to `MAX_FRESH` of them share a round trip.
    let mut jobs = jobs;
    jobs.sort_by_key(|j| !matches!(j.op, Op::Insert { .. }));
    let mut jobs = jobs.into_iter();
    while let Some(Job { op, reply }) = jobs.next() {
        let mut step = Step {
            conn: &mut *conn,
            chain: &mut chain,
            known,
            alone: batch_len == 1,
            committed: false,
        };
        let (op, result) = apply(&mut step, op).await;
        committed |= step.committed;
        match result {
            Ok(Written { row, data }) => {
                if let (Some(data), Some(id)) = (data, op.row_id()) {
                    written.push(id.to_owned());
                    written.push(data);
                }
                out.push((Done { op, reply }, Ok(row)));
            }
            Err(Fail::Caller(err)) => out.push((Done { op, reply }, Err(err))),
            Err(Fail::Batch(err)) => {
                known.clear();
                if chain.sent() {
                    *broken |= !rollback(conn).await;
                }
                out.push((Done { op, reply }, Err(err.clone())));
                return abort(out, jobs, &err);
            }
        }
    }
    if !committed {
        if out.iter().all(|(_, r)| r.is_err()) {
            // Nothing was written: nothing to commit.
            if chain.sent() {
                *broken |= !rollback(conn).await;
            }
            return out;
        }
        chain.push("COMMIT");
        if let Err(e) = chain.execute(conn).await {
            known.clear();
            *broken |= !rollback(conn).await;
            let err = store_error(&format!("write and commit a batch of {batch_len} writes"), e);
            for (_, result) in &mut out {
                if result.is_ok() {
                    *result = Err(err.clone());
                }
            }
            return out;
        }
    }
    let mut written = written.into_iter();
    while let (Some(id), Some(data)) = (written.next(), written.next()) {
        known.record(&id, data);
    }
    out
}

/// Ends whatever transaction the connection may still have open. SQLite
/// may already have rolled it back on its own (then there is nothing to
/// end). `false` when even that cannot be told: the connection is not to
/// be used again.
async fn rollback(conn: &mut SqliteConnection) -> bool {
    match sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await {
        Ok(_) => true,
        Err(e) if e.to_string().contains("no transaction is active") => true,
        Err(e) => {
            tracing::warn!(target: TARGET, error = %e, "rollback failed; the writer's connection is reopened");
            false
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

/// Makes room in `chain` for one more op's writes: sends what it holds
/// when that is another op's writes, or when it is full.
async fn make_room(conn: &mut SqliteConnection, chain: &mut Chain, what: &str) -> std::result::Result<(), Fail> {
    if chain.has_writes() || chain.is_full() {
        chain
            .execute(conn)
            .await
            .map_err(|e| Fail::Batch(store_error(what, e)))?;
    }
    Ok(())
}

/// Sends the chain now (before a read or another op's writes joins it).
async fn send(step: &mut Step<'_>, what: &str) -> std::result::Result<(), Fail> {
    step.chain
        .execute(step.conn)
        .await
        .map_err(|e| Fail::Batch(store_error(what, e)))
}

/// What one op of a batch works with.
struct Step<'a> {
    conn: &'a mut SqliteConnection,
    chain: &'a mut Chain,
    known: &'a Known,
    /// The op is the batch's only one: a chain may carry its `COMMIT`.
    alone: bool,
    /// Set when the op's chain committed the batch.
    committed: bool,
}

/// What a write that went through returns: the row for its caller, and
/// the row's stored JSON (for [`Known`]) when it wrote one.
struct Written {
    row: Option<Snapshot>,
    data: Option<String>,
}

/// Reads row `id` (sending the chain), runs `update` and checks the result;
/// queues its write and `audit` on the chain.
async fn save(
    step: &mut Step<'_>,
    id: &str,
    update: SnapshotUpdate,
    audit: Option<&[AuditRecord]>,
) -> std::result::Result<Written, Fail> {
    let what = || format!("save snapshot {id}");
    if step.chain.fresh_rows() > 1 {
        send(step, &what()).await?;
    }
    let data = step
        .chain
        .read_data(step.conn, id)
        .await
        .map_err(|e| Fail::Batch(store_error(&what(), e)))?;
    let prepared = write::prepare(id, data, update).map_err(Fail::Caller)?;
    let audit = match audit {
        Some(records) => write::audit_columns(records).map_err(Fail::Caller)?,
        None => Vec::new(),
    };
    let saved = match prepared {
        Some((row, cols)) => {
            step.chain
                .upsert(&cols)
                .map_err(|e| Fail::Batch(store_error(&what(), e)))?;
            Written {
                row: Some(row),
                data: Some(cols.data),
            }
        }
        None => Written { row: None, data: None },
    };
    step.chain
        .audit(&audit)
        .map_err(|e| Fail::Batch(store_error(&format!("append audit records of {id}"), e)))?;
    Ok(saved)
}

/// Claims a row this writer committed, by compare-and-set on its stored
/// JSON as [`Known`] remembers it, in one round trip. `Ok(None)` when that
/// did not go through (the row changed since, or the claim fails on the
/// remembered row): nothing was written, and the claim is to run on the row
/// as read. With `step.alone`, the round trip also commits.
async fn claim_known(
    step: &mut Step<'_>,
    claim: &ResumeClaim,
    audit: &[AuditRecord],
) -> std::result::Result<Option<Written>, Fail> {
    let id = claim.snapshot_id.as_str();
    let Some(old) = step.known.get(id) else {
        return Ok(None);
    };
    // A failing claim or record is answered from the row as read, never
    // from the remembered one.
    let Ok(Some((row, cols))) = write::prepare(id, Some(old.to_owned()), claim_update(claim.clone())) else {
        return Ok(None);
    };
    let Ok(audit) = write::audit_columns(audit) else {
        return Ok(None);
    };
    let what = || format!("claim snapshot {id}");
    // The previous op's writes (if any) go in the same round trip.
    if step.chain.is_full() || step.chain.fresh_rows() > 1 {
        send(step, &what()).await?;
    }
    let batch = |e| Fail::Batch(store_error(&what(), e));
    step.chain.replace_if(&cols, old).map_err(batch)?;
    step.chain.audit_if_changed(&audit).map_err(batch)?;
    if step.alone {
        step.chain.push("COMMIT");
    }
    let took = step.chain.execute_returning(step.conn).await.map_err(batch)?;
    if !took {
        if step.alone {
            // The transaction ended with nothing written: the claim runs
            // in a new one.
            step.chain.push("BEGIN IMMEDIATE");
        }
        return Ok(None);
    }
    step.committed = step.alone;
    Ok(Some(Written {
        row: Some(row),
        data: Some(cols.data),
    }))
}

/// Runs one write; gives the op back (its update consumed) for the reply.
async fn apply(step: &mut Step<'_>, op: Op) -> (Op, std::result::Result<Written, Fail>) {
    match op {
        Op::Save { id, update } => {
            let result = save(step, &id, update, None).await;
            let spent: SnapshotUpdate = Box::new(|_| Ok(None));
            (Op::Save { id, update: spent }, result)
        }
        Op::Insert { row, cols } => {
            let what = format!("save snapshot {}", cols.snapshot_id);
            let result = async {
                if !step.chain.takes_fresh() {
                    send(step, &what).await?;
                }
                step.chain
                    .upsert_fresh(&cols)
                    .map_err(|e| Fail::Batch(store_error(&what, e)))?;
                Ok(())
            }
            .await;
            match result {
                Ok(()) => {
                    let data = Some(cols.data.clone());
                    (
                        Op::Insert { row: None, cols },
                        Ok(Written {
                            row: row.map(|r| *r),
                            data,
                        }),
                    )
                }
                Err(e) => (Op::Insert { row: None, cols }, Err(e)),
            }
        }
        Op::Claim { claim, audit } => {
            let result = match claim_known(step, &claim, &audit).await {
                Ok(Some(written)) => Ok(written),
                Ok(None) => {
                    let id = claim.snapshot_id.clone();
                    save(step, &id, claim_update(claim.clone()), Some(&audit)).await
                }
                Err(e) => Err(e),
            };
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
                let what = "append audit records";
                make_room(step.conn, step.chain, what).await?;
                step.chain.audit(&cols).map_err(|e| Fail::Batch(store_error(what, e)))?;
                Ok(Written { row: None, data: None })
            }
            .await;
            (Op::Audit { records: Vec::new() }, result)
        }
    }
}
