//! The writing half of the store: one snapshot save and audit appends,
//! each inside a transaction the caller opened, and the first claim of a
//! resume through the group commit.

use holdpoint::Result;
use holdpoint::session::{AuditRecord, ResumeClaim, Snapshot, SnapshotUpdate, claim_update, prepare_row};
use sqlx::PgConnection;

use crate::error::store_error;
use crate::group::{Claim, Committer, Op};
use crate::outbox;
use crate::schema::LOCK_SPACE_ROWS;
use holdpoint::session::outbox::{decided_events, hold_events};
use holdpoint_store_sql::claim;
use holdpoint_store_sql::row::{self, AuditColumns, Columns};

const SELECT_FOR_UPDATE: &str = "SELECT data::text FROM holdpoint_snapshots WHERE snapshot_id = $1 FOR UPDATE";

const UPSERT: &str = "INSERT INTO holdpoint_snapshots \
       (snapshot_id, session_id, parent_id, created_at_ns, updated_at_ns, heartbeat_at_ns, resumed_at_ns, \
        status, finish_reason, agent, owner, data, approvers) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::json, $13) \
     ON CONFLICT (snapshot_id) DO UPDATE SET \
       session_id = EXCLUDED.session_id, parent_id = EXCLUDED.parent_id, \
       created_at_ns = EXCLUDED.created_at_ns, updated_at_ns = EXCLUDED.updated_at_ns, \
       heartbeat_at_ns = EXCLUDED.heartbeat_at_ns, resumed_at_ns = EXCLUDED.resumed_at_ns, \
       status = EXCLUDED.status, finish_reason = EXCLUDED.finish_reason, \
       agent = EXCLUDED.agent, owner = EXCLUDED.owner, data = EXCLUDED.data, approvers = EXCLUDED.approvers";

const INSERT_AUDIT: &str = "INSERT INTO holdpoint_audit \
       (record_id, at_ns, principal, agent, session_id, snapshot_id, data) \
     VALUES ($1, $2, $3, $4, $5, $6, $7::json)";

