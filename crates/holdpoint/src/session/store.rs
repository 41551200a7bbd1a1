//! The `SessionStore` trait: where server-managed agents keep snapshots.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;

use super::audit::{AuditQuery, AuditRecord, SnapshotQuery};
use super::snapshot::{HEARTBEAT_EXPIRY, Snapshot, SnapshotStatus};
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

    /// The exactly-once guard of a resume (SPEC §9.1): applies
    /// [`claim_update`] to the claimed snapshot (failing with `ABORTED`,
    /// "already resumed", when it was) and appends `audit` — in one
    /// transaction in durable stores. The default claims through
    /// [`save_snapshot`](Self::save_snapshot) and then appends; stores
    /// override it to make both one atomic step.
    async fn claim_resume(&self, claim: ResumeClaim, audit: Vec<AuditRecord>) -> Result<()> {
        let id = claim.snapshot_id.clone();
        self.save_snapshot(Some(&id), claim_update(claim)).await?;
        self.append_audit(audit).await
    }

    /// Writes `row` as a new row under `snapshot_id`, only if no row has
    /// that id: `FAILED_PRECONDITION` (nothing written) otherwise. The
    /// outcome of a claimed resume is written this way, under the
    /// [`successor_id`] of the snapshot it resumed, so a paused snapshot gets
    /// at most one successor even when a resume that froze past its lease
    /// wakes up after an operator settled its calls (SPEC §9.3). The
    /// default runs [`insert_update`] through
    /// [`save_snapshot`](Self::save_snapshot), which every store makes
    /// atomic; stores may override it with a cheaper insert-if-absent.
    async fn insert_snapshot(&self, snapshot_id: &str, row: Snapshot) -> Result<Snapshot> {
        self.save_snapshot(Some(snapshot_id), insert_update(snapshot_id, row))
            .await?
            .ok_or_else(|| Error::Internal(format!("snapshot {snapshot_id} was not written")))
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

    /// How many sessions wait for an answer — those `list_snapshots` lists
    /// with `waiting_only`, of `agent` when given — and when the oldest of
    /// their waiting snapshots was written. The default lists them all;
    /// stores override it with a count from their index of waiting rows,
    /// which is what a metrics scrape can afford to run.
    async fn count_waiting(&self, agent: Option<&str>) -> Result<WaitingCount> {
        let query = SnapshotQuery {
            agent: agent.map(str::to_owned),
            waiting_only: true,
            limit: Some(usize::MAX),
            ..SnapshotQuery::default()
        };
        let rows = self.list_snapshots(&query).await?;
        Ok(WaitingCount::of(rows.iter()))
    }
}

/// What [`SessionStore::count_waiting`] counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitingCount {
    /// How many sessions wait for an answer.
    pub count: u64,
    /// When the oldest of their waiting snapshots was written (`None` when
    /// none waits).
    pub oldest: Option<DateTime<Utc>>,
}

impl WaitingCount {
    /// The count of `waiting` (the latest, waiting snapshot of each
    /// session, as `waiting_only` lists them).
    pub fn of<'a>(waiting: impl IntoIterator<Item = &'a Snapshot>) -> Self {
        waiting
            .into_iter()
            .fold(WaitingCount::default(), |acc, s| WaitingCount {
                count: acc.count + 1,
                oldest: Some(acc.oldest.map_or(s.created_at, |o| o.min(s.created_at))),
            })
    }
}

fn unsupported(what: &str) -> Error {
    Error::FailedPrecondition(format!("this session store cannot {what}"))
}

/// The update behind [`SessionStore::insert_snapshot`]: writes `row` when
/// there is no row yet, else fails with [`insert_refused`].
pub fn insert_update(snapshot_id: &str, row: Snapshot) -> SnapshotUpdate {
    let id = snapshot_id.to_owned();
    Box::new(move |existing| match existing {
        Some(_) => Err(insert_refused(&id)),
        None => Ok(Some(row)),
    })
}

/// The error of an [`insert_snapshot`](SessionStore::insert_snapshot)
/// whose id is taken (`FAILED_PRECONDITION`).
pub fn insert_refused(snapshot_id: &str) -> Error {
    Error::FailedPrecondition(format!("snapshot {snapshot_id} already exists; nothing was written"))
}

