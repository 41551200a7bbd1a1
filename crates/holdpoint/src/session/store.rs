//! The `SessionStore` trait: where server-managed agents keep snapshots.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::Utc;
use futures::stream::BoxStream;

use super::snapshot::{Snapshot, SnapshotStatus};
use crate::error::{Error, Result};

/// The read-modify-write step of [`SessionStore::save_snapshot`]: it gets
/// the current row (or `None`) and returns the row to write, `None` to
/// write nothing, or an error that aborts the save with nothing written.
pub type SnapshotUpdate = Box<dyn FnOnce(Option<&Snapshot>) -> Result<Option<Snapshot>> + Send>;

/// A store of session snapshots.
///
/// Implementations must make [`save_snapshot`](Self::save_snapshot) atomic
/// (two concurrent saves of one id never both see the same old row), keep
/// the session id of an existing row, return copies rather than aliases,
/// and report status changes to [`watch_status`](Self::watch_status)
/// subscribers. The `holdpoint-testkit` store suite checks all of it.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// The snapshot with this id, with its status as read now
    /// (see [`Snapshot::as_read`]).
    async fn get_snapshot(&self, snapshot_id: &str) -> Result<Option<Snapshot>>;

    /// The session's snapshot with the greatest `createdAt` (any status);
    /// ties go to the greatest snapshot id.
    async fn get_latest_snapshot(&self, session_id: &str) -> Result<Option<Snapshot>>;

    /// Atomic read-modify-write of one row. With `snapshot_id` `None` (or
    /// empty) the store mints a fresh id and `update` gets `None`. Returns
    /// the row written, or `None` when `update` chose to write nothing.
    ///
    /// The written row keeps the caller's timestamps; its `snapshotId` is
    /// the saved id; a row without a session id is an error; the session id
    /// of an existing row never changes.
    async fn save_snapshot(&self, snapshot_id: Option<&str>, update: SnapshotUpdate) -> Result<Option<Snapshot>>;

    /// The row's status now, then each change (changes may be coalesced).
    /// The stream ends when the row does not exist, and stops when dropped.
    async fn watch_status(&self, snapshot_id: &str) -> Result<BoxStream<'static, SnapshotStatus>>;

    /// Requests an abort: `pending` becomes `aborting` (the worker then
    /// writes `aborted`); other rows are unchanged. Returns the status the
    /// row had, or `None` when there is no such row.
    async fn abort(&self, snapshot_id: &str) -> Result<Option<SnapshotStatus>> {
        let previous: Arc<Mutex<Option<SnapshotStatus>>> = Arc::default();
        let seen = Arc::clone(&previous);
        self.save_snapshot(
            Some(snapshot_id),
            Box::new(move |existing| {
                let Some(row) = existing else {
                    return Ok(None);
                };
                let status = row.read_status(Utc::now());
                *seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(status);
                if status != SnapshotStatus::Pending && status != SnapshotStatus::Expired {
                    return Ok(None);
                }
                let mut next = row.clone();
                next.status = SnapshotStatus::Aborting;
                next.updated_at = Utc::now();
                Ok(Some(next))
            }),
        )
        .await?;
        let status = *previous.lock().unwrap_or_else(|e| e.into_inner());
        Ok(status)
    }
}

/// Checks and completes a row an update returned, for store implementations:
/// sets its id, and refuses a missing or changed session id.
pub fn prepare_row(id: &str, existing: Option<&Snapshot>, mut next: Snapshot) -> Result<Snapshot> {
    if next.session_id.is_empty() {
        return Err(Error::InvalidArgument("a snapshot needs a session id".into()));
    }
    if let Some(old) = existing
        && old.session_id != next.session_id
    {
        return Err(Error::FailedPrecondition(format!(
            "snapshot {id} belongs to session {}; its session id cannot change",
            old.session_id
        )));
    }
    next.snapshot_id = id.to_owned();
    if next.status == SnapshotStatus::Expired {
        next.status = SnapshotStatus::Pending;
    }
    Ok(next)
}

/// A fresh snapshot id.
pub fn mint_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
