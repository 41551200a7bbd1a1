//! The outbox statements (docs/reference.md §11.3): inserts inside the
//! transaction of the change they report, the claim with
//! `FOR UPDATE SKIP LOCKED` and a lease (so replicas never claim one row at
//! once and never wait for each other), settles, retries and listings.

use chrono::{DateTime, Utc};
use holdpoint::session::outbox::{apply_outcome, apply_retry, lease_lost};
use holdpoint::session::{OutboxEvent, OutboxLease, OutboxOutcome, OutboxQuery, lease_end, mint_id};
use holdpoint::{Error, Result};
use holdpoint_store_sql::outbox::{OutboxColumns, decode_outbox, saturating_nanos, state_name};
use holdpoint_store_sql::row::sql_limit;
use sqlx::{PgConnection, PgPool};

use crate::error::store_error;

const INSERT: &str = "INSERT INTO holdpoint_outbox (event_id, snapshot_id, state, due_at_ns, lease_until_ns, data) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::text[]::json[])";

/// The columns of `events`, checked before anything is written.
pub(crate) fn columns(events: &[OutboxEvent]) -> Result<Vec<OutboxColumns>> {
    events.iter().map(OutboxColumns::of).collect()
}

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

/// Claims up to `limit` due rows (see `SessionStore::claim_outbox`): rows
/// another replica holds locked are skipped, not waited for.
pub(crate) async fn claim(
    pool: &PgPool,
    now: DateTime<Utc>,
    limit: usize,
    lease: std::time::Duration,
) -> Result<Vec<OutboxLease>> {
    let err = |e| store_error("claim outbox events", e);
    let now_ns = saturating_nanos(now);
    let until = lease_end(now, lease);
    let mut tx = pool.begin().await.map_err(err)?;
    let due: Vec<String> = sqlx::query_scalar(
        "SELECT data::text FROM holdpoint_outbox \
         WHERE state = 'pending' AND due_at_ns <= $1 AND (lease_until_ns IS NULL OR lease_until_ns <= $1) \
         ORDER BY due_at_ns LIMIT $2 FOR UPDATE SKIP LOCKED",
    )
    .bind(now_ns)
    .bind(sql_limit(limit))
    .fetch_all(&mut *tx)
    .await
    .map_err(err)?;
    let mut out = Vec::with_capacity(due.len());
    for data in due {
        let mut event = decode_outbox(&data)?;
        event.lease_until = Some(until);
        event.attempts = event.attempts.saturating_add(1);
        let token = mint_id();
        write_back(&mut tx, &event, Some(&token)).await?;
        out.push(OutboxLease { event, token });
    }
    tx.commit().await.map_err(err)?;
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

/// Ends a claimed row's attempt (see `SessionStore::settle_outbox`).
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

/// An operator's retry of row `id`.
pub(crate) async fn retry(pool: &PgPool, id: &str) -> Result<Option<OutboxEvent>> {
    let err = |e| store_error(&format!("retry outbox event {id}"), e);
    let mut tx = pool.begin().await.map_err(err)?;
    let Some((mut event, _)) = locked(&mut tx, id).await? else {
        return Ok(None);
    };
    apply_retry(&mut event, Utc::now());
    write_back(&mut tx, &event, None).await?;
    tx.commit().await.map_err(err)?;
    Ok(Some(event))
}

/// Writes rows on their own.
pub(crate) async fn enqueue(pool: &PgPool, events: &[OutboxEvent]) -> Result<()> {
    let cols = columns(events)?;
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
         ORDER BY due_at_ns, seq LIMIT $3",
    )
    .bind(state_name(query.state))
    .bind(&query.snapshot_id)
    .bind(sql_limit(query.limit()))
    .fetch_all(pool)
    .await
    .map_err(|e| store_error("list outbox events", e))?;
    rows.iter().map(|d| decode_outbox(d)).collect()
}
