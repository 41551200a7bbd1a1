//! Outbox rows as SQL table rows (docs/reference.md §11.3): the event as a JSON
//! document plus the columns the claim and the listings look rows up by.
//! The document is authoritative; the claim token lives only in its
//! column (never in listings).

use chrono::{DateTime, Utc};
use holdpoint::session::outbox::OutboxWrites;
use holdpoint::session::{OutboxEvent, OutboxState};
use holdpoint::{Error, Result};

use crate::row::corrupt_row;

/// The column values of one outbox row.
pub struct OutboxColumns {
    /// The event's id.
    pub event_id: String,
    /// The snapshot it is about.
    pub snapshot_id: String,
    /// The state's wire name.
    pub state: &'static str,
    /// `dueAt`, nanoseconds since the epoch (saturating).
    pub due_at_ns: i64,
    /// `leaseUntil`, nanoseconds since the epoch (saturating).
    pub lease_until_ns: Option<i64>,
    /// The whole event as JSON.
    pub data: String,
}

impl OutboxColumns {
    /// The columns of `event`.
    pub fn of(event: &OutboxEvent) -> Result<Self> {
        Ok(OutboxColumns {
            event_id: event.id.clone(),
            snapshot_id: event.snapshot_id.clone(),
            state: event.state.as_str(),
            due_at_ns: saturating_nanos(event.due_at),
            lease_until_ns: event.lease_until.map(saturating_nanos),
            data: serde_json::to_string(event)
                .map_err(|e| Error::Internal(format!("outbox event {} does not encode: {e}", event.id)))?,
        })
    }
}

/// The columns of the `events` that `writes` keeps (a store's
/// `outbox_writes`), each checked before anything is written.
pub fn columns(events: &[OutboxEvent], writes: OutboxWrites) -> Result<Vec<OutboxColumns>> {
    events
        .iter()
        .filter(|e| writes.writes(&e.kind))
        .map(OutboxColumns::of)
        .collect()
}

/// Decodes the `data` column of an outbox row.
pub fn decode_outbox(data: &str) -> Result<OutboxEvent> {
    serde_json::from_str(data).map_err(|e| corrupt_row("outbox event", e))
}

/// `t` as nanoseconds since the epoch, clamped to the `i64` range (a
/// deadline past 2262 is "never" either way).
pub fn saturating_nanos(t: DateTime<Utc>) -> i64 {
    t.timestamp_nanos_opt()
        .unwrap_or(if t.timestamp() < 0 { i64::MIN } else { i64::MAX })
}

/// The state filter of an outbox listing as its wire name.
pub fn state_name(state: Option<OutboxState>) -> Option<&'static str> {
    state.map(OutboxState::as_str)
}

/// Nanoseconds since the epoch as a time (the inverse of
/// [`saturating_nanos`]).
pub fn from_nanos(ns: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(ns)
}
