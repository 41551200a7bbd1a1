//! Standing grants (docs/reference.md §10.9) and the audited save of a
//! partial approval (§10.7). A use or a revoke locks the grant's row
//! (`FOR UPDATE`) in a transaction, checks it and rewrites it with its
//! audit records before commit: replicas racing for one use wait for each
//! other at the lock, and the second sees it spent.

use chrono::{DateTime, Utc};
use holdpoint::approval::{Grant, GrantQuery};
use holdpoint::session::outbox::OutboxWrites;
use holdpoint::session::{AuditRecord, Snapshot, SnapshotUpdate};
use holdpoint::{Error, Result};
use holdpoint_store_sql::outbox::saturating_nanos;
use holdpoint_store_sql::row::sql_limit;
use sqlx::{PgConnection, PgPool};

use crate::error::store_error;
use crate::write;

fn encode(grant: &Grant) -> Result<String> {
    serde_json::to_string(grant)
        .map_err(|e| Error::Internal(format!("postgres store: grant {} does not encode: {e}", grant.id)))
}

fn decode(data: &str) -> Result<Grant> {
    serde_json::from_str(data)
        .map_err(|e| Error::Internal(format!("postgres store: a stored grant does not decode: {e}")))
}

/// Stores a new grant (`FAILED_PRECONDITION` when its id is taken).
pub(crate) async fn insert(pool: &PgPool, grant: &Grant) -> Result<()> {
    let data = encode(grant)?;
    let written = sqlx::query(
        "INSERT INTO holdpoint_grants (grant_id, agent, tool, created_at_ns, expires_at_ns, uses_left, revoked_at_ns, data) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (grant_id) DO NOTHING",
    )
    .bind(&grant.id)
    .bind(&grant.agent)
    .bind(&grant.tool)
    .bind(saturating_nanos(grant.created_at))
    .bind(grant.expires_at.map(saturating_nanos))
    .bind(grant.uses_left.map(i64::from))
    .bind(grant.revoked_at.map(saturating_nanos))
    .bind(data)
    .execute(pool)
    .await
    .map_err(|e| store_error(&format!("store grant {}", grant.id), e))?;
    if written.rows_affected() == 0 {
        return Err(Error::AlreadyExists(format!("grant {} exists already", grant.id)));
    }
    Ok(())
}

/// Grant `id`, as stored.
pub(crate) async fn get(pool: &PgPool, id: &str) -> Result<Option<Grant>> {
    let data: Option<String> = sqlx::query_scalar("SELECT data FROM holdpoint_grants WHERE grant_id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await
        .map_err(|e| store_error(&format!("read grant {id}"), e))?;
    data.as_deref().map(decode).transpose()
}

/// The grants `query` selects, newest first; the active filter runs in
/// SQL before the limit.
pub(crate) async fn list(pool: &PgPool, query: &GrantQuery) -> Result<Vec<Grant>> {
    let rows: Vec<String> = sqlx::query_scalar(
        "SELECT data FROM holdpoint_grants \
         WHERE ($1::text IS NULL OR agent = $1) AND ($2::text IS NULL OR tool = $2) \
         AND ($3::int8 IS NULL OR (revoked_at_ns IS NULL AND (expires_at_ns IS NULL OR expires_at_ns > $3) \
              AND (uses_left IS NULL OR uses_left > 0))) \
         ORDER BY created_at_ns DESC, seq DESC LIMIT $4",
    )
    .bind(query.agent.as_deref())
    .bind(query.tool.as_deref())
    .bind(query.active_at.map(saturating_nanos))
    .bind(sql_limit(query.limit()))
    .fetch_all(pool)
    .await
    .map_err(|e| store_error("list grants", e))?;
    let grants: Vec<Grant> = rows.iter().map(|d| decode(d)).collect::<Result<_>>()?;
    Ok(grants.into_iter().filter(|g| query.matches(g)).collect())
}

/// Grant `id`, locked until the transaction on `conn` ends.
async fn locked(conn: &mut PgConnection, id: &str) -> Result<Option<Grant>> {
    let data: Option<String> = sqlx::query_scalar("SELECT data FROM holdpoint_grants WHERE grant_id = $1 FOR UPDATE")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| store_error(&format!("lock grant {id}"), e))?;
    data.as_deref().map(decode).transpose()
}

/// Rewrites `grant` in the transaction on `conn`.
async fn write_back(conn: &mut PgConnection, grant: &Grant) -> Result<()> {
    sqlx::query("UPDATE holdpoint_grants SET uses_left = $2, revoked_at_ns = $3, data = $4 WHERE grant_id = $1")
        .bind(&grant.id)
        .bind(grant.uses_left.map(i64::from))
        .bind(grant.revoked_at.map(saturating_nanos))
        .bind(encode(grant)?)
        .execute(&mut *conn)
        .await
        .map_err(|e| store_error(&format!("write grant {}", grant.id), e))?;
    Ok(())
}

/// Spends one use of grant `id` and appends `audit` (see
/// `GrantStore::use_grant`).
pub(crate) async fn spend(pool: &PgPool, id: &str, now: DateTime<Utc>, audit: &[AuditRecord]) -> Result<Option<Grant>> {
    let what = format!("use grant {id}");
    let mut tx = pool.begin().await.map_err(|e| store_error(&what, e))?;
    let Some(next) = locked(&mut tx, id).await?.and_then(|g| g.used_once(now)) else {
        return Ok(None);
    };
    write_back(&mut tx, &next).await?;
    write::insert_audit(&mut tx, audit).await?;
    tx.commit().await.map_err(|e| store_error(&what, e))?;
    Ok(Some(next))
}

/// Revokes grant `id` (see `GrantStore::revoke_grant`).
pub(crate) async fn revoke(pool: &PgPool, id: &str, by: &str, at: DateTime<Utc>) -> Result<Option<Grant>> {
    let what = format!("revoke grant {id}");
    let mut tx = pool.begin().await.map_err(|e| store_error(&what, e))?;
    let Some(grant) = locked(&mut tx, id).await? else {
        return Ok(None);
    };
    let Some(next) = grant.revoked(by, at) else {
        return Ok(Some(grant));
    };
    write_back(&mut tx, &next).await?;
    tx.commit().await.map_err(|e| store_error(&what, e))?;
    Ok(Some(next))
}

/// Runs `update` on row `id` and, when it writes a row, commits it with
/// `audit` in one transaction (see `AuditStore::save_snapshot_audited`).
pub(crate) async fn save_audited(
    pool: &PgPool,
    id: &str,
    update: SnapshotUpdate,
    audit: &[AuditRecord],
    writes: OutboxWrites,
) -> Result<Option<Snapshot>> {
    let what = format!("save snapshot {id}");
    let mut tx = pool.begin().await.map_err(|e| store_error(&what, e))?;
    let Some(row) = write::save_in(&mut tx, id, update, writes).await? else {
        return Ok(None);
    };
    write::insert_audit(&mut tx, audit).await?;
    tx.commit().await.map_err(|e| store_error(&what, e))?;
    Ok(Some(row))
}
