//! One stored row of the in-memory store: as saved, or packed (see
//! [`Packed`]) when settled.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::packed::Packed;
use crate::error::Result;
use crate::session::claim::{ResumeClaim, apply_claim_to};
use crate::session::snapshot::{Snapshot, SnapshotStatus};

/// One stored row.
pub(super) enum Stored {
    /// The row as saved.
    Live(Box<Snapshot>),
    /// A settled row kept as [`Packed`]: a completed row other than a
    /// waiting one, when saved; a row saved waiting for an answer (still
    /// waiting, or claimed since) once it left the window of the newest
    /// ([`HOT_WAITING`](super::rows::HOT_WAITING)). A paused session may
    /// wait for days, and a finished one is read rarely: the text is a
    /// fraction of the decoded tree (one allocation instead of dozens). A
    /// claim sets `resumed_at` here, without decoding; reads decode a copy.
    Packed(Box<Packed>),
}

impl Stored {
    /// `row` as stored: packed when it is completed and not waiting (a
    /// finished turn, or a claimed hold) and packs, else as it is.
    pub(super) fn settled(row: &Snapshot, session_id: Arc<str>, agent: Option<Arc<str>>) -> Stored {
        if row.status == SnapshotStatus::Completed
            && !row.is_waiting()
            && let Some(packed) = Packed::of(row, session_id, agent)
        {
            return Stored::Packed(Box::new(packed));
        }
        Stored::Live(Box::new(row.clone()))
    }

    /// Packs a live row saved waiting for an answer — still waiting, or
    /// claimed since — that decodes back to itself; leaves any other row
    /// as it is.
    pub(super) fn pack(&mut self, session_id: Arc<str>, agent: Option<Arc<str>>) {
        let Stored::Live(row) = self else { return };
        let answered = row.status == SnapshotStatus::Completed && row.resumed_at.is_some();
        if !(row.is_waiting() || answered) {
            return;
        }
        if let Some(packed) = Packed::of(row, session_id, agent) {
            *self = Stored::Packed(Box::new(packed));
        }
    }

    pub(super) fn created_at(&self) -> DateTime<Utc> {
        match self {
            Stored::Live(row) => row.created_at,
            Stored::Packed(packed) => packed.created_at,
        }
    }

    /// Whether the row waits for an answer and was written by `agent` when
    /// one is given.
    pub(super) fn waits_for(&self, agent: Option<&str>) -> bool {
        match self {
            Stored::Live(row) => row.is_waiting() && agent.is_none_or(|a| row.agent.as_deref() == Some(a)),
            Stored::Packed(packed) => packed.is_waiting() && agent.is_none_or(|a| packed.agent.as_deref() == Some(a)),
        }
    }

    /// The status as read now (a packed row is completed: it does not
    /// expire).
    pub(super) fn read_status(&self) -> SnapshotStatus {
        match self {
            Stored::Live(row) => row.as_read_status(),
            Stored::Packed(packed) => packed.status,
        }
    }

    /// A copy of the row.
    pub(super) fn to_snapshot(&self, id: &str) -> Result<Snapshot> {
        match self {
            Stored::Live(row) => Ok((**row).clone()),
            Stored::Packed(packed) => packed.to_snapshot(id),
        }
    }

    /// Applies a resume's claim (the exactly-once mark, docs/reference.md §7, and its
    /// lease, §8) in place, without decoding a packed row.
    pub(super) fn claim(&mut self, claim: &ResumeClaim) -> Result<()> {
        match self {
            Stored::Live(row) => apply_claim_to(&mut row.resumed_at, &mut row.resume_lease_until, claim),
            Stored::Packed(packed) => apply_claim_to(&mut packed.resumed_at, &mut packed.resume_lease_until, claim),
        }
    }
}

/// The status of a row as read now.
pub(super) trait ReadStatus {
    fn as_read_status(&self) -> SnapshotStatus;
}

impl ReadStatus for Snapshot {
    fn as_read_status(&self) -> SnapshotStatus {
        self.read_status(chrono::Utc::now())
    }
}
