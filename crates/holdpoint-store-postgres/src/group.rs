//! Group commit for the two writes of a resumable turn's hot path: new
//! rows (saved under a freshly minted id, or inserted under an id no row
//! may have yet), and first claims of a resume.
//!
//! Callers queue their write and wait. A dispatcher ([`crate::batch`])
//! takes whatever is queued (up to [`MAX_BATCH`] writes) as soon as one of
//! its `flushers` slots is free, and the whole batch is written with one
//! statement ([`WRITE`]), so one implicit transaction, one commit and one
//! WAL flush for all of them. Under load the batches grow while the slots
//! are busy; a lone write is a batch of one.
//!
//! Every caller is answered only after the statement returned, i.e. after
//! its commit is durable, so an acknowledged write is as durable as before.
//! Claims stay compare-and-set: the statement claims a row only while its
//! `resumed_at_ns` is unset, and when two claims of one row share a batch
//! the second sees the first one's claim and is reported as not taken.
//! Inserts never replace a row: one whose id is taken is reported as not
//! taken.
//!
//! When the server rejects a batch for what a write carries (a data or
//! constraint error: the statement rolled back whole, nothing of it is
//! visible), each write of it is retried on its own, so only the write at
//! fault fails. Any other failure (the server shutting down, the
//! connection lost mid-statement, no connection to be had) fails every
//! write of the batch as UNAVAILABLE, since whether it committed may be
//! unknown.

use std::sync::Arc;

use holdpoint::{Error, Result};
use holdpoint_store_sql::claim::FirstClaim;
use holdpoint_store_sql::outbox::OutboxColumns;
use holdpoint_store_sql::row::Columns;
use sqlx::PgPool;
use tokio::sync::oneshot;

use crate::batch::Batcher;
use crate::error::{Kind, classify, store_error};

/// The most writes one statement carries.
const MAX_BATCH: usize = 128;

/// A row to insert and the outbox rows written only when it is.
pub(crate) struct Insert {
    /// The row.
    pub cols: Columns,
    /// Its outbox rows (those of a new hold).
    pub events: Vec<OutboxColumns>,
}

/// One queued write.
pub(crate) enum Op {
    /// Insert the row with these columns, if no row has its id.
    Insert(Box<Insert>),
    /// Claim a row that was never claimed, in place (see
    /// [`crate::claim`]).
    Claim(Arc<FirstClaim>),
}

impl Op {
    fn what(&self) -> String {
        match self {
            Op::Insert(insert) => format!("save snapshot {}", insert.cols.snapshot_id),
            Op::Claim(claim) => format!("claim snapshot {}", claim.id),
        }
    }
}

/// A write and where its answer goes: `true` for a written row or a
/// claim that took, `false` for an insert whose id was taken or a claim
/// that did not take.
struct Job {
    op: Op,
    reply: oneshot::Sender<Result<bool>>,
}

/// The group commit of one store handle.
pub(crate) struct Committer {
    batcher: Batcher<Job>,
}

impl Committer {
    /// A committer writing through `pool` with at most `flushers`
    /// statements in flight. Its dispatcher starts with the first write.
    pub fn new(pool: PgPool, flushers: usize) -> Self {
        Committer {
            batcher: Batcher::new(pool, flushers, MAX_BATCH, |pool, batch| {
                Box::pin(async move { flush(&pool, batch).await })
            }),
        }
    }

    /// Queues `op` and waits until its batch committed: `Ok(true)` for a
    /// written row or a claim that took, `Ok(false)` for an insert whose id
    /// was taken or a claim of a row that is missing or already claimed.
    pub async fn write(&self, op: Op) -> Result<bool> {
        let what = op.what();
        let (reply, answer) = oneshot::channel();
        if self.batcher.send(Job { op, reply }).is_err() {
            return Err(Error::Unavailable(format!(
                "postgres store: {what}: the writer stopped (its runtime shut down); retry later"
            )));
        }
        answer.await.map_err(|_| {
            Error::Unavailable(format!(
                "postgres store: {what}: the writer stopped before answering; the write may or may not have \
                 committed"
            ))
        })?
    }
}