/// Locks row `id`, runs `update` on it and writes what it returns, all in
/// the transaction on `conn`. Returns the row written, or `None` when the
/// update wrote nothing. On error the caller must roll back.
///
/// Concurrent saves of one id wait for each other at the row lock; when
/// there is no row yet to lock, at an advisory lock on the id (held until
/// commit), after which the row is looked up again, since the lock's
/// previous holder may have created it.
pub(crate) async fn save_in(conn: &mut PgConnection, id: &str, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
    let what = format!("save snapshot {id}");
    let err = |e| store_error(&what, e);
    let mut data: Option<String> = sqlx::query_scalar(SELECT_FOR_UPDATE)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(err)?;
    if data.is_none() {
        sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
            .bind(LOCK_SPACE_ROWS)
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(err)?;
        data = sqlx::query_scalar(SELECT_FOR_UPDATE)
            .bind(id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(err)?;
    }
    let existing = data.map(|d| row::decode(id, &d)).transpose()?;
    let was_waiting = existing.as_ref().is_some_and(Snapshot::is_waiting);
    let Some(next) = update(existing.as_ref())? else {
        return Ok(None);
    };
    let row = prepare_row(id, existing.as_ref(), next)?;
    let cols = Columns::of(&row)?;
    let events = outbox::columns(&hold_events(was_waiting, &row))?;
    upsert(&mut *conn, &cols).await.map_err(err)?;
    outbox::insert(&mut *conn, &events).await?;
    Ok(Some(row))
}

/// Writes the row with these columns (inserts it, or replaces the row with
/// its id) in the transaction on `conn`.
async fn upsert(conn: &mut PgConnection, cols: &Columns) -> std::result::Result<(), sqlx::Error> {
    sqlx::query(UPSERT)
        .bind(&cols.snapshot_id)
        .bind(&cols.session_id)
        .bind(&cols.parent_id)
        .bind(cols.created_at_ns)
        .bind(cols.updated_at_ns)
        .bind(cols.heartbeat_at_ns)
        .bind(cols.resumed_at_ns)
        .bind(cols.status)
        .bind(&cols.finish_reason)
        .bind(&cols.agent)
        .bind(&cols.owner)
        .bind(&cols.data)
        .bind(&cols.approvers)
        .execute(conn)
        .await?;
    Ok(())
}

/// Appends audit records on `conn`.
pub(crate) async fn insert_audit(conn: &mut PgConnection, records: &[AuditRecord]) -> Result<()> {
    for record in records {
        let cols = AuditColumns::of(record)?;
        sqlx::query(INSERT_AUDIT)
            .bind(&cols.record_id)
            .bind(cols.at_ns)
            .bind(&cols.principal)
            .bind(&cols.agent)
            .bind(&cols.session_id)
            .bind(&cols.snapshot_id)
            .bind(&cols.data)
            .execute(&mut *conn)
            .await
            .map_err(|e| store_error(&format!("append audit record {}", record.id), e))?;
    }
    Ok(())
}

/// The first claim of a resume on row `id`, with its audit `records`, both
/// or neither, through the group commit (see [`crate::group`]), by the
/// claim rule of [`holdpoint_store_sql::claim`] ([`claim::POSTGRES_CLAIM`]):
/// the row is claimed only while `resumed_at_ns` is unset, and
/// `"resumedAt"` and `"resumeLeaseUntil"` are appended to its stored
/// document then. That path takes only a document naming neither key (a
/// waiting row leaves both out while unset), so it stays one JSON object
/// without repeated keys. When the claim did not take,
/// [`claim::POSTGRES_CLAIMED`] tells why: `NOT_FOUND` for a missing row,
/// `ABORTED` ("already resumed") when it was claimed before; any other
/// unclaimed row (say, saved with a lease but no `resumedAt`) is claimed by
/// [`claim_whole`]. A takeover of a lapsed claim goes through [`save_in`]
/// too.
pub(crate) async fn claim(
    committer: &Committer,
    pool: &sqlx::PgPool,
    id: &str,
    lease_until: chrono::DateTime<chrono::Utc>,
    records: &[AuditRecord],
) -> Result<()> {
    let what = format!("claim snapshot {id}");
    let now = chrono::Utc::now();
    let at_ns = now
        .timestamp_nanos_opt()
        .ok_or_else(|| holdpoint::Error::Internal(format!("the time {now} is outside the range a store can keep")))?;
    let members = claim::claim_members(now, lease_until)?;
    let audit = records.iter().map(AuditColumns::of).collect::<Result<_>>()?;
    let events = outbox::columns(&decided_events(id, lease_until, records))?;
    let op = Op::Claim(Box::new(Claim {
        id: id.to_owned(),
        at_ns,
        members,
        audit,
        events,
    }));
    if committer.write(op).await? {
        return Ok(());
    }
    let resumed: Option<bool> = sqlx::query_scalar(claim::POSTGRES_CLAIMED)
        .bind(id)
        .fetch_optional(pool)
        .await
        .map_err(|e| store_error(&what, e))?;
    match resumed {
        Some(true) => Err(holdpoint::Error::AlreadyResumed(id.to_owned())),
        Some(false) => {
            let claim = ResumeClaim {
                snapshot_id: id.to_owned(),
                lease_until,
                takeover: false,
            };
            claim_whole(pool, claim, records).await
        }
        None => Err(holdpoint::Error::NotFound(format!("snapshot {id} not found"))),
    }
}

/// `claim` and its audit `records` in a transaction of its own, the row
/// read, decoded and written back whole: a takeover, and a first claim the
/// in-place path of [`claim`] did not take.
pub(crate) async fn claim_whole(pool: &sqlx::PgPool, claim: ResumeClaim, records: &[AuditRecord]) -> Result<()> {
    let what = format!("claim snapshot {}", claim.snapshot_id);
    let snapshot_id = claim.snapshot_id.clone();
    let events = outbox::columns(&decided_events(&snapshot_id, claim.lease_until, records))?;
    let mut tx = pool.begin().await.map_err(|e| store_error(&what, e))?;
    save_in(&mut tx, &snapshot_id, claim_update(claim)).await?;
    insert_audit(&mut tx, records).await?;
    outbox::insert(&mut tx, &events).await?;
    tx.commit().await.map_err(|e| store_error(&what, e))
}
