//! Stopped notification endpoints and the outbox's counts
//! (docs/reference.md §11.3).

use chrono::{DateTime, Utc};
use holdpoint::Result;
use holdpoint::session::{EndpointStop, OutboxStats};
use holdpoint_store_sql::outbox::{from_nanos, saturating_nanos};
use sqlx::PgPool;

use crate::error::store_error;

/// Records (or replaces) a stop.
pub(crate) async fn stop(pool: &PgPool, stop: &EndpointStop) -> Result<()> {
    sqlx::query(
        "INSERT INTO holdpoint_notify_endpoints (channel, fingerprint, reason, stopped_at_ns) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (channel) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, reason = EXCLUDED.reason, \
         stopped_at_ns = EXCLUDED.stopped_at_ns",
    )
    .bind(&stop.channel)
    .bind(&stop.fingerprint)
    .bind(&stop.reason)
    .bind(saturating_nanos(stop.stopped_at))
    .execute(pool)
    .await
    .map_err(|e| store_error("stop a notification endpoint", e))?;
    Ok(())
}

/// Every stop, by channel.
pub(crate) async fn stopped(pool: &PgPool) -> Result<Vec<EndpointStop>> {
    let rows: Vec<(String, String, String, i64)> = sqlx::query_as(
        "SELECT channel, fingerprint, reason, stopped_at_ns FROM holdpoint_notify_endpoints ORDER BY channel",
    )
    .fetch_all(pool)
    .await
    .map_err(|e| store_error("list stopped notification endpoints", e))?;
    Ok(rows
        .into_iter()
        .map(|(channel, fingerprint, reason, at)| EndpointStop {
            channel,
            fingerprint,
            reason,
            stopped_at: from_nanos(at),
        })
        .collect())
}

/// Deletes the stop of `channel`; whether there was one.
pub(crate) async fn enable(pool: &PgPool, channel: &str) -> Result<bool> {
    let done = sqlx::query("DELETE FROM holdpoint_notify_endpoints WHERE channel = $1")
        .bind(channel)
        .execute(pool)
        .await
        .map_err(|e| store_error("re-enable a notification endpoint", e))?;
    Ok(done.rows_affected() > 0)
}

/// The outbox's counts at `now`, from the lookup columns and the
/// documents' attempt counts.
pub(crate) async fn stats(pool: &PgPool, now: DateTime<Utc>) -> Result<OutboxStats> {
    let (due, retrying, dead, oldest): (i64, i64, i64, Option<i64>) = sqlx::query_as(
        "SELECT \
           COUNT(*) FILTER (WHERE state = 'pending' AND due_at_ns <= $1), \
           COUNT(*) FILTER (WHERE state = 'pending' AND COALESCE((data->>'attempts')::int8, 0) > 0), \
           COUNT(*) FILTER (WHERE state = 'dead'), \
           MIN(due_at_ns) FILTER (WHERE state = 'pending' AND due_at_ns <= $1) \
         FROM holdpoint_outbox WHERE state IN ('pending', 'dead')",
    )
    .bind(saturating_nanos(now))
    .fetch_one(pool)
    .await
    .map_err(|e| store_error("count outbox events", e))?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(OutboxStats {
        due: count(due),
        retrying: count(retrying),
        dead: count(dead),
        oldest_due: oldest.map(from_nanos),
    })
}
