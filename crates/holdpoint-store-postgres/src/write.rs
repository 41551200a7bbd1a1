//! The writing half of the store: one snapshot save and audit appends,
//! each inside a transaction the caller opened (a claim's steps are in
//! [`crate::claim`]).

use holdpoint::Result;
use holdpoint::session::{AuditRecord, Snapshot, SnapshotUpdate, prepare_row};
use sqlx::PgConnection;

use crate::error::store_error;
use crate::outbox;
use crate::schema::LOCK_SPACE_ROWS;
use holdpoint::session::outbox::{OutboxWrites, hold_events};
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
pub(crate) async fn save_in(
    conn: &mut PgConnection,
    id: &str,
    update: SnapshotUpdate,
    writes: OutboxWrites,
) -> Result<Option<Snapshot>> {
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
    let events = outbox::columns(&hold_events(was_waiting, &row), writes)?;
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
    let rows = records.iter().map(AuditColumns::of).collect::<Result<Vec<_>>>()?;
    insert_audit_rows(conn, &rows).await
}

/// Appends encoded audit rows on `conn`, in order.
pub(crate) async fn insert_audit_rows(conn: &mut PgConnection, rows: &[AuditColumns]) -> Result<()> {
    for cols in rows {
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
            .map_err(|e| store_error(&format!("append audit record {}", cols.record_id), e))?;
    }
    Ok(())
}
