//! The writing half of the store: one snapshot save and audit appends,
//! each inside a transaction the caller opened with `BEGIN IMMEDIATE`.

use holdpoint::Result;
use holdpoint::session::{AuditRecord, Snapshot, SnapshotUpdate, prepare_row};
use sqlx::SqliteConnection;

use crate::error::store_error;
use crate::row::{self, AuditColumns, Columns};

const SELECT: &str = "SELECT data FROM holdpoint_snapshots WHERE snapshot_id = ?1";

const UPSERT: &str = "INSERT INTO holdpoint_snapshots \
       (snapshot_id, session_id, parent_id, created_at_ns, updated_at_ns, heartbeat_at_ns, resumed_at_ns, \
        status, finish_reason, agent, owner, data) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
     ON CONFLICT (snapshot_id) DO UPDATE SET \
       session_id = excluded.session_id, parent_id = excluded.parent_id, \
       created_at_ns = excluded.created_at_ns, updated_at_ns = excluded.updated_at_ns, \
       heartbeat_at_ns = excluded.heartbeat_at_ns, resumed_at_ns = excluded.resumed_at_ns, \
       status = excluded.status, finish_reason = excluded.finish_reason, \
       agent = excluded.agent, owner = excluded.owner, data = excluded.data";

const INSERT_AUDIT: &str = "INSERT INTO holdpoint_audit \
       (record_id, at_ns, principal, agent, session_id, snapshot_id, data) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// Reads row `id`, runs `update` on it and writes what it returns, all on
/// `conn`, which must hold the write lock (`BEGIN IMMEDIATE`). Returns the
/// row written, or `None` when the update wrote nothing. On error the
/// caller must roll back.
pub(crate) async fn save_in(conn: &mut SqliteConnection, id: &str, update: SnapshotUpdate) -> Result<Option<Snapshot>> {
    let what = format!("save snapshot {id}");
    let err = |e| store_error(&what, e);
    let data: Option<String> = sqlx::query_scalar(SELECT)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(err)?;
    let existing = data.map(|d| row::decode(id, &d)).transpose()?;
    let Some(next) = update(existing.as_ref())? else {
        return Ok(None);
    };
    let row = prepare_row(id, existing.as_ref(), next)?;
    let cols = Columns::of(&row)?;
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
        .execute(&mut *conn)
        .await
        .map_err(err)?;
    Ok(Some(row))
}

/// Appends audit records on `conn`.
pub(crate) async fn insert_audit(conn: &mut SqliteConnection, records: &[AuditRecord]) -> Result<()> {
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