/// Writes `batch` and answers each caller.
async fn flush(pool: &PgPool, batch: Vec<Job>) {
    let (ops, replies): (Vec<Op>, Vec<_>) = batch.into_iter().map(|job| (job.op, job.reply)).unzip();
    match write(pool, &ops).await {
        Ok(taken) => {
            for (n, reply) in replies.into_iter().enumerate() {
                let _ = reply.send(Ok(taken.contains(&n)));
            }
        }
        // A statement the server refused because of what one write carries
        // (a data or constraint error) is retried write by write. A
        // transient refusal (the server shutting down, a connection
        // killed, a timeout) fails the batch as UNAVAILABLE instead: the
        // caller hears what happened and retries, and a claim is never
        // re-sent after its outcome became uncertain.
        Err(err @ sqlx::Error::Database(_)) if ops.len() > 1 && classify(&err) == Kind::Internal => {
            tracing::debug!(
                target: "holdpoint::store::postgres",
                writes = ops.len(),
                "batch rejected; writing each on its own"
            );
            for (op, reply) in ops.iter().zip(replies) {
                let answer = write(pool, std::slice::from_ref(op))
                    .await
                    .map(|taken| !taken.is_empty())
                    .map_err(|e| store_error(&op.what(), e));
                let _ = reply.send(answer);
            }
        }
        Err(err) => {
            let what = match ops.as_slice() {
                [op] => op.what(),
                [op, ..] => format!("{} and {} more writes in one batch", op.what(), ops.len() - 1),
                [] => return,
            };
            let err = store_error(&what, err);
            for reply in replies {
                let _ = reply.send(Err(err.clone()));
            }
        }
    }
}

/// Every write of a batch in one statement (see the module doc). `$1`–`$12`
/// are the inserted rows' columns, `$13`–`$16` the claims (with their
/// index in the batch; `holdpoint_claim`, migrations 2 and 3, claims them
/// one by one with [`crate::claim::IN_PLACE`]), `$17`–`$24` the claims'
/// audit rows (with the index of their claim), `$25`–`$31` the outbox rows of inserts and claims (with the
/// index of their write, and whether it is a claim), written only with a
/// write that took; `$32` the inserted rows' `approvers` (migration 0009). Returns one row per write that took: a claim's batch
/// index, or an inserted row's id.
const WRITE: &str = "WITH inserted AS ( \
       INSERT INTO holdpoint_snapshots \
              (snapshot_id, session_id, parent_id, created_at_ns, updated_at_ns, heartbeat_at_ns, \
               resumed_at_ns, status, finish_reason, agent, owner, data, approvers) \
       SELECT r.snapshot_id, r.session_id, r.parent_id, r.created_at_ns, r.updated_at_ns, r.heartbeat_at_ns, \
              r.resumed_at_ns, r.status, r.finish_reason, r.agent, r.owner, r.data::json, r.approvers \
         FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::int8[], $7::int8[], \
                     $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $32::text[]) WITH ORDINALITY \
              AS r(snapshot_id, session_id, parent_id, created_at_ns, updated_at_ns, heartbeat_at_ns, \
                   resumed_at_ns, status, finish_reason, agent, owner, data, approvers, k) \
        ORDER BY r.k \
       ON CONFLICT (snapshot_id) DO NOTHING \
       RETURNING snapshot_id \
   ), claimed AS ( \
       SELECT ($13::int4[])[p + 1] AS n FROM holdpoint_claim($14::text[], $15::int8[], $16::text[]) AS p \
   ), audit AS ( \
       INSERT INTO holdpoint_audit (record_id, at_ns, principal, agent, session_id, snapshot_id, data) \
       SELECT a.record_id, a.at_ns, a.principal, a.agent, a.session_id, a.snapshot_id, a.data::json \
         FROM unnest($17::int4[], $18::text[], $19::int8[], $20::text[], $21::text[], $22::text[], \
                     $23::text[], $24::text[]) WITH ORDINALITY \
              AS a(claim, record_id, at_ns, principal, agent, session_id, snapshot_id, data, k) \
        WHERE a.claim IN (SELECT n FROM claimed) \
        ORDER BY a.k \
   ), outbox AS ( \
       INSERT INTO holdpoint_outbox (event_id, snapshot_id, state, due_at_ns, lease_until_ns, data) \
       SELECT o.event_id, o.snapshot_id, o.state, o.due_at_ns, NULL::int8, o.data::json \
         FROM unnest($25::int4[], $26::bool[], $27::text[], $28::text[], $29::text[], $30::int8[], \
                     $31::text[]) WITH ORDINALITY \
              AS o(op, is_claim, event_id, snapshot_id, state, due_at_ns, data, k) \
        WHERE (o.is_claim AND o.op IN (SELECT n FROM claimed)) \
           OR (NOT o.is_claim AND o.snapshot_id IN (SELECT snapshot_id FROM inserted)) \
        ORDER BY o.k \
   ) \
   SELECT n, NULL::text AS inserted FROM claimed \
   UNION ALL SELECT NULL::int4, snapshot_id FROM inserted";