/// The id of the snapshot that follows `snapshot_id` once a resume claimed
/// it: the same for every process that writes the resume's outcome (the
/// resume itself, or an operator settling its calls after its lease
/// lapsed), so the store's insert-if-absent lets only the first of them
/// write (see [`SessionStore::insert_snapshot`]). A UUID (version 8) made
/// of the first 16 bytes of SHA-256 over a fixed prefix and the id: as
/// unguessable as the id it follows.
pub fn successor_id(snapshot_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(b"holdpoint successor of snapshot\0")
        .chain_update(snapshot_id.as_bytes())
        .finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid().to_string()
}

/// A resume's claim on the snapshot it resumes (SPEC §9.1, §9.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeClaim {
    /// The interrupted snapshot being resumed.
    pub snapshot_id: String,
    /// Until when the claim holds unless renewed (written to
    /// [`Snapshot::resume_lease_until`]).
    pub lease_until: DateTime<Utc>,
    /// Take over a claim whose lease lapsed instead of making a first one:
    /// an operator settling calls left in doubt by a dead process.
    pub takeover: bool,
}

impl ResumeClaim {
    /// A first claim on `snapshot_id`, holding for [`HEARTBEAT_EXPIRY`].
    pub fn new(snapshot_id: impl Into<String>) -> Self {
        ResumeClaim {
            snapshot_id: snapshot_id.into(),
            lease_until: lease_end(Utc::now(), HEARTBEAT_EXPIRY),
            takeover: false,
        }
    }

    /// Makes the claim hold for `lease` from now unless renewed.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease_until = lease_end(Utc::now(), lease);
        self
    }

    /// Makes this the takeover of a lapsed claim.
    pub fn takeover(mut self) -> Self {
        self.takeover = true;
        self
    }
}

