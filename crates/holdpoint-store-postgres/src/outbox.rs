//! The outbox statements (docs/reference.md §11.3): inserts inside the
//! transaction of the change they report, the claim with
//! `FOR UPDATE SKIP LOCKED` and a lease (so replicas never claim one row at
//! once and never wait for each other), settles, retries and listings.

use chrono::{DateTime, Utc};
use holdpoint::session::OutboxSettle;
use holdpoint::session::outbox::OutboxWrites;
use holdpoint::session::outbox::{apply_outcome, apply_retry, lease_lost};
use holdpoint::session::{OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, lease_end, mint_id};
use holdpoint::{Error, Result};
use holdpoint_store_sql::outbox::{OutboxColumns, decode_outbox, saturating_nanos, state_name};
use holdpoint_store_sql::row::sql_limit;
use sqlx::{PgConnection, PgPool};

use crate::error::store_error;

const INSERT: &str = "INSERT INTO holdpoint_outbox (event_id, snapshot_id, state, due_at_ns, lease_until_ns, data) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::text[]::json[])";

pub(crate) use holdpoint_store_sql::outbox::columns;

/// Appends outbox rows in the transaction on `conn`.
pub(crate) async fn insert(conn: &mut PgConnection, rows: &[OutboxColumns]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    sqlx::query(INSERT)
        .bind(rows.iter().map(|r| r.event_id.as_str()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.snapshot_id.as_str()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.state).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.due_at_ns).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.lease_until_ns).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.data.as_str()).collect::<Vec<_>>())
        .execute(conn)
        .await
        .map_err(|e| store_error("append outbox events", e))?;
    Ok(())
}

/// Writes `event` back (document and lookup columns) with `token` as its
/// claim.
async fn write_back(conn: &mut PgConnection, event: &OutboxEvent, token: Option<&str>) -> Result<()> {
    let cols = OutboxColumns::of(event)?;
    sqlx::query(
        "UPDATE holdpoint_outbox SET state = $2, due_at_ns = $3, lease_until_ns = $4, lease_token = $5, \
         data = $6::json WHERE event_id = $1",
    )
    .bind(&cols.event_id)
    .bind(cols.state)
    .bind(cols.due_at_ns)
    .bind(cols.lease_until_ns)
    .bind(token)
    .bind(&cols.data)
    .execute(conn)
    .await
    .map_err(|e| store_error(&format!("write outbox event {}", event.id), e))?;
    Ok(())
}

