//! Stopped notification endpoints and the outbox's counts
//! (docs/reference.md §11.3). Stops are written on the writer's connection
//! (inside its transaction); the counts are read on a reader.

use chrono::{DateTime, Utc};
use holdpoint::Result;
use holdpoint::session::{EndpointStop, OutboxStats};
use holdpoint_store_sql::outbox::{from_nanos, saturating_nanos};
use rusqlite::{Connection, params};

use crate::error::store_error;

/// Records (or replaces) a stop.
pub(crate) fn stop(conn: &Connection, stop: &EndpointStop) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO holdpoint_notify_endpoints (channel, fingerprint, reason, stopped_at_ns) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (channel) DO UPDATE SET fingerprint = excluded.fingerprint, reason = excluded.reason, \
         stopped_at_ns = excluded.stopped_at_ns",
    )
    .and_then(|mut s| {
        s.execute(params![
            stop.channel,
            stop.fingerprint,
            stop.reason,
            saturating_nanos(stop.stopped_at)
        ])
    })
    .map_err(|e| store_error("stop a notification endpoint", e))?;
    Ok(())
}

/// Every stop, by channel.
pub(crate) fn stopped(conn: &Connection) -> Result<Vec<EndpointStop>> {
    conn.prepare_cached(
        "SELECT channel, fingerprint, reason, stopped_at_ns FROM holdpoint_notify_endpoints ORDER BY channel",
    )
    .and_then(|mut s| {
        s.query_map([], |r| {
            Ok(EndpointStop {
                channel: r.get(0)?,
                fingerprint: r.get(1)?,
                reason: r.get(2)?,
                stopped_at: from_nanos(r.get(3)?),
            })
        })?
        .collect()
    })
    .map_err(|e| store_error("list stopped notification endpoints", e))
}

/// Deletes the stop of `channel`; whether there was one.
pub(crate) fn enable(conn: &Connection, channel: &str) -> Result<bool> {
    let n = conn
        .prepare_cached("DELETE FROM holdpoint_notify_endpoints WHERE channel = ?1")
        .and_then(|mut s| s.execute([channel]))
        .map_err(|e| store_error("re-enable a notification endpoint", e))?;
    Ok(n > 0)
}

/// The outbox's counts at `now`.
pub(crate) fn stats(conn: &Connection, now: DateTime<Utc>) -> Result<OutboxStats> {
    let (due, retrying, dead, oldest): (i64, i64, i64, Option<i64>) = conn
        .prepare_cached(
            "SELECT \
               COUNT(*) FILTER (WHERE state = 'pending' AND due_at_ns <= ?1), \
               COUNT(*) FILTER (WHERE state = 'pending' AND COALESCE(json_extract(data, '$.attempts'), 0) > 0), \
               COUNT(*) FILTER (WHERE state = 'dead'), \
               MIN(due_at_ns) FILTER (WHERE state = 'pending' AND due_at_ns <= ?1) \
             FROM holdpoint_outbox WHERE state IN ('pending', 'dead')",
        )
        .and_then(|mut s| {
            s.query_row([saturating_nanos(now)], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
        })
        .map_err(|e| store_error("count outbox events", e))?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(OutboxStats {
        due: count(due),
        retrying: count(retrying),
        dead: count(dead),
        oldest_due: oldest.map(from_nanos),
    })
}
