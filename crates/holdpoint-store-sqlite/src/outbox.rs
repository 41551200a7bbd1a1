//! The outbox statements (docs/reference.md §11.3): inserts that run inside
//! the transaction of the change they report, the claim by
//! compare-and-set on the lease columns, settles, retries and listings.
//! Writes run on the writer's connection inside its `BEGIN IMMEDIATE`
//! transaction, which holds the database's write lock: two handles or
//! processes never claim one row at once.

use chrono::{DateTime, Utc};
use holdpoint::session::OutboxSettle;
use holdpoint::session::outbox::{apply_outcome, apply_retry, lease_lost};
use holdpoint::session::{OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, lease_end, mint_id};
use holdpoint::{Error, Result};
use holdpoint_store_sql::outbox::{OutboxColumns, decode_outbox, saturating_nanos, state_name};
use holdpoint_store_sql::row::sql_limit;
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::store_error;

pub(crate) use holdpoint_store_sql::outbox::columns;

/// Appends outbox rows.
pub(crate) fn insert(conn: &Connection, rows: &[OutboxColumns]) -> rusqlite::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached(
        "INSERT INTO holdpoint_outbox (event_id, snapshot_id, state, due_at_ns, lease_until_ns, data) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for row in rows {
        stmt.execute(params![
            row.event_id,
            row.snapshot_id,
            row.state,
            row.due_at_ns,
            row.lease_until_ns,
            row.data
        ])?;
    }
    Ok(())
}

/// Writes `event` back (document and lookup columns) with `token` as its
/// claim.
fn write_back(conn: &Connection, event: &OutboxEvent, token: Option<&str>) -> Result<()> {
    let cols = OutboxColumns::of(event)?;
    conn.prepare_cached(
        "UPDATE holdpoint_outbox SET state = ?2, due_at_ns = ?3, lease_until_ns = ?4, lease_token = ?5, data = ?6 \
         WHERE event_id = ?1",
    )
    .and_then(|mut s| {
        s.execute(params![
            cols.event_id,
            cols.state,
            cols.due_at_ns,
            cols.lease_until_ns,
            token,
            cols.data
        ])
    })
    .map_err(|e| store_error(&format!("write outbox event {}", event.id), e))?;
    Ok(())
}

/// Claims up to `limit` due rows (see `OutboxStore::claim_outbox`).
pub(crate) fn claim(
    conn: &Connection,
    now: DateTime<Utc>,
    limit: usize,
    lease: std::time::Duration,
) -> Result<Vec<OutboxLease>> {
    let now_ns = saturating_nanos(now);
    let until = lease_end(now, lease);
    let until_ns = saturating_nanos(until);
    let due: Vec<(String, String)> = conn
        .prepare_cached(
            "SELECT event_id, data FROM holdpoint_outbox \
             WHERE state = 'pending' AND due_at_ns <= ?1 AND (lease_until_ns IS NULL OR lease_until_ns <= ?1) \
             ORDER BY due_at_ns LIMIT ?2",
        )
        .and_then(|mut s| {
            s.query_map(params![now_ns, sql_limit(limit)], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .map_err(|e| store_error("claim outbox events", e))?;
    let mut out = Vec::with_capacity(due.len());
    for (id, data) in due {
        let mut event = decode_outbox(&data)?;
        event.lease_until = Some(until);
        event.attempts = event.attempts.saturating_add(1);
        let token = mint_id();
        let cols = OutboxColumns::of(&event)?;
        // Compare-and-set: the row is taken only while its lease is free.
        let taken = conn
            .prepare_cached(
                "UPDATE holdpoint_outbox SET lease_until_ns = ?2, lease_token = ?3, data = ?4 \
                 WHERE event_id = ?1 AND state = 'pending' AND (lease_until_ns IS NULL OR lease_until_ns <= ?5)",
            )
            .and_then(|mut s| s.execute(params![id, until_ns, token, cols.data, now_ns]))
            .map_err(|e| store_error(&format!("claim outbox event {id}"), e))?;
        if taken == 1 {
            out.push(OutboxLease { event, token });
        }
    }
    Ok(out)
}

/// Row `id`'s document and claim token.
fn stored(conn: &Connection, id: &str) -> Result<Option<(OutboxEvent, Option<String>)>> {
    let found: Option<(String, Option<String>)> = conn
        .prepare_cached("SELECT data, lease_token FROM holdpoint_outbox WHERE event_id = ?1")
        .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(|e| store_error(&format!("read outbox event {id}"), e))?;
    found.map(|(d, t)| Ok((decode_outbox(&d)?, t))).transpose()
}

/// Ends a claimed row's attempt (see `OutboxStore::settle_outbox`).
pub(crate) fn settle(conn: &Connection, id: &str, token: &str, outcome: OutboxOutcome) -> Result<()> {
    let Some((mut event, held)) = stored(conn, id)? else {
        return Err(Error::NotFound(format!("outbox event {id} not found")));
    };
    if held.as_deref() != Some(token) {
        return Err(lease_lost(id));
    }
    apply_outcome(&mut event, outcome);
    write_back(conn, &event, None)
}

/// Ends a batch of claimed rows' attempts, all in the writer's one
/// transaction (see `OutboxStore::settle_outbox_batch`); a settle whose
/// claim was lost fails alone.
pub(crate) fn settle_batch(conn: &Connection, settles: Vec<OutboxSettle>) -> Result<Vec<Result<()>>> {
    Ok(settles
        .into_iter()
        .map(|s| settle(conn, &s.id, &s.token, s.outcome))
        .collect())
}

/// An operator's retry of row `id`.
pub(crate) fn retry(conn: &Connection, id: &str) -> Result<Option<OutboxEvent>> {
    let Some((mut event, _)) = stored(conn, id)? else {
        return Ok(None);
    };
    let stopped: Vec<String> = conn
        .prepare_cached("SELECT channel FROM holdpoint_notify_endpoints")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| store_error("list stopped notification endpoints", e))?;
    let enabled = apply_retry(&mut event, Utc::now(), &stopped);
    write_back(conn, &event, None)?;
    for channel in &enabled {
        crate::endpoints::enable(conn, channel)?;
    }
    Ok(Some(event))
}

/// The rows `query` selects, oldest due first.
pub(crate) fn list(conn: &Connection, query: &OutboxQuery) -> Result<Vec<OutboxEvent>> {
    let state = state_name(query.state);
    let rows: Vec<String> = conn
        .prepare_cached(
            "SELECT data FROM holdpoint_outbox \
             WHERE (?1 IS NULL OR state = ?1) AND (?2 IS NULL OR snapshot_id = ?2) \
             AND (?5 = 0 OR json_extract(data, '$.lastError') IS NOT NULL) \
             ORDER BY due_at_ns, seq LIMIT ?3 OFFSET ?4",
        )
        .and_then(|mut s| {
            let page = params![
                state,
                query.snapshot_id,
                sql_limit(query.limit()),
                sql_limit(query.offset()),
                query.retrying
            ];
            s.query_map(page, |r| r.get(0))?.collect()
        })
        .map_err(|e| store_error("list outbox events", e))?;
    rows.iter().map(|d| decode_outbox(d)).collect()
}
