//! A resume's hold on its claim (docs/reference.md §7, §8): renewed while the turn
//! runs, and confirmed before the turn's outcome is written.
//!
//! A claim's lease lapses when its resume stops renewing it: the process
//! died, or froze (a paused VM, a stopped process, a store that refused
//! the renewals). An operator may then settle the calls in doubt, which
//! takes the claim over. A frozen resume that wakes up afterwards must not
//! write its outcome too: the session would get two successors of the
//! paused snapshot, and the later one would silently become the session's
//! latest. So the outcome is written only while the hold is confirmed, and
//! under the paused snapshot's [`successor_id`]: the store writes that id
//! once, so even a resume that froze between its confirmation and its
//! write cannot add a second successor (the settlement's write, or its
//! own, finds the id taken).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::session::{
    ResumeClaim, SessionStore, Snapshot, insert_refused, lease_end, renew_claim_update, successor_id,
};

/// One resume's claim on one snapshot, until a lease end it keeps renewing.
pub(crate) struct Hold {
    store: Arc<dyn SessionStore>,
    snapshot_id: String,
    /// [`successor_id`] of `snapshot_id`, derived once per claim (a hash:
    /// the outcome, a detach and an error message all name it).
    successor: String,
    lease: Duration,
    /// The claim took over a lapsed one (an operator settling calls in
    /// doubt).
    takeover: bool,
    state: Mutex<HoldState>,
}

struct HoldState {
    /// The lease end this resume last wrote.
    until: DateTime<Utc>,
    /// Another process took the claim over.
    lost: bool,
}

impl Hold {
    /// The hold of `claim`, just made; renewals extend it by `lease`.
    pub(crate) fn new(store: Arc<dyn SessionStore>, claim: &ResumeClaim, lease: Duration) -> Self {
        Hold {
            store,
            snapshot_id: claim.snapshot_id.clone(),
            successor: successor_id(&claim.snapshot_id),
            lease,
            takeover: claim.takeover,
            state: Mutex::new(HoldState {
                until: claim.lease_until,
                lost: false,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HoldState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Renews the lease every third of it, for as long as it is polled.
    /// Ends when another process took the claim over, saying so; a renewal
    /// the store refuses for another reason is tried again at the next turn
    /// of the loop.
    pub(crate) async fn keep(&self) {
        let every = (self.lease / 3).max(Duration::from_millis(10));
        loop {
            tokio::time::sleep(every).await;
            match self.renew().await {
                Ok(()) => {}
                Err(e @ Error::ClaimLost(_)) => {
                    tracing::error!(snapshot_id = %self.snapshot_id, "{e}");
                    return;
                }
                Err(e) => tracing::warn!(
                    snapshot_id = %self.snapshot_id,
                    error = %e,
                    "could not renew a resume's claim; retrying"
                ),
            }
        }
    }

    /// Checks, before the turn's outcome is written, that the claim is
    /// still this resume's: at once when more than a third of the lease is
    /// left (a takeover needs the lease to have lapsed), else by renewing
    /// it. [`Error::ClaimLost`] when the claim was taken over; the store's
    /// error when it cannot say.
    pub(crate) async fn confirm(&self) -> Result<()> {
        {
            let state = self.state();
            if state.lost {
                return Err(self.taken_over());
            }
            let left = (state.until - Utc::now()).to_std().unwrap_or_default();
            if left > self.lease / 3 {
                return Ok(());
            }
        }
        self.renew().await
    }

    /// Moves the lease end to a full lease from now, if the row still
    /// carries the end this resume last wrote.
    async fn renew(&self) -> Result<()> {
        let held = self.state().until;
        let until = lease_end(Utc::now(), self.lease);
        let update = renew_claim_update(&self.snapshot_id, held, until);
        match self.store.save_snapshot(Some(&self.snapshot_id), update).await {
            Ok(_) => {
                self.state().until = until;
                Ok(())
            }
            Err(Error::ClaimLost(_) | Error::NotFound(_)) => {
                self.state().lost = true;
                Err(self.taken_over())
            }
            Err(e) => Err(e),
        }
    }

    /// Whether the claim took over a lapsed one (a settlement): its outcome
    /// may replace the unfinished row of the resume it took over.
    pub(crate) fn takes_over(&self) -> bool {
        self.takeover
    }

    /// The id the turn's outcome is written under.
    pub(crate) fn successor(&self) -> &str {
        &self.successor
    }

    /// Writes the turn's outcome `row` under [`successor`](Self::successor):
    /// only if no row has that id, or, for a settlement, if the row there
    /// is the unfinished pending row of the detached resume whose lapsed
    /// claim it took over (that process died), which the settlement's
    /// outcome replaces. Anything else there is another writer's outcome:
    /// [`Error::ClaimLost`], nothing written.
    pub(crate) async fn write_outcome(&self, row: Snapshot) -> Result<Snapshot> {
        let id = self.successor.clone();
        let written = if self.takeover {
            let (replacing, parent) = (id.clone(), self.snapshot_id.clone());
            self.store
                .save_snapshot(
                    Some(&id),
                    Box::new(move |existing| match existing {
                        Some(old) if !old.is_unfinished_successor_of(&parent) => Err(insert_refused(&replacing)),
                        _ => Ok(Some(row)),
                    }),
                )
                .await
                .and_then(|saved| saved.ok_or_else(|| Error::Internal(format!("snapshot {id} was not written"))))
        } else {
            self.store.insert_snapshot(&id, row).await
        };
        written.map_err(|e| self.outcome_refused(e))
    }

    /// What writing the outcome under [`successor`](Self::successor) failed
    /// with, said for the caller: an id already taken means the claim was
    /// taken over and its outcome written first.
    pub(crate) fn outcome_refused(&self, error: Error) -> Error {
        match error {
            Error::AlreadyExists(_) => Error::ClaimLost(format!(
                "the claim on snapshot {} was taken over and its outcome written first (snapshot {}); \
                 this resume's outcome is not saved",
                self.snapshot_id,
                self.successor()
            )),
            other => other,
        }
    }

    fn taken_over(&self) -> Error {
        Error::ClaimLost(format!(
            "the claim on snapshot {} was taken over (its lease lapsed and the calls were settled as in doubt); \
             this resume's outcome is not saved",
            self.snapshot_id
        ))
    }
}