/// Claims up to `limit` due rows (see `OutboxStore::claim_outbox`) in
/// one statement: rows another replica holds locked are skipped, not
/// waited for, and each claimed row's lease, token and attempt count are
/// written in the same statement (the batch shares one fresh token, which
/// no other claim has).
pub(crate) async fn claim(
    pool: &PgPool,
    now: DateTime<Utc>,
    limit: usize,
    lease: std::time::Duration,
) -> Result<Vec<OutboxLease>> {
    let now_ns = saturating_nanos(now);
    let until = lease_end(now, lease);
    let token = mint_id();
    let claimed: Vec<String> = sqlx::query_scalar(
        "WITH due AS (SELECT seq FROM holdpoint_outbox \
           WHERE state = 'pending' AND due_at_ns <= $1 AND (lease_until_ns IS NULL OR lease_until_ns <= $1) \
           ORDER BY due_at_ns LIMIT $2 FOR UPDATE SKIP LOCKED) \
         UPDATE holdpoint_outbox o SET lease_until_ns = $3, lease_token = $4, \
           data = (o.data::jsonb || jsonb_build_object( \
             'attempts', COALESCE((o.data->>'attempts')::int8, 0) + 1, 'leaseUntil', $5::text))::json \
         FROM due WHERE o.seq = due.seq RETURNING o.data::text",
    )
    .bind(now_ns)
    .bind(sql_limit(limit))
    .bind(saturating_nanos(until))
    .bind(&token)
    .bind(until.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
    .fetch_all(pool)
    .await
    .map_err(|e| store_error("claim outbox events", e))?;
    let mut out = claimed
        .iter()
        .map(|d| {
            Ok(OutboxLease {
                event: decode_outbox(d)?,
                token: token.clone(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    out.sort_by_key(|l| l.event.due_at);
    Ok(out)
}

/// Row `id`'s document and claim token, locked until the transaction ends.
async fn locked(conn: &mut PgConnection, id: &str) -> Result<Option<(OutboxEvent, Option<String>)>> {
    let found: Option<(String, Option<String>)> =
        sqlx::query_as("SELECT data::text, lease_token FROM holdpoint_outbox WHERE event_id = $1 FOR UPDATE")
            .bind(id)
            .fetch_optional(conn)
            .await
            .map_err(|e| store_error(&format!("read outbox event {id}"), e))?;
    found.map(|(d, t)| Ok((decode_outbox(&d)?, t))).transpose()
}

/// Ends a claimed row's attempt (see `OutboxStore::settle_outbox`).
pub(crate) async fn settle(pool: &PgPool, id: &str, token: &str, outcome: OutboxOutcome) -> Result<()> {
    let err = |e| store_error(&format!("settle outbox event {id}"), e);
    let mut tx = pool.begin().await.map_err(err)?;
    let Some((mut event, held)) = locked(&mut tx, id).await? else {
        return Err(Error::NotFound(format!("outbox event {id} not found")));
    };
    if held.as_deref() != Some(token) {
        return Err(lease_lost(id));
    }
    apply_outcome(&mut event, outcome);
    write_back(&mut tx, &event, None).await?;
    tx.commit().await.map_err(err)
}

/// Ends a batch of claimed rows' attempts in one transaction (see
/// `OutboxStore::settle_outbox_batch`): the rows are read and locked with
/// one statement and written back with another.
pub(crate) async fn settle_batch(pool: &PgPool, settles: Vec<OutboxSettle>) -> Result<Vec<Result<()>>> {
    let err = |e| store_error("settle outbox events", e);
    if settles.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = settles.iter().map(|s| s.id.as_str()).collect();
    let mut tx = pool.begin().await.map_err(err)?;
    let found: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT event_id, data::text, lease_token FROM holdpoint_outbox WHERE event_id = ANY($1) \
         ORDER BY event_id FOR UPDATE",
    )
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await
    .map_err(err)?;
    let mut rows: std::collections::HashMap<String, (String, Option<String>)> =
        found.into_iter().map(|(id, d, t)| (id, (d, t))).collect();
    let mut out = Vec::with_capacity(settles.len());
    let mut written = Vec::new();
    for s in settles {
        let Some((data, held)) = rows.remove(&s.id) else {
            out.push(Err(Error::NotFound(format!("outbox event {} not found", s.id))));
            continue;
        };
        if held.as_deref() != Some(s.token.as_str()) {
            out.push(Err(lease_lost(&s.id)));
            continue;
        }
        let mut event = decode_outbox(&data)?;
        apply_outcome(&mut event, s.outcome);
        written.push(OutboxColumns::of(&event)?);
        out.push(Ok(()));
    }
    if !written.is_empty() {
        sqlx::query(
            "UPDATE holdpoint_outbox o SET state = u.state, due_at_ns = u.due_at_ns, lease_until_ns = NULL, \
             lease_token = NULL, data = u.data::json \
             FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[]) AS u(event_id, state, due_at_ns, data) \
             WHERE o.event_id = u.event_id",
        )
        .bind(written.iter().map(|r| r.event_id.as_str()).collect::<Vec<_>>())
        .bind(written.iter().map(|r| r.state).collect::<Vec<_>>())
        .bind(written.iter().map(|r| r.due_at_ns).collect::<Vec<_>>())
        .bind(written.iter().map(|r| r.data.as_str()).collect::<Vec<_>>())
        .execute(&mut *tx)
        .await
        .map_err(err)?;
    }
    tx.commit().await.map_err(err)?;
    Ok(out)
}

/// An operator's retry of row `id`.
pub(crate) async fn retry(pool: &PgPool, id: &str) -> Result<Option<OutboxEvent>> {
    let err = |e| store_error(&format!("retry outbox event {id}"), e);
    let mut tx = pool.begin().await.map_err(err)?;
    let Some((mut event, _)) = locked(&mut tx, id).await? else {
        return Ok(None);
    };
    let stopped: Vec<String> = sqlx::query_scalar("SELECT channel FROM holdpoint_notify_endpoints")
        .fetch_all(&mut *tx)
        .await
        .map_err(err)?;
    let enabled = apply_retry(&mut event, Utc::now(), &stopped);
    write_back(&mut tx, &event, None).await?;
    if !enabled.is_empty() {
        sqlx::query("DELETE FROM holdpoint_notify_endpoints WHERE channel = ANY($1)")
            .bind(&enabled)
            .execute(&mut *tx)
            .await
            .map_err(err)?;
    }
    tx.commit().await.map_err(err)?;
    Ok(Some(event))
}

/// Writes rows on their own: rows enqueued by name are written whatever
/// the handle's `outbox_writes`, as the in-memory store does.
pub(crate) async fn enqueue(pool: &PgPool, events: &[OutboxEvent]) -> Result<()> {
    let cols = columns(events, OutboxWrites::All)?;
    let mut conn = pool
        .acquire()
        .await
        .map_err(|e| store_error("append outbox events", e))?;
    insert(&mut conn, &cols).await
}

/// The rows `query` selects, oldest due first.
pub(crate) async fn list(pool: &PgPool, query: &OutboxQuery) -> Result<Vec<OutboxEvent>> {
    let rows: Vec<String> = sqlx::query_scalar(
        "SELECT data::text FROM holdpoint_outbox \
         WHERE ($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR snapshot_id = $2) \
         AND (NOT $5 OR (data->>'lastError') IS NOT NULL) \
         ORDER BY due_at_ns, seq LIMIT $3 OFFSET $4",
    )
    .bind(state_name(query.state))
    .bind(&query.snapshot_id)
    .bind(sql_limit(query.limit()))
    .bind(sql_limit(query.offset()))
    .bind(query.retrying)
    .fetch_all(pool)
    .await
    .map_err(|e| store_error("list outbox events", e))?;
    rows.iter().map(|d| decode_outbox(d)).collect()
}
