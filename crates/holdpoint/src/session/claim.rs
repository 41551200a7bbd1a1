//! The claim and lease rules of a resume (docs/reference.md §7, §8): who may claim
//! a paused snapshot, when a lapsed claim may be taken over, how a claim is
//! renewed, and the one id the outcome of a claimed resume is written under.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::snapshot::{HEARTBEAT_EXPIRY, Snapshot, SnapshotUpdate, lease_end};
use crate::error::{Error, Result};

/// The id of the snapshot that follows `snapshot_id` once a resume claimed
/// it: the same for every process that writes the resume's outcome (the
/// resume itself, or an operator settling its calls after its lease
/// lapsed), so the store's insert-if-absent lets only the first of them
/// write (see [`SessionStore::insert_snapshot`](super::SessionStore::insert_snapshot)). A UUID (version 8) made
/// of the first 16 bytes of SHA-256 over a fixed prefix and the id: as
/// unguessable as the id it follows.
///
/// The derivation is part of the stored format and must not change: a
/// claim made by one version may be settled (or its frozen resume wake up)
/// under another, after an upgrade or in a cluster upgraded one replica at
/// a time. With a new derivation the two would write under two ids, and
/// the paused snapshot would get two successors (or keep a detached
/// resume's unfinished pending row beside the settlement's outcome). A
/// resume derives it once per claim (its hold keeps it), not per use.
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

/// A resume's claim on the snapshot it resumes (docs/reference.md §7, §8).
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
/// carries the lease `held` that this resume set ([`Error::ClaimLost`]
/// when another process took the claim over).
pub fn renew_claim_update(snapshot_id: &str, held: DateTime<Utc>, until: DateTime<Utc>) -> SnapshotUpdate {
    let id = snapshot_id.to_owned();
    Box::new(move |existing| {
        let Some(row) = existing else {
            return Err(Error::NotFound(format!("snapshot {id} not found")));
        };
        if row.resume_lease_until != Some(held) {
            return Err(Error::ClaimLost(format!(
                "the claim on snapshot {id} was taken over; this resume no longer holds it"
            )));
        }
        let mut next = row.clone();
        next.resume_lease_until = Some(until);
        Ok(Some(next))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::mint_id;

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
