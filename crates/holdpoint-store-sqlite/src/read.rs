//! The reading half of the store: single rows, a session's latest row,
//! listings and the audit trail. Every read is one statement, so it sees
//! one committed state. These run on a reader's thread (see
//! [`Readers`](crate::readers::Readers)), or on the writer's inside its
//! transaction.

use holdpoint::Result;
use holdpoint::session::row;
use holdpoint::session::{AuditQuery, AuditRecord, Snapshot, SnapshotQuery, SnapshotStatus};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::store_error;

/// Row `id`'s stored JSON, or `None` when absent.
pub(crate) fn data(conn: &Connection, id: &str) -> rusqlite::Result<Option<String>> {
    conn.prepare_cached("SELECT data FROM holdpoint_snapshots WHERE snapshot_id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()
}

/// Snapshot `id` as a reader sees it now.
pub(crate) fn snapshot(conn: &Connection, id: &str) -> Result<Option<Snapshot>> {
    let data = data(conn, id).map_err(|e| store_error(&format!("read snapshot {id}"), e))?;
    data.map(|d| row::decode(id, &d).map(Snapshot::as_read)).transpose()
}

/// The session's row with the greatest `created_at`, ties by greatest id.
pub(crate) fn latest(conn: &Connection, session_id: &str) -> Result<Option<Snapshot>> {
    let found: Option<(String, String)> = conn
        .prepare_cached(
            "SELECT snapshot_id, data FROM holdpoint_snapshots WHERE session_id = ?1 \
             ORDER BY created_at_ns DESC, snapshot_id DESC LIMIT 1",
        )
        .and_then(|mut s| s.query_row([session_id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(|e| store_error(&format!("read latest snapshot of session {session_id}"), e))?;
    found
        .map(|(id, d)| row::decode(&id, &d).map(Snapshot::as_read))
        .transpose()
}

/// The status of row `id` as a reader sees it now, or `None` when absent.
pub(crate) fn status(conn: &Connection, id: &str) -> Result<Option<SnapshotStatus>> {
    let found: Option<(String, i64, Option<i64>)> = conn
        .prepare_cached("SELECT status, updated_at_ns, heartbeat_at_ns FROM holdpoint_snapshots WHERE snapshot_id = ?1")
        .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
        .map_err(|e| store_error(&format!("read status of snapshot {id}"), e))?;
    found
        .map(|(status, updated, heartbeat)| row::read_status(id, &status, updated, heartbeat))
        .transpose()
}

/// `list_snapshots`: the filters of [`SnapshotQuery`], newest first. With
/// `waiting_only` or `in_doubt_only`, a row counts only if no row of its
/// session is newer; for `in_doubt_only` this selects the claimed rows and
/// the claim's lease (inside the JSON) is checked after decoding.
const LIST: &str = "SELECT s.snapshot_id, s.data FROM holdpoint_snapshots s \
     WHERE (?1 IS NULL OR s.agent = ?1) \
       AND (?2 IS NULL OR s.session_id = ?2) \
       AND (?3 IS NULL OR s.owner = ?3) \
       AND ((?4 = 0 AND ?6 = 0) OR (s.status = 'completed' AND s.finish_reason = 'interrupted' \
            AND (CASE WHEN ?4 = 0 THEN s.resumed_at_ns IS NOT NULL ELSE s.resumed_at_ns IS NULL END) \
            AND NOT EXISTS (SELECT 1 FROM holdpoint_snapshots t WHERE t.session_id = s.session_id \
                AND (t.created_at_ns > s.created_at_ns \
                     OR (t.created_at_ns = s.created_at_ns AND t.snapshot_id > s.snapshot_id))))) \
     ORDER BY s.created_at_ns DESC, s.snapshot_id DESC LIMIT ?5";

pub(crate) fn list(conn: &Connection, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
    let rows = (|| {
        let mut stmt = conn.prepare_cached(LIST)?;
        let rows = stmt.query_map(
            params![
                query.agent,
                query.session_id,
                query.owner,
                query.waiting_only,
                row::list_limit(query),
                query.in_doubt_only
            ],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
        )?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
    })()
    .map_err(|e| store_error("list snapshots", e))?;
    row::decode_listed(rows, query)
}

const LIST_AUDIT: &str = "SELECT seq, data FROM holdpoint_audit \
     WHERE (?1 IS NULL OR agent = ?1) AND (?2 IS NULL OR session_id = ?2) AND (?3 IS NULL OR principal = ?3) \
     ORDER BY seq DESC LIMIT ?4";

/// `list_audit`: the filters of [`AuditQuery`], newest first.
pub(crate) fn audit(conn: &Connection, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
    let rows = (|| {
        let mut stmt = conn.prepare_cached(LIST_AUDIT)?;
        let rows = stmt.query_map(
            params![
                query.agent,
                query.session_id,
                query.principal,
                row::sql_limit(query.limit())
            ],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
        )?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
    })()
    .map_err(|e| store_error("list audit records", e))?;
    rows.into_iter().map(|(seq, d)| row::decode_audit(seq, &d)).collect()
}
