//! The prune step's statements (docs/reference.md §11.4), in SQL both
//! dialects share (parameters spelled by the driver's [`Dialect`]): the walk over sessions in id order with each one's latest
//! row, and the deletes and counts of one session's rows.

use chrono::{DateTime, Utc};
use holdpoint::Result;
use holdpoint::session::{SnapshotStatus, prunable};

use crate::row::{Dialect, corrupt_row};

/// The next `batch` sessions after an id (parameter 1, `''` for the
/// first) with each one's latest row (greatest `createdAt`, then greatest
/// id): `session_id, status, finish_reason, updated_at_ns, created_at_ns`,
/// in session-id order. The inner walk reads the session index in order
/// and stops after `batch` sessions (parameter 2).
pub fn candidates_sql(dialect: impl Dialect) -> String {
    let (after, batch) = (dialect.parameter(1), dialect.parameter(2));
    format!(
        "SELECT t.session_id, t.status, t.finish_reason, t.updated_at_ns, t.created_at_ns \
         FROM (SELECT DISTINCT session_id FROM holdpoint_snapshots WHERE session_id > {after} \
               ORDER BY session_id LIMIT {batch}) s \
         JOIN holdpoint_snapshots t ON t.snapshot_id = \
              (SELECT l.snapshot_id FROM holdpoint_snapshots l WHERE l.session_id = s.session_id \
               ORDER BY l.created_at_ns DESC, l.snapshot_id DESC LIMIT 1) \
         ORDER BY t.session_id"
    )
}

/// One session's rows up to its latest (parameter 1 the session, 2 the
/// latest row's `created_at_ns`): a row written after the walk read the
/// session is newer, and stays.
pub fn snapshots_where(dialect: impl Dialect) -> String {
    format!(
        "FROM holdpoint_snapshots WHERE session_id = {} AND created_at_ns <= {}",
        dialect.parameter(1),
        dialect.parameter(2)
    )
}

/// One session's audit records (parameter 1 the session).
pub fn audit_where(dialect: impl Dialect) -> String {
    format!("FROM holdpoint_audit WHERE session_id = {}", dialect.parameter(1))
}

/// A session the walk read, with the columns of its latest row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The session.
    pub session_id: String,
    /// Its latest row's `status` column.
    pub status: String,
    /// Its latest row's `finish_reason` column.
    pub finish_reason: Option<String>,
    /// Its latest row's `updated_at_ns`.
    pub updated_at_ns: i64,
    /// Its latest row's `created_at_ns`: the newest row a delete takes.
    pub created_at_ns: i64,
}

impl Candidate {
    /// Whether the session may be pruned ([`prunable`] over the columns).
    pub fn prunable(&self, older_than: DateTime<Utc>) -> Result<bool> {
        let status: SnapshotStatus =
            serde_json::from_value(serde_json::Value::String(self.status.clone())).map_err(|e| {
                corrupt_row(
                    &format!("status of the latest snapshot of session {}", self.session_id),
                    e,
                )
            })?;
        Ok(prunable(
            &self.session_id,
            status,
            self.finish_reason.as_deref() == Some("interrupted"),
            DateTime::from_timestamp_nanos(self.updated_at_ns),
            older_than,
        ))
    }
}
