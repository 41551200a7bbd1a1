//! Partial approvals of a held call (docs/reference.md §10.7): who approved
//! a hold whose rule needs more than one approval, kept on the paused
//! snapshot itself so every store keeps them durably, and written by a
//! compare-and-set that succeeds only while the hold still waits.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::audit::AuditRecord;
use super::capability::AuditStore;
use crate::error::{Error, Result};

/// One recorded approval of one paused call that waits for more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldApproval {
    /// The held tool.
    pub tool: String,
    /// The call's ref.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Who approved.
    pub actor: String,
    /// When.
    pub at: DateTime<Utc>,
}

impl HoldApproval {
    /// Whether this approval is of the call `tool`/`reference`.
    pub fn is_of(&self, tool: &str, reference: Option<&str>) -> bool {
        self.tool == tool && self.reference.as_deref() == reference
    }
}

/// What [`record_approval`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalTally {
    /// The approvals of the call now recorded (oldest first), not counting
    /// one that completes the quorum (that one claims the hold instead).
    pub approvals: Vec<HoldApproval>,
    /// Whether this approval was new (the same actor approving twice
    /// counts once).
    pub counted: bool,
    /// Whether this approval completes the quorum: the caller now resumes
    /// the hold, whose claim lets exactly one completing approval through.
    pub complete: bool,
}

/// Records `approval` on the paused snapshot `snapshot_id` when it leaves
/// the call short of `quorum` distinct approvals, with its `audit` records
/// in the same store step ([`AuditStore::save_snapshot_audited`]): both
/// are written or neither. When it completes the quorum, or the actor had
/// approved before, nothing is written and the tally says so.
///
/// A compare-and-set on the row: refused with `ABORTED` ("already
/// resumed") once a resume (or a new message) claimed the snapshot, and
/// `NOT_FOUND` for a missing row; two approvals racing are applied one
/// after the other, each seeing the other's.
pub async fn record_approval(
    store: &dyn AuditStore,
    snapshot_id: &str,
    approval: HoldApproval,
    quorum: u32,
    audit: Vec<AuditRecord>,
) -> Result<ApprovalTally> {
    let seen: Arc<Mutex<Option<ApprovalTally>>> = Arc::default();
    let out = Arc::clone(&seen);
    let id = snapshot_id.to_owned();
    store
        .save_snapshot_audited(
            snapshot_id,
            Box::new(move |existing| {
                let Some(row) = existing else {
                    return Err(Error::NotFound(format!("snapshot {id} not found")));
                };
                if row.resumed_at.is_some() || !row.is_waiting() {
                    return Err(Error::AlreadyResumed(id));
                }
                let mut approvals: Vec<HoldApproval> = row
                    .approvals
                    .iter()
                    .filter(|a| a.is_of(&approval.tool, approval.reference.as_deref()))
                    .cloned()
                    .collect();
                let counted = !approvals.iter().any(|a| a.actor == approval.actor);
                let distinct = approvals.len() + usize::from(counted);
                let complete = distinct >= usize::try_from(quorum).unwrap_or(usize::MAX);
                let write = counted && !complete;
                let next = write.then(|| {
                    let mut next = row.clone();
                    next.approvals.push(approval.clone());
                    next
                });
                if write {
                    approvals.push(approval);
                }
                *out.lock().unwrap_or_else(PoisonError::into_inner) = Some(ApprovalTally {
                    approvals,
                    counted,
                    complete,
                });
                Ok(next)
            }),
            audit,
        )
        .await?;
    let tally = seen.lock().unwrap_or_else(PoisonError::into_inner).take();
    tally.ok_or_else(|| Error::Internal(format!("the approval of snapshot {snapshot_id} was not applied")))
}
