//! The reading half of the store: single rows, statuses, listings and the
//! audit trail (a session's latest row: [`crate::latest`]). Every read is
//! one statement, so it sees one committed state.

use std::collections::HashMap;

use holdpoint::Result;
use holdpoint::session::{AuditQuery, AuditRecord, Snapshot, SnapshotQuery, SnapshotStatus};
use sqlx::PgPool;

use crate::error::store_error;
use holdpoint::session::row;

/// Snapshot `id` as a reader sees it now.
pub(crate) async fn snapshot(pool: &PgPool, id: &str) -> Result<Option<Snapshot>> {
    let data: Option<String> = sqlx::query_scalar("SELECT data::text FROM holdpoint_snapshots WHERE snapshot_id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await
        .map_err(|e| store_error(&format!("read snapshot {id}"), e))?;
    data.map(|d| row::decode(id, &d).map(Snapshot::as_read)).transpose()
}

/// The statuses of the rows with these ids, as a reader sees them now.
pub(crate) async fn statuses(pool: &PgPool, ids: &[String]) -> Result<HashMap<String, SnapshotStatus>> {
    let rows: Vec<(String, String, i64, Option<i64>)> = sqlx::query_as(
        "SELECT snapshot_id, status, updated_at_ns, heartbeat_at_ns FROM holdpoint_snapshots \
         WHERE snapshot_id = ANY($1)",
    )
    .bind(ids)
    .fetch_all(pool)
    .await
    .map_err(|e| store_error("read statuses", e))?;
    rows.into_iter()
        .map(|(id, status, updated, heartbeat)| {
            let read = row::read_status(&id, &status, updated, heartbeat)?;
            Ok((id, read))
        })
        .collect()
}

/// `list_snapshots`: the filters of [`SnapshotQuery`], newest first. With
/// `waiting_only` or `in_doubt_only`, a row counts only if no row of its
/// session is newer; for `in_doubt_only` this selects the claimed rows and
/// the claim's lease (inside the JSON) is checked after decoding.
const LIST: &str = "SELECT s.snapshot_id, s.data::text FROM holdpoint_snapshots s \
     WHERE ($1::text IS NULL OR s.agent = $1) \
       AND ($2::text IS NULL OR s.session_id = $2) \
       AND ($3::text IS NULL OR s.owner = $3) \
       AND ((NOT $4 AND NOT $6) OR (s.status = 'completed' AND s.finish_reason = 'interrupted' \
            AND (CASE WHEN $4 THEN s.resumed_at_ns IS NULL ELSE s.resumed_at_ns IS NOT NULL END) \
            AND NOT EXISTS (SELECT 1 FROM holdpoint_snapshots t WHERE t.session_id = s.session_id \
                AND (t.created_at_ns > s.created_at_ns \
                     OR (t.created_at_ns = s.created_at_ns AND t.snapshot_id > s.snapshot_id))))) \
     ORDER BY s.created_at_ns DESC, s.snapshot_id DESC LIMIT $5";

pub(crate) async fn list(pool: &PgPool, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
    let rows: Vec<(String, String)> = sqlx::query_as(LIST)
        .bind(&query.agent)
        .bind(&query.session_id)
        .bind(&query.owner)
        .bind(query.waiting_only)
        .bind(row::list_limit(query))
        .bind(query.in_doubt_only)
        .fetch_all(pool)
        .await
        .map_err(|e| store_error("list snapshots", e))?;
    row::decode_listed(rows, query)
}

const LIST_AUDIT: &str = "SELECT seq, data::text FROM holdpoint_audit \
     WHERE ($1::text IS NULL OR agent = $1) AND ($2::text IS NULL OR session_id = $2) \
       AND ($3::text IS NULL OR principal = $3) \
     ORDER BY seq DESC LIMIT $4";

/// `list_audit`: the filters of [`AuditQuery`], newest first.
pub(crate) async fn audit(pool: &PgPool, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
    let rows: Vec<(i64, String)> = sqlx::query_as(LIST_AUDIT)
        .bind(&query.agent)
        .bind(&query.session_id)
        .bind(&query.principal)
        .bind(row::sql_limit(query.limit()))
        .fetch_all(pool)
        .await
        .map_err(|e| store_error("list audit records", e))?;
    rows.into_iter().map(|(seq, d)| row::decode_audit(seq, &d)).collect()
}