/// `now + lease`, saturating.
pub fn lease_end(now: DateTime<Utc>, lease: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(lease)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// Checks `claim` against the row it claims and applies it in place. A
/// first claim sets `resumedAt` and the lease, or fails with `ABORTED`
/// ("already resumed") when the snapshot was claimed before. A takeover
/// needs a claim whose lease lapsed (else `FAILED_PRECONDITION`) and
/// renews it. On an error the row is unchanged.
pub fn apply_claim(row: &mut Snapshot, claim: &ResumeClaim) -> Result<()> {
    apply_claim_to(&mut row.resumed_at, &mut row.resume_lease_until, claim)
}

/// [`apply_claim`] on the two claim fields of a row (`resumedAt` and
/// `resumeLeaseUntil`), for stores that keep them apart from the document.
pub fn apply_claim_to(
    resumed_at: &mut Option<DateTime<Utc>>,
    lease_until: &mut Option<DateTime<Utc>>,
    claim: &ResumeClaim,
) -> Result<()> {
    let id = &claim.snapshot_id;
    let now = Utc::now();
    let lease_end = resumed_at.map(|at| lease_until.unwrap_or_else(|| lease_end(at, HEARTBEAT_EXPIRY)));
    match (lease_end, claim.takeover) {
        (Some(_), false) => return Err(Error::AlreadyResumed(id.clone())),
        (None, true) => {
            return Err(Error::FailedPrecondition(format!(
                "snapshot {id} is not in doubt: no resume claimed it; resume it the usual way"
            )));
        }
        (Some(end), true) if end > now => {
            return Err(Error::FailedPrecondition(format!(
                "snapshot {id} is not in doubt: the resume that claimed it still holds its claim until {}; \
                 settle it only once that process has stopped renewing it",
                end.to_rfc3339()
            )));
        }
        _ => {}
    }
    *resumed_at = Some(resumed_at.unwrap_or(now));
    *lease_until = Some(claim.lease_until);
    Ok(())
}

/// The update that claims a snapshot for a resume ([`apply_claim`] on a
/// copy of the row); a missing snapshot is `NOT_FOUND`.
pub fn claim_update(claim: ResumeClaim) -> SnapshotUpdate {
    Box::new(move |existing| {
        let Some(row) = existing else {
            return Err(Error::NotFound(format!("snapshot {} not found", claim.snapshot_id)));
        };
        let mut next = row.clone();
        apply_claim(&mut next, &claim)?;
        Ok(Some(next))
    })
}

/// The update that renews a resume's claim until `until`, if the row still
/// carries the lease `held` that this resume set (`FAILED_PRECONDITION`
/// when another process took the claim over).
pub fn renew_claim_update(snapshot_id: &str, held: DateTime<Utc>, until: DateTime<Utc>) -> SnapshotUpdate {
    let id = snapshot_id.to_owned();
    Box::new(move |existing| {
        let Some(row) = existing else {
            return Err(Error::NotFound(format!("snapshot {id} not found")));
        };
        if row.resume_lease_until != Some(held) {
            return Err(Error::FailedPrecondition(format!(
                "the claim on snapshot {id} was taken over; this resume no longer holds it"
            )));
        }
        let mut next = row.clone();
        next.resume_lease_until = Some(until);
        Ok(Some(next))
    })
}

/// Applies a [`SnapshotQuery`] to rows in memory: the reference semantics
/// that every store's `list_snapshots` must match.
pub fn filter_snapshots<'a>(rows: impl IntoIterator<Item = &'a Snapshot>, query: &SnapshotQuery) -> Vec<Snapshot> {
    let rows: Vec<&Snapshot> = rows.into_iter().collect();
    let mut out: Vec<Snapshot> = if query.latest_only() {
        let mut sessions: std::collections::HashMap<&str, Vec<&Snapshot>> = std::collections::HashMap::new();
        for s in &rows {
            sessions.entry(s.session_id.as_str()).or_default().push(s);
        }
        let mut out = Vec::new();
        for mut session in sessions.into_values() {
            session.sort_by(|a, b| (b.created_at, &b.snapshot_id).cmp(&(a.created_at, &a.snapshot_id)));
            out.extend(
                latest_of(&session, !query.waiting_only)
                    .filter(|s| query.matches_row(s))
                    .cloned(),
            );
        }
        out
    } else {
        rows.into_iter().filter(|s| query.matches_row(s)).cloned().collect()
    };
    out.sort_by(|a, b| (b.created_at, &b.snapshot_id).cmp(&(a.created_at, &a.snapshot_id)));
    out.truncate(query.limit());
    out.into_iter().map(Snapshot::as_read).collect()
}

/// The rows of one session (newest first) that count as its latest: the
/// newest, and with `past_unfinished`, also an older row whose every newer
/// row is an unfinished pending row that continued it (see
/// [`Snapshot::is_unfinished_successor_of`]).
fn latest_of<'a>(session: &[&'a Snapshot], past_unfinished: bool) -> impl Iterator<Item = &'a Snapshot> {
    let mut out = Vec::new();
    // The parent every row seen so far continued, while they all are
    // unfinished pending rows.
    let mut newer_continue: Option<&str> = None;
    for (n, s) in session.iter().enumerate() {
        if n == 0 || newer_continue == Some(s.snapshot_id.as_str()) {
            out.push(*s);
        }
        if !past_unfinished {
            break;
        }
        let continues = s
            .parent_id
            .as_deref()
            .filter(|parent| s.is_unfinished_successor_of(parent));
        match (n, continues) {
            (0, Some(parent)) => newer_continue = Some(parent),
            (_, Some(parent)) if newer_continue == Some(parent) => {}
            _ => break,
        }
    }
    out.into_iter()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successor_ids_are_fixed_per_snapshot_distinct_and_uuids() {
        let a = mint_id();
        let b = mint_id();
        assert_eq!(successor_id(&a), successor_id(&a));
        assert_ne!(successor_id(&a), successor_id(&b));
        assert_ne!(successor_id(&a), a);
        let parsed = uuid::Uuid::parse_str(&successor_id(&a)).unwrap();
        assert_eq!(parsed.get_version_num(), 8);
        assert_eq!(parsed.to_string(), successor_id(&a));
        // The successor of a successor is new again.
        assert_ne!(successor_id(&successor_id(&a)), successor_id(&a));
    }
}
