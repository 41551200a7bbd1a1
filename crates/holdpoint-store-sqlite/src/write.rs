//! The writing half of the store: run an update on the row as read and
//! check the result (writing nothing), and the statements that write a
//! checked row or audit records. These run on the writer's thread, inside
//! its transaction (see [`group`](crate::group)).

use holdpoint::Result;
use holdpoint::session::row::{self, AuditColumns, Columns};
use holdpoint::session::{AuditRecord, Snapshot, SnapshotUpdate, prepare_row};
use rusqlite::{Connection, params};

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

/// The columns of `records`, checked before anything is written.
pub(crate) fn audit_columns(records: &[AuditRecord]) -> Result<Vec<AuditColumns>> {
    records.iter().map(AuditColumns::of).collect()
}

/// Writes a prepared row: inserts it, or replaces the row with its id.
pub(crate) fn upsert(conn: &Connection, cols: &Columns) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO holdpoint_snapshots \
           (snapshot_id, session_id, parent_id, created_at_ns, updated_at_ns, heartbeat_at_ns, \
            resumed_at_ns, status, finish_reason, agent, owner, data) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
         ON CONFLICT (snapshot_id) DO UPDATE SET \
           session_id = excluded.session_id, parent_id = excluded.parent_id, \
           created_at_ns = excluded.created_at_ns, updated_at_ns = excluded.updated_at_ns, \
           heartbeat_at_ns = excluded.heartbeat_at_ns, resumed_at_ns = excluded.resumed_at_ns, \
           status = excluded.status, finish_reason = excluded.finish_reason, \
           agent = excluded.agent, owner = excluded.owner, data = excluded.data",
    )?;
    stmt.execute(params![
        cols.snapshot_id,
        cols.session_id,
        cols.parent_id,
        cols.created_at_ns,
        cols.updated_at_ns,
        cols.heartbeat_at_ns,
        cols.resumed_at_ns,
        cols.status,
        cols.finish_reason,
        cols.agent,
        cols.owner,
        cols.data,
    ])?;
    Ok(())
}

/// Appends prepared audit rows, in order.
pub(crate) fn audit(conn: &Connection, records: &[AuditColumns]) -> rusqlite::Result<()> {
    if records.is_empty() {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO holdpoint_audit (record_id, at_ns, principal, agent, session_id, snapshot_id, data) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for cols in records {
        stmt.execute(params![
            cols.record_id,
            cols.at_ns,
            cols.principal,
            cols.agent,
            cols.session_id,
            cols.snapshot_id,
            cols.data,
        ])?;
    }
    Ok(())
}
