//! Pruning: deleting sessions that are over, once they are old enough
//! (docs/reference.md §11.4). The request and its outcome, and the rule
//! every store applies to a session's latest snapshot.

use chrono::{DateTime, Utc};

use super::snapshot::{STATE_CLAIM_PREFIX, Snapshot, SnapshotStatus};
use crate::error::{Error, Result};

/// The most sessions one [`PruneStore::prune_sessions`](super::PruneStore::prune_sessions)
/// call examines.
pub const MAX_PRUNE_BATCH: usize = 10_000;

/// One step of a prune: which sessions to examine and what to delete.
///
/// A call examines up to `batch` sessions in session-id order, after
/// `after` when given, and deletes those that are over and older than
/// `older_than`; [`PruneOutcome::next`] resumes the walk. Each call is one
/// short transaction, so a prune can run against a live store in steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneRequest {
    /// Sessions whose latest snapshot last changed before this are old
    /// enough.
    pub older_than: DateTime<Utc>,
    /// Also delete the sessions' audit records.
    pub audit: bool,
    /// Count what would be deleted; delete nothing.
    pub dry_run: bool,
    /// How many sessions to examine (1 ..= [`MAX_PRUNE_BATCH`]).
    pub batch: usize,
    /// Examine sessions whose id sorts after this one (bytewise).
    pub after: Option<String>,
}

impl PruneRequest {
    /// A request that examines the first `batch` sessions and deletes
    /// their snapshots (not their audit records) when old enough.
    pub fn new(older_than: DateTime<Utc>, batch: usize) -> Self {
        PruneRequest {
            older_than,
            audit: false,
            dry_run: false,
            batch,
            after: None,
        }
    }

    /// `INVALID_ARGUMENT` unless `batch` is within 1 ..= [`MAX_PRUNE_BATCH`].
    pub fn check(&self) -> Result<()> {
        if self.batch == 0 || self.batch > MAX_PRUNE_BATCH {
            return Err(Error::InvalidArgument(format!(
                "a prune examines 1 to {MAX_PRUNE_BATCH} sessions per call, not {}",
                self.batch
            )));
        }
        Ok(())
    }
}

/// What one prune call did (or, in a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneOutcome {
    /// Sessions examined.
    pub examined: u64,
    /// Sessions deleted.
    pub sessions: u64,
    /// Snapshots deleted.
    pub snapshots: u64,
    /// Audit records deleted.
    pub audit_records: u64,
    /// The last session examined when more may follow: the `after` of the
    /// next call. `None` once the walk reached the end.
    pub next: Option<String>,
}

impl PruneOutcome {
    /// Adds `other`'s counts to these (the walk's totals).
    pub fn add(&mut self, other: &PruneOutcome) {
        self.examined += other.examined;
        self.sessions += other.sessions;
        self.snapshots += other.snapshots;
        self.audit_records += other.audit_records;
    }
}

/// Whether a session whose latest snapshot is this one may be pruned: the
/// snapshot is settled (completed, failed or aborted), not stopped at a
/// hold (an interrupted turn waits for an answer, or its resume is under
/// way or in doubt), last changed before `older_than`, and the session is
/// not a one-time claim's marker (those guard signed client state against
/// replay for as long as that state may come back).
pub fn prunable(
    session_id: &str,
    status: SnapshotStatus,
    interrupted: bool,
    updated_at: DateTime<Utc>,
    older_than: DateTime<Utc>,
) -> bool {
    status.is_terminal() && !interrupted && updated_at < older_than && !session_id.starts_with(STATE_CLAIM_PREFIX)
}

/// [`prunable`] for a decoded snapshot (the latest of its session).
pub fn prunable_snapshot(latest: &Snapshot, older_than: DateTime<Utc>) -> bool {
    prunable(
        &latest.session_id,
        latest.status,
        latest.finish_reason == Some(crate::model::FinishReason::Interrupted),
        latest.updated_at,
        older_than,
    ) && !latest.is_state_claim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionState;

    fn row(status: SnapshotStatus, interrupted: bool, age_days: i64) -> Snapshot {
        let mut s = Snapshot::new(SessionState::new("s1"));
        s.status = status;
        s.finish_reason = interrupted.then_some(crate::model::FinishReason::Interrupted);
        s.updated_at = Utc::now() - chrono::Duration::days(age_days);
        s
    }

    #[test]
    fn only_old_settled_sessions_not_at_a_hold_are_prunable() {
        let cutoff = Utc::now() - chrono::Duration::days(30);
        assert!(prunable_snapshot(&row(SnapshotStatus::Completed, false, 31), cutoff));
        assert!(prunable_snapshot(&row(SnapshotStatus::Failed, false, 31), cutoff));
        assert!(prunable_snapshot(&row(SnapshotStatus::Aborted, false, 31), cutoff));
        assert!(!prunable_snapshot(&row(SnapshotStatus::Completed, false, 29), cutoff));
        assert!(!prunable_snapshot(&row(SnapshotStatus::Completed, true, 31), cutoff));
        assert!(!prunable_snapshot(&row(SnapshotStatus::Pending, false, 31), cutoff));
        assert!(!prunable_snapshot(&row(SnapshotStatus::Aborting, false, 31), cutoff));
        let mut marker = row(SnapshotStatus::Completed, false, 31);
        marker.session_id = format!("{STATE_CLAIM_PREFIX}k");
        assert!(!prunable_snapshot(&marker, cutoff));
    }

    #[test]
    fn a_batch_out_of_range_is_refused() {
        let now = Utc::now();
        assert!(PruneRequest::new(now, 0).check().is_err());
        assert!(PruneRequest::new(now, MAX_PRUNE_BATCH + 1).check().is_err());
        assert!(PruneRequest::new(now, 1).check().is_ok());
    }
}