/// Runs [`WRITE`] for `ops`; returns the indexes (into `ops`) of the writes
/// that took (a row written, a claim made), so a batch of one op is `[0]`
/// exactly when it took.
async fn write<'e>(pool: impl sqlx::PgExecutor<'e>, ops: &[Op]) -> std::result::Result<Vec<usize>, sqlx::Error> {
    let mut rows = RowArrays::default();
    let mut claims = ClaimArrays::default();
    let mut events = OutboxArrays::default();
    for (n, op) in ops.iter().enumerate() {
        match op {
            Op::Insert(insert) => {
                rows.push(&insert.cols);
                events.push(index(n), false, &insert.events);
            }
            Op::Claim(claim) => {
                claims.push(index(n), claim);
                events.push(index(n), true, &claim.events);
            }
        }
    }
    let taken: Vec<(Option<i32>, Option<String>)> = sqlx::query_as(WRITE)
        .bind(rows.snapshot_id)
        .bind(rows.session_id)
        .bind(rows.parent_id)
        .bind(rows.created_at_ns)
        .bind(rows.updated_at_ns)
        .bind(rows.heartbeat_at_ns)
        .bind(rows.resumed_at_ns)
        .bind(rows.status)
        .bind(rows.finish_reason)
        .bind(rows.agent)
        .bind(rows.owner)
        .bind(rows.data)
        .bind(claims.n)
        .bind(claims.id)
        .bind(claims.at_ns)
        .bind(claims.members)
        .bind(claims.audit_claim)
        .bind(claims.audit_record_id)
        .bind(claims.audit_at_ns)
        .bind(claims.audit_principal)
        .bind(claims.audit_agent)
        .bind(claims.audit_session_id)
        .bind(claims.audit_snapshot_id)
        .bind(claims.audit_data)
        .bind(events.op)
        .bind(events.is_claim)
        .bind(events.event_id)
        .bind(events.snapshot_id)
        .bind(events.state)
        .bind(events.due_at_ns)
        .bind(events.data)
        .bind(rows.approvers)
        .fetch_all(pool)
        .await?;
    // Two inserts of one id in a batch: the rows go in in batch order, so
    // the one that took is the first.
    let inserted_at = |id: &str| {
        ops.iter()
            .position(|op| matches!(op, Op::Insert(insert) if insert.cols.snapshot_id == id))
    };
    Ok(taken
        .into_iter()
        .filter_map(|(claim, inserted)| match (claim, inserted) {
            (Some(n), _) => usize::try_from(n).ok(),
            (None, Some(id)) => inserted_at(&id),
            (None, None) => None,
        })
        .collect())
}

/// Inserts every row of `inserts` or none: [`WRITE`] in a transaction of
/// its own (one commit), rolled back when any id is taken. `Ok(false)`
/// then, with nothing written. Outside the group commit: these batches
/// are a parent's write carrying its sub-agents' rows, rare next to the
/// single writes the committer groups.
pub(crate) async fn insert_all(pool: &PgPool, inserts: Vec<Insert>) -> Result<bool> {
    let what = format!("insert {} snapshots", inserts.len());
    let ops: Vec<Op> = inserts.into_iter().map(|i| Op::Insert(Box::new(i))).collect();
    let mut tx = pool.begin().await.map_err(|e| store_error(&what, e))?;
    let taken = write(&mut *tx, &ops).await.map_err(|e| store_error(&what, e))?;
    if taken.len() != ops.len() {
        tx.rollback().await.map_err(|e| store_error(&what, e))?;
        return Ok(false);
    }
    tx.commit().await.map_err(|e| store_error(&what, e))?;
    Ok(true)
}

