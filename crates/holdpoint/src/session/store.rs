//! The `SessionStore` trait: where server-managed agents keep snapshots.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::Utc;
use futures::stream::BoxStream;

use super::audit::{AuditQuery, AuditRecord, SnapshotQuery};
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

    /// Snapshots matching `query`, newest first (see [`SnapshotQuery`];
    /// `waiting_only` keeps only the latest snapshot of each session, and
    /// only when it is waiting for an answer).
    async fn list_snapshots(&self, query: &SnapshotQuery) -> Result<Vec<Snapshot>> {
        let _ = query;
        Err(unsupported("list snapshots"))
    }

    /// Appends audit records.
    async fn append_audit(&self, records: Vec<AuditRecord>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        Err(unsupported("keep an audit trail"))
    }

    /// Audit records matching `query`, newest first.
    async fn list_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        let _ = query;
        Err(unsupported("keep an audit trail"))
    }

    /// The exactly-once guard of a resume (SPEC §9.1): marks the snapshot
    /// as resumed, failing with `ABORTED` ("already resumed") when it was,
    /// and appends `audit` — in one transaction in durable stores. The
    /// default claims through [`save_snapshot`](Self::save_snapshot) and then
    /// appends; stores override it to make both one atomic step.
    async fn claim_resume(&self, snapshot_id: &str, audit: Vec<AuditRecord>) -> Result<()> {
        self.save_snapshot(Some(snapshot_id), claim_update(snapshot_id)).await?;
        self.append_audit(audit).await
    }

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

fn unsupported(what: &str) -> Error {
    Error::FailedPrecondition(format!("this session store cannot {what}"))
}

/// The update that claims a snapshot for a resume: sets `resumedAt`, or
/// fails with `ABORTED` when it is already set (`NOT_FOUND` when missing).
pub fn claim_update(snapshot_id: &str) -> SnapshotUpdate {
    let id = snapshot_id.to_owned();
    Box::new(move |existing| {
        let Some(row) = existing else {
            return Err(Error::NotFound(format!("snapshot {id} not found")));
        };
        if row.resumed_at.is_some() {
            return Err(Error::AlreadyResumed(id.clone()));
        }
        let mut next = row.clone();
        next.resumed_at = Some(Utc::now());
        Ok(Some(next))
    })
}

/// Applies a [`SnapshotQuery`] to rows in memory: the reference semantics
/// that every store's `list_snapshots` must match.
pub fn filter_snapshots<'a>(rows: impl IntoIterator<Item = &'a Snapshot>, query: &SnapshotQuery) -> Vec<Snapshot> {
    let rows: Vec<&Snapshot> = rows.into_iter().collect();
    let mut out: Vec<Snapshot> = if query.waiting_only {
        let mut latest: std::collections::HashMap<&str, &Snapshot> = std::collections::HashMap::new();
        for s in &rows {
            let entry = latest.entry(s.session_id.as_str()).or_insert(s);
            if (s.created_at, &s.snapshot_id) > (entry.created_at, &entry.snapshot_id) {
                *entry = s;
            }
        }
        latest.into_values().filter(|s| query.matches_row(s)).cloned().collect()
    } else {
        rows.into_iter().filter(|s| query.matches_row(s)).cloned().collect()
    };
    out.sort_by(|a, b| (b.created_at, &b.snapshot_id).cmp(&(a.created_at, &a.snapshot_id)));
    out.truncate(query.limit());
    out.into_iter().map(Snapshot::as_read).collect()
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
