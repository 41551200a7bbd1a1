//! The writing half of the store, in phases: read a row, run its update and
//! check the result (writing nothing), then write — each on a connection
//! holding the write lock (`BEGIN IMMEDIATE`).

use holdpoint::Result;
use holdpoint::session::{AuditRecord, Snapshot, SnapshotUpdate, prepare_row};
use sqlx::SqliteConnection;

use holdpoint::session::row::{self, AuditColumns, Columns};

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

/// Row `id`'s stored JSON, read on `conn`.
pub(crate) async fn read_data(
    conn: &mut SqliteConnection,
    id: &str,
) -> std::result::Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar(SELECT).bind(id).fetch_optional(&mut *conn).await
}

/// Runs `update` on the row `existing` (row `id` as read) and checks what
/// it returns, writing nothing: the row to write and its columns, or `None`
/// when the update writes nothing.
pub(crate) fn prepare(
    id: &str,
    existing: Option<String>,
    update: SnapshotUpdate,
) -> Result<Option<(Snapshot, Columns)>> {
    let existing = existing.map(|d| row::decode(id, &d)).transpose()?;
    let Some(next) = update(existing.as_ref())? else {
        return Ok(None);
    };
    let row = prepare_row(id, existing.as_ref(), next)?;
    let cols = Columns::of(&row)?;
    Ok(Some((row, cols)))
}

/// Writes a prepared row on `conn`, which must hold the write lock.
pub(crate) async fn upsert(conn: &mut SqliteConnection, cols: &Columns) -> std::result::Result<(), sqlx::Error> {
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
        .map(|_| ())
}

/// The columns of `records`, checked before anything is written.
pub(crate) fn audit_columns(records: &[AuditRecord]) -> Result<Vec<AuditColumns>> {
    records.iter().map(AuditColumns::of).collect()
}

/// Appends prepared audit rows on `conn`.
pub(crate) async fn insert_audit(
    conn: &mut SqliteConnection,
    records: &[AuditColumns],
) -> std::result::Result<(), sqlx::Error> {
    for cols in records {
        sqlx::query(INSERT_AUDIT)
            .bind(&cols.record_id)
            .bind(cols.at_ns)
            .bind(&cols.principal)
            .bind(&cols.agent)
            .bind(&cols.session_id)
            .bind(&cols.snapshot_id)
            .bind(&cols.data)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}