/// A batch index as the statement's `int4` (batches are at most
/// [`MAX_BATCH`] long).
fn index(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The inserted rows, column by column.
#[derive(Default)]
struct RowArrays<'a> {
    snapshot_id: Vec<&'a str>,
    session_id: Vec<&'a str>,
    parent_id: Vec<Option<&'a str>>,
    created_at_ns: Vec<i64>,
    updated_at_ns: Vec<i64>,
    heartbeat_at_ns: Vec<Option<i64>>,
    resumed_at_ns: Vec<Option<i64>>,
    status: Vec<&'static str>,
    finish_reason: Vec<Option<&'a str>>,
    agent: Vec<Option<&'a str>>,
    owner: Vec<Option<&'a str>>,
    data: Vec<&'a str>,
    approvers: Vec<&'a str>,
}

impl<'a> RowArrays<'a> {
    fn push(&mut self, cols: &'a Columns) {
        self.snapshot_id.push(&cols.snapshot_id);
        self.session_id.push(&cols.session_id);
        self.parent_id.push(cols.parent_id.as_deref());
        self.created_at_ns.push(cols.created_at_ns);
        self.updated_at_ns.push(cols.updated_at_ns);
        self.heartbeat_at_ns.push(cols.heartbeat_at_ns);
        self.resumed_at_ns.push(cols.resumed_at_ns);
        self.status.push(cols.status);
        self.finish_reason.push(cols.finish_reason.as_deref());
        self.agent.push(cols.agent.as_deref());
        self.owner.push(cols.owner.as_deref());
        self.data.push(&cols.data);
        self.approvers.push(&cols.approvers);
    }
}

/// The claims and their audit rows, column by column.
#[derive(Default)]
struct ClaimArrays<'a> {
    n: Vec<i32>,
    id: Vec<&'a str>,
    at_ns: Vec<i64>,
    members: Vec<&'a str>,
    audit_claim: Vec<i32>,
    audit_record_id: Vec<&'a str>,
    audit_at_ns: Vec<i64>,
    audit_principal: Vec<Option<&'a str>>,
    audit_agent: Vec<Option<&'a str>>,
    audit_session_id: Vec<&'a str>,
    audit_snapshot_id: Vec<&'a str>,
    audit_data: Vec<&'a str>,
}

impl<'a> ClaimArrays<'a> {
    fn push(&mut self, n: i32, claim: &'a FirstClaim) {
        self.n.push(n);
        self.id.push(&claim.id);
        self.at_ns.push(claim.at_ns);
        self.members.push(&claim.members);
        for record in &claim.audit {
            self.audit_claim.push(n);
            self.audit_record_id.push(&record.record_id);
            self.audit_at_ns.push(record.at_ns);
            self.audit_principal.push(record.principal.as_deref());
            self.audit_agent.push(record.agent.as_deref());
            self.audit_session_id.push(&record.session_id);
            self.audit_snapshot_id.push(&record.snapshot_id);
            self.audit_data.push(&record.data);
        }
    }
}

/// The outbox rows of a batch's writes, column by column.
#[derive(Default)]
struct OutboxArrays<'a> {
    op: Vec<i32>,
    is_claim: Vec<bool>,
    event_id: Vec<&'a str>,
    snapshot_id: Vec<&'a str>,
    state: Vec<&'static str>,
    due_at_ns: Vec<i64>,
    data: Vec<&'a str>,
}

impl<'a> OutboxArrays<'a> {
    fn push(&mut self, n: i32, is_claim: bool, events: &'a [OutboxColumns]) {
        for event in events {
            self.op.push(n);
            self.is_claim.push(is_claim);
            self.event_id.push(&event.event_id);
            self.snapshot_id.push(&event.snapshot_id);
            self.state.push(event.state);
            self.due_at_ns.push(event.due_at_ns);
            self.data.push(&event.data);
        }
    }
}
