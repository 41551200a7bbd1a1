//! Standing grants (docs/reference.md §10.9) and the audited save of a
//! partial approval (§10.7). Writes run on the writer's connection inside
//! its `BEGIN IMMEDIATE` transaction (a savepoint of a batch), which holds
//! the database's write lock: a use is read, checked and rewritten with
//! its audit records before any other handle or process may write, so one
//! use is never spent twice.

use chrono::{DateTime, Utc};
use holdpoint::approval::{Grant, GrantQuery};
use holdpoint::session::AuditRecord;
use holdpoint::{Error, Result};
use holdpoint_store_sql::outbox::saturating_nanos;
use holdpoint_store_sql::row::sql_limit;
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::store_error;
use crate::write;

fn encode(grant: &Grant) -> Result<String> {
    serde_json::to_string(grant)
        .map_err(|e| Error::Internal(format!("sqlite store: grant {} does not encode: {e}", grant.id)))
}

fn decode(data: &str) -> Result<Grant> {
    serde_json::from_str(data)
        .map_err(|e| Error::Internal(format!("sqlite store: a stored grant does not decode: {e}")))
}

/// Stores a new grant (`FAILED_PRECONDITION` when its id is taken).
pub(crate) fn insert(conn: &Connection, grant: &Grant) -> Result<()> {
    let data = encode(grant)?;
    let written = conn
        .prepare_cached(
            "INSERT INTO holdpoint_grants (grant_id, agent, tool, created_at_ns, expires_at_ns, uses_left, revoked_at_ns, data) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (grant_id) DO NOTHING",
        )
        .and_then(|mut s| {
            s.execute(params![
                grant.id,
                grant.agent,
                grant.tool,
                saturating_nanos(grant.created_at),
                grant.expires_at.map(saturating_nanos),
                grant.uses_left,
                grant.revoked_at.map(saturating_nanos),
                data
            ])
        })
        .map_err(|e| store_error(&format!("store grant {}", grant.id), e))?;
    if written == 0 {
        return Err(Error::AlreadyExists(format!("grant {} exists already", grant.id)));
    }
    Ok(())
}

/// Grant `id`, as stored.
pub(crate) fn get(conn: &Connection, id: &str) -> Result<Option<Grant>> {
    let data: Option<String> = conn
        .prepare_cached("SELECT data FROM holdpoint_grants WHERE grant_id = ?1")
        .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
        .map_err(|e| store_error(&format!("read grant {id}"), e))?;
    data.as_deref().map(decode).transpose()
}

/// Rewrites `grant` (its document and lookup columns).
fn write_back(conn: &Connection, grant: &Grant) -> Result<()> {
    let data = encode(grant)?;
    conn.prepare_cached(
        "UPDATE holdpoint_grants SET uses_left = ?2, revoked_at_ns = ?3, data = ?4 WHERE grant_id = ?1",
    )
    .and_then(|mut s| {
        s.execute(params![
            grant.id,
            grant.uses_left,
            grant.revoked_at.map(saturating_nanos),
            data
        ])
    })
    .map_err(|e| store_error(&format!("write grant {}", grant.id), e))?;
    Ok(())
}

/// The grants `query` selects, newest first; the active filter runs in
/// SQL before the limit.
pub(crate) fn list(conn: &Connection, query: &GrantQuery) -> Result<Vec<Grant>> {
    let active = query.active_at.map(saturating_nanos);
    let rows: Vec<String> = conn
        .prepare_cached(
            "SELECT data FROM holdpoint_grants \
             WHERE (?1 IS NULL OR agent = ?1) AND (?2 IS NULL OR tool = ?2) \
             AND (?3 IS NULL OR (revoked_at_ns IS NULL AND (expires_at_ns IS NULL OR expires_at_ns > ?3) \
                  AND (uses_left IS NULL OR uses_left > 0))) \
             ORDER BY created_at_ns DESC, seq DESC LIMIT ?4",
        )
        .and_then(|mut s| {
            s.query_map(
                params![query.agent, query.tool, active, sql_limit(query.limit())],
                |r| r.get(0),
            )?
            .collect()
        })
        .map_err(|e| store_error("list grants", e))?;
    let grants: Vec<Grant> = rows.iter().map(|d| decode(d)).collect::<Result<_>>()?;
    Ok(grants.into_iter().filter(|g| query.matches(g)).collect())
}

/// Spends one use of grant `id` and appends `audit` (see
/// `GrantStore::use_grant`).
pub(crate) fn spend(conn: &Connection, id: &str, now: DateTime<Utc>, audit: &[AuditRecord]) -> Result<Option<Grant>> {
    let Some(next) = get(conn, id)?.and_then(|g| g.used_once(now)) else {
        return Ok(None);
    };
    let cols = write::audit_columns(audit)?;
    write_back(conn, &next)?;
    write::audit(conn, &cols).map_err(|e| store_error(&format!("append the audit records of grant {id}"), e))?;
    Ok(Some(next))
}

/// Revokes grant `id` (see `GrantStore::revoke_grant`).
pub(crate) fn revoke(conn: &Connection, id: &str, by: &str, at: DateTime<Utc>) -> Result<Option<Grant>> {
    let Some(grant) = get(conn, id)? else {
        return Ok(None);
    };
    match grant.revoked(by, at) {
        Some(next) => {
            write_back(conn, &next)?;
            Ok(Some(next))
        }
        None => Ok(Some(grant)),
    }
}
